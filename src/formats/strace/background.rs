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
//! CPU-s) at load 5.0-5.8, 2.75 -> 2.51 s (2.69 -> 2.59 CPU-s) at load 4.3-5.6.
//!
//! The queue is bounded ([`QUEUE`] messages of finished batches), so memory stays bounded by
//! the batches, not the file. Dropping a [`FileParse`] stops the thread at its next chunk.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use arrow_array::RecordBatch;

use super::{Config, StraceParser};

/// Bytes read per chunk (the parser splits a chunk this big over two threads).
pub const CHUNK: usize = 4 << 20;
/// Messages of batches held before the parse waits for the consumer.
const QUEUE: usize = 8;

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
    pub fn start(mut file: File, pid: Option<u32>, cfg: Config) -> std::io::Result<Self> {
        let (tx, rx) = sync_channel::<Msg>(QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let handle = std::thread::Builder::new().name("th-strace-parse".into()).spawn(move || {
            let mut p = Box::new(StraceParser::new(cfg, &[pid]));
            let mut buf = vec![0u8; CHUNK];
            let end = loop {
                if stop2.load(Ordering::Relaxed) {
                    break Ok(());
                }
                let n = match read_full(&mut file, &mut buf) {
                    Ok(n) => n,
                    Err(e) => break Err(e.to_string()),
                };
                if n == 0 {
                    break Ok(());
                }
                p.feed(0, &buf[..n]);
                let batches = p.take_batches();
                if !batches.is_empty() {
                    let s = p.stats();
                    let msg = Msg::Batches { batches, lines: s.lines, rejected: s.rejected };
                    if tx.send(msg).is_err() {
                        return; // the consumer is gone
                    }
                }
            };
            drop(buf);
            let done = end.map(|()| {
                p.feed(0, &[]);
                p.finish();
                let batches = p.take_batches();
                let s = p.stats();
                (batches, s.lines, s.rejected)
            });
            match done {
                Ok((batches, lines, rejected)) => {
                    if !batches.is_empty() && tx.send(Msg::Batches { batches, lines, rejected }).is_err() {
                        return;
                    }
                    let _ = tx.send(Msg::Done(Ok(p)));
                }
                Err(e) => {
                    let _ = tx.send(Msg::Done(Err(e)));
                }
            }
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
