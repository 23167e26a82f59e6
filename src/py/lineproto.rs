//! Python face of the line-protocol decoder: `_core.LpSchemas`, `_core.LpProducers`,
//! `_core.SeqCounters` (the per-producer numbering the decoder and the store share) and
//! `_core.decode_lines_many` (the bodies of one server round, or one body; given the trace's
//! `WalLog`, a round that changes no catalog row is logged in the same call: py/wal.rs).
//!
//! Owns argument checking and the conversion of a [`lineproto::DecodedMany`] into Python: one
//! `pyarrow.RecordBatch` per measurement, errors as `(line, message)` tuples. Decoding
//! runs with the GIL released, so the server's other connections (and the store's
//! appends) go on meanwhile. The two state objects are locked by the decoder only on a
//! line's slow path (schemas first, then producers), so decodes run in parallel.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arrow_array::types::{Int32Type, Int64Type};
use arrow_schema::SchemaRef;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyDict, PyList, PyTuple};

use super::arrow::{batch_to_pyarrow, primitive_from_pyarrow, schema_to_pyarrow, vec_to_pyarrow};
use super::commit::PyGroupCommit;
use super::httpfront::PyBody;
use super::wal::{fsync_always, is_stored, log_stored, PyWalLog, PyWalType};
use crate::ingest::lineproto::{self, FieldType, Input, Limits, Precision, Producers, Schemas};
use crate::mutex::lock;
use crate::store::seqnum::SeqCounters;

/// Measurements of one format and their typed columns, shared by every decode of it.
#[pyclass(module = "tracehouse._core", name = "LpSchemas", frozen)]
pub struct PySchemas {
    inner: Mutex<Schemas>,
    /// Batch schemas already converted to pyarrow, by the identity of the decoder's `Arc`
    /// (a measurement keeps one per layout): converting 60 fields cost ~60 us per batch.
    converted: Mutex<Vec<(SchemaRef, Py<PyAny>)>>,
}

/// Converted schemas kept at most (a new layout per added column; old ones are dropped).
const CONVERTED_MAX: usize = 256;

impl PySchemas {
    fn pyarrow_schema<'py>(&self, py: Python<'py>, schema: &SchemaRef) -> PyResult<Bound<'py, PyAny>> {
        if let Some((_, pa)) = lock(&self.converted).iter().find(|(s, _)| Arc::ptr_eq(s, schema)) {
            return Ok(pa.bind(py).clone());
        }
        let pa = schema_to_pyarrow(py, schema.as_ref())?;
        let mut cache = lock(&self.converted);
        if cache.len() >= CONVERTED_MAX {
            cache.clear();
        }
        cache.push((schema.clone(), pa.clone().unbind()));
        Ok(pa)
    }
}

#[pymethods]
impl PySchemas {
    #[new]
    fn new() -> Self {
        Self { inner: Mutex::new(Schemas::new()), converted: Mutex::new(Vec::new()) }
    }

    /// Declare (or widen) `measurement` with `[(column, type)]` known to the store,
    /// `{column: field key}` of the columns whose field key is not their name, and the
    /// measurement name `key` where it is not `measurement`.
    #[pyo3(signature = (measurement, columns, keys=None, key=None))]
    fn declare(
        &self,
        measurement: &str,
        columns: Vec<(String, String)>,
        keys: Option<HashMap<String, String>>,
        key: Option<&str>,
    ) -> PyResult<()> {
        let mut cols = Vec::with_capacity(columns.len());
        for (name, t) in columns {
            let ft = FieldType::from_name(&t)
                .ok_or_else(|| PyValueError::new_err(format!("column {name:?}: unknown type {t:?}")))?;
            cols.push((name, ft));
        }
        let keys = keys.unwrap_or_default().into_iter().collect();
        let mut schemas = lock(&self.inner);
        match key {
            Some(key) => schemas.declare_keyed(measurement, key, &cols, &keys),
            None => schemas.declare(measurement, &cols, &keys),
        }
        .map_err(PyValueError::new_err)
    }

    /// The measurement name of event type `measurement` where it is not the type's name.
    fn measurement_key(&self, measurement: &str) -> Option<String> {
        lock(&self.inner).key_of(measurement).map(str::to_string)
    }

    /// `[(column, type)]` of `measurement` in stored order, or None.
    fn columns(&self, measurement: &str) -> Option<Vec<(String, &'static str)>> {
        lock(&self.inner).get(measurement).map(|m| m.columns.iter().map(|(n, t)| (n.clone(), t.name())).collect())
    }

    /// `{column: field key}` of `measurement`'s columns whose field key is not their name
    /// (`a.b` stored as `a_b`); empty for an unknown measurement.
    fn keys(&self, measurement: &str) -> HashMap<String, String> {
        lock(&self.inner).get(measurement).map_or_else(HashMap::new, |m| {
            m.columns.iter().zip(&m.keys).filter_map(|((n, _), k)| Some((n.clone(), k.clone()?))).collect()
        })
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

/// Per-producer sequence numbers of one trace (the store's writer owns one and seeds it).
#[pyclass(module = "tracehouse._core", name = "SeqCounters", frozen)]
pub struct PySeqCounters {
    pub(crate) inner: Mutex<SeqCounters>,
}

#[pymethods]
impl PySeqCounters {
    #[new]
    fn new() -> Self {
        Self { inner: Mutex::new(SeqCounters::new()) }
    }

    /// Make each producer continue at least at its number: `{producer: next}`.
    fn seed(&self, next: HashMap<i32, i64>) {
        let mut c = lock(&self.inner);
        for (p, n) in next {
            c.seed(p, n);
        }
    }

    /// Sequence numbers (a pyarrow int64 array) for rows of the given producers (a pyarrow
    /// int32 array without nulls), in row order.
    fn assign<'py>(&self, py: Python<'py>, producer: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let p = primitive_from_pyarrow::<Int32Type>(producer, "producer")?;
        let numbers = py.detach(|| lock(&self.inner).assign(p.values()));
        vec_to_pyarrow::<Int64Type>(py, numbers)
    }
}

/// A request body as handed over: read in place (HTTP front end) or Python bytes.
pub(super) enum Held<'py> {
    Native(Bound<'py, PyBody>),
    Bytes(PyBackedBytes),
}

impl<'py> Held<'py> {
    /// Holds `body`: a `_core.Body` or anything bytes-like.
    pub(super) fn of(body: &Bound<'py, PyAny>) -> PyResult<Self> {
        Ok(match body.cast::<PyBody>() {
            Ok(b) => Held::Native(b.clone()),
            Err(_) => Held::Bytes(body.extract()?),
        })
    }

    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            Held::Native(b) => &b.get().data,
            Held::Bytes(b) => b,
        }
    }
}

/// Decode several bodies (`[(body, precision, default_ts, first_line)]`) into one
/// pyarrow.RecordBatch per measurement (numbered from `seq`, a `SeqCounters`, when given):
/// `{"batches": [(name, batch)], "bodies": [{"lines", "rows", "errors", "error_count",
/// "last_line", "rows_by_batch": [(batch index, rows)]}], "max_producer", "logged", "error"}`.
///
/// Given a `log` (the trace's `WalLog`, under its writer's lock) and `types` (event type ->
/// `WalType` of the trace's stored layouts), a round that changes no catalog row (every
/// producer id at most `registered_max`, every batch in its type's stored layout: no new
/// measurement, no new column) is also logged in the same call, the interpreter lock released
/// once: batch i as record `lsn + i`, then the fsync policy's step (`fsync`, `committer`), as
/// `WalLog.append` does. `logged`: the bytes of each logged batch's columns (None when nothing
/// was tried: the caller registers what is new and appends); `error`: (errno, message) of the
/// write that stopped the rest (the batches before it are logged).
#[pyfunction]
#[pyo3(signature = (items, schemas, producers, *, seq=None, max_line=1 << 20, max_producers=1_000_000, max_columns=1_000,
                    max_measurements=10_000, max_errors=100, log=None, types=None, registered_max=-1, lsn=0,
                    fsync="batch", committer=None))]
#[allow(clippy::too_many_arguments)]
fn decode_lines_many<'py>(
    py: Python<'py>,
    items: Vec<(Bound<'py, PyAny>, String, i64, u64)>,
    schemas: &Bound<'py, PySchemas>,
    producers: &Bound<'py, PyProducers>,
    seq: Option<&Bound<'py, PySeqCounters>>,
    max_line: usize,
    max_producers: usize,
    max_columns: usize,
    max_measurements: usize,
    max_errors: usize,
    log: Option<&Bound<'py, PyWalLog>>,
    types: Option<&Bound<'py, PyDict>>,
    registered_max: i64,
    lsn: u64,
    fsync: &str,
    committer: Option<&Bound<'py, PyGroupCommit>>,
) -> PyResult<Bound<'py, PyDict>> {
    let limits = Limits { max_line, max_producers, max_columns, max_measurements, max_errors };
    let mut held = Vec::with_capacity(items.len());
    let mut how = Vec::with_capacity(items.len());
    for (body, precision, default_ts, first_line) in items {
        let p = Precision::parse(&precision)
            .ok_or_else(|| PyValueError::new_err(format!("precision {precision:?}: expected ns, us, ms or s")))?;
        held.push(Held::of(&body)?);
        how.push((p, default_ts, first_line));
    }
    let inputs: Vec<Input<'_>> = held
        .iter()
        .zip(&how)
        .map(|(h, &(precision, default_ts, first_line))| Input { body: h.bytes(), first_line, precision, default_ts })
        .collect();
    let s = schemas.get();
    let p = producers.get();
    let counters = seq.map(|c| &c.get().inner);
    let stored = super::wal::stored_layouts(types)?;
    let target: Option<(&PyWalLog, Vec<(&str, &PyWalType)>)> =
        log.map(|l| (l.get(), stored.iter().map(|(k, v)| (k.as_str(), v.get())).collect()));
    let always = if target.is_some() { fsync_always(fsync)? } else { false };
    let committer = committer.map(|c| c.get());
    // Small rounds keep the interpreter lock (`detach_if`): the decoder's locks (schemas,
    // producers, counters) are never held by a thread waiting for it. A round that may be
    // logged never does: a write to a file whose fdatasync is under way can sleep (py/wal.rs).
    let big = target.is_some() || inputs.iter().map(|i| i.body.len()).sum::<usize>() >= super::DETACH_BYTES;
    let (decoded, logged) = super::detach_if(py, big, || {
        let decoded = lineproto::decode_many(&inputs, &s.inner, &p.inner, counters, &limits);
        let logged = target.as_ref().and_then(|(log, types)| {
            if i64::from(decoded.max_producer) > registered_max {
                return None; // new producers: registered in the catalog first
            }
            let mut parts = Vec::with_capacity(decoded.batches.len());
            for (name, batch) in &decoded.batches {
                let wt = types.iter().find(|(n, _)| n == name)?.1; // a new measurement
                if !is_stored(wt, batch) {
                    return None; // a new column (or a batch the store must conform)
                }
                parts.push((wt, batch.clone()));
            }
            Some(log_stored(log, &parts, lsn, always, committer))
        });
        (decoded, logged)
    });
    let out = PyDict::new(py);
    let batches = PyList::empty(py);
    for (name, batch) in decoded.batches {
        let pa_schema = s.pyarrow_schema(py, &batch.schema())?;
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
    let (sizes, error) = match logged {
        Some((sizes, error)) => (Some(sizes), error.map(|e| (e.errno, e.message))),
        None => (None, None),
    };
    out.set_item("logged", sizes)?;
    out.set_item("error", error)?;
    Ok(out)
}

/// Adds the line-protocol names to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySchemas>()?;
    m.add_class::<PyProducers>()?;
    m.add_class::<PySeqCounters>()?;
    m.add_function(wrap_pyfunction!(decode_lines_many, m)?)?;
    Ok(())
}
