"""The `tracehouse` command: the table of commands, the parser, and running one command.

Owns argument parsing and exit codes: 0 ok, 1 failure, 2 bad input or unknown names,
3 store locked by another writer, 4 disk full, 5 store damaged (its files and catalog disagree:
`tracehouse verify`, `tracehouse repair`). The store is `--store DIR`, else $TRACEHOUSE_HOME,
else ./tracehouse-data.

Commands live one group per module beside this one (`traces`, `importing`, `analyze`,
`results`, `replay`, `serve`, `bench`, `tools`); each has `register(commands)` adding its commands'
arguments. `COMMANDS` and `BENCHMARKS` below name each command's module and its one-line
help, so a run imports only the module of the command it runs: `tracehouse --help` and
`tracehouse ls` load neither pyarrow nor DuckDB's query side for the rest (dev/startup.py
measures it).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable

# name -> (module under tracehouse.cli, help). The order is the order of `tracehouse --help`.
COMMANDS: dict[str, tuple[str, str]] = {
    "bench": ("bench", "benchmarks against peers measured in the same run"),
    "init": ("traces", "create an empty store"),
    "ls": ("traces", "list traces"),
    "info": ("traces", "describe one trace: event types, counts, producers, segments"),
    "search": ("traces", "find traces by name, format, metadata, time range and size"),
    "query": ("traces", "run SQL over the store (DuckDB dialect)"),
    "export": ("traces", "write a trace's events, one file per event type"),
    "rm": ("traces", "delete traces"),
    "compact": ("traces", "merge small segments now (the store also merges them on its own)"),
    "retain": ("traces", "keep a trace's rows for a duration: older whole segments are dropped at compaction"),
    "verify": (
        "traces",
        "check the store against itself: catalog, files, page and WAL checksums, journals, indexes "
        "(exit 1 when anything is damaged, missing or disagrees)",
    ),
    "repair": (
        "traces",
        "rebuild the catalog from what the store's files hold; damaged files go to quarantine/, nothing is deleted",
    ),
    "import": ("importing", "import a file as a new trace"),
    "generate": ("importing", "generate a synthetic workload trace"),
    "demo": (
        "importing",
        "example traces of every format (a generated TOD trace, strace, Chrome, bpftrace, "
        "SystemTap, Paje, CSV, line protocol), then the web UI until Ctrl-C",
    ),
    "serve": ("serve", "ingest server: InfluxDB line protocol over HTTP and TCP, Arrow IPC, read-only SQL over HTTP"),
    "load": ("serve", "write load generator (Rust): seed 003's QoS agents or TSBS cpu-only hosts against a server"),
    "tools": ("tools", "list importers, exporters and analyses (ours and installed plugins)"),
    "record": (
        "record",
        "record a Python program omnisciently (calls, returns, lines, local/attribute/item writes) "
        "into a new trace: tracehouse record -- python prog.py",
    ),
    "debug": (
        "record",
        "travel back in a recorded program: steps both ways, stack, values, origins of values, "
        "breakpoints (tracehouse debug TRACE -c 'next; origin x')",
    ),
    "capture": (
        "replay",
        "run a command under strace, bpftrace or perf, streaming what the tracer writes into a new trace",
    ),
    "replay": ("replay", "replay a strace trace's IO under --root with its timing and threads; store every call"),
    "extrapolate": ("replay", "fit PerfExt, USL and MVA to measured runs and predict higher concurrency"),
    "analyze": (
        "analyze",
        "analyses: spans, call trees, cursors, state and stack at t, density, statistics, "
        "histograms (docs/analyses.md)",
    ),
    "results": ("results", "analysis results saved in the store: list, show, annotate, group, rm"),
}
BENCHMARKS: dict[str, tuple[str, str]] = {
    "ingest": ("bench", "TOD ingest: raw append, tracehouse, SQLite, DuckDB on the same batches (seed 001)"),
    "write": (
        "serve",
        "seed 003 write matrix (writers x rows per batch): tracehouse over loopback vs QuestDB, "
        "PostgreSQL, MariaDB, SQLite, with the seed's statistical protocol",
    ),
    "ui": (
        "serve",
        "web UI endpoints over HTTP on one trace (target: 1 s each), beside plain SQL answering the same questions",
    ),
    "chrome": (
        "bench",
        "Chrome JSON import: records/s and peak memory at several sizes, beside read, parse-only and json.load",
    ),
    "replay": ("replay", "replay: issue-time error at 10,000 IOPS, asap calls/s and overhead, extrapolation errors"),
    "analyze": ("bench", "analyses on a TOD trace (seeds 000, 001, 004) against the same questions in DuckDB"),
    "import": ("bench", "importers on real files: throughput at 3 sizes, peak memory, peers (wc -l, a Python regex)"),
    "engines": (
        "bench",
        "Q1-Q5 (seed 003) and the TOD statistics on DuckDB vs Spark local[2], same store, same answers",
    ),
    "record": (
        "record",
        "recording Python programs: overhead against the untraced program and a pure-Python "
        "sys.settrace recorder (pyperformance nbody, richards, json, regex; threaded file IO), "
        "events/s into the store",
    ),
    "debug": (
        "record",
        "tracehouse debug on a big recording (TOD generator, 10M events by default): steps both "
        "ways and origins of values, p50/p99 (targets on 100M: 50 ms a step, 200 ms an origin)",
    ),
    "integrity": (
        "bench",
        "page checksums: import/generate with and without them; verify MB/s beside a plain read "
        "and a pyarrow decode of the same files",
    ),
}
# Benchmarks of other distributions come through this entry-point group, each entry a benchmark's
# name and the module that registers it (`register(commands)`, as ours do). tracehouse's benchmark
# suite (bench-suite/ in the source tree: the seeds' experiments against the peer databases) adds
# its commands so; they are named here only to say how to install the suite when it is missing.
BENCH_GROUP = "tracehouse.bench"
SUITE_BENCHMARKS = ("all", "tsbs")
SUITE_MISSING = (
    "is in tracehouse's benchmark suite, which is not installed: pip install ./bench-suite "
    "from tracehouse's source tree (make setup installs it)"
)


def bench_plugins(name: str | None = None) -> dict[str, object]:
    """{benchmark name: its entry point} of the installed distributions (one name, or all)."""
    from importlib.metadata import entry_points

    eps = entry_points(group=BENCH_GROUP, name=name) if name else entry_points(group=BENCH_GROUP)
    return {ep.name: ep for ep in eps if ep.name not in BENCHMARKS}


class Commands:
    """Where a module adds its subcommands (`add`) and benchmarks (`bench`); the help of each
    is the table's. A name already added (the module was registered) is not added twice."""

    def __init__(self, sub, bench_sub) -> None:
        self._sub = sub
        self._bench_sub = bench_sub
        self.added: set[tuple[str, str]] = set()

    def _parser(self, where: str, name: str, fn, help: str | None = None) -> argparse.ArgumentParser:
        sub, table = (self._sub, COMMANDS) if where == "command" else (self._bench_sub, BENCHMARKS)
        help = table[name][1] if name in table else help
        if (where, name) in self.added:  # another distribution naming one of ours: ours stays
            return argparse.ArgumentParser(prog=name)
        sp = sub.add_parser(name, help=help, description=help)
        self.added.add((where, name))
        if fn is not None:
            sp.add_argument("--json", action="store_true", help="print machine-readable JSON")
            sp.set_defaults(fn=fn)
        return sp

    def add(self, name: str, fn: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
        """`tracehouse NAME ...`; fn(args) returns the exit code."""
        return self._parser("command", name, fn)

    def bench(
        self, name: str, fn: Callable[[argparse.Namespace], int], help: str | None = None
    ) -> argparse.ArgumentParser:
        """`tracehouse bench NAME ...`: a benchmark printing numbers beside peers measured in the same run
        (`help`: for a benchmark of another distribution, which our table does not name)."""
        return self._parser("bench", name, _interrupted_by_sigterm(fn), help)


def _interrupted_by_sigterm(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """`fn` with SIGTERM raising KeyboardInterrupt, as Ctrl-C does: a benchmark stopped by
    timeout(1) or a cancelled job then leaves its `with` blocks, which stop the servers and
    peers it started. Left to the default action the signal ended the bench at once and its
    `tracehouse serve` (or QuestDB, PostgreSQL, MariaDB) ran on, loading the machine."""

    def run(args: argparse.Namespace) -> int:
        import signal

        def stop(signum, frame):
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, stop)
        return fn(args)

    return run


class _Version(argparse.Action):
    """--version, reading the installed package's version only when asked."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from .. import __version__

        parser.exit(message=f"tracehouse {__version__}\n")


def requested(argv: list[str]) -> tuple[str | None, str | None]:
    """(command, benchmark) named on the command line, without parsing the rest."""
    words = iter(argv)
    names = []
    for w in words:
        if w == "--store":
            next(words, None)
        elif not w.startswith("-"):
            names.append(w)
            if len(names) == 2 or names[0] != "bench":
                break
    return (names[0] if names else None), (names[1] if len(names) > 1 else None)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser (every module registered) when `argv` is None; else the parser with
    full arguments only for the command `argv` names (the others listed by name and help)."""
    p = argparse.ArgumentParser(prog="tracehouse", description="A warehouse for execution traces.")
    p.add_argument("--version", action=_Version, help="show the version and exit")
    p.add_argument("--store", help="store directory (default: $TRACEHOUSE_HOME or ./tracehouse-data)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    listed = True  # the commands not loaded are listed by name (help, an unknown command's error)
    plugins: dict[str, object] = {}  # other distributions' benchmarks to register
    benchmarks_listed = argv is None  # every benchmark's name is in the parser (so the suite's missing ones too)
    if argv is None:
        modules = list(dict.fromkeys(m for m, _ in [*COMMANDS.values(), *BENCHMARKS.values()]))
        plugins = bench_plugins()
    else:
        command, bench = requested(argv)
        pick = BENCHMARKS.get(bench or "") if command == "bench" else COMMANDS.get(command or "")
        modules = [pick[0]] if pick else []
        if command == "bench" and not pick and bench:
            plugins = bench_plugins(bench)
        # A known command without --help needs no other command's parser (~30 of them: 10 ms of
        # the 0.1 s `tracehouse ls` takes).
        listed = not (pick or plugins) or "-h" in argv or "--help" in argv
        if listed and command == "bench":
            plugins = bench_plugins()
            benchmarks_listed = True
    bench_parser = sub.add_parser("bench", help=COMMANDS["bench"][1], description=COMMANDS["bench"][1])
    commands = Commands(sub, bench_parser.add_subparsers(dest="bench", required=True, metavar="BENCHMARK"))
    commands.added.add(("command", "bench"))
    for m in modules:
        importlib.import_module(f"{__package__}.{m}").register(commands)
    for name in COMMANDS if listed else ():  # the commands of modules not loaded: listed, not runnable
        if ("command", name) not in commands.added:
            commands._parser("command", name, None)
    for name in BENCHMARKS if listed else ():
        if ("bench", name) not in commands.added:
            commands._parser("bench", name, None)
    for module in dict.fromkeys(ep.value for ep in plugins.values()):
        importlib.import_module(module).register(commands)
    if benchmarks_listed:
        for name in SUITE_BENCHMARKS:
            if ("bench", name) not in commands.added:
                commands._parser(
                    "bench", name, None, help="in the benchmark suite, not installed: pip install ./bench-suite"
                )
    return p


def main(argv: list[str] | None = None) -> int:
    # numpy's OpenBLAS starts a thread per core at import, which spin: importing numpy + pyarrow
    # took 0.24 CPU-s with them, 0.17 with one (load 8, 4 runs each); `tracehouse import strace`
    # of 3,000 lines 0.40 -> 0.32 CPU-s (median of 6, load 6.5). No command does BLAS work big
    # enough to gain from them (extrapolate's fits are 3x3). Only when the user chose no number.
    import os

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # pyarrow's allocator: jemalloc, not its default mimalloc, unless the user chose one (read
    # when pyarrow first allocates; nothing has imported it yet). mimalloc hands freed memory
    # back to the OS, so each checkpoint's buffers faulted in freshly zeroed (huge) pages again:
    # clear_page was 14 % of the samples of the server's ingest path. Measured alternately on
    # this machine (medians): `tracehouse import strace` of a 3M-line log of 891 processes
    # (7 runs each) 2.16 -> 1.94 CPU-s, 1.37 -> 1.26 s, peak RSS 272 -> 237 MB; streaming 10M
    # TOD events through the store alone (/tmp/ib/prof.py, 6 each) 1.71 -> 1.54 CPU-s, 1.21 ->
    # 1.11 s, but `bench ingest` (6 pairs of 3 runs) showed no difference beyond its noise.
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")
    argv = sys.argv[1:] if argv is None else list(argv)
    command, bench = requested(argv)
    if command == "bench" and bench in SUITE_BENCHMARKS and not bench_plugins(bench):
        from ..errors import BadInput

        return _failed(argv, BadInput(f"tracehouse bench {bench} {SUITE_MISSING}"))
    args = build_parser(argv).parse_args(argv)
    from ..errors import TracehouseError

    try:
        return args.fn(args)
    except TracehouseError as e:
        return _failed(argv if getattr(args, "json", False) else [], e)
    except KeyboardInterrupt:
        from .output import err

        err.print("interrupted")
        return 130
    except BrokenPipeError:
        return 0


def _failed(argv: list[str], e) -> int:
    """Report a TracehouseError (as JSON too when `argv` asks for --json); its exit code."""
    from rich.markup import escape

    from .output import emit_json, err

    if "--json" in argv:
        emit_json({"error": str(e), "kind": type(e).__name__})
    err.print(f"[red]error:[/red] {escape(str(e))}", highlight=False)
    return e.exit_code
