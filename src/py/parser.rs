//! The Python face of every format's streaming parser: `_core.NativeParser(format, **options)`.
//!
//! Owns the one class over the [`ChunkParser`] trait: it makes the parser a format declares
//! (`ParserDecl::make`, options checked against the declaration), feeds it chunks and ends
//! its input with the GIL released (so the store's checkpoint thread encodes Parquet while
//! the next chunk is parsed), and converts what it hands over: batches to
//! `pyarrow.RecordBatch` (each distinct schema converted once), producers, counts and problems
//! to plain Python values (a handful per trace, never one per event). A new format's parser
//! needs no glue of its own.

use std::collections::HashMap;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList};

use super::driver::{batches_to_py, drain_parser, feed_parser, finish_parser, producer_rows};
use crate::formats::decl::FormatDecl;
use crate::formats::parser::{OptValue, Options, Problem};
use crate::formats::table::PType;
use crate::formats::ChunkParser;

/// A format's streaming parser (see `tracehouse/_core.pyi`).
#[pyclass(module = "tracehouse._core", name = "NativeParser")]
pub struct PyNativeParser {
    format: &'static str,
    inner: Box<dyn ChunkParser>,
    schemas: HashMap<(String, usize), Py<PyAny>>,
}

/// An option's Python value as the declaration types it.
fn option_value(name: &str, v: &Bound<'_, PyAny>) -> PyResult<OptValue> {
    if v.is_instance_of::<PyBool>() {
        return Ok(OptValue::Bool(v.extract()?));
    }
    if let Ok(i) = v.extract::<u64>() {
        return Ok(OptValue::Int(i));
    }
    if let Ok(s) = v.extract::<String>() {
        return Ok(OptValue::Str(s));
    }
    if let Ok(l) = v.extract::<Vec<String>>() {
        return Ok(OptValue::List(l));
    }
    Err(PyTypeError::new_err(format!("option {name}: expected a bool, a non-negative int, a str or a list of str")))
}

fn problem(p: &Problem) -> (u64, u64, String) {
    (p.line, p.offset, p.reason.clone())
}

#[pymethods]
impl PyNativeParser {
    /// The parser of `format`; `options` as its declaration lists them (None values are left out).
    #[new]
    #[pyo3(signature = (format, **options))]
    fn new(format: &str, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let decl: &FormatDecl =
            FormatDecl::get(format).ok_or_else(|| PyValueError::new_err(format!("no format named {format:?}")))?;
        let Some(pd) = decl.parser else {
            return Err(PyValueError::new_err(format!("format {format:?} has no parser behind NativeParser")));
        };
        let mut given = Vec::new();
        if let Some(d) = options {
            for (k, v) in d.iter() {
                if v.is_none() {
                    continue;
                }
                let k: String = k.extract()?;
                given.push((k.clone(), option_value(&k, &v)?));
            }
        }
        let opts = Options::new(pd.options, given).map_err(|e| PyValueError::new_err(format!("{format}: {e}")))?;
        let inner = (pd.make)(&opts).map_err(|e| PyValueError::new_err(format!("{format}: {e}")))?;
        Ok(Self { format: decl.name, inner, schemas: HashMap::new() })
    }

    /// The format's name.
    #[getter]
    fn format(&self) -> &'static str {
        self.format
    }

    /// Parses a chunk; returns the batches that are full, as [(event type, batch)].
    fn feed<'py>(&mut self, py: Python<'py>, chunk: &[u8]) -> PyResult<Bound<'py, PyList>> {
        feed_parser(py, &mut *self.inner, chunk, &mut self.schemas)
    }

    /// Ends the input; returns every remaining batch.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        finish_parser(py, &mut *self.inner, &mut self.schemas)
    }

    /// The rows parsed so far as batches, the input going on (a pipe's data committed as it
    /// arrives); what is still open (a span without its end) stays until it closes.
    fn drain<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        drain_parser(py, &mut *self.inner, &mut self.schemas)
    }

    /// Declares an args column of an earlier trace (`end`: of the closing half). False when
    /// the event type is unknown, the column name taken, or the format has no such columns.
    #[pyo3(signature = (event_type, column, ptype, key, end=false))]
    fn declare(&mut self, event_type: &str, column: &str, ptype: &str, key: &str, end: bool) -> PyResult<bool> {
        let t =
            PType::from_name(ptype).ok_or_else(|| PyValueError::new_err(format!("unknown column type {ptype:?}")))?;
        Ok(self.inner.declare(event_type, column, t, key, end))
    }

    /// Columns discovered since the last call: [(event type, column, type, key)].
    fn new_columns(&mut self) -> Vec<(String, String, &'static str, String)> {
        self.inner.take_new_columns().into_iter().map(|(t, c, p, k)| (t, c, p.name(), k)).collect()
    }

    /// Event types made from the options or the input: [(name, kind, doc, [(column, type,
    /// unit, doc)])].
    #[allow(clippy::type_complexity)]
    fn input_types(&self) -> Vec<(String, &'static str, String, Vec<(String, &'static str, String, String)>)> {
        self.inner
            .input_types()
            .into_iter()
            .map(|t| (t.name, t.kind, t.doc, t.columns.into_iter().map(|(c, p, u, d)| (c, p.name(), u, d)).collect()))
            .collect()
    }

    /// Result tables to save beside the trace: [(result kind, pyarrow.RecordBatch)].
    fn results<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let mut own = HashMap::new();
        let r = self.inner.take_results();
        batches_to_py(py, r, &mut own)
    }

    /// Every producer met: dicts with id, parent, kind, name, attrs.
    fn producers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        producer_rows(py, self.inner.producers())
    }

    /// Counts for the import report, `rejected` included.
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.inner.stats() {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// Anything else the import report shows, as JSON text of one object.
    #[getter]
    fn details_json(&self) -> String {
        self.inner.details_json()
    }

    /// The first rejected records: [(line, byte offset or 0, reason)].
    #[getter]
    fn problems(&self) -> Vec<(u64, u64, String)> {
        self.inner.problems().iter().map(problem).collect()
    }

    /// In strict mode, the record that stopped the parse: (line, byte offset or 0, reason).
    #[getter]
    fn fatal(&self) -> Option<(u64, u64, String)> {
        self.inner.fatal().as_ref().map(problem)
    }
}

/// Adds `NativeParser` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyNativeParser>()?;
    Ok(())
}
