//! The replay root: every file the replayer touches is reached from its directory fd.
//!
//! Owns [`Root`] and the filesystem calls made under it: opening with `openat2` and
//! `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` (the kernel refuses, with `EXDEV`, any
//! resolution that leaves the root: `..` above it, an absolute symlink, a relative
//! symlink pointing out, /proc magic links), creating directories and prepared files,
//! and removing or renaming entries through a parent directory opened the same way.
//! Paths given here are already mapped and normalised (`paths.rs`); this is the fence
//! that holds even when the root's contents are hostile (a symlink planted in it).
//!
//! Hard links are the one way out that path resolution cannot see: a file planted in the
//! root as a second name of a file outside it resolves beneath the root, and writing it
//! writes the outside file. So no file with more than one link is ever written as found:
//! preparing replaces it by a copy of itself first ([`Root::prepare_file`]), and the
//! runner refuses a write-open of one the trace did not link itself ([`link_count`]).
//! A root that is `/` itself is refused when opened ([`Root::open`]), whatever path
//! (a symlink to `/`) named it.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Size of the chunk prepared files are written with.
const CHUNK: usize = 1 << 20;

/// `struct open_how` of openat2(2) (libc's is non-exhaustive, so not constructible).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// Resolution rules of every open under the root.
const RESOLVE: u64 = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;

/// The errno of the last failed call.
#[inline]
pub fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// `openat2(dirfd, path, {flags, mode, RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS})`: an fd, or
/// the errno (`EXDEV` when the path would leave `dirfd`).
#[inline]
pub fn open_beneath(dirfd: RawFd, path: &CStr, flags: i32, mode: u32) -> Result<RawFd, i32> {
    // openat2 refuses a mode without O_CREAT/O_TMPFILE (EINVAL), unlike openat. O_TMPFILE
    // holds the O_DIRECTORY bit: every opendir would match a test of any of its bits.
    let mode = if flags & libc::O_CREAT != 0 || flags & libc::O_TMPFILE == libc::O_TMPFILE { mode as u64 } else { 0 };
    let how = OpenHow { flags: (flags | libc::O_CLOEXEC) as u32 as u64, mode, resolve: RESOLVE };
    // SAFETY: path is NUL-terminated, how is a valid open_how of the size passed.
    let r = unsafe {
        libc::syscall(libc::SYS_openat2, dirfd, path.as_ptr(), &how as *const OpenHow, std::mem::size_of::<OpenHow>())
    };
    if r < 0 {
        Err(errno())
    } else {
        Ok(r as RawFd)
    }
}

/// A directory every replayed path is resolved beneath.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
    path: PathBuf,
}

/// `path` split into (parent, last component); the parent is "." for a single component.
pub fn split_parent(path: &[u8]) -> (&[u8], &[u8]) {
    match memchr::memrchr(b'/', path) {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (b".", path),
    }
}

fn cstr(p: &[u8]) -> Result<CString, i32> {
    CString::new(p).map_err(|_| libc::EINVAL)
}

/// What preparing a copy's files did.
#[derive(Clone, Debug, Default)]
pub struct Prepared {
    /// Directories created.
    pub dirs: u64,
    /// Files created or resized.
    pub files: u64,
    /// Files already of the right size, kept.
    pub kept: u64,
    /// Bytes written into prepared files.
    pub bytes: u64,
    /// Entries removed (files the trace creates or expects absent, directories it makes).
    pub removed: u64,
    /// Files with more than one link (a second name of a file that may be outside the
    /// root) replaced by a copy of their own before anything wrote them.
    pub unlinked: u64,
    /// Paths that could not be prepared: (path, errno).
    pub errors: Vec<(Vec<u8>, i32)>,
}

/// `fstat(fd)`, or the errno.
pub fn fstat(fd: RawFd) -> Result<libc::stat, i32> {
    // SAFETY: zeroed stat is a valid out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: st is writable; a bad fd fails with EBADF.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(errno());
    }
    Ok(st)
}

/// The link count of the regular file open at `fd` (1 for anything else or on error): more
/// than one means another name, possibly outside the root, reaches the same file.
#[inline]
pub fn link_count(fd: RawFd) -> u64 {
    match fstat(fd) {
        Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFREG => st.st_nlink,
        _ => 1,
    }
}

impl Root {
    /// Opens `path` as a root, creating it (and its parents) first when missing. Refused
    /// when it is the filesystem's root `/` (by identity: a symlink to `/` is `/`).
    pub fn open(path: &Path) -> io::Result<Root> {
        std::fs::create_dir_all(path)?;
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
        // SAFETY: c is NUL-terminated.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just opened and is owned here.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let here = fstat(fd.as_raw_fd()).map_err(io::Error::from_raw_os_error)?;
        let top = std::fs::metadata("/")?;
        use std::os::unix::fs::MetadataExt;
        if here.st_dev == top.dev() && here.st_ino == top.ino() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "is the filesystem's root /: the whole filesystem cannot be a replay root",
            ));
        }
        Ok(Root { fd, path: path.to_path_buf() })
    }

    /// The root's own path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The root's directory fd.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// A root for the subdirectory `name` (created beneath this one when missing).
    pub fn sub(&self, name: &[u8]) -> Result<Root, i32> {
        self.mkdir_all(name)?;
        let fd = open_beneath(self.fd(), &cstr(name)?, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        let mut path = self.path.clone();
        path.push(std::ffi::OsStr::from_bytes(name));
        // SAFETY: fd was just opened and is owned here.
        Ok(Root { fd: unsafe { OwnedFd::from_raw_fd(fd) }, path })
    }

    /// Opens `path` beneath the root.
    pub fn open_at(&self, path: &CStr, flags: i32, mode: u32) -> Result<RawFd, i32> {
        open_beneath(self.fd(), path, flags, mode)
    }

    /// The parent directory of `path` opened beneath the root (`O_PATH`), and the last
    /// component. For `unlinkat`/`renameat` that must not resolve outside the root: the
    /// last component itself is never followed by those calls.
    pub fn parent_of(&self, path: &[u8]) -> Result<(OwnedFd, CString), i32> {
        let (dir, name) = split_parent(path);
        if name.is_empty() || name == b"." || name == b".." {
            return Err(libc::EINVAL);
        }
        let fd = open_beneath(self.fd(), &cstr(dir)?, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        // SAFETY: fd was just opened and is owned here.
        Ok((unsafe { OwnedFd::from_raw_fd(fd) }, cstr(name)?))
    }

    /// `mkdir -p path` beneath the root; returns how many directories were created.
    pub fn mkdir_all(&self, path: &[u8]) -> Result<u64, i32> {
        if path == b"." || path.is_empty() {
            return Ok(0);
        }
        let mut made = 0;
        let mut end = 0;
        loop {
            let next = memchr::memchr(b'/', &path[end..]).map(|i| end + i);
            let upto = next.unwrap_or(path.len());
            let (parent, name) = split_parent(&path[..upto]);
            let pfd = open_beneath(self.fd(), &cstr(parent)?, libc::O_PATH | libc::O_DIRECTORY, 0)?;
            let name = cstr(name)?;
            // SAFETY: pfd is an open directory fd, name NUL-terminated.
            let r = unsafe { libc::mkdirat(pfd, name.as_ptr(), 0o755) };
            let e = errno();
            // SAFETY: pfd is ours.
            unsafe { libc::close(pfd) };
            if r == 0 {
                made += 1;
            } else if e != libc::EEXIST {
                return Err(e);
            }
            match next {
                Some(i) => end = i + 1,
                None => break,
            }
        }
        // It must now be a directory beneath the root (an existing symlink out is refused).
        let fd = open_beneath(self.fd(), &cstr(path)?, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        // SAFETY: fd is ours.
        unsafe { libc::close(fd) };
        Ok(made)
    }

    /// Makes `path` a regular file of exactly `size` bytes of real data (not a sparse hole:
    /// reads must reach the device as the traced reads did). A file already of that size
    /// is kept. With `cold`, its pages are written back and dropped from the page cache.
    /// A file with more than one link is first replaced by a copy of its own (see the
    /// module documentation).
    pub fn prepare_file(&self, path: &[u8], size: u64, cold: bool, out: &mut Prepared) -> Result<(), i32> {
        let fd = self.open_at(&cstr(path)?, libc::O_RDWR | libc::O_CREAT | libc::O_NOFOLLOW, 0o644)?;
        // SAFETY: fd was just opened and is owned here.
        let mut file = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut st = fstat(file.as_raw_fd())?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(libc::EISDIR);
        }
        if st.st_nlink > 1 {
            file = self.unshare(path, &file, &st)?;
            st = fstat(file.as_raw_fd())?;
            out.unlinked += 1;
        }
        let fd = file.as_raw_fd();
        let have = st.st_size as u64;
        if have == size {
            out.kept += 1;
        } else {
            out.files += 1;
            if have > size {
                // SAFETY: fd is open for writing.
                if unsafe { libc::ftruncate(fd, size as i64) } != 0 {
                    return Err(errno());
                }
            } else {
                let chunk = pattern(CHUNK);
                let mut at = have;
                while at < size {
                    let n = ((size - at) as usize).min(CHUNK);
                    // SAFETY: chunk holds at least n bytes.
                    let w = unsafe { libc::pwrite(fd, chunk.as_ptr().cast(), n, at as i64) };
                    if w <= 0 {
                        return Err(if w < 0 { errno() } else { libc::EIO });
                    }
                    at += w as u64;
                    out.bytes += w as u64;
                }
            }
        }
        if cold {
            // SAFETY: fd is open.
            unsafe {
                libc::fdatasync(fd);
                libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED);
            }
        }
        Ok(())
    }

    /// Replaces the file `path` (open at `file`, `st` its stat) by a copy of itself: a new
    /// file in the same directory gets its content and mode, then is renamed over the name.
    /// The other names of the old file (outside the root, perhaps) are left as they were.
    fn unshare(&self, path: &[u8], file: &OwnedFd, st: &libc::stat) -> Result<OwnedFd, i32> {
        let (pfd, name) = self.parent_of(path)?;
        let mut tmp = b".".to_vec();
        tmp.extend_from_slice(name.as_bytes());
        tmp.extend_from_slice(format!(".tracehouse-{}", std::process::id()).as_bytes());
        let tmp = cstr(&tmp)?;
        let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: pfd is an open directory fd, tmp NUL-terminated.
        let nfd = unsafe { libc::openat(pfd.as_raw_fd(), tmp.as_ptr(), flags, st.st_mode & 0o7777) };
        if nfd < 0 {
            return Err(errno());
        }
        // SAFETY: nfd was just opened and is owned here.
        let copy = unsafe { OwnedFd::from_raw_fd(nfd) };
        let undo = |e: i32| {
            // SAFETY: as above.
            unsafe { libc::unlinkat(pfd.as_raw_fd(), tmp.as_ptr(), 0) };
            e
        };
        let mut left = st.st_size as u64;
        let mut off: i64 = 0;
        while left > 0 {
            let n = left.min(1 << 30) as usize;
            // SAFETY: both fds are open; off is a valid in/out offset.
            let r = unsafe {
                libc::copy_file_range(file.as_raw_fd(), &mut off, copy.as_raw_fd(), std::ptr::null_mut(), n, 0)
            };
            if r < 0 {
                return Err(undo(errno()));
            }
            if r == 0 {
                break;
            }
            left -= r as u64;
        }
        // SAFETY: as above, both names in pfd.
        if unsafe { libc::renameat(pfd.as_raw_fd(), tmp.as_ptr(), pfd.as_raw_fd(), name.as_ptr()) } != 0 {
            return Err(undo(errno()));
        }
        Ok(copy)
    }

    /// Removes `path` when present: a file or symlink, or a directory with everything in
    /// it (a directory the trace makes must not exist before it). Nothing is followed: the
    /// entries are removed through their parent directory, opened beneath the root.
    pub fn remove(&self, path: &[u8]) -> Result<bool, i32> {
        let (pfd, name) = match self.parent_of(path) {
            Ok(x) => x,
            Err(libc::ENOENT) => return Ok(false),
            Err(e) => return Err(e),
        };
        match remove_entry(pfd.as_raw_fd(), &name, 0) {
            Ok(()) => Ok(true),
            Err(libc::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Removes `name` in the directory `dir`: unlinked, or (a directory) emptied and removed.
/// `depth` bounds the recursion.
fn remove_entry(dir: RawFd, name: &CStr, depth: u32) -> Result<(), i32> {
    // SAFETY: dir is an open directory fd, name NUL-terminated.
    if unsafe { libc::unlinkat(dir, name.as_ptr(), 0) } == 0 {
        return Ok(());
    }
    let e = errno();
    if e != libc::EISDIR && e != libc::EPERM {
        return Err(e);
    }
    if depth > 256 {
        return Err(libc::ELOOP);
    }
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: as above.
    let fd = unsafe { libc::openat(dir, name.as_ptr(), flags) };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: fd is a directory fd we own; fdopendir takes it over (closedir closes it).
    let d = unsafe { libc::fdopendir(fd) };
    if d.is_null() {
        let e = errno();
        // SAFETY: fd is ours (fdopendir failed).
        unsafe { libc::close(fd) };
        return Err(e);
    }
    let mut names = Vec::new();
    loop {
        // SAFETY: d is an open DIR stream.
        let ent = unsafe { libc::readdir(d) };
        if ent.is_null() {
            break;
        }
        // SAFETY: readdir returns a valid dirent with a NUL-terminated d_name.
        let n = unsafe { CStr::from_ptr((*ent).d_name.as_ptr()) };
        if n.to_bytes() != b"." && n.to_bytes() != b".." {
            names.push(n.to_owned());
        }
    }
    let r = names.iter().try_for_each(|n| remove_entry(fd, n, depth + 1));
    // SAFETY: d is open; closing it closes fd.
    unsafe { libc::closedir(d) };
    r?;
    // SAFETY: as above.
    if unsafe { libc::unlinkat(dir, name.as_ptr(), libc::AT_REMOVEDIR) } != 0 {
        return Err(errno());
    }
    Ok(())
}

/// `n` bytes of the fill pattern (printable, not zeros: no filesystem can elide them).
pub fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| b"tracehouse replay\n"[i % 18]).collect()
}
