//! Python face of the group committer: `_core.GroupCommit`.
//!
//! Owns argument conversion only; every blocking call releases the GIL. The store's
//! `TraceWriter` holds one per WAL (fsync policy `batch`); the HTTP server hands it write
//! requests to answer once durable (`HttpRequest.respond_when_durable`).

use std::os::fd::{FromRawFd, OwnedFd};
use std::time::Duration;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

use crate::store::commit::GroupCommit;

/// The group committer of one WAL file sequence (see `src/store/commit.rs`).
#[pyclass(module = "tracehouse._core", name = "GroupCommit", frozen)]
pub struct PyGroupCommit {
    pub(crate) inner: GroupCommit,
}

#[pymethods]
impl PyGroupCommit {
    /// Starts committing WAL file `fd` (kept open by the caller until it reports a switch or
    /// calls `stop`); records nobody waits for are committed within `interval` seconds.
    #[new]
    fn new(fd: i32, interval: f64) -> PyResult<Self> {
        if fd < 0 || interval.is_nan() || interval < 0.0 {
            return Err(PyValueError::new_err("GroupCommit: an open fd and an interval >= 0 are needed"));
        }
        let inner = GroupCommit::start(fd, Duration::from_secs_f64(interval))
            .map_err(|e| PyOSError::new_err(format!("GroupCommit: {e}")))?;
        Ok(Self { inner })
    }

    /// Records up to `lsn` are written.
    fn written(&self, lsn: u64) {
        self.inner.written(lsn);
    }

    /// The writer switched to `new_fd`; `old_fd` becomes the committer's (fsynced and closed
    /// by the next commit, before any later record counts as durable).
    fn switched(&self, old_fd: i32, new_fd: i32) -> PyResult<()> {
        if old_fd < 0 || new_fd < 0 {
            return Err(PyValueError::new_err("GroupCommit.switched: open fds are needed"));
        }
        // SAFETY: the caller hands over `old_fd` and no longer uses it.
        self.inner.switched(unsafe { OwnedFd::from_raw_fd(old_fd) }, new_fd);
        Ok(())
    }

    /// Whether a commit starts as soon as a record is written (a server whose every write
    /// waits for durability), not only once someone waits for it.
    #[getter]
    fn get_eager(&self) -> bool {
        self.inner.eager()
    }

    #[setter]
    fn set_eager(&self, eager: bool) {
        self.inner.set_eager(eager);
    }

    /// Highest LSN known durable.
    #[getter]
    fn durable(&self) -> u64 {
        self.inner.durable()
    }

    /// Why commits stopped (an fsync failed), or None.
    #[getter]
    fn error(&self) -> Option<String> {
        self.inner.error()
    }

    /// Blocks until `lsn` is durable (True) or `timeout` seconds pass (False); OSError when
    /// it never will be (an fsync failed, or the committer was stopped first).
    #[pyo3(signature = (lsn, timeout=None))]
    fn wait(&self, py: Python<'_>, lsn: u64, timeout: Option<f64>) -> PyResult<bool> {
        let t = timeout.map(|t| Duration::from_secs_f64(t.max(0.0)));
        py.detach(|| self.inner.wait(lsn, t)).map_err(PyOSError::new_err)
    }

    /// Makes everything written durable and stops the thread (idempotent).
    fn stop(&self, py: Python<'_>) {
        py.detach(|| self.inner.stop());
    }
}

/// Adds the committer's names to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyGroupCommit>()?;
    Ok(())
}
