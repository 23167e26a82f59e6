"""Crash and damage: a store of every format, damaged file by file.

One template store holds a trace of every format (`tracehouse demo --no-serve`: TOD, strace,
Chrome, bpftrace, SystemTap, Paje, CSV), a line-protocol bucket written through the server's
ingest path, a trace whose writer died with acknowledged rows only in its WAL, and the derived
indexes of the TOD trace. Each case damages a copy the way a disk or a crash does (catalog
truncated / deleted / flipped / its WAL cut, a segment truncated / flipped / deleted, a WAL file
truncated / flipped, an index file flipped) and checks three things:

- nothing is deleted: commands that meet the damage refuse to write (exit 5, naming the catalog
  and the directories or files) and leave every file as it was;
- every damage is named: `tracehouse verify` exits 1 naming it, and so does the query that needs it;
- every intact row is readable: after `tracehouse repair`, every event type not in a damaged
  file answers exactly as before, and the damaged files are in quarantine/, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import tracehouse
from helpers import child_env, rows_of_batch
from helpers.cli import run
from helpers.paths import TESTS

LIVE_CHILD = """
import os, sys
sys.path.insert(0, {tests!r})
import tracehouse
from helpers import BATCH_TYPE, batch_table
from tracehouse.server.config import ServerConfig
from tracehouse.server.ingest import Ingestor
s = tracehouse.open({path!r}, fsync="always", flush_interval_s=3600.0)
s.create_trace("live", "crashfmt", event_types=[BATCH_TYPE])
s.append("live", "ev", batch_table(1), wait=True)
s.flush("live")
for b in (2, 3, 4):
    s.append("live", "ev", batch_table(b), wait=True)  # acknowledged: in the WAL only
ing = Ingestor(s, ServerConfig())
ing.write_lp("lp", b"cpu,host=a usage=1.5 1000\\ncpu,host=b usage=2.5 2000\\nmem,host=a used=10i 1500\\n")
s.flush("lp")
ing.write_lp("lp", b"cpu,host=a usage=3.5 3000\\ncpu,host=c usage=0.5 3500\\n")
os._exit(0)  # the writer dies: no checkpoint, no catalog checkpoint
"""

# The lock and the reserve; the catalog is compared by what it holds (an open may checkpoint
# SQLite's log into the file, which changes bytes, not rows).
KEEP_OUT = ("writer.lock", "disk-full.reserve", "catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm")


def cli_process(*argv: str, store: Path) -> subprocess.CompletedProcess:
    """The real `tracehouse` command in a process of its own (the template's writers)."""
    return subprocess.run(
        [sys.executable, "-m", "tracehouse.cli", "--store", str(store), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env=child_env(),
    )


_capsys = []


@pytest.fixture(autouse=True)
def _capture(capsys):
    _capsys.append(capsys)
    yield
    _capsys.pop()


def cli(*argv: str, store: Path) -> subprocess.CompletedProcess:
    """`tracehouse` through its real entry point, in this process (an uncaught exception - a
    traceback - fails the test by itself)."""
    code, out, err = run(_capsys[-1], store, *argv)
    return subprocess.CompletedProcess(argv, code, out, err)


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("damage") / "store"
    r = cli_process("demo", "--no-serve", "--events", "3000", store=root)
    assert r.returncode == 0, r.stderr
    r = cli_process("analyze", "index", "demo-tod", store=root)
    assert r.returncode == 0, r.stderr
    subprocess.run(
        [sys.executable, "-c", LIVE_CHILD.format(tests=str(TESTS), path=str(root))],
        check=True,
        timeout=120,
        env=child_env(),
    )
    wal = sorted(root.glob("traces/*/wal/*.wal"))
    assert wal and (root / "catalog.sqlite-wal").stat().st_size > 0, "the template must hold WAL rows"
    return root, answers(root)


def answers(root: Path) -> dict:
    """Every event type of every trace: (rows, digest of its rows in a fixed order), and producers."""
    out = {}
    with tracehouse.open(root, readonly=True) as s:
        for t in s.traces():
            for name in s.event_types(t.name):
                tb = s.sql(f'SELECT * FROM "{t.name}"."{name}" ORDER BY ALL')
                out[(t.name, name)] = (tb.num_rows, hashlib.sha1(str(tb.to_pylist()).encode()).hexdigest())
            out[(t.name, "producers")] = json.dumps(s.producers(t.name), sort_keys=True)
    return out


def files(root: Path) -> dict[str, str]:
    """Every file of the store (but its lock and reserve) by path: a digest of its bytes; the
    catalog by a digest of its rows (or of its bytes when SQLite cannot read it)."""
    out = {
        p.relative_to(root).as_posix(): hashlib.sha1(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and p.name not in KEEP_OUT
    }
    cat = root / "catalog.sqlite"
    if cat.exists():
        try:
            con = sqlite3.connect(f"file:{cat}?mode=ro", uri=True)
            try:
                out["catalog.sqlite"] = hashlib.sha1("\n".join(con.iterdump()).encode()).hexdigest()
            finally:
                con.close()
        except sqlite3.DatabaseError:
            out["catalog.sqlite"] = hashlib.sha1(cat.read_bytes()).hexdigest()
    return out


@pytest.fixture
def store(template, tmp_path) -> Path:
    root = tmp_path / "store"
    shutil.copytree(template[0], root)
    return root


def trace_dir(root: Path, name: str) -> Path:
    for j in root.glob("traces/*/journal"):
        if json.loads(j.read_text().splitlines()[0].split(" ", 1)[1])["name"] == name:
            return j.parent
    raise AssertionError(f"no journal names {name}")


def a_segment(root: Path, trace: str, event_type: str) -> Path:
    segs = sorted((trace_dir(root, trace) / "segments" / event_type).glob("*.parquet"))
    assert segs, (trace, event_type)
    return segs[0]


def flip(path: Path, offset: int, n: int = 2) -> None:
    data = bytearray(path.read_bytes())
    for i in range(n):
        data[offset + i] ^= 0x5A
    path.write_bytes(bytes(data))


def refused_write(root: Path, *must_name: str) -> None:
    """A write meets the damage: exit 5 naming the catalog and `must_name`, no file changed."""
    before = files(root)
    r = cli("generate", "tod", "--name", "x", "--events", "100", "--json", store=root)
    assert r.returncode == 5, (r.returncode, r.stdout, r.stderr)
    msg = json.loads(r.stdout)["error"]
    assert "catalog" in msg and "tracehouse repair" in msg, msg
    for what in must_name:
        assert what in msg, (what, msg)
    assert "Traceback" not in r.stderr
    assert files(root) == before, "a refused write changed the store's files"


def verified(root: Path, *must_name: str) -> dict:
    """`tracehouse verify` exits 1 and names each of `must_name`."""
    r = cli("verify", "--json", store=root)
    assert r.returncode == 1, (r.returncode, r.stdout[-2000:], r.stderr)
    report = json.loads(r.stdout)
    assert not report["ok"]
    text = json.dumps(report)
    for what in must_name:
        assert what in text, (what, text[:3000])
    return report


def repaired(
    root: Path,
    before: dict,
    damaged: set[tuple[str, str]] = frozenset(),
    *,
    changed: set[tuple[str, str]] = frozenset(),
) -> dict:
    """`tracehouse repair`, then: every (trace, type) not in `damaged` or `changed` answers as in the
    template, `damaged` ones hold fewer rows, and `tracehouse verify` passes."""
    r = cli("repair", "--json", store=root)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr)
    report = json.loads(r.stdout)
    after = answers(root)
    for key, want in before.items():
        if key in damaged:
            assert after.get(key, (0,))[0] < want[0], (key, after.get(key), want)
        elif key not in changed:
            assert after.get(key) == want, (key, after.get(key), want)
    r = cli("verify", "--json", store=root)
    assert r.returncode == 0, r.stdout[-3000:]
    return report


def quarantined(root: Path, rel: str, digest: str) -> None:
    """`rel` is in quarantine/, byte for byte as it was."""
    hits = [p for p in (root / "quarantine").glob(f"*/{rel}")]
    assert hits, f"{rel} not in quarantine/: {[p.relative_to(root) for p in (root / 'quarantine').rglob('*')]}"
    assert any(hashlib.sha1(p.read_bytes()).hexdigest() == digest for p in hits)


# -- the catalog -------------------------------------------------------------------------------


def test_catalog_deleted(template, store):
    _, before = template
    for f in store.glob("catalog.sqlite*"):
        f.unlink()
    r = cli("ls", "--json", store=store)
    assert r.returncode == 5 and "no catalog" in json.loads(r.stdout)["error"]
    refused_write(store, "traces/1")
    verified(store, "catalog.sqlite", "missing")
    repaired(store, before)


def test_catalog_truncated(template, store):
    _, before = template
    cat = store / "catalog.sqlite"
    os.truncate(cat, cat.stat().st_size // 3)
    (store / "catalog.sqlite-wal").unlink()
    r = cli("ls", "--json", store=store)
    assert r.returncode == 5, (r.stdout, r.stderr)
    msg = json.loads(r.stdout)["error"]
    assert str(cat) in msg and "tracehouse repair" in msg and "Traceback" not in r.stderr, msg
    refused_write(store, str(cat))
    verified(store, "catalog.sqlite", "damaged")
    repaired(store, before)
    assert list(store.glob("quarantine/*/catalog.sqlite"))  # the damaged catalog is kept


def test_catalog_bytes_flipped(template, store):
    _, before = template
    cat = store / "catalog.sqlite"
    (store / "catalog.sqlite-wal").unlink()
    for page in range(1, cat.stat().st_size // 4096):  # every b-tree page's type byte
        flip(cat, page * 4096, 1)
    r = cli("query", "SELECT count(*) FROM th.traces", "--json", store=store)
    assert r.returncode == 5 and str(cat) in json.loads(r.stdout)["error"], (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    refused_write(store, str(cat))
    verified(store, "catalog.sqlite")
    repaired(store, before)


def test_catalog_wal_truncated_loses_recent_traces_but_no_write_deletes_them(template, store):
    """The issue's first case: the catalog's own WAL cut, the traces it registered vanish from the
    catalog; the next writer must not take their ids or delete their directories."""
    _, before = template
    os.truncate(store / "catalog.sqlite-wal", 0)
    live, lp = trace_dir(store, "live"), trace_dir(store, "lp")
    r = cli("ls", "--json", store=store)
    assert r.returncode == 0
    assert {t["name"] for t in json.loads(r.stdout)} == {n for n, _ in before if n.startswith("demo-")}
    assert f"traces/{live.name}" in r.stderr and "repair" in r.stderr  # ls says what it cannot list
    refused_write(store, f"traces/{live.name}", f"traces/{lp.name}")
    verified(store, f"traces/{live.name}")
    repaired(store, before)  # every acknowledged row of both is back, WAL rows included


# -- segments ----------------------------------------------------------------------------------


def test_segment_truncated(template, store):
    _, before = template
    seg = a_segment(store, "demo-strace", "syscall")
    rel, digest = seg.relative_to(store).as_posix(), hashlib.sha1(seg.read_bytes()).hexdigest()
    os.truncate(seg, seg.stat().st_size // 2)
    digest = hashlib.sha1(seg.read_bytes()).hexdigest()
    r = cli("query", 'SELECT count(*) FROM "demo-strace".syscall', "--json", store=store)
    assert r.returncode != 0 and rel in json.loads(r.stdout)["error"], (r.stdout, r.stderr)
    r = cli("query", 'SELECT count(*) AS n FROM "demo-strace".events', "--json", store=store)
    assert r.returncode != 0 and rel in json.loads(r.stdout)["error"]  # not the catalog's count
    others = [k for k in before if k[0] == "demo-strace" and k[1] not in ("syscall", "producers")]
    with tracehouse.open(store, readonly=True) as s:  # the trace's other types stay readable
        for _, name in others:
            assert (
                s.sql(f'SELECT count(*) AS n FROM "demo-strace"."{name}"').column(0)[0].as_py()
                == before[("demo-strace", name)][0]
            )
    r = cli("info", "demo-strace", "--json", store=store)
    assert any(rel in d for et in json.loads(r.stdout)["event_types"] for d in et["damaged"])
    refused_write(store, rel)
    verified(store, rel)
    repaired(store, before, {("demo-strace", "syscall")})
    quarantined(store, rel, digest)
    with tracehouse.open(store, readonly=True) as s:
        assert "damaged segment" in s.trace("demo-strace").state_reason


def test_segment_bytes_flipped_in_a_page(template, store):
    _, before = template
    seg = a_segment(store, "demo-tod", "field_write")
    rel = seg.relative_to(store).as_posix()
    import pyarrow.parquet as pq

    col = pq.read_metadata(seg).row_group(0).column(0)  # ts: a data page, not its header
    flip(seg, col.data_page_offset + col.total_compressed_size - 8)
    digest = hashlib.sha1(seg.read_bytes()).hexdigest()
    report = verified(store, rel, "page checksum mismatch")
    assert [t["status"] for t in report["traces"] if t["name"] == "demo-tod"] == ["damaged"]
    r = cli("export", "demo-tod", "--out", str(store.parent / "out"), "--json", store=store)
    assert r.returncode != 0 and rel in json.loads(r.stdout)["error"]  # export never copies it
    with tracehouse.open(store) as s:  # nor does compaction merge a damaged segment
        s.flush("live")  # (its WAL's rows: a second segment to merge the first with)
        segs = s.segments_of("live")
        assert len(segs) == 2
        live_seg = store / segs[0].path
        col = pq.read_metadata(live_seg).row_group(0).column(0)
        flip(live_seg, col.data_page_offset + col.total_compressed_size - 8)
        s.compact("live")
        assert [x.path for x in s.segments_of("live")] == [x.path for x in segs]
        assert "page checksum mismatch" in s.segments_of("live")[0].damaged
        r = cli("query", 'SELECT count(*) FROM "live".ev', "--json", store=store)  # and queries name it
        assert r.returncode != 0 and segs[0].path in json.loads(r.stdout)["error"]
    repaired(store, before, {("demo-tod", "field_write"), ("live", "ev")})
    quarantined(store, rel, digest)


def test_segment_deleted(template, store):
    _, before = template
    seg = a_segment(
        store, "demo-chrome", sorted(p.name for p in (trace_dir(store, "demo-chrome") / "segments").iterdir())[0]
    )
    rel, etype = seg.relative_to(store).as_posix(), seg.parent.name
    seg.unlink()
    r = cli("query", f'SELECT * FROM "demo-chrome"."{etype}"', "--json", store=store)
    assert r.returncode != 0 and rel in json.loads(r.stdout)["error"]
    refused_write(store, rel)
    verified(store, rel, "missing")
    repaired(store, before, {("demo-chrome", etype)})


# -- the WAL -----------------------------------------------------------------------------------


def _live_wal(root: Path) -> Path:
    wal = sorted((trace_dir(root, "live") / "wal").glob("*.wal"))
    assert wal
    return wal[-1]


def _frames(wal: Path) -> list[tuple[int, int]]:
    from helpers import wal_frames

    return wal_frames(wal)


@pytest.mark.parametrize("how", ["truncated", "flipped"])
def test_wal_damaged(template, store, how):
    _, before = template
    wal = _live_wal(store)
    rel = wal.relative_to(store).as_posix()
    frames = _frames(wal)
    assert len(frames) == 3  # batches 2, 3, 4
    if how == "truncated":
        os.truncate(wal, frames[2][0] + 20)  # into the last record
    else:
        flip(wal, (frames[1][0] + frames[1][1]) // 2)  # inside the middle record
    r = cli("ls", "--json", store=store)  # said before any writer recovered it
    live = next(t for t in json.loads(r.stdout) if t["name"] == "live")
    assert live["state"] == "incomplete" and "WAL damaged: 1 record(s)" in live["state_reason"], live
    verified(store, rel)
    with tracehouse.open(store) as s:  # recovery: reported, marked, the intact records kept
        (rep,) = [x for x in s.recovery if x.trace == "live"]
        assert [t["rows_cut"] for t in rep.torn] == [None if how == "truncated" else rows_of_batch(3)]
        assert s.trace("live").state_reason.startswith("WAL damaged: 1 record(s)")
        assert s.sql("SELECT state FROM th.traces WHERE name = 'live'").column(0)[0].as_py() == "incomplete"
        batches = set(s.sql('SELECT DISTINCT batch FROM "live".ev').column(0).to_pylist())
        assert batches == ({1, 2, 3} if how == "truncated" else {1, 2, 4})
    quarantined(
        store,
        rel,
        hashlib.sha1(wal.read_bytes()).hexdigest()
        if wal.exists()
        else hashlib.sha1(next((store / "quarantine").glob(f"*/{rel}")).read_bytes()).hexdigest(),
    )
    after = answers(store)
    for key, want in before.items():
        if key[0] != "live":
            assert after[key] == want, key


# -- an index --------------------------------------------------------------------------------


def test_index_file_damaged(template, store):
    _, before = template
    idx = sorted((store / "results").glob("*.arrow"))
    assert idx
    victim = idx[0]
    rel = victim.relative_to(store).as_posix()
    with tracehouse.open(store, readonly=True) as s:
        results = len(s.results())
    flip(victim, victim.stat().st_size // 2)
    digest = hashlib.sha1(victim.read_bytes()).hexdigest()
    verified(store, rel, "saved with")
    report = repaired(store, before)
    assert report["results"] == results - 1
    quarantined(store, rel, digest)
    r = cli("analyze", "index", "demo-tod", store=store)  # built again on use
    assert r.returncode == 0, r.stderr
