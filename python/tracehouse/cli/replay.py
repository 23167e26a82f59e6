"""`tracehouse capture`: a thin shell over `formats.capture.capture` (strace, bpftrace, perf).

Registered through `cli/main.py`'s COMMAND_MODULES.
"""

from __future__ import annotations

import argparse
import shlex
import sys

USAGE = "tracehouse capture [--tool strace|perf] -- CMD [ARG ...], or --tool bpftrace SCRIPT -- CMD [ARG ...]"


def _stderr_fd() -> int:
    """The descriptor of stderr (2 when sys.stderr is not a file, as under a test's capture)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return 2


def split_command(words: list[str], tool: str) -> tuple[str | None, list[str]]:
    """(SCRIPT, CMD) of `[SCRIPT] -- CMD ...`: bpftrace's script is the word before `--` (or the
    first word when there is no `--`); the other tools take no script."""
    if "--" in words:
        i = words.index("--")
        before, cmd = words[:i], words[i + 1 :]
    elif tool == "bpftrace":
        before, cmd = words[:1], words[1:]
    else:
        before, cmd = [], words
    if len(before) > 1:
        from ..errors import BadInput

        opts = [w for w in before[1:] if w.startswith("-")]
        why = f"; options ({' '.join(opts)}) come before SCRIPT" if opts else ""
        raise BadInput(f"more than one word before --: {shlex.join(before)}{why}", expected=USAGE)
    return (before[0] if before else None), cmd


def cmd_capture(args) -> int:
    from ..errors import BadInput
    from ..formats.capture import capture
    from .output import emit_json, open_store, progress_bar

    script, cmd = split_command(list(args.cmd), args.tool)
    if not cmd:
        raise BadInput("no command to capture", expected=USAGE)
    with open_store(args, write=True, fsync=args.fsync) as s:
        with progress_bar("tracing", None, enabled=not args.json and sys.stderr.isatty()) as adv:
            # With --json the command's own output goes to stderr: stdout is the JSON alone.
            r = capture(
                s,
                cmd,
                args.name,
                tool=args.tool,
                script=script,
                tool_args=shlex.split(args.tool_args or ""),
                pattern=args.pattern,
                span=args.span,
                all_syscalls=args.all_syscalls,
                description=args.description or "",
                progress=adv,
                stdout=_stderr_fd() if args.json else None,
                strict=args.strict,
            )
    if args.json:
        emit_json(r.to_json())
        return exit_code_of(r.exit_status, r.tool_status)
    print_capture(r)
    return exit_code_of(r.exit_status, r.tool_status)


def print_capture(r) -> None:
    from rich.markup import escape
    from rich.table import Table

    from .output import err, human_bytes, out

    sm, rep = r.summary, r.report
    status = (
        f"exited with {r.exit_status}"
        if r.exit_status is not None and r.exit_status >= 0
        else f"killed by signal {-r.exit_status}"
        if r.exit_status is not None
        else f"ran ({r.tool} exited with {r.tool_status}; it does not report the command's status)"
        if r.tool == "bpftrace"
        else "did not run"
    )
    out.print(
        f"captured [bold]{escape(r.trace)}[/bold] under {r.tool} in {r.seconds:.2f} s: "
        f"{escape(' '.join(r.command))} {status}" + (" (interrupted)" if r.interrupted else "")
    )
    by_type = ", ".join(f"{k} {v:,}" for k, v in rep.by_type.items())
    if r.tool != "strace":
        out.print(f"{rep.events:,} events ({by_type}); {rep.producers} producers")
        for x in sm.get("results", []):
            out.print(f"result {x['id']}: {x['kind']} {escape(x['name'])} ({x['rows']:,} rows)")
        if sm.get("top_leaves"):
            t = Table(show_edge=False, header_style="bold", title="hottest functions", title_justify="left")
            t.add_column("leaf")
            t.add_column("samples", justify="right")
            for row in sm["top_leaves"]:
                t.add_row(escape(str(row["leaf"])), f"{row['samples']:,}")
            out.print(t)
        if rep.rejected:
            err.print(
                f"[yellow]{rep.rejected} lines not understood[/yellow] (first: "
                + "; ".join(f"line {x.line}: {escape(x.reason)}" for x in rep.first_rejected[:3])
                + ")"
            )
        table = next(iter(rep.by_type), "sample")
        out.print(f"query it: tracehouse query 'SELECT * FROM \"{r.trace}\".{table} LIMIT 10'")
        return
    out.print(
        f"{rep.events:,} events ({by_type}) from "
        f"{rep.lines:,} strace lines; {sm['processes']} processes, {sm['threads']} threads; "
        f"read {human_bytes(sm['bytes_read'])}, wrote {human_bytes(sm['bytes_written'])}"
    )
    t = Table(show_edge=False, header_style="bold", title="syscalls by time", title_justify="left")
    for c, j in (
        ("syscall", "left"),
        ("calls", "right"),
        ("errors", "right"),
        ("total ms", "right"),
        ("read", "right"),
        ("written", "right"),
    ):
        t.add_column(c, justify=j)
    for row in sm["by_syscall"]:
        t.add_row(
            row["name"],
            f"{row['calls']:,}",
            f"{row['errors']:,}",
            f"{(row['dur_ns'] or 0) / 1e6:,.3f}",
            human_bytes(row["bytes_read"]),
            human_bytes(row["bytes_written"]),
        )
    out.print(t)
    if sm["by_file"]:
        t = Table(show_edge=False, header_style="bold", title="files by bytes", title_justify="left")
        for c, j in (
            ("path", "left"),
            ("calls", "right"),
            ("total ms", "right"),
            ("read", "right"),
            ("written", "right"),
        ):
            t.add_column(c, justify=j)
        for row in sm["by_file"]:
            t.add_row(
                escape(row["path"]),
                f"{row['calls']:,}",
                f"{(row['dur_ns'] or 0) / 1e6:,.3f}",
                human_bytes(row["bytes_read"]),
                human_bytes(row["bytes_written"]),
            )
        out.print(t)
    if rep.rejected:
        err.print(
            f"[yellow]{rep.rejected} strace lines not understood[/yellow] (first: "
            + "; ".join(f"line {x.line}: {escape(x.reason)}" for x in rep.first_rejected[:3])
            + ")"
        )
    out.print(f"query it: tracehouse query 'SELECT * FROM \"{r.trace}\".syscall LIMIT 10'")


def exit_code_of(status: int | None, tool_status: int | None = None) -> int:
    """The captured command's exit code is ours (a script `tracehouse capture -- make`
    fails when make does), as a shell gives it: 128 + N when signal N killed it. When the
    tool does not report it (bpftrace), the tool's own; 1 when nothing ran."""
    if status is None:
        status = tool_status
    if status is None:
        return 1
    return status if status >= 0 else 128 - status


def register(commands) -> None:
    from ..formats.capture import TOOLS
    from ..formats.probes import OPTIONS

    sp = commands.add("capture", cmd_capture)
    sp.add_argument(
        "--tool",
        choices=TOOLS,
        default="strace",
        help="the tracer: strace (IO syscalls), bpftrace (SCRIPT's probes, -c CMD), "
        "perf (perf record -g | perf script: stack samples); default strace",
    )
    sp.add_argument("--name", help="trace name (default: the command's name and the time)")
    sp.add_argument("--description")
    sp.add_argument(
        "--all-syscalls",
        action="store_true",
        help="strace: trace every syscall (default: those on fds and paths, and process structure)",
    )
    sp.add_argument(
        "--tool-args",
        metavar="ARGS",
        help="options added to the tool's command line, one string (perf: perf record's, e.g. '-F 99 -e cycles')",
    )
    for opt, kw in OPTIONS.items():
        sp.add_argument(f"--{opt}", **kw)
    sp.add_argument("--strict", action="store_true", help="stop at the first line not understood")
    sp.add_argument(
        "--fsync",
        choices=("always", "batch", "off"),
        default="off",
        help="durability while capturing (default off: the trace is durable when the capture ends)",
    )
    sp.add_argument(
        "cmd",
        nargs=argparse.REMAINDER,
        metavar="[SCRIPT] -- CMD ...",
        help="bpftrace's script (a file or the program), then the command and its arguments "
        "(with --json, its stdout goes to stderr: stdout is the JSON)",
    )
    register_replay(commands)
    register_extrapolate(commands)
    register_bench(commands)


# -- tracehouse replay / extrapolate / bench replay ----------------------------------------


def cmd_replay(args) -> int:
    from ..replay.replay import replay
    from .output import emit_json, err, human_bytes, open_store, out, progress_bar

    with open_store(args, write=True) as s:
        with progress_bar("replaying", None, enabled=not args.json and sys.stderr.isatty()) as adv:
            r = replay(
                s,
                args.trace,
                args.root,
                maps=args.map or (),
                only=args.only or (),
                timing=args.timing,
                copies=args.copies,
                name=args.name,
                cold=args.cold,
                force=args.force,
                spin_us=args.spin_us,
                realtime=args.realtime,
                progress=adv,
            )
    if args.json:
        emit_json(r.to_json())
        return replay_exit_code(r.summary)
    from rich.markup import escape
    from rich.table import Table

    sm = r.summary
    ratio = f", ratio {sm['length_ratio']:.4f}" if sm.get("length_ratio") else ""
    out.print(
        f"replayed [bold]{escape(r.source)}[/bold]: {sm['ops']:,} calls, {sm['threads']} threads x "
        f"{sm['copies']} copies, timing {sm['timing']}, in {sm['seconds']:.3f} s "
        f"(trace {sm['original_seconds']:.3f} s{ratio})" + ("" if sm["complete"] else " [red]incomplete[/red]")
    )
    out.print(f"stored as [bold]{escape(r.trace)}[/bold] (processed result {r.result_id}); root {escape(sm['root'])}")
    if not sm.get("valid", True):
        err.print(f"[red]invalid run[/red] (stored for inspection, never fitted): {escape(sm['invalid'])}")
    short = f", {sm['short_writes']:,} of them short writes" if sm.get("short_writes") else ""
    out.print(
        f"throughput {sm['ops_per_s']:,.0f} calls/s, {sm['mb_per_s']:,.2f} MB/s ({human_bytes(sm['bytes'])}); "
        f"errors {sm['errors']:,} ({sm['divergent']:,} differ from the trace{short}), "
        f"refused outside the root {sm['refused_outside_root']:,}"
    )
    t = Table(show_edge=False, header_style="bold", title="latency (µs)", title_justify="left")
    for c in ("class", "calls", "p50", "p90", "p99", "max", "mean"):
        t.add_column(c, justify="left" if c == "class" else "right")
    for cls, q in [("all", sm["latency_us"] | {"ops": sm["ops"]}), *sm["latency_by_class_us"].items()]:
        t.add_row(cls, f"{q.get('ops', 0):,}", *(f"{q.get(k, 0):,.1f}" for k in ("p50", "p90", "p99", "max", "mean")))
    out.print(t)
    if sm["realtime"]["asked"] and not sm["realtime"]["granted"]:
        err.print("[yellow]--realtime: SCHED_FIFO was refused (needs CAP_SYS_NICE); ran at normal priority[/yellow]")
    if sm["issue_error_us"]:
        q = sm["issue_error_us"]
        out.print(
            f"issue-time error (µs) of the {sm['on_time_share'] * 100:.1f} % of calls ready on time: "
            f"p50 {q['p50']:.1f}, p90 {q['p90']:.1f}, p99 {q['p99']:.1f}, max {q['max']:.1f} "
            f"(spin {sm['spin_us']:.0f} µs; absolute sleeps wake p90 {sm['wakeup_late_us']['p90']:.0f} µs "
            f"late here)"
        )
    if sm["lag_us"]:
        q = sm["lag_us"]
        out.print(
            f"lag behind the schedule (µs), all calls: p50 {q['p50']:.1f}, p90 {q['p90']:.1f}, "
            f"p99 {q['p99']:.1f}, max {q['max']:.1f}"
        )
    u = sm["utilisation"]
    dev = f"device {sm['device']} busy {u['device_util'] * 100:.1f} %, " if "device_util" in u else "no block device, "
    out.print(
        f"{dev}CPU {u['cpu_util'] * 100:.1f} % of {sm['cores']} cores (replayer {u['replay_cpu_cores']:.2f} "
        f"cores), load average {sm['loadavg'][0]:.2f}"
    )
    if sm["skipped"]:
        out.print("skipped: " + ", ".join(f"{k} {v:,}" for k, v in sorted(sm["skipped"].items(), key=lambda x: -x[1])))
    if sm["prepare"]["error_count"]:
        err.print(
            f"[yellow]{sm['prepare']['error_count']} paths could not be prepared[/yellow] (first: "
            + "; ".join(f"{escape(p)}: {escape(m)}" for p, m in sm["prepare"]["errors"][:3])
            + ")"
        )
    if sm["prepare"].get("hard_links_copied"):
        err.print(
            f"[yellow]{sm['prepare']['hard_links_copied']} files with a second name (hard link) in the root "
            f"were replaced by copies before the run[/yellow]"
        )
    out.print(f"query it: tracehouse query 'SELECT kind, count(*), median(dur) FROM \"{r.trace}\".op GROUP BY kind'")
    return replay_exit_code(sm)


def replay_exit_code(summary: dict) -> int:
    """0 for a complete run; 4 when the target filesystem filled up (as for a full store);
    1 for any other incomplete run (cancelled)."""
    if not summary.get("valid", True):
        return 4
    return 0 if summary["complete"] else 1


def register_replay(commands) -> None:
    sp = commands.add("replay", cmd_replay)
    sp.add_argument("trace", help="a strace trace (tracehouse capture / import strace)")
    sp.add_argument(
        "--root", required=True, help="target directory: every file goes under it (/a/b -> ROOT/a/b unless --map)"
    )
    sp.add_argument(
        "--map",
        action="append",
        metavar="OLD=NEW",
        help="traced paths under OLD go to ROOT/NEW (repeatable; longest OLD wins)",
    )
    sp.add_argument(
        "--only", action="append", metavar="PREFIX", help="replay only calls on traced paths under PREFIX (repeatable)"
    )
    sp.add_argument(
        "--timing",
        default="original",
        help="original (the traced times) | scale:X (X times as fast) | think[:X] (traced think "
        "times after each replayed call ends) | asap",
    )
    sp.add_argument(
        "--copies",
        type=int,
        default=1,
        help="replay K independent copies at once (own files under ROOT/copy-<k>, own threads)",
    )
    sp.add_argument("--name", help="name of the stored replay (default TRACE:replay-N)")
    sp.add_argument(
        "--cold", action="store_true", help="drop the prepared files from the page cache first (reads reach the device)"
    )
    sp.add_argument(
        "--force",
        action="store_true",
        help="use a non-empty --root that no replay made (its files may be resized or removed)",
    )
    sp.add_argument("--spin-us", type=float, help="spin before each planned time, µs (default: calibrated)")
    sp.add_argument(
        "--realtime",
        action="store_true",
        help="replay threads under SCHED_FIFO (needs CAP_SYS_NICE): neighbours' threads no longer delay "
        "a planned call by a time slice",
    )


def cmd_extrapolate(args) -> int:
    from pathlib import Path

    from ..errors import BadInput
    from ..replay import extrapolate as ex
    from ..replay.replay import runs as replay_runs
    from .output import emit_json, err, open_store, out

    p = Path(args.input)
    if p.exists() or p.suffix in (".csv", ".parquet", ".json") or "/" in args.input:
        runs = ex.read_runs(p)
    else:
        with open_store(args) as s:
            runs = ex.runs_from_replays(replay_runs(s, args.input), args.input)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    at = None
    if args.at:
        try:
            at = [float(v) for v in args.at.split(",")]
        except ValueError:
            raise BadInput(f"--at {args.at!r}", expected="comma-separated concurrencies, e.g. 8,16,32") from None
    result = ex.extrapolate(
        runs, models=models, holdout=args.holdout, at=at, util_bound=args.max_util, rt_bound=args.max_rt
    )
    data = result.to_json()
    if args.plot:
        from ..replay.plot import plot

        data["plot"] = str(plot(result, args.plot))
    if args.json:
        emit_json(data)
        return 0
    from rich.markup import escape
    from rich.table import Table

    out.print(
        f"[bold]{escape(data['source'])}[/bold]: {len(data['runs'])} runs, fitted on concurrency "
        f"{', '.join(f'{n:g}' for n in data['fitted_on'])}"
        + (f", held out {', '.join(f'{n:g}' for n in data['held_out'])}" if data["held_out"] else "")
        + (f" ({ex.describe_settings(data['settings'])})" if data["settings"] else "")
    )
    for x in data["excluded"]:
        err.print(f"[yellow]left out[/yellow] {escape(x['run'])}: {escape(x['reason'])}")
    for w in data["warnings"]:
        err.print(f"[yellow]warning[/yellow]: {escape(w)}")
    t = Table(show_edge=False, header_style="bold", title="measured", title_justify="left")
    cols = ["concurrency", "throughput/s", "response ms"] + [f"util {k} %" for k in runs.util]
    for c in cols:
        t.add_column(c, justify="right")
    for r in data["runs"]:
        rt = r["response_time"]
        t.add_row(
            f"{r['concurrency']:g}",
            f"{r['throughput']:,.1f}",
            "" if rt is None else f"{rt * 1e3:.3f}",
            *(f"{r[f'util_{k}'] * 100:.1f}" for k in runs.util),
        )
    out.print(t)
    for m, p in data["models"].items():
        out.print(f"[bold]{m}[/bold]: " + ", ".join(f"{k} {_fmt(v)}" for k, v in p.items()))
        out.print(f"  fit: {_fit_text(data['fit'][m])}")
    for m, e in data["model_errors"].items():
        out.print(f"[yellow]{m} not fitted[/yellow]: {e}")
    t = Table(show_edge=False, header_style="bold", title="predicted", title_justify="left")
    t.add_column("concurrency", justify="right")
    for m in data["models"]:
        t.add_column(f"{m} X/s", justify="right")
        t.add_column(f"{m} R ms", justify="right")
    for row in data["predictions"]:
        cells = [f"{row['concurrency']:g}"]
        for m in data["models"]:
            p = row[m]
            mark = "" if p["in_range"] else "*"
            cells += [
                f"{p['throughput']:,.1f}{mark}",
                "" if p["response_time"] is None else f"{p['response_time'] * 1e3:.3f}",
            ]
        t.add_row(*cells)
    out.print(t)
    if any(not row[m]["in_range"] for row in data["predictions"] for m in data["models"] if m == "perfext"):
        out.print("* beyond 90 % of PerfExt's maximum throughput, where the method stops")
    for m, b in data["bounds"].items():
        u = (
            f"{b['util_bound'] * 100:.0f} % {b['resource']} at concurrency {b['util']}"
            if b["util"]
            else f"no resource reaches {b['util_bound'] * 100:.0f} %"
        )
        r = (
            ""
            if b["rt_bound"] is None
            else (
                f"; R reaches {b['rt_bound'] * 1e3:g} ms at {b['rt']}"
                if b["rt"]
                else f"; R stays under {b['rt_bound'] * 1e3:g} ms"
            )
        )
        out.print(f"{m}: {u}{r}")
    for h in data["holdout"]:
        out.print(
            f"held out concurrency {h['concurrency']:g} ({h['ratio_to_fitted_max']:.1f}x the fitted maximum), "
            f"measured {h['measured']['throughput']:,.1f}/s: "
            + ", ".join(
                f"{m} {h[m]['throughput']:,.1f} ({h[m]['throughput_error'] * 100:+.1f} %)" for m in data["models"]
            )
        )
    if args.plot:
        out.print(f"plot: {data['plot']}")
    return 0


def _fit_text(q: dict) -> str:
    """R², the largest error at the fitted points and the held-out error, per metric."""
    parts = []
    for metric, name in (("throughput", "X"), ("response_time", "R")):
        v = q[metric]
        if v["max_error"] is None:
            continue
        r2 = "n/a" if v["r2"] is None else f"{v['r2']:.3f}"
        held = "" if v["holdout_error"] is None else f", held-out error {v['holdout_error'] * 100:.1f} %"
        parts.append(f"{name} R² {r2}, max error at fitted points {v['max_error'] * 100:.1f} %{held}")
    return "; ".join(parts) or "nothing measured to check against"


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_fmt(x)}" for k, x in v.items()) + "}"
    return str(v)


def register_extrapolate(commands) -> None:
    sp = commands.add("extrapolate", cmd_extrapolate)
    sp.add_argument(
        "input",
        help="a CSV/Parquet/JSON of runs (concurrency, throughput, response_time, "
        "util_<resource>), or a trace whose replays to use",
    )
    sp.add_argument("--models", default="perfext,usl,mva", help="comma-separated: perfext, usl, mva")
    sp.add_argument(
        "--holdout",
        type=int,
        nargs="?",
        const=1,
        default=0,
        metavar="K",
        help="leave the K highest-concurrency runs out of the fit and report the errors on them",
    )
    sp.add_argument("--at", help="concurrencies to predict (default: the runs', and 2x, 4x, 8x the highest)")
    sp.add_argument("--max-util", type=float, default=0.9, help="utilisation bound to report (default 0.9)")
    sp.add_argument("--max-rt", type=float, help="response-time bound to report, seconds")
    sp.add_argument("--plot", metavar="PNG", help="write measured points and model curves")


def cmd_bench_replay(args) -> int:
    from ..bench import replay as bench
    from .output import emit_json, err, out

    quiet = args.json

    def progress(msg: str) -> None:
        if not quiet:
            err.print(msg, highlight=False)

    r = bench.run(
        iops=args.iops,
        seconds=args.seconds,
        threads=args.threads,
        asap_ops=args.asap_ops,
        asap_threads=args.asap_threads,
        real=not args.no_real,
        cycles=args.cycles,
        repeat=args.repeat,
        seeds=args.seeds,
        workdir=args.workdir,
        progress=progress,
    )
    if args.json:
        emit_json(r)
    else:
        out.print(bench.render(r), highlight=False)
    return 0


def register_bench(commands) -> None:
    sp = commands.bench("replay", cmd_bench_replay)
    sp.add_argument("--iops", type=float, default=10_000)
    sp.add_argument("--seconds", type=float, default=5.0, help="length of the timed trace")
    sp.add_argument("--threads", type=int, default=4, help="threads of the timed trace")
    sp.add_argument("--asap-ops", type=int, default=2_000_000, help="preads of the asap trace (all threads)")
    sp.add_argument("--asap-threads", type=int, help="threads of the asap trace (default: the CPU count)")
    sp.add_argument("--no-real", action="store_true", help="skip the real device-bound replay runs")
    sp.add_argument("--cycles", type=int, default=300, help="write+fdatasync cycles per thread in the real runs")
    sp.add_argument("--repeat", type=int, default=3, help="tries per level in the real runs (the median counts)")
    sp.add_argument("--seeds", type=int, default=5, help="noise draws per synthetic system")
    sp.add_argument("--workdir", help="where the store and replay roots go (default: a temporary directory)")
