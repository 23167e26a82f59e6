"""`tracehouse bench all`: the points follow the seed's equations, and the quick run (every
experiment, every peer) produces its report."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from helpers import child_env
from tracehouse_bench import qos_reads


def test_points_follow_equations_6_to_10():
    # Two systems, one query with two cases: the faster gets 10 per case (eq. 7), the slower
    # M = t/max*10 mirrored: max(M) + min(M) - M.
    cells = [
        {"system": "a", "layout": "schema1", "case": "Q1.1", "clients": 1, "mean": 1.0},
        {"system": "b", "layout": "schema2", "case": "Q1.1", "clients": 1, "mean": 2.0},
        {"system": "a", "layout": "schema1", "case": "Q1.2", "clients": 1, "mean": 4.0},
        {"system": "b", "layout": "schema2", "case": "Q1.2", "clients": 1, "mean": 4.0},
    ]
    write = {"cells": [{"system": "postgres-copy", "rows_per_s": 50.0}, {"system": "mariadb", "rows_per_s": 100.0}]}
    p = qos_reads.points({"cells": cells}, write)
    assert p["a schema 1"]["queries"][1] == pytest.approx((10 + 10) / 2)
    assert p["b schema 2"]["queries"][1] == pytest.approx((5 + 10) / 2)  # case 1: M = 5, 10 -> x = 10 + 5 - 10
    assert p["a schema 1"]["write"] is None  # no write matrix cells for system "a"


def test_a_qos_verdict_is_given_only_where_both_cells_have_the_protocols_rounds():
    """A cell a time budget cut below the protocol's minimum rounds gets "not established" in the
    table, as the report's summary says of it, not met/missed from its few rounds."""

    def cell(system: str, layout: str, median: float, rounds: int) -> dict:
        return {
            "system": system,
            "layout": layout,
            "case": "Q1.4",
            "clients": 20,
            "median": median,
            "mean": median,
            "samples": [median] * rounds,
            "converged": rounds >= 5,
        }

    full = qos_reads.verdicts([cell("tracehouse", "tracehouse", 2.0, 5), cell("duckdb", "schema1", 1.0, 5)])
    assert [(v["verdict"], v["ratio"]) for v in full] == [("missed", 0.5)]
    cut = qos_reads.verdicts([cell("tracehouse", "tracehouse", 1.0, 3), cell("duckdb", "schema1", 2.0, 3)])
    assert [(v["verdict"], v["ratio"]) for v in cut] == [("not established (3 rounds)", 2.0)]


@pytest.fixture
def private_dir():
    """A directory of this test's own, outside pytest's numbered tmp dirs: a pytest session
    started meanwhile (other work on the same machine) prunes those, and this test runs minutes."""
    d = Path(tempfile.mkdtemp(prefix="tracehouse-test-bench-all-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.bench_all
@pytest.mark.parametrize("n", [1, 2, 4, 5, 7])
def test_each_variant_runs_right_after_every_other_equally_often(n):
    from collections import Counter

    rounds = n if n % 2 == 0 else 2 * n
    after = Counter()
    for r in range(rounds):
        order = qos_reads.round_order(n, r)
        assert sorted(order) == list(range(n))
        after.update(zip(order, order[1:], strict=False))
    pairs = [(a, b) for a in range(n) for b in range(n) if a != b]
    assert {after[p] for p in pairs} == ({rounds * (n - 1) // len(pairs)} if pairs else set())


def _resident_bytes() -> int:
    import os

    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads the resident size from /proc")
def test_settle_gives_back_the_memory_a_run_freed():
    # 64 MB in 64 KB blocks (glibc's heap, below its mmap threshold), all freed but the last, which
    # keeps them from being trimmed off the heap's top: resident until settle hands them back, as
    # the pages of a freed answer were (the next run then faulted in fewer pages than its own).
    blocks = [bytearray(64 << 10) for _ in range(1024)]
    last = blocks[-1]
    del blocks
    before = _resident_bytes()
    qos_reads.settle()
    assert before - _resident_bytes() > 32 << 20
    assert len(last) == 64 << 10


def test_bench_all_quick_produces_the_report_with_every_peer(private_dir):
    from tracehouse_bench import pages

    out = private_dir / "benchmarks" / "2099-01-01"  # kept beside a generated index, as under docs/
    out.parent.mkdir()
    (out.parent / "index.md").write_text(pages.INDEX_MARK + "\n")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "tracehouse.cli",
            "bench",
            "all",
            "--quick",
            "--out",
            str(out),
            "--workdir",
            str(private_dir),
            "--json",
        ],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-2000:]
    doc = json.loads((out / "results.json").read_text())
    assert not doc["errors"]
    ex = doc["experiments"]
    assert set(ex) >= {"tod_store", "write", "reads", "soctrace", "ingest", "import", "analyze"}
    assert "replay" in ex  # a bench with run() and render() joins through EXTRA_BENCHES
    # every peer the set-up installs took part (none skipped)
    assert not ex["tod_store"]["skipped"] and not ex["write"]["skipped"] and not ex["reads"]["skipped"]
    assert not ex["soctrace"]["skipped"]
    assert {c["system"] for c in ex["tod_store"]["cells"]} == {
        "raw",
        "tracehouse",
        "sqlite",
        "duckdb",
        "postgres",
        "mariadb",
    }
    assert {c["system"] for c in ex["reads"]["cells"]} == {
        "tracehouse",
        "duckdb",
        "postgres",
        "mariadb",
        "sqlite",
        "questdb",
    }
    assert all(c["runs"] >= 1 and c["mean"] > 0 for c in ex["reads"]["cells"])
    text = (out / "report.md").read_text()
    for heading in (
        "## Summary: tracehouse / best peer",
        "## 1. TOD event store",
        "## 2a. QoS write matrix",
        "## 2b. QoS reads",
        "### Points",
        "## 3. SoC-Trace",
        "## 4a.",
        "## 4b.",
        "## 4c.",
        "Figures where the protocol's criterion was not met",
    ):
        assert heading in text, heading
    assert "883,903" in text.replace("883.9K", "883,903") or "883.9K" in text  # seed 001's raw figure beside ours
    assert "raw append" in text and "seed schema 2" in text
    for png in ("tod_store.png", "write.png", "reads_q1.png", "soctrace_storage.png"):
        assert (out / png).stat().st_size > 5_000, png
    index = (out.parent / "index.md").read_text()  # the docs' index of kept runs, refreshed by the run
    assert "[2099-01-01](2099-01-01/report.md)" in index and "| work | tracehouse | best peer |" in index


def _bench_all(private_dir, *extra):
    return subprocess.run(
        [sys.executable, "-m", "tracehouse.cli", "bench", "all", "--quick", "--workdir", str(private_dir), *extra],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_read_peers_narrow_the_reads_to_tracehouse_and_those_peers(private_dir):
    out = private_dir / "report"
    r = _bench_all(private_dir, "--only", "reads", "--read-peers", "duckdb", "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-2000:]
    doc = json.loads((out / "results.json").read_text())
    assert set(doc["experiments"]) == {"reads"}
    assert {c["system"] for c in doc["experiments"]["reads"]["cells"]} == {"tracehouse", "duckdb"}
    assert "beside duckdb only" in (out / "report.md").read_text()
    bad = _bench_all(private_dir, "--only", "reads", "--read-peers", "duckdb,oracle", "--out", str(out))
    assert bad.returncode != 0 and "unknown read peers ['oracle']" in bad.stderr


def test_a_cell_over_its_budget_stops_at_3_rounds_unless_the_run_asks_for_the_protocols_5():
    """The full run gives every reads cell the protocol's minimum rounds (`min_runs`), so no case
    is left "not established" because a round cost more than the cell's budget."""
    import duckdb

    class Client:
        def __init__(self) -> None:
            self.con = duckdb.connect()

        def fetch(self, sql: str):
            return self.con.execute(sql).fetchall()

        def close(self) -> None:
            self.con.close()

    pool = [qos_reads._ClientThread(Client())]
    try:
        variants = [(("duckdb", "a"), pool), (("duckdb", "b"), pool)]
        slow = "SELECT count(*) FROM range(3000000) t(x) WHERE x % 7 = 1"
        cut = qos_reads._rounds(variants, 1, lambda key: slow, budget_s=0.0, max_runs=8)
        full = qos_reads._rounds(variants, 1, lambda key: slow, budget_s=0.0, max_runs=8, min_runs=5)
    finally:
        for c in pool:
            c.close()
    assert cut["rounds"] == 3
    assert full["rounds"] == 5
    assert all(len(v) == 5 for v in full["wall"].values())


def test_a_tsbs_row_has_the_verdict_of_its_own_table():
    """TSBS's runner times each of a type's distinct queries once: a row's median and p99 are over
    those samples, so the summary's verdict is the ratio's side of 1, as the bench's own table
    says (it was "not established" beside a table saying "met")."""
    from tracehouse_bench import report, tsbs

    r = {
        "queries": 50,
        "types": {
            "lastpoint": {"questdb": {}, "median_ratio": 0.8, "p99_ratio": 1.25},
            "cpu-max-all-1": {"questdb": {"error": "no query"}},
        },
    }
    s = report.Summary()
    for what, v, peer, cells in tsbs.summary(r):
        s.add("tsbs", what, v, 1.0, peer, cells=cells)
    assert [(row["what"], report.Summary.verdict(row)) for row in s.rows] == [
        ("lastpoint median", "met"),
        ("lastpoint p99", "**missed**"),
    ]
