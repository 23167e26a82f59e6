"""Immutable Parquet segments: writing one safely, and the encoding we chose.

Owns the segment file layout (`traces/<id>/segments/<type>/<name>.parquet`)
and the write protocol: write to a temporary name, fsync, rename, fsync the
directory. Registration in the catalog is the caller's next step; a file that
is never registered is an orphan that the writer removes on open.

Encoding choices (measured on 10M TOD events, 2-core machine, pyarrow 26):
every integer column but `producer` is DELTA_BINARY_PACKED and left
uncompressed. Delta bit-packing already takes ts/seq (monotone) and the small
ids (1..10,000) to 1-2 B/value; zstd-1 on top saved 2 % of the bytes for 35 %
more CPU, and PLAIN+zstd-1 on the ids (the first choice) was both bigger (9.55
vs 9.50 B/event) and 1.9x slower to write (8.4 vs 16-18M events/s per core),
and 2-3x slower to scan (DuckDB sums, pyarrow reads). Dictionary (RLE) for
low-cardinality columns (producer, strings, bools); zstd level 1 for every
column that is not delta-packed (strings, floats, bools, producer) -- except
floats in checkpoint (level 0) segments, which are lz4: zstd-1 was two thirds of
the encoding time of a 48-measurement QoS row (1.16M rows: 1.13 s zstd vs
0.87 s lz4, one core, 147 vs 189 MB), and at ~0.8M rows/s checkpoint encoding
was what acknowledged writes waited for. Compaction (level >= 1) writes zstd. Measured again
(500K rows of ts, producer, seq + 48 noisy 2-decimal float series, one thread, best of
3, load 8.9): level 0 (lz4 floats) 0.744 CPU-s and 100.4 MB, level 1 (zstd-1) 1.074 CPU-s and
64.6 MB; readers and the compactor take both in one type (test_checkpoint_floats_are_lz4...).

Level-0 segments whose columns are all int32/int64 (TOD events, method enter/exit) are written by
the native writer (`_core.write_int_parquet`, src/store/intparquet.rs) with exactly these encodings
(producer's dictionary left uncompressed: no zstd there). parquet-cpp's delta encoder was ~20 % of
the streaming ingest's CPU. Measured on 2M TOD events (one thread, CPU time, load 4-7): 0.16-0.23 s
with parquet-cpp, 0.072-0.095 s native, 18.3 vs 18.4 MB; streaming 10M TOD events (prof runs
alternating, load 4.5-6): 1.62-1.84 CPU-s for the whole process against 1.97-2.37.

Every page carries its CRC-32 (parquet.thrift `PageHeader.crc`, both writers): `tracehouse
verify`, compaction and export check them (`check_pages`), so a flipped byte is an error naming
the file, not a wrong sum. DuckDB does not check them when it reads (measured on duckdb 2.0.1: a
flipped byte in a PLAIN int64 page of a file with page CRCs changed `sum(x)` without an error);
`serve --scrub-interval` checks the store's segments on a schedule instead. The cost of writing
and checking them: `tracehouse bench integrity`.

Each segment says what it holds in its key-value metadata (`SEGMENT_META`, JSON: trace id and
name, format, the event type with its kind and typed parameters, its level, the WAL file its rows
came from or the segments it merged), so that `tracehouse repair` can register it again without
the catalog, and recovery can tell a leftover of a crash (its rows are still in the WAL, or in
the live segments it merged) from a segment the catalog lost (`orphan_verdict`).
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from pathlib import Path
from typing import Any

from .. import _core, lazy
from .wal import fsync_dir

# Imported on first use (lazy.py): listing, searching and counting traces need none.
pa = lazy.module("pyarrow")
pq = lazy.module("pyarrow.parquet")

ROW_GROUP = 512 * 1024
# A string column's dictionary may grow to this before the column falls back to plain values
# (pyarrow's default: 1 MiB). The arguments of a real strace log (3M lines of 64 threads: 12K
# distinct `args` in a 524K-row segment) overflowed 1 MiB and were written plain + zstd: the
# segment 7.22 -> 6.31 MB and its encoding 0.145 -> 0.132 CPU-s (one thread, best of 7, load 4.2)
# with 4 MiB (2 MiB was enough there; lz4 instead of zstd-1 for the strings then saved nothing).
DICTIONARY_PAGE = 4 << 20
# A trace whose metadata says `segment_order=producer` (measurements of many series read a
# series at a time: seed 003's QoS rows) has its segments sorted by (producer, ts) in row groups
# of 64K rows, whose producer statistics let a query for one producer skip the others. Measured
# on the QoS read set (2,032,000 rows of 556 measurements, load 27): Q1.1 (one measurement's
# 1,000 rows) 454 -> 57 ms, Q4.2 787 -> 136 ms; 16K-row groups were slower again (252 ms: more
# footer and per-group work), 512K-row ones prune too coarsely.
PRODUCER_ORDER = "producer"
CREATED_BY = f"tracehouse version {_core.__version__}"
PRODUCER_ROW_GROUP = 64 * 1024
SEGMENT_META = b"tracehouse"  # the key of a segment's own description (module docstring)


def segment_meta(
    trace_id: int,
    trace: str,
    fmt: str,
    et: Any,
    level: int,
    *,
    wal: int | None = None,
    checkpoint: str | None = None,
    parts: int | None = None,
    inputs: list[str] | None = None,
) -> dict:
    """What a segment says of itself: its trace, format and event type (`et`, an EventType); for a
    checkpoint's segment (level 0) the highest WAL file its rows came from (None: written without a
    WAL, fsync off) and its checkpoint's id and number of segments; for a merged one the file names
    of the segments it replaces."""
    meta = {"v": 1, "trace_id": trace_id, "trace": trace, "format": fmt, "event_type": et.to_json(), "level": level}
    if level == 0:
        meta |= {"wal": wal, "checkpoint": checkpoint, "parts": parts}
    else:
        meta["inputs"] = inputs or []
    return meta


def read_segment_meta(path: Path) -> dict | None:
    """The description a segment file carries (`segment_meta`), None when it has none (written
    before segments described themselves). Raises what pyarrow raises for an unreadable footer."""
    kv = pq.read_metadata(path).metadata or {}
    raw = kv.get(SEGMENT_META)
    return json.loads(raw) if raw else None


def check_pages(path: Path, md: Any = None) -> dict:
    """Every page of a Parquet file against its CRC (`_core.parquet_page_check`): {"pages",
    "with_crc", "bytes", "bad": None or "what, at byte N"}; `md` its footer when read already.
    Raises what pyarrow raises for an unreadable footer."""
    if md is None:
        md = pq.read_metadata(path)
    chunks = []
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        for c in range(rg.num_columns):
            col = rg.column(c)
            start = (
                col.dictionary_page_offset
                if col.has_dictionary_page and col.dictionary_page_offset
                else col.data_page_offset
            )
            chunks.append((start, col.total_compressed_size))
    pages, with_crc, nbytes, at, why = _core.parquet_page_check(str(path), chunks)
    return {
        "pages": pages,
        "with_crc": with_crc,
        "bytes": nbytes,
        "bad": None if at is None else f"{why}, at byte {at}",
    }


def _delta_packed(f: pa.Field) -> bool:
    """DELTA_BINARY_PACKED (uncompressed) for int32/int64 columns other than `producer`."""
    return f.name != "producer" and (pa.types.is_int64(f.type) or pa.types.is_int32(f.type))


def write_options(schema: pa.Schema, level: int = 0, row_group: int | None = None, checksums: bool = True) -> dict:
    """pq.write_table options; `row_group` rows per row group (default ROW_GROUP, read at call time;
    None is a segment in ts order); `checksums`: page CRCs (off only to measure their cost)."""
    dict_cols = [
        f.name for f in schema if f.name == "producer" or pa.types.is_string(f.type) or pa.types.is_boolean(f.type)
    ]
    delta = {f.name: "DELTA_BINARY_PACKED" for f in schema if _delta_packed(f)}
    fast = level == 0
    compression = {
        f.name: "none" if f.name in delta else "lz4" if fast and pa.types.is_floating(f.type) else "zstd"
        for f in schema
    }
    # A checkpoint's segment in ts order keeps no min/max of its strings: over 512K rows in time
    # order they span nearly every value (paths, arguments, syscall names), so they prune nothing,
    # and computing them (a memcmp per value) was a tail of each checkpoint. Measured on the 3M-line
    # many-process strace import (10 interleaved runs each): median 0.795 -> 0.750 s, 1.345 ->
    # 1.305 CPU-s. Compacted segments, and those in producer order (a series' tags per row group,
    # which do prune), keep them.
    stats = [f.name for f in schema if not pa.types.is_string(f.type)] if fast and row_group is None else True
    return {
        "compression": compression,
        "compression_level": {name: 1 for name, codec in compression.items() if codec == "zstd"} or None,
        "use_dictionary": dict_cols,
        "column_encoding": delta or None,
        "row_group_size": row_group or ROW_GROUP,
        "write_statistics": stats,
        "dictionary_pagesize_limit": DICTIONARY_PAGE,
        "write_page_checksum": checksums,
    }


def _native_options(schema: pa.Schema, level: int) -> tuple[list[str], list[tuple[str, str]]] | None:
    """For a level-0 segment of int32/int64 columns only: the dictionary columns and the
    key-value metadata pyarrow would store (`ARROW:schema` and the schema's own), for the
    native writer (`_core.write_int_parquet`, src/store/intparquet.rs); None for anything else."""
    if level != 0 or not all(pa.types.is_int64(f.type) or pa.types.is_int32(f.type) for f in schema):
        return None
    try:
        kv = [(k.decode(), v.decode()) for k, v in (schema.metadata or {}).items()]
    except UnicodeDecodeError:
        return None  # (metadata that is not text: parquet-cpp stores bytes as they are)
    arrow_schema = base64.b64encode(schema.serialize()).decode()
    return write_options(schema, level)["use_dictionary"], [("ARROW:schema", arrow_schema), *kv]


def _write_parquet(table: pa.Table, path: Path, level: int, row_group: int | None, checksums: bool = True) -> None:
    """`table` as the Parquet file `path`: integer-only level-0 tables by the native writer
    (the same encodings as `write_options` asks of parquet-cpp, see src/store/intparquet.rs for why),
    the rest by pyarrow."""
    native = _native_options(table.schema, level)
    if native is None:
        # Settled a step at a time while parquet-cpp writes it, so its fsync does not queue the
        # whole file at the disk ahead of the WAL's (src/store/writeback.rs, measured there).
        with pa.OSFile(str(path), "wb") as sink, _core.WriteBehind(sink.fileno()):
            pq.write_table(table, sink, **write_options(table.schema, level, row_group, checksums))
        return
    dictionary, kv = native
    _core.write_int_parquet(
        str(path), table, table.schema, dictionary, row_group or ROW_GROUP, kv, CREATED_BY, checksums
    )


def row_order(table: pa.Table, by_producer: bool) -> pa.UInt32Array | None:
    """Row order that sorts `table` by ts, or with `by_producer` by (producer, ts) (stable);
    None when it is in that order already.

    One native call over the whole table (`_core.segment_order`, src/py/segment.rs says why
    not numpy chunk by chunk)."""
    if table.num_rows < 2:
        return None
    return _core.segment_order(table.select(["producer", "ts"] if by_producer else ["ts"]))


def sort_rows(table: pa.Table, by_producer: bool) -> pa.Table:
    """The table in segment order (`row_order`)."""
    order = row_order(table, by_producer)
    return table if order is None else table.take(order)


def write_sorted_part(
    root: Path,
    rel_dir: str,
    table: pa.Table,
    order: pa.UInt32Array | None,
    start: int,
    stop: int,
    level: int = 0,
    keep_cached: bool = True,
    row_group: int | None = None,
    meta: dict | None = None,
    checksums: bool = True,
) -> dict:
    """Rows start..stop of `table` in segment order (`order` from `row_order`) as one segment.

    The gather runs here, on the encoding thread, so a checkpoint's parts sort in parallel
    (sorting a whole checkpoint on the flusher first took as long as encoding half of it).
    """
    part = table.slice(start, stop - start) if order is None else table.take(order[start:stop])
    return write_segment(root, rel_dir, part, level, keep_cached, row_group, meta, checksums)


def write_segment(
    root: Path,
    rel_dir: str,
    table: pa.Table,
    level: int = 0,
    keep_cached: bool = True,
    row_group: int | None = None,
    meta: dict | None = None,
    checksums: bool = True,
) -> dict:
    """Write `table` (already sorted by ts) as one durable segment; returns its catalog row.

    `keep_cached=False` drops the file's pages from the page cache once durable (see
    `WriterOptions.drop_written_pages`); `meta` is what the segment says of itself
    (`segment_meta`)."""
    if meta is not None:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), SEGMENT_META: json.dumps(meta)})
    directory = root / rel_dir
    directory.mkdir(parents=True, exist_ok=True)
    name = uuid.uuid4().hex
    tmp = directory / f".{name}.parquet.tmp"
    final = directory / f"{name}.parquet"
    try:
        _write_parquet(table, tmp, level, row_group, checksums)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
            if not keep_cached:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        os.rename(tmp, final)
        fsync_dir(directory)
    except BaseException:
        # A full disk is the usual cause: the half-written file must not keep holding the space
        # (the writer only sweeps orphans when it opens).
        tmp.unlink(missing_ok=True)
        final.unlink(missing_ok=True)
        raise
    # Natively, not pyarrow.compute.min_max: importing pyarrow.compute costs an import of a
    # strace file 0.1-0.2 CPU-s (it builds ~290 functions' docstrings), and nothing else on an
    # import's path needs it; nor numpy chunk by chunk (see src/py/segment.rs).
    ts = _core.int_range(table.select(["ts"]))
    return {
        "path": f"{rel_dir}/{name}.parquet",
        "rows": table.num_rows,
        "bytes": final.stat().st_size,
        "ts_min": ts[0] if ts else None,
        "ts_max": ts[1] if ts else None,
        "columns": table.schema.names,
        "level": level,
    }
