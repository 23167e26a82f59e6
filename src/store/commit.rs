//! Group commit of one trace's write-ahead log (fsync policy `batch`).
//!
//! Owns the thread that makes appended WAL records durable and what waits for that: the
//! writer reports each record it wrote ([`GroupCommit::written`]) and each WAL file it
//! switched away from ([`GroupCommit::switched`]); the thread fsyncs everything written so
//! far in one go (older files first, then the current one) and then runs the actions
//! registered for the records now durable ([`GroupCommit::on_durable`]; the HTTP server
//! answers its write requests this way) and wakes blocked callers ([`GroupCommit::wait`]).
//!
//! Why native: answering a small write took four thread hand-offs through the interpreter
//! lock (the writer woke a syncer, the syncer a waiter thread, the waiter ran one Python
//! callback per request), ~0.3 ms of a 1 ms round trip. Here the fsync thread answers
//! directly.
//!
//! Pacing: a commit starts at once when anyone waits for a record not yet durable (an
//! acknowledged writer waits one fsync, and appends arriving during it share the next);
//! records nobody waits for are committed within `interval`. When nearly every record will be
//! waited for (a server acknowledging durable writes), [`GroupCommit::set_eager`] starts the
//! commit as the record is written, not when its waiter comes: the fsync then overlaps the
//! writer's bookkeeping between its WAL write and handing over its answer (line-protocol
//! results, a Python round trip that waits for the interpreter lock under load).
//!
//! Wake-ups: on a loaded machine each thread wake-up costs a run-queue wait (measured
//! 2026-11-26 with `/proc/<pid>/task/<tid>/schedstat` at load average 4.8 on 2 cores: the
//! commit thread waited 1.77 s of a 4 s run, ~210 µs per wake, at 2 writers x 100 rows). So
//! the thread is woken only when it sleeps and has something to do: not for every `written`
//! while it fsyncs, and `done` is signalled only when someone blocks in [`GroupCommit::wait`].
//!
//! Descriptors: the current WAL file stays the writer's; it is duplicated under the lock
//! for each commit, so the writer must report a switch *before* it closes anything. The
//! files it switched away from become this object's, fsynced and closed by the next commit.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::fs::File;
use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::mutex::lock;

/// What to do once a record is durable (`Err` with the reason when it never will be).
pub type OnDurable = Box<dyn FnOnce(Result<(), String>) + Send>;

struct Waiter {
    lsn: u64,
    action: OnDurable,
}

// Ordered by LSN alone: waiters of one LSN become due together, in any order.
impl PartialEq for Waiter {
    fn eq(&self, o: &Self) -> bool {
        self.lsn == o.lsn
    }
}
impl Eq for Waiter {}
impl PartialOrd for Waiter {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}
impl Ord for Waiter {
    // Reversed: BinaryHeap is a max-heap and the lowest LSN is due first.
    fn cmp(&self, o: &Self) -> CmpOrdering {
        o.lsn.cmp(&self.lsn)
    }
}

struct State {
    written: u64,
    durable: u64,
    fd: RawFd,
    closed: Vec<OwnedFd>,
    waiters: BinaryHeap<Waiter>,
    blocked: usize,
    urgent: bool,
    /// Commit as soon as a record is written (see the module docs).
    eager: bool,
    /// The thread waits for `work` (a notification is needed to wake it).
    sleeping: bool,
    stop: bool,
    error: Option<String>,
}

struct Shared {
    state: Mutex<State>,
    work: Condvar,
    done: Condvar,
    interval: Duration,
}

/// The group committer of one WAL (see the module docs).
pub struct GroupCommit {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl GroupCommit {
    /// Starts committing WAL file `fd` (the writer keeps it open until it reports a switch
    /// or stops this), with records nobody waits for committed within `interval`.
    pub fn start(fd: RawFd, interval: Duration) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                written: 0,
                durable: 0,
                fd,
                closed: Vec::new(),
                waiters: BinaryHeap::new(),
                blocked: 0,
                urgent: false,
                eager: false,
                sleeping: false,
                stop: false,
                error: None,
            }),
            work: Condvar::new(),
            done: Condvar::new(),
            interval,
        });
        let s = Arc::clone(&shared);
        let thread = thread::Builder::new().name("th-commit".into()).spawn(move || run(&s))?;
        Ok(Self { shared, thread: Mutex::new(Some(thread)) })
    }

    /// Records up to `lsn` are written (not yet durable). The first record written after an
    /// idle spell wakes the thread, so it is committed within `interval` even when nobody waits
    /// for it (what `serve --ack written` promises); later ones find the thread timing a commit.
    /// Eager: the commit starts at once, whether or not anyone waits yet.
    pub fn written(&self, lsn: u64) {
        let mut s = lock(&self.shared.state);
        let idle = s.written <= s.durable && s.closed.is_empty();
        s.written = s.written.max(lsn);
        if s.eager {
            s.urgent = true;
        }
        let wake = s.sleeping && (idle || s.eager);
        drop(s);
        if wake {
            self.shared.work.notify_one();
        }
    }

    /// Whether a commit starts as soon as a record is written (for writers whose every record
    /// is awaited: an fsync per burst of writes instead of one per `interval`), or only once
    /// someone waits for it (the default).
    pub fn set_eager(&self, eager: bool) {
        lock(&self.shared.state).eager = eager;
    }

    /// See [`GroupCommit::set_eager`].
    pub fn eager(&self) -> bool {
        lock(&self.shared.state).eager
    }

    /// The writer switched to file `new_fd`; `old` (every record written so far that is not
    /// durable yet is in it or an earlier one) is made durable and closed by the next commit.
    pub fn switched(&self, old: OwnedFd, new_fd: RawFd) {
        let mut s = lock(&self.shared.state);
        let idle = s.written <= s.durable && s.closed.is_empty();
        s.closed.push(old);
        s.fd = new_fd;
        let wake = idle && s.sleeping;
        drop(s);
        if wake {
            self.shared.work.notify_one();
        }
    }

    /// Highest LSN known durable.
    pub fn durable(&self) -> u64 {
        lock(&self.shared.state).durable
    }

    /// Why commits stopped (an fsync failed), if they did.
    pub fn error(&self) -> Option<String> {
        lock(&self.shared.state).error.clone()
    }

    /// Runs `action` once `lsn` is durable (at once, on this thread, if it is already);
    /// with the reason if it never will be (an fsync failed, or the committer stopped first).
    pub fn on_durable(&self, lsn: u64, action: OnDurable) {
        let mut s = lock(&self.shared.state);
        if lsn <= s.durable {
            drop(s);
            return action(Ok(()));
        }
        if let Some(e) = s.error.clone().or_else(|| s.stop.then(|| "the writer was closed".to_string())) {
            drop(s);
            return action(Err(e));
        }
        s.waiters.push(Waiter { lsn, action });
        s.urgent = true;
        let wake = s.sleeping;
        drop(s);
        if wake {
            self.shared.work.notify_one();
        }
    }

    /// Blocks until `lsn` is durable (true), `timeout` passes (false) or commits stopped (the reason).
    pub fn wait(&self, lsn: u64, timeout: Option<Duration>) -> Result<bool, String> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut s = lock(&self.shared.state);
        s.blocked += 1;
        let out = loop {
            if lsn <= s.durable {
                break Ok(true);
            }
            if let Some(e) = &s.error {
                break Err(e.clone());
            }
            if s.stop && s.written <= s.durable && s.closed.is_empty() {
                break Err("the writer was closed".to_string());
            }
            s.urgent = true;
            self.shared.work.notify_one();
            s = match deadline {
                None => self.shared.done.wait(s).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        break Ok(false);
                    }
                    self.shared.done.wait_timeout(s, d - now).unwrap_or_else(|e| e.into_inner()).0
                }
            };
        };
        s.blocked -= 1;
        out
    }

    /// Makes everything written so far durable, then stops the thread (idempotent). Later
    /// waits for records not durable get an error; the writer may then close its file.
    pub fn stop(&self) {
        lock(&self.shared.state).stop = true;
        self.shared.work.notify_all();
        let handle = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

impl Drop for GroupCommit {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(sh: &Shared) {
    let mut last = Instant::now();
    loop {
        let (target, fd, olds) = {
            let mut s = lock(&sh.state);
            loop {
                let pending = s.written > s.durable || !s.closed.is_empty();
                if s.error.is_none() && pending && (s.urgent || s.stop || last.elapsed() >= sh.interval) {
                    break;
                }
                if s.stop || s.error.is_some() {
                    // Nothing more will become durable: whoever still waits is told why.
                    let why = s.error.clone().unwrap_or_else(|| "the writer was closed".to_string());
                    let rest: Vec<Waiter> = std::mem::take(&mut s.waiters).into_vec();
                    sh.done.notify_all();
                    let stopping = s.stop;
                    drop(s);
                    for w in rest {
                        (w.action)(Err(why.clone()));
                    }
                    if stopping {
                        return;
                    }
                    s = lock(&sh.state);
                    if !s.stop {
                        s = sh.work.wait(s).unwrap_or_else(|e| e.into_inner());
                    }
                    continue;
                }
                s.sleeping = true;
                s = if pending {
                    let wait = sh.interval.saturating_sub(last.elapsed());
                    sh.work.wait_timeout(s, wait).unwrap_or_else(|e| e.into_inner()).0
                } else {
                    // Idle until a record is written (`written` and `switched` wake it), a waiter
                    // comes or `stop`: no polling, and no record waits for a poll to be seen.
                    sh.work.wait(s).unwrap_or_else(|e| e.into_inner())
                };
                s.sleeping = false;
            }
            s.urgent = false;
            // SAFETY: the writer keeps `fd` open until it reports a switch (under this lock)
            // or stops this committer; the duplicate is ours.
            let dup = unsafe { BorrowedFd::borrow_raw(s.fd) }.try_clone_to_owned();
            if let Err(e) = &dup {
                if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                    // Out of descriptors for a moment (many connections): not a failed fsync,
                    // which would refuse every durable write until a restart. Try again shortly.
                    s.urgent = true;
                    drop(s);
                    thread::sleep(Duration::from_millis(5));
                    continue;
                }
            }
            (s.written, dup, std::mem::take(&mut s.closed))
        };
        // Older files first: a record counts as durable only when every file up to it is.
        let mut result: std::io::Result<()> = Ok(());
        for f in olds.into_iter().map(File::from) {
            result = result.and_then(|()| f.sync_all());
        }
        result = result.and_then(|()| fd.and_then(|fd| File::from(fd).sync_data()));
        last = Instant::now();
        let ready = {
            let mut s = lock(&sh.state);
            match result {
                Ok(()) => s.durable = s.durable.max(target),
                Err(e) => s.error = Some(format!("WAL fsync failed: {e}")),
            }
            let mut ready = Vec::new();
            while s.waiters.peek().is_some_and(|w| w.lsn <= s.durable) {
                ready.push(s.waiters.pop().expect("peeked"));
            }
            // Someone waits for a record written during that fsync (eager: anything was
            // written during it): commit again at once.
            if s.waiters.peek().is_some_and(|w| w.lsn <= s.written)
                || s.blocked > 0
                || (s.eager && s.written > s.durable)
            {
                s.urgent = true;
            }
            if s.blocked > 0 {
                sh.done.notify_all();
            }
            ready
        };
        for w in ready {
            (w.action)(Ok(()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::sync::mpsc;

    fn wal(dir: &std::path::Path, name: &str) -> File {
        File::options().create(true).append(true).open(dir.join(name)).expect("open")
    }

    /// A fresh directory `th-commit-<tag>-<pid>`, its WAL file `a.wal` and a committer on it.
    fn started(tag: &str, interval: Duration) -> (std::path::PathBuf, File, GroupCommit) {
        let dir = std::env::temp_dir().join(format!("th-commit-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = wal(&dir, "a.wal");
        let gc = GroupCommit::start(f.as_raw_fd(), interval).unwrap();
        (dir, f, gc)
    }

    #[test]
    fn actions_run_in_lsn_order_once_their_records_are_durable() {
        let (dir, mut f, gc) = started("a", Duration::from_secs(3600));
        let (tx, rx) = mpsc::channel();
        for lsn in [2u64, 1] {
            let tx = tx.clone();
            gc.on_durable(lsn, Box::new(move |r| tx.send((lsn, r)).unwrap()));
        }
        // Nothing written yet: nothing can be durable, however urgent.
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err());
        f.write_all(b"one").unwrap();
        gc.written(1);
        gc.on_durable(1, Box::new(|_| {})); // wakes the thread
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), (1, Ok(())));
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err()); // 2 is not written
                                                                      // A switch: the old file is the committer's now, fsynced before 2 counts.
        let g = wal(&dir, "b.wal");
        gc.switched(OwnedFd::from(f), g.as_raw_fd());
        gc.written(2);
        assert_eq!(gc.wait(2, Some(Duration::from_secs(5))), Ok(true));
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), (2, Ok(())));
        assert_eq!(gc.durable(), 2);
        // Already durable: the action runs at once.
        gc.on_durable(2, Box::new(move |r| tx.send((99, r)).unwrap()));
        assert_eq!(rx.recv_timeout(Duration::from_millis(10)).unwrap(), (99, Ok(())));
        gc.stop();
        assert_eq!(gc.wait(3, None), Err("the writer was closed".to_string()));
        let (tx2, rx2) = mpsc::channel();
        gc.on_durable(3, Box::new(move |r| tx2.send(r).unwrap()));
        assert!(rx2.recv().unwrap().is_err());
        drop(g);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn records_nobody_waits_for_are_committed_within_the_interval() {
        let (dir, f, gc) = started("i", Duration::from_millis(5));
        // The second record comes after an idle spell (nothing pending: the thread sleeps until
        // woken): `serve --ack written` promises its fsync within the interval all the same.
        for (lsn, idle) in [(7u64, 0u64), (8, 50)] {
            thread::sleep(Duration::from_millis(idle));
            gc.written(lsn);
            let t = Instant::now();
            while gc.durable() < lsn {
                assert!(t.elapsed() < Duration::from_secs(30), "record {lsn} never committed");
                thread::sleep(Duration::from_millis(1));
            }
        }
        gc.stop();
        drop(f);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn eager_commits_a_written_record_before_anyone_waits() {
        // An interval of an hour: only eagerness can make a record nobody waits for durable.
        let (dir, mut f, gc) = started("e", Duration::from_secs(3600));
        gc.set_eager(true);
        assert!(gc.eager());
        for lsn in 1..=3u64 {
            f.write_all(b"rec").unwrap();
            gc.written(lsn);
            let t = Instant::now();
            while gc.durable() < lsn {
                assert!(t.elapsed() < Duration::from_secs(30), "eager: record {lsn} never committed");
                thread::sleep(Duration::from_millis(1));
            }
        }
        // Not eager: a record written now waits for its waiter (or the hour).
        gc.set_eager(false);
        f.write_all(b"rec").unwrap();
        gc.written(4);
        thread::sleep(Duration::from_millis(100));
        assert_eq!(gc.durable(), 3);
        assert_eq!(gc.wait(4, Some(Duration::from_secs(5))), Ok(true));
        gc.stop();
        drop(f);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_fsync_fails_every_waiter_and_later_ones() {
        // fsync of a pipe fails (EINVAL): a stand-in for a disk that refuses.
        let (r, w) = std::io::pipe().expect("pipe");
        let gc = GroupCommit::start(w.as_raw_fd(), Duration::from_secs(3600)).unwrap();
        gc.written(1);
        let got = gc.wait(1, Some(Duration::from_secs(5)));
        assert!(matches!(&got, Err(e) if e.contains("WAL fsync failed")), "{got:?}");
        assert!(gc.error().is_some());
        let (tx, rx) = mpsc::channel();
        gc.on_durable(2, Box::new(move |r| tx.send(r).unwrap()));
        assert!(rx.recv_timeout(Duration::from_secs(5)).unwrap().is_err());
        gc.stop();
        drop((r, w));
    }
}
