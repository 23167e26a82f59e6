//! Syscall names: interning, and the decoding class of each known syscall.
//!
//! Owns [`Names`], an open-addressing table from name bytes to a dense id (the id the
//! row buffer stores; the `name` column is rebuilt from it) and the [`Sc`] class that
//! says how the arguments decode into typed columns. Known syscalls are seeded once;
//! any other name (`syscall_0x1b6`, a new syscall) is interned on first sight as
//! [`Sc::Other`], so every syscall is kept, typed or not.

/// How a syscall's arguments map onto the typed columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sc {
    /// Not decoded: the raw arguments go to `args`.
    Other,
    /// open(path, flags[, mode])
    Open,
    /// creat(path, mode)
    Creat,
    /// openat(dirfd, path, flags[, mode])
    Openat,
    /// openat2(dirfd, path, {flags=...}, size)
    Openat2,
    /// close(fd)
    Close,
    /// read/write(fd, buf, count)
    Rw,
    /// pread64/pwrite64(fd, buf, count, offset)
    Prw,
    /// readv/writev(fd, iov, iovcnt)
    Rwv,
    /// preadv/pwritev/preadv2/pwritev2(fd, iov, iovcnt, offset[, flags])
    Prwv,
    /// lseek(fd, offset, whence)
    Lseek,
    /// copy_file_range/splice(fd_in, off_in, fd_out, off_out, len, flags)
    Copy,
    /// sendfile/sendfile64(out_fd, in_fd, offset, count)
    Sendfile,
    /// tee(fd_in, fd_out, len, flags)
    Tee,
    /// fsync/fdatasync/syncfs(fd)
    Sync,
    /// sync_file_range(fd, offset, nbytes, flags)
    SyncRange,
    /// fallocate(fd, mode, offset, len)
    Fallocate,
    /// ftruncate(fd, length)
    Ftruncate,
    /// truncate(path, length)
    Truncate,
    /// dup(fd)
    Dup,
    /// dup2(old, new), dup3(old, new, flags)
    Dup2,
    /// fcntl(fd, cmd[, arg])
    Fcntl,
    /// mmap(addr, length, prot, flags, fd, offset) — recorded, not replayable
    Mmap,
    /// path-first calls: stat, lstat, access, unlink, mkdir, rmdir, readlink, statfs, ...
    PathFirst,
    /// fd-first calls without a size: fstat, fstatfs, flock, fadvise64, ioctl, ...
    FdFirst,
    /// getdents/getdents64(fd, dirp, count)
    Getdents,
    /// dirfd + path calls: newfstatat, statx, faccessat, unlinkat, mkdirat, readlinkat, ...
    PathAt,
    /// rename/link/symlink(old, new)
    Rename,
    /// renameat/renameat2/linkat(olddirfd, old, newdirfd, new[, flags])
    RenameAt,
    /// symlinkat(target, newdirfd, linkpath)
    SymlinkAt,
    /// chdir(path)
    Chdir,
    /// fchdir(fd)
    Fchdir,
    /// execve(path, argv, envp)
    Execve,
    /// execveat(dirfd, path, argv, envp, flags)
    Execveat,
    /// clone(...flags=...), clone3({flags=...}, size): returns the child's tid
    Clone,
    /// fork(), vfork()
    Fork,
    /// pipe/pipe2([rfd, wfd][, flags]), socketpair(d, t, p, [fd0, fd1])
    Pipe,
    /// calls returning a new non-file fd: socket, accept, epoll_create, eventfd, ...
    NewFd,
    /// close_range(first, last, flags)
    CloseRange,
    /// exit/exit_group(status)
    Exit,
}

const KNOWN: &[(&str, Sc)] = &[
    ("open", Sc::Open),
    ("creat", Sc::Creat),
    ("openat", Sc::Openat),
    ("openat2", Sc::Openat2),
    ("close", Sc::Close),
    ("read", Sc::Rw),
    ("write", Sc::Rw),
    ("pread64", Sc::Prw),
    ("pwrite64", Sc::Prw),
    ("pread", Sc::Prw),
    ("pwrite", Sc::Prw),
    ("readv", Sc::Rwv),
    ("writev", Sc::Rwv),
    ("preadv", Sc::Prwv),
    ("pwritev", Sc::Prwv),
    ("preadv2", Sc::Prwv),
    ("pwritev2", Sc::Prwv),
    ("lseek", Sc::Lseek),
    ("copy_file_range", Sc::Copy),
    ("splice", Sc::Copy),
    ("sendfile", Sc::Sendfile),
    ("sendfile64", Sc::Sendfile),
    ("tee", Sc::Tee),
    ("fsync", Sc::Sync),
    ("fdatasync", Sc::Sync),
    ("syncfs", Sc::Sync),
    ("sync_file_range", Sc::SyncRange),
    ("fallocate", Sc::Fallocate),
    ("ftruncate", Sc::Ftruncate),
    ("truncate", Sc::Truncate),
    ("dup", Sc::Dup),
    ("dup2", Sc::Dup2),
    ("dup3", Sc::Dup2),
    ("fcntl", Sc::Fcntl),
    ("fcntl64", Sc::Fcntl),
    ("mmap", Sc::Mmap),
    ("mmap2", Sc::Mmap),
    ("stat", Sc::PathFirst),
    ("stat64", Sc::PathFirst),
    ("lstat", Sc::PathFirst),
    ("lstat64", Sc::PathFirst),
    ("statfs", Sc::PathFirst),
    ("access", Sc::PathFirst),
    ("unlink", Sc::PathFirst),
    ("rmdir", Sc::PathFirst),
    ("mkdir", Sc::PathFirst),
    ("readlink", Sc::PathFirst),
    ("chmod", Sc::PathFirst),
    ("chown", Sc::PathFirst),
    ("lchown", Sc::PathFirst),
    ("utime", Sc::PathFirst),
    ("utimes", Sc::PathFirst),
    ("getxattr", Sc::PathFirst),
    ("lgetxattr", Sc::PathFirst),
    ("setxattr", Sc::PathFirst),
    ("listxattr", Sc::PathFirst),
    ("mknod", Sc::PathFirst),
    ("statx", Sc::PathAt),
    ("newfstatat", Sc::PathAt),
    ("fstatat64", Sc::PathAt),
    ("faccessat", Sc::PathAt),
    ("faccessat2", Sc::PathAt),
    ("unlinkat", Sc::PathAt),
    ("mkdirat", Sc::PathAt),
    ("readlinkat", Sc::PathAt),
    ("utimensat", Sc::PathAt),
    ("fchmodat", Sc::PathAt),
    ("fchownat", Sc::PathAt),
    ("mknodat", Sc::PathAt),
    ("name_to_handle_at", Sc::PathAt),
    ("fstat", Sc::FdFirst),
    ("fstat64", Sc::FdFirst),
    ("fstatfs", Sc::FdFirst),
    ("flock", Sc::FdFirst),
    ("fadvise64", Sc::FdFirst),
    ("readahead", Sc::FdFirst),
    ("ioctl", Sc::FdFirst),
    ("fchmod", Sc::FdFirst),
    ("fchown", Sc::FdFirst),
    ("fgetxattr", Sc::FdFirst),
    ("fsetxattr", Sc::FdFirst),
    ("flistxattr", Sc::FdFirst),
    ("getdents", Sc::Getdents),
    ("getdents64", Sc::Getdents),
    ("rename", Sc::Rename),
    ("link", Sc::Rename),
    ("symlink", Sc::Rename),
    ("renameat", Sc::RenameAt),
    ("renameat2", Sc::RenameAt),
    ("linkat", Sc::RenameAt),
    ("symlinkat", Sc::SymlinkAt),
    ("chdir", Sc::Chdir),
    ("fchdir", Sc::Fchdir),
    ("execve", Sc::Execve),
    ("execveat", Sc::Execveat),
    ("clone", Sc::Clone),
    ("clone2", Sc::Clone),
    ("clone3", Sc::Clone),
    ("fork", Sc::Fork),
    ("vfork", Sc::Fork),
    ("pipe", Sc::Pipe),
    ("pipe2", Sc::Pipe),
    ("socketpair", Sc::Pipe),
    ("socket", Sc::NewFd),
    ("accept", Sc::NewFd),
    ("accept4", Sc::NewFd),
    ("epoll_create", Sc::NewFd),
    ("epoll_create1", Sc::NewFd),
    ("eventfd", Sc::NewFd),
    ("eventfd2", Sc::NewFd),
    ("timerfd_create", Sc::NewFd),
    ("signalfd", Sc::NewFd),
    ("signalfd4", Sc::NewFd),
    ("inotify_init", Sc::NewFd),
    ("inotify_init1", Sc::NewFd),
    ("memfd_create", Sc::NewFd),
    ("userfaultfd", Sc::NewFd),
    ("pidfd_open", Sc::NewFd),
    ("perf_event_open", Sc::NewFd),
    ("fanotify_init", Sc::NewFd),
    ("close_range", Sc::CloseRange),
    ("exit", Sc::Exit),
    ("exit_group", Sc::Exit),
];

/// Most distinct names kept (garbage input must not grow the table without bound).
const MAX_NAMES: usize = 1 << 16;

/// Interned syscall names with their decoding class.
pub(super) struct Names {
    names: Vec<(Box<[u8]>, Sc)>,
    /// The key of each name.
    keys: Vec<(u64, u64)>,
    /// Open addressing over `names` indices (`u32::MAX` = empty); power-of-two size.
    slots: Vec<u32>,
}

/// A name of at most 16 bytes as two words (zero padded), so a lookup compares two
/// integers instead of calling memcmp; longer names are keyed by a hash of all bytes.
#[inline(always)]
fn key(s: &[u8]) -> (u64, u64) {
    let n = s.len();
    if n <= 16 {
        // Loaded straight from the name: the zero-padded copy this was built from (a memcpy call
        // into a stack buffer, then two 8-byte loads of it) stalled on store forwarding and made
        // `get` a sixth of the parse thread's samples (perf annotate: 40 % on the load after
        // the copy). Parse of the 3M-line many-process log alone (`examples/strace_speed.rs`,
        // 6 interleaved runs each): median 0.45 -> 0.435 s, 0.72 -> 0.70 CPU-s.
        let w0 = word(&s[..n.min(8)]);
        let w1 = if n > 8 { word(&s[8..]) } else { 0 };
        (w0, w1 | ((n as u64) << 59))
    } else {
        // FNV-1a over every byte, tagged so it never equals a short key.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in s {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        (h, u64::MAX)
    }
}

/// The bytes of `s` (at most 8) as a little-endian word, zero-padded: two overlapping loads
/// (their shared bytes are equal, so OR joins them), no copy.
#[inline(always)]
fn word(s: &[u8]) -> u64 {
    let n = s.len();
    if n >= 8 {
        u64::from_le_bytes(s[..8].try_into().expect("8 bytes"))
    } else if n >= 4 {
        let lo = u32::from_le_bytes(s[..4].try_into().expect("4 bytes")) as u64;
        let hi = u32::from_le_bytes(s[n - 4..].try_into().expect("4 bytes")) as u64;
        lo | (hi << ((n - 4) * 8))
    } else if n > 0 {
        s[0] as u64 | (s[n / 2] as u64) << ((n / 2) * 8) | (s[n - 1] as u64) << ((n - 1) * 8)
    } else {
        0
    }
}

#[inline(always)]
fn hash(k: (u64, u64)) -> u64 {
    (k.0 ^ k.1.rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 7
}

impl Names {
    /// The table seeded with every known syscall.
    pub fn new() -> Self {
        let mut t = Names { names: Vec::new(), keys: Vec::new(), slots: vec![u32::MAX; 512] };
        for (n, sc) in KNOWN {
            t.insert(n.as_bytes(), *sc);
        }
        t
    }

    /// The id and class of `name`, interning it as [`Sc::Other`] on first sight; None
    /// once the table is full.
    #[inline]
    pub fn get(&mut self, name: &[u8]) -> Option<(u32, Sc)> {
        self.get_keyed(key(name), name)
    }

    #[inline]
    fn get_keyed(&mut self, k: (u64, u64), name: &[u8]) -> Option<(u32, Sc)> {
        let mask = self.slots.len() - 1;
        let mut i = hash(k) as usize & mask;
        loop {
            let id = self.slots[i];
            if id == u32::MAX {
                break;
            }
            if self.keys[id as usize] == k {
                let (n, sc) = &self.names[id as usize];
                // Short keys are the name itself; long ones are checked byte for byte.
                if k.1 != u64::MAX || &**n == name {
                    return Some((id, *sc));
                }
            }
            i = (i + 1) & mask;
        }
        if self.names.len() >= MAX_NAMES {
            return None;
        }
        Some((self.insert(name, Sc::Other), Sc::Other))
    }

    fn insert(&mut self, name: &[u8], sc: Sc) -> u32 {
        if (self.names.len() + 1) * 2 > self.slots.len() {
            let mut slots = vec![u32::MAX; self.slots.len() * 2];
            let mask = slots.len() - 1;
            for (id, k) in self.keys.iter().enumerate() {
                let mut i = hash(*k) as usize & mask;
                while slots[i] != u32::MAX {
                    i = (i + 1) & mask;
                }
                slots[i] = id as u32;
            }
            self.slots = slots;
        }
        let id = self.names.len() as u32;
        self.names.push((name.into(), sc));
        self.keys.push(key(name));
        let mask = self.slots.len() - 1;
        let mut i = hash(key(name)) as usize & mask;
        while self.slots[i] != u32::MAX {
            i = (i + 1) & mask;
        }
        self.slots[i] = id;
        id
    }

    /// The bytes of name `id`.
    #[inline]
    pub fn name(&self, id: u32) -> &[u8] {
        &self.names[id as usize].0
    }

    /// Names interned so far.
    pub fn count(&self) -> usize {
        self.names.len()
    }

    /// Copies of the names from id `from` on (for a batch builder on another thread).
    pub fn since(&self, from: usize) -> Vec<Box<[u8]>> {
        self.names[from.min(self.names.len())..].iter().map(|(n, _)| n.clone()).collect()
    }
}

/// Syscall names by id, as a batch builder reads them: the parser's own table, or the copy a
/// builder on another thread keeps (`background.rs`).
pub(super) trait NameOf {
    fn name_of(&self, id: u32) -> &[u8];
}

impl NameOf for Names {
    #[inline]
    fn name_of(&self, id: u32) -> &[u8] {
        self.name(id)
    }
}

impl NameOf for Vec<Box<[u8]>> {
    #[inline]
    fn name_of(&self, id: u32) -> &[u8] {
        &self[id as usize]
    }
}

#[cfg(test)]
mod key_tests {
    use super::*;

    /// The key as it was built before `word`: the name copied into zeroed bytes.
    fn padded_key(s: &[u8]) -> (u64, u64) {
        let mut b = [0u8; 16];
        b[..s.len()].copy_from_slice(s);
        let w0 = u64::from_le_bytes(b[..8].try_into().unwrap());
        let w1 = u64::from_le_bytes(b[8..].try_into().unwrap());
        (w0, w1 | ((s.len() as u64) << 59))
    }

    #[test]
    fn keys_of_short_names_are_their_zero_padded_bytes() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for len in 0..=16 {
            for _ in 0..200 {
                let name: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        (x >> 24) as u8
                    })
                    .collect();
                assert_eq!(key(&name), padded_key(&name), "{name:?}");
            }
        }
        // Names that differ only in length or in their last byte have different keys.
        assert_ne!(key(b"read"), key(b"read\0"));
        assert_ne!(key(b"pread64"), key(b"pread6"));
    }
}
