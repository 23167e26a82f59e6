"""Seed 000's experiments (SoC-Trace, sections 4.1-4.3): storage size after importing 1 ... 5
traces of one format, import time of one trace (format known vs new), and search-and-save
across 5 traces with 5 threads; tracehouse beside the seed's own design rebuilt on SQLite
and MariaDB.

Owns the SoC-Trace data model of the peers (the seed's figures 5 and 7: EVENT, EVENT_PARAM
as entity-attribute-value rows with the value as text, EVENT_PRODUCER per trace; EVENT_TYPE
and EVENT_PARAM_TYPE for the format; SEARCH and SEARCH_MAPPING for saved search results),
its two architectures, and the three experiments:

  sqlite-ddb   one SQLite file per trace holding its events, producers, format and (empty)
               result tables, plus a system file listing the traces: the design the seed
               chose (DDB) on the DBMS FrameSoC moved to
  mariadb-cdb  one MariaDB database, per-trace EVENT_n / EVENT_PARAM_n / EVENT_PRODUCER_n
               tables and the format stored once (the seed's CDB catalog solution, on the
               seed's MySQL lineage)
  tracehouse   `registry.importer("strace").import_file` into one store (per-trace segments,
               event types once per format in the catalog)

The traces are strace logs built from a real capture (`import_strace.build`: the import
benchmark's workload), 1 MB and 100 MB. Every system parses them with the same Rust parser;
the peers then map the events to their model (vectorised) and bulk-load it (ADBC ingest for
SQLite, LOAD DATA LOCAL INFILE for MariaDB), all inside the timed region. A SoC-Trace event
type is a syscall name ("syscall:pwrite64"), as SoC-Trace types a KPTrace event by its name;
the search asks every trace for the events of one type and saves their ids as a result.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from tracehouse.bench import stat_protocol
from tracehouse.bench.tod_ingest_peers import dir_bytes
from tracehouse.bench.write_systems import Unavailable

from . import servers

BYTES_PER_LINE = 98  # the strace workload's average line (measured: 100 MB ~ 1.07M lines)
SIZES_MB = (1, 100)
QUICK_SIZES_MB = (1, 5)
TRACES = 5
SEARCH_TYPE = "syscall:pwrite64"

# What the seed reports in numbers (its figures are bars without labels; these are the values
# its text gives). MySQL 5.5 InnoDB, JDBC batched prepared statements, Xeon E5-1660, SSD.
SEED = {
    "storage": "CDB 3-5 % smaller than DDB for 1 MB traces, 0.04-0.07 % for 100 MB (< 300 kB per trace); "
    "an empty InnoDB table takes 16 kB",
    "import": "100 MB KPTrace trace: ~350 s (mysqldump restore of it: 43 s); a new format adds 0.7 % (1 MB) "
    "and 1.3 % (100 MB); creating a trace DB costs < 700 ms",
    "search": "CDB one connection ~2x the time of CDB one connection per thread (small traces), up to 158 % slower "
    "than DDB (large); CDB multi-connection 7.6-25 % slower than DDB",
}


def build_traces(workdir: Path, sizes_mb) -> dict[int, Path]:
    """One strace log per size (MB), from the import benchmark's real capture."""
    from tracehouse.bench.import_strace import build

    lines = {mb: int(mb * 1_000_000 / BYTES_PER_LINE) for mb in sizes_mb}
    inputs = build(workdir, sorted(lines.values()))
    by_lines = {i.units: i.path for i in inputs}
    return {mb: by_lines[n] for mb, n in lines.items()}


def parse(path: Path) -> dict[str, pa.Table]:
    """The Rust strace parser over a file: one Arrow table per event type."""
    from tracehouse import _core

    p = _core.StraceParser()
    out: dict[str, list] = {}

    def keep(batches):
        for t, b in batches:
            out.setdefault(t, []).append(b)

    with open(path, "rb") as f:
        while True:
            chunk = f.read(4 << 20)
            keep(p.feed(chunk))
            if not chunk:
                break
    keep(p.finish())
    keep(p.late())
    return {t: pa.Table.from_batches(bs) for t, bs in out.items()}


# -- the SoC-Trace model ---------------------------------------------------------------------


class Model:
    """One parsed trace as SoC-Trace tables: event types (with their parameter types), EVENT,
    EVENT_PARAM (EAV, values as text), EVENT_PRODUCER. Vectorised with pyarrow."""

    def __init__(self, parsed: dict[str, pa.Table]) -> None:
        events, params = [], []
        self.types: list[tuple[str, list[str]]] = []
        next_id = 0
        for t, table in sorted(parsed.items()):
            if table.num_rows == 0:
                continue
            pcols = [c for c in table.column_names if c not in ("ts", "producer", "seq")]
            key = (
                pc.binary_join_element_wise(
                    pa.scalar(t + ":"), pc.fill_null(pc.cast(table.column("name"), pa.string()), "?"), ""
                )
                if t == "syscall"
                else pa.array([t] * table.num_rows)
            )
            enc = (
                pc.dictionary_encode(key).combine_chunks()
                if isinstance(key, pa.ChunkedArray)
                else pc.dictionary_encode(key)
            )
            names = enc.dictionary.to_pylist()
            base = len(self.types)
            for n in names:
                self.types.append((n, pcols))
            type_id = pc.add(pc.cast(enc.indices, pa.int64()), base)
            ids = pa.array(range(next_id, next_id + table.num_rows), pa.int64())
            next_id += table.num_rows
            events.append(
                pa.table(
                    {
                        "id": ids,
                        "event_type_id": type_id,
                        "event_producer_id": pc.cast(table.column("producer"), pa.int64()),
                        "timestamp": table.column("ts"),
                        "cpu": pa.nulls(table.num_rows, pa.int64()),
                    }
                )
            )
            for k, c in enumerate(pcols):
                col = table.column(c)
                valid = pc.is_valid(col)
                if not pc.any(valid).as_py():
                    continue
                params.append(
                    pa.table(
                        {
                            "event_id": pc.filter(ids, valid),
                            "event_param_type_id": pc.add(pc.multiply(pc.filter(type_id, valid), 100), k),
                            "value": pc.cast(pc.filter(col, valid), pa.string()),
                        }
                    )
                )
        self.event = pa.concat_tables(events)
        param = pa.concat_tables(params)
        self.param = param.add_column(0, "id", pa.array(range(param.num_rows), pa.int64()))
        prods = pc.unique(self.event.column("event_producer_id")).to_pylist()
        self.producer = pa.table(
            {
                "id": pa.array(prods, pa.int64()),
                "type": ["thread"] * len(prods),
                "local_id": [str(p) for p in prods],
                "name": [f"tid {p}" for p in prods],
                "parent_id": pa.array([-1] * len(prods), pa.int64()),
            }
        )

    def format_tables(self, trace_type_id: int) -> dict[str, pa.Table]:
        et = pa.table(
            {
                "id": pa.array(range(len(self.types)), pa.int64()),
                "trace_type_id": pa.array([trace_type_id] * len(self.types), pa.int64()),
                "name": [n for n, _ in self.types],
            }
        )
        rows = [(i * 100 + k, i, c) for i, (_n, cols) in enumerate(self.types) for k, c in enumerate(cols)]
        ept = pa.table(
            {
                "id": pa.array([r[0] for r in rows], pa.int64()),
                "event_type_id": pa.array([r[1] for r in rows], pa.int64()),
                "name": [r[2] for r in rows],
                "type": ["STRING"] * len(rows),
            }
        )
        return {"event_type": et, "event_param_type": ept}

    def type_id(self, name: str) -> int:
        return next(i for i, (n, _c) in enumerate(self.types) if n == name)


TRACE_DDL = {  # per-trace tables (suffix added by the CDB)
    "event": "id BIGINT PRIMARY KEY, event_type_id BIGINT, event_producer_id BIGINT, timestamp BIGINT, cpu BIGINT",
    "event_param": "id BIGINT PRIMARY KEY, event_id BIGINT, event_param_type_id BIGINT, value TEXT",
    "event_producer": "id BIGINT PRIMARY KEY, type TEXT, local_id TEXT, name TEXT, parent_id BIGINT",
}
FORMAT_DDL = {
    "event_type": "id BIGINT PRIMARY KEY, trace_type_id BIGINT, name TEXT",
    "event_param_type": "id BIGINT PRIMARY KEY, event_type_id BIGINT, name TEXT, type TEXT",
}
RESULT_DDL = {
    "search": "id BIGINT PRIMARY KEY, trace_id BIGINT, name TEXT, created DOUBLE",
    "search_mapping": "search_id BIGINT, event_id BIGINT",
}
INDEXES = {"event": "event_type_id", "event_param": "event_id"}  # the seed's library queries by type and by event


# -- peers -----------------------------------------------------------------------------------


class SQLiteDDB:
    name = "sqlite-ddb"
    design = "one SQLite file per trace (events, producers, format, results) + a system file (seed's DDB)"

    def __init__(self, workdir: Path) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="soc-sqlite-", dir=workdir))
        self.n = 0
        db = sqlite3.connect(self.dir / "system.sqlite")
        db.execute("CREATE TABLE trace (id INTEGER PRIMARY KEY, name TEXT, trace_type TEXT, db TEXT)")
        db.execute("CREATE TABLE trace_type (id INTEGER PRIMARY KEY, name TEXT)")
        db.commit()
        db.close()
        self.version = sqlite3.sqlite_version

    def import_trace(self, path: Path, fmt: str = "strace") -> tuple[float, int]:
        """Parse, map and load one trace into a new trace DB; returns (seconds, events)."""
        from adbc_driver_sqlite import dbapi

        t0 = time.perf_counter()
        m = Model(parse(path))
        self.n += 1
        db_path = self.dir / f"trace_{self.n}.sqlite"
        db = sqlite3.connect(db_path)
        db.execute("PRAGMA journal_mode=WAL")
        for t, cols in {**TRACE_DDL, **FORMAT_DDL, **RESULT_DDL}.items():
            db.execute(f"CREATE TABLE {t} ({cols})")
        db.commit()
        db.close()
        conn = dbapi.connect(str(db_path))
        cur = conn.cursor()
        for t, table in {
            "event": m.event,
            "event_param": m.param,
            "event_producer": m.producer,
            **m.format_tables(1),
        }.items():
            cur.adbc_ingest(t, table, mode="append")
        for t, c in INDEXES.items():
            cur.execute(f"CREATE INDEX {t}_{c} ON {t} ({c})")
        conn.commit()
        cur.close()
        conn.close()
        sysdb = sqlite3.connect(self.dir / "system.sqlite")
        sysdb.execute("INSERT INTO trace VALUES (?, ?, ?, ?)", (self.n, f"trace-{self.n}", fmt, str(db_path)))
        sysdb.commit()
        sysdb.close()
        self.models = getattr(self, "models", {})
        self.models[self.n] = m
        return time.perf_counter() - t0, m.event.num_rows

    def bytes(self) -> int:
        return dir_bytes(self.dir)

    def search_and_save(self, traces: list[int], shared: bool) -> float:
        """One thread per trace, each with its own connection to its trace DB (DDB: always)."""

        def work(i: int) -> None:
            db = sqlite3.connect(self.dir / f"trace_{i}.sqlite", timeout=60)
            tid = self.models[i].type_id(SEARCH_TYPE)
            ids = db.execute("SELECT id FROM event WHERE event_type_id = ?", (tid,)).fetchall()
            sid = db.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM search").fetchone()[0]
            db.execute("INSERT INTO search VALUES (?, ?, ?, ?)", (sid, i, SEARCH_TYPE, time.time()))
            db.executemany("INSERT INTO search_mapping VALUES (?, ?)", [(sid, r[0]) for r in ids])
            db.commit()
            db.close()

        return _threads(traces, work)

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


class MariaDBCDB(servers.MariaDBServer):
    design = "one MariaDB database, per-trace EVENT_n/EVENT_PARAM_n/EVENT_PRODUCER_n, format once (seed's CDB)"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, "", "mariadb-cdb")
        self.n = 0
        self.formats: dict[str, int] = {}

    def __enter__(self):
        super().__enter__()
        c = self.connect()
        cur = c.cursor()
        cur.execute("CREATE TABLE trace (id BIGINT PRIMARY KEY, name TEXT, trace_type_id BIGINT)")
        cur.execute("CREATE TABLE trace_type (id BIGINT PRIMARY KEY, name TEXT)")
        for t, cols in {**FORMAT_DDL, **RESULT_DDL}.items():
            cur.execute(f"CREATE TABLE {t} ({cols.replace('DOUBLE', 'DOUBLE')})")
        c.close()
        self.models = {}
        return self

    def import_trace(self, path: Path, fmt: str = "strace") -> tuple[float, int]:
        t0 = time.perf_counter()
        m = Model(parse(path))
        self.n += 1
        n = self.n
        c = self.connect(local_infile=True)
        cur = c.cursor()
        if fmt not in self.formats:  # a new format: its types written once, shared by its traces
            tt = len(self.formats) + 1
            self.formats[fmt] = tt
            cur.execute("INSERT INTO trace_type VALUES (%s, %s)", (tt, fmt))
            for t, table in m.format_tables(tt).items():
                off = (tt - 1) * 1_000_000  # each format's ids in its own range
                table = table.set_column(0, "id", pc.add(table.column("id"), off))
                self.load_arrow(cur, t, table)
        cur.execute("INSERT INTO trace VALUES (%s, %s, %s)", (n, f"trace-{n}", self.formats[fmt]))
        for t, cols in TRACE_DDL.items():
            cur.execute(f"CREATE TABLE {t}_{n} ({cols})")
        for t, table in (("event", m.event), ("event_param", m.param), ("event_producer", m.producer)):
            self.load_arrow(cur, f"{t}_{n}", table)
        for t, col in INDEXES.items():
            cur.execute(f"CREATE INDEX {t}_{n}_{col} ON {t}_{n} ({col})")
        c.close()
        self.models[n] = m
        return time.perf_counter() - t0, m.event.num_rows

    def bytes(self) -> int:
        return self.data_bytes()

    def search_and_save(self, traces: list[int], shared: bool) -> float:
        """One thread per trace; `shared`: one connection for all (its statements serialised, as
        one MySQL connection is served by one server thread), else one per thread."""
        lock = threading.Lock()  # the shared connection: one statement sequence at a time
        ids_lock = threading.Lock()
        one = self.connect() if shared else None
        next_id = [int(time.time() * 1000)]

        def work(i: int) -> None:
            conn = one or self.connect()
            tid = self.models[i].type_id(SEARCH_TYPE)

            def run():
                cur = conn.cursor()
                cur.execute(f"SELECT id FROM event_{i} WHERE event_type_id = %s", (tid,))
                ids = cur.fetchall()
                with ids_lock:
                    next_id[0] += 1
                    sid = next_id[0]
                cur.execute("INSERT INTO search VALUES (%s, %s, %s, %s)", (sid, i, SEARCH_TYPE, time.time()))
                if ids:
                    cur.execute("INSERT INTO search_mapping VALUES " + ",".join(f"({sid},{r[0]})" for r in ids))

            if shared:
                with lock:
                    run()
            else:
                run()
                conn.close()

        secs = _threads(traces, work)
        if one is not None:
            one.close()
        return secs

    def close(self) -> None:
        self.__exit__(None, None, None)


class TracehouseStore:
    name = "tracehouse"
    design = "one store: per-trace Parquet segments, event types once per format in the catalog"

    def __init__(self, workdir: Path) -> None:
        import tracehouse
        from tracehouse import __version__

        self.dir = Path(tempfile.mkdtemp(prefix="soc-th-", dir=workdir))
        self.store = tracehouse.open(self.dir / "store", fsync="off")
        self.n = 0
        self.version = __version__

    def import_trace(self, path: Path, fmt: str = "strace") -> tuple[float, int]:
        from tracehouse.formats import registry

        t0 = time.perf_counter()
        self.n += 1
        r = registry.importer("strace").import_file(self.store, path, f"trace-{self.n}")
        self.store.flush()
        return time.perf_counter() - t0, r.events

    def bytes(self) -> int:
        return dir_bytes(self.dir)

    def search_and_save(self, traces: list[int], shared: bool) -> float:
        """One thread per trace: the events of one syscall, their keys saved as a result table."""
        from tracehouse.analysis import results

        name = SEARCH_TYPE.split(":")[1]

        def work(i: int) -> None:
            t = self.store.sql(f'SELECT producer, seq, ts FROM "trace-{i}".syscall WHERE name = ?', [name])
            results.save_table(self.store, "search", [f"trace-{i}"], t, params={"type": SEARCH_TYPE})

        return _threads(traces, work)

    def close(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _threads(traces: list[int], work) -> float:
    errors: list[BaseException] = []
    gate = threading.Barrier(len(traces) + 1)

    def go(i: int) -> None:
        gate.wait()
        try:
            work(i)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=go, args=(i,), daemon=True) for i in traces]
    for t in ts:
        t.start()
    t0 = time.perf_counter()
    gate.wait()
    for t in ts:
        t.join()
    secs = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return secs


SYSTEMS = ("tracehouse", "sqlite-ddb", "mariadb-cdb")


def _open(name: str, workdir: Path):
    if name == "tracehouse":
        return TracehouseStore(workdir)
    if name == "sqlite-ddb":
        try:
            import adbc_driver_sqlite  # noqa: F401
        except ImportError:
            raise Unavailable("adbc-driver-sqlite is not installed (pip install 'tracehouse[bench]')") from None
        return SQLiteDDB(workdir)
    s = MariaDBCDB(workdir)
    return s.__enter__()


def run(
    *,
    sizes_mb=SIZES_MB,
    systems=SYSTEMS,
    workdir: str | Path,
    budget_s: float = 60.0,
    max_runs: int = 10,
    log=lambda s: None,
) -> dict:
    work = Path(workdir)
    tmp = Path(tempfile.mkdtemp(prefix="soc-traces-", dir=work))
    out = {
        "experiment": "soctrace",
        "sizes_mb": list(sizes_mb),
        "storage": [],
        "import": [],
        "search": [],
        "skipped": {},
        "systems": {},
    }
    try:
        traces = build_traces(tmp, sizes_mb)
        for mb, path in traces.items():
            out.setdefault("trace_bytes", {})[mb] = path.stat().st_size
            m = stat_protocol.repeat(lambda: raw_append(path, tmp / "raw.copy"), budget_s=budget_s, max_runs=max_runs)
            out.setdefault("raw_append", {})[mb] = {k: m[k] for k in ("mean", "se", "rel_se", "runs", "converged")}
            for name in systems:
                try:
                    s = _open(name, work)
                except Unavailable as e:
                    out["skipped"][name] = str(e)
                    continue
                try:
                    out["systems"][name] = {"version": s.version, "design": s.design}
                    # 4.1 storage: 5 imports of the same trace, size after each
                    for k in range(1, TRACES + 1):
                        secs, events = s.import_trace(path)
                        out["storage"].append(
                            {
                                "system": name,
                                "mb": mb,
                                "traces": k,
                                "bytes": s.bytes(),
                                "events": events,
                                "import_s": secs,
                            }
                        )
                    log(f"soc-trace {mb} MB {name}: 5 traces stored in {s.bytes() / 1e6:.1f} MB")
                    # 4.3 search and save over the 5 traces, 5 threads
                    for shared in (False, True) if name == "mariadb-cdb" else (False,):
                        m = stat_protocol.repeat(
                            lambda: s.search_and_save(list(range(1, TRACES + 1)), shared),
                            budget_s=budget_s,
                            max_runs=max_runs,
                            warmup=True,
                        )
                        out["search"].append(
                            {
                                "system": name + (" one connection" if shared else ""),
                                "mb": mb,
                                **{k: m[k] for k in ("mean", "se", "rel_se", "runs", "converged")},
                            }
                        )
                    # 4.2 import time: format known (already stored) vs new
                    known = stat_protocol.repeat(lambda: s.import_trace(path)[0], budget_s=budget_s, max_runs=max_runs)
                    new = stat_protocol.repeat(
                        lambda: _import_new(name, s, path, work), budget_s=budget_s, max_runs=max_runs
                    )
                    for kind, m in (("known", known), ("new", new)):
                        out["import"].append(
                            {
                                "system": name,
                                "mb": mb,
                                "format": kind,
                                **{k: m[k] for k in ("mean", "se", "rel_se", "runs", "converged")},
                            }
                        )
                    log(
                        f"soc-trace {mb} MB {name}: import {known['mean']:.2f} s (format known), "
                        f"{new['mean']:.2f} s (new)"
                    )
                finally:
                    s.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out["ratios"] = ratios(out)
    return out


def raw_append(src: Path, dst: Path) -> float:
    """The upper bound of an import: the trace's bytes appended to one file and fsynced (seconds)."""
    import os

    t0 = time.perf_counter()
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with open(src, "rb") as f:
            while chunk := f.read(4 << 20):
                os.write(fd, chunk)
        os.fsync(fd)
    finally:
        os.close(fd)
    secs = time.perf_counter() - t0
    dst.unlink()
    return secs


_new_formats = [0]


def _import_new(name: str, s, path: Path, work: Path) -> float:
    """One import whose format the system has not stored yet (the seed's fictitious formats:
    the same format under a new name). tracehouse: a fresh store (its catalog has no strace
    types yet, made outside the clock); SQLite DDB: every trace DB stores its format anyway."""
    if name == "tracehouse":
        fresh = TracehouseStore(work)
        try:
            return fresh.import_trace(path)[0]
        finally:
            fresh.close()
    _new_formats[0] += 1
    return s.import_trace(path, fmt=f"strace-{_new_formats[0]}")[0]


def ratios(result: dict) -> list[dict]:
    """tracehouse / best peer per size: bytes after 5 traces (smaller is better: peer/tracehouse),
    import time (format known) and search-and-save (time: peer/tracehouse, > 1 = tracehouse faster)."""
    out = []
    for mb in result["sizes_mb"]:
        row = {"mb": mb}
        st = {r["system"]: r["bytes"] for r in result["storage"] if r["mb"] == mb and r["traces"] == TRACES}
        im = {r["system"]: r["mean"] for r in result["import"] if r["mb"] == mb and r["format"] == "known"}
        se = {r["system"]: r["mean"] for r in result["search"] if r["mb"] == mb}
        for key, d in (("storage", st), ("import", im), ("search", se)):
            th = d.get("tracehouse")
            peers_ = {k: v for k, v in d.items() if k != "tracehouse"}
            if th and peers_:
                best = min(peers_.items(), key=lambda kv: kv[1])
                row[key] = {"tracehouse": th, "best_peer": best[0], "peer": best[1], "advantage": best[1] / th}
        out.append(row)
    return out
