//! InfluxDB line protocol → Arrow record batches.
//!
//! Owns the decoding of line-protocol text (an HTTP body or a chunk of complete lines
//! from a TCP stream) into one Arrow record batch per measurement, following the
//! QoS thesis's winning "schema 2" (seed 003): identity once, measurements apart.
//!
//! - measurement → event type (its name made a SQL identifier, see [`ident`]);
//! - tag set → producer id, interned once per trace in [`Producers`] (the canonical,
//!   key-sorted tag set is the identity; new ones are listed for the caller to register);
//! - fields → typed columns (float64, int64, string, bool) of the measurement's schema in
//!   [`Schemas`]; a new field adds a column (rows before it are null), a field whose
//!   value type differs from the stored column rejects that line only;
//! - timestamp (optional, in the request's precision) → `ts` in ns, the caller's receive
//!   time when absent; one out of the int64-ns range rejects the line.
//!
//! Every rejected line is reported with its line number and why; the rest of the body
//! is decoded. Syntax and escapes follow the InfluxDB v2 reference: measurement escapes
//! `\,` and `\ `; tag keys, tag values and field keys `\,` `\=` `\ `; string field
//! values `\"` and `\\`; a backslash before any other byte is kept literally (and `\\`
//! in names is one backslash). Lines are separated by `\n` (a `\r` before it is
//! dropped); blank lines and lines starting with `#` are skipped.
//!
//! Decisions:
//! - A line is checked completely (syntax, UTF-8, types, limits) before anything is
//!   recorded, so a rejected line never half-changes a schema or the producer table.
//! - The producer of a line is first looked up by the raw bytes of its tag section:
//!   agents repeat the same tag text on every line, so the common case hashes one slice
//!   and never parses, unescapes or sorts the 13 identity tags of a QoS row.
//! - Memory is bounded by the caller's limits: line length, producers per trace,
//!   columns per measurement, measurements per format, errors reported per call.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, Float64Builder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};

/// The stored type of a field column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldType {
    /// 64-bit float (a number without suffix).
    Float,
    /// 64-bit signed integer (`i` suffix; `u` values that fit are stored here too).
    Int,
    /// UTF-8 string (double-quoted).
    Str,
    /// Boolean (`t`, `true`, `F`, `FALSE`, ...).
    Bool,
}

impl FieldType {
    /// The tracehouse parameter type name.
    pub fn name(self) -> &'static str {
        match self {
            FieldType::Float => "float64",
            FieldType::Int => "int64",
            FieldType::Str => "string",
            FieldType::Bool => "bool",
        }
    }

    /// Parses a tracehouse parameter type name.
    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "float64" => FieldType::Float,
            "int64" => FieldType::Int,
            "string" => FieldType::Str,
            "bool" => FieldType::Bool,
            _ => return None,
        })
    }

    fn arrow(self) -> DataType {
        match self {
            FieldType::Float => DataType::Float64,
            FieldType::Int => DataType::Int64,
            FieldType::Str => DataType::Utf8,
            FieldType::Bool => DataType::Boolean,
        }
    }
}

/// Timestamp precision of a write request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// Nanoseconds (the default).
    Ns,
    /// Microseconds.
    Us,
    /// Milliseconds.
    Ms,
    /// Seconds.
    S,
}

impl Precision {
    /// Parses `ns|us|ms|s` (and InfluxDB 1.x's `n`, `u`).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "" | "ns" | "n" => Precision::Ns,
            "us" | "u" | "µ" => Precision::Us,
            "ms" => Precision::Ms,
            "s" => Precision::S,
            _ => return None,
        })
    }

    fn factor(self) -> i64 {
        match self {
            Precision::Ns => 1,
            Precision::Us => 1_000,
            Precision::Ms => 1_000_000,
            Precision::S => 1_000_000_000,
        }
    }
}

/// Bounds that keep a decoder's memory finite whatever it is sent.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Longest accepted line in bytes; longer lines are rejected.
    pub max_line: usize,
    /// Most distinct tag sets (producers) per trace.
    pub max_producers: usize,
    /// Most field columns per measurement.
    pub max_columns: usize,
    /// Most measurements (event types) per format.
    pub max_measurements: usize,
    /// Errors described per call (the rest are only counted).
    pub max_errors: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_line: 1 << 20,
            max_producers: 1_000_000,
            max_columns: 1_000,
            max_measurements: 10_000,
            max_errors: 100,
        }
    }
}

/// Common column names a field may not take (they are suffixed with `_`).
const RESERVED: [&str; 5] = ["ts", "producer", "seq", "dur", "type"];
/// Longest identifier the store accepts.
const MAX_IDENT: usize = 63;

/// `raw` as a SQL identifier the store accepts: bytes other than ASCII letters, digits
/// and `_` become `_`, a leading digit gets a `_` prefix, a reserved common column name
/// a `_` suffix, and the result is cut to 63 bytes. Empty stays empty (an error).
pub fn ident(raw: &str, reserved: bool) -> Cow<'_, str> {
    let ok = !raw.is_empty()
        && raw.len() <= MAX_IDENT
        && !raw.as_bytes()[0].is_ascii_digit()
        && raw.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !(reserved && RESERVED.contains(&raw));
    if ok || raw.is_empty() {
        return Cow::Borrowed(raw);
    }
    let mut s = String::with_capacity(raw.len() + 1);
    if raw.as_bytes()[0].is_ascii_digit() {
        s.push('_');
    }
    for c in raw.chars() {
        s.push(if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' });
    }
    if reserved && RESERVED.contains(&s.as_str()) {
        s.push('_');
    }
    s.truncate(MAX_IDENT);
    Cow::Owned(s)
}

/// The field columns of one measurement, in stored order.
#[derive(Clone, Debug, Default)]
pub struct MeasurementSchema {
    /// (column name, type), in the order they were added.
    pub columns: Vec<(String, FieldType)>,
    index: HashMap<String, usize>,
}

impl MeasurementSchema {
    fn add(&mut self, name: String, t: FieldType) -> usize {
        let i = self.columns.len();
        self.index.insert(name.clone(), i);
        self.columns.push((name, t));
        i
    }
}

/// The measurements (event types) of one format and their field columns.
#[derive(Debug, Default)]
pub struct Schemas {
    map: HashMap<String, MeasurementSchema>,
}

impl Schemas {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares (or widens) a measurement with columns known to the store, in stored
    /// order. A column already known with another type is an error naming it.
    pub fn declare(&mut self, measurement: &str, columns: &[(String, FieldType)]) -> Result<(), String> {
        let m = self.map.entry(measurement.to_string()).or_default();
        for (name, t) in columns {
            match m.index.get(name) {
                Some(&i) if m.columns[i].1 != *t => {
                    return Err(format!(
                        "column {name:?} of {measurement:?} is {} here, {} in the store",
                        m.columns[i].1.name(),
                        t.name()
                    ))
                }
                Some(_) => {}
                None => {
                    m.add(name.clone(), *t);
                }
            }
        }
        Ok(())
    }

    /// The columns of `measurement`, if known.
    pub fn get(&self, measurement: &str) -> Option<&MeasurementSchema> {
        self.map.get(measurement)
    }

    /// Every measurement and its columns.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &MeasurementSchema)> {
        self.map.iter()
    }
}

/// A producer interned by a decode that the caller has not registered yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewProducer {
    /// Its id in the trace.
    pub id: i32,
    /// The canonical tag set, `k=v,k=v` sorted by key (unescaped).
    pub name: String,
    /// The tags, sorted by key.
    pub tags: Vec<(String, String)>,
}

/// Tag sets of one trace → producer ids.
#[derive(Debug, Default)]
pub struct Producers {
    canonical: HashMap<Vec<u8>, i32>,
    raw: HashMap<Vec<u8>, i32>,
    next: i32,
    fresh: Vec<NewProducer>,
}

impl Producers {
    /// An empty table whose first new producer gets `next_id`.
    pub fn new(next_id: i32) -> Self {
        Self { next: next_id, ..Self::default() }
    }

    /// Declares a producer the store already has (its tags in any order).
    pub fn declare(&mut self, id: i32, tags: &[(String, String)]) {
        let mut sorted: Vec<(&str, &str)> = tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        sorted.sort_unstable();
        self.canonical.insert(canonical_key(&sorted), id);
        self.next = self.next.max(id.saturating_add(1));
    }

    /// Producers interned since the last call, in id order (the caller registers them).
    pub fn take_new(&mut self) -> Vec<NewProducer> {
        std::mem::take(&mut self.fresh)
    }

    /// Distinct tag sets known.
    pub fn len(&self) -> usize {
        self.canonical.len()
    }

    /// True when no tag set is known.
    pub fn is_empty(&self) -> bool {
        self.canonical.is_empty()
    }

    /// The id the next new tag set will get.
    pub fn next_id(&self) -> i32 {
        self.next
    }
}

fn canonical_key(sorted: &[(&str, &str)]) -> Vec<u8> {
    let mut key = Vec::with_capacity(sorted.iter().map(|(k, v)| k.len() + v.len() + 8).sum());
    for (k, v) in sorted {
        key.extend_from_slice(&(k.len() as u32).to_le_bytes());
        key.extend_from_slice(k.as_bytes());
        key.extend_from_slice(&(v.len() as u32).to_le_bytes());
        key.extend_from_slice(v.as_bytes());
    }
    key
}

/// One rejected line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineError {
    /// 1-based line number within the stream or body.
    pub line: u64,
    /// Why it was rejected.
    pub message: String,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// What one decode produced.
#[derive(Debug, Default)]
pub struct Decoded {
    /// One batch per measurement that got rows: `ts` (int64 ns), `producer` (int32), then
    /// the measurement's columns in stored order (as many as it had at the end of the call).
    pub batches: Vec<(String, RecordBatch)>,
    /// The first `max_errors` rejected lines.
    pub errors: Vec<LineError>,
    /// All rejected lines.
    pub error_count: u64,
    /// Lines seen (blank and comment lines excluded).
    pub lines: u64,
    /// Rows decoded (lines accepted).
    pub rows: u64,
    /// Highest producer id used by any row (-1 when none).
    pub max_producer: i32,
    /// Line number of the last line of the input.
    pub last_line: u64,
}

enum Col {
    F(Float64Builder),
    I(Int64Builder),
    S(StringBuilder),
    B(BooleanBuilder),
}

impl Col {
    fn new(t: FieldType, cap: usize) -> Self {
        match t {
            FieldType::Float => Col::F(Float64Builder::with_capacity(cap)),
            FieldType::Int => Col::I(Int64Builder::with_capacity(cap)),
            FieldType::Str => Col::S(StringBuilder::with_capacity(cap, cap * 8)),
            FieldType::Bool => Col::B(BooleanBuilder::with_capacity(cap)),
        }
    }

    fn push_null(&mut self) {
        match self {
            Col::F(b) => b.append_null(),
            Col::I(b) => b.append_null(),
            Col::S(b) => b.append_null(),
            Col::B(b) => b.append_null(),
        }
    }

    fn push(&mut self, v: &Value<'_>) {
        match (self, v) {
            (Col::F(b), Value::Float(x)) => b.append_value(*x),
            (Col::I(b), Value::Int(x)) => b.append_value(*x),
            (Col::S(b), Value::Str(x)) => b.append_value(x),
            (Col::B(b), Value::Bool(x)) => b.append_value(*x),
            (c, _) => c.push_null(), // unreachable: types are checked before a row is added
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Col::F(b) => Arc::new(b.finish()),
            Col::I(b) => Arc::new(b.finish()),
            Col::S(b) => Arc::new(b.finish()),
            Col::B(b) => Arc::new(b.finish()),
        }
    }
}

struct Builder {
    ts: Vec<i64>,
    producer: Vec<i32>,
    cols: Vec<Col>,
    /// Row stamp per column: set to the row number when the current line filled it.
    filled: Vec<u64>,
}

#[derive(Debug)]
enum Value<'a> {
    Float(f64),
    Int(i64),
    Str(Cow<'a, str>),
    Bool(bool),
}

impl Value<'_> {
    fn ftype(&self) -> FieldType {
        match self {
            Value::Float(_) => FieldType::Float,
            Value::Int(_) => FieldType::Int,
            Value::Str(_) => FieldType::Str,
            Value::Bool(_) => FieldType::Bool,
        }
    }
}

/// Decodes `body` (complete lines; a last line without `\n` is decoded too).
///
/// `first_line` numbers the first line (a TCP stream continues its count across
/// chunks); `default_ts` (ns) stamps lines without a timestamp.
pub fn decode(
    body: &[u8],
    first_line: u64,
    precision: Precision,
    default_ts: i64,
    schemas: &mut Schemas,
    producers: &mut Producers,
    limits: &Limits,
) -> Decoded {
    let mut out = Decoded { max_producer: -1, ..Decoded::default() };
    let mut builders: HashMap<String, Builder> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut line_no = first_line;
    // Scratch vectors reused by every line (their contents borrow from `body`).
    let mut fields: Vec<(Cow<'_, str>, Value<'_>)> = Vec::with_capacity(64);
    let mut tags: Vec<(Cow<'_, str>, Cow<'_, str>)> = Vec::with_capacity(16);
    let mut rest = body;
    let mut first = true;
    while !rest.is_empty() || first {
        first = false;
        let (line, next) = match memchr(b'\n', rest) {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, &rest[rest.len()..]),
        };
        rest = next;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let this_line = line_no;
        line_no += 1;
        let trimmed = trim_start(line);
        if trimmed.is_empty() || trimmed[0] == b'#' {
            continue;
        }
        out.lines += 1;
        let res = if line.len() > limits.max_line {
            Err(format!("line is {} bytes, longer than the limit of {}", line.len(), limits.max_line))
        } else {
            decode_line(
                trimmed,
                precision,
                default_ts,
                schemas,
                producers,
                limits,
                &mut builders,
                &mut order,
                &mut fields,
                &mut tags,
            )
        };
        match res {
            Ok(pid) => {
                out.rows += 1;
                out.max_producer = out.max_producer.max(pid);
            }
            Err(message) => {
                out.error_count += 1;
                if out.errors.len() < limits.max_errors {
                    out.errors.push(LineError { line: this_line, message });
                }
            }
        }
    }
    out.last_line = line_no.saturating_sub(1).max(first_line);
    for name in order {
        let mut b = builders.remove(&name).expect("builder of a listed measurement");
        let schema_cols = &schemas.get(&name).expect("schema of a decoded measurement").columns;
        let rows = b.ts.len();
        while b.cols.len() < schema_cols.len() {
            let mut c = Col::new(schema_cols[b.cols.len()].1, rows);
            for _ in 0..rows {
                c.push_null();
            }
            b.cols.push(c);
        }
        let mut fields = Vec::with_capacity(2 + b.cols.len());
        fields.push(Field::new("ts", DataType::Int64, false));
        fields.push(Field::new("producer", DataType::Int32, false));
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(2 + b.cols.len());
        arrays.push(Arc::new(Int64Array::from(std::mem::take(&mut b.ts))));
        arrays.push(Arc::new(Int32Array::from(std::mem::take(&mut b.producer))));
        for (c, (cname, t)) in b.cols.iter_mut().zip(schema_cols) {
            fields.push(Field::new(cname, t.arrow(), true));
            arrays.push(c.finish());
        }
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).expect("columns of equal length");
        out.batches.push((name, batch));
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn decode_line<'a>(
    line: &'a [u8],
    precision: Precision,
    default_ts: i64,
    schemas: &mut Schemas,
    producers: &mut Producers,
    limits: &Limits,
    builders: &mut HashMap<String, Builder>,
    order: &mut Vec<String>,
    fields: &mut Vec<(Cow<'a, str>, Value<'a>)>,
    tags: &mut Vec<(Cow<'a, str>, Cow<'a, str>)>,
) -> Result<i32, String> {
    fields.clear();
    tags.clear();
    let text = std::str::from_utf8(line).map_err(|e| format!("invalid UTF-8 at byte {}", e.valid_up_to() + 1))?;
    let b = text.as_bytes();
    // Key section: measurement[,tags] up to the first unescaped space.
    let key_end = scan(b, 0, |c| c == b' ').ok_or("missing fields (no space after the measurement and tags)")?;
    let meas_end = scan(&b[..key_end], 0, |c| c == b',').unwrap_or(key_end);
    if meas_end == 0 {
        return Err("missing measurement name".into());
    }
    let meas_raw = unescape(&text[..meas_end], b",  \\");
    let meas = ident(&meas_raw, false);
    if meas.is_empty() {
        return Err("missing measurement name".into());
    }
    let tag_raw = if meas_end < key_end { &b[meas_end + 1..key_end] } else { &b[key_end..key_end] };
    if meas_end < key_end && tag_raw.is_empty() {
        return Err("empty tag set after ','".into());
    }
    // Fields, then the optional timestamp.
    let mut i = key_end;
    while i < b.len() && b[i] == b' ' {
        i += 1;
    }
    if i >= b.len() {
        return Err("missing fields".into());
    }
    loop {
        let kend = scan(b, i, |c| c == b'=' || c == b' ' || c == b',')
            .filter(|&e| b[e] == b'=')
            .ok_or_else(|| format!("field at byte {} has no '='", i + 1))?;
        if kend == i {
            return Err(format!("empty field key at byte {}", i + 1));
        }
        let key = unescape(&text[i..kend], b",= \\");
        let vstart = kend + 1;
        let (value, vend) = parse_value(text, vstart)?;
        fields.push((key, value));
        i = vend;
        if i >= b.len() || b[i] == b' ' {
            break;
        }
        // b[i] == b','
        i += 1;
        if i >= b.len() {
            return Err("trailing ',' after the last field".into());
        }
    }
    while i < b.len() && b[i] == b' ' {
        i += 1;
    }
    let ts = if i < b.len() {
        let end = b[i..].iter().position(|&c| c == b' ').map_or(b.len(), |p| i + p);
        if b[end..].iter().any(|&c| c != b' ') {
            return Err(format!("unexpected text after the timestamp at byte {}", end + 1));
        }
        let raw: i64 =
            text[i..end].parse().map_err(|_| format!("invalid timestamp {:?} (expected an integer)", &text[i..end]))?;
        raw.checked_mul(precision.factor())
            .ok_or_else(|| format!("timestamp {raw} out of range for precision {precision:?} (int64 nanoseconds)"))?
    } else {
        default_ts
    };

    // Types against the schema, before anything is recorded.
    let known = schemas.map.get(meas.as_ref());
    if known.is_none() && schemas.map.len() >= limits.max_measurements {
        return Err(format!("too many measurements (limit {})", limits.max_measurements));
    }
    let mut new_cols = 0usize;
    let mut names: Vec<Cow<'_, str>> = Vec::with_capacity(fields.len());
    for (k, v) in fields.iter() {
        let name = ident(k, true);
        if name.is_empty() {
            return Err("empty field key".into());
        }
        match known.and_then(|m| m.index.get(name.as_ref())) {
            Some(&ci) => {
                let t = known.expect("known").columns[ci].1;
                if t != v.ftype() {
                    return Err(format!(
                        "field {:?} is {} but column {:?} of {:?} is {} (type conflict)",
                        k.as_ref(),
                        v.ftype().name(),
                        name.as_ref(),
                        meas.as_ref(),
                        t.name()
                    ));
                }
            }
            None => {
                if let Some(j) = names.iter().position(|n| *n == name) {
                    if fields[j].1.ftype() != v.ftype() {
                        return Err(format!("field {:?} given twice with different types", name.as_ref()));
                    }
                } else {
                    new_cols += 1;
                }
            }
        }
        names.push(name);
    }
    let have = known.map_or(0, |m| m.columns.len());
    if new_cols > 0 && have + new_cols > limits.max_columns {
        return Err(format!("measurement {:?} would have more than {} columns", meas.as_ref(), limits.max_columns));
    }

    // Producer (the last check that can fail): the raw tag text first, the canonical
    // tag set on a miss.
    let pid = match producers.raw.get(tag_raw) {
        Some(&id) => id,
        None => {
            let raw_text = &text[meas_end.min(key_end) + usize::from(meas_end < key_end)..key_end];
            parse_tags(raw_text, tags)?;
            let mut sorted: Vec<(&str, &str)> = tags.iter().map(|(k, v)| (k.as_ref(), v.as_ref())).collect();
            sorted.sort_unstable();
            for w in sorted.windows(2) {
                if w[0].0 == w[1].0 {
                    return Err(format!("tag key {:?} given twice", w[0].0));
                }
            }
            let key = canonical_key(&sorted);
            let id = match producers.canonical.get(&key) {
                Some(&id) => id,
                None => {
                    if producers.canonical.len() >= limits.max_producers {
                        return Err(format!("too many distinct tag sets (limit {})", limits.max_producers));
                    }
                    if producers.next == i32::MAX {
                        return Err("producer ids exhausted".into());
                    }
                    let id = producers.next;
                    producers.next += 1;
                    producers.canonical.insert(key, id);
                    let name = sorted.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
                    let tags = sorted.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
                    producers.fresh.push(NewProducer { id, name, tags });
                    id
                }
            };
            if producers.raw.len() >= 2 * limits.max_producers.max(1024) {
                producers.raw.clear(); // a cache: bounded, rebuilt from the canonical table
            }
            producers.raw.insert(tag_raw.to_vec(), id);
            id
        }
    };

    // Accepted: record.
    let schema = schemas.map.entry(meas.to_string()).or_default();
    let builder = match builders.get_mut(meas.as_ref()) {
        Some(b) => b,
        None => {
            order.push(meas.to_string());
            builders.entry(meas.to_string()).or_insert_with(|| Builder {
                ts: Vec::with_capacity(64),
                producer: Vec::with_capacity(64),
                cols: Vec::new(),
                filled: Vec::new(),
            })
        }
    };
    let row = builder.ts.len() as u64 + 1; // stamps start at 1 (0 = never filled)
    for ((_, v), name) in fields.iter().zip(&names) {
        let ci = match schema.index.get(name.as_ref()) {
            Some(&ci) => ci,
            None => schema.add(name.to_string(), v.ftype()),
        };
        while builder.cols.len() <= ci {
            let rows = builder.ts.len();
            let mut c = Col::new(schema.columns[builder.cols.len()].1, rows.max(16));
            for _ in 0..rows {
                c.push_null();
            }
            builder.cols.push(c);
            builder.filled.push(0);
        }
        if builder.filled[ci] == row {
            continue; // a repeated key: the first value stands (its type was checked)
        }
        builder.filled[ci] = row;
        builder.cols[ci].push(v);
    }
    for (c, f) in builder.cols.iter_mut().zip(builder.filled.iter()) {
        if *f != row {
            c.push_null();
        }
    }
    builder.ts.push(ts);
    builder.producer.push(pid);
    Ok(pid)
}

fn parse_tags<'a>(raw: &'a str, tags: &mut Vec<(Cow<'a, str>, Cow<'a, str>)>) -> Result<(), String> {
    tags.clear();
    if raw.is_empty() {
        return Ok(());
    }
    let b = raw.as_bytes();
    let mut i = 0;
    loop {
        let kend = scan(b, i, |c| c == b'=' || c == b',')
            .filter(|&e| b[e] == b'=')
            .ok_or_else(|| format!("tag {:?} has no '='", &raw[i..scan(b, i, |c| c == b',').unwrap_or(b.len())]))?;
        if kend == i {
            return Err("empty tag key".into());
        }
        let vend = scan(b, kend + 1, |c| c == b',').unwrap_or(b.len());
        if vend == kend + 1 {
            return Err(format!("empty value of tag {:?}", &raw[i..kend]));
        }
        if let Some(p) = scan(&b[..vend], kend + 1, |c| c == b'=') {
            return Err(format!("unescaped '=' in the value of tag {:?} at byte {}", &raw[i..kend], p + 1));
        }
        tags.push((unescape(&raw[i..kend], b",= \\"), unescape(&raw[kend + 1..vend], b",= \\")));
        if vend >= b.len() {
            return Ok(());
        }
        i = vend + 1;
        if i >= b.len() {
            return Err("trailing ',' after the last tag".into());
        }
    }
}

/// Parses a field value starting at `start`; returns it and the index just after it.
fn parse_value(text: &str, start: usize) -> Result<(Value<'_>, usize), String> {
    let b = text.as_bytes();
    if start >= b.len() || b[start] == b' ' || b[start] == b',' {
        return Err(format!("missing field value at byte {}", start + 1));
    }
    if b[start] == b'"' {
        let mut i = start + 1;
        let mut escaped = false;
        while i < b.len() {
            match b[i] {
                b'\\' if i + 1 < b.len() => {
                    escaped = true;
                    i += 2;
                    continue;
                }
                b'"' => break,
                _ => i += 1,
            }
        }
        if i >= b.len() {
            return Err(format!("unterminated string value starting at byte {}", start + 1));
        }
        let inner = &text[start + 1..i];
        let s = if escaped { unescape(inner, b"\"\\") } else { Cow::Borrowed(inner) };
        let end = i + 1;
        if end < b.len() && b[end] != b',' && b[end] != b' ' {
            return Err(format!("unexpected {:?} after a string value at byte {}", b[end] as char, end + 1));
        }
        return Ok((Value::Str(s), end));
    }
    let end = b[start..].iter().position(|&c| c == b',' || c == b' ').map_or(b.len(), |p| start + p);
    let tok = &text[start..end];
    let bad = || format!("invalid field value {tok:?} at byte {}", start + 1);
    let v = match tok.as_bytes()[tok.len() - 1] {
        b'i' if tok.len() > 1 && is_int(&tok[..tok.len() - 1]) => {
            Value::Int(tok[..tok.len() - 1].parse().map_err(|_| format!("integer {tok:?} out of int64 range"))?)
        }
        b'u' if tok.len() > 1 && tok.as_bytes()[..tok.len() - 1].iter().all(u8::is_ascii_digit) => {
            let u: u64 = tok[..tok.len() - 1].parse().map_err(|_| format!("unsigned {tok:?} out of uint64 range"))?;
            Value::Int(i64::try_from(u).map_err(|_| format!("unsigned {tok:?} does not fit the int64 column type"))?)
        }
        _ => match tok {
            "t" | "T" | "true" | "True" | "TRUE" => Value::Bool(true),
            "f" | "F" | "false" | "False" | "FALSE" => Value::Bool(false),
            _ if is_float(tok) => Value::Float(tok.parse().map_err(|_| bad())?),
            _ => return Err(bad()),
        },
    };
    Ok((v, end))
}

fn is_int(s: &str) -> bool {
    let d = s.strip_prefix(['-', '+']).unwrap_or(s);
    !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit())
}

/// `[+-]digits[.digits][(e|E)[+-]digits]` (or `.digits`); no NaN, no infinity.
fn is_float(s: &str) -> bool {
    let b = s.strip_prefix(['-', '+']).unwrap_or(s).as_bytes();
    let mut i = 0;
    let int_digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    i += int_digits;
    let mut frac_digits = 0;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        frac_digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        i += frac_digits;
    }
    if int_digits + frac_digits == 0 {
        return false;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let e = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        if e == 0 {
            return false;
        }
        i += e;
    }
    i == b.len()
}

/// Index of the first byte at or after `from` matching `stop` that is not escaped by a
/// backslash (a backslash always takes the byte after it).
fn scan(b: &[u8], from: usize, stop: impl Fn(u8) -> bool) -> Option<usize> {
    let mut i = from;
    while i < b.len() {
        let c = b[i];
        if c == b'\\' {
            i += 2;
            continue;
        }
        if stop(c) {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// `s` with `\X` replaced by `X` for X in `set`; other backslashes are kept.
fn unescape<'a>(s: &'a str, set: &[u8]) -> Cow<'a, str> {
    if !s.as_bytes().contains(&b'\\') {
        return Cow::Borrowed(s);
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() && set.contains(&b[i + 1]) {
            out.push(b[i + 1]);
            i += 2;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    // Only ASCII bytes were removed from valid UTF-8.
    Cow::Owned(String::from_utf8(out).expect("unescaping keeps UTF-8 valid"))
}

fn trim_start(b: &[u8]) -> &[u8] {
    let n = b.iter().take_while(|&&c| c == b' ' || c == b'\t').count();
    &b[n..]
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&c| c == needle)
}

#[cfg(test)]
mod tests;
