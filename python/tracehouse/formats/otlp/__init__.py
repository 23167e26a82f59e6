"""The otlp format: OpenTelemetry traces and logs (OTLP), posted live to `tracehouse serve`
(`/v1/traces`, `/v1/logs`: server/otlp.py) or imported from files.

Owns the format's name; its event types (`span`, `span_event`, `span_link`, `log`), its
sniffer (the JSON lines the Collector's file exporter writes), its parser and the mapping
(resource attributes -> the producer tree service -> host -> process -> thread; common
semantic-convention attributes -> typed columns; `src/formats/otlp/mod.rs`), the analyses'
profile (a `span` is a span named by `name`) and example queries are declared once, in Rust
(`src/formats/otlp/decl.rs`, read through `formats/declared.py`). docs/formats/otlp.md has
the mapping table.
"""

from __future__ import annotations

from .. import declared

FORMAT = "otlp"
DESCRIPTION = declared.description(FORMAT)
EVENT_TYPES = declared.event_types(FORMAT)
PRODUCER_KINDS = ("service", "host", "process", "thread")
# The attribute holding each producer kind's key (what `_core.OtlpProducers.declare` takes).
PRODUCER_KEYS = {"service": "service.name", "host": "host.name", "process": "process.pid", "thread": "thread.id"}
