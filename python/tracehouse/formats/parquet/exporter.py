"""Export a trace as Parquet: one file per event type plus the producers (`typed_files`), zstd.

Each file carries the trace's format and the event type as declared in its key-value metadata
(`importer.EXPORT_KEY`), so `tracehouse import parquet` of one file, or of the whole directory
with its producers.parquet, restores the trace without mapping flags.
"""

from __future__ import annotations

from pathlib import Path

from ...store.query import qstr
from ..typed_files import EXPORTS_AS, export_dir
from .importer import EXPORT_KEY, export_meta

NAME = "parquet"
EXTENSION = "parquet"
LAYOUT = EXPORTS_AS
DESCRIPTION = "Parquet, one file per event type plus producers (import parquet restores the trace)"


def _copy_options(info, et) -> str:
    return f"(FORMAT parquet, COMPRESSION zstd, KV_METADATA {{{qstr(EXPORT_KEY)}: {qstr(export_meta(info, et))}}})"


def _write_table(table, path: Path) -> None:
    import pyarrow.parquet as pq

    pq.write_table(table, path)


def export(store, trace: str, out: str | Path, *, progress=None) -> dict:
    """Write `trace` into the directory `out` (created)."""
    return export_dir(store, trace, out, ext=EXTENSION, copy_options=_copy_options, write_table=_write_table,
                      progress=progress)
