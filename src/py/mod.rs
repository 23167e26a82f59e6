//! PyO3 glue: Python classes and functions over the pure Rust modules.
//!
//! Owns every conversion between Rust and Python, so no other module imports pyo3.
//! Arrow data crosses as Arrow C data interface structs: see [`arrow`].

pub mod analysis;
pub mod arrow;
pub mod checksum;
pub mod chrome;
pub mod commit;
pub mod decl;
pub mod driver;
pub mod httpfront;
pub mod intparquet;
pub mod lineproto;
pub mod loadgen;
pub mod paje;
pub mod probe;
pub mod replay;
pub mod strace;
pub mod tod;
pub mod wal;
