"""A server no request can stall, against a real `tracehouse serve`.

Each test names the limit it checks: a query's deadline covers its planning (the query runs in a
process the server kills), a memory cap per query, caps on the statement and its parse tree,
`SELECT 1` answered while hostile queries run, SIGTERM while a query plans, DuckDB's temp
directory inside the store, reserved names, the papercuts (deep JSON, bad parameters), and the
web console's Cancel of a query running or still waiting for a process.
"""

from __future__ import annotations

import fcntl
import json
import os
import statistics
import threading
import time

import pytest

import tracehouse
from helpers.server import Server


def join_chain(n: int) -> str:
    """An n-way self-join of range(3): DuckDB's join ordering takes seconds from ~100 relations on."""
    return "SELECT count(*) FROM range(3) t0 " + " ".join(
        f"JOIN range(3) t{i} ON t{i}.range = t{i - 1}.range" for i in range(1, n)
    )


HUGE = "SELECT count(*) FROM range(1000000000000)"  # runs for hours


def in_background(server: Server, sql: str, timeout: float = 60) -> threading.Thread:
    """`sql` posted from a thread (its connection may be cut when the server stops: that is fine)."""

    def run() -> None:
        try:
            post(server, "/api/query", {"sql": sql}, timeout)
        except OSError:
            pass

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def post(server: Server, path: str, doc, timeout: float = 60) -> tuple[int, dict, float]:
    body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    t0 = time.monotonic()
    status, _h, data = server.request("POST", path, body, {"Content-Type": "application/json"}, timeout=timeout)
    try:
        out = json.loads(data) if data else {}
    except ValueError:
        out = {"raw": data[:200]}
    return status, out, time.monotonic() - t0


@pytest.fixture
def store_with_trace(tmp_path):
    path = tmp_path / "store"
    with tracehouse.open(path) as s:
        from helpers import BATCH_TYPE, batch_table

        s.create_trace("t", "crashfmt", event_types=[BATCH_TYPE])
        s.append("t", "ev", batch_table(1))
        s.flush()
    return path


def test_issue28_query_timeout_covers_planning(store_with_trace):
    """A 200-way join spends its time in DuckDB's planner, where an interrupt is not seen: on the
    in-process runner it answered only when planning ended (34 s at a 5 s timeout). 140 ways
    planned in 1.8 s on a quiet machine, under the timeout; 200 take 7-8 s."""
    srv = Server(store_with_trace, "--query-timeout", "2", "--max-relations", "1000", "--max-parse-nodes", "100000")
    try:
        status, doc, took = post(srv, "/api/query", {"sql": join_chain(200)})
        assert status == 504 and "--query-timeout" in doc["message"], doc
        assert took < 2 + 3, f"answered after {took:.1f} s"
        assert srv.sql("SELECT 1 AS one") == [[1]]  # the killed process is replaced
    finally:
        srv.stop()


def test_issue28_statement_and_parse_tree_caps_answer_at_once_naming_the_limit(store_with_trace):
    srv = Server(store_with_trace)
    try:
        assert srv.sql("SELECT 1 AS warm") == [[1]]  # (the first query starts the query processes)
        for sql, status, limit in (
            (("SELECT 1" + " UNION ALL SELECT 1" * 20_000), 413, "--max-statement"),
            ("SELECT 1" + " UNION ALL SELECT 1" * 1_500, 422, "--max-parse-nodes"),
            (join_chain(200), 422, "--max-relations"),
        ):
            got, doc, took = post(srv, "/api/query", {"sql": sql})
            assert (got, limit in doc.get("message", "")) == (status, True), (limit, got, doc)
            assert took < 2, (limit, took)
        assert srv.sql("SELECT 1 AS remaining") == [[1]]
    finally:
        srv.stop()


def test_issue28_select_1_answers_within_100_ms_while_4_hostile_queries_run(store_with_trace):
    srv = Server(store_with_trace, "--query-timeout", "30", "--query-workers", "4")
    try:
        assert srv.sql("SELECT 1 AS warm") == [[1]]
        time.sleep(1.0)  # (the express process is made beside the first one)
        for _ in range(4):
            in_background(srv, HUGE)
        time.sleep(1.0)
        took = []
        for _ in range(7):
            status, doc, t = post(srv, "/api/query", {"sql": "SELECT 1"})
            assert status == 200, doc
            took.append(t)
        assert statistics.median(took) < 0.1, took
        health = json.loads(srv.request("GET", "/health")[2])
        assert health["queries_running"] == 4, health
    finally:
        assert srv.stop(timeout=15) == 0


def test_issue28_query_memory_cap(store_with_trace):
    srv = Server(store_with_trace, "--query-memory", "300M")
    try:
        status, doc, _ = post(srv, "/api/query", {"sql": "SELECT list(range) AS l FROM range(400000000)"})
        assert status == 422 and "--query-memory" in doc["message"], (status, doc)
        assert srv.sql("SELECT 2 AS two") == [[2]]
    finally:
        srv.stop()


def test_issue28_sigterm_while_a_query_plans_exits_at_once_and_lets_go_of_the_lock(store_with_trace):
    srv = Server(store_with_trace, "--query-timeout", "120", "--max-relations", "1000", "--max-parse-nodes", "100000")
    in_background(srv, join_chain(160), 120)
    time.sleep(1.5)
    t0 = time.monotonic()
    srv.proc.send_signal(15)
    srv.proc.wait(30)
    took = time.monotonic() - t0
    srv._log.close()
    log = srv.log.read_text()
    assert srv.proc.returncode == 0, log
    assert took < 5, f"SIGTERM took {took:.1f} s"
    assert "Traceback" not in log, log
    fd = os.open(store_with_trace / "writer.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # let go of
    finally:
        os.close(fd)


def test_issue28_duckdb_temp_directory_is_inside_the_store(store_with_trace, tmp_path):
    cwd_tmp = tmp_path / ".tmp"
    cwd_tmp.mkdir()
    (cwd_tmp / "secret.txt").write_text("outside the store")
    srv = Server(store_with_trace)  # (its working directory is the test's)
    try:
        (where,) = srv.sql("SELECT current_setting('temp_directory') AS d")[0]
        assert where.startswith(str(store_with_trace)), where
        status, doc, _ = post(srv, "/api/query", {"sql": f"SELECT content FROM read_text('{cwd_tmp}/secret.txt')"})
        assert status == 400 and "outside the store" not in json.dumps(doc), doc
    finally:
        srv.stop()


def test_issue28_reserved_bucket_names_are_refused_before_anything_is_created(store_with_trace):
    srv = Server(store_with_trace)
    try:
        for bucket in ("th", "main", "information_schema", "pg_catalog", "MAIN", "Th", "temp", "system", "memory"):
            status, doc = srv.write("cpu,host=a usage=1 1000\n", bucket=bucket)
            assert status == 400 and "reserved" in doc["message"], (bucket, doc)
        assert srv.sql("SELECT name FROM th.traces") == [["t"]]
        assert srv.sql("SELECT 1 AS remaining") == [[1]]
    finally:
        srv.stop()
    with tracehouse.open(store_with_trace, readonly=True) as s:
        assert [t.name for t in s.traces()] == ["t"]


def test_issue28_measurements_named_events_or_differing_only_in_case_get_types_of_their_own(store_with_trace):
    # SQL names ignore case and `events` is a bucket's view of every type: such measurements
    # (and fields differing only in case) are stored under names of their own, as InfluxDB
    # keeps them apart.
    srv = Server(store_with_trace)
    try:
        status, doc = srv.write("events,host=a v=1 1000\ncpu,host=a usage=1,Usage=9 2000\n", bucket="lp")
        assert status == 204, doc
        status, doc = srv.write("CPU,host=a usage=2 3000\nCpu,host=b usage=3 4000\n", bucket="lp")
        assert status == 204, doc
        assert srv.sql('SELECT usage, Usage_2 FROM "lp".cpu') == [[1.0, 9.0]]  # every acknowledged row
        assert srv.sql('SELECT usage FROM "lp".CPU_2') == [[2.0]]
        assert srv.sql('SELECT usage FROM "lp".Cpu_3') == [[3.0]]
        assert srv.sql('SELECT v FROM "lp".events_') == [[1.0]]
        status, doc = srv.write("cpu,host=a usage=4 5000\n", bucket="LP")
        assert status == 400 and "differs only in case from the trace 'lp'" in doc["message"], doc
    finally:
        srv.stop()


def test_issue28_papercuts_deep_json_and_bad_parameters_are_400(store_with_trace):
    srv = Server(store_with_trace)
    try:
        deep = b"[" * 100_000 + b"]" * 100_000
        for path in ("/api/query", "/api/ui/sql", "/api/ui/sql/download"):
            status, doc, _ = post(srv, path, deep)
            assert status == 400, (path, status, doc)
        status, _h, data = srv.request("GET", "/api/ui/flame?trace=t&min_share=abc")
        assert status == 400 and b"min_share" in data, data
    finally:
        srv.stop()


CRASHED = """
import os, sys
sys.path.insert(0, {tests!r})
import tracehouse
from helpers import BATCH_TYPE, batch_table
s = tracehouse.open({path!r}, fsync="always", flush_interval_s=3600.0)
s.create_trace("t", "crashfmt", event_types=[BATCH_TYPE])
for b in (1, 2, 3):
    s.append("t", "ev", batch_table(b), wait=True)
os._exit(0)
"""


def test_issue28_serve_logs_at_start_what_recovery_cut_from_a_damaged_wal(tmp_path):
    import subprocess
    import sys

    from helpers import child_env, rows_of_batch, wal_files, wal_frames
    from helpers.paths import TESTS

    path = tmp_path / "store"
    subprocess.run(
        [sys.executable, "-c", CRASHED.format(tests=str(TESTS), path=str(path))],
        check=True,
        timeout=60,
        env=child_env(),
    )
    (wal,) = wal_files(path)
    (_, (start2, end2), _) = wal_frames(wal)
    data = bytearray(wal.read_bytes())
    data[(start2 + end2) // 2] ^= 0x5A
    wal.write_bytes(bytes(data))
    srv = Server(path)
    try:
        log = srv.log.read_text()
        assert "recovery of trace t cut a damaged WAL record" in log and wal.name in log, log
        assert f"{rows_of_batch(2):,} rows" in log, log
        ((state, reason),) = srv.sql("SELECT state, state_reason FROM th.traces")
        assert state == "incomplete" and reason.startswith("WAL damaged: 1 record(s)"), reason
        assert srv.sql('SELECT DISTINCT batch FROM "t".ev ORDER BY 1') == [[1], [3]]
    finally:
        srv.stop()


def test_issue33_a_console_query_cancelled_while_it_waits_for_a_process_stops_once_it_has_one(store_with_trace):
    """Cancel of the web console: a running query's process is killed (499 at once); a query
    still waiting for a process is stopped when it gets one, not run to its timeout."""
    srv = Server(store_with_trace, "--query-timeout", "30", "--query-workers", "1")
    pad = " /*" + "x" * 300 + "*/"  # longer than the express process takes
    got: dict[str, tuple] = {}

    def run(tag: str) -> None:
        got[tag] = post(srv, "/api/ui/sql", {"sql": HUGE + pad, "id": tag})

    def running() -> int:
        return json.loads(srv.request("GET", "/health")[2])["queries_running"]

    try:
        a = threading.Thread(target=run, args=("a",), daemon=True)
        a.start()
        end = time.monotonic() + 20
        while running() < 1:
            assert time.monotonic() < end
            time.sleep(0.05)
        b = threading.Thread(target=run, args=("b",), daemon=True)
        b.start()
        time.sleep(0.5)  # b waits for the one query process
        assert post(srv, "/api/ui/sql/cancel", {"id": "b"})[:2] == (200, {"cancelled": False})
        t0 = time.monotonic()
        assert post(srv, "/api/ui/sql/cancel", {"id": "a"})[:2] == (200, {"cancelled": True})
        a.join(10)
        b.join(10)
        assert time.monotonic() - t0 < 8  # not the 30 s timeout
        for tag in "ab":
            status, doc, _s = got[tag]
            assert status == 499 and "cancelled" in doc["error"], (tag, got[tag])
        assert post(srv, "/api/ui/sql", {"sql": "SELECT 7 AS x", "id": "c"})[:2][1]["rows"] == [[7]]
    finally:
        srv.stop()
