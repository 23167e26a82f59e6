//! Python face of the TOD workload generator: `_core.TodGenerator`,
//! `_core.TOD_EVENT_TYPES` and `_core.tod_schemas()`.
//!
//! Owns argument checking and the conversion of each `fill` to a dict of
//! `pyarrow.RecordBatch`. Generation runs with the GIL released, so a Python thread
//! writing the previous batches (the store's ingest) overlaps with it.

use pyo3::exceptions::{PyStopIteration, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};

use super::arrow::{batch_to_pyarrow, schema_to_pyarrow};
use crate::colpool::ColumnPool;
use crate::workload::tod::{self, TodBatch, TodConfig, EVENT_TYPES};

/// Default `max_events` of `next_batches` and of iteration.
const DEFAULT_MAX_EVENTS: usize = 65_536;
/// Events generated per GIL release inside one `next_batches` (about 20 ms of work).
const SLICE: usize = 1 << 20;

/// The four pyarrow schemas, converted once per interpreter.
fn pa_schemas(py: Python<'_>) -> PyResult<&[Py<PyAny>; 4]> {
    static SCHEMAS: PyOnceLock<[Py<PyAny>; 4]> = PyOnceLock::new();
    SCHEMAS.get_or_try_init(py, || {
        let one = |t: usize| schema_to_pyarrow(py, &tod::schema(t)).map(Bound::unbind);
        Ok([one(0)?, one(1)?, one(2)?, one(3)?])
    })
}

/// Deterministic generator of the TOD benchmark workload (seed 001).
#[pyclass(module = "tracehouse._core", name = "TodGenerator")]
pub struct PyTodGenerator {
    inner: tod::TodGenerator,
    /// Columns of batches the caller has dropped, reused for the next ones.
    pool: ColumnPool,
}

#[pymethods]
impl PyTodGenerator {
    #[new]
    #[pyo3(signature = (events=1_000_000, seed=42, threads=10, methods=1_000, fields=1_000, locals=50, objects=10_000, max_depth=10))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        events: u64,
        seed: u64,
        threads: u32,
        methods: u32,
        fields: u32,
        locals: u32,
        objects: u32,
        max_depth: u32,
    ) -> PyResult<Self> {
        let cfg = TodConfig { events, seed, threads, methods, fields, locals, objects, max_depth };
        let inner = tod::TodGenerator::new(cfg).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(Self { inner, pool: ColumnPool::new() })
    }

    /// Up to `max_events` next events as {event type: pyarrow.RecordBatch} (only the
    /// types that got rows, in TOD_EVENT_TYPES order), or None once exhausted.
    #[pyo3(signature = (max_events=DEFAULT_MAX_EVENTS))]
    fn next_batches<'py>(&mut self, py: Python<'py>, max_events: usize) -> PyResult<Option<Bound<'py, PyDict>>> {
        if max_events == 0 {
            return Err(PyValueError::new_err("max_events: expected at least 1"));
        }
        if self.inner.is_exhausted() {
            return Ok(None);
        }
        let room = (max_events as u64).min(self.inner.remaining_bound()) as usize;
        let mut batch = TodBatch::with_capacity_in(room, Some(&self.pool));
        // Slices of SLICE events without the GIL, checking for Ctrl-C in between, so a
        // huge `max_events` stays interruptible. A signal drops the partial batch; the
        // generator has moved on by those events.
        let mut filled = 0;
        while filled < max_events {
            let want = (max_events - filled).min(SLICE);
            let inner = &mut self.inner;
            let b = &mut batch;
            let n = py.detach(move || inner.fill(want, b));
            filled += n;
            if n < want {
                break;
            }
            if filled < max_events {
                py.check_signals()?;
            }
        }
        if batch.is_empty() {
            return Ok(None);
        }
        let schemas = pa_schemas(py)?;
        let out = PyDict::new(py);
        for (name, rb) in batch.into_record_batches_in(Some(&self.pool)) {
            let t = EVENT_TYPES.iter().position(|n| *n == name).expect("known event type");
            out.set_item(name, batch_to_pyarrow(py, rb, schemas[t].bind(py))?)?;
        }
        Ok(Some(out))
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.next_batches(py, DEFAULT_MAX_EVENTS)?.ok_or_else(|| PyStopIteration::new_err(()))
    }

    /// Events produced so far.
    #[getter]
    fn emitted(&self) -> u64 {
        self.inner.emitted()
    }

    /// Events requested (the total ends slightly above: open calls are exited).
    #[getter]
    fn events(&self) -> u64 {
        self.inner.config().events
    }

    /// True once every event has been produced.
    #[getter]
    fn exhausted(&self) -> bool {
        self.inner.is_exhausted()
    }

    fn __repr__(&self) -> String {
        let c = self.inner.config();
        format!(
            "TodGenerator(events={}, seed={}, threads={}, methods={}, fields={}, locals={}, objects={}, max_depth={}; emitted={})",
            c.events, c.seed, c.threads, c.methods, c.fields, c.locals, c.objects, c.max_depth, self.inner.emitted()
        )
    }
}

/// {event type: pyarrow.Schema} of the four TOD event types.
#[pyfunction]
fn tod_schemas(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    for (name, s) in EVENT_TYPES.iter().zip(pa_schemas(py)?) {
        out.set_item(name, s.bind(py))?;
    }
    Ok(out)
}

/// Adds the TOD names to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTodGenerator>()?;
    m.add("TOD_EVENT_TYPES", PyTuple::new(m.py(), EVENT_TYPES)?)?;
    m.add_function(wrap_pyfunction!(tod_schemas, m)?)?;
    Ok(())
}
