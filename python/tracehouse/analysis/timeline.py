"""Keyed indexes: every row of one event type ordered by a key, then time; and the lookups
that step through them (the debugger's questions, `record/debug.py`).

Owns `keyed(store, trace, type, keys)`: the rows of `type`, all their columns, sorted by the
`keys` columns then ts, packed and saved in parts like the objects and locals indexes
(`indexes.get_parts`: memory-mapped, a new part per new segment set). One such index answers
a family of questions by binary search, whatever the trace's size:

  line_step     by (producer)                   next / previous line of a thread (a step)
  line_step     by (behavior_id, line)          next / previous time a line runs (a breakpoint)
  behavior_enter by (behavior_id)               next / previous call of a function
  var_write     by (producer, parent_seq, var_id)  a frame's locals at t, a local's history and origin
  field_write   by (target, field_id)           an object's state at t, a field's history and origin
  <any type>    by (producer)                   next / previous event of a thread (TOD traces)

Lookups (`first_after`, `last_before`, `rows`, `distinct`, `latest`) ask every part of an
index and merge; each is one or two binary searches per part (O(log n)): the 100M-event
figures are in `bench record`'s debug section.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from .. import _core, arrays
from ..store import scan
from . import indexes

if TYPE_CHECKING:
    from ..store import Store


def keyed(store: Store, trace: str, event_type: str, keys: list[str], *, save: bool | None = None):
    """Rows of `event_type` (every column) ordered by `keys`, then ts (in parts)."""
    keys = list(keys)

    def build(cut) -> pa.Table:
        et = cut.event_type(event_type)
        cols = list(dict.fromkeys(["ts", "producer", "seq", *(c.name for c in et.columns)]))
        t = scan.read(cut, event_type, cols)
        if not keys:
            return t
        order = _core.stable_order([arrays.int64_array(t.column(k).fill_null(-1)) for k in keys])
        return t.take(order)

    return indexes.get_parts(
        store,
        trace,
        f"keyed-{event_type}-{'-'.join(keys) or 'ts'}",
        {"type": event_type, "keys": keys},
        [event_type],
        build,
        save=save,
    )


def _range(part, keys: list[str], values: list[int]) -> tuple[int, int]:
    return indexes.key_range([indexes.column(part, k) for k in keys[: len(values)]], [int(v) for v in values])


def locate(
    idx, keys: list[str], values: list[int], t: int, forward: bool, *, inclusive: bool = False
) -> tuple[int, object, int] | None:
    """(ts, part, row) of the first row with `keys` == `values` after t (forward) or the last
    before it, or None; nothing but ts is read (`row_at` reads the row)."""
    best = None
    for part in indexes.parts(idx):
        lo, hi = _range(part, keys, values)
        if lo >= hi:
            continue
        ts = indexes.column(part, "ts")
        if forward:
            i = lo + indexes.search(ts[lo:hi], int(t), "left" if inclusive else "right")
            if i < hi and (best is None or int(ts[i]) < best[0]):
                best = (int(ts[i]), part, i)
        else:
            i = lo + indexes.search(ts[lo:hi], int(t), "right" if inclusive else "left") - 1
            if i >= lo and (best is None or int(ts[i]) > best[0]):
                best = (int(ts[i]), part, i)
    return best


def row_at(found: tuple[int, object, int] | None) -> dict | None:
    """The row `locate` found, every column."""
    return None if found is None else found[1].slice(found[2], 1).to_pylist()[0]


def first_after(idx, keys: list[str], values: list[int], t: int, *, inclusive: bool = False) -> dict | None:
    """The first row with `keys` == `values` and ts > t (>= t when inclusive), or None."""
    return row_at(locate(idx, keys, values, t, True, inclusive=inclusive))


def last_before(idx, keys: list[str], values: list[int], t: int, *, inclusive: bool = False) -> dict | None:
    """The last row with `keys` == `values` and ts < t (<= t when inclusive), or None."""
    return row_at(locate(idx, keys, values, t, False, inclusive=inclusive))


def rows(
    idx, keys: list[str], values: list[int], start: int | None = None, end: int | None = None, limit: int | None = None
) -> pa.Table:
    """Rows with `keys` == `values` and ts in [start, end), in ts order (the first `limit`)."""
    pieces = []
    for part in indexes.parts(idx):
        lo, hi = _range(part, keys, values)
        ts = indexes.column(part, "ts")
        if start is not None:
            lo += indexes.search(ts[lo:hi], int(start), "left")
        if end is not None:
            hi = lo + indexes.search(ts[lo:hi], int(end), "left")
        if limit is not None:
            hi = min(hi, lo + int(limit))
        pieces.append(part.slice(lo, max(0, hi - lo)))
    t = pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces)
    if len(pieces) > 1:
        t = t.take(pa.array(np.argsort(arrays.as_numpy(t.column("ts")), kind="stable")))
        if limit is not None:
            t = t.slice(0, int(limit))
    return t


def count(idx, keys: list[str], values: list[int]) -> int:
    """Rows with `keys` == `values`."""
    n = 0
    for part in indexes.parts(idx):
        lo, hi = _range(part, keys, values)
        n += hi - lo
    return n


def distinct(idx, keys: list[str], values: list[int], column: str, limit: int = 1000) -> list[int]:
    """The distinct values of the key `column` following `values` (its rows are sorted by
    it), found by jumping from one value's range to the next: O(distinct x log n)."""
    out: set[int] = set()
    for part in indexes.parts(idx):
        lo, hi = _range(part, keys, values)
        col = indexes.column(part, column)
        while lo < hi and len(out) < limit:
            v = int(col[lo])
            out.add(v)
            lo += indexes.search(col[lo:hi], v, "right")
    return sorted(out)[:limit]


def latest(idx, keys: list[str], values: list[int], column: str, t: int, limit: int = 1000) -> list[dict]:
    """For each distinct value of key `column` under `values`: its last row with ts <= t
    (the state at t: a frame's locals, an object's fields), ordered by that column."""
    out = []
    for v in distinct(idx, keys, values, column, limit):
        row = last_before(idx, [*keys[: len(values)], column], [*values, v], t, inclusive=True)
        if row is not None:
            out.append(row)
    return out
