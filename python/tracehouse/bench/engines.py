"""`tracehouse bench engines`: the same questions to DuckDB and to Apache Spark (local[N])
over the same store: seed 003's read queries Q1-Q5 on its QoS data set, and the TOD
statistics queries (statistics by type and by producer, density) of seed 001's workload.

Owns the engine benchmark (which cases, the TOD questions, the crossover model).

The QoS data set and the queries are bench/qos.py's (one definition, shared with
`tracehouse bench all`): seed 003's uniform data set (2,032,000 rows; `--scale N` divides
every run's length by N) loaded in tracehouse's layout (the 13 id parameters once per
measurement as producer attributes, the 48 results as one event type), and of every query
Q1-Q5 the middle case of the seed's tables 5.1-5.5, as `qos.sql(case, "tracehouse")`
writes it (whole rows, the ids joined from th.producers where the seed fetched all tables):

  Q1.2  customer_id = 10                         10,000 rows
  Q2.3  ul_delay < 50                            27,800
  Q3.15 ul_dupl < 50 (all tables, no cache)      27,800
  Q4.2  customer_id = 10 AND ul_delay < 5000      5,000
  Q5.3  ul_delay < 50 AND ul_dupl < 50           27,800

Every answer is checked equal (values and Arrow types) between the engines; times are the
median of `repeat` warm runs beside the first (cold) run, DuckDB and Spark measured one
after the other in the same process, with the load average printed beside them.
"""

from __future__ import annotations

import os
import shutil
import statistics as pystats
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

from .. import _core
from ..workload import qos

ENGINE_CASES = ("Q1.2", "Q2.3", "Q3.15", "Q4.2", "Q5.3")  # the middle case of tables 5.1-5.5


def qos_load(store, *, scale: float = 1.0) -> int:
    """Load seed 003's read data set (qos.dataset, `scale` < 1 shrinks every run) into
    `store` as qos.TRACE, tracehouse's layout; returns its row count. Flushed."""
    data = qos.dataset(scale)
    qos.tracehouse_load(store, data)
    return data.num_rows


def qos_queries() -> dict[str, str]:
    """The Q1-Q5 set (ENGINE_CASES) in tracehouse's layout over qos.TRACE."""
    return {c.name: qos.sql(c, "tracehouse") for c in qos.CASES if c.name in ENGINE_CASES}


def sorted_rows(t: pa.Table) -> pa.Table:
    """`t` in (ts, producer) order: the seed's queries have no ORDER BY, so answers are
    compared (not timed) in one order."""
    return t.sort_by([("ts", "ascending"), ("producer", "ascending")])


def tod_trace(store, name: str, events: int, *, seed: int = 42, threads: int = 10) -> int:
    """A TOD trace (seed 001's generator), registered when it returns."""
    from ..formats import tod

    store.create_trace(
        name,
        tod.FORMAT,
        description="TOD workload (seed 001)",
        event_types=tod.EVENT_TYPES,
        producers=tod.producers(threads),
        format_description=tod.DESCRIPTION,
    )
    gen = _core.TodGenerator(events=events, seed=seed, threads=threads)
    total = 0
    while (batches := gen.next_batches(max_events=500_000)) is not None:
        for type_name, b in batches.items():
            store.append(name, type_name, b)
            total += b.num_rows
    store.flush(name)
    return total


def tod_questions(trace: str) -> dict[str, Callable]:
    """The TOD statistics questions, each a function of an engine (or a Store): the pure-SQL
    analyses, one code path for both engines."""
    from ..analysis import statistics as ST

    return {
        "stats by type": lambda e: ST.stats(e, trace, "type"),
        "stats by producer": lambda e: ST.stats(e, trace, "producer"),
        "density 1000 bins": lambda e: ST.density_by_sql(e, trace, 1000, by="type"),
    }


def _timed(fn: Callable, repeat: int) -> tuple[object, float, float]:
    """(answer, first run s, median of `repeat` more runs s)."""
    t0 = time.perf_counter()
    ans = fn()
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return ans, first, pystats.median(times) if times else first


def run(
    *,
    scale: float = 1.0,
    tod_events: int = 10_000_000,
    repeat: int = 3,
    master: str = "local[2]",
    workdir: str | None = None,
    say: Callable[[str], None] = lambda s: None,
) -> dict:
    """Build the data sets in a fresh store, ask every question of both engines; see the module doc."""
    from .. import Store
    from ..store.engines import open_engine

    base = Path(workdir or tempfile.mkdtemp(prefix="th-bench-engines-"))
    path = base / "store"
    if path.exists():
        shutil.rmtree(path)
    out: dict = {"machine": {"cpus": os.cpu_count(), "loadavg_before": list(os.getloadavg())}, "queries": []}
    try:
        with Store(path, fsync="off") as s:
            say("generating the QoS data set")
            out["qos_rows"] = qos_load(s, scale=scale)
            say("generating the TOD trace")
            out["tod_events"] = tod_trace(s, "tod", tod_events)
        out["store_bytes"] = sum(f.stat().st_size for f in path.rglob("*.parquet"))
        questions: dict[str, Callable] = {k: (lambda e, q=q: e.sql(q)) for k, q in qos_queries().items()}
        questions |= tod_questions("tod")
        ordered = set(tod_questions("tod"))  # the statistics come ordered; Q1-Q5 are compared in (ts, producer) order
        duck = Store(path, readonly=True)  # the DuckDB engine as `tracehouse query` runs it
        say(f"starting Spark {master}")
        t0 = time.perf_counter()
        spark = open_engine(path, "spark", master=master)
        out["spark_start_s"] = round(time.perf_counter() - t0, 2)
        out["spark"] = spark.description
        try:
            for name, q in questions.items():
                say(name)
                load = os.getloadavg()[0]
                d_ans, d_first, d_med = _timed(lambda: q(duck), repeat)
                s_ans, s_first, s_med = _timed(lambda: q(spark), repeat)
                out["queries"].append(
                    {
                        "query": name,
                        "rows": d_ans.num_rows,
                        "identical": _same(d_ans, s_ans, name in ordered),
                        "duckdb_first_s": round(d_first, 4),
                        "duckdb_s": round(d_med, 4),
                        "spark_first_s": round(s_first, 4),
                        "spark_s": round(s_med, 4),
                        "spark_over_duckdb": round(s_med / d_med, 1) if d_med else None,
                        "loadavg": round(load, 2),
                    }
                )
            out["scan"] = _scan_rates(duck, spark, repeat)
        finally:
            spark.close()
            duck.close()
    finally:
        if workdir is None:
            shutil.rmtree(base, ignore_errors=True)
    out["machine"]["loadavg_after"] = list(os.getloadavg())
    out["crossover"] = crossover(out)
    return out


def _same(a: pa.Table, b: pa.Table, ordered: bool) -> bool:
    if not ordered:
        a, b = sorted_rows(a), sorted_rows(b)
    return a.schema == b.schema and a.equals(b)


def _scan_rates(duck, spark, repeat: int) -> dict:
    """Rows/s of a full scan with a filter and an aggregate (the part that spreads over
    nodes), and Spark's fixed cost per query (a one-row query), for the crossover model."""
    t = f'"{qos.TRACE}".{qos.EVENT_TYPE}'
    q = f"SELECT producer, count(*) AS n, sum(ul_bytes) AS b FROM {t} WHERE ul_pk_loss < 2.5 GROUP BY producer"
    rows = duck.sql(f"SELECT count(*) AS n FROM {t}").column(0)[0].as_py()
    _, _, d = _timed(lambda: duck.sql(q), repeat)
    _, _, sp = _timed(lambda: spark.sql(q), repeat)
    _, _, fixed = _timed(lambda: spark.sql("SELECT count(*) AS n FROM th.traces"), repeat)
    return {
        "rows": rows,
        "duckdb_s": round(d, 4),
        "spark_s": round(sp, 4),
        "spark_fixed_s": round(fixed, 4),
        "duckdb_rows_per_s": rows / d,
        "spark_rows_per_s": rows / max(sp - fixed, 1e-6),
    }


def crossover(out: dict) -> dict:
    """Where Spark on N nodes is expected to beat DuckDB on one, from this run's rates.

    Model (scans with filters and aggregates: Q2/Q3/Q5 and the statistics, whose work
    splits by segment with no shuffle of rows): DuckDB takes R / r_d on one machine while
    the data fits its disks and memory; Spark takes f + R / (N * r_s), r_s its rate on this
    machine's cores (per node of the same size), f its fixed cost per query (planning, task
    scheduling, results through the driver). Spark wins from N > r_d / r_s nodes once R / r_d
    is well above f, i.e. the data size where the fixed cost stops mattering."""
    sc = out.get("scan") or {}
    r_d, r_s, f = sc.get("duckdb_rows_per_s"), sc.get("spark_rows_per_s"), sc.get("spark_fixed_s")
    if not r_d or not r_s or f is None:
        return {}
    nodes = max(1.0, r_d / r_s)
    table = []
    for rows in (2_032_000, 100_000_000, 1_000_000_000, 10_000_000_000):
        t_d = rows / r_d
        # smallest N whose f + R/(N r_s) beats R / r_d (none while f >= t_d)
        n = None if f >= t_d else int(np.ceil(rows / (r_s * (t_d - f))))
        table.append({"rows": rows, "duckdb_s": round(t_d, 2), "spark_nodes_to_win": n})
    return {"nodes_at_least": round(nodes, 1), "fixed_s": f, "by_size": table}


def render(out: dict) -> str:
    lines = [
        f"QoS data set {out['qos_rows']:,} rows, TOD trace {out['tod_events']:,} events, "
        f"{out['store_bytes'] / 1e6:.0f} MB of segments; {out['spark']} started in {out['spark_start_s']} s",
        f"{'query':<20} {'rows':>8} {'duckdb s':>9} {'(first)':>8} {'spark s':>9} {'(first)':>8} {'spark/duck':>10} "
        f"{'same':>5} {'load':>5}",
    ]
    for q in out["queries"]:
        lines.append(
            f"{q['query']:<20} {q['rows']:>8,} {q['duckdb_s']:>9.3f} {q['duckdb_first_s']:>8.3f} "
            f"{q['spark_s']:>9.3f} {q['spark_first_s']:>8.3f} {q['spark_over_duckdb']:>9}x "
            f"{'yes' if q['identical'] else 'NO':>5} {q['loadavg']:>5.1f}"
        )
    sc, cx = out.get("scan", {}), out.get("crossover", {})
    if sc:
        lines.append(
            f"full scan + aggregate of {sc['rows']:,} rows: duckdb {sc['duckdb_s']:.3f} s "
            f"({sc['duckdb_rows_per_s'] / 1e6:.1f}M rows/s), spark {sc['spark_s']:.3f} s "
            f"({sc['spark_rows_per_s'] / 1e6:.1f}M rows/s after its fixed {sc['spark_fixed_s']:.3f} s per query)"
        )
    if cx:
        lines.append(
            f"crossover: Spark needs > {cx['nodes_at_least']} nodes like this one to scan faster than DuckDB "
            "here, and enough data that its fixed cost per query stops mattering:"
        )
        for row in cx["by_size"]:
            n = row["spark_nodes_to_win"]
            lines.append(
                f"  {row['rows']:>14,} rows: duckdb ~{row['duckdb_s']:,.2f} s; spark wins with "
                + (f">= {n} nodes" if n is not None else "no number of nodes (its fixed cost is larger)")
            )
        lines.append(
            "  (model: scans split by segment without shuffling rows; beyond one machine's disks and memory "
            "DuckDB slows down or cannot run, which the model does not credit Spark for)"
        )
    m = out["machine"]
    lines.append(
        f"load average {m['loadavg_before'][0]:.1f} before, {m['loadavg_after'][0]:.1f} after, {m['cpus']} cores"
    )
    return "\n".join(lines)
