//! Generated workloads (the folder is not called `gen`: a reserved word from Rust 2024 on).
//!
//! - [`tod`]: the TOD workload generator (seed 001).
//! - [`loadgen`]: the write load generator (QoS agents, TSBS cpu-only) and its report.
//! - [`rng`]: the deterministic PRNG shared by the generators.

pub mod loadgen;
pub mod rng;
pub mod tod;
