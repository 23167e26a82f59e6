"""Line-protocol importer: a file of InfluxDB line protocol into a new trace, through the decoder
the ingest server uses (`src/formats/lineproto/mod.rs` over `src/ingest/lineproto.rs`).

Lines without a timestamp get the import's start time; `--precision` says the timestamps' unit.
A pipe works too (`telegraf --once ... | tracehouse import lineproto -`).
"""

from __future__ import annotations

from pathlib import Path

from .. import lineproto as fmt
from ..column_mapping import Mapping
from ..parser_loader import import_parsed
from ..report import ImportReport

NAME = "lineproto"
OPTIONS = {
    "precision": {
        "choices": ("ns", "us", "ms", "s"),
        "help": "lineproto: unit of the timestamps (default ns, as InfluxDB's)",
    },
}


def import_file(
    store,
    path: str | Path,
    name: str,
    *,
    mapping: Mapping | None = None,
    strict: bool = False,
    description: str = "",
    progress=None,
    precision: str | None = None,
) -> ImportReport:
    return import_parsed(
        fmt, store, path, name, strict=strict, description=description, progress=progress, precision=precision
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
    precision: str | None = None,
) -> ImportReport:
    """The same from a pipe, as the data arrives."""
    return import_parsed(
        fmt,
        store,
        source,
        name,
        strict=strict,
        description=description,
        progress=progress,
        stream=fd,
        precision=precision,
    )
