"""The storage engine: catalog, WAL, segments, writers and SQL views."""

from .catalog import Catalog, TraceInfo
from .options import WriterOptions
from .store import Store, check_trace_name

__all__ = ["Catalog", "Store", "TraceInfo", "WriterOptions", "check_trace_name"]
