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
    runs = ex.synthetic_mva([1, 2, 4, 8, 16, 32], {"disk": 0.004, "cpu": 0.006}, 0.1, servers={"disk": 1, "cpu": 2},
                            noise=0.01, seed=2)
    res = ex.extrapolate(runs, holdout=2)
    errs = {m: [abs(h[m]["throughput_error"]) for h in res.holdout()] for m in ("mva", "perfext")}
    assert max(errs["mva"]) < 0.05, errs
    assert max(errs["perfext"]) < 0.10, errs


def test_perfext_is_linear_then_logistic_to_the_bottleneck():
    runs = ex.Runs(np.array([1.0, 2.0]), np.array([10.0, 20.0]), np.array([0.01, 0.01]),
                   {"disk": np.array([0.05, 0.10])}, {"disk": 1})
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
    rows = [{"users": int(n), "tps": x, "response_time_ms": r * 1e3, "util_disk_pct": u * 100}
            for n, x, r, u in zip(runs.n, runs.x, runs.r, runs.util["disk"])]
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
