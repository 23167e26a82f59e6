"""Grafana's InfluxDB data source (InfluxQL mode) against `tracehouse serve`.

Grafana cannot run here (it is not in Debian's archive, and its Go module is AGPL, which this
project does not take in), so these are the requests it sends, recorded from its source
(github.com/grafana/grafana: pkg/tsdb/influxdb/influxdb.go createRequest, healthcheck.go,
models/query.go Build and its tests, and the query editor's metadata queries in
public/app/plugins/datasource/influxdb): GET /query with `db`, `epoch=ms` and `q` (or POST with
`q` in a form body), the health check `SHOW measurements`, the editor's SHOW statements, and the
panel queries its builder writes (`$timeFilter` as `time >= <from>ms and time <= <to>ms`,
`$__interval` as the panel's interval, tags double-quoted, `fill(null)`). Each answer is checked
the way Grafana reads it: series name, tags, columns, and [epoch ms, value] rows."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from helpers.server import Server

T0 = 1_596_240_000  # 2020-08-01T00:00:00Z, Grafana's own tests' range start
FROM_MS, TO_MS = T0 * 1000, (T0 + 300) * 1000  # a 5-minute panel


@pytest.fixture(scope="module")
def grafana(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("grafana") / "store", "--quiet")
    lines = [
        f"cpu,hostname=server{h},datacenter=dc{h % 2} value={h * 100 + i},usage_user={i % 7}i {T0 + 10 * i}"
        for h in (1, 2, 3)
        for i in range(30)
    ]
    assert s.write("\n".join(lines), bucket="telegraf", precision="s")[0] == 204
    yield s
    assert s.stop() == 0


def grafana_get(server: Server, q: str) -> dict:
    """As createRequest sends it in GET mode: db, epoch=ms, q in the URL."""
    status, _h, body = server.request("GET", "/query?" + urlencode({"db": "telegraf", "epoch": "ms", "q": q}))
    assert status == 200, body
    return json.loads(body)


def grafana_post(server: Server, q: str) -> dict:
    """POST mode: db and epoch in the URL, q in an x-www-form-urlencoded body."""
    status, _h, body = server.request(
        "POST",
        "/query?" + urlencode({"db": "telegraf", "epoch": "ms"}),
        urlencode({"q": q}).encode(),
        {"Content-type": "application/x-www-form-urlencoded"},
    )
    assert status == 200, body
    return json.loads(body)


def test_health_check_and_query_editor_metadata(grafana):
    assert grafana_get(grafana, "SHOW measurements")["results"][0]["series"][0]["values"] == [["cpu"]]
    assert grafana_get(grafana, "SHOW MEASUREMENTS LIMIT 100")["results"][0]["series"][0]["values"] == [["cpu"]]
    r = grafana_get(grafana, "SHOW MEASUREMENTS WITH MEASUREMENT =~ /(?i)CP/ LIMIT 100")
    assert r["results"][0]["series"][0]["values"] == [["cpu"]]
    r = grafana_get(grafana, 'SHOW FIELD KEYS FROM "cpu"')
    assert r["results"][0]["series"][0]["values"] == [["usage_user", "integer"], ["value", "float"]]
    r = grafana_get(grafana, 'SHOW TAG KEYS FROM "cpu"')
    assert r["results"][0]["series"][0]["values"] == [["datacenter"], ["hostname"]]
    r = grafana_get(grafana, 'SHOW TAG VALUES FROM "cpu" WITH KEY = "hostname"')
    assert r["results"][0]["series"][0]["values"] == [["hostname", f"server{h}"] for h in (1, 2, 3)]
    r = grafana_get(grafana, 'SHOW RETENTION POLICIES on "telegraf"')
    assert r["results"][0]["series"][0]["values"][0][0] == "autogen"


def test_the_default_panel_query_draws_a_line(grafana):
    # Grafana's builder: SELECT mean("value") FROM "measurement" WHERE $timeFilter GROUP BY time($__interval) fill(null)
    q = f'SELECT mean("value") FROM "cpu" WHERE time >= {FROM_MS}ms and time <= {TO_MS}ms GROUP BY time(1m) fill(null)'
    for answer in (grafana_get(grafana, q), grafana_post(grafana, q)):
        (series,) = answer["results"][0]["series"]
        assert series["name"] == "cpu" and series["columns"] == ["time", "mean"] and "tags" not in series
        # one-minute windows from 00:00 to 00:05 inclusive; points every 10 s for 300 s: 6 per host per minute
        want = [[(T0 + 60 * k) * 1000, 200 + 6 * k + 2.5] for k in range(5)] + [[(T0 + 300) * 1000, None]]
        assert series["values"] == want


def test_tags_grouping_math_and_limits_as_the_builder_writes_them(grafana):
    tf = f"time >= {FROM_MS}ms and time <= {TO_MS}ms"
    q = (
        f'SELECT mean("value") FROM "autogen"."cpu" WHERE ("hostname" = \'server1\' OR "hostname" = \'server2\') '
        f'AND {tf} GROUP BY time(1m), "datacenter" fill(null)'
    )
    series = grafana_get(grafana, q)["results"][0]["series"]
    assert [s["tags"] for s in series] == [{"datacenter": "dc0"}, {"datacenter": "dc1"}]
    assert series[0]["values"][0] == [T0 * 1000, 202.5] and series[1]["values"][0] == [T0 * 1000, 102.5]
    q = f'SELECT mean("value") / 100 FROM "cpu" WHERE {tf}'
    assert grafana_get(grafana, q)["results"][0]["series"][0]["values"] == [
        [T0 * 1000, (sum(range(30)) / 30 + 200) / 100]
    ]
    q = f'SELECT mean("value") FROM "cpu" WHERE {tf} GROUP BY time(5s) ORDER BY time ASC limit 1 slimit 1'
    assert grafana_get(grafana, q)["results"][0]["series"][0]["values"] == [[T0 * 1000, 200.0]]
    q = f'SELECT max("usage_user") FROM "cpu" WHERE ("hostname" =~ /^server[12]$/) AND {tf} GROUP BY "hostname"'
    series = grafana_get(grafana, q)["results"][0]["series"]
    assert [(s["tags"]["hostname"], s["values"][0][1]) for s in series] == [("server1", 6), ("server2", 6)]
    # raw mode with a time zone: 5 s windows are the same in Paris (epoch=ms: the same numbers);
    # a zone that does not exist is InfluxDB's parse error
    q = f'SELECT mean("value") FROM "cpu" WHERE {tf} GROUP BY time(5s)'
    paris = grafana_get(grafana, q + " tz('Europe/Paris')")["results"][0]["series"]
    assert paris == grafana_get(grafana, q)["results"][0]["series"] and len(paris[0]["values"]) > 10
    status, _h, body = grafana.request("GET", "/query?" + urlencode({"db": "telegraf", "q": q + " tz('Mars/Olympus')"}))
    assert status == 400 and json.loads(body)["error"] == "error parsing query: unable to find time zone Mars/Olympus"
