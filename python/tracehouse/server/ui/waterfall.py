"""The Waterfall page's answers: trace search and one OpenTelemetry trace as a waterfall.

Owns the shapes of `/api/ui/otel/search`, `/api/ui/otel/tree` and `/api/ui/otel/span`
(`static/waterfall.js` draws them). Nothing here computes: every answer is the registry's
`traces` analysis (analysis/traces.py: `search`, `tree`, `span`, `events`, `links`,
`children`), the same answers as `tracehouse analyze traces`, and the producer tree of the
Store. What this module adds is the bound on what goes to the browser, whatever the size of
the trace or of one OpenTelemetry trace in it:

  search   at most MAX_TRACES traces (the analysis sorts and cuts them in SQL; `matched`
           says how many matched)
  tree     the depth-first rows of one trace with the subtrees of collapsed spans left out
           by the query, then at most MAX_ROWS rows from `offset` (the page asks the next
           ones); columns as arrays (one list per column, not one object per span: a
           5,000-span page is ~250 KB of JSON instead of ~700 KB)
  span     one span's columns, its attributes parsed, at most MAX_CHILDREN children, its
           events and links, its producer chain (thread -> process -> host -> service, with
           the resource attributes each holds)

Times: a row's `offset` is ns from the OpenTelemetry trace's first start (`start`), which,
like every `ts`/`start`/`end_ts`, the route counts from the store trace's first event when
asked with rel=1 (app.py), so the page links a span to the same range of the timeline.
"""

from __future__ import annotations

import json

import pyarrow.compute as pc

from ...analysis import registry
from ...analysis.registry import Window
from .prepare import Preparer

MAX_TRACES = 500
MAX_ROWS = 5_000
MAX_CHILDREN = 100
ROW_COLUMNS = (
    "span_id",
    "parent_span_id",
    "depth",
    "name",
    "service",
    "kind",
    "status",
    "error",
    "children",
    "producer",
)
# Columns of a span shown as its own fields, not among its attributes.
SPAN_FIELDS = frozenset(
    {
        "ts",
        "dur",
        "seq",
        "producer",
        "trace_id",
        "span_id",
        "parent_span_id",
        "name",
        "kind",
        "status",
        "status_message",
        "service",
        "scope",
        "attributes",
        "events",
        "links",
        "end_ts",
        "ms",
        "error",
        "root",
        "self_ns",
        "children",
        "producer_name",
        "producer_kind",
    }
)

__all__ = ["search", "services", "span", "traces", "tree"]


def traces(prep: Preparer, trace: str, w: Window, **params):
    """The registry's `traces` analysis over `trace` (its parameters include `name`, the span
    name filter: hence not views.run, whose own second parameter is called so)."""
    a = registry.get("traces")
    prep.ensure(trace, a.uses)
    return a.call(prep.store, trace, w, **params).table()


def services(prep: Preparer, trace: str) -> list[str]:
    """The services of the trace: its producers of kind service (the producer tree's roots)."""
    return sorted({p["name"] for p in prep.store.producers(trace) if p["kind"] == "service"})


def search(prep: Preparer, trace: str, w: Window, given: dict, limit: int) -> dict:
    """The OpenTelemetry traces holding a span that matches `given` (the `traces` analysis'
    filters: service, name, attr, min_dur, max_dur, errors_only, sort)."""
    n = max(1, min(int(limit), MAX_TRACES))
    t = traces(prep, trace, w, show="search", max_traces=n, **given)
    rows = t.drop_columns(["matched"]).to_pylist()
    return {
        "traces": rows,
        "matched": int(t.column("matched")[0].as_py()) if t.num_rows else 0,
        "limit": n,
        "services": services(prep, trace),
    }


def tree(
    prep: Preparer, trace: str, trace_id: str, collapsed: list[str], offset: int = 0, limit: int = MAX_ROWS
) -> dict:
    """Rows [offset, offset+limit) of one trace's waterfall: depth-first, children in start
    order, subtrees of `collapsed` spans left out; each with its offset from the trace's start."""
    t = traces(prep, trace, Window(), show="tree", trace_id=trace_id, collapsed=collapsed or None)
    if t.num_rows == 0:
        return {"trace_id": trace_id.lower(), "rows": 0, "total": 0, "offset": 0, "columns": {}}
    start, end = int(t.column("trace_start")[0].as_py()), int(t.column("trace_end")[0].as_py())
    offset = max(0, int(offset))
    page = t.slice(offset, max(1, min(int(limit), MAX_ROWS)))
    cols = {c: page.column(c).to_pylist() for c in ROW_COLUMNS}
    cols["offset"] = pc.subtract(page.column("ts"), start).to_pylist()
    cols["dur"] = page.column("dur").to_pylist()
    return {
        "trace_id": trace_id.lower(),
        "start": start,
        "end": end,
        "duration": end - start,
        "total": t.num_rows,
        "offset": offset,
        "rows": page.num_rows,
        "columns": cols,
        "services": sorted({s for s in t.column("service").to_pylist() if s is not None}),
        "collapsed": sorted(c.lower() for c in collapsed),
    }


def span(prep: Preparer, trace: str, trace_id: str, span_id: str) -> dict:
    """One span as the details panel shows it: its fields, the typed (promoted) columns that
    hold a value, its other attributes, events, links, first children and producer chain."""
    w, ids = Window(), {"trace_id": trace_id, "span_id": span_id}
    row = traces(prep, trace, w, show="span", **ids).to_pylist()[0]
    events = traces(prep, trace, w, show="events", **ids).to_pylist()
    links = traces(prep, trace, w, show="links", **ids).to_pylist()
    kids = traces(prep, trace, w, show="children", **ids)
    for e in events + links:
        e["attributes"] = json.loads(e["attributes"]) if e.get("attributes") else {}
    producers = {p["id"]: p for p in prep.store.producers(trace)}
    chain, pid = [], row.get("producer")
    while pid is not None and pid in producers and len(chain) < 16:
        p = producers[pid]
        chain.append({"id": p["id"], "kind": p["kind"], "name": p["name"], "attrs": p["attrs"]})
        pid = p["parent"]
    fields = {k: row.get(k) for k in sorted(SPAN_FIELDS) if k in row and k != "attributes"}
    return {
        "span": fields,
        "typed": {k: v for k, v in row.items() if k not in SPAN_FIELDS and v is not None},
        "attributes": json.loads(row["attributes"]) if row.get("attributes") else {},
        "events": events,
        "links": links,
        "children": kids.slice(0, MAX_CHILDREN).to_pylist(),
        "children_total": kids.num_rows,
        "producers": chain,
    }
