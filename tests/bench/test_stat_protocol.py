"""The statistical protocol every benchmark shares (bench/stat_protocol.py, seed 003 section 4.4)."""

from __future__ import annotations

from tracehouse.bench import stat_protocol


def test_protocol_needs_five_runs_and_says_when_the_budget_stopped_it():
    xs = iter([10.0, 10.0, 10.0, 10.0, 10.0])
    m = stat_protocol.repeat(lambda: next(xs))
    assert m["runs"] == 5 and m["converged"] and m["stopped"] == "se"
    noisy = iter([1.0, 9.0] * 50)
    m = stat_protocol.repeat(lambda: next(noisy), max_runs=8)
    assert m["runs"] == 8 and not m["converged"] and m["stopped"] == "max_runs" and stat_protocol.mark(m) == "*"
    m = stat_protocol.repeat(lambda: 1.0, budget_s=0.0)  # one run, then the budget is spent
    assert m["runs"] == 1 and not m["converged"] and m["stopped"] == "budget"
