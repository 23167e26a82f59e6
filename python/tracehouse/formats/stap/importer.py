"""SystemTap importer: printf lines and @hist_log/@hist_linear tables, via `_core.NativeParser("stap")`.

Same model as bpftrace (`formats/probes.py`): `--pattern`s type the printed
lines, `--span`s pair start/end probes (Hyrise's job_start/job_end by task
pointer, seed 004), histogram tables (with their '~' elided rows) become result
tables named by the line printed above them.
"""

from __future__ import annotations

import re
from pathlib import Path

from .. import stap as fmt
from ..column_mapping import Mapping
from ..parser_loader import head_bytes
from ..probes import OPTIONS, import_probe_output
from ..report import ImportReport

NAME = "stap"
DESCRIPTION = fmt.DESCRIPTION
_HEADER = re.compile(rb"^\s*value \|-+ count\s*$", re.M)

__all__ = ["DESCRIPTION", "NAME", "OPTIONS", "import_file", "import_stream", "sniff"]


def sniff(head: bytes) -> bool:
    """A SystemTap histogram header ("value |---...--- count") in the first bytes."""
    return bool(_HEADER.search(head_bytes(head)[:65536]))


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
        "stap",
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
    """The same from a pipe, as the data arrives (`... | tracehouse import stap - ...`)."""
    return import_probe_output(
        "stap",
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
