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
    assert len(p["added_s"]) == len(p["added_cpu_s"]) == len(p["reference_added_cpu_s"]) == 3
    assert p["gain_interval"] == [None, None], "one round: no interval"
    # What the user waits: `tracehouse record` as a command of its own, from its start to its
    # exit, holds the program's own time and more (start-up, storing), against `python PROGRAM`.
    assert p["recorded_wall_s"] > p["recorded_s"] and p["untraced_wall_s"] > 0
    assert len(p["added_wall_s"]) == len(p["reference_added_wall_s"]) == 3 and p["added_wall_s"][0] > 0
    text = bench_record.render(r)
    assert "json_loads" in text and "CPU time" in text and "what the user waits" in text
    for line in bench_record.verdicts(r):
        assert line in text
    assert not list(tmp_path.iterdir()), "the work directory is removed"


def test_gain_is_what_the_pure_python_recorder_adds_over_what_the_native_one_adds():
    # Rounds of (untraced, native, pure-Python) seconds: each recorder's added time is taken per
    # round, against that round's untraced run, so a slow round (the third) cancels out.
    plain = [{"s": x} for x in (1.0, 1.1, 3.0, 1.0, 0.9, 1.0)]
    native = [{"s": p["s"] + d} for p, d in zip(plain, (0.10, 0.12, 0.09, 0.11, 0.10, 0.08), strict=True)]
    pure = [{"s": p["s"] + d} for p, d in zip(plain, (1.0, 1.1, 1.2, 0.9, 1.0, 1.05), strict=True)]
    nat, ref = bench_record.added(native, plain, "s"), bench_record.added(pure, plain, "s")
    assert nat == pytest.approx([0.1, 0.08, 0.12]) and ref == pytest.approx([1.025, 0.9, 1.2])
    g = bench_record.gain(ref, nat)
    assert g["gain"] == 10.2 and g["low"] == 7.5 and g["high"] == 15.0
    # A native recorder whose interval reaches 0 (it adds less than the noise): no upper end.
    assert bench_record.gain([1.0, 0.9, 1.1], [0.01, -0.02, 0.03]) == {"gain": 100.0, "low": 30.0, "high": None}
    # Its median at 0 or below (it measured faster than untraced): no bound at all, shown as inf.
    assert bench_record.gain([1.0, 0.9, 1.1], [-0.001, -0.02, 0.03]) == {"gain": None, "low": 30.0, "high": None}


def test_median_interval_holds_the_median_with_95_percent_whatever_the_distribution():
    assert bench_record.median_interval([3.0, 1.0, 2.0]) == (2.0, None, None)  # too few for one
    assert bench_record.median_interval([5, 1, 4, 2, 3]) == (3, 1, 5)  # the range: 1 - 2/32 = 94 %
    assert bench_record.median_interval(list(range(10))) == (4.5, 1, 8)  # ranks 2 and 9: 97.9 %
    assert bench_record.median_interval(list(range(20))) == (9.5, 5, 14)  # ranks 6 and 15: 95.9 %


def _row(name: str, gain: float, interval: list, cpu_gain: float, cpu_interval: list) -> dict:
    return {
        "program": name,
        "overhead": 1.1,
        "gain": gain,
        "gain_interval": interval,
        "cpu_gain": cpu_gain,
        "cpu_gain_interval": cpu_interval,
    }


def test_bench_record_verdicts_judge_the_medians_the_table_shows_and_name_what_the_noise_leaves_open():
    r = {
        "programs": [
            _row("json_loads", 12.4, [6.0, 40.0], 21.0, [14.0, 35.0]),
            _row("richards", 16.6, [14.0, 20.1], 27.6, [25.0, 30.0]),
        ]
    }
    overhead, elapsed, cpu = bench_record.verdicts(r)
    assert overhead.startswith("overhead <= 30x on every program: met")
    assert (
        "elapsed time): met (least 12.4x, json_loads); not resolved by the noise: json_loads 12.4x [6.0x, 40.0x]"
        in elapsed
    )
    assert cpu.endswith("CPU time): met (least 21.0x, json_loads)")
    # A median under the target is missed even when the interval reaches above it (and is named).
    r["programs"][0].update(gain=8.3, gain_interval=[4.0, None])
    elapsed = bench_record.verdicts(r)[1]
    assert "missed (least 8.3x, json_loads); not resolved by the noise: json_loads 8.3x [4.0x, inf]" in elapsed
    # A gain without bound (the native recorder measured no slower than untraced) meets the target.
    r["programs"][0].update(gain=None, gain_interval=[9.5, None])
    elapsed = bench_record.verdicts(r)[1]
    assert "met (least 16.6x, richards); not resolved by the noise: json_loads inf [9.5x, inf]" in elapsed
    # Without intervals (fewer than 5 rounds) the verdict says so.
    for p in r["programs"]:
        p.update(gain_interval=[None, None], cpu_gain_interval=[None, None])
    assert all(v.endswith("no intervals (fewer than 5 rounds)") for v in bench_record.verdicts(r)[1:])
