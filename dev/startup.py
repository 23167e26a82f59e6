"""Start-up time of `tracehouse --help` and `tracehouse ls` beside a bare interpreter.

Owns the measurement behind the README's start-up figure: each command runs N times,
interleaved with the peer (`python -c pass`, the floor no command can go under) so
both see the same machine load; prints medians, minima and the load average.

    .venv/bin/python dev/startup.py [--runs 21] [--store DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=21)
    p.add_argument("--store")
    args = p.parse_args()
    exe = Path(sys.executable).parent / "tracehouse"
    store = args.store or tempfile.mkdtemp(prefix="th-startup-")
    subprocess.run([str(exe), "--store", store, "init"], check=True, stdout=subprocess.DEVNULL)
    cmds = {
        "python -c pass (peer)": [sys.executable, "-c", "pass"],
        "tracehouse --help": [str(exe), "--help"],
        "tracehouse ls": [str(exe), "--store", store, "ls"],
    }
    times: dict[str, list[float]] = {k: [] for k in cmds}
    load0 = os.getloadavg()[0]
    for _ in range(args.runs):
        for name, cmd in cmds.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            times[name].append(time.perf_counter() - t0)
    peer = statistics.median(times["python -c pass (peer)"])
    print(f"load average {load0:.1f} -> {os.getloadavg()[0]:.1f}, {args.runs} runs each, interleaved")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"  {name:<24} median {med:.3f} s  min {min(ts):.3f} s  ({med / peer:.1f}x the peer)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
