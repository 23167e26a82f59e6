"""`tracehouse replay`: a real multithreaded program captured with strace, replayed into a
temporary root; sizes, per-fd order, issue-time errors, copies, and nothing outside the root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers.cli import run_json
from helpers.strace import build_programs, needs_strace
from tracehouse.cli import main

pytestmark = needs_strace


def snapshot(top: Path, skip: tuple[Path, ...]) -> dict:
    """Every entry under `top` (outside `skip`) with its size and mtime."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(top):
        d = Path(dirpath)
        dirnames[:] = [n for n in dirnames if not any((d / n) == s for s in skip)]
        for n in dirnames + filenames:
            st = os.lstat(d / n)
            out[str(d / n)] = (st.st_size, st.st_mtime_ns, st.st_mode)
    return out


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """A store holding a capture of io_threads (4 threads, each: 10 writes, fsync, 42 reads)."""
    base = tmp_path_factory.mktemp("replay")
    programs = build_programs(base)
    work = base / "work"
    work.mkdir()
    store = base / "store"
    assert (
        main(
            ["--store", str(store), "capture", "--name", "mt", "--json", "--", str(programs / "io_threads"), str(work)]
        )
        == 0
    )
    return base, store, work


def test_replay_of_a_captured_program(captured, capsys):
    base, store, work = captured
    root = base / "root1"
    before = snapshot(base, (root, store))
    sm = run_json(capsys, store, "replay", "mt", "--root", str(root), "--map", f"{work}=data", "--name", "mt-r1")[
        "summary"
    ]
    assert sm["complete"] and sm["errors"] == 0 and sm["divergent"] == 0 and sm["refused_outside_root"] == 0
    assert sm["threads"] == 5 and sm["copies"] == 1
    # the files end with the traced sizes
    for i in range(4):
        assert (root / "data" / f"out-{i}.dat").stat().st_size == 4 * 10 * 1024 + 0 * i == 40960
    # files only read get the size the trace implies (the loader's fstat of the real file)
    assert (root / "etc/ld.so.cache").stat().st_size == os.stat("/etc/ld.so.cache").st_size
    # nothing outside the root changed (the captured work files included)
    assert snapshot(base, (root, store)) == before
    # the issue-time error of every call is recorded, never negative
    assert set(sm["lag_us"]) >= {"p50", "p99", "max"}
    assert sm["on_time_share"] > 0 and set(sm["issue_error_us"]) >= {"p50", "p99", "max"}
    import tracehouse

    with tracehouse.open(store, readonly=True) as s:
        t = s.sql(
            'SELECT count(*) AS n, count(lag) AS lagged, min(lag) AS lo, count(planned) AS planned FROM "mt-r1".op'
        ).to_pylist()[0]
        assert t["n"] == sm["ops"] and t["lagged"] == t["n"] == t["planned"] and t["lo"] >= 0
        # per-fd order: each file's writes and reads in the traced order, reads ending at EOF
        rows = s.sql("""SELECT path, list(ret ORDER BY ts) FILTER (kind = 'read') AS reads,
                               list(ret ORDER BY ts) FILTER (kind = 'write') AS writes,
                               list(source_seq ORDER BY ts) AS seqs, count(DISTINCT producer) AS threads
                        FROM "mt-r1".op WHERE path LIKE 'data/out-%' GROUP BY path ORDER BY path""").to_pylist()
        assert [r["path"] for r in rows] == [f"data/out-{i}.dat" for i in range(4)]
        for r in rows:
            # (seen once in CI: one file without its reads; the source rows then say why)
            src = s.sql(f"""SELECT ts, producer, seq, name, fd, path, ret FROM "mt".syscall
                            WHERE path LIKE '%{r["path"][5:]}' ORDER BY ts""").to_pylist()
            assert src, r
            assert r["writes"] == [4096] * 10, (r, src)
            assert r["reads"] == [1000] * 40 + [960, 0], (r, src)
            assert r["seqs"] == sorted(r["seqs"]) and r["threads"] == 1
        # linked to its source as a processed trace
        res = s.results(trace="mt", tool="tracehouse.replay")
        assert [r["params"]["derived"] for r in res if r["kind"] == "processed"][-1] == "mt-r1"
        skipped = {r["name"] for r in s.sql('SELECT DISTINCT name FROM "mt-r1".skip').to_pylist()}
        assert {"mmap", "execve", "clone3"} <= skipped


def test_copies_replay_side_by_side(captured, capsys):
    base, store, work = captured
    root = base / "root2"
    sm = run_json(
        capsys, store, "replay", "mt", "--root", str(root), "--only", str(work), "--copies", "3", "--timing", "asap"
    )["summary"]
    assert sm["ops"] == 3 * sm["ops_per_copy"] and sm["copies"] == 3 and sm["lag_us"] == {}
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == ["copy-0", "copy-1", "copy-2"]
    for k in range(3):
        files = sorted(p.name for p in (root / f"copy-{k}" / str(work).lstrip("/")).iterdir())
        assert files == [f"out-{i}.dat" for i in range(4)]
        assert not (root / f"copy-{k}" / "etc").exists()  # --only kept the loader's files out
    assert sm["skipped"]["outside --only"] > 0
    # a second run into the same root starts from the same state
    again = run_json(
        capsys, store, "replay", "mt", "--root", str(root), "--only", str(work), "--copies", "3", "--timing", "asap"
    )
    assert again["summary"]["bytes"] == sm["bytes"]


def test_extrapolate_from_stored_replays(captured, capsys, tmp_path):
    base, store, work = captured
    import tracehouse

    with tracehouse.open(store) as s:
        for t in [t.name for t in s.traces() if t.name != "mt"]:
            s.rm(t)
    for k in (1, 2, 3):
        assert (
            main(
                [
                    "--store",
                    str(store),
                    "replay",
                    "mt",
                    "--root",
                    str(tmp_path / f"r{k}"),
                    "--only",
                    str(work),
                    "--copies",
                    str(k),
                    "--json",
                ]
            )
            == 0
        )
    capsys.readouterr()
    out = run_json(capsys, store, "extrapolate", "mt", "--models", "usl")
    assert [r["concurrency"] for r in out["runs"]] == [1, 2, 3]
    assert out["predictions"][-1]["concurrency"] == 24  # 8x the highest


def test_removing_the_source_removes_its_replays(captured, tmp_path):
    base, store, work = captured
    import tracehouse

    with tracehouse.open(store) as s:
        s.create_trace("gone", "strace", event_types=s.event_types("mt").values())
        s.append("gone", "syscall", s.sql("SELECT * EXCLUDE (seq) FROM mt.syscall"))
        s.flush("gone")
        from tracehouse.replay.replay import replay

        r = replay(s, "gone", tmp_path / "root", only=[str(work)], timing="asap")
        assert r.trace in {t.name for t in s.traces()}
        s.rm("gone")
        assert r.trace not in {t.name for t in s.traces()}


STRACE_ESCAPES = """\
100 1700000000.000100 openat(AT_FDCWD, "../../outside/x", O_WRONLY|O_CREAT|O_TRUNC, 0644) = 3 <0.000010>
100 1700000000.000200 write(3, ""..., 10) = 10 <0.000005>
100 1700000000.000300 close(3) = 0 <0.000003>
100 1700000000.000400 openat(AT_FDCWD, "/data/link/y", O_WRONLY|O_CREAT|O_TRUNC, 0644) = 4 <0.000010>
100 1700000000.000500 write(4, ""..., 10) = 10 <0.000005>
100 1700000000.000600 close(4) = 0 <0.000003>
100 1700000000.000700 openat(AT_FDCWD, "/data/ok", O_WRONLY|O_CREAT|O_TRUNC, 0644) = 5 <0.000010>
100 1700000000.000800 write(5, ""..., 10) = 10 <0.000005>
100 1700000000.000900 close(5) = 0 <0.000003>
100 1700000000.001000 rename("/data/ok", "/data/link/stolen") = 0 <0.000010>
"""


def test_nothing_outside_the_root_is_touched(tmp_path, capsys):
    """`..` above the root is refused by the planner; a symlink planted in the root that points
    out is refused by the kernel (openat2 RESOLVE_BENEATH), for open and rename alike."""
    trace = tmp_path / "esc.strace"
    trace.write_text(STRACE_ESCAPES)
    store = tmp_path / "store"
    assert main(["--store", str(store), "import", "strace", str(trace), "--name", "esc"]) == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root" / "a" / "b"
    (root / "data").mkdir(parents=True)
    (root / "data" / "link").symlink_to(outside)
    before = snapshot(tmp_path, (tmp_path / "root", store))
    capsys.readouterr()
    sm = run_json(capsys, store, "replay", "esc", "--root", str(root), "--map", "/data=data", "--force")["summary"]
    assert sm["skipped"] == {"path escapes the root": 3}
    assert sm["refused_outside_root"] == 2  # the open through the link, the rename into it
    assert snapshot(tmp_path, (tmp_path / "root", store)) == before
    assert list(outside.iterdir()) == []
    assert (root / "data" / "ok").stat().st_size == 10  # the rename was refused: still there
    assert not (tmp_path / "root" / "outside").exists() and not (tmp_path / "outside" / "x").exists()


def test_roots_that_are_refused(tmp_path, capsys, captured):
    base, store, work = captured
    full = tmp_path / "full"
    full.mkdir()
    (full / "precious").write_text("data")
    for argv, says in (
        (["--root", str(full)], "not empty"),
        (["--root", "/"], "whole filesystem"),
        (["--root", str(tmp_path / "r"), "--map", "/x=../up"], "climbs above --root"),
        (["--root", str(tmp_path / "r"), "--map", "/x=/etc"], "relative to --root"),
        (["--root", str(tmp_path / "r"), "--timing", "fast"], "--timing"),
        (["--root", str(tmp_path / "r"), "--copies", "0"], "--copies"),
    ):
        capsys.readouterr()
        assert main(["--store", str(store), "replay", "mt", *argv]) == 2, argv
        assert says in capsys.readouterr().err, argv
    assert (full / "precious").read_text() == "data"
    assert main(["--store", str(store), "replay", "nope", "--root", str(tmp_path / "r2")]) == 2
    assert not (tmp_path / "r2").exists()
