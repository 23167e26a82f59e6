//! Python face of the OTLP decoder (`formats/otlp`): `_core.OtlpProducers` (a store trace's
//! producer tree, kept by the server across requests), `_core.decode_otlp` (one request body
//! into pyarrow batches, with the GIL released for big bodies) and the answers' bodies
//! (`_core.otlp_response`, `_core.otlp_status`).

use std::collections::HashMap;
use std::sync::Mutex;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use super::driver::{batches_to_py, producer_rows};
use super::lineproto::{Held, PySeqCounters};
use crate::formats::otlp::{self, Decoder, Producers, Signal};
use crate::mutex::lock;
use crate::store::seqnum::SeqCounters;

/// The producer tree of one store trace (service → host → process → thread).
#[pyclass(module = "tracehouse._core", name = "OtlpProducers", frozen)]
pub struct PyOtlpProducers {
    inner: Mutex<Producers>,
    schemas: Mutex<HashMap<(String, usize), Py<PyAny>>>,
}

#[pymethods]
impl PyOtlpProducers {
    #[new]
    #[pyo3(signature = (next_id=0, max=1_000_000))]
    fn new(next_id: i32, max: usize) -> Self {
        let mut p = Producers::new(next_id);
        p.max = max;
        Self { inner: Mutex::new(p), schemas: Mutex::new(HashMap::new()) }
    }

    /// Declare a producer the store already has: its kind (service, host, process, thread)
    /// and key (service.name, host.name, process.pid, thread.id).
    #[pyo3(signature = (id, parent, kind, key))]
    fn declare(&self, id: i32, parent: Option<i32>, kind: &str, key: &str) {
        lock(&self.inner).declare(id, parent, kind, key);
    }

    /// Producers made since the last call, as `Store.add_producers` takes them.
    fn take_new<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let rows = lock(&self.inner).take_new();
        producer_rows(py, rows)
    }

    /// The id the next new producer gets.
    #[getter]
    fn next_id(&self) -> i32 {
        lock(&self.inner).next_id()
    }

    fn __len__(&self) -> usize {
        lock(&self.inner).len()
    }
}

/// Decode one OTLP/HTTP request body (`signal`: "traces", "logs" or "metrics"; `json`: the JSON
/// encoding, else protobuf) into `{"batches": [(event type, pyarrow.RecordBatch)],
/// "accepted", "rejected", "error"}` (error: why the first refused item was refused, or None),
/// numbering rows from `seq` (a `SeqCounters`) when given. ValueError when the body is not
/// such a request (the answer is a 400).
#[pyfunction]
#[pyo3(signature = (body, signal, producers, *, json=false, seq=None))]
fn decode_otlp<'py>(
    py: Python<'py>,
    body: &Bound<'py, PyAny>,
    signal: &str,
    producers: &Bound<'py, PyOtlpProducers>,
    json: bool,
    seq: Option<&Bound<'py, PySeqCounters>>,
) -> PyResult<Bound<'py, PyDict>> {
    let sig = Signal::parse(signal)
        .ok_or_else(|| PyValueError::new_err(format!("signal {signal:?}: expected traces, logs or metrics")))?;
    let held = Held::of(body)?;
    let bytes = held.bytes();
    let p = producers.get();
    let counters = seq.map(|c| &c.get().inner);
    let big = bytes.len() >= super::DETACH_BYTES;
    let run = || -> Result<(Vec<(String, arrow_array::RecordBatch)>, otlp::Outcome), String> {
        let mut local = SeqCounters::new();
        let mut guard = counters.map(lock);
        let seq = guard.as_deref_mut().unwrap_or(&mut local);
        let mut d = Decoder::new(1024);
        let outcome = match sig {
            Signal::Traces => {
                let req = otlp::decode_traces(bytes, json)?;
                d.traces(&req, &mut lock(&p.inner), seq)
            }
            Signal::Logs => {
                let req = otlp::decode_logs(bytes, json)?;
                d.logs(&req, &mut lock(&p.inner), seq)
            }
            Signal::Metrics => {
                let req = otlp::decode_metrics(bytes, json)?;
                d.metrics(&req, &mut lock(&p.inner), seq)
            }
        };
        Ok((d.take(), outcome))
    };
    let (batches, outcome) = super::detach_if(py, big, run).map_err(PyValueError::new_err)?;
    let out = PyDict::new(py);
    let mut cache = lock(&p.schemas);
    out.set_item("batches", batches_to_py(py, batches, &mut cache)?)?;
    out.set_item("accepted", outcome.accepted)?;
    out.set_item("rejected", outcome.rejected)?;
    out.set_item("error", outcome.first_error)?;
    Ok(out)
}

/// The body of an OTLP/HTTP success answer (`Export*ServiceResponse`), with a partial success
/// when `rejected` > 0 or `message` is not empty; JSON when `json`, else protobuf.
#[pyfunction]
#[pyo3(signature = (signal, rejected=0, message="", *, json=false))]
fn otlp_response<'py>(
    py: Python<'py>,
    signal: &str,
    rejected: u64,
    message: &str,
    json: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let sig = Signal::parse(signal)
        .ok_or_else(|| PyValueError::new_err(format!("signal {signal:?}: expected traces, logs or metrics")))?;
    Ok(PyBytes::new(py, &otlp::response(sig, rejected, message, json)))
}

/// The body of an OTLP/HTTP error answer (`google.rpc.Status` with gRPC code `code`).
#[pyfunction]
#[pyo3(signature = (code, message, *, json=false))]
fn otlp_status<'py>(py: Python<'py>, code: i32, message: &str, json: bool) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &otlp::status(code, message, json))
}

/// Adds the OTLP names to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyOtlpProducers>()?;
    m.add_function(wrap_pyfunction!(decode_otlp, m)?)?;
    m.add_function(wrap_pyfunction!(otlp_response, m)?)?;
    m.add_function(wrap_pyfunction!(otlp_status, m)?)?;
    Ok(())
}
