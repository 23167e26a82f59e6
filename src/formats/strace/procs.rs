//! Processes, threads and their file descriptor tables, rebuilt from the trace.
//!
//! Owns what the kernel would know and strace does not print on every line: which
//! process a thread belongs to (from `clone` flags), the process tree (fork), each
//! process's fd table (shared by threads and by `CLONE_FILES`, copied by fork,
//! pruned of close-on-exec fds by execve) and, per open file description, its path
//! and file position (shared by dup'ed fds and across fork, as in the kernel). The
//! parser uses it to give `path` to calls on fds when `-y` is absent and `offset` to
//! plain read/write calls; producers come from it.
//!
//! strace prints only thread ids. A tid first seen after its `clone` returned is
//! placed by that clone's flags. One seen earlier (the child's first line printed
//! before the parent's `<... clone resumed>`) is placed by the newest unfinished
//! clone, and moved if the clone's result says otherwise; a tid never announced by a
//! clone (the traced command itself, an attached process) is a process leader.

// tids and fds are small trusted integers: FxHash (see Cargo.toml); SipHash cost 3 % of the parse.
use rustc_hash::FxHashMap as FxMap;

/// fds below this live in a vector; larger ones (rare) in a map, so a huge fd number in
/// bad input costs no memory.
const SMALL_FDS: usize = 4096;

/// One open file description (what `open` creates and `dup`/fork share).
#[derive(Debug, Default)]
struct OpenFile {
    /// Path, unescaped (or as printed when not valid UTF-8); None when unknown.
    path: Option<Box<[u8]>>,
    /// File position; None when unknown (opened before the trace, O_APPEND, pipes...).
    pos: Option<i64>,
    /// fds referring to it, over all tables.
    refs: u32,
}

#[derive(Clone, Copy, Debug)]
struct Fd {
    file: u32,
    cloexec: bool,
}

#[derive(Debug, Default, Clone)]
struct FdTable {
    small: Vec<Option<Fd>>,
    big: FxMap<i64, Fd>,
    /// Processes using this table.
    users: u32,
}

impl FdTable {
    fn get(&self, fd: i64) -> Option<Fd> {
        if (0..SMALL_FDS as i64).contains(&fd) {
            self.small.get(fd as usize).copied().flatten()
        } else {
            self.big.get(&fd).copied()
        }
    }

    fn set(&mut self, fd: i64, v: Option<Fd>) -> Option<Fd> {
        if (0..SMALL_FDS as i64).contains(&fd) {
            let i = fd as usize;
            if self.small.len() <= i {
                v?; // clearing an fd the table never had
                self.small.resize(i + 1, None);
            }
            std::mem::replace(&mut self.small[i], v)
        } else {
            match v {
                Some(v) => self.big.insert(fd, v),
                None => self.big.remove(&fd),
            }
        }
    }

    fn all(&self) -> Vec<(i64, Fd)> {
        let mut out: Vec<(i64, Fd)> =
            self.small.iter().enumerate().filter_map(|(i, f)| f.map(|f| (i as i64, f))).collect();
        out.extend(self.big.iter().map(|(k, v)| (*k, *v)));
        out
    }
}

#[derive(Debug)]
struct Process {
    pid: u32,
    producer: i32,
    parent: Option<u32>,
    /// Command name (basename of the last successful execve).
    name: Option<String>,
    table: u32,
    /// Working directory when known (from `AT_FDCWD</dir>` or chdir).
    cwd: Option<Box<[u8]>>,
    /// Live threads.
    threads: u32,
    /// Ever had a thread placed in it (a process guessed wrongly and emptied is not a
    /// producer).
    used: bool,
}

#[derive(Debug)]
struct Thread {
    tid: u32,
    producer: i32,
    proc: u32,
    alive: bool,
}

/// How a pending or finished clone places its child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct CloneFlags {
    /// CLONE_THREAD: the child is a thread of the caller's process.
    pub thread: bool,
    /// CLONE_FILES: the child shares the caller's fd table.
    pub files: bool,
}

impl CloneFlags {
    /// The flags of a clone/clone3 call from its raw arguments (fork/vfork: none).
    pub fn from_args(raw: &[u8]) -> Self {
        let has = |f: &[u8]| memchr::memmem::find(raw, f).is_some();
        CloneFlags { thread: has(b"CLONE_THREAD"), files: has(b"CLONE_FILES") }
    }
}

/// A producer row: id, parent id, kind, name, pid or tid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Producer {
    /// Producer id (the `producer` column of events).
    pub id: i32,
    /// Parent producer: a thread's process, a process's parent process.
    pub parent: Option<i32>,
    /// "process" or "thread".
    pub kind: &'static str,
    /// Command name for processes (`pid N` before any execve), `name/tid` for threads.
    pub name: String,
    /// The pid (processes) or tid (threads) strace printed.
    pub os_id: u32,
    /// For threads: the pid of their process.
    pub pid: Option<u32>,
}

/// Every process, thread, fd table and open file seen so far.
#[derive(Debug, Default)]
pub(super) struct Procs {
    files: Vec<OpenFile>,
    free_files: Vec<u32>,
    tables: Vec<FdTable>,
    procs: Vec<Process>,
    threads: Vec<Thread>,
    by_tid: FxMap<u32, u32>,
    /// Unfinished clones: (caller tid, flags), newest last.
    pending_clones: Vec<(u32, CloneFlags)>,
    next_producer: i32,
    /// Most recent tid lookup (consecutive lines often come from one thread).
    last: Option<(u32, u32)>,
}

impl Procs {
    pub fn new() -> Self {
        Procs { next_producer: 1, ..Default::default() }
    }

    fn producer_id(&mut self) -> i32 {
        let id = self.next_producer;
        self.next_producer += 1;
        id
    }

    /// The thread index of `tid`, creating the thread (and maybe its process) on first sight.
    #[inline]
    pub fn thread(&mut self, tid: u32) -> u32 {
        if let Some((t, i)) = self.last {
            if t == tid {
                return i;
            }
        }
        let i = match self.by_tid.get(&tid) {
            Some(&i) => i,
            None => self.new_thread(tid),
        };
        self.last = Some((tid, i));
        i
    }

    fn new_thread(&mut self, tid: u32) -> u32 {
        match self.pending_clones.last().copied() {
            Some((parent, flags)) if parent != tid => {
                let p = self.thread(parent);
                self.spawn(p, tid, flags)
            }
            _ => {
                let table = self.new_table();
                let proc = self.new_process(tid, None, table);
                self.add_thread(tid, proc)
            }
        }
    }

    fn new_table(&mut self) -> u32 {
        self.tables.push(FdTable::default());
        (self.tables.len() - 1) as u32
    }

    fn new_process(&mut self, pid: u32, parent: Option<u32>, table: u32) -> u32 {
        let producer = self.producer_id();
        self.tables[table as usize].users += 1;
        let (name, cwd) = match parent {
            Some(p) => {
                let pp = &self.procs[p as usize];
                (pp.name.clone(), pp.cwd.clone())
            }
            None => (None, None),
        };
        self.procs.push(Process { pid, producer, parent, name, table, cwd, threads: 0, used: false });
        (self.procs.len() - 1) as u32
    }

    fn add_thread(&mut self, tid: u32, proc: u32) -> u32 {
        let producer = self.producer_id();
        let p = &mut self.procs[proc as usize];
        p.threads += 1;
        p.used = true;
        self.threads.push(Thread { tid, producer, proc, alive: true });
        let i = (self.threads.len() - 1) as u32;
        self.by_tid.insert(tid, i);
        self.last = Some((tid, i));
        i
    }

    /// Creates thread `tid` as the child of thread index `parent` under `flags`.
    fn spawn(&mut self, parent: u32, tid: u32, flags: CloneFlags) -> u32 {
        let pproc = self.threads[parent as usize].proc;
        let proc = if flags.thread {
            pproc
        } else {
            let ptable = self.procs[pproc as usize].table;
            let table = if flags.files { ptable } else { self.copy_table(ptable) };
            self.new_process(tid, Some(pproc), table)
        };
        self.add_thread(tid, proc)
    }

    fn copy_table(&mut self, from: u32) -> u32 {
        let mut t = self.tables[from as usize].clone();
        t.users = 0;
        for (_, fd) in t.all() {
            self.files[fd.file as usize].refs += 1;
        }
        self.tables.push(t);
        (self.tables.len() - 1) as u32
    }

    /// The tid of thread index `t`.
    #[inline]
    pub fn tid(&self, t: u32) -> u32 {
        self.threads[t as usize].tid
    }

    /// The producer id of thread index `t`.
    #[inline]
    pub fn producer(&self, t: u32) -> i32 {
        self.threads[t as usize].producer
    }

    /// A clone/fork by `tid` has started (its result comes on a later line).
    pub fn clone_started(&mut self, tid: u32, flags: CloneFlags) {
        self.pending_clones.push((tid, flags));
    }

    /// The clone started by `tid` has ended (successfully or not).
    pub fn clone_ended(&mut self, tid: u32) {
        if let Some(k) = self.pending_clones.iter().rposition(|(t, _)| *t == tid) {
            self.pending_clones.remove(k);
        }
    }

    /// Thread index `parent` created `child` with `flags`: place the child (again, if
    /// it was seen before and placed differently).
    pub fn cloned(&mut self, parent: u32, child: u32, flags: CloneFlags) {
        let pproc = self.threads[parent as usize].proc;
        if let Some(&c) = self.by_tid.get(&child) {
            let cproc = self.threads[c as usize].proc;
            let right = if flags.thread {
                cproc == pproc
            } else {
                cproc != pproc && self.procs[cproc as usize].parent == Some(pproc)
            };
            if right || !self.threads[c as usize].alive {
                if right {
                    return;
                }
            } else {
                // Seen before the clone returned and placed wrongly: move it.
                if flags.thread {
                    self.procs[cproc as usize].threads -= 1;
                    if self.procs[cproc as usize].threads == 0 {
                        self.procs[cproc as usize].used = false;
                    }
                    self.threads[c as usize].proc = pproc;
                    self.procs[pproc as usize].threads += 1;
                } else {
                    let ptable = self.procs[pproc as usize].table;
                    let table = if flags.files { ptable } else { self.copy_table(ptable) };
                    self.procs[cproc as usize].threads -= 1;
                    let proc = self.new_process(child, Some(pproc), table);
                    self.threads[c as usize].proc = proc;
                    let p = &mut self.procs[proc as usize];
                    p.threads += 1;
                    p.used = true;
                }
                return;
            }
        }
        self.spawn(parent, child, flags);
    }

    /// Thread `tid` has exited (`+++ exited ...`): a later line with the same tid is a
    /// new thread (tids are reused).
    pub fn exited(&mut self, t: u32) {
        let th = &mut self.threads[t as usize];
        if !th.alive {
            return;
        }
        th.alive = false;
        let tid = th.tid;
        let proc = th.proc;
        self.by_tid.remove(&tid);
        self.last = None;
        self.pending_clones.retain(|(p, _)| *p != tid);
        let p = &mut self.procs[proc as usize];
        p.threads = p.threads.saturating_sub(1);
        if p.threads == 0 {
            // The last thread is gone: drop the table's references (if no one shares it).
            let table = p.table;
            let tbl = &mut self.tables[table as usize];
            tbl.users = tbl.users.saturating_sub(1);
            if tbl.users == 0 {
                for (fd, _) in tbl.all() {
                    self.close_in(table, fd);
                }
            }
        }
    }

    /// A successful execve in thread index `t`: the process gets `path`'s basename as
    /// its name, a private fd table, and its close-on-exec fds closed.
    pub fn exec(&mut self, t: u32, path: Option<&[u8]>) {
        let proc = self.threads[t as usize].proc;
        if let Some(path) = path {
            let base = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
            if !base.is_empty() {
                self.procs[proc as usize].name = Some(String::from_utf8_lossy(base).into_owned());
            }
        }
        let table = self.procs[proc as usize].table;
        let table = if self.tables[table as usize].users > 1 {
            self.tables[table as usize].users -= 1;
            let t = self.copy_table(table);
            self.tables[t as usize].users = 1;
            self.procs[proc as usize].table = t;
            t
        } else {
            table
        };
        for (fd, f) in self.tables[table as usize].all() {
            if f.cloexec {
                self.close_in(table, fd);
            }
        }
    }

    #[inline]
    fn table_of(&self, t: u32) -> u32 {
        self.procs[self.threads[t as usize].proc as usize].table
    }

    /// Path and position of `fd` in thread index `t`'s table.
    #[inline]
    pub fn fd_info(&self, t: u32, fd: i64) -> Option<(Option<&[u8]>, Option<i64>)> {
        let f = self.tables[self.table_of(t) as usize].get(fd)?;
        let file = &self.files[f.file as usize];
        Some((file.path.as_deref(), file.pos))
    }

    /// Sets the position of `fd`'s open file (no-op for an unknown fd).
    #[inline]
    pub fn set_pos(&mut self, t: u32, fd: i64, pos: Option<i64>) {
        if let Some(f) = self.tables[self.table_of(t) as usize].get(fd) {
            self.files[f.file as usize].pos = pos;
        }
    }

    /// `fd` now refers to a new open file description.
    pub fn open(&mut self, t: u32, fd: i64, path: Option<&[u8]>, pos: Option<i64>, cloexec: bool) {
        if fd < 0 {
            return;
        }
        let table = self.table_of(t);
        self.close_in(table, fd);
        let file = OpenFile { path: path.map(Into::into), pos, refs: 1 };
        let id = match self.free_files.pop() {
            Some(id) => {
                self.files[id as usize] = file;
                id
            }
            None => {
                self.files.push(file);
                (self.files.len() - 1) as u32
            }
        };
        self.tables[table as usize].set(fd, Some(Fd { file: id, cloexec }));
    }

    /// `close(fd)` in thread index `t`'s table.
    pub fn close(&mut self, t: u32, fd: i64) {
        let table = self.table_of(t);
        self.close_in(table, fd);
    }

    /// close_range(first, last).
    pub fn close_range(&mut self, t: u32, first: i64, last: i64) {
        let table = self.table_of(t);
        for (fd, _) in self.tables[table as usize].all() {
            if fd >= first && fd <= last {
                self.close_in(table, fd);
            }
        }
    }

    fn close_in(&mut self, table: u32, fd: i64) {
        if let Some(old) = self.tables[table as usize].set(fd, None) {
            let f = &mut self.files[old.file as usize];
            f.refs = f.refs.saturating_sub(1);
            if f.refs == 0 {
                *f = OpenFile::default();
                self.free_files.push(old.file);
            }
        }
    }

    /// `new` refers to `old`'s open file description (dup, dup2, dup3, F_DUPFD).
    pub fn dup(&mut self, t: u32, old: i64, new: i64, cloexec: bool) {
        if new < 0 || old == new {
            return;
        }
        let table = self.table_of(t);
        match self.tables[table as usize].get(old) {
            Some(f) => {
                self.close_in(table, new);
                self.files[f.file as usize].refs += 1;
                self.tables[table as usize].set(new, Some(Fd { file: f.file, cloexec }));
            }
            None => self.close_in(table, new),
        }
    }

    /// Sets the close-on-exec flag of `fd`.
    pub fn set_cloexec(&mut self, t: u32, fd: i64, on: bool) {
        let table = self.table_of(t) as usize;
        if let Some(mut f) = self.tables[table].get(fd) {
            f.cloexec = on;
            self.tables[table].set(fd, Some(f));
        }
    }

    /// The working directory of thread index `t`'s process, when known.
    pub fn cwd(&self, t: u32) -> Option<&[u8]> {
        self.procs[self.threads[t as usize].proc as usize].cwd.as_deref()
    }

    /// Sets the working directory of thread index `t`'s process.
    pub fn set_cwd(&mut self, t: u32, dir: &[u8]) {
        let p = self.threads[t as usize].proc as usize;
        if self.procs[p].cwd.as_deref() != Some(dir) {
            self.procs[p].cwd = Some(dir.into());
        }
    }

    /// Every producer: processes that ever held a thread (in creation order), then threads.
    pub fn producers(&self) -> Vec<Producer> {
        let mut out = Vec::with_capacity(self.procs.len() + self.threads.len());
        for p in self.procs.iter().filter(|p| p.used) {
            out.push(Producer {
                id: p.producer,
                parent: p.parent.map(|q| self.procs[q as usize].producer),
                kind: "process",
                name: p.name.clone().unwrap_or_else(|| format!("pid {}", p.pid)),
                os_id: p.pid,
                pid: None,
            });
        }
        for t in &self.threads {
            let p = &self.procs[t.proc as usize];
            let name = match &p.name {
                Some(n) => format!("{n}/{}", t.tid),
                None => format!("tid {}", t.tid),
            };
            out.push(Producer {
                id: t.producer,
                parent: Some(p.producer),
                kind: "thread",
                name,
                os_id: t.tid,
                pid: Some(p.pid),
            });
        }
        out.sort_by_key(|p| p.id);
        out
    }
}
