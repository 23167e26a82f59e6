//! The `strace` event types, declared once (see `formats/decl.rs`): the parser builds its batches
//! from them (`rows.rs`) and Python reads them through `_core.format_declarations()`.
//! Why one `syscall` type with typed IO columns: `python/tracehouse/formats/strace/__init__.py`.

use crate::formats::decl::types::{B, I, S};
use crate::formats::decl::{param, EventTypeDecl, FormatDecl, Profile, SpanProfile};

/// One syscall.
pub const SYSCALL: EventTypeDecl = EventTypeDecl {
    name: "syscall",
    kind: "span",
    params: &[
        param("name", S, "text", "syscall name as strace printed it (read, pwrite64, openat, ...)"),
        param(
            "fd",
            I,
            "fd",
            "file descriptor operated on (the old fd for dup*, the dirfd of *at calls on \
             AT_EMPTY_PATH, the source of copy calls); null when the call has none",
        ),
        param(
            "path",
            S,
            "path",
            "file the call is about: -y path, fd table path, or the path argument made \
             absolute when the directory is known; unescaped (as printed if not UTF-8)",
        ),
        param(
            "path2",
            S,
            "path",
            "second path: the target of rename/link/symlink, the destination file of \
             copy_file_range/splice/sendfile/tee",
        ),
        param(
            "pos",
            I,
            "B",
            "file offset the call operated at: explicit (pread/pwrite/preadv), the tracked file \
             position (read/write/readv/writev), lseek's offset argument, mmap's file offset",
        ),
        param("size", I, "B", "bytes requested (count, iovec total, length)"),
        param(
            "ret",
            I,
            "as returned",
            "return value (bytes transferred, new fd, new position, address...); null \
             for '= ?' and calls that never resumed",
        ),
        param("errno", S, "text", "error name of a failed call (ENOENT, EAGAIN, ...)"),
        param(
            "flags",
            S,
            "as printed",
            "open flags, lseek whence, fcntl command and argument, mmap prot and \
             flags, dup3/renameat2/fallocate/sync_file_range flags, as printed",
        ),
        param(
            "args",
            S,
            "as printed",
            "arguments as strace printed them, for syscalls whose arguments are not \
             all in typed columns (null for the typed IO calls)",
        ),
        param("fd2", I, "fd", "destination fd of copy_file_range/splice/sendfile/tee (fd is the source)"),
        param(
            "pos2",
            I,
            "B",
            "file offset at the destination of copy_file_range/splice/sendfile: explicit, else \
             the tracked position (pos is the source's)",
        ),
        param(
            "path_arg",
            S,
            "path",
            "the path argument as the program passed it (relative, through symlinks), \
             unescaped; path holds it resolved (-y, or made absolute)",
        ),
        param("path2_arg", S, "path", "the second path argument as passed (rename/link/symlink target)"),
    ],
    doc: "one syscall: ts is its start (the first line of an <unfinished ...> pair), dur the -T time (else last \
          line minus first line, 0 for a one-line call without -T)",
};

/// A signal delivered.
pub const SIGNAL: EventTypeDecl = EventTypeDecl {
    name: "signal",
    kind: "instant",
    params: &[
        param("signal", S, "text", "signal name (SIGCHLD, ...)"),
        param("code", S, "text", "si_code (CLD_EXITED, SI_USER, ...); 'stopped' for '--- stopped by SIG ---'"),
        param("sender", I, "pid", "si_pid: pid of the sending process, when printed"),
        param("info", S, "as printed", "the siginfo as printed ({si_signo=..., ...})"),
    ],
    doc: "a signal delivered to the thread ('--- SIG... ---' line)",
};

/// A thread or process ended.
pub const EXIT: EventTypeDecl = EventTypeDecl {
    name: "exit",
    kind: "instant",
    params: &[
        param("status", I, "exit code", "exit status ('+++ exited with N +++'); null when killed"),
        param("signal", S, "text", "signal that killed it ('+++ killed by SIG +++')"),
        param("core", B, "flag", "a core was dumped"),
    ],
    doc: "the thread or process ended ('+++ ... +++' line)",
};

/// The `strace` format.
pub const STRACE: FormatDecl = FormatDecl {
    name: "strace",
    description: "strace output (-f/-ff, -t/-tt/-ttt/--timestamps, -T, -y): syscalls, signals, exits",
    event_types: &[SYSCALL, SIGNAL, EXIT],
    // The sniffer is the importer's (`formats/strace/importer.py`); strace has its own parser glue
    // (several -ff sources merged, the file parsed on a thread of its own): `src/py/strace.rs`.
    priority: 80,
    profile: Profile {
        spans: Some(SpanProfile { begin: "syscall", end: None, key: None, name: Some("name") }),
        labels: &[("syscall", "name", None), ("signal", "signal", None)],
        ..Profile::NONE
    },
    examples: &[
        (
            "time per syscall",
            // ret counts bytes only for the calls that move data (mmap returns an address, openat an fd)
            "SELECT name, count(*) AS calls, sum(dur) / 1e6 AS ms,\n\
             sum(ret) FILTER (WHERE ret > 0 AND name IN ('read', 'pread64', 'readv', 'preadv', 'preadv2', 'recvfrom', 'recvmsg',\n\
             'write', 'pwrite64', 'writev', 'pwritev', 'pwritev2', 'sendto', 'sendmsg', 'sendfile', 'splice', 'copy_file_range')) AS bytes\n\
             FROM {t}.syscall GROUP BY name ORDER BY ms DESC",
        ),
        (
            "bytes read and written per file",
            "SELECT path, sum(ret) FILTER (WHERE name IN ('read', 'pread64', 'readv', 'preadv', 'preadv2', 'recvfrom', 'recvmsg')) AS read_bytes,\n\
             sum(ret) FILTER (WHERE name IN ('write', 'pwrite64', 'writev', 'pwritev', 'pwritev2', 'sendto', 'sendmsg', 'sendfile', 'splice', 'copy_file_range')) AS written_bytes\n\
             FROM {t}.syscall WHERE path IS NOT NULL AND ret > 0\n\
             GROUP BY path ORDER BY written_bytes DESC NULLS LAST LIMIT 20",
        ),
        (
            "slowest calls",
            "SELECT ts, producer, name, path, size, ret, dur / 1e3 AS us\n\
             FROM {t}.syscall ORDER BY dur DESC LIMIT 20",
        ),
        (
            "failed calls",
            "SELECT name, errno, count(*) AS calls FROM {t}.syscall\n\
             WHERE errno IS NOT NULL GROUP BY ALL ORDER BY calls DESC",
        ),
    ],
    ..FormatDecl::BASE
};
