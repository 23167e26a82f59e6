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

from typing import TYPE_CHECKING, Iterable

import numpy as np
import pyarrow as pa

from ..errors import BadInput
from ..store.query import qident, qstr
from . import event_streams, indexes
from .profiles import span_config
from .sql import text as sql_text
from .sql import where as _where

if TYPE_CHECKING:
    from ..store import Store


# -- statistics --------------------------------------------------------------------------


def stats(store: "Store", trace: str, by: str = "type", *, start: int | None = None, end: int | None = None,
          state: str | None = None, source_type: str | None = None, config=None) -> pa.Table:
    """Counts and durations of `trace` by type | producer | state (see sql/stats_by_*.sql).

    by="state": spans grouped by a state column. Default: the trace's paired spans
    (processed trace, made if needed) by their name column; with `source_type`, that
    span-kind event type grouped by `state` (a column of it).
    """
    if by == "type":
        return store.sql(sql_text("stats_by_type").format(trace=qident(trace), trace_str=qstr(trace),
                                                          where=_where(start, end)))
    if by == "producer":
        return store.sql(sql_text("stats_by_producer").format(trace=qident(trace), trace_str=qstr(trace),
                                                              where=_where(start, end, "e.ts")))
    if by != "state":
        raise BadInput(f"stats by {by!r}", expected="type | producer | state")
    if source_type is not None:
        et = store.event_type(trace, source_type)
        if et.kind != "span":
            raise BadInput(f"event type {source_type!r} is a {et.kind}, not a span kind", expected="a span-kind type")
        if state is None or state not in [c.name for c in et.columns]:
            raise BadInput(f"state column {state!r} of {source_type!r}",
                           expected=", ".join(c.name for c in et.params))
        src, self_col = f"{qident(trace)}.{qident(source_type)}", "CAST(NULL AS BIGINT)"
    else:
        from .spans import _begin_name, processed, span_table

        cfg = config or span_config(store, trace)
        if processed(store, trace, cfg) is None:
            span_table(store, trace, cfg, columns=["span_id"])  # pairs (and saves when it can)
        name = processed(store, trace, cfg)
        state = _begin_name(state or cfg.name_column or "depth")
        if name is None:  # read-only store: query the in-memory span table
            t = span_table(store, trace, cfg)
            return _state_from_table(t, trace, state, start, end)
        src, self_col = f"{qident(name)}.span", "self_time"
    q = sql_text("stats_by_state").format(trace_str=qstr(trace), state=qident(state), self_col=self_col,
                                          source=src, where=_where(start, end))
    return store.sql(q)


def _state_from_table(t: pa.Table, trace: str, state: str, start, end) -> pa.Table:
    import duckdb

    con = duckdb.connect()
    con.register("spans_mem", t)
    q = sql_text("stats_by_state").format(trace_str=qstr(trace), state=qident(state), self_col="self_time",
                                          source="spans_mem", where=_where(start, end))
    rel = con.sql(q)
    f = getattr(rel, "to_arrow_table", None) or rel.arrow
    return f()


def select_traces(store: "Store", traces: Iterable[str] | None = None, search: dict | None = None) -> list[str]:
    """Trace names given explicitly and/or selected by a `store.search(**search)`."""
    names = list(traces or [])
    if search:
        names += [t.name for t in store.search(**search)]
    names = list(dict.fromkeys(names))
    if not names:
        raise BadInput("no trace selected", expected="trace names or a search matching some")
    return names


def multi_stats(store: "Store", traces: list[str], by: str = "type", **kw) -> pa.Table:
    """`stats` of several traces in one table (its `trace` column tells them apart)."""
    parts = [stats(store, t, by, **kw) for t in traces]
    return pa.concat_tables(parts, promote_options="permissive")
