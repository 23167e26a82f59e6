"""An export as a directory of files, one per event type plus the producers: what the Parquet
and CSV exporters share.

Owns the directory's shape, `OUT/<type>.<ext>` for each event type and `OUT/producers.<ext>`, and
how it is written: first every page of the trace's segments against its CRC (`Store.check_pages`:
DuckDB would read a damaged page as other numbers, so a damaged trace is refused before any file
is written), then each type's rows in (ts, producer, seq) order from the store's view of the type
(`Store.sql`: segments and the unflushed tail alike), the producers as a table with their
attributes as JSON. Every file is written under a temporary name and renamed once complete, so a
failed export leaves no half-written file under a final name. A format gives its writer of one
type's query and its writer of an Arrow table.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ..store.query import qident

EXPORTS_AS = "directory"  # an exporter's LAYOUT: OUT is the directory its files go in


def export_dir(
    store,
    trace: str,
    out: str | Path,
    *,
    ext: str,
    write_type: Callable[[object, str, object, object, Path], int],
    write_table: Callable[[object, Path], None],
    progress=None,
) -> dict:
    """Write `trace` into the directory `out`; returns the trace, the directory, each file (event
    type, path, bytes), the events and the bytes written. `write_type(store, query, info,
    event_type, path)` writes the rows of `query` to `path` and returns how many."""
    import pyarrow as pa

    info = store.trace(trace)
    store.check_pages(info.name)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = {}
    for seg in store.segments_of(info.name):
        rows[seg.event_type] = rows.get(seg.event_type, 0) + seg.rows
    files = []
    events = 0
    for name, et in store.event_types(info.name).items():
        path = out / f"{name}.{ext}"
        tmp = path.with_name(path.name + ".tmp")
        events += write_type(
            store, f"SELECT * FROM {qident(info.name)}.{qident(name)} ORDER BY ts, producer, seq", info, et, tmp
        )
        tmp.replace(path)
        files.append({"event_type": name, "path": str(path), "bytes": path.stat().st_size})
        if progress is not None:
            progress(rows.get(name, 0))
    producers = store.producers(info.name)
    if producers:
        path = out / f"producers.{ext}"
        tmp = path.with_name(path.name + ".tmp")
        write_table(pa.Table.from_pylist([p | {"attrs": json.dumps(p["attrs"])} for p in producers]), tmp)
        tmp.replace(path)
        files.append({"event_type": None, "path": str(path), "bytes": path.stat().st_size})
    return {
        "trace": info.name,
        "path": str(out),
        "files": files,
        "events": events,
        "bytes": sum(f["bytes"] for f in files),
    }
