//! Parquet files of integer columns, written natively: the segments of integer-only event types.
//!
//! Owns one narrow Parquet writer: a flat schema of int32/int64 columns (nullable or not), each
//! column chunk one data page (V1), integers DELTA_BINARY_PACKED and uncompressed, chosen
//! columns (`producer`) dictionary-encoded (RLE_DICTIONARY, bit-packed/RLE indices; a chunk of
//! more than 65,536 distinct values falls back to delta), row-group statistics (min, max, null
//! count, exact), a CRC-32 in every page header (checked by `tracehouse verify`, compaction and
//! export: a flipped byte in a page is an error, not a wrong sum), encoding stats, the column
//! orders and the caller's key-value metadata
//! (pyarrow's `ARROW:schema`). These are the encodings `store/segments.py` asks of parquet-cpp
//! for such columns (parquet-cpp packs deltas in blocks of 256 values, here 128; both valid),
//! so readers (DuckDB, pyarrow, Spark) see the same file shape; everything else (floats,
//! strings, compression) stays with parquet-cpp. Reviewed against parquet.thrift and
//! Encodings.md; read back by pyarrow, DuckDB and polars.
//!
//! Why by hand: at a checkpoint of TOD events (every column an integer) parquet-cpp's
//! DELTA_BINARY_PACKED encoder alone (`DeltaBitPackEncoder::FlushBlock`/`Put`, a bit writer
//! call per value) was ~20 % of the streaming ingest's CPU and the encoding as a whole ~37 %
//! (perf, 10M TOD events, 2.3 CPU-s); the ingest is CPU-bound on 2 cores. Here a miniblock of
//! 32 deltas is packed through one 128-bit accumulator and the statistics, levels and
//! dictionary are taken in the same pass over each column. Measured: see
//! `python/tracehouse/store/segments.py` (`write_segment`).
//!
//! Format references: the Parquet format's `parquet.thrift` (thrift compact protocol) and
//! `Encodings.md` (DELTA_BINARY_PACKED: block of 128 values in 4 miniblocks; the RLE/bit-packing
//! hybrid for levels and dictionary indices).

use std::io::{self, Write};

use arrow_array::{Array, Int32Array, Int64Array, RecordBatch};
use arrow_buffer::NullBuffer;
use arrow_schema::DataType;
use rustc_hash::FxHashMap;

/// What a column holds, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnSpec {
    /// Column name (a top-level field).
    pub name: String,
    /// true: int64 (Parquet INT64); false: int32 (INT32).
    pub wide: bool,
    /// OPTIONAL (definition levels) or REQUIRED.
    pub nullable: bool,
    /// Dictionary-encoded (RLE_DICTIONARY) rather than DELTA_BINARY_PACKED.
    pub dictionary: bool,
    /// A CRC-32 in each page header (off only to measure what it costs).
    pub checksums: bool,
}

/// A dictionary grows no larger than this; a chunk with more distinct values is delta-packed.
const MAX_DICTIONARY: usize = 1 << 16;
const BLOCK: usize = 128;
const MINIBLOCKS: usize = 4;
const MINI: usize = BLOCK / MINIBLOCKS;

// Parquet enums (parquet.thrift).
const T_INT32: i32 = 1;
const T_INT64: i32 = 2;
const REQUIRED: i32 = 0;
const OPTIONAL: i32 = 1;
const E_PLAIN: i32 = 0;
const E_RLE: i32 = 3;
const E_DELTA: i32 = 5;
const E_RLE_DICTIONARY: i32 = 8;
const PAGE_DATA: i32 = 0;
const PAGE_DICTIONARY: i32 = 2;

// -- thrift compact protocol ----------------------------------------------------------------

const CT_TRUE: u8 = 1;
const CT_I32: u8 = 5;
const CT_I64: u8 = 6;
const CT_BINARY: u8 = 8;
const CT_LIST: u8 = 9;
const CT_STRUCT: u8 = 12;

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// A thrift compact-protocol encoder (only what the metadata needs).
struct Thrift {
    out: Vec<u8>,
    last: Vec<i16>,
}

impl Thrift {
    fn new() -> Self {
        Self { out: Vec::new(), last: vec![0] }
    }
    fn field(&mut self, id: i16, ty: u8) {
        let last = self.last.last_mut().expect("in a struct");
        let delta = id - *last;
        if (1..=15).contains(&delta) {
            self.out.push(((delta as u8) << 4) | ty);
        } else {
            self.out.push(ty);
            varint(&mut self.out, zigzag(id as i64));
        }
        *last = id;
    }
    fn i32(&mut self, id: i16, v: i32) {
        self.field(id, CT_I32);
        varint(&mut self.out, zigzag(v as i64));
    }
    fn i64(&mut self, id: i16, v: i64) {
        self.field(id, CT_I64);
        varint(&mut self.out, zigzag(v));
    }
    fn binary(&mut self, id: i16, v: &[u8]) {
        self.field(id, CT_BINARY);
        self.raw_binary(v);
    }
    fn raw_binary(&mut self, v: &[u8]) {
        varint(&mut self.out, v.len() as u64);
        self.out.extend_from_slice(v);
    }
    fn bool_true(&mut self, id: i16) {
        self.field(id, CT_TRUE); // (a compact boolean field carries its value in the type)
    }
    fn list(&mut self, id: i16, elem: u8, len: usize) {
        self.field(id, CT_LIST);
        self.list_header(elem, len);
    }
    fn list_header(&mut self, elem: u8, len: usize) {
        if len < 15 {
            self.out.push(((len as u8) << 4) | elem);
        } else {
            self.out.push(0xf0 | elem);
            varint(&mut self.out, len as u64);
        }
    }
    /// A struct field: `begin_struct` after its header, `end` after its fields.
    fn struct_field(&mut self, id: i16) {
        self.field(id, CT_STRUCT);
        self.begin();
    }
    /// A struct as a list element (no field header).
    fn begin(&mut self) {
        self.last.push(0);
    }
    fn end(&mut self) {
        self.out.push(0);
        self.last.pop();
    }
}

// -- encoders ---------------------------------------------------------------------------

/// Packs 32 values (already reduced by the block's minimum delta) at `W` bits, LSB first.
/// `W` is a constant so the loop unrolls into fixed shifts (one instance per width).
#[inline(always)]
fn pack32_const<const W: u32>(out: &mut Vec<u8>, vals: &[u64; MINI]) {
    // Written out 32 times: every value's word and shift are constants for this W (a running
    // accumulator kept a variable shift and a branch per value).
    let mut words = [0u64; MINI + 1];
    macro_rules! one {
        ($($i:literal)*) => {$(
            let p = $i * W;
            let (wi, sh) = ((p / 64) as usize, p % 64);
            words[wi] |= vals[$i] << sh;
            if sh + W > 64 {
                words[wi + 1] |= vals[$i] >> (64 - sh);
            }
        )*};
    }
    one!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
    let bytes = W as usize * 4; // 32 x W bits
    for w in &mut words {
        *w = w.to_le(); // (a no-op here; the bytes below are little-endian words)
    }
    // SAFETY: `words` is 33 x 8 initialized bytes and `bytes` <= 256.
    out.extend_from_slice(unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, bytes) });
}

macro_rules! pack_widths {
    ($w:expr, $out:expr, $vals:expr; $($n:literal)*) => {
        match $w {
            0 => {}
            $($n => pack32_const::<$n>($out, $vals),)*
            _ => unreachable!("a width above 64"),
        }
    };
}

/// Packs 32 values at `width` bits (0..=64), LSB first: 4 x `width` bytes.
fn pack32(out: &mut Vec<u8>, vals: &[u64; MINI], width: u32) {
    pack_widths!(width, out, vals; 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29
        30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64)
}

/// DELTA_BINARY_PACKED, fed value by value; `finish` prepends the header.
struct DeltaEncoder {
    /// INT32: deltas are taken in 32-bit wrapping arithmetic, as readers undo them (a 33-bit
    /// delta of two int32 values is refused: "InitBlock EOF").
    narrow: bool,
    first: i64,
    prev: i64,
    count: u64,
    deltas: [i64; BLOCK],
    n: usize,
    body: Vec<u8>,
}

impl DeltaEncoder {
    /// An encoder writing its blocks into `body` (cleared; reused across chunks).
    fn new(mut body: Vec<u8>, narrow: bool) -> Self {
        body.clear();
        Self { narrow, first: 0, prev: 0, count: 0, deltas: [0; BLOCK], n: 0, body }
    }

    #[cfg(test)]
    fn put(&mut self, v: i64) {
        self.put_slice(&[v]);
    }

    fn put_slice(&mut self, s: &[i64]) {
        let Some(&head) = s.first() else { return };
        self.count += s.len() as u64;
        let mut prev = self.prev;
        let mut rest = s;
        if self.count == s.len() as u64 {
            self.first = head;
            prev = head;
            rest = &s[1..];
        }
        // A block's worth at a time: the subtraction loop vectorizes (value by value, with the
        // block-full check between, it was the writer's hottest loop).
        while !rest.is_empty() {
            let take = (BLOCK - self.n).min(rest.len());
            let dst = &mut self.deltas[self.n..self.n + take];
            let src = &rest[..take];
            if self.narrow {
                dst[0] = (src[0] as i32).wrapping_sub(prev as i32) as i64;
                for i in 1..take {
                    dst[i] = (src[i] as i32).wrapping_sub(src[i - 1] as i32) as i64;
                }
            } else {
                dst[0] = src[0].wrapping_sub(prev);
                for i in 1..take {
                    dst[i] = src[i].wrapping_sub(src[i - 1]);
                }
            }
            prev = src[take - 1];
            self.n += take;
            rest = &rest[take..];
            if self.n == BLOCK {
                self.flush_block();
            }
        }
        self.prev = prev;
    }

    fn flush_block(&mut self) {
        let n = self.n;
        let min = self.deltas[..n].iter().copied().min().unwrap_or(0);
        varint(&mut self.body, zigzag(min));
        let widths_at = self.body.len();
        self.body.extend_from_slice(&[0u8; MINIBLOCKS]);
        let mut vals = [0u64; MINI];
        for m in 0..MINIBLOCKS {
            let start = m * MINI;
            if start >= n {
                break; // unused miniblocks: width 0, no data
            }
            let end = (start + MINI).min(n);
            let mut or = 0u64;
            for (i, d) in self.deltas[start..end].iter().enumerate() {
                let v = if self.narrow {
                    (*d as i32).wrapping_sub(min as i32) as u32 as u64
                } else {
                    d.wrapping_sub(min) as u64
                };
                vals[i] = v;
                or |= v;
            }
            vals[end - start..].fill(0); // the last miniblock is padded to 32 values
            let width = 64 - or.leading_zeros();
            self.body[widths_at + m] = width as u8;
            pack32(&mut self.body, &vals, width);
        }
        self.n = 0;
    }

    /// Flushes the last block; returns the header (to precede the body) and the body.
    fn finish(mut self) -> (Vec<u8>, Vec<u8>) {
        if self.n > 0 {
            self.flush_block();
        }
        let mut head = Vec::with_capacity(24);
        varint(&mut head, BLOCK as u64);
        varint(&mut head, MINIBLOCKS as u64);
        varint(&mut head, self.count);
        varint(&mut head, zigzag(self.first));
        (head, self.body)
    }
}

/// The RLE/bit-packing hybrid of `values` at `width` bits (1..=32): runs of 8 or more equal
/// values are RLE runs, the rest bit-packed in groups of 8 (the last group zero-padded).
fn hybrid<T: Copy + PartialEq + Into<u32>>(out: &mut Vec<u8>, values: &[T], width: u32) {
    let n = values.len();
    let bytes = width.div_ceil(8) as usize;
    let run_at = |i: usize| {
        let v = values[i];
        values[i..].iter().take_while(|&&x| x == v).count()
    };
    let mut i = 0;
    while i < n {
        let run = run_at(i);
        if run >= 8 {
            varint(out, (run as u64) << 1);
            out.extend_from_slice(&values[i].into().to_le_bytes()[..bytes]);
            i += run;
            continue;
        }
        // Literal groups until a run of 8 starts at a group boundary (or the end).
        let start = i;
        loop {
            i = (i + 8).min(n);
            if i >= n || run_at(i) >= 8 {
                break;
            }
        }
        let groups = (i - start).div_ceil(8);
        varint(out, ((groups as u64) << 1) | 1);
        let mut acc: u64 = 0;
        let mut bits = 0u32;
        for k in 0..groups * 8 {
            let v = if start + k < i { values[start + k].into() as u64 } else { 0 }; // zero padding
            acc |= v << bits;
            bits += width;
            while bits >= 8 {
                out.push(acc as u8);
                acc >>= 8;
                bits -= 8;
            }
        }
    }
}

/// Definition levels (1 present, 0 null) of `n` rows from `valid` (one 0/1 per row; empty:
/// no nulls), with their 4-byte length prefix (data page V1).
fn def_levels(out: &mut Vec<u8>, valid: &[u8], n: usize) {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    if valid.is_empty() {
        varint(out, (n as u64) << 1);
        out.push(1);
    } else {
        hybrid(out, valid, 1);
    }
    let len = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
}

// -- columns -----------------------------------------------------------------------------

/// One column's rows of a row group: slices (array, offset, length) of the batches' arrays.
type Chunk<'a> = Vec<(&'a dyn Array, usize, usize)>;

/// Statistics of a chunk: min, max of the non-null values and the null count.
#[derive(Default)]
struct Stats {
    min: i64,
    max: i64,
    nulls: u64,
    values: u64,
}

impl Stats {
    fn add(&mut self, s: &[i64]) {
        if s.is_empty() {
            return;
        }
        // One pass, written out so that it vectorizes (`iter().min()` did not).
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        for &v in s {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if self.values == 0 {
            (self.min, self.max) = (lo, hi);
        } else {
            (self.min, self.max) = (self.min.min(lo), self.max.max(hi));
        }
        self.values += s.len() as u64;
    }
}

/// Buffers reused from chunk to chunk (a fresh allocation of each chunk's size made the kernel
/// zero new pages: 7 % of the writer's samples).
#[derive(Default)]
struct Scratch {
    widened: Vec<i64>,
    valid: Vec<u8>,
    levels: Vec<u8>,
    body: Vec<u8>,
    idx: Vec<u32>,
    dict: Vec<u8>,
    head: Vec<u8>,
}

thread_local! {
    /// Each encoding thread keeps its buffers from file to file (checkpoints write many).
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// Calls `f` with the chunk's non-null values, as i64 slices in row order (int64 columns
/// without nulls are passed as they are); with nulls, fills `valid` with one 0/1 per row.
/// Returns the null count.
fn for_each_slice(chunk: &Chunk<'_>, wide: bool, sc: &mut Scratch, mut f: impl FnMut(&[i64])) -> u64 {
    let part_nulls =
        |arr: &dyn Array, off: usize, len: usize| arr.nulls().map_or(0, |n| n.slice(off, len).null_count());
    let nulls: usize = chunk.iter().map(|&(a, off, len)| part_nulls(a, off, len)).sum();
    sc.valid.clear();
    for &(arr, off, len) in chunk {
        let nb = arr.nulls().map(|n| n.slice(off, len)).filter(|n| n.null_count() > 0);
        if nulls > 0 {
            match &nb {
                None => sc.valid.resize(sc.valid.len() + len, 1),
                Some(nb) => sc.valid.extend(nb.iter().map(|ok| ok as u8)),
            }
        }
        if wide {
            let vals = &arr.as_any().downcast_ref::<Int64Array>().expect("int64 checked").values()[off..off + len];
            match &nb {
                None => f(vals), // as they are: no copy
                Some(nb) => widen(vals, Some(nb), &mut sc.widened, &mut f),
            }
        } else {
            let vals = &arr.as_any().downcast_ref::<Int32Array>().expect("int32 checked").values()[off..off + len];
            widen(vals, nb.as_ref(), &mut sc.widened, &mut f);
        }
    }
    nulls as u64
}

/// Calls `f` with the non-null values of `vals` (all when `nulls` is None) as i64, through `out`.
fn widen<T: Copy + Into<i64>>(vals: &[T], nulls: Option<&NullBuffer>, out: &mut Vec<i64>, f: &mut impl FnMut(&[i64])) {
    out.clear();
    match nulls {
        None => out.extend(vals.iter().map(|&x| x.into())),
        Some(nb) => out.extend(nb.inner().set_indices().map(|i| vals[i].into())),
    }
    f(out);
}

/// Metadata of a written column chunk.
struct ChunkMeta {
    encodings: Vec<i32>,
    size: i64,
    data_page_offset: i64,
    dictionary_page_offset: Option<i64>,
    stats: Stats,
}

/// The page header of a page of `size` bytes (uncompressed: the same before and after) whose
/// bytes have the CRC-32 `crc` (parquet.thrift `PageHeader.crc`: over the page as stored, after
/// its header; readers that check it, e.g. pyarrow's `page_checksum_verification`, refuse a page
/// whose bytes changed).
fn page_header(
    out: &mut Vec<u8>,
    kind: i32,
    size: usize,
    num_values: usize,
    encoding: i32,
    crc: Option<u32>,
) -> io::Result<()> {
    // Page sizes and counts are i32 in the format: a chunk past that is refused, never wrapped
    // (512K-row row groups are ~4 MiB at most; this guards callers passing huge row groups).
    let too_big = || io::Error::new(io::ErrorKind::InvalidInput, "a column chunk over 2 GiB: use smaller row groups");
    let (size, num_values) =
        (i32::try_from(size).map_err(|_| too_big())?, i32::try_from(num_values).map_err(|_| too_big())?);
    out.clear();
    let mut t = Thrift { out: std::mem::take(out), last: vec![0] };
    t.i32(1, kind);
    t.i32(2, size);
    t.i32(3, size);
    if let Some(crc) = crc {
        t.i32(4, crc as i32);
    }
    if kind == PAGE_DICTIONARY {
        t.struct_field(7);
        t.i32(1, num_values);
        t.i32(2, encoding);
        t.end();
    } else {
        t.struct_field(5);
        t.i32(1, num_values);
        t.i32(2, encoding);
        t.i32(3, E_RLE);
        t.i32(4, E_RLE);
        t.end();
    }
    t.out.push(0);
    *out = t.out;
    Ok(())
}

/// Counts what passes through to the file.
struct Counted<'a, W: Write> {
    w: &'a mut W,
    pos: u64,
}

impl<W: Write> Counted<'_, W> {
    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        self.w.write_all(b)?;
        self.pos += b.len() as u64;
        Ok(())
    }
}

/// The dictionary of a chunk's values and each value's index, when it has at most
/// `MAX_DICTIONARY` distinct values (else false: the chunk is delta-packed).
fn dictionary(chunk: &Chunk<'_>, spec: &ColumnSpec, sc: &mut Scratch, stats: &mut Stats) -> bool {
    let mut map: FxHashMap<i64, u32> = FxHashMap::default();
    let mut idx = std::mem::take(&mut sc.idx);
    let mut dict = std::mem::take(&mut sc.dict);
    idx.clear();
    dict.clear();
    let mut overflow = false;
    stats.nulls = for_each_slice(chunk, spec.wide, sc, |s| {
        stats.add(s);
        for &v in s {
            if overflow {
                return;
            }
            let next = map.len() as u32;
            let i = *map.entry(v).or_insert_with(|| {
                if spec.wide {
                    dict.extend_from_slice(&v.to_le_bytes());
                } else {
                    dict.extend_from_slice(&(v as i32).to_le_bytes());
                }
                next
            });
            idx.push(i);
            overflow = map.len() > MAX_DICTIONARY;
        }
    });
    sc.idx = idx;
    sc.dict = dict;
    !overflow
}

/// Writes one column chunk (rows of one row group) to `w`.
fn write_chunk<W: Write>(
    w: &mut Counted<'_, W>,
    spec: &ColumnSpec,
    chunk: &Chunk<'_>,
    rows: usize,
    sc: &mut Scratch,
) -> io::Result<ChunkMeta> {
    let start = w.pos;
    let mut stats = Stats::default();
    let mut dictionary_page_offset = None;
    let mut encoding = E_DELTA;
    let pre: Vec<u8>; // what precedes the values' bulk: the bit width, or the delta header
    if spec.dictionary && dictionary(chunk, spec, sc, &mut stats) {
        encoding = E_RLE_DICTIONARY;
        dictionary_page_offset = Some(w.pos as i64);
        let n = sc.dict.len() / if spec.wide { 8 } else { 4 };
        let crc = spec.checksums.then(|| crc32fast::hash(&sc.dict));
        page_header(&mut sc.head, PAGE_DICTIONARY, sc.dict.len(), n, E_PLAIN, crc)?;
        w.put(&sc.head)?;
        w.put(&sc.dict)?;
        sc.body.clear();
        let width = (32 - (n.max(2) as u32 - 1).leading_zeros()).max(1);
        pre = vec![width as u8];
        hybrid(&mut sc.body, &sc.idx, width);
    } else {
        stats = Stats::default();
        let mut enc = DeltaEncoder::new(std::mem::take(&mut sc.body), !spec.wide);
        stats.nulls = for_each_slice(chunk, spec.wide, sc, |s| {
            stats.add(s);
            enc.put_slice(s);
        });
        (pre, sc.body) = enc.finish();
    }
    sc.levels.clear();
    if spec.nullable {
        def_levels(&mut sc.levels, &sc.valid, rows);
    }
    let data_page_offset = w.pos as i64;
    let crc = spec.checksums.then(|| {
        let mut h = crc32fast::Hasher::new();
        h.update(&sc.levels);
        h.update(&pre);
        h.update(&sc.body);
        h.finalize()
    });
    let size = sc.levels.len() + pre.len() + sc.body.len();
    page_header(&mut sc.head, PAGE_DATA, size, rows, encoding, crc)?;
    w.put(&sc.head)?;
    w.put(&sc.levels)?;
    w.put(&pre)?;
    w.put(&sc.body)?;
    let encodings = if encoding == E_DELTA { vec![E_DELTA, E_RLE] } else { vec![E_PLAIN, E_RLE, E_RLE_DICTIONARY] };
    Ok(ChunkMeta { encodings, size: (w.pos - start) as i64, data_page_offset, dictionary_page_offset, stats })
}

fn stat_bytes(v: i64, wide: bool) -> Vec<u8> {
    if wide {
        v.to_le_bytes().to_vec()
    } else {
        (v as i32).to_le_bytes().to_vec()
    }
}

/// Checks that `batches` hold the columns of `specs` in order with their types, no null where
/// a column is REQUIRED.
fn check(specs: &[ColumnSpec], batches: &[RecordBatch]) -> io::Result<()> {
    let bad = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
    for b in batches {
        if b.num_columns() != specs.len() {
            return Err(bad(format!("a batch has {} columns, expected {}", b.num_columns(), specs.len())));
        }
        for ((c, f), s) in b.columns().iter().zip(b.schema_ref().fields()).zip(specs) {
            if f.name() != &s.name {
                return Err(bad(format!("column {}: a batch has {} in its place", s.name, f.name())));
            }
            let want = if s.wide { DataType::Int64 } else { DataType::Int32 };
            if c.data_type() != &want {
                return Err(bad(format!("column {}: {} where {want} was expected", s.name, c.data_type())));
            }
            if !s.nullable && c.null_count() > 0 {
                return Err(bad(format!("column {}: nulls in a column declared not null", s.name)));
            }
        }
    }
    Ok(())
}

/// Writes `batches` (columns as `specs`) as one Parquet file to `w`, `row_group` rows per row
/// group, with `metadata` as the file's key-value metadata; returns the bytes written.
pub fn write<W: Write>(
    w: &mut W,
    specs: &[ColumnSpec],
    batches: &[RecordBatch],
    row_group: usize,
    metadata: &[(String, String)],
    created_by: &str,
) -> io::Result<u64> {
    check(specs, batches)?;
    let row_group = row_group.max(1);
    let total: usize = batches.iter().map(|b| b.num_rows()).sum();
    let mut w = Counted { w, pos: 0 };
    w.put(b"PAR1")?;
    let mut groups: Vec<(Vec<ChunkMeta>, usize, i64)> = Vec::new();
    let (mut bi, mut boff) = (0usize, 0usize);
    let mut done = 0usize;
    let mut sc = SCRATCH.with(|s| std::mem::take(&mut *s.borrow_mut()));
    while done < total {
        let rows = row_group.min(total - done);
        // The batch slices that make these rows.
        let mut parts: Vec<(usize, usize, usize)> = Vec::new();
        let mut need = rows;
        while need > 0 {
            let b = &batches[bi];
            let take = (b.num_rows() - boff).min(need);
            if take > 0 {
                parts.push((bi, boff, take));
            }
            need -= take;
            boff += take;
            if boff == b.num_rows() {
                bi += 1;
                boff = 0;
            }
        }
        let group_start = w.pos as i64;
        let mut metas = Vec::with_capacity(specs.len());
        for (ci, spec) in specs.iter().enumerate() {
            let chunk: Chunk<'_> =
                parts.iter().map(|&(b, off, len)| (batches[b].column(ci).as_ref(), off, len)).collect();
            metas.push(write_chunk(&mut w, spec, &chunk, rows, &mut sc)?);
        }
        groups.push((metas, rows, group_start));
        done += rows;
    }
    let footer = file_metadata(specs, &groups, total, metadata, created_by);
    w.put(&footer)?;
    w.put(&(footer.len() as u32).to_le_bytes())?;
    w.put(b"PAR1")?;
    w.w.flush()?;
    SCRATCH.with(|s| *s.borrow_mut() = sc);
    Ok(w.pos)
}

fn file_metadata(
    specs: &[ColumnSpec],
    groups: &[(Vec<ChunkMeta>, usize, i64)],
    total: usize,
    metadata: &[(String, String)],
    created_by: &str,
) -> Vec<u8> {
    let mut t = Thrift::new();
    t.i32(1, 2); // version
    t.list(2, CT_STRUCT, specs.len() + 1);
    t.begin();
    t.binary(4, b"schema");
    t.i32(5, specs.len() as i32);
    t.end();
    for s in specs {
        t.begin();
        t.i32(1, if s.wide { T_INT64 } else { T_INT32 });
        t.i32(3, if s.nullable { OPTIONAL } else { REQUIRED });
        t.binary(4, s.name.as_bytes());
        t.end();
    }
    t.i64(3, total as i64);
    t.list(4, CT_STRUCT, groups.len());
    for (metas, rows, start) in groups {
        t.begin();
        t.list(1, CT_STRUCT, metas.len());
        let mut bytes = 0i64;
        for (m, s) in metas.iter().zip(specs) {
            bytes += m.size;
            t.begin();
            t.i64(2, 0); // deprecated: 0 when no metadata is written outside the footer
            t.struct_field(3);
            t.i32(1, if s.wide { T_INT64 } else { T_INT32 });
            t.list(2, CT_I32, m.encodings.len());
            for &e in &m.encodings {
                varint(&mut t.out, zigzag(e as i64));
            }
            t.list(3, CT_BINARY, 1);
            t.raw_binary(s.name.as_bytes());
            t.i32(4, 0); // UNCOMPRESSED
            t.i64(5, *rows as i64);
            t.i64(6, m.size);
            t.i64(7, m.size);
            t.i64(9, m.data_page_offset);
            if let Some(d) = m.dictionary_page_offset {
                t.i64(11, d);
            }
            t.struct_field(12);
            if m.stats.values > 0 {
                t.binary(1, &stat_bytes(m.stats.max, s.wide));
                t.binary(2, &stat_bytes(m.stats.min, s.wide));
            }
            t.i64(3, m.stats.nulls as i64);
            if m.stats.values > 0 {
                t.binary(5, &stat_bytes(m.stats.max, s.wide));
                t.binary(6, &stat_bytes(m.stats.min, s.wide));
                t.bool_true(7); // is_max_value_exact
                t.bool_true(8); // is_min_value_exact
            }
            t.end();
            // encoding_stats: readers (parquet-java, Trino) use a dictionary to prune row groups
            // only when they can tell that no data page fell back to another encoding.
            let pages: &[(i32, i32)] = if m.dictionary_page_offset.is_some() {
                &[(PAGE_DICTIONARY, E_PLAIN), (PAGE_DATA, E_RLE_DICTIONARY)]
            } else {
                &[(PAGE_DATA, E_DELTA)]
            };
            t.list(13, CT_STRUCT, pages.len());
            for &(kind, encoding) in pages {
                t.begin();
                t.i32(1, kind);
                t.i32(2, encoding);
                t.i32(3, 1);
                t.end();
            }
            t.end(); // ColumnMetaData
            t.end(); // ColumnChunk
        }
        t.i64(2, bytes);
        t.i64(3, *rows as i64);
        t.i64(5, *start);
        t.i64(6, bytes);
        t.end();
    }
    if !metadata.is_empty() {
        t.list(5, CT_STRUCT, metadata.len());
        for (k, v) in metadata {
            t.begin();
            t.binary(1, k.as_bytes());
            t.binary(2, v.as_bytes());
            t.end();
        }
    }
    t.binary(6, created_by.as_bytes());
    t.list(7, CT_STRUCT, specs.len()); // column orders: TYPE_ORDER (signed for INT32/INT64)
    for _ in specs {
        t.begin();
        t.struct_field(1);
        t.end();
        t.end();
    }
    t.out.push(0);
    t.out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thrift_field_ids_use_short_deltas_and_long_form() {
        let mut t = Thrift::new();
        t.i32(1, 3);
        t.i32(20, -1);
        t.i64(21, 2);
        t.out.push(0);
        // field 1 (delta 1, i32) = zigzag 6; field 20 (delta 19: long form) = zigzag(-1) = 1;
        // field 21 (delta 1, i64) = zigzag 4.
        assert_eq!(t.out, vec![0x15, 6, 0x05, 40, 1, 0x16, 4, 0]);
    }

    #[test]
    fn delta_packs_a_block_with_padded_and_unused_miniblocks() {
        let mut e = DeltaEncoder::new(Vec::new(), false);
        for v in [5i64, 6, 8] {
            e.put(v);
        }
        let (mut out, body) = e.finish();
        out.extend(body);
        // header 128, 4, count 3, first zigzag(5)=10; block: min delta 1 (zz 2), widths [1,0,0,0],
        // miniblock deltas-min [0,1,0...] at 1 bit = 0b10 in 4 bytes.
        assert_eq!(out, vec![0x80, 0x01, 4, 3, 10, 2, 1, 0, 0, 0, 0b10, 0, 0, 0]);
    }

    #[test]
    fn hybrid_mixes_rle_runs_and_literal_groups() {
        let mut vals = vec![3u32; 10];
        vals.extend([1, 2, 1]);
        let mut out = Vec::new();
        hybrid(&mut out, &vals, 2);
        // RLE run of 10 threes: header 20, value 3; then one literal group (header 3) of
        // [1,2,1,0,0,0,0,0] at 2 bits: 16 bits in two bytes.
        assert_eq!(out, vec![20, 3, 0b11, 0b0001_1001, 0]);
    }

    #[test]
    fn pack32_uses_the_whole_64_bit_range() {
        let mut vals = [0u64; MINI];
        vals[0] = u64::MAX;
        vals[31] = 1;
        let mut out = Vec::new();
        pack32(&mut out, &vals, 64);
        assert_eq!(out.len(), 32 * 8);
        assert_eq!(&out[..8], &[0xff; 8]);
        assert_eq!(&out[31 * 8..], &[1, 0, 0, 0, 0, 0, 0, 0]);
    }
}

#[cfg(test)]
mod packing {
    use super::*;

    /// The straightforward packer (a running 128-bit accumulator): what `pack32` replaced.
    /// Measured in one binary, alternating, at load 4-7: 2.2-5.9 ns a value against 0.6-1.6.
    fn pack_acc(out: &mut Vec<u8>, vals: &[u64; MINI], width: u32) {
        let mut acc: u128 = 0;
        let mut bits = 0u32;
        for &v in vals {
            acc |= (v as u128) << bits;
            bits += width;
            if bits >= 64 {
                out.extend_from_slice(&(acc as u64).to_le_bytes());
                acc >>= 64;
                bits -= 64;
            }
        }
        if bits > 0 {
            out.extend_from_slice(&(acc as u32).to_le_bytes());
        }
    }

    #[test]
    fn the_unrolled_packer_equals_the_accumulator_at_every_width() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for w in 1..=64u32 {
            let mut v = [0u64; MINI];
            for (i, x) in v.iter_mut().enumerate() {
                *x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - w);
            }
            pack32(&mut a, &v, w);
            pack_acc(&mut b, &v, w);
            assert_eq!(a.len(), b.len(), "width {w}");
        }
        assert_eq!(a, b);
    }
}
