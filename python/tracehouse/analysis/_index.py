"""Derived indexes: sorted copies of a trace's columns that turn questions into lookups.

Owns building, saving, finding and memory-mapping the derived data the point-in-time
analyses use. Each index is the rows of one question's event type re-ordered by that
question's key, so that the answer is a contiguous range found by binary search:

  objects   field writes by (object, field, ts)      -> state of an object at t, field history
  locals    variable writes by (thread, frame, var, ts) -> local variables of a frame at t
  spans     spans by (thread, depth, ts)             -> stack at t, children of a call
  density   ts, seq (dur) by (event type, producer, ts) -> events per time bin, exact;
                                                  a cursor's next page over a few threads

Decisions:
- Stored as result tables (kind "table", tool `tracehouse.index`, linked to the trace,
  params saying what was indexed and the trace's `signature` at build time) in
  uncompressed Arrow IPC, one record batch per file, memory-mapped on use: a lookup is
  a few binary searches over mmapped columns and touches a few pages, however big the
  trace. Parquet would cost a row-group decode (~1-20 ms) per lookup.
- Disk for speed: about 8 bytes per indexed value (int columns that fit are narrowed
  to int32). On the 100M-event TOD trace that is ~3 GB next to the 1.4 GB trace.
- An index whose trace changed since (signature differs) is stale: it is rebuilt
  and the stale result deleted. A read-only store (or one another process is writing)
  keeps a built index in this process's memory instead.
- Builds are one stable radix sort (`_core.stable_order`) of rows that arrive in ts
  order, so ts order inside each key comes free.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Callable

import numpy as np
import pyarrow as pa

from .. import arrays
from ..errors import ReadOnly, StoreLocked

if TYPE_CHECKING:
    from ..store import Store

TOOL = "tracehouse.index"

# (store path, result id, result file) -> mmapped table; (store path, trace id, name, params) -> in-memory table
_MAPPED: dict[tuple, pa.Table] = {}
_MEMORY: dict[tuple, pa.Table] = {}
_LOCK = threading.Lock()


def narrow(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    """An int64 column as int32 when every value fits (halves the index's bytes)."""
    a = arrays.as_numpy(col)
    if a.dtype == np.int64 and len(a) and a.min() >= -(2**31) and a.max() < 2**31:
        return pa.array(a.astype(np.int32))
    return pa.array(a)


def _params_key(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


def find(store: "Store", trace: str, name: str, params: dict) -> dict | None:
    """The saved index result `name` of `trace` built with `params`, fresh or not."""
    want = _params_key(params)
    for r in store.results(trace=trace, tool=TOOL, name=name):
        if _params_key(r["params"].get("spec", {})) == want:
            return r
    return None


def fresh(store: "Store", trace: str, name: str, params: dict) -> pa.Table | None:
    """The index `name` of `trace` for `params` when it is built and fresh (mapped from the
    store or kept in this process's memory), else None: nothing is built."""
    sig = store.stamp(trace)
    r = find(store, trace, name, params)
    if r is not None and r["params"].get("signature") == sig and r["path"]:
        # Keyed by the file too: stores made before result ids were AUTOINCREMENT reused them.
        key = (str(store.path), r["id"], r["path"])
        with _LOCK:
            t = _MAPPED.get(key)
        if t is None:
            t = store.result_table(r["id"])
            with _LOCK:
                _MAPPED[key] = t
        return t
    with _LOCK:
        return _MEMORY.get((str(store.path), store.trace(trace).id, name, _params_key(params), sig))


def get(store: "Store", trace: str, name: str, params: dict, build: Callable[[], pa.Table], *,
        save: bool | None = None) -> pa.Table:
    """The index `name` of `trace` for `params`: mapped from the store when fresh, else built.

    save: None = save when the store can be written (else keep it in memory), True = must save,
    False = keep in memory only.
    """
    t = fresh(store, trace, name, params)
    if t is not None:
        return t
    sig = store.stamp(trace)
    r = find(store, trace, name, params)
    mkey = (str(store.path), store.trace(trace).id, name, _params_key(params), sig)
    t = build().combine_chunks()
    if save is not False and not store.readonly:
        try:
            rid = store.save_result("table", name, TOOL, [trace], params={"spec": params, "signature": sig},
                                    table=t, table_format="arrow")
            if r is not None:
                store.delete_result(r["id"])
            t = store.result_table(rid)
            with _LOCK:
                _MAPPED[(str(store.path), rid, store.result(rid)["path"])] = t
            return t
        except (StoreLocked, ReadOnly):
            if save:
                raise
    elif save:
        raise ReadOnly(f"store {store.path} was opened read-only: cannot save the {name} index")
    with _LOCK:
        _MEMORY[mkey] = t
    return t


def forget(store: "Store") -> None:
    """Drop this process's mapped and in-memory indexes of `store` (before deleting files)."""
    p = str(store.path)
    with _LOCK:
        for d in (_MAPPED, _MEMORY):
            for k in [k for k in d if k[0] == p]:
                del d[k]


def column(t: pa.Table, name: str) -> np.ndarray:
    """A column of a mapped index as a numpy view (no copy)."""
    return arrays.as_numpy(t.column(name))


def search(a: np.ndarray, v: int, side: str = "left") -> int:
    """np.searchsorted for one int needle, in the array's own dtype: a needle numpy would
    promote (an int64 into an int32 column) makes it convert the whole column first."""
    info = np.iinfo(a.dtype)
    if v > info.max:
        return len(a)
    if v < info.min:
        return 0
    return int(np.searchsorted(a, a.dtype.type(v), side=side))


def key_range(cols: list[np.ndarray], values: list[int], lo: int = 0, hi: int | None = None) -> tuple[int, int]:
    """Rows [lo, hi) whose leading key columns equal `values`, in rows sorted by those columns."""
    hi = len(cols[0]) if hi is None else hi
    for c, v in zip(cols, values):
        seg = c[lo:hi]
        a = search(seg, v, "left")
        b = search(seg, v, "right")
        lo, hi = lo + a, lo + b
        if lo >= hi:
            return lo, lo
    return lo, hi
