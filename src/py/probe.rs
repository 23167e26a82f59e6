//! Python face of the probe-output parser (bpftrace, SystemTap): `_core.ProbeParser`.
//!
//! Owns argument checking and conversions; parsing runs with the GIL released.

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::arrow::schema_to_pyarrow;
use super::driver::{drain_parser, feed_parser, finish_parser, producer_row};
use crate::formats::probe::{ProbeParser, Tool};

/// Streaming parser of bpftrace / SystemTap output with printf patterns and spans.
#[pyclass(module = "tracehouse._core", name = "ProbeParser")]
pub struct PyProbeParser {
    inner: ProbeParser,
    schemas: HashMap<(String, usize), Py<PyAny>>,
}

#[pymethods]
impl PyProbeParser {
    /// `max_line`: the longest line accepted, in bytes (default 16 MB).
    #[new]
    #[pyo3(signature = (tool, patterns=Vec::new(), spans=Vec::new(), strict=false, batch_rows=65_536, max_line=None))]
    fn new(
        tool: &str,
        patterns: Vec<String>,
        spans: Vec<String>,
        strict: bool,
        batch_rows: usize,
        max_line: Option<usize>,
    ) -> PyResult<Self> {
        let tool = match tool {
            "bpftrace" => Tool::Bpftrace,
            "stap" => Tool::Stap,
            _ => return Err(PyValueError::new_err(format!("unknown tool {tool:?} (bpftrace, stap)"))),
        };
        let mut inner =
            ProbeParser::new(tool, &patterns, &spans, strict, batch_rows.max(1)).map_err(PyValueError::new_err)?;
        if let Some(max) = max_line {
            inner.set_max_line(max.max(1));
        }
        Ok(Self { inner, schemas: HashMap::new() })
    }

    /// [(event type, kind, [(column, type), ...])] of every type this parser makes.
    #[allow(clippy::type_complexity)]
    fn tables(&self) -> Vec<(String, &'static str, Vec<(String, &'static str)>)> {
        self.inner
            .table_columns()
            .into_iter()
            .map(|(n, k, cols)| (n, k, cols.into_iter().map(|(c, t)| (c, t.name())).collect()))
            .collect()
    }

    /// [(pattern, field, unit)] of every pattern field.
    fn units(&self) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for p in self.inner.patterns() {
            for f in &p.fields {
                out.push((p.name.clone(), f.name.clone(), f.unit.clone()));
            }
        }
        out
    }

    /// Parses a chunk; returns the full batches as [(event type, batch)].
    fn feed<'py>(&mut self, py: Python<'py>, chunk: &[u8]) -> PyResult<Bound<'py, PyList>> {
        feed_parser(py, &mut self.inner, chunk, &mut self.schemas)
    }

    /// Ends the input; returns every remaining batch.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        finish_parser(py, &mut self.inner, &mut self.schemas)
    }

    /// The rows parsed so far as batches, the input going on (a pipe's data committed as it
    /// arrives); spans still open stay until their end comes.
    fn drain<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        drain_parser(py, &mut self.inner, &mut self.schemas)
    }

    /// The aggregate result tables: [("hist" | "map" | "stats", batch)].
    fn aggregates<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for (n, b) in self.inner.take_aggregates() {
            let schema = schema_to_pyarrow(py, &b.schema())?;
            out.append((n, super::arrow::batch_to_pyarrow(py, b, &schema)?))?;
        }
        Ok(out)
    }

    /// Aggregates printed with nothing in them: [(result kind, map name)].
    fn empty_aggregates(&self) -> Vec<(&'static str, String)> {
        self.inner.empty_aggregates().to_vec()
    }

    /// No columns are discovered while parsing (patterns fix them): always [].
    fn new_columns(&self) -> Vec<(String, String, String, String)> {
        Vec::new()
    }

    /// Producer rows: the tool, processes (pid) and threads (tid).
    fn producers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for p in self.inner.producers() {
            let attrs = PyDict::new(py);
            if let Some(v) = p.pid {
                attrs.set_item("pid", v)?;
            }
            if let Some(v) = p.tid {
                attrs.set_item("tid", v)?;
            }
            out.append(producer_row(py, p.id, p.parent, p.kind, &p.name, attrs)?)?;
        }
        Ok(out)
    }

    /// Counts (records by type, lost events, printf lines, rejected).
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let mut counts: Vec<_> = self.inner.counts.iter().collect();
        counts.sort();
        for (k, v) in counts {
            d.set_item(k, v)?;
        }
        d.set_item("rejected", self.inner.rejected)?;
        Ok(d)
    }

    /// {span: {matched, unmatched_begin, unmatched_end}}.
    #[getter]
    fn spans<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, s) in self.inner.span_stats() {
            let e = PyDict::new(py);
            e.set_item("matched", s.matched)?;
            e.set_item("unmatched_begin", s.unmatched_begin)?;
            e.set_item("unmatched_end", s.unmatched_end)?;
            d.set_item(name, e)?;
        }
        Ok(d)
    }

    /// The first rejected lines: [(line, 0, reason)].
    #[getter]
    fn problems(&self) -> Vec<(u64, u64, String)> {
        self.inner.problems.iter().map(|p| (p.line, 0, p.reason.clone())).collect()
    }

    /// In strict mode, the line that stopped the parse: (line, 0, reason).
    #[getter]
    fn fatal(&self) -> Option<(u64, u64, String)> {
        self.inner.fatal.as_ref().map(|p| (p.line, 0, p.reason.clone()))
    }
}

/// Adds the probe names to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyProbeParser>()?;
    Ok(())
}
