"""Paje importer: a thin shell over `_core.NativeParser("paje")` (event types in `formats/paje/__init__.py`).

The parser is given the file's path so it can follow `PajeTraceFile` includes
(relative to the file naming them); an input that declares events but has none
(a trace with only containers) imports as an empty trace.
"""

from __future__ import annotations

from pathlib import Path

from .. import paje as fmt
from ..column_mapping import Mapping
from ..parser_loader import head_bytes, import_parsed
from ..report import ImportReport

NAME = "paje"
OPTIONS = {
    "time_unit": {
        "choices": ("s", "ms", "us", "ns"),
        "help": "paje: unit of the file's times (default s, as Paje, ViTE and SimGrid write them)",
    },
}


def sniff(head: bytes) -> bool:
    """Paje files start (after comments) with an %EventDef header."""
    for line in head_bytes(head).splitlines():
        s = line.strip()
        if not s or s.startswith(b"#"):
            continue
        return s.startswith(b"%EventDef") or s.startswith(b"%\tEventDef") or s.startswith(b"% EventDef")
    return False


def import_file(
    store,
    path: str | Path,
    name: str,
    *,
    mapping: Mapping | None = None,
    strict: bool = False,
    description: str = "",
    progress=None,
    time_unit: str | None = None,
) -> ImportReport:
    # A Paje header with no event in it (only containers, or nothing) is a valid, empty trace:
    # what counts is that the input is Paje, i.e. that it declared its events.
    report = import_parsed(
        fmt,
        store,
        path,
        name,
        strict=strict,
        description=description,
        progress=progress,
        metadata={"time_unit": time_unit or "s"},
        after=lambda p: p.stats["event_defs"],
        time_unit=time_unit or "s",
        source=str(path),
    )
    for k in ("event_defs", "containers"):
        report.details.pop(k, None)
    return report
