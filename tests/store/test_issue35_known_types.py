"""Creating a trace of a format whose event types are already stored writes nothing for them
(no catalog transaction, no version bump readers would refresh on): `tracehouse record` creates
its trace, with the `python` format's 8 types, before the program can start. New types and new
params are still registered and widen the open writers' types; conflicts are still refused."""

from __future__ import annotations

import pytest

from tracehouse import Column, EventType
from tracehouse.errors import BadInput

EV = EventType("ev", "instant", (Column("x", "int64", "", "x"),))
SPAN = EventType("span", "span", (Column("y", "string", "", "y"),))


def _bumps(store, fn) -> int:
    v = store.catalog.version()
    fn()
    return store.catalog.version() - v


def test_issue35_known_types_cost_no_catalog_write(store):
    first = _bumps(store, lambda: store.create_trace("a", "fmt", event_types=[EV, SPAN]))
    bare = _bumps(store, lambda: store.create_trace("b", "fmt"))
    again = _bumps(store, lambda: store.create_trace("c", "fmt", event_types=[EV, SPAN]))
    # The first trace registered the format and its two types; a later one with the same types
    # makes only the trace's own writes, as one declaring no types does.
    assert first > bare
    assert again == bare
    assert set(store.event_types("c")) == {"ev", "span"}


def test_issue35_new_params_still_widen_open_writers(store):
    store.create_trace("a", "fmt", event_types=[EV])
    import pyarrow as pa

    store.append("a", "ev", pa.record_batch({"ts": [1], "producer": pa.array([0], pa.int32()), "x": [5]}))
    wider = EventType("ev", "instant", (Column("x", "int64", "", "x"), Column("z", "string", "", "z")))
    store.create_trace("b", "fmt", event_types=[wider])
    # The open writer of "a" takes the widened type: a row with z is accepted there.
    assert [p.name for p in store.event_types("a")["ev"].params] == ["x", "z"]
    store.append("a", "ev", pa.record_batch({"ts": [2], "producer": pa.array([0], pa.int32()), "x": [6], "z": ["q"]}))
    store.flush("a")
    assert store.sql('SELECT z FROM "a".ev ORDER BY ts').to_pylist() == [{"z": None}, {"z": "q"}]


def test_issue35_conflicting_types_still_refused(store):
    store.create_trace("a", "fmt", event_types=[EV])
    with pytest.raises(BadInput, match="stored as int64"):
        store.create_trace("b", "fmt", event_types=[EventType("ev", "instant", (Column("x", "string", "", "x"),))])
    with pytest.raises(BadInput, match="kind"):
        store.create_trace("c", "fmt", event_types=[EventType("ev", "span", (Column("x", "int64", "", "x"),))])
