"""Seed 003's QoS data set and its read queries Q1-Q5 (tables 5.1-5.5), as data.

Owns what every reader of the QoS data shares: `tracehouse bench engines` (DuckDB vs Spark), the
store's tests (read cache, tag columns, the Spark engine) and the benchmark suite's read
experiment (bench-suite: `tracehouse bench all`):

- `dataset(scale)`: the seed's uniform data set (section 4.3, table 4.3): 556 measurement
  runs = customers (1 run of 600,000 rows, 5 of 86,400, 50 of 10,000, 500 of 1,000:
  2,032,000 rows), each row the 13 measurement-id parameters and the 48 results, one row
  per second of its run. Random values except the incremented ones: `customer_id` is the
  run's number, `ul_delay`, `dl_delay`, `ul_dupl`, `dl_dupl` count the row's index within
  its run, so every case returns the seed's row count (checked by the tests). One wrinkle
  the printed tables force: Q5 case 4 (`ul_delay < 100 AND ul_dupl > 50`) returns 27,800
  rows in the seed, but with `ul_dupl` equal to the index it returns 27,244 while every
  other case fits; so the row at index 50 of each run carries `ul_dupl` = 51 (one
  duplicate value per run), the only integer assignment that fits all 36 cases.
- `CASES`: every case of tables 5.1-5.5 (Q3's 16: query cache on/off x one table/all
  tables x four limits), with the seed's row count at scale 1.
- `LAYOUTS` and `sql(case, layout)`: the seed's three schemas (schema 1: one table;
  schema 2: measurement ids + average stats; schema 3: ids + main stats + secondary
  stats) and tracehouse's layout (the ids once, as producers with typed attributes, which
  the view carries as tag columns; the results as one event type), each case as a SELECT of
  every column the seed fetched. Q3's "one table" cases fetch what schema 3 keeps in the table
  holding `ul_dupl` (secondaryStats: the time, the measurement and 30 results, 32 columns) from
  every layout that has it: tracehouse's one event type selects those columns. When it fetched
  all 51 instead, Q3.4 and Q3.12 (278,000 rows) lost to schema 3 by their bytes; the same
  question, interleaved in one process (medians of 9, load 3-4): Q3.4 189 ms (51 columns) and
  127 ms (32) against schema 3's 157, Q3.12 201 and 122 against 144.
- `schema_tables(data, layout)`: the data set split into a layout's tables, and
  `ddl(layout, dialect)` their CREATE TABLE statements with the seed's keys.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

# (runs, rows per run): table 4.3
RUNS = ((1, 600_000), (5, 86_400), (50, 10_000), (500, 1_000))
TOTAL_ROWS = sum(n * r for n, r in RUNS)  # 2,032,000
T0_NS = 1_400_000_000 * 10**9  # runs start a minute apart from here (sampling time 1 s, as the seed assumed)

ID_COLUMNS = (
    "customer_id",
    "user_id",
    "controller_id",
    "service_id",
    "service_map_id_addr",
    "service_map_id_port",
    "caller_map_id_addr",
    "caller_map_id_port",
    "service2_map_id_addr",
    "service2_map_id_port",
    "measurement_id",
    "measurement_start_time",
    "measurement_end_time",
)
INCREMENTED = ("ul_delay", "dl_delay", "ul_dupl", "dl_dupl")


def result_params() -> list[tuple[str, str, float, float]]:
    """The 48 result parameters (name, type, low, high): the load generator's, one source."""
    from .. import _core

    return [tuple(p) for p in _core.QOS_RESULT_PARAMS]


def main_columns() -> tuple[str, ...]:
    """Schema 3's mainStats: the parameters the seed calls most used (delay, jitter, loss, load, throughput)."""
    names = [p[0] for p in result_params()]
    first = names[: names.index("dl_pk_loss") + 1]
    return tuple(first + ["ul_load", "dl_load", "ul_throughput", "dl_throughput", "rtt", "mos"])


def secondary_columns() -> tuple[str, ...]:
    """Schema 3's secondaryStats: the 30 results not in mainStats, in the load generator's order."""
    main = set(main_columns())
    return tuple(p[0] for p in result_params() if p[0] not in main)


def runs(scale: float = 1.0) -> list[tuple[int, int]]:
    """(customer_id, rows) of every run; `scale` < 1 shrinks each run (at least 10 rows)."""
    out, cid = [], 1
    for n, rows in RUNS:
        for _ in range(n):
            out.append((cid, rows if scale == 1 else max(10, int(round(rows * scale)))))
            cid += 1
    return out


def dataset(scale: float = 1.0, *, seed: int = 42, columns: tuple[str, ...] | None = None) -> pa.Table:
    """The uniform data set as one Arrow table: 13 id columns, `ts` (ns), 48 results.

    Vectorised (numpy): 2,032,000 rows x 62 columns take about a second. `columns`
    limits the table to those (the incremented ones are cheap; tests use them).
    """
    rr = runs(scale)
    lens = np.array([r for _, r in rr], dtype=np.int64)
    cust = np.repeat(np.array([c for c, _ in rr], dtype=np.int64), lens)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    index = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(starts, lens)
    want = (lambda c: True) if columns is None else (lambda c: c in columns)
    rng = np.random.default_rng(seed)
    cols: dict[str, np.ndarray] = {}
    run_start = T0_NS + (cust - 1) * 60 * 10**9
    if want("customer_id"):
        cols["customer_id"] = cust
    # The other id parameters are constant within a run (a measurement's identity).
    per_run = len(rr)
    ids = {
        "user_id": rng.integers(1, 10_000, per_run),
        "controller_id": rng.integers(1, 100, per_run),
        "service_id": rng.integers(1, 1_000, per_run),
        "service_map_id_addr": rng.integers(0, 2**31, per_run),
        "service_map_id_port": rng.integers(1, 65_536, per_run),
        "caller_map_id_addr": rng.integers(0, 2**31, per_run),
        "caller_map_id_port": rng.integers(1, 65_536, per_run),
        "service2_map_id_addr": rng.integers(0, 2**31, per_run),
        "service2_map_id_port": rng.integers(1, 65_536, per_run),
        "measurement_id": np.arange(1, per_run + 1),
    }
    for name, v in ids.items():
        if want(name):
            cols[name] = np.repeat(v.astype(np.int64), lens)
    if want("measurement_start_time"):
        cols["measurement_start_time"] = run_start / 1e9
    if want("measurement_end_time"):
        cols["measurement_end_time"] = (run_start + np.repeat(lens, lens) * 10**9) / 1e9
    if want("ts"):
        cols["ts"] = run_start + index * 10**9
    dupl = index.copy()
    dupl[index == 50] = 51  # see the module's docstring: Q5 case 4
    inc = {
        "ul_delay": index.astype(np.float64),
        "dl_delay": index.astype(np.float64),
        "ul_dupl": dupl,
        "dl_dupl": index.copy(),
    }
    n = len(index)
    for name, typ, lo, hi in result_params():
        if not want(name):
            continue
        if name in inc:
            v = inc[name]
            cols[name] = v.astype(np.float64) if typ == "float64" else v.astype(np.int64)
        elif typ == "float64":
            # on a 1/1024 grid: sums are exact, so engines adding in any order agree to the bit
            cols[name] = np.round(rng.uniform(lo, hi, n) * 1024) / 1024
        else:
            cols[name] = rng.integers(int(lo), int(hi) + 1, n)
    return pa.table(cols)


# -- the cases of tables 5.1-5.5 ---------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One test case: `query` (1-5), `case` (its number in the seed's table), the predicate
    over the seed's column names, `tables` ("all" or "one": Q3's fetch from the table holding
    the constrained column only), `query_cache` (Q3: the seed's MySQL query cache on/off), and
    the row count the seed's table prints."""

    query: int
    case: int
    where: str
    rows: int
    tables: str = "all"
    query_cache: bool = False

    @property
    def name(self) -> str:
        return f"Q{self.query}.{self.case}"


def _cases() -> tuple[Case, ...]:
    out = [
        Case(1, i + 1, f"customer_id = {x}", r)
        for i, (x, r) in enumerate([(60, 1_000), (10, 10_000), (6, 86_400), (1, 600_000)])
    ]
    lim = [(1, 556), (5, 2_780), (50, 27_800), (500, 278_000)]
    out += [Case(2, i + 1, f"ul_delay < {x}", r) for i, (x, r) in enumerate(lim)]
    k = 1
    for cache in (True, False):
        for tables in ("one", "all"):
            for x, r in lim:
                out.append(Case(3, k, f"ul_dupl < {x}", r, tables, cache))
                k += 1
    out += [
        Case(4, i + 1, w, r)
        for i, (w, r) in enumerate(
            [
                ("customer_id = 60 AND ul_delay < 500", 500),
                ("customer_id = 10 AND ul_delay < 5000", 5_000),
                ("customer_id = 6 AND ul_delay < 50000", 50_000),
                ("customer_id > 56 AND ul_delay < 100", 50_000),
                ("customer_id < 6 AND ul_delay < 50000", 250_000),
            ]
        )
    ]
    out += [
        Case(5, i + 1, w, r)
        for i, (w, r) in enumerate(
            [
                ("ul_delay < 1 AND ul_dupl < 1", 556),
                ("ul_delay < 10 AND ul_dupl < 10", 5_560),
                ("ul_delay < 50 AND ul_dupl < 50", 27_800),
                ("ul_delay < 100 AND ul_dupl > 50", 27_800),
                ("ul_delay < 500 AND ul_dupl > 449", 27_800),
                ("ul_delay < 100 AND ul_dupl < 100", 55_600),
                ("ul_delay < 500 AND ul_dupl < 500", 278_000),
            ]
        )
    ]
    return tuple(out)


CASES: tuple[Case, ...] = _cases()

# -- layouts: the seed's three schemas and tracehouse's --------------------------------------

LAYOUTS = ("schema1", "schema2", "schema3", "tracehouse", "tracehouse-embedded")
TRACE = "qos_reads"  # tracehouse's trace name
EVENT_TYPE = "average_stats"


def _table_of(column: str, layout: str) -> str:
    """The alias of the table holding `column` in `layout` (i: ids, s: stats, m: main, x: secondary)."""
    if layout == "schema1":
        return "t"
    if layout in ("tracehouse", "tracehouse-embedded"):
        return "s"
    if column in ID_COLUMNS:
        return "i"
    if layout == "schema2":
        return "s"
    return "m" if column in main_columns() else "x"


def _qualify(where: str, layout: str) -> str:
    out = []
    for tok in where.split(" "):
        if tok.replace("_", "").isalpha() and tok not in ("AND", "OR"):
            out.append(f"{_table_of(tok, layout)}.{tok}")
        else:
            out.append(tok)
    return " ".join(out)


def sql(case: Case, layout: str, *, dialect: str = "generic") -> str:
    """The SELECT of `case` in `layout`: every column of the tables it fetches (the seed's
    clients fetched whole rows). `dialect` "mariadb" adds the query-cache hint of Q3's cases."""
    where = _qualify(case.where, layout)
    hint = ""
    if dialect == "mariadb" and case.query == 3:
        hint = "SQL_CACHE " if case.query_cache else "SQL_NO_CACHE "
    if layout == "schema1":
        return f"SELECT {hint}* FROM qos1 t WHERE {where}"
    if layout == "schema2":
        if case.tables == "one":
            return f"SELECT {hint}s.* FROM qos2_stats s WHERE {where}"
        return f"SELECT {hint}i.*, s.* FROM qos2_id i JOIN qos2_stats s ON s.measurement_id = i.id WHERE {where}"
    if layout == "schema3":
        if case.tables == "one":  # Q3: ul_dupl lives in secondaryStats
            return f"SELECT {hint}x.* FROM qos3_secondary x WHERE {where}"
        return (
            f"SELECT {hint}i.*, m.*, x.* FROM qos3_id i JOIN qos3_main m ON m.measurement_id = i.id "
            f"JOIN qos3_secondary x ON x.measurement_id = m.measurement_id AND x.ts = m.ts WHERE {where}"
        )
    if layout in ("tracehouse", "tracehouse-embedded"):  # (the same SQL, served or in-process)
        # Identity once per measurement as a producer, its typed attributes carried by the view as
        # tag columns (`tag_columns=attrs`); the results in one event type. "One table" (Q3) is
        # what the seed's schema 3 fetches from the table holding `ul_dupl` (secondaryStats): the
        # time, the measurement (here its producer) and the 30 secondary results, the same 32
        # columns, so the answer compared is the same answer.
        t = f'"{TRACE}".{EVENT_TYPE}'
        if case.tables == "one":
            cols = ", ".join(f"s.{c}" for c in ("ts", "producer", *secondary_columns()))
            return f"SELECT {cols} FROM {t} s WHERE {where}"
        return f"SELECT * FROM {t} s WHERE {where}"
    raise ValueError(f"unknown layout {layout!r}: expected one of {', '.join(LAYOUTS)}")


# -- the data set split into a layout's tables ------------------------------------------------


def schema_tables(data: pa.Table, layout: str) -> dict[str, pa.Table]:
    """`data` as the tables of `layout` (the id tables: one row per measurement, id = measurement_id)."""
    results = [p[0] for p in result_params()]
    if layout == "schema1":
        return {"qos1": data}
    first = np.unique(data.column("measurement_id").to_numpy(), return_index=True)[1]
    ids = data.select(list(ID_COLUMNS)).take(pa.array(first))
    ids = ids.add_column(0, "id", ids.column("measurement_id"))
    base = pa.table({"measurement_id": data.column("measurement_id"), "ts": data.column("ts")})
    if layout == "schema2":
        stats = base
        for c in results:
            stats = stats.append_column(c, data.column(c))
        return {"qos2_id": ids, "qos2_stats": stats}
    if layout == "schema3":
        main, sec = base, base
        mc = set(main_columns())
        for c in (c for c in results if c in mc):
            main = main.append_column(c, data.column(c))
        for c in secondary_columns():
            sec = sec.append_column(c, data.column(c))
        return {"qos3_id": ids, "qos3_main": main, "qos3_secondary": sec}
    raise ValueError(f"no tables for layout {layout!r}")


def _sql_type(t: pa.DataType, dialect: str) -> str:
    if pa.types.is_floating(t):
        return "DOUBLE PRECISION" if dialect == "postgres" else "DOUBLE"
    return "BIGINT" if dialect != "sqlite" else "INTEGER"


def ddl(layout: str, data: pa.Table, dialect: str) -> list[str]:
    """CREATE TABLE statements of `layout` with the seed's keys (schema 1: the measurement id and
    time; schemas 2 and 3: the id table's key, the stats tables keyed by (measurement, time) and
    referencing it). Secondary indexes, as in the seed, on nothing else."""
    out = []
    for name, t in schema_tables(data.slice(0, 0) if data.num_rows else data, layout).items():
        cols = ", ".join(f"{f.name} {_sql_type(f.type, dialect)} NOT NULL" for f in t.schema)
        if name.endswith("_id"):
            key = ", PRIMARY KEY (id)"
            extra = [f"CREATE INDEX {name}_customer ON {name} (customer_id)"]
        elif name == "qos1":
            key = ", PRIMARY KEY (customer_id, measurement_id, ts)"
            extra = []
        else:
            ref = name.split("_")[0] + "_id"
            key = f", PRIMARY KEY (measurement_id, ts), FOREIGN KEY (measurement_id) REFERENCES {ref} (id)"
            extra = []
        out.append(f"CREATE TABLE {name} ({cols}{key})")
        out += extra
    return out


def expected_rows(data: pa.Table) -> dict[str, int]:
    """Ground truth: each case's row count over the in-memory data set (DuckDB)."""
    import duckdb

    con = duckdb.connect()
    con.register("qos1", data)
    return {
        c.name: con.execute(f"SELECT count(*) FROM qos1 t WHERE {_qualify(c.where, 'schema1')}").fetchone()[0]
        for c in CASES
    }


def tracehouse_event_type():
    """The results as one tracehouse event type (the ids are its producers' attributes)."""
    from ..schema import Column, EventType

    return EventType(
        EVENT_TYPE,
        "instant",
        tuple(Column(n, t, "", "Qosmet result parameter (seed 003)") for n, t, _lo, _hi in result_params()),
        "one Qosmet averaging interval of a measurement (seed 003)",
    )


def tracehouse_load(store, data: pa.Table) -> None:
    """Create the trace in `store` (tracehouse's layout) and append `data`: the 13 id columns
    become one producer per measurement (attributes), the rest one event type."""
    first = np.unique(data.column("measurement_id").to_numpy(), return_index=True)[1]
    ids = data.select(list(ID_COLUMNS)).take(pa.array(first)).to_pylist()
    producers = [
        {
            "id": int(r["measurement_id"]),
            "parent": None,
            "kind": "measurement",
            "name": f"customer={r['customer_id']},measurement={r['measurement_id']}",
            "attrs": r,
        }
        for r in ids
    ]
    # Segments sorted by (measurement, ts) (`segment_order=producer`): the seed's clients read a
    # customer's measurement at a time, as its schemas' keys lead with the customer. The ids are
    # the views' tag columns (`tag_columns=attrs`).
    store.create_trace(
        TRACE,
        "qos",
        event_types=[tracehouse_event_type()],
        producers=producers,
        format_description="Qosmet QoS measurements (seed 003)",
        metadata={"segment_order": "producer", "tag_columns": "attrs"},
    )
    cols = {"ts": data.column("ts"), "producer": pa.compute.cast(data.column("measurement_id"), pa.int32())}
    for n, _t, _lo, _hi in result_params():
        cols[n] = data.column(n)
    store.append(TRACE, EVENT_TYPE, pa.table(cols))
    store.flush()
    # The seed's questions read whole rows of 62 columns: DuckDB's own format decodes them several
    # times faster than our Parquet pages (store/readcache.py); the segments stay the source.
    store.build_read_cache(TRACE)
