//! A line made a row: a syscall's arguments typed against the per-process state (which fd is
//! which file at which position, the working directory, the paths as the program gave them),
//! signals and exits; the rows handed to `rows.rs` and cut into batches.

use super::*;

impl StraceParser {
    /// `bytes` into the arena, replaced lossily when not UTF-8.
    #[inline]
    pub(super) fn text(&mut self, bytes: &[u8]) -> Str {
        if bytes.is_ascii() {
            return self.rows.text(bytes);
        }
        match std::str::from_utf8(bytes) {
            Ok(_) => self.rows.text(bytes),
            Err(_) => {
                let s = String::from_utf8_lossy(bytes).into_owned();
                self.rows.text(s.as_bytes())
            }
        }
    }

    /// strace's escaped text, unescaped into the arena (as printed if that is not UTF-8).
    pub(super) fn escaped(&mut self, bytes: &[u8]) -> Str {
        let start = self.rows.arena_bytes();
        if unescape_into(bytes, self.rows.arena_mut()) {
            self.rows.since(start)
        } else {
            self.text(bytes)
        }
    }

    /// A path argument (`"..."`), made absolute against the directory `dirfd` (its `-y`
    /// path `dir_y`, else the fd table) or, for AT_FDCWD and plain calls, the cwd.
    pub(super) fn path_arg(&mut self, t: u32, arg: &[u8], dirfd: Option<i64>, dir_y: Option<&[u8]>) -> Str {
        let Some(inner) = quoted(arg) else { return Str::NULL };
        let start = self.rows.arena_bytes();
        if !inner.is_empty() && inner[0] != b'/' {
            if let Some(y) = dir_y {
                if !unescape_into(y, self.rows.arena_mut()) {
                    let lossy = String::from_utf8_lossy(y).into_owned();
                    self.rows.arena_mut().extend_from_slice(lossy.as_bytes());
                }
                self.rows.arena_mut().push(b'/');
            } else {
                let base = match dirfd {
                    None | Some(AT_FDCWD) => self.procs.cwd(t),
                    Some(fd) => self.procs.fd_info(t, fd).and_then(|(p, _)| p),
                };
                if let Some(base) = base {
                    let arena = self.rows.arena_mut();
                    arena.extend_from_slice(base);
                    arena.push(b'/');
                }
            }
        }
        if !unescape_into(inner, self.rows.arena_mut()) {
            let lossy = String::from_utf8_lossy(inner).into_owned();
            self.rows.arena_mut().extend_from_slice(lossy.as_bytes());
        }
        self.rows.since(start)
    }

    /// A path argument (`"..."`) as the program passed it (relative, through symlinks),
    /// unescaped; null when the argument is not a string.
    pub(super) fn asked(&mut self, arg: &[u8]) -> Str {
        match quoted(arg) {
            Some(inner) => self.escaped(inner),
            None => Str::NULL,
        }
    }

    /// The tracked file position of `fd` (null when unknown), advanced by the `ret` bytes
    /// a call that used it moved.
    pub(super) fn tracked_pos(&mut self, t: u32, fd: Option<i64>, ret: Option<i64>) -> i64 {
        let Some(fd) = fd else { return NULL };
        let Some((_, Some(pos))) = self.procs.fd_info(t, fd) else { return NULL };
        if let Some(n) = ret.filter(|&n| n > 0) {
            self.procs.set_pos(t, fd, Some(pos + n));
        }
        pos
    }

    /// The path of `fd`: its `-y` annotation, else the fd table's.
    ///
    /// strace's timestamps order the calls of different threads only roughly (it stamps
    /// a call when it gets to it), so the rebuilt table can be stale: a `close(3)` seen
    /// after the `openat` that reused fd 3. What `-y` prints is what the kernel had, so
    /// an fd the table does not know, or knows under another path, is (re)learned from it.
    pub(super) fn fd_path(&mut self, t: u32, fd: Option<i64>, y: Option<&[u8]>) -> Str {
        match (fd, y) {
            (_, Some(y)) => {
                let s = self.escaped(y);
                if let Some(fd) = fd.filter(|&f| f >= 0) {
                    let path = self.rows.get(s);
                    let stale = match self.procs.fd_info(t, fd) {
                        None => true,
                        Some((known, _)) => known != Some(path),
                    };
                    if stale {
                        let path = path.to_vec();
                        self.procs.open(t, fd, Some(&path), None, false);
                    }
                }
                s
            }
            (Some(fd), None) => match self.procs.fd_info(t, fd) {
                Some((Some(p), _)) => {
                    let off = self.rows.arena_bytes();
                    self.rows.arena_mut().extend_from_slice(p);
                    self.rows.since(off)
                }
                _ => Str::NULL,
            },
            _ => Str::NULL,
        }
    }

    /// Takes the fd of close's first argument (`3` or `3</path>`) out of thread index
    /// `t`'s table; returns the path it had (its `-y` path, else the table's).
    ///
    /// Not through fd_path: a close printed with another path than the table's entry
    /// closed an older file (the table is stale, see fd_path) and must not drop the entry.
    pub(super) fn close_fd(&mut self, t: u32, arg: &[u8]) -> Option<Box<[u8]>> {
        let arg = line::trim(arg);
        let arg = arg.strip_suffix(b",").unwrap_or(arg);
        let (fd, y) = parse_fd(arg);
        let fd = fd?;
        let known = self.procs.fd_info(t, fd).and_then(|(p, _)| p).map(Box::<[u8]>::from);
        let path = match y {
            Some(y) => {
                let mut p = Vec::with_capacity(y.len());
                if !unescape_into(y, &mut p) {
                    p = String::from_utf8_lossy(y).into_owned().into_bytes();
                }
                Some(p.into_boxed_slice())
            }
            None => known.clone(),
        };
        if y.is_none() || known.is_none() || known == path {
            self.procs.close(t, fd);
        }
        path
    }

    /// `AT_FDCWD</dir>` tells the working directory.
    pub(super) fn note_cwd(&mut self, t: u32, dirfd: Option<i64>, y: Option<&[u8]>) {
        if let (Some(AT_FDCWD), Some(y)) = (dirfd, y) {
            if self.procs.cwd(t) != Some(y) || y.contains(&b'\\') {
                let mut dir = Vec::with_capacity(y.len());
                if unescape_into(y, &mut dir) {
                    self.procs.set_cwd(t, &dir);
                }
            }
        }
    }

    #[inline]
    pub(super) fn push(&mut self, row: Row) {
        self.put(row, None);
    }

    /// Stores a complete row (in its reserved slot, if any) and cuts a batch when due.
    #[inline]
    pub(super) fn put(&mut self, mut row: Row, slot: Option<u64>) {
        let p = row.producer as usize;
        if self.seq.len() <= p {
            self.seq.resize(p + 1, 0);
        }
        row.seq = self.seq[p];
        self.seq[p] += 1;
        match slot {
            Some(s) => self.rows.fill(s, row),
            None => self.rows.push(row),
        }
        if self.rows.len() >= self.next_cut || self.rows.arena_bytes() >= ARENA_LIMIT {
            let batch = self.cfg.batch_rows;
            // A call unfinished for two batches' worth of rows is let go (see rows.rs).
            let force = self.rows.len() >= 2 * batch || self.rows.arena_bytes() >= ARENA_LIMIT;
            if force || self.rows.ready() >= batch / 2 {
                self.cut(force);
            }
            self.next_cut = batch.max(self.rows.len() + batch / 4).max(1);
        }
    }

    pub(super) fn cut(&mut self, force: bool) {
        let mut cut = self.rows.take_cut(force);
        for (k, n) in cut.events.iter().enumerate() {
            self.stats.events[k] += n;
        }
        if let Some(b) = self.builder.as_mut() {
            // Built on the builder's thread (background.rs); its buffers come back for reuse.
            if let Ok(spares) = b.spares.get_mut() {
                while let Ok((rows, arena)) = spares.try_recv() {
                    self.rows.recycle(rows, arena);
                }
            }
            let names = self.names.since(b.names_sent);
            b.names_sent = self.names.count();
            let job = BuildJob { cut, names, lines: self.stats.lines, rejected: self.stats.rejected };
            if b.jobs.send(ToBuilder::Cut(job)).is_err() {
                self.builder = None; // the builder is gone (its consumer stopped): nothing to hand over to
            }
            return;
        }
        let batches = cut.build(&self.names);
        self.rows.recycle(cut.rows, cut.arena);
        self.out.extend(batches);
    }

    /// From here on, cuts are built into record batches by whoever receives `jobs` (in order;
    /// each job carries the names interned since the previous one), who sends the emptied
    /// buffers back on `spares`. Rows set aside ([`StraceParser::take_late`]) are still built
    /// here.
    pub(super) fn build_elsewhere(&mut self, jobs: SyncSender<ToBuilder>, spares: Receiver<(Vec<Row>, Vec<u8>)>) {
        self.builder = Some(Builder { jobs, spares: Mutex::new(spares), names_sent: 0 });
    }

    /// Stops handing cuts over (later ones are built here again).
    pub(super) fn build_here(&mut self) {
        self.builder = None;
    }

    /// Cuts still go to a builder (false once it went away).
    pub(super) fn building_elsewhere(&self) -> bool {
        self.builder.is_some()
    }

    pub(super) fn signal(&mut self, t: u32, ts: i64, text: &[u8]) {
        let mut row = Row::new(Kind::Signal, ts, self.procs.producer(t));
        // `SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=42, ...}` or
        // `stopped by SIGSTOP`.
        if let Some(rest) = text.strip_prefix(b"stopped by ") {
            row.s[0] = self.text(rest);
            row.s[1] = self.rows.text(b"stopped");
        } else {
            let end = text.iter().position(|&b| b == b' ').unwrap_or(text.len());
            row.s[0] = self.text(&text[..end]);
            let info = line::trim(&text[end..]);
            if !info.is_empty() {
                row.s[2] = self.text(info);
                if let Some(code) = field(info, b"si_code=") {
                    row.s[1] = self.text(code);
                }
                if let Some(pid) = field(info, b"si_pid=") {
                    row.i[0] = arg_int(pid).unwrap_or(NULL);
                }
            }
        }
        self.push(row);
    }

    pub(super) fn exit(&mut self, t: u32, ts: i64, text: &[u8]) {
        let mut row = Row::new(Kind::Exit, ts, self.procs.producer(t));
        row.i[1] = 0;
        if let Some(rest) = text.strip_prefix(b"exited with ") {
            row.i[0] = arg_int(line::trim(rest)).unwrap_or(NULL);
        } else if let Some(rest) = text.strip_prefix(b"killed by ") {
            let end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
            row.s[0] = self.text(&rest[..end]);
            if line::find(rest, b"(core dumped)").is_some() {
                row.i[1] = 1;
            }
        }
        self.push(row);
    }

    /// One complete call: typed columns, and the fd table / process updates it implies.
    /// `slot`: the row reserved when the call started.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn syscall(&mut self, t: u32, ts: i64, dur: i64, name: u32, sc: Sc, c: &Call<'_>, slot: Option<u64>) {
        let mut row = Row::new(Kind::Syscall, ts, self.procs.producer(t));
        row.name = name;
        row.dur = c.dur.unwrap_or(dur).max(0);
        let ret = c.ret;
        row.i[3] = ret.unwrap_or(NULL);
        if let Some(e) = c.errno {
            row.s[2] = self.text(e);
        }
        let a = &c.args;
        let na = c.nargs;
        let arg = |k: usize| -> &[u8] {
            if k < na {
                a[k]
            } else {
                &[]
            }
        };
        let ok = ret.is_some_and(|r| r >= 0);
        let mut raw = false;
        match sc {
            Sc::Rw | Sc::Rwv | Sc::Prw | Sc::Prwv => {
                let (fd, y) = parse_fd(arg(0));
                row.i[0] = fd.unwrap_or(NULL);
                row.s[0] = self.fd_path(t, fd, y);
                row.i[2] =
                    if matches!(sc, Sc::Rw | Sc::Prw) { arg_int(arg(2)).unwrap_or(NULL) } else { iov_total(arg(1)) };
                let explicit = if matches!(sc, Sc::Prw | Sc::Prwv) { arg_int(arg(3)) } else { None };
                row.i[1] = match explicit {
                    Some(off) if off >= 0 => off,
                    // read/write (and preadv2 with offset -1) use the file position.
                    _ => self.tracked_pos(t, fd, ret),
                };
            }
            Sc::Copy | Sc::Sendfile | Sc::Tee => {
                // Source side in fd/path/pos, destination side in fd2/path2/pos2, as for
                // rename: what is read, then where it goes. `size` is the length asked,
                // `ret` the bytes moved.
                let (src, src_off, dst, dst_off, len, flags) = match sc {
                    Sc::Copy => (arg(0), Some(arg(1)), arg(2), Some(arg(3)), arg(4), Some(arg(5))),
                    Sc::Sendfile => (arg(1), Some(arg(2)), arg(0), None, arg(3), None),
                    _ => (arg(0), None, arg(1), None, arg(2), Some(arg(3))),
                };
                let pipe_only = sc == Sc::Tee; // tee copies between two pipes: no positions
                let (fd, y) = parse_fd(src);
                row.i[0] = fd.unwrap_or(NULL);
                row.s[0] = self.fd_path(t, fd, y);
                let (fd2, y2) = parse_fd(dst);
                row.i[4] = fd2.unwrap_or(NULL);
                row.s[1] = self.fd_path(t, fd2, y2);
                if !pipe_only {
                    row.i[1] = match src_off.and_then(offset_ptr) {
                        Some(at) => at.unwrap_or(NULL), // explicit: the file position stays
                        None => self.tracked_pos(t, fd, ret),
                    };
                    row.i[5] = match dst_off.and_then(offset_ptr) {
                        Some(at) => at.unwrap_or(NULL),
                        None => self.tracked_pos(t, fd2, ret),
                    };
                }
                row.i[2] = arg_int(len).unwrap_or(NULL);
                if let Some(f) = flags.filter(|f| !f.is_empty()) {
                    row.s[3] = self.text(f);
                }
                // Whether an offset was NULL (the fd's position, moved) or explicit (left
                // alone) is in no typed column: a replay needs it.
                raw = !pipe_only;
            }
            Sc::Open | Sc::Creat | Sc::Openat | Sc::Openat2 => {
                let (dirfd, dir_y, p, f) = match sc {
                    Sc::Open => (None, None, arg(0), Some(arg(1))),
                    Sc::Creat => (None, None, arg(0), None),
                    _ => {
                        let (d, y) = parse_fd(arg(0));
                        (d, y, arg(1), Some(arg(2)))
                    }
                };
                self.note_cwd(t, dirfd, dir_y);
                row.s[5] = self.asked(p);
                row.s[0] = match c.ret_path {
                    Some(y) => self.escaped(y),
                    None => self.path_arg(t, p, dirfd, dir_y),
                };
                let flags: &[u8] = match (sc, f) {
                    (Sc::Creat, _) => b"O_WRONLY|O_CREAT|O_TRUNC",
                    (Sc::Openat2, Some(how)) => field(how, b"flags=").unwrap_or(how),
                    (_, Some(f)) => f,
                    _ => b"",
                };
                row.s[3] = self.text(flags);
                if let Some(fd) = ret.filter(|&r| r >= 0) {
                    let append = line::find(flags, b"O_APPEND").is_some();
                    let cloexec = line::find(flags, b"O_CLOEXEC").is_some();
                    let path = self.rows.get(row.s[0]).to_vec();
                    let path = if row.s[0].is_null() { None } else { Some(path.as_slice()) };
                    self.procs.open(t, fd, path, if append { None } else { Some(0) }, cloexec);
                }
            }
            Sc::Close => {
                let (fd, _) = parse_fd(arg(0));
                row.i[0] = fd.unwrap_or(NULL);
                let closed = match slot.and_then(|_| self.pending.get_mut(t as usize)).and_then(|p| p.closed.take()) {
                    Some(path) => path, // applied when the call started
                    None => self.close_fd(t, arg(0)),
                };
                if let Some(path) = closed {
                    row.s[0] = self.rows.text(&path);
                }
            }
            Sc::Lseek => {
                let (fd, y) = parse_fd(arg(0));
                row.i[0] = fd.unwrap_or(NULL);
                row.s[0] = self.fd_path(t, fd, y);
                row.i[1] = arg_int(arg(1)).unwrap_or(NULL);
                row.s[3] = self.text(arg(2));
                if let (Some(fd), Some(pos)) = (fd, ret.filter(|&r| r >= 0)) {
                    self.procs.set_pos(t, fd, Some(pos));
                }
            }
            Sc::Sync | Sc::FdFirst | Sc::Getdents | Sc::Fchdir | Sc::SyncRange | Sc::Fallocate | Sc::Ftruncate => {
                let (fd, y) = parse_fd(arg(0));
                row.i[0] = fd.unwrap_or(NULL);
                row.s[0] = self.fd_path(t, fd, y);
                match sc {
                    Sc::Getdents => row.i[2] = arg_int(arg(2)).unwrap_or(NULL),
                    Sc::SyncRange => {
                        row.i[1] = arg_int(arg(1)).unwrap_or(NULL);
                        row.i[2] = arg_int(arg(2)).unwrap_or(NULL);
                        row.s[3] = self.text(arg(3));
                    }
                    Sc::Fallocate => {
                        row.s[3] = self.text(arg(1));
                        row.i[1] = arg_int(arg(2)).unwrap_or(NULL);
                        row.i[2] = arg_int(arg(3)).unwrap_or(NULL);
                    }
                    Sc::Ftruncate => row.i[2] = arg_int(arg(1)).unwrap_or(NULL),
                    Sc::Fchdir if ok && !row.s[0].is_null() => {
                        let dir = self.rows.get(row.s[0]).to_vec();
                        self.procs.set_cwd(t, &dir);
                    }
                    Sc::FdFirst => raw = true,
                    _ => {}
                }
            }
            Sc::Dup | Sc::Dup2 => {
                let (fd, y) = parse_fd(arg(0));
                row.i[0] = fd.unwrap_or(NULL);
                row.s[0] = self.fd_path(t, fd, y);
                if sc == Sc::Dup2 && na > 2 {
                    row.s[3] = self.text(arg(2));
                }
                if let (Some(old), Some(new)) = (fd, ret.filter(|&r| r >= 0)) {
                    let cloexec = na > 2 && line::find(arg(2), b"O_CLOEXEC").is_some();
                    self.procs.dup(t, old, new, cloexec);
                }
            }
            Sc::Fcntl => {
                let (fd, y) = parse_fd(arg(0));
                row.i[0] = fd.unwrap_or(NULL);
                row.s[0] = self.fd_path(t, fd, y);
                let cmd = arg(1);
                let after_fd = args_from(c, 1);
                row.s[3] = self.text(after_fd);
                if let Some(fd) = fd {
                    if let Some(new) = ret.filter(|&r| r >= 0) {
                        if cmd.starts_with(b"F_DUPFD") {
                            self.procs.dup(t, fd, new, cmd == b"F_DUPFD_CLOEXEC");
                        }
                    }
                    if ok && cmd == b"F_SETFD" {
                        self.procs.set_cloexec(t, fd, line::find(arg(2), b"FD_CLOEXEC").is_some());
                    }
                }
            }
            Sc::Mmap => {
                let (fd, y) = parse_fd(arg(4));
                let fd = fd.filter(|&f| f >= 0);
                row.i[0] = fd.unwrap_or(NULL);
                row.s[0] = self.fd_path(t, fd, if fd.is_some() { y } else { None });
                row.i[2] = arg_int(arg(1)).unwrap_or(NULL);
                if fd.is_some() {
                    row.i[1] = arg_int(arg(5)).unwrap_or(NULL);
                }
                let start = self.rows.arena_bytes();
                let (prot, fl) = (arg(2).to_vec(), arg(3).to_vec());
                self.text(&prot);
                self.rows.arena_mut().extend_from_slice(b", ");
                self.text(&fl);
                row.s[3] = self.rows.since(start);
            }
            Sc::PathFirst | Sc::Truncate | Sc::Chdir | Sc::Execve => {
                row.s[0] = self.path_arg(t, arg(0), None, None);
                row.s[5] = self.asked(arg(0));
                match sc {
                    Sc::Truncate => row.i[2] = arg_int(arg(1)).unwrap_or(NULL),
                    Sc::Chdir if ok && !row.s[0].is_null() => {
                        let dir = self.rows.get(row.s[0]).to_vec();
                        self.procs.set_cwd(t, &dir);
                    }
                    Sc::Execve => {
                        raw = true;
                        if ret == Some(0) {
                            let p = if row.s[0].is_null() { None } else { Some(self.rows.get(row.s[0]).to_vec()) };
                            self.procs.exec(t, p.as_deref());
                        }
                    }
                    Sc::PathFirst => raw = true,
                    _ => {}
                }
            }
            Sc::PathAt | Sc::Execveat => {
                let (dirfd, y) = parse_fd(arg(0));
                self.note_cwd(t, dirfd, y);
                if quoted(arg(1)) == Some(b"") {
                    // AT_EMPTY_PATH: the call is on the fd itself.
                    row.i[0] = dirfd.unwrap_or(NULL);
                    row.s[0] = self.fd_path(t, dirfd, y);
                } else {
                    if dirfd != Some(AT_FDCWD) {
                        row.i[0] = dirfd.unwrap_or(NULL);
                    }
                    row.s[0] = self.path_arg(t, arg(1), dirfd, y);
                    row.s[5] = self.asked(arg(1));
                }
                raw = true;
                if sc == Sc::Execveat && ret == Some(0) {
                    let p = if row.s[0].is_null() { None } else { Some(self.rows.get(row.s[0]).to_vec()) };
                    self.procs.exec(t, p.as_deref());
                }
            }
            Sc::Rename => {
                row.s[0] = self.path_arg(t, arg(0), None, None);
                row.s[1] = self.path_arg(t, arg(1), None, None);
                row.s[5] = self.asked(arg(0));
                row.s[6] = self.asked(arg(1));
            }
            Sc::RenameAt => {
                let (d1, y1) = parse_fd(arg(0));
                let (d2, y2) = parse_fd(arg(2));
                self.note_cwd(t, d1, y1);
                row.s[0] = self.path_arg(t, arg(1), d1, y1);
                row.s[1] = self.path_arg(t, arg(3), d2, y2);
                row.s[5] = self.asked(arg(1));
                row.s[6] = self.asked(arg(3));
                if na > 4 {
                    row.s[3] = self.text(arg(4));
                }
            }
            Sc::SymlinkAt => {
                let (d, y) = parse_fd(arg(1));
                row.s[0] = self.text(quoted(arg(0)).unwrap_or(b""));
                row.s[1] = self.path_arg(t, arg(2), d, y);
                row.s[5] = self.asked(arg(0));
                row.s[6] = self.asked(arg(2));
            }
            Sc::Clone | Sc::Fork => {
                raw = true;
                if let Some(child) = ret.filter(|&r| r > 0).and_then(|r| u32::try_from(r).ok()) {
                    let flags = if sc == Sc::Clone {
                        CloneFlags::from_args(c.raw_args)
                    } else {
                        CloneFlags { thread: false, files: false }
                    };
                    self.procs.cloned(t, child, flags);
                }
            }
            Sc::Pipe => {
                raw = true;
                if ok {
                    let list = if self.names.name(name) == b"socketpair" { arg(3) } else { arg(0) };
                    if let Some(inner) = list.strip_prefix(b"[").and_then(|l| l.strip_suffix(b"]")) {
                        let cloexec = line::find(c.raw_args, b"CLOEXEC").is_some();
                        for part in inner.split(|&b| b == b',') {
                            let (fd, y) = parse_fd(line::trim(part));
                            if let Some(fd) = fd {
                                let mut p = Vec::new();
                                let path = y.filter(|y| unescape_into(y, &mut p)).map(|_| p.as_slice());
                                self.procs.open(t, fd, path, None, cloexec);
                            }
                        }
                    }
                }
            }
            Sc::NewFd => {
                raw = true;
                if let Some(fd) = ret.filter(|&r| r >= 0) {
                    let cloexec = line::find(c.raw_args, b"CLOEXEC").is_some();
                    let mut p = Vec::new();
                    let path = c.ret_path.filter(|y| unescape_into(y, &mut p)).map(|_| p.as_slice());
                    self.procs.open(t, fd, path, None, cloexec);
                }
            }
            Sc::CloseRange => {
                raw = true;
                if ok {
                    let first = arg_int(arg(0)).unwrap_or(i64::MAX);
                    let last = arg_int(arg(1)).unwrap_or(i64::MAX);
                    self.procs.close_range(t, first, last);
                }
            }
            Sc::Exit | Sc::Other => raw = true,
        }
        if raw {
            row.s[4] = self.text(c.raw_args);
        }
        self.put(row, slot);
    }
}

/// The value of `key` (`si_code=`, `flags=`) in a `{k=v, ...}` text, up to `,` or `}`.
pub(super) fn field<'a>(text: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let at = line::find(text, key)? + key.len();
    let rest = &text[at..];
    let end = rest.iter().position(|&b| b == b',' || b == b'}').unwrap_or(rest.len());
    Some(line::trim(&rest[..end]))
}

/// The raw argument text from argument `k` on (`F_SETFD, FD_CLOEXEC` for fcntl).
pub(super) fn args_from<'a>(c: &Call<'a>, k: usize) -> &'a [u8] {
    if k >= c.nargs {
        return b"";
    }
    // Every argument is a subslice of `raw_args`.
    let off = c.args[k].as_ptr() as usize - c.raw_args.as_ptr() as usize;
    &c.raw_args[off.min(c.raw_args.len())..]
}

/// Sum of the `iov_len=N` of an iovec array argument (readv/writev), or null.
pub(super) fn iov_total(arg: &[u8]) -> i64 {
    let mut total: i64 = 0;
    let mut seen = false;
    for at in memchr::memmem::find_iter(arg, b"iov_len=") {
        if let Some((v, _)) = line::parse_int(&arg[at + 8..]) {
            total = total.saturating_add(v);
            seen = true;
        }
    }
    if seen {
        total
    } else {
        NULL
    }
}
