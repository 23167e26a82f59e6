"""Event streams: a trace's events as (type, producer) streams, the density index that holds them, and density.

Owns the `density` index (every event's ts, seq and dur ordered by (type, producer, ts),
in parts over the trace's segments), `density` (events per N equal time bins, overall,
by type, by producer or both; for one trace or several) and `Streams`, the index's
stream table as arrays kept per trace state in this process: the count of a stream in
a time range is the difference of two binary searches (`_core.binned_counts`), exact, in
milliseconds for 1,000 bins over 100M events; with the prefix sums of the durations
(`Streams.sums`) a stream's events, spans and total duration in a range are O(1) each,
which is how `statistics.stats` by type and producer answers without scanning events.
`sql/density.sql` is the plain-SQL density the tests and the benchmark compare with.

The index's seq column is also what the span and objects indexes store their seq columns
against (`seq_at`, `seq_guesser`): it is the base of the analysis indexes, so this module
imports no other analysis.

Bins: over [start, end), bin b covers [start + ceil(b*(end-start)/bins),
start + ceil((b+1)*(end-start)/bins)) — equal widths up to integer ns, every ns in
exactly one bin. Default range: the trace's first to last event (inclusive).

Over 600 lines: the index, the seq lookups built on it and the two readers of its streams
(decoded for the timeline, read in place for the statistics) share its layout.

Output of `density` (`DENSITY_COLUMNS`; `type` and `producer` only when grouped by them):
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from .. import _core, arrays
from ..arrays import as_numpy
from ..errors import BadInput
from ..schema import Column
from ..store import scan
from ..store.query import qident, qstr
from . import indexes
from .registry import Analysis, Param, Rows, Window
from .sql import ENGINE_PARAMS
from .sql import text as sql_text

if TYPE_CHECKING:
    from ..store import Store

DENSITY_COLUMNS = (
    Column("trace", "string", "", "trace name (multi-trace density only)"),
    Column("bin", "int64", "count", "bin number, 0..bins-1"),
    Column("bin_start", "int64", "ns", "first ns of the bin"),
    Column("bin_end", "int64", "ns", "first ns after the bin"),
    Column("type", "string", "", "event type (by type)"),
    Column("producer", "int32", "id", "producer (by producer)"),
    Column("events", "int64", "count", "events in the bin"),
)
__doc__ += "\n".join(f"  {c.name:<9} {c.type:<6} {c.unit:<5} {c.doc}" for c in DENSITY_COLUMNS)

BY = ("none", "type", "producer", "both")


DENSITY_INDEX = {"v": 2, "columns": ["ts", "seq", "dur"]}  # params: older builds (ts only) are rebuilt


def density_index(
    store: Store, trace: str, *, save: bool | None = None, build: bool = True
) -> indexes.PackedIndex | None:
    """Every event ordered by (type, producer, ts): `ts`, `seq` (narrowed to int32 when it
    fits) and, when some type is a span kind, `dur` (null for the other types); the
    stream table (type, producer, offset, count) is in the schema metadata under
    b"streams". Density counts on `ts`; cursors over a few producers page on all three
    (`cursors.py`). In parts over the trace's segments (`indexes.get_parts`: a stream is
    listed once per part). build=False: None unless the saved parts cover every segment."""

    def make(cut) -> pa.Table:
        parts, seqs, durs, streams, off = [], [], [], [], 0
        types = cut.types
        with_dur = any("dur" in [c.name for c in t.columns] for t in types.values())
        for name, et in types.items():
            has_dur = "dur" in [c.name for c in et.columns]
            t = scan.read(cut, name, ["ts", "producer", "seq"] + (["dur"] if has_dur else []), order=False)
            if t.num_rows == 0:
                continue
            prod = arrays.as_numpy(t.column("producer")).astype(np.int64)
            ts = arrays.as_numpy(t.column("ts"))
            order = _core.stable_order([pa.array(prod), pa.array(ts)]).to_numpy()
            ts, prod = ts[order], prod[order]
            seqs.append(arrays.as_numpy(t.column("seq"))[order])
            if with_dur:
                durs.append(
                    arrays.int64_array(t.column("dur")).take(pa.array(order))
                    if has_dur
                    else pa.nulls(len(order), pa.int64())
                )
            brk = np.nonzero(np.diff(prod))[0] + 1
            starts = np.concatenate([[0], brk])
            ends = np.concatenate([brk, [len(prod)]])
            for a, b in zip(starts, ends):
                streams.append({"type": name, "producer": int(prod[a]), "offset": off + int(a), "count": int(b - a)})
            parts.append(ts)
            off += len(ts)
        ts = np.concatenate(parts) if parts else np.array([], np.int64)
        cols = {
            "ts": pa.array(ts),
            "seq": indexes.narrow(pa.array(np.concatenate(seqs) if seqs else np.array([], np.int64))),
        }
        if with_dur:
            cols["dur"] = pa.concat_arrays(durs) if durs else pa.array([], pa.int64())
        cols["#rank"] = pa.array(indexes.thread_ranks(ts, streams))
        return pa.table(cols).replace_schema_metadata({"streams": json.dumps(streams)})

    # seq is stored as the difference to the row's rank among its thread's events in the
    # part (`indexes.thread_ranks`; read back by `indexes._Ranked`): on TOD a thread's seqs count its
    # events, so the difference is one constant per thread and part: 0 bits
    # (10M events: 0.77 B a row, 7.7 MB, before).
    return indexes.get_parts(
        store, trace, "density", DENSITY_INDEX, None, make, save=save, build_missing=build, ranked={"seq": "#rank"}
    )


_I64_MAX = np.iinfo(np.int64).max


def _lookup_plan(part: indexes.PackedIndex, event_type: str) -> tuple[np.ndarray, np.ndarray, int] | None:
    """(producers sorted, rows, width) for `seq_at` over one density index part (kept on
    it): row i = [lo, hi) of producer i's `event_type` stream, then (ranked seq: `width`
    > 0) the lows and highs of all its streams; a last row of zeros for other producers."""
    plans = getattr(part, "_lookup_plans", None)
    if plans is None:
        plans = part._lookup_plans = {}
    if event_type not in plans:
        streams = [st for st in json.loads(part.schema.metadata[b"streams"]) if st["count"]]
        mine = {
            int(st["producer"]): (int(st["offset"]), int(st["offset"]) + int(st["count"]))
            for st in streams
            if st["type"] == event_type
        }
        scol = part._cols["seq"]
        ranked = isinstance(scol, indexes._Ranked)
        prods = scol.producers if ranked else np.array(sorted(mine), np.int64)
        width = scol.lo.shape[1] if ranked else 0
        rows = np.zeros((len(prods) + 1, 2 + 2 * width), np.int64)
        for i, p in enumerate(prods.tolist()):
            rows[i, :2] = mine.get(p, (0, 0))
        if ranked:
            rows[:-1, 2:] = scol.ranges
        plans[event_type] = (prods, rows, width) if mine else None
    return plans[event_type]


def seq_at(idx: indexes.PackedIndex, event_type: str, producers: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """The seq of the `event_type` event of each (producer, ts), from the density index
    `idx`: the smallest seq among that stream's events at exactly that ts, over every part
    (so the answer does not depend on how the index is cut in parts), 0 when there is none.
    Other indexes store their seq columns as the difference to this (`indexes.pack`'s
    `guessed`): 0 wherever a thread's events of a type have distinct timestamps.
    One Rust call per part (`PackedColumn.seq_lookup`); the numpy around it is kept to a
    few calls (a lookup answers a few rows: the calls, not the rows, cost)."""
    producers = np.asarray(producers, np.int64)
    ts = np.asarray(ts, np.int64)
    if len(ts) > BULK_LOOKUPS:
        return _seq_at_bulk(idx, event_type, producers, ts)
    best = None
    for part in indexes.parts(idx):
        plan = _lookup_plan(part, event_type) if part.num_rows else None
        if plan is None:
            continue
        prods, rows, width = plan
        k = np.searchsorted(prods, producers)
        k[(k >= len(prods)) | (prods[np.minimum(k, len(prods) - 1)] != producers)] = len(prods)
        scol = part._cols["seq"]
        stored = scol.stored if width else scol
        found = (
            part._cols["ts"]
            .seq_lookup(stored, pa.array(np.concatenate([ts, rows[k].ravel()])), len(ts), width)
            .to_numpy()
        )
        best = found if best is None else np.minimum(best, found)
    if best is None:
        return np.zeros(len(ts), np.int64)
    return np.where(best == _I64_MAX, 0, best)


BULK_LOOKUPS = 20_000  # more rows than this (an index build): decode the streams once, search in numpy


def _seq_at_bulk(idx: indexes.PackedIndex, event_type: str, producers: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """`seq_at` for many rows (an index build: every row of a part): numpy searches of the
    rows' timestamps (sorted) in each stream they fall in, decoded once; a stream whose
    time range holds none of them is not decoded (a part built for appended segments
    reads the newest density part only). Before, a Rust search per row and per stream of
    its thread: the objects index of 10M events took 20 s to build instead of 1.2."""
    best = np.full(len(ts), _I64_MAX, np.int64)
    for part in indexes.parts(idx):
        streams = json.loads(part.schema.metadata[b"streams"]) if part.num_rows else []
        mine = [st for st in streams if st["type"] == event_type and st["count"]]
        if not mine:
            continue
        tcol, scol = part._cols["ts"], part._cols["seq"]
        ranked = isinstance(scol, indexes._Ranked)
        stored = scol.stored if ranked else scol
        threads = indexes.thread_streams(streams)
        for st in mine:
            a, b, p = int(st["offset"]), int(st["offset"]) + int(st["count"]), int(st["producer"])
            rows = np.flatnonzero(producers == p)
            if len(rows):
                rows = rows[(ts[rows] >= tcol.get(a)) & (ts[rows] <= tcol.get(b - 1))]
            if not len(rows):
                continue
            rows = rows[np.argsort(ts[rows], kind="stable")]  # sorted needles: numpy searches faster
            x = ts[rows]
            s_ts = _np_range(tcol, a, b)
            lo = np.searchsorted(s_ts, x, "left")
            hit = lo < np.searchsorted(s_ts, x, "right")
            starts = np.concatenate([[0], np.flatnonzero(s_ts[1:] != s_ts[:-1]) + 1])
            run_min = np.minimum.reduceat(
                _np_range(stored, a, b), starts
            )  # smallest stored seq of each run of equal ts
            got = run_min[np.searchsorted(starts, lo[hit], "right") - 1]
            if ranked:  # + the rank of ts among the thread's rows: the same for a whole run
                xh = x[hit]
                for c, d in threads[p]:
                    if (c, d) == (a, b):
                        got += lo[hit]
                        continue
                    first, last = tcol.get(c), tcol.get(d - 1)
                    inside = (xh > first) & (xh <= last)  # else 0 rows below (x <= first) or all
                    got += np.where(xh > last, d - c, 0)
                    if inside.any():
                        got[inside] += np.searchsorted(_np_range(tcol, c, d), xh[inside], "left")
            r = rows[hit]
            best[r] = np.minimum(best[r], got)
    return np.where(best == _I64_MAX, 0, best)


def _np_range(col, a: int, b: int) -> np.ndarray:
    return arrays.as_numpy(col.decode(a, b)).astype(np.int64, copy=False)


def seq_guesser(store: Store, trace: str, stamp: str | None = None) -> indexes.Guesser:
    """`seq_at` over `trace`'s density index (built on first use), for `indexes.pack`'s
    `guessed` columns: the objects and span indexes store their seq columns as the
    difference to it. stamp: the trace's stamp when the caller has it; the density index
    assembled for it is then taken from this process's cache without asking the store."""
    held: list = []

    def guess(event_type: str, producers: np.ndarray, ts: np.ndarray) -> np.ndarray:
        if not held:
            got = indexes.assembled(store, "density", DENSITY_INDEX, stamp) if stamp else None
            held.append(got if got is not None else density_index(store, trace))
        return seq_at(held[0], event_type, producers, ts)

    return guess


# -- the stream table, as arrays ---------------------------------------------------------------

NS_MIN = -(2**63)


@dataclass
class Streams:
    """The density index's stream table as arrays: stream i is rows [offset, offset+count) of
    `ts` (and `dur`), one stream per (type, producer) however many parts the index has."""

    index: indexes.PackedIndex
    types: np.ndarray  # object: type name per stream
    producers: np.ndarray  # int64
    offsets: np.ndarray  # int64
    counts: np.ndarray  # int64
    ts: np.ndarray  # the index's ts column
    dur: np.ndarray | None  # its dur column (nulls as 0), when some type has one
    valid: np.ndarray | None  # where dur is not null, when some is null
    lo: int | None  # first and last ts of the trace
    hi: int | None

    def ranges(self, sel: np.ndarray, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows [lo, hi) of each selected stream whose ts lies in [start, end): two binary
        searches per stream (`_core.binned_counts` with edges MIN, start, end)."""
        offs = self.offsets[sel]
        ends = offs + self.counts[sel]
        if len(offs) == 0:
            return offs, ends
        c = _core.binned_counts(
            pa.array(self.ts), pa.array(offs), pa.array(ends), pa.array(np.array([NS_MIN, start, end], np.int64))
        )
        c = c.to_numpy().reshape(-1, 2)
        lo = offs + c[:, 0]
        return lo, lo + c[:, 1]

    def selected(self, producers=None, types=None) -> np.ndarray:
        """The non-empty streams of these producers and types (None: all)."""
        sel = self.counts > 0
        if producers is not None:
            sel &= np.isin(self.producers, np.array(list(producers), np.int64))
        if types is not None:
            sel &= np.isin(self.types, np.array(list(types), dtype=object))
        return np.flatnonzero(sel)

    def span_sums(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(events with a duration, their summed durations) over each stream's rows [lo, hi):
        one numpy sum per stream, not per event."""
        n = np.zeros(len(lo), np.int64)
        total = np.zeros(len(lo), np.int64)
        if self.dur is None:
            return n, total
        for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())):
            if b <= a:
                continue
            if self.valid is None:
                n[i], total[i] = b - a, int(self.dur[a:b].sum())
            else:
                v = self.valid[a:b]
                n[i], total[i] = int(v.sum()), int(self.dur[a:b][v].sum())
        return n, total


NS_MAX = 2**63 - 1


@dataclass
class StreamTotals:
    """Per (type, producer) stream of one index part: its events in a window, the events
    with a duration, their summed durations, its first and last event time there."""

    types: np.ndarray  # object
    producers: np.ndarray  # int64
    events: np.ndarray
    spans: np.ndarray
    total_dur: np.ndarray
    first_ts: np.ndarray
    last_ts: np.ndarray


def stream_totals(store: Store, trace: str, window: Window) -> StreamTotals:
    """What `statistics.stats` by type and producer sums, per stream, read in place from the
    packed density index: two binary searches per stream (`binned_counts` on the packed ts),
    two timestamps, and the durations of span streams only; nothing else is decoded (a
    command answering once: on 10M events, decoding the ts column alone took longer than this)."""
    idx = density_index(store, trace)
    from ..arrays import from_numpy

    edges = from_numpy(
        np.array(
            [
                NS_MIN,
                NS_MIN if window.start is None else int(window.start),
                NS_MAX if window.end is None else int(window.end),
            ],
            np.int64,
        )
    )
    wanted = None if window.producers is None else {int(p) for p in window.producers}
    cols: dict[str, list] = {
        k: [] for k in ("types", "producers", "events", "spans", "total_dur", "first_ts", "last_ts")
    }
    for part in indexes.parts(idx):
        if not part.num_rows:
            continue
        meta = [
            st
            for st in json.loads(part.schema.metadata[b"streams"])
            if st["count"] and (wanted is None or int(st["producer"]) in wanted)
        ]
        if not meta:
            continue
        offs = np.array([st["offset"] for st in meta], np.int64)
        ends = offs + np.array([st["count"] for st in meta], np.int64)
        c = arrays.as_numpy(part.binned_counts("ts", from_numpy(offs), from_numpy(ends), edges)).reshape(-1, 2)
        lo, n = offs + c[:, 0], c[:, 1]
        keep = np.flatnonzero(n > 0)
        lo, n = lo[keep], n[keep]
        spans = np.zeros(len(keep), np.int64)
        total = np.zeros(len(keep), np.int64)
        if "dur" in part.column_names:
            for i, _k in enumerate(keep.tolist()):  # one decode per stream in range, not per event
                d = part.range_column("dur", lo[i], lo[i] + n[i])
                if d.null_count < len(d):
                    spans[i] = len(d) - d.null_count
                    total[i] = pc_sum(d)
        cols["types"].append(np.array([meta[k]["type"] for k in keep.tolist()], dtype=object))
        cols["producers"].append(np.array([meta[k]["producer"] for k in keep.tolist()], np.int64))
        cols["events"].append(n.astype(np.int64))
        cols["spans"].append(spans)
        cols["total_dur"].append(total)
        cols["first_ts"].append(arrays.as_numpy(part.take_column("ts", from_numpy(lo))).astype(np.int64))
        cols["last_ts"].append(arrays.as_numpy(part.take_column("ts", from_numpy(lo + n - 1))).astype(np.int64))
    return StreamTotals(
        *[np.concatenate(v) if v else np.zeros(0, object if k == "types" else np.int64) for k, v in cols.items()]
    )


def pc_sum(a: pa.Array) -> int:
    import pyarrow.compute as pc

    got = pc.sum(a.cast(pa.int64())).as_py()
    return int(got or 0)


_STREAMS: dict[tuple, Streams] = {}  # (store, trace id, stamp) -> the trace's streams, one state each
_STREAMS_LOCK = threading.Lock()


def streams(store: Store, trace: str, *, build: bool = True) -> Streams | None:
    """`trace`'s density index as a stream table (kept in this process per trace state).
    build=False: None unless the index is built (nothing is built)."""
    stamp = store.stamp(trace)
    key = (str(store.path), store.trace(trace).id, stamp)
    with _STREAMS_LOCK:
        got = _STREAMS.get(key)
    if got is not None:
        return got
    idx = density_index(store, trace, build=build)
    if idx is None:
        return None
    got = _make_streams(idx)
    with _STREAMS_LOCK:
        for k in [k for k in _STREAMS if k[:2] == key[:2]]:
            del _STREAMS[k]
        _STREAMS[key] = got
    return got


def _make_streams(idx: indexes.PackedIndex) -> Streams:
    rows = json.loads(idx.schema.metadata[b"streams"])
    ts = indexes.array(idx, "ts") if idx.num_rows else np.zeros(0, np.int64)
    dur = valid = None
    if "dur" in idx.column_names and idx.num_rows:
        d = idx.column("dur")
        if d.null_count:
            valid = as_numpy(d.is_valid())
            d = d.fill_null(0)
        dur = as_numpy(d)
    rows, ts, dur, valid = _one_stream_each(rows, ts, dur, valid)
    counts = np.array([r["count"] for r in rows], np.int64)
    offsets = np.array([r["offset"] for r in rows], np.int64)
    nz = counts > 0
    lo = int(ts[offsets[nz]].min()) if nz.any() else None
    hi = int(ts[offsets[nz] + counts[nz] - 1].max()) if nz.any() else None
    return Streams(
        idx,
        np.array([r["type"] for r in rows], dtype=object),
        np.array([r["producer"] for r in rows], np.int64),
        offsets,
        counts,
        ts,
        dur,
        valid,
        lo,
        hi,
    )


def _one_stream_each(rows: list[dict], ts: np.ndarray, dur: np.ndarray | None, valid: np.ndarray | None):
    """The density index's streams with one entry per (type, producer): an index in parts
    (`indexes.get_parts`) lists a stream once per part; their rows are merged in ts order."""
    keys = [(r["type"], r["producer"]) for r in rows]
    if len(set(keys)) == len(keys):
        return rows, ts, dur, valid
    groups: dict[tuple, list[dict]] = {}
    for k, r in zip(keys, rows):
        groups.setdefault(k, []).append(r)
    out_rows, ts_parts, dur_parts, valid_parts, off = [], [], [], [], 0
    for (typ, prod), rs in groups.items():  # one step per stream, not per event
        at = np.concatenate([np.arange(r["offset"], r["offset"] + r["count"]) for r in rs])
        at = at[np.argsort(ts[at], kind="stable")]
        ts_parts.append(ts[at])
        if dur is not None:
            dur_parts.append(dur[at])
        if valid is not None:
            valid_parts.append(valid[at])
        out_rows.append({"type": typ, "producer": prod, "offset": off, "count": len(at)})
        off += len(at)
    ts = np.concatenate(ts_parts) if ts_parts else ts[:0]
    return (
        out_rows,
        ts,
        (np.concatenate(dur_parts) if dur_parts else dur),
        (np.concatenate(valid_parts) if valid_parts else valid),
    )


def bin_edges(start: int, end: int, bins: int) -> np.ndarray:
    """bins + 1 edges: start + ceil(b * (end - start) / bins), exact in integers."""
    if bins < 1:
        raise BadInput(f"bins {bins}", expected="at least 1")
    if end <= start:
        raise BadInput(f"time range [{start}, {end}) is empty", expected="start < end")
    span = end - start
    return np.array([start + -(-b * span // bins) for b in range(bins + 1)], dtype=np.int64)


def density(
    store: Store,
    trace: str,
    bins: int = 1000,
    *,
    by: str = "type",
    start: int | None = None,
    end: int | None = None,
    types: Iterable[str] | None = None,
    producers: Iterable[int] | None = None,
) -> pa.Table:
    """Events per equal time bin of `trace` (see the module doc), grouped by `by`:
    none | type | producer | both."""
    if by not in BY:
        raise BadInput(f"density by {by!r}", expected=" | ".join(BY))
    info = store.trace(trace)
    idx = density_index(store, trace)
    streams = json.loads(idx.schema.metadata[b"streams"])
    if info.ts_min is None and not streams:
        return _empty_density(by)
    if start is None or end is None:
        lo, hi = _index_bounds(indexes.column(idx, "ts"), streams)
        start = lo if start is None else start
        end = (hi + 1) if end is None else end
    edges = bin_edges(int(start), int(end), int(bins))
    tset = set(types) if types is not None else None
    pset = {int(p) for p in producers} if producers is not None else None
    sel = [s for s in streams if (tset is None or s["type"] in tset) and (pset is None or s["producer"] in pset)]
    if sel:
        starts = np.array([s["offset"] for s in sel], dtype=np.int64)
        ends = starts + np.array([s["count"] for s in sel], dtype=np.int64)
        counts = idx.binned_counts("ts", pa.array(starts), pa.array(ends), pa.array(edges))
        counts = counts.to_numpy().reshape(len(sel), bins)
    else:
        counts = np.zeros((0, bins), np.int64)
    keys = {"type": [s["type"] for s in sel], "producer": [s["producer"] for s in sel]}
    group = {"none": [], "type": ["type"], "producer": ["producer"], "both": ["type", "producer"]}[by]
    if group:
        labels = list(zip(*(keys[g] for g in group))) if sel else []
        uniq = sorted(set(labels))
        gi = np.array([uniq.index(x) for x in labels], dtype=np.int64) if labels else np.zeros(0, np.int64)
        agg = np.zeros((len(uniq), bins), np.int64)
        np.add.at(agg, gi, counts)
    else:
        uniq = [()]
        agg = counts.sum(axis=0, keepdims=True)
    g = len(uniq)
    cols = {
        "bin": pa.array(np.tile(np.arange(bins, dtype=np.int64), g)),
        "bin_start": pa.array(np.tile(edges[:-1], g)),
        "bin_end": pa.array(np.tile(edges[1:], g)),
    }
    for i, name in enumerate(group):
        vals = [u[i] for u in uniq]
        cols[name] = pa.array(
            np.repeat(np.array(vals, dtype=object if name == "type" else np.int32), bins),
            pa.string() if name == "type" else pa.int32(),
        )
    cols["events"] = pa.array(agg.reshape(-1))
    return pa.table(cols)


def _index_bounds(a, streams: list[dict]) -> tuple[int, int]:
    firsts = [a[s["offset"]] for s in streams if s["count"]]
    lasts = [a[s["offset"] + s["count"] - 1] for s in streams if s["count"]]
    return int(min(firsts)), int(max(lasts))


def _empty_density(by: str) -> pa.Table:
    cols = {"bin": pa.array([], pa.int64()), "bin_start": pa.array([], pa.int64()), "bin_end": pa.array([], pa.int64())}
    if by in ("type", "both"):
        cols["type"] = pa.array([], pa.string())
    if by in ("producer", "both"):
        cols["producer"] = pa.array([], pa.int32())
    cols["events"] = pa.array([], pa.int64())
    return pa.table(cols)


def density_sql(store: Store, trace: str, bins: int, start: int, end: int) -> pa.Table:
    """The same counts by plain SQL over the views (bin, type, producer, events; empty bins absent)."""
    q = sql_text("density").format(trace=qident(trace), start=int(start), end=int(end), bins=int(bins))
    return store.sql(q)


def density_by_sql(
    engine,
    trace: str,
    bins: int = 1000,
    *,
    by: str = "type",
    start: int | None = None,
    end: int | None = None,
    types: Iterable[str] | None = None,
    producers: Iterable[int] | None = None,
) -> pa.Table:
    """`density` answered by plain SQL (sql/density.sql) on any engine: a Store (DuckDB) or
    an engine from `tracehouse.open_engine` (DuckDB or Spark over one store or several).
    The same table as `density` (every bin, and every stream of the trace even when empty
    in the range); the engine counts, the bins and groups are laid out here."""
    if by not in BY:
        raise BadInput(f"density by {by!r}", expected=" | ".join(BY))
    src = f"{qident(trace)}.events"
    where = []
    if types is not None:
        where.append(f"type IN ({', '.join(qstr(t) for t in types) or 'NULL'})")
    if producers is not None:
        where.append(f"producer IN ({', '.join(str(int(p)) for p in producers) or 'NULL'})")
    cond = " AND ".join(where) or "true"
    group = {"none": [], "type": ["type"], "producer": ["producer"], "both": ["type", "producer"]}[by]
    if start is None or end is None:
        b = engine.sql(f"SELECT min(ts) AS lo, max(ts) AS hi FROM {src}")
        lo, hi = b.column("lo")[0].as_py(), b.column("hi")[0].as_py()
        if lo is None:
            return _empty_density(by)
        start = lo if start is None else start
        end = (hi + 1) if end is None else end
    edges = bin_edges(int(start), int(end), int(bins))
    if group:
        keys = ", ".join(group)
        uniq = engine.sql(f"SELECT DISTINCT {keys} FROM {src} WHERE {cond} ORDER BY {keys}")
    else:
        uniq = pa.table({})
    g = uniq.num_rows if group else 1
    agg = np.zeros((g, bins), np.int64)
    inner = sql_text("density").format(trace=qident(trace), start=int(start), end=int(end), bins=int(bins))
    inner = inner[: inner.upper().rindex("ORDER BY")]
    sel = ", ".join(["bin", *group])
    counts = engine.sql(f"SELECT {sel}, sum(events) AS events FROM ({inner}) d WHERE {cond} GROUP BY {sel}")
    if counts.num_rows:
        if group:  # the group of every (bin, group) row: a join, not a loop
            ids = uniq.append_column("_g", pa.array(np.arange(g, dtype=np.int64)))
            counts = counts.join(ids, keys=group)
            gi = counts.column("_g").to_numpy()
        else:
            gi = np.zeros(counts.num_rows, np.int64)
        np.add.at(agg, (gi, counts.column("bin").to_numpy()), counts.column("events").to_numpy().astype(np.int64))
    cols = {
        "bin": pa.array(np.tile(np.arange(bins, dtype=np.int64), g)),
        "bin_start": pa.array(np.tile(edges[:-1], g)),
        "bin_end": pa.array(np.tile(edges[1:], g)),
    }
    for name in group:
        cols[name] = pa.array(
            np.repeat(np.array(uniq.column(name).to_pylist(), dtype=object if name == "type" else np.int32), bins),
            pa.string() if name == "type" else pa.int32(),
        )
    cols["events"] = pa.array(agg.reshape(-1))
    return pa.table(cols)


def multi_density(store: Store, traces: list[str], bins: int = 1000, *, by: str = "type", **kw) -> pa.Table:
    """`density` of several traces, each over its own time range, with a `trace` column first."""
    parts = []
    for t in traces:
        d = density(store, t, bins, by=by, **kw)
        parts.append(d.add_column(0, "trace", pa.array([t] * d.num_rows, pa.string())))
    return pa.concat_tables(parts, promote_options="permissive")


# -- as an analysis ------------------------------------------------------------------------------


def _density(
    store,
    traces,
    window,
    *,
    bins=1000,
    by="type",
    type=None,
    engine=None,
    master=None,  # noqa: A002
    conf=None,
):
    import time

    from .sql import answered_by
    from .sql import engine as open_engine

    kw = {"by": by, "start": window.start, "end": window.end, "types": type or None, "producers": window.producers}
    t0 = time.perf_counter()
    with open_engine(store, engine, master, conf) as e:
        if e is not None:
            parts = [density_by_sql(e, tr, bins, **kw) for tr in traces]
            t = (
                parts[0]
                if len(parts) == 1
                else pa.concat_tables(
                    [p.add_column(0, "trace", pa.array([tr] * p.num_rows, pa.string())) for tr, p in zip(traces, parts)]
                )
            )
        elif len(traces) == 1:
            t = density(store, traces[0], bins, **kw)
        else:
            t = multi_density(store, traces, bins, **kw)
        how = answered_by(e) if e is not None else "density index"
    secs = time.perf_counter() - t0
    return Rows(t, f"density: {bins} bins by {by} over {len(traces)} trace(s) ({secs * 1000:.1f} ms, {how})")


DENSITY = Analysis(
    "density",
    "events per equal time bin, by type / producer",
    _density,
    params=(
        Param("bins", "int", "count", "equal time bins over the range", default=1000),
        Param("by", "str", "", "one row group per type, producer, both, or none", default="type", choices=BY),
        Param("start", "time", "ns", "the range: from (default the trace's first event)", window="start"),
        Param("end", "time", "ns", "... to, exclusive (default just after its last event)", window="end"),
        Param("type", "str", "", "only these event types", many=True),
        Param("producer", "int", "id", "only these producers", many=True, window="producers"),
    )
    + ENGINE_PARAMS,
    columns=DENSITY_COLUMNS,
    traces="many",
    uses=("density",),
    limit=20,
)
