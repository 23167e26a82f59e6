"""The `tracehouse` command: a thin shell over `Store`.

Owns argument parsing, output rendering (rich tables, CSV, JSON with
`--json`), progress bars and exit codes: 0 ok, 1 failure, 2 bad input or
unknown names, 3 store locked by another writer. The store is `--store DIR`,
else $TRACEHOUSE_HOME, else ./tracehouse-data.
"""

from __future__ import annotations

import argparse
import csv as csvmod
import datetime as dt
import glob
import io
import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from .. import __version__, default_path
from ..errors import BadInput, TracehouseError
from ..formats.tod.generate import generate_tod
from ..store import Store
from ..store.query import qident, qstr
from ..store.store import trace_name_from

# Piped or redirected, rich would fit tables to 80 columns, cutting numbers and names
# ("1,000,…"): tables then take the width they need (scripts read every digit).
out = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 1 << 16)
err = Console(stderr=True, soft_wrap=True)  # errors stay one greppable line


# -- helpers -------------------------------------------------------------------------


def open_store(args, *, write: bool = False, **options) -> Store:
    path = args.store or default_path()
    if not write:
        return Store(path, readonly=True)
    return Store(path, **options)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def human_bytes(n: int | None) -> str:
    if n is None:
        return ""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def human_ns(ns: int | None) -> str:
    if ns is None:
        return ""
    if ns > 10**17:  # looks like a unix epoch in ns
        return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).isoformat(timespec="microseconds")
    return f"{ns / 1e9:.6f} s"


@contextmanager
def progress_bar(description: str, total: int | None, enabled: bool = True):
    """Yields advance(n); draws a bar on stderr when the terminal (or FORCE) allows."""
    if not enabled:
        yield lambda n: None
        return
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TimeRemainingColumn()]
    with Progress(*columns, console=err, transient=True) as p:
        task = p.add_task(description, total=total)
        yield lambda n: p.advance(task, n)


def arrow_table_render(t: pa.Table, fmt: str, limit: int | None = None,
                       more: str = "use --format csv or json for all") -> None:
    """`t` as JSON, CSV or a table of its first `limit` rows (`more` says how to see the rest)."""
    if fmt == "json":
        emit_json(t.to_pylist())
    elif fmt == "csv":
        buf = io.StringIO()
        w = csvmod.writer(buf)
        w.writerow(t.column_names)
        for row in t.to_pylist():
            w.writerow([row[c] for c in t.column_names])
        sys.stdout.write(buf.getvalue())
    else:
        table = Table(show_edge=False, header_style="bold")
        for c in t.column_names:
            table.add_column(c, justify="right" if pa.types.is_integer(t.schema.field(c).type)
                             or pa.types.is_floating(t.schema.field(c).type) else "left")
        rows = t.slice(0, limit).to_pylist() if limit else t.to_pylist()
        for row in rows:
            table.add_row(*["NULL" if v is None else escape(str(v)) for v in row.values()])
        out.print(table)
        if limit and t.num_rows > limit:
            err.print(f"({t.num_rows:,} rows, {limit} shown; {more})")


def trace_rows(traces) -> list[dict]:
    return [t.to_json() for t in traces]


def print_traces(traces, as_json: bool) -> None:
    if as_json:
        emit_json(trace_rows(traces))
        return
    table = Table(show_edge=False, header_style="bold")
    for c, j in (("name", "left"), ("format", "left"), ("events", "right"), ("bytes", "right"),
                 ("from", "left"), ("to", "left"), ("created", "left")):
        table.add_column(c, justify=j)
    for t in traces:
        created = dt.datetime.fromtimestamp(t.created).strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(t.name, t.format, f"{t.event_count:,}", human_bytes(t.bytes), human_ns(t.ts_min),
                      human_ns(t.ts_max), created)
    out.print(table)
    if not traces:
        err.print("no traces")
    for t in traces:
        if t.state_reason is not None:
            err.print(f"[yellow]{escape(t.name)} is incomplete:[/yellow] {escape(t.state_reason)}")


# -- commands ------------------------------------------------------------------------


def cmd_init(args) -> int:
    store = Store(args.store or default_path())
    store.close()
    if args.json:
        emit_json({"store": str(store.path)})
    else:
        out.print(f"store ready at {store.path}")
    return 0


def cmd_ls(args) -> int:
    with open_store(args) as s:
        print_traces(s.traces(), args.json)
    return 0


def cmd_info(args) -> int:
    with open_store(args) as s:
        info = s.trace(args.trace)
        types = s.event_types(args.trace)
        counts = {}
        segments = s.segments_of(args.trace)
        for seg in segments:
            counts[seg.event_type] = counts.get(seg.event_type, 0) + seg.rows
        nseg = len(segments)
        producers = s.producers(args.trace)
        data = info.to_json() | {
            "segments": nseg,
            "producers": len(producers),
            "event_types": [
                {"name": et.name, "kind": et.kind, "events": counts.get(et.name, 0),
                 "params": [p.to_json() for p in et.params]}
                for et in types.values()
            ],
        }
    if args.json:
        emit_json(data)
        return 0
    out.print(f"[bold]{info.name}[/bold]  format {info.format}  {info.event_count:,} events  "
              f"{human_bytes(info.bytes)} in {nseg} segments  {len(producers)} producers")
    if info.description:
        out.print(info.description)
    if info.state_reason is not None:
        out.print(f"[yellow]incomplete:[/yellow] {escape(info.state_reason)}")
    out.print(f"time {human_ns(info.ts_min)} .. {human_ns(info.ts_max)}")
    for k, v in info.metadata.items():
        out.print(f"  {k} = {v}")
    table = Table(show_edge=False, header_style="bold")
    for c in ("event type", "kind", "events", "parameters"):
        table.add_column(c)
    for et in data["event_types"]:
        table.add_row(et["name"], et["kind"], f"{et['events']:,}",
                      escape(", ".join(f"{p['name']}:{p['type']}" + (f" [{p['unit']}]" if p["unit"] else "")
                                       for p in et["params"])))
    out.print(table)
    return 0


def cmd_search(args) -> int:
    meta = {}
    for kv in args.meta or []:
        if "=" not in kv:
            raise BadInput(f"--meta {kv!r}", expected="KEY=GLOB")
        k, v = kv.split("=", 1)
        meta[k] = v
    with open_store(args) as s:
        traces = s.search(args.name, format=args.format, metadata=meta, start=args.start, end=args.end,
                          min_events=args.min_events, max_events=args.max_events, min_bytes=args.min_bytes,
                          max_bytes=args.max_bytes)
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
    engine = args.engine or ("spark" if args.master else None)
    if engine is None and len(refs) == 1:
        with Store(refs[0].path, readonly=True) as s:
            t = s.sql(args.sql)
    else:
        from ..store.engines import open_engine

        t0 = time.perf_counter()
        with open_engine(refs, engine or "duckdb", master=args.master) as e:
            t = e.sql(args.sql)
            err.print(f"answered by {e.description} over {len(refs)} store(s) in {time.perf_counter() - t0:.2f} s",
                      highlight=False, markup=False)
    arrow_table_render(t, fmt, limit=args.limit if fmt == "table" else None)
    return 0


def cmd_export(args) -> int:
    if args.format not in ("parquet", "csv"):
        return export_with_plugin(args)
    from ..formats.parquet.importer import EXPORT_KEY, export_meta

    out_dir = Path(args.out or ".")
    with open_store(args) as s:
        info = s.trace(args.trace)
        types = s.event_types(args.trace)
        target = out_dir / info.name
        target.mkdir(parents=True, exist_ok=True)
        files = []
        for name, et in types.items():
            path = target / f"{name}.{args.format}"
            opts = "(FORMAT csv, HEADER true)"
            if args.format == "parquet":  # the type and format ride along: `import parquet` restores them
                opts = f"(FORMAT parquet, COMPRESSION zstd, KV_METADATA {{{qstr(EXPORT_KEY)}: {qstr(export_meta(info, et))}}})"
            s.sql(f"COPY (SELECT * FROM {qident(info.name)}.{qident(name)} ORDER BY ts, producer, seq) "
                  f"TO '{str(path).replace(chr(39), chr(39) * 2)}' {opts}")
            files.append({"event_type": name, "path": str(path), "bytes": path.stat().st_size})
        prod = pa.Table.from_pylist([p | {"attrs": json.dumps(p["attrs"])} for p in s.producers(args.trace)]) \
            if s.producers(args.trace) else None
        if prod is not None:
            ppath = target / f"producers.{args.format}"
            if args.format == "parquet":
                import pyarrow.parquet as pq

                pq.write_table(prod, ppath)
            else:
                import pyarrow.csv as pacsv

                pacsv.write_csv(prod, ppath)
            files.append({"event_type": None, "path": str(ppath), "bytes": ppath.stat().st_size})
    if args.json:
        emit_json({"trace": info.name, "files": files})
    else:
        for f in files:
            out.print(f"{f['path']}  {human_bytes(f['bytes'])}")
    return 0


def export_with_plugin(args) -> int:
    """`export --format NAME` through a registered exporter: one file, OUT/<trace>.<ext> or OUT itself
    when it names a file (has a suffix)."""
    from ..formats import registry

    exp = registry.exporter(args.format)
    out_path = Path(args.out or ".")
    if not out_path.suffix:
        out_path = out_path / f"{args.trace}.{getattr(exp, 'EXTENSION', args.format)}"
    with open_store(args) as s:
        info = s.trace(args.trace)
        with progress_bar(f"exporting {info.name}", info.event_count, enabled=not args.json and sys.stderr.isatty()) as adv:
            r = exp.export(s, info.name, out_path, progress=adv)
    if args.json:
        emit_json(r)
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
        raise BadInput(f"--{other[0].replace('_', '-')} does not apply to the {imp.NAME} importer",
                       expected=", ".join("--" + o for o in sorted(mine)) or "no importer-specific options")
    return given


def cmd_import(args) -> int:
    from ..formats import registry
    from ..formats.tabular import Mapping

    path = Path(args.path)
    if not path.exists() and not any(path.parent.glob(glob.escape(path.name) + ".*")):  # PREFIX of strace -ff
        raise BadInput("no such file", file=str(path))
    imp = registry.importer(args.importer, path)
    mapping = Mapping(ts=args.ts, ts_unit=args.ts_unit, producer=args.producer, type=args.type, seq=args.seq,
                      dur=args.dur, event_type=args.event_type, kind=args.kind, format=args.trace_format)
    # A name given is checked as given; one taken from the file name is cleaned
    # (`my events (1).csv` -> my_events_1, `データ.csv` -> データ).
    name = args.name if args.name is not None else trace_name_from(path.stem.split(".")[0])
    t0 = time.perf_counter()
    with open_store(args, write=True, fsync=args.fsync) as s:
        with progress_bar(f"importing {path.name}", None, enabled=not args.json and sys.stderr.isatty()) as adv:
            report = imp.import_file(s, path, name, mapping=mapping, strict=args.strict,
                                     description=args.description or "", progress=adv, **importer_options(args, imp))
    secs = time.perf_counter() - t0
    data = report.to_json() | {"seconds": round(secs, 3), "events_per_s": round(report.events / secs)}
    if args.json:
        emit_json(data)
    else:
        out.print(f"imported {report.events:,} events into [bold]{report.trace}[/bold] in {secs:.2f} s "
                  f"({report.events / secs:,.0f} events/s): " + ", ".join(f"{k} {v:,}" for k, v in report.by_type.items()))
        for k, v in (getattr(report, "details", None) or {}).items():
            if isinstance(v, int):
                err.print(f"{k.replace('_', ' ')}: {v:,}")
            elif k == "spans":
                for span, st in v.items():
                    err.print(f"span {span}: {st['matched']:,} matched, {st['unmatched_begin']:,} starts and "
                              f"{st['unmatched_end']:,} ends unmatched")
            elif k == "results":
                for r in v:
                    err.print(f"result {r['id']}: {r['kind']} {r['name']} ({r['rows']:,} rows)")
        if report.rejected:
            err.print(f"[yellow]{report.rejected} rejected lines[/yellow] (first: " + "; ".join(
                f"line {r.line}: {r.reason}" for r in report.first_rejected[:5]) + ")")
    return 0


def cmd_generate(args) -> int:
    if args.workload != "tod":
        raise BadInput(f"unknown workload {args.workload!r}", expected="tod")
    with open_store(args, write=True, fsync=args.fsync) as s:
        with progress_bar(f"generating {args.name}", args.events, enabled=not args.json) as adv:
            r = generate_tod(s, args.name, args.events, seed=args.seed, threads=args.threads, progress=adv)
    if args.json:
        emit_json(r)
    else:
        out.print(f"generated {r['events']:,} TOD events into [bold]{r['trace']}[/bold] in {r['seconds']:.2f} s "
                  f"({r['events_per_s']:,} events/s)")
    return 0


DEMO_QUERIES = [
    ("events by type",
     'SELECT type, count(*) AS events, min(ts) AS first_ns, max(ts) AS last_ns FROM "{t}".events GROUP BY type ORDER BY events DESC'),
    ("events per thread",
     'SELECT p.name AS thread, count(*) AS events FROM "{t}".events e JOIN th.producers p'
     " ON p.trace = '{t}' AND p.id = e.producer GROUP BY p.name ORDER BY events DESC LIMIT 5"),
    ("most called methods",
     'SELECT behavior_id, count(*) AS calls, round(avg(arg_count), 2) AS args FROM "{t}".behavior_enter'
     " GROUP BY behavior_id ORDER BY calls DESC LIMIT 5"),
    ("most written fields",
     'SELECT field_id, count(*) AS writes, count(DISTINCT target) AS objects FROM "{t}".field_write'
     " GROUP BY field_id ORDER BY writes DESC LIMIT 5"),
]


def cmd_demo(args) -> int:
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

        examples = demo.load_examples(s, say=(lambda m: None) if args.json else (lambda m: err.print(m, highlight=False)))
    if args.json:
        emit_json({"store": str(s.path), "ingest": r, "bytes": info.bytes, "examples": examples,
                   "queries": {k: {"rows": v.to_pylist(), "seconds": round(timings[k], 4)} for k, v in results.items()}})
        return 0 if args.no_serve else _demo_serve(args, s.path)
    out.print(f"[bold]tracehouse demo[/bold] — store {s.path}")
    out.print(f"generated {r['events']:,} TOD events (seed 001 workload: 10 threads, 1,000 methods, 1,000 fields, "
              f"50 locals) in {r['seconds']:.2f} s = {r['events_per_s']:,} events/s, "
              f"{human_bytes(info.bytes)} on disk ({info.bytes / max(1, r['events']):.2f} B/event)")
    for title, t in results.items():
        out.print(f"\n[bold]{title}[/bold]  ({timings[title] * 1000:.1f} ms)")
        arrow_table_render(t, "table")
    out.print(f"\nTry: tracehouse --store {s.path} query 'SELECT count(*) FROM \"{name}\".events'")
    return 0 if args.no_serve else _demo_serve(args, s.path)


def _demo_serve(args, path) -> int:
    """The demo's last step: the web UI over the demo store until Ctrl-C (server/ui/demo.py)."""
    from ..server.ui import demo

    return demo.serve_ui(path, host=args.host, port=args.port, token=args.token or os.environ.get("TRACEHOUSE_TOKEN"),
                         say=lambda m: err.print(m, highlight=False), ready_file=args.ready_file)


def cmd_bench_ingest(args) -> int:
    from ..bench import ingest

    return ingest.run_args(args)


# -- parser --------------------------------------------------------------------------


# Modules that add commands: each has `register(commands: Commands)`. One line per area
# (importers, analyses, server, ...), so areas never edit each other's parsers.
COMMAND_MODULES: tuple[str, ...] = (
    "tracehouse.cli.serve",
    "tracehouse.tools",
    "tracehouse.bench.chrome",
    "tracehouse.cli.replay",
    "tracehouse.cli.analyze",
    "tracehouse.bench.import_",
    "tracehouse.bench.engines",
    "tracehouse.bench.suite",
)


class Commands:
    """Where a module adds its subcommands (`add`) and benchmarks (`bench`)."""

    def __init__(self, sub, bench_sub) -> None:
        self._sub = sub
        self._bench_sub = bench_sub

    @staticmethod
    def _finish(sp: argparse.ArgumentParser, fn) -> argparse.ArgumentParser:
        sp.add_argument("--json", action="store_true", help="print machine-readable JSON")
        sp.set_defaults(fn=fn)
        return sp

    def add(self, name: str, fn: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        """`tracehouse NAME ...`; fn(args) returns the exit code."""
        return self._finish(self._sub.add_parser(name, help=help, description=help), fn)

    def bench(self, name: str, fn: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        """`tracehouse bench NAME ...`: a benchmark printing numbers beside peers measured in the same run."""
        return self._finish(self._bench_sub.add_parser(name, help=help, description=help), fn)


def build_parser() -> argparse.ArgumentParser:
    import importlib

    p = argparse.ArgumentParser(prog="tracehouse", description="A warehouse for execution traces.")
    p.add_argument("--version", action="version", version=f"tracehouse {__version__}")
    p.add_argument("--store", help="store directory (default: $TRACEHOUSE_HOME or ./tracehouse-data)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    bench = sub.add_parser("bench", help="benchmarks against peers measured in the same run",
                           description="benchmarks against peers measured in the same run")
    commands = Commands(sub, bench.add_subparsers(dest="bench", required=True, metavar="BENCHMARK"))
    add = commands.add

    add("init", cmd_init, "create an empty store")
    add("ls", cmd_ls, "list traces")
    sp = add("info", cmd_info, "describe one trace: event types, counts, producers, segments")
    sp.add_argument("trace")
    sp = add("search", cmd_search, "find traces by name, format, metadata, time range and size")
    sp.add_argument("name", nargs="?", help="glob on the trace name, e.g. 'run-*'")
    sp.add_argument("--format")
    sp.add_argument("--meta", action="append", metavar="KEY=GLOB")
    sp.add_argument("--start", type=int, help="overlaps [start, end], ns")
    sp.add_argument("--end", type=int)
    sp.add_argument("--min-events", type=int)
    sp.add_argument("--max-events", type=int)
    sp.add_argument("--min-bytes", type=int)
    sp.add_argument("--max-bytes", type=int)
    sp = add("query", cmd_query, "run SQL over the store (DuckDB dialect)")
    sp.add_argument("sql")
    sp.add_argument("--format", choices=("table", "csv", "json"), default="table")
    sp.add_argument("--limit", type=int, default=100, help="rows shown in table format")
    sp.add_argument("--engine", choices=("duckdb", "spark"),
                    help="duckdb (default, this process) or spark (README: Beyond one machine)")
    sp.add_argument("--master", help="Spark master URL (default local[2])")
    sp.add_argument("--store", dest="stores", action="append", metavar="[ALIAS=]DIR",
                    help="query this store too (repeat): several stores are queried as one")
    sp.add_argument("--store-list", metavar="FILE", help="a TOML file of [[store]] tables (path, alias, url)")
    sp = add("export", cmd_export, "write a trace's events, one file per event type")
    sp.add_argument("trace")
    from ..formats import registry

    sp.add_argument("--format", choices=("parquet", "csv", *registry.exporters()), default="parquet",
                    help="parquet | csv: one file per event type; chrome: one Chrome JSON file (Perfetto UI)")
    sp.add_argument("--out", help="directory (default: .); parquet/csv go to OUT/<trace>/, others to "
                                  "OUT/<trace>.<ext>, or to OUT itself when it names a file (e.g. t.json.gz)")
    sp = add("rm", cmd_rm, "delete traces")
    sp.add_argument("trace", nargs="+")
    sp = add("compact", cmd_compact, "merge small segments now (the store also merges them on its own)")
    sp.add_argument("trace", nargs="*", help="traces (default: all)")
    sp = add("import", cmd_import, "import a file as a new trace")
    sp.add_argument("importer", help="format: csv | parquet | strace | chrome | bpftrace | stap | paje | ... (tracehouse tools)")
    sp.add_argument("path")
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
    sp.add_argument("--fsync", choices=("always", "batch", "off"), default="off",
                    help="durability while importing (default off: the import is durable when it ends)")
    sp = add("generate", cmd_generate, "generate a synthetic workload trace")
    sp.add_argument("workload", choices=("tod",))
    sp.add_argument("--events", type=int, default=1_000_000)
    sp.add_argument("--name", required=True)
    sp.add_argument("--seed", type=int, default=42)
    sp.add_argument("--threads", type=int, default=10)
    sp.add_argument("--fsync", choices=("always", "batch", "off"), default="off")
    sp = add("demo", cmd_demo, "example traces of every format (a generated TOD trace, strace, Chrome, bpftrace, "
                               "SystemTap, Paje, CSV, line protocol), then the web UI until Ctrl-C")
    sp.add_argument("--events", type=int, default=2_000_000, help="TOD events to generate (default 2M)")
    sp.add_argument("--no-serve", action="store_true", help="load the examples and exit (no server)")
    sp.add_argument("--host", default="127.0.0.1", help="address of the demo server (default 127.0.0.1)")
    sp.add_argument("--port", type=int, default=8086, help="its HTTP port (default 8086; 0 picks a free one)")
    sp.add_argument("--token", help="require this token (default $TRACEHOUSE_TOKEN; needed off loopback)")
    sp.add_argument("--ready-file", help="write the server's addresses as JSON here once the demo is served")
    sp = commands.bench("ingest", cmd_bench_ingest,
                        "TOD ingest: raw append, tracehouse, SQLite, DuckDB on the same batches (seed 001)")
    from ..bench import ingest

    ingest.add_arguments(sp)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(commands)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except TracehouseError as e:
        if getattr(args, "json", False):
            emit_json({"error": str(e), "kind": type(e).__name__})
        err.print(f"[red]error:[/red] {escape(str(e))}", highlight=False)
        return e.exit_code
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
