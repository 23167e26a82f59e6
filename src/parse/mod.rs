//! Parsers of trace file formats, one module per format.
//!
//! Owns nothing shared: each format module takes byte chunks of any size (keeping
//! partial records across chunk boundaries) and produces Arrow record batches whose
//! schemas match the event types the Python side declares for that format
//! (`python/tracehouse/formats/<format>.py`). No module here knows Python; the PyO3
//! glue lives in `src/py/`.

pub mod chrome;
pub mod json;
pub mod paje;
pub mod probe;
pub mod strace;
pub mod table;
