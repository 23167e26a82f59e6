"""tracehouse: a warehouse for execution traces and performance measurements.

import tracehouse
store = tracehouse.open("./tracehouse-data")
store.sql('SELECT count(*) FROM "my-trace".events')
tracehouse.open_engine(["./a", "./b"], "spark").sql(...)   # several stores, Apache Spark
"""

from __future__ import annotations

import os

from .errors import AlreadyExists, BadInput, DiskFull, NotFound, ReadOnly, StoreDamaged, StoreLocked, TracehouseError

# `typing` is not imported for its TYPE_CHECKING (False at run time): it costs 9 ms of CPU, a
# third of what `tracehouse record` adds to a program's start-up (the traced process imports
# this package).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .schema import Column, EventType
    from .store import Store, TraceInfo, WriterOptions
    from .store.engines import open_engine

# The public names below pull in pyarrow and DuckDB: they are imported on first use (PEP 562),
# so `import tracehouse` (and `tracehouse --help`) stays cheap.
_LAZY = {
    "Column": "schema",
    "EventType": "schema",
    "Store": "store",
    "TraceInfo": "store",
    "WriterOptions": "store",
    "open_engine": "store.engines",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    if name == "__version__":  # the installed distribution's, so it cannot drift from pyproject.toml
        from importlib import metadata

        try:
            value = metadata.version("tracehouse")
        except metadata.PackageNotFoundError:  # a source tree that was never installed
            value = "0+unknown"
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


DEFAULT_HOME = "./tracehouse-data"


def default_path() -> str:
    return os.environ.get("TRACEHOUSE_HOME") or DEFAULT_HOME


def open(path: str | os.PathLike | None = None, *, readonly: bool = False, create: bool = True, **options) -> Store:  # noqa: A001
    """Open (creating if needed) the store at `path` (default: $TRACEHOUSE_HOME or ./tracehouse-data).

    options: fsync ("always" | "batch" | "off"), group_commit_ms, flush_bytes, flush_rows,
    flush_interval_s, compact_min_segments, compact_target_rows, compact_target_bytes, retire_grace_s,
    drop_written_pages (segments leave the page cache once durable; `serve` sets it).
    """
    from .store import Store

    return Store(path if path is not None else default_path(), readonly=readonly, create=create, **options)


__all__ = [
    "AlreadyExists",
    "BadInput",
    "Column",
    "DiskFull",
    "EventType",
    "NotFound",
    "ReadOnly",
    "Store",
    "StoreDamaged",
    "StoreLocked",
    "TraceInfo",
    "TracehouseError",
    "WriterOptions",
    "open",
    "open_engine",
    "__version__",
]
