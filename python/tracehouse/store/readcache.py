"""A decoded copy of a trace's segments in DuckDB's own file format, for reads.

Owns the read cache of a trace whose metadata says `read_cache=duckdb`: one DuckDB database file
(`traces/<id>/readcache/<name>.duckdb`) holding a table per event type, named as the type (a query
naming the type may read it in place of the view: store/query.py `direct_sql`), with the rows of the
segments it was built from, the tag columns materialized (store/query.py: tags as columns), and
a manifest (`current.json`: the file, and per type its table, columns and segment ids) written
last, by rename. The type views (store/query.py) read a type's cached segments from the table
and only the segments the cache does not hold (newer checkpoints) from Parquet; a cache whose
segments are not all live any more (compaction merged them, retention dropped them) is not used
for that type until it is built again. Parquet stays the source of truth: Spark, `export`,
`verify` and every other reader read the segments, and deleting the cache loses nothing.

Built by `Store.build_read_cache` and, for traces that ask for it, after each compaction that
merged segments (store/compact.py), on the compactor's niced thread. Why: DuckDB scans its own
format (lightweight compression, zone maps per column segment) several times faster than our
Parquet pages. Measured on seed 003's read set (2,032,000 rows x 62 columns, producer order;
best of 5, in-process, load 8-11): Q2.1 (`ul_delay < 1`, a full scan for 556 rows) 591 ms from
Parquet, 35 ms from the cache, 39 ms from DuckDB's own file loaded as the seed's schema 1;
Q1.2 41 -> 6.3 ms (DuckDB file 5.6); Q5.7 476 -> 125 ms (86), with the columns compressed as
DuckDB chooses (342 MB beside 308 MB of segments; 10 s to build). The cache stores them plain or
run-length instead (`DISABLED_COMPRESSION`, below): a filter on a result column keeps rows spread over every vector
(`ul_dupl < 1`: one row of each 1,000-row run), and DuckDB decodes each touched vector of every
read column when it is ALP or bit-packed, but fetches only the kept rows when it is plain. The
embedded client against DuckDB's own file with the seed's best schema, interleaved in one process
(two runs of 7 rounds, medians, load 4-16): the old cache was as fast as the best schema in 9 and
8 of the 36 cases, the plain one in 32 and 29 (Q3.1 80 -> 34 ms against schema 3's 45, Q2.1
87 -> 45 ms against schema 2's 75); the file is 810 MB. Q3.4 and Q3.12 (278,000 rows) stay
behind in both runs (0.69-0.82): they fetch 51 columns where schema 3's table has 32, and the time
goes into materializing the answer (a count of the same rows costs 8 ms of the 90). The other
large answers (Q2.4, Q3.16, Q4.5: 250,000-278,000 rows of 64 columns) tie with schema 1 and 2
within the machine's noise (0.81-1.10 from one run to the other). Where the time of the large
answers goes (the query in EXPLAIN ANALYZE against its fetch as Arrow with the process's free
memory given back first, as the bench does; medians of 5, load 8-10): Q2.4's query takes 42 ms
here against 149 ms (schema 1) and 136 ms (schema 2), but receiving its 278,000 rows x 64
columns as Arrow 405 ms against 411 and 346 (DuckDB's Arrow conversion and the first touch of
the answer's 140 MB: 35,000 page faults); Q3.4 30 ms against schema 3's 33, its fetch 245 ms
against 149 (51 columns against 32). The layout of the cache cannot change the fetch: a large
answer of every column ties with DuckDB's own table, and Q3.4/Q3.12 stay behind by their bytes.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from pathlib import Path

from .. import lazy
from .query import DUCK_TYPES, qident, qstr, tag_columns_sql, tag_keys, tag_table
from .segments import PRODUCER_ORDER
from .wal import fsync_dir

duckdb = lazy.module("duckdb")

log = logging.getLogger("tracehouse.store")

CACHE_META = "read_cache"  # trace metadata: "duckdb" keeps a read cache of the trace
BUILT_META = "read_cache_file"  # trace metadata: the current cache file (set when built: views follow)
MANIFEST = "current.json"
# The cache's columns are stored plain (numbers) or run-length/constant (the tag columns, constant
# per series): DuckDB's ALP (doubles) and bit-packing (integers) are left out. A filter that keeps a
# few rows of each vector (seed 003's `ul_dupl < 1`: one row of each 1,000-row run) makes DuckDB
# decode every vector it touches of every column the query reads when it is ALP or bit-packed, and
# fetch only the kept rows when it is plain. Measured on seed 003's QoS set (2,032,000 rows x 64
# columns), the same table stored both ways, interleaved in one process, median wall / CPU ms of 9
# rounds (load 4.8-5.2): Q2.1 (556 rows) 121/59 -> 52/23, Q3.1 (556 rows of 51 columns) 99/54 ->
# 42/22 (DuckDB's own file, schema 3's 32-column table: 58/30), Q4.4 76/58 -> 46/29, Q5.5
# 127/61 -> 63/32, Q3.4 (278,000 rows) 193/95 -> 130/67, Q1.4 (600,000 rows) 132/127 -> 109/109.
# The file grows 342 MB -> 810 MB beside 308 MB of Parquet segments. Plain integers too but RLE
# kept (the tag columns) measured the same as everything plain (938 MB), and plain doubles with
# bit-packed integers (514 MB) 5-25% slower.
DISABLED_COMPRESSION = "alp,alprd,bitpacking"


def wanted(metadata: dict) -> bool:
    return metadata.get(CACHE_META) == "duckdb"


def directory(root: Path, trace_id: int) -> Path:
    return Path(root) / "traces" / str(trace_id) / "readcache"


def manifest(root: Path, trace_id: int) -> dict | None:
    """The trace's current cache manifest (with `path`: its file), or None."""
    d = directory(root, trace_id)
    try:
        m = json.loads((d / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    m["path"] = str(d / m["file"])
    return m if Path(m["path"]).exists() else None


def build(root: Path, info, types: dict, segments: list, producers: list[dict]) -> dict:
    """Write a new cache of `segments` (live segments of the trace `info`, whose event types are
    `types`) and make it current; older cache files are deleted. Returns the manifest."""
    keys = tag_keys(producers, info.metadata)
    d = directory(root, info.id)
    d.mkdir(parents=True, exist_ok=True)
    name = f"{uuid.uuid4().hex}.duckdb"
    tmp = d / f".{name}.tmp"
    by_type: dict[str, list] = {}
    for s in segments:
        by_type.setdefault(s.event_type, []).append(s)
    out = {"file": name, "types": {}}
    # The rows in the segments' own order (segments.row_order), over all of them: the tag join
    # hands rows on in whatever order its threads finish, and the segments of one trace are each
    # sorted on their own. Unsorted, `customer_id = 60` of seed 003's QoS set (producer order,
    # 508,000 rows) scanned 3 of the cache's 5 row groups where DuckDB's own file, loaded in
    # customer order, scanned 1; sorted, 1.
    order = (
        "b.producer, b.ts, b.seq" if info.metadata.get("segment_order") == PRODUCER_ORDER else "b.ts, b.producer, b.seq"
    )
    con = duckdb.connect(str(tmp))
    try:
        con.execute("SET preserve_insertion_order = true")
        con.execute("SET enable_progress_bar = false")  # (built on the compactor's thread: no terminal's)
        con.execute(f"SET disabled_compression_methods = {qstr(DISABLED_COMPRESSION)}")
        if keys:
            con.register("_tags", tag_table(producers, info.metadata, keys))
        lowered = [t.lower() for t in by_type]
        for i, (tname, segs) in enumerate(sorted(by_type.items())):
            et = types.get(tname)
            if et is None:
                continue
            files = "[" + ", ".join(qstr(str(Path(root) / s.path)) for s in segs) + "]"
            present = set().union(*(s.columns for s in segs))
            cols = []
            for c in et.columns:
                cols.append(
                    f"b.{qident(c.name)}"
                    if c.name in present
                    else f"CAST(NULL AS {DUCK_TYPES[c.type]}) AS {qident(c.name)}"
                )
                if c.name == "producer" and keys:
                    cols += tag_columns_sql(et, keys)
            join = " LEFT JOIN _tags t ON t.producer = b.producer" if keys else ""
            # Named as the type: a query may then name the table where it names the type's view
            # (store/query.py `direct_sql`), and the name it reads the rows under stays the type's.
            # (SQL compares names ignoring case: types named alike but for case keep numbered tables)
            table = tname if lowered.count(tname.lower()) == 1 else f"{tname}#{i}"
            con.execute(
                f"CREATE TABLE {qident(table)} AS SELECT {', '.join(cols)} FROM read_parquet({files}, "
                f"union_by_name = true) b{join} ORDER BY {order}"
            )
            out["types"][tname] = {
                "table": table,
                "segments": [s.id for s in segs],
                "columns": [r[0] for r in con.execute(f"DESCRIBE {qident(table)}").fetchall()],
            }
        con.execute("CHECKPOINT")
    finally:
        con.close()
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, d / name)
    man = d / f".{MANIFEST}.tmp"
    man.write_text(json.dumps(out))
    os.rename(man, d / MANIFEST)
    fsync_dir(d)
    for old in d.iterdir():  # readers that attached an older file keep it open (unlinked, not gone)
        if old.name not in (name, MANIFEST):
            old.unlink(missing_ok=True)
    out["path"] = str(d / name)
    return out
