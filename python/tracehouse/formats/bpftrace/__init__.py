"""bpftrace output (`-f json` NDJSON or text): printf lines, maps, histograms, stats, time series.

What every bpftrace (and SystemTap, see `stap/`) trace has is declared once, in
Rust (src/formats/probe/decl.rs, read through `formats/declared.py`): the `printf`
event type (lines no pattern matched, kept as text), bpftrace's `tseries` counter
type (one row per interval of a tseries() map), and the columns of the three result
tables aggregates become (`hist`, `map`, `stats`, saved with `Store.save_result` and
linked to the trace). The event types of the user's printf patterns
(`NAME:literal {field:type[:unit]} ...`) and spans (`NAME=BEGIN,END,KEY`) are made per
import by the parser from those patterns (`ChunkParser::input_types`): one column per
field, with the unit the pattern gives (ns for times, "address" for hex, "text" for
str, "as printed" otherwise).
"""

from __future__ import annotations

from .. import declared

FORMAT = "bpftrace"
DESCRIPTION = declared.description(FORMAT)
EVENT_TYPES = declared.event_types(FORMAT)
PRINTF, TSERIES = EVENT_TYPES
RESULTS = declared.results(FORMAT)
