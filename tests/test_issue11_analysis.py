"""Issue 11, analysis items: the stack at t shows every open span (13), spans left open are
cut at the thread's last event (13); `--save` records what reproduces the answer, result
ids are never reused, `analyze spans --json` rows, quoted cursor values, `results show`
in full (14)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracehouse
from tracehouse import analysis as an
from tracehouse import cli
from tracehouse.analysis.profiles import SpanConfig

from helpers.analysis_ref import build_slices, build_trace, ref_open_slices

SLICES = SpanConfig("S", None, name="name")


def run(capsys, store: Path, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["--store", str(store), *argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def run_json(capsys, store: Path, *argv: str):
    code, out, err = run(capsys, store, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


# -- item 13: the stack at t ----------------------------------------------------------------

# Chrome trace-event JSON as Chrome and Perfetto write it: on one thread, A [0, 10) and
# B [5, 15) overlap without nesting (they become siblings at depth 0), C [6, 8) is inside B.
OVERLAPPING = {"traceEvents": [
    {"name": "A", "ph": "X", "ts": 0, "dur": 10, "pid": 1, "tid": 7},
    {"name": "B", "ph": "X", "ts": 5, "dur": 10, "pid": 1, "tid": 7},
    {"name": "C", "ph": "X", "ts": 6, "dur": 2, "pid": 1, "tid": 7},
    {"name": "D", "ph": "X", "ts": 20, "dur": 5, "pid": 1, "tid": 7},
]}


def test_stack_shows_overlapping_siblings(tmp_path, capsys):
    f = tmp_path / "ov.json"
    f.write_text(json.dumps(OVERLAPPING))
    store = tmp_path / "s"
    run_json(capsys, store, "import", "chrome", str(f))
    tid = next(p["id"] for p in run_json(capsys, store, "query", "SELECT id, kind FROM th.producers WHERE trace = 'ov'")
               if p["kind"] == "thread")
    frames = run_json(capsys, store, "analyze", "stack", "ov", str(tid), "--at", "7us")["frames"]
    assert [(f["name"], f["depth"]) for f in frames] == [("A", 0), ("B", 0), ("C", 1)]
    frames = run_json(capsys, store, "analyze", "stack", "ov", str(tid), "--at", "12us")["frames"]
    assert [f["name"] for f in frames] == ["B"]
    assert run_json(capsys, store, "analyze", "stack", "ov", str(tid), "--at", "17us")["frames"] == []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.lists(st.tuples(st.integers(1, 2), st.integers(0, 40), st.integers(0, 25)), max_size=25),
       probes=st.lists(st.integers(-1, 70), min_size=1, max_size=5))
def test_stack_of_slices_is_every_slice_open_at_t(raw, probes):
    slices = [{"producer": p, "ts": ts, "dur": d, "name": f"s{i}"} for i, (p, ts, d) in enumerate(raw)]
    with tempfile.TemporaryDirectory() as d, tracehouse.open(d, fsync="off") as store:
        build_slices(store, "t", slices)
        for p in (1, 2):
            for t in probes:
                got = an.stack_at(store, "t", p, t, SLICES)
                assert sorted(zip(got.column("ts").to_pylist(), got.column("seq").to_pylist())) == \
                    ref_open_slices(slices, p, t), (p, t)
                keys = list(zip(got.column("depth").to_pylist(), got.column("ts").to_pylist()))
                assert keys == sorted(keys)  # outermost first, then by begin time


def test_open_span_is_cut_at_the_threads_last_event(store):
    # thread 1: f0 begins at 10, f1 [20, 30), then only field writes until 95: f0 never ends
    ev = [{"type": "B", "ts": 10, "producer": 1, "key": 0}, {"type": "B", "ts": 20, "producer": 1, "key": 1},
          {"type": "E", "ts": 30, "producer": 1, "key": 1},
          {"type": "W", "ts": 50, "producer": 1, "obj": 1, "field": 1, "value": 5},
          {"type": "W", "ts": 95, "producer": 1, "obj": 1, "field": 1, "value": 6},
          {"type": "W", "ts": 99, "producer": 2, "obj": 1, "field": 1, "value": 7}]
    build_trace(store, "t", ev)
    cfg = SpanConfig("B", "E", key="key", name="name")
    rows = [(r["name"], r["end_ts"], r["dur"], r["self_time"], r["closed"]) for r in an.pair(store, "t", cfg).table.to_pylist()]
    assert rows == [("f0", 95, 85, 75, False), ("f1", 30, 10, 10, True)]
    assert an.stack_at(store, "t", 1, 90, cfg).column("name").to_pylist() == ["f0"]


# -- item 14: result ids --------------------------------------------------------------------


def _a_result(s, text: str) -> int:
    return an.annotate(s, ["t"], text)


def test_result_ids_are_never_reused_after_rm(store):
    build_trace(store, "t", [{"type": "B", "ts": 1, "producer": 1, "key": 0}])
    a, b = _a_result(store, "one"), _a_result(store, "two")
    store.delete_result(b)
    c = _a_result(store, "three")
    assert c > b > a
    store.delete_result(c)
    store.close()
    with tracehouse.open(store.path) as s:  # across opens too
        assert _a_result(s, "four") > c


def test_an_old_catalog_is_migrated_to_autoincrement_keeping_ids_and_links(store_path):
    import sqlite3

    with tracehouse.open(store_path) as s:
        build_trace(s, "t", [{"type": "B", "ts": 1, "producer": 1, "key": 0}])
        ids = [_a_result(s, f"note {i}") for i in range(3)]
    # The results table as stores made before this change have it (no AUTOINCREMENT).
    db = sqlite3.connect(store_path / "catalog.sqlite")
    with db:
        db.execute("CREATE TABLE r_old(id INTEGER PRIMARY KEY, kind TEXT NOT NULL, name TEXT NOT NULL, tool TEXT NOT NULL,"
                   " params TEXT NOT NULL DEFAULT '{}', created REAL NOT NULL, payload TEXT, path TEXT)")
        db.execute("INSERT INTO r_old SELECT * FROM results")
        db.execute("DROP TABLE results")
        db.execute("ALTER TABLE r_old RENAME TO results")
        db.execute("DELETE FROM sqlite_sequence WHERE name = 'results'")
    db.close()
    with tracehouse.open(store_path) as s:
        assert [r["id"] for r in s.results(trace="t")] == ids
        assert all(r["traces"] == ["t"] for r in s.results(trace="t"))
        s.delete_result(ids[-1])
        assert _a_result(s, "after") > ids[-1]
    sql = sqlite3.connect(store_path / "catalog.sqlite").execute(
        "SELECT sql FROM sqlite_master WHERE name = 'results'").fetchone()[0]
    assert "AUTOINCREMENT" in sql
