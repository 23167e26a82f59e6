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
//! - [`formats`]: trace file formats, one folder per format (declaration, parser, writer,
//!   tests), the list of formats and what the parsers share.
//! - [`ingest`]: live ingest: line protocol decoding, per-producer sequence numbers,
//!   WAL group commit, the HTTP/1.1 front end.
//! - [`workload`]: generated workloads: the TOD generator (seed 001; its format is declared in
//!   `formats/tod/`), the write load generator, their PRNG.
//! - [`intparquet`]: Parquet segments of integer-only event types, written natively.
//! - [`pagecheck`]: Parquet page checksums checked (verify, compaction, export).
//! - [`writeback`]: segment files' dirty pages sent to the disk a step at a time as they are written.
//! - [`order`]: stable multi-key row ordering (radix sort) for the derived indexes.
//! - [`packed`]: frame-of-reference bit-packed int columns of the derived indexes.
//! - [`spans`]: begin/end pairing into spans (control-flow reconstitution).
//! - [`calltree`]: the aggregated call tree (calling-context tree) of spans.
//! - [`hist`]: bpftrace `hist`/`lhist` bucket rules and counting.
//! - [`density`]: events per time bin over sorted timestamp streams.
//! - [`replay`]: IO trace replay (plan from a strace trace, timed multi-threaded run).
//! - [`record`]: the omniscient recorder of Python programs (its wire, its event types, the tracer).
//! - `py`: the PyO3 glue (only with the default `python` feature), one file per
//!   concern, registered below.
//!
//! The pure Rust modules know nothing of Python, so `cargo test --no-default-features`
//! tests them without linking libpython.

#![deny(missing_docs)]

pub mod calltree;
pub mod colpool;
pub mod density;
pub mod formats;
pub mod hist;
pub mod ingest;
pub mod intparquet;
pub mod mutex;
pub mod order;
pub mod packed;
pub mod pagecheck;
pub mod record;
pub mod replay;
pub mod slab;
pub mod spans;
pub mod workload;
pub mod writeback;

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
    Ok(())
}
