//! The omniscient recorder of Python programs (`tracehouse record`).
//!
//! - [`decl`]: the `python` format's event types (TOD's, with Python values), declared once.
//! - [`wire`]: the frames a traced process writes and the storing process reads into Arrow
//!   record batches.
//! - [`clock`]: the events' clock (`CLOCK_MONOTONIC`, read between readings through the CPU's
//!   time-stamp counter).
//! - `tracer` (with the `python` feature): the trace callbacks inside the traced interpreter
//!   (3.11 `PyEval_SetTrace` with opcode events, 3.12+ `sys.monitoring`).
//!
//! The Python side (`python/tracehouse/record/`) starts the program under the tracer, stores the
//! stream, and answers the debugger's questions.

pub mod clock;
pub mod decl;
#[cfg(feature = "python")]
pub mod tracer;
pub mod wire;
