//! Python face of the Paje parser: `_core.PajeParser` (the event types: `py/decl.rs`).
//!
//! Owns argument checking and conversions; parsing runs with the GIL released.

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::driver::{feed_parser, finish_parser, producer_row};
use crate::formats::paje::PajeParser;

/// Streaming parser of Paje trace files (see `tracehouse/formats/paje/__init__.py`).
#[pyclass(module = "tracehouse._core", name = "PajeParser")]
pub struct PyPajeParser {
    inner: PajeParser,
    schemas: HashMap<(String, usize), Py<PyAny>>,
}

#[pymethods]
impl PyPajeParser {
    /// `source`: the file's path (`PajeTraceFile` names are relative to it); `max_line`: the
    /// longest line accepted, in bytes.
    #[new]
    #[pyo3(signature = (strict=false, batch_rows=65_536, time_unit="s", source=None, max_line=None))]
    fn new(
        strict: bool,
        batch_rows: usize,
        time_unit: &str,
        source: Option<std::path::PathBuf>,
        max_line: Option<usize>,
    ) -> PyResult<Self> {
        let scale = match time_unit {
            "s" => 1_000_000_000,
            "ms" => 1_000_000,
            "us" => 1_000,
            "ns" => 1,
            _ => return Err(PyValueError::new_err(format!("unknown time unit {time_unit:?} (s, ms, us, ns)"))),
        };
        let mut inner = PajeParser::new(strict, batch_rows.max(1), scale);
        if let Some(src) = source {
            inner.set_source(&src);
        }
        if let Some(max) = max_line {
            inner.set_max_line(max.max(1));
        }
        Ok(Self { inner, schemas: HashMap::new() })
    }

    /// Parses a chunk; returns the full batches as [(event type, batch)].
    fn feed<'py>(&mut self, py: Python<'py>, chunk: &[u8]) -> PyResult<Bound<'py, PyList>> {
        feed_parser(py, &mut self.inner, chunk, &mut self.schemas)
    }

    /// Ends the input (closing held states and unmatched links); returns the remaining batches.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        finish_parser(py, &mut self.inner, &mut self.schemas)
    }

    /// Always []: the Paje event types have fixed columns (extra fields go to `extra`).
    fn new_columns(&self) -> Vec<(String, String, String, String)> {
        Vec::new()
    }

    /// Producer rows: one per container (kind = container type, nested by parent).
    fn producers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for c in self.inner.containers() {
            let attrs = PyDict::new(py);
            if let Some(a) = &c.alias {
                attrs.set_item("alias", a)?;
            }
            if let Some(t) = c.created {
                attrs.set_item("created_ns", t)?;
            }
            if let Some(t) = c.destroyed {
                attrs.set_item("destroyed_ns", t)?;
            }
            out.append(producer_row(py, c.id, c.parent, &c.kind, &c.name, attrs)?)?;
        }
        Ok(out)
    }

    /// Counts: events, definitions, states closed at end / by destroy, unmatched link halves,
    /// %EventDef headers, containers, files included, rejected.
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = &self.inner.stats;
        let d = PyDict::new(py);
        for (k, v) in [
            ("events", s.events),
            ("definitions", s.definitions),
            ("states_closed_at_end", s.states_closed_at_end),
            ("states_closed_by_destroy", s.states_closed_by_destroy),
            ("unmatched_link_start", s.unmatched_link_start),
            ("unmatched_link_end", s.unmatched_link_end),
            ("event_defs", s.event_defs),
            ("containers", s.containers),
            ("includes", s.includes),
            ("rejected", self.inner.rejected),
        ] {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// The first rejected lines: [(line, 0, reason)].
    #[getter]
    fn problems(&self) -> Vec<(u64, u64, String)> {
        self.inner.problems.iter().map(|p| (p.line, 0, p.reason.clone())).collect()
    }

    /// In strict mode, the line that stopped the parse.
    #[getter]
    fn fatal(&self) -> Option<(u64, u64, String)> {
        self.inner.fatal.as_ref().map(|p| (p.line, 0, p.reason.clone()))
    }
}

/// Adds the Paje names to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPajeParser>()?;
    Ok(())
}
