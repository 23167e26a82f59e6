"""The same store queried by Apache Spark (local[2]) gives the answers DuckDB gives.

Every query runs on both engines over one store (or several) and the Arrow tables must be
equal, values and types: counts, filters, joins with producers, time-bucketed aggregates,
NULLs, strings, floats, timestamps, ordering, Q1-Q5 of seed 003 on a small QoS data set, the
pure-SQL analyses, several stores queried as one, and a store a writer process appends to
(and compacts) while Spark reads (Spark sees whole registered flushes, never part of one).

One SparkSession (the session fixture of conftest.py) serves every Spark test: starting the
JVM costs 10-30 s here. Run the group alone with `pytest -m spark`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import time

import numpy as np
import pyarrow as pa
import pytest

import tracehouse
from helpers.tables import same
from tracehouse import Column, EventType
from tracehouse.analysis import event_streams as ES
from tracehouse.analysis import statistics as ST
from tracehouse.bench.engines import qos_load, qos_queries, sorted_rows, tod_trace
from tracehouse.errors import BadInput, NotFound
from tracehouse.store.engines import StoreRef, open_engine
from tracehouse.workload import qos

pytestmark = pytest.mark.spark

if shutil.which("java") is None:  # `make setup` installs one (java-tool); say so when it could not
    pytest.skip(
        "the Spark engine needs Java 17+ (make setup installs openjdk-17-jre-headless)", allow_module_level=True
    )
pytest.importorskip("pyspark", reason="pyspark (the spark extra) is not installed: make setup installs it")

SCALE = 0.01  # QoS data set (qos.dataset): 556 runs of 10 to 6,000 rows, 20,320 rows
QOS = f'"{qos.TRACE}".{qos.EVENT_TYPE}'


def _mixed(store) -> None:
    """A trace with every column type, NULLs, a span type, and a parameter added after the
    first segment (that segment reads it as NULL)."""
    store.create_trace(
        "mixed",
        "mixfmt",
        event_types=[
            EventType(
                "call",
                "span",
                (
                    Column("fn", "string", "", "callee"),
                    Column("bytes", "int64", "B", ""),
                    Column("ok", "bool", "", ""),
                    Column("ratio", "float64", "", ""),
                ),
            ),
            EventType("mark", "instant", (Column("label", "string", "", ""),)),
        ],
        producers=[
            {"id": i, "parent": None, "kind": "thread", "name": f"t{i}", "attrs": {"cpu": i % 2}} for i in range(4)
        ],
        metadata={"purpose": "engine tests"},
    )
    rng = np.random.default_rng(16)
    n = 3000
    names = np.array(["read", "write", "open", "close", "stat"], dtype=object)
    nulls = rng.random(n) < 0.1
    store.append(
        "mixed",
        "call",
        pa.table(
            {
                "ts": pa.array(np.sort(rng.integers(0, 10**10, n))),
                "producer": pa.array(rng.integers(0, 4, n).astype(np.int32)),
                "dur": pa.array(rng.integers(0, 10**6, n)),
                "fn": pa.array(names[rng.integers(0, 5, n)].tolist(), mask=nulls),
                "bytes": pa.array(rng.integers(0, 1 << 20, n), mask=rng.random(n) < 0.05),
                "ok": pa.array(rng.random(n) < 0.7),
                "ratio": pa.array(np.round(rng.random(n) * 1024) / 1024),
            }
        ),
    )
    store.append(
        "mixed",
        "mark",
        pa.table(
            {
                "ts": pa.array(np.arange(0, 10**10, 10**8)),
                "producer": pa.array(np.zeros(100, np.int32)),
                "label": pa.array([f"m{i % 7}" for i in range(100)]),
            }
        ),
    )
    store.flush("mixed")
    store.add_event_type(
        "mixed",
        EventType("mark", "instant", (Column("label", "string", "", ""), Column("level", "int64", "", "added later"))),
    )
    store.append(
        "mixed",
        "mark",
        pa.table(
            {
                "ts": pa.array(np.arange(10**10, 2 * 10**10, 10**8)),
                "producer": pa.array(np.ones(100, np.int32)),
                "label": pa.array([f"m{i % 3}" for i in range(100)]),
                "level": pa.array(np.arange(100)),
            }
        ),
    )
    store.flush("mixed")
    # a trace owning its event types (line protocol's buckets)
    store.create_trace(
        "lp",
        "lineproto",
        own_types=True,
        event_types=[
            EventType("cpu", "instant", (Column("usage", "float64", "%", ""), Column("host", "string", "", "")))
        ],
    )
    store.append(
        "lp",
        "cpu",
        pa.table(
            {
                "ts": pa.array(np.arange(50) * 10**9),
                "producer": pa.array(np.zeros(50, np.int32)),
                "usage": pa.array(np.arange(50) / 4),
                "host": pa.array(["a", "b"] * 25),
            }
        ),
    )
    store.flush("lp")


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("spark") / "store"
    with tracehouse.open(path, fsync="off") as s:
        qos_load(s, scale=SCALE)
        tod_trace(s, "tod", 30_000)
        _mixed(s)
    return path


@pytest.fixture(scope="module")
def duck(store_dir):
    with tracehouse.open(store_dir, readonly=True) as s:
        yield s


@pytest.fixture(scope="module")
def sparkq(store_dir, spark):
    with open_engine(store_dir, "spark", spark=spark) as e:
        yield e


EQUIVALENT = [
    # counts and filters
    (f"SELECT count(*) AS n FROM {QOS}", True),
    ('SELECT type, count(*) AS n FROM "tod".events GROUP BY type ORDER BY type', True),
    ('SELECT count(*), count(fn), count(bytes), count(DISTINCT fn) FROM "mixed".call', True),
    ("SELECT * FROM \"mixed\".call WHERE fn = 'read' AND bytes > 1000 ORDER BY ts, producer, seq", True),
    ('SELECT * FROM "mixed".call WHERE fn IS NULL OR NOT ok', False),
    ('SELECT fn, ok, ratio FROM "mixed".call ORDER BY fn, ts LIMIT 50', True),  # NULLs sort last in both
    ('SELECT fn FROM "mixed".call ORDER BY fn DESC, ts LIMIT 20', True),
    ('SELECT label, level FROM "mixed".mark ORDER BY level NULLS FIRST, ts', True),  # old segment: NULL level
    ('SELECT * FROM "mixed".events ORDER BY ts, producer, seq, type', True),
    # joins with producers
    (
        'SELECT p.name, count(*) AS n, sum(c.bytes) AS b, avg(c.dur) AS mean FROM "mixed".call c '
        "JOIN th.producers p ON p.trace = 'mixed' AND p.id = c.producer GROUP BY p.name ORDER BY p.name",
        True,
    ),
    (
        "SELECT p.kind, json_extract_string(p.attrs, '$.cpu') AS cpu, count(*) AS n FROM \"tod\".events e "
        "LEFT JOIN th.producers p ON p.trace = 'tod' AND p.id = e.producer GROUP BY ALL",
        False,
    ),
    # time-bucketed aggregates
    (
        "SELECT ts // 1000000000 AS sec, type, count(*) AS n, min(ts) AS first, max(ts) AS last "
        'FROM "tod".events GROUP BY ALL ORDER BY sec, type',
        True,
    ),
    (
        "SELECT (ts - 5) * 100 // 10000000000 AS bucket, sum(dur) AS total, avg(ratio) AS r, sum(ratio) AS s "
        'FROM "mixed".call GROUP BY 1 ORDER BY 1',
        True,
    ),
    ('SELECT make_timestamp(ts // 1000) AS at, ts FROM "mixed".mark ORDER BY ts LIMIT 5', True),
    (f"SELECT to_timestamp(ts // 1000000000) AS at, count(*) AS n FROM {QOS} GROUP BY 1 ORDER BY 1 LIMIT 20", True),
    (
        f"SELECT producer, max(ul_delay) AS d, avg(rtt) AS rtt, sum(ul_bytes) AS b FROM {QOS} "
        "GROUP BY producer ORDER BY producer",
        True,
    ),
    # window functions and the catalog
    (
        'SELECT producer, ts, row_number() OVER (PARTITION BY producer ORDER BY ts, seq) AS k FROM "mixed".call '
        "QUALIFY k <= 3 ORDER BY producer, k",
        True,
    ),
    ("SELECT name, format, event_count, ts_min, ts_max FROM th.traces ORDER BY name", True),
    ("SELECT trace, event_type, sum(rows) AS rows FROM th.segments GROUP BY ALL ORDER BY ALL", True),
    ("SELECT format, name, kind, trace FROM th.event_types ORDER BY format, name, trace", True),
    ('SELECT host, count(*) AS n, avg(usage) AS u FROM "lp".cpu GROUP BY host ORDER BY host', True),
    ("SELECT * FROM th.metadata ORDER BY trace, key", True),
]


@pytest.mark.parametrize("query,ordered", EQUIVALENT, ids=[f"q{i}" for i in range(len(EQUIVALENT))])
def test_spark_answers_what_duckdb_answers(duck, sparkq, query, ordered):
    d = duck.sql(query)
    s = sparkq.sql(query)
    assert d.num_rows > 0, "a query that returns nothing proves little"
    same(d, s, ordered)


def test_qos_q1_to_q5_identical_with_the_generators_row_counts(duck, sparkq):
    # the row count each case must return, counted by DuckDB over the flat generated table
    # (schema 1), not over the store's layout the engines read
    expect = qos.expected_rows(qos.dataset(SCALE))
    queries = qos_queries()
    assert sorted(queries) == ["Q1.2", "Q2.3", "Q3.15", "Q4.2", "Q5.3"]
    for name, q in queries.items():
        expected = expect[name]
        d, s = duck.sql(q), sparkq.sql(q)
        assert d.num_rows == expected > 0, name
        same(sorted_rows(d), sorted_rows(s))
        assert d.num_columns >= 50  # whole rows: 50 columns (+ the 13 ids for the joined cases)


def test_params_are_bound_the_same(duck, sparkq):
    q = 'SELECT count(*) AS n, sum(ratio) AS r FROM "mixed".call WHERE fn = ? AND ratio < ? AND producer IN (?, ?)'
    params = ["read", 0.5, 1, 2]
    same(duck.sql(q, params), sparkq.sql(q, params))


def test_pure_sql_analyses_one_code_path(duck, sparkq):
    for by in ("type", "producer"):
        same(ST.stats(duck, "tod", by), ST.stats(sparkq, "tod", by))
    same(
        ST.stats(duck, "mixed", "state", state="fn", source_type="call"),
        ST.stats(sparkq, "mixed", "state", state="fn", source_type="call"),
    )
    for by in ("none", "type", "producer", "both"):
        index = ES.density(duck, "tod", 200, by=by)  # the index path: the reference
        same(index, ES.density_by_sql(duck, "tod", 200, by=by))
        same(index, ES.density_by_sql(sparkq, "tod", 200, by=by))
    kw = {"types": ["call"], "producers": [1, 3], "start": 10**9, "end": 9 * 10**9}
    same(ES.density(duck, "mixed", 50, by="both", **kw), ES.density_by_sql(sparkq, "mixed", 50, by="both", **kw))


def test_translated_sql_uses_spark_syntax(sparkq):
    sql = sparkq.translate('SELECT ts // 1000 AS us, arg_max(producer, ts) FROM "tod".events GROUP BY ALL')
    assert " DIV " in sql and "MAX_BY" in sql and '"tod"' not in sql


def test_bad_sql_and_unknown_traces_are_named(sparkq):
    with pytest.raises(BadInput, match="SQL error"):
        sparkq.sql('SELECT nosuchcolumn FROM "tod".events')
    with pytest.raises(NotFound, match="nosuch"):
        sparkq.sql('SELECT * FROM "nosuch".events')


# -- several stores ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_stores(tmp_path_factory):
    base = tmp_path_factory.mktemp("stores")
    for node, n in (("node1", 1000), ("node2", 1500)):
        with tracehouse.open(base / node, fsync="off") as s:
            tod_trace(s, "run", n, seed=n)  # the same name in both stores
            tod_trace(s, f"only-{node}", n // 2)
    return [StoreRef(base / "node1", "n1"), StoreRef(base / "node2", "n2")]


def test_several_stores_are_queried_as_one(two_stores, spark):
    queries = [
        ("SELECT store, name, event_count FROM th.traces ORDER BY store, name", True),
        ('SELECT count(*) AS n FROM "only-node1".events', True),
        ('SELECT count(*) AS n FROM "n2/only-node2".events', True),  # a qualified name works for a unique one too
        (
            "SELECT 'a' AS s, count(*) AS n FROM \"n1/run\".events UNION ALL SELECT 'b', count(*) FROM \"n2/run\".events",
            False,
        ),
        (
            'SELECT e.type, p.name, count(*) AS n FROM "n2/run".events e JOIN th.producers p '
            "ON p.trace = 'n2/run' AND p.id = e.producer GROUP BY ALL",
            False,
        ),
    ]
    with open_engine(two_stores, "duckdb") as d, open_engine(two_stores, "spark", spark=spark) as s:
        for q, ordered in queries:
            same(d.sql(q), s.sql(q), ordered)
        traces = d.sql("SELECT store, name FROM th.traces ORDER BY store, name").to_pylist()
        assert traces == [
            {"store": "n1", "name": "n1/run"},
            {"store": "n1", "name": "only-node1"},
            {"store": "n2", "name": "n2/run"},
            {"store": "n2", "name": "only-node2"},
        ]
        with tracehouse.open(two_stores[1].path, readonly=True) as one:  # each store's own answer
            same(
                one.sql('SELECT type, count(*) AS n FROM "run".events GROUP BY type ORDER BY type'),
                s.sql('SELECT type, count(*) AS n FROM "n2/run".events GROUP BY type ORDER BY type'),
            )
        for e in (d, s):
            with pytest.raises(BadInput, match='several stores.*"n1/run" or "n2/run"'):
                e.sql('SELECT count(*) FROM "run".events')


# -- while a writer appends ----------------------------------------------------------------------------

WRITER = textwrap.dedent("""
    import os, sys, time, numpy as np, pyarrow as pa, tracehouse
    from tracehouse import Column, EventType
    path, stop, most, rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    # small compaction knobs: segments are merged (and retired) while the reader runs
    with tracehouse.open(path, fsync="off", compact_min_segments=3, compact_min_fanin=3, flush_rows=10**9,
                         flush_interval_s=3600) as s:
        s.create_trace("live", "livefmt", event_types=[EventType("m", "instant", (Column("batch", "int64", "", ""),
                                                                               Column("v", "float64", "", "")))])
        print("ready", flush=True)
        for k in range(most):
            if os.path.exists(stop):
                break
            i = np.arange(rows)
            s.append("live", "m", pa.table({"ts": pa.array(k * rows + i), "producer": pa.array((i % 4).astype(np.int32)),
                                            "batch": pa.array(np.full(rows, k)), "v": pa.array(i / 8.0)}))
            s.flush("live")  # one registered flush per batch
            time.sleep(0.05)
""")


def test_spark_sees_whole_registered_flushes_while_a_writer_appends(tmp_path, spark):
    path, stop = tmp_path / "live", tmp_path / "stop"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(stop), "2000", "2000"], stdout=subprocess.PIPE, text=True
    )
    q = 'SELECT batch, count(*) AS n, sum(v) AS s, min(ts) AS lo, max(ts) AS hi FROM "live".m GROUP BY batch ORDER BY batch'
    seen = []
    try:
        assert proc.stdout.readline().strip() == "ready"
        with open_engine(path, "spark", spark=spark) as e:
            # Read until Spark has answered at four different points of the writing (the
            # writer keeps appending until told to stop; the deadline only bounds a hang).
            deadline = time.monotonic() + 300
            while (
                proc.poll() is None
                and len({t.num_rows for t in seen if t.num_rows}) < 4
                and time.monotonic() < deadline
            ):
                seen.append(e.sql(q))
        stop.touch()
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    with tracehouse.open(path, readonly=True) as s:
        final = s.sql(q)
        compacted = s.sql("SELECT max(level) AS l FROM th.segments").column(0)[0].as_py()
    assert compacted >= 1, "the writer compacted while Spark read"
    assert len({t.num_rows for t in seen if t.num_rows}) >= 4, "Spark answered at several points of the writing"
    assert final.num_rows > max(t.num_rows for t in seen)
    for t in seen:
        k = t.num_rows
        # a prefix of whole flushes: batches 0..k-1, each complete, nothing counted twice
        assert t.column("batch").to_pylist() == list(range(k))
        same(t, final.slice(0, k))


def _by_group(h) -> dict:
    return {g: h.counts[i].tolist() for i, g in enumerate(h.groups) if h.counts[i].any()}


@pytest.mark.parametrize(
    "kw",
    [
        {"kind": "hist", "k": 0, "unit": "ns"},
        {"kind": "hist", "k": 2, "unit": "us"},
        {"kind": "lhist", "min": 0, "max": 1000, "step": 100, "unit": "us"},
    ],
    ids=["hist-k0", "hist-k2-us", "lhist"],
)
def test_sql_histograms_count_what_the_rust_core_counts(duck, sparkq, kw):
    from tracehouse.analysis import histograms as H

    for value, group in (("dur", "none"), ("bytes", "producer"), ("dur", "fn")):
        vals, codes, names, _ = H.type_values(duck, "mixed", "call", value, group=group)
        hk = {k: v for k, v in kw.items() if k != "kind"}
        ref = H.histogram(vals, kind=kw["kind"], groups=codes, group_names=names, below=5000, **hk)
        for engine in (duck, sparkq):
            h = H.type_histogram_sql(engine, "mixed", "call", value, group=group, below=5000, **kw)
            assert _by_group(h) == _by_group(ref), (value, group, engine)
            assert {g: b["below"] for g, b in h.below.items()} == {g: b["below"] for g, b in ref.below.items()}
            assert (
                h.text()
                == H.Histogram(
                    ref.kind,
                    ref.params,
                    ref.unit,
                    h.groups,
                    np.array([ref.counts[ref.groups.index(g)] for g in h.groups]),
                    h.name,
                ).text()
            )


def test_cli_says_which_engine_answered(store_dir, spark, capsys):
    from tracehouse.cli import main

    q = 'SELECT type, count(*) AS n FROM "tod".events GROUP BY type ORDER BY type'
    assert main(["--store", str(store_dir), "query", q, "--format", "csv"]) == 0
    duck_out = capsys.readouterr()
    assert main(["--store", str(store_dir), "query", q, "--format", "csv", "--engine", "spark"]) == 0
    spark_out = capsys.readouterr()
    assert spark_out.out == duck_out.out and spark_out.out.count("\n") > 2
    assert "answered by spark local[2]" in spark_out.err
    assert (
        main(["--store", str(store_dir), "analyze", "stats", "tod", "--by", "producer", "--engine", "spark", "--json"])
        == 0
    )
    st = capsys.readouterr()
    assert main(["--store", str(store_dir), "analyze", "stats", "tod", "--by", "producer", "--json"]) == 0
    assert capsys.readouterr().out.split('"title"')[0] == st.out.split('"title"')[0]
    assert "spark local[2]" in st.out
    assert (
        main(
            [
                "--store",
                str(store_dir),
                "analyze",
                "hist",
                "mixed",
                "--type",
                "call",
                "--by",
                "producer",
                "--engine",
                "spark",
            ]
        )
        == 0
    )
    h = capsys.readouterr()
    assert "@usecs[" in h.out and "answered by spark" in h.err
