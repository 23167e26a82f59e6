//! Python face of the Chrome JSON writer: `_core.ChromeWriter` (the parser is a
//! `_core.NativeParser("chrome")`, `py/parser.rs`).
//!
//! Owns argument checking and the conversions: batches in as `pyarrow.RecordBatch`, JSON text
//! out as `bytes`. Encoding runs with the GIL released.

use arrow_array::RecordBatch;
use arrow_pyarrow::FromPyArrow;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::formats::chrome::export::ChromeWriter;

/// Encoder of record batches as Chrome JSON events (see `src/formats/chrome/export.rs` for the
/// column roles).
#[pyclass(module = "tracehouse._core", name = "ChromeWriter")]
pub struct PyChromeWriter {
    inner: ChromeWriter,
}

#[pymethods]
impl PyChromeWriter {
    #[new]
    #[pyo3(signature = (producers, first=true))]
    fn new(producers: Vec<(i32, String, String)>, first: bool) -> Self {
        Self { inner: ChromeWriter::new(producers, first) }
    }

    /// The events of `batch` as JSON text (each preceded by its separator).
    fn encode<'py>(
        &mut self,
        py: Python<'py>,
        batch: &Bound<'py, PyAny>,
        ph: &str,
        name: &str,
        cat: &str,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let rb = RecordBatch::from_pyarrow_bound(batch)?;
        let inner = &mut self.inner;
        let out = py.detach(move || {
            let mut out = Vec::with_capacity(rb.num_rows() * 160);
            inner.encode(&rb, ph, name, cat, &mut out).map(|_| out)
        });
        let out = out.map_err(PyValueError::new_err)?;
        Ok(PyBytes::new(py, &out))
    }

    /// The text that closes the last event (a counter event waits for more series); call
    /// once after the last batch.
    fn finish<'py>(&mut self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let mut out = Vec::new();
        self.inner.finish(&mut out);
        PyBytes::new(py, &out)
    }

    /// Events written so far.
    #[getter]
    fn events(&self) -> u64 {
        self.inner.events
    }
}

/// Adds the Chrome names to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyChromeWriter>()?;
    Ok(())
}
