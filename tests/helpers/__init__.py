"""Shared helpers of the store tests: small event types and batches, child processes, WAL frames.

The child scripts next to this file (`ingest_child.py`, `reader_child.py`,
`lock_child.py`) run under the test's own interpreter (`sys.executable`, the venv)
so a test can kill a real writer process or read from a second one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from tracehouse import Column, EventType
from tracehouse.store import wal as walmod

HERE = Path(__file__).resolve().parent

# One instant type carrying a batch id and a row index: every row says which append it came from.
BATCH_TYPE = EventType(
    "ev",
    "instant",
    (
        Column("batch", "int64", "id", "append that wrote the row"),
        Column("row", "int64", "index", "row within its append"),
    ),
)
# One instant type with an `id` column for the snapshot test: ids 0..k-1 in append order.
ID_TYPE = EventType("ev", "instant", (Column("id", "int64", "id", "sequential id, in append order"),))


def rows_of_batch(b: int) -> int:
    """How many rows the append with batch id `b` carries (1..40, varies with b)."""
    return 1 + (b * 7919) % 40


def batch_table(b: int) -> pa.Table:
    n = rows_of_batch(b)
    r = np.arange(n, dtype=np.int64)
    return pa.table(
        {
            "ts": b * 1000 + r,
            "producer": pa.array(np.full(n, b % 3, np.int32)),
            "batch": np.full(n, b, np.int64),
            "row": r,
        }
    )


def id_table(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"ts": ids * 10, "producer": pa.array(np.zeros(n, np.int32)), "seq": ids, "id": ids})


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    # The children import tracehouse exactly as the test process does.
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_child(script: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run a helper script to completion; its stdout and stderr are returned as text."""
    return subprocess.run(
        [sys.executable, str(HERE / script), *args], capture_output=True, text=True, timeout=timeout, env=child_env()
    )


class Child:
    """A helper script running in the background whose stdout lines are collected as they come."""

    def __init__(self, script: str, *args: str) -> None:
        self._err = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed by stop(); a file, not a pipe: a chatty child never blocks
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / script), *args],
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            env=child_env(),
        )
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if not line.endswith("\n"):  # a line cut by the kill was never acknowledged
                break
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_lines(self, n: int, timeout: float = 30) -> list[str]:
        """Block until the child printed `n` lines; fails (with its stderr) when it died or stalled."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.lines) < n:
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    break
                self._cond.wait(min(left, 0.1))
            got = list(self.lines)
        if len(got) < n:
            self.kill()
            raise AssertionError(f"child printed {len(got)} of {n} lines; stderr:\n{self.stderr()}")
        return got

    def kill(self) -> list[str]:
        """SIGKILL the child; returns every complete line it printed."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        return self.finish()

    def finish(self, timeout: float = 60) -> list[str]:
        """Wait for the child to end on its own; a child still running after `timeout` is killed and fails the test."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(f"child still running after {timeout} s; stderr:\n{self.stderr()}") from None
        self._reader.join(timeout=10)
        with self._cond:
            return list(self.lines)

    def stderr(self) -> str:
        self._err.seek(0)
        return self._err.read()


def wal_frames(path: Path) -> list[tuple[int, int]]:
    """(start, end) byte offsets of every record of a WAL file, parsed independently of wal.read_wal."""
    data = Path(path).read_bytes()
    assert data[: len(walmod.MAGIC)] == walmod.MAGIC
    pos, out = len(walmod.MAGIC), []
    while pos < len(data):
        if not any(data[pos : pos + 8]):
            break  # the zeros a writer writes ahead of small records end the log
        (length,) = np.frombuffer(data[pos : pos + 4], "<u4")
        end = pos + 8 + int(length)
        assert end <= len(data), "helper expects an intact WAL file"
        out.append((pos, end))
        pos = end
    return out


def wal_files(store_path: Path) -> list[Path]:
    return sorted(Path(store_path).glob("traces/*/wal/*.wal"))


def segment_files(store_path: Path) -> list[str]:
    """Every file under the segment directories, relative to the store root."""
    root = Path(store_path)
    return sorted(p.relative_to(root).as_posix() for p in root.glob("traces/*/segments/**/*") if p.is_file())
