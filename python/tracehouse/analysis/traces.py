"""`traces`: the everyday questions of OpenTelemetry traces (the `otlp` format's spans).

Owns one analysis over `"<trace>".spans` (the view the otlp format declares: each span with its
end, duration in ms, error and root flags): spans by service, name (a LIKE pattern),
attribute (a promoted column or a key of the `attributes` JSON) and duration range; one
OpenTelemetry trace by id as a tree (depth-first, children in start order, with each span's
depth); the slowest traces (a trace's extent from its first start to its last end); the spans in
error. Every question is one SQL query run by DuckDB over the store's columns: no loop over
spans in Python.
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

SHOW = ("spans", "tree", "slowest", "errors")
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
) -> pa.Table:
    t = qident(trace)
    if store.trace(trace).format != "otlp":
        raise BadInput(f"trace {trace!r} is not an OpenTelemetry trace", expected="a trace of format otlp")
    where, args = _filters(trace, window, service, name, attr, min_dur, max_dur)
    if trace_id or show == "tree":
        if not trace_id:
            raise BadInput("--show tree needs --trace-id", expected="--trace-id <32 hex digits>")
        # Depth-first order: each span's path is its ancestors' start times and ids.
        sql = f"""
            WITH RECURSIVE s AS (SELECT * FROM {t}.spans WHERE trace_id = ?),
            tree AS (
                SELECT span_id, 0 AS depth, [lpad(CAST(ts AS VARCHAR), 20, '0') || span_id] AS path FROM s
                WHERE parent_span_id IS NULL OR parent_span_id NOT IN (SELECT span_id FROM s)
                UNION ALL
                SELECT c.span_id, tree.depth + 1, list_append(tree.path, lpad(CAST(c.ts AS VARCHAR), 20, '0') || c.span_id)
                FROM s c JOIN tree ON c.parent_span_id = tree.span_id
            )
            SELECT tree.depth, repeat('  ', tree.depth::INTEGER) || s.name AS span, s.ts, s.ms, s.service,
                   s.kind, s.status, p.name AS producer_name, s.span_id, s.parent_span_id
            FROM tree JOIN s USING (span_id)
            LEFT JOIN th.producers p ON p.trace = ? AND p.id = s.producer ORDER BY tree.path"""
        return store.sql(sql, [trace_id.lower(), trace])
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


TRACES = Analysis(
    "traces",
    "OpenTelemetry spans by service, name, attribute and duration; a trace by id as a tree; the slowest traces; errors",
    _traces,
    params=(
        Param(
            "show",
            "str",
            "",
            "spans (matching the filters), tree (one trace by --trace-id), slowest traces, errors",
            default="spans",
            choices=SHOW,
        ),
        Param("trace_id", "str", "hex", "the OpenTelemetry trace id to show as a tree"),
        Param("service", "str", "", "only this service (service.name)"),
        Param("name", "str", "", "only span names LIKE this pattern (% for any text)"),
        Param("attr", "str", "", "only spans whose attribute KEY equals VALUE (KEY=VALUE; repeat)", many=True),
        Param("min_dur", "duration", "ns", "only spans lasting at least this"),
        Param("max_dur", "duration", "ns", "only spans lasting at most this"),
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
    ),
    columns_note="spans and errors also give kind, status, status_message and parent_span_id; tree the producer",
    fast=False,
    applies_to=("spans",),
    doc="Reads the `spans` view of a trace of format otlp (OpenTelemetry, posted to `tracehouse serve`'s "
    "/v1/traces or imported).",
)
