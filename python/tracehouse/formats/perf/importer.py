"""perf importer: `perf script` text (a file, gzip or not, or a pipe) through the Rust parser.

`perf record -g -o perf.data CMD; perf script -i perf.data > perf.txt; tracehouse import perf
perf.txt`, or `perf script -i perf.data | tracehouse import perf -`. Everything else (sniffer,
description, event types) is the format's declaration (`formats/perf/__init__.py`).
"""

from __future__ import annotations

from pathlib import Path

from .. import perf as fmt
from ..column_mapping import Mapping
from ..parser_loader import import_parsed
from ..report import ImportReport

NAME = "perf"


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
    """The same from a pipe, as the data arrives (`perf script | tracehouse import perf -`)."""
    return import_parsed(fmt, store, source, name, strict=strict, description=description, progress=progress, stream=fd)
