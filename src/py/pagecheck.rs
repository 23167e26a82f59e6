//! `parquet_page_check(path, chunks)`: the page walk of [`crate::store::pagecheck`] over column chunks
//! of one Parquet file, the interpreter lock released.

use std::path::PathBuf;

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;

use crate::store::pagecheck;

/// (pages, pages with a CRC, bytes, the first damaged page's offset or None, why or None).
type Checked = (u64, u64, u64, Option<u64>, Option<String>);

/// Walks the pages of `chunks` ((byte offset, length) of each column chunk) of the file `path`.
#[pyfunction]
fn parquet_page_check(py: Python<'_>, path: PathBuf, chunks: Vec<(u64, u64)>) -> PyResult<Checked> {
    let r = py
        .detach(move || pagecheck::check_file(&path, &chunks))
        .map_err(|e| PyOSError::new_err((e.raw_os_error().unwrap_or(0), e.to_string())))?;
    let (at, why) = match r.bad {
        Some((a, w)) => (Some(a), Some(w)),
        None => (None, None),
    };
    Ok((r.pages, r.with_crc, r.bytes, at, why))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parquet_page_check, m)?)
}
