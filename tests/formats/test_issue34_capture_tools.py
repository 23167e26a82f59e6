"""`tracehouse capture --tool strace|bpftrace|perf -- CMD`: live tracers streamed into the store.

Real tools on real programs: perf record + perf script on a C program (its stack samples read
by the flame graph) and on a Python program that computes and then waits; bpftrace with uprobes
and tracepoints on programs built here (skipped, with bpftrace's own reason, where it cannot
attach probes); strace. While the command waits halfway, the rows of its first half must be in
the store, registered, read by another process; the trace completes when the tool ends. The
reading path also gets a recorded bpftrace stream from a slow writer whose child keeps the FIFO
open after it exits. Errors: a tool that is not installed, a script bpftrace refuses, a command
exiting with an error, Ctrl-C (once: the tool's last words kept, the trace complete; twice: the
tools stopped, the trace kept with its incomplete mark).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import tracehouse
from helpers.tracers import bpftrace_cannot_trace, perf_cannot_record, wait_committed
from tracehouse.analysis import samples
from tracehouse.cli import main
from tracehouse.errors import BadInput
from tracehouse.formats import capture as cap

TRACEHOUSE = [sys.executable, "-m", "tracehouse.cli"]
DATA = Path(__file__).parent.parent / "data" / "bpftrace"
BURN = Path(__file__).parent / "perf" / "burn.c"

# Computes (CPU samples for perf), opens phase1 (a syscall for strace and bpftrace), waits for
# the test's go, then computes and opens phase2.
PHASES = textwrap.dedent("""
    import os, sys, time
    os.chdir(sys.argv[1])  # relative names below: bpftrace's str() keeps 64 bytes of a path
    d = "."
    def spin(s):
        t = time.process_time()
        x = 0
        while time.process_time() - t < s:
            for i in range(10000):
                x += i
        return x
    spin(float(sys.argv[2]))
    open(os.path.join(d, "phase1"), "w").close()
    while not os.path.exists(os.path.join(d, "go")):
        time.sleep(0.05)
    spin(float(sys.argv[2]) / 2)
    open(os.path.join(d, "phase2"), "w").close()
""")


def _needs(why: str | None) -> None:
    if why:
        pytest.skip(why)


def _state(store: Path, trace: str) -> str | None:
    with tracehouse.open(store, readonly=True) as s:
        rows = s.sql(f"SELECT state FROM th.traces WHERE name = '{trace}'").to_pylist()
    return rows[0]["state"] if rows else None


def _phased_capture(tmp_path, tool_argv: list[str], query: str, ok, spin_s: float = 0.6):
    """Runs `capture TOOL... -- python PHASES work` in a subprocess; while the program waits for
    its go, `query` must answer ok (rows committed while the tool runs). Returns (JSON report,
    the answer seen midway, the store)."""
    store, work = tmp_path / "store", tmp_path / "work dir"  # a blank in a word of the command
    work.mkdir()
    prog = tmp_path / "phases.py"
    prog.write_text(PHASES)
    proc = subprocess.Popen(
        [*TRACEHOUSE, "--store", str(store), "capture", "--json", *tool_argv, "--"]
        + [sys.executable, str(prog), str(work), str(spin_s)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not (work / "phase1").exists():
            assert proc.poll() is None, proc.stderr.read()[-2000:]
            time.sleep(0.05)
        seen = wait_committed(store, query, ok, proc)
        assert _state(store, "live") == "incomplete", "the trace is marked incomplete while it streams"
        assert not (work / "phase2").exists()
        (work / "go").touch()
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert _state(store, "live") == "complete"
    return json.loads(out), seen, store


# -- perf -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def burn(tmp_path_factory):
    _needs(perf_cannot_record())
    exe = tmp_path_factory.mktemp("bin") / "burn"
    subprocess.run(
        ["cc", "-O0", "-g", "-fno-omit-frame-pointer", "-pthread", "-o", str(exe), str(BURN)], check=True, timeout=120
    )
    return exe


def test_issue34_perf_capture_gives_stack_samples_the_flame_graph_reads(burn, tmp_path, capsys):
    store = tmp_path / "s"
    rc = main(["--store", str(store), "capture", "--tool", "perf", "--name", "burn", "--json", "--", str(burn)])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["exit_status"] == 0 and out["tool"] == "perf"
    assert out["import"]["rejected"] == 0 and out["import"]["by_type"]["sample"] > 20
    assert [a[1] for a in out["tool_argv"]] == ["record", "script"]
    with tracehouse.open(store, readonly=True) as s:
        tree = samples.call_tree(s, "burn")
        names = set(tree.column("name").to_pylist())
        assert {"main", "worker", "compute"} <= names and ({"leaf_mul", "leaf_div"} & names)
        folded = s.sql('SELECT count(*) AS n, sum(depth) AS frames FROM "burn".sample').to_pylist()[0]
        assert folded["n"] == out["import"]["by_type"]["sample"] and folded["frames"] > folded["n"]
        assert s.trace("burn").metadata["tool"] == "perf"
    assert {r["leaf"] for r in out["summary"]["top_leaves"][:2]} & {"leaf_mul", "leaf_div"}
    assert main(["--store", str(store), "analyze", "flame", "burn"]) == 0
    assert "compute" in capsys.readouterr().out


def test_issue34_perf_samples_are_in_the_store_before_the_command_ends(tmp_path):
    _needs(perf_cannot_record())
    report, seen, store = _phased_capture(
        tmp_path,
        ["--tool", "perf", "--name", "live"],
        'SELECT count(*) AS n FROM "live".sample',
        lambda r: r[0]["n"] > 0,
    )
    total = report["import"]["by_type"]["sample"]
    assert 0 < seen[0]["n"] < total
    with tracehouse.open(store, readonly=True) as s:
        assert s.sql('SELECT count(*) FROM "live".sample').column(0)[0].as_py() == total


def test_issue34_perf_capture_of_a_failing_command_keeps_its_trace_and_exit_status(burn, tmp_path, capsys):
    store = tmp_path / "s"
    cmd = ["sh", "-c", f"{burn} > /dev/null; exit 3"]
    assert main(["--store", str(store), "capture", "--tool", "perf", "--name", "f", "--json", "--", *cmd]) == 3
    out = json.loads(capsys.readouterr().out)
    assert out["exit_status"] == 3 and out["import"]["events"] > 0
    assert _state(store, "f") == "complete"


def test_issue34_a_tool_that_is_not_installed_is_said_and_nothing_is_made(tmp_path):
    store = tmp_path / "s"
    for tool, extra in (("perf", []), ("bpftrace", ["BEGIN {}"]), ("strace", [])):
        p = subprocess.run(
            [*TRACEHOUSE, "--store", str(store), "capture", "--tool", tool, *extra, "--", "/bin/true"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PATH": str(tmp_path / "empty")},
        )
        assert p.returncode != 0
        assert f"{tool} is not installed" in p.stderr and "nothing was captured" in p.stderr
    if store.exists():
        with tracehouse.open(store, readonly=True) as s:
            assert s.traces() == []


def test_issue34_ctrl_c_keeps_what_the_tool_wrote_and_completes_the_trace(burn, tmp_path):
    """A terminal's Ctrl-C signals the whole process group: perf record stops and writes its
    last samples, perf script (a session of its own) prints them all, the trace completes."""
    store, work = tmp_path / "s", tmp_path / "w"
    work.mkdir()
    prog = tmp_path / "spin.py"
    prog.write_text(
        "import os, sys, time\n"
        "t = time.process_time()\n"
        "while True:\n"
        "    sum(range(10000))\n"
        "    if time.process_time() - t > 0.5: open(sys.argv[1], 'a').close()\n"
    )
    proc = subprocess.Popen(
        [*TRACEHOUSE, "--store", str(store), "capture", "--tool", "perf", "--name", "spin", "--json", "--"]
        + [sys.executable, str(prog), str(work / "busy")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the test's Ctrl-C reaches it alone
    )
    try:
        while not (work / "busy").exists():
            assert proc.poll() is None, proc.stderr.read()[-2000:]
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    report = json.loads(out)
    assert report["interrupted"] is True
    assert report["exit_status"] is not None and report["exit_status"] != 0  # the command was stopped
    assert proc.returncode == (128 - report["exit_status"] if report["exit_status"] < 0 else report["exit_status"])
    n = report["import"]["by_type"]["sample"]
    assert n > 0 and _state(store, "spin") == "complete"
    with tracehouse.open(store, readonly=True) as s:
        assert s.sql('SELECT count(*) FROM "spin".sample').column(0)[0].as_py() == n


def test_issue34_a_second_ctrl_c_stops_the_tools_and_keeps_the_trace_marked_incomplete(tmp_path):
    """strace -I4 does not stop at SIGINT, nor does a command that ignores it: the first Ctrl-C
    changes nothing, the second stops the capture. What was committed stays, marked incomplete."""
    store, work = tmp_path / "s", tmp_path / "w"
    work.mkdir()
    prog = tmp_path / "stubborn.py"
    prog.write_text(
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "for i in range(20): os.stat('/')\n"
        "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
        "time.sleep(120)\n"
    )
    out, err = tmp_path / "out", tmp_path / "err"
    with open(out, "w") as o, open(err, "w") as e:
        # Files, not pipes: the command outlives the capture (it ignores SIGINT) and holds them.
        proc = subprocess.Popen(
            [*TRACEHOUSE, "--store", str(store), "capture", "--tool-args=-I4", "--all-syscalls", "--name", "st", "--"]
            + [sys.executable, str(prog), str(work / "ready")],
            stdout=o,
            stderr=e,
            start_new_session=True,
        )
    try:
        wait_committed(
            store, "SELECT count(*) AS n FROM \"st\".syscall WHERE path = '/'", lambda r: r[0]["n"] >= 20, proc
        )
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(1.5)
        assert proc.poll() is None, "the first Ctrl-C waits for the tool"
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        if (work / "ready").exists() and (work / "ready").read_text():
            try:
                os.kill(int((work / "ready").read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert proc.returncode == 130 and "interrupted" in err.read_text()
    assert _state(store, "st") == "incomplete"
    with tracehouse.open(store, readonly=True) as s:
        assert s.sql("SELECT count(*) FROM \"st\".syscall WHERE path = '/'").column(0)[0].as_py() >= 20


# -- strace ----------------------------------------------------------------------------------------


def test_issue34_strace_capture_commits_rows_while_the_command_runs(tmp_path):
    report, seen, store = _phased_capture(
        tmp_path,
        ["--name", "live"],
        "SELECT count(*) AS n FROM \"live\".syscall WHERE path LIKE '%phase1'",
        lambda r: r[0]["n"] >= 1,
    )
    with tracehouse.open(store, readonly=True) as s:
        got = s.sql("SELECT count(*) FROM \"live\".syscall WHERE path LIKE '%phase2'").column(0)[0].as_py()
    assert got >= 1 and report["exit_status"] == 0 and report["tool"] == "strace"


# -- bpftrace -------------------------------------------------------------------------------------

OPENS = (
    "tracepoint:syscalls:sys_enter_openat /pid == cpid/ "
    '{ printf("open %lld %d %s\\n", nsecs, tid, str(args->filename)); @opens = count(); }'
)


def test_issue34_bpftrace_capture_commits_rows_while_the_command_runs(tmp_path):
    _needs(bpftrace_cannot_trace())
    report, seen, store = _phased_capture(
        tmp_path,
        ["--tool", "bpftrace", "--name", "live", "--pattern", "open:open {ts} {tid} {file:str}", OPENS],
        "SELECT count(*) AS n FROM \"live\".open WHERE file LIKE '%phase1'",
        lambda r: r[0]["n"] >= 1,
    )
    assert report["exit_status"] is None and report["tool_status"] == 0  # bpftrace does not pass it on
    with tracehouse.open(store, readonly=True) as s:
        files = s.sql('SELECT file FROM "live".open').column(0).to_pylist()
        assert "./phase2" in files  # the word with a blank (the directory) reached the command
        assert [r["name"] for r in s.results(trace="live")] == ["@opens"]  # printed when bpftrace ended
        assert s.trace("live").metadata["tool"] == "bpftrace"


def test_issue34_bpftrace_uprobes_on_a_program_built_here(tmp_path, capsys):
    """The docs' bpftrace example, captured: job_start/job_end uprobes of jobs.c paired into spans."""
    _needs(bpftrace_cannot_trace())
    exe = tmp_path / "jobs"
    subprocess.run(["cc", "-O1", "-pthread", "-o", str(exe), str(DATA / "jobs.c")], check=True, timeout=120)
    script = (
        f'uprobe:{exe}:job_start {{ printf("job_start %lld %d %p\\n", nsecs, tid, arg0); @start[arg0] = nsecs; }} '
        f'uprobe:{exe}:job_end /@start[arg0]/ {{ printf("job_end %lld %d %p\\n", nsecs, tid, arg0); '
        "@us = hist((nsecs - @start[arg0]) / 1000); delete(@start[arg0]); }"
    )
    script_file = tmp_path / "jobs.bt"
    script_file.write_text(script)
    store = tmp_path / "s"
    rc = main(
        ["--store", str(store), "capture", "--tool", "bpftrace", "--name", "jobs", "--json"]
        + [
            "--pattern",
            "job_start:job_start {ts} {tid} {task:hex}",
            "--pattern",
            "job_end:job_end {ts} {tid} {task:hex}",
        ]
        + ["--span", "job=job_start,job_end,task", str(script_file), "--", str(exe)]
    )
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["import"]["by_type"] == {"job": 100}  # 4 threads x 25 jobs
    with tracehouse.open(store, readonly=True) as s:
        assert s.sql('SELECT count(DISTINCT producer) FROM "jobs".job').column(0)[0].as_py() == 4
        assert [r["name"] for r in s.results(trace="jobs")] == ["@us"]


def test_issue34_a_script_bpftrace_refuses_leaves_nothing(store, tmp_path):
    if not Path("/usr/bin/bpftrace").exists() and bpftrace_cannot_trace():
        pytest.skip(bpftrace_cannot_trace())
    with pytest.raises(BadInput, match="bpftrace traced nothing"):
        cap.capture(store, ["/bin/true"], "bad", tool="bpftrace", script="tracepoint:no:such_probe_here { oops }")
    assert store.traces() == []


def test_issue34_usage_errors(store):
    with pytest.raises(BadInput, match="needs a script"):
        cap.capture(store, ["/bin/true"], "x", tool="bpftrace")
    with pytest.raises(BadInput, match="for --tool bpftrace"):
        cap.capture(store, ["/bin/true"], "x", tool="perf", script="BEGIN {}")
    with pytest.raises(BadInput, match="unknown capture tool"):
        cap.capture(store, ["/bin/true"], "x", tool="dtrace")
    assert store.traces() == []


# -- the reading path with a recorded bpftrace stream ------------------------------------------------

# Replays a recorded `bpftrace -f json` output into a FIFO a line every few ms, stops halfway until
# the test says go, starts a child that inherits the FIFO and outlives the writer (as bpftrace's
# -c command can), then exits.
REPLAY = textwrap.dedent("""
    import os, subprocess, sys, time
    fifo, recorded, d = sys.argv[1:4]
    lines = open(recorded, "rb").read().splitlines(keepends=True)
    out = open(fifo, "wb", buffering=0)
    half = len(lines) // 2
    for i, line in enumerate(lines):
        if i == half:
            open(os.path.join(d, "half"), "w").close()
            while not os.path.exists(os.path.join(d, "go")):
                time.sleep(0.05)
        out.write(line)
        time.sleep(0.003)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], pass_fds=(out.fileno(),),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    open(os.path.join(d, "sleeper"), "w").write(str(child.pid))
    sys.exit(0)
""")

DRIVER = textwrap.dedent("""
    import json, os, subprocess, sys, tempfile
    import tracehouse
    from tracehouse.formats import bpftrace as fmt, capture as cap
    from tracehouse.formats.probes import import_probe_output
    store, replay, recorded, d = sys.argv[1:5]
    tmp = tempfile.mkdtemp()
    def start():
        path, fd = cap.fifo_reader(tmp, "bpftrace.fifo")
        return [subprocess.Popen([sys.executable, replay, path, recorded, d])], fd
    live = cap.LiveTool("bpftrace", start, commit_s=0.2)
    with tracehouse.open(store) as s:
        r = import_probe_output("bpftrace", fmt, s, "replay", "jobs", chunks=live.chunks(),
                                pattern=["job_start:job_start {ts} {tid} {task:hex}", "job_end:job_end {ts} {tid} {task:hex}"],
                                span=["job=job_start,job_end,task"])
    print(json.dumps({"events": r.events, "results": [x["name"] for x in r.details.get("results", [])]}))
""")


def test_issue34_recorded_bpftrace_stream_is_committed_before_the_writer_ends(tmp_path):
    """The capture's reader (`LiveTool`) on a real bpftrace stream from a slow writer: the first
    half is registered while the writer waits, and the reading ends when the writer exits even
    though its child still holds the FIFO open (bpftrace's -c command inherits it)."""
    store, d = tmp_path / "s", tmp_path / "d"
    d.mkdir()
    (tmp_path / "replay.py").write_text(REPLAY)
    (tmp_path / "driver.py").write_text(DRIVER)
    proc = subprocess.Popen(
        [sys.executable, str(tmp_path / "driver.py"), str(store), str(tmp_path / "replay.py")]
        + [str(DATA / "jobs.json"), str(d)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not (d / "half").exists():
            assert proc.poll() is None, proc.stderr.read()[-2000:]
            time.sleep(0.05)
        seen = wait_committed(store, 'SELECT count(*) AS n FROM "jobs".job', lambda r: r[0]["n"] > 0, proc)
        assert _state(store, "jobs") == "incomplete"
        (d / "go").touch()
        t0 = time.monotonic()
        out, err = proc.communicate(timeout=50)  # the inheriting child sleeps 60 s
        assert time.monotonic() - t0 < 40
    finally:
        if proc.poll() is None:
            proc.kill()
        if (d / "sleeper").exists():
            try:
                os.kill(int((d / "sleeper").read_text()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
    assert proc.returncode == 0, err
    r = json.loads(out)
    assert 0 < seen[0]["n"] < 100 and r == {"events": 100, "results": ["@us", "@per_thread", "@avg_us"]}
    assert _state(store, "jobs") == "complete"
