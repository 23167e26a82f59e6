"""What the bpftrace and SystemTap importers share (not an importer itself).

Owns running `_core.NativeParser("bpftrace" | "stap")` into a trace: declaring the event types of
the user's `--pattern`s and `--span`s, reporting span matches and leftovers,
and saving each histogram, map and stats aggregate as a result table linked to
the trace (`store.results(trace=...)`, kind "table", tool "bpftrace"/"stap",
name the map, params {"kind": hist|map|stats, "source": file}).
"""

from __future__ import annotations

import json
import types
from pathlib import Path

from .. import _core, lazy
from ..errors import BadInput
from .column_mapping import Mapping
from .parser_loader import import_parsed
from .report import ImportReport

# Imported on first use (lazy.py): `tracehouse import` loads every importer to read its options.
pa = lazy.module("pyarrow")
pc = lazy.module("pyarrow.compute")

OPTIONS = {
    "pattern": {
        "action": "append",
        "metavar": "NAME:TEMPLATE",
        "help": "bpftrace/stap: a printf line as an event type, e.g. "
        "'job_start:job_start {ts} {tid} {task:hex}' (types int hex float str ns us ms s; "
        "fields ts dur pid tid are the common columns)",
    },
    "span": {
        "action": "append",
        "metavar": "NAME=BEGIN,END,KEY",
        "help": "bpftrace/stap: pair each END event with the most recent unmatched BEGIN of the same KEY field",
    },
}


def import_probe_output(
    tool: str,
    fmt,
    store,
    path: str | Path,
    name: str,
    *,
    mapping: Mapping | None = None,
    strict: bool = False,
    description: str = "",
    progress=None,
    pattern=None,
    span=None,
    stream: int | None = None,
    chunks=None,
    metadata: dict | None = None,
) -> ImportReport:
    """Import a probe tool's output from the file `path`, or (`stream`: a file descriptor, `path`
    naming it) from a pipe as it arrives, committed batch by batch (`formats/stream.py`), or
    from `chunks` (`parser_loader.import_parsed`'s, `tracehouse capture`'s reader)."""
    source = str(path)
    if stream is None and chunks is None and not Path(path).is_file():
        raise BadInput("no such file", file=source)
    try:
        parser = _core.NativeParser(tool, patterns=list(pattern or []), spans=list(span or []), strict=strict)
    except ValueError as e:
        raise BadInput(
            str(e).removeprefix(f"{tool}: "), expected="--pattern NAME:TEMPLATE and --span NAME=BEGIN,END,KEY"
        ) from None
    target = types.SimpleNamespace(
        FORMAT=(mapping.format if mapping is not None and mapping.format else fmt.FORMAT),
        DESCRIPTION=fmt.DESCRIPTION,
        EVENT_TYPES=fmt.EVENT_TYPES,
    )
    saved = []

    def results(parser) -> int:
        def save(kind, m, sub):
            rid = store.save_result("table", m, tool, [name], params={"kind": kind, "source": source}, table=sub)
            saved.append({"id": rid, "kind": kind, "name": m, "rows": sub.num_rows})

        for kind, batch in parser.results():
            table = pa.Table.from_batches([batch])
            for m in pc.unique(table.column("map")).to_pylist():
                save(kind, m, table.filter(pc.equal(table.column("map"), m)))
        for kind, m in json.loads(parser.details_json)["empty_results"]:  # `{"@h": []}`: the map exists, empty
            if not any(s["kind"] == kind and s["name"] == m for s in saved):
                cols = fmt.RESULTS[kind]
                save(kind, m, pa.table({c.name: pa.array([], c.arrow_type) for c in cols}))
        return len(saved)

    report = import_parsed(
        target,
        store,
        path,
        name,
        strict=strict,
        description=description,
        progress=progress,
        stream=stream,
        parser=parser,
        after=results,
        chunks=chunks,
        metadata={"patterns": "\n".join(pattern or []), "spans": "\n".join(span or []), **(metadata or {})},
    )
    report.details.pop("empty_results", None)
    if saved:
        report.details["results"] = saved
    return report


def probe_importer(tool: str, fmt):
    """(`import_file`, `import_stream`) of a probe tool's importer (bpftrace, stap): the file, or
    a pipe as it arrives, through `import_probe_output` with the tool's `--pattern`/`--span`."""

    def import_file(
        store,
        path: str | Path,
        name: str,
        *,
        mapping: Mapping | None = None,
        strict: bool = False,
        description: str = "",
        progress=None,
        pattern=None,
        span=None,
    ) -> ImportReport:
        return import_probe_output(
            tool,
            fmt,
            store,
            path,
            name,
            mapping=mapping,
            strict=strict,
            description=description,
            progress=progress,
            pattern=pattern,
            span=span,
        )

    def import_stream(
        store,
        fd: int,
        name: str,
        *,
        source: str = "stdin",
        mapping: Mapping | None = None,
        strict: bool = False,
        description: str = "",
        progress=None,
        pattern=None,
        span=None,
    ) -> ImportReport:
        """The same from a pipe, as the data arrives (`... | tracehouse import TOOL - ...`)."""
        return import_probe_output(
            tool,
            fmt,
            store,
            source,
            name,
            mapping=mapping,
            strict=strict,
            description=description,
            progress=progress,
            pattern=pattern,
            span=span,
            stream=fd,
        )

    return import_file, import_stream
