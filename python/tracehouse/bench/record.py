"""`tracehouse bench record`: what recording a program costs, and how fast its events are stored.

Owns the recorder's benchmark. For each program (pyperformance's nbody, richards, json_dumps,
json_loads and regex_effbot, unchanged, from the installed `pyperformance` package (PyPI; the
`bench` extra), and a threaded file-IO program of ours in `bench/programs/`; all are copied to the
work directory first, beside `bench/programs/pyperf.py`, since nothing under the tracehouse package
is recorded),
in the same run, one after the other:

  untraced     `python prog.py`                                    wall time, median of --repeat
  recorded     `tracehouse record -- python prog.py` (record.record: the program under the
               native tracer, its events stored in a new trace)   wall time until stored
  pure Python  `python -m tracehouse.record.reference --events -- prog.py` (the same events
               captured by a sys.settrace function into lists)     wall time

and reports each slowdown (recorded / untraced, pure Python / untraced) of the program's own time
(from its start to its end and its threads', measured inside the process: the same runpy start
for the three) and the gain: the time the pure-Python recorder adds over the time the native one
adds ((pure - untraced) / (recorded - untraced)). The recording's wall time end to end (start-up,
storing, the trace's segments made durable) is reported beside it. Targets: recorded <= 30x
untraced, a gain >= 10x.

Store ingest: the stream of one recording (the largest program, captured to a file once) is fed
to a new trace through the storing loop of `tracehouse record` (`_core.RecordReader` decoding,
`store.append`) --ingest-passes times, as fast as it goes; reported: events/s over the whole
run (until the last segment is durable), the rate of each pass (a backlog that grows shows as
passes slowing down) and the drain (the final flush after the last append). Target: >= 5M
events/s.

The machine's load average is recorded before and after: other processes skew every number.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

PROGRAMS_DIR = Path(__file__).resolve().parent / "programs"
# name -> (file, arguments, PYPERF_LOOPS): each runs 0.2-0.6 s untraced on this machine.
PROGRAMS: dict[str, tuple[str, list[str], int]] = {
    "nbody": ("nbody.py", [], 1),
    "richards": ("richards.py", [], 1),
    "json_dumps": ("json_dumps.py", [], 1),
    "json_loads": ("json_loads.py", [], 1),
    "regex_effbot": ("regex_effbot.py", [], 1),
    "file_io_threads": ("file_io_threads.py", ["4", "10", "2000"], 1),
}
QUICK: dict[str, list[str]] = {  # --quick: a tenth of the work (CI)
    "nbody": ["--iterations", "2000"],
    "file_io_threads": ["2", "4", "500"],
}
# Taken from the installed pyperformance package (its data-files/benchmarks/bm_<name>/).
PYPERFORMANCE = ("nbody", "richards", "json_dumps", "json_loads", "regex_effbot")
TARGET_OVERHEAD = 30.0
TARGET_GAIN = 10.0
TARGET_INGEST = 5_000_000


def _pyperformance_file(name: str) -> Path:
    """pyperformance's own `run_benchmark.py` of benchmark `name`, as the installed package ships it."""
    from importlib.util import find_spec

    spec = find_spec("pyperformance")
    if spec is None or not spec.submodule_search_locations:
        from ..errors import BadInput

        raise BadInput(
            f"benchmark program {name} comes from the pyperformance package, which is not installed",
            expected="pip install pyperformance (make setup installs it with the bench extra)",
        )
    path = (
        Path(list(spec.submodule_search_locations)[0]) / "data-files" / "benchmarks" / f"bm_{name}" / "run_benchmark.py"
    )
    if not path.is_file():
        from ..errors import BadInput

        raise BadInput(f"{path}: pyperformance has no benchmark {name}", expected="pyperformance >= 1.10")
    return path


def _env(loops: int) -> dict:
    from ..record.record import PACKAGE_ROOT

    env = dict(os.environ)
    env["PYPERF_LOOPS"] = str(loops)
    env["PYTHONPATH"] = os.pathsep.join([PACKAGE_ROOT, *filter(None, [env.get("PYTHONPATH")])])
    return env


def _harness(mode: str, argv: list[str], env: dict, cwd: Path) -> tuple[float, float, int]:
    """(wall s, the program's own s, events) of `argv` run by the reference harness, untraced
    (`--none`) or under the pure-Python recorder (`--events`): the same runpy start as the
    recorder's child, so the three program times compare like for like."""
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "tracehouse.record.reference", mode, "--", *argv],
        env=env,
        cwd=cwd,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    wall = time.perf_counter() - t0
    got = json.loads(p.stderr.decode().strip().splitlines()[-1])
    return wall, got["seconds"], got["events"]


def run(
    programs: list[str] | None = None,
    *,
    repeat: int = 1,
    quick: bool = False,
    workdir: str | None = None,
    ingest_passes: int = 4,
    reference: bool = True,
    log: Callable[[str], None] = lambda s: None,
) -> dict:
    """Runs the benchmark (see the module doc); returns its results as JSON-able data."""
    import tracehouse

    from ..record.record import record

    names = programs or list(PROGRAMS)
    bad = [n for n in names if n not in PROGRAMS]
    if bad:
        from ..errors import BadInput

        raise BadInput(f"unknown programs {bad}", expected=", ".join(PROGRAMS))
    base = Path(tempfile.mkdtemp(prefix="th-bench-record-", dir=workdir))
    out: dict = {
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "loadavg_before": list(os.getloadavg())},
        "programs": [],
        "ingest": None,
        "quick": quick,
        "repeat": repeat,
    }
    try:
        progs = base / "programs"
        progs.mkdir()
        for f in PROGRAMS_DIR.glob("*.py"):
            shutil.copy(f, progs / f.name)
        for name in names:
            if name in PYPERFORMANCE:
                shutil.copy(_pyperformance_file(name), progs / PROGRAMS[name][0])
        store = tracehouse.open(base / "store")
        try:
            biggest = None
            for name in names:
                file, args, loops = PROGRAMS[name]
                args = QUICK.get(name, args) if quick else args
                argv = [sys.executable, str(progs / file), *args]
                env = _env(loops)
                log(f"{name}: untraced")
                plain_runs = [_harness("--none", argv[1:], env, progs) for _ in range(repeat)]
                plain_wall = statistics.median(r[0] for r in plain_runs)
                plain = statistics.median(r[1] for r in plain_runs)
                log(f"{name}: recorded")
                rec_walls, rec_times, rep = [], [], None
                for k in range(repeat):
                    os.environ["PYPERF_LOOPS"] = str(loops)
                    t0 = time.perf_counter()
                    rep = record(store, argv, f"{name}-{k}", stdout=subprocess.DEVNULL)
                    rec_walls.append(time.perf_counter() - t0)
                    rec_times.append(rep.program_seconds)
                    if rep.exit_status != 0:
                        raise RuntimeError(f"{name} exited with {rep.exit_status} under the recorder")
                recorded = statistics.median(rec_times)
                recorded_wall = statistics.median(rec_walls)
                row = {
                    "program": name,
                    "args": args,
                    "untraced_s": round(plain, 3),
                    "recorded_s": round(recorded, 3),
                    "overhead": round(recorded / plain, 2),
                    "untraced_wall_s": round(plain_wall, 3),
                    "recorded_wall_s": round(recorded_wall, 3),
                    "wall_overhead": round(recorded_wall / plain_wall, 2),
                    "events": rep.events,
                    "by_type": rep.by_type,
                    "events_per_s": round(rep.events / recorded),
                    "stream_bytes": rep.bytes,
                    "threads": len(rep.threads),
                }
                if reference:
                    log(f"{name}: pure-Python recorder")
                    _, ref_s, ref_events = _harness("--events", argv[1:], env, progs)
                    # Overhead is the time a recorder adds; the gain compares what each adds.
                    row.update(
                        reference_s=round(ref_s, 3),
                        reference_overhead=round(ref_s / plain, 2),
                        reference_events=ref_events,
                        gain=round((ref_s - plain) / max(recorded - plain, 1e-3), 1),
                    )
                out["programs"].append(row)
                if biggest is None or rep.events > biggest[1]:
                    biggest = (argv, rep.events, env)
            if biggest is not None and ingest_passes > 0:
                log("store ingest")
                out["ingest"] = ingest(store, base, biggest[0], biggest[2], ingest_passes, log)
        finally:
            store.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out["machine"]["loadavg_after"] = list(os.getloadavg())
    return out


def capture(argv: list[str], env: dict, path: Path) -> None:
    """Records `argv` (python PROGRAM ARGS) into a stream file (what a pipe to the store would carry)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        subprocess.run(
            [argv[0], "-m", "tracehouse.record", "--child", str(fd), "--", *argv[1:]],
            env=env,
            pass_fds=(fd,),
            check=True,
            stdout=subprocess.DEVNULL,
            cwd=Path(argv[1]).parent,
        )
    finally:
        os.close(fd)


def ingest(store, base: Path, argv: list[str], env: dict, passes: int, log) -> dict:
    """Feeds a captured stream to a new trace `passes` times through `tracehouse record`'s
    storing loop; the rate overall, per pass, and the drain at the end."""
    from .. import _core
    from ..formats import python as pyfmt

    stream = base / "stream.bin"
    capture(argv, env, stream)
    name = "ingest"
    store.create_trace(
        name,
        pyfmt.FORMAT,
        event_types=pyfmt.EVENT_TYPES,
        producers=pyfmt.producers("bench", 0),
        format_description=pyfmt.DESCRIPTION,
        importing=True,
    )
    store.add_producers(
        name, [{"id": i, "parent": 0, "kind": "thread", "name": f"t{i}", "attrs": {}} for i in range(1, 9)]
    )
    total, rates = 0, []
    t0 = time.perf_counter()
    with store.bulk(name):
        for k in range(passes):
            p0, n = time.perf_counter(), 0
            reader = _core.RecordReader(str(stream))
            while True:
                chunk = reader.read()
                for type_name, batch in chunk["batches"]:
                    store.append(name, type_name, batch)
                    if type_name in pyfmt.RECORDED:
                        n += batch.num_rows
                if chunk["eof"]:
                    break
            reader.close()
            total += n
            rates.append(round(n / (time.perf_counter() - p0)))
            log(f"  pass {k + 1}: {rates[-1]:,} events/s")
    appended = time.perf_counter() - t0
    store.complete_import(name)
    secs = time.perf_counter() - t0
    stored = store.sql(f'SELECT count(*) AS n FROM "{name}".line_step').to_pylist()[0]["n"]
    return {
        "events": total,
        "seconds": round(secs, 3),
        "events_per_s": round(total / secs),
        "append_events_per_s": round(total / appended),
        "pass_events_per_s": rates,
        "drain_s": round(secs - appended, 3),
        "stream_bytes": stream.stat().st_size * passes,
        "line_steps_stored": stored,
    }


def render(r: dict) -> str:
    """The results as a text table (the docs keep it beside the load average)."""
    m = r["machine"]
    lines = [
        f"bench record (Python {m['python']}, {m['cpus']} CPUs; load average {m['loadavg_before'][0]:.1f} before, "
        f"{m['loadavg_after'][0]:.1f} after; median of {r['repeat']}); times are the program's own, "
        "wall x: the recording end to end (start-up and storing) over the untraced run's",
        "",
    ]
    head = (
        f"{'program':<16}{'untraced s':>11}{'recorded s':>11}{'overhead':>10}{'pure-Py s':>11}{'overhead':>10}"
        f"{'gain':>8}{'events':>12}{'events/s':>11}{'wall x':>8}"
    )
    lines += [head, "-" * len(head)]
    for p in r["programs"]:
        ref = (
            f"{p['reference_s']:>11.3f}{p['reference_overhead']:>9.1f}x{p['gain']:>7.1f}x"
            if "reference_s" in p
            else f"{'':>11}{'':>10}{'':>8}"
        )
        lines.append(
            f"{p['program']:<16}{p['untraced_s']:>11.3f}{p['recorded_s']:>11.3f}{p['overhead']:>9.1f}x{ref}"
            f"{p['events']:>12,}{p['events_per_s']:>11,}{p['wall_overhead']:>7.1f}x"
        )
    worst = max((p["overhead"] for p in r["programs"]), default=0)
    gains = [p["gain"] for p in r["programs"] if "gain" in p]
    lines.append("")
    lines.append(
        f"overhead <= {TARGET_OVERHEAD:.0f}x on every program: {'met' if worst <= TARGET_OVERHEAD else 'missed'} "
        f"(worst {worst:.1f}x)"
    )
    if gains:
        lines.append(
            f">= {TARGET_GAIN:.0f}x less overhead than the pure-Python recorder: "
            f"{'met' if min(gains) >= TARGET_GAIN else 'missed'} (least {min(gains):.1f}x)"
        )
    ing = r.get("ingest")
    if ing:
        lines.append(
            f"store ingest: {ing['events']:,} events in {ing['seconds']:.2f} s = {ing['events_per_s']:,} events/s "
            f"until durable ({ing['append_events_per_s']:,}/s appending; passes "
            f"{', '.join(f'{x / 1e6:.2f}M' for x in ing['pass_events_per_s'])}; drain {ing['drain_s']:.2f} s): "
            f">= {TARGET_INGEST / 1e6:.0f}M events/s {'met' if ing['events_per_s'] >= TARGET_INGEST else 'missed'}"
        )
    return "\n".join(lines)
