"""The formats declared in Rust, read through `_core`.

Owns the one conversion from the Rust declarations (`src/formats/<format>/decl.rs`, listed in
`src/formats/mod.rs` `FORMATS`: names, kinds, parameter types, units, docs, sniff priority,
parser options, the analyses' profile, example queries) to Python values: `schema.EventType`s
and plain dicts. A format with a Rust half takes its `DESCRIPTION`, `EVENT_TYPES` (and
`RESULTS`) from here, so its event types are written once; the registry (`registry.py`) builds
its table of formats from `formats()`; formats without one (csv, parquet) type their events
from the data.
"""

from __future__ import annotations

from functools import cache

from .. import _core
from ..schema import Column, EventType


@cache
def _all() -> dict:
    return _core.format_declarations()


def formats() -> dict[str, dict]:
    """Every declared format: {name: declaration}, in declared order (see `_core.pyi`)."""
    return _all()


def _columns(rows) -> tuple[Column, ...]:
    return tuple(Column(name, ptype, unit, doc) for name, ptype, unit, doc in rows)


def description(fmt: str) -> str:
    """The format's one-line description."""
    return _all()[fmt]["description"]


def event_types(fmt: str) -> tuple[EventType, ...]:
    """The format's fixed event types, in declared order."""
    return tuple(EventType(name, kind, _columns(cols), doc) for name, kind, doc, cols in _all()[fmt]["event_types"])


def results(fmt: str) -> dict[str, tuple[Column, ...]]:
    """The columns of the result tables the format's imports save, by result kind."""
    return {kind: _columns(cols) for kind, cols in _all()[fmt]["results"].items()}


def input_types(parser) -> list[EventType]:
    """The event types a `_core.NativeParser` made from its options or its input (bpftrace's
    patterns and spans), declared as the fixed ones are."""
    return [EventType(name, kind, _columns(cols), doc) for name, kind, doc, cols in parser.input_types()]


def sniffed(head: bytes) -> list[str]:
    """The declared formats whose Rust sniffer recognises `head` (gunzipped first bytes),
    highest priority first."""
    return _core.sniff_formats(head)
