"""Writes the demo's OpenTelemetry example (python/tracehouse/server/ui/examples/shop.otlp): the
spans of a small shop made by the OpenTelemetry Python SDK, four services (frontend, cart,
payment, email) each with its own resource, encoded by the SDK's OTLP exporter encoder
(`opentelemetry-exporter-otlp-proto-common`: the ExportTraceServiceRequest protobuf that
`opentelemetry-exporter-otlp-proto-http` posts to /v1/traces). Ids and times are fixed and the
durations come from a seeded generator, so the file is the same on every run.

    .venv/bin/python dev/make_otlp_example.py

Each of the 24 checkouts is a trace: frontend `POST /checkout` (server) -> `cart.get` -> cart
`GET /cart` (server) -> a `SELECT cart_items` database span; then frontend -> payment `charge`
(server, an `exception` event and status error when the card is declined, every fifth order)
-> a `fraud.score` span; an email `send confirmation` consumer span in a trace of its own,
linked to its checkout.
"""

from __future__ import annotations

import random
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Link, SpanKind, Status, StatusCode, set_span_in_context

OUT = Path(__file__).resolve().parents[1] / "python" / "tracehouse" / "server" / "ui" / "examples" / "shop.otlp"
T0 = 1_700_000_000_000_000_000
MS = 1_000_000


class Counting(IdGenerator):
    """Span ids 1, 2, 3 ... and trace ids from a seeded generator: the same file every run."""

    def __init__(self) -> None:
        self.n = 0
        self.rng = random.Random(34)

    def generate_span_id(self) -> int:
        self.n += 1
        return 0x5000 + self.n

    def generate_trace_id(self) -> int:
        return self.rng.getrandbits(128)


def main() -> None:
    mem = InMemorySpanExporter()
    ids = Counting()
    tracers = {}
    for i, svc in enumerate(("frontend", "cart", "payment", "email")):
        res = Resource({"service.name": svc, "host.name": f"node-{i % 2 + 1}", "process.pid": 1000 + i})
        provider = TracerProvider(resource=res, id_generator=ids)
        provider.add_span_processor(SimpleSpanProcessor(mem))
        tracers[svc] = provider.get_tracer(f"shop.{svc}", "1.0")
    rng = random.Random(7)
    fe, cart, pay, mail = (tracers[s] for s in ("frontend", "cart", "payment", "email"))
    for n in range(24):
        t = T0 + n * 250 * MS + rng.randrange(0, 50 * MS)
        root = fe.start_span("POST /checkout", kind=SpanKind.SERVER, start_time=t)
        root.set_attribute("http.request.method", "POST")
        root.set_attribute("url.full", f"https://shop.example/checkout?order={n}")
        root.set_attribute("order.id", f"A-{100 + n}")
        root.set_attribute("thread.id", 1 + n % 4)
        ctx = set_span_in_context(root)
        at = t + rng.randrange(200_000, 900_000)
        get = fe.start_span("cart.get", context=ctx, kind=SpanKind.CLIENT, start_time=at)
        get.set_attribute("http.request.method", "GET")
        get.set_attribute("server.address", "cart")
        srv = cart.start_span(
            "GET /cart", context=set_span_in_context(get), kind=SpanKind.SERVER, start_time=at + 150_000
        )
        srv.set_attribute("http.request.method", "GET")
        q0 = at + 400_000
        q = cart.start_span("SELECT cart_items", context=set_span_in_context(srv), kind=SpanKind.CLIENT, start_time=q0)
        q.set_attribute("db.system", "postgresql")
        q.set_attribute("db.statement", "SELECT * FROM cart_items WHERE cart_id = $1")
        q_end = q0 + rng.randrange(1 * MS, 6 * MS)
        q.end(end_time=q_end)
        srv.set_attribute("http.response.status_code", 200)
        srv.end(end_time=q_end + 200_000)
        get.set_attribute("http.response.status_code", 200)
        get.end(end_time=q_end + 350_000)
        c0 = q_end + rng.randrange(300_000, 800_000)
        charge = pay.start_span("charge", context=ctx, kind=SpanKind.SERVER, start_time=c0)
        charge.set_attribute("payment.amount", round(rng.uniform(5, 300), 2))
        f0 = c0 + 300_000
        fraud = pay.start_span("fraud.score", context=set_span_in_context(charge), start_time=f0)
        f_end = f0 + rng.randrange(2 * MS, 30 * MS)
        fraud.set_attribute("fraud.score", round(rng.random(), 3))
        fraud.end(end_time=f_end)
        declined = n % 5 == 3
        if declined:
            charge.add_event(
                "exception",
                {"exception.type": "CardDeclined", "exception.message": "card declined by issuer"},
                timestamp=f_end + 100_000,
            )
            charge.set_status(Status(StatusCode.ERROR, "card declined"))
        charge.end(end_time=f_end + 400_000)
        end = f_end + rng.randrange(600_000, 2 * MS)
        root.set_attribute("http.response.status_code", 402 if declined else 201)
        if declined:
            root.set_status(Status(StatusCode.ERROR))
        root.end(end_time=end)
        if not declined:
            m0 = end + rng.randrange(5 * MS, 40 * MS)
            send = mail.start_span(
                "send confirmation",
                kind=SpanKind.CONSUMER,
                links=[Link(root.get_span_context(), {"messaging.operation": "process"})],
                start_time=m0,
            )
            send.set_attribute("messaging.system", "rabbitmq")
            send.set_attribute("messaging.destination.name", "order-confirmations")
            send.add_event("rendered", {"template": "confirmation"}, timestamp=m0 + 2 * MS)
            send.end(end_time=m0 + rng.randrange(5 * MS, 15 * MS))
    OUT.write_bytes(encode_spans(mem.get_finished_spans()).SerializeToString())
    print(f"{OUT}: {len(mem.get_finished_spans())} spans, {OUT.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
