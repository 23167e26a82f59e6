"""SystemTap output: printf lines and @hist_log / @hist_linear tables (with '~' elision rows).

Owns the format's name; its description, event types (`printf`, not bpftrace's
`tseries`) and result tables are declared in Rust beside bpftrace's
(src/formats/probe/decl.rs): both tools print the same kinds of things; the parser
makes the event types of the user's patterns.
"""

from __future__ import annotations

from .. import declared
from ..bpftrace import PRINTF, RESULTS

FORMAT = "stap"
DESCRIPTION = declared.description(FORMAT)
EVENT_TYPES = declared.event_types(FORMAT)  # printf; no time series: that is bpftrace's tseries()

__all__ = ["DESCRIPTION", "EVENT_TYPES", "FORMAT", "PRINTF", "RESULTS"]
