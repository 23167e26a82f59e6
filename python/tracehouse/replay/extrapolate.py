"""`tracehouse extrapolate`: from a few measured load levels to many (seed 002's last step).

Owns the analysis over the measured runs (`runs.py`) and the models fitted to them
(`models.py`): predictions per concurrency, the concurrency at which a utilisation or
response-time bound is crossed, the fit's checks (R² and the largest error at the fitted
points, errors on held-out runs) and its refusals; and synthetic systems with known parameters
(tests and `tracehouse bench replay`). The plot is `plot.py`.

What is fitted: runs at fewer than 2 distinct concurrencies are refused (a line needs
two points), 2 are fitted with a warning (seed 002: enough for PerfExt, but nothing is
left to check the other models against), 3 or more silently. Replays of one trace are
grouped by their settings (timing, real-time priority granted, cold cache, path
mapping): the latest valid run's group is fitted, the others and every failed run
(cancelled, or invalid: the target filled up) are left out and listed. Measurements
that fall as concurrency rises (throughput, response time) are flagged: a closed
system below saturation does not do that, so either noise or a bottleneck shows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import BadInput
from .models import MODEL_CLASSES, MODELS, MVA, USL, UTIL_BOUND, Model, PerfExt, _usl
from .runs import Runs, describe_settings, read_runs, runs_from_replays, runs_from_rows

# -- the analysis -------------------------------------------------------------------------


def crossing(
    model: Model, *, util_bound: float = UTIL_BOUND, rt_bound: float | None = None, limit: float = 1e6
) -> dict:
    """The smallest integer concurrency at which any utilisation reaches `util_bound` (and the
    resource), and at which R reaches `rt_bound`; None when not within `limit`. Scanned in
    blocks of a grid (every integer to 64, then 5 % steps), refined to the integer, stopping
    once both are found (MVA's cost grows with the largest concurrency asked)."""
    out: dict = {"util_bound": util_bound, "util": None, "resource": None, "rt_bound": rt_bound, "rt": None}
    grid, n = [], 1.0
    while n <= limit:
        grid.append(n)
        n = n + 1 if n < 64 else math.ceil(n * 1.05)
    g = np.array(grid)
    want_rt = rt_bound is not None
    prev = 0
    for end in range(64, len(g) + 64, 64):
        block = g[prev:end]
        if not len(block):
            break
        p = model.predict(block)
        for k, u in p.util.items():
            hit = np.nonzero(u >= util_bound)[0]
            if len(hit) and out["util"] is None:
                i = _refine(model, g, prev + hit[0], lambda q, k=k: q.util[k][0] >= util_bound)
                best = [(i, k)]
                for k2, u2 in p.util.items():  # another resource may cross in the same step
                    if k2 != k and np.any(u2[: hit[0] + 1] >= util_bound):
                        best.append(
                            (
                                _refine(
                                    model,
                                    g,
                                    prev + int(np.argmax(u2 >= util_bound)),
                                    lambda q, k2=k2: q.util[k2][0] >= util_bound,
                                ),
                                k2,
                            )
                        )
                out["util"], out["resource"] = min(best)
        if want_rt and out["rt"] is None and not np.all(np.isnan(p.r)):
            hit = np.nonzero(p.r >= rt_bound)[0]
            if len(hit):
                out["rt"] = _refine(model, g, prev + hit[0], lambda q: q.r[0] >= rt_bound)
        if out["util"] is not None and (not want_rt or out["rt"] is not None):
            break
        if isinstance(model, MVA) and block[-1] * model.customers > MVA.MAX_POPULATION:
            break
        prev = end
    return out


def _refine(model: Model, g: np.ndarray, i: int, test) -> int:
    """The first integer concurrency in (g[i-1], g[i]] passing `test`."""
    lo = int(g[i - 1]) if i > 0 else 0
    for n in range(lo + 1, int(g[i]) + 1):
        if test(model.predict([n])):
            return n
    return int(g[i])


def _r2(pred: np.ndarray, meas: np.ndarray) -> float | None:
    """1 - SS_res / SS_tot (None when the measurements do not vary: nothing to explain)."""
    ok = ~np.isnan(meas) & ~np.isnan(pred)
    if ok.sum() < 2:
        return None
    tot = float(np.sum((meas[ok] - meas[ok].mean()) ** 2))
    if tot <= 0:
        return None
    return 1.0 - float(np.sum((pred[ok] - meas[ok]) ** 2)) / tot


def _max_rel(pred: np.ndarray, meas: np.ndarray) -> float | None:
    ok = ~np.isnan(meas) & ~np.isnan(pred) & (meas != 0)
    return float(np.max(np.abs(pred[ok] / meas[ok] - 1))) if ok.any() else None


# A model whose fitted points miss the measurements by more than this is flagged.
FIT_WARN = 0.25


def non_monotonic(runs: Runs) -> list[dict]:
    """Where a measurement falls as concurrency rises: throughput, or response time (means
    over the runs at each concurrency)."""
    out = []
    levels = np.unique(runs.n)
    for metric, v in (("throughput", runs.x), ("response_time", runs.r)):
        means = [
            float(np.nanmean(v[runs.n == lv])) if np.any(~np.isnan(v[runs.n == lv])) else math.nan for lv in levels
        ]
        for i in range(1, len(levels)):
            if means[i] < means[i - 1]:
                out.append(
                    {
                        "metric": metric,
                        "from": float(levels[i - 1]),
                        "to": float(levels[i]),
                        "values": [means[i - 1], means[i]],
                    }
                )
    return out


@dataclass
class Extrapolation:
    runs: Runs
    fit_runs: Runs
    held: Runs | None
    models: dict[str, Model]
    at: np.ndarray
    errors: dict[str, str]
    util_bound: float
    rt_bound: float | None
    warnings: list[str] = field(default_factory=list)

    def fit(self) -> dict:
        """Per model: R² and the largest relative error at the fitted points, for throughput
        and response time; the mean absolute error on held-out runs."""
        out = {}
        fr = self.fit_runs
        held = self.holdout()
        for m, mod in self.models.items():
            p = mod.predict(fr.n)
            q = {
                "throughput": {"r2": _r2(p.x, fr.x), "max_error": _max_rel(p.x, fr.x)},
                "response_time": {"r2": _r2(p.r, fr.r), "max_error": _max_rel(p.r, fr.r)},
            }
            for metric, key in (("throughput", "throughput_error"), ("response_time", "response_time_error")):
                errs = [abs(h[m][key]) for h in held if h[m].get(key) is not None]
                q[metric]["holdout_error"] = float(np.mean(errs)) if errs else None
            out[m] = q
        return out

    def predictions(self) -> list[dict]:
        rows = []
        preds = {m: mod.predict(self.at) for m, mod in self.models.items()}
        for i, n in enumerate(self.at):
            row = {"concurrency": float(n)}
            for m, p in preds.items():
                row[m] = {
                    "throughput": float(p.x[i]),
                    "response_time": _f(p.r[i]),
                    "util": {k: float(v[i]) for k, v in p.util.items()},
                    "in_range": bool(p.in_range[i]),
                }
            rows.append(row)
        return rows

    def holdout(self) -> list[dict]:
        if self.held is None:
            return []
        out = []
        preds = {m: mod.predict(self.held.n) for m, mod in self.models.items()}
        for i, n in enumerate(self.held.n):
            row = {
                "concurrency": float(n),
                "measured": {"throughput": float(self.held.x[i]), "response_time": _f(self.held.r[i])},
                "ratio_to_fitted_max": float(n / self.fit_runs.n.max()),
            }
            for m, p in preds.items():
                row[m] = {
                    "throughput": float(p.x[i]),
                    "throughput_error": float(p.x[i] / self.held.x[i] - 1),
                    "response_time": _f(p.r[i]),
                    "response_time_error": _f(p.r[i] / self.held.r[i] - 1) if not np.isnan(self.held.r[i]) else None,
                    "in_range": bool(p.in_range[i]),
                }
            out.append(row)
        return out

    def to_json(self) -> dict:
        return {
            "source": self.runs.source,
            "runs": self.runs.to_json(),
            "settings": self.runs.settings,
            "excluded": self.runs.excluded,
            "warnings": self.warnings,
            "non_monotonic": non_monotonic(self.runs),
            "fit": self.fit(),
            "fitted_on": [float(n) for n in self.fit_runs.n],
            "held_out": [float(n) for n in self.held.n] if self.held is not None else [],
            "models": {m: mod.params() for m, mod in self.models.items()},
            "model_errors": self.errors,
            "predictions": self.predictions(),
            "bounds": {
                m: crossing(mod, util_bound=self.util_bound, rt_bound=self.rt_bound) for m, mod in self.models.items()
            },
            "holdout": self.holdout(),
        }


def _f(v) -> float | None:
    v = float(v)
    return None if math.isnan(v) else v


def extrapolate(
    runs: Runs,
    *,
    models=MODELS,
    holdout: int = 0,
    at=None,
    util_bound: float = UTIL_BOUND,
    rt_bound: float | None = None,
) -> Extrapolation:
    """Fit `models` on the runs (the `holdout` highest concurrencies left out) and predict."""
    for m in models:
        if m not in MODEL_CLASSES:
            raise BadInput(f"unknown model {m!r}", expected=", ".join(MODELS))
    if holdout < 0 or holdout >= len(runs.n):
        raise BadInput(f"--holdout {holdout}: {len(runs.n)} runs", expected="fewer held out than there are runs")
    keep = np.ones(len(runs.n), bool)
    if holdout:
        keep[-holdout:] = False
    fit_runs = runs.subset(keep)
    held = runs.subset(~keep) if holdout else None
    levels = ", ".join(f"{v:g}" for v in np.unique(fit_runs.n))
    what = f"{len(fit_runs.n)} run{'s' if len(fit_runs.n) != 1 else ''} at concurrency {levels}" + (
        f" (after holding out {holdout})" if holdout else ""
    )
    if fit_runs.distinct() < 2:
        raise BadInput(
            f"{runs.source}: {what}: a model needs runs at 2 or more distinct concurrencies, 3 or more to be checked",
            expected="runs at more concurrencies (--copies 1, 2, 4, ...)",
        )
    warnings = []
    if fit_runs.distinct() == 2:
        warnings.append(
            f"fitted on 2 concurrencies ({levels}): enough for PerfExt (seed 002), but every model "
            f"passes through them with nothing left to check it; measure a third"
        )
    for f in non_monotonic(runs):
        unit = "/s" if f["metric"] == "throughput" else " s"
        warnings.append(
            f"non-monotonic: {f['metric'].replace('_', ' ')} falls from {f['values'][0]:.4g}{unit} at "
            f"concurrency {f['from']:g} to {f['values'][1]:.4g}{unit} at {f['to']:g} (noise, or a "
            f"bottleneck already reached)"
        )
    fitted: dict[str, Model] = {}
    errors: dict[str, str] = {}
    for m in models:
        try:
            fitted[m] = MODEL_CLASSES[m]().fit(fit_runs)
        except BadInput as e:
            errors[m] = e.reason
    if not fitted:
        raise BadInput("no model could be fitted: " + "; ".join(f"{k}: {v}" for k, v in errors.items()))
    if at is None:
        top = float(runs.n.max())
        at = sorted({*runs.n.tolist(), *(top * f for f in (2, 4, 8))})
    ex = Extrapolation(runs, fit_runs, held, fitted, np.asarray(at, np.float64), errors, util_bound, rt_bound, warnings)
    for m, q in ex.fit().items():
        for metric, v in q.items():
            if v["max_error"] is not None and v["max_error"] > FIT_WARN:
                warnings.append(
                    f"{m} misses the measured {metric.replace('_', ' ')} by up to "
                    f"{v['max_error'] * 100:.0f} % at the fitted points"
                )
    return ex


# -- synthetic systems with known parameters (tests and `tracehouse bench replay`) ---------


def synthetic_usl(
    ns, lam: float, sigma: float, kappa: float, *, noise: float = 0.0, seed: int = 1, demand: float | None = None
) -> Runs:
    """Runs of a system following the USL exactly, with multiplicative noise; a resource of
    service demand `demand` (default 0.8 / the USL's peak throughput) gives utilisations."""
    rng = np.random.default_rng(seed)
    n = np.asarray(ns, np.float64)
    x = _usl(n, lam, sigma, kappa) * (1 + noise * rng.standard_normal(len(n)))
    if demand is None:
        peak = _usl(np.arange(1, 10_000), lam, sigma, kappa).max()
        demand = 0.8 / peak
    util = {"disk": np.minimum(1.0, x * demand)}
    return Runs(n, x, np.full(len(n), np.nan), util, {"disk": 1}, 1.0, f"usl(λ={lam}, σ={sigma}, κ={kappa})")


def synthetic_mva(
    ns,
    demands_s: dict[str, float],
    think_s: float,
    *,
    servers: dict[str, int] | None = None,
    delay_s: float = 0.0,
    noise: float = 0.0,
    seed: int = 1,
) -> Runs:
    """Runs of a closed queueing network solved by exact MVA (no Seidmann approximation:
    multi-server stations by the exact load-dependent recursion), with multiplicative noise."""
    rng = np.random.default_rng(seed)
    servers = servers or {k: 1 for k in demands_s}
    n = np.asarray(ns, np.float64)
    x = np.array([_exact_mva(int(m), demands_s, servers, think_s, delay_s) for m in n])
    x = x * (1 + noise * rng.standard_normal(len(n)))
    r = n / x - think_s
    util = {k: x * d / servers[k] for k, d in demands_s.items()}
    return Runs(n, x, r, util, dict(servers), 1.0, f"mva(D={demands_s}, Z={think_s}, c={servers})")


def _exact_mva(pop: int, demands_s: dict, servers: dict, think: float, delay: float) -> float:
    """Throughput of a closed network with multi-server stations (exact, marginal probabilities)."""
    names = list(demands_s)
    d = {k: demands_s[k] for k in names}
    c = {k: servers.get(k, 1) for k in names}
    # p[k][j]: probability of j customers at station k (load-dependent MVA, Reiser-Lavenberg)
    p = {k: np.zeros(pop + 1) for k in names}
    for k in names:
        p[k][0] = 1.0
    x = 0.0
    for m in range(1, pop + 1):
        r = {}
        for k in names:
            rate = lambda j, k=k: min(j, c[k]) / c[k]  # noqa: E731 (service rate multiplier)
            r[k] = sum(j * d[k] / (rate(j) * c[k]) * p[k][j - 1] for j in range(1, m + 1))
        x = m / (think + delay + sum(r.values()))
        for k in names:
            rate = lambda j, k=k: min(j, c[k]) / c[k]  # noqa: E731
            new = np.zeros(pop + 1)
            for j in range(1, m + 1):
                new[j] = x * d[k] / (rate(j) * c[k]) * p[k][j - 1]
            new[0] = max(0.0, 1 - new[1:].sum())
            p[k] = new
    return x


# The face of `tracehouse extrapolate` (the CLI, `bench replay` and the tests use it): the analysis
# here, the runs and the models re-exported from their modules.
__all__ = [
    "MODELS",
    "MVA",
    "UTIL_BOUND",
    "USL",
    "Extrapolation",
    "Model",
    "PerfExt",
    "Runs",
    "crossing",
    "describe_settings",
    "extrapolate",
    "read_runs",
    "runs_from_replays",
    "runs_from_rows",
    "synthetic_mva",
    "synthetic_usl",
]
