//! Hands Arrow record batches to pyarrow without copying a buffer.
//!
//! Owns the one hot-path conversion of the crate: `RecordBatch` -> `pyarrow.RecordBatch`.
//! arrow-pyarrow's `RecordBatch::to_pyarrow` wraps every batch in a one-shot stream
//! reader (a workaround for apache/arrow#37669, which concerns struct arrays *with*
//! top-level nulls) and re-exports the schema each time. Our batches never have
//! top-level nulls and their schemas are fixed, so we export the batch as one
//! struct array and import it with `pyarrow.RecordBatch._import_from_c(ptr, schema)`
//! against a pyarrow `Schema` converted once and cached by the caller: one Python
//! call per batch instead of four, which matters at tens of thousands of batches.

use arrow_array::ffi::FFI_ArrowArray;
use arrow_array::{Array, RecordBatch, StructArray};
use arrow_pyarrow::ToPyArrow;
use arrow_schema::Schema;
use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// `schema` as a `pyarrow.Schema`.
pub fn schema_to_pyarrow<'py>(py: Python<'py>, schema: &Schema) -> PyResult<Bound<'py, PyAny>> {
    schema.to_pyarrow(py)
}

/// `batch` as a `pyarrow.RecordBatch`, given its schema already as a `pyarrow.Schema`
/// (`pa_schema` must describe `batch.schema()`; the import fails otherwise).
pub fn batch_to_pyarrow<'py>(
    py: Python<'py>,
    batch: RecordBatch,
    pa_schema: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    static RECORD_BATCH: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let cls = RECORD_BATCH.import(py, "pyarrow", "RecordBatch")?;
    let data = StructArray::from(batch).into_data();
    if data.null_count() != 0 {
        return Err(PyValueError::new_err("record batch export: struct array with top-level nulls"));
    }
    // pyarrow moves the array out of `ffi` (leaving its release callback null); if the
    // call fails before that, dropping `ffi` releases the buffers on our side.
    let ffi = FFI_ArrowArray::new(&data);
    cls.call_method1(intern!(py, "_import_from_c"), (&raw const ffi as usize, pa_schema))
}
