"""CLI papercuts a new user meets: a capture's exit code, piped tables cut to 80 columns, default
trace names refused, silent long benchmarks, the IPv6 serve banner. (That every command the
documentation shows is accepted by the CLI is tests/test_docs.py's.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
import pytest

import tracehouse
from helpers import child_env
from helpers.cli import run, run_json
from helpers.strace import needs_strace
from tracehouse import Column, EventType
from tracehouse.cli import command as cli

CLI = [sys.executable, "-m", "tracehouse.cli"]


def test_bench_ingest_takes_the_documented_flags_and_shows_progress_when_piped(tmp_path):
    # The documented run (docs/benchmarks/running.md): `--systems raw,tracehouse,tracehouse-bulk,duckdb-bulk`.
    cli.build_parser().parse_args(
        ["bench", "ingest", "--systems", "raw,tracehouse,tracehouse-bulk,duckdb-bulk", "--repeat", "3"]
    )
    r = subprocess.run(
        [
            *CLI,
            "bench",
            "ingest",
            "--events",
            "20000",
            "--systems",
            "raw,tracehouse-bulk",
            "--repeat",
            "2",
            "--no-probe",
            "--workdir",
            str(tmp_path),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert [x["id"] for x in result["runs"]] == ["raw", "tracehouse-bulk"]
    assert all(len(x["all_seconds"]) == 2 for x in result["runs"])
    # stderr is a pipe here: progress comes as lines (a live bar would print nothing)
    assert "raw (1/2) ..." in r.stderr and "tracehouse-bulk (2/2): done (20,0" in r.stderr, r.stderr


def test_compact_merges_small_segments(tmp_path, capsys):
    store = tmp_path / "s"
    et = EventType("ev", "instant", (Column("v", "int64", "", "a value"),))
    with tracehouse.open(store, fsync="off") as s:
        s.create_trace("t", "test", event_types=[et])
        for i in range(6):
            s.append(
                "t",
                "ev",
                pa.table(
                    {
                        "ts": pa.array([i * 10 + 1, i * 10 + 2], pa.int64()),
                        "producer": pa.array([0, 0], pa.int32()),
                        "v": pa.array([i, i]),
                    }
                ),
            )
            s.flush("t")
    before = run_json(capsys, store, "query", "SELECT count(*) AS n FROM th.segments WHERE trace = 't'")[0]["n"]
    r = run_json(capsys, store, "compact", "t")
    assert before == 6 and r["traces"]["t"] == {"segments_before": 6, "segments": 1}
    assert run_json(capsys, store, "query", "SELECT count(*) AS n, sum(v)::BIGINT AS v FROM t.ev") == [
        {"n": 12, "v": 30}
    ]
    code, out, _ = run(capsys, store, "compact")
    assert code == 0 and "t: 1 -> 1 segments" in out
    code, _, err = run(capsys, store, "compact", "nope")
    assert code == 2 and "nope" in err


@needs_strace
def test_capture_exits_with_the_commands_exit_code(tmp_path):
    store = str(tmp_path / "s")
    r = subprocess.run(
        [*CLI, "--store", store, "capture", "--", "sh", "-c", "exit 7"],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )
    assert r.returncode == 7, r.stderr
    assert "exited with 7" in r.stdout
    r = subprocess.run(
        [*CLI, "--store", store, "capture", "--json", "--", "sh", "-c", "kill -TERM $$"],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )
    assert r.returncode == 128 + 15, r.stderr
    assert json.loads(r.stdout)["exit_status"] == -15


@needs_strace
def test_capture_json_is_alone_on_stdout_and_the_commands_output_goes_to_stderr(tmp_path):
    r = subprocess.run(
        [
            *CLI,
            "--store",
            str(tmp_path / "s"),
            "capture",
            "--json",
            "--",
            "sh",
            "-c",
            "echo from-the-command; echo its-error >&2",
        ],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)  # the whole of stdout
    assert out["exit_status"] == 0 and out["import"]["events"] > 0
    assert "from-the-command" in r.stderr and "its-error" in r.stderr
    r = subprocess.run(
        [*CLI, "--store", str(tmp_path / "s"), "capture", "--", "sh", "-c", "echo plain"],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )
    assert r.returncode == 0 and r.stdout.startswith("plain\n"), r.stdout  # without --json, as it was


def test_piped_ls_and_search_print_whole_values(tmp_path):
    # A long name and epoch timestamps (printed as ISO times): 80 columns cut them ("2026-…").
    name = "nightly-regression-run-with-a-rather-long-descriptive-name-2026-11-25"
    f = tmp_path / "ev.csv"
    f.write_text("ts,producer,type,v\n1764000000000000000,1,a,1\n1764000000500000000,1,a,2\n")
    store = str(tmp_path / "s")
    assert cli.main(["--store", store, "import", "csv", str(f), "--name", name, "--json"]) == 0
    env = {k: v for k, v in child_env().items() if k != "COLUMNS"}
    for cmd in (["ls"], ["search", "nightly-*"]):
        r = subprocess.run([*CLI, "--store", store, *cmd], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        row = next(line for line in r.stdout.splitlines() if "nightly" in line)
        assert name in row and "2025-11-24T16:00:00.500000+00:00" in row, r.stdout
        assert "…" not in r.stdout


def test_default_trace_names_are_cleaned_and_unicode_names_allowed(tmp_path, capsys):
    store = tmp_path / "s"
    for fname, want in (("my events (1).csv", "my_events_1"), ("データ.csv", "データ"), ("café.csv", "café")):
        f = tmp_path / fname
        f.write_text("ts,producer,type,v\n1,1,a,1\n2,1,a,2\n")
        assert run_json(capsys, store, "import", "csv", str(f))["trace"] == want
        assert run_json(capsys, store, "query", f'SELECT count(*) AS n FROM "{want}".events') == [{"n": 2}]
    assert (
        run_json(capsys, store, "import", "csv", str(tmp_path / "データ.csv"), "--name", "計測-2")["trace"] == "計測-2"
    )
    # A name given explicitly is checked as given, and the message says what is allowed.
    code, _, err = run(capsys, store, "import", "csv", str(tmp_path / "データ.csv"), "--name", "a b")
    assert code == 2 and "any script" in err


def test_ipv6_banner_url_has_brackets(tmp_path):
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen(
        [
            *CLI,
            "--store",
            str(tmp_path / "s"),
            "serve",
            "--host",
            "::1",
            "--port",
            "0",
            "--tcp-port",
            "0",
            "--ready-file",
            str(ready),
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=child_env(),
    )
    try:
        banner = proc.stderr.readline()
        if not banner.startswith("tracehouse serving"):  # no IPv6 on this machine
            pytest.skip(f"cannot serve on ::1: {banner.strip()}")
        import time

        deadline = time.monotonic() + 30  # the banner is printed just before the ready file is written
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        info = json.loads(ready.read_text())
        assert info["http"] == f"http://[::1]:{info['http_port']}"
        assert f"http://[::1]:{info['http_port']} " in banner and f"tcp://[::1]:{info['tcp_port']}" in banner
        import urllib.request

        with urllib.request.urlopen(info["http"] + "/health", timeout=30) as resp:  # the URL as printed works
            assert resp.status == 200
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        proc.stderr.close()


def test_capture_default_names_never_collide_within_one_second(tmp_path, monkeypatch):
    # Two captures of one program in the same second used to be refused ("already exists").
    from tracehouse.formats import capture as capmod

    monkeypatch.setattr(capmod.time, "strftime", lambda fmt: "20261126-002546")
    assert capmod.default_name(["/bin/sh", "-c", "true"]) == "sh-20261126-002546"
    assert capmod.default_name(["sh"], {"sh-20261126-002546"}) == "sh-20261126-002546-2"
    assert capmod.default_name(["sh"], {"sh-20261126-002546", "sh-20261126-002546-2"}) == "sh-20261126-002546-3"
    monkeypatch.undo()
    store = str(tmp_path / "s")
    names = set()
    for _ in range(3):
        r = subprocess.run(
            [*CLI, "--store", store, "capture", "--json", "--", "sh", "-c", "exit 0"],
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        names.add(json.loads(r.stdout)["trace"])
    assert len(names) == 3


@pytest.mark.parametrize("chosen", [None, "system"])
def test_the_command_allocates_arrow_memory_with_jemalloc_unless_the_user_chose(chosen):
    # mimalloc, pyarrow's default, faulted in freshly zeroed pages for every checkpoint's
    # buffers (command.main); a pool the user names in ARROW_DEFAULT_MEMORY_POOL stays theirs.
    env = child_env()
    env.pop("ARROW_DEFAULT_MEMORY_POOL", None)
    if chosen:
        env["ARROW_DEFAULT_MEMORY_POOL"] = chosen
    code = (
        "import sys\nfrom tracehouse.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "import pyarrow as pa\nprint(pa.default_memory_pool().backend_name)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == (chosen or "jemalloc")


def test_the_command_skips_the_teardown_but_not_what_an_exit_owes(tmp_path):
    """`tracehouse` (and `python -m tracehouse.cli`) end with os._exit once the command returned
    (`cli.run`): the output still reaches a pipe whole, exit codes stay, atexit handlers and
    non-daemon threads still run, and a reader that stops early is no error."""
    store = str(tmp_path / "st")
    env = child_env()
    env.pop("PYTHONUNBUFFERED", None)  # (stdout block-buffered into a pipe, as it is for users)
    r = subprocess.run(
        [*CLI, "--store", store, "generate", "tod", "--events", "200000", "--name", "t"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    # ~200K CSV lines: far more than one pipe buffer or one stdout buffer.
    r = subprocess.run(
        [*CLI, "--store", store, "query", 'SELECT ts, producer FROM "t".events ORDER BY ts', "--format", "csv"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    n = subprocess.run(
        [*CLI, "--store", store, "query", 'SELECT count(*) AS n FROM "t".events', "--format", "csv"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    ).stdout.split()
    assert n[0] == "n" and int(n[1]) >= 200_000
    assert lines[0] == "ts,producer" and len(lines) == 1 + int(n[1]) and lines[-1].count(",") == 1
    r = subprocess.run(
        [*CLI, "--store", store, "query", "SELECT nope"], capture_output=True, text=True, timeout=60, env=env
    )
    assert r.returncode == 2 and "nope" in r.stderr  # (BadInput's exit code)
    r = subprocess.run([*CLI, "--no-such-flag"], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2 and "usage" in r.stderr
    # A reader that stops after one line: exit 0, nothing about a broken pipe.
    p = subprocess.Popen(
        [*CLI, "--store", store, "query", 'SELECT ts FROM "t".events', "--format", "csv"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert p.stdout.readline().strip() == b"ts"
    p.stdout.close()
    assert p.wait(timeout=60) == 0
    err = p.stderr.read()
    assert b"Broken" not in err and b"Exception ignored" not in err, err
    # atexit handlers and a non-daemon thread of the command's still run before the exit: the
    # thread writes only once the command has returned, so only the join that `run` owes (through
    # CPython's private `threading._shutdown`) lets it finish; were that gone or renamed, the
    # os._exit would cut the thread off and "thread" would be missing.
    mark = tmp_path / "mark"
    code = (
        "import atexit, sys, threading, time\nfrom tracehouse import cli\n"
        "returned = threading.Event()\nreal = cli.main\n"
        "def main(argv=None):\n    try:\n        return real(argv)\n    finally:\n        returned.set()\n"
        "cli.main = main\n"
        f"atexit.register(lambda: open({str(mark)!r}, 'a').write('atexit\\n'))\n"
        f"threading.Thread(target=lambda: (returned.wait(), time.sleep(0.3), "
        f"open({str(mark)!r}, 'a').write('thread\\n'))).start()\n"
        f"sys.argv = ['tracehouse', '--store', {store!r}, 'ls', '--json']\ncli.run()\nprint('not reached')"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0 and "not reached" not in r.stdout, r.stderr
    assert [t["name"] for t in json.loads(r.stdout)] == ["t"]  # (printed, still in stdout's buffer at the exit)
    assert mark.read_text().splitlines() == ["thread", "atexit"]
