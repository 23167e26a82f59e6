"""The last row of every series kept on write (store/lastrows.py): `"<trace>".<type>_last` equals
`QUALIFY row_number() OVER (PARTITION BY producer ORDER BY ts DESC, seq DESC) = 1` over every row,
under out-of-order writes (a later write of an older time never replaces the last), ties (the
later write wins), unflushed rows, retention, a restart and a SIGKILL anywhere (in the middle of a
checkpoint: the new file written, the segments not registered)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import tracehouse
from tracehouse.schema import Column, EventType
from tracehouse.store import lastrows

HOSTS = 25
WANT = "SELECT * FROM b.cpu QUALIFY row_number() OVER (PARTITION BY producer ORDER BY ts DESC, seq DESC) = 1"


def create(path: Path, **kw):
    s = tracehouse.open(path, **kw)
    et = EventType("cpu", "instant", (Column("usage", "float64", "", ""), Column("n", "int64", "", "")), "")
    prods = [
        {"id": i, "parent": None, "kind": "tags", "name": f"h{i}", "attrs": {"host": f"h{i}"}}
        for i in range(1, HOSTS + 1)
    ]
    s.create_trace(
        "b", "lineproto", event_types=[et], producers=prods, metadata={"last_rows": "series"}, own_types=True
    )
    return s


def batch(k: int, n: int = 400) -> pa.Table:
    """Batch `k`: times drawn over one range for every k (later batches reach back before the
    earlier ones' last rows), a few rows sharing one time per host (ties), some nulls."""
    rng = np.random.default_rng(k)
    ts = rng.integers(0, 50_000, n)
    ts[:HOSTS] = 49_999  # ties at the top: the later written wins
    usage = rng.random(n)
    return pa.table(
        {
            "ts": pa.array(ts, pa.int64()),
            "producer": pa.array(rng.integers(1, HOSTS + 1, n).astype(np.int32)),
            "usage": pa.array(usage, mask=usage < 0.1),
            "n": pa.array(rng.integers(0, 100, n), pa.int64()),
        }
    )


def check(s) -> pa.Table:
    got = s.sql("SELECT * FROM b.cpu_last ORDER BY producer")
    want = s.sql(WANT + " ORDER BY producer")
    assert got.num_rows == HOSTS
    assert got.equals(want)
    return got


def test_issue32_last_rows_follow_every_write(tmp_path):
    s = create(tmp_path / "s")
    for k in range(6):
        s.append("b", "cpu", batch(k))
        check(s)  # the unflushed rows with the kept file
        if k % 2:
            s.flush()
            assert s.last_row_types("b") == {"cpu"}
            check(s)
    # An old point written last does not replace the last row of its series.
    before = check(s).to_pylist()
    s.append("b", "cpu", pa.table({"ts": pa.array([1], pa.int64()), "producer": pa.array([3], pa.int32())}))
    s.flush()
    assert check(s).to_pylist() == before
    files = os.listdir(tmp_path / "s" / "traces" / "1" / "last")
    rows = s.sql("SELECT count(*) FROM b.cpu").column(0)[0].as_py()
    assert f"cpu.{rows}.parquet" in files and len(files) == 2  # this one and the one before
    # The plan reads the kept rows, not the segments.
    view = s.sql("SELECT sql FROM duckdb_views() WHERE schema_name = 'b' AND view_name = 'cpu_last'")
    text = view.column(0)[0].as_py()
    assert f"cpu.{rows}.parquet" in text and "segments" not in text
    s.close()
    with tracehouse.open(tmp_path / "s", readonly=True) as r:  # another process's view of it
        check(r)
        assert r.last_row_types("b") == {"cpu"}


def test_issue32_last_rows_without_a_file_come_from_every_row_and_are_kept_again(tmp_path):
    s = create(tmp_path / "s")
    for k in range(3):
        s.append("b", "cpu", batch(k))
        s.flush()
    s.close()
    for f in (tmp_path / "s" / "traces" / "1" / "last").iterdir():  # an older store: none kept
        f.unlink()
    s = tracehouse.open(tmp_path / "s")
    check(s)
    assert s.last_row_types("b") == set()  # (the view reads every row)
    s.append("b", "cpu", batch(7))
    s.flush()  # the checkpoint takes them from the segments
    assert s.last_row_types("b") == {"cpu"}
    check(s)
    s.close()


def test_issue32_retention_drops_the_kept_rows_with_the_segments(tmp_path):
    import time

    s = create(tmp_path / "s")
    now = time.time_ns()
    old = batch(1)
    old = old.set_column(0, "ts", pa.array(np.arange(old.num_rows) + now - 10 * 86400 * 10**9, pa.int64()))
    s.append("b", "cpu", old)
    s.flush()
    new = batch(2)
    new = new.set_column(0, "ts", pa.array(np.arange(new.num_rows) + now, pa.int64()))
    new = new.filter(pa.compute.less(new.column("producer"), 10))
    s.append("b", "cpu", new)
    s.flush()
    assert s.set_retention("b", 86400 * 10**9) == 1
    got = s.sql("SELECT * FROM b.cpu_last ORDER BY producer")
    assert got.equals(s.sql(WANT + " ORDER BY producer"))
    assert got.num_rows == 9  # the series with only old rows are gone with them
    s.append("b", "cpu", new.slice(0, 5).set_column(0, "ts", pa.array(np.arange(5) + now + 10**6, pa.int64())))
    s.flush()
    assert s.last_row_types("b") == {"cpu"}
    assert s.sql("SELECT * FROM b.cpu_last ORDER BY producer").equals(s.sql(WANT + " ORDER BY producer"))
    s.close()


CHILD = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, {tests!r})
    import tracehouse
    from tracehouse.store import catalog
    from store.test_issue32_last_rows import batch
    where = sys.argv[1]
    s = tracehouse.open({path!r}, fsync="batch")
    for k in range(10, 13):
        s.append("b", "cpu", batch(k), wait=True)
        if k == 11:
            s.flush()
    if where == "checkpoint":  # the new last-rows file written, the segments not registered
        def die(*a, **kw):
            os.kill(os.getpid(), signal.SIGKILL)
        catalog.Catalog.register_segments = die
        s.flush()
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


@pytest.mark.parametrize("where", ["tail", "checkpoint"])
def test_issue32_last_rows_survive_sigkill(tmp_path, where):
    s = create(tmp_path / "s")
    s.append("b", "cpu", batch(1))
    s.flush()
    s.close()
    tests = str(Path(__file__).resolve().parents[1])
    code = CHILD.format(tests=tests, path=str(tmp_path / "s"))
    p = subprocess.run([sys.executable, "-c", code, where], capture_output=True, text=True, timeout=120)
    assert p.returncode == -signal.SIGKILL, p.stderr
    last = tmp_path / "s" / "traces" / "1" / "last"
    if where == "checkpoint":  # the unregistered checkpoint's file is there, and not read
        counts = sorted(int(f.name.split(".")[1]) for f in last.iterdir())
        assert len(counts) == 2 and counts[1] > counts[0]
    with tracehouse.open(tmp_path / "s", readonly=True) as r:  # the WAL's rows as the tail
        check(r)
    s = tracehouse.open(tmp_path / "s")  # recovery, then a checkpoint of the recovered rows
    check(s)
    s.flush()
    check(s)
    assert s.last_row_types("b") == {"cpu"}
    assert s.sql("SELECT count(*) FROM b.cpu").column(0)[0].as_py() == 4 * 400
    s.close()


def test_issue32_last_indices_agree_with_a_sort():
    rng = np.random.default_rng(5)
    for n, spread in ((1, 3), (50, 3), (5000, 40), (3000, 10**7)):  # (the last: sparse ids, the sort's path)
        p = rng.integers(0, spread, n).astype(np.int32)
        ts = rng.integers(0, 30, n)
        seq = rng.permutation(n).astype(np.int64)
        got = lastrows.last_indices(p, ts, seq)
        want = {}
        for i in range(n):
            if p[i] not in want or (ts[i], seq[i]) > (ts[want[p[i]]], seq[want[p[i]]]):
                want[p[i]] = i
        assert sorted(got.tolist()) == sorted(want.values())
