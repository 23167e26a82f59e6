"""`tracehouse serve` (and, from the load generator, `tracehouse load`): thin shells.

Registered through `cli/command.py`'s COMMANDS and BENCHMARKS.
"""

from __future__ import annotations

import json
import logging
import os

from ..errors import BadInput
from ..server.config import ServerConfig


def _size(s: str) -> int:
    """'64M', '1G', '512k' or a plain byte count."""
    s = s.strip().upper().rstrip("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    return int(float(s[:-1] if mult > 1 else s) * mult)


def cmd_serve(args) -> int:
    from .. import default_path
    from ..server.run import serve, write_ready_file

    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    cfg = ServerConfig(
        host=args.host,
        port=args.port,
        tcp_port=None if args.tcp_port < 0 else args.tcp_port,
        fsync=args.fsync,
        group_commit_ms=args.group_commit_ms,
        ack=args.ack,
        token=args.token or os.environ.get("TRACEHOUSE_TOKEN") or None,
        format=args.trace_format,
        create_traces=not args.no_create,
        tcp_bucket=args.tcp_bucket,
        otlp_trace=args.otlp_trace,
        max_body=_size(args.max_body),
        max_line=_size(args.max_line),
        max_connections=args.max_connections,
        idle_timeout=args.idle_timeout,
        max_inflight=_size(args.max_inflight),
        overload_wait=args.overload_wait,
        request_timeout=args.request_timeout,
        min_rate=_size(args.min_rate),
        query_timeout=args.query_timeout,
        query_workers=args.query_workers,
        max_answer=_size(args.max_answer),
        query_memory=_size(args.query_memory),
        max_statement=_size(args.max_statement),
        max_parse_nodes=args.max_parse_nodes,
        max_relations=args.max_relations,
        scrub_interval=args.scrub_interval,
        ui=not args.no_ui,
    )
    return serve(args.store or default_path(), cfg, ready=write_ready_file(args.ready_file))


def register(commands) -> None:
    d = ServerConfig()
    sp = commands.add("serve", cmd_serve)
    sp.add_argument("--host", default=d.host, help="address to bind (default 127.0.0.1; others need --token)")
    sp.add_argument("--port", type=int, default=d.port, help=f"HTTP port (default {d.port}; 0 picks a free one)")
    sp.add_argument(
        "--tcp-port",
        type=int,
        default=d.tcp_port,
        help=f"line protocol over TCP (default {d.tcp_port}; 0 picks a free one, -1 turns it off)",
    )
    sp.add_argument(
        "--fsync",
        choices=("always", "batch", "off"),
        default=d.fsync,
        help="durability of acknowledged writes (default batch: group commit)",
    )
    sp.add_argument(
        "--group-commit-ms",
        type=float,
        default=d.group_commit_ms,
        help=f"fsync batch: records nobody waits for are fsynced within this (default {d.group_commit_ms:g})",
    )
    sp.add_argument(
        "--ack",
        choices=("durable", "written"),
        default=d.ack,
        help="when writes are acknowledged: durable (default: once fsynced) or written (once in the "
        "WAL: survives a crash of the server, fsynced within --group-commit-ms; a power loss in "
        "that window may lose them, as with QuestDB's and InfluxDB's defaults)",
    )
    sp.add_argument(
        "--token",
        help="required for every request but /ping ('Authorization: Token ...'), checked "
        "on the request head before any body is read; default $TRACEHOUSE_TOKEN",
    )
    sp.add_argument("--trace-format", default=d.format, help=f"format of traces created by writes (default {d.format})")
    sp.add_argument("--no-create", action="store_true", help="refuse writes to unknown buckets (404)")
    sp.add_argument("--tcp-bucket", default=d.tcp_bucket, help="trace of TCP lines whose connection names none")
    sp.add_argument(
        "--otlp-trace",
        default=d.otlp_trace,
        help=f"trace of OTLP writes (/v1/traces, /v1/logs) naming none by ?trace= or X-Tracehouse-Trace "
        f"(default {d.otlp_trace})",
    )
    sp.add_argument("--max-body", default="64M", help="largest HTTP body, decompressed too (default 64M)")
    sp.add_argument("--max-line", default="1M", help="longest line-protocol line (default 1M)")
    sp.add_argument(
        "--max-connections",
        type=int,
        default=d.max_connections,
        help=f"open connections per protocol (default {d.max_connections})",
    )
    sp.add_argument(
        "--idle-timeout",
        type=float,
        default=d.idle_timeout,
        help=f"seconds a connection may send nothing (default {d.idle_timeout:g})",
    )
    sp.add_argument(
        "--max-inflight",
        default="256M",
        help="body bytes received but not yet durable, all clients (default 256M); then 503 / TCP pause",
    )
    sp.add_argument(
        "--overload-wait",
        type=float,
        default=d.overload_wait,
        help="seconds a request waits for in-flight room before 503 (default 2)",
    )
    sp.add_argument(
        "--request-timeout",
        type=float,
        default=d.request_timeout,
        help=f"seconds a whole HTTP request (head and body) may take from its first byte "
        f"(default {d.request_timeout:g}; 408 beyond)",
    )
    sp.add_argument(
        "--min-rate",
        default="1k",
        help="bytes/s an HTTP body must average after its first --idle-timeout seconds "
        "(default 1k; 408 below; 0 turns it off)",
    )
    sp.add_argument(
        "--query-timeout",
        type=float,
        default=d.query_timeout,
        help=f"seconds from a SQL query's arrival to its answer, planning included, before its "
        f"process is killed (default {d.query_timeout:g}; 504; 0: no limit)",
    )
    sp.add_argument(
        "--query-workers",
        type=int,
        default=d.query_workers,
        help=f"SQL query processes side by side, plus one for short statements (default {d.query_workers})",
    )
    sp.add_argument(
        "--query-memory",
        default="2G",
        help="resident memory one SQL query's process may hold (default 2G; 422 beyond; 0: no limit)",
    )
    sp.add_argument("--max-statement", default="64k", help="largest SQL statement in bytes (default 64k; 413 beyond)")
    sp.add_argument(
        "--max-parse-nodes",
        type=int,
        default=d.max_parse_nodes,
        help=f"largest parse tree of a SQL statement, in nodes (default {d.max_parse_nodes:,}; 422 beyond)",
    )
    sp.add_argument(
        "--max-relations",
        type=int,
        default=d.max_relations,
        help=f"most tables, joins and subqueries in one SQL statement (default {d.max_relations}; 422 beyond)",
    )
    sp.add_argument(
        "--scrub-interval",
        type=float,
        default=d.scrub_interval,
        help="seconds between two checks of every segment's page checksums (DuckDB does not check them "
        "when it reads); a damaged segment is logged and marked, and queries naming it fail naming it "
        "(default 0: off)",
    )
    sp.add_argument(
        "--max-answer", default="64M", help="largest SQL answer, JSON or Arrow, in bytes (default 64M; 422 beyond)"
    )
    sp.add_argument("--ready-file", help="write the bound addresses as JSON here once serving")
    sp.add_argument("--quiet", action="store_true", help="log warnings only")
    sp.add_argument("--no-ui", action="store_true", help="do not serve the web UI (/, /ui/, /api/ui/)")
    register_load(commands)
    register_bench(commands)
    register_bench_ui(commands)


def cmd_load(args) -> int:
    from ..workload import loadgen as load
    from .output import emit_json, out

    target = load.Target.parse(
        args.url, tcp_port=args.tcp_port, token=args.token or os.environ.get("TRACEHOUSE_TOKEN") or None
    )
    agents = args.hosts if args.workload == "cpu" and args.hosts else args.agents
    rep = load.run(
        args.workload,
        target=target,
        protocol=args.protocol,
        bucket=args.bucket,
        agents=agents,
        rows_per_batch=args.rows_per_batch,
        interval_ms=args.interval,
        duration_s=args.duration,
        seed=args.seed,
    )
    if args.json:
        emit_json(rep)
    else:
        out.print(load.render(rep), highlight=False)
    return 0 if rep["rows_sent"] else 1


def register_load(commands) -> None:
    sp = commands.add("load", cmd_load)
    sp.add_argument(
        "workload",
        choices=("qos", "cpu"),
        help="qos: 13 id tags + 48 result fields per row; cpu: TSBS cpu-only, 10 tags + 10 fields",
    )
    sp.add_argument("--agents", type=int, default=8, help="concurrent agents (connections), default 8")
    sp.add_argument("--hosts", type=int, help="cpu: simulated hosts (= agents)")
    sp.add_argument(
        "--interval",
        type=float,
        default=0.0,
        help="ms between an agent's batches (default 0: send as soon as acknowledged)",
    )
    sp.add_argument("--rows-per-batch", type=int, default=1000)
    sp.add_argument("--duration", type=float, default=10.0, help="seconds (default 10)")
    sp.add_argument(
        "--protocol",
        choices=("http", "tcp", "tcp-acks", "arrow"),
        default="http",
        help="http: line protocol, 2xx = durable (in the WAL under serve --ack written); tcp: line protocol, nothing acknowledged; tcp-acks: "
        "tracehouse durable offsets; arrow: Arrow IPC over HTTP",
    )
    sp.add_argument("--url", default="http://127.0.0.1:8086", help="server (default http://127.0.0.1:8086)")
    sp.add_argument("--tcp-port", type=int, default=8094, help="line protocol TCP port (default 8094)")
    sp.add_argument("--bucket", help="trace to write (default: the workload's name)")
    sp.add_argument("--token")
    sp.add_argument("--seed", type=int, default=42)


def cmd_bench_write(args) -> int:
    from pathlib import Path

    from ..bench import concurrent_writes as write
    from .output import emit_json, err, out

    if args.half_rate:
        peers = () if args.peers == "none" else tuple(args.peers.split(","))
        unknown = [p for p in peers if p not in write.HALF_RATE_PEERS]
        if unknown:
            raise BadInput(
                f"--peers: unknown peer {unknown[0]!r}", expected=", ".join(write.HALF_RATE_PEERS) + " or none"
            )
        res = write.half_rate(
            protocols=tuple(args.half_rate.split(",")),
            workload=args.workload,
            seconds=args.seconds or 10.0,
            ack=args.ack,
            workdir=args.workdir,
            repeat=args.repeat,
            peers=peers,
        )
        if args.json:
            emit_json(res)
        else:
            from rich.console import Console

            Console(width=170, soft_wrap=True).print(write.render_half_rate(res))
        return 0
    writers = (
        tuple(int(x) for x in args.writers.split(","))
        if args.writers
        else (write.QUICK_WRITERS if args.quick else write.WRITERS)
    )
    batches = (
        tuple(int(x) for x in args.rows_per_batch.split(","))
        if args.rows_per_batch
        else (write.QUICK_BATCHES if args.quick else write.BATCHES)
    )
    systems = tuple(args.systems.split(",")) if args.systems else write.DEFAULT_SYSTEMS
    seconds = args.seconds if args.seconds is not None else (0.5 if args.quick else 2.0)
    max_runs = args.max_runs if args.max_runs is not None else (8 if args.quick else 20)

    def progress(done, total, cell):
        if cell is not None and not args.json:
            err.print(
                f"[{done}/{total}] {cell['system']:>16} writers={cell['writers']:<4} rows/batch="
                f"{cell['rows_per_batch']:<6} {cell['rows_per_s']:>12,.0f} rows/s ±{(cell['rel_se'] or 0) * 100:.1f}% "
                f"({cell['runs']} runs{', ' + str(cell['errors']) + ' errors' if cell['errors'] else ''})",
                highlight=False,
            )

    result = write.run(
        systems=systems,
        writers=writers,
        batches=batches,
        workload=args.workload,
        seconds=seconds,
        min_runs=args.min_runs,
        max_runs=max_runs,
        workdir=args.workdir,
        progress=progress,
    )
    outdir = Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / "bench-write.json").write_text(json.dumps(result, indent=1))
    png = write.plot(result, outdir / "bench-write.png")
    if args.json:
        emit_json(result)
        return 0
    from rich.console import Console

    console = Console(width=max(110, 26 + 15 * len(result["systems"])), soft_wrap=True)
    console.print(write.render(result))
    pairs = write.render_pairings(result)
    if pairs is not None:
        console.print(pairs)
    from rich.markup import escape

    for name, why in result["skipped"].items():
        out.print(f"skipped {name}: {escape(why)}")  # "[bench]" is not rich markup
    out.print(
        f"JSON: {outdir / 'bench-write.json'}" + (f"   plot: {png}" if png else "   (no plot: matplotlib missing)")
    )
    return 0


def register_bench(commands) -> None:
    from ..bench import concurrent_writes as write

    sp = commands.bench("write", cmd_bench_write)
    sp.add_argument(
        "--systems",
        help="comma list (default " + ",".join(write.DEFAULT_SYSTEMS) + "; also "
        "questdb-tcp, questdb-sync and tracehouse-{http,tcp,arrow}-written; the "
        "QuestDB, PostgreSQL and MariaDB ones come with the benchmark suite)",
    )
    sp.add_argument("--writers", help="comma list (default 1,2,4,8,16,32,64,128)")
    sp.add_argument("--rows-per-batch", help="comma list (default 1,5,10,50,100,500,1000,5000,10000)")
    sp.add_argument("--workload", choices=("qos", "cpu"), default="qos")
    sp.add_argument(
        "--quick",
        action="store_true",
        help="writers 1,16,128 x rows/batch 10,1000,10000, 0.5 s runs, at most 8 runs per cell",
    )
    sp.add_argument("--seconds", type=float, help="length of one timed run (default 2, quick 0.5)")
    sp.add_argument("--min-runs", type=int, default=5, help="runs per cell at least (default 5, the seed's)")
    sp.add_argument("--max-runs", type=int, help="runs per cell at most while SE >= 5%% (default 20, quick 8)")
    sp.add_argument("--workdir", help="where the systems keep their data (default: a temporary directory)")
    sp.add_argument("--out", default=".", help="directory for bench-write.json and bench-write.png (default .)")
    sp.add_argument(
        "--half-rate",
        metavar="PROTOCOLS",
        help="instead of the matrix: ack latency at half the maximum rate, 128 agents x 1,000 rows, "
        "per protocol (comma list of arrow, http, tcp-acks; the target is p99 <= 20 ms)",
    )
    sp.add_argument(
        "--ack",
        choices=("durable", "written"),
        default="durable",
        help="--half-rate: the server's --ack (default durable)",
    )
    sp.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="--half-rate: half-rate runs per protocol, back to back in its server (default 1)",
    )
    sp.add_argument(
        "--peers",
        default=",".join(("questdb", "questdb-sync")),
        help="--half-rate: peers given the same offered load over line protocol "
        "(comma list of questdb, questdb-sync, or none; default both)",
    )


def cmd_bench_ui(args) -> int:
    from .. import default_path
    from ..bench import ui as bench
    from .output import emit_json, err, out

    rep = bench.run(
        store=args.store or str(default_path()) if args.trace else None,
        trace=args.trace,
        events=args.events,
        repeat=args.repeat,
        progress=(lambda m: None) if args.json else (lambda m: err.print(m, highlight=False)),
    )
    if args.json:
        emit_json(rep)
    else:
        out.print(bench.render(rep), highlight=False)
    return 0 if rep["within_target"] else 1


def register_bench_ui(commands) -> None:
    sp = commands.bench("ui", cmd_bench_ui)
    sp.add_argument("--trace", help="a trace of the store (default: generate a TOD trace of --events)")
    sp.add_argument("--events", type=int, default=10_000_000, help="TOD events to generate (default 10M)")
    sp.add_argument("--repeat", type=int, default=5, help="requests per endpoint (default 5)")
