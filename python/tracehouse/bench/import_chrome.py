"""The Chrome JSON case of `tracehouse bench import`: traces of N events (records) written by our exporter's encoder.

Owns the workload and its peers. The traces are those of `tracehouse bench chrome`
(`bench/chrome.py: generate`): ~56% X slices with two args, ~14% B/E halves, ~14%
instants, ~16% counters over 2 processes x 8 threads, one event per line, ~130 bytes
each, written by the Rust encoder from numpy columns (building 8M events takes
seconds, not the parse we measure). Sizes count source records (a B/E pair is two).

Peers on the headline file: `wc -l` (reading it), Python's json module parsing each
event line (what a pure-Python importer would do before storing anything), and the
Rust parser alone with its batches dropped.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from .chrome import generate
from .import_ import Case, Input, Peer, parse_only_peer
from .import_strace import peer_wc


def build(workdir: Path, sizes: list[int]) -> list[Input]:
    inputs = []
    for n in sorted(sizes):
        t0 = time.perf_counter()
        path = workdir / f"chrome-{n}.json"
        records = generate(path, n)
        inputs.append(
            Input(
                path,
                records,
                path.stat().st_size,
                {
                    "workload": "56% X (2 args), 14% B/E halves, 14% i, 16% C; 2 pids x 8 tids",
                    "build_s": round(time.perf_counter() - t0, 2),
                },
            )
        )
    return inputs


def peer_python_json(inp: Input) -> Peer:
    t0 = time.perf_counter()
    n = 0
    with open(inp.path, "rb") as f:
        for line in f:
            s = line.strip().rstrip(b",")
            if s.startswith(b"{") and s.endswith(b"}") and not s.startswith(b'{"traceEvents"'):
                json.loads(s)
                n += 1
    return Peer("python json", "json.loads of each event line (stdlib), nothing stored", time.perf_counter() - t0, n)


CASE = Case(
    name="chrome",
    unit="events",
    importer="chrome",
    default_size=2_000_000,
    build=build,
    peers=(peer_wc, peer_python_json, parse_only_peer("chrome", "records")),
    target=1_000_000,
    target_text=">= 1M events/s parsed and stored",
    bytes_per_unit=135,
)
