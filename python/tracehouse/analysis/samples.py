"""Stack samples: the call tree and flame graph of a sampled trace (perf's `sample`, any format
whose profile declares samples).

Owns reading a trace's stack samples as a calling-context tree with the columns of the span
call tree (`spans.CALL_TREE_COLUMNS`), so `analyze tree`, `analyze flame` and the web UI's
flame graph read a profile as they read spans: a node is a distinct call path (root first),
`calls` the samples through it, `total_ns` the weight of those samples (their period: ns of
CPU for cpu-clock and task-clock; each sample weighs 1 when the format names no weight),
`self_ns` the weight of the samples whose stack ends there. The stacks are grouped in SQL
(DuckDB: one row per distinct stack, however many samples), split into frames with Arrow
and interned by `_core.call_tree`: no loop over samples or frames in Python.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import _core

if TYPE_CHECKING:
    from ..store import Store

TOOL = "tracehouse.analysis.samples"


@dataclass(frozen=True)
class SampleConfig:
    """Which event type holds stack samples: its stack column (frames root first, joined by
    `;`) and weight column (None: one per sample)."""

    type: str
    stack: str
    weight: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


def sample_config(store: Store, trace: str) -> SampleConfig | None:
    """The trace's stack samples as its format declares them, None when it has none (or the
    trace lacks the type: a processed trace, an empty import)."""
    from ..formats.registry import format_of

    fmt = format_of(store.trace(trace).format)
    s = (fmt.profile if fmt is not None else {}).get("samples")
    if not s or s["type"] not in store.event_types(trace):
        return None
    return SampleConfig(s["type"], s["stack"], s.get("weight"))


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def stacks(
    store: Store,
    trace: str,
    config: SampleConfig,
    *,
    producers: list[int] | None = None,
    start: int | None = None,
    end: int | None = None,
) -> pa.Table:
    """One row per distinct stack of the samples in [start, end) of `producers` (all when None):
    stack, samples, weight."""
    where = [f"{_quote(config.stack)} IS NOT NULL"]
    if producers is not None:
        where.append("producer IN (" + (",".join(str(int(p)) for p in producers) or "NULL") + ")")
    if start is not None:
        where.append(f"ts >= {int(start)}")
    if end is not None:
        where.append(f"ts < {int(end)}")
    weight = f"coalesce({_quote(config.weight)}, 1)" if config.weight else "1"
    return store.sql(
        f"SELECT {_quote(config.stack)} AS stack, count(*) AS samples, sum({weight})::BIGINT AS weight "
        f"FROM {_quote(trace)}.{_quote(config.type)} WHERE {' AND '.join(where)} GROUP BY 1 ORDER BY 1"
    )


def call_tree(
    store: Store,
    trace: str,
    config: SampleConfig | None = None,
    *,
    producers: list[int] | None = None,
    start: int | None = None,
    end: int | None = None,
) -> pa.Table:
    """The samples merged by call path: the span call tree's columns (node, parent, depth, name,
    calls, total_ns, self_ns), a node's parent before it."""
    cfg = config or sample_config(store, trace)
    if cfg is None:
        from ..errors import BadInput

        raise BadInput(f"trace {trace!r} has no stack samples", expected="a trace of a sampled format (perf)")
    return tree_of_stacks(stacks(store, trace, cfg, producers=producers, start=start, end=end))


def tree_of_stacks(t: pa.Table) -> pa.Table:
    """The calling-context tree of distinct stacks (`stacks`' table)."""
    empty = pa.table(
        {
            "node": pa.array([], pa.int64()),
            "parent": pa.array([], pa.int64()),
            "depth": pa.array([], pa.int32()),
            "name": pa.array([], pa.string()),
            "calls": pa.array([], pa.int64()),
            "total_ns": pa.array([], pa.int64()),
            "self_ns": pa.array([], pa.int64()),
        }
    )
    if t.num_rows == 0:
        return empty
    frames = pc.split_pattern(t.column("stack").combine_chunks(), ";")
    lengths = pc.list_value_length(frames).to_numpy(zero_copy_only=False).astype(np.int64)
    flat = pc.list_flatten(frames)
    n = len(flat)
    # One pseudo-span per (stack, frame): its parent is the frame before it in the same stack.
    first = np.repeat(np.cumsum(lengths) - lengths, lengths)
    index = np.arange(n, dtype=np.int64)
    depth = (index - first).astype(np.int32)
    parent = np.where(depth == 0, -1, index - 1)
    enc = flat.dictionary_encode()
    codes = enc.indices.cast(pa.int64()).to_numpy(zero_copy_only=False)
    ct = _core.call_tree(pa.array(parent), pa.array(codes), pa.array(depth))
    node_of = ct["node_of"].to_numpy()
    nn = len(ct["parent"])
    owner = np.repeat(np.arange(t.num_rows), lengths)
    samples = t.column("samples").to_numpy()[owner]
    weight = t.column("weight").to_numpy()[owner]
    leaf = np.zeros(n, dtype=bool)
    leaf[np.cumsum(lengths) - 1] = True
    key = ct["key"].to_numpy()
    return pa.table(
        {
            "node": pa.array(np.arange(nn, dtype=np.int64)),
            "parent": ct["parent"],
            "depth": ct["depth"],
            "name": enc.dictionary.cast(pa.string()).take(pa.array(np.where(key < 0, 0, key))),
            "calls": pa.array(np.bincount(node_of, weights=samples, minlength=nn).astype(np.int64)),
            "total_ns": pa.array(np.bincount(node_of, weights=weight, minlength=nn).astype(np.int64)),
            "self_ns": pa.array(np.bincount(node_of[leaf], weights=weight[leaf], minlength=nn).astype(np.int64)),
        }
    )


FOLDED_LINE = r"^(?P<stack>\S.*) (?P<weight>[0-9]{1,18})$"


def folded_tree(lines: pa.Array) -> pa.Table | None:
    """The calling-context tree of folded-stack text (`root;child;leaf VALUE` a line, the value a
    self weight: flamegraph.pl's input, `analyze flame`'s output), None when a line is not one.
    Parsed with Arrow and interned as samples are (`tree_of_stacks`): `calls` counts lines."""
    lines = pc.drop_null(lines)
    lines = lines.filter(pc.not_equal(pc.utf8_length(lines), 0))
    if len(lines) == 0:
        return None
    parts = pc.extract_regex(lines, FOLDED_LINE)
    if parts.null_count:
        return None
    return stacks_tree(pc.struct_field(parts, [0]), pc.struct_field(parts, [1]).cast(pa.int64()))


def stacks_tree(stack: pa.Array, weight: pa.Array) -> pa.Table:
    """The calling-context tree of stacks (`root;child;leaf` text) with a weight each (a stack
    given twice: its weights summed; `calls` counts its rows), as `tree_of_stacks`."""
    t = pa.table({"stack": stack.cast(pa.string()), "weight": weight.cast(pa.int64())})
    t = t.filter(pc.and_(pc.is_valid(t["stack"]), pc.is_valid(t["weight"])))
    t = t.group_by("stack").aggregate([("weight", "count"), ("weight", "sum")])
    return tree_of_stacks(pa.table({"stack": t["stack"], "samples": t["weight_count"], "weight": t["weight_sum"]}))


def kept_nodes(tree: pa.Table, min_share: float = 0.001, max_nodes: int = 5_000) -> tuple[pa.Table, int]:
    """The nodes of a calling-context tree (`tree_of_stacks`: parents first, node = row) whose
    total is at least `min_share` of all (the share doubled until at most `max_nodes` stay),
    with `cut_ns`, the time of their children left out; and the threshold used."""
    total = tree.column("total_ns").to_numpy()
    parent = tree.column("parent").to_numpy()
    roots = int(total[parent < 0].sum())
    threshold = max(1, int(roots * min_share))
    keep = np.flatnonzero(total >= threshold)
    while len(keep) > max_nodes:
        threshold *= 2
        keep = np.flatnonzero(total >= threshold)
    kept_kids = np.zeros(len(total), np.int64)
    has_parent = parent[keep] >= 0
    np.add.at(kept_kids, parent[keep][has_parent], total[keep][has_parent])
    cut = np.maximum(total - tree.column("self_ns").to_numpy() - kept_kids, 0)
    out = tree.take(pa.array(keep))
    return out.append_column("cut_ns", pa.array(cut[keep])), threshold
