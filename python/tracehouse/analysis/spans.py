"""Spans and call trees: control-flow reconstitution (seed 001) and what it answers.

Owns pairing a trace's begin and end halves into spans (the pass itself is Rust,
`src/analysis/spans.rs`: depth, parent, end, self time, unmatched halves), saving them as a
processed trace linked to its source, the span index (spans by thread, depth, ts) and
the questions asked of one span or thread: children of a call, the call tree of a thread
(the aggregated call tree and flame graph are calltree.py's).

Output columns of a span table (`SPAN_COLUMNS`, then the begin type's parameters
under their own names and the end type's parameters prefixed `end_`):

Over 600 lines: pairing, saving the processed trace, the span index and the questions asked of
spans share the span configuration and the saved trace's layout.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import _core, arrays
from ..errors import BadInput, NotFound, ReadOnly, StoreLocked
from ..schema import Column, EventType
from ..store import scan
from . import event_streams, indexes
from .profiles import SpanConfig, choose_span_config, span_config
from .registry import Analysis, Answer, Note, Param, Table, Title

if TYPE_CHECKING:
    from ..store import Store

TOOL = "tracehouse.analysis.spans"

SPAN_COLUMNS = (
    Column("span_id", "int64", "id", "the span's number: its begin's rank in (ts, producer, seq) order"),
    Column("ts", "int64", "ns", "begin time"),
    Column("end_ts", "int64", "ns", "end time (unclosed spans: where they were cut)"),
    Column("dur", "int64", "ns", "end_ts - ts"),
    Column("self_time", "int64", "ns", "dur minus the durations of the direct children"),
    Column("producer", "int32", "id", "thread (producer) of the span"),
    Column("seq", "int64", "seq", "seq of the begin event"),
    Column("end_seq", "int64", "seq", "seq of the end event, null when unclosed"),
    Column("depth", "int64", "count", "nesting depth, 0 for a root call"),
    Column("parent_id", "int64", "id", "span_id of the enclosing span, -1 at the root"),
    Column("closed", "bool", "", "false when no matching end closed the span"),
)
UNMATCHED_COLUMNS = (
    Column("ts", "int64", "ns", "time of the half"),
    Column("producer", "int32", "id", "thread (producer)"),
    Column("seq", "int64", "seq", "seq of the half"),
    Column("half", "string", "", "'begin' (never closed) or 'end' (closed nothing)"),
    Column("key", "string", "", "the half's key, as text (empty without a key)"),
)
__doc__ += "\n".join(f"  {c.name:<10} {c.type:<6} {c.unit:<5} {c.doc}" for c in SPAN_COLUMNS)
__doc__ += "\n\nUnmatched halves (`Spans.unmatched`):\n" + "\n".join(
    f"  {c.name:<10} {c.type:<6} {c.unit:<5} {c.doc}" for c in UNMATCHED_COLUMNS
)

_RESERVED = {c.name for c in SPAN_COLUMNS}

PAIRING = "pairing (default: the format's profile)"
# The pairing flags every span analysis takes; none given: `choose_span_config`.
SPAN_PARAMS = (
    Param("begin", "str", "", "begin event type", group=PAIRING),
    Param("end", "str", "", "end event type", group=PAIRING),
    Param("key", "str", "", "column matching an end to its begin (default: nesting only)", group=PAIRING),
    Param("name", "str", "", "begin column naming a span (default: the key)", group=PAIRING),
)


def spans_config(
    store: Store,
    trace: str,
    begin: str | None = None,
    end: str | None = None,
    key: str | None = None,
    name: str | None = None,
    **_,
) -> SpanConfig:
    """The pairing of a span analysis from its SPAN_PARAMS (other keywords ignored)."""
    return choose_span_config(store, trace, begin, end, key, name)


@dataclass
class Spans:
    """Result of pairing: the span table, the unmatched halves and counts."""

    trace: str
    config: SpanConfig
    table: pa.Table
    unmatched: pa.Table
    stats: dict = field(default_factory=dict)


def begin_column(p: str) -> str:
    """The span table's column holding the begin type's parameter `p` (renamed when it is
    one of the span columns)."""
    return f"begin_{p}" if p in _RESERVED else p


def _pair(b: pa.Table, e: pa.Table, kb, ke) -> dict:
    bc = _side([b.column("ts"), b.column("producer"), b.column("seq")] + ([kb] if kb is not None else []))
    ec = _side([e.column("ts"), e.column("producer"), e.column("seq")] + ([ke] if ke is not None else []))
    return _core.pair_spans(*bc[:3], *ec[:3], bc[3] if kb is not None else None, ec[3] if ke is not None else None)


def _side(cols: list) -> list[list[pa.Array]]:
    """One side's columns as chunk lists with equal chunk lengths (combined when they differ)."""
    types = [pa.int64(), pa.int32(), pa.int64(), pa.int64()]
    out = [_chunks(c, t) for c, t in zip(cols, types)]
    if len({tuple(len(x) for x in ch) for ch in out}) > 1:
        out = [[pa.concat_arrays(ch)] for ch in out]
    return out


def _chunks(col, t: pa.DataType = pa.int64()) -> list[pa.Array]:
    """A column as its chunks, cast when needed (no copy when it already has the type)."""
    if isinstance(col, pa.Array):
        col = pa.chunked_array([col])
    if col.type != t:
        col = col.cast(t)
    return [c for c in col.chunks if len(c)] or [pa.array([], t)]


def _keys(b: pa.Table, e: pa.Table, key: str):
    """Key columns as int64 codes comparable across begins and ends (chunked)."""
    kb, ke = b.column(key), e.column(key)
    if pa.types.is_integer(kb.type) and pa.types.is_integer(ke.type):
        sentinel = np.iinfo(np.int64).min  # a null key matches only a null key
        return (kb.fill_null(sentinel) if kb.null_count else kb), (ke.fill_null(sentinel) if ke.null_count else ke)
    both = (
        pa.chunked_array(kb.chunks + ke.chunks, type=kb.type)
        if kb.type == ke.type
        else pa.chunked_array([c.cast(pa.string()) for c in kb.chunks + ke.chunks], type=pa.string())
    )
    codes = both.combine_chunks().dictionary_encode().indices
    codes = pc.fill_null(codes.cast(pa.int64()), -1)
    return codes.slice(0, len(kb)), codes.slice(len(kb))


def pair(store: Store, trace: str, config: SpanConfig | None = None) -> Spans:
    """Pair the begins and ends of `trace` into spans (nothing is saved)."""
    cfg = config or span_config(store, trace)
    if cfg.end is None:
        return _nest(store, trace, cfg)
    t0 = time.perf_counter()
    bt = store.event_type(trace, cfg.begin)
    et = store.event_type(trace, cfg.end)
    if cfg.key is not None:
        for t in (bt, et):
            if cfg.key not in [c.name for c in t.columns]:
                raise BadInput(
                    f"event type {t.name!r} has no key column {cfg.key!r}", expected=", ".join(c.name for c in t.params)
                )
    if cfg.name is not None and cfg.name not in [c.name for c in bt.columns]:
        raise BadInput(
            f"event type {bt.name!r} has no name column {cfg.name!r}", expected=", ".join(c.name for c in bt.params)
        )
    # Pairing columns first (what the pass needs), the parameters after: the pairing
    # speed is then the read of 4 columns plus the Rust pass.
    pcols = ["ts", "producer", "seq"] + ([cfg.key] if cfg.key else [])
    r = None
    timing: dict = {}
    if _streamable(bt, et, cfg.key):
        b, e, r, timing = _stream_pair(store, trace, cfg, pcols, t0)
    b_order = None
    if r is not None and r["begins_ordered"]:
        t_read = timing["read_s"]
        um_end = pa.table(
            {
                "ts": r["unmatched_end_ts"],
                "producer": r["unmatched_end_producer"],
                "seq": r["unmatched_end_seq"],
                "key": _unmatched_keys(r["unmatched_end_key"], et, cfg.key),
            }
        )
    else:
        # Not streamed (string keys), or the inputs were not both sorted by ts (read again,
        # whole): the columns go to the pass as they came (chunked, not copied). A span's id
        # is its begin's rank in (ts, producer, seq) order: the pass says whether the begins
        # came so (the store's segments are sorted by ts), else they are sorted and paired
        # again.
        timing = {}
        b = store.scan(trace, cfg.begin, pcols, order=False)
        e = store.scan(trace, cfg.end, pcols, order=False)
        t_read = time.perf_counter() - t0
        kb = ke = None
        if cfg.key is not None:
            kb, ke = _keys(b, e, cfg.key)
        r = _pair(b, e, kb, ke)
        if not r["begins_ordered"]:
            b_order = scan.ordering(b)
            b = b.take(b_order)
            if kb is not None:
                kb = kb.take(b_order)
            r = _pair(b, e, kb, ke)
        rows = r["unmatched_end"]
        um_end = pa.table(
            {
                "ts": arrays.int64_array(e.column("ts").take(rows)),
                "producer": arrays.int32_array(e.column("producer").take(rows)),
                "seq": arrays.int64_array(e.column("seq").take(rows)),
                "key": e.column(cfg.key).take(rows).cast(pa.string()) if cfg.key else pa.nulls(len(rows), pa.string()),
            }
        )
    r = _cut_at_last_event(store, trace, b, r)
    t_pair = time.perf_counter() - t0 - t_read
    bp = _params(store, trace, bt, b_order)
    ep = _params(store, trace, et, None, skip=cfg.key)
    table = _span_table(b, e, bp, ep, r, cfg)
    bkey = None if cfg.key is None else b.column(cfg.key) if cfg.key in b.column_names else bp.column(cfg.key)
    unmatched = _unmatched_table(b, bkey, um_end, r)
    n_unclosed = len(b) - pc.sum(r["closed"]).as_py() if len(b) else 0
    stats = {
        "begins": b.num_rows,
        "ends": e.num_rows,
        "spans": table.num_rows,
        "closed": table.num_rows - n_unclosed,
        "unclosed_begins": n_unclosed,
        "unmatched_ends": len(r["unmatched_end"]),
        "presorted": r["presorted"],
        "read_s": round(t_read, 4),
        "pair_s": round(t_pair, 4),
        "read_busy_s": round(timing.get("read_busy_s", t_read), 4),
        "pass_busy_s": round(timing.get("pass_busy_s", t_pair), 4),
        "overlapped": bool(timing),
        "table_s": round(time.perf_counter() - t0 - t_read - t_pair, 4),
        "seconds": round(time.perf_counter() - t0, 4),
    }
    return Spans(trace, cfg, table, unmatched, stats)


def last_event_ts(store: Store, trace: str, producers: np.ndarray, after: int) -> np.ndarray:
    """For each of `producers` (int64, ascending), the time of its last event of any type
    at or after `after` (int64 min when it has none): only row groups reaching `after`
    are read."""
    best = np.full(len(producers), np.iinfo(np.int64).min, dtype=np.int64)
    if not len(producers):
        return best
    want = pa.array(producers)
    for name in store.event_types(trace):
        t = store.scan(trace, name, ["ts", "producer"], start=after, order=False)
        if not t.num_rows:
            continue
        t = t.filter(pc.is_in(t.column("producer").cast(pa.int64()), value_set=want))
        if not t.num_rows:
            continue
        g = t.group_by("producer").aggregate([("ts", "max")])
        p = arrays.as_numpy(g.column("producer")).astype(np.int64)
        at = np.searchsorted(producers, p)
        np.maximum.at(best, at, arrays.as_numpy(g.column("ts_max")).astype(np.int64))
    return best


def _cut_at_last_event(store: Store, trace: str, b: pa.Table, r: dict) -> dict:
    """Spans still open when their thread's halves ran out: the pass cut them at the
    thread's last begin or end (`open_at_end`); they are cut at its last event of any type
    instead (a call was running at least until the thread's last sign of life, which may
    be a field write or a sample after its last call). Moving the cut by d lengthens each
    of those spans by d; only the innermost one's self time grows (each outer one's child
    grows by d too). Only events after the earliest such cut are read (row groups pruned
    on their ts statistics), and nothing when no span stayed open."""
    rows = r.get("open_at_end")
    if rows is None or len(rows) == 0:
        return r
    rows = rows.to_numpy()
    prod = arrays.as_numpy(b.column("producer").take(pa.array(rows))).astype(np.int64)
    end_ts = r["end_ts"].to_numpy()
    old = end_ts[rows]
    uprod, inv = np.unique(prod, return_inverse=True)
    last = last_event_ts(store, trace, uprod, int(old.min()))
    new = np.maximum(old, last[inv])
    delta = new - old
    if not delta.any():
        return r
    end_ts = end_ts.copy()
    end_ts[rows] = new
    self_ns = r["self_ns"].to_numpy().copy()
    depth = r["depth"].to_numpy()[rows]
    by = np.lexsort((depth, prod))  # per producer, deepest last
    inner = by[np.append(prod[by][1:] != prod[by][:-1], True)]
    self_ns[rows[inner]] += delta[inner]
    return r | {"end_ts": pa.array(end_ts), "self_ns": pa.array(self_ns)}


def _streamable(bt: EventType, et: EventType, key: str | None) -> bool:
    """Pairing can consume the halves batch by batch: without a key, or with an integer key
    on both sides (other keys are interned over both whole columns first, `_keys`)."""
    if key is None:
        return True
    types = [{c.name: c.arrow_type for c in t.columns}[key] for t in (bt, et)]
    return all(pa.types.is_integer(t) for t in types)


def _int_key(col) -> pa.ChunkedArray:
    """An integer key column as int64 codes, as `_keys` gives them."""
    if col.type != pa.int64():
        col = col.cast(pa.int64())
    return col.fill_null(np.iinfo(np.int64).min) if col.null_count else col


def _stream_pair(store: Store, trace: str, cfg: SpanConfig, pcols: list[str], t0: float):
    """Read the pairing columns row group by row group on a second thread while the Rust
    pass (`_core.SpanPairer`, no GIL) pairs what has arrived: the two overlap on two cores.

    Returns (begins, ends, pass result, timing), the first three None when the inputs
    were not both sorted by ts: begins (ts, producer, seq) and ends (seq) in the order
    `store.scan(..., order=False)` gives them; timing read_s (wall time until the last
    row group was read), read_busy_s (time spent reading) and pass_busy_s (time spent in
    the pass).
    """
    import heapq
    import queue
    import threading

    bparts = store.scan_parts(trace, cfg.begin, pcols)
    eparts = store.scan_parts(trace, cfg.end, pcols)
    # Row groups of both sides interleaved by their first ts (each side in its own order):
    # the pass advances as far as both sides have rows, so they should arrive together.
    order = list(
        heapq.merge(
            ((p.ts_min if p.ts_min is not None else -(2**63), 0, i) for i, p in enumerate(bparts)),
            ((p.ts_min if p.ts_min is not None else -(2**63), 1, i) for i, p in enumerate(eparts)),
        )
    )
    # A bounded read-ahead: the columns the pass drops are freed while the reader is a few
    # row groups ahead, so their memory is reused instead of faulted in fresh.
    q: queue.Queue = queue.Queue(maxsize=6)
    timing = {"read_busy_s": 0.0, "pass_busy_s": 0.0}

    stop = threading.Event()

    def reader() -> None:
        try:
            for _, side, i in order:
                if stop.is_set():
                    break
                t = time.perf_counter()
                table = (eparts if side else bparts)[i].read()
                if any(c.num_chunks != 1 for c in table.columns):  # the pass takes aligned chunks
                    table = table.combine_chunks()
                timing["read_busy_s"] += time.perf_counter() - t
                q.put((side, table))
            timing["read_s"] = time.perf_counter() - t0
            q.put(None)
        except BaseException as exc:  # handed to the consumer, which raises it
            q.put(exc)

    pairer = _core.SpanPairer(cfg.key is not None, sum(p.rows for p in bparts))
    keep = (["ts", "producer", "seq"], ["seq"])
    tables: tuple[list, list] = ([], [])
    ok = True
    th = threading.Thread(target=reader, name="tracehouse-pair-reader", daemon=True)
    th.start()
    while True:
        item = q.get()
        if item is None:
            break
        if isinstance(item, BaseException):
            th.join()
            raise item
        side, table = item
        if not ok:
            stop.set()
            continue
        # Kept: what the span table takes from the pairing columns (the begins' ts,
        # producer, seq; the ends' seq). The rest is dropped once the pass is past it, so
        # the allocator hands the same memory to the next row groups (fresh pages cost
        # ~1 s per GB on this VM, more than decoding them).
        tables[side].append(table.select(keep[side]))
        t = time.perf_counter()
        key = _int_key(table.column(cfg.key)) if cfg.key else None
        ok = pairer.push(bool(side), table.column("ts"), table.column("producer"), table.column("seq"), key)
        timing["pass_busy_s"] += time.perf_counter() - t
        del table, key
    th.join()
    if not ok:
        return None, None, None, timing
    t = time.perf_counter()
    r = pairer.finish()
    timing["pass_busy_s"] += time.perf_counter() - t
    b, e = (
        pa.concat_tables(ts) if ts else scan.empty_table(store.event_type(trace, name), cols)
        for ts, name, cols in ((tables[0], cfg.begin, keep[0]), (tables[1], cfg.end, keep[1]))
    )
    return b, e, r, timing


def _nest(store: Store, trace: str, cfg: SpanConfig) -> Spans:
    """Spans of a span-kind type (they carry `dur`): nested by time (`_core.nest_spans`)."""
    t0 = time.perf_counter()
    st = store.event_type(trace, cfg.begin)
    if st.kind != "span":
        raise BadInput(f"event type {cfg.begin!r} is a {st.kind}, not a span", expected="--end TYPE to pair it")
    if cfg.name is not None and cfg.name not in [c.name for c in st.columns]:
        raise BadInput(
            f"event type {st.name!r} has no name column {cfg.name!r}", expected=", ".join(c.name for c in st.params)
        )
    b = store.scan(trace, cfg.begin, ["ts", "producer", "seq", "dur"])
    t_read = time.perf_counter() - t0
    ts, dur = arrays.int64_array(b.column("ts")), arrays.int64_array(b.column("dur").fill_null(0))
    r = _core.nest_spans(ts, dur, arrays.int32_array(b.column("producer")), arrays.int64_array(b.column("seq")))
    t_pair = time.perf_counter() - t0 - t_read
    n = b.num_rows
    cols = {
        "span_id": pa.array(np.arange(n, dtype=np.int64)),
        "ts": ts,
        "end_ts": pc.add(ts, dur) if n else pa.array([], pa.int64()),
        "dur": dur,
        "self_time": r["self_ns"],
        "producer": arrays.int32_array(b.column("producer")),
        "seq": arrays.int64_array(b.column("seq")),
        "end_seq": pa.nulls(n, pa.int64()),
        "depth": r["depth"].cast(pa.int64()),
        "parent_id": r["parent"],
        "closed": pa.array(np.ones(n, dtype=bool)),
    }
    params = store.scan(trace, cfg.begin, [c.name for c in st.params]) if st.params else pa.table({})
    for c in params.column_names:
        cols[begin_column(c)] = params.column(c)
    table = pa.table({k: (v if isinstance(v, pa.ChunkedArray) else pa.chunked_array([v])) for k, v in cols.items()})
    unmatched = pa.table({c.name: pa.array([], c.arrow_type) for c in UNMATCHED_COLUMNS})
    stats = {
        "begins": n,
        "ends": 0,
        "spans": n,
        "closed": n,
        "unclosed_begins": 0,
        "unmatched_ends": 0,
        "presorted": True,
        "read_s": round(t_read, 4),
        "pair_s": round(t_pair, 4),
        "table_s": round(time.perf_counter() - t0 - t_read - t_pair, 4),
        "seconds": round(time.perf_counter() - t0, 4),
    }
    return Spans(trace, cfg, table, unmatched, stats)


def _params(store: Store, trace: str, et: EventType, order: pa.Array | None, skip: str | None = None) -> pa.Table:
    """The parameter columns of a type, in the same row order as its pairing columns."""
    names = [c.name for c in et.params if c.name != skip]
    t = store.scan(trace, et.name, names, order=False) if names else None
    if t is not None and order is not None:
        t = t.take(order)
    return t if t is not None else pa.table({})


def _span_table(b: pa.Table, e: pa.Table, bp: pa.Table, ep: pa.Table, r: dict, cfg: SpanConfig) -> pa.Table:
    n = b.num_rows
    end_row = r["end_row"].to_numpy()
    idx = pa.array(end_row, mask=end_row < 0)  # null where unclosed: takes give null
    ts = arrays.int64_array(b.column("ts"))
    end_ts = r["end_ts"]
    cols: dict[str, pa.Array] = {
        "span_id": pa.array(np.arange(n, dtype=np.int64)),
        "ts": ts,
        "end_ts": end_ts,
        "dur": pc.subtract(end_ts, ts) if n else pa.array([], pa.int64()),
        "self_time": r["self_ns"],
        "producer": arrays.int32_array(b.column("producer")),
        "seq": arrays.int64_array(b.column("seq")),
        "end_seq": e.column("seq").take(idx) if n else pa.array([], pa.int64()),
        "depth": r["depth"].cast(pa.int64()),
        "parent_id": r["parent"],
        "closed": r["closed"],
    }
    for c in bp.column_names:
        cols[begin_column(c)] = bp.column(c)
    for c in ep.column_names:
        cols[f"end_{c}"] = ep.column(c).take(idx) if n else ep.column(c).slice(0, 0)
    # Columns keep their chunks (DuckDB's batches, the pass's one array): combining them
    # copied every column (0.4 s per 1.7M spans) for nothing downstream needs.
    return pa.table({k: (v if isinstance(v, pa.ChunkedArray) else pa.chunked_array([v])) for k, v in cols.items()})


def _unmatched_keys(codes: pa.Array, et: EventType, key: str | None) -> pa.Array:
    """The key text of unmatched ends from the pass's int64 codes (`_int_key`)."""
    if key is None:
        return pa.nulls(len(codes), pa.string())
    null = pc.equal(codes, np.iinfo(np.int64).min)
    return pc.if_else(null, pa.scalar(None, pa.string()), codes.cast(pa.string()))


def _unmatched_table(b: pa.Table, bkey, um_end: pa.Table, r: dict) -> pa.Table:
    """Unclosed begins (rows of `b`, keys from `bkey`) and unmatched ends (`um_end`: ts,
    producer, seq and key as text), as UNMATCHED_COLUMNS sorted by (ts, producer, seq)."""
    ub = pc.indices_nonzero(pc.invert(r["closed"]))
    parts = []
    if len(ub):
        key = bkey.take(ub).cast(pa.string()) if bkey is not None else pa.nulls(len(ub), pa.string())
        parts.append(
            pa.table(
                {
                    "ts": arrays.int64_array(b.column("ts").take(ub)),
                    "producer": arrays.int32_array(b.column("producer").take(ub)),
                    "seq": arrays.int64_array(b.column("seq").take(ub)),
                    "half": pa.array(["begin"] * len(ub), pa.string()),
                    "key": pc.fill_null(key, ""),
                }
            )
        )
    if um_end.num_rows:
        parts.append(
            pa.table(
                {
                    "ts": um_end.column("ts"),
                    "producer": um_end.column("producer"),
                    "seq": um_end.column("seq"),
                    "half": pa.array(["end"] * um_end.num_rows, pa.string()),
                    "key": pc.fill_null(um_end.column("key"), ""),
                }
            )
        )
    if not parts:
        return pa.table({c.name: pa.array([], c.arrow_type) for c in UNMATCHED_COLUMNS})
    return scan.sort_rows(pa.concat_tables(parts))


# -- saving and finding the processed trace -----------------------------------------------


def derived_name(trace: str) -> str:
    return f"{trace}:spans"


def _span_event_types(spans: Spans, fmt_types: dict[str, EventType]) -> tuple[EventType, EventType]:
    bt = fmt_types[spans.config.begin]
    et = fmt_types[spans.config.end] if spans.config.end else None
    params = [c for c in SPAN_COLUMNS if c.name not in ("ts", "producer", "seq", "dur")]
    params += [Column(begin_column(c.name), c.type, c.unit, c.doc) for c in bt.params]
    if et is not None:
        params += [Column(f"end_{c.name}", c.type, c.unit, c.doc) for c in et.params if c.name != spans.config.key]
    doc = f"a {bt.name} paired with its {et.name}" if et is not None else f"a {bt.name} with its depth and parent"
    span = EventType("span", "span", tuple(params), doc)
    unmatched = EventType(
        "unmatched",
        "instant",
        tuple(c for c in UNMATCHED_COLUMNS if c.name not in ("ts", "producer", "seq")),
        "a begin never closed or an end that closed nothing",
    )
    return span, unmatched


def save(
    store: Store, spans: Spans, name: str | None = None, *, chunk_rows: int = 2_000_000, params: dict | None = None
) -> dict:
    """Save `spans` as a processed trace (events `span` and `unmatched`) linked to its source.

    Replaces an earlier processed trace of the same name. Returns the result row.
    `params`: more to record with the result (the CLI's arguments).
    """
    src = store.trace(spans.trace)
    name = name or derived_name(spans.trace)
    t0 = time.perf_counter()
    for old in store.results(trace=spans.trace, tool=TOOL, kind="processed"):
        if old["params"].get("derived") == name:
            store.delete_result(old["id"])
    if any(t.name == name for t in store.traces()):
        store.rm(name)
    span_et, unmatched_et = _span_event_types(spans, store.event_types(spans.trace))
    store.create_trace(
        name,
        f"{src.format}_spans",
        description=f"spans of {spans.trace} ({spans.config.begin}/{spans.config.end or 'nested'})",
        metadata={"source": spans.trace, "tool": TOOL, "config": json.dumps(spans.config.to_json())},
        event_types=[span_et, unmatched_et],
        producers=store.producers(spans.trace),
        format_description=f"spans paired from {src.format} traces",
    )
    for off in range(0, spans.table.num_rows, chunk_rows):
        store.append(name, "span", spans.table.slice(off, chunk_rows))
    if spans.unmatched.num_rows:
        store.append(name, "unmatched", spans.unmatched)
    store.flush(name)
    params = (params or {}) | {
        "config": spans.config.to_json(),
        "derived": name,
        "rules": RULES,
        "signature": store.stamp(spans.trace),
        "stats": spans.stats,
    }
    rid = store.save_result(
        "processed", "spans", TOOL, [spans.trace, name], params=params, payload={"derived_trace": name}
    )
    out = store.result(rid)
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


def processed(store: Store, trace: str, config: SpanConfig) -> str | None:
    """The fresh processed span trace of `trace` for `config`, if one is saved."""
    sig = store.stamp(trace)
    for r in reversed(store.results(trace=trace, tool=TOOL, kind="processed")):
        p = r["params"]
        if p.get("config") == config.to_json() and p.get("signature") == sig and p.get("rules") == RULES:
            name = p.get("derived")
            if name and any(t.name == name for t in store.traces()):
                return name
    return None


_PAIRED: dict[tuple, Spans] = {}


def span_table(
    store: Store,
    trace: str,
    config: SpanConfig | None = None,
    *,
    columns: list[str] | None = None,
    save_processed: bool | None = None,
    ordered: bool = True,
) -> pa.Table:
    """The span table of `trace` (in span_id order): read from its processed trace when
    one is saved and fresh, else paired now (and saved when the store is writable and
    `save_processed` is not False). ordered=False: rows in any order (aggregates)."""
    cfg = config or span_config(store, trace)
    name = processed(store, trace, cfg)
    if name is not None:
        # Rows in span_id order: the processed trace's segments are in ts order, so this is
        # a check, not a sort (the order columns are read only when asked for).
        if columns is not None and not ordered:
            return store.scan(name, "span", columns, order=False)
        if columns is None or {"ts", "producer", "seq"} <= set(columns):
            return store.scan(name, "span", columns)
        t = store.scan(name, "span", list(dict.fromkeys(["span_id", *columns])), order=False)
        sid = arrays.as_numpy(t.column("span_id"))
        if len(sid) > 1 and not (sid[1:] > sid[:-1]).all():
            t = t.take(pa.array(np.argsort(sid, kind="stable")))
        return t.select(columns)
    key = (str(store.path), trace, store.stamp(trace), json.dumps(cfg.to_json()))
    sp = _PAIRED.get(key)
    if sp is None:
        sp = pair(store, trace, cfg)
        if save_processed is not False and not store.readonly:
            try:
                save(store, sp)
            except (StoreLocked, ReadOnly):
                if save_processed:
                    raise
        _PAIRED.clear()
        _PAIRED[key] = sp
    return sp.table if columns is None else sp.table.select(columns)


# -- the span index: spans by (producer, depth, ts) -----------------------------------------


# Bumped when what a span table or its index holds changes: saved ones of another version
# are not used (2: unclosed spans cut at the thread's last event; the index's `end_max`;
# 3: no `row_of`, the (producer, depth) runs in the metadata).
RULES = 3
_INDEX_ONLY = ["end_max"]  # index columns that are not span columns
# Span index columns stored relative to another when that packs smaller (`indexes.pack`):
# end_ts - ts is the duration, end_max - end_ts is 0 wherever spans of a depth do not overlap,
# TOD's end_parent_seq (the exit's frame) is the begin's seq: 0 bits.
SPAN_RELATIVE = {"end_ts": "ts", "end_max": "end_ts", "end_seq": "seq", "end_parent_seq": "seq"}


def span_index(
    store: Store, trace: str, config: SpanConfig | None = None, *, save: bool | None = None, build: bool = True
) -> indexes.PackedIndex | None:
    """Every span, ordered by (producer, depth, ts), plus `end_max` (running maximum of
    end_ts within the (producer, depth): `stack.stack_at`). The (producer, depth) runs are
    listed in the schema metadata (b"runs": [[producer, depth, start, end], ...]): span i's
    row is found by one binary search of span_id per run (span_id grows within a run), so
    no `row_of` column is stored. build=False: None unless it is built and fresh."""
    cfg = config or span_config(store, trace)
    guesser = event_streams.seq_guesser(store, trace, store.stamp(trace))
    if not build:
        return indexes.fresh(store, trace, "spans", span_index_params(cfg), guesser)

    def make() -> pa.Table:
        t = span_table(store, trace, cfg)
        keys = [arrays.int64_array(t.column("producer")), arrays.int64_array(t.column("depth"))]
        order = _core.stable_order(keys)
        idx = t.take(order)
        sorted_keys = [arrays.as_numpy(k.take(order)) for k in keys]
        end_max = _core.running_max_by_key([pa.array(k) for k in sorted_keys], arrays.int64_array(idx.column("end_ts")))
        n = len(order)
        if n:
            brk = np.flatnonzero((np.diff(sorted_keys[0]) != 0) | (np.diff(sorted_keys[1]) != 0)) + 1
            starts, ends = np.concatenate([[0], brk]), np.concatenate([brk, [n]])
            runs = [[int(sorted_keys[0][a]), int(sorted_keys[1][a]), int(a), int(b)] for a, b in zip(starts, ends)]
        else:
            runs = []
        meta = dict(idx.schema.metadata or {})
        meta[b"runs"] = json.dumps(runs).encode()
        return idx.append_column("end_max", end_max).replace_schema_metadata(meta)

    # seq and end_seq are stored as the difference to the density index's seq of the begin
    # (end) event at ts (end_ts): 0 bits on TOD (before: 1.56 and 1.04 B a span).
    guessed = {"seq": (cfg.begin, "producer", "ts")}
    if cfg.end is not None:
        guessed["end_seq"] = (cfg.end, "producer", "end_ts")
    return indexes.get(
        store,
        trace,
        "spans",
        span_index_params(cfg),
        make,
        save=save,
        derived={"dur": ("end_ts", "ts")},
        relative=SPAN_RELATIVE,
        guessed=guessed,
        guesser=guesser,
    )


def span_index_params(config: SpanConfig) -> dict:
    """What the span index of a pairing is saved under (`indexes.find` finds it by this)."""
    return {"config": config.to_json(), "rules": RULES}


def _span_row(idx: indexes.PackedIndex, span_id: int) -> int:
    if not 0 <= span_id < idx.num_rows:
        raise NotFound(f"no span {span_id} (spans are numbered 0..{idx.num_rows - 1})")
    runs = idx.runs()
    r = idx._cols["span_id"].search_runs(pa.array(runs[:, 2]), pa.array(runs[:, 3]), int(span_id))
    if r < 0:
        raise NotFound(f"no span {span_id} in the span index")
    return int(r)


def span(store: Store, trace: str, span_id: int, config: SpanConfig | None = None) -> dict:
    """One span as a dict of its columns."""
    idx = span_index(store, trace, config)
    r = _span_row(idx, span_id)
    return {k: v[0] for k, v in idx.slice(r, 1).drop_columns(_INDEX_ONLY).to_pydict().items()}


def children(store: Store, trace: str, span_id: int, config: SpanConfig | None = None) -> pa.Table:
    """The direct callees of span `span_id`, in time order (span table columns)."""
    idx = span_index(store, trace, config)
    r = _span_row(idx, span_id)
    producer, depth = indexes.column(idx, "producer"), indexes.column(idx, "depth")
    ts = indexes.column(idx, "ts")
    p, d = int(producer[r]), int(depth[r])
    lo, hi = indexes.key_range([producer, depth], [p, d + 1])
    start, end = int(ts[r]), int(indexes.column(idx, "end_ts")[r])
    a = lo + indexes.search(ts[lo:hi], start, "left")
    b = lo + indexes.search(ts[lo:hi], end, "right")
    # Only the rows of this parent are read (a seq column is read through the density index).
    mine = a + np.flatnonzero(np.asarray(indexes.column(idx, "parent_id")[a:b]) == span_id)
    return idx.take(mine).drop_columns(_INDEX_ONLY)


def thread_calls(
    store: Store,
    trace: str,
    producer: int,
    config: SpanConfig | None = None,
    *,
    start: int | None = None,
    end: int | None = None,
    max_depth: int | None = None,
) -> pa.Table:
    """The call tree of one thread: its spans overlapping [start, end), in time order
    (depth and parent_id give the tree; span table columns)."""
    idx = span_index(store, trace, config)
    prod = indexes.column(idx, "producer")
    lo, hi = indexes.key_range([prod], [int(producer)])
    if lo == hi:
        return idx.slice(0, 0).drop_columns(_INDEX_ONLY)
    rows = idx.slice(lo, hi - lo)
    mask = None
    if max_depth is not None:
        mask = pc.less_equal(rows.column("depth"), int(max_depth))
    if start is not None:
        m = pc.greater(rows.column("end_ts"), int(start))
        mask = m if mask is None else pc.and_(mask, m)
    if end is not None:
        m = pc.less(rows.column("ts"), int(end))
        mask = m if mask is None else pc.and_(mask, m)
    if mask is not None:
        rows = rows.filter(mask)
    rows = rows.take(pc.sort_indices(rows.column("span_id")))
    return rows.drop_columns(_INDEX_ONLY)


def name_codes(col: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, pa.Array]:
    """(int64 codes, string names) of a name column; codes index the names."""
    enc = (col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col).dictionary_encode()
    codes = arrays.filled(enc.indices.cast(pa.int64()), -1)
    names = enc.dictionary.cast(pa.string())
    if names.null_count:
        names = pc.fill_null(names, "?")
    return codes, names


# -- as an analysis ------------------------------------------------------------------------------

SPAN_VIEW = ("span_id", "producer", "depth", "ts", "dur", "self_time", "closed")


@dataclass
class Paired(Answer):
    """`analyze spans`: the pairing's counts, its spans and unmatched halves; saved, the
    processed trace `<trace>:spans`."""

    spans: Spans
    saved: dict | None = None

    def table(self) -> pa.Table:
        return self.spans.table

    def to_json(self, shown: dict) -> dict:
        sp, limit = self.spans, shown.get("limit") or 50
        return {
            "trace": sp.trace,
            "config": sp.config.to_json(),
            "stats": sp.stats,
            "rows": sp.table.slice(0, limit).to_pylist(),
            "total": sp.table.num_rows,
            "unmatched": sp.unmatched.slice(0, limit).to_pylist(),
            "processed_trace": self.saved["params"]["derived"] if self.saved else None,
            "result": self.saved["id"] if self.saved else None,
        }

    def show(self, shown: dict) -> list:
        sp, cfg, st, limit = self.spans, self.spans.config, self.spans.stats, shown.get("limit") or 50
        name_col = cfg.name_column
        view = SPAN_VIEW[:3] + ((begin_column(name_col),) if name_col else ()) + SPAN_VIEW[3:]
        parts = [
            Title(
                f"{sp.trace}: {st['spans']:,} spans from {st['begins']:,} {cfg.begin} / "
                f"{st['ends']:,} {cfg.end} (key {cfg.key or 'nesting only'}) in {st['seconds']:.2f} s "
                f"(read {st['read_s']:.2f} s, pair {st['pair_s']:.2f} s)"
            ),
            Title(
                f"closed {st['closed']:,}, unclosed begins {st['unclosed_begins']:,}, "
                f"unmatched ends {st['unmatched_ends']:,}"
            ),
            Table(sp.table.slice(0, limit).select([c for c in view if c in sp.table.column_names])),
        ]
        if sp.table.num_rows > limit:
            parts.append(Note(f"({sp.table.num_rows:,} spans, {limit} shown; --limit N, --json)"))
        if sp.unmatched.num_rows:
            parts += [Title("unmatched halves"), Table(sp.unmatched, 10, "--json lists them")]
        if self.saved:
            parts.append(
                Title(f"saved as processed trace {self.saved['params']['derived']} (result {self.saved['id']})")
            )
        return parts

    def save(self, store, name, traces, params, shown) -> int:
        self.saved = save(store, self.spans, params=params)
        return self.saved["id"]


def _spans(store, trace, window, **pairing) -> Paired:
    return Paired(pair(store, trace, spans_config(store, trace, **pairing)))


SPANS = Analysis(
    "spans",
    "pair begins and ends into spans; --save keeps them as a processed trace",
    _spans,
    params=SPAN_PARAMS,
    columns=SPAN_COLUMNS,
    columns_note="Then the begin type's parameters under their own names (`begin_` before one named like a span "
    "column) and the end type's prefixed `end_`. `--save` keeps the spans as the processed trace "
    "`<trace>:spans` (event types `span` and `unmatched`).",
    fast=False,
    applies_to=("spans",),
)
