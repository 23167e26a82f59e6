"""Density, statistics and histograms: brute force, bpftrace's documented buckets and output,
and hand-computed answers on a small Chrome-like trace imported from CSV."""

from __future__ import annotations

import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracehouse
from helpers.analysis_ref import build_trace
from helpers.paths import DATA
from tracehouse import _core
from tracehouse import analysis as an
from tracehouse.analysis import event_streams as DN
from tracehouse.analysis import histograms as H
from tracehouse.analysis import statistics as STS
from tracehouse.analysis.profiles import SpanConfig
from tracehouse.errors import BadInput

CHROME = SpanConfig("B", "E", key="name")


# -- bpftrace's buckets -----------------------------------------------------------------------


def bpftrace_json_bounds(i: int, k: int) -> tuple[int | None, int | None]:
    """(min, max) of hist bucket i as bpftrace's JsonOutput::hist_to_str writes them."""
    n = 1 << k
    if i == 0:
        return None, -1
    if i <= (2 << k):
        return i - 1, i - 1
    power, bucket = ((i - 1) >> k) - 1, (i - 1) & (n - 1)
    low = (1 << power) * (n + bucket)
    power, bucket = (i >> k) - 1, i & (n - 1)
    return low, (1 << power) * (n + bucket) - 1


@pytest.mark.parametrize("k", [0, 1, 2, 5])
def test_hist_buckets_are_bpftraces(k):
    """Every value lands in the bucket whose documented [min, max] holds it."""
    vals = [
        -(2**62),
        -7,
        -1,
        0,
        1,
        2,
        3,
        4,
        5,
        7,
        8,
        9,
        15,
        16,
        17,
        31,
        32,
        1000,
        1023,
        1024,
        1025,
        2**20 - 1,
        2**20,
        2**40 + 3,
        2**62 - 1,
        2**62,
        2**63 - 1,
    ]
    for v in vals:
        counts = _core.hist_log2(__import__("pyarrow").array([v]), k).to_numpy()
        (i,) = np.nonzero(counts)[0]
        lo, hi = bpftrace_json_bounds(int(i), k)
        assert (lo is None or lo <= v) and v <= (hi if i + 1 < len(counts) else v), (k, v, i, lo, hi)
        blo, bhi, _ = H.hist_bucket(int(i), k)
        assert blo == lo and (bhi == hi or bhi is None)


def test_hist_labels_are_bpftraces():
    labels = [H.hist_bucket(i, 0)[2] for i in range(0, 14)]
    assert labels == [
        "(..., 0)",
        "[0]",
        "[1]",
        "[2, 4)",
        "[4, 8)",
        "[8, 16)",
        "[16, 32)",
        "[32, 64)",
        "[64, 128)",
        "[128, 256)",
        "[256, 512)",
        "[512, 1K)",
        "[1K, 2K)",
        "[2K, 4K)",
    ]
    assert H.hist_bucket(22, 0)[2] == "[1M, 2M)" and H.hist_bucket(32, 0)[2] == "[1G, 2G)"
    # k = 2: the first 2N indexes are single values, then 4 sub-buckets per power of two
    assert [H.hist_bucket(i, 2)[2] for i in (0, 1, 8, 9, 10, 13)] == [
        "(..., 0)",
        "[0]",
        "[7]",
        "[8, 10)",
        "[10, 12)",
        "[16, 20)",
    ]
    assert [H.lhist_bucket(i, 0, 2000, 200)[2] for i in (0, 1, 10, 11)] == [
        "(..., 0)",
        "[0, 200)",
        "[1800, 2000)",
        "[2000, ...)",
    ]
    assert H.lhist_bucket(1, 0, 4096, 1024)[2] == "[0, 1K)" and H.lhist_bucket(5, 0, 4096, 1024)[2] == "[4K, ...)"


def test_lhist_edges_below_min_above_max():
    vals = np.array([-5, 0, 9, 10, 19, 99, 100, 1000], np.int64)
    h = H.histogram(vals, kind="lhist", min=0, max=100, step=10)
    assert h.counts[0].tolist() == [1, 2, 2, 0, 0, 0, 0, 0, 0, 0, 1, 2]
    with pytest.raises(BadInput):
        H.histogram(vals, kind="lhist", min=0, max=100, step=30)  # not a multiple: refused


# The examples of bpftrace's reference guide (docs/reference_guide.md), verbatim.
DOC_HIST = """\
[1M, 2M)               3 |                                                    |
[2M, 4M)               2 |                                                    |
[4M, 8M)               2 |                                                    |
[8M, 16M)              6 |                                                    |
[16M, 32M)            16 |                                                    |
[32M, 64M)            27 |                                                    |
[64M, 128M)           48 |@                                                   |
[128M, 256M)          98 |@@@                                                 |
[256M, 512M)         191 |@@@@@@                                              |
[512M, 1G)           394 |@@@@@@@@@@@@@                                       |
[1G, 2G)             820 |@@@@@@@@@@@@@@@@@@@@@@@@@@@                         |
"""
DOC_LHIST = """\
[0, 1)               306 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@         |
[1, 2)               284 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@            |
[2, 3)               294 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@          |
[3, 4)               318 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@       |
[4, 5)               311 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@        |
[5, 6)               362 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[6, 7)               336 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@    |
[7, 8)               326 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@      |
[8, 9)               328 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@     |
[9, 10)              318 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@       |
"""


def test_text_output_reproduces_bpftraces_documented_examples():
    counts = [3, 2, 2, 6, 16, 27, 48, 98, 191, 394, 820]
    vals = np.repeat(np.array([1 << (20 + i) for i in range(11)], np.int64), counts)
    text = H.histogram(vals, name="@").text()
    head, body = text.split("\n", 1)
    assert head.rstrip() == "@:"
    # The guide's hist example is an excerpt (its bars scale to a bucket it leaves out):
    # labels, counts and layout are compared, the bars are checked in the lhist example.
    cut = [line[:26] for line in body.splitlines()]
    assert cut[:-1] == [line[:26] for line in DOC_HIST.splitlines()] and cut[-1] == ""
    assert all(len(line) == 79 and line.endswith("|") for line in body.splitlines()[:-1])
    vals = np.repeat(np.arange(10, dtype=np.int64), [306, 284, 294, 318, 311, 362, 336, 326, 328, 318])
    text = H.histogram(vals, kind="lhist", min=0, max=10, step=1, name="@").text()
    assert text.split("\n", 1)[1] == DOC_LHIST + "\n"


def test_grouped_maps_sorted_by_total_and_shares():
    vals = np.array([1, 2, 3, 1000, 5000, 7, 8], np.int64)
    groups = np.array([0, 0, 0, 1, 1, 2, 2], np.int64)
    h = H.histogram(vals, groups=groups, group_names=["a", "b", "c"], below=10, name="@ns")
    heads = [line for line in h.text().splitlines() if line.startswith("@")]
    assert heads == ["@ns[b]: ", "@ns[c]: ", "@ns[a]: "]  # totals 2, 2, 3: largest last, ties in group order
    assert h.below["a"]["share"] == 1.0 and h.below["b"]["share"] == 0.0 and h.below["c"]["below"] == 2
    assert h.summary["a"]["p50"] == 2 and h.summary["b"]["max"] == 5000
    assert H.scale(np.array([-1999, -999, 999, 1999]), "us").tolist() == [-1, 0, 0, 1]  # C division
    t = h.buckets()
    assert set(t.column("group").to_pylist()) == {"a", "b", "c"}


# -- density and statistics ----------------------------------------------------------------


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    raw=st.lists(st.tuples(st.integers(1, 3), st.sampled_from("BEW"), st.integers(0, 40)), min_size=1, max_size=60),
    bins=st.integers(1, 9),
    flush=st.booleans(),
)
def test_density_matches_brute_force_and_sql(raw, bins, flush):
    events = [
        {"type": k, "ts": 1000 + dt, "producer": p, "key": 0, "obj": 1, "field": 1, "value": 1} for p, k, dt in raw
    ]
    with (
        tempfile.TemporaryDirectory() as d,
        tracehouse.open(d, flush_rows=10**7, flush_interval_s=3600, fsync="off") as s,
    ):
        build_trace(s, "t", events, flush=flush)
        start, end = min(e["ts"] for e in events), max(e["ts"] for e in events) + 1
        edges = DN.bin_edges(start, end, bins)
        got = an.density(s, "t", bins, by="both").to_pylist()
        want = {}
        for e in events:
            b = int(np.searchsorted(edges, e["ts"], "right") - 1)
            want[(b, e["type"], e["producer"])] = want.get((b, e["type"], e["producer"]), 0) + 1
        assert {(r["bin"], r["type"], r["producer"]): r["events"] for r in got if r["events"]} == want
        sql = DN.density_sql(s, "t", bins, start, end).to_pylist()
        assert {(r["bin"], r["type"], r["producer"]): r["events"] for r in sql} == want
        none = an.density(s, "t", bins, by="none")
        assert none.column("events").to_pylist() == [
            sum(v for (b, _, _), v in want.items() if b == i) for i in range(bins)
        ]
        assert none.column("bin_start").to_pylist() == edges[:-1].tolist()
        one = an.density(s, "t", bins, by="type", types=["W"], start=start, end=end)
        assert sum(one.column("events").to_pylist()) == sum(e["type"] == "W" for e in events)


@pytest.fixture
def chrome(tmp_path, capsys):
    """The hand-written Chrome-like trace (B/E phases, us), through the CSV importer."""
    from tracehouse import cli

    store = tmp_path / "s"
    code = cli.main(
        [
            "--store",
            str(store),
            "import",
            "csv",
            str(DATA / "chrome_like.csv"),
            "--name",
            "chrome",
            "--ts",
            "ts",
            "--ts-unit",
            "us",
            "--producer",
            "tid",
            "--type",
            "ph",
            "--json",
        ]
    )
    capsys.readouterr()
    assert code == 0
    s = tracehouse.open(store, fsync="off")
    yield s
    s.close()


def test_chrome_like_csv_hand_computed(chrome):
    s = chrome
    sp = an.pair(s, "chrome", CHROME)
    rows = {
        r["name"]: (r["span_id"], r["ts"], r["dur"], r["self_time"], r["depth"], r["closed"])
        for r in sp.table.to_pylist()
    }
    assert rows == {
        "main": (0, 0, 100_000, 60_000, 0, True),
        "io": (1, 5_000, 40_000, 40_000, 0, True),
        "parse": (2, 10_000, 15_000, 15_000, 1, True),
        "render": (3, 30_000, 25_000, 17_000, 1, True),
        "layout": (4, 32_000, 8_000, 8_000, 2, True),
        "flush": (5, 120_000, 0, 0, 0, False),
    }
    assert sp.unmatched.column("half").to_pylist() == ["begin"]
    an.save_spans(s, sp)
    assert an.folded(an.aggregated_call_tree(s, "chrome", CHROME)).splitlines() == [
        "main 60000",
        "io 40000",
        "main;parse 15000",
        "main;render 17000",
        "main;render;layout 8000",
    ]
    assert an.stack_at(s, "chrome", 1, 35_000, CHROME).column("name").to_pylist() == ["main", "render", "layout"]
    assert an.children(s, "chrome", 0, CHROME).column("name").to_pylist() == ["parse", "render"]
    v, g, names, _ = an.span_values(s, "chrome", config=CHROME)
    h = an.histogram(v, unit="us", below=20_000)
    assert [(r["label"], r["count"]) for r in h.buckets().to_pylist()] == [
        ("[8, 16)", 2),
        ("[16, 32)", 1),
        ("[32, 64)", 1),
        ("[64, 128)", 1),
    ]
    assert h.below[""]["below"] == 2 and h.below[""]["count"] == 5
    v, g, names, _ = an.span_values(s, "chrome", config=CHROME, group="caller")
    h = an.histogram(v, groups=g, group_names=names, unit="us")
    assert {n: int(h.counts[i].sum()) for i, n in enumerate(h.groups) if h.counts[i].sum()} == {
        "(root)": 2,
        "main": 2,
        "render": 1,
    }
    d = an.density(s, "chrome", 2, by="none")
    assert d.column("events").to_pylist() == [9, 2] and d.column("bin_end").to_pylist() == [60_001, 120_001]
    by_type = {r["type"]: r["events"] for r in an.stats(s, "chrome", "type").to_pylist()}
    assert by_type == {"B": 6, "E": 5}
    by_prod = {r["producer"]: (r["name"], r["events"]) for r in an.stats(s, "chrome", "producer").to_pylist()}
    assert by_prod[1][1] == 8 and by_prod[2][1] == 3
    state = {
        r["state"]: (r["spans"], r["total_dur"], r["self_dur"])
        for r in STS.stats(s, "chrome", "state", state="name").to_pylist()
    }
    assert state["main"] == (1, 100_000, 60_000) and state["render"] == (1, 25_000, 17_000)


def test_multi_trace_statistics_and_compare(chrome):
    s = chrome
    from tracehouse.formats.tod.generate import generate_tod

    generate_tod(s, "tod-a", 3000, seed=1)
    generate_tod(s, "tod-b", 3000, seed=2)
    traces = an.select_traces(s, search={"name": "tod-*"})
    assert traces == ["tod-a", "tod-b"]
    t = an.multi_stats(s, traces, "type")
    assert set(t.column("trace").to_pylist()) == {"tod-a", "tod-b"}
    rid = an.save_table(s, "stats", traces, t, params={"by": "type"})
    r = s.result(rid)
    assert r["traces"] == ["tod-a", "tod-b"] and r["kind"] == "table"
    assert s.result_table(rid).num_rows == t.num_rows
    d = an.multi_density(s, traces, 10, by="none")
    assert d.num_rows == 20 and d.column_names[0] == "trace"
    ha = an.histogram(an.span_values(s, "tod-a")[0])
    hb = an.histogram(an.span_values(s, "tod-b")[0])
    cmp = an.compare(ha, hb)
    assert abs(sum(cmp.column("before_share").to_pylist()) - 1) < 1e-9
    assert sum(cmp.column("after").to_pylist()) == int(hb.counts.sum())
    assert "->" in an.compare_text(ha, hb)
