"""The documentation's benchmark pages (tracehouse_bench.pages): the current table comes from the
newest full run kept under docs/benchmarks/, every row from its results.json, and the pages are
rewritten only where they are ours."""

from __future__ import annotations

import copy
import json
import shutil

import pytest

from helpers.paths import ROOT
from tracehouse_bench import pages

KEPT = ROOT / "docs" / "benchmarks"


@pytest.fixture
def committed() -> dict:
    return json.loads((KEPT / "2026-11-25" / "results.json").read_text())


def test_the_headline_rows_come_from_the_run(committed):
    rows = pages.headline(committed)
    works = [r[0] for r in rows]
    assert any(w.startswith("TOD events stored, streaming") for w in works)
    assert any(w.startswith("QoS rows written, 128 writers") for w in works)
    assert any(w.startswith("QoS read") for w in works)  # a row where tracehouse loses stays in the table
    assert any("SoC-Trace" in w for w in works) and any("strace import" in w for w in works)
    tod = next(r for r in rows if r[0].startswith("TOD events stored, streaming"))
    x = next(x for x in committed["experiments"]["tod_store"]["ratios"] if x["events"] == 1_000_026)
    assert tod[3] == pytest.approx(x["stream_vs_best_peer"]) and "duckdb fast" in tod[2]
    reads = next(r for r in rows if r[0].startswith("QoS read"))
    assert reads[3] < 1  # tracehouse slower there: the ratio says so
    assert all(r[4] is not None for r in rows)  # each row carries its experiment's load average


def test_a_run_without_an_experiment_has_no_row_for_it(committed):
    part = copy.deepcopy(committed)
    del part["experiments"]["write"], part["experiments"]["reads"]
    works = [r[0] for r in pages.headline(part)]
    assert works and not any(w.startswith("QoS") for w in works)


def test_the_newest_full_run_is_current_and_the_index_lists_every_run(tmp_path, committed):
    bench = tmp_path / "benchmarks"
    shutil.copytree(KEPT / "2026-11-25", bench / "2026-11-25")
    quick = copy.deepcopy(committed) | {"size": "quick", "quick": True, "started": "2026-12-01T10:00:00+00:00"}
    (bench / "2026-12-01").mkdir()
    (bench / "2026-12-01" / "results.json").write_text(json.dumps(quick))
    assert {d.name for d, _, _ in pages.current(bench)} == {"2026-11-25"}  # a quick run replaces no full one
    (bench / "index.md").write_text("a page someone wrote\n")
    assert pages.refresh_index(bench / "2026-12-01") is None  # not ours: left alone
    assert (bench / "index.md").read_text() == "a page someone wrote\n"
    (bench / "index.md").write_text(pages.INDEX_MARK + "\nold\n")
    assert pages.refresh_index(bench / "2026-12-01") == bench / "index.md"
    text = (bench / "index.md").read_text()
    assert text.index("[2026-12-01](2026-12-01/report.md)") < text.index("[2026-11-25](2026-11-25/report.md)")
    assert "## Current figures" in text and "(2026-11-25/report.md)" in text


def test_the_readme_table_replaces_only_what_is_between_its_markers(tmp_path):
    readme = f"# x\n\nbefore\n\n{pages.START}\nstale figures\n{pages.END}\n\nafter\n"
    out = pages.with_readme_table(readme, KEPT)
    assert out.startswith("# x\n\nbefore\n\n") and out.endswith(f"{pages.END}\n\nafter\n")
    assert "stale figures" not in out and "| work | tracehouse | best peer | ratio |" in out
    assert "docs/benchmarks/2026-11-25/report.md" in out
    with pytest.raises(ValueError, match="bench-table"):
        pages.with_readme_table("# no markers\n", KEPT)
    empty = tmp_path / "none"
    empty.mkdir()
    assert "No benchmark run" in pages.readme_section(empty)


def test_a_full_run_of_a_part_refreshes_its_rows_and_keeps_the_others(tmp_path, committed):
    bench = tmp_path / "benchmarks"
    shutil.copytree(KEPT / "2026-11-25", bench / "2026-11-25")
    part = {k: v for k, v in committed.items() if k != "experiments"} | {"started": "2026-12-07T22:00:00+00:00"}
    reads = copy.deepcopy(committed["experiments"]["reads"])
    for c in reads["cells"]:  # tracehouse 4x faster than it was: every case met now
        if c["system"] == "tracehouse":
            c["mean"] = c["median"] = c["mean"] / 4 if "median" not in c else c["median"] / 4
    q = {"median_ms": 2.0, "p99_ms": 8.0}
    tsbs = {
        "rows": 864_000,
        "questdb_version": "9.1.0",
        "loadavg_before": [1.5, 2.0, 3.0],  # (as the bench's own run() keeps it)
        "types": {
            "lastpoint": {
                "tracehouse": q,
                "questdb": {"median_ms": 1.0, "p99_ms": 16.0},
                "median_ratio": 2.0,
                "p99_ratio": 0.5,
            },
            "high-cpu-1": {
                "tracehouse": q,
                "questdb": {"median_ms": 4.0, "p99_ms": 16.0},
                "median_ratio": 0.5,
                "p99_ratio": 0.5,
            },
            "double-groupby-1": {"tracehouse": q, "questdb": {"error": "refused"}},
        },
    }
    part["experiments"] = {"reads": reads, "tsbs": tsbs}
    (bench / "2026-12-07-reads").mkdir()
    (bench / "2026-12-07-reads" / "results.json").write_text(json.dumps(part))
    rows = pages.current(bench)
    by = {row[0]: d.name for d, _, row in rows}
    assert all(d == "2026-12-07-reads" for w, d in by.items() if w.startswith(("QoS reads", "TSBS")))
    assert any(d == "2026-11-25" and w.startswith("TOD events") for w, d in by.items())
    read = next(row for _, _, row in rows if row[0].startswith("QoS reads"))
    old = next(r for r in pages.headline(committed) if r[0].startswith("QoS reads"))
    assert read[3] == pytest.approx(old[3] * 4)
    ts = next(row for _, _, row in rows if row[0].startswith("TSBS"))
    assert ts[0].startswith("TSBS cpu-only queries, 2 types, 864,000 rows")  # the refused type has no ratio
    assert ts[1] == "1 of 2 at or under QuestDB by the median, 1 by median and p99"
    assert ts[3] == pytest.approx(1.0) and ts[4] == 1.5  # geometric mean of 0.5 and 2; the 1-minute load
    section = pages.readme_section(bench)
    assert "docs/benchmarks/2026-12-07-reads/report.md" in section and "docs/benchmarks/2026-11-25/report.md" in section
