"""SystemTap output: printf lines and @hist_log / @hist_linear tables (with '~' elision rows).

Owns the format's name and description; the event types (`printf`, the
pattern types; not bpftrace's `tseries`) and the result tables are those of bpftrace output
(`formats/bpftrace/__init__.py`): both tools print the same kinds of things.
"""

from __future__ import annotations

from ..bpftrace import PRINTF, RESULTS, pattern_types

FORMAT = "stap"
DESCRIPTION = "SystemTap output: printf lines parsed by --pattern, @hist_log/@hist_linear tables"

EVENT_TYPES = (PRINTF,)  # no time series: that is bpftrace's tseries()

__all__ = ["DESCRIPTION", "EVENT_TYPES", "FORMAT", "PRINTF", "RESULTS", "pattern_types"]
