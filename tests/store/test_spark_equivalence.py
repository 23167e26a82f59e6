"""The Spark engine answers what DuckDB answers, or refuses: never a different answer.

An equivalence suite of queries written as a user of the SQL would write them (joins, windows,
QUALIFY, GROUP BY ALL / ROLLUP, decimals, NULLs, epoch-nanosecond timestamps, string functions,
quantiles, two traces, two stores), each run on both engines over the same small store and
compared value for value and type for type; the constructs whose translation would change the
meaning are refused with the construct named; Spark's own errors come out as tracehouse's
(exit 2, no stack trace, the JVM's output kept off the terminal); a store `url` Spark cannot
read is tracehouse's error; `--conf` and `spark-defaults.conf` reach the session.

Small data (a few thousand rows) and the one session of conftest.py keep this under a minute
of CI beside the JVM's start.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

import tracehouse
from helpers.tables import same
from tracehouse import Column, EventType
from tracehouse.errors import BadInput, NotFound
from tracehouse.store.engines import StoreRef, open_engine

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_123_456_789  # epoch ns: sums of a few of these overflow BIGINT


def _io(store, name: str, n: int, seed: int) -> None:
    """Syscall-like spans at epoch-ns times with NULL names and NULL fds, marks, 4 threads."""
    store.create_trace(
        name,
        "sys",
        event_types=[
            EventType(
                "call",
                "span",
                (
                    Column("name", "string", "", "syscall"),
                    Column("fd", "int64", "", "fd"),
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
    )
    rng = np.random.default_rng(seed)
    names = np.array(["read", "write", "openat", "close", "fstat", "Read"], dtype=object)
    ts = T0 + np.sort(rng.integers(0, 5 * 10**9, n))  # five seconds
    store.append(
        name,
        "call",
        pa.table(
            {
                "ts": pa.array(ts),
                "producer": pa.array(rng.integers(0, 4, n).astype(np.int32)),
                "dur": pa.array(rng.integers(0, 2_000_000, n)),
                "name": pa.array(names[rng.integers(0, len(names), n)].tolist(), mask=rng.random(n) < 0.08),
                "fd": pa.array(rng.integers(-1, 40, n), mask=rng.random(n) < 0.15),
                "bytes": pa.array(rng.integers(0, 1 << 16, n), mask=rng.random(n) < 0.05),
                "ok": pa.array(rng.random(n) < 0.8),
                "ratio": pa.array(np.round(rng.random(n) * 256) / 256),
            }
        ),
    )
    m = 40
    store.append(
        name,
        "mark",
        pa.table(
            {
                "ts": pa.array(T0 + np.arange(m) * 123_456_789),
                "producer": pa.array((np.arange(m) % 2).astype(np.int32)),
                "label": pa.array([f"phase {i % 5}" for i in range(m)]),
            }
        ),
    )
    store.flush(name)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    base = tmp_path_factory.mktemp("equiv")
    with tracehouse.open(base / "a", fsync="off") as s:
        _io(s, "io", 3000, 29)
        _io(s, "io2", 800, 30)
    with tracehouse.open(base / "b", fsync="off") as s:
        _io(s, "run", 500, 31)
    return base


@pytest.fixture(scope="module")
def duck(stores):
    with open_engine(stores / "a", "duckdb") as e:
        yield e


@pytest.fixture(scope="module")
def sparkq(stores, spark):
    with open_engine(stores / "a", "spark", spark=spark) as e:
        yield e


C = '"io".call'
J = "JOIN th.producers p ON p.trace = 'io' AND p.id = c.producer"
EQUIVALENT = [
    # the five that crashed or differed: sums over epoch ns, concat with a NULL BIGINT, boundaries crossed,
    # quantiles, fractional seconds
    (f"SELECT sum(ts) AS s, sum(dur) AS d, sum(fd) AS f FROM {C}", True),
    (f"SELECT producer, sum(ts) AS s FROM {C} GROUP BY producer ORDER BY producer", True),
    (f"SELECT concat(name, ':', fd) AS k, ts FROM {C} ORDER BY ts, producer, seq LIMIT 200", True),
    (f"SELECT concat(name, '#', producer, '/', ok) AS k, count(*) AS n FROM {C} GROUP BY ALL", False),
    (
        f"SELECT datediff('millisecond', to_timestamp(ts / 1e9), to_timestamp((ts + dur) / 1e9)) AS ms, ts FROM {C} "
        "ORDER BY ts, producer, seq",
        True,
    ),
    (
        f"SELECT date_diff('second', to_timestamp(ts / 1e9), to_timestamp((ts + dur * 500) / 1e9)) AS s, "
        f"date_diff('minute', to_timestamp(ts / 1e9), to_timestamp((ts + dur * 40000) / 1e9)) AS m, ts FROM {C} "
        "ORDER BY ts, producer, seq",
        True,
    ),
    (
        f"SELECT date_diff('hour', make_timestamp(ts // 1000), make_timestamp(ts // 1000 + dur * 3000)) AS h, "
        f"date_diff('day', make_timestamp(ts // 1000), make_timestamp(ts // 1000 + dur * 100000)) AS d, "
        f"date_diff('week', make_timestamp(ts // 1000), make_timestamp(ts // 1000 + dur * 800000)) AS w FROM {C} "
        "ORDER BY ts, producer, seq",
        True,
    ),
    (
        f"SELECT date_diff('month', make_timestamp(ts // 1000), make_timestamp(ts // 1000 + dur * 4000000)) AS mo, "
        f"date_diff('year', make_timestamp(ts // 1000), make_timestamp(ts // 1000 + dur * 40000000)) AS y FROM {C} "
        "ORDER BY ts, producer, seq",
        True,
    ),
    (
        f"SELECT quantile_cont(dur, 0.5) AS p50, quantile_cont(dur, 0.9) AS p90, quantile_disc(dur, 0.5) AS d50, "
        f"quantile_disc(dur, 0.99) AS d99, median(bytes) AS m FROM {C}",
        True,
    ),
    (
        f"SELECT producer, quantile_disc(ts, 0.25) AS q1, quantile(dur, 0.75) AS q3, "
        f"percentile_cont(0.1) WITHIN GROUP (ORDER BY dur) AS p10 FROM {C} GROUP BY producer ORDER BY producer",
        True,
    ),
    (
        f"SELECT name, percentile_disc(0.5) WITHIN GROUP (ORDER BY bytes DESC) AS p FROM {C} GROUP BY name ORDER BY name",
        True,
    ),
    (f"SELECT to_timestamp(ts / 1e9) AS at, ts FROM {C} ORDER BY ts LIMIT 100", True),
    (f"SELECT to_timestamp(ts / 1000000000.0) AS at FROM {C} ORDER BY ts DESC LIMIT 20", True),
    # counts, filters, NULLs
    (f"SELECT count(*) AS n, count(name) AS names, count(fd) AS fds, count(DISTINCT name) AS dn FROM {C}", True),
    (f"SELECT * FROM {C} WHERE fd IS NULL AND name IS NOT NULL ORDER BY ts, producer, seq", True),
    (f"SELECT name, fd FROM {C} WHERE fd IN (0, 1, 2) OR name IS NULL ORDER BY ts, producer, seq", True),
    (
        f"SELECT coalesce(name, '?') AS n, coalesce(fd, -99) AS f, nullif(fd, -1) AS g FROM {C} ORDER BY ts, seq LIMIT 300",
        True,
    ),
    (f"SELECT name, fd FROM {C} ORDER BY name NULLS FIRST, fd DESC NULLS LAST, ts LIMIT 100", True),
    (f"SELECT name, count(*) AS n FROM {C} WHERE fd IS DISTINCT FROM 3 GROUP BY name ORDER BY name", True),
    (
        f"SELECT count(*) FILTER (WHERE ok) AS good, count(*) FILTER (WHERE NOT ok) AS bad, "
        f"sum(bytes) FILTER (WHERE name = 'read') AS rb FROM {C}",
        True,
    ),
    (
        f"SELECT CASE WHEN fd < 0 THEN 'bad' WHEN fd < 3 THEN 'std' WHEN fd IS NULL THEN 'none' ELSE 'file' END AS k, "
        f"count(*) AS n FROM {C} GROUP BY 1",
        False,
    ),
    # aggregates, GROUP BY ALL, ROLLUP, HAVING
    (
        f"SELECT name, producer, count(*) AS n, sum(bytes) AS b, min(ts) AS lo, max(ts) AS hi FROM {C} GROUP BY ALL",
        False,
    ),
    (f"SELECT name, producer, count(*) AS n FROM {C} GROUP BY ROLLUP (name, producer) ORDER BY name, producer", True),
    (f"SELECT name, count(*) AS n FROM {C} GROUP BY name HAVING count(*) > 400 ORDER BY n DESC, name", True),
    (f"SELECT avg(dur) AS a, avg(ts) AS t, avg(producer) AS p, avg(ratio) AS r FROM {C}", True),
    (f"SELECT producer, avg(dur) AS a, avg(ts) AS t FROM {C} GROUP BY producer ORDER BY producer", True),
    (
        f"SELECT min(ratio) AS lo, max(ratio) AS hi, sum(ratio) AS s, bool_and(ok) AS all_ok, bool_or(ok) AS any_ok, "
        f"count_if(ok) AS n_ok FROM {C}",
        True,
    ),
    (
        f"SELECT arg_max(name, dur) AS longest, arg_min(producer, ts) AS first_thread, max_by(fd, bytes) AS f FROM {C} "
        "WHERE name IS NOT NULL AND bytes IS NOT NULL",
        True,
    ),
    # decimals
    (
        f"SELECT CAST(ratio AS DECIMAL(10, 4)) AS d, CAST(dur AS DECIMAL(18, 3)) / 1000 AS us FROM {C} "
        "ORDER BY ts LIMIT 200",
        True,
    ),
    (f"SELECT sum(CAST(bytes AS DECIMAL(18, 2))) AS s, avg(CAST(ratio AS DECIMAL(6, 3))) AS a FROM {C}", True),
    (f"SELECT CAST(dur AS DECIMAL(10, 1)) * CAST(ratio AS DECIMAL(5, 3)) AS x FROM {C} ORDER BY ts LIMIT 100", True),
    (
        f"SELECT CAST(ratio * 10 AS INTEGER) AS r10, CAST(CAST(ratio AS DECIMAL(6, 3)) * 10 AS BIGINT) AS d10, "
        f"round(ratio, 2) AS r2 FROM {C} ORDER BY ts LIMIT 300",
        True,
    ),
    (f"SELECT dur / 1000 AS us, dur // 1000 AS us_int, dur % 7 AS m FROM {C} ORDER BY ts LIMIT 100", True),
    # timestamps
    (f"SELECT make_timestamp(ts // 1000) AS at, epoch_ms(ts // 1000000) AS ms FROM {C} ORDER BY ts LIMIT 50", True),
    (
        f"SELECT date_trunc('second', make_timestamp(ts // 1000)) AS sec, count(*) AS n FROM {C} GROUP BY 1 ORDER BY 1",
        True,
    ),
    (
        f"SELECT extract(second FROM make_timestamp(ts // 1000)) AS s, count(*) AS n FROM {C} GROUP BY 1 ORDER BY 1",
        True,
    ),
    (
        f"SELECT date_part('millisecond', make_timestamp(ts // 1000)) AS ms, extract(microsecond FROM "
        f"make_timestamp(ts // 1000)) AS us, extract(hour FROM make_timestamp(ts // 1000)) AS h FROM {C} ORDER BY ts LIMIT 200",
        True,
    ),
    (
        f"SELECT strftime(make_timestamp(ts // 1000), '%Y-%m-%d %H:%M:%S') AS t, count(*) AS n FROM {C} GROUP BY 1 "
        "ORDER BY 1",
        True,
    ),
    (f"SELECT (ts - {T0}) // 1000000000 AS sec, count(*) AS n, sum(dur) AS d FROM {C} GROUP BY ALL ORDER BY ALL", True),
    # string functions
    (
        f"SELECT upper(name) AS u, lower(name) AS l, length(name) AS n, strlen(name) AS b, reverse(name) AS r FROM {C} "
        "ORDER BY ts LIMIT 100",
        True,
    ),
    (
        f"SELECT substr(name, 2, 3) AS s, left(name, 2) AS l, right(name, 2) AS r, lpad(name, 8, '.') AS p, "
        f"repeat(name, 2) AS rr FROM {C} ORDER BY ts LIMIT 100",
        True,
    ),
    (
        f"SELECT name, starts_with(name, 'r') AS sw, ends_with(name, 'e') AS ew, contains(name, 'ea') AS c, "
        f"strpos(name, 'a') AS pos FROM {C} ORDER BY ts LIMIT 100",
        True,
    ),
    (
        f"SELECT name, name LIKE '%ea%' AS l, name ILIKE 'read' AS il, regexp_matches(name, '^[rw]') AS rm, "
        f"regexp_extract(name, '([a-z])([a-z])', 2) AS x FROM {C} ORDER BY ts LIMIT 100",
        True,
    ),
    (
        f"SELECT replace(name, 'e', 'E') AS r, regexp_replace(name, '[aeiou]', '_', 'g') AS rr, "
        f"split_part(label, ' ', 2) AS part, trim('  ' || label || ' ') AS t FROM {C} c JOIN \"io\".mark m "
        "ON m.producer = c.producer AND m.ts BETWEEN c.ts - 500000000 AND c.ts ORDER BY c.ts, c.seq, m.ts LIMIT 200",
        True,
    ),
    (f"SELECT name || '@' || producer AS k, md5(name) AS h, ascii(name) AS a FROM {C} ORDER BY ts LIMIT 100", True),
    (
        f"SELECT CAST(fd AS VARCHAR) AS f, CAST(ok AS VARCHAR) AS o, CAST(CAST(ratio AS DECIMAL(6, 3)) AS VARCHAR) AS r "
        f"FROM {C} ORDER BY ts LIMIT 100",
        True,
    ),
    # joins
    (f"SELECT p.name AS thread, count(*) AS n, sum(c.bytes) AS b FROM {C} c {J} GROUP BY p.name ORDER BY p.name", True),
    (
        f"SELECT p.kind, json_extract_string(p.attrs, '$.cpu') AS cpu, count(*) AS n FROM {C} c LEFT {J} GROUP BY ALL",
        False,
    ),
    (f'SELECT c.ts, m.label FROM {C} c LEFT JOIN "io".mark m ON m.ts = c.ts ORDER BY c.ts, c.seq LIMIT 50', True),
    (
        f"SELECT a.name, b.name AS next_name FROM {C} a JOIN {C} b ON b.producer = a.producer AND b.seq = a.seq + 1 "
        "ORDER BY a.producer, a.seq LIMIT 200",
        True,
    ),
    (
        f"SELECT name, count(*) AS n FROM {C} WHERE producer IN (SELECT id FROM th.producers WHERE name IN ('t1', 't3')) "
        "GROUP BY name ORDER BY name",
        True,
    ),
    (
        f'SELECT count(*) AS n FROM {C} c WHERE EXISTS (SELECT 1 FROM "io".mark m WHERE m.producer = c.producer '
        "AND m.ts < c.ts)",
        True,
    ),
    # windows and QUALIFY
    (
        f"SELECT producer, ts, row_number() OVER (PARTITION BY producer ORDER BY ts, seq) AS k FROM {C} "
        "QUALIFY k <= 3 ORDER BY producer, k",
        True,
    ),
    (
        f"SELECT producer, ts, dur, sum(dur) OVER (PARTITION BY producer ORDER BY ts, seq ROWS BETWEEN 2 PRECEDING AND "
        f"CURRENT ROW) AS run FROM {C} ORDER BY producer, ts, seq",
        True,
    ),
    (
        f"SELECT producer, ts, ts - lag(ts) OVER (PARTITION BY producer ORDER BY ts, seq) AS gap, "
        f"lead(name) OVER (PARTITION BY producer ORDER BY ts, seq) AS nxt FROM {C} ORDER BY producer, ts, seq",
        True,
    ),
    (
        f"SELECT name, dur, rank() OVER (PARTITION BY name ORDER BY dur DESC) AS r, "
        f"dense_rank() OVER (ORDER BY producer) AS d FROM {C} QUALIFY r <= 2 ORDER BY name, r, dur",
        True,
    ),
    (
        f"SELECT producer, sum(ts) OVER (PARTITION BY producer) AS s, avg(dur) OVER (PARTITION BY producer) AS a "
        f"FROM {C} QUALIFY row_number() OVER (PARTITION BY producer ORDER BY ts, seq) = 1 ORDER BY producer",
        True,
    ),
    (
        f"SELECT ts, ntile(4) OVER (ORDER BY dur, ts, seq) AS q, first_value(name) OVER (PARTITION BY producer "
        f"ORDER BY ts, seq) AS f FROM {C} ORDER BY ts, seq LIMIT 300",
        True,
    ),
    # CTEs, unions, subqueries, set operations
    (
        f"WITH big AS (SELECT * FROM {C} WHERE dur > 1500000) SELECT name, count(*) AS n FROM big GROUP BY name "
        "ORDER BY n DESC, name",
        True,
    ),
    (f"SELECT name FROM {C} WHERE dur > 1900000 INTERSECT SELECT name FROM {C} WHERE bytes < 100", False),
    ('SELECT name, fd FROM "io".call EXCEPT SELECT name, fd FROM "io2".call', False),
    (
        f"SELECT * FROM (SELECT producer, max(dur) AS m FROM {C} GROUP BY producer) t WHERE m > 1000 ORDER BY producer",
        True,
    ),
    (f"SELECT DISTINCT name FROM {C} ORDER BY name LIMIT 3 OFFSET 1", True),
    ('SELECT type, count(*) AS n, min(ts) AS lo FROM "io".events GROUP BY type ORDER BY type', True),
    # two traces
    (
        "SELECT 'io' AS t, count(*) AS n, sum(ts) AS s FROM \"io\".call UNION ALL "
        "SELECT 'io2', count(*), sum(ts) FROM \"io2\".call",
        False,
    ),
    (
        'SELECT a.producer, count(*) AS n FROM "io".call a JOIN "io2".call b ON a.producer = b.producer '
        "AND a.name = b.name AND a.fd = b.fd GROUP BY ALL ORDER BY ALL",
        True,
    ),
    (
        'SELECT name, count(*) AS n FROM (SELECT name FROM "io".call UNION ALL SELECT name FROM "io2".call) '
        "GROUP BY name ORDER BY name",
        True,
    ),
    # the catalog
    ("SELECT name, format, event_count, ts_min, ts_max FROM th.traces ORDER BY name", True),
    ("SELECT trace, event_type, sum(rows) AS rows FROM th.segments GROUP BY ALL ORDER BY ALL", True),
    # parameters
]
PARAMS = [
    (
        f"SELECT count(*) AS n, sum(ts) AS s FROM {C} WHERE name = ? AND ratio < ? AND producer IN (?, ?)",
        ["read", 0.5, 1, 2],
    ),
    (f"SELECT name, count(*) AS n FROM {C} WHERE dur > $1 GROUP BY name ORDER BY name", [1_000_000]),
]


def test_the_suite_is_large_enough():
    assert len(EQUIVALENT) + len(PARAMS) + len(TWO_STORES) >= 60


@pytest.mark.parametrize("query,ordered", EQUIVALENT, ids=[f"q{i}" for i in range(len(EQUIVALENT))])
def test_spark_answers_what_duckdb_answers(duck, sparkq, query, ordered):
    d = duck.sql(query)
    assert d.num_rows > 0, "a query that returns nothing proves little"
    same(d, sparkq.sql(query), ordered)


@pytest.mark.parametrize("query,params", PARAMS, ids=[f"p{i}" for i in range(len(PARAMS))])
def test_parameters_bind_alike(duck, sparkq, query, params):
    same(duck.sql(query, params), sparkq.sql(query, params), True)


def test_issue29_sum_of_epoch_ns_is_a_decimal_on_both(duck, sparkq):
    q = f"SELECT sum(ts) AS s FROM {C}"
    d, s = duck.sql(q), sparkq.sql(q)
    assert pa.types.is_decimal(d.schema.field("s").type)
    assert d.column("s")[0].as_py() > 2**63  # past BIGINT: Spark's own BIGINT sum overflowed here
    same(d, s, True)


def test_issue29_concat_skips_a_null_bigint(duck, sparkq):
    q = f"SELECT concat(name, ':', fd) AS k FROM {C} WHERE fd IS NULL AND name IS NOT NULL ORDER BY ts LIMIT 5"
    d = duck.sql(q)
    assert all(v.endswith(":") for v in d.column("k").to_pylist())
    same(d, sparkq.sql(q), True)


def test_issue29_datediff_counts_boundaries_crossed(duck, sparkq):
    # 0.9 ms -> 1.1 ms crosses one millisecond boundary (DuckDB: 1) in 0.2 ms (whole units: 0)
    q = (
        f"SELECT datediff('millisecond', to_timestamp((ts - ts % 1000000 + 900000) / 1e9), "
        f"to_timestamp((ts - ts % 1000000 + 1100000) / 1e9)) AS ms FROM {C} LIMIT 3"
    )
    d = duck.sql(q)
    assert d.column("ms").to_pylist() == [1, 1, 1]
    same(d, sparkq.sql(q), True)


def test_issue29_to_timestamp_keeps_fractions(duck, sparkq):
    q = f"SELECT to_timestamp(ts / 1e9) AS at FROM {C} ORDER BY ts LIMIT 50"
    d = duck.sql(q)
    assert any(v.microsecond for v in d.column("at").to_pylist())
    same(d, sparkq.sql(q), True)


# -- two stores ------------------------------------------------------------------------------

TWO_STORES = [
    ("SELECT store, name, event_count FROM th.traces ORDER BY store, name", True),
    ('SELECT count(*) AS n, sum(ts) AS s FROM "run".call', True),
    (
        "SELECT 'a' AS s, quantile_disc(dur, 0.5) AS m FROM \"io\".call UNION ALL "
        "SELECT 'b', quantile_disc(dur, 0.5) FROM \"run\".call",
        False,
    ),
    (
        'SELECT r.name, count(*) AS n FROM "run".call r JOIN "io2".call i ON r.name = i.name AND r.fd = i.fd '
        "GROUP BY ALL ORDER BY ALL",
        True,
    ),
    ("SELECT p.store, p.trace, count(*) AS n FROM th.producers p GROUP BY ALL ORDER BY ALL", True),
]


@pytest.fixture(scope="module")
def two(stores, spark):
    refs = [StoreRef(stores / "a", "a"), StoreRef(stores / "b", "b")]
    with open_engine(refs, "duckdb") as d, open_engine(refs, "spark", spark=spark) as s:
        yield d, s


@pytest.mark.parametrize("query,ordered", TWO_STORES, ids=[f"s{i}" for i in range(len(TWO_STORES))])
def test_two_stores_answer_alike(two, query, ordered):
    d, s = two
    t = d.sql(query)
    assert t.num_rows > 0
    same(t, s.sql(query), ordered)


# -- refused, never answered differently ----------------------------------------------------------

REFUSED = [
    (f"SELECT CAST(ratio AS VARCHAR) AS r FROM {C}", "CAST"),
    (f"SELECT concat(name, ratio) AS r FROM {C}", "concat"),
    (f"SELECT name || to_timestamp(ts / 1e9) AS r FROM {C}", "print it differently"),
    (f"SELECT regexp_replace(name, 'e', 'E') AS r FROM {C}", "first match"),
    (f"SELECT first(name) AS f FROM {C}", "FIRST"),
    (f"SELECT any_value(name) AS f FROM {C}", "ANY_VALUE"),
    (f"SELECT string_agg(name, ',') AS f FROM {C}", "STRING_AGG"),
    (f"SELECT list(fd) AS f FROM {C}", "LIST"),
    (f"SELECT approx_count_distinct(name) AS f FROM {C}", "APPROX_COUNT_DISTINCT"),
    (f"SELECT hash(name) AS f FROM {C}", "HASH"),
    (f"SELECT random() AS f FROM {C}", "RANDOM"),
    (f"SELECT quantile_cont(dur, [0.5, 0.9]) AS f FROM {C}", "list of fractions"),
    (f"SELECT date_diff('decade', make_timestamp(ts // 1000), make_timestamp(ts // 1000)) AS f FROM {C}", "decade"),
    (f"SELECT typeof(ts) AS f FROM {C}", "TYPEOF"),
    (f"SELECT CAST(gamma(ratio + 1) AS INTEGER) AS f FROM {C}", "cannot be told"),  # sqlglot cannot type gamma()
    (f"SELECT concat(name, gamma(ratio + 1)) AS f FROM {C}", "cannot be told"),
]


@pytest.mark.parametrize("query,named", REFUSED, ids=[f"r{i}" for i in range(len(REFUSED))])
def test_a_translation_that_would_differ_is_refused(duck, sparkq, query, named):
    duck.sql(query)  # DuckDB answers it
    with pytest.raises(BadInput, match="refuses") as e:
        sparkq.sql(query)
    assert named.lower() in str(e.value).lower()


# -- errors -----------------------------------------------------------------------------------------


def test_spark_errors_are_tracehouse_errors(sparkq):
    with pytest.raises(BadInput, match="Spark could not answer.*ARITHMETIC_OVERFLOW|overflow") as e:
        sparkq.sql(f"SELECT ts * 1000000 AS x FROM {C}")
    assert "Traceback" not in str(e.value) and "\tat " not in str(e.value)
    with pytest.raises(BadInput, match="Spark could not answer"):
        sparkq.sql(f"SELECT CAST(name AS INTEGER) AS x FROM {C}")  # 'read' is no integer (ANSI mode)


def test_a_store_url_spark_cannot_read_is_named(stores, spark, tmp_path):
    lst = tmp_path / "stores.toml"
    lst.write_text(f'[[store]]\npath = "{stores / "a"}"\nalias = "far"\nurl = "nosuchscheme://bucket/a"\n')
    from tracehouse.store.engines import load_store_list

    with open_engine(load_store_list(lst), "spark", spark=spark) as e:
        with pytest.raises(NotFound, match="store 'far'.*nosuchscheme://bucket/a"):
            e.sql('SELECT count(*) FROM "io".call')
    from tracehouse.cli import main

    assert main(["query", 'SELECT count(*) FROM "io".call', "--store-list", str(lst), "--engine", "spark"]) == 2


def test_cli_conf_and_spark_defaults_reach_the_session(stores, spark, spark_defaults, capsys):
    from tracehouse.cli import main

    key, value = spark_defaults
    assert spark.conf.get(key) == value  # conftest's $SPARK_CONF_DIR/spark-defaults.conf
    before = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        assert (
            main(
                [
                    "--store",
                    str(stores / "a"),
                    "query",
                    f"SELECT count(*) AS n FROM {C}",
                    "--engine",
                    "spark",
                    "--conf",
                    "spark.sql.shuffle.partitions=3",
                    "--format",
                    "csv",
                ]
            )
            == 0
        )
        assert capsys.readouterr().out.splitlines() == ["n", "3000"]
        assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    with pytest.raises(SystemExit):
        main(["query", "SELECT 1", "--engine", "spark", "--conf", "no-equals-sign"])
    assert "KEY=VALUE" in capsys.readouterr().err


def test_cli_error_is_one_line_and_the_jvm_stays_quiet(stores, tmp_path):
    """A JVM of its own (a subprocess, as a user runs it): stdout holds nothing, stderr one
    error line naming the construct: no banner, no log4j line, no Java or Python stack."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "tracehouse.cli",
            "--store",
            str(stores / "a"),
            "query",
            f"SELECT ts * 1000000 AS x FROM {C}",
            "--engine",
            "spark",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert p.returncode == 2, p.stderr
    assert p.stdout == ""
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, p.stderr
    assert "Spark could not answer" in lines[0] and "ts * 1000000" in lines[0]
    for noise in ("Traceback", "\tat ", "SQLQueryContextLogger", "log4j", "WARN", "Setting default log level"):
        assert noise not in p.stderr
    logs = list(tmp_path.glob("tracehouse-spark-*.log"))
    assert logs and logs[0].stat().st_size > 0  # the JVM's output went there


def test_off_utc_a_zone_dependent_query_is_refused():
    """DuckDB takes a TIMESTAMPTZ in the process's zone, the Spark session in UTC: on a machine
    whose zone is not UTC, what depends on the zone is refused (no Spark needed to decide)."""
    import sqlglot

    from tracehouse.store.spark_sql import translate

    schema = {"io": {"call": {"ts": "BIGINT"}}}

    def tr(sql: str, tz: str):
        return translate(sqlglot.parse_one(sql, read="duckdb"), schema, tz)

    zoned = "SELECT date_trunc('day', to_timestamp(ts / 1e9)) AS d FROM \"io\".call"
    tr(zoned, "Etc/UTC")
    with pytest.raises(BadInput, match="time zone.*Europe/Helsinki"):
        tr(zoned, "Europe/Helsinki")
    with pytest.raises(BadInput, match="time zone"):
        tr('SELECT extract(hour FROM to_timestamp(ts / 1e9)) AS h FROM "io".call', "America/New_York")
    # a naive TIMESTAMP (make_timestamp) is the same everywhere; an instant itself is too
    tr(
        "SELECT date_trunc('day', make_timestamp(ts // 1000)) AS d, to_timestamp(ts / 1e9) AS t FROM \"io\".call",
        "Europe/Helsinki",
    )
