//! OpenTelemetry's OTLP (traces and logs) into the event types of `decl.rs`: what
//! `tracehouse serve` takes on `POST /v1/traces` and `/v1/logs` (src/py/otlp.rs hands it the
//! bodies) and what `tracehouse import otlp` reads from files.
//!
//! Owns the mapping. A request's resources become the producer tree ([`Producers`]):
//! `service.name` (the root; `unknown_service` when absent, as the SDKs name it) → `host.name`
//! → `process.pid`, each level only where the resource has it, and a span's `thread.id`
//! attribute a thread under them; a level's own attributes (`service.*`, `host.*`,
//! `process.*`, `thread.*`) go on its producer, the resource's other attributes
//! (`telemetry.sdk.*`, ...) on its deepest one. A span becomes one `span` row: ids in hex,
//! kind and status as words, start `ts` and `dur` in ns, the common semantic-convention
//! attributes in typed columns (old and new names both) and the rest as one JSON object; its
//! events and links are `span_event` and `span_link` rows. A span that cannot be stored
//! (trace id not 16 bytes or all zero, span id not 8 bytes, an end before its start, a time
//! past 2262) is rejected alone and counted: the answer's partial success says how many and
//! why. Protobuf is decoded by prost ([`proto`]), JSON by [`json`] into the same messages.

use arrow_array::RecordBatch;
use prost::Message;

use super::parser::{Attr, Problem, ProducerRow, Rejects};
use super::table::{FastMap, Table};
use crate::store::seqnum::SeqCounters;

pub mod decl;
pub mod json;
pub mod proto;
#[cfg(test)]
mod tests;

use proto::any_value::Value as V;
use proto::{AnyValue, KeyValue};

/// Largest input the file parser keeps whole (a protobuf request is one message).
pub const MAX_REQUEST: usize = 1 << 30;

/// What a request was: its signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// `/v1/traces`.
    Traces,
    /// `/v1/logs`.
    Logs,
    /// `/v1/metrics`.
    Metrics,
}

impl Signal {
    /// The signal named `s` (`traces`, `logs`).
    pub fn parse(s: &str) -> Option<Signal> {
        match s {
            "traces" => Some(Signal::Traces),
            "logs" => Some(Signal::Logs),
            "metrics" => Some(Signal::Metrics),
            _ => None,
        }
    }

    /// What its items are called in answers (`spans`, `log records`).
    pub fn items(self) -> &'static str {
        match self {
            Signal::Traces => "spans",
            Signal::Logs => "log records",
            Signal::Metrics => "data points",
        }
    }
}

/// Producer levels, root first.
const LEVELS: [(&str, &str); 4] =
    [("service", "service.name"), ("host", "host.name"), ("process", "process.pid"), ("thread", "thread.id")];

/// The producer tree of one store trace: (parent, kind, key) → id, kept across requests.
#[derive(Debug, Default)]
pub struct Producers {
    next_id: i32,
    ids: FastMap<(i32, &'static str, String), i32>,
    new: Vec<ProducerRow>,
    /// Producers at most (a request making more is refused whole).
    pub max: usize,
}

impl Producers {
    /// A tree giving new producers ids from `next_id` on.
    pub fn new(next_id: i32) -> Self {
        Producers { next_id, ids: FastMap::default(), new: Vec::new(), max: 1_000_000 }
    }

    /// A producer the store already has (`kind` one of service, host, process, thread).
    pub fn declare(&mut self, id: i32, parent: Option<i32>, kind: &str, key: &str) {
        let Some(&(k, _)) = LEVELS.iter().find(|(k, _)| *k == kind) else { return };
        self.ids.insert((parent.unwrap_or(-1), k, key.to_string()), id);
        self.next_id = self.next_id.max(id + 1);
    }

    /// Producers made since the last call, in id order.
    pub fn take_new(&mut self) -> Vec<ProducerRow> {
        std::mem::take(&mut self.new)
    }

    /// The id the next new producer gets.
    pub fn next_id(&self) -> i32 {
        self.next_id
    }

    /// Producers made and not yet taken (not yet registered in the store's catalog).
    pub fn has_new(&self) -> bool {
        !self.new.is_empty()
    }

    /// Producers known.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// No producer known.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The id of (parent, level, key), made with `name` and `attrs()` when new; None past `max`.
    fn intern(
        &mut self,
        parent: i32,
        level: usize,
        key: &str,
        name: impl FnOnce() -> String,
        attrs: impl FnOnce() -> Vec<(String, Attr)>,
    ) -> Option<i32> {
        let kind = LEVELS[level].0;
        // The lookup borrows the key: a String is made only for a new producer.
        if let Some(&id) = self.ids.get(&(parent, kind, key.to_string())) {
            return Some(id);
        }
        if self.ids.len() >= self.max {
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.ids.insert((parent, kind, key.to_string()), id);
        self.new.push(ProducerRow {
            id,
            parent: (parent >= 0).then_some(parent),
            kind: kind.to_string(),
            name: name(),
            attrs: attrs(),
        });
        Some(id)
    }
}

/// What one request stored and refused.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Items (spans, log records) made into rows.
    pub accepted: u64,
    /// Items refused.
    pub rejected: u64,
    /// Why the first refused item was refused (with where it was).
    pub first_error: Option<String>,
}

impl Outcome {
    fn count(&mut self, r: Result<(), String>, at: impl FnOnce() -> String) {
        match r {
            Ok(()) => self.accepted += 1,
            Err(e) => self.reject(format!("{}: {e}", at())),
        }
    }

    fn reject(&mut self, why: String) {
        self.rejected += 1;
        if self.first_error.is_none() {
            self.first_error = Some(why);
        }
    }
}

/// Decodes a request body: protobuf, or JSON when `json`.
pub fn decode_traces(body: &[u8], json: bool) -> Result<proto::ExportTraceServiceRequest, String> {
    if json {
        return json::trace_request(body).map_err(|e| format!("not an OTLP JSON ExportTraceServiceRequest: {e}"));
    }
    proto::ExportTraceServiceRequest::decode(body)
        .map_err(|e| format!("not an OTLP protobuf ExportTraceServiceRequest: {e}"))
}

/// Decodes a logs request body: protobuf, or JSON when `json`.
pub fn decode_logs(body: &[u8], json: bool) -> Result<proto::ExportLogsServiceRequest, String> {
    if json {
        return json::logs_request(body).map_err(|e| format!("not an OTLP JSON ExportLogsServiceRequest: {e}"));
    }
    proto::ExportLogsServiceRequest::decode(body)
        .map_err(|e| format!("not an OTLP protobuf ExportLogsServiceRequest: {e}"))
}

/// Decodes a metrics request body: protobuf, or JSON when `json`.
pub fn decode_metrics(body: &[u8], json: bool) -> Result<proto::ExportMetricsServiceRequest, String> {
    if json {
        return json::metrics_request(body).map_err(|e| format!("not an OTLP JSON ExportMetricsServiceRequest: {e}"));
    }
    proto::ExportMetricsServiceRequest::decode(body)
        .map_err(|e| format!("not an OTLP protobuf ExportMetricsServiceRequest: {e}"))
}

/// The body of a 200 answer: an `Export*ServiceResponse`, with a partial success when items
/// were refused; protobuf, or JSON when `json`.
pub fn response(signal: Signal, rejected: u64, message: &str, json: bool) -> Vec<u8> {
    if json {
        if rejected == 0 && message.is_empty() {
            return b"{}".to_vec();
        }
        let key = match signal {
            Signal::Traces => "rejectedSpans",
            Signal::Logs => "rejectedLogRecords",
            Signal::Metrics => "rejectedDataPoints",
        };
        let mut out = format!("{{\"partialSuccess\":{{\"{key}\":\"{rejected}\",\"errorMessage\":").into_bytes();
        crate::formats::json::write_str(&mut out, message.as_bytes());
        out.extend_from_slice(b"}}");
        return out;
    }
    let ps = (rejected > 0 || !message.is_empty())
        .then(|| proto::PartialSuccess { rejected: rejected as i64, error_message: message.to_string() });
    proto::ExportResponse { partial_success: ps }.encode_to_vec()
}

/// The body of an error answer: a `google.rpc.Status` (`code` a gRPC code: 3 invalid argument,
/// 8 resource exhausted, 14 unavailable ...); protobuf, or JSON when `json`.
pub fn status(code: i32, message: &str, json: bool) -> Vec<u8> {
    if json {
        let mut out = format!("{{\"code\":{code},\"message\":").into_bytes();
        crate::formats::json::write_str(&mut out, message.as_bytes());
        out.push(b'}');
        return out;
    }
    proto::RpcStatus { code, message: message.to_string() }.encode_to_vec()
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn hex_into(out: &mut String, b: &[u8]) {
    out.clear();
    for &x in b {
        out.push(HEX[(x >> 4) as usize] as char);
        out.push(HEX[(x & 15) as usize] as char);
    }
}

/// An attribute value as JSON into `out`.
fn json_value(out: &mut Vec<u8>, v: Option<&AnyValue>, depth: usize) {
    let Some(v) = v.and_then(|v| v.value.as_ref()) else {
        out.extend_from_slice(b"null");
        return;
    };
    match v {
        V::StringValue(s) => super::json::write_str(out, s.as_bytes()),
        V::BoolValue(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        V::IntValue(i) => out.extend_from_slice(i.to_string().as_bytes()),
        V::DoubleValue(d) if d.is_finite() => out.extend_from_slice(format!("{d:?}").as_bytes()),
        V::DoubleValue(d) => super::json::write_str(out, format!("{d}").as_bytes()),
        V::BytesValue(b) => {
            use base64::Engine;
            super::json::write_str(out, base64::engine::general_purpose::STANDARD.encode(b).as_bytes())
        }
        V::ArrayValue(a) if depth < 32 => {
            out.push(b'[');
            for (i, x) in a.values.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                json_value(out, Some(x), depth + 1);
            }
            out.push(b']');
        }
        V::KvlistValue(kv) if depth < 32 => json_object(out, kv.values.iter(), depth + 1),
        _ => out.extend_from_slice(b"null"),
    }
}

fn json_object<'a>(out: &mut Vec<u8>, kvs: impl Iterator<Item = &'a KeyValue>, depth: usize) {
    out.push(b'{');
    for (i, kv) in kvs.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        super::json::write_str(out, kv.key.as_bytes());
        out.push(b':');
        json_value(out, kv.value.as_ref(), depth);
    }
    out.push(b'}');
}

fn as_str(v: &Option<AnyValue>) -> Option<&str> {
    match v.as_ref()?.value.as_ref()? {
        V::StringValue(s) => Some(s),
        _ => None,
    }
}

fn as_int(v: &Option<AnyValue>) -> Option<i64> {
    match v.as_ref()?.value.as_ref()? {
        V::IntValue(i) => Some(*i),
        V::StringValue(s) => s.parse().ok(),
        V::DoubleValue(d) if d.fract() == 0.0 && d.abs() < 9e15 => Some(*d as i64),
        _ => None,
    }
}

/// An attribute value as text (a producer's name or key).
fn as_text(v: &Option<AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(V::StringValue(s)) => s.clone(),
        Some(V::IntValue(i)) => i.to_string(),
        Some(V::BoolValue(b)) => b.to_string(),
        Some(V::DoubleValue(d)) => d.to_string(),
        _ => {
            let mut o = Vec::new();
            json_value(&mut o, v.as_ref(), 0);
            String::from_utf8_lossy(&o).into_owned()
        }
    }
}

fn attr(v: &Option<AnyValue>) -> Attr {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(V::IntValue(i)) => Attr::Int(*i),
        _ => Attr::Str(as_text(v)),
    }
}

/// A span attribute promoted to a column: (column, integer column?).
fn promoted(key: &str) -> Option<usize> {
    Some(match key {
        "http.request.method" | "http.method" => P_HTTP_METHOD,
        "http.response.status_code" | "http.status_code" => P_HTTP_STATUS,
        "url.full" | "http.url" => P_URL,
        "server.address" | "net.peer.name" => P_SERVER,
        "db.system" | "db.system.name" => P_DB_SYSTEM,
        "db.query.text" | "db.statement" => P_DB_STATEMENT,
        "rpc.system" => P_RPC_SYSTEM,
        "rpc.service" => P_RPC_SERVICE,
        "rpc.method" => P_RPC_METHOD,
        "messaging.system" => P_MSG_SYSTEM,
        "messaging.destination.name" | "messaging.destination" => P_MSG_DEST,
        _ => return None,
    })
}

// Columns of `span` (after ts, producer, seq, dur), in decl.rs's order.
const C_TRACE: usize = 4;
const C_SPAN: usize = 5;
const C_PARENT: usize = 6;
const C_NAME: usize = 7;
const C_KIND: usize = 8;
const C_STATUS: usize = 9;
const C_STATUS_MSG: usize = 10;
const C_SERVICE: usize = 11;
const C_SCOPE: usize = 12;
const P_HTTP_METHOD: usize = 13;
const P_HTTP_STATUS: usize = 14;
const P_URL: usize = 15;
const P_SERVER: usize = 16;
const P_DB_SYSTEM: usize = 17;
const P_DB_STATEMENT: usize = 18;
const P_RPC_SYSTEM: usize = 19;
const P_RPC_SERVICE: usize = 20;
const P_RPC_METHOD: usize = 21;
const P_MSG_SYSTEM: usize = 22;
const P_MSG_DEST: usize = 23;
const C_ATTRS: usize = 24;
const C_EVENTS: usize = 25;
const C_LINKS: usize = 26;

const KINDS: [Option<&str>; 6] =
    [None, Some("internal"), Some("server"), Some("client"), Some("producer"), Some("consumer")];
const STATUSES: [&str; 3] = ["unset", "ok", "error"];

/// Where a resource's rows go: its deepest producer, its service name.
struct Origin {
    producer: i32,
    service: String,
}

/// Builds the rows of OTLP requests, table per event type.
pub struct Decoder {
    span: Table,
    event: Table,
    link: Table,
    log: Table,
    metric: Table,
    hist: Table,
    hex: String,
    hex2: String,
    json: Vec<u8>,
}

fn table(et: &crate::formats::decl::EventTypeDecl, cap: usize) -> Table {
    Table::new(et.name, et.is_span(), &et.columns(), cap)
}

impl Decoder {
    /// A decoder whose tables start with room for `cap` rows.
    pub fn new(cap: usize) -> Self {
        Decoder {
            span: table(&decl::SPAN, cap),
            event: table(&decl::SPAN_EVENT, 16),
            link: table(&decl::SPAN_LINK, 16),
            log: table(&decl::LOG, 16),
            metric: table(&decl::METRIC, 16),
            hist: table(&decl::HISTOGRAM, 16),
            hex: String::new(),
            hex2: String::new(),
            json: Vec::new(),
        }
    }

    /// Rows buffered, all tables together.
    pub fn rows(&self) -> usize {
        [&self.span, &self.event, &self.link, &self.log, &self.metric, &self.hist].iter().map(|t| t.rows()).sum()
    }

    /// Rows buffered in each table, in the order `take` cuts them.
    pub fn table_rows(&self) -> [usize; 6] {
        [&self.span, &self.event, &self.link, &self.log, &self.metric, &self.hist].map(|t| t.rows())
    }

    /// Rows of one request body of `signal` (protobuf, or JSON when `json`): what it stored and
    /// refused, or why the body is not such a request (nothing of it is buffered then).
    pub fn request(
        &mut self,
        signal: Signal,
        body: &[u8],
        json: bool,
        producers: &mut Producers,
        seq: &mut SeqCounters,
    ) -> Result<Outcome, String> {
        Ok(match signal {
            Signal::Traces => self.traces(&decode_traces(body, json)?, producers, seq),
            Signal::Logs => self.logs(&decode_logs(body, json)?, producers, seq),
            Signal::Metrics => self.metrics(&decode_metrics(body, json)?, producers, seq),
        })
    }

    /// Every non-empty batch, cut now.
    pub fn take(&mut self) -> Vec<(String, RecordBatch)> {
        let mut out = Vec::new();
        for t in [&mut self.span, &mut self.event, &mut self.link, &mut self.log, &mut self.metric, &mut self.hist] {
            if let Some(b) = t.take() {
                out.push((t.name.clone(), b));
            }
        }
        out
    }

    /// The producers of a resource: service → host → process.
    fn origin(&mut self, attrs: &[KeyValue], producers: &mut Producers) -> Result<Origin, String> {
        let find = |key: &str| attrs.iter().find(|kv| kv.key == key).map(|kv| &kv.value);
        let service = find("service.name").and_then(as_str).unwrap_or("unknown_service").to_string();
        let mut parent = -1;
        let deepest = (0..3).filter(|&l| l == 0 || find(LEVELS[l].1).is_some()).max().unwrap_or(0);
        for (level, (kind, key_attr)) in LEVELS[..3].iter().enumerate() {
            let key = if level == 0 {
                service.clone()
            } else {
                match find(key_attr) {
                    Some(v) => as_text(v),
                    None => continue,
                }
            };
            let prefix = format!("{kind}.");
            let name = || match level {
                2 => match find("process.executable.name").and_then(as_str) {
                    Some(exe) => format!("{exe} [{key}]"),
                    None => format!("pid {key}"),
                },
                _ => key.clone(),
            };
            let own = || {
                attrs
                    .iter()
                    .filter(|kv| {
                        kv.key.starts_with(&prefix)
                            || (level == deepest
                                && !LEVELS[..3].iter().any(|(k, _)| kv.key.starts_with(&format!("{k}."))))
                    })
                    .map(|kv| (kv.key.clone(), attr(&kv.value)))
                    .collect()
            };
            parent = producers
                .intern(parent, level, &key, name, own)
                .ok_or_else(|| format!("more than {} producers in this trace", producers.max))?;
        }
        Ok(Origin { producer: parent, service })
    }

    /// Rows of a trace request; the spans it refuses are counted in the outcome.
    pub fn traces(
        &mut self,
        req: &proto::ExportTraceServiceRequest,
        producers: &mut Producers,
        seq: &mut SeqCounters,
    ) -> Outcome {
        let mut out = Outcome::default();
        for (ri, rs) in req.resource_spans.iter().enumerate() {
            let attrs = rs.resource.as_ref().map_or(&[][..], |r| &r.attributes[..]);
            let origin = match self.origin(attrs, producers) {
                Ok(o) => o,
                Err(e) => {
                    for ss in &rs.scope_spans {
                        for _ in &ss.spans {
                            out.reject(format!("resourceSpans[{ri}]: {e}"));
                        }
                    }
                    continue;
                }
            };
            for (si, ss) in rs.scope_spans.iter().enumerate() {
                let scope = ss.scope.as_ref().map(|s| s.name.as_str()).filter(|s| !s.is_empty());
                for (k, span) in ss.spans.iter().enumerate() {
                    match self.span(span, &origin, scope, producers, seq) {
                        Ok(()) => out.accepted += 1,
                        Err(e) => out.reject(format!("resourceSpans[{ri}].scopeSpans[{si}].spans[{k}]: {e}")),
                    }
                }
            }
        }
        out
    }

    fn span(
        &mut self,
        s: &proto::Span,
        origin: &Origin,
        scope: Option<&str>,
        producers: &mut Producers,
        seq: &mut SeqCounters,
    ) -> Result<(), String> {
        check_id(&s.trace_id, 16, "traceId")?;
        check_id(&s.span_id, 8, "spanId")?;
        if !s.parent_span_id.is_empty() && s.parent_span_id.len() != 8 {
            return Err(format!("parentSpanId of {} bytes (expected 8, or none for a root)", s.parent_span_id.len()));
        }
        let start = time(s.start_time_unix_nano, "startTimeUnixNano")?;
        let end = time(s.end_time_unix_nano, "endTimeUnixNano")?;
        if end < start {
            return Err(format!("endTimeUnixNano {end} before startTimeUnixNano {start}"));
        }
        // An event's time is checked before any row is made: a span refused stores nothing.
        for e in &s.events {
            if e.time_unix_nano != 0 {
                time(e.time_unix_nano, "event timeUnixNano")?;
            }
        }
        // The thread, when the span names it (thread.id, semantic conventions).
        let mut producer = origin.producer;
        if let Some(kv) = s.attributes.iter().find(|kv| kv.key == "thread.id") {
            let tid = as_text(&kv.value);
            let tname = s.attributes.iter().find(|kv| kv.key == "thread.name").and_then(|kv| as_str(&kv.value));
            producer = producers
                .intern(
                    origin.producer,
                    3,
                    &tid,
                    || tname.map_or_else(|| format!("thread {tid}"), |n| format!("{n} [{tid}]")),
                    || {
                        let mut a = vec![("thread.id".to_string(), attr(&kv.value))];
                        if let Some(n) = tname {
                            a.push(("thread.name".into(), Attr::Str(n.into())));
                        }
                        a
                    },
                )
                .ok_or_else(|| format!("more than {} producers in this trace", producers.max))?;
        }
        let t = &mut self.span;
        t.start(start, producer, seq.take(producer));
        t.set_i64(crate::formats::table::DUR, end - start);
        hex_into(&mut self.hex, &s.trace_id);
        t.set_str(C_TRACE, &self.hex);
        hex_into(&mut self.hex, &s.span_id);
        t.set_str(C_SPAN, &self.hex);
        if !s.parent_span_id.is_empty() && s.parent_span_id.iter().any(|&b| b != 0) {
            hex_into(&mut self.hex, &s.parent_span_id);
            t.set_str(C_PARENT, &self.hex);
        }
        t.set_str(C_NAME, &s.name);
        if let Some(Some(k)) = usize::try_from(s.kind).ok().and_then(|k| KINDS.get(k)) {
            t.set_str(C_KIND, k);
        }
        let (code, msg) = s.status.as_ref().map_or((0, ""), |st| (st.code, st.message.as_str()));
        t.set_str(C_STATUS, usize::try_from(code).ok().and_then(|c| STATUSES.get(c)).copied().unwrap_or("unset"));
        if !msg.is_empty() {
            t.set_str(C_STATUS_MSG, msg);
        }
        t.set_str(C_SERVICE, &origin.service);
        if let Some(sc) = scope {
            t.set_str(C_SCOPE, sc);
        }
        self.json.clear();
        let mut rest = 0;
        for kv in &s.attributes {
            if let Some(c) = promoted(&kv.key) {
                if t.is_set(c) {
                    continue; // the newer name came first: keep it
                }
                if c == P_HTTP_STATUS {
                    if let Some(i) = as_int(&kv.value) {
                        t.set_i64(c, i);
                        continue;
                    }
                } else if let Some(v) = as_str(&kv.value) {
                    t.set_str(c, v);
                    continue;
                }
            } else if kv.key == "thread.id" || kv.key == "thread.name" {
                continue; // the producer holds them
            }
            self.json.push(if rest == 0 { b'{' } else { b',' });
            super::json::write_str(&mut self.json, kv.key.as_bytes());
            self.json.push(b':');
            json_value(&mut self.json, kv.value.as_ref(), 0);
            rest += 1;
        }
        if rest > 0 {
            self.json.push(b'}');
            t.set_str(C_ATTRS, std::str::from_utf8(&self.json).unwrap_or("{}"));
        }
        t.set_i64(C_EVENTS, s.events.len() as i64);
        t.set_i64(C_LINKS, s.links.len() as i64);
        t.end();
        hex_into(&mut self.hex, &s.trace_id);
        hex_into(&mut self.hex2, &s.span_id);
        for e in &s.events {
            // An event without a time (0) is at its span's start.
            let ts = if e.time_unix_nano == 0 { start } else { time(e.time_unix_nano, "event timeUnixNano")? };
            let t = &mut self.event;
            t.start(ts, producer, seq.take(producer));
            t.set_str(3, &self.hex);
            t.set_str(4, &self.hex2);
            t.set_str(5, &e.name);
            if !e.attributes.is_empty() {
                self.json.clear();
                json_object(&mut self.json, e.attributes.iter(), 0);
                t.set_str(6, std::str::from_utf8(&self.json).unwrap_or("{}"));
            }
            t.end();
        }
        for l in &s.links {
            let t = &mut self.link;
            t.start(start, producer, seq.take(producer));
            t.set_str(3, &self.hex);
            t.set_str(4, &self.hex2);
            let mut h = String::new();
            hex_into(&mut h, &l.trace_id);
            t.set_str(5, &h);
            hex_into(&mut h, &l.span_id);
            t.set_str(6, &h);
            if !l.attributes.is_empty() {
                self.json.clear();
                json_object(&mut self.json, l.attributes.iter(), 0);
                t.set_str(7, std::str::from_utf8(&self.json).unwrap_or("{}"));
            }
            t.end();
        }
        Ok(())
    }

    /// Rows of a logs request; the records it refuses are counted in the outcome.
    pub fn logs(
        &mut self,
        req: &proto::ExportLogsServiceRequest,
        producers: &mut Producers,
        seq: &mut SeqCounters,
    ) -> Outcome {
        let mut out = Outcome::default();
        for (ri, rl) in req.resource_logs.iter().enumerate() {
            let attrs = rl.resource.as_ref().map_or(&[][..], |r| &r.attributes[..]);
            let origin = match self.origin(attrs, producers) {
                Ok(o) => o,
                Err(e) => {
                    for sl in &rl.scope_logs {
                        for _ in &sl.log_records {
                            out.reject(format!("resourceLogs[{ri}]: {e}"));
                        }
                    }
                    continue;
                }
            };
            for (si, sl) in rl.scope_logs.iter().enumerate() {
                let scope = sl.scope.as_ref().map(|s| s.name.as_str()).filter(|s| !s.is_empty());
                for (k, r) in sl.log_records.iter().enumerate() {
                    match self.log(r, &origin, scope, seq) {
                        Ok(()) => out.accepted += 1,
                        Err(e) => out.reject(format!("resourceLogs[{ri}].scopeLogs[{si}].logRecords[{k}]: {e}")),
                    }
                }
            }
        }
        out
    }

    fn log(
        &mut self,
        r: &proto::LogRecord,
        origin: &Origin,
        scope: Option<&str>,
        seq: &mut SeqCounters,
    ) -> Result<(), String> {
        let when = if r.time_unix_nano != 0 { r.time_unix_nano } else { r.observed_time_unix_nano };
        if when == 0 {
            return Err("neither timeUnixNano nor observedTimeUnixNano".into());
        }
        let ts = time(when, "timeUnixNano")?;
        if !r.trace_id.is_empty() && r.trace_id.len() != 16 {
            return Err(format!("traceId of {} bytes (expected 16)", r.trace_id.len()));
        }
        if !r.span_id.is_empty() && r.span_id.len() != 8 {
            return Err(format!("spanId of {} bytes (expected 8)", r.span_id.len()));
        }
        let t = &mut self.log;
        t.start(ts, origin.producer, seq.take(origin.producer));
        if r.severity_number != 0 {
            t.set_i64(3, r.severity_number as i64);
        }
        if !r.severity_text.is_empty() {
            t.set_str(4, &r.severity_text);
        }
        match r.body.as_ref().and_then(|b| b.value.as_ref()) {
            None => {}
            Some(V::StringValue(s)) => t.set_str(5, s),
            Some(_) => {
                self.json.clear();
                json_value(&mut self.json, r.body.as_ref(), 0);
                t.set_str(5, std::str::from_utf8(&self.json).unwrap_or(""));
            }
        }
        if r.trace_id.iter().any(|&b| b != 0) {
            hex_into(&mut self.hex, &r.trace_id);
            t.set_str(6, &self.hex);
        }
        if r.span_id.iter().any(|&b| b != 0) {
            hex_into(&mut self.hex, &r.span_id);
            t.set_str(7, &self.hex);
        }
        if !r.event_name.is_empty() {
            t.set_str(8, &r.event_name);
        }
        t.set_str(9, &origin.service);
        if let Some(sc) = scope {
            t.set_str(10, sc);
        }
        if !r.attributes.is_empty() {
            self.json.clear();
            json_object(&mut self.json, r.attributes.iter(), 0);
            t.set_str(11, std::str::from_utf8(&self.json).unwrap_or("{}"));
        }
        t.end();
        Ok(())
    }
}

impl Decoder {
    /// Rows of a metrics request: gauge and sum points as `metric`, histogram, exponential
    /// histogram and summary points as `histogram`; the points it refuses are counted.
    pub fn metrics(
        &mut self,
        req: &proto::ExportMetricsServiceRequest,
        producers: &mut Producers,
        seq: &mut SeqCounters,
    ) -> Outcome {
        use proto::metric::Data;
        let mut out = Outcome::default();
        for (ri, rm) in req.resource_metrics.iter().enumerate() {
            let attrs = rm.resource.as_ref().map_or(&[][..], |r| &r.attributes[..]);
            let origin = match self.origin(attrs, producers) {
                Ok(o) => o,
                Err(e) => {
                    out.reject(format!("resourceMetrics[{ri}]: {e}"));
                    continue;
                }
            };
            for (si, sm) in rm.scope_metrics.iter().enumerate() {
                let scope = sm.scope.as_ref().map(|s| s.name.as_str()).filter(|s| !s.is_empty());
                for (mi, m) in sm.metrics.iter().enumerate() {
                    let at =
                        |k: usize| format!("resourceMetrics[{ri}].scopeMetrics[{si}].metrics[{mi}].dataPoints[{k}]");
                    let head = Head { name: &m.name, unit: &m.unit, origin: &origin, scope };
                    match &m.data {
                        None => out.reject(format!("resourceMetrics[{ri}].scopeMetrics[{si}].metrics[{mi}]: no data (expected gauge, sum, histogram, exponentialHistogram or summary)")),
                        Some(Data::Gauge(g)) => {
                            for (k, p) in g.data_points.iter().enumerate() {
                                let r = self.number(&head, p, "gauge", None, 0, seq);
 out.count(r, || at(k));
                            }
                        }
                        Some(Data::Sum(sm)) => {
                            for (k, p) in sm.data_points.iter().enumerate() {
                                let r = self.number(&head, p, "sum", Some(sm.is_monotonic), sm.aggregation_temporality, seq);
 out.count(r, || at(k));
                            }
                        }
                        Some(Data::Histogram(h)) => {
                            for (k, p) in h.data_points.iter().enumerate() {
                                let r = self.hist_row(&head, "histogram", p.time_unix_nano, p.start_time_unix_nano, h.aggregation_temporality, &p.attributes, seq, |t, json| {
                                    t.set_i64(H_COUNT, p.count as i64);
                                    set_opt(t, H_SUM, p.sum);
                                    set_opt(t, H_MIN, p.min);
                                    set_opt(t, H_MAX, p.max);
                                    json.clear();
                                    json.push(b'[');
                                    for (i, c) in p.bucket_counts.iter().enumerate() {
                                        if i > 0 {
                                            json.push(b',');
                                        }
                                        let bound = p.explicit_bounds.get(i).filter(|b| b.is_finite());
                                        json.extend_from_slice(format!("[{},{c}]", bound.map_or("null".into(), |b| format!("{b:?}"))).as_bytes());
                                    }
                                    json.push(b']');
                                    t.set_str(H_BUCKETS, std::str::from_utf8(json).unwrap_or("[]"));
                                });
                                out.count(r, || at(k));
                            }
                        }
                        Some(Data::ExponentialHistogram(h)) => {
                            for (k, p) in h.data_points.iter().enumerate() {
                                let r = self.hist_row(&head, "exponential_histogram", p.time_unix_nano, p.start_time_unix_nano, h.aggregation_temporality, &p.attributes, seq, |t, json| {
                                    t.set_i64(H_COUNT, p.count as i64);
                                    set_opt(t, H_SUM, p.sum);
                                    set_opt(t, H_MIN, p.min);
                                    set_opt(t, H_MAX, p.max);
                                    let side = |b: &Option<proto::Buckets>| {
                                        let b = b.clone().unwrap_or_default();
                                        let counts: Vec<String> = b.bucket_counts.iter().map(|c| c.to_string()).collect();
                                        format!("{{\"offset\":{},\"counts\":[{}]}}", b.offset, counts.join(","))
                                    };
                                    json.clear();
                                    json.extend_from_slice(format!("{{\"scale\":{},\"zero_count\":{},\"positive\":{},\"negative\":{}}}", p.scale, p.zero_count, side(&p.positive), side(&p.negative)).as_bytes());
                                    t.set_str(H_BUCKETS, std::str::from_utf8(json).unwrap_or("{}"));
                                });
                                out.count(r, || at(k));
                            }
                        }
                        Some(Data::Summary(sm)) => {
                            for (k, p) in sm.data_points.iter().enumerate() {
                                let r = self.hist_row(&head, "summary", p.time_unix_nano, p.start_time_unix_nano, 0, &p.attributes, seq, |t, json| {
                                    t.set_i64(H_COUNT, p.count as i64);
                                    t.set_f64(H_SUM, p.sum);
                                    let q: Vec<String> = p.quantile_values.iter().map(|q| format!("[{:?},{:?}]", q.quantile, q.value)).collect();
                                    json.clear();
                                    json.extend_from_slice(format!("[{}]", q.join(",")).as_bytes());
                                    t.set_str(H_QUANTILES, std::str::from_utf8(json).unwrap_or("[]"));
                                });
                                out.count(r, || at(k));
                            }
                        }
                    }
                }
            }
        }
        out
    }

    fn number(
        &mut self,
        h: &Head<'_>,
        p: &proto::NumberDataPoint,
        kind: &str,
        monotonic: Option<bool>,
        temporality: i32,
        seq: &mut SeqCounters,
    ) -> Result<(), String> {
        let ts = point_time(p.time_unix_nano)?;
        let value = match p.value {
            Some(proto::number_data_point::Value::AsDouble(d)) => d,
            Some(proto::number_data_point::Value::AsInt(i)) => i as f64,
            None => return Err("no value (expected asDouble or asInt)".into()),
        };
        let t = &mut self.metric;
        t.start(ts, h.origin.producer, seq.take(h.origin.producer));
        t.set_str(3, h.name);
        t.set_f64(4, value);
        t.set_str(5, kind);
        if let Some(m) = monotonic {
            t.set_bool(6, m);
        }
        common_metric(t, 7, h, temporality, p.start_time_unix_nano, &p.attributes, &mut self.json);
        t.end();
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn hist_row(
        &mut self,
        h: &Head<'_>,
        kind: &str,
        time_ns: u64,
        start: u64,
        temporality: i32,
        attrs: &[KeyValue],
        seq: &mut SeqCounters,
        fill: impl FnOnce(&mut Table, &mut Vec<u8>),
    ) -> Result<(), String> {
        let ts = point_time(time_ns)?;
        let t = &mut self.hist;
        t.start(ts, h.origin.producer, seq.take(h.origin.producer));
        t.set_str(3, h.name);
        t.set_str(4, kind);
        fill(t, &mut self.json);
        common_metric(t, 11, h, temporality, start, attrs, &mut self.json);
        t.end();
        Ok(())
    }
}

// Columns of `histogram`.
const H_COUNT: usize = 5;
const H_SUM: usize = 6;
const H_MIN: usize = 7;
const H_MAX: usize = 8;
const H_BUCKETS: usize = 9;
const H_QUANTILES: usize = 10;

/// What every data point of one metric shares.
struct Head<'a> {
    name: &'a str,
    unit: &'a str,
    origin: &'a Origin,
    scope: Option<&'a str>,
}

fn set_opt(t: &mut Table, c: usize, v: Option<f64>) {
    if let Some(v) = v {
        t.set_f64(c, v);
    }
}

/// unit, temporality, start_ts, service, scope, attributes from column `c` on.
fn common_metric(
    t: &mut Table,
    c: usize,
    h: &Head<'_>,
    temporality: i32,
    start: u64,
    attrs: &[KeyValue],
    json: &mut Vec<u8>,
) {
    if !h.unit.is_empty() {
        t.set_str(c, h.unit);
    }
    match temporality {
        1 => t.set_str(c + 1, "delta"),
        2 => t.set_str(c + 1, "cumulative"),
        _ => {}
    }
    if let Ok(s) = i64::try_from(start) {
        if s > 0 {
            t.set_i64(c + 2, s);
        }
    }
    t.set_str(c + 3, &h.origin.service);
    if let Some(sc) = h.scope {
        t.set_str(c + 4, sc);
    }
    if !attrs.is_empty() {
        json.clear();
        json_object(json, attrs.iter(), 0);
        t.set_str(c + 5, std::str::from_utf8(json).unwrap_or("{}"));
    }
}

fn point_time(ns: u64) -> Result<i64, String> {
    if ns == 0 {
        return Err("no timeUnixNano".into());
    }
    time(ns, "timeUnixNano")
}

fn check_id(id: &[u8], len: usize, what: &str) -> Result<(), String> {
    if id.len() != len {
        return Err(format!("{what} of {} bytes (expected {len})", id.len()));
    }
    if id.iter().all(|&b| b == 0) {
        return Err(format!("{what} is all zeros (an invalid id)"));
    }
    Ok(())
}

fn time(ns: u64, what: &str) -> Result<i64, String> {
    i64::try_from(ns).map_err(|_| format!("{what} {ns} past the year 2262 (int64 nanoseconds)"))
}

/// `tracehouse import otlp`: a file of OTLP requests. JSON: one request per line (the
/// Collector's file exporter), traces or logs told by the line's first key; protobuf: the
/// whole file one `ExportTraceServiceRequest` (a body as posted to `/v1/traces`).
pub struct OtlpParser {
    strict: bool,
    batch_rows: usize,
    buf: Vec<u8>,
    too_big: bool,
    line: u64,
    decoder: Decoder,
    producers: Producers,
    all: Vec<ProducerRow>,
    seq: SeqCounters,
    rejects: Rejects,
    requests: u64,
    spans: u64,
    logs: u64,
    json: Option<bool>,
}

impl OtlpParser {
    /// A parser cutting batches of `batch_rows` rows.
    pub fn new(strict: bool, batch_rows: usize) -> Self {
        OtlpParser {
            strict,
            batch_rows: batch_rows.max(1),
            buf: Vec::new(),
            too_big: false,
            line: 0,
            decoder: Decoder::new(batch_rows.clamp(1, 1 << 16)),
            producers: Producers::new(0),
            all: Vec::new(),
            seq: SeqCounters::new(),
            rejects: Rejects::default(),
            requests: 0,
            spans: 0,
            logs: 0,
            json: None,
        }
    }

    /// Takes a chunk: JSON lines are decoded as they complete, protobuf kept until the end.
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.too_big || (self.strict && self.rejects.fatal.is_some()) {
            return;
        }
        if self.buf.len() + chunk.len() > MAX_REQUEST {
            self.too_big = true;
            self.buf = Vec::new();
            return;
        }
        self.buf.extend_from_slice(chunk);
        if self.json.is_none() {
            if let Some(&c) = self.buf.iter().find(|c| !c.is_ascii_whitespace()) {
                self.json = Some(c == b'{');
            }
        }
        if self.json == Some(true) {
            let Some(last_nl) = memchr::memrchr(b'\n', &self.buf) else { return };
            let rest = self.buf.split_off(last_nl + 1);
            let whole = std::mem::replace(&mut self.buf, rest);
            for l in whole.split(|&c| c == b'\n') {
                self.json_line(l);
            }
            // The split leaves one empty piece after the last newline: not a line.
            self.line -= 1;
        }
    }

    fn json_line(&mut self, l: &[u8]) {
        self.line += 1;
        if l.iter().all(|c| c.is_ascii_whitespace()) || (self.strict && self.rejects.fatal.is_some()) {
            return;
        }
        // The line's first key says which request it is.
        let logs = l.windows(12).take(64).any(|w| w == b"resourceLogs" || w == b"resource_log");
        let outcome = if logs {
            json::logs_request(l).map(|r| self.decoder.logs(&r, &mut self.producers, &mut self.seq))
        } else {
            json::trace_request(l).map(|r| self.decoder.traces(&r, &mut self.producers, &mut self.seq))
        };
        self.outcome(self.line, outcome.map_err(|e| format!("not an OTLP JSON request: {e}")), logs);
    }

    fn outcome(&mut self, line: u64, o: Result<Outcome, String>, logs: bool) {
        self.all.extend(self.producers.take_new());
        match o {
            Err(e) => {
                self.rejects.reject(self.strict, Problem::at_line(line, e));
            }
            Ok(o) => {
                self.requests += 1;
                if logs {
                    self.logs += o.accepted;
                } else {
                    self.spans += o.accepted;
                }
                if let Some(e) = o.first_error {
                    self.rejects.reject(self.strict, Problem::at_line(line, e));
                    // The rest of the request's refusals count too (only the first is named).
                    self.rejects.count += o.rejected - 1;
                }
            }
        }
    }

    /// Ends the input: the last JSON line, or the protobuf request.
    pub fn finish(&mut self) {
        if self.too_big {
            self.rejects.reject(self.strict, Problem::at_line(0, format!("input larger than {MAX_REQUEST} bytes")));
            return;
        }
        let buf = std::mem::take(&mut self.buf);
        match self.json {
            Some(true) if !buf.is_empty() => self.json_line(&buf),
            Some(true) => {}
            Some(false) => {
                let o = decode_traces(&buf, false).map(|r| self.decoder.traces(&r, &mut self.producers, &mut self.seq));
                self.outcome(0, o, false);
            }
            None => {}
        }
    }

    /// Batches that reached the batch size (all non-empty ones when `all`).
    pub fn take_batches(&mut self, all: bool) -> Vec<(String, RecordBatch)> {
        if all || self.decoder.rows() >= self.batch_rows {
            return self.decoder.take();
        }
        Vec::new()
    }
}

super::chunk_parser!(OtlpParser {
    fn producers(&self) -> Vec<ProducerRow> {
        self.all.clone()
    }
    fn stats(&self) -> Vec<(String, u64)> {
        vec![
            ("requests".into(), self.requests),
            ("spans".into(), self.spans),
            ("log_records".into(), self.logs),
            ("rejected".into(), self.rejects.count),
        ]
    }
    fn problems(&self) -> Vec<Problem> {
        self.rejects.first.clone()
    }
    fn fatal(&self) -> Option<Problem> {
        self.rejects.fatal.clone()
    }
});
