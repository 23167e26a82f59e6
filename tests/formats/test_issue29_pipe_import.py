"""Importing from a pipe: `strace -o /dev/stdout PROG | tracehouse import strace -` and a slow
bpftrace-style writer into `tracehouse import bpftrace -` (and `/dev/stdin`).

The producers are real processes on the other end of a real pipe: strace tracing a Python
program, and a writer that prints bpftrace `-f json` records, each of them stopping halfway
until the test says go. While they wait (the pipe still open), the rows they already wrote
must be in the store, registered, seen by a reader in this process; then the rest arrives
and the import completes with every row, none twice.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import textwrap

import pytest

import tracehouse
from helpers.tracers import wait_committed

TRACEHOUSE = [sys.executable, "-m", "tracehouse.cli"]

PROGRAM = textwrap.dedent("""
    import os, sys, time
    d = sys.argv[1]
    with open(os.path.join(d, "phase1.txt"), "w") as f:
        f.write("x" * 100)
    while not os.path.exists(os.path.join(d, "go")):
        time.sleep(0.05)
    with open(os.path.join(d, "phase2.txt"), "w") as f:
        f.write("y" * 200)
""")

WRITER = textwrap.dedent("""
    import json, os, sys, time
    d, n = sys.argv[1], int(sys.argv[2])
    out = sys.stdout
    def rec(r):
        out.write(json.dumps(r) + "\\n")
        out.flush()
    rec({"type": "attached_probes", "data": {"probes": 2}})
    t = 5_000_000_000_000
    for i in range(2 * n):
        if i == n:  # halfway: wait, the pipe open, until the test has seen the first half
            while not os.path.exists(os.path.join(d, "go")):
                time.sleep(0.05)
        rec({"type": "printf", "data": f"job_start {t} 101 0x{i:x} caller{i % 3}\\n"})
        rec({"type": "printf", "data": f"job_end {t + 1000 + i} 101 0x{i:x}\\n"})
        t += 10_000
        time.sleep(0.002)  # a slow producer: a record now and then, not a buffer's worth
    rec({"type": "hist", "data": {"@us": [{"min": 1, "max": 1, "count": 2 * n}]}})
""")
PATTERNS = [
    "--pattern",
    "job_start:job_start {ts} {tid} {task:hex} {caller:str}",
    "--pattern",
    "job_end:job_end {ts} {tid} {task:hex}",
    "--span",
    "job=job_start,job_end,task",
]


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed (make setup installs it)")
def test_issue29_strace_from_a_live_pipe_is_committed_as_it_arrives(tmp_path):
    store, work = tmp_path / "store", tmp_path / "work"
    work.mkdir()
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    strace = [
        "strace",
        "-f",
        "-ttt",
        "-T",
        "-y",
        "-e",
        "trace=%file,%desc",
        "-o",
        "/dev/stdout",
        sys.executable,
        str(prog),
        str(work),
    ]
    imp = [*TRACEHOUSE, "--store", str(store), "import", "strace", "-", "--name", "live", "--json"]
    proc = subprocess.Popen(
        f"{shlex.join(strace)} | {shlex.join(imp)}",
        shell=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_committed(
            store,
            "SELECT count(*) AS n FROM \"live\".syscall WHERE path LIKE '%phase1.txt'",
            lambda r: r[0]["n"] >= 1,
            proc,
        )
        with tracehouse.open(store, readonly=True) as s:
            assert (
                s.sql("SELECT count(*) AS n FROM \"live\".syscall WHERE path LIKE '%phase2.txt'").column(0)[0].as_py()
                == 0
            )
            assert s.sql("SELECT state FROM th.traces WHERE name = 'live'").column(0)[0].as_py() == "incomplete"
            assert s.producers("live"), "the producers seen so far are committed with the rows"
        (work / "go").touch()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    report = json.loads(out)
    with tracehouse.open(store, readonly=True) as s:
        n = s.sql('SELECT count(*) FROM "live".syscall').column(0)[0].as_py()
        writes = s.sql(
            "SELECT path, ret FROM \"live\".syscall WHERE name = 'write' AND path LIKE '%phase%.txt' ORDER BY ts"
        ).to_pylist()
        state = s.sql("SELECT state FROM th.traces WHERE name = 'live'").column(0)[0].as_py()
        dupes = (
            s.sql('SELECT count(*) FROM (SELECT producer, seq FROM "live".syscall GROUP BY ALL HAVING count(*) > 1)')
            .column(0)[0]
            .as_py()
        )
    assert state == "complete" and dupes == 0
    assert report["by_type"]["syscall"] == n
    assert [(w["path"].rsplit("/", 1)[1], w["ret"]) for w in writes] == [("phase1.txt", 100), ("phase2.txt", 200)]


@pytest.mark.parametrize("path", ["-", "/dev/stdin"])
def test_issue29_bpftrace_from_a_slow_writer_is_committed_before_the_pipe_closes(tmp_path, path):
    store, work = tmp_path / "store", tmp_path / "work"
    work.mkdir()
    n = 150
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(work), str(n)], stdout=subprocess.PIPE)
    proc = subprocess.Popen(
        [*TRACEHOUSE, "--store", str(store), "import", "bpftrace", path, "--name", "jobs", *PATTERNS, "--json"],
        stdin=writer.stdout,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    writer.stdout.close()  # the importer holds the read end
    try:
        first = wait_committed(
            store, 'SELECT count(*) AS n, min(caller) AS c FROM "jobs".job', lambda r: r[0]["n"] == n, proc
        )
        assert first == [{"n": n, "c": "caller0"}]
        assert writer.poll() is None, "the writer is still waiting: its pipe is open"
        (work / "go").touch()
        out, err = proc.communicate(timeout=120)
        assert writer.wait(timeout=30) == 0
    finally:
        for p in (proc, writer):
            if p.poll() is None:
                p.kill()
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report["by_type"] == {"job": 2 * n}
    with tracehouse.open(store, readonly=True) as s:
        rows = s.sql('SELECT count(*) AS n, count(DISTINCT task) AS tasks, sum(dur) AS d FROM "jobs".job').to_pylist()
        assert rows == [{"n": 2 * n, "tasks": 2 * n, "d": sum(1000 + i for i in range(2 * n))}]
        assert s.sql("SELECT state FROM th.traces WHERE name = 'jobs'").column(0)[0].as_py() == "complete"
        assert [r["name"] for r in s.results(trace="jobs")] == ["@us"]  # the map printed at the end


def test_issue29_an_importer_that_reads_files_says_so(tmp_path):
    p = subprocess.run(
        [*TRACEHOUSE, "--store", str(tmp_path / "s"), "import", "csv", "-"],
        input="a,b\n1,2\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2
    assert "reads files, not a pipe" in p.stderr and "strace" in p.stderr and "bpftrace" in p.stderr


LIVE_BPFTRACE = (
    'interval:ms:100 { @i++; printf("job_start %lld 101 0x%x caller%d\\n", nsecs, @i, (uint64)@i % 3); '
    'printf("job_end %lld 101 0x%x\\n", nsecs + 1000, @i); @us = hist(@i); if (@i == 80) { exit(); } }'
)


@pytest.mark.skipif(
    shutil.which("bpftrace") is None or __import__("os").geteuid() != 0, reason="needs bpftrace and root"
)
def test_issue29_live_bpftrace_pipe_is_committed_while_it_runs(tmp_path):
    """A real `bpftrace -f json` run (8 s of a job every 100 ms) piped into the importer: rows
    are in the store while bpftrace still runs; its map, printed at exit, too at the end."""
    r = subprocess.run(
        ["bpftrace", "-f", "json", "-e", 'BEGIN { printf("x\\n"); exit(); }'], capture_output=True, timeout=60
    )
    if r.returncode != 0 or b'"printf"' not in r.stdout:
        pytest.skip(f"bpftrace cannot run here: {r.stderr.decode(errors='replace')[-300:]}")
    store = tmp_path / "store"
    bpf = subprocess.Popen(
        ["bpftrace", "-f", "json", "-e", LIVE_BPFTRACE], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    proc = subprocess.Popen(
        [
            *TRACEHOUSE,
            "--store",
            str(store),
            "import",
            "bpftrace",
            "-",
            "--name",
            "live",
            "--pattern",
            "job_start:job_start {ts} {tid} {task:hex} {caller:str}",
            "--pattern",
            "job_end:job_end {ts} {tid} {task:hex}",
            "--span",
            "job=job_start,job_end,task",
            "--json",
        ],
        stdin=bpf.stdout,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    bpf.stdout.close()
    try:
        seen = wait_committed(
            store, 'SELECT count(*) AS n FROM "live".job', lambda r: r[0]["n"] > 0, proc, deadline_s=60
        )
        running = bpf.poll() is None
        out, err = proc.communicate(timeout=120)
        bpf.wait(timeout=30)
    finally:
        for p in (proc, bpf):
            if p.poll() is None:
                p.kill()
    assert running, "rows were committed while bpftrace still ran"
    assert proc.returncode == 0, err
    assert 0 < seen[0]["n"] < 80
    with tracehouse.open(store, readonly=True) as s:
        assert s.sql('SELECT count(*) FROM "live".job').column(0)[0].as_py() == 80
        assert {x["name"] for x in s.results(trace="live")} == {"@us", "@i"}  # the maps printed at exit
    assert json.loads(out)["by_type"]["job"] == 80
