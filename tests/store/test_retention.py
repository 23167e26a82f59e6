"""Retention: whole segments older than a trace's window are dropped at compaction (and when the
retention is set), the catalog and counts follow, nothing else is deleted; set through the API,
`tracehouse retain`, and InfluxQL's CREATE DATABASE ... WITH DURATION and retention policies."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import pyarrow as pa
import pytest

import tracehouse
from helpers import child_env
from helpers.server import Server
from tracehouse import Column, EventType
from tracehouse.errors import BadInput
from tracehouse.store.compact import format_duration, parse_duration

H = 3600 * 10**9
ET = EventType("m", "instant", (Column("v", "int64", "", "a value"),), "a measurement")


def segment(s, trace: str, ts: list[int]) -> None:
    """One checkpoint (one segment) of rows at `ts`."""
    s.append(
        trace, "m", pa.table({"ts": ts, "producer": pa.array([0] * len(ts), pa.int32()), "v": list(range(len(ts)))})
    )
    s.flush(trace)


def make(path, now: int):
    s = tracehouse.open(path, fsync="off")
    s.create_trace(
        "t", "custom", event_types=[ET], producers=[{"id": 0, "parent": None, "kind": "p", "name": "p", "attrs": {}}]
    )
    segment(s, "t", [now - 50 * H, now - 49 * H])  # older than 24 h: dropped
    segment(s, "t", [now - 30 * H, now - 2 * H])  # straddles the cutoff: kept whole
    segment(s, "t", [now - H, now])  # inside
    return s


def test_set_retention_drops_whole_old_segments_and_counts_follow(tmp_path):
    now = time.time_ns()
    with make(tmp_path / "s", now) as s:
        assert s.trace("t").event_count == 6 and len(s.segments_of("t")) == 3
        old = [seg for seg in s.segments_of("t") if seg.ts_max < now - 24 * H]
        assert s.set_retention("t", 24 * H) == 1
        info = s.trace("t")
        assert (info.event_count, info.ts_min) == (4, now - 30 * H)
        assert s.sql("SELECT count(*) AS n, min(ts) AS lo FROM t.m").to_pylist() == [{"n": 4, "lo": now - 30 * H}]
        assert s.sql("SELECT count(*) AS n FROM th.segments WHERE trace = 't'").column(0)[0].as_py() == 2
        assert s.retention("t") == 24 * H
        # nothing else: producers and the type stay, and a row older than the window in a kept segment too
        assert len(s.producers("t")) == 1 and "m" in s.event_types("t")
        assert s.sql(f"SELECT count(*) FROM t.m WHERE ts < {now - 24 * H}").column(0)[0].as_py() == 1
        assert (tmp_path / "s" / old[0].path).exists()  # the file waits its grace for readers


def test_retention_applies_at_compaction_to_segments_that_age_or_arrive_old(tmp_path):
    now = time.time_ns()
    with make(tmp_path / "s", now) as s:
        s.set_retention("t", 24 * H)
        segment(s, "t", [now - 100 * H, now - 99 * H])  # a late batch of old rows: its checkpoint's compaction
        s.compact("t")
        assert s.trace("t").event_count == 4
        assert s.sql("SELECT min(ts) FROM t.m").column(0)[0].as_py() == now - 30 * H
        s.set_retention("t", 0)  # forever: nothing more is dropped
        segment(s, "t", [now - 100 * H])
        s.compact("t")
        assert s.trace("t").event_count == 5


def test_durations_parse_and_print_as_influxdb_does():
    assert parse_duration("30d") == 30 * 24 * H and parse_duration("1w2d") == 9 * 24 * H
    assert parse_duration("90m") == 3 * H // 2 and parse_duration("inf") == parse_duration("0") == 0
    assert [format_duration(x) for x in (0, 30 * 24 * H, 3 * H // 2, 90 * 10**9, 1500 * 10**6)] == [
        "0s",
        "720h0m0s",
        "1h30m0s",
        "1m30s",
        "1.5s",
    ]
    with pytest.raises(BadInput, match="invalid duration '30 days'"):
        parse_duration("30 days")


def test_cli_retain(tmp_path):
    now = time.time_ns()
    make(tmp_path / "s", now).close()
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "tracehouse.cli",
            "--store",
            str(tmp_path / "s"),
            "retain",
            "t",
            "--keep",
            "1d",
            "--json",
        ],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {
        "trace": "t",
        "keep_ns": 24 * H,
        "keep": "24h0m0s",
        "segments_dropped": 1,
        "events_before": 6,
        "events": 4,
    }
    r = subprocess.run(
        [sys.executable, "-m", "tracehouse.cli", "--store", str(tmp_path / "s"), "retain", "t", "--keep", "a while"],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "invalid duration 'a while'" in r.stderr


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_retention_is_refused_for_a_trace_of_its_own_clock(tmp_path):
    """strace -tt writes the time of day (62976.18 s): every segment is older than any cutoff, and
    `retain --keep 30d` dropped the whole import. It is refused now and nothing is dropped."""
    cap = tmp_path / "ls.strace"
    subprocess.run(["strace", "-f", "-tt", "-T", "-y", "-o", str(cap), "ls", "/"], capture_output=True, check=True)
    store = tmp_path / "s"

    def cli(*args):
        cmd = [sys.executable, "-m", "tracehouse.cli", "--store", str(store), *args]
        return subprocess.run(cmd, env=child_env(), capture_output=True, text=True, timeout=120)

    assert cli("import", "strace", str(cap), "--name", "tod").returncode == 0
    with tracehouse.open(store, fsync="off") as s:
        events = s.trace("tod").event_count
        assert events > 10 and s.trace("tod").ts_max < 86_400 * 10**9
    r = cli("retain", "tod", "--keep", "30d")
    assert r.returncode == 2 and "not epoch times" in r.stderr, r.stderr
    with tracehouse.open(store, fsync="off") as s:
        assert s.trace("tod").event_count == events and s.retention("tod") == 0
        # a trace given a retention while it was empty keeps rows of its own clock that arrive later
        s.create_trace(
            "b",
            "custom",
            event_types=[ET],
            producers=[{"id": 0, "parent": None, "kind": "p", "name": "p", "attrs": {}}],
        )
        assert s.set_retention("b", H) == 0
        segment(s, "b", [5 * 10**9, 6 * 10**9])
        s.compact("b")
        assert s.trace("b").event_count == 2 and s.retention("b") == H


def influx(server: Server, q: str, db: str | None = None) -> dict:
    from urllib.parse import urlencode

    status, _h, body = server.request("POST", "/query?" + urlencode({"q": q, **({"db": db} if db else {})}))
    assert status == 200, body
    return json.loads(body)


def test_influxql_retention_policies_are_applied(tmp_path):
    s = Server(tmp_path / "store", "--quiet")
    try:
        r = influx(s, "CREATE DATABASE d WITH DURATION 2h NAME short")
        assert "messages" not in r["results"][0]  # no longer "accepted with a warning": applied
        pol = influx(s, "SHOW RETENTION POLICIES ON d")["results"][0]["series"][0]
        assert pol["values"] == [["short", "2h0m0s", "1h0m0s", 1, True]]
        now_s = time.time_ns() // 10**9
        assert (
            s.write(f"m,h=a v=1i {now_s - 5 * 3600}\nm,h=a v=2i {now_s - 4 * 3600}", bucket="d", precision="s")[0]
            == 204
        )
        deadline = time.monotonic() + 30  # its checkpoint registers, and the compaction after it drops it
        while s.sql("SELECT count(*) FROM d.m")[0][0] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert s.sql("SELECT count(*) FROM d.m")[0][0] == 0
        assert s.write(f"m,h=a v=3i {now_s - 3 * 3600}\nm,h=a v=4i {now_s}", bucket="d", precision="s")[0] == 204
        assert influx(s, "ALTER RETENTION POLICY short ON d DURATION 10h")["results"][0] == {"statement_id": 0}
        time.sleep(1.5)  # a checkpoint and a compaction: nothing is in the 10 h window's past
        assert s.sql("SELECT count(*) FROM d.m")[0][0] == 2
        r = influx(
            s,
            "CREATE RETENTION POLICY month ON d DURATION 30d REPLICATION 1 DEFAULT; "
            "SHOW RETENTION POLICIES ON d; ALTER RETENTION POLICY short ON d DURATION 1h",
        )["results"]
        assert "replaces 'short'" in r[0]["messages"][0]["text"]
        assert r[1]["series"][0]["values"] == [["month", "720h0m0s", "24h0m0s", 1, True]]
        assert r[2]["error"] == "retention policy not found: short"
        r = influx(s, "DROP RETENTION POLICY month ON d")["results"][0]
        assert "is not dropped" in r["error"]
        assert s.sql("SELECT count(*) FROM d.m")[0][0] == 2
    finally:
        assert s.stop() == 0


def test_a_retention_policy_that_is_not_the_default_deletes_nothing(tmp_path):
    """In InfluxDB a non-default policy holds only the writes that name it (a downsampling
    script's `CREATE RETENTION POLICY one_hour ON telegraf DURATION 1h REPLICATION 1`): the
    database's rows are not its rows. tracehouse keeps one policy per database, so such a policy
    is not applied (a warning says so) rather than deleting every row older than an hour."""
    s = Server(tmp_path / "store", "--quiet")
    try:
        now_s = time.time_ns() // 10**9
        assert s.write(f"m,h=a v=1i {now_s - 5 * 3600}\nm,h=a v=2i {now_s}", bucket="d", precision="s")[0] == 204
        r = influx(s, "CREATE RETENTION POLICY one_hour ON d DURATION 1h REPLICATION 1")["results"][0]
        assert "'one_hour' is not applied" in r["messages"][0]["text"]
        pol = influx(s, "SHOW RETENTION POLICIES ON d")["results"][0]["series"][0]
        assert pol["values"] == [["autogen", "0s", "168h0m0s", 1, True]]
        assert s.write(f"m,h=a v=3i {now_s - 4 * 3600}", bucket="d", precision="s")[0] == 204
        time.sleep(1.5)  # a checkpoint and a compaction: a 1 h retention would have dropped two rows
        assert s.sql("SELECT count(*) FROM d.m")[0][0] == 3
        # the database's own policy again: nothing; with another duration: InfluxDB's error
        assert influx(s, "CREATE RETENTION POLICY autogen ON d DURATION INF REPLICATION 1")["results"][0] == {
            "statement_id": 0
        }
        r = influx(s, "CREATE RETENTION POLICY autogen ON d DURATION 2h REPLICATION 1")["results"][0]
        assert r["error"] == "retention policy already exists"
        # nor does CREATE DATABASE change an existing database's policy (InfluxDB's error)
        r = influx(s, "CREATE DATABASE d WITH DURATION 1h")["results"][0]
        assert r["error"] == "retention policy conflicts with an existing policy"
        assert influx(s, "CREATE DATABASE d WITH DURATION INF; CREATE DATABASE d")["results"][1] == {"statement_id": 1}
        assert s.sql("SELECT count(*) FROM d.m")[0][0] == 3
    finally:
        assert s.stop() == 0
