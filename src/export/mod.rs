//! Writers of trace file formats, one module per format: the reverse of [`crate::parse`].
//!
//! Owns the per-event encoding loops of the exporters. No module here knows Python.

pub mod chrome;
