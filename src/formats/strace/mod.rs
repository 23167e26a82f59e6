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
//! Over 600 lines: the parser's two stages and their hand-off (chunk split, second thread,
//! pairing of unfinished/resumed calls, late rows) share one state; lines are in line.rs,
//! names in names.rs, processes in procs.rs, rows in rows.rs, tests in tests.rs.

pub mod background;
pub mod decl;
mod line;
mod names;
mod procs;
mod rows;
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

    // -- input ---------------------------------------------------------------------

    fn feed_single(&mut self, chunk: &[u8]) {
        let max = self.cfg.max_line;
        if chunk.is_empty() {
            let s = &mut self.sources[0];
            s.eof = true;
            s.done = true;
            self.need.clear();
            if s.skipping {
                s.skipping = false;
            } else if !s.buf.is_empty() {
                let buf = std::mem::take(&mut s.buf);
                self.line(0, &buf);
                self.sources[0].buf = buf;
                self.sources[0].buf.clear();
            }
            return;
        }
        let mut rest = chunk;
        if self.sources[0].skipping {
            match memchr::memchr(b'\n', rest) {
                Some(nl) => {
                    self.sources[0].skipping = false;
                    rest = &rest[nl + 1..];
                }
                None => return,
            }
        }
        if !self.sources[0].buf.is_empty() {
            match memchr::memchr(b'\n', rest) {
                Some(nl) => {
                    let mut buf = std::mem::take(&mut self.sources[0].buf);
                    if buf.len() + nl > max {
                        self.sources[0].line += 1;
                        self.overlong(0);
                    } else {
                        buf.extend_from_slice(&rest[..nl]);
                        self.line(0, &buf);
                    }
                    buf.clear();
                    self.sources[0].buf = buf;
                    rest = &rest[nl + 1..];
                }
                None => {
                    let s = &mut self.sources[0];
                    if s.buf.len() + rest.len() > max {
                        s.buf.clear();
                        s.skipping = true;
                        s.line += 1;
                        self.overlong(0);
                    } else {
                        s.buf.extend_from_slice(rest);
                    }
                    return;
                }
            }
        }
        let pos = match memchr::memrchr(b'\n', rest) {
            Some(nl) => nl + 1,
            None => 0,
        };
        let lines = &rest[..pos];
        if lines.len() >= PARALLEL_MIN {
            // A second thread does stage A (the stateless split and argument parse, ~1/3
            // of the work) for all but the first tenth of the chunk, part by part, while
            // this one runs both stages on that tenth, then stage B on each part as it
            // arrives: this thread does little more than stage B.
            let at = lines.len() / 10;
            let cut = memchr::memchr(b'\n', &lines[at..]).map_or(lines.len(), |nl| at + nl + 1);
            let (near, far) = lines.split_at(cut);
            // Joins made by the second thread are checked against addresses of this chunk only.
            for p in self.pending.iter_mut() {
                p.from = 0;
            }
            let src_pid = self.sources[0].pid;
            // Parts' buffers go back to the second thread once stage B is done with them, and
            // to the next chunk after this one: a fresh ~1 MB vector per part was written to
            // new pages (a fifth of the import's page faults, `perf record -e page-faults`; the
            // parse of the 3M-line many-process log alone, `examples/strace_speed.rs`: 28-32K
            // -> 19K minor faults, system time 0.18-0.26 -> 0.11-0.19 s, 3 runs each, load 4.7).
            let (back_tx, back_rx) = std::sync::mpsc::channel::<Spare<'_>>();
            for s in std::mem::take(&mut self.spare) {
                let _ = back_tx.send(s.relive());
            }
            let spare = std::thread::scope(|scope| {
                // Bounded: at most a few parts of pre-parsed lines are held.
                let (tx, rx) = std::sync::mpsc::sync_channel::<Spare<'_>>(2);
                let worker = scope.spawn(move || {
                    let mut rest = far;
                    let mut pairs = PreJoin::new(src_pid);
                    while !rest.is_empty() {
                        let end = if rest.len() <= PART {
                            rest.len()
                        } else {
                            memchr::memchr(b'\n', &rest[PART..]).map_or(rest.len(), |nl| PART + nl + 1)
                        };
                        let (part, next) = rest.split_at(end);
                        rest = next;
                        let Spare { pres: mut out, mut arena } = back_rx.try_recv().unwrap_or_default();
                        out.reserve(part.len() / 64);
                        let mut p = 0;
                        for nl in memchr::memchr_iter(b'\n', part) {
                            let l = &part[p..nl];
                            out.push(None);
                            if l.len() <= max {
                                let slot = out.last_mut().expect("just pushed");
                                let x = pre_into(l, slot);
                                pairs.see(x, &mut arena);
                            }
                            p = nl + 1;
                        }
                        if tx.send(Spare { pres: out, arena }).is_err() {
                            return back_rx;
                        }
                    }
                    back_rx
                });
                self.lines_single(near);
                for Spare { mut pres, mut arena } in rx {
                    for p in &pres {
                        match p {
                            Some(p) => self.line_pre(0, p),
                            None => {
                                self.sources[0].line += 1;
                                self.overlong(0);
                            }
                        }
                    }
                    pres.clear(); // (its joined calls borrow from the arena)
                    arena.reset();
                    let _ = back_tx.send(Spare { pres, arena });
                }
                match worker.join() {
                    Ok(back_rx) => back_rx.try_iter().take(SPARE).map(Spare::relive).collect(),
                    Err(e) => std::panic::resume_unwind(e),
                }
            });
            self.spare = spare;
        } else {
            self.lines_single(lines);
        }
        let tail = &rest[pos..];
        if tail.len() > max {
            self.sources[0].skipping = true;
            self.sources[0].line += 1;
            self.overlong(0);
        } else {
            self.sources[0].buf.extend_from_slice(tail);
        }
    }

    /// Rejects the overlong line just counted in source `src`.
    /// Every line of `lines` (complete lines, each ending with a newline) of source 0.
    fn lines_single(&mut self, lines: &[u8]) {
        let max = self.cfg.max_line;
        let mut pos = 0;
        for nl in memchr::memchr_iter(b'\n', lines) {
            let l = &lines[pos..nl];
            if l.len() > max {
                self.sources[0].line += 1;
                self.overlong(0);
            } else {
                self.line(0, l);
            }
            pos = nl + 1;
        }
    }

    fn overlong(&mut self, src: usize) {
        self.stats.lines += 1;
        let line = self.sources[src].line;
        let reason = format!("line longer than {} bytes", self.cfg.max_line);
        self.reject_at(src, line, reason);
    }

    fn feed_merge(&mut self, src: usize, chunk: &[u8]) {
        let max = self.cfg.max_line;
        let s = &mut self.sources[src];
        if s.done {
            return;
        }
        if chunk.is_empty() {
            s.eof = true;
        } else {
            if s.start > 0 {
                s.buf.drain(..s.start);
                s.start = 0;
            }
            s.buf.extend_from_slice(chunk);
        }
        // A line that cannot end within `max_line` bytes is skipped as it streams in.
        loop {
            let s = &mut self.sources[src];
            if s.skipping {
                match memchr::memchr(b'\n', &s.buf[s.start..]) {
                    Some(nl) => {
                        s.start += nl + 1;
                        s.skipping = false;
                    }
                    None => {
                        s.buf.clear();
                        s.start = 0;
                        break;
                    }
                }
            } else if memchr::memchr(b'\n', &s.buf[s.start..]).is_none() && s.buf.len() - s.start > max {
                s.buf.clear();
                s.start = 0;
                s.skipping = true;
                s.line += 1;
                self.overlong(src);
            } else {
                break;
            }
        }
        if let Some(k) = self.need.iter().position(|&i| i as usize == src) {
            self.need.remove(k);
            self.queue(src);
        }
        self.pump();
    }

    /// Puts source `src` in the heap (its next line is complete), in `need`, or done.
    fn queue(&mut self, src: usize) {
        let s = &mut self.sources[src];
        let avail = &s.buf[s.start..];
        let line = match memchr::memchr(b'\n', avail) {
            Some(nl) => &avail[..nl],
            None if s.eof && !avail.is_empty() => avail,
            None if s.eof => {
                s.done = true;
                return;
            }
            None => {
                self.need.push(src as u32);
                return;
            }
        };
        // Order by the line's own stamp; a line without one keeps its place in its file.
        let ts = match split_line(line) {
            Ok((p, _)) => match p.stamp {
                Stamp::Epoch(t) => Some(t),
                Stamp::Tod(t) => Some(tod_adjust(&mut s.day, s.last_ts, t)),
                Stamp::None => None,
            },
            Err(_) => None,
        };
        let key = ts.unwrap_or(s.last_ts);
        s.next_ts = ts;
        self.heap.push(Reverse((key, src as u32)));
    }

    /// Processes lines in timestamp order while every source has its next line (as
    /// `strace-log-merge` does: each `-ff` file is one thread, stamped at syscall entry).
    fn pump(&mut self) {
        while self.need.is_empty() {
            let Some(Reverse((_, src))) = self.heap.pop() else { break };
            let src = src as usize;
            let s = &mut self.sources[src];
            let avail = &s.buf[s.start..];
            let (len, adv) = match memchr::memchr(b'\n', avail) {
                Some(nl) => (nl, nl + 1),
                None => (avail.len(), avail.len()),
            };
            let buf = std::mem::take(&mut s.buf);
            let start = s.start;
            self.line(src, &buf[start..start + len]);
            let s = &mut self.sources[src];
            s.buf = buf;
            s.start = start + adv;
            self.queue(src);
        }
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

    // -- rows ----------------------------------------------------------------------

    /// `bytes` into the arena, replaced lossily when not UTF-8.
    #[inline]
    fn text(&mut self, bytes: &[u8]) -> Str {
        if bytes.is_ascii() {
            return self.rows.text(bytes);
        }
        match std::str::from_utf8(bytes) {
            Ok(_) => self.rows.text(bytes),
            Err(_) => {
                let s = String::from_utf8_lossy(bytes).into_owned();
                self.rows.text(s.as_bytes())
            }
        }
    }

    /// strace's escaped text, unescaped into the arena (as printed if that is not UTF-8).
    fn escaped(&mut self, bytes: &[u8]) -> Str {
        let start = self.rows.arena_bytes();
        if unescape_into(bytes, self.rows.arena_mut()) {
            self.rows.since(start)
        } else {
            self.text(bytes)
        }
    }

    /// A path argument (`"..."`), made absolute against the directory `dirfd` (its `-y`
    /// path `dir_y`, else the fd table) or, for AT_FDCWD and plain calls, the cwd.
    fn path_arg(&mut self, t: u32, arg: &[u8], dirfd: Option<i64>, dir_y: Option<&[u8]>) -> Str {
        let Some(inner) = quoted(arg) else { return Str::NULL };
        let start = self.rows.arena_bytes();
        if !inner.is_empty() && inner[0] != b'/' {
            if let Some(y) = dir_y {
                if !unescape_into(y, self.rows.arena_mut()) {
                    let lossy = String::from_utf8_lossy(y).into_owned();
                    self.rows.arena_mut().extend_from_slice(lossy.as_bytes());
                }
                self.rows.arena_mut().push(b'/');
            } else {
                let base = match dirfd {
                    None | Some(AT_FDCWD) => self.procs.cwd(t),
                    Some(fd) => self.procs.fd_info(t, fd).and_then(|(p, _)| p),
                };
                if let Some(base) = base {
                    let arena = self.rows.arena_mut();
                    arena.extend_from_slice(base);
                    arena.push(b'/');
                }
            }
        }
        if !unescape_into(inner, self.rows.arena_mut()) {
            let lossy = String::from_utf8_lossy(inner).into_owned();
            self.rows.arena_mut().extend_from_slice(lossy.as_bytes());
        }
        self.rows.since(start)
    }

    /// A path argument (`"..."`) as the program passed it (relative, through symlinks),
    /// unescaped; null when the argument is not a string.
    fn asked(&mut self, arg: &[u8]) -> Str {
        match quoted(arg) {
            Some(inner) => self.escaped(inner),
            None => Str::NULL,
        }
    }

    /// The tracked file position of `fd` (null when unknown), advanced by the `ret` bytes
    /// a call that used it moved.
    fn tracked_pos(&mut self, t: u32, fd: Option<i64>, ret: Option<i64>) -> i64 {
        let Some(fd) = fd else { return NULL };
        let Some((_, Some(pos))) = self.procs.fd_info(t, fd) else { return NULL };
        if let Some(n) = ret.filter(|&n| n > 0) {
            self.procs.set_pos(t, fd, Some(pos + n));
        }
        pos
    }

    /// The path of `fd`: its `-y` annotation, else the fd table's.
    ///
    /// strace's timestamps order the calls of different threads only roughly (it stamps
    /// a call when it gets to it), so the rebuilt table can be stale: a `close(3)` seen
    /// after the `openat` that reused fd 3. What `-y` prints is what the kernel had, so
    /// an fd the table does not know, or knows under another path, is (re)learned from it.
    fn fd_path(&mut self, t: u32, fd: Option<i64>, y: Option<&[u8]>) -> Str {
        match (fd, y) {
            (_, Some(y)) => {
                let s = self.escaped(y);
                if let Some(fd) = fd.filter(|&f| f >= 0) {
                    let path = self.rows.get(s);
                    let stale = match self.procs.fd_info(t, fd) {
                        None => true,
                        Some((known, _)) => known != Some(path),
                    };
                    if stale {
                        let path = path.to_vec();
                        self.procs.open(t, fd, Some(&path), None, false);
                    }
                }
                s
            }
            (Some(fd), None) => match self.procs.fd_info(t, fd) {
                Some((Some(p), _)) => {
                    let off = self.rows.arena_bytes();
                    self.rows.arena_mut().extend_from_slice(p);
                    self.rows.since(off)
                }
                _ => Str::NULL,
            },
            _ => Str::NULL,
        }
    }

    /// Takes the fd of close's first argument (`3` or `3</path>`) out of thread index
    /// `t`'s table; returns the path it had (its `-y` path, else the table's).
    ///
    /// Not through fd_path: a close printed with another path than the table's entry
    /// closed an older file (the table is stale, see fd_path) and must not drop the entry.
    fn close_fd(&mut self, t: u32, arg: &[u8]) -> Option<Box<[u8]>> {
        let arg = line::trim(arg);
        let arg = arg.strip_suffix(b",").unwrap_or(arg);
        let (fd, y) = parse_fd(arg);
        let fd = fd?;
        let known = self.procs.fd_info(t, fd).and_then(|(p, _)| p).map(Box::<[u8]>::from);
        let path = match y {
            Some(y) => {
                let mut p = Vec::with_capacity(y.len());
                if !unescape_into(y, &mut p) {
                    p = String::from_utf8_lossy(y).into_owned().into_bytes();
                }
                Some(p.into_boxed_slice())
            }
            None => known.clone(),
        };
        if y.is_none() || known.is_none() || known == path {
            self.procs.close(t, fd);
        }
        path
    }

    /// `AT_FDCWD</dir>` tells the working directory.
    fn note_cwd(&mut self, t: u32, dirfd: Option<i64>, y: Option<&[u8]>) {
        if let (Some(AT_FDCWD), Some(y)) = (dirfd, y) {
            if self.procs.cwd(t) != Some(y) || y.contains(&b'\\') {
                let mut dir = Vec::with_capacity(y.len());
                if unescape_into(y, &mut dir) {
                    self.procs.set_cwd(t, &dir);
                }
            }
        }
    }

    #[inline]
    fn push(&mut self, row: Row) {
        self.put(row, None);
    }

    /// Stores a complete row (in its reserved slot, if any) and cuts a batch when due.
    #[inline]
    fn put(&mut self, mut row: Row, slot: Option<u64>) {
        let p = row.producer as usize;
        if self.seq.len() <= p {
            self.seq.resize(p + 1, 0);
        }
        row.seq = self.seq[p];
        self.seq[p] += 1;
        match slot {
            Some(s) => self.rows.fill(s, row),
            None => self.rows.push(row),
        }
        if self.rows.len() >= self.next_cut || self.rows.arena_bytes() >= ARENA_LIMIT {
            let batch = self.cfg.batch_rows;
            // A call unfinished for two batches' worth of rows is let go (see rows.rs).
            let force = self.rows.len() >= 2 * batch || self.rows.arena_bytes() >= ARENA_LIMIT;
            if force || self.rows.ready() >= batch / 2 {
                self.cut(force);
            }
            self.next_cut = batch.max(self.rows.len() + batch / 4).max(1);
        }
    }

    fn cut(&mut self, force: bool) {
        let mut cut = self.rows.take_cut(force);
        for (k, n) in cut.events.iter().enumerate() {
            self.stats.events[k] += n;
        }
        if let Some(b) = self.builder.as_mut() {
            // Built on the builder's thread (background.rs); its buffers come back for reuse.
            if let Ok(spares) = b.spares.get_mut() {
                while let Ok((rows, arena)) = spares.try_recv() {
                    self.rows.recycle(rows, arena);
                }
            }
            let names = self.names.since(b.names_sent);
            b.names_sent = self.names.count();
            let job = BuildJob { cut, names, lines: self.stats.lines, rejected: self.stats.rejected };
            if b.jobs.send(ToBuilder::Cut(job)).is_err() {
                self.builder = None; // the builder is gone (its consumer stopped): nothing to hand over to
            }
            return;
        }
        let batches = cut.build(&self.names);
        self.rows.recycle(cut.rows, cut.arena);
        self.out.extend(batches);
    }

    /// From here on, cuts are built into record batches by whoever receives `jobs` (in order;
    /// each job carries the names interned since the previous one), who sends the emptied
    /// buffers back on `spares`. Rows set aside ([`StraceParser::take_late`]) are still built
    /// here.
    fn build_elsewhere(&mut self, jobs: SyncSender<ToBuilder>, spares: Receiver<(Vec<Row>, Vec<u8>)>) {
        self.builder = Some(Builder { jobs, spares: Mutex::new(spares), names_sent: 0 });
    }

    /// Stops handing cuts over (later ones are built here again).
    fn build_here(&mut self) {
        self.builder = None;
    }

    /// Cuts still go to a builder (false once it went away).
    fn building_elsewhere(&self) -> bool {
        self.builder.is_some()
    }

    fn signal(&mut self, t: u32, ts: i64, text: &[u8]) {
        let mut row = Row::new(Kind::Signal, ts, self.procs.producer(t));
        // `SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=42, ...}` or
        // `stopped by SIGSTOP`.
        if let Some(rest) = text.strip_prefix(b"stopped by ") {
            row.s[0] = self.text(rest);
            row.s[1] = self.rows.text(b"stopped");
        } else {
            let end = text.iter().position(|&b| b == b' ').unwrap_or(text.len());
            row.s[0] = self.text(&text[..end]);
            let info = line::trim(&text[end..]);
            if !info.is_empty() {
                row.s[2] = self.text(info);
                if let Some(code) = field(info, b"si_code=") {
                    row.s[1] = self.text(code);
                }
                if let Some(pid) = field(info, b"si_pid=") {
                    row.i[0] = arg_int(pid).unwrap_or(NULL);
                }
            }
        }
        self.push(row);
    }

    fn exit(&mut self, t: u32, ts: i64, text: &[u8]) {
        let mut row = Row::new(Kind::Exit, ts, self.procs.producer(t));
        row.i[1] = 0;
        if let Some(rest) = text.strip_prefix(b"exited with ") {
            row.i[0] = arg_int(line::trim(rest)).unwrap_or(NULL);
        } else if let Some(rest) = text.strip_prefix(b"killed by ") {
            let end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
            row.s[0] = self.text(&rest[..end]);
            if line::find(rest, b"(core dumped)").is_some() {
                row.i[1] = 1;
            }
        }
        self.push(row);
    }

    /// One complete call: typed columns, and the fd table / process updates it implies.
    /// `slot`: the row reserved when the call started.
    #[allow(clippy::too_many_arguments)]
    fn syscall(&mut self, t: u32, ts: i64, dur: i64, name: u32, sc: Sc, c: &Call<'_>, slot: Option<u64>) {
        let mut row = Row::new(Kind::Syscall, ts, self.procs.producer(t));
        row.name = name;
        row.dur = c.dur.unwrap_or(dur).max(0);
        let ret = c.ret;
        row.i[3] = ret.unwrap_or(NULL);
        if let Some(e) = c.errno {
            row.s[2] = self.text(e);
        }
        let a = &c.args;
        let na = c.nargs;
        let arg = |k: usize| -> &[u8] {
            if k < na {
                a[k]
            } else {
                &[]
            }
        };
        let ok = ret.is_some_and(|r| r >= 0);
        let mut raw = false;
        match sc {
            Sc::Rw | Sc::Rwv | Sc::Prw | Sc::Prwv => {
                let (fd, y) = parse_fd(arg(0));
                row.i[0] = fd.unwrap_or(NULL);
                row.s[0] = self.fd_path(t, fd, y);
                row.i[2] =
                    if matches!(sc, Sc::Rw | Sc::Prw) { arg_int(arg(2)).unwrap_or(NULL) } else { iov_total(arg(1)) };
                let explicit = if matches!(sc, Sc::Prw | Sc::Prwv) { arg_int(arg(3)) } else { None };
                row.i[1] = match explicit {
                    Some(off) if off >= 0 => off,
                    // read/write (and preadv2 with offset -1) use the file position.
                    _ => self.tracked_pos(t, fd, ret),
                };
            }
            Sc::Copy | Sc::Sendfile | Sc::Tee => {
                // Source side in fd/path/pos, destination side in fd2/path2/pos2, as for
                // rename: what is read, then where it goes. `size` is the length asked,
                // `ret` the bytes moved.
                let (src, src_off, dst, dst_off, len, flags) = match sc {
                    Sc::Copy => (arg(0), Some(arg(1)), arg(2), Some(arg(3)), arg(4), Some(arg(5))),
                    Sc::Sendfile => (arg(1), Some(arg(2)), arg(0), None, arg(3), None),
                    _ => (arg(0), None, arg(1), None, arg(2), Some(arg(3))),
                };
                let pipe_only = sc == Sc::Tee; // tee copies between two pipes: no positions
                let (fd, y) = parse_fd(src);
                row.i[0] = fd.unwrap_or(NULL);
                row.s[0] = self.fd_path(t, fd, y);
                let (fd2, y2) = parse_fd(dst);
                row.i[4] = fd2.unwrap_or(NULL);
                row.s[1] = self.fd_path(t, fd2, y2);
                if !pipe_only {
                    row.i[1] = match src_off.and_then(offset_ptr) {
                        Some(at) => at.unwrap_or(NULL), // explicit: the file position stays
                        None => self.tracked_pos(t, fd, ret),
                    };
                    row.i[5] = match dst_off.and_then(offset_ptr) {
                        Some(at) => at.unwrap_or(NULL),
                        None => self.tracked_pos(t, fd2, ret),
                    };
                }
                row.i[2] = arg_int(len).unwrap_or(NULL);
                if let Some(f) = flags.filter(|f| !f.is_empty()) {
                    row.s[3] = self.text(f);
                }
                // Whether an offset was NULL (the fd's position, moved) or explicit (left
                // alone) is in no typed column: a replay needs it.
                raw = !pipe_only;
            }
            Sc::Open | Sc::Creat | Sc::Openat | Sc::Openat2 => {
                let (dirfd, dir_y, p, f) = match sc {
                    Sc::Open => (None, None, arg(0), Some(arg(1))),
                    Sc::Creat => (None, None, arg(0), None),
                    _ => {
                        let (d, y) = parse_fd(arg(0));
                        (d, y, arg(1), Some(arg(2)))
                    }
                };
                self.note_cwd(t, dirfd, dir_y);
                row.s[5] = self.asked(p);
                row.s[0] = match c.ret_path {
                    Some(y) => self.escaped(y),
                    None => self.path_arg(t, p, dirfd, dir_y),
                };
                let flags: &[u8] = match (sc, f) {
                    (Sc::Creat, _) => b"O_WRONLY|O_CREAT|O_TRUNC",
                    (Sc::Openat2, Some(how)) => field(how, b"flags=").unwrap_or(how),
                    (_, Some(f)) => f,
                    _ => b"",
                };
                row.s[3] = self.text(flags);
                if let Some(fd) = ret.filter(|&r| r >= 0) {
                    let append = line::find(flags, b"O_APPEND").is_some();
                    let cloexec = line::find(flags, b"O_CLOEXEC").is_some();
                    let path = self.rows.get(row.s[0]).to_vec();
                    let path = if row.s[0].is_null() { None } else { Some(path.as_slice()) };
                    self.procs.open(t, fd, path, if append { None } else { Some(0) }, cloexec);
                }
            }
            Sc::Close => {
                let (fd, _) = parse_fd(arg(0));
                row.i[0] = fd.unwrap_or(NULL);
                let closed = match slot.and_then(|_| self.pending.get_mut(t as usize)).and_then(|p| p.closed.take()) {
                    Some(path) => path, // applied when the call started
                    None => self.close_fd(t, arg(0)),
                };
                if let Some(path) = closed {
                    row.s[0] = self.rows.text(&path);
                }
            }
            Sc::Lseek => {
                let (fd, y) = parse_fd(arg(0));
                row.i[0] = fd.unwrap_or(NULL);
                row.s[0] = self.fd_path(t, fd, y);
                row.i[1] = arg_int(arg(1)).unwrap_or(NULL);
                row.s[3] = self.text(arg(2));
                if let (Some(fd), Some(pos)) = (fd, ret.filter(|&r| r >= 0)) {
                    self.procs.set_pos(t, fd, Some(pos));
                }
            }
            Sc::Sync | Sc::FdFirst | Sc::Getdents | Sc::Fchdir | Sc::SyncRange | Sc::Fallocate | Sc::Ftruncate => {
                let (fd, y) = parse_fd(arg(0));
                row.i[0] = fd.unwrap_or(NULL);
                row.s[0] = self.fd_path(t, fd, y);
                match sc {
                    Sc::Getdents => row.i[2] = arg_int(arg(2)).unwrap_or(NULL),
                    Sc::SyncRange => {
                        row.i[1] = arg_int(arg(1)).unwrap_or(NULL);
                        row.i[2] = arg_int(arg(2)).unwrap_or(NULL);
                        row.s[3] = self.text(arg(3));
                    }
                    Sc::Fallocate => {
                        row.s[3] = self.text(arg(1));
                        row.i[1] = arg_int(arg(2)).unwrap_or(NULL);
                        row.i[2] = arg_int(arg(3)).unwrap_or(NULL);
                    }
                    Sc::Ftruncate => row.i[2] = arg_int(arg(1)).unwrap_or(NULL),
                    Sc::Fchdir if ok && !row.s[0].is_null() => {
                        let dir = self.rows.get(row.s[0]).to_vec();
                        self.procs.set_cwd(t, &dir);
                    }
                    Sc::FdFirst => raw = true,
                    _ => {}
                }
            }
            Sc::Dup | Sc::Dup2 => {
                let (fd, y) = parse_fd(arg(0));
                row.i[0] = fd.unwrap_or(NULL);
                row.s[0] = self.fd_path(t, fd, y);
                if sc == Sc::Dup2 && na > 2 {
                    row.s[3] = self.text(arg(2));
                }
                if let (Some(old), Some(new)) = (fd, ret.filter(|&r| r >= 0)) {
                    let cloexec = na > 2 && line::find(arg(2), b"O_CLOEXEC").is_some();
                    self.procs.dup(t, old, new, cloexec);
                }
            }
            Sc::Fcntl => {
                let (fd, y) = parse_fd(arg(0));
                row.i[0] = fd.unwrap_or(NULL);
                row.s[0] = self.fd_path(t, fd, y);
                let cmd = arg(1);
                let after_fd = args_from(c, 1);
                row.s[3] = self.text(after_fd);
                if let Some(fd) = fd {
                    if let Some(new) = ret.filter(|&r| r >= 0) {
                        if cmd.starts_with(b"F_DUPFD") {
                            self.procs.dup(t, fd, new, cmd == b"F_DUPFD_CLOEXEC");
                        }
                    }
                    if ok && cmd == b"F_SETFD" {
                        self.procs.set_cloexec(t, fd, line::find(arg(2), b"FD_CLOEXEC").is_some());
                    }
                }
            }
            Sc::Mmap => {
                let (fd, y) = parse_fd(arg(4));
                let fd = fd.filter(|&f| f >= 0);
                row.i[0] = fd.unwrap_or(NULL);
                row.s[0] = self.fd_path(t, fd, if fd.is_some() { y } else { None });
                row.i[2] = arg_int(arg(1)).unwrap_or(NULL);
                if fd.is_some() {
                    row.i[1] = arg_int(arg(5)).unwrap_or(NULL);
                }
                let start = self.rows.arena_bytes();
                let (prot, fl) = (arg(2).to_vec(), arg(3).to_vec());
                self.text(&prot);
                self.rows.arena_mut().extend_from_slice(b", ");
                self.text(&fl);
                row.s[3] = self.rows.since(start);
            }
            Sc::PathFirst | Sc::Truncate | Sc::Chdir | Sc::Execve => {
                row.s[0] = self.path_arg(t, arg(0), None, None);
                row.s[5] = self.asked(arg(0));
                match sc {
                    Sc::Truncate => row.i[2] = arg_int(arg(1)).unwrap_or(NULL),
                    Sc::Chdir if ok && !row.s[0].is_null() => {
                        let dir = self.rows.get(row.s[0]).to_vec();
                        self.procs.set_cwd(t, &dir);
                    }
                    Sc::Execve => {
                        raw = true;
                        if ret == Some(0) {
                            let p = if row.s[0].is_null() { None } else { Some(self.rows.get(row.s[0]).to_vec()) };
                            self.procs.exec(t, p.as_deref());
                        }
                    }
                    Sc::PathFirst => raw = true,
                    _ => {}
                }
            }
            Sc::PathAt | Sc::Execveat => {
                let (dirfd, y) = parse_fd(arg(0));
                self.note_cwd(t, dirfd, y);
                if quoted(arg(1)) == Some(b"") {
                    // AT_EMPTY_PATH: the call is on the fd itself.
                    row.i[0] = dirfd.unwrap_or(NULL);
                    row.s[0] = self.fd_path(t, dirfd, y);
                } else {
                    if dirfd != Some(AT_FDCWD) {
                        row.i[0] = dirfd.unwrap_or(NULL);
                    }
                    row.s[0] = self.path_arg(t, arg(1), dirfd, y);
                    row.s[5] = self.asked(arg(1));
                }
                raw = true;
                if sc == Sc::Execveat && ret == Some(0) {
                    let p = if row.s[0].is_null() { None } else { Some(self.rows.get(row.s[0]).to_vec()) };
                    self.procs.exec(t, p.as_deref());
                }
            }
            Sc::Rename => {
                row.s[0] = self.path_arg(t, arg(0), None, None);
                row.s[1] = self.path_arg(t, arg(1), None, None);
                row.s[5] = self.asked(arg(0));
                row.s[6] = self.asked(arg(1));
            }
            Sc::RenameAt => {
                let (d1, y1) = parse_fd(arg(0));
                let (d2, y2) = parse_fd(arg(2));
                self.note_cwd(t, d1, y1);
                row.s[0] = self.path_arg(t, arg(1), d1, y1);
                row.s[1] = self.path_arg(t, arg(3), d2, y2);
                row.s[5] = self.asked(arg(1));
                row.s[6] = self.asked(arg(3));
                if na > 4 {
                    row.s[3] = self.text(arg(4));
                }
            }
            Sc::SymlinkAt => {
                let (d, y) = parse_fd(arg(1));
                row.s[0] = self.text(quoted(arg(0)).unwrap_or(b""));
                row.s[1] = self.path_arg(t, arg(2), d, y);
                row.s[5] = self.asked(arg(0));
                row.s[6] = self.asked(arg(2));
            }
            Sc::Clone | Sc::Fork => {
                raw = true;
                if let Some(child) = ret.filter(|&r| r > 0).and_then(|r| u32::try_from(r).ok()) {
                    let flags = if sc == Sc::Clone {
                        CloneFlags::from_args(c.raw_args)
                    } else {
                        CloneFlags { thread: false, files: false }
                    };
                    self.procs.cloned(t, child, flags);
                }
            }
            Sc::Pipe => {
                raw = true;
                if ok {
                    let list = if self.names.name(name) == b"socketpair" { arg(3) } else { arg(0) };
                    if let Some(inner) = list.strip_prefix(b"[").and_then(|l| l.strip_suffix(b"]")) {
                        let cloexec = line::find(c.raw_args, b"CLOEXEC").is_some();
                        for part in inner.split(|&b| b == b',') {
                            let (fd, y) = parse_fd(line::trim(part));
                            if let Some(fd) = fd {
                                let mut p = Vec::new();
                                let path = y.filter(|y| unescape_into(y, &mut p)).map(|_| p.as_slice());
                                self.procs.open(t, fd, path, None, cloexec);
                            }
                        }
                    }
                }
            }
            Sc::NewFd => {
                raw = true;
                if let Some(fd) = ret.filter(|&r| r >= 0) {
                    let cloexec = line::find(c.raw_args, b"CLOEXEC").is_some();
                    let mut p = Vec::new();
                    let path = c.ret_path.filter(|y| unescape_into(y, &mut p)).map(|_| p.as_slice());
                    self.procs.open(t, fd, path, None, cloexec);
                }
            }
            Sc::CloseRange => {
                raw = true;
                if ok {
                    let first = arg_int(arg(0)).unwrap_or(i64::MAX);
                    let last = arg_int(arg(1)).unwrap_or(i64::MAX);
                    self.procs.close_range(t, first, last);
                }
            }
            Sc::Exit | Sc::Other => raw = true,
        }
        if raw {
            row.s[4] = self.text(c.raw_args);
        }
        self.put(row, slot);
    }
}

/// What a line says on its own, before any state is involved (stage A): the split,
/// and for a complete call its parsed arguments and result. Computed for a part of
/// each chunk by a second thread (see `feed_single`). Not boxed: one allocation per
/// line would cost more than the moves of a large variant.
#[allow(clippy::large_enum_variant)]
enum Pre<'a> {
    /// Empty or only blanks.
    Blank,
    Line {
        text: &'a [u8],
        head: Result<(line::Prefix, Body<'a>), &'static str>,
        /// A complete call's arguments and result; for a `<... resumed>` line with `from` set,
        /// those of the pair joined (see `PreJoin`).
        call: Option<Result<Call<'a>, &'static str>>,
        /// For a resumed line joined by `PreJoin`: the address of the partial arguments joined.
        from: usize,
    },
}

/// Stage A of one line (no newline).
#[inline]
fn pre(text: &[u8]) -> Pre<'_> {
    let text = text.strip_suffix(b"\r").unwrap_or(text);
    if text.first().is_none_or(|&b| b == b' ' || b == b'\t') && text.iter().all(|&b| b == b' ' || b == b'\t') {
        return Pre::Blank;
    }
    let head = split_line(text);
    let call = match &head {
        Ok((_, Body::Call { tail, .. })) => Some(parse_call(tail)),
        _ => None,
    };
    Pre::Line { text, head, call, from: 0 }
}

/// [`pre`] written in place into `slot` (the second thread's vector of parts): a `Pre` is a
/// few hundred bytes, and building it aside then moving it into the vector copied it twice.
/// callgrind, first 300K lines of the many-process log (`examples/strace_speed.rs`): the whole
/// parse 614.6M -> 570.1M instructions, the second thread's memcpy 42M -> 0.
#[inline]
fn pre_into<'a, 's>(text: &'a [u8], slot: &'s mut Option<Pre<'a>>) -> &'s mut Pre<'a> {
    let text = text.strip_suffix(b"\r").unwrap_or(text);
    if text.first().is_none_or(|&b| b == b' ' || b == b'\t') && text.iter().all(|&b| b == b' ' || b == b'\t') {
        return slot.insert(Pre::Blank);
    }
    let x = slot.insert(Pre::Line { text, head: split_line(text), call: None, from: 0 });
    if let Pre::Line { head: Ok((_, Body::Call { tail, .. })), call, .. } = x {
        let tail = *tail;
        *call = Some(parse_call(tail));
    }
    x
}

/// Stage A of `<unfinished ...>` / `<... resumed>` pairs, on the second thread: nearly every
/// line of a log of many busy threads is half of a pair, and joining and parsing the halves was
/// the main thread's biggest item (parse_call 12 % and the copies of the join). The second thread
/// follows each tid's last unfinished call over its lines and, for a resumption of the same name,
/// parses the joined text there. Stage B uses that only when its own pending call for the thread
/// holds the same partial arguments (same address in this chunk, see `Pending::from`): what it
/// would parse is then byte for byte what was parsed, so the rows cannot differ; any other case
/// (the unfinished line in another chunk or in the first tenth, a reject in between) is joined
/// by stage B as before. Measured with callgrind on the first 300K lines of the many-process log
/// (`bench import --format strace-procs`): the main thread 929M -> 792M instructions (the parse's
/// share of it about -20 %), the second thread 162M -> 310M, the whole +1 %.
struct PreJoin<'a> {
    /// (tid, name, partial arguments) of a tid's last `<unfinished ...>` line, at `tid % OPEN`.
    /// Direct-mapped: two tids on one slot only lose a join (the main thread then joins), and
    /// it costs a few instructions a line where a hash map cost ~0.1 CPU-s over 3M lines
    /// (callgrind: hashbrown insert 10.7M instructions per 300K lines).
    open: Vec<(u32, &'a [u8], &'a [u8])>,
    /// The tid of lines without a pid column.
    src_pid: Option<u32>,
}

/// Slots of [`PreJoin::open`] (a power of two).
const OPEN: usize = 4096;

impl<'a> PreJoin<'a> {
    fn new(src_pid: Option<u32>) -> Self {
        PreJoin { open: vec![(u32::MAX, &[][..], &[][..]); OPEN], src_pid }
    }

    /// Follows the pairs over one more line; joins and parses a resumption it can pair.
    fn see(&mut self, x: &mut Pre<'a>, arena: &mut JoinArena) {
        let Pre::Line { head: Ok((prefix, body)), call, from, .. } = x else { return };
        if prefix.stamp == Stamp::None {
            return; // rejected by stage B before any state changes
        }
        let tid = prefix.pid.or(self.src_pid).unwrap_or(0);
        let slot = &mut self.open[tid as usize & (OPEN - 1)];
        match *body {
            Body::Unfinished { name, partial } => {
                *slot = (tid, name, partial);
            }
            Body::Call { .. } | Body::Exit(_) => {
                if slot.0 == tid {
                    slot.0 = u32::MAX;
                }
            }
            Body::Resumed { name, tail } => {
                if slot.0 == tid {
                    slot.0 = u32::MAX;
                    let (_, n, partial) = *slot;
                    if n == name {
                        let tail = tail.strip_prefix(b" <unfinished ...>").unwrap_or(tail);
                        let joined = arena.join(partial, tail);
                        *call = Some(parse_call(joined));
                        *from = partial.as_ptr() as usize;
                    }
                }
            }
            Body::Signal(_) | Body::Note => {}
        }
    }
}

/// Bytes of the pairs joined in one part, in blocks that never grow past their capacity, so a
/// joined text never moves while calls parsed from it are alive.
#[derive(Default)]
struct JoinArena {
    blocks: Vec<Vec<u8>>,
}

/// Bytes per block of a [`JoinArena`].
const JOIN_BLOCK: usize = 64 << 10;

/// Parts' buffers kept between chunks.
const SPARE: usize = 4;

/// One part of the second thread's stage A: its lines (None: overlong) and the pairs it joined.
#[derive(Default)]
struct Spare<'a> {
    pres: Vec<Option<Pre<'a>>>,
    arena: JoinArena,
}

impl Spare<'_> {
    /// The same (emptied) buffers, for lines of another lifetime: the vector's allocation is
    /// kept (an in-place collect of no element: same layout, so the same buffer).
    fn relive<'b>(self) -> Spare<'b> {
        let Spare { mut pres, arena } = self;
        pres.clear();
        Spare { pres: pres.into_iter().map(|_| None).collect(), arena }
    }
}

impl JoinArena {
    /// Forgets every join (no `Pre` borrowing them may be alive); keeps one block.
    fn reset(&mut self) {
        self.blocks.truncate(1);
        if let Some(b) = self.blocks.first_mut() {
            b.clear();
        }
    }

    /// `a` then `b`, copied into the arena; valid as long as the arena (see `PreJoin`).
    fn join<'x>(&mut self, a: &[u8], b: &[u8]) -> &'x [u8] {
        let n = a.len() + b.len();
        let fits = self.blocks.last().is_some_and(|v| v.capacity() - v.len() >= n);
        if !fits {
            self.blocks.push(Vec::with_capacity(n.max(JOIN_BLOCK)));
        }
        let block = self.blocks.last_mut().expect("a block");
        let start = block.len();
        block.extend_from_slice(a); // within capacity: the block does not move
        block.extend_from_slice(b);
        // SAFETY: the bytes are in a block's heap allocation, which never reallocates (only
        // appended within its capacity) and is freed only when the arena drops; the caller
        // keeps every `Pre` borrowing them in the same message as the arena and drops them first.
        unsafe { std::slice::from_raw_parts(block.as_ptr().add(start), n) }
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

/// The value of `key` (`si_code=`, `flags=`) in a `{k=v, ...}` text, up to `,` or `}`.
fn field<'a>(text: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let at = line::find(text, key)? + key.len();
    let rest = &text[at..];
    let end = rest.iter().position(|&b| b == b',' || b == b'}').unwrap_or(rest.len());
    Some(line::trim(&rest[..end]))
}

/// The raw argument text from argument `k` on (`F_SETFD, FD_CLOEXEC` for fcntl).
fn args_from<'a>(c: &Call<'a>, k: usize) -> &'a [u8] {
    if k >= c.nargs {
        return b"";
    }
    // Every argument is a subslice of `raw_args`.
    let off = c.args[k].as_ptr() as usize - c.raw_args.as_ptr() as usize;
    &c.raw_args[off.min(c.raw_args.len())..]
}

/// Sum of the `iov_len=N` of an iovec array argument (readv/writev), or null.
fn iov_total(arg: &[u8]) -> i64 {
    let mut total: i64 = 0;
    let mut seen = false;
    for at in memchr::memmem::find_iter(arg, b"iov_len=") {
        if let Some((v, _)) = line::parse_int(&arg[at + 8..]) {
            total = total.saturating_add(v);
            seen = true;
        }
    }
    if seen {
        total
    } else {
        NULL
    }
}
