"""What each page of the UI shows: the registry's analyses, shaped for their charts.

Owns the answers of the `/api/ui/trace/...` routes and of the generic `/api/ui/analysis`.
Nothing here computes a statistic: every view runs an analysis of the registry
(`tracehouse.analysis.registry`) over the linked selection (`Window`: a time range and a
set of producers) and shapes its answer for the page, bounded whatever the trace's size
(the browser never gets more than ~100K numbers):

  density      `density` by type (series beyond MAX_SERIES summed as "other")
  stats        `stats` by type, producer, state or link (TOP_GROUPS slices, then "other")
  histogram    `hist` / `lhist` of the closed spans starting in the window
  top spans    `top`                   flame        `tree` (paths under a share cut, at
  timeline     `timeline`                            most MAX_NODES)   frame  `path`

Before an analysis runs, the derived data it reads (`Analysis.uses`) is made ready by
the Preparer (prepare.py): inline on a small trace, by a background job on a big one (the
request then answers Pending). The analyses' fast paths are theirs (the same answer from
`tracehouse analyze`): the density index answers counts by type and producer in
milliseconds, the span index and the call paths kept per trace answer by state, top spans,
histograms and flame graphs of any window.
"""

from __future__ import annotations

import numpy as np

from ...analysis import registry
from ...analysis.profiles import infer_span_config
from ...analysis.registry import Window
from ...errors import BadInput
from .prepare import Preparer

MAX_BINS = 2_000
MAX_SERIES = 24  # density series (types) shown; the rest are summed into "other"
TOP_GROUPS = 15  # pie/bar slices; the rest is "other"
MAX_NODES = 5_000  # flame graph frames sent, at most
MAX_TABLE_ROWS = 200  # rows of the statistics' tables beside their pies
MAX_ROWS_SHOWN = 1_000  # rows of a generic analysis' answer sent, at most

__all__ = [
    "Window",
    "analysis",
    "analyses",
    "density",
    "flame",
    "frame_spans",
    "hist",
    "stats",
    "timeline",
    "top_spans",
]


def run(prep: Preparer, name: str, trace, w: Window, **params):
    """Analysis `name` of the registry over the window, once what it reads is ready."""
    a = registry.get(name)
    prep.ensure(trace if isinstance(trace, str) else trace[0], a.uses)
    return a.call(prep.store, trace, w, **params)


def _no_spans(prep: Preparer, trace: str) -> str | None:
    """Why the trace has no spans to show, or None."""
    cfg, why = infer_span_config(prep.store, trace)
    return why if cfg is None else None


def _sampled(prep: Preparer, trace: str) -> bool:
    """Whether the trace's format declares stack samples (perf) that it holds."""
    from ...analysis.samples import sample_config

    return sample_config(prep.store, trace) is not None


# -- density --------------------------------------------------------------------------------


def density(prep: Preparer, trace: str, w: Window, bins: int = 1000) -> dict:
    """Events per bin by type over the window (series beyond MAX_SERIES summed as other)."""
    bins = max(1, min(int(bins), MAX_BINS))
    t = run(prep, "density", [trace], w, bins=bins, by="type").table()
    if t.num_rows == 0:
        return {"start": None, "end": None, "bins": bins, "bin_start": [], "series": [], "total": []}
    counts = t.column("events").to_numpy().reshape(-1, bins)
    types = t.column("type").to_numpy(zero_copy_only=False)[::bins]
    starts = t.column("bin_start").to_numpy()[:bins]
    start, end = int(starts[0]), int(t.column("bin_end")[bins - 1].as_py())
    order = np.argsort(-counts.sum(axis=1), kind="stable")
    series = [{"type": str(types[i]), "counts": counts[i].tolist()} for i in order[:MAX_SERIES]]
    if len(order) > MAX_SERIES:
        series.append({"type": "other", "counts": counts[order[MAX_SERIES:]].sum(axis=0).tolist()})
    return {
        "start": start,
        "end": end,
        "bins": bins,
        "bin_start": starts.tolist(),
        "series": series,
        "total": counts.sum(axis=0).tolist(),
    }


# -- statistics -------------------------------------------------------------------------------


def _top(rows: list[dict], measure: str, sums: tuple[str, ...]) -> list[dict]:
    """The TOP_GROUPS rows largest by `measure`, then one "other" row summing the rest."""
    if len(rows) <= TOP_GROUPS:
        return rows
    rest = rows[TOP_GROUPS:]
    other = {"key": None, "label": f"other ({len(rest)})"} | {k: sum(r[k] or 0 for r in rest) for k in sums}
    return rows[:TOP_GROUPS] + [other]


def stats(prep: Preparer, trace: str, w: Window, by: str) -> dict:
    """FrameSoC's four statistics: by type, by producer, by state duration, by link duration."""
    if by not in ("type", "producer", "state", "link"):
        raise BadInput(f"statistics by {by!r}", expected="type | producer | state | link")
    if by == "state":
        why = _no_spans(prep, trace)
        if why is not None:
            return {"by": "state", "rows": [], "total": 0, "why": why}
    t = run(prep, "stats", [trace], w, by=by).table().to_pylist()
    if by in ("type", "producer"):
        kinds = {k: et.kind for k, et in prep.store.event_types(trace).items()} if by == "type" else {}
        rows = [
            {
                "key": r[by],
                "label": r[by] if by == "type" else (r["name"] or str(r["producer"])),
                "events": r["events"],
                "total_dur": r["total_dur"] or 0,
            }
            | ({"kind": kinds.get(r["type"], "")} if by == "type" else {})
            for r in t
        ]
        doc = {
            "by": by,
            "rows": _top(rows, "events", ("events", "total_dur")),
            "total": sum(r["events"] for r in t),
            "groups": len(t),
        }
        info = prep.store.trace(trace)
        if info.ts_min is not None:
            doc["start"], doc["end"] = w.bounds(info.ts_min, info.ts_max)
        return doc
    if by == "state":
        # By self time: a span's children are not counted twice (a recursive call's nested
        # spans summed by total exceed the trace); the pie shows the TOP_GROUPS states, the
        # table beside it the first MAX_TABLE_ROWS.
        rows = sorted(
            (
                {
                    "key": r["state"],
                    "label": r["state"],
                    "spans": r["spans"],
                    "total_dur": r["total_dur"],
                    "self_dur": r["self_dur"] or 0,
                    "mean_dur": r["mean_dur"],
                    "max_dur": r.get("max_dur"),
                }
                for r in t
            ),
            key=lambda r: -r["self_dur"],
        )
        out = _top(rows, "self_dur", ("spans", "total_dur", "self_dur"))
        if len(rows) > TOP_GROUPS:
            out[-1]["mean_dur"] = out[-1]["total_dur"] / max(1, out[-1]["spans"])
        cfg, _ = infer_span_config(prep.store, trace)
        return {
            "by": "state",
            "rows": out,
            "table": rows[:MAX_TABLE_ROWS],
            "measure": "self_dur",
            "total": sum(r["self_dur"] for r in rows),
            "spans": sum(r["spans"] for r in rows),
            "state": cfg.name_column or cfg.begin,
            "groups": len(t),
        }
    if not t:
        return {"by": "link", "rows": [], "total": 0, "why": "no link event types with an end time in this trace"}
    rows = [
        {
            "key": r["label"],
            "label": r["label"],
            "links": r["links"],
            "total_dur": r["total_dur"],
            "mean_dur": r["mean_dur"],
        }
        for r in t[:TOP_GROUPS]
    ]
    return {"by": "link", "rows": rows, "total": sum(r["total_dur"] or 0 for r in rows)}


# -- span durations ---------------------------------------------------------------------------------


def hist(
    prep: Preparer,
    trace: str,
    w: Window,
    *,
    kind: str = "hist",
    unit: str = "us",
    k: int = 0,
    lo: int | None = None,
    hi: int | None = None,
    step: int | None = None,
) -> dict:
    """bpftrace `hist` (log2) or `lhist` (linear) of the closed spans starting in the window,
    with count/mean/p50/p90/p99 in ns (lhist without bounds: 0 to the 99th percentile)."""
    why = _no_spans(prep, trace)
    if why is not None:
        return {"why": why, "buckets": []}
    kw = {"k": k} if kind == "hist" else {"min": lo, "max": hi, "step": step}
    h = run(prep, kind, trace, w, unit=unit, **kw).h
    doc = h.to_json()
    doc["summary"] = {"": h.summary.get("", {"count": 0})}
    doc["spans"] = int(h.counts.sum())
    doc["buckets"] = [{kk: b[kk] for kk in ("bucket", "low", "high", "label", "count")} for b in doc["buckets"]]
    return doc


def top_spans(prep: Preparer, trace: str, w: Window, n: int = 25) -> dict:
    """The longest closed spans starting in the window."""
    why = _no_spans(prep, trace)
    if why is not None:
        return {"why": why, "rows": []}
    got = run(prep, "top", trace, w, n=max(1, min(int(n), 1000)))
    return {"rows": got.rows.to_pylist(), "spans": got.count}


# -- flame graph ------------------------------------------------------------------------------------


def flame(
    prep: Preparer, trace: str, w: Window, min_share: float = 0.001, max_nodes: int = MAX_NODES, root: int | None = None
) -> dict:
    """The calling-context tree of the spans overlapping the window, their durations clipped
    to it (of the stack samples in it, for a sampled trace, weighed by their period): per node
    calls, total, self ns and the time of its children left out (`cut`, drawn as an "other"
    frame); nodes under `min_share` of the root are cut. With `root`, that path's subtree (its
    frames under `min_share` of its own total cut) and its ancestors."""
    sampled = _sampled(prep, trace)
    why = None if sampled else _no_spans(prep, trace)
    if why is not None:
        return {"why": why, "nodes": []}
    tree = run(prep, "tree", trace, w, min_share=max(float(min_share), 0.0), max_paths=max_nodes, root=root)
    extra = {"samples": tree.spans} if sampled else {}
    if tree.total == 0:
        return {"nodes": [], "total": 0, "start": tree.start, "end": tree.end, "spans": tree.spans} | extra
    t = tree.rows
    cols = {
        c: t.column(c).to_pylist()
        for c in ("node", "parent", "depth", "name", "calls", "total_ns", "self_ns", "cut_ns")
    }
    nodes = [
        {
            "id": cols["node"][i],
            "parent": cols["parent"][i],
            "depth": cols["depth"][i],
            "name": str(cols["name"][i]),
            "calls": cols["calls"][i],
            "total": cols["total_ns"][i],
            "self": cols["self_ns"][i],
            "cut": cols["cut_ns"][i],
        }
        for i in range(t.num_rows)
    ]
    return {
        "nodes": nodes,
        "total": tree.total,
        "start": tree.start,
        "end": tree.end,
        "spans": tree.spans,
        "threshold_ns": tree.threshold_ns,
        "paths": tree.paths,
        "root": root,
    } | extra


def frame_spans(prep: Preparer, trace: str, w: Window, node: int, n: int = 100) -> dict:
    """The spans behind one flame-graph frame (call path `node`) in the window, longest first."""
    if _sampled(prep, trace):
        return {
            "why": "a frame of stack samples: its samples are rows of the trace's sample type (SQL console)",
            "rows": [],
        }
    why = _no_spans(prep, trace)
    if why is not None:
        return {"why": why, "rows": []}
    got = run(prep, "path", trace, w, node=node, n=max(1, min(int(n), 1000)))
    return {"node": int(node), "path": got.path, "count": got.count, "rows": got.rows.to_pylist()}


# -- timeline ---------------------------------------------------------------------------------------


def timeline(
    prep: Preparer,
    trace: str,
    w: Window,
    rows: str | None,
    width: int = 1000,
    max_depth: int = 12,
    lines: bool = True,
    fields: str | None = None,
) -> dict:
    """Rows of the timeline over the window (`analysis.lanes`)."""
    return run(
        prep,
        "timeline",
        trace,
        w,
        rows=rows,
        width=max(10, min(int(width), 4000)),
        max_depth=max_depth,
        lines=lines,
        fields=fields,
    ).doc


# -- any analysis -------------------------------------------------------------------------------------


def analyses(prep: Preparer, trace: str | None = None) -> list[dict]:
    """Every analysis of the registry, as the page lists it (with whether it applies to `trace`)."""
    out = []
    for a in registry.analyses().values():
        doc = a.to_json()
        if trace is not None:
            ok, why = registry.applies(a, prep.store, trace)
            doc |= {"applies": ok, "why": why}
        out.append(doc)
    return out


def analysis(prep: Preparer, name: str, trace: str, w: Window, given: dict[str, str]) -> dict:
    """Analysis `name` over `trace` and the window with its parameters given as text: its
    rows (the first MAX_ROWS_SHOWN, with every column's type and unit) and its JSON."""
    a = registry.get(name)
    if a.cli_only is not None:
        raise BadInput(f"analysis {name} runs on the command line only", expected=f"tracehouse analyze {name}")
    shown = {p.name: p.convert(given.pop(p.name)) for p in a.params if not p.answer and p.name in given}
    if a.traces == "one":
        traces = trace
    elif a.traces == "pair":
        other = given.pop("after", None)
        if not other:
            raise BadInput(f"analysis {name} compares two traces", expected="after=<the other trace>")
        prep.store.trace(other)
        traces = [trace, other]
    else:
        traces = [trace]
    params = {k: (v.split(",") if a.param(k).many else v) for k, v in given.items()}
    answer = run(prep, name, traces, w, **params)
    t = answer.table()
    units = {c.name: c.unit for c in a.columns}
    from .console import rows_json

    return {
        "analysis": name,
        "title": answer.title or name,
        "total": t.num_rows,
        "columns": [{"name": f.name, "type": str(f.type), "unit": units.get(f.name, "")} for f in t.schema],
        "rows": rows_json(t.slice(0, MAX_ROWS_SHOWN)),
        "json": answer.to_json({"limit": MAX_ROWS_SHOWN} | shown),
    }
