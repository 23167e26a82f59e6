"""`tracehouse capture`: a thin shell over `replay.capture.capture`.

Registered through `tracehouse.cli.COMMAND_MODULES`.
"""

from __future__ import annotations

import argparse
import sys


def cmd_capture(args) -> int:
    from ..cli import emit_json, err, human_bytes, open_store, out, progress_bar
    from ..errors import BadInput
    from .capture import capture

    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise BadInput("no command to capture", expected="tracehouse capture [--name N] -- CMD [ARG ...]")
    with open_store(args, write=True, fsync=args.fsync) as s:
        with progress_bar("tracing", None, enabled=not args.json and sys.stderr.isatty()) as adv:
            r = capture(s, cmd, args.name, all_syscalls=args.all_syscalls, description=args.description or "",
                        progress=adv)
    if args.json:
        emit_json(r.to_json())
        return 0
    from rich.markup import escape
    from rich.table import Table

    sm, rep = r.summary, r.report
    status = f"exited with {r.exit_status}" if r.exit_status is not None and r.exit_status >= 0 \
        else f"killed by signal {-r.exit_status}" if r.exit_status is not None else "did not run"
    out.print(f"captured [bold]{escape(r.trace)}[/bold] in {r.seconds:.2f} s: {escape(' '.join(r.command))} {status}"
              + (" (interrupted)" if r.interrupted else ""))
    out.print(f"{rep.events:,} events ({', '.join(f'{k} {v:,}' for k, v in rep.by_type.items())}) from "
              f"{rep.lines:,} strace lines; {sm['processes']} processes, {sm['threads']} threads; "
              f"read {human_bytes(sm['bytes_read'])}, wrote {human_bytes(sm['bytes_written'])}")
    t = Table(show_edge=False, header_style="bold", title="syscalls by time", title_justify="left")
    for c, j in (("syscall", "left"), ("calls", "right"), ("errors", "right"), ("total ms", "right"),
                 ("read", "right"), ("written", "right")):
        t.add_column(c, justify=j)
    for row in sm["by_syscall"]:
        t.add_row(row["name"], f"{row['calls']:,}", f"{row['errors']:,}", f"{(row['dur_ns'] or 0) / 1e6:,.3f}",
                  human_bytes(row["bytes_read"]), human_bytes(row["bytes_written"]))
    out.print(t)
    if sm["by_file"]:
        t = Table(show_edge=False, header_style="bold", title="files by bytes", title_justify="left")
        for c, j in (("path", "left"), ("calls", "right"), ("total ms", "right"), ("read", "right"),
                     ("written", "right")):
            t.add_column(c, justify=j)
        for row in sm["by_file"]:
            t.add_row(escape(row["path"]), f"{row['calls']:,}", f"{(row['dur_ns'] or 0) / 1e6:,.3f}",
                      human_bytes(row["bytes_read"]), human_bytes(row["bytes_written"]))
        out.print(t)
    if rep.rejected:
        err.print(f"[yellow]{rep.rejected} strace lines not understood[/yellow] (first: " + "; ".join(
            f"line {x.line}: {escape(x.reason)}" for x in rep.first_rejected[:3]) + ")")
    out.print(f"query it: tracehouse query 'SELECT * FROM \"{r.trace}\".syscall LIMIT 10'")
    return 0


def register(commands) -> None:
    sp = commands.add("capture", cmd_capture,
                      "run a command under strace (-f -ttt -T -y -s0), streaming its IO syscalls into a new trace")
    sp.add_argument("--name", help="trace name (default: the command's name and the time)")
    sp.add_argument("--description")
    sp.add_argument("--all-syscalls", action="store_true",
                    help="trace every syscall (default: those on fds and paths, and process structure)")
    sp.add_argument("--fsync", choices=("always", "batch", "off"), default="off",
                    help="durability while capturing (default off: the trace is durable when the capture ends)")
    sp.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the command and its arguments")
