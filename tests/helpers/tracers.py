"""Whether the installed tracers can trace here, and why not: a test that needs one skips
with the reason (perf_event_paranoid, no kernel probes, not installed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


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
