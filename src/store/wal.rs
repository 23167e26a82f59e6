//! The WAL format's write half: records of appended batches, framed and written without
//! copying a column.
//!
//! Owns the append hot path of the store's write-ahead log ([`super::walscan`] reads the records
//! back; `python/tracehouse/store/wal.py` owns the files and their rotation, and reads through
//! `walscan`):
//!
//! - [`layout`]: whether a batch is already in the stored layout of its event type (the
//!   conform fast path: same names and types in order, no null in a non-null column), or that
//!   layout without `seq` (then [`with_seq`] numbers it with the trace's [`SeqCounters`]);
//!   anything else goes back to the Python `conform` (casts, filled columns, errors naming
//!   the column).
//! - [`Record::encode`]: the record `[u32 payload length][u32 crc32(payload)][payload]` with
//!   payload `[u16 name length][name][schema message][record batch message]...`, an Arrow IPC
//!   stream exactly as pyarrow writes it (so WAL files written before this module, and after,
//!   read back the same way). The record batch messages' metadata (a small flatbuffer) is built
//!   here; their bodies are the arrays' own buffers, referenced, not copied.
//! - [`Record::write`]: one `writev` of the frame, the metadata and every buffer (chunks of
//!   `IOV_MAX`); a failed or short write is cut back out of the file (all or nothing).
//!
//! Why: the Python path serialized each batch into a new buffer (a copy of every value), ran
//! the CRC over the pieces from Python and spent 30-135 us per batch in conform's schema
//! checks and relabelling (`_with_schema`, a null count per column through pyarrow objects).
//! Measured on 10M TOD events (4,001 appends of 1.7-3.5K rows, fsync=batch, no checkpoint,
//! 2 shared cores at load 6-9, the two versions alternating): the appends took 0.69-1.07 CPU-s
//! before, 0.59-0.68 after; the rest is the kernel's copy into the page cache (raw append pays
//! it too: 0.28-0.35 CPU-s) and the CRC-32 (~8 % of the appends' samples). Streaming as a whole
//! (checkpoints included) went from 1.95-2.13 to 1.80-1.94 CPU-s at load 7 (0.25-0.26 -> 0.30-0.31
//! x raw append's wall time in the same runs) and from 2.49-2.55 to 2.12-2.21 CPU-s at load 3
//! (`tracehouse bench ingest`): what is left is parquet-cpp's encoding at checkpoints, the kernel's
//! page-cache copy and the CRC.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch};
use arrow_buffer::{Buffer, ScalarBuffer};
use arrow_data::ArrayData;
use arrow_schema::{ArrowError, DataType, Schema, SchemaRef};

use super::seqnum::SeqCounters;

/// How a batch stands against the stored schema of its event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Same column names and types in the same order, no null where the type allows none.
    Stored,
    /// The stored layout without its `seq` column (at this index of the stored schema).
    WithoutSeq(usize),
    /// Anything else: the caller conforms it (casts, fills, or refuses with a reason).
    Other,
}

/// Where `batch` stands against `target` (see [`Layout`]).
pub fn layout(batch: &RecordBatch, target: &Schema) -> Layout {
    let have = batch.schema_ref().fields();
    let want = target.fields();
    let seq = target.index_of("seq").ok();
    let skip = match (have.len() == want.len(), seq) {
        (true, _) => None,
        (false, Some(i)) if have.len() + 1 == want.len() => Some(i),
        _ => return Layout::Other,
    };
    let mut j = 0;
    for (i, f) in want.iter().enumerate() {
        if Some(i) == skip {
            continue;
        }
        let h = &have[j];
        if h.name() != f.name() || h.data_type() != f.data_type() {
            return Layout::Other;
        }
        if !f.is_nullable() && batch.column(j).null_count() != 0 {
            return Layout::Other;
        }
        j += 1;
    }
    match skip {
        None => Layout::Stored,
        Some(i) => Layout::WithoutSeq(i),
    }
}

/// `batch` (in the stored layout without `seq`) with `seq` numbered by `counters` inserted at
/// `at`, under `target` (the values are shared, only the new column is allocated).
pub fn with_seq(
    batch: &RecordBatch,
    at: usize,
    target: &SchemaRef,
    counters: &mut SeqCounters,
) -> Result<RecordBatch, ArrowError> {
    let producer = batch
        .column_by_name("producer")
        .and_then(|c| c.as_any().downcast_ref::<arrow_array::Int32Array>())
        .ok_or_else(|| ArrowError::SchemaError("numbering needs an int32 producer column".into()))?;
    if producer.null_count() != 0 {
        return Err(ArrowError::InvalidArgumentError("null producer".into()));
    }
    let seq = counters.assign(producer.values());
    let mut cols: Vec<ArrayRef> = batch.columns().to_vec();
    cols.insert(at, Arc::new(Int64Array::new(ScalarBuffer::from(seq), None)));
    RecordBatch::try_new(target.clone(), cols)
}

/// One piece of a record as written: bytes of its own, or a slice of an array's buffer.
enum Piece {
    Owned(Vec<u8>),
    Shared(Buffer),
    Zeros(usize),
}

impl Piece {
    fn bytes(&self) -> &[u8] {
        match self {
            Piece::Owned(v) => v,
            Piece::Shared(b) => b.as_slice(),
            Piece::Zeros(n) => &ZEROS[..*n],
        }
    }
}

static ZEROS: [u8; 8] = [0; 8];

/// A framed WAL record ready to be written (see the module docs).
pub struct Record {
    pieces: Vec<Piece>,
    size: usize,
}

/// Bytes of padding after `n` bytes up to a multiple of 8 (IPC buffers and messages are 8-aligned).
fn pad8(n: usize) -> usize {
    (8 - n % 8) % 8
}

/// An IPC body being assembled: buffers with their offsets, lengths and padding.
#[derive(Default)]
struct Body {
    pieces: Vec<Piece>,
    /// (offset, length) of every buffer, in the order the IPC format lists them.
    buffers: Vec<(i64, i64)>,
    len: usize,
}

impl Body {
    fn push(&mut self, piece: Option<Piece>) {
        let n = piece.as_ref().map_or(0, |p| p.bytes().len());
        self.buffers.push((self.len as i64, n as i64));
        if let Some(p) = piece {
            if n > 0 {
                self.pieces.push(p);
                let pad = pad8(n);
                if pad > 0 {
                    self.pieces.push(Piece::Zeros(pad));
                }
                self.len += n + pad;
            }
        }
    }
}

/// The bits `offset..offset + len` of `buf` from bit 0 (a slice when byte-aligned, else a copy).
fn bits(buf: &Buffer, offset: usize, len: usize) -> Buffer {
    if offset.is_multiple_of(8) {
        buf.slice_with_length(offset / 8, len.div_ceil(8))
    } else {
        buf.bit_slice(offset, len)
    }
}

/// Adds the IPC buffers of one column to `body`; returns its field node (length, null count).
fn column(data: &ArrayData, body: &mut Body) -> Result<(i64, i64), ArrowError> {
    let (off, len) = (data.offset(), data.len());
    let nulls = data.nulls().filter(|n| n.null_count() > 0);
    body.push(nulls.map(|n| Piece::Shared(bits(n.buffer(), n.offset(), n.len()))));
    match data.data_type() {
        DataType::Int64 | DataType::Float64 | DataType::Int32 => {
            let w = data.data_type().primitive_width().unwrap_or(8);
            body.push(Some(Piece::Shared(data.buffers()[0].slice_with_length(off * w, len * w))));
        }
        DataType::Boolean => body.push(Some(Piece::Shared(bits(&data.buffers()[0], off, len)))),
        DataType::Utf8 => {
            let offsets: &[i32] = &data.buffers()[0].typed_data::<i32>()[off..off + len + 1];
            let (first, last) = (offsets[0], offsets[len]);
            let (first_u, last_u) = (usize::try_from(first), usize::try_from(last));
            let (Ok(first_u), Ok(last_u)) = (first_u, last_u) else {
                return Err(ArrowError::InvalidArgumentError("negative string offsets".into()));
            };
            if first == 0 {
                body.push(Some(Piece::Shared(data.buffers()[0].slice_with_length(off * 4, (len + 1) * 4))));
            } else {
                // A sliced string column: its offsets start at 0 in the stream (as pyarrow writes them).
                let mut v = Vec::with_capacity((len + 1) * 4);
                for o in offsets {
                    v.extend_from_slice(&(o - first).to_le_bytes());
                }
                body.push(Some(Piece::Owned(v)));
            }
            body.push(Some(Piece::Shared(data.buffers()[1].slice_with_length(first_u, last_u - first_u))));
        }
        t => return Err(ArrowError::NotYetImplemented(format!("WAL record of a {t} column"))),
    }
    Ok((len as i64, data.null_count() as i64))
}

/// The flatbuffer `Message { version: V5, header: RecordBatch { length, nodes, buffers },
/// bodyLength }` of Arrow's IPC format (format/Message.fbs), laid out front to back:
///
/// ```text
///  0 root offset -> 16      36 RecordBatch vtable       68 nodes: [u32 n] then 16-byte structs
///  4 Message vtable         48 RecordBatch table         .. pad 4, buffers: [u32 m] then structs
/// 16 Message table          (soffset, nodes, length, buffers)
/// ```
///
/// Every scalar sits at an offset that is a multiple of its size and every struct vector's
/// elements at a multiple of 8 (flatbuffers verifiers check alignment from the start).
fn batch_metadata(rows: i64, nodes: &[(i64, i64)], buffers: &[(i64, i64)], body_len: i64) -> Vec<u8> {
    let (n, m) = (nodes.len(), buffers.len());
    let nodes_at = 68usize;
    let buffers_at = 76 + 16 * n; // nodes end at 72 + 16n; +4 so the structs start 8-aligned
    let end = buffers_at + 4 + 16 * m;
    let mut b = vec![0u8; end];
    let put_u16 = |b: &mut [u8], at: usize, v: u16| b[at..at + 2].copy_from_slice(&v.to_le_bytes());
    let put_u32 = |b: &mut [u8], at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    let put_i64 = |b: &mut [u8], at: usize, v: i64| b[at..at + 8].copy_from_slice(&v.to_le_bytes());
    put_u32(&mut b, 0, 16); // root: the Message table
                            // Message vtable at 4: 4 fields (version, header_type, header, bodyLength).
    for (i, v) in [12u16, 20, 16, 18, 4, 8].into_iter().enumerate() {
        put_u16(&mut b, 4 + 2 * i, v);
    }
    put_u32(&mut b, 16, 12); // soffset: table 16 - vtable 4
    put_u32(&mut b, 20, 48 - 20); // header -> RecordBatch table
    put_i64(&mut b, 24, body_len);
    put_u16(&mut b, 32, 4); // MetadataVersion V5
    b[34] = 3; // MessageHeader RecordBatch
               // RecordBatch vtable at 36: 3 fields (length, nodes, buffers).
    for (i, v) in [10u16, 20, 8, 4, 16].into_iter().enumerate() {
        put_u16(&mut b, 36 + 2 * i, v);
    }
    put_u32(&mut b, 48, 12); // soffset: table 48 - vtable 36
    put_u32(&mut b, 52, (nodes_at - 52) as u32);
    put_i64(&mut b, 56, rows);
    put_u32(&mut b, 64, (buffers_at - 64) as u32);
    put_u32(&mut b, nodes_at, n as u32);
    for (i, &(len, nulls)) in nodes.iter().enumerate() {
        put_i64(&mut b, nodes_at + 4 + 16 * i, len);
        put_i64(&mut b, nodes_at + 12 + 16 * i, nulls);
    }
    put_u32(&mut b, buffers_at, m as u32);
    for (i, &(off, len)) in buffers.iter().enumerate() {
        put_i64(&mut b, buffers_at + 4 + 16 * i, off);
        put_i64(&mut b, buffers_at + 12 + 16 * i, len);
    }
    b
}

impl Record {
    /// The record of `batches` (each in the layout `schema_msg` describes) under the event type
    /// name `name`; `schema_msg` is the encapsulated IPC schema message (`pyarrow.Schema.serialize()`).
    pub fn encode(name: &[u8], schema_msg: Buffer, batches: &[RecordBatch]) -> Result<Self, ArrowError> {
        let name_len = u16::try_from(name.len())
            .map_err(|_| ArrowError::InvalidArgumentError("event type name too long".into()))?;
        let mut head = Vec::with_capacity(8 + 2 + name.len());
        head.extend_from_slice(&[0; 8]); // length and CRC, filled in below
        head.extend_from_slice(&name_len.to_le_bytes());
        head.extend_from_slice(name);
        let mut pieces = vec![Piece::Owned(head), Piece::Shared(schema_msg)];
        for batch in batches {
            let mut body = Body::default();
            let mut nodes = Vec::with_capacity(batch.num_columns());
            for col in batch.columns() {
                nodes.push(column(&col.to_data(), &mut body)?);
            }
            let meta = batch_metadata(batch.num_rows() as i64, &nodes, &body.buffers, body.len as i64);
            let mut prefix = Vec::with_capacity(8 + meta.len());
            prefix.extend_from_slice(&0xFFFF_FFFFu32.to_le_bytes());
            prefix.extend_from_slice(&(meta.len() as u32).to_le_bytes()); // a multiple of 8 by construction
            prefix.extend_from_slice(&meta);
            pieces.push(Piece::Owned(prefix));
            pieces.extend(body.pieces);
        }
        let size: usize = pieces.iter().map(|p| p.bytes().len()).sum();
        let payload = size - 8;
        let payload_u32 = u32::try_from(payload)
            .ok()
            .filter(|&p| p < 1 << 31)
            .ok_or_else(|| ArrowError::InvalidArgumentError(format!("WAL record of {payload} bytes (over 2 GiB)")))?;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&pieces[0].bytes()[8..]);
        for p in &pieces[1..] {
            crc.update(p.bytes());
        }
        let Piece::Owned(head) = &mut pieces[0] else { unreachable!() };
        head[..4].copy_from_slice(&payload_u32.to_le_bytes());
        head[4..8].copy_from_slice(&crc.finalize().to_le_bytes());
        Ok(Self { pieces, size })
    }

    /// Bytes of the whole record (frame included).
    pub fn size(&self) -> usize {
        self.size
    }

    /// The record as one contiguous buffer (tests, and the crash tests' torn writes).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.size);
        for p in &self.pieces {
            v.extend_from_slice(p.bytes());
        }
        v
    }

    /// Writes the record at byte `size` of `fd` (where its last record ends); returns the new end.
    ///
    /// All or nothing: when a write fails, or comes up short (a full disk), the file is cut back
    /// to `size` before the error returns, so no torn record precedes a later append (recovery
    /// stops at the first bad record). If even that cut fails the file holds a torn record: the
    /// caller checks the file's size after an error and stops appending.
    pub fn write(&self, fd: RawFd, size: u64) -> Result<u64, WriteError> {
        self.write_reserving(fd, size, 0)
    }

    /// `write`, first reserving the file's blocks up to byte `reserve_to` (when past `size`)
    /// without changing its length: `fallocate(FALLOC_FL_KEEP_SIZE)`, see `reserve`.
    pub fn write_reserving(&self, fd: RawFd, size: u64, reserve_to: u64) -> Result<u64, WriteError> {
        if reserve_to > size {
            reserve(fd, size, reserve_to - size);
        }
        let iov_of = |b: &[u8]| libc::iovec { iov_base: b.as_ptr() as *mut libc::c_void, iov_len: b.len() };
        let mut iov: Vec<libc::iovec> =
            self.pieces.iter().map(|p| iov_of(p.bytes())).filter(|v| v.iov_len > 0).collect();
        // The 8-byte frame header last: over zeros (store/wal.py writes them ahead of small
        // records) a reader in another process sees either zeros, which end the log, or a
        // whole record, never a header whose record is still being copied. So the header's
        // bytes tell it whether the file grew (`wal.uncovered_files`) when its size did not.
        let head = self.pieces[0].bytes();
        iov[0] = iov_of(&head[8..]);
        let result = if failpoint_due() {
            die_after_half(fd, &iov, self.size - 8, size + 8) // what a kill in mid-write leaves
        } else {
            pwritev_all(fd, &iov, self.size - 8, size + 8)
                .and_then(|()| pwritev_all(fd, &[iov_of(&head[..8])], 8, size))
        };
        match result {
            Ok(()) => Ok(size + self.size as u64),
            Err(e) => {
                // SAFETY: plain syscall on a descriptor the caller owns.
                unsafe { libc::ftruncate(fd, size as libc::off_t) };
                Err(e)
            }
        }
    }
}

/// Allocates `len` bytes of `fd`'s blocks from `offset` on, keeping its length (so readers,
/// who read to the file's size, see nothing new), and says whether that worked.
///
/// Why: appends that must allocate blocks were measured sleeping while a group commit's
/// `fdatasync` ran beside them (this machine's ext4 has no journal: block allocation and the
/// inode's new length meet the fdatasync's own inode write). Measured on this disk, 540 MB appended in
/// 135 KB writes with an fdatasync every 5 ms beside them (/tmp/ib/fs4.py, three rounds):
/// 0.30-0.36 s wall, 0.25 CPU appending as is; 0.18-0.23 s wall, 0.18-0.20 CPU with 16 MiB
/// reserved ahead like this (the fallocate calls 2-19 ms of it). A failure (a full disk, a
/// file system without fallocate) only loses the speed-up: the write then allocates.
pub fn reserve(fd: RawFd, offset: u64, len: u64) -> bool {
    // SAFETY: plain syscall on a descriptor the caller owns.
    unsafe { libc::fallocate(fd, libc::FALLOC_FL_KEEP_SIZE, offset as libc::off_t, len as libc::off_t) == 0 }
}

/// Why a record could not be written: the OS error number (ENOSPC for a short write) and what happened.
#[derive(Debug)]
pub struct WriteError {
    /// errno, as Python's OSError takes it.
    pub errno: i32,
    /// The OS's wording, without Rust's "(os error N)" suffix.
    pub message: String,
}

impl From<io::Error> for WriteError {
    fn from(e: io::Error) -> Self {
        let errno = e.raw_os_error().unwrap_or(libc::EIO);
        let text = e.to_string();
        let message = match text.rfind(" (os error") {
            Some(i) => text[..i].to_string(),
            None => text,
        };
        Self { errno, message }
    }
}

/// IOV_MAX on Linux: `pwritev` takes at most this many buffers.
const IOV_MAX: usize = 1024;

/// Writes every byte of `iov` (`total` of them) at byte `offset` of the file, or fails; a
/// short count is a full disk. At an offset, not O_APPEND: the file may have zeros past its
/// last record (`WalWriter` extends it ahead for small records, store/wal.py).
fn pwritev_all(fd: RawFd, iov: &[libc::iovec], total: usize, offset: u64) -> Result<(), WriteError> {
    let mut done = 0usize;
    for chunk in iov.chunks(IOV_MAX) {
        let want: usize = chunk.iter().map(|v| v.iov_len).sum();
        let n = loop {
            let at = (offset + done as u64) as libc::off_t;
            // SAFETY: every iovec points into a buffer `self` keeps alive for this call.
            let n = unsafe { libc::pwritev(fd, chunk.as_ptr(), chunk.len() as libc::c_int, at) };
            if n >= 0 {
                break n as usize;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e.into());
            }
        };
        done += n;
        if n != want {
            // On a regular file a short write means the disk (or quota) is full.
            return Err(WriteError {
                errno: libc::ENOSPC,
                message: format!("No space left on device: short write, {done} of {total} bytes"),
            });
        }
    }
    Ok(())
}

// -- failpoint for the crash tests ----------------------------------------------------------

/// Counts down to the write at which the process kills itself (0: disarmed).
static FAILPOINT: AtomicU64 = AtomicU64::new(0);

/// Test hook: the `after`-th [`Record::write`] from now writes the first half of its record's
/// payload (its header is written last, so not yet) and then SIGKILLs the process, leaving
/// what a crash in the middle of the write leaves. 0 disarms it.
pub fn arm_failpoint(after: u64) {
    FAILPOINT.store(after, Ordering::SeqCst);
}

fn failpoint_due() -> bool {
    let mut cur = FAILPOINT.load(Ordering::Relaxed);
    while cur > 0 {
        match FAILPOINT.compare_exchange(cur, cur - 1, Ordering::SeqCst, Ordering::Relaxed) {
            Ok(_) => return cur == 1,
            Err(now) => cur = now,
        }
    }
    false
}

fn die_after_half(fd: RawFd, iov: &[libc::iovec], total: usize, offset: u64) -> Result<(), WriteError> {
    let mut left = total / 2;
    let mut half = Vec::new();
    for v in iov {
        if left == 0 {
            break;
        }
        let n = v.iov_len.min(left);
        half.push(libc::iovec { iov_base: v.iov_base, iov_len: n });
        left -= n;
    }
    pwritev_all(fd, &half, total / 2, offset)?;
    // SAFETY: signals this process.
    unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    Err(WriteError { errno: libc::EIO, message: "killed by the WAL failpoint".into() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{BooleanArray, Float64Array, Int32Array, StringArray};
    use arrow_schema::Field;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("ts", DataType::Int64, false),
            Field::new("producer", DataType::Int32, false),
            Field::new("seq", DataType::Int64, false),
            Field::new("x", DataType::Float64, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("b", DataType::Boolean, true),
        ]))
    }

    fn batch(n: i64) -> RecordBatch {
        let s: Vec<Option<String>> = (0..n).map(|i| (i % 3 != 0).then(|| format!("v{i}"))).collect();
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from_iter_values(0..n)),
                Arc::new(Int32Array::from_iter_values((0..n).map(|i| (i % 2) as i32))),
                Arc::new(Int64Array::from_iter_values(0..n)),
                Arc::new(Float64Array::from_iter((0..n).map(|i| (i % 5 != 0).then_some(i as f64 / 2.0)))),
                Arc::new(StringArray::from(s)),
                Arc::new(BooleanArray::from_iter((0..n).map(|i| (i % 7 != 0).then_some(i % 2 == 0)))),
            ],
        )
        .unwrap()
    }

    #[test]
    fn layout_accepts_the_stored_schema_and_it_without_seq_only() {
        let b = batch(10);
        assert_eq!(layout(&b, &schema()), Layout::Stored);
        let without = b.project(&[0, 1, 3, 4, 5]).unwrap();
        assert_eq!(layout(&without, &schema()), Layout::WithoutSeq(2));
        let reordered = b.project(&[1, 0, 2, 3, 4, 5]).unwrap();
        assert_eq!(layout(&reordered, &schema()), Layout::Other);
        let fewer = b.project(&[0, 1, 2, 3]).unwrap();
        assert_eq!(layout(&fewer, &schema()), Layout::Other);
    }

    #[test]
    fn a_null_in_a_non_null_column_is_not_the_stored_layout() {
        let lax = Arc::new(Schema::new(
            schema().fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect::<Vec<_>>(),
        ));
        let b = batch(4);
        let mut cols = b.columns().to_vec();
        cols[0] = Arc::new(Int64Array::from(vec![Some(1), None, Some(3), Some(4)]));
        let with_null = RecordBatch::try_new(lax, cols).unwrap();
        assert_eq!(layout(&with_null, &schema()), Layout::Other);
    }

    #[test]
    fn with_seq_numbers_each_producer_on_from_its_counter() {
        let b = batch(6).project(&[0, 1, 3, 4, 5]).unwrap();
        let mut c = SeqCounters::new();
        c.seed(1, 10);
        let out = with_seq(&b, 2, &schema(), &mut c).unwrap();
        let seq = out.column(2).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(seq.values().to_vec(), vec![0, 10, 1, 11, 2, 12]);
        assert_eq!(out.schema(), schema());
    }

    #[test]
    fn record_frame_holds_length_and_crc_of_its_payload() {
        let msg = Buffer::from(vec![0xFFu8, 0xFF, 0xFF, 0xFF, 8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        let b = batch(100);
        let rec = Record::encode(b"ev", msg, &[b.clone(), b.slice(3, 50)]).unwrap();
        let bytes = rec.to_vec();
        assert_eq!(bytes.len(), rec.size());
        let len = u32::from_le_bytes(bytes[0..4].try_into().unwrap()) as usize;
        assert_eq!(len, bytes.len() - 8);
        assert_eq!(u32::from_le_bytes(bytes[4..8].try_into().unwrap()), crc32fast::hash(&bytes[8..]));
        assert_eq!(&bytes[8..12], &[2, 0, b'e', b'v']);
    }

    #[test]
    fn metadata_offsets_and_alignment() {
        let meta = batch_metadata(5, &[(5, 0), (5, 1)], &[(0, 0), (0, 40), (40, 1), (48, 40)], 88);
        assert_eq!(meta.len() % 8, 0);
        let u32_at = |at: usize| u32::from_le_bytes(meta[at..at + 4].try_into().unwrap()) as usize;
        let i64_at = |at: usize| i64::from_le_bytes(meta[at..at + 8].try_into().unwrap());
        assert_eq!(i64_at(24), 88);
        let nodes = 52 + u32_at(52);
        assert_eq!(u32_at(nodes), 2);
        assert_eq!((nodes + 4) % 8, 0);
        assert_eq!(i64_at(nodes + 4 + 16 + 8), 1);
        let buffers = 64 + u32_at(64);
        assert_eq!(u32_at(buffers), 4);
        assert_eq!((buffers + 4) % 8, 0);
        assert_eq!(i64_at(buffers + 4 + 3 * 16), 48);
    }

    #[test]
    fn failpoint_counts_down_to_one_write() {
        arm_failpoint(3);
        assert!(!failpoint_due());
        assert!(!failpoint_due());
        assert!(failpoint_due());
        assert!(!failpoint_due());
    }
}
