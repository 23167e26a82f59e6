"""The store under crashes, torn logs, concurrent readers, bad input, a second writer and interrupted deletes.

Crash tests run a real writer process (tests/helpers/ingest_child.py) and SIGKILL
it: at random moments (several iterations, seeded so a failure can be replayed)
and at exact points reached through monkeypatched seams. After every crash a plain
`tracehouse.open` must recover on its own, and every acknowledged batch must be
there exactly once, whole, with nothing that was never sent.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracehouse
from helpers import (
    BATCH_TYPE,
    HERE,
    ID_TYPE,
    Child,
    batch_table,
    child_env,
    id_table,
    rows_of_batch,
    run_child,
    segment_files,
    wal_files,
    wal_frames,
)
from tracehouse import BadInput, NotFound, StoreLocked
from tracehouse.store import wal as walmod

# -- helpers -------------------------------------------------------------------------


def make_batch_trace(path: Path) -> None:
    with tracehouse.open(path) as s:
        s.create_trace("t", "crashfmt", event_types=[BATCH_TYPE])


def batches_in(store) -> dict[int, tuple[int, int]]:
    """batch id -> (rows, distinct row indexes) of every batch present in trace t."""
    t = store.sql('SELECT batch, count(*) AS n, count(DISTINCT "row") AS d FROM "t".ev GROUP BY batch')
    return {b: (n, d) for b, n, d in zip(*(t.column(c).to_pylist() for c in ("batch", "n", "d")))}


def open_recovered(path: Path):
    """Open (and so recover) the store with its background work held off until close.

    The checks below list the segment directories while the store is open. With the default
    0.5 s flush interval, the replayed rows were checkpointed in the background meanwhile
    (and a compaction could follow): a checkpoint's `.tmp` file or a segment renamed but not
    yet registered, listed mid-write, looked like debris recovery had left. That was the flaky
    `test_sigkill_at_each_checkpoint_phase...` failure ("temporary segment files survived
    recovery", once at load 24, where check_batches' query took over 0.5 s). Recovery itself
    is the same; only the checkpoint of what it replayed waits for close.
    """
    return tracehouse.open(path, flush_interval_s=3600.0, compact_min_segments=1 << 30)


def assert_files_match_catalog(store) -> None:
    """No orphan or temporary segment file; every live segment's file exists; no covered WAL file left."""
    files = set(segment_files(store.path))
    assert not [f for f in files if f.endswith(".tmp")], "temporary segment files survived recovery"
    orphans = files - store.catalog.known_paths()
    assert not orphans, f"segment files not in the catalog: {sorted(orphans)}"
    missing = {s.path for s in store.catalog.all_live_segments()} - files
    assert not missing, f"live segments whose file is gone: {sorted(missing)}"
    for info in store.traces():
        wal_dir = store.path / "traces" / str(info.id) / "wal"
        stale = [n for n in walmod.wal_numbers(wal_dir) if n <= info.wal_covered]
        assert not stale, f"WAL files {stale} are covered by segments but still on disk"


def check_batches(store, acked: set[int], sent: set[int]) -> dict[int, tuple[int, int]]:
    present = batches_in(store)
    lost = sorted(acked - present.keys())
    assert not lost, f"acknowledged batches missing after recovery: {lost[:20]}"
    never_sent = sorted(present.keys() - sent)
    assert not never_sent, f"batches present that were never sent: {never_sent[:20]}"
    wrong = {b: nd for b, nd in present.items() if nd != (rows_of_batch(b), rows_of_batch(b))}
    assert not wrong, f"batches duplicated or partial (batch: (rows, distinct rows)): {dict(list(wrong.items())[:20])}"
    return present


# -- SIGKILL in the middle of ingest -----------------------------------------------------

KILL_ITERATIONS = 8


@pytest.mark.parametrize("fsync", ["batch", "always"])
def test_sigkill_mid_ingest_keeps_every_acked_batch_exactly_once(store_path, fsync):
    make_batch_trace(store_path)
    rng = random.Random(f"sigkill-{fsync}")
    acked: set[int] = set()
    sent: set[int] = set()
    for it in range(KILL_ITERATIONS):
        first = it * 100_000
        child = Child("ingest_child.py", str(store_path), fsync, str(first))
        child.wait_lines(rng.randint(1, 40))
        time.sleep(rng.uniform(0.0, 0.05))
        ids = [int(x) for x in child.kill()]
        assert ids == list(range(first, first + len(ids))), "the child acknowledges ids in order"
        acked.update(ids)
        sent.update(range(first, first + len(ids) + 1))  # + the one in flight when it died
        # Every other crash is left for the next child to recover, so kills also land during recovery.
        if it % 2 == 1 or it == KILL_ITERATIONS - 1:
            with tracehouse.open(store_path, readonly=True) as ro:  # before recovery: segments + the intact
                check_batches(ro, acked, sent)  # WAL records, never a partial or doubled batch
            with open_recovered(store_path) as s:  # recovery needs nothing but an open
                check_batches(s, acked, sent)
                assert_files_match_catalog(s)
                assert all(not r.torn or r.torn[0]["bytes_cut"] > 0 for r in s.recovery)

    # After all that, a new writer appends and everything is still there exactly once.
    with tracehouse.open(store_path) as s:
        s.append("t", "ev", batch_table(999_999), wait=True)
    acked.add(999_999)
    sent.add(999_999)
    with tracehouse.open(store_path, readonly=True) as ro:  # registered segments only: all of it was flushed
        present = check_batches(ro, acked, sent)
        assert ro.trace("t").event_count == sum(n for n, _ in present.values())


# The point where the child kills itself, and at which occurrence (late enough that earlier
# checkpoints and compactions have happened).
DIE_POINTS = {
    "wal-append": 30,  # half a WAL record on disk
    "segment-tmp": 2,  # a checkpoint's temporary Parquet file half written
    "segment-file": 2,  # a segment renamed into place, never registered
    "registered": 3,  # segments registered and wal_covered advanced, WAL files not deleted
    "compaction-tmp": 1,  # a compaction's temporary output half written
    "compaction-file": 1,  # a compaction's output renamed into place, never registered
    "compacted": 1,  # compaction registered, retired files not deleted
}


@pytest.mark.parametrize("fsync", ["batch", "always"])
@pytest.mark.parametrize("point", list(DIE_POINTS))
def test_sigkill_at_each_checkpoint_phase_recovers_without_repair(store_path, point, fsync):
    make_batch_trace(store_path)
    child = Child("ingest_child.py", str(store_path), fsync, "0", point, str(DIE_POINTS[point]))
    ids = [int(x) for x in child.finish(timeout=60)]
    assert child.proc.returncode == -signal.SIGKILL, f"child did not die at {point}: {child.stderr()}"
    assert ids == list(range(len(ids)))
    if point == "wal-append":
        assert len(ids) == DIE_POINTS[point] - 1  # the torn append was never acknowledged
    files_before = set(segment_files(store_path))

    if point == "wal-append":  # the half record is on disk past the last whole one
        wal = wal_files(store_path)[-1]
        # A checkpoint may have rotated the log just before: the torn record is then alone
        # in a new file, right after its magic.
        frames = wal_frames(wal)
        end = frames[-1][1] if frames else len(walmod.MAGIC)
        assert any(wal.read_bytes()[end:]), "the failpoint wrote nothing of the record"
    with open_recovered(store_path) as s:
        present = check_batches(s, set(ids), set(range(len(ids) + 1)))
        assert point != "wal-append" or len(ids) not in present, "half a record was replayed"
        assert_files_match_catalog(s)
        torn = [e for r in s.recovery for e in r.torn]
        # Nothing is torn even at "wal-append": the header is written last, so half a record
        # is zeros where its header goes, which end the log (the damaged tails are below).
        assert torn == [], s.recovery
        if point in ("segment-tmp", "segment-file", "compaction-tmp", "compaction-file"):
            gone = files_before - set(segment_files(store_path))
            assert gone, "the orphan left by the crash was not removed"
            assert not gone & s.catalog.known_paths()
        s.append("t", "ev", batch_table(10_000), wait=True)  # the store takes writes again

    with tracehouse.open(store_path) as s:
        check_batches(s, set(ids) | {10_000}, set(range(len(ids) + 1)) | {10_000})
        assert [e for r in s.recovery for e in r.torn] == []


def test_a_process_that_opened_during_ingest_recovers_once_when_the_writer_dies(store_path):
    # Regression: the first write recovered the trace (making its TraceWriter) and then made
    # a second TraceWriter for it: the WAL was replayed twice and rows doubled.
    make_batch_trace(store_path)
    child = Child("ingest_child.py", str(store_path), "batch", "0")
    child.wait_lines(25)
    late = tracehouse.open(store_path)  # the lock is held: it opens as a reader
    try:
        ids = [int(x) for x in child.kill()]
        before = set(threading.enumerate())
        late.append("t", "ev", batch_table(500_000), wait=True)  # now it is the writer, and recovers
        flushers = [th.name for th in set(threading.enumerate()) - before if th.name.startswith("th-flush-")]
        assert len(flushers) == 1, f"one trace, one writer: {flushers}"
        sent = set(range(len(ids) + 1)) | {500_000}
        check_batches(late, set(ids) | {500_000}, sent)
    finally:
        late.close()
    with open_recovered(store_path) as s:
        check_batches(s, set(ids) | {500_000}, sent)
        assert_files_match_catalog(s)


# -- torn and corrupted WAL tails ----------------------------------------------------------

WRITE_THREE = """
import os, sys
sys.path.insert(0, {tests!r})
import tracehouse
from helpers import batch_table
s = tracehouse.open({path!r}, fsync="always")
s.create_trace("t", "crashfmt", event_types=[__import__("helpers").BATCH_TYPE])
for b in (1, 2, 3):
    s.append("t", "ev", batch_table(b), wait=True)
os._exit(0)  # a crash: nothing flushed, the three records live only in the WAL
"""


@pytest.fixture(scope="module")
def crashed_with_three_records(tmp_path_factory):
    """A store whose writer died with three acknowledged batches (ids 1, 2, 3) in one WAL file."""
    path = tmp_path_factory.mktemp("template") / "store"
    code = WRITE_THREE.format(tests=str(HERE.parent), path=str(path))
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, env=child_env())
    (wal,) = wal_files(path)
    assert len(wal_frames(wal)) == 3
    return path


def _copy(template: Path, dest: Path) -> tuple[Path, Path]:
    shutil.copytree(template, dest)
    (wal,) = wal_files(dest)
    return dest, wal


def _truncate(wal: Path, size: int) -> None:
    with open(wal, "r+b") as f:
        f.truncate(size)


def _flip(wal: Path, offset: int) -> None:
    data = bytearray(wal.read_bytes())
    data[offset] ^= 0x5A
    wal.write_bytes(bytes(data))


def _put(wal: Path, offset: int, junk: bytes) -> int:
    """Write `junk` at `offset` (over the zeros a writer leaves past its last record); returns the size."""
    with open(wal, "r+b") as f:
        f.seek(offset)
        f.write(junk)
    return wal.stat().st_size


GARBAGE = bytes((i * 73 + 41) % 256 for i in range(97))


def damage_wal(case: str, wal: Path, frames: list[tuple[int, int]]) -> tuple[int, int, set[int]]:
    """Damage the three-record WAL file as `case` says; returns (where the lost bytes start, how many
    are lost, batches kept). A damaged record followed by an intact one (or by the log's end) is
    skipped, its neighbours kept; damage after which no record can be found ends the log."""
    _, (start2, end2), (start3, end3) = frames
    size = wal.stat().st_size  # (zeros may follow record 3: a cut there takes them too)
    if case == "truncated-in-header":
        _truncate(wal, start3 + 5)  # 5 of the 8 header bytes of record 3
        return start3, 5, {1, 2}
    if case == "truncated-in-payload":
        _truncate(wal, start3 + 8 + 20)
        return start3, 28, {1, 2}
    if case == "crc-mismatch-last-record":
        _flip(wal, (start3 + end3) // 2)
        return start3, end3 - start3, {1, 2}
    if case == "crc-mismatch-middle-record":  # skipped: record 3 after it is intact and kept
        _flip(wal, end2 - 3)
        return start2, end2 - start2, {1, 3}
    if case == "garbage-appended":  # a length no record has: the log ends there
        return end3, _put(wal, end3, GARBAGE) - end3, {1, 2, 3}
    if case == "short-garbage-appended":  # a 7-byte "record" over the zeros: skipped, as zeros follow it
        size = _put(wal, end3, b"\x07\x00\x00")
        return end3, 8 + 7 if size - end3 >= 8 + 7 + 8 else size - end3, {1, 2, 3}
    raise AssertionError(case)


TORN_CASES = [
    "truncated-in-header",
    "truncated-in-payload",
    "crc-mismatch-last-record",
    "crc-mismatch-middle-record",
    "garbage-appended",
    "short-garbage-appended",
]


@pytest.mark.parametrize("case", TORN_CASES)
def test_damaged_wal_records_are_reported_marked_on_the_trace_and_the_intact_ones_kept(
    crashed_with_three_records, tmp_path, case
):
    path, wal = _copy(crashed_with_three_records, tmp_path / "store")
    offset, cut, kept = damage_wal(case, wal, wal_frames(wal))
    damaged = wal.read_bytes()

    with tracehouse.open(path, flush_interval_s=3600.0) as s:  # no checkpoint may drop the WAL before we look
        (report,) = s.recovery
        assert report.trace == "t"
        assert len(report.torn) == 1, report
        torn = report.torn[0]
        assert Path(torn["file"]) == wal
        assert torn["offset"] == offset
        assert torn["bytes_cut"] == cut
        assert torn["reason"]
        assert report.records == len(kept)
        assert report.rows == sum(rows_of_batch(b) for b in kept)
        assert wal.read_bytes() == damaged, "the damaged file is kept as it was until a checkpoint covers it"
        (copy,) = (path / "quarantine").glob(f"*/traces/*/wal/{wal.name}")
        assert copy.read_bytes() == damaged
        info = s.trace("t")  # the loss is said where users look: th.traces, ls, info
        assert info.state == "incomplete" and info.state_reason.startswith("WAL damaged: 1 record(s)"), info
        assert f"{cut:,} bytes" in info.state_reason and wal.name in info.state_reason
        present = check_batches(s, kept, kept)
        assert present.keys() == kept
        s.append("t", "ev", batch_table(4), wait=True)

    with tracehouse.open(path) as s:  # checkpointed: nothing damaged the second time; the mark stays
        assert all(r.torn == [] for r in s.recovery)
        assert batches_in(s).keys() == kept | {4}
        check_batches(s, kept | {4}, kept | {4})
        assert s.trace("t").state_reason.startswith("WAL damaged")


@pytest.mark.parametrize("content", [b"", walmod.MAGIC[:3]], ids=["empty", "half-a-header"])
def test_next_wal_file_killed_before_its_header(crashed_with_three_records, tmp_path, content):
    """The writer died right after creating its next WAL file (rotation): the earlier file is intact."""
    path, wal = _copy(crashed_with_three_records, tmp_path / "store")
    nxt = walmod.wal_path(wal.parent, int(wal.stem) + 1)
    nxt.write_bytes(content)
    with tracehouse.open(path) as s:
        torn = [e for r in s.recovery for e in r.torn]
        if content:
            assert [(Path(e["file"]), e["bytes_cut"]) for e in torn] == [(nxt, len(content))]
        else:
            assert torn == []  # an empty file is an empty log, not damage
        check_batches(s, {1, 2, 3}, {1, 2, 3})
        s.append("t", "ev", batch_table(4), wait=True)
    with tracehouse.open(path) as s:
        check_batches(s, {1, 2, 3, 4}, {1, 2, 3, 4})
        assert s.recovery == []


@pytest.mark.parametrize("fsync", ["batch", "off"])
def test_a_wal_file_with_no_records_is_recovered_once(store_path, fsync):
    # Regression: a header-only WAL file (killed right after a rotation) was never dropped
    # while no rows came, so every open "recovered" it again and took the writer lock.
    with tracehouse.open(store_path) as s:
        s.create_trace("t", "crashfmt", event_types=[BATCH_TYPE])
        wal_dir = store_path / "traces" / str(s.trace("t").id) / "wal"
    wal_dir.mkdir(parents=True, exist_ok=True)
    walmod.wal_path(wal_dir, 5).write_bytes(walmod.MAGIC)
    with tracehouse.open(store_path, fsync=fsync) as s:
        assert [(r.wal_files, r.records, r.torn) for r in s.recovery] == [(1, 0, [])]
    assert wal_files(store_path) == []
    with tracehouse.open(store_path, fsync=fsync) as s:
        assert s.recovery == []
        s.append("t", "ev", batch_table(1), wait=True)
    with tracehouse.open(store_path, readonly=True) as ro:
        check_batches(ro, {1}, {1})


def test_wal_replay_with_fsync_off_does_not_duplicate_rows(crashed_with_three_records, tmp_path):
    # Regression: with fsync=off no checkpoint covered the replayed WAL files, so every
    # reopen replayed them again.
    path, _ = _copy(crashed_with_three_records, tmp_path / "store")
    for _ in range(3):
        with tracehouse.open(path, fsync="off") as s:
            check_batches(s, {1, 2, 3}, {1, 2, 3})
    assert wal_files(path) == []
    with tracehouse.open(path, readonly=True) as ro:
        check_batches(ro, {1, 2, 3}, {1, 2, 3})


@pytest.fixture(scope="module")
def wal_template(tmp_path_factory):
    """A WAL file of five records written by WalWriter, and the batches in it."""
    d = tmp_path_factory.mktemp("wal")
    w = walmod.WalWriter(d, 0)
    batches = [batch_table(b).to_batches()[0] for b in range(5)]
    for b in batches:
        w.append("ev", b)
    w.close()
    path = walmod.wal_path(d, 0)
    return path.read_bytes(), wal_frames(path), batches


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_truncation_or_flipped_byte_keeps_every_intact_record_and_names_the_damage(wal_template, tmp_path, data):
    raw, frames, batches = wal_template
    damaged = bytearray(raw)
    if data.draw(st.booleans(), label="truncate"):
        size = data.draw(st.integers(len(walmod.MAGIC), len(raw)), label="size")
        damaged = damaged[:size]
        intact = sum(1 for _, end in frames if end <= size)
        expect = list(range(intact))  # the records before the cut, nothing after it
        exact = True
        # A cut exactly between two records reads as a shorter log: nothing in the file says
        # records followed (the damage suite's WAL cut lands inside a record).
        boundary = size in {len(walmod.MAGIC), *(end for _, end in frames)}
    else:
        pos = data.draw(st.integers(len(walmod.MAGIC), len(raw) - 1), label="flip at")
        damaged[pos] ^= data.draw(st.integers(1, 255), label="xor")
        k = next(i for i, (start, end) in enumerate(frames) if start <= pos < end)
        # A flip in a record's CRC or payload: that record is skipped, the rest kept. A flip in
        # its length: the records before it are kept at least (where the length points is no record).
        expect = [i for i in range(len(frames)) if i != k]
        exact = pos >= frames[k][0] + 4
        intact = k
        boundary = False
    path = tmp_path / f"{random.getrandbits(64):016x}.wal"
    path.write_bytes(bytes(damaged))
    scan = walmod.read_wal(path)
    got = [next(i for i, b in enumerate(batches) if b.equals(r)) for _, r in scan.records]
    if exact:
        assert got == expect
    else:
        assert got[:intact] == list(range(intact)) and set(got) <= set(expect) and got == sorted(got)
    lost = len(frames) - len(got)
    assert (lost == 0 or boundary) == (not scan.losses()), scan.losses()  # every loss is named, nothing else
    assert all(x["reason"] and x["bytes"] > 0 for x in scan.losses())


# -- readers during flush and compaction ---------------------------------------------------

SNAPSHOT_QUERY = 'SELECT count(*), count(DISTINCT id), coalesce(max(id), -1) FROM "t".ev'
SNAPSHOT_BATCH = 50
SNAPSHOT_MIN_BATCHES = 160  # 8000 rows at least ...
SNAPSHOT_MAX_BATCHES = 4_000  # ... and on until a compacted-away file was deleted under the readers
GRACE_S = 1.5


def test_readers_see_consistent_snapshots_while_the_writer_flushes_and_compacts(store_path, tmp_path):
    s = tracehouse.open(
        store_path,
        flush_rows=400,
        flush_interval_s=0.02,
        compact_min_segments=2,
        compact_target_rows=3_000,
        retire_grace_s=GRACE_S,
        group_commit_ms=1,
    )
    try:
        s.create_trace("t", "idfmt", event_types=[ID_TYPE])
        stop_file = tmp_path / "stop-reading"
        reader = Child("reader_child.py", str(store_path), str(stop_file), "120")
        reader.wait_lines(1)  # the other process is querying before the first append

        inproc: list[tuple[int, int, int]] = []
        errors: list[BaseException] = []
        stop = threading.Event()

        def query_loop() -> None:
            while not stop.is_set():
                try:
                    inproc.append(tuple(s.sql(SNAPSHOT_QUERY).to_pylist()[0].values()))
                except BaseException as e:  # surfaced below
                    errors.append(e)
                    return

        t = threading.Thread(target=query_loop)
        t.start()
        seen: set[str] = set()
        deleted: set[str] = set()
        try:
            i = 0
            while i < SNAPSHOT_MIN_BATCHES or (not deleted and i < SNAPSHOT_MAX_BATCHES):
                s.append("t", "ev", id_table(i * SNAPSHOT_BATCH, SNAPSHOT_BATCH))
                i += 1
                if i % 15 == 0:
                    s.flush("t")  # a checkpoint from this thread while the flusher thread runs its own
                if i % 50 == 0:
                    s.compact("t")
                if i % 10 == 0:
                    now = set(segment_files(store_path))
                    seen |= now
                    deleted = seen - now
                time.sleep(0.001)
            total = i * SNAPSHOT_BATCH
            s.flush("t")
            stop_file.touch()
            lines = reader.finish(timeout=120)
        finally:
            stop.set()
            t.join(timeout=60)
        assert not errors, errors
        assert reader.proc.returncode == 0, f"reader exit {reader.proc.returncode}: {reader.stderr()}"
        assert deleted, "the test meant to delete compacted-away files while reading, but none were"
        levels = s.sql("SELECT max(level) AS l FROM th.segments WHERE trace = 't'").column("l")[0].as_py()
        assert levels >= 1, "the test meant to compact while reading, but nothing was compacted"

        inproc.append(tuple(s.sql(SNAPSHOT_QUERY).to_pylist()[0].values()))
        other = [tuple(int(x) for x in line.split()) for line in lines]
        for name, obs in (("other process", other), ("in-writer", inproc)):
            bad = [o for o in obs if not (o[0] == o[1] == o[2] + 1)]
            assert not bad, f"{name} reader saw rows missing or doubled (count, distinct, max): {bad[:10]}"
            counts = [o[0] for o in obs]
            assert counts == sorted(counts), f"{name} reader went back in time"
            assert counts[-1] == total, f"{name} reader's last look missed rows"
        assert other[0][0] == 0
    finally:
        s.close()


def test_catalog_writes_from_several_threads_while_checkpoints_run(store_path):
    # Regression: the catalog's shared SQLite connection failed with "cannot start a
    # transaction within a transaction" when two threads wrote at once.
    s = tracehouse.open(store_path, flush_rows=100, flush_interval_s=0.01, compact_min_segments=2)
    try:
        s.create_trace("t", "idfmt", event_types=[ID_TYPE])
        errors: list[BaseException] = []

        def meta(k: int) -> None:
            try:
                for i in range(60):
                    s.set_metadata("t", {f"k{k}": i})
                    s.add_producers("t", [{"id": k * 1000 + i, "kind": "thread", "name": f"p{k}-{i}"}])
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=meta, args=(k,)) for k in range(3)]
        for th in threads:
            th.start()
        for i in range(40):
            s.append("t", "ev", id_table(i * 25, 25))
        for th in threads:
            th.join(timeout=60)
        s.flush("t")
        assert not errors, errors
        assert s.trace("t").metadata == {"k0": "59", "k1": "59", "k2": "59"}
        assert len(s.producers("t")) == 180
        assert s.sql(SNAPSHOT_QUERY).to_pylist()[0]["count_star()"] == 1000
    finally:
        s.close()


def test_concurrent_appends_without_seq_get_distinct_sequence_numbers(store):
    # Regression: assign_seq was unguarded; four threads got 46201 distinct seq for 60001 rows.
    store.create_trace("t", "plain", event_types=[tracehouse.EventType("ev", "instant")])
    errors: list[BaseException] = []

    def appender() -> None:
        try:
            for _ in range(100):
                store.append("t", "ev", pa.table({"ts": list(range(20)), "producer": pa.array([0] * 20, pa.int32())}))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=appender) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not errors, errors
    got = store.sql('SELECT count(*), count(DISTINCT seq), min(seq), max(seq) FROM "t".ev').to_pylist()[0]
    assert list(got.values()) == [8000, 8000, 0, 7999]


def test_line_protocol_and_arrow_appends_share_one_numbering_across_reopen(store_path):
    # The line-protocol decoder numbers its rows itself (the writer's native counters): it must
    # continue what plain appends and earlier sessions stored, per producer, without repeats.
    from tracehouse.server.config import ServerConfig
    from tracehouse.server.ingest import Ingestor

    lines = "".join(f"m,host={'ab'[i % 2]} v={i} {i}\n" for i in range(10)).encode()
    with tracehouse.open(store_path) as s:
        ing = Ingestor(s, ServerConfig())
        assert ing.write_lp("lp", lines).rows == 10
        s.append("lp", "m", pa.table({"ts": [20, 21], "producer": pa.array([0, 0], pa.int32()), "v": [1.0, 2.0]}))
        assert ing.write_lp("lp", b"m,host=a v=0 30\n").rows == 1
    with tracehouse.open(store_path) as s:
        ing = Ingestor(s, ServerConfig())
        assert ing.write_lp("lp", b"m,host=b v=0 40\nm,host=a v=0 41\n").rows == 2
        got = s.sql('SELECT producer, list(seq ORDER BY ts) AS seq FROM "lp".m GROUP BY producer ORDER BY producer')
    assert got.column("seq").to_pylist() == [list(range(9)), list(range(6))]  # a: 5 + 2 + 1 + 1, b: 5 + 1


# -- bad input through the Python API ------------------------------------------------------


def _tbl(**cols) -> pa.Table:
    return pa.table(cols)


BAD_BATCHES = {
    "string-in-int-param": (_tbl(ts=[1, 2], producer=pa.array([0, 0], pa.int32()), id=["1", "x"]), "id"),
    "float-ts": (_tbl(ts=[1.5], producer=pa.array([0], pa.int32())), "ts"),
    "string-producer": (_tbl(ts=[1], producer=["main"]), "producer"),
    "producer-out-of-int32": (_tbl(ts=[1], producer=[2**40]), "producer"),
    "missing-ts": (_tbl(producer=pa.array([0], pa.int32()), id=[1]), "ts"),
    "missing-producer": (_tbl(ts=[1], id=[1]), "producer"),
    "null-ts": (_tbl(ts=pa.array([1, None], pa.int64()), producer=pa.array([0, 0], pa.int32())), "ts"),
    "null-producer": (_tbl(ts=[1, 2], producer=pa.array([0, None], pa.int32())), "producer"),
    "undeclared-column": (_tbl(ts=[1], producer=pa.array([0], pa.int32()), colour=["red"]), "colour"),
    "not-arrow": ({"ts": [1], "producer": [0]}, "RecordBatch"),
}


def _assert_nothing_registered(store, store_path) -> None:
    store.flush()
    info = store.trace("t")
    assert info.event_count == 0
    assert store.catalog.segments(info.id) == []
    assert segment_files(store_path) == []
    assert all(walmod.read_wal(w).records == [] for w in wal_files(store_path)), "a WAL record was left behind"
    assert store.sql('SELECT count(*) AS n FROM "t".ev').column("n")[0].as_py() == 0


@pytest.mark.parametrize("case", list(BAD_BATCHES))
def test_bad_batch_is_rejected_naming_the_problem_and_leaves_nothing(store, store_path, case):
    batch, named = BAD_BATCHES[case]
    store.create_trace("t", "idfmt", event_types=[ID_TYPE])
    with pytest.raises(BadInput) as e:
        store.append("t", "ev", batch)
    assert named in str(e.value)
    if e.value.column is not None:
        assert e.value.column == named
    _assert_nothing_registered(store, store_path)
    # The rejected batch used up no sequence numbers: the next good one starts at 0.
    store.append("t", "ev", pa.table({"ts": [5, 6], "producer": pa.array([0, 0], pa.int32()), "id": [1, 2]}))
    assert store.sql('SELECT seq FROM "t".ev ORDER BY ts').column("seq").to_pylist() == [0, 1]


def test_append_to_unknown_trace_or_event_type(store, store_path):
    store.create_trace("t", "idfmt", event_types=[ID_TYPE])
    good = id_table(0, 3)
    with pytest.raises(NotFound, match="'nope'"):
        store.append("nope", "ev", good)
    with pytest.raises(BadInput, match="no event type 'nope'") as e:
        store.append("t", "nope", good)
    assert "ev" in str(e.value)  # names what exists
    assert [t.name for t in store.traces()] == ["t"]
    _assert_nothing_registered(store, store_path)


BAD_NAMES = [
    "../x",
    "a/b",
    "..",
    ".hidden",
    "-opt",
    'q"uote',
    "q'uote",
    "a\\b",
    "",
    "x" * 129,
    "sp ace",
    "nul\0",
    "new\nline",
]


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_trace_name_that_would_escape_the_store_is_rejected(store, store_path, name):
    with pytest.raises(BadInput) as e:
        store.create_trace(name, "fmt")
    assert repr(name) in str(e.value)
    assert store.traces() == []
    assert list((store_path / "traces").iterdir()) == []
    assert not (store_path.parent / "x").exists()
    assert store.catalog.db.execute("SELECT count(*) FROM traces").fetchone()[0] == 0


@pytest.mark.parametrize("name", [None, 42, b"bytes"], ids=repr)
def test_trace_name_of_wrong_type_is_rejected(store, name):
    with pytest.raises(BadInput):
        store.create_trace(name, "fmt")
    assert store.traces() == []


@pytest.mark.parametrize(
    "producers",
    [
        [{"id": 1}],
        [{"id": "one", "kind": "thread", "name": "a"}],
        [{"id": 1, "kind": "thread", "name": "a", "attrs": "x"}],
        ["p"],
    ],
    ids=repr,
)
def test_bad_producers_leave_no_trace_behind(store, producers):
    with pytest.raises(BadInput, match="producer #0"):
        store.create_trace("t", "fmt", producers=producers)
    assert store.traces() == []
    store.create_trace("t", "fmt")
    with pytest.raises(BadInput, match="producer #0"):
        store.add_producers("t", producers)
    assert store.producers("t") == []


def test_bad_format_event_type_and_result_kind(store, store_path):
    with pytest.raises(BadInput, match="format"):
        store.create_trace("t", "../fmt")
    with pytest.raises(BadInput, match="kind"):
        tracehouse.EventType("e", "sometimes")
    with pytest.raises(BadInput, match="reserved"):
        tracehouse.EventType("e", "instant", (tracehouse.Column("ts", "int64", "", ""),))
    assert store.traces() == []
    store.create_trace("t", "fmt", event_types=[ID_TYPE])
    with pytest.raises(BadInput, match="kind"):
        store.save_result("verdict", "r", "tool", ["t"], table=pa.table({"a": [1]}))
    with pytest.raises(NotFound):
        store.save_result("table", "r", "tool", ["t", "nope"], table=pa.table({"a": [1]}))
    assert store.results() == []
    assert not (store_path / "results").exists() or list((store_path / "results").iterdir()) == []


# -- one writer per store -------------------------------------------------------------------


def _actions(out: str) -> dict[str, dict]:
    return {d["action"]: d for d in map(json.loads, out.splitlines())}


def test_second_writer_process_gets_store_locked_and_readers_still_work(store_path):
    s = tracehouse.open(store_path, flush_interval_s=3600.0)
    try:
        s.create_trace("t", "idfmt", event_types=[ID_TYPE])
        s.append("t", "ev", id_table(0, 5))
        s.flush("t")
        s.append("t", "ev", id_table(5, 2), wait=True)  # durable in the WAL, not in a segment

        r = run_child("lock_child.py", str(store_path))
        assert r.returncode == 0, r.stderr
        a = _actions(r.stdout)
        assert a["open"]["ok"], a["open"]  # opening is fine; it is writing that is refused
        assert a["read"] == dict(a["read"], ok=True, value=7)  # segments and the writer's durable WAL
        for action in ("create_trace", "append"):
            assert a[action]["error"] == "StoreLocked", a[action]
            msg = a[action]["message"]
            assert str(store_path) in msg and f"pid {os.getpid()}" in msg and "read-only" in msg
        assert a["readonly_read"] == dict(a["readonly_read"], ok=True, value=7)
        assert [t.name for t in s.traces()] == ["t"]  # the refused create left nothing

        # A second handle in this same process is refused the same way.
        other = tracehouse.open(store_path)
        try:
            with pytest.raises(StoreLocked):
                other.create_trace("x", "fmt")
        finally:
            other.close()
        s.append("t", "ev", id_table(7, 1))  # ... and the first writer is unaffected
    finally:
        s.close()

    # Once the writer is gone the lock is free.
    r = run_child("lock_child.py", str(store_path))
    a = _actions(r.stdout)
    assert a["create_trace"]["ok"] and a["append"]["ok"], r.stdout + r.stderr
    with tracehouse.open(store_path, readonly=True) as ro:
        assert sorted(t.name for t in ro.traces()) == ["other", "t"]
        assert ro.sql('SELECT count(*) AS n FROM "t".ev').column("n")[0].as_py() == 9


def test_readonly_open_refuses_writes(store_path):
    with tracehouse.open(store_path) as s:
        s.create_trace("t", "idfmt", event_types=[ID_TYPE])
    with tracehouse.open(store_path, readonly=True) as ro:
        for f in (
            lambda: ro.create_trace("u", "fmt"),
            lambda: ro.append("t", "ev", id_table(0, 1)),
            lambda: ro.rm("t"),
            lambda: ro.set_metadata("t", {"a": 1}),
        ):
            with pytest.raises(tracehouse.ReadOnly):
                f()
    with pytest.raises(NotFound):
        tracehouse.open(store_path.parent / "elsewhere", readonly=True)


# -- crash-safe delete ----------------------------------------------------------------------


@pytest.mark.parametrize("files_half_removed", [False, True])
def test_rm_interrupted_after_mark_deleting_is_completed_on_reopen(store_path, files_half_removed):
    s = tracehouse.open(store_path)
    s.create_trace(
        "gone",
        "idfmt",
        event_types=[ID_TYPE],
        metadata={"k": "v"},
        producers=[{"id": 0, "kind": "process", "name": "p"}],
    )
    s.create_trace("kept", "idfmt")
    for name in ("gone", "kept"):
        s.append(name, "ev", id_table(0, 10))
    s.flush()
    rid = s.save_result("annotation", "note", "tool", ["gone", "kept"], payload={"x": 1})
    tid = s.trace("gone").id
    s.catalog.mark_deleting(tid)  # what rm does first ...
    s.close()  # ... and then the process stops
    trace_dir = store_path / "traces" / str(tid)
    assert trace_dir.exists()
    if files_half_removed:
        shutil.rmtree(trace_dir / "segments")

    with tracehouse.open(store_path, readonly=True) as ro:  # hidden from readers already
        assert [t.name for t in ro.traces()] == ["kept"]
        with pytest.raises(NotFound):
            ro.trace("gone")

    with tracehouse.open(store_path) as s:
        assert not trace_dir.exists()
        db = s.catalog.db
        for table in ("traces", "segments", "producers", "trace_metadata"):
            col = "id" if table == "traces" else "trace_id"
            assert db.execute(f"SELECT count(*) FROM {table} WHERE {col} = ?", (tid,)).fetchone()[0] == 0, table
        assert [t.name for t in s.traces()] == ["kept"]
        assert s.sql('SELECT count(*) AS n FROM "kept".ev').column("n")[0].as_py() == 10
        assert s.result(rid)["traces"] == ["kept"]
        with pytest.raises(BadInput):
            s.sql('SELECT * FROM "gone".ev')
        s.create_trace("gone", "idfmt")  # the name is free again, and the new trace is empty
        assert s.sql('SELECT count(*) AS n FROM "gone".ev').column("n")[0].as_py() == 0
        assert_files_match_catalog(s)


def test_rm_of_a_trace_with_unflushed_rows(store):
    store.create_trace("t", "idfmt", event_types=[ID_TYPE])
    store.append("t", "ev", id_table(0, 10), wait=True)
    tid = store.trace("t").id
    store.rm("t")
    assert not (store.path / "traces" / str(tid)).exists()
    with pytest.raises(NotFound):
        store.rm("t")
    store.close()
    with tracehouse.open(store.path) as s:  # nothing is replayed for the deleted trace
        assert s.traces() == [] and s.recovery == []


def test_appends_do_not_wait_for_a_checkpoint_registering_and_readers_see_one_cut(store, monkeypatch):
    # Regression (the ack tail at half rate): a checkpoint registered its segments
    # (a SQLite commit: an fsync) holding the writer's append lock, so every append waited for
    # it. Here the registration is held open: an append must complete meanwhile, and a query
    # taken meanwhile must count each row once (not in both the new segment and the tail).
    store.create_trace("t", "idfmt", event_types=[ID_TYPE])
    store.append("t", "ev", id_table(0, 100), wait=True)
    entered, release = threading.Event(), threading.Event()
    orig = store.catalog.register_segments

    def slow_register(*a, **kw):
        entered.set()
        release.wait(60)
        return orig(*a, **kw)

    monkeypatch.setattr(store.catalog, "register_segments", slow_register)
    flusher = threading.Thread(target=store.flush, args=("t",))
    flusher.start()
    try:
        assert entered.wait(30), "the checkpoint never reached its registration"
        appended = threading.Thread(target=store.append, args=("t", "ev", id_table(100, 50)), kwargs={"wait": True})
        appended.start()
        appended.join(30)
        assert not appended.is_alive(), "an append waited for a checkpoint's registration"
        counted: list = []
        reader = threading.Thread(
            target=lambda: counted.append(
                store.sql('SELECT count(*) AS n, count(DISTINCT id) AS d FROM "t".ev').to_pylist()
            )
        )
        reader.start()
    finally:
        release.set()
    flusher.join(60)
    reader.join(60)
    assert counted == [[{"n": 150, "d": 150}]]
    assert store.sql('SELECT count(*) AS n FROM "t".ev').column("n")[0].as_py() == 150
