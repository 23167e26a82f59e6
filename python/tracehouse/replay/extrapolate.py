"""`tracehouse extrapolate`: from a few measured load levels to many (seed 002's last step).

Owns the table of measured runs (`Runs`: concurrency, throughput, response time,
per-resource utilisation, read from replay results or any load-test CSV/Parquet/
JSON), three models fitted to it, predictions per concurrency, the concurrency at
which a utilisation or response-time bound is crossed, the fit's checks (R² and the
largest error at the fitted points, errors on held-out runs) and its refusals. The
plot is `plot.py`.

What is fitted: runs at fewer than 2 distinct concurrencies are refused (a line needs
two points), 2 are fitted with a warning (seed 002: enough for PerfExt, but nothing is
left to check the other models against), 3 or more silently. Replays of one trace are
grouped by their settings (timing, real-time priority granted, cold cache, path
mapping): the latest valid run's group is fitted, the others and every failed run
(cancelled, or invalid: the target filled up) are left out and listed. Measurements
that fall as concurrency rises (throughput, response time) are flagged: a closed
system below saturation does not do that, so either noise or a bottleneck shows.

Models (each answers throughput X, response time R and utilisations U_k at N):

- **PerfExt** (Duttagupta & Mansharamani 2011, as seed 002 uses it): the bottleneck's
  service demand by the utilisation law (D_k = busy servers / X, fitted through the
  origin over the runs) gives X_max = min_k c_k / D_k; X(N) is the linear regression
  of the runs up to X_max / 2, then a logistic curve to X_max continuing it (same value
  and slope at X_max / 2). PerfExt stops at 90 % of X_max: beyond, predictions carry
  `in_range: false`. When runs already lie above X_max / 2, the logistic's rate and
  midpoint are least-squares fitted to them instead.
- **USL** (Gunther): X(N) = λN / (1 + σ(N-1) + κN(N-1)), λ, σ, κ ≥ 0. Fitted on relative
  errors of X: the linearised form N/X = (1 + σ(N-1) + κN(N-1)) / λ is solved exactly
  as a nonnegative weighted least-squares problem (every active set of σ, κ tried),
  then refined by Levenberg-Marquardt on the relative residuals, kept in bounds. Two or
  three runs fit λ and σ (κ = 0); one run, λ alone; κ needs four.
- **MVA** (exact mean value analysis of a closed network): one queueing station per
  measured resource with its demand D_k (c_k > 1 servers by Seidmann's split: D_k / c_k
  queueing plus D_k (c_k - 1) / c_k delay), a pure delay D_0 for time not spent on a
  measured resource, and a think time Z. Z comes from the interactive response time
  law (Z = N/X - R, averaged over the runs), D_0 from a one-dimensional fit of the
  runs' throughput.

R(N) for PerfExt and USL is fitted to the measured response times, not derived from
the law as N/X - Z: where think time dwarfs response time (seed 002's replays: Z of
milliseconds to seconds, R of a fraction of a millisecond) the difference cancels to
noise (measured: 0.43, 0.46, 0.32 ms at 1, 2, 4 copies came out as 0.97, 0.30,
0.008 ms, then 0). The fit is R = a + b U/(1 - U), a, b >= 0, with U the model's
utilisation of the bottleneck at N: the base response time plus an M/M/1-shaped
queueing term, flat while the device idles. From U = 0.9 on (beyond PerfExt's range),
R is at least the law's N/X - Z, which is then large next to its error. Population:
the number of customers at concurrency N is N times `customers` (for replays, the
traced threads per copy; 1 for a load-test table), so R is per request of one customer.
USL's throughput is capped at the bottleneck's capacity (min c_k / D_k) when demands
are known: no prediction puts a resource above 100 %.

Fitting uses numpy only (no scipy): three parameters at most, the linearised USL
solved exactly, a few LM iterations, golden-section for one parameter. scipy would
add ~40 MB for what fits in a page here.

Over 600 lines: the runs table, three models (PerfExt, USL, MVA) that share it, the bounds and
the plot; each model is a few functions.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np

from ..errors import BadInput

if TYPE_CHECKING:
    pass

MODELS = ("perfext", "usl", "mva")
UTIL_BOUND = 0.9

# -- the measured runs --------------------------------------------------------------------


@dataclass
class Runs:
    """Measured load levels: concurrency N, throughput X (1/s), response time R (s; nan when
    not measured), utilisations (fractions of each resource's capacity), servers per resource,
    customers per unit of concurrency."""

    n: np.ndarray
    x: np.ndarray
    r: np.ndarray
    util: dict[str, np.ndarray] = field(default_factory=dict)
    servers: dict[str, int] = field(default_factory=dict)
    customers: float = 1.0
    source: str = ""
    labels: list[str] = field(default_factory=list)
    # Replays left out of the fit: {"run": trace, "reason": why}; and the fitted runs' settings.
    excluded: list[dict] = field(default_factory=list)
    settings: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        order = np.argsort(self.n, kind="stable")
        self.n = np.asarray(self.n, np.float64)[order]
        self.x = np.asarray(self.x, np.float64)[order]
        self.r = np.asarray(self.r, np.float64)[order]
        self.util = {k: np.asarray(v, np.float64)[order] for k, v in self.util.items()}
        if self.labels:
            self.labels = [self.labels[i] for i in order]
        if len(self.n) == 0:
            raise BadInput(f"{self.source}: no runs", expected="at least one measured run")
        if np.any(~np.isfinite(self.n)) or np.any(self.n <= 0):
            raise BadInput(f"{self.source}: concurrency must be positive numbers")
        if np.any(~np.isfinite(self.x)) or np.any(self.x <= 0):
            raise BadInput(f"{self.source}: throughput must be positive numbers")
        for k, v in self.util.items():
            if np.any(v < 0) or np.any(v > 1.5):
                raise BadInput(f"{self.source}: utilisation {k!r} must be a fraction of capacity (0..1)",
                               column=f"util_{k}")

    def subset(self, keep: np.ndarray) -> "Runs":
        return Runs(self.n[keep], self.x[keep], self.r[keep], {k: v[keep] for k, v in self.util.items()},
                    dict(self.servers), self.customers, self.source,
                    [lb for lb, k in zip(self.labels, keep) if k] if self.labels else [], list(self.excluded),
                    dict(self.settings))

    def distinct(self) -> int:
        """Distinct concurrencies measured."""
        return len(np.unique(self.n))

    def to_json(self) -> list[dict]:
        rows = []
        for i in range(len(self.n)):
            row = {"concurrency": float(self.n[i]), "throughput": float(self.x[i]),
                   "response_time": None if math.isnan(self.r[i]) else float(self.r[i])}
            row.update({f"util_{k}": float(v[i]) for k, v in self.util.items()})
            if self.labels:
                row["run"] = self.labels[i]
            rows.append(row)
        return rows


ALIASES = {
    "n": ("concurrency", "users", "n", "clients", "threads", "copies", "vus"),
    "x": ("throughput", "x", "ops_per_s", "tps", "rps", "requests_per_s"),
    "r": ("response_time", "r", "rt", "response_time_s", "latency", "latency_s"),
}
R_SCALED = {"response_time_ms": 1e-3, "rt_ms": 1e-3, "latency_ms": 1e-3, "response_time_us": 1e-6,
            "latency_us": 1e-6}


def runs_from_rows(rows: list[dict], source: str, customers: float = 1.0) -> Runs:
    """A `Runs` from dict rows with columns named as in `ALIASES`, `util_<resource>` (fraction;
    `util_<resource>_pct` in percent) and optional `servers_<resource>`."""
    if not rows:
        raise BadInput(f"{source}: no rows", expected="a header and at least one run")
    cols = {c.strip().lower(): c for c in rows[0]}

    def pick(key: str) -> str | None:
        return next((cols[a] for a in ALIASES[key] if a in cols), None)

    def num(row: dict, col: str, line: int) -> float:
        v = row.get(col)
        if v is None or (isinstance(v, str) and v.strip() == ""):
            return math.nan
        try:
            return float(v)
        except (TypeError, ValueError):
            raise BadInput(f"{v!r} is not a number", file=source, line=line, column=col) from None

    nc, xc, rc = pick("n"), pick("x"), pick("r")
    rscale = 1.0
    if rc is None:
        rc = next((cols[a] for a in R_SCALED if a in cols), None)
        rscale = R_SCALED.get(rc.lower(), 1.0) if rc else 1.0
    if nc is None or xc is None:
        raise BadInput(f"{source}: no {'concurrency' if nc is None else 'throughput'} column",
                       expected="columns concurrency, throughput [, response_time (s), util_<resource> (0..1)]")
    util_cols = {}
    servers = {}
    for low, orig in cols.items():
        if low.startswith("util_"):
            name, scale = low[5:], 1.0
            if name.endswith("_pct"):
                name, scale = name[:-4], 0.01
            util_cols[name] = (orig, scale)
        elif low.startswith("servers_"):
            servers[low[8:]] = orig
    n, x, r = [], [], []
    util: dict[str, list[float]] = {k: [] for k in util_cols}
    serv: dict[str, int] = {}
    for i, row in enumerate(rows):
        line = i + 2
        n.append(num(row, nc, line))
        x.append(num(row, xc, line))
        r.append(num(row, rc, line) * rscale if rc else math.nan)
        for k, (c, scale) in util_cols.items():
            util[k].append(num(row, c, line) * scale)
        for k, c in servers.items():
            serv[k] = int(num(row, c, line))
    if "customers" in cols:
        customers = num(rows[0], cols["customers"], 2)
    runs = Runs(np.array(n), np.array(x), np.array(r), {k: np.array(v) for k, v in util.items()},
                {k: serv.get(k, 1) for k in util}, customers, source)
    return runs


def read_runs(path: str | Path) -> Runs:
    """Runs from a CSV, Parquet or JSON (list of objects) file."""
    p = Path(path)
    if not p.exists():
        raise BadInput(f"{p}: no such file", expected="a CSV/Parquet/JSON table of runs, or a trace with replays")
    if p.suffix == ".parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(p).to_pylist()
    elif p.suffix == ".json":
        rows = json.loads(p.read_text())
        if isinstance(rows, dict):
            rows = rows.get("runs", [])
    else:
        with open(p, newline="") as f:
            rows = list(csv.DictReader(f))
    return runs_from_rows(rows, str(p))


def replay_settings(summary: dict) -> dict:
    """What makes two replays of a trace comparable: timing, real-time priority granted, cold
    cache, path mapping."""
    return {"timing": summary.get("timing"), "realtime": bool((summary.get("realtime") or {}).get("granted")),
            "cold": bool((summary.get("prepare") or {}).get("cold")), "maps": list(summary.get("maps") or [])}


def describe_settings(settings: dict) -> str:
    return (f"timing {settings['timing']}, realtime {'yes' if settings['realtime'] else 'no'}, "
            f"cold {'yes' if settings['cold'] else 'no'}" + (f", map {' '.join(settings['maps'])}"
                                                           if settings["maps"] else ""))


def runs_from_replays(summaries: list[dict], source: str) -> Runs:
    """Runs from replay summaries (`replay.runs`): concurrency = copies, throughput = calls/s,
    response time = mean call latency, utilisation of the device (busy share) and of CPU (the
    replayer's own CPU over all cores: neighbours on a shared machine are left out). Failed
    runs (cancelled, invalid) are left out, and so are runs whose settings differ from the
    latest valid run's (module documentation); `Runs.excluded` says which and why."""
    excluded, valid = [], []
    for s in summaries:
        if s.get("valid") is False:
            excluded.append({"run": s["trace"], "reason": f"invalid: {s.get('invalid', 'marked invalid')}"})
        elif not s.get("complete", True):
            excluded.append({"run": s["trace"], "reason": "incomplete (cancelled before every call ran)"})
        else:
            valid.append(s)
    if not valid:
        raise BadInput(f"{source}: no valid replay to fit ({len(excluded)} left out: "
                       + "; ".join(f"{x['run']}: {x['reason']}" for x in excluded[:3]) + ")",
                       expected="complete replays (tracehouse replay TRACE --root DIR --copies K)")
    settings = replay_settings(valid[-1])
    summaries = []
    for s in valid:
        other = replay_settings(s)
        if other == settings:
            summaries.append(s)
        else:
            excluded.append({"run": s["trace"], "reason": f"other settings: {describe_settings(other)} "
                                                          f"(fitted: {describe_settings(settings)})"})
    n = [s["copies"] for s in summaries]
    x = [s["ops_per_s"] for s in summaries]
    r = [s["response_time_s"] for s in summaries]
    util: dict[str, list[float]] = {}
    if all("device_util" in s["utilisation"] for s in summaries):
        util["device"] = [s["utilisation"]["device_util"] for s in summaries]
    cores = summaries[-1].get("cores") or 1
    util["cpu"] = [s["utilisation"]["replay_cpu_cores"] / cores for s in summaries]
    runs = Runs(np.array(n, float), np.array(x, float), np.array(r, float), {k: np.array(v) for k, v in util.items()},
                {"device": 1, "cpu": cores}, float(summaries[-1]["threads"]), source,
                [s["trace"] for s in summaries], excluded, settings)
    return runs


# -- models -------------------------------------------------------------------------------


@dataclass
class Prediction:
    n: np.ndarray
    x: np.ndarray
    r: np.ndarray
    util: dict[str, np.ndarray]
    in_range: np.ndarray


def demands(runs: Runs) -> dict[str, float]:
    """Service demand per request of each resource (s): busy servers = D x X through the origin."""
    out = {}
    for k, u in runs.util.items():
        busy = u * runs.servers.get(k, 1)
        out[k] = float(np.sum(busy * runs.x) / np.sum(runs.x * runs.x))
    return out


def think_time(runs: Runs) -> float | None:
    """Z from the interactive response time law, N/X - R, averaged over the runs (>= 0)."""
    ok = ~np.isnan(runs.r)
    if not ok.any():
        return None
    z = runs.n[ok] * runs.customers / runs.x[ok] - runs.r[ok]
    return float(max(0.0, np.mean(z)))


class Model:
    name = ""

    def fit(self, runs: Runs) -> "Model":
        raise NotImplementedError

    def throughput(self, n: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def params(self) -> dict:
        raise NotImplementedError

    def predict(self, n) -> Prediction:
        n = np.atleast_1d(np.asarray(n, np.float64))
        x = self.throughput(n)
        r = self.response(n, x)
        util = {k: x * d / self.servers.get(k, 1) for k, d in self.d.items()}
        return Prediction(n, x, r, util, self.in_range(n, x))

    def response(self, n: np.ndarray, x: np.ndarray) -> np.ndarray:
        """R at `n` (throughput `x`): the fit to the measured response times (module
        documentation), else the law where no response time was measured."""
        law = (np.maximum(0.0, n * self.customers / x - self.z) if self.z is not None
               else np.full_like(n, np.nan))
        rfit = getattr(self, "rfit", None)
        if rfit is None:
            return law
        u = self.bottleneck_util(x)
        a, b = rfit
        r = a + b * _queueing(u)
        high = (u >= UTIL_BOUND) & ~np.isnan(law)
        return np.where(high, np.maximum(r, law), r)

    def bottleneck_util(self, x: np.ndarray) -> np.ndarray:
        """The highest utilisation of any measured resource at throughput `x` (0 when none)."""
        if not self.d:
            return np.zeros_like(np.asarray(x, np.float64))
        return np.max([x * d / self.servers.get(k, 1) for k, d in self.d.items()], axis=0)

    def fit_response(self, runs: Runs) -> None:
        """a and b of R = a + b U/(1-U) by least squares on relative errors, a, b >= 0, over
        the runs with a measured R (U from this model's own throughput there)."""
        ok = ~np.isnan(runs.r) & (runs.r > 0)
        self.rfit = None
        if not ok.any():
            return
        r = runs.r[ok]
        q = _queueing(self.bottleneck_util(self.throughput(runs.n[ok])))
        w = 1.0 / r
        best, best_err = (float(np.mean(r)), 0.0), math.inf
        for cols in ((0, 1), (0,), (1,)):  # every active set of a, b >= 0
            a = np.stack([np.ones_like(r), q], axis=1)[:, cols] * w[:, None]
            sol, *_ = np.linalg.lstsq(a, r * w, rcond=None)
            if np.any(sol < 0) or not np.all(np.isfinite(sol)):
                continue
            c = np.zeros(2)
            c[list(cols)] = sol
            err = float(np.sum(((c[0] + c[1] * q - r) * w) ** 2))
            if err < best_err:
                best, best_err = (float(c[0]), float(c[1])), err
        self.rfit = best

    def in_range(self, n: np.ndarray, x: np.ndarray) -> np.ndarray:
        return np.ones(len(n), bool)

    def _common(self, runs: Runs) -> None:
        self.d = demands(runs)
        self.servers = dict(runs.servers)
        self.customers = runs.customers
        self.z = think_time(runs)
        self.rfit = None

    def capacity(self) -> float:
        """The bottleneck's capacity, min c_k / D_k (inf without demands)."""
        caps = [self.servers.get(k, 1) / d for k, d in self.d.items() if d > 0]
        return min(caps) if caps else math.inf


def _queueing(u: np.ndarray) -> np.ndarray:
    """U / (1 - U), U kept below 1 (a saturated resource's queue is bounded by the population)."""
    u = np.clip(np.asarray(u, np.float64), 0.0, 0.99)
    return u / (1 - u)


class PerfExt(Model):
    """Linear regression to X_max/2, logistic to X_max (module documentation)."""

    name = "perfext"

    def fit(self, runs: Runs) -> "PerfExt":
        self._common(runs)
        caps = {k: self.servers.get(k, 1) / d for k, d in self.d.items() if d > 0}
        if not caps:
            raise BadInput(f"{runs.source}: PerfExt needs the utilisation of at least one resource",
                           expected="a util_<resource> column that grows with throughput")
        self.bottleneck = min(caps, key=caps.get)
        self.xmax = caps[self.bottleneck]
        n, x = runs.n, runs.x
        low = x <= self.xmax / 2
        if len(np.unique(n[low])) >= 2:
            # The line through the runs below half the maximum (lstsq: no RankWarning to leak).
            (self.b, self.a), *_ = np.linalg.lstsq(np.stack([n[low], np.ones(low.sum())], axis=1), x[low], rcond=None)
            self.a, self.b = float(self.a), float(self.b)
        else:
            pts = n[low] if low.any() else n[:1]
            xs = x[low] if low.any() else x[:1]
            self.a, self.b = 0.0, float(np.sum(pts * xs) / np.sum(pts * pts))
        if self.b <= 0:
            self.a, self.b = 0.0, float(x[0] / n[0])
        self.nh = (self.xmax / 2 - self.a) / self.b
        self.k = 4 * self.b / self.xmax
        high = x > self.xmax / 2
        if high.any():
            # Runs already on the S curve: fit its rate and midpoint to all runs above half.
            self.k, self.nh = _fit_logistic(n, x, self.xmax, self.k, self.nh)
        self.fit_response(runs)
        return self

    def throughput(self, n):
        lin = self.a + self.b * n
        sig = self.xmax / (1 + np.exp(-self.k * (n - self.nh)))
        return np.where(n <= self.nh, np.maximum(lin, 1e-12), sig)

    def in_range(self, n, x):
        return x <= UTIL_BOUND * self.xmax + 1e-9

    def params(self):
        return {"x_max": self.xmax, "bottleneck": self.bottleneck, "demands_s": self.d, "intercept": self.a,
                "slope": self.b, "n_half": self.nh, "logistic_rate": self.k, "think_s": self.z,
                "n_90": self.nh + math.log(9) / self.k if self.k > 0 else None, **_rparams(self)}


def _fit_logistic(n, x, xmax, k0, nh0):
    """Least squares on relative errors of xmax / (1 + exp(-k (n - nh))) over (k, nh)."""
    def res(p):
        k, nh = p
        return (xmax / (1 + np.exp(-k * (n - nh))) - x) / x
    p = _lm(res, np.array([max(k0, 1e-9), nh0]), lower=np.array([1e-12, -np.inf]))
    return float(p[0]), float(p[1])


class USL(Model):
    """Universal Scalability Law (module documentation)."""

    name = "usl"

    def fit(self, runs: Runs) -> "USL":
        self._common(runs)
        n, x = runs.n, runs.x
        npts = len(n)
        # Parameters the runs can carry (lambda, sigma, kappa), leaving a residual to fit against:
        # three parameters through three runs chase their noise (measured: a kappa from 1-2-4
        # copies bent the curve down where the held-out 8 and 16 kept rising).
        free = 1 if npts == 1 else 2 if npts <= 3 else 3
        y = n / x
        cols = [np.ones_like(n), n - 1, n * (n - 1)][:free]
        a = np.stack(cols, axis=1)
        w = 1.0 / y  # relative error of N/X ~ relative error of X
        coef = _nnls(a * w[:, None], y * w)
        lam = 1.0 / coef[0] if coef[0] > 0 else float(x[0] / n[0])
        sigma = coef[1] * lam if free > 1 else 0.0
        kappa = coef[2] * lam if free > 2 else 0.0
        p0 = np.array([lam, sigma, kappa])[:free]

        def res(p):
            q = np.concatenate([p, np.zeros(3 - free)])
            return (_usl(n, *q) - x) / x
        p = _lm(res, p0, lower=np.zeros(free))
        self.lam, self.sigma, self.kappa = (np.concatenate([p, np.zeros(3 - free)])).tolist()
        self.fitted = free
        self.fit_response(runs)
        return self

    def throughput(self, n):
        # Never above the bottleneck's capacity: no resource past 100 %.
        return np.minimum(_usl(np.asarray(n, np.float64), self.lam, self.sigma, self.kappa), self.capacity())

    def in_range(self, n, x):
        return _usl(np.asarray(n, np.float64), self.lam, self.sigma, self.kappa) <= self.capacity()

    def params(self):
        peak = math.sqrt((1 - self.sigma) / self.kappa) if self.kappa > 0 and self.sigma < 1 else None
        return {"lambda": self.lam, "sigma": self.sigma, "kappa": self.kappa, "fitted_params": self.fitted,
                "n_peak": peak, "x_peak": float(_usl(np.array([peak]), self.lam, self.sigma, self.kappa)[0])
                if peak else None, "capacity": None if math.isinf(self.capacity()) else self.capacity(),
                "demands_s": self.d, "think_s": self.z, **_rparams(self)}


def _rparams(m: Model) -> dict:
    """The response-time fit's parameters (None: R by the law, no response time measured)."""
    if m.rfit is None:
        return {"response_base_s": None, "response_queueing_s": None}
    return {"response_base_s": m.rfit[0], "response_queueing_s": m.rfit[1]}


def _usl(n, lam, sigma, kappa):
    return lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


class MVA(Model):
    """Exact MVA of a closed network (module documentation)."""

    name = "mva"
    # Largest population solved (the recursion is linear in it).
    MAX_POPULATION = 200_000

    def fit(self, runs: Runs) -> "MVA":
        self._common(runs)
        if not self.d:
            raise BadInput(f"{runs.source}: MVA needs the utilisation of at least one resource",
                           expected="a util_<resource> column")
        pop = runs.n * runs.customers
        if self.z is not None:
            zs = [self.z]
        else:  # no response times: Z too from the throughput
            zs = list(np.linspace(0, float(np.max(pop / runs.x)), 41))
        best = (math.inf, 0.0, 0.0)
        for z in zs:
            self.z = z
            hi = float(np.max(pop / runs.x)) + 1e-9

            def err(d0):
                self.d0 = d0
                self._cache = None
                return float(np.sum(((self._x(pop) - runs.x) / runs.x) ** 2))
            d0 = _golden(err, 0.0, hi)
            e = err(d0)
            if e < best[0]:
                best = (e, z, d0)
        _, self.z, self.d0 = best
        self._cache = None
        return self

    def _x(self, pop: np.ndarray) -> np.ndarray:
        """Throughput at each population (fractional: linear between neighbours) by the exact
        MVA recursion, continued from where the last call stopped."""
        pop = np.minimum(np.asarray(pop, np.float64), self.MAX_POPULATION)
        nmax = int(math.ceil(float(np.max(pop))))
        names = list(self.d)
        c = np.array([max(1, self.servers.get(k, 1)) for k in names], np.float64)
        dk = np.array([self.d[k] for k in names])
        dq = dk / c  # Seidmann: queueing part
        delay = self.d0 + float(np.sum(dk - dq)) + (self.z or 0.0)
        if getattr(self, "_cache", None) is None:
            self._cache = (np.zeros(len(names)), [0.0])
        q, xl = self._cache
        for m in range(len(xl), nmax + 1):
            rk = dq * (1 + q)
            x = m / (delay + rk.sum())
            q = x * rk
            xl.append(x)
        self._cache = (q, xl)
        xs = np.asarray(xl)
        # Fractional populations: linear between neighbours.
        lo = np.floor(pop).astype(int)
        hi = np.minimum(lo + 1, len(xs) - 1)
        f = pop - lo
        return xs[np.maximum(lo, 0)] * (1 - f) + xs[hi] * f

    def throughput(self, n):
        return self._x(np.asarray(n, np.float64) * self.customers)

    def params(self):
        return {"demands_s": self.d, "servers": self.servers, "delay_s": self.d0, "think_s": self.z,
                "customers_per_unit": self.customers}


MODEL_CLASSES: dict[str, Callable[[], Model]] = {"perfext": PerfExt, "usl": USL, "mva": MVA}


# -- numerics -----------------------------------------------------------------------------


def _nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """min |a c - b| with c[1:] >= 0 (c[0] free): every active set of the constrained
    coefficients tried, the best feasible kept (exact for the 1-3 columns used here)."""
    m = a.shape[1]
    best, best_err = None, math.inf
    for mask in range(1 << max(0, m - 1)):
        keep = [0] + [j for j in range(1, m) if not (mask >> (j - 1)) & 1]
        sol, *_ = np.linalg.lstsq(a[:, keep], b, rcond=None)
        if np.any(sol[1:] < 0):
            continue
        c = np.zeros(m)
        c[keep] = sol
        e = float(np.sum((a @ c - b) ** 2))
        if e < best_err:
            best, best_err = c, e
    return best if best is not None else np.linalg.lstsq(a, b, rcond=None)[0]


def _lm(res: Callable[[np.ndarray], np.ndarray], p0: np.ndarray, lower: np.ndarray, iters: int = 200) -> np.ndarray:
    """Levenberg-Marquardt with a forward-difference Jacobian; parameters clipped at `lower`."""
    p = np.maximum(np.asarray(p0, np.float64), lower)
    r = res(p)
    cost = float(r @ r)
    lam = 1e-3
    for _ in range(iters):
        jac = np.empty((len(r), len(p)))
        for j in range(len(p)):
            h = 1e-7 * max(abs(p[j]), 1e-9)
            q = p.copy()
            q[j] += h
            jac[:, j] = (res(q) - r) / h
        g = jac.T @ r
        a = jac.T @ jac
        improved = False
        for _ in range(20):
            try:
                step = np.linalg.solve(a + lam * np.diag(np.diag(a) + 1e-12), -g)
            except np.linalg.LinAlgError:
                lam *= 10
                continue
            q = np.maximum(p + step, lower)
            rq = res(q)
            cq = float(rq @ rq)
            if np.isfinite(cq) and cq < cost:
                p, r, cost = q, rq, cq
                lam = max(lam / 3, 1e-12)
                improved = True
                break
            lam *= 10
        if not improved or cost < 1e-24:
            break
    return p


def _golden(f: Callable[[float], float], lo: float, hi: float, tol: float = 1e-10) -> float:
    """Minimum of a unimodal f on [lo, hi] by golden-section search."""
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    while abs(b - a) > tol * max(1.0, abs(a) + abs(b)):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return (a + b) / 2


# -- the analysis -------------------------------------------------------------------------


def crossing(model: Model, *, util_bound: float = UTIL_BOUND, rt_bound: float | None = None,
             limit: float = 1e6) -> dict:
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
                        best.append((_refine(model, g, prev + int(np.argmax(u2 >= util_bound)),
                                             lambda q, k2=k2: q.util[k2][0] >= util_bound), k2))
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
        means = [float(np.nanmean(v[runs.n == lv])) if np.any(~np.isnan(v[runs.n == lv])) else math.nan
                 for lv in levels]
        for i in range(1, len(levels)):
            if means[i] < means[i - 1]:
                out.append({"metric": metric, "from": float(levels[i - 1]), "to": float(levels[i]),
                            "values": [means[i - 1], means[i]]})
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
            q = {"throughput": {"r2": _r2(p.x, fr.x), "max_error": _max_rel(p.x, fr.x)},
                 "response_time": {"r2": _r2(p.r, fr.r), "max_error": _max_rel(p.r, fr.r)}}
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
                row[m] = {"throughput": float(p.x[i]), "response_time": _f(p.r[i]),
                          "util": {k: float(v[i]) for k, v in p.util.items()}, "in_range": bool(p.in_range[i])}
            rows.append(row)
        return rows

    def holdout(self) -> list[dict]:
        if self.held is None:
            return []
        out = []
        preds = {m: mod.predict(self.held.n) for m, mod in self.models.items()}
        for i, n in enumerate(self.held.n):
            row = {"concurrency": float(n), "measured": {"throughput": float(self.held.x[i]),
                                                         "response_time": _f(self.held.r[i])},
                   "ratio_to_fitted_max": float(n / self.fit_runs.n.max())}
            for m, p in preds.items():
                row[m] = {"throughput": float(p.x[i]), "throughput_error": float(p.x[i] / self.held.x[i] - 1),
                          "response_time": _f(p.r[i]),
                          "response_time_error": _f(p.r[i] / self.held.r[i] - 1) if not np.isnan(self.held.r[i])
                          else None, "in_range": bool(p.in_range[i])}
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
            "bounds": {m: crossing(mod, util_bound=self.util_bound, rt_bound=self.rt_bound)
                       for m, mod in self.models.items()},
            "holdout": self.holdout(),
        }


def _f(v) -> float | None:
    v = float(v)
    return None if math.isnan(v) else v


def extrapolate(runs: Runs, *, models=MODELS, holdout: int = 0, at=None, util_bound: float = UTIL_BOUND,
                rt_bound: float | None = None) -> Extrapolation:
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
        f" (after holding out {holdout})" if holdout else "")
    if fit_runs.distinct() < 2:
        raise BadInput(f"{runs.source}: {what}: a model needs runs at 2 or more distinct concurrencies, "
                       f"3 or more to be checked", expected="runs at more concurrencies (--copies 1, 2, 4, ...)")
    warnings = []
    if fit_runs.distinct() == 2:
        warnings.append(f"fitted on 2 concurrencies ({levels}): enough for PerfExt (seed 002), but every model "
                        f"passes through them with nothing left to check it; measure a third")
    for f in non_monotonic(runs):
        unit = "/s" if f["metric"] == "throughput" else " s"
        warnings.append(f"non-monotonic: {f['metric'].replace('_', ' ')} falls from {f['values'][0]:.4g}{unit} at "
                        f"concurrency {f['from']:g} to {f['values'][1]:.4g}{unit} at {f['to']:g} (noise, or a "
                        f"bottleneck already reached)")
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
    ex = Extrapolation(runs, fit_runs, held, fitted, np.asarray(at, np.float64), errors, util_bound, rt_bound,
                       warnings)
    for m, q in ex.fit().items():
        for metric, v in q.items():
            if v["max_error"] is not None and v["max_error"] > FIT_WARN:
                warnings.append(f"{m} misses the measured {metric.replace('_', ' ')} by up to "
                                f"{v['max_error'] * 100:.0f} % at the fitted points")
    return ex


# -- synthetic systems with known parameters (tests and `tracehouse bench replay`) ---------


def synthetic_usl(ns, lam: float, sigma: float, kappa: float, *, noise: float = 0.0, seed: int = 1,
                  demand: float | None = None) -> Runs:
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


def synthetic_mva(ns, demands_s: dict[str, float], think_s: float, *, servers: dict[str, int] | None = None,
                  delay_s: float = 0.0, noise: float = 0.0, seed: int = 1) -> Runs:
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
