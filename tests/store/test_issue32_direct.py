"""A type whose view is its read cache's table, column for column, is read from that table
(store/query.py `direct_sql`): the same answers as the view's, a query the rewrite would change the
meaning of is bound as written, and every write a store acknowledged before a query began is in
that query's answer while the writer appends, checkpoints and rebuilds the cache under the readers."""

from __future__ import annotations

import threading
import time

import pytest

import tracehouse
from tracehouse.store.query import direct_sql
from tracehouse.workload import qos

T = f"{qos.TRACE}.{qos.EVENT_TYPE}"
DIRECT = {(qos.TRACE, qos.EVENT_TYPE): "_rc_1_abc"}


@pytest.mark.parametrize(
    ("query", "want"),
    [
        (
            f"SELECT * FROM {T} s WHERE customer_id = 60",
            'SELECT * FROM "_rc_1_abc".average_stats s WHERE customer_id = 60',
        ),
        (
            f'SELECT 1 FROM "{qos.TRACE}" . "{qos.EVENT_TYPE.upper()}" JOIN {T} b USING (ts)',
            f'SELECT 1 FROM "_rc_1_abc" . "{qos.EVENT_TYPE.upper()}" JOIN "_rc_1_abc".average_stats b USING (ts)',
        ),
        # a string, a comment, a name of three parts (a catalog's; a column's) and another type: as written
        (f"SELECT '{T}' -- {T}\n FROM memory.{T}", None),
        (f"SELECT {T}.ts FROM x.y", None),
        (f"SELECT * FROM {qos.TRACE}.events", None),
    ],
)
def test_issue32_direct_sql_renames_the_two_part_name_of_a_cached_type_only(query, want):
    assert direct_sql(query, DIRECT) == (query if want is None else want)
    assert direct_sql(query, {}) is query


QUERIES = [
    *(qos.sql(c, "tracehouse") for c in qos.CASES if c.name in ("Q1.1", "Q3.1", "Q4.4")),
    # the type's name as the rows' qualifier (no alias), a self-join, a column of three parts
    f"SELECT average_stats.customer_id, count(*) AS n, sum(average_stats.mos) AS m FROM {T} GROUP BY 1 ORDER BY 1",
    f"SELECT a.ts, a.producer, b.ul_delay FROM {T} a JOIN {T} b USING (ts, producer) WHERE a.customer_id = 7",
    f"SELECT {T}.ts, '{T}' AS name FROM {T} WHERE customer_id = 3",
]


def _sorted(t):
    return t.sort_by([(n, "ascending") for n in t.column_names])


def test_issue32_a_cached_type_answers_from_its_table_as_its_segments_do(tmp_path):
    with tracehouse.open(tmp_path / "s", fsync="off") as s:
        qos.tracehouse_load(s, qos.dataset(0.02))
        eng = s.query_engine
        got = {q: _sorted(s.sql(q)) for q in QUERIES}
        assert set(eng._direct) == {(qos.TRACE, qos.EVENT_TYPE)}
        for q in QUERIES:
            with s.read_connection(q, keep_open=True):
                rel = eng.snapshot_relation()
                assert _sorted(rel.to_arrow_table()).equals(got[q]), q
                # the table, where naming it keeps the query's meaning; the view where it does not
                assert ("_rc_" in rel.sql_query()) == (f"{T}.ts" not in q), q
        s.set_metadata(qos.TRACE, {"read_cache": "off"})  # the Parquet segments
        for q in QUERIES:
            assert _sorted(s.sql(q)).equals(got[q]), q
        assert eng._direct == {}


COUNT = f"SELECT count(*) FROM {T} WHERE ul_delay >= 0"


def _count(store) -> int:
    with store.read_connection(COUNT, keep_open=True):
        return store.query_engine.snapshot_relation().fetchall()[0][0]


def test_issue32_readers_of_the_cache_table_see_every_acknowledged_write(tmp_path):
    writer = tracehouse.open(tmp_path / "s")  # (fsync=off writes no WAL: no reader elsewhere sees a tail)
    qos.tracehouse_load(writer, qos.dataset(0.01))
    reader = tracehouse.open(tmp_path / "s", readonly=True)  # as another process reads it (the WAL)
    try:
        extra = writer.sql(f"SELECT ts + 1 AS ts, producer, ul_delay FROM {T} LIMIT 7")
        acked = [_count(reader)]
        assert reader.query_engine._direct  # read from the table
        written = [acked[0]]
        done = threading.Event()
        errors: list = []
        answers = [0]
        direct = [0]

        def read():
            try:
                last = 0
                while not done.is_set():
                    before = acked[-1]
                    n = _count(reader)
                    after = written[-1]
                    assert before <= n <= after, (before, n, after)
                    assert n >= last, (last, n)
                    last = n
                    answers[0] += 1
                    direct[0] += bool(reader.query_engine._direct)
            except BaseException as e:  # noqa: BLE001 - asserted below
                errors.append(e)
                done.set()

        readers = [threading.Thread(target=read) for _ in range(4)]
        for t in readers:
            t.start()
        try:
            for i in range(24):
                if done.is_set():
                    break
                written.append(written[-1] + extra.num_rows)
                writer.append(qos.TRACE, qos.EVENT_TYPE, extra)  # in the WAL: the view is the table no more
                acked.append(written[-1])
                if i % 3 == 1:
                    writer.flush()  # a segment the cache lacks
                if i % 3 == 2:
                    writer.flush()
                    writer.build_read_cache(qos.TRACE)  # the table is the view again, in a new file
                seen = answers[0]
                while answers[0] < seen + 3 * len(readers) and not done.is_set():
                    time.sleep(0.001)
        finally:
            done.set()
            for t in readers:
                t.join(60)
        assert not errors, errors[0]
        assert direct[0] > 0
        assert _count(reader) == acked[-1] == acked[0] + 24 * extra.num_rows
    finally:
        reader.close()
        writer.close()
