"""The statistical protocol every `tracehouse bench` experiment shares (seed 003, section 4.4).

Owns `stats` (mean and standard error with the seed's formulas 1-3: population
deviation over sqrt(n)) and `repeat` (run a measurement until the standard error is
below 5 % of the mean, at least 5 times, at most `max_runs` times or until a time
budget is spent). What `repeat` returns always says whether the criterion was met,
so a report can name every figure where it was not.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

MIN_RUNS = 5
REL_SE = 0.05


def stats(xs: list[float]) -> tuple[float, float]:
    """Mean and standard error (population deviation / sqrt(n), the seed's formulas 1-3)."""
    n = len(xs)
    mean = sum(xs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / n)
    return mean, sd / math.sqrt(n)


def summary(samples: list[float], rel_se: float = REL_SE) -> dict:
    """The protocol's verdict over `samples`: mean, se, rel_se, runs, converged."""
    mean, se = stats(samples)
    rel = se / mean if mean else None
    return {
        "mean": mean,
        "se": se,
        "rel_se": rel,
        "runs": len(samples),
        "samples": samples,
        "converged": rel is not None and rel < rel_se,
    }


def repeat(
    measure: Callable[[], float],
    *,
    min_runs: int = MIN_RUNS,
    max_runs: int = 20,
    rel_se: float = REL_SE,
    budget_s: float | None = None,
    warmup: bool = False,
) -> dict:
    """Call `measure()` (one timed run, returning its figure) until the standard error of
    the figures is below `rel_se` of their mean, at least `min_runs` times.

    Stops early at `max_runs`, or once `budget_s` seconds of wall time are spent (at least
    one run is always made): the result then has converged False and says why in `stopped`.
    `warmup`: one discarded call first (connections, caches, JITs warm: the seed measured
    steady state).
    """
    if warmup:
        measure()
    t0 = time.monotonic()
    samples: list[float] = []
    stopped = "se"
    while True:
        samples.append(measure())
        n = len(samples)
        if n >= min_runs:
            mean, se = stats(samples)
            if mean == 0 or se / mean < rel_se:
                break
        if n >= max_runs:
            stopped = "max_runs"
            break
        if budget_s is not None and time.monotonic() - t0 >= budget_s:
            stopped = "budget"
            break
    out = summary(samples, rel_se)
    out["converged"] = out["converged"] and n >= min_runs  # the seed's rule needs both
    out["stopped"] = "se" if out["converged"] else stopped
    return out


def mark(m: dict) -> str:
    """'' when the protocol's criterion was met, else '*' (footnoted by the report)."""
    return "" if m.get("converged") and m.get("runs", 0) >= MIN_RUNS else "*"
