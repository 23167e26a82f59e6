"""`tracehouse extrapolate`: the models recover known parameters of synthetic systems, predict
held-out load levels, find bound crossings; the CLI reads load-test tables and plots."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from tracehouse.cli import main
from tracehouse.replay import extrapolate as ex


def test_usl_recovers_exact_parameters():
    runs = ex.synthetic_usl([1, 2, 3, 4, 6, 8, 12, 16, 24, 32], 1000.0, 0.03, 0.0008)
    m = ex.USL().fit(runs)
    assert m.lam == pytest.approx(1000.0, rel=1e-6)
    assert m.sigma == pytest.approx(0.03, rel=1e-5)
    assert m.kappa == pytest.approx(0.0008, rel=1e-5)


def test_usl_with_noise_stays_close_and_never_negative():
    runs = ex.synthetic_usl(list(range(1, 41)), 500.0, 0.05, 0.0002, noise=0.01, seed=3)
    m = ex.USL().fit(runs)
    assert m.lam == pytest.approx(500.0, rel=0.03)
    assert m.sigma == pytest.approx(0.05, abs=0.015)
    assert m.kappa == pytest.approx(0.0002, abs=0.0002)
    # a linear system: sigma and kappa stay at their bound 0, not below
    lin = ex.USL().fit(ex.synthetic_usl([1, 2, 4, 8], 100.0, 0.0, 0.0, noise=0.002, seed=1))
    assert lin.sigma >= 0 and lin.kappa >= 0 and lin.lam == pytest.approx(100.0, rel=0.01)


def test_mva_recovers_demands_and_think_time_and_predicts():
    d = {"disk": 0.004, "cpu": 0.002}
    runs = ex.synthetic_mva([1, 2, 4, 8, 16, 32], d, 0.1)
    res = ex.extrapolate(runs, models=("mva", "perfext"), holdout=2)
    mva = res.models["mva"]
    for k, v in d.items():
        assert mva.d[k] == pytest.approx(v, rel=1e-9)
    assert mva.z == pytest.approx(0.1, rel=1e-9)
    assert mva.d0 == pytest.approx(0.0, abs=1e-6)
    for h in res.holdout():  # 2x and 4x the highest fitted concurrency
        assert abs(h["mva"]["throughput_error"]) < 1e-6
        assert abs(h["mva"]["response_time_error"]) < 1e-5
    pe = res.models["perfext"]
    assert pe.bottleneck == "disk" and pe.xmax == pytest.approx(250.0, rel=1e-9)


def test_mva_approximates_a_multiserver_station_within_tolerance():
    runs = ex.synthetic_mva(
        [1, 2, 4, 8, 16, 32], {"disk": 0.004, "cpu": 0.006}, 0.1, servers={"disk": 1, "cpu": 2}, noise=0.01, seed=2
    )
    res = ex.extrapolate(runs, holdout=2)
    errs = {m: [abs(h[m]["throughput_error"]) for h in res.holdout()] for m in ("mva", "perfext")}
    assert max(errs["mva"]) < 0.05, errs
    assert max(errs["perfext"]) < 0.10, errs


def test_perfext_is_linear_then_logistic_to_the_bottleneck():
    runs = ex.Runs(
        np.array([1.0, 2.0]),
        np.array([10.0, 20.0]),
        np.array([0.01, 0.01]),
        {"disk": np.array([0.05, 0.10])},
        {"disk": 1},
    )
    m = ex.PerfExt().fit(runs)
    assert m.xmax == pytest.approx(200.0)  # 1 / D, D = 5 ms
    assert m.nh == pytest.approx(10.0)  # the line reaches 100/s at 10
    p = m.predict([5, 10, 1000])
    assert p.x[0] == pytest.approx(50.0) and p.x[1] == pytest.approx(100.0)
    assert p.x[2] == pytest.approx(200.0, rel=1e-6)
    assert list(p.in_range) == [True, True, False]
    # the logistic continues the line with the same slope at the half point
    assert (m.predict([10.001]).x[0] - m.predict([9.999]).x[0]) / 0.002 == pytest.approx(10.0, rel=1e-3)
    # response time by the law, think time from the runs (N/X - R = 0.09 s)
    assert m.z == pytest.approx(0.09)
    assert p.r[0] == pytest.approx(5 / 50 - 0.09)


def test_the_bound_crossing_is_the_first_concurrency_past_it():
    runs = ex.synthetic_mva([1, 2, 4], {"disk": 0.01}, 0.5)
    res = ex.extrapolate(runs, models=("mva",), rt_bound=0.05)
    b = res.to_json()["bounds"]["mva"]
    m = res.models["mva"]
    u = m.predict(np.arange(1, 200)).util["disk"]
    assert b["resource"] == "disk" and b["util"] == int(np.argmax(u >= 0.9)) + 1
    r = m.predict(np.arange(1, 200)).r
    assert b["rt"] == int(np.argmax(r >= 0.05)) + 1


def write_runs(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def test_cli_on_a_load_test_csv_with_plot(tmp_path, capsys):
    runs = ex.synthetic_mva([10, 20, 40, 80], {"disk": 0.005}, 1.0)
    rows = [
        {"users": int(n), "tps": x, "response_time_ms": r * 1e3, "util_disk_pct": u * 100}
        for n, x, r, u in zip(runs.n, runs.x, runs.r, runs.util["disk"])
    ]
    path = tmp_path / "load.csv"
    write_runs(path, rows)
    png = tmp_path / "out.png"
    assert main(["extrapolate", str(path), "--holdout", "--plot", str(png), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["held_out"] == [80.0] and len(out["holdout"]) == 1
    assert abs(out["holdout"][0]["mva"]["throughput_error"]) < 1e-4
    assert out["bounds"]["mva"]["resource"] == "disk"
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    assert main(["extrapolate", str(path)]) == 0
    text = capsys.readouterr().out
    assert "predicted" in text and "90 % disk at concurrency" in text


def test_cli_names_the_bad_cell(tmp_path, capsys):
    path = tmp_path / "bad.csv"
    write_runs(path, [{"concurrency": 1, "throughput": 10}, {"concurrency": "two", "throughput": 20}])
    assert main(["extrapolate", str(path)]) == 2
    e = capsys.readouterr().err
    assert f"{path}:3" in e and "'two' is not a number" in e and "concurrency" in e
    write_runs(path, [{"users": 1, "speed": 3}])
    assert main(["extrapolate", str(path)]) == 2
    assert "no throughput column" in capsys.readouterr().err
    assert main(["extrapolate", str(tmp_path / "none.csv")]) == 2


def test_usl_leaves_a_residual_to_fit_against():
    """Three runs fit lambda and sigma only: kappa through three points chased their noise."""
    runs = ex.synthetic_usl([1, 2, 4], 1000.0, 0.02, 0.0, noise=0.01, seed=4)
    m = ex.USL().fit(runs)
    assert m.fitted == 2 and m.kappa == 0.0 and m.lam == pytest.approx(1000.0, rel=0.05)
    assert ex.USL().fit(ex.synthetic_usl([1, 2, 4, 8], 1000.0, 0.02, 0.001)).fitted == 3


def seed002_runs() -> ex.Runs:
    """Replays where think time dwarfs response time, as seed 002's: measured 0.427, 0.455,
    0.320 ms at 1, 2, 4 copies of 5 threads thinking 50 ms, a device busy 0.3 ms per call."""
    n = np.array([1.0, 2.0, 4.0])
    r = np.array([0.427e-3, 0.455e-3, 0.320e-3])
    x = 5 * n / (0.050 + r) * np.array([1.004, 0.997, 1.002])  # 0.2-0.4 % measurement noise
    return ex.Runs(n, x, r, {"device": x * 0.3e-3}, {"device": 1}, 5.0, "replays")


def test_issue29_perfext_response_time_is_fitted_to_the_measured_ones():
    """R = N/X - Z cancelled to noise (0.971, 0.304, 0.008 ms, then 0): the response time is
    fitted to the measured ones and checked at the fitted points."""
    res = ex.extrapolate(seed002_runs(), models=("perfext", "usl"), at=[1, 2, 4, 8, 16])
    for m in ("perfext", "usl"):
        r = res.models[m].predict([1, 2, 4, 8, 16]).r
        assert np.all(np.abs(r[:3] / seed002_runs().r - 1) < 0.25), (m, r)
        assert np.all((r[3:] > 0.3e-3) & (r[3:] < 0.6e-3)), (m, r)  # the device is still idle at 16 copies
    fit = res.to_json()["fit"]["perfext"]["response_time"]
    assert fit["max_error"] < 0.25 and fit["r2"] is not None
    # the non-monotonic response times are flagged
    assert any(w.startswith("non-monotonic: response time falls") for w in res.warnings)


def test_issue29_too_few_concurrencies_are_refused(tmp_path, capsys):
    one = ex.Runs(
        np.array([2.0, 2.0]),
        np.array([10.0, 11.0]),
        np.array([0.01, 0.01]),
        {"disk": np.array([0.05, 0.055])},
        {"disk": 1},
    )
    with pytest.raises(ex.BadInput, match="2 or more distinct concurrencies"):
        ex.extrapolate(one)
    with pytest.raises(ex.BadInput, match="2 or more distinct concurrencies"):
        ex.extrapolate(ex.synthetic_mva([1, 2], {"disk": 0.004}, 0.1), holdout=1)
    two = ex.extrapolate(ex.synthetic_mva([1, 2], {"disk": 0.004}, 0.1))
    assert any("fitted on 2 concurrencies" in w for w in two.warnings)
    assert not any(
        "concurrencies" in w for w in ex.extrapolate(ex.synthetic_mva([1, 2, 4], {"disk": 0.004}, 0.1)).warnings
    )
    path = tmp_path / "one.csv"
    write_runs(path, [{"concurrency": 1, "throughput": 10, "util_disk": 0.1}])
    assert main(["extrapolate", str(path)]) == 2
    assert "2 or more distinct concurrencies" in capsys.readouterr().err


def test_issue29_fit_quality_and_warnings_in_text_and_json(tmp_path, capsys):
    runs = ex.synthetic_mva([1, 2, 4, 8, 16], {"disk": 0.004}, 0.1, noise=0.01, seed=3)
    rows = [
        {"users": int(n), "tps": x, "response_time": r, "util_disk": u}
        for n, x, r, u in zip(runs.n, runs.x, runs.r, runs.util["disk"])
    ]
    rows[2]["tps"] = rows[1]["tps"] * 0.8  # throughput falls from 2 to 4 users
    path = tmp_path / "load.csv"
    write_runs(path, rows)
    assert main(["extrapolate", str(path), "--holdout", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for m in ("perfext", "usl", "mva"):
        q = data["fit"][m]["throughput"]
        assert q["r2"] is not None and q["max_error"] is not None and q["holdout_error"] is not None
    assert data["non_monotonic"][0] == {
        "metric": "throughput",
        "from": 2.0,
        "to": 4.0,
        "values": [rows[1]["tps"], rows[2]["tps"]],
    }
    assert any(w.startswith("non-monotonic: throughput falls") for w in data["warnings"])
    assert main(["extrapolate", str(path), "--holdout"]) == 0
    cap = capsys.readouterr()
    assert "R² " in cap.out and "held-out error" in cap.out and "non-monotonic" in cap.err


def test_issue29_no_rank_warning_and_usl_stays_within_capacity():
    """Runs below half of PerfExt's maximum at one concurrency only: no numpy RankWarning
    escapes. A linear system's USL stops at the disk's capacity: utilisation never > 100 %."""
    import warnings

    runs = ex.Runs(
        np.array([2.0, 2.0, 16.0]),
        np.array([20.0, 20.5, 150.0]),
        np.array([0.01, 0.01, 0.012]),
        {"disk": np.array([0.08, 0.082, 0.6])},
        {"disk": 1},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = ex.extrapolate(runs, models=("perfext", "usl"), at=[32, 64, 128])
        res.to_json()
    lin = ex.Runs(
        np.array([1.0, 2.0, 4.0]),
        np.array([100.0, 200.0, 400.0]),
        np.array([0.01] * 3),
        {"disk": np.array([0.4, 0.8, 1.0])},
        {"disk": 1},
    )
    p = ex.USL().fit(lin).predict([8, 16, 64])
    assert np.all(p.util["disk"] <= 1.0 + 1e-9) and not p.in_range.any()


def test_issue29_replays_are_grouped_by_settings_and_failed_ones_left_out():
    def run(trace, copies, x, *, realtime=False, complete=True, valid=True):
        return {
            "trace": trace,
            "copies": copies,
            "ops_per_s": x,
            "response_time_s": 0.001,
            "threads": 2,
            "timing": "original",
            "realtime": {"asked": realtime, "granted": realtime},
            "maps": [],
            "prepare": {"cold": False},
            "complete": complete,
            "valid": valid,
            "cores": 2,
            "utilisation": {"device_util": x / 1000, "replay_cpu_cores": 0.1},
            **({} if valid else {"invalid": "the target filesystem is full"}),
        }

    summaries = [
        run("a", 1, 100, realtime=True),
        run("b", 1, 90),
        run("c", 2, 170),
        run("d", 3, 0.5, valid=False),
        run("e", 4, 10, complete=False),
        run("f", 4, 300),
    ]
    runs = ex.runs_from_replays(summaries, "t")
    assert runs.labels == ["b", "c", "f"] and list(runs.n) == [1, 2, 4]
    why = {x["run"]: x["reason"] for x in runs.excluded}
    assert why["a"].startswith("other settings: timing original, realtime yes")
    assert why["d"].startswith("invalid: the target filesystem is full") and why["e"].startswith("incomplete")
    with pytest.raises(ex.BadInput, match="no valid replay"):
        ex.runs_from_replays([run("d", 3, 0.5, valid=False)], "t")


def test_issue29_the_plot_shows_the_beyond_range_part(tmp_path):
    from tracehouse.replay import plot

    runs = ex.Runs(
        np.array([1.0, 2.0, 4.0]),
        np.array([10.0, 20.0, 40.0]),
        np.array([0.01] * 3),
        {"disk": np.array([0.05, 0.10, 0.2])},
        {"disk": 1},
    )
    res = ex.extrapolate(runs, models=("perfext",), at=[8, 64])
    fig, axes = plot.figure(res)
    lines = [ln for ln in axes[0].get_lines() if ln.get_label().startswith("perfext")]
    solid = next(ln for ln in lines if ln.get_linestyle() == "-")
    dotted = next(ln for ln in lines if ln.get_linestyle() == ":")
    xs, ys = solid.get_xdata(), np.asarray(solid.get_ydata(), float)
    dx, dy = dotted.get_xdata(), np.asarray(dotted.get_ydata(), float)
    pe = res.models["perfext"]
    # solid up to 90 % of X_max, dotted beyond it: each drawn where the other is not
    assert np.nanmax(ys) <= 0.9 * pe.xmax + 1e-6 and np.nanmin(dy) >= 0.9 * pe.xmax - 1.0
    assert np.isnan(ys[-1]) and not np.isnan(dy[-1]) and np.isnan(dy[0]) and not np.isnan(ys[0])
    assert len(xs) == len(dx)
    png = plot.plot(res, tmp_path / "p.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
