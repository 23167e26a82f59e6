"""Duration histograms and attribution (seed 004), bucketed exactly like bpftrace.

Owns `hist` (log2 buckets of bpftrace `hist(n, k)`, including its negative and 0
buckets) and `lhist` (linear buckets of `lhist(n, min, max, step)`, with its
below-min and above-max buckets), grouped by caller, by call stack, by name, by
producer or by any column (bpftrace's `@[key] = hist(...)`), the share of values below
a threshold ("28.9% of spans under 10 us"), the text in bpftrace's `@` style, and the
before/after comparison of two traces.

Bucket indexes come from Rust (`src/analysis/hist.rs`, one pass over the values); labels,
edges and text follow bpftrace's `src/output` (`hist_index_label`, `lhist_index_label`,
`hist_to_str`): rows from the first to the last non-empty bucket, a 16-wide label, an
8-wide count, a 52-wide bar of `@` scaled to the fullest bucket; keyed maps sorted by
total count, largest last. Values are durations in ns divided by the unit (us: /1000,
truncated toward zero like bpftrace's integer division).

Over 600 lines: bpftrace's bucket rules, where values come from and the three analyses
(hist, lhist, compare) share the Histogram.

Bucket table (`Histogram.buckets()`, `BUCKET_COLUMNS`):
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import _core, arrays
from ..errors import BadInput
from ..schema import Column
from .registry import Analysis, Answer, Note, Param, Text

if TYPE_CHECKING:
    from ..store import Store

BUCKET_COLUMNS = (
    Column("group", "string", "", "the group (caller, stack, name, ...), empty when ungrouped"),
    Column("bucket", "int64", "index", "bpftrace's bucket index"),
    Column("low", "int64", "unit", "smallest value in the bucket (null: no lower bound)"),
    Column("high", "int64", "unit", "largest value in the bucket (null: no upper bound)"),
    Column("label", "string", "", "bpftrace's label, e.g. [4, 8) or [1K, 2K)"),
    Column("count", "int64", "count", "values in the bucket"),
)
__doc__ += "\n".join(f"  {c.name:<7} {c.type:<6} {c.unit:<6} {c.doc}" for c in BUCKET_COLUMNS)

UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
MAP_NAMES = {"ns": "@nsecs", "us": "@usecs", "ms": "@msecs", "s": "@secs"}
GROUPS = ("none", "caller", "stack", "name", "producer")
BAR = 52
SUMMARY_GROUPS = 50  # groups (largest first) that get count/mean/percentiles


# -- bpftrace's labels and edges ----------------------------------------------------------


def _hist_label(index: int, k: int) -> str:
    """bpftrace TextOutput::hist_index_label."""
    n = 1 << k
    interval = index & (n - 1)
    power = (index >> k) - 1
    decade = power // 10
    suffix = "\0KMGTPE"[decade]
    power -= 10 * decade
    v = (1 << power) * (n + interval)
    return f"{v}{suffix}" if suffix != "\0" else str(v)


def _hist_low(index: int, k: int) -> int | None:
    """Smallest value of `hist` bucket `index` (None: the negative bucket)."""
    if index == 0:
        return None
    if index <= 2 << k:
        return index - 1
    i = index - 1
    n = 1 << k
    return (1 << ((i >> k) - 1)) * (n + (i & (n - 1)))


def hist_bucket(index: int, k: int = 0) -> tuple[int | None, int | None, str]:
    """(low, high, label) of `hist` bucket `index`; bounds inclusive, None = unbounded."""
    if index == 0:
        return None, -1, "(..., 0)"
    if index <= 2 << k:
        return index - 1, index - 1, f"[{index - 1}]"
    low = _hist_low(index, k)
    nxt = _hist_low(index + 1, k)
    high = None if nxt is None or index + 1 >= _core.hist_log2_buckets(k) else nxt - 1
    return low, high, f"[{_hist_label(index - 1, k)}, {_hist_label(index, k)})"


def _lhist_label(number: int, step: int) -> str:
    """bpftrace TextOutput::lhist_index_label."""
    kilo, mega = 1024, 1024 * 1024
    if step % kilo != 0 or number == 0:
        return str(number)
    if number % mega == 0:
        return f"{number // mega}M"
    if number % kilo == 0:
        return f"{number // kilo}K"
    return str(number)


def lhist_bucket(index: int, lo: int, hi: int, step: int) -> tuple[int | None, int | None, str]:
    """(low, high, label) of `lhist` bucket `index`; bounds inclusive, None = unbounded."""
    buckets = (hi - lo) // step
    if index == 0:
        return None, lo - 1, f"(..., {_lhist_label(lo, step)})"
    if index == buckets + 1:
        return hi, None, f"[{_lhist_label(hi, step)}, ...)"
    a = (index - 1) * step + lo
    return a, a + step - 1, f"[{_lhist_label(a, step)}, {_lhist_label(a + step, step)})"


# -- the histogram ------------------------------------------------------------------------


@dataclass
class Histogram:
    """Counts per bucket and group, with the raw facts needed for shares and percentiles."""

    kind: str  # "hist" | "lhist"
    params: dict  # hist: k; lhist: min, max, step
    unit: str
    groups: list[str]
    counts: np.ndarray  # groups x buckets
    name: str = "@"
    below: dict = field(default_factory=dict)  # threshold share per group, when asked
    summary: dict = field(default_factory=dict)  # per group: count, min, max, mean, p50, p90, p99
    stack_keys: bool = False

    def bucket(self, i: int) -> tuple[int | None, int | None, str]:
        if self.kind == "hist":
            return hist_bucket(i, self.params["k"])
        return lhist_bucket(i, self.params["min"], self.params["max"], self.params["step"])

    def rows(self, g: int) -> range:
        """Bucket indexes bpftrace prints for group g: first to last non-empty."""
        nz = np.nonzero(self.counts[g])[0]
        return range(0) if len(nz) == 0 else range(int(nz[0]), int(nz[-1]) + 1)

    def buckets(self, top: int | None = None) -> pa.Table:
        """BUCKET_COLUMNS, the printed range of every group (of the `top` largest)."""
        out = {c.name: [] for c in BUCKET_COLUMNS}
        for g in self.order(top):
            gname = self.groups[g]
            for i in self.rows(g):
                low, high, label = self.bucket(i)
                for k, v in zip(
                    ("group", "bucket", "low", "high", "label", "count"),
                    (gname, i, low, high, label, int(self.counts[g, i])),
                ):
                    out[k].append(v)
        return pa.table({c.name: pa.array(out[c.name], c.arrow_type) for c in BUCKET_COLUMNS})

    def order(self, top: int | None = None) -> list[int]:
        """Groups by total count ascending (largest last, as bpftrace prints), the last `top`."""
        totals = self.counts.sum(axis=1)
        idx = np.argsort(totals, kind="stable")  # ties keep group order
        if top:
            idx = idx[-top:]
        return [int(i) for i in idx]

    def text(self, top: int | None = None) -> str:
        """bpftrace's text output: one `@name[key]: ` map per group."""
        maps = []
        for g in self.order(top):
            rows = list(self.rows(g))
            if not rows:
                continue
            key = self.groups[g]
            if key == "":
                head = f"{self.name}: "
            elif self.stack_keys:
                frames = key.split(";")[::-1]
                head = f"{self.name}[\n" + "".join(f"        {f}\n" for f in frames) + "]: "
            else:
                head = f"{self.name}[{key}]: "
            c = self.counts[g]
            mx = np.float32(c[rows].max())
            lines = []
            for i in rows:
                label = self.bucket(i)[2]
                width = int(np.float32(c[i]) / mx * np.float32(BAR))
                lines.append(f"{label:<16}{int(c[i]):>8} |{'@' * width:<{BAR}}|\n")
            maps.append(head + "\n" + "".join(lines))
        return "\n".join(maps) + ("\n" if maps else "")

    def to_json(self, top: int | None = None) -> dict:
        keep = {self.groups[g] for g in self.order(top)}
        return {
            "kind": self.kind,
            "params": self.params,
            "unit": self.unit,
            "name": self.name,
            "groups": len(self.groups),
            "buckets": self.buckets(top).to_pylist(),
            "below": {k: v for k, v in self.below.items() if k in keep},
            "summary": {k: v for k, v in self.summary.items() if k in keep},
        }


def value_summary(values: np.ndarray) -> dict:
    """count, min, max, mean and nearest-rank p50/p90/p99 (one partition, not a sort)."""
    n = len(values)
    if n == 0:
        return {"count": 0}
    ranks = [max(0, int(np.ceil(q * n)) - 1) for q in (0.5, 0.9, 0.99)]
    part = np.partition(values, ranks)
    return {
        "count": int(n),
        "min": int(values.min()),
        "max": int(values.max()),
        "mean": float(values.mean()),
        "p50": int(part[ranks[0]]),
        "p90": int(part[ranks[1]]),
        "p99": int(part[ranks[2]]),
    }


def scale(values: np.ndarray, unit: str) -> np.ndarray:
    """ns -> unit, truncating toward zero (C integer division, as in bpftrace scripts)."""
    if unit not in UNITS:
        raise BadInput(f"unit {unit!r}", expected=" | ".join(UNITS))
    d = UNITS[unit]
    if d == 1:
        return values
    if len(values) and values.min() >= 0:  # durations: one division pass (4 passes otherwise)
        return values // d
    q = np.abs(values) // d
    return np.where(values < 0, -q, q)


def histogram(
    values: np.ndarray,
    *,
    kind: str = "hist",
    k: int = 0,
    min: int = 0,
    max: int = 0,
    step: int = 1,  # noqa: A002
    unit: str = "ns",
    groups: np.ndarray | None = None,
    group_names: list[str] | None = None,
    below: float | None = None,
    name: str | None = None,
    stack_keys: bool = False,
    summary: bool = True,
) -> Histogram:
    """Histogram of int64 `values` (ns), optionally per group code (0..len(group_names)-1).

    summary: also count/min/max/mean/p50/p90/p99 of the largest groups (a partition of
    their values: half the cost of the histogram itself on 17M values)."""
    v = np.ascontiguousarray(values, dtype=np.int64)
    scaled = scale(v, unit)
    pv = pa.array(scaled)
    ng = len(group_names) if group_names is not None else 1
    g = None if groups is None else pa.array(np.ascontiguousarray(groups, dtype=np.int64))
    if kind == "hist":
        if not 0 <= k <= 5:
            raise BadInput(f"hist k {k}", expected="0..5")
        flat = _core.hist_log2(pv, k, g, ng)
        params = {"k": k}
    elif kind == "lhist":
        try:
            flat = _core.hist_linear(pv, int(min), int(max), int(step), g, ng)
        except ValueError as e:
            raise BadInput(str(e)) from None
        params = {"min": int(min), "max": int(max), "step": int(step)}
    else:
        raise BadInput(f"histogram kind {kind!r}", expected="hist | lhist")
    counts = flat.to_numpy().reshape(ng, -1)
    h = Histogram(
        kind, params, unit, group_names or [""], counts, name or MAP_NAMES.get(unit, "@"), stack_keys=stack_keys
    )
    # Shares below the threshold for every group (vectorized); percentiles for the
    # SUMMARY_GROUPS largest groups only (each needs its own selection).
    gcodes = None if groups is None else np.asarray(groups, dtype=np.int64)
    if below is not None:
        if gcodes is None:
            n, nb = np.array([len(v)]), np.array([int((v < below).sum())])
        else:
            n = np.bincount(gcodes, minlength=ng)
            nb = np.bincount(gcodes, weights=(v < below), minlength=ng).astype(np.int64)
        for gi, gname in enumerate(h.groups):
            h.below[gname] = {
                "threshold_ns": below,
                "below": int(nb[gi]),
                "count": int(n[gi]),
                "share": float(nb[gi] / n[gi]) if n[gi] else 0.0,
            }
    if summary:
        for gi in h.order(SUMMARY_GROUPS):
            h.summary[h.groups[gi]] = value_summary(v if gcodes is None else v[gcodes == gi])
    return h


# -- where values come from -------------------------------------------------------------------


def _codes(col: pa.Array | pa.ChunkedArray, null_name: str = "(none)") -> tuple[np.ndarray, list[str]]:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    enc = arr.dictionary_encode()
    codes = enc.indices.to_numpy(zero_copy_only=False)
    names = [str(x) for x in enc.dictionary.to_pylist()]
    if enc.indices.null_count:
        codes = np.where(pc.is_null(enc.indices).to_numpy(zero_copy_only=False), len(names), codes)
        names.append(null_name)
    return codes.astype(np.int64), names


def span_values(
    store: Store,
    trace: str,
    *,
    group: str = "none",
    config=None,
    include_unclosed: bool = False,
    start: int | None = None,
    end: int | None = None,
    producers: tuple[int, ...] | None = None,
) -> tuple[np.ndarray, np.ndarray | None, list[str] | None, bool]:
    """Span durations of `trace` (starting in [start, end), of `producers`) with their group
    codes: (values, codes, names, stack_keys). Ungrouped: read from the span index (binary
    searches per thread and depth, `windows.starting`); grouped: from the span table."""
    from .profiles import span_config
    from .spans import begin_column, name_codes, span_index, span_table

    cfg = config or span_config(store, trace)
    if group == "none" or producers is not None:
        if group != "none":
            raise BadInput(f"a histogram of some producers by {group}", expected="--by none")
        from . import windows
        from .registry import Window

        idx = span_index(store, trace, cfg)
        info = store.trace(trace)
        vals = windows.starting_values(
            idx, "dur", Window(start, end, producers), info.ts_min, info.ts_max, closed_only=not include_unclosed
        )
        return vals, None, None, False
    name_col = begin_column(cfg.name_column) if cfg.name_column else None
    cols = (["ts"] if start is not None or end is not None else []) + ["dur", "closed"]
    if group in ("caller", "stack"):
        cols += ["parent_id", "depth"] + ([name_col] if name_col else [])
    elif group == "name":
        if not name_col:
            raise BadInput("spans have no name column", expected="--name COL when pairing")
        cols.append(name_col)
    elif group == "producer":
        cols.append("producer")
    elif group != "none":
        cols.append(group)
    cols = list(dict.fromkeys(cols))
    # Order matters only when a span's caller or path is looked up by its parent's row.
    t = span_table(store, trace, cfg, columns=cols, ordered=group in ("caller", "stack"))
    keep = np.ones(t.num_rows, bool) if include_unclosed else arrays.as_numpy(t.column("closed")).astype(bool)
    if start is not None or end is not None:
        ts = arrays.as_numpy(t.column("ts"))
        if start is not None:
            keep &= ts >= start
        if end is not None:
            keep &= ts < end
    dur = arrays.as_numpy(t.column("dur"))
    all_kept = bool(keep.all())
    values = dur if all_kept else dur[keep]
    if group == "none":
        return values, None, None, False
    if group == "caller":
        parent = arrays.as_numpy(t.column("parent_id"))
        if name_col:
            codes, names = name_codes(t.column(name_col))
            names = names.to_pylist()
        else:
            codes, names = np.zeros(t.num_rows, np.int64), [cfg.begin]
        caller = np.where(parent >= 0, codes[np.maximum(parent, 0)], len(names))
        names = list(names) + ["(root)"]
        return values, caller if all_kept else caller[keep], names, False
    if group == "stack":
        parent = arrays.as_numpy(t.column("parent_id"))
        depth = arrays.as_numpy(t.column("depth")).astype(np.int32)
        if name_col:
            codes, names_arr = name_codes(t.column(name_col))
        else:
            codes, names_arr = np.zeros(t.num_rows, np.int64), pa.array([cfg.begin])
        ct = _core.call_tree(pa.array(parent), pa.array(codes), pa.array(depth))
        node_of = ct["node_of"].to_numpy()
        node_of = node_of if all_kept else node_of[keep]
        used, inv = np.unique(node_of, return_inverse=True)
        paths = _node_paths(ct, names_arr, used)
        return values, inv.astype(np.int64), paths, True
    col = name_col if group == "name" else group
    codes, names = _codes(t.column(col))
    return values, codes if all_kept else codes[keep], names, False


def _node_paths(ct: dict, names: pa.Array, wanted: np.ndarray) -> list[str]:
    """'root;...;leaf' of the wanted call-tree nodes, built level by level (nodes come
    parents first, so a level's paths extend the previous level's)."""
    from .spans import node_paths

    return node_paths(ct["parent"].to_numpy(), ct["depth"].to_numpy(), ct["key"].to_numpy(), names)[wanted].tolist()


def _value_and_group(store, trace: str, type_name: str, value: str, group: str) -> str | None:
    """Checks `value` is an integer column of the type and `group` one of its columns (or
    none/producer); returns the group column (None: ungrouped)."""
    et = store.event_type(trace, type_name)
    cols_of = {c.name: c for c in et.columns}
    if value not in cols_of or cols_of[value].type not in ("int64", "int32"):
        raise BadInput(
            f"event type {type_name!r} has no integer column {value!r}",
            expected=", ".join(c.name for c in et.columns if c.type in ("int64", "int32")),
        )
    gcol = "producer" if group == "producer" else (None if group == "none" else group)
    if gcol is not None and gcol not in cols_of:
        # caller, stack and name are column names like any other here (a probe's `caller` field);
        # grouping spans by their calling span, path or name is the span histogram's (no --type).
        spans = (
            f" (grouping spans by their {group} is done without --type)" if group in ("caller", "stack", "name") else ""
        )
        raise BadInput(
            f"event type {type_name!r} has no column {gcol!r}{spans}",
            expected="none, producer or a column of the type: " + ", ".join(cols_of),
        )
    return gcol


def types_with_column(store, trace: str, column: str) -> list[str]:
    """The event types of `trace` that have a column named `column`, span types first."""
    types = [et for et in store.event_types(trace).values() if any(c.name == column for c in et.columns)]
    return [et.name for et in sorted(types, key=lambda et: et.kind != "span")]


def type_values(
    store: Store,
    trace: str,
    type_name: str,
    value: str = "dur",
    *,
    group: str = "none",
    start: int | None = None,
    end: int | None = None,
) -> tuple[np.ndarray, np.ndarray | None, list[str] | None, bool]:
    """An event type's int column (`dur` of a span kind by default) with group codes."""
    gcol = _value_and_group(store, trace, type_name, value, group)
    t = store.scan(
        trace, type_name, list(dict.fromkeys([value] + ([gcol] if gcol else []))), start=start, end=end, order=False
    )
    t = t.filter(pc.is_valid(t.column(value)))
    values = arrays.as_numpy(t.column(value)).astype(np.int64, copy=False)
    if gcol is None:
        return values, None, None, False
    codes, names = _codes(t.column(gcol))
    return values, codes, names, False


def type_histogram_sql(
    engine,
    trace: str,
    type_name: str,
    value: str = "dur",
    *,
    group: str = "none",
    start: int | None = None,
    end: int | None = None,
    kind: str = "hist",
    k: int = 0,
    min: int = 0,
    max: int = 0,
    step: int = 1,
    unit: str = "ns",  # noqa: A002
    below: float | None = None,
    name: str | None = None,
) -> Histogram:
    """`histogram(*type_values(...))` answered by plain SQL (sql/hist_log2.sql,
    hist_linear.sql, hist_summary.sql) on any engine: a Store (DuckDB) or an engine from
    `tracehouse.open_engine` (DuckDB or Spark, one store or several). Same buckets and
    counts; groups in name order; the summary has count/min/max/mean (no percentiles)."""
    from ..store.query import qident
    from .sql import text as sql_text
    from .sql import where as _where

    gcol = _value_and_group(engine, trace, type_name, value, group)
    if unit not in UNITS:
        raise BadInput(f"unit {unit!r}", expected=" | ".join(UNITS))
    fmt = {
        "group": "''" if gcol is None else f"COALESCE(CAST({qident(gcol)} AS VARCHAR), '(none)')",
        "value": qident(value),
        "unit": UNITS[unit],
        "source": f"{qident(trace)}.{qident(type_name)}",
        "where": _where(start, end),
    }
    if kind == "hist":
        if not 0 <= k <= 5:
            raise BadInput(f"hist k {k}", expected="0..5")
        params = {"k": k}
        nb = _core.hist_log2_buckets(k)
        q = sql_text("hist_log2").format(**fmt, k=k, n=1 << k, small=2 << k)
    elif kind == "lhist":
        if step <= 0 or min >= max or (max - min) % step:
            raise BadInput(
                f"lhist min {min}, max {max}, step {step}",
                expected="step >= 1, min < max, max - min a multiple of step",
            )
        params = {"min": int(min), "max": int(max), "step": int(step)}
        nb = (max - min) // step + 2
        q = sql_text("hist_linear").format(
            **fmt, min=int(min), max=int(max), step=int(step), buckets=(max - min) // step
        )
    else:
        raise BadInput(f"histogram kind {kind!r}", expected="hist | lhist")
    t = engine.sql(q)
    summ = engine.sql(sql_text("hist_summary").format(**fmt, below=float(below) if below is not None else 0))
    groups = summ.column("grp").to_pylist() if gcol is not None else [""]
    counts = np.zeros((len(groups), nb), np.int64)
    if t.num_rows:
        gi = pc.index_in(t.column("grp"), value_set=pa.array(groups, pa.string())).to_numpy(zero_copy_only=False)
        np.add.at(counts, (gi.astype(np.int64), t.column("bucket").to_numpy()), t.column("count").to_numpy())
    h = Histogram(kind, params, unit, groups, counts, name or MAP_NAMES.get(unit, "@"))
    for row in summ.to_pylist():
        g = row["grp"] if gcol is not None else ""
        h.summary[g] = {"count": row["count"], "min": row["min"], "max": row["max"], "mean": row["mean"]}
        if below is not None:
            h.below[g] = {
                "threshold_ns": below,
                "below": int(row["below"]),
                "count": row["count"],
                "share": row["below"] / row["count"] if row["count"] else 0.0,
            }
    return h


def compare(before: Histogram, after: Histogram) -> pa.Table:
    """Bucket by bucket, two ungrouped histograms with the same buckets: counts, shares
    and the change of share (after - before), over the union of printed rows."""
    if before.kind != after.kind or before.params != after.params or before.unit != after.unit:
        raise BadInput("the two histograms have different buckets")
    b, a = before.counts.sum(axis=0), after.counts.sum(axis=0)
    nz = np.nonzero((a + b) > 0)[0]
    rows = range(int(nz[0]), int(nz[-1]) + 1) if len(nz) else range(0)
    tb, ta = max(int(b.sum()), 1), max(int(a.sum()), 1)
    out = {
        "bucket": [],
        "label": [],
        "before": [],
        "after": [],
        "before_share": [],
        "after_share": [],
        "delta_share": [],
    }
    for i in rows:
        out["bucket"].append(i)
        out["label"].append(before.bucket(i)[2])
        out["before"].append(int(b[i]))
        out["after"].append(int(a[i]))
        out["before_share"].append(b[i] / tb)
        out["after_share"].append(a[i] / ta)
        out["delta_share"].append(a[i] / ta - b[i] / tb)
    return pa.table(out)


def compare_text(before: Histogram, after: Histogram, names: tuple[str, str] = ("before", "after")) -> str:
    """Both histograms in bpftrace style, then count/percentile changes and the bucket shares."""
    bn, an = names
    b1 = Histogram(before.kind, before.params, before.unit, [bn], before.counts.sum(axis=0, keepdims=True), before.name)
    a1 = Histogram(after.kind, after.params, after.unit, [an], after.counts.sum(axis=0, keepdims=True), after.name)
    text = b1.text() + "\n" + a1.text()
    sb, sa = next(iter(before.summary.values()), {}), next(iter(after.summary.values()), {})
    lines = []
    for k in ("count", "mean", "p50", "p90", "p99", "max"):
        if k in sb and k in sa:
            x, y = sb[k], sa[k]
            ch = f"{(y - x) / x * 100:+.1f}%" if x else "n/a"
            lines.append(f"{k:<6} {x:>14,.0f} -> {y:>14,.0f}  ({ch})")
    under = below_change(before, after)
    if under is not None:
        b, a = under["before"], under["after"]
        lines.append(
            f"under {_threshold(under['threshold_ns'])}: {b['share'] * 100:.1f}% ({b['below']:,} of {b['count']:,})"
            f" -> {a['share'] * 100:.1f}% ({a['below']:,} of {a['count']:,})  ({under['delta_share'] * 100:+.1f} pt)"
        )
    t = compare(before, after)
    shares = [
        f"{lab:<16} {bs * 100:6.1f}% -> {as_ * 100:6.1f}%  ({d * 100:+.1f} pt)"
        for lab, bs, as_, d in zip(
            t.column("label").to_pylist(),
            t.column("before_share").to_pylist(),
            t.column("after_share").to_pylist(),
            t.column("delta_share").to_pylist(),
        )
    ]
    return text + f"\n{bn} -> {an} (ns)\n" + "\n".join(lines) + "\n\nshare per bucket\n" + "\n".join(shares) + "\n"


def below_change(before: Histogram, after: Histogram) -> dict | None:
    """The share of values under the threshold in both histograms (seed 004's headline: jobs
    under 10 us, 28.9 % -> 12.6 %), over all their groups; None when no threshold was asked."""
    if not before.below or not after.below:
        return None

    def total(h: Histogram) -> dict:
        n = sum(b["count"] for b in h.below.values())
        k = sum(b["below"] for b in h.below.values())
        return {"below": k, "count": n, "share": k / n if n else 0.0}

    b, a = total(before), total(after)
    return {
        "threshold_ns": next(iter(before.below.values()))["threshold_ns"],
        "before": b,
        "after": a,
        "delta_share": a["share"] - b["share"],
    }


def _threshold(ns: float) -> str:
    """10000 -> '10 us' (the largest unit that divides it)."""
    for unit, d in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns >= d and ns % d == 0:
            return f"{int(ns // d):,} {unit}"
    return f"{ns:,.0f} ns"


# -- as analyses ---------------------------------------------------------------------------------


def linear_buckets(p99_ns: float, unit: str) -> tuple[int, int, int]:
    """lhist bounds when none are given: 0 to the 99th percentile in about 40 round steps
    (bpftrace needs (max - min) to be a multiple of step)."""
    top = float(p99_ns) / UNITS[unit]
    if top <= 0:
        return 0, 10, 1
    raw = max(top / 40, 1e-9)
    mag = 10 ** math.floor(math.log10(raw))
    step = max(1, int(next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)))
    hi = max(step, int(math.ceil(top / step)) * step)
    return 0, hi, step


@dataclass
class HistAnswer(Answer):
    """A histogram with how long it took and who answered."""

    h: Histogram
    seconds: float
    engine: str
    below_ns: int | None

    def table(self) -> pa.Table:
        return self.h.buckets()

    def to_json(self, shown: dict) -> dict:
        return self.h.to_json(shown.get("top")) | {
            "seconds": round(self.seconds, 4),
            "engine": self.engine,
            "values": int(self.h.counts.sum()),
        }

    def show(self, shown: dict) -> list:
        h, top = self.h, shown.get("top")
        n = int(h.counts.sum())
        parts = [
            Text(h.text(top)),
            Note(
                f"{n:,} values in {len(h.groups):,} group(s), {self.seconds * 1000:.0f} ms, {self.engine}"
                + (f"; {top} largest groups shown" if top and len(h.groups) > top else "")
            ),
        ]
        for g in h.order(top)[::-1][:10] if h.below else []:
            b = h.below[h.groups[g]]
            label = f"[{h.groups[g]}] " if h.groups[g] else ""
            parts.append(
                Text(f"{label}{b['share'] * 100:.1f}% of {b['count']:,} under {self.below_ns:,} ns ({b['below']:,})\n")
            )
        return parts

    def save(self, store, name, traces, params, shown) -> int:
        from .results import save_table

        h = self.h
        return save_table(
            store,
            name,
            traces,
            h.buckets(),
            params=params | {"kind": h.kind, **h.params, "unit": h.unit},
            payload={"text": h.text(shown.get("top")), "below": h.below, "summary": dict(list(h.summary.items())[:20])},
        )


def _values(
    store,
    trace: str,
    window,
    *,
    by="none",
    type=None,
    value="dur",
    unclosed=False,  # noqa: A002
    begin=None,
    end=None,
    key=None,
    name=None,
):
    if type:
        if window.producers is not None:
            raise BadInput("a histogram of an event type's column for some producers", expected="--by producer")
        return type_values(store, trace, type, value, group=by, start=window.start, end=window.end)
    from .spans import spans_config

    cfg = spans_config(store, trace, begin, end, key, name)

    def column_instead() -> None:
        # `--by caller` without --type groups spans by their calling span; a probe field named
        # caller (seed 004's scripts print one) is a column of an event type: say which.
        typed = types_with_column(store, trace, by) if by not in ("none", "producer") else []
        if typed:
            raise BadInput(
                f"the spans of trace {trace!r} have nothing to group by {by}; event type(s) "
                f"{', '.join(typed)} have a column {by!r}",
                expected=f"--type {typed[0]} --by {by} groups by that column",
            )

    try:
        got = span_values(
            store,
            trace,
            group=by,
            config=cfg,
            include_unclosed=unclosed,
            start=window.start,
            end=window.end,
            producers=window.producers,
        )
    except BadInput:
        column_instead()
        raise
    values, codes = got[0], got[1]
    if len(values) == 0 or (codes is not None and len(np.unique(codes)) <= 1):
        column_instead()  # no spans, or one group only (every span a root: no caller to tell apart)
    return got


def _hist_of(
    store,
    trace: str,
    window,
    kind: str,
    *,
    unit="us",
    below=None,
    k=0,
    min=None,
    max=None,  # noqa: A002
    step=None,
    **src,
) -> Histogram:
    values, codes, names, stack = _values(store, trace, window, **src)
    if kind == "lhist" and (min is None or max is None or step is None):
        lo, hi, st = linear_buckets(value_summary(values).get("p99", 0), unit)
        min, max, step = (lo if min is None else min), (hi if max is None else max), (st if step is None else step)
    kw = {"k": k} if kind == "hist" else {"min": min, "max": max, "step": step}
    return histogram(values, kind=kind, unit=unit, groups=codes, group_names=names, below=below, stack_keys=stack, **kw)


def _run_hist(kind: str):
    def run(store, trace, window, *, engine=None, master=None, conf=None, **kw) -> HistAnswer:
        import time

        from .sql import answered_by
        from .sql import engine as open_engine

        t0 = time.perf_counter()
        with open_engine(store, engine, master, conf) as e:
            if e is not None:
                if not kw.get("type"):
                    raise BadInput(
                        f"--engine {engine} histograms are of an event type's column",
                        expected="--type TYPE (span pairing runs in the Rust core, not in SQL)",
                    )
                bounds = (
                    {"k": kw.get("k", 0)}
                    if kind == "hist"
                    else {"min": kw["min"], "max": kw["max"], "step": kw["step"]}
                )
                if kind == "lhist" and None in bounds.values():
                    raise BadInput(f"--engine {engine} linear histograms", expected="--min, --max and --step")
                h = type_histogram_sql(
                    e,
                    trace,
                    kw["type"],
                    kw.get("value", "dur"),
                    group=kw.get("by", "none"),
                    start=window.start,
                    end=window.end,
                    kind=kind,
                    unit=kw.get("unit", "us"),
                    below=kw.get("below"),
                    **bounds,
                )
            else:
                h = _hist_of(store, trace, window, kind, **kw)
            how = answered_by(e, "the Rust core")
        return HistAnswer(h, time.perf_counter() - t0, how, kw.get("below"))

    return run


HIST_PARAMS = (
    Param("by", "str", "", "group by: none | caller | stack | name | producer | a column", default="none"),
    Param("unit", "str", "", "value unit", default="us", choices=tuple(UNITS)),
    Param("below", "duration", "ns", "report the share of values under this duration, e.g. 10us"),
    Param("type", "str", "", "histogram of an event type's column instead of span durations"),
    Param("value", "str", "", "that column", default="dur"),
    Param("unclosed", "bool", "", "include spans cut without an end", default=False),
    Param("start", "time", "ns", "span start time range, from (ns or with a unit)", window="start"),
    Param("end_time", "time", "ns", "... to", flag="--end-time", window="end"),
    Param(
        "producer", "int", "id", "only the spans of these producers (repeat; ungrouped)", many=True, window="producers"
    ),
    Param("top", "int", "count", "groups printed, the largest", default=20, answer=False),
)
_BUCKET_NOTE = (
    "`--json` adds `summary` (count, min, max, mean, p50, p90, p99 in ns per group), `below` "
    "(the share under `--below`) and the text in bpftrace's style."
)


def _hist_analysis(kind: str, summary_: str, bounds: tuple) -> Analysis:
    from .spans import SPAN_PARAMS
    from .sql import ENGINE_PARAMS

    return Analysis(
        kind,
        summary_,
        _run_hist(kind),
        params=HIST_PARAMS + SPAN_PARAMS + ENGINE_PARAMS + bounds,
        columns=BUCKET_COLUMNS,
        columns_note=_BUCKET_NOTE,
        uses=("spans",),
    )


HIST = _hist_analysis(
    "hist",
    "log2 duration histogram, bpftrace hist() buckets",
    (Param("k", "int", "count", "2^k buckets per power of 2 (0..5)", default=0),),
)
LHIST = _hist_analysis(
    "lhist",
    "linear duration histogram, bpftrace lhist() buckets",
    (
        Param("min", "int", "unit", "first bucket's low edge (default 0)"),
        Param("max", "int", "unit", "last bucket's high edge (default: the 99th percentile, rounded)"),
        Param("step", "int", "unit", "bucket width (default: about 40 buckets)"),
    ),
)


@dataclass
class Compared(Answer):
    before: Histogram
    after: Histogram
    names: tuple[str, str]

    def table(self) -> pa.Table:
        return compare(self.before, self.after)

    def to_json(self, shown: dict) -> dict:
        return {
            "buckets": self.table().to_pylist(),
            "before": next(iter(self.before.summary.values()), {}),
            "after": next(iter(self.after.summary.values()), {}),
            "below": below_change(self.before, self.after),
        }

    def show(self, shown: dict) -> list:
        return [Text(compare_text(self.before, self.after, self.names))]

    def save(self, store, name, traces, params, shown) -> int:
        from .results import save_table

        b = self.before
        return save_table(
            store,
            name,
            traces,
            self.table(),
            params=params | {"kind": b.kind, **b.params, "unit": b.unit},
            payload={
                "text": compare_text(self.before, self.after, self.names),
                "before": self.before.summary,
                "after": self.after.summary,
            },
        )


def _compare(store, traces, window, *, kind="hist", **kw) -> Compared:
    kw["by"] = "none"
    before, after = traces
    return Compared(
        _hist_of(store, before, window, kind, **kw), _hist_of(store, after, window, kind, **kw), (before, after)
    )


def _compare_analysis() -> Analysis:
    from .spans import SPAN_PARAMS

    return Analysis(
        "compare",
        "before/after duration histograms of two traces",
        _compare,
        params=(
            Param("kind", "str", "", "histogram kind", default="hist", choices=("hist", "lhist")),
            Param("k", "int", "count", "hist: 2^k buckets per power of 2", default=0),
            Param("min", "int", "unit", "lhist: first bucket's low edge", default=0),
            Param("max", "int", "unit", "lhist: last bucket's high edge", default=100),
            Param("step", "int", "unit", "lhist: bucket width", default=10),
        )
        + tuple(p for p in HIST_PARAMS if p.name not in ("producer",))
        + SPAN_PARAMS,
        columns=(
            Column("bucket", "int64", "index", "bpftrace's bucket index"),
            Column("label", "string", "", "bpftrace's label"),
            Column("before", "int64", "count", "values of the first trace in the bucket"),
            Column("after", "int64", "count", "values of the second trace in the bucket"),
            Column("before_share", "float64", "share", "before / all values of the first trace"),
            Column("after_share", "float64", "share", "after / all values of the second trace"),
            Column("delta_share", "float64", "share", "after_share - before_share"),
        ),
        traces="pair",
        uses=("spans",),
    )


COMPARE = _compare_analysis()
