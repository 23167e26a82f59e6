"""bpftrace output (`-f json` NDJSON or text): printf lines, maps, histograms, stats, time series.

What every bpftrace (and SystemTap, see `stap/`) trace has is declared once, in
Rust (src/formats/probe/decl.rs, read through `formats/declared.py`): the `printf`
event type (lines no pattern matched, kept as text), bpftrace's `tseries` counter
type (one row per interval of a tseries() map), and the columns of the three result
tables aggregates become (`hist`, `map`, `stats`, saved with `Store.save_result` and
linked to the trace). This module owns `pattern_types`: the event types of the
user's printf patterns (`NAME:literal {field:type[:unit]} ...`) and spans
(`NAME=BEGIN,END,KEY`), declared per import from those patterns: one column per
field, with the unit the pattern gives (ns for times, "address" for hex, "text" for
str, "as printed" otherwise).
"""

from __future__ import annotations

from ...schema import Column, EventType
from .. import declared

FORMAT = "bpftrace"
DESCRIPTION = declared.description(FORMAT)
EVENT_TYPES = declared.event_types(FORMAT)
PRINTF, TSERIES = EVENT_TYPES
RESULTS = declared.results(FORMAT)


def pattern_types(tables: list, units: list) -> list[EventType]:
    """Event types of a parser's patterns and spans: (name, kind, [(column, type)]) plus field units."""
    unit = {}
    for pattern, field, u in units:
        unit[(pattern, field)] = u
    by_field = {}
    for (pattern, field), u in unit.items():
        by_field.setdefault(field, u)
    out = []
    for name, kind, cols in tables:
        if name in (PRINTF.name, TSERIES.name):
            continue
        params = []
        for col, ptype in cols:
            if col in ("ts", "producer", "seq", "dur"):
                continue
            field = col[4:] if col.startswith("end_") and (name, col) not in unit else col
            u = unit.get((name, col)) or by_field.get(field) or "as printed"
            doc = f"printf field {field!r}" + (" of the end event" if field != col else "")
            params.append(Column(col, ptype, u, doc))
        patterns = {p for p, _, _ in units}
        doc = f"lines matching the --pattern {name!r}" if name in patterns else \
            "a span: a start event paired with the most recent unmatched start of the same key"
        out.append(EventType(name, kind, tuple(params), doc))
    return out
