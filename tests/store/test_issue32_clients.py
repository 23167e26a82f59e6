"""Many reading threads of one process (store/query.py `QueryEngine._kept`): a thread whose kept
transaction still answers its query reads without the engine's lock, and every write another
store acknowledged before a query began is in that query's answer, while the writer appends,
checkpoints and the views change under the readers."""

from __future__ import annotations

import threading
import time

import pytest

import tracehouse
from tracehouse.workload import qos

# Plain (bound in the kept transaction), not a whole count the catalog answers.
COUNT = f"SELECT count(*) FROM {qos.TRACE}.{qos.EVENT_TYPE} WHERE ul_delay >= 0"


@pytest.fixture
def stores(tmp_path):
    writer = tracehouse.open(tmp_path / "s")  # (fsync=off writes no WAL: no reader elsewhere sees a tail)
    qos.tracehouse_load(writer, qos.dataset(0.01))
    reader = tracehouse.open(tmp_path / "s", readonly=True)  # as another process reads it (the WAL)
    yield writer, reader
    reader.close()
    writer.close()


def _count(store) -> int:
    with store.read_connection(COUNT, keep_open=True):
        return store.query_engine.snapshot_relation().fetchall()[0][0]


def test_issue32_a_current_reader_answers_while_another_thread_holds_the_engine_lock(stores):
    _writer, reader = stores
    n = _count(reader)  # (this thread's kept transaction now holds the query bound)
    held, release = threading.Event(), threading.Event()

    def hold():
        with reader.query_engine.lock:
            held.set()
            release.wait(60)

    h = threading.Thread(target=hold)
    h.start()
    assert held.wait(30)
    got: list[int] = []
    fresh = threading.Thread(target=lambda: got.append(_count(reader)))
    try:
        assert _count(reader) == n  # views unchanged: answered without the lock
        fresh.start()  # a thread's first query prepares its cursor under the lock: it waits
        fresh.join(0.5)
        assert got == []
    finally:
        release.set()
        h.join(30)
    fresh.join(30)
    assert got == [n]


def test_issue32_concurrent_readers_see_every_acknowledged_write(stores):
    writer, reader = stores
    extra = writer.sql(f"SELECT ts + 1 AS ts, producer, ul_delay FROM {qos.TRACE}.{qos.EVENT_TYPE} LIMIT 7")
    acked = [_count(writer)]  # rows every later query must see
    written = [acked[0]]  # rows a query may see at most
    done = threading.Event()
    errors: list = []
    answers = [0]

    def read():
        try:
            last = 0
            while not done.is_set():
                before = acked[-1]
                n = _count(reader)
                after = written[-1]
                assert before <= n <= after, (before, n, after)
                assert n >= last, (last, n)  # (a thread's later query never sees fewer rows)
                last = n
                answers[0] += 1
        except BaseException as e:  # noqa: BLE001 - asserted below
            errors.append(e)
            done.set()

    readers = [threading.Thread(target=read) for _ in range(6)]
    for t in readers:
        t.start()
    try:
        for i in range(60):
            if done.is_set():
                break
            written.append(written[-1] + extra.num_rows)
            writer.append(qos.TRACE, qos.EVENT_TYPE, extra)  # in the WAL: the readers' tail
            acked.append(written[-1])
            if i % 2:
                writer.flush()  # a checkpoint: a segment registered, the WAL covered, the views made anew
            # The readers ask meanwhile, a few times each: after a checkpoint their views stay as
            # they are and each keeps its transaction (read without the lock), which the next
            # append (a WAL record, no catalog change) must not keep serving.
            seen = answers[0]
            while answers[0] < seen + 3 * len(readers) and not done.is_set():
                time.sleep(0.001)
    finally:
        done.set()
        for t in readers:
            t.join(60)
    assert not errors, errors[0]
    assert answers[0] >= 60 * len(readers)
    assert _count(reader) == acked[-1] == acked[0] + 60 * extra.num_rows
    assert all(n == acked[-1] for n in _answers_of_fresh_threads(reader, 4))


def _answers_of_fresh_threads(store, n: int) -> list[int]:
    out: list[int] = []
    threads = [threading.Thread(target=lambda: out.append(_count(store))) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def test_issue32_a_kept_query_reads_the_catalog_once_after_the_wal_listing(stores, monkeypatch):
    """`_kept` reads the catalog's version once, after the WAL listing (`Store.wal_signature`),
    and a checkpoint that registers the acknowledged rows and drops their WAL file right before
    the listing still leaves them in the next answer."""
    writer, reader = stores
    info = reader.catalog.trace(qos.TRACE)
    n = _count(reader)
    assert _count(reader) == n  # (the transaction is kept from here on)
    assert reader.wal_signature(info) == reader.cut(info).signature
    reads = []
    for name in ("version", "version_held"):
        read = getattr(reader.catalog, name)
        monkeypatch.setattr(reader.catalog, name, lambda read=read, name=name: reads.append(name) or read())
    assert _count(reader) == n
    assert reads == ["version_held"]  # (read without letting go of the interpreter's lock)
    monkeypatch.undo()

    extra = writer.sql(f"SELECT ts + 1 AS ts, producer, ul_delay FROM {qos.TRACE}.{qos.EVENT_TYPE} LIMIT 5")
    writer.flush()
    assert _count(reader) == n  # (views made at the checkpoint's version, nothing uncovered)
    assert _count(reader) == n
    writer.append(qos.TRACE, qos.EVENT_TYPE, extra)  # acknowledged before the next query begins
    signature = reader.wal_signature

    def checkpoint_then_list(i):
        writer.flush()  # covers the WAL file with the rows and drops it: the listing is as before
        return signature(i)

    monkeypatch.setattr(reader, "wal_signature", checkpoint_then_list)
    assert _count(reader) == n + extra.num_rows
    monkeypatch.undo()
    assert _count(reader) == n + extra.num_rows


def test_issue32_the_version_read_holding_the_interpreter_lock_sees_every_commit(stores):
    """`Catalog.version_held` (SQLite's C API through ctypes, one handle) gives what `version`
    gives after each of another store's commits, and a closed catalog refuses it as `version` does."""
    writer, reader = stores
    extra = writer.sql(f"SELECT ts + 1 AS ts, producer, ul_delay FROM {qos.TRACE}.{qos.EVENT_TYPE} LIMIT 3")
    seen = [reader.catalog.version_held()]
    assert reader.catalog._held._stmt is not None  # (the C API path, not the fallback)
    for _ in range(3):
        writer.append(qos.TRACE, qos.EVENT_TYPE, extra)
        writer.flush()  # a catalog transaction: the version moves
        seen.append(reader.catalog.version_held())
        assert seen[-1] == reader.catalog.version() == writer.catalog.version() > seen[-2]
    reader.close()
    with pytest.raises(Exception, match="closed"):
        reader.catalog.version_held()
