"""`tracehouse bench record`: what recording a program costs, and how fast its events are stored.

Owns the recorder's benchmark. For each program (pyperformance's nbody, richards, json_dumps,
json_loads and regex_effbot, unchanged, from the installed `pyperformance` package (PyPI; the
`bench` extra), and a threaded file-IO program of ours in `bench/programs/`; all are copied to the
work directory first, beside `bench/programs/pyperf.py`, since nothing under the tracehouse package
is recorded),
in the same run, in --repeat rounds of one run each way (in an order shuffled anew each round):

  untraced     `python -m tracehouse.record.reference --none -- prog.py` (the program as the
               recorder's child starts it, untraced)
  recorded     `tracehouse --store S record --json -- python prog.py`: the command a user runs,
               in a process of its own (the program under the native tracer, its events stored
               in a new trace of a store of its own)
  pure Python  `python -m tracehouse.record.reference --events -- prog.py` (the same events
               captured by a sys.settrace function into lists)
  python       `python prog.py` (its wall time only)

and reports each slowdown (recorded / untraced, pure Python / untraced, medians) of the program's
own time (from its first line to its end and its threads', measured inside the process: the same
start for the three, `record.child`'s), both elapsed and CPU time (of the process, every thread:
the recorder's writer counts), and the gain: the time the pure-Python recorder adds over the time
the native one adds. The pyperformance programs run --loops times their benchmark (PYPERF_LOOPS,
so each takes 0.2-0.5 s untraced): json_loads once takes 0.3 ms, less than the noise of the
machine. Targets: recorded <= 30x untraced, a gain >= 10x.

What the user waits is more than the program's own time: `tracehouse record` starts (its
imports: 150-300 ms), opens the store and creates the trace before the program starts, and
stores the events until durable (the checkpoint's segments fsynced and registered) after it
ends. So a table of its own gives the wall time of each process from its start to its exit:
`python prog.py` against `tracehouse record -- python prog.py` and against the pure-Python
recorder's harness (which stores nothing), the added ms per round with the interval as above.
For regex_effbot (18,201 events: nothing reaches the store before the program's end) that wall
adds 0.28 s at load 2.5-4.8 (0.57 s at load 18) where the program's own elapsed time adds
5-30 ms: the start-up and the storing, not the tracer. Inside the program's own time the recording waits for nothing: its
main thread never sleeps there (schedstat: elapsed = on CPU + waiting for a CPU, to 1.5 ms), the
storing process uses 2.6 ms of CPU per window, as much as beside an untraced run (perf sched,
21 rounds, load 4.7), and what elapsed time adds beyond CPU time is waiting for a core the
machine's other jobs hold.

How the added time is measured. On this project's loaded 2-core machine the runs of one program
spread by more than the native recorder adds to a program whose time is in C and the standard
library (json_loads, regex_effbot: 5-20 ms of CPU on 350 ms; elapsed times spread by +-30 %, CPU
times by +-5 %). So each round runs the three ways back to back in a shuffled order (a slow spell
of the machine, or the storing the last recording left behind, falls on no way in particular), the
time a recorder adds is taken per round (its run minus that round's untraced run: a paired
difference), and the table gives the median of those differences with its confidence interval:
the order statistics of the rounds that hold the median with >= 95 % probability whatever the
distribution (the range at 5 rounds, 94 %; no interval from fewer). The gain is the ratio of the
two medians; its interval, the ratio of the intervals' ends, holds it with >= 90 %; a native
recorder whose interval reaches 0 leaves the gain without an upper end (and a median at 0 or
below, the gain itself: `inf`). A verdict judges the medians, as the table shows them, and names
the programs whose interval still straddles the target; only more rounds, or a quieter machine,
resolve them. Measured at load 13-15 with 21 rounds: json_loads' native recorder added +17.2 ms
of CPU [-2.6, +87.1] to 0.47 s, the pure-Python one +309 [+278, +324]: a CPU gain of 18.0x
[3.2x, inf]; elapsed, +75 ms [-54, +398] against +329 [+100, +666], 4.4x [0.2x, inf]: elapsed
time on a machine that loaded measures the load.

Store ingest: the stream of one recording (the largest program, captured to a file once) is fed
to a new trace through the storing loop of `tracehouse record` (`_core.RecordReader` decoding,
`store.append`) --ingest-passes times, as fast as it goes, each pass's timestamps shifted past
the previous pass's (as one longer recording's would be: a checkpoint never has to sort);
reported: events/s over the whole run until the last segment is durable (the import's final
checkpoint registered), the rate of each pass (a backlog that grows shows as passes slowing
down: appends wait once two checkpoints' worth of rows are pending) and the drain (that final
checkpoint after the last append). Target: >= 5M events/s. The compaction `tracehouse record`
runs once the import is complete (merging the checkpoints' small segments: a decode, sort and
zstd re-encode of the trace) is timed apart: it is not part of the ingest, and the rows are
durable before it starts.

The machine's load average is recorded before and after: other processes skew every number.
"""

from __future__ import annotations

import json
import math
import os
import random
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
    "json_dumps": ("json_dumps.py", [], 20),
    "json_loads": ("json_loads.py", [], 800),
    "regex_effbot": ("regex_effbot.py", [], 8),
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
# The pure-Python recorder is run once, not --repeat times, when it takes longer than this (nbody
# takes minutes under it: its noise is small beside its overhead).
REFERENCE_ONCE_S = 10.0


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


def _harness(mode: str, argv: list[str], env: dict, cwd: Path) -> dict:
    """Wall s, the program's own s and CPU s, and events of `argv` run by the reference harness,
    untraced (`--none`) or under the pure-Python recorder (`--events`): the same runpy start as
    the recorder's child, so the three program times compare like for like."""
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
    return {"wall": wall, "s": got["seconds"], "cpu": got["cpu_seconds"], "events": got["events"]}


def _med(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def median_interval(xs: list[float]) -> tuple[float, float | None, float | None]:
    """The median of `xs` and its distribution-free confidence interval: the order statistics
    x(j) and x(n+1-j) with the largest j for which they hold the median with >= 95 % probability
    (1 - 2 P(Binomial(n, 1/2) < j)); with 5 values the range (94 %), with fewer none."""
    n = len(xs)
    xs = sorted(xs)
    med = statistics.median(xs)
    if n < 5:
        return med, None, None
    j, below = 1, 0.5**n  # P(B <= j - 1) for j = 1
    while True:
        nxt = below + math.comb(n, j) * 0.5**n  # P(B <= j)
        if 1 - 2 * nxt < 0.95:
            break
        j, below = j + 1, nxt
    return med, xs[j - 1], xs[n - j]


def added(runs: list[dict], plain: list[dict], key: str) -> list:
    """[median, low, high] of what `runs` add over the untraced run of their round, in s."""
    return [None if v is None else round(v, 4) for v in median_interval([r[key] - p[key] for r, p in zip(runs, plain)])]


def gain(ref: list, native: list) -> dict:
    """The time the pure-Python recorder adds over the time the native one adds (medians), and its
    interval from the two intervals' ends; None for no upper end: the native one's median (gain)
    or interval (high) reaches 0."""
    floor = 1e-4  # 0.1 ms: a median closer to 0 than this is not a measurable overhead
    point = ref[0] / native[0] if native[0] > floor else None
    lo = hi = None
    if native[1] is not None:
        # A pure-Python run made once (REFERENCE_ONCE_S) has no interval: its value stands for it.
        ref_lo, ref_hi = (ref[1], ref[2]) if ref[1] is not None else (ref[0], ref[0])
        lo = ref_lo / max(native[2], floor)
        hi = ref_hi / native[1] if native[1] > floor else None
    return {
        "gain": None if point is None else round(point, 1),
        "low": None if lo is None else round(lo, 1),
        "high": None if hi is None else round(hi, 1),
    }


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
                row, argv, env = _program(base / "recordings", progs, name, repeat, quick, reference, log)
                out["programs"].append(row)
                if biggest is None or row["events"] > biggest[1]:
                    biggest = (argv, row["events"], env)
            if biggest is not None and ingest_passes > 0:
                log("store ingest")
                out["ingest"] = ingest(store, base, biggest[0], biggest[2], ingest_passes, log)
        finally:
            store.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out["machine"]["loadavg_after"] = list(os.getloadavg())
    return out


def _program(store_path: Path, progs: Path, name: str, repeat: int, quick: bool, reference: bool, log):
    """One program's row: the untraced, recorded, pure-Python and plain runs interleaved `repeat`
    times (the pure-Python one once when it took over REFERENCE_ONCE_S), medians of each."""
    file, args, loops = PROGRAMS[name]
    if quick:
        args, loops = QUICK.get(name, args), max(1, loops // 10)
    argv = [sys.executable, str(progs / file), *args]
    env = _env(loops)
    plain_runs, rec_runs, ref_runs, ref_plain, py_runs, ref_py, rep = [], [], [], [], [], [], None
    order = random.Random(f"{name} {repeat}")  # shuffled, and the same in every run of the bench
    for k in range(repeat):
        ways = ["untraced", "recorded", "python"]
        if reference and (not ref_runs or ref_runs[0]["s"] < REFERENCE_ONCE_S):
            ways.append("pure-Python recorder")
        order.shuffle(ways)
        log(f"{name} ({k + 1} of {repeat}): {', '.join(ways)}")
        for way in ways:
            if way == "untraced":
                plain_runs.append(_harness("--none", argv[1:], env, progs))
            elif way == "python":
                t0 = time.perf_counter()
                subprocess.run(argv, env=env, cwd=progs, check=True, stdout=subprocess.DEVNULL)
                py_runs.append({"wall": time.perf_counter() - t0})
            elif way == "recorded":
                rep, wall = _cli_record(store_path, argv, env, progs, f"{name}-{k}")
                rec_runs.append({"wall": wall, "s": rep["program_seconds"], "cpu": rep["program_cpu_seconds"]})
            else:
                ref_runs.append(_harness("--events", argv[1:], env, progs))
        if len(ref_plain) < len(ref_runs):
            ref_plain.append(plain_runs[-1])
            ref_py.append(py_runs[-1])
    plain, plain_cpu, recorded, recorded_cpu = (
        _med(plain_runs, "s"),
        _med(plain_runs, "cpu"),
        _med(rec_runs, "s"),
        _med(rec_runs, "cpu"),
    )
    row = {
        "program": name,
        "args": args,
        "loops": loops,
        "untraced_s": round(plain, 3),
        "recorded_s": round(recorded, 3),
        "overhead": round(recorded / plain, 2),
        "untraced_cpu_s": round(plain_cpu, 3),
        "recorded_cpu_s": round(recorded_cpu, 3),
        "cpu_overhead": round(recorded_cpu / plain_cpu, 2),
        "untraced_wall_s": round(_med(py_runs, "wall"), 3),
        "recorded_wall_s": round(_med(rec_runs, "wall"), 3),
        "wall_overhead": round(_med(rec_runs, "wall") / _med(py_runs, "wall"), 2),
        "events": rep["events"],
        "by_type": rep["by_type"],
        "events_per_s": round(rep["events"] / recorded),
        "stream_bytes": rep["stream_bytes"],
        "threads": len(rep["threads"]),
    }
    row["added_s"] = added(rec_runs, plain_runs, "s")
    row["added_cpu_s"] = added(rec_runs, plain_runs, "cpu")
    row["added_wall_s"] = added(rec_runs, py_runs, "wall")
    if ref_runs:
        ref_s, ref_cpu = _med(ref_runs, "s"), _med(ref_runs, "cpu")
        # Overhead is the time a recorder adds; the gain compares what each adds, round by round.
        ref_added, ref_added_cpu = added(ref_runs, ref_plain, "s"), added(ref_runs, ref_plain, "cpu")
        g, cg = gain(ref_added, row["added_s"]), gain(ref_added_cpu, row["added_cpu_s"])
        row.update(
            reference_runs=len(ref_runs),
            reference_s=round(ref_s, 3),
            reference_overhead=round(ref_s / plain, 2),
            reference_cpu_s=round(ref_cpu, 3),
            reference_cpu_overhead=round(ref_cpu / plain_cpu, 2),
            reference_events=ref_runs[-1]["events"],
            reference_added_s=ref_added,
            reference_added_cpu_s=ref_added_cpu,
            gain=g["gain"],
            gain_interval=[g["low"], g["high"]],
            cpu_gain=cg["gain"],
            cpu_gain_interval=[cg["low"], cg["high"]],
            reference_added_wall_s=added(ref_runs, ref_py, "wall"),
        )
    return row, argv, env


def _cli() -> list[str]:
    """The `tracehouse` command of this interpreter's environment (its console script, else -m)."""
    script = Path(sys.executable).parent / "tracehouse"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "tracehouse.cli"]


def _cli_record(store_path: Path, argv: list[str], env: dict, cwd: Path, name: str) -> tuple[dict, float]:
    """`tracehouse --store S record --json -- python PROGRAM` as a user runs it, in a process of its
    own (its start-up, the store's opening, the storing, its exit): its report and wall s."""
    t0 = time.perf_counter()
    p = subprocess.run(
        [*_cli(), "--store", str(store_path), "record", "--name", name, "--json", "--", *argv],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # the program's own stdout (--json puts it there)
    )
    wall = time.perf_counter() - t0
    rep = json.loads(p.stdout) if p.stdout.strip() else {}
    if p.returncode != 0 or rep.get("exit_status") != 0:
        raise RuntimeError(
            f"{name}: `tracehouse record` exited with {p.returncode} (program: {rep.get('exit_status')})"
        )
    return rep, wall


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
    span = _ts_span(stream)
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
            reader = _core.RecordReader(str(stream), ts_offset=k * span)
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
        # Inside bulk(): the final checkpoint only (flush() outside it also compacts).
        store.complete_import(name)
        secs = time.perf_counter() - t0
    segments = store.sql(f"SELECT count(*) AS n FROM th.segments WHERE trace = '{name}'").to_pylist()[0]["n"]
    c0 = time.perf_counter()
    store.flush(name)  # what `tracehouse record` ends with: compaction by the store's policy
    compact_s = time.perf_counter() - c0
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
        "segments": segments,
        "compact_s": round(compact_s, 3),
    }


def _ts_span(stream: Path) -> int:
    """One past the stream's last event ts minus its first: the shift between two passes."""
    import pyarrow as pa

    from .. import _core
    from ..formats import python as pyfmt

    lo, hi, reader = None, None, _core.RecordReader(str(stream))
    try:
        while True:
            chunk = reader.read()
            for type_name, batch in chunk["batches"]:
                if type_name not in pyfmt.RECORDED or not batch.num_rows:
                    continue
                r = _core.int_range(pa.Table.from_batches([batch.select(["ts"])]))
                if r:
                    lo, hi = (r[0], r[1]) if lo is None else (min(lo, r[0]), max(hi, r[1]))
            if chunk["eof"]:
                return 0 if lo is None else hi - lo + 1
    finally:
        reader.close()


def _ms(v: float | None) -> str:
    if v is None:
        return "?"
    ms = v * 1e3
    return f"{ms:+.0f}" if abs(ms) >= 100 else f"{ms:+.1f}"


def _added(a: list) -> str:
    """A median added time and its interval, in ms: `+14.2 [+3.1, +29.0]`."""
    return _ms(a[0]) + ("" if a[1] is None else f" [{_ms(a[1])}, {_ms(a[2])}]")


def _x(v: float | None) -> str:
    return "inf" if v is None else f"{v:.1f}x" if v < 100 else f"{v:.0f}x"


def _gain_text(p: dict, key: str) -> str:
    lo, hi = p[key + "_interval"]
    return _x(p[key]) + ("" if lo is None else f" [{_x(lo)}, {_x(hi)}]")


def verdicts(r: dict) -> list[str]:
    """The verdict lines, from the same values the tables show: the gains' medians decide, and the
    programs whose interval straddles the target are named."""
    out = []
    if r["programs"]:
        worst = max(p["overhead"] for p in r["programs"])
        out.append(
            f"overhead <= {TARGET_OVERHEAD:.0f}x on every program: {'met' if worst <= TARGET_OVERHEAD else 'missed'} "
            f"(worst {worst:.1f}x)"
        )
    for key, what in (("gain", "elapsed time"), ("cpu_gain", "CPU time")):
        rows = [p for p in r["programs"] if key in p]
        if not rows:
            continue
        # None: the native recorder's median added time is 0 or less, a gain without bound.
        least = min(rows, key=lambda p: math.inf if p[key] is None else p[key])
        met = least[key] is None or least[key] >= TARGET_GAIN
        line = (
            f">= {TARGET_GAIN:.0f}x less overhead than the pure-Python recorder ({what}): "
            f"{'met' if met else 'missed'} (least {_x(least[key])}, {least['program']})"
        )
        open_ = [
            p
            for p in rows
            if p[key + "_interval"][0] is not None
            and p[key + "_interval"][0] < TARGET_GAIN
            and (p[key + "_interval"][1] is None or p[key + "_interval"][1] >= TARGET_GAIN)
        ]
        if open_:
            line += "; not resolved by the noise: " + ", ".join(f"{p['program']} {_gain_text(p, key)}" for p in open_)
        elif all(p[key + "_interval"][0] is None for p in rows):
            line += "; no intervals (fewer than 5 rounds)"
        out.append(line)
    return out


def render(r: dict) -> str:
    """The results as text tables (the docs keep them beside the load average)."""
    m = r["machine"]
    lines = [
        f"bench record (Python {m['python']}, {m['cpus']} CPUs; load average {m['loadavg_before'][0]:.1f} before, "
        f"{m['loadavg_after'][0]:.1f} after; {r['repeat']} rounds, each way once a round in a shuffled order; "
        "medians); times are the program's own (s: elapsed, cpu: CPU time of its process, every thread); wall x: "
        "`tracehouse record -- python PROGRAM` from its start to its exit over `python PROGRAM`",
        "",
    ]
    head = (
        f"{'program':<16}{'untraced s':>11}{'recorded s':>11}{'overhead':>9}{'pure-Py s':>10}{'overhead':>9}"
        f"{'gain':>7}{'cpu ovh':>8}{'cpu pure':>9}{'cpu gain':>9}{'events':>11}{'events/s':>11}{'wall x':>7}"
    )
    lines += [head, "-" * len(head)]
    for p in r["programs"]:
        ref = (
            f"{p['reference_s']:>10.3f}{p['reference_overhead']:>8.1f}x{_x(p['gain']):>7}"
            if "reference_s" in p
            else f"{'':>10}{'':>9}{'':>7}"
        )
        cpu_ref = (
            f"{p['reference_cpu_overhead']:>8.1f}x{_x(p['cpu_gain']):>9}" if "reference_s" in p else f"{'':>9}{'':>9}"
        )
        lines.append(
            f"{p['program']:<16}{p['untraced_s']:>11.3f}{p['recorded_s']:>11.3f}{p['overhead']:>8.1f}x{ref}"
            f"{p['cpu_overhead']:>7.1f}x{cpu_ref}{p['events']:>11,}{p['events_per_s']:>11,}{p['wall_overhead']:>6.1f}x"
        )
    lines += [
        "",
        "time added per run, ms: median of the rounds' differences to their untraced run [its 95 % interval]; "
        "gain = pure-Python's / native's [>= 90 %]",
        "",
    ]
    cols = [(p, [_added(p["added_s"])], [_added(p["added_cpu_s"])]) for p in r["programs"]]
    for p, el, cpu in cols:
        if "reference_s" in p:
            el += [_added(p["reference_added_s"]), _gain_text(p, "gain")]
            cpu += [_added(p["reference_added_cpu_s"]), _gain_text(p, "cpu_gain")]
    titles = ("native elapsed", "pure-Py elapsed", "gain", "native cpu", "pure-Py cpu", "cpu gain")
    width = [
        max([len(c[k][i]) for c in cols if len(c[k]) > i] + [len(titles[3 * (k - 1) + i])]) + 2
        for k in (1, 2)
        for i in range(3)
    ]
    head = f"{'program':<16}" + "".join(f"{t:>{w}}" for t, w in zip(titles, width, strict=True))
    lines += [head, "-" * len(head)]
    for p, el, cpu in cols:
        cells = [*el, *[""] * (3 - len(el)), *cpu, *[""] * (3 - len(cpu))]
        lines.append(f"{p['program']:<16}" + "".join(f"{c:>{w}}" for c, w in zip(cells, width, strict=True)))
    lines += [
        "",
        "what the user waits, wall s from process start to exit: `python PROGRAM` against `tracehouse record -- "
        "python PROGRAM` (its start-up, the store's opening, the storing until durable, its exit) and the "
        "pure-Python recorder's harness; added ms per run [95 % interval]",
        "",
    ]
    head = f"{'program':<16}{'python s':>10}{'record s':>10}{'record adds':>24}{'pure-Py adds':>24}"
    lines += [head, "-" * len(head)]
    for p in r["programs"]:
        if "added_wall_s" not in p:
            continue
        ref = _added(p["reference_added_wall_s"]) if "reference_added_wall_s" in p else ""
        lines.append(
            f"{p['program']:<16}{p['untraced_wall_s']:>10.3f}{p['recorded_wall_s']:>10.3f}"
            f"{_added(p['added_wall_s']):>24}{ref:>24}"
        )
    lines.append("")
    lines += verdicts(r)
    ing = r.get("ingest")
    if ing:
        lines.append(
            f"store ingest: {ing['events']:,} events in {ing['seconds']:.2f} s = {ing['events_per_s']:,} events/s "
            f"until durable ({ing['append_events_per_s']:,}/s appending; passes "
            f"{', '.join(f'{x / 1e6:.2f}M' for x in ing['pass_events_per_s'])}; drain {ing['drain_s']:.2f} s): "
            f">= {TARGET_INGEST / 1e6:.0f}M events/s {'met' if ing['events_per_s'] >= TARGET_INGEST else 'missed'}"
        )
        if "compact_s" in ing:
            lines.append(
                f"then compaction of its {ing['segments']} segments (after the rows are durable, "
                f"as `tracehouse record` ends): {ing['compact_s']:.2f} s"
            )
    return "\n".join(lines)
