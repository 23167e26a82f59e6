//! The per-segment steps of a checkpoint that read whole columns: the row order of the
//! rows to write (`segment_order`) and the range of their timestamps (`int_range`).
//!
//! Why native: a checkpoint's tail is hundreds of chunks (one per appended batch). The
//! numpy versions made a few calls per chunk, and numpy lets go of the interpreter lock in
//! each: the checkpoint threads passed the lock back and forth with the appending thread
//! hundreds of times per checkpoint, and each pass parked one of them on a futex while a
//! core went idle. Measured 2026-11-26 (perf `sched:sched_switch`, streaming 10M TOD events):
//! the per-chunk `np.all`, `min` and `max` and the per-batch import in `write_int_parquet`
//! were 26 % of the process's context switches. Here each step is one call that reads the
//! table as one Arrow C stream (pyarrow reads it in C++, no Python per chunk) with the lock
//! released throughout. The switches fell from ~11K to ~2K per run. Streaming 10M TOD
//! events (/tmp/ib/prof.py, 4 alternating rounds of 2 runs, load 1.5-2.0): base 1.26-1.44 s and
//! 1.70-1.90 CPU-s, native 0.94-1.06 s and 1.33-1.47 CPU-s; `bench ingest` ×raw in 3 alternating
//! pairs: base 0.48, 0.48, 0.61, native 0.65, 0.73, 0.63.

use arrow_array::cast::AsArray;
use arrow_array::ffi_stream::RecordBatchStreamReader;
use arrow_array::types::{Int32Type, Int64Type, UInt32Type};
use arrow_array::{Array, RecordBatchReader};
use arrow_pyarrow::FromPyArrow;
use arrow_schema::DataType;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use super::arrow::vec_to_pyarrow;
use crate::order;

/// Every column of `table` (anything with `__arrow_c_stream__`) as one `Vec<i64>` per
/// column: int32/int64 columns without nulls only.
fn int_columns(py: Python<'_>, table: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<Vec<i64>>> {
    let reader = RecordBatchStreamReader::from_pyarrow_bound(table)?;
    let schema = reader.schema();
    for f in schema.fields() {
        if !matches!(f.data_type(), DataType::Int64 | DataType::Int32) {
            return Err(PyTypeError::new_err(format!(
                "{what}: column {} is {}, expected int32/int64",
                f.name(),
                f.data_type()
            )));
        }
    }
    let width = schema.fields().len();
    let out = py.detach(move || -> Result<Vec<Vec<i64>>, String> {
        let mut cols: Vec<Vec<i64>> = vec![Vec::new(); width];
        for batch in reader {
            let batch = batch.map_err(|e| e.to_string())?;
            for (col, arr) in cols.iter_mut().zip(batch.columns()) {
                if arr.null_count() != 0 {
                    return Err(format!("{} null values (expected none)", arr.null_count()));
                }
                match arr.data_type() {
                    DataType::Int64 => col.extend_from_slice(arr.as_primitive::<Int64Type>().values()),
                    _ => col.extend(arr.as_primitive::<Int32Type>().values().iter().map(|&v| v as i64)),
                }
            }
        }
        Ok(cols)
    });
    out.map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
}

/// The stable order (uint32 row numbers) of the rows of `keys` by its columns, first most
/// significant; None when the rows are in that order already.
#[pyfunction]
fn segment_order<'py>(py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
    let cols = int_columns(py, keys, "segment_order")?;
    if cols.first().map_or(0, |c| c.len()) > order::MAX_ROWS {
        return Err(PyValueError::new_err("segment_order: more than 2^32 - 1 rows"));
    }
    let out = py.detach(move || {
        let slices: Vec<&[i64]> = cols.iter().map(|c| c.as_slice()).collect();
        (!order::is_ordered(&slices)).then(|| order::stable_order(&slices))
    });
    out.map(|o| vec_to_pyarrow::<UInt32Type>(py, o)).transpose()
}

/// `(min, max)` of the one column of `table`, None when it has no rows.
#[pyfunction]
fn int_range(py: Python<'_>, table: &Bound<'_, PyAny>) -> PyResult<Option<(i64, i64)>> {
    let cols = int_columns(py, table, "int_range")?;
    let [col] = cols.as_slice() else {
        return Err(PyValueError::new_err(format!("int_range: expected one column, got {}", cols.len())));
    };
    Ok(py.detach(|| {
        let lo = col.iter().min()?;
        Some((*lo, *col.iter().max()?))
    }))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(segment_order, m)?)?;
    m.add_function(wrap_pyfunction!(int_range, m)?)
}
