"""`tracehouse bench import`: how fast each importer parses and stores real files, beside peers.

Owns the harness shared by every format: build the inputs (one case per format,
see `Case`), measure the peers on the largest input, then import each input size
into a fresh store in a child process (its peak RSS is the import's memory) and
report time, throughput, CPU seconds and memory at every size, so O(N) time and
memory bounded by the batch (not the file) show in one table.

Adding a format (the extension point): write a module `bench/import_<case>.py` exposing
`CASE = Case(...)` (how to build inputs of a given size from real data, which importer, which
peers, the target); it is found by its name, there is no list to extend. `import_strace.py` is
the model.

A case with `end_to_end` also runs the `tracehouse import` command itself from outside for every
input (interpreter start-up and imports included: what a user waits for), and its target is
judged on that figure.

Timings are wall seconds of the timed region only (the child's interpreter start
and imports are excluded), plus the CPU seconds of the same region: on a shared
machine the CPU figure stays comparable when neighbours load it, and the load
average is recorded.
"""

from __future__ import annotations

import importlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import TracehouseError

# One module per case, `import_<case>.py` beside this one, each exposing CASE; found by name
# (for --help without importing every module: the case of `import_strace_procs` is strace-procs).
CASE_MODULES: tuple[str, ...] = tuple(
    sorted(f"{__package__}.{p.stem}" for p in Path(__file__).parent.glob("import_?*.py"))
)
CASE_NAMES = tuple(m.rsplit(".import_", 1)[1].replace("_", "-") for m in CASE_MODULES)
SPACE_MARGIN = 256 << 20


class NotEnoughSpace(TracehouseError):
    exit_code = 2


@dataclass
class Input:
    """One input file of a case: its size in the case's unit, bytes, and notes on how it was made."""

    path: Path
    units: int
    bytes: int
    notes: dict = field(default_factory=dict)


@dataclass
class Peer:
    """A baseline measured on the same file: `units` processed in `seconds` (None: not measured)."""

    name: str
    what: str
    seconds: float | None
    units: int | None
    note: str = ""

    def to_json(self, unit: str) -> dict:
        rate = self.units / self.seconds if self.seconds and self.units is not None else None
        return {
            "name": self.name,
            "what": self.what,
            "seconds": self.seconds and round(self.seconds, 3),
            unit: self.units,
            f"{unit}_per_s": rate and round(rate),
            "note": self.note,
        }


@dataclass
class Case:
    """How to benchmark one format's importer.

    build(workdir, sizes) -> one Input per size (in `unit`), made from real data;
    peers: functions Input -> Peer, run on the largest input; importer: the name in
    the importers registry; target: the goal in `unit`s per second (parsed and
    stored), described by `target_text`; bytes_per_unit: for the disk-space check.
    """

    name: str
    unit: str
    importer: str
    default_size: int
    build: Callable[[Path, list[int]], list[Input]]
    peers: tuple[Callable[[Input], Peer], ...]
    target: float
    target_text: str
    bytes_per_unit: float = 100.0
    end_to_end: bool = False  # also time the CLI command from outside; the target is judged on it


def parse_only_peer(fmt: str, counted: str) -> Callable[[Input], Peer]:
    """The peer "the Rust parser alone, batches dropped" of a format driven by
    `_core.NativeParser`: how much of the import is parsing. `counted` is the parser's stat that
    counts the case's units."""

    def peer_parse_only(inp: Input) -> Peer:
        from .. import _core
        from ..formats.parser_loader import read_chunks

        p = _core.NativeParser(fmt)
        t0 = time.perf_counter()
        for chunk in read_chunks(inp.path):
            p.feed(chunk)
        p.finish()
        while p.drain():  # a parser making its rows as they are taken (pprof) after the end
            pass
        return Peer(
            "tracehouse parse",
            "Rust parser only, batches dropped (no store)",
            time.perf_counter() - t0,
            p.stats[counted],
        )

    return peer_parse_only


def cases() -> dict[str, Case]:
    out = {}
    for name in CASE_MODULES:
        case = importlib.import_module(name).CASE
        out[case.name] = case
    return out


# -- the child process: one import, timed, with its peak memory ---------------------------


def _rss_kb(field_: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field_ + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _child_main() -> None:
    """`python -c '... _child_main()' JSON`: import one file into a fresh store, print JSON."""
    args = json.loads(sys.argv[1])
    import tracehouse
    from tracehouse.formats import registry

    imp = registry.importer(args["importer"])
    store = tracehouse.open(args["store"], fsync="off")
    base = _rss_kb("VmRSS")
    t0, c0 = time.perf_counter(), time.process_time()
    report = imp.import_file(store, args["path"], "bench")
    store.close()
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = _rss_kb("VmHWM")
    print(
        json.dumps(
            {
                "seconds": secs,
                "cpu_seconds": cpu,
                "events": report.events,
                "rejected": report.rejected,
                "lines": getattr(report, "lines", None),
                "rss_before_kb": base,
                "peak_rss_kb": peak,
            }
        )
    )


def _run_child(importer: str, path: Path, store: Path) -> dict:
    env = dict(os.environ)
    pkg_parent = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    arg = json.dumps({"importer": importer, "path": str(path), "store": str(store)})
    p = subprocess.run(
        [sys.executable, "-c", "from tracehouse.bench.import_ import _child_main; _child_main()", arg],
        capture_output=True,
        text=True,
        env=env,
    )
    if p.returncode != 0:
        raise RuntimeError(f"import child failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _command_env(pycache: Path) -> dict:
    """The environment of the timed command: our package first on the path, and its bytecode
    compiled once into `pycache` (PYTHONPYCACHEPREFIX) as an installed package has it. Where
    Python may not write bytecode (PYTHONDONTWRITEBYTECODE, as on the team's machines) every
    start compiled our ~40 modules again: 0.1-0.14 CPU-s of each timed import."""
    env = dict(os.environ)
    pkg_parent = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    subprocess.run(
        [
            sys.executable,
            "-c",
            f"import compileall; compileall.compile_dir({str(Path(pkg_parent) / 'tracehouse')!r}, quiet=1)",
        ],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return env


def _run_command(importer: str, path: Path, store: Path, env: dict) -> tuple[float, float]:
    """Wall and CPU seconds of `tracehouse --store STORE import IMPORTER PATH`, from outside
    (start-up included; CPU: the command's user + system time, comparable on a loaded machine);
    `env` from `_command_env`."""
    import resource

    cmd = [
        sys.executable,
        "-m",
        "tracehouse.cli",
        "--store",
        str(store),
        "import",
        importer,
        str(path),
        "--name",
        "bench",
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    secs = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    return secs, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def _warm_up(importer: str, path: Path, tmp: Path, env: dict) -> None:
    """One untimed command on the input's first 10,000 lines (the end-to-end cases are line
    formats): the bytecode of what it loads beyond our package (numpy's, pyarrow's) is written
    to the cache, as an installed package has it. Else the first timed try compiled them: 3.4-3.9
    CPU-s against 2.0-2.5 for the next ones (3M lines, load 4.5), and with `--repeat 2` the
    best-of-2 could still be a compiling try disturbed less."""
    head = tmp / f"warm-up{path.suffix}"
    with open(path, "rb") as f, open(head, "wb") as out:
        out.writelines(itertools.islice(f, 10_000))
    try:
        _run_command(importer, head, tmp / "store-warm-up", env)
    finally:
        head.unlink(missing_ok=True)
        shutil.rmtree(tmp / "store-warm-up", ignore_errors=True)


def _dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


# -- the run ---------------------------------------------------------------------------------


def _default_workdir() -> Path:
    import tracehouse

    p = Path(tracehouse.default_path()).absolute()
    while not p.exists():
        p = p.parent
    return p if p.is_dir() else p.parent


def _count_lines(path: Path) -> int:
    n, last = 0, b"\n"
    with open(path, "rb") as f:
        while chunk := f.read(16 << 20):
            n += chunk.count(b"\n")
            last = chunk[-1:]
    return n + (last != b"\n")  # a last line without its newline counts too


def _given_input(case: Case, path: str | os.PathLike) -> Input:
    """`path` as the case's one input (`--input`): a log kept by an earlier run, or any other."""
    from ..errors import BadInput

    p = Path(path).absolute()
    if case.unit != "lines":
        raise BadInput(f"--input takes a line-based format, not {case.name!r} (measured in {case.unit})")
    if not p.is_file():
        raise BadInput(f"{p}: no such file", expected=f"a {case.name} log (e.g. one kept with --keep)")
    return Input(p, _count_lines(p), p.stat().st_size, {"given": True})


def run(
    fmt: str = "strace",
    size: int | None = None,
    *,
    sizes: list[int] | None = None,
    workdir: str | os.PathLike | None = None,
    peers: bool = True,
    keep: bool = False,
    repeat: int = 1,
    log: Callable[[str], None] = lambda s: None,
    input: str | os.PathLike | None = None,
) -> dict:
    """Benchmark one format's import at several sizes; returns a JSON-able dict.

    size: the headline input, in the case's unit (default: the case's), on which the
    peers run; sizes: every size imported (default: size, 2 x size, 4 x size: above
    the store's checkpoint threshold, so bounded memory shows). Inputs and stores go
    to a temporary directory under `workdir` (default: next to the default store)
    and are removed unless `keep`. repeat: imports per size; the fastest is reported
    (on a shared machine it is the one neighbours disturbed least), all are kept.
    input: import this file instead of building inputs (its line count is the one size), so
    two builds can be compared on the same log (a case that builds its input from a new
    capture each time, like strace-procs, otherwise never imports the same file twice).
    """
    all_cases = cases()
    if fmt not in all_cases:
        from ..errors import BadInput

        raise BadInput(f"no import benchmark for {fmt!r}", expected=" | ".join(all_cases))
    case = all_cases[fmt]
    given = _given_input(case, input) if input is not None else None
    if given is not None:
        size, sizes = given.units, [given.units]
    size = size or case.default_size
    sizes = sorted(set((sizes or [size, 2 * size, 4 * size]) + [size]))
    base = Path(workdir) if workdir else _default_workdir()
    base.mkdir(parents=True, exist_ok=True)  # (a --workdir that does not exist yet, as bench analyze does)
    need = int(sum(sizes) * case.bytes_per_unit * 1.3)
    free = shutil.disk_usage(base).free
    if free < need + SPACE_MARGIN:
        raise NotEnoughSpace(
            f"{base}: {free / 1e9:.2f} GB free, the inputs need about {(need + SPACE_MARGIN) / 1e9:.2f} GB "
            "(use a smaller --size or another --workdir)"
        )
    tmp = Path(tempfile.mkdtemp(prefix=f"tracehouse-bench-import-{fmt}-", dir=base))
    load_before = list(os.getloadavg())
    try:
        if given is None:
            log(f"building {fmt} inputs of {', '.join(f'{s:,}' for s in sizes)} {case.unit} in {tmp}")
        else:
            log(f"using {given.path} ({given.units:,} {case.unit}); stores in {tmp}")
        inputs = [given] if given is not None else case.build(tmp, sizes)
        # the input made for the headline size (a Go profile holds a sample more or fewer than asked)
        headline = min(inputs, key=lambda i: abs(i.units - size))
        peer_rows = []
        if peers:
            for fn in case.peers:
                log(f"peer {fn.__name__} on {headline.units:,} {case.unit}")
                peer_rows.append(fn(headline).to_json(case.unit))
        runs = []
        env = None  # the end-to-end command's environment, bytecode compiled and warmed up once
        for inp in sorted(inputs, key=lambda i: i.units):
            log(f"importing {inp.units:,} {case.unit} ({inp.bytes / 1e6:.0f} MB)")
            tries = []
            for k in range(max(1, repeat)):
                store = tmp / f"store-{inp.units}-{k}"
                tries.append(_run_child(case.importer, inp.path, store) | {"store_bytes": _dir_bytes(store)})
                shutil.rmtree(store, ignore_errors=True)
            # The fastest try is the one neighbours disturbed least; every try is kept. Memory
            # is the worst try's.
            r = dict(min(tries, key=lambda t: t["seconds"]))
            r["tries_seconds"] = [round(t["seconds"], 3) for t in tries]
            r["peak_rss_kb"] = max((t["peak_rss_kb"] or 0) for t in tries) or None
            if case.end_to_end:
                whole = []
                if env is None:
                    env = _command_env(tmp / "pycache")
                    _warm_up(case.importer, inp.path, tmp, env)
                for k in range(max(1, repeat)):
                    store = tmp / f"store-cli-{inp.units}-{k}"
                    whole.append(_run_command(case.importer, inp.path, store, env))
                    shutil.rmtree(store, ignore_errors=True)
                best = min(whole)
                r["command_seconds"] = round(best[0], 3)
                r["command_cpu_seconds"] = round(best[1], 3)
                r["tries_command_seconds"] = [round(x[0], 3) for x in whole]
                r[f"{case.unit}_per_s_end_to_end"] = round(inp.units / best[0])
                r[f"{case.unit}_per_cpu_s_end_to_end"] = round(inp.units / best[1]) if best[1] else None
            # The rows stored (a slice's begin and end are one row), apart from the case's unit:
            # where the unit is "events" (a file's events) the two keys met and rows/s won.
            rows = r["events"]
            r.update(
                {
                    "rows": rows,
                    "rows_per_s": round(rows / r["seconds"]),
                    "events_per_s": round(rows / r["seconds"]),
                    case.unit: inp.units,
                    "bytes_in": inp.bytes,
                    f"{case.unit}_per_s": round(inp.units / r["seconds"]),
                    f"{case.unit}_per_cpu_s": round(inp.units / r["cpu_seconds"]) if r["cpu_seconds"] else None,
                    "rss_growth_kb": (r["peak_rss_kb"] or 0) - (r["rss_before_kb"] or 0),
                }
            )
            runs.append(r)
        head = next(r for r in runs if r[case.unit] == headline.units)
        rate = head[f"{case.unit}_per_s_end_to_end" if case.end_to_end else f"{case.unit}_per_s"]
        result = {
            "format": fmt,
            "unit": case.unit,
            "importer": case.importer,
            "size": size,
            "inputs": [
                {
                    "path": str(i.path) if keep or given is not None else None,
                    case.unit: i.units,
                    "bytes": i.bytes,
                    **i.notes,
                }
                for i in inputs
            ],
            "peers": peer_rows,
            "runs": runs,
            "targets": [{"target": case.target_text, "value": rate, "met": rate >= case.target}],
            "repeat": repeat,
            "machine": {"cpus": os.cpu_count(), "loadavg_before": load_before, "loadavg_after": list(os.getloadavg())},
            "workdir": str(tmp) if keep else None,
        }
        return result
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def render(result: dict):
    """Two rich tables: the largest input against its peers, then every size."""
    from rich import box
    from rich.table import Table

    u = result["unit"]
    runs = result["runs"]
    big = next(r for r in runs if r[u] == result["size"])
    load = result["machine"]["loadavg_before"][0]
    t = Table(
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
        title=f"{result['format']} import of {big[u]:,} {u} ({big['bytes_in'] / 1e6:.0f} MB; "
        f"{result['machine']['cpus']} CPUs, load {load:.1f} before"
        + (f"; best of {result['repeat']}" if result.get("repeat", 1) > 1 else "")
        + ")",
    )
    for col, j in (("system", "left"), ("does", "left"), ("s", "right"), (f"{u}/s", "right")):
        t.add_column(col, justify=j)
    if "command_seconds" in big:
        t.add_row(
            "tracehouse import (command)",
            f"the whole command from outside: start-up, parse, store, close ({big['command_cpu_seconds']:.2f} CPU-s)",
            f"{big['command_seconds']:.2f}",
            f"{big[u + '_per_s_end_to_end'] / 1e6:.2f}M",
        )
    t.add_row(
        "tracehouse import",
        "parse + store (Parquet segments registered)",
        f"{big['seconds']:.2f}",
        f"{big[u + '_per_s'] / 1e6:.2f}M",
    )
    for p in result["peers"]:
        rate = p[f"{u}_per_s"]
        t.add_row(
            p["name"],
            p["what"] + (f" ({p['note']})" if p["note"] else ""),
            "" if p["seconds"] is None else f"{p['seconds']:.2f}",
            "" if rate is None else f"{rate / 1e6:.2f}M",
        )
    s = Table(
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
        title="scaling: time O(N), memory bounded by the batch (peak RSS of the importing process)",
    )
    for col in (u, "rows stored", "s", f"{u}/s", f"{u}/CPU·s", "peak RSS", "RSS growth", "stored"):
        s.add_column(col, justify="right")
    for r in runs:
        s.add_row(
            f"{r[u]:,}",
            f"{r.get('rows', r['events']):,}",
            f"{r['seconds']:.2f}",
            f"{r[u + '_per_s'] / 1e6:.2f}M",
            "" if r[u + "_per_cpu_s"] is None else f"{r[u + '_per_cpu_s'] / 1e6:.2f}M",
            f"{(r['peak_rss_kb'] or 0) / 1024:.0f} MB",
            f"{r['rss_growth_kb'] / 1024:.0f} MB",
            f"{r['store_bytes'] / 1e6:.1f} MB",
        )
    return t, s


def print_report(result: dict, console=None) -> None:
    from rich.console import Console

    console = console or Console()
    for t in render(result):
        console.print(t)
    for tg in result["targets"]:
        mark = "[green]met[/green]" if tg["met"] else "[red]missed[/red]"
        console.print(f"target {tg['target']}: {tg['value'] / 1e6:.2f}M {result['unit']}/s {mark}")
