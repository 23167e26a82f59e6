"""MariaDB as a peer: the server (Debian package) in its own data directory on loopback, and
`bench write`'s writers to it (Python threads, a connection each, one multi-row INSERT per batch,
autocommit, InnoDB with innodb_flush_log_at_trx_commit=1).

The server alone (`MariaDBServer`) is the read experiment's, the TOD store's and SoC-Trace's
peer too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tracehouse.bench.write_systems import (
    Sample,
    SqlPayloads,
    Unavailable,
    ensure_writer_ids,
    free_port,
    stop_process,
    threaded,
    wait_for,
)


class MariaDBServer:
    """A MariaDB server (Debian package) in its own data directory on loopback, stopped at exit.

    `SETTINGS` (stated in reports): InnoDB, every commit flushed (innodb_flush_log_at_trx_commit=1),
    a buffer pool and redo log sized for bulk loads on this machine, LOAD DATA LOCAL allowed.
    """

    SETTINGS = {
        "innodb-flush-log-at-trx-commit": "1",
        "innodb-buffer-pool-size": "1G",
        "innodb-log-file-size": "1G",
        "max-connections": "400",
        "max-allowed-packet": "256M",
        "local-infile": "1",
        "query-cache-size": "64M",
        "query-cache-type": "2",
    }  # 2: on demand (SQL_CACHE)

    def __init__(self, workdir: Path, workload: str = "", name: str = "mariadb") -> None:
        self.dir = Path(workdir) / "mariadb"
        self.workload = workload
        self.name = name
        self.proc = None

    def __enter__(self):
        try:
            import pymysql  # noqa: F401
        except ImportError:
            raise Unavailable("pymysql is not installed (pip install ./bench-suite)") from None
        server = (
            shutil.which("mariadbd")
            or shutil.which("mysqld")
            or ("/usr/sbin/mariadbd" if Path("/usr/sbin/mariadbd").exists() else None)
        )
        install = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")
        if not server or not install:
            raise Unavailable("MariaDB is not installed (apt-get install -y mariadb-server)")
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        data = self.dir / "data"
        user = ["--user=root"] if os.geteuid() == 0 else []
        r = subprocess.run(
            [
                install,
                "--no-defaults",
                f"--datadir={data}",
                *user,
                "--skip-test-db",
                "--auth-root-authentication-method=normal",
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
        if r.returncode != 0:
            raise Unavailable(f"mariadb-install-db failed: {r.stderr[-1000:]}")
        self.port = free_port()
        self.sockdir = Path(tempfile.mkdtemp(prefix="thmy-"))  # short: socket paths end at 107 bytes
        self.log = self.dir / "mariadb.log"
        self.proc = subprocess.Popen(
            [
                server,
                "--no-defaults",
                f"--datadir={data}",
                f"--socket={self.sockdir}/sock",
                f"--port={self.port}",
                "--bind-address=127.0.0.1",
                *user,
                *(f"--{k}={v}" for k, v in self.SETTINGS.items()),
                "--skip-name-resolve",
                f"--pid-file={self.dir}/pid",
                f"--log-error={self.log}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
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

        return pymysql.connect(
            host="127.0.0.1",
            port=self.port,
            user="root",
            password="",
            database=db,
            autocommit=True,
            connect_timeout=5,
            **kw,
        )

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
            cur.execute(
                f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE {name} FIELDS TERMINATED BY ',' "
                f"OPTIONALLY ENCLOSED BY '\"' ({', '.join(table.column_names)})"
            )
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
            cur.execute(
                "SELECT COALESCE(SUM(data_length + index_length), 0) FROM information_schema.tables "
                "WHERE table_schema = 'bench'"
            )
            return int(cur.fetchone()[0])
        finally:
            c.close()

    def __exit__(self, *exc) -> None:
        stop_process(self.proc, 120)
        shutil.rmtree(self.dir, ignore_errors=True)
        if getattr(self, "sockdir", None) is not None:
            shutil.rmtree(self.sockdir, ignore_errors=True)


class MariaDB(MariaDBServer):
    """`bench write`'s MariaDB: the server with schema 2 of the workload."""

    def __init__(self, workdir: Path, workload: str, name: str = "mariadb") -> None:
        super().__init__(workdir, workload, name)

    def __enter__(self) -> MariaDB:
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
