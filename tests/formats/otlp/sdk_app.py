"""A small instrumented program, run as a subprocess by the OTLP tests: the OpenTelemetry Python
SDK exports its spans and logs with `opentelemetry-exporter-otlp-proto-http` to a running
`tracehouse serve`.

`python sdk_app.py PORT TRACE [gzip|none] [TOKEN]`: a root span `checkout`; two worker threads,
each with a child span carrying its `thread.id`/`thread.name`; one worker calls a local
http.server over `http.client`, with a CLIENT span around the call and the W3C `traceparent`
header injected, and the server answers under a SERVER span continuing that trace (the
`/fail` path answers 500 and records an exception); a span linked to the root; log records
through the SDK's logging handler, one inside a span; a counter, an up-down counter, a
histogram, an exponential histogram (a View) and an observable gauge, exported once at the end. Prints one JSON line: the root's trace
id and what was made.
"""

from __future__ import annotations

import http.client
import http.server
import json
import logging
import sys
import threading

from opentelemetry import context, propagate, trace
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.metrics import Observation
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import ExponentialBucketHistogramAggregation, View
from opentelemetry.sdk.resources import ProcessResourceDetector, Resource, get_aggregated_resources
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode

port, trace_name = int(sys.argv[1]), sys.argv[2]
compression = Compression.Gzip if len(sys.argv) > 3 and sys.argv[3] == "gzip" else Compression.NoCompression
headers = {"X-Tracehouse-Trace": trace_name}
if len(sys.argv) > 4:
    headers["Authorization"] = f"Token {sys.argv[4]}"
base = f"http://127.0.0.1:{port}"

# The SDK's own process detector adds process.pid, process.executable.name, process.command ...
resource = get_aggregated_resources(
    [ProcessResourceDetector()],
    Resource.create({"service.name": "shop", "host.name": "testbox", "deployment.environment": "ci"}),
)
provider = TracerProvider(resource=resource)
provider.add_span_processor(
    BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{base}/v1/traces", headers=headers, compression=compression))
)
tracer = provider.get_tracer("shop.checkout", "1.0")
logs = LoggerProvider(resource=resource)
logs.add_log_record_processor(
    BatchLogRecordProcessor(OTLPLogExporter(endpoint=f"{base}/v1/logs", headers=headers, compression=compression))
)
reader = PeriodicExportingMetricReader(
    OTLPMetricExporter(endpoint=f"{base}/v1/metrics", headers=headers, compression=compression),
    export_interval_millis=3_600_000,  # exported once, by the flush at the end
)
meters = MeterProvider(
    resource=resource,
    metric_readers=[reader],
    views=[View(instrument_name="payload.size", aggregation=ExponentialBucketHistogramAggregation())],
)
meter = meters.get_meter("shop.metrics")
orders = meter.create_counter("orders", unit="1")
queue = meter.create_up_down_counter("queue.depth")
latency = meter.create_histogram("checkout.latency", unit="ms")
payload = meter.create_histogram("payload.size", unit="By")
meter.create_observable_gauge("cpu.temp", callbacks=[lambda _o: [Observation(41.5, {"core": 0})]], unit="Cel")
log = logging.getLogger("shop")
log.setLevel(logging.INFO)
log.addHandler(LoggingHandler(level=logging.INFO, logger_provider=logs))


def tag(span) -> None:
    span.set_attribute("thread.id", threading.get_native_id())
    span.set_attribute("thread.name", threading.current_thread().name)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        ctx = propagate.extract(dict(self.headers))
        with tracer.start_as_current_span("GET /inventory", context=ctx, kind=SpanKind.SERVER) as span:
            tag(span)
            span.set_attribute("http.request.method", "GET")
            code = 500 if self.path == "/fail" else 200
            span.set_attribute("http.response.status_code", code)
            if code == 500:
                try:
                    raise RuntimeError("inventory down")
                except RuntimeError as e:
                    span.record_exception(e)
                    span.set_status(Status(StatusCode.ERROR, "inventory down"))
            self.send_response(code)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

    def log_message(self, *a) -> None:
        pass


httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=httpd.serve_forever, daemon=True).start()


def call(path: str) -> int:
    with tracer.start_as_current_span("GET", kind=SpanKind.CLIENT) as span:
        tag(span)
        url = f"http://127.0.0.1:{httpd.server_port}{path}"
        span.set_attribute("http.request.method", "GET")
        span.set_attribute("url.full", url)
        span.set_attribute("server.address", "127.0.0.1")
        h: dict[str, str] = {}
        propagate.inject(h)
        c = http.client.HTTPConnection("127.0.0.1", httpd.server_port, timeout=10)
        c.request("GET", path, headers=h)
        r = c.getresponse()
        r.read()
        c.close()
        span.set_attribute("http.response.status_code", r.status)
        if r.status >= 500:
            span.set_status(Status(StatusCode.ERROR))
        return r.status


def worker(ctx, n: int) -> None:
    token = context.attach(ctx)
    try:
        with tracer.start_as_current_span(f"worker-{n}") as span:
            tag(span)
            span.set_attribute("items", n * 10)
            span.add_event("picked", {"count": n})
            if n == 1:
                call("/inventory")
                call("/fail")
                log.warning("inventory failed for worker %d", n)
    finally:
        context.detach(token)


with tracer.start_as_current_span("checkout", kind=SpanKind.SERVER) as root:
    tag(root)
    root.set_attribute("order.id", "A-17")
    orders.add(3, {"region": "eu"})
    orders.add(2, {"region": "eu"})
    queue.add(5)
    queue.add(-2)
    for ms in (5, 12, 80):
        latency.record(ms)
    for size in (100, 2000, 2100):
        payload.record(size)
    log.info("checkout started")
    ctx = context.get_current()
    threads = [threading.Thread(target=worker, args=(ctx, n), name=f"worker-{n}") for n in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    root_ctx = root.get_span_context()
with tracer.start_as_current_span("audit", links=[trace.Link(root_ctx, {"why": "after"})]) as audit:
    tag(audit)

httpd.shutdown()
ok_spans = provider.force_flush(10_000)
ok_logs = logs.force_flush(10_000)
meters.shutdown()  # collects and exports once (a flush before it would export the cumulative points twice)
provider.shutdown()
logs.shutdown()
print(json.dumps({"trace_id": f"{root_ctx.trace_id:032x}", "flushed": ok_spans and ok_logs}))
