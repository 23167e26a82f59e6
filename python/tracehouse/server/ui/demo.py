"""`tracehouse demo`, after its TOD trace: example traces of every other format, then the UI.

Owns the demo's example data and the order it is loaded in. Every trace goes through the
real importers (files in `examples/`, copied from the test data: a real strace capture of
a threaded IO program, real Node.js Chrome JSON, Hyrise job probes printed by bpftrace and
by SystemTap, a Paje file), a CSV of host metrics written here and imported as counters,
and a line-protocol bucket written over HTTP by the load generator against the demo's own
server once it listens (the path every InfluxDB agent takes). Then the server runs until
Ctrl-C (SIGINT) or SIGTERM; `--no-serve` stops after loading (scripts, CI).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import numpy as np

from ...errors import TracehouseError

BPF_PATTERNS = ["job_start:job_start {ts} {tid} {task:hex}", "job_end:job_end {ts} {tid} {task:hex}"]
BPF_SPANS = ["job=job_start,job_end,task"]

# (trace name, importer, file in examples/, importer options)
EXAMPLES = [
    ("demo-strace", "strace", "threads.strace", {}),
    ("demo-chrome", "chrome", "node_trace.json", {}),
    ("demo-bpftrace", "bpftrace", "hyrise_jobs.bpftrace.json", {"pattern": BPF_PATTERNS, "span": BPF_SPANS}),
    ("demo-stap", "stap", "hyrise_jobs.stap.txt", {"pattern": BPF_PATTERNS, "span": BPF_SPANS}),
    ("demo-paje", "paje", "small.paje", {}),
    ("demo-otlp", "otlp", "shop.otlp", {}),  # made by dev/make_otlp_example.py (the OpenTelemetry SDK)
]
CSV_TRACE = "demo-csv"
LP_BUCKET = "demo-lineproto"


def example_path(name: str) -> Path:
    return Path(str(resources.files(__package__).joinpath("examples", name)))


def metrics_csv(path: Path, *, hosts: int = 3, seconds: int = 120, seed: int = 7) -> int:
    """A CSV of per-second host metrics (cpu %, memory MB) with a daily-job bump: ts,producer,type,value."""
    rng = np.random.default_rng(seed)
    t0 = 1_700_000_000 * 10**9
    rows = []
    for h in range(hosts):
        cpu = np.clip(20 + 10 * h + rng.normal(0, 4, seconds).cumsum() * 0.3, 0, 100)
        cpu[seconds // 2 : seconds // 2 + 15] += 35  # the job
        mem = 2048 + 512 * h + np.cumsum(rng.normal(1, 3, seconds))
        for kind, vals in (("cpu_percent", np.clip(cpu, 0, 100)), ("memory_mb", mem)):
            for s, v in enumerate(vals):
                rows.append(f"{t0 + s * 10**9 + h * 1000},host-{h + 1},{kind},{v:.2f}")
    path.write_text("ts,producer,type,value\n" + "\n".join(rows) + "\n")
    return len(rows)


def load_examples(store, say: Callable[[str], None] = print, workdir: Path | None = None) -> list[dict]:
    """Import every example trace (replacing earlier demo traces of the same names)."""
    from ...formats import registry
    from ...formats.column_mapping import Mapping

    done = []
    existing = {t.name for t in store.traces()}
    for name, fmt, fname, opts in EXAMPLES + [(CSV_TRACE, "csv", None, {})]:
        if name in existing:
            store.rm(name)
        if fname is None:
            path = (workdir or Path(store.path)) / "demo-metrics.csv"
            metrics_csv(path)
            mapping = Mapping(kind="counter")
            desc = "tracehouse demo: host metrics (CSV, counters)"
        else:
            path = example_path(fname)
            mapping = Mapping()
            desc = f"tracehouse demo: {fname}"
        t0 = time.perf_counter()
        rep = registry.importer(fmt, path).import_file(store, path, name, mapping=mapping, description=desc, **opts)
        if fname is None:
            path.unlink(missing_ok=True)
        done.append({"trace": name, "format": fmt, "events": rep.events, "seconds": round(time.perf_counter() - t0, 3)})
        say(f"imported {rep.events:,} {fmt} events into {name}")
    if LP_BUCKET in existing:
        store.rm(LP_BUCKET)
    return done


def write_line_protocol(info: dict, token: str | None, say: Callable[[str], None] = print) -> dict:
    """Line protocol over HTTP into the running server: TSBS cpu-only rows of 4 hosts."""
    from ...workload import loadgen

    target = loadgen.Target(host=info["http"].split("//")[1].rsplit(":", 1)[0], port=info["http_port"], token=token)
    rep = loadgen.run(
        "cpu",
        target=target,
        protocol="http",
        bucket=LP_BUCKET,
        agents=4,
        rows_per_batch=50,
        interval_ms=20,
        batches_per_agent=40,
        duration_s=30,
    )
    say(f"wrote {rep.get('rows_sent', 0):,} line-protocol rows over HTTP into bucket {LP_BUCKET}")
    return rep


def serve_ui(
    store_path,
    *,
    host: str,
    port: int,
    token: str | None,
    say: Callable[[str], None] = print,
    ready_file: str | None = None,
) -> int:
    """Serve the store (UI, API, ingest) until Ctrl-C; fills the line-protocol bucket first thing."""
    import json
    import os

    from ..config import ServerConfig
    from ..run import serve

    cfg = ServerConfig(host=host, port=port, tcp_port=None, token=token)

    def ready(info: dict) -> None:
        def fill() -> None:
            try:
                write_line_protocol(info, token, say)
            except (TracehouseError, OSError, RuntimeError, ValueError) as e:
                say(f"line-protocol bucket not written: {e}")
            url = info["http"] + "/" + (f"#token={token}" if token else "")
            say(
                f"\ntracehouse demo is serving the web UI at {url}\n"
                f"(store {info['store']}; press Ctrl-C to stop the server: the traces stay in the store)"
            )
            if ready_file:
                tmp = ready_file + ".tmp"
                Path(tmp).write_text(json.dumps(info | {"lineproto": LP_BUCKET}))
                os.replace(tmp, ready_file)

        threading.Thread(target=fill, name="demo-lineproto", daemon=True).start()

    return serve(store_path, cfg, ready=ready)
