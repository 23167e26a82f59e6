"""The perfetto format: Perfetto protobuf traces (.perfetto-trace, .pftrace), gzipped or not.

Owns the format's name; its event types (`slice`, `instant`, `counter` from track events, one
producer per track; `sched_slice`, `sched_waking` from ftrace scheduling, one producer per
CPU; `flow` from track events' flow ids, the Chrome importer's type of flow arrows), its sniffer, its streaming parser (`src/formats/perfetto/mod.rs`: packets cut as they
arrive, interned names and the incremental state rules per sequence), the exporters' labels
and example queries are declared once, in Rust (`src/formats/perfetto/decl.rs`, read through
`formats/declared.py`). docs/formats/perfetto.md has the mapping table.
"""

from __future__ import annotations

from .. import declared

FORMAT = "perfetto"
DESCRIPTION = declared.description(FORMAT)
EVENT_TYPES = declared.event_types(FORMAT)
SLICE, INSTANT, COUNTER, SCHED_SLICE, SCHED_WAKING, FLOW = EVENT_TYPES
