//! `tracehouse._core`: the native half of tracehouse.
//!
//! Owns every per-event loop of the project and hands its results to Python as Arrow
//! record batches through the Arrow C data interface, never as Python objects.
//! This file owns the crate layout and the one `#[pymodule]`; each concern lives in its
//! own module:
//!
//! - [`colpool`]: recycling of column allocations lent to Arrow.
//! - [`slab`]: a batch's column buffers carved from one huge-page mapping, recycled.
//! - [`mutex`]: the one `lock()` (a mutex whose holder panicked still guards consistent state).
//! - [`store`]: the store's native half: the WAL format (write and read), sequence numbers,
//!   group commit, the segment writer and its row order, page checksums, write-back.
//! - [`formats`]: trace file formats, one folder per format (declaration, parser, writer,
//!   tests), the list of formats and what the parsers share.
//! - [`ingest`]: live ingest: line protocol decoding, the HTTP/1.1 and raw TCP front ends.
//! - [`workload`]: generated workloads: the TOD generator (seed 001; its format is declared in
//!   `formats/tod/`), the write load generator, their PRNG.
//! - [`analysis`]: the native analyses: span pairing, the call tree, histograms, density,
//!   the derived indexes' packed columns.
//! - [`replay`]: IO trace replay (plan from a strace trace, timed multi-threaded run).
//! - [`record`]: the omniscient recorder of Python programs (its wire, its event types, the tracer).
//! - `py`: the PyO3 glue (only with the default `python` feature), one file per
//!   concern, registered below.
//!
//! The pure Rust modules know nothing of Python, so `cargo test --no-default-features`
//! tests them without linking libpython.

#![deny(missing_docs)]

pub mod analysis;
pub mod colpool;
pub mod formats;
pub mod ingest;
pub mod mutex;
pub mod record;
pub mod replay;
pub mod slab;
pub mod store;
pub mod workload;

#[cfg(feature = "python")]
mod py;

/// The crate version, exported to Python as `_core.__version__`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

#[cfg(feature = "python")]
use pyo3::prelude::*;

/// The `tracehouse._core` extension module.
#[cfg(feature = "python")]
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", VERSION)?;
    py::decl::register(m)?;
    py::tod::register(m)?;
    py::checksum::register(m)?;
    py::lineproto::register(m)?;
    py::otlp::register(m)?;
    py::loadgen::register(m)?;
    py::chrome::register(m)?;
    py::strace::register(m)?;
    py::parser::register(m)?;
    py::pprof::register(m)?;
    py::analysis::register(m)?;
    py::httpfront::register(m)?;
    py::commit::register(m)?;
    py::replay::register(m)?;
    py::wal::register(m)?;
    py::intparquet::register(m)?;
    py::segment::register(m)?;
    py::record::register(m)?;
    py::pagecheck::register(m)?;
    py::influx::register(m)?;
    Ok(())
}
