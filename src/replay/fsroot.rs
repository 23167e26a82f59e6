//! The replay root: every file the replayer touches is reached from its directory fd.
//!
//! Owns [`Root`] and the filesystem calls made under it: opening with `openat2` and
//! `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` (the kernel refuses, with `EXDEV`, any
//! resolution that leaves the root: `..` above it, an absolute symlink, a relative
//! symlink pointing out, /proc magic links), creating directories and prepared files,
//! and removing or renaming entries through a parent directory opened the same way.
//! Paths given here are already mapped and normalised (`paths.rs`); this is the fence
//! that holds even when the root's contents are hostile (a symlink planted in it).

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
    // openat2 refuses a mode without O_CREAT/O_TMPFILE (EINVAL), unlike openat.
    let mode = if flags & (libc::O_CREAT | libc::O_TMPFILE) != 0 { mode as u64 } else { 0 };
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
    /// Entries removed (files the trace creates or expects absent).
    pub removed: u64,
    /// Paths that could not be prepared: (path, errno).
    pub errors: Vec<(Vec<u8>, i32)>,
}

impl Root {
    /// Opens `path` as a root, creating it (and its parents) first when missing.
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
        Ok(Root { fd: unsafe { OwnedFd::from_raw_fd(fd) }, path: path.to_path_buf() })
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
    pub fn prepare_file(&self, path: &[u8], size: u64, cold: bool, out: &mut Prepared) -> Result<(), i32> {
        let fd = self.open_at(&cstr(path)?, libc::O_RDWR | libc::O_CREAT | libc::O_NOFOLLOW, 0o644)?;
        // SAFETY: fd was just opened and is owned here.
        let file = unsafe { OwnedFd::from_raw_fd(fd) };
        let fd = file.as_raw_fd();
        // SAFETY: zeroed stat is a valid out-parameter.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fd is open, st is writable.
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return Err(errno());
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(libc::EISDIR);
        }
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

    /// Removes the file (or symlink) `path` when present. Directories are left alone.
    pub fn remove(&self, path: &[u8]) -> Result<bool, i32> {
        let (pfd, name) = match self.parent_of(path) {
            Ok(x) => x,
            Err(libc::ENOENT) => return Ok(false),
            Err(e) => return Err(e),
        };
        // SAFETY: pfd is an open directory fd, name NUL-terminated.
        let r = unsafe { libc::unlinkat(pfd.as_raw_fd(), name.as_ptr(), 0) };
        if r == 0 {
            return Ok(true);
        }
        match errno() {
            libc::ENOENT => Ok(false),
            libc::EISDIR => Ok(false),
            e => Err(e),
        }
    }
}

/// `n` bytes of the fill pattern (printable, not zeros: no filesystem can elide them).
pub fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| b"tracehouse replay\n"[i % 18]).collect()
}
