"""Export a trace as Parquet: one file per event type plus the producers (`typed_files`), zstd,
a CRC-32 in every page header.

Written by pyarrow from the store's record batches, not by DuckDB's COPY, which writes no page
checksums. Each file carries the trace's format and the event type as declared in its key-value
metadata (`importer.EXPORT_KEY`), so `tracehouse import parquet` of one file, or of the whole
directory with its producers.parquet, restores the trace without mapping flags.
"""

from __future__ import annotations

from pathlib import Path

from ..typed_files import EXPORTS_AS, export_dir
from .importer import EXPORT_KEY, export_meta

NAME = "parquet"
EXTENSION = "parquet"
LAYOUT = EXPORTS_AS
DESCRIPTION = "Parquet, one file per event type plus producers (import parquet restores the trace)"


def _write_type(store, query: str, info, et, path: Path) -> int:
    """The rows of `query` streamed into one file (the schema of an empty result when there are none)."""
    import pyarrow.parquet as pq

    metadata = {EXPORT_KEY: export_meta(info, et)}
    writer = None
    n = 0
    try:
        for b in store.sql_batches(query):
            if writer is None:
                writer = pq.ParquetWriter(
                    path, b.schema.with_metadata(metadata), compression="zstd", write_page_checksum=True
                )
            writer.write_batch(b)
            n += b.num_rows
        if writer is None:
            writer = pq.ParquetWriter(
                path,
                store.sql(f"{query} LIMIT 0").schema.with_metadata(metadata),
                compression="zstd",
                write_page_checksum=True,
            )
    finally:
        if writer is not None:
            writer.close()
    return n


def _write_table(table, path: Path) -> None:
    import pyarrow.parquet as pq

    pq.write_table(table, path, write_page_checksum=True)


def export(store, trace: str, out: str | Path, *, progress=None) -> dict:
    """Write `trace` into the directory `out` (created)."""
    return export_dir(
        store, trace, out, ext=EXTENSION, write_type=_write_type, write_table=_write_table, progress=progress
    )
