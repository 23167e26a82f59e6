"""`tracehouse capture --tool strace|bpftrace|perf ... -- CMD`: run a command under a live tracer and
stream what the tracer writes into a new trace while it writes.

Owns starting each tool, the FIFO or pipe its output comes through, reading that output as it
arrives (no temporary file: the bytes go from the tool to the format's streaming parser), the
commit rhythm (the pipe import's, `formats/stream.py`: what arrived is registered at most
`COMMIT_S` after its first byte came, so a reader sees the rows while the command runs), Ctrl-C,
and the capture report. Parsing is each format's own streaming import: strace's `StraceSink`,
bpftrace's probe importer (its `--pattern`/`--span`), perf's parser.

The tools' command lines:

- strace: `strace -f -q -ttt -T -y -s0 [-e trace=%desc,%file,%process] -o FIFO -- CMD`
  (`formats/strace/capture.py` says why these flags).
- bpftrace: `bpftrace -f json -B line -o FIFO -c CMD SCRIPT`; bpftrace splits `-c` at blanks and honours
  no quotes, so a command with a blank in a word runs as `-c 'sh RUN'`, RUN a one-line script
  `exec CMD` (the exec keeps `cpid` the command's pid).
- perf: `perf record -q -g -F 999 --no-buffering -o - -- CMD | perf script -i - -F +pid`, perf script's
  stdout a pipe to us. perf reads a file only as a whole (its header is written last), a pipe
  in its pipe format as it comes; in that mode perf record sends the command's stdout to
  stderr (perf's rule, kept).

Why a FIFO for strace and bpftrace: the command must not inherit the tool's output as its
stdout. strace opens the FIFO close-on-exec; bpftrace's child inherits it (fd 3), so a
daemon the command leaves behind can hold it open: the reading ends at end of file or once
the writing tool has exited and the pipe holds nothing more, whichever comes first.

Ending and errors: the command's exit status is the capture's (strace and perf report it;
bpftrace does not pass it on: None). Ctrl-C reaches the command and the tools (the terminal
signals the whole process group; a SIGINT sent to this process alone is not passed on: a tool
signalled twice, as perf record, dies before it has written all): the tool writes what it still has (bpftrace prints its maps) and the capture completes with it,
marked `interrupted`; perf script runs in a session of its own so that it reads perf record's
output to the end. A second Ctrl-C, or an error while reading (a full disk, `--strict`), stops
the tools at once: what was committed stays and the trace keeps its incomplete mark
(th.traces.state = 'incomplete'), as a pipe import does. A tool that is not installed is an
error before anything is made; a tool that ran but wrote nothing (a bad script, no permission
to trace) removes the trace and says so (the tool's own message is on stderr above).
"""

from __future__ import annotations

import os
import select
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BadInput, NotFound
from .stream import COMMIT_S

if TYPE_CHECKING:
    from ..store import Store
    from .report import ImportReport

READ = 1 << 20
TOOLS = ("strace", "bpftrace", "perf")
INSTALL = {
    "strace": "apt-get install strace",
    "bpftrace": "apt-get install bpftrace",
    "perf": "apt-get install linux-perf (Ubuntu: linux-tools-generic)",
}
# perf record's defaults for a capture: call stacks, 999 samples a second (perf's own default
# of 4,000 makes four times the text for perf script to print and us to parse), and
# --no-buffering: perf record otherwise reads its ring buffers only when they are half full, so
# a command that computes and then waits holds its samples back (1 s of CPU then 2 s idle: 3 KB
# of the 174 KB recorded had reached the pipe; with it, 135 KB).
PERF_RECORD = ("-q", "-g", "-F", "999", "--no-buffering")
PERF_SCRIPT = ("-F", "+pid")


@dataclass
class CaptureReport:
    """What a capture did: the trace, the command's exit status, the tools' and the import's report."""

    trace: str
    tool: str
    command: list[str]
    exit_status: int | None  # the command's; None: it did not run, or the tool does not say (bpftrace)
    tool_status: int | None  # the tool's own (perf record's, bpftrace's, strace's)
    seconds: float
    argv: list[list[str]]  # the tools' command lines, without the traced command
    report: ImportReport
    interrupted: bool = False
    summary: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "trace": self.trace,
            "tool": self.tool,
            "command": self.command,
            "exit_status": self.exit_status,
            "tool_status": self.tool_status,
            "seconds": round(self.seconds, 3),
            "tool_argv": self.argv,
            "interrupted": self.interrupted,
            "import": self.report.to_json(),
            "summary": self.summary,
        }


def tool_binary(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise NotFound(f"{tool} is not installed ({INSTALL.get(tool, 'install it')}); nothing was captured")
    return path


def default_name(cmd: list[str], taken: set[str] = frozenset()) -> str:
    """`<program>-<local time to the second>`, with `-2`, `-3`, ... when two captures start in one second."""
    base = "".join(c if c.isalnum() or c in "_.-" else "_" for c in Path(cmd[0]).name)[:80] or "cmd"
    name = f"{base}-{time.strftime('%Y%m%d-%H%M%S')}"
    n = 1
    while (name if n == 1 else f"{name}-{n}") in taken:
        n += 1
    return name if n == 1 else f"{name}-{n}"


class LiveTool:
    """The processes of one capture and their output read as it arrives.

    `start()` makes the tool processes and returns (their Popens, the last one being the
    writer of the output, and the output's read end, non-blocking). `chunks()` starts them
    on its first step, so the trace exists (made by the importer before it reads) before the
    command runs, and nothing runs when making the trace fails."""

    def __init__(self, tool: str, start: Callable[[], tuple[list[subprocess.Popen], int]], commit_s: float = COMMIT_S):
        self.tool = tool
        self._start = start
        self.commit_s = commit_s
        self.procs: list[subprocess.Popen] = []
        self.fd: int | None = None
        self.interrupted = False
        self.bytes = 0

    def chunks(self) -> Iterator[bytes | None]:
        """The tool's output as it arrives, None whenever a commit is due (`stream.arrivals`)."""
        with self._sigint():
            self.procs, self.fd = self._start()
            try:
                yield from self._read()
                self.wait()
            finally:
                self.stop()

    def _read(self) -> Iterator[bytes | None]:
        fd, writer = self.fd, self.procs[-1]
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        due: float | None = None
        opened = False
        while True:
            wait = 100 if due is None else max(0, min(100, (due - time.monotonic()) * 1000))
            ready = poller.poll(wait)
            if due is not None and time.monotonic() >= due:
                yield None
                due = None
            exited = writer.poll() is not None
            if not ready and not exited:
                continue
            chunk = self._read_some(fd)
            if chunk is None:  # nothing there now
                if exited:
                    return  # all the tool wrote has been read; its inheritors keep the pipe open
                continue
            if not chunk:
                if opened or exited:
                    return  # end of file (or a FIFO the tool never opened)
                time.sleep(0.005)  # a FIFO with no writer yet reads as empty: wait for the tool
                continue
            opened = True
            self.bytes += len(chunk)
            yield chunk
            if due is None:
                due = time.monotonic() + self.commit_s

    @staticmethod
    def _read_some(fd: int) -> bytes | None:
        try:
            return os.read(fd, READ)
        except BlockingIOError:
            return None

    def wait(self) -> None:
        for p in self.procs:
            p.wait()

    def stop(self) -> None:
        """Ends what still runs (the error path: a second Ctrl-C, a failed import) and closes the output."""
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    @contextmanager
    def _sigint(self):
        """First SIGINT (a terminal's Ctrl-C reaches the tools too): the tools stop and write
        what they have, read to the end; the second stops the capture."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def on_sigint(signum, frame):
            if self.interrupted:
                raise KeyboardInterrupt
            self.interrupted = True

        old = signal.signal(signal.SIGINT, on_sigint)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, old)


def fifo_reader(tmp: str, name: str) -> tuple[str, int]:
    """A FIFO in `tmp` and its read end, opened non-blocking (it cannot hang if the tool dies
    before opening its end)."""
    path = os.path.join(tmp, name)
    os.mkfifo(path, 0o600)
    return path, os.open(path, os.O_RDONLY | os.O_NONBLOCK)


def no_output(tool: str, live: LiveTool, cmd: list[str]) -> BadInput:
    statuses = ", ".join(f"{Path(p.args[0]).name} {p.returncode}" for p in live.procs if p.returncode is not None)
    return BadInput(
        f"{tool} traced nothing (exit status: {statuses or 'none'}); nothing was kept",
        file=cmd[0],
        expected=f"a program that runs and a {tool} that can trace it here ({tool} says why above)",
    )


def capture(
    store: Store,
    cmd: list[str],
    name: str | None = None,
    *,
    tool: str = "strace",
    script: str | None = None,
    tool_args: list[str] = (),
    pattern: list[str] | None = None,
    span: list[str] | None = None,
    all_syscalls: bool = False,
    description: str = "",
    progress: Callable[[int], None] | None = None,
    stdout: int | None = None,
    strict: bool = False,
    commit_s: float = COMMIT_S,
) -> CaptureReport:
    """Run `cmd` under `tool`, streaming its output into a new trace `name` of `store`.

    `script`: bpftrace's program (a file, or the program text); `tool_args`: options added to
    the tool's command line (perf record's, for perf); `pattern`/`span`: bpftrace's templates
    (`import bpftrace --pattern/--span`); `all_syscalls`: strace every syscall. The command's
    stdin, stdout and stderr are ours; `stdout`: a file descriptor for the command's stdout
    instead (`capture --json` gives it stderr, so that stdout holds the JSON alone)."""
    if tool not in TOOLS:
        raise BadInput(f"unknown capture tool {tool!r}", expected=" or ".join(TOOLS))
    if not cmd:
        raise BadInput("no command to capture", expected="tracehouse capture [--tool T] [SCRIPT] -- CMD [ARG ...]")
    if tool == "bpftrace" and not script:
        raise BadInput("--tool bpftrace needs a script", expected="tracehouse capture --tool bpftrace SCRIPT -- CMD")
    if tool != "bpftrace" and script:
        raise BadInput(
            f"a script is for --tool bpftrace, not {tool}", expected=f"tracehouse capture --tool {tool} -- CMD"
        )
    binary = tool_binary(tool)
    name = name or default_name(cmd, {t.name for t in store.traces()})
    description = description or f"capture of {shlex.join(cmd)} under {tool}"
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tracehouse-capture-") as tmp:
        if tool == "strace":
            live, argv, report, summary = _strace(
                store, binary, cmd, name, tmp, tool_args, all_syscalls, description, progress, stdout, strict, commit_s
            )
        elif tool == "bpftrace":
            live, argv, report, summary = _bpftrace(
                store,
                binary,
                cmd,
                name,
                tmp,
                script,
                tool_args,
                pattern,
                span,
                description,
                progress,
                stdout,
                strict,
                commit_s,
            )
        else:
            live, argv, report, summary = _perf(
                store, binary, cmd, name, tool_args, description, progress, stdout, strict, commit_s
            )
    first = live.procs[0].returncode if live.procs else None
    exit_status = None if tool == "bpftrace" else first  # bpftrace -c does not pass the command's on
    return CaptureReport(
        name,
        tool,
        list(cmd),
        exit_status,
        first,
        time.perf_counter() - t0,
        argv,
        report,
        interrupted=live.interrupted,
        summary=summary,
    )


def importing(live: LiveTool, cmd: list[str], run: Callable[[Iterator[bytes | None]], ImportReport]) -> ImportReport:
    """`run(chunks)` (the format's streaming import) over the tool's output; when the tool
    wrote nothing at all, the import's error (no events) says that instead."""
    try:
        return run(live.chunks())
    except BadInput:
        if live.procs and live.bytes == 0:
            raise no_output(live.tool, live, cmd) from None
        raise


def _strace(store, binary, cmd, name, tmp, tool_args, all_syscalls, description, progress, stdout, strict, commit_s):
    """strace writing into a FIFO (close-on-exec: the command does not inherit it), imported by
    the strace importer's streaming loop; the summary of calls and IO by file."""
    from .strace.capture import IO_SYSCALLS, STRACE_FLAGS, summarize
    from .strace.importer import import_stream

    args = [binary, *STRACE_FLAGS, *tool_args]
    if not all_syscalls:
        args += ["-e", f"trace={IO_SYSCALLS}"]

    def start():
        fifo, fd = fifo_reader(tmp, "strace.fifo")
        return [subprocess.Popen([*args, "-o", fifo, "--", *cmd], stdout=stdout)], fd

    live = LiveTool("strace", start, commit_s)
    report = importing(
        live,
        cmd,
        lambda chunks: import_stream(
            store,
            None,
            name,
            source="strace",
            strict=strict,
            description=description,
            progress=progress,
            chunks=chunks,
            metadata={"command": " ".join(cmd), "strace": " ".join(args[1:]), "tool": "strace"},
        ),
    )
    return live, [args], report, summarize(store, name)


def _bpftrace(
    store, binary, cmd, name, tmp, script, tool_args, pattern, span, description, progress, stdout, strict, commit_s
):
    from . import bpftrace as fmt
    from .probes import import_probe_output

    if any(not w or any(c.isspace() for c in w) for w in cmd):
        # bpftrace splits -c at blanks and honours no quotes: a word with one goes through `sh RUN`
        # (RUN: `exec CMD`, so `cpid` is still the command's pid; sh's own start is traced too).
        if any(c.isspace() for c in tmp):
            raise BadInput("the temporary directory's path holds a blank (bpftrace -c splits at blanks)", file=tmp)
        run = os.path.join(tmp, "run")
        Path(run).write_text(f"exec {shlex.join(cmd)}\n")
        child = f"/bin/sh {run}"
    else:
        child = " ".join([shutil.which(cmd[0]) or cmd[0], *cmd[1:]])
    prog = [script] if Path(script).is_file() else ["-e", script]
    fifo = os.path.join(tmp, "bpftrace.fifo")
    # -B line: writing to a file (-o), bpftrace buffers its output fully, and a script's lines
    # wait for a few KB before they reach us.
    argv = [binary, "-f", "json", "-B", "line", "-o", fifo, *tool_args, "-c", child, *prog]

    def start():
        path, fd = fifo_reader(tmp, "bpftrace.fifo")
        return [subprocess.Popen(argv, stdout=stdout)], fd

    live = LiveTool("bpftrace", start, commit_s)
    report = importing(
        live,
        cmd,
        lambda chunks: import_probe_output(
            "bpftrace",
            fmt,
            store,
            f"bpftrace -c {shlex.join(cmd)}",
            name,
            strict=strict,
            description=description,
            progress=progress,
            pattern=pattern,
            span=span,
            chunks=chunks,
            metadata={"command": shlex.join(cmd), "tool": "bpftrace", "script": script},
        ),
    )
    summary = {"results": report.details.get("results", [])}
    return live, [argv[: argv.index("-c")]], report, summary


def _perf(store, binary, cmd, name, tool_args, description, progress, stdout, strict, commit_s):
    from . import perf as fmt
    from .parser_loader import import_parsed

    record = [binary, "record", *PERF_RECORD, *tool_args, "-o", "-"]
    script = [binary, "script", "-i", "-", *PERF_SCRIPT]

    def start():
        rec = subprocess.Popen([*record, "--", *cmd], stdout=subprocess.PIPE)
        try:
            # A session of its own: Ctrl-C stops perf record, which ends its output; perf
            # script reads it to the end.
            scr = subprocess.Popen(script, stdin=rec.stdout, stdout=subprocess.PIPE, start_new_session=True)
        except BaseException:
            rec.kill()
            rec.wait()
            raise
        finally:
            rec.stdout.close()
        fd = os.dup(scr.stdout.fileno())
        scr.stdout.close()
        os.set_blocking(fd, False)
        return [rec, scr], fd

    live = LiveTool("perf", start, commit_s)
    report = importing(
        live,
        cmd,
        lambda chunks: import_parsed(
            fmt,
            store,
            f"perf record {shlex.join(cmd)}",
            name,
            strict=strict,
            description=description,
            progress=progress,
            chunks=chunks,
            metadata={"command": shlex.join(cmd), "tool": "perf", "perf": shlex.join([*record[1:], "|", *script[1:]])},
        ),
    )
    top = (
        store.sql(f"""SELECT leaf, count(*) AS samples FROM "{name}".sample
                        GROUP BY leaf ORDER BY samples DESC, leaf LIMIT 10""").to_pylist()
        if report.by_type.get("sample")
        else []
    )
    return live, [record, script], report, {"top_leaves": top}
