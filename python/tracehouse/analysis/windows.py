"""Which rows of the span index a window selects, found by binary searches.

Owns the fast paths of the span analyses over a selection (`registry.Window`: a time range
and a set of producers): the spans overlapping the window (flame graphs, the timeline: their
durations clipped to it) or starting in it (histograms, the longest spans, time by state).
The span index is ordered by (producer, depth, ts) and lists its (producer, depth) runs in
its metadata, so each run holds its spans of the window in one run of rows, found by two
binary searches (ts; the running maximum of end_ts for overlaps): the cost follows the
window and the number of runs, not the trace. The whole trace is `slice(None)`: the index's
columns as they are.

Also kept per index (on the mapped index object, so once per process): the spans' name
codes (`names`: the span name of each row as a code into a string array; the by-state
statistics and the call paths use it) and the prefix sums of the durations (`cumdur`: a
run's busy time between two instants is two lookups, the timeline's).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from . import indexes
from .profiles import SpanConfig
from .registry import Window
from .spans import begin_column, name_codes


@dataclass
class Blocks:
    """Runs of span index rows with one (producer, depth): block i is rows [start, end)."""

    start: np.ndarray
    end: np.ndarray
    producer: np.ndarray
    depth: np.ndarray
    all_closed: bool


def blocks(idx: indexes.PackedIndex) -> Blocks:
    got = getattr(idx, "_blocks", None)
    if got is None:
        runs = idx.runs() if idx.num_rows else np.zeros((0, 4), np.int64)
        closed = indexes.array(idx, "closed") if idx.num_rows else np.zeros(0, bool)
        got = Blocks(runs[:, 2].copy(), runs[:, 3].copy(), runs[:, 0].copy(), runs[:, 1].copy(), bool(closed.all()))
        idx._blocks = got
    return got


def cumdur(idx: indexes.PackedIndex) -> np.ndarray:
    """Prefix sums of the span durations over the index rows (len + 1; 8 bytes a span)."""
    got = getattr(idx, "_cumdur", None)
    if got is None:
        dur = indexes.array(idx, "end_ts") - indexes.array(idx, "ts")
        got = idx._cumdur = np.concatenate([[0], np.cumsum(dur)])
    return got


def names_key(config: SpanConfig) -> tuple:
    """What `names` keeps its answer under (the call paths, saved, prime it)."""
    return ("names", config.name_column, config.begin)


def names(idx: indexes.PackedIndex, config: SpanConfig) -> tuple[np.ndarray, pa.Array]:
    """(int32 name code per index row, code -> name): the name column of the spans (the
    pairing's), or the begin type for every span when it names none."""
    key = names_key(config)
    got = getattr(idx, "_names", None)
    if got is None or got[0] != key:
        col = begin_column(config.name_column) if config.name_column else None
        if col and col in idx.column_names and idx.num_rows:
            codes, strings = name_codes(idx.column(col))
        else:
            codes, strings = np.zeros(idx.num_rows, np.int64), pa.array([config.begin])
        got = (key, codes.astype(np.int32), strings)
        idx._names = got
    return got[1], got[2]


def is_whole(window: Window, lo: int | None, hi: int | None) -> bool:
    """The window covers the trace's every event and producer."""
    if window.producers is not None:
        return False
    if lo is None:
        return True
    return (window.start is None or window.start <= lo) and (window.end is None or window.end > hi)


def ranges(
    idx: indexes.PackedIndex, window: Window, lo: int | None, hi: int | None, *, overlap: bool, runs: bool = False
) -> tuple[np.ndarray, ...]:
    """(starts, ends): per (producer, depth) run of the window's producers, the rows
    [start, end) of its spans overlapping the window (overlap=True: up to the last with
    ts < end, from the first whose running maximum end passes the start; a span of these
    may still end at or before the start: `end_ts > start` is checked by whoever reads
    them) or starting in it. Empty runs are left out. Not for the whole trace (`is_whole`).
    runs=True: also each range's run (its number in `blocks`)."""
    start, end = window.bounds(lo, hi)
    b = blocks(idx)
    sel = np.arange(len(b.start))
    if window.producers is not None:
        sel = sel[np.isin(b.producer, np.array(window.producers, np.int64))]
    ts = indexes.array(idx, "ts")
    # searched in place (a few probes per run): decoding end_max whole costs 0.5 s on 17M spans
    reach = indexes.column(idx, "end_max" if overlap and "end_max" in idx.column_names else "end_ts")
    a, z = b.start[sel], b.end[sel]
    first, last = np.zeros(len(sel), np.int64), np.zeros(len(sel), np.int64)
    for k, (x, y) in enumerate(zip(a.tolist(), z.tolist())):  # one pair of searches per run
        first[k] = x + (
            indexes.search(reach[x:y], start, "right") if overlap else indexes.search(ts[x:y], start, "left")
        )
        last[k] = x + indexes.search(ts[x:y], end, "left")
    keep = last > first
    return (first[keep], last[keep], sel[keep]) if runs else (first[keep], last[keep])


def rows(
    idx: indexes.PackedIndex, window: Window, lo: int | None, hi: int | None, *, overlap: bool
) -> np.ndarray | slice:
    """Rows of the spans overlapping the window (overlap=True) or starting in it; `lo`, `hi`:
    the trace's first and last event time. The whole trace: slice(None)."""
    if is_whole(window, lo, hi):
        return slice(None)
    start, _end = window.bounds(lo, hi)
    parts = [np.arange(i, j, dtype=np.int64) for i, j in zip(*ranges(idx, window, lo, hi, overlap=overlap))]
    out = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    if overlap and len(out):
        out = out[indexes.array(idx, "end_ts")[out] > start]
    return out


def overlapping(
    idx: indexes.PackedIndex, window: Window, lo: int | None, hi: int | None
) -> tuple[np.ndarray | slice, np.ndarray]:
    """(rows, durations clipped to the window) of the spans overlapping it."""
    r = rows(idx, window, lo, hi, overlap=True)
    if isinstance(r, slice):  # the whole trace: nothing to clip
        return r, indexes.array(idx, "dur")
    start, end = window.bounds(lo, hi)
    ts = indexes.array(idx, "ts")[r]
    end_ts = indexes.array(idx, "end_ts")[r]
    return r, np.minimum(end_ts, end) - np.maximum(ts, start)


def starting_values(
    idx: indexes.PackedIndex, name: str, window: Window, lo: int | None, hi: int | None, *, closed_only: bool = True
) -> np.ndarray:
    """Column `name` of the spans starting in the window (`starting`), copied run by run
    (slices, no row numbers: 3x less work than a gather through `starting`'s rows)."""
    col = indexes.array(idx, name)
    closed = indexes.array(idx, "closed") if closed_only and not blocks(idx).all_closed else None
    if is_whole(window, lo, hi):
        return col if closed is None else col[closed]
    first, last = ranges(idx, window, lo, hi, overlap=False)
    parts = [col[a:z] if closed is None else col[a:z][closed[a:z]] for a, z in zip(first.tolist(), last.tolist())]
    return np.concatenate(parts) if parts else col[:0]


def starting(
    idx: indexes.PackedIndex, window: Window, lo: int | None, hi: int | None, *, closed_only: bool = True
) -> np.ndarray | slice:
    """Rows of the spans starting in the window (only the closed ones unless told); the whole
    trace when every span qualifies: slice(None)."""
    r = rows(idx, window, lo, hi, overlap=False)
    if not closed_only:
        return r
    closed = indexes.array(idx, "closed")
    if isinstance(r, slice):
        return r if blocks(idx).all_closed else np.flatnonzero(closed)
    return r[closed[r]]
