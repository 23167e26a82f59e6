//! Chrome Trace Event Format (the JSON that chrome://tracing and Perfetto UI open).
//!
//! Owns the streaming parse of a trace into the `chrome` event types (declared as data
//! in `decl.rs`, which Python reads through `_core.format_declarations()`). Input arrives
//! as byte chunks of any size: the array form `[{...}, ...]` (the closing `]` may be
//! missing, as the format allows for traces cut short) and the object form `{"traceEvents": [...], ...}` with the other top-level
//! members skipped (small ones are kept as trace metadata). Only the unconsumed tail
//! of the input is buffered, so memory does not grow with the file.
//!
//! Phases: `X` and matched `B`/`E` become `slice` spans (`E` pairs with the most recent
//! open `B` of its thread); `b`/`e` (and legacy `S`/`F`) become `async_slice` spans
//! matched by category, id and scope; `s`/`t`/`f` become `flow` links from step to step
//! (matched by category, name and id); `I`/`i` instants, `n`/`T`/`p` async instants,
//! `C` one `counter` row per numeric series, `P` samples, `M` names and sorts the
//! producers (pid → process, tid → thread of its process); anything else goes to
//! `other` with its phase. Halves that never find their partner stay in
//! `slice_begin`/`slice_end`, `async_begin`/`async_end`, or a `flow` row without a
//! destination, and are counted.
//!
//! `args` become typed columns `arg_<key>` of the event's type (`end_arg_<key>` for
//! the args of an `E` or `e`), typed by the first value met (int64, float64, bool,
//! string); values that do not fit their column, nested objects and arrays, nulls,
//! and keys beyond [`Options::max_arg_columns`] are kept as JSON text in `args`
//! (`end_args`), so nothing is lost.
//!
//! This file owns the parser's state and its public face; `document.rs` is the top-level state
//! machine over the tokenizer in `../json.rs` (and reads one event object), `events.rs` makes an
//! event rows (phases, pairs, flows, metadata), `args.rs` types args into columns; `export.rs`
//! writes traces back out as Chrome JSON; tests are in tests.rs.

use arrow_array::RecordBatch;

use super::decl::EventTypeDecl;
use super::json::{self, Cursor, Error as JErr, Str, Value};
use super::parser::{Attr, ProducerRow};
use super::table::{FastMap, PType, Table, DUR};

/// Parser settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// Stop at the first bad record instead of skipping it.
    pub strict: bool,
    /// Rows per event type after which a batch is cut.
    pub batch_rows: usize,
    /// Most `arg_`/`end_arg_` columns per event type; further keys go to `args` text.
    pub max_arg_columns: usize,
    /// Longest event record accepted, in bytes: a longer one is rejected and skipped as
    /// it streams by (never buffered whole, never stored as one event).
    pub max_record: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options { strict: false, batch_rows: 65_536, max_arg_columns: 200, max_record: super::MAX_LINE }
    }
}

pub use super::parser::Problem;

/// The event types (declared in `decl.rs`), in the order of the `T_*` indices below.
pub const TABLES: &[EventTypeDecl] = decl::CHROME.event_types;

const T_SLICE: usize = 0;
const T_SLICE_BEGIN: usize = 1;
const T_SLICE_END: usize = 2;
const T_INSTANT: usize = 3;
const T_COUNTER: usize = 4;
const T_ASYNC: usize = 5;
const T_ASYNC_BEGIN: usize = 6;
const T_ASYNC_END: usize = 7;
const T_ASYNC_INSTANT: usize = 8;
const T_FLOW: usize = 9;
const T_SAMPLE: usize = 10;
const T_OTHER: usize = 11;

/// Largest top-level member (other than the events) kept as trace metadata.
const MAX_META: usize = 64 << 10;
/// Cut a batch once its strings hold this many bytes, whatever its row count.
const MAX_STR_BYTES: usize = 64 << 20;
/// Problems kept with their line (the rest are only counted).
const KEEP_PROBLEMS: usize = 10;

/// One producer (process or thread) met in the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Producer {
    /// tracehouse producer id.
    pub id: i32,
    /// The process of a thread.
    pub parent: Option<i32>,
    /// "process" or "thread".
    pub kind: &'static str,
    /// From `process_name` / `thread_name` metadata, else "process <pid>" / "thread <tid>".
    pub name: Option<String>,
    /// The pid as written (number text or string).
    pub pid: String,
    /// The tid as written (threads only).
    pub tid: Option<String>,
    /// From `process_sort_index` / `thread_sort_index`.
    pub sort_index: Option<i64>,
    /// From `process_labels`.
    pub labels: Option<String>,
}

/// Counts of what was matched and what was left over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Event objects read (valid or not).
    pub records: u64,
    /// `M` events applied to producers.
    pub metadata: u64,
    /// `B` events never closed by an `E` (kept in `slice_begin`), plus `X` without `dur`.
    pub unmatched_begin: u64,
    /// `E` events without an open `B` (kept in `slice_end`).
    pub unmatched_end: u64,
    /// `b` without `e` (kept in `async_begin`).
    pub unmatched_async_begin: u64,
    /// `e` without `b` (kept in `async_end`).
    pub unmatched_async_end: u64,
    /// Flow steps with no next step (a `flow` row with null destination).
    pub unterminated_flows: u64,
    /// `C` args that are not numbers (skipped: a counter series is numeric).
    pub skipped_counter_args: u64,
}

pub use super::parser::NewColumn;

struct Tbl {
    t: Table,
    args: ArgReg,
    end_args: ArgReg,
    /// Column indices of the fixed columns, by name lookup at construction.
    c: FastMap<&'static str, usize>,
    dyn_cols: usize,
}

impl Tbl {
    fn col(&self, n: &'static str) -> usize {
        self.c[n]
    }
}

/// A `B` (or `b`) waiting for its end.
#[derive(Default)]
struct Open {
    ts: i64,
    seq: i64,
    producer: i32,
    tts: Option<i64>,
    name: String,
    cat: String,
    id: String,
    id_local: Option<bool>,
    args: Vec<u8>,
}

struct FlowStep {
    ts: i64,
    producer: i32,
    seq: i64,
    phase: u8,
    name: String,
    cat: String,
    id: String,
}

#[derive(Default)]
struct Ev {
    start: usize,
    name: Option<Value>,
    cat: Option<Value>,
    ph: Option<Value>,
    ts: Option<Value>,
    dur: Option<Value>,
    tts: Option<Value>,
    tdur: Option<Value>,
    pid: Option<Value>,
    tid: Option<Value>,
    id: Option<Value>,
    id2: Option<Value>,
    s: Option<Value>,
    bp: Option<Value>,
    sf: Option<Value>,
    stack: Option<Value>,
    args: Option<Value>,
    arg_list: Vec<(Str, Value)>,
}

impl Ev {
    fn clear(&mut self) {
        let mut list = std::mem::take(&mut self.arg_list);
        list.clear();
        *self = Ev { arg_list: list, ..Ev::default() };
    }
}

/// The streaming Chrome JSON parser: [`ChromeParser::feed`] chunks, take batches,
/// [`ChromeParser::finish`], then read producers, stats and problems.
pub struct ChromeParser {
    opts: Options,
    buf: Vec<u8>,
    /// Byte offset and line of `buf[0]` in the input.
    base_off: u64,
    base_line: u64,
    /// Column (0-based) of `buf[0]` in its line.
    base_col: usize,
    /// Line counting cursor within `buf` (only moves forward).
    lc_pos: usize,
    lc_line: u64,
    state: Top,
    need: usize,
    ev: Ev,
    tables: Vec<Tbl>,
    sink: ArgSink,
    procs: FastMap<Vec<u8>, i32>,
    threads: FastMap<Vec<u8>, i32>,
    producers: Vec<Producer>,
    seqs: Vec<i64>,
    open: Vec<Vec<Open>>,
    spare: Vec<Open>,
    open_async: FastMap<Vec<u8>, Vec<Open>>,
    flows: FastMap<Vec<u8>, FlowStep>,
    key: Vec<u8>,
    tmp_args: Vec<(Str, Value)>,
    /// Counts of matched and unmatched halves.
    pub stats: Stats,
    /// Records rejected.
    pub rejected: u64,
    /// The first rejected records.
    pub problems: Vec<Problem>,
    /// In strict mode, the record that stopped the parse.
    pub fatal: Option<Problem>,
    /// Top-level members other than the events: (key, JSON text) when small enough.
    pub metadata: Vec<(String, String)>,
}

impl ChromeParser {
    /// A parser with no input yet.
    pub fn new(opts: Options) -> Self {
        let cap = opts.batch_rows.min(1 << 16);
        let max_cols = opts.max_arg_columns;
        let tables = TABLES
            .iter()
            .map(|et| {
                let t = Table::new(et.name, et.is_span(), &et.columns(), cap);
                let c = et.params.iter().map(|p| (p.name, t.col(p.name).expect("fixed column"))).collect();
                Tbl {
                    t,
                    args: ArgReg { prefix: "arg_", map: FastMap::default() },
                    end_args: ArgReg { prefix: "end_arg_", map: FastMap::default() },
                    c,
                    dyn_cols: 0,
                }
            })
            .collect();
        ChromeParser {
            opts,
            buf: Vec::new(),
            base_off: 0,
            base_line: 1,
            base_col: 0,
            lc_pos: 0,
            lc_line: 1,
            state: Top::Start,
            need: 0,
            ev: Ev::default(),
            tables,
            sink: ArgSink { new_cols: Vec::new(), text: Vec::new(), max_cols },
            procs: FastMap::default(),
            threads: FastMap::default(),
            producers: Vec::new(),
            seqs: Vec::new(),
            open: Vec::new(),
            spare: Vec::new(),
            open_async: FastMap::default(),
            flows: FastMap::default(),
            key: Vec::new(),
            tmp_args: Vec::new(),
            stats: Stats::default(),
            rejected: 0,
            problems: Vec::new(),
            fatal: None,
            metadata: Vec::new(),
        }
    }

    /// Declares an args column known from earlier traces of the format, so this trace
    /// stores the key in the same column with the same type. `end` selects `end_arg_`.
    /// Returns false when the table is unknown or the column name is taken.
    pub fn declare(&mut self, table: &str, column: &str, ptype: PType, key: &str, end: bool) -> bool {
        let Some(t) = self.tables.iter_mut().find(|t| t.t.name == table) else { return false };
        if t.t.col(column).is_some() {
            return false;
        }
        let i = t.t.add_col(column, ptype);
        t.dyn_cols += 1;
        let reg = if end { &mut t.end_args } else { &mut t.args };
        reg.map.insert(key.as_bytes().to_vec(), Slot::Col(i));
        true
    }

    /// Parses a chunk of input (of any size, cut anywhere).
    pub fn feed(&mut self, chunk: &[u8]) {
        if matches!(self.state, Top::Stopped) {
            return;
        }
        self.buf.extend_from_slice(chunk);
        self.run(false);
    }

    /// Parses what is left at the end of the input and closes what is still open.
    pub fn finish(&mut self) {
        if !matches!(self.state, Top::Stopped) {
            self.run(true);
            let buf = std::mem::take(&mut self.buf);
            let (line, off) = (self.line_at(&buf, buf.len()), self.base_off + buf.len() as u64);
            self.buf = buf;
            match self.state {
                Top::Start => {
                    self.problem_at(line, off, "empty input: expected a JSON array or object of trace events".into())
                }
                Top::Member { .. } | Top::Next | Top::Skip { .. } => {
                    self.problem_at(line, off, "the input ends inside the top-level object".into())
                }
                _ => {}
            }
        }
        self.close_open();
    }

    /// Batches of the event types that reached the batch size (all non-empty ones
    /// when `all`), as (event type, batch).
    pub fn take_batches(&mut self, all: bool) -> Vec<(String, RecordBatch)> {
        let mut out = Vec::new();
        for t in &mut self.tables {
            if all || t.t.rows() >= self.opts.batch_rows || t.t.str_bytes >= MAX_STR_BYTES {
                if let Some(b) = t.t.take() {
                    out.push((t.t.name.clone(), b));
                }
            }
        }
        out
    }

    /// Columns discovered since the last call.
    pub fn take_new_columns(&mut self) -> Vec<NewColumn> {
        std::mem::take(&mut self.sink.new_cols)
    }

    /// Every producer met, by id.
    pub fn producers(&self) -> &[Producer] {
        &self.producers
    }

    /// (name, kind, columns) of every event type, columns including the discovered ones.
    pub fn table_columns(&self) -> Vec<(String, Vec<(String, PType)>)> {
        self.tables.iter().map(|t| (t.t.name.clone(), t.t.columns())).collect()
    }
}

/// Writes integer nanoseconds as decimal microseconds, exactly ("1234.567", "-0.001", "7").
pub fn write_us(out: &mut Vec<u8>, ns: i64) {
    use std::io::Write;
    let neg = ns < 0;
    let a = ns.unsigned_abs();
    let (ip, fp) = (a / 1000, a % 1000);
    if neg {
        out.push(b'-');
    }
    let _ = write!(out, "{ip}");
    if fp != 0 {
        let _ = write!(out, ".{fp:03}");
        while out.last() == Some(&b'0') {
            out.pop();
        }
    }
}

mod args;
pub mod decl;
mod document;
mod events;
pub mod export;
#[cfg(test)]
mod tests;

pub use args::arg_column;
use args::{arg_list, ArgReg, ArgSink, Slot};
use document::Top;

super::chunk_parser!(ChromeParser {
    fn producers(&self) -> Vec<ProducerRow> {
        self.producers.iter().map(Producer::row).collect()
    }

    fn stats(&self) -> Vec<(String, u64)> {
        let s = &self.stats;
        [
            ("records", s.records),
            ("metadata", s.metadata),
            ("unmatched_begin", s.unmatched_begin),
            ("unmatched_end", s.unmatched_end),
            ("unmatched_async_begin", s.unmatched_async_begin),
            ("unmatched_async_end", s.unmatched_async_end),
            ("unterminated_flows", s.unterminated_flows),
            ("skipped_counter_args", s.skipped_counter_args),
            ("rejected", self.rejected),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    fn problems(&self) -> Vec<Problem> {
        self.problems.clone()
    }

    fn fatal(&self) -> Option<Problem> {
        self.fatal.clone()
    }

    fn take_new_columns(&mut self) -> Vec<NewColumn> {
        ChromeParser::take_new_columns(self)
    }

    fn declare(&mut self, event_type: &str, column: &str, ptype: PType, key: &str, end: bool) -> bool {
        ChromeParser::declare(self, event_type, column, ptype, key, end)
    }

    /// `{"top_level": [[key, JSON text], ...]}`: the top-level members other than the events.
    fn details_json(&self) -> String {
        let mut out = b"{\"top_level\": [".to_vec();
        for (i, (k, v)) in self.metadata.iter().enumerate() {
            out.extend_from_slice(if i == 0 { b"[" } else { b", [" });
            json::write_str(&mut out, k.as_bytes());
            out.extend_from_slice(b", ");
            json::write_str(&mut out, v.as_bytes());
            out.push(b']');
        }
        out.extend_from_slice(b"]}");
        String::from_utf8_lossy(&out).into_owned()
    }
});

impl Producer {
    /// The producer row: named by `M` events, else "process <pid>" / "thread <tid>"; attrs pid,
    /// tid (numbers when they are), sort_index, labels.
    fn row(&self) -> ProducerRow {
        let num = |s: &str| match s.parse::<i64>() {
            Ok(v) => Attr::Int(v),
            Err(_) => Attr::Str(s.to_string()),
        };
        let mut attrs = vec![("pid".to_string(), num(&self.pid))];
        if let Some(t) = &self.tid {
            attrs.push(("tid".into(), num(t)));
        }
        if let Some(s) = self.sort_index {
            attrs.push(("sort_index".into(), Attr::Int(s)));
        }
        if let Some(l) = &self.labels {
            attrs.push(("labels".into(), Attr::Str(l.clone())));
        }
        let name = match (&self.name, &self.tid) {
            (Some(n), _) => n.clone(),
            (None, Some(t)) => format!("thread {t}"),
            (None, None) => format!("process {}", self.pid),
        };
        ProducerRow { id: self.id, parent: self.parent, kind: self.kind.to_string(), name, attrs }
    }
}
