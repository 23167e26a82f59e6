"""An export as a directory of files, one per event type plus the producers: what the Parquet
and CSV exporters share.

Owns the directory's shape, `OUT/<type>.<ext>` for each event type and `OUT/producers.<ext>`, and
how it is written: each type's rows in (ts, producer, seq) order by DuckDB's COPY over the store's
view of the type (`Store.sql`: segments and the unflushed tail alike), the producers as a table
with their attributes as JSON. Every file is written under a temporary name and renamed once
complete, so a failed export leaves no half-written file under a final name. A format gives its
COPY options and its writer of an Arrow table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from ..store.query import qident, qstr

EXPORTS_AS = "directory"  # an exporter's LAYOUT: OUT is the directory its files go in


def export_dir(store, trace: str, out: str | Path, *, ext: str, copy_options: Callable[[object, object], str],
               write_table: Callable[[object, Path], None], progress=None) -> dict:
    """Write `trace` into the directory `out`; returns the trace, the directory, each file (event
    type, path, bytes), the events and the bytes written."""
    import pyarrow as pa

    info = store.trace(trace)
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
        n = store.sql(f"COPY (SELECT * FROM {qident(info.name)}.{qident(name)} ORDER BY ts, producer, seq) "
                      f"TO {qstr(str(tmp))} {copy_options(info, et)}").column(0)[0].as_py()
        tmp.replace(path)
        events += n or 0
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
    return {"trace": info.name, "path": str(out), "files": files, "events": events,
            "bytes": sum(f["bytes"] for f in files)}
