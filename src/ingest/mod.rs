//! Live ingest: what the `tracehouse serve` path runs per request and per write.
//!
//! - [`lineproto`]: InfluxDB line protocol decoding into Arrow batches.
//! - [`front`]: what the two front ends share (the dispatchers' queue, the byte budget, counters).
//! - [`httpfront`]: the HTTP/1.1 front end of the ingest server (sockets, framing, limits).
//! - [`tcpfront`]: line protocol over raw TCP on the same front end (framing, acks, back-pressure).
//!
//! What a write is stored with (sequence numbers, the WAL record, group commit) is the
//! store's: [`crate::store`].

pub mod front;
pub mod httpfront;
pub mod lineproto;
pub mod tcpfront;
