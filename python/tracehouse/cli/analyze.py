"""`tracehouse analyze NAME TRACE ...`: one loop over the analysis registry.

Owns the analyses' command-line surface, built from their descriptors
(`tracehouse.analysis.registry`): a subcommand per analysis, its arguments from the
descriptor's parameters (flag, type, default, help), `--json` (the answer's JSON), `--save`
(the answer becomes a result in the store, linked to the traces it was computed over, with
the arguments that reproduce it: `analysis.results.save_answer`), `--limit` (rows shown),
and the human output: the answer's parts (titles, tables, text such as bpftrace's
histograms or folded stacks, notes on stderr). Nothing here knows one analysis from
another: a plugin's appears the same way.

Derived data (processed span trace, indexes) is saved on first use whenever the store can
be written; when another process holds the writer lock it is kept in memory for the
command instead.
"""

from __future__ import annotations

import argparse
import sys

from .. import default_path
from ..errors import BadInput
from ..store import Store


def open_store(args) -> Store:
    """Writable (lazily: the writer lock is taken on the first save), fsync off: derived
    data can always be recomputed."""
    return Store(args.store or default_path(), fsync="off")


def time_arg(text: str) -> int:
    """argparse type of a time argument: ns, or a number with a unit (recorded as ns)."""
    from ..analysis.registry import parse_ns

    try:
        return parse_ns(text)
    except BadInput as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _converter(param):
    def convert(text: str):
        try:
            return param.convert(text)
        except BadInput as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    convert.__name__ = param.type  # argparse names the type in its error messages
    return convert


def _add_argument(p: argparse.ArgumentParser, groups: dict, param) -> None:
    where = p
    if param.group:
        where = groups.get(param.group) or groups.setdefault(param.group, p.add_argument_group(param.group))
    help_ = param.doc + (f" (default {param.default})" if param.default not in (None, False, ()) else "")
    if param.positional:
        where.add_argument(param.name, type=_converter(param), nargs="*" if param.many else None, help=help_)
        return
    kw: dict = {"dest": param.name, "help": help_}
    if param.type == "bool":
        kw["action"] = "store_true"
    else:
        kw["type"] = _converter(param)
        kw["default"] = param.default
        if param.choices:
            kw["choices"] = param.choices
        if param.many:
            kw["action"] = "append"
        if param.required:
            kw["required"] = True
        if param.metavar:
            kw["metavar"] = param.metavar
    where.add_argument(param.cli, **kw)


def _add(sub, a) -> None:
    """The subcommand of analysis `a`: its traces, --json, --save, --limit, its parameters."""
    from ..analysis.registry import TRACE_PARAMS

    doc = a.summary + (f"\n\n{a.doc}" if a.doc else "")
    p = sub.add_parser(a.name, help=a.summary, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    groups: dict = {}
    if a.cli_only is not None:  # an older plugin: `add_arguments(parser)`, `run(store, args)`
        p.add_argument("trace")
    traces = TRACE_PARAMS[a.traces] if a.cli_only is None else ()
    for param in traces:
        if param.positional:
            _add_argument(p, groups, param)
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument("--save", action="store_true", help="save the answer as a result in the store")
    if not any(x.name == "limit" for x in a.params):
        p.add_argument("--limit", type=int, default=a.limit, help=f"rows shown (default {a.limit})")
    for param in traces:
        if not param.positional:
            _add_argument(p, groups, param)
    for param in a.params:
        _add_argument(p, groups, param)
    if a.cli_only is not None and callable(getattr(a.cli_only, "add_arguments", None)):
        a.cli_only.add_arguments(p)
    p.set_defaults(analysis_obj=a)


def _show(answer, shown: dict) -> None:
    from ..analysis.registry import Note, Table, Text, Title
    from .output import arrow_table_render, err, out

    for part in answer.show(shown):
        if isinstance(part, Title):
            out.print(part.text, style="bold", markup=False, highlight=False)
        elif isinstance(part, Text):
            sys.stdout.write(part.text)
        elif isinstance(part, Note):
            err.print(part.text, markup=False, highlight=False)
        elif isinstance(part, Table):
            arrow_table_render(part.table, "table", limit=part.limit, more=part.more)


def cmd_analyze(args) -> int:
    from ..analysis.registry import Window, arguments, as_answer, select_traces
    from ..analysis.results import save_answer
    from .output import emit_json, err

    a = args.analysis_obj
    if a.cli_only is not None:
        return _run_plugin(a, args)
    values = {p.name: getattr(args, p.name, None) for p in arguments(a)}
    shown = {p.name: values[p.name] for p in a.params if not p.answer} | {"limit": getattr(args, "limit", None)}
    parts = a.window_parts
    producers = values.get(parts["producers"].name) if "producers" in parts else None
    window = Window(
        values.get(parts["start"].name) if "start" in parts else None,
        values.get(parts["end"].name) if "end" in parts else None,
        tuple(producers) if producers else None,
    )
    kw = {p.name: values[p.name] for p in a.params if p.answer and not p.window}
    with open_store(args) as s:
        resolved, extra = None, None
        if a.traces == "one":
            trace, traces = values["trace"], [values["trace"]]
        elif a.traces == "pair":
            trace = traces = [values["before"], values["after"]]
        else:
            search = {"name": values["search"], "format": values["format"]} if values.get("search") else None
            trace = traces = select_traces(s, values.get("traces") or [], search)
            resolved = {"traces": traces, "search": None, "format": None}
            extra = {"search": values.get("search")}
        answer = a.call(s, trace, window, **kw)
        rid = (
            save_answer(s, a, traces, answer, values, shown=shown, resolved=resolved, extra=extra)
            if args.save
            else None
        )
    shown["result"] = rid
    if args.json:
        emit_json(as_answer(answer).to_json(shown))
    else:
        _show(answer, shown)
    if rid is not None:
        err.print(f"saved as result {rid}")
    return 0


def _run_plugin(a, args) -> int:
    """An older plugin analysis: `run(store, args)` returns a table, text or a JSON-able value."""
    from ..analysis.registry import Rows, as_answer
    from ..analysis.results import save_table
    from .output import emit_json, err

    with open_store(args) as s:
        answer = as_answer(a.cli_only.run(s, args))
        if isinstance(answer, Rows):
            answer.title = f"{a.name}: {answer.rows.num_rows} rows"
        rid = None
        if args.save and isinstance(answer, Rows):
            traces = [args.trace] if getattr(args, "trace", None) else []
            rid = save_table(s, a.name, traces, answer.table(), params={"plugin": a.name})
    shown = {"limit": args.limit}
    if args.json:
        emit_json(answer.to_json(shown))
    else:
        _show(answer, shown)
    if rid is not None:
        err.print(f"saved as result {rid}")
    return 0


def add_analyses(sub) -> None:
    """`analyze NAME ...` for every analysis of the registry, ours and the plugins'."""
    from ..analysis.registry import analyses

    for a in analyses().values():
        _add(sub, a)


def register(commands) -> None:
    """Adds `tracehouse analyze ...` (`tracehouse results` is cli/results.py)."""
    sp = commands.add("analyze", cmd_analyze)
    add_analyses(sp.add_subparsers(dest="analysis", required=True, metavar="ANALYSIS"))
