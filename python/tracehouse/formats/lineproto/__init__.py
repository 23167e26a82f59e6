"""The lineproto format: InfluxDB line protocol, written to `tracehouse serve` or imported from a file.

Owns the format's name and how a measurement becomes an event type: its description, sniffer,
parser (the ingest server's decoder, `src/ingest/lineproto.rs`, behind
`src/formats/lineproto/mod.rs`) and example queries are declared in Rust
(`src/formats/lineproto/decl.rs`). A trace's event types are its own (`OWN_TYPES`): each
measurement is typed by the fields written to that trace (42i an integer, 42 a float, true a
bool, "x" a string), as a bucket written to the server is; each tag set is a producer (kind
`tags`).
"""

from __future__ import annotations

from ...schema import EventType, infer_event_type
from .. import declared

FORMAT = "lineproto"
DESCRIPTION = declared.description(FORMAT)
EVENT_TYPES: tuple[EventType, ...] = ()
OWN_TYPES = True
PRODUCER_KIND = "tags"  # kind of the producers made from tag sets
KIND = "instant"  # kind of the event types made from measurements


def event_type(name: str, schema) -> EventType:
    """The event type of a measurement, from the schema of its first batch."""
    return infer_event_type(name, KIND, schema)
