//! `crc32(data, value=0)`: the checksum of WAL records.
//!
//! Owns the one checksum the store writes. It is CRC-32 with zlib's polynomial, so the
//! value equals `zlib.crc32(data, value)` (recovery may use either); crc32fast computes
//! it with carry-less multiplication at several GB/s, where zlib manages ~2 GB/s here,
//! and the GIL is released while it runs.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// CRC-32 of a contiguous bytes-like object, continuing from `value`.
#[pyfunction]
#[pyo3(signature = (data, value = 0))]
fn crc32(py: Python<'_>, data: &Bound<'_, PyAny>, value: u32) -> PyResult<u32> {
    // bytes export format "B", pyarrow buffers "b": the bits are what matter.
    let (ptr, len, _keep) = match PyBuffer::<u8>::get(data) {
        Ok(b) => (b.buf_ptr() as usize, b.len_bytes(), Keep::U8(b)),
        Err(_) => {
            let b = PyBuffer::<i8>::get(data)?;
            (b.buf_ptr() as usize, b.len_bytes(), Keep::I8(b))
        }
    };
    if !_keep.contiguous() {
        return Err(PyValueError::new_err("crc32 needs a contiguous buffer"));
    }
    Ok(py.detach(move || {
        // SAFETY: `_keep` keeps the exporter's memory alive and unmoved until it is dropped after
        // this closure; the bytes are only read.
        let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
        let mut h = crc32fast::Hasher::new_with_initial(value);
        h.update(bytes);
        h.finalize()
    }))
}

/// Holds the exported buffer (and so the memory) while the checksum runs.
enum Keep {
    U8(PyBuffer<u8>),
    I8(PyBuffer<i8>),
}

impl Keep {
    fn contiguous(&self) -> bool {
        match self {
            Keep::U8(b) => b.is_c_contiguous(),
            Keep::I8(b) => b.is_c_contiguous(),
        }
    }
}

/// Adds `crc32` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(crc32, m)?)
}
