"""`tracehouse bench replay`: how faithfully and how cheaply the replayer replays, and how
well the extrapolation models predict, each beside a peer measured in the same run.

Owns the workloads (strace-format traces built in memory with numpy, stored like a
capture, so they replay through the public `replay()` path), the peers and the report:

1. Timing fidelity at `--iops` (default 10,000, Buttress's bar): threads issuing cached
   4 KiB preads on a jittered constant-rate schedule, replayed with `--timing original`.
   Issue-time error p50/p99 (actual issue minus planned) and run length against the
   trace's. Peer: the seed's ioreplay way (relative sleeps for the traced gaps, default
   timer slack, no spin) on the same trace.
2. `--timing asap` throughput: threads each issuing cached 4 KiB preads back to back.
   Peer: the same preads in a bare Rust loop (`_core.replay_raw_preads`), same files,
   threads and offsets; the difference per call is the replayer's overhead.
3. Extrapolation, errors on held-out points at 2x and 4x the highest fitted concurrency:
   synthetic systems with known parameters (USL curves; closed queueing networks solved
   exactly, multi-server stations included, which the MVA model only approximates), and
   real replay runs of this machine: copies of a device-bound trace (threads writing 4 KiB
   and fdatasync-ing with think times, `--timing think`), fitted on 1, 2, 4 copies and
   checked at 8 and 16.

Every figure is printed with the load average before and after: this machine is shared.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from .. import _core
from ..formats import strace as strace_format
from ..replay import extrapolate as ex
from ..replay.replay import replay

TARGETS = {
    "lag_p50_us": 10.0,
    "lag_p99_us": 100.0,
    "length_ratio_error": 0.02,
    "asap_ops_s": 1_000_000,
    "overhead_us": 2.0,
    "extrapolation_error": 0.10,
}
NAMES = ("openat", "close", "pread64", "pwrite64", "fdatasync")
O_OPEN, O_CLOSE, O_PREAD, O_PWRITE, O_SYNC = range(5)


def build_trace(store, name: str, threads: int, per_thread: list[dict[str, np.ndarray]], *, t0: int = 10**18) -> None:
    """Stores a strace trace: thread t opens /bench/data-<t>.dat, runs per_thread[t] (arrays
    ts (ns from t0), code (index into NAMES), pos, size, dur), then closes it."""
    cols: dict[str, list[np.ndarray]] = {
        k: [] for k in ("ts", "producer", "dur", "code", "fd", "pos", "size", "ret", "thread")
    }
    for t, ops in enumerate(per_thread):
        n = len(ops["ts"])
        first = int(ops["ts"][0]) if n else 0
        last = int(ops["ts"][-1] + ops["dur"][-1]) if n else 0
        ts = np.concatenate([[first - 20_000], ops["ts"], [last + 10_000]]).astype(np.int64) + t0
        code = np.concatenate([[O_OPEN], ops["code"], [O_CLOSE]]).astype(np.int8)
        m = len(ts)
        cols["ts"].append(ts)
        cols["producer"].append(np.full(m, 2 + t, np.int32))
        cols["dur"].append(np.concatenate([[5_000], ops["dur"], [2_000]]).astype(np.int64))
        cols["code"].append(code)
        cols["fd"].append(np.full(m, 3 + t, np.int64))
        cols["pos"].append(np.concatenate([[-1], ops["pos"], [-1]]).astype(np.int64))
        size = np.concatenate([[-1], ops["size"], [-1]]).astype(np.int64)
        cols["size"].append(size)
        ret = np.where(np.isin(code, (O_PREAD, O_PWRITE)), size, 0)
        ret[0] = 3 + t
        cols["ret"].append(ret)
        cols["thread"].append(np.full(m, t, np.int64))
    c = {k: np.concatenate(v) for k, v in cols.items()}
    order = np.lexsort((c["producer"], c["ts"]))
    c = {k: v[order] for k, v in c.items()}
    code = c["code"]
    io = np.isin(code, (O_PREAD, O_PWRITE))
    paths = pa.array([f"/bench/data-{t}.dat" for t in range(threads)])
    table = pa.table(
        {
            "ts": c["ts"],
            "producer": c["producer"],
            "dur": c["dur"],
            "name": pa.array(NAMES).take(pa.array(code)),
            "fd": pa.array(c["fd"], mask=code == O_OPEN),
            "path": paths.take(pa.array(c["thread"])),
            "pos": pa.array(c["pos"], mask=~io),
            "size": pa.array(c["size"], mask=~io),
            "ret": c["ret"],
            "flags": pa.array(np.where(code == O_OPEN, "O_RDWR|O_CREAT", None).tolist(), pa.string()),
        }
    )
    producers = [{"id": 1, "parent": None, "kind": "process", "name": "bench", "attrs": {"pid": 1}}] + [
        {"id": 2 + t, "parent": 1, "kind": "thread", "name": f"t{t}", "attrs": {"pid": 1, "tid": 2 + t}}
        for t in range(threads)
    ]
    store.create_trace(
        name,
        strace_format.FORMAT,
        description=f"bench replay workload {name}",
        event_types=strace_format.EVENT_TYPES,
        producers=producers,
        format_description=strace_format.DESCRIPTION,
    )
    store.append(name, "syscall", table)
    store.flush(name)


def timed_preads(threads: int, iops: float, seconds: float, *, file_size: int = 16 << 20, seed: int = 7):
    """Threads sharing a constant rate of `iops` cached 4 KiB preads, +-20 % jitter."""
    rng = np.random.default_rng(seed)
    total = int(iops * seconds)
    when = (np.arange(total) / iops * 1e9 + rng.uniform(-0.2, 0.2, total) * 1e9 / iops).astype(np.int64)
    when = np.sort(np.maximum(when, 0)) + 50_000
    owner = np.arange(total) % threads
    out = []
    for t in range(threads):
        ts = when[owner == t]
        n = len(ts)
        out.append(
            {
                "ts": ts,
                "code": np.full(n, O_PREAD),
                "pos": rng.integers(0, file_size // 4096, n) * 4096,
                "size": np.full(n, 4096),
                "dur": np.full(n, 2_000),
            }
        )
    return out


def asap_preads(threads: int, per_thread: int, *, file_size: int = 16 << 20, seed: int = 11):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(threads):
        ts = np.arange(per_thread, dtype=np.int64) * 1_000 + 50_000
        out.append(
            {
                "ts": ts,
                "code": np.full(per_thread, O_PREAD),
                "pos": rng.integers(0, file_size // 4096, per_thread) * 4096,
                "size": np.full(per_thread, 4096),
                "dur": np.full(per_thread, 500),
            }
        )
    return out


def sync_writers(threads: int, cycles: int, think_ns: int, *, file_size: int = 4 << 20, seed: int = 5):
    """Each thread: pwrite 4 KiB at a random offset, fdatasync, think; `cycles` times."""
    rng = np.random.default_rng(seed)
    out = []
    for t in range(threads):
        start = 50_000 + t * think_ns // max(1, threads)
        cyc = start + np.arange(cycles, dtype=np.int64) * (think_ns + 1_000_000)
        ts = np.empty(2 * cycles, np.int64)
        ts[0::2] = cyc
        ts[1::2] = cyc + 20_000
        code = np.tile([O_PWRITE, O_SYNC], cycles)
        pos = np.zeros(2 * cycles, np.int64)
        pos[0::2] = rng.integers(0, file_size // 4096, cycles) * 4096
        size = np.where(code == O_PWRITE, 4096, -1)
        dur = np.where(code == O_PWRITE, 10_000, 980_000)
        out.append({"ts": ts, "code": code, "pos": pos, "size": size, "dur": dur})
    return out


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def fidelity(store, root: Path, *, iops: float, seconds: float, threads: int, progress=print) -> dict:
    build_trace(store, "timed", threads, timed_preads(threads, iops, seconds))
    out = {"iops": iops, "seconds": seconds, "threads": threads}
    for label, kw in (
        ("tracehouse", {"timing": "original"}),
        ("tracehouse --realtime", {"timing": "original", "realtime": True}),
        ("ioreplay-style peer", {"peer_timing": "relative"}),
    ):
        progress(f"timing fidelity: {label} at {iops:,.0f} IOPS for {seconds:g} s (load {_load()})")
        shutil.rmtree(root, ignore_errors=True)
        load = _load()
        r = replay(store, "timed", root, **kw)
        s = r.summary
        out[label] = {
            "issue_error_us": s["issue_error_us"],
            "on_time_share": s["on_time_share"],
            "lag_us": s["lag_us"],
            "length_ratio": s["length_ratio"],
            "seconds": s["seconds"],
            "original_seconds": s["original_seconds"],
            "ops": s["ops"],
            "ops_per_s": s["ops_per_s"],
            "spin_us": s["spin_us"],
            "wakeup_late_us": s["wakeup_late_us"],
            "replay_cpu_cores": s["utilisation"]["replay_cpu_cores"],
            "cpu_util": s["utilisation"]["cpu_util"],
            "realtime": s["realtime"]["granted"],
            "loadavg_before": load,
            "loadavg_after": _load(),
        }
        store.rm(r.trace)
    return out


def asap(store, root: Path, *, threads: int, per_thread: int, progress=print) -> dict:
    out = {"threads": threads, "per_thread": per_thread}
    for t in sorted({1, threads}):
        name = f"asap{t}"
        ops = asap_preads(t, per_thread)
        build_trace(store, name, t, ops)
        shutil.rmtree(root, ignore_errors=True)
        progress(f"asap: {t} thread(s) x {per_thread:,} cached 4 KiB preads (load {_load()})")
        load = _load()
        r = replay(store, name, root, timing="asap")
        s = r.summary
        store.rm(r.trace)
        files = [root / "bench" / f"data-{i}.dat" for i in range(t)]
        offsets = pa.array(np.concatenate([o["pos"] for o in ops]).astype(np.int64))
        raw = min(_core.replay_raw_preads([str(f) for f in files], offsets, 4096, t) for _ in range(2))
        n = s["ops"] - 2 * t  # the opens and closes are not in the peer
        out[f"threads_{t}"] = {
            "ops": s["ops"],
            "seconds": s["seconds"],
            "ops_per_s": s["ops_per_s"],
            "raw_seconds": raw,
            "raw_ops_per_s": n / raw,
            "overhead_us_per_op": (s["seconds"] - raw) * t / n * 1e6,
            "latency_us": s["latency_us"],
            "replay_cpu_cores": s["utilisation"]["replay_cpu_cores"],
            "loadavg_before": load,
            "loadavg_after": _load(),
        }
    return out


SYNTHETIC = (
    (
        "USL λ=1000 σ=0.02 κ=0.0005",
        lambda ns, seed: ex.synthetic_usl(ns, 1000, 0.02, 0.0005, noise=0.01, seed=seed),
        (1, 2, 4, 8),
        (16, 32),
    ),
    (
        "USL λ=50 σ=0.1 κ=0",
        lambda ns, seed: ex.synthetic_usl(ns, 50, 0.1, 0.0, noise=0.01, seed=seed),
        (1, 2, 4, 8),
        (16, 32),
    ),
    (
        "closed network D=disk 4 ms, cpu 6 ms on 2 cores, Z=100 ms",
        lambda ns, seed: ex.synthetic_mva(
            ns, {"disk": 0.004, "cpu": 0.006}, 0.1, servers={"disk": 1, "cpu": 2}, noise=0.01, seed=seed
        ),
        (1, 2, 4, 8),
        (16, 32),
    ),
    (
        "closed network D=disk 10 ms, Z=1 s (seed 002's users)",
        lambda ns, seed: ex.synthetic_mva(ns, {"disk": 0.010}, 1.0, noise=0.01, seed=seed),
        (5, 10, 20, 40),
        (80, 160),
    ),
)


def synthetic(seeds: int = 5) -> list[dict]:
    """Held-out throughput errors of each model on each synthetic system, over `seeds` noise draws."""
    out = []
    for label, make, fit, held in SYNTHETIC:
        errs: dict[str, list[list[float]]] = {}
        for seed in range(seeds):
            runs = make(list(fit) + list(held), seed)
            res = ex.extrapolate(runs, holdout=len(held))
            for h in res.holdout():
                for m in ex.MODELS:
                    if m in h:
                        errs.setdefault(m, [[] for _ in held])[held.index(int(h["concurrency"]))].append(
                            abs(h[m]["throughput_error"])
                        )
        out.append(
            {
                "system": label,
                "fitted": list(fit),
                "held_out": list(held),
                "mean_abs_error": {m: [float(np.mean(e)) for e in v] for m, v in errs.items()},
            }
        )
    return out


def real_runs(
    store,
    root: Path,
    *,
    fit=(1, 2, 4),
    held=(8, 16),
    threads: int = 4,
    cycles: int = 300,
    think_ms: float = 4.0,
    repeat: int = 3,
    realtime: bool = False,
    progress=print,
) -> dict:
    """Replays of a device-bound trace at several copy counts, `repeat` times each (the run
    with the median throughput stands for its level: neighbours come and go); the models
    fitted on `fit` and checked on `held`."""
    if "syncw" not in {t.name for t in store.traces()}:
        build_trace(store, "syncw", threads, sync_writers(threads, cycles, int(think_ms * 1e6)))
    summaries, tries = [], {}
    for k in list(fit) + list(held):
        got = []
        for i in range(repeat):
            shutil.rmtree(root, ignore_errors=True)
            progress(
                f"real runs{' (realtime)' if realtime else ''}: {k} copies of {threads} threads x {cycles} "
                f"pwrite+fdatasync, think {think_ms:g} ms, try {i + 1}/{repeat} (load {_load()})"
            )
            load = _load()
            r = replay(store, "syncw", root, timing="think", copies=k, realtime=realtime)
            store.rm(r.trace)
            got.append(r.summary | {"trace": r.trace, "loadavg_before": load, "loadavg_after": _load()})
        got.sort(key=lambda s: s["ops_per_s"])
        summaries.append(got[len(got) // 2])
        tries[k] = [round(s["ops_per_s"], 1) for s in got]
    runs = ex.runs_from_replays(summaries, "syncw")
    res = ex.extrapolate(runs, holdout=len(held))
    return {
        "threads": threads,
        "cycles": cycles,
        "think_ms": think_ms,
        "repeat": repeat,
        "fitted": list(fit),
        "realtime": realtime and all(s["realtime"]["granted"] for s in summaries),
        "held_out": list(held),
        "runs": [
            {
                "copies": s["copies"],
                "ops_per_s": s["ops_per_s"],
                "tries_ops_per_s": tries[s["copies"]],
                "response_time_ms": s["response_time_s"] * 1e3,
                "device_util": s["utilisation"].get("device_util"),
                "replay_cpu_cores": s["utilisation"]["replay_cpu_cores"],
                "loadavg_before": s["loadavg_before"],
                "loadavg_after": s["loadavg_after"],
            }
            for s in summaries
        ],
        "models": {m: mod.params() for m, mod in res.models.items()},
        "holdout": res.holdout(),
    }


def run(
    *,
    iops: float = 10_000,
    seconds: float = 5.0,
    threads: int = 4,
    asap_ops: int = 2_000_000,
    asap_threads: int | None = None,
    real: bool = True,
    cycles: int = 300,
    repeat: int = 3,
    seeds: int = 5,
    workdir: str | None = None,
    progress=print,
) -> dict:
    """The whole benchmark (see the module documentation)."""
    import tracehouse

    base = Path(tempfile.mkdtemp(prefix="th-bench-replay-", dir=workdir))
    load_before = list(os.getloadavg())
    t0 = time.perf_counter()
    try:
        with tracehouse.open(base / "store") as store:
            result = {
                "machine": {"cpus": os.cpu_count(), "loadavg_before": load_before},
                "fidelity": fidelity(
                    store, base / "root", iops=iops, seconds=seconds, threads=threads, progress=progress
                ),
                "asap": asap(
                    store,
                    base / "root",
                    threads=asap_threads or os.cpu_count() or 2,
                    per_thread=asap_ops // (asap_threads or os.cpu_count() or 2),
                    progress=progress,
                ),
                "synthetic": synthetic(seeds),
            }
            if real:
                result["real"] = [
                    real_runs(store, base / "root", cycles=cycles, repeat=repeat, realtime=rt, progress=progress)
                    for rt in (False, True)
                ]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    result["machine"]["loadavg_after"] = list(os.getloadavg())
    result["seconds"] = round(time.perf_counter() - t0, 1)
    result["targets"] = TARGETS
    return result


def render(r: dict) -> str:
    """The report as text."""
    lines = []
    m = r["machine"]
    lines.append(
        f"tracehouse bench replay ({m['cpus']} CPUs, load average {m['loadavg_before'][0]:.2f} before, "
        f"{m['loadavg_after'][0]:.2f} after; {r['seconds']:.0f} s)"
    )
    f = r["fidelity"]
    lines.append(
        f"\n1. issue-time error at {f['iops']:,.0f} IOPS, {f['threads']} threads, {f['seconds']:g} s "
        f"(target p50 <= {TARGETS['lag_p50_us']:g} µs, p99 <= {TARGETS['lag_p99_us']:g} µs, "
        f"run length within ±{TARGETS['length_ratio_error'] * 100:g} %)"
    )
    lines.append("   issue-time error of the calls whose thread was ready on time (lag of all calls in brackets)")
    lines.append(
        f"   {'':32} {'on time':>8} {'p50 µs':>9} {'p99 µs':>9} {'p99.9 µs':>9} {'max µs':>10} {'length':>8} "
        f"{'CPU cores':>9} {'load':>10}"
    )
    for label in ("tracehouse", "tracehouse --realtime", "ioreplay-style peer"):
        x = f[label]
        if label.endswith("--realtime") and not x["realtime"]:
            label += " (refused)"
        q = x["issue_error_us"] or {k: float("nan") for k in ("p50", "p99", "p99.9", "max")}
        lg = x["lag_us"]
        lines.append(
            f"   {label:32} {x['on_time_share'] * 100:7.1f}% {q['p50']:9.1f} {q['p99']:9.1f} {q['p99.9']:9.1f} "
            f"{q['max']:10.1f} {x['length_ratio']:8.4f} {x['replay_cpu_cores']:9.2f} "
            f"{x['loadavg_before']:4.1f}->{x['loadavg_after']:<4.1f}"
        )
        lines.append(f"   {'':32} {'(all)':>8} {lg['p50']:9.1f} {lg['p99']:9.1f} {lg['p99.9']:9.1f} {lg['max']:10.1f}")
    t = f["tracehouse"]
    lines.append(
        f"   spin window {t['spin_us']:.0f} µs (absolute sleeps woke p50 {t['wakeup_late_us']['p50']:.0f} µs, "
        f"p90 {t['wakeup_late_us']['p90']:.0f} µs late at calibration)"
    )
    a = r["asap"]
    lines.append(
        f"\n2. --timing asap, cached 4 KiB preads (target >= {TARGETS['asap_ops_s']:,} ops/s across threads, "
        f"<= {TARGETS['overhead_us']:g} µs overhead per call)"
    )
    for k, x in a.items():
        if not k.startswith("threads_"):
            continue
        lines.append(
            f"   {k[8:]} thread(s): tracehouse {x['ops_per_s']:,.0f} ops/s, bare pread loop "
            f"{x['raw_ops_per_s']:,.0f} ops/s, overhead {x['overhead_us_per_op']:.3f} µs per call "
            f"(replayer CPU {x['replay_cpu_cores']:.2f} cores; load {x['loadavg_before']:.1f}->"
            f"{x['loadavg_after']:.1f})"
        )
    lines.append(
        f"\n3. extrapolation: mean |throughput error| on held-out points (target <= "
        f"{TARGETS['extrapolation_error'] * 100:g} % at 2-4x the highest fitted concurrency)"
    )
    for s in r["synthetic"]:
        errs = "; ".join(
            f"{mname} " + ", ".join(f"{e * 100:.1f} %" for e in v) for mname, v in s["mean_abs_error"].items()
        )
        lines.append(f"   {s['system']}: fitted at {s['fitted']}, held out {s['held_out']}: {errs}")
    for rr in r.get("real", []):
        lines.append(
            f"   real replays on this machine ({rr['threads']} threads x {rr['cycles']} pwrite+fdatasync per "
            f"copy, think {rr['think_ms']:g} ms, --timing think{' --realtime' if rr['realtime'] else ''}; "
            f"median of {rr['repeat']} tries):"
        )
        for x in rr["runs"]:
            du = x["device_util"]
            lines.append(
                f"     {x['copies']:>3} copies: {x['ops_per_s']:9,.1f} calls/s (tries {x['tries_ops_per_s']}), "
                f"R {x['response_time_ms']:.3f} ms, device {'' if du is None else f'{du * 100:.1f} %'}, "
                f"load {x['loadavg_before']:.1f}"
            )
        for h in rr["holdout"]:
            lines.append(
                f"     held out {h['concurrency']:g} copies ({h['ratio_to_fitted_max']:.0f}x): measured "
                f"{h['measured']['throughput']:,.1f}/s; "
                + ", ".join(
                    f"{mname} {h[mname]['throughput']:,.1f} ({h[mname]['throughput_error'] * 100:+.1f} %)"
                    for mname in ex.MODELS
                    if mname in h
                )
            )
    return "\n".join(lines)
