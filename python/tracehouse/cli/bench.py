"""`tracehouse bench ...`: the benchmarks' command lines (each prints numbers beside peers
measured in the same run). The benchmarks themselves live in `bench/`; `bench write`, `bench ui`
(cli/serve.py), `bench replay` (cli/replay.py), `bench record` and `bench debug` (cli/record.py)
sit with their commands. `bench all` and `bench tsbs` are the benchmark suite's (bench-suite/, a
separate distribution: command.BENCH_GROUP).
"""

from __future__ import annotations

from .output import emit_json, err, out


def cmd_bench_ingest(args) -> int:
    from ..bench import tod_ingest

    return tod_ingest.run_args(args)


def _register_ingest(commands) -> None:
    sp = commands.bench("ingest", cmd_bench_ingest)
    from ..bench import tod_ingest

    tod_ingest.add_arguments(sp)


def cmd_bench_integrity(args) -> int:
    from ..bench import integrity

    result = integrity.run(
        args.events,
        args.csv_rows,
        args.rounds,
        workdir=args.workdir,
        progress=None if args.json else (lambda m: err.print(m, highlight=False)),
    )
    if args.json:
        emit_json(result)
    else:
        out.print(integrity.render(result), highlight=False, markup=False)
    return 0


def _register_integrity(commands) -> None:
    sp = commands.bench("integrity", cmd_bench_integrity)
    sp.add_argument("--events", type=int, default=5_000_000, help="TOD events generated per run (default 5M)")
    sp.add_argument("--csv-rows", type=int, default=2_000_000, help="CSV rows imported per run (default 2M)")
    sp.add_argument(
        "--rounds", type=int, default=3, help="runs with and without page checksums, alternating (default 3)"
    )
    sp.add_argument("--workdir", help="where the stores go (default: a temporary directory, removed)")


def cmd_bench_chrome(args) -> int:
    from ..bench import chrome

    sizes = [int(x) for x in args.events.split(",")]
    result = chrome.run(
        sizes,
        workdir=args.workdir,
        progress=None
        if args.json
        else lambda r: err.print(
            f"{r['mode']} {r['records']:,}: {r['records_per_s']:,} records/s, peak {r['max_rss'] / 2**20:.0f} MB"
        ),
    )
    if args.json:
        emit_json(result)
    else:
        out.print(chrome.render(result), highlight=False)
    return 0


def _register_chrome(commands) -> None:
    sp = commands.bench("chrome", cmd_bench_chrome)
    sp.add_argument("--events", default="1000000,4000000,16000000", help="comma-separated sizes (default 1M,4M,16M)")
    sp.add_argument("--workdir", help="where files and stores go (default: a temporary directory, removed)")


def cmd_bench_analyze(args) -> int:
    from ..bench import analyze

    result = analyze.run(
        args.events,
        workdir=args.workdir,
        queries=args.queries,
        duck_queries=args.duck_queries,
        keep=args.keep,
        progress=None if args.json else (lambda msg: err.print(msg, highlight=False)),
    )
    if args.json:
        emit_json(result)
        return 0
    out.print(analyze.render(result))
    for q in result["questions"]:
        out.print(f"  {q['question']}: {q['detail']}", highlight=False, markup=False)
    return 0


def _register_analyze(commands) -> None:
    sp = commands.bench("analyze", cmd_bench_analyze)
    sp.add_argument("--events", type=int, default=100_000_000, help="trace size (default 100M; ~6 GB of disk)")
    sp.add_argument("--workdir", help="where the temporary store goes (default: the system temp dir)")
    sp.add_argument("--queries", type=int, default=1000, help="random inputs per latency question (default 1000)")
    sp.add_argument("--duck-queries", type=int, default=20, help="of them, asked of DuckDB too (default 20)")
    sp.add_argument("--keep", action="store_true", help="keep the store afterwards (prints where)")


def cmd_bench_import(args) -> int:
    from ..bench import import_

    log = (lambda s: None) if args.json else (lambda s: err.print(f"[dim]{s}[/dim]"))
    sizes = [int(x) for x in args.sizes.split(",")] if args.sizes else None
    result = import_.run(
        args.format,
        args.size,
        sizes=sizes,
        workdir=args.workdir,
        peers=not args.no_peers,
        keep=args.keep,
        repeat=args.repeat,
        log=log,
        input=args.input,
    )
    if args.json:
        emit_json(result)
    else:
        import_.print_report(result)
    return 0


def _register_import(commands) -> None:
    from ..bench import import_

    sp = commands.bench("import", cmd_bench_import)
    sp.add_argument(
        "--format",
        default="strace",
        help="which case: "
        + " | ".join(import_.CASE_NAMES)
        + " (default strace; strace-procs: 3M lines of many multithreaded processes, timed end to end)",
    )
    sp.add_argument(
        "--size", type=int, help="headline input, in the format's unit, where the peers run (strace: lines; default 5M)"
    )
    sp.add_argument("--sizes", help="every input size imported, comma separated (default: size, 2 x size, 4 x size)")
    sp.add_argument("--workdir", help="where inputs and stores go (default: next to the store); removed afterwards")
    sp.add_argument("--keep", action="store_true", help="keep the inputs (their paths are in the JSON)")
    sp.add_argument("--no-peers", action="store_true", help="skip the peers")
    sp.add_argument("--repeat", type=int, default=1, help="imports per size, the fastest reported (default 1)")
    sp.add_argument(
        "--input",
        metavar="FILE",
        help="import this log instead of making inputs (its line count is "
        "the one size): compare two builds on the same file, e.g. one kept with --keep",
    )


def cmd_bench_engines(args) -> int:
    import sys

    from ..bench import engines

    say = (lambda m: None) if args.json else (lambda m: err.print(f"[dim]{m}...[/dim]"))
    result = engines.run(
        scale=1 / args.scale,
        tod_events=args.tod_events,
        repeat=args.repeat,
        master=args.master,
        workdir=args.workdir,
        say=say,
    )
    if args.json:
        emit_json(result)
    else:
        sys.stdout.write(engines.render(result) + "\n")
    return 0 if all(q["identical"] for q in result["queries"]) else 1


def _register_engines(commands) -> None:
    sp = commands.bench("engines", cmd_bench_engines)
    sp.add_argument(
        "--scale",
        type=int,
        default=1,
        help="divide every run of the QoS data set's 2,032,000 rows by this (runs keep >= 10 rows)",
    )
    sp.add_argument("--tod-events", type=int, default=10_000_000)
    sp.add_argument("--repeat", type=int, default=3, help="warm runs per query (the median is reported)")
    sp.add_argument("--master", default="local[2]", help="Spark master URL")
    sp.add_argument("--workdir", help="where the store is built (default: a temporary directory, removed)")


def register(commands) -> None:
    for reg in (
        _register_ingest,
        _register_chrome,
        _register_analyze,
        _register_import,
        _register_engines,
        _register_integrity,
    ):
        reg(commands)
