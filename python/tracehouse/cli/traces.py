"""The commands over a store and its traces: init, ls, info, search, query, export, rm, compact,
retain, verify, repair.

Thin shells over `Store` (and `open_engine` for several stores, the exporters of `formats/registry`
for export); printing is `output`'s.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from .. import default_path
from ..errors import BadInput
from .output import (
    add_spark_args,
    arrow_table_render,
    emit_json,
    err,
    human_bytes,
    human_ns,
    open_store,
    out,
    print_traces,
    progress_bar,
    rows_render,
    spark_conf,
)


def cmd_init(args) -> int:
    from ..store import Store

    store = Store(args.store or default_path())
    store.close()
    if args.json:
        emit_json({"store": str(store.path)})
    else:
        out.print(f"store ready at {store.path}")
    return 0


def cmd_ls(args) -> int:
    import dataclasses

    with open_store(args) as s:
        traces = []
        for t in s.traces():  # damaged WAL records recovery has not cut yet are said too
            pending = s.pending_wal_damage(t.name)
            if pending:
                t = dataclasses.replace(
                    t, state_reason=pending if t.state_reason is None else f"{pending}; {t.state_reason}"
                )
            traces.append(t)
        unknown = s.unknown_trace_dirs()
        print_traces(traces, args.json)
    if unknown:
        from rich.markup import escape

        err.print(
            f"[yellow]warning:[/yellow] {escape(', '.join(unknown))}: trace director"
            f"{'y' if len(unknown) == 1 else 'ies'} the catalog does not know (writes are refused): "
            "`tracehouse verify` says what they hold, `tracehouse repair` registers them again",
            highlight=False,
        )
    return 0


def cmd_info(args) -> int:
    from rich.markup import escape
    from rich.table import Table

    with open_store(args) as s:
        info = s.trace(args.trace)
        types = s.event_types(args.trace)
        counts = {}
        segments = s.segments_of(args.trace)
        for seg in segments:
            counts[seg.event_type] = counts.get(seg.event_type, 0) + seg.rows
        nseg = len(segments)
        producers = s.producers(args.trace)
        damaged: dict[str, list[str]] = {}
        for seg, why in s.damaged_segments(args.trace):
            damaged.setdefault(seg.event_type, []).append(f"{seg.path}: {why}")
        pending = s.pending_wal_damage(args.trace)
        data = info.to_json() | {
            "segments": nseg,
            "producers": len(producers),
            "event_types": [
                {
                    "name": et.name,
                    "kind": et.kind,
                    "events": counts.get(et.name, 0),
                    "params": [p.to_json() for p in et.params],
                    "damaged": damaged.get(et.name, []),
                }
                for et in types.values()
            ],
        }
        if pending:
            data["state"] = "incomplete"
            data["state_reason"] = pending if info.state_reason is None else f"{pending}; {info.state_reason}"
    if args.json:
        emit_json(data)
        return 0
    out.print(
        f"[bold]{info.name}[/bold]  format {info.format}  {info.event_count:,} events  "
        f"{human_bytes(info.bytes)} in {nseg} segments  {len(producers)} producers"
    )
    if info.description:
        out.print(info.description)
    if data["state_reason"] is not None:
        out.print(f"[yellow]incomplete:[/yellow] {escape(data['state_reason'])}")
    out.print(f"time {human_ns(info.ts_min)} .. {human_ns(info.ts_max)}")
    for k, v in info.metadata.items():
        out.print(f"  {k} = {v}")
    table = Table(show_edge=False, header_style="bold")
    for c in ("event type", "kind", "events", "parameters"):
        table.add_column(c)
    for et in data["event_types"]:
        events = f"{et['events']:,}" + (" [red](damaged)[/red]" if et["damaged"] else "")
        table.add_row(
            et["name"],
            et["kind"],
            events,
            escape(
                ", ".join(f"{p['name']}:{p['type']}" + (f" [{p['unit']}]" if p["unit"] else "") for p in et["params"])
            ),
        )
    out.print(table)
    for et in data["event_types"]:
        for d in et["damaged"]:
            out.print(f"[red]damaged[/red] {escape(et['name'])}: {escape(d)}", highlight=False)
    return 0


def cmd_search(args) -> int:
    meta = {}
    for kv in args.meta or []:
        if "=" not in kv:
            raise BadInput(f"--meta {kv!r}", expected="KEY=GLOB")
        k, v = kv.split("=", 1)
        meta[k] = v
    with open_store(args) as s:
        traces = s.search(
            args.name,
            format=args.format,
            metadata=meta,
            start=args.start,
            end=args.end,
            min_events=args.min_events,
            max_events=args.max_events,
            min_bytes=args.min_bytes,
            max_bytes=args.max_bytes,
        )
    print_traces(traces, args.json)
    return 0


def query_stores(args) -> list:
    """The stores of a query: --store DIR (before the command) and every `query --store
    [ALIAS=]DIR` and `--store-list FILE` entry; default $TRACEHOUSE_HOME or ./tracehouse-data."""
    from ..store.engines import load_store_list, parse_store

    refs = [parse_store(args.store)] if args.store else []
    refs += [parse_store(s) for s in args.stores or []]
    refs += load_store_list(args.store_list) if args.store_list else []
    return refs or [parse_store(default_path())]


def cmd_query(args) -> int:
    fmt = "json" if args.json else args.format
    refs = query_stores(args)
    engine = args.engine or ("spark" if args.master or args.conf else None)
    if engine is None and len(refs) == 1:
        from ..store import Store

        with Store(refs[0].path, readonly=True) as s:
            count = s.whole_count(args.sql)
            if count is not None:  # from the catalog: printed without pyarrow or DuckDB
                name, n = count
                rows_render([name], [True], [{name: n}], 1, fmt, args.limit if fmt == "table" else None)
                return 0
            t = s.sql(args.sql)
    else:
        from ..store.engines import open_engine

        t0 = time.perf_counter()
        with open_engine(refs, engine or "duckdb", master=args.master, conf=spark_conf(args)) as e:
            t = e.sql(args.sql)
            err.print(
                f"answered by {e.description} over {len(refs)} store(s) in {time.perf_counter() - t0:.2f} s",
                highlight=False,
                markup=False,
            )
    arrow_table_render(t, fmt, limit=args.limit if fmt == "table" else None)
    return 0


def cmd_export(args) -> int:
    """Through the exporter of `--format` (formats/registry.py): a directory of files per event type
    (Parquet, CSV) goes to OUT/<trace>/; one file to OUT/<trace>.<ext>, or to OUT itself when it
    names a file (has a suffix)."""
    from ..formats import registry

    exp = registry.exporter(args.format)
    out_path = Path(args.out or ".")
    with open_store(args) as s:
        info = s.trace(args.trace)
        if getattr(exp, "LAYOUT", None) == "directory":
            out_path = out_path / info.name  # (the exporter checks the pages itself: typed_files)
        else:
            s.check_pages(info.name)  # DuckDB reads a damaged page as other numbers: never exported
            if not out_path.suffix:
                out_path = out_path / f"{info.name}.{getattr(exp, 'EXTENSION', args.format)}"
        with progress_bar(
            f"exporting {info.name}", info.event_count, enabled=not args.json and sys.stderr.isatty()
        ) as adv:
            r = exp.export(s, info.name, out_path, progress=adv)
    if args.json:
        emit_json(r)
    elif "files" in r:
        for f in r["files"]:
            out.print(f"{f['path']}  {human_bytes(f['bytes'])}")
    else:
        out.print(f"{r['path']}  {r.get('events', 0):,} events  {human_bytes(r.get('bytes'))}")
    return 0


def cmd_rm(args) -> int:
    with open_store(args, write=True) as s:
        for name in args.trace:
            s.rm(name)
    if args.json:
        emit_json({"removed": args.trace})
    else:
        out.print("removed " + ", ".join(args.trace))
    return 0


def cmd_compact(args) -> int:
    """Merge small segments now (`Store.compact`); the store also does it on its own."""
    from rich.markup import escape

    with open_store(args, write=True) as s:
        names = args.trace or [t.name for t in s.traces()]
        for name in names:
            s.trace(name)  # unknown names fail before anything is merged
        merged = {}
        with progress_bar("compacting", len(names), enabled=not args.json and sys.stderr.isatty()) as adv:
            for name in names:
                before = len(s.segments_of(name))
                s.compact(name)
                merged[name] = {"segments_before": before, "segments": len(s.segments_of(name))}
                adv(1)
    if args.json:
        emit_json({"traces": merged})
    else:
        for name, m in merged.items():
            out.print(f"{escape(name)}: {m['segments_before']} -> {m['segments']} segments", highlight=False)
    return 0


def cmd_retain(args) -> int:
    """Set how long a trace keeps its rows (`Store.set_retention`) and apply it now."""
    from ..store.compact import format_duration, parse_duration

    keep = parse_duration(args.keep)
    with open_store(args, write=True) as s:
        before = s.trace(args.trace)
        dropped = s.set_retention(args.trace, keep)
        after = s.trace(args.trace)
    r = {
        "trace": args.trace,
        "keep_ns": keep,
        "keep": format_duration(keep) if keep else "inf",
        "segments_dropped": dropped,
        "events_before": before.event_count,
        "events": after.event_count,
    }
    if args.json:
        emit_json(r)
    else:
        from rich.markup import escape

        out.print(
            f"{escape(args.trace)}: keeps {r['keep'] if keep else 'every row'}; {dropped} segments dropped, "
            f"{before.event_count:,} -> {after.event_count:,} events",
            highlight=False,
        )
    return 0


def cmd_verify(args) -> int:
    """`tracehouse verify`: exit 0 when everything is intact, 1 otherwise."""
    from rich.markup import escape

    from ..store import verify_store
    from ..store.verify import render

    path = Path(args.store or default_path())
    if not path.exists():
        raise BadInput(f"no tracehouse store at {path}", expected="a store directory (--store DIR)")
    with progress_bar("verifying", None, enabled=not args.json and sys.stderr.isatty()) as adv:
        report = verify_store(path, progress=adv)
    if args.json:
        emit_json(report)
    else:
        for line in render(report):
            out.print(escape(line), highlight=False)
    return 0 if report["ok"] else 1


def cmd_repair(args) -> int:
    from rich.markup import escape

    from ..store import repair_store
    from ..store.repair import render

    path = Path(args.store or default_path())
    if not path.exists():
        raise BadInput(f"no tracehouse store at {path}", expected="a store directory (--store DIR)")
    report = repair_store(path, progress=None if args.json else (lambda m: err.print(escape(m), highlight=False)))
    if args.json:
        emit_json(report)
    else:
        for line in render(report):
            out.print(escape(line), highlight=False)
    return 0


def register(commands) -> None:
    add = commands.add

    add("init", cmd_init)
    add("ls", cmd_ls)
    sp = add("info", cmd_info)
    sp.add_argument("trace")
    sp = add("search", cmd_search)
    sp.add_argument("name", nargs="?", help="glob on the trace name, e.g. 'run-*'")
    sp.add_argument("--format")
    sp.add_argument("--meta", action="append", metavar="KEY=GLOB")
    sp.add_argument("--start", type=int, help="overlaps [start, end], ns")
    sp.add_argument("--end", type=int)
    sp.add_argument("--min-events", type=int)
    sp.add_argument("--max-events", type=int)
    sp.add_argument("--min-bytes", type=int)
    sp.add_argument("--max-bytes", type=int)
    sp = add("query", cmd_query)
    sp.add_argument("sql")
    sp.add_argument("--format", choices=("table", "csv", "json"), default="table")
    sp.add_argument("--limit", type=int, default=100, help="rows shown in table format")
    sp.add_argument(
        "--engine", choices=("duckdb", "spark"), help="duckdb (default, this process) or spark (docs/spark.md)"
    )
    add_spark_args(sp)
    sp.add_argument(
        "--store",
        dest="stores",
        action="append",
        metavar="[ALIAS=]DIR",
        help="query this store too (repeat): several stores are queried as one",
    )
    sp.add_argument("--store-list", metavar="FILE", help="a TOML file of [[store]] tables (path, alias, url)")
    sp = add("export", cmd_export)
    sp.add_argument("trace")
    # Not `choices`: listing the exporters loads every plugin, and `ls` registers this parser too.
    # An unknown name is refused by the registry (exit 2, naming the ones there are).
    sp.add_argument(
        "--format",
        default="parquet",
        help="parquet | csv: one file per event type; chrome: one Chrome JSON file (Perfetto UI); "
        "or any exporter `tracehouse tools` lists",
    )
    sp.add_argument(
        "--out",
        help="directory (default: .); parquet/csv go to OUT/<trace>/, others to "
        "OUT/<trace>.<ext>, or to OUT itself when it names a file (e.g. t.json.gz)",
    )
    sp = add("rm", cmd_rm)
    sp.add_argument("trace", nargs="+")
    sp = add("compact", cmd_compact)
    sp.add_argument("trace", nargs="*", help="traces (default: all)")
    sp = add("retain", cmd_retain)
    sp.add_argument("trace")
    sp.add_argument(
        "--keep",
        required=True,
        metavar="DURATION",
        help="keep rows this long (30d, 12h, 1w; inf: forever): whole segments whose newest row is older "
        "are dropped now and at every compaction; nothing else is deleted",
    )
    add("verify", cmd_verify)
    add("repair", cmd_repair)
