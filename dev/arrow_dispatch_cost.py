"""The server dispatcher's cost per Arrow IPC body, without the network or the load generator.

Owns the measurement behind the dispatcher figures in server/ingest.py: an `Ingestor` over a
fresh store appends `N` 1,000-row QoS bodies (`workload.loadgen.arrow_bodies`) one per round, as
`tracehouse serve` does at half rate, and prints the wall time and the thread's CPU per body.
Run it with two builds in turn to compare them (each build's own venv):

    .venv/bin/python dev/arrow_dispatch_cost.py [N] [--store DIR]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time

from tracehouse.server.config import ServerConfig
from tracehouse.server.ingest import Ingestor
from tracehouse.store import Store
from tracehouse.workload.loadgen import arrow_bodies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", nargs="?", type=int, default=3000, help="bodies to append (default 3000)")
    ap.add_argument("--store", help="store directory (default: a temporary one, removed after)")
    args = ap.parse_args()
    path = args.store or tempfile.mkdtemp(prefix="th-dispatch-")
    bodies = arrow_bodies("qos", 1000, count=64)
    store = Store(path, fsync="batch", drop_written_pages=True)
    try:
        store.become_writer()
        ing = Ingestor(store, ServerConfig())
        for b in bodies[:8]:  # the trace, its type and producers made before timing
            ing.write_arrow("qos", "qos", b)
        c0, t0 = time.thread_time(), time.perf_counter()
        for i in range(args.n):
            ing.write_arrow_many("qos", "qos", [bodies[i % len(bodies)]])
        wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
        print(
            f"{args.n} bodies: {wall / args.n * 1e6:.0f} us wall, {cpu / args.n * 1e6:.0f} us dispatcher CPU per body"
        )
    finally:
        store.close()
        if not args.store:
            shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    main()
