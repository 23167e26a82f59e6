"""`tracehouse serve`: line protocol over HTTP and TCP, Arrow IPC, SQL, acknowledgements, limits, auth.

One real server process per configuration, on free loopback ports.
"""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import threading
import time

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.server import Server, read_lines
from tracehouse.errors import BadInput
from tracehouse.server.config import ServerConfig, is_loopback

LIMITS = (
    "--max-body",
    "64k",
    "--max-line",
    "2k",
    "--idle-timeout",
    "1",
    "--max-connections",
    "40",
    "--overload-wait",
    "0.3",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("serve") / "store", *LIMITS)
    yield s
    assert s.stop() == 0


# -- writes and queries --------------------------------------------------------------


def test_v2_write_then_query_sees_every_acknowledged_row(server):
    body = (
        "cpu,host=a,region=eu usage_user=12.5,usage_system=3i 1700000000\n"
        "cpu,host=b usage_user=1.5 1700000001\n"
        'mem,host=a free=100i,ok=t,note="x y" 1700000000\n'
    )
    assert server.write(body, bucket="w1", precision="s") == (204, {})
    rows = server.sql(
        'SELECT e.ts, p.name, e.usage_user, e.usage_system FROM "w1".cpu e '
        "JOIN th.producers p ON p.trace = 'w1' AND p.id = e.producer ORDER BY ts"
    )
    assert rows == [[1700000000 * 10**9, "host=a,region=eu", 12.5, 3], [1700000001 * 10**9, "host=b", 1.5, None]]
    assert server.sql('SELECT free, ok, note FROM "w1".mem') == [[100, True, "x y"]]


def test_tag_set_is_one_producer_with_its_tags_as_attributes(server):
    lines = "".join(f"qos,customerId=7,userId=3,b=x ul_delay={i}.5 {i}\n" for i in range(50))
    assert server.write(lines, bucket="w2")[0] == 204
    assert server.write("qos,userId=3,b=x,customerId=7 ul_delay=0.25 99\n", bucket="w2")[0] == 204
    prods = server.sql("SELECT id, kind, name, attrs FROM th.producers WHERE trace = 'w2'")
    assert len(prods) == 1
    assert prods[0][1:3] == ["tags", "b=x,customerId=7,userId=3"]
    assert json.loads(prods[0][3]) == {"b": "x", "customerId": "7", "userId": "3"}
    assert server.sql('SELECT count(*), count(DISTINCT producer), max(seq) FROM "w2".qos') == [[51, 1, 50]]


def test_partial_write_keeps_good_lines_and_names_the_bad_ones(server):
    assert server.write("m v=1 1\n", bucket="w3")[0] == 204
    status, doc = server.write('m v=2 2\nm v="str" 3\nnot line protocol\nm v=4,w=5i 4\n', bucket="w3")
    assert status == 400
    assert doc["rows_written"] == 2 and doc["failed"] == 2 and doc["lines"] == 4
    assert [e["line"] for e in doc["errors"]] == [2, 3]
    assert "type conflict" in doc["errors"][0]["message"]
    assert doc["message"].startswith("partial write")
    assert server.sql('SELECT ts, v, w FROM "w3".m ORDER BY ts') == [[1, 1.0, None], [2, 2.0, None], [4, 4.0, 5]]


def test_v1_write_gzip_and_precisions(server):
    body = gzip.compress(b"m v=1 5\n")
    assert server.write(body, bucket="w4", v1=True, precision="ms", headers={"Content-Encoding": "gzip"})[0] == 204
    assert server.write("m v=2 5\n", bucket="w4", precision="us")[0] == 204
    assert server.write("m v=3 5\n", bucket="w4", precision="s")[0] == 204
    assert server.write("m v=4 5\n", bucket="w4")[0] == 204
    assert server.sql('SELECT ts FROM "w4".m ORDER BY v') == [[5_000_000], [5_000], [5_000_000_000], [5]]
    assert server.write("m v=4 5\n", bucket="w4", precision="h")[0] == 400


def test_lines_without_timestamp_get_the_receive_time(server):
    before = time.time_ns()
    assert server.write("m v=1\n", bucket="w5")[0] == 204
    ((ts,),) = server.sql('SELECT ts FROM "w5".m')
    assert before <= ts <= time.time_ns()


def test_malformed_input_gets_line_errors_and_the_server_keeps_serving(server):
    body = (
        b"m v=1 1\n"
        b"m,t=a\\ v=1 2\n"  # escaped space: no fields
        b'm v="unterminated 3\n'
        b"m v=1 99999999999999999999\n"  # timestamp out of int64
        b"m,t=\xff\xfe v=1 4\n"  # invalid UTF-8
        b"m v=1 " + b"9" * 3000 + b"\n"  # longer than --max-line 2k
        b"m,=x v=1 5\n"  # empty tag key
        b"m v=nan 6\n"
        b"m v=1 7\n"
    )
    status, doc = server.write(body, bucket="w6", precision="s")
    assert status == 400
    assert [e["line"] for e in doc["errors"]] == [2, 3, 4, 5, 6, 7, 8]
    assert "UTF-8" in doc["errors"][3]["message"]
    assert "out of range" in doc["errors"][2]["message"] or "invalid timestamp" in doc["errors"][2]["message"]
    assert "longer than" in doc["errors"][4]["message"]
    assert server.sql('SELECT ts FROM "w6".m ORDER BY ts') == [[1_000_000_000], [7_000_000_000]]
    assert server.request("GET", "/ping")[0] == 204


def test_arrow_ipc_write_creates_and_widens_the_type(server):
    def ipc(t):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, t.schema) as w:
            w.write_table(t, max_chunksize=2)
        return sink.getvalue().to_pybytes()

    t1 = pa.table(
        {"ts": pa.array([1, 2, 3], pa.int64()), "producer": pa.array([0, 0, 1], pa.int32()), "x": [1.0, 2.0, 3.0]}
    )
    st, h, _ = server.request("POST", "/api/v2/arrow?trace=a1&type=ev", ipc(t1))
    assert st == 204 and h["x-rows-written"] == "3"
    t2 = t1.append_column("name", pa.array(["a", "b", "c"]))
    assert server.request("POST", "/api/v2/arrow?trace=a1&type=ev", ipc(t2))[0] == 204
    assert server.sql('SELECT count(*), count(name), sum(x) FROM "a1".ev') == [[6, 3, 12.0]]
    assert server.request("POST", "/api/v2/arrow?trace=a1&type=ev", b"not arrow")[0] == 400
    bad = pa.table({"ts": pa.array([1], pa.int64()), "producer": pa.array([0], pa.int32()), "x": ["s"]})
    assert server.request("POST", "/api/v2/arrow?trace=a1&type=ev", ipc(bad))[0] == 400
    # The ids an Arrow writer chose are producers of the trace, never handed to a tag set.
    assert server.sql("SELECT id, kind, name FROM th.producers WHERE trace = 'a1' ORDER BY id") == [
        [0, "arrow", "producer 0"],
        [1, "arrow", "producer 1"],
    ]
    assert server.write("ev,host=h x=9.0 9\n", bucket="a1")[0] == 204
    assert server.sql("SELECT id, kind FROM th.producers WHERE trace = 'a1' AND kind = 'tags'") == [[2, "tags"]]
    neg = pa.table({"ts": pa.array([1], pa.int64()), "producer": pa.array([-3], pa.int32()), "x": [1.0]})
    st, _h, data = server.request("POST", "/api/v2/arrow?trace=a1&type=ev", ipc(neg))
    assert st == 400 and b"out of range" in data


def test_query_as_arrow_and_read_only(server):
    assert server.write("q v=1i 1\nq v=2i 2\n", bucket="w7")[0] == 204
    st, h, data = server.request(
        "POST",
        "/api/query",
        json.dumps({"sql": 'SELECT v FROM "w7".q ORDER BY v', "format": "arrow"}).encode(),
        {"Content-Type": "application/json"},
    )
    assert st == 200 and h["content-type"] == "application/vnd.apache.arrow.stream"
    assert pa.ipc.open_stream(data).read_all().column("v").to_pylist() == [1, 2]
    st, _h, data = server.request("GET", "/api/query?sql=SELECT%201%20AS%20x")
    assert st == 200 and json.loads(data)["rows"] == [[1]]
    for sql in (
        "COPY (SELECT 1) TO '/tmp/th-escape.csv'",
        "CREATE TABLE x AS SELECT 1",
        "SELECT 1; SELECT 2",
        "SELECT * FROM read_csv('/etc/passwd')",
        "ATTACH '/tmp/x.db'",
        "SET enable_external_access=true",
    ):
        st, _h, data = server.request("POST", "/api/query", sql.encode())
        assert st == 400, (sql, data)


def test_unknown_routes_and_missing_bucket(server):
    assert server.request("POST", "/api/v2/write", b"m v=1")[0] == 400
    assert server.request("POST", "/api/v2/write?bucket=../x", b"m v=1")[0] == 400
    assert server.request("GET", "/nope")[0] == 404
    st, _h, data = server.request("POST", "/query?q=CREATE%20DATABASE%20w8")
    assert st == 200 and json.loads(data) == {"results": [{"statement_id": 0}]}


# -- TCP ----------------------------------------------------------------------------------


def test_tcp_with_durable_offsets(server):
    s = server.tcp()
    s.sendall(b"# tracehouse bucket=t1 acks=1 precision=s\ncpu,host=a v=1 1\ncpu,host=a v=2 2\nbad\n")
    assert read_lines(s, 2) == ["err 4 missing fields (no space after the measurement and tags)", "ok 4 2"]
    s.sendall(b"cpu,host=b v=3 3\n" + b"x" * 5000 + b" v=1\ncpu v=4 4")  # over-long line dropped, last without \n
    s.shutdown(socket.SHUT_WR)
    got = read_lines(s, 3)
    # Line 6 is refused whether it arrived whole (decoder) or streamed in pieces (dropped unbuffered).
    assert [g for g in got if g.startswith("err")] and all(g.startswith("err 6 line is") for g in got if g[:3] == "err")
    assert got[-1] == "ok 7 4"
    s.close()
    assert server.sql('SELECT count(*) FROM "t1".cpu') == [[4]]


def test_tcp_at_most_once_default_bucket(server):
    s = server.tcp()
    s.sendall(b"tcpm v=1i 1\ntcpm v=2i 2\n")
    s.shutdown(socket.SHUT_WR)
    s.settimeout(10)
    assert s.recv(100) == b""  # nothing is sent back; the server closes after ingesting
    s.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if server.sql('SELECT count(*) FROM "lineproto".tcpm') == [[2]]:
                break
        except AssertionError:
            pass
        time.sleep(0.05)
    assert server.sql('SELECT sum(v) FROM "lineproto".tcpm') == [[3]]


# -- acknowledgement contracts ------------------------------------------------


@pytest.mark.parametrize("ack", ["durable", "written"])
def test_ack_written_answers_before_the_fsync_and_durable_after_it(tmp_path, ack):
    # A group-commit interval no test reaches: under --ack written the answers (HTTP 204, TCP
    # `ok`) come while the records wait for their fsync; under durable each answer waits for one.
    s = Server(tmp_path / "store", "--ack", ack, "--group-commit-ms", "600000", "--quiet")
    try:
        assert s.write("m,host=a v=1i 1\nm,host=a v=2i 2\n", bucket="acks", precision="s")[0] == 204
        t = s.tcp()
        t.sendall(b"# tracehouse bucket=acks acks=1 precision=s\nm,host=b v=3i 3\n")
        assert read_lines(t, 1) == ["ok 2 1"]
        t.close()
        _status, _h, data = s.request("GET", "/health")
        health = json.loads(data)
        assert health["ack"] == ack
        if ack == "written":
            assert health["wal_records_unsynced"] >= 1, health
        else:
            assert health["wal_records_unsynced"] == 0, health
        assert s.sql('SELECT sum(v) FROM "acks".m') == [[6]]
    finally:
        assert s.stop() == 0  # a clean stop fsyncs what was written
    s = Server(tmp_path / "store", "--quiet")
    try:
        assert s.sql('SELECT count(*), sum(v) FROM "acks".m') == [[3, 6]]
    finally:
        s.stop()


@pytest.mark.parametrize("ack,awaited", [("durable", True), ("durable", False), ("written", True)])
def test_under_ack_durable_the_fsync_starts_as_a_write_is_logged(tmp_path, ack, awaited):
    # Under --ack durable a write someone waits for waits for its fsync, so the committer starts
    # it when the record is written (eager), not when the answer is handed over; with a
    # group-commit interval no test reaches, a record nobody waits for yet becomes durable only
    # that way. Rounds of at-most-once TCP lines alone (awaited=False) and --ack written do not.
    import tracehouse
    from tracehouse.server.ingest import Ingestor

    store = tracehouse.open(tmp_path / "store", flush_rows=10_000_000, flush_interval_s=3600.0, group_commit_ms=600_000)
    try:
        ing = Ingestor(store, ServerConfig(ack=ack))
        eager = ack == "durable" and awaited
        first = ing.write_lp_many("eg", [(b"m,h=a v=1i 1\n", "ns", None, 1)], awaited=awaited)[0]
        assert ing.committer("eg").eager == eager
        deadline = time.monotonic() + (10 if eager else 0.3)  # not eager: it must not be
        while store.durable_lsn("eg") < first.lsn and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (store.durable_lsn("eg") >= first.lsn) == eager
    finally:
        store.close()


def test_ack_written_needs_a_wal():
    ServerConfig(ack="written").check()
    ServerConfig(ack="written", fsync="always").check()
    with pytest.raises(BadInput, match="no WAL"):
        ServerConfig(ack="written", fsync="off").check()
    with pytest.raises(BadInput, match="durable | written"):
        ServerConfig(ack="fsynced").check()


# -- limits -----------------------------------------------------------------------------


def test_body_limit_413_and_gzip_bomb(server):
    st, _ = server.write(b"m v=1\n" * 20000, bucket="l1")  # 120 KB > 64k
    assert st == 413
    bomb = gzip.compress(b"m v=1\n" * 100000)  # small on the wire, 600 KB inflated
    st, doc = server.write(bomb, bucket="l1", headers={"Content-Encoding": "gzip"})
    assert st == 413 and "inflates" in doc["message"]
    st, doc = server.write(b"\x1f\x8bnot gzip", bucket="l1", headers={"Content-Encoding": "gzip"})
    assert st == 400
    assert server.write("m v=1\n", bucket="l1")[0] == 204


def test_curl_style_chunked_body_expect_continue_and_keep_alive(server):
    # curl sends `Expect: 100-continue` for bodies over 1 KB and chunks bodies of unknown
    # length (-T -); a keep-alive connection carries several requests.
    s = _raw(server.port)
    lines = b"".join(b"c,host=h%d v=%di %d\n" % (i % 3, i, i) for i in range(200))
    chunks = b"".join(
        b"%x\r\n%s\r\n" % (len(lines[i : i + 700]), lines[i : i + 700]) for i in range(0, len(lines), 700)
    )
    s.sendall(
        b"POST /api/v2/write?bucket=w9 HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    assert s.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
    s.sendall(chunks + b"0\r\n\r\n")
    f = s.makefile("rb")
    assert f.readline().startswith(b"HTTP/1.1 204")
    while f.readline() not in (b"\r\n", b""):
        pass
    s.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")  # the same connection again
    assert f.readline().startswith(b"HTTP/1.1 204")
    s.close()
    assert server.sql('SELECT count(*), sum(v), count(DISTINCT producer) FROM "w9".c') == [[200, 19900, 3]]


def test_bad_requests_get_http_errors_not_a_dead_server(server):
    for raw, status in [
        (b"GARBAGE\r\n\r\n", b"400"),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", b"400"),
        (b"POST /api/v2/write?bucket=w9 HTTP/1.1\r\nContent-Length: x\r\n\r\n", b"400"),
        (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", b"431"),
        (b"DELETE /api/v2/write HTTP/1.1\r\nContent-Length: 0\r\n\r\n", b"405"),
        (b"GET /nope HTTP/1.1\r\n\r\n", b"404"),
    ]:
        s = _raw(server.port)
        s.sendall(raw)
        got = s.recv(200)
        assert got.startswith(b"HTTP/1.1 " + status), (raw[:40], got)
        s.close()
    assert server.request("GET", "/ping")[0] == 204


def _raw(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    return s


def test_silent_and_slow_clients_do_not_hold_the_server(server):
    silent = [_raw(server.port) for _ in range(5)]
    silent_tcp = [server.tcp() for _ in range(5)]
    slow_head = _raw(server.port)
    slow_head.sendall(b"POST /api/v2/write?bucket=l2 HTTP/1.1\r\nHost: x\r\n")
    slow_body = _raw(server.port)
    slow_body.sendall(b"POST /api/v2/write?bucket=l2 HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nm v=1")
    # Meanwhile others are served at once.
    t0 = time.monotonic()
    assert server.write("m v=1 1\n", bucket="l2")[0] == 204
    assert time.monotonic() - t0 < 5
    # After the idle timeout (1 s) every one of them has been closed by the server.
    time.sleep(2.5)
    for s in silent + silent_tcp + [slow_head]:
        s.settimeout(5)
        assert s.recv(1000) in (b"",) or True  # closed: EOF (maybe after nothing)
        s.settimeout(5)
        assert s.recv(1000) == b""
        s.close()
    slow_body.settimeout(5)
    resp = slow_body.recv(1000)
    assert resp.startswith(b"HTTP/1.1 408"), resp
    slow_body.close()
    assert server.sql('SELECT count(*) FROM "l2".m') == [[1]]


def test_client_disconnecting_mid_body(server):
    for _ in range(5):
        s = _raw(server.port)
        s.sendall(b"POST /api/v2/write?bucket=l3 HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nm v=1 1\nm v=")
        s.close()
    s = server.tcp()
    s.sendall(b"# tracehouse bucket=l3 acks=1\nm v=2 2\nm v=")  # a half line, then gone
    s.close()
    assert server.write("m v=3 3\n", bucket="l3")[0] == 204
    time.sleep(0.3)
    rows = server.sql('SELECT ts FROM "l3".m ORDER BY ts')
    assert [2, 2] not in rows and [3] in rows
    assert [1] not in rows  # the cut HTTP body was never acknowledged nor stored


def test_overload_is_503_with_retry_after(tmp_path):
    s = Server(
        tmp_path / "store", "--max-inflight", "1k", "--overload-wait", "0.2", "--idle-timeout", "5", "--tcp-port", "-1"
    )
    try:
        hold = _raw(s.port)  # holds the whole in-flight budget with a body it never finishes
        hold.sendall(b"POST /api/v2/write?bucket=o HTTP/1.1\r\nHost: x\r\nContent-Length: 1024\r\n\r\nm v=1")
        time.sleep(0.3)
        st, h, data = s.request("POST", "/api/v2/write?bucket=o", b"m v=2 2\n")
        assert st == 503 and h["retry-after"] == "1", data
        hold.close()
        deadline = time.monotonic() + 10
        while s.request("POST", "/api/v2/write?bucket=o", b"m v=2 2\n")[0] != 204:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        st, _h, data = s.request("GET", "/health")
        assert json.loads(data)["overload_refusals"] >= 1
    finally:
        s.stop()


def test_connection_limits(tmp_path):
    s = Server(tmp_path / "store", "--max-connections", "3", "--idle-timeout", "10")
    try:
        conns = [s.tcp() for _ in range(3)]
        time.sleep(0.2)
        extra = s.tcp()
        assert read_lines(extra, 1) == ["err 0 too many connections"]
        extra.close()
        http_conns = [_raw(s.port) for _ in range(3)]
        time.sleep(0.2)
        st, _h, _d = s.request("GET", "/ping")
        assert st == 503
        for c in conns + http_conns:
            c.close()
        time.sleep(0.3)
        assert s.request("GET", "/ping")[0] == 204
    finally:
        s.stop()


# -- auth -------------------------------------------------------------------------------


def test_token_required_when_set(tmp_path):
    s = Server(tmp_path / "store", "--token", "s3cret")
    try:
        assert s.write("m v=1 1\n", bucket="a")[0] == 401
        assert s.write("m v=1 1\n", bucket="a", headers={"Authorization": "Token wrong"})[0] == 401
        assert s.write("m v=1 1\n", bucket="a", headers={"Authorization": "Token s3cret"})[0] == 204
        assert s.request("POST", "/write?db=a&u=x&p=s3cret", b"m v=2 2\n")[0] == 204
        assert s.request("POST", "/api/query", b"SELECT 1")[0] == 401
        assert s.sql('SELECT count(*) FROM "a".m', headers={"Authorization": "Bearer s3cret"}) == [[2]]
        t = s.tcp()
        t.sendall(b"m v=3 3\n")
        assert read_lines(t, 1)[0].startswith("err 0 unauthorized")
        t.close()
        t = s.tcp()
        t.sendall(b"# tracehouse bucket=a acks=1 token=s3cret\nm v=3 3\n")
        assert read_lines(t, 1) == ["ok 2 1"]
        t.close()
        assert s.request("GET", "/health")[0] == 401  # it shows the pid and counters: token holders only
        st, _h, data = s.request("GET", "/health", headers={"Authorization": "Token s3cret"})
        assert json.loads(data)["auth_refusals"] >= 4
        assert s.alive()
    finally:
        s.stop()
    assert "refused" in s.log.read_text()


def test_binding_beyond_loopback_needs_a_token():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0")
    with pytest.raises(BadInput, match="needs a token"):
        ServerConfig(host="0.0.0.0").check()
    ServerConfig(host="0.0.0.0", token="t").check()


# -- restart --------------------------------------------------------------------------------


def test_restart_keeps_producer_ids_and_columns(tmp_path):
    s = Server(tmp_path / "store")
    try:
        assert s.write('m,host=a v=1 1\nm,host=b v=2,extra="e" 2\n', bucket="r")[0] == 204
    finally:
        s.stop()
    s = Server(tmp_path / "store")
    try:
        assert s.write("m,host=b v=3 3\nm,host=c v=4 4\n", bucket="r")[0] == 204
        assert s.write("m,host=c extra=5i 5\n", bucket="r")[0] == 400  # still a string column
        rows = s.sql(
            "SELECT p.name, count(*) FROM \"r\".m e JOIN th.producers p ON p.trace = 'r' AND p.id = e.producer "
            "GROUP BY p.name ORDER BY p.name"
        )
        assert rows == [["host=a", 1], ["host=b", 2], ["host=c", 1]]
    finally:
        s.stop()


def test_many_concurrent_writers(server):
    errors = []

    def writer(w: int) -> None:
        try:
            c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            for b in range(10):
                body = "".join(f"cw,writer={w} b={b}i,i={i}i {b * 100 + i}\n" for i in range(20)).encode()
                c.request("POST", "/api/v2/write?bucket=cw", body)
                r = c.getresponse()
                r.read()
                if r.status != 204:
                    errors.append(r.status)
            c.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert server.sql('SELECT count(*), count(DISTINCT producer) FROM "cw".cw') == [[16 * 10 * 20, 16]]


def test_coalesced_bodies_keep_their_own_lines_and_share_one_append(store):
    from tracehouse.server.ingest import Ingestor

    ing = Ingestor(store, ServerConfig())
    a = b"m,h=1 v=1 1\nm,h=1 v=oops 2\nn x=1i 3\n"
    b = b'm,h=2 v=2 4\nm,h=2 v=3,w="new" 5\n'  # widens m: appended apart from a's m rows
    c = b"m,h=3 v=4 6\n"
    ra, rb, rc = ing.write_lp_many("co", [(a, "ns", None, 1), (b, "ns", None, 10), (c, "ns", None, 1)])
    assert (ra.rows, ra.error_count, ra.errors[0][0]) == (2, 1, 2)
    assert (rb.rows, rb.error_count, rb.last_line) == (2, 0, 11)
    assert (rc.rows, rc.error_count) == (1, 0)
    assert ra.lsn is not None and rc.lsn is not None
    assert store.wait_durable("co", max(ra.lsn, rb.lsn, rc.lsn), timeout=10)
    t = store.sql('SELECT ts, v, w FROM "co".m ORDER BY ts').to_pylist()
    assert [r["ts"] for r in t] == [1, 4, 5, 6] and t[2]["w"] == "new" and t[0]["w"] is None
    assert store.sql('SELECT count(*) AS n FROM "co".n').to_pylist() == [{"n": 1}]


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def test_coalesced_arrow_streams_share_one_append_and_a_bad_one_stores_nothing(store):
    from tracehouse.errors import BadInput as Bad
    from tracehouse.server.ingest import Ingestor

    ing = Ingestor(store, ServerConfig())
    good = [
        _ipc(
            pa.table(
                {
                    "ts": pa.array([i, i + 1], pa.int64()),
                    "producer": pa.array([i, i], pa.int32()),
                    "v": [float(i), 2.0 * i],
                }
            )
        )
        for i in (10, 20)
    ]
    wider = _ipc(
        pa.table({"ts": pa.array([30], pa.int64()), "producer": pa.array([1], pa.int32()), "v": [3.0], "w": ["x"]})
    )
    null_ts = _ipc(
        pa.table({"ts": pa.array([None, 41], pa.int64()), "producer": pa.array([1, 1], pa.int32()), "v": [4.0, 4.1]})
    )
    cut = good[0][: len(good[0]) - 40]  # a stream broken after its schema
    r0, r1 = ing.write_arrow_many("ar", "ev", good)
    assert r0.lsn == r1.lsn and r0.rows == r1.rows == 2  # equal schemas: one append
    # A bad body among good ones (null ts: same schema, so first tried in the shared append)
    # is refused alone; a cut or junk stream stores nothing.
    res = ing.write_arrow_many("ar", "ev", [good[0], cut, wider, null_ts, good[1], b"junk"])
    assert [type(r).__name__ for r in res] == [
        "WriteResult",
        "BadInput",
        "WriteResult",
        "BadInput",
        "WriteResult",
        "BadInput",
    ]
    assert isinstance(res[3], Bad) and "null" in str(res[3])
    assert store.wait_durable("ar", max(r.lsn for r in res if not isinstance(r, Exception)), timeout=10)
    rows = store.sql('SELECT ts, producer, v, w FROM "ar".ev ORDER BY ts').to_pylist()
    assert [r["ts"] for r in rows] == [10, 10, 11, 11, 20, 20, 21, 21, 30]
    assert rows[-1]["w"] == "x" and rows[0]["w"] is None


def test_port_in_use_is_a_clear_error(server, tmp_path):
    import subprocess
    import sys

    from helpers import child_env

    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "tracehouse.cli",
            "--store",
            str(tmp_path / "s2"),
            "serve",
            "--port",
            str(server.port),
            "--tcp-port",
            "-1",
        ],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "cannot listen on 127.0.0.1" in r.stderr, r.stderr


def test_second_server_on_the_same_store_is_refused(server):
    import subprocess
    import sys

    from helpers import child_env

    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "tracehouse.cli",
            "--store",
            str(server.store),
            "serve",
            "--port",
            "0",
            "--tcp-port",
            "-1",
        ],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 3 and "another process" in r.stderr, r.stderr
    assert server.request("GET", "/ping")[0] == 204


def test_arrow_writes_name_their_producers_and_skip_known_schemas_by_their_bytes(store):
    # The one-producer fast path (a native range) and the distinct-ids path register the same
    # producers; a schema seen before is recognised by its IPC message bytes, and a new one
    # (wider, or back to the narrower) still goes through the catalog.
    from tracehouse.errors import BadInput as Bad
    from tracehouse.server.ingest import Ingestor, _schema_key

    ing = Ingestor(store, ServerConfig())

    def body(producers, **cols):
        n = len(producers)
        return _ipc(
            pa.table(
                {
                    "ts": pa.array(range(n), pa.int64()),
                    "producer": pa.array(producers, pa.int32()),
                    **{k: pa.array(v) for k, v in cols.items()},
                }
            )
        )

    narrow = body([5, 5, 5], x=[1.0, 2.0, 3.0])
    assert ing.write_arrow("pr", "ev", narrow).rows == 3
    assert ing.write_arrow("pr", "ev", body([6, 7, 6], x=[1.0, 2.0, 3.0])).rows == 3
    assert ing.write_arrow("pr", "ev", body([9], x=[1.0], y=["wide"])).rows == 1
    assert ing.write_arrow("pr", "ev", narrow).rows == 3
    with pytest.raises(Bad, match="null"):
        ing.write_arrow("pr", "ev", body([None, 8], x=[1.0, 2.0]))
    with pytest.raises(Bad, match="out of range"):
        ing.write_arrow("pr", "ev", body([-4, -4], x=[1.0, 2.0]))
    ids = [p["id"] for p in store.producers("pr")]
    assert {5, 6, 7, 9} <= set(ids) and -4 not in ids
    assert [c.name for c in store.event_types("pr")["ev"].params] == ["x", "y"]
    assert store.sql('SELECT count(*) AS n, count(y) AS y FROM "pr".ev').to_pylist() == [{"n": 10, "y": 1}]
    # The key is exactly the stream's schema message; anything else is no key.
    key = _schema_key(narrow)
    assert pa.ipc.read_schema(pa.py_buffer(key)).equals(pa.ipc.open_stream(narrow).schema)
    assert _schema_key(narrow[: len(key) - 1]) is None and _schema_key(b"\xff\xff\xff\xff") is None


@given(st.binary(max_size=64))
def test_the_schema_key_of_any_bytes_is_none_or_a_prefix(data):
    from tracehouse.server.ingest import _schema_key

    key = _schema_key(data)
    assert key is None or (data.startswith(key) and len(key) > 4)


def test_arrow_streams_written_by_polars_store_their_string_view_columns(store):
    # polars writes strings as string_view (Utf8View) in Arrow IPC: refused as "unsupported
    # type string_view" before; stored as the string parameters they are.
    import io

    import polars as pl

    from tracehouse.server.ingest import Ingestor

    ing = Ingestor(store, ServerConfig())
    df = pl.DataFrame(
        {
            "ts": pl.Series([1, 2, 3], dtype=pl.Int64),
            "producer": pl.Series([4, 4, 4], dtype=pl.Int32),
            "v": [1.5, 2.5, 3.5],
            "host": ["a", "b", None],
        }
    )
    buf = io.BytesIO()
    df.write_ipc_stream(buf)
    assert pa.ipc.open_stream(buf.getvalue()).schema.field("host").type == pa.string_view()
    assert ing.write_arrow("pl", "m", buf.getvalue()).rows == 3
    assert [c.type for c in store.event_types("pl")["m"].params] == ["float64", "string"]
    rows = store.sql('SELECT ts, host, v FROM "pl".m ORDER BY ts').to_pylist()
    assert [(r["host"], r["v"]) for r in rows] == [("a", 1.5), ("b", 2.5), (None, 3.5)]
