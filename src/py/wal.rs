//! Python face of the WAL format: the append path (`_core.WalType`, `_core.WalRecord`,
//! `_core.wal_write`) and the read path (`_core.wal_scan`, `WAL_MAGIC`).
//!
//! Owns argument conversion only (the logic is `src/store/wal.rs` and `src/store/walscan.rs`). The store's
//! `TraceWriter` keeps one `WalType` per event type (its stored schema, converted once) and
//! per append calls `prepare` (conform fast path, seq, the framed record; the checksum runs
//! with the GIL released) and then, under its lock, `wal_write` (one `writev`, GIL released).

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_pyarrow::{FromPyArrow, FromPyArrowUnchecked, ToPyArrow};
use arrow_schema::{Schema, SchemaRef};
use pyo3::exceptions::{PyOSError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyList, PyTuple, PyType};

use super::arrow::batch_to_pyarrow;
use super::lineproto::PySeqCounters;
use crate::mutex::lock;
use crate::store::wal::{self as walrec, Layout, Record};
use crate::store::walscan::{self, Then};

/// The stored layout of one event type, as the WAL append path checks and writes it.
#[pyclass(module = "tracehouse._core", name = "WalType", frozen)]
pub struct PyWalType {
    name: Vec<u8>,
    target: SchemaRef,
    pa_target: Py<PyAny>,
    schema_msg: Buffer,
}

/// One framed WAL record, ready for `wal_write` (holds the batches' buffers, not copies).
#[pyclass(module = "tracehouse._core", name = "WalRecord", frozen)]
pub struct PyWalRecord {
    inner: Record,
}

#[pymethods]
impl PyWalRecord {
    /// Bytes of the record, frame included.
    #[getter]
    fn size(&self) -> usize {
        self.inner.size()
    }

    /// The record as bytes (a copy: tests and the crash tests' torn writes).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_vec())
    }
}

#[pymethods]
impl PyWalType {
    /// Event type `name` stored as `schema` (a pyarrow.Schema: names, types, nullability).
    #[new]
    fn new(name: &str, schema: &Bound<'_, PyAny>) -> PyResult<Self> {
        let target = Arc::new(Schema::from_pyarrow_bound(schema)?);
        let msg = schema.call_method0(intern!(schema.py(), "serialize"))?;
        let msg: Vec<u8> = msg.call_method0(intern!(schema.py(), "to_pybytes"))?.extract()?;
        Ok(Self {
            name: name.as_bytes().to_vec(),
            target,
            pa_target: schema.clone().unbind(),
            schema_msg: Buffer::from(msg),
        })
    }

    /// The stored schema (the pyarrow.Schema given).
    #[getter]
    fn schema(&self, py: Python<'_>) -> Py<PyAny> {
        self.pa_target.clone_ref(py)
    }

    /// Checks `batches` (pyarrow RecordBatches) against the stored layout and frames them.
    ///
    /// Returns None when one is not in the stored layout (or that layout without `seq`): the
    /// caller conforms them first (nothing was numbered). Otherwise `(stored, record, nbytes)`:
    /// the batches as stored (the same objects, or new ones with `seq` numbered by `seq`, a
    /// `SeqCounters`, needed then), with `encode` their WAL record (else None), and the bytes
    /// of their columns (what checkpoints are sized by).
    #[pyo3(signature = (batches, seq=None, encode=true))]
    fn prepare<'py>(
        &self,
        py: Python<'py>,
        batches: &Bound<'py, PyList>,
        seq: Option<&Bound<'py, PySeqCounters>>,
        encode: bool,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let mut imported = Vec::with_capacity(batches.len());
        let mut layouts = Vec::with_capacity(batches.len());
        for b in batches.iter() {
            // SAFETY: the C data interface import; `validate` below checks buffer sizes against
            // the declared types and lengths (the checked import also scans every string).
            let batch = unsafe { RecordBatch::from_pyarrow_bound_unchecked(&b) }
                .map_err(|e| PyTypeError::new_err(format!("expected a pyarrow RecordBatch ({e})")))?;
            for c in batch.columns() {
                c.to_data().validate().map_err(|e| PyValueError::new_err(format!("invalid batch: {e}")))?;
            }
            let l = walrec::layout(&batch, &self.target);
            if l == Layout::Other {
                return Ok(None);
            }
            layouts.push(l);
            imported.push(batch);
        }
        let out = PyList::empty(py);
        if layouts.iter().any(|l| matches!(l, Layout::WithoutSeq(_))) {
            let seq = seq.ok_or_else(|| PyValueError::new_err("batches without seq need the trace's SeqCounters"))?;
            // The counters are locked without the GIL and no Python runs meanwhile: holding both
            // (or calling into Python with the lock held) deadlocked two appenders.
            let inner = &seq.get().inner;
            let target = &self.target;
            py.detach(|| {
                let mut counters = lock(inner);
                for (batch, l) in imported.iter_mut().zip(&layouts) {
                    if let Layout::WithoutSeq(at) = *l {
                        *batch = walrec::with_seq(batch, at, target, &mut counters)?;
                    }
                }
                Ok::<_, arrow_schema::ArrowError>(())
            })
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
            let pa_target = self.pa_target.bind(py);
            for (i, (batch, l)) in imported.iter().zip(&layouts).enumerate() {
                match l {
                    Layout::WithoutSeq(at) => {
                        out.append(with_seq_column(py, &batches.get_item(i)?, batch, *at, pa_target)?)?
                    }
                    _ => out.append(batches.get_item(i)?)?,
                }
            }
        } else {
            for b in batches.iter() {
                out.append(b)?;
            }
        }
        let nbytes: usize =
            imported.iter().flat_map(|b| b.columns()).map(|c| c.to_data().get_slice_memory_size().unwrap_or(0)).sum();
        let record = if encode {
            let msg = self.schema_msg.clone();
            let name = &self.name;
            let big = nbytes >= super::DETACH_BYTES; // a small record keeps the lock (`detach_if`)
            let rec = super::detach_if(py, big, || Record::encode(name, msg, &imported))
                .map_err(|e| PyValueError::new_err(format!("WAL record: {e}")))?;
            Some(Py::new(py, PyWalRecord { inner: rec })?.into_any())
        } else {
            None
        };
        let record = record.unwrap_or_else(|| py.None());
        let nbytes = nbytes.into_pyobject(py)?.into_any().unbind();
        Ok(Some(PyTuple::new(py, [out.into_any().unbind(), record, nbytes])?))
    }
}

/// The caller's pyarrow batch `orig` with the `seq` column of `numbered` (its copy numbered in
/// Rust) inserted at `at` (`RecordBatch.add_column`, field from `pa_target`): only the new
/// column crosses back to pyarrow.
///
/// Not the whole numbered batch (`batch_to_pyarrow`): then every column the tail keeps is a
/// pyarrow import of a Rust import of the caller's pyarrow array, and freeing it after its
/// checkpoint walks that chain with the interpreter lock held. Measured 2026-11-26
/// (/tmp/ib/relmicro.py: 600 50-column QoS batches read from IPC, through `prepare`): freeing
/// took 26-35 µs a batch, 3-5 µs now. (Rebuilding the batch with `RecordBatch.from_arrays` of
/// `orig.columns` freed as fast but cost the appender 160 µs a batch more; `add_column` ~8.)
fn with_seq_column<'py>(
    py: Python<'py>,
    orig: &Bound<'py, PyAny>,
    numbered: &RecordBatch,
    at: usize,
    pa_target: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    static RECORD_BATCH: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    if !orig.is_instance(RECORD_BATCH.import(py, "pyarrow", "RecordBatch")?)? {
        // (another library's batch, imported through `__arrow_c_array__`)
        return batch_to_pyarrow(py, numbered.clone(), pa_target);
    }
    let field = pa_target.call_method1(intern!(py, "field"), (at,))?;
    orig.call_method1(intern!(py, "add_column"), (at, field, numbered.column(at).to_data().to_pyarrow(py)?))
}

/// Writes `record` at byte `size` of the WAL file `fd` (where its records end); returns the new end.
/// On failure (OSError, ENOSPC for a short write) the file was cut back to `size`, unless
/// that failed too: the caller compares the file's size. `reserve_to` past `size`: the
/// file's blocks up to there are allocated first, its length kept (`walrec::reserve`).
#[pyfunction]
#[pyo3(signature = (fd, size, record, reserve_to=0))]
fn wal_write(py: Python<'_>, fd: i32, size: u64, record: &Bound<'_, PyWalRecord>, reserve_to: u64) -> PyResult<u64> {
    let r = record.get();
    // Always without the interpreter lock, however small: an append to a file whose
    // fdatasync is under way can sleep (measured: 540 MB of appends
    // 0.22-0.26 s alone, 0.34-0.40 s with an fdatasync every 5 ms beside them), and with the
    // lock held every Python thread would wait with it.
    py.detach(|| r.inner.write_reserving(fd, size, reserve_to)).map_err(|e| PyOSError::new_err((e.errno, e.message)))
}

/// Test hook (the crash tests): the `after`-th `wal_write` from now writes half its record's
/// payload (not its header, written last) and SIGKILLs the process. 0 disarms it.
#[pyfunction]
fn wal_failpoint(after: u64) {
    walrec::arm_failpoint(after);
}

/// One frame as `wal_scan` gives it: (offset, length, then, name, ipc, damage).
type FrameTuple = (u64, u32, u8, Option<String>, usize, Option<String>);

/// The frames of `data`, the bytes of a WAL file from byte `start` (0: the whole file; else a
/// record boundary an earlier scan ended at), walked with the interpreter lock released:
/// `(frames, end, error)` (`walscan::scan`). Each frame is `(offset, length, then, name, ipc,
/// damage)`: its header's byte in the file and its payload's length; what follows it (0 the
/// log's end, 1 an intact frame, 2 anything else); its event type name and the index in `data`
/// where its Arrow IPC stream begins (None and 0 when damaged); `damage` None, `"CRC mismatch"`,
/// or `"undecodable record: <why>"` (a payload without a readable name).
#[pyfunction]
#[pyo3(signature = (data, start=0))]
fn wal_scan(py: Python<'_>, data: &[u8], start: u64) -> (Vec<FrameTuple>, u64, Option<String>) {
    py.detach(|| {
        let s = walscan::scan(data, start);
        let frames = s
            .frames
            .iter()
            .map(|f| {
                let then = match f.then {
                    Then::End => 0,
                    Then::Record => 1,
                    Then::Other => 2,
                };
                if !f.crc_ok {
                    return (f.offset, f.len, then, None, 0, Some("CRC mismatch".to_string()));
                }
                match walscan::event_type(data, start, f) {
                    Ok((name, ipc)) => (f.offset, f.len, then, Some(name.to_string()), ipc, None),
                    Err(why) => (f.offset, f.len, then, None, 0, Some(format!("undecodable record: {why}"))),
                }
            })
            .collect();
        (frames, s.end, s.error)
    })
}

/// Adds the WAL names to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("WAL_MAGIC", PyBytes::new(m.py(), walscan::MAGIC))?;
    m.add("WAL_HEADER_BYTES", walscan::HEADER)?;
    m.add_function(wrap_pyfunction!(wal_scan, m)?)?;
    m.add_class::<PyWalType>()?;
    m.add_class::<PyWalRecord>()?;
    m.add_function(wrap_pyfunction!(wal_write, m)?)?;
    m.add_function(wrap_pyfunction!(wal_failpoint, m)?)?;
    Ok(())
}
