//! Arrow data across the Python boundary, both ways, without copying a buffer.
//!
//! Owns the one hot-path conversion of the crate, `RecordBatch` -> `pyarrow.RecordBatch`,
//! and the column conversions of the analyses: pyarrow arrays in (zero-copy, through
//! the C data interface) and owned `Vec`s out (their allocation becomes the buffer).
//!
//! Batches:
//! arrow-pyarrow's `RecordBatch::to_pyarrow` wraps every batch in a one-shot stream
//! reader (a workaround for apache/arrow#37669, which concerns struct arrays *with*
//! top-level nulls) and re-exports the schema each time. Our batches never have
//! top-level nulls and their schemas are fixed, so we export the batch as one
//! struct array and import it with `pyarrow.RecordBatch._import_from_c(ptr, schema)`
//! against a pyarrow `Schema` converted once and cached by the caller: one Python
//! call per batch instead of four, which matters at tens of thousands of batches.

use arrow_array::ffi::FFI_ArrowArray;
use arrow_array::types::ArrowPrimitiveType;
use arrow_array::{Array, BooleanArray, PrimitiveArray, RecordBatch, StructArray};
use arrow_buffer::ScalarBuffer;
use arrow_data::ArrayData;
use arrow_pyarrow::{FromPyArrowUnchecked, ToPyArrow};
use arrow_schema::Schema;
use pyo3::exceptions::{PyTypeError, PyValueError};
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

/// A pyarrow array (anything with `__arrow_c_array__`) as an arrow-rs primitive array,
/// without copying its buffers. `what` names the argument in errors; nulls are refused
/// (every column the analyses hand over is non-null by contract).
pub fn primitive_from_pyarrow<T: ArrowPrimitiveType>(
    obj: &Bound<'_, PyAny>,
    what: &str,
) -> PyResult<PrimitiveArray<T>> {
    // SAFETY: `from_pyarrow_bound_unchecked` imports through the Arrow C data interface;
    // `validate` below checks the buffers against the declared type and length (the
    // checked variant also scans every value, which costs ~1 ms per 10M int64s).
    let data = unsafe { ArrayData::from_pyarrow_bound_unchecked(obj) }
        .map_err(|e| PyTypeError::new_err(format!("{what}: expected a pyarrow array ({e})")))?;
    if data.data_type() != &T::DATA_TYPE {
        return Err(PyTypeError::new_err(format!(
            "{what}: expected {} values, got {}",
            T::DATA_TYPE,
            data.data_type()
        )));
    }
    data.validate().map_err(|e| PyValueError::new_err(format!("{what}: {e}")))?;
    if data.null_count() != 0 {
        return Err(PyValueError::new_err(format!("{what}: {} null values (expected none)", data.null_count())));
    }
    Ok(PrimitiveArray::<T>::from(data))
}

/// `values` as a pyarrow array of `T`, handing the Vec's allocation over without a copy.
pub fn vec_to_pyarrow<'py, T: ArrowPrimitiveType>(
    py: Python<'py>,
    values: Vec<T::Native>,
) -> PyResult<Bound<'py, PyAny>> {
    PrimitiveArray::<T>::new(ScalarBuffer::from(values), None).into_data().to_pyarrow(py)
}

/// `values` as a pyarrow boolean array.
pub fn bools_to_pyarrow<'py>(py: Python<'py>, values: &[bool]) -> PyResult<Bound<'py, PyAny>> {
    BooleanArray::from(values.to_vec()).into_data().to_pyarrow(py)
}
