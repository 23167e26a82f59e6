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
//! in names is one backslash). Lines are separated by `\n` outside a quoted string field
//! value, which may hold newlines as in InfluxDB ([`line_end`]; a `\r` before it is
//! dropped); blank lines and lines starting with `#` are skipped. Decoding 108,000 TSBS cpu
//! lines (37 MB, no strings) took 37.7-40.1 ms before the string check and 39.8-41.9 after
//! (best of 7, four interleaved pairs, load 17).
//!
//! Decisions:
//! - A line is checked completely (syntax, UTF-8, types, limits) before anything is
//!   recorded, so a rejected line never half-changes a schema or the producer table.
//! - The producer of a line is first looked up by the raw bytes of its tag section:
//!   agents repeat the same tag text on every line, so the common case hashes one slice
//!   and never parses, unescapes or sorts the 13 identity tags of a QoS row.
//! - Memory is bounded by the caller's limits: line length, producers per trace,
//!   columns per measurement, measurements per format, errors reported per call.
//!
//! Over 600 lines: the decoder is one hot loop with its fast path (repeated tag text) and
//! its typed column builders; splitting them would put the loop's state behind function
//! boundaries it is measured without. Tests are in lineproto/tests.rs.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, Mutex};

use arrow_array::builder::{BooleanBuilder, Float64Builder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
// Keys here are short names and tag sections hashed once per line: FxHash (see Cargo.toml);
// SipHash cost more than the rest of a line's lookup. (Not DoS-resistant: the tables are
// bounded by the producer limit, and writers are on loopback or hold a token.)
use rustc_hash::FxHashMap as FxMap;

use crate::mutex::lock;
use crate::store::seqnum::SeqCounters;

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

/// `base`, or `base_2`, `base_3` ... (cut to [`MAX_IDENT`]): the first that is not `taken`.
fn free_name(base: &str, taken: impl Fn(&str) -> bool) -> String {
    if !taken(base) {
        return base.to_string();
    }
    (2u32..)
        .map(|n| {
            let suffix = format!("_{n}");
            // (ident's output is ASCII: any byte is a char boundary)
            let mut name = base[..base.len().min(MAX_IDENT - suffix.len())].to_string();
            name.push_str(&suffix);
            name
        })
        .find(|name| !taken(name))
        .expect("a free name")
}

/// The field columns of one measurement, in stored order.
///
/// A field key that is not a column name of its own ([`ident`] changes it: `a.b`, `ts`, or a
/// name another key's column took first) gets a column of its own all the same, named by
/// [`MeasurementSchema::free_name`], and is remembered in `keys`: two keys never share a
/// column. (Mapping `a.b` and `a_b` to one column dropped one of the two values of a line
/// that had both, after the write was acknowledged.)
#[derive(Clone, Debug, Default)]
pub struct MeasurementSchema {
    /// (column name, type), in the order they were added.
    pub columns: Vec<(String, FieldType)>,
    /// Per column, its field key where that is not its name.
    pub keys: Vec<Option<String>>,
    index: FxMap<String, usize>,
    /// Field key → column, for the keys in `keys`.
    keyed: FxMap<String, usize>,
    /// Batch schemas of the current columns, without and with `seq`; dropped when a column is
    /// added. One `Arc` per layout lets the Python side convert it once, not per batch.
    arrow: [Option<SchemaRef>; 2],
}

impl MeasurementSchema {
    fn add(&mut self, name: String, t: FieldType) -> usize {
        let i = self.columns.len();
        self.index.insert(name.clone(), i);
        self.columns.push((name, t));
        self.keys.push(None);
        self.arrow = [None, None];
        i
    }

    /// Records that column `i` holds field `key` (where the key is not its name).
    fn set_key(&mut self, i: usize, key: &str) {
        if self.columns[i].0 != key {
            self.keys[i] = Some(key.to_string());
            self.keyed.insert(key.to_string(), i);
        }
    }

    /// The column of field key `key` (unescaped), if the measurement has one.
    pub fn column_of(&self, key: &str) -> Option<usize> {
        if let Some(&i) = self.keyed.get(key) {
            return Some(i);
        }
        self.index.get(key).copied().filter(|&i| self.keys[i].is_none())
    }

    /// The name a new column for field `key` takes: [`ident`] of the key, with `_2`, `_3` ...
    /// while that name is taken in any case (SQL names ignore case: `Usage` beside `usage` read
    /// back as `usage`'s values).
    pub fn free_name(&self, key: &str) -> String {
        free_name(&ident(key, true), |n| self.index.keys().any(|k| k.eq_ignore_ascii_case(n)))
    }

    /// A new column for field `key`, of type `t`.
    fn add_key(&mut self, key: &str, t: FieldType) -> usize {
        let i = self.add(self.free_name(key), t);
        self.set_key(i, key);
        i
    }

    /// The schema of a decoded batch: `ts` (int64), `producer` (int32), with `seq` (int64)
    /// when numbered (the three non-null), then every column, nullable.
    pub fn batch_schema(&mut self, with_seq: bool) -> SchemaRef {
        let columns = &self.columns;
        self.arrow[usize::from(with_seq)]
            .get_or_insert_with(|| {
                let mut fields = Vec::with_capacity(3 + columns.len());
                fields.push(Field::new("ts", DataType::Int64, false));
                fields.push(Field::new("producer", DataType::Int32, false));
                if with_seq {
                    fields.push(Field::new("seq", DataType::Int64, false));
                }
                fields.extend(columns.iter().map(|(name, t)| Field::new(name, t.arrow(), true)));
                Arc::new(Schema::new(fields))
            })
            .clone()
    }
}

/// The measurements (event types) of one format and their field columns.
///
/// As with field keys, a measurement name that is not an event type name of its own
/// (`cpu.load`, or `cpu_load` after `cpu.load` took that name) gets a type of its own, named
/// by [`Schemas::free_name`] and remembered in `keys`.
#[derive(Debug, Default)]
pub struct Schemas {
    map: FxMap<String, MeasurementSchema>,
    /// Event type → its measurement name, where that is not the type's name.
    keys: FxMap<String, String>,
    /// Measurement name → event type, for the names in `keys`.
    keyed: FxMap<String, String>,
}

impl Schemas {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares (or widens) a measurement with columns known to the store, in stored
    /// order, and the field key of each column whose key is not its name (`keys`: column →
    /// key). A column already known with another type is an error naming it.
    pub fn declare(
        &mut self,
        measurement: &str,
        columns: &[(String, FieldType)],
        keys: &FxMap<String, String>,
    ) -> Result<(), String> {
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
                    let i = m.add(name.clone(), *t);
                    if let Some(key) = keys.get(name) {
                        m.set_key(i, key);
                    }
                }
            }
        }
        Ok(())
    }

    /// [`Schemas::declare`] of an event type whose measurement name is `key`.
    pub fn declare_keyed(
        &mut self,
        measurement: &str,
        key: &str,
        columns: &[(String, FieldType)],
        keys: &FxMap<String, String>,
    ) -> Result<(), String> {
        self.set_key(measurement, key);
        self.declare(measurement, columns, keys)
    }

    fn set_key(&mut self, measurement: &str, key: &str) {
        if measurement != key {
            self.keys.insert(measurement.to_string(), key.to_string());
            self.keyed.insert(key.to_string(), measurement.to_string());
        }
    }

    /// The event type of measurement name `key` (unescaped), if known.
    pub fn type_of(&self, key: &str) -> Option<&str> {
        if let Some(t) = self.keyed.get(key) {
            return Some(t);
        }
        self.map.get_key_value(key).filter(|_| !self.keys.contains_key(key)).map(|(k, _)| k.as_str())
    }

    /// The measurement name of event type `measurement`, where it is not the type's name.
    pub fn key_of(&self, measurement: &str) -> Option<&str> {
        self.keys.get(measurement).map(String::as_str)
    }

    /// The name a new event type for measurement `key` takes: [`ident`] of it (with a `_`
    /// after `events`, in any case: the name of a trace's view of every type), with `_2`, `_3`
    /// ... while taken in any case (SQL names ignore case: `CPU` beside `cpu` was refused).
    pub fn free_name(&self, key: &str) -> String {
        let mut base = ident(key, false).into_owned();
        if base.eq_ignore_ascii_case("events") {
            base.push('_');
        }
        free_name(&base, |n| self.map.keys().any(|k| k.eq_ignore_ascii_case(n)))
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
    canonical: FxMap<Vec<u8>, i32>,
    raw: FxMap<Box<[u8]>, i32>,
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

    /// Keeps `id` (used by someone else, e.g. an Arrow writer) from being given to a tag set.
    pub fn reserve(&mut self, id: i32) {
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

/// What one [`decode`] produced.
#[derive(Debug, Default)]
pub struct Decoded {
    /// One batch per measurement that got rows: `ts` (int64 ns), `producer` (int32), then
    /// the measurement's columns in stored order (as many as it had at the end of the call).
    pub batches: Vec<(String, RecordBatch)>,
    /// Lines, rows and errors of the body.
    pub body: BodyStats,
    /// Highest producer id used by any row (-1 when none).
    pub max_producer: i32,
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
    name: String,
    ts: Vec<i64>,
    producer: Vec<i32>,
    cols: Vec<Col>,
    /// Row stamp per column: set to the row number when the current line filled it.
    filled: Vec<u64>,
    /// Raw field keys of the last line recorded here and their columns: the next line
    /// with the same keys in the same order skips unescaping, naming and hashing.
    layout: Vec<(Box<[u8]>, usize)>,
}

impl Builder {
    fn new(name: String) -> Self {
        Self {
            name,
            ts: Vec::with_capacity(256),
            producer: Vec::with_capacity(256),
            cols: Vec::new(),
            filled: Vec::new(),
            layout: Vec::new(),
        }
    }

    /// Adds columns up to `upto` (exclusive) from `schema`, null for the rows so far.
    fn grow(&mut self, schema: &MeasurementSchema, upto: usize) {
        while self.cols.len() < upto {
            let rows = self.ts.len();
            let mut c = Col::new(schema.columns[self.cols.len()].1, rows.max(256));
            for _ in 0..rows {
                c.push_null();
            }
            self.cols.push(c);
            self.filled.push(0);
        }
    }
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

impl Col {
    fn ftype(&self) -> FieldType {
        match self {
            Col::F(_) => FieldType::Float,
            Col::I(_) => FieldType::Int,
            Col::S(_) => FieldType::Str,
            Col::B(_) => FieldType::Bool,
        }
    }
}

/// State of one decode call: the batches being built and the last line's shortcuts.
struct State<'a> {
    builders: Vec<Builder>,
    by_name: FxMap<String, usize>,
    /// Raw measurement bytes of the last recorded line and its builder.
    last_meas: &'a [u8],
    last_builder: usize,
    /// Raw tag section of the last recorded line and its producer.
    last_tags: &'a [u8],
    last_pid: i32,
    /// Parsed fields of the current line: (raw key, value).
    fields: Vec<(&'a str, Value<'a>)>,
    tags: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    cols: Vec<usize>,
}

/// One body of a [`decode_many`] call and how to read it.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// Complete lines (a last line without `\n` is decoded too).
    pub body: &'a [u8],
    /// Number of the body's first line (a TCP stream continues its count across chunks).
    pub first_line: u64,
    /// Unit of the body's timestamps.
    pub precision: Precision,
    /// Timestamp (ns) of lines without one.
    pub default_ts: i64,
}

/// What decoding one body of a [`decode_many`] call found.
#[derive(Debug, Default)]
pub struct BodyStats {
    /// The first `max_errors` rejected lines of this body.
    pub errors: Vec<LineError>,
    /// All rejected lines of this body.
    pub error_count: u64,
    /// Lines seen (blank and comment lines excluded).
    pub lines: u64,
    /// Rows decoded (lines accepted).
    pub rows: u64,
    /// Line number of the body's last line.
    pub last_line: u64,
    /// Rows per measurement, by index into [`DecodedMany::batches`].
    pub rows_by_batch: Vec<(usize, u64)>,
}

/// What one [`decode_many`] call produced: one batch per measurement for all the bodies.
#[derive(Debug, Default)]
pub struct DecodedMany {
    /// `ts` (int64 ns), `producer` (int32), then the measurement's columns in stored order.
    pub batches: Vec<(String, RecordBatch)>,
    /// Per input body, in input order.
    pub bodies: Vec<BodyStats>,
    /// Highest producer id used by any row (-1 when none).
    pub max_producer: i32,
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
    schemas: &Mutex<Schemas>,
    producers: &Mutex<Producers>,
    limits: &Limits,
) -> Decoded {
    let input = Input { body, first_line, precision, default_ts };
    let mut many = decode_many(&[input], schemas, producers, None, limits);
    Decoded { body: many.bodies.pop().unwrap_or_default(), batches: many.batches, max_producer: many.max_producer }
}

/// Decodes several bodies into one batch per measurement (rows in input order), keeping
/// each body's line numbers, errors and row counts apart. With `seq`, each batch comes
/// numbered per producer from those counters (a `seq` column after `producer`; a producer's
/// rows in the order of their lines, across measurements): the stored layout, appended as
/// it is.
///
/// Many small requests decoded together cost one set of column builders and one batch
/// per measurement instead of one per body (a 100-row QoS body spent ~70 of its ~250 us
/// on that). The shared tables are locked only for a line's slow path (a new measurement,
/// field layout or tag set) and for looking up a tag section the previous line did not
/// have: decodes of many connections run in parallel on the common fast path.
pub fn decode_many<'a>(
    inputs: &[Input<'a>],
    schemas: &Mutex<Schemas>,
    producers: &Mutex<Producers>,
    seq: Option<&Mutex<SeqCounters>>,
    limits: &Limits,
) -> DecodedMany {
    let mut out = DecodedMany { max_producer: -1, ..DecodedMany::default() };
    let empty: &'a [u8] = &[];
    let mut st = State {
        builders: Vec::new(),
        by_name: FxMap::default(),
        last_meas: empty,
        last_builder: usize::MAX,
        last_tags: empty,
        last_pid: -1,
        fields: Vec::with_capacity(64),
        tags: Vec::with_capacity(16),
        cols: Vec::with_capacity(64),
    };
    // Builder of each accepted row in line order: rows are numbered per producer in the
    // order their lines came, across measurements.
    let mut line_order: Vec<u32> = Vec::new();
    for input in inputs {
        let mut stats = BodyStats::default();
        let mut line_no = input.first_line;
        let mut rest = input.body;
        let mut first = true;
        while !rest.is_empty() || first {
            first = false;
            let (end, _, quoted) = line_scan(rest);
            let (line, next) = (&rest[..end], &rest[(end + 1).min(rest.len())..]);
            rest = next;
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let this_line = line_no;
            // (a string field's own newlines count: errors name the line an editor shows)
            if quoted {
                line_no += memchr::memchr_iter(b'\n', line).count() as u64;
            }
            line_no += 1;
            let trimmed = trim_start(line);
            if trimmed.is_empty() || trimmed[0] == b'#' {
                continue;
            }
            stats.lines += 1;
            let res = if line.len() > limits.max_line {
                Err(format!("line is {} bytes, longer than the limit of {}", line.len(), limits.max_line))
            } else {
                decode_line(trimmed, input.precision, input.default_ts, schemas, producers, limits, &mut st)
            };
            match res {
                Ok(pid) => {
                    stats.rows += 1;
                    out.max_producer = out.max_producer.max(pid);
                    let bi = st.last_builder;
                    if seq.is_some() {
                        line_order.push(bi as u32);
                    }
                    match stats.rows_by_batch.iter_mut().find(|(i, _)| *i == bi) {
                        Some((_, n)) => *n += 1,
                        None => stats.rows_by_batch.push((bi, 1)),
                    }
                }
                Err(message) => {
                    stats.error_count += 1;
                    if stats.errors.len() < limits.max_errors {
                        stats.errors.push(LineError { line: this_line, message });
                    }
                }
            }
        }
        stats.last_line = line_no.saturating_sub(1).max(input.first_line);
        out.bodies.push(stats);
    }
    // Builders that got no row (every line of theirs failed later checks) make no batch:
    // renumber the per-body counts to the batches that exist.
    let mut index = vec![usize::MAX; st.builders.len()];
    let mut numbers: Vec<Vec<i64>> = Vec::new();
    if let Some(c) = seq {
        let mut c = lock(c);
        if st.builders.len() == 1 {
            numbers.push(c.assign(&st.builders[0].producer));
        } else {
            numbers = st.builders.iter().map(|b| Vec::with_capacity(b.ts.len())).collect();
            for &bi in &line_order {
                let n = &mut numbers[bi as usize];
                n.push(c.take(st.builders[bi as usize].producer[n.len()]));
            }
        }
    }
    let mut numbers = numbers.into_iter();
    let mut schemas = lock(schemas);
    for (bi, mut b) in st.builders.into_iter().enumerate() {
        let numbered = numbers.next();
        if b.ts.is_empty() {
            continue;
        }
        let schema = schemas.map.get_mut(&b.name).expect("schema of a decoded measurement");
        b.grow(schema, schema.columns.len());
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(3 + b.cols.len());
        let with_seq = numbered.is_some();
        arrays.push(Arc::new(Int64Array::from(std::mem::take(&mut b.ts))));
        arrays.push(Arc::new(Int32Array::from(std::mem::take(&mut b.producer))));
        if let Some(n) = numbered {
            arrays.push(Arc::new(Int64Array::from(n)));
        }
        arrays.extend(b.cols.iter_mut().map(Col::finish));
        let batch = RecordBatch::try_new(schema.batch_schema(with_seq), arrays).expect("columns of equal length");
        index[bi] = out.batches.len();
        out.batches.push((b.name, batch));
    }
    for body in &mut out.bodies {
        body.rows_by_batch.retain_mut(|(i, _)| {
            *i = index[*i];
            *i != usize::MAX
        });
    }
    out
}

/// Parses and checks one line; records it only when every check passed.
fn decode_line<'a>(
    line: &'a [u8],
    precision: Precision,
    default_ts: i64,
    schemas: &Mutex<Schemas>,
    producers: &Mutex<Producers>,
    limits: &Limits,
    st: &mut State<'a>,
) -> Result<i32, String> {
    let text = std::str::from_utf8(line).map_err(|e| format!("invalid UTF-8 at byte {}", e.valid_up_to() + 1))?;
    let b = text.as_bytes();
    // Key section: measurement[,tags] up to the first unescaped space.
    let key_end = scan_for(b, 0, b' ').ok_or("missing fields (no space after the measurement and tags)")?;
    let meas_end = scan_for(&b[..key_end], 0, b',').unwrap_or(key_end);
    if meas_end == 0 {
        return Err("missing measurement name".into());
    }
    let tag_raw = if meas_end < key_end { &b[meas_end + 1..key_end] } else { &b[key_end..key_end] };
    if meas_end < key_end && tag_raw.is_empty() {
        return Err("empty tag set after ','".into());
    }
    let mut i = key_end;
    while i < b.len() && b[i] == b' ' {
        i += 1;
    }
    if i >= b.len() {
        return Err("missing fields".into());
    }

    // Fast path: the measurement and field keys (in order) of the last line recorded into
    // this measurement, values of the columns' types, and a tag section already known. The
    // fields are read against that layout (no key search, no naming, typed parsers); any
    // difference sends the line to the general path below, which decides.
    if st.last_builder != usize::MAX && st.last_meas == &b[..meas_end] {
        let bi = st.last_builder;
        if let Some(fields_end) = fast_fields(text, i, &st.builders[bi], &mut st.fields) {
            let ts = timestamp(text, fields_end, precision, default_ts)?;
            let pid =
                if st.last_tags == tag_raw { Some(st.last_pid) } else { lock(producers).raw.get(tag_raw).copied() };
            if let Some(pid) = pid {
                let bl = &mut st.builders[bi];
                let full = bl.layout.len() == bl.cols.len();
                let row = bl.ts.len() as u64 + 1;
                for ((_, ci), (_, v)) in bl.layout.iter().zip(&st.fields) {
                    bl.cols[*ci].push(v);
                    bl.filled[*ci] = row;
                }
                if !full {
                    for (c, f) in bl.cols.iter_mut().zip(bl.filled.iter()) {
                        if *f != row {
                            c.push_null();
                        }
                    }
                }
                bl.ts.push(ts);
                bl.producer.push(pid);
                st.last_tags = tag_raw;
                st.last_pid = pid;
                return Ok(pid);
            }
        }
    }

    // General path: fields, then the optional timestamp.
    st.fields.clear();
    loop {
        let kend = scan(b, i, |c| c == b'=' || c == b' ' || c == b',')
            .filter(|&e| b[e] == b'=')
            .ok_or_else(|| format!("field at byte {} has no '='", i + 1))?;
        if kend == i {
            return Err(format!("empty field key at byte {}", i + 1));
        }
        let (value, vend) = parse_value(text, kend + 1)?;
        st.fields.push((&text[i..kend], value));
        i = vend;
        if i >= b.len() || b[i] == b' ' {
            break;
        }
        i += 1; // b[i] was ','
        if i >= b.len() {
            return Err("trailing ',' after the last field".into());
        }
    }
    let ts = timestamp(text, i, precision, default_ts)?;

    // Slow path: name the measurement and fields, check types against the schema.
    let mut schemas = lock(schemas);
    let mut producers = lock(producers);
    let meas_raw = unescape(&text[..meas_end], b",  \\");
    let meas: Cow<'_, str> = match schemas.type_of(&meas_raw) {
        Some(t) => Cow::Owned(t.to_string()),
        None if meas_raw.is_empty() => Cow::Borrowed(""),
        None => Cow::Owned(schemas.free_name(&meas_raw)),
    };
    if meas.is_empty() {
        return Err("missing measurement name".into());
    }
    let known = schemas.map.get(meas.as_ref());
    if known.is_none() && schemas.map.len() >= limits.max_measurements {
        return Err(format!("too many measurements (limit {})", limits.max_measurements));
    }
    let mut new_cols = 0usize;
    let mut keys: Vec<Cow<'_, str>> = Vec::with_capacity(st.fields.len());
    for (k, v) in st.fields.iter() {
        let key = unescape(k, b",= \\");
        if key.is_empty() {
            return Err("empty field key".into());
        }
        match known.and_then(|m| m.column_of(&key).map(|ci| (m, ci))) {
            Some((m, ci)) => {
                let (name, t) = &m.columns[ci];
                if *t != v.ftype() {
                    return Err(conflict(k, v.ftype(), name, &meas, *t));
                }
            }
            None => {
                if let Some(j) = keys.iter().position(|n| *n == key) {
                    if st.fields[j].1.ftype() != v.ftype() {
                        return Err(format!("field {:?} given twice with different types", key.as_ref()));
                    }
                } else {
                    new_cols += 1;
                }
            }
        }
        keys.push(key);
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
            parse_tags(raw_text, &mut st.tags)?;
            let mut sorted: Vec<(&str, &str)> = st.tags.iter().map(|(k, v)| (k.as_ref(), v.as_ref())).collect();
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
            producers.raw.insert(tag_raw.to_vec().into_boxed_slice(), id);
            id
        }
    };

    // Accepted: record.
    if !schemas.map.contains_key(meas.as_ref()) {
        schemas.set_key(&meas, &meas_raw);
    }
    let schema = schemas.map.entry(meas.to_string()).or_default();
    let bi = match st.by_name.get(meas.as_ref()) {
        Some(&bi) => bi,
        None => {
            st.builders.push(Builder::new(meas.to_string()));
            st.by_name.insert(meas.to_string(), st.builders.len() - 1);
            st.builders.len() - 1
        }
    };
    st.cols.clear();
    for ((_, v), key) in st.fields.iter().zip(&keys) {
        let ci = match schema.column_of(key) {
            Some(ci) => ci,
            None => schema.add_key(key, v.ftype()),
        };
        st.cols.push(ci);
    }
    let bl = &mut st.builders[bi];
    let upto = st.cols.iter().copied().max().map_or(0, |m| m + 1);
    bl.grow(schema, upto);
    let row = bl.ts.len() as u64 + 1; // stamps start at 1 (0 = never filled)
    let mut repeated = false;
    // Last to first: a repeated key's last value stands, as InfluxDB keeps it (`v=1,v=2`
    // stores 2; each value's type was checked against the column above).
    for ((_, v), &ci) in st.fields.iter().zip(&st.cols).rev() {
        if bl.filled[ci] == row {
            repeated = true;
            continue;
        }
        bl.filled[ci] = row;
        bl.cols[ci].push(v);
    }
    for (c, f) in bl.cols.iter_mut().zip(bl.filled.iter()) {
        if *f != row {
            c.push_null();
        }
    }
    bl.ts.push(ts);
    bl.producer.push(pid);
    // Shortcuts for the next line (not after a line repeating a key: the fast path
    // would then push a column twice).
    bl.layout.clear();
    if !repeated {
        bl.layout.extend(st.fields.iter().zip(&st.cols).map(|((k, _), &ci)| (Box::from(k.as_bytes()), ci)));
    }
    st.last_meas = &b[..meas_end];
    st.last_builder = bi;
    st.last_tags = tag_raw;
    st.last_pid = pid;
    Ok(pid)
}

/// Reads the fields of a line starting at `i` against the layout of builder `bl` (its last
/// recorded line's raw keys, in order) into `out`; returns where the fields end (a space or
/// the end of the line), or None when the line differs in any way: another key, order or
/// count, a value not of its column's type, or a number the typed parsers do not take.
fn fast_fields<'a>(text: &'a str, mut i: usize, bl: &Builder, out: &mut Vec<(&'a str, Value<'a>)>) -> Option<usize> {
    let b = text.as_bytes();
    out.clear();
    let last = bl.layout.len().checked_sub(1)?;
    for (n, (raw, ci)) in bl.layout.iter().enumerate() {
        let kend = i + raw.len();
        if kend >= b.len() || b[kend] != b'=' || b[i..kend] != **raw {
            return None;
        }
        let (v, vend) = match bl.cols[*ci] {
            Col::F(_) => float_at(b, kend + 1).map(|(x, e)| (Value::Float(x), e))?,
            Col::I(_) => int_at(b, kend + 1).map(|(x, e)| (Value::Int(x), e))?,
            Col::S(_) | Col::B(_) => match parse_value(text, kend + 1) {
                Ok((v, e)) if v.ftype() == bl.cols[*ci].ftype() => (v, e),
                _ => return None,
            },
        };
        out.push((&text[i..kend], v));
        if n == last {
            return (vend == b.len() || b[vend] == b' ').then_some(vend);
        }
        if vend >= b.len() || b[vend] != b',' {
            return None;
        }
        i = vend + 1;
    }
    None
}

/// A float field value `[+-]digits[.digits]` with at most 15 significant digits at `s`, ending
/// at a ',' or ' ' or the end: the value and where it ends. Correctly rounded without the
/// general parser: the mantissa and the power of ten are both exact doubles, so one division
/// rounds once (Clinger's fast path). None for anything else.
#[inline]
fn float_at(b: &[u8], s: usize) -> Option<(f64, usize)> {
    let mut i = s;
    let neg = match b.get(i)? {
        b'-' => {
            i += 1;
            true
        }
        b'+' => {
            i += 1;
            false
        }
        _ => false,
    };
    let (mut m, mut digits, mut frac, mut dot) = (0u64, 0u32, 0usize, false);
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_digit() {
            m = m.wrapping_mul(10).wrapping_add(u64::from(c - b'0'));
            digits += 1;
            frac += usize::from(dot);
        } else if c == b'.' && !dot {
            dot = true;
        } else {
            break;
        }
        i += 1;
    }
    if digits == 0 || digits > 15 || (i < b.len() && b[i] != b',' && b[i] != b' ') {
        return None;
    }
    let x = m as f64 / POW10[frac];
    Some((if neg { -x } else { x }, i))
}

/// An integer field value `[-]digits` + `i` (at most 18 digits) at `s`, ending at a ',' or
/// ' ' or the end: the value and where it ends.
#[inline]
fn int_at(b: &[u8], s: usize) -> Option<(i64, usize)> {
    let neg = b.get(s)? == &b'-';
    let (v, i) = digits_at(b, s + usize::from(neg))?;
    if i >= b.len() || b[i] != b'i' || (i + 1 < b.len() && b[i + 1] != b',' && b[i + 1] != b' ') {
        return None;
    }
    Some((if neg { -v } else { v }, i + 1))
}

/// 1 to 18 decimal digits at `from` (they fit an i64): the value and the index after them.
#[inline]
fn digits_at(b: &[u8], from: usize) -> Option<(i64, usize)> {
    let mut v = 0i64;
    let mut i = from;
    while i < b.len() && b[i].is_ascii_digit() {
        if i - from == 18 {
            return None;
        }
        v = v * 10 + i64::from(b[i] - b'0');
        i += 1;
    }
    (i > from).then_some((v, i))
}

/// The line's timestamp after the fields (which end at `i`), scaled to ns; `default_ts`
/// when there is none.
fn timestamp(text: &str, mut i: usize, precision: Precision, default_ts: i64) -> Result<i64, String> {
    let b = text.as_bytes();
    while i < b.len() && b[i] == b' ' {
        i += 1;
    }
    if i >= b.len() {
        return Ok(default_ts);
    }
    let end = memchr(b' ', &b[i..]).map_or(b.len(), |p| i + p);
    if b[end..].iter().any(|&c| c != b' ') {
        return Err(format!("unexpected text after the timestamp at byte {}", end + 1));
    }
    let neg = b[i] == b'-';
    let raw: i64 = match digits_at(b, i + usize::from(neg)) {
        Some((v, e)) if e == end => {
            if neg {
                -v
            } else {
                v
            }
        }
        _ => {
            text[i..end].parse().map_err(|_| format!("invalid timestamp {:?} (expected an integer)", &text[i..end]))?
        }
    };
    raw.checked_mul(precision.factor())
        .ok_or_else(|| format!("timestamp {raw} out of range for precision {precision:?} (int64 nanoseconds)"))
}

fn conflict(key: &str, got: FieldType, column: &str, meas: &str, stored: FieldType) -> String {
    format!("field {key:?} is {} but column {column:?} of {meas:?} is {} (type conflict)", got.name(), stored.name())
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
            _ => match fast_float(tok.as_bytes()) {
                Some(x) => Value::Float(x),
                None if is_float(tok) => Value::Float(tok.parse().map_err(|_| bad())?),
                None => return Err(bad()),
            },
        },
    };
    Ok((v, end))
}

/// Exact powers of ten a double holds.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20,
    1e21, 1e22,
];

/// A whole token (no ',' or ' ' in it) that [`float_at`] takes, as its value.
#[inline]
fn fast_float(b: &[u8]) -> Option<f64> {
    float_at(b, 0).filter(|&(_, end)| end == b.len()).map(|(x, _)| x)
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

/// Index of the first unescaped `stop` at or after `from` ([`scan`] for one byte, with SIMD
/// search: the key section of a QoS line is ~400 bytes of tags).
fn scan_for(b: &[u8], from: usize, stop: u8) -> Option<usize> {
    let mut i = from;
    while i < b.len() {
        let p = i + memchr::memchr2(stop, b'\\', &b[i..])?;
        if b[p] == stop {
            return Some(p);
        }
        i = p + 2;
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

/// The length of the line that starts `buf`: up to its first `\n` outside a quoted string
/// field value, or all of `buf`. A string field may hold newlines, as InfluxDB 1.x reads it
/// (`scanLine` in models/points.go: a `"` after a field's `=` opens and closes a string, a
/// backslash skips the byte after it). A quote left open to the end of `buf` is not a string
/// that runs on: the line ends at its first `\n` and is refused alone, so one unmatched quote
/// never swallows the lines after it (InfluxDB refuses the rest of the body with it). Lines
/// without a `"` take one memchr2.
pub fn line_end(buf: &[u8]) -> usize {
    line_scan(buf).0
}

/// [`line_end`], whether a string of the line is still open at the end of `buf`, and whether
/// the line holds a `"` (the slow path was taken).
fn line_scan(buf: &[u8]) -> (usize, bool, bool) {
    // (one pass for a line without `"`: the first of either byte)
    match memchr::memchr2(b'\n', b'"', buf) {
        None => return (buf.len(), false, false),
        Some(i) if buf[i] == b'\n' => return (i, false, false),
        Some(_) => {}
    }
    let nl = memchr(b'\n', buf).unwrap_or(buf.len());
    let (mut i, mut quoted, mut fields, mut equals, mut commas) = (0, false, false, 0u32, 0u32);
    while i < buf.len() {
        let c = buf[i];
        if c == b'\\' && i + 2 < buf.len() {
            i += 2;
            continue;
        }
        if c == b' ' {
            fields = true;
        }
        if fields {
            if !quoted && (c == b'=' || c == b',') {
                if c == b'=' {
                    equals += 1;
                } else {
                    commas += 1;
                }
                i += 1;
                continue;
            }
            if c == b'"' && equals > commas {
                quoted = !quoted;
                i += 1;
                continue;
            }
        }
        if c == b'\n' && !quoted {
            return (i, false, true);
        }
        i += 1;
    }
    if quoted {
        (nl, true, true)
    } else {
        (buf.len(), false, true)
    }
}

/// The length of `buf`'s prefix of whole lines, each ended by its `\n` (for a stream cut
/// anywhere: a file's chunks, a TCP connection's reads). A line whose string is still open at
/// the end of `buf` is not whole while it is at most `max_line` bytes: the next bytes may close
/// it; a longer one ends at its first newline, as [`line_end`] ends it. One memrchr and one
/// memchr when `buf` holds no `"`.
pub fn whole_lines(buf: &[u8], max_line: usize) -> usize {
    let Some(last) = memchr::memrchr(b'\n', buf) else {
        return 0;
    };
    if memchr(b'"', &buf[..last]).is_none() {
        return last + 1;
    }
    let mut at = 0;
    while at <= last {
        let (n, open, _) = line_scan(&buf[at..]);
        if open && buf.len() - at <= max_line {
            return at;
        }
        if at + n >= buf.len() {
            break;
        }
        at += n + 1;
    }
    at.min(last + 1)
}

/// Position of the first `needle` in `hay` (SIMD).
#[inline]
fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    memchr::memchr(needle, hay)
}

#[cfg(test)]
mod tests;
