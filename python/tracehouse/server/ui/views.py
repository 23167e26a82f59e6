"""What each page of the UI shows, computed on the server as aggregates.

Owns the answers of the `/api/ui/trace/...` routes. Every answer is bounded whatever the
trace's size (the browser never gets more than ~100K numbers) and is computed from the
analyses and the derived indexes (prepare.py), never by a Python loop over events:

  density      `analysis.statistics.density` over the density index (binary searches)
  stats        counts and durations by event type and by producer: the density index's
               streams (counts in a range are two binary searches per stream, durations a
               numpy sum per span stream); by state: spans' durations summed per name over
               the span index (one bincount); by link: SQL over the link types
  histogram    `analysis.histograms.histogram` (Rust buckets, bpftrace's) of span durations
               read from the mmapped span index
  top spans    one argpartition of those durations
  timeline     per producer row: spans per depth level as bars while few, else per-pixel
               busy fraction and dominant name; other events as ticks while few, else
               per-pixel counts; counters as per-pixel min/avg/max (SQL, row groups pruned)
  flame        the calling-context tree of the spans overlapping a range (durations clipped
               to it), from the per-span call paths: one bincount per request

A selection is `Window`: a time range [start, end) and a set of producers; every view
takes one, which is what links the pages (a range dragged on the density chart filters
the statistics, the histogram, the flame graph and the timeline).

Why statistics by type/producer do not run `analysis.statistics.stats` (SQL): on the
100M-event TOD trace that query scans every event (1-3 s); the density index answers the
same counts exactly in milliseconds. The SQL remains the reference in the tests.

Over 600 lines: one function per UI answer, each bounded; they share the window and budget
helpers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ... import _core
from ...analysis import _index, statistics
from ...analysis.histograms import histogram
from ...errors import BadInput
from ...store.query import qident
from .prepare import Preparer, SpanData, Streams

if TYPE_CHECKING:
    from ...store import Store

MAX_ITEMS = 100_000  # numbers of one answer, at most (the browser's budget)
MAX_BINS = 2_000
MAX_SERIES = 24  # density series (types) shown; the rest are summed into "other"
TOP_GROUPS = 15  # pie/bar slices; the rest is "other"
LEVEL_ITEMS = 2_000  # spans of one depth level of one row drawn as bars; more: per-pixel
TICK_ITEMS = 1_000  # instants of one stream drawn as ticks; more: per-pixel counts
MAX_ROWS = 200
NS_MIN, NS_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class Window:
    """The linked selection: [start, end) in ns (None: open) and producers (None: all)."""

    start: int | None = None
    end: int | None = None
    producers: tuple[int, ...] | None = None

    def bounds(self, lo: int | None, hi: int | None) -> tuple[int, int]:
        """Closed to the trace's bounds: [start, end) with end exclusive."""
        start = self.start if self.start is not None else (lo if lo is not None else 0)
        end = self.end if self.end is not None else ((hi + 1) if hi is not None else start + 1)
        if end <= start:
            raise BadInput(f"time range [{start}, {end}) is empty", expected="start < end")
        return int(start), int(end)


def trace_bounds(prep: Preparer, trace: str) -> tuple[int | None, int | None]:
    info = prep.store.trace(trace)
    return info.ts_min, info.ts_max


# -- density --------------------------------------------------------------------------------


def density(prep: Preparer, trace: str, w: Window, bins: int = 1000) -> dict:
    """Events per bin by type over the window (series beyond MAX_SERIES summed as other)."""
    bins = max(1, min(int(bins), MAX_BINS))
    s = prep.streams(trace)  # ready (or Pending), so density() below only maps the index
    if s.lo is None:
        return {"start": None, "end": None, "bins": bins, "bin_start": [], "series": [], "total": []}
    start, end = w.bounds(s.lo, s.hi)
    t = statistics.density(prep.store, trace, bins, by="type", start=start, end=end, producers=w.producers)
    counts = t.column("events").to_numpy().reshape(-1, bins) if t.num_rows else np.zeros((0, bins), np.int64)
    types = t.column("type").to_numpy(zero_copy_only=False)[::bins] if t.num_rows else np.array([], object)
    order = np.argsort(-counts.sum(axis=1), kind="stable")
    series = [{"type": str(types[i]), "counts": counts[i].tolist()} for i in order[:MAX_SERIES]]
    if len(order) > MAX_SERIES:
        series.append({"type": "other", "counts": counts[order[MAX_SERIES:]].sum(axis=0).tolist()})
    edges = statistics.bin_edges(start, end, bins)
    return {"start": start, "end": end, "bins": bins, "bin_start": edges[:-1].tolist(), "series": series,
            "total": counts.sum(axis=0).tolist()}


# -- statistics -------------------------------------------------------------------------------


def _stream_ranges(s: Streams, sel: np.ndarray, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows [lo, hi) of each selected stream whose ts lies in [start, end): two binary
    searches per stream (`_core.binned_counts` with edges MIN, start, end)."""
    offs = s.offsets[sel]
    ends = offs + s.counts[sel]
    if len(offs) == 0:
        return offs, ends
    c = _core.binned_counts(pa.array(s.ts), pa.array(offs), pa.array(ends), pa.array(np.array([NS_MIN, start, end], np.int64)))
    c = c.to_numpy().reshape(-1, 2)
    lo = offs + c[:, 0]
    return lo, lo + c[:, 1]


def _selected(s: Streams, w: Window) -> np.ndarray:
    sel = np.ones(len(s.offsets), bool)
    if w.producers is not None:
        sel &= np.isin(s.producers, np.array(w.producers, np.int64))
    return np.nonzero(sel & (s.counts > 0))[0]


def _span_sums(s: Streams, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Sum of dur over each stream's rows [lo, hi) (-1 = not a span: counted as 0)."""
    out = np.zeros(len(lo), np.int64)
    if s.dur is None:
        return out
    for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())):  # one numpy sum per stream, not per event
        if b > a and s.dur[a] >= 0:
            out[i] = int(s.dur[a:b].sum())
    return out


def stats(prep: Preparer, trace: str, w: Window, by: str) -> dict:
    """FrameSoC's four statistics: by type, by producer, by state duration, by link duration."""
    if by in ("type", "producer"):
        return _stats_streams(prep, trace, w, by)
    if by == "state":
        return _stats_state(prep, trace, w)
    if by == "link":
        return _stats_link(prep, trace, w)
    raise BadInput(f"statistics by {by!r}", expected="type | producer | state | link")


def _stats_streams(prep: Preparer, trace: str, w: Window, by: str) -> dict:
    s = prep.streams(trace)
    sel = _selected(s, w)
    if s.lo is None or len(sel) == 0:
        return {"by": by, "rows": [], "total": 0}
    start, end = w.bounds(s.lo, s.hi)
    lo, hi = _stream_ranges(s, sel, start, end)
    n = hi - lo
    durs = _span_sums(s, lo, hi)
    key = s.types[sel] if by == "type" else s.producers[sel]
    uniq, inv = np.unique(key, return_inverse=True)
    events = np.bincount(inv, weights=n, minlength=len(uniq)).astype(np.int64)
    total_dur = np.bincount(inv, weights=durs, minlength=len(uniq)).astype(np.int64)
    order = np.argsort(-events, kind="stable")
    kinds = {k: et.kind for k, et in prep.store.event_types(trace).items()}
    names = _producer_names(prep.store, trace) if by == "producer" else {}
    rows = []
    for i in order[:TOP_GROUPS]:
        k = uniq[i]
        label = str(k) if by == "type" else names.get(int(k), str(k))
        row = {"key": str(k) if by == "type" else int(k), "label": label, "events": int(events[i]),
               "total_dur": int(total_dur[i])}
        if by == "type":
            row["kind"] = kinds.get(str(k), "")
        rows.append(row)
    if len(order) > TOP_GROUPS:
        rest = order[TOP_GROUPS:]
        rows.append({"key": None, "label": f"other ({len(rest)})", "events": int(events[rest].sum()),
                     "total_dur": int(total_dur[rest].sum())})
    return {"by": by, "rows": rows, "total": int(events.sum()), "groups": len(uniq), "start": start, "end": end}


_NAMES: dict[tuple, dict[int, str]] = {}


def _producer_names(store: "Store", trace: str) -> dict[int, str]:
    info = store.trace(trace)
    key = (str(store.path), info.id, store.catalog.version())
    got = _NAMES.get(key)
    if got is None:
        got = {int(p["id"]): str(p["name"]) for p in store.producers(trace)}
        _NAMES.clear()
        _NAMES[key] = got
    return got


def _whole(prep: Preparer, trace: str, w: Window, start: int, end: int) -> bool:
    """The window is the whole trace, every producer: the span index's columns are used as they are."""
    lo, hi = trace_bounds(prep, trace)
    return w.producers is None and (lo is None or (start <= lo and end > hi))


def _span_window(prep: Preparer, trace: str, sd: SpanData, w: Window, start: int, end: int,
                 overlap: bool) -> np.ndarray | slice:
    """Rows of the span index in the window: the spans overlapping [start, end) (overlap=True)
    or starting in it. The index is ordered by (producer, depth, ts), so each (producer,
    depth) block holds its spans of the window in one run of rows, found by two binary
    searches (ts; the running maximum of end_ts for overlaps): the cost follows the window,
    not the trace. The whole trace: slice(None)."""
    if _whole(prep, trace, w, start, end):
        return slice(None)
    idx = sd.index
    blocks = prep.blocks(trace, sd)
    sel = np.arange(len(blocks.start))
    if w.producers is not None:
        sel = sel[np.isin(blocks.producer, np.array(w.producers, np.int64))]
    ts = _index.array(idx, "ts")
    reach = _index.array(idx, "end_max" if overlap and "end_max" in idx.column_names else "end_ts")
    parts = []
    for a, b in zip(blocks.start[sel].tolist(), blocks.end[sel].tolist()):  # one pair of searches per block
        i = a + (_index.search(reach[a:b], start, "right") if overlap else _index.search(ts[a:b], start, "left"))
        j = a + _index.search(ts[a:b], end, "left")
        if j > i:
            parts.append(np.arange(i, j, dtype=np.int64))
    rows = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    if overlap and len(rows):
        rows = rows[_index.array(idx, "end_ts")[rows] > start]
    return rows


def _overlapping(prep: Preparer, trace: str, sd: SpanData, w: Window, start: int,
                 end: int) -> tuple[np.ndarray | slice, np.ndarray]:
    """(rows, durations clipped to [start, end)) of the spans overlapping the window."""
    rows = _span_window(prep, trace, sd, w, start, end, overlap=True)
    if isinstance(rows, slice):  # the whole trace: nothing to clip
        return rows, _index.array(sd.index, "dur")
    ts = _index.array(sd.index, "ts")[rows]
    end_ts = _index.array(sd.index, "end_ts")[rows]
    return rows, np.minimum(end_ts, end) - np.maximum(ts, start)


def _starting(prep: Preparer, trace: str, sd: SpanData, w: Window, start: int, end: int) -> np.ndarray | slice:
    """Rows of the closed spans starting in the window (histograms, top, by state); the whole
    trace when every span is closed: slice(None)."""
    rows = _span_window(prep, trace, sd, w, start, end, overlap=False)
    closed = _index.array(sd.index, "closed")
    if isinstance(rows, slice):
        return rows if prep.all_closed(trace, sd) else np.flatnonzero(closed)
    return rows[closed[rows]]


def _spans_or_none(prep: Preparer, trace: str) -> tuple[SpanData | None, str]:
    from .prepare import ui_span_config

    cfg, why = ui_span_config(prep.store, trace)
    if cfg is None:
        return None, why
    return prep.spans(trace), ""


def _stats_state(prep: Preparer, trace: str, w: Window) -> dict:
    sd, why = _spans_or_none(prep, trace)
    if sd is None:
        return {"by": "state", "rows": [], "total": 0, "why": why}
    calls = prep.calls(trace)
    lo, hi = trace_bounds(prep, trace)
    start, end = w.bounds(lo, hi)
    rows = _starting(prep, trace, sd, w, start, end)
    dur = _index.array(sd.index, "dur")[rows]
    code = calls.code[rows]
    nn = len(calls.names)
    total = np.bincount(code, weights=dur, minlength=nn)
    spans = np.bincount(code, minlength=nn)
    order = np.argsort(-total, kind="stable")
    order = order[spans[order] > 0]
    names = calls.names
    out = [{"key": str(names[int(i)]), "label": str(names[int(i)]), "spans": int(spans[i]),
            "total_dur": int(total[i]), "mean_dur": float(total[i] / spans[i])} for i in order[:TOP_GROUPS]]
    if len(order) > TOP_GROUPS:
        rest = order[TOP_GROUPS:]
        out.append({"key": None, "label": f"other ({len(rest)})", "spans": int(spans[rest].sum()),
                    "total_dur": int(total[rest].sum()), "mean_dur": float(total[rest].sum() / max(1, spans[rest].sum()))})
    return {"by": "state", "rows": out, "total": int(total.sum()), "spans": int(spans.sum()),
            "state": sd.config.name_column or sd.config.begin, "groups": int((spans > 0).sum())}


LINK_END_COLUMNS = ("dst_ts", "end_ts")
LINK_LABEL_COLUMNS = ("link_type", "name", "type")


def _stats_link(prep: Preparer, trace: str, w: Window) -> dict:
    types = prep.store.event_types(trace)
    parts = []
    for name, et in types.items():
        if et.kind != "link":
            continue
        cols = {c.name: c.type for c in et.params}
        end_col = next((c for c in LINK_END_COLUMNS if cols.get(c) == "int64"), None)
        if end_col is None:
            continue
        label = next((c for c in LINK_LABEL_COLUMNS if cols.get(c) == "string"), None)
        lab = f"coalesce({qident(label)}, '?')" if label else "''"
        where = ["{0} IS NOT NULL".format(qident(end_col))]
        lo, hi = trace_bounds(prep, trace)
        if w.start is not None or w.end is not None:
            start, end = w.bounds(lo, hi)
            where.append(f"ts >= {start} AND ts < {end}")
        if w.producers is not None:
            where.append(f"producer IN ({', '.join(str(int(p)) for p in w.producers) or 'NULL'})")
        parts.append(f"SELECT '{name}' || CASE WHEN {lab} = '' THEN '' ELSE ': ' || {lab} END AS label, "
                     f"{qident(end_col)} - ts AS d FROM {qident(trace)}.{qident(name)} WHERE {' AND '.join(where)}")
    if not parts:
        return {"by": "link", "rows": [], "total": 0, "why": "no link event types with an end time in this trace"}
    q = (f"SELECT label, count(*) AS links, CAST(sum(d) AS BIGINT) AS total_dur, avg(d) AS mean_dur "
         f"FROM ({' UNION ALL '.join(parts)}) GROUP BY label ORDER BY total_dur DESC, label LIMIT {TOP_GROUPS + 1}")
    t = prep.store.sql(q).to_pylist()
    rows = [{"key": r["label"], "label": r["label"], "links": r["links"], "total_dur": r["total_dur"],
             "mean_dur": r["mean_dur"]} for r in t[:TOP_GROUPS]]
    return {"by": "link", "rows": rows, "total": sum(r["total_dur"] or 0 for r in rows)}


# -- span durations ---------------------------------------------------------------------------------


def hist(prep: Preparer, trace: str, w: Window, *, kind: str = "hist", unit: str = "us", k: int = 0,
         lo: int | None = None, hi: int | None = None, step: int | None = None) -> dict:
    """bpftrace `hist` (log2) or `lhist` (linear) of the closed spans starting in the window,
    with count/mean/p50/p90/p99 (in ns, kept per window: changing the unit or the buckets
    only re-buckets)."""
    sd, why = _spans_or_none(prep, trace)
    if sd is None:
        return {"why": why, "buckets": []}
    tlo, thi = trace_bounds(prep, trace)
    start, end = w.bounds(tlo, thi)
    rows = _starting(prep, trace, sd, w, start, end)
    values = _index.array(sd.index, "dur")[rows]
    summary = prep.cached(trace, ("dur summary", w), lambda: _summary(values))
    if kind == "lhist" and (lo is None or hi is None or step is None):
        lo, hi, step = _linear_buckets(summary.get("p99", 0), unit)
    h = histogram(values, kind=kind, k=k, min=lo or 0, max=hi or 0, step=step or 1, unit=unit, summary=False)
    doc = h.to_json()
    doc["summary"] = {"": summary}
    doc["spans"] = int(len(values))
    doc["buckets"] = [{kk: b[kk] for kk in ("bucket", "low", "high", "label", "count")} for b in doc["buckets"]]
    return doc


def _summary(values: np.ndarray) -> dict:
    from ...analysis.histograms import _summary as summary

    return summary(values)


def _linear_buckets(p99_ns: float, unit: str) -> tuple[int, int, int]:
    """lhist bounds: 0 to the 99th percentile in about 40 round steps (bpftrace needs
    (max - min) to be a multiple of step)."""
    from ...analysis.histograms import UNITS

    top = float(p99_ns) / UNITS[unit]
    if top <= 0:
        return 0, 10, 1
    raw = max(top / 40, 1e-9)
    mag = 10 ** math.floor(math.log10(raw))
    step = max(1, int(next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)))
    hi = max(step, int(math.ceil(top / step)) * step)
    return 0, hi, step


def top_spans(prep: Preparer, trace: str, w: Window, n: int = 25) -> dict:
    """The longest closed spans starting in the window."""
    sd, why = _spans_or_none(prep, trace)
    if sd is None:
        return {"why": why, "rows": []}
    n = max(1, min(int(n), 1000))
    tlo, thi = trace_bounds(prep, trace)
    start, end = w.bounds(tlo, thi)
    rows = _starting(prep, trace, sd, w, start, end)
    dur = _index.array(sd.index, "dur")[rows]
    count = len(dur)
    if count > n:
        pick = np.argpartition(-dur, n)[:n]
        rows, dur = (pick if isinstance(rows, slice) else rows[pick]), dur[pick]
    elif isinstance(rows, slice):
        rows = np.arange(count)
    order = np.argsort(-dur, kind="stable")
    return {"rows": span_rows(prep, trace, sd, rows[order]), "spans": int(count)}


def span_rows(prep: Preparer, trace: str, sd: SpanData, rows: np.ndarray) -> list[dict]:
    """Span index rows as dicts: id, times, producer (and name), depth, the span's name."""
    calls = prep.calls(trace)
    names = _producer_names(prep.store, trace)
    idx = sd.index
    cols = {c: _index.array(idx, c)[rows] for c in ("span_id", "ts", "end_ts", "dur", "self_time", "producer",
                                                       "depth", "closed")}
    label = calls.names.take(pa.array(calls.code[rows])).to_pylist() if len(rows) else []
    out = []
    for i in range(len(rows)):  # at most 1,000 rows: the answer itself
        p = int(cols["producer"][i])
        out.append({"span_id": int(cols["span_id"][i]), "ts": int(cols["ts"][i]), "end_ts": int(cols["end_ts"][i]),
                    "dur": int(cols["dur"][i]), "self_time": int(cols["self_time"][i]), "producer": p,
                    "producer_name": names.get(p, str(p)), "depth": int(cols["depth"][i]), "name": str(label[i]),
                    "closed": bool(cols["closed"][i])})
    return out


# -- flame graph ------------------------------------------------------------------------------------


def _sample_flame(prep: Preparer, trace: str, cfg, w: Window, min_share: float, max_nodes: int) -> dict:
    """The flame graph of a sampled trace (`analysis.samples`): the call paths of the samples
    in the window, weighed by their period; nodes under `min_share` of the root are cut."""
    from ...analysis import samples

    tlo, thi = trace_bounds(prep, trace)
    start, end = w.bounds(tlo, thi)
    t = samples.call_tree(prep.store, trace, cfg, producers=None if w.producers is None else list(w.producers),
                          start=start, end=end)
    total = t.column("total_ns").to_numpy()
    roots_total = int(total[t.column("parent").to_numpy() < 0].sum()) if t.num_rows else 0
    n = int(t.column("calls").to_numpy()[t.column("depth").to_numpy() == 0].sum()) if t.num_rows else 0
    if roots_total == 0:
        return {"nodes": [], "total": 0, "start": start, "end": end, "spans": 0, "samples": 0}
    threshold = max(1, int(roots_total * min_share))
    keep = np.flatnonzero(total >= threshold)
    while len(keep) > max_nodes:
        threshold *= 2
        keep = np.flatnonzero(total >= threshold)
    rows = t.take(pa.array(keep)).to_pylist()
    nodes = [{"id": r["node"], "parent": r["parent"], "depth": r["depth"], "name": r["name"], "calls": r["calls"],
              "total": r["total_ns"], "self": r["self_ns"]} for r in rows]
    return {"nodes": nodes, "total": roots_total, "start": start, "end": end, "spans": n, "samples": n,
            "threshold_ns": threshold, "paths": t.num_rows}


def flame(prep: Preparer, trace: str, w: Window, min_share: float = 0.001, max_nodes: int = 5_000) -> dict:
    """The calling-context tree of the spans overlapping the window, their durations clipped
    to it (of the stack samples in it, for a sampled trace): per node calls, total and self
    ns; nodes under `min_share` of the root are cut."""
    from ...analysis.samples import sample_config

    sc = sample_config(prep.store, trace)
    if sc is not None:
        return _sample_flame(prep, trace, sc, w, min_share, max_nodes)
    sd, why = _spans_or_none(prep, trace)
    if sd is None:
        return {"why": why, "nodes": []}
    calls = prep.calls(trace)
    tlo, thi = trace_bounds(prep, trace)
    start, end = w.bounds(tlo, thi)
    rows, clipped = _overlapping(prep, trace, sd, w, start, end)
    node = calls.node[rows]
    if isinstance(rows, slice):  # the whole trace: every call path
        ids = np.arange(len(calls.parent))
        ncalls = np.bincount(node, minlength=len(ids))
        total = np.bincount(node, weights=clipped, minlength=len(ids)).astype(np.int64)
        ppos = calls.parent
    else:  # the paths of the window's spans only (their ancestors are among them: they overlap too)
        ids, inv = np.unique(node, return_inverse=True)
        ncalls = np.bincount(inv, minlength=len(ids))
        total = np.bincount(inv, weights=clipped, minlength=len(ids)).astype(np.int64)
        par = calls.parent[ids]
        ppos = np.searchsorted(ids, par)
        ok = (par >= 0) & (ppos < len(ids))
        ok[ok] = ids[ppos[ok]] == par[ok]
        ppos = np.where(ok, ppos, -1)
    # Self time of a path = its total minus its child paths' totals (clipped spans nest).
    has = ppos >= 0
    child_sum = np.bincount(ppos[has], weights=total[has], minlength=len(ids)).astype(np.int64)
    self_ns = np.maximum(total - child_sum, 0)
    roots_total = int(total[~has].sum())
    if roots_total == 0:
        return {"nodes": [], "total": 0, "start": start, "end": end, "spans": int(len(node))}
    threshold = max(1, int(roots_total * min_share))
    keep = np.flatnonzero(total >= threshold)
    while len(keep) > max_nodes:
        threshold *= 2
        keep = np.flatnonzero(total >= threshold)
    # A kept path's parent path has at least its total, so it is kept too: the tree stays whole.
    kid = ids[keep]
    names = calls.names.take(pa.array(calls.label[kid])).to_pylist() if len(keep) else []
    par, dep = calls.parent[kid], calls.depth[kid]
    nodes = [{"id": int(kid[i]), "parent": int(par[i]), "depth": int(dep[i]), "name": str(names[i]),
              "calls": int(ncalls[keep[i]]), "total": int(total[keep[i]]), "self": int(self_ns[keep[i]])}
             for i in range(len(keep))]
    return {"nodes": nodes, "total": roots_total, "start": start, "end": end, "spans": int(len(node)),
            "threshold_ns": threshold, "paths": int((ncalls > 0).sum())}


def frame_spans(prep: Preparer, trace: str, w: Window, node: int, n: int = 100) -> dict:
    """The spans behind one flame-graph frame (call path `node`) in the window, longest first."""
    from ...analysis.samples import sample_config

    if sample_config(prep.store, trace) is not None:
        return {"why": "a frame of stack samples: its samples are rows of the trace's sample type (SQL console)",
                "rows": []}
    sd, why = _spans_or_none(prep, trace)
    if sd is None:
        return {"why": why, "rows": []}
    calls = prep.calls(trace)
    if not 0 <= node < len(calls.parent):
        raise BadInput(f"no call path {node}", expected=f"0..{len(calls.parent) - 1}")
    tlo, thi = trace_bounds(prep, trace)
    start, end = w.bounds(tlo, thi)
    rows, clipped = _overlapping(prep, trace, sd, w, start, end)
    mine = calls.node[rows] == node
    rows, clipped = (np.flatnonzero(mine) if isinstance(rows, slice) else rows[mine]), clipped[mine]
    count = len(rows)
    n = max(1, min(int(n), 1000))
    if count > n:
        pick = np.argpartition(-clipped, n)[:n]
        rows, clipped = rows[pick], clipped[pick]
    order = np.argsort(-clipped, kind="stable")
    path = []
    p = int(node)
    while p >= 0 and len(path) < 256:
        path.append(str(calls.names[int(calls.label[p])]))
        p = int(calls.parent[p])
    return {"node": int(node), "path": path[::-1], "count": int(count), "rows": span_rows(prep, trace, sd, rows[order])}


# -- timeline ---------------------------------------------------------------------------------------


def _busy(ts: np.ndarray, end_ts: np.ndarray, edges: np.ndarray, cum: np.ndarray | None = None) -> np.ndarray:
    """Covered share of each bin by sorted, disjoint intervals [ts, end_ts) (exact):
    covered(t) = cumulative duration of the spans begun before t, minus the part of the
    last one that lies after t. `cum`: the prefix sums of the durations (len + 1), when known,
    on any base (only differences of it are used)."""
    if cum is None:
        cum = np.concatenate([[0], np.cumsum(end_ts - ts)])
    k = np.searchsorted(ts, edges, side="left")
    last_end = np.where(k > 0, end_ts[np.maximum(k - 1, 0)], edges)
    covered = cum[k] - np.maximum(last_end - edges, 0)
    width = np.diff(edges).astype(np.float64)
    return np.clip(np.diff(covered) / np.maximum(width, 1), 0, 1)


def timeline(prep: Preparer, trace: str, w: Window, rows: list[list[int]], width: int = 1000,
             max_depth: int = 12, lines: bool = True) -> dict:
    """Rows of the timeline over the window, each one producer (or a collapsed group of them):
    spans as bars per depth level (or per-pixel busy share and dominant name when a level has
    more than LEVEL_ITEMS in view), other events as ticks (or per-pixel counts), counters as
    per-pixel min/avg/max."""
    width = max(10, min(int(width), 4000))
    rows = rows[:MAX_ROWS]
    s = prep.streams(trace)
    if s.lo is None:
        return {"rows": [], "start": None, "end": None, "width": width}
    start, end = w.bounds(s.lo, s.hi)
    edges = statistics.bin_edges(start, end, width)
    sd, _why = _spans_or_none(prep, trace)
    calls = prep.calls(trace) if sd is not None else None
    span_types = set()
    if sd is not None:
        span_types = {sd.config.begin} | ({sd.config.end} if sd.config.end else set())
    types = prep.store.event_types(trace)
    line_types = [t for t, et in types.items() if _is_line_type(prep.store, trace, et)]
    names = _producer_names(prep.store, trace)
    out_rows = []
    # Event streams (not spans, not lines) of every requested producer, counted in one pass.
    tick_sel = np.nonzero(np.array([t not in span_types and t not in line_types for t in s.types], bool)
                          & (s.counts > 0))[0] if len(s.types) else np.zeros(0, np.int64)
    wanted = {p for r in rows for p in r}
    tick_sel = tick_sel[np.isin(s.producers[tick_sel], np.array(sorted(wanted), np.int64))] if wanted else tick_sel[:0]
    lo_r, hi_r = _stream_ranges(s, tick_sel, start, end)
    in_view = hi_r - lo_r
    many = in_view > TICK_ITEMS
    binned = {}
    if many.any():
        ms = tick_sel[many]
        c = _core.binned_counts(pa.array(s.ts), pa.array(s.offsets[ms]), pa.array(s.offsets[ms] + s.counts[ms]),
                                pa.array(edges)).to_numpy().reshape(-1, width)
        binned = {int(st): c[i] for i, st in enumerate(ms)}
    by_producer: dict[int, list[int]] = {}
    for j, st in enumerate(tick_sel.tolist()):
        by_producer.setdefault(int(s.producers[st]), []).append(j)
    row_budget = MAX_ITEMS // max(1, len(rows))  # numbers per row: the answer stays within MAX_ITEMS
    for group in rows:
        row = {"producers": group, "label": ", ".join(names.get(p, str(p)) for p in group[:3])
               + (f" +{len(group) - 3}" if len(group) > 3 else ""), "levels": [], "ticks": []}
        budget = row_budget
        # ticks / counts per type, summed over the group's producers
        per_type: dict[str, dict] = {}
        for p in group:
            for j in by_producer.get(p, []):
                st = int(tick_sel[j])
                t = str(s.types[st])
                e = per_type.setdefault(t, {"type": t, "ts": [], "counts": None, "events": 0})
                e["events"] += int(in_view[j])
                if many[j]:
                    e["counts"] = binned[st] if e["counts"] is None else e["counts"] + binned[st]
                else:
                    e["ts"].append(s.ts[lo_r[j]:hi_r[j]])
        for t, e in per_type.items():
            pts = np.concatenate(e["ts"]) if e["ts"] else np.zeros(0, np.int64)
            if e["counts"] is not None or len(pts) > TICK_ITEMS or len(pts) > budget // 4:
                counts = e["counts"] if e["counts"] is not None else np.zeros(width, np.int64)
                if len(pts):
                    counts = counts + np.bincount(np.searchsorted(edges, pts, side="right") - 1, minlength=width)[:width]
                row["ticks"].append({"type": t, "mode": "bins", "counts": counts.tolist(), "events": e["events"]})
                budget -= width
            else:
                row["ticks"].append({"type": t, "mode": "items", "ts": np.sort(pts).tolist(), "events": e["events"]})
                budget -= len(pts)
        if len(group) == 1 and sd is not None:
            row["levels"], _used = _span_levels(prep, trace, sd, calls, group[0], start, end, edges, max_depth,
                                                max(0, budget))
        out_rows.append(row)
    doc = {"rows": out_rows, "start": start, "end": end, "width": width}
    if lines and line_types:
        doc["lines"] = _lines(prep, trace, line_types, rows, start, end, width)
    if calls is not None:
        doc["span_name_column"] = sd.config.name_column
        codes = [np.asarray(lv["name"], np.int64) for r in out_rows for lv in r["levels"] if "name" in lv]
        used = np.unique(np.concatenate(codes)) if codes else np.zeros(0, np.int64)
        used = used[used >= 0]
        doc["names"] = dict(zip(used.tolist(), calls.names.take(pa.array(used)).to_pylist()))
    return doc


def _span_levels(prep: Preparer, trace: str, sd: SpanData, calls, producer: int, start: int, end: int,
                 edges: np.ndarray, max_depth: int, budget: int) -> tuple[list[dict], int]:
    """Depth levels of one producer's spans in view, within `budget` numbers: a level's spans
    as bars while at most LEVEL_ITEMS (3 numbers each), else its busy share and dominant name
    per 2-pixel bin; levels past the budget are one {"mode": "cut"} (zoom in to see them)."""
    idx = sd.index
    prod = _index.array(idx, "producer")
    depth = _index.array(idx, "depth")
    lo, hi = _index.key_range([prod], [int(producer)])
    if lo == hi:
        return [], 0
    ts_all = _index.array(idx, "ts")
    end_all = _index.array(idx, "end_ts")
    end_max = _index.array(idx, "end_max") if "end_max" in idx.column_names else None
    cum = prep.cumdur(trace, sd)  # prefix sums of dur over the index rows
    lod = np.unique(np.concatenate([edges[::2], edges[-1:]]))  # 2-pixel bins for per-pixel levels
    levels, used = [], 0
    dmax = int(depth[hi - 1])  # rows of one producer are ordered by depth
    for d in range(0, min(dmax, max_depth) + 1):
        a, b = _index.key_range([depth], [d], lo, hi)
        if a == b:
            continue
        ts, en = ts_all[a:b], end_all[a:b]
        # Rows of one (producer, depth) are in ts order; their running maximum of end_ts (the
        # index's `end_max`, else end_ts: spans of one depth rarely overlap) finds the first
        # that may reach into the window.
        i = int(np.searchsorted(end_max[a:b] if end_max is not None else en, start, side="right"))
        j = int(np.searchsorted(ts, end, side="left"))
        n = max(0, j - i)
        if n == 0:
            levels.append({"depth": d, "mode": "items", "ts": [], "dur": [], "name": [], "id": []})
            continue
        cost = 4 * n if n <= LEVEL_ITEMS else 2 * (len(lod) - 1)
        if used + cost > budget:
            levels.append({"depth": d, "mode": "cut"})
            break
        used += cost
        if n <= LEVEL_ITEMS:
            rows = np.arange(a + i, a + j)
            rows = rows[end_all[rows] > start]  # an overlapped span may have ended before the window
            levels.append({"depth": d, "mode": "items", "ts": ts_all[rows].tolist(),
                           "dur": (end_all[rows] - ts_all[rows]).tolist(),
                           "name": calls.code[rows].tolist() if calls is not None else [],
                           "id": _index.array(idx, "span_id")[rows].tolist()})
        else:
            bi, bj = max(0, i - 1), min(len(ts), j + 1)
            # the prefix sums as a view: _busy only differences them (re-basing them on the
            # level's first span copied every span of the level, ~0.2 s on 100M events)
            busy = _busy(ts[bi:bj], en[bi:bj], lod, cum[a + bi:a + bj + 1])
            centers = (lod[:-1] + lod[1:]) // 2
            k = np.searchsorted(ts[bi:bj], centers, side="right") - 1
            inside = (k >= 0) & (en[bi:bj][np.maximum(k, 0)] > centers)
            name = np.where(inside, calls.code[a + bi + np.maximum(k, 0)], -1) if calls is not None \
                else np.full(len(centers), -1)
            levels.append({"depth": d, "mode": "busy", "busy": np.round(busy, 3).tolist(), "name": name.tolist(),
                           "spans": n})
    return levels, used


def _is_line_type(store: "Store", trace: str, et) -> bool:
    """Drawn as lines: counters, and line-protocol measurements (metrics written as instants)."""
    if not any(c.type in ("int64", "float64") for c in et.params):
        return False
    return et.kind == "counter" or store.trace(trace).format == "lineproto"


VALUE_COLUMNS = ("value", "usage_user", "val")
SERIES_COLUMNS = ("series", "variable_type", "name")


def _lines(prep: Preparer, trace: str, types: list[str], rows: list[list[int]], start: int, end: int,
           width: int) -> list[dict]:
    """Per-pixel min/avg/max of each counter series of the rows' producers (SQL: the range
    prunes row groups by their ts statistics)."""
    wanted = sorted({p for r in rows for p in r})
    if not wanted:
        return []
    all_types = prep.store.event_types(trace)
    out = []
    cap = max(1, MAX_ITEMS // 4 // max(1, len(types)))
    for t in types[:8]:
        et = all_types[t]
        nums = [c.name for c in et.params if c.type in ("int64", "float64")]
        value = next((c for c in VALUE_COLUMNS if c in nums), nums[0])
        strings = {c.name for c in et.params if c.type == "string"}
        series = next((c for c in SERIES_COLUMNS if c in strings), None)
        ser = f"CAST({qident(series)} AS VARCHAR)" if series else "''"
        q = (f"SELECT producer, {ser} AS series, CAST((ts - {start}) * {width}.0 / {end - start} AS BIGINT) AS bin, "
             f"min({qident(value)}) AS lo, avg({qident(value)}) AS mean, max({qident(value)}) AS hi "
             f"FROM {qident(trace)}.{qident(t)} WHERE ts >= {start} AND ts < {end} "
             f"AND producer IN ({', '.join(str(p) for p in wanted)}) AND {qident(value)} IS NOT NULL "
             f"GROUP BY ALL ORDER BY producer, series, bin LIMIT {cap}")
        tab = prep.store.sql(q)
        if tab.num_rows == 0:
            continue
        prod = tab.column("producer").to_numpy()
        ser_v = tab.column("series").to_numpy(zero_copy_only=False)
        key = np.array([f"{p}\x00{s}" for p, s in zip(prod.tolist(), ser_v.tolist())], dtype=object) \
            if tab.num_rows < 200_000 else None
        if key is None:
            continue
        cut = np.nonzero(key[1:] != key[:-1])[0] + 1
        bounds = np.concatenate([[0], cut, [tab.num_rows]])
        cols = {c: tab.column(c).to_numpy(zero_copy_only=False) for c in ("bin", "lo", "mean", "hi")}
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            out.append({"type": t, "value": value, "producer": int(prod[a]), "series": str(ser_v[a]),
                        "bin": cols["bin"][a:b].tolist(), "lo": cols["lo"][a:b].tolist(),
                        "mean": cols["mean"][a:b].tolist(), "hi": cols["hi"][a:b].tolist()})
    return out
