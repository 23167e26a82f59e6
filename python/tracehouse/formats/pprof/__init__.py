"""The pprof format: profile.proto profiles (Go's runtime/pprof, `go tool pprof`, pprof-rs), as stack samples.

Owns the format's name; its event type (`sample`), its sniffer, its parser
(`src/formats/pprof/mod.rs`: locations, inlined lines and functions resolved into folded
stacks), the analyses' profile (a `sample` is a stack sample weighed by its `value` of the
default sample type: the flame graph, call tree, density and statistics read it) and example
queries are declared once, in Rust (`src/formats/pprof/decl.rs`, read through
`formats/declared.py`). The exporter writing any sampled or span trace as pprof is
`analysis/pprof_export.py` (it reads the span call tree). docs/formats/pprof.md has the
mapping table.
"""

from __future__ import annotations

from .. import declared

FORMAT = "pprof"
DESCRIPTION = declared.description(FORMAT)
EVENT_TYPES = declared.event_types(FORMAT)
(SAMPLE,) = EVENT_TYPES
