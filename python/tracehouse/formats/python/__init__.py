"""The python format: a Python program recorded omnisciently by `tracehouse record`.

Owns the format's name, its producers and the decoding of its values. The event types are
declared once, in Rust (`src/record/decl.rs`, read through `formats/declared.py`): TOD's four
(behavior_enter/exit, var_write, field_write) with Python values, a `line_step` instant, and the
tables that make a trace self-contained (`code`, `symbol`, `source`). Producers are the program
(id 0, which also owns the code, symbol and source rows) and its threads (1, 2, ... in order of
their first recorded event).
"""

from __future__ import annotations

import math
import struct

from .. import declared

FORMAT = "python"
DESCRIPTION = declared.description(FORMAT)
EVENT_TYPES = declared.event_types(FORMAT)
# The types of the running program's events (the others describe it: code, symbol, source).
RECORDED = ("behavior_enter", "behavior_exit", "var_write", "field_write", "line_step")

# value_kind codes (src/record/decl.rs)
UNBOUND, NONE, BOOL, INT, FLOAT, STR, OBJECT, CELL = range(8)
KIND_NAMES = ("unbound", "None", "bool", "int", "float", "str", "object", "cell")
# behavior_exit.how
HOW = ("return", "raise", "yield")


def float_of(bits: int) -> float:
    """The float whose IEEE-754 bits `value` holds (value_kind 4)."""
    return struct.unpack("<d", struct.pack("<q", int(bits)))[0]


def python_value(
    kind: int | None,
    value: int | None,
    type_name: str | None = None,
    repr_text: str | None = None,
    str_text: str | None = None,
):
    """A recorded value as a plain Python value when it is one (None, bool, int, float, str);
    otherwise a dict {"type", "id", "repr"} (objects), {"cell": id} or {"unbound": True}.
    `str_text` is the symbol text of a str value."""
    if kind is None:  # a TOD trace: values are object ids
        return value
    if kind == NONE:
        return None
    if kind == BOOL:
        return bool(value)
    if kind == INT:
        return int(value)
    if kind == FLOAT:
        return float_of(value)
    if kind == STR:
        return str_text
    if kind == CELL:
        return {"cell": int(value)}
    if kind == UNBOUND:
        return {"unbound": True}
    return {"type": type_name, "id": int(value), "repr": repr_text}


def show(
    kind: int | None,
    value: int | None,
    type_name: str | None = None,
    repr_text: str | None = None,
    str_text: str | None = None,
) -> str:
    """A recorded value as one line of text: `42`, `'abc'`, `Point@0x7f3a…`, `[1, 2]`."""
    if kind is None:
        return f"#{value}"
    if kind == STR:
        return repr(str_text)
    if kind == FLOAT:
        f = float_of(value)
        return repr(f) if math.isfinite(f) else str(f)
    if kind == CELL:
        return f"<cell {int(value):#x}>"
    if kind == UNBOUND:
        return "<unbound>"
    if kind == OBJECT:
        return repr_text if repr_text else f"{type_name or 'object'}@{int(value):#x}"
    return repr(python_value(kind, value))


def producers(program: str, pid: int) -> list[dict]:
    """The program's producer row (its threads are added as the recording sees them)."""
    return [{"id": 0, "parent": None, "kind": "process", "name": program, "attrs": {"pid": pid}}]
