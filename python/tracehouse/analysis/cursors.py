"""Cursors: the events matching a filter, paged forward or backward from any time t.

Owns TOD's cursor API (seed 001) on the store's segments. A filter is event types,
producers, parameter predicates (`column op value`) and a time range; a cursor stands
between two events of the total order (ts, producer, seq) and `next(n)` / `prev(n)`
return the n matching events after / before it, moving it.

How it avoids scanning from the start: segments are sorted by ts and registered with
their time bounds, and every Parquet row group carries min/max statistics of ts. A page
visits the segments (and the unflushed tail) that can hold events past the gap in ts
order, asking each for its n best matches with one DuckDB query (`ts` bound first, so
row groups before t are pruned by their statistics; ORDER BY ts ... LIMIT n, whose
top-n pushes its running n-th value into the scan, so row groups after the page are
skipped too, and the output columns are only decoded for rows that pass the filter).
It stops as soon as n matches are in hand and the next segment starts after the n-th
of them. A page costs a few row-group decodes wherever t is in a 100M-event trace.

Faster, when the trace's `density` index is built and fresh (`tracehouse analyze
index`), the filter names a few producers and no predicate, and only the common
columns are asked for (the default over several types): the index holds every event's
ts, seq and dur ordered by (type, producer, ts), so each (type, producer) stream gives
its next n events by one binary search, and the page is the n first of those, merged.
No Parquet is decoded: a page costs well under a millisecond where the row-group path
decodes 3-4 columns of a 512K-row row group per event type (4-7 ms each, 20-40 ms a
page over TOD's 4 types, over 100 ms at the tail on a loaded machine).

Output columns: for one event type every column of that type, for several the common
columns (ts, producer, seq, dur); then `type`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import arrays
from ..errors import BadInput
from ..schema import Column, EventType
from ..store import scan
from ..store.query import qident
from . import indexes
from .registry import Analysis, Answer, Note, Param, Table, Text

if TYPE_CHECKING:
    from ..store import Store

OPS = ("=", "==", "!=", "<", "<=", ">", ">=")
COMMON = ("ts", "producer", "seq", "dur")
LOW = (-(2**63), -(2**31), -(2**63))  # a position before every event at the same ts
HIGH = (2**63 - 1, 2**31 - 1, 2**63 - 1)
MAX_INDEX_STREAMS = 256  # (type, producer) streams a page merges from the index; more: row groups


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
        return {
            "types": list(self.types) if self.types else None,
            "producers": list(self.producers) if self.producers else None,
            "where": [list(w) for w in self.where],
            "start": self.start,
            "end": self.end,
        }

    @classmethod
    def from_json(cls, d: dict) -> Filter:
        return cls(
            tuple(d["types"]) if d.get("types") else None,
            tuple(d["producers"]) if d.get("producers") else None,
            tuple(tuple(w) for w in d.get("where") or ()),
            d.get("start"),
            d.get("end"),
        )


_PREDICATE = re.compile(r"\s*([^\W\d]\w*)\s*(<=|>=|!=|==|=|<|>)\s*(.*?)\s*", re.S)


def parse_where(text: str) -> tuple[str, str, str]:
    """'target = 42' -> ('target', '=', '42') (the value is typed later, per column).

    The column is the name before the first operator, so a value may hold operators
    (`path = a=b`). A value in matching quotes, single or double (`name = "outer"`, as a
    shell user writes it), is the text inside them: it matches like `name = outer`."""
    m = _PREDICATE.fullmatch(text)
    if m is None or not m.group(3):
        raise BadInput(f"predicate {text!r}", expected="COLUMN OP VALUE with OP one of = != < <= > >=")
    col, op, val = m.groups()
    if len(val) >= 2 and val[0] == val[-1] and val[0] in "'\"":
        val = val[1:-1]
    return col, op, val


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
class Cursor:
    """Iterates the events of `trace` matching `filter` from a position (see the module doc).

    The cursor stands in a gap of the total order (ts, producer, seq): just after the
    event `position` when `after` is true, just before it otherwise. `next(n)` returns
    the n matching events after the gap and moves the gap past them; `prev(n)` the n
    before it, moving the gap before them (so `prev` after `next` returns the same
    events again, like a list iterator). `Cursor(..., at=t)` stands just before the
    first event at time t.
    """

    store: Store
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
            raise BadInput(
                "no event type has every predicate's column",
                expected=", ".join(sorted({w[0] for w in self.filter.where})) + " in one type",
            )
        self._where = []
        for col, op, val in self.filter.where:
            if op not in OPS:
                raise BadInput(f"predicate operator {op!r}", expected=" ".join(OPS))
            self._where.append((col, op, val))
        single = len(names) == 1
        if self.columns is None:
            self.columns = [c.name for c in types[names[0]].columns] if single else list(COMMON)
        if self.at is not None:
            self.seek(self.at)

    def seek(self, t: int) -> Cursor:
        """Stand just before the first event at time t."""
        self.position, self.after = (int(t), LOW[1], LOW[2]), False
        return self

    def seek_end(self) -> Cursor:
        """Stand after the last event."""
        self.position, self.after = HIGH, True
        return self

    def _sql_filter(self, et: EventType, forward: bool) -> tuple[list[str], list]:
        """WHERE terms (and their parameters) selecting the filter's events past the gap."""
        f = self.filter
        p0, p1, p2 = self.position
        cmp = (">" if self.after else ">=") if forward else ("<=" if self.after else "<")
        strict = ">" if forward else "<"
        # The plain `ts` bound lets DuckDB prune row groups by their statistics; the full
        # (ts, producer, seq) comparison places the gap exactly.
        terms = [
            f"ts {'>=' if forward else '<='} ?",
            f"(ts {strict} ? OR (ts = ? AND (producer {strict} ? OR (producer = ? AND seq {cmp} ?))))",
        ]
        args: list = [p0, p0, p0, p1, p1, p2]
        if f.start is not None:
            terms.append("ts >= ?")
            args.append(int(f.start))
        if f.end is not None:
            terms.append("ts < ?")
            args.append(int(f.end))
        if f.producers is not None:
            terms.append(f"producer IN ({', '.join('?' * len(f.producers))})")
            args += [int(x) for x in f.producers]
        types = {c.name: c.arrow_type for c in et.columns}
        for col, op, val in self._where:
            terms.append(f"{qident(col)} {'=' if op == '==' else op} ?")
            args.append(_typed(val, types[col], col))
        return terms, args

    def _page(self, n: int, forward: bool) -> pa.Table:
        if not self._where and set(self.columns) <= set(COMMON):
            page = self._index_page(n, forward)
            if page is not None:
                return page
        return self._scan_page(n, forward)

    def _index_page(self, n: int, forward: bool) -> pa.Table | None:
        """The page from the density index (see the module doc); None when it cannot serve."""
        from .event_streams import density_index

        f = self.filter
        if f.producers is None or len(f.producers) * len(self._types) > MAX_INDEX_STREAMS:
            return None
        idx = density_index(self.store, self.trace, build=False)
        if idx is None or "seq" not in idx.column_names:
            return None
        key = (id(idx), idx.num_rows)
        if getattr(self, "_streams_key", None) != key:
            self._streams_key = key
            self._streams = {}  # (type, producer) -> its streams (one per part of the index)
            for st in json.loads(idx.schema.metadata[b"streams"]):
                self._streams.setdefault((st["type"], st["producer"]), []).append(st)
        ts_all, seq_all = indexes.column(idx, "ts"), indexes.column(idx, "seq")
        has_dur = "dur" in idx.column_names
        p0, p1, p2 = self.position
        lo_t = None if f.start is None else int(f.start)
        hi_t = None if f.end is None else int(f.end)
        picks: list[tuple[str, int, np.ndarray]] = []  # (type, producer, index rows)
        for name in self._types:
            for q, st in ((p, st) for p in sorted(set(f.producers)) for st in self._streams.get((name, p), [])):
                if st["count"] == 0:
                    continue
                a, b = st["offset"], st["offset"] + st["count"]
                ts = ts_all[a:b]
                lo = 0 if lo_t is None else indexes.search(ts, lo_t)
                hi = len(ts) if hi_t is None else indexes.search(ts, hi_t)
                if lo >= hi:
                    continue
                # Rows tied with the gap's ts are compared on (producer, seq); the rest
                # fall on one side of it by ts alone.
                i0, i1 = indexes.search(ts, p0, "left"), indexes.search(ts, p0, "right")
                i0, i1 = min(max(i0, lo), hi), min(max(i1, lo), hi)
                tie = np.arange(a + i0, a + i1)
                if len(tie):
                    s_tie = seq_all[tie].astype(np.int64)
                    if forward:
                        keep = (q > p1) | ((q == p1) & ((s_tie > p2) if self.after else (s_tie >= p2)))
                    else:
                        keep = (q < p1) | ((q == p1) & ((s_tie <= p2) if self.after else (s_tie < p2)))
                    tie = tie[keep]
                if forward:
                    rows = np.concatenate([tie, np.arange(a + i1, a + min(i1 + n, hi))])
                else:
                    rows = np.concatenate([np.arange(a + max(i0 - n, lo), a + i0), tie])
                if len(rows):
                    picks.append((name, q, rows))
        if not picks:
            return self._empty()
        rows = np.concatenate([r for _, _, r in picks])
        prod = np.concatenate([np.full(len(r), q, np.int64) for _, q, r in picks])
        tix = np.concatenate([np.full(len(r), i, np.int64) for i, (_, _, r) in enumerate(picks)])
        ts = ts_all[rows].astype(np.int64)
        # seq is read (through the density index's ranks: a search per stream of the thread)
        # for the page's rows only: those within n by (ts, producer), plus any tied with the
        # page's last one.
        order = np.lexsort((prod, ts))
        if len(order) > n:
            edge = order[n - 1] if forward else order[len(order) - n]
            tied = np.flatnonzero((ts == ts[edge]) & (prod == prod[edge]))
            order = np.union1d(order[:n] if forward else order[len(order) - n :], tied)
        rows, prod, tix, ts = rows[order], prod[order], tix[order], ts[order]
        seq = seq_all[rows].astype(np.int64)
        order = np.lexsort((seq, prod, ts))  # (ts, producer, seq) ascending
        order = order[:n] if forward else order[::-1][:n][::-1]
        rows, prod, tix, ts, seq = rows[order], prod[order], tix[order], ts[order], seq[order]
        if forward:
            self.position, self.after = (int(ts[-1]), int(prod[-1]), int(seq[-1])), True
        else:
            self.position, self.after = (int(ts[0]), int(prod[0]), int(seq[0])), False
        names = pa.array([name for name, _, _ in picks], pa.string())
        cols = {
            "ts": pa.array(ts),
            "producer": pa.array(prod.astype(np.int32)),
            "seq": pa.array(seq),
            "dur": idx.take_column("dur", rows) if has_dur else pa.nulls(len(rows), pa.int64()),
        }
        out = {c: cols[c] for c in self.columns}
        out["type"] = names.take(pa.array(tix))
        return pa.table(out)

    def _scan_page(self, n: int, forward: bool) -> pa.Table:
        f = self.filter
        pos = self.position
        order = "ASC" if forward else "DESC"
        # Candidate sources: every segment (and the unflushed tail) of the filter's types
        # that can hold events past the gap, visited in ts order.
        cands = []
        for name in self._types:
            for src in self.store.scan_sources(self.trace, name):
                if (
                    src.ts_min is None
                    or f.start is not None
                    and src.ts_max < f.start
                    or f.end is not None
                    and src.ts_min >= f.end
                ):
                    continue
                if forward and src.ts_max < pos[0] or not forward and src.ts_min > pos[0]:
                    continue
                cands.append((src.ts_min, src.ts_max, name, src))
        cands.sort(key=(lambda c: c[0]) if forward else (lambda c: -c[1]))
        pieces: list[pa.Table] = []
        keys: list[np.ndarray] = []
        for lo, hi, name, src in cands:
            if sum(len(k) for k in keys) >= n:
                # A source starting beyond the n-th best match so far cannot improve the page.
                kth = _kth(keys, n, forward)
                if forward and lo > kth or not forward and hi < kth:
                    break
            et = self._types[name]
            own = {c.name for c in et.columns}
            sel = ", ".join(qident(c) if c in own else f"CAST(NULL AS BIGINT) AS {qident(c)}" for c in self.columns)
            terms, args = self._sql_filter(et, forward)
            # DuckDB's top-N pushes its running n-th value into the scan: only the row
            # groups that can still hold the page are decoded, and the output columns only
            # for rows that pass the filter.
            t = scan.select(
                src,
                f"SELECT {sel}, ts AS _ts, CAST(producer AS BIGINT) AS _p, seq AS _s FROM {{src}} "
                f"WHERE {' AND '.join(terms)} ORDER BY ts {order}, producer {order}, seq {order} "
                f"LIMIT {int(n)}",
                args,
            )
            if t.num_rows == 0:
                continue
            pieces.append(t.append_column("type", pa.array([name] * t.num_rows, pa.string())))
            keys.append(arrays.as_numpy(t.column("_ts")))
        if not pieces:
            return self._empty()
        out = pa.concat_tables(pieces, promote_options="permissive")
        direction = "ascending" if forward else "descending"
        out = out.take(pc.sort_indices(out, [("_ts", direction), ("_p", direction), ("_s", direction)])).slice(0, n)
        if not forward:
            out = out.take(pa.array(np.arange(out.num_rows - 1, -1, -1)))
        edge = out.slice(out.num_rows - 1 if forward else 0, 1).select(["_ts", "_p", "_s"]).to_pylist()[0]
        self.position, self.after = (edge["_ts"], edge["_p"], edge["_s"]), forward
        out = out.drop_columns(["_ts", "_p", "_s"])
        return pa.table(
            {
                c: (out.column(c).combine_chunks() if isinstance(out.column(c), pa.ChunkedArray) else out.column(c))
                for c in out.column_names
            }
        )

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


def cursor(
    store: Store,
    trace: str,
    *,
    types: Iterable[str] | None = None,
    producers: Iterable[int] | None = None,
    where: Iterable[tuple[str, str, Any] | str] = (),
    start: int | None = None,
    end: int | None = None,
    at: int | None = None,
    columns: list[str] | None = None,
) -> Cursor:
    """A cursor over `trace` (see `Cursor`); where items are tuples or 'col op value' text."""
    w = tuple(parse_where(x) if isinstance(x, str) else tuple(x) for x in where)
    f = Filter(tuple(types) if types else None, tuple(int(p) for p in producers) if producers else None, w, start, end)
    return Cursor(store, trace, f, at=at, columns=columns)


# -- as an analysis ------------------------------------------------------------------------------


@dataclass
class Page(Answer):
    """A page of a cursor, where it stands after it and how long it took."""

    cursor: Cursor
    rows: pa.Table
    seconds: float
    at: int | None
    backward: bool = False

    def table(self) -> pa.Table:
        return self.rows

    def to_json(self, shown: dict) -> dict:
        # An empty page moved nowhere: no position (the cursor's start sentinel is no event).
        c, found = self.cursor, self.rows.num_rows > 0
        return {
            "rows": self.rows.to_pylist(),
            "position": list(c.position) if found else None,
            "after": c.after if found else None,
            "seconds": round(self.seconds, 4),
        } | ({} if found else {"message": self.no_match()})

    def no_match(self) -> str:
        """What an empty page says: no event matches (after / before --at when given)."""
        if self.at is None:
            return "no events match"
        return f"no events match {'before' if self.backward else 'after'} {self.at}"

    def show(self, shown: dict) -> list:
        if self.rows.num_rows == 0:
            return [Text(self.no_match() + "\n")]
        p = self.cursor.position
        return [
            Table(self.rows),
            Note(
                f"{self.rows.num_rows} events in {self.seconds * 1000:.1f} ms; next page: "
                f"--at {p[0]} (position {p[0]}/{p[1]}/{p[2]})"
            ),
        ]

    def save(self, store, name, traces, params, shown) -> int:
        from .results import save_search

        return save_search(
            store,
            shown.get("save_name") or f"cursor {self.cursor.trace}",
            self.cursor.trace,
            self.cursor.filter,
            at=self.at,
            params=params,
        )


def _cursor(store, trace, window, *, limit=100, type=None, where=None, at=None, backward=False) -> Page:  # noqa: A002
    import time

    c = cursor(
        store,
        trace,
        types=type or None,
        producers=window.producers,
        where=[parse_where(w) for w in where or []],
        start=window.start,
        end=window.end,
        at=at,
    )
    if at is None and backward:
        c.seek_end()
    t0 = time.perf_counter()
    page = c.prev(limit) if backward else c.next(limit)
    return Page(c, page, time.perf_counter() - t0, at, backward)


CURSOR = Analysis(
    "cursor",
    "events matching a filter, a page forward or backward from t",
    _cursor,
    params=(
        Param("limit", "int", "count", "events in the page", default=100),
        Param("type", "str", "", "event type (repeat; default all)", many=True),
        Param("producer", "int", "id", "producer id (repeat)", many=True, window="producers"),
        Param("where", "str", "", "parameter predicate 'COL OP VALUE' (repeat)", many=True),
        Param("start", "time", "ns", "ts >= start", window="start"),
        Param("end", "time", "ns", "ts < end", window="end"),
        Param("at", "time", "ns", "stand just before time t (default: the start, or the end with --backward)"),
        Param("backward", "bool", "", "the page before the position", default=False),
        Param("save_name", "str", "", "name of the saved search (with --save)", answer=False),
    ),
    columns=(
        Column("ts", "int64", "ns", "event time"),
        Column("producer", "int32", "id", "producer"),
        Column("seq", "int64", "count", "order of the event within its producer"),
        Column("type", "string", "", "event type"),
    ),
    columns_note="Then the parameters of the event types the filter selects (NULL where a type has none).",
)


def open_search(store: Store, rid: int) -> Cursor:
    """A cursor from a saved search (`results.save_search`), standing where it was saved."""
    from ..errors import NotFound

    r = store.result(rid)
    if r["kind"] != "search":
        raise NotFound(f"result {rid} is a {r['kind']}, not a search")
    p = r["params"]
    return Cursor(store, r["payload"]["trace"], Filter.from_json(p["filter"]), at=p.get("at"))
