"""Export a trace as CSV: one file per event type plus the producers (`typed_files`), with a header
row, in (ts, producer, seq) order."""

from __future__ import annotations

from pathlib import Path

from ...store.query import qstr
from ..typed_files import EXPORTS_AS, export_dir

NAME = "csv"
EXTENSION = "csv"
LAYOUT = EXPORTS_AS
DESCRIPTION = "CSV, one file per event type plus producers"


def _write_type(store, query: str, info, et, path: Path) -> int:
    """DuckDB's COPY of `query` to `path`, with a header row; the rows written."""
    return store.sql(f"COPY ({query}) TO {qstr(str(path))} (FORMAT csv, HEADER true)").column(0)[0].as_py() or 0


def _write_table(table, path: Path) -> None:
    import pyarrow.csv as pacsv

    pacsv.write_csv(table, path)


def export(store, trace: str, out: str | Path, *, progress=None) -> dict:
    """Write `trace` into the directory `out` (created)."""
    return export_dir(
        store, trace, out, ext=EXTENSION, write_type=_write_type, write_table=_write_table, progress=progress
    )
