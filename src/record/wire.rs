//! The recorder's wire: how a recorded program's events travel from the traced process to the
//! process that stores them.
//!
//! Owns the frame format, its writer side ([`Outbox`], filled by the tracer under the
//! interpreter lock and written out by a thread of its own) and its reader side
//! ([`WireReader`], which turns frames into Arrow record batches of the `python` format's event
//! types, `record/decl.rs`).
//!
//! Decisions:
//! - The tracer appends an event as one row of int64s to a per-type row-major buffer (one
//!   bounds check and a copy of 6-12 words); the reader transposes rows into columns. That
//!   keeps the work done inside the traced program's trace callback to the least, and puts the
//!   transposition on the storing process's core. A read gathers its frames' payloads into
//!   one reused buffer and transposes each event type's rows once, into columns allocated at
//!   their final size: one batch per type per read (one store append each, not one per frame
//!   of 32,768 events), no column regrown (growing them by frame was 6.6 % of the ingest's CPU
//!   in reallocation copies alone, perf), in blocks of 256 rows that stay in the L1 cache.
//! - Strings never travel with events: names, type names, str values and short reprs are
//!   symbols, sent once each in a symbols frame before the first frame that uses them. The
//!   reader keeps the table so `code` rows get their file and qualified name as text.
//! - Frames are self-delimiting (magic, tag, rows, payload length) and checked: a reader fed a
//!   damaged or cut stream stops with an error naming the byte offset, never a panic.
//!
//! Frame: `magic u32 | tag u32 | rows u32 | 0 u32 | len u64 | payload (len bytes)`, little endian.
//! Tags 0-4 are the event types of [`EVENT_TAGS`] (payload: rows x columns int64, row-major, the
//! columns `ts, producer, seq` then the type's declared parameters); the others are below.

use std::io::{self, Read, Write};
use std::sync::{Arc, OnceLock};

use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_buffer::ScalarBuffer;
use arrow_schema::SchemaRef;

use super::decl::PYTHON;

/// First word of every frame ("THRC" read as little-endian bytes).
pub const MAGIC: u32 = u32::from_le_bytes(*b"THRC");
/// Bytes of a frame header.
pub const HEADER: usize = 24;
/// Largest payload a reader accepts (a frame is at most a flush of the tracer's buffers).
pub const MAX_PAYLOAD: u64 = 1 << 30;

/// The event types written by the tracer, by tag (their order in the format declaration).
pub const EVENT_TAGS: [&str; 5] = ["behavior_enter", "behavior_exit", "var_write", "field_write", "line_step"];
/// Symbols: `ts i64`, then per row `id u32 | len u32 | UTF-8 bytes`.
pub const TAG_SYMBOLS: u32 = 16;
/// Code objects: rows of `ts, code_id, file symbol, qualname symbol, first_line` (int64).
pub const TAG_CODE: u32 = 17;
/// Threads: rows of `ts, producer, thread ident, name symbol` (int64).
pub const TAG_THREAD: u32 = 18;
/// A source file: `ts i64 | path len u32 | text len u32 | path | text`.
pub const TAG_SOURCE: u32 = 19;
/// The recording's start: a JSON object (interpreter, pid, argv, mode).
pub const TAG_HELLO: u32 = 20;
/// The recording's end: a JSON object (exit status, counts). A stream without it was cut.
pub const TAG_END: u32 = 21;

/// int64 columns of a row of event tag `t` on the wire: `ts, producer, seq` and the parameters.
pub fn event_width(t: usize) -> usize {
    3 + event_decl(t).params.len()
}

fn event_decl(t: usize) -> &'static crate::formats::decl::EventTypeDecl {
    let name = EVENT_TAGS[t];
    PYTHON.event_types.iter().find(|e| e.name == name).expect("every tag is declared")
}

fn decl_schema(name: &str) -> SchemaRef {
    let e = PYTHON.event_types.iter().find(|e| e.name == name).expect("declared");
    let all: Vec<&str> = e.params.iter().map(|p| p.name).collect();
    Arc::new(e.arrow_schema(&all))
}

/// Arrow schema of a stored type of the format (every column non-null), built once.
pub fn schema(name: &str) -> SchemaRef {
    static SCHEMAS: OnceLock<Vec<(&'static str, SchemaRef)>> = OnceLock::new();
    let all = SCHEMAS.get_or_init(|| PYTHON.event_types.iter().map(|e| (e.name, decl_schema(e.name))).collect());
    all.iter().find(|(n, _)| *n == name).map(|(_, s)| s.clone()).expect("a declared type")
}

fn header(out: &mut impl Write, tag: u32, rows: u32, len: u64) -> io::Result<()> {
    let mut h = [0u8; HEADER];
    h[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    h[4..8].copy_from_slice(&tag.to_le_bytes());
    h[8..12].copy_from_slice(&rows.to_le_bytes());
    h[16..24].copy_from_slice(&len.to_le_bytes());
    out.write_all(&h)
}

fn words_as_bytes(w: &[i64]) -> &[u8] {
    // SAFETY: any initialised i64 slice is a valid byte slice of 8x its length; the wire is
    // little endian, as every platform the recorder runs on (x86-64, aarch64) is.
    unsafe { std::slice::from_raw_parts(w.as_ptr().cast::<u8>(), std::mem::size_of_val(w)) }
}

/// What the tracer has recorded since its last flush, in wire layout: filled under the
/// interpreter lock, written by the writer thread ([`Outbox::write_to`]), then cleared and
/// handed back for reuse.
#[derive(Default, Debug)]
pub struct Outbox {
    /// Row-major int64 rows per event tag.
    pub events: [Vec<i64>; 5],
    /// New symbols: their frame's payload after its `ts`.
    pub symbols: Vec<u8>,
    /// Number of symbols in `symbols`.
    pub symbol_rows: u32,
    /// Rows of code objects (5 words each).
    pub code: Vec<i64>,
    /// Rows of threads (4 words each).
    pub threads: Vec<i64>,
    /// Frames already encoded (hello, source, end), written after the others.
    pub tail: Vec<u8>,
    /// Timestamp of the symbols frame.
    pub ts: i64,
}

impl Outbox {
    /// Events held (rows of the event tags).
    pub fn events_len(&self) -> usize {
        (0..5).map(|t| self.events[t].len() / event_width(t)).sum()
    }

    /// Adds a symbol (its id and text) to the next symbols frame.
    pub fn push_symbol(&mut self, id: u32, text: &[u8]) {
        self.symbols.extend_from_slice(&id.to_le_bytes());
        self.symbols.extend_from_slice(&(text.len() as u32).to_le_bytes());
        self.symbols.extend_from_slice(text);
        self.symbol_rows += 1;
    }

    /// Appends an already-encoded frame of `tag` with a byte payload.
    pub fn push_frame(&mut self, tag: u32, rows: u32, payload: &[u8]) {
        self.tail.extend_from_slice(&MAGIC.to_le_bytes());
        self.tail.extend_from_slice(&tag.to_le_bytes());
        self.tail.extend_from_slice(&rows.to_le_bytes());
        self.tail.extend_from_slice(&0u32.to_le_bytes());
        self.tail.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        self.tail.extend_from_slice(payload);
    }

    /// Appends a source file frame.
    pub fn push_source(&mut self, ts: i64, path: &str, text: &str) {
        let mut p = Vec::with_capacity(16 + path.len() + text.len());
        p.extend_from_slice(&ts.to_le_bytes());
        p.extend_from_slice(&(path.len() as u32).to_le_bytes());
        p.extend_from_slice(&(text.len() as u32).to_le_bytes());
        p.extend_from_slice(path.as_bytes());
        p.extend_from_slice(text.as_bytes());
        self.push_frame(TAG_SOURCE, 1, &p);
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.symbol_rows == 0
            && self.code.is_empty()
            && self.threads.is_empty()
            && self.tail.is_empty()
            && self.events.iter().all(Vec::is_empty)
    }

    /// Writes every frame held: symbols first, then code and threads (which name symbols),
    /// then events, then the encoded tail.
    pub fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        if self.symbol_rows > 0 {
            header(out, TAG_SYMBOLS, self.symbol_rows, 8 + self.symbols.len() as u64)?;
            out.write_all(&self.ts.to_le_bytes())?;
            out.write_all(&self.symbols)?;
        }
        for (tag, rows, w) in [(TAG_CODE, &self.code, 5), (TAG_THREAD, &self.threads, 4)] {
            if !rows.is_empty() {
                header(out, tag, (rows.len() / w) as u32, 8 * rows.len() as u64)?;
                out.write_all(words_as_bytes(rows))?;
            }
        }
        for (t, rows) in self.events.iter().enumerate() {
            if !rows.is_empty() {
                header(out, t as u32, (rows.len() / event_width(t)) as u32, 8 * rows.len() as u64)?;
                out.write_all(words_as_bytes(rows))?;
            }
        }
        out.write_all(&self.tail)
    }

    /// Empties every buffer, keeping their allocations.
    pub fn clear(&mut self) {
        for e in &mut self.events {
            e.clear();
        }
        self.symbols.clear();
        self.symbol_rows = 0;
        self.code.clear();
        self.threads.clear();
        self.tail.clear();
    }
}

/// A thread the recording saw: its producer id, OS-level identity and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadRow {
    /// Timestamp of its first event.
    pub ts: i64,
    /// Producer id in the trace (1, 2, ... in order of first event).
    pub producer: i64,
    /// `threading.get_ident()` of the thread.
    pub ident: i64,
    /// Its name (`threading.current_thread().name`) when it was first seen.
    pub name: String,
}

/// What one [`WireReader::read`] decoded.
#[derive(Debug, Default)]
pub struct Chunk {
    /// Record batches by event type name.
    pub batches: Vec<(&'static str, RecordBatch)>,
    /// Threads first seen in this chunk.
    pub threads: Vec<ThreadRow>,
    /// The hello frame's JSON, when this chunk held it.
    pub hello: Option<String>,
    /// The end frame's JSON, when this chunk held it.
    pub end: Option<String>,
    /// The stream ended (after this chunk nothing more comes).
    pub eof: bool,
}

impl Chunk {
    /// Events in the batches of the five event types.
    pub fn events(&self) -> usize {
        self.batches.iter().filter(|(n, _)| EVENT_TAGS.contains(n)).map(|(_, b)| b.num_rows()).sum()
    }
}

/// A stream the reader cannot decode: what was wrong and at which byte.
#[derive(Debug)]
pub struct WireError {
    /// Byte offset of the frame in the stream.
    pub offset: u64,
    /// What was expected.
    pub message: String,
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "recorder stream, byte {}: {}", self.offset, self.message)
    }
}

impl std::error::Error for WireError {}

/// Decodes a recorder stream into record batches (see the module docs).
pub struct WireReader<R: Read> {
    input: R,
    offset: u64,
    symbols: Vec<Option<String>>,
    /// Next seq of producer 0 (symbol, code and source rows).
    meta_seq: i64,
    done: bool,
    payload: Vec<u8>,
    /// The payloads of this read's event frames, back to back (reused from read to read: no
    /// fresh pages), and each frame's (tag, start, rows): transposed into exactly sized
    /// columns once the read knows each type's rows.
    arena: Vec<u8>,
    frames: Vec<(usize, usize, usize)>,
    /// Added to every event's ts (see [`WireReader::with_ts_offset`]).
    ts_offset: i64,
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn le_i64(b: &[u8], at: usize) -> i64 {
    i64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl<R: Read> WireReader<R> {
    /// A reader of `input` from its first byte.
    pub fn new(input: R) -> Self {
        Self {
            input,
            offset: 0,
            symbols: vec![None],
            meta_seq: 0,
            done: false,
            payload: Vec::new(),
            arena: Vec::new(),
            frames: Vec::new(),
            ts_offset: 0,
        }
    }

    /// A reader that adds `ts_offset` to the ts of every event (a stream replayed after
    /// another into one trace, as the ingest benchmark does, stays in time order).
    pub fn with_ts_offset(mut self, ts_offset: i64) -> Self {
        self.ts_offset = ts_offset;
        self
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The text of symbol `id`, once its frame was read.
    pub fn symbol(&self, id: i64) -> Option<&str> {
        usize::try_from(id).ok().and_then(|i| self.symbols.get(i)).and_then(|s| s.as_deref())
    }

    fn err(&self, at: u64, message: impl Into<String>) -> WireError {
        WireError { offset: at, message: message.into() }
    }

    /// Reads into `buf` until it is full or the input ends; returns the bytes read.
    fn read_full(input: &mut R, buf: &mut [u8]) -> Result<usize, io::Error> {
        let mut got = 0;
        while got < buf.len() {
            match input.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(got)
    }

    /// The next frame header; None at a clean end of input (before a header's first byte).
    fn read_header(&mut self) -> Result<Option<[u8; HEADER]>, WireError> {
        let mut head = [0u8; HEADER];
        let got = Self::read_full(&mut self.input, &mut head)
            .map_err(|e| self.err(self.offset, format!("read failed: {e}")))?;
        match got {
            0 => Ok(None),
            HEADER => Ok(Some(head)),
            _ => Err(self.err(self.offset, format!("the stream ends inside a frame header ({got} of {HEADER} bytes)"))),
        }
    }

    /// Appends a payload of `len` bytes to `buf`, read in steps of at most 1 MiB (a damaged
    /// length never reserves more memory than the input actually holds, plus one step) straight
    /// into its spare capacity (nothing zeroed first).
    fn append_payload(input: &mut R, buf: &mut Vec<u8>, len: usize, offset: u64) -> Result<(), WireError> {
        let (start, end) = (buf.len(), buf.len() + len);
        while buf.len() < end {
            let step = (end - buf.len()).min(1 << 20);
            buf.reserve(step);
            let got = input
                .by_ref()
                .take(step as u64)
                .read_to_end(buf)
                .map_err(|e| WireError { offset, message: format!("read failed: {e}") })?;
            if got < step {
                return Err(WireError {
                    offset,
                    message: format!("the stream ends inside a frame payload ({} of {len} bytes)", buf.len() - start),
                });
            }
        }
        Ok(())
    }

    /// Reads frames until about `max_rows` events are decoded or the input ends.
    pub fn read(&mut self, max_rows: usize) -> Result<Chunk, WireError> {
        let mut chunk = Chunk::default();
        if self.done {
            chunk.eof = true;
            return Ok(chunk);
        }
        // (A read that failed left its frames here: they are dropped with its chunk.)
        self.arena.clear();
        self.frames.clear();
        let mut rows_seen = 0usize;
        while rows_seen < max_rows.max(1) {
            let Some(head) = self.read_header()? else {
                self.done = true;
                chunk.eof = true;
                break;
            };
            let at = self.offset;
            let magic = le_u32(&head, 0);
            if magic != MAGIC {
                return Err(self.err(at, format!("expected a frame (magic {MAGIC:#x}), found {magic:#x}")));
            }
            let (tag, rows) = (le_u32(&head, 4), le_u32(&head, 8) as usize);
            let len = u64::from_le_bytes(head[16..24].try_into().expect("8 bytes"));
            if len > MAX_PAYLOAD {
                return Err(self.err(at, format!("frame payload of {len} bytes (at most {MAX_PAYLOAD})")));
            }
            if (tag as usize) < EVENT_TAGS.len() {
                let width = event_width(tag as usize);
                if rows.checked_mul(width * 8) != Some(len as usize) {
                    return Err(self.err(
                        at,
                        format!("{rows} rows of {width} words need {} bytes, the frame has {len}", rows * width * 8),
                    ));
                }
                let start = self.arena.len();
                Self::append_payload(&mut self.input, &mut self.arena, len as usize, at)?;
                self.frames.push((tag as usize, start, rows));
                self.offset += HEADER as u64 + len;
                rows_seen += rows;
                continue;
            }
            self.payload.clear();
            Self::append_payload(&mut self.input, &mut self.payload, len as usize, at)?;
            self.offset += HEADER as u64 + len;
            rows_seen += rows;
            self.decode(at, tag, rows, &mut chunk)?;
            if chunk.end.is_some() {
                // Nothing may follow the end frame: the stream is complete. The read ends here,
                // not at the input's end: the traced process closes its end of the pipe only
                // when it exits, and its interpreter's teardown (10-30 ms) would otherwise come
                // before the storing of the recording's last chunk instead of beside it.
                self.done = true;
                chunk.eof = true;
                break;
            }
        }
        self.take_pending(&mut chunk);
        Ok(chunk)
    }

    /// The event rows decoded by this read as one batch per type, after the symbols, code
    /// and sources they refer to (one append of a type per read, not one per frame: a read
    /// of 262,144 events held 40 frames of 5 types).
    fn take_pending(&mut self, chunk: &mut Chunk) {
        for (t, name) in EVENT_TAGS.iter().enumerate() {
            let rows: usize = self.frames.iter().filter(|f| f.0 == t).map(|f| f.2).sum();
            if rows == 0 {
                continue;
            }
            let width = event_width(t);
            let mut cols = Columns::new(width, rows);
            for &(_, start, n) in self.frames.iter().filter(|f| f.0 == t) {
                cols.push_rows(&self.arena[start..start + n * width * 8], width, self.ts_offset);
            }
            chunk.batches.push((name, batch(name, cols.finish())));
        }
    }

    fn decode(&mut self, at: u64, tag: u32, rows: usize, chunk: &mut Chunk) -> Result<(), WireError> {
        let p = std::mem::take(&mut self.payload);
        let r = self.decode_payload(at, tag, rows, &p, chunk);
        self.payload = p;
        r
    }

    fn words(&self, at: u64, p: &[u8], rows: usize, width: usize) -> Result<Vec<i64>, WireError> {
        if rows.checked_mul(width * 8) != Some(p.len()) {
            return Err(self.err(
                at,
                format!("{rows} rows of {width} words need {} bytes, the frame has {}", rows * width * 8, p.len()),
            ));
        }
        Ok(p.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes"))).collect())
    }

    fn text(&self, at: u64, id: i64) -> Result<String, WireError> {
        self.symbol(id).map(str::to_owned).ok_or_else(|| self.err(at, format!("symbol {id} used before it was sent")))
    }

    fn next_meta_seqs(&mut self, n: usize) -> Vec<i64> {
        let s = (self.meta_seq..self.meta_seq + n as i64).collect();
        self.meta_seq += n as i64;
        s
    }

    fn decode_payload(&mut self, at: u64, tag: u32, rows: usize, p: &[u8], chunk: &mut Chunk) -> Result<(), WireError> {
        match tag {
            TAG_SYMBOLS => {
                if p.len() < 8 {
                    return Err(self.err(at, "a symbols frame shorter than its timestamp"));
                }
                let ts = le_i64(p, 0);
                // A symbol takes at least 8 bytes: a damaged row count cannot reserve more.
                let cap = rows.min(p.len() / 8);
                let (mut ids, mut texts) = (Vec::with_capacity(cap), Vec::with_capacity(cap));
                let mut k = 8;
                for _ in 0..rows {
                    if k + 8 > p.len() {
                        return Err(self.err(at, "a symbols frame cut inside a symbol"));
                    }
                    let (id, n) = (le_u32(p, k) as usize, le_u32(p, k + 4) as usize);
                    k += 8;
                    if k + n > p.len() {
                        return Err(self.err(at, format!("symbol {id}: {n} bytes announced, the frame ends first")));
                    }
                    let s = String::from_utf8_lossy(&p[k..k + n]).into_owned();
                    k += n;
                    if id != self.symbols.len() {
                        return Err(self.err(at, format!("symbol {id} out of order (expected {})", self.symbols.len())));
                    }
                    self.symbols.push(Some(s.clone()));
                    ids.push(id as i64);
                    texts.push(s);
                }
                if k != p.len() {
                    return Err(self.err(at, format!("{} bytes after the last symbol", p.len() - k)));
                }
                let seqs = self.next_meta_seqs(rows);
                let cols: Vec<ArrayRef> = vec![
                    i64s(vec![ts; rows]),
                    Arc::new(Int32Array::from(vec![0; rows])),
                    i64s(seqs),
                    i64s(ids),
                    Arc::new(StringArray::from(texts)),
                ];
                chunk.batches.push(("symbol", batch("symbol", cols)));
            }
            TAG_CODE => {
                let w = self.words(at, p, rows, 5)?;
                let (mut ts, mut ids, mut files, mut names, mut lines) = (vec![], vec![], vec![], vec![], vec![]);
                for r in w.chunks_exact(5) {
                    ts.push(r[0]);
                    ids.push(r[1]);
                    files.push(self.text(at, r[2])?);
                    names.push(self.text(at, r[3])?);
                    lines.push(r[4]);
                }
                let seqs = self.next_meta_seqs(rows);
                let cols: Vec<ArrayRef> = vec![
                    i64s(ts),
                    Arc::new(Int32Array::from(vec![0; rows])),
                    i64s(seqs),
                    i64s(ids),
                    Arc::new(StringArray::from(files)),
                    Arc::new(StringArray::from(names)),
                    i64s(lines),
                ];
                chunk.batches.push(("code", batch("code", cols)));
            }
            TAG_THREAD => {
                let w = self.words(at, p, rows, 4)?;
                for r in w.chunks_exact(4) {
                    let name = self.text(at, r[3])?;
                    chunk.threads.push(ThreadRow { ts: r[0], producer: r[1], ident: r[2], name });
                }
            }
            TAG_SOURCE => {
                if p.len() < 16 {
                    return Err(self.err(at, "a source frame shorter than its header"));
                }
                let (ts, pl, tl) = (le_i64(p, 0), le_u32(p, 8) as usize, le_u32(p, 12) as usize);
                if 16 + pl + tl != p.len() {
                    return Err(
                        self.err(at, format!("a source frame of {} bytes announcing {}", p.len(), 16 + pl + tl))
                    );
                }
                let path = String::from_utf8_lossy(&p[16..16 + pl]).into_owned();
                let text = String::from_utf8_lossy(&p[16 + pl..]).into_owned();
                let seqs = self.next_meta_seqs(1);
                let cols: Vec<ArrayRef> = vec![
                    i64s(vec![ts]),
                    Arc::new(Int32Array::from(vec![0])),
                    i64s(seqs),
                    Arc::new(StringArray::from(vec![path])),
                    Arc::new(StringArray::from(vec![text])),
                ];
                chunk.batches.push(("source", batch("source", cols)));
            }
            TAG_HELLO | TAG_END => {
                let s = std::str::from_utf8(p).map_err(|_| self.err(at, "a hello or end frame that is not UTF-8"))?;
                if tag == TAG_HELLO {
                    chunk.hello = Some(s.to_owned());
                } else {
                    chunk.end = Some(s.to_owned());
                }
            }
            _ => return Err(self.err(at, format!("unknown frame tag {tag}"))),
        }
        Ok(())
    }
}

fn i64s(v: Vec<i64>) -> ArrayRef {
    Arc::new(Int64Array::new(ScalarBuffer::from(v), None))
}

fn batch(name: &str, cols: Vec<ArrayRef>) -> RecordBatch {
    RecordBatch::try_new(schema(name), cols).expect("columns built to the declared schema")
}

/// The columns of one event type's batch, filled from row-major frames: `ts, producer
/// (int32), seq` and the parameters, each allocated once at its final size.
struct Columns {
    producer: Vec<i32>,
    words: Vec<Vec<i64>>,
}

/// Rows transposed at a time: a block of rows (at most 12 words each) stays in the L1 cache
/// while each of its columns is copied out.
const BLOCK_ROWS: usize = 256;

impl Columns {
    fn new(width: usize, rows: usize) -> Self {
        let words = (0..width).map(|c| Vec::with_capacity(if c == 1 { 0 } else { rows })).collect();
        Self { producer: Vec::with_capacity(rows), words }
    }

    /// Appends the rows of `p` (row-major little-endian int64 rows of `width` words),
    /// `ts_offset` added to ts.
    fn push_rows(&mut self, p: &[u8], width: usize, ts_offset: i64) {
        for block in p.chunks(BLOCK_ROWS * width * 8) {
            let rows = || block.chunks_exact(width * 8);
            self.producer.extend(rows().map(|r| le_i64(r, 8) as i32));
            for (c, col) in self.words.iter_mut().enumerate() {
                match c {
                    0 => col.extend(rows().map(|r| le_i64(r, 0).wrapping_add(ts_offset))),
                    1 => {}
                    _ => col.extend(rows().map(|r| le_i64(r, c * 8))),
                }
            }
        }
    }

    fn finish(self) -> Vec<ArrayRef> {
        let mut producer = Some(self.producer);
        self.words
            .into_iter()
            .enumerate()
            .map(|(c, v)| match producer.take_if(|_| c == 1) {
                Some(p) => Arc::new(Int32Array::new(ScalarBuffer::from(p), None)) as ArrayRef,
                None => i64s(v),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;

    fn sample() -> Vec<u8> {
        let mut o = Outbox::default();
        o.push_frame(TAG_HELLO, 0, br#"{"python":"3.11"}"#);
        let mut bytes = Vec::new();
        o.write_to(&mut bytes).unwrap();
        o.clear();
        o.ts = 5;
        o.push_symbol(1, b"prog.py");
        o.push_symbol(2, b"main");
        o.push_symbol(3, b"x");
        o.code.extend_from_slice(&[10, 1, 1, 2, 3]);
        o.threads.extend_from_slice(&[10, 1, 99, 2]);
        // behavior_enter: ts, producer, seq, parent_seq, behavior_id, resumed, frame, call_line, namespace
        o.events[0].extend_from_slice(&[11, 1, 0, -1, 1, 0, 777, 0, 0]);
        // var_write: ts, producer, seq, parent_seq, var_id, kind, value, type, repr, snapshot
        o.events[2].extend_from_slice(&[12, 1, 1, 0, 3, 3, 42, 0, 0, 0]);
        o.events[2].extend_from_slice(&[13, 1, 2, 0, 3, 3, 43, 0, 0, 0]);
        o.push_source(14, "prog.py", "x = 42\n");
        o.push_frame(TAG_END, 0, br#"{"status":0}"#);
        o.write_to(&mut bytes).unwrap();
        bytes
    }

    #[test]
    fn frames_round_trip_into_batches() {
        let bytes = sample();
        let mut r = WireReader::new(&bytes[..]);
        let c = r.read(1 << 20).unwrap();
        assert_eq!(c.hello.as_deref(), Some(r#"{"python":"3.11"}"#));
        assert_eq!(c.end.as_deref(), Some(r#"{"status":0}"#));
        assert_eq!(c.threads, vec![ThreadRow { ts: 10, producer: 1, ident: 99, name: "main".into() }]);
        let names: Vec<&str> = c.batches.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["symbol", "code", "source", "behavior_enter", "var_write"]);
        let vw = &c.batches[4].1;
        assert_eq!(vw.num_rows(), 2);
        let value = vw.column_by_name("value").unwrap().as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(value.values().to_vec(), vec![42, 43]);
        let code = &c.batches[1].1;
        let file = code.column_by_name("file").unwrap().as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(file.value(0), "prog.py");
        assert_eq!(c.events(), 3);
        // Producer 0's rows (symbols, code, source) are numbered 0, 1, 2, ... across frames.
        let seq = |b: &RecordBatch| {
            b.column_by_name("seq").unwrap().as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec()
        };
        assert_eq!(seq(&c.batches[0].1), vec![0, 1, 2]);
        assert_eq!(seq(code), vec![3]);
        assert_eq!(seq(&c.batches[2].1), vec![4]);
        assert!(r.read(10).unwrap().eof);
    }

    /// An input that fails every read past its bytes (a pipe whose writer has not closed it).
    struct Open<'a>(&'a [u8]);

    impl Read for Open<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Err(io::Error::other("read past the end frame"));
            }
            let n = buf.len().min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn the_end_frame_ends_the_stream_without_waiting_for_the_input_to_close() {
        let bytes = sample();
        let mut r = WireReader::new(Open(&bytes));
        let c = r.read(1 << 20).unwrap();
        assert!(c.eof && c.end.is_some());
        assert_eq!(c.events(), 3);
        assert!(r.read(10).unwrap().eof);
    }

    #[test]
    fn a_cut_stream_is_an_error_naming_the_offset() {
        let bytes = sample();
        for cut in [3, HEADER + 2, bytes.len() - 3] {
            let mut r = WireReader::new(&bytes[..cut]);
            let mut err = None;
            for _ in 0..10 {
                match r.read(1) {
                    Ok(c) if c.eof => break,
                    Ok(_) => {}
                    Err(e) => {
                        err = Some(e);
                        break;
                    }
                }
            }
            let e = err.unwrap_or_else(|| panic!("cut at {cut} read as complete"));
            assert!(e.to_string().contains("ends inside"), "{e}");
        }
    }

    #[test]
    fn garbage_never_panics() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let good = sample();
        for round in 0..2000 {
            let mut bytes = good.clone();
            for _ in 0..(round % 7 + 1) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let i = (x as usize) % bytes.len();
                bytes[i] = (x >> 32) as u8;
            }
            let mut r = WireReader::new(&bytes[..]);
            for _ in 0..20 {
                match r.read(1 << 10) {
                    Ok(c) if c.eof => break,
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        }
    }

    #[test]
    fn symbols_must_arrive_before_use() {
        let mut o = Outbox::default();
        o.code.extend_from_slice(&[10, 1, 7, 7, 3]);
        let mut bytes = Vec::new();
        o.write_to(&mut bytes).unwrap();
        let e = WireReader::new(&bytes[..]).read(10).unwrap_err();
        assert!(e.to_string().contains("symbol 7 used before"), "{e}");
        assert_eq!(e.offset, 0);
    }

    #[test]
    fn widths_follow_the_declaration() {
        assert_eq!(event_width(0), 9);
        assert_eq!(event_width(2), 10);
        assert_eq!(event_width(3), 12);
        assert_eq!(event_width(4), 6);
        for (t, name) in EVENT_TAGS.iter().enumerate() {
            assert_eq!(schema(name).fields().len(), event_width(t));
            assert!(!schema(name).field(3).is_nullable());
        }
    }

    #[test]
    fn transposed_columns_keep_row_order() {
        let w = event_width(4);
        let words: Vec<i64> = (0..3 * w as i64).collect();
        let mut cols = Columns::new(w, 4);
        cols.push_rows(words_as_bytes(&words), w, 100);
        cols.push_rows(words_as_bytes(&words[..w]), w, 0);
        assert_eq!(cols.words[5], vec![5, 5 + w as i64, 5 + 2 * w as i64, 5]);
        assert_eq!(cols.words[0], vec![100, 100 + w as i64, 100 + 2 * w as i64, 0]);
        assert_eq!(cols.producer, vec![1, 1 + w as i32, 1 + 2 * w as i32, 1]);
        let many: Vec<i64> = (0..(3 * BLOCK_ROWS as i64 + 7) * w as i64).collect();
        let mut cols = Columns::new(w, 3 * BLOCK_ROWS + 7);
        cols.push_rows(words_as_bytes(&many), w, 0);
        let arrays = cols.finish();
        let line = arrays[5].as_any().downcast_ref::<Int64Array>().unwrap();
        assert!(line.values().iter().enumerate().all(|(r, &v)| v == (r * w + 5) as i64));
        assert_eq!(arrays[1].len(), 3 * BLOCK_ROWS + 7);
    }

    #[test]
    fn frames_of_one_type_in_a_read_are_one_batch_with_the_offset() {
        let mut o = Outbox::default();
        let mut bytes = Vec::new();
        for k in 0..3 {
            o.events[4].extend_from_slice(&[10 + k, 1, k, -1, 1, 7]);
            o.write_to(&mut bytes).unwrap();
            o.clear();
        }
        let mut r = WireReader::new(&bytes[..]).with_ts_offset(1000);
        let c = r.read(1 << 20).unwrap();
        assert_eq!(c.batches.len(), 1);
        let ts = c.batches[0].1.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(ts.values().to_vec(), vec![1010, 1011, 1012]);
        // A read stops once max_rows are seen: the rest comes with the next.
        let mut r = WireReader::new(&bytes[..]);
        assert_eq!(r.read(2).unwrap().events(), 2);
        assert_eq!(r.read(2).unwrap().events(), 1);
    }
}
