"""Bytes of a store's derived indexes, per index and per column, against the trace's bytes.

Usage: python dev/index_bytes.py STORE TRACE [--json]. Reads the saved index results of TRACE
(tool `tracehouse.index`, either layout) and prints file bytes per index and the bytes each
column's buffers take, with bytes per trace event and the ratio to the trace's Parquet bytes.
"""

from __future__ import annotations

import json
import sys

import pyarrow as pa

from tracehouse import Store


def main(argv: list[str]) -> int:
    store, trace = Store(argv[0]), argv[1]
    info = store.trace(trace)
    out = {"trace_bytes": info.bytes, "events": info.event_count, "indexes": {}}
    for r in store.results(trace=trace, tool="tracehouse.index"):
        if not r["path"]:
            continue
        path = store.path / r["path"]
        t = pa.ipc.open_file(pa.memory_map(str(path))).read_all()
        cols: dict[str, int] = {}
        for f in t.schema:
            base = f.name.split("#")[0]
            cols[base] = cols.get(base, 0) + t.column(f.name).nbytes
        out["indexes"][r["name"]] = {
            "bytes": path.stat().st_size,
            "format": r["params"].get("format", 1),
            "rows": json.loads(t.schema.metadata[b"index"])["rows"]
            if b"index" in (t.schema.metadata or {})
            else t.num_rows,
            "columns": cols,
        }
    total = sum(x["bytes"] for x in out["indexes"].values())
    out["index_bytes"] = total
    if "--json" in argv:
        print(json.dumps(out, indent=1))
        return 0
    ev = max(1, info.event_count)
    print(f"trace {trace}: {info.event_count:,} events, {info.bytes:,} bytes ({info.bytes / ev:.2f} B/event)")
    for name, x in out["indexes"].items():
        print(
            f"  {name:<8} format {x['format']} rows {x['rows']:>11,}  {x['bytes']:>13,} B  {x['bytes'] / ev:6.2f} B/event"
            f"  {x['bytes'] / max(1, info.bytes):5.2f} x trace"
        )
        for c, b in sorted(x["columns"].items(), key=lambda kv: -kv[1]):
            print(f"      {c:<22} {b:>13,} B  {b / max(1, x['rows']):6.2f} B/row")
    print(f"  all indexes {total:,} B = {total / ev:.2f} B/event = {total / max(1, info.bytes):.2f} x the trace")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
