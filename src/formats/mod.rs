//! Trace file formats, one folder per format: its declaration (`decl.rs`: event types,
//! sniffer and priority, parser factory, the analyses' profile, example queries), its parser
//! (`mod.rs`, split by concern when it is more than one grammar), its writer when it has one
//! (`export.rs`), its tests (`tests.rs`). `probe` is bpftrace's and SystemTap's: one parser
//! reads both tools' output. `tod` and `lineproto` declare formats whose rows come from the
//! workload generator and the ingest decoder.
//!
//! [`FORMATS`] below is the one list of formats: a new format is its folder, a `pub mod` line
//! and its declaration in that list. Each parser takes byte chunks of any size (keeping
//! partial records across chunk boundaries) and produces Arrow record batches of the event
//! types it declares ([`decl`]: columns, types, units; Python reads them through `_core`);
//! [`parser`] is the interface every parser implements, which the one Python class
//! `_core.NativeParser` drives. This file also owns, for the line-based formats, [`Lines`]
//! (lines cut across chunks, capped at [`MAX_LINE`]) behind [`TextInput`], which also refuses
//! binary input ([`looks_binary`]). No module here knows Python; the PyO3 glue lives in
//! `src/py/`.

pub mod chrome;
pub mod decl;
pub mod json;
pub mod lineproto;
pub mod otlp;
pub mod paje;
pub mod parser;
pub mod pbwire;
pub mod perf;
pub mod perfetto;
pub mod pprof;
pub mod probe;
pub mod strace;
pub mod table;
pub mod tod;

pub(crate) use parser::chunk_parser;
pub use parser::ChunkParser;

use decl::FormatDecl;

/// Every declared format, in the order Python lists them.
pub const FORMATS: &[&FormatDecl] = &[
    &tod::decl::TOD,
    &crate::record::decl::PYTHON,
    &strace::decl::STRACE,
    &chrome::decl::CHROME,
    &probe::decl::BPFTRACE,
    &probe::decl::STAP,
    &paje::decl::PAJE,
    &lineproto::decl::LINEPROTO,
    &perf::decl::PERF,
    &pprof::decl::PPROF,
    &perfetto::decl::PERFETTO,
    &otlp::decl::OTLP,
];

/// The declared formats whose sniffer recognises `head` (the first bytes of an input,
/// gunzipped), highest priority first.
pub fn sniff(head: &[u8]) -> Vec<&'static str> {
    let mut hits: Vec<&FormatDecl> = FORMATS.iter().copied().filter(|f| f.sniff.is_some_and(|s| s(head))).collect();
    hits.sort_by_key(|f| std::cmp::Reverse(f.priority));
    hits.into_iter().map(|f| f.name).collect()
}

/// Longest line (or record) the text formats accept by default, in bytes, as the strace
/// parser's: a longer one is rejected with its line number and skipped as it streams by,
/// never buffered, so one runaway line can neither become one huge event nor take memory.
pub const MAX_LINE: usize = 16 << 20;

/// A piece of input cut by [`Lines`].
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// A whole line, without its `\n`.
    Line(&'a [u8]),
    /// A line longer than the limit (reported once, its bytes skipped).
    TooLong,
}

/// Cuts chunks cut anywhere into lines, keeping the unfinished tail for the next chunk,
/// but never more than `max` bytes of one line.
#[derive(Debug)]
pub struct Lines {
    carry: Vec<u8>,
    max: usize,
    skipping: bool,
}

impl Lines {
    /// A splitter accepting lines of at most `max` bytes.
    pub fn new(max: usize) -> Self {
        Lines { carry: Vec::new(), max, skipping: false }
    }

    /// Hands each piece of `chunk` to `f`, one per line; `f` returns false to stop (a fatal
    /// error): the rest of the chunk is then dropped.
    pub fn feed(&mut self, chunk: &[u8], mut f: impl FnMut(Piece<'_>) -> bool) {
        let mut start = 0;
        if self.skipping {
            match memchr::memchr(b'\n', chunk) {
                Some(nl) => {
                    self.skipping = false;
                    start = nl + 1;
                }
                None => return,
            }
        }
        if !self.carry.is_empty() {
            let rest = &chunk[start..];
            match memchr::memchr(b'\n', rest) {
                Some(nl) => {
                    start += nl + 1;
                    let ok = if self.carry.len() + nl > self.max {
                        self.carry.clear();
                        f(Piece::TooLong)
                    } else {
                        let mut first = std::mem::take(&mut self.carry);
                        first.extend_from_slice(&rest[..nl]);
                        let ok = f(Piece::Line(&first));
                        first.clear();
                        self.carry = first;
                        ok
                    };
                    if !ok {
                        return;
                    }
                }
                None => {
                    if self.carry.len() + rest.len() > self.max {
                        self.carry.clear();
                        self.skipping = true;
                        f(Piece::TooLong);
                    } else {
                        self.carry.extend_from_slice(rest);
                    }
                    return;
                }
            }
        }
        while let Some(off) = memchr::memchr(b'\n', &chunk[start..]) {
            let l = &chunk[start..start + off];
            let ok = if l.len() > self.max { f(Piece::TooLong) } else { f(Piece::Line(l)) };
            if !ok {
                return;
            }
            start += off + 1;
        }
        let rest = &chunk[start..];
        if rest.len() > self.max {
            self.skipping = true;
            f(Piece::TooLong);
        } else {
            self.carry.extend_from_slice(rest);
        }
    }

    /// The last line, when the input does not end with a newline.
    pub fn finish(&mut self, f: impl FnOnce(Piece<'_>)) {
        self.skipping = false;
        if !self.carry.is_empty() {
            let last = std::mem::take(&mut self.carry);
            f(Piece::Line(&last));
        }
    }
}

/// Bytes of the start of an input that decide whether it is binary ([`looks_binary`]).
pub const HEAD: usize = 4096;

/// Holds back the start of an input until [`HEAD`] bytes (or its end) have come, so a
/// decision about the whole input does not depend on how it was cut into chunks.
#[derive(Debug, Default)]
pub struct Head {
    buf: Vec<u8>,
    passed: bool,
}

/// What [`Head::feed`] hands back.
pub enum Fed<'a> {
    /// Still gathering the start: nothing to parse yet.
    Wait,
    /// The start has come: decide on it, then parse all of it.
    First(Vec<u8>),
    /// A later chunk, as fed.
    Then(&'a [u8]),
}

impl Head {
    /// Takes a chunk.
    pub fn feed<'a>(&mut self, chunk: &'a [u8]) -> Fed<'a> {
        if self.passed {
            return Fed::Then(chunk);
        }
        self.buf.extend_from_slice(chunk);
        if self.buf.len() < HEAD {
            return Fed::Wait;
        }
        self.passed = true;
        Fed::First(std::mem::take(&mut self.buf))
    }

    /// At the end of the input: the whole (short) input, when it never reached [`HEAD`] bytes.
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        if self.passed {
            return None;
        }
        self.passed = true;
        Some(std::mem::take(&mut self.buf))
    }
}

/// What [`TextInput`] hands a line-based parser.
#[derive(Debug, PartialEq, Eq)]
pub enum Item<'a> {
    /// The input is binary data: refuse it whole (nothing else comes).
    Binary,
    /// A line, without its `\n`.
    Line(&'a [u8]),
    /// A line longer than the limit, which this is (reported once, its bytes skipped).
    TooLong(usize),
}

impl<'a> Item<'a> {
    fn of(p: Piece<'a>, max: usize) -> Self {
        match p {
            Piece::Line(l) => Item::Line(l),
            Piece::TooLong => Item::TooLong(max),
        }
    }
}

/// The front of a line-based text parser: holds the start of the input back until the
/// binary check can look at it ([`Head`]), then cuts lines of at most `max` bytes ([`Lines`]).
#[derive(Debug)]
pub struct TextInput {
    head: Head,
    lines: Lines,
    max: usize,
    binary: bool,
}

impl TextInput {
    /// An input whose lines may be `max` bytes long.
    pub fn new(max: usize) -> Self {
        TextInput { head: Head::default(), lines: Lines::new(max), max, binary: false }
    }

    /// Hands each item of `chunk` to `f`, which returns false to stop.
    pub fn feed(&mut self, chunk: &[u8], mut f: impl FnMut(Item<'_>) -> bool) {
        match self.head.feed(chunk) {
            Fed::Wait => {}
            Fed::First(start) => self.start(&start, &mut f),
            Fed::Then(c) if !self.binary => self.lines.feed(c, |p| f(Item::of(p, self.max))),
            Fed::Then(_) => {}
        }
    }

    /// Ends the input (a short input is decided on here).
    pub fn finish(&mut self, mut f: impl FnMut(Item<'_>) -> bool) {
        if let Some(start) = self.head.finish() {
            self.start(&start, &mut f);
        }
        if !self.binary {
            let max = self.max;
            self.lines.finish(|p| {
                f(Item::of(p, max));
            });
        }
    }

    fn start(&mut self, start: &[u8], f: &mut impl FnMut(Item<'_>) -> bool) {
        if looks_binary(&start[..start.len().min(HEAD)]) {
            self.binary = true;
            f(Item::Binary);
        } else {
            let max = self.max;
            self.lines.feed(start, |p| f(Item::of(p, max)));
        }
    }
}

/// Whether `head` (the first bytes of an input) looks like binary data rather than text:
/// a NUL byte, or more than a tenth of control bytes other than tab, CR, LF, FF and ESC,
/// or of bytes that are not UTF-8. Text formats refuse such input as a whole instead of making
/// events of its "lines".
pub fn looks_binary(head: &[u8]) -> bool {
    // One pass over the bytes; UTF-8 is checked only when there are non-ASCII bytes.
    let mut control = 0;
    let mut high = false;
    for &b in head {
        if b < 0x20 {
            // Tab, newlines, form feed and escape (terminal colours in printed text) are text.
            if b == 0 {
                return true;
            }
            control += !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c | 0x1b) as usize;
        }
        high |= b >= 0x80;
    }
    let invalid = match high.then(|| std::str::from_utf8(head)) {
        None | Some(Ok(_)) => 0,
        // Count the invalid bytes (a cut multi-byte character at the end is not one).
        Some(Err(_)) => String::from_utf8_lossy(head).matches('\u{FFFD}').count(),
    };
    (control + invalid) * 10 > head.len()
}

#[cfg(test)]
mod tests {
    use super::{looks_binary, Lines, Piece};

    fn pieces(max: usize, chunks: &[&[u8]]) -> Vec<String> {
        let mut l = Lines::new(max);
        let mut got = Vec::new();
        let mut put = |p: Piece<'_>| match p {
            Piece::Line(l) => got.push(String::from_utf8_lossy(l).into_owned()),
            Piece::TooLong => got.push("<too long>".into()),
        };
        for c in chunks {
            l.feed(c, |p| {
                put(p);
                true
            });
        }
        l.finish(&mut put);
        got
    }

    #[test]
    fn lines_across_chunks_and_early_stop() {
        assert_eq!(pieces(100, &[b"ab", b"c\nd", b"", b"e\nf\ng", b"h"]), ["abc", "de", "f", "gh"]);
        let mut n = 0;
        let mut l = Lines::new(100);
        l.feed(b"x\ny\nz\n", |_| {
            n += 1;
            n < 2
        });
        assert_eq!(n, 2);
    }

    #[test]
    fn a_line_over_the_limit_is_one_piece_in_any_chunking() {
        let text = b"ok\n0123456789abc\nfine\n0123456789\nlast0123456789x";
        let want = ["ok", "<too long>", "fine", "0123456789", "<too long>"];
        for size in 1..text.len() {
            let chunks: Vec<&[u8]> = text.chunks(size).collect();
            assert_eq!(pieces(10, &chunks), want, "chunks of {size}");
        }
    }

    #[test]
    fn binary_is_told_from_text() {
        assert!(!looks_binary(b"12.5 1 job_start 0x7f\n\tok\r\n"));
        assert!(!looks_binary(b"\x1b[31mERROR\x1b[0m disk full\n"));
        assert!(!looks_binary("caf\u{e9} \u{65e5}\u{672c}\n".as_bytes()));
        assert!(looks_binary(b"PK\x03\x04\x00\x00"));
        let noise: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 | 1).collect();
        assert!(looks_binary(&noise));
    }
}
