//! `perf script` output: Linux perf's samples with their call stacks, and tracepoint events.
//!
//! Owns the streaming parse of the text `perf script` prints for a `perf record` (with `-g` or
//! without) into two event types (declared in `decl.rs`): `sample` (a counter's sample: its
//! CPU, event, period and call stack) and `tracepoint` (a tracepoint's record: its fields as
//! printed, and its stack when recorded with `-g`). A record is a header line then, with a
//! call graph, one frame per line and a blank line:
//!
//! ```text
//! python3  18242/18243 [001]  8762.807921:    1001001 cpu-clock:ppp:
//!     ffffffff815ffded unmap_page_range+0x51d ([kernel.kallsyms])
//!                d4ad7 __GI___execve+0x7 (/usr/lib/x86_64-linux-gnu/libc.so.6)
//! ```
//!
//! (frame lines start with a tab). The header is `COMM PID[/TID] [CPU] TIME: [PERIOD] EVENT:
//! [REST]`, as perf prints it by default and with `-F` fields added or removed: the command name
//! may hold spaces (it is everything before the pid), the pid/tid, CPU and period are optional,
//! the time (seconds, any number of decimals: `--ns` prints nine) is exact integer nanoseconds.
//! An event whose name is `subsystem:name` (`sched:sched_switch`) is a tracepoint, whose REST
//! is its fields; one whose name is a counter with modifiers (`cycles:u`, `cpu-clock:ppp`) or
//! none (`instructions`) is a sample, whose REST is its one frame when there is no call graph.
//! A frame is `ADDRESS SYMBOL[+OFFSET] (DSO)`; the stack keeps symbols root first, joined by
//! `;` (the folded form of flamegraph.pl: offsets dropped, `;` in a name written `:`, an
//! unknown symbol named by its object as `[libc.so.6]`), so a flame graph is a GROUP BY.
//! Producers are the threads (named by their last command name), under their process when
//! perf printed pids. Side-band records (`PERF_RECORD_*` of `--show-task-events`) and lines
//! below a frame that are not frames (`-F +srcline`) are counted and skipped; any other line
//! is rejected with its number.

use arrow_array::RecordBatch;

use super::parser::{Attr, Problem, ProducerRow, Rejects};
use super::table::{FastMap, Table};
use super::{Item, TextInput};

pub mod decl;
#[cfg(test)]
mod tests;

/// Index of `sample` and `tracepoint` in [`decl::PERF`]'s event types.
const T_SAMPLE: usize = 0;
const T_TRACEPOINT: usize = 1;
/// Columns of both tables (their parameters, after ts, producer, seq).
const C_CPU: usize = 3;
const C_EVENT: usize = 4;
/// `period` in `sample`, `fields` in `tracepoint`.
const C_PERIOD_OR_FIELDS: usize = 5;
const C_LEAF: usize = 6;
const C_DSO: usize = 7;
const C_STACK: usize = 8;
const C_DEPTH: usize = 9;
/// Bytes of string data after which a batch is cut whatever its rows.
const MAX_STR_BYTES: usize = 64 << 20;
/// Frames kept per stack; deeper ones are counted (perf's own default limit is 127).
const MAX_FRAMES: usize = 4096;

/// A thread met in the input.
#[derive(Debug, Clone)]
struct Thread {
    tid: i64,
    pid: Option<i64>,
    comm: String,
    seq: i64,
}

/// The record being read: its header's fields, then its frames.
#[derive(Debug, Default)]
struct Record {
    open: bool,
    tracepoint: bool,
    line: u64,
    ts: i64,
    producer: i32,
    cpu: Option<i64>,
    period: Option<i64>,
    event: String,
    fields: String,
    /// Symbols (folded form) of the frames, leaf first, in `syms` at these ranges.
    frames: Vec<(usize, usize)>,
    syms: String,
    leaf_dso: String,
    deeper: u64,
}

/// The streaming `perf script` parser.
pub struct PerfParser {
    strict: bool,
    batch_rows: usize,
    input: TextInput,
    line: u64,
    tables: [Table; 2],
    rec: Record,
    stack: String,
    threads: Vec<Thread>,
    by_tid: FastMap<i64, i32>,
    tok: Vec<(usize, usize)>,
    rejects: Rejects,
    samples: u64,
    tracepoints: u64,
    frames: u64,
    side_band: u64,
    other_lines: u64,
    truncated_stacks: u64,
    binary: bool,
}

impl PerfParser {
    /// A parser cutting batches of `batch_rows` rows; lines longer than `max_line` bytes are
    /// rejected.
    pub fn new(strict: bool, batch_rows: usize, max_line: usize) -> Self {
        let cap = batch_rows.min(1 << 16);
        let t = |i: usize| {
            let et = &decl::PERF.event_types[i];
            Table::new(et.name, et.is_span(), &et.columns(), cap)
        };
        PerfParser {
            strict,
            batch_rows: batch_rows.max(1),
            input: TextInput::new(max_line.max(1)),
            line: 0,
            tables: [t(T_SAMPLE), t(T_TRACEPOINT)],
            rec: Record::default(),
            stack: String::new(),
            threads: Vec::new(),
            by_tid: FastMap::default(),
            tok: Vec::new(),
            rejects: Rejects::default(),
            samples: 0,
            tracepoints: 0,
            frames: 0,
            side_band: 0,
            other_lines: 0,
            truncated_stacks: 0,
            binary: false,
        }
    }

    /// Parses a chunk (cut anywhere).
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.rejects.fatal.is_some() {
            return;
        }
        let mut input = std::mem::replace(&mut self.input, TextInput::new(1));
        input.feed(chunk, |it| self.item(it));
        self.input = input;
    }

    /// Ends the input: the last line and the last record.
    pub fn finish(&mut self) {
        if self.rejects.fatal.is_none() {
            let mut input = std::mem::replace(&mut self.input, TextInput::new(1));
            input.finish(|it| self.item(it));
            self.input = input;
        }
        if self.rejects.fatal.is_none() {
            self.emit();
        }
    }

    /// Batches that reached the batch size (all non-empty ones when `all`).
    pub fn take_batches(&mut self, all: bool) -> Vec<(String, RecordBatch)> {
        let mut out = Vec::new();
        for t in &mut self.tables {
            if all || t.rows() >= self.batch_rows || t.str_bytes >= MAX_STR_BYTES {
                if let Some(b) = t.take() {
                    out.push((t.name.clone(), b));
                }
            }
        }
        out
    }

    fn item(&mut self, it: Item<'_>) -> bool {
        self.line += 1;
        match it {
            Item::Binary => {
                self.binary = true;
                self.reject("binary data, not perf script text (perf.data itself? run `perf script` on it)".into());
                false
            }
            Item::TooLong(max) => {
                self.reject(format!("line longer than {max} bytes"));
                self.rejects.fatal.is_none()
            }
            Item::Line(l) => {
                self.line_of(l);
                self.rejects.fatal.is_none()
            }
        }
    }

    fn line_of(&mut self, l: &[u8]) {
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        match l.first() {
            None => self.emit(),
            Some(b' ' | b'\t') => {
                if l.iter().all(|b| b.is_ascii_whitespace()) {
                    self.emit();
                } else if self.rec.open {
                    self.frame(l);
                } else {
                    self.reject("a call-stack frame outside a sample (expected a header line first)".into());
                }
            }
            Some(b'#') if !self.rec.open => {} // perf script --header, comments
            Some(_) => {
                self.emit();
                self.header(l);
            }
        }
    }

    fn reject(&mut self, reason: String) {
        let p = Problem::at_line(self.line, reason);
        self.rejects.reject(self.strict, p);
    }

    /// Reads a header line: a new record opens (or a side-band one is skipped).
    fn header(&mut self, l: &[u8]) {
        let mut tok = std::mem::take(&mut self.tok);
        let h = parse_header(l, &mut tok);
        self.tok = tok;
        let Some(h) = h else {
            self.reject(
                "expected a perf script record: COMM PID[/TID] [CPU] TIME: [PERIOD] EVENT: ... \
                 (or a call-stack frame, indented, below one)"
                    .into(),
            );
            return;
        };
        if h.event.starts_with(b"PERF_RECORD_") {
            self.side_band += 1;
            return;
        }
        let comm = text(h.comm);
        let producer = self.producer(h.pid, h.tid, &comm);
        let r = &mut self.rec;
        r.open = true;
        r.line = self.line;
        r.ts = h.ts;
        r.producer = producer;
        r.cpu = h.cpu;
        r.period = h.period;
        r.event.clear();
        r.event.push_str(&text(h.event));
        r.tracepoint = is_tracepoint(h.event);
        r.fields.clear();
        r.frames.clear();
        r.syms.clear();
        r.leaf_dso.clear();
        r.deeper = 0;
        let rest = trim(h.rest);
        if r.tracepoint {
            r.fields.push_str(&text(rest));
        } else if !rest.is_empty() {
            // No call graph: the sample's one frame is on the header line (or other fields: skipped).
            if parse_frame(rest).is_some() {
                self.frame(rest);
            }
        }
    }

    /// Adds a frame line to the open record.
    fn frame(&mut self, l: &[u8]) {
        let Some((sym, dso)) = parse_frame(trim(l)) else {
            self.other_lines += 1; // -F +srcline's file:line, --show-* extras
            return;
        };
        self.frames += 1;
        let r = &mut self.rec;
        if r.frames.len() >= MAX_FRAMES {
            r.deeper += 1;
            return;
        }
        if r.frames.is_empty() {
            r.leaf_dso.push_str(&text(dso));
        }
        let start = r.syms.len();
        fold_symbol(sym, dso, &mut r.syms);
        r.frames.push((start, r.syms.len()));
    }

    /// Ends the open record: one row of its type.
    fn emit(&mut self) {
        if !self.rec.open {
            return;
        }
        let r = &mut self.rec;
        r.open = false;
        if r.deeper > 0 {
            self.truncated_stacks += 1;
        }
        self.stack.clear();
        for (i, &(a, b)) in r.frames.iter().rev().enumerate() {
            if i > 0 {
                self.stack.push(';');
            }
            self.stack.push_str(&r.syms[a..b]);
        }
        let seq = {
            let th = &mut self.threads[r.producer as usize];
            th.seq += 1;
            th.seq - 1
        };
        let (ti, fixed) = if r.tracepoint { (T_TRACEPOINT, true) } else { (T_SAMPLE, false) };
        let t = &mut self.tables[ti];
        t.start(r.ts, r.producer, seq);
        if let Some(c) = r.cpu {
            t.set_i64(C_CPU, c);
        }
        t.set_str(C_EVENT, &r.event);
        if fixed {
            t.set_str(C_PERIOD_OR_FIELDS, &r.fields);
            self.tracepoints += 1;
        } else {
            if let Some(p) = r.period {
                t.set_i64(C_PERIOD_OR_FIELDS, p);
            }
            self.samples += 1;
        }
        if let Some(&(a, b)) = r.frames.first() {
            t.set_str(C_LEAF, &r.syms[a..b]);
            t.set_str(C_DSO, &r.leaf_dso);
            t.set_str(C_STACK, &self.stack);
        }
        t.set_i64(C_DEPTH, r.frames.len() as i64 + r.deeper as i64);
        t.end();
    }

    /// The producer of (pid, tid): the thread, under its process when the pid is known.
    fn producer(&mut self, pid: Option<i64>, tid: i64, comm: &str) -> i32 {
        if let Some(&id) = self.by_tid.get(&tid) {
            let th = &mut self.threads[id as usize];
            if th.comm != comm {
                th.comm.clear();
                th.comm.push_str(comm);
            }
            if th.pid.is_none() {
                th.pid = pid;
            }
            return id;
        }
        let id = self.threads.len() as i32;
        self.threads.push(Thread { tid, pid, comm: comm.to_string(), seq: 0 });
        self.by_tid.insert(tid, id);
        id
    }
}

/// The fields of a header line.
struct Header<'a> {
    comm: &'a [u8],
    pid: Option<i64>,
    tid: i64,
    cpu: Option<i64>,
    ts: i64,
    period: Option<i64>,
    event: &'a [u8],
    rest: &'a [u8],
}

/// Splits `l` into (start, end) of its space-separated tokens.
fn tokens(l: &[u8], out: &mut Vec<(usize, usize)>) {
    out.clear();
    let mut i = 0;
    while i < l.len() {
        while i < l.len() && (l[i] == b' ' || l[i] == b'\t') {
            i += 1;
        }
        let s = i;
        while i < l.len() && l[i] != b' ' && l[i] != b'\t' {
            i += 1;
        }
        if i > s {
            out.push((s, i));
        }
    }
}

/// `SECONDS.FRACTION:` as nanoseconds.
fn time_token(t: &[u8]) -> Option<i64> {
    let t = t.strip_suffix(b":")?;
    let dot = t.iter().position(|&b| b == b'.')?;
    let (s, f) = (&t[..dot], &t[dot + 1..]);
    if s.is_empty() || s.len() > 11 || f.is_empty() || f.len() > 9 {
        return None;
    }
    if !s.iter().chain(f).all(u8::is_ascii_digit) {
        return None;
    }
    let secs: i64 = s.iter().fold(0, |a, &b| a * 10 + (b - b'0') as i64);
    let mut frac: i64 = f.iter().fold(0, |a, &b| a * 10 + (b - b'0') as i64);
    for _ in f.len()..9 {
        frac *= 10;
    }
    secs.checked_mul(1_000_000_000)?.checked_add(frac)
}

fn int(t: &[u8]) -> Option<i64> {
    let (neg, d) = match t.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, t),
    };
    if d.is_empty() || d.len() > 18 || !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = d.iter().fold(0i64, |a, &b| a * 10 + (b - b'0') as i64);
    Some(if neg { -v } else { v })
}

/// `PID`, `PID/TID` or `-1/-1` as (pid, tid); a lone number is the tid (perf script's default
/// prints the thread id only).
fn ids(t: &[u8]) -> Option<(Option<i64>, i64)> {
    match t.iter().position(|&b| b == b'/') {
        Some(p) => Some((Some(int(&t[..p])?), int(&t[p + 1..])?)),
        None => Some((None, int(t)?)),
    }
}

/// `[CPU]` as the CPU number.
fn cpu_token(t: &[u8]) -> Option<i64> {
    int(t.strip_prefix(b"[")?.strip_suffix(b"]")?)
}

/// The fields of a header line, None when it is not one (`tok`: a buffer for its tokens). The
/// leftmost `ids [cpu] time:` run of tokens anchors it: everything before the ids is the
/// command name.
fn parse_header<'a>(l: &'a [u8], tok: &mut Vec<(usize, usize)>) -> Option<Header<'a>> {
    {
        tokens(l, tok);
        let t = |i: usize| &l[tok[i].0..tok[i].1];
        for j in 1..tok.len() {
            let Some(ts) = time_token(t(j)) else { continue };
            let (cpu, idx) = match cpu_token(t(j - 1)) {
                Some(c) if j >= 2 => (Some(c), j - 2),
                _ => (None, j - 1),
            };
            let Some((pid, tid)) = ids(t(idx)) else { continue };
            let comm = trim(&l[..tok[idx].0]);
            let mut k = j + 1;
            let mut period = None;
            if k < tok.len() && !t(k).ends_with(b":") {
                period = Some(int(t(k))?);
                k += 1;
            }
            if k >= tok.len() {
                return None;
            }
            let event = t(k).strip_suffix(b":")?;
            if event.is_empty() {
                return None;
            }
            let rest = &l[tok[k].1..];
            return Some(Header { comm, pid, tid, cpu, ts, period, event, rest });
        }
        None
    }
}

/// Whether an event is a tracepoint (`sched:sched_switch`, `probe_libc:malloc`) rather than
/// a counter with modifiers (`cycles:u`, `cpu-clock:ppp`) or without (`instructions`,
/// `cpu/cycles/`).
fn is_tracepoint(event: &[u8]) -> bool {
    let Some(c) = event.iter().rposition(|&b| b == b':') else { return false };
    if event.contains(&b'/') {
        return false; // a PMU event: cpu/event=0x3c/u
    }
    let mods = &event[c + 1..];
    mods.is_empty() || !mods.iter().all(|b| b"ukhIGHpPSDWeb".contains(b))
}

/// A frame `ADDRESS SYMBOL[+0xOFF] (DSO)` as (symbol with its offset, dso); the dso is the
/// last balanced parenthesised group (a C++ symbol has its own, a dso may end in `(deleted)`).
fn parse_frame(l: &[u8]) -> Option<(&[u8], &[u8])> {
    let sp = l.iter().position(|&b| b == b' ').unwrap_or(l.len());
    let addr = &l[..sp];
    if addr.is_empty() || !addr.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let rest = trim(&l[sp..]);
    if rest.is_empty() {
        return Some((b"[unknown]", b""));
    }
    if rest.last() == Some(&b')') {
        let mut depth = 0usize;
        for i in (0..rest.len()).rev() {
            match rest[i] {
                b')' => depth += 1,
                b'(' => {
                    depth -= 1;
                    if depth == 0 {
                        let sym = trim(&rest[..i]);
                        return Some((if sym.is_empty() { b"[unknown]" } else { sym }, &rest[i + 1..rest.len() - 1]));
                    }
                }
                _ => {}
            }
        }
    }
    Some((rest, b""))
}

/// Appends the folded form of a frame's symbol: the `+0xOFF` dropped, `;` written `:`, an
/// unknown symbol named `[<dso file name>]`.
fn fold_symbol(sym: &[u8], dso: &[u8], out: &mut String) {
    let sym = match sym.iter().rposition(|&b| b == b'+') {
        Some(p) if sym[p + 1..].starts_with(b"0x") && sym[p + 3..].iter().all(u8::is_ascii_hexdigit) => &sym[..p],
        _ => sym,
    };
    if sym == b"[unknown]" && !dso.is_empty() && dso != b"[unknown]" {
        let base = dso.rsplit(|&b| b == b'/').next().unwrap_or(dso);
        let base = base.strip_prefix(b"[").and_then(|b| b.strip_suffix(b"]")).unwrap_or(base);
        out.push('[');
        out.push_str(&text(base));
        out.push(']');
        return;
    }
    let s = text(sym);
    if s.contains(';') {
        out.push_str(&s.replace(';', ":"));
    } else {
        out.push_str(&s);
    }
}

fn trim(b: &[u8]) -> &[u8] {
    let s = b.iter().position(|c| !c.is_ascii_whitespace()).unwrap_or(b.len());
    let e = b.iter().rposition(|c| !c.is_ascii_whitespace()).map_or(s, |e| e + 1);
    &b[s..e.max(s)]
}

fn text(b: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(b)
}

super::chunk_parser!(PerfParser {
    /// The threads (kind `thread`, named by their last command name; attrs tid, pid), each under
    /// its process (kind `process`, named by its main thread's command, attr pid) when perf
    /// printed pids.
    fn producers(&self) -> Vec<ProducerRow> {
        let mut out: Vec<ProducerRow> = Vec::with_capacity(self.threads.len());
        let mut procs: FastMap<i64, i32> = FastMap::default();
        let mut extra: Vec<ProducerRow> = Vec::new();
        let first_proc = self.threads.len() as i32;
        for th in &self.threads {
            let parent = th.pid.map(|pid| {
                *procs.entry(pid).or_insert_with(|| {
                    let id = first_proc + extra.len() as i32;
                    let name = self
                        .by_tid
                        .get(&pid)
                        .map(|&t| self.threads[t as usize].comm.clone())
                        .unwrap_or_else(|| th.comm.clone());
                    extra.push(ProducerRow {
                        id,
                        parent: None,
                        kind: "process".into(),
                        name,
                        attrs: vec![("pid".into(), Attr::Int(pid))],
                    });
                    id
                })
            });
            let mut attrs = vec![("tid".to_string(), Attr::Int(th.tid))];
            if let Some(pid) = th.pid {
                attrs.push(("pid".into(), Attr::Int(pid)));
            }
            let name = if th.comm.is_empty() { format!("tid {}", th.tid) } else { th.comm.clone() };
            out.push(ProducerRow { id: out.len() as i32, parent, kind: "thread".into(), name, attrs });
        }
        out.extend(extra);
        out
    }

    fn stats(&self) -> Vec<(String, u64)> {
        [
            ("lines", self.line),
            ("samples", self.samples),
            ("tracepoints", self.tracepoints),
            ("frames", self.frames),
            ("side_band_records", self.side_band),
            ("other_lines", self.other_lines),
            ("truncated_stacks", self.truncated_stacks),
            ("rejected", self.rejects.count),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    fn problems(&self) -> Vec<Problem> {
        self.rejects.first.clone()
    }

    fn fatal(&self) -> Option<Problem> {
        self.rejects.fatal.clone()
    }
});
