//! Live ingest: what the `tracehouse serve` path runs per request and per write.
//!
//! - [`lineproto`]: InfluxDB line protocol decoding into Arrow batches.
//! - [`seqnum`]: per-producer sequence numbers (the stored `seq` column).
//! - [`commit`]: group commit of a trace's write-ahead log (fsync thread, durable actions).
//! - [`httpfront`]: the HTTP/1.1 front end of the ingest server (sockets, framing, limits).
//! - [`tcpfront`]: line protocol over raw TCP on the same front end (framing, acks, back-pressure).
//! - [`walrec`]: WAL records of appended batches (conform fast path, seq, zero-copy framing, writev).

pub mod commit;
pub mod httpfront;
pub mod lineproto;
pub mod seqnum;
pub mod tcpfront;
pub mod walrec;
