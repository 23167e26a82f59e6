"""`tracehouse record -- python prog.py ARGS`: record a Python program into a new trace.

Owns the storing side of a recording: the child command (the user's interpreter running
`-m tracehouse.record --child FD`, `child.py`), the pipe its events come through, appending the
decoded batches to the store as they arrive (`_core.RecordReader` decodes without the
interpreter lock, so decoding and storing overlap with the program running on the other core),
the producers (the program, then each thread as the stream names it), and the report.

Why two processes: the program runs with only the tracer and its writer thread added, never the
store (no pyarrow, DuckDB or store threads in its interpreter, no writer lock to take), and the
storing runs on another core. A pipe gives backpressure for free: when the store falls behind,
the tracer's queue fills and the program waits, so nothing recorded is dropped and the backlog
stays bounded (4 flushes of 32,768 events).

A program that ends without its end frame (killed, `os._exit`) keeps every event that reached
the store; the trace says so (`complete: false` in its metadata and the report).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BadInput
from ..formats import python as pyfmt

if TYPE_CHECKING:
    from ..store import Store

PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent.parent)  # the directory holding `tracehouse/`


@dataclass
class RecordReport:
    """What a recording did: the trace, the program's exit status, counts and times."""

    trace: str
    command: list[str]
    exit_status: int | None
    seconds: float
    events: int = 0
    by_type: dict = field(default_factory=dict)
    threads: list = field(default_factory=list)
    complete: bool = False
    reason: str = ""
    interrupted: bool = False
    hello: dict = field(default_factory=dict)
    end: dict = field(default_factory=dict)
    bytes: int = 0

    def to_json(self) -> dict:
        return {
            "trace": self.trace,
            "command": self.command,
            "exit_status": self.exit_status,
            "seconds": round(self.seconds, 3),
            "events": self.events,
            "by_type": self.by_type,
            "threads": self.threads,
            "complete": self.complete,
            "reason": self.reason,
            "interrupted": self.interrupted,
            "python": self.hello.get("python"),
            "mode": self.hello.get("mode"),
            "stream_bytes": self.bytes,
            "codes": self.end.get("codes"),
            "sources": self.end.get("sources"),
            "program_seconds": self.program_seconds,
            "program_cpu_seconds": self.program_cpu_seconds,
        }

    @property
    def program_seconds(self) -> float | None:
        """The program's own time under the recorder (from the end frame: no start-up, no storing)."""
        return ((self.end.get("program") or {}).get("seconds")) if self.end else None

    @property
    def program_cpu_seconds(self) -> float | None:
        """CPU time of the traced process meanwhile (every thread, the recorder's writer among them)."""
        return ((self.end.get("program") or {}).get("cpu_seconds")) if self.end else None


def python_command(cmd: list[str]) -> list[str]:
    """The interpreter and program of `cmd`: `python prog.py ...`, `python3.12 -m pkg ...`,
    or a bare `prog.py ...` (run with this interpreter)."""
    if not cmd:
        raise BadInput("no program to record", expected="tracehouse record [--name N] -- python prog.py [ARG ...]")
    exe = Path(cmd[0]).name
    if exe.startswith("python") or exe in ("py",):
        if len(cmd) < 2:
            raise BadInput(f"{cmd[0]} without a program", expected="python prog.py | python -m MODULE | python -c CODE")
        found = shutil.which(cmd[0])
        if found is None:
            raise BadInput(f"no interpreter {cmd[0]!r} on PATH", expected="a Python interpreter (3.11+)")
        return [found, *cmd[1:]]
    if cmd[0].endswith(".py") or cmd[0] in ("-m", "-c"):
        return [sys.executable, *cmd]
    raise BadInput(f"{cmd[0]!r} is not a Python program", expected="python prog.py [ARG ...] (or prog.py, -m MODULE)")


def child_argv(
    cmd: list[str], fd: int, include=(), exclude=(), flush_rows: int | None = None, go: int | None = None
) -> list[str]:
    py = python_command(cmd)
    argv = [py[0], "-m", "tracehouse.record", "--child", str(fd)]
    if go is not None:
        argv += ["--go", str(go)]
    for p in include:
        argv += ["--include", p]
    for p in exclude:
        argv += ["--exclude", p]
    if flush_rows:
        argv += ["--flush-rows", str(int(flush_rows))]
    return [*argv, "--", *py[1:]]


def default_name(cmd: list[str], taken: set[str]) -> str:
    """`<program>-<local time to the second>`, `-2`, `-3` ... when taken."""
    from ..formats.capture import default_name as by_time

    py = cmd[1:] if cmd and Path(cmd[0]).name.startswith("python") else cmd
    prog = (
        py[1]
        if py and py[0] == "-m" and len(py) > 1
        else ("code" if py and py[0] == "-c" else (py[0] if py else "python"))
    )
    return by_time([Path(prog).stem or "python"], taken)


def record(
    store: Store,
    cmd: list[str],
    name: str | None = None,
    *,
    include=(),
    exclude=(),
    description: str = "",
    progress: Callable[[int], None] | None = None,
    stdout: int | None = None,
    flush_rows: int | None = None,
) -> RecordReport:
    """Run `cmd` (a Python program) under the native recorder, storing its events as trace
    `name` (format `python`). Returns once the program and the stream have ended.

    Ctrl-C goes to the program (it ends as Python ends on KeyboardInterrupt); what was recorded
    until then is kept. `stdout`: a descriptor for the program's stdout instead of ours."""
    py = python_command(cmd)
    read_fd, write_fd = os.pipe()
    go_r, go_w = os.pipe()
    argv = child_argv(cmd, write_fd, include, exclude, flush_rows, go=go_r)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([PACKAGE_ROOT, *filter(None, [env.get("PYTHONPATH")])])
    t0 = time.perf_counter()
    # The traced process starts its interpreter while the trace is created here; it runs the
    # program only on the byte sent once the trace exists (the end of `go` without it: it exits
    # without running anything).
    try:
        proc = subprocess.Popen(argv, pass_fds=(write_fd, go_r), env=env, stdout=stdout)
    except BaseException:
        for fd in (read_fd, go_w):
            os.close(fd)
        raise
    finally:
        os.close(write_fd)
        os.close(go_r)
    try:
        name = name or default_name(py, {t.name for t in store.traces()})
        store.create_trace(
            name,
            pyfmt.FORMAT,
            description=description or f"recording of {' '.join(cmd)}",
            metadata={"command": " ".join(cmd), "recorder": "tracehouse record"},
            event_types=pyfmt.EVENT_TYPES,
            producers=pyfmt.producers(Path(py[1] if len(py) > 1 else py[0]).name, 0),
            format_description=pyfmt.DESCRIPTION,
            importing=True,
        )
        try:
            os.write(go_w, b"1")
        except BrokenPipeError:
            pass  # it ended before the start (an interpreter that cannot run the recorder): said below
    except BaseException:
        os.close(read_fd)
        os.close(go_w)
        proc.wait()
        raise
    os.close(go_w)
    from .. import _core

    rep = RecordReport(name, list(cmd), None, 0.0)
    old_int = signal.getsignal(signal.SIGINT)
    try:
        reader = _core.RecordReader(read_fd)
        # The program gets Ctrl-C and ends on it; we keep storing what it still sends.
        signal.signal(signal.SIGINT, lambda s, f: setattr(rep, "interrupted", True))
        with store.bulk(name):
            _pump(store, name, reader, rep, progress)
        # The last checkpoint's encoding starts now, beside the wait for the program's exit and
        # the metadata write; complete_import then waits for it.
        store.checkpoint_soon(name)
        rep.exit_status = _exit_status(proc.wait())
    except BaseException as e:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        store.rollback_import(name, e)  # raises
    finally:
        signal.signal(signal.SIGINT, old_int)
    rep.seconds = time.perf_counter() - t0
    if not rep.complete and not rep.reason:
        rep.reason = f"the program ended without the recording's end (exit status {rep.exit_status})"
    store.set_metadata(
        name,
        {
            "complete": str(rep.complete).lower(),
            "exit_status": str(rep.exit_status),
            "python": rep.hello.get("python", ""),
            "mode": rep.hello.get("mode", ""),
            "cwd": rep.hello.get("cwd", ""),
            "main_file": rep.hello.get("main_file") or "",
            **({"incomplete_reason": rep.reason} if rep.reason else {}),
        },
    )
    store.complete_import(name)
    if rep.events == 0 and rep.exit_status not in (0, None) and not rep.hello:
        raise BadInput(
            f"the recorder did not start: {cmd[0]} exited with {rep.exit_status} before recording anything "
            f"(it says why above)",
            file=py[0],
            expected="a Python 3.11+ interpreter that can import tracehouse",
        )
    return rep


def _pump(store: Store, name: str, reader, rep: RecordReport, progress) -> None:
    """Appends what the stream brings until it ends."""
    while True:
        try:
            chunk = reader.read()
        except ValueError as e:  # a cut or damaged stream: keep what came before it
            rep.reason = str(e)
            break
        n = 0
        for type_name, batch in chunk["batches"]:
            store.append(name, type_name, batch)
            if type_name in pyfmt.RECORDED:
                n += batch.num_rows
        # The process (from the hello frame) and the threads a chunk names: one catalog write.
        producers = []
        if chunk["hello"]:
            rep.hello = json.loads(chunk["hello"])
            producers.append(
                {
                    "id": 0,
                    "parent": None,
                    "kind": "process",
                    "name": Path(str((rep.hello.get("argv") or ["python"])[0])).name,
                    "attrs": {"pid": rep.hello.get("pid"), "python": rep.hello.get("python")},
                }
            )
        producers += [
            {"id": t["producer"], "parent": 0, "kind": "thread", "name": t["name"], "attrs": {"ident": t["ident"]}}
            for t in chunk["threads"]
        ]
        if producers:
            store.add_producers(name, producers)
        rep.threads += [t["name"] for t in chunk["threads"]]
        if chunk["end"]:
            rep.end = json.loads(chunk["end"])
            rep.complete = True
        rep.events += n
        for type_name, batch in chunk["batches"]:
            if type_name in pyfmt.RECORDED:
                rep.by_type[type_name] = rep.by_type.get(type_name, 0) + batch.num_rows
        if progress is not None and n:
            progress(n)
        if chunk["eof"]:
            rep.bytes = reader.offset
            return


def _exit_status(code: int) -> int:
    """The program's exit status as a shell gives it (128 + N for signal N)."""
    return code if code >= 0 else 128 - code
