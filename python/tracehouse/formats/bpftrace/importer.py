"""bpftrace importer: `-f json` records or text output, via `_core.NativeParser("bpftrace")`.

printf output becomes events typed by `--pattern`s (else `printf` text
events), `--span`s pair start/end probes into spans, and hist/lhist/stats/map
output becomes result tables linked to the trace (see `formats/probes.py`,
`formats/bpftrace/__init__.py`).
"""

from __future__ import annotations

import json
import re

from .. import bpftrace as fmt
from ..parser_loader import head_bytes
from ..probes import OPTIONS, probe_importer

NAME = "bpftrace"
DESCRIPTION = fmt.DESCRIPTION
RECORD_TYPES = {
    "attached_probes",
    "printf",
    "map",
    "hist",
    "stats",
    "lost_events",
    "time",
    "cat",
    "join",
    "syscall",
    "tseries",
    "value",
    "helper_error",
    "runtime_error",
    "print_error",
    "benchmark_results",
}
_TEXT = re.compile(rb"^(Attaching \d+ probes?\.\.\.|@\w*(\[.*\])?:( .*)?)$", re.M)

__all__ = ["DESCRIPTION", "NAME", "OPTIONS", "import_file", "import_stream", "sniff"]


def sniff(head: bytes) -> bool:
    """A first line that is a bpftrace JSON record, or bpftrace's text markers (Attaching N probes, @map: ...)."""
    head = head_bytes(head)
    first = head.lstrip().split(b"\n", 1)[0]
    if first.startswith(b"{"):
        try:
            rec = json.loads(first)
        except ValueError:
            return first.startswith(b'{"type"') and b'"data"' in first
        return isinstance(rec, dict) and rec.get("type") in RECORD_TYPES
    return bool(_TEXT.search(head[:65536])) and b"\x00" not in head[:4096]


import_file, import_stream = probe_importer("bpftrace", fmt)
