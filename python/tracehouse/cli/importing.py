"""Getting traces in: import (any registered importer), generate (the TOD workload) and demo
(every format's example, then the web UI).

Thin shells over `formats.registry` and `formats.tod.generate`; printing is `output`'s.
"""

from __future__ import annotations

import argparse
import glob
import importlib
import os
import sys
import threading
import time
from pathlib import Path

from ..errors import BadInput
from .output import arrow_table_render, emit_json, err, human_bytes, open_store, out, progress_bar, say


def add_importer_options(sp: argparse.ArgumentParser) -> None:
    """Options importers declare in their OPTIONS ({name: argparse kwargs}), added once each."""
    from ..formats import registry

    seen: set[str] = set()
    for imp in registry.importers().values():
        for opt, kw in (getattr(imp, "OPTIONS", None) or {}).items():
            if opt not in seen:
                seen.add(opt)
                sp.add_argument("--" + opt.replace("_", "-"), dest="opt_" + opt, **kw)


def importer_options(args, imp) -> dict:
    """The importer-specific options given on the command line; one meant for another importer is an error."""
    mine = set(getattr(imp, "OPTIONS", None) or {})
    given = {k[4:]: v for k, v in vars(args).items() if k.startswith("opt_") and v is not None}
    other = sorted(set(given) - mine)
    if other:
        raise BadInput(
            f"--{other[0].replace('_', '-')} does not apply to the {imp.NAME} importer",
            expected=", ".join("--" + o for o in sorted(mine)) or "no importer-specific options",
        )
    return given


def cmd_import(args) -> int:
    from ..formats import registry
    from ..formats.column_mapping import Mapping
    from ..formats.stream import is_stream
    from ..store.store import trace_name_from

    if is_stream(args.path):
        return _import_stream(args)
    path = Path(args.path)
    if not path.exists() and not any(path.parent.glob(glob.escape(path.name) + ".*")):  # PREFIX of strace -ff
        raise BadInput("no such file", file=str(path))
    imp = registry.importer(args.importer, path)
    mapping = Mapping(
        ts=args.ts,
        ts_unit=args.ts_unit,
        producer=args.producer,
        type=args.type,
        seq=args.seq,
        dur=args.dur,
        event_type=args.event_type,
        kind=args.kind,
        format=args.trace_format,
    )
    # A name given is checked as given; one taken from the file name is cleaned
    # (`my events (1).csv` -> my_events_1, `データ.csv` -> データ).
    name = args.name if args.name is not None else trace_name_from(path.stem.split(".")[0])
    t0 = time.perf_counter()
    # An importer that declares a `start` hook (strace) starts parsing now, while the store opens.
    started = imp.start(path)
    if not args.json and sys.stdout.isatty():
        # The report is printed with rich on a terminal (0.05-0.08 CPU-s to import): imported on a
        # thread of its own while the input is parsed, not after the import, where the print
        # waited for it. Piped, it is printed without rich (`say`).
        threading.Thread(target=importlib.import_module, args=("rich.console",), daemon=True).start()
    try:
        with open_store(args, write=True, fsync=args.fsync) as s:
            with progress_bar(f"importing {path.name}", None, enabled=not args.json and sys.stderr.isatty()) as adv:
                more = {"started": started} if started is not None else {}
                report = imp.import_file(
                    s,
                    path,
                    name,
                    mapping=mapping,
                    strict=args.strict,
                    description=args.description or "",
                    progress=adv,
                    **more,
                    **importer_options(args, imp),
                )
    except BadInput as e:
        if e.file is not None:
            raise
        # (a refusal the store makes of what the file declares, e.g. a column name: still this file's)
        raise BadInput(
            e.reason, file=str(path), line=e.line, column=e.column, offset=e.offset, expected=e.expected
        ) from None
    finally:
        if started is not None:
            started.close()  # (a no-op once the import took it to the end)
    _report(args, report, time.perf_counter() - t0)
    return 0


def _import_stream(args) -> int:
    """`import FORMAT -` (or /dev/stdin, a FIFO): read as the data arrives, committed batch by
    batch (formats/stream.py), by an importer that can (`import_stream`)."""
    from ..formats import registry
    from ..formats.column_mapping import Mapping
    from ..formats.stream import open_stream

    imp = registry.importer(args.importer)
    if not hasattr(imp, "import_stream"):
        able = [n for n, i in registry.importers().items() if hasattr(i, "import_stream")]
        raise BadInput(
            f"the {imp.NAME} importer reads files, not a pipe",
            file=args.path,
            expected="a file, or one of the importers that read a pipe: " + ", ".join(able),
        )
    mapping = Mapping(
        ts=args.ts,
        ts_unit=args.ts_unit,
        producer=args.producer,
        type=args.type,
        seq=args.seq,
        dur=args.dur,
        event_type=args.event_type,
        kind=args.kind,
        format=args.trace_format,
    )
    name = args.name or f"{imp.NAME}-stdin-{time.strftime('%Y%m%d-%H%M%S')}"
    fd, source = open_stream(args.path)
    t0 = time.perf_counter()
    try:
        with open_store(args, write=True, fsync=args.fsync) as s:
            with progress_bar(f"importing {source}", None, enabled=not args.json and sys.stderr.isatty()) as adv:
                report = imp.import_stream(
                    s,
                    fd,
                    name,
                    source=source,
                    mapping=mapping,
                    strict=args.strict,
                    description=args.description or "",
                    progress=adv,
                    **importer_options(args, imp),
                )
    finally:
        if fd != 0:
            os.close(fd)
    _report(args, report, time.perf_counter() - t0)
    return 0


def _report(args, report, secs: float) -> None:
    data = report.to_json() | {"seconds": round(secs, 3), "events_per_s": round(report.events / secs)}
    if args.json:
        emit_json(data)
    else:
        say(
            f"imported {report.events:,} events into ",
            (report.trace, "bold"),
            f" in {secs:.2f} s "
            f"({report.events / secs:,.0f} events/s): " + ", ".join(f"{k} {v:,}" for k, v in report.by_type.items()),
        )
        for k, v in (getattr(report, "details", None) or {}).items():
            if isinstance(v, int):
                err.print(f"{k.replace('_', ' ')}: {v:,}")
            elif k == "spans":
                for span, st in v.items():
                    err.print(
                        f"span {span}: {st['matched']:,} matched, {st['unmatched_begin']:,} starts and "
                        f"{st['unmatched_end']:,} ends unmatched"
                    )
            elif k == "results":
                for r in v:
                    err.print(f"result {r['id']}: {r['kind']} {r['name']} ({r['rows']:,} rows)")
        if report.rejected:
            err.print(
                f"[yellow]{report.rejected} rejected lines[/yellow] (first: "
                + "; ".join(f"line {r.line}: {r.reason}" for r in report.first_rejected[:5])
                + ")"
            )


def cmd_generate(args) -> int:
    from ..formats.tod.generate import generate_tod

    if args.workload != "tod":
        raise BadInput(f"unknown workload {args.workload!r}", expected="tod")
    with open_store(args, write=True, fsync=args.fsync) as s:
        with progress_bar(f"generating {args.name}", args.events, enabled=not args.json) as adv:
            r = generate_tod(s, args.name, args.events, seed=args.seed, threads=args.threads, progress=adv)
    if args.json:
        emit_json(r)
    else:
        out.print(
            f"generated {r['events']:,} TOD events into [bold]{r['trace']}[/bold] in {r['seconds']:.2f} s "
            f"({r['events_per_s']:,} events/s)"
        )
    return 0


DEMO_QUERIES = [
    (
        "events by type",
        'SELECT type, count(*) AS events, min(ts) AS first_ns, max(ts) AS last_ns FROM "{t}".events GROUP BY type ORDER BY events DESC',
    ),
    (
        "events per thread",
        'SELECT p.name AS thread, count(*) AS events FROM "{t}".events e JOIN th.producers p'
        " ON p.trace = '{t}' AND p.id = e.producer GROUP BY p.name ORDER BY events DESC LIMIT 5",
    ),
    (
        "most called methods",
        'SELECT behavior_id, count(*) AS calls, round(avg(arg_count), 2) AS args FROM "{t}".behavior_enter'
        " GROUP BY behavior_id ORDER BY calls DESC LIMIT 5",
    ),
    (
        "most written fields",
        'SELECT field_id, count(*) AS writes, count(DISTINCT target) AS objects FROM "{t}".field_write'
        " GROUP BY field_id ORDER BY writes DESC LIMIT 5",
    ),
]


def cmd_demo(args) -> int:
    from ..formats.tod.generate import generate_tod

    name = "demo-tod"
    with open_store(args, write=True, fsync="batch") as s:
        if any(t.name == name for t in s.traces()):
            s.rm(name)
        with progress_bar(f"generating {name}", args.events, enabled=not args.json) as adv:
            r = generate_tod(s, name, args.events, progress=adv, description="tracehouse demo: TOD workload")
        results = {}
        timings = {}
        for title, q in DEMO_QUERIES:
            t0 = time.perf_counter()
            results[title] = s.sql(q.format(t=name))
            timings[title] = time.perf_counter() - t0
        info = s.trace(name)
        from ..server.ui import demo

        examples = demo.load_examples(
            s, say=(lambda m: None) if args.json else (lambda m: err.print(m, highlight=False))
        )
    if args.json:
        emit_json(
            {
                "store": str(s.path),
                "ingest": r,
                "bytes": info.bytes,
                "examples": examples,
                "queries": {k: {"rows": v.to_pylist(), "seconds": round(timings[k], 4)} for k, v in results.items()},
            }
        )
        return 0 if args.no_serve else _demo_serve(args, s.path)
    out.print(f"[bold]tracehouse demo[/bold] — store {s.path}")
    out.print(
        f"generated {r['events']:,} TOD events (seed 001 workload: 10 threads, 1,000 methods, 1,000 fields, "
        f"50 locals) in {r['seconds']:.2f} s = {r['events_per_s']:,} events/s, "
        f"{human_bytes(info.bytes)} on disk ({info.bytes / max(1, r['events']):.2f} B/event)"
    )
    for title, t in results.items():
        out.print(f"\n[bold]{title}[/bold]  ({timings[title] * 1000:.1f} ms)")
        arrow_table_render(t, "table")
    out.print(f"\nTry: tracehouse --store {s.path} query 'SELECT count(*) FROM \"{name}\".events'")
    return 0 if args.no_serve else _demo_serve(args, s.path)


def _demo_serve(args, path) -> int:
    """The demo's last step: the web UI over the demo store until Ctrl-C (server/ui/demo.py)."""
    from ..server.ui import demo

    return demo.serve_ui(
        path,
        host=args.host,
        port=args.port,
        token=args.token or os.environ.get("TRACEHOUSE_TOKEN"),
        say=lambda m: err.print(m, highlight=False),
        ready_file=args.ready_file,
    )


def register(commands) -> None:
    add = commands.add

    sp = add("import", cmd_import)
    from ..formats import registry

    sp.add_argument("importer", help=f"format: {registry.importer_names()} (tracehouse tools)")
    sp.add_argument(
        "path",
        help="the file; - (or /dev/stdin, a FIFO) reads a pipe as the data arrives, "
        "committed batch by batch ("
        + ", ".join(n for n, i in registry.importers().items() if hasattr(i, "import_stream"))
        + ")",
    )
    sp.add_argument("--name", help="trace name (default: the file name)")
    sp.add_argument("--description")
    sp.add_argument("--ts", default="ts", help="timestamp column (default ts)")
    sp.add_argument("--ts-unit", default="ns", choices=("ns", "us", "ms", "s"))
    sp.add_argument("--producer", default="producer", help="producer column: ids or names (default producer)")
    sp.add_argument("--type", default="type", help="event type column (default type)")
    sp.add_argument("--event-type", default="event", help="event type when there is no type column")
    sp.add_argument("--seq", help="per-producer sequence column (default: assigned)")
    sp.add_argument("--dur", help="duration column, ns (makes span events)")
    sp.add_argument("--kind", choices=("instant", "span", "begin", "end", "counter", "link"))
    sp.add_argument("--trace-format", help="format name the event types are stored under (default: the importer)")
    sp.add_argument("--strict", action="store_true", help="stop at the first bad line and register nothing")
    add_importer_options(sp)
    sp.add_argument(
        "--fsync",
        choices=("always", "batch", "off"),
        default="off",
        help="durability while importing (default off: the import is durable when it ends)",
    )
    sp = add("generate", cmd_generate)
    sp.add_argument("workload", choices=("tod",))
    sp.add_argument("--events", type=int, default=1_000_000)
    sp.add_argument("--name", required=True)
    sp.add_argument("--seed", type=int, default=42)
    sp.add_argument("--threads", type=int, default=10)
    sp.add_argument("--fsync", choices=("always", "batch", "off"), default="off")
    sp = add("demo", cmd_demo)
    sp.add_argument("--events", type=int, default=2_000_000, help="TOD events to generate (default 2M)")
    sp.add_argument("--no-serve", action="store_true", help="load the examples and exit (no server)")
    sp.add_argument("--host", default="127.0.0.1", help="address of the demo server (default 127.0.0.1)")
    sp.add_argument("--port", type=int, default=8086, help="its HTTP port (default 8086; 0 picks a free one)")
    sp.add_argument("--token", help="require this token (default $TRACEHOUSE_TOKEN; needed off loopback)")
    sp.add_argument("--ready-file", help="write the server's addresses as JSON here once the demo is served")
