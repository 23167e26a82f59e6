"""Object state at time t and the history of one field (seed 001's omniscient queries).

Owns the answers to "what was in every field of object o at time t?" (the last
write at or before t, per field) and "every value field f of object o took". Both
read the `objects` index (field writes ordered by object, field, ts; `indexes.py`):
the object's writes are one contiguous range found by binary search, so a question
costs microseconds to a few ms whatever the trace size, against a scan of every
field write up to t for the plain SQL (`sql/object_state.sql`).

Output columns of `object_state` and `field_history` (`STATE_COLUMNS`):
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import arrays
from ..schema import Column
from ..store import scan
from . import event_streams, indexes
from .profiles import ObjectConfig, object_config
from .registry import Analysis, Param, Rows

if TYPE_CHECKING:
    from ..store import Store

STATE_COLUMNS = (
    Column("field", "int64", "id", "the field (its value in the field column)"),
    Column("value", "int64", "value", "the value written (type and unit of the value column)"),
    Column("ts", "int64", "ns", "time of the write"),
    Column("producer", "int32", "id", "thread that wrote it"),
    Column("seq", "int64", "seq", "seq of the write event"),
)
__doc__ += "\n".join(f"  {c.name:<9} {c.type:<6} {c.unit:<3} {c.doc}" for c in STATE_COLUMNS)


def objects_index(
    store: Store, trace: str, config: ObjectConfig | None = None, *, save: bool | None = None
) -> indexes.PackedIndex:
    """Field writes ordered by (object, field, ts): columns object, field, ts, value, producer,
    seq; in parts over the trace's segments (`indexes.get_parts`)."""
    cfg = config or object_config(store, trace)

    def build(cut) -> pa.Table:
        t = scan.read(cut, cfg.type, ["ts", "producer", "seq", cfg.object, cfg.field, cfg.value])
        t = t.filter(pc.and_(pc.is_valid(t.column(cfg.object)), pc.is_valid(t.column(cfg.field))))
        obj, fld = _key_codes(t.column(cfg.object)), _key_codes(t.column(cfg.field))
        from .. import _core

        order = _core.stable_order([pa.array(obj), pa.array(fld)])
        return pa.table(
            {
                "object": indexes.narrow(t.column(cfg.object).take(order)),
                "field": indexes.narrow(t.column(cfg.field).take(order)),
                "ts": t.column("ts").take(order),
                "value": t.column(cfg.value).take(order),
                "producer": t.column("producer").take(order),
                "seq": t.column("seq").take(order),
            }
        )

    # seq is stored as the difference to the density index's seq of the same (type,
    # producer, ts): 0 bits on TOD (10M events: 2.5 B a row, 8.7 MB, before).
    return indexes.get_parts(
        store,
        trace,
        "objects",
        {"config": cfg.to_json()},
        [cfg.type],
        build,
        save=save,
        guessed={"seq": (cfg.type, "producer", "ts")},
        guesser=event_streams.seq_guesser(store, trace, store.stamp(trace)),
    )


def _key_codes(col) -> np.ndarray:
    """An int key column as int64 (object and field ids are integers in every profile)."""
    if not pa.types.is_integer(col.type):
        from ..errors import BadInput

        raise BadInput(f"object and field columns must be integers, not {col.type}")
    return arrays.as_numpy(col).astype(np.int64, copy=False)


def _rows(idx: indexes.PackedIndex, lo: int, hi: int) -> pa.Table:
    return _state_columns(idx.slice(lo, hi - lo))


def _take(idx: indexes.PackedIndex, rows: np.ndarray) -> pa.Table:
    return _state_columns(idx.take(rows))


def _state_columns(t: pa.Table) -> pa.Table:
    return pa.table(
        {
            "field": t.column("field").cast(pa.int64()),
            "value": t.column("value"),
            "ts": t.column("ts"),
            "producer": t.column("producer"),
            "seq": t.column("seq"),
        }
    )


def _key_rows(idx, keys: list[int], start: int | None = None, end: int | None = None) -> pa.Table:
    """The rows of every part of the index whose leading keys are `keys` (ts in [start, end)),
    as STATE_COLUMNS ordered by (field, ts, producer, seq): the order one index built at
    once gives (its rows arrive in that order and are sorted stably by key)."""
    pieces = []
    for part in indexes.parts(idx):
        ocol, fcol, tcol = (indexes.column(part, c) for c in ("object", "field", "ts"))
        lo, hi = indexes.key_range([ocol, fcol][: len(keys)], keys)
        if start is not None:
            lo += indexes.search(tcol[lo:hi], int(start), "left")
        if end is not None:
            hi = lo + indexes.search(tcol[lo:hi], int(end), "left")
        pieces.append(_rows(part, lo, max(lo, hi)))
    if len(pieces) == 1:
        return pieces[0]
    t = pa.concat_tables(pieces)
    return t.take(
        pa.array(
            np.lexsort([arrays.as_numpy(t.column(c)).astype(np.int64) for c in ("seq", "producer", "ts", "field")])
        )
    )


def object_state(store: Store, trace: str, obj: int, t: int, config: ObjectConfig | None = None) -> pa.Table:
    """Every field of object `obj` written at or before `t`, with its last value (by field).

    The rows are chosen on field and ts alone, then only they are read whole: seq is read
    through the density index (a search per row), so reading it for every write of the
    object cost 2.3x at 10M events (p50 1.65 -> 3.75 ms)."""
    idx = objects_index(store, trace, config)
    pieces = []
    for part in indexes.parts(idx):
        lo, hi = indexes.key_range([indexes.column(part, "object")], [int(obj)])
        f = np.asarray(indexes.column(part, "field")[lo:hi])
        ts = np.asarray(indexes.column(part, "ts")[lo:hi])
        mine = np.flatnonzero(ts <= t)
        if not len(mine):
            continue
        f, ts = f[mine], ts[mine]
        # Rows are ordered by (field, ts): the last row of each field at or before t (of
        # each part: with several, every row at that last ts, ordered below).
        ends = np.append(f[1:] != f[:-1], True)
        if len(indexes.parts(idx)) == 1:
            keep = mine[ends]
        else:
            grp = np.cumsum(np.concatenate([[0], ends[:-1]]))
            keep = mine[ts == ts[np.flatnonzero(ends)][grp]]
        pieces.append(_take(part, lo + keep))
    if not pieces:
        return _rows(idx, 0, 0)
    if len(indexes.parts(idx)) == 1:  # (with several parts even one piece holds every row tied at a last ts)
        return pieces[0]
    rows = pa.concat_tables(pieces)
    rows = rows.take(
        pa.array(
            np.lexsort([arrays.as_numpy(rows.column(c)).astype(np.int64) for c in ("seq", "producer", "ts", "field")])
        )
    )
    f = arrays.as_numpy(rows.column("field"))
    return rows.take(pa.array(np.flatnonzero(np.append(f[1:] != f[:-1], True))))


def field_history(
    store: Store,
    trace: str,
    obj: int,
    field: int,
    config: ObjectConfig | None = None,
    *,
    start: int | None = None,
    end: int | None = None,
) -> pa.Table:
    """Every write of field `field` of object `obj`, in time order, ts in [start, end)."""
    idx = objects_index(store, trace, config)
    return _key_rows(idx, [int(obj), int(field)], start, end)


# -- as analyses ---------------------------------------------------------------------------------

OBJECT_PARAMS = tuple(
    Param(n, "str", "", d, group="object writes (default: the format's profile)")
    for n, d in (
        ("type", "event type writing fields"),
        ("object_col", "its object column"),
        ("field_col", "its field column"),
        ("value_col", "its value column"),
    )
)


def _config(store, trace, type=None, object_col=None, field_col=None, value_col=None):  # noqa: A002
    return object_config(store, trace, type, object_col, field_col, value_col)


def _state(store, trace, window, *, object, at, **cols) -> Rows:  # noqa: A002
    import time

    cfg = _config(store, trace, **cols)
    t0 = time.perf_counter()
    t = object_state(store, trace, object, at, cfg)
    secs = time.perf_counter() - t0
    return Rows(
        t, f"object {object} at {at}: {t.num_rows} fields ({secs * 1000:.1f} ms)", params={"config": cfg.to_json()}
    )


STATE = Analysis(
    "state",
    "every field of an object at time t",
    _state,
    params=(
        Param("object", "int", "id", "the object", required=True, positional=True),
        Param("at", "time", "ns", "time t (ns or with a unit)", required=True),
    )
    + OBJECT_PARAMS,
    columns=STATE_COLUMNS,
    applies_to=("objects",),
    uses=("objects",),
)


def _history(store, trace, window, *, object, field, **cols) -> Rows:  # noqa: A002
    cfg = _config(store, trace, **cols)
    t = field_history(store, trace, object, field, cfg, start=window.start, end=window.end)
    return Rows(t, f"object {object} field {field}: {t.num_rows} writes", params={"config": cfg.to_json()})


HISTORY = Analysis(
    "history",
    "every value one field of an object took",
    _history,
    params=(
        Param("object", "int", "id", "the object", required=True, positional=True),
        Param("field", "int", "id", "the field", required=True, positional=True),
        Param("start", "time", "ns", "writes in [start, end): from", window="start"),
        Param("end", "time", "ns", "... to", window="end"),
    )
    + OBJECT_PARAMS,
    columns=STATE_COLUMNS,
    applies_to=("objects",),
    uses=("objects",),
    limit=100,
)
