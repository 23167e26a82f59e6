"""The systems of `tracehouse bench write`, each started on loopback by the bench itself.

Owns the face every system has, the ones that come with tracehouse, and how a system is found
by name (`system`):

    with System(workdir, workload) as s:     # start (and set up schema 2), stop at exit
        s.measure(writers, rows_per_batch, seconds) -> Sample

A `Sample` is what one timed run acknowledged: rows whose write the system
confirmed (HTTP 2xx, durable TCP offset, COMMIT), in how long, with how many
errors. Every system gets the same rows: seed 003's QoS rows (13 id params once
per writer, 48 result params per row; schema 2 where the system has tables) or
TSBS cpu-only rows. Client-side work is kept out of the timed region: SQL and
COPY payloads are rendered once per batch size, before the clock starts.

  tracehouse-http    tracehouse serve, line protocol over HTTP, 204 = durable (fsync batch)
  tracehouse-tcp     tracehouse serve, line protocol over TCP with durable offsets
  tracehouse-arrow   tracehouse serve, Arrow IPC over HTTP, 204 = durable
  tracehouse-*-written  the same three with `serve --ack written`: acknowledged once in the WAL
                     (survives a crash of the server, fsynced within --group-commit-ms), the
                     contract of QuestDB's default
  sqlite             stdlib sqlite3, WAL, synchronous=FULL, one transaction per batch (executemany)

The peers that are database servers of their own (QuestDB, PostgreSQL, MariaDB: `questdb`,
`questdb-sync`, `questdb-tcp`, `postgres-copy`, `postgres-insert`, `mariadb`) come with the
benchmark suite, a separate distribution in tracehouse's source tree (bench-suite/, installed by
`make setup`), which declares each under the entry-point group `tracehouse.bench_peers` with this
same face; without it they are reported as skipped, saying how to install it.

The tracehouse writers are the Rust load generator (`_core.run_load`); the SQL writers are
Python threads (one connection each) sending pre-rendered statements, whose network waits
release the GIL.
"""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import _core
from ..child_processes import env_for_child
from ..errors import TracehouseError


class Unavailable(TracehouseError):
    """A peer system cannot be started here (not installed); the bench skips it."""


@dataclass
class Sample:
    rows: int
    seconds: float
    errors: int = 0
    loadgen_cpu_s: float = 0.0

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process(proc: subprocess.Popen | None, timeout: float = 60) -> None:
    """Stop a server the bench started: SIGTERM, then SIGKILL when it is not gone in `timeout` s."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()


def wait_for(check, timeout: float, what: str, proc: subprocess.Popen | None = None, log: Path | None = None):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise Unavailable(f"{what} exited with {proc.returncode}: {log.read_text()[-2000:] if log else ''}")
        try:
            r = check()
            if r:
                return r
        except Exception as e:  # noqa: BLE001 - not up yet
            last = e
        time.sleep(0.1)
    raise Unavailable(f"{what} not ready in {timeout:g} s ({last})")


# -- rows ------------------------------------------------------------------------------


def qos_values(n: int, seed: int = 42) -> list[list]:
    """`n` rows of the 48 result params (realistic ranges), as Python values."""
    rng = np.random.default_rng(seed)
    cols = []
    for _name, typ, lo, hi in _core.QOS_RESULT_PARAMS:
        if typ == "float64":
            cols.append(np.round(rng.uniform(lo, hi, n), 3).tolist())
        else:
            cols.append(rng.integers(int(lo), int(hi) + 1, n).tolist())
    return [list(r) for r in zip(*cols)]


def cpu_values(n: int, seed: int = 42) -> list[list]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 101, (n, 10)).tolist()


POOL = 64  # distinct rows rendered; a batch repeats them (values do not matter to a write path)


class SqlPayloads:
    """Pre-rendered statements per batch size for a SQL system (schema 2 for QoS)."""

    def __init__(self, workload: str, dialect: str) -> None:
        self.workload = workload
        self.dialect = dialect
        if workload == "qos":
            self.cols = [c[0] for c in _core.QOS_RESULT_PARAMS]
            self.table = "average_stats"
            pool = qos_values(POOL)
        else:
            self.cols = list(_core.CPU_FIELDS)
            self.table = "cpu"
            pool = cpu_values(POOL)
        self.pool = pool
        self.pool_txt = [",".join(map(str, r)) for r in pool]  # 64 rows rendered once
        self._cache: dict[tuple, object] = {}
        self._cache_n = None

    def ddl(self) -> list[str]:
        if self.workload == "qos":
            ids = ", ".join(
                f'"{c}" TEXT' if self.dialect != "mariadb" else f"`{c}` VARCHAR(64)" for c in _core.QOS_ID_PARAMS
            )
            res = ", ".join(
                f"{c} {'DOUBLE PRECISION' if t == 'float64' and self.dialect == 'postgres' else 'DOUBLE' if t == 'float64' else 'BIGINT'}"
                for c, t, _lo, _hi in _core.QOS_RESULT_PARAMS
            )
            pk = {"postgres": "id INT PRIMARY KEY", "mariadb": "id INT PRIMARY KEY", "sqlite": "id INTEGER PRIMARY KEY"}
            auto = {
                "postgres": "id BIGSERIAL PRIMARY KEY",
                "mariadb": "id BIGINT AUTO_INCREMENT PRIMARY KEY",
                "sqlite": "id INTEGER PRIMARY KEY",
            }
            return [
                f"CREATE TABLE measurements_id ({pk[self.dialect]}, {ids})",
                f"CREATE TABLE average_stats ({auto[self.dialect]}, measurement_id INT NOT NULL REFERENCES "
                f"measurements_id(id), ts BIGINT NOT NULL, {res})",
                "CREATE INDEX stats_mid ON average_stats (measurement_id)",
            ]
        tags = ", ".join(f"{t} VARCHAR(32)" for t in _core.CPU_TAGS)
        auto = {
            "postgres": "id BIGSERIAL PRIMARY KEY",
            "mariadb": "id BIGINT AUTO_INCREMENT PRIMARY KEY",
            "sqlite": "id INTEGER PRIMARY KEY",
        }
        return [
            f"CREATE TABLE hosts (id INT PRIMARY KEY, {tags})",
            f"CREATE TABLE cpu ({auto[self.dialect]}, host_id INT NOT NULL REFERENCES hosts(id), ts BIGINT NOT NULL, "
            + ", ".join(f"{c} BIGINT" for c in self.cols)
            + ")",
        ]

    def id_rows(self, writers: int) -> tuple[str, list[tuple]]:
        """The identity rows (one per writer: schema 2's measurementsId / TSBS hosts)."""
        if self.workload == "qos":
            n = len(_core.QOS_ID_PARAMS)
            rows = [(w, *[str(w * 31 + k) for k in range(n)]) for w in range(writers)]
            table, nparams = "measurements_id", n + 1
        else:
            rows = [
                (w, f"host_{w}", "eu-west-1", "eu-west-1a", "1", "Ubuntu16.10", "x64", "SF", "1", "0", "test")
                for w in range(writers)
            ]
            table, nparams = "hosts", 11
        ph = "?" if self.dialect == "sqlite" else "%s"
        return f"INSERT INTO {table} VALUES ({', '.join([ph] * nparams)})", rows

    def _rows(self, n: int) -> list[list]:
        return (self.pool * (n // POOL + 1))[:n]

    def _cached(self, key: tuple, make):
        if self._cache_n != key[-1]:  # one batch size at a time: 128 writers x 10,000 rows is ~0.5 GB of SQL
            self._cache.clear()
            self._cache_n = key[-1]
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    @staticmethod
    def _repeat(units: list[str], sep: str, n: int) -> str:
        """`n` of the pool's rendered rows joined by `sep`, by string repetition (no per-row work)."""
        full, rest = divmod(n, len(units))
        block = sep.join(units)
        parts = [block] * full + ([sep.join(units[:rest])] if rest else [])
        return sep.join(parts)

    def insert_sql(self, writer: int, n: int) -> str:
        """One multi-row INSERT of `n` rows for `writer` (schema 2: its id is the foreign key)."""

        def make():
            fk = "measurement_id" if self.workload == "qos" else "host_id"
            ts = 1_700_000_000_000_000_000
            units = [f"({writer},{ts},{t})" for t in self.pool_txt]
            return f"INSERT INTO {self.table} ({fk}, ts, {', '.join(self.cols)}) VALUES " + self._repeat(units, ",", n)

        return self._cached(("insert", writer, n), make)

    def copy_data(self, writer: int, n: int) -> bytes:
        def make():
            ts = 1_700_000_000_000_000_000
            units = [f"{writer}\t{ts}\t" + t.replace(",", "\t") for t in self.pool_txt]
            return (self._repeat(units, "\n", n) + "\n").encode()

        return self._cached(("copy", writer, n), make)

    def copy_sql(self) -> str:
        fk = "measurement_id" if self.workload == "qos" else "host_id"
        return f"COPY {self.table} ({fk}, ts, {', '.join(self.cols)}) FROM STDIN"

    def param_rows(self, writer: int, n: int) -> tuple[str, list[tuple]]:
        def make():
            fk = "measurement_id" if self.workload == "qos" else "host_id"
            ts = 1_700_000_000_000_000_000
            units = [(writer, ts, *r) for r in self.pool]
            full, rest = divmod(n, len(units))
            sql = (
                f"INSERT INTO {self.table} ({fk}, ts, {', '.join(self.cols)}) "
                f"VALUES ({', '.join('?' * (len(self.cols) + 2))})"
            )
            return sql, units * full + units[:rest]

        return self._cached(("params", writer, n), make)


def ensure_writer_ids(system, writers: int, idempotent) -> None:
    """Schema 2's identity rows, one per writer, exist before any batch references them.

    `system` has `payloads`, `connect()` (autocommit) and `ids_for` (writers covered so far);
    `idempotent` turns the INSERT into the dialect's insert-or-ignore.
    """
    if writers <= system.ids_for:
        return
    sql, rows = system.payloads.id_rows(writers)
    conn = system.connect()
    try:
        conn.cursor().executemany(idempotent(sql), rows)
    finally:
        conn.close()
    system.ids_for = writers


def threaded(writers: int, seconds: float, make_conn, write_batch) -> Sample:
    """`writers` threads, each with its own connection, writing batches closed-loop for `seconds`."""
    conns = [make_conn(w) for w in range(writers)]
    counts = [0] * writers
    errors = [0] * writers
    start = threading.Barrier(writers + 1)
    deadline = [0.0]

    def run(w: int) -> None:
        start.wait()
        while time.perf_counter() < deadline[0]:
            try:
                counts[w] += write_batch(conns[w], w)
            except Exception:  # noqa: BLE001 - counted; the run goes on
                errors[w] += 1
                if errors[w] > 100:
                    return

    threads = [threading.Thread(target=run, args=(w,), daemon=True) for w in range(writers)]
    for t in threads:
        t.start()
    t0 = time.perf_counter()
    deadline[0] = t0 + seconds
    start.wait()
    for t in threads:
        t.join()
    secs = time.perf_counter() - t0
    for c in conns:
        try:
            c.close()
        except Exception:  # noqa: BLE001
            pass
    return Sample(sum(counts), secs, sum(errors))


# -- tracehouse --------------------------------------------------------------------------


class Tracehouse:
    """`tracehouse serve` in a fresh store; the Rust load generator writes to it."""

    protocols = {"tracehouse-http": "http", "tracehouse-tcp": "tcp-acks", "tracehouse-arrow": "arrow"}
    ack = "durable"  # serve --ack

    def __init__(
        self,
        workdir: Path,
        workload: str,
        name: str = "tracehouse-http",
        fsync: str = "batch",
        before_start=None,
        serve_args: tuple = (),
    ) -> None:
        self.dir = Path(workdir) / f"tracehouse-{self.ack}"
        self.serve_args = tuple(serve_args)
        self.workload = workload
        self.name = name
        self.fsync = fsync
        self.proc = None
        self.before_start = before_start  # called with the store's path before serve opens it (loads data)

    def __enter__(self) -> Tracehouse:
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        self.store_path = self.dir / "store"
        if self.before_start is not None:
            self.before_start(self.store_path)
        ready = self.dir / "ready.json"
        self.log = self.dir / "server.log"
        cmd = [
            sys.executable,
            "-m",
            "tracehouse.cli",
            "--store",
            str(self.dir / "store"),
            "serve",
            "--port",
            "0",
            "--tcp-port",
            "0",
            "--fsync",
            self.fsync,
            "--ack",
            self.ack,
            "--ready-file",
            str(ready),
            "--quiet",
            "--max-inflight",
            "512M",
            *self.serve_args,
        ]
        # It stops with this process even when a SIGKILL leaves no `__exit__` to run.
        self.proc = subprocess.Popen(cmd, stdout=open(self.log, "wb"), stderr=subprocess.STDOUT, env=env_for_child())
        info = wait_for(
            lambda: ready.exists() and json.loads(ready.read_text()), 60, "tracehouse serve", self.proc, self.log
        )
        self.port, self.tcp_port, self.pid = info["http_port"], info["tcp_port"], info["pid"]
        return self

    def __exit__(self, *exc) -> None:
        stop_process(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)

    def measure(self, writers: int, rows: int, seconds: float, name: str | None = None) -> Sample:
        from ..workload.loadgen import arrow_bodies_stamped, self_cpu_s

        proto = self.protocols[name or self.name]
        kw: dict = {}
        bucket = f"{self.workload}_{proto.replace('-', '_')}"
        if proto == "arrow":
            if getattr(self, "_bodies_for", None) != rows:
                self._bodies, self._bodies_for = arrow_bodies_stamped(self.workload, rows), rows
            kw = {
                "bodies": self._bodies[0],
                "ts_offsets": self._bodies[1],
                "path": f"/api/v2/arrow?trace={bucket}&type={self.workload}",
            }
            proto_arg = "http-bodies"
        else:
            kw = {"path": f"/api/v2/write?bucket={bucket}"}
            proto_arg = proto
        port = self.tcp_port if proto.startswith("tcp") else self.port
        c0 = self_cpu_s()
        r = _core.run_load(
            workload=self.workload,
            protocol=proto_arg,
            host="127.0.0.1",
            port=port,
            bucket=bucket,
            agents=writers,
            rows_per_batch=rows,
            duration_s=seconds,
            **kw,
        )
        return Sample(r["rows_acked"], r["elapsed_s"], r["errors"], self_cpu_s() - c0)


class TracehouseWritten(Tracehouse):
    """`tracehouse serve --ack written`: the same protocols, acknowledged once in the WAL."""

    protocols = {f"{k}-written": v for k, v in Tracehouse.protocols.items()}
    ack = "written"


# -- SQLite --------------------------------------------------------------------------------


class SQLite:
    def __init__(self, workdir: Path, workload: str, name: str = "sqlite") -> None:
        self.dir = Path(workdir) / "sqlite"
        self.workload = workload
        self.name = name

    def __enter__(self) -> SQLite:
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        self.path = self.dir / "bench.sqlite"
        self.payloads = SqlPayloads(self.workload, "sqlite")
        db = self.connect()
        for stmt in self.payloads.ddl():
            db.execute(stmt)
        db.close()
        self.ids_for = 0
        self.pid = None
        return self

    def connect(self):
        db = sqlite3.connect(self.path, isolation_level=None, timeout=60, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        return db

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def measure(self, writers: int, rows: int, seconds: float, name: str | None = None) -> Sample:
        ensure_writer_ids(self, writers, lambda sql: sql.replace("INSERT", "INSERT OR IGNORE"))
        batches = {w: self.payloads.param_rows(w, rows) for w in range(writers)}

        def write(db, w):
            sql, prows = batches[w]
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(sql, prows)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return rows

        return threaded(writers, seconds, lambda w: self.connect(), write)


BUILTIN: dict[str, type] = {
    "tracehouse-http": Tracehouse,
    "tracehouse-tcp": Tracehouse,
    "tracehouse-arrow": Tracehouse,
    "tracehouse-http-written": TracehouseWritten,
    "tracehouse-tcp-written": TracehouseWritten,
    "tracehouse-arrow-written": TracehouseWritten,
    "sqlite": SQLite,
}
PEER_GROUP = "tracehouse.bench_peers"  # entry points: system name -> "module:Class"
# The benchmark suite's peers, named so that asking for one without the suite says how to get it.
SUITE_PEERS = ("questdb", "questdb-sync", "questdb-tcp", "postgres-copy", "postgres-insert", "mariadb")
SUITE_MISSING = (
    "is a peer of tracehouse's benchmark suite, which is not installed: pip install ./bench-suite "
    "from tracehouse's source tree (make setup installs it)"
)


def names() -> list[str]:
    """Every system that can be asked for: ours, then the installed peers'."""
    from importlib.metadata import entry_points

    return [*BUILTIN, *(ep.name for ep in entry_points(group=PEER_GROUP) if ep.name not in BUILTIN)]


def system(name: str) -> type:
    """The class of the system called `name`. Unavailable for a peer of the benchmark suite
    when the suite is not installed (the bench skips it and says why); ValueError for a name
    nobody declares."""
    if name in BUILTIN:
        return BUILTIN[name]
    from importlib.metadata import entry_points

    for ep in entry_points(group=PEER_GROUP, name=name):
        return ep.load()
    if name in SUITE_PEERS:
        raise Unavailable(f"{name} {SUITE_MISSING}")
    raise ValueError(f"unknown system {name!r}: expected {', '.join(dict.fromkeys([*names(), *SUITE_PEERS]))}")
