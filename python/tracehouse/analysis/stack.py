"""The stack frame of a thread at time t: its open calls, their arguments and locals.

Owns "what was thread p doing at t?": every span of the thread open at t (ts <= t <
end_ts). Design: a precomputed span index, no snapshots. The span index
(`spans.span_index`: spans ordered by thread, depth, ts) also holds `end_max`, the running
maximum of `end_ts` within each (thread, depth). At depth d the spans begun at or before t
are a prefix [a, r) of the depth's rows (one binary search on ts); the ones still open lie
at or after the first row whose `end_max` exceeds t (a second binary search: `end_max`
never decreases). Paired spans never overlap within one depth, so that range is the
one frame of the depth; spans of a span-kind type (Chrome slices) may overlap without
nesting and become siblings at one depth, and then every one of them open at t is shown.
The stack is the depths from 0 up to the first with nothing open (a span lies inside its
parent, so nothing deeper is open either), so the answer costs O(depth x log n) whatever
t (no forward pass from a snapshot; TOD stacks are at most 11 deep). Locals come from
the `locals` index (variable writes ordered by thread, frame, variable, ts): per frame
one range, the last write at or before t of each variable.

Output of `stack_at` (`FRAME_COLUMNS`, outermost frame first, then the begin type's
parameters: for TOD the method, receiver and arguments), and of `frame_locals`
(`LOCAL_COLUMNS`):
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from .. import _core, arrays
from ..schema import Column
from ..store import scan
from . import indexes
from .profiles import LocalsConfig, SpanConfig, locals_config
from .registry import Analysis, Answer, Param, Text, Title
from .spans import span_index

if TYPE_CHECKING:
    from ..store import Store

FRAME_COLUMNS = (
    Column("depth", "int64", "count", "0 for the outermost frame"),
    Column("span_id", "int64", "id", "the call (span table row)"),
    Column("ts", "int64", "ns", "when the call began"),
    Column("end_ts", "int64", "ns", "when it returned"),
    Column("seq", "int64", "seq", "seq of its begin event"),
)
LOCAL_COLUMNS = (
    Column("var", "int64", "id", "the local variable"),
    Column("value", "int64", "", "its value at t (type of the value column)"),
    Column("ts", "int64", "ns", "when that value was written"),
)
__doc__ += "\n".join(f"  {c.name:<8} {c.type:<6} {c.unit:<5} {c.doc}" for c in FRAME_COLUMNS)
__doc__ += "\n\n" + "\n".join(f"  {c.name:<8} {c.type:<6} {c.unit:<5} {c.doc}" for c in LOCAL_COLUMNS)


def locals_index(store: Store, trace: str, config: LocalsConfig, *, save: bool | None = None) -> indexes.PackedIndex:
    """Variable writes ordered by (producer, frame, var, ts), in parts over the trace's
    segments (`indexes.get_parts`)."""

    def build(cut) -> pa.Table:
        t = scan.read(cut, config.type, ["ts", "producer", "seq", config.frame, config.var, config.value])
        order = _core.stable_order(
            [
                arrays.int64_array(t.column("producer")),
                arrays.int64_array(t.column(config.frame).fill_null(-1)),
                arrays.int64_array(t.column(config.var).fill_null(-1)),
            ]
        )
        return pa.table(
            {
                "producer": t.column("producer").take(order),
                "frame": t.column(config.frame).take(order),
                "var": indexes.narrow(t.column(config.var).fill_null(-1).take(order)),
                "ts": t.column("ts").take(order),
                "value": t.column(config.value).take(order),
            }
        )

    return indexes.get_parts(store, trace, "locals", {"config": config.to_json()}, [config.type], build, save=save)


def stack_at(
    store: Store,
    trace: str,
    producer: int,
    t: int,
    config: SpanConfig | None = None,
    *,
    columns: list[str] | None = None,
    index=None,
) -> pa.Table:
    """Every call open on thread `producer` at time `t` (ts <= t < end_ts), outermost first
    (by depth, then begin time: siblings that overlap without nesting both appear).
    `columns`: only these (a debugger's step reads ts and end_ts; decoding every column of a
    few rows cost ~4 ms at 1M events, most of it the seqs read through the density index);
    `index`: the span index, when the caller holds it."""
    idx = index if index is not None else span_index(store, trace, config)
    prod, depth, ts, end_ts, end_max = (
        indexes.column(idx, c) for c in ("producer", "depth", "ts", "end_ts", "end_max")
    )
    lo, hi = indexes.key_range([prod], [int(producer)])
    t = int(t)
    rows: list[int] = []
    d = 0
    while lo < hi:
        a, b = indexes.key_range([depth], [d], lo, hi)
        if a == b:
            break
        r = a + indexes.search(ts[a:b], t, "right")  # spans of depth d begun at or before t: [a, r)
        if r == a:
            break
        if r - a == 1 or end_max[r - 2] <= t:  # the usual case: only the last one begun can be open
            if end_ts[r - 1] <= t:
                break
            rows.append(r - 1)
        else:
            j = a + indexes.search(end_max[a:r], t, "right")  # before j every span ended by t
            open_rows = (j + np.nonzero(np.asarray(end_ts[j:r]) > t)[0]).tolist()
            if not open_rows:
                break
            rows += open_rows
        lo = b
        d += 1
    if columns is not None:
        taken = pa.array(rows, pa.int64())
        return pa.table({c: idx.take_column(c, taken) for c in columns})
    return idx.take(pa.array(rows, pa.int64())).drop_columns(["end_max"])


def frame_locals(
    store: Store, trace: str, producer: int, frame_seq: int, t: int, config: LocalsConfig | None = None
) -> pa.Table:
    """The local variables of the frame begun by event `frame_seq` of thread `producer`,
    as they were at time `t`: the last write at or before t of each."""
    cfg = config or locals_config(store, trace)
    if cfg is None:
        return pa.table({c.name: pa.array([], c.arrow_type) for c in LOCAL_COLUMNS})
    idx = locals_index(store, trace, cfg)
    pieces = []
    for part in indexes.parts(idx):
        prod, frame, ts = (indexes.column(part, c) for c in ("producer", "frame", "ts"))
        lo, hi = indexes.key_range([prod, frame], [int(producer), int(frame_seq)])
        mine = lo + np.nonzero(np.asarray(ts[lo:hi]) <= t)[0]
        got = part.take(mine)
        pieces.append(
            pa.table(
                {
                    "var": got.column("var").cast(pa.int64()),
                    "value": got.column("value"),
                    "ts": got.column("ts").cast(pa.int64()),
                }
            )
        )
    rows = pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]
    if len(pieces) > 1:
        # The order one index built at once gives: (var, ts) within the frame, one thread's
        # writes of equal ts in seq order = part order (stable sort).
        rows = rows.take(pa.array(np.lexsort([arrays.as_numpy(rows.column(c)) for c in ("ts", "var")])))
    if rows.num_rows == 0:
        return rows
    v = arrays.as_numpy(rows.column("var"))
    return rows.take(pa.array(np.flatnonzero(np.append(v[1:] != v[:-1], True))))


def stack_frames(
    store: Store,
    trace: str,
    producer: int,
    t: int,
    config: SpanConfig | None = None,
    locals_cfg: LocalsConfig | None = None,
) -> list[dict]:
    """The stack at t with each frame's columns and its locals: a list of dicts,
    outermost first ({column: value, ..., "locals": {var: value}})."""
    frames = stack_at(store, trace, producer, t, config).to_pylist()
    cfg = locals_cfg or locals_config(store, trace)
    for f in frames:
        if cfg is None:
            f["locals"] = {}
            continue
        loc = frame_locals(store, trace, producer, f["seq"], t, cfg)
        f["locals"] = dict(zip(loc.column("var").to_pylist(), loc.column("value").to_pylist()))
    return frames


# -- as an analysis ------------------------------------------------------------------------------


@dataclass
class Frames(Answer):
    """The stack of a thread at t: frames outermost first, each with its locals."""

    frames: list[dict]
    seconds: float
    thread: int
    at: int
    config: SpanConfig

    def table(self) -> pa.Table:
        if not self.frames:
            return pa.table({"depth": pa.array([], pa.int64())})
        return pa.Table.from_pylist([f | {"locals": json.dumps(f["locals"])} for f in self.frames])

    def to_json(self, shown: dict) -> dict:
        return {
            "frames": [f | {"locals": {str(k): v for k, v in f["locals"].items()}} for f in self.frames],
            "seconds": round(self.seconds, 4),
        }

    def show(self, shown: dict) -> list:
        cfg = self.config
        name_col = cfg.name_column
        lines = [f"thread {self.thread} at {self.at}: {len(self.frames)} frames ({self.seconds * 1000:.1f} ms)"]
        skip = {
            "span_id",
            "ts",
            "end_ts",
            "dur",
            "self_time",
            "producer",
            "seq",
            "end_seq",
            "depth",
            "parent_id",
            "closed",
            "locals",
            name_col,
        }
        out = []
        for f in self.frames:
            args_txt = ", ".join(
                f"{k}={v}" for k, v in f.items() if k not in skip and not k.startswith("end_") and v is not None
            )
            loc = ", ".join(f"{k}={v}" for k, v in f["locals"].items())
            out.append(
                f"#{f['depth']:<3} {f.get(name_col) if name_col else cfg.begin}({args_txt})  since {f['ts']}"
                + (f"  locals: {loc}" if loc else "")
                + "\n"
            )
        return [Title(lines[0]), Text("".join(out))]

    def save_params(self) -> dict:
        return {"config": self.config.to_json()}


def _stack(store, trace, window, *, thread, at, **pairing) -> Frames:
    import time

    from .spans import spans_config

    cfg = spans_config(store, trace, **pairing)
    t0 = time.perf_counter()
    frames = stack_frames(store, trace, thread, at, cfg)
    return Frames(frames, time.perf_counter() - t0, thread, at, cfg)


def _stack_analysis() -> Analysis:
    from .spans import SPAN_PARAMS

    return Analysis(
        "stack",
        "the call stack of a thread at time t, with arguments and locals",
        _stack,
        params=(
            Param("thread", "int", "id", "the thread (producer id)", required=True, positional=True),
            Param("at", "time", "ns", "time t (ns or with a unit)", required=True),
        )
        + SPAN_PARAMS,
        columns=FRAME_COLUMNS
        + (Column("locals", "string", "", "the frame's local variables at t (JSON: var -> value)"),),
        columns_note="Then the call's parameters, as `analyze spans` gives them.",
        applies_to=("spans",),
        uses=("spans", "locals"),
    )


STACK = _stack_analysis()
