"""Shared by the strace tests: the traced C programs and what they do.

tests/data/strace/io_single.c and io_threads.c are compiled with the system C
compiler; their captures are checked against their source.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent.parent / "data" / "strace"
STRACE = shutil.which("strace")
CC = shutil.which("cc") or shutil.which("gcc")
needs_strace = pytest.mark.skipif(
    STRACE is None, reason="strace is not installed (make setup installs it with apt-get)"
)


def build_programs(out: Path) -> Path:
    """io_single and io_threads compiled into `out` (skips the test without a C compiler)."""
    if CC is None:
        pytest.skip("no C compiler to build the traced test programs")
    for name, flags in (("io_single", []), ("io_threads", ["-pthread"])):
        subprocess.run([CC, "-O1", *flags, "-o", str(out / name), str(DATA / f"{name}.c")], check=True)
    return out


def check_io_threads(store, trace, directory):
    """What io_threads.c does: 4 threads, each on its own file, 10 writes, 1 fsync, 42 reads."""
    prods = store.producers(trace)
    procs = [p for p in prods if p["kind"] == "process"]
    threads = [p for p in prods if p["kind"] == "thread"]
    assert [p["name"] for p in procs] == ["io_threads"]
    assert len(threads) == 5 and all(t["parent"] == procs[0]["id"] for t in threads)
    assert {t["attrs"]["pid"] for t in threads} == {procs[0]["attrs"]["pid"]}
    per = store.sql(f"""
        SELECT path, count(DISTINCT producer) AS threads,
               count(*) FILTER (name = 'write') AS writes, list(pos ORDER BY ts) FILTER (name = 'write') AS wpos,
               count(*) FILTER (name = 'read') AS reads, list(pos ORDER BY ts) FILTER (name = 'read') AS rpos,
               sum(ret) FILTER (name = 'read') AS read_bytes, count(*) FILTER (name = 'fsync') AS fsyncs,
               count(*) FILTER (name = 'openat') AS opens, count(*) FILTER (name = 'close') AS closes
        FROM "{trace}".syscall WHERE path LIKE '{directory}/out-%' GROUP BY path ORDER BY path""").to_pylist()
    assert [p["path"] for p in per] == [f"{directory}/out-{i}.dat" for i in range(4)]
    for p in per:
        assert p["threads"] == 1
        assert (p["writes"], p["reads"], p["fsyncs"], p["opens"], p["closes"]) == (10, 42, 1, 2, 2)
        assert p["wpos"] == [k * 4096 for k in range(10)]
        assert p["rpos"] == [k * 1000 for k in range(41)] + [40960]
        assert p["read_bytes"] == 40960
    assert store.sql(f'SELECT count(*) AS n FROM "{trace}".exit').column("n")[0].as_py() == 5
