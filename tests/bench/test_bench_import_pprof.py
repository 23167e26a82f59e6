"""`tracehouse bench import --format pprof` at toy size: Go writes a heap profile with one sample per
path of its recursion, it imports whole, and every peer runs (skipped, with the reason, without go)."""

from __future__ import annotations

import shutil

import pytest

from tracehouse.bench import import_

pytestmark = pytest.mark.skipif(shutil.which("go") is None, reason="go is not installed: Go writes the workload")


def test_bench_import_pprof_runs_every_part(tmp_path):
    r = import_.run("pprof", 1024, sizes=[1024], workdir=tmp_path / "w")
    run = r["runs"][0]
    # the Go runtime's own allocations are samples too and vary by a few between runs: the
    # workload aims at 1,024 samples and takes what it got after three tries
    assert run["rejected"] == 0 and abs(run["events"] - 1024) <= 16
    peers = {p["name"]: p for p in r["peers"]}
    assert {"read+gunzip", "go tool pprof", "tracehouse parse"} == set(peers)
    assert peers["tracehouse parse"]["samples"] == run["events"]
