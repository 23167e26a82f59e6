"""Saving analysis results with their provenance (after FrameSoC, seed 000).

Owns how each analysis's answer becomes a result in the store: its kind (annotation,
group, search, processed trace, table, file), the traces it is linked to (one or many:
a multi-trace result links every trace it was computed over), the tool that made it
and the parameters it was made with. The store keeps them (`Store.save_result`,
`th.results` in SQL); `tracehouse results` lists and shows them.

An analysis' answer saved from a surface (`save_answer`) records, under `params["args"]`,
every argument of the analysis that can change its answer (all but those that only change
what is shown: `--limit`, `--top`, `--out`, ...; times in ns, the traces a `--search`
selected by name), and `params["analysis"]`; `replay_argv` turns them back into the
command line that computes the same answer (`tracehouse results show ID` prints it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..errors import BadInput

if TYPE_CHECKING:
    from ..store import Store
    from .registry import Analysis, Answer

TOOL_PREFIX = "tracehouse.analysis."


def save_table(
    store: Store,
    analysis: str,
    traces: Iterable[str],
    table: pa.Table,
    *,
    params: dict | None = None,
    payload: Any = None,
    name: str | None = None,
) -> int:
    """An analysis's output table, linked to every trace it was computed over."""
    return store.save_result(
        "table",
        name or analysis,
        TOOL_PREFIX + analysis,
        list(traces),
        params=params or {},
        payload=payload,
        table=table,
    )


def save_file(
    store: Store,
    analysis: str,
    traces: Iterable[str],
    text: str,
    *,
    filename: str,
    params: dict | None = None,
    name: str | None = None,
) -> int:
    """A text output (a folded flame graph, a histogram's @ text) as an attached file:
    the text is the table's one `line` column, one row per line."""
    lines = text.splitlines()
    return store.save_result(
        "file",
        name or analysis,
        TOOL_PREFIX + analysis,
        list(traces),
        params=(params or {}) | {"filename": filename},
        payload={"filename": filename, "lines": len(lines)},
        table=pa.table({"line": pa.array(lines, pa.string())}),
    )


def file_text(store: Store, rid: int) -> str:
    """The text of a `file` result."""
    t = store.result_table(rid)
    return "".join(line + "\n" for line in t.column("line").to_pylist())


def annotate(
    store: Store,
    traces: Iterable[str],
    text: str,
    *,
    ts: int | None = None,
    end: int | None = None,
    producer: int | None = None,
    name: str | None = None,
) -> int:
    """A note on one or more traces, optionally pinned to a time (range) and a producer."""
    if not text:
        raise BadInput("empty annotation", expected="some text")
    payload = {"text": text, "ts": ts, "end": end, "producer": producer}
    return store.save_result(
        "annotation",
        name or text[:60],
        TOOL_PREFIX + "annotate",
        list(traces),
        payload=payload,
        params={k: v for k, v in payload.items() if k != "text" and v is not None},
    )


def group(store: Store, name: str, traces: Iterable[str], *, description: str = "") -> int:
    """A named group of traces (a comparison set, the runs of one experiment)."""
    traces = list(traces)
    if not traces:
        raise BadInput("a group needs at least one trace")
    return store.save_result(
        "group", name, TOOL_PREFIX + "group", traces, payload={"description": description, "traces": traces}
    )


def save_search(
    store: Store,
    name: str,
    trace: str,
    filter,
    *,
    at: int | None = None,  # noqa: A002
    params: dict | None = None,
) -> int:
    """A cursor's filter (and position) as a saved search; `open_search` resumes it.
    `params`: more to record (the CLI's arguments)."""
    return store.save_result(
        "search",
        name,
        TOOL_PREFIX + "cursor",
        [trace],
        params=(params or {}) | {"filter": filter.to_json(), "at": at},
        payload={"trace": trace},
    )


def show(store: Store, rid: int) -> dict:
    """A result with its table (Arrow) when it has one."""
    r = store.result(rid)
    r = dict(r)
    r["table"] = store.result_table(rid) if r.get("path") else None
    return r


# -- an analysis' answer as a result, and the command line that computes it again ----------------


def answer_args(analysis: Analysis, values: dict, resolved: dict | None = None) -> dict:
    """Every argument of `analysis` that can change its answer, by name, as given (times in
    ns), with `resolved` values in place of the given ones (the traces a --search selected)."""
    from .registry import arguments

    out = {p.name: values.get(p.name) for p in arguments(analysis) if p.answer}
    return dict(sorted((out | (resolved or {})).items()))


def save_answer(
    store: Store,
    analysis: Analysis,
    traces: list[str],
    answer: Answer,
    values: dict,
    *,
    shown: dict | None = None,
    resolved: dict | None = None,
    extra: dict | None = None,
) -> int | None:
    """`answer` saved as a result linked to `traces`; its params record the analysis' name and
    arguments (`answer_args`), which `replay_argv` turns back into the command line."""
    params = (extra or {}) | {"analysis": analysis.name, "args": answer_args(analysis, values, resolved)}
    rid = answer.save(store, analysis.name, list(traces), params, shown or {})
    if rid is not NotImplemented:
        return rid
    name = getattr(answer, "save_as", None) or analysis.name
    text = getattr(answer, "text_file", None)
    if text is not None:
        return save_file(store, name, list(traces), text, filename=f"{name}.txt", params=params)
    return save_table(store, name, list(traces), answer.table(), params=params | answer.save_params())


def replay_argv(result: dict) -> list[str] | None:
    """The `tracehouse` arguments that compute a saved result's answer again, from the
    arguments it recorded (`params["args"]`), None for a result no analysis recorded
    them for (indexes, annotations, groups, results saved before they were recorded, a
    command-line plugin's). Arguments at their default are left out."""
    from .registry import analyses, arguments

    params = result.get("params") or {}
    name, given = params.get("analysis"), params.get("args")
    if not isinstance(name, str) or not isinstance(given, dict):
        return None
    a = analyses().get(name)
    if a is None or a.cli_only is not None:
        return None
    argv = ["analyze", name]
    for p in arguments(a):
        if p.name not in given:
            continue
        value = given[p.name]
        if p.positional:
            argv += [str(v) for v in value] if isinstance(value, list) else [str(value)]
        elif value is None or value == p.default or value is False or value == []:
            continue
        elif p.type == "bool":
            argv.append(p.cli)
        elif isinstance(value, list):
            for v in value:
                argv += [p.cli, str(v)]
        else:
            argv += [p.cli, str(value)]
    return argv
