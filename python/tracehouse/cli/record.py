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
    from .output import emit_json, human_bytes, open_store, out, progress_bar

    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    with open_store(args, write=True, fsync=args.fsync) as s:
        with progress_bar("recording", None, enabled=not args.json and sys.stderr.isatty()) as adv:
            r = record(s, cmd, args.name, include=args.include or (), exclude=args.exclude or (),
                       description=args.description or "", progress=adv, stdout=_stderr_fd() if args.json else None)
    code = r.exit_status if r.exit_status is not None else 1
    if args.json:
        emit_json(r.to_json())
        return code
    from rich.markup import escape

    by = ", ".join(f"{k} {v:,}" for k, v in r.by_type.items())
    status = f"exited with {r.exit_status}" + (" (interrupted)" if r.interrupted else "")
    out.print(f"recorded [bold]{escape(r.trace)}[/bold] in {r.seconds:.2f} s: {escape(' '.join(r.command))} {status}")
    out.print(f"{r.events:,} events ({by}); {len(r.threads)} thread(s); {r.end.get('codes', 0)} code objects, "
              f"{r.end.get('sources', 0)} source files; stream {human_bytes(r.bytes)}; Python {r.hello.get('python', '?')} "
              f"({r.hello.get('mode', '?')})")
    if not r.complete:
        out.print(f"[yellow]incomplete:[/yellow] {escape(r.reason)}")
    out.print(f"travel back in it: tracehouse debug {r.trace}")
    return code


def register(commands) -> None:
    sp = commands.add("record", cmd_record)
    sp.add_argument("--name", help="trace name (default: the program's name and the time)")
    sp.add_argument("--description")
    sp.add_argument("--include", action="append", metavar="PKG",
                    help="also record this package, module or path (the standard library is not recorded by default)")
    sp.add_argument("--exclude", action="append", metavar="PKG", help="do not record this package, module or path")
    sp.add_argument("--fsync", choices=("always", "batch", "off"), default="off",
                    help="durability while recording (default off: the trace is durable when the recording ends)")
    sp.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- python PROG ...",
                    help="the program: python prog.py ARGS, python -m MODULE ARGS, or prog.py ARGS "
                         "(with --json, its stdout goes to stderr: stdout is the JSON)")
