"""`tracehouse bench chrome`: Chrome JSON import speed and memory at several sizes.

Owns the Chrome import benchmark. For each size it writes a Chrome trace
(generated with numpy and encoded by the Rust writer: of the records ~56% X
slices with two args, ~14% B and E halves, ~14% instants, ~16% counters, over
2 processes x 8 threads), then measures, each in a fresh child process so peak memory (max RSS)
belongs to that run alone:

  read        reading the file in 4 MB chunks (the disk/page-cache bound)
  parse       `_core.NativeParser("chrome")` alone, batches dropped
  tracehouse  `tracehouse import chrome` end to end: parse, append, Parquet segments, catalog
  json.load   Python's json module on the whole file (smallest size only: it holds it all)

and reports records/s (source events), wall and CPU seconds, peak RSS and the
load average (the machine is shared: CPU-seconds stay comparable when
neighbours load it). Peak RSS flat across sizes is the "independent of file
size" claim.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

CHILD = r"""
import json, sys, time
path, mode, store = sys.argv[1], sys.argv[2], sys.argv[3]
if mode in ("parse", "tracehouse"):
    import tracehouse
    from tracehouse import _core
    from tracehouse.formats.chrome import importer as chrome
    from tracehouse.formats.parser_loader import read_chunks
t0, c0 = time.perf_counter(), time.process_time()
out = {}
if mode == "read":
    n = 0
    with open(path, "rb") as f:
        while True:
            b = f.read(4 << 20)
            if not b:
                break
            n += len(b)
    out["bytes"] = n
elif mode == "parse":
    from tracehouse import _core
    from tracehouse.formats.parser_loader import read_chunks
    p = _core.NativeParser("chrome")
    rows = 0
    for ch in read_chunks(path):
        rows += sum(b.num_rows for _, b in p.feed(ch))
    rows += sum(b.num_rows for _, b in p.finish())
    out.update(rows=rows, records=p.stats["records"])
elif mode == "json.load":
    with open(path) as f:
        d = json.load(f)
    out["records"] = len(d["traceEvents"])
else:
    import tracehouse
    from tracehouse.formats.chrome import importer as chrome
    s = tracehouse.open(store, fsync="off")
    rep = chrome.import_file(s, path, "bench")
    s.close()
    out.update(rows=rep.events, records=rep.details.get("records", 0))
out["wall"] = time.perf_counter() - t0
out["cpu"] = time.process_time() - c0
# VmHWM, not ru_maxrss: Linux keeps ru_maxrss across execve, so it would report the parent's.
out["max_rss"] = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps(out))
"""

MODES = ("read", "parse", "tracehouse", "json.load")


def generate(path: Path, records: int, seed: int = 7, batch: int = 100_000) -> int:
    """Writes a Chrome trace of about `records` events (B/E pairs count as two); returns the count."""
    from .. import _core

    rng = np.random.default_rng(seed)
    producers = [(i, str(1000 + i // 8), str(1000 + i // 8 * 100 + i % 8 + 1)) for i in range(16)]
    w = _core.ChromeWriter(producers, first=True)
    names = np.array(
        [f"Task::{n}" for n in ("Run", "Load", "Parse", "Layout", "Paint", "GC", "Compile", "IO")]
        + [f"fn_{i}" for i in range(42)]
    )
    written = 0
    ts0 = 1_700_000_000_000_000_000
    with open(path, "wb") as f:
        f.write(b'{"traceEvents":[')
        while written < records:
            left = records - written
            n = min(batch, left)
            kind = rng.choice(4, size=n, p=[0.6, 0.075, 0.15, 0.175])  # rows: X, B/E pair, i, C
            # Exactly `records` records: a B/E row counts two; cut where the count is reached.
            cum = np.cumsum(np.where(kind == 1, 2, 1))
            k = int(np.searchsorted(cum, left, side="right"))
            if k < n and (cum[k - 1] if k else 0) == left - 1:
                kind[k] = 2  # one record short: an instant instead of a pair
                k += 1
            n = k
            kind = kind[:n]
            ts = ts0 + written * 1_000 + np.arange(n, dtype=np.int64) * 1_000 + rng.integers(0, 999, n)
            prod = rng.integers(0, 16, n).astype(np.int32)
            ph = np.array(["X", "B", "i", "C"])[kind]
            dur = np.where(kind < 2, rng.integers(100, 2_000_000, n), None)
            t = pa.table(
                {
                    "ts": ts,
                    "producer": prod,
                    "dur": pa.array(dur, pa.int64()),
                    "__ph": ph,
                    "__name": names[rng.integers(0, len(names), n)],
                    "__cat": np.array(["blink", "v8", "toplevel"])[kind % 3],
                    "a:bytes": pa.array(np.where(kind == 0, rng.integers(0, 1 << 20, n), None), pa.int64()),
                    "a:url": pa.array(
                        np.where(kind == 0, np.char.add("https://x/", rng.integers(0, 500, n).astype(str)), None)
                    ),
                    "__series": pa.array(np.where(kind == 3, "heap", None)),
                    "__value": pa.array(np.where(kind == 3, rng.random(n) * 1e6, None), pa.float64()),
                }
            )
            for b in t.to_batches():
                f.write(w.encode(b, "X", "", ""))
            written += int(n + (kind == 1).sum())
        f.write(w.finish())
        f.write(b"\n]}\n")
    return written


def _child(path: Path, mode: str, store: Path) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, str(path), mode, str(store)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"bench child {mode} failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def run(sizes: list[int], workdir: str | None = None, modes=MODES, progress=None) -> dict:
    base = Path(workdir or tempfile.mkdtemp(prefix="th-bench-chrome-"))
    base.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for size in sizes:
            path = base / f"trace-{size}.json"
            t0 = time.perf_counter()
            records = generate(path, size)
            gen_s = time.perf_counter() - t0
            nbytes = path.stat().st_size
            _child(path, "read", base / "none")  # warm the page cache: every mode reads from memory
            for mode in modes:
                if mode == "json.load" and size != min(sizes):
                    continue
                store = base / f"store-{size}"
                shutil.rmtree(store, ignore_errors=True)
                load = os.getloadavg()[0]
                r = _child(path, mode, store)
                r.update(
                    size=size,
                    mode=mode,
                    file_bytes=nbytes,
                    records=r.get("records", records),
                    records_per_s=round(records / r["wall"]),
                    records_per_cpu_s=round(records / max(r["cpu"], 1e-9)),
                    mb_per_s=round(nbytes / r["wall"] / 1e6, 1),
                    load_avg=round(load, 2),
                    generate_s=round(gen_s, 2),
                )
                if mode == "tracehouse":
                    r["store_bytes"] = sum(f.stat().st_size for f in store.rglob("*") if f.is_file())
                results.append(r)
                if progress:
                    progress(r)
                shutil.rmtree(store, ignore_errors=True)
            path.unlink()
    finally:
        if workdir is None:
            shutil.rmtree(base, ignore_errors=True)
    return {"benchmark": "chrome import", "cpus": os.cpu_count(), "results": results}


def render(result: dict) -> str:
    lines = [
        f"{'records':>11} {'MB':>7} {'mode':<11} {'rec/s':>11} {'rec/CPU-s':>11} {'MB/s':>7} {'wall s':>7} "
        f"{'peak RSS':>9} {'load':>5}"
    ]
    for r in result["results"]:
        lines.append(
            f"{r['records']:>11,} {r['file_bytes'] / 1e6:>7.0f} {r['mode']:<11} {r['records_per_s']:>11,} "
            f"{r['records_per_cpu_s']:>11,} {r['mb_per_s']:>7} {r['wall']:>7.2f} "
            f"{r['max_rss'] / 2**20:>7.0f}MB {r['load_avg']:>5}"
        )
    return "\n".join(lines)
