"""The perf format: `perf script` output of a `perf record`, stack samples and tracepoint events.

Owns the format's name; its two event types (`sample`, `tracepoint`), its sniffer, its parser
(`src/formats/perf/mod.rs`: the header and frame grammar, the folded stacks), the analyses'
profile (a `sample` is a stack sample weighed by its `period`: the flame graph, call tree,
density and statistics read it) and example queries are declared once, in Rust
(`src/formats/perf/decl.rs`, read through `formats/declared.py`). docs/formats/perf.md has
the mapping table.
"""

from __future__ import annotations

from .. import declared

FORMAT = "perf"
DESCRIPTION = declared.description(FORMAT)
EVENT_TYPES = declared.event_types(FORMAT)
SAMPLE, TRACEPOINT = EVENT_TYPES
