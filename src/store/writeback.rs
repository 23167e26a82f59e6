//! Write-behind for segment files: their dirty pages go to the disk a step at a time while the
//! file is written, not all at once at its fsync.
//!
//! Why: a checkpoint or compaction writes a segment of tens of MB into the page cache, then
//! fsyncs it; the fsync hands the whole file to the disk at once, and the WAL's group-commit
//! fdatasync issued meanwhile waits behind it. That was the tail of the acknowledged-write
//! latency at half rate. [`settle`] starts the write-back of one step and waits for
//! it (`sync_file_range` WAIT_BEFORE | WRITE | WAIT_AFTER, as RocksDB's `bytes_per_sync` and
//! PostgreSQL's `*_flush_after` do), so at most about a step is queued at the disk at a time.
//!
//! Measured on this VM's disk (/tmp/iop/t2.py: a 550 KB write + fdatasync every 4 ms beside
//! 16 MB files written and fsynced 4 times a second, 10 s, two rounds each): fdatasync p99
//! 13.3-15.1 ms and max 25-26 ms with the files fsynced whole; 5.4-6.0 ms and 7.6-11.7 ms with
//! each 1 MiB settled behind the writer. Starting the write-back without waiting
//! (SYNC_FILE_RANGE_WRITE alone) changed nothing (p99 14.6-16.0 ms): it still queues the file.
//! In `tracehouse bench write --half-rate arrow --repeat 3` (fsyncs timed by bpftrace over 30 s
//! of the half-rate runs, load 1.8-1.9), the code before and this one: fsyncs over 16 ms 80 ->
//! 19 of 8-9K, segment fsyncs over 10 ms 55 -> 1, WAL fdatasyncs over 10 ms 116 -> 66; ack p99
//! of the three runs 32, 18, 20 -> 27, 18, 17 ms. Half-rate runs alone, 3 alternating pairs
//! (load 2.0-3.0): before 48, 23, 22 / 33, 26, 21 / 47, 21, 20 ms; after 25, 19, 19 / 23, 20,
//! 23 / 60, 25, 38 ms: the tail has other causes too (CPU: the two cores are shared with the
//! load generator and the checkpoint encoders).
//!
//! [`Follower`] is a thread that settles a file someone else writes (parquet-cpp, through
//! pyarrow), following its length. Failures only lose the pacing: the caller's fsync still
//! makes the file durable and reports any I/O error.
//!
//! Not used for the native integer writer (`intparquet`, TOD and method events): settled the
//! same way, streaming 10M TOD events took 1.04-1.21 s against 0.90-1.10 s (`bench ingest`,
//! 3 alternating pairs, load 2.0-2.3; back to 0.83-1.01 against 0.93-1.02 without it). Its
//! encoder then waited for each step at the disk, where one fsync at the end overlapped the
//! writes; and no acknowledged write waits behind those segments in the benches.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Bytes settled at a time.
pub const STEP: u64 = 1 << 20;
/// How often a [`Follower`] looks at the length of the file it follows.
const POLL: Duration = Duration::from_millis(2);

/// Writes `len` bytes of `fd` from `offset` back to the disk and waits for them; false when the
/// file cannot be settled (not a regular file, an I/O error: the fsync will say).
pub fn settle(fd: RawFd, offset: u64, len: u64) -> bool {
    let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER;
    // SAFETY: a plain syscall on a descriptor the caller keeps open.
    unsafe { libc::sync_file_range(fd, offset as libc::off64_t, len as libc::off64_t, flags) == 0 }
}

/// Where settling stands for a file `written` bytes long: the steps before the last one still
/// being filled are settled (one step stays dirty, so a write in progress is not waited for).
fn due(settled: u64, written: u64, step: u64) -> bool {
    written >= settled + 2 * step
}

/// A thread settling a file that another writer (in this process) is writing, by its length.
pub struct Follower {
    stop: Arc<AtomicBool>,
    settled: Arc<AtomicU64>,
    handle: Option<JoinHandle<()>>,
}

impl Follower {
    /// Starts following `file` (a descriptor of its own: the writer may close theirs).
    pub fn start(file: File, step: u64) -> io::Result<Self> {
        let step = step.max(4096);
        let stop = Arc::new(AtomicBool::new(false));
        let settled = Arc::new(AtomicU64::new(0));
        let (stop2, settled2) = (stop.clone(), settled.clone());
        let handle = std::thread::Builder::new().name("th-write-behind".into()).spawn(move || {
            let fd = file.as_raw_fd();
            let mut done = 0u64;
            loop {
                // Read before the length, so the length read after a stop is the final one.
                let last = stop2.load(Ordering::Acquire);
                let Ok(len) = file.metadata().map(|m| m.len()) else { return };
                while due(done, len, step) {
                    if !settle(fd, done, step) {
                        return;
                    }
                    done += step;
                    settled2.store(done, Ordering::Relaxed);
                }
                if last {
                    return;
                }
                std::thread::sleep(POLL);
            }
        })?;
        Ok(Follower { stop, settled, handle: Some(handle) })
    }

    /// Bytes settled so far.
    pub fn settled(&self) -> u64 {
        self.settled.load(Ordering::Relaxed)
    }

    /// Stops following (after settling what is due at the file's length now) and waits.
    pub fn finish(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("th-writeback-{}-{name}", std::process::id()));
        let _ = std::fs::remove_file(&d);
        d
    }

    #[test]
    fn a_follower_settles_a_file_written_by_someone_else() {
        let p = tmp("follow");
        let mut f = File::create(&p).unwrap();
        let mut fol = Follower::start(File::open(&p).unwrap(), 65536).unwrap();
        for _ in 0..10 {
            f.write_all(&[3u8; 65536]).unwrap();
        }
        fol.finish();
        // At the stop, every step of the final length but the last is settled.
        assert_eq!(fol.settled(), 9 * 65536);
        drop(f);
        std::fs::remove_file(&p).unwrap();
    }
}
