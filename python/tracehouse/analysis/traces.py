"""`traces`: the everyday questions of OpenTelemetry traces (the `otlp` format's spans).

Owns one analysis over `"<trace>".spans` (the view the otlp format declares: each span with its
end, duration in ms, error and root flags): spans by service, name (a LIKE pattern),
attribute (a promoted column or a key of the `attributes` JSON) and duration range; one
OpenTelemetry trace by id as a tree (depth-first, children in start order, with each span's
depth, children count and ancestors, subtrees of `collapsed` spans left out); the slowest traces
(a trace's extent from its first start to its last end); the spans in error. The web UI's trace
search and waterfall (server/ui/waterfall.py) ask the same analysis: `search` gives one row per
OpenTelemetry trace holding a span that matches the filters (its root span, span and error
counts, extent; slowest or newest first, at most `max_traces`), `span` one span with every
column, its children count and self time (its duration less the union of its children's
intervals clipped to it), `events`, `links` (both directions) and `children` the rows of one span.
Every question is one SQL query run by DuckDB over the store's columns: no loop over spans in
Python.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import BadInput
from ..schema import Column
from ..store.query import qident
from .registry import Analysis, Param, Window

if TYPE_CHECKING:
    import pyarrow as pa

    from ..store import Store

SHOW = ("spans", "tree", "slowest", "errors", "search", "span", "events", "links", "children")
SORTS = ("slowest", "newest")
SPAN_COLUMNS = "ts, ms, service, name, kind, status, status_message, trace_id, span_id, parent_span_id"


def _filters(trace: str, window: Window, service, name, attr, min_dur, max_dur) -> tuple[list[str], list]:
    where, args = [], []
    if window.start is not None:
        where.append("ts >= ?")
        args.append(window.start)
    if window.end is not None:
        where.append("ts < ?")
        args.append(window.end)
    if service:
        where.append("service = ?")
        args.append(service)
    if name:
        where.append("name LIKE ?")
        args.append(name)
    if min_dur is not None:
        where.append("dur >= ?")
        args.append(min_dur)
    if max_dur is not None:
        where.append("dur <= ?")
        args.append(max_dur)
    for a in attr or ():
        key, sep, value = a.partition("=")
        if not sep:
            raise BadInput(f"--attr {a!r}", expected="KEY=VALUE (http.request.method=GET, user.tier=gold)")
        column = key.replace(".", "_")
        promoted = {
            "http.request.method": "http_method",
            "http.method": "http_method",
            "http.response.status_code": "http_status_code",
            "http.status_code": "http_status_code",
            "url.full": "url_full",
            "server.address": "server_address",
            "db.system": "db_system",
            "db.query.text": "db_statement",
            "db.statement": "db_statement",
            "messaging.destination.name": "messaging_destination",
        }.get(key, column if key in ("rpc.system", "rpc.service", "rpc.method", "messaging.system") else None)
        if promoted:
            where.append(f"CAST({qident(promoted)} AS VARCHAR) = ?")
        else:  # the rest is in the JSON object; a key with dots is one key, hence the quoted path
            where.append("json_extract_string(attributes, ?) = ?")
            args.append('$."' + key.replace('"', '\\"') + '"')
        args.append(value)
    return where, args


def _traces(
    store: Store,
    trace: str,
    window: Window,
    show: str = "spans",
    trace_id: str | None = None,
    service: str | None = None,
    name: str | None = None,
    attr: list[str] | None = None,
    min_dur: int | None = None,
    max_dur: int | None = None,
    span_id: str | None = None,
    errors_only: bool = False,
    sort: str = "slowest",
    max_traces: int = 50,
    collapsed: list[str] | None = None,
) -> pa.Table:
    t = qident(trace)
    if store.trace(trace).format != "otlp":
        raise BadInput(f"trace {trace!r} is not an OpenTelemetry trace", expected="a trace of format otlp")
    where, args = _filters(trace, window, service, name, attr, min_dur, max_dur)
    if show == "search":
        return _search(store, t, where, args, errors_only, sort, max_traces)
    if show in ("span", "events", "links", "children"):
        if not trace_id or not span_id:
            raise BadInput(f"--show {show} needs --trace-id and --span-id", expected="the span's ids (hex)")
        return _span_part(store, trace, show, trace_id.lower(), span_id.lower())
    if trace_id or show == "tree":
        if not trace_id:
            raise BadInput("--show tree needs --trace-id", expected="--trace-id <32 hex digits>")
        # Depth-first order: each span's path is its ancestors' start times and ids.
        # Depth-first order: each span's path is its ancestors' start times and ids; `anc` its
        # ancestors' ids, so that the subtrees of `collapsed` spans are left out in the query. A
        # span sent twice (an exporter's retry) is one node: joined as two, each level below it
        # would double.
        sql = f"""
            WITH RECURSIVE s AS (SELECT DISTINCT ON (span_id) * FROM {t}.spans WHERE trace_id = ? ORDER BY span_id, ts),
            kids AS (SELECT parent_span_id AS span_id, count(*) AS children FROM s GROUP BY ALL),
            tree AS (
                SELECT span_id, 0 AS depth, [lpad(CAST(ts AS VARCHAR), 20, '0') || span_id] AS path,
                       []::VARCHAR[] AS anc FROM s
                WHERE parent_span_id IS NULL OR parent_span_id NOT IN (SELECT span_id FROM s)
                UNION ALL
                SELECT c.span_id, tree.depth + 1, list_append(tree.path, lpad(CAST(c.ts AS VARCHAR), 20, '0') || c.span_id),
                       list_append(tree.anc, tree.span_id)
                FROM s c JOIN tree ON c.parent_span_id = tree.span_id
            )
            SELECT tree.depth, repeat('  ', tree.depth::INTEGER) || s.name AS span, s.ts, s.ms, s.service,
                   s.kind, s.status, p.name AS producer_name, s.span_id, s.parent_span_id,
                   s.name, s.dur, s.error, s.producer, coalesce(kids.children, 0) AS children,
                   (SELECT min(ts) FROM s) AS trace_start, (SELECT max(end_ts) FROM s) AS trace_end
            FROM tree JOIN s USING (span_id) LEFT JOIN kids USING (span_id)
            LEFT JOIN th.producers p ON p.trace = ? AND p.id = s.producer
            WHERE NOT list_has_any(tree.anc, ?::VARCHAR[]) ORDER BY tree.path"""
        return store.sql(sql, [trace_id.lower(), trace, [c.lower() for c in collapsed or ()]])
    cond = (" WHERE " + " AND ".join(where)) if where else ""
    if show == "slowest":
        sql = f"""
            SELECT trace_id, min(ts) AS start, (max(end_ts) - min(ts)) / 1e6 AS ms, count(*) AS spans,
                   count(*) FILTER (error) AS errors, list(DISTINCT service ORDER BY service) AS services,
                   arg_min(name, ts) AS first_span
            FROM {t}.spans{cond} GROUP BY trace_id ORDER BY ms DESC, trace_id"""
        return store.sql(sql, args)
    if show == "errors":
        cond = " WHERE " + " AND ".join([*where, "error"])
    return store.sql(f"SELECT {SPAN_COLUMNS} FROM {t}.spans{cond} ORDER BY ts, span_id", args)


def _search(store: Store, t: str, where: list[str], args: list, errors_only: bool, sort: str, n: int) -> pa.Table:
    """One row per OpenTelemetry trace holding a span that matches (in error, with
    `errors_only`): its extent, counts, root span and services, sorted, the first `n`; `matched`
    counts every trace that matched."""
    if sort not in SORTS:
        raise BadInput(f"--sort {sort!r}", expected=" | ".join(SORTS))
    cond = " AND ".join([*where, *(["error"] if errors_only else [])]) or "true"
    order = "dur DESC, trace_id" if sort == "slowest" else "start DESC, trace_id"
    # The root: the span without a parent (the earliest if several), else the earliest span
    # (a trace whose root has not arrived yet).
    sql = f"""
        WITH m AS (SELECT DISTINCT trace_id FROM {t}.spans WHERE {cond}),
        g AS (
            SELECT trace_id, min(ts) AS start, max(end_ts) - min(ts) AS dur, count(*) AS spans,
                   count(*) FILTER (error) AS errors,
                   coalesce(arg_min(name, ts) FILTER (root), arg_min(name, ts)) AS root_name,
                   coalesce(arg_min(service, ts) FILTER (root), arg_min(service, ts)) AS root_service,
                   list(DISTINCT service ORDER BY service) FILTER (service IS NOT NULL) AS services
            FROM {t}.spans SEMI JOIN m USING (trace_id) GROUP BY trace_id
        )
        SELECT trace_id, start, dur, dur / 1e6 AS ms, spans, errors, root_name, root_service, services,
               count(*) OVER () AS matched
        FROM g ORDER BY {order} LIMIT ?"""
    return store.sql(sql, [*args, max(1, int(n))])


def _span_part(store: Store, trace: str, show: str, trace_id: str, span_id: str) -> pa.Table:
    """One span of one OpenTelemetry trace: its row (every column, children, self time, its
    producer), or its events, links (from and to it) or children."""
    t = qident(trace)
    if show == "events":
        return store.sql(
            f"SELECT ts, name, attributes FROM {t}.span_event WHERE trace_id = ? AND span_id = ? ORDER BY ts, seq",
            [trace_id, span_id],
        )
    if show == "links":
        return store.sql(
            f"""SELECT 'to' AS direction, linked_trace_id AS other_trace_id, linked_span_id AS other_span_id,
                       attributes FROM {t}.span_link WHERE trace_id = ? AND span_id = ?
                UNION ALL
                SELECT 'from', trace_id, span_id, attributes FROM {t}.span_link
                WHERE linked_trace_id = ? AND linked_span_id = ? ORDER BY 1 DESC, 2, 3""",
            [trace_id, span_id, trace_id, span_id],
        )
    if show == "children":
        return store.sql(
            f"SELECT {SPAN_COLUMNS}, dur, error FROM {t}.spans WHERE trace_id = ? AND parent_span_id = ? "
            "ORDER BY ts, span_id LIMIT 1000",
            [trace_id, span_id],
        )
    # Self time: the span's duration less the union of its children's intervals clipped to it
    # (islands of overlapping children merged by a running maximum of their ends).
    sql = f"""
        WITH me AS (SELECT * FROM {t}.spans WHERE trace_id = ? AND span_id = ? LIMIT 1),
        c AS (
            SELECT greatest(c.ts, me.ts) AS a, least(c.end_ts, me.end_ts) AS b
            FROM {t}.spans c, me WHERE c.trace_id = me.trace_id AND c.parent_span_id = me.span_id
        ),
        o AS (SELECT a, b, max(b) OVER (ORDER BY a, b ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
              FROM c WHERE b > a),
        g AS (SELECT a, b, sum(CASE WHEN reach IS NULL OR a > reach THEN 1 ELSE 0 END) OVER (ORDER BY a, b) AS island FROM o),
        u AS (SELECT coalesce(sum(hi - lo), 0) AS covered FROM (SELECT min(a) AS lo, max(b) AS hi FROM g GROUP BY island))
        SELECT me.*, CAST(me.dur - u.covered AS BIGINT) AS self_ns, (SELECT count(*) FROM c) AS children,
               p.name AS producer_name, p.kind AS producer_kind
        FROM me, u LEFT JOIN th.producers p ON p.trace = ? AND p.id = me.producer"""
    got = store.sql(sql, [trace_id, span_id, trace])
    if got.num_rows == 0:
        from ..errors import NotFound

        raise NotFound(f"trace {trace!r} has no span {span_id} in trace id {trace_id}")
    return got


TRACES = Analysis(
    "traces",
    "OpenTelemetry spans by service, name, attribute and duration; a trace by id as a tree; the slowest traces; errors",
    _traces,
    params=(
        Param(
            "show",
            "str",
            "",
            "spans (matching the filters), tree (one trace by --trace-id), slowest traces, errors, search "
            "(traces with a matching span), span, events, links, children (of --span-id)",
            default="spans",
            choices=SHOW,
        ),
        Param("trace_id", "str", "hex", "the OpenTelemetry trace id to show as a tree"),
        Param("service", "str", "", "only this service (service.name)"),
        Param("name", "str", "", "only span names LIKE this pattern (% for any text)"),
        Param("attr", "str", "", "only spans whose attribute KEY equals VALUE (KEY=VALUE; repeat)", many=True),
        Param("min_dur", "duration", "ns", "only spans lasting at least this"),
        Param("max_dur", "duration", "ns", "only spans lasting at most this"),
        Param("span_id", "str", "hex", "span, events, links, children: the span (with --trace-id)"),
        Param("errors_only", "bool", "", "search: only traces with a matching span in error"),
        Param(
            "sort",
            "str",
            "",
            "search: slowest (longest first) or newest (latest start first)",
            default="slowest",
            choices=SORTS,
        ),
        Param("max_traces", "int", "count", "search: at most this many traces", default=50),
        Param("collapsed", "str", "hex", "tree: leave out the spans under this span (repeat)", many=True),
        Param("start", "time", "ns", "spans starting in [start, end): from", window="start"),
        Param("end", "time", "ns", "... to", window="end"),
    ),
    columns=(
        Column("ts", "int64", "ns", "spans, errors: the span's start"),
        Column("ms", "float64", "ms", "the span's duration (slowest: the trace's, first start to last end)"),
        Column("service", "string", "", "the span's service"),
        Column("name", "string", "", "the span's name"),
        Column("trace_id", "string", "hex", "the OpenTelemetry trace id"),
        Column("span_id", "string", "hex", "the span id"),
        Column("depth", "int64", "count", "tree: the span's depth under the trace's root"),
        Column("span", "string", "", "tree: the name indented by depth"),
        Column("spans", "int64", "count", "slowest: spans of the trace"),
        Column("errors", "int64", "count", "slowest: spans in error"),
        Column("dur", "int64", "ns", "tree: the span's duration; search: the trace's"),
        Column("children", "int64", "count", "tree, span: the span's children"),
        Column("start", "int64", "ns", "search: the trace's first start"),
        Column("root_name", "string", "", "search: the root span's name"),
        Column("matched", "int64", "count", "search: traces that matched (before --max-traces)"),
        Column("self_ns", "int64", "ns", "span: its duration less the time its children cover"),
    ),
    columns_note="spans and errors also give kind, status, status_message and parent_span_id; tree the producer",
    fast=False,
    applies_to=("spans",),
    doc="Reads the `spans` view of a trace of format otlp (OpenTelemetry, posted to `tracehouse serve`'s "
    "/v1/traces or imported).",
)
