"""bpftrace output (`-f json` NDJSON or text): printf lines, maps, histograms, stats, time series.

Owns the declaration of what every bpftrace (and SystemTap, see `stap.py`) trace
has: the `printf` event type (lines no pattern matched, kept as text), bpftrace's
`tseries` counter type (one row per interval of a tseries() map), and the
columns of the three result tables aggregates become (`hist`, `map`, `stats`,
saved with `Store.save_result` and linked to the trace). The event types of the
user's printf patterns (`NAME:literal {field:type[:unit]} ...`) and spans
(`NAME=BEGIN,END,KEY`) are declared per import from those patterns by
`pattern_types`: one column per field, with the unit the pattern gives (ns for
times, "address" for hex, "text" for str, "as printed" otherwise).
"""

from __future__ import annotations

from ...schema import Column, EventType

FORMAT = "bpftrace"
DESCRIPTION = ("bpftrace output: -f json records or text (printf lines parsed by --pattern, "
               "@maps, hist/lhist histograms, stats)")

PRINTF = EventType("printf", "instant", (
    Column("text", "string", "text", "a printed line no --pattern matched (ts: the last time seen before it)"),
    Column("line", "int64", "line", "line number in the input file"),
), "printed output that matched no pattern")

TSERIES = EventType("tseries", "counter", (
    Column("map", "string", "text", "map name (@name)"),
    Column("key", "string", "text", "map key, null for a map without keys"),
    Column("value", "float64", "as recorded", "the value over the interval that starts at ts (null: none)"),
    Column("line", "int64", "line", "line of the input"),
), "one interval of a tseries() map: ts is its interval_start (epoch ns; bpftrace's printed time is UTC)")

EVENT_TYPES = (PRINTF, TSERIES)

RESULTS = {
    "hist": (
        Column("map", "string", "text", "map name (@name), or the table's title for SystemTap"),
        Column("key", "string", "text", "map key, null for a map without keys"),
        Column("lo", "int64", "as recorded", "bucket lower bound, inclusive; null when open below"),
        Column("hi", "int64", "as recorded", "bucket upper bound, exclusive; null when open above"),
        Column("count", "int64", "count", "samples in the bucket"),
        Column("elided", "bool", "flag", "a SystemTap '~' row: empty buckets from lo to hi"),
        Column("line", "int64", "line", "line of the input the bucket was read from"),
    ),
    "map": (
        Column("map", "string", "text", "map name (@name)"),
        Column("key", "string", "text", "map key, null for a scalar"),
        Column("value", "int64", "as recorded", "integer value"),
        Column("text", "string", "text", "the value as printed, when it is not an integer"),
        Column("line", "int64", "line", "line of the input"),
    ),
    "stats": (
        Column("map", "string", "text", "map name (@name)"),
        Column("key", "string", "text", "map key, null for a map without keys"),
        Column("count", "int64", "count", "number of values"),
        Column("average", "int64", "as recorded", "their average (integer, as bpftrace prints it)"),
        Column("total", "int64", "as recorded", "their sum"),
        Column("line", "int64", "line", "line of the input"),
    ),
}


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
