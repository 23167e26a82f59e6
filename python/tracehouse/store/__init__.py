"""The storage engine: catalog, WAL, segments, writers and SQL views; verify and repair."""

from .catalog import Catalog, TraceInfo
from .options import WriterOptions
from .store import Store, check_trace_name


def verify_store(path, progress=None) -> dict:
    """Check the store at `path` against itself, reading every byte (`store/verify.py`)."""
    from .verify import verify as run

    return run(path, progress)


def repair_store(path, progress=None) -> dict:
    """Rebuild the catalog of the store at `path` from its files, deleting nothing (`store/repair.py`)."""
    from .repair import repair as run

    return run(path, progress)


# (Not named `verify` and `repair`: importing the modules of those names would replace them.)
__all__ = ["Catalog", "Store", "TraceInfo", "WriterOptions", "check_trace_name", "repair_store", "verify_store"]
