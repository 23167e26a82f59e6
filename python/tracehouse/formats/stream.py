"""Importing from a pipe: `strace -o /dev/stdout CMD | tracehouse import strace -`,
`bpftrace -f json SCRIPT | tracehouse import bpftrace - ...` (also `/dev/stdin` or a FIFO).

Owns telling a stream from a file (`is_stream`: `-`, or anything that is not a regular file
or a directory), reading it as the data arrives (`arrivals`: `os.read` hands over whatever
the pipe holds, it does not wait for a full buffer) and the commit rhythm: what arrived is
committed (parsed rows cut into batches, appended, checkpointed into registered segments
that every reader sees) at most `COMMIT_S` after its first byte arrived, and at the end.
A slow producer's rows are thus queryable while the pipe is still open; a fast one's are
committed once a second, not once a line (a checkpoint writes a Parquet file per event type).

While a stream is imported its trace is marked incomplete (th.traces.state); the end of
the stream completes it. If the import stops on an error, what was committed stays (readers
may have seen it; the pipe cannot be read again) and the trace keeps its incomplete mark;
with `--strict` a bad line removes the trace, as for a file. Ctrl-C does not stop the
reading: the producer on the other end got the same signal and the data it still writes
(bpftrace prints its maps when it stops) is read to the end; a second Ctrl-C stops it.
"""

from __future__ import annotations

import os
import select
import stat
import time
from collections.abc import Iterator
from typing import NoReturn

COMMIT_S = 1.0
READ = 1 << 20


def is_stream(path: str) -> bool:
    """`-`, or a path that is neither a regular file nor a directory (a pipe, a FIFO,
    /dev/stdin when piped, a terminal)."""
    if path == "-":
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def open_stream(path: str) -> tuple[int, str]:
    """(file descriptor, name for the import report) of a stream path; `-` is stdin."""
    if path == "-":
        return 0, "stdin"
    return os.open(path, os.O_RDONLY), path


def arrivals(fd: int, commit_s: float = COMMIT_S) -> Iterator[bytes | None]:
    """The stream's bytes as they arrive, and None whenever a commit is due: `commit_s` after
    the first byte not yet committed arrived (and then at once if the next read came later).
    Ends at end of file."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    due: float | None = None
    interrupted = False
    while True:
        try:
            wait = None if due is None else max(0.0, due - time.monotonic()) * 1000
            if not poller.poll(wait):
                yield None
                due = None
                continue
            chunk = os.read(fd, READ)
        except KeyboardInterrupt:
            if interrupted:
                return
            interrupted = True  # the producer stops too: read what it still writes
            continue
        if not chunk:
            return
        yield chunk
        now = time.monotonic()
        if due is None:
            due = now + commit_s
        elif now >= due:
            yield None
            due = None


def stopped(store, trace: str, error: BaseException, *, keep: bool) -> NoReturn:
    """An import from a stream failed: keep what was committed (the trace stays marked
    incomplete) and raise `error`; with `keep` False (strict mode) remove the trace."""
    if keep:
        try:
            store.flush(trace)
        except Exception:  # noqa: BLE001 - nothing more can be kept: the import's error is the one to report
            store.rollback_import(trace, error)
        raise error
    store.rollback_import(trace, error)
