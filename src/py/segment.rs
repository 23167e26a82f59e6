//! The per-segment steps of a checkpoint that read whole columns: the row order of the
//! rows to write (`segment_order`) and the range of their timestamps (`int_range`); and
//! `WriteBehind`, the thread settling a segment file while parquet-cpp writes it
//! ([`crate::store::writeback`] says why).
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
use arrow_array::{Array, RecordBatch, RecordBatchReader};
use arrow_pyarrow::FromPyArrow;
use arrow_schema::DataType;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use super::arrow::vec_to_pyarrow;
use crate::store::order;

/// The batches of `table` (anything with `__arrow_c_stream__`, read with the interpreter lock
/// released): int32/int64 columns without nulls only.
fn int_batches(py: Python<'_>, table: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<RecordBatch>> {
    let reader = RecordBatchStreamReader::from_pyarrow_bound(table)?;
    for f in reader.schema().fields() {
        if !matches!(f.data_type(), DataType::Int64 | DataType::Int32) {
            return Err(PyTypeError::new_err(format!(
                "{what}: column {} is {}, expected int32/int64",
                f.name(),
                f.data_type()
            )));
        }
    }
    let out = py.detach(move || -> Result<Vec<RecordBatch>, String> {
        let batches = reader.collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
        match batches.iter().flat_map(|b| b.columns()).map(|c| c.null_count()).sum::<usize>() {
            0 => Ok(batches),
            n => Err(format!("{n} null values (expected none)")),
        }
    });
    out.map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
}

/// One int32/int64 column of a batch, read as i64 (no copy).
enum Ints<'a> {
    I64(&'a [i64]),
    I32(&'a [i32]),
}

impl<'a> Ints<'a> {
    fn of(col: &'a dyn Array) -> Self {
        match col.data_type() {
            DataType::Int64 => Ints::I64(col.as_primitive::<Int64Type>().values()),
            _ => Ints::I32(col.as_primitive::<Int32Type>().values()),
        }
    }

    fn get(&self, i: usize) -> i64 {
        match self {
            Ints::I64(v) => v[i],
            Ints::I32(v) => v[i] as i64,
        }
    }

    fn append_to(&self, out: &mut Vec<i64>) {
        match self {
            Ints::I64(v) => out.extend_from_slice(v),
            Ints::I32(v) => out.extend(v.iter().map(|&x| x as i64)),
        }
    }
}

/// Whether the rows of `batches`, in turn, are ordered by their columns (first most
/// significant), read in place: an ordered checkpoint (an import's always is) is not copied.
fn batches_ordered(batches: &[RecordBatch]) -> bool {
    let mut prev: Option<Vec<i64>> = None; // the last row of the batch before
    for b in batches.iter().filter(|b| b.num_rows() > 0) {
        let cols: Vec<Ints> = b.columns().iter().map(|c| Ints::of(c.as_ref())).collect();
        let row = |i: usize| cols.iter().map(move |c| c.get(i));
        if prev.as_ref().is_some_and(|p| p.iter().copied().gt(row(0))) {
            return false;
        }
        let ordered = match cols.as_slice() {
            [Ints::I64(ts)] => ts.windows(2).all(|w| w[0] <= w[1]), // the usual key, ts alone
            _ => (1..b.num_rows()).all(|i| row(i - 1).le(row(i))),  // lexicographic (Iterator::le)
        };
        if !ordered {
            return false;
        }
        prev = Some(row(b.num_rows() - 1).collect());
    }
    true
}

/// The stable order (uint32 row numbers) of the rows of `keys` by its columns, first most
/// significant; None when the rows are in that order already.
#[pyfunction]
fn segment_order<'py>(py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
    let batches = int_batches(py, keys, "segment_order")?;
    if batches.iter().map(|b| b.num_rows()).sum::<usize>() > order::MAX_ROWS {
        return Err(PyValueError::new_err("segment_order: more than 2^32 - 1 rows"));
    }
    let out = py.detach(move || {
        if batches_ordered(&batches) {
            return None;
        }
        let width = batches.first().map_or(0, |b| b.num_columns());
        let mut cols: Vec<Vec<i64>> = vec![Vec::new(); width];
        for b in &batches {
            for (col, arr) in cols.iter_mut().zip(b.columns()) {
                Ints::of(arr.as_ref()).append_to(col);
            }
        }
        let slices: Vec<&[i64]> = cols.iter().map(|c| c.as_slice()).collect();
        Some(order::stable_order(&slices))
    });
    out.map(|o| vec_to_pyarrow::<UInt32Type>(py, o)).transpose()
}

/// `(min, max)` of the one column of `table`, None when it has no rows.
#[pyfunction]
fn int_range(py: Python<'_>, table: &Bound<'_, PyAny>) -> PyResult<Option<(i64, i64)>> {
    let batches = int_batches(py, table, "int_range")?;
    if let Some(b) = batches.first().filter(|b| b.num_columns() != 1) {
        return Err(PyValueError::new_err(format!("int_range: expected one column, got {}", b.num_columns())));
    }
    Ok(py.detach(move || {
        let mut out: Option<(i64, i64)> = None;
        for b in &batches {
            let (lo, hi) = match Ints::of(b.column(0).as_ref()) {
                Ints::I64(v) => (v.iter().min().copied(), v.iter().max().copied()),
                Ints::I32(v) => (v.iter().min().map(|&x| x as i64), v.iter().max().map(|&x| x as i64)),
            };
            if let (Some(lo), Some(hi)) = (lo, hi) {
                out = Some(out.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
            }
        }
        out
    }))
}

/// `with WriteBehind(fd):` settles the file `fd` refers to a step at a time while another
/// writer (parquet-cpp) writes it; leaving the block stops it (the caller's fsync follows).
#[pyclass(module = "tracehouse._core", name = "WriteBehind")]
pub struct PyWriteBehind {
    inner: Option<crate::store::writeback::Follower>,
    settled: u64,
}

#[pymethods]
impl PyWriteBehind {
    #[new]
    #[pyo3(signature = (fd, step = crate::store::writeback::STEP))]
    fn new(fd: i32, step: u64) -> PyResult<Self> {
        use std::os::fd::BorrowedFd;
        // SAFETY: `fd` is the caller's open descriptor, borrowed only to duplicate it.
        let own = unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()?;
        let inner = crate::store::writeback::Follower::start(std::fs::File::from(own), step)?;
        Ok(PyWriteBehind { inner: Some(inner), settled: 0 })
    }

    /// Bytes written back so far.
    #[getter]
    fn settled(&self) -> u64 {
        self.inner.as_ref().map_or(self.settled, |f| f.settled())
    }

    /// Stops (after settling what is due at the file's length now) and waits for the thread.
    fn finish(&mut self, py: Python<'_>) {
        if let Some(mut f) = self.inner.take() {
            py.detach(|| f.finish());
            self.settled = f.settled();
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.finish(py);
        false
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyWriteBehind>()?;
    m.add_function(wrap_pyfunction!(segment_order, m)?)?;
    m.add_function(wrap_pyfunction!(int_range, m)?)
}
