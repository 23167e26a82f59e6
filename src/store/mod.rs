//! The store's native half: what a write is stored with and what a segment is written with.
//!
//! `python/tracehouse/store/` is the store's door (catalog, checkpoints, queries); the per-row
//! and per-byte work of its write path and of its segments is here, one owner each:
//!
//! - [`wal`]: the WAL format, write half: records of appended batches framed without copying a
//!   column (the conform fast path, `seq` numbered, one `writev`); [`walscan`], its read half
//!   (frames, checksums, torn tails, what damage means), through which `store/wal.py` reads.
//! - [`wallog`]: the current WAL file of a trace and the append policy (zeros and blocks
//!   allocated ahead, all-or-nothing writes).
//! - [`seqnum`]: per-producer sequence numbers (the stored `seq` column).
//! - [`commit`]: group commit of a trace's WAL (the fsync thread, actions run once durable).
//! - [`intparquet`]: the segment writer of integer-only event types (Parquet, page CRCs).
//! - [`order`]: the stable multi-key row order a checkpoint writes a segment in (and the
//!   analyses' derived indexes are sorted by).
//! - [`writeback`]: a segment file's dirty pages sent to the disk a step at a time.
//! - [`pagecheck`]: Parquet page checksums checked (verify, compaction, export).
//!
//! Why one folder: the WAL format had two owners (Rust wrote it, Python read it) and these
//! modules sat beside the parsers and the analyses; the on-disk formats now change in one place.
//! Each module's own docs carry its measurements.

pub mod commit;
pub mod intparquet;
pub mod order;
pub mod pagecheck;
pub mod seqnum;
pub mod wal;
pub mod wallog;
pub mod walscan;
pub mod writeback;
