"""The models `tracehouse extrapolate` fits to measured runs (`runs.Runs`), and their numerics.

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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import BadInput
from .runs import Runs

MODELS = ("perfext", "usl", "mva")
UTIL_BOUND = 0.9


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

    def fit(self, runs: Runs) -> Model:
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
        law = np.maximum(0.0, n * self.customers / x - self.z) if self.z is not None else np.full_like(n, np.nan)
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

    def fit(self, runs: Runs) -> PerfExt:
        self._common(runs)
        caps = {k: self.servers.get(k, 1) / d for k, d in self.d.items() if d > 0}
        if not caps:
            raise BadInput(
                f"{runs.source}: PerfExt needs the utilisation of at least one resource",
                expected="a util_<resource> column that grows with throughput",
            )
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
        return {
            "x_max": self.xmax,
            "bottleneck": self.bottleneck,
            "demands_s": self.d,
            "intercept": self.a,
            "slope": self.b,
            "n_half": self.nh,
            "logistic_rate": self.k,
            "think_s": self.z,
            "n_90": self.nh + math.log(9) / self.k if self.k > 0 else None,
            **_rparams(self),
        }


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

    def fit(self, runs: Runs) -> USL:
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
        return {
            "lambda": self.lam,
            "sigma": self.sigma,
            "kappa": self.kappa,
            "fitted_params": self.fitted,
            "n_peak": peak,
            "x_peak": float(_usl(np.array([peak]), self.lam, self.sigma, self.kappa)[0]) if peak else None,
            "capacity": None if math.isinf(self.capacity()) else self.capacity(),
            "demands_s": self.d,
            "think_s": self.z,
            **_rparams(self),
        }


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

    def fit(self, runs: Runs) -> MVA:
        self._common(runs)
        if not self.d:
            raise BadInput(
                f"{runs.source}: MVA needs the utilisation of at least one resource",
                expected="a util_<resource> column",
            )
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
        return {
            "demands_s": self.d,
            "servers": self.servers,
            "delay_s": self.d0,
            "think_s": self.z,
            "customers_per_unit": self.customers,
        }


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
