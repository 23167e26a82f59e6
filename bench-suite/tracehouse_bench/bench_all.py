"""`tracehouse bench all`: every experiment of the source documents in one run, one report.

Owns the running order, the settings of `--quick` and of the full run, and the report:
DIR/report.md (tables, each seed's own figures beside ours, the raw-append upper bound
beside every ingest figure, the ratio tracehouse / best peer of every experiment, machine,
peer versions and settings, every figure where the statistical protocol was not met),
DIR/*.png (matplotlib) and DIR/results.json (everything measured).

Experiments, each a module of its own (called, never copied):

  1 tod_store   seed 001: events/s and bytes at 10^3 ... 10^8 TOD events (tod_store.py)
  2 write       seed 003: the write matrix (concurrent_writes.py, as `tracehouse bench write`)
    reads       seed 003: Q1-Q5, every case, 1 ... 50 clients, the points table (qos_reads.py)
  3 soctrace    seed 000: storage size, import time, search-and-save (soctrace.py)
  4 ingest, import, analyze: tracehouse's own benches (tracehouse.bench: tod_ingest.py, import_.py,
                analyze.py)
    replay, engines, tsbs: benches with a `run(**settings) -> dict` and a `render(result) -> str`
                (EXTRA_BENCHES, each run at the sizes EXTRA gives it)

Every experiment runs under the same protocol (`stat_protocol.repeat`: standard error < 5 % of
the mean, at least 5 runs), with a time budget per cell that the full run sets high and
`--quick` low; a cell that stopped on its budget is starred in the report.
"""

from __future__ import annotations

import datetime as _dt
import importlib
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
import traceback
from pathlib import Path

from tracehouse.bench import stat_protocol

EXPERIMENTS = ("tod_store", "write", "reads", "soctrace", "ingest", "import", "analyze")
EXTRA_BENCHES = ("tracehouse.bench.replay", "tracehouse.bench.engines", "tracehouse_bench.tsbs")
# Settings of the benches that have only run(**kwargs) and render(result) -> str, per run size
# (names a bench's run() does not take are dropped). A bench without settings for a size is
# not run at that size: Spark's JVM alone takes 20-40 s to start here, so `engines` stays out
# of --quick (the Spark equivalence tests run in `make test` instead).
EXTRA = {
    "replay": {
        "quick": {"iops": 1000, "seconds": 0.5, "asap_ops": 50_000, "cycles": 3, "seeds": 2, "repeat": 1},
        "medium": {"iops": 5000, "seconds": 2.0, "asap_ops": 500_000, "cycles": 50, "seeds": 3, "repeat": 1},
        "full": {"iops": 10_000, "seconds": 5.0, "asap_ops": 2_000_000, "cycles": 100, "seeds": 3, "repeat": 2},
    },
    "engines": {
        "medium": {"scale": 0.1, "tod_events": 1_000_000, "repeat": 2},
        "full": {"scale": 1.0, "tod_events": 1_000_000, "repeat": 1},
    },
    # TSBS cpu-only queries on tracehouse vs QuestDB (needs Go for TSBS and Java for QuestDB)
    # (not in --quick: tests/server/test_tsbs.py runs TSBS's programs in `make test`)
    "tsbs": {
        "medium": {"hosts": 100, "hours": 24, "interval_s": 60, "queries": 20},
        "full": {"hosts": 100, "hours": 24, "interval_s": 10, "queries": 50},
    },
}

QUICK = {  # a smoke run of every experiment and every peer (CI, < 5 min here; QUICK_SCOPE says what is cut)
    # the row-at-a-time paths of DuckDB, PostgreSQL and MariaDB took 1-15 s for 10^3 events at load 15-37
    # (SQLite's row path stays: the row mode is smoke-tested once)
    "tod_store": {
        "sizes": (10**3, 10**4),
        "cap_s": 2.0,
        "budget_s": 0.8,
        "max_runs": 5,
        "skip": ("duckdb row", "postgres row", "mariadb row"),
    },
    # (5:52 at load average 6-18 with every write system and 3 read cases x 1, 4 clients; these
    # settings: 3:32 at load 12-13)
    "write": {
        "systems": ("tracehouse-http", "tracehouse-arrow", "postgres-copy", "sqlite"),
        "writers": (16,),
        "batches": (1000,),
        "seconds": 0.2,
        "max_runs": 5,
    },
    "reads": {"scale": 0.01, "clients": (4,), "cases": ("Q1.2", "Q5.4"), "budget_s": 0.4, "max_runs": 5},
    "soctrace": {"sizes_mb": (1,), "budget_s": 0.6, "max_runs": 5},
    "ingest": {"events": 100_000},
    "import": {"size": 100_000, "sizes": [100_000]},
    "analyze": {"events": 200_000, "queries": 50, "duck_queries": 5},
}
MEDIUM = {  # every experiment end to end at a tenth of the full sizes (a check that the full run works)
    "tod_store": {"sizes": (10**3, 10**4, 10**5, 10**6), "cap_s": 30.0, "budget_s": 20.0, "max_runs": 8},
    "write": {
        "systems": QUICK["write"]["systems"],
        "writers": (1, 16, 128),
        "batches": (50, 1000, 10000),
        "seconds": 0.5,
        "max_runs": 8,
    },
    "reads": {"scale": 0.1, "clients": (1, 5, 20), "cases": None, "budget_s": 2.0, "max_runs": 8},
    "soctrace": {"sizes_mb": (1, 10), "budget_s": 20.0, "max_runs": 8},
    "ingest": {"events": 1_000_000},
    "import": {"size": 1_000_000, "sizes": [1_000_000]},
    "analyze": {"events": 10_000_000, "queries": 200, "duck_queries": 10},
}
# The full run: about 2.5 h on this 2-core machine (2026-11-25; the write matrix alone 70 min). Every experiment and every peer, but a
# representative subset of the seeds' matrices (the complete matrices took 9-13 h here); what was
# left out and why is written into the report (FULL_SUBSET) and docs/benchmarks/running.md:
FULL = {
    # 10^3 ... 10^7: 10^8 pre-generated events and their relational mapping (every peer is handed
    # its rows before the clock) need ~40 GB of memory; a peer path stops growing once its next
    # size would take over 15 s per run (the row-at-a-time paths stop at 10^3-10^4, as in the seed)
    "tod_store": {"sizes": (10**3, 10**4, 10**5, 10**6, 10**7), "cap_s": 15.0, "budget_s": 30.0, "max_runs": 6},
    # every protocol of every system; writers 1 / 16 / 128 and batches 10 / 1,000 / 10,000 span the
    # seed's figures 5.1-5.3 (1 ... 128 writers, 1 ... 10,000 rows) at its two ends and its knee
    # ... and each acknowledgement contract paired like with like (concurrent_writes.PAIRINGS): tracehouse
    # --ack written beside QuestDB's default, QuestDB cairo.commit.mode=sync beside --ack durable
    "write": {
        "systems": (
            "tracehouse-http",
            "tracehouse-tcp",
            "tracehouse-arrow",
            "tracehouse-http-written",
            "questdb",
            "questdb-tcp",
            "questdb-sync",
            "postgres-copy",
            "postgres-insert",
            "mariadb",
            "sqlite",
        ),
        "writers": (1, 16, 128),
        "batches": (10, 1000, 10000),
        "seconds": 0.5,
        "max_runs": 6,
    },
    # the seed's full data set (2,032,000 rows), every system and schema, every case of tables
    # 5.1-5.5 (36); 1 and 20 clients (the seed's 50 ran Q1.4 with 20 only); every cell gets the
    # protocol's 5 rounds (Q1.4 at 20 clients: ~18 s a round over 5 variants)
    "reads": {"scale": 1.0, "clients": (1, 20), "cases": None, "budget_s": 3.0, "max_runs": 6, "min_runs": 5},
    "soctrace": {"sizes_mb": (1, 10), "budget_s": 30.0, "max_runs": 6},
    "ingest": {"events": 2_000_000, "repeat": 2},
    "import": {"size": 1_000_000, "sizes": [1_000_000], "repeat": 2},
    "analyze": {"events": 20_000_000, "queries": 200, "duck_queries": 10},
}
QUICK_SCOPE = (
    "A smoke run (CI, under 5 minutes here): every experiment and every peer once, at small sizes, with "
    "short time budgets per cell (so many cells stop before the protocol's 5 runs and are starred); the "
    "write matrix leaves out QuestDB and MariaDB (both run in the TOD, reads and SoC-Trace experiments) and "
    "runs one cell per system; the TOD store runs the row-at-a-time path of SQLite only; reads on 1 % of the "
    "data set, two cases (Q1.2, Q5.4), 4 clients; "
    "`bench engines` (Spark) is not run (its JVM alone takes 20-40 s to start; the Spark tests cover it). "
    "Its figures show that everything runs, not how fast."
)
MEDIUM_SCOPE = (
    "Every experiment end to end at about a tenth of the full run's sizes: TOD to 10^6 events, reads on "
    "10 % of the data set (every case, 1, 5 and 20 clients), SoC-Trace 1 and 10 MB; the write matrix "
    "(1, 16, 128 writers x 50, 1,000, 10,000 rows) with the quick run's systems only: tracehouse over HTTP "
    "and Arrow, PostgreSQL COPY and SQLite (QuestDB and MariaDB run in the full write matrix)."
)
FULL_SUBSET = (
    "The full run is a representative subset of the seeds' matrices (all of them took an estimated 9-13 h "
    "on this 2-core machine): TOD store 10^3 ... 10^7 events (10^8 needs ~40 GB of memory for the "
    "pre-generated batches and their relational rows); the write matrix at 1, 16 and 128 writers x 10, "
    "1,000 and 10,000 rows per batch (the seed's ends and knee); the reads on the seed's full data set with "
    "1 and 20 clients and all 36 cases of tables 5.1-5.5; SoC-Trace with 1 MB and 10 MB traces (100 MB: an hour of MariaDB "
    "imports alone); ingest 2M, import 1M lines, analyze 20M events."
)


# -- machine and versions ------------------------------------------------------------------------


def machine() -> dict:
    import sqlite3

    import duckdb
    import pyarrow

    from tracehouse import __version__

    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(next(x for x in Path("/proc/meminfo").read_text().splitlines() if x.startswith("MemTotal")).split()[1])
        mem = f"{kb / 2**20:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    java = ""
    if shutil.which("java"):
        r = subprocess.run(["java", "-version"], capture_output=True, text=True)
        java = (r.stderr or r.stdout).splitlines()[0] if (r.stderr or r.stdout) else ""
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": mem,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "tracehouse": __version__,
        "duckdb": duckdb.__version__,
        "pyarrow": pyarrow.__version__,
        "sqlite": sqlite3.sqlite_version,
        "java": java,
    }


# -- running ---------------------------------------------------------------------------------------


def run(
    *,
    quick: bool,
    out: str | Path,
    workdir: str | Path | None = None,
    only=None,
    log=print,
    medium: bool = False,
    read_peers=None,
) -> dict:
    """Run the experiments (all, or `only`), write the report; returns what was measured.
    `read_peers` (names of qos_read_systems.SYSTEMS) narrows the reads to tracehouse and those
    peers: at the full size every peer over the 36 cases and 20 clients takes hours here."""
    from tracehouse.bench import analyze, concurrent_writes, import_, tod_ingest

    from . import qos_reads, soctrace, tod_store

    cfg = QUICK if quick else MEDIUM if medium else FULL
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    base = Path(workdir) if workdir else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="tracehouse-bench-all-", dir=base))
    result = {
        "benchmark": "all",
        "quick": quick,
        "size": "quick" if quick else "medium" if medium else "full",
        "started": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "loadavg_before": list(os.getloadavg()),
        "config": cfg,
        "experiments": {},
        "errors": {},
        "durations": {},
        "scope": QUICK_SCOPE if quick else MEDIUM_SCOPE if medium else FULL_SUBSET,
    }
    if read_peers:
        result["scope"] += f" The reads ran tracehouse beside {', '.join(read_peers)} only (`--read-peers`)."
    wanted = [e for e in EXPERIMENTS if not only or e in only]

    def step(name: str, fn) -> None:
        t0 = time.perf_counter()
        la = os.getloadavg()[0]
        log(f"== {name} (load average {la:.1f})")
        try:
            r = fn()
            if isinstance(r, dict):
                r.setdefault("loadavg_before", la)
                r["loadavg_after"] = os.getloadavg()[0]
            result["experiments"][name] = r
        except Exception as e:  # noqa: BLE001 - one experiment failing does not lose the others
            result["errors"][name] = f"{type(e).__name__}: {e}\n{traceback.format_exc()[-3000:]}"
            log(f"   {name} failed: {type(e).__name__}: {e}")
        result["durations"][name] = round(time.perf_counter() - t0, 1)
        (out / "results.json").write_text(json.dumps(result, indent=1, default=str))

    try:
        if "tod_store" in wanted:
            c = cfg["tod_store"]
            step(
                "tod_store",
                lambda: tod_store.run(
                    sizes=c["sizes"],
                    workdir=work,
                    cap_s=c["cap_s"],
                    budget_s=c["budget_s"],
                    max_runs=c["max_runs"],
                    skip=c.get("skip", ()),
                    log=log,
                ),
            )
        if "write" in wanted:
            c = cfg["write"]

            def do_write():
                r = concurrent_writes.run(
                    systems=c["systems"],
                    writers=c["writers"],
                    batches=c["batches"],
                    workload="qos",
                    seconds=c["seconds"],
                    max_runs=c["max_runs"],
                    workdir=str(work),
                    progress=lambda d, t, cell: (
                        cell
                        and log(
                            f"  write {cell['system']} {cell['writers']}x{cell['rows_per_batch']}: "
                            f"{cell['rows_per_s']:,.0f} rows/s"
                        )
                    ),
                )
                r["raw_append"] = raw_qos_append(work, c["batches"], c["seconds"])
                return r

            step("write", do_write)
        if "reads" in wanted:
            c = cfg["reads"]
            from tracehouse.workload import qos

            cases = None if c["cases"] is None else [x for x in qos.CASES if x.name in c["cases"]]
            step(
                "reads",
                lambda: qos_reads.run(
                    **({"systems": ("tracehouse", *read_peers)} if read_peers else {}),
                    clients=c["clients"],
                    scale=c["scale"],
                    cases=cases,
                    budget_s=c["budget_s"],
                    max_runs=c["max_runs"],
                    min_runs=c.get("min_runs", 3),
                    workdir=work,
                    log=log,
                ),
            )
        if "soctrace" in wanted:
            c = cfg["soctrace"]
            step(
                "soctrace",
                lambda: soctrace.run(
                    sizes_mb=c["sizes_mb"], workdir=work, budget_s=c["budget_s"], max_runs=c["max_runs"], log=log
                ),
            )
        if "ingest" in wanted:
            step(
                "ingest",
                lambda: tod_ingest.run(
                    cfg["ingest"]["events"],
                    workdir=work,
                    progress=False,
                    repeat=cfg["ingest"].get("repeat", 1 if quick else 3),
                ),
            )
        if "import" in wanted:

            def do_import():
                r = import_.run(
                    "strace",
                    cfg["import"]["size"],
                    sizes=cfg["import"].get("sizes"),
                    workdir=work,
                    repeat=cfg["import"].get("repeat", 1 if quick else 3),
                    log=lambda s: log("  " + s),
                )
                head = next(x for x in r["runs"] if x[r["unit"]] == r["size"])
                r["raw_append"] = raw_bytes_append(work, head["bytes_in"], head[r["unit"]])
                return r

            step("import", do_import)
        if "analyze" in wanted:
            c = cfg["analyze"]
            step(
                "analyze",
                lambda: analyze.run(
                    c["events"],
                    workdir=work,
                    queries=c["queries"],
                    duck_queries=c["duck_queries"],
                    progress=lambda s: log("  " + s),
                ),
            )
        for mod in EXTRA_BENCHES:
            name = mod.rsplit(".", 1)[1]
            if importlib.util.find_spec(mod) is None or (only and name not in only):
                continue
            m = importlib.import_module(mod)
            if hasattr(m, "suite_run"):
                step(name, lambda m=m: m.suite_run(quick=quick, workdir=work, log=log))
            elif hasattr(m, "run") and hasattr(m, "render"):  # a bench with the usual run()/render() face
                settings = EXTRA.get(name, {}).get(result["size"])
                if settings is None:
                    log(f"== {name}: not run at size {result['size']} (see bench_all.EXTRA)")
                    continue
                step(
                    name,
                    lambda m=m, name=name, settings=settings: _plain_bench(
                        m,
                        {
                            **settings,
                            "workdir": tempfile.mkdtemp(prefix=f"{name}-", dir=work),
                            "progress": lambda s: log("  " + str(s)),
                            "say": lambda s: log("  " + str(s)),
                        },
                    ),
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["loadavg_after"] = list(os.getloadavg())
    result["finished"] = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    (out / "results.json").write_text(json.dumps(result, indent=1, default=str))
    from . import pages, report

    report.write(result, out)
    pages.refresh_index(out)  # docs/benchmarks/index.md, when the run is kept beside the others
    return result


def _plain_bench(mod, kwargs: dict) -> dict:
    """Call a bench's run() with the keyword arguments it accepts; keep its own text report."""
    import inspect

    params = inspect.signature(mod.run).parameters
    r = mod.run(**{k: v for k, v in kwargs.items() if k in params})
    r = dict(r) if isinstance(r, dict) else {"result": r}
    r["_text"] = mod.render(r)
    return r


def raw_qos_append(work: Path, batches, seconds: float) -> dict:
    """The upper bound beside the write matrix: the same QoS rows (Arrow IPC bodies, as
    tracehouse-arrow sends them) written one after another into one preallocated file by one
    writer, fdatasync per batch, for `seconds` per batch size, under the protocol."""
    from tracehouse.workload.loadgen import arrow_bodies_stamped

    out = {}
    for rows in batches:
        bodies = arrow_bodies_stamped("qos", rows)[0]
        path = Path(tempfile.mkstemp(prefix="raw-qos-", dir=work)[1])

        def one() -> float:
            # Written into a preallocated file (as a WAL is): an fdatasync then flushes data only,
            # not the file's growing size; an appended file doubled the cost per sync here.
            fd = os.open(path, os.O_WRONLY)
            size = 1 << 30
            os.posix_fallocate(fd, 0, size)
            os.fsync(fd)
            n = i = off = 0
            t0 = time.perf_counter()
            try:
                while time.perf_counter() - t0 < seconds:
                    body = bodies[i % len(bodies)]
                    if off + len(body) > size:
                        off = 0
                    os.pwrite(fd, body, off)
                    os.fdatasync(fd)
                    off += len(body)
                    n += rows
                    i += 1
            finally:
                os.close(fd)
            return n / (time.perf_counter() - t0)

        m = stat_protocol.repeat(one, max_runs=10, budget_s=max(5 * seconds, 2.0))
        path.unlink(missing_ok=True)
        out[rows] = {k: m[k] for k in ("mean", "se", "rel_se", "runs", "converged")}
    return out


def raw_bytes_append(work: Path, nbytes: int, units: int) -> dict:
    """The upper bound beside the import figure: as many bytes as the input had, written in
    1 MiB blocks to a new file and fsynced (the disk's part of any import), under the protocol;
    `units` (lines) per second of it, so it reads beside the import's."""
    block = b"x" * (1 << 20)

    def one() -> float:
        path = Path(tempfile.mkstemp(prefix="raw-import-", dir=work)[1])
        t0 = time.perf_counter()
        with open(path, "wb", buffering=0) as f:
            left = nbytes
            while left > 0:
                left -= f.write(block[: min(left, len(block))])
            os.fsync(f.fileno())
        secs = time.perf_counter() - t0
        path.unlink()
        return units / secs

    m = stat_protocol.repeat(one, max_runs=10, budget_s=3.0)
    return {"bytes": nbytes, "units": units, **{k: m[k] for k in ("mean", "se", "rel_se", "runs", "converged")}}
