"""The systems of the QoS read benchmark (seed 003, Q1-Q5), each loaded with the same data
and read by concurrent clients that fetch every row of every answer.

Owns one class per system with the same face:

    with System(workdir) as s:          # start the server on loopback (servers/' code)
        s.load(data, layouts) -> {layout: {"seconds", "bytes"}}
        c = s.client()                  # a connection, opened before any clock starts
        c.fetch(sql) -> rows            # one query, the whole answer received as Arrow

Each client takes the fastest honest path its system offers to get a whole result into
a program (stated in the report):

  tracehouse   `tracehouse serve`, POST /api/query format=arrow (Arrow IPC stream), keep-alive
  duckdb       an on-disk DuckDB database; a cursor per client, fetch_arrow_table (embedded)
  postgres     PostgreSQL, ADBC (libpq COPY binary -> Arrow), a connection per client
  mariadb      MariaDB (InnoDB), ConnectorX (Rust MySQL protocol -> Arrow); ConnectorX opens
               its connection per query (it has no other mode), so that is in the time
  sqlite       an SQLite file (WAL), ADBC (-> Arrow), a connection per client
  questdb      QuestDB, schema 1 as one table with a designated timestamp; GET /exp (CSV)
               parsed by pyarrow's CSV reader

SQL systems hold the seed's three schemas (tables prefixed qos1/qos2/qos3, keys as the seed
drew them); tracehouse its own layout; QuestDB, a time-series store without joins, one
table (schema 1).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import time
import urllib.parse
from pathlib import Path

import pyarrow as pa

from tracehouse.bench import write_systems
from tracehouse.bench.tod_ingest_peers import dir_bytes
from tracehouse.bench.write_systems import Unavailable
from tracehouse.workload import qos

from . import servers


def _loaded(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _load_layouts(data: pa.Table, layouts, load_one, size) -> dict:
    """{layout: {"seconds", "bytes"}}: `load_one(layout, tables)` timed for each layout (its
    tables made before the clock starts), and the bytes it added as `size()` measures them."""
    out = {}
    for layout in layouts:
        tables = qos.schema_tables(data, layout)
        before = size()
        out[layout] = {"seconds": _loaded(lambda: load_one(layout, tables)), "bytes": size() - before}
    return out


class _FileReads:
    """An embedded system whose database lives in a fresh directory of the workdir."""

    name = ""
    layouts = ("schema1", "schema2", "schema3")

    def __init__(self, workdir: Path) -> None:
        self.dir = Path(workdir) / f"{self.name}-reads"

    def _fresh_dir(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


# -- tracehouse -------------------------------------------------------------------------


class _HttpArrowClient:
    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def fetch(self, sql: str) -> int:
        body = json.dumps({"sql": sql, "format": "arrow"})
        try:
            self.conn.request("POST", "/api/query", body, {"Content-Type": "application/json"})
            r = self.conn.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # The server closed this keep-alive connection while it sat idle (a client of the
            # pool waits while other cells run): reconnect once, as any HTTP client does.
            self.conn.close()
            self.conn.connect()
            self.conn.request("POST", "/api/query", body, {"Content-Type": "application/json"})
            r = self.conn.getresponse()
        body = r.read()
        if r.status != 200:
            raise RuntimeError(f"tracehouse query failed ({r.status}): {body[:500]!r}")
        return pa.ipc.open_stream(body).read_all().num_rows

    def close(self) -> None:
        self.conn.close()


class _EmbeddedClient:
    """tracehouse in the client's process, as DuckDB's embedded client is: the store opened
    read-only beside the server that writes it, each query on a cursor of its own
    (`Store.read_connection`, as the server's query workers run them), the answer as Arrow."""

    def __init__(self, store) -> None:
        self.store = store

    def fetch(self, sql: str) -> int:
        with self.store.read_connection(sql, keep_open=True):
            return self.store.query_engine.snapshot_relation().to_arrow_table().num_rows

    def close(self) -> None:
        pass


class TracehouseReads:
    name = "tracehouse"
    layouts = ("tracehouse", "tracehouse-embedded")
    client_path = (
        "tracehouse serve, POST /api/query (Arrow IPC), keep-alive connection; and embedded: "
        "tracehouse.open(store, readonly=True) in the client process, a cursor per query"
    )
    client_for_layout = True

    def __init__(self, workdir: Path) -> None:
        self.workdir = Path(workdir)
        self.data = None
        self.loads: dict = {}

    def load(self, data: pa.Table, layouts=("tracehouse",)) -> dict:
        self.data = data
        # The seed's clients fetch whole answers, up to 600,000 rows x 62 columns (~300 MB as Arrow):
        # serve's default --max-answer (64 MB, a guard for interactive use) would refuse Q1.4 and Q2.4,
        # and 20 clients queued on its 4 query workers passed the default 30 s --query-timeout.
        self.server = write_systems.Tracehouse(
            self.workdir,
            "qos",
            "tracehouse-http",
            before_start=self._load,
            serve_args=("--max-answer", "1G", "--query-timeout", "600"),
        )
        self.server.__enter__()
        self.port = self.server.port
        return self.loads

    def _load(self, path: Path) -> None:
        import tracehouse

        store = tracehouse.open(path, fsync="off")
        secs = _loaded(lambda: qos.tracehouse_load(store, self.data))
        store.close()
        self.loads["tracehouse"] = {"seconds": secs, "bytes": dir_bytes(path)}

    def __enter__(self):
        from tracehouse import __version__

        self.version = __version__
        self.settings = {
            "serve": "--fsync batch, 4 query workers (defaults), --max-answer 1G, --query-timeout 600",
            "store": "Parquet zstd segments",
        }
        return self

    def client(self, layout: str = "tracehouse"):
        if layout == "tracehouse-embedded":
            if getattr(self, "embedded", None) is None:
                import tracehouse

                self.embedded = tracehouse.open(self.server.store_path, readonly=True)
            return _EmbeddedClient(self.embedded)
        return _HttpArrowClient(self.port)

    def __exit__(self, *exc) -> None:
        if getattr(self, "embedded", None) is not None:
            self.embedded.close()
        if getattr(self, "server", None) is not None:
            self.server.__exit__(*exc)


# -- DuckDB -----------------------------------------------------------------------------


class _DuckClient:
    def __init__(self, con) -> None:
        self.cur = con.cursor()

    def fetch(self, sql: str) -> int:
        return self.cur.sql(sql).to_arrow_table().num_rows

    def close(self) -> None:
        self.cur.close()


class DuckDBReads(_FileReads):
    name = "duckdb"
    client_path = "embedded DuckDB file, a cursor per client, fetch_arrow_table"

    def __enter__(self):
        import duckdb

        self._fresh_dir()
        self.path = self.dir / "qos.duckdb"
        self.con = duckdb.connect(str(self.path))
        self.con.execute("SET enable_progress_bar = false")
        self.version = duckdb.__version__
        self.settings = {
            "threads": str(self.con.execute("SELECT current_setting('threads')").fetchone()[0]),
            "memory_limit": self.con.execute("SELECT current_setting('memory_limit')").fetchone()[0],
        }
        return self

    def load(self, data: pa.Table, layouts) -> dict:
        def go(layout, tables):
            for stmt in qos.ddl(layout, data, "duckdb"):
                self.con.execute(stmt)
            for name, t in tables.items():
                self.con.register("_src", t)
                self.con.execute(f"INSERT INTO {name} SELECT * FROM _src")
                self.con.unregister("_src")
            self.con.execute("CHECKPOINT")

        return _load_layouts(data, layouts, go, lambda: dir_bytes(self.dir))

    def client(self):
        return _DuckClient(self.con)

    def __exit__(self, *exc) -> None:
        self.con.close()
        super().__exit__(*exc)


# -- PostgreSQL and SQLite through ADBC ---------------------------------------------------


class _AdbcClient:
    def __init__(self, connect) -> None:
        self.conn = connect()
        self.cur = self.conn.cursor()

    def fetch(self, sql: str) -> int:
        self.cur.execute(sql)
        return self.cur.fetch_arrow_table().num_rows

    def close(self) -> None:
        self.cur.close()
        self.conn.close()


def _adbc(module: str):
    try:
        import importlib

        return importlib.import_module(f"adbc_driver_{module}.dbapi")
    except ImportError:
        raise Unavailable(f"adbc-driver-{module} is not installed (pip install 'tracehouse[bench]')") from None


def _ingest(conn, tables: dict[str, pa.Table]) -> None:
    cur = conn.cursor()
    for name, t in tables.items():
        cur.adbc_ingest(name, t, mode="append")
    conn.commit()
    cur.close()


class PostgresReads(servers.PostgresServer):
    layouts = ("schema1", "schema2", "schema3")
    client_path = "ADBC PostgreSQL driver (COPY binary -> Arrow), a connection per client"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, "qos", "postgres")

    def __enter__(self):
        self.dbapi = _adbc("postgresql")
        return super().__enter__()

    def load(self, data: pa.Table, layouts) -> dict:
        def go(layout, tables):
            with self.connect() as c:
                for stmt in qos.ddl(layout, data, "postgres"):
                    c.execute(stmt)
            conn = self.dbapi.connect(self.uri)
            _ingest(conn, tables)
            conn.close()
            with self.connect() as c:
                c.execute("ANALYZE")

        return _load_layouts(data, layouts, go, self.data_bytes)

    def client(self):
        return _AdbcClient(lambda: self.dbapi.connect(self.uri))


class SQLiteReads(_FileReads):
    name = "sqlite"
    client_path = "ADBC SQLite driver (-> Arrow), a connection per client, WAL"

    def __enter__(self):
        import sqlite3

        self.dbapi = _adbc("sqlite")
        self._fresh_dir()
        self.path = self.dir / "qos.sqlite"
        db = sqlite3.connect(self.path)
        db.execute("PRAGMA journal_mode=WAL")
        db.close()
        self.version = sqlite3.sqlite_version
        self.settings = {"journal_mode": "WAL", "synchronous": "FULL (default)", "cache_size": "default (2 MB)"}
        return self

    def load(self, data: pa.Table, layouts) -> dict:
        import sqlite3

        def go(layout, tables):
            db = sqlite3.connect(self.path)
            for stmt in qos.ddl(layout, data, "sqlite"):
                db.execute(stmt)
            db.commit()
            db.close()
            conn = self.dbapi.connect(str(self.path))
            _ingest(conn, tables)
            conn.close()
            db = sqlite3.connect(self.path)
            db.execute("ANALYZE")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.close()

        return _load_layouts(data, layouts, go, lambda: dir_bytes(self.dir))

    def client(self):
        return _AdbcClient(lambda: self.dbapi.connect(str(self.path)))


# -- MariaDB ------------------------------------------------------------------------------


class _CxClient:
    def __init__(self, uri: str) -> None:
        import connectorx

        self.cx = connectorx
        self.uri = uri

    def fetch(self, sql: str) -> int:
        return self.cx.read_sql(self.uri, sql, return_type="arrow").num_rows

    def close(self) -> None:
        pass


class MariaDBReads(servers.MariaDBServer):
    layouts = ("schema1", "schema2", "schema3")
    client_path = "ConnectorX (Rust, MySQL protocol -> Arrow); it connects per query"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, "qos", "mariadb")

    def __enter__(self):
        try:
            import connectorx  # noqa: F401
        except ImportError:
            raise Unavailable("connectorx is not installed (pip install 'tracehouse[bench]')") from None
        return super().__enter__()

    def load(self, data: pa.Table, layouts) -> dict:
        """LOAD DATA LOCAL INFILE of a CSV per table (MariaDB's fastest load; the CSV is written
        by pyarrow inside the timed region, as part of the load)."""

        def go(layout, tables):
            c = self.connect(local_infile=True)
            cur = c.cursor()
            for stmt in qos.ddl(layout, data, "mariadb"):
                cur.execute(stmt)
            for name, t in tables.items():
                self.load_arrow(cur, name, t)
            cur.execute("ANALYZE TABLE " + ", ".join(tables))
            cur.fetchall()
            c.close()

        return _load_layouts(data, layouts, go, self.data_bytes)

    def client(self):
        return _CxClient(self.uri)


# -- QuestDB ------------------------------------------------------------------------------


class _QuestClient:
    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def fetch(self, sql: str) -> int:
        import pyarrow.csv as pacsv

        self.conn.request("GET", "/exp?" + urllib.parse.urlencode({"query": sql}))
        r = self.conn.getresponse()
        body = r.read()
        if r.status != 200:
            raise RuntimeError(f"QuestDB query failed ({r.status}): {body[:500]!r}")
        return pacsv.read_csv(pa.py_buffer(body)).num_rows if body.count(b"\n") > 1 else 0

    def close(self) -> None:
        self.conn.close()


class QuestDBReads(servers.QuestDB):
    layouts = ("schema1",)
    client_path = "HTTP GET /exp (CSV), parsed by pyarrow.csv, keep-alive connection"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, "qos", "questdb")

    def __enter__(self):
        super().__enter__()
        self.settings = {"jvm": "-Xmx2g", "table": "qos1, designated timestamp ts, PARTITION BY DAY, WAL"}
        return self

    def _exec(self, sql: str) -> dict:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        conn.request("GET", "/exec?" + urllib.parse.urlencode({"query": sql}))
        r = conn.getresponse()
        body = json.loads(r.read() or b"{}")
        conn.close()
        if r.status != 200 or "error" in body:
            raise RuntimeError(f"QuestDB: {body.get('error', r.status)} in {sql[:200]}")
        return body

    def load(self, data: pa.Table, layouts=("schema1",)) -> dict:
        """CREATE TABLE with a designated timestamp, then POST /imp of the CSV (QuestDB's bulk
        import over HTTP), waited for until every row is visible."""
        import pyarrow.csv as pacsv

        cols = []
        for f in data.schema:
            typ = "TIMESTAMP" if f.name == "ts" else "DOUBLE" if pa.types.is_floating(f.type) else "LONG"
            cols.append(f"{f.name} {typ}")
        t = data.set_column(
            data.schema.get_field_index("ts"),
            "ts",
            pa.compute.cast(pa.compute.divide(data.column("ts"), 1000), pa.int64()),
        )

        def go():
            self._exec(f"CREATE TABLE qos1 ({', '.join(cols)}) TIMESTAMP(ts) PARTITION BY DAY WAL")
            sink = pa.BufferOutputStream()
            pacsv.write_csv(t, sink)
            csv = sink.getvalue().to_pybytes()
            boundary = "thbench" + os.urandom(8).hex()
            body = (
                (
                    f'--{boundary}\r\nContent-Disposition: form-data; name="data"; filename="qos1.csv"\r\n'
                    "Content-Type: text/csv\r\n\r\n"
                ).encode()
                + csv
                + f"\r\n--{boundary}--\r\n".encode()
            )
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1800)
            conn.request(
                "POST",
                "/imp?"
                + urllib.parse.urlencode({"name": "qos1", "fmt": "json", "timestamp": "ts", "partitionBy": "DAY"}),
                body,
                {"Content-Type": f"multipart/form-data; boundary={boundary}"},
            )
            r = conn.getresponse()
            answer = r.read()
            conn.close()
            if r.status != 200:
                raise RuntimeError(f"QuestDB /imp failed ({r.status}): {answer[:500]!r}")
            deadline = time.monotonic() + 600
            while self._exec("SELECT count() FROM qos1")["dataset"][0][0] < data.num_rows:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"QuestDB import incomplete: {answer[:500]!r}")
                time.sleep(0.2)

        secs = _loaded(go)
        return {"schema1": {"seconds": secs, "bytes": dir_bytes(self.dir / "db")}}

    def client(self):
        return _QuestClient(self.port)


SYSTEMS = {
    "tracehouse": TracehouseReads,
    "duckdb": DuckDBReads,
    "postgres": PostgresReads,
    "mariadb": MariaDBReads,
    "sqlite": SQLiteReads,
    "questdb": QuestDBReads,
}
