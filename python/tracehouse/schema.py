"""Event schemas declared once, as data, with the unit of every column.

Owns: the parameter types (int64, float64, bool, string), event kinds, the
common columns every stored event has, `EventType` (name, kind, typed params)
and its mapping to Arrow schemas. Formats (tod, csv, ...) declare their event
types with these classes; the catalog stores them once per format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import lazy
from .errors import BadInput

pa = lazy.module("pyarrow")  # loaded on first use: the catalog's event types need no Arrow

PARAM_TYPES = ("int64", "float64", "bool", "string")
# Each parameter type's (and the producer column's int32) Arrow type, by constructor name.
_ARROW_TYPES = {"int64": "int64", "float64": "float64", "bool": "bool_", "string": "string", "int32": "int32"}

KINDS = ("instant", "span", "begin", "end", "counter", "link")

IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    unit: str
    doc: str
    nullable: bool = True
    # The name the source gave the value where the column's differs (line protocol's field key
    # `a.b` stored as `a_b`, `ts` as `ts_`); InfluxQL answers by it.
    key: str = ""

    @property
    def arrow_type(self) -> pa.DataType:
        return getattr(pa, _ARROW_TYPES[self.type])()

    def to_json(self) -> dict:
        d = {"name": self.name, "type": self.type, "unit": self.unit, "doc": self.doc}
        if self.key:
            d["key"] = self.key
        return d

    @classmethod
    def from_json(cls, d: dict) -> Column:
        return cls(d["name"], d["type"], d.get("unit", ""), d.get("doc", ""), key=d.get("key", ""))


# The common columns, in stored order. `dur` exists only for span events.
TS = Column("ts", "int64", "ns", "event time (start time for spans), in nanoseconds", False)
# A `ts` at or past this (1973-03-03) is read as ns since the Unix epoch; below it, as a trace's
# own clock (strace -tt's time of day, a program's relative time): listings print it as seconds
# and a retention, which compares rows with the machine's clock, is refused for such a trace.
EPOCH_MIN_NS = 10**17
PRODUCER = Column("producer", "int32", "id", "producer id (th.producers.id of this trace)", False)
SEQ = Column("seq", "int64", "count", "order of the event within its producer, from 0", False)
DUR = Column("dur", "int64", "ns", "span duration, in nanoseconds", False)
COMMON_NAMES = ("ts", "producer", "seq", "dur", "type")


def check_ident(name: str, what: str) -> str:
    if not isinstance(name, str) or not IDENT.match(name):
        raise BadInput(
            f"invalid {what} name {name!r}",
            expected="a letter or _ followed by letters, digits or _, at most 63 characters",
        )
    return name


@dataclass(frozen=True)
class EventType:
    """One event type of a format: a name, a kind and typed parameters."""

    name: str
    kind: str
    params: tuple[Column, ...] = field(default_factory=tuple)
    doc: str = ""
    # The name the source gave it where the type's differs (line protocol's measurement
    # `cpu.load` stored as the type `cpu_load`); InfluxQL answers by it.
    key: str = ""

    def __post_init__(self) -> None:
        check_ident(self.name, "event type")
        if self.kind not in KINDS:
            raise BadInput(f"unknown event kind {self.kind!r} for {self.name}", expected=" | ".join(KINDS))
        seen = set()
        for p in self.params:
            check_ident(p.name, "parameter")
            if p.name in COMMON_NAMES or p.name in seen:
                raise BadInput(f"parameter name {p.name!r} of {self.name} is reserved or repeated")
            if p.type not in PARAM_TYPES:
                raise BadInput(
                    f"parameter {p.name!r} of {self.name} has type {p.type!r}", expected=" | ".join(PARAM_TYPES)
                )
            seen.add(p.name)

    @property
    def common(self) -> tuple[Column, ...]:
        return (TS, PRODUCER, SEQ, DUR) if self.kind == "span" else (TS, PRODUCER, SEQ)

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.common + self.params

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.arrow_type, nullable=c.nullable) for c in self.columns])

    def params_json(self) -> list[dict]:
        return [p.to_json() for p in self.params]

    def with_params(self, extra: list[Column]) -> EventType:
        return EventType(self.name, self.kind, self.params + tuple(extra), self.doc, self.key)

    def to_json(self) -> dict:
        d = {"name": self.name, "kind": self.kind, "params": self.params_json(), "doc": self.doc}
        if self.key:
            d["key"] = self.key
        return d

    @classmethod
    def from_json(cls, d: dict) -> EventType:
        params = tuple(Column.from_json(p) for p in d.get("params", ()))
        return cls(d["name"], d["kind"], params, d.get("doc", ""), d.get("key", ""))


def param_type_of(t: pa.DataType) -> str | None:
    """The tracehouse parameter type an Arrow type is stored as, or None."""
    if pa.types.is_integer(t):
        return "int64"
    if pa.types.is_floating(t):
        return "float64"
    if pa.types.is_boolean(t):
        return "bool"
    # string_view: polars writes its strings so (Arrow IPC from `DataFrame.write_ipc_stream`)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t) or pa.types.is_dictionary(t):
        return "string"
    if pa.types.is_timestamp(t) or pa.types.is_duration(t):
        return "int64"
    return None


def infer_event_type(name: str, kind: str, schema: pa.Schema) -> EventType:
    """An event type whose params are every non-common column of `schema`."""
    params = []
    for f in schema:
        if f.name in COMMON_NAMES:
            continue
        pt = param_type_of(f.type)
        if pt is None:
            raise BadInput(f"column {f.name!r} has unsupported type {f.type}", expected="int, float, bool or string")
        params.append(Column(f.name, pt, "", ""))
    return EventType(name, kind, tuple(params))


def one_event_type(types: dict[str, EventType], trace: str, name: str) -> EventType:
    """`types[name]`, or BadInput naming the trace's event types when it has none of that name."""
    if name not in types:
        raise BadInput(f"trace {trace!r} has no event type {name!r}", expected=", ".join(types) or "an event type")
    return types[name]
