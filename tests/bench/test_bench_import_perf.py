"""`tracehouse bench import --format perf` at toy size: the replicated text imports whole, and every
part of the case runs (skipped, with the reason, where perf cannot record)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracehouse
from tracehouse.bench import import_, import_perf
from tracehouse.errors import NotFound
from tracehouse.formats.perf import importer as imp

CAPTURE = Path(__file__).parent.parent / "formats" / "perf" / "processes" / "input"


def test_copies_are_new_threads_later_in_time(tmp_path):
    lines = CAPTURE.read_bytes().count(b"\n")
    out = tmp_path / "rep.txt"
    copies, written = import_perf.replicate(CAPTURE, out, 3 * lines + 3)
    assert (copies, written) == (4, 3 * lines + 3) and out.read_bytes().count(b"\n") == written
    assert out.read_bytes().startswith(CAPTURE.read_bytes())  # copy 0 is the capture itself
    with tracehouse.open(tmp_path / "s") as s:
        one = imp.import_file(s, CAPTURE, "one", strict=True)
        rep = imp.import_file(s, out, "rep", strict=True)
        assert rep.events == 3 * one.events + 1  # the 4th copy: its first record, cut after 3 lines
        back = (
            s.sql(
                "SELECT count(*) AS n FROM (SELECT ts < lag(ts) OVER (PARTITION BY producer ORDER BY seq) AS b "
                "FROM rep.sample) WHERE b"
            )
            .column("n")[0]
            .as_py()
        )
        assert back == 0  # each thread's samples in time order
        spans = (
            s.sql("SELECT max(ts) - min(ts) AS span FROM one.sample UNION ALL SELECT max(ts) - min(ts) FROM rep.sample")
            .column("span")
            .to_pylist()
        )
        assert spans[1] > 3 * spans[0]  # the copies follow each other
        kinds = s.sql("SELECT kind, count(*) AS n FROM th.producers WHERE trace = 'rep' GROUP BY kind ORDER BY kind")
        assert kinds.to_pylist() == [{"kind": "process", "n": 4}, {"kind": "thread", "n": 7}]


def test_bench_import_perf_runs_every_part(tmp_path, monkeypatch):
    monkeypatch.setattr(import_perf, "ROUNDS", 5_000)
    try:
        r = import_.run("perf", 30_000, sizes=[30_000], workdir=tmp_path / "w")
    except NotFound as e:  # no perf, no C compiler, or perf may not record here
        pytest.skip(str(e))
    run = r["runs"][0]
    assert run["lines"] == 30_000 and run["rejected"] == 0 and run["events"] > 100
    peers = {p["name"]: p for p in r["peers"]}
    assert {"wc -l", "inferno", "stackcollapse-perf.pl", "python", "tracehouse parse"} == set(peers)
    assert peers["tracehouse parse"]["lines"] == 30_000 and peers["python"]["seconds"] > 0
