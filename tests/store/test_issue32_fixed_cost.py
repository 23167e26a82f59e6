"""The per-query cost of reading the store beside DuckDB's own file (store/readcache.py, the
snapshot of store/query.py): the read cache holds its rows in the segments' order, so a filter on
the producer's tags reads the row groups DuckDB's own file would; a read's transaction kept open
for the thread's next query (`keep_open`) never shows changed views, never keeps a write, and
is rolled back by a query that fails."""

from __future__ import annotations

import glob
import threading

import duckdb
import pyarrow as pa
import pytest

import tracehouse
from tracehouse.workload import qos


def _zone_maps(path: str, table: str, column: str) -> list[tuple[int, int]]:
    con = duckdb.connect(path, read_only=True)
    try:
        rows = con.sql(
            f"SELECT row_group_id, stats FROM pragma_storage_info('{table}') "
            f"WHERE column_name = '{column}' AND segment_type NOT IN ('VALIDITY') ORDER BY row_group_id"
        ).fetchall()
    finally:
        con.close()
    by = {}
    for rg, stats in rows:
        lo, hi = (int(x) for x in (stats["min"], stats["max"])) if isinstance(stats, dict) else _parse(stats)
        a, b = by.get(rg, (lo, hi))
        by[rg] = (min(a, lo), max(b, hi))
    return [by[k] for k in sorted(by)]


def _parse(text: str) -> tuple[int, int]:
    import re

    m = re.search(r"Min: (-?\d+), Max: (-?\d+)", text)
    return int(m.group(1)), int(m.group(2))


def test_issue32_the_read_cache_is_in_producer_order_across_segments(tmp_path):
    """Two checkpoints (each sorted by producer on its own) and the tag join: the cache's row
    groups still hold disjoint producer ranges, so `customer_id = 60` scans one of them."""
    data = qos.dataset(0.25)
    with tracehouse.open(tmp_path / "s", fsync="off") as s:
        # Every other row in each checkpoint: both hold every measurement, each sorted on its own.
        even, odd = (pa.array(range(i, data.num_rows, 2)) for i in (0, 1))
        qos.tracehouse_load(s, data.take(even))  # (builds a cache: rebuilt below)
        rest = data.take(odd)
        cols = {"ts": rest.column("ts"), "producer": rest.column("measurement_id").cast("int32")}
        for n, *_ in qos.result_params():
            cols[n] = rest.column(n)
        s.append(qos.TRACE, qos.EVENT_TYPE, pa.table(cols))
        s.flush()
        assert len(s.sql("SELECT id FROM th.segments").column(0)) == 2
        s.build_read_cache(qos.TRACE)
        n = s.sql(f"SELECT count(*) FROM {qos.TRACE}.{qos.EVENT_TYPE} WHERE customer_id = 60").column(0)[0].as_py()
        assert n == 250
        plan = (
            s.sql(f"EXPLAIN ANALYZE SELECT * FROM {qos.TRACE}.{qos.EVENT_TYPE} WHERE customer_id = 60")
            .column(1)[0]
            .as_py()
        )
        assert "Row Groups Scanned: 1 /" in plan, plan
    (path,) = glob.glob(str(tmp_path / "s" / "traces" / "*" / "readcache" / "*.duckdb"))
    zones = _zone_maps(path, qos.EVENT_TYPE, "producer")  # (the cache's table is named as its type)
    assert len(zones) >= 4
    assert all(zones[i][1] <= zones[i + 1][0] for i in range(len(zones) - 1)), zones


@pytest.fixture
def store(tmp_path):
    s = tracehouse.open(tmp_path / "s", fsync="off")
    qos.tracehouse_load(s, qos.dataset(0.01))
    yield s
    s.close()


def _read(s, sql: str) -> list:
    with s.read_connection(sql, keep_open=True):
        return s.query_engine.snapshot_relation().fetchall()


def test_issue32_a_kept_transaction_never_shows_old_views(store):
    q = f"SELECT count(*) FROM {qos.TRACE}.{qos.EVENT_TYPE}"
    n = _read(store, q)[0][0]
    assert _read(store, q)[0][0] == n  # (the second runs in the first one's transaction)
    assert store.query_engine._local.txn is not None
    extra = store.sql(f"SELECT ts + 1 AS ts, producer, ul_delay FROM {qos.TRACE}.{qos.EVENT_TYPE} LIMIT 7")
    store.append(qos.TRACE, qos.EVENT_TYPE, extra)  # a tail: the view changes (and a table is registered)
    assert _read(store, q)[0][0] == n + 7
    store.flush()  # a checkpoint: the views change again, nothing registered
    assert _read(store, q)[0][0] == n + 7
    assert _read(store, q)[0][0] == n + 7


def test_issue32_a_kept_transaction_keeps_no_write_and_survives_an_aborted_one(store):
    eng = store.query_engine
    store.sql("CREATE TABLE main.k (x INTEGER)")
    q = "SELECT count(*) FROM main.k"
    assert _read(store, q) == [(0,)]
    # A statement that writes is not a read: its transaction is rolled back at its end.
    with store.read_connection("WITH a AS (SELECT 1 AS x) INSERT INTO main.k SELECT x FROM a", keep_open=True):
        eng.snapshot_relation()
    assert _read(store, q) == [(0,)]
    assert store.sql(q).column(0).to_pylist() == [0]
    # What the engine's own connection writes is seen by the next read (no stale transaction).
    assert _read(store, q) == [(0,)]
    store.sql("INSERT INTO main.k VALUES (1)")
    assert _read(store, q) == [(1,)]
    # A query that fails at its execution (after a kept transaction served it) rolls back.
    with (
        pytest.raises(duckdb.Error),
        store.read_connection("SELECT CAST('x' || r AS INTEGER) FROM range(2) t(r)", keep_open=True),
    ):
        eng.snapshot_relation().fetchall()
    assert eng._local.txn is None
    assert _read(store, q) == [(1,)]
    assert _read(store, "SELECT 41 + 1") == [(42,)]


def test_issue32_kept_transactions_on_many_threads_see_the_same_rows(store):
    q = f"SELECT count(*), sum(ul_delay) FROM {qos.TRACE}.{qos.EVENT_TYPE} WHERE customer_id < 300"
    want = store.sql(q).to_pylist()
    got, errors = [], []

    def go():
        try:
            for _ in range(20):
                with store.read_connection(q, keep_open=True):
                    got.append(store.query_engine.snapshot_relation().to_arrow_table().to_pylist())
        except BaseException as e:  # noqa: BLE001 - asserted below
            errors.append(e)

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(got) == 80 and all(g == want for g in got)


def test_issue32_a_semicolon_inside_a_string_or_a_comment_ends_no_statement(store):
    """A plain query keeps its read's transaction for the thread's next one; a `;` inside a '...'
    string, a "..." name or a comment does not make it a script (InfluxQL's translations carry
    one in an error message). A real second statement, an E'...' string and dollar quoting are
    not plain: each answers as DuckDB does, its transaction rolled back."""
    eng = store.query_engine
    n = store.sql(f"SELECT count(*) FROM {qos.TRACE}.{qos.EVENT_TYPE}").column(0)[0].as_py()
    plain = [
        f"SELECT count(*) AS \"a;b\", 'x; y' AS s FROM {qos.TRACE}.{qos.EVENT_TYPE}",
        f"SELECT count(*), 'x; y' FROM {qos.TRACE}.{qos.EVENT_TYPE} -- c; d\n;",
        f"/* a; b */ SELECT count(*), 'x; y' /* c; 'd */ FROM {qos.TRACE}.{qos.EVENT_TYPE}",
        f"SELECT count(*), 'it''s; x' FROM {qos.TRACE}.{qos.EVENT_TYPE}",
    ]
    for q in plain:
        got = _read(store, q)
        assert got[0][0] == n and got[0][1] in ("x; y", "it's; x"), q
        assert eng._local.txn is not None, q  # kept: the query was taken as one statement
    for q, want in [
        ("SELECT 1; SELECT 2", [(2,)]),
        ("SELECT E'\\';'", [("';",)]),
        ("SELECT $$a;b$$", [("a;b",)]),
        ("SELECT 1 /* ; unclosed", None),
    ]:
        if want is None:
            with pytest.raises(duckdb.Error), store.read_connection(q, keep_open=True):
                eng.snapshot_relation().fetchall()
        else:
            assert _read(store, q) == want, q
        assert eng._local.txn is None, q  # not plain: rolled back at its end
    assert _read(store, plain[0])[0][0] == n
