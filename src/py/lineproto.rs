//! Python face of the line-protocol decoder: `_core.LpSchemas`, `_core.LpProducers` and
//! `_core.decode_lines_many` (the bodies of one server round, or one body).
//!
//! Owns argument checking and the conversion of a [`lineproto::DecodedMany`] into Python: one
//! `pyarrow.RecordBatch` per measurement, errors as `(line, message)` tuples. Decoding
//! runs with the GIL released, so the server's other connections (and the store's
//! appends) go on meanwhile. The two state objects are locked by the decoder only on a
//! line's slow path (schemas first, then producers), so decodes run in parallel.

use std::sync::Mutex;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyDict, PyList, PyTuple};

use super::arrow::{batch_to_pyarrow, schema_to_pyarrow};
use super::httpfront::PyBody;
use crate::lineproto::{self, lock, FieldType, Input, Limits, Precision, Producers, Schemas};

/// Measurements of one format and their typed columns, shared by every decode of it.
#[pyclass(module = "tracehouse._core", name = "LpSchemas", frozen)]
pub struct PySchemas {
    inner: Mutex<Schemas>,
}

#[pymethods]
impl PySchemas {
    #[new]
    fn new() -> Self {
        Self { inner: Mutex::new(Schemas::new()) }
    }

    /// Declare (or widen) `measurement` with `[(column, type)]` known to the store.
    fn declare(&self, measurement: &str, columns: Vec<(String, String)>) -> PyResult<()> {
        let mut cols = Vec::with_capacity(columns.len());
        for (name, t) in columns {
            let ft = FieldType::from_name(&t)
                .ok_or_else(|| PyValueError::new_err(format!("column {name:?}: unknown type {t:?}")))?;
            cols.push((name, ft));
        }
        lock(&self.inner).declare(measurement, &cols).map_err(PyValueError::new_err)
    }

    /// `[(column, type)]` of `measurement` in stored order, or None.
    fn columns(&self, measurement: &str) -> Option<Vec<(String, &'static str)>> {
        lock(&self.inner).get(measurement).map(|m| m.columns.iter().map(|(n, t)| (n.clone(), t.name())).collect())
    }

    /// Names of every known measurement.
    fn measurements(&self) -> Vec<String> {
        lock(&self.inner).iter().map(|(k, _)| k.clone()).collect()
    }
}

/// `(id, name, [(tag, value)])` of a new producer, as Python sees it.
type NewProducerTuple = (i32, String, Vec<(String, String)>);

/// Tag sets of one trace and their producer ids.
#[pyclass(module = "tracehouse._core", name = "LpProducers", frozen)]
pub struct PyProducers {
    inner: Mutex<Producers>,
}

#[pymethods]
impl PyProducers {
    #[new]
    #[pyo3(signature = (next_id=0))]
    fn new(next_id: i32) -> Self {
        Self { inner: Mutex::new(Producers::new(next_id)) }
    }

    /// Declare a producer the store already has.
    fn declare(&self, id: i32, tags: Vec<(String, String)>) {
        lock(&self.inner).declare(id, &tags);
    }

    /// `[(id, name, [(tag, value)])]` interned since the last call, in id order.
    fn take_new(&self) -> Vec<NewProducerTuple> {
        lock(&self.inner).take_new().into_iter().map(|p| (p.id, p.name, p.tags)).collect()
    }

    /// Keeps `id` from ever being given to a tag set (a producer id an Arrow writer chose).
    fn reserve(&self, id: i32) {
        lock(&self.inner).reserve(id);
    }

    /// The id the next new tag set gets.
    #[getter]
    fn next_id(&self) -> i32 {
        lock(&self.inner).next_id()
    }

    fn __len__(&self) -> usize {
        lock(&self.inner).len()
    }
}

/// A request body as handed over: read in place (HTTP front end) or Python bytes.
enum Held<'py> {
    Native(Bound<'py, PyBody>),
    Bytes(PyBackedBytes),
}

impl Held<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Held::Native(b) => &b.get().data,
            Held::Bytes(b) => b,
        }
    }
}

/// Decode several bodies (`[(body, precision, default_ts, first_line)]`) into one
/// pyarrow.RecordBatch per measurement: `{"batches": [(name, batch)], "bodies": [{"lines",
/// "rows", "errors", "error_count", "last_line", "rows_by_batch": [(batch index, rows)]}],
/// "max_producer"}`.
#[pyfunction]
#[pyo3(signature = (items, schemas, producers, *, max_line=1 << 20, max_producers=1_000_000, max_columns=1_000,
                    max_measurements=10_000, max_errors=100))]
#[allow(clippy::too_many_arguments)]
fn decode_lines_many<'py>(
    py: Python<'py>,
    items: Vec<(Bound<'py, PyAny>, String, i64, u64)>,
    schemas: &Bound<'py, PySchemas>,
    producers: &Bound<'py, PyProducers>,
    max_line: usize,
    max_producers: usize,
    max_columns: usize,
    max_measurements: usize,
    max_errors: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let limits = Limits { max_line, max_producers, max_columns, max_measurements, max_errors };
    let mut held = Vec::with_capacity(items.len());
    let mut how = Vec::with_capacity(items.len());
    for (body, precision, default_ts, first_line) in items {
        let p = Precision::parse(&precision)
            .ok_or_else(|| PyValueError::new_err(format!("precision {precision:?}: expected ns, us, ms or s")))?;
        held.push(match body.cast::<PyBody>() {
            Ok(b) => Held::Native(b.clone()),
            Err(_) => Held::Bytes(body.extract()?),
        });
        how.push((p, default_ts, first_line));
    }
    let inputs: Vec<Input<'_>> = held
        .iter()
        .zip(&how)
        .map(|(h, &(precision, default_ts, first_line))| Input { body: h.bytes(), first_line, precision, default_ts })
        .collect();
    let s = schemas.get();
    let p = producers.get();
    let decoded = py.detach(|| lineproto::decode_many(&inputs, &s.inner, &p.inner, &limits));
    let out = PyDict::new(py);
    let batches = PyList::empty(py);
    for (name, batch) in decoded.batches {
        let pa_schema = schema_to_pyarrow(py, batch.schema().as_ref())?;
        let b = batch_to_pyarrow(py, batch, &pa_schema)?;
        batches.append(PyTuple::new(py, [name.into_pyobject(py)?.into_any(), b])?)?;
    }
    out.set_item("batches", batches)?;
    let bodies = PyList::empty(py);
    for b in decoded.bodies {
        let d = PyDict::new(py);
        let errors: Vec<(u64, String)> = b.errors.into_iter().map(|e| (e.line, e.message)).collect();
        d.set_item("errors", errors)?;
        d.set_item("error_count", b.error_count)?;
        d.set_item("lines", b.lines)?;
        d.set_item("rows", b.rows)?;
        d.set_item("last_line", b.last_line)?;
        d.set_item("rows_by_batch", b.rows_by_batch)?;
        bodies.append(d)?;
    }
    out.set_item("bodies", bodies)?;
    out.set_item("max_producer", decoded.max_producer)?;
    Ok(out)
}

/// Adds the line-protocol names to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySchemas>()?;
    m.add_class::<PyProducers>()?;
    m.add_function(wrap_pyfunction!(decode_lines_many, m)?)?;
    Ok(())
}
