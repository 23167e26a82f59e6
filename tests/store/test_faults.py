"""Faults: a full disk, corrupt Parquet pages, CSV lines longer than pyarrow's block.

The disk-full tests fill a real small tmpfs the test mounts (real ENOSPC from the kernel,
no mock): they need root and are skipped, saying why, where mounting is not permitted.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import tracehouse
from helpers import BATCH_TYPE, batch_table, child_env, wal_files, wal_frames
from helpers.paths import TESTS
from helpers.server import Server
from tracehouse import Column, DiskFull, EventType, TracehouseError
from tracehouse.cli import command as cli
from tracehouse.formats.csv import importer as csv_importer

FLOATS = EventType("ev", "instant", (Column("x", "float64", "", "random: incompressible"),))


def floats(start: int, n: int) -> pa.Table:
    return pa.table(
        {
            "ts": np.arange(start, start + n, dtype=np.int64),
            "producer": pa.array(np.zeros(n, np.int32)),
            "x": np.random.default_rng(start).random(n),
        }
    )


@pytest.fixture
def small_disk(tmp_path):
    """mount(size) -> a directory on a tmpfs of that size, unmounted after the test."""
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        if os.geteuid() != 0:
            pytest.skip("a real full disk needs a small tmpfs, and mounting one needs root")
        d = tmp_path / f"disk{len(mounted)}"
        d.mkdir()
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(d)], capture_output=True, text=True
        )
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (needed for a real full disk): {r.stderr.strip()}")
        mounted.append(d)
        return d

    yield mount
    for d in mounted:
        subprocess.run(["umount", "-l", str(d)], capture_output=True)


def fill(disk: Path) -> Path:
    """Take every free byte of `disk` with a file; returns it (unlink it to give the space back)."""
    path = disk / "filler"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for size in (1 << 20, 1 << 16, 1 << 12, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
    finally:
        os.close(fd)
    return path


def wait_for(what: str, check, timeout: float = 60.0):
    """Poll `check` until it returns something true (a bounded wait, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(0.05)


def run_cli(store: Path, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The real `tracehouse` command in its own process (a reader while another process writes)."""
    return subprocess.run(
        [sys.executable, "-m", "tracehouse.cli", "--store", str(store), *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(),
    )


def cli_json(capsys, store: Path, *argv: str) -> tuple[int, object]:
    code = cli.main(["--store", str(store), *argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else None


def count(store, trace: str = "t") -> int:
    return store.sql(f'SELECT count(*) AS n FROM "{trace}".ev').column("n")[0].as_py()


# -- the WAL on a full disk --------------------------------------------------------------------


@pytest.mark.parametrize("over_zeros", [False, True], ids=["appended", "over-zeros"])
def test_wal_append_that_hits_enospc_is_cut_back_so_later_acked_rows_survive_a_crash(
    small_disk, monkeypatch, over_zeros
):
    # Regression: a short write left a torn record in the middle of the WAL; the rows acknowledged
    # after it (once space was back) were cut off by the next recovery. over-zeros: the writer
    # writes zeros ahead of small records only with 1 GiB free, so that limit is lifted here: the
    # records use up the zeros on the full disk, then the one past them is refused and cut back.
    from tracehouse.store import wal as walmod

    if over_zeros:
        monkeypatch.setattr(walmod, "RESERVE_MIN_FREE", 0)
    disk = small_disk("4m")
    path = disk / "s"
    s = tracehouse.open(path, fsync="always", flush_interval_s=3600.0, flush_rows=10**9)
    s.create_trace("t", "crashfmt", event_types=[BATCH_TYPE])
    for b in range(5):
        s.append("t", "ev", batch_table(b), wait=True)
    (wal,) = wal_files(path)
    assert (wal.stat().st_size > wal_frames(wal)[-1][1]) == over_zeros, "zeros ahead or not, as asked"
    filler = fill(disk)
    end = wal_frames(wal)[-1][1]
    refused = 0
    for b in range(5, 5000):  # the WAL's last page (or its zeros) takes some records, then the disk is full
        try:
            s.append("t", "ev", batch_table(b), wait=True)
        except DiskFull as e:
            assert "nothing of them was kept" in str(e) and "No space left on device" in str(e)
            refused = b
            break
        end = wal_frames(wal)[-1][1]
    assert refused, "the disk never filled"
    assert (refused > 100) == over_zeros, f"refused at batch {refused}: the zeros (1 MiB) should take hundreds"
    assert wal_frames(wal)[-1][1] == end and not any(wal.read_bytes()[end:]), "the refused append left bytes in the WAL"
    filler.unlink()
    s.append("t", "ev", batch_table(1000), wait=True)  # acknowledged after the failure
    for w in s._writers.values():
        w.abandon()  # a crash: nothing checkpointed, everything lives in the WAL
    s.close()

    with tracehouse.open(path) as s2:
        assert [e for r in s2.recovery for e in r.torn] == [], s2.recovery
        got = s2.sql('SELECT DISTINCT batch FROM "t".ev ORDER BY batch').column(0).to_pylist()
        assert got == [*range(refused), 1000]


@pytest.mark.parametrize("fsync", ["batch", "always"])  # the WAL switches / rotates at a checkpoint
def test_checkpoint_on_a_full_disk_keeps_rows_readable_marks_the_trace_and_resumes_by_itself(small_disk, capsys, fsync):
    disk = small_disk("32m")
    path = disk / "s"
    s = tracehouse.open(path, fsync=fsync, flush_interval_s=3600.0, flush_rows=10**9, disk_full_retry_s=0.1)
    try:
        s.create_trace("t", "f", event_types=[FLOATS])
        s.append("t", "ev", floats(0, 400_000), wait=True)  # ~11 MB of WAL; its segment needs ~3 MB
        filler = fill(disk)
        with pytest.raises(DiskFull) as e:
            s.flush("t")  # refused at once, not after waiting for space
        assert "No space left on device" in str(e.value)
        assert str(e.value).count("refused") <= 1 and "failed earlier" not in str(e.value)
        assert count(s) == 400_000  # the writer still has them

        # Another process reads the store: it sees the rows that are only in the WAL, and the mark.
        r = run_cli(path, "query", 'SELECT (SELECT count(*) FROM "t".ev) AS n, state FROM th.traces', "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == [{"n": 400_000, "state": "incomplete"}]
        code, (t,) = cli_json(capsys, path, "ls")  # (read-only opens here read as another process does)
        assert t["state"] == "incomplete" and t["state_reason"].startswith("checkpoint waiting for disk space")
        assert t["event_count"] == 0
        assert cli.main(["--store", str(path), "info", "t"]) == 0
        assert "incomplete: checkpoint waiting for disk space" in capsys.readouterr().out

        filler.unlink()  # space is back: the waiting checkpoint registers by itself
        info = wait_for("the checkpoint registered", lambda: (i := s.trace("t")).state == "complete" and i)
        assert info.event_count == 400_000
        s.append("t", "ev", floats(400_000, 10), wait=True)
        s.flush("t")
        assert count(s) == 400_010
    finally:
        s.close()
    with tracehouse.open(path, readonly=True) as ro:
        assert ro.sql('SELECT count(*), count(DISTINCT ts) FROM "t".ev').to_pylist() == [
            {"count_star()": 400_010, "count(DISTINCT ts)": 400_010}
        ]
        assert ro.trace("t").event_count == 400_010


# -- imports and generate on a full disk -----------------------------------------------------------


def _assert_nothing_left(path: Path, capsys) -> None:
    code, traces = cli_json(capsys, path, "ls")
    assert code == 0 and traces == []
    assert [p.name for p in (path / "traces").iterdir()] == []  # no half-written segment files either


@pytest.mark.parametrize("fsync", ["off", "batch"])
def test_generate_that_fills_the_disk_is_rolled_back(small_disk, capsys, fsync):
    path = small_disk("6m") / "s"
    code, err = cli_json(capsys, path, "generate", "tod", "--name", "big", "--events", "3000000", "--fsync", fsync)
    assert code == 4, err
    assert err["kind"] == "DiskFull"
    assert "the import of trace 'big' was rolled back" in err["error"] and "No space left on device" in err["error"]
    _assert_nothing_left(path, capsys)
    code, r = cli_json(capsys, path, "generate", "tod", "--name", "small", "--events", "20000")
    assert code == 0 and r["events"] >= 20000  # the space it took was given back


def test_csv_import_that_fills_the_disk_is_rolled_back(small_disk, tmp_path, capsys):
    path = small_disk("6m") / "s"
    n = 600_000
    rng = np.random.default_rng(7)
    src = tmp_path / "big.csv"
    pacsv.write_csv(
        pa.table({"ts": np.arange(n), "producer": np.arange(n) % 7, "x": rng.random(n), "y": rng.random(n)}), src
    )
    code, err = cli_json(capsys, path, "import", "csv", str(src), "--name", "big")
    assert code == 4, err
    assert "the import of trace 'big' was rolled back" in err["error"]
    _assert_nothing_left(path, capsys)


def test_an_import_that_died_leaves_its_trace_marked_incomplete(tmp_path, capsys):
    path = tmp_path / "s"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tracehouse.cli",
            "--store",
            str(path),
            "generate",
            "tod",
            "--name",
            "cut",
            "--events",
            "50000000",
            "--json",
        ],
        env=child_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def some_segments():
            try:
                with tracehouse.open(path, readonly=True) as ro:
                    return any(t.event_count for t in ro.traces())
            except (TracehouseError, sqlite3.Error):  # the store is still being made
                return False

        wait_for("the import registered a checkpoint", some_segments)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    code, traces = cli_json(capsys, path, "ls")
    (t,) = traces
    assert t["name"] == "cut" and t["event_count"] > 0
    assert t["state"] == "incomplete" and t["state_reason"].startswith("import did not finish")
    assert cli.main(["--store", str(path), "ls"]) == 0
    assert "cut is incomplete: import did not finish" in " ".join(capsys.readouterr().err.split())
    code, _ = cli_json(capsys, path, "rm", "cut")  # what the note says to do
    assert code == 0


# -- the server on a full disk -----------------------------------------------------------------


def _lines(first: int, n: int) -> bytes:
    rng = np.random.default_rng(first)
    return "".join(
        f"m,host=h{i % 4} v={float(x)!r},k={i}i {1_000_000_000 + i}\n"
        for i, x in zip(range(first, first + n), rng.random(n))
    ).encode()


def test_server_answers_507_with_retry_after_while_the_disk_is_full_and_resumes(small_disk):
    disk = small_disk("24m")
    path = disk / "s"
    tracehouse.open(path).close()
    filler = disk / "filler"
    with open(filler, "wb") as f:  # leave ~5 MB: a dozen writes fill it
        f.write(b"\0" * (19 << 20))
    srv = Server(path, "--quiet")
    acked, per, first = 0, 5000, 0
    try:
        full = None
        for _ in range(200):
            status, headers, body = srv.request("POST", "/api/v2/write?bucket=t", _lines(first, per))
            if status == 204:
                acked += per
                first += per
                continue
            full = (status, headers, body)
            break
        assert full is not None, "the disk never filled"
        status, headers, body = full
        assert status == 507, body
        assert int({k.lower(): v for k, v in headers.items()}["retry-after"]) > 0
        doc = json.loads(body)
        assert doc["code"] == "insufficient storage" and "No space left on device" in doc["message"]
        assert "failed earlier" not in doc["message"]
        # While the disk is full every acknowledged row is there, to the server and to a CLI reader.
        assert srv.sql('SELECT count(*) FROM "t".m') == [[acked]]
        r = run_cli(path, "query", 'SELECT count(*) AS n, count(DISTINCT k) AS d FROM "t".m', "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == [{"n": acked, "d": acked}]

        filler.unlink()  # space is back: writes are taken again without a restart

        def accepted():
            status, _h, body = srv.request("POST", "/api/v2/write?bucket=t", _lines(first, per))
            assert status in (204, 507), body
            return status == 204

        wait_for("a write accepted again", accepted)
        acked += per
        assert srv.sql('SELECT count(*), count(DISTINCT k) FROM "t".m') == [[acked, acked]]
    finally:
        code = srv.stop()
    log = srv.log.read_text()
    assert code == 0 and "Traceback" not in log, log
    with tracehouse.open(path, readonly=True) as ro:
        assert ro.sql('SELECT count(*) AS n, count(DISTINCT k) AS d FROM "t".m').to_pylist() == [
            {"n": acked, "d": acked}
        ]
        assert ro.trace("t").state == "complete"


# -- errors and readers ----------------------------------------------------------------------


def test_a_failed_writer_names_its_first_error_once(store_path):
    # Regression: the flusher re-recorded the "failed earlier" error it got from the check, so
    # the next caller read "failed earlier: failed earlier: ...".
    s = tracehouse.open(store_path, flush_interval_s=0.02, flush_rows=2000)
    try:
        s.create_trace("t", "crashfmt", event_types=[BATCH_TYPE])
        seg_dir = store_path / "traces" / str(s.trace("t").id) / "segments"
        seg_dir.mkdir(parents=True)
        (seg_dir / "ev").write_text("a file where the type's segment directory goes")
        with pytest.raises(TracehouseError):
            for b in range(100_000):  # appends go on while the first checkpoint fails
                s.append("t", "ev", batch_table(b))
        time.sleep(0.3)  # the flusher runs into the failure a few times
        for f in (lambda: s.append("t", "ev", batch_table(0)), lambda: s.flush("t")):
            with pytest.raises(TracehouseError) as e:
                f()
            msg = str(e.value)
            assert msg.count("failed earlier") == 1, msg
            assert "File exists" in msg or "Not a directory" in msg, msg
    finally:
        try:
            s.close()
        except TracehouseError:
            pass


def test_readers_see_the_wal_of_a_dead_writer_without_taking_the_lock_or_changing_a_byte(store_path):
    code = f"""
import os, sys
sys.path.insert(0, {str(TESTS)!r})
import tracehouse
from helpers import BATCH_TYPE, batch_table
s = tracehouse.open({str(store_path)!r}, fsync="always", flush_interval_s=3600.0)
s.create_trace("t", "crashfmt", event_types=[BATCH_TYPE])
s.append("t", "ev", batch_table(1), wait=True)
s.flush("t")
for b in (2, 3):
    s.append("t", "ev", batch_table(b), wait=True)
os._exit(0)
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, env=child_env())
    (wal,) = wal_files(store_path)
    records_end = wal_frames(wal)[-1][1]  # (zeros the writer wrote ahead may follow)
    with open(wal, "r+b") as f:
        f.seek(records_end)
        f.write(b"\x30\x00\x00\x00torn")  # a record the writer never finished
    size = wal.stat().st_size
    before = {p: p.read_bytes() for p in store_path.rglob("*") if p.is_file() and "catalog" not in p.name}
    r = run_cli(store_path, "query", 'SELECT batch, count(*) AS n FROM "t".ev GROUP BY batch ORDER BY batch', "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [{"batch": b, "n": len(batch_table(b))} for b in (1, 2, 3)]
    with tracehouse.open(store_path, readonly=True) as ro:
        assert count(ro) == sum(len(batch_table(b)) for b in (1, 2, 3))
        fd = os.open(store_path / "writer.lock", os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free: the reader never took it
        finally:
            os.close(fd)
    after = {p: p.read_bytes() for p in store_path.rglob("*") if p.is_file() and "catalog" not in p.name}
    assert after == before  # the damaged record is left for the writer's recovery to report
    with tracehouse.open(store_path) as s:  # ... which still finds it: its 8-byte header and 0x30 bytes
        assert [e["bytes_cut"] for r in s.recovery for e in r.torn] == [8 + 0x30]
        assert size > records_end + 8 + 0x30  # (the zeros the writer wrote ahead are no record)
        assert count(s) == sum(len(batch_table(b)) for b in (1, 2, 3))


# -- Parquet with corrupt pages, CSV lines longer than a block ----------------------------------------


def test_parquet_with_corrupt_data_pages_is_exit_2_naming_file_and_row_group(tmp_path, capsys):
    n = 300_000
    good = tmp_path / "good.parquet"
    pq.write_table(
        pa.table({"ts": np.arange(n, dtype=np.int64), "x": np.random.default_rng(1).random(n)}),
        good,
        row_group_size=100_000,
        compression="zstd",
    )
    page = pq.ParquetFile(good).metadata.row_group(1).column(1).data_page_offset
    data = bytearray(good.read_bytes())
    data[page : page + 16] = bytes(b ^ 0x5A for b in data[page : page + 16])  # the first data page's header
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(bytes(data))
    store = tmp_path / "s"
    assert cli.main(["--store", str(store), "import", "parquet", str(bad), "--name", "p"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{bad}: row group 1 (rows 100,001-200,000 of 300,000) does not decode" in err
    assert "Traceback" not in err
    code, traces = cli_json(capsys, store, "ls")
    assert traces == []  # rolled back
    code, r = cli_json(capsys, store, "import", "parquet", str(good), "--name", "p")
    assert code == 0 and r["events"] == n


def _csv_with_a_long_line(path: Path, long_at: int, length: int, rows: int = 2000) -> None:
    with open(path, "w") as f:
        f.write("ts,producer,type,msg\n")
        for i in range(rows):
            f.write(f"{i},1,ev,{'x' * length if i == long_at else 'short'}\n")


@pytest.mark.parametrize("long_at", [0, 1500])
def test_csv_line_longer_than_the_block_is_imported(tmp_path, capsys, long_at):
    # Regression: pyarrow refused the whole file ("straddles two block boundaries") naming no line.
    src = tmp_path / "long.csv"
    length = 3 * csv_importer.BLOCK
    _csv_with_a_long_line(src, long_at, length)
    code, r = cli_json(capsys, tmp_path / "s", "import", "csv", str(src), "--name", "long")
    assert code == 0, r
    assert r["events"] == 2000 and r["rejected"] == 0
    with tracehouse.open(tmp_path / "s", readonly=True) as ro:
        got = ro.sql('SELECT ts, length(msg) AS n FROM "long".ev WHERE length(msg) > 5').to_pylist()
    assert got == [{"ts": long_at, "n": length}]


def test_csv_line_over_the_cap_is_refused_naming_its_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(csv_importer, "MAX_LINE", 2 * csv_importer.BLOCK)  # the cap itself is 256 MB
    src = tmp_path / "long.csv"
    _csv_with_a_long_line(src, 1500, 3 * csv_importer.BLOCK)
    code = cli.main(["--store", str(tmp_path / "s"), "import", "csv", str(src), "--name", "long"])
    assert code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{src}:1502: line of {3 * csv_importer.BLOCK + 10:,} bytes" in err, err
    code, traces = cli_json(capsys, tmp_path / "s", "ls")
    assert traces == []


def test_longest_line_finds_number_and_length(tmp_path):
    for content, want in [
        (b"", (1, 0)),
        (b"a", (1, 1)),
        (b"ab\nc", (1, 2)),
        (b"abc\nde\nfghij", (3, 5)),
        (b"a\n\nbbb\n", (3, 3)),
    ]:
        p = tmp_path / "f"
        p.write_bytes(content)
        assert csv_importer.longest_line(p) == want
        assert csv_importer.longest_line(p, chunk=2) == want  # lines across chunk boundaries


def test_a_reader_never_misses_rows_a_checkpoint_moved_between_its_snapshot_and_its_wal_listing(
    store_path, monkeypatch
):
    # CI saw another process's reader go back in time (1,200 rows, then 1,150): a checkpoint
    # registered after the reader's catalog snapshot and dropped the WAL file it covered before
    # the reader listed the WAL, so those rows were in neither half. Force exactly that order.
    from tracehouse.store import store as storemod
    from tracehouse.store import wal as walmod

    s = tracehouse.open(store_path, fsync="always", flush_interval_s=3600.0, flush_rows=10_000_000)
    s.create_trace("t", "crashfmt", event_types=[BATCH_TYPE])
    q = 'SELECT count(*) AS n, sum("batch") AS b FROM "t".ev'  # (not a bare count: that reads no rows)
    real = walmod.uncovered_files
    checkpoints = [0]

    def checkpoint_first(directory, covered, known=None):
        if checkpoints[0] == 0:
            checkpoints[0] += 1
            s.flush("t")  # registers a segment, advances the covered number, drops the WAL file
        return real(directory, covered, known)

    try:
        with tracehouse.open(store_path, readonly=True) as ro:
            want = 0
            for b in range(1, 4):
                s.append("t", "ev", batch_table(b), wait=True)
                want += batch_table(b).num_rows
            assert ro.sql(q).to_pylist()[0]["n"] == want
            s.append("t", "ev", batch_table(4), wait=True)
            want += batch_table(4).num_rows
            # (through the store module's name for wal: `lazy.module` holds its own copy of the attributes)
            monkeypatch.setattr(storemod.walmod, "uncovered_files", checkpoint_first)
            assert ro.sql(q).to_pylist()[0]["n"] == want
            assert checkpoints[0] == 1, "the checkpoint was meant to run inside the reader's look"
            assert not [f for f in wal_files(store_path) if f.stat().st_size > len(walmod.MAGIC)], (
                "the rows were meant to be in a segment only"
            )
    finally:
        s.close()


def test_a_reader_polling_a_live_wal_reads_only_its_new_records(store_path, monkeypatch):
    # A reader in another process re-read the whole uncovered WAL on every look; now each WAL
    # file is read from where the last look stopped. Answers must equal a fresh reader's,
    # also across a torn (half-written) record and a checkpoint that covers the files.
    from tracehouse.store import wal as walmod

    starts: list[int] = []  # where the long-lived reader's reads began (not the fresh readers')
    watching = [True]
    real = walmod.read_wal
    monkeypatch.setattr(
        walmod, "read_wal", lambda path, start=0: (watching[0] and starts.append(start), real(path, start))[1]
    )
    s = tracehouse.open(store_path, fsync="always", flush_interval_s=3600.0, flush_rows=10_000_000)
    s.create_trace("t", "crashfmt", event_types=[BATCH_TYPE])
    q = 'SELECT count(*) AS n, sum("batch") AS b FROM "t".ev'
    try:
        with tracehouse.open(store_path, readonly=True) as ro:
            want = 0
            for b in range(1, 6):
                s.append("t", "ev", batch_table(b), wait=True)
                want += batch_table(b).num_rows
                got = ro.sql(q).to_pylist()[0]
                watching[0] = False
                with tracehouse.open(store_path, readonly=True) as fresh:
                    assert got == fresh.sql(q).to_pylist()[0]
                watching[0] = True
                assert got["n"] == want
            assert starts[0] == 0 and all(x > 0 for x in starts[1:5]), starts  # one file, read on from its end
            # a torn record at the tail (the writer mid-append): ignored, and read again once whole
            (wal,) = wal_files(store_path)
            size = wal.stat().st_size
            with open(wal, "r+b") as f:  # where the writer's next record goes (zeros may follow)
                f.seek(wal_frames(wal)[-1][1])
                f.write(b"\x40\x00\x00\x00\x00\x00\x00\x00partial")
            assert ro.sql(q).to_pylist()[0]["n"] == want
            os.truncate(wal, size)
            s.append("t", "ev", batch_table(6), wait=True)
            want += batch_table(6).num_rows
            assert ro.sql(q).to_pylist()[0]["n"] == want
            s.flush("t")  # the checkpoint covers the WAL: the reader forgets what it read of it
            assert ro.sql(q).to_pylist()[0]["n"] == want
            s.append("t", "ev", batch_table(7), wait=True)
            want += batch_table(7).num_rows
            assert ro.sql(q).to_pylist()[0]["n"] == want
            info = ro.trace("t")
            assert set(ro._wal_files[(info.id, info.created)]) <= {int(p.stem) for p in wal_files(store_path)}
    finally:
        s.close()
