"""The TOD format (seed 001): events of an omniscient debugger's simulated program.

Owns the declaration of the four TOD event types. The Rust generator
(`tracehouse._core.TodGenerator`) emits batches with exactly these columns;
producers are one process (id 0) and its threads (ids 1..threads).
"""

from __future__ import annotations

from ...schema import Column, EventType

FORMAT = "tod"
DESCRIPTION = "TOD omniscient-debugger workload (seed 001): field/variable writes, behavior enter/exit"

_parent = Column("parent_seq", "int64", "seq", "seq of the enclosing behavior_enter in the same thread, -1 at the root")

EVENT_TYPES = (
    EventType(
        "field_write",
        "instant",
        (
            _parent,
            Column("field_id", "int64", "id", "field written"),
            Column("target", "int64", "object id", "object whose field is written"),
            Column("value", "int64", "object id", "object assigned to the field"),
        ),
        "a field of an object is assigned",
    ),
    EventType(
        "var_write",
        "instant",
        (
            _parent,
            Column("var_id", "int64", "id", "local variable written"),
            Column("value", "int64", "object id", "object assigned to the variable"),
        ),
        "a local variable is assigned",
    ),
    EventType(
        "behavior_enter",
        "begin",
        (
            _parent,
            Column("behavior_id", "int64", "id", "method or constructor entered"),
            Column("target", "int64", "object id", "receiver object"),
            Column("arg_count", "int64", "count", "number of arguments"),
            Column("arg0", "int64", "object id", "first argument, null if absent"),
            Column("arg1", "int64", "object id", "second argument, null if absent"),
            Column("arg2", "int64", "object id", "third argument, null if absent"),
            Column("arg3", "int64", "object id", "fourth argument, null if absent"),
        ),
        "a behavior (method or constructor) is entered",
    ),
    EventType(
        "behavior_exit",
        "end",
        (
            _parent,
            Column("behavior_id", "int64", "id", "method or constructor exited"),
            Column("ret_value", "int64", "object id", "returned object"),
        ),
        "a behavior returns; parent_seq is the seq of its behavior_enter",
    ),
)


def producers(threads: int) -> list[dict]:
    """The producer rows of a generated TOD trace: the program, then its threads."""
    rows = [{"id": 0, "parent": None, "kind": "process", "name": "tod-program", "attrs": {}}]
    rows += [
        {"id": i, "parent": 0, "kind": "thread", "name": f"thread-{i}", "attrs": {"tid": i}}
        for i in range(1, threads + 1)
    ]
    return rows
