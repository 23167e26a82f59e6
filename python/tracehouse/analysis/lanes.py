"""The timeline's lanes: what one producer row of a time range looks like at a given width.

Owns the aggregates the web UI's timeline draws, bounded whatever the trace's size (an
answer never holds more than MAX_ITEMS numbers): per producer row, its spans per depth
level as bars while few (LEVEL_ITEMS), else per-pixel busy share and dominant name; per
collapsed group of producers, the sum of its subtree (per pixel, how many of them are
inside a top-level span, and the busiest one's span name); its other events as ticks
while few (TICK_ITEMS), else per-pixel counts; counters and line-protocol measurements as
per-pixel min/avg/max (SQL, row groups pruned by the range; a bin is
floor((ts - start) * width / (end - start)), never `width`). Spans come from the span
index (binary searches per depth level, busy time from the prefix sums of durations:
`windows.cumdur`), events from the density index's streams (`event_streams.Streams`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from .. import _core
from ..errors import BadInput
from ..schema import Column
from ..store.query import qident
from . import event_streams, indexes, windows
from .calltree import call_paths, producer_names
from .profiles import infer_span_config
from .registry import Analysis, Answer, Param, Window
from .spans import span_index

if TYPE_CHECKING:
    from ..store import Store

MAX_ITEMS = 100_000  # numbers of one answer, at most (the browser's budget)
LEVEL_ITEMS = 2_000  # spans of one depth level of one row drawn as bars; more: per-pixel
TICK_ITEMS = 1_000  # instants of one stream drawn as ticks; more: per-pixel counts
MAX_ROWS = 200
MAX_FIELDS = 8  # value columns of one line type drawn at once


def busy_share(ts: np.ndarray, end_ts: np.ndarray, edges: np.ndarray, cum: np.ndarray | None = None) -> np.ndarray:
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


def timeline(
    store: Store,
    trace: str,
    w: Window,
    rows: list[list[int]],
    width: int = 1000,
    max_depth: int = 12,
    lines: bool = True,
    fields: list[str] | None = None,
) -> dict:
    """Rows of the timeline over the window, each one producer (or a collapsed group of them):
    spans as bars per depth level (or per-pixel busy share and dominant name when a level has
    more than LEVEL_ITEMS in view), other events as ticks (or per-pixel counts), counters as
    per-pixel min/avg/max (of `fields`, the numeric columns named: the type's first value
    column by default)."""
    width = max(10, min(int(width), 4000))
    rows = rows[:MAX_ROWS]
    s = event_streams.streams(store, trace)
    if s.lo is None:
        return {"rows": [], "start": None, "end": None, "width": width}
    start, end = w.bounds(s.lo, s.hi)
    edges = event_streams.bin_edges(start, end, width)
    cfg, _why = infer_span_config(store, trace)
    idx = span_index(store, trace, cfg) if cfg is not None else None
    calls = call_paths(store, trace, cfg) if cfg is not None else None
    span_types = set()
    if cfg is not None:
        span_types = {cfg.begin} | ({cfg.end} if cfg.end else set())
    types = store.event_types(trace)
    line_types = [t for t, et in types.items() if _is_line_type(store, trace, et)]
    names = producer_names(store, trace)
    out_rows = []
    # Event streams (not spans, not lines) of every requested producer, counted in one pass.
    tick_sel = (
        np.nonzero(np.array([t not in span_types and t not in line_types for t in s.types], bool) & (s.counts > 0))[0]
        if len(s.types)
        else np.zeros(0, np.int64)
    )
    wanted = {p for r in rows for p in r}
    tick_sel = tick_sel[np.isin(s.producers[tick_sel], np.array(sorted(wanted), np.int64))] if wanted else tick_sel[:0]
    lo_r, hi_r = s.ranges(tick_sel, start, end)
    in_view = hi_r - lo_r
    many = in_view > TICK_ITEMS
    binned = {}
    if many.any():
        ms = tick_sel[many]
        c = (
            _core.binned_counts(
                pa.array(s.ts), pa.array(s.offsets[ms]), pa.array(s.offsets[ms] + s.counts[ms]), pa.array(edges)
            )
            .to_numpy()
            .reshape(-1, width)
        )
        binned = {int(st): c[i] for i, st in enumerate(ms)}
    by_producer: dict[int, list[int]] = {}
    for j, st in enumerate(tick_sel.tolist()):
        by_producer.setdefault(int(s.producers[st]), []).append(j)
    row_budget = MAX_ITEMS // max(1, len(rows))  # numbers per row: the answer stays within MAX_ITEMS
    for group in rows:
        row = {
            "producers": group,
            "label": ", ".join(names.get(p, str(p)) for p in group[:3])
            + (f" +{len(group) - 3}" if len(group) > 3 else ""),
            "levels": [],
            "ticks": [],
        }
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
                    e["ts"].append(s.ts[lo_r[j] : hi_r[j]])
        for t, e in per_type.items():
            pts = np.concatenate(e["ts"]) if e["ts"] else np.zeros(0, np.int64)
            if e["counts"] is not None or len(pts) > TICK_ITEMS or len(pts) > budget // 4:
                counts = e["counts"] if e["counts"] is not None else np.zeros(width, np.int64)
                if len(pts):
                    counts = (
                        counts + np.bincount(np.searchsorted(edges, pts, side="right") - 1, minlength=width)[:width]
                    )
                row["ticks"].append({"type": t, "mode": "bins", "counts": counts.tolist(), "events": e["events"]})
                budget -= width
            else:
                row["ticks"].append({"type": t, "mode": "items", "ts": np.sort(pts).tolist(), "events": e["events"]})
                budget -= len(pts)
        if len(group) == 1 and idx is not None:
            row["levels"], _used = _span_levels(idx, calls, group[0], start, end, edges, max_depth, max(0, budget))
        elif idx is not None:
            row["levels"] = _group_level(idx, calls, group, start, end, edges, max(0, budget))
        out_rows.append(row)
    doc = {"rows": out_rows, "start": start, "end": end, "width": width}
    if lines and line_types:
        doc["lines"] = _lines(store, trace, line_types, rows, start, end, width, fields)
        doc["fields"] = {t: [c.name for c in types[t].params if c.type in ("int64", "float64")] for t in line_types}
    if calls is not None:
        doc["span_name_column"] = cfg.name_column
        codes = [np.asarray(lv["name"], np.int64) for r in out_rows for lv in r["levels"] if "name" in lv]
        used = np.unique(np.concatenate(codes)) if codes else np.zeros(0, np.int64)
        used = used[used >= 0]
        doc["names"] = dict(zip(used.tolist(), calls.names.take(pa.array(used)).to_pylist()))
    return doc


def _span_levels(
    idx, calls, producer: int, start: int, end: int, edges: np.ndarray, max_depth: int, budget: int
) -> tuple[list[dict], int]:
    """Depth levels of one producer's spans in view, within `budget` numbers: a level's spans
    as bars while at most LEVEL_ITEMS (3 numbers each), else its busy share and dominant name
    per 2-pixel bin; levels past the budget are one {"mode": "cut"} (zoom in to see them)."""
    prod = indexes.array(idx, "producer")
    depth = indexes.array(idx, "depth")
    lo, hi = indexes.key_range([prod], [int(producer)])
    if lo == hi:
        return [], 0
    ts_all = indexes.array(idx, "ts")
    end_all = indexes.array(idx, "end_ts")
    end_max = indexes.array(idx, "end_max") if "end_max" in idx.column_names else None
    cum = windows.cumdur(idx)  # prefix sums of dur over the index rows
    lod = np.unique(np.concatenate([edges[::2], edges[-1:]]))  # 2-pixel bins for per-pixel levels
    levels, used = [], 0
    dmax = int(depth[hi - 1])  # rows of one producer are ordered by depth
    for d in range(0, min(dmax, max_depth) + 1):
        a, b = indexes.key_range([depth], [d], lo, hi)
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
            levels.append(
                {
                    "depth": d,
                    "mode": "items",
                    "ts": ts_all[rows].tolist(),
                    "dur": (end_all[rows] - ts_all[rows]).tolist(),
                    "name": calls.code[rows].tolist() if calls is not None else [],
                    "id": indexes.array(idx, "span_id")[rows].tolist(),
                }
            )
        else:
            bi, bj = max(0, i - 1), min(len(ts), j + 1)
            # the prefix sums as a view: _busy only differences them (re-basing them on the
            # level's first span copied every span of the level, ~0.2 s on 100M events)
            busy = busy_share(ts[bi:bj], en[bi:bj], lod, cum[a + bi : a + bj + 1])
            centers = (lod[:-1] + lod[1:]) // 2
            k = np.searchsorted(ts[bi:bj], centers, side="right") - 1
            inside = (k >= 0) & (en[bi:bj][np.maximum(k, 0)] > centers)
            name = (
                np.where(inside, calls.code[a + bi + np.maximum(k, 0)], -1)
                if calls is not None
                else np.full(len(centers), -1)
            )
            levels.append(
                {"depth": d, "mode": "busy", "busy": np.round(busy, 3).tolist(), "name": name.tolist(), "spans": n}
            )
    return levels, used


def _group_level(idx, calls, group: list[int], start: int, end: int, edges: np.ndarray, budget: int) -> list[dict]:
    """A collapsed group's one level, the sum of its subtree: per 2-pixel bin how many of its
    producers are inside a top-level span (the sum of their busy shares, exact from the prefix
    sums of durations) and the name of the span the busiest of them is in."""
    lod = np.unique(np.concatenate([edges[::2], edges[-1:]]))
    if 2 * (len(lod) - 1) > budget:
        return [{"depth": 0, "mode": "cut"}]
    prod = indexes.array(idx, "producer")
    depth = indexes.array(idx, "depth")
    ts_all = indexes.array(idx, "ts")
    end_all = indexes.array(idx, "end_ts")
    cum = windows.cumdur(idx)
    centers = (lod[:-1] + lod[1:]) // 2
    total = np.zeros(len(lod) - 1)
    best = np.zeros(len(lod) - 1)
    name = np.full(len(lod) - 1, -1, np.int64)
    spans = busy_producers = 0
    for p in group:
        lo, hi = indexes.key_range([prod], [int(p)])
        a, b = indexes.key_range([depth], [0], lo, hi) if lo < hi else (lo, lo)
        if a == b:
            continue
        ts, en = ts_all[a:b], end_all[a:b]
        i, j = int(np.searchsorted(en, start, side="right")), int(np.searchsorted(ts, end, side="left"))
        if j <= i:
            continue
        spans += j - i
        busy_producers += 1
        share = busy_share(ts, en, lod, cum[a : b + 1])
        total += share
        k = np.searchsorted(ts, centers, side="right") - 1
        inside = (k >= 0) & (en[np.maximum(k, 0)] > centers)
        better = inside & (share > best)
        if calls is not None:
            name = np.where(better, calls.code[a + np.maximum(k, 0)], name)
        best = np.where(better, share, best)
    if spans == 0:
        return []
    return [
        {
            "depth": 0,
            "mode": "sum",
            "busy": np.round(total, 3).tolist(),
            "name": name.tolist(),
            "spans": spans,
            "producers": busy_producers,
        }
    ]


def _is_line_type(store: Store, trace: str, et) -> bool:
    """Drawn as lines: counters, and line-protocol measurements (metrics written as instants)."""
    if not any(c.type in ("int64", "float64") for c in et.params):
        return False
    return et.kind == "counter" or store.trace(trace).format == "lineproto"


VALUE_COLUMNS = ("value", "usage_user", "val")
SERIES_COLUMNS = ("series", "variable_type", "name")


def _lines(
    store: Store,
    trace: str,
    types: list[str],
    rows: list[list[int]],
    start: int,
    end: int,
    width: int,
    fields: list[str] | None = None,
) -> list[dict]:
    """Per-pixel min/avg/max of each counter series of the rows' producers, per field of
    `fields` the type has (else its first value column) (SQL: the range prunes row groups
    by their ts statistics)."""
    wanted = sorted({p for r in rows for p in r})
    if not wanted:
        return []
    all_types = store.event_types(trace)
    out = []
    cap = max(1, MAX_ITEMS // 4 // max(1, len(types)))
    for t in types[:8]:
        et = all_types[t]
        nums = [c.name for c in et.params if c.type in ("int64", "float64")]
        values = [f for f in (fields or []) if f in nums][:MAX_FIELDS] or [
            next((c for c in VALUE_COLUMNS if c in nums), nums[0])
        ]
        for value in values:
            out += _line_series(store, trace, t, et, value, wanted, start, end, width, cap)
    return out


def _line_series(
    store: Store, trace: str, t: str, et, value: str, wanted: list[int], start: int, end: int, width: int, cap: int
) -> list[dict]:
    """One value column of line type `t`: per producer and series, per-pixel min/avg/max."""
    strings = {c.name for c in et.params if c.type == "string"}
    series = next((c for c in SERIES_COLUMNS if c in strings), None)
    ser = f"CAST({qident(series)} AS VARCHAR)" if series else "''"
    # floor, and never `width`: a float product rounded to an integer could reach it
    binned = f"LEAST({width - 1}, CAST(floor((ts - {start}) * {width}.0 / {end - start}) AS BIGINT))"
    q = (
        f"SELECT producer, {ser} AS series, {binned} AS bin, "
        f"min({qident(value)}) AS lo, avg({qident(value)}) AS mean, max({qident(value)}) AS hi "
        f"FROM {qident(trace)}.{qident(t)} WHERE ts >= {start} AND ts < {end} "
        f"AND producer IN ({', '.join(str(p) for p in wanted)}) AND {qident(value)} IS NOT NULL "
        f"GROUP BY ALL ORDER BY producer, series, bin LIMIT {cap}"
    )
    tab = store.sql(q)
    if tab.num_rows == 0 or tab.num_rows >= 200_000:
        return []
    prod = tab.column("producer").to_numpy()
    ser_v = tab.column("series").to_numpy(zero_copy_only=False)
    key = np.array([f"{p}\x00{s}" for p, s in zip(prod.tolist(), ser_v.tolist())], dtype=object)
    cut = np.nonzero(key[1:] != key[:-1])[0] + 1
    bounds = np.concatenate([[0], cut, [tab.num_rows]])
    cols = {c: tab.column(c).to_numpy(zero_copy_only=False) for c in ("bin", "lo", "mean", "hi")}
    return [
        {
            "type": t,
            "value": value,
            "producer": int(prod[a]),
            "series": str(ser_v[a]),
            "bin": cols["bin"][a:b].tolist(),
            "lo": cols["lo"][a:b].tolist(),
            "mean": cols["mean"][a:b].tolist(),
            "hi": cols["hi"][a:b].tolist(),
        }
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())
    ]


# -- as an analysis ------------------------------------------------------------------------------


def parse_rows(spec: str | None) -> list[list[int]]:
    """'1;2,3;4': rows separated by ';', a row's producers by ','."""
    try:
        return [[int(p) for p in r.split(",") if p.strip()] for r in (spec or "").split(";") if r.strip()]
    except ValueError:
        raise BadInput(
            f"rows={spec!r}", expected="producer ids, rows separated by ';', a row's producers by ','"
        ) from None


@dataclass
class Lanes(Answer):
    doc: dict

    def table(self) -> pa.Table:
        out = {"row": [], "producers": [], "depth": [], "mode": [], "items": []}
        for i, r in enumerate(self.doc.get("rows", [])):
            for lv in r["levels"]:
                out["row"].append(i)
                out["producers"].append(",".join(map(str, r["producers"])))
                out["depth"].append(lv["depth"])
                out["mode"].append(lv["mode"])
                out["items"].append(len(lv.get("ts", lv.get("busy", []))))
        return pa.table(
            {
                "row": pa.array(out["row"], pa.int64()),
                "producers": pa.array(out["producers"], pa.string()),
                "depth": pa.array(out["depth"], pa.int64()),
                "mode": pa.array(out["mode"], pa.string()),
                "items": pa.array(out["items"], pa.int64()),
            }
        )

    def to_json(self, shown: dict) -> dict:
        return self.doc


def _timeline(store, trace, window, *, rows=None, width=1000, max_depth=12, lines=True, fields=None) -> Lanes:
    got = parse_rows(rows)
    if not got:  # default: the first producers
        got = [[int(p["id"])] for p in store.producers(trace)[:40]]
    chosen = [f.strip() for f in (fields or "").split(",") if f.strip()]
    return Lanes(timeline(store, trace, window, got, width, max_depth, lines, chosen or None))


TIMELINE = Analysis(
    "timeline",
    "what each producer row of a time range looks like at a given width (the web UI's timeline)",
    _timeline,
    params=(
        Param(
            "rows",
            "str",
            "",
            "producer rows: '1;2,3;4' (a row of several is a collapsed group; default the first 40 producers)",
        ),
        Param("width", "int", "px", "pixels across the range", default=1000),
        Param("max_depth", "int", "count", "deepest span level drawn", default=12),
        Param("lines", "bool", "", "also counters and measurements as lines", default=True),
        Param("fields", "str", "", "the value columns drawn as lines, comma-separated (default: each type's first)"),
        Param("start", "time", "ns", "the range: from", window="start"),
        Param("end", "time", "ns", "... to", window="end"),
    ),
    columns=(
        Column("row", "int64", "index", "the row"),
        Column("producers", "string", "", "its producers"),
        Column("depth", "int64", "count", "a span level of the row"),
        Column("mode", "string", "", "items (bars), busy (per-pixel share) or cut (past the budget)"),
        Column("items", "int64", "count", "bars or pixels in the level"),
    ),
    columns_note="`--json` gives every level's bars (ts, dur, name code, span id) or busy shares, the ticks and "
    "the lines; at most 100,000 numbers.",
    uses=("density", "spans", "calls"),
)
