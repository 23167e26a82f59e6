"""tracehouse: a warehouse for execution traces and performance measurements.

    import tracehouse
    store = tracehouse.open("./tracehouse-data")
    store.sql('SELECT count(*) FROM "my-trace".events')
    tracehouse.open_engine(["./a", "./b"], "spark").sql(...)   # several stores, Apache Spark
"""

from __future__ import annotations

import os

from .errors import AlreadyExists, BadInput, DiskFull, NotFound, ReadOnly, StoreLocked, TracehouseError
from .schema import Column, EventType
from .store import Store, TraceInfo, WriterOptions
from .store.engines import open_engine

__version__ = "0.1.0"

DEFAULT_HOME = "./tracehouse-data"


def default_path() -> str:
    return os.environ.get("TRACEHOUSE_HOME") or DEFAULT_HOME


def open(path: str | os.PathLike | None = None, *, readonly: bool = False, create: bool = True, **options) -> Store:  # noqa: A001
    """Open (creating if needed) the store at `path` (default: $TRACEHOUSE_HOME or ./tracehouse-data).

    options: fsync ("always" | "batch" | "off"), group_commit_ms, flush_rows,
    flush_interval_s, compact_min_segments, compact_target_rows, compact_target_bytes, retire_grace_s,
    drop_written_pages (segments leave the page cache once durable; `serve` sets it).
    """
    return Store(path if path is not None else default_path(), readonly=readonly, create=create, **options)


__all__ = [
    "AlreadyExists", "BadInput", "Column", "DiskFull", "EventType", "NotFound", "ReadOnly", "Store", "StoreLocked",
    "TraceInfo", "TracehouseError", "WriterOptions", "open", "open_engine", "__version__",
]
