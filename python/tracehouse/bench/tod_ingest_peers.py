"""The in-process systems `tracehouse bench ingest` measures tracehouse against, fed the same
in-memory TOD workload.

Owns `Workload` (the batches of a generated TOD run, kept in memory: the "live
source" every system ingests, with the same events and the same batch
boundaries), `Run` (what one measured ingestion produced) and the peers:

  raw          the column buffers appended to one file with os.writev, fsync at
               the end: the upper bound (no format, no index, nothing queryable)
  sqlite       stdlib sqlite3, WAL journal, one table per event type, a prepared
               INSERT run by executemany per batch, all in one transaction; turning
               Arrow batches into Python rows is part of its cost (that is how a
               user feeds SQLite)
  duckdb       a native on-disk database, one table per event type, each Arrow
               batch inserted with INSERT INTO ... SELECT, one transaction,
               COMMIT and CHECKPOINT timed
  duckdb-bulk  CREATE TABLE AS from one Arrow table per event type, CHECKPOINT timed

Each peer takes a fresh directory and the workload and returns a `Run`; the
timed region of every peer ends when its data is durable (fsync, COMMIT or
CHECKPOINT). Counting what was stored and measuring the bytes happen after the
clock stops. They need nothing but tracehouse's own dependencies (sqlite3, DuckDB); the
benchmark suite's TOD store experiment (bench-suite) reuses them beside its server peers.
"""

from __future__ import annotations

import os
import resource
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

Tick = Callable[[int], None]  # called with the number of events just ingested


def _no_tick(n: int) -> None:
    pass


@dataclass
class Workload:
    """Batches of one generated trace, in arrival order, held in memory.

    `batches[i]` is what the source delivered in its i-th call: {event type:
    RecordBatch}. `max_ts[i]` is the largest ts of that call (ts grows over the
    whole trace), used to measure how far a reader lags behind the writer.
    """

    format: str
    batches: list[dict[str, pa.RecordBatch]]
    schemas: dict[str, pa.Schema]
    producers: list[dict] = field(default_factory=list)
    params: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.per_type: dict[str, int] = {t: 0 for t in self.schemas}
        self.max_ts: list[int] = []
        self.nbytes = 0
        for d in self.batches:
            m = None
            for t, b in d.items():
                self.per_type[t] += b.num_rows
                self.nbytes += b.nbytes
                if b.num_rows:
                    last = b.column("ts")[b.num_rows - 1].as_py()
                    m = last if m is None else max(m, last)
            self.max_ts.append(m if m is not None else (self.max_ts[-1] if self.max_ts else 0))
        self.events = sum(self.per_type.values())

    @classmethod
    def tod(cls, events: int, *, batch: int = 10_000, seed: int = 42, threads: int = 10) -> Workload:
        """Generate a TOD trace of `events` events, `batch` events per call (not timed)."""
        from .. import _core
        from ..formats import tod

        gen = _core.TodGenerator(events=events, seed=seed, threads=threads)
        batches = []
        while (d := gen.next_batches(max_events=batch)) is not None:
            batches.append(d)
        w = cls(
            "tod",
            batches,
            dict(_core.tod_schemas()),
            tod.producers(threads),
            {"events": events, "batch": batch, "seed": seed, "threads": threads},
        )
        if w.events != gen.emitted:
            raise AssertionError(f"workload holds {w.events} events, the generator emitted {gen.emitted}")
        return w

    def tables(self, *, combine: bool = False) -> dict[str, pa.Table]:
        """One Arrow table per event type: the batches as chunks (no copy), or with
        `combine` one contiguous chunk per column (a copy: what "one Arrow table" bulk
        loads are given, so no system pays for thousands of small chunks)."""
        out: dict[str, list[pa.RecordBatch]] = {t: [] for t in self.schemas}
        for d in self.batches:
            for t, b in d.items():
                out[t].append(b)
        tables = {t: pa.Table.from_batches(bs, schema=self.schemas[t]) for t, bs in out.items() if bs}
        return {t: tb.combine_chunks() for t, tb in tables.items()} if combine else tables


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Stopwatch:
    """Wall time, and this process's CPU time (every thread, user + system), since creation.

    The CPU time does not move with the neighbours' load on a shared machine, so
    events per CPU-second compare systems even when wall times are noisy.
    """

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.c0 = _cpu()

    def stop(self) -> tuple[float, float]:
        return time.perf_counter() - self.t0, _cpu() - self.c0


@dataclass
class Run:
    """One measured ingestion: `events` in, `stored` counted back, `bytes` on disk."""

    system: str
    mode: str
    events: int
    seconds: float
    bytes: int
    cpu_seconds: float | None = None  # CPU of this process in the timed region (all threads)
    stored: int | None = None  # events counted in the system after the run (None: cannot count)
    notes: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else float("inf")

    def to_json(self) -> dict:
        d = {
            "system": self.system,
            "mode": self.mode,
            "events": self.events,
            "stored": self.stored,
            "seconds": self.seconds,
            "events_per_s": self.events_per_s,
            "bytes": self.bytes,
            "cpu_seconds": self.cpu_seconds,
            "events_per_cpu_s": self.events / self.cpu_seconds if self.cpu_seconds else None,
            "bytes_per_event": self.bytes / self.events if self.events else None,
            "notes": self.notes,
        }
        d.update(self.extra)
        return d


def dir_bytes(path: Path) -> int:
    """Apparent size of every file under `path`."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(root, f)).st_size
            except FileNotFoundError:
                pass  # a temporary file removed while we walked
    return total


# -- raw append ----------------------------------------------------------------------


def raw_append(directory: Path, w: Workload, tick: Tick = _no_tick) -> Run:
    """Append every batch's buffers (values and validity) to one file; fsync at the end."""
    path = Path(directory) / "events.bin"
    # Buffer lists are built before the clock starts: the upper bound pays for no bookkeeping.
    plan = [
        [[buf for col in b.columns for buf in col.buffers() if buf is not None] for b in d.values()] for d in w.batches
    ]
    counts = [sum(b.num_rows for b in d.values()) for d in w.batches]
    sw = Stopwatch()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    try:
        for bufs_per_type, n in zip(plan, counts):
            for bufs in bufs_per_type:
                expected = sum(b.size for b in bufs)
                if os.writev(fd, bufs) != expected:
                    raise OSError(f"short write to {path} (disk full?)")
            tick(n)
        os.fsync(fd)
    finally:
        os.close(fd)
    seconds, cpu = sw.stop()
    return Run(
        "raw",
        "append+fsync",
        w.events,
        seconds,
        path.stat().st_size,
        cpu_seconds=cpu,
        stored=None,
        notes="column buffers, no format; the upper bound",
    )


# -- SQLite --------------------------------------------------------------------------


def _sqlite_type(t: pa.DataType) -> str:
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return "INTEGER"
    if pa.types.is_floating(t):
        return "REAL"
    return "TEXT"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def sqlite_stream(directory: Path, w: Workload, tick: Tick = _no_tick) -> Run:
    """Prepared INSERTs, executemany per batch, one transaction, WAL journal, COMMIT timed."""
    path = Path(directory) / "bench.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    inserts = {}
    for t, schema in w.schemas.items():
        cols = ", ".join(f"{_q(f.name)} {_sqlite_type(f.type)}{'' if f.nullable else ' NOT NULL'}" for f in schema)
        db.execute(f"CREATE TABLE {_q(t)} ({cols})")
        inserts[t] = f"INSERT INTO {_q(t)} VALUES ({', '.join('?' * len(schema))})"
    sw = Stopwatch()
    db.execute("BEGIN")
    for d in w.batches:
        n = 0
        for t, b in d.items():
            db.executemany(inserts[t], zip(*(c.to_pylist() for c in b.columns)))
            n += b.num_rows
        tick(n)
    db.execute("COMMIT")
    seconds, cpu = sw.stop()
    stored = sum(db.execute(f"SELECT count(*) FROM {_q(t)}").fetchone()[0] for t in w.schemas)
    db.close()
    return Run(
        "sqlite",
        "stream 1txn WAL",
        w.events,
        seconds,
        dir_bytes(directory),
        cpu_seconds=cpu,
        stored=stored,
        notes=f"sqlite {sqlite3.sqlite_version}, executemany of Python rows",
    )


# -- DuckDB --------------------------------------------------------------------------


def duckdb_connect(path: Path):
    import duckdb

    # No progress bar: it prints to stdout (breaking --json) on statements over 2 s.
    con = duckdb.connect(str(path))
    con.execute("SET enable_progress_bar = false")
    return con


def _duckdb_count(con, names) -> int:
    return sum(con.execute(f"SELECT count(*) FROM {_q(t)}").fetchone()[0] for t in names)


def duckdb_stream(directory: Path, w: Workload, tick: Tick = _no_tick) -> Run:
    """Each Arrow batch inserted into a native table as it arrives; COMMIT + CHECKPOINT timed."""
    import duckdb

    path = Path(directory) / "bench.duckdb"
    con = duckdb_connect(path)
    for t, schema in w.schemas.items():
        con.register("_src", pa.Table.from_batches([], schema=schema))
        con.execute(f"CREATE TABLE {_q(t)} AS SELECT * FROM _src LIMIT 0")
        con.unregister("_src")
    con.execute("CHECKPOINT")
    inserts = {t: f"INSERT INTO {_q(t)} SELECT * FROM _src" for t in w.schemas}
    sw = Stopwatch()
    con.execute("BEGIN TRANSACTION")
    for d in w.batches:
        n = 0
        for t, b in d.items():
            con.register("_src", b)
            con.execute(inserts[t])
            con.unregister("_src")
            n += b.num_rows
        tick(n)
    con.execute("COMMIT")
    con.execute("CHECKPOINT")
    seconds, cpu = sw.stop()
    stored = _duckdb_count(con, w.schemas)
    con.close()
    return Run(
        "duckdb",
        "stream INSERT",
        w.events,
        seconds,
        dir_bytes(directory),
        cpu_seconds=cpu,
        stored=stored,
        notes=f"duckdb {duckdb.__version__}, native table, 1 txn",
    )


def duckdb_bulk(directory: Path, w: Workload, tick: Tick = _no_tick) -> Run:
    """CREATE TABLE AS from one contiguous Arrow table per event type (DuckDB's own bulk load)."""
    import duckdb

    path = Path(directory) / "bench.duckdb"
    tables = w.tables(combine=True)  # one contiguous table per type, built before the clock starts
    con = duckdb_connect(path)
    sw = Stopwatch()
    for t, table in tables.items():
        con.register("_src", table)
        con.execute(f"CREATE TABLE {_q(t)} AS SELECT * FROM _src")
        con.unregister("_src")
        tick(table.num_rows)
    con.execute("CHECKPOINT")
    seconds, cpu = sw.stop()
    stored = _duckdb_count(con, tables)
    con.close()
    return Run(
        "duckdb",
        "bulk CTAS",
        w.events,
        seconds,
        dir_bytes(directory),
        cpu_seconds=cpu,
        stored=stored,
        notes=f"duckdb {duckdb.__version__}, one Arrow table per type",
    )
