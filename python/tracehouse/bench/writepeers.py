"""The systems of `tracehouse bench write`, each started on loopback by the bench itself.

Owns one class per system with the same face:

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
  questdb            QuestDB (Maven Central jar), ILP over HTTP: 204 after commit (no fsync by default,
                     cairo.commit.mode=nosync: survives a crash of QuestDB, not a power loss)
  questdb-sync       the same with cairo.commit.mode=sync: 204 once the commit is flushed to disk
  questdb-tcp        QuestDB ILP over TCP: nothing acknowledged (rows sent)
  postgres-copy      PostgreSQL (Debian package), COPY FROM STDIN per batch, autocommit (synchronous_commit on)
  postgres-insert    PostgreSQL, multi-row INSERTs (<= 1,000 rows each) per batch, one transaction
  mariadb            MariaDB (Debian package), one multi-row INSERT per batch, autocommit, InnoDB
                     (innodb_flush_log_at_trx_commit=1)
  sqlite             stdlib sqlite3, WAL, synchronous=FULL, one transaction per batch (executemany)

The tracehouse and QuestDB writers are the Rust load generator (`_core.run_load`);
the SQL writers are Python threads (one connection each) sending pre-rendered
statements, whose network waits release the GIL.

Over 600 lines: one class per system with the same face (tracehouse HTTP/TCP, QuestDB,
PostgreSQL, MariaDB, SQLite); each is short.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import _core
from ..child_processes import env_for_child
from ..errors import TracehouseError

PG_BIN = Path("/usr/lib/postgresql")
QUESTDB_VERSION = "9.1.0"
INSERT_ROWS = 1000  # rows of one PostgreSQL multi-row INSERT statement at most


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
            ids = ", ".join(f'"{c}" TEXT' if self.dialect != "mariadb" else f"`{c}` VARCHAR(64)"
                            for c in _core.QOS_ID_PARAMS)
            res = ", ".join(f"{c} {'DOUBLE PRECISION' if t == 'float64' and self.dialect == 'postgres' else 'DOUBLE' if t == 'float64' else 'BIGINT'}"
                            for c, t, _lo, _hi in _core.QOS_RESULT_PARAMS)
            pk = {"postgres": "id INT PRIMARY KEY", "mariadb": "id INT PRIMARY KEY", "sqlite": "id INTEGER PRIMARY KEY"}
            auto = {"postgres": "id BIGSERIAL PRIMARY KEY", "mariadb": "id BIGINT AUTO_INCREMENT PRIMARY KEY",
                    "sqlite": "id INTEGER PRIMARY KEY"}
            return [
                f"CREATE TABLE measurements_id ({pk[self.dialect]}, {ids})",
                f"CREATE TABLE average_stats ({auto[self.dialect]}, measurement_id INT NOT NULL REFERENCES "
                f"measurements_id(id), ts BIGINT NOT NULL, {res})",
                "CREATE INDEX stats_mid ON average_stats (measurement_id)",
            ]
        tags = ", ".join(f"{t} VARCHAR(32)" for t in _core.CPU_TAGS)
        auto = {"postgres": "id BIGSERIAL PRIMARY KEY", "mariadb": "id BIGINT AUTO_INCREMENT PRIMARY KEY",
                "sqlite": "id INTEGER PRIMARY KEY"}
        return [f"CREATE TABLE hosts (id INT PRIMARY KEY, {tags})",
                f"CREATE TABLE cpu ({auto[self.dialect]}, host_id INT NOT NULL REFERENCES hosts(id), ts BIGINT NOT NULL, "
                + ", ".join(f"{c} BIGINT" for c in self.cols) + ")"]

    def id_rows(self, writers: int) -> tuple[str, list[tuple]]:
        """The identity rows (one per writer: schema 2's measurementsId / TSBS hosts)."""
        if self.workload == "qos":
            n = len(_core.QOS_ID_PARAMS)
            rows = [(w, *[str(w * 31 + k) for k in range(n)]) for w in range(writers)]
            table, nparams = "measurements_id", n + 1
        else:
            rows = [(w, f"host_{w}", "eu-west-1", "eu-west-1a", "1", "Ubuntu16.10", "x64", "SF", "1", "0", "test")
                    for w in range(writers)]
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
            sql = (f"INSERT INTO {self.table} ({fk}, ts, {', '.join(self.cols)}) "
                   f"VALUES ({', '.join('?' * (len(self.cols) + 2))})")
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

    def __init__(self, workdir: Path, workload: str, name: str = "tracehouse-http", fsync: str = "batch",
                 before_start=None, serve_args: tuple = ()) -> None:
        self.dir = Path(workdir) / f"tracehouse-{self.ack}"
        self.serve_args = tuple(serve_args)
        self.workload = workload
        self.name = name
        self.fsync = fsync
        self.proc = None
        self.before_start = before_start  # called with the store's path before serve opens it (loads data)

    def __enter__(self) -> "Tracehouse":
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        self.store_path = self.dir / "store"
        if self.before_start is not None:
            self.before_start(self.store_path)
        ready = self.dir / "ready.json"
        self.log = self.dir / "server.log"
        cmd = [sys.executable, "-m", "tracehouse.cli", "--store", str(self.dir / "store"), "serve", "--port", "0",
               "--tcp-port", "0", "--fsync", self.fsync, "--ack", self.ack, "--ready-file", str(ready), "--quiet",
               "--max-inflight", "512M", *self.serve_args]
        # It stops with this process even when a SIGKILL leaves no `__exit__` to run.
        self.proc = subprocess.Popen(cmd, stdout=open(self.log, "wb"), stderr=subprocess.STDOUT, env=env_for_child())
        info = wait_for(lambda: ready.exists() and json.loads(ready.read_text()), 60, "tracehouse serve", self.proc,
                        self.log)
        self.port, self.tcp_port, self.pid = info["http_port"], info["tcp_port"], info["pid"]
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def measure(self, writers: int, rows: int, seconds: float, name: str | None = None) -> Sample:
        from .load import arrow_bodies_stamped, self_cpu_s

        proto = self.protocols[name or self.name]
        kw: dict = {}
        bucket = f"{self.workload}_{proto.replace('-', '_')}"
        if proto == "arrow":
            if getattr(self, "_bodies_for", None) != rows:
                self._bodies, self._bodies_for = arrow_bodies_stamped(self.workload, rows), rows
            kw = {"bodies": self._bodies[0], "ts_offsets": self._bodies[1],
                  "path": f"/api/v2/arrow?trace={bucket}&type={self.workload}"}
            proto_arg = "http-bodies"
        else:
            kw = {"path": f"/api/v2/write?bucket={bucket}"}
            proto_arg = proto
        port = self.tcp_port if proto.startswith("tcp") else self.port
        c0 = self_cpu_s()
        r = _core.run_load(workload=self.workload, protocol=proto_arg, host="127.0.0.1", port=port, bucket=bucket,
                           agents=writers, rows_per_batch=rows, duration_s=seconds, **kw)
        return Sample(r["rows_acked"], r["elapsed_s"], r["errors"], self_cpu_s() - c0)


class TracehouseWritten(Tracehouse):
    """`tracehouse serve --ack written`: the same protocols, acknowledged once in the WAL."""

    protocols = {f"{k}-written": v for k, v in Tracehouse.protocols.items()}
    ack = "written"


# -- QuestDB -----------------------------------------------------------------------------


def questdb_jar() -> Path:
    """The QuestDB jar from the local Maven repository, fetched from Maven Central when missing."""
    env = os.environ.get("TRACEHOUSE_QUESTDB_JAR")
    if env:
        return Path(env)
    jar = Path.home() / f".m2/repository/org/questdb/questdb/{QUESTDB_VERSION}/questdb-{QUESTDB_VERSION}.jar"
    if not jar.exists():
        if not shutil.which("mvn"):
            raise Unavailable("QuestDB jar not found and mvn is not installed (set TRACEHOUSE_QUESTDB_JAR)")
        r = subprocess.run(["mvn", "-q", "dependency:get", f"-Dartifact=org.questdb:questdb:{QUESTDB_VERSION}"],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0 or not jar.exists():
            raise Unavailable(f"could not fetch QuestDB {QUESTDB_VERSION} with mvn: {r.stdout[-500:]}{r.stderr[-500:]}")
    return jar


class QuestDB:
    commit_mode = "nosync"  # QuestDB's default: a commit flushes nothing (the page cache keeps it)

    def __init__(self, workdir: Path, workload: str, name: str = "questdb") -> None:
        self.dir = Path(workdir) / f"questdb-{self.commit_mode}"
        self.workload = workload
        self.name = name
        self.proc = None

    def __enter__(self) -> "QuestDB":
        if not shutil.which("java"):
            raise Unavailable("java is not installed")
        jar = questdb_jar()
        shutil.rmtree(self.dir, ignore_errors=True)
        (self.dir / "conf").mkdir(parents=True)
        self.port, self.tcp_port, pg = free_port(), free_port(), free_port()
        (self.dir / "conf" / "server.conf").write_text(
            f"http.bind.to=127.0.0.1:{self.port}\nhttp.min.enabled=false\n"
            f"line.tcp.net.bind.to=127.0.0.1:{self.tcp_port}\npg.net.bind.to=127.0.0.1:{pg}\n"
            f"line.udp.enabled=false\ntelemetry.enabled=false\ncairo.commit.mode={self.commit_mode}\n")
        self.log = self.dir / "questdb.log"
        self.proc = subprocess.Popen(["java", "-Xmx2g", "-p", str(jar), "-m", "io.questdb/io.questdb.ServerMain",
                                      "-d", str(self.dir)], stdout=open(self.log, "wb"), stderr=subprocess.STDOUT)

        def ping():
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/ping", timeout=2) as r:
                return r.status == 204

        wait_for(ping, 90, "QuestDB", self.proc, self.log)
        self.pid = self.proc.pid
        self.version = QUESTDB_VERSION
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def count(self, table: str) -> int:
        q = urllib.parse.quote(f"select count() from {table}")
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/exec?query={q}", timeout=30) as r:
            return json.loads(r.read())["dataset"][0][0]

    def measure(self, writers: int, rows: int, seconds: float, name: str | None = None) -> Sample:
        from .load import self_cpu_s

        tcp = (name or self.name) == "questdb-tcp"
        c0 = self_cpu_s()
        r = _core.run_load(workload=self.workload, protocol="tcp-plain" if tcp else "http", host="127.0.0.1",
                           port=self.tcp_port if tcp else self.port, path="/write?precision=n",
                           agents=writers, rows_per_batch=rows, duration_s=seconds)
        return Sample(r["rows_sent"] if tcp else r["rows_acked"], r["elapsed_s"], r["errors"], self_cpu_s() - c0)


class QuestDBSync(QuestDB):
    """QuestDB with `cairo.commit.mode=sync`: a commit (and so an ILP/HTTP 204) waits for its flush."""

    commit_mode = "sync"


# -- PostgreSQL ----------------------------------------------------------------------------


class PostgresServer:
    """A PostgreSQL server (Debian package) in its own data directory on loopback, stopped at exit.

    `SETTINGS` are what a careful user sets on a machine of this size (stated in reports):
    commits stay durable (fsync, synchronous_commit on); the WAL may grow so bulk loads are
    not interrupted by forced checkpoints; sorts and hashes of analytic reads get memory.
    """

    SETTINGS = {"shared_buffers": "256MB", "fsync": "on", "synchronous_commit": "on", "max_wal_size": "4GB",
                "work_mem": "64MB", "effective_cache_size": "4GB", "max_connections": "300"}

    def __init__(self, workdir: Path, workload: str = "", name: str = "postgres") -> None:
        self.dir = Path(workdir) / "postgres"
        self.workload = workload
        self.name = name
        self.started = False

    def _bin(self, tool: str) -> str:
        versions = sorted(PG_BIN.glob("*/bin/" + tool)) if PG_BIN.exists() else []
        if not versions:
            raise Unavailable("PostgreSQL is not installed (apt-get install -y postgresql)")
        return str(versions[-1])

    def _as_postgres(self, cmd: list[str], **kw) -> subprocess.CompletedProcess:
        if os.geteuid() == 0:  # the server refuses to run as root
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, **kw)

    def __enter__(self):
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise Unavailable("psycopg is not installed (pip install 'tracehouse[bench]')") from None
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        for p in [self.dir, *self.dir.parents]:
            if p == Path("/"):
                break
            if os.geteuid() == 0 and not (p.stat().st_mode & 0o001):
                os.chmod(p, p.stat().st_mode | 0o011)  # let the postgres user traverse to its data dir
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        data = self.dir / "data"
        r = self._as_postgres([self._bin("initdb"), "-D", str(data), "--auth=trust", "-U", "postgres", "-E", "UTF8"],
                              timeout=120)
        if r.returncode != 0:
            raise Unavailable(f"initdb failed: {r.stderr[-1000:]}")
        self.port = free_port()
        # The Unix socket goes to a short directory of its own: a socket path over 107 bytes
        # (a deep work directory) makes the server refuse to start. Clients use TCP anyway.
        self.sockdir = Path(tempfile.mkdtemp(prefix="thpg-"))
        if os.geteuid() == 0:
            shutil.chown(self.sockdir, "postgres", "postgres")
        opts = f"-p {self.port} -k {self.sockdir} -c listen_addresses=127.0.0.1 " + " ".join(
            f"-c {k}={v}" for k, v in self.SETTINGS.items())
        r = self._as_postgres([self._bin("pg_ctl"), "-D", str(data), "-l", str(self.dir / "pg.log"), "-o", opts,
                               "-w", "-t", "60", "start"], timeout=90)
        if r.returncode != 0:
            raise Unavailable(f"PostgreSQL did not start: {r.stderr[-1000:]} {r.stdout[-1000:]}")
        self.started = True
        with self.connect() as c:
            self.version = c.execute("SHOW server_version").fetchone()[0]
        return self

    def connect(self):
        import psycopg

        return psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres", autocommit=True)

    @property
    def uri(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def data_bytes(self) -> int:
        """Bytes of the current database (relations, indexes, TOAST), as PostgreSQL counts them."""
        with self.connect() as c:
            return int(c.execute("SELECT pg_database_size(current_database())").fetchone()[0])

    def __exit__(self, *exc) -> None:
        if self.started:
            self._as_postgres([self._bin("pg_ctl"), "-D", str(self.dir / "data"), "-m", "fast", "-w", "stop"],
                              timeout=120)
            self.started = False
        shutil.rmtree(self.dir, ignore_errors=True)
        if getattr(self, "sockdir", None) is not None:
            shutil.rmtree(self.sockdir, ignore_errors=True)


class Postgres(PostgresServer):
    """`bench write`'s PostgreSQL: the server with schema 2 of the workload."""

    def __init__(self, workdir: Path, workload: str, name: str = "postgres-copy") -> None:
        super().__init__(workdir, workload, name)

    def __enter__(self) -> "Postgres":
        super().__enter__()
        self.payloads = SqlPayloads(self.workload, "postgres")
        with self.connect() as c:
            for stmt in self.payloads.ddl():
                c.execute(stmt)
        self.ids_for = 0
        return self

    def measure(self, writers: int, rows: int, seconds: float, name: str | None = None) -> Sample:
        ensure_writer_ids(self, writers, lambda sql: sql + " ON CONFLICT DO NOTHING")
        p = self.payloads
        if (name or self.name) == "postgres-copy":
            copy_sql = p.copy_sql()
            data = {w: p.copy_data(w, rows) for w in range(writers)}

            def write(conn, w):
                with conn.cursor().copy(copy_sql) as cp:
                    cp.write(data[w])
                return rows
        else:
            # At most INSERT_ROWS rows per statement, a batch's statements in one transaction:
            # one 10,000-row QoS INSERT made a PostgreSQL backend hold ~330 MB while parsing,
            # and 128 of them at once exhausted this machine's 24 GB.
            per, rest = divmod(rows, INSERT_ROWS) if rows > INSERT_ROWS else (0, rows)
            sql = {w: ([p.insert_sql(w, INSERT_ROWS)] * per if per else []) + ([p.insert_sql(w, rest)] if rest else [])
                   for w in range(writers)}

            def write(conn, w):
                stmts = sql[w]
                if len(stmts) == 1:
                    conn.execute(stmts[0])
                else:
                    with conn.transaction():
                        for st in stmts:
                            conn.execute(st)
                return rows

        return threaded(writers, seconds, lambda w: self.connect(), write)


# -- MariaDB -------------------------------------------------------------------------------


class MariaDBServer:
    """A MariaDB server (Debian package) in its own data directory on loopback, stopped at exit.

    `SETTINGS` (stated in reports): InnoDB, every commit flushed (innodb_flush_log_at_trx_commit=1),
    a buffer pool and redo log sized for bulk loads on this machine, LOAD DATA LOCAL allowed.
    """

    SETTINGS = {"innodb-flush-log-at-trx-commit": "1", "innodb-buffer-pool-size": "1G",
                "innodb-log-file-size": "1G", "max-connections": "400", "max-allowed-packet": "256M",
                "local-infile": "1", "query-cache-size": "64M", "query-cache-type": "2"}  # 2: on demand (SQL_CACHE)

    def __init__(self, workdir: Path, workload: str = "", name: str = "mariadb") -> None:
        self.dir = Path(workdir) / "mariadb"
        self.workload = workload
        self.name = name
        self.proc = None

    def __enter__(self):
        try:
            import pymysql  # noqa: F401
        except ImportError:
            raise Unavailable("pymysql is not installed (pip install 'tracehouse[bench]')") from None
        server = shutil.which("mariadbd") or shutil.which("mysqld") or (
            "/usr/sbin/mariadbd" if Path("/usr/sbin/mariadbd").exists() else None)
        install = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")
        if not server or not install:
            raise Unavailable("MariaDB is not installed (apt-get install -y mariadb-server)")
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        data = self.dir / "data"
        user = ["--user=root"] if os.geteuid() == 0 else []
        r = subprocess.run([install, "--no-defaults", f"--datadir={data}", *user, "--skip-test-db",
                            "--auth-root-authentication-method=normal"], capture_output=True, text=True, timeout=180)
        if r.returncode != 0:
            raise Unavailable(f"mariadb-install-db failed: {r.stderr[-1000:]}")
        self.port = free_port()
        self.sockdir = Path(tempfile.mkdtemp(prefix="thmy-"))  # short: socket paths end at 107 bytes
        self.log = self.dir / "mariadb.log"
        self.proc = subprocess.Popen(
            [server, "--no-defaults", f"--datadir={data}", f"--socket={self.sockdir}/sock", f"--port={self.port}",
             "--bind-address=127.0.0.1", *user, *(f"--{k}={v}" for k, v in self.SETTINGS.items()),
             "--skip-name-resolve", f"--pid-file={self.dir}/pid", f"--log-error={self.log}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: self.connect(db=None).close() or True, 90, "MariaDB", self.proc, self.log)
        self.pid = self.proc.pid
        c = self.connect(db=None)
        c.cursor().execute("CREATE DATABASE bench")
        cur = c.cursor()
        cur.execute("SELECT VERSION()")
        self.version = cur.fetchone()[0]
        c.close()
        return self

    def connect(self, db: str | None = "bench", **kw):
        import pymysql

        return pymysql.connect(host="127.0.0.1", port=self.port, user="root", password="", database=db,
                               autocommit=True, connect_timeout=5, **kw)

    @property
    def uri(self) -> str:
        return f"mysql://root@127.0.0.1:{self.port}/bench"

    def load_arrow(self, cur, name: str, table) -> None:
        """MariaDB's fastest load: `table` written as CSV by pyarrow, then LOAD DATA LOCAL INFILE
        into `name` (`cur` from a connection opened with local_infile=True)."""
        import pyarrow.csv as pacsv

        path = self.dir / f"load-{name}.csv"
        pacsv.write_csv(table, path, pacsv.WriteOptions(include_header=False))
        try:
            cur.execute(f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE {name} FIELDS TERMINATED BY ',' "
                        f"OPTIONALLY ENCLOSED BY '\"' ({', '.join(table.column_names)})")
        finally:
            path.unlink(missing_ok=True)

    def data_bytes(self) -> int:
        """Bytes of the bench database's tables and indexes (InnoDB's own accounting, after ANALYZE)."""
        c = self.connect()
        try:
            cur = c.cursor()
            cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'bench'")
            for (t,) in cur.fetchall():
                cur.execute(f"ANALYZE TABLE `{t}`")
                cur.fetchall()
            cur.execute("SELECT COALESCE(SUM(data_length + index_length), 0) FROM information_schema.tables "
                        "WHERE table_schema = 'bench'")
            return int(cur.fetchone()[0])
        finally:
            c.close()

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
        if getattr(self, "sockdir", None) is not None:
            shutil.rmtree(self.sockdir, ignore_errors=True)


class MariaDB(MariaDBServer):
    """`bench write`'s MariaDB: the server with schema 2 of the workload."""

    def __init__(self, workdir: Path, workload: str, name: str = "mariadb") -> None:
        super().__init__(workdir, workload, name)

    def __enter__(self) -> "MariaDB":
        super().__enter__()
        self.payloads = SqlPayloads(self.workload, "mariadb")
        c = self.connect()
        for stmt in self.payloads.ddl():
            c.cursor().execute(stmt)
        c.close()
        self.ids_for = 0
        return self

    def measure(self, writers: int, rows: int, seconds: float, name: str | None = None) -> Sample:
        ensure_writer_ids(self, writers, lambda sql: sql.replace("INSERT", "INSERT IGNORE"))
        sql = {w: self.payloads.insert_sql(w, rows) for w in range(writers)}

        def write(conn, w):
            conn.cursor().execute(sql[w])
            return rows

        return threaded(writers, seconds, lambda w: self.connect(), write)


# -- SQLite --------------------------------------------------------------------------------


class SQLite:
    def __init__(self, workdir: Path, workload: str, name: str = "sqlite") -> None:
        self.dir = Path(workdir) / "sqlite"
        self.workload = workload
        self.name = name

    def __enter__(self) -> "SQLite":
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


SYSTEMS: dict[str, type] = {
    "tracehouse-http": Tracehouse, "tracehouse-tcp": Tracehouse, "tracehouse-arrow": Tracehouse,
    "tracehouse-http-written": TracehouseWritten, "tracehouse-tcp-written": TracehouseWritten,
    "tracehouse-arrow-written": TracehouseWritten,
    "questdb": QuestDB, "questdb-tcp": QuestDB, "questdb-sync": QuestDBSync,
    "postgres-copy": Postgres, "postgres-insert": Postgres,
    "mariadb": MariaDB, "sqlite": SQLite,
}
