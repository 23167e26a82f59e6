"""`tracehouse bench write` at toy size: tracehouse and SQLite only (no PostgreSQL/MariaDB/QuestDB in CI)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import child_env
from tracehouse.bench import concurrent_writes


def test_statistics_follow_the_seed():
    mean, se = concurrent_writes.stats([10.0, 12.0, 8.0, 10.0])
    assert mean == 10.0 and abs(se - (2**0.5) / 2) < 1e-9


def test_bench_write_cli_small_matrix(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "tracehouse.cli",
        "bench",
        "write",
        "--systems",
        "tracehouse-http,tracehouse-tcp,sqlite",
        "--writers",
        "1,3",
        "--rows-per-batch",
        "1,50",
        "--seconds",
        "0.1",
        "--min-runs",
        "2",
        "--max-runs",
        "2",
        "--out",
        str(tmp_path),
        "--json",
    ]
    r = subprocess.run(cmd, env=child_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert len(doc["cells"]) == 3 * 2 * 2
    assert all(c["runs"] == 2 and c["rows_per_s"] > 0 and c["errors"] == 0 for c in doc["cells"]), doc["cells"]
    assert {c["system"] for c in doc["cells"]} == {"tracehouse-http", "tracehouse-tcp", "sqlite"}
    assert json.loads((tmp_path / "bench-write.json").read_text())["cells"] == doc["cells"]
    assert (tmp_path / "bench-write.png").stat().st_size > 10_000
    assert [c["rows_per_batch"] for c in doc["ratios"]["cells"]] == [50, 50]
    assert doc["ratios"]["cells"][0]["vs_best_relational"] > 0


def test_ratios_take_the_best_protocol_on_each_side():

    cells = [
        ("tracehouse-http", 100),
        ("tracehouse-tcp", 120),
        ("tracehouse-arrow", 300),
        ("questdb", 40),
        ("questdb-tcp", 60),
        ("sqlite", 20),
        ("mariadb", 30),
    ]
    result = {
        "writers": [1],
        "rows_per_batch": [10, 1000],
        "cells": [{"system": s, "writers": 1, "rows_per_batch": 1000, "rows_per_s": v} for s, v in cells],
    }
    (cell,) = concurrent_writes.ratios(result)["cells"]  # 10 rows per batch is below the targets' 50
    assert (cell["tracehouse_lp"], cell["tracehouse_best"]) == (120, 300)
    assert cell["vs_questdb"] == 2.0 and cell["vs_best_relational"] == 4.0  # QuestDB over TCP, MariaDB
    assert cell["best_vs_questdb"] == 5.0 and cell["best_vs_best_relational"] == 10.0


def test_pairings_compare_each_ack_contract_with_the_peers_keeping_it():
    # written: tracehouse --ack written vs QuestDB's default only (never its fsynced mode);
    # durable: tracehouse --ack durable vs QuestDB sync and PostgreSQL (never QuestDB's default).

    cells = [
        ("tracehouse-http-written", 900),
        ("tracehouse-tcp-written", 600),
        ("tracehouse-arrow-written", 1800),
        ("tracehouse-http", 300),
        ("tracehouse-tcp", 400),
        ("questdb", 450),
        ("questdb-tcp", 5000),
        ("questdb-sync", 50),
        ("postgres-copy", 100),
    ]
    result = {
        "writers": [2],
        "rows_per_batch": [100],
        "cells": [{"system": s, "writers": 2, "rows_per_batch": 100, "rows_per_s": v} for s, v in cells],
    }
    got = {p["contract"]: p for p in concurrent_writes.pairings(result)}
    assert (got["written"]["tracehouse"], got["written"]["peer"]) == ("tracehouse-http-written", "questdb")
    assert got["written"]["ratio"] == 2.0 and got["written"]["ratio_with_arrow"] == 4.0
    assert (got["durable"]["tracehouse"], got["durable"]["peer"]) == ("tracehouse-tcp", "postgres-copy")
    assert got["durable"]["ratio"] == 4.0
    # A contract with no peer measured has no row.
    result["cells"] = [c for c in result["cells"] if c["system"] not in ("questdb-sync", "postgres-copy")]
    assert [p["contract"] for p in concurrent_writes.pairings(result)] == ["written"]


def test_half_rate_measures_latency_at_half_the_closed_loop_rate(tmp_path, monkeypatch):
    # (QuestDB, the peer given the same load, cannot run here, without java or without the benchmark
    # suite: it is listed as skipped)
    monkeypatch.setenv("TRACEHOUSE_QUESTDB_JAR", str(tmp_path / "missing.jar"))
    monkeypatch.setenv("PATH", "/nonexistent")  # no java, no mvn
    res = concurrent_writes.half_rate(
        protocols=("http",),
        workload="cpu",
        agents=4,
        rows=100,
        seconds=0.5,
        workdir=str(tmp_path),
        repeat=2,
        peers=("questdb",),
    )
    (run,) = res["runs"]
    assert len(run["repeats"]) == 2 and run["repeats"][0]["ack_us"] == run["ack_us"]
    assert run["median_p99_us"] == (run["repeats"][0]["ack_us"][2] + run["repeats"][1]["ack_us"][2]) / 2
    assert res["skipped"]["questdb"] and res["peers"] == []
    rendered = concurrent_writes.render_half_rate(res)
    assert "questdb: skipped" in rendered.columns[0]._cells
    assert run["errors"] == 0 and run["max_rows_per_s"] > 0
    assert run["interval_ms"] == 4 * 100 / (run["max_rows_per_s"] / 2) * 1000
    assert 0 < run["half_rows_per_s"] < run["max_rows_per_s"]  # open loop at half: slower than closed
    p50, p90, p99, mx = run["ack_us"]
    assert 0 < p50 <= p90 <= p99 <= mx
    assert "p99" in str(concurrent_writes.render_half_rate(res).columns[6].header)


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_a_stopped_bench_stops_the_servers_it_started(tmp_path, how):
    # timeout(1) or a cancelled job sends SIGTERM: the bench must stop its `tracehouse serve`
    # on the way out, not leave it running (one such orphan loaded this machine for an hour).
    # After a SIGKILL no code of the bench runs: the server stops by itself (PR_SET_PDEATHSIG).
    import os
    import signal
    import time
    from pathlib import Path

    cmd = [
        sys.executable,
        "-m",
        "tracehouse.cli",
        "bench",
        "write",
        "--systems",
        "tracehouse-http",
        "--writers",
        "1",
        "--rows-per-batch",
        "10",
        "--seconds",
        "60",
        "--min-runs",
        "1",
        "--max-runs",
        "1",
        "--out",
        str(tmp_path),
    ]
    bench = subprocess.Popen(cmd, env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def children(pid: int) -> list[int]:
        try:
            return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        except FileNotFoundError:
            return []

    servers: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while not servers and time.monotonic() < deadline:  # the server up, and the bench writing to it
            servers = [
                c for c in children(bench.pid) if b"serve" in Path(f"/proc/{c}/cmdline").read_bytes().split(b"\0")
            ]
            time.sleep(0.2)
        assert servers, "no tracehouse serve started"
        time.sleep(2.0)
        bench.send_signal(getattr(signal, how))
        bench.wait(120)
        for pid in servers:
            for _ in range(600):
                if not os.path.exists(f"/proc/{pid}") or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                    break
                time.sleep(0.1)
            else:
                raise AssertionError(f"server {pid} outlived the bench")
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        for pid in servers:  # (an orphan of a failed run must not outlive the test either)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
