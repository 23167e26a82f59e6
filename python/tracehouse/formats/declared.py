"""The event types a Rust parser or generator declares, read through `_core`.

Owns the one conversion from the Rust declarations (`src/formats/decl.rs` and each
format's `decl.rs`: names, kinds, parameter types, units, docs) to `schema.EventType`s.
A format with a Rust half (strace, chrome, paje, bpftrace, stap, tod) takes its
`DESCRIPTION`, `EVENT_TYPES` (and `RESULTS`) from here, so its event types are written
once; formats without one (csv, parquet, line protocol) type their events from the data.
"""

from __future__ import annotations

from functools import cache

from .. import _core
from ..schema import Column, EventType


@cache
def _all() -> dict:
    return _core.format_declarations()


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
