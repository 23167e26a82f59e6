//! Python face of the front end: `_core.HttpFront`, `_core.HttpRequest` and `_core.TcpChunk`.
//!
//! Owns the conversions only: a request's parts to Python strings and bytes (the body is
//! handed over once), an answer back to a [`Reply`]; a TCP item's lines and what its
//! ingestion stored. Waiting for requests releases the GIL.

use std::ffi::{c_int, c_void};
use std::fs::File;
use std::net::TcpListener;
use std::os::fd::{BorrowedFd, FromRawFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::{PyBufferError, PyRuntimeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::commit::PyGroupCommit;
use crate::ingest::front::{Front, FrontConfig};
use crate::ingest::httpfront::{error_reply, Reply, Request};
use crate::ingest::tcpfront::{Payload, TcpConfig, TcpItem};

/// The native HTTP/1.1 front end listening on one socket.
#[pyclass(module = "tracehouse._core", name = "HttpFront", frozen)]
pub struct PyFront {
    front: Arc<Front>,
}

#[pymethods]
impl PyFront {
    /// Takes ownership of listening socket `fd` (pass a dup) and starts accepting.
    #[new]
    #[pyo3(signature = (fd, *, max_body, max_connections, idle_timeout, max_inflight, overload_wait,
                        retry_after=1, max_head=65536, token=None, open_paths=Vec::new(),
                        request_timeout=300.0, min_rate=0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        fd: i32,
        max_body: usize,
        max_connections: usize,
        idle_timeout: f64,
        max_inflight: usize,
        overload_wait: f64,
        retry_after: u32,
        max_head: usize,
        token: Option<String>,
        open_paths: Vec<String>,
        request_timeout: f64,
        min_rate: usize,
    ) -> PyResult<Self> {
        let positive = |t: f64| t.is_finite() && t > 0.0;
        if fd < 0
            || !positive(idle_timeout)
            || !positive(request_timeout)
            || overload_wait.is_nan()
            || overload_wait < 0.0
        {
            return Err(PyValueError::new_err("HttpFront: a socket fd and positive timeouts are needed"));
        }
        if token.as_deref() == Some("") {
            return Err(PyValueError::new_err("HttpFront: an empty token (pass None for no token)"));
        }
        // SAFETY: the caller hands over a listening socket descriptor it no longer uses.
        let listener = unsafe { TcpListener::from_raw_fd(fd) };
        let cfg = FrontConfig {
            max_body,
            max_head,
            max_connections,
            idle_timeout: Duration::from_secs_f64(idle_timeout),
            max_inflight,
            overload_wait: Duration::from_secs_f64(overload_wait),
            retry_after,
            token,
            open_paths,
            request_timeout: Duration::from_secs_f64(request_timeout),
            min_rate,
        };
        let front = Front::start(listener, cfg).map_err(|e| PyRuntimeError::new_err(format!("HttpFront: {e}")))?;
        Ok(Self { front })
    }

    /// Up to `max` complete HTTP requests with at most `max_bytes` of body together, then
    /// up to `max` TCP chunks (`TcpChunk`) with at most `max_bytes` of lines (at least one
    /// of either), waiting at most `timeout` seconds for the first.
    #[pyo3(signature = (max=64, max_bytes=8 << 20, timeout=0.1))]
    fn take(&self, py: Python<'_>, max: usize, max_bytes: usize, timeout: f64) -> PyResult<Vec<Py<PyAny>>> {
        let f = Arc::clone(&self.front);
        let t = Duration::from_secs_f64(timeout.max(0.0));
        let (http, tcp) = py.detach(move || f.take_all(max, max_bytes, t));
        let mut out = Vec::with_capacity(http.len() + tcp.len());
        for r in http {
            out.push(Py::new(py, PyRequest { inner: Some(r) })?.into_any());
        }
        for item in tcp {
            out.push(Py::new(py, PyTcpChunk::new(item))?.into_any());
        }
        Ok(out)
    }

    /// Starts serving line protocol over TCP on listening socket `fd` (pass a dup) beside
    /// HTTP: its chunks come out of `take` with the requests (src/ingest/tcpfront.rs).
    #[pyo3(signature = (fd, *, bucket, max_line, high_water, max_connections, idle_timeout, max_inflight,
                        token=None))]
    #[allow(clippy::too_many_arguments)]
    fn listen_tcp(
        &self,
        fd: i32,
        bucket: String,
        max_line: usize,
        high_water: usize,
        max_connections: usize,
        idle_timeout: f64,
        max_inflight: usize,
        token: Option<String>,
    ) -> PyResult<()> {
        if fd < 0 || !(idle_timeout.is_finite() && idle_timeout > 0.0) || max_line == 0 {
            return Err(PyValueError::new_err("listen_tcp: a socket fd, a positive idle timeout and max_line"));
        }
        if token.as_deref() == Some("") {
            return Err(PyValueError::new_err("listen_tcp: an empty token (pass None for no token)"));
        }
        // SAFETY: the caller hands over a listening socket descriptor it no longer uses.
        let listener = unsafe { TcpListener::from_raw_fd(fd) };
        let cfg = TcpConfig {
            bucket,
            max_line,
            high_water,
            max_connections,
            idle_timeout: Duration::from_secs_f64(idle_timeout),
            max_inflight,
            token,
        };
        self.front.listen_tcp(listener, cfg).map_err(|e| PyRuntimeError::new_err(format!("listen_tcp: {e}")))
    }

    /// Stops accepting and reading TCP connections (unfinished last lines are dropped) and
    /// waits up to `timeout` s for what they sent to be ingested and acknowledged (keep
    /// taking meanwhile). Returns how many connections were still open.
    fn close_tcp(&self, py: Python<'_>, timeout: f64) -> usize {
        let f = Arc::clone(&self.front);
        let t = Duration::from_secs_f64(timeout.max(0.0));
        py.detach(move || f.close_tcp(t))
    }

    /// Stops accepting and closes every connection.
    fn close(&self, py: Python<'_>) {
        let f = Arc::clone(&self.front);
        py.detach(move || f.close());
    }

    /// Counters: connections, refused_connections, overload_refusals, requests, inflight_bytes,
    /// auth_refusals (HTTP and TCP), slow_refusals; with TCP: tcp_connections,
    /// tcp_refused_connections, tcp_inflight_bytes.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = &self.front.stats;
        let d = PyDict::new(py);
        d.set_item("connections", s.connections.load(Ordering::Relaxed))?;
        d.set_item("refused_connections", s.refused_connections.load(Ordering::Relaxed))?;
        d.set_item("overload_refusals", s.overload_refusals.load(Ordering::Relaxed))?;
        d.set_item("requests", s.requests.load(Ordering::Relaxed))?;
        d.set_item("inflight_bytes", s.inflight.load(Ordering::Relaxed))?;
        d.set_item("auth_refusals", s.auth_refusals.load(Ordering::Relaxed))?;
        d.set_item("slow_refusals", s.slow_refusals.load(Ordering::Relaxed))?;
        if let Some(t) = self.front.tcp_stats() {
            d.set_item("tcp_connections", t.stats.connections.load(Ordering::Relaxed))?;
            d.set_item("tcp_refused_connections", t.stats.refused_connections.load(Ordering::Relaxed))?;
            d.set_item("tcp_inflight_bytes", t.stats.inflight.load(Ordering::Relaxed))?;
        }
        Ok(d)
    }

    /// The last request refused for its token ("POST /path from peer: wrong token"), or "".
    fn last_auth_refusal(&self) -> String {
        self.front.last_auth_refusal()
    }
}

/// One request taken from the front end; answer it once with `respond`.
#[pyclass(module = "tracehouse._core", name = "HttpRequest")]
pub struct PyRequest {
    inner: Option<Request>,
}

impl PyRequest {
    fn req(&self) -> PyResult<&Request> {
        self.inner.as_ref().ok_or_else(|| PyRuntimeError::new_err("request already answered"))
    }
}

#[pymethods]
impl PyRequest {
    #[getter]
    fn method(&self) -> PyResult<String> {
        Ok(self.req()?.method.clone())
    }

    #[getter]
    fn path(&self) -> PyResult<String> {
        Ok(self.req()?.path.clone())
    }

    /// The raw query string (without `?`).
    #[getter]
    fn query(&self) -> PyResult<String> {
        Ok(self.req()?.query.clone())
    }

    /// `[(name, value)]`, names lower-cased.
    #[getter]
    fn headers(&self) -> PyResult<Vec<(String, String)>> {
        Ok(self.req()?.headers.clone())
    }

    #[getter]
    fn peer(&self) -> PyResult<String> {
        Ok(self.req()?.peer.clone())
    }

    /// The body, without a copy: a `Body` (buffer protocol; `bytes(b)` copies). The request
    /// gives it up: a second call returns an empty one.
    fn take_body(&mut self) -> PyResult<PyBody> {
        let r = self.inner.as_mut().ok_or_else(|| PyRuntimeError::new_err("request already answered"))?;
        Ok(PyBody { data: std::mem::take(&mut r.body) })
    }

    /// Answers the request; a second answer is an error.
    #[pyo3(signature = (status, headers=Vec::new(), body=Vec::new()))]
    fn respond(&mut self, py: Python<'_>, status: u16, headers: Vec<(String, String)>, body: Vec<u8>) -> PyResult<()> {
        let mut r = self.inner.take().ok_or_else(|| PyRuntimeError::new_err("request already answered"))?;
        // A small answer is written here without blocking, under the interpreter lock
        // (`detach_if`); a big one is handed to the connection's thread.
        let big = body.len() >= super::DETACH_BYTES;
        super::detach_if(py, big, move || r.respond(Reply::new(status, headers, body)));
        Ok(())
    }

    /// Answers the request with the first `len` bytes of the file open as descriptor `fd`
    /// (from its start) as the body, sent by the connection's thread from the file (sendfile:
    /// no copy through this process). The descriptor is duplicated: the caller closes its own.
    fn respond_file(&mut self, status: u16, headers: Vec<(String, String)>, fd: i32, len: u64) -> PyResult<()> {
        if fd < 0 {
            return Err(PyValueError::new_err(format!("bad file descriptor {fd}")));
        }
        // Safety: borrowed for the duplication only; the caller keeps `fd` open during this call.
        let file = unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()?;
        let mut r = self.inner.take().ok_or_else(|| PyRuntimeError::new_err("request already answered"))?;
        r.respond(Reply { status, headers, body: Vec::new(), file: Some((File::from(file), len)) });
        Ok(())
    }

    /// Answers the request once record `lsn` of `commit` is durable, from the committer's
    /// thread (no Python runs then); 500 with the reason if it never will be. A second
    /// answer is an error.
    #[pyo3(signature = (commit, lsn, status, headers=Vec::new(), body=Vec::new()))]
    fn respond_when_durable(
        &mut self,
        py: Python<'_>,
        commit: &Bound<'_, PyGroupCommit>,
        lsn: u64,
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    ) -> PyResult<()> {
        let mut r = self.inner.take().ok_or_else(|| PyRuntimeError::new_err("request already answered"))?;
        let c = commit.get();
        // Under the interpreter lock (`detach_if`): the committer's lock is never held long, nor
        // by a thread that waits for the interpreter lock.
        let big = body.len() >= super::DETACH_BYTES;
        super::detach_if(py, big, move || {
            c.inner.on_durable(
                lsn,
                Box::new(move |res| match res {
                    Ok(()) => r.respond(Reply::new(status, headers, body)),
                    Err(why) => r.respond(error_reply(500, &format!("write not durable: {why}"))),
                }),
            )
        });
        Ok(())
    }

    /// Whether `respond` was called.
    #[getter]
    fn answered(&self) -> bool {
        self.inner.is_none()
    }
}

/// A piece of one TCP connection's line-protocol stream: complete lines (`take_body`), or the
/// error of one line dropped for its length (`dropped`). Finish it exactly once.
#[pyclass(module = "tracehouse._core", name = "TcpChunk")]
pub struct PyTcpChunk {
    inner: Option<TcpItem>,
    #[pyo3(get)]
    bucket: String,
    #[pyo3(get)]
    precision: String,
    #[pyo3(get)]
    peer: String,
    /// Whether the connection asked for durable offsets (`# tracehouse acks=1`).
    #[pyo3(get)]
    acks: bool,
    /// Number of its first line on the connection (the handshake is line 1).
    #[pyo3(get)]
    first_line: u64,
    /// When its first byte arrived, ns since the epoch (the time of lines without one).
    #[pyo3(get)]
    received_ns: i64,
    /// `(line, reason)` of a dropped line, else None.
    #[pyo3(get)]
    dropped: Option<(u64, String)>,
}

impl PyTcpChunk {
    fn new(item: TcpItem) -> Self {
        let (first_line, dropped) = match &item.payload {
            Payload::Lines { first_line, .. } => (*first_line, None),
            Payload::Dropped { line, why } => (*line, Some((*line, why.clone()))),
        };
        Self {
            bucket: item.conn.bucket.clone(),
            precision: item.conn.precision.clone(),
            peer: item.conn.peer.clone(),
            acks: item.conn.acks,
            first_line,
            received_ns: item.received_ns,
            dropped,
            inner: Some(item),
        }
    }

    fn item(&mut self) -> PyResult<TcpItem> {
        self.inner.take().ok_or_else(|| PyRuntimeError::new_err("TCP chunk already finished"))
    }
}

#[pymethods]
impl PyTcpChunk {
    /// Its lines, without a copy (a `Body`); a second call returns an empty one.
    fn take_body(&mut self) -> PyResult<PyBody> {
        let item = self.inner.as_mut().ok_or_else(|| PyRuntimeError::new_err("TCP chunk already finished"))?;
        let data = match &mut item.payload {
            Payload::Lines { body, .. } => std::mem::take(body),
            Payload::Dropped { .. } => Vec::new(),
        };
        Ok(PyBody { data })
    }

    /// Its lines were appended: `rows` stored, `errors` [(line, reason)] refused, lines up to
    /// `last_line` processed. Under durable offsets the `ok` waits until `lsn` is durable in
    /// `commit` (None: the rows are already, or the server acknowledges written rows).
    #[pyo3(signature = (rows, errors, last_line, commit=None, lsn=0))]
    fn finish(
        &mut self,
        rows: u64,
        errors: Vec<(u64, String)>,
        last_line: u64,
        commit: Option<&Bound<'_, PyGroupCommit>>,
        lsn: u64,
    ) -> PyResult<()> {
        let item = self.item()?;
        let c = commit.map(|c| c.get());
        // Keeps the interpreter lock (`detach_if`): a few µs under locks no thread holds while
        // it waits for the interpreter lock, and a non-blocking send.
        item.finish(rows, errors, last_line, c.map(|c| (&c.inner, lsn)));
        Ok(())
    }

    /// Its lines could not be appended (`why`): the error is sent under durable offsets and
    /// the connection closes once what came before is answered.
    fn fail(&mut self, py: Python<'_>, why: &str) -> PyResult<()> {
        let item = self.item()?;
        py.detach(move || item.fail(why));
        Ok(())
    }

    /// Whether `finish` or `fail` was called.
    #[getter]
    fn finished(&self) -> bool {
        self.inner.is_none()
    }
}

/// A request body handed to Python without copying it (400 KB bodies at 1,000 requests/s:
/// a copy into `bytes` under the GIL, page faults included, cost ~150 µs each).
/// Read-only buffer protocol: `pyarrow.py_buffer(body)`, `zlib`, `memoryview` and
/// `_core.decode_lines_many` read it in place.
#[pyclass(module = "tracehouse._core", name = "Body", frozen)]
pub struct PyBody {
    pub(crate) data: Vec<u8>,
}

#[pymethods]
impl PyBody {
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("null view"));
        }
        if (flags & ffi::PyBUF_WRITABLE) == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err("a request body is read-only"));
        }
        let data = &slf.get().data;
        // SAFETY: `view` is valid (checked non-null, given by CPython); the data lives as long
        // as `slf`, which the view holds a reference to (PyBuffer_FillInfo increfs it), and a
        // frozen class never changes it.
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(view, slf.as_ptr(), data.as_ptr() as *mut c_void, data.len() as isize, 1, flags)
        };
        if rc != 0 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    fn __len__(&self) -> usize {
        self.data.len()
    }

    /// A copy as `bytes`.
    fn __bytes__<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.data)
    }
}

/// Adds the HTTP front end's names to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyFront>()?;
    m.add_class::<PyRequest>()?;
    m.add_class::<PyBody>()?;
    m.add_class::<PyTcpChunk>()?;
    Ok(())
}
