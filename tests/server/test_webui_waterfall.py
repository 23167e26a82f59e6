"""The Waterfall page's JSON API (`/api/ui/otel/search`, `/tree`, `/span`) over spans the
OpenTelemetry Python SDK posted to a real `tracehouse serve` (tests/formats/otlp/sdk_app.py):
every number checked against SQL over the `"<trace>".spans` view of the same store.
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from helpers.otel import shop_server


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    s, tids = shop_server(tmp_path_factory.mktemp("wf") / "store", 2)
    yield s, tids
    assert s.stop() == 0


def ui(server, path: str, **params) -> tuple[int, dict]:
    st, _h, body = server.request("GET", f"/api/ui/otel/{path}?" + urlencode({"trace": "shop", **params}, doseq=True))
    return st, json.loads(body)


def rows(server, sql: str) -> list[dict]:
    st, _h, body = server.request(
        "POST", "/api/query", json.dumps({"sql": sql}).encode(), {"Content-Type": "application/json"}
    )
    assert st == 200, body
    doc = json.loads(body)
    return [dict(zip(doc["columns"], r)) for r in doc["rows"]]


def sql_traces(server, where: str = "true") -> dict[str, dict]:
    got = rows(
        server,
        "SELECT trace_id, min(ts) AS start, max(end_ts) - min(ts) AS dur, count(*) AS spans, "
        "count(*) FILTER (error) AS errors, arg_min(name, ts) FILTER (root) AS root_name FROM shop.spans "
        f"WHERE trace_id IN (SELECT trace_id FROM shop.spans WHERE {where}) GROUP BY trace_id",
    )
    return {r["trace_id"]: r for r in got}


def test_search_gives_each_trace_with_its_counts_and_sorts(shop):
    server, tids = shop
    st, d = ui(server, "search")
    assert st == 200
    ref = sql_traces(server)
    assert d["matched"] == len(ref) == 4  # two runs: a checkout and an audit trace each
    assert {t["trace_id"] for t in d["traces"]} == set(ref) and set(tids) <= set(ref)
    for t in d["traces"]:
        r = ref[t["trace_id"]]
        assert (t["start"], t["dur"], t["spans"], t["errors"], t["root_name"]) == (
            r["start"],
            r["dur"],
            r["spans"],
            r["errors"],
            r["root_name"],
        )
        assert t["root_service"] == "shop" and t["services"] == ["shop"]
    assert [t["dur"] for t in d["traces"]] == sorted((r["dur"] for r in ref.values()), reverse=True)
    assert {t["trace_id"]: t["spans"] for t in d["traces"]}[
        tids[0]
    ] == 7  # checkout, 2 workers, 2 GET, 2 GET /inventory
    assert d["services"] == ["shop"]
    st, newest = ui(server, "search", sort="newest", limit=1)
    assert st == 200 and newest["matched"] == 4 and len(newest["traces"]) == 1
    assert newest["traces"][0]["start"] == max(r["start"] for r in ref.values())
    # rel=1: times from the store trace's first event
    first = rows(server, "SELECT min(ts) AS t FROM shop.events")[0]["t"]
    st, rel = ui(server, "search", sort="newest", limit=1, rel=1)
    assert rel["traces"][0]["start"] == newest["traces"][0]["start"] - first


@pytest.mark.parametrize(
    ("params", "where"),
    [
        ({"name": "GET /inventory"}, "name = 'GET /inventory'"),
        ({"name": "worker-%", "service": "shop"}, "name LIKE 'worker-%' AND service = 'shop'"),
        ({"errors_only": 1}, "error"),
        ({"attr": "http.response.status_code=500"}, "http_status_code = 500"),
        ({"attr": "items=20"}, "json_extract_string(attributes, '$.\"items\"') = '20'"),
        (
            {"attr": ["http.request.method=GET", "http.response.status_code=500"]},
            "http_method = 'GET' AND http_status_code = 500",
        ),
        ({"name": "audit", "errors_only": 1}, "false"),
        ({"service": "nope"}, "false"),
    ],
)
def test_search_filters_equal_sql(shop, params, where):
    server, _ = shop
    st, d = ui(server, "search", **params)
    assert st == 200, d
    assert sorted(t["trace_id"] for t in d["traces"]) == sorted(sql_traces(server, where))


def test_search_by_span_duration_equals_sql(shop):
    server, _ = shop
    durs = sorted(r["dur"] for r in rows(server, "SELECT dur FROM shop.spans"))
    lo, hi = durs[len(durs) // 3], durs[2 * len(durs) // 3]
    st, d = ui(server, "search", min_dur=lo, max_dur=hi)
    assert st == 200
    assert sorted(t["trace_id"] for t in d["traces"]) == sorted(sql_traces(server, f"dur >= {lo} AND dur <= {hi}"))
    st, d = ui(server, "search", min_dur=f"{durs[-1] / 1e6 + 1}ms")  # units: longer than every span
    assert st == 200 and d["matched"] == 0 and d["traces"] == []


def spans_of(server, tid: str) -> dict[str, dict]:
    got = rows(server, f"SELECT span_id, parent_span_id, name, ts, dur, error FROM shop.spans WHERE trace_id = '{tid}'")
    return {r["span_id"]: r for r in got}


def test_tree_rows_are_depth_first_with_parents_offsets_and_children(shop):
    server, tids = shop
    spans = spans_of(server, tids[0])
    st, d = ui(server, "tree", trace_id=tids[0].upper())
    assert st == 200 and d["total"] == d["rows"] == len(spans) == 7
    c = d["columns"]
    start = min(s["ts"] for s in spans.values())
    assert d["start"] == start and d["duration"] == max(s["ts"] + s["dur"] for s in spans.values()) - start
    stack: list[str] = []
    for i, sid in enumerate(c["span_id"]):
        s = spans[sid]
        depth = c["depth"][i]
        stack = stack[:depth]
        # depth-first: the row's parent is the last row shown one level up
        assert (stack[-1] if stack else None) == s["parent_span_id"]
        stack.append(sid)
        assert c["offset"][i] == s["ts"] - start and c["dur"][i] == s["dur"] and c["error"][i] == s["error"]
        assert c["children"][i] == sum(1 for x in spans.values() if x["parent_span_id"] == sid)
        assert c["name"][i] == s["name"]
    assert [c["name"][i] for i in range(7) if c["depth"][i] == 0] == ["checkout"]
    assert sorted(c["name"][i] for i in range(7) if c["depth"][i] == 3) == ["GET /inventory", "GET /inventory"]


def test_collapsing_a_span_leaves_its_subtree_out_and_rows_page(shop):
    server, tids = shop
    spans = spans_of(server, tids[0])
    w1 = next(s for s in spans.values() if s["name"] == "worker-1")
    st, d = ui(server, "tree", trace_id=tids[0], collapsed=w1["span_id"])
    assert st == 200 and d["total"] == 7 - 4  # worker-1's two GETs and their two server spans
    assert w1["span_id"] in d["columns"]["span_id"] and "GET /inventory" not in d["columns"]["name"]
    _, whole = ui(server, "tree", trace_id=tids[0])
    st, page = ui(server, "tree", trace_id=tids[0], offset=2, limit=3)
    assert st == 200 and page["total"] == 7 and page["rows"] == 3 and page["offset"] == 2
    assert page["columns"]["span_id"] == whole["columns"]["span_id"][2:5]


def test_span_details_have_attributes_events_links_self_time_and_resource(shop):
    server, tids = shop
    spans = spans_of(server, tids[0])
    fail = next(
        r["span_id"]
        for r in rows(
            server, f"SELECT span_id FROM shop.spans WHERE trace_id = '{tids[0]}' AND name = 'GET /inventory' AND error"
        )
    )
    st, d = ui(server, "span", trace_id=tids[0], span_id=fail)
    assert st == 200, d
    assert d["span"]["status"] == "error" and d["span"]["status_message"] == "inventory down"
    assert d["span"]["kind"] == "server" and d["span"]["service"] == "shop"
    assert d["typed"]["http_method"] == "GET" and d["typed"]["http_status_code"] == 500
    assert [e["name"] for e in d["events"]] == ["exception"]
    assert d["events"][0]["attributes"]["exception.message"] == "inventory down"
    assert d["span"]["self_ns"] == d["span"]["dur"] and d["children_total"] == 0
    chain = [(p["kind"], p["name"]) for p in d["producers"]]
    assert [k for k, _ in chain] == ["thread", "process", "host", "service"] and chain[-1][1] == "shop"
    assert chain[0][1].startswith("Thread-") and chain[2][1] == "testbox"  # http.server's request thread
    assert any(p["attrs"].get("deployment.environment") == "ci" for p in d["producers"])
    # The root: its children, its self time (duration less the union of its children), linked from audit.
    root = next(s for s in spans.values() if s["parent_span_id"] is None)
    st, d = ui(server, "span", trace_id=tids[0], span_id=root["span_id"])
    kids = sorted(
        (max(s["ts"], root["ts"]), min(s["ts"] + s["dur"], root["ts"] + root["dur"]))
        for s in spans.values()
        if s["parent_span_id"] == root["span_id"]
    )
    covered, reach = 0, None
    for a, b in kids:
        lo = a if reach is None else max(a, reach)
        covered += max(0, b - lo)
        reach = b if reach is None else max(reach, b)
    assert d["span"]["self_ns"] == root["dur"] - covered and d["span"]["children"] == 2
    assert sorted(k["name"] for k in d["children"]) == ["worker-1", "worker-2"] and d["children_total"] == 2
    audit = rows(server, f"SELECT trace_id, span_id FROM shop.span_link WHERE linked_trace_id = '{tids[0]}'")
    assert [(lk["direction"], lk["other_trace_id"], lk["other_span_id"]) for lk in d["links"]] == [
        ("from", audit[0]["trace_id"], audit[0]["span_id"])
    ]
    st, a = ui(server, "span", trace_id=audit[0]["trace_id"], span_id=audit[0]["span_id"])
    assert [(lk["direction"], lk["other_span_id"], lk["attributes"]) for lk in a["links"]] == [
        ("to", root["span_id"], {"why": "after"})
    ]


def test_bad_requests_say_what_was_expected(shop):
    server, tids = shop
    st, d = ui(server, "tree", trace_id="not-hex")
    assert st == 400 and "hex" in d["error"]
    st, d = ui(server, "span", trace_id=tids[0], span_id="00000000000000ff")
    assert st == 404 and "no span" in d["error"]
    st, d = ui(server, "search", sort="oldest")
    assert st == 400 and "slowest" in d["error"]
    st, d = ui(server, "search", attr="no-equals-sign")
    assert st == 400 and "KEY=VALUE" in d["error"]
    st, _h, body = server.request("GET", "/api/ui/otel/search?trace=nope")
    assert st == 404
