"""`tracehouse results ...`: the analysis results saved in the store (list, show, annotate,
group, rm); `show` prints the command line that computes a result again
(`analysis.results.replay_argv`).
"""

from __future__ import annotations

import json
import sys

import pyarrow as pa

from .. import default_path
from ..store import Store
from .analyze import time_arg


def _out():
    from .output import arrow_table_render, emit_json, err, out

    return out, err, emit_json, arrow_table_render


def r_list(args) -> int:
    out, err, emit_json, render = _out()
    with Store(args.store or default_path(), readonly=True) as s:
        rows = s.results(trace=args.trace, tool=args.tool, kind=args.kind, name=args.name)
    if args.json:
        emit_json(rows)
        return 0
    import datetime as dt

    t = pa.table(
        {
            "id": pa.array([r["id"] for r in rows], pa.int64()),
            "kind": pa.array([r["kind"] for r in rows]),
            "name": pa.array([r["name"] for r in rows]),
            "tool": pa.array([r["tool"] for r in rows]),
            "traces": pa.array([", ".join(r["traces"]) for r in rows]),
            "created": pa.array([dt.datetime.fromtimestamp(r["created"]).strftime("%Y-%m-%d %H:%M:%S") for r in rows]),
        }
    )
    render(t, "table", limit=args.limit)
    if not rows:
        err.print("no results")
    return 0


def r_show(args) -> int:
    from ..analysis.results import replay_argv, show

    out, err, emit_json, render = _out()
    with Store(args.store or default_path(), readonly=True) as s:
        r = show(s, args.id)
    table = r.pop("table")
    replay = replay_argv(r)
    if args.json:
        # Every row unless --limit says otherwise: JSON is for scripts, which want the result.
        rows = None if table is None else (table if args.limit is None else table.slice(0, args.limit)).to_pylist()
        emit_json(r | {"rows": rows, "row_count": table.num_rows if table is not None else 0, "replay": replay})
        return 0
    out.print(f"[bold]result {r['id']}[/bold]: {r['kind']} {r['name']!r} by {r['tool']} on {', '.join(r['traces'])}")
    out.print(f"params: {json.dumps(r['params'])}", highlight=False)
    if replay:
        import shlex

        out.print(f"replay: tracehouse {shlex.join(replay)}", highlight=False, markup=False)
    payload = r.get("payload") or {}
    if isinstance(payload, dict) and isinstance(payload.get("text"), str):
        sys.stdout.write(payload["text"])
    elif payload:
        out.print(f"payload: {json.dumps(payload)[:2000]}", highlight=False)
    if table is not None:
        limit = 50 if args.limit is None else args.limit
        if r["kind"] == "file" and "line" in table.column_names:
            sys.stdout.write("".join(x + "\n" for x in table.column("line").slice(0, limit).to_pylist()))
            if table.num_rows > limit:
                err.print(f"({table.num_rows:,} lines, {limit} shown; --limit N shows more, --json all)")
        else:
            render(table, "table", limit=limit, more="--limit N shows more, --json all")
    return 0


def r_annotate(args) -> int:
    from ..analysis.results import annotate

    out, err, emit_json, render = _out()
    with Store(args.store or default_path()) as s:
        rid = annotate(s, args.traces, args.text, ts=args.at, end=args.until, producer=args.producer)
    emit_json({"id": rid}) if args.json else out.print(f"annotation saved as result {rid}")
    return 0


def r_group(args) -> int:
    from ..analysis.results import group

    out, err, emit_json, render = _out()
    with Store(args.store or default_path()) as s:
        traces = list(args.traces) + ([t.name for t in s.search(args.search)] if args.search else [])
        rid = group(s, args.name, traces, description=args.description or "")
    emit_json({"id": rid, "traces": traces}) if args.json else out.print(
        f"group {args.name!r} of {len(traces)} traces saved as result {rid}"
    )
    return 0


def r_rm(args) -> int:
    out, err, emit_json, render = _out()
    with Store(args.store or default_path()) as s:
        for rid in args.id:
            s.delete_result(rid)
    emit_json({"removed": args.id}) if args.json else out.print("removed " + ", ".join(map(str, args.id)))
    return 0


def cmd_results(args) -> int:
    return args.results_fn(args)


def register(commands) -> None:
    """Adds `tracehouse results ...`."""
    rp = commands.add("results", cmd_results)
    rsub = rp.add_subparsers(dest="results_cmd", metavar="COMMAND")
    rp.set_defaults(results_fn=r_list, trace=None, tool=None, kind=None, name=None, limit=100)
    p = rsub.add_parser("list", help="list results (the default)")
    p.add_argument("--trace")
    p.add_argument("--tool")
    p.add_argument("--kind", choices=("annotation", "group", "search", "processed", "file", "table"))
    p.add_argument("--name")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--json", action="store_true")
    p.set_defaults(results_fn=r_list)
    p = rsub.add_parser("show", help="one result: provenance, payload and table")
    p.add_argument("id", type=int)
    p.add_argument("--limit", type=int, help="rows shown (default 50; with --json every row)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(results_fn=r_show)
    p = rsub.add_parser("annotate", help="a note on traces, optionally at a time")
    p.add_argument("traces", nargs="+")
    p.add_argument("--text", required=True)
    p.add_argument("--at", type=time_arg)
    p.add_argument("--until", type=time_arg)
    p.add_argument("--producer", type=int)
    p.add_argument("--json", action="store_true")
    p.set_defaults(results_fn=r_annotate)
    p = rsub.add_parser("group", help="a named group of traces")
    p.add_argument("name")
    p.add_argument("traces", nargs="*")
    p.add_argument("--search", help="also every trace whose name matches this glob")
    p.add_argument("--description")
    p.add_argument("--json", action="store_true")
    p.set_defaults(results_fn=r_group)
    p = rsub.add_parser("rm", help="delete results")
    p.add_argument("id", type=int, nargs="+")
    p.add_argument("--json", action="store_true")
    p.set_defaults(results_fn=r_rm)
