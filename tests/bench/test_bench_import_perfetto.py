"""`tracehouse bench import --format perfetto` at toy size: the copies are new threads later in time,
import whole, and every peer runs."""

from __future__ import annotations

import pytest

import tracehouse
from tracehouse.bench import import_, import_perfetto
from tracehouse.formats.perfetto import importer as imp

pytest.importorskip("perfetto", reason="the perfetto package writes the workload")


def test_copies_are_new_threads_later_in_time(tmp_path, monkeypatch):
    monkeypatch.setattr(import_perfetto, "FRAMES", 20)
    per_copy = import_perfetto.THREADS * 20 * 7 + 20 + 20 * import_perfetto.CPUS * import_perfetto.SWITCHES
    copies, events = import_perfetto.write(tmp_path / "t.pftrace", 2 * per_copy + 10)
    assert (copies, events) == (3, 2 * per_copy + 10)
    with tracehouse.open(tmp_path / "s") as s:
        r = imp.import_file(s, tmp_path / "t.pftrace", "t", strict=True)
        slices = s.sql("SELECT count(*) AS n, count(*) FILTER (WHERE NOT closed) AS open FROM t.slice").to_pylist()[0]
        # The third copy's 10 events: thread 0's first frame (7) and counter (1), then two begins never ended.
        assert slices == {"n": 2 * import_perfetto.THREADS * 20 * 3 + 3 + 2, "open": 2}
        threads = s.sql("SELECT count(*) AS n FROM th.producers WHERE trace = 't' AND kind = 'thread'")
        assert threads.column("n")[0].as_py() == 3 * import_perfetto.THREADS
        # The kernel's side: 2 copies x 20 frames x 2 CPUs x 4 switches; a CPU's first switch starts its first slice.
        sched = s.sql("SELECT count(*) AS n, count(DISTINCT tid) AS tids FROM t.sched_slice").to_pylist()[0]
        assert sched == {"n": 2 * 20 * 2 * 4 - 2, "tids": 2 * import_perfetto.THREADS + 1}
        assert r.rejected == 0


def test_bench_import_perfetto_runs_every_part(tmp_path, monkeypatch):
    monkeypatch.setattr(import_perfetto, "FRAMES", 20)
    r = import_.run("perfetto", 5_000, sizes=[5_000], workdir=tmp_path / "w")
    run = r["runs"][0]
    assert run["rejected"] == 0 and run["events"] > 2_000
    peers = {p["name"]: p for p in r["peers"]}
    assert {"read", "protobuf (upb)", "tracehouse parse", "tracehouse import chrome"} == set(peers)
    assert peers["tracehouse parse"]["events"] == peers["protobuf (upb)"]["events"] == 5_000
