//! The HTTP/1.1 front end of `tracehouse serve`: sockets, framing and limits in native threads.
//!
//! Owns accepting connections, reading request heads and bodies (Content-Length or chunked,
//! `Expect: 100-continue`), the token check on the head, the limits that keep memory bounded
//! (connections, head size, body size, bytes in flight across all requests) and the timeouts
//! that keep silent or slow clients from holding anything, and writing the responses. It knows
//! nothing of routes: a complete request goes into the front end's one queue (`front.rs`, shared
//! with the TCP side) that the server's Python dispatchers drain in batches ([`Front::take`]);
//! each request is answered once through [`Request::respond`].
//!
//! The order on a connection, per request: head (within `idle_timeout` of its first byte) ->
//! token (401 before any `100 Continue` and before the body is taken in: a client without the
//! token never holds in-flight budget; what it still sends is read and discarded for at most a
//! second before the close, see [`refuse`]) -> body size (413) -> in-flight budget (503) ->
//! `100 Continue` -> body (paced: [`Pace`]) -> queue.
//!
//! Why native: under Python's asyncio/ASGI stack a write cost a few hundred µs of
//! interpreter time before any work was done (body chunks woke the event loop every 64 KB),
//! and the dispatchers compete for one interpreter lock. Here a request reaches Python whole,
//! many at a time, and the connection threads never take that lock.
//!
//! One thread per connection (small stacks): a connection spends its life blocked in a read
//! or waiting for its answer, and the kernel's scheduler is the simplest fair multiplexer.
//!
//! Over 600 lines: request framing, limits, the accept loop and the connection threads
//! share the limits and counters (kept in `front.rs`); the Python face is py/httpfront.rs.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::front::{linger_close, same_bytes, send_now, Front};
use crate::mutex::lock;

/// One complete request, waiting in the queue or being handled.
pub struct Request {
    /// Method, as sent (e.g. `POST`).
    pub method: String,
    /// Path without the query string.
    pub path: String,
    /// The raw query string (after `?`, without it), or empty.
    pub query: String,
    /// Headers in order, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body (de-chunked; not decompressed).
    pub body: Vec<u8>,
    /// The client's address.
    pub peer: String,
    reply: Option<SyncSender<Delivery>>,
    /// The connection's socket, for an answer written by the thread that decides it (a
    /// keep-alive request, not HEAD): see [`Request::respond`].
    direct: Option<Arc<TcpStream>>,
}

/// What the connection's thread gets back for its request.
enum Delivery {
    /// The answer, for it to write.
    Reply(Reply),
    /// The answer was written, but for these bytes (the socket took no more at once).
    Sent(Vec<u8>),
}

/// An answer to one request.
pub struct Reply {
    /// HTTP status code.
    pub status: u16,
    /// Extra headers (Content-Length and Connection are added).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// Or the body in a file (`body` then empty): its first `len` bytes, written from the file
    /// ([`write_file`]). A query's large answer arrives in a memory file (server/queryproc.py):
    /// read into bytes and then into this `Vec`, a 305 MB answer cost two more passes over
    /// memory, 0.3-0.7 s at load 4-11 on this 2-core machine, before the socket's own copy.
    pub file: Option<(File, u64)>,
}

impl Reply {
    /// A reply with a body in memory.
    pub fn new(status: u16, headers: Vec<(String, String)>, body: Vec<u8>) -> Reply {
        Reply { status, headers, body, file: None }
    }

    fn body_len(&self) -> u64 {
        self.file.as_ref().map_or(self.body.len() as u64, |f| f.1)
    }
}

impl Request {
    /// Answers the request (the first answer counts; later ones are ignored).
    ///
    /// A keep-alive answer is written here, on the thread that decided it (the dispatcher's,
    /// or the group committer's once the rows are durable), without blocking: handing it to
    /// the connection's thread cost a thread wake-up before the client had its answer, a
    /// run-queue wait on a loaded machine. That thread is still told (it releases the body's
    /// budget and reads the next request) and writes what the socket did not take at once.
    pub fn respond(&mut self, reply: Reply) {
        let Some(tx) = self.reply.take() else { return };
        let delivery = match self.direct.take() {
            Some(sock) if reply.file.is_none() && reply.body.len() <= 64 << 10 => {
                let out = reply_bytes(&reply, false, false);
                match send_now(&sock, &out) {
                    Ok(n) => Delivery::Sent(out[n..].to_vec()),
                    Err(_) => Delivery::Reply(reply), // its own write fails too, and it closes
                }
            }
            _ => Delivery::Reply(reply),
        };
        let _ = tx.send(delivery); // the connection may be gone: nothing to tell
    }

    /// Whether the request was answered already.
    pub fn answered(&self) -> bool {
        self.reply.is_none()
    }

    /// The value of header `name` (lower case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        // A request dropped unanswered (a dispatcher bug or shutdown) must not hold its
        // connection forever.
        if let Some(tx) = self.reply.take() {
            let r = Reply::new(500, vec![], b"request dropped unanswered\n".to_vec());
            let _ = tx.send(Delivery::Reply(r));
        }
    }
}

impl Front {
    /// None when `req` may be served; else why not ("no token" or "wrong token").
    fn refuse_auth(&self, req: &Request) -> Option<&'static str> {
        let token = self.cfg.token.as_deref()?;
        if self.cfg.open_paths.contains(&req.path) {
            return None;
        }
        let why = match token_given(req) {
            None => "no token",
            Some(given) if same_bytes(given.as_bytes(), token.as_bytes()) => return None,
            Some(_) => "wrong token",
        };
        self.stats.auth_refusals.fetch_add(1, Ordering::Relaxed);
        *lock(&self.last_auth_refusal) = format!("{} {} from {}: {why}", req.method, req.path, req.peer);
        Some(why)
    }

    pub(crate) fn accept_loop(self: Arc<Self>, listener: TcpListener) {
        loop {
            let (stream, peer) = match listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) if !self.closed() => {
                    thread::sleep(Duration::from_millis(10)); // e.g. out of fds: back off, go on
                    continue;
                }
                Err(_) => return,
            };
            if self.closed() {
                return;
            }
            let _ = stream.set_nodelay(true);
            if self.stats.connections.load(Ordering::SeqCst) >= self.cfg.max_connections {
                self.stats.refused_connections.fetch_add(1, Ordering::Relaxed);
                let mut s = stream;
                let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
                let _ = write_reply(&mut s, &overloaded("too many connections", self.cfg.retry_after), true, false);
                continue;
            }
            self.stats.connections.fetch_add(1, Ordering::SeqCst);
            let id = self.next_conn.fetch_add(1, Ordering::Relaxed);
            if let Ok(s) = stream.try_clone() {
                lock(&self.open).push((id, s));
            }
            let f = Arc::clone(&self);
            let spawned = thread::Builder::new().name("th-http-conn".into()).stack_size(256 << 10).spawn(move || {
                f.serve_connection(stream, peer);
                lock(&f.open).retain(|(i, _)| *i != id);
                f.stats.connections.fetch_sub(1, Ordering::SeqCst);
            });
            if spawned.is_err() {
                self.stats.connections.fetch_sub(1, Ordering::SeqCst);
                lock(&self.open).retain(|(i, _)| *i != id);
            }
        }
    }

    fn acquire(&self, n: usize) -> bool {
        let deadline = Instant::now() + self.cfg.overload_wait;
        self.budget.acquire(n, Some(deadline), &self.stop, &self.stats.inflight)
    }

    fn release(&self, n: usize) {
        self.budget.release(n, &self.stats.inflight);
    }

    fn serve_connection(&self, mut stream: TcpStream, peer: SocketAddr) {
        let idle = self.cfg.idle_timeout;
        let _ = stream.set_write_timeout(Some(idle.max(Duration::from_secs(5))));
        let mut buf: Vec<u8> = Vec::with_capacity(8192);
        let peer = peer.to_string();
        // For answers written by the thread that decides them (`Request::respond`).
        let direct = stream.try_clone().ok().map(Arc::new);
        while !self.closed() {
            // A paced body read shortens the socket's timeout: each head starts from idle again.
            let _ = stream.set_read_timeout(Some(idle));
            let head = match read_head(&mut stream, &mut buf, self.cfg.max_head, idle) {
                Ok(Some(h)) => h,
                Ok(None) => return, // closed or silent between requests: just close
                Err(HeadError::TooLarge) => {
                    let r = error_reply(431, "request head too large");
                    let _ = write_reply(&mut stream, &r, true, false);
                    return;
                }
                Err(HeadError::Bad(why)) => {
                    let _ = write_reply(&mut stream, &error_reply(400, &why), true, false);
                    return;
                }
            };
            let consumed = head.len;
            let mut req = match parse_head(&buf[..consumed]) {
                Ok(r) => r,
                Err(why) => {
                    let _ = write_reply(&mut stream, &error_reply(400, &why), true, false);
                    return;
                }
            };
            buf.drain(..consumed);
            req.peer.clone_from(&peer);
            if let Some(why) = self.refuse_auth(&req) {
                // Before `100 Continue` and before any body byte: the body is never read.
                let mut r = error_reply(401, &format!("unauthorized ({why}): send 'Authorization: Token <token>'"));
                r.headers.push(("www-authenticate".into(), "Token".into()));
                refuse(stream, &r, idle);
                return;
            }
            let keep_alive = wants_keep_alive(&req, head.http10);
            let is_head = req.method == "HEAD";
            let chunked = req.header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
            let declared = match req.header("content-length") {
                Some(v) if !chunked => match v.trim().parse::<usize>() {
                    Ok(n) => Some(n),
                    Err(_) => {
                        refuse(stream, &error_reply(400, &format!("bad Content-Length {v:?}")), idle);
                        return;
                    }
                },
                _ => None,
            };
            if let Some(n) = declared {
                if n > self.cfg.max_body {
                    let msg = format!("body of {n} bytes exceeds the limit of {}", self.cfg.max_body);
                    refuse(stream, &too_large(&msg), idle); // the body was not read: the connection cannot go on
                    return;
                }
            }
            let hold = if chunked { self.cfg.max_body } else { declared.unwrap_or(0) };
            if hold > 0 && !self.acquire(hold) {
                self.stats.overload_refusals.fetch_add(1, Ordering::Relaxed);
                let r = overloaded("server overloaded: too many bytes in flight, retry later", self.cfg.retry_after);
                refuse(stream, &r, idle);
                return;
            }
            if req.header("expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
                && stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").is_err()
            {
                self.release(hold);
                return;
            }
            let pace = Pace {
                idle,
                whole: head.started + self.cfg.request_timeout,
                whole_secs: self.cfg.request_timeout.as_secs_f64(),
                body: Instant::now(),
                min_rate: self.cfg.min_rate,
            };
            let body = if chunked {
                read_chunked(&mut stream, &mut buf, self.cfg.max_body, &pace)
            } else {
                read_exact_body(&mut stream, &mut buf, declared.unwrap_or(0), &pace)
            };
            req.body = match body {
                Ok(b) => b,
                Err(e) => {
                    self.release(hold);
                    let r = match e {
                        BodyError::Gone => return, // disconnected mid-body: nothing was stored, nothing to answer
                        BodyError::Stalled(got) => {
                            error_reply(408, &format!("no body bytes for {} s after {got} bytes", idle.as_secs_f64()))
                        }
                        BodyError::TooSlow(why) => {
                            self.stats.slow_refusals.fetch_add(1, Ordering::Relaxed);
                            error_reply(408, &why)
                        }
                        BodyError::TooLarge => {
                            too_large(&format!("body exceeds the limit of {} bytes", self.cfg.max_body))
                        }
                        BodyError::Bad(why) => error_reply(400, &why),
                    };
                    let _ = write_reply(&mut stream, &r, true, false);
                    let _ = stream.shutdown(Shutdown::Both);
                    return;
                }
            };
            let (tx, rx): (SyncSender<Delivery>, Receiver<Delivery>) = sync_channel(1);
            req.reply = Some(tx);
            if keep_alive && !is_head {
                req.direct.clone_from(&direct);
            }
            self.stats.requests.fetch_add(1, Ordering::Relaxed);
            {
                let mut q = lock(&self.inbox);
                if self.closed() {
                    self.release(hold);
                    return;
                }
                q.http.push_back(req);
            }
            self.ready.notify_one();
            let reply = rx.recv();
            self.release(hold);
            let Ok(reply) = reply else { return };
            let close = !keep_alive || self.closed();
            let written = match reply {
                Delivery::Reply(reply) => write_reply(&mut stream, &reply, close, is_head),
                Delivery::Sent(rest) => stream.write_all(&rest),
            };
            if written.is_err() || close {
                let _ = stream.shutdown(Shutdown::Both);
                return;
            }
        }
    }
}

/// Answers `r` and closes without having read the request's body. The client may still be
/// sending it: closing a socket with unread bytes makes the kernel send a reset, which can
/// destroy the answer before the client reads it. So the write side is shut first and what
/// arrives is discarded (never held) for at most a second (or `idle`) before the close.
fn refuse(mut s: TcpStream, r: &Reply, idle: Duration) {
    if write_reply(&mut s, r, true, false).is_err() {
        return;
    }
    linger_close(&mut s, idle);
}

/// The token a request's head carries: `Authorization: Token|Bearer <t>`, the password of
/// `Authorization: Basic` (any user name), or, without an Authorization header of those kinds,
/// InfluxDB 1.x's `?p=<t>` (percent-decoded, the last one counts).
pub fn token_given(req: &Request) -> Option<String> {
    let auth = req.header("authorization").unwrap_or("");
    let (scheme, value) = auth.split_once(' ').unwrap_or((auth, ""));
    if scheme.eq_ignore_ascii_case("token") || scheme.eq_ignore_ascii_case("bearer") {
        return Some(value.trim().to_string());
    }
    if scheme.eq_ignore_ascii_case("basic") {
        use base64::Engine;
        let engine = base64::engine::GeneralPurpose::new(
            &base64::alphabet::STANDARD,
            base64::engine::GeneralPurposeConfig::new()
                .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
        );
        let raw = engine.decode(value.trim()).ok()?;
        let text = String::from_utf8(raw).ok()?;
        return Some(text.split_once(':').map_or(String::new(), |(_, pw)| pw.to_string()));
    }
    let mut p = None;
    for pair in req.query.split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if form_decode(k) == "p" {
            p = Some(form_decode(v));
        }
    }
    p
}

/// One `application/x-www-form-urlencoded` component: `+` is a space, then `%XX` escapes.
fn form_decode(s: &str) -> String {
    let spaced = s.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced).decode_utf8_lossy().into_owned()
}

/// When the rest of one request must have arrived. The idle timeout alone is per read: a body
/// trickled a byte a second (or a byte every `idle` - 1 s) would hold its connection and thread
/// forever, and twenty such senders held all of `--max-connections 20`. So a body must also
/// average `min_rate` bytes/s after a grace of `idle` (Apache's mod_reqtimeout `MinRate`: every
/// `min_rate` bytes received buy one more second), and the whole request, head included, must
/// arrive within `request_timeout` of its first byte.
struct Pace {
    idle: Duration,
    whole: Instant,
    whole_secs: f64,
    body: Instant,
    min_rate: usize,
}

impl Pace {
    /// The instant by which more than `got` body bytes must have arrived, and what is said if not.
    fn deadline(&self, got: usize) -> (Instant, Option<String>) {
        if self.min_rate > 0 {
            let by_rate = self.body + self.idle + Duration::from_secs_f64(got as f64 / self.min_rate as f64);
            if by_rate < self.whole {
                let secs = self.body.elapsed().as_secs_f64();
                return (
                    by_rate,
                    Some(format!(
                        "request body too slow: {got} bytes in {secs:.1} s (at least {} bytes/s after the first {} s)",
                        self.min_rate,
                        self.idle.as_secs_f64()
                    )),
                );
            }
        }
        (self.whole, None)
    }

    fn too_slow(&self, got: usize) -> BodyError {
        match self.deadline(got).1 {
            Some(why) => BodyError::TooSlow(why),
            None => BodyError::TooSlow(format!(
                "request not complete within {} s of its first byte ({got} body bytes received)",
                self.whole_secs
            )),
        }
    }
}

struct Head {
    len: usize,
    http10: bool,
    /// When its first byte arrived.
    started: Instant,
}

enum HeadError {
    TooLarge,
    Bad(String),
}

/// Reads until the end of a head (`\r\n\r\n`); None when the peer closed or stayed silent.
fn read_head(s: &mut TcpStream, buf: &mut Vec<u8>, max: usize, idle: Duration) -> Result<Option<Head>, HeadError> {
    let mut started = if buf.is_empty() { None } else { Some(Instant::now()) };
    let mut scanned = 0usize;
    loop {
        // Leading blank lines between requests are allowed (RFC 9112 2.2).
        while buf.starts_with(b"\r\n") {
            buf.drain(..2);
        }
        if let Some(i) = memchr::memmem::find(&buf[scanned.saturating_sub(3)..], b"\r\n\r\n") {
            let end = scanned.saturating_sub(3) + i + 4;
            if end > max {
                return Err(HeadError::TooLarge);
            }
            let http10 = buf.windows(8).take(end).any(|w| w == b"HTTP/1.0");
            return Ok(Some(Head { len: end, http10, started: started.unwrap_or_else(Instant::now) }));
        }
        scanned = buf.len();
        if buf.len() > max {
            return Err(HeadError::TooLarge);
        }
        // A head must arrive within the idle timeout of its first byte as a whole: a client
        // dribbling one byte at a time must not hold its thread (and connection slot) forever.
        if let Some(t) = started {
            let left = idle.saturating_sub(t.elapsed());
            if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
                return Ok(None);
            }
        }
        let mut chunk = [0u8; 8192];
        match s.read(&mut chunk) {
            Ok(0) => return Ok(None),
            Ok(n) => {
                started.get_or_insert_with(Instant::now);
                buf.extend_from_slice(&chunk[..n]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Ok(None), // timeout or reset
        }
        if buf.len() > 2 && buf.len() >= 4 && !buf.starts_with(b"\r\n") && !buf[0].is_ascii_alphabetic() {
            return Err(HeadError::Bad("not an HTTP request".into()));
        }
    }
}

fn parse_head(head: &[u8]) -> Result<Request, String> {
    let text = std::str::from_utf8(head).map_err(|_| "request head is not UTF-8".to_string())?;
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or("");
    let mut parts = line.split(' ');
    let (method, target, version) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v), None) if !m.is_empty() && !t.is_empty() => (m, t, v),
        _ => return Err(format!("bad request line {line:?}")),
    };
    if !version.starts_with("HTTP/1.") {
        return Err(format!("unsupported protocol {version:?} (HTTP/1.x expected)"));
    }
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, q),
        None => (target, ""),
    };
    let mut headers = Vec::new();
    for l in lines {
        if l.is_empty() {
            continue;
        }
        let (k, v) = l.split_once(':').ok_or_else(|| format!("bad header line {l:?}"))?;
        if k.is_empty() || k.bytes().any(|c| c == b' ' || c == b'\t') {
            return Err(format!("bad header name {k:?}"));
        }
        headers.push((k.to_ascii_lowercase(), v.trim().to_string()));
    }
    Ok(Request {
        method: method.to_string(),
        path: path.to_string(),
        query: query.to_string(),
        headers,
        body: Vec::new(),
        peer: String::new(),
        reply: None,
        direct: None,
    })
}

fn wants_keep_alive(req: &Request, http10: bool) -> bool {
    match req.header("connection").map(str::to_ascii_lowercase) {
        Some(v) if v.contains("close") => false,
        Some(v) if v.contains("keep-alive") => true,
        _ => !http10,
    }
}

enum BodyError {
    Gone,
    Stalled(usize),
    TooSlow(String),
    TooLarge,
    Bad(String),
}

fn read_more(s: &mut TcpStream, buf: &mut Vec<u8>, want: usize, got: usize, pace: &Pace) -> Result<(), BodyError> {
    let deadline = pace.deadline(got).0;
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(pace.too_slow(got));
    }
    let _ = s.set_read_timeout(Some(left.min(pace.idle)));
    let old = buf.len();
    buf.resize(old + want.clamp(8192, 1 << 20), 0);
    let r = loop {
        match s.read(&mut buf[old..]) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => break r,
        }
    };
    match r {
        Ok(0) => {
            buf.truncate(old);
            Err(BodyError::Gone)
        }
        Ok(n) => {
            buf.truncate(old + n);
            Ok(())
        }
        Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
            buf.truncate(old);
            if Instant::now() >= deadline {
                Err(pace.too_slow(got))
            } else {
                Err(BodyError::Stalled(got))
            }
        }
        Err(_) => {
            buf.truncate(old);
            Err(BodyError::Gone)
        }
    }
}

/// `n` body bytes: those already in `buf` first, the rest read straight into the body.
fn read_exact_body(s: &mut TcpStream, buf: &mut Vec<u8>, n: usize, pace: &Pace) -> Result<Vec<u8>, BodyError> {
    if buf.len() >= n {
        let rest = buf.split_off(n);
        return Ok(std::mem::replace(buf, rest));
    }
    let mut body = std::mem::take(buf);
    body.reserve_exact(n - body.len());
    while body.len() < n {
        let got = body.len();
        read_more(s, &mut body, n - got, got, pace)?;
        if body.len() > n {
            // Bytes of a pipelined next request: keep them for the next head.
            *buf = body.split_off(n);
        }
    }
    Ok(body)
}

/// A chunked body (RFC 9112 7.1), trailers skipped.
fn read_chunked(s: &mut TcpStream, buf: &mut Vec<u8>, max: usize, pace: &Pace) -> Result<Vec<u8>, BodyError> {
    let mut body = Vec::new();
    let mut pos = 0usize;
    loop {
        // chunk-size line
        let line_end = loop {
            if let Some(i) = memchr::memmem::find(&buf[pos..], b"\r\n") {
                break pos + i;
            }
            if buf.len() - pos > 4096 {
                return Err(BodyError::Bad("chunk size line too long".into()));
            }
            read_more(s, buf, 8192, body.len(), pace)?;
        };
        let line = std::str::from_utf8(&buf[pos..line_end]).map_err(|_| BodyError::Bad("bad chunk size".into()))?;
        let size_hex = line.split(';').next().unwrap_or("").trim();
        let size =
            usize::from_str_radix(size_hex, 16).map_err(|_| BodyError::Bad(format!("bad chunk size {size_hex:?}")))?;
        pos = line_end + 2;
        if size == 0 {
            // trailers up to an empty line
            loop {
                if let Some(i) = memchr::memmem::find(&buf[pos..], b"\r\n") {
                    let empty = i == 0;
                    pos += i + 2;
                    if empty {
                        buf.drain(..pos);
                        return Ok(body);
                    }
                    continue;
                }
                read_more(s, buf, 8192, body.len(), pace)?;
            }
        }
        if body.len() + size > max {
            return Err(BodyError::TooLarge);
        }
        while buf.len() < pos + size + 2 {
            let want = pos + size + 2 - buf.len();
            read_more(s, buf, want, body.len(), pace)?;
        }
        body.extend_from_slice(&buf[pos..pos + size]);
        if &buf[pos + size..pos + size + 2] != b"\r\n" {
            return Err(BodyError::Bad("chunk not followed by CRLF".into()));
        }
        pos += size + 2;
        if pos > (1 << 20) {
            buf.drain(..pos);
            pos = 0;
        }
    }
}

fn json_message(status: u16, code: &str, message: &str) -> Vec<u8> {
    let esc: String = message
        .chars()
        .flat_map(|c| match c {
            '"' => vec!['\\', '"'],
            '\\' => vec!['\\', '\\'],
            c if (c as u32) < 0x20 => format!("\\u{:04x}", c as u32).chars().collect(),
            c => vec![c],
        })
        .collect();
    let _ = status;
    format!("{{\"code\": \"{code}\", \"message\": \"{esc}\", \"error\": \"{esc}\"}}").into_bytes()
}

/// A JSON error reply in the InfluxDB 2.x shape (`code`, `message`) plus 1.x's `error`.
pub fn error_reply(status: u16, message: &str) -> Reply {
    let code = match status {
        400 | 431 => "invalid",
        401 => "unauthorized",
        408 => "request timeout",
        413 => "request too large",
        503 => "unavailable",
        _ => "internal error",
    };
    Reply::new(status, vec![("content-type".into(), "application/json".into())], json_message(status, code, message))
}

fn too_large(message: &str) -> Reply {
    error_reply(413, message)
}

fn overloaded(message: &str, retry_after: u32) -> Reply {
    let mut r = error_reply(503, message);
    r.headers.push(("retry-after".into(), retry_after.to_string()));
    r
}

/// The reason phrase of `status`.
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        499 => "Client Closed Request",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        507 => "Insufficient Storage",
        _ => "Status",
    }
}

fn write_reply(s: &mut TcpStream, r: &Reply, close: bool, head_only: bool) -> io::Result<()> {
    if r.file.is_none() && r.body.len() <= 64 << 10 || head_only || r.status == 204 || r.status == 304 {
        return s.write_all(&reply_bytes(r, close, head_only));
    }
    s.write_all(&reply_bytes(r, close, true))?;
    match &r.file {
        None => s.write_all(&r.body),
        Some((f, len)) => write_file(s, f, *len),
    }
}

/// The first `len` bytes of `f` onto `s`: written from a read-only shared mapping of the file
/// (its pages populated at once), else by `io::copy` (sendfile). Over loopback, sendfile of a
/// 305 MB memory file to a Python client took 283-463 ms against 253-293 ms written from a
/// mapping (the receiver's copy is the same; the kernel's splice of 64 KB steps is not).
fn write_file(s: &mut TcpStream, f: &File, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let short = || io::Error::new(io::ErrorKind::UnexpectedEof, "answer file shorter than its length");
    if f.metadata()?.len() < len {
        return Err(short()); // (the client would wait for the rest forever)
    }
    let n = usize::try_from(len).map_err(|_| short())?;
    if n == 0 {
        return Ok(());
    }
    // Safety: a fresh read-only mapping of `n` bytes of a file at least that long (checked
    // above); the slice lives only while it is mapped. The query process that wrote the file
    // has finished with it (it sent the descriptor once its answer was complete).
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), n, libc::PROT_READ, libc::MAP_SHARED | libc::MAP_POPULATE, f.as_raw_fd(), 0)
    };
    if p == libc::MAP_FAILED {
        let mut f = f;
        f.seek(SeekFrom::Start(0))?;
        return match io::copy(&mut f.take(len), s)? {
            sent if sent < len => Err(short()),
            _ => Ok(()),
        };
    }
    let out = s.write_all(unsafe { std::slice::from_raw_parts(p as *const u8, n) });
    unsafe { libc::munmap(p, n) };
    out
}

/// The bytes of answer `r`: its head, and its body unless `head_only`.
fn reply_bytes(r: &Reply, close: bool, head_only: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(160 + if head_only { 0 } else { r.body.len() });
    out.extend_from_slice(format!("HTTP/1.1 {} {}\r\n", r.status, reason(r.status)).as_bytes());
    for (k, v) in &r.headers {
        if k.eq_ignore_ascii_case("content-length") || k.eq_ignore_ascii_case("connection") {
            continue;
        }
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if r.status != 204 && r.status != 304 {
        out.extend_from_slice(format!("content-length: {}\r\n", r.body_len()).as_bytes());
    }
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if !(head_only || r.status == 204 || r.status == 304) {
        out.extend_from_slice(&r.body);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::front::FrontConfig;

    #[test]
    fn every_status_the_server_answers_has_its_reason_phrase() {
        // the web UI answers 504 on a console timeout, writes 507 on a full disk, queries 499
        for status in [200, 204, 400, 401, 403, 404, 405, 408, 413, 415, 422, 429, 431, 499, 500, 502, 503, 504, 507] {
            assert_ne!(reason(status), "Status", "{status}");
        }
        assert_eq!(reason(504), "Gateway Timeout");
        assert_eq!(reason(299), "Status");
    }

    fn start(cfg: FrontConfig) -> (Arc<Front>, SocketAddr) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        (Front::start(l, cfg).unwrap(), addr)
    }

    fn cfg() -> FrontConfig {
        FrontConfig {
            max_body: 1 << 20,
            max_head: 16 << 10,
            max_connections: 8,
            idle_timeout: Duration::from_millis(500),
            max_inflight: 4 << 20,
            overload_wait: Duration::from_millis(100),
            retry_after: 1,
            token: None,
            open_paths: vec!["/ping".into()],
            request_timeout: Duration::from_secs(60),
            min_rate: 0,
        }
    }

    /// Answers every request with 200 and its body reversed, until the front closes.
    fn echo(front: Arc<Front>) -> thread::JoinHandle<usize> {
        thread::spawn(move || {
            let mut n = 0;
            while !front.closed() {
                for mut r in front.take(16, 1 << 20, Duration::from_millis(50)) {
                    let mut b = r.body.clone();
                    b.reverse();
                    let h = vec![("x-path".to_string(), format!("{}?{}", r.path, r.query))];
                    r.respond(Reply::new(200, h, b));
                    n += 1;
                }
            }
            n
        })
    }

    fn roundtrip(addr: SocketAddr, raw: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(raw).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn a_body_in_a_file_is_sent_whole_and_only_its_length() {
        // 3 MB and a tail past the length: the answer is the first `len` bytes, on a kept-alive
        // connection whose next answer follows it.
        let path = std::env::temp_dir().join(format!("th-reply-file-{}", std::process::id()));
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, [&data[..], b"tail"].concat()).unwrap();
        let (front, addr) = start(cfg());
        let f2 = Arc::clone(&front);
        let p2 = path.clone();
        let h = thread::spawn(move || {
            let mut n = 0;
            while n < 2 {
                for mut r in f2.take(16, 1 << 20, Duration::from_millis(50)) {
                    let file = File::open(&p2).unwrap();
                    r.respond(Reply { status: 200, headers: vec![], body: Vec::new(), file: Some((file, 3_000_000)) });
                    n += 1;
                }
            }
        });
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\nConnection: close\r\n\r\n").unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        h.join().unwrap();
        front.close();
        std::fs::remove_file(&path).unwrap();
        let head = b"HTTP/1.1 200 OK\r\ncontent-length: 3000000\r\n\r\n";
        let last = b"HTTP/1.1 200 OK\r\ncontent-length: 3000000\r\nconnection: close\r\n\r\n";
        assert_eq!(out.len(), head.len() + last.len() + 2 * data.len());
        assert_eq!(&out[..head.len()], head);
        assert!(out[head.len()..head.len() + data.len()] == data[..]);
        assert_eq!(&out[head.len() + data.len()..][..last.len()], last);
        assert!(out[out.len() - data.len()..] == data[..]);
    }

    #[test]
    fn content_length_chunked_and_keep_alive() {
        let (front, addr) = start(cfg());
        let h = echo(Arc::clone(&front));
        let raw = b"POST /a?x=1 HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcPOST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\nxy\r\n1;ext=1\r\nz\r\n0\r\n\r\n";
        let out = roundtrip(addr, raw);
        assert!(out.starts_with("HTTP/1.1 200 OK\r\nx-path: /a?x=1\r\ncontent-length: 3\r\n\r\ncba"), "{out}");
        assert!(out.contains("x-path: /b?\r\ncontent-length: 3\r\nconnection: close\r\n\r\nzyx"), "{out}");
        front.close();
        assert_eq!(h.join().unwrap(), 2);
    }

    #[test]
    fn limits_and_timeouts() {
        let (front, addr) = start(cfg());
        let _h = echo(Arc::clone(&front));
        let big = roundtrip(addr, b"POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n");
        assert!(big.starts_with("HTTP/1.1 413"), "{big}");
        let stalled = roundtrip(addr, b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
        assert!(stalled.starts_with("HTTP/1.1 408"), "{stalled}");
        let silent = roundtrip(addr, b"");
        assert_eq!(silent, "");
        let bad = roundtrip(addr, b"\x16\x03\x01 garbage\r\n\r\n");
        assert!(bad.starts_with("HTTP/1.1 400"), "{bad}");
        let chunk = roundtrip(addr, b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
        assert!(chunk.starts_with("HTTP/1.1 400"), "{chunk}");
        front.close();
    }

    #[test]
    fn connection_limit_and_expect_continue() {
        let mut c = cfg();
        c.max_connections = 2;
        c.idle_timeout = Duration::from_secs(5);
        let (front, addr) = start(c);
        let _h = echo(Arc::clone(&front));
        let a = TcpStream::connect(addr).unwrap();
        let b = TcpStream::connect(addr).unwrap();
        thread::sleep(Duration::from_millis(100));
        let refused = roundtrip(addr, b"GET / HTTP/1.1\r\n\r\n");
        assert!(refused.starts_with("HTTP/1.1 503") && refused.contains("retry-after: 1"), "{refused}");
        drop((a, b));
        thread::sleep(Duration::from_millis(200));
        let ok = roundtrip(
            addr,
            b"PUT /e HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi",
        );
        assert!(ok.starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK"), "{ok}");
        front.close();
    }

    #[test]
    fn overload_is_503_until_the_budget_frees() {
        let mut c = cfg();
        c.max_inflight = 100;
        c.idle_timeout = Duration::from_secs(2);
        let (front, addr) = start(c);
        let _h = echo(Arc::clone(&front));
        let mut hold = TcpStream::connect(addr).unwrap();
        hold.write_all(b"POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\nab").unwrap();
        thread::sleep(Duration::from_millis(100));
        let refused = roundtrip(addr, b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
        assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
        drop(hold);
        thread::sleep(Duration::from_millis(100));
        let ok = roundtrip(addr, b"POST / HTTP/1.1\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        assert_eq!(front.stats.overload_refusals.load(Ordering::Relaxed), 1);
        front.close();
    }

    #[test]
    fn the_token_is_checked_on_the_head_before_100_continue_and_the_body() {
        let mut c = cfg();
        c.token = Some("s3cret".into());
        c.max_inflight = 100; // one unauthenticated 4 MB head would hold it all if it were acquired
        let (front, addr) = start(c);
        let _h = echo(Arc::clone(&front));
        let mut held = Vec::new();
        for _ in 0..3 {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.write_all(b"POST /w HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 4194304\r\n\r\n").unwrap();
            let mut out = [0u8; 512];
            let n = s.read(&mut out).unwrap();
            let text = String::from_utf8_lossy(&out[..n]).into_owned();
            assert!(text.starts_with("HTTP/1.1 401") && text.contains("www-authenticate: Token"), "{text}");
            held.push(s);
        }
        let ok = roundtrip(
            addr,
            b"POST /w HTTP/1.1\r\nAuthorization: Token s3cret\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
        );
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        let basic =
            roundtrip(addr, b"GET /q HTTP/1.1\r\nAuthorization: Basic dTpzM2NyZXQ=\r\nConnection: close\r\n\r\n");
        assert!(basic.starts_with("HTTP/1.1 200"), "{basic}");
        let v1 = roundtrip(addr, b"GET /q?u=x&p=s3%63ret HTTP/1.1\r\nConnection: close\r\n\r\n");
        assert!(v1.starts_with("HTTP/1.1 200"), "{v1}");
        let wrong = roundtrip(addr, b"GET /q?p=s3cret HTTP/1.1\r\nAuthorization: Bearer nope\r\n\r\n");
        assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
        let open = roundtrip(addr, b"GET /ping HTTP/1.1\r\nConnection: close\r\n\r\n");
        assert!(open.starts_with("HTTP/1.1 200"), "{open}");
        // A body sent at once without Expect is not read, yet the 401 reaches the client.
        let mut raw = b"POST /w HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n".to_vec();
        raw.extend(std::iter::repeat_n(b'x', 1_000_000));
        let flood = roundtrip(addr, &raw);
        assert!(flood.starts_with("HTTP/1.1 401"), "{flood}");
        assert_eq!(front.stats.auth_refusals.load(Ordering::Relaxed), 5);
        assert!(front.last_auth_refusal().contains("POST /w from 127.0.0.1:"), "{}", front.last_auth_refusal());
        assert_eq!(front.stats.overload_refusals.load(Ordering::Relaxed), 0);
        front.close();
    }

    /// Sends `head`, then `piece` every 100 ms (at most `times`), until the server answers.
    fn trickle(addr: SocketAddr, head: &[u8], piece: &[u8], times: usize) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        s.write_all(head).unwrap();
        let mut out = Vec::new();
        for _ in 0..times {
            if s.write_all(piece).is_err() {
                break;
            }
            let mut b = [0u8; 512];
            if let Ok(n) = s.read(&mut b) {
                out.extend_from_slice(&b[..n]);
                if n == 0 || out.len() > 12 {
                    break;
                }
            }
            thread::sleep(Duration::from_millis(100));
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn trickled_bodies_are_cut_by_the_minimum_rate_and_the_request_deadline() {
        let mut c = cfg();
        c.idle_timeout = Duration::from_millis(400);
        c.min_rate = 100;
        c.request_timeout = Duration::from_secs(2);
        let (front, addr) = start(c);
        let _h = echo(Arc::clone(&front));
        // One byte every 100 ms never trips the idle timeout, but averages 10 bytes/s.
        let text = trickle(addr, b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", b"1\r\nx\r\n", 60);
        assert!(text.starts_with("HTTP/1.1 408") && text.contains("too slow"), "{text}");
        // Fast enough for the rate (200 bytes/s) but longer than the request deadline.
        let text = trickle(addr, b"POST / HTTP/1.1\r\nContent-Length: 100000\r\n\r\n", &[b'y'; 20], 100);
        assert!(text.starts_with("HTTP/1.1 408") && text.contains("within 2 s"), "{text}");
        assert_eq!(front.stats.slow_refusals.load(Ordering::Relaxed), 2);
        front.close();
    }
}
