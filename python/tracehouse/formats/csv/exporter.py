"""Export a trace as CSV: one file per event type plus the producers (`typed_files`), with a header
row, in (ts, producer, seq) order."""

from __future__ import annotations

from pathlib import Path

from ..typed_files import EXPORTS_AS, export_dir

NAME = "csv"
EXTENSION = "csv"
LAYOUT = EXPORTS_AS
DESCRIPTION = "CSV, one file per event type plus producers"


def _copy_options(info, et) -> str:
    return "(FORMAT csv, HEADER true)"


def _write_table(table, path: Path) -> None:
    import pyarrow.csv as pacsv

    pacsv.write_csv(table, path)


def export(store, trace: str, out: str | Path, *, progress=None) -> dict:
    """Write `trace` into the directory `out` (created)."""
    return export_dir(store, trace, out, ext=EXTENSION, copy_options=_copy_options, write_table=_write_table,
                      progress=progress)
