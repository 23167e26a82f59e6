//! IO trace replay (seed 002, done as ROOT/ARTC and Buttress taught): a strace trace
//! becomes a plan of per-thread operations with cross-thread ordering, replayed on a
//! target directory on an absolute schedule, every call recorded.
//!
//! - [`paths`]: where a traced path lands under `--root` (`--map`, `--only`), what is
//!   refused by text;
//! - [`fsroot`]: the root directory fd and every filesystem call beneath it
//!   (`openat2(RESOLVE_BENEATH)`: nothing outside the root is ever touched);
//! - [`plan`]: rows of the stored `syscall` table to a [`plan::Plan`] (operations, fd
//!   slots, dependencies, the files to prepare, the skipped calls and why);
//! - [`clock`]: the monotonic clock, timer slack, sleep-then-spin waits;
//! - [`run`]: the workers and the execution of each operation, K copies at once.
//!
//! Pure Rust: the PyO3 glue is `py/replay.rs`, which hands the records to Python as
//! Arrow arrays.

pub mod clock;
pub mod fsroot;
pub mod paths;
pub mod plan;
pub mod run;
#[cfg(test)]
mod tests;
