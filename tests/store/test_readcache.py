"""The read cache (store/readcache.py): a trace's segments decoded into a DuckDB file the views read
instead of their Parquet, giving the same answers; newer segments still come from Parquet; a cache
whose segments were merged or dropped is not used until rebuilt (after the compaction), and losing
it loses nothing."""

from __future__ import annotations

import shutil
import time

import pyarrow as pa

import tracehouse
from tracehouse.store import readcache
from tracehouse.workload import qos

CASES = [c for c in qos.CASES if c.name in ("Q1.1", "Q1.3", "Q2.2", "Q3.1", "Q4.4", "Q5.4")]


def answers(s) -> dict:
    out = {}
    for c in CASES:
        t = s.sql(qos.sql(c, "tracehouse"))
        out[c.name] = t.sort_by([("ts", "ascending"), ("producer", "ascending")])
    out["sums"] = s.sql(
        "SELECT customer_id, count(*) AS n, sum(ul_bytes) AS b, sum(mos) AS m "
        "FROM qos_reads.average_stats GROUP BY ALL ORDER BY 1"
    )
    return out


def test_the_cache_answers_as_the_segments_do_and_newer_rows_come_from_parquet(tmp_path):
    data = qos.dataset(0.02)
    with tracehouse.open(tmp_path / "s", fsync="off") as s:
        qos.tracehouse_load(s, data)  # builds the cache
        man = readcache.manifest(s.path, s.trace(qos.TRACE).id)
        assert man and man["types"][qos.EVENT_TYPE]["segments"]
        plan = s.sql("EXPLAIN SELECT * FROM qos_reads.average_stats").column(1)[0].as_py()
        assert "_rc_" in plan and "READ_PARQUET" not in plan.upper()
        cached = answers(s)
    shutil.rmtree(tmp_path / "s" / "traces" / "1" / "readcache")  # losing the cache loses nothing
    with tracehouse.open(tmp_path / "s", readonly=True) as s:
        assert "READ_PARQUET" in s.sql("EXPLAIN SELECT * FROM qos_reads.average_stats").column(1)[0].as_py().upper()
        for k, t in answers(s).items():
            assert t.equals(cached[k]), k
    with tracehouse.open(tmp_path / "s", fsync="off") as s:
        s.build_read_cache(qos.TRACE)
        extra = s.sql(
            "SELECT ts + 1 AS ts, producer, * EXCLUDE (ts, producer, seq, "
            + ", ".join(qos.ID_COLUMNS)
            + ") FROM qos_reads.average_stats WHERE customer_id = 7"
        )
        s.append(qos.TRACE, qos.EVENT_TYPE, extra)
        s.flush()
        n = s.sql(
            "SELECT count(*) AS n, count(DISTINCT customer_id) AS c FROM qos_reads.average_stats WHERE customer_id = 7"
        ).to_pylist()
        assert n == [{"n": 2 * extra.num_rows, "c": 1}]
        plan = s.sql("EXPLAIN SELECT * FROM qos_reads.average_stats").column(1)[0].as_py().upper()
        assert "_RC_" in plan and "READ_PARQUET" in plan  # the cache, and the new checkpoint's segment


def test_a_cache_of_merged_or_dropped_segments_is_not_used_and_is_rebuilt_after_compaction(tmp_path):
    data = qos.dataset(0.02)
    with tracehouse.open(tmp_path / "s", fsync="off") as s:
        qos.tracehouse_load(s, data)
        total = s.sql("SELECT count(*) FROM qos_reads.average_stats").column(0)[0].as_py()
        first = readcache.manifest(s.path, s.trace(qos.TRACE).id)["file"]
        more = s.sql(
            "SELECT ts + 7 AS ts, producer, * EXCLUDE (ts, producer, seq, "
            + ", ".join(qos.ID_COLUMNS)
            + ") FROM qos_reads.average_stats WHERE customer_id = 9"
        )
        s.append(qos.TRACE, qos.EVENT_TYPE, more)
        s.flush()
        s.compact(qos.TRACE)  # merges cached and new segments: the cache is built anew
        second = readcache.manifest(s.path, s.trace(qos.TRACE).id)
        assert second["file"] != first and not (s.path / "traces" / "1" / "readcache" / first).exists()
        assert set(second["types"][qos.EVENT_TYPE]["segments"]) == {x.id for x in s.segments_of(qos.TRACE)}
        assert s.sql("SELECT count(*) FROM qos_reads.average_stats").column(0)[0].as_py() == total + more.num_rows
        # retention drops every segment: the cache's are gone from the catalog, so it is not read
        s.set_retention(qos.TRACE, 1)
        assert s.sql("SELECT count(*) FROM qos_reads.average_stats").column(0)[0].as_py() == 0
        assert s.trace(qos.TRACE).event_count == 0


def test_a_trace_without_the_setting_has_no_cache(tmp_path):
    with tracehouse.open(tmp_path / "s", fsync="off") as s:
        from tracehouse import Column, EventType

        s.create_trace("t", "custom", event_types=[EventType("e", "instant", (Column("v", "int64", "", "v"),), "e")])
        s.append("t", "e", pa.table({"ts": [time.time_ns()], "producer": pa.array([0], pa.int32()), "v": [1]}))
        s.flush()
        s.compact("t")
        assert readcache.manifest(s.path, s.trace("t").id) is None
