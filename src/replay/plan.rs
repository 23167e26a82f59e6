//! From a strace trace to a replay plan: per-thread operation lists, the cross-thread
//! ordering that must hold, and the files the target must hold before the run.
//!
//! Owns [`PlanBuilder`] (rows of the stored `syscall` table in, in `ts` order) and
//! [`Plan`]. For every row it decides, in one pass:
//!
//! - what the call becomes: one of [`Kind`] (open/openat/openat2/creat, close,
//!   read/write, pread/pwrite, readv/writev, preadv/pwritev, lseek, fsync/fdatasync,
//!   dup/dup2/dup3/fcntl(F_DUPFD), ftruncate, truncate, fallocate, getdents,
//!   unlink/unlinkat/rmdir, rename/renameat/renameat2, mkdir/mkdirat, link/linkat,
//!   symlink/symlinkat, copy_file_range, sendfile), or a skip with its [`SkipReason`]
//!   (an mmap write, sockets, pipes, stat calls, an fd opened before the trace, a call
//!   that failed on an fd...). A call moving bytes between a file and something that is
//!   not replayed (splice to a pipe, sendfile to a socket, a copy from an fd opened
//!   before the trace) becomes the read or write it is on the file's side;
//! - which fd slot it works on: each process's fd table is rebuilt from the trace
//!   (threads share it; a child process falls back to its parent's), so a traced fd
//!   number becomes a *slot* filled by the replayed open or dup that made it;
//! - what it must wait for (ROOT/ARTC-style resource ordering): every call names the
//!   resources it touches (its open file description, the file, the path) as shared
//!   (pread, pwrite's position, fsync, a position-less read of the content) or
//!   exclusive (a write to the file, a read or lseek that moves a shared position,
//!   open/close/unlink/rename). A call waits for the last exclusive user of each
//!   resource in another thread, and an exclusive call for every shared user since
//!   then; it waits for that call's completion when the two did not overlap in the
//!   trace, and only for its issue when they did (they ran concurrently then, and may
//!   again). Everything else runs concurrently; within a thread, program order;
//! - what the file looked like before the trace: each path's initial file is followed
//!   through opens (O_CREAT, O_EXCL, O_TRUNC), reads (a read of n bytes at p needs
//!   p+n bytes that the trace had not written; a short read or an lseek(SEEK_END)
//!   says the exact size), stat sizes, writes, ftruncate, unlink and rename, giving
//!   [`Prep`]: directories to make, files to create with the size the trace implies,
//!   and paths to remove because the trace creates them or found them absent. A
//!   directory the trace makes with a successful mkdir, nothing having shown it
//!   before, did not exist: it is removed (with what an earlier run left in it), not
//!   made in advance, and the replayed mkdir makes it. Directories are ordered like
//!   names: a call on `d/x` uses `d` shared, a mkdir/rmdir/rename of `d` exclusively.
//!
//! Over 600 lines: planning is one pass over the trace's rows (per-thread ops, ordering,
//! the files to prepare) whose parts read the same per-path state.

use std::collections::{HashMap, HashSet};

use super::paths::{Mapper, PathRefusal};

/// No slot / path / dependency.
pub const NONE: u32 = u32::MAX;

/// A replayable operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// open/openat/openat2/creat: `path`, `flags` (O_*), fills `new_slot`.
    Open = 0,
    /// close(slot).
    Close,
    /// read(slot, size) at the fd's position.
    Read,
    /// write(slot, size) at the fd's position.
    Write,
    /// pread(slot, size, pos).
    Pread,
    /// pwrite(slot, size, pos).
    Pwrite,
    /// readv(slot, one iovec of size).
    Readv,
    /// writev(slot, one iovec of size).
    Writev,
    /// preadv(slot, one iovec of size, pos).
    Preadv,
    /// pwritev(slot, one iovec of size, pos).
    Pwritev,
    /// lseek(slot, pos, whence=flags).
    Lseek,
    /// fsync(slot).
    Fsync,
    /// fdatasync(slot).
    Fdatasync,
    /// dup of `slot` into `new_slot`; `aux`: a slot the dup2 target closed.
    Dup,
    /// ftruncate(slot, size).
    Ftruncate,
    /// unlinkat(path, flags: 0 or AT_REMOVEDIR).
    Unlink,
    /// renameat2(path, path2, flags).
    Rename,
    /// mkdirat(path, mode in `flags`).
    Mkdir,
    /// linkat(path, path2): a new name `path2` for the file at `path`.
    Link,
    /// symlinkat(target, path): `path2` indexes [`Plan::targets`].
    Symlink,
    /// truncate(path, size): opened for writing beneath the root, ftruncate, closed.
    Truncate,
    /// fallocate(slot, mode in `flags`, pos, size).
    Fallocate,
    /// copy_file_range(slot, pos?, slot2, pos2?, size): [`OPT_POS_IN`]/[`OPT_POS_OUT`] say
    /// which offsets were explicit (else the fds' positions are used and advanced).
    CopyRange,
    /// sendfile(slot2, slot, pos?, size).
    Sendfile,
    /// getdents64(slot, size): reads directory entries.
    Getdents,
}

/// [`Op::opt`]: a write-open of a file with more than one link is allowed (the trace
/// linked it itself, beneath the root).
pub const OPT_LINKS_OK: u8 = 1;
/// [`Op::opt`]: the source offset of a copy was explicit (the fd's position stays).
pub const OPT_POS_IN: u8 = 2;
/// [`Op::opt`]: the destination offset of a copy was explicit.
pub const OPT_POS_OUT: u8 = 4;

/// Names of [`Kind`], in order (the `kind` column of the plan).
pub const KIND_NAMES: [&str; 25] = [
    "open",
    "close",
    "read",
    "write",
    "pread",
    "pwrite",
    "readv",
    "writev",
    "preadv",
    "pwritev",
    "lseek",
    "fsync",
    "fdatasync",
    "dup",
    "ftruncate",
    "unlink",
    "rename",
    "mkdir",
    "link",
    "symlink",
    "truncate",
    "fallocate",
    "copy_file_range",
    "sendfile",
    "getdents",
];

impl Kind {
    /// Whether it reads file content.
    pub fn reads(self) -> bool {
        matches!(self, Kind::Read | Kind::Pread | Kind::Readv | Kind::Preadv)
    }

    /// Whether it writes file content.
    pub fn writes(self) -> bool {
        matches!(self, Kind::Write | Kind::Pwrite | Kind::Writev | Kind::Pwritev)
    }

    /// Whether it needs the worker's buffer (of `size` bytes).
    pub fn buffered(self) -> bool {
        self.reads() || self.writes() || self == Kind::Getdents
    }

    /// Whether it works on an fd (a slot) rather than on a path.
    pub fn on_fd(self) -> bool {
        !matches!(
            self,
            Kind::Open | Kind::Unlink | Kind::Rename | Kind::Mkdir | Kind::Link | Kind::Symlink | Kind::Truncate
        )
    }

    /// Whether it is a call on names in the tree, run through the parent directories
    /// of its paths (opened beneath the root before its planned time).
    pub fn on_names(self) -> bool {
        matches!(self, Kind::Unlink | Kind::Rename | Kind::Mkdir | Kind::Link | Kind::Symlink)
    }
}

/// Why a traced call is not replayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum SkipReason {
    /// Not a call the replayer performs (mmap, stat, futex, socket calls...).
    Unsupported = 0,
    /// On something that is not a regular file (pipe, socket, device, /proc).
    NotAFile,
    /// Its path would leave the root.
    EscapesRoot,
    /// Outside the `--only` prefixes.
    NotSelected,
    /// On an fd the trace never saw opened.
    FdBeforeTrace,
    /// It failed in the trace (on an fd: nothing to reproduce).
    FailedInTrace,
    /// No result was traced (`= ?`, never resumed).
    NoResult,
    /// A positional call without a known offset.
    NoOffset,
    /// A shared writable mapping of a file: its writes are page stores, not traced.
    MmapWrite,
    /// Any other mapping of a file: its reads are page faults, not traced.
    MmapRead,
    /// A stat call: not replayed (the sizes it saw shape the prepared files).
    Stat,
}

/// Names of [`SkipReason`], in order.
pub const SKIP_NAMES: [&str; 11] = [
    "unsupported syscall",
    "not a regular file",
    "path escapes the root",
    "outside --only",
    "fd opened before the trace",
    "failed in the trace",
    "no result traced",
    "no offset traced",
    "mmap write, not replayed",
    "mmap read, not replayed",
    "stat, not replayed",
];

/// Something an operation waits for: op `idx` of thread `thread` issued (or completed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dep {
    /// Thread index in the plan.
    pub thread: u32,
    /// Op index within that thread.
    pub idx: u32,
    /// Wait for its completion (true) or only its issue (false).
    pub complete: bool,
}

/// One replayable operation of a thread.
#[derive(Clone, Copy, Debug)]
pub struct Op {
    /// What to do.
    pub kind: Kind,
    /// open: O_* flags; lseek: whence; unlink: 0 or AT_REMOVEDIR; rename: RENAME_* flags.
    pub flags: i32,
    /// The fd slot it works on ([`NONE`] for path calls).
    pub slot: u32,
    /// The slot an open or dup fills.
    pub new_slot: u32,
    /// The destination slot of a copy (copy_file_range, sendfile).
    pub slot2: u32,
    /// A slot a dup2 onto an open fd closes.
    pub aux: u32,
    /// Path id: open/unlink/rename source; for fd calls, the file's path (recorded only).
    pub path: u32,
    /// Path id of a rename's or link's new name, or a copy's destination file; for a
    /// symlink, the index of its target in [`Plan::targets`].
    pub path2: u32,
    /// Offset (pread/pwrite/preadv/pwritev/lseek/fallocate; a copy's source).
    pub pos: i64,
    /// A copy's destination offset.
    pub pos2: i64,
    /// `OPT_*` bits.
    pub opt: u8,
    /// Bytes (read/write request; ftruncate length).
    pub size: i64,
    /// Planned start, ns after the first replayed call of the trace.
    pub at: i64,
    /// ns between the end of this thread's previous replayed call and this one's start
    /// in the trace (think time, for `--timing think`).
    pub gap: i64,
    /// First dependency in [`Plan::deps`].
    pub dep0: u32,
    /// Number of dependencies.
    pub ndeps: u32,
    /// Row of the input it came from.
    pub src: u32,
}

/// What a path must be before the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Prep {
    /// A directory.
    Dir(u32),
    /// A regular file of this many bytes.
    File(u32, u64),
    /// Nothing: removed if present (the trace creates it, or found it missing).
    Absent(u32),
}

/// A thread of the plan: the traced producer it replays and its operations.
#[derive(Clone, Debug, Default)]
pub struct ThreadPlan {
    /// Producer id of the traced thread.
    pub producer: i32,
    /// Its operations in program order.
    pub ops: Vec<Op>,
    /// Largest read/write request (the thread's buffer size).
    pub max_size: i64,
}

/// A replay plan. See the module documentation.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// Threads, in order of their first replayed call.
    pub threads: Vec<ThreadPlan>,
    /// Dependencies of all ops ([`Op::dep0`], [`Op::ndeps`]).
    pub deps: Vec<Dep>,
    /// Mapped paths (relative to a copy's root), by path id.
    pub paths: Vec<Vec<u8>>,
    /// Symlink targets as the replay creates them (an absolute traced target mapped and
    /// made relative to the link's directory; a relative one as traced).
    pub targets: Vec<Vec<u8>>,
    /// Number of fd slots.
    pub slots: u32,
    /// What the target must hold before the run, in creation order (directories first).
    pub prep: Vec<Prep>,
    /// Skipped rows: (input row, reason).
    pub skips: Vec<(u32, SkipReason)>,
    /// Traced duration of the replayed calls: first start to last end, ns.
    pub span: i64,
    /// Trace timestamp of the first replayed call (planned offset 0).
    pub t_start: i64,
    /// Rows read.
    pub rows: u64,
}

impl Plan {
    /// Number of operations over all threads.
    pub fn ops(&self) -> usize {
        self.threads.iter().map(|t| t.ops.len()).sum()
    }

    /// Dependencies of `op`.
    pub fn deps_of(&self, op: &Op) -> &[Dep] {
        &self.deps[op.dep0 as usize..(op.dep0 + op.ndeps) as usize]
    }
}

/// One traced syscall, as stored (see `formats/strace/__init__.py`). Null columns are None.
#[derive(Clone, Copy, Debug, Default)]
pub struct Row<'a> {
    /// Start, ns.
    pub ts: i64,
    /// Duration, ns.
    pub dur: i64,
    /// Thread producer id.
    pub producer: i32,
    /// Syscall name.
    pub name: &'a str,
    /// fd operated on.
    pub fd: Option<i64>,
    /// Path.
    pub path: Option<&'a [u8]>,
    /// Second path (rename/link target; a copy's destination file).
    pub path2: Option<&'a [u8]>,
    /// Offset.
    pub pos: Option<i64>,
    /// Destination fd of a copy.
    pub fd2: Option<i64>,
    /// Destination offset of a copy.
    pub pos2: Option<i64>,
    /// A symlink's target as the program passed it.
    pub target: Option<&'a [u8]>,
    /// Bytes requested.
    pub size: Option<i64>,
    /// Return value.
    pub ret: Option<i64>,
    /// Error name.
    pub errno: Option<&'a str>,
    /// Flags as printed.
    pub flags: Option<&'a str>,
    /// Arguments as printed (stat sizes, unlinkat flags, mkdir modes, copy offsets).
    pub args: Option<&'a str>,
}

/// Exclusive or shared use of a resource.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Use {
    Shared,
    Excl,
}

/// A resource calls are ordered on.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Res {
    /// An open file description (shared by dup'ed fds): its file position.
    Desc(u32),
    /// A file (inode): its content.
    File(u32),
    /// A name in the directory tree.
    Path(u32),
}

#[derive(Clone, Copy)]
struct OpRef {
    thread: u32,
    idx: u32,
    start: i64,
    end: i64,
}

#[derive(Default)]
struct ResState {
    excl: Option<OpRef>,
    /// Latest shared user per thread since `excl`.
    shared: Vec<OpRef>,
}

/// A file followed through the trace, for the state before it.
#[derive(Clone, Debug, Default)]
struct Inode {
    /// The path whose pre-trace file this is (None: created during the trace).
    origin: Option<u32>,
    must_exist: bool,
    must_not_exist: bool,
    /// The trace made sure it exists (a successful open with O_CREAT): later signs of
    /// existence say nothing about before the trace.
    seen: bool,
    dir: bool,
    /// The trace gave it a second name (link): a write-open of it may find two links.
    linked: bool,
    /// Its pre-trace content no longer matters (O_TRUNC, O_EXCL create, ftruncate).
    fresh: bool,
    /// End of what the trace wrote (or truncated to) so far.
    written: i64,
    /// Bytes the trace appended at positions it did not see (O_APPEND writes).
    appended: i64,
    /// Bytes of pre-trace content the trace read.
    need: i64,
    /// Pre-trace size seen exactly (short read, SEEK_END, stat).
    exact: Option<i64>,
}

/// Where a path points now.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bind {
    /// Its pre-trace file (inode made on first use).
    Initial(u32),
    /// Not looked at yet.
    Untouched,
    /// A file the trace put there.
    Bound(u32),
    /// Removed or renamed away.
    Absent,
}

/// What a traced fd of a process refers to.
#[derive(Clone, Copy)]
enum FdRef {
    /// A slot of the plan, its description and file.
    Slot { slot: u32, desc: u32, file: u32, path: u32 },
    /// Opened by a skipped call (a pipe, a socket, /dev/null, outside --only...).
    Skipped(SkipReason),
}

/// A process's fd number over time: what it refers to from each `since` on (the end of the
/// open or dup that made it; a close's start, `None`), in `since` order. Rows come in start
/// order while numbers are given at a call's end, so a call of one thread can start while
/// other threads' opens of the same number are still running: with three threads churning
/// through the same few numbers two such opens can be pending at once, and the call means the
/// file its number held when it started. Entries before the last one at or before the row
/// being planned are dropped (lookups only move forward), so a timeline stays a few entries.
#[derive(Default)]
struct FdTimeline(Vec<(i64, Option<FdRef>)>);

impl FdTimeline {
    /// What the number refers to for a call starting at `at`: the last entry at or before it;
    /// when that is a close (or there is none), the next open (its end was seen after the call
    /// started: the call ran after it returned); `None` when closed for good.
    fn at(&self, at: i64) -> Option<FdRef> {
        let i = self.0.partition_point(|e| e.0 <= at);
        match i.checked_sub(1).map(|j| self.0[j].1) {
            Some(Some(r)) => Some(r),
            _ => self.0.get(i).and_then(|e| e.1),
        }
    }

    /// Adds what the number refers to from `since` on; `now` is the start of the row planned.
    fn set(&mut self, since: i64, r: Option<FdRef>, now: i64) {
        let i = self.0.partition_point(|e| e.0 <= since);
        self.0.insert(i, (since, r));
        let last_past = self.0.partition_point(|e| e.0 <= now);
        if last_past > 1 {
            self.0.drain(..last_past - 1);
        }
    }
}

/// Builds a [`Plan`] from rows in `ts` order. See the module documentation.
pub struct PlanBuilder {
    mapper: Mapper,
    process_of: HashMap<i32, i32>,
    parent_of: HashMap<i32, i32>,
    plan: Plan,
    thread_of: HashMap<i32, u32>,
    /// Trace end of each thread's last replayed call.
    prev_end: Vec<i64>,
    fds: HashMap<(i32, i64), FdTimeline>,
    path_ids: HashMap<Vec<u8>, u32>,
    binds: Vec<Bind>,
    inodes: Vec<Inode>,
    res: HashMap<Res, ResState>,
    next_desc: u32,
    first_ts: Option<i64>,
    last_end: i64,
    deps_scratch: Vec<Dep>,
    /// Directories (mapped) some successful call showed existing before any mkdir of them.
    existed: HashSet<Vec<u8>>,
    /// Directories the trace made: a successful mkdir with nothing showing them before.
    made: HashSet<Vec<u8>>,
    /// Per path id: its ancestors were added to `existed`.
    anc_done: Vec<bool>,
}

/// `O_*` flags as printed by strace, as bits. Unknown names are ignored; numbers (hex,
/// octal, decimal) are taken as they are.
pub fn open_flags(text: &str) -> i32 {
    let mut f = 0;
    for part in text.split('|') {
        let part = part.trim();
        f |= match part {
            "O_RDONLY" => 0,
            "O_WRONLY" => libc::O_WRONLY,
            "O_RDWR" => libc::O_RDWR,
            "O_CREAT" => libc::O_CREAT,
            "O_EXCL" => libc::O_EXCL,
            "O_TRUNC" => libc::O_TRUNC,
            "O_APPEND" => libc::O_APPEND,
            "O_NONBLOCK" | "O_NDELAY" => libc::O_NONBLOCK,
            "O_DSYNC" => libc::O_DSYNC,
            "O_SYNC" => libc::O_SYNC,
            "O_RSYNC" => libc::O_RSYNC,
            "O_DIRECT" => libc::O_DIRECT,
            "O_LARGEFILE" => libc::O_LARGEFILE,
            "O_DIRECTORY" => libc::O_DIRECTORY,
            "O_NOFOLLOW" => libc::O_NOFOLLOW,
            "O_NOATIME" => libc::O_NOATIME,
            "O_CLOEXEC" => libc::O_CLOEXEC,
            "O_PATH" => libc::O_PATH,
            "O_TMPFILE" => libc::O_TMPFILE,
            p => parse_int(p).map(|v| v as i32).unwrap_or(0),
        };
    }
    f
}

fn parse_int(p: &str) -> Option<i64> {
    if let Some(h) = p.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()
    } else if p.len() > 1 && p.starts_with('0') {
        i64::from_str_radix(&p[1..], 8).ok()
    } else {
        p.parse().ok()
    }
}

fn whence(text: Option<&str>) -> Option<i32> {
    Some(match text?.trim() {
        "SEEK_SET" => libc::SEEK_SET,
        "SEEK_CUR" => libc::SEEK_CUR,
        "SEEK_END" => libc::SEEK_END,
        "SEEK_DATA" => libc::SEEK_DATA,
        "SEEK_HOLE" => libc::SEEK_HOLE,
        p => parse_int(p)? as i32,
    })
}

fn rename_flags(text: Option<&str>) -> i32 {
    let mut f = 0;
    for part in text.unwrap_or("").split('|') {
        f |= match part.trim() {
            "RENAME_NOREPLACE" => libc::RENAME_NOREPLACE as i32,
            "RENAME_EXCHANGE" => libc::RENAME_EXCHANGE as i32,
            _ => 0,
        };
    }
    f
}

/// `st_size=N` (stat family) or `stx_size=N` (statx) in printed arguments.
fn stat_size(args: &str) -> Option<i64> {
    for key in ["st_size=", "stx_size="] {
        if let Some(i) = args.find(key) {
            let rest = &args[i + key.len()..];
            let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
            return rest[..end].parse().ok();
        }
    }
    None
}

/// `FALLOC_FL_*` flags as printed, as bits (numbers taken as they are).
fn fallocate_mode(text: Option<&str>) -> i32 {
    let mut f = 0;
    for part in text.unwrap_or("").split('|') {
        f |= match part.trim() {
            "FALLOC_FL_KEEP_SIZE" => libc::FALLOC_FL_KEEP_SIZE,
            "FALLOC_FL_PUNCH_HOLE" => libc::FALLOC_FL_PUNCH_HOLE,
            "FALLOC_FL_COLLAPSE_RANGE" => libc::FALLOC_FL_COLLAPSE_RANGE,
            "FALLOC_FL_ZERO_RANGE" => libc::FALLOC_FL_ZERO_RANGE,
            "FALLOC_FL_INSERT_RANGE" => libc::FALLOC_FL_INSERT_RANGE,
            "FALLOC_FL_UNSHARE_RANGE" => libc::FALLOC_FL_UNSHARE_RANGE,
            p => parse_int(p).map(|v| v as i32).unwrap_or(0),
        };
    }
    f
}

/// The top-level arguments of a printed call (commas inside `<...>`, `[...]`, `{...}`,
/// `(...)` and quotes do not split).
fn split_args(args: &str) -> Vec<&str> {
    let b = args.as_bytes();
    let (mut out, mut depth, mut quoted, mut start, mut i) = (Vec::new(), 0i32, false, 0, 0);
    while i < b.len() {
        match b[i] {
            b'\\' if quoted => i += 1,
            b'"' => quoted = !quoted,
            b'<' | b'[' | b'{' | b'(' if !quoted => depth += 1,
            b'>' | b']' | b'}' | b')' if !quoted => depth -= 1,
            b',' if !quoted && depth <= 0 => {
                out.push(args[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    out.push(args[start..].trim());
    out
}

/// The mode of mkdir (`"path", 0755`) or mkdirat (`dirfd, "path", 0755`): the last argument.
fn mkdir_mode(args: Option<&str>) -> i32 {
    args.and_then(|a| split_args(a).last().and_then(|m| parse_int(m))).map(|m| (m & 0o7777) as i32).unwrap_or(0o755)
}

/// `st_mode=S_IFDIR|...` (stat family) or `stx_mode=S_IFDIR|...` (statx): the file type.
fn stat_type(args: &str) -> Option<u32> {
    for key in ["st_mode=", "stx_mode="] {
        if let Some(i) = args.find(key) {
            let rest = &args[i + key.len()..];
            return Some(if rest.starts_with("S_IFDIR") {
                libc::S_IFDIR
            } else if rest.starts_with("S_IFREG") {
                libc::S_IFREG
            } else {
                libc::S_IFMT // another type: neither file nor directory
            });
        }
    }
    None
}

/// What a syscall name becomes.
enum Class {
    Op(Kind),
    /// fstat/stat/statx: the size it saw informs the pre-trace state.
    Stat,
    /// splice: the file side becomes a read or a write (the other side is a pipe).
    Splice,
    /// mmap/mmap2: a skip of its own class when on a file.
    Mmap,
    Skip,
}

fn classify(name: &str, flags: Option<&str>) -> Class {
    Class::Op(match name {
        "open" | "openat" | "openat2" | "creat" => Kind::Open,
        "close" => Kind::Close,
        "read" => Kind::Read,
        "write" => Kind::Write,
        "pread64" | "pread" => Kind::Pread,
        "pwrite64" | "pwrite" => Kind::Pwrite,
        "readv" => Kind::Readv,
        "writev" => Kind::Writev,
        "preadv" | "preadv2" => Kind::Preadv,
        "pwritev" | "pwritev2" => Kind::Pwritev,
        "lseek" => Kind::Lseek,
        "fsync" => Kind::Fsync,
        "fdatasync" => Kind::Fdatasync,
        "dup" | "dup2" | "dup3" => Kind::Dup,
        "fcntl" | "fcntl64" if flags.is_some_and(|f| f.starts_with("F_DUPFD")) => Kind::Dup,
        "ftruncate" | "ftruncate64" => Kind::Ftruncate,
        "unlink" | "unlinkat" | "rmdir" => Kind::Unlink,
        "rename" | "renameat" | "renameat2" => Kind::Rename,
        "mkdir" | "mkdirat" => Kind::Mkdir,
        "link" | "linkat" => Kind::Link,
        "symlink" | "symlinkat" => Kind::Symlink,
        "truncate" | "truncate64" => Kind::Truncate,
        "fallocate" => Kind::Fallocate,
        "copy_file_range" => Kind::CopyRange,
        "sendfile" | "sendfile64" => Kind::Sendfile,
        "getdents" | "getdents64" => Kind::Getdents,
        "splice" => return Class::Splice,
        "mmap" | "mmap2" => return Class::Mmap,
        "fstat" | "newfstatat" | "stat" | "lstat" | "statx" | "fstat64" | "stat64" | "lstat64" | "fstatat64" => {
            return Class::Stat
        }
        _ => return Class::Skip,
    })
}

impl PlanBuilder {
    /// A builder. `process_of`: thread producer -> its process producer (threads share the
    /// process's fd table; a producer not in it is its own process); `parent_of`: process
    /// -> the process that forked it (whose fds a child inherits).
    pub fn new(mapper: Mapper, process_of: HashMap<i32, i32>, parent_of: HashMap<i32, i32>) -> Self {
        PlanBuilder {
            mapper,
            process_of,
            parent_of,
            plan: Plan::default(),
            thread_of: HashMap::new(),
            prev_end: Vec::new(),
            fds: HashMap::new(),
            path_ids: HashMap::new(),
            binds: Vec::new(),
            inodes: Vec::new(),
            res: HashMap::new(),
            next_desc: 0,
            first_ts: None,
            last_end: i64::MIN,
            deps_scratch: Vec::new(),
            existed: HashSet::new(),
            made: HashSet::new(),
            anc_done: Vec::new(),
        }
    }

    fn skip(&mut self, row: u32, why: SkipReason) {
        self.plan.skips.push((row, why));
    }

    fn process(&self, producer: i32) -> i32 {
        self.process_of.get(&producer).copied().unwrap_or(producer)
    }

    /// The fd's entry for a call starting at `at` in the process's table, else in its
    /// ancestors' (inherited by fork).
    fn fd_ref(&self, producer: i32, fd: i64, at: i64) -> Option<FdRef> {
        let mut p = self.process(producer);
        for _ in 0..64 {
            if let Some(r) = self.fds.get(&(p, fd)).and_then(|t| t.at(at)) {
                return Some(r);
            }
            p = *self.parent_of.get(&p)?;
        }
        None
    }

    /// Process `p`'s fd `fd` refers to `r` from `since` on (a row starting at `now` made it).
    fn fd_set(&mut self, p: i32, fd: i64, r: FdRef, since: i64, now: i64) {
        self.fds.entry((p, fd)).or_default().set(since, Some(r), now);
    }

    /// Process `p`'s fd `fd` closed by a call starting at `at`.
    fn fd_close(&mut self, p: i32, fd: i64, at: i64) {
        if let Some(t) = self.fds.get_mut(&(p, fd)) {
            t.set(at, None, at);
        }
    }

    fn path_id(&mut self, mapped: Vec<u8>) -> u32 {
        if let Some(&id) = self.path_ids.get(&mapped) {
            return id;
        }
        let id = self.plan.paths.len() as u32;
        self.plan.paths.push(mapped.clone());
        self.path_ids.insert(mapped, id);
        self.binds.push(Bind::Untouched);
        self.anc_done.push(false);
        id
    }

    /// The parent directory of path `id` used shared (names in it are looked up), or None
    /// for a path directly in the root.
    fn parent_use(&mut self, id: u32) -> Option<(Res, Use)> {
        let (dir, _) = super::fsroot::split_parent(&self.plan.paths[id as usize]);
        if dir == b"." {
            return None;
        }
        let dir = dir.to_vec();
        Some((Res::Path(self.path_id(dir)), Use::Shared))
    }

    /// A call on path `id` succeeded (or failed for a reason other than a missing
    /// directory): its ancestors existed, unless the trace made them.
    fn parents_exist(&mut self, id: u32) {
        if std::mem::replace(&mut self.anc_done[id as usize], true) {
            return;
        }
        let p = &self.plan.paths[id as usize];
        let mut end = 0;
        while let Some(i) = memchr::memchr(b'/', &p[end..]) {
            let a = &p[..end + i];
            if !self.made.contains(a) {
                self.existed.insert(a.to_vec());
            }
            end += i + 1;
        }
    }

    /// Whether `p` is a directory the trace made, or beneath one.
    fn under_made(&self, p: &[u8]) -> bool {
        if self.made.is_empty() {
            return false;
        }
        let mut end = 0;
        while let Some(i) = memchr::memchr(b'/', &p[end..]) {
            if self.made.contains(&p[..end + i]) {
                return true;
            }
            end += i + 1;
        }
        self.made.contains(p)
    }

    /// The mapped path id of a traced path, or why it is not replayed.
    fn map_path(&mut self, p: Option<&[u8]>) -> Result<u32, SkipReason> {
        let p = p.ok_or(SkipReason::NotAFile)?;
        match self.mapper.map(p) {
            Ok(m) => Ok(self.path_id(m)),
            Err(PathRefusal::Special) => Err(SkipReason::NotAFile),
            Err(PathRefusal::Escapes) => Err(SkipReason::EscapesRoot),
            Err(PathRefusal::NotSelected) => Err(SkipReason::NotSelected),
        }
    }

    /// The file at `path` now (its pre-trace file on first use), or None if absent.
    fn file_at(&mut self, path: u32) -> Option<u32> {
        match self.binds[path as usize] {
            Bind::Untouched => {
                let id = self.new_inode(Some(path));
                self.binds[path as usize] = Bind::Initial(id);
                Some(id)
            }
            Bind::Initial(i) | Bind::Bound(i) => Some(i),
            Bind::Absent => None,
        }
    }

    fn new_inode(&mut self, origin: Option<u32>) -> u32 {
        self.inodes.push(Inode { origin, fresh: origin.is_none(), ..Default::default() });
        (self.inodes.len() - 1) as u32
    }

    /// The trace found file `ino` existing (stat, unlink, rename, open without O_CREAT):
    /// its pre-trace file existed unless the trace had created it by then.
    fn exists(&mut self, ino: u32) {
        let n = &mut self.inodes[ino as usize];
        if !n.seen && n.origin.is_some() && !n.must_not_exist {
            n.must_exist = true;
        }
        n.seen = true;
    }

    /// The trace observed file `ino` at `size` bytes (stat, short read, SEEK_END).
    fn saw_size(&mut self, ino: u32, size: i64) {
        self.exists(ino);
        let n = &mut self.inodes[ino as usize];
        // What the trace appended since is not the pre-trace file's.
        let size = size - n.appended;
        if !n.fresh && size > n.written && n.exact.is_none() {
            n.exact = Some(size);
            n.must_exist = true; // pre-trace content
        }
    }

    fn thread(&mut self, producer: i32) -> u32 {
        if let Some(&t) = self.thread_of.get(&producer) {
            return t;
        }
        let t = self.plan.threads.len() as u32;
        self.plan.threads.push(ThreadPlan { producer, ..Default::default() });
        self.prev_end.push(i64::MIN);
        self.thread_of.insert(producer, t);
        t
    }

    /// Records the dependencies of op (`thread`, `idx`, trace `start`/`end`) on `res`
    /// used as `u`, and makes it the resource's latest user.
    fn order(&mut self, res: Res, u: Use, me: OpRef) {
        let st = self.res.entry(res).or_default();
        let dep = |a: &OpRef, out: &mut Vec<Dep>| {
            if a.thread != me.thread {
                out.push(Dep { thread: a.thread, idx: a.idx, complete: a.end <= me.start });
            }
        };
        if let Some(a) = st.excl {
            dep(&a, &mut self.deps_scratch);
        }
        match u {
            Use::Shared => {
                if let Some(s) = st.shared.iter_mut().find(|s| s.thread == me.thread) {
                    *s = me;
                } else {
                    st.shared.push(me);
                }
            }
            Use::Excl => {
                for a in &st.shared {
                    dep(a, &mut self.deps_scratch);
                }
                st.shared.clear();
                st.excl = Some(me);
            }
        }
    }

    /// Adds `op` to its thread with the dependencies gathered in `deps_scratch`.
    fn push_op(&mut self, t: u32, mut op: Op, row: &Row<'_>, uses: &[(Res, Use)]) {
        let first = *self.first_ts.get_or_insert(row.ts);
        let idx = self.plan.threads[t as usize].ops.len() as u32;
        let me = OpRef { thread: t, idx, start: row.ts, end: row.ts.saturating_add(row.dur.max(0)) };
        self.deps_scratch.clear();
        for &(r, u) in uses {
            self.order(r, u, me);
        }
        // One dependency per thread: the latest op, completion if any asks for it.
        self.deps_scratch.sort_by_key(|d| (d.thread, std::cmp::Reverse(d.idx), !d.complete));
        self.deps_scratch.dedup_by_key(|d| d.thread);
        op.dep0 = self.plan.deps.len() as u32;
        op.ndeps = self.deps_scratch.len() as u32;
        self.plan.deps.extend_from_slice(&self.deps_scratch);
        op.at = (row.ts - first).max(0);
        let prev = self.prev_end[t as usize];
        op.gap = if prev == i64::MIN { op.at } else { (row.ts - prev).max(0) };
        self.prev_end[t as usize] = me.end;
        self.last_end = self.last_end.max(me.end);
        let th = &mut self.plan.threads[t as usize];
        if op.kind.buffered() {
            th.max_size = th.max_size.max(op.size);
        }
        th.ops.push(op);
    }

    fn new_slot(&mut self) -> u32 {
        self.plan.slots += 1;
        self.plan.slots - 1
    }

    /// Adds input row `i`.
    pub fn push(&mut self, i: u32, row: &Row<'_>) {
        self.plan.rows += 1;
        let kind = match classify(row.name, row.flags) {
            Class::Op(k) => k,
            Class::Stat => {
                self.note_stat(row);
                return self.skip(i, SkipReason::Stat);
            }
            Class::Mmap => return self.mmap(i, row),
            Class::Splice => Kind::Read, // the file side: see `copy`
            Class::Skip => return self.skip(i, SkipReason::Unsupported),
        };
        let Some(ret) = row.ret else {
            return self.skip(i, SkipReason::NoResult);
        };
        let failed = ret < 0 || row.errno.is_some();
        let op = Op {
            kind,
            flags: 0,
            slot: NONE,
            new_slot: NONE,
            slot2: NONE,
            aux: NONE,
            path: NONE,
            path2: NONE,
            pos: row.pos.unwrap_or(0),
            pos2: row.pos2.unwrap_or(0),
            opt: 0,
            size: row.size.unwrap_or(0),
            at: 0,
            gap: 0,
            dep0: 0,
            ndeps: 0,
            src: i,
        };
        match kind {
            Kind::Open => self.open(i, row, op, failed),
            Kind::Unlink => self.unlink(i, row, op, failed),
            Kind::Rename => self.rename(i, row, op, failed),
            Kind::Mkdir => self.mkdir(i, row, op, failed),
            Kind::Link | Kind::Symlink => self.link(i, row, op, failed),
            Kind::Truncate => self.truncate(i, row, op, failed),
            Kind::CopyRange | Kind::Sendfile => self.copy(i, row, op, failed, ret, Some(kind)),
            Kind::Read if row.name == "splice" => self.copy(i, row, op, failed, ret, None),
            _ => self.fd_call(i, row, op, failed, ret),
        }
    }

    /// A failed path call's errno says the path's directories exist (anything but a
    /// missing directory on the way).
    fn failed_says_parents_exist(row: &Row<'_>) -> bool {
        !matches!(row.errno, Some("ENOENT") | Some("ENOTDIR") | Some("ELOOP") | Some("EXDEV") | None)
    }

    fn mmap(&mut self, i: u32, row: &Row<'_>) {
        let why = match row.fd.filter(|&fd| fd >= 0).map(|fd| self.fd_ref(row.producer, fd, row.ts)) {
            Some(Some(FdRef::Slot { .. })) => {
                let f = row.flags.unwrap_or("");
                if f.contains("PROT_WRITE") && f.contains("MAP_SHARED") {
                    SkipReason::MmapWrite
                } else {
                    SkipReason::MmapRead
                }
            }
            Some(Some(FdRef::Skipped(why))) => why,
            Some(None) => SkipReason::FdBeforeTrace,
            None => SkipReason::Unsupported, // anonymous memory
        };
        self.skip(i, why)
    }

    fn note_stat(&mut self, row: &Row<'_>) {
        let (Some(args), None) = (row.args, row.errno) else { return };
        // On the fd itself (fstat, AT_EMPTY_PATH), else on the path (resolved against the
        // dirfd the fd column then holds).
        let on_fd = row.name.starts_with("fstat") && !row.name.starts_with("fstatat") || args.contains("AT_EMPTY_PATH");
        let (file, path) = match row.fd.filter(|_| on_fd) {
            Some(fd) => match self.fd_ref(row.producer, fd, row.ts) {
                Some(FdRef::Slot { file, path, .. }) => (Some(file), path),
                _ => (None, NONE),
            },
            None => match self.map_path(row.path) {
                // The root itself is never prepared (a stat of / lands there).
                Ok(p) if self.plan.paths[p as usize] != b"." => {
                    self.parents_exist(p);
                    (self.file_at(p), p)
                }
                _ => (None, NONE),
            },
        };
        let Some(f) = file else { return };
        match stat_type(args) {
            Some(libc::S_IFDIR) => {
                self.exists(f);
                let n = &mut self.inodes[f as usize];
                if n.origin.is_some() && !n.fresh {
                    n.dir = true;
                }
                if path != NONE {
                    self.existed.insert(self.plan.paths[path as usize].clone());
                }
            }
            Some(libc::S_IFREG) | None => {
                if let Some(size) = stat_size(args) {
                    self.saw_size(f, size);
                }
            }
            Some(_) => self.exists(f),
        }
    }

    fn open(&mut self, i: u32, row: &Row<'_>, mut op: Op, failed: bool) {
        let path = match self.map_path(row.path) {
            Ok(p) => p,
            Err(why) => {
                if let (false, Some(fd)) = (failed, row.ret) {
                    let p = self.process(row.producer);
                    self.fd_set(p, fd, FdRef::Skipped(why), row.ts.saturating_add(row.dur), row.ts);
                }
                return self.skip(i, why);
            }
        };
        let flags = open_flags(row.flags.unwrap_or(""));
        op.flags = flags & !(libc::O_CLOEXEC | libc::O_NOCTTY);
        op.path = path;
        let t = self.thread(row.producer);
        let create = flags & libc::O_CREAT != 0;
        let tmpfile = flags & libc::O_TMPFILE == libc::O_TMPFILE;
        let directory = flags & libc::O_DIRECTORY != 0;
        // Only a create changes the name; opening what is there shares it.
        let mut uses = vec![(Res::Path(path), if create { Use::Excl } else { Use::Shared })];
        uses.extend(self.parent_use(path));
        if failed {
            if Self::failed_says_parents_exist(row) {
                self.parents_exist(path);
            }
            if row.errno == Some("ENOENT") && !create {
                if let Some(f) = self.file_at(path) {
                    let n = &mut self.inodes[f as usize];
                    if n.origin == Some(path) && !n.must_exist {
                        n.must_not_exist = true;
                        n.fresh = true;
                    }
                }
            }
            return self.push_op(t, op, row, &uses);
        }
        self.parents_exist(path);
        if directory {
            let text = self.plan.paths[path as usize].clone();
            self.existed.insert(text);
        }
        let file = match self.file_at(path) {
            Some(f) => {
                let n = &mut self.inodes[f as usize];
                if !create {
                    self.exists(f);
                } else if n.origin == Some(path) && !n.seen && !n.must_exist && flags & libc::O_EXCL != 0 {
                    n.must_not_exist = true;
                    n.fresh = true;
                }
                self.inodes[f as usize].seen = true;
                f
            }
            None => {
                // Absent now (unlinked or renamed away): this open creates a new file.
                let f = self.new_inode(None);
                self.binds[path as usize] = Bind::Bound(f);
                f
            }
        };
        let n = &mut self.inodes[file as usize];
        if directory {
            n.dir = true;
            n.must_exist = true;
        }
        // O_TMPFILE opens the directory `path` and makes an unnamed file in it: the fd's file.
        let file = if tmpfile { self.new_inode(None) } else { file };
        let n = &mut self.inodes[file as usize];
        if n.linked {
            op.opt |= OPT_LINKS_OK;
        }
        if flags & libc::O_TRUNC != 0 && flags & (libc::O_WRONLY | libc::O_RDWR) != 0 {
            n.fresh = true;
            n.written = 0;
            uses.push((Res::File(file), Use::Excl));
        } else {
            uses.push((Res::File(file), Use::Shared));
        }
        let slot = self.new_slot();
        let desc = self.next_desc;
        self.next_desc += 1;
        op.new_slot = slot;
        let p = self.process(row.producer);
        if let Some(fd) = row.ret {
            self.fd_set(p, fd, FdRef::Slot { slot, desc, file, path }, row.ts.saturating_add(row.dur), row.ts);
        }
        uses.push((Res::Desc(desc), Use::Excl));
        self.push_op(t, op, row, &uses);
    }

    /// A name a call works on: its path id (or the row skipped, None), its uses (the name as
    /// `u`, its directory shared), and what the call says about the directories above it.
    fn name(
        &mut self,
        i: u32,
        p: Option<&[u8]>,
        row: &Row<'_>,
        failed: bool,
        u: Use,
    ) -> Option<(u32, Vec<(Res, Use)>)> {
        let path = match self.map_path(p) {
            Ok(p) => p,
            Err(why) => {
                self.skip(i, why);
                return None;
            }
        };
        let mut uses = vec![(Res::Path(path), u)];
        uses.extend(self.parent_use(path));
        if !failed || Self::failed_says_parents_exist(row) {
            self.parents_exist(path);
        }
        Some((path, uses))
    }

    fn unlink(&mut self, i: u32, row: &Row<'_>, mut op: Op, failed: bool) {
        let Some((path, mut uses)) = self.name(i, row.path, row, failed, Use::Excl) else { return };
        op.path = path;
        let dir = row.name == "rmdir" || row.args.is_some_and(|a| a.contains("AT_REMOVEDIR"));
        op.flags = if dir { libc::AT_REMOVEDIR } else { 0 };
        if let Some(f) = self.file_at(path) {
            let n = &mut self.inodes[f as usize];
            if failed && row.errno == Some("ENOENT") {
                if n.origin == Some(path) && !n.seen && !n.must_exist {
                    n.must_not_exist = true;
                }
            } else if !failed {
                if !n.seen {
                    n.dir |= dir;
                }
                self.exists(f);
            }
            uses.push((Res::File(f), Use::Excl));
        }
        if !failed {
            self.binds[path as usize] = Bind::Absent;
        }
        let t = self.thread(row.producer);
        self.push_op(t, op, row, &uses);
    }

    fn rename(&mut self, i: u32, row: &Row<'_>, mut op: Op, failed: bool) {
        let (from, to) = match (self.map_path(row.path), self.map_path(row.path2)) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(why), _) | (_, Err(why)) => return self.skip(i, why),
        };
        op.path = from;
        op.path2 = to;
        op.flags = rename_flags(row.flags);
        let mut uses = vec![(Res::Path(from), Use::Excl), (Res::Path(to), Use::Excl)];
        uses.extend(self.parent_use(from));
        uses.extend(self.parent_use(to));
        if !failed || Self::failed_says_parents_exist(row) {
            self.parents_exist(from);
            self.parents_exist(to);
        }
        if let Some(f) = self.file_at(from) {
            uses.push((Res::File(f), Use::Excl));
            if !failed {
                self.exists(f);
                // The target's own pre-trace file (if any) is replaced: its state is unknown.
                if self.binds[to as usize] == Bind::Untouched {
                    self.file_at(to);
                }
                self.binds[to as usize] = Bind::Bound(f);
                self.binds[from as usize] = Bind::Absent;
            }
        }
        let t = self.thread(row.producer);
        self.push_op(t, op, row, &uses);
    }

    /// A name the call made (mkdir, link, symlink): nothing was there before the call, so
    /// nothing was there before the trace unless the trace had shown it.
    fn made_name(&mut self, path: u32) {
        if self.binds[path as usize] == Bind::Untouched {
            if let Some(f) = self.file_at(path) {
                let n = &mut self.inodes[f as usize];
                n.must_not_exist = true;
                n.fresh = true;
            }
        }
    }

    fn mkdir(&mut self, i: u32, row: &Row<'_>, mut op: Op, failed: bool) {
        let Some((path, uses)) = self.name(i, row.path, row, failed, Use::Excl) else { return };
        op.path = path;
        op.flags = mkdir_mode(row.args);
        let text = self.plan.paths[path as usize].clone();
        if !failed {
            let shown = match self.binds[path as usize] {
                Bind::Initial(f) | Bind::Bound(f) => self.inodes[f as usize].must_exist,
                Bind::Untouched | Bind::Absent => false,
            };
            if !shown && !self.existed.contains(&text) && text != b"." {
                self.made.insert(text);
            }
            self.made_name(path);
            let f = self.new_inode(None);
            self.inodes[f as usize].dir = true;
            self.binds[path as usize] = Bind::Bound(f);
        } else if row.errno == Some("EEXIST") {
            // It was there: a directory, as a mkdir that finds its name taken mostly does.
            if let Some(f) = self.file_at(path) {
                self.exists(f);
                let n = &mut self.inodes[f as usize];
                if n.origin == Some(path) && !n.fresh {
                    n.dir = true;
                    self.existed.insert(text);
                }
            }
        }
        let t = self.thread(row.producer);
        self.push_op(t, op, row, &uses);
    }

    /// The text of a symlink's target as created under the root: an absolute traced target
    /// mapped like any path and made relative to the link's directory (`..` per level,
    /// which RESOLVE_BENEATH follows while it stays beneath); a relative one, or one the
    /// mapping refuses, as traced (an absolute target outside is refused when followed).
    fn symlink_target(&self, target: &[u8], link: u32) -> Vec<u8> {
        if !target.starts_with(b"/") {
            return target.to_vec();
        }
        let Ok(mapped) = self.mapper.map(target) else { return target.to_vec() };
        let (dir, _) = super::fsroot::split_parent(&self.plan.paths[link as usize]);
        let depth = if dir == b"." { 0 } else { dir.iter().filter(|&&b| b == b'/').count() + 1 };
        let mut out = b"../".repeat(depth);
        if mapped != b"." {
            out.extend_from_slice(&mapped);
        } else if out.is_empty() {
            out.push(b'.');
        }
        out
    }

    /// link(path, path2) and symlink(target, path2).
    fn link(&mut self, i: u32, row: &Row<'_>, mut op: Op, failed: bool) {
        let symlink = op.kind == Kind::Symlink;
        let Some((name, mut uses)) = self.name(i, row.path2, row, failed, Use::Excl) else { return };
        if symlink {
            let target = row.target.or(row.path).unwrap_or(b"");
            let text = self.symlink_target(target, name);
            op.path = name;
            op.path2 = self.plan.targets.len() as u32;
            self.plan.targets.push(text);
        } else {
            let Some((old, more)) = self.name(i, row.path, row, failed, Use::Shared) else { return };
            op.path = old;
            op.path2 = name;
            uses.extend(more);
            if let Some(f) = self.file_at(old) {
                uses.push((Res::File(f), Use::Shared));
                if !failed {
                    self.exists(f);
                    self.made_name(name);
                    self.inodes[f as usize].linked = true;
                    self.binds[name as usize] = Bind::Bound(f);
                }
            }
        }
        if failed && row.errno == Some("EEXIST") {
            if let Some(f) = self.file_at(name) {
                self.exists(f);
            }
        } else if !failed && symlink {
            self.made_name(name);
            let f = self.new_inode(None);
            self.binds[name as usize] = Bind::Bound(f);
        }
        let t = self.thread(row.producer);
        self.push_op(t, op, row, &uses);
    }

    fn truncate(&mut self, i: u32, row: &Row<'_>, mut op: Op, failed: bool) {
        let Some((path, mut uses)) = self.name(i, row.path, row, failed, Use::Shared) else { return };
        op.path = path;
        if let Some(f) = self.file_at(path) {
            uses.push((Res::File(f), Use::Excl));
            if !failed {
                self.exists(f);
                let n = &mut self.inodes[f as usize];
                n.fresh = true;
                n.written = op.size;
                if n.linked {
                    op.opt |= OPT_LINKS_OK;
                }
            }
        }
        let t = self.thread(row.producer);
        self.push_op(t, op, row, &uses);
    }

    /// copy_file_range, sendfile and splice: bytes from `fd` (at `pos`) to `fd2` (at
    /// `pos2`). Both sides replayed files: the call itself (`native`, none for splice,
    /// whose other side is always a pipe); one side only: the read or write it is there.
    fn copy(&mut self, i: u32, row: &Row<'_>, mut op: Op, failed: bool, ret: i64, native: Option<Kind>) {
        let side = |b: &Self, fd: Option<i64>| match fd.map(|fd| (fd, b.fd_ref(row.producer, fd, row.ts))) {
            Some((_, Some(FdRef::Slot { slot, desc, file, path }))) => Ok((slot, desc, file, path)),
            Some((_, Some(FdRef::Skipped(why)))) => Err(why),
            Some((fd, None)) => {
                Err(if fd > 2 || row.path.is_some() { SkipReason::FdBeforeTrace } else { SkipReason::NotAFile })
            }
            None => Err(SkipReason::NotAFile),
        };
        let (src, dst) = (side(self, row.fd), side(self, row.fd2));
        if let (Err(why), Err(_)) = (src, dst) {
            return self.skip(i, why);
        }
        if failed {
            return self.skip(i, SkipReason::FailedInTrace);
        }
        // Which offsets were explicit (`[N]`) rather than NULL (the fds' positions): the
        // printed arguments say; without them, the file positions (as cp uses them).
        let args = row.args.map(split_args).unwrap_or_default();
        let explicit = |k: usize| args.get(k).is_some_and(|a| a.starts_with('['));
        let (pin, pout) = match row.name {
            "sendfile" | "sendfile64" => (explicit(2), false),
            _ => (explicit(1), explicit(3)),
        };
        let asked = op.size;
        // The bytes the trace moved; an end-of-file probe (0 moved) asks what it asked.
        op.size = if ret > 0 { ret } else { asked.clamp(0, 1 << 16) };
        let probe = if ret == 0 { Some(asked) } else { None };
        let mut uses: Vec<(Res, Use)> = Vec::with_capacity(4);
        let posuse = |explicit: bool| if explicit { Use::Shared } else { Use::Excl };
        if let Ok((slot, desc, file, path)) = src {
            op.slot = slot;
            op.path = path;
            if let Some(p) = row.pos {
                self.read_seen(file, p, ret, probe);
            }
            uses.push((Res::Desc(desc), posuse(pin)));
            uses.push((Res::File(file), Use::Shared));
        }
        if let Ok((slot, desc, file, path)) = dst {
            if let Some(p) = row.pos2 {
                let n = &mut self.inodes[file as usize];
                n.written = n.written.max(p + ret.max(0));
            }
            uses.push((Res::Desc(desc), posuse(pout)));
            uses.push((Res::File(file), Use::Excl));
            match src {
                Ok(_) => {
                    op.slot2 = slot;
                    op.path2 = path;
                }
                Err(_) => {
                    // Only the destination is replayed: the write it is.
                    op.slot = slot;
                    op.path = path;
                    op.pos = row.pos2.unwrap_or(0);
                }
            }
        }
        op.kind = match (src.is_ok(), dst.is_ok(), native) {
            (true, true, Some(k)) => {
                op.opt |= if pin { OPT_POS_IN } else { 0 } | if pout { OPT_POS_OUT } else { 0 };
                k
            }
            (true, _, _) if pin => Kind::Pread,
            (true, _, _) => Kind::Read,
            (false, _, _) if pout => Kind::Pwrite,
            (false, _, _) => Kind::Write,
        };
        if op.kind == Kind::Pread && row.pos.is_none() || op.kind == Kind::Pwrite && row.pos2.is_none() {
            return self.skip(i, SkipReason::NoOffset);
        }
        let t = self.thread(row.producer);
        self.push_op(t, op, row, &uses);
    }

    fn fd_call(&mut self, i: u32, row: &Row<'_>, mut op: Op, failed: bool, ret: i64) {
        let Some(fd) = row.fd else {
            return self.skip(i, SkipReason::NotAFile);
        };
        let (slot, desc, file, path) = match self.fd_ref(row.producer, fd, row.ts) {
            Some(FdRef::Slot { slot, desc, file, path }) => (slot, desc, file, path),
            Some(FdRef::Skipped(why)) => {
                self.fd_effects_of_skipped(row, fd, failed, ret, why);
                return self.skip(i, why);
            }
            None => {
                // Never opened in the trace (stdin redirected from a file, say): what it is
                // shows only in its -y path.
                let why = match row.path {
                    Some(p) if super::paths::is_special(p) => SkipReason::NotAFile,
                    _ => SkipReason::FdBeforeTrace,
                };
                self.fd_effects_of_skipped(row, fd, failed, ret, why);
                return self.skip(i, why);
            }
        };
        if failed {
            return self.skip(i, SkipReason::FailedInTrace);
        }
        op.slot = slot;
        op.path = path;
        let k = op.kind;
        let proc_ = self.process(row.producer);
        let uses: Vec<(Res, Use)> = match k {
            Kind::Close => {
                self.fd_close(proc_, fd, row.ts);
                vec![(Res::Desc(desc), Use::Excl)]
            }
            Kind::Read | Kind::Readv => {
                if let Some(p) = row.pos {
                    self.read_seen(file, p, ret, row.size);
                }
                vec![(Res::Desc(desc), Use::Excl), (Res::File(file), Use::Shared)]
            }
            Kind::Pread | Kind::Preadv => {
                let Some(p) = row.pos else { return self.skip(i, SkipReason::NoOffset) };
                self.read_seen(file, p, ret, row.size);
                vec![(Res::Desc(desc), Use::Shared), (Res::File(file), Use::Shared)]
            }
            Kind::Write | Kind::Writev | Kind::Pwrite | Kind::Pwritev => {
                op.size = if ret >= 0 { ret } else { op.size };
                let positional = matches!(k, Kind::Pwrite | Kind::Pwritev);
                match row.pos {
                    Some(p) => {
                        let n = &mut self.inodes[file as usize];
                        n.written = n.written.max(p + op.size);
                    }
                    None if positional => return self.skip(i, SkipReason::NoOffset),
                    None => self.inodes[file as usize].appended += op.size.max(0),
                }
                let d = if positional { Use::Shared } else { Use::Excl };
                vec![(Res::Desc(desc), d), (Res::File(file), Use::Excl)]
            }
            Kind::Lseek => {
                let Some(w) = whence(row.flags) else { return self.skip(i, SkipReason::Unsupported) };
                op.flags = w;
                if w == libc::SEEK_END {
                    self.saw_size(file, ret - op.pos);
                }
                vec![(Res::Desc(desc), Use::Excl)]
            }
            Kind::Fsync | Kind::Fdatasync => vec![(Res::Desc(desc), Use::Shared), (Res::File(file), Use::Shared)],
            Kind::Ftruncate => {
                let n = &mut self.inodes[file as usize];
                n.fresh = true;
                n.written = op.size;
                vec![(Res::Desc(desc), Use::Shared), (Res::File(file), Use::Excl)]
            }
            Kind::Fallocate => {
                op.flags = fallocate_mode(row.flags);
                let n = &mut self.inodes[file as usize];
                if op.flags & libc::FALLOC_FL_KEEP_SIZE == 0 {
                    n.written = n.written.max(op.pos + op.size);
                }
                vec![(Res::Desc(desc), Use::Shared), (Res::File(file), Use::Excl)]
            }
            Kind::Getdents => vec![(Res::Desc(desc), Use::Excl), (Res::File(file), Use::Shared)],
            Kind::Dup => {
                let new_slot = self.new_slot();
                op.new_slot = new_slot;
                if let Some(FdRef::Slot { slot: old, .. }) = self.fds.get(&(proc_, ret)).and_then(|t| t.at(row.ts)) {
                    if ret != fd {
                        op.aux = old; // dup2 onto an open fd closes it
                    }
                }
                self.fd_set(
                    proc_,
                    ret,
                    FdRef::Slot { slot: new_slot, desc, file, path },
                    row.ts.saturating_add(row.dur),
                    row.ts,
                );
                vec![(Res::Desc(desc), Use::Excl)]
            }
            Kind::Open
            | Kind::Unlink
            | Kind::Rename
            | Kind::Mkdir
            | Kind::Link
            | Kind::Symlink
            | Kind::Truncate
            | Kind::CopyRange
            | Kind::Sendfile => unreachable!("path and copy calls"),
        };
        let t = self.thread(row.producer);
        self.push_op(t, op, row, &uses);
    }

    /// A skipped call on an fd still changes the fd table (closing a pipe, dup'ing a socket).
    fn fd_effects_of_skipped(&mut self, row: &Row<'_>, fd: i64, failed: bool, ret: i64, why: SkipReason) {
        if failed {
            return;
        }
        let p = self.process(row.producer);
        match classify(row.name, row.flags) {
            Class::Op(Kind::Close) => {
                self.fd_close(p, fd, row.ts);
            }
            Class::Op(Kind::Dup) => {
                self.fd_set(p, ret, FdRef::Skipped(why), row.ts.saturating_add(row.dur), row.ts);
            }
            _ => {}
        }
    }

    /// A read of `ret` bytes at `pos` (of `asked`) on `file`.
    fn read_seen(&mut self, file: u32, pos: i64, ret: i64, asked: Option<i64>) {
        let n = &mut self.inodes[file as usize];
        if ret < 0 || n.fresh {
            return;
        }
        // Bytes the trace appended came after the pre-trace content: a read reaching the end
        // of the file needs that much less of it.
        let end = pos + ret - n.appended;
        if end > n.written {
            n.need = n.need.max(end); // pre-trace content was read
            n.must_exist = true;
        }
        if asked.is_some_and(|a| ret < a) && end > n.written && n.exact.is_none() {
            n.exact = Some(end); // a short read: the file ended there
        }
    }

    /// The plan: threads, dependencies, and what to prepare.
    pub fn finish(mut self) -> Plan {
        let mut dirs: Vec<Vec<u8>> = Vec::new();
        let mut prep_files = Vec::new();
        for n in &self.inodes {
            let Some(path) = n.origin else { continue };
            let text = &self.plan.paths[path as usize];
            // The root itself is never prepared; what the trace made, it makes again.
            if text == b"." || self.under_made(text) {
                continue;
            }
            let p = if n.dir {
                Prep::Dir(path)
            } else if n.must_not_exist {
                Prep::Absent(path)
            } else if n.must_exist || n.need > 0 || n.exact.is_some() {
                Prep::File(path, n.exact.unwrap_or(0).max(n.need).max(0) as u64)
            } else {
                Prep::Absent(path) // made by the trace (O_CREAT): start without it
            };
            prep_files.push(p);
        }
        // The directories a successful call showed existing (the parents of its paths),
        // shallowest first; not those the trace made, nor ones only failed calls looked in
        // (making them would change nothing those calls see, and leave stray directories).
        dirs.extend(self.existed.iter().filter(|d| !self.under_made(d)).cloned());
        for pr in &prep_files {
            if let Prep::Dir(p) = pr {
                dirs.push(self.plan.paths[*p as usize].clone());
            }
        }
        let depth_key = |a: &Vec<u8>| (a.iter().filter(|&&c| c == b'/').count(), a.clone());
        dirs.sort_by_key(depth_key);
        dirs.dedup();
        let dirset: HashSet<&Vec<u8>> = dirs.iter().collect();
        let mut prep: Vec<Prep> = Vec::new();
        let mut extra = Vec::new();
        let id_of = |d: &Vec<u8>, extra: &mut Vec<Vec<u8>>| match self.path_ids.get(d) {
            Some(&id) => id,
            None => {
                extra.push(d.clone());
                (self.plan.paths.len() + extra.len() - 1) as u32
            }
        };
        for d in &dirs {
            if d.as_slice() != b"." {
                prep.push(Prep::Dir(id_of(d, &mut extra)));
            }
        }
        // The directories the trace makes are removed (with anything a run left in them),
        // outermost first; their parents exist by now.
        let mut made: Vec<Vec<u8>> = self.made.iter().filter(|d| !self.under_made_strictly(d)).cloned().collect();
        made.sort_by_key(depth_key);
        for d in &made {
            prep.push(Prep::Absent(id_of(d, &mut extra)));
        }
        for pr in prep_files {
            match pr {
                Prep::Dir(_) => {}
                Prep::File(p, _) | Prep::Absent(p) if dirset.contains(&self.plan.paths[p as usize]) => {}
                other => prep.push(other),
            }
        }
        self.plan.paths.extend(extra);
        self.plan.prep = prep;
        if let Some(first) = self.first_ts {
            self.plan.t_start = first;
            self.plan.span = (self.last_end - first).max(0);
        }
        self.plan
    }

    /// Whether `p` is beneath a directory the trace made (not counting `p` itself).
    fn under_made_strictly(&self, p: &[u8]) -> bool {
        let mut end = 0;
        while let Some(i) = memchr::memchr(b'/', &p[end..]) {
            if self.made.contains(&p[..end + i]) {
                return true;
            }
            end += i + 1;
        }
        false
    }
}
