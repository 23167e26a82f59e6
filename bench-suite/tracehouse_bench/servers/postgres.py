"""PostgreSQL as a peer: the server (Debian package) in its own data directory on loopback, and
`bench write`'s writers to it (Python threads, a connection each, pre-rendered statements).

  postgres-copy      COPY FROM STDIN per batch, autocommit (synchronous_commit on)
  postgres-insert    multi-row INSERTs (<= 1,000 rows each) per batch, one transaction

The server alone (`PostgresServer`) is the read experiment's and the TOD store's peer too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tracehouse.bench.write_systems import Sample, SqlPayloads, Unavailable, ensure_writer_ids, free_port, threaded

PG_BIN = Path("/usr/lib/postgresql")
INSERT_ROWS = 1000  # rows of one PostgreSQL multi-row INSERT statement at most


class PostgresServer:
    """A PostgreSQL server (Debian package) in its own data directory on loopback, stopped at exit.

    `SETTINGS` are what a careful user sets on a machine of this size (stated in reports):
    commits stay durable (fsync, synchronous_commit on); the WAL may grow so bulk loads are
    not interrupted by forced checkpoints; sorts and hashes of analytic reads get memory.
    """

    SETTINGS = {
        "shared_buffers": "256MB",
        "fsync": "on",
        "synchronous_commit": "on",
        "max_wal_size": "4GB",
        "work_mem": "64MB",
        "effective_cache_size": "4GB",
        "max_connections": "300",
    }

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
            raise Unavailable("psycopg is not installed (pip install ./bench-suite)") from None
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
        r = self._as_postgres(
            [self._bin("initdb"), "-D", str(data), "--auth=trust", "-U", "postgres", "-E", "UTF8"], timeout=120
        )
        if r.returncode != 0:
            raise Unavailable(f"initdb failed: {r.stderr[-1000:]}")
        self.port = free_port()
        # The Unix socket goes to a short directory of its own: a socket path over 107 bytes
        # (a deep work directory) makes the server refuse to start. Clients use TCP anyway.
        self.sockdir = Path(tempfile.mkdtemp(prefix="thpg-"))
        if os.geteuid() == 0:
            shutil.chown(self.sockdir, "postgres", "postgres")
        opts = f"-p {self.port} -k {self.sockdir} -c listen_addresses=127.0.0.1 " + " ".join(
            f"-c {k}={v}" for k, v in self.SETTINGS.items()
        )
        r = self._as_postgres(
            [
                self._bin("pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(self.dir / "pg.log"),
                "-o",
                opts,
                "-w",
                "-t",
                "60",
                "start",
            ],
            timeout=90,
        )
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
            self._as_postgres(
                [self._bin("pg_ctl"), "-D", str(self.dir / "data"), "-m", "fast", "-w", "stop"], timeout=120
            )
            self.started = False
        shutil.rmtree(self.dir, ignore_errors=True)
        if getattr(self, "sockdir", None) is not None:
            shutil.rmtree(self.sockdir, ignore_errors=True)


class Postgres(PostgresServer):
    """`bench write`'s PostgreSQL: the server with schema 2 of the workload."""

    def __init__(self, workdir: Path, workload: str, name: str = "postgres-copy") -> None:
        super().__init__(workdir, workload, name)

    def __enter__(self) -> Postgres:
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
            sql = {
                w: ([p.insert_sql(w, INSERT_ROWS)] * per if per else []) + ([p.insert_sql(w, rest)] if rest else [])
                for w in range(writers)
            }

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
