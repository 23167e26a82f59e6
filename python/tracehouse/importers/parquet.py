"""Parquet importer: any Parquet file whose columns map onto events.

Owns reading Parquet in row-group batches (memory bounded by the batch, not
the file) and handing them to the tabular mapping.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import BadInput
from .tabular import ImportReport, Mapping, TabularLoader

NAME = "parquet"
DESCRIPTION = "Apache Parquet file (one event per row)"


def sniff(head: bytes) -> bool:
    return head.startswith(b"PAR1")


def import_file(store, path: str | Path, name: str, *, mapping: Mapping | None = None, strict: bool = False,
                description: str = "", progress=None) -> ImportReport:
    path = Path(path)
    source = str(path)
    mapping = mapping or Mapping()
    if mapping.format is None:
        mapping.format = NAME
    try:
        pf = pq.ParquetFile(path)
    except FileNotFoundError:
        raise BadInput("no such file", file=source) from None
    except (pa.ArrowInvalid, OSError) as e:
        raise BadInput(f"not a readable Parquet file: {e}", file=source, expected="a Parquet file") from None
    loader = TabularLoader(store, name, mapping, source, strict=strict, description=description)
    try:
        row = 0
        for batch in pf.iter_batches(batch_size=1 << 20):
            rows = np.arange(row + 1, row + 1 + batch.num_rows, dtype=np.int64)  # 1-based row numbers
            row += batch.num_rows
            loader.add(batch, rows)
            if progress is not None:
                progress(batch.num_rows)
        return loader.finish()
    except BaseException:
        loader.abort()
        raise
