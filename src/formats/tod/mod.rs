//! The TOD format (seed 001): the events of an omniscient debugger's simulated program.
//!
//! Owns the format's declaration ([`decl`]); its rows are made by the workload generator
//! (`workload/tod.rs`), not parsed from a file, so it has no parser here.

pub mod decl;
