"""`tracehouse bench ingest` at toy size: every system runs, stores what was generated, cleans up.

No timing is asserted: the numbers only mean something at full size on a quiet machine.
"""

import json

import pytest
from rich.console import Console

import tracehouse
from tracehouse import _core
from tracehouse.bench import tod_ingest, tod_ingest_peers

EVENTS = 20_000


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    work = tmp_path_factory.mktemp("bench")
    r = tod_ingest.run(EVENTS, batch=3_000, seed=7, workdir=work, progress=False)
    r["_workdir"] = work
    return r


def generated(events, batch, seed):
    gen = _core.TodGenerator(events=events, seed=seed)
    calls = 0
    while gen.next_batches(max_events=batch) is not None:
        calls += 1
    return gen.emitted, calls


def test_every_system_ran_on_the_same_events(result):
    emitted, calls = generated(EVENTS, 3_000, 7)
    assert result["workload"]["events_generated"] == emitted
    assert result["workload"]["source_calls"] == calls
    assert sum(result["workload"]["per_type"].values()) == emitted
    runs = {r["id"]: r for r in result["runs"]}
    assert list(runs) == list(tod_ingest.SYSTEMS)
    for r in runs.values():
        assert r["events"] == emitted, r["id"]
        assert r["stored"] in (None, emitted), r["id"]  # raw cannot count itself back
        assert r["bytes"] > 0 and r["seconds"] > 0 and r["events_per_s"] > 0, r["id"]
        assert r["cpu_seconds"] > 0 and r["events_per_cpu_s"] > 0, r["id"]
    assert runs["raw"]["ratio_to_raw"] == 1.0


def test_raw_holds_every_value_and_validity_buffer(result):
    w = tod_ingest_peers.Workload.tod(EVENTS, batch=3_000, seed=7)
    want = sum(buf.size for d in w.batches for b in d.values() for c in b.columns for buf in c.buffers() if buf)
    raw = next(r for r in result["runs"] if r["id"] == "raw")
    assert raw["bytes"] == want


def test_tracehouse_store_really_holds_the_events(tmp_path):
    """The streaming run leaves a store whose fresh read-only open counts every event, WAL gone."""
    w = tod_ingest_peers.Workload.tod(EVENTS, batch=2_500, seed=3)
    r = tod_ingest.tracehouse_stream(tmp_path, w, probe=False)
    assert r.stored == w.events
    assert r.extra["wal_bytes_left"] == 0
    with tracehouse.open(tmp_path, readonly=True) as s:
        info = s.trace(tod_ingest.TRACE)
        assert info.event_count == w.events
        per_type = {
            t: s.sql(f'SELECT count(*) AS n FROM "{tod_ingest.TRACE}".{t}').column("n")[0].as_py() for t in w.schemas
        }
        assert per_type == w.per_type
        # same events, not just the same count: the ts sum matches what was generated
        ts_sum = s.sql(f'SELECT sum(ts) AS s FROM "{tod_ingest.TRACE}".events').column("s")[0].as_py()
    assert ts_sum == sum(sum(b.column("ts").to_pylist()) for d in w.batches for b in d.values())


def test_bulk_store_holds_the_events(tmp_path):
    w = tod_ingest_peers.Workload.tod(EVENTS, batch=5_000, seed=3)
    r = tod_ingest.tracehouse_bulk(tmp_path, w)
    assert r.stored == w.events
    with tracehouse.open(tmp_path, readonly=True) as s:
        assert s.trace(tod_ingest.TRACE).event_count == w.events


def test_reader_process_sees_the_streamed_events(result):
    fr = next(r for r in result["runs"] if r["id"] == "tracehouse")["freshness"]
    assert "error" not in fr
    assert fr["unseen_batches"] == 0
    assert fr["batches"] == result["workload"]["source_calls"]
    assert fr["lag_max_s"] is not None and fr["lag_max_s"] >= fr["lag_p50_s"] >= 0


def test_ratios_targets_and_report(result):
    rat = tod_ingest.ratios(result)
    for k in ("tracehouse/raw", "tracehouse/sqlite", "tracehouse/duckdb", "tracehouse-bulk/duckdb-bulk"):
        assert rat[k] > 0
    assert {t["target"] for t in result["targets"]} >= {"tracehouse/raw", "tracehouse/sqlite", "tracehouse/duckdb"}
    console = Console(record=True, width=100)
    tod_ingest.print_report(result, console)
    text = console.export_text()
    for word in ("raw", "tracehouse", "sqlite", "duckdb", "tracehouse/raw:"):
        assert word in text
    json.dumps({k: v for k, v in result.items() if not k.startswith("_")})  # JSON-able


def test_work_directory_is_cleaned(result):
    assert list(result["_workdir"].iterdir()) == []


def test_subset_of_systems_and_unknown_system(tmp_path):
    r = tod_ingest.run(5_000, workdir=tmp_path, systems=["raw", "sqlite"], progress=False, repeat=2)
    assert [x["id"] for x in r["runs"]] == ["raw", "sqlite"]
    for x in r["runs"]:  # best of two, both kept
        assert len(x["all_seconds"]) == 2 and x["seconds"] == min(x["all_seconds"])
    assert "tracehouse/raw" not in tod_ingest.ratios(r)
    with pytest.raises(tracehouse.BadInput):
        tod_ingest.run(5_000, workdir=tmp_path, systems=["mysql"], progress=False)


def test_not_enough_space_fails_before_writing(tmp_path, monkeypatch):
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10, 10, 1_000))
    with pytest.raises(tod_ingest.NotEnoughSpace, match="GB free"):
        tod_ingest.run(1_000_000, workdir=tmp_path, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_count_measurement_counts_what_was_ingested(tmp_path):
    r = tod_ingest.run_count(30_000, batch=7_000, workdir=tmp_path, progress=False)
    emitted, _ = generated(30_000, 7_000, 42)
    assert r["events"] == r["counted"] == r["fresh_process_counted"] == emitted
    assert r["bytes"] > 0 and r["count_cold_s"] > 0 and r["count_warm_s"] > 0
    if "count_cli_s" in r:  # the console script is installed in this environment
        assert str(emitted) in r["cli_output"]
    assert list(tmp_path.iterdir()) == []
