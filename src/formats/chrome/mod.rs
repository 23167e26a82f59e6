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
//! Over 600 lines: the Chrome Trace Event format is one streaming state machine (records,
//! args typed by first value, flow and async pairs, metadata) over the tokenizer in
//! `json.rs`; tests are in tests.rs.

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

/// Where an args key goes in one table.
#[derive(Clone, Copy)]
enum Slot {
    Col(usize),
    Text,
}

struct ArgReg {
    prefix: &'static str,
    map: FastMap<Vec<u8>, Slot>,
}

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

/// Resumable skipping of one top-level JSON value of unknown size.
#[derive(Default)]
struct Skipper {
    started: bool,
    depth: u32,
    in_str: bool,
    esc: bool,
    scalar: bool,
}

impl Skipper {
    /// Consumes bytes of the value; returns (bytes consumed, value complete).
    fn feed(&mut self, b: &[u8]) -> (usize, bool) {
        for (i, &c) in b.iter().enumerate() {
            if !self.started {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' => continue,
                    b'{' | b'[' => self.depth = 1,
                    b'"' => self.in_str = true,
                    _ => self.scalar = true,
                }
                self.started = true;
                continue;
            }
            if self.in_str {
                if self.esc {
                    self.esc = false;
                } else if c == b'\\' {
                    self.esc = true;
                } else if c == b'"' {
                    self.in_str = false;
                    if self.depth == 0 {
                        return (i + 1, true);
                    }
                }
            } else if self.scalar {
                if matches!(c, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t') {
                    return (i, true);
                }
            } else {
                match c {
                    b'"' => self.in_str = true,
                    b'{' | b'[' => self.depth += 1,
                    b'}' | b']' => {
                        self.depth -= 1;
                        if self.depth == 0 {
                            return (i + 1, true);
                        }
                    }
                    _ => {}
                }
            }
        }
        (b.len(), false)
    }
}

enum Top {
    Start,
    Member {
        first: bool,
    },
    Next,
    Skip {
        sk: Skipper,
        key: String,
        cap: Option<Vec<u8>>,
    },
    Events {
        top_array: bool,
    },
    Resync {
        top_array: bool,
        line_start: bool,
    },
    /// Skipping an event record longer than `max_record`.
    Oversized {
        sk: Skipper,
        top_array: bool,
    },
    Done,
    Stopped,
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

    // -- positions and problems -------------------------------------------------------

    fn line_at(&mut self, buf: &[u8], pos: usize) -> u64 {
        if pos < self.lc_pos {
            self.lc_pos = 0;
            self.lc_line = self.base_line;
        }
        let end = pos.min(buf.len());
        self.lc_line += buf[self.lc_pos..end].iter().filter(|&&c| c == b'\n').count() as u64;
        self.lc_pos = end;
        self.lc_line
    }

    fn problem_at(&mut self, line: u64, offset: u64, reason: String) {
        self.rejected += 1;
        let p = Problem { line, offset, reason };
        if self.opts.strict {
            self.fatal = Some(p);
        } else if self.problems.len() < KEEP_PROBLEMS {
            self.problems.push(p);
        }
    }

    fn problem(&mut self, buf: &[u8], pos: usize, reason: String) {
        let line = self.line_at(buf, pos);
        self.problem_at(line, self.base_off + pos as u64, reason);
    }

    // -- the top-level state machine ------------------------------------------------

    fn run(&mut self, eof: bool) {
        let buf = std::mem::take(&mut self.buf);
        let mut state = std::mem::replace(&mut self.state, Top::Stopped);
        let mut pos = 0;
        loop {
            if self.fatal.is_some() {
                state = Top::Stopped;
            }
            let mut cur = Cursor::new(&buf, pos, eof);
            match &mut state {
                Top::Stopped => break,
                Top::Start => {
                    if pos == 0 && buf.starts_with(b"\xEF\xBB\xBF") {
                        pos = 3;
                        continue;
                    }
                    match cur.peek_ws("'[' or '{'") {
                        Ok(b'[') => {
                            pos = cur.pos + 1;
                            state = Top::Events { top_array: true };
                        }
                        Ok(b'{') => {
                            pos = cur.pos + 1;
                            state = Top::Member { first: true };
                        }
                        Ok(_) => {
                            pos = cur.pos;
                            self.problem(&buf, pos, "not a Chrome trace: expected '[' or '{' at the start".into());
                            state = Top::Stopped;
                        }
                        Err(_) => break,
                    }
                }
                Top::Member { first } => {
                    let first = *first;
                    match cur.peek_ws("a key") {
                        Ok(b'}') if first => {
                            pos = cur.pos + 1;
                            state = Top::Done;
                            continue;
                        }
                        Err(JErr::Incomplete) => break,
                        _ => {}
                    }
                    let r = cur.string().and_then(|k| {
                        cur.expect(b':', "':'")?;
                        let c = cur.peek_ws("a value")?;
                        Ok((k, c))
                    });
                    match r {
                        Ok((k, c)) if k.eq(&buf, b"traceEvents") => {
                            pos = cur.pos;
                            if c == b'[' {
                                pos += 1;
                                state = Top::Events { top_array: false };
                            } else {
                                self.problem(&buf, pos, "\"traceEvents\" is not an array".into());
                                state = Top::Stopped;
                            }
                        }
                        Ok((k, _)) => {
                            pos = cur.pos;
                            let key = k.text(&buf).into_owned();
                            let keep = !matches!(key.as_str(), "systemTraceEvents" | "stackFrames" | "samples");
                            state = Top::Skip { sk: Skipper::default(), key, cap: keep.then(Vec::new) };
                        }
                        Err(JErr::Incomplete) => break,
                        Err(JErr::Syntax { pos: p, what }) => {
                            pos = p.min(buf.len());
                            self.problem(&buf, pos, format!("invalid top-level object: expected {what}"));
                            state = Top::Stopped;
                        }
                    }
                }
                Top::Next => match cur.next_member(b'}', "',' or '}'") {
                    Ok(true) => {
                        pos = cur.pos;
                        state = Top::Member { first: false };
                    }
                    Ok(false) => {
                        pos = cur.pos;
                        state = Top::Done;
                    }
                    Err(JErr::Incomplete) => break,
                    Err(JErr::Syntax { pos: p, what }) => {
                        pos = p.min(buf.len());
                        self.problem(&buf, pos, format!("invalid top-level object: expected {what}"));
                        state = Top::Stopped;
                    }
                },
                Top::Skip { sk, key, cap } => {
                    let (n, done) = sk.feed(&buf[pos..]);
                    if let Some(c) = cap {
                        if c.len() + n <= MAX_META {
                            c.extend_from_slice(&buf[pos..pos + n]);
                        } else {
                            *cap = None;
                        }
                    }
                    pos += n;
                    if !done {
                        break;
                    }
                    if let Some(c) = cap.take() {
                        let text = String::from_utf8_lossy(c.trim_ascii()).into_owned();
                        self.metadata.push((std::mem::take(key), text));
                    }
                    state = Top::Next;
                }
                Top::Events { top_array } => {
                    let top_array = *top_array;
                    let Ok(c) = cur.peek_ws("an event") else {
                        pos = cur.pos;
                        break;
                    };
                    pos = cur.pos;
                    match c {
                        b',' => pos += 1,
                        b']' => {
                            pos += 1;
                            state = if top_array { Top::Done } else { Top::Next };
                        }
                        b'{' => {
                            if !eof && buf.len() - pos < self.need {
                                break;
                            }
                            let mut ev = std::mem::take(&mut self.ev);
                            ev.clear();
                            ev.start = pos;
                            match parse_event(&mut cur, &mut ev) {
                                Ok(()) if cur.pos - pos > self.opts.max_record => {
                                    // Whole in this chunk, but over the limit all the same.
                                    self.need = 0;
                                    self.stats.records += 1;
                                    let max = self.opts.max_record;
                                    self.problem(&buf, pos, format!("event longer than {max} bytes (skipped)"));
                                    pos = cur.pos;
                                    self.ev = ev;
                                }
                                Ok(()) => {
                                    self.need = 0;
                                    self.stats.records += 1;
                                    pos = cur.pos;
                                    if let Err(reason) = self.apply(&buf, &ev) {
                                        self.problem(&buf, ev.start, reason);
                                    }
                                    self.ev = ev;
                                }
                                Err(JErr::Incomplete) if buf.len() - pos > self.opts.max_record => {
                                    self.ev = ev;
                                    self.need = 0;
                                    self.stats.records += 1;
                                    let max = self.opts.max_record;
                                    self.problem(&buf, pos, format!("event longer than {max} bytes (skipped)"));
                                    state = Top::Oversized { sk: Skipper::default(), top_array };
                                }
                                Err(JErr::Incomplete) => {
                                    // Wait for more input, but not for more than the longest
                                    // record accepted (plus one byte, to tell it is too long).
                                    let have = buf.len() - pos;
                                    self.need = (2 * have).min(self.opts.max_record + 1).max(have + 1);
                                    self.ev = ev;
                                    break;
                                }
                                Err(JErr::Syntax { pos: p, what }) => {
                                    self.ev = ev;
                                    self.stats.records += 1;
                                    let reason = if p >= buf.len() {
                                        "truncated event at the end of the input".to_string()
                                    } else {
                                        let col = match buf[..p].iter().rposition(|&c| c == b'\n') {
                                            Some(nl) => p - nl,
                                            None => self.base_col + p + 1,
                                        };
                                        format!("invalid JSON at column {col}: expected {what}")
                                    };
                                    self.problem(&buf, pos, reason);
                                    pos += 1;
                                    state = Top::Resync { top_array, line_start: false };
                                }
                            }
                        }
                        _ => {
                            self.stats.records += 1;
                            self.problem(&buf, pos, format!("expected an event object, found {:?}", c as char));
                            pos += 1;
                            state = Top::Resync { top_array, line_start: false };
                        }
                    }
                }
                Top::Oversized { sk, top_array } => {
                    let (n, done) = sk.feed(&buf[pos..]);
                    pos += n;
                    if !done {
                        break;
                    }
                    state = Top::Events { top_array: *top_array };
                }
                Top::Resync { top_array, line_start } => {
                    // Skip to the next line that starts with '{' (or ']').
                    let top_array = *top_array;
                    let mut found = None;
                    let mut ls = *line_start;
                    for (i, &c) in buf[pos..].iter().enumerate() {
                        if ls {
                            match c {
                                b' ' | b'\t' | b'\r' | b'\n' => {}
                                b'{' | b']' => {
                                    found = Some(pos + i);
                                    break;
                                }
                                _ => ls = false,
                            }
                        } else if c == b'\n' {
                            ls = true;
                        }
                    }
                    match found {
                        Some(p) => {
                            pos = p;
                            state = Top::Events { top_array };
                        }
                        None => {
                            pos = buf.len();
                            *line_start = ls;
                            break;
                        }
                    }
                }
                Top::Done => match cur.peek_ws("the end") {
                    Ok(_) => {
                        pos = cur.pos;
                        self.problem(&buf, pos, "data after the end of the trace".into());
                        state = Top::Stopped;
                    }
                    Err(_) => {
                        pos = buf.len();
                        break;
                    }
                },
            }
        }
        if self.fatal.is_some() {
            state = Top::Stopped;
        }
        self.state = state;
        self.buf = buf;
        self.drain(pos);
    }

    fn drain(&mut self, pos: usize) {
        let buf = std::mem::take(&mut self.buf);
        let pos = pos.min(buf.len());
        let line = self.line_at(&buf, pos);
        self.base_col = match buf[..pos].iter().rposition(|&c| c == b'\n') {
            Some(nl) => pos - nl - 1,
            None => self.base_col + pos,
        };
        self.buf = buf;
        self.base_line = line;
        self.base_off += pos as u64;
        self.buf.drain(..pos);
        self.lc_pos = 0;
        self.lc_line = line;
    }

    // -- one event ------------------------------------------------------------------

    fn producer(&mut self, buf: &[u8], pid: Option<Value>, tid: Option<Value>) -> Result<i32, String> {
        let pid_raw = id_bytes(buf, pid, "pid")?.unwrap_or(b"0");
        let p = match self.procs.get(pid_raw) {
            Some(&p) => p,
            None => {
                let p = self.new_producer(None, "process", pid_raw, None);
                self.procs.insert(pid_raw.to_vec(), p);
                p
            }
        };
        let Some(tid_raw) = id_bytes(buf, tid, "tid")? else { return Ok(p) };
        self.key.clear();
        self.key.extend_from_slice(&p.to_le_bytes());
        self.key.extend_from_slice(tid_raw);
        if let Some(&t) = self.threads.get(self.key.as_slice()) {
            return Ok(t);
        }
        let t = self.new_producer(Some(p), "thread", pid_raw, Some(tid_raw));
        self.threads.insert(self.key.clone(), t);
        Ok(t)
    }

    fn new_producer(&mut self, parent: Option<i32>, kind: &'static str, pid: &[u8], tid: Option<&[u8]>) -> i32 {
        let id = self.producers.len() as i32;
        self.producers.push(Producer {
            id,
            parent,
            kind,
            name: None,
            pid: String::from_utf8_lossy(pid).into_owned(),
            tid: tid.map(|t| String::from_utf8_lossy(t).into_owned()),
            sort_index: None,
            labels: None,
        });
        self.seqs.push(0);
        self.open.push(Vec::new());
        id
    }

    /// A start half waiting for its end (a recycled record): where and when it began, its
    /// names and its args as raw JSON.
    fn open_record(&mut self, at: (i64, i64, i32), tts: Option<i64>, name: &str, cat: &str, args: &[u8]) -> Open {
        let mut o = self.spare.pop().unwrap_or_default();
        (o.ts, o.seq, o.producer, o.tts) = (at.0, at.1, at.2, tts);
        o.name.clear();
        o.name.push_str(name);
        o.cat.clear();
        o.cat.push_str(cat);
        o.args.clear();
        o.args.extend_from_slice(args);
        o
    }

    /// Ends the row being written in table `k` (a matched pair) with the args of its start
    /// half `o` and those of the closing event, then recycles `o`.
    fn close_pair(&mut self, k: usize, o: Open, buf: &[u8], end_args: &[(Str, Value)]) {
        let mut list = std::mem::take(&mut self.tmp_args);
        arg_list(&o.args, &mut list);
        let t = &mut self.tables[k];
        let (rem, end_rem) = (t.col("args"), t.col("end_args"));
        self.sink.put(t, false, &o.args, &list, rem);
        self.sink.put(t, true, buf, end_args, end_rem);
        t.t.end();
        self.tmp_args = list;
        self.spare.push(o);
    }

    fn next_seq(&mut self, p: i32) -> i64 {
        let s = &mut self.seqs[p as usize];
        *s += 1;
        *s - 1
    }

    fn apply(&mut self, buf: &[u8], ev: &Ev) -> Result<(), String> {
        let ph = match ev.ph {
            Some(Value::Str(s)) if s.end > s.start => {
                let t = s.text(buf);
                if t.chars().count() != 1 {
                    return Err(format!("unknown phase {t:?}: expected one character such as X, B, E, i, C, M"));
                }
                t.as_bytes()[0]
            }
            Some(_) => return Err("\"ph\" is not a one-character string".into()),
            None => return Err("no \"ph\" (phase)".into()),
        };
        let name = opt_str(buf, ev.name, "name")?;
        let cat = opt_str(buf, ev.cat, "cat")?;
        if let Some(Value::Nested { object: false, start, end }) = ev.args {
            if !buf[start + 1..end - 1].iter().all(u8::is_ascii_whitespace) {
                return Err("\"args\" is not an object".into());
            }
        } else if !matches!(ev.args, None | Some(Value::Nested { object: true, .. })) {
            return Err("\"args\" is not an object".into());
        }
        if ph == b'M' {
            return self.metadata_event(buf, ev, &name);
        }
        let ts = match ev.ts {
            Some(v) => ns(buf, v, "ts")?,
            None => return Err("no \"ts\" (timestamp)".into()),
        };
        let producer = self.producer(buf, ev.pid, ev.tid)?;
        let tts = ev.tts.map(|v| ns(buf, v, "tts")).transpose()?;
        match ph {
            b'X' => {
                let dur = ev.dur.map(|v| ns(buf, v, "dur")).transpose()?;
                match dur {
                    Some(d) if d < 0 => return Err(format!("negative \"dur\" ({d} ns)")),
                    Some(d) => {
                        let tdur = ev.tdur.map(|v| ns(buf, v, "tdur")).transpose()?;
                        let seq = self.next_seq(producer);
                        let t = &mut self.tables[T_SLICE];
                        t.t.start(ts, producer, seq);
                        t.t.set_i64(DUR, d);
                        set_names(t, &name, &cat);
                        t.t.set_str(t.col("phase"), "X");
                        if let Some(v) = tts {
                            t.t.set_i64(t.col("thread_ts"), v);
                        }
                        if let Some(v) = tdur {
                            t.t.set_i64(t.col("thread_dur"), v);
                        }
                        let rem = t.col("args");
                        self.sink.put(t, false, buf, &ev.arg_list, rem);
                        t.t.end();
                    }
                    None => {
                        // A complete event without its duration: a slice that never ended.
                        self.stats.unmatched_begin += 1;
                        let seq = self.next_seq(producer);
                        let t = &mut self.tables[T_SLICE_BEGIN];
                        t.t.start(ts, producer, seq);
                        set_names(t, &name, &cat);
                        t.t.set_str(t.col("phase"), "X");
                        if let Some(v) = tts {
                            t.t.set_i64(t.col("thread_ts"), v);
                        }
                        let rem = t.col("args");
                        self.sink.put(t, false, buf, &ev.arg_list, rem);
                        t.t.end();
                    }
                }
            }
            b'B' => {
                let seq = self.next_seq(producer);
                let o = self.open_record((ts, seq, producer), tts, &name, &cat, ev.args.map_or(&[], |v| v.raw(buf)));
                self.open[producer as usize].push(o);
            }
            b'E' => {
                let seq = self.next_seq(producer);
                match self.open[producer as usize].pop() {
                    Some(o) if ts < o.ts => {
                        let msg = format!("\"E\" at {} us ends before its \"B\" at {} us", fmt_us(ts), fmt_us(o.ts));
                        self.open[producer as usize].push(o);
                        return Err(msg);
                    }
                    Some(o) => {
                        let t = &mut self.tables[T_SLICE];
                        t.t.start(o.ts, producer, o.seq);
                        t.t.set_i64(DUR, ts - o.ts);
                        set_names(
                            t,
                            if o.name.is_empty() { &name } else { &o.name },
                            if o.cat.is_empty() { &cat } else { &o.cat },
                        );
                        t.t.set_str(t.col("phase"), "B");
                        if let Some(v) = o.tts {
                            t.t.set_i64(t.col("thread_ts"), v);
                            if let Some(e) = tts {
                                t.t.set_i64(t.col("thread_dur"), e - v);
                            }
                        }
                        self.close_pair(T_SLICE, o, buf, &ev.arg_list);
                    }
                    None => {
                        self.stats.unmatched_end += 1;
                        let t = &mut self.tables[T_SLICE_END];
                        t.t.start(ts, producer, seq);
                        set_names(t, &name, &cat);
                        if let Some(v) = tts {
                            t.t.set_i64(t.col("thread_ts"), v);
                        }
                        let rem = t.col("args");
                        self.sink.put(t, false, buf, &ev.arg_list, rem);
                        t.t.end();
                    }
                }
            }
            b'I' | b'i' => {
                let scope = match ev.s {
                    Some(v) => opt_str(buf, Some(v), "s")?,
                    None => "t".into(),
                };
                let seq = self.next_seq(producer);
                let t = &mut self.tables[T_INSTANT];
                t.t.start(ts, producer, seq);
                set_names(t, &name, &cat);
                t.t.set_str(t.col("scope"), &scope);
                let rem = t.col("args");
                self.sink.put(t, false, buf, &ev.arg_list, rem);
                t.t.end();
            }
            b'C' => {
                let id = id_text(buf, ev.id, "id")?;
                for &(k, v) in &ev.arg_list {
                    let (x, exact) = match v {
                        Value::Num(n) => (n.as_f64(buf), n.as_i64(buf)),
                        _ => {
                            self.stats.skipped_counter_args += 1;
                            continue;
                        }
                    };
                    let seq = self.next_seq(producer);
                    let t = &mut self.tables[T_COUNTER];
                    t.t.start(ts, producer, seq);
                    set_names(t, &name, &cat);
                    if let Some(id) = &id {
                        t.t.set_str(t.col("id"), id);
                    }
                    t.t.set_str(t.col("series"), &k.text(buf));
                    t.t.set_f64(t.col("value"), x);
                    if let Some(i) = exact {
                        // An integer goes back out as the integer it was (a float may not hold it).
                        t.t.set_i64(t.col("int_value"), i);
                    }
                    t.t.end();
                }
            }
            b'b' | b'S' | b'e' | b'F' | b'n' | b'T' | b'p' => {
                let (id, local) = self.async_id(buf, ev)?;
                let Some(id) = id else {
                    return Err(format!("async event \"{}\" has no \"id\" or \"id2\"", ph as char));
                };
                self.key.clear();
                self.key.extend_from_slice(cat.as_bytes());
                self.key.push(0);
                self.key.extend_from_slice(id.as_bytes());
                if local == Some(true) {
                    self.key.push(0);
                    self.key
                        .extend_from_slice(&self.producers[producer as usize].parent.unwrap_or(producer).to_le_bytes());
                }
                let seq = self.next_seq(producer);
                match ph {
                    b'b' | b'S' => {
                        let args = ev.args.map_or(&[][..], |v| v.raw(buf));
                        let mut o = self.open_record((ts, seq, producer), None, &name, &cat, args);
                        o.id = id;
                        o.id_local = local;
                        let key = self.key.clone();
                        self.open_async.entry(key).or_default().push(o);
                    }
                    b'e' | b'F' => {
                        let open = self.open_async.get_mut(self.key.as_slice()).and_then(|v| v.pop());
                        if self.open_async.get(self.key.as_slice()).is_some_and(|v| v.is_empty()) {
                            self.open_async.remove(self.key.as_slice());
                        }
                        match open {
                            Some(o) if ts < o.ts => {
                                let msg =
                                    format!("\"e\" at {} us ends before its \"b\" at {} us", fmt_us(ts), fmt_us(o.ts));
                                let key = self.key.clone();
                                self.open_async.entry(key).or_default().push(o);
                                return Err(msg);
                            }
                            Some(o) => {
                                let t = &mut self.tables[T_ASYNC];
                                t.t.start(o.ts, o.producer, o.seq);
                                t.t.set_i64(DUR, ts - o.ts);
                                set_names(t, if o.name.is_empty() { &name } else { &o.name }, &o.cat);
                                t.t.set_str(t.col("id"), &o.id);
                                if let Some(l) = o.id_local {
                                    t.t.set_bool(t.col("id_local"), l);
                                }
                                self.close_pair(T_ASYNC, o, buf, &ev.arg_list);
                            }
                            None => {
                                self.stats.unmatched_async_end += 1;
                                self.async_row(T_ASYNC_END, buf, ev, ts, producer, seq, &name, &cat, &id, local);
                            }
                        }
                    }
                    _ => self.async_row(T_ASYNC_INSTANT, buf, ev, ts, producer, seq, &name, &cat, &id, local),
                }
            }
            b's' | b't' | b'f' => {
                let Some(id) = id_text(buf, ev.id, "id")? else { return Err("flow event has no \"id\"".into()) };
                let bp = opt_str(buf, ev.bp, "bp")?;
                self.key.clear();
                for part in [cat.as_bytes(), name.as_bytes(), id.as_bytes()] {
                    self.key.extend_from_slice(part);
                    self.key.push(0);
                }
                let seq = self.next_seq(producer);
                let prev = if ph == b's' { None } else { self.flows.remove(self.key.as_slice()) };
                if ph == b's' {
                    if let Some(old) = self.flows.remove(self.key.as_slice()) {
                        self.flow_row(&old, None, "");
                    }
                }
                let step =
                    FlowStep { ts, producer, seq, phase: ph, name: name.into_owned(), cat: cat.into_owned(), id };
                match prev {
                    Some(p) => self.flow_row(&p, Some(&step), &bp),
                    None if ph == b'f' => {
                        self.flow_row(&step, None, &bp);
                        return Ok(());
                    }
                    None => {}
                }
                if ph != b'f' {
                    self.flows.insert(self.key.clone(), step);
                }
            }
            b'P' => {
                let sf = id_text(buf, ev.sf, "sf")?;
                let seq = self.next_seq(producer);
                let t = &mut self.tables[T_SAMPLE];
                t.t.start(ts, producer, seq);
                set_names(t, &name, &cat);
                if let Some(sf) = sf {
                    t.t.set_str(t.col("sf"), &sf);
                }
                if let Some(st) = ev.stack {
                    t.t.set_str(t.col("stack"), &String::from_utf8_lossy(st.raw(buf)));
                }
                let rem = t.col("args");
                self.sink.put(t, false, buf, &ev.arg_list, rem);
                t.t.end();
            }
            _ => {
                let id = id_text(buf, ev.id, "id")?;
                let seq = self.next_seq(producer);
                self.other_row(buf, ev, ts, producer, seq, ph, &name, &cat, id.as_deref());
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn other_row(
        &mut self,
        buf: &[u8],
        ev: &Ev,
        ts: i64,
        producer: i32,
        seq: i64,
        ph: u8,
        name: &str,
        cat: &str,
        id: Option<&str>,
    ) {
        let t = &mut self.tables[T_OTHER];
        t.t.start(ts, producer, seq);
        set_names(t, name, cat);
        t.t.set_str(t.col("phase"), &(ph as char).to_string());
        if let Some(id) = id {
            t.t.set_str(t.col("id"), id);
        }
        if let Some(a) = ev.args {
            t.t.set_str(t.col("args"), &String::from_utf8_lossy(a.raw(buf)));
        }
        t.t.end();
    }

    #[allow(clippy::too_many_arguments)]
    fn async_row(
        &mut self,
        ti: usize,
        buf: &[u8],
        ev: &Ev,
        ts: i64,
        producer: i32,
        seq: i64,
        name: &str,
        cat: &str,
        id: &str,
        local: Option<bool>,
    ) {
        let t = &mut self.tables[ti];
        t.t.start(ts, producer, seq);
        set_names(t, name, cat);
        t.t.set_str(t.col("id"), id);
        if let Some(l) = local {
            t.t.set_bool(t.col("id_local"), l);
        }
        let rem = t.col("args");
        self.sink.put(t, false, buf, &ev.arg_list, rem);
        t.t.end();
    }

    fn async_id(&self, buf: &[u8], ev: &Ev) -> Result<(Option<String>, Option<bool>), String> {
        if let Some(Value::Nested { start, end, object: true }) = ev.id2 {
            let mut list = Vec::new();
            arg_list(&buf[start..end], &mut list);
            let sub = &buf[start..end];
            for (k, v) in list {
                let local = if k.eq(sub, b"local") {
                    true
                } else if k.eq(sub, b"global") {
                    false
                } else {
                    continue;
                };
                return Ok((id_text(sub, Some(v), "id2")?, Some(local)));
            }
            return Err("\"id2\" has neither \"local\" nor \"global\"".into());
        }
        if ev.id2.is_some() {
            return Err("\"id2\" is not an object".into());
        }
        Ok((id_text(buf, ev.id, "id")?, None))
    }

    fn flow_row(&mut self, src: &FlowStep, dst: Option<&FlowStep>, bp: &str) {
        let t = &mut self.tables[T_FLOW];
        t.t.start(src.ts, src.producer, src.seq);
        set_names(t, &src.name, &src.cat);
        t.t.set_str(t.col("id"), &src.id);
        t.t.set_str(t.col("src_phase"), &(src.phase as char).to_string());
        match dst {
            Some(d) => {
                t.t.set_i64(t.col("dst_producer"), d.producer as i64);
                t.t.set_i64(t.col("dst_ts"), d.ts);
                t.t.set_str(t.col("dst_phase"), &(d.phase as char).to_string());
            }
            None => self.stats.unterminated_flows += 1,
        }
        if !bp.is_empty() {
            t.t.set_str(t.col("bp"), bp);
        }
        t.t.end();
    }

    fn metadata_event(&mut self, buf: &[u8], ev: &Ev, name: &str) -> Result<(), String> {
        let which = match name {
            "process_name" | "process_labels" | "process_sort_index" => 0,
            "thread_name" | "thread_sort_index" => 1,
            _ => {
                // Other metadata (num_cpus, trace config, ...) is kept as it came.
                let producer = self.producer(buf, ev.pid, ev.tid)?;
                let ts = ev.ts.map(|v| ns(buf, v, "ts")).transpose()?.unwrap_or(0);
                let id = id_text(buf, ev.id, "id")?;
                let cat = opt_str(buf, ev.cat, "cat")?;
                let seq = self.next_seq(producer);
                self.other_row(buf, ev, ts, producer, seq, b'M', name, &cat, id.as_deref());
                return Ok(());
            }
        };
        let p = if which == 0 { self.producer(buf, ev.pid, None)? } else { self.producer(buf, ev.pid, ev.tid)? };
        let want: &[u8] = match name {
            "process_name" | "thread_name" => b"name",
            "process_labels" => b"labels",
            _ => b"sort_index",
        };
        let Some(&(_, v)) = ev.arg_list.iter().find(|(k, _)| k.eq(buf, want)) else {
            return Err(format!("metadata event {name:?} has no args.{}", String::from_utf8_lossy(want)));
        };
        let prod = &mut self.producers[p as usize];
        match (want, v) {
            (b"name", Value::Str(s)) => prod.name = Some(s.text(buf).into_owned()),
            (b"labels", Value::Str(s)) => prod.labels = Some(s.text(buf).into_owned()),
            (b"sort_index", Value::Num(n)) => match n.as_i64(buf) {
                Some(i) => prod.sort_index = Some(i),
                None => return Err(format!("{name}: args.sort_index is not an integer")),
            },
            _ => return Err(format!("{name}: args.{} has the wrong type", String::from_utf8_lossy(want))),
        }
        self.stats.metadata += 1;
        Ok(())
    }

    /// Moves everything still open at the end of the input to the unmatched tables.
    fn close_open(&mut self) {
        let mut list = std::mem::take(&mut self.tmp_args);
        for p in 0..self.open.len() {
            for o in std::mem::take(&mut self.open[p]) {
                self.stats.unmatched_begin += 1;
                arg_list(&o.args, &mut list);
                let t = &mut self.tables[T_SLICE_BEGIN];
                t.t.start(o.ts, o.producer, o.seq);
                set_names(t, &o.name, &o.cat);
                t.t.set_str(t.col("phase"), "B");
                if let Some(v) = o.tts {
                    t.t.set_i64(t.col("thread_ts"), v);
                }
                let rem = t.col("args");
                self.sink.put(t, false, &o.args, &list, rem);
                t.t.end();
            }
        }
        let mut keys: Vec<Vec<u8>> = self.open_async.keys().cloned().collect();
        keys.sort();
        for k in keys {
            for o in self.open_async.remove(&k).unwrap_or_default() {
                self.stats.unmatched_async_begin += 1;
                arg_list(&o.args, &mut list);
                let t = &mut self.tables[T_ASYNC_BEGIN];
                t.t.start(o.ts, o.producer, o.seq);
                set_names(t, &o.name, &o.cat);
                t.t.set_str(t.col("id"), &o.id);
                if let Some(l) = o.id_local {
                    t.t.set_bool(t.col("id_local"), l);
                }
                let rem = t.col("args");
                self.sink.put(t, false, &o.args, &list, rem);
                t.t.end();
            }
        }
        let mut flows: Vec<FlowStep> = self.flows.drain().map(|(_, v)| v).collect();
        flows.sort_by_key(|f| (f.ts, f.producer, f.seq));
        for f in flows {
            self.flow_row(&f, None, "");
        }
        self.tmp_args = list;
    }
}

// -- helpers --------------------------------------------------------------------------

fn set_names(t: &mut Tbl, name: &str, cat: &str) {
    t.t.set_str(t.col("name"), name);
    t.t.set_str(t.col("cat"), cat);
}

fn fmt_us(ns: i64) -> String {
    let mut s = Vec::new();
    write_us(&mut s, ns);
    String::from_utf8(s).unwrap_or_default()
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

fn ns(buf: &[u8], v: Value, what: &str) -> Result<i64, String> {
    match v {
        Value::Num(n) => json::decimal_to_ns(n.raw(buf), 1000).ok_or_else(|| {
            format!("\"{what}\" {} us does not fit in int64 nanoseconds", String::from_utf8_lossy(n.raw(buf)))
        }),
        _ => Err(format!("\"{what}\" is not a number (microseconds)")),
    }
}

fn opt_str<'a>(buf: &'a [u8], v: Option<Value>, what: &str) -> Result<std::borrow::Cow<'a, str>, String> {
    match v {
        None | Some(Value::Null) => Ok("".into()),
        Some(Value::Str(s)) => Ok(s.text(buf)),
        Some(_) => Err(format!("\"{what}\" is not a string")),
    }
}

/// The bytes naming a pid/tid (number text or string contents).
fn id_bytes<'a>(buf: &'a [u8], v: Option<Value>, what: &str) -> Result<Option<&'a [u8]>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Num(n)) if n.int => Ok(Some(n.raw(buf))),
        Some(Value::Str(s)) => Ok(Some(s.raw(buf))),
        Some(_) => Err(format!("\"{what}\" is not an integer or a string")),
    }
}

fn id_text(buf: &[u8], v: Option<Value>, what: &str) -> Result<Option<String>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Num(n)) => Ok(Some(String::from_utf8_lossy(n.raw(buf)).into_owned())),
        Some(Value::Str(s)) => Ok(Some(s.text(buf).into_owned())),
        Some(_) => Err(format!("\"{what}\" is not a number or a string")),
    }
}

/// The members of a JSON object text (already validated when it was first read).
fn arg_list(obj: &[u8], out: &mut Vec<(Str, Value)>) {
    out.clear();
    let mut cur = Cursor::new(obj, 0, true);
    if cur.expect(b'{', "{").is_err() {
        return;
    }
    if cur.peek_ws("}") == Ok(b'}') {
        return;
    }
    loop {
        let Ok(k) = cur.string() else { return };
        if cur.expect(b':', ":").is_err() {
            return;
        }
        let Ok(v) = cur.value() else { return };
        out.push((k, v));
        if cur.next_member(b'}', "}") != Ok(true) {
            return;
        }
    }
}

/// Column name for an args key: `prefix` + the key with every byte outside
/// `[A-Za-z0-9_]` replaced by `_`, at most 63 bytes.
pub fn arg_column(prefix: &str, key: &[u8]) -> String {
    let mut s = String::with_capacity(prefix.len() + key.len());
    s.push_str(prefix);
    for &c in key {
        if s.len() >= 63 {
            break;
        }
        s.push(if c.is_ascii_alphanumeric() || c == b'_' { c as char } else { '_' });
    }
    s
}

/// Where `ArgSink::put` writes besides the row: the columns it adds (reported to Python),
/// its scratch for the JSON text of the args left over, and the cap on added columns.
struct ArgSink {
    new_cols: Vec<NewColumn>,
    text: Vec<u8>,
    max_cols: usize,
}

impl ArgSink {
    /// Stores the args of the current row of `t`: typed columns where the key has one and
    /// the value fits it, the rest as a JSON object in column `rem`.
    fn put(&mut self, t: &mut Tbl, end: bool, buf: &[u8], list: &[(Str, Value)], rem: usize) {
        let (new_cols, text, max_cols) = (&mut self.new_cols, &mut self.text, self.max_cols);
        if list.is_empty() {
            return;
        }
        text.clear();
        let mut key_buf = Vec::new();
        for &(k, v) in list {
            let key: &[u8] = if k.escaped {
                key_buf.clear();
                json::unescape_into(k.raw(buf), &mut key_buf);
                &key_buf
            } else {
                k.raw(buf)
            };
            let reg = if end { &mut t.end_args } else { &mut t.args };
            let slot = match reg.map.get(key) {
                Some(&s) => Some(s),
                None => {
                    let ptype = match v {
                        Value::Num(n) if n.int => n.as_i64(buf).map(|_| PType::Int),
                        Value::Num(_) => Some(PType::Float),
                        Value::Bool(_) => Some(PType::Bool),
                        Value::Str(_) => Some(PType::Str),
                        _ => None,
                    };
                    ptype.map(|pt| {
                        let name = arg_column(reg.prefix, key);
                        let s = if t.t.col(&name).is_some() || t.dyn_cols >= max_cols {
                            Slot::Text
                        } else {
                            let i = t.t.add_col(&name, pt);
                            t.dyn_cols += 1;
                            new_cols.push((t.t.name.clone(), name, pt, String::from_utf8_lossy(key).into_owned()));
                            Slot::Col(i)
                        };
                        let reg = if end { &mut t.end_args } else { &mut t.args };
                        reg.map.insert(key.to_vec(), s);
                        s
                    })
                }
            };
            let stored = match slot {
                Some(Slot::Col(c)) if !t.t.is_set(c) => match (t.t.col_type(c), v) {
                    (PType::Int, Value::Num(n)) => match n.as_i64(buf) {
                        Some(x) => {
                            t.t.set_i64(c, x);
                            true
                        }
                        None => false,
                    },
                    (PType::Float, Value::Num(n)) => {
                        t.t.set_f64(c, n.as_f64(buf));
                        true
                    }
                    (PType::Bool, Value::Bool(b)) => {
                        t.t.set_bool(c, b);
                        true
                    }
                    (PType::Str, Value::Str(s)) => {
                        t.t.set_str(c, &s.text(buf));
                        true
                    }
                    _ => false,
                },
                _ => false,
            };
            if !stored {
                text.push(if text.is_empty() { b'{' } else { b',' });
                text.extend_from_slice(k.quoted(buf));
                text.push(b':');
                text.extend_from_slice(v.raw(buf));
            }
        }
        if !text.is_empty() {
            text.push(b'}');
            t.t.set_str(rem, &String::from_utf8_lossy(text));
        }
    }
}

/// Reads one event object at the cursor (which is on its `{`) into `ev`.
fn parse_event(cur: &mut Cursor<'_>, ev: &mut Ev) -> Result<(), JErr> {
    cur.pos += 1;
    if cur.peek_ws("a key or '}'")? == b'}' {
        cur.pos += 1;
        return Ok(());
    }
    loop {
        let k = cur.string()?;
        cur.expect(b':', "':'")?;
        let raw = k.raw(cur.buf);
        let key: &[u8] = if k.escaped { b"" } else { raw };
        if key == b"args" {
            let c = cur.peek_ws("a value")?;
            if c == b'{' {
                let start = cur.pos;
                cur.pos += 1;
                ev.arg_list.clear();
                if cur.peek_ws("a key or '}'")? == b'}' {
                    cur.pos += 1;
                } else {
                    loop {
                        let ak = cur.string()?;
                        cur.expect(b':', "':'")?;
                        let av = cur.value()?;
                        ev.arg_list.push((ak, av));
                        if !cur.next_member(b'}', "',' or '}'")? {
                            break;
                        }
                    }
                }
                ev.args = Some(Value::Nested { start, end: cur.pos, object: true });
            } else {
                ev.args = Some(cur.value()?);
                ev.arg_list.clear();
            }
        } else {
            let v = cur.value()?;
            let slot = match key {
                b"ph" => &mut ev.ph,
                b"ts" => &mut ev.ts,
                b"name" => &mut ev.name,
                b"cat" => &mut ev.cat,
                b"pid" => &mut ev.pid,
                b"tid" => &mut ev.tid,
                b"dur" => &mut ev.dur,
                b"tts" => &mut ev.tts,
                b"tdur" => &mut ev.tdur,
                b"id" => &mut ev.id,
                b"id2" => &mut ev.id2,
                b"s" => &mut ev.s,
                b"bp" => &mut ev.bp,
                b"sf" => &mut ev.sf,
                b"stack" => &mut ev.stack,
                _ => {
                    if !cur.next_member(b'}', "',' or '}'")? {
                        return Ok(());
                    }
                    continue;
                }
            };
            *slot = Some(v);
        }
        if !cur.next_member(b'}', "',' or '}'")? {
            return Ok(());
        }
    }
}

pub mod decl;
pub mod export;
#[cfg(test)]
mod tests;

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
