"""The measured runs `tracehouse extrapolate` fits its models to (seed 002's last step).

Owns `Runs` (concurrency, throughput, response time, per-resource utilisation and servers,
customers per concurrency step, where they came from) and the ways to build it: from the rows of
any load-test table (CSV, Parquet, JSON: `read_runs`, with the usual column names and units
accepted, `ALIASES`, `R_SCALED`) and from the summaries of `tracehouse replay` runs
(`runs_from_replays`), which are grouped by their settings (timing, real-time priority granted,
cold cache, path mapping): the latest valid run's group is kept, the others and every failed run
(cancelled, or invalid: the target filled up) are left out and listed.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import BadInput


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
                raise BadInput(
                    f"{self.source}: utilisation {k!r} must be a fraction of capacity (0..1)", column=f"util_{k}"
                )

    def subset(self, keep: np.ndarray) -> Runs:
        return Runs(
            self.n[keep],
            self.x[keep],
            self.r[keep],
            {k: v[keep] for k, v in self.util.items()},
            dict(self.servers),
            self.customers,
            self.source,
            [lb for lb, k in zip(self.labels, keep) if k] if self.labels else [],
            list(self.excluded),
            dict(self.settings),
        )

    def distinct(self) -> int:
        """Distinct concurrencies measured."""
        return len(np.unique(self.n))

    def to_json(self) -> list[dict]:
        rows = []
        for i in range(len(self.n)):
            row = {
                "concurrency": float(self.n[i]),
                "throughput": float(self.x[i]),
                "response_time": None if math.isnan(self.r[i]) else float(self.r[i]),
            }
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
R_SCALED = {"response_time_ms": 1e-3, "rt_ms": 1e-3, "latency_ms": 1e-3, "response_time_us": 1e-6, "latency_us": 1e-6}


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
        raise BadInput(
            f"{source}: no {'concurrency' if nc is None else 'throughput'} column",
            expected="columns concurrency, throughput [, response_time (s), util_<resource> (0..1)]",
        )
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
    runs = Runs(
        np.array(n),
        np.array(x),
        np.array(r),
        {k: np.array(v) for k, v in util.items()},
        {k: serv.get(k, 1) for k in util},
        customers,
        source,
    )
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
    return {
        "timing": summary.get("timing"),
        "realtime": bool((summary.get("realtime") or {}).get("granted")),
        "cold": bool((summary.get("prepare") or {}).get("cold")),
        "maps": list(summary.get("maps") or []),
    }


def describe_settings(settings: dict) -> str:
    return (
        f"timing {settings['timing']}, realtime {'yes' if settings['realtime'] else 'no'}, "
        f"cold {'yes' if settings['cold'] else 'no'}"
        + (f", map {' '.join(settings['maps'])}" if settings["maps"] else "")
    )


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
        raise BadInput(
            f"{source}: no valid replay to fit ({len(excluded)} left out: "
            + "; ".join(f"{x['run']}: {x['reason']}" for x in excluded[:3])
            + ")",
            expected="complete replays (tracehouse replay TRACE --root DIR --copies K)",
        )
    settings = replay_settings(valid[-1])
    summaries = []
    for s in valid:
        other = replay_settings(s)
        if other == settings:
            summaries.append(s)
        else:
            excluded.append(
                {
                    "run": s["trace"],
                    "reason": f"other settings: {describe_settings(other)} (fitted: {describe_settings(settings)})",
                }
            )
    n = [s["copies"] for s in summaries]
    x = [s["ops_per_s"] for s in summaries]
    r = [s["response_time_s"] for s in summaries]
    util: dict[str, list[float]] = {}
    if all("device_util" in s["utilisation"] for s in summaries):
        util["device"] = [s["utilisation"]["device_util"] for s in summaries]
    cores = summaries[-1].get("cores") or 1
    util["cpu"] = [s["utilisation"]["replay_cpu_cores"] / cores for s in summaries]
    runs = Runs(
        np.array(n, float),
        np.array(x, float),
        np.array(r, float),
        {k: np.array(v) for k, v in util.items()},
        {"device": 1, "cpu": cores},
        float(summaries[-1]["threads"]),
        source,
        [s["trace"] for s in summaries],
        excluded,
        settings,
    )
    return runs
