"""pprof importer: a profile.proto file (gzipped, as Go writes it, or not) through the Rust parser.

`go test -cpuprofile cpu.pprof; tracehouse import pprof cpu.pprof`, or
`curl .../debug/pprof/profile | tracehouse import pprof -`. Everything else (sniffer,
description, event type) is the format's declaration (`formats/pprof/__init__.py`).
"""

from __future__ import annotations

from pathlib import Path

from .. import pprof as fmt
from ..column_mapping import Mapping
from ..parser_loader import import_parsed
from ..report import ImportReport

NAME = "pprof"


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
    """The same from a pipe (the profile is decoded when the pipe closes)."""
    return import_parsed(fmt, store, source, name, strict=strict, description=description, progress=progress, stream=fd)
