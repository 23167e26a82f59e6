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
pub mod influx;
pub mod intparquet;
pub mod lineproto;
pub mod loadgen;
pub mod otlp;
pub mod pagecheck;
pub mod parser;
pub mod pprof;
pub mod record;
pub mod replay;
pub mod segment;
pub mod strace;
pub mod tod;
pub mod wal;

/// Bytes of input below which a native call keeps the interpreter lock (see [`detach_if`]).
pub const DETACH_BYTES: usize = 64 << 10;

/// Runs `f` without the interpreter lock when `big`, else with it.
///
/// Releasing the lock for a short call is not free: a background Python thread (checkpoint,
/// compaction) takes it, and getting it back waits until that thread lets go, up to the
/// interpreter's switch interval (5 ms). A 100-row write passed the lock on four times per
/// round (decode, WAL record, WAL write, answer), each under 100 µs of work. Measured
/// 2026-11-26 with a `take_gil` uprobe (2 writers x 100 TSBS rows over TCP with durable
/// offsets, load average 5-7 on 2 cores): the dispatcher took the lock 4 times a request
/// before, 2 after; the waits were ~45 µs a request either way (`tracehouse bench write`). Calls
/// that block or take locks another thread may hold while it waits for the interpreter lock
/// must detach whatever their size.
pub fn detach_if<T: Send, F: Send + FnOnce() -> T>(py: pyo3::Python<'_>, big: bool, f: F) -> T {
    if big {
        py.detach(f)
    } else {
        f()
    }
}
