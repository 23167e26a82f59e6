"""strace import: golden captures, live captures of small C programs, bad input.

Golden captures in tests/data/strace were made with strace 6.1 from the two programs
beside them (io_single.c, io_threads.c) writing into /tmp/th; their expected rows are
written out below from the programs' source and were checked line by line against the
captures. The live tests run the same programs under the strace installed here and
compare with what the program does and with strace's own `-C` summary (`strace -c`
counts). A brute-force reference (a regex per line, `reference()`) is the oracle for
timestamps, durations and threads.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from helpers.strace import DATA, STRACE, build_programs, check_io_threads, needs_strace
from tracehouse.cli import main
from tracehouse.errors import AlreadyExists, BadInput
from tracehouse.formats import registry
from tracehouse.formats.strace import importer as imp

# -- the oracle -----------------------------------------------------------------------

_REF = re.compile(r"^(?:(\d+) +)?(\d+\.\d+|\d\d:\d\d:\d\d\.\d+) (.*)$")


def _ns(stamp: str) -> int:
    if ":" in stamp:
        h, m, s = stamp.split(":")
        sec, frac = s.split(".")
        return ((int(h) * 60 + int(m)) * 60 + int(sec)) * 10**9 + int(frac.ljust(9, "0"))
    sec, frac = stamp.split(".")
    return int(sec) * 10**9 + int(frac.ljust(9, "0"))


def reference(path: Path, pid: int | None = None) -> dict[str, Counter]:
    """Per event type, a Counter of (tid, ts, name, dur) computed with one regex per line."""
    out = {"syscall": Counter(), "signal": Counter(), "exit": Counter()}
    pending: dict[int, tuple[int, str]] = {}
    for line in path.read_text().splitlines():
        if line.startswith("% time"):
            break  # the -C summary table
        m = _REF.match(line)
        if not m:
            continue
        tid = int(m.group(1)) if m.group(1) else pid
        ts, body = _ns(m.group(2)), m.group(3)
        dur_m = re.search(r" <(\d+\.\d+)>$", body)
        dur = _ns(dur_m.group(1)) if dur_m else None
        if body.startswith("<... "):
            name = body[5 : body.index(" resumed>")]
            start, _ = pending.pop(tid)
            out["syscall"][(tid, start, name, dur if dur is not None else ts - start)] += 1
        elif body.endswith(" <unfinished ...>"):
            pending[tid] = (ts, body[: body.index("(")])
        elif body.startswith("--- "):
            out["signal"][(tid, ts, body.split()[1], None)] += 1
        elif body.startswith("+++ "):
            if tid in pending:
                start, name = pending.pop(tid)
                out["syscall"][(tid, start, name, ts - start)] += 1
            out["exit"][(tid, ts, None, None)] += 1
        else:
            out["syscall"][(tid, ts, body[: body.index("(")], dur or 0)] += 1
    return out


def stored(store, trace: str) -> dict[str, Counter]:
    """The same view of what the store holds, producers resolved to tids."""
    tids = {p["id"]: p["attrs"].get("tid") for p in store.producers(trace)}
    out = {}
    for t in ("syscall", "signal", "exit"):
        cols = {"syscall": "name AS a, dur AS b", "signal": "signal AS a, NULL AS b", "exit": "NULL AS a, NULL AS b"}[t]
        rows = store.sql(f'SELECT producer, ts, {cols} FROM "{trace}".{t}').to_pylist()
        out[t] = Counter((tids[r["producer"]], r["ts"], *list(r.values())[2:]) for r in rows)
    return out


def strace_summary(path: Path) -> dict[str, tuple[int, int]]:
    """{syscall: (calls, errors)} from the -C summary table at the end of a capture."""
    out, inside = {}, False
    for line in path.read_text().splitlines():
        if line.startswith("% time"):
            inside = True
            continue
        if inside and not line.startswith("---"):
            parts = line.split()
            if parts[-1] == "total":
                break
            errors = int(parts[4]) if len(parts) == 6 else 0
            out[parts[-1]] = (int(parts[3]), errors)
    return out


def import_(store, path, name, **kw):
    return imp.import_file(store, path, name, **kw)


# -- schema and registry -----------------------------------------------------------------


def test_registered_as_builtin_and_entry_point():
    from importlib import metadata

    assert registry.importers()["strace"].module is imp
    eps = {ep.name: ep.value for ep in metadata.entry_points(group="tracehouse.importers")}
    assert eps.get("strace") == "tracehouse.formats.strace.importer"


@pytest.mark.parametrize("name", ["single.strace", "single-noy.strace", "threads.strace", "ff/threads.13368"])
def test_sniff_recognises_real_captures(name):
    assert imp.sniff((DATA / name).read_bytes()[:65536])


@pytest.mark.parametrize(
    "head",
    [
        b"ts,producer,type\n1,2,read\n",
        b'{"traceEvents": [{"ph": "X", "name": "read(3)", "ts": 1}]}',
        b'[{"name": "a", "ph": "B", "pid": 1, "tid": 1, "ts": 0},\n',
        b"PAR1\x00\x00",
        b"%EventDef PajeDefineContainerType 0\n",
        b"Attaching 1 probe...\n@hist[read]:\n",
        b"",
    ],
)
def test_sniff_refuses_other_formats(head):
    assert not imp.sniff(head)


def test_wrong_format_is_named(tmp_path):
    csv = tmp_path / "events.csv"
    csv.write_text("ts,producer,type\n1,2,read\n")
    with pytest.raises(BadInput, match="this looks like csv, not strace"):
        registry.importer("strace", csv)
    js = tmp_path / "trace.json"
    js.write_text('{"traceEvents": []}')
    with pytest.raises(BadInput, match=r"looks like \w+, not strace|does not look like strace"):
        registry.importer("strace", js)


# -- golden captures ---------------------------------------------------------------------

IO_COLS = "name, fd, path, path2, pos, size, ret, errno, flags"
IO_WHERE = "path LIKE '/tmp/th/%' OR path LIKE '/nonexistent/%'"

# io_single.c, call by call (see its comments); strace printed these exact results.
SINGLE_IO = [
    ("openat", None, "/tmp/th/data.bin", None, None, None, 3, None, "O_RDWR|O_CREAT|O_TRUNC"),
    *[("write", 3, "/tmp/th/data.bin", None, k * 4096, 4096, 4096, None, None) for k in range(8)],
    ("fdatasync", 3, "/tmp/th/data.bin", None, None, None, 0, None, None),
    ("lseek", 3, "/tmp/th/data.bin", None, 1000, None, 1000, None, "SEEK_SET"),
    ("read", 3, "/tmp/th/data.bin", None, 1000, 500, 500, None, None),
    ("pread64", 3, "/tmp/th/data.bin", None, 20000, 100, 100, None, None),
    ("pwrite64", 3, "/tmp/th/data.bin", None, 32768, 10, 10, None, None),
    ("dup", 3, "/tmp/th/data.bin", None, None, None, 4, None, None),
    ("write", 4, "/tmp/th/data.bin", None, 1500, 24, 24, None, None),
    ("close", 4, "/tmp/th/data.bin", None, None, None, 0, None, None),
    ("fsync", 3, "/tmp/th/data.bin", None, None, None, 0, None, None),
    ("close", 3, "/tmp/th/data.bin", None, None, None, 0, None, None),
    ("openat", None, "/nonexistent/tracehouse", None, None, None, -1, "ENOENT", "O_RDONLY"),
    ("rename", None, "/tmp/th/data.bin", "/tmp/th/data.old", None, None, 0, None, None),
    ("unlink", None, "/tmp/th/data.old", None, None, None, 0, None, None),
]


def io_rows(store, trace, directory="/tmp/th"):
    """The rows of the program's own files, with `directory` written as /tmp/th."""
    where = IO_WHERE.replace("/tmp/th", directory)
    t = store.sql(f'SELECT {IO_COLS} FROM "{trace}".syscall WHERE {where} ORDER BY ts, seq')
    return [
        tuple(v.replace(directory, "/tmp/th") if isinstance(v, str) else v for v in r.values()) for r in t.to_pylist()
    ]


@pytest.mark.parametrize("capture", ["single.strace", "single-noy.strace"])
def test_golden_single_threaded_capture(store, capture):
    """With -y (paths printed) and without (paths from the rebuilt fd table): the same rows."""
    r = import_(store, DATA / capture, "single")
    assert r.rejected == 0 and r.events == r.lines == 53
    assert r.by_type == {"syscall": 52, "exit": 1}
    assert io_rows(store, "single") == SINGLE_IO
    assert stored(store, "single") == reference(DATA / capture)
    prods = store.producers("single")
    assert [(p["kind"], p["name"], p["parent"]) for p in prods] == [
        ("process", "io_single", None),
        ("thread", f"io_single/{prods[1]['attrs']['tid']}", prods[0]["id"]),
    ]


def test_golden_capture_durations_and_time_of_day(store):
    """-tt stamps are ns since midnight; -T durations are kept to the microsecond strace printed."""
    import_(store, DATA / "single-noy.strace", "noy")
    row = store.sql("SELECT ts, dur FROM noy.syscall WHERE name = 'fdatasync'").to_pylist()[0]
    assert row == {"ts": _ns("17:02:32.496464"), "dur": 12_689_000}


def test_golden_multithreaded_capture(store):
    r = import_(store, DATA / "threads.strace", "threads")
    assert r.rejected == 0 and r.orphans == 0 and r.unfinished == 0
    assert r.lines == 530
    ref = reference(DATA / "threads.strace")
    assert stored(store, "threads") == ref
    assert r.by_type == {"syscall": sum(ref["syscall"].values()), "exit": 5}
    check_io_threads(store, "threads", "/tmp/th")
    # Events arrive sorted by start time (pairs completed out of order included).
    ts = store.sql("SELECT ts FROM threads.syscall").column("ts").to_pylist()
    assert ts == sorted(ts)


def test_per_thread_files_merge_by_timestamp(store):
    """`strace -ff -o PREFIX`: give PREFIX; the files merge as strace-log-merge would."""
    r = import_(store, DATA / "ff" / "threads", "ff")
    assert len(r.files) == 5 and r.rejected == 0
    ref = {"syscall": Counter(), "signal": Counter(), "exit": Counter()}
    for f in sorted((DATA / "ff").iterdir()):
        for k, v in reference(f, pid=int(f.suffix[1:])).items():
            ref[k] += v
    assert stored(store, "ff") == ref
    check_io_threads(store, "ff", "/tmp/th")
    ts = store.sql("SELECT ts FROM ff.syscall").column("ts").to_pylist()
    assert ts == sorted(ts)


def test_one_per_thread_file_alone_takes_its_pid_from_the_name(store):
    r = import_(store, DATA / "ff" / "threads.13369", "one")
    assert r.rejected == 0
    assert [p["attrs"].get("tid") for p in store.producers("one") if p["kind"] == "thread"] == [13369]


# -- live captures -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return build_programs(tmp_path_factory.mktemp("bin"))


def capture(programs, tmp_path, prog, *flags):
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    log = tmp_path / f"{prog}.strace"
    subprocess.run(
        [STRACE, "-f", "-C", "-w", *flags, "-o", str(log), str(programs / prog), str(work)], check=True, cwd=work
    )
    return log, work


def assert_counts_match_strace_c(store, trace, log):
    """Completed calls and errors per syscall equal strace's own -C summary of the same run."""
    summary = strace_summary(log)
    t = store.sql(f"""SELECT name, count(*) FILTER (ret IS NOT NULL) AS calls, count(errno) AS errors
                      FROM "{trace}".syscall GROUP BY name""").to_pylist()
    ours = {r["name"]: (r["calls"], r["errors"]) for r in t if r["calls"]}
    assert ours == summary


@needs_strace
@pytest.mark.parametrize("flags", [("-ttt", "-T", "-y", "-s0"), ("--timestamps=unix,ns", "--syscall-times=ns", "-s0")])
def test_capture_single_threaded_program(store, programs, tmp_path, flags):
    log, work = capture(programs, tmp_path, "io_single", *flags)
    r = import_(store, log, "live")
    assert r.rejected == 0 and r.notes > 5  # the -C table is skipped, not rejected
    assert_counts_match_strace_c(store, "live", log)
    assert stored(store, "live") == reference(log)
    assert io_rows(store, "live", str(work)) == SINGLE_IO


@needs_strace
def test_capture_multithreaded_program(store, programs, tmp_path):
    log, work = capture(programs, tmp_path, "io_threads", "-ttt", "-T", "-y", "-s0")
    r = import_(store, log, "mt")
    assert r.rejected == 0
    assert_counts_match_strace_c(store, "mt", log)
    assert stored(store, "mt") == reference(log)
    check_io_threads(store, "mt", str(work))


@needs_strace
def test_capture_multithreaded_without_dash_y(store, programs, tmp_path):
    """Paths and positions come from the fd table the parser rebuilds (threads share it)."""
    log, work = capture(programs, tmp_path, "io_threads", "-ttt", "-T", "-s0")
    r = import_(store, log, "mt")
    assert r.rejected == 0
    assert_counts_match_strace_c(store, "mt", log)
    check_io_threads(store, "mt", str(work))


# -- bad input ---------------------------------------------------------------------------


def corrupt(tmp_path) -> Path:
    lines = (DATA / "single.strace").read_text().splitlines()
    lines.insert(10, "this is not strace")
    lines.insert(20, lines[20][:30])  # a truncated line
    lines.insert(30, '12929 notatime write(1, "", 1) = 1')
    p = tmp_path / "bad.strace"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_default_mode_imports_the_valid_lines_and_reports_the_rest(store, tmp_path):
    r = import_(store, corrupt(tmp_path), "bad")
    assert r.rejected == 3
    assert [x.line for x in r.first_rejected] == [11, 21, 31]
    assert "not a syscall" in r.first_rejected[0].reason
    assert r.events == 53
    assert store.trace("bad").event_count == 53


def test_strict_mode_stops_at_the_first_bad_line_and_registers_nothing(store, tmp_path):
    path = corrupt(tmp_path)
    with pytest.raises(BadInput) as e:
        import_(store, path, "bad", strict=True)
    assert e.value.file == str(path) and e.value.line == 11
    assert f"{path}:11" in str(e.value)
    assert store.traces() == []


def test_no_timestamps_is_explained(store, tmp_path):
    p = tmp_path / "plain.strace"
    p.write_text('openat(AT_FDCWD, "/x", O_RDONLY) = 3\nread(3, "", 10) = 0\n')
    with pytest.raises(BadInput, match=r"no strace events.*-ttt"):
        import_(store, p, "plain")
    assert store.traces() == []


def test_missing_ff_prefix(store, tmp_path):
    with pytest.raises(BadInput, match="no such file"):
        import_(store, tmp_path / "nothing", "x")


# -- CLI ---------------------------------------------------------------------------------


def test_cli_import_reports_rejected_lines(tmp_path, capsys):
    store = tmp_path / "s"
    assert main(["--store", str(store), "import", "strace", str(corrupt(tmp_path)), "--name", "c", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["events"] == 53 and out["rejected"] == 3
    assert [r["line"] for r in out["first_rejected"]] == [11, 21, 31]
    assert main(["--store", str(store), "import", "strace", str(corrupt(tmp_path)), "--name", "d", "--strict"]) == 2
    err = capsys.readouterr().err
    assert "bad.strace:11" in err
    assert main(["--store", str(store), "import", "strace", str(DATA / "ff" / "threads"), "--name", "ff"]) == 0
    assert "imported 315 events" in capsys.readouterr().out


def test_cli_import_names_the_wrong_format(tmp_path, capsys):
    csv = tmp_path / "e.csv"
    csv.write_text("ts,producer\n1,2\n")
    assert main(["--store", str(tmp_path / "s"), "import", "strace", str(csv)]) == 2
    assert "this looks like csv, not strace" in capsys.readouterr().err


def test_cli_import_starts_the_parse_before_it_opens_the_store(tmp_path, capsys, monkeypatch):
    # Opening a new store (catalog, disk-full reserve) came before the parse began.
    from tracehouse import _core
    from tracehouse.cli import importing

    started, seen = [], []
    real_parse, real_open = _core.StraceFileParse, importing.open_store
    monkeypatch.setattr(_core, "StraceFileParse", lambda *a, **k: started.append(a[0]) or real_parse(*a, **k))
    monkeypatch.setattr(importing, "open_store", lambda *a, **k: seen.append(list(started)) or real_open(*a, **k))
    path = DATA / "threads.strace"
    assert main(["--store", str(tmp_path / "s"), "import", "strace", str(path), "--name", "t", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["events"] > 0
    assert seen == [[str(path)]] and started == [str(path)]  # one parse, running when the store opened
    # An import that fails (the name is taken): the error as before, the parse started is stopped.
    assert main(["--store", str(tmp_path / "s"), "import", "strace", str(path), "--name", "t"]) == 2
    assert "already exists" in capsys.readouterr().err


def test_the_command_starts_an_import_s_parse_before_loading_itself(tmp_path, capsys, monkeypatch):
    """`tracehouse [--store S] import strace FILE` starts FILE's parse first thing (cli.run's
    `_start_early`, through the importer's declared `start` hook) and the import takes that parse
    over; a command line of another shape, or an importer without the hook, starts nothing
    ahead, and a parse started for one file is never used for another."""
    from tracehouse import _core
    from tracehouse import cli as cli_pkg

    started = []
    real_parse = _core.StraceFileParse
    monkeypatch.setattr(_core, "StraceFileParse", lambda *a, **k: started.append(a[0]) or real_parse(*a, **k))
    monkeypatch.setattr(registry, "_EARLY", [])  # (whatever this test leaves there goes with it)
    path, store = DATA / "threads.strace", str(tmp_path / "s")
    for argv in (
        ["import", "--name", "x", "strace", str(path)],
        ["--version", "import", "strace", str(path)],
        ["import", "csv", str(path)],
        ["--store", store, "import", "strace"],
        ["query", "import strace x"],
        ["import", "nosuchformat", str(path)],
    ):
        cli_pkg._start_early(argv)
        assert started == [] and registry._EARLY == [], argv
    cli_pkg._start_early(["--store", store, "import", "strace", str(path), "--name", "t", "--json"])
    assert started == [str(path)] and len(registry._EARLY) == 1
    assert main(["--store", store, "import", "strace", str(path), "--name", "t", "--json"]) == 0
    assert started == [str(path)] and registry._EARLY == []  # taken over, not started twice
    import tracehouse

    every = 'SELECT * FROM "t".syscall ORDER BY ts, producer, seq'
    with tracehouse.open(tmp_path / "ref") as ref, tracehouse.open(store) as s:
        import_(ref, path, "t")
        assert s.sql(every).equals(ref.sql(every)) and s.sql(every).num_rows > 300
    capsys.readouterr()
    # Started ahead for one file, the import of another parses that other file.
    other = DATA / "single.strace"
    cli_pkg._start_early([f"--store={store}", "import", "strace", str(path)])
    assert main(["--store", store, "import", "strace", str(other), "--name", "u", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["events"] == 53 and started[-1] == str(other)
    registry._EARLY.pop()[2].close()


# -- the file parsed on its own thread ------------------------------------------


def _copies(capture: Path, n: int) -> bytes:
    """`n` copies of a real capture, each a second later with its pids moved by 100,000 per copy."""
    out = []
    for k in range(n):
        for line in capture.read_bytes().splitlines():
            pid, ts, body = line.split(b" ", 2)
            out.append(b"%d %.6f %s\n" % (int(pid) + 100_000 * k, float(ts) + k, body))
    return b"".join(out)


def _rows(batches) -> dict[str, list]:
    import pyarrow as pa

    out: dict[str, list] = {}
    for name, b in batches:
        out.setdefault(name, []).append(b)
    return {name: pa.Table.from_batches(bs).to_pylist() for name, bs in out.items()}


def test_file_parsed_on_its_own_thread_equals_a_parse_fed_in_small_chunks(tmp_path):
    """The importer's background parse takes the file in 4 MiB chunks (pairs of unfinished/resumed lines and
    lines are cut at their borders; each big chunk is split over two threads, which join pairs
    ahead): the same rows, producers and counts as the parser fed 64 KiB at a time."""
    from tracehouse import _core

    data = _copies(DATA / "threads.strace", 250)  # ~10 MB: two chunk borders
    assert len(data) > 2 * (4 << 20)
    # Syscall names first seen after batches were cut (on the builder thread, see background.rs, the
    # names reach the builder with the cut that first has them): one mid-file, one in the last batch.
    mid = data.index(b"\n", len(data) // 2) + 1
    last_ts = float(data[:-1].rsplit(b"\n", 1)[1].split(b" ")[1])
    data = (
        data[:mid]
        + data[mid : mid + 200].split(b" ", 2)[0]
        + b" %.6f frobnicate(1, 2) = 0 <0.000010>\n" % float(data[mid:].split(b" ", 2)[1])
        + data[mid:]
        + b"4242 %.6f syscall_0x1b6(7) = -1 ENOSYS "
        b"(Function not implemented) <0.000001>\n" % (last_ts + 1)
    )
    path = tmp_path / "many.strace"
    path.write_bytes(data)
    native = _core.StraceFileParse(str(path))
    got = []
    while (b := native.next()) is not None:
        got += b
    bg = native.parser()
    got += bg.late()

    ref = _core.StraceParser()
    want = []
    for start in range(0, len(data), 64 << 10):
        want += ref.feed(data[start : start + (64 << 10)])
    want += ref.feed(b"") + ref.finish() + ref.late()
    assert bg.stats == ref.stats
    assert bg.stats["lines"] == data.count(b"\n")
    assert bg.producers() == ref.producers()
    assert bg.rejects() == ref.rejects()
    rows = _rows(got)
    assert rows == _rows(want)
    names = [r["name"] for r in rows["syscall"]]
    assert names.count("frobnicate") == 1 and names[-1] == "syscall_0x1b6"


def _parse_threads() -> int:
    """Threads of this process named as the background parse's (`th-strace-parse`, and its batch
    builder `th-strace-build`)."""
    n = 0
    for comm in Path("/proc/self/task").glob("*/comm"):
        try:
            n += comm.read_text().strip() in ("th-strace-parse", "th-strace-build")
        except OSError:
            pass  # a thread that just ended
    return n


def test_a_failed_import_stops_its_parse_thread_at_once(store, tmp_path):
    """The background parse of a file whose import fails (the trace exists; a strict import's bad
    line) ends before import_file returns, not when the error's traceback is collected."""
    path = tmp_path / "many.strace"
    path.write_bytes(_copies(DATA / "threads.strace", 150))  # ~6 MB: the queue fills before the end
    import_(store, DATA / "single.strace", "taken")
    err = None
    try:
        imp.import_file(store, path, "taken")
    except AlreadyExists as e:
        err = e  # kept alive: its traceback holds import_file's frame
    assert err is not None and "taken" in str(err)
    assert _parse_threads() == 0
    bad = tmp_path / "bad.strace"
    bad.write_bytes(b"garbage\n" + path.read_bytes())
    try:
        imp.import_file(store, bad, "strict", strict=True)
    except BadInput as e:
        err = e
    assert err.line == 1
    assert _parse_threads() == 0
    assert [t.name for t in store.traces()] == ["taken"]
