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
  params saying what was indexed, the layout `format` and the trace's `signature` at
  build time) in Arrow IPC, one record batch per file, memory-mapped on use: a lookup is
  a few binary searches over mmapped columns and touches a few pages, however big the
  trace. Parquet would cost a row-group decode (~1-20 ms) per lookup.
- Packed (format 3, `PackedIndex`): the file holds one row per block of 1,024 index
  rows. An integer or boolean column is frame-of-reference bit-packed (`src/analysis/packed.rs`:
  per block its minimum - the sparse top level - a bit width and the codes, read in
  place by `_core.PackedColumn`: a binary search is the same probes as over a plain
  array, each a shift and a mask; nothing is decoded ahead), or, where smaller (sorted
  runs: a stream's timestamps and seqs), delta-coded with an anchor every 128 values (a
  read sums at most 127 codes; a search bisects the blocks, then scans at most 128), or
  sparse where most codes are 0 (nulls, values at the block's minimum: a bitmap and the
  other codes only; TOD's span arguments, 21-82 % null). Index columns are sorted by
  their keys, so neighbouring values are close: timestamps take 12-24 bits, thread and
  depth keys 0-2, flags 1. Other columns (strings, floats) are kept plain, one list of
  1,024 values per block. A column that is a difference of two others (the span index's
  `dur` = end_ts - ts) is not stored; one close to another is stored as the difference
  (`relative`: end_ts - ts, end_max - end_ts).
- Seq columns are stored as differences to what the density index already says: the
  density index's own seq as `seq - rank` (`ranked`: the row's rank among its thread's
  events of the part, every type, by ts: `thread_ranks`, read back by `_Ranked`); the
  objects and span indexes' seq, end_seq as `seq - seq_at(type, producer, ts)`
  (`guessed`: the density index's seq of the event with that ts, `event_streams.seq_at`,
  read back by `_Guessed`). Where a thread's events have distinct timestamps and
  consecutive seqs (TOD) every difference is a constant: 0 bits. Both guesses are
  functions of the trace, not of how an index is cut in parts (the smallest seq among
  events of equal ts), so a part stays right when the density index is re-cut.
  Figures (`tracehouse bench analyze --events N`, `index_bytes_by_index`): format 1
  (uncompressed): 6.2-7.1x the trace; format 2 (packed): 11.9 MB = 1.31x a 1M-event
  TOD trace, 117 MB = 1.24x a 10M-event one (94.3 MB); format 3: 9.39 MB = 1.04x and
  92.3 MB = 0.98x (spans 41.1 -> 31.9 MB, objects 34.2 -> 25.5, density 24.7 -> 17.7,
  locals 17.2; load 4.5-5.4 on 2 shared cores). What is left is near-random copies of
  the trace's columns: the objects index's ts (3.5 B a row), span parameters and
  written values (~1.8 B each). Lookups: docs/analyses.md; their figures: docs/benchmarks/.
- In parts (`get_parts`; objects, locals, density): each part covers a set of the
  trace's segments and is a result of its own (params: the segment ids); the unflushed
  tail gets a part in memory. A grown trace gets a part for its new segments only; a
  part merges with the one before it once it holds half its rows (LSM-like levels).
  Questions ask every part and merge (`parts`, `MultiIndex`). A part naming a segment
  that is gone (compaction) makes the whole index rebuild. The span index is built at
  once (`get`) and rebuilt when the trace's signature changes: span_id is the begin's
  rank in the trace's (ts, producer, seq) order, so a segment whose begins interleave in
  time with indexed ones renumbers every later span and its children's parent_id; and
  spans open at a part's end (their end_ts, end_seq, closed, self_time, the running
  end_max of their depth) change when their ends arrive, so older parts would need an
  overlay of rewritten rows and the pairer (`src/analysis/spans/stream.rs`) a saved state of each
  thread's open stack.
- An index whose trace changed since (signature differs) or built in another layout
  (`format` differs: an index saved before the packed layout) is stale: it is rebuilt
  and the stale result deleted. A read-only store (or one another process is writing)
  keeps a built index in this process's memory instead.
- Builds are one stable radix sort (`_core.stable_order`) of rows that arrive in ts
  order, so ts order inside each key comes free.

Over 600 lines: building, saving, finding, mapping and extending an index in parts share
one cache and one notion of "fresh"; split, each piece would re-derive the others' keys.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import arrays
from ..errors import ReadOnly, StoreLocked

if TYPE_CHECKING:
    from ..store import Store
    from ..store.scan import Cut

log = logging.getLogger("tracehouse.analysis")

TOOL = "tracehouse.index"
FORMAT = 3  # the layout of a saved index; a saved index of another format is rebuilt (3: sparse blocks, guessed seq)
BLOCK = 1024  # rows per block (= `packed::BLOCK` in Rust)

# (store path, result id, result file) -> mapped index; (store path, trace id, name, params) -> in-memory index
_MAPPED: dict[tuple, PackedIndex] = {}
_MEMORY: dict[tuple, PackedIndex] = {}
_LOCK = threading.Lock()


def narrow(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    """An int64 column as int32 when every value fits (the type answers come back in)."""
    a = arrays.as_numpy(col)
    if a.dtype == np.int64 and len(a) and a.min() >= -(2**31) and a.max() < 2**31:
        return pa.array(a.astype(np.int32))
    return pa.array(a)


# -- the packed layout ------------------------------------------------------------------------


def _np(a: pa.Array) -> np.ndarray:
    """An int64 Arrow array without nulls as numpy (zero-copy; `arrays.as_numpy` costs more
    per call and these arrays are a few rows)."""
    return a.to_numpy(zero_copy_only=False)


def _plus(stored: pa.Array, add: np.ndarray) -> pa.Array:
    """stored + add (nulls of `stored` kept), without a pyarrow compute call (~100 us each)."""
    if stored.null_count == 0:
        return pa.array(_np(stored) + add)
    valid = _np(stored.is_valid())
    return pa.array(np.where(valid, _np(stored.fill_null(0)) + add, 0), mask=~valid)


def _packable(t: pa.DataType) -> bool:
    return (pa.types.is_integer(t) and t != pa.uint64()) or pa.types.is_boolean(t)


Guesser = Callable[[str, np.ndarray, np.ndarray], np.ndarray]


def pack(
    t: pa.Table,
    derived: dict[str, tuple[str, str]] | None = None,
    relative: dict[str, str] | None = None,
    guessed: dict[str, tuple[str, str, str]] | None = None,
    guesser: Guesser | None = None,
    ranked: dict[str, str] | None = None,
) -> pa.Table:
    """`t` (one index, rows in index order) in the packed layout (module doc).

    derived: {column: (a, b)} columns equal to a - b, left out (checked here: one that
    differs anywhere is stored). relative: {column: ref} columns that may be stored as
    `column - ref` (kept so when that packs smaller; ref must come first in `t`).
    guessed: {column: (event type, producer column, ts column)} seq columns that may be
    stored as `column - guesser(event type, producers, ts)` (the density index's seq of
    that event: 0 bits where the guess is right; kept so when that packs smaller).
    ranked: {column: rank column} a density index's seq stored as `seq - rank` (the rank
    column, not stored, is the row's rank among its thread's rows: `_Ranked` recomputes it
    from the streams in the metadata); kept so when that packs smaller."""
    from .. import _core

    t = t.combine_chunks()
    n = t.num_rows
    nb = -(-n // BLOCK)
    meta = {k.decode(): v.decode() for k, v in (t.schema.metadata or {}).items()}
    cols: list[dict] = []
    out: dict[str, pa.Array] = {}
    offsets = pa.array(np.minimum(np.arange(nb + 1, dtype=np.int64) * BLOCK, n))

    def chunk(name: str) -> pa.Array:
        c = t.column(name)
        return c.chunk(0) if c.num_chunks else pa.array([], c.type)

    def size(parts) -> int:
        return sum(p.nbytes for p in parts)

    def try_pack(v: pa.Array):
        # None when the packer cannot take it: a block with nulls whose values span the whole
        # int64 range leaves no code for null (hypothesis found [None, 2**63-1, -2**63]).
        try:
            return _core.pack_int64(v, v.null_count > 0)
        except ValueError:
            return None

    skip = set((ranked or {}).values())
    for f in t.schema:
        if f.name in skip:
            continue
        a = chunk(f.name)
        if derived and f.name in derived:
            x, y = derived[f.name]
            calc = pc.subtract(chunk(x).cast(pa.int64()), chunk(y).cast(pa.int64()))
            if (
                a.null_count == 0
                and calc.null_count == 0
                and pc.all(pc.equal(calc, a.cast(pa.int64()))).as_py() in (True, None)
            ):
                cols.append({"name": f.name, "kind": "diff", "type": str(f.type), "of": [x, y]})
                continue
        v = a.cast(pa.int64()) if _packable(f.type) else None
        parts = try_pack(v) if v is not None else None
        if parts is not None:
            spec = {"name": f.name, "kind": "packed", "type": str(f.type), "nullable": v.null_count > 0}
            rk = (ranked or {}).get(f.name)
            if rk is not None and n:
                d = pc.subtract(v, chunk(rk).cast(pa.int64()))
                kparts = try_pack(d)
                if kparts is not None and size(kparts) < size(parts):
                    parts = kparts
                    spec.update(nullable=d.null_count > 0, ranked=True)
            ref = (relative or {}).get(f.name)
            g = (guessed or {}).get(f.name)
            if g is not None and guesser is not None and n:
                guess = guesser(
                    g[0], arrays.as_numpy(chunk(g[1])).astype(np.int64), arrays.as_numpy(chunk(g[2])).astype(np.int64)
                )
                d = pc.subtract(v, pa.array(guess, pa.int64()))
                gparts = try_pack(d)
                if gparts is not None and size(gparts) < size(parts):
                    parts, ref = gparts, None
                    spec.update(nullable=d.null_count > 0, guess=list(g))
            if ref is not None and ref in out and chunk(ref).null_count == 0:
                d = pc.subtract(v, chunk(ref).cast(pa.int64()))
                rparts = try_pack(d)
                if rparts is not None and size(rparts) < size(parts):
                    parts = rparts
                    spec.update(nullable=d.null_count > 0, rel=ref)
            out[f.name], out[f.name + "#base"], out[f.name + "#bits"] = parts
            cols.append(spec)
        else:
            out[f.name] = pa.LargeListArray.from_arrays(offsets, a)
            cols.append({"name": f.name, "kind": "plain", "type": str(f.type)})
    meta = {"index": json.dumps({"format": FORMAT, "rows": n, "block": BLOCK, "columns": cols, "meta": meta})}
    if not out:
        out["#rows"] = pa.array(np.zeros(nb, np.int8))
    return pa.table(out).replace_schema_metadata(meta)


class ColumnView(np.lib.mixins.NDArrayOperatorsMixin):
    """Rows [a, b) of one index column, read in place: `len`, `v[i]` (an int), `v[i:j]`
    (a view), `v[rows]` (a numpy array), `search(v, side)`, `np.asarray(v)` (decoded);
    arithmetic and comparisons decode the view first (whole-column work: use `array`)."""

    __slots__ = ("col", "a", "b")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        args = [np.asarray(x) if isinstance(x, ColumnView) else x for x in inputs]
        return getattr(ufunc, method)(*args, **kwargs)

    def __init__(self, col, a: int, b: int):
        self.col, self.a, self.b = col, a, b

    def __len__(self) -> int:
        return self.b - self.a

    def __getitem__(self, k):
        if isinstance(k, slice):
            lo, hi, step = k.indices(self.b - self.a)
            if step != 1:
                return np.asarray(self)[k]
            return ColumnView(self.col, self.a + lo, self.a + max(lo, hi))
        if isinstance(k, (int, np.integer)):
            i = int(k)
            if i < 0:
                i += self.b - self.a
            if not 0 <= i < self.b - self.a:
                raise IndexError(f"row {k} of {self.b - self.a}")
            return self.col.get(self.a + i)
        rows = np.asarray(k)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        return arrays.as_numpy(self.col.take(pa.array(rows.astype(np.int64) + self.a)))

    def __array__(self, dtype=None, copy=None):
        a = arrays.as_numpy(self.col.decode(self.a, self.b))
        return a if dtype is None else a.astype(dtype)

    def search(self, v: int, side: str = "left") -> int:
        """np.searchsorted over the view (sorted ascending), one int needle."""
        v = int(v)
        if v > 2**63 - 1:
            return len(self)
        if v < -(2**63):
            return 0
        return self.col.search(self.a, self.b, v, side == "right") - self.a


class _Diff:
    """A derived column (a - b) with the `PackedColumn` read interface."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def get(self, i: int):
        a, b = self.x.get(i), self.y.get(i)
        return None if a is None or b is None else a - b

    def take(self, rows: pa.Array) -> pa.Array:
        return pc.subtract(self.x.take(rows), self.y.take(rows))

    def decode(self, a: int, b: int) -> pa.Array:
        return pc.subtract(self.x.decode(a, b), self.y.decode(a, b))

    def search(self, lo: int, hi: int, v: int, right: bool) -> int:
        raise TypeError("a derived index column is not sorted")


class _Guessed:
    """A seq column stored as `seq - guess` (`pack`'s `guessed`): reads add the guess the
    owning index's `guesser` makes from the same rows' producer and ts. The last answer is
    kept: a slice reads it again for a column stored relative to this one (`_Sum`)."""

    def __init__(self, stored, owner: PackedIndex, event_type: str, producer, ts):
        self.stored, self.owner, self.event_type, self.producer, self.ts = stored, owner, event_type, producer, ts
        self._last: tuple = (None, None, None)

    def __len__(self) -> int:
        return len(self.stored)

    def _add(self, stored: pa.Array, producer: pa.Array, ts: pa.Array) -> pa.Array:
        guesser = self.owner.guesser
        if guesser is None:
            raise RuntimeError("an index column stored relative to the density index, read without it")
        if not len(stored):
            return stored
        p = _np(producer if producer.null_count == 0 else producer.fill_null(0))
        t = _np(ts if ts.null_count == 0 else ts.fill_null(0))
        return _plus(stored, guesser(self.event_type, p.astype(np.int64, copy=False), t.astype(np.int64, copy=False)))

    def _memo(self, key, make) -> pa.Array:
        k, guesser, got = self._last
        if k == key and guesser is self.owner.guesser:
            return got
        got = make()
        self._last = (key, self.owner.guesser, got)
        return got

    def get(self, i: int):
        return self.take(pa.array([i], pa.int64()))[0].as_py()

    def take(self, rows: pa.Array) -> pa.Array:
        r = _np(rows)
        return self._memo(
            ("take", r.tobytes()),
            lambda: self._add(self.stored.take(rows), self.producer.take(rows), self.ts.take(rows)),
        )

    def decode(self, a: int, b: int) -> pa.Array:
        return self._memo(
            ("decode", a, b),
            lambda: self._add(self.stored.decode(a, b), self.producer.decode(a, b), self.ts.decode(a, b)),
        )

    def search(self, lo: int, hi: int, v: int, right: bool) -> int:
        raise TypeError("a guessed index column is not searched")


def thread_streams(streams: list[dict]) -> dict[int, list[tuple[int, int]]]:
    """{producer: [(first row, end row) of each of its non-empty streams]} of a density index part."""
    out: dict[int, list[tuple[int, int]]] = {}
    for st in streams:
        if st["count"]:
            out.setdefault(int(st["producer"]), []).append((int(st["offset"]), int(st["offset"]) + int(st["count"])))
    return out


def thread_ranks(ts: np.ndarray, streams: list[dict]) -> np.ndarray:
    """Per density index row: how many rows of the same producer (every type) have a
    smaller ts: what the density index's seq is stored against (`pack`'s `ranked`;
    `_Ranked` computes the same for a few rows by one search per stream of the thread).
    A thread's streams (each sorted by ts) are merged by one sort, and each stream is searched
    once in the merge: the count below a ts in the merge is the sum of the counts below it in
    each stream. One search per (stream, stream) pair instead cost 1.7x the CPU at 40M rows
    (54 % of a 100M index build in `searchsorted`)."""
    ts = np.asarray(ts, np.int64)
    out = np.zeros(len(ts), np.int64)
    for ranges in thread_streams(streams).values():
        merged = ts[ranges[0][0] : ranges[0][1]]
        if len(ranges) > 1:
            merged = np.sort(np.concatenate([ts[c:d] for c, d in ranges]))
        for a, b in ranges:
            out[a:b] = np.searchsorted(merged, ts[a:b], "left")
    return out


class _Ranked:
    """A density index's seq stored as `seq - rank` (`pack`'s `ranked`): rank = the rows of
    the same producer, in every stream of this part, with a smaller ts (one `rank_many`
    over every (row, stream of its thread) pair asked at once)."""

    def __init__(self, stored, ts, streams: list[dict]):
        self.stored, self.ts = stored, ts
        live = sorted(
            (int(st["offset"]), int(st["offset"]) + int(st["count"]), int(st["producer"]))
            for st in streams
            if st["count"]
        )
        self.starts = np.array([a for a, _, _ in live], np.int64)
        self.producers = np.array(sorted({p for _, _, p in live}), np.int64)
        self.pix = np.searchsorted(self.producers, np.array([p for _, _, p in live], np.int64))  # stream -> thread
        k = int(np.bincount(self.pix).max()) if len(live) else 0
        self.lo = np.zeros((len(self.producers), k), np.int64)  # thread x its streams: [lo, hi)
        self.hi = np.zeros((len(self.producers), k), np.int64)
        fill = np.zeros(len(self.producers), np.int64)
        for (a, b, _), i in zip(live, self.pix.tolist()):
            self.lo[i, fill[i]], self.hi[i, fill[i]] = a, b
            fill[i] += 1
        self.ranges = np.hstack([self.lo, self.hi])  # per thread: its streams' lows, then highs

    def __len__(self) -> int:
        return len(self.stored)

    def rank(self, threads: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """Rank of ts among the rows of each thread (an index into `producers`)."""
        if not len(ts) or not self.lo.shape[1]:
            return np.zeros(len(ts), np.int64)
        args = np.concatenate([np.asarray(ts, np.int64), self.ranges[threads].ravel()])
        return _np(self.ts.rank_many(pa.array(args), len(ts), self.lo.shape[1]))

    def _at(self, rows: np.ndarray, stored: pa.Array, ts: pa.Array) -> pa.Array:
        if not len(rows):
            return stored
        threads = self.pix[np.searchsorted(self.starts, rows, side="right") - 1]
        return _plus(stored, self.rank(threads, _np(ts)))

    def take(self, rows: pa.Array) -> pa.Array:
        return self._at(_np(rows).astype(np.int64, copy=False), self.stored.take(rows), self.ts.take(rows))

    def decode(self, a: int, b: int) -> pa.Array:
        return self._at(np.arange(a, b, dtype=np.int64), self.stored.decode(a, b), self.ts.decode(a, b))

    def get(self, i: int):
        return self.take(pa.array([i], pa.int64()))[0].as_py()

    def search(self, lo: int, hi: int, v: int, right: bool) -> int:
        raise TypeError("a ranked index column is not searched")


class _Sum:
    """A column stored relative to a guessed one (stored + ref), with the `PackedColumn`
    read interface; the span index's end_parent_seq (= seq on TOD) is one."""

    def __init__(self, stored, ref):
        self.stored, self.ref = stored, ref

    def __len__(self) -> int:
        return len(self.stored)

    def get(self, i: int):
        a, b = self.stored.get(i), self.ref.get(i)
        return None if a is None or b is None else a + b

    def _add(self, stored: pa.Array, ref: pa.Array) -> pa.Array:
        if ref.null_count:
            return pc.add(stored, ref)
        return _plus(stored, _np(ref))

    def take(self, rows: pa.Array) -> pa.Array:
        return self._add(self.stored.take(rows), self.ref.take(rows))

    def decode(self, a: int, b: int) -> pa.Array:
        return self._add(self.stored.decode(a, b), self.ref.decode(a, b))

    def search(self, lo: int, hi: int, v: int, right: bool) -> int:
        raise TypeError("a column relative to a guessed one is not searched")


class _Plain:
    """A plain (numpy) column with the `PackedColumn` read interface."""

    def __init__(self, values: pa.Array):
        self.values = values

    @functools.cached_property
    def np(self) -> np.ndarray:  # only a search needs it; strings would cost an object per row
        return arrays.as_numpy(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def get(self, i: int):
        return self.values[i].as_py()

    def take(self, rows: pa.Array) -> pa.Array:
        return self.values.take(rows)

    def decode(self, a: int, b: int) -> pa.Array:
        return self.values.slice(a, b - a)

    def search(self, lo: int, hi: int, v: int, right: bool) -> int:
        return lo + int(np.searchsorted(self.np[lo:hi], v, side="right" if right else "left"))


class PackedIndex:
    """One index in the packed layout (mapped from the store or in memory), read as the
    table it packs: `num_rows`, `column_names`, `schema` (its metadata included),
    `view(c)` (in place), `array(c)` / `column(c)` (whole column, decoded once),
    `slice(a, n)` and `take(rows)` (tables of the original column types)."""

    def __init__(self, packed: pa.Table):
        from .. import _core

        info = json.loads(packed.schema.metadata[b"index"])
        if info.get("format") != FORMAT:
            raise ValueError(f"index format {info.get('format')}, expected {FORMAT}")
        self.packed = packed
        self.num_rows = int(info["rows"])
        self._spec = {c["name"]: c for c in info["columns"]}
        self.column_names = [c["name"] for c in info["columns"]]
        self._types = {
            c["name"]: pa.type_for_alias(c["type"]) if c["kind"] != "plain" else None for c in info["columns"]
        }
        cols = {}
        # Columns read in Python: guessed ones, and those stored relative to one of these.
        guessed = {c["name"] for c in info["columns"] if c.get("guess")}
        for c in info["columns"]:
            if c.get("rel") in guessed:
                guessed.add(c["name"])
        for c in info["columns"]:
            name = c["name"]
            if c["kind"] == "packed":
                ch = lambda k: packed.column(k).chunk(0) if packed.column(k).num_chunks else None  # noqa: E731
                d = ch(name)
                if d is None:
                    d, b, w = _core.pack_int64(pa.array([], pa.int64()), False)
                else:
                    b, w = ch(name + "#base"), ch(name + "#bits")
                rel = cols.get(c["rel"]) if c.get("rel") else None
                if c.get("rel") and c["rel"] in guessed:
                    rel = None  # relative to a guessed column: added in Python below (`_Sum`)
                cols[name] = _core.PackedColumn(d, b, w, self.num_rows, c["nullable"], rel)
            elif c["kind"] == "plain":
                col = packed.column(name)
                vals = col.chunk(0).flatten() if col.num_chunks else pa.array([], col.type.value_type)
                self._types[name] = vals.type
                cols[name] = _Plain(vals)
        for c in info["columns"]:
            if c["kind"] == "diff":
                cols[c["name"]] = _Diff(cols[c["of"][0]], cols[c["of"][1]])
            elif c.get("guess"):
                ty, p, ts = c["guess"]
                cols[c["name"]] = _Guessed(cols[c["name"]], self, ty, cols[p], cols[ts])
            elif c.get("ranked"):
                cols[c["name"]] = _Ranked(cols[c["name"]], cols["ts"], json.loads(info["meta"]["streams"]))
        for c in info["columns"]:
            if c.get("rel") in guessed:
                cols[c["name"]] = _Sum(cols[c["name"]], cols[c["rel"]])
        self.guesser: Guesser | None = None  # set by whoever hands the index out (`get`, `get_parts`)
        self._cols = cols
        self.schema = pa.schema(
            [pa.field(n, self._types[n]) for n in self.column_names], metadata={k: v for k, v in info["meta"].items()}
        )
        self._arrays: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        return self.packed.nbytes

    def runs(self) -> np.ndarray:
        """The span index's (producer, depth) runs: int64 rows [producer, depth, start, end]."""
        got = getattr(self, "_runs", None)
        if got is None:
            got = np.array(json.loads(self.schema.metadata[b"runs"]), np.int64).reshape(-1, 4)
            self._runs = got
        return got

    def view(self, name: str) -> ColumnView:
        return ColumnView(self._cols[name], 0, self.num_rows)

    def _typed(self, name: str, a: pa.Array) -> pa.Array:
        t = self._types[name]
        return a if a.type == t else a.cast(t)

    def column(self, name: str) -> pa.Array:
        """The whole column, decoded (original type)."""
        return self._typed(name, self._cols[name].decode(0, self.num_rows))

    def array(self, name: str) -> np.ndarray:
        """The whole column as numpy, decoded once and kept (bulk consumers: the web UI)."""
        with self._lock:
            got = self._arrays.get(name)
        if got is None:
            spec = getattr(self, "_spec", {}).get(name, {})  # (a MultiIndex has none: its parts do)
            if spec.get("kind") == "diff":  # a - b of two columns decoded once each (dur: 0.65 -> 0.05 s on 17M spans)
                x, y = spec["of"]
                dtype = pa.array([], self._types[name]).to_numpy().dtype
                got = (self.array(x).astype(np.int64) - self.array(y).astype(np.int64)).astype(dtype, copy=False)
            else:
                got = arrays.as_numpy(self.column(name))
            with self._lock:
                self._arrays[name] = got
        return got

    def slice(self, a: int, n: int) -> pa.Table:
        a = max(0, min(int(a), self.num_rows))
        b = max(a, min(a + int(n), self.num_rows))
        return pa.table({c: self._typed(c, self._cols[c].decode(a, b)) for c in self.column_names}, schema=self.schema)

    def take(self, rows) -> pa.Table:
        r = rows if isinstance(rows, pa.Array) else pa.array(np.asarray(rows, np.int64))
        r = r.cast(pa.int64())
        return pa.table({c: self._typed(c, self._cols[c].take(r)) for c in self.column_names}, schema=self.schema)

    def range_column(self, name: str, a: int, b: int) -> pa.Array:
        """Column `name`, rows [a, b), decoded (original type, nulls kept)."""
        return self._typed(name, self._cols[name].decode(int(a), int(b)))

    def take_column(self, name: str, rows) -> pa.Array:
        """Column `name` at `rows` (original type, nulls kept)."""
        r = rows if isinstance(rows, pa.Array) else arrays.from_numpy(np.asarray(rows, np.int64))
        return self._typed(name, self._cols[name].take(r))

    def binned_counts(self, name: str, starts: pa.Array, ends: pa.Array, edges: pa.Array) -> pa.Array:
        col = self._cols[name]
        if isinstance(col, _Plain):
            from .. import _core

            return _core.binned_counts(col.values.cast(pa.int64()), starts, ends, edges)
        return col.binned_counts(starts, ends, edges)


class _Concat:
    """The columns of several parts read as one (rows of part 0, then part 1, ...); a search
    stays inside one part (its rows are sorted only there)."""

    def __init__(self, cols: list, starts: np.ndarray):
        self.cols, self.starts = cols, starts

    def __len__(self) -> int:
        return int(self.starts[-1])

    def _part(self, i: int) -> int:
        return int(np.searchsorted(self.starts, i, side="right")) - 1

    def get(self, i: int):
        k = self._part(i)
        return self.cols[k].get(i - int(self.starts[k]))

    def take(self, rows: pa.Array) -> pa.Array:
        r = arrays.as_numpy(rows).astype(np.int64)
        k = np.searchsorted(self.starts, r, side="right") - 1
        order = np.argsort(k, kind="stable")
        pieces = []
        for part in np.unique(k).tolist():
            sel = r[k == part] - int(self.starts[part])
            pieces.append(self.cols[part].take(pa.array(sel)))
        if not pieces:
            return pa.array([], pa.int64())
        inv = np.empty(len(r), np.int64)
        inv[order] = np.arange(len(r))
        return pa.concat_arrays([p.cast(pieces[0].type) for p in pieces]).take(pa.array(inv))

    def decode(self, a: int, b: int) -> pa.Array:
        pieces = []
        for k, col in enumerate(self.cols):
            s0, s1 = int(self.starts[k]), int(self.starts[k + 1])
            lo, hi = max(a, s0), min(b, s1)
            if lo < hi:
                pieces.append(col.decode(lo - s0, hi - s0))
        if not pieces:
            return self.cols[0].decode(0, 0) if self.cols else pa.array([], pa.int64())
        return pa.concat_arrays([p.cast(pieces[0].type) for p in pieces])

    def search(self, lo: int, hi: int, v: int, right: bool) -> int:
        if hi <= lo:
            return lo
        k = self._part(lo)
        s0 = int(self.starts[k])
        if hi > int(self.starts[k + 1]):
            raise ValueError("an index search across parts")
        return s0 + self.cols[k].search(lo - s0, hi - s0, v, right)


class MultiIndex(PackedIndex):
    """An index in parts (`get_parts`: one per range of the trace's segments, plus the
    unflushed tail), read as the concatenation of the parts' rows. A sorted run of rows
    (a key's range, a density stream) lies inside one part; questions over keys ask each
    part (`parts(idx)`) and merge. The density index's streams are listed per part with
    offsets into the concatenation (a stream may appear once per part)."""

    def __init__(self, parts: list[PackedIndex]):  # noqa: D107 - no PackedIndex.__init__: nothing to unpack
        self.parts = parts
        self.starts = np.concatenate([[0], np.cumsum([p.num_rows for p in parts])]).astype(np.int64)
        self.num_rows = int(self.starts[-1])
        self.column_names = parts[0].column_names
        self._types = {c: parts[0].schema.field(c).type for c in self.column_names}
        self._cols = {c: _Concat([p._cols[c] for p in parts], self.starts) for c in self.column_names}
        meta = dict(parts[0].schema.metadata or {})
        if b"streams" in meta:
            streams = []
            for p, s0 in zip(parts, self.starts.tolist()):
                for st in json.loads(p.schema.metadata[b"streams"]):
                    streams.append(dict(st, offset=st["offset"] + s0))
            meta[b"streams"] = json.dumps(streams).encode()
        self.schema = pa.schema([parts[0].schema.field(c) for c in self.column_names], metadata=meta)
        self._arrays = {}
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.parts)

    def binned_counts(self, name: str, starts: pa.Array, ends: pa.Array, edges: pa.Array) -> pa.Array:
        s, e = arrays.as_numpy(starts).astype(np.int64), arrays.as_numpy(ends).astype(np.int64)
        bins = len(edges) - 1
        out = np.zeros((len(s), bins), np.int64)
        k = np.searchsorted(self.starts, s, side="right") - 1
        k = np.where(e == s, 0, k)  # an empty stream may sit at a part's end
        for part in np.unique(k).tolist():
            sel = np.flatnonzero(k == part)
            s0 = int(self.starts[part])
            c = self.parts[part].binned_counts(name, pa.array(s[sel] - s0), pa.array(e[sel] - s0), edges)
            out[sel] = arrays.as_numpy(c).reshape(len(sel), bins)
        return pa.array(out.reshape(-1))


def parts(idx) -> list[PackedIndex]:
    """The parts of an index (one for an index built at once)."""
    return idx.parts if isinstance(idx, MultiIndex) else [idx]


def _params_key(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


def find(store: Store, trace: str, name: str, params: dict) -> dict | None:
    """The saved index result `name` of `trace` built with `params`, fresh or not (of any format)."""
    want = _params_key(params)
    for r in store.results(trace=trace, tool=TOOL, name=name):
        if _params_key(r["params"].get("spec", {})) == want:
            return r
    return None


def _mapped(store: Store, r: dict) -> PackedIndex | None:
    """The saved index `r` mapped (once per process), or None when its file fails the checksum
    it was saved with or does not read as an index: such a file is rebuilt, never trusted
    (CRC-32 runs at ~3.7 GB/s: 0.2 s for the span index of a 100M-event trace, once)."""
    # Keyed by the file too: stores made before result ids were AUTOINCREMENT reused them.
    key = (str(store.path), r["id"], r["path"])
    with _LOCK:
        t = _MAPPED.get(key)
    if t is None:
        from ..store.verify import file_crc

        path = store.path / r["path"]
        try:
            if r.get("checksum") is not None and file_crc(path) != r["checksum"]:
                raise ValueError("its file fails the checksum it was saved with")
            t = PackedIndex(store.result_table(r["id"]))
        except (OSError, ValueError, pa.ArrowException, KeyError) as e:
            log.warning("index %s of result %s (%s) not used, rebuilt: %s", r["name"], r["id"], path, e)
            return None
        with _LOCK:
            _MAPPED[key] = t
    return t


def fresh(store: Store, trace: str, name: str, params: dict, guesser: Guesser | None = None) -> PackedIndex | None:
    """The index `name` of `trace` for `params` when it is built and fresh (mapped from the
    store or kept in this process's memory), else None: nothing is built. `guesser`: what
    its guessed columns read through (`pack`), for an index that has some."""
    sig = store.stamp(trace)
    r = find(store, trace, name, params)
    if r is not None and r["params"].get("signature") == sig and r["params"].get("format") == FORMAT and r["path"]:
        got = _mapped(store, r)
        if got is not None:
            return _guessing(got, guesser)
    with _LOCK:
        got = _MEMORY.get((str(store.path), store.trace(trace).id, name, _params_key(params), sig))
    return None if got is None else _guessing(got, guesser)


def assembled(store: Store, name: str, params: dict, stamp: str) -> PackedIndex | None:
    """The index in parts `name` (`get_parts`) as this process last assembled it for the
    trace at `stamp`, or None: no store access."""
    want = (str(store.path), name, _params_key(params), stamp)
    with _LOCK:
        for k, v in _PARTS.items():
            if (k[0], k[2], k[3], k[4]) == want:
                return v
    return None


def _need_guesser(guessed: dict | None, guesser: Guesser | None, name: str) -> None:
    if guessed and guesser is None:
        raise ValueError(
            f"the {name} index has guessed columns: give the guesser they read through (`event_streams.seq_guesser`)"
        )


def _guessing(idx: PackedIndex, guesser: Guesser | None) -> PackedIndex:
    """`idx` with its guessed columns (`pack`) reading through `guesser` (None: as they were;
    a mapped index is shared by every caller in this process)."""
    if guesser is not None:
        for p in parts(idx):
            p.guesser = guesser
        idx.guesser = guesser
    return idx


def get(
    store: Store,
    trace: str,
    name: str,
    params: dict,
    build: Callable[[], pa.Table],
    *,
    save: bool | None = None,
    derived: dict[str, tuple[str, str]] | None = None,
    relative: dict[str, str] | None = None,
    guessed: dict[str, tuple[str, str, str]] | None = None,
    guesser: Guesser | None = None,
) -> PackedIndex:
    """The index `name` of `trace` for `params`: mapped from the store when fresh, else built
    (`build()` returns the index as a plain table, packed here; `derived`, `relative`,
    `guessed`, `guesser` as in `pack`; the index reads its guessed columns with `guesser`).

    save: None = save when the store can be written (else keep it in memory), True = must save,
    False = keep in memory only.
    """
    _need_guesser(guessed, guesser, name)
    t = fresh(store, trace, name, params, guesser)
    if t is not None:
        return t
    sig = store.stamp(trace)
    r = find(store, trace, name, params)
    mkey = (str(store.path), store.trace(trace).id, name, _params_key(params), sig)
    packed = pack(build(), derived, relative, guessed, guesser)
    if save is not False and not store.readonly:
        try:
            rid = store.save_result(
                "table",
                name,
                TOOL,
                [trace],
                params={"spec": params, "signature": sig, "format": FORMAT},
                table=packed,
                table_format="arrow",
            )
            if r is not None:
                store.delete_result(r["id"])
            return _guessing(_mapped(store, store.result(rid)) or PackedIndex(packed), guesser)
        except (StoreLocked, ReadOnly):
            if save:
                raise
    elif save:
        raise ReadOnly(f"store {store.path} was opened read-only: cannot save the {name} index")
    idx = PackedIndex(packed)
    with _LOCK:
        _MEMORY[mkey] = idx
    return _guessing(idx, guesser)


# -- indexes in parts: extended as a live trace grows -------------------------------------------

MERGE_RATIO = 2  # a part is merged into the one before it once it holds at least 1/MERGE_RATIO of its rows
_PARTS: dict[tuple, PackedIndex] = {}  # (store, trace id, name, params, stamp) -> the index as last assembled


def _sub(cut: Cut, segments: list, tails: bool) -> Cut:
    return dataclasses.replace(cut, segments=segments, tails=cut.tails if tails else {}, _tail_tables={})


def _may_lower_guesses(cut: Cut, segs: list, covered: set, new: list, types: list[str] | None) -> bool:
    """Whether rows not in the saved parts put a smaller seq at a (type, producer, ts) those
    parts hold.

    A guessed column is stored as its value minus the smallest seq the density index has at
    the row's key, and that guess is taken again at read time: a later row at the same key
    with a smaller seq (a caller may supply seqs) would shift every saved row there (found in
    review: a saved write read back seq -5 instead of 10). Only rows at or before the saved
    parts' last ts can share a key with them (none, in a live trace appended in time order),
    so only that window is read, of the new rows and of the saved parts' segments."""
    from ..store import scan as scanmod

    old = [g for g in segs if g.id in covered]
    old_max = max((g.ts_max for g in old if g.ts_max is not None), default=None)
    if old_max is None:
        return False
    for name in sorted({g.event_type for g in new} | {k for k, v in cut.tails.items() if v}):
        if types is not None and name not in types:
            continue
        lows = [g.ts_min for g in new if g.event_type == name and g.ts_min is not None]
        lows += [pc.min(b.column("ts")).as_py() for b in cut.tails.get(name, []) if b.num_rows]
        lo = min((x for x in lows if x is not None), default=None)
        if lo is None or lo > old_max:
            continue
        cols = ["ts", "producer", "seq"]
        fresh = scanmod.read(
            _sub(cut, [g for g in new if g.event_type == name], True),
            name,
            cols,
            start=lo,
            end=old_max + 1,
            order=False,
        )
        if not fresh.num_rows:
            continue
        held = scanmod.read(
            _sub(cut, [g for g in old if g.event_type == name], False),
            name,
            cols,
            start=lo,
            end=old_max + 1,
            order=False,
        )
        if not held.num_rows:
            continue
        a = fresh.group_by(["producer", "ts"]).aggregate([("seq", "min")])
        b = held.group_by(["producer", "ts"]).aggregate([("seq", "min")]).rename_columns(["producer", "ts", "held"])
        both = a.join(b, ["producer", "ts"], join_type="inner")
        if both.num_rows and pc.any(pc.less(both.column("seq_min"), both.column("held"))).as_py():
            return True
    return False


def get_parts(
    store: Store,
    trace: str,
    name: str,
    params: dict,
    types: list[str] | None,
    build: Callable[[Cut], pa.Table],
    *,
    save: bool | None = None,
    build_missing: bool = True,
    guessed: dict[str, tuple[str, str, str]] | None = None,
    guesser: Guesser | None = None,
    ranked: dict[str, str] | None = None,
):
    """The index `name` of `trace` for `params` built in parts, each over a set of the trace's
    segments (of `types`; None = every type) and saved as its own result (params: the
    segment ids it covers), plus one in memory over the unflushed tail. `build(cut)` makes
    the plain index table of the rows of a cut (the whole trace or some of its segments).

    When the trace grows, only the new segments are indexed (a new part); a part then
    merges with the one before it while it holds at least 1/MERGE_RATIO of that one's rows
    (levels, as an LSM tree: each row is rewritten O(log n) times, there are O(log n)
    parts). A part naming a segment that is gone (a compaction rewrote it) or saved in
    another layout is stale: every part is deleted and the index rebuilt.
    build_missing=False: None unless the saved parts cover every segment (nothing built but
    the tail's part). save, guessed, guesser as in `get`; ranked as in `pack`.
    """
    cut = store.cut(trace)
    stamp = cut.stamp()
    pkey = (str(store.path), cut.info.id, name, _params_key(params), stamp)
    _need_guesser(guessed, guesser, name)
    with _LOCK:
        got = _PARTS.get(pkey)
    if got is not None:
        return _guessing(got, guesser)
    segs = [g for g in cut.segments if types is None or g.event_type in types]
    live = {g.id for g in segs}
    want = _params_key(params)
    saved = [
        r for r in store.results(trace=trace, tool=TOOL, name=name) if _params_key(r["params"].get("spec", {})) == want
    ]
    good = [r for r in saved if r["params"].get("format") == FORMAT and "segments" in r["params"] and r["path"]]
    ids = [i for r in good for i in r["params"]["segments"]]
    if any(set(r["params"]["segments"]) - live for r in good) or len(ids) != len(set(ids)):
        # A compaction rewrote segments a part covers, or two processes indexed the same
        # segments at once: rebuild it all.
        good = []
    good = [r for r in good if _mapped(store, r) is not None]  # a damaged part is rebuilt, not trusted
    good.sort(key=lambda r: min(r["params"]["segments"], default=-1))
    stale = [r for r in saved if r not in good]
    covered = {i for r in good for i in r["params"]["segments"]}
    new = [g for g in segs if g.id not in covered]
    if guessed and good and _may_lower_guesses(cut, segs, covered, new, types):
        stale, good, covered, new = stale + good, [], set(), segs
    if (new or not good) and not build_missing:
        return None
    writable = save is not False and not store.readonly
    mem: list[tuple[list[int], PackedIndex]] = []  # parts kept in memory (store not writable)

    def add(segments: list) -> None:
        packed = pack(build(_sub(cut, segments, False)), guessed=guessed, guesser=guesser, ranked=ranked)
        ids = sorted(g.id for g in segments)
        if writable:
            try:
                rows = json.loads(packed.schema.metadata[b"index"])["rows"]
                rid = store.save_result(
                    "table",
                    name,
                    TOOL,
                    [trace],
                    params={"spec": params, "format": FORMAT, "segments": ids, "rows": rows, "signature": stamp},
                    table=packed,
                    table_format="arrow",
                )
                good.append(store.result(rid))
                return
            except (StoreLocked, ReadOnly):
                if save:
                    raise
        elif save:
            raise ReadOnly(f"store {store.path} was opened read-only: cannot save the {name} index")
        mem.append((ids, PackedIndex(packed)))

    if new or not good:
        add(new)
        # Levels: merge the newest saved part into the one before while it is not much smaller.
        while (
            len(good) >= 2
            and not mem
            and MERGE_RATIO * int(good[-1]["params"].get("rows") or 0) >= int(good[-2]["params"].get("rows") or 0)
        ):
            a, b = good.pop(), good.pop()
            ids = set(a["params"]["segments"]) | set(b["params"]["segments"])
            add([g for g in segs if g.id in ids])
            stale += [a, b]
    if writable and stale:
        with _LOCK:
            for k in [k for k in _MAPPED if k[0] == str(store.path) and k[1] in {r["id"] for r in stale}]:
                del _MAPPED[k]
        for r in stale:
            try:
                store.delete_result(r["id"])
            except (StoreLocked, ReadOnly):
                break
    pieces = [_mapped(store, r) for r in good] + [m for _, m in mem]
    if cut.tail_rows and any(types is None or k in types for k in cut.tails):
        pieces.append(PackedIndex(pack(build(_sub(cut, [], True)), guessed=guessed, guesser=guesser, ranked=ranked)))
    pieces = [p for p in pieces if p.num_rows] or pieces[:1]
    idx = pieces[0] if len(pieces) == 1 else MultiIndex(pieces)
    with _LOCK:
        for k in [k for k in _PARTS if k[:4] == pkey[:4]]:
            del _PARTS[k]
        _PARTS[pkey] = idx
    return _guessing(idx, guesser)


def forget(store: Store) -> None:
    """Drop this process's mapped and in-memory indexes of `store` (before deleting files)."""
    p = str(store.path)
    with _LOCK:
        for d in (_MAPPED, _MEMORY, _PARTS):
            for k in [k for k in d if k[0] == p]:
                del d[k]


def column(t, name: str):
    """A column of an index: a `ColumnView` read in place (a packed index) or a numpy view."""
    if isinstance(t, PackedIndex):
        return t.view(name)
    return arrays.as_numpy(t.column(name))


def array(t, name: str) -> np.ndarray:
    """A whole index column as numpy (decoded once per process for a packed index)."""
    if isinstance(t, PackedIndex):
        return t.array(name)
    return arrays.as_numpy(t.column(name))


def search(a, v: int, side: str = "left") -> int:
    """np.searchsorted for one int needle. A `ColumnView` searches in place; a numpy array
    in its own dtype: a needle numpy would promote (an int64 into an int32 column) makes it
    convert the whole column first."""
    if isinstance(a, ColumnView):
        return a.search(v, side)
    info = np.iinfo(a.dtype)
    if v > info.max:
        return len(a)
    if v < info.min:
        return 0
    return int(np.searchsorted(a, a.dtype.type(v), side=side))


def key_range(cols: list, values: list[int], lo: int = 0, hi: int | None = None) -> tuple[int, int]:
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
