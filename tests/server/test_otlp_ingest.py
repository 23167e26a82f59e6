"""OTLP/HTTP ingest on `tracehouse serve` (`/v1/traces`, `/v1/logs`, `/v1/metrics`), driven by clients nobody
here wrote: the OpenTelemetry Python SDK's OTLP/HTTP exporters in a subprocess
(tests/formats/otlp/sdk_app.py), and raw requests built with the `opentelemetry-proto`
messages for the spec's status codes and partial success.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from helpers.otel import run_sdk_app
from helpers.server import Server

PB = {"Content-Type": "application/x-protobuf"}
TOKEN = "s3cret-otlp"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("otlp") / "store", "--max-body", "256k", "--token", TOKEN)
    yield s
    assert s.stop() == 0


def auth(h: dict | None = None) -> dict:
    return {"Authorization": f"Token {TOKEN}", **(h or {})}


def run_app(server, trace: str, compression: str = "none") -> dict:
    return run_sdk_app(server, trace, compression, TOKEN)


def span(tid: bytes, sid: bytes, name: str, start: int, end: int, **attrs) -> Span:
    return Span(
        trace_id=tid,
        span_id=sid,
        name=name,
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        attributes=[KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in attrs.items()],
    )


def request(*spans: Span) -> bytes:
    return ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]
    ).SerializeToString()


def test_sdk_spans_across_threads_and_an_http_call_land_as_rows(server):
    got = run_app(server, "shop1", "gzip")
    tid = got["trace_id"]
    rows = server.sql(
        "SELECT name, kind, status, parent_span_id IS NULL AS root, http_method, http_status_code, url_full, "
        "server_address, scope, service FROM shop1.span ORDER BY ts",
        auth(),
    )
    names = [r[0] for r in rows]
    assert sorted(names) == sorted(
        ["checkout", "worker-1", "worker-2", "GET", "GET /inventory", "GET", "GET /inventory", "audit"]
    )
    assert all(r[9] == "shop" and r[8] == "shop.checkout" for r in rows)
    by_name = {}
    for r in rows:
        by_name.setdefault(r[0], []).append(r)
    assert by_name["checkout"][0][1:4] == ["server", "unset", True]
    clients = by_name["GET"]
    assert [c[1] for c in clients] == ["client", "client"]
    assert sorted(c[5] for c in clients) == [200, 500] and all(c[4] == "GET" and c[7] == "127.0.0.1" for c in clients)
    assert all(c[6].endswith(("/inventory", "/fail")) for c in clients)
    assert sorted(s[2] for s in by_name["GET /inventory"]) == ["error", "unset"]
    # Parent links: every span but the two roots (checkout, audit) has its parent among the rows,
    # the server spans under the client spans (W3C traceparent across the HTTP call).
    links = server.sql(
        "SELECT c.name, p.name FROM shop1.span c JOIN shop1.span p ON p.span_id = c.parent_span_id "
        f"AND p.trace_id = c.trace_id WHERE c.trace_id = '{tid}' ORDER BY c.ts",
        auth(),
    )
    assert sorted(map(tuple, links)) == sorted(
        [
            ("worker-1", "checkout"),
            ("worker-2", "checkout"),
            ("GET", "worker-1"),
            ("GET", "worker-1"),
            ("GET /inventory", "GET"),
            ("GET /inventory", "GET"),
        ]
    )
    # Producers: service -> host -> process -> the threads that made spans.
    prods = server.sql(
        "SELECT p.kind, p.name, q.kind FROM th.producers p LEFT JOIN th.producers q "
        "ON q.trace = p.trace AND q.id = p.parent WHERE p.trace = 'shop1' ORDER BY p.id",
        auth(),
    )
    kinds = [(k, parent) for k, _n, parent in prods]
    assert kinds[:3] == [("service", None), ("host", "service"), ("process", "host")]
    threads = [n for k, n, _p in prods if k == "thread"]
    assert any(n.startswith("MainThread [") for n in threads) and any(n.startswith("worker-1 [") for n in threads)
    # A worker's span is on its own thread's producer, not the main thread's.
    on = server.sql(
        "SELECT s.name, p.name FROM shop1.span s JOIN th.producers p ON p.trace = 'shop1' AND p.id = s.producer "
        "WHERE s.name LIKE 'worker-%' ORDER BY s.name",
        auth(),
    )
    assert [n.split(" [")[0] for _s, n in on] == ["worker-1", "worker-2"]
    # Attributes not promoted stay in the JSON column; events and links are rows.
    attrs = server.sql("SELECT attributes FROM shop1.span WHERE name = 'checkout'", auth())[0][0]
    assert json.loads(attrs) == {"order.id": "A-17"}
    ev = server.sql("SELECT e.name, e.attributes FROM shop1.span_event e ORDER BY e.name", auth())
    assert [e[0] for e in ev] == ["exception", "picked", "picked"]
    assert "inventory down" in ev[0][1]
    ln = server.sql("SELECT linked_trace_id, attributes FROM shop1.span_link", auth())
    assert ln == [[tid, '{"why":"after"}']]
    # Logs: severity, body, the span it was logged in.
    lg = server.sql(
        "SELECT severity, severity_text, body, trace_id IS NOT NULL, service FROM shop1.log ORDER BY ts", auth()
    )
    assert lg == [
        [9, "INFO", "checkout started", True, "shop"],
        [13, "WARN", "inventory failed for worker 1", True, "shop"],
    ]


def test_sdk_metrics_are_counter_and_histogram_rows(server):
    run_app(server, "shop3")
    m = server.sql(
        "SELECT name, value, metric_type, monotonic, temporality, unit, attributes FROM shop3.metric ORDER BY name",
        auth(),
    )
    assert m == [
        ["cpu.temp", 41.5, "gauge", None, None, "Cel", '{"core":0}'],
        ["orders", 5.0, "sum", True, "cumulative", "1", '{"region":"eu"}'],
        ["queue.depth", 3.0, "sum", False, "cumulative", None, None],
    ]
    h = server.sql("SELECT name, metric_type, count, sum, min, max, buckets FROM shop3.histogram ORDER BY name", auth())
    assert [r[:6] for r in h] == [
        ["checkout.latency", "histogram", 3, 97.0, 5.0, 80.0],
        ["payload.size", "exponential_histogram", 3, 4200.0, 100.0, 2100.0],
    ]
    buckets = json.loads(h[0][6])  # [[upper bound, count], ...], the last bound null (+inf)
    assert sum(c for _b, c in buckets) == 3 and buckets[-1][0] is None
    exp = json.loads(h[1][6])
    assert exp["zero_count"] == 0 and sum(exp["positive"]["counts"]) == 3
    # a summary (the Python SDK makes none): OTLP JSON posted by hand
    doc = {
        "resourceMetrics": [
            {
                "scopeMetrics": [
                    {
                        "metrics": [
                            {
                                "name": "rpc.latency",
                                "summary": {
                                    "dataPoints": [
                                        {
                                            "timeUnixNano": "9",
                                            "count": "4",
                                            "sum": 10.5,
                                            "quantileValues": [
                                                {"quantile": 0.5, "value": 2.0},
                                                {"quantile": 1, "value": 4.5},
                                            ],
                                        }
                                    ]
                                },
                            },
                            {"name": "broken"},
                        ]
                    }
                ]
            }
        ]
    }
    status, _h, body = server.request(
        "POST", "/v1/metrics?trace=shop3", json.dumps(doc).encode(), auth({"Content-Type": "application/json"})
    )
    assert status == 200
    assert json.loads(body)["partialSuccess"]["rejectedDataPoints"] == "1"
    assert server.sql("SELECT count, sum, quantiles FROM shop3.histogram WHERE metric_type = 'summary'", auth()) == [
        [4, 10.5, "[[0.5,2.0],[1.0,4.5]]"]
    ]


def test_a_second_run_reuses_the_service_and_host_producers(server):
    run_app(server, "shop2")
    run_app(server, "shop2")
    prods = server.sql(
        "SELECT kind, count(*) FROM th.producers WHERE trace = 'shop2' GROUP BY kind ORDER BY kind", auth()
    )
    counts = dict(map(tuple, prods))
    assert counts["service"] == 1 and counts["host"] == 1 and counts["process"] == 2  # two processes, two pids
    assert server.sql("SELECT count(*) FROM shop2.span", auth()) == [[16]]
    # rows numbered per producer without a gap or a repeat, the first request's (the trace's creation) too
    assert server.sql(
        "SELECT count(*) = count(DISTINCT (producer, seq)) AND bool_and(n = seq + 1) FROM (SELECT producer, seq, "
        "row_number() OVER (PARTITION BY producer ORDER BY seq) AS n FROM shop2.events)",
        auth(),
    ) == [[True]]


def test_partial_success_names_the_refused_spans_and_stores_the_rest(server):
    good = span(b"\x01" * 16, b"\x02" * 8, "ok", 10, 20, **{"db.system": "sqlite", "db.statement": "SELECT 1"})
    bad_id = span(b"\x01" * 4, b"\x03" * 8, "short trace id", 10, 20)
    backwards = span(b"\x01" * 16, b"\x04" * 8, "backwards", 30, 20)
    status, h, body = server.request("POST", "/v1/traces?trace=partial", request(good, bad_id, backwards), auth(PB))
    assert status == 200 and h["content-type"] == "application/x-protobuf"
    r = ExportTraceServiceResponse.FromString(body)
    assert r.partial_success.rejected_spans == 2
    assert "spans[1]: traceId of 4 bytes (expected 16)" in r.partial_success.error_message
    assert server.sql("SELECT name, db_system, db_statement, dur FROM partial.span", auth()) == [
        ["ok", "sqlite", "SELECT 1", 10]
    ]


def test_json_encoding_hex_ids_and_string_int64(server):
    doc = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "js"}}]},
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "5b8efff798038103d269b633813fc60c",
                                "spanId": "eee19b7ec3c1b174",
                                "parentSpanId": "eee19b7ec3c1b173",
                                "name": "query",
                                "kind": 3,
                                "startTimeUnixNano": "1544712660000000000",
                                "endTimeUnixNano": "1544712661000000000",
                                "attributes": [
                                    {"key": "rpc.system", "value": {"stringValue": "grpc"}},
                                    {"key": "http.status_code", "value": {"intValue": "404"}},
                                ],
                                "status": {"code": 1},
                            }
                        ]
                    }
                ],
            }
        ]
    }
    h = auth({"Content-Type": "application/json"})
    status, hh, body = server.request("POST", "/v1/traces?trace=jsonw", json.dumps(doc).encode(), h)
    assert (status, hh["content-type"], json.loads(body)) == (200, "application/json", {})
    assert server.sql(
        "SELECT ts, dur, trace_id, parent_span_id, kind, status, rpc_system, http_status_code, service FROM jsonw.span",
        auth(),
    ) == [
        [
            1544712660000000000,
            10**9,
            "5b8efff798038103d269b633813fc60c",
            "eee19b7ec3c1b173",
            "client",
            "ok",
            "grpc",
            404,
            "js",
        ]
    ]
    # the same document gzipped
    status, _h, _b = server.request(
        "POST", "/v1/traces?trace=jsonw", gzip.compress(json.dumps(doc).encode()), {**h, "Content-Encoding": "gzip"}
    )
    assert status == 200
    assert server.sql("SELECT count(*) FROM jsonw.span", auth()) == [[2]]


EXAMPLES = Path(__file__).parents[1] / "data" / "otlp-examples"


def test_the_specifications_json_examples_land_as_their_rows(server):
    """opentelemetry-proto's own example requests (tests/data/otlp-examples): a server span, a
    sum and a gauge, an explicit and an exponential histogram, a log record with every value
    kind, and an event (a log record with an event name and a kvlist body)."""
    h = auth({"Content-Type": "application/json"})
    for name, path in (("trace", "traces"), ("metrics", "metrics"), ("logs", "logs"), ("events", "logs")):
        status, _h, body = server.request("POST", f"/v1/{path}?trace=spec", (EXAMPLES / f"{name}.json").read_bytes(), h)
        assert (status, json.loads(body)) == (200, {}), name
    t0 = 1544712660000000000
    assert server.sql(
        f"SELECT ts - {t0}, dur, span_id, parent_span_id, name, kind, service, scope, attributes FROM spec.span",
        auth(),
    ) == [
        [
            0,
            10**9,
            "eee19b7ec3c1b174",
            "eee19b7ec3c1b173",
            "I'm a server span",
            "server",
            "my.service",
            "my.library",
            '{"my.span.attr":"some value"}',
        ]
    ]
    assert server.sql(
        "SELECT name, value, metric_type, monotonic, temporality FROM spec.metric ORDER BY name", auth()
    ) == [["my.counter", 5.0, "sum", True, "delta"], ["my.gauge", 10.0, "gauge", None, None]]
    hist = server.sql(
        "SELECT name, metric_type, count, sum, min, max, buckets FROM spec.histogram ORDER BY name", auth()
    )
    assert hist[0][:6] == ["my.exponential.histogram", "exponential_histogram", 3, 10.0, 0.0, 5.0]
    assert json.loads(hist[0][6]) == {
        "scale": 0,
        "zero_count": 1,
        "positive": {"offset": 1, "counts": [0, 2]},
        "negative": {"offset": 0, "counts": []},
    }
    # one bucket up to the bound 1.0 and the overflow bucket, one point each
    assert hist[1][:6] == ["my.histogram", "histogram", 2, 2.0, 0.0, 2.0] and json.loads(hist[1][6]) == [
        [1.0, 1],
        [None, 1],
    ]
    logs = server.sql(
        "SELECT severity, severity_text, body, span_id, event_name, attributes FROM spec.log ORDER BY seq", auth()
    )
    assert logs[0][:4] == [10, "Information", "Example log record", "eee19b7ec3c1b174"]
    assert json.loads(logs[0][5]) == {
        "string.attribute": "some string",
        "boolean.attribute": True,
        "int.attribute": 10,
        "double.attribute": 637.704,
        "array.attribute": ["many", "values"],
        "map.attribute": {"some.map.key": "some value"},
    }
    assert logs[1][1] == "test severity text" and logs[1][4] == "browser.page_view"
    assert json.loads(logs[1][2])["title"] == "Free Online GUID Generator"


def test_errors_are_the_spec_status_codes_with_a_status_body(server):
    # undecodable protobuf: 400 with a google.rpc.Status naming what was expected
    status, _h, body = server.request("POST", "/v1/traces?trace=errs", b"\xff\xff\xff\xff", auth(PB))
    assert status == 400 and b"not an OTLP protobuf ExportTraceServiceRequest" in body
    status, _h, body = server.request(
        "POST", "/v1/traces?trace=errs", b'{"resourceSpans": [', auth({"Content-Type": "application/json"})
    )
    assert status == 400
    doc = json.loads(body)
    assert doc["code"] == 3 and "expected a value" in doc["message"]
    # another content type: 415
    status, _h, _b = server.request("POST", "/v1/traces", b"x", auth({"Content-Type": "text/plain"}))
    assert status == 415
    # another content encoding: 415
    status, _h, _b = server.request("POST", "/v1/traces", b"x", auth({**PB, "Content-Encoding": "br"}))
    assert status == 415
    # bigger than --max-body (after gunzip too): 413
    big = gzip.compress(b"\x00" * (300 << 10))
    status, _h, _b = server.request("POST", "/v1/traces", big, auth({**PB, "Content-Encoding": "gzip"}))
    assert status == 413
    # no token: 401 from the front end, before the body is read
    status, _h, _b = server.request("POST", "/v1/traces", request(), PB)
    assert status == 401
    # a trace of another format
    assert server.write("m v=1 1\n", bucket="lp1", headers=auth())[0] == 204
    status, _h, body = server.request("POST", "/v1/traces?trace=lp1", request(), auth(PB))
    assert status == 400 and b"lineproto trace" in body
    # GET is not an export
    status, _h, _b = server.request("GET", "/v1/traces", None, auth())
    assert status == 405
    assert server.sql("SELECT count(*) FROM th.traces WHERE name = 'errs'", auth()) == [[0]]


def test_logs_json_partial_success(server):
    doc = {
        "resourceLogs": [
            {
                "scopeLogs": [
                    {
                        "logRecords": [
                            {"timeUnixNano": "5", "severityNumber": 17, "body": {"kvlistValue": {"values": []}}},
                            {"severityText": "INFO", "body": {"stringValue": "no time"}},
                        ]
                    }
                ]
            }
        ]
    }
    status, _h, body = server.request(
        "POST", "/v1/logs?trace=logs1", json.dumps(doc).encode(), auth({"Content-Type": "application/json"})
    )
    assert status == 200
    ps = json.loads(body)["partialSuccess"]
    assert ps["rejectedLogRecords"] == "1" and "logRecords[1]: neither timeUnixNano" in ps["errorMessage"]
    assert server.sql("SELECT ts, severity, body, service FROM logs1.log", auth()) == [[5, 17, "{}", "unknown_service"]]
    status, _h, body = server.request("POST", "/v1/logs?trace=logs1", b"", auth(PB))
    assert status == 200 and ExportLogsServiceResponse.FromString(body).partial_success.rejected_log_records == 0


# -- kill -9 under load ---------------------------------------------------------------------------

SPANS_PER_REQUEST = 200


def otlp_writer(port: int, w: int, acked: list, stop) -> None:
    """Posts protobuf requests of SPANS_PER_REQUEST spans whose span ids are (writer, n); records
    the ranges answered 200 (durable)."""
    import http.client

    n = 0
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        while not stop.is_set() and n < 1_000_000:
            spans = [
                span(b"\x07" * 16, (w << 32 | i).to_bytes(8, "big"), "op", 1_000 + i, 2_000 + i)
                for i in range(n, n + SPANS_PER_REQUEST)
            ]
            c.request("POST", "/v1/traces?trace=crash", request(*spans), PB)
            r = c.getresponse()
            body = r.read()
            if r.status == 200 and not ExportTraceServiceResponse.FromString(body).HasField("partial_success"):
                acked.append((w, n, n + SPANS_PER_REQUEST))
            n += SPANS_PER_REQUEST
    except (OSError, http.client.HTTPException):
        pass  # the server died: what was not acknowledged may be lost


def test_sigkill_under_load_loses_no_acknowledged_span_and_doubles_none(tmp_path):
    import threading
    import time

    store = tmp_path / "store"
    s = Server(store, "--quiet")
    stop = threading.Event()
    acked: list = []
    threads = [threading.Thread(target=otlp_writer, args=(s.port, w, acked, stop)) for w in range(1, 4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while len(acked) < 15 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    s.kill()  # SIGKILL, writers still sending
    stop.set()
    for t in threads:
        t.join(30)
    assert acked, "the writers got no acknowledgement before the kill"
    s = Server(store, "--quiet")
    try:
        rows = s.sql("SELECT span_id, count(*) FROM crash.span GROUP BY span_id HAVING count(*) > 1 LIMIT 5")
        assert rows == [], f"spans stored twice: {rows}"
        have = {r[0] for r in s.sql("SELECT span_id FROM crash.span")}
    finally:
        s.stop()
    want = {f"{w << 32 | i:016x}" for w, a, b in acked for i in range(a, b)}
    missing = want - have
    assert not missing, f"{len(missing)} acknowledged spans lost, e.g. {sorted(missing)[:5]}"
