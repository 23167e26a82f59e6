"""Writes the `sdk` golden input: spans and their events and links made by the OpenTelemetry
Python SDK, encoded by its OTLP exporter's own encoder (`opentelemetry-exporter-otlp-proto-common`,
what `opentelemetry-exporter-otlp-proto-http` posts to /v1/traces), with fixed ids and times so
the file is the same on every run.

    .venv/bin/python tests/formats/otlp/make_golden.py

With `--telemetrygen` it writes the `telemetrygen` input instead: what the OpenTelemetry
Collector's load generator (`make setup` builds it into the venv's bin) posts to /v1/traces,
caught by a one-shot HTTP listener on loopback (its ids and times are random and now: the
committed file is the case, regenerating it changes expected.csv).
"""

from __future__ import annotations

from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Link, SpanKind, Status, StatusCode, set_span_in_context

HERE = Path(__file__).parent
T0 = 1_700_000_000_000_000_000


class Counting(IdGenerator):
    def __init__(self) -> None:
        self.n = 0

    def generate_span_id(self) -> int:
        self.n += 1
        return 0x1000 + self.n

    def generate_trace_id(self) -> int:
        return 0xABCDEF0123456789ABCDEF0123456789


def main() -> None:
    mem = InMemorySpanExporter()
    res = Resource(
        {"service.name": "billing", "host.name": "node-1", "process.pid": 4242, "telemetry.sdk.language": "python"}
    )
    provider = TracerProvider(resource=res, id_generator=Counting())
    provider.add_span_processor(SimpleSpanProcessor(mem))
    tracer = provider.get_tracer("billing.api", "2.1")
    root = tracer.start_span("POST /invoice", kind=SpanKind.SERVER, start_time=T0)
    root.set_attribute("http.request.method", "POST")
    root.set_attribute("http.response.status_code", 201)
    root.set_attribute("url.full", "http://billing/invoice?id=7")
    root.set_attribute("thread.id", 11)
    root.set_attribute("thread.name", "MainThread")
    ctx = set_span_in_context(root)
    db = tracer.start_span("INSERT invoices", context=ctx, kind=SpanKind.CLIENT, start_time=T0 + 1_000_000)
    db.set_attribute("db.system", "postgresql")
    db.set_attribute("db.statement", "INSERT INTO invoices VALUES ($1)")
    db.set_attribute("server.address", "db-1")
    db.set_attribute("thread.id", 11)
    db.add_event("retry", {"attempt": 2, "backoff.ms": 1.5}, timestamp=T0 + 2_000_000)
    db.end(end_time=T0 + 4_000_000)
    pub = tracer.start_span("invoices publish", context=ctx, kind=SpanKind.PRODUCER, start_time=T0 + 5_000_000)
    pub.set_attribute("messaging.system", "kafka")
    pub.set_attribute("messaging.destination.name", "invoices")
    pub.set_attribute("thread.id", 12)
    pub.set_attribute("tags", ["a", "b"])
    pub.set_status(Status(StatusCode.ERROR, "broker unavailable"))
    pub.end(end_time=T0 + 6_500_000)
    root.end(end_time=T0 + 9_000_000)
    later = tracer.start_span(
        "reconcile", links=[Link(root.get_span_context(), {"kind": "follows"})], start_time=T0 + 20_000_000
    )
    later.set_attribute("rpc.system", "grpc")
    later.set_attribute("rpc.service", "Ledger")
    later.set_attribute("rpc.method", "Reconcile")
    later.end(end_time=T0 + 21_000_000)
    (HERE / "sdk" / "input").write_bytes(encode_spans(mem.get_finished_spans()).SerializeToString())


def telemetrygen() -> None:
    import http.server
    import shutil
    import subprocess
    import sys
    import threading

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    exe = Path(sys.executable).parent / "telemetrygen"
    exe = str(exe) if exe.exists() else shutil.which("telemetrygen")
    bodies: list[bytes] = []

    class Catch(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the handler's name
            bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)  # an empty ExportTraceServiceResponse: everything taken
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Catch)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    args = ["--otlp-http", "--otlp-insecure", "--otlp-endpoint", f"127.0.0.1:{srv.server_address[1]}"]
    args += ["--workers", "1", "--traces", "2", "--child-spans", "2", "--span-links", "1", "--rate", "0"]
    args += ["--service", "inventory", "--status-code", "Error", "--otlp-attributes", 'host.name="node-3"']
    args += ["--telemetry-attributes", 'tenant="acme"']
    subprocess.run([exe, "traces", *args], check=True, capture_output=True, timeout=60)
    srv.shutdown()
    req = ExportTraceServiceRequest()
    for b in bodies:
        req.MergeFromString(b)  # (one export of the three spans per trace; several are one request)
    (HERE / "telemetrygen" / "input").write_bytes(req.SerializeToString())


if __name__ == "__main__":
    import sys

    telemetrygen() if sys.argv[1:] == ["--telemetrygen"] else main()
