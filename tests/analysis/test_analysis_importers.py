"""Analyses on traces from the real importers: a hand-written Chrome JSON (hand-computed
answers), the real Node.js trace (brute-force nesting) and a real strace capture."""

from __future__ import annotations

import json

import numpy as np

from helpers.paths import DATA
from tracehouse import analysis as an
from tracehouse.formats.chrome import importer as chrome_import
from tracehouse.formats.strace import importer as strace_import


def test_hand_written_chrome_json(store, tmp_path):
    # tid 1: main [0, 100us) { parse [10, 25) ; render X [30, 55) { layout [32, 40) } }; tid 2: io [5, 45), tick
    events = [
        {"ph": "B", "name": "main", "pid": 1, "tid": 1, "ts": 0},
        {"ph": "B", "name": "parse", "pid": 1, "tid": 1, "ts": 10},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 25},
        {"ph": "X", "name": "render", "pid": 1, "tid": 1, "ts": 30, "dur": 25},
        {"ph": "X", "name": "layout", "pid": 1, "tid": 1, "ts": 32, "dur": 8},
        {"ph": "X", "name": "io", "pid": 1, "tid": 2, "ts": 5, "dur": 40},
        {"ph": "i", "name": "tick", "pid": 1, "tid": 2, "ts": 50},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 100},
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    chrome_import.import_file(store, path, "c")
    t = an.span_table(store, "c")  # the chrome profile: `slice` spans nested by time
    rows = {r["name"]: (r["ts"], r["dur"], r["self_time"], r["depth"]) for r in t.to_pylist()}
    assert rows == {
        "main": (0, 100_000, 60_000, 0),
        "parse": (10_000, 15_000, 15_000, 1),
        "render": (30_000, 25_000, 17_000, 1),
        "layout": (32_000, 8_000, 8_000, 2),
        "io": (5_000, 40_000, 40_000, 0),
    }
    main_tid = next(r["producer"] for r in t.to_pylist() if r["name"] == "main")
    assert an.stack_at(store, "c", main_tid, 35_000).column("name").to_pylist() == ["main", "render", "layout"]
    assert an.folded(an.aggregated_call_tree(store, "c")).splitlines() == [
        "main 60000",
        "io 40000",
        "main;parse 15000",
        "main;render 17000",
        "main;render;layout 8000",
    ]
    v, g, names, _ = an.span_values(store, "c", group="caller")
    h = an.histogram(v, groups=g, group_names=names, unit="us")
    assert {n: int(h.counts[i].sum()) for i, n in enumerate(h.groups) if h.counts[i].sum()} == {
        "(root)": 2,
        "main": 2,
        "render": 1,
    }
    page = an.cursor(store, "c", types=["instant"]).next(10)
    assert page.column("name").to_pylist() == ["tick"]


def test_real_node_trace_nesting_matches_brute_force(store):
    chrome_import.import_file(store, DATA / "node_trace.json", "node")
    t = an.span_table(store, "node").to_pylist()
    assert t
    # Brute force: a slice's parent is the innermost earlier-or-equal-start slice of its thread
    # that contains it (longer first on equal starts).
    for s in t:
        best = None
        for o in t:
            if o is s or o["producer"] != s["producer"]:
                continue
            starts_before = (o["ts"], -o["dur"], o["seq"]) < (s["ts"], -s["dur"], s["seq"])
            encloses = starts_before and o["ts"] <= s["ts"] < o["end_ts"] and s["end_ts"] <= o["end_ts"]
            if encloses and (best is None or (o["ts"], -o["dur"], o["seq"]) > (best["ts"], -best["dur"], best["seq"])):
                best = o
        assert s["parent_id"] == (best["span_id"] if best else -1), s
    kids: dict[int, int] = {}
    for s in t:
        if s["parent_id"] >= 0:
            kids[s["parent_id"]] = kids.get(s["parent_id"], 0) + s["dur"]
    assert all(s["self_time"] == s["dur"] - kids.get(s["span_id"], 0) for s in t)


def test_strace_capture_syscall_histograms_and_stats(store):
    strace_import.import_file(store, DATA / "strace" / "threads.strace", "st")
    t = an.span_table(store, "st")
    n = store.sql('SELECT count(*) AS n FROM "st".syscall').column("n")[0].as_py()
    assert t.num_rows == n and set(t.column("depth").to_pylist()) == {0}  # syscalls do not nest
    v, g, names, _ = an.span_values(store, "st", group="name")
    h = an.histogram(v, groups=g, group_names=names, unit="us", below=10_000)
    by_name = {
        r["name"]: r["n"] for r in store.sql('SELECT name, count(*) AS n FROM "st".syscall GROUP BY name').to_pylist()
    }
    assert {h.groups[i]: int(h.counts[i].sum()) for i in range(len(h.groups))} == by_name
    durs = np.array(store.sql('SELECT dur FROM "st".syscall').column("dur").to_pylist())
    assert sum(b["below"] for b in h.below.values()) == int((durs < 10_000).sum())
    state = {r["state"]: r["spans"] for r in an.stats(store, "st", "state").to_pylist()}
    assert state == by_name
    first = an.cursor(store, "st", types=["syscall"], where=["name = write"]).next(3)
    assert first.column("name").to_pylist() == ["write"] * min(3, by_name.get("write", 0))
