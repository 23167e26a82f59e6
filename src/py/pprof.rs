//! `pprof_encode(stacks, values, sample_types, program, time_nanos, duration_nanos)`: the
//! pprof exporter's encoder (`formats/pprof/mod.rs` [`encode`]) with the GIL released.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::formats::pprof::encode;

/// profile.proto bytes (not gzipped) of `stacks` (root first, `;`-joined) and their values.
#[pyfunction]
#[pyo3(signature = (stacks, values, sample_types, program, time_nanos = 0, duration_nanos = 0))]
fn pprof_encode<'py>(
    py: Python<'py>,
    stacks: Vec<String>,
    values: Vec<Vec<i64>>,
    sample_types: Vec<(String, String)>,
    program: String,
    time_nanos: i64,
    duration_nanos: i64,
) -> PyResult<Bound<'py, PyBytes>> {
    let out = py
        .detach(|| encode(&stacks, &values, &sample_types, &program, time_nanos, duration_nanos))
        .map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &out))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pprof_encode, m)?)
}
