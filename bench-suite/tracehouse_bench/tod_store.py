"""Seed 001's experiment (Illustration 2): storing TOD events at 10^3 ... 10^8 events, every
system beside the raw-append upper bound, SQL peers in the seed's relational model.

Owns the relational model of the seed (Events, FieldWrites, VarWrites, BEnters, BExits,
Args, primary keys as drawn; the foreign keys are declared in the seed but not enforced by
any peer here, as a careful loader would not), loaded with the keys and without them (the
`nokey` paths: tracehouse enforces no key, so those are like for like; at 10^5 events, load
average 5-7, SQLite loaded 186K ev/s with the keys and 418K without, DuckDB 229K and 456K,
PostgreSQL 76K and 150K: docs/benchmarks/2026-12-06-tod-keys), the conversion of TOD batches into it
(vectorised, done before the clock: every peer is handed rows ready for its load path),
each peer's two load paths, and the size sweep.

Systems and modes (the "live source" delivers batches of 10,000 events; each system
stores them as they come, the clock stops when they are durable):

  raw           column buffers appended to one file, fsync at the end (tod_ingest_peers.raw_append)
  tracehouse    stream: store.append per batch, fsync=batch (tod_ingest.tracehouse_stream);
                bulk: one append per type, fsync=off (tod_ingest.tracehouse_bulk)
  sqlite        fast: ADBC bulk ingest (Arrow) per batch, one transaction, WAL, synchronous=FULL;
                nokey: the same without primary keys (as every SQL peer's `nokey`);
                row: one prepared INSERT per row (sqlite3), a COMMIT per source batch
  postgres      fast: ADBC bulk ingest per batch (COPY binary), a COMMIT per batch;
                row: one INSERT per row (psycopg, server-side prepared), a COMMIT per source batch
  mariadb       fast: LOAD DATA LOCAL INFILE of a CSV per batch and table (written by pyarrow);
                row: one INSERT per row (pymysql), a COMMIT per source batch
  duckdb        fast: Arrow INSERT ... SELECT per batch and table, one transaction, CHECKPOINT;
                row: one INSERT per row with parameters, a COMMIT per source batch

A (system, mode) stops growing once its next size would take longer than the cap per run (the seed's table
also leaves those cells empty); the report says where.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from tracehouse.bench import stat_protocol, tod_ingest, tod_ingest_peers
from tracehouse.bench.tod_ingest_peers import Stopwatch, Workload, dir_bytes
from tracehouse.bench.write_systems import Unavailable

from .servers import MariaDBServer, PostgresServer

SIZES = (10**3, 10**4, 10**5, 10**6, 10**7, 10**8)
QUICK_SIZES = (10**3, 10**4, 10**5)
BATCH = 10_000
TYPE_CODE = {"field_write": 0, "var_write": 1, "behavior_enter": 2, "behavior_exit": 3}

# Illustration 2 of seed 001 (Pentium M 2.0 GHz, 1 GB, 7,200 rpm disk): {system: {events: (ev/s, MB)}}
SEED = {
    "raw storage": {1_003_230: (883_903, 39.8), 10_002_200: (887_900, 396.5), 100_002_900: (483_222, 3963.9)},
    "PostgreSQL 8.1": {1_030: (54, 48.4), 4_030: (55, 48.8), 12_730: (54, 49.8), 103_660: (54, 61.2)},
    "PostgreSQL light": {1_030: (111, None), 4_030: (114, None), 12_730: (114, None), 103_660: (115, None)},
    "Oracle 10g XE": {
        1_030: (51, None),
        4_030: (508, None),
        12_730: (523, None),
        103_660: (604, None),
        1_003_230: (619, None),
    },
    "Berkeley DB JE": {103_660: (8_083, 67.5), 1_003_230: (8_598, 711.3), 10_002_200: (7_254, 7788.5)},
}

# -- the seed's relational model -----------------------------------------------------------

TABLES = {  # name: (columns, primary key)
    "events": (("tid", "seq", "time", "type", "parent_tid", "parent_seq"), ("tid", "seq")),
    "field_writes": (("tid", "seq", "field_id", "target", "value"), ("tid", "seq")),
    "var_writes": (("tid", "seq", "var_id", "value"), ("tid", "seq")),
    "b_enters": (("tid", "seq", "bhv_id", "target", "args_id"), ("tid", "seq")),
    "b_exits": (("tid", "seq", "ret_value"), ("tid", "seq")),
    "args": (("id", "idx", "value"), ("id", "idx")),
}


def ddl(dialect: str, keys: bool = True) -> list[str]:
    """The seed's tables; `keys` False: without their primary keys (tracehouse enforces none)."""
    typ = "INTEGER" if dialect == "sqlite" else "BIGINT"
    out = []
    for name, (cols, key) in TABLES.items():
        pk = f", PRIMARY KEY ({', '.join(key)})" if keys else ""
        out.append(f"CREATE TABLE {name} ({', '.join(f'{c} {typ}' for c in cols)}{pk})")
    return out


def relational(batch: dict[str, pa.RecordBatch]) -> dict[str, pa.Table]:
    """One source batch (TOD event types) as the seed's tables (Arrow, no Python loop)."""
    ev = []
    out: dict[str, pa.Table] = {}
    for t, b in batch.items():
        tid = pc.cast(b.column("producer"), pa.int64())
        ev.append(
            pa.table(
                {
                    "tid": tid,
                    "seq": b.column("seq"),
                    "time": b.column("ts"),
                    "type": pa.array([TYPE_CODE[t]] * b.num_rows, pa.int64()),
                    "parent_tid": tid,
                    "parent_seq": b.column("parent_seq"),
                }
            )
        )
        if t == "field_write":
            out["field_writes"] = pa.table(
                {
                    "tid": tid,
                    "seq": b.column("seq"),
                    "field_id": b.column("field_id"),
                    "target": b.column("target"),
                    "value": b.column("value"),
                }
            )
        elif t == "var_write":
            out["var_writes"] = pa.table(
                {"tid": tid, "seq": b.column("seq"), "var_id": b.column("var_id"), "value": b.column("value")}
            )
        elif t == "behavior_enter":
            args_id = pc.add(pc.multiply(tid, 1 << 40), b.column("seq"))  # one argument list per enter
            out["b_enters"] = pa.table(
                {
                    "tid": tid,
                    "seq": b.column("seq"),
                    "bhv_id": b.column("behavior_id"),
                    "target": b.column("target"),
                    "args_id": args_id,
                }
            )
            parts = []
            for k in range(4):
                has = pc.greater(b.column("arg_count"), k)
                parts.append(
                    pa.table(
                        {
                            "id": pc.filter(args_id, has),
                            "idx": pa.array([k] * pc.sum(has).as_py() if pc.sum(has).as_py() else [], pa.int64()),
                            "value": pc.filter(b.column(f"arg{k}"), has),
                        }
                    )
                )
            out["args"] = pa.concat_tables(parts)
        elif t == "behavior_exit":
            out["b_exits"] = pa.table({"tid": tid, "seq": b.column("seq"), "ret_value": b.column("ret_value")})
    out["events"] = pa.concat_tables(ev)
    return {name: out[name] for name in TABLES if name in out}


def _rows(tables: dict[str, pa.Table]) -> dict[str, list[tuple]]:
    return {n: list(zip(*(c.to_pylist() for c in t.columns))) for n, t in tables.items()}


def _insert(name: str, ph: str) -> str:
    cols = TABLES[name][0]
    return f"INSERT INTO {name} ({', '.join(cols)}) VALUES ({', '.join([ph] * len(cols))})"


# -- peers ------------------------------------------------------------------------------------


def _sqlite(directory: Path, batches: list, rows: bool, keys: bool = True) -> tuple[float, float, int]:
    path = directory / "tod.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    for s in ddl("sqlite", keys):
        db.execute(s)
    if rows:
        sw = Stopwatch()
        _row_at_a_time(db.execute, batches, "?", lambda: db.execute("BEGIN"), lambda: db.execute("COMMIT"))
        secs, cpu = sw.stop()
        db.close()
    else:
        db.close()
        from adbc_driver_sqlite import dbapi

        secs, cpu = _adbc_load(dbapi.connect(str(path)), batches, commit_each=False)
    return secs, cpu, dir_bytes(directory)


def _row_at_a_time(execute, batches: list, placeholder: str, begin, commit) -> None:
    """Every row its own INSERT (the client's per-row path), one transaction per source batch."""
    for tables in batches:
        begin()
        for name, rs in tables.items():
            sql = _insert(name, placeholder)
            for r in rs:
                execute(sql, r)
        commit()


def _adbc_load(conn, batches: list, *, commit_each: bool) -> tuple[float, float]:
    """ADBC bulk ingest (Arrow in, the driver's COPY / prepared bulk path) of every batch's
    tables; a COMMIT per batch or one at the end. Closes `conn`."""
    cur = conn.cursor()
    sw = Stopwatch()
    for tables in batches:
        for name, t in tables.items():
            cur.adbc_ingest(name, t, mode="append")
        if commit_each:
            conn.commit()
    if not commit_each:
        conn.commit()
    secs, cpu = sw.stop()
    cur.close()
    conn.close()
    return secs, cpu


def _duckdb(directory: Path, batches: list, rows: bool, keys: bool = True) -> tuple[float, float, int]:
    con = tod_ingest_peers.duckdb_connect(directory / "tod.duckdb")
    for s in ddl("duckdb", keys):
        con.execute(s)
    con.execute("CHECKPOINT")
    sw = Stopwatch()
    if rows:
        _row_at_a_time(
            con.execute, batches, "?", lambda: con.execute("BEGIN TRANSACTION"), lambda: con.execute("COMMIT")
        )
    else:
        con.execute("BEGIN TRANSACTION")
        for tables in batches:
            for name, t in tables.items():
                con.register("_src", t)
                con.execute(f"INSERT INTO {name} SELECT * FROM _src")
                con.unregister("_src")
        con.execute("COMMIT")
    con.execute("CHECKPOINT")
    secs, cpu = sw.stop()
    con.close()
    return secs, cpu, dir_bytes(directory)


class _Server:
    """A PostgreSQL or MariaDB server kept for the whole sweep; each run gets fresh tables."""

    def __init__(self, server, dialect: str) -> None:
        self.server = server
        self.dialect = dialect

    def reset(self, keys: bool = True) -> None:
        c = self.server.connect()
        cur = c.cursor()
        for name in TABLES:
            cur.execute(f"DROP TABLE IF EXISTS {name}")
        for s in ddl(self.dialect, keys):
            cur.execute(s)
        c.close()
        if self.dialect == "postgres":
            with self.server.connect() as c:
                c.execute("CHECKPOINT")

    def run(self, directory: Path, batches: list, rows: bool, keys: bool = True) -> tuple[float, float, int]:
        self.reset(keys)
        before = self.server.data_bytes()
        if self.dialect == "postgres":
            secs, cpu = self._pg(batches, rows)
        else:
            secs, cpu = self._maria(directory, batches, rows)
        return secs, cpu, self.server.data_bytes() - before

    def _pg(self, batches, rows):
        if rows:
            import psycopg

            conn = psycopg.connect(
                host="127.0.0.1", port=self.server.port, user="postgres", dbname="postgres", prepare_threshold=0
            )
            sw = Stopwatch()
            _row_at_a_time(conn.execute, batches, "%s", lambda: None, conn.commit)  # psycopg opens the transaction
            secs, cpu = sw.stop()
            conn.close()
            return secs, cpu
        from adbc_driver_postgresql import dbapi

        return _adbc_load(dbapi.connect(self.server.uri), batches, commit_each=True)

    def _maria(self, directory: Path, batches, rows):
        conn = self.server.connect(local_infile=True)
        cur = conn.cursor()
        if rows:
            conn.autocommit(False)
            sw = Stopwatch()
            _row_at_a_time(cur.execute, batches, "%s", lambda: None, conn.commit)
            secs, cpu = sw.stop()
        else:
            sw = Stopwatch()
            for tables in batches:
                for name, t in tables.items():
                    self.server.load_arrow(cur, name, t)
            secs, cpu = sw.stop()
        conn.close()
        return secs, cpu


MODES = {  # (system, mode): what it does, for the report
    ("raw", "append"): "column buffers appended to one file, fsync at the end (upper bound)",
    ("tracehouse", "stream"): "store.append per batch, fsync=batch, flush+close timed",
    ("tracehouse", "bulk"): "one append per event type, fsync=off, flush+close timed",
    ("sqlite", "fast"): "ADBC bulk ingest per batch, one transaction, WAL (synchronous FULL, the default)",
    ("sqlite", "row"): "prepared INSERT per row, COMMIT per batch",
    ("duckdb", "fast"): "Arrow INSERT per batch and table, one transaction, CHECKPOINT",
    ("duckdb", "row"): "INSERT per row with parameters, COMMIT per batch",
    ("postgres", "fast"): "ADBC bulk ingest (COPY binary) per batch and table, COMMIT per batch",
    ("postgres", "row"): "INSERT per row (psycopg), COMMIT per batch",
    ("mariadb", "fast"): "LOAD DATA LOCAL INFILE of a pyarrow CSV per batch and table",
    ("mariadb", "row"): "INSERT per row (pymysql), COMMIT per batch",
    # The same fast paths into tables without the primary keys: tracehouse enforces no key (rows are
    # stored as given), so these are the like-for-like peers; `fast` keeps the seed's keys as drawn.
    ("sqlite", "nokey"): "the fast path into tables without primary keys (like for like: tracehouse enforces none)",
    ("duckdb", "nokey"): "the fast path into tables without primary keys (like for like)",
    ("postgres", "nokey"): "the fast path into tables without primary keys (like for like)",
    ("mariadb", "nokey"): "the fast path into tables without primary keys (like for like)",
}
SYSTEMS = ("raw", "tracehouse", "sqlite", "duckdb", "postgres", "mariadb")


def run(
    *,
    sizes=SIZES,
    systems=SYSTEMS,
    workdir: str | Path,
    cap_s: float = 120.0,
    budget_s: float = 60.0,
    max_runs: int = 10,
    skip=(),
    log=lambda s: None,
) -> dict:
    """The sweep: every (system, mode) at every size until it exceeds `cap_s` per run
    (`skip`: "system mode" keys left out, e.g. the slow row paths of a smoke run)."""
    work = Path(workdir)
    out = {
        "experiment": "tod_store",
        "sizes": list(sizes),
        "batch": BATCH,
        "cells": [],
        "skipped": {},
        "left_out": list(skip),
        "modes": {f"{s} {m}": d for (s, m), d in MODES.items() if s in systems},
        "versions": {},
        "settings": {},
    }
    servers = {}
    stack = []
    try:
        for name, cls, dialect in (("postgres", PostgresServer, "postgres"), ("mariadb", MariaDBServer, "mariadb")):
            if name not in systems:
                continue
            try:
                srv = cls(work, "tod", name)
                srv.__enter__()
                stack.append(srv)
                servers[name] = _Server(srv, dialect)
                out["versions"][name] = srv.version
                out["settings"][name] = dict(srv.SETTINGS)
            except Unavailable as e:
                out["skipped"][name] = str(e)
        for mod, name in (("adbc_driver_sqlite", "sqlite"), ("adbc_driver_postgresql", "postgres")):
            try:
                __import__(mod)
            except ImportError:
                out["skipped"][name] = f"{mod} is not installed (pip install 'tracehouse[bench]')"
        import duckdb

        out["versions"].update({"sqlite": sqlite3.sqlite_version, "duckdb": duckdb.__version__})
        stopped: dict[str, str] = {}
        for n in sizes:
            t0 = time.perf_counter()
            w = Workload.tod(n, batch=BATCH)
            rel = [relational(d) for d in w.batches]  # before any clock: every SQL peer gets rows ready
            log(f"tod store: {w.events:,} events generated and mapped in {time.perf_counter() - t0:.1f} s")
            runs = []
            for sysname in systems:
                if sysname in out["skipped"]:
                    continue
                for s, mode in MODES:
                    if s != sysname:
                        continue
                    key = f"{s} {mode}"
                    if key in stopped or key in skip:
                        continue
                    runs.append((key, s, mode))
            row_cache = None
            for key, s, mode in runs:
                if mode == "row" and row_cache is None:
                    row_cache = [_rows(t) for t in rel]
                batches = row_cache if mode == "row" else rel
                last = {}

                def one() -> float:
                    d = Path(tempfile.mkdtemp(prefix=f"tod-{s}-", dir=work))
                    try:
                        if s == "raw":
                            r = tod_ingest_peers.raw_append(d, w)
                            secs, nbytes = r.seconds, r.bytes
                        elif s == "tracehouse":
                            r = (
                                tod_ingest.tracehouse_stream(d, w, probe=False)
                                if mode == "stream"
                                else tod_ingest.tracehouse_bulk(d, w)
                            )
                            secs, nbytes = r.seconds, r.bytes
                        elif s == "sqlite":
                            secs, _cpu, nbytes = _sqlite(d, batches, mode == "row", keys=mode != "nokey")
                        elif s == "duckdb":
                            secs, _cpu, nbytes = _duckdb(d, batches, mode == "row", keys=mode != "nokey")
                        else:
                            secs, _cpu, nbytes = servers[s].run(d, batches, mode == "row", keys=mode != "nokey")
                    finally:
                        shutil.rmtree(d, ignore_errors=True)
                    last["bytes"] = nbytes
                    last["seconds"] = secs
                    return w.events / secs

                m = stat_protocol.repeat(one, budget_s=budget_s, max_runs=max_runs, min_runs=stat_protocol.MIN_RUNS)
                cell = {
                    "system": s,
                    "mode": mode,
                    "events": w.events,
                    "events_per_s": m["mean"],
                    "se": m["se"],
                    "rel_se": m["rel_se"],
                    "runs": m["runs"],
                    "converged": m["converged"],
                    "stopped": m["stopped"],
                    "bytes": last["bytes"],
                    "last_run_s": last["seconds"],
                }
                out["cells"].append(cell)
                log(
                    f"  {key:<18} {w.events:>12,} events {m['mean']:>14,.0f} ev/s ±{(m['rel_se'] or 0) * 100:.1f}% "
                    f"({m['runs']} runs) {last['bytes'] / 1e6:.1f} MB"
                )
                bigger = [x for x in sizes if x > n]
                projected = last["seconds"] * (bigger[0] / n) if bigger else 0.0
                if projected > cap_s and s not in ("raw", "tracehouse"):  # the subject and its bound run at every size
                    stopped[key] = (
                        f"not run beyond {w.events:,} events: one run took {last['seconds']:.1f} s, "
                        f"{bigger[0]:,} would take ~{projected:.0f} s (cap {cap_s:g} s per run)"
                    )
            w = rel = row_cache = None  # the batches go before the next size is generated (not `del`: one() reads w)
        out["stopped"] = stopped
    finally:
        for srv in reversed(stack):
            srv.__exit__(None, None, None)
    out["ratios"] = ratios(out)
    return out


def ratios(result: dict) -> list[dict]:
    """Per size: tracehouse stream / best peer's fast path (streaming), tracehouse bulk / best peer
    (bulk), each against raw (the upper bound)."""
    by: dict[int, dict[str, dict]] = {}
    for c in result["cells"]:
        by.setdefault(c["events"], {})[f"{c['system']} {c['mode']}"] = c
    out = []
    for n, cells in sorted(by.items()):
        peers_ = {k: v["events_per_s"] for k, v in cells.items() if k.split(" ")[0] not in ("raw", "tracehouse")}
        best = max(peers_.items(), key=lambda kv: kv[1]) if peers_ else None
        raw = cells.get("raw append")
        row = {
            "events": n,
            "best_peer": best[0] if best else None,
            "best_peer_events_per_s": best[1] if best else None,
            "raw_events_per_s": raw["events_per_s"] if raw else None,
        }
        for mode in ("stream", "bulk"):
            th = cells.get(f"tracehouse {mode}")
            row[f"tracehouse_{mode}"] = th["events_per_s"] if th else None
            row[f"{mode}_vs_best_peer"] = th["events_per_s"] / best[1] if th and best else None
            row[f"{mode}_vs_raw"] = th["events_per_s"] / raw["events_per_s"] if th and raw else None
        out.append(row)
    return out


def machine_note() -> dict:
    return {"loadavg": list(os.getloadavg())}
