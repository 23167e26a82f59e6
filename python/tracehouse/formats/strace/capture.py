"""strace's part of `tracehouse capture` (`formats/capture.py` runs it): the flags strace runs
with and the capture summary.

The flags are what an IO replayer needs; the summary is calls and time by syscall and IO by
file, answered by SQL over the captured trace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...store import Store

# Every thread and child (-f), epoch stamps (-ttt), time in each call (-T), fd paths
# (-y), no buffer contents (-s0: the replayer needs sizes, not data), no attach
# messages on the terminal (-q).
STRACE_FLAGS = ("-f", "-q", "-ttt", "-T", "-y", "-s0")
# The syscalls traced by default: everything on fds (read, write, pread64, lseek, fsync,
# close, dup, fcntl, mmap ...), on paths (open, stat, unlink, rename, execve ...) and
# process structure (clone, fork, exit, wait). Leaves out futex, signals, memory
# management and the like: less overhead on the traced program, smaller traces.
IO_SYSCALLS = "%desc,%file,%process"


# Calls that read into the process, write from it, or move bytes between two fds without
# passing them through it (counted as read from the source `path` and written to `path2`).
_READS = "('read', 'pread64', 'readv', 'preadv', 'preadv2')"
_WRITES = "('write', 'pwrite64', 'writev', 'pwritev', 'pwritev2')"
_COPIES = "('copy_file_range', 'sendfile', 'sendfile64', 'splice', 'tee')"


def summarize(store: Store, trace: str, top: int = 10) -> dict:
    """Totals of a strace trace, answered by SQL: calls and time by syscall, IO by file."""
    q = f'"{trace}"'
    by_call = store.sql(f"""
        SELECT name, count(*) AS calls, count(errno) AS errors, sum(dur)::BIGINT AS dur_ns,
               sum(ret) FILTER ((name IN {_READS} OR name IN {_COPIES}) AND ret > 0)::BIGINT AS bytes_read,
               sum(ret) FILTER ((name IN {_WRITES} OR name IN {_COPIES}) AND ret > 0)::BIGINT AS bytes_written
        FROM {q}.syscall GROUP BY name ORDER BY dur_ns DESC, calls DESC""").to_pylist()
    by_file = store.sql(f"""
        WITH io AS (
            SELECT path, dur,
                   CASE WHEN (name IN {_READS} OR name IN {_COPIES}) AND ret > 0 THEN ret END AS r,
                   CASE WHEN name IN {_WRITES} AND ret > 0 THEN ret END AS w
            FROM {q}.syscall WHERE path LIKE '/%' AND fd IS NOT NULL
            UNION ALL  -- the destination side of a copy: a call on that file too, its time on the source
            SELECT path2, 0, NULL, CASE WHEN ret > 0 THEN ret END
            FROM {q}.syscall WHERE name IN {_COPIES} AND path2 LIKE '/%' AND fd2 IS NOT NULL)
        SELECT path, count(*) AS calls, sum(dur)::BIGINT AS dur_ns,
               coalesce(sum(r), 0)::BIGINT AS bytes_read, coalesce(sum(w), 0)::BIGINT AS bytes_written
        FROM io GROUP BY path ORDER BY bytes_read + bytes_written DESC, calls DESC LIMIT {int(top)}""").to_pylist()
    producers = store.producers(trace)
    return {
        "processes": sum(p["kind"] == "process" for p in producers),
        "threads": sum(p["kind"] == "thread" for p in producers),
        "syscalls": sum(r["calls"] for r in by_call),
        "bytes_read": sum(r["bytes_read"] or 0 for r in by_call),
        "bytes_written": sum(r["bytes_written"] or 0 for r in by_call),
        "by_syscall": by_call[:top],
        "by_file": by_file,
    }
