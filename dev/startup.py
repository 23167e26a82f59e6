"""Start-up time of `tracehouse --help`, `ls` and a whole-view count query beside a bare interpreter.

Owns the start-up measurement (docs/architecture.md, "Start-up"): each command runs N times,
interleaved with the peer (`python -c pass`, the floor no command can go under) so
both see the same machine load; prints medians and minima of wall and CPU seconds and
the load average before and after.

    .venv/bin/python dev/startup.py [--runs 21] [--store DIR] [--trace NAME] [--no-bytecode-cache]
                                    [--before /work/main/.venv/bin/tracehouse]

The count command is `tracehouse query 'SELECT count(*) FROM "<trace>".events' --format csv`
over `--trace` of `--store` (the first trace listed when not given; without a trace the
command is left out). Python compiles our modules on every start when it may not write
bytecode (PYTHONDONTWRITEBYTECODE, set on the team's machines): the commands run with a
bytecode cache in a temporary directory (PYTHONPYCACHEPREFIX, filled by a first run) as an
installed package has one; `--no-bytecode-cache` measures them without.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=21)
    p.add_argument("--store")
    p.add_argument("--trace", help="trace of the count query (default: the store's first)")
    p.add_argument("--no-bytecode-cache", action="store_true")
    p.add_argument(
        "--before",
        metavar="EXE",
        help="another installation's tracehouse (e.g. main's): its ls and count "
        "query run interleaved too, for a before/after in one run",
    )
    args = p.parse_args()
    made: list[str] = []  # temporary directories of this run, removed at the end
    try:
        return _measure(args, made)
    finally:
        for d in made:
            shutil.rmtree(d, ignore_errors=True)


def _measure(args, made: list[str]) -> int:
    exe = Path(sys.executable).parent / "tracehouse"
    store = args.store
    if store is None:
        store = tempfile.mkdtemp(prefix="th-startup-")
        made.append(store)
    env = dict(os.environ)
    if not args.no_bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="th-startup-pyc-")
        made.append(env["PYTHONPYCACHEPREFIX"])
    subprocess.run([str(exe), "--store", store, "init"], check=True, stdout=subprocess.DEVNULL, env=env)
    trace = args.trace
    if trace is None:
        listed = subprocess.run(
            [str(exe), "--store", store, "ls", "--json"], check=True, capture_output=True, text=True, env=env
        )
        trace = next((t["name"] for t in json.loads(listed.stdout)), None)
    cmds = {
        "python -c pass (peer)": [sys.executable, "-c", "pass"],
        "tracehouse --help": [str(exe), "--help"],
        "tracehouse ls": [str(exe), "--store", store, "ls"],
        "tracehouse ls --json": [str(exe), "--store", store, "ls", "--json"],
    }
    if trace is not None:
        sql = 'SELECT count(*) FROM "' + trace.replace('"', '""') + '".events'
        cmds["tracehouse query count(*)"] = [str(exe), "--store", store, "query", sql, "--format", "csv"]
    if args.before:
        for name in [n for n in cmds if n.startswith("tracehouse ") and n != "tracehouse --help"]:
            cmds[f"{name} (before)"] = [args.before, *cmds[name][1:]]
    for cmd in cmds.values():  # fills the bytecode cache; not timed
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
    wall: dict[str, list[float]] = {k: [] for k in cmds}
    cpu: dict[str, list[float]] = {k: [] for k in cmds}
    load0 = os.getloadavg()[0]
    for _ in range(args.runs):
        for name, cmd in cmds.items():
            c0, t0 = _child_cpu(), time.perf_counter()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(_child_cpu() - c0)
    peer = statistics.median(wall["python -c pass (peer)"])
    cache = "without a bytecode cache" if args.no_bytecode_cache else "bytecode cached"
    print(
        f"load average {load0:.1f} -> {os.getloadavg()[0]:.1f}, {args.runs} runs each, interleaved, {cache}"
        + (f"; count over {trace!r}" if trace is not None else "")
    )
    for name, ts in wall.items():
        med = statistics.median(ts)
        print(
            f"  {name:<35} wall median {med:.3f} s  min {min(ts):.3f} s  ({med / peer:.1f}x the peer)"
            f"   CPU median {statistics.median(cpu[name]):.3f} s  min {min(cpu[name]):.3f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
