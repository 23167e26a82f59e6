//! The current WAL file of one trace and how a record is appended to it: where the records
//! end, the zeros and blocks allocated ahead, and what a failed write leaves.
//!
//! Owns the append policy of the write-ahead log ([`WalLog::append`]); `store/wal.py` owns
//! the files themselves (making the next one ahead, switching, rotating, closing) and hands
//! each new current file here ([`WalLog::set_file`]). The store's `TraceWriter` appends a
//! round's records through `_core.WalLog.append` (py/wal.rs): conform fast path, `seq`,
//! framing, this write, and the fsync policy's step (an fsync under `always`, the group
//! committer told under `batch`) in one native call that releases the interpreter lock once.
//!
//! The policy, per record:
//! - A small record (up to [`ZERO_RECORD_MAX`]) is written over zeros written ahead of it
//!   ([`ZERO_AHEAD`] at a time, added while half of that is left): an fdatasync of such an
//!   overwrite writes data only, while one of an append must also write the inode for the new
//!   length. One 10 KB record + fdatasync at a time on this disk: appending 2,217-2,916
//!   rounds/s (fdatasync p50 304-353 us); with blocks reserved ahead 2,451-2,825 (322-326 us);
//!   over zeros written 1 MiB ahead 3,887-4,031 (197-223 us). Zeros added while half is left:
//!   a record written over zeros written just before waited for the inode's lock while the
//!   committer's fdatasync allocated their blocks (perf sched: rwsem_down_write_slowpath in
//!   ext4_da_write_end, 8 writes of 7 ms each in 12 s of a half-rate Arrow bench).
//! - A big record is appended, its blocks reserved [`RESERVE_AHEAD`] ahead
//!   (`wal::reserve`): zeros ahead of it would double what streaming ingest writes.
//! - Neither out of the disk's last [`RESERVE_MIN_FREE`]: segments need it more.
//! - All or nothing: a failed write is cut back out of the file (`wal::Record::write`); when
//!   even the cut failed the file holds a torn record that would end the log at recovery, so
//!   the log is [`WalLog::broken`] and refuses every later append.
//!
//! Why native: the policy ran in Python between two native calls (`fstatvfs`, the zeros'
//! `pwrite`, then `wal_write`), and with `prepare` and the committer's `written` an append
//! crossed the interpreter lock four times; each crossing lets a checkpoint or compaction
//! thread in, and taking the lock back can wait for its switch interval.

use std::os::fd::RawFd;

use super::wal::{Record, WriteError};

/// Records up to this many bytes are written over zeros written ahead (see the module docs).
pub const ZERO_RECORD_MAX: u64 = 64 << 10;
/// Zeros written ahead of small records at a time.
pub const ZERO_AHEAD: u64 = 1 << 20;
/// Blocks allocated ahead of big records (the file's length kept).
pub const RESERVE_AHEAD: u64 = 16 << 20;
/// Nothing is written or reserved ahead out of a disk's last GiB.
pub const RESERVE_MIN_FREE: u64 = 1 << 30;

static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

/// The current WAL file: its descriptor (owned by `store/wal.py`) and its extents.
#[derive(Debug, Default, Clone)]
pub struct WalFile {
    /// Descriptor, open for writing (-1: none).
    pub fd: RawFd,
    /// Its path, for error messages.
    pub path: String,
    /// Where its records end (the next record goes here).
    pub size: u64,
    /// Its length: `size`, or more with zeros past the last record.
    pub end: u64,
    /// Its blocks are allocated up to here (its length may be less).
    pub reserved: u64,
}

/// One trace's WAL append state (see the module docs). Not locked inside: the writer's lock
/// serializes appends, switches and rotations.
#[derive(Debug, Default)]
pub struct WalLog {
    /// The current file.
    pub file: WalFile,
    /// Set when a failed append could not be cut back: nothing more may be appended.
    pub broken: Option<WriteError>,
    /// Free bytes below which nothing is written or reserved ahead ([`RESERVE_MIN_FREE`];
    /// the full-disk tests lower it).
    pub min_free: u64,
}

impl Clone for WriteError {
    fn clone(&self) -> Self {
        Self { errno: self.errno, message: self.message.clone() }
    }
}

impl WalLog {
    /// Makes `fd` (at `path`, `size` bytes long, all of them records) the current file;
    /// nothing is written or reserved ahead with less than `min_free` bytes free on its disk.
    pub fn set_file(&mut self, fd: RawFd, path: String, size: u64, min_free: u64) {
        self.file = WalFile { fd, path, size, end: size, reserved: 0 };
        self.min_free = min_free;
    }

    /// Appends `rec` (all or nothing); returns where the records now end.
    pub fn append(&mut self, rec: &Record) -> Result<u64, WriteError> {
        if let Some(b) = &self.broken {
            return Err(b.clone());
        }
        let f = &mut self.file;
        if f.fd < 0 {
            return Err(WriteError { errno: libc::EBADF, message: "WAL closed".into() });
        }
        let len = rec.size() as u64;
        let need = f.size + len;
        let small = len <= ZERO_RECORD_MAX;
        let mut reserve_to = 0;
        if ((small && need + ZERO_AHEAD / 2 > f.end) || need > f.reserved.max(f.end)) && room_ahead(f.fd, self.min_free)
        {
            if small {
                zero_ahead(f, need + ZERO_AHEAD);
            } else {
                reserve_to = need + RESERVE_AHEAD;
            }
        }
        match rec.write_reserving(f.fd, f.size, reserve_to) {
            Ok(size) => {
                f.size = size;
                f.reserved = f.reserved.max(reserve_to);
                f.end = f.end.max(size);
                Ok(size)
            }
            Err(e) => {
                // Cut back to `size`: the zeros and the reservation are gone with the record.
                f.reserved = 0;
                f.end = f.size;
                if file_len(f.fd) != Some(f.size) {
                    let b = WriteError {
                        errno: e.errno,
                        message: format!(
                            "WAL file {} holds a torn record that could not be cut after: {}",
                            f.path, e.message
                        ),
                    };
                    self.broken = Some(b.clone());
                    return Err(b);
                }
                Err(WriteError { errno: e.errno, message: format!("{}: {}", e.message, f.path) })
            }
        }
    }

    /// Cuts the zeros and frees the blocks reserved past the last record (the file is about
    /// to be closed: a closed file is exactly its records).
    pub fn unreserve(&mut self) {
        let f = &mut self.file;
        if f.fd >= 0 && f.reserved.max(f.end) > f.size {
            // SAFETY: plain syscall on the descriptor `store/wal.py` keeps open.
            if unsafe { libc::ftruncate(f.fd, f.size as libc::off_t) } == 0 {
                f.end = f.size;
            } // (else zeros end the log, and reserved blocks go when the file is deleted)
            f.reserved = 0;
        }
    }
}

/// Whether the disk holding `fd` has at least `min_free` bytes free.
fn room_ahead(fd: RawFd, min_free: u64) -> bool {
    // SAFETY: a zeroed statvfs is a valid out-parameter; plain syscall.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatvfs(fd, &mut st) } != 0 {
        return false;
    }
    (st.f_bavail as u64).saturating_mul(st.f_frsize as u64) >= min_free
}

/// Extends the file with zeros up to byte `to` (records are then written over them); on a
/// failure (a full disk) its length is read back and the record is appended, or refused.
fn zero_ahead(f: &mut WalFile, to: u64) {
    while f.end < to {
        let n = (to - f.end).min(ZEROS.len() as u64) as usize;
        // SAFETY: `ZEROS` outlives the call; plain syscall.
        let w = unsafe { libc::pwrite(f.fd, ZEROS.as_ptr().cast(), n, f.end as libc::off_t) };
        if w < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            f.end = file_len(f.fd).unwrap_or(f.size);
            return;
        }
        if w == 0 {
            f.end = file_len(f.fd).unwrap_or(f.size);
            return;
        }
        f.end += w as u64;
    }
}

fn file_len(fd: RawFd) -> Option<u64> {
    // SAFETY: a zeroed stat is a valid out-parameter; plain syscall.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st.st_size as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::sync::Arc;

    use arrow_array::{Int64Array, RecordBatch};
    use arrow_buffer::Buffer;
    use arrow_schema::{DataType, Field, Schema};

    fn record(rows: i64) -> Record {
        let schema = Arc::new(Schema::new(vec![Field::new("ts", DataType::Int64, false)]));
        let b = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from_iter_values(0..rows))]).unwrap();
        Record::encode(b"t", Buffer::from(vec![0u8; 8]), &[b]).unwrap()
    }

    fn log_in(tag: &str) -> (std::fs::File, WalLog) {
        let p = std::env::temp_dir().join(format!("th-wallog-{tag}-{}", std::process::id()));
        let f = std::fs::OpenOptions::new().create(true).truncate(true).read(true).write(true).open(&p).unwrap();
        let _ = std::fs::remove_file(&p);
        let mut log = WalLog::default();
        log.set_file(f.as_raw_fd(), "x.wal".into(), 0, RESERVE_MIN_FREE);
        (f, log)
    }

    #[test]
    fn small_records_land_on_zeros_written_ahead_and_unreserve_cuts_them() {
        let (f, mut log) = log_in("small");
        let r = record(10);
        let end = log.append(&r).unwrap();
        assert_eq!(end, r.size() as u64);
        if room_ahead(f.as_raw_fd(), RESERVE_MIN_FREE) {
            assert_eq!(f.metadata().unwrap().len(), end + ZERO_AHEAD);
        }
        let end2 = log.append(&r).unwrap();
        assert_eq!(end2, 2 * r.size() as u64);
        log.unreserve();
        assert_eq!(f.metadata().unwrap().len(), end2);
    }

    #[test]
    fn a_log_without_a_file_refuses_and_is_not_broken() {
        let (_f, mut log) = log_in("bad");
        let r = record(10);
        log.append(&r).unwrap();
        let fd = log.file.fd;
        log.file.fd = -1;
        assert_eq!(log.append(&r).unwrap_err().errno, libc::EBADF);
        log.file.fd = fd;
        assert!(log.broken.is_none());
    }
}
