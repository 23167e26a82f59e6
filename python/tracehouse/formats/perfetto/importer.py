"""Perfetto importer: a protobuf trace (a file, gzip or not, or a pipe) through the Rust parser.

`tracehouse import perfetto trace.perfetto-trace`, or `... | tracehouse import perfetto -`
(packets are parsed as they arrive). Everything else (sniffer, description, event types) is the
format's declaration (`formats/perfetto/__init__.py`).
"""

from __future__ import annotations

from pathlib import Path

from .. import perfetto as fmt
from ..column_mapping import Mapping
from ..parser_loader import import_parsed
from ..report import ImportReport

NAME = "perfetto"


def import_file(
    store,
    path: str | Path,
    name: str,
    *,
    mapping: Mapping | None = None,
    strict: bool = False,
    description: str = "",
    progress=None,
) -> ImportReport:
    return import_parsed(fmt, store, path, name, strict=strict, description=description, progress=progress)


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
) -> ImportReport:
    """The same from a pipe, as the packets arrive."""
    return import_parsed(fmt, store, source, name, strict=strict, description=description, progress=progress, stream=fd)
