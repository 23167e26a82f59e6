"""SystemTap importer: printf lines and @hist_log/@hist_linear tables, via `_core.NativeParser("stap")`.

Same model as bpftrace (`formats/probes.py`): `--pattern`s type the printed
lines, `--span`s pair start/end probes (Hyrise's job_start/job_end by task
pointer, seed 004), histogram tables (with their '~' elided rows) become result
tables named by the line printed above them.
"""

from __future__ import annotations

import re

from .. import stap as fmt
from ..parser_loader import head_bytes
from ..probes import OPTIONS, probe_importer

NAME = "stap"
DESCRIPTION = fmt.DESCRIPTION
_HEADER = re.compile(rb"^\s*value \|-+ count\s*$", re.M)

__all__ = ["DESCRIPTION", "NAME", "OPTIONS", "import_file", "import_stream", "sniff"]


def sniff(head: bytes) -> bool:
    """A SystemTap histogram header ("value |---...--- count") in the first bytes."""
    return bool(_HEADER.search(head_bytes(head)[:65536]))


import_file, import_stream = probe_importer("stap", fmt)
