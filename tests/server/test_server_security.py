"""`tracehouse serve` against a hostile client.

The SQL endpoint runs one read-only statement and nothing else, on a cursor that cannot
change what other clients read; queries have a deadline, answers a byte cap, and SIGTERM
interrupts them; the token is checked on the request head (before `100 Continue` and before
any body byte); trickling senders are cut; /health needs the token. Real server processes,
real sockets.
"""

from __future__ import annotations

import http.client
import json
import select
import signal
import socket
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from helpers.server import Server
from tracehouse.errors import BadInput
from tracehouse.server.sqlguard import check_read_only

TOKEN = "s3cret"
AUTH = {"Authorization": f"Token {TOKEN}"}

# Every statement kind DuckDB has that is not a query (and tricks around them).
WRITES = [
    'CREATE OR REPLACE VIEW "b".disk AS SELECT 1 AS v',
    "CREATE TABLE x AS SELECT 1",
    "CREATE TEMP TABLE x AS SELECT 1",
    "CREATE SCHEMA s",
    "CREATE SEQUENCE q",
    "CREATE TYPE mood AS ENUM ('a')",
    "CREATE MACRO m(a) AS a",
    "CREATE TEMP MACRO m(a) AS a",
    "CREATE SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')",
    "CREATE INDEX i ON x (v)",
    "DROP VIEW th.traces",
    'DROP SCHEMA "b" CASCADE',
    "INSERT INTO x VALUES (1)",
    "UPDATE x SET v = 2",
    "DELETE FROM x",
    "TRUNCATE x",
    "MERGE INTO x USING (SELECT 1 AS v) y ON x.v = y.v WHEN MATCHED THEN DELETE",
    'ALTER VIEW "b".disk RENAME TO gone',
    "COMMENT ON VIEW th.traces IS 'x'",
    "SET threads = 1",
    "SET enable_external_access = true",
    "SET lock_configuration = false",
    "RESET threads",
    "SET VARIABLE v = 1",
    "USE th",
    "PRAGMA enable_profiling",
    "CALL pragma_version()",
    "CHECKPOINT",
    "VACUUM",
    "ANALYZE",
    "ATTACH '/tmp/th-escape.db' AS e",
    "DETACH e",
    "COPY (SELECT 1) TO '/tmp/th-escape.csv'",
    "COPY x FROM '/etc/passwd'",
    "EXPORT DATABASE '/tmp/th-escape-db'",
    "IMPORT DATABASE '/tmp/th-escape-db'",
    "INSTALL httpfs",
    "LOAD httpfs",
    "UPDATE EXTENSIONS",
    "BEGIN TRANSACTION",
    "COMMIT",
    "ROLLBACK",
    "PREPARE p AS SELECT 1",
    "EXECUTE p",
    "DEALLOCATE p",
    "WITH y AS (SELECT 1 AS v) INSERT INTO x SELECT * FROM y",
]
TRICKS = [
    "SELECT 1; DROP VIEW th.traces",
    "SELECT 1;SELECT 2",
    "SELECT 1; -- a comment\nDROP VIEW th.traces",
    'PIVOT "b".disk ON producer USING sum(v)',  # no IN list: DuckDB runs a CREATE TYPE first
    'SELECT * FROM (PIVOT "b".disk ON producer USING sum(v))',
    "EXPLAIN EXPLAIN ANALYZE DROP VIEW th.traces",
    "/* hello */ EXPLAIN ANALYZE DROP VIEW th.traces",
    'explain\n\tANALYZE\n  create or replace view "b".disk as select 1 as v',
    "ExPlAiN AnAlYzE -- c\n DELETE FROM x",
    "EXPLAIN (FORMAT json) DROP VIEW th.traces",
    "EXPLAIN (FORMAT json, ANALYZE) DROP VIEW th.traces",
    "EXPLAIN ANALYZE SELECT 1; DROP VIEW th.traces",
    "EXPLAIN ANALYZE (SELECT 1); DROP VIEW th.traces",
    "",
    "   ",
    "-- only a comment",
]
# Queries to the parser, refused by DuckDB when run (query() takes one SELECT only).
RUN_REFUSED = ["SELECT * FROM query('DROP VIEW th.traces')", "SELECT * FROM query('SET threads = 1')"]
FILES = [
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM '/etc/passwd'",
    "SELECT * FROM read_parquet('/etc/passwd')",
    "SELECT * FROM read_json('/etc/passwd')",
    "SELECT * FROM read_text('/etc/hostname')",
    "SELECT * FROM read_blob('/etc/hostname')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT * FROM sniff_csv('/etc/passwd')",
    "SELECT * FROM parquet_metadata('/etc/passwd')",
    "SELECT * FROM read_csv('/proc/self/environ')",
    "SELECT * FROM read_parquet('http://127.0.0.1:9/x.parquet')",
    "EXPLAIN ANALYZE SELECT * FROM read_csv('/etc/passwd')",
]
PIVOT_IN = "PIVOT (SELECT 'k' || v AS k, v FROM \"b\".disk) ON k IN ('k1', 'k2') USING sum(v)"
READS = [
    'SELECT count(*) FROM "b".disk',
    'with a AS (SELECT v FROM "b".disk) SELECT sum(v) FROM a',
    'FROM "b".disk SELECT v',
    "VALUES (1), (2)",
    "DESCRIBE th.traces",
    'SUMMARIZE "b".disk',
    PIVOT_IN,
    "UNPIVOT (SELECT 1 AS a, 2 AS b) ON a, b",
    "EXPLAIN SELECT 1",
    'EXPLAIN ANALYZE SELECT count(*) FROM "b".disk',
    "EXPLAIN (FORMAT json) SELECT 1",
    "  /* c */ select 1 -- trailing\n;",
    "SELECT * FROM th.traces",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(
        tmp_path_factory.mktemp("sec") / "store",
        "--token",
        TOKEN,
        "--query-timeout",
        "5",  # (2 s made an ordinary statement of this module time out at load 13)
        "--max-answer",
        "1M",
        "--tcp-port",
        "-1",
    )
    assert s.write("disk,host=h1 v=1i 1\ndisk,host=h2 v=2i 2\n", bucket="b", headers=AUTH)[0] == 204
    yield s
    assert s.stop() == 0


def _query(s: Server, sql: str, fmt: str = "json", timeout: float = 30) -> tuple[int, dict, bytes]:
    return s.request(
        "POST",
        "/api/query",
        json.dumps({"sql": sql, "format": fmt}).encode(),
        {"Content-Type": "application/json", **AUTH},
        timeout=timeout,
    )


def _state_is_intact(s: Server) -> None:
    assert s.sql(
        "SELECT p.name, v FROM \"b\".disk d JOIN th.producers p ON p.trace = 'b' AND p.id = d.producer ORDER BY v",
        headers=AUTH,
    ) == [["host=h1", 1], ["host=h2", 2]]
    assert [r[0] for r in s.sql("SELECT name FROM th.traces", headers=AUTH)] == ["b"]
    assert s.sql("SELECT current_setting('enable_external_access'), current_setting('threads') > 0", headers=AUTH) == [
        [False, True]
    ]


# -- 1. read-only by parsing ---------------------------------------------------------


@pytest.mark.parametrize(
    "sql", WRITES + [f"EXPLAIN ANALYZE {w}" for w in WRITES] + [f"EXPLAIN {w}" for w in WRITES] + TRICKS
)
def test_guard_refuses_every_statement_that_is_not_one_query(sql):
    with pytest.raises(BadInput, match="read-only API|SQL error"):
        check_read_only(sql)


@pytest.mark.parametrize("sql", READS + FILES)
def test_guard_lets_queries_through(sql):
    check_read_only(sql)  # FILES are queries: the sandbox, not the guard, refuses them


def test_no_statement_gets_past_the_query_api_and_the_views_stay_intact(server, tmp_path):
    for sql in WRITES + [f"EXPLAIN ANALYZE {w}" for w in WRITES] + TRICKS + RUN_REFUSED:
        st, _h, data = _query(server, sql)
        assert st == 400, (sql, data)
        message = json.loads(data)["message"]
        assert "read-only API" in message or "SQL error" in message or "missing SQL" in message, data
    _state_is_intact(server)
    assert not any(Path("/tmp").glob("th-escape*"))


def test_files_outside_the_store_cannot_be_read(server):
    for sql in FILES:
        st, _h, data = _query(server, sql)
        assert st == 400 and b"root:" not in data, (sql, data)
        message = json.loads(data)["message"]
        assert "Permission Error" in message or "does not exist" in message, data
    store = server.store.resolve()
    st, _h, data = _query(server, f"SELECT * FROM read_csv('{store}/../../../../../../etc/passwd')")
    assert st == 400, data
    st, _h, data = _query(server, f"SELECT count(*) > 0 FROM glob('{store}/**')")
    assert st == 200 and json.loads(data)["rows"] == [[True]], data


def test_queries_answer(server):
    for sql in READS:
        st, _h, data = _query(server, sql)
        assert st == 200, (sql, data)
    assert json.loads(_query(server, PIVOT_IN)[2])["rows"] == [[1, 2]]
    st, h, data = _query(server, 'SELECT v FROM "b".disk ORDER BY v', fmt="arrow")
    assert st == 200 and h["content-type"] == "application/vnd.apache.arrow.stream"
    assert pa.ipc.open_stream(data).read_all().column("v").to_pylist() == [1, 2]
    _state_is_intact(server)


def test_a_cursor_that_gets_past_the_guard_still_changes_nothing(tmp_path):
    """The second wall alone: statements run on a snapshot cursor are rolled back, and the
    sandbox refuses configuration changes and files outside the store."""
    import duckdb

    import tracehouse

    store = tracehouse.open(tmp_path / "store")
    eng = store.query_engine
    store.sandbox_sql()
    eng.sql("SELECT * FROM th.traces")
    with eng.snapshot("SELECT * FROM th.traces") as cur:
        cur.execute("DROP VIEW th.traces")
        cur.execute("CREATE TABLE main.planted AS SELECT 1 AS x")
        cur.execute("CREATE MACRO main.evil(a) AS a")
        with pytest.raises(duckdb.Error, match="lock"):
            cur.execute("SET enable_external_access = true")
    assert eng.sql("SELECT count(*) AS n FROM th.traces").column("n").to_pylist() == [0]
    with pytest.raises(BadInput, match="planted"):
        eng.sql("SELECT * FROM main.planted")
    with eng.snapshot("SELECT 1") as cur, pytest.raises(duckdb.Error, match="Permission"):
        cur.execute("SELECT * FROM read_csv('/etc/passwd')").fetchall()
    # What a snapshot reads is fixed when it is taken: views replaced for a later query do not
    # change under it (the server's queries run beside the refreshes of others).
    with eng.snapshot("SELECT * FROM th.traces") as cur:
        with eng.lock:
            eng.con.execute("CREATE OR REPLACE VIEW th.traces AS SELECT 42 AS answer")
        assert cur.sql("SELECT * FROM th.traces").columns[:2] == ["id", "name"]
    store.close()


# -- 2. deadlines, answer cap, shutdown ---------------------------------------------------------


def test_a_runaway_query_times_out_while_select_1_is_answered(server):
    slow: dict = {}

    def run_slow():
        slow["answer"] = _query(server, "SELECT count(*) FROM range(1000000000000000)", timeout=60)

    t = threading.Thread(target=run_slow)
    t.start()
    _wait_running(server, 1)
    st, _h, data = _query(server, "SELECT 1 AS x")
    assert st == 200 and json.loads(data)["rows"] == [[1]]
    assert t.is_alive(), "SELECT 1 was answered only after the slow query ended"
    t.join(60)
    st, _h, data = slow["answer"]
    assert st == 504, data  # not 408: a client may send a request answered 408 again
    doc = json.loads(data)
    assert doc["code"] == "query timeout" and "--query-timeout" in doc["message"], doc
    health = json.loads(server.request("GET", "/health", headers=AUTH)[2])
    assert health["query_timeouts"] >= 1 and health["queries_running"] == 0
    _state_is_intact(server)


def test_answers_over_the_byte_cap_are_refused_with_a_clear_error(server):
    sql = "SELECT i, repeat('x', 1000) AS pad FROM range(300000) t(i)"  # ~300 MB of answer
    rss0 = _rss_peak_kb(server)
    for fmt in ("json", "arrow"):
        st, _h, data = _query(server, sql, fmt)
        assert st == 422, data[:300]
        doc = json.loads(data)
        assert doc["code"] == "answer too large" and "--max-answer" in doc["message"], doc
    # Stopped at the cap, not built whole first (a 300 MB answer took the server to 1.45 GB).
    assert _rss_peak_kb(server) - rss0 < 200_000
    st, _h, data = _query(server, "SELECT i, repeat('x', 100) AS pad FROM range(5000) t(i)")
    assert st == 200 and json.loads(data)["row_count"] == 5000


def test_sigterm_interrupts_a_running_query_and_the_server_exits(tmp_path):
    s = Server(tmp_path / "store", "--tcp-port", "-1")  # default --query-timeout: 30 s
    slow: dict = {}

    def run_slow():
        try:
            slow["answer"] = _query(s, "SELECT count(*) FROM range(1000000000000000)", timeout=60)
        except (OSError, http.client.HTTPException) as e:
            slow["answer"] = e

    t = threading.Thread(target=run_slow)
    t.start()
    try:
        _wait_running(s, 1)
        s.proc.send_signal(signal.SIGTERM)
        s.proc.wait(10)  # "within a few seconds": the query alone would run for 30 s
    finally:
        code = s.stop()
        t.join(60)
    assert code == 0, s.log.read_text()[-2000:]


def _wait_running(s: Server, n: int) -> None:
    deadline = time.monotonic() + 20
    while json.loads(s.request("GET", "/health", headers=AUTH)[2])["queries_running"] < n:
        assert time.monotonic() < deadline, "the query never started"
        time.sleep(0.05)


def _rss_peak_kb(s: Server) -> int:
    for line in Path(f"/proc/{s.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


# -- 3. auth on the head, slow senders ----------------------------------------------------------


def _raw(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _read_response(sock: socket.socket, timeout: float = 10) -> bytes:
    sock.settimeout(timeout)
    out = b""
    while b"\r\n\r\n" not in out:
        chunk = sock.recv(65536)
        if not chunk:
            break
        out += chunk
    return out


def test_unauthenticated_bodies_get_401_before_100_continue_and_use_no_inflight_budget(tmp_path):
    s = Server(
        tmp_path / "store", "--token", TOKEN, "--max-inflight", "8M", "--overload-wait", "0.3", "--tcp-port", "-1"
    )
    try:
        held = []
        for _i in range(4):  # 16 MB of declared bodies against an 8 MB budget
            c = _raw(s.port)
            c.sendall(
                b"POST /api/v2/write?bucket=a HTTP/1.1\r\nHost: x\r\nContent-Length: 4194304\r\n"
                b"Expect: 100-continue\r\n\r\n"
            )
            resp = _read_response(c)
            assert resp.startswith(b"HTTP/1.1 401"), resp
            assert b"100 Continue" not in resp
            held.append(c)
        # Without Expect, the body comes at once: it is not read, and the 401 still arrives.
        c = _raw(s.port)
        c.sendall(
            b"POST /api/v2/write?bucket=a HTTP/1.1\r\nHost: x\r\nContent-Length: 4194304\r\n"
            b"Authorization: Token wrong\r\n\r\n"
        )
        try:
            c.sendall(b"m v=1 1\n" * (4194304 // 8))
        except OSError:
            pass  # the server closed its side without reading the body
        assert _read_response(c).startswith(b"HTTP/1.1 401")
        held.append(c)
        # Meanwhile an authenticated 4 MB write is accepted: the refused bodies hold no budget.
        body = b"".join(b"m v=%di %d\n" % (i, i) for i in range(400_000))[:4194304]
        body = body[: body.rindex(b"\n") + 1]
        st, _h, data = s.request("POST", "/api/v2/write?bucket=a", body, {**AUTH, "Expect": "100-continue"})
        assert st == 204, data
        health = json.loads(s.request("GET", "/health", headers=AUTH)[2])
        assert health["auth_refusals"] == 5 and health["overload_refusals"] == 0
        for c in held:
            c.close()
    finally:
        assert s.stop() == 0
    assert "refused 5 request(s) without a valid token" in s.log.read_text() or "refused" in s.log.read_text()


def test_trickling_senders_are_cut_and_a_normal_client_then_gets_through(tmp_path):
    s = Server(
        tmp_path / "store",
        "--max-connections",
        "20",
        "--idle-timeout",
        "1",
        "--min-rate",
        "100",
        "--max-body",
        "1M",
        "--request-timeout",
        "4",
        "--tcp-port",
        "-1",
    )
    try:
        clients = []
        for i in range(20):
            c = _raw(s.port)
            if i % 2:
                c.sendall(b"POST /api/v2/write?bucket=t HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
            else:
                c.sendall(b"POST /api/v2/write?bucket=t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
            clients.append(c)
        time.sleep(0.2)
        assert s.request("GET", "/ping")[0] == 503  # every connection is taken
        answers: dict[int, bytes] = {}
        deadline = time.monotonic() + 30
        while len(answers) < len(clients) and time.monotonic() < deadline:
            for i, c in enumerate(clients):  # one byte (or chunk) each, every 0.3 s: never idle for 1 s
                if i not in answers:
                    try:
                        c.sendall(b"m" if i % 2 else b"1\r\nm\r\n")
                    except OSError:
                        pass
            readable, _w, _x = select.select([c for i, c in enumerate(clients) if i not in answers], [], [], 0.3)
            for c in readable:
                answers[clients.index(c)] = c.recv(4096)
        assert len(answers) == 20, f"{20 - len(answers)} trickling clients still connected"
        assert all(a.startswith(b"HTTP/1.1 408") and b"too slow" in a for a in answers.values()), [
            a for a in answers.values() if b"too slow" not in a
        ]
        for c in clients:
            c.close()
        time.sleep(0.3)
        assert s.write("m v=1 1\n", bucket="t")[0] == 204
        health = json.loads(s.request("GET", "/health")[2])
        assert health["slow_refusals"] == 20
    finally:
        assert s.stop() == 0


def test_a_request_must_arrive_within_the_request_timeout(tmp_path):
    s = Server(
        tmp_path / "store", "--idle-timeout", "1", "--min-rate", "10", "--request-timeout", "2", "--tcp-port", "-1"
    )
    try:
        c = _raw(s.port)
        c.sendall(b"POST /api/v2/write?bucket=t HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
        resp = b""
        deadline = time.monotonic() + 20
        while not resp and time.monotonic() < deadline:  # 500 bytes/s: fast enough for --min-rate
            try:
                c.sendall(b"x" * 100)
            except OSError:
                pass
            if select.select([c], [], [], 0.2)[0]:
                resp = c.recv(4096)
        assert resp.startswith(b"HTTP/1.1 408") and b"within 2 s" in resp, resp
        c.close()
    finally:
        assert s.stop() == 0


# -- 4. /health ----------------------------------------------------------------------------------


def test_health_needs_the_token_and_ping_does_not(server):
    st, _h, data = server.request("GET", "/health")
    assert st == 401 and b"pid" not in data
    st, _h, data = server.request("GET", "/health", headers=AUTH)
    assert st == 200 and json.loads(data)["pid"] == server.proc.pid
    assert server.request("GET", "/ping")[0] == 204
    assert server.request("HEAD", "/ping")[0] == 204
    assert server.request("GET", "/no-such-route")[0] == 401  # no route is revealed without the token
