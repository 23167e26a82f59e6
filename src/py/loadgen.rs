//! Python face of the load generator: `_core.run_load(...)` and the workload's names.
//!
//! Owns argument checking and the conversion of a [`Report`] to a dict. The run holds no
//! GIL; Ctrl-C is noticed by a watcher that polls Python's signal state every 100 ms.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::workload::loadgen::{
    self, Config, GenSpec, Proto, Workload, CPU_FIELDS, CPU_TAGS, QOS_ID_PARAMS, QOS_RESULTS,
};

/// Run write load against a server; returns what was sent, acknowledged and how fast.
#[pyfunction]
#[pyo3(signature = (*, workload="qos", protocol="http", host="127.0.0.1", port=8086, path="/api/v2/write?bucket=qos",
                    bucket="qos", token=None, agents=8, rows_per_batch=1000, interval_ms=0.0, duration_s=10.0,
                    batches_per_agent=0, seed=42, bodies=None, content_type="application/vnd.apache.arrow.stream",
                    ts_offsets=None))]
#[allow(clippy::too_many_arguments)]
fn run_load<'py>(
    py: Python<'py>,
    workload: &str,
    protocol: &str,
    host: &str,
    port: u16,
    path: &str,
    bucket: &str,
    token: Option<String>,
    agents: usize,
    rows_per_batch: usize,
    interval_ms: f64,
    duration_s: f64,
    batches_per_agent: u64,
    seed: u64,
    bodies: Option<Vec<Vec<u8>>>,
    content_type: &str,
    ts_offsets: Option<Vec<usize>>,
) -> PyResult<Bound<'py, PyDict>> {
    let workload = match workload {
        "qos" => Workload::Qos,
        "cpu" => Workload::Cpu,
        w => return Err(PyValueError::new_err(format!("workload {w:?}: expected qos or cpu"))),
    };
    let proto = match protocol {
        "http" => Proto::Http { path: path.to_string() },
        "tcp" => Proto::Tcp { acks: false, handshake: true, bucket: bucket.to_string() },
        "tcp-acks" => Proto::Tcp { acks: true, handshake: true, bucket: bucket.to_string() },
        "tcp-plain" => Proto::Tcp { acks: false, handshake: false, bucket: bucket.to_string() },
        "http-bodies" => {
            let bodies =
                bodies.filter(|b| !b.is_empty()).ok_or_else(|| PyValueError::new_err("http-bodies needs bodies"))?;
            if ts_offsets.as_ref().is_some_and(|o| o.len() != bodies.len()) {
                return Err(PyValueError::new_err("ts_offsets needs one offset per body"));
            }
            Proto::HttpBodies {
                path: path.to_string(),
                bodies: Arc::new(bodies),
                content_type: content_type.to_string(),
                ts_offsets: ts_offsets.map(Arc::new),
            }
        }
        p => {
            return Err(PyValueError::new_err(format!(
                "protocol {p:?}: expected http, tcp, tcp-acks, tcp-plain or http-bodies"
            )))
        }
    };
    if agents == 0 || rows_per_batch == 0 {
        return Err(PyValueError::new_err("agents and rows_per_batch must be at least 1"));
    }
    if duration_s.is_nan() || duration_s <= 0.0 {
        return Err(PyValueError::new_err("duration_s must be positive"));
    }
    let cfg = Config {
        workload,
        proto,
        host: host.to_string(),
        port,
        token,
        agents,
        rows_per_batch,
        interval_ms,
        duration_s,
        batches_per_agent,
        seed,
        pool: 64,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let (stop2, done2) = (stop.clone(), done.clone());
    let worker = thread::spawn(move || {
        let r = loadgen::run(cfg, stop2);
        done2.store(true, Ordering::SeqCst);
        r
    });
    let mut interrupted = None;
    while !done.load(Ordering::SeqCst) {
        py.detach(|| thread::sleep(Duration::from_millis(100)));
        if let Err(e) = py.check_signals() {
            stop.store(true, Ordering::SeqCst);
            interrupted = Some(e);
        }
    }
    let rep = py.detach(|| worker.join()).map_err(|_| PyValueError::new_err("load generator panicked"))?;
    if let Some(e) = interrupted {
        return Err(e);
    }
    let out = PyDict::new(py);
    out.set_item("elapsed_s", rep.elapsed_s)?;
    out.set_item("rows_sent", rep.rows_sent)?;
    out.set_item("rows_acked", rep.rows_acked)?;
    out.set_item("batches_sent", rep.batches_sent)?;
    out.set_item("batches_acked", rep.batches_acked)?;
    out.set_item("errors", rep.errors)?;
    out.set_item("statuses", rep.statuses)?;
    out.set_item("error_samples", rep.error_samples)?;
    out.set_item("ack_us", rep.ack_us.to_vec())?;
    out.set_item("e2e_us", rep.e2e_us.to_vec())?;
    out.set_item("bytes_sent", rep.bytes_sent)?;
    Ok(out)
}

/// Adds the load generator's names to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run_load, m)?)?;
    m.add("QOS_ID_PARAMS", QOS_ID_PARAMS.to_vec())?;
    let results: Vec<(&str, &str, f64, f64)> = QOS_RESULTS
        .iter()
        .map(|(n, g)| match *g {
            GenSpec::F(lo, hi) => (*n, "float64", lo, hi),
            GenSpec::I(lo, hi) => (*n, "int64", lo as f64, hi as f64),
        })
        .collect();
    m.add("QOS_RESULT_PARAMS", results)?;
    m.add("CPU_TAGS", CPU_TAGS.to_vec())?;
    m.add("CPU_FIELDS", CPU_FIELDS.to_vec())?;
    Ok(())
}
