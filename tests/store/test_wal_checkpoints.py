"""The native append path: WAL records (written natively, read back as appended, in any IPC framing,
recovered from the older pyarrow framing), the WAL's reserved blocks and files, checkpoints sized
by bytes and switched without stalls, the live tail read incrementally, segments' order and
write-behind."""

from __future__ import annotations

import os
import shutil
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tracehouse
from helpers.store_rows import CALL, LOAD, MARK, marks, scalar
from tracehouse import BadInput, Column, EventType, _core

# -- the native append path -----------------------------------------------------------


def _pyarrow_wal_record(event_type: str, batches: list[pa.RecordBatch]) -> bytes:
    """A WAL record as the store wrote it before the native append path: pyarrow's own IPC
    serialization of the schema and of each batch, framed [length][crc32][u16 name][name]."""
    import struct
    import zlib

    name = event_type.encode()
    payload = struct.pack("<H", len(name)) + name + batches[0].schema.serialize().to_pybytes()
    payload += b"".join(b.serialize().to_pybytes() for b in batches)
    return struct.pack("<II", len(payload), zlib.crc32(payload)) + payload


def test_a_wal_written_by_pyarrow_before_the_native_path_recovers(store_path):
    from tracehouse.store import wal as walmod

    with tracehouse.open(store_path) as s:
        s.create_trace("t", "demo", event_types=[CALL, LOAD])
        tid = s.trace("t").id
        schemas = {n: s.event_type("t", n).arrow_schema() for n in ("call", "load")}
    call = pa.record_batch(
        {
            "ts": pa.array([5, 6], pa.int64()),
            "producer": pa.array([1, 1], pa.int32()),
            "seq": pa.array([0, 1], pa.int64()),
            "dur": pa.array([10, 20], pa.int64()),
            "fn": ["main", None],
            "depth": pa.array([0, None], pa.int64()),
        },
        schema=schemas["call"],
    )
    load = pa.record_batch(
        {
            "ts": pa.array([7], pa.int64()),
            "producer": pa.array([2], pa.int32()),
            "seq": pa.array([0], pa.int64()),
            "value": [0.25],
        },
        schema=schemas["load"],
    )
    wal_dir = store_path / "traces" / str(tid) / "wal"
    wal_dir.mkdir(parents=True, exist_ok=True)
    walmod.wal_path(wal_dir, 1).write_bytes(
        walmod.MAGIC + _pyarrow_wal_record("call", [call, call.slice(1)]) + _pyarrow_wal_record("load", [load])
    )
    with tracehouse.open(store_path) as s:
        (report,) = s.recovery
        assert (report.records, report.rows, report.torn) == (3, 4, [])
        assert s.sql('SELECT count(*), count(fn) FROM "t".call').to_pylist() == [{"count_star()": 3, "count(fn)": 1}]
        assert s.sql('SELECT value FROM "t".load').column(0).to_pylist() == [0.25]


def test_native_wal_records_read_back_as_the_batches_appended(tmp_path):
    # Nulls, strings, booleans and slices at offsets that are not a multiple of 8 (the bitmaps
    # are shifted, the string offsets rebased): pyarrow reads back exactly what was given.
    from tracehouse.store import wal as walmod

    n = 203
    rng = np.random.default_rng(17)
    full = pa.record_batch(
        {
            "ts": np.arange(n, dtype=np.int64),
            "producer": pa.array(rng.integers(0, 5, n), pa.int32()),
            "x": pa.array([None if i % 5 == 0 else float(i) / 3 for i in range(n)], pa.float64()),
            "s": pa.array([None if i % 4 == 0 else "é" * (i % 7) for i in range(n)]),
            "b": pa.array([None if i % 6 == 0 else bool(i % 2) for i in range(n)]),
            "k": pa.array([None if i % 9 == 0 else i for i in range(n)], pa.int64()),
        }
    )
    parts = [full, full.slice(3, 101), full.slice(17, 1), full.slice(100, 103)]
    w = walmod.WalWriter(tmp_path, 0)
    for p in parts:
        w.append("ev", p)
    w.close()
    scan = walmod.read_wal(walmod.wal_path(tmp_path, 0))
    assert scan.error is None
    assert [b.equals(p) for (_, b), p in zip(scan.records, parts)] == [True] * len(parts)


def _wal_writer_with_room(tmp_path, rows: int):
    """(wal module, a batch of `rows`, a WalWriter of file 0, its path); skips on a disk with
    less than 2 GiB free (the writer reserves and writes zeros ahead only above 1 GiB)."""
    from tracehouse.store import wal as walmod

    if shutil.disk_usage(tmp_path).free < 2 * walmod.RESERVE_MIN_FREE:
        pytest.skip("the WAL reserves nothing and writes no zeros ahead out of a disk's last GiB")
    batch = pa.record_batch({"ts": np.arange(rows, dtype=np.int64), "v": np.ones(rows)})
    return walmod, batch, walmod.WalWriter(tmp_path, 0), walmod.wal_path(tmp_path, 0)


def test_the_wal_reserves_blocks_ahead_of_big_records_without_changing_its_length(tmp_path):
    # Appends that allocate were measured sleeping beside the group commit's fdatasyncs,
    # so big records are appended into blocks reserved RESERVE_AHEAD at a time with the length
    # kept: readers still read to the file's size, and the log holds exactly its records.
    walmod, batch, w, path = _wal_writer_with_room(tmp_path, 20_000)
    for _ in range(3):
        w.append("ev", batch)
    st = os.stat(path)
    assert st.st_size == w.size > 3 * walmod.ZERO_RECORD_MAX
    assert st.st_blocks * 512 >= w.size + walmod.RESERVE_AHEAD // 2, "no blocks were reserved ahead"
    scan = walmod.read_wal(path)  # a reader in another process: the records, nothing torn after them
    assert scan.error is None and scan.valid_bytes == w.size and len(scan.records) == 3
    w.close()
    st = os.stat(path)
    assert st.st_size == scan.valid_bytes and st.st_blocks * 512 < w.size + (1 << 20), "close kept the reservation"
    assert [b.equals(batch) for _, b in walmod.read_wal(path).records] == [True] * 3


def test_small_wal_records_are_written_over_zeros_that_end_the_log_and_readers_see_each_one(tmp_path):
    # Small records go over zeros written ZERO_AHEAD at a time (an fdatasync of an overwrite writes
    # no inode for a new length). The zeros end the log; a record's header is written last, and a
    # reader that has read to the zeros sees the next record by that header, the size unchanged.
    walmod, batch, w, path = _wal_writer_with_room(tmp_path, 100)
    known: dict = {}
    files = walmod.uncovered_files(tmp_path, -1, known)
    assert len(walmod.read_uncovered(tmp_path, files, known)) == 0
    sizes = set()
    for i in range(1, 6):
        w.append("ev", batch.slice(i))
        sizes.add(os.stat(path).st_size)
        again = walmod.uncovered_files(tmp_path, -1, known)
        assert again != files, "a new record did not change what the reader compares"
        files = again
        got = walmod.read_uncovered(tmp_path, files, known)
        assert [b.num_rows for _, b in got] == [100 - k for k in range(1, i + 1)]
        settled = walmod.uncovered_files(tmp_path, -1, known)  # (now looking past the record read)
        assert walmod.uncovered_files(tmp_path, -1, known) == settled  # nothing new: the same
    assert len(sizes) == 1 and sizes.pop() >= w.size + walmod.ZERO_AHEAD // 2, "records were not written over zeros"
    # Review: two equal records in a row have equal headers; with the mtime unchanged (a coarse
    # clock: pinned here) the second one looked like the first, and the reader never read it.
    # (Read only when the signature changed, as Store._wal_view does.)
    cached, got = None, []

    def poll():
        nonlocal cached, got
        files = walmod.uncovered_files(tmp_path, -1, known)
        if files != cached:
            cached, got = files, walmod.read_uncovered(tmp_path, files, known)
        return len(got)

    seen = poll()
    for _ in range(2):
        w.append("ev", batch)
        os.utime(path, ns=(10**18, 10**18))
        assert poll() == seen + 1, "the reader missed a record equal to the one before it"
        seen += 1
    scan = walmod.read_wal(path)
    assert scan.error is None and scan.valid_bytes == w.size and len(scan.records) == 7
    w.close()
    assert os.stat(path).st_size == w.size, "close left the zeros"
    assert walmod.read_wal(path).valid_bytes == w.size


def test_a_checkpoint_switches_the_wal_without_a_directory_fsync_under_the_append_lock(store, monkeypatch):
    # The switch runs under the lock every append needs; the next file's directory fsync
    # (20-30 ms at times) is done before it is taken (review: prepare_next alone was tested).
    from tracehouse.store import wal as walmod

    store.create_trace("t", "demo", event_types=[LOAD])
    store.append(
        "t",
        "load",
        pa.record_batch(
            {"ts": pa.array([1, 2], pa.int64()), "producer": pa.array([0, 0], pa.int32()), "value": [1.0, 2.0]}
        ),
        wait=True,
    )
    w = store._live_writer("t")
    fsync_dir, held = walmod.fsync_dir, []

    def watched(d):
        held.append(w.lock._is_owned())
        fsync_dir(d)

    monkeypatch.setattr(walmod, "fsync_dir", watched)
    number = w.wal.number
    store.flush("t")
    assert w.wal.number == number + 1 and held and not any(held), held
    store.close()
    assert walmod.wal_numbers(w.wal_dir) == [], "close left the next file made ahead"


def test_small_wal_records_land_on_zeros_written_half_a_zero_ahead_before(tmp_path):
    # Over zeros written just before it, a record's write waited for the inode's lock while the
    # group commit's fdatasync allocated their blocks (7 ms at times): zeros are added while
    # half of ZERO_AHEAD is still left, so each record lands on zeros written a while ago.
    walmod, batch, w, path = _wal_writer_with_room(tmp_path, 3_000)  # ~48 KB records
    records = 0
    while w.size < 3 * walmod.ZERO_AHEAD:
        w.append("ev", batch)
        records += 1
        assert os.stat(path).st_size - w.size >= walmod.ZERO_AHEAD // 2, f"after record {records}"
    assert len(walmod.read_wal(path).records) == records
    w.close()


def test_the_next_wal_file_is_made_before_the_switch_and_removed_at_close_when_unused(tmp_path, monkeypatch):
    # A switch (under the lock appends need) made the next file and fsynced the WAL
    # directory, 20-30 ms at times beside segment writes. A checkpoint now makes it first.
    from tracehouse.store import wal as walmod

    batch = pa.record_batch({"ts": np.arange(10, dtype=np.int64), "v": np.ones(10)})
    w = walmod.WalWriter(tmp_path, 1)
    w.append("ev", batch)
    w.prepare_next()
    made = walmod.wal_path(tmp_path, 2)
    assert made.read_bytes() == walmod.MAGIC
    scan = walmod.read_wal(made)  # a reader or a recovery meanwhile: an empty log
    assert scan.records == [] and scan.error is None
    synced = []
    monkeypatch.setattr(walmod, "fsync_dir", synced.append)
    old, fd = w.switch()
    os.close(fd)
    assert (old, w.number) == (1, 2) and synced == [], "the switch made its file itself"
    w.append("ev", batch.slice(3))
    w.prepare_next()
    w.prepare_next()  # (twice: one file)
    assert walmod.wal_numbers(tmp_path) == [1, 2, 3]
    w.close()
    assert walmod.wal_numbers(tmp_path) == [1, 2], "close left the unused next file"
    w.prepare_next()  # a checkpoint that passed its check before the close (review)
    assert walmod.wal_numbers(tmp_path) == [1, 2], "a file was made after close"
    assert [b.num_rows for _, b in walmod.read_wal(made).records] == [7]


def test_batch_in_the_stored_layout_is_kept_as_given_and_stored_under_the_declared_schema(store):
    # The native path keeps a batch whose columns match (nullability aside) without a copy;
    # the checkpoint writes the declared schema (common columns required), not the batch's.
    store.create_trace("t", "demo", event_types=[LOAD])
    lax = pa.record_batch(
        {
            "ts": pa.array([3, 1, 2], pa.int64()),
            "producer": pa.array([0, 0, 1], pa.int32()),
            "seq": pa.array([0, 1, 0], pa.int64()),
            "value": [1.0, None, 3.0],
        }
    )
    assert lax.schema.field("ts").nullable
    store.append("t", "load", lax)
    assert store.sql('SELECT count(*) FROM "t".load').column(0)[0].as_py() == 3  # the unflushed tail
    store.flush("t")
    (seg,) = store.catalog.segments(store.trace("t").id, "load")
    schema = pq.read_schema(store.path / seg.path)
    assert not schema.field("ts").nullable and not schema.field("seq").nullable
    assert schema.field("value").nullable
    assert store.sql('SELECT ts FROM "t".load ORDER BY ts').column(0).to_pylist() == [1, 2, 3]


def test_a_rejected_batch_of_an_append_uses_up_no_sequence_numbers(store):
    store.create_trace("t", "demo", event_types=[LOAD])
    good = pa.table({"ts": [1, 2], "producer": pa.array([4, 4], pa.int32()), "value": [0.5, 1.5]})
    bad = pa.table({"ts": [3, None], "producer": pa.array([4, 4], pa.int32()), "value": [0.5, 1.5]})
    store.append("t", "load", good)
    with pytest.raises(BadInput, match="ts"):
        store.append("t", "load", pa.concat_tables([good, bad]))
    store.append("t", "load", good)
    assert store.sql('SELECT seq FROM "t".load ORDER BY seq').column(0).to_pylist() == [0, 1, 2, 3]


def test_checkpoints_are_sized_by_bytes(store_path):
    # Regression: checkpoints came every `flush_rows` rows whatever the row width,
    # 54 MB of TOD rows but ~500 MB of 61-column rows. Now `flush_bytes` of columns.
    wide = EventType("wide", "instant", tuple(Column(f"m{i}", "float64", "", "a measurement") for i in range(60)))
    with tracehouse.open(store_path, flush_bytes=1 << 20, flush_interval_s=3600.0) as s:
        s.create_trace("t", "demo", event_types=[wide])
        rows = 1000  # 1000 rows x 63 columns x 8 B = 504 KB per append: the third one crosses 1 MiB
        cols = {f"m{i}": np.full(rows, float(i)) for i in range(60)}
        for k in range(3):
            s.append(
                "t",
                "wide",
                pa.table(
                    {
                        "ts": np.arange(k * rows, (k + 1) * rows, dtype=np.int64),
                        "producer": pa.array(np.zeros(rows, np.int32)),
                        **cols,
                    }
                ),
            )
        deadline = time.monotonic() + 60
        while not s.catalog.segments(s.trace("t").id, "wide") and time.monotonic() < deadline:
            time.sleep(0.02)
        segs = s.catalog.segments(s.trace("t").id, "wide")
        assert sum(seg.rows for seg in segs) == 3 * rows, "a checkpoint was due once 1 MiB of columns was buffered"


def test_wal_records_in_any_ipc_framing_read_back_as_written(tmp_path):
    # read_wal decodes a record's batch messages itself against its schema message parsed once
    # (the reader of a live stream decodes every record its writer logs); a stream it
    # does not frame itself - the pre-0.15 framing without continuation markers, an explicit
    # end-of-stream marker, several batches - is decoded as pyarrow's stream reader does.
    import struct

    from tracehouse._core import crc32
    from tracehouse.store import wal as walmod

    batch = pa.record_batch(
        {"ts": pa.array([3, 1, 2], pa.int64()), "s": pa.array(["x", None, "zz"]), "f": pa.array([0.5, None, 1.5])}
    )

    def record(batches, legacy=False) -> bytes:
        sink = pa.BufferOutputStream()
        opts = pa.ipc.IpcWriteOptions(use_legacy_format=legacy)
        with pa.ipc.new_stream(sink, batch.schema, options=opts) as w:  # closing writes the end marker
            for b in batches:
                w.write_batch(b)
        payload = struct.pack("<H", 2) + b"ev" + sink.getvalue().to_pybytes()
        return struct.pack("<II", len(payload), crc32(payload)) + payload

    kinds = [[batch], [batch, batch.slice(1), batch.slice(2, 1)], [batch.slice(1)]]
    path = walmod.wal_path(tmp_path, 0)
    path.write_bytes(walmod.MAGIC + b"".join(record(k, legacy) for legacy in (False, True) for k in kinds))
    scan = walmod.read_wal(path)
    assert scan.error is None and scan.valid_bytes == path.stat().st_size
    expected = [b for _legacy in (False, True) for k in kinds for b in k]
    assert [name for name, _b in scan.records] == ["ev"] * len(expected)
    assert [b.to_pylist() for _n, b in scan.records] == [b.to_pylist() for b in expected]
    # Read on from a record boundary (what a reader polling a live WAL does): the same batches.
    first = len(walmod.MAGIC) + len(record(kinds[0]))
    assert [b.to_pylist() for _n, b in walmod.read_wal(path, first).records] == [b.to_pylist() for b in expected[1:]]


def test_a_live_tail_read_incrementally_gives_the_rows_of_a_whole_read(store):
    # The query engine aligns only the batches a tail gained since its last look and slices
    # off those a checkpoint took from its front (a reader polling a live stream
    # aligned the whole tail on every poll). Every shape of change against one whole align.
    from tracehouse.store.conform import align

    store.create_trace("t", "demo", event_types=[LOAD])
    et = store.event_type("t", "load")
    bs = [
        pa.record_batch(
            {
                "ts": pa.array([i * 10 + j for j in range(i + 1)], pa.int64()),
                "producer": pa.array([0] * (i + 1), pa.int32()),
                "seq": pa.array(range(i + 1), pa.int64()),
                "value": pa.array([float(i)] * (i + 1)),
            }
        )
        for i in range(8)
    ]
    engine = store.query_engine
    steps = [bs[:2], bs[:2], bs[:4], bs[1:4], bs[3:7], bs[3:7], bs[6:7], bs[6:8], bs[:3], [], bs[2:5], bs[5:8]]
    last = None
    for tail in steps:
        table, changed = engine._tail_table(99, et, tail)
        if not tail:
            assert table is None
            continue
        whole = align(tail, et, [c.name for c in et.columns])
        assert table.equals(whole), f"tail of {len(tail)} batches"
        assert changed == (last is None or not last.equals(whole))
        last = whole
    # The type widened (a column's type changed): the rows are aligned anew, not reused.
    wider = EventType("load", "counter", (Column("value", "string", "%", "cpu load"),))
    table, changed = engine._tail_table(99, wider, bs[5:8])
    assert changed and table.schema.field("value").type == pa.string()
    assert table.equals(align(bs[5:8], wider, [c.name for c in wider.columns]))


def test_a_reader_of_the_wal_sees_every_row_once_as_the_tail_grows_and_checkpoints(store, store_path):
    # Between checkpoints a reader's views stay and only the tail tables change;
    # the rows it sees must still be exactly those appended, never twice, never missing.
    store.create_trace("t", "demo", event_types=[LOAD, MARK])
    q = 'SELECT count(*) AS n, count(DISTINCT seq) AS d, sum(ts) AS s FROM "t".events'
    with tracehouse.open(store_path, readonly=True) as ro:
        n = total = 0
        for i in range(14):
            ts = list(range(i * 100, i * 100 + 5))
            if i % 3 == 2:
                store.append("t", "mark", marks(ts, [0] * 5, ["m"] * 5), wait=True)
            else:
                store.append(
                    "t",
                    "load",
                    pa.table(
                        {"ts": pa.array(ts, pa.int64()), "producer": pa.array([0] * 5, pa.int32()), "value": [0.5] * 5}
                    ),
                    wait=True,
                )
            n, total = n + 5, total + sum(ts)
            if i % 5 == 4:
                store.flush("t")
            for s in (ro, store):
                got = s.sql(q).to_pylist()[0]
                assert (got["n"], got["s"]) == (n, total), f"after append {i}"
                assert got["d"] <= got["n"]
            assert ro.sql('SELECT count(*) AS n FROM "t".load WHERE value = 0.5').column(0)[0].as_py() == sum(
                5 for j in range(i + 1) if j % 3 != 2
            )


def test_a_refresh_that_failed_half_way_is_not_taken_for_a_done_one(store, store_path, monkeypatch):
    # Review of the incremental tails: the tail cache was written before its table was
    # registered, so a register that failed left the cache saying "unchanged" and the view
    # kept serving the older, shorter tail. A failed refresh now forgets the trace's tails.
    from tracehouse.store.query import QueryEngine

    store.create_trace("t", "demo", event_types=[LOAD])
    q = 'SELECT count(*) AS n, sum(value) AS v FROM "t".load'

    def load(i):
        return pa.table({"ts": pa.array([i], pa.int64()), "producer": pa.array([0], pa.int32()), "value": [1.0]})

    with tracehouse.open(store_path, readonly=True) as ro:
        store.append("t", "load", load(0), wait=True)
        assert ro.sql(q).to_pylist()[0]["n"] == 1
        store.append("t", "load", load(1), wait=True)
        real = QueryEngine._register
        fails = [1]

        def register_once_failing(self, name, trace, table):
            if fails[0] and name.startswith("_tail_"):
                fails[0] -= 1
                raise RuntimeError("register failed")
            return real(self, name, trace, table)

        monkeypatch.setattr(QueryEngine, "_register", register_once_failing)
        with pytest.raises(RuntimeError, match="register failed"):
            ro.sql(q)
        assert ro.sql(q).to_pylist()[0] == {"n": 2, "v": 2.0}


def test_a_wal_record_that_fails_to_decode_for_want_of_memory_is_not_a_torn_tail(tmp_path, monkeypatch):
    # Review: read_wal took any Arrow error while decoding a CRC-checked record for "undecodable",
    # and recovery cuts an undecodable record with every record after it. Out of memory is not
    # a bad record: it must surface, and the file stay as it is.
    from tracehouse.store import wal as walmod

    path = walmod.wal_path(tmp_path, 0)
    w = walmod.WalWriter(tmp_path, 0)
    w.append("ev", pa.record_batch({"ts": pa.array([1, 2], pa.int64())}))
    w.close()

    def out_of_memory(*args, **kwargs):
        raise pa.ArrowMemoryError("malloc of 64 bytes failed")

    monkeypatch.setattr(walmod, "_decode", out_of_memory)
    size = path.stat().st_size
    with pytest.raises(pa.ArrowMemoryError):
        walmod.read_wal(path)
    assert path.stat().st_size == size


def test_a_string_column_of_many_distinct_values_stays_dictionary_encoded(store):
    # 1.6 MB of distinct labels (the `args` of a real strace log are like this) overflowed
    # pyarrow's 1 MiB dictionary page and every later value was written plain: a 300K-row segment
    # of 25K labels repeated was 10.2 MB instead of 1.4 MB.
    import hashlib

    store.create_trace("t", "demo", event_types=[MARK])
    labels = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(25_000)]
    n = 300_000
    store.append("t", "mark", marks(list(range(n)), [1] * n, [labels[i % len(labels)] for i in range(n)]))
    store.flush("t")
    (seg,) = store.catalog.segments(store.trace("t").id, "mark")
    assert seg.bytes < 3_000_000, seg.bytes
    assert scalar(store, 'SELECT count(DISTINCT label) FROM "t".mark') == len(labels)


def test_segment_time_range_and_order_are_found_chunk_by_chunk():
    # An import's checkpoint is many ordered batches; they are no longer glued together
    # to find it ordered (and its ts range), so the borders between chunks must be checked too.
    from tracehouse.store.segments import row_order

    def ts_order(table):
        return row_order(table, by_producer=False)

    def chunked(*parts):
        return pa.Table.from_batches([pa.record_batch({"ts": pa.array(p, pa.int64())}) for p in parts])

    assert ts_order(chunked([1, 2, 3], [3, 4], [], [9])) is None
    order = ts_order(chunked([1, 2, 5], [4, 6]))  # each chunk ordered, not the border
    assert order is not None and order.to_pylist() == [0, 1, 3, 2, 4]
    assert ts_order(chunked([2, 1], [3])).to_pylist() == [1, 0, 2]
    assert ts_order(chunked([3, 3, 1], [1, 3])).to_pylist() == [2, 3, 0, 1, 4]  # stable


def test_row_order_by_producer_then_ts_across_chunks():
    # The native order (src/py/segment.rs) over (producer int32, ts): ordered tables give None,
    # others the stable permutation, whichever chunk the rows sit in.
    from tracehouse.store.segments import row_order

    def chunked(*parts):
        return pa.Table.from_batches(
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

    assert row_order(chunked([(1, 5), (1, 7)], [(2, 1)]), by_producer=True) is None
    assert row_order(chunked([(1, 5), (1, 7)], [(2, 1)]), by_producer=False).to_pylist() == [2, 0, 1]
    t = chunked([(2, 1), (1, 9)], [(1, 3), (2, 1)])
    assert row_order(t, by_producer=True).to_pylist() == [2, 1, 0, 3]
    with pytest.raises(ValueError, match="null"):
        row_order(pa.table({"ts": pa.array([2, None, 1], pa.int64())}), by_producer=False)


def test_checkpoint_soon_registers_what_is_buffered_without_waiting(store_path):
    # An import that has read its input starts encoding its last rows while it writes
    # its producers; the rows reach a registered segment without a flush() (no interval due).
    with tracehouse.open(store_path, flush_interval_s=3600.0) as s:
        s.create_trace("t", "demo", event_types=[MARK])
        s.append("t", "mark", marks([1, 2, 3], [1, 1, 2], ["a", "b", "c"]))
        s.checkpoint_soon("t")
        tid = s.trace("t").id
        for _ in range(600):  # (up to a minute on a loaded machine)
            if s.catalog.segments(tid, "mark"):
                break
            time.sleep(0.1)
        assert [seg.rows for seg in s.catalog.segments(tid, "mark")] == [3]


def test_write_behind_settles_a_file_as_another_writer_writes_it(tmp_path):
    # The thread follows the file's length: every 1 MiB step but the last is written back
    # by the time the block ends (src/store/writeback.rs), whoever wrote the bytes.
    p = tmp_path / "f"
    fd = os.open(p, os.O_WRONLY | os.O_CREAT)
    try:
        with _core.WriteBehind(fd) as wb:
            for _ in range(5):
                os.write(fd, b"x" * (1 << 20))
        assert wb.settled == 4 << 20
    finally:
        os.close(fd)
    assert p.stat().st_size == 5 << 20


def test_a_segment_written_by_pyarrow_is_settled_as_it_is_written(tmp_path, monkeypatch):
    # A segment's pages go to the disk while it is encoded, not all at its fsync (which queued
    # the whole file ahead of the WAL's fdatasync: the ack latency tail).
    from tracehouse.store import segments

    made = []
    real = _core.WriteBehind

    class Spy:
        def __init__(self, fd):
            self.wb = real(fd)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            r = self.wb.__exit__(*exc)
            made.append(self.wb.settled)
            return r

    monkeypatch.setattr(segments._core, "WriteBehind", Spy)
    rng = np.random.default_rng(7)
    n = 1_000_000
    table = pa.table(
        {
            "ts": pa.array(np.arange(n), pa.int64()),
            "producer": pa.array(np.zeros(n, np.int32)),
            "v": pa.array(rng.random(n)),
        }
    )  # noise: ~8 MB whatever the codec
    row = segments.write_segment(tmp_path, "seg", table)
    path = tmp_path / row["path"]
    size = path.stat().st_size
    assert size > 4 << 20
    assert len(made) == 1 and size - (2 << 20) <= made[0] < size
    assert pq.read_table(path).equals(table)
