"""Call trees over many spans: the aggregated call tree, flame graphs, the longest spans.

Owns the questions asked of a whole trace's spans (or a window's): the calling-context
tree (every distinct call path with its calls, total and self time), its folded-stack text
(flamegraph.pl, speedscope, inferno read it), the longest spans, and the spans behind one
call path (a flame graph's frame).

Fast path (`call_tree`, `top_spans`, `path_spans`): every span's call path is computed once
per span index (`call_paths`: `_core.call_tree` over the spans in span_id order, aligned
with the index rows) and kept in this process; a tree of any window or set of producers is
then one bincount over the window's rows (`windows.py`), durations clipped to the window.
The reference, `aggregated_call_tree`, reads the span table and interns the paths again on
each call; the tests check one against the other.

Output columns of the call tree (`CALL_TREE_COLUMNS`) and of the longest spans (`TOP_COLUMNS`)
are listed below. Over 600 lines: the reference tree, the fast one, the spans behind it and
their seven analyses share the call paths and the span rows' layout.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import _core, arrays
from ..errors import BadInput
from ..schema import Column
from . import indexes, spans, windows
from .profiles import SpanConfig, span_config
from .registry import Analysis, Answer, Note, Param, Rows, Text, Window
from .spans import (
    SPAN_COLUMNS,
    SPAN_PARAMS,
    SPAN_VIEW,
    begin_column,
    children,
    name_codes,
    span,
    span_index,
    span_table,
    spans_config,
    thread_calls,
)

if TYPE_CHECKING:
    from ..store import Store

CALL_TREE_COLUMNS = (
    Column(
        "node",
        "int64",
        "id",
        "node of the aggregated call tree: a distinct call path (`call_tree`: the path's "
        "number in the whole trace's tree, the same in every selection)",
    ),
    Column("parent", "int64", "id", "node of the caller's path, -1 at the root"),
    Column("depth", "int32", "count", "path length - 1"),
    Column("name", "string", "", "the callee's name (name column of the begin type)"),
    Column("calls", "int64", "count", "spans with this call path"),
    Column("total_ns", "int64", "ns", "sum of their durations"),
    Column("self_ns", "int64", "ns", "sum of their self times"),
)


def aggregated_call_tree(
    store: Store, trace: str, config: SpanConfig | None = None, *, producers: list[int] | None = None
) -> pa.Table:
    """Spans merged by call path (calling-context tree): CALL_TREE_COLUMNS, node order
    (a node's parent comes before it)."""
    cfg = config or span_config(store, trace)
    name_col = cfg.name_column
    cols = ["span_id", "producer", "depth", "parent_id", "dur", "self_time"] + (
        [begin_column(name_col)] if name_col else []
    )
    t = span_table(store, trace, cfg, columns=cols)
    if name_col:
        codes, names = name_codes(t.column(begin_column(name_col)))
    else:
        codes, names = np.zeros(t.num_rows, np.int64), pa.array([cfg.begin])
    parent = arrays.as_numpy(t.column("parent_id"))
    depth = arrays.as_numpy(t.column("depth"))
    keep = None
    if producers is not None:
        # A span's path needs its ancestors: filter after interning, on the spans' thread.
        keep = np.isin(arrays.as_numpy(t.column("producer")), np.asarray(producers, dtype=np.int32))
    ct = _core.call_tree(pa.array(parent), pa.array(codes), pa.array(depth.astype(np.int32)))
    node_of = ct["node_of"].to_numpy()
    nn = len(ct["parent"])
    dur = arrays.as_numpy(t.column("dur"))
    self_t = arrays.as_numpy(t.column("self_time"))
    w = slice(None) if keep is None else keep
    calls = np.bincount(node_of[w], minlength=nn).astype(np.int64)
    total = np.bincount(node_of[w], weights=dur[w], minlength=nn).astype(np.int64)
    selfs = np.bincount(node_of[w], weights=self_t[w], minlength=nn).astype(np.int64)
    key = ct["key"].to_numpy()
    out = pa.table(
        {
            "node": pa.array(np.arange(nn, dtype=np.int64)),
            "parent": ct["parent"],
            "depth": ct["depth"],
            "name": names.take(pa.array(np.where(key < 0, 0, key))) if nn else pa.array([], pa.string()),
            "calls": pa.array(calls),
            "total_ns": pa.array(total),
            "self_ns": pa.array(selfs),
        }
    )
    if keep is not None:
        out = _prune(out)
    return out


def _prune(t: pa.Table) -> pa.Table:
    """Drop nodes no kept span passes through (renumbering the rest, parents first)."""
    calls = t.column("calls").to_numpy()
    parent = t.column("parent").to_numpy()
    depth = t.column("depth").to_numpy()
    alive = calls > 0
    # A node is alive if it or a descendant has calls: propagate upward, deepest first.
    for d in range(int(depth.max()) if len(depth) else -1, 0, -1):
        at = np.nonzero((depth == d) & alive)[0]
        alive[parent[at]] = True
    keep = np.nonzero(alive)[0]
    new_id = np.full(len(alive), -1, np.int64)
    new_id[keep] = np.arange(len(keep))
    t = t.take(pa.array(keep))
    p = t.column("parent").to_numpy()
    p = np.where(p >= 0, new_id[np.maximum(p, 0)], -1)
    return t.set_column(0, "node", pa.array(np.arange(len(keep), dtype=np.int64))).set_column(1, "parent", pa.array(p))


def node_paths(parent: np.ndarray, depth: np.ndarray, key: np.ndarray, names: pa.Array) -> np.ndarray:
    """'root;...;leaf' of every call-tree node (object array), one vectorized step per depth.
    ';' and spaces inside names become ':' and '_' (they separate frames and the value)."""
    clean = pc.replace_substring(pc.replace_substring(names.cast(pa.string()), ";", ":"), " ", "_")
    nm = np.array(clean.to_pylist(), dtype=object)
    label = nm[np.where(key < 0, 0, key)] if len(key) else np.array([], dtype=object)
    paths = np.empty(len(parent), dtype=object)
    for d in range(int(depth.max()) + 1 if len(depth) else 0):
        at = np.nonzero(depth == d)[0]
        paths[at] = label[at] if d == 0 else paths[parent[at]] + ";" + label[at]
    return paths


def folded(tree: pa.Table, value: str = "self_ns") -> str:
    """Folded-stack text (flamegraph.pl, speedscope, inferno): one line per call path
    `root;child;leaf VALUE`, VALUE = self time in ns by default, paths with 0 left out.
    `tree`: CALL_TREE_COLUMNS, parents before children (node ids need not be 0..n-1)."""
    n = tree.num_rows
    if n == 0:
        return ""
    node = tree.column("node").to_numpy()
    parent = tree.column("parent").to_numpy()
    if not np.array_equal(node, np.arange(n)):  # path ids of a selection: parents as row numbers
        pos = np.searchsorted(node, parent)
        parent = np.where(parent >= 0, pos, -1)
    paths = node_paths(parent, tree.column("depth").to_numpy(), np.arange(n, dtype=np.int64), tree.column("name"))
    vals = arrays.as_numpy(tree.column(value))
    keep = np.nonzero(vals > 0)[0]
    return "".join(f"{p} {v}\n" for p, v in zip(paths[keep].tolist(), vals[keep].tolist()))


# -- the fast path: call paths per span index row ------------------------------------------------

TOP_COLUMNS = (
    Column("span_id", "int64", "id", "the span's number (span table)"),
    Column("ts", "int64", "ns", "begin time"),
    Column("end_ts", "int64", "ns", "end time"),
    Column("dur", "int64", "ns", "end_ts - ts"),
    Column("self_time", "int64", "ns", "dur minus the durations of the direct children"),
    Column("producer", "int32", "id", "thread (producer) of the span"),
    Column("producer_name", "string", "", "its name"),
    Column("depth", "int64", "count", "nesting depth, 0 for a root call"),
    Column("name", "string", "", "the span's name (its name column, else the begin type)"),
    Column("closed", "bool", "", "false when no matching end closed the span"),
)
__doc__ += "\nCall tree (`CALL_TREE_COLUMNS`):\n" + "\n".join(
    f"  {c.name:<14} {c.type:<6} {c.unit:<5} {c.doc}" for c in CALL_TREE_COLUMNS
)
__doc__ += "\n\nLongest spans (`TOP_COLUMNS`):\n" + "\n".join(
    f"  {c.name:<14} {c.type:<6} {c.unit:<5} {c.doc}" for c in TOP_COLUMNS
)


@dataclass
class CallPaths:
    """Call paths of every span, aligned with the span index rows."""

    node: np.ndarray  # int32 call path per span index row
    parent: np.ndarray  # per path: its parent path, -1 at a root
    depth: np.ndarray  # per path
    label: np.ndarray  # per path: the name code of its frame
    names: pa.Array  # name code -> text
    code: np.ndarray  # int32 name code per span index row


_PATHS: dict[tuple, CallPaths] = {}  # (store, trace id, pairing, stamp) -> kept per trace state, one each
_PATHS_LOCK = threading.Lock()


def _paths_key(store: Store, trace: str, cfg: SpanConfig) -> tuple:
    return str(store.path), store.trace(trace).id, repr(cfg.to_json()), store.stamp(trace)


CALLS_INDEX = 1  # layout of the saved call paths; another is rebuilt


def _saved_params(config: SpanConfig, part: str) -> dict:
    return {"v": CALLS_INDEX, "part": part} | spans.span_index_params(config)


def call_paths(store: Store, trace: str, config: SpanConfig, *, build: bool = True) -> CallPaths | None:
    """The call paths of `trace`'s spans: kept in this process per trace state, saved in the
    store beside the span index (`_saved`: a server restart maps them, nothing is recomputed).
    build=False: None unless kept or saved (nothing built)."""
    key = _paths_key(store, trace, config)
    with _PATHS_LOCK:
        got = _PATHS.get(key)
    if got is not None:
        return got
    got = _saved(store, trace, config, None)
    if got is None:
        if not build:
            return None
        idx = span_index(store, trace, config)
        got = _saved(store, trace, config, _call_paths(idx, config))
    with _PATHS_LOCK:
        for k in [k for k in _PATHS if k[:3] == key[:3]]:
            del _PATHS[k]
        _PATHS[key] = got
    return got


def _saved(store: Store, trace: str, config: SpanConfig, made: CallPaths | None) -> CallPaths | None:
    """The call paths as three derived indexes (`indexes.get`: Arrow IPC results linked to the
    trace, checksummed, fresh while the trace's signature is, mapped on use): per span index
    row its path and name code, per path its parent, depth and frame's name code, and the
    names. made=None: only what is saved and fresh (None when a part is missing)."""
    parts = {
        "rows": lambda: pa.table({"node": made.node, "code": made.code}),
        "paths": lambda: pa.table({"parent": made.parent, "depth": made.depth, "label": made.label}),
        "names": lambda: pa.table({"name": made.names.cast(pa.string())}),
    }
    got = {}
    for part, table in parts.items():
        params = _saved_params(config, part)
        if made is None:
            got[part] = indexes.fresh(store, trace, "calls", params)
            if got[part] is None:
                return None
        else:
            got[part] = indexes.get(store, trace, "calls", params, table)
    if made is not None:
        return made
    rows, paths, names = got["rows"], got["paths"], got["names"]
    cp = CallPaths(
        indexes.array(rows, "node").astype(np.int32, copy=False),
        indexes.array(paths, "parent").astype(np.int64, copy=False),
        indexes.array(paths, "depth").astype(np.int32, copy=False),
        indexes.array(paths, "label").astype(np.int64, copy=False),
        names.column("name") if names.num_rows else pa.array([], pa.string()),
        indexes.array(rows, "code").astype(np.int32, copy=False),
    )
    idx = span_index(store, trace, config, build=False)
    if idx is not None and getattr(idx, "_names", None) is None and len(cp.code) == idx.num_rows:
        # the span names' codes too (`windows.names`): a restart does not re-encode 17M strings
        idx._names = (windows.names_key(config), cp.code, cp.names)
    return cp


def _call_paths(idx: indexes.PackedIndex, config: SpanConfig) -> CallPaths:
    """Every span's node of the calling-context tree (`_core.call_tree`, the aggregated call
    tree's own pass), in the span index's row order: rows are ordered by (producer, depth,
    ts), so a span's parent, one level up on its thread, comes before it, as the pass needs;
    only the parents are mapped from span ids to rows (one scatter, one gather), the other
    columns are read as they lie (a pass in span_id order gathered four columns and scattered
    the answer back: 1.0 s more on a 1.7M-span trace). Paths are numbered by first appearance
    in that order."""
    n = idx.num_rows
    codes_rows, names = windows.names(idx, config)
    if n == 0:
        z = np.zeros(0, np.int64)
        return CallPaths(z.astype(np.int32), z, z.astype(np.int32), z, names, z.astype(np.int32))
    row_of = np.empty(n, np.int64)  # the row of span i (span_id is a permutation of 0..n-1)
    row_of[indexes.array(idx, "span_id")] = np.arange(n, dtype=np.int64)
    parent = indexes.array(idx, "parent_id")
    parent_rows = np.where(parent >= 0, row_of[np.maximum(parent, 0)], -1)
    ct = _core.call_tree(
        arrays.from_numpy(parent_rows),
        arrays.from_numpy(codes_rows.astype(np.int64)),
        arrays.from_numpy(indexes.array(idx, "depth").astype(np.int32)),
    )
    key = arrays.as_numpy(ct["key"])
    return CallPaths(
        arrays.as_numpy(ct["node_of"]).astype(np.int32),
        arrays.as_numpy(ct["parent"]),
        arrays.as_numpy(ct["depth"]),
        np.where(key < 0, 0, key),
        names,
        codes_rows,
    )


def _bounds(store: Store, trace: str) -> tuple[int | None, int | None]:
    info = store.trace(trace)
    return info.ts_min, info.ts_max


@dataclass
class CallTree(Answer):
    """The aggregated call tree of a selection (CALL_TREE_COLUMNS, node = path id), with what
    was left out: paths under `threshold_ns` (their time stays in their ancestors' totals)."""

    rows: pa.Table
    spans: int
    total: int  # ns under the roots
    paths: int  # call paths with calls in the selection
    threshold_ns: int
    start: int | None
    end: int | None
    config: SpanConfig

    def table(self) -> pa.Table:
        return self.rows

    @property
    def title(self) -> str:
        return f"aggregated call tree: {self.rows.num_rows:,} call paths (by total time)"

    def by_total(self) -> pa.Table:
        t = self.rows
        if not t.num_rows:
            return t
        order = np.argsort(-t.column("total_ns").to_numpy(), kind="stable")
        return t.take(pa.array(order))

    def to_json(self, shown: dict) -> dict:
        return {"rows": self.by_total().to_pylist(), "title": self.title}

    def shown_table(self) -> pa.Table:
        return self.by_total()

    def save_params(self) -> dict:
        return {"config": self.config.to_json()}


def call_tree(
    store: Store,
    trace: str,
    config: SpanConfig | None = None,
    window: Window = Window(),
    *,
    min_share: float = 0.0,
    max_nodes: int | None = None,
    root: int | None = None,
) -> CallTree:
    """The calling-context tree of the spans overlapping the window, their durations clipped
    to it: per call path its calls, total and self ns (self = total minus the child paths'
    totals; the whole trace: the spans' own self times summed). Paths under `min_share` of
    the roots' total are left out (and, with `max_nodes`, the threshold doubles until at most
    that many remain); a kept path's ancestors are always kept, and its `cut_ns` is the time
    of its child paths left out (a flame graph's "other" frame). With `root`, the subtree of
    that path only (and its ancestors), `min_share` then counted of the root's total: a
    zoomed flame graph's frames."""
    cfg = config or span_config(store, trace)
    idx = span_index(store, trace, cfg)
    cp = call_paths(store, trace, cfg)
    lo, hi = _bounds(store, trace)
    whole = windows.is_whole(window, lo, hi)
    n_paths = roots = None
    if whole:  # every call path; self times are the spans' own
        node = cp.node
        ids = np.arange(len(cp.parent))
        ncalls = np.bincount(node, minlength=len(ids))
        total = np.bincount(node, weights=indexes.array(idx, "dur"), minlength=len(ids)).astype(np.int64)
        self_ns = np.bincount(node, weights=indexes.array(idx, "self_time"), minlength=len(ids)).astype(np.int64)
        ppos = cp.parent
        n_spans = idx.num_rows
    elif root is None and min_share > 0:  # the paths that may reach the threshold only
        ids, ppos, ncalls, total, self_ns, n_spans, n_paths, roots = _window_candidates(
            idx, cp, window, lo, hi, min_share
        )
    else:  # the paths of the window's spans only (their ancestors are among them: they overlap too)
        # One native pass over the window's row ranges (`windows.ranges`), durations clipped;
        # self time of a path = its total minus its child paths' totals (clipped spans nest).
        start, end = window.bounds(lo, hi)
        first, last = windows.ranges(idx, window, lo, hi, overlap=True)
        got = _core.window_paths(
            arrays.from_numpy(cp.node),
            arrays.from_numpy(indexes.array(idx, "ts").astype(np.int64, copy=False)),
            arrays.from_numpy(indexes.array(idx, "end_ts").astype(np.int64, copy=False)),
            arrays.from_numpy(cp.parent.astype(np.int64, copy=False)),
            arrays.from_numpy(first),
            arrays.from_numpy(last),
            int(start),
            int(end),
        )
        ids, ppos, ncalls, total, self_ns = (
            arrays.as_numpy(got[k]) for k in ("ids", "ppos", "calls", "total", "self_ns")
        )
        n_spans = int(ncalls.sum())
    out, roots_total, threshold = _cut(
        ids,
        np.asarray(ppos, np.int64),
        cp.parent,
        cp.depth,
        lambda kid: cp.names.take(pa.array(cp.label[kid])),
        ncalls,
        total,
        self_ns,
        whole=whole,
        min_share=min_share,
        max_nodes=max_nodes,
        root=root,
        roots_total=roots,
    )
    start, end = window.bounds(lo, hi) if lo is not None else (None, None)
    n_paths = int((ncalls > 0).sum()) if n_paths is None else n_paths
    return CallTree(out, int(n_spans), roots_total, n_paths, threshold, start, end, cfg)


def whole_totals(idx: indexes.PackedIndex, cp: CallPaths) -> np.ndarray:
    """Each call path's total over the whole trace (kept on the call paths): a window's is at
    most that, so a path under a window's threshold here is under it in the window too."""
    got = getattr(cp, "_whole_total", None)
    if got is None:
        got = np.bincount(cp.node, weights=indexes.array(idx, "dur"), minlength=len(cp.parent)).astype(np.int64)
        cp._whole_total = got
    return got


def _window_candidates(idx: indexes.PackedIndex, cp: CallPaths, window: Window, lo: int, hi: int, min_share: float):
    """(ids, ppos, calls, total, self_ns, spans, paths, roots' total) of the window's call paths
    that may reach `min_share` of the roots' total: those whose whole-trace total reaches it
    (`whole_totals`; a parent's is at least its child's, so they hold their ancestors), summed
    in one native pass (`_core.window_candidates`) that only counts the others. A candidate's
    self time is its spans' own self times; a span cut by the window's edge (a few per
    (producer, depth) run) has its clipped time minus its children's clipped times, found
    here in its children's run (ts between its begin and end, parent_id its span_id)."""
    start, end = window.bounds(lo, hi)
    first, last, runs = windows.ranges(idx, window, lo, hi, overlap=True, runs=True)
    b = windows.blocks(idx)
    ts = indexes.array(idx, "ts").astype(np.int64, copy=False)
    end_ts = indexes.array(idx, "end_ts").astype(np.int64, copy=False)

    def clipped(a: int, z: int, keep=None) -> int:
        t, e = ts[a:z], end_ts[a:z]
        m = e > start if keep is None else keep & (e > start) & (t < end)
        return int((np.minimum(e[m], end) - np.maximum(t[m], start)).sum())

    # The roots' total first: it sets the threshold, and so which paths are candidates.
    roots = sum(clipped(a, z) for a, z in zip(first[b.depth[runs] == 0].tolist(), last[b.depth[runs] == 0].tolist()))
    cand = np.flatnonzero(whole_totals(idx, cp) >= max(1, int(roots * min_share)))
    got = _core.window_candidates(
        arrays.from_numpy(cp.node),
        arrays.from_numpy(ts),
        arrays.from_numpy(end_ts),
        arrays.from_numpy(indexes.array(idx, "self_time").astype(np.int64, copy=False)),
        arrays.from_numpy(first),
        arrays.from_numpy(last),
        int(start),
        int(end),
        len(cp.parent),
        arrays.from_numpy(cand.astype(np.int64)),
    )
    calls, total, self_ns, edges = (arrays.as_numpy(got[k]) for k in ("calls", "total", "self_ns", "edges"))
    self_ns = self_ns.copy()
    if len(edges):
        sid, pid = indexes.array(idx, "span_id"), indexes.array(idx, "parent_id")
        run_at = {(int(p), int(d)): (int(a), int(z)) for p, d, a, z in zip(b.producer, b.depth, b.start, b.end)}
        for r in edges.tolist():
            k = int(np.searchsorted(b.start, r, side="right")) - 1
            a, z = run_at.get((int(b.producer[k]), int(b.depth[k]) + 1), (0, 0))
            if z > a:  # its children: in the next level's run, between its begin and its end
                i = a + int(np.searchsorted(ts[a:z], ts[r], side="left"))
                j = a + int(np.searchsorted(ts[a:z], end_ts[r], side="right"))
                self_ns[np.searchsorted(cand, cp.node[r])] -= clipped(i, j, pid[i:j] == sid[r])
    par = cp.parent[cand]
    ppos = np.searchsorted(cand, par)
    ok = (par >= 0) & (ppos < len(cand))
    ok[ok] = cand[ppos[ok]] == par[ok]
    ppos = np.where(ok, ppos, -1)
    return cand, ppos, calls, total, np.maximum(self_ns, 0), int(got["spans"]), int(got["paths"]), roots


def _cut(
    ids,
    ppos,
    parent_of,
    depth_of,
    names,
    ncalls,
    total,
    self_ns,
    *,
    whole: bool,
    min_share: float,
    max_nodes: int | None,
    root: int | None,
    roots_total: int | None = None,
) -> tuple[pa.Table, int, int]:
    """(the kept paths as CALL_TREE_COLUMNS + cut_ns, the roots' total, the threshold) of a call
    tree given per path position: `ids` (path ids, sorted), `ppos` (the parent's position, -1),
    calls, total and self ns; `parent_of`/`depth_of`/`names` map a path id to its parent id,
    depth and name. Shared by spans (`call_tree`) and stack samples (`sample_call_tree`)."""
    if roots_total is None:  # given when `ids` leave out paths (`_window_candidates`)
        roots_total = int(total[ppos < 0].sum()) if len(ids) else 0
    inside, chain, base = None, np.zeros(0, np.int64), roots_total
    if root is not None:
        at = np.searchsorted(ids, int(root))
        if at >= len(ids) or ids[at] != int(root):
            raise BadInput(f"root={root}", expected="a call path (node) with spans in the selection")
        inside, chain = _subtree(ppos, depth_of[ids], int(at))
        base = int(total[at])
    keep = np.arange(len(ids))
    threshold = 0
    if min_share > 0 or max_nodes is not None:
        threshold = max(1, int(base * min_share)) if min_share > 0 else 1
        big = total >= threshold
        if inside is not None:
            big &= inside
        keep = np.flatnonzero(big)
        while max_nodes is not None and len(keep) > max_nodes:
            threshold *= 2
            keep = np.flatnonzero(big & (total >= threshold))
    elif not whole:
        keep = np.flatnonzero((ncalls > 0) if inside is None else (ncalls > 0) & inside)
    elif inside is not None:
        keep = np.flatnonzero(inside)
    keep = np.union1d(keep, chain)
    # A kept path's parent path has at least its total, so it is kept too: the tree stays whole.
    kept_kids = np.zeros(len(ids), np.int64)
    has_parent = ppos[keep] >= 0
    np.add.at(kept_kids, ppos[keep][has_parent], total[keep][has_parent])
    cut = np.maximum(total - self_ns - kept_kids, 0)
    if inside is not None:
        cut[chain] = 0  # the root's ancestors: drawn as context, their other children are not asked for
    kid = ids[keep]
    out = pa.table(
        {
            "node": pa.array(kid.astype(np.int64)),
            "parent": pa.array(parent_of[kid].astype(np.int64)),
            "depth": pa.array(depth_of[kid].astype(np.int32)),
            "name": names(kid) if len(kid) else pa.array([], pa.string()),
            "calls": pa.array(ncalls[keep].astype(np.int64)),
            "total_ns": pa.array(total[keep]),
            "self_ns": pa.array(self_ns[keep]),
            "cut_ns": pa.array(cut[keep]),
        }
    )
    return out, roots_total, int(threshold)


def _subtree(ppos: np.ndarray, depth: np.ndarray, at: int) -> tuple[np.ndarray, np.ndarray]:
    """Which paths lie in the subtree of position `at` (one pass per depth level below it),
    and the positions of its ancestors."""
    inside = np.zeros(len(ppos), bool)
    inside[at] = True
    below = np.flatnonzero(depth > depth[at])
    below = below[np.argsort(depth[below], kind="stable")]
    levels = np.flatnonzero(np.diff(depth[below])) + 1
    for part in np.split(below, levels):
        if len(part):
            par = ppos[part]
            inside[part] = (par >= 0) & inside[np.maximum(par, 0)]
    chain, p = [], ppos[at]
    while p >= 0:
        chain.append(int(p))
        p = ppos[p]
    return inside, np.array(chain, np.int64)


_NAMES: dict[tuple, dict[int, str]] = {}


def producer_names(store: Store, trace: str) -> dict[int, str]:
    """Producer id -> name of `trace` (kept per catalog version: one read per change)."""
    info = store.trace(trace)
    key = (str(store.path), info.id, store.catalog.version())
    got = _NAMES.get(key)
    if got is None:
        got = {int(p["id"]): str(p["name"]) for p in store.producers(trace)}
        _NAMES.clear()
        _NAMES[key] = got
    return got


def span_rows(store: Store, trace: str, idx: indexes.PackedIndex, config: SpanConfig, rows: np.ndarray) -> pa.Table:
    """Span index rows as TOP_COLUMNS: only those rows are read (`take_column`)."""
    rows = np.asarray(rows, np.int64)
    at = arrays.from_numpy(rows)
    cols = {
        c: arrays.as_numpy(idx.take_column(c, at))
        for c in ("span_id", "ts", "end_ts", "dur", "self_time", "producer", "depth", "closed")
    }
    col = begin_column(config.name_column) if config.name_column else None
    if col and col in idx.column_names:
        label = [None if v is None else str(v) for v in idx.take_column(col, at).to_pylist()]
    else:
        label = [config.begin] * len(rows)
    pnames = producer_names(store, trace)
    prod = cols["producer"].astype(np.int64)
    return pa.table(
        {
            "span_id": arrays.from_numpy(cols["span_id"].astype(np.int64)),
            "ts": arrays.from_numpy(cols["ts"].astype(np.int64)),
            "end_ts": arrays.from_numpy(cols["end_ts"].astype(np.int64)),
            "dur": arrays.from_numpy(cols["dur"].astype(np.int64)),
            "self_time": arrays.from_numpy(cols["self_time"].astype(np.int64)),
            "producer": arrays.from_numpy(prod.astype(np.int32)),
            "producer_name": arrays.strings([pnames.get(int(p), str(p)) for p in prod.tolist()]),
            "depth": arrays.from_numpy(cols["depth"].astype(np.int64)),
            "name": arrays.strings([x if x is not None else "?" for x in label]),
            "closed": arrays.from_numpy(cols["closed"].astype(bool)),
        }
    )


def top_spans(
    store: Store, trace: str, config: SpanConfig | None = None, window: Window = Window(), n: int = 25
) -> tuple[pa.Table, int]:
    """(the `n` longest closed spans starting in the window, longest first, as TOP_COLUMNS;
    how many closed spans start in it). Ties: the smaller span_id first."""
    cfg = config or span_config(store, trace)
    idx = span_index(store, trace, cfg)
    lo, hi = _bounds(store, trace)
    n = max(0, int(n))
    # The durations of the spans starting in the window, copied run by run; the n-th longest,
    # then the rows of every span at least that long (ties resolved by span_id below): no row
    # numbers for the millions of others.
    durs = windows.starting_values(idx, "dur", window, lo, hi)
    count = len(durs)
    cut = np.partition(durs, count - n)[count - n] if count > n > 0 else np.iinfo(np.int64).min
    all_dur = indexes.array(idx, "dur")
    closed = indexes.array(idx, "closed")
    if windows.is_whole(window, lo, hi):
        first, last = np.zeros(1, np.int64), np.full(1, idx.num_rows, np.int64)
    else:
        first, last = windows.ranges(idx, window, lo, hi, overlap=False)
    parts = [a + np.flatnonzero(all_dur[a:z] >= cut) for a, z in zip(first.tolist(), last.tolist())]
    rows = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    rows = rows[closed[rows]]
    dur = all_dur[rows]
    sid = indexes.array(idx, "span_id")[rows]
    order = np.lexsort((sid, -dur))[:n]
    return span_rows(store, trace, idx, cfg, rows[order]), int(count)


def path_spans(
    store: Store, trace: str, config: SpanConfig | None, window: Window, node: int, n: int = 100
) -> tuple[list[str], int, pa.Table]:
    """(the call path's frame names from the root, how many spans of that path overlap the
    window, the `n` of them longest in it first: TOP_COLUMNS)."""
    cfg = config or span_config(store, trace)
    idx = span_index(store, trace, cfg)
    cp = call_paths(store, trace, cfg)
    if not 0 <= node < len(cp.parent):
        raise BadInput(f"no call path {node}", expected=f"0..{len(cp.parent) - 1}")
    lo, hi = _bounds(store, trace)
    if windows.is_whole(window, lo, hi):
        rows = np.flatnonzero(cp.node == node)
        clipped = indexes.array(idx, "dur")[rows]
    else:  # the path's rows run by run (no row numbers for the window's other spans)
        start, end = window.bounds(lo, hi)
        first, last = windows.ranges(idx, window, lo, hi, overlap=True)
        parts = [a + np.flatnonzero(cp.node[a:z] == node) for a, z in zip(first.tolist(), last.tolist())]
        rows = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        end_ts = indexes.array(idx, "end_ts")[rows]
        rows, end_ts = rows[end_ts > start], end_ts[end_ts > start]
        clipped = np.minimum(end_ts, end) - np.maximum(indexes.array(idx, "ts")[rows], start)
    count = len(rows)
    n = max(1, int(n))
    if count > n:
        pick = np.argpartition(-clipped, n)[:n]
        rows, clipped = rows[pick], clipped[pick]
    order = np.argsort(-clipped, kind="stable")
    path = []
    p = int(node)
    while p >= 0 and len(path) < 256:
        path.append(str(cp.names[int(cp.label[p])]))
        p = int(cp.parent[p])
    return path[::-1], int(count), span_rows(store, trace, idx, cfg, rows[order])


# -- as analyses ----------------------------------------------------------------------------------

WINDOW_PARAMS = (
    Param("thread", "int", "id", "only these producers (repeat)", many=True, window="producers"),
    Param(
        "start", "time", "ns", "spans overlapping [start, end): from (durations clipped to the range)", window="start"
    ),
    Param("end_time", "time", "ns", "... to", flag="--end-time", window="end"),
)


def sample_call_tree(
    store: Store,
    trace: str,
    config,
    window: Window = Window(),
    *,
    min_share: float = 0.0,
    max_nodes: int | None = None,
    root: int | None = None,
) -> CallTree:
    """The call tree of the trace's stack samples in the window (`analysis.samples`: a node's
    calls are its samples, its ns their weight), cut as `call_tree` cuts spans. Node ids are
    those of the selection's own tree (a node's parent before it)."""
    from . import samples

    lo, hi = _bounds(store, trace)
    start, end = window.bounds(lo, hi) if lo is not None else (None, None)
    t = samples.call_tree(
        store,
        trace,
        config,
        start=start,
        end=end,
        producers=None if window.producers is None else list(window.producers),
    )
    parent = t.column("parent").to_numpy().astype(np.int64)
    depth = t.column("depth").to_numpy()
    ncalls = t.column("calls").to_numpy()
    names = t.column("name")
    out, roots_total, threshold = _cut(
        np.arange(t.num_rows),
        parent,
        parent,
        depth,
        lambda kid: names.take(pa.array(kid)),
        ncalls,
        t.column("total_ns").to_numpy(),
        t.column("self_ns").to_numpy(),
        whole=True,
        min_share=min_share,
        max_nodes=max_nodes,
        root=root,
    )
    n = int(ncalls[parent < 0].sum()) if t.num_rows else 0
    return CallTree(out, n, roots_total, int((ncalls > 0).sum()), threshold, start, end, config)


def _tree(store, trace, window, *, min_share=0.0, max_paths=None, root=None, **pairing) -> CallTree:
    """Spans merged by call path; a sampled trace's stack samples when no pairing is given."""
    if not any(pairing.get(k) is not None for k in ("begin", "end", "key", "name")):
        from .samples import sample_config

        sc = sample_config(store, trace)
        if sc is not None:
            return sample_call_tree(
                store, trace, sc, window, min_share=min_share or 0.0, max_nodes=max_paths, root=root
            )
    return call_tree(
        store,
        trace,
        spans_config(store, trace, **pairing),
        window,
        min_share=min_share or 0.0,
        max_nodes=max_paths,
        root=root,
    )


TREE = Analysis(
    "tree",
    "aggregated call tree: spans merged by call path",
    _tree,
    params=WINDOW_PARAMS
    + (
        Param(
            "min_share",
            "float",
            "share",
            "leave out paths under this share of the roots' total time (0-1)",
            default=0.0,
        ),
        Param("max_paths", "int", "count", "at most this many paths: the cut doubles until they fit"),
        Param(
            "root",
            "int",
            "id",
            "only the subtree of this call path (`node`) and its ancestors; --min-share of its total",
        ),
    )
    + SPAN_PARAMS,
    columns=CALL_TREE_COLUMNS
    + (Column("cut_ns", "int64", "ns", "time of the child paths left out (under the threshold)"),),
    applies_to=("spans", "samples"),
    uses=("spans", "calls"),
    doc="A sampled trace (perf) gives its stack samples' tree: calls are samples, ns their weight. "
    "Rows are shown by total time; `--json` gives every path. A path's `node` is its number in the whole "
    "trace's tree, so the same path has the same node in every selection.",
)


@dataclass
class Folded(Answer):
    """Folded-stack text of a call tree."""

    tree: CallTree
    value: str  # self_ns | total_ns
    trace: str

    @property
    def folded(self) -> str:
        got = getattr(self, "_text", None)
        if got is None:
            got = self._text = folded(self.tree.rows, self.value)
        return got

    def table(self) -> pa.Table:
        return pa.table({"line": pa.array(self.folded.splitlines(), pa.string())})

    def to_json(self, shown: dict) -> dict:
        if shown.get("out"):
            self.show(shown)
            return {"out": shown["out"], "stacks": self.folded.count("\n")}
        return {"folded": self.folded}

    def show(self, shown: dict) -> list:
        if shown.get("out"):
            with open(shown["out"], "w") as f:
                f.write(self.folded)
            return [
                Note(
                    f"wrote {self.folded.count(chr(10)):,} stacks to {shown['out']} "
                    "(flamegraph.pl, speedscope, inferno read it)"
                )
            ]
        return [Text(self.folded)]

    def save(self, store, name, traces, params, shown) -> int:
        from .results import save_file

        return save_file(
            store,
            name,
            traces,
            self.folded,
            filename=f"{self.trace}.folded",
            params=params | {"config": self.tree.config.to_json(), "value": self.value},
        )


def _flame(store, trace, window, *, total=False, min_share=0.0, **pairing) -> Folded:
    return Folded(
        _tree(store, trace, window, min_share=min_share, **pairing), "total_ns" if total else "self_ns", trace
    )


FLAME = Analysis(
    "flame",
    "folded-stack flame graph text (flamegraph.pl, speedscope)",
    _flame,
    params=WINDOW_PARAMS
    + (
        Param("total", "bool", "", "total instead of self time per path", default=False),
        Param(
            "min_share",
            "float",
            "share",
            "leave out paths under this share of the roots' total time (0-1)",
            default=0.0,
        ),
        Param("out", "str", "", "write to this file instead of stdout", answer=False),
    )
    + SPAN_PARAMS,
    columns=(Column("line", "string", "", "`root;child;leaf VALUE`: a call path and its self (or total) ns"),),
    applies_to=("spans", "samples"),
    uses=("spans", "calls"),
)


@dataclass
class SpanList(Answer):
    """Spans (TOP_COLUMNS) and how many matched."""

    rows: pa.Table
    count: int
    title: str = ""
    config: SpanConfig | None = None
    path: list[str] | None = None

    def table(self) -> pa.Table:
        return self.rows

    def to_json(self, shown: dict) -> dict:
        return {"rows": self.rows.to_pylist(), "count": self.count, "title": self.title} | (
            {"path": self.path} if self.path is not None else {}
        )

    def save_params(self) -> dict:
        return {"config": self.config.to_json()} if self.config else {}


def _top(store, trace, window, *, n=25, **pairing) -> SpanList:
    cfg = spans_config(store, trace, **pairing)
    rows, count = top_spans(store, trace, cfg, window, n)
    return SpanList(rows, count, f"the {rows.num_rows} longest of {count:,} closed spans", cfg)


TOP = Analysis(
    "top",
    "the longest closed spans starting in a time range",
    _top,
    params=(Param("n", "int", "count", "spans listed", default=25),) + WINDOW_PARAMS + SPAN_PARAMS,
    columns=TOP_COLUMNS,
    applies_to=("spans",),
    uses=("spans",),
)


def _path(store, trace, window, *, node, n=100, **pairing) -> SpanList:
    cfg = spans_config(store, trace, **pairing)
    path, count, rows = path_spans(store, trace, cfg, window, node, n)
    return SpanList(rows, count, f"{count:,} spans of path {' > '.join(path)}", cfg, path)


PATH = Analysis(
    "path",
    "the spans of one call path (a flame graph's frame), longest in the range first",
    _path,
    params=(
        Param("node", "int", "id", "the call path (`node` of `analyze tree`)", required=True, positional=True),
        Param("n", "int", "count", "spans listed", default=100),
    )
    + WINDOW_PARAMS
    + SPAN_PARAMS,
    columns=TOP_COLUMNS,
    applies_to=("spans",),
    uses=("spans", "calls"),
)


def _children(store, trace, window, *, span, **pairing) -> Rows:
    cfg = spans_config(store, trace, **pairing)
    t = children(store, trace, span, cfg)
    name = (begin_column(cfg.name_column),) if cfg.name_column else ()
    return Rows(
        t, f"children of span {span}: {t.num_rows}", SPAN_VIEW[:3] + name + SPAN_VIEW[3:], {"config": cfg.to_json()}
    )


CHILDREN = Analysis(
    "children",
    "direct callees of one call",
    _children,
    params=(Param("span", "int", "id", "span id (span_id column)", required=True, positional=True),) + SPAN_PARAMS,
    columns=SPAN_COLUMNS,
    columns_note="Then the span's parameters, as `analyze spans` gives them.",
    applies_to=("spans",),
    uses=("spans",),
)


def _span(store, trace, window, *, span_id, **pairing) -> Rows:
    cfg = spans_config(store, trace, **pairing)
    row = span(store, trace, span_id, cfg)
    kids = children(store, trace, span_id, cfg)
    col = begin_column(cfg.name_column) if cfg.name_column else None
    extra = {
        "name": str(row.get(col)) if col and row.get(col) is not None else cfg.begin,
        "producer_name": producer_names(store, trace).get(int(row["producer"]), str(row["producer"])),
        "children": kids.num_rows,
        "children_dur": int(pc.sum(kids.column("dur")).as_py() or 0) if kids.num_rows else 0,
    }
    t = pa.Table.from_pylist([extra | row])
    return Rows(t, f"span {span_id}: {extra['name']} on {extra['producer_name']}", (), {"config": cfg.to_json()})


SPAN = Analysis(
    "span",
    "one call in full: its columns and arguments, producer, self time, children",
    _span,
    params=(Param("span_id", "int", "id", "span id (span_id column)", required=True, positional=True),) + SPAN_PARAMS,
    columns=(
        Column("name", "string", "", "its name (the begin's name column, else the begin type)"),
        Column("producer_name", "string", "", "its thread (producer)"),
        Column("children", "int64", "count", "its direct callees"),
        Column("children_dur", "int64", "ns", "their durations summed"),
    )
    + SPAN_COLUMNS,
    columns_note="Then the span's parameters (the begin's arguments under their own names, the end's prefixed "
    "`end_`), as `analyze spans` gives them.",
    applies_to=("spans",),
    uses=("spans",),
)


def find_spans(
    store: Store, trace: str, config: SpanConfig | None, window: Window, text: str, n: int = 1000
) -> SpanList:
    """The spans overlapping the window whose name contains `text` (any case), in time order
    (the first `n`), and how many match: the names are matched once each (the span index's
    name dictionary), then the rows by their name code."""
    cfg = config or span_config(store, trace)
    idx = span_index(store, trace, cfg)
    cp = call_paths(store, trace, cfg)
    lo, hi = _bounds(store, trace)
    rows, _ = windows.overlapping(idx, window, lo, hi)
    want = np.flatnonzero(np.asarray(pc.match_substring(cp.names, text, ignore_case=True).fill_null(False)))
    codes = cp.code[rows]
    hit = np.isin(codes, want) if len(want) else np.zeros(len(codes), bool)
    at = np.arange(idx.num_rows)[rows][hit] if len(want) else np.zeros(0, np.int64)
    order = np.argsort(indexes.array(idx, "ts")[at], kind="stable")[: max(1, int(n))]
    got = span_rows(store, trace, idx, cfg, at[order])
    return SpanList(got, int(len(at)), f"{len(at):,} spans named like {text!r}", cfg)


def _find(store, trace, window, *, text, n=1000, **pairing) -> SpanList:
    return find_spans(store, trace, spans_config(store, trace, **pairing), window, text, n)


FIND = Analysis(
    "find",
    "the spans whose name contains a text, in time order (the timeline's search)",
    _find,
    params=(
        Param("text", "str", "", "what the name contains (any case)", required=True, positional=True),
        Param("n", "int", "count", "spans listed, the first in time", default=1000),
    )
    + WINDOW_PARAMS
    + SPAN_PARAMS,
    columns=TOP_COLUMNS,
    applies_to=("spans",),
    uses=("spans", "calls"),
)


@dataclass
class ThreadCalls(Answer):
    """The call tree of one thread, in time order, printed indented."""

    rows: pa.Table
    config: SpanConfig

    def table(self) -> pa.Table:
        return self.rows

    def to_json(self, shown: dict) -> dict:
        return {"rows": self.rows.slice(0, shown.get("limit")).to_pylist(), "total": self.rows.num_rows}

    def show(self, shown: dict) -> list:
        limit, cfg = shown.get("limit") or 200, self.config
        name_col = begin_column(cfg.name_column) if cfg.name_column else None
        lines = []
        for r in self.rows.slice(0, limit).to_pylist():
            name = r.get(name_col) if name_col else cfg.begin
            mark = "" if r["closed"] else "  (unclosed)"
            lines.append(
                f"{'  ' * r['depth']}{name}  [span {r['span_id']}]  {r['ts']} +{r['dur']:,} ns "
                f"(self {r['self_time']:,}){mark}\n"
            )
        parts = [Text("".join(lines))]
        if self.rows.num_rows > limit:
            parts.append(
                Note(f"({self.rows.num_rows:,} calls, {limit} shown; --limit, --start/--end, --max-depth narrow it)")
            )
        return parts

    def save_params(self) -> dict:
        return {"config": self.config.to_json()}


def _calltree(store, trace, window, *, thread, max_depth=None, **pairing) -> ThreadCalls:
    cfg = spans_config(store, trace, **pairing)
    return ThreadCalls(
        thread_calls(store, trace, thread, cfg, start=window.start, end=window.end, max_depth=max_depth), cfg
    )


CALLTREE = Analysis(
    "calltree",
    "the call tree of one thread, indented",
    _calltree,
    params=(
        Param("thread", "int", "id", "producer id", required=True),
        Param("start", "time", "ns", "calls overlapping [start, end) (ns or with a unit)", window="start"),
        Param("end_time", "time", "ns", "...", flag="--end-time", window="end"),
        Param("max_depth", "int", "count", "deepest level shown (0: the root calls)"),
    )
    + SPAN_PARAMS,
    columns=SPAN_COLUMNS,
    columns_note="Then the span's parameters, as `analyze spans` gives them.",
    applies_to=("spans",),
    uses=("spans",),
    limit=200,
)
