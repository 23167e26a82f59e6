"""Reading a trace's events for the analyses: straight from its Parquet segments.

Owns the analyses' data access. The analyses need whole columns fast (pairing 34M
begin/end rows) or a few row groups (cursors, `cursors.py`), so `read` scans the
registered segments of one event type directly (column projection, row-group pruning on
the `ts` statistics) with a DuckDB connection of its own: DuckDB's Parquet reader
decodes a few columns 3-10x faster than `pyarrow.parquet.read_table` here (measured
on 1.7M TOD enters x 4 columns: 50-70 ms against 130-690 ms, pyarrow's column threads
suffering most from a loaded machine). The writer's unflushed tail is included when
this process holds the trace's writer, so an analysis sees the same rows as `store.sql`.

`parts` cuts the same rows into row groups, each read on demand (pyarrow, one thread,
no DuckDB): span pairing reads them on one thread while the Rust pass consumes them on
another (a row group of 4 columns decodes at ~80M rows/s on one core here).

Row order: `read(..., order=True)` returns rows ordered by (ts, producer, seq), the
total order every analysis uses; segments of one type rarely overlap in time, so this
is usually a check, not a sort.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import BadInput
from ..schema import EventType

if TYPE_CHECKING:
    from .store import Store


def event_type(store: "Store", trace: str, name: str) -> EventType:
    types = store.event_types(trace)
    if name not in types:
        raise BadInput(f"trace {trace!r} has no event type {name!r}", expected=", ".join(types) or "an event type")
    return types[name]


def segments(store: "Store", trace: str, type_name: str) -> list:
    """Registered segments of one event type, by ts_min."""
    return store.catalog.segments(store.trace(trace).id, type_name)


def tail(store: "Store", trace: str, type_name: str) -> pa.Table | None:
    """Rows of the type appended in this process but not yet in a registered segment."""
    info = store.trace(trace)
    w = store._writers.get(info.id)
    if w is None:
        return None
    with w.lock:
        batches = list(w.tail().get(type_name, []))
    if not batches:
        return None
    return pa.Table.from_batches(batches)


def signature(store: "Store", trace: str) -> str:
    """Changes whenever the trace's events do (derived data built on it is then stale)."""
    info = store.trace(trace)
    tail_rows = 0
    w = store._writers.get(info.id)
    if w is not None:
        with w.lock:
            tail_rows = sum(b.num_rows for bs in w.tail().values() for b in bs)
    return f"{info.id}:{info.event_count}:{info.ts_min}:{info.ts_max}:{tail_rows}"


_DUCK = threading.local()


def _duck() -> duckdb.DuckDBPyConnection:
    """This thread's DuckDB connection for scanning segments (no views, no store state)."""
    con = getattr(_DUCK, "con", None)
    if con is None:
        con = _DUCK.con = duckdb.connect(":memory:")
        # Segments are immutable: their Parquet footers can be cached across queries (a
        # cursor page asks one segment per event type; re-reading its footer each time
        # cost more than the rows it decoded).
        con.execute("SET parquet_metadata_cache = true")
    return con


def _scan(paths: list[str], columns: list[str], start: int | None, end: int | None) -> pa.Table:
    """`columns` of Parquet files of one type (every file has them), in file order."""
    from .query import qident, qstr

    where = []
    if start is not None:
        where.append(f"ts >= {int(start)}")
    if end is not None:
        where.append(f"ts < {int(end)}")
    sql = (f"SELECT {', '.join(qident(c) for c in columns)} FROM read_parquet([{', '.join(qstr(p) for p in paths)}])"
           + (" WHERE " + " AND ".join(where) if where else ""))
    rel = _duck().sql(sql)
    f = getattr(rel, "to_arrow_table", None) or rel.arrow
    return f()


def _conform(t: pa.Table, columns: list[str], et: EventType) -> pa.Table:
    """`t` with exactly `columns` (a column a segment predates is all null)."""
    types = {c.name: c.arrow_type for c in et.columns}
    arrays = []
    for c in columns:
        if c in t.column_names:
            a = t.column(c)
            if a.type != types[c]:
                a = a.cast(types[c])
            arrays.append(a)
        else:
            arrays.append(pa.nulls(t.num_rows, types[c]))
    return pa.table(arrays, names=columns)


def read(store: "Store", trace: str, type_name: str, columns: Iterable[str] | None = None, *,
         start: int | None = None, end: int | None = None, order: bool = True) -> pa.Table:
    """Rows of one event type with `columns` (default all), ts in [start, end).

    order=True: rows ordered by (ts, producer, seq); False: in storage order.
    """
    et = event_type(store, trace, type_name)
    names = [c.name for c in et.columns]
    cols = list(columns) if columns is not None else names
    for c in cols:
        if c not in names:
            raise BadInput(f"event type {type_name!r} has no column {c!r}", expected=", ".join(names))
    need = list(dict.fromkeys(cols + (["ts", "producer", "seq"] if order else [])))
    segs = [s for s in segments(store, trace, type_name)
            if (start is None or s.ts_max is None or s.ts_max >= start) and (end is None or s.ts_min is None or s.ts_min < end)]
    parts: list[pa.Table] = []
    filters = start is not None or end is not None
    # Runs of consecutive segments holding every needed column are scanned together (one
    # multi-file scan decodes on both cores); a segment written before a column existed
    # is read alone and the column filled with nulls. Storage order is kept.
    run: list[str] = []
    for s in segs + [None]:
        if s is not None and all(c in s.columns for c in need):
            run.append(str(store.path / s.path))
            continue
        if run:
            parts.append(_scan(run, need, start, end))
            run = []
        if s is not None:
            present = [c for c in need if c in s.columns]
            parts.append(_conform(_scan([str(store.path / s.path)], present, start, end), need, et))
    t = tail(store, trace, type_name)
    if t is not None:
        t = _conform(t, need, et)
        if filters:
            mask = None
            if start is not None:
                mask = pc.greater_equal(t.column("ts"), int(start))
            if end is not None:
                m2 = pc.less(t.column("ts"), int(end))
                mask = m2 if mask is None else pc.and_(mask, m2)
            t = t.filter(mask)
        parts.append(t)
    if not parts:
        table = pa.table([pa.array([], f.type) for f in (et.arrow_schema().field(c) for c in need)], names=need)
    else:
        table = pa.concat_tables([_conform(p, need, et) for p in parts]) if len(parts) > 1 else _conform(parts[0], need, et)
    if order:
        table = sort_rows(table)
    return table.select(cols)


def last_event_ts(store: "Store", trace: str, producers: np.ndarray, after: int) -> np.ndarray:
    """For each of `producers` (int64, ascending), the time of its last event of any type
    at or after `after` (int64 min when it has none): only row groups reaching `after`
    are read."""
    best = np.full(len(producers), np.iinfo(np.int64).min, dtype=np.int64)
    if not len(producers):
        return best
    want = pa.array(producers)
    for name in store.event_types(trace):
        t = read(store, trace, name, ["ts", "producer"], start=after, order=False)
        if not t.num_rows:
            continue
        t = t.filter(pc.is_in(t.column("producer").cast(pa.int64()), value_set=want))
        if not t.num_rows:
            continue
        g = t.group_by("producer").aggregate([("ts", "max")])
        p = as_numpy(g.column("producer")).astype(np.int64)
        at = np.searchsorted(producers, p)
        np.maximum.at(best, at, as_numpy(g.column("ts_max")).astype(np.int64))
    return best


@dataclass
class Part:
    """A piece of one event type's rows: a row group of a segment, or the unflushed tail."""

    ts_min: int | None
    rows: int
    read: Callable[[], pa.Table]


def parts(store: "Store", trace: str, type_name: str, columns: list[str]) -> list[Part]:
    """The rows of one event type with `columns` as row-group parts, in storage order:
    concatenated, they are `read(store, trace, type_name, columns, order=False)`. Each
    `read()` decodes one row group on the calling thread (a segment that predates a column
    gives nulls for it)."""
    et = event_type(store, trace, type_name)
    names = [c.name for c in et.columns]
    for c in columns:
        if c not in names:
            raise BadInput(f"event type {type_name!r} has no column {c!r}", expected=", ".join(names))
    out: list[Part] = []
    for s in segments(store, trace, type_name):
        f = pq.ParquetFile(store.path / s.path)
        md = f.metadata
        present = [c for c in columns if c in s.columns]
        ts_at = md.schema.to_arrow_schema().get_field_index("ts")
        for i in range(md.num_row_groups):
            rg = md.row_group(i)
            st = rg.column(ts_at).statistics if ts_at >= 0 else None
            lo = st.min if st is not None and st.has_min_max else s.ts_min
            out.append(Part(lo, rg.num_rows, lambda f=f, i=i, present=present:
                            _conform(f.read_row_group(i, columns=present, use_threads=False), columns, et)))
    t = tail(store, trace, type_name)
    if t is not None and t.num_rows:
        t = _conform(t, columns, et)
        out.append(Part(pc.min(t.column("ts")).as_py(), t.num_rows, lambda t=t: t))
    return out


def empty(store: "Store", trace: str, type_name: str, columns: list[str]) -> pa.Table:
    """No rows, with `columns` of the type."""
    et = event_type(store, trace, type_name)
    return pa.table([pa.array([], et.arrow_schema().field(c).type) for c in columns], names=columns)


def as_numpy(col) -> np.ndarray:
    """A non-null int column as one numpy array (zero-copy when it is one chunk)."""
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 1:
            return col.chunk(0).to_numpy(zero_copy_only=False)
        if col.num_chunks == 0:
            return np.array([], dtype=col.type.to_pandas_dtype())
        return np.concatenate([c.to_numpy(zero_copy_only=False) for c in col.chunks])
    return col.to_numpy(zero_copy_only=False)


def is_ordered(ts: np.ndarray, producer: np.ndarray, seq: np.ndarray) -> bool:
    """True when rows are ordered by (ts, producer, seq)."""
    if len(ts) < 2:
        return True
    if (ts[1:] > ts[:-1]).all():  # the usual case, one pass and no temporaries beyond a mask
        return True
    dt = np.diff(ts)
    if (dt < 0).any():
        return False
    tie = dt == 0
    dp = np.diff(producer.astype(np.int64))
    if (dp[tie] < 0).any():
        return False
    same = tie & (dp == 0)
    return bool((np.diff(seq)[same] > 0).all())


def ordering(table: pa.Table) -> pa.Array | None:
    """The permutation ordering `table` by (ts, producer, seq), None when already ordered."""
    from .. import _core

    ts = as_numpy(table.column("ts"))
    if len(ts) < 2 or (ts[1:] > ts[:-1]).all():
        return None
    producer = as_numpy(table.column("producer"))
    seq = as_numpy(table.column("seq"))
    if is_ordered(ts, producer, seq):
        return None
    return _core.stable_order([pa.array(ts), pa.array(producer.astype(np.int64)), pa.array(seq)])


def sort_rows(table: pa.Table) -> pa.Table:
    """`table` ordered by (ts, producer, seq): a check when already so, else a stable sort."""
    order = ordering(table)
    return table if order is None else table.take(order)


def int64_array(col) -> pa.Array:
    """A non-null column as one int64 pyarrow array (what `_core` takes)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if col.type != pa.int64():
        col = col.cast(pa.int64())
    return col


def int32_array(col) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if col.type != pa.int32():
        col = col.cast(pa.int32())
    return col
