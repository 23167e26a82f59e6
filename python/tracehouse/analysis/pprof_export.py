"""Export a trace's profile as pprof (gzipped profile.proto), the file `go tool pprof`, pprof's web UI,
Speedscope and most profilers' viewers open.

Owns choosing what a trace's profile is and writing it: a trace whose format declares stack
samples (perf, pprof) exports its samples grouped by stack (`samples.stacks`: one pprof sample
per distinct stack, its `samples/count` and its weight: perf's period, pprof's value of the
default sample type, with that type's name and unit when the trace came from pprof); any
other trace exports its spans' calling-context tree (`spans.aggregated_call_tree`, the tree
`analyze tree` shows: one pprof sample per call path with `spans/count` and its self time as
`time/nanoseconds`, so pprof's flat is the self time and cum the total). The profile is
encoded in Rust (`_core.pprof_encode`, src/formats/pprof/mod.rs); grouping and path building
are DuckDB and numpy, no loop over events in Python. It lives with the analyses, not the
formats, because the span call tree is an analysis.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from .. import _core
from ..errors import BadInput
from ..store.query import qident
from . import calltree as S
from . import samples

NAME = "pprof"
EXTENSION = "pb.gz"
DESCRIPTION = "pprof profile.proto, gzipped (go tool pprof opens it): stack samples by stack, spans by call path"


def _pprof_types(store, trace: str, cfg: samples.SampleConfig) -> tuple[str, str]:
    """(type, unit) of the weight: the original default sample type of a pprof import, else the
    weight column's name and unit."""
    info = store.trace(trace)
    if info.format == "pprof" and cfg.weight == "value":
        t = store.sql(f'SELECT "values" FROM {qident(trace)}.{qident(cfg.type)} WHERE "values" IS NOT NULL LIMIT 1')
        if t.num_rows:
            last = t.column(0)[0].as_py().split(",")[-1].rsplit("=", 1)[0]
            typ, _, unit = last.partition("/")
            return typ, unit
    if cfg.weight is None:
        return "samples", "count"
    col = next((c for c in store.event_types(trace)[cfg.type].params if c.name == cfg.weight), None)
    unit = col.unit if col is not None and col.unit not in ("", "as recorded") else "count"
    return cfg.weight, unit.replace(" ", "_")


def profile_of(store, trace: str) -> tuple[list[str], list[list[int]], list[tuple[str, str]]]:
    """(stacks root first, values per stack, sample types) of the trace's profile."""
    cfg = samples.sample_config(store, trace)
    if cfg is not None:
        t = samples.stacks(store, trace, cfg)
        if cfg.weight == "value" and store.trace(trace).format == "pprof":
            # pprof's own count type (Go's samples/count) rather than one per row of the import.
            t = store.sql(
                f"SELECT stack, sum(coalesce(count, 1))::BIGINT AS samples, sum(coalesce(value, 0))::BIGINT "
                f"AS weight FROM {qident(trace)}.{qident(cfg.type)} WHERE stack IS NOT NULL GROUP BY 1 "
                f"ORDER BY 1"
            )
        weight_type = _pprof_types(store, trace, cfg)
        types = [("samples", "count")] + ([weight_type] if weight_type != ("samples", "count") else [])
        cols = [t.column("samples").to_numpy()] + ([t.column("weight").to_numpy()] if len(types) == 2 else [])
        vals = np.stack(cols, axis=1).tolist() if t.num_rows else []
        return t.column("stack").to_pylist(), vals, types
    try:
        tree = S.aggregated_call_tree(store, trace)
    except BadInput as e:
        raise BadInput(
            f"trace {trace!r} has neither stack samples nor spans to export as pprof: {e}",
            expected="a sampled trace (perf, pprof) or one with spans",
        ) from None
    n = tree.num_rows
    if n == 0:
        return [], [], [("spans", "count"), ("time", "nanoseconds")]
    paths = S.node_paths(
        tree.column("parent").to_numpy(),
        tree.column("depth").to_numpy(),
        np.arange(n, dtype=np.int64),
        tree.column("name"),
    )
    calls = tree.column("calls").to_numpy()  # spans whose path ends at the node
    self_ns = tree.column("self_ns").to_numpy()
    keep = np.nonzero((self_ns > 0) | (calls > 0))[0]
    vals = np.stack([calls[keep], self_ns[keep]], axis=1).tolist()
    return paths[keep].tolist(), vals, [("spans", "count"), ("time", "nanoseconds")]


def _time_range(store, trace: str) -> tuple[int, int]:
    """First and last event time over the trace's event types (0, 0 when empty)."""
    parts = [f"SELECT min(ts) AS a, max(ts) AS b FROM {qident(trace)}.{qident(t)}" for t in store.event_types(trace)]
    if not parts:
        return 0, 0
    r = store.sql(f"SELECT min(a) AS a, max(b) AS b FROM ({' UNION ALL '.join(parts)})")
    return r.column("a")[0].as_py() or 0, r.column("b")[0].as_py() or 0


def export(store, trace: str, out: str | Path, *, progress=None) -> dict:
    """Write `trace`'s profile to `out` (gzipped profile.proto); returns path, samples and bytes."""
    info = store.trace(trace)
    stacks, vals, types = profile_of(store, trace)
    t0, t1 = _time_range(store, trace)
    data = _core.pprof_encode(stacks, vals, types, info.name, t0, max(t1 - t0, 0))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with gzip.open(tmp, "wb", compresslevel=6) as f:
        f.write(data)
    tmp.replace(out)
    if progress is not None:
        progress(info.event_count)
    return {
        "trace": info.name,
        "path": str(out),
        "events": info.event_count,
        "samples": len(stacks),
        "sample_types": [f"{t}/{u}" for t, u in types],
        "bytes": out.stat().st_size,
    }
