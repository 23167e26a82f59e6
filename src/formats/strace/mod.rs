//! strace output (seed 002: the IO traces a replayer needs) to Arrow record batches.
//!
//! Owns [`StraceParser`]: byte chunks of any size in (partial lines are kept across
//! chunk boundaries), batches of three event types out ([`EVENT_TYPES`], schemas in
//! [`schema`]):
//!
//! - `syscall` (span): every syscall line, typed. `fd`, `path` (from `-y`, else from
//!   the per-process fd table, else the path argument resolved against its directory
//!   fd or the working directory), `path2` (rename/link targets), `pos` (explicit
//!   for pread/pwrite/lseek/mmap, the tracked file position for read/write), `size`
//!   (bytes requested), `ret`, `errno`, `flags` and, for calls whose arguments are not
//!   all typed, `args` as strace printed them. Calls that move bytes between two fds
//!   (copy_file_range, splice, sendfile, tee) put the source in `fd`/`path`/`pos` and
//!   the destination in `fd2`/`path2`/`pos2`. `path_arg`/`path2_arg` keep the path
//!   arguments as the program passed them (relative, through symlinks) beside the
//!   resolved `path`/`path2`.
//! - `signal` (instant): `--- SIGX {...} ---` lines.
//! - `exit` (instant): `+++ exited with N +++` / `+++ killed by SIGX +++` lines.
//!
//! Accepted output: `-f` (pid column, `[pid N]` too), `-ff -o prefix` (one source per
//! file, merged by timestamp as `strace-log-merge` does: feed each file as its own
//! source with its pid), `-t`/`-tt`/`-ttt`, `--timestamps=unix|time,s|ms|us|ns`,
//! `-T`/`--syscall-times` (any precision), `-y`, `-s N`, `-i`, `-n`. An `<unfinished
//! ...>` line is paired with the `<... NAME resumed>` line of the same pid: the event
//! starts at the first line, its arguments are both halves joined. Without `-T` a
//! paired call lasts from its first to its last line and a one-line call 0 ns.
//!
//! Bad lines never stop the parser: each is counted and the first few kept with
//! source, line number and reason ([`StraceParser::rejects`]); the caller decides
//! whether that is fatal (`--strict`). Lines longer than [`Config::max_line`] are
//! rejected without being buffered, so memory stays bounded by the chunk, the batch
//! and the longest accepted line.
//!
//! Work is split in two stages: what a line says on its own (`Pre`: the split and,
//! for a complete call, its parsed arguments and result) and what needs the state
//! (pairing, fd tables, producers, rows). For a big chunk a second thread runs the
//! first stage on most of it while this one runs both stages on the rest; the second thread
//! also joins and parses the `<unfinished ...>`/`<... resumed>` pairs it sees whole (`PreJoin`). Rows are
//! kept in start order and cut into batches already sorted by `ts` (see `rows.rs`);
//! the few calls blocked for longer than two batches come last ([`StraceParser::take_late`]).
//! A file parsed on its own thread (`background.rs`) has its cuts built into record batches on
//! a third (`StraceParser::build_elsewhere`): the rows and their strings move there uncopied.
//!
//! This file owns the parser's state and the stateful half of a line (pairing, producers);
//! `input.rs` cuts chunks into lines and merges -ff sources, `stage.rs` is the first stage and
//! the joins of the second thread, `calls.rs` types a call into its row, `line.rs` splits a line,
//! `names.rs` names syscalls, `procs.rs` tracks processes, `rows.rs` builds the batches; tests
//! are in tests.rs.

pub mod background;
mod calls;
pub mod decl;
mod input;
mod line;
mod names;
mod procs;
mod rows;
mod stage;
#[cfg(test)]
mod tests;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use arrow_array::RecordBatch;

use line::{arg_int, offset_ptr, parse_call, parse_fd, quoted, split_line, unescape_into, Body, Call, Stamp};
use names::{Names, Sc};
use procs::{CloneFlags, Procs};
use rows::{Cut, Kind, Row, Rows, Str, NULL};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::Mutex;

pub use procs::Producer;
pub use rows::{schema, EVENT_TYPES};
use stage::{pre, pre_into, Pre, PreJoin, Spare, SPARE};

/// `AT_FDCWD` as a number.
const AT_FDCWD: i64 = -100;
/// A day in ns (time-of-day stamps roll over at midnight).
const DAY_NS: i64 = 86_400_000_000_000;
/// Bytes of strings held before a batch is cut whatever its row count (keeps Arrow's
/// 32-bit string offsets far from overflow and memory bounded with huge lines).
const ARENA_LIMIT: usize = 64 << 20;
/// Chunks at least this big have their stage A split with a second thread.
const PARALLEL_MIN: usize = 256 << 10;
/// Bytes of lines the second thread pre-parses per message (a few thousand lines).
const PART: usize = 256 << 10;

/// Parser settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Rows per emitted batch (a cut may hold back rows after an unfinished call).
    pub batch_rows: usize,
    /// Longest line accepted, in bytes; longer ones are rejected and skipped.
    pub max_line: usize,
    /// How many rejected lines are kept with their reason (all are counted).
    pub keep_rejects: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { batch_rows: 1 << 16, max_line: 16 << 20, keep_rejects: 10 }
    }
}

/// A rejected line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reject {
    /// Index of the source (file) it came from.
    pub source: usize,
    /// 1-based line number in that source.
    pub line: u64,
    /// Why it was rejected.
    pub reason: String,
}

/// Counters over everything fed so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Lines read (every newline, plus a last line without one).
    pub lines: u64,
    /// Bytes fed.
    pub bytes: u64,
    /// Events emitted, by type (in [`EVENT_TYPES`] order).
    pub events: [u64; 3],
    /// Rejected lines.
    pub rejected: u64,
    /// Lines of strace's own messages (`strace: Process N attached`, the `-C` summary
    /// table), skipped.
    pub notes: u64,
    /// `<... resumed>` lines with no `<unfinished ...>` before them (a trace that starts
    /// mid-call); recorded with what they hold.
    pub orphans: u64,
    /// Calls whose `<... resumed>` never came (the thread was killed, or the trace
    /// ended); recorded with a null `ret`.
    pub unfinished: u64,
}

/// A thread's call waiting for its `<... resumed>` line (one per thread index; the
/// buffer is reused).
#[derive(Default)]
struct Pending {
    active: bool,
    ts: i64,
    name: u32,
    sc: Option<Sc>,
    /// Row reserved for it.
    slot: u64,
    partial: Vec<u8>,
    /// Address of the `<unfinished ...>` line's partial arguments in the chunk being parsed (0:
    /// not from this chunk's lines): the second thread's join of a pair is used only when it
    /// joined these very bytes (see `PreJoin`).
    from: usize,
    /// A close applied to the fd table when it started: the path the fd had then.
    closed: Option<Option<Box<[u8]>>>,
}

/// One input stream (a file, a pipe).
#[derive(Default)]
struct Source {
    /// Unconsumed bytes (a partial line; in merge mode, whole lines too).
    buf: Vec<u8>,
    /// Start of the unconsumed bytes in `buf` (merge mode).
    start: usize,
    eof: bool,
    done: bool,
    /// Lines seen.
    line: u64,
    /// Tid of lines without a pid column (`-ff` files: the file name's suffix).
    pid: Option<u32>,
    /// Discarding the rest of an overlong line.
    skipping: bool,
    /// Inside a `-c`/`-C` summary table (until its `total` line).
    summary: bool,
    /// Time-of-day rollover: days added, and the last stamp.
    day: i64,
    last_ts: i64,
    /// Merge mode: the adjusted stamp of the next line, computed when it was queued.
    next_ts: Option<i64>,
}

/// Parses strace output into record batches. See the module documentation.
pub struct StraceParser {
    cfg: Config,
    sources: Vec<Source>,
    names: Names,
    procs: Procs,
    rows: Rows,
    seq: Vec<i64>,
    /// By thread index.
    pending: Vec<Pending>,
    out: Vec<(&'static str, RecordBatch)>,
    rejects: Vec<Reject>,
    stats: Stats,
    scratch: Vec<u8>,
    next_cut: usize,
    last_ts: i64,
    /// Batches of rows set aside (see rows.rs), handed over after `finish`.
    late: Vec<(&'static str, RecordBatch)>,
    finished: bool,
    /// Merge mode: sources with a complete next line, by its timestamp.
    heap: BinaryHeap<Reverse<(i64, u32)>>,
    /// Merge mode: sources that need a chunk before the next line can be chosen.
    need: Vec<u32>,
    /// Pairs whose join and parse the second thread did (`PreJoin`), for the tests.
    pre_joined: u64,
    /// Emptied buffers of the second thread's parts, kept for the next chunk (see `Spare`).
    spare: Vec<Spare<'static>>,
    /// Where cuts are built when not here ([`StraceParser::build_elsewhere`]).
    builder: Option<Builder>,
}

/// A cut handed to a builder on another thread ([`StraceParser::build_elsewhere`]).
struct BuildJob {
    cut: Cut,
    /// Names interned since the previous job (ids follow on).
    names: Vec<Box<[u8]>>,
    /// Lines read when the cut was made.
    lines: u64,
    /// Lines rejected when the cut was made.
    rejected: u64,
}

/// What a parser hands to its builder: a cut, or (sent by the parser's owner) the end.
enum ToBuilder {
    Cut(BuildJob),
    End(Result<Box<StraceParser>, String>),
}

struct Builder {
    jobs: SyncSender<ToBuilder>,
    /// (in a Mutex only so the parser stays Sync for the Python object holding it)
    spares: Mutex<Receiver<(Vec<Row>, Vec<u8>)>>,
    names_sent: usize,
}

impl StraceParser {
    /// A parser over one source per entry of `pids`: `Some(tid)` for a source whose lines
    /// have no pid column (`-ff` files), `None` otherwise. With several sources, lines
    /// are merged by timestamp.
    pub fn new(cfg: Config, pids: &[Option<u32>]) -> Self {
        let pids: Vec<Option<u32>> = if pids.is_empty() { vec![None] } else { pids.to_vec() };
        let n = pids.len();
        let sources = pids.into_iter().map(|pid| Source { pid, ..Default::default() }).collect();
        let next_cut = cfg.batch_rows.max(1);
        // Room for the rows a cut may hold (forced at 2 batches, checked every quarter batch:
        // `put`), up to 256K (more grow as needed).
        let room = (cfg.batch_rows * 5 / 2).min(256 << 10);
        StraceParser {
            cfg,
            sources,
            names: Names::new(),
            procs: Procs::new(),
            rows: Rows::with_capacity(room, room * 64),
            seq: Vec::new(),
            pending: Vec::new(),
            out: Vec::new(),
            rejects: Vec::new(),
            stats: Stats::default(),
            scratch: Vec::new(),
            next_cut,
            last_ts: 0,
            late: Vec::new(),
            finished: false,
            heap: BinaryHeap::new(),
            need: (0..n as u32).collect(),
            pre_joined: 0,
            spare: Vec::new(),
            builder: None,
        }
    }

    /// Number of sources.
    pub fn sources(&self) -> usize {
        self.sources.len()
    }

    /// The source that must be fed next, or None when every source has reached its end
    /// (call [`StraceParser::finish`]). With one source this is always 0 until its end.
    pub fn need(&self) -> Option<usize> {
        self.need.first().map(|&i| i as usize)
    }

    /// Feeds the next chunk of source `src`; an empty chunk marks its end.
    pub fn feed(&mut self, src: usize, chunk: &[u8]) {
        assert!(!self.finished, "feed after finish");
        self.stats.bytes += chunk.len() as u64;
        if self.sources.len() == 1 {
            self.feed_single(chunk);
        } else {
            self.feed_merge(src, chunk);
        }
    }

    /// Ends the input: calls still unfinished are recorded, every row is emitted.
    pub fn finish(&mut self) {
        if self.finished {
            return;
        }
        for i in 0..self.sources.len() {
            if !self.sources[i].eof {
                self.feed(i, &[]);
            }
        }
        for t in 0..self.pending.len() {
            if self.pending[t].active {
                let end = self.last_ts;
                self.unresumed(t as u32, end);
            }
        }
        self.cut(true);
        for (name, b) in self.rows.take_aside(&self.names) {
            let k = EVENT_TYPES.iter().position(|n| *n == name).unwrap_or(0);
            self.stats.events[k] += b.num_rows() as u64;
            self.late.push((name, b));
        }
        self.finished = true;
    }

    /// Cuts every row held into batches now (for [`StraceParser::take_batches`]), the input
    /// going on: a pipe's lines are committed as they arrive. A call not yet resumed is let
    /// go as at a forced cut (its row, once complete, is set aside for
    /// [`StraceParser::take_late`]).
    pub fn drain(&mut self) {
        if !self.finished && !self.rows.is_empty() {
            self.cut(true);
        }
    }

    /// Batches completed so far, as (event type, batch), emptied by the call.
    pub fn take_batches(&mut self) -> Vec<(&'static str, RecordBatch)> {
        std::mem::take(&mut self.out)
    }

    /// After [`StraceParser::finish`]: the rows of calls that stayed unfinished for more
    /// than two batches, sorted by `ts` but older than rows already emitted. Stored as a
    /// checkpoint of their own they keep every other one in order (see rows.rs).
    pub fn take_late(&mut self) -> Vec<(&'static str, RecordBatch)> {
        std::mem::take(&mut self.late)
    }

    /// The first rejected lines (at most [`Config::keep_rejects`]).
    pub fn rejects(&self) -> &[Reject] {
        &self.rejects
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Every process and thread seen so far, by producer id.
    pub fn producers(&self) -> Vec<Producer> {
        self.procs.producers()
    }

    // -- one line ------------------------------------------------------------------

    fn reject_at(&mut self, src: usize, line: u64, reason: String) {
        self.stats.rejected += 1;
        if self.rejects.len() < self.cfg.keep_rejects {
            self.rejects.push(Reject { source: src, line, reason });
        }
    }

    fn line(&mut self, src: usize, text: &[u8]) {
        self.line_pre(src, &pre(text));
    }

    /// The stateful half of a line (stage B): `p` holds what the line alone says.
    ///
    /// By reference: a `Pre` is a few hundred bytes, moving each one out of the worker's
    /// vector cost a tenth of the parse in memcpy.
    fn line_pre(&mut self, src: usize, p: &Pre<'_>) {
        let s = &mut self.sources[src];
        s.line += 1;
        self.stats.lines += 1;
        let no = s.line;
        let (text, head, call, joined_from) = match p {
            Pre::Blank => return,
            Pre::Line { text, head, call, from } => (*text, head, call, *from),
        };
        // The -c/-C summary table (written to the same file by `-C -o FILE`).
        let first = text.first().copied().unwrap_or(b' ');
        if s.summary
            || (first == b'%' && text.starts_with(b"% time "))
            || (first == b'S' && text.starts_with(b"System call usage summary"))
        {
            s.summary = !line::trim_end(text).ends_with(b" total");
            self.stats.notes += 1;
            return;
        }
        let (prefix, body) = match head {
            Ok((prefix, body)) => (prefix, *body),
            Err(reason) => return self.reject_at(src, no, reason.to_string()),
        };
        if let Body::Note = body {
            self.stats.notes += 1;
            return;
        }
        let s = &mut self.sources[src];
        let ts = match (s.next_ts.take(), prefix.stamp) {
            (Some(t), _) => t,
            (None, Stamp::Epoch(t)) => t,
            (None, Stamp::Tod(t)) => tod_adjust(&mut s.day, s.last_ts, t),
            (None, Stamp::None) => {
                let reason = "no timestamp (capture with -ttt, -tt or --timestamps=unix,ns)";
                return self.reject_at(src, no, reason.into());
            }
        };
        s.last_ts = ts;
        if ts > self.last_ts {
            self.last_ts = ts;
        }
        let tid = prefix.pid.or(s.pid).unwrap_or(0);
        match body {
            Body::Call { name, tail } => {
                let Some((id, sc)) = self.names.get(name) else {
                    return self.reject_at(src, no, "too many distinct syscall names".into());
                };
                let parsed;
                let call = match call {
                    Some(c) if joined_from == 0 => c,
                    _ => {
                        parsed = parse_call(tail);
                        &parsed
                    }
                };
                match call {
                    Ok(call) => {
                        let t = self.procs.thread(tid);
                        // A new call while one is unfinished: the old one never resumed.
                        self.unresumed(t, ts);
                        self.syscall(t, ts, 0, id, sc, call, None);
                    }
                    Err(reason) => self.reject_at(src, no, (*reason).into()),
                }
            }
            Body::Unfinished { name, partial } => {
                let Some((id, sc)) = self.names.get(name) else {
                    return self.reject_at(src, no, "too many distinct syscall names".into());
                };
                let t = self.procs.thread(tid);
                self.unresumed(t, ts);
                if sc == Sc::Clone || sc == Sc::Fork {
                    let flags = if sc == Sc::Clone {
                        CloneFlags::from_args(partial)
                    } else {
                        CloneFlags { thread: false, files: false }
                    };
                    self.procs.clone_started(tid, flags);
                }
                // The kernel takes the fd out of the table as close() starts (the rest is
                // flushing): another thread's open may get the number before this close
                // returns, so the table forgets the fd now, not at `<... close resumed>`.
                let closed = if sc == Sc::Close { Some(self.close_fd(t, partial)) } else { None };
                let slot = self.rows.reserve(ts, self.procs.producer(t), id);
                let p = self.pending_mut(t);
                p.closed = closed;
                p.from = partial.as_ptr() as usize;
                p.active = true;
                p.ts = ts;
                p.name = id;
                p.sc = Some(sc);
                p.slot = slot;
                p.partial.clear();
                p.partial.extend_from_slice(partial);
            }
            Body::Resumed { name, tail } => {
                let Some((id, sc)) = self.names.get(name) else {
                    return self.reject_at(src, no, "too many distinct syscall names".into());
                };
                let t = self.procs.thread(tid);
                // `<... x resumed> <unfinished ...>) = ?`: interrupted again (killed).
                let tail = tail.strip_prefix(b" <unfinished ...>").unwrap_or(tail);
                let p = self.pending_mut(t);
                if p.active && p.name == id {
                    p.active = false;
                    let (start, slot) = (p.ts, p.slot);
                    // The second thread joined and parsed this pair when it saw both lines and
                    // its join started from these very partial arguments (the same address in
                    // this chunk: the same line, so the same bytes).
                    let pre_joined = match call {
                        Some(c) if joined_from != 0 && joined_from == p.from => Some(c),
                        _ => None,
                    };
                    let mut joined = std::mem::take(&mut p.partial);
                    self.pre_joined += pre_joined.is_some() as u64;
                    let parsed;
                    let call = match pre_joined {
                        Some(c) => c,
                        None => {
                            // Both halves joined in the pending buffer itself (one copy, no scratch).
                            joined.extend_from_slice(tail);
                            parsed = parse_call(&joined);
                            &parsed
                        }
                    };
                    match call {
                        Ok(call) => self.syscall(t, start, ts - start, id, sc, call, Some(slot)),
                        Err(reason) => {
                            self.rows.drop_slot(slot);
                            self.reject_at(src, no, (*reason).into());
                        }
                    }
                    self.pending[t as usize].partial = joined;
                    if sc == Sc::Clone || sc == Sc::Fork {
                        self.procs.clone_ended(tid);
                    }
                } else if p.active {
                    let other = p.name;
                    let reason = format!(
                        "'{}' resumed, but pid {tid} has '{}' unfinished",
                        String::from_utf8_lossy(name),
                        String::from_utf8_lossy(self.names.name(other))
                    );
                    self.reject_at(src, no, reason);
                } else {
                    match parse_call(tail) {
                        Ok(call) => {
                            self.stats.orphans += 1;
                            let start = ts - call.dur.unwrap_or(0);
                            self.syscall(t, start, ts - start, id, sc, &call, None);
                        }
                        Err(reason) => self.reject_at(src, no, reason.into()),
                    }
                }
            }
            Body::Signal(text) => {
                let t = self.procs.thread(tid);
                self.signal(t, ts, text);
            }
            Body::Exit(text) => {
                let t = self.procs.thread(tid);
                self.unresumed(t, ts);
                self.exit(t, ts, text);
                self.procs.exited(t);
            }
            Body::Note => {}
        }
    }

    /// The pending call slot of thread index `t`.
    #[inline]
    fn pending_mut(&mut self, t: u32) -> &mut Pending {
        let t = t as usize;
        if self.pending.len() <= t {
            self.pending.resize_with(t + 1, Pending::default);
        }
        &mut self.pending[t]
    }

    /// Records the unfinished call of thread index `t`, if any, as ended at `end`
    /// without a result.
    fn unresumed(&mut self, t: u32, end: i64) {
        let Some(p) = self.pending.get_mut(t as usize) else { return };
        if !p.active {
            return;
        }
        p.active = false;
        let (start, name, sc, slot) = (p.ts, p.name, p.sc.unwrap_or(Sc::Other), p.slot);
        self.stats.unfinished += 1;
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        // `name(a, b,  <unfinished ...>` printed "a, b, ": drop the dangling separator.
        let partial = line::trim_end(&self.pending[t as usize].partial);
        scratch.extend_from_slice(partial.strip_suffix(b",").unwrap_or(partial));
        scratch.extend_from_slice(b") = ?");
        let dur = (end - start).max(0);
        match parse_call(&scratch) {
            Ok(call) => self.syscall(t, start, dur, name, sc, &call, Some(slot)),
            Err(_) => {
                // The partial arguments end inside a string or bracket: keep them as text.
                let mut row = Row::new(Kind::Syscall, start, self.procs.producer(t));
                row.name = name;
                row.dur = dur;
                let partial = std::mem::take(&mut self.pending[t as usize].partial);
                row.s[4] = self.text(&partial);
                self.pending[t as usize].partial = partial;
                self.put(row, Some(slot));
            }
        }
        if sc == Sc::Clone || sc == Sc::Fork {
            let tid = self.procs.tid(t);
            self.procs.clone_ended(tid);
        }
        self.scratch = scratch;
    }
}

/// `ns` since midnight made monotone across midnight: a stamp more than 12 h before the
/// previous one means the next day.
fn tod_adjust(day: &mut i64, last: i64, tod: i64) -> i64 {
    let mut ts = tod + *day * DAY_NS;
    if ts < last - DAY_NS / 2 {
        *day += 1;
        ts += DAY_NS;
    }
    ts
}
