"""Compaction through the Store API: every row kept exactly once, in the order numpy's stable sort
gives, files compacted away deleted after the grace period, automatic compaction by size tier,
and the checkpoints it merges."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracehouse
from helpers import segment_files
from helpers.store_rows import LOAD, MARK, marks, scalar
from tracehouse import Column, EventType, _core

# -- compaction ----------------------------------------------------------------------------


def test_compaction_keeps_every_row_exactly_once(store, store_path):
    store.create_trace("t", "demo", event_types=[MARK, LOAD])
    rng = np.random.default_rng(7)
    expected = []
    for i in range(6):
        ts = rng.integers(0, 1_000_000, 50)
        expected += ts.tolist()
        store.append("t", "mark", marks(ts.tolist(), [i % 2] * 50, [f"b{i}"] * 50))
        store.append("t", "load", pa.table({"ts": [i], "producer": [0], "value": [float(i)]}))
        store.flush("t")
    tid = store.trace("t").id
    assert len(store.catalog.segments(tid, "mark")) == 6
    before = store.sql('SELECT * FROM "t".mark ORDER BY producer, seq')
    merged = store.compact("t")
    assert merged == 12  # six of each type
    segs = store.catalog.segments(tid, "mark")
    assert len(segs) == 1 and segs[0].level == 1 and segs[0].rows == 300
    after = store.sql('SELECT * FROM "t".mark ORDER BY producer, seq')
    assert after.equals(before)
    assert sorted(store.sql('SELECT ts FROM "t".mark').column(0).to_pylist()) == sorted(expected)
    seg = store_path / segs[0].path  # the merged segment is sorted by ts
    ts = pq.read_table(seg, columns=["ts"]).column(0).to_numpy()
    assert (np.diff(ts) >= 0).all()
    assert store.trace("t").event_count == 306
    assert store.compact("t") == 0  # nothing left to merge
    store.close()
    with tracehouse.open(store_path) as s:
        assert s.sql('SELECT * FROM "t".mark ORDER BY producer, seq').equals(before)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.tuples(st.integers(0, 3), st.integers(-3, 3)), max_size=6), min_size=1, max_size=5),
    st.booleans(),
)
def test_row_order_matches_numpys_stable_sort(parts, by_producer):
    # The native order reads chunks in place and sorts only when they are out of order: the
    # permutation (or None for the identity) must be numpy's stable one, borders included.
    from tracehouse.store.segments import row_order

    table = pa.Table.from_batches(
        [
            pa.record_batch(
                {
                    "producer": pa.array([p for p, _ in part], pa.int32()),
                    "ts": pa.array([t for _, t in part], pa.int64()),
                }
            )
            for part in parts
        ]
    )
    ts = np.array([t for part in parts for _, t in part], np.int64)
    prod = np.array([p for part in parts for p, _ in part], np.int64)
    ref = np.lexsort((ts, prod)) if by_producer else np.argsort(ts, kind="stable")
    got = row_order(table, by_producer)
    assert (got.to_pylist() if got is not None else list(range(len(ts)))) == ref.tolist()
    if len(ts):
        assert _core.int_range(table.select(["ts"])) == (int(ts.min()), int(ts.max()))


def test_compaction_reads_segments_without_importing_pyarrow_dataset(store_path):
    # pq.read_table imports pyarrow.dataset (~0.45 s holding the interpreter lock in stretches
    # of up to 24 ms): on a server the first compaction under load stalled the dispatcher.
    import subprocess
    import sys

    code = f"""
import sys, pyarrow as pa, tracehouse
from tracehouse import Column, EventType
MARK = EventType("mark", "instant", (Column("label", "string", "", "what happened"),))
with tracehouse.open({str(store_path)!r}) as s:
    s.create_trace("t", "demo", event_types=[MARK])
    for i in range(4):
        s.append("t", "mark", pa.table({{"ts": pa.array([i, i + 10], pa.int64()),
                                         "producer": pa.array([0, 0], pa.int32()), "label": ["a", "b"]}}))
        s.flush("t")
    merged = s.compact("t")
    print(merged, "pyarrow.dataset" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["4", "False"]


def test_a_registered_checkpoint_frees_its_batches_one_at_a_time(store_path, monkeypatch):
    # Freeing a batch runs its columns' release callbacks with the interpreter lock held; a
    # checkpoint's hundreds of batches freed at once stalled a server's dispatcher (42 ms).
    from tracehouse.store import writer as writermod

    seen, sleeps = [], []
    orig = writermod.TraceWriter._write_segments

    def spy(self, snapshot, covered):
        seen.append((snapshot, sum(len(v) for v in snapshot.values())))
        return orig(self, snapshot, covered)

    monkeypatch.setattr(writermod.TraceWriter, "_write_segments", spy)
    monkeypatch.setattr(writermod.time, "sleep", lambda s: sleeps.append(s))
    monkeypatch.setattr(writermod, "RELEASE_HOLD_S", 0.0)  # offer the lock after every batch
    with tracehouse.open(store_path, flush_interval_s=3600.0) as s:
        s.create_trace("t", "demo", event_types=[MARK])
        for i in range(5):
            s.append("t", "mark", marks([i], [0], ["a"]))
        s.flush("t")
        assert [n for _snap, n in seen] == [5]
        snapshot = seen[0][0]
        assert snapshot and all(v == [] for v in snapshot.values())  # emptied once registered
        assert sleeps.count(0) >= 5  # the lock offered after each batch
        assert s.sql('SELECT count(*) FROM "t".mark').column(0)[0].as_py() == 5


def test_checkpoint_floats_are_lz4_and_compaction_recompresses_them_with_zstd(store):
    store.create_trace("t", "demo", event_types=[LOAD])
    tid = store.trace("t").id

    def codecs():
        out = set()
        for seg in store.catalog.segments(tid, "load"):
            md = pq.ParquetFile(store.path / seg.path).metadata
            names = md.schema.to_arrow_schema().names
            col = md.row_group(0).column(names.index("value"))
            out.add((seg.level, col.compression))
        return out

    for i in range(3):
        store.append("t", "load", pa.table({"ts": [i], "producer": [0], "value": [float(i) + 0.5]}))
        store.flush("t")
    assert codecs() == {(0, "LZ4")}  # checkpoints favour encoding speed
    assert store.compact("t") == 3
    assert codecs() == {(1, "ZSTD")}  # compaction favours size
    assert store.sql('SELECT sum(value) FROM "t".load').column(0)[0].as_py() == 4.5
    # Mixed codecs in one type: the SQL views and the analyses' reader take both at once.
    store.append("t", "load", pa.table({"ts": [9], "producer": [0], "value": [10.0]}))
    store.flush("t")
    assert codecs() == {(0, "LZ4"), (1, "ZSTD")}
    assert store.sql('SELECT sum(value) FROM "t".load').column(0)[0].as_py() == 14.5
    assert sorted(store.scan("t", "load", columns=["value"]).column("value").to_pylist()) == [0.5, 1.5, 2.5, 10.0]


def _resident_pages(path) -> tuple[int, int]:
    """(pages of `path` in the page cache, pages of `path`), by mincore over a libc mapping."""
    import ctypes
    import mmap

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = os.path.getsize(path)
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    vec = (ctypes.c_ubyte * pages)()
    fd = os.open(path, os.O_RDONLY)
    try:
        ptr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert ptr not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
        try:
            assert libc.mincore(ptr, size, vec) == 0, ctypes.get_errno()
        finally:
            libc.munmap(ptr, size)
    finally:
        os.close(fd)
    return sum(b & 1 for b in vec), pages


@pytest.mark.parametrize("drop", [False, True])
def test_drop_written_pages_leaves_segments_out_of_the_page_cache(store_path, drop):
    # `serve` sets it: a long ingest otherwise fills the page cache with segments it never reads.
    s = tracehouse.open(store_path, flush_rows=10_000_000, flush_interval_s=3600.0, drop_written_pages=drop)
    try:
        s.create_trace("t", "demo", event_types=[LOAD])
        n = 200_000
        s.append(
            "t",
            "load",
            pa.table(
                {"ts": np.arange(n), "producer": np.zeros(n, np.int32), "value": np.random.default_rng(1).random(n)}
            ),
        )
        s.flush("t")
        (seg,) = s.catalog.segments(s.trace("t").id, "load")
        resident, pages = _resident_pages(s.path / seg.path)
        assert pages > 10
        if drop:
            assert resident == 0
        else:
            assert resident > 0  # just written: still cached
        assert s.sql('SELECT count(*) FROM "t".load').column(0)[0].as_py() == n  # readable either way
    finally:
        s.close()


def test_overlapping_checkpoints_register_in_snapshot_order(store_path, monkeypatch):
    """Two checkpoints encode at once; the later one, finished first, waits to register: its
    wal_covered would otherwise claim the earlier one's WAL file before its rows are stored."""
    import threading
    import time as _time

    from tracehouse.store import writer as writermod

    release = threading.Event()
    orig = writermod.write_sorted_part

    def slow_first(
        root, rel_dir, table, order, start, stop, level=0, keep_cached=True, row_group=None, meta=None, checksums=True
    ):
        if table.column("ts")[0].as_py() == 1:  # the first checkpoint's rows
            assert release.wait(10)
        return orig(root, rel_dir, table, order, start, stop, level, keep_cached, row_group, meta, checksums)

    monkeypatch.setattr(writermod, "write_sorted_part", slow_first)
    with tracehouse.open(store_path, flush_interval_s=3600.0, checkpoints_in_flight=2) as s:
        s.create_trace("t", "demo", event_types=[MARK])
        w = s._writer(s.catalog.trace("t"))
        s.append("t", "mark", marks([1, 2], [0, 0], ["a", "b"]))
        first = w._start_checkpoint()
        s.append("t", "mark", marks([10, 11], [1, 1], ["c", "d"]))
        second = w._start_checkpoint()
        _time.sleep(0.3)  # the second has long encoded its segment by now ...
        assert not first.done() and not second.done()  # ... and waits for the first
        assert s.catalog.segments(s.trace("t").id) == []
        assert scalar(s, 'SELECT count(*) FROM "t".mark') == 4  # both still in the tail
        release.set()
        second.result(timeout=10)
        first.result(timeout=10)  # registered before the second (the ids below); may still be dropping its WAL
        segs = s.catalog.segments(s.trace("t").id, "mark")
        assert sorted((x.ts_min, x.id) for x in segs)[0][1] < sorted((x.ts_min, x.id) for x in segs)[1][1]
        assert s.trace("t").wal_covered == w.wal.number - 1  # both WAL files covered
        assert scalar(s, 'SELECT count(*) FROM "t".mark') == 4
    with tracehouse.open(store_path) as s:
        assert scalar(s, 'SELECT count(*) FROM "t".mark') == 4


def test_compacted_away_files_are_deleted_after_the_grace_period(store_path):
    with tracehouse.open(store_path, retire_grace_s=0.0) as s:
        s.create_trace("t", "demo", event_types=[MARK])
        for i in range(3):
            s.append("t", "mark", marks([i], [0], ["x"]))
            s.flush("t")
        old = set(segment_files(store_path))
        assert len(old) == 3
        s.compact("t")
        now = set(segment_files(store_path))
        assert len(now) == 1 and not now & old
        assert {x.path for x in s.catalog.all_live_segments()} == now
        assert scalar(s, 'SELECT count(*) FROM "t".mark') == 3


def test_auto_compaction_after_enough_checkpoints(store_path):
    with tracehouse.open(store_path, compact_min_segments=3, compact_min_fanin=3, flush_interval_s=3600.0) as s:
        s.create_trace("t", "demo", event_types=[MARK])
        for i in range(5):
            s.append("t", "mark", marks([i, i + 100], [0, 1], ["x", "y"]))
            s.flush("t")
        segs = s.catalog.segments(s.trace("t").id)
        assert len(segs) < 5 and max(x.level for x in segs) >= 1
        assert scalar(s, 'SELECT count(*) FROM "t".mark') == 10
        assert scalar(s, 'SELECT count(DISTINCT (producer, seq)) FROM "t".mark') == 10


def test_auto_compaction_leaves_segments_a_fanin_of_which_would_not_fit_the_target(store_path):
    # target 40 rows, fan-in 4: only segments under 10 rows are merged automatically, in
    # groups of at least 4; compact() still merges the rest.
    with tracehouse.open(
        store_path, compact_min_segments=2, compact_min_fanin=4, compact_target_rows=40, flush_interval_s=3600.0
    ) as s:
        s.create_trace("t", "demo", event_types=[MARK])
        tid = s.trace("t").id

        def add(n, base):
            s.append("t", "mark", marks(list(range(base, base + n)), [0] * n, ["x"] * n))
            s.flush("t")

        for i in range(3):
            add(12, 100 * i)  # 12 >= 40 / 4: left alone
        assert sorted(x.level for x in s.catalog.segments(tid)) == [0, 0, 0]
        for i in range(3):
            add(5, 1000 + 10 * i)  # three small ones: fewer than the fan-in
        assert len(s.catalog.segments(tid)) == 6
        add(5, 2000)  # the fourth small one: those four merge
        segs = s.catalog.segments(tid)
        assert sorted((x.level, x.rows) for x in segs) == [(0, 12), (0, 12), (0, 12), (1, 20)]
        assert s.compact("t") == 3  # an explicit compaction merges what fits the target (12+12+12)
        assert scalar(s, 'SELECT count(*) FROM "t".mark') == 56


def test_auto_compaction_rewrites_each_row_once_per_size_tier(store_path):
    # Regression: merging every small segment together rewrote the growing merged
    # one with each new group of checkpoints - 120 checkpoints of 10 rows, fan-in 4, target
    # 640 rows: segments reached level 5 (most rows rewritten 5 times). Tiered: a merge
    # takes segments of one size tier (4**k <= rows < 4**(k+1)), so a row is rewritten at most
    # once per tier below the 160-row limit: 10 -> 40 -> 160, twice.
    with tracehouse.open(
        store_path, compact_min_segments=4, compact_min_fanin=4, compact_target_rows=640, flush_interval_s=3600.0
    ) as s:
        s.create_trace("t", "demo", event_types=[MARK])
        for i in range(120):
            s.append("t", "mark", marks(list(range(i * 10, i * 10 + 10)), [0] * 10, ["x"] * 10))
            s.flush("t")
        segs = s.catalog.segments(s.trace("t").id)
        assert max(x.level for x in segs) <= 2, sorted((x.level, x.rows) for x in segs)
        assert sum(x.rows for x in segs) == 1200
        assert len(segs) <= 12  # still compacted: 7 of 160 rows and what is left below
        assert scalar(s, 'SELECT count(DISTINCT (producer, seq)) FROM "t".mark') == 1200


def test_compaction_of_a_wide_type_is_capped_by_bytes(store_path):
    # 10 params + ts, producer, seq = 13 columns x 8 bytes: a 2,600-byte cap is 25 rows.
    wide = EventType("w", "instant", tuple(Column(f"c{i}", "float64", "", "") for i in range(10)))
    with tracehouse.open(store_path, compact_min_segments=100, flush_interval_s=3600.0, compact_target_bytes=2600) as s:
        s.create_trace("t", "widefmt", event_types=[wide])
        for i in range(8):
            cols = {"ts": pa.array(range(i * 10, i * 10 + 10), pa.int64()), "producer": pa.array([0] * 10, pa.int32())}
            cols.update({f"c{j}": [float(j)] * 10 for j in range(10)})
            s.append("t", "w", pa.table(cols))
            s.flush("t")
        assert s.compact("t") == 8
        rows = sorted(x.rows for x in s.catalog.segments(s.trace("t").id))
        assert rows == [20, 20, 20, 20]  # groups stop before exceeding 25 rows
        assert scalar(s, 'SELECT count(*) FROM "t".w') == 80
