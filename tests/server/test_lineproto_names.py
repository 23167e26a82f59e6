"""Line-protocol names that SQL identifiers cannot hold as they are, through a real server.

Field keys `a.b`, `a_b` and `a-b` are three fields to InfluxDB, and `ts` and `ts_` two: each
gets a column of its own (`a_b`, `a_b_2`, ...) and InfluxQL answers by the key. Tags named
like the view's own columns or like the translator's aliases (`producer`, `t0`) and a field
named `time` read back too, and so do measurements whose names make the same identifier
(`cpu.load`, `cpu_load`, `cpu-load`).
"""

from __future__ import annotations

import json
import urllib.parse

import pytest

from helpers.server import Server

LINES = (
    "m,producer=alpha,t0=x ts=1,ts_=2,a.b=3,a_b=4,time=9 1700000000\n"
    "m a-b=5 1700000001\n"
    "m a_b=6,a.b=7,ts=8 1700000002\n"
    "cpu.load,host=a v=1 1700000000\n"
    "cpu_load,host=b v=2 1700000001\n"
    "cpu-load w=3i 1700000002\n"
    "events,host=c v=4 1700000003"
)


def influxql(server: Server, q: str) -> list:
    status, _, body = server.request("GET", "/query?db=names&q=" + urllib.parse.quote(q))
    assert status == 200, body
    result = json.loads(body)["results"][0]
    assert "error" not in result, result
    return result.get("series", [])


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    store = tmp_path_factory.mktemp("names") / "store"
    s = Server(store, "--quiet")
    assert s.write(LINES, bucket="names", precision="s")[0] == 204
    yield s
    s.stop()


def test_keys_made_the_same_identifier_keep_every_value(served):
    # (one column for `a.b` and `a_b` kept one of the two values of the first line, after a 204)
    rows = served.sql('SELECT "a_b", "a_b_2", "a_b_3", ts_, ts__2 FROM "names".m ORDER BY ts')
    assert rows == [[3.0, 4.0, None, 1.0, 2.0], [None, None, 5.0, None, None], [7.0, 6.0, None, 8.0, None]]


def test_influxql_names_fields_and_tags_by_their_keys(served):
    series = influxql(served, "SELECT * FROM m")
    # (the measurement's own tag keys: `host` is a key of other measurements of the bucket)
    assert series[0]["columns"] == ["time", "a-b", "a.b", "a_b", "producer", "t0", "ts", "ts_"]
    assert series[0]["values"][0][1:] == [None, 3.0, 4.0, "alpha", "x", 1.0, 2.0]
    keys = influxql(served, "SHOW FIELD KEYS FROM m")[0]["values"]
    assert [k for k, _ in keys] == ["a-b", "a.b", "a_b", "ts", "ts_"]
    got = influxql(served, 'SELECT sum(ts), max("a.b"), min(a_b), count("a-b") FROM m')
    assert got[0]["values"][0][1:] == [9.0, 7.0, 4.0, 1]


def test_group_by_a_tag_named_like_an_alias_or_producer(served):
    for tag in ("t0", "producer"):
        series = influxql(served, f"SELECT count(ts) FROM m GROUP BY {tag}")
        assert [(s["tags"][tag], s["values"][0][1]) for s in series] == [
            ("", 1),
            ("alpha" if tag == "producer" else "x", 1),
        ]
    series = influxql(served, "SELECT top(ts, 1) FROM m WHERE time >= 1700000000s GROUP BY time(10s), t0 fill(none)")
    assert [(s["tags"]["t0"], s["values"][0][1]) for s in series] == [("", 8.0), ("x", 1.0)]


def test_the_mapping_survives_a_restart(tmp_path):
    s = Server(tmp_path / "store", "--quiet")
    try:
        assert s.write(LINES, bucket="names", precision="s")[0] == 204
        assert s.stop() == 0
        s = Server(tmp_path / "store", "--quiet")
        # the same keys in another order: the same columns, no new ones
        assert s.write("m a.b=10,ts_=11,a_b=12,ts=13 1700000010", bucket="names", precision="s")[0] == 204
        assert s.write("cpu_load v=20 1700000010\ncpu.load v=21 1700000011", bucket="names", precision="s")[0] == 204
        assert s.sql('SELECT v FROM "names".cpu_load_2 ORDER BY ts') == [[2.0], [20.0]]
        assert s.sql('SELECT v FROM "names".cpu_load ORDER BY ts') == [[1.0], [21.0]]
        cols = [c[0] for c in s.sql('SELECT column_name FROM (DESCRIBE "names".m)')]
        assert cols == [
            "ts",
            "producer",
            "host",
            "producer_tag",
            "t0",
            "seq",
            "ts_",
            "ts__2",
            "a_b",
            "a_b_2",
            "time",
            "a_b_3",
        ]
        assert s.sql('SELECT "a_b", "a_b_2", ts_, ts__2 FROM "names".m WHERE ts = 1700000010000000000') == [
            [10.0, 12.0, 13.0, 11.0]
        ]
    finally:
        s.stop()


def test_measurements_made_the_same_identifier_keep_types_of_their_own(served):
    assert influxql(served, "SHOW MEASUREMENTS")[0]["values"] == [
        ["cpu-load"],
        ["cpu.load"],
        ["cpu_load"],
        ["events"],
        ["m"],
    ]
    # `events` is the name of a trace's view of every type: the measurement is the type `events_`
    assert influxql(served, "SELECT host, v FROM events")[0]["values"][0][1:] == ["c", 4.0]
    assert served.sql('SELECT v FROM "names".events_') == [[4.0]]
    for name, want in (("cpu.load", [["a", 1.0]]), ("cpu_load", [["b", 2.0]])):
        series = influxql(served, f'SELECT host, v FROM "{name}"')
        assert [(s["name"], [v[1:] for v in s["values"]]) for s in series] == [(name, want)]
    assert [s["name"] for s in influxql(served, "SELECT * FROM /^cpu/")] == ["cpu-load", "cpu.load", "cpu_load"]
    assert influxql(served, "SHOW SERIES FROM /cpu/")[0]["values"] == [
        ["cpu-load"],
        ["cpu.load,host=a"],
        ["cpu_load,host=b"],
    ]
    # SQL sees the event types: the first name to come keeps the plain identifier
    assert served.sql('SELECT v FROM "names".cpu_load') == [[1.0]]
    assert served.sql('SELECT v FROM "names".cpu_load_2') == [[2.0]]
    assert served.sql('SELECT w FROM "names".cpu_load_3') == [[3]]
