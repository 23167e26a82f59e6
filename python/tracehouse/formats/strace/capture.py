"""`tracehouse capture -- CMD ...`: run a command under strace and stream its IO trace into the store.

Owns starting strace with the flags an IO replayer needs, the FIFO the trace
streams through (strace writes, we read and parse while the command runs: no
temporary file read afterwards), and the capture summary. Parsing is the strace
importer's `StraceSink` (Rust parser, batches appended as they complete).

Why a FIFO and not a pipe: strace's output file must not be inherited by the
traced command (a pipe's write end passed to strace would be, and the command's
children would keep it open after strace ends). strace opens a FIFO by name
itself, close-on-exec.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import BadInput, NotFound
from .importer import StraceReport, StraceSink

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
READ = 1 << 20


@dataclass
class CaptureReport:
    """What a capture did: the trace, the command's exit status, and the import report."""

    trace: str
    command: list[str]
    exit_status: int | None
    seconds: float
    strace: list[str]
    report: StraceReport
    interrupted: bool = False
    summary: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "trace": self.trace,
            "command": self.command,
            "exit_status": self.exit_status,
            "seconds": round(self.seconds, 3),
            "strace": self.strace,
            "interrupted": self.interrupted,
            "import": self.report.to_json(),
            "summary": self.summary,
        }


def strace_binary() -> str:
    path = shutil.which("strace")
    if path is None:
        raise NotFound("strace is not installed (Debian/Ubuntu: apt-get install strace)")
    return path


def default_name(cmd: list[str], taken: set[str] = frozenset()) -> str:
    """`<program>-<local time to the second>`, with `-2`, `-3`, ... when two captures start in one second."""
    base = "".join(c if c.isalnum() or c in "_.-" else "_" for c in Path(cmd[0]).name)[:80] or "cmd"
    name = f"{base}-{time.strftime('%Y%m%d-%H%M%S')}"
    n = 1
    while (name if n == 1 else f"{name}-{n}") in taken:
        n += 1
    return name if n == 1 else f"{name}-{n}"


def capture(
    store: Store,
    cmd: list[str],
    name: str | None = None,
    *,
    all_syscalls: bool = False,
    description: str = "",
    progress: Callable[[int], None] | None = None,
    batch_rows: int = 1 << 16,
    stdout: int | None = None,
) -> CaptureReport:
    """Run `cmd` under strace, streaming its trace into a new trace `name` of `store`.

    The command's stdin, stdout and stderr are ours; `stdout`: a file descriptor for the
    command's stdout instead (`capture --json` gives it stderr, so that its own stdout holds
    nothing but the JSON). Returns when the command and
    strace have ended and the trace is registered. Ctrl-C reaches the command (and
    strace, which then detaches): what was traced until then is kept.
    """
    if not cmd:
        raise BadInput("no command to capture", expected="tracehouse capture [--name N] -- CMD [ARG ...]")
    strace = strace_binary()
    name = name or default_name(cmd, {t.name for t in store.traces()})
    args = [strace, *STRACE_FLAGS]
    if not all_syscalls:
        args += ["-e", f"trace={IO_SYSCALLS}"]
    with tempfile.TemporaryDirectory(prefix="tracehouse-capture-") as tmp:
        fifo = Path(tmp) / "strace.fifo"
        os.mkfifo(fifo, 0o600)
        argv = [*args, "-o", str(fifo), "--", *cmd]
        sink = StraceSink(
            store,
            name,
            ["strace"],
            [None],
            description=description or f"capture of {' '.join(cmd)}",
            metadata={"command": " ".join(cmd), "strace": " ".join(argv[1 : -len(cmd) - 1])},
            batch_rows=batch_rows,
        )
        t0 = time.perf_counter()
        proc = None
        interrupted = False
        try:
            # Non-blocking open: it cannot hang if strace dies before opening its end.
            fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
            with store.bulk(name):  # no compaction while the capture streams in
                try:
                    proc = subprocess.Popen(argv, stdout=stdout)
                    interrupted = _pump(fd, proc, sink, progress)
                finally:
                    os.close(fd)
                status = proc.wait()
                try:
                    report = sink.finish()
                except BadInput:
                    if sum(sink.parser.stats["events"].values()) == 0:
                        raise BadInput(
                            f"strace exited with {status} and traced nothing",
                            file=cmd[0],
                            expected="a program that runs (strace says why above)",
                        ) from None
                    raise
        except BaseException as e:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
            sink.abort(e)  # raises
    return CaptureReport(
        name,
        list(cmd),
        status,
        time.perf_counter() - t0,
        argv[: -len(cmd) - 1],
        report,
        interrupted=interrupted,
        summary=summarize(store, name),
    )


def _pump(fd: int, proc: subprocess.Popen, sink: StraceSink, progress) -> bool:
    """Feeds what strace writes to the parser until strace closes the FIFO; True if interrupted."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    seen = 0
    opened = False
    interrupted = False
    while True:
        try:
            if not poller.poll(100):
                if not opened and proc.poll() is not None:
                    return interrupted  # strace ended without ever opening its output
                continue
            chunk = os.read(fd, READ)
        except KeyboardInterrupt:
            # The command and strace got the same SIGINT: keep what they still write.
            interrupted = True
            continue
        except BlockingIOError:
            continue
        if not chunk:
            if opened:
                return interrupted  # EOF: strace closed its end
            # No writer yet (a FIFO with no writer reads as empty): wait for strace.
            if proc.poll() is not None:
                return interrupted
            time.sleep(0.005)
            continue
        opened = True
        lines = sink.feed(chunk)
        if progress is not None and lines != seen:
            progress(lines - seen)
            seen = lines


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
