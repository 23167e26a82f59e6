"""`tracehouse record`, `tracehouse debug` and `tracehouse bench record`: thin shells over
`record.record`, `record.debug` and `bench.record`.
"""

from __future__ import annotations

import argparse
import sys


def _stderr_fd() -> int:
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return 2


def cmd_record(args) -> int:
    from ..record.record import record
    from .output import emit_json, human_bytes, open_store, progress_bar, say

    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    with open_store(args, write=True, fsync=args.fsync) as s:
        with progress_bar("recording", None, enabled=not args.json and sys.stderr.isatty()) as adv:
            r = record(
                s,
                cmd,
                args.name,
                include=args.include or (),
                exclude=args.exclude or (),
                description=args.description or "",
                progress=adv,
                stdout=_stderr_fd() if args.json else None,
            )
    code = r.exit_status if r.exit_status is not None else 1
    if args.json:
        emit_json(r.to_json())
        return code
    # say(): plain text when piped, without importing rich (50-80 ms after the program ended).
    by = ", ".join(f"{k} {v:,}" for k, v in r.by_type.items())
    status = f"exited with {r.exit_status}" + (" (interrupted)" if r.interrupted else "")
    say("recorded ", (r.trace, "bold"), f" in {r.seconds:.2f} s: {' '.join(r.command)} {status}")
    say(
        f"{r.events:,} events ({by}); {len(r.threads)} thread(s); {r.end.get('codes', 0)} code objects, "
        f"{r.end.get('sources', 0)} source files; stream {human_bytes(r.bytes)}; Python {r.hello.get('python', '?')} "
        f"({r.hello.get('mode', '?')})"
    )
    if not r.complete:
        say(("incomplete:", "yellow"), f" {r.reason}")
    say(f"travel back in it: tracehouse debug {r.trace}")
    return code


def register(commands) -> None:
    sp = commands.add("record", cmd_record)
    sp.add_argument("--name", help="trace name (default: the program's name and the time)")
    sp.add_argument("--description")
    sp.add_argument(
        "--include",
        action="append",
        metavar="PKG",
        help="also record this package, module or path (the standard library is not recorded by default)",
    )
    sp.add_argument("--exclude", action="append", metavar="PKG", help="do not record this package, module or path")
    sp.add_argument(
        "--fsync",
        choices=("always", "batch", "off"),
        default="off",
        help="durability while recording (default off: the trace is durable when the recording ends)",
    )
    sp.add_argument(
        "cmd",
        nargs=argparse.REMAINDER,
        metavar="-- python PROG ...",
        help="the program: python prog.py ARGS, python -m MODULE ARGS, or prog.py ARGS "
        "(with --json, its stdout goes to stderr: stdout is the JSON)",
    )
    register_debug(commands)
    register_bench(commands)
    register_bench_debug(commands)


# -- tracehouse debug --------------------------------------------------------------------------


def _render(ans: dict) -> None:
    """One answer of the debugger as text (the --json form is the dict itself)."""
    from rich.markup import escape

    from .output import out

    if "help" in ans:
        out.print(escape(ans["help"]), highlight=False)
        return
    if "breakpoints" in ans and "position" not in ans:
        for b in ans["breakpoints"]:
            out.print(f"  {b['id']}: {b['kind']} {escape(b['spec'])}", highlight=False)
        if not ans["breakpoints"]:
            out.print("  no breakpoints")
        return
    if "lines" in ans:
        for ln in ans["lines"]:
            mark = "→" if ln["current"] else " "
            out.print(f"{mark}{ln['line']:5d} │ {escape(ln['text'])}", highlight=False)
        if not ans["lines"]:
            out.print("(no source stored for this position)")
        return
    pos = ans.get("position")
    if pos:
        where = (
            f"{pos.get('file')}:{pos.get('line')} in {pos.get('function')}"
            if "line" in pos
            else f"{pos['type']} {pos.get('event')}"
        )
        out.print(f"[bold]{escape(pos['thread'])}[/bold] seq {pos['seq']}  {escape(where)}", highlight=False)
    if ans.get("source_line") is not None:
        out.print(f"  {pos.get('line'):5d} │ {escape(ans['source_line'])}", highlight=False)
    if ans.get("note"):
        out.print(f"  [cyan]{escape(ans['note'])}[/cyan]", highlight=False)
    if ans.get("write"):
        w = ans["write"]
        out.print(f"  wrote {escape(str(w['name']))} = {escape(w['value']['text'])} (seq {w['seq']})", highlight=False)
    if "frames" in ans:
        for f in ans["frames"]:
            args = "" if "args" not in f else f" args {f['args']}"
            out.print(
                f"  #{f['depth']} {escape(str(f['function']))}  {escape(str(f.get('file', '')))}:{f.get('line', '')}{args}",
                highlight=False,
            )
            for k, v in (f.get("locals") or {}).items():
                out.print(f"      {escape(k)} = {escape(v['text'])}", highlight=False)
        return
    if "writes" in ans:
        out.print(
            f"  {ans['total']:,} writes of {escape(ans['name'])}"
            + (f" ({len(ans['writes'])} shown)" if ans["total"] > len(ans["writes"]) else ""),
            highlight=False,
        )
        for w in ans["writes"]:
            line = f" line {w['line']}" if w.get("line") is not None else ""
            snap = " (bound at entry)" if w.get("snapshot") else ""
            out.print(f"    seq {w['seq']}{line}: {escape(w['value']['text'])}{snap}", highlight=False)
        return
    if "value" in ans and "name" in ans:
        out.print(f"  {escape(ans['name'])} = {escape(ans['value']['text'])}", highlight=False)
        for k, v in (ans.get("fields") or {}).items():
            out.print(f"      .{escape(k)} = {escape(v['text'])}", highlight=False)
        return
    if "fields" in ans:
        for k, v in ans["fields"].items():
            out.print(f"  .{escape(k)} = {escape(v['text'])}", highlight=False)
        return
    if "locals" in ans:
        for k, v in ans["locals"].items():
            out.print(f"  {escape(k)} = {escape(v['text'])}", highlight=False)


def cmd_debug(args) -> int:
    from ..errors import TracehouseError
    from ..record import debug
    from .output import emit_json, err, open_store

    with open_store(args) as s:
        session = debug.Session(s, args.trace, producer=args.thread)
        if args.prepare:
            session.prepare()
        if args.commands is not None:
            commands = debug.split_commands(args.commands)
        elif not sys.stdin.isatty():
            commands = debug.split_commands(sys.stdin.read())
        else:
            commands = None
        if commands is not None:
            answers = [{"command": "", **debug.run(session, "")}] if not commands else []
            code = 0
            for c in commands:
                try:
                    ans = {"command": c, **debug.run(session, c)}
                except TracehouseError as e:
                    ans, code = {"command": c, "error": str(e)}, 2
                answers.append(ans)
                if not args.json:
                    from rich.markup import escape

                    from .output import out

                    out.print(f"[dim]({escape(c)})[/dim]", highlight=False)
                    if "error" in ans:
                        err.print(f"[red]error:[/red] {escape(ans['error'])}", highlight=False)
                    else:
                        _render(ans)
            if args.json:
                emit_json(answers)
            elif not commands:
                _render(answers[0])
            return code
        _render(debug.run(session, ""))
        while True:  # the interactive loop
            try:
                line = input("(debug) ")
            except EOFError:
                return 0
            if line.strip() in ("q", "quit", "exit"):
                return 0
            for c in debug.split_commands(line) or [""]:
                try:
                    ans = debug.run(session, c)
                except TracehouseError as e:
                    err.print(f"error: {e}", highlight=False)
                    continue
                if args.json:
                    emit_json(ans)
                else:
                    _render(ans)


def register_debug(commands) -> None:
    sp = commands.add("debug", cmd_debug)
    sp.add_argument("trace", help="a recorded program (tracehouse record) or a TOD trace")
    sp.add_argument(
        "-c",
        "--commands",
        help="commands to run, separated by ';' (default: read them from stdin, "
        "or an interactive prompt on a terminal); `help` lists them",
    )
    sp.add_argument("--thread", type=int, help="start in this thread (producer id; default: the program's first line)")
    sp.add_argument(
        "--prepare", action="store_true", help="build every index first (else each is built when first needed)"
    )


# -- tracehouse bench record -----------------------------------------------------------------


def cmd_bench_record(args) -> int:
    from ..bench import record as bench
    from .output import emit_json, err, out

    log = (lambda s: None) if args.json else (lambda s: err.print(f"[dim]{s}[/dim]", highlight=False))
    result = bench.run(
        args.programs.split(",") if args.programs else None,
        repeat=args.repeat,
        quick=args.quick,
        workdir=args.workdir,
        ingest_passes=args.ingest_passes,
        reference=not args.no_reference,
        log=log,
    )
    if args.json:
        emit_json(result)
    else:
        out.print(bench.render(result), highlight=False, markup=False)
    return 0


def register_bench(commands) -> None:
    sp = commands.bench("record", cmd_bench_record)
    sp.add_argument(
        "--programs", help="comma list (default: nbody,richards,json_dumps,json_loads,regex_effbot,file_io_threads)"
    )
    sp.add_argument(
        "--repeat", type=int, default=1, help="runs of each program each way, the median reported (default 1)"
    )
    sp.add_argument("--quick", action="store_true", help="smaller inputs (CI smoke run)")
    sp.add_argument("--no-reference", action="store_true", help="skip the pure-Python recorder (the slowest part)")
    sp.add_argument(
        "--ingest-passes",
        type=int,
        default=4,
        help="times the largest recording's stream is fed to the store (0: skip the ingest measurement)",
    )
    sp.add_argument("--workdir", help="where programs and the store go (default: the system temp dir); removed after")


def cmd_bench_debug(args) -> int:
    from ..bench import debug as bench
    from .output import emit_json, err, out

    log = (lambda s: None) if args.json else (lambda s: err.print(f"[dim]{s}[/dim]", highlight=False))
    result = bench.run(
        args.events,
        trace=args.trace,
        store_path=args.store if args.trace else None,
        queries=args.queries,
        workdir=args.workdir,
        keep=args.keep,
        log=log,
    )
    if args.json:
        emit_json(result)
    else:
        out.print(bench.render(result), highlight=False, markup=False)
    return 0


def register_bench_debug(commands) -> None:
    sp = commands.bench("debug", cmd_bench_debug)
    sp.add_argument(
        "--events",
        type=int,
        default=10_000_000,
        help="TOD events generated (default 10M; 100M for the full figure, ~7 GB of disk)",
    )
    sp.add_argument("--trace", help="measure this trace of --store instead of generating one")
    sp.add_argument("--queries", type=int, default=200, help="random stops measured (default 200)")
    sp.add_argument("--workdir", help="where the generated store goes (default: the system temp dir)")
    sp.add_argument("--keep", action="store_true", help="keep the generated store (prints where)")
