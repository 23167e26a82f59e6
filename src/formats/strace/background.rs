//! One strace file parsed on a thread of its own, its batches handed over through a queue.
//!
//! Owns [`FileParse`]: the importer starts it before anything else (before the store makes
//! the trace, before pyarrow is imported), so the parse runs on the second core while the
//! Python side starts up, and the Python thread only appends finished batches. Before, Python
//! read a chunk, the parser parsed it, Python appended: the imports and the store's set-up
//! before the first chunk were time nobody parsed. Measured with `tracehouse bench import
//! --format strace-procs --sizes 3000000 --repeat 2` (3M lines of many processes, 2 cores shared
//! with other work, the code before and after run one after the other, together with the
//! pre-joined pairs of `PreJoin` in mod.rs): the whole command 3.57 -> 3.08 s (2.23 -> 2.06
//! CPU-s) at load 5.0-5.8, 2.75 -> 2.51 s (2.69 -> 2.59 CPU-s) at load 4.3-5.6; the command
//! alone interleaved 6 times at load 2.5-2.9 (file mapped as below): best 1.72 -> 1.51 s, median
//! 2.17 -> 2.01 s, median CPU 2.45 -> 2.40 s.
//!
//! The queue is bounded ([`QUEUE`] messages of finished batches), so memory stays bounded by
//! the batches, not the file. Dropping a [`FileParse`] stops the thread at its next chunk.
//!
//! The record batches are built on a third thread (`th-strace-build`): the parse thread cuts
//! its rows (moving the rows and their string arena, `Rows::take_cut`) and parses on while
//! the builder turns them into columns and hands them on, in order, then sends the emptied
//! buffers back. The parse thread's stage B is the import's critical path (a CPU timeline of
//! the command had it busy 45 of every 50 ms while the other core idled between checkpoints),
//! and the build was a fifth of it. Measured on the 3M-line many-process log, interleaved,
//! the code before and after: the parse alone (`examples/strace_speed.rs`, 6 each) 0.47-0.50
//! -> 0.42-0.44 s at the same 0.66-0.70 CPU-s; `tracehouse import strace` (10 each) median
//! 0.850 -> 0.820 s, best 0.830 -> 0.790 s.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use arrow_array::RecordBatch;

use super::{BuildJob, Config, StraceParser, ToBuilder};

/// Bytes read per chunk (the parser splits a chunk this big over two threads).
pub const CHUNK: usize = 4 << 20;
/// Messages of batches held before the parse waits for the consumer.
const QUEUE: usize = 8;
/// Cuts (about a batch each) waiting for the builder before the parse waits for it.
const BUILD_QUEUE: usize = 2;

/// What the parse thread hands over.
pub enum Msg {
    /// Batches completed so far.
    Batches {
        /// (event type, batch), as [`StraceParser::take_batches`] gives them.
        batches: Vec<(&'static str, RecordBatch)>,
        /// Lines read up to here.
        lines: u64,
        /// Lines rejected up to here.
        rejected: u64,
    },
    /// The end: the finished parser (its stats, rejects, producers and late rows), or the
    /// read error that stopped it.
    Done(Result<Box<StraceParser>, String>),
}

/// A parse of one file running on its own thread (see the module documentation).
pub struct FileParse {
    /// (in a Mutex only so the Python object holding it may move between threads)
    rx: Option<Mutex<Receiver<Msg>>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl FileParse {
    /// Starts parsing `file` (lines without a pid column get `pid`). After [`FileParse::stop`]
    /// the parse ends at its next chunk and hands over what it has as if the file ended there.
    pub fn start(file: File, pid: Option<u32>, cfg: Config) -> std::io::Result<Self> {
        let mut input = Input::open(file);
        let (tx, rx) = sync_channel::<Msg>(QUEUE);
        let (jobs, job_rx) = sync_channel::<ToBuilder>(BUILD_QUEUE);
        let (spares, spare_rx) = channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        // The builder turns cuts into record batches and hands them on, in order; the parse
        // goes on meanwhile (see BUILD_QUEUE).
        let builder = std::thread::Builder::new().name("th-strace-build".into()).spawn(move || {
            let mut names: Vec<Box<[u8]>> = Vec::new();
            for job in job_rx {
                let msg = match job {
                    ToBuilder::Cut(BuildJob { mut cut, names: new, lines, rejected }) => {
                        names.extend(new);
                        let batches = cut.build(&names);
                        let _ = spares.send((cut.rows, cut.arena));
                        Msg::Batches { batches, lines, rejected }
                    }
                    ToBuilder::End(r) => Msg::Done(r),
                };
                let done = matches!(msg, Msg::Done(_));
                if tx.send(msg).is_err() || done {
                    return; // the consumer is gone, or everything was handed over
                }
            }
        })?;
        let handle = std::thread::Builder::new().name("th-strace-parse".into()).spawn(move || {
            let mut p = Box::new(StraceParser::new(cfg, &[pid]));
            let (job_tx, done_tx) = (jobs.clone(), jobs);
            p.build_elsewhere(job_tx, spare_rx);
            let end = loop {
                if stop2.load(Ordering::Relaxed) {
                    break Ok(());
                }
                let chunk = match input.next() {
                    Ok(c) => c,
                    Err(e) => break Err(e.to_string()),
                };
                if chunk.is_empty() {
                    break Ok(());
                }
                p.feed(0, chunk);
                input.parsed();
                if !p.building_elsewhere() {
                    return; // the builder is gone: so is the consumer
                }
            };
            drop(input);
            let done = end.map(|()| {
                p.feed(0, &[]);
                p.finish();
                p.build_here();
                p
            });
            let _ = done_tx.send(ToBuilder::End(done));
            let _ = builder.join();
        })?;
        Ok(FileParse { rx: Some(Mutex::new(rx)), stop, handle: Some(handle) })
    }

    /// The next message; None after `Done` was taken.
    pub fn recv(&mut self) -> Option<Msg> {
        let msg = self.rx.as_mut()?.get_mut().ok().and_then(|rx| rx.recv().ok());
        if matches!(msg, Some(Msg::Done(_)) | None) {
            self.rx = None;
            if let Some(h) = self.handle.take() {
                let _ = h.join();
            }
        }
        msg
    }

    /// Asks the parse to end at its next chunk (it still hands over its parser).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Drop for FileParse {
    fn drop(&mut self) {
        self.stop();
        // Dropping the receiver unblocks a thread waiting to send.
        self.rx = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The file's bytes, chunk by chunk: mapped read-only where it can be (parsed in place, pages
/// dropped from the mapping once parsed, so memory does not grow with the file), else read into
/// a buffer. Reading copied every byte once more: the command's system time was 0.41-0.48 s
/// against 0.23-0.42 s for the mapped file of the code before (4 interleaved runs, load 2.5-2.9).
enum Input {
    Mapped { ptr: *mut libc::c_void, len: usize, pos: usize },
    Read { file: File, buf: Vec<u8> },
}

// SAFETY: the mapping is owned by this value alone (unmapped on drop) and only read.
unsafe impl Send for Input {}

impl Input {
    fn open(file: File) -> Input {
        use std::os::unix::io::AsRawFd;
        let len = file.metadata().ok().filter(|m| m.is_file()).map_or(0, |m| m.len() as usize);
        if len > 0 {
            // SAFETY: a fresh private read-only mapping of the whole file; checked below. (A file
            // truncated while it is parsed raises SIGBUS, as Python's mmap of it did before.)
            let ptr = unsafe {
                libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0)
            };
            if ptr != libc::MAP_FAILED {
                // SAFETY: advice on the mapping just made.
                unsafe { libc::madvise(ptr, len, libc::MADV_SEQUENTIAL) };
                return Input::Mapped { ptr, len, pos: 0 };
            }
        }
        Input::Read { file, buf: vec![0u8; CHUNK] }
    }

    /// The next chunk of at most [`CHUNK`] bytes; empty at the end.
    fn next(&mut self) -> std::io::Result<&[u8]> {
        match self {
            Input::Mapped { ptr, len, pos } => {
                let n = CHUNK.min(*len - *pos);
                // SAFETY: `pos + n <= len`, within the mapping, which lives as long as `self`.
                let chunk = unsafe { std::slice::from_raw_parts((*ptr as *const u8).add(*pos), n) };
                *pos += n;
                Ok(chunk)
            }
            Input::Read { file, buf } => {
                let n = read_full(file, buf)?;
                Ok(&buf[..n])
            }
        }
    }

    /// The last chunk is parsed (the parser keeps copies of what it still needs): its pages
    /// leave this process's memory.
    fn parsed(&mut self) {
        if let Input::Mapped { ptr, pos, .. } = self {
            let start = (*pos - 1) / CHUNK * CHUNK; // chunks start at multiples of CHUNK (page-aligned)
                                                    // SAFETY: a range of the mapping; DONTNEED on a read-only file mapping only drops pages.
            unsafe {
                libc::madvise((*ptr as *mut u8).add(start) as *mut libc::c_void, *pos - start, libc::MADV_DONTNEED)
            };
        }
    }
}

impl Drop for Input {
    fn drop(&mut self) {
        if let Input::Mapped { ptr, len, .. } = self {
            // SAFETY: the mapping made in `open`, unmapped once.
            unsafe { libc::munmap(*ptr, *len) };
        }
    }
}

/// Reads until `buf` is full or the file ends; the bytes read.
fn read_full(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
