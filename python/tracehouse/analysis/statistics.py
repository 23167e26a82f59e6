"""Statistics (seed 000's overview tables): counts and durations by type, producer, state or link.

Owns `stats` for one trace or many (`multi_stats`: one table with a `trace` column over
the traces a search selects; saved, the result links every trace: seed 000's CDB feature)
and the trace selection of the multi-trace analyses (`select_traces`).

Two ways to one answer. The SQL analyses (`sql/stats_by_*.sql`, output columns documented
there) scan the store's views: the reference, and the path of `--engine duckdb|spark`.
The default path answers from the derived indexes: by type and producer from the density
index's streams (`event_streams.Streams`: two binary searches and prefix-sum differences per
(type, producer) stream, never a pass over events), by state from the span index and the
spans' name codes (one bincount). Same columns, same rows, same order; on a 10M-event TOD
trace the SQL scan takes ~0.5-1.5 s and the indexes answer in tens of milliseconds (100M:
1-3 s against milliseconds), the first call building the index when missing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from .. import _core, arrays
from ..arrays import from_numpy, strings, with_nulls
from ..errors import BadInput
from ..schema import Column
from ..store.query import qident, qstr
from . import event_streams, indexes
from .calltree import producer_names
from .profiles import span_config
from .registry import Analysis, Param, Rows, Window, select_traces  # noqa: F401 - `an.select_traces`
from .sql import ENGINE_PARAMS
from .sql import text as sql_text
from .sql import where as _where

if TYPE_CHECKING:
    from ..store import Store


BY = ("type", "producer", "state", "link")
LINK_END_COLUMNS = ("dst_ts", "end_ts")
LINK_LABEL_COLUMNS = ("link_type", "name", "type")


def stats(
    store: Store,
    trace: str,
    by: str = "type",
    *,
    start: int | None = None,
    end: int | None = None,
    producers: Iterable[int] | None = None,
    state: str | None = None,
    source_type: str | None = None,
    config=None,
    unclosed: bool = False,
    sql: bool = False,
) -> pa.Table:
    """Counts and durations of `trace` by type | producer | state | link over [start, end)
    and `producers` (None: all); the columns of sql/stats_by_*.sql.

    by="state": spans grouped by a state column, starting in the range, closed ones only
    unless `unclosed`. Default: the trace's paired spans (`config`, else the format's
    profile) by their name column (all in one state, the begin type, when they have none);
    with `source_type`, that span-kind event type grouped by `state` (a column of it). by="link": link events (a type of kind link with an end
    time column) by their label, their duration being end time - ts.

    The derived indexes answer by type, producer and state (paired spans by their name);
    sql=True, an engine given as `store`, or a state column other than the name: the SQL
    analyses."""
    if by not in BY:
        raise BadInput(f"stats by {by!r}", expected=" | ".join(BY))
    from ..store import Store

    window = Window(start, end, tuple(int(p) for p in producers) if producers is not None else None)
    fast = not sql and isinstance(store, Store)
    if by in ("type", "producer"):
        if fast:
            return _by_stream(store, trace, by, window)
        q = sql_text(f"stats_by_{by}").format(
            trace=qident(trace),
            trace_str=qstr(trace),
            where=_where(
                start,
                end,
                "e.ts" if by == "producer" else "ts",
                window.producers,
                "e.producer" if by == "producer" else "producer",
            ),
        )
        return store.sql(q)
    if by == "link":
        return _by_link(store, trace, window)
    if source_type is not None:
        et = store.event_type(trace, source_type)
        if et.kind != "span":
            raise BadInput(f"event type {source_type!r} is a {et.kind}, not a span kind", expected="a span-kind type")
        if state is None or state not in [c.name for c in et.columns]:
            raise BadInput(f"state column {state!r} of {source_type!r}", expected=", ".join(c.name for c in et.params))
        q = sql_text("stats_by_state").format(
            trace_str=qstr(trace),
            state=qident(state),
            self_col="CAST(NULL AS BIGINT)",
            source=f"{qident(trace)}.{qident(source_type)}",
            where=_where(start, end, producers=window.producers),
        )
        return store.sql(q)
    from .spans import begin_column, processed, span_table

    cfg = config or span_config(store, trace)
    if fast and (state is None or state == cfg.name_column):
        return _by_name(store, trace, cfg, window, unclosed)
    where = _where(start, end, producers=window.producers) + ("" if unclosed else " AND closed")
    # The state: the column asked for, else the spans' name, else the begin type (spans without names).
    state = state or cfg.name_column
    expr = qident(begin_column(state)) if state else qstr(cfg.begin)
    if processed(store, trace, cfg) is None:
        span_table(store, trace, cfg, columns=["span_id"])  # pairs (and saves when it can)
    name = processed(store, trace, cfg)
    if name is None:  # read-only store: query the in-memory span table
        return _state_from_table(span_table(store, trace, cfg), trace, expr, where)
    q = sql_text("stats_by_state").format(
        trace_str=qstr(trace), state=expr, self_col="self_time", source=f"{qident(name)}.span", where=where
    )
    return store.sql(q)


def _state_from_table(t: pa.Table, trace: str, state: str, where: str) -> pa.Table:
    import duckdb

    con = duckdb.connect()
    con.register("spans_mem", t)
    q = sql_text("stats_by_state").format(
        trace_str=qstr(trace), state=state, self_col="self_time", source="spans_mem", where=where
    )
    rel = con.sql(q)
    f = getattr(rel, "to_arrow_table", None) or rel.arrow
    return f()


def _sums(inv: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    """Sums of int64 `values` per group code, exact: a float64 bincount (fast) while every
    partial sum stays under 2^53, else integer adds (a float64 sum rounds above it)."""
    values = values.astype(np.int64, copy=False)
    if len(values) == 0 or int(np.abs(values).max()) * len(values) < 2**53:
        return np.bincount(inv, weights=values, minlength=groups).astype(np.int64)
    out = np.zeros(groups, np.int64)
    np.add.at(out, inv, values)
    return out


def _by_stream(store: Store, trace: str, by: str, window: Window) -> pa.Table:
    """stats_by_type / stats_by_producer from the density index's streams (`stream_totals`:
    per stream, two binary searches for its rows in the range and a sum of its durations),
    then summed per group."""
    s = event_streams.stream_totals(store, trace, window)
    key = s.types if by == "type" else s.producers
    uniq, inv = np.unique(key, return_inverse=True) if len(key) else (key, np.zeros(0, np.int64))
    g = len(uniq)
    events, nspans, total = _sums(inv, s.events, g), _sums(inv, s.spans, g), _sums(inv, s.total_dur, g)
    first = np.full(g, np.iinfo(np.int64).max, np.int64)
    last = np.full(g, np.iinfo(np.int64).min, np.int64)
    np.minimum.at(first, inv, s.first_ts)
    np.maximum.at(last, inv, s.last_ts)
    order = np.lexsort((uniq.astype(str) if by == "type" else uniq, -events)) if g else np.zeros(0, np.int64)
    has = nspans[order] > 0
    # Columns built from their buffers (`arrays.from_numpy`): `pa.array` would import pandas.
    cols = {"trace": strings([trace] * g)}
    if by == "type":
        cols["type"] = strings(uniq[order].tolist())
    else:
        names = producer_names(store, trace)
        cols["producer"] = from_numpy(uniq[order].astype(np.int32))
        cols["name"] = strings([names.get(int(p)) for p in uniq[order].tolist()])
    cols["events"] = from_numpy(events[order])
    cols["spans"] = from_numpy(nspans[order])
    cols["total_dur"] = with_nulls(from_numpy(total[order]), has)
    cols["mean_dur"] = with_nulls(from_numpy(np.where(has, total[order] / np.maximum(nspans[order], 1), 0.0)), has)
    cols["first_ts"] = from_numpy(first[order])
    cols["last_ts"] = from_numpy(last[order])
    return pa.table(cols)


def _by_name(store: Store, trace: str, cfg, window: Window, unclosed: bool) -> pa.Table:
    """stats_by_state of paired spans by their name, from the span index: the spans starting
    in the window (binary searches per thread and depth), one native pass over their rows."""
    from . import windows
    from .spans import span_index

    idx = span_index(store, trace, cfg)
    info = store.trace(trace)
    codes, names = windows.names(idx, cfg)
    g = len(names) + 1  # the last group: spans whose name is null
    if windows.is_whole(window, info.ts_min, info.ts_max):
        first, last = np.zeros(1, np.int64), np.full(1, idx.num_rows, np.int64)
    else:  # per (producer, depth) run, its rows starting in the window
        first, last = windows.ranges(idx, window, info.ts_min, info.ts_max, overlap=False)
    closed = None if unclosed or windows.blocks(idx).all_closed else indexes.array(idx, "closed")
    # One native pass over those rows (no row numbers, no gathers): a 90 % window of a
    # 100M-event trace is 15M spans.
    spans, total, selfs, longest = (
        arrays.as_numpy(a)
        for a in _core.window_groups(
            from_numpy(codes.astype(np.int32, copy=False)),
            from_numpy(indexes.array(idx, "dur").astype(np.int64, copy=False)),
            from_numpy(indexes.array(idx, "self_time").astype(np.int64, copy=False)),
            None if closed is None else from_numpy(closed.view(np.uint8)),
            from_numpy(first),
            from_numpy(last),
            g,
        )
    )
    labels = np.array(names.to_pylist() + [None], dtype=object)
    keep = np.flatnonzero(spans > 0)
    # total_dur DESC NULLS LAST, then the state (NULL last)
    order = (
        keep[
            np.lexsort(
                (
                    np.array([x is None for x in labels[keep]]),
                    np.array(["" if x is None else x for x in labels[keep]], dtype=str),
                    -total[keep],
                )
            )
        ]
        if len(keep)
        else keep
    )
    whole = int(total[keep].sum())
    return pa.table(
        {
            "trace": strings([trace] * len(order)),
            "state": strings(labels[order].tolist()),
            "spans": from_numpy(spans[order]),
            "total_dur": from_numpy(total[order]),
            "mean_dur": from_numpy(total[order] / np.maximum(spans[order], 1)),
            "self_dur": from_numpy(selfs[order]),
            "share": from_numpy(total[order] / whole if whole else np.full(len(order), np.nan)),
            "max_dur": from_numpy(longest[order]),
        }
    )


def _by_link(store: Store, trace: str, window: Window) -> pa.Table:
    """Links (events of kind link with an end time) by label: count, total and mean duration (SQL)."""
    parts = []
    for name, et in store.event_types(trace).items():
        if et.kind != "link":
            continue
        cols = {c.name: c.type for c in et.params}
        end_col = next((c for c in LINK_END_COLUMNS if cols.get(c) == "int64"), None)
        if end_col is None:
            continue
        label = next((c for c in LINK_LABEL_COLUMNS if cols.get(c) == "string"), None)
        lab = f"coalesce({qident(label)}, '?')" if label else "''"
        where = _where(window.start, window.end, producers=window.producers) + f" AND {qident(end_col)} IS NOT NULL"
        parts.append(
            f"SELECT {qstr(name)} || CASE WHEN {lab} = '' THEN '' ELSE ': ' || {lab} END AS label, "
            f"{qident(end_col)} - ts AS d FROM {qident(trace)}.{qident(name)} WHERE {where}"
        )
    if not parts:
        return pa.table(
            {
                "trace": pa.array([], pa.string()),
                "label": pa.array([], pa.string()),
                "links": pa.array([], pa.int64()),
                "total_dur": pa.array([], pa.int64()),
                "mean_dur": pa.array([], pa.float64()),
            }
        )
    q = (
        f"SELECT {qstr(trace)} AS trace, label, count(*) AS links, CAST(sum(d) AS BIGINT) AS total_dur, "
        f"avg(d) AS mean_dur FROM ({' UNION ALL '.join(parts)}) GROUP BY label ORDER BY total_dur DESC, label"
    )
    return store.sql(q)


def multi_stats(store: Store, traces: list[str], by: str = "type", **kw) -> pa.Table:
    """`stats` of several traces in one table (its `trace` column tells them apart)."""
    parts = [stats(store, t, by, **kw) for t in traces]
    return pa.concat_tables(parts, promote_options="permissive")


# -- as an analysis ------------------------------------------------------------------------------


def _stats(
    store,
    traces,
    window,
    *,
    by="type",
    state=None,
    type=None,
    unclosed=False,  # noqa: A002
    engine=None,
    master=None,
    conf=None,
) -> Rows:
    from .sql import answered_by
    from .sql import engine as open_engine

    with open_engine(store, engine, master, conf) as e:
        t = multi_stats(
            e or store,
            traces,
            by,
            start=window.start,
            end=window.end,
            producers=window.producers,
            state=state,
            source_type=type,
            unclosed=unclosed,
        )
        indexed = e is None and type is None and by != "link"
        how = answered_by(e, "the derived indexes" if indexed else "duckdb")
    return Rows(t, f"statistics by {by} of {len(traces)} trace(s), {how}", params={"by": by}, save_as=f"stats-by-{by}")


STATS = Analysis(
    "stats",
    "counts and durations by type / producer / state / link, one or many traces",
    _stats,
    params=(
        Param(
            "by", "str", "", "group by event type, producer, state (spans by name) or link", default="type", choices=BY
        ),
        Param("start", "time", "ns", "events (spans: starting) in [start, end): from", window="start"),
        Param("end", "time", "ns", "... to", window="end"),
        Param("producer", "int", "id", "only these producers (repeat)", many=True, window="producers"),
        Param("state", "str", "", "by state: the state column (default: the span name)"),
        Param("type", "str", "", "by state: a span-kind event type instead of paired spans"),
        Param("unclosed", "bool", "", "by state: also the spans cut without an end", default=False),
    )
    + ENGINE_PARAMS,
    columns=(
        Column("trace", "string", "", "the trace's name"),
        Column("type", "string", "", "by type: the event type"),
        Column("producer", "int32", "id", "by producer: the producer (th.producers.id)"),
        Column("name", "string", "", "by producer: its name"),
        Column("state", "string", "", "by state: the state (the span's name, as text)"),
        Column("label", "string", "", "by link: the link type and label"),
        Column("events", "int64", "count", "events in the range (by type, producer)"),
        Column("spans", "int64", "count", "events with a duration (by type, producer); spans (by state)"),
        Column("links", "int64", "count", "by link: links in the range"),
        Column("total_dur", "int64", "ns", "sum of their durations (NULL without any)"),
        Column("mean_dur", "float64", "ns", "mean duration"),
        Column("self_dur", "int64", "ns", "by state: sum of their self times"),
        Column("share", "float64", "share", "by state: total_dur over the sum of total_dur of every state"),
        Column("max_dur", "int64", "ns", "by state: the longest of them"),
        Column("first_ts", "int64", "ns", "by type, producer: first event time"),
        Column("last_ts", "int64", "ns", "by type, producer: last event time"),
    ),
    columns_note="Each grouping has the columns that name it; the answers are those of `sql/stats_by_*.sql`.",
    traces="many",
    uses=("density", "spans"),
    limit=50,
)
