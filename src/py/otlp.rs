//! Python face of the OTLP decoder (`formats/otlp`): `_core.OtlpProducers` (a store trace's
//! producer tree, kept by the server across requests), `_core.decode_otlp` (one request body
//! into pyarrow batches, with the GIL released for big bodies), `_core.decode_otlp_many` (the
//! requests of one server round into one batch per event type, logged to the WAL in the same
//! call when they add no producer) and the answers' bodies (`_core.otlp_response`,
//! `_core.otlp_status`).

use std::collections::HashMap;
use std::sync::Mutex;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use super::commit::PyGroupCommit;
use super::driver::{batches_to_py, producer_rows};
use super::lineproto::{Held, PySeqCounters};
use super::wal::{fsync_always, is_stored, log_stored, PyWalLog, PyWalType};
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
        let outcome = d.request(sig, bytes, json, &mut lock(&p.inner), seq)?;
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

/// Decode the OTLP/HTTP requests of one server round (`items`: `[(body, signal, json)]`) into
/// one pyarrow batch per event type, numbered from `seq` (a `SeqCounters`) when given:
/// `{"batches": [(event type, batch)], "bodies": [{"accepted", "rejected", "error", "invalid",
/// "batches", "rows"}], "new_producers", "logged", "error"}`. Per body: `invalid` is why it is
/// not such a request (None when it is: the answer is then a 200, with a partial success when
/// items were refused, `error` the first reason), `batches` the indices of the batches holding
/// its rows, `rows` how many (spans, their events and links, log records, points).
///
/// Given a `log` (the trace's `WalLog`, under its writer's lock) and `types` (event type ->
/// `WalType` of its stored layouts), a round that made no producer (`new_producers` false: the
/// catalog has every id its rows name) and whose every batch is in its type's stored layout is
/// also logged in the same call, the interpreter lock released once: batch i as record
/// `lsn + i`, then the fsync policy's step (`fsync`, `committer`), as `decode_lines_many` does.
/// `logged`: the bytes of each logged batch's columns (None when nothing was tried: the caller
/// registers the producers and appends); `error`: (errno, message) of the write that stopped
/// the rest (the batches before it are logged).
#[pyfunction]
#[pyo3(signature = (items, producers, *, seq=None, log=None, types=None, lsn=0, fsync="batch", committer=None))]
#[allow(clippy::too_many_arguments)]
fn decode_otlp_many<'py>(
    py: Python<'py>,
    items: Vec<(Bound<'py, PyAny>, String, bool)>,
    producers: &Bound<'py, PyOtlpProducers>,
    seq: Option<&Bound<'py, PySeqCounters>>,
    log: Option<&Bound<'py, PyWalLog>>,
    types: Option<&Bound<'py, PyDict>>,
    lsn: u64,
    fsync: &str,
    committer: Option<&Bound<'py, PyGroupCommit>>,
) -> PyResult<Bound<'py, PyDict>> {
    let mut held = Vec::with_capacity(items.len());
    let mut how = Vec::with_capacity(items.len());
    for (body, signal, json) in items {
        let sig = Signal::parse(&signal)
            .ok_or_else(|| PyValueError::new_err(format!("signal {signal:?}: expected traces, logs or metrics")))?;
        held.push(Held::of(&body)?);
        how.push((sig, json));
    }
    let p = producers.get();
    let counters = seq.map(|c| &c.get().inner);
    let stored = super::wal::stored_layouts(types)?;
    let target: Option<(&PyWalLog, Vec<(&str, &PyWalType)>)> =
        log.map(|l| (l.get(), stored.iter().map(|(k, v)| (k.as_str(), v.get())).collect()));
    let always = if target.is_some() { fsync_always(fsync)? } else { false };
    let committer = committer.map(|c| c.get());
    // As decode_lines_many: a round that may be logged never keeps the interpreter lock (a
    // write to a file whose fdatasync is under way can sleep), a small one does.
    let inputs: Vec<&[u8]> = held.iter().map(|h| h.bytes()).collect();
    let big = target.is_some() || inputs.iter().map(|b| b.len()).sum::<usize>() >= super::DETACH_BYTES;
    let run = || {
        let mut local = SeqCounters::new();
        let mut guard = counters.map(lock);
        let seq = guard.as_deref_mut().unwrap_or(&mut local);
        let mut prods = lock(&p.inner);
        let mut d = Decoder::new(1024);
        let mut bodies = Vec::with_capacity(inputs.len());
        for (body, &(sig, json)) in inputs.iter().zip(&how) {
            let before = d.table_rows();
            let got = d.request(sig, body, json, &mut prods, seq);
            let after = d.table_rows();
            let grew: Vec<usize> = (0..before.len()).filter(|&i| after[i] > before[i]).collect();
            let rows: usize = after.iter().zip(before).map(|(a, b)| a - b).sum();
            bodies.push((got, grew, rows));
        }
        let new_producers = prods.has_new();
        drop(prods);
        let filled = d.table_rows();
        let batches = d.take();
        // table index -> batch index (`take` skips the empty tables)
        let mut at = [usize::MAX; 6];
        let mut n = 0;
        for (i, &rows) in filled.iter().enumerate() {
            if rows > 0 {
                at[i] = n;
                n += 1;
            }
        }
        let bodies: Vec<_> = bodies
            .into_iter()
            .map(|(got, grew, rows)| (got, grew.iter().map(|&t| at[t]).collect::<Vec<_>>(), rows))
            .collect();
        let logged = target.as_ref().and_then(|(log, types)| {
            if new_producers || batches.is_empty() {
                return None; // new producers: registered in the catalog first
            }
            let mut parts = Vec::with_capacity(batches.len());
            for (name, batch) in &batches {
                let wt = types.iter().find(|(n, _)| n == name)?.1;
                if !is_stored(wt, batch) {
                    return None; // a batch the store must conform first
                }
                parts.push((wt, batch.clone()));
            }
            Some(log_stored(log, &parts, lsn, always, committer))
        });
        (batches, bodies, new_producers, logged)
    };
    let (batches, bodies, new_producers, logged) = super::detach_if(py, big, run);
    let out = PyDict::new(py);
    let mut cache = lock(&p.schemas);
    out.set_item("batches", batches_to_py(py, batches, &mut cache)?)?;
    drop(cache);
    let list = PyList::empty(py);
    for (got, idx, rows) in bodies {
        let d = PyDict::new(py);
        match got {
            Ok(o) => {
                d.set_item("accepted", o.accepted)?;
                d.set_item("rejected", o.rejected)?;
                d.set_item("error", o.first_error)?;
                d.set_item("invalid", py.None())?;
            }
            Err(e) => {
                d.set_item("accepted", 0)?;
                d.set_item("rejected", 0)?;
                d.set_item("error", py.None())?;
                d.set_item("invalid", e)?;
            }
        }
        d.set_item("batches", idx)?;
        d.set_item("rows", rows)?;
        list.append(d)?;
    }
    out.set_item("bodies", list)?;
    out.set_item("new_producers", new_producers)?;
    let (sizes, error) = match logged {
        Some((sizes, error)) => (Some(sizes), error.map(|e| (e.errno, e.message))),
        None => (None, None),
    };
    out.set_item("logged", sizes)?;
    out.set_item("error", error)?;
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
    m.add_function(wrap_pyfunction!(decode_otlp_many, m)?)?;
    m.add_function(wrap_pyfunction!(otlp_response, m)?)?;
    m.add_function(wrap_pyfunction!(otlp_status, m)?)?;
    Ok(())
}
