"""Whether the installed tracers can trace here, and why not: a test that needs one skips
with the reason (perf_event_paranoid, no kernel probes, not installed)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import tracehouse


def perf_cannot_record() -> str | None:
    """None when `perf record` records here, else why not."""
    if shutil.which("perf") is None:
        return "perf is not installed (apt-get install linux-perf)"
    if shutil.which("cc") is None:
        return "no C compiler to build the recorded program"
    try:
        r = subprocess.run(
            ["perf", "record", "-o", "/dev/null", "-q", "--", "true"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"perf record does not run here: {e}"
    if r.returncode != 0:
        paranoid = Path("/proc/sys/kernel/perf_event_paranoid")
        level = paranoid.read_text().strip() if paranoid.exists() else "?"
        return f"perf record cannot record here (perf_event_paranoid={level}): {r.stderr.strip()[-200:]}"
    return None


def bpftrace_cannot_trace(probe: str = "tracepoint:syscalls:sys_enter_openat") -> str | None:
    """None when bpftrace attaches `probe` here and sees `-c`'s command through it, else why not
    (not installed, not root, no BPF or tracefs in this kernel or container)."""
    if shutil.which("bpftrace") is None:
        return "bpftrace is not installed (apt-get install bpftrace)"
    script = f'{probe} /pid == cpid/ {{ printf("seen\\n"); exit(); }}'
    try:
        r = subprocess.run(
            ["bpftrace", "-f", "json", "-e", script, "-c", "/bin/cat /dev/null"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bpftrace does not run here: {e}"
    if '"seen' not in r.stdout:
        return f"bpftrace cannot attach {probe} here (exit {r.returncode}): {r.stderr.strip()[-300:]}"
    return None


def wait_committed(store: Path, query: str, ok, proc, deadline_s: float = 120.0):
    """Polls `query` on a read-only store (the importing process holds the writer lock) until
    ok(answer), while `proc` (the importer, or the pipeline feeding it) still runs."""
    end = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < end:
        if proc.poll() is not None:
            err = proc.stderr.read()[-2000:] if proc.stderr else ""
            raise AssertionError(f"the importer ended early: {proc.returncode} {err}")
        try:
            with tracehouse.open(store, readonly=True) as s:
                last = s.sql(query).to_pylist()
            if ok(last):
                return last
        except Exception:  # noqa: BLE001 - the store or the trace is not there yet (the importer is making them)
            pass
        time.sleep(0.2)
    raise AssertionError(f"not committed while the input was open: {last}")
