"""`tracehouse bench chrome` runs end to end on a tiny size (numbers are for the real run, not asserted)."""

from __future__ import annotations

import json

from tracehouse.bench import chrome as bench
from tracehouse.formats.chrome import importer as chrome_import


def test_generated_trace_imports_cleanly(store, tmp_path):
    n = bench.generate(tmp_path / "t.json", 5_000)
    rep = chrome_import.import_file(store, tmp_path / "t.json", "g")
    assert rep.rejected == 0 and rep.details["records"] == n
    assert set(rep.by_type) == {"slice", "instant", "counter"}
    # B/E halves pair into slices: stored rows = records - one per pair.
    pairs = store.sql("""SELECT count(*) FROM "g".slice WHERE phase = 'B'""").column(0)[0].as_py()
    assert rep.events == n - pairs


def test_bench_chrome_runs(tmp_path):
    r = bench.run([3_000, 6_000], workdir=str(tmp_path / "w"), modes=("read", "parse", "tracehouse"))
    modes = [(x["size"], x["mode"]) for x in r["results"]]
    assert modes == [
        (3000, "read"),
        (3000, "parse"),
        (3000, "tracehouse"),
        (6000, "read"),
        (6000, "parse"),
        (6000, "tracehouse"),
    ]
    th = [x for x in r["results"] if x["mode"] == "tracehouse"]
    assert all(x["rows"] > 0 and x["max_rss"] > 0 and x["store_bytes"] > 0 for x in th)
    assert "records" in bench.render(r)
    json.dumps(r)


def test_bench_import_has_a_chrome_case(tmp_path):
    from tracehouse.bench import import_

    r = import_.run("chrome", 2_000, workdir=tmp_path)
    assert [x["events"] for x in r["runs"]] == [2_000, 4_000, 8_000]
    assert [p["name"] for p in r["peers"]] == ["wc -l", "python json", "tracehouse parse"]
    assert r["peers"][1]["events"] == 2_000 and r["peers"][2]["events"] == 2_000
    assert all(x["rejected"] == 0 and x["peak_rss_kb"] for x in r["runs"])
