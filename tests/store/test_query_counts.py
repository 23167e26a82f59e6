"""Counts over a trace's views: right while a writer appends, and answered from Parquet footers.

`SELECT count(*) FROM "<trace>".events` must not read a column of the segments (the events view
is a UNION ALL over every type, each type's view a UNION ALL of its segments and unflushed tail):
DuckDB's plan is checked for Parquet scans that project nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa

import tracehouse
from tracehouse import Column, EventType

TYPES = [EventType("a", "instant", (Column("x", "int64", "", ""),)), EventType("b", "span")]


def _rows(n: int, start: int, span: bool = False) -> pa.Table:
    cols = {
        "ts": pa.array(range(start, start + n), pa.int64()),
        "producer": pa.array([i % 3 for i in range(n)], pa.int32()),
    }
    cols["dur" if span else "x"] = pa.array([7] * n, pa.int64())
    return pa.table(cols)


def _scans(store, sql: str) -> list[tuple[str, str]]:
    """(operator, projected columns) of every table scan in DuckDB's plan of `sql`."""
    plan = json.loads(store.sql(f"EXPLAIN (FORMAT json) {sql}").column(1)[0].as_py())
    out, todo = [], list(plan)
    while todo:
        node = todo.pop()
        todo += node.get("children", [])
        if node.get("name") in ("READ_PARQUET", "PYTHON_ARROW_SCAN"):
            out.append((node["name"], node.get("extra_info", {}).get("Projections", "")))
    return out


def test_count_over_events_reads_no_parquet_column(tmp_path):
    store = tracehouse.open(tmp_path, fsync="off")
    store.create_trace("t", "custom", event_types=TYPES)
    store.append("t", "a", _rows(1000, 0))
    store.append("t", "b", _rows(500, 0, span=True))
    store.flush()
    store.append("t", "a", _rows(30, 5000))  # an unflushed tail beside the segments
    for sql in ('SELECT count(*) FROM "t".events', 'SELECT count(*) FROM "t".a'):
        scans = _scans(store, sql)
        parquet = [p for op, p in scans if op == "READ_PARQUET"]
        assert parquet and all(p == "" for p in parquet), (sql, scans)
    assert store.sql('SELECT count(*) FROM "t".events').column(0)[0].as_py() == 1530
    assert store.sql('SELECT count(*) FROM "t".a').column(0)[0].as_py() == 1030
    # The view's columns and rows are as documented (type last; the constant it was read by is gone).
    ev = store.sql('SELECT * FROM "t".events ORDER BY type, ts')
    assert ev.column_names == ["ts", "producer", "seq", "dur", "type"]
    assert ev.num_rows == 1530 and ev.column("type").to_pylist().count("b") == 500
    assert store.sql('SELECT * FROM "t".a').column_names == ["ts", "producer", "seq", "x"]
    assert store.sql('SELECT sum(dur) FROM "t".events WHERE ts >= 400').column(0)[0].as_py() == 100 * 7
    store.close()


def test_count_in_a_reader_sees_the_writers_unflushed_rows(tmp_path):
    """A reader process counts a running writer's WAL tail beside its segments."""
    store = tracehouse.open(tmp_path, fsync="batch", flush_rows=10**9, flush_interval_s=3600)
    store.create_trace("t", "custom", event_types=TYPES)
    store.append("t", "a", _rows(1000, 0))
    store.flush()
    store.append("t", "a", _rows(250, 9000), wait=True)  # durable in the WAL, not checkpointed
    store.append("t", "b", _rows(40, 9000, span=True), wait=True)
    code = (
        "import sys, tracehouse; s = tracehouse.open(sys.argv[1], readonly=True); "
        "print(s.sql('SELECT count(*) FROM \"t\".events').column(0)[0].as_py(), "
        "s.sql('SELECT count(*) FROM \"t\".b').column(0)[0].as_py())"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1290", "40"]
    store.close()


def test_whole_view_counts_match_duckdb_while_the_writer_appends(tmp_path):
    """The catalog-answered count of a whole view equals DuckDB's own count (a form it cannot
    shortcut) after every append, flush and compaction, in the writer and in a reader."""
    store = tracehouse.open(tmp_path, fsync="off", flush_rows=10**9, flush_interval_s=3600)
    store.create_trace("t-1", "custom", event_types=TYPES)
    for step in range(6):
        store.append("t-1", "a", _rows(100 + step, step * 1000))
        if step % 2:
            store.append("t-1", "b", _rows(7, step * 1000, span=True))
        if step in (2, 4):
            store.flush()
        if step == 4:
            store.compact("t-1")
        for view in ("events", "a", "b"):
            want = store.sql(f'SELECT count(ts) FROM "t-1".{view}').column(0)[0].as_py()
            for sql in (f'SELECT count(*) FROM "t-1".{view}', f'select COUNT( * ) as n from "t-1" . {view} ;'):
                got = store.sql(sql)
                assert got.column(0).to_pylist() == [want], (sql, step)
            assert store.sql(f'SELECT count(*) FROM "t-1".{view}').column_names == ["count_star()"]
            assert store.sql(f'SELECT count(*) AS "my n" FROM "t-1".{view}').column_names == ["my n"]
    # A count with anything more (a filter) is DuckDB's, and right.
    assert store.sql('SELECT count(*) FROM "t-1".events WHERE ts >= 5000').column(0)[0].as_py() == 105 + 7
    store.close()
    reader = tracehouse.open(tmp_path, readonly=True)
    assert reader.sql('SELECT count(*) FROM "t-1".events').column(0)[0].as_py() == sum(100 + i for i in range(6)) + 21
    reader.close()


def test_server_count_answers_from_the_catalog_and_stays_right(tmp_path):
    from helpers.server import Server

    s = Server(tmp_path / "store")
    try:
        total = 0
        for i in range(3):
            lines = "".join(f"m,host=h{k % 3} v={k}i {i * 1000 + k}\n" for k in range(50 + i))
            assert s.write(lines, bucket="w")[0] == 204
            total += 50 + i
            assert s.sql('SELECT count(*) FROM "w".events') == [[total]]
            assert s.sql('SELECT count(*) AS n FROM "w".m') == [[total]]
            assert s.sql('SELECT count(v) FROM "w".m') == [[total]]
        assert s.sql('SELECT count(*) FROM "w".m WHERE v >= 50') == [[1 + 2]]
    finally:
        assert s.stop() == 0


def test_which_counts_the_catalog_answers(tmp_path):
    """Whole views only (events or one type, any spelling of the same SELECT); anything else,
    or a name the store did not make, is left to DuckDB."""
    store = tracehouse.open(tmp_path, fsync="off")
    store.create_trace("Big", "custom", event_types=TYPES)
    store.append("Big", "a", _rows(10, 0))
    store.sql('SELECT 1 FROM "Big".events LIMIT 0')  # views made
    shortcut = store.query_engine._whole_count
    for sql in ('SELECT count(*) FROM "Big".events', "select count(*) from big.a", 'SELECT count(*) n FROM "Big"."b";'):
        assert shortcut(sql) is not None, sql
    for sql in (
        'SELECT count(*) FROM "Big".events WHERE ts > 3',
        'SELECT count(ts) FROM "Big".events',
        'SELECT count(*) FROM "big".events',
        'SELECT count(*) FROM "Big".nope',
        'SELECT count(*) FROM "Big".events, "Big".a',
        'SELECT count(*) FROM "Big".events GROUP BY type',
    ):
        assert shortcut(sql) is None, sql
    assert store.sql("select count(*) from big.a").column(0).to_pylist() == [10]
    store.close()
