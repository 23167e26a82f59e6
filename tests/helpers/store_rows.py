"""Small event types and batches the Store API tests share: a span type (`CALL`), an instant type
(`MARK`), a counter (`LOAD`), a process with threads (`producers`), rows of each (`calls`, `marks`)
and the first value of a query (`scalar`)."""

from __future__ import annotations

import pyarrow as pa

from tracehouse import Column, EventType

CALL = EventType(
    "call",
    "span",
    (Column("fn", "string", "", "function called"), Column("depth", "int64", "frames", "stack depth")),
    "a function call",
)
MARK = EventType(
    "mark",
    "instant",
    (Column("label", "string", "", "what happened"), Column("ok", "bool", "", "whether it went well")),
)
LOAD = EventType("load", "counter", (Column("value", "float64", "%", "cpu load"),))


def producers(n: int = 2) -> list[dict]:
    rows = [{"id": 0, "parent": None, "kind": "process", "name": "app", "attrs": {"pid": 42}}]
    return rows + [{"id": i, "parent": 0, "kind": "thread", "name": f"t{i}", "attrs": {}} for i in range(1, n + 1)]


def calls(ts, producer, fn, dur=None, depth=None) -> pa.Table:
    n = len(ts)
    return pa.table(
        {
            "ts": pa.array(ts, pa.int64()),
            "producer": pa.array(producer, pa.int32()),
            "dur": pa.array(dur if dur is not None else [10] * n, pa.int64()),
            "fn": pa.array(fn, pa.string()),
            "depth": pa.array(depth if depth is not None else [0] * n, pa.int64()),
        }
    )


def marks(ts, producer, label, ok=None) -> pa.Table:
    return pa.table(
        {
            "ts": pa.array(ts, pa.int64()),
            "producer": pa.array(producer, pa.int32()),
            "label": label,
            "ok": pa.array(ok if ok is not None else [True] * len(ts), pa.bool_()),
        }
    )


def scalar(store, sql: str):
    return store.sql(sql).column(0)[0].as_py()
