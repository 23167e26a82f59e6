//! The `otlp` format (OpenTelemetry's OTLP), declared once (see `formats/decl.rs`): its event
//! types (spans, span events, span links, log records, metric points), its sniffer (the JSON lines the
//! Collector's file exporter writes), its parser's factory, the analyses' profile (spans are
//! spans, named by `name`) and example queries.
//!
//! Span events and links are event types of their own, not nested columns: the store's
//! columns are scalars (int64, float64, bool, string), an event has its own time (an instant
//! on the timeline, found by a time-range query like any event) and a link is a row one can
//! join on (`linked_trace_id`), where a JSON array in a column could only be unpacked per row.

use crate::formats::decl::types::{B, F, I, S};
use crate::formats::decl::{param, EventTypeDecl, FormatDecl, Param, ParserDecl, Profile, SpanProfile};
use crate::formats::parser::{ChunkParser, Options};
use crate::formats::pbwire::{self, Value};

const TRACE_ID: Param = param("trace_id", S, "hex", "the OpenTelemetry trace id, 32 hex digits");
const SPAN_ID: Param = param("span_id", S, "hex", "the span id, 16 hex digits");
const ATTRIBUTES: Param =
    param("attributes", S, "json", "the attributes not promoted to a column, as a JSON object (null when none)");
const SERVICE: Param = param("service", S, "text", "the resource's service.name (also the producer tree's root)");
const SCOPE: Param = param("scope", S, "text", "the instrumentation scope's name (the library that made it)");

const SPAN_PARAMS: &[Param] = &[
    TRACE_ID,
    SPAN_ID,
    param("parent_span_id", S, "hex", "the parent span's id, null for a root span"),
    param("name", S, "text", "the span's name"),
    param("kind", S, "text", "internal, server, client, producer or consumer (null when unspecified)"),
    param("status", S, "text", "the status code: unset, ok or error"),
    param("status_message", S, "text", "the status message (null when empty)"),
    SERVICE,
    SCOPE,
    param("http_method", S, "text", "http.request.method (or the older http.method)"),
    param("http_status_code", I, "HTTP status", "http.response.status_code (or the older http.status_code)"),
    param("url_full", S, "URL", "url.full (or the older http.url)"),
    param("server_address", S, "host", "server.address (or the older net.peer.name)"),
    param("db_system", S, "text", "db.system (or db.system.name)"),
    param("db_statement", S, "text", "db.query.text (or the older db.statement)"),
    param("rpc_system", S, "text", "rpc.system"),
    param("rpc_service", S, "text", "rpc.service"),
    param("rpc_method", S, "text", "rpc.method"),
    param("messaging_system", S, "text", "messaging.system"),
    param("messaging_destination", S, "text", "messaging.destination.name (or the older messaging.destination)"),
    ATTRIBUTES,
    param("events", I, "count", "span events of the span (rows of span_event)"),
    param("links", I, "count", "links of the span (rows of span_link)"),
];

/// A span: start (`ts`), duration (`dur`) and the OpenTelemetry span's fields.
pub const SPAN: EventTypeDecl = EventTypeDecl {
    name: "span",
    kind: "span",
    params: SPAN_PARAMS,
    doc: "an OpenTelemetry span (ts: its start, dur: end - start, in ns)",
};

/// An event of a span, at its own time.
pub const SPAN_EVENT: EventTypeDecl = EventTypeDecl {
    name: "span_event",
    kind: "instant",
    params: &[TRACE_ID, SPAN_ID, param("name", S, "text", "the event's name (exception, ...)"), ATTRIBUTES],
    doc: "an event of a span (an exception, a log line attached to it), at its own time",
};

/// A link of a span to another span.
pub const SPAN_LINK: EventTypeDecl = EventTypeDecl {
    name: "span_link",
    kind: "instant",
    params: &[
        TRACE_ID,
        SPAN_ID,
        param("linked_trace_id", S, "hex", "the linked span's trace id"),
        param("linked_span_id", S, "hex", "the linked span's id"),
        ATTRIBUTES,
    ],
    doc: "a link from a span to another span, possibly of another trace (ts: the linking span's start)",
};

/// A log record.
pub const LOG: EventTypeDecl = EventTypeDecl {
    name: "log",
    kind: "instant",
    params: &[
        param("severity", I, "level", "the severity number (1-4 trace, 5-8 debug, 9-12 info, 13-16 warn, 17-20 error, 21-24 fatal; null unspecified)"),
        param("severity_text", S, "text", "the severity as the source names it (INFO, WARNING, ...)"),
        param("body", S, "text", "the body: its text when a string, else as JSON"),
        param("trace_id", S, "hex", "the trace of the span it was logged in, if any"),
        param("span_id", S, "hex", "the span it was logged in, if any"),
        param("event_name", S, "text", "the event name of an event record"),
        SERVICE,
        SCOPE,
        ATTRIBUTES,
    ],
    doc: "an OpenTelemetry log record (ts: its time, else when it was observed)",
};

const METRIC_COMMON: [Param; 6] = [
    param("name", S, "text", "the metric's name"),
    param("unit", S, "unit", "the metric's unit as declared (UCUM: s, ms, By, 1 ...; null when none)"),
    param("temporality", S, "text", "delta or cumulative (null for gauges and summaries)"),
    param("start_ts", I, "ns", "start of the period the point aggregates (null when not given)"),
    SERVICE,
    SCOPE,
];

/// A gauge or sum data point.
pub const METRIC: EventTypeDecl = EventTypeDecl {
    name: "metric",
    kind: "counter",
    params: &[
        METRIC_COMMON[0],
        param("value", F, "as recorded", "the point's value (an integer point as float64)"),
        param("metric_type", S, "text", "gauge or sum"),
        param("monotonic", B, "flag", "a sum that only grows (null for gauges)"),
        METRIC_COMMON[1],
        METRIC_COMMON[2],
        METRIC_COMMON[3],
        METRIC_COMMON[4],
        METRIC_COMMON[5],
        ATTRIBUTES,
    ],
    doc: "an OpenTelemetry gauge or sum data point (ts: its time)",
};

/// A histogram, exponential histogram or summary data point.
pub const HISTOGRAM: EventTypeDecl = EventTypeDecl {
    name: "histogram",
    kind: "instant",
    params: &[
        METRIC_COMMON[0],
        param("metric_type", S, "text", "histogram, exponential_histogram or summary"),
        param("count", I, "count", "values recorded"),
        param("sum", F, "as recorded", "their sum (null when not given)"),
        param("min", F, "as recorded", "the smallest value (null when not given)"),
        param("max", F, "as recorded", "the largest value (null when not given)"),
        param(
            "buckets",
            S,
            "json",
            "histogram: [[upper bound, count], ...] (the last bound null: +inf); exponential: {scale, zero_count, \
             positive: {offset, counts}, negative: {offset, counts}}; null for summaries",
        ),
        param("quantiles", S, "json", "summary: [[quantile, value], ...]; null otherwise"),
        METRIC_COMMON[1],
        METRIC_COMMON[2],
        METRIC_COMMON[3],
        METRIC_COMMON[4],
        METRIC_COMMON[5],
        ATTRIBUTES,
    ],
    doc: "an OpenTelemetry histogram, exponential histogram or summary data point (ts: its time)",
};

/// The `otlp` format.
pub const OTLP: FormatDecl = FormatDecl {
    name: "otlp",
    description: "OpenTelemetry OTLP traces, logs and metrics (Export{Trace,Logs,Metrics}ServiceRequest: \
                  protobuf, or JSON one request per line as the Collector's file exporter writes; live on \
                  tracehouse serve's /v1/traces, /v1/logs and /v1/metrics)",
    event_types: &[SPAN, SPAN_EVENT, SPAN_LINK, LOG, METRIC, HISTOGRAM],
    priority: 35,
    sniff: Some(sniff),
    parser: Some(ParserDecl { options: &[], make }),
    profile: Profile {
        spans: Some(SpanProfile { begin: "span", end: None, key: None, name: Some("name") }),
        labels: &[("span", "name", Some("service")), ("span_event", "name", None), ("log", "severity_text", None)],
        ..Profile::NONE
    },
    examples: &[
        (
            "slowest spans",
            "SELECT service, name, dur / 1e6 AS ms, trace_id, status FROM {t}.span ORDER BY dur DESC LIMIT 20",
        ),
        (
            "spans by service and name",
            "SELECT service, name, count(*) AS spans, round(avg(dur) / 1e6, 3) AS avg_ms,\n\
             round(quantile_cont(dur, 0.99) / 1e6, 3) AS p99_ms,\n\
             count(*) FILTER (status = 'error') AS errors\n\
             FROM {t}.span GROUP BY ALL ORDER BY spans DESC",
        ),
        (
            "errors",
            "SELECT ts, service, name, status_message, trace_id, span_id FROM {t}.span\n\
             WHERE status = 'error' ORDER BY ts LIMIT 50",
        ),
    ],
    views: &[(
        "spans",
        // (th.* is not joined here: the catalog's tables are made for the queries that name them)
        "SELECT *, ts + dur AS end_ts, dur / 1e6 AS ms, status = 'error' AS error, parent_span_id IS NULL AS root\n\
         FROM {t}.span",
    )],
    ..FormatDecl::BASE
};

fn make(o: &Options) -> Result<Box<dyn ChunkParser>, String> {
    Ok(Box::new(super::OtlpParser::new(o.strict(), o.batch_rows())))
}

/// JSON whose first member is one of OTLP's request keys (`{"resourceSpans"` or
/// `{"resourceLogs"`, with spaces or snake_case), or a protobuf `ExportTraceServiceRequest`:
/// the head is `resource_spans` fields (1, length-delimited; the last may be cut), the first
/// holding a `Resource` (1) or `ScopeSpans` (2) whose own fields are of their schema's types.
pub fn sniff(head: &[u8]) -> bool {
    let t: Vec<u8> = head.iter().take(256).copied().filter(|c| !c.is_ascii_whitespace()).collect();
    const KEYS: [&str; 6] = [
        "{\"resourceSpans\"",
        "{\"resource_spans\"",
        "{\"resourceLogs\"",
        "{\"resource_logs\"",
        "{\"resourceMetrics\"",
        "{\"resource_metrics\"",
    ];
    if KEYS.iter().any(|k| t.starts_with(k.as_bytes())) {
        return true;
    }
    // protobuf: the first ResourceSpans, whole or cut by the end of the head
    let Some((key, n)) = pbwire::varint(head) else { return false };
    if key != (1 << 3) | 2 {
        return false;
    }
    let Some((len, m)) = pbwire::varint(&head[n..]) else { return false };
    let body = &head[n + m..];
    let body = &body[..body.len().min(len as usize)];
    // ResourceSpans' first field: resource (1) or scope_spans (2), a message of known fields
    match pbwire::field(body) {
        Some((1, Value::Bytes(r), _)) => {
            !r.is_empty() && pbwire::walk(r, |n, v| matches!((n, v), (1 | 3, Value::Bytes(_)) | (2, Value::Varint(_))))
        }
        Some((2, Value::Bytes(s), _)) => {
            !s.is_empty() && pbwire::walk(s, |n, v| matches!((n, v), (1 | 2, Value::Bytes(_)) | (3, Value::Bytes(_))))
        }
        // cut inside the first field: a resource or scope_spans key then a length
        None => matches!(body.first(), Some(0x0a | 0x12)) && body.len() < 16,
        _ => false,
    }
}
