//! Parsers of trace file formats, one module per format.
//!
//! Each format module takes byte chunks of any size (keeping partial records across
//! chunk boundaries) and produces Arrow record batches whose schemas match the event
//! types the Python side declares for that format (`python/tracehouse/formats/<format>.py`).
//! This file owns what they share: the [`ChunkParser`] interface the PyO3 glue drives,
//! and [`split_lines`] for the line-based formats. No module here knows Python; the
//! PyO3 glue lives in `src/py/`.

pub mod chrome;
pub mod json;
pub mod paje;
pub mod probe;
pub mod strace;
pub mod table;

use arrow_array::RecordBatch;

/// A parser fed chunks cut anywhere, handing out full batches per event type.
pub trait ChunkParser: Send {
    /// Parses a chunk.
    fn feed(&mut self, chunk: &[u8]);
    /// Ends the input (last partial record, open state).
    fn finish(&mut self);
    /// Batches that reached the batch size (every non-empty one when `all`).
    fn take_batches(&mut self, all: bool) -> Vec<(String, RecordBatch)>;
}

/// Implements [`ChunkParser`] for a parser type by its inherent `feed`, `finish` and
/// `take_batches` (the Rust tests call those without importing the trait).
macro_rules! chunk_parser {
    ($t:ty) => {
        impl $crate::parse::ChunkParser for $t {
            fn feed(&mut self, chunk: &[u8]) {
                <$t>::feed(self, chunk)
            }
            fn finish(&mut self) {
                <$t>::finish(self)
            }
            fn take_batches(&mut self, all: bool) -> Vec<(String, arrow_array::RecordBatch)> {
                <$t>::take_batches(self, all)
            }
        }
    };
}
pub(crate) use chunk_parser;

/// Hands each whole line of `chunk` (without `\n`) to `line`, the unfinished tail waiting in
/// `carry` for the next chunk. `line` returns false to stop (a fatal error): the rest of the
/// chunk is then dropped.
pub fn split_lines(carry: &mut Vec<u8>, chunk: &[u8], mut line: impl FnMut(&[u8]) -> bool) {
    let mut start = 0;
    if !carry.is_empty() {
        let Some(nl) = memchr::memchr(b'\n', chunk) else {
            carry.extend_from_slice(chunk);
            return;
        };
        let mut first = std::mem::take(carry);
        first.extend_from_slice(&chunk[..nl]);
        start = nl + 1;
        if !line(&first) {
            return;
        }
    }
    while let Some(off) = memchr::memchr(b'\n', &chunk[start..]) {
        if !line(&chunk[start..start + off]) {
            return;
        }
        start += off + 1;
    }
    carry.extend_from_slice(&chunk[start..]);
}

#[cfg(test)]
mod tests {
    use super::split_lines;

    #[test]
    fn lines_across_chunks_and_early_stop() {
        let mut carry = Vec::new();
        let mut got: Vec<String> = Vec::new();
        for chunk in [&b"ab"[..], b"c\nd", b"", b"e\nf\ng", b"h"] {
            split_lines(&mut carry, chunk, |l| {
                got.push(String::from_utf8_lossy(l).into_owned());
                true
            });
        }
        assert_eq!(got, ["abc", "de", "f"]);
        assert_eq!(carry, b"gh");
        let mut n = 0;
        carry.clear();
        split_lines(&mut carry, b"x\ny\nz\n", |_| {
            n += 1;
            n < 2
        });
        assert_eq!((n, carry.len()), (2, 0));
    }
}
