//! What the HTTP and the TCP front ends of `tracehouse serve` share: the one queue the
//! dispatchers drain, the limits' byte budget, the counters, and closing sockets politely.
//!
//! Owns [`Front`] (its queue, [`Inbox`], holds complete HTTP requests and TCP line-protocol
//! items side by side, so one dispatcher round decodes a trace's bodies together whatever their
//! protocol; [`Front::take_all`] hands a round out), [`Budget`] (the bytes in flight, bounded),
//! [`FrontConfig`] and [`FrontStats`], and the socket helpers both sides answer with
//! ([`send_now`], [`linger_close`], [`same_bytes`]). The HTTP side (`httpfront.rs`: framing,
//! limits, the connection threads) and the TCP side (`tcpfront.rs`: newline framing, acks,
//! back-pressure) each add their own `impl Front` and import only this, not each other.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::httpfront::Request;
use super::tcpfront::{TcpItem, TcpListen};
use crate::mutex::lock;

/// Limits and timeouts of the front end.
#[derive(Clone, Debug)]
pub struct FrontConfig {
    /// Largest request body in bytes (413 beyond).
    pub max_body: usize,
    /// Largest request head (request line and headers) in bytes (431 beyond).
    pub max_head: usize,
    /// Open connections at most; one more is answered 503 and closed.
    pub max_connections: usize,
    /// A connection silent this long (in a head, a body or between requests) is closed;
    /// a body stalled this long is answered 408.
    pub idle_timeout: Duration,
    /// Body bytes of requests received but not yet answered, all connections together.
    pub max_inflight: usize,
    /// How long a request waits for room in `max_inflight` before 503.
    pub overload_wait: Duration,
    /// Seconds in the Retry-After of a 503.
    pub retry_after: u32,
    /// When set, every request but those to `open_paths` must carry it (see [`token_given`]).
    pub token: Option<String>,
    /// Paths served without the token (`/ping`: InfluxDB clients probe it unauthenticated).
    pub open_paths: Vec<String>,
    /// A whole request (head and body) must arrive within this long of its first byte.
    pub request_timeout: Duration,
    /// Bytes per second a body must average after a grace of `idle_timeout` (0: no minimum).
    pub min_rate: usize,
}

/// Counters, for the health endpoint.
#[derive(Default)]
pub struct FrontStats {
    /// Connections open now.
    pub connections: AtomicUsize,
    /// Connections refused by the connection limit.
    pub refused_connections: AtomicU64,
    /// Requests refused because the in-flight budget stayed full.
    pub overload_refusals: AtomicU64,
    /// Requests received whole.
    pub requests: AtomicU64,
    /// Body bytes held now.
    pub inflight: AtomicUsize,
    /// Requests refused (401) because their head carried no token or a wrong one.
    pub auth_refusals: AtomicU64,
    /// Requests cut (408) for arriving too slowly (`min_rate`, `request_timeout`).
    pub slow_refusals: AtomicU64,
}

/// A counting semaphore of bytes: what connection threads hold in flight, bounded.
pub(crate) struct Budget {
    limit: usize,
    used: Mutex<usize>,
    freed: Condvar,
    /// Wake one waiter per release (which passes the wake on while room is left), not all:
    /// for waiters that poll as well (TCP readers, every 100 ms). HTTP requests wait with a
    /// deadline and no poll: a wake taken by one that still does not fit must not leave
    /// another, which would, to its 503.
    wake_one: bool,
}

impl Budget {
    pub(crate) fn new(limit: usize, wake_one: bool) -> Self {
        Self { limit, used: Mutex::new(0), freed: Condvar::new(), wake_one }
    }

    /// Takes `n` bytes (at most the whole budget: one larger piece may run alone), waiting
    /// until `deadline` (None: as long as it takes) or `stop`; false if it could not.
    /// `gauge` shows what is held.
    pub(crate) fn acquire(&self, n: usize, deadline: Option<Instant>, stop: &AtomicBool, gauge: &AtomicUsize) -> bool {
        let n = n.min(self.limit);
        let mut used = lock(&self.used);
        while *used + n > self.limit {
            let wait = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => Duration::from_millis(100),
            };
            if wait.is_zero() || stop.load(Ordering::Relaxed) {
                return false;
            }
            used = self.freed.wait_timeout(used, wait).unwrap_or_else(|e| e.into_inner()).0;
        }
        *used += n;
        gauge.store(*used, Ordering::Relaxed);
        if self.wake_one && *used < self.limit {
            self.freed.notify_one();
        }
        true
    }

    /// Gives back `n` bytes taken by [`Budget::acquire`].
    pub(crate) fn release(&self, n: usize, gauge: &AtomicUsize) {
        let n = n.min(self.limit);
        let mut used = lock(&self.used);
        *used = used.saturating_sub(n);
        gauge.store(*used, Ordering::Relaxed);
        if self.wake_one {
            self.freed.notify_one();
        } else {
            self.freed.notify_all();
        }
    }

    /// Wakes every waiter (to see a stop).
    pub(crate) fn wake_all(&self) {
        self.freed.notify_all();
    }
}

/// What waits for the dispatcher: complete HTTP requests and TCP line-protocol items.
#[derive(Default)]
pub struct Inbox {
    /// HTTP requests, in arrival order.
    pub http: VecDeque<Request>,
    /// TCP items, in arrival order (a connection's in its stream's order).
    pub tcp: VecDeque<TcpItem>,
}

/// The shared state of one front end: its queue, budget and counters.
pub struct Front {
    pub(crate) cfg: FrontConfig,
    pub(crate) inbox: Mutex<Inbox>,
    pub(crate) ready: Condvar,
    pub(crate) budget: Budget,
    pub(crate) stop: AtomicBool,
    /// The counters.
    pub stats: FrontStats,
    pub(crate) local: SocketAddr,
    pub(crate) open: Mutex<Vec<(u64, TcpStream)>>,
    pub(crate) next_conn: AtomicU64,
    pub(crate) last_auth_refusal: Mutex<String>,
    /// The line-protocol TCP listener, once started (tcpfront.rs).
    pub(crate) tcp: Mutex<Option<Arc<TcpListen>>>,
}

impl Front {
    /// Starts accepting on `listener` (blocking mode is set here).
    pub fn start(listener: TcpListener, cfg: FrontConfig) -> io::Result<Arc<Front>> {
        listener.set_nonblocking(false)?;
        let local = listener.local_addr()?;
        let budget = Budget::new(cfg.max_inflight, false);
        let front = Arc::new(Front {
            cfg,
            inbox: Mutex::new(Inbox::default()),
            ready: Condvar::new(),
            budget,
            stop: AtomicBool::new(false),
            stats: FrontStats::default(),
            local,
            open: Mutex::new(Vec::new()),
            next_conn: AtomicU64::new(0),
            last_auth_refusal: Mutex::new(String::new()),
            tcp: Mutex::new(None),
        });
        let f = Arc::clone(&front);
        thread::Builder::new().name("th-http-accept".into()).spawn(move || f.accept_loop(listener))?;
        Ok(front)
    }

    /// Up to `max` queued requests holding at most `max_bytes` of body together (always at
    /// least one), waiting at most `timeout` for the first. The byte cap keeps one dispatcher
    /// round short: a round's requests are answered together, after its last append.
    pub fn take(&self, max: usize, max_bytes: usize, timeout: Duration) -> Vec<Request> {
        self.take_all(max, max_bytes, timeout).0
    }

    /// [`Front::take`] for HTTP requests and TCP items alike: up to `max` of each, up to
    /// `max_bytes` of body each (at least one of either), waiting at most `timeout` for one.
    pub fn take_all(&self, max: usize, max_bytes: usize, timeout: Duration) -> (Vec<Request>, Vec<TcpItem>) {
        let deadline = Instant::now() + timeout;
        let mut q = lock(&self.inbox);
        loop {
            if !q.http.is_empty() || self.stop.load(Ordering::Relaxed) {
                break;
            }
            // A TCP item cut inside a line waits a moment for the rest (tcpfront.rs, `ripe`).
            let now = Instant::now();
            let mut wake = deadline;
            if q.tcp.iter().any(|i| match i.due(now) {
                Ok(()) => true,
                Err(at) => {
                    wake = wake.min(at);
                    false
                }
            }) {
                break;
            }
            let left = wake.saturating_duration_since(now);
            if left.is_zero() {
                break;
            }
            q = self.ready.wait_timeout(q, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        let mut n = 0usize;
        let mut bytes = 0usize;
        while n < q.http.len() && n < max.max(1) {
            let b = q.http[n].body.len();
            if n > 0 && bytes + b > max_bytes {
                break;
            }
            bytes += b;
            n += 1;
        }
        let http: Vec<Request> = q.http.drain(..n).collect();
        let now = Instant::now();
        let mut tcp: Vec<TcpItem> = Vec::new();
        let mut tbytes = 0usize;
        if q.tcp.iter().any(|i| i.due(now).is_ok()) {
            let mut rest = VecDeque::with_capacity(q.tcp.len());
            let mut passed: Vec<u64> = Vec::new(); // connections with an item left: their later ones wait too
            for item in q.tcp.drain(..) {
                let room =
                    tcp.len() < max.max(1) && (tcp.is_empty() && http.is_empty() || tbytes + item.bytes() <= max_bytes);
                let id = item.conn.id();
                if room && item.due(now).is_ok() && !passed.contains(&id) {
                    tbytes += item.bytes();
                    item.conn.open_item.store(false, Ordering::Relaxed); // taken: its next lines start a new item
                    tcp.push(item);
                } else {
                    passed.push(id);
                    rest.push_back(item);
                }
            }
            q.tcp = rest;
        }
        (http, tcp)
    }

    /// Stops accepting, closes every connection and wakes every `take`.
    pub fn close(&self) {
        if self.stop.swap(true, Ordering::SeqCst) {
            return;
        }
        self.close_tcp(Duration::ZERO);
        let _ = TcpStream::connect_timeout(&self.local, Duration::from_millis(200)); // wakes accept()
        for (_, s) in lock(&self.open).drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
        self.ready.notify_all();
        self.budget.wake_all();
        let left = std::mem::take(&mut *lock(&self.inbox));
        drop(left); // outside the lock: an unfinished TCP item tells its connection
    }

    /// Whether `close` was called.
    pub fn closed(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The last request refused for its token, described (method, path, peer, why), or empty.
    pub fn last_auth_refusal(&self) -> String {
        lock(&self.last_auth_refusal).clone()
    }
}

/// Shuts the write side of `s` and discards what still arrives (at most a second, or `idle`):
/// a close with unread bytes makes the kernel send a reset, which can destroy the answer just
/// written before the client reads it. (The socket is closed when dropped.)
pub(crate) fn linger_close(s: &mut TcpStream, idle: Duration) {
    let _ = s.shutdown(Shutdown::Write);
    let end = Instant::now() + idle.min(Duration::from_secs(1));
    let mut sink = [0u8; 16 << 10];
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match s.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Equality in time independent of where the first difference is (the token is a secret).
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Writes what the socket takes of `buf` now (never blocks); Ok(0) when it takes nothing.
pub(crate) fn send_now(stream: &TcpStream, buf: &[u8]) -> io::Result<usize> {
    let mut sent = 0;
    while sent < buf.len() {
        // SAFETY: the descriptor is open (the stream is borrowed) and the range is in `buf`.
        let n = unsafe {
            libc::send(
                stream.as_raw_fd(),
                buf[sent..].as_ptr().cast(),
                buf.len() - sent,
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n >= 0 {
            sent += n as usize;
            continue;
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => {}
            io::ErrorKind::WouldBlock => break,
            // Bytes already sent must be counted: the caller hands on only the rest (an Err
            // after a partial send had the whole answer written again, its head twice).
            _ if sent > 0 => break,
            _ => return Err(e),
        }
    }
    Ok(sent)
}
