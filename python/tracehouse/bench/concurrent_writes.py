"""`tracehouse bench write`: seed 003's write matrix, re-measured against peers in one run.

Owns the matrix (writers {1, 2, 4, ..., 128} x rows per batch {1, 5, 10, ..., 10,000}),
the seed's statistical protocol and the report (table, JSON, PNG like the seed's
figures 5.1-5.3: rows/s against writers, one line per batch size, one panel per
system).

Protocol (seed 003, section 4.4): a cell (system, writers, rows per batch) is
measured by timed runs repeated until the standard error of the mean throughput is
below 5 % of the mean, with at least 5 runs (and at most `max_runs`). A run: every
writer writes batches back to back for `seconds` (each waits for its batch to be
acknowledged before the next, as the seed's writing clients did); throughput =
acknowledged rows / wall time until the last writer stops. Fixed-time runs instead
of the seed's fixed row counts keep a full matrix bounded in time; they measure
the same rate.

Systems are started once each, on loopback, in a work directory, and stopped
after their cells; one not installed here is reported as skipped.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from rich import box
from rich.table import Table

from . import write_systems
from .stat_protocol import stats  # noqa: F401 - the seed's formulas, shared by every bench
from .write_systems import Unavailable

WRITERS = (1, 2, 4, 8, 16, 32, 64, 128)
BATCHES = (1, 5, 10, 50, 100, 500, 1000, 5000, 10000)
QUICK_WRITERS = (1, 16, 128)
QUICK_BATCHES = (10, 1000, 10000)
DEFAULT_SYSTEMS = (
    "tracehouse-http",
    "tracehouse-tcp",
    "tracehouse-arrow",
    "questdb",
    "postgres-copy",
    "postgres-insert",
    "mariadb",
    "sqlite",
)


def measure_cell(
    system, name: str, writers: int, rows: int, *, seconds: float, min_runs: int, max_runs: int, rel_se: float = 0.05
) -> dict:
    samples = []
    errors = 0
    cpu = 0.0
    # One short run first, discarded for every system alike: connections opened, tables or
    # measurements created, caches and JITs warm — the seed measured steady state.
    system.measure(writers, rows, min(1.0, seconds / 2), name)
    while True:
        s = system.measure(writers, rows, seconds, name)
        samples.append(s.rows_per_s)
        errors += s.errors
        cpu += s.loadgen_cpu_s
        if len(samples) >= min_runs:
            mean, se = stats(samples)
            if mean == 0 or se / mean < rel_se or len(samples) >= max_runs:
                break
    mean, se = stats(samples)
    return {
        "system": name,
        "writers": writers,
        "rows_per_batch": rows,
        "runs": len(samples),
        "rows_per_s": mean,
        "se": se,
        "rel_se": se / mean if mean else None,
        "samples": samples,
        "errors": errors,
        "converged": bool(mean) and se / mean < rel_se,
        "loadgen_cpu_share": cpu / (len(samples) * seconds * (os.cpu_count() or 1)),
    }


def run(
    *,
    systems=DEFAULT_SYSTEMS,
    writers=WRITERS,
    batches=BATCHES,
    workload: str = "qos",
    seconds: float = 2.0,
    min_runs: int = 5,
    max_runs: int = 20,
    workdir: str | None = None,
    progress=None,
) -> dict:
    """Measure every (system, writers, rows per batch) cell; returns a JSON-able dict."""
    result = {
        "benchmark": "write",
        "workload": workload,
        "seconds_per_run": seconds,
        "min_runs": min_runs,
        "max_runs": max_runs,
        "writers": list(writers),
        "rows_per_batch": list(batches),
        "systems": list(systems),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "loadavg_before": list(os.getloadavg())},
        "cells": [],
        "skipped": {},
    }
    t0 = time.time()
    # Systems sharing one server (tracehouse-*, questdb*, postgres-*) are started once.
    groups: dict[type, list[str]] = {}
    total = len(systems) * len(writers) * len(batches)
    done = 0
    for name in systems:  # an unknown name fails here, before anything is started
        try:
            groups.setdefault(write_systems.system(name), []).append(name)
        except Unavailable as e:  # a peer of the benchmark suite, which is not installed
            result["skipped"][name] = str(e)
            done += len(writers) * len(batches)
    tmp = None
    if workdir is None:
        tmp = tempfile.mkdtemp(prefix="th-bench-write-")
        workdir = tmp
    work = Path(workdir)
    for cls, names in groups.items():
        try:
            with cls(work, workload, names[0]) as system:
                for name in names:
                    for w in writers:
                        for b in batches:
                            cell = measure_cell(
                                system, name, w, b, seconds=seconds, min_runs=min_runs, max_runs=max_runs
                            )
                            result["cells"].append(cell)
                            done += 1
                            if progress:
                                progress(done, total, cell)
        except Unavailable as e:
            for name in names:
                result["skipped"][name] = str(e)
                done += len(writers) * len(batches)
                if progress:
                    progress(done, total, None)
    result["machine"]["loadavg_after"] = list(os.getloadavg())
    result["seconds"] = round(time.time() - t0, 1)
    if tmp is not None:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    result["ratios"] = ratios(result)
    return result


def ratios(result: dict) -> dict:
    """Per cell with >= 50 rows per batch, the issue's targets (>= 5x the best relational peer,
    >= 2x QuestDB): tracehouse line protocol (best of HTTP/TCP) and tracehouse at its best (Arrow
    too) over the best of PostgreSQL/MariaDB/SQLite and over the better QuestDB protocol."""
    by = {(c["system"], c["writers"], c["rows_per_batch"]): c["rows_per_s"] for c in result["cells"]}

    def best(systems, w, b):
        return max([by.get((s, w, b), 0) for s in systems] or [0])

    out = []
    for w in result["writers"]:
        for b in result["rows_per_batch"]:
            if b < 50:
                continue
            lp = best(("tracehouse-http", "tracehouse-tcp"), w, b)
            th = max(lp, best(("tracehouse-arrow",), w, b))
            rel = best(("postgres-copy", "postgres-insert", "mariadb", "sqlite"), w, b)
            q = best(("questdb", "questdb-tcp"), w, b)
            out.append(
                {
                    "writers": w,
                    "rows_per_batch": b,
                    "tracehouse_lp": lp,
                    "tracehouse_best": th,
                    "vs_best_relational": lp / rel if rel else None,
                    "vs_questdb": lp / q if q else None,
                    "best_vs_best_relational": th / rel if rel else None,
                    "best_vs_questdb": th / q if q else None,
                }
            )
    return {"cells": out, "pairings": pairings(result)}


# Like with like: each tracehouse acknowledgement contract against the peers that
# promise the same. `written`: acknowledged once in the log / page cache, kept through a crash of
# the server process, not through a power loss (tracehouse --ack written, QuestDB's default
# nosync commit). `durable`: acknowledged once fsynced (tracehouse's default, QuestDB with
# cairo.commit.mode=sync, PostgreSQL with synchronous_commit=on).
PAIRINGS = {
    "written": (("tracehouse-http-written", "tracehouse-tcp-written"), ("tracehouse-arrow-written",), ("questdb",)),
    "durable": (
        ("tracehouse-http", "tracehouse-tcp"),
        ("tracehouse-arrow",),
        ("questdb-sync", "postgres-copy", "postgres-insert"),
    ),
}


def pairings(result: dict) -> list[dict]:
    """Per contract and cell: tracehouse's best line-protocol system (and its best with Arrow)
    over the best peer keeping the same promise, where both were measured."""
    by = {(c["system"], c["writers"], c["rows_per_batch"]): c["rows_per_s"] for c in result["cells"]}
    out = []
    for contract, (lp_sys, arrow_sys, peer_sys) in PAIRINGS.items():
        for w in result["writers"]:
            for b in result["rows_per_batch"]:
                lp = {s: by[(s, w, b)] for s in lp_sys if (s, w, b) in by}
                peers = {s: by[(s, w, b)] for s in peer_sys if (s, w, b) in by}
                if not lp or not peers:
                    continue
                th_name = max(lp, key=lp.get)
                peer_name = max(peers, key=peers.get)
                best = max([lp[th_name]] + [by[(s, w, b)] for s in arrow_sys if (s, w, b) in by])
                peer = peers[peer_name]
                out.append(
                    {
                        "contract": contract,
                        "writers": w,
                        "rows_per_batch": b,
                        "tracehouse": th_name,
                        "tracehouse_rows_per_s": lp[th_name],
                        "peer": peer_name,
                        "peer_rows_per_s": peer,
                        "ratio": lp[th_name] / peer if peer else None,
                        "ratio_with_arrow": best / peer if peer else None,
                    }
                )
    return out


def render_pairings(result: dict) -> Table | None:
    """The like-with-like ratios (`pairings`), one row per contract and cell; target 2x."""
    rows = result.get("ratios", {}).get("pairings") or []
    if not rows:
        return None
    la = result["machine"]["loadavg_before"][0]
    t = Table(
        title=f"tracehouse / the peer keeping the same promise (target >= 2), load avg {la:.1f}",
        box=box.SIMPLE_HEAD,
        header_style="bold",
    )
    for col in ("ack", "writers", "rows/batch", "tracehouse (best LP)", "peer (best)", "th / peer", "with Arrow"):
        t.add_column(col, justify="left" if col in ("ack",) else "right", no_wrap=True, min_width=len(col))
    for p in rows:
        t.add_row(
            p["contract"],
            str(p["writers"]),
            f"{p['rows_per_batch']:,}",
            f"{SHORT.get(p['tracehouse'], p['tracehouse'])} {human_rate(p['tracehouse_rows_per_s'])}",
            f"{SHORT.get(p['peer'], p['peer'])} {human_rate(p['peer_rows_per_s'])}",
            f"{p['ratio']:.2f}" if p["ratio"] is not None else "",
            f"{p['ratio_with_arrow']:.2f}" if p["ratio_with_arrow"] is not None else "",
        )
    return t


HALF_RATE_PEERS = ("questdb", "questdb-sync")


def half_rate(
    *,
    protocols=("arrow", "http"),
    workload: str = "qos",
    agents: int = 128,
    rows: int = 1000,
    seconds: float = 10.0,
    ack: str = "durable",
    workdir: str | None = None,
    repeat: int = 1,
    peers: tuple[str, ...] = HALF_RATE_PEERS,
    progress=None,
) -> dict:
    """The latency target: acknowledgement latency at half the maximum rate.

    Per protocol, in one fresh `tracehouse serve` (`--ack ack`): a warm-up (2 s at most), a closed-loop
    run of `seconds` (the maximum rate), then `repeat` runs in which `agents` agents each send a
    batch of `rows` every `agents * rows / (max / 2)` seconds for `seconds` (open loop at half that
    rate); ack p50/p90/p99/max of each half-rate run (`ack_us`: the first; `repeats`: all), with
    the server's CPU share and the load average. Checkpoints and compactions run as they do in
    service (the store grows from run to run): their cost shows up as the tail.

    peers: QuestDB (its default commit mode, and `questdb-sync`, whose 204 waits for the flush
    like `--ack durable`) get the load offered to the first protocol at half rate, over its
    line protocol over HTTP, in the same agents and batches: what they achieve and how fast they
    acknowledge it (one that cannot keep up acknowledges late). Their own closed-loop maximum is
    measured first. A peer that cannot run here is listed in `skipped`.
    """
    from ..workload import loadgen

    tmp = None
    if workdir is None:
        tmp = workdir = tempfile.mkdtemp(prefix="th-bench-half-")
    cls = write_systems.TracehouseWritten if ack == "written" else write_systems.Tracehouse
    out = {
        "benchmark": "write-half-rate",
        "workload": workload,
        "agents": agents,
        "rows_per_batch": rows,
        "seconds": seconds,
        "ack": ack,
        "repeat": repeat,
        "loadavg_before": list(os.getloadavg()),
        "runs": [],
        "peers": [],
        "skipped": {},
    }
    try:
        for proto in protocols:
            with cls(Path(workdir), workload) as th:
                target = loadgen.Target("127.0.0.1", th.port, th.tcp_port)
                bucket = f"{workload}_half_{proto}"
                kw = dict(target=target, protocol=proto, bucket=bucket, agents=agents, rows_per_batch=rows)
                loadgen.run(workload, duration_s=min(2.0, seconds), **kw)
                full = loadgen.run(workload, duration_s=seconds, **kw)
                max_rate = full["rows_acked_per_s"]
                interval_ms = agents * rows / (max_rate / 2) * 1000 if max_rate else 1000.0
                halves = [
                    loadgen.run(workload, duration_s=seconds, interval_ms=interval_ms, **kw)
                    for _ in range(max(1, repeat))
                ]
                half = halves[0]
                run = {
                    "protocol": proto,
                    "max_rows_per_s": max_rate,
                    "max_ack_us": full["ack_us"],
                    "interval_ms": interval_ms,
                    "half_rows_per_s": half["rows_acked_per_s"],
                    "ack_us": half["ack_us"],
                    "errors": sum(h["errors"] for h in halves) + full["errors"],
                    "server_cpu_share": half["server_cpu_share"],
                    "loadavg": half["loadavg_1m_after"],
                    "repeats": [{"rows_per_s": h["rows_acked_per_s"], "ack_us": h["ack_us"]} for h in halves],
                    "median_p99_us": statistics.median(h["ack_us"][2] for h in halves),
                }
                out["runs"].append(run)
                if progress:
                    progress(run)
        offered = out["runs"][0]["interval_ms"] if out["runs"] else None
        for name in peers if offered is not None else ():
            try:
                with write_systems.system(name)(Path(workdir), workload, name) as q:
                    target = loadgen.Target("127.0.0.1", q.port, q.tcp_port)
                    kw = dict(
                        target=target,
                        protocol="http",
                        bucket=f"{workload}_half",
                        agents=agents,
                        rows_per_batch=rows,
                        path="/write?precision=n",
                    )
                    loadgen.run(workload, duration_s=min(2.0, seconds), **kw)
                    full = loadgen.run(workload, duration_s=seconds, **kw)
                    half = loadgen.run(workload, duration_s=seconds, interval_ms=offered, **kw)
            except Unavailable as e:
                out["skipped"][name] = str(e)
                continue
            peer = {
                "protocol": name,
                "max_rows_per_s": full["rows_acked_per_s"],
                "max_ack_us": full["ack_us"],
                "interval_ms": offered,
                "half_rows_per_s": half["rows_acked_per_s"],
                "ack_us": half["ack_us"],
                "errors": half["errors"] + full["errors"],
                "server_cpu_share": None,
                "loadavg": half["loadavg_1m_after"],
            }
            out["peers"].append(peer)
            if progress:
                progress(peer)
    finally:
        if tmp is not None:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    out["loadavg_after"] = list(os.getloadavg())
    return out


def render_half_rate(result: dict) -> Table:
    la = result["loadavg_before"][0]
    t = Table(
        title=f"ack latency at half the maximum rate ({result['agents']} agents x {result['rows_per_batch']:,} "
        f"{result['workload']} rows, --ack {result['ack']}, {result['seconds']:g} s runs; target p99 <= 20 ms; "
        f"peers: the first protocol's half-rate load over line protocol), "
        f"load avg {la:.1f} -> {result['loadavg_after'][0]:.1f}",
        box=box.SIMPLE_HEAD,
        header_style="bold",
    )
    for col in (
        "protocol",
        "max rows/s",
        "half: rows/s",
        "every",
        "p50",
        "p90",
        "p99",
        "max",
        "p99 each run",
        "server CPU",
        "errors",
    ):
        t.add_column(col, justify="left" if col == "protocol" else "right", no_wrap=True)
    ms = lambda us: f"{us / 1000:.1f} ms" if us < 1_000_000 else f"{us / 1e6:.2f} s"  # noqa: E731
    for r in result["runs"]:
        a = r["ack_us"]
        each = ", ".join(f"{x['ack_us'][2] / 1000:.0f}" for x in r.get("repeats", [])) + " ms"
        t.add_row(
            r["protocol"],
            human_rate(r["max_rows_per_s"]),
            human_rate(r["half_rows_per_s"]),
            f"{r['interval_ms']:.0f} ms",
            ms(a[0]),
            ms(a[1]),
            ms(a[2]),
            ms(a[3]),
            each,
            f"{r['server_cpu_share']:.0%}" if r["server_cpu_share"] is not None else "",
            str(r["errors"]),
        )
    for r in result.get("peers", []):  # the load offered to the first protocol at half rate
        a = r["ack_us"]
        t.add_row(
            f"{r['protocol']}, same load",
            human_rate(r["max_rows_per_s"]),
            human_rate(r["half_rows_per_s"]),
            f"{r['interval_ms']:.0f} ms",
            ms(a[0]),
            ms(a[1]),
            ms(a[2]),
            ms(a[3]),
            "",
            "",
            str(r["errors"]),
        )
    for name, why in result.get("skipped", {}).items():
        t.add_row(f"{name}: skipped", why, *[""] * 9)
    return t


SHORT = {
    "tracehouse-http": "th-http",
    "tracehouse-tcp": "th-tcp",
    "tracehouse-arrow": "th-arrow",
    "tracehouse-http-written": "th-http-w",
    "tracehouse-tcp-written": "th-tcp-w",
    "tracehouse-arrow-written": "th-arrow-w",
    "postgres-copy": "pg-copy",
    "postgres-insert": "pg-insert",
    "questdb-tcp": "qdb-tcp",
    "questdb-sync": "qdb-sync",
}


def human_rate(v: float) -> str:
    return f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v / 1e3:.1f}K" if v >= 1e3 else f"{v:.0f}"


def render(result: dict) -> Table:
    """Rows/s per cell (K = thousand, M = million), ± the standard error in % of the mean;
    * marks a cell whose SE stayed above 5 % after max_runs; eN counts errors."""
    systems = [s for s in result["systems"] if s not in result["skipped"]]
    la = result["machine"]["loadavg_before"][0]
    t = Table(
        title=f"bench write: {result['workload']} rows, rows/s acknowledged (mean ± SE %), "
        f"{result['seconds_per_run']:g} s runs, load avg {la:.1f}",
        box=box.SIMPLE_HEAD,
        header_style="bold",
    )
    t.add_column("writers", justify="right", no_wrap=True, min_width=7)
    t.add_column("rows/batch", justify="right", no_wrap=True, min_width=10)
    for s in systems:
        t.add_column(SHORT.get(s, s), justify="right", no_wrap=True)
    by = {(c["system"], c["writers"], c["rows_per_batch"]): c for c in result["cells"]}
    for w in result["writers"]:
        for b in result["rows_per_batch"]:
            row = [str(w), f"{b:,}"]
            for s in systems:
                c = by.get((s, w, b))
                if c is None:
                    row.append("")
                    continue
                mark = "" if c["converged"] else "*"
                err = f" e{c['errors']}" if c["errors"] else ""
                row.append(f"{human_rate(c['rows_per_s'])} ±{(c['rel_se'] or 0) * 100:.0f}%{mark}{err}")
            t.add_row(*row)
    return t


def plot(result: dict, path: Path) -> Path | None:
    """Figures 5.1-5.3 of the seed, one panel per system: rows/s against writers, a line per batch size."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    systems = [s for s in result["systems"] if s not in result["skipped"]]
    if not systems:
        return None
    cols = min(3, len(systems))
    rows = math.ceil(len(systems) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.9 * rows), squeeze=False, sharey=True)
    by = {(c["system"], c["writers"], c["rows_per_batch"]): c for c in result["cells"]}
    for i, s in enumerate(systems):
        ax = axes[i // cols][i % cols]
        for b in result["rows_per_batch"]:
            xs = [w for w in result["writers"] if (s, w, b) in by]
            ys = [by[(s, w, b)]["rows_per_s"] for w in xs]
            es = [by[(s, w, b)]["se"] for w in xs]
            if xs:
                ax.errorbar(xs, ys, yerr=es, marker="o", ms=3, capsize=2, label=f"{b:,}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(s)
        ax.set_xlabel("writers (threads)")
        ax.grid(True, which="both", alpha=0.3)
        if i % cols == 0:
            ax.set_ylabel("rows/s acknowledged")
    for j in range(len(systems), rows * cols):
        axes[j // cols][j % cols].axis("off")
    axes[0][0].legend(title="rows per batch", fontsize=7, title_fontsize=7)
    fig.suptitle(f"Write throughput against writers ({result['workload']} rows; seed 003 figs 5.1-5.3)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
