//! Python face of the Chrome JSON parser and writer: `_core.ChromeParser` and
//! `_core.ChromeWriter` (the event types: `py/decl.rs`).
//!
//! Owns argument checking and the conversions: chunks in as `bytes`, batches out as
//! `pyarrow.RecordBatch`, producers/stats/problems as plain Python values (a handful
//! per trace, never one per event). Parsing and encoding run with the GIL released,
//! so the store's checkpoint thread encodes Parquet while the next chunk is parsed.

use std::collections::HashMap;

use arrow_array::RecordBatch;
use arrow_pyarrow::FromPyArrow;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use super::driver::{feed_parser, finish_parser, producer_row};
use crate::formats::chrome::export::ChromeWriter;
use crate::formats::chrome::{ChromeParser, Options, Problem};
use crate::formats::table::PType;

/// Problems as (line, byte offset, reason) tuples.
pub fn problems_to_py<'py>(py: Python<'py>, ps: &[Problem]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for p in ps {
        out.append((p.line, p.offset, p.reason.as_str()))?;
    }
    Ok(out)
}

/// Streaming parser of Chrome Trace Event JSON (see `tracehouse/formats/chrome/__init__.py`).
#[pyclass(module = "tracehouse._core", name = "ChromeParser")]
pub struct PyChromeParser {
    inner: ChromeParser,
    schemas: HashMap<(String, usize), Py<PyAny>>,
}

#[pymethods]
impl PyChromeParser {
    /// `max_record`: the longest event record accepted, in bytes (default 16 MB).
    #[new]
    #[pyo3(signature = (strict=false, batch_rows=65_536, max_arg_columns=200, max_record=None))]
    fn new(strict: bool, batch_rows: usize, max_arg_columns: usize, max_record: Option<usize>) -> PyResult<Self> {
        if batch_rows == 0 {
            return Err(PyValueError::new_err("batch_rows: expected at least 1"));
        }
        let mut opts = Options { strict, batch_rows, max_arg_columns, ..Options::default() };
        if let Some(m) = max_record {
            opts.max_record = m.max(1);
        }
        Ok(Self { inner: ChromeParser::new(opts), schemas: HashMap::new() })
    }

    /// Declares an args column of an earlier trace: `end` for `end_arg_` columns.
    /// Returns False when the event type is unknown or the column name is taken.
    #[pyo3(signature = (event_type, column, ptype, key, end=false))]
    fn declare(&mut self, event_type: &str, column: &str, ptype: &str, key: &str, end: bool) -> PyResult<bool> {
        let t =
            PType::from_name(ptype).ok_or_else(|| PyValueError::new_err(format!("unknown column type {ptype:?}")))?;
        Ok(self.inner.declare(event_type, column, t, key, end))
    }

    /// Parses a chunk; returns the batches that are full, as [(event type, batch)].
    fn feed<'py>(&mut self, py: Python<'py>, chunk: &[u8]) -> PyResult<Bound<'py, PyList>> {
        feed_parser(py, &mut self.inner, chunk, &mut self.schemas)
    }

    /// Ends the input; returns every remaining batch.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        finish_parser(py, &mut self.inner, &mut self.schemas)
    }

    /// Columns discovered since the last call: [(event type, column, type, args key)].
    fn new_columns(&mut self) -> Vec<(String, String, &'static str, String)> {
        self.inner.take_new_columns().into_iter().map(|(t, c, p, k)| (t, c, p.name(), k)).collect()
    }

    /// Every producer met: dicts with id, parent, kind, name, attrs (pid, tid, sort_index, labels).
    fn producers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for p in self.inner.producers() {
            let default = match &p.tid {
                Some(t) => format!("thread {t}"),
                None => format!("process {}", p.pid),
            };
            let attrs = PyDict::new(py);
            let num = |s: &str| s.parse::<i64>().ok();
            match num(&p.pid) {
                Some(v) => attrs.set_item("pid", v)?,
                None => attrs.set_item("pid", &p.pid)?,
            }
            if let Some(t) = &p.tid {
                match num(t) {
                    Some(v) => attrs.set_item("tid", v)?,
                    None => attrs.set_item("tid", t)?,
                }
            }
            if let Some(s) = p.sort_index {
                attrs.set_item("sort_index", s)?;
            }
            if let Some(l) = &p.labels {
                attrs.set_item("labels", l)?;
            }
            out.append(producer_row(py, p.id, p.parent, p.kind, p.name.as_deref().unwrap_or(&default), attrs)?)?;
        }
        Ok(out)
    }

    /// Counts: records, metadata, unmatched_begin, unmatched_end, unmatched_async_begin,
    /// unmatched_async_end, unterminated_flows, skipped_counter_args, rejected.
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = &self.inner.stats;
        let d = PyDict::new(py);
        for (k, v) in [
            ("records", s.records),
            ("metadata", s.metadata),
            ("unmatched_begin", s.unmatched_begin),
            ("unmatched_end", s.unmatched_end),
            ("unmatched_async_begin", s.unmatched_async_begin),
            ("unmatched_async_end", s.unmatched_async_end),
            ("unterminated_flows", s.unterminated_flows),
            ("skipped_counter_args", s.skipped_counter_args),
            ("rejected", self.inner.rejected),
        ] {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// The first rejected records: [(line, byte offset, reason)].
    #[getter]
    fn problems<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        problems_to_py(py, &self.inner.problems)
    }

    /// In strict mode, the record that stopped the parse: (line, byte offset, reason).
    #[getter]
    fn fatal(&self) -> Option<(u64, u64, String)> {
        self.inner.fatal.as_ref().map(|p| (p.line, p.offset, p.reason.clone()))
    }

    /// Top-level members other than the events, as [(key, JSON text)].
    #[getter]
    fn metadata(&self) -> Vec<(String, String)> {
        self.inner.metadata.clone()
    }
}

/// Encoder of record batches as Chrome JSON events (see `src/formats/chrome/export.rs` for the
/// column roles).
#[pyclass(module = "tracehouse._core", name = "ChromeWriter")]
pub struct PyChromeWriter {
    inner: ChromeWriter,
}

#[pymethods]
impl PyChromeWriter {
    #[new]
    #[pyo3(signature = (producers, first=true))]
    fn new(producers: Vec<(i32, String, String)>, first: bool) -> Self {
        Self { inner: ChromeWriter::new(producers, first) }
    }

    /// The events of `batch` as JSON text (each preceded by its separator).
    fn encode<'py>(
        &mut self,
        py: Python<'py>,
        batch: &Bound<'py, PyAny>,
        ph: &str,
        name: &str,
        cat: &str,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let rb = RecordBatch::from_pyarrow_bound(batch)?;
        let inner = &mut self.inner;
        let out = py.detach(move || {
            let mut out = Vec::with_capacity(rb.num_rows() * 160);
            inner.encode(&rb, ph, name, cat, &mut out).map(|_| out)
        });
        let out = out.map_err(PyValueError::new_err)?;
        Ok(PyBytes::new(py, &out))
    }

    /// The text that closes the last event (a counter event waits for more series); call
    /// once after the last batch.
    fn finish<'py>(&mut self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let mut out = Vec::new();
        self.inner.finish(&mut out);
        PyBytes::new(py, &out)
    }

    /// Events written so far.
    #[getter]
    fn events(&self) -> u64 {
        self.inner.events
    }
}

/// Adds the Chrome names to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyChromeParser>()?;
    m.add_class::<PyChromeWriter>()?;
    Ok(())
}
