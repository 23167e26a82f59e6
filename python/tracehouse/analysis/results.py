"""Saving analysis results with their provenance (after FrameSoC, seed 000).

Owns how each analysis's answer becomes a result in the store: its kind (annotation,
group, search, processed trace, table, file), the traces it is linked to (one or many:
a multi-trace result links every trace it was computed over), the tool that made it
and the parameters it was made with. The store keeps them (`Store.save_result`,
`th.results` in SQL); `tracehouse results` lists and shows them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

import pyarrow as pa

from ..errors import BadInput, NotFound

if TYPE_CHECKING:
    from ..store import Store
    from .cursors import Cursor, Filter

TOOL_PREFIX = "tracehouse.analysis."


def save_table(store: "Store", analysis: str, traces: Iterable[str], table: pa.Table, *, params: dict | None = None,
               payload: Any = None, name: str | None = None) -> int:
    """An analysis's output table, linked to every trace it was computed over."""
    return store.save_result("table", name or analysis, TOOL_PREFIX + analysis, list(traces), params=params or {},
                             payload=payload, table=table)


def save_file(store: "Store", analysis: str, traces: Iterable[str], text: str, *, filename: str,
              params: dict | None = None, name: str | None = None) -> int:
    """A text output (a folded flame graph, a histogram's @ text) as an attached file:
    the text is the table's one `line` column, one row per line."""
    lines = text.splitlines()
    return store.save_result("file", name or analysis, TOOL_PREFIX + analysis, list(traces),
                             params=(params or {}) | {"filename": filename},
                             payload={"filename": filename, "lines": len(lines)},
                             table=pa.table({"line": pa.array(lines, pa.string())}))


def file_text(store: "Store", rid: int) -> str:
    """The text of a `file` result."""
    t = store.result_table(rid)
    return "".join(line + "\n" for line in t.column("line").to_pylist())


def annotate(store: "Store", traces: Iterable[str], text: str, *, ts: int | None = None, end: int | None = None,
             producer: int | None = None, name: str | None = None) -> int:
    """A note on one or more traces, optionally pinned to a time (range) and a producer."""
    if not text:
        raise BadInput("empty annotation", expected="some text")
    payload = {"text": text, "ts": ts, "end": end, "producer": producer}
    return store.save_result("annotation", name or text[:60], TOOL_PREFIX + "annotate", list(traces), payload=payload,
                             params={k: v for k, v in payload.items() if k != "text" and v is not None})


def group(store: "Store", name: str, traces: Iterable[str], *, description: str = "") -> int:
    """A named group of traces (a comparison set, the runs of one experiment)."""
    traces = list(traces)
    if not traces:
        raise BadInput("a group needs at least one trace")
    return store.save_result("group", name, TOOL_PREFIX + "group", traces,
                             payload={"description": description, "traces": traces})


def save_search(store: "Store", name: str, trace: str, filter: "Filter", *, at: int | None = None,  # noqa: A002
                params: dict | None = None) -> int:
    """A cursor's filter (and position) as a saved search; `open_search` resumes it.
    `params`: more to record (the CLI's arguments)."""
    return store.save_result("search", name, TOOL_PREFIX + "cursor", [trace],
                             params=(params or {}) | {"filter": filter.to_json(), "at": at}, payload={"trace": trace})


def open_search(store: "Store", rid: int) -> "Cursor":
    """A cursor from a saved search, standing where it was saved."""
    from .cursors import Cursor, Filter

    r = store.result(rid)
    if r["kind"] != "search":
        raise NotFound(f"result {rid} is a {r['kind']}, not a search")
    p = r["params"]
    return Cursor(store, r["payload"]["trace"], Filter.from_json(p["filter"]), at=p.get("at"))


def show(store: "Store", rid: int) -> dict:
    """A result with its table (Arrow) when it has one."""
    r = store.result(rid)
    r = dict(r)
    r["table"] = store.result_table(rid) if r.get("path") else None
    return r
