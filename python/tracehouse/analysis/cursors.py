"""Cursors: the events matching a filter, paged forward or backward from any time t.

Owns TOD's cursor API (seed 001) on the store's segments. A filter is event types,
producers, parameter predicates (`column op value`) and a time range; a cursor stands
between two events of the total order (ts, producer, seq) and `next(n)` / `prev(n)`
return the n matching events after / before it, moving it.

How it avoids scanning from the start: segments are sorted by ts and every Parquet
row group carries min/max statistics of ts, so the row groups that can hold the next
events after t are known without reading anything. They are visited in ts order (by
their min for forward, max for backward), reading only the filter's columns first; the
walk stops as soon as n matches are in hand and the next row group starts after the
n-th of them. Only the row groups holding returned events are then read for the output
columns. A page costs one or two row-group reads (~5-20 ms at 512K rows), wherever t
is in a 100M-event trace.

Output columns: for one event type every column of that type, for several the common
columns (ts, producer, seq, dur); then `type`.
"""

from __future__ import annotations

import operator
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import BadInput
from ..schema import EventType
from . import _source

if TYPE_CHECKING:
    from ..store import Store

OPS = {"=": pc.equal, "==": pc.equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal,
       ">": pc.greater, ">=": pc.greater_equal}
_PYOPS = {"=": operator.eq, "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
          ">": operator.gt, ">=": operator.ge}
COMMON = ("ts", "producer", "seq", "dur")
LOW = (-(2**63), -(2**31), -(2**63))  # a position before every event at the same ts
HIGH = (2**63 - 1, 2**31 - 1, 2**63 - 1)


@dataclass(frozen=True)
class Filter:
    """Which events a cursor returns. where: (column, op, value), op in = != < <= > >=;
    a type without a predicate's column has no matching events. start/end: ts in [start, end)."""

    types: tuple[str, ...] | None = None
    producers: tuple[int, ...] | None = None
    where: tuple[tuple[str, str, Any], ...] = ()
    start: int | None = None
    end: int | None = None

    def to_json(self) -> dict:
        return {"types": list(self.types) if self.types else None,
                "producers": list(self.producers) if self.producers else None,
                "where": [list(w) for w in self.where], "start": self.start, "end": self.end}

    @classmethod
    def from_json(cls, d: dict) -> "Filter":
        return cls(tuple(d["types"]) if d.get("types") else None,
                   tuple(d["producers"]) if d.get("producers") else None,
                   tuple(tuple(w) for w in d.get("where") or ()), d.get("start"), d.get("end"))


def parse_where(text: str) -> tuple[str, str, str]:
    """'target = 42' -> ('target', '=', '42') (the value is typed later, per column)."""
    for op in ("<=", ">=", "!=", "==", "=", "<", ">"):
        if op in text:
            col, val = text.split(op, 1)
            col, val = col.strip(), val.strip()
            if col and val:
                return col, op, val
    raise BadInput(f"predicate {text!r}", expected="COLUMN OP VALUE with OP one of = != < <= > >=")


def _typed(value: Any, t: pa.DataType, col: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        if pa.types.is_integer(t):
            return int(value)
        if pa.types.is_floating(t):
            return float(value)
        if pa.types.is_boolean(t):
            if value.lower() in ("true", "1"):
                return True
            if value.lower() in ("false", "0"):
                return False
            raise ValueError(value)
    except ValueError:
        raise BadInput(f"predicate on {col!r}: {value!r} is not a {t}", column=col) from None
    return value


@dataclass
class _Unit:
    """A piece of one event type's rows: a row group of a segment, or the unflushed tail."""

    type: str
    ts_min: int
    ts_max: int
    path: str | None = None
    row_group: int = -1
    table: pa.Table | None = None  # the tail

    def read(self, columns: list[str], et: EventType) -> pa.Table:
        if self.table is not None:
            return _source._conform(self.table, columns, et)
        pf = _parquet(self.path)
        present = [c for c in columns if c in pf.schema_arrow.names]
        return _source._conform(pf.read_row_group(self.row_group, columns=present), columns, et)


_META: dict[str, pq.FileMetaData] = {}
_META_LOCK = threading.Lock()


def _parquet(path: str) -> pq.ParquetFile:
    """A ParquetFile opened with its footer parsed once per process (segments are immutable)."""
    with _META_LOCK:
        md = _META.get(path)
    pf = pq.ParquetFile(path, metadata=md)
    if md is None:
        with _META_LOCK:
            if len(_META) > 4096:
                _META.clear()
            _META[path] = pf.metadata
    return pf


def _units(store: "Store", trace: str, type_name: str) -> list[_Unit]:
    out = []
    for s in _source.segments(store, trace, type_name):
        path = str(store.path / s.path)
        md = _parquet(path).metadata
        ts_col = md.schema.names.index("ts")
        for i in range(md.num_row_groups):
            rg = md.row_group(i)
            st = rg.column(ts_col).statistics
            if rg.num_rows == 0:
                continue
            if st is not None and st.has_min_max:
                out.append(_Unit(type_name, int(st.min), int(st.max), path, i))
            else:
                out.append(_Unit(type_name, s.ts_min, s.ts_max, path, i))
    tail = _source.tail(store, trace, type_name)
    if tail is not None and tail.num_rows:
        ts = tail.column("ts")
        out.append(_Unit(type_name, pc.min(ts).as_py(), pc.max(ts).as_py(), table=tail))
    return out


@dataclass
class Cursor:
    """Iterates the events of `trace` matching `filter` from a position (see the module doc).

    The cursor stands in a gap of the total order (ts, producer, seq): just after the
    event `position` when `after` is true, just before it otherwise. `next(n)` returns
    the n matching events after the gap and moves the gap past them; `prev(n)` the n
    before it, moving the gap before them (so `prev` after `next` returns the same
    events again, like a list iterator). `Cursor(..., at=t)` stands just before the
    first event at time t.
    """

    store: "Store"
    trace: str
    filter: Filter = field(default_factory=Filter)
    at: int | None = None
    columns: list[str] | None = None
    position: tuple[int, int, int] = LOW
    after: bool = False

    def __post_init__(self) -> None:
        types = self.store.event_types(self.trace)
        names = list(self.filter.types) if self.filter.types else list(types)
        for n in names:
            if n not in types:
                raise BadInput(f"trace {self.trace!r} has no event type {n!r}", expected=", ".join(types))
        # Types that can match: every predicate's column exists in them.
        self._types: dict[str, EventType] = {}
        for n in names:
            cols = {c.name: c for c in types[n].columns}
            if all(w[0] in cols for w in self.filter.where):
                self._types[n] = types[n]
        if self.filter.where and not self._types:
            raise BadInput("no event type has every predicate's column",
                           expected=", ".join(sorted({w[0] for w in self.filter.where})) + " in one type")
        self._where = []
        for col, op, val in self.filter.where:
            if op not in OPS:
                raise BadInput(f"predicate operator {op!r}", expected=" ".join(OPS))
            self._where.append((col, op, val))
        single = len(names) == 1
        if self.columns is None:
            self.columns = [c.name for c in types[names[0]].columns] if single else list(COMMON)
        self._units: dict[str, list[_Unit]] | None = None
        if self.at is not None:
            self.seek(self.at)

    def seek(self, t: int) -> "Cursor":
        """Stand just before the first event at time t."""
        self.position, self.after = (int(t), LOW[1], LOW[2]), False
        return self

    def seek_end(self) -> "Cursor":
        """Stand after the last event."""
        self.position, self.after = HIGH, True
        return self

    def _all_units(self) -> dict[str, list[_Unit]]:
        if self._units is None:
            self._units = {n: _units(self.store, self.trace, n) for n in self._types}
        return self._units

    def _mask(self, t: pa.Table, et: EventType, forward: bool, pos: tuple[int, int, int]) -> np.ndarray:
        ts = _source.as_numpy(t.column("ts"))
        pr = _source.as_numpy(t.column("producer")).astype(np.int64)
        sq = _source.as_numpy(t.column("seq"))
        p0, p1, p2 = pos
        # Past the gap: forward, events > position (after) or >= it (before); backward,
        # events <= position (after) or < it (before).
        if forward:
            last = (sq > p2) if self.after else (sq >= p2)
        else:
            last = (sq <= p2) if self.after else (sq < p2)
        if forward:
            m = (ts > p0) | ((ts == p0) & ((pr > p1) | ((pr == p1) & last)))
        else:
            m = (ts < p0) | ((ts == p0) & ((pr < p1) | ((pr == p1) & last)))
        f = self.filter
        if f.start is not None:
            m &= ts >= f.start
        if f.end is not None:
            m &= ts < f.end
        if f.producers is not None:
            m &= np.isin(pr, np.asarray(f.producers, dtype=np.int64))
        types = {c.name: c.arrow_type for c in et.columns}
        for col, op, val in self._where:
            r = OPS[op](t.column(col), pa.scalar(_typed(val, types[col], col), types[col]))
            m &= np.asarray(pc.fill_null(r, False).to_numpy(zero_copy_only=False), dtype=bool)
        return m

    def _page(self, n: int, forward: bool) -> pa.Table:
        f = self.filter
        pos = self.position
        units = []
        for name, us in self._all_units().items():
            for u in us:
                if f.start is not None and u.ts_max < f.start or f.end is not None and u.ts_min >= f.end:
                    continue
                if forward and u.ts_max < pos[0] or not forward and u.ts_min > pos[0]:
                    continue
                units.append(u)
        units.sort(key=(lambda u: u.ts_min) if forward else (lambda u: -u.ts_max))
        need = ["ts", "producer", "seq"] + [w[0] for w in self._where]
        need = list(dict.fromkeys(need))
        found: list[tuple[_Unit, np.ndarray, pa.Table]] = []
        keys: list[np.ndarray] = []
        count = 0
        for u in units:
            if count >= n:
                # The n-th best match so far: a unit starting beyond it cannot beat it.
                kth = _kth(keys, n, forward)
                if forward and u.ts_min > kth or not forward and u.ts_max < kth:
                    break
            et = self._types[u.type]
            t = u.read(need, et)
            lo, hi = 0, t.num_rows
            if u.table is None:
                # Segment rows are in ts order: only those on the right side of the position
                # (and inside the filter's time range) need testing.
                ts_all = _source.as_numpy(t.column("ts"))
                if forward:
                    lo = int(np.searchsorted(ts_all, max(pos[0], f.start if f.start is not None else pos[0]), "left"))
                else:
                    hi = int(np.searchsorted(ts_all, min(pos[0], f.end if f.end is not None else pos[0]), "right"))
            m = self._mask(t.slice(lo, hi - lo), et, forward, pos)
            rows = lo + np.nonzero(m)[0]
            if len(rows) == 0:
                continue
            if len(rows) > n:
                # Rows of a unit are in ts order: only its first (last) n matches, and any
                # ties with the n-th one's ts, can be among the page's n.
                ts = _source.as_numpy(t.column("ts"))[rows]
                if forward:
                    rows = rows[ts <= ts[n - 1]] if ts[n - 1] == ts[n] else rows[:n]
                else:
                    rows = rows[ts >= ts[-n]] if ts[-n] == ts[-n - 1] else rows[-n:]
            found.append((u, rows, t))
            keys.append(_source.as_numpy(t.column("ts"))[rows])
            count += len(rows)
        if not found:
            return self._empty()
        # Order every candidate by (ts, producer, seq) and keep the first (last) n.
        cand = pa.table({
            "ts": pa.array(np.concatenate([_source.as_numpy(t.column("ts"))[r] for _, r, t in found])),
            "producer": pa.array(np.concatenate([_source.as_numpy(t.column("producer"))[r].astype(np.int64) for _, r, t in found])),
            "seq": pa.array(np.concatenate([_source.as_numpy(t.column("seq"))[r] for _, r, t in found])),
            "unit": pa.array(np.concatenate([np.full(len(r), i, np.int64) for i, (_, r, _t) in enumerate(found)])),
            "row": pa.array(np.concatenate([r.astype(np.int64) for _, r, _t in found])),
        })
        order = "ascending" if forward else "descending"
        cand = cand.take(pc.sort_indices(cand, [("ts", order), ("producer", order), ("seq", order)]))
        cand = cand.slice(0, n)
        if not forward:
            cand = cand.take(pa.array(np.arange(cand.num_rows - 1, -1, -1)))
        unit_of = cand.column("unit").to_numpy()
        row_of = cand.column("row").to_numpy()
        pieces = []
        for i in np.unique(unit_of):
            u, _, t = found[i]
            et = self._types[u.type]
            own = {x.name for x in et.columns}
            sel = row_of[unit_of == i]
            full = t
            if any(c in own and c not in t.column_names for c in self.columns):
                full = u.read([c for c in self.columns if c in own], et)
            part = pa.table({c: _out_col(full, c, et, sel) for c in self.columns})
            part = part.append_column("type", pa.array([u.type] * len(sel), pa.string()))
            part = part.append_column("_k", pa.array(np.nonzero(unit_of == i)[0]))
            pieces.append(part)
        out = pa.concat_tables(pieces, promote_options="permissive")
        out = out.take(pc.sort_indices(out.column("_k"))).drop_columns(["_k"])
        edge = out.slice(out.num_rows - 1 if forward else 0, 1).select(["ts", "producer", "seq"]).to_pylist()[0]
        self.position, self.after = (edge["ts"], edge["producer"], edge["seq"]), forward
        return out

    def _empty(self) -> pa.Table:
        et = next(iter(self._types.values()), None)
        types = {c.name: c.arrow_type for c in et.columns} if et else {}
        cols = {c: pa.array([], types.get(c, pa.int64())) for c in self.columns}
        cols["type"] = pa.array([], pa.string())
        return pa.table(cols)

    def next(self, n: int = 100) -> pa.Table:
        """The next n matching events after the position (fewer at the end); moves past them."""
        return self._page(int(n), True)

    def prev(self, n: int = 100) -> pa.Table:
        """The n matching events before the position, in time order; moves before them."""
        return self._page(int(n), False)

    def __iter__(self) -> Iterable[pa.Table]:
        while True:
            page = self.next()
            if page.num_rows == 0:
                return
            yield page


def _kth(keys: list[np.ndarray], n: int, forward: bool) -> int:
    allk = np.concatenate(keys)
    if forward:
        return int(np.partition(allk, n - 1)[n - 1])
    return int(-np.partition(-allk, n - 1)[n - 1])


def _out_col(t: pa.Table, c: str, et: EventType, rows: np.ndarray) -> pa.Array:
    if c in t.column_names:
        col = t.column(c).take(pa.array(rows))
        return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    types = {x.name: x.arrow_type for x in et.columns}
    return pa.nulls(len(rows), types.get(c, pa.int64()))


def cursor(store: "Store", trace: str, *, types: Iterable[str] | None = None, producers: Iterable[int] | None = None,
           where: Iterable[tuple[str, str, Any] | str] = (), start: int | None = None, end: int | None = None,
           at: int | None = None, columns: list[str] | None = None) -> Cursor:
    """A cursor over `trace` (see `Cursor`); where items are tuples or 'col op value' text."""
    w = tuple(parse_where(x) if isinstance(x, str) else tuple(x) for x in where)
    f = Filter(tuple(types) if types else None, tuple(int(p) for p in producers) if producers else None, w, start, end)
    return Cursor(store, trace, f, at=at, columns=columns)
