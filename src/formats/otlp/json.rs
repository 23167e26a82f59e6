//! OTLP's JSON encoding (the protobuf JSON mapping with OTLP's exceptions) read into the prost
//! messages of [`super::proto`], so one decoder ([`super::Decoder`]) takes both encodings.
//!
//! The rules followed, from the OTLP specification's "JSON Protobuf Encoding": keys in
//! lowerCamelCase (the schema's snake_case names are accepted too, as the protobuf JSON
//! parsers do); `traceId`/`spanId`/`parentSpanId` as hex strings, not base64; 64-bit integers
//! as decimal strings or numbers; enums as integers (their names are accepted too); `bytesValue`
//! as base64; unknown keys ignored. The text is first read into a small tree (nesting capped
//! at [`MAX_DEPTH`], so a hostile body cannot exhaust the stack), then mapped; an error names
//! the path of the field and what was expected there.

use base64::Engine;

use super::proto::*;

/// Deepest nesting of arrays and objects accepted (an attribute value nests at most a few levels).
pub const MAX_DEPTH: usize = 64;

/// A JSON value.
#[derive(Debug, Clone, PartialEq)]
enum J {
    Null,
    Bool(bool),
    /// A number, as written.
    Num(String),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl Reader<'_> {
    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("JSON at byte {}: expected {what}", self.i))
    }

    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<J, String> {
        if depth > MAX_DEPTH {
            return self.err(&format!("at most {MAX_DEPTH} levels of nesting"));
        }
        self.ws();
        let Some(&c) = self.b.get(self.i) else { return self.err("a value") };
        match c {
            b'{' => {
                self.i += 1;
                let mut members = Vec::new();
                self.ws();
                if self.b.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Ok(J::Obj(members));
                }
                loop {
                    self.ws();
                    if self.b.get(self.i) != Some(&b'"') {
                        return self.err("a member name in double quotes");
                    }
                    let k = self.string()?;
                    self.ws();
                    if self.b.get(self.i) != Some(&b':') {
                        return self.err("':' after a member name");
                    }
                    self.i += 1;
                    let v = self.value(depth + 1)?;
                    members.push((k, v));
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(J::Obj(members));
                        }
                        _ => return self.err("',' or '}' in an object"),
                    }
                }
            }
            b'[' => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.b.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Ok(J::Arr(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(J::Arr(items));
                        }
                        _ => return self.err("',' or ']' in an array"),
                    }
                }
            }
            b'"' => Ok(J::Str(self.string()?)),
            b't' if self.b[self.i..].starts_with(b"true") => {
                self.i += 4;
                Ok(J::Bool(true))
            }
            b'f' if self.b[self.i..].starts_with(b"false") => {
                self.i += 5;
                Ok(J::Bool(false))
            }
            b'n' if self.b[self.i..].starts_with(b"null") => {
                self.i += 4;
                Ok(J::Null)
            }
            b'-' | b'0'..=b'9' => {
                let start = self.i;
                while self.i < self.b.len() && matches!(self.b[self.i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    self.i += 1;
                }
                let s = std::str::from_utf8(&self.b[start..self.i]).unwrap_or_default();
                if s.parse::<f64>().is_err() {
                    self.i = start;
                    return self.err("a number");
                }
                Ok(J::Num(s.to_string()))
            }
            _ => self.err("a value (object, array, string, number, true, false or null)"),
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let h = self.b.get(self.i..self.i + 4).and_then(|h| std::str::from_utf8(h).ok());
        match h.and_then(|h| u32::from_str_radix(h, 16).ok()) {
            Some(v) => {
                self.i += 4;
                Ok(v)
            }
            None => self.err("4 hex digits after \\u"),
        }
    }

    /// A string at a `"`, unescaped.
    fn string(&mut self) -> Result<String, String> {
        self.i += 1;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(off) = memchr::memchr2(b'"', b'\\', &self.b[self.i..]) else {
                return self.err("the end of a string ('\"')");
            };
            out.extend_from_slice(&self.b[self.i..self.i + off]);
            self.i += off;
            if self.b[self.i] == b'"' {
                self.i += 1;
                break;
            }
            self.i += 1;
            let Some(&e) = self.b.get(self.i) else { return self.err("an escape after '\\'") };
            self.i += 1;
            let c = match e {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => {
                    let hi = self.hex4()?;
                    let cp = if (0xd800..0xdc00).contains(&hi) && self.b[self.i..].starts_with(b"\\u") {
                        self.i += 2;
                        let lo = self.hex4()?;
                        if !(0xdc00..0xe000).contains(&lo) {
                            return self.err("a low surrogate after a high one");
                        }
                        0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00)
                    } else {
                        hi
                    };
                    char::from_u32(cp).unwrap_or('\u{fffd}')
                }
                _ => {
                    self.i -= 1;
                    return self.err("an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
                }
            };
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
        String::from_utf8(out).or_else(|_| self.err("UTF-8 text in a string"))
    }
}

fn parse(body: &[u8]) -> Result<J, String> {
    let mut r = Reader { b: body, i: 0 };
    let v = r.value(0)?;
    r.ws();
    if r.i != body.len() {
        return r.err("the end of the body after the top-level object");
    }
    Ok(v)
}

/// `resourceSpans` and `resource_spans` are one key.
fn same_key(k: &str, name: &str) -> bool {
    let mut a = k.bytes().filter(|&c| c != b'_');
    let mut b = name.bytes().filter(|&c| c != b'_');
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (Some(x), Some(y)) if x.eq_ignore_ascii_case(&y) => {}
            _ => return false,
        }
    }
}

type R<T> = Result<T, String>;

/// Prefixes an error with the field it happened in.
fn at<T>(field: &str, r: R<T>) -> R<T> {
    r.map_err(
        |e| if e.starts_with('[') || e.starts_with('.') { format!("{field}{e}") } else { format!("{field}: {e}") },
    )
}

fn kind(j: &J) -> &'static str {
    match j {
        J::Null => "null",
        J::Bool(_) => "a boolean",
        J::Num(_) => "a number",
        J::Str(_) => "a string",
        J::Arr(_) => "an array",
        J::Obj(_) => "an object",
    }
}

fn obj(j: &J) -> R<&[(String, J)]> {
    match j {
        J::Obj(m) => Ok(m),
        _ => Err(format!("expected an object, found {}", kind(j))),
    }
}

/// Each member of object `j` whose key is one of the fields of `T`, handed to `f`.
fn members<'a>(j: &'a J, mut f: impl FnMut(&str, &'a J) -> R<()>) -> R<()> {
    for (k, v) in obj(j)? {
        if matches!(v, J::Null) {
            continue; // a null member is an absent field
        }
        f(k, v)?;
    }
    Ok(())
}

fn list<T>(field: &str, j: &J, f: impl Fn(&J) -> R<T>) -> R<Vec<T>> {
    match j {
        J::Arr(items) => {
            items.iter().enumerate().map(|(i, v)| at(&format!(".{field}[{i}]"), f(v))).collect::<R<Vec<T>>>()
        }
        _ => Err(format!(".{field}: expected an array, found {}", kind(j))),
    }
}

fn string(j: &J) -> R<String> {
    match j {
        J::Str(s) => Ok(s.clone()),
        _ => Err(format!("expected a string, found {}", kind(j))),
    }
}

fn uint(j: &J) -> R<u64> {
    let s = match j {
        J::Str(s) | J::Num(s) => s.as_str(),
        _ => return Err(format!("expected an unsigned integer (a number or a decimal string), found {}", kind(j))),
    };
    s.parse::<u64>().map_err(|_| format!("expected an unsigned 64-bit integer, found {s:?}"))
}

fn int(j: &J) -> R<i64> {
    let s = match j {
        J::Str(s) | J::Num(s) => s.as_str(),
        _ => return Err(format!("expected an integer (a number or a decimal string), found {}", kind(j))),
    };
    s.parse::<i64>().map_err(|_| format!("expected a signed 64-bit integer, found {s:?}"))
}

fn double(j: &J) -> R<f64> {
    match j {
        J::Num(s) => s.parse::<f64>().map_err(|_| format!("expected a number, found {s:?}")),
        J::Str(s) => match s.as_str() {
            "NaN" => Ok(f64::NAN),
            "Infinity" => Ok(f64::INFINITY),
            "-Infinity" => Ok(f64::NEG_INFINITY),
            _ => s.parse::<f64>().map_err(|_| format!("expected a number, found {s:?}")),
        },
        _ => Err(format!("expected a number, found {}", kind(j))),
    }
}

fn boolean(j: &J) -> R<bool> {
    match j {
        J::Bool(b) => Ok(*b),
        _ => Err(format!("expected true or false, found {}", kind(j))),
    }
}

/// An enum: its number, or one of its names (`names[i]` is value i).
fn enumeration(j: &J, names: &[&str]) -> R<i32> {
    match j {
        J::Num(s) => s.parse::<i32>().map_err(|_| format!("expected an enum number, found {s:?}")),
        J::Str(s) => names
            .iter()
            .position(|n| n == s)
            .map(|i| i as i32)
            .ok_or_else(|| format!("expected an enum number or one of {}, found {s:?}", names.join(", "))),
        _ => Err(format!("expected an enum number, found {}", kind(j))),
    }
}

/// A trace or span id: hex (OTLP's JSON exception to base64), `len` bytes, or empty.
fn hex_id(j: &J, len: usize) -> R<Vec<u8>> {
    let s = string(j)?;
    if s.is_empty() {
        return Ok(Vec::new());
    }
    let bad = || format!("expected {} hex digits, found {s:?}", len * 2);
    if s.len() != len * 2 {
        return Err(bad());
    }
    (0..len).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())).collect()
}

fn any_value(j: &J) -> R<AnyValue> {
    use any_value::Value as V;
    let mut out = None;
    members(j, |k, v| {
        let got = if same_key(k, "stringValue") {
            V::StringValue(at(".stringValue", string(v))?)
        } else if same_key(k, "boolValue") {
            V::BoolValue(at(".boolValue", boolean(v))?)
        } else if same_key(k, "intValue") {
            V::IntValue(at(".intValue", int(v))?)
        } else if same_key(k, "doubleValue") {
            V::DoubleValue(at(".doubleValue", double(v))?)
        } else if same_key(k, "arrayValue") {
            let mut values = Vec::new();
            at(
                ".arrayValue",
                members(v, |k, v| {
                    if same_key(k, "values") {
                        values = list("values", v, any_value)?;
                    }
                    Ok(())
                }),
            )?;
            V::ArrayValue(ArrayValue { values })
        } else if same_key(k, "kvlistValue") {
            let mut values = Vec::new();
            at(
                ".kvlistValue",
                members(v, |k, v| {
                    if same_key(k, "values") {
                        values = list("values", v, key_value)?;
                    }
                    Ok(())
                }),
            )?;
            V::KvlistValue(KeyValueList { values })
        } else if same_key(k, "bytesValue") {
            let s = at(".bytesValue", string(v))?;
            let b = base64::engine::general_purpose::STANDARD
                .decode(s.as_bytes())
                .map_err(|_| format!(".bytesValue: expected base64, found {s:?}"))?;
            V::BytesValue(b)
        } else {
            return Ok(());
        };
        out = Some(got);
        Ok(())
    })?;
    Ok(AnyValue { value: out })
}

fn key_value(j: &J) -> R<KeyValue> {
    let mut kv = KeyValue::default();
    members(j, |k, v| {
        if same_key(k, "key") {
            kv.key = at(".key", string(v))?;
        } else if same_key(k, "value") {
            kv.value = Some(at(".value", any_value(v))?);
        }
        Ok(())
    })?;
    Ok(kv)
}

fn attributes(v: &J) -> R<Vec<KeyValue>> {
    list("attributes", v, key_value)
}

fn resource(j: &J) -> R<Resource> {
    let mut r = Resource::default();
    members(j, |k, v| {
        if same_key(k, "attributes") {
            r.attributes = attributes(v)?;
        }
        Ok(())
    })?;
    Ok(r)
}

fn scope(j: &J) -> R<InstrumentationScope> {
    let mut s = InstrumentationScope::default();
    members(j, |k, v| {
        if same_key(k, "name") {
            s.name = at(".name", string(v))?;
        } else if same_key(k, "version") {
            s.version = at(".version", string(v))?;
        } else if same_key(k, "attributes") {
            s.attributes = attributes(v)?;
        }
        Ok(())
    })?;
    Ok(s)
}

const SPAN_KINDS: &[&str] = &[
    "SPAN_KIND_UNSPECIFIED",
    "SPAN_KIND_INTERNAL",
    "SPAN_KIND_SERVER",
    "SPAN_KIND_CLIENT",
    "SPAN_KIND_PRODUCER",
    "SPAN_KIND_CONSUMER",
];
const STATUS_CODES: &[&str] = &["STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"];

fn span(j: &J) -> R<Span> {
    let mut s = Span::default();
    members(j, |k, v| {
        if same_key(k, "traceId") {
            s.trace_id = at(".traceId", hex_id(v, 16))?;
        } else if same_key(k, "spanId") {
            s.span_id = at(".spanId", hex_id(v, 8))?;
        } else if same_key(k, "parentSpanId") {
            s.parent_span_id = at(".parentSpanId", hex_id(v, 8))?;
        } else if same_key(k, "traceState") {
            s.trace_state = at(".traceState", string(v))?;
        } else if same_key(k, "name") {
            s.name = at(".name", string(v))?;
        } else if same_key(k, "kind") {
            s.kind = at(".kind", enumeration(v, SPAN_KINDS))?;
        } else if same_key(k, "startTimeUnixNano") {
            s.start_time_unix_nano = at(".startTimeUnixNano", uint(v))?;
        } else if same_key(k, "endTimeUnixNano") {
            s.end_time_unix_nano = at(".endTimeUnixNano", uint(v))?;
        } else if same_key(k, "attributes") {
            s.attributes = attributes(v)?;
        } else if same_key(k, "events") {
            s.events = list("events", v, span_event)?;
        } else if same_key(k, "links") {
            s.links = list("links", v, span_link)?;
        } else if same_key(k, "status") {
            let mut st = Status::default();
            at(
                ".status",
                members(v, |k, v| {
                    if same_key(k, "code") {
                        st.code = at(".code", enumeration(v, STATUS_CODES))?;
                    } else if same_key(k, "message") {
                        st.message = at(".message", string(v))?;
                    }
                    Ok(())
                }),
            )?;
            s.status = Some(st);
        }
        Ok(())
    })?;
    Ok(s)
}

fn span_event(j: &J) -> R<SpanEvent> {
    let mut e = SpanEvent::default();
    members(j, |k, v| {
        if same_key(k, "timeUnixNano") {
            e.time_unix_nano = at(".timeUnixNano", uint(v))?;
        } else if same_key(k, "name") {
            e.name = at(".name", string(v))?;
        } else if same_key(k, "attributes") {
            e.attributes = attributes(v)?;
        }
        Ok(())
    })?;
    Ok(e)
}

fn span_link(j: &J) -> R<SpanLink> {
    let mut l = SpanLink::default();
    members(j, |k, v| {
        if same_key(k, "traceId") {
            l.trace_id = at(".traceId", hex_id(v, 16))?;
        } else if same_key(k, "spanId") {
            l.span_id = at(".spanId", hex_id(v, 8))?;
        } else if same_key(k, "attributes") {
            l.attributes = attributes(v)?;
        }
        Ok(())
    })?;
    Ok(l)
}

/// A request's resources, each with its scopes, each with its items: the one nesting of the
/// three requests (`resourceSpans[].scopeSpans[].spans[]`, the same for logs and metrics).
type Nested<I> = Vec<(Option<Resource>, Vec<(Option<InstrumentationScope>, Vec<I>)>)>;

fn nested<I>(body: &[u8], keys: [&str; 3], item: fn(&J) -> R<I>) -> R<Nested<I>> {
    let [top, scopes, items] = keys;
    let j = parse(body)?;
    let mut out = Vec::new();
    members(&j, |k, v| {
        if same_key(k, top) {
            out = list(top, v, |r| {
                let (mut resource, mut scoped) = (None, Vec::new());
                members(r, |k, v| {
                    if same_key(k, "resource") {
                        resource = Some(at(".resource", self::resource(v))?);
                    } else if same_key(k, scopes) {
                        scoped = list(scopes, v, |sc| {
                            let (mut scope, mut got) = (None, Vec::new());
                            members(sc, |k, v| {
                                if same_key(k, "scope") {
                                    scope = Some(at(".scope", self::scope(v))?);
                                } else if same_key(k, items) {
                                    got = list(items, v, item)?;
                                }
                                Ok(())
                            })?;
                            Ok((scope, got))
                        })?;
                    }
                    Ok(())
                })?;
                Ok((resource, scoped))
            })?;
        }
        Ok(())
    })
    .map_err(|e| e.trim_start_matches('.').to_string())?;
    Ok(out)
}

/// A JSON `ExportTraceServiceRequest`.
pub fn trace_request(body: &[u8]) -> R<ExportTraceServiceRequest> {
    let n = nested(body, ["resourceSpans", "scopeSpans", "spans"], span)?;
    let resource_spans = n
        .into_iter()
        .map(|(resource, s)| ResourceSpans {
            resource,
            scope_spans: s.into_iter().map(|(scope, spans)| ScopeSpans { scope, spans }).collect(),
        })
        .collect();
    Ok(ExportTraceServiceRequest { resource_spans })
}

fn log_record(j: &J) -> R<LogRecord> {
    let mut l = LogRecord::default();
    members(j, |k, v| {
        if same_key(k, "timeUnixNano") {
            l.time_unix_nano = at(".timeUnixNano", uint(v))?;
        } else if same_key(k, "observedTimeUnixNano") {
            l.observed_time_unix_nano = at(".observedTimeUnixNano", uint(v))?;
        } else if same_key(k, "severityNumber") {
            l.severity_number = at(".severityNumber", enumeration(v, &[]))?;
        } else if same_key(k, "severityText") {
            l.severity_text = at(".severityText", string(v))?;
        } else if same_key(k, "body") {
            l.body = Some(at(".body", any_value(v))?);
        } else if same_key(k, "attributes") {
            l.attributes = attributes(v)?;
        } else if same_key(k, "traceId") {
            l.trace_id = at(".traceId", hex_id(v, 16))?;
        } else if same_key(k, "spanId") {
            l.span_id = at(".spanId", hex_id(v, 8))?;
        } else if same_key(k, "eventName") {
            l.event_name = at(".eventName", string(v))?;
        }
        Ok(())
    })?;
    Ok(l)
}

/// A JSON `ExportLogsServiceRequest`.
pub fn logs_request(body: &[u8]) -> R<ExportLogsServiceRequest> {
    let n = nested(body, ["resourceLogs", "scopeLogs", "logRecords"], log_record)?;
    let resource_logs = n
        .into_iter()
        .map(|(resource, s)| ResourceLogs {
            resource,
            scope_logs: s.into_iter().map(|(scope, log_records)| ScopeLogs { scope, log_records }).collect(),
        })
        .collect();
    Ok(ExportLogsServiceRequest { resource_logs })
}

fn number_point(j: &J) -> R<NumberDataPoint> {
    use number_data_point::Value as NV;
    let mut p = NumberDataPoint::default();
    members(j, |k, v| {
        if same_key(k, "attributes") {
            p.attributes = attributes(v)?;
        } else if same_key(k, "startTimeUnixNano") {
            p.start_time_unix_nano = at(".startTimeUnixNano", uint(v))?;
        } else if same_key(k, "timeUnixNano") {
            p.time_unix_nano = at(".timeUnixNano", uint(v))?;
        } else if same_key(k, "asDouble") {
            p.value = Some(NV::AsDouble(at(".asDouble", double(v))?));
        } else if same_key(k, "asInt") {
            p.value = Some(NV::AsInt(at(".asInt", int(v))?));
        }
        Ok(())
    })?;
    Ok(p)
}

fn doubles(field: &str, v: &J) -> R<Vec<f64>> {
    list(field, v, double)
}

fn uints(field: &str, v: &J) -> R<Vec<u64>> {
    list(field, v, uint)
}

fn hist_point(j: &J) -> R<HistogramDataPoint> {
    let mut p = HistogramDataPoint::default();
    members(j, |k, v| {
        if same_key(k, "attributes") {
            p.attributes = attributes(v)?;
        } else if same_key(k, "startTimeUnixNano") {
            p.start_time_unix_nano = at(".startTimeUnixNano", uint(v))?;
        } else if same_key(k, "timeUnixNano") {
            p.time_unix_nano = at(".timeUnixNano", uint(v))?;
        } else if same_key(k, "count") {
            p.count = at(".count", uint(v))?;
        } else if same_key(k, "sum") {
            p.sum = Some(at(".sum", double(v))?);
        } else if same_key(k, "min") {
            p.min = Some(at(".min", double(v))?);
        } else if same_key(k, "max") {
            p.max = Some(at(".max", double(v))?);
        } else if same_key(k, "bucketCounts") {
            p.bucket_counts = uints("bucketCounts", v)?;
        } else if same_key(k, "explicitBounds") {
            p.explicit_bounds = doubles("explicitBounds", v)?;
        }
        Ok(())
    })?;
    Ok(p)
}

fn buckets(j: &J) -> R<Buckets> {
    let mut b = Buckets::default();
    members(j, |k, v| {
        if same_key(k, "offset") {
            b.offset = at(".offset", int(v))?.clamp(i32::MIN as i64, i32::MAX as i64) as i32;
        } else if same_key(k, "bucketCounts") {
            b.bucket_counts = uints("bucketCounts", v)?;
        }
        Ok(())
    })?;
    Ok(b)
}

fn exp_point(j: &J) -> R<ExponentialHistogramDataPoint> {
    let mut p = ExponentialHistogramDataPoint::default();
    members(j, |k, v| {
        if same_key(k, "attributes") {
            p.attributes = attributes(v)?;
        } else if same_key(k, "startTimeUnixNano") {
            p.start_time_unix_nano = at(".startTimeUnixNano", uint(v))?;
        } else if same_key(k, "timeUnixNano") {
            p.time_unix_nano = at(".timeUnixNano", uint(v))?;
        } else if same_key(k, "count") {
            p.count = at(".count", uint(v))?;
        } else if same_key(k, "sum") {
            p.sum = Some(at(".sum", double(v))?);
        } else if same_key(k, "min") {
            p.min = Some(at(".min", double(v))?);
        } else if same_key(k, "max") {
            p.max = Some(at(".max", double(v))?);
        } else if same_key(k, "scale") {
            p.scale = at(".scale", int(v))?.clamp(i32::MIN as i64, i32::MAX as i64) as i32;
        } else if same_key(k, "zeroCount") {
            p.zero_count = at(".zeroCount", uint(v))?;
        } else if same_key(k, "positive") {
            p.positive = Some(at(".positive", buckets(v))?);
        } else if same_key(k, "negative") {
            p.negative = Some(at(".negative", buckets(v))?);
        }
        Ok(())
    })?;
    Ok(p)
}

fn summary_point(j: &J) -> R<SummaryDataPoint> {
    let mut p = SummaryDataPoint::default();
    members(j, |k, v| {
        if same_key(k, "attributes") {
            p.attributes = attributes(v)?;
        } else if same_key(k, "startTimeUnixNano") {
            p.start_time_unix_nano = at(".startTimeUnixNano", uint(v))?;
        } else if same_key(k, "timeUnixNano") {
            p.time_unix_nano = at(".timeUnixNano", uint(v))?;
        } else if same_key(k, "count") {
            p.count = at(".count", uint(v))?;
        } else if same_key(k, "sum") {
            p.sum = at(".sum", double(v))?;
        } else if same_key(k, "quantileValues") {
            p.quantile_values = list("quantileValues", v, |q| {
                let mut out = ValueAtQuantile::default();
                members(q, |k, v| {
                    if same_key(k, "quantile") {
                        out.quantile = at(".quantile", double(v))?;
                    } else if same_key(k, "value") {
                        out.value = at(".value", double(v))?;
                    }
                    Ok(())
                })?;
                Ok(out)
            })?;
        }
        Ok(())
    })?;
    Ok(p)
}

const TEMPORALITIES: &[&str] =
    &["AGGREGATION_TEMPORALITY_UNSPECIFIED", "AGGREGATION_TEMPORALITY_DELTA", "AGGREGATION_TEMPORALITY_CUMULATIVE"];

/// The `dataPoints` and `aggregationTemporality` of a metric's data member.
fn points<T>(v: &J, what: &str, point: fn(&J) -> R<T>) -> R<(Vec<T>, i32, bool)> {
    let mut out = (Vec::new(), 0, false);
    at(
        what,
        members(v, |k, v| {
            if same_key(k, "dataPoints") {
                out.0 = list("dataPoints", v, point)?;
            } else if same_key(k, "aggregationTemporality") {
                out.1 = at(".aggregationTemporality", enumeration(v, TEMPORALITIES))?;
            } else if same_key(k, "isMonotonic") {
                out.2 = at(".isMonotonic", boolean(v))?;
            }
            Ok(())
        }),
    )?;
    Ok(out)
}

fn metric(j: &J) -> R<Metric> {
    use metric::Data;
    let mut m = Metric::default();
    members(j, |k, v| {
        if same_key(k, "name") {
            m.name = at(".name", string(v))?;
        } else if same_key(k, "description") {
            m.description = at(".description", string(v))?;
        } else if same_key(k, "unit") {
            m.unit = at(".unit", string(v))?;
        } else if same_key(k, "gauge") {
            m.data = Some(Data::Gauge(Gauge { data_points: points(v, ".gauge", number_point)?.0 }));
        } else if same_key(k, "sum") {
            let (data_points, aggregation_temporality, is_monotonic) = points(v, ".sum", number_point)?;
            m.data = Some(Data::Sum(Sum { data_points, aggregation_temporality, is_monotonic }));
        } else if same_key(k, "histogram") {
            let (data_points, aggregation_temporality, _) = points(v, ".histogram", hist_point)?;
            m.data = Some(Data::Histogram(Histogram { data_points, aggregation_temporality }));
        } else if same_key(k, "exponentialHistogram") {
            let (data_points, aggregation_temporality, _) = points(v, ".exponentialHistogram", exp_point)?;
            m.data = Some(Data::ExponentialHistogram(ExponentialHistogram { data_points, aggregation_temporality }));
        } else if same_key(k, "summary") {
            m.data = Some(Data::Summary(Summary { data_points: points(v, ".summary", summary_point)?.0 }));
        }
        Ok(())
    })?;
    Ok(m)
}

/// A JSON `ExportMetricsServiceRequest`.
pub fn metrics_request(body: &[u8]) -> R<ExportMetricsServiceRequest> {
    let n = nested(body, ["resourceMetrics", "scopeMetrics", "metrics"], metric)?;
    let resource_metrics = n
        .into_iter()
        .map(|(resource, s)| ResourceMetrics {
            resource,
            scope_metrics: s.into_iter().map(|(scope, metrics)| ScopeMetrics { scope, metrics }).collect(),
        })
        .collect();
    Ok(ExportMetricsServiceRequest { resource_metrics })
}
