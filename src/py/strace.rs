//! Python face of the strace parser: `_core.StraceParser`
//! and `_core.strace_schemas()`.
//!
//! Owns argument checking and the conversion of finished batches to
//! `pyarrow.RecordBatch`. Parsing runs with the GIL released, so the store's encoder
//! threads work on the previous batches meanwhile.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyTuple};

use super::arrow::{batch_to_pyarrow, schema_to_pyarrow};
use crate::formats::strace::background::{FileParse, Msg};
use crate::formats::strace::{self, Config, StraceParser, EVENT_TYPES};

/// The three pyarrow schemas, converted once per interpreter.
fn pa_schemas(py: Python<'_>) -> PyResult<&[Py<PyAny>; 3]> {
    static SCHEMAS: PyOnceLock<[Py<PyAny>; 3]> = PyOnceLock::new();
    SCHEMAS.get_or_try_init(py, || {
        let one = |t: usize| schema_to_pyarrow(py, &strace::schema(t)).map(Bound::unbind);
        Ok([one(0)?, one(1)?, one(2)?])
    })
}

/// Streaming strace parser (see `tracehouse/_core.pyi`).
#[pyclass(module = "tracehouse._core", name = "StraceParser")]
pub struct PyStraceParser {
    inner: StraceParser,
}

impl PyStraceParser {
    fn batches<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let b = self.inner.take_batches();
        self.out_list(py, b)
    }

    fn out_list<'py>(
        &self,
        py: Python<'py>,
        batches: Vec<(&'static str, arrow_array::RecordBatch)>,
    ) -> PyResult<Bound<'py, PyList>> {
        out_list(py, batches)
    }
}

/// [(event type, pyarrow.RecordBatch)] of `batches`.
fn out_list<'py>(
    py: Python<'py>,
    batches: Vec<(&'static str, arrow_array::RecordBatch)>,
) -> PyResult<Bound<'py, PyList>> {
    let schemas = pa_schemas(py)?;
    let out = PyList::empty(py);
    for (name, rb) in batches {
        let t = EVENT_TYPES.iter().position(|n| *n == name).expect("known event type");
        let b = batch_to_pyarrow(py, rb, schemas[t].bind(py))?;
        out.append(PyTuple::new(py, [name.into_pyobject(py)?.into_any(), b])?)?;
    }
    Ok(out)
}

/// One strace file parsed on a thread of its own (see `tracehouse/_core.pyi`).
#[pyclass(module = "tracehouse._core", name = "StraceFileParse")]
pub struct PyStraceFileParse {
    inner: Option<FileParse>,
    parser: Option<Py<PyStraceParser>>,
    lines: u64,
    rejected: u64,
    error: Option<String>,
}

#[pymethods]
impl PyStraceFileParse {
    #[new]
    #[pyo3(signature = (path, pid=None, batch_rows=65_536, max_line=16 << 20, keep_rejects=10))]
    fn new(
        path: std::path::PathBuf,
        pid: Option<u32>,
        batch_rows: usize,
        max_line: usize,
        keep_rejects: usize,
    ) -> PyResult<Self> {
        if batch_rows == 0 {
            return Err(PyValueError::new_err("batch_rows: expected at least 1"));
        }
        if max_line == 0 {
            return Err(PyValueError::new_err("max_line: expected at least 1"));
        }
        let file = std::fs::File::open(&path)?;
        let cfg = Config { batch_rows, max_line, keep_rejects };
        let inner = FileParse::start(file, pid, cfg)?;
        Ok(Self { inner: Some(inner), parser: None, lines: 0, rejected: 0, error: None })
    }

    /// The next batches ([(event type, pyarrow.RecordBatch)], never empty), waiting for them
    /// without the GIL; None at the end (then `parser()` holds the finished parser). A read
    /// error is raised as OSError.
    fn next<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        let Some(inner) = self.inner.as_mut() else {
            return match &self.error {
                Some(e) => Err(pyo3::exceptions::PyOSError::new_err(e.clone())),
                None => Ok(None),
            };
        };
        match py.detach(|| inner.recv()) {
            Some(Msg::Batches { batches, lines, rejected }) => {
                self.lines = lines;
                self.rejected = rejected;
                Ok(Some(out_list(py, batches)?))
            }
            Some(Msg::Done(Ok(p))) => {
                self.inner = None;
                let s = p.stats();
                self.lines = s.lines;
                self.rejected = s.rejected;
                self.parser = Some(Py::new(py, PyStraceParser { inner: *p })?);
                Ok(None)
            }
            Some(Msg::Done(Err(e))) => {
                self.inner = None;
                self.error = Some(e.clone());
                Err(pyo3::exceptions::PyOSError::new_err(e))
            }
            None => {
                self.inner = None;
                Err(PyRuntimeError::new_err("the strace parse thread ended without a result"))
            }
        }
    }

    /// Asks the parse to end at its next chunk; `next()` then returns what it has and None.
    fn stop(&self) {
        if let Some(inner) = &self.inner {
            inner.stop();
        }
    }

    /// Stops the parse and waits for its thread (its held batches are dropped); `next()` then
    /// returns None. For an import that failed: the thread must not wait with full queues
    /// until the object is collected.
    fn close(&mut self, py: Python<'_>) {
        if let Some(inner) = self.inner.take() {
            py.detach(move || drop(inner));
        }
    }

    /// After `next()` returned None: the finished parser (stats, rejects, producers, late).
    fn parser(&self, py: Python<'_>) -> PyResult<Py<PyStraceParser>> {
        match &self.parser {
            Some(p) => Ok(p.clone_ref(py)),
            None => Err(PyRuntimeError::new_err("parser(): the parse has not ended (call next() until None)")),
        }
    }

    /// Lines read by the batches handed over so far.
    #[getter]
    fn lines(&self) -> u64 {
        self.lines
    }

    /// Lines rejected up to the batches handed over so far.
    #[getter]
    fn rejected(&self) -> u64 {
        self.rejected
    }
}

#[pymethods]
impl PyStraceParser {
    #[new]
    #[pyo3(signature = (pids=None, batch_rows=65_536, max_line=16 << 20, keep_rejects=10))]
    fn new(pids: Option<Vec<Option<u32>>>, batch_rows: usize, max_line: usize, keep_rejects: usize) -> PyResult<Self> {
        if batch_rows == 0 {
            return Err(PyValueError::new_err("batch_rows: expected at least 1"));
        }
        if max_line == 0 {
            return Err(PyValueError::new_err("max_line: expected at least 1"));
        }
        let pids = pids.unwrap_or_else(|| vec![None]);
        if pids.is_empty() {
            return Err(PyValueError::new_err("pids: expected at least one source"));
        }
        let cfg = Config { batch_rows, max_line, keep_rejects };
        Ok(Self { inner: StraceParser::new(cfg, &pids) })
    }

    /// The source to feed next, or None once every source has ended.
    fn need(&self) -> Option<usize> {
        self.inner.need()
    }

    /// Parses `chunk` (any bytes-like object: bytes, a memoryview of an mmap, ...) of
    /// source `source`; an empty chunk ends that source. Returns the batches completed
    /// so far as [(event type, pyarrow.RecordBatch)].
    #[pyo3(signature = (chunk, source=0))]
    fn feed<'py>(&mut self, py: Python<'py>, chunk: PyBuffer<u8>, source: usize) -> PyResult<Bound<'py, PyList>> {
        if source >= self.inner.sources() {
            return Err(PyValueError::new_err(format!("source {source}: there are {}", self.inner.sources())));
        }
        if !chunk.is_c_contiguous() {
            return Err(PyValueError::new_err("chunk: expected a contiguous bytes-like object"));
        }
        if self.inner.need().is_none() && chunk.len_bytes() > 0 {
            return Err(PyRuntimeError::new_err("feed after every source ended"));
        }
        // SAFETY: the buffer is C-contiguous, `len_bytes` long, and held (so neither freed
        // nor resized) until `chunk` drops after the parse. The parse only reads it; a
        // writable exporter changing it meanwhile (another thread writing into a
        // bytearray) could make it read mixed bytes, never out of bounds.
        let bytes: &[u8] = if chunk.len_bytes() == 0 {
            &[]
        } else {
            unsafe { std::slice::from_raw_parts(chunk.buf_ptr() as *const u8, chunk.len_bytes()) }
        };
        let inner = &mut self.inner;
        py.detach(move || inner.feed(source, bytes));
        drop(chunk);
        self.batches(py)
    }

    /// The rows parsed so far as batches, the input going on (a pipe's data committed as it
    /// arrives). Calls still waiting for their `<... resumed>` line are let go as a full
    /// batch lets them go: their rows come from `late()` after `finish()`.
    fn drain<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let inner = &mut self.inner;
        py.detach(move || inner.drain());
        self.batches(py)
    }

    /// Ends the input (unfinished calls are recorded) and returns the last batches.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let inner = &mut self.inner;
        py.detach(move || inner.finish());
        self.batches(py)
    }

    /// After finish(): batches of calls left unfinished for more than two batches, older
    /// than rows already returned (store them as a checkpoint of their own).
    fn late<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let late = self.inner.take_late();
        self.out_list(py, late)
    }

    /// [{id, parent, kind, name, attrs}] of every process and thread seen so far.
    fn producers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for p in self.inner.producers() {
            let d = PyDict::new(py);
            d.set_item("id", p.id)?;
            d.set_item("parent", p.parent)?;
            d.set_item("kind", p.kind)?;
            d.set_item("name", p.name)?;
            let attrs = PyDict::new(py);
            if p.kind == "process" {
                attrs.set_item("pid", p.os_id)?;
            } else {
                attrs.set_item("tid", p.os_id)?;
                attrs.set_item("pid", p.pid)?;
            }
            d.set_item("attrs", attrs)?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// The first rejected lines: [(source, line, reason)].
    fn rejects(&self) -> Vec<(usize, u64, String)> {
        self.inner.rejects().iter().map(|r| (r.source, r.line, r.reason.clone())).collect()
    }

    /// Counters: lines, bytes, events (by type), rejected, notes, orphans, unfinished.
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("lines", s.lines)?;
        d.set_item("bytes", s.bytes)?;
        let ev = PyDict::new(py);
        for (name, n) in EVENT_TYPES.iter().zip(s.events) {
            ev.set_item(name, n)?;
        }
        d.set_item("events", ev)?;
        d.set_item("rejected", s.rejected)?;
        d.set_item("notes", s.notes)?;
        d.set_item("orphans", s.orphans)?;
        d.set_item("unfinished", s.unfinished)?;
        Ok(d)
    }

    /// Rejected lines so far (all of them, not only those kept).
    #[getter]
    fn rejected(&self) -> u64 {
        self.inner.stats().rejected
    }

    /// Lines read so far.
    #[getter]
    fn lines(&self) -> u64 {
        self.inner.stats().lines
    }
}

/// {event type: pyarrow.Schema} of the strace event types.
#[pyfunction]
fn strace_schemas(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    for (name, s) in EVENT_TYPES.iter().zip(pa_schemas(py)?) {
        out.set_item(name, s.bind(py))?;
    }
    Ok(out)
}

/// Adds the strace names to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyStraceParser>()?;
    m.add_class::<PyStraceFileParse>()?;
    m.add_function(wrap_pyfunction!(strace_schemas, m)?)?;
    Ok(())
}
