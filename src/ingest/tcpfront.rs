//! Line protocol over raw TCP (telegraf's `socket_writer`, `nc`, the load generator), served
//! by the native front end: accepting, newline framing, the handshake, limits, back-pressure
//! and the acknowledgements of the durable-offset mode, in native threads.
//!
//! A connection's complete lines become [`TcpItem`]s in the front end's queue
//! ([`Front::take_all`]), beside the HTTP requests: the server's one dispatcher decodes a
//! round's line-protocol bodies of one trace together, whatever their protocol, appends them
//! and hands each item back ([`TcpItem::finish`]) with the LSN its rows await; the store's
//! group committer then releases the item (and sends its `ok` line) from its own thread.
//!
//! Acknowledgements - the semantics of the asyncio listener this replaces, unchanged on the wire:
//! - By default a connection is **at-most-once** (InfluxDB's and QuestDB's TCP listeners):
//!   nothing is sent back; lines are appended as they arrive and durable one group commit later.
//! - A client whose first line is `# tracehouse acks=1` (a comment to any line-protocol parser)
//!   gets **durable offsets**: `ok <line> <rows>\n` once every line up to `<line>` is durable
//!   (under `--ack written`: in the WAL) with `<rows>` stored so far on the connection, and
//!   `err <line> <reason>\n` per refused line, in line order.
//!
//! The same first line may carry `bucket=NAME`, `precision=ns|us|ms|s` and `token=TOKEN`
//! (required when the server has one: `err 0 unauthorized ...` and the connection is closed).
//!
//! Items of one connection: while its last item still waits in the queue, newly received
//! lines extend it (one decode for everything a fast sender streamed during a round, not one
//! per network read). A line longer than `max_line` is dropped as it streams in (never
//! buffered beyond the limit) and becomes an item of its own (its error), so line numbers stay
//! exact. Back-pressure: a connection stops reading while more than `high_water` of its bytes
//! wait to be appended, or while the TCP bytes in flight (not yet appended, or under acks not
//! yet acknowledged) of all connections exceed `max_inflight`: the sender is slowed by TCP.
//!
//! End of a connection: at EOF a last line without `\n` still counts (as `nc` sends it); what
//! was received is appended, the last acknowledgements are sent, then the server closes. A
//! reset drops the unfinished tail. [`Front::close_tcp`] (SIGTERM) stops reading everywhere,
//! drops unfinished tails and waits for what was received to be appended and acknowledged.
//!
//! Why native: the asyncio listener cost interpreter time per network read and per chunk and
//! a Python thread waiting for durability (514K QoS rows/s over TCP against 643K over HTTP);
//! here a chunk reaches Python whole, with the HTTP requests of its round. Measured
//! 2026-11-26, `tracehouse load qos --agents 128 --rows-per-batch 1000 --duration 10`, each
//! protocol against one server in turn, two rounds, at load average 10-17 (other jobs on the
//! 2 cores): before (asyncio) HTTP 241K / 248K rows/s, TCP durable offsets 112K / 136K (0.46x,
//! 0.55x), TCP at-most-once 90K / 81K; after HTTP 283K / 251K, TCP durable offsets 254K / 255K
//! (0.90x, 1.02x), TCP at-most-once 217K / 186K stored; three more rounds (8 s, load 6-7)
//! HTTP 290K / 203K / 277K, TCP durable offsets 271K / 207K / 334K.
//!
//! Over 600 lines: the connection threads' framing, handshake, limits and back-pressure and
//! the per-connection ack writer share one connection state; its tests sit at the bottom.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::front::{linger_close, same_bytes, send_now, Budget, Front, Inbox};
use crate::mutex::lock;
use crate::store::commit::GroupCommit;

/// Bytes one item grows to at most by later reads (see [`Front::push_lines`]).
pub const ITEM_BYTES: usize = 4 << 20;

/// How long an item whose last read ended inside a line (more of that write is coming) waits
/// for the rest before the dispatcher takes it anyway (a sender stalled mid-line must not hold
/// its complete lines).
pub const RIPE_AFTER: Duration = Duration::from_millis(10);

/// Limits of the TCP listener.
#[derive(Clone, Debug)]
pub struct TcpConfig {
    /// Trace of the lines of a connection whose handshake names none.
    pub bucket: String,
    /// Longest line in bytes; a longer one is dropped (an error for that line).
    pub max_line: usize,
    /// Bytes of one connection waiting to be appended before its reads pause.
    pub high_water: usize,
    /// Open TCP connections at most; one more gets `err 0 too many connections` and is closed.
    pub max_connections: usize,
    /// A connection silent this long with nothing in flight is closed.
    pub idle_timeout: Duration,
    /// TCP bytes in flight (received, not yet appended or acknowledged), all connections.
    pub max_inflight: usize,
    /// When set, the first line must be `# tracehouse token=<token>`.
    pub token: Option<String>,
}

/// Counters, for the health endpoint.
#[derive(Default)]
pub struct TcpStats {
    /// TCP connections open now.
    pub connections: AtomicUsize,
    /// Connections refused by the connection limit.
    pub refused_connections: AtomicU64,
    /// Bytes in flight now.
    pub inflight: AtomicUsize,
}

/// The TCP side of a front end: its limits, budget, open connections and counters.
pub struct TcpListen {
    cfg: TcpConfig,
    /// The counters.
    pub stats: TcpStats,
    budget: Budget,
    stop: AtomicBool,
    local: SocketAddr,
    open: Mutex<Vec<Arc<Conn>>>,
    next_conn: AtomicU64,
    /// Signalled when a connection ends (for [`Front::close_tcp`]).
    ended: Condvar,
    ended_lock: Mutex<()>,
}

/// What one queue item carries.
pub enum Payload {
    /// Complete lines (each ending in `\n`), the first numbered `first_line`.
    Lines {
        /// The lines.
        body: Vec<u8>,
        /// Number of the first line on its connection (the handshake is line 1).
        first_line: u64,
        /// How many lines.
        lines: u64,
    },
    /// A line dropped for its length: only its error is reported.
    Dropped {
        /// Its number.
        line: u64,
        /// Why.
        why: String,
    },
}

/// One piece of a connection's stream, waiting in the front end's queue or being ingested.
/// Finish it once ([`TcpItem::finish`] / [`TcpItem::fail`]); dropped unfinished, it fails.
pub struct TcpItem {
    /// The connection it came from.
    pub conn: Arc<Conn>,
    /// What it carries.
    pub payload: Payload,
    /// When its first byte arrived (ns since the epoch): the time of lines without one.
    pub received_ns: i64,
    seq: u64,
    bytes: usize,
    finished: bool,
    /// Its last read ended at a line's end (a sender's write is likely whole): take it now.
    ripe: bool,
    since: Instant,
}

/// What an ingested item answers (in order with the connection's other items).
struct Answer {
    rows: u64,
    errors: Vec<(u64, String)>,
    ok_line: Option<u64>,
    fatal: bool,
}

#[derive(Default)]
struct ConnState {
    /// Bytes handed to the dispatcher, not yet appended.
    queued: usize,
    /// Items not yet finished and answered.
    outstanding: u64,
    next_seq: u64,
    /// Answers waiting for an earlier item's.
    waiting: BTreeMap<u64, Answer>,
    flushed_seq: u64,
    rows: u64,
    /// Acknowledgement text not yet written.
    out: Vec<u8>,
    /// Someone is writing acknowledgements to the socket now (the thread that made them due,
    /// or the ack writer): the others leave `out` to it, so the text goes out in order.
    writing: bool,
    /// A write failed (the client is gone): later acknowledgements are dropped.
    broken: bool,
    /// The reader waits for room below the high water (`changed` must wake it).
    room_wait: bool,
    /// Stop reading (a fatal error, or shutdown): what is in flight is finished, then close.
    closing: bool,
    /// The reader is done: the ack writer ends once `out` is empty.
    reader_done: bool,
}

/// One TCP connection as the dispatcher sees it.
pub struct Conn {
    id: u64,
    /// The client's address.
    pub peer: String,
    /// The trace its lines go to.
    pub bucket: String,
    /// `ns`, `us`, `ms` or `s`.
    pub precision: String,
    /// Whether it asked for durable offsets.
    pub acks: bool,
    stream: TcpStream,
    state: Mutex<ConnState>,
    /// The reader's waits: room below the high water, and (at its end) nothing outstanding.
    changed: Condvar,
    /// The ack writer's wait: text a non-blocking write could not send, or the end.
    ack_due: Condvar,
    /// An item of this connection waits in the queue untaken (guarded by the queue's lock).
    pub(crate) open_item: AtomicBool,
    listen: Arc<TcpListen>,
}

fn now_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

impl TcpListen {
    fn acquire(&self, n: usize) -> bool {
        self.budget.acquire(n, None, &self.stop, &self.stats.inflight)
    }

    fn release(&self, n: usize) {
        // One reader is woken, which wakes the next if room is left: waking all of them on each
        // release (128 readers of a full budget) was ~7,000 context switches a second and a
        // quarter of the server's CPU in its connection threads, measured with `perf`.
        self.budget.release(n, &self.stats.inflight);
    }
}

impl Conn {
    /// Its number among the server's TCP connections.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Records `a` as item `seq`'s answer and sends, in order, every answer now due.
    ///
    /// The text is written here, on the thread that made it due (the group committer's, for
    /// durable offsets), without blocking: handing it to the connection's ack writer cost a
    /// thread wake-up per acknowledgement, a run-queue wait on a loaded machine. Only what the
    /// socket does not take at once (a client not reading its acknowledgements) goes to the ack
    /// writer, which blocks on it.
    fn answer(&self, seq: u64, a: Answer) {
        let mut st = lock(&self.state);
        st.waiting.insert(seq, a);
        let mut ended = false;
        loop {
            let next = st.flushed_seq;
            let Some(a) = st.waiting.remove(&next) else { break };
            st.flushed_seq += 1;
            st.outstanding -= 1;
            st.rows += a.rows;
            if self.acks {
                for (line, why) in &a.errors {
                    let _ = writeln!(st.out, "err {line} {}", why.replace('\n', " "));
                }
                if let Some(line) = a.ok_line {
                    let rows = st.rows;
                    let _ = writeln!(st.out, "ok {line} {rows}");
                }
            }
            if a.fatal && !st.closing {
                st.closing = true;
                let _ = self.stream.shutdown(Shutdown::Read); // the reader stops at once
                ended = true;
            }
        }
        // The reader may wait for this (its end, or a fatal error while it waits for room).
        ended |= st.outstanding == 0 && st.reader_done || st.closing && st.room_wait;
        let to_writer = self.send_due(st);
        if ended {
            self.changed.notify_all();
        }
        if ended || to_writer {
            self.ack_due.notify_all();
        }
    }

    /// Writes `out` without blocking unless someone else is writing; true when the ack writer
    /// must look: text is left for it, or the reader ended while this wrote (the writer may have
    /// seen `writing` and gone back to wait for its end).
    fn send_due<'a>(&'a self, mut st: MutexGuard<'a, ConnState>) -> bool {
        let mut wrote = false;
        while !st.writing && !st.out.is_empty() {
            wrote = true;
            if st.broken {
                st.out.clear();
                break;
            }
            st.writing = true;
            let out = std::mem::take(&mut st.out);
            drop(st);
            let sent = send_now(&self.stream, &out);
            st = lock(&self.state);
            st.writing = false;
            match sent {
                Ok(n) if n == out.len() => {}
                Ok(n) => {
                    // The rest goes first, before what became due meanwhile.
                    let mut rest = out[n..].to_vec();
                    rest.append(&mut st.out);
                    st.out = rest;
                    return true;
                }
                Err(_) => st.broken = true, // a client gone loses its acknowledgements
            }
        }
        wrote && st.reader_done
    }

    /// Writes what a non-blocking write left (blocking), until the reader is done and all is sent.
    fn write_acks(&self) {
        let mut s = match self.stream.try_clone() {
            Ok(s) => s,
            Err(_) => return,
        };
        let _ = s.set_write_timeout(Some(self.listen.cfg.idle_timeout.max(Duration::from_secs(5))));
        loop {
            let out = {
                let mut st = lock(&self.state);
                loop {
                    if !st.writing && !st.out.is_empty() {
                        break;
                    }
                    if !st.writing && st.out.is_empty() && st.reader_done && st.outstanding == 0 {
                        return;
                    }
                    st = self.ack_due.wait(st).unwrap_or_else(|e| e.into_inner());
                }
                if st.broken {
                    st.out.clear();
                    continue;
                }
                st.writing = true;
                std::mem::take(&mut st.out)
            };
            // A client that stopped reading its acknowledgements loses them, not the server a thread.
            let ok = s.write_all(&out).is_ok();
            let mut st = lock(&self.state);
            st.writing = false;
            st.broken |= !ok;
        }
    }
}

impl TcpItem {
    /// Bytes of its lines.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether the dispatcher should take it at `now` (else: when it may, at the latest).
    pub fn due(&self, now: Instant) -> Result<(), Instant> {
        let at = self.since + RIPE_AFTER;
        if self.ripe || now >= at {
            Ok(())
        } else {
            Err(at)
        }
    }

    /// The item was appended: `rows` stored, `errors` (line, reason) refused, its lines up to
    /// `last_line` processed. Under durable offsets its answer waits for `lsn` to be durable
    /// in `commit` (none: it is already, or the server acknowledges written rows).
    pub fn finish(
        mut self,
        rows: u64,
        errors: Vec<(u64, String)>,
        last_line: u64,
        commit: Option<(&GroupCommit, u64)>,
    ) {
        self.finished = true;
        let conn = Arc::clone(&self.conn);
        let room = {
            let mut st = lock(&conn.state);
            st.queued = st.queued.saturating_sub(self.bytes);
            st.room_wait && st.queued <= conn.listen.cfg.high_water / 2
        };
        if room {
            conn.changed.notify_all(); // its reader waits for room below the high water
        }
        let ok_line = matches!(self.payload, Payload::Lines { .. }).then_some(last_line);
        let (seq, bytes) = (self.seq, self.bytes);
        let answer = Answer { rows, errors, ok_line, fatal: false };
        match commit {
            Some((gc, lsn)) if conn.acks => {
                // Its bytes stay in flight until durable: a slow disk slows the senders.
                gc.on_durable(
                    lsn,
                    Box::new(move |r| {
                        let a = match r {
                            Ok(()) => answer,
                            Err(why) => Answer {
                                rows: 0,
                                errors: vec![(last_line, format!("write not durable: {why}"))],
                                ok_line: None,
                                fatal: true,
                            },
                        };
                        conn.listen.release(bytes);
                        conn.answer(seq, a);
                    }),
                );
            }
            _ => {
                conn.listen.release(bytes);
                conn.answer(seq, answer);
            }
        }
    }

    /// The item could not be appended (`why`): its error is sent (durable offsets) and the
    /// connection is closed once what came before it is answered.
    pub fn fail(mut self, why: &str) {
        self.finished = true;
        self.fail_inner(why);
    }

    fn fail_inner(&self, why: &str) {
        {
            let mut st = lock(&self.conn.state);
            st.queued = st.queued.saturating_sub(self.bytes);
        }
        let line = match &self.payload {
            Payload::Lines { first_line, .. } => *first_line,
            Payload::Dropped { line, .. } => *line,
        };
        self.conn.listen.release(self.bytes);
        self.conn
            .answer(self.seq, Answer { rows: 0, errors: vec![(line, why.to_string())], ok_line: None, fatal: true });
    }
}

impl Drop for TcpItem {
    fn drop(&mut self) {
        // Dropped unfinished (shutdown cleared the queue, or a dispatcher bug): its connection
        // must neither wait for it forever nor hold its budget.
        if !self.finished {
            self.fail_inner("server shutting down");
        }
    }
}

impl Front {
    /// Starts accepting line-protocol connections on `listener` beside the HTTP ones; their
    /// items come out of [`Front::take_all`].
    pub fn listen_tcp(self: &Arc<Self>, listener: TcpListener, cfg: TcpConfig) -> io::Result<()> {
        listener.set_nonblocking(false)?;
        let budget = Budget::new(cfg.max_inflight, true);
        let tcp = Arc::new(TcpListen {
            cfg,
            stats: TcpStats::default(),
            budget,
            stop: AtomicBool::new(false),
            local: listener.local_addr()?,
            open: Mutex::new(Vec::new()),
            next_conn: AtomicU64::new(0),
            ended: Condvar::new(),
            ended_lock: Mutex::new(()),
        });
        *lock(&self.tcp) = Some(Arc::clone(&tcp));
        let front = Arc::clone(self);
        thread::Builder::new().name("th-tcp-accept".into()).spawn(move || front.tcp_accept_loop(&tcp, listener))?;
        Ok(())
    }

    /// The TCP listener's counters, when one was started.
    pub fn tcp_stats(&self) -> Option<Arc<TcpListen>> {
        lock(&self.tcp).clone()
    }

    /// Stops accepting TCP connections and reading from the open ones (their unfinished last
    /// lines are dropped), then waits up to `timeout` for what they sent to be appended and
    /// acknowledged (the dispatcher must still run). Returns the connections still open.
    pub fn close_tcp(&self, timeout: Duration) -> usize {
        let Some(tcp) = lock(&self.tcp).clone() else { return 0 };
        if !tcp.stop.swap(true, Ordering::SeqCst) {
            let _ = TcpStream::connect_timeout(&tcp.local, Duration::from_millis(200));
            // wakes accept()
        }
        let conns: Vec<Arc<Conn>> = lock(&tcp.open).clone();
        for c in &conns {
            lock(&c.state).closing = true;
            let _ = c.stream.shutdown(Shutdown::Read);
            c.changed.notify_all();
        }
        tcp.budget.wake_all();
        let deadline = Instant::now() + timeout;
        let mut g = lock(&tcp.ended_lock);
        loop {
            let n = tcp.stats.connections.load(Ordering::SeqCst);
            let left = deadline.saturating_duration_since(Instant::now());
            if n == 0 || left.is_zero() {
                return n;
            }
            g = tcp.ended.wait_timeout(g, left.min(Duration::from_millis(50))).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    fn tcp_accept_loop(self: Arc<Self>, tcp: &Arc<TcpListen>, listener: TcpListener) {
        loop {
            let (stream, peer) = match listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) if !tcp.stop.load(Ordering::Relaxed) => {
                    thread::sleep(Duration::from_millis(10)); // e.g. out of fds: back off, go on
                    continue;
                }
                Err(_) => return,
            };
            if tcp.stop.load(Ordering::Relaxed) {
                return;
            }
            if tcp.stats.connections.load(Ordering::SeqCst) >= tcp.cfg.max_connections {
                tcp.stats.refused_connections.fetch_add(1, Ordering::Relaxed);
                let mut s = stream;
                let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
                let _ = s.write_all(b"err 0 too many connections\n");
                continue;
            }
            tcp.stats.connections.fetch_add(1, Ordering::SeqCst);
            let front = Arc::clone(&self);
            let t = Arc::clone(tcp);
            let spawned = thread::Builder::new().name("th-tcp-conn".into()).stack_size(256 << 10).spawn(move || {
                front.serve_tcp(&t, stream, peer);
                t.stats.connections.fetch_sub(1, Ordering::SeqCst);
                let _g = lock(&t.ended_lock);
                t.ended.notify_all();
            });
            if spawned.is_err() {
                tcp.stats.connections.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    /// Hands `lines` (complete, numbered from `first`) to the dispatcher: extends the
    /// connection's item still waiting in the queue, or queues a new one. False when the front
    /// end is closed.
    ///
    /// `ripe`: the read ended at a line's end. A sender writes whole batches, and the kernel
    /// hands them over in pieces: an item taken while the rest of its batch streams in left the
    /// rest to a later round at the back of the queue (a durable-offset `ok` then waited for
    /// two rounds, not one); so an item cut inside a line waits for its next read (at most
    /// [`RIPE_AFTER`]).
    fn push_lines(&self, conn: &Arc<Conn>, lines: &[u8], first: u64, count: u64, ripe: bool) -> bool {
        {
            let mut st = lock(&conn.state);
            st.queued += lines.len();
        }
        let mut ib = lock(&self.inbox);
        if self.closed() {
            drop(ib);
            let mut st = lock(&conn.state);
            st.queued = st.queued.saturating_sub(lines.len());
            drop(st);
            conn.listen.release(lines.len());
            return false;
        }
        if conn.open_item.load(Ordering::Relaxed) {
            if let Some(item) = ib.tcp.iter_mut().rev().find(|i| i.conn.id == conn.id) {
                if let Payload::Lines { body, lines: n, .. } = &mut item.payload {
                    if body.len() + lines.len() > ITEM_BYTES {
                        item.ripe = true; // full: taken as it is, a new item below
                    } else {
                        body.extend_from_slice(lines);
                        *n += count;
                        item.bytes += lines.len();
                        let newly = ripe && !item.ripe;
                        item.ripe = ripe;
                        drop(ib);
                        if newly {
                            self.ready.notify_one();
                        }
                        return true;
                    }
                }
            }
        }
        let seq = {
            let mut st = lock(&conn.state);
            st.outstanding += 1;
            st.next_seq += 1;
            st.next_seq - 1
        };
        // Room for the reads that may extend it, reserved once: growing by doubling copied
        // each body up to four times (and faulted in fresh pages each time).
        let mut body = Vec::with_capacity(ITEM_BYTES.max(lines.len()));
        body.extend_from_slice(lines);
        ib.tcp.push_back(TcpItem {
            conn: Arc::clone(conn),
            payload: Payload::Lines { body, first_line: first, lines: count },
            received_ns: now_ns(),
            seq,
            bytes: lines.len(),
            finished: false,
            ripe,
            since: Instant::now(),
        });
        conn.open_item.store(true, Ordering::Relaxed);
        drop(ib);
        self.ready.notify_one();
        true
    }

    /// Marks `conn`'s item waiting in the queue ripe (its reader stopped, or sealed it).
    fn ripen_locked(&self, ib: &mut Inbox, conn: &Conn) {
        if conn.open_item.load(Ordering::Relaxed) {
            if let Some(item) = ib.tcp.iter_mut().rev().find(|i| i.conn.id == conn.id) {
                item.ripe = true;
            }
        }
    }

    /// Queues the error of dropped line `line`; the connection's next lines start a new item.
    fn push_dropped(&self, conn: &Arc<Conn>, line: u64, why: String) {
        let mut ib = lock(&self.inbox);
        if self.closed() {
            return;
        }
        let seq = {
            let mut st = lock(&conn.state);
            st.outstanding += 1;
            st.next_seq += 1;
            st.next_seq - 1
        };
        ib.tcp.push_back(TcpItem {
            conn: Arc::clone(conn),
            payload: Payload::Dropped { line, why },
            received_ns: now_ns(),
            seq,
            bytes: 0,
            finished: false,
            ripe: true,
            since: Instant::now(),
        });
        self.ripen_locked(&mut ib, conn);
        conn.open_item.store(false, Ordering::Relaxed); // sealed: line numbers stay consecutive per item
        drop(ib);
        self.ready.notify_one();
    }

    fn serve_tcp(&self, tcp: &Arc<TcpListen>, stream: TcpStream, peer: SocketAddr) {
        let cfg = &tcp.cfg;
        let _ = stream.set_nodelay(true);
        let _ = stream.set_read_timeout(Some(cfg.idle_timeout));
        let _ = stream.set_write_timeout(Some(cfg.idle_timeout.max(Duration::from_secs(5))));
        let mut r = Reader { stream, buf: vec![0; 256 << 10], filled: 0, eof: false };
        // The handshake: the first line (or, at EOF, the only one).
        let first_end = loop {
            if let Some(i) = memchr::memchr(b'\n', &r.buf[..r.filled]) {
                break Some(i);
            }
            if r.filled > cfg.max_line || tcp.stop.load(Ordering::Relaxed) {
                break None; // an over-long first line: no handshake, the line is dropped below
            }
            match r.fill() {
                Ok(0) => break if r.filled > 0 { Some(r.filled) } else { return },
                Ok(_) => {}
                Err(_) => return, // silent past the idle timeout, or reset
            }
        };
        let opts = first_end.map(|e| handshake(&r.buf[..e])).unwrap_or_default();
        let mut w = r.stream.try_clone().ok();
        let refuse = |w: &mut Option<TcpStream>, msg: &str| {
            if let Some(s) = w.as_mut() {
                let _ = s.write_all(msg.as_bytes());
                linger_close(s, cfg.idle_timeout);
            }
        };
        if let Some(token) = cfg.token.as_deref() {
            if !opts.token.as_deref().is_some_and(|t| same_bytes(t.as_bytes(), token.as_bytes())) {
                let why = if opts.token.is_none() { "no token" } else { "wrong token" };
                self.note_auth_refusal(format!("TCP line protocol from {peer}: {why}"));
                refuse(&mut w, "err 0 unauthorized: first line must be '# tracehouse token=<token>'\n");
                return;
            }
        }
        let precision = match opts.precision.as_deref() {
            None => "ns".to_string(),
            Some("n") => "ns".to_string(),
            Some("u") => "us".to_string(),
            Some(p) if matches!(p, "ns" | "us" | "ms" | "s") => p.to_string(),
            Some(p) => {
                refuse(&mut w, &format!("err 0 precision '{p}': expected ns, us, ms or s\n"));
                return;
            }
        };
        let conn = Arc::new(Conn {
            id: tcp.next_conn.fetch_add(1, Ordering::Relaxed),
            peer: peer.to_string(),
            bucket: opts.bucket.unwrap_or_else(|| cfg.bucket.clone()),
            precision,
            acks: opts.acks,
            stream: match r.stream.try_clone() {
                Ok(s) => s,
                Err(_) => return,
            },
            state: Mutex::new(ConnState::default()),
            changed: Condvar::new(),
            ack_due: Condvar::new(),
            open_item: AtomicBool::new(false),
            listen: Arc::clone(tcp),
        });
        lock(&tcp.open).push(Arc::clone(&conn));
        if tcp.stop.load(Ordering::SeqCst) {
            lock(&conn.state).closing = true; // shutdown began during its handshake: read no more
        }
        let writer = if conn.acks {
            let c = Arc::clone(&conn);
            thread::Builder::new().name("th-tcp-acks".into()).stack_size(128 << 10).spawn(move || c.write_acks()).ok()
        } else {
            None
        };
        self.read_lines(tcp, &conn, &mut r);
        {
            let mut ib = lock(&self.inbox);
            self.ripen_locked(&mut ib, &conn); // nothing more will come: no reason to wait
        }
        self.ready.notify_one();
        // What was received is appended and answered before the server closes.
        {
            let mut st = lock(&conn.state);
            st.reader_done = true;
            while st.outstanding > 0 {
                st = conn.changed.wait_timeout(st, Duration::from_millis(200)).unwrap_or_else(|e| e.into_inner()).0;
            }
        }
        conn.changed.notify_all();
        conn.ack_due.notify_all();
        if let Some(h) = writer {
            let _ = h.join();
        }
        let _ = conn.stream.shutdown(Shutdown::Both);
        lock(&tcp.open).retain(|c| c.id != conn.id);
    }

    fn read_lines(&self, tcp: &Arc<TcpListen>, conn: &Arc<Conn>, r: &mut Reader) {
        let cfg = &tcp.cfg;
        let mut line_no: u64 = 0; // lines handed over so far
        let mut discarding = false; // inside a dropped over-long line
        let mut scanned = 0usize; // bytes of buf[..filled] known to hold no '\n'
        loop {
            // Complete lines go to the dispatcher.
            // Whole lines end at a newline outside a string field (which may hold newlines).
            let whole = match memchr::memrchr(b'\n', &r.buf[scanned..r.filled]) {
                Some(_) => crate::ingest::lineproto::whole_lines(&r.buf[..r.filled], cfg.max_line),
                None => 0,
            };
            if whole > 0 {
                let end = whole;
                let mut start = 0;
                if discarding {
                    start = memchr::memchr(b'\n', &r.buf[..end]).map_or(end, |j| j + 1);
                    discarding = false;
                }
                if start < end {
                    let lines = &r.buf[start..end];
                    let count = memchr::memchr_iter(b'\n', lines).count() as u64;
                    let ripe = end == r.filled;
                    if !tcp.acquire(lines.len()) || !self.push_lines(conn, lines, line_no + 1, count, ripe) {
                        return;
                    }
                    line_no += count;
                }
                r.buf.copy_within(end..r.filled, 0);
                r.filled -= end;
                scanned = 0;
            } else {
                scanned = r.filled;
            }
            if r.filled > cfg.max_line {
                if !discarding {
                    line_no += 1;
                    let why = format!("line is longer than the limit of {} bytes; dropped", cfg.max_line);
                    self.push_dropped(conn, line_no, why);
                }
                discarding = true;
                r.filled = 0;
                scanned = 0;
            }
            // Back-pressure: no reading while this connection's bytes wait beyond the high water.
            {
                let mut st = lock(&conn.state);
                if st.queued > cfg.high_water {
                    st.room_wait = true;
                    while st.queued > cfg.high_water / 2 && !st.closing {
                        st = conn
                            .changed
                            .wait_timeout(st, Duration::from_millis(200))
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                    }
                    st.room_wait = false;
                }
                if st.closing {
                    return; // shutdown or a failed append: the unfinished tail is dropped
                }
            }
            if r.eof {
                // A last line without '\n' still counts.
                if r.filled > 0 && !discarding {
                    let mut last = r.buf[..r.filled].to_vec();
                    last.push(b'\n');
                    if tcp.acquire(last.len()) {
                        self.push_lines(conn, &last, line_no + 1, 1, true);
                    }
                }
                return;
            }
            match r.fill() {
                Ok(_) => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    let busy = lock(&conn.state).outstanding > 0;
                    if !busy {
                        return; // silent past the idle timeout with nothing in flight
                    }
                }
                Err(_) => return, // reset: the unfinished tail is dropped
            }
        }
    }

    fn note_auth_refusal(&self, what: String) {
        self.stats.auth_refusals.fetch_add(1, Ordering::Relaxed);
        *lock(&self.last_auth_refusal) = what;
    }
}

/// A connection's read buffer: `buf[..filled]` holds unprocessed bytes.
struct Reader {
    stream: TcpStream,
    buf: Vec<u8>,
    filled: usize,
    eof: bool,
}

impl Reader {
    /// Reads once (into room it makes); Ok(0) at EOF (also remembered in `eof`).
    fn fill(&mut self) -> io::Result<usize> {
        if self.buf.len() - self.filled < (64 << 10) {
            let grow = self.buf.len().max(64 << 10);
            self.buf.resize(self.buf.len() + grow, 0);
        }
        loop {
            match self.stream.read(&mut self.buf[self.filled..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(0);
                }
                Ok(n) => {
                    self.filled += n;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// What a first line `# tracehouse k=v ...` asks for.
#[derive(Default, Debug, PartialEq)]
struct Handshake {
    bucket: Option<String>,
    precision: Option<String>,
    token: Option<String>,
    acks: bool,
}

fn handshake(line: &[u8]) -> Handshake {
    let text = String::from_utf8_lossy(line);
    let mut h = Handshake::default();
    let Some(rest) = text.trim().strip_prefix("# tracehouse") else { return h };
    for word in rest.split_whitespace() {
        let (k, v) = word.split_once('=').unwrap_or((word, ""));
        match k {
            "bucket" => h.bucket = Some(v.to_string()),
            "precision" => h.precision = Some(v.to_string()),
            "token" => h.token = Some(v.to_string()),
            "acks" => h.acks = !matches!(v, "0" | "" | "false"),
            _ => {}
        }
    }
    h
}

/// Equality in time independent of where the first difference is (the token is a secret).
#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::front::FrontConfig;

    fn start(max_line: usize, high_water: usize) -> (Arc<Front>, SocketAddr) {
        let h = TcpListener::bind("127.0.0.1:0").unwrap();
        let cfg = FrontConfig {
            max_body: 1 << 20,
            max_head: 16 << 10,
            max_connections: 8,
            idle_timeout: Duration::from_secs(5),
            max_inflight: 4 << 20,
            overload_wait: Duration::from_millis(100),
            retry_after: 1,
            token: None,
            open_paths: vec![],
            request_timeout: Duration::from_secs(60),
            min_rate: 0,
        };
        let front = Front::start(h, cfg).unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let tcfg = TcpConfig {
            bucket: "lp".into(),
            max_line,
            high_water,
            max_connections: 4,
            idle_timeout: Duration::from_secs(5),
            max_inflight: 1 << 20,
            token: Some("tk".into()),
        };
        front.listen_tcp(l, tcfg).unwrap();
        (front, addr)
    }

    /// Finishes every item as the dispatcher would (each line one row, no errors) and returns
    /// (first_line, lines, body) of the line items and the dropped line numbers.
    /// (first_line, lines, body) of one line item.
    type Taken = (u64, u64, Vec<u8>);

    fn drain(front: &Front, until_lines: u64) -> (Vec<Taken>, Vec<u64>) {
        let mut got = Vec::new();
        let mut dropped = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut n = 0;
        while n < until_lines && Instant::now() < deadline {
            let (_http, tcp) = front.take_all(16, 1 << 20, Duration::from_millis(50));
            for item in tcp {
                let (rows, errors, last) = match &item.payload {
                    Payload::Lines { body, first_line, lines } => {
                        got.push((*first_line, *lines, body.clone()));
                        n = first_line + lines - 1;
                        (*lines, vec![], n)
                    }
                    Payload::Dropped { line, why } => {
                        dropped.push(*line);
                        (0, vec![(*line, why.clone())], *line)
                    }
                };
                item.finish(rows, errors, last, None);
            }
        }
        (got, dropped)
    }

    #[test]
    fn lines_across_packets_over_long_lines_and_acks_in_order() {
        let (front, addr) = start(64, 1 << 20);
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"# tracehouse acks=1 bucket=b1 token=tk\nm v=1 1\nm v=").unwrap();
        thread::sleep(Duration::from_millis(50));
        s.write_all(b"2 2\n").unwrap(); // a line split across two packets
        s.write_all(&[b'x'; 100]).unwrap(); // over-long, no newline yet
        thread::sleep(Duration::from_millis(50));
        s.write_all(b"yyy\nm v=4 4").unwrap(); // its end, then a last line without '\n'
        s.shutdown(Shutdown::Write).unwrap();
        let (got, dropped) = drain(&front, 5);
        let all: Vec<u8> = got.iter().flat_map(|g| g.2.clone()).collect();
        assert_eq!(all, b"# tracehouse acks=1 bucket=b1 token=tk\nm v=1 1\nm v=2 2\nm v=4 4\n");
        assert_eq!(dropped, vec![4]);
        // Numbering is exact: the items and the dropped line cover lines 1..=5 once each.
        let mut numbers: Vec<u64> = got.iter().flat_map(|(first, lines, _)| *first..first + lines).collect();
        numbers.extend(&dropped);
        numbers.sort_unstable();
        assert_eq!(numbers, vec![1, 2, 3, 4, 5]);
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.last(), Some(&"ok 5 4"), "{out}");
        assert!(lines.contains(&"err 4 line is longer than the limit of 64 bytes; dropped"), "{out}");
        front.close();
    }

    #[test]
    fn acknowledgements_a_slow_reader_does_not_take_at_once_still_arrive_whole_and_in_order() {
        // Acknowledgements are written without blocking by the thread that makes them due; what
        // the socket does not take then (this client reads nothing until the end; a small send
        // buffer) goes to the connection's ack writer, before anything due later.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server_side, _) = l.accept().unwrap();
        let small: libc::c_int = 8192;
        // SAFETY: a valid socket and a c_int option value of the size given.
        let rc = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&server_side),
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                (&small as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0);
        let n: u64 = 2_000;
        let listen = Arc::new(TcpListen {
            cfg: TcpConfig {
                bucket: "lp".into(),
                max_line: 1 << 10,
                high_water: 1 << 20,
                max_connections: 4,
                idle_timeout: Duration::from_secs(20),
                max_inflight: 1 << 20,
                token: None,
            },
            stats: TcpStats::default(),
            budget: Budget::new(1 << 20, true),
            stop: AtomicBool::new(false),
            local: l.local_addr().unwrap(),
            open: Mutex::new(Vec::new()),
            next_conn: AtomicU64::new(0),
            ended: Condvar::new(),
            ended_lock: Mutex::new(()),
        });
        let conn = Arc::new(Conn {
            id: 0,
            peer: "test".into(),
            bucket: "lp".into(),
            precision: "ns".into(),
            acks: true,
            stream: server_side,
            state: Mutex::new(ConnState { outstanding: n, next_seq: n, ..ConnState::default() }),
            changed: Condvar::new(),
            ack_due: Condvar::new(),
            open_item: AtomicBool::new(false),
            listen,
        });
        let c = Arc::clone(&conn);
        let writer = thread::spawn(move || c.write_acks());
        // Answers come out of order (seq 1 before 0) and from two threads, ~1.2 MB of text.
        let why = "w".repeat(600);
        let (a, b) = (Arc::clone(&conn), Arc::clone(&conn));
        let (w1, w2) = (why.clone(), why);
        let odd = thread::spawn(move || {
            for seq in (1..n).step_by(2) {
                a.answer(seq, Answer { rows: 1, errors: vec![(seq, w1.clone())], ok_line: Some(seq), fatal: false });
            }
        });
        let even = thread::spawn(move || {
            for seq in (0..n).step_by(2) {
                b.answer(seq, Answer { rows: 1, errors: vec![(seq, w2.clone())], ok_line: Some(seq), fatal: false });
            }
        });
        odd.join().unwrap();
        even.join().unwrap();
        lock(&conn.state).reader_done = true;
        conn.ack_due.notify_all();
        thread::sleep(Duration::from_millis(100)); // the client still reads nothing
        client.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut got = Vec::new();
        let mut r = io::BufReader::new(&mut client);
        let mut line = String::new();
        while (got.len() as u64) < 2 * n {
            line.clear();
            assert!(io::BufRead::read_line(&mut r, &mut line).unwrap() > 0, "{} lines", got.len());
            got.push(line.trim_end().to_string());
        }
        writer.join().unwrap();
        for seq in 0..n {
            let (e, o) = (&got[2 * seq as usize], &got[2 * seq as usize + 1]);
            assert!(
                e.starts_with(&format!("err {seq} www")) && e.len() == 600 + format!("err {seq} ").len(),
                "{seq}: {e:.40}"
            );
            assert_eq!(o, &format!("ok {seq} {}", seq + 1));
        }
    }

    #[test]
    fn the_token_and_the_precision_are_checked_on_the_first_line() {
        let (front, addr) = start(1 << 10, 1 << 20);
        for (first, want) in [
            (&b"m v=1 1\n"[..], "err 0 unauthorized"),
            (b"# tracehouse token=nope\n", "err 0 unauthorized"),
            (b"# tracehouse token=tk precision=h\n", "err 0 precision 'h'"),
        ] {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.write_all(first).unwrap();
            let mut out = String::new();
            let _ = s.read_to_string(&mut out);
            assert!(out.starts_with(want), "{out}");
        }
        assert_eq!(front.stats.auth_refusals.load(Ordering::Relaxed), 2); // HTTP and TCP refusals, one count
        front.close();
    }

    #[test]
    fn a_connection_over_the_high_water_stops_being_read_until_appended() {
        let (front, addr) = start(1 << 10, 1000);
        let mut s = TcpStream::connect(addr).unwrap();
        let line = b"m,host=a v=1 1\n";
        let mut body = b"# tracehouse token=tk\n".to_vec();
        while body.len() < 200_000 {
            body.extend_from_slice(line);
        }
        let total = body.len();
        let h = thread::spawn(move || {
            s.write_all(&body).unwrap();
            s.shutdown(Shutdown::Write).unwrap();
        });
        // Nothing taken yet: the reader stops soon after the high water (one read beyond it).
        thread::sleep(Duration::from_millis(300));
        let (_h, items) = front.take_all(1000, 64 << 20, Duration::from_millis(10));
        let queued: usize = items
            .iter()
            .map(|i| match &i.payload {
                Payload::Lines { body, .. } => body.len(),
                Payload::Dropped { .. } => 0,
            })
            .sum();
        assert!(queued < total && queued <= 1000 + (256 << 10), "{queued} of {total}");
        for item in items {
            item.finish(0, vec![], 0, None);
        }
        let (got, _) = drain(&front, (total / line.len()) as u64);
        let rest: usize = got.iter().map(|g| g.2.len()).sum();
        assert_eq!(queued + rest, total);
        h.join().unwrap();
        front.close();
    }

    #[test]
    fn handshake_options() {
        let h = handshake(b"# tracehouse acks=1 bucket=x precision=s token=t extra");
        assert_eq!(
            h,
            Handshake { bucket: Some("x".into()), precision: Some("s".into()), token: Some("t".into()), acks: true }
        );
        assert_eq!(handshake(b"cpu v=1"), Handshake::default());
        assert!(!handshake(b"# tracehouse acks=0").acks);
    }
}
