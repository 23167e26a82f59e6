//! Python face of the WAL format: the append path (`_core.WalType`, `_core.WalRecord`,
//! `_core.WalLog`) and the read path (`_core.wal_scan`, `WAL_MAGIC`).
//!
//! Owns argument conversion only (the logic is `src/store/wal.rs` and `src/store/walscan.rs`). The store's
//! `TraceWriter` keeps one `WalType` per event type (its stored schema, converted once) and
//! per append calls, under its lock, `WalLog.append`: conform fast path, seq, the framed
//! record, its write and the fsync policy's step, with the GIL released once for all of it
//! (`WalType.prepare` is the same without the write: fsync=off and tests).

use std::sync::{Arc, Mutex};

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
use super::commit::PyGroupCommit;
use super::lineproto::PySeqCounters;
use crate::mutex::lock;
use crate::store::seqnum::SeqCounters;
use crate::store::wal::{self as walrec, Layout, Record, WriteError};
use crate::store::wallog::{self, WalLog};
use crate::store::walscan::{self, Then};

/// The stored layout of one event type, as the WAL append path checks and writes it.
#[pyclass(module = "tracehouse._core", name = "WalType", frozen)]
pub struct PyWalType {
    name: Vec<u8>,
    target: SchemaRef,
    pa_target: Py<PyAny>,
    schema_msg: Buffer,
}

/// One framed WAL record, ready for `WalLog.write` (holds the batches' buffers, not copies).
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
        let Some(mut part) = self.import(batches)? else { return Ok(None) };
        let counters = self.counters_for(&part, seq)?;
        let big = part.nbytes >= super::DETACH_BYTES; // a small record keeps the lock (`detach_if`)
        let record = super::detach_if(py, big || counters.is_some(), || {
            self.number(&mut part, counters)?;
            encode.then(|| self.encode(&part)).transpose()
        })?;
        let record = match record {
            Some(rec) => Py::new(py, PyWalRecord { inner: rec })?.into_any(),
            None => py.None(),
        };
        let out = self.stored(py, batches, &part)?;
        let nbytes = part.nbytes.into_pyobject(py)?.into_any().unbind();
        Ok(Some(PyTuple::new(py, [out.into_any().unbind(), record, nbytes])?))
    }
}

/// Batches of one event type imported from pyarrow, with where each stands against the
/// stored layout and the bytes of their columns.
struct Part {
    batches: Vec<RecordBatch>,
    layouts: Vec<Layout>,
    nbytes: usize,
}

impl PyWalType {
    /// `batches` imported (GIL held: the C data interface), or None when one is not in the
    /// stored layout (nor that layout without `seq`).
    fn import(&self, batches: &Bound<'_, PyList>) -> PyResult<Option<Part>> {
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
        let nbytes: usize =
            imported.iter().flat_map(|b| b.columns()).map(|c| c.to_data().get_slice_memory_size().unwrap_or(0)).sum();
        Ok(Some(Part { batches: imported, layouts, nbytes }))
    }

    /// The counters `part` needs (Some when a batch has no `seq`), or the error saying they are missing.
    fn counters_for<'a>(
        &self,
        part: &Part,
        seq: Option<&'a Bound<'_, PySeqCounters>>,
    ) -> PyResult<Option<&'a Mutex<SeqCounters>>> {
        if !part.layouts.iter().any(|l| matches!(l, Layout::WithoutSeq(_))) {
            return Ok(None);
        }
        let seq = seq.ok_or_else(|| PyValueError::new_err("batches without seq need the trace's SeqCounters"))?;
        Ok(Some(&seq.get().inner))
    }

    /// Numbers the batches without `seq` (call without the GIL: the counters are locked
    /// without it and no Python runs meanwhile; holding both, or calling into Python with the
    /// lock held, deadlocked two appenders).
    fn number(&self, part: &mut Part, counters: Option<&Mutex<SeqCounters>>) -> PyResult<()> {
        let Some(counters) = counters else { return Ok(()) };
        let mut counters = lock(counters);
        for (batch, l) in part.batches.iter_mut().zip(&part.layouts) {
            if let Layout::WithoutSeq(at) = *l {
                *batch = walrec::with_seq(batch, at, &self.target, &mut counters)
                    .map_err(|e| PyValueError::new_err(e.to_string()))?;
            }
        }
        Ok(())
    }

    /// The WAL record of `part` (numbered).
    fn encode(&self, part: &Part) -> PyResult<Record> {
        Record::encode(&self.name, self.schema_msg.clone(), &part.batches)
            .map_err(|e| PyValueError::new_err(format!("WAL record: {e}")))
    }

    /// The batches as stored, as pyarrow: the caller's objects, with a `seq` column added to
    /// those that had none (`with_seq_column`).
    fn stored<'py>(&self, py: Python<'py>, batches: &Bound<'py, PyList>, part: &Part) -> PyResult<Bound<'py, PyList>> {
        if !part.layouts.iter().any(|l| matches!(l, Layout::WithoutSeq(_))) {
            return Ok(batches.clone());
        }
        let out = PyList::empty(py);
        let pa_target = self.pa_target.bind(py);
        for (i, (batch, l)) in part.batches.iter().zip(&part.layouts).enumerate() {
            match l {
                Layout::WithoutSeq(at) => {
                    out.append(with_seq_column(py, &batches.get_item(i)?, batch, *at, pa_target)?)?
                }
                _ => out.append(batches.get_item(i)?)?,
            }
        }
        Ok(out)
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

/// The current WAL file of a trace and its append policy (`src/store/wallog.rs`); appends
/// through [`PyWalLog::append`] are one native call each.
#[pyclass(module = "tracehouse._core", name = "WalLog", frozen)]
pub struct PyWalLog {
    pub(crate) log: Mutex<WalLog>,
}

/// An OSError (errno, message) from a failed write.
/// The stored layouts a decoding round may be logged in, by event type, from the writer's
/// `{type: WalType}` (frozen classes: read without the GIL); none without it.
pub(crate) fn stored_layouts<'py>(
    types: Option<&Bound<'py, pyo3::types::PyDict>>,
) -> PyResult<Vec<(String, Bound<'py, PyWalType>)>> {
    let mut stored = Vec::new();
    if let Some(types) = types {
        for (k, v) in types.iter() {
            stored.push((k.extract()?, v.cast_into::<PyWalType>()?));
        }
    }
    Ok(stored)
}

fn os_error(e: WriteError) -> PyErr {
    PyOSError::new_err((e.errno, e.message))
}

#[pymethods]
impl PyWalLog {
    #[new]
    fn new() -> Self {
        Self { log: Mutex::new(WalLog::default()) }
    }

    /// Makes `fd` (the file at `path`, `size` bytes of records) the current file; nothing is
    /// written or reserved ahead with less than `min_free` bytes free on its disk.
    #[pyo3(signature = (fd, path, size, min_free=wallog::RESERVE_MIN_FREE))]
    fn set_file(&self, fd: i32, path: String, size: u64, min_free: u64) {
        lock(&self.log).set_file(fd, path, size, min_free);
    }

    /// Where the current file's records end.
    #[getter]
    fn size(&self) -> u64 {
        lock(&self.log).file.size
    }

    /// The current file's length (zeros written ahead past `size` count).
    #[getter]
    fn end(&self) -> u64 {
        lock(&self.log).file.end
    }

    /// The current file's blocks are allocated up to here.
    #[getter]
    fn reserved(&self) -> u64 {
        lock(&self.log).file.reserved
    }

    /// (errno, message) once an append failed and could not be cut back, else None.
    #[getter]
    fn broken(&self) -> Option<(i32, String)> {
        lock(&self.log).broken.as_ref().map(|b| (b.errno, b.message.clone()))
    }

    /// Cuts the zeros and reserved blocks past the last record (before the file is closed).
    fn unreserve(&self) {
        lock(&self.log).unreserve();
    }

    /// Appends `record` (all or nothing; OSError on failure); returns where the records end.
    fn write(&self, py: Python<'_>, record: &Bound<'_, PyWalRecord>) -> PyResult<u64> {
        let r = record.get();
        py.detach(|| lock(&self.log).append(&r.inner)).map_err(os_error)
    }

    /// Logs `batches` of `wal_type` as one record: conform fast path, `seq` numbered by `seq`
    /// where absent, framed and written, then under `fsync` "always" fsynced, under "batch"
    /// reported to `committer` as LSN `lsn` — one release of the interpreter lock for all of
    /// it. Returns None when a batch is not in the stored layout (nothing was numbered or
    /// written: the caller conforms it), else `(stored, nbytes)` as `WalType.prepare` gives
    /// them. OSError when the write failed (nothing of it kept; see `broken`).
    #[pyo3(signature = (wal_type, batches, seq=None, lsn=0, fsync="batch", committer=None))]
    #[allow(clippy::too_many_arguments)]
    fn append<'py>(
        &self,
        py: Python<'py>,
        wal_type: &Bound<'py, PyWalType>,
        batches: &Bound<'py, PyList>,
        seq: Option<&Bound<'py, PySeqCounters>>,
        lsn: u64,
        fsync: &str,
        committer: Option<&Bound<'py, PyGroupCommit>>,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let wt = wal_type.get();
        let Some(mut part) = wt.import(batches)? else { return Ok(None) };
        let counters = wt.counters_for(&part, seq)?;
        let always = fsync_always(fsync)?;
        let committer = committer.map(|c| c.get());
        let log = &self.log;
        py.detach(|| {
            wt.number(&mut part, counters)?;
            let rec = wt.encode(&part)?;
            let mut log = lock(log);
            log.append(&rec).map_err(os_error)?;
            settle(&log, always, committer, lsn).map_err(os_error)?;
            Ok::<_, PyErr>(())
        })?;
        let out = wt.stored(py, batches, &part)?;
        let nbytes = part.nbytes.into_pyobject(py)?.into_any().unbind();
        Ok(Some(PyTuple::new(py, [out.into_any().unbind(), nbytes])?))
    }
}

/// Logs `parts` (batches already numbered and in their types' stored layout) as records
/// `lsn`, `lsn + 1`, ... and then takes the fsync policy's step (an fsync when `always`, else
/// `committer` told of the last). Call without the interpreter lock. Returns the bytes of each
/// logged batch's columns, and the error that stopped the rest (the batches before it are
/// logged, and durable like any other once the step ran).
pub(crate) fn log_stored(
    log: &PyWalLog,
    parts: &[(&PyWalType, RecordBatch)],
    lsn: u64,
    always: bool,
    committer: Option<&PyGroupCommit>,
) -> (Vec<usize>, Option<WriteError>) {
    let mut log = lock(&log.log);
    let mut sizes = Vec::with_capacity(parts.len());
    let mut failed = None;
    for (wt, batch) in parts {
        let rec = match Record::encode(&wt.name, wt.schema_msg.clone(), std::slice::from_ref(batch)) {
            Ok(r) => r,
            Err(e) => {
                failed = Some(WriteError { errno: libc::EINVAL, message: format!("WAL record: {e}") });
                break;
            }
        };
        if let Err(e) = log.append(&rec) {
            failed = Some(e);
            break;
        }
        sizes.push(batch.columns().iter().map(|c| c.to_data().get_slice_memory_size().unwrap_or(0)).sum());
    }
    if !sizes.is_empty() {
        if let Err(e) = settle(&log, always, committer, lsn + sizes.len() as u64 - 1) {
            failed = failed.or(Some(e));
        }
    }
    (sizes, failed)
}

/// The fsync policy's step once records up to `lsn` are written: an fsync of the current file
/// (`always`), else the group committer told.
fn settle(log: &WalLog, always: bool, committer: Option<&PyGroupCommit>, lsn: u64) -> Result<(), WriteError> {
    if always {
        // SAFETY: plain syscall on the current file's descriptor (open: it was just written).
        if unsafe { libc::fsync(log.file.fd) } != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
    } else if let Some(c) = committer {
        c.inner.written(lsn);
    }
    Ok(())
}

/// Whether `batch` is in `wt`'s stored layout exactly (numbered, no column missing or added).
pub(crate) fn is_stored(wt: &PyWalType, batch: &RecordBatch) -> bool {
    walrec::layout(batch, &wt.target) == Layout::Stored
}

/// "always" -> true, "batch" -> false, else the ValueError.
pub(crate) fn fsync_always(fsync: &str) -> PyResult<bool> {
    match fsync {
        "always" => Ok(true),
        "batch" => Ok(false),
        _ => Err(PyValueError::new_err(format!("fsync {fsync:?} (expected always or batch)"))),
    }
}

/// Test hook (the crash tests): the `after`-th WAL record written from now writes half its record's
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
    m.add("WAL_ZERO_RECORD_MAX", wallog::ZERO_RECORD_MAX)?;
    m.add("WAL_ZERO_AHEAD", wallog::ZERO_AHEAD)?;
    m.add("WAL_RESERVE_AHEAD", wallog::RESERVE_AHEAD)?;
    m.add("WAL_RESERVE_MIN_FREE", wallog::RESERVE_MIN_FREE)?;
    m.add_function(wrap_pyfunction!(wal_scan, m)?)?;
    m.add_class::<PyWalType>()?;
    m.add_class::<PyWalRecord>()?;
    m.add_class::<PyWalLog>()?;
    m.add_function(wrap_pyfunction!(wal_failpoint, m)?)?;
    Ok(())
}
