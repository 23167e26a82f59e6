//! Python face of the recorder (`record/`): the traced process's `record_start`, `record_stop`,
//! `record_attach_thread`, `record_callbacks`, `record_forget`, and the storing process's
//! `RecordReader`.
//!
//! Owns argument checking and conversions; the tracer itself never goes through PyO3 (its
//! callbacks are raw C functions, see `record/tracer.rs`). `RecordReader.read` decodes with the
//! interpreter lock released, so the storing process appends one chunk while it reads the next.

use std::fs::File;
use std::os::fd::FromRawFd;

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList};

use super::arrow::{batch_to_pyarrow, schema_to_pyarrow};
use crate::record::decl::PYTHON;
use crate::record::tracer::{self, Config, MONITORING_EVENTS};
use crate::record::wire::{self, WireReader};

/// Starts recording this process into descriptor `fd` (see `tracehouse.record.child`).
#[pyfunction]
#[pyo3(signature = (fd, rules, actions, *, flush_rows=32_768, hello="{}".to_owned(), monitoring=false, disable=None, depths=None))]
#[allow(clippy::too_many_arguments)]
fn record_start(
    fd: i32,
    rules: Vec<(String, bool)>,
    actions: Vec<u8>,
    flush_rows: usize,
    hello: String,
    monitoring: bool,
    disable: Option<Bound<'_, PyAny>>,
    depths: Option<Bound<'_, PyAny>>,
) -> PyResult<()> {
    if actions.len() != 256 {
        return Err(PyValueError::new_err(format!(
            "actions: expected 256 bytes (one per opcode), got {}",
            actions.len()
        )));
    }
    if fd < 0 {
        return Err(PyValueError::new_err("fd: expected an open descriptor"));
    }
    let mut table = [0u8; 256];
    table.copy_from_slice(&actions);
    // The callable is kept for the whole recording (a reference the recorder owns).
    let depths = depths.map_or(0, |d| d.into_ptr() as usize);
    let cfg = Config { fd, rules, actions: table, flush_rows, hello, monitoring, depths };
    let d = disable.map_or(std::ptr::null_mut(), |d| d.as_ptr());
    // SAFETY: we hold the interpreter lock (a #[pyfunction] runs attached).
    unsafe { tracer::start(cfg, d) }.map_err(PyRuntimeError::new_err)
}

/// Installs the trace function in the calling thread (3.11; threads started after the start).
#[pyfunction]
fn record_attach_thread() {
    // SAFETY: interpreter lock held.
    unsafe { tracer::attach_thread() }
}

/// {sys.monitoring event name: callback} for a 3.12+ recording.
#[pyfunction]
fn record_callbacks(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    // SAFETY: interpreter lock held; each pointer is a new reference we take over.
    unsafe {
        for (name, f) in MONITORING_EVENTS.iter().zip(tracer::monitoring_callbacks()) {
            if f.is_null() {
                return Err(PyErr::fetch(py));
            }
            out.set_item(name, Bound::from_owned_ptr(py, f))?;
        }
    }
    Ok(out)
}

/// Stops recording, writes the end frame (`end` is a JSON value describing the program's end),
/// and waits for the writer: returns the counts and bytes written.
#[pyfunction]
fn record_stop<'py>(py: Python<'py>, end: &str) -> PyResult<Bound<'py, PyDict>> {
    // SAFETY: interpreter lock held.
    let (c, bytes, files) = unsafe { tracer::stop(end) }.map_err(PyOSError::new_err)?;
    let out = PyDict::new(py);
    out.set_item("events", c.events.iter().sum::<u64>())?;
    let by = PyDict::new(py);
    for (t, n) in wire::EVENT_TAGS.iter().zip(c.events) {
        by.set_item(t, n)?;
    }
    out.set_item("by_type", by)?;
    out.set_item("symbols", c.symbols)?;
    out.set_item("codes", c.codes)?;
    out.set_item("excluded_codes", c.excluded_codes)?;
    out.set_item("threads", c.threads)?;
    out.set_item("sources", c.sources)?;
    out.set_item("bytes", bytes)?;
    out.set_item("files", files)?;
    Ok(out)
}

/// In a forked child: stop recording without touching the parent's writer.
#[pyfunction]
fn record_forget() {
    // SAFETY: interpreter lock held.
    unsafe { tracer::forget() }
}

fn pa_schema<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    static SCHEMAS: PyOnceLock<Vec<(&'static str, Py<PyAny>)>> = PyOnceLock::new();
    let all = SCHEMAS.get_or_try_init(py, || {
        PYTHON
            .event_types
            .iter()
            .map(|e| Ok((e.name, schema_to_pyarrow(py, &wire::schema(e.name))?.unbind())))
            .collect::<PyResult<Vec<_>>>()
    })?;
    Ok(all.iter().find(|(n, _)| *n == name).expect("declared type").1.bind(py).clone())
}

/// Reads a recorder stream (a descriptor it owns, or a file) into record batches.
#[pyclass(module = "tracehouse._core", name = "RecordReader")]
pub struct PyRecordReader {
    inner: Option<WireReader<File>>,
    source: String,
}

#[pymethods]
impl PyRecordReader {
    /// `source`: an open descriptor (taken over and closed at the end) or a file path;
    /// `ts_offset` is added to every event's ts.
    #[new]
    #[pyo3(signature = (source, ts_offset=0))]
    fn new(source: &Bound<'_, PyAny>, ts_offset: i64) -> PyResult<Self> {
        let (file, name) = if let Ok(fd) = source.extract::<i32>() {
            if fd < 0 {
                return Err(PyValueError::new_err("fd: expected an open descriptor"));
            }
            // SAFETY: the caller hands the descriptor over (documented).
            (unsafe { File::from_raw_fd(fd) }, format!("descriptor {fd}"))
        } else {
            let path: String = source.extract()?;
            (File::open(&path).map_err(|e| PyOSError::new_err(format!("{path}: {e}")))?, path)
        };
        Ok(Self { inner: Some(WireReader::new(file).with_ts_offset(ts_offset)), source: name })
    }

    /// Decodes about `max_rows` events: a dict with `batches` [(type, pyarrow.RecordBatch)],
    /// `threads` [{producer, ident, name, ts}], `hello` and `end` (JSON text or None), `eof`.
    #[pyo3(signature = (max_rows=262_144))]
    fn read<'py>(&mut self, py: Python<'py>, max_rows: usize) -> PyResult<Bound<'py, PyDict>> {
        let reader = self.inner.as_mut().ok_or_else(|| PyValueError::new_err("the reader is closed"))?;
        let chunk = py.detach(|| reader.read(max_rows));
        let chunk = chunk.map_err(|e| PyValueError::new_err(format!("{}: {e}", self.source)))?;
        let out = PyDict::new(py);
        let batches = PyList::empty(py);
        for (name, b) in chunk.batches {
            let pb = batch_to_pyarrow(py, b, &pa_schema(py, name)?)?;
            batches.append((name, pb))?;
        }
        out.set_item("batches", batches)?;
        let threads = PyList::empty(py);
        for t in chunk.threads {
            let d = PyDict::new(py);
            d.set_item("producer", t.producer)?;
            d.set_item("ident", t.ident)?;
            d.set_item("name", t.name)?;
            d.set_item("ts", t.ts)?;
            threads.append(d)?;
        }
        out.set_item("threads", threads)?;
        out.set_item("hello", chunk.hello)?;
        out.set_item("end", chunk.end)?;
        out.set_item("eof", chunk.eof)?;
        Ok(out)
    }

    /// Bytes decoded so far.
    #[getter]
    fn offset(&self) -> u64 {
        self.inner.as_ref().map_or(0, WireReader::offset)
    }

    /// Closes the input.
    fn close(&mut self) {
        self.inner = None;
    }
}

/// Adds the recorder's names to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(record_start, m)?)?;
    m.add_function(wrap_pyfunction!(record_attach_thread, m)?)?;
    m.add_function(wrap_pyfunction!(record_callbacks, m)?)?;
    m.add_function(wrap_pyfunction!(record_stop, m)?)?;
    m.add_function(wrap_pyfunction!(record_forget, m)?)?;
    m.add_class::<PyRecordReader>()?;
    m.add("RECORD_EVENT_TYPES", wire::EVENT_TAGS.to_vec())?;
    Ok(())
}
