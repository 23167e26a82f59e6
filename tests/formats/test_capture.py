"""`tracehouse capture -- CMD`: real programs run under the installed strace, streamed into the store."""

from __future__ import annotations

import json
import sys
import time

import pytest

from helpers.strace import build_programs, check_io_threads, needs_strace
from tracehouse.cli import main
from tracehouse.errors import BadInput
from tracehouse.formats import capture as cap
from tracehouse.formats.strace.capture import summarize

pytestmark = needs_strace


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return build_programs(tmp_path_factory.mktemp("bin"))


def test_capture_multithreaded_program_from_the_cli(programs, tmp_path, capsys):
    work = tmp_path / "work"
    work.mkdir()
    store = tmp_path / "s"
    rc = main(
        ["--store", str(store), "capture", "--name", "mt", "--json", "--", str(programs / "io_threads"), str(work)]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["exit_status"] == 0 and out["trace"] == "mt"
    assert out["import"]["rejected"] == 0
    assert out["summary"]["processes"] == 1 and out["summary"]["threads"] == 5
    assert out["summary"]["bytes_written"] == 4 * 10 * 4096
    assert out["summary"]["bytes_read"] >= 4 * 40960  # plus the loader's reads of libc
    import tracehouse

    with tracehouse.open(store, readonly=True) as s:
        check_io_threads(s, "mt", str(work))
        names = set(s.sql("SELECT DISTINCT name FROM mt.syscall").column("name").to_pylist())
        assert {"openat", "write", "read", "fsync", "close", "clone3", "execve"} <= names
        assert "futex" not in names and "rt_sigprocmask" not in names  # IO syscalls only by default
        assert s.trace("mt").metadata["command"].endswith(f"io_threads {work}")


def test_capture_summary_is_printed(programs, tmp_path, capsys):
    work = tmp_path / "work"
    work.mkdir()
    assert main(["--store", str(tmp_path / "s"), "capture", "--", str(programs / "io_single"), str(work)]) == 0
    text = capsys.readouterr().out
    assert "captured io_single-" in text and "exited with 0" in text
    assert "syscalls by time" in text and "files by bytes" in text


def test_all_syscalls_and_exit_status(store, programs, tmp_path):
    r = cap.capture(store, ["sh", "-c", "exit 3"], "sh3", all_syscalls=True)
    assert r.exit_status == 3
    assert store.sql("SELECT status FROM sh3.exit").column("status").to_pylist()[-1] == 3
    assert r.report.by_type["syscall"] > 10
    assert "rt_sigaction" in set(store.sql("SELECT name FROM sh3.syscall").column("name").to_pylist())


def test_the_trace_streams_while_the_command_runs(store, tmp_path):
    """Lines reach the parser through the FIFO before the command ends (no file read afterwards)."""
    seen = []
    t0 = time.monotonic()
    cmd = [sys.executable, "-c", "import time, os; os.stat('/'); time.sleep(1.0); os.stat('/tmp')"]
    r = cap.capture(store, cmd, "slow", progress=lambda n: seen.append(time.monotonic() - t0))
    total = time.monotonic() - t0
    assert r.exit_status == 0
    assert seen and seen[0] < total - 0.5
    paths = store.sql("SELECT path FROM slow.syscall WHERE name IN ('newfstatat', 'stat')").column("path").to_pylist()
    assert "/" in paths and "/tmp" in paths


def test_a_command_that_cannot_run_registers_nothing(store, tmp_path):
    with pytest.raises(BadInput, match="traced nothing"):
        cap.capture(store, [str(tmp_path / "no-such-program")], "none")
    assert store.traces() == []


def test_no_command(tmp_path, capsys):
    assert main(["--store", str(tmp_path / "s"), "capture", "--name", "x"]) == 2
    assert "no command" in capsys.readouterr().err


def test_cp_r_bytes_moved_by_copy_file_range_are_typed_and_summed(store, tmp_path, monkeypatch):
    """Regression: `cp -r` moves its bytes with copy_file_range (coreutils >= 9), which the summary
    counted as nothing ("wrote 0 B"). Real cp, real strace: every byte shows up on both files."""
    import shutil

    cp = shutil.which("cp")
    if cp is None:
        pytest.skip("no cp")
    src = tmp_path / "src"
    (src / "sub" / "deeper").mkdir(parents=True)
    sizes = {"a.bin": 300_000, "sub/b.bin": 70_001, "sub/deeper/c.txt": 5}
    for rel, n in sizes.items():
        (src / rel).write_bytes(bytes(range(256)) * (n // 256) + b"x" * (n % 256))
    monkeypatch.chdir(tmp_path)
    r = cap.capture(store, [cp, "-r", "src", "dst"], "cp")
    assert r.exit_status == 0 and r.report.rejected == 0
    total = sum(sizes.values())
    s = summarize(store, "cp", top=100)
    assert s["bytes_written"] == total  # whether cp used copy_file_range or read/write
    files = {f["path"]: f for f in s["by_file"]}
    for rel, n in sizes.items():
        assert files[str(tmp_path / "dst" / rel)]["bytes_written"] == n
        assert files[str(tmp_path / "src" / rel)]["bytes_read"] == n
    copies = store.sql("""SELECT path, path2, sum(ret) AS moved, min(pos) AS first_pos, max(pos + ret) AS end_pos,
                                 bool_and(pos = pos2) AS same_pos, bool_and(fd IS NOT NULL AND fd2 IS NOT NULL) AS fds
                          FROM cp.syscall WHERE name = 'copy_file_range' GROUP BY path, path2""").to_pylist()
    if not copies:
        pytest.skip("this cp copies with read/write (no copy_file_range to check)")
    got = {(c["path"], c["path2"]): c for c in copies}
    for rel, n in sizes.items():
        c = got[(str(tmp_path / "src" / rel), str(tmp_path / "dst" / rel))]
        assert (c["moved"], c["first_pos"], c["end_pos"], c["same_pos"], c["fds"]) == (n, 0, n, True, True)
    # The path the program asked for, beside the one -y resolved.
    asked = store.sql("""SELECT path_arg, path FROM cp.syscall
                         WHERE name = 'openat' AND path_arg LIKE 'dst/%' AND ret >= 0""").to_pylist()
    assert {a["path_arg"]: a["path"] for a in asked} == {f"dst/{rel}": str(tmp_path / "dst" / rel) for rel in sizes}
