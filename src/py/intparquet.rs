//! `write_int_parquet(path, data, schema, dictionary, row_group, metadata, created_by, checksums=True)`:
//! a segment of an integer-only event type written by [`crate::store::intparquet`].

use std::fs::OpenOptions;
use std::io::BufWriter;
use std::path::PathBuf;

use arrow_array::ffi_stream::RecordBatchStreamReader;
use arrow_array::RecordBatch;
use arrow_pyarrow::FromPyArrow;
use arrow_schema::{DataType, Schema};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::store::intparquet::{self, ColumnSpec};

/// Writes `data` (a list of pyarrow RecordBatches, or a Table / anything with
/// `__arrow_c_stream__`, of `schema`: int32/int64 columns only) as a new
/// Parquet file `path` (refused if it exists); `dictionary` names the dictionary-encoded
/// columns; `checksums`: a CRC-32 in every page header. Returns the file's size. The GIL is
/// released while encoding and writing.
#[pyfunction]
#[pyo3(signature = (path, data, schema, dictionary, row_group, metadata, created_by, checksums = true))]
#[allow(clippy::too_many_arguments)]
fn write_int_parquet(
    py: Python<'_>,
    path: PathBuf,
    data: &Bound<'_, PyAny>,
    schema: &Bound<'_, PyAny>,
    dictionary: Vec<String>,
    row_group: usize,
    metadata: Vec<(String, String)>,
    created_by: String,
    checksums: bool,
) -> PyResult<u64> {
    let schema = Schema::from_pyarrow_bound(schema)?;
    let mut specs = Vec::with_capacity(schema.fields().len());
    for f in schema.fields() {
        let wide = match f.data_type() {
            DataType::Int64 => true,
            DataType::Int32 => false,
            t => return Err(PyValueError::new_err(format!("column {}: {t} is not an int32/int64 column", f.name()))),
        };
        specs.push(ColumnSpec {
            name: f.name().clone(),
            wide,
            nullable: f.is_nullable(),
            dictionary: dictionary.iter().any(|d| d == f.name()),
            checksums,
        });
    }
    // A stream is read with the interpreter lock released: importing a list's batches one
    // by one let go of the lock and took it back per batch (see `segment`).
    let source = match data.cast::<PyList>() {
        Ok(list) => Source::Batches(list.iter().map(|b| RecordBatch::from_pyarrow_bound(&b)).collect::<PyResult<_>>()?),
        Err(_) => Source::Stream(RecordBatchStreamReader::from_pyarrow_bound(data)?),
    };
    py.detach(move || {
        let batches = match source {
            Source::Batches(b) => b,
            Source::Stream(r) => r.collect::<Result<Vec<_>, _>>().map_err(|e| std::io::Error::other(e.to_string()))?,
        };
        let file = OpenOptions::new().write(true).create_new(true).open(&path)?;
        let mut w = BufWriter::with_capacity(1 << 16, file);
        intparquet::write(&mut w, &specs, &batches, row_group, &metadata, &created_by)
    })
    .map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidInput => PyValueError::new_err(e.to_string()),
        _ => PyOSError::new_err((e.raw_os_error().unwrap_or(0), e.to_string())),
    })
}

enum Source {
    Batches(Vec<RecordBatch>),
    Stream(RecordBatchStreamReader),
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(write_int_parquet, m)?)
}
