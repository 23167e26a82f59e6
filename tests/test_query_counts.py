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
    cols = {"ts": pa.array(range(start, start + n), pa.int64()), "producer": pa.array([i % 3 for i in range(n)], pa.int32())}
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
    code = ("import sys, tracehouse; s = tracehouse.open(sys.argv[1], readonly=True); "
            "print(s.sql('SELECT count(*) FROM \"t\".events').column(0)[0].as_py(), "
            "s.sql('SELECT count(*) FROM \"t\".b').column(0)[0].as_py())")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1290", "40"]
    store.close()
