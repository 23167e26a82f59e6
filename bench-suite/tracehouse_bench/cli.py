"""`tracehouse bench all`, `tracehouse bench tsbs` and `tracehouse bench otlp`: the suite's command lines.

Declared under the entry-point group `tracehouse.bench` (pyproject.toml): the `tracehouse` command
calls `register(commands)` when one of `BENCHMARKS` is asked for (or every command is listed), the
way its own command modules add theirs; each command takes `--json`, as every command does.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

BENCHMARKS = {
    "all": "every experiment of the seeds (TOD store, QoS writes and reads, SoC-Trace, import, analyses) "
    "against SQLite, PostgreSQL, MariaDB, DuckDB, QuestDB; writes DIR/report.md",
    "otlp": "spans/s over OTLP/HTTP protobuf into tracehouse serve with durable acks, beside line protocol "
    "of the same rows and the OpenTelemetry Collector's telemetrygen in the same run",
    "tsbs": "TSBS's cpu-only queries (its own programs, unmodified) on tracehouse (InfluxQL) vs QuestDB, "
    "same data: median and p99 per query type",
}


def _emit_json(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def _stderr():
    from rich.console import Console

    return Console(stderr=True)


def cmd_bench_tsbs(args) -> int:
    import shutil
    import tempfile

    from . import tsbs

    err = _stderr()
    say = (lambda m: None) if args.json else (lambda m: err.print(f"[dim]{m}[/dim]"))
    work = tempfile.mkdtemp(prefix="tsbs-", dir=args.workdir)
    try:
        result = tsbs.run(
            hosts=args.hosts,
            hours=args.hours,
            interval_s=args.interval,
            queries=args.queries,
            workdir=work,
            progress=say,
        )
    except tsbs.TsbsFailed:
        raise  # (its workdir stays: the error names the servers' logs kept there)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    shutil.rmtree(work, ignore_errors=True)
    if args.json:
        _emit_json(result)
    else:
        sys.stdout.write(tsbs.render(result) + "\n")
    return 0


def _register_tsbs(commands) -> None:
    sp = commands.bench("tsbs", cmd_bench_tsbs, help=BENCHMARKS["tsbs"])
    sp.add_argument("--hosts", type=int, default=100, help="TSBS --scale: hosts")
    sp.add_argument(
        "--hours",
        type=int,
        default=24,
        help="hours of data from 2016-01-01 (at least 13: TSBS's longest query windows are 12 h)",
    )
    sp.add_argument("--interval", type=int, default=10, help="seconds between a host's rows")
    sp.add_argument("--queries", type=int, default=50, help="queries per query type (each run twice, timed once)")
    sp.add_argument("--workdir", help="where the data and both servers live (default: a temporary directory)")


def _experiments() -> tuple[str, ...]:
    from . import bench_all

    return bench_all.EXPERIMENTS + tuple(m.rsplit(".", 1)[1] for m in bench_all.EXTRA_BENCHES)


def cmd_bench_all(args) -> int:
    from tracehouse.errors import BadInput

    from . import bench_all, qos_read_systems

    only = tuple(args.only.split(",")) if args.only else None
    bad = [x for x in only or () if x not in _experiments()]
    if bad:
        raise BadInput(f"unknown experiments {bad}", expected=", ".join(_experiments()))
    peers = tuple(args.read_peers.split(",")) if args.read_peers else None
    known = [n for n in qos_read_systems.SYSTEMS if n != "tracehouse"]
    bad = [x for x in peers or () if x not in known]
    if bad:
        raise BadInput(f"unknown read peers {bad}", expected=", ".join(known))
    err = _stderr()
    log = (lambda s: None) if args.json else (lambda s: err.print(s, highlight=False, markup=False))
    t0 = time.perf_counter()
    result = bench_all.run(
        quick=args.quick,
        medium=args.medium,
        out=args.out,
        workdir=args.workdir,
        only=only,
        log=log,
        read_peers=peers,
    )
    report = Path(args.out) / "report.md"
    if args.json:
        _emit_json(
            {
                "report": str(report),
                "seconds": round(time.perf_counter() - t0, 1),
                "loadavg_before": result["loadavg_before"],
                "loadavg_after": result["loadavg_after"],
                "errors": result["errors"],
                "durations": result["durations"],
            }
        )
    else:
        print(
            f"report: {report} ({time.perf_counter() - t0:.0f} s, load average "
            f"{result['loadavg_before'][0]:.1f} before, {result['loadavg_after'][0]:.1f} after)"
        )
        for k, v in result["errors"].items():
            print(f"{k} failed: {v.splitlines()[0]}")
    return 1 if result["errors"] else 0


def _register_all(commands) -> None:
    sp = commands.bench("all", cmd_bench_all, help=BENCHMARKS["all"])
    sp.add_argument("--quick", action="store_true", help="small sizes and short budgets (CI smoke run, < 5 min)")
    sp.add_argument(
        "--medium",
        action="store_true",
        help="every experiment at about a tenth of the full sizes "
        "(TOD to 10^6 events, reads at 203,200 rows; ~1 h here)",
    )
    sp.add_argument(
        "--out",
        default="bench-report",
        help="directory for report.md, the PNGs and results.json (default ./bench-report)",
    )
    sp.add_argument("--workdir", help="where systems keep their data (default: the system temp dir); removed after")
    sp.add_argument("--only", help="comma list of experiments: " + ",".join(_experiments()))
    sp.add_argument(
        "--read-peers",
        help="comma list of the peers the reads run beside tracehouse (default: every one): "
        "duckdb,postgres,mariadb,sqlite,questdb",
    )


def cmd_bench_otlp(args) -> int:
    from . import otlp

    err = _stderr()
    say = (lambda m: None) if args.json else (lambda m: err.print(f"[dim]{m}[/dim]"))
    result = otlp.run(
        seconds=args.seconds,
        agents=args.agents,
        spans=args.spans,
        rounds=args.rounds,
        telemetrygen=not args.no_telemetrygen,
        tg_procs=args.telemetrygen_procs,
        progress=say,
    )
    if args.json:
        _emit_json(result)
    else:
        sys.stdout.write(otlp.render(result) + "\n")
    return 0


def _register_otlp(commands) -> None:
    sp = commands.bench("otlp", cmd_bench_otlp, help=BENCHMARKS["otlp"])
    sp.add_argument("--seconds", type=float, default=10.0, help="length of each run")
    sp.add_argument("--agents", type=int, default=8, help="connections posting at once")
    sp.add_argument("--spans", type=int, default=1000, help="spans per request (rows per line-protocol body)")
    sp.add_argument(
        "--rounds", type=int, default=2, help="rounds of the OTLP, line-protocol (and telemetrygen) runs, alternated"
    )
    sp.add_argument(
        "--telemetrygen-procs", type=int, default=4, help="telemetrygen processes of the third run of each round"
    )
    sp.add_argument("--no-telemetrygen", action="store_true", help="leave out the telemetrygen run")


def register(commands) -> None:
    _register_all(commands)
    _register_tsbs(commands)
    _register_otlp(commands)
