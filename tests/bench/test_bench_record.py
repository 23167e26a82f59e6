"""`tracehouse bench record` and `tracehouse bench debug` at a small size: every part runs on real
programs and a real store, and the verdicts printed agree with the table they close."""

from __future__ import annotations

import json

import pytest

from tracehouse.bench import debug as bench_debug
from tracehouse.bench import record as bench_record


def test_bench_debug_small_run_times_every_move_and_judges_its_own_table(tmp_path, capsys):
    from tracehouse.cli import main

    code = main(["bench", "debug", "--events", "20000", "--queries", "8", "--workdir", str(tmp_path), "--json"])
    assert code == 0
    r = json.loads(capsys.readouterr().out)
    assert r["trace"]["events"] >= 20_000
    names = {name for name, _ in bench_debug.MOVES} | {"stack with locals"}
    assert names <= set(r["moves"])
    for x in r["moves"].values():
        assert x["n"] >= 1 and 0 <= x["p50_ms"] <= x["p99_ms"] <= x["max_ms"]
    assert r["verdicts"] == bench_debug.verdicts(r)
    assert not list(tmp_path.iterdir()), "the generated store is removed"


def test_bench_debug_verdict_follows_the_rows():
    row = {"n": 10, "p50_ms": 1.0, "max_ms": 70.0, "target_ms": 50.0}
    r = {
        "trace": {"name": "t", "format": "tod", "events": 100},
        "moves": {
            "step": {**row, "p99_ms": 12.0, "met": True},
            "back out": {**row, "p99_ms": 50.01, "met": False},
            "origin of a local": {**row, "p99_ms": 150.0, "target_ms": 200.0, "met": True},
        },
        "machine": {"loadavg_before": [1.0], "loadavg_after": [1.0]},
        "build": {"indexes_s": 1.0},
    }
    step, origin = bench_debug.verdicts(r)
    assert "missed" in step and "back out, 50.0 ms" in step
    assert "met" in origin and "missed" not in origin
    r["moves"]["back out"]["p99_ms"] = 50.0
    assert "met" in bench_debug.verdicts(r)[0]
    assert "every step <= 50 ms at p99" in bench_debug.render(r)


def test_bench_record_quick_run_measures_all_three_ways(tmp_path):
    r = bench_record.run(["json_loads"], quick=True, workdir=str(tmp_path), ingest_passes=2, repeat=1)
    (p,) = r["programs"]
    assert p["loops"] == bench_record.PROGRAMS["json_loads"][2] // 10
    assert p["events"] > 1000 and p["reference_events"] > 1000
    for key in ("untraced_s", "recorded_s", "reference_s", "untraced_cpu_s", "recorded_cpu_s", "reference_cpu_s"):
        assert p[key] > 0, key
    assert p["cpu_overhead"] == pytest.approx(p["recorded_cpu_s"] / p["untraced_cpu_s"], rel=0.05)
    # Two passes of the stream, the second shifted past the first: every row stored, durable
    # before the compaction that is timed apart.
    ing = r["ingest"]
    assert ing["events"] == 2 * p["events"] and ing["line_steps_stored"] == 2 * p["by_type"]["line_step"]
    assert len(ing["pass_events_per_s"]) == 2 and ing["segments"] >= 5 and ing["compact_s"] >= 0
    text = bench_record.render(r)
    assert "json_loads" in text and "CPU time" in text
    assert not list(tmp_path.iterdir()), "the work directory is removed"


def test_gain_is_what_the_pure_python_recorder_adds_over_what_the_native_one_adds():
    assert bench_record._gain(3.0, 1.0, 1.2) == (10.0, False)
    # A native recording measured faster than the untraced run: the gain is a lower bound,
    # against the untraced runs' spread (at least a millisecond), never a division by ~0.
    assert bench_record._gain(1.5, 1.0, 0.9, noise=0.05) == (10.0, True)
    assert bench_record._gain(1.5, 1.0, 0.9) == (500.0, True)
    assert bench_record._gain(1.5, 1.0, 1.02, noise=0.05) == (10.0, True)
