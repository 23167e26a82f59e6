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


def test_issue32_cache_columns_are_stored_plain_or_run_length_and_answer_as_the_segments(tmp_path):
    """The cache leaves out DuckDB's ALP, ALPRD and bit-packing (readcache.DISABLED_COMPRESSION): a
    filter keeping a few rows of each vector fetches those rows instead of decoding the vectors.
    The filters the seed asks on result columns, whose kept rows are spread over every vector
    (`ul_dupl < 1`: one row per run), answer the same rows from the cache as from Parquet."""
    import duckdb

    data = qos.dataset(0.02)
    cases = [c for c in qos.CASES if c.name in ("Q2.1", "Q3.1", "Q3.4", "Q5.4", "Q5.7")]
    with tracehouse.open(tmp_path / "s", fsync="off") as s:
        qos.tracehouse_load(s, data)
        man = readcache.manifest(s.path, s.trace(qos.TRACE).id)
        cached = {c.name: s.sql(qos.sql(c, "tracehouse")).sort_by([("ts", "ascending")]) for c in cases}
        s.set_metadata(qos.TRACE, {"read_cache": "off"})  # the Parquet segments
        for c in cases:
            t = s.sql(qos.sql(c, "tracehouse")).sort_by([("ts", "ascending")])
            assert t.num_rows > 0 and t.equals(cached[c.name]), c.name
    con = duckdb.connect(man["path"], read_only=True)
    table = man["types"][qos.EVENT_TYPE]["table"]
    used = dict(
        con.sql(
            f"SELECT column_name, string_agg(DISTINCT compression, ',') FROM pragma_storage_info('{table}') "
            "WHERE segment_type <> 'VALIDITY' GROUP BY ALL"
        ).fetchall()
    )
    con.close()
    banned = {m.lower() for m in readcache.DISABLED_COMPRESSION.split(",")}
    assert len(used) == 64
    assert not [c for c, comp in used.items() if banned & set(comp.lower().split(","))], used
    assert "Uncompressed" in used["ul_dupl"] and "Uncompressed" in used["mos"]
    assert set(used["customer_id"].split(",")) <= {"RLE", "Constant"}  # a tag: constant per series


def test_issue32_tag_filters_answer_the_same_from_the_cache_with_null_and_missing_tags(tmp_path):
    """Tags in the cache are materialized per row: a series lacking a key, a series of another
    kind (no tags at all) and a series with no row read NULL and are filtered as from Parquet."""
    from tracehouse import Column, EventType

    producers = [
        {"id": 1, "parent": None, "kind": "tags", "name": "a", "attrs": {"host": "h1", "rack": "r1"}},
        {"id": 2, "parent": None, "kind": "tags", "name": "b", "attrs": {"host": "h2"}},  # no rack
        {"id": 3, "parent": None, "kind": "tags", "name": "c", "attrs": {"host": "h1", "rack": None}},
        {"id": 4, "parent": None, "kind": "thread", "name": "d", "attrs": {"tid": 9}},  # not a tag set
        {"id": 5, "parent": None, "kind": "tags", "name": "e", "attrs": {"host": "h5", "rack": "r5"}},  # no rows
    ]
    n = 3000
    with tracehouse.open(tmp_path / "s", fsync="off") as s:
        s.create_trace(
            "b",
            "custom",
            event_types=[EventType("cpu", "instant", (Column("v", "float64", "", "a value"),), "a sample")],
            producers=producers,
            metadata={"segment_order": "producer"},
        )
        s.append(
            "b",
            "cpu",
            pa.table(
                {
                    "ts": pa.array([10 * i for i in range(n)], pa.int64()),
                    "producer": pa.array([1 + i % 4 for i in range(n)], pa.int32()),
                    "v": [float(i % 97) for i in range(n)],
                }
            ),
        )
        s.flush()
        queries = [
            "SELECT * FROM b.cpu WHERE host = 'h1'",
            "SELECT * FROM b.cpu WHERE rack IS NULL",
            "SELECT * FROM b.cpu WHERE rack <> 'r1'",  # NULL <> 'r1' is NULL: no row
            "SELECT * FROM b.cpu WHERE rack IS DISTINCT FROM 'r1'",
            "SELECT * FROM b.cpu WHERE host IS NULL AND v < 10",
            "SELECT * FROM b.cpu WHERE host IN ('h2', 'h5') OR rack = 'r1'",
            "SELECT host, rack, count(*) AS n, sum(v) AS v FROM b.cpu GROUP BY ALL",
        ]

        def answers():
            return [s.sql(q).sort_by([(c, "ascending") for c in s.sql(q).column_names]) for q in queries]

        plain = answers()
        assert [t.num_rows for t in plain[:5]] == [1500, 2250, 0, 2250, 77]
        s.build_read_cache("b")
        assert "_rc_" in s.sql("EXPLAIN SELECT * FROM b.cpu").column(1)[0].as_py()
        for q, want, got in zip(queries, plain, answers(), strict=True):
            assert got.equals(want), q
