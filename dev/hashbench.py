"""The native hot paths that hash small keys, timed beside a same-run peer.

Owns the before/after measurement of the hasher swap (the hand-written FxHash copies in
lineproto, the strace fd/tid tables, the parsers' FastMap and the call tree's MulHasher
replaced by the rustc-hash crate): each workload is built once, then run `--repeat`
times interleaved with its peer, a pass that reads the same input without hashing it
(`bytes.count(b"\\n")` for the parsers, numpy's `unique` for the call tree keys), so a
ratio against the peer cancels most of the machine's load.

    .venv/bin/python dev/hashbench.py [--repeat 7] [--core OLD/_core.so]
    .venv/bin/python dev/hashbench.py --against OLD/_core.so   # this build vs an earlier one, alternating
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_core = None  # the extension measured: tracehouse._core, or the one --core names


def lineproto_body(lines: int, tagsets: int, seed: int = 1) -> bytes:
    """QoS-like line protocol (seed 003): 13 tags, 48 fields, `tagsets` distinct tag sets."""
    rng = np.random.default_rng(seed)
    tags = [",".join(f"id{k}=v{(i * 31 + k) % 97}x{i}" for k in range(13)) for i in range(tagsets)]
    out = []
    pick = rng.integers(0, tagsets, lines)
    vals = rng.random((lines, 48))
    for n in range(lines):
        fields = ",".join(f"r{k}={vals[n, k]:.4f}" if k % 2 else f"r{k}={int(vals[n, k] * 1000)}i" for k in range(48))
        out.append(f"qos,{tags[pick[n]]} {fields} {1_700_000_000_000_000_000 + n}")
    return ("\n".join(out) + "\n").encode()


def strace_text(lines: int) -> bytes:
    """`strace -f -ttt -T -y` lines over 16 threads and 64 file descriptors."""
    out = []
    t = 1795366952.0
    for n in range(lines):
        tid = 13351 + n % 16
        fd = 3 + (n * 7) % 64
        t += 0.000003
        out.append(f'{tid} {t:.6f} read({fd}</tmp/f{fd}>, "abc", 4096) = 3 <0.000002>')
    return ("\n".join(out) + "\n").encode()


def chrome_json(events: int) -> bytes:
    """Complete events over 64 threads with three args each."""
    evs = [
        {
            "pid": 1 + n % 4,
            "tid": 100 + n % 64,
            "ts": n,
            "dur": 1,
            "ph": "X",
            "cat": "c",
            "name": f"f{n % 500}",
            "args": {"a": n, "b": n % 7, "name": f"s{n % 13}"},
        }
        for n in range(events)
    ]
    return json.dumps({"traceEvents": evs}).encode()


def call_tree_input(spans: int, seed: int = 2):
    """A forest of depth <= 8 whose keys repeat (so equal paths share nodes)."""
    rng = np.random.default_rng(seed)
    parent = np.full(spans, -1, np.int64)
    depth = np.zeros(spans, np.int32)
    stack: list[int] = []
    for i in range(spans):
        while stack and (len(stack) >= 8 or rng.random() < 0.4):
            stack.pop()
        if stack:
            parent[i] = stack[-1]
            depth[i] = depth[stack[-1]] + 1
        stack.append(i)
    key = rng.integers(0, 200, spans).astype(np.int64)
    return pa.array(parent), pa.array(key), pa.array(depth)


def run_lineproto(body: bytes) -> int:
    schemas, producers = _core.LpSchemas(), _core.LpProducers()
    r = _core.decode_lines_many([(body, "ns", 0, 1)], schemas, producers)
    return sum(b.num_rows for _, b in r["batches"])


def run_strace(text: bytes) -> int:
    p = _core.StraceParser()
    n = sum(b.num_rows for _, b in p.feed(text))
    n += sum(b.num_rows for _, b in p.feed(b""))
    return n + sum(b.num_rows for _, b in p.finish())


def run_chrome(text: bytes) -> int:
    p = _core.NativeParser("chrome")
    n = sum(b.num_rows for _, b in p.feed(text))
    return n + sum(b.num_rows for _, b in p.finish())


def _load(path: str):
    """An extension module from a file (another build of `_core`), beside the installed one."""
    import importlib.machinery
    import importlib.util

    name = f"hashbench_{abs(hash(path))}._core"  # PyInit__core: the last name part must be _core
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    mod = importlib.util.module_from_spec(importlib.util.spec_from_file_location(name, path, loader=loader))
    loader.exec_module(mod)
    return mod


def workloads():
    lp = lineproto_body(100_000, 2_000)
    st = strace_text(1_000_000)
    ch = chrome_json(500_000)
    ct = call_tree_input(2_000_000)
    return {
        "lineproto decode (100K QoS lines)": lambda: run_lineproto(lp),
        "strace parse (1M lines)": lambda: run_strace(st),
        "chrome parse (500K events)": lambda: run_chrome(ch),
        "call tree (2M spans)": lambda: len(_core.call_tree(*ct)["parent"]),
    }


def against(ours, earlier, repeat: int) -> int:
    """Ours and the earlier build, alternately on the same inputs: per-run ratios, median."""
    global _core
    work = workloads()
    print(
        f"load average {os.getloadavg()[0]:.1f}; {repeat} alternating runs each (ours, then the earlier build), "
        "CPU seconds of this process"
    )
    for name, fn in work.items():
        ratios, a, b = [], [], []
        for _ in range(repeat):
            for mod, acc in ((ours, a), (earlier, b)):
                _core = mod
                t0 = time.process_time()  # CPU time: the workloads are one thread; wall time is the neighbours'
                fn()
                acc.append(time.process_time() - t0)
            ratios.append(a[-1] / b[-1])
        print(
            f"  {name:<36} ours {statistics.median(a) * 1000:8.1f} ms   earlier {statistics.median(b) * 1000:8.1f} ms"
            f"   ours/earlier median {statistics.median(ratios):.3f} (runs: {', '.join(f'{r:.2f}' for r in ratios)})"
        )
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--core", help="an extension file to measure instead of tracehouse._core (an earlier build)")
    ap.add_argument(
        "--against",
        help="an earlier build's extension file: each run of ours is followed by one of "
        "it, and the ratio ours/earlier is printed (the fairest peer on a busy machine)",
    )
    args = ap.parse_args()
    global _core
    from tracehouse import _core as core

    _core = _load(args.core) if args.core else core
    if args.against:
        return against(_core, _load(args.against), args.repeat)
    print(f"core: {args.core or 'tracehouse._core'}")
    lp = lineproto_body(100_000, 2_000)
    st = strace_text(1_000_000)
    ch = chrome_json(500_000)
    ct = call_tree_input(2_000_000)
    keys = pa.array(np.asarray(ct[1]) * 1_000_003 + np.asarray(ct[0]))  # Arrow's hash table on the same pairs
    work = {
        "lineproto decode (100K QoS lines)": (lambda: run_lineproto(lp), lambda: lp.count(b"\n")),
        "strace parse (1M lines)": (lambda: run_strace(st), lambda: st.count(b"\n")),
        "chrome parse (500K events)": (lambda: run_chrome(ch), lambda: ch.count(b"\n")),
        "call tree (2M spans)": (lambda: len(_core.call_tree(*ct)["parent"]), lambda: len(pc.unique(keys))),
    }
    load = os.getloadavg()[0]
    print(f"load average {load:.1f}; median of {args.repeat} runs, each interleaved with its peer")
    for name, (fn, peer) in work.items():
        ours, theirs = [], []
        fn()
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            fn()
            ours.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            peer()
            theirs.append(time.perf_counter() - t0)
        o, p = statistics.median(ours), statistics.median(theirs)
        print(f"  {name:<36} {o * 1000:8.1f} ms   peer {p * 1000:7.1f} ms   ratio {o / p:6.2f}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
