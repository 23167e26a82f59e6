"""The strace format (seed 002): the syscalls of traced processes, typed for IO replay.

Owns the declaration of the three strace event types. The Rust parser
(`tracehouse._core.StraceParser`, src/formats/strace/mod.rs) emits batches with exactly
these columns (tests/test_strace.py checks the schemas match). Producers are
processes (kind "process", parent: the forking process) and their threads
(kind "thread", parent: their process); strace's pid column is a thread id.

Decisions:
- One span type `syscall` for every syscall, typed columns for what an IO replayer
  and a performance engineer ask (which file, where, how much, how long, did it
  fail), instead of one type per syscall: a trace is one table to scan, and a
  syscall we do not decode is still kept (its arguments as text in `args`).
- `pos` is the file offset the call operated at: explicit for pread/pwrite/lseek/
  mmap, the tracked file position for read/write/readv/writev (null when unknown:
  fd opened before the trace, O_APPEND, pipes and sockets). Not `offset`: that is
  an SQL keyword and would need quoting in every query.
- `path` comes from `-y` when present, else from the fd table the parser rebuilds
  per process (open/dup/fork/close/execve), else from the path argument made
  absolute against its directory fd or the working directory when known.
- Calls that move bytes between two fds (copy_file_range, splice, sendfile, tee)
  are typed like a read on the source and a write on the destination in one row:
  `fd`/`path`/`pos` the source, `fd2`/`path2`/`pos2` the destination, `size` the
  length asked, `ret` the bytes moved. New columns go at the end: a replayer's
  queries over the older ones keep working.
- `path_arg` keeps what the program asked for (`src/a.bin`) beside the resolved
  `path` (`/home/u/src/a.bin` from -y or the working directory).
- `= ?` results (exit, a killed thread) and calls whose `<... resumed>` never came
  are kept with a null `ret`; signals and exits are instants of their own types.
"""

from __future__ import annotations

from ...schema import Column, EventType

FORMAT = "strace"
DESCRIPTION = "strace output (-f/-ff, -t/-tt/-ttt/--timestamps, -T, -y): syscalls, signals, exits"

EVENT_TYPES = (
    EventType(
        "syscall",
        "span",
        (
            Column("name", "string", "", "syscall name as strace printed it (read, pwrite64, openat, ...)"),
            Column("fd", "int64", "fd", "file descriptor operated on (the old fd for dup*, the dirfd of *at calls "
                   "on AT_EMPTY_PATH, the source of copy calls); null when the call has none"),
            Column("path", "string", "path", "file the call is about: -y path, fd table path, or the path argument "
                   "made absolute when the directory is known; unescaped (as printed if not UTF-8)"),
            Column("path2", "string", "path", "second path: the target of rename/link/symlink, the destination file of "
                   "copy_file_range/splice/sendfile/tee"),
            Column("pos", "int64", "B", "file offset the call operated at: explicit (pread/pwrite/preadv), the "
                   "tracked file position (read/write/readv/writev), lseek's offset argument, mmap's file offset"),
            Column("size", "int64", "B", "bytes requested (count, iovec total, length)"),
            Column("ret", "int64", "", "return value (bytes transferred, new fd, new position, address...); null "
                   "for '= ?' and calls that never resumed"),
            Column("errno", "string", "", "error name of a failed call (ENOENT, EAGAIN, ...)"),
            Column("flags", "string", "", "open flags, lseek whence, fcntl command and argument, mmap prot and "
                   "flags, dup3/renameat2/fallocate/sync_file_range flags, as printed"),
            Column("args", "string", "", "arguments as strace printed them, for syscalls whose arguments are not "
                   "all in typed columns (null for the typed IO calls)"),
            Column("fd2", "int64", "fd", "destination fd of copy_file_range/splice/sendfile/tee (fd is the source)"),
            Column("pos2", "int64", "B", "file offset at the destination of copy_file_range/splice/sendfile: "
                   "explicit, else the tracked position (pos is the source's)"),
            Column("path_arg", "string", "path", "the path argument as the program passed it (relative, through "
                   "symlinks), unescaped; path holds it resolved (-y, or made absolute)"),
            Column("path2_arg", "string", "path", "the second path argument as passed (rename/link/symlink target)"),
        ),
        "one syscall: ts is its start (the first line of an <unfinished ...> pair), dur the -T time "
        "(else last line minus first line, 0 for a one-line call without -T)",
    ),
    EventType(
        "signal",
        "instant",
        (
            Column("signal", "string", "", "signal name (SIGCHLD, ...)"),
            Column("code", "string", "", "si_code (CLD_EXITED, SI_USER, ...); 'stopped' for '--- stopped by SIG ---'"),
            Column("sender", "int64", "pid", "si_pid: pid of the sending process, when printed"),
            Column("info", "string", "", "the siginfo as printed ({si_signo=..., ...})"),
        ),
        "a signal delivered to the thread ('--- SIG... ---' line)",
    ),
    EventType(
        "exit",
        "instant",
        (
            Column("status", "int64", "", "exit status ('+++ exited with N +++'); null when killed"),
            Column("signal", "string", "", "signal that killed it ('+++ killed by SIG +++')"),
            Column("core", "bool", "", "a core was dumped"),
        ),
        "the thread or process ended ('+++ ... +++' line)",
    ),
)
