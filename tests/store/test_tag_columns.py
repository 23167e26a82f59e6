"""Tags as columns: every type view of a line-protocol bucket carries each tag key as a column
beside `producer` (every key of the bucket; NULL where a series lacks it), and a trace with `tag_columns=attrs` (seed 003's
QoS measurements) its producers' typed attributes; filters on them prune by producer."""

from __future__ import annotations

import json
import re
import urllib.parse

import pyarrow as pa
import pytest

import tracehouse
from helpers.server import Server
from tracehouse import Column, EventType
from tracehouse.store.engines import open_engine
from tracehouse.workload import qos

TSBS_LINES = "\n".join(
    f"cpu,hostname=host_{h},region=eu-{h % 2},rack={h * 7} usage_user={10 * h + i}i,usage_system={i}i "
    f"{1_451_606_400 + 10 * i}"
    for h in range(4)
    for i in range(6)
)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("tags") / "store", "--quiet")
    assert s.write(TSBS_LINES, bucket="benchmark", precision="s")[0] == 204
    # a series without `rack`, a measurement whose field is named like a tag, a tag named `ts`
    assert (
        s.write(
            "cpu,hostname=host_9,region=us usage_user=1i,usage_system=2i 1451606400\n"
            "disk,hostname=host_0,ts=x region=5i 1451606400\n",
            bucket="benchmark",
            precision="s",
        )[0]
        == 204
    )
    yield s
    assert s.stop() == 0


def test_issue32_tags_are_columns_of_the_measurement_view(served):
    # The issue's query: it failed with `Referenced column "hostname" not found`.
    rows = served.sql('SELECT hostname, max(usage_user) FROM "benchmark".cpu GROUP BY hostname ORDER BY hostname')
    assert rows == [["host_0", 5], ["host_1", 15], ["host_2", 25], ["host_3", 35], ["host_9", 1]]
    cols = served.sql('SELECT column_name FROM (DESCRIBE "benchmark".cpu)')
    # every tag key of the bucket, in key order (`ts` is disk's tag, renamed: a column of every type)
    assert [c[0] for c in cols] == [
        "ts",
        "producer",
        "hostname",
        "rack",
        "region",
        "ts_tag",
        "seq",
        "usage_user",
        "usage_system",
    ]


def test_a_series_without_a_key_reads_null_and_filters_see_it(served):
    assert served.sql("SELECT rack FROM \"benchmark\".cpu WHERE hostname = 'host_9'") == [[None]]
    assert served.sql('SELECT count(*) FROM "benchmark".cpu WHERE rack IS NULL') == [[1]]
    assert served.sql("SELECT count(*) FROM \"benchmark\".cpu WHERE region = 'eu-1' AND rack = '21'") == [[6]]


def test_a_tag_named_like_a_column_of_the_type_gets_a_tag_suffix(served):
    rows = served.sql('SELECT region, region_tag, ts_tag, hostname FROM "benchmark".disk')
    assert rows == [[5, None, "x", "host_0"]]  # the field keeps `region`; disk's series has no region tag


def test_tags_follow_new_series_written_later(served):
    assert (
        served.write("cpu,hostname=host_new,zone=z1 usage_user=7i 1451606500", bucket="benchmark", precision="s")[0]
        == 204
    )
    assert served.sql("SELECT zone, usage_user FROM \"benchmark\".cpu WHERE hostname = 'host_new'") == [["z1", 7]]


def qos_store(path, scale: float = 0.2):
    s = tracehouse.open(path, fsync="off")
    qos.tracehouse_load(s, qos.dataset(scale))
    s.compact()
    return s


def test_qos_measurement_ids_are_typed_columns_and_prune_row_groups(tmp_path):
    with qos_store(tmp_path / "s") as s:
        t = s.sql(
            "SELECT customer_id, measurement_start_time, count(*) AS n FROM qos_reads.average_stats "
            "WHERE customer_id IN (1, 60) GROUP BY ALL ORDER BY 1"
        )
        assert t.schema.field("customer_id").type == pa.int64()
        assert t.schema.field("measurement_start_time").type == pa.float64()
        assert t.column("n").to_pylist() == [120_000, 200]
        # Same rows as the seed's schema 1 over the data set itself.
        for case in [c for c in qos.CASES if c.query in (1, 4)]:
            got = s.sql(qos.sql(case, "tracehouse")).num_rows
            assert got == round(case.rows * 0.2) or case.query == 4, case
        s.set_metadata(qos.TRACE, {"read_cache": "off"})  # the Parquet segments, not the read cache
        plan = (
            s.sql("EXPLAIN ANALYZE SELECT * FROM qos_reads.average_stats WHERE customer_id = 60").column(1)[0].as_py()
        )
        # (the Parquet scan's figures, not the small tag table's, whose box may come first)
        counts = [(int(a), int(b)) for a, b in re.findall(r"Row Groups Scanned: (\d+) / (\d+)", plan)]
        scanned, total = max(counts, key=lambda c: c[1])
        assert scanned == 1 and total > 4, plan


def test_without_tag_columns_a_trace_keeps_its_columns(tmp_path):
    with tracehouse.open(tmp_path / "s") as s:
        s.create_trace(
            "plain",
            "custom",
            event_types=[EventType("e", "instant", (Column("v", "int64", "", "a value"),), "an event")],
            producers=[{"id": 0, "parent": None, "kind": "thread", "name": "t", "attrs": {"tid": 5}}],
        )
        s.append("plain", "e", pa.table({"ts": [1], "producer": pa.array([0], pa.int32()), "v": [3]}))
        s.flush()
        assert s.sql("SELECT * FROM plain.e").column_names == ["ts", "producer", "seq", "v"]
        s.set_metadata("plain", {"tag_columns": "attrs"})
        assert s.sql("SELECT tid, v FROM plain.e").to_pylist() == [{"tid": 5, "v": 3}]


def test_several_stores_engine_carries_the_same_tag_columns(tmp_path):
    for name in ("a", "b"):
        with qos_store(tmp_path / name, scale=0.01) as s:
            single = s.sql("SELECT * FROM qos_reads.average_stats WHERE customer_id = 3 ORDER BY ts")
    with open_engine([tmp_path / "a", tmp_path / "b"], "duckdb") as e:
        got = e.sql('SELECT * FROM "a/qos_reads".average_stats WHERE customer_id = 3 ORDER BY ts')
    assert got.column_names == single.column_names and got.num_rows == single.num_rows == 864


def test_a_tag_named_producer_or_like_the_tag_table_columns_reads_back(served):
    # `producer` is the join key of the tags to the rows and `t0` a column name the tag table
    # could have used: both are ordinary tag keys to a writer (the view failed to convert
    # 'alpha' to the producer id).
    lines = "m,producer=alpha,t0=x,host=h1 v=1i 1451606400\nm,host=h2 v=2i 1451606401"
    assert served.write(lines, bucket="names", precision="s")[0] == 204
    rows = served.sql('SELECT producer_tag, t0, host, v FROM "names".m ORDER BY ts')
    assert rows == [["alpha", "x", "h1", 1], [None, None, "h2", 2]]
    status, _, body = served.request(
        "GET", "/query?db=names&q=" + urllib.parse.quote("SELECT sum(v) FROM m GROUP BY producer")
    )
    assert status == 200
    series = json.loads(body)["results"][0]["series"]
    assert [(s["tags"], s["values"][0][1]) for s in series] == [({"producer": ""}, 2), ({"producer": "alpha"}, 1)]
