//! The native analyses: the per-event loops behind `python/tracehouse/analysis/`.
//!
//! - [`spans`]: begin/end pairing into spans (control-flow reconstitution, seed 001).
//! - [`calltree`]: the aggregated call tree (calling-context tree) of spans.
//! - [`hist`]: bpftrace `hist`/`lhist` bucket rules and counting (seed 004).
//! - [`density`]: events per time bin over sorted timestamp streams.
//! - [`influx`]: the native InfluxQL executor's loops (aggregates and raw points of a measurement).
//! - [`window`]: aggregates of a time window's spans over the span index's row ranges.
//! - [`packed`]: the frame-of-reference bit-packed int columns of the derived indexes, and the
//!   searches and binned counts over them.
//!
//! They read what the store holds (row orders come from [`crate::store::order`]) and know
//! nothing of how it was written; their Python face is `py/analysis.rs`.

pub mod calltree;
pub mod density;
pub mod hist;
pub mod influx;
pub mod packed;
pub mod spans;
pub mod window;
