"""`tracehouse analyze` and `tracehouse results` through the real entry point, on a TOD trace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers.cli import run, run_json
from helpers.paths import ROOT
from tracehouse.cli import command as cli


@pytest.fixture(scope="module")
def tod(tmp_path_factory):
    store = tmp_path_factory.mktemp("cli") / "s"
    assert cli.main(["--store", str(store), "generate", "tod", "--events", "20000", "--name", "tod", "--json"]) == 0
    return store


def test_spans_save_makes_a_linked_processed_trace(tod, capsys):
    r = run_json(capsys, tod, "analyze", "spans", "tod", "--save")
    assert r["processed_trace"] == "tod:spans" and r["stats"]["unmatched_ends"] == 0
    assert r["stats"]["spans"] == r["stats"]["begins"] == r["stats"]["closed"]
    rows = run_json(capsys, tod, "results", "list", "--trace", "tod", "--kind", "processed")
    assert [x["id"] for x in rows] == [r["result"]] and set(rows[0]["traces"]) == {"tod", "tod:spans"}
    shown = run_json(capsys, tod, "results", "show", str(r["result"]))
    assert shown["params"]["derived"] == "tod:spans"
    n = run_json(capsys, tod, "query", 'SELECT count(*) AS n FROM "tod:spans".span')[0]["n"]
    assert n == r["stats"]["spans"]


def test_call_tree_questions(tod, capsys, tmp_path):
    kids = run_json(capsys, tod, "analyze", "children", "tod", "0")["rows"]
    assert all(k["parent_id"] == 0 for k in kids)
    calls = run_json(capsys, tod, "analyze", "calltree", "tod", "--thread", "2", "--max-depth", "1")
    assert calls["total"] > 0 and all(c["producer"] == 2 and c["depth"] <= 1 for c in calls["rows"])
    tree = run_json(capsys, tod, "analyze", "tree", "tod")["rows"]
    assert tree and {"node", "parent", "name", "calls", "total_ns", "self_ns"} <= set(tree[0])
    out = tmp_path / "f.folded"
    code, _, err = run(capsys, tod, "analyze", "flame", "tod", "--out", str(out))
    assert code == 0 and "stacks" in err
    lines = out.read_text().splitlines()
    assert lines and all(re.fullmatch(r"[^ ]+ \d+", line) for line in lines)
    code, text, _ = run(capsys, tod, "analyze", "calltree", "tod", "--thread", "1", "--limit", "3")
    assert code == 0 and "[span " in text


def test_point_in_time_questions(tod, capsys):
    t = run_json(capsys, tod, "query", 'SELECT ts FROM "tod".behavior_enter ORDER BY ts LIMIT 1 OFFSET 500')[0]["ts"]
    st = run_json(capsys, tod, "analyze", "stack", "tod", "1", "--at", str(t))
    assert all(f["producer"] == 1 for f in st["frames"])
    assert [f["depth"] for f in st["frames"]] == list(range(len(st["frames"])))
    state = run_json(capsys, tod, "analyze", "state", "tod", "7", "--at", str(t))["rows"]
    assert all(r["ts"] <= t for r in state)
    if state:
        hist = run_json(capsys, tod, "analyze", "history", "tod", "7", str(state[0]["field"]))["rows"]
        assert state[0]["ts"] in [h["ts"] for h in hist]
    page = run_json(
        capsys,
        tod,
        "analyze",
        "cursor",
        "tod",
        "--type",
        "field_write",
        "--producer",
        "3",
        "--where",
        "value > 10",
        "--at",
        str(t),
        "--limit",
        "5",
    )
    assert len(page["rows"]) == 5 and all(r["ts"] >= t and r["producer"] == 3 and r["value"] > 10 for r in page["rows"])
    back = run_json(capsys, tod, "analyze", "cursor", "tod", "--at", str(t), "--backward", "--limit", "5")["rows"]
    assert len(back) == 5 and all(r["ts"] < t for r in back)
    code, _, err = run(capsys, tod, "analyze", "cursor", "tod", "--where", "nonsense")
    assert code == 2 and "predicate" in err


def test_statistics_and_histograms(tod, capsys):
    d = run_json(capsys, tod, "analyze", "density", "tod", "--bins", "7", "--by", "none")["rows"]
    total = run_json(capsys, tod, "query", 'SELECT count(*) AS n FROM "tod".events')[0]["n"]
    assert len(d) == 7 and sum(r["events"] for r in d) == total
    st = run_json(capsys, tod, "analyze", "stats", "tod", "--by", "producer")["rows"]
    assert sum(r["events"] for r in st) == total
    state = run_json(capsys, tod, "analyze", "stats", "tod", "--by", "state")["rows"]
    assert abs(sum(r["share"] for r in state) - 1) < 1e-9
    h = run_json(capsys, tod, "analyze", "hist", "tod", "--by", "caller", "--below", "1us", "--top", "3")
    assert h["kind"] == "hist" and h["buckets"] and h["below"]
    code, text, _ = run(capsys, tod, "analyze", "hist", "tod", "--unit", "ns")
    assert code == 0 and text.startswith("@nsecs: \n[")
    code, text, _ = run(capsys, tod, "analyze", "lhist", "tod", "--min", "0", "--max", "20", "--step", "5")
    assert code == 0 and "[20, ...)" in text
    code, _, err = run(capsys, tod, "analyze", "lhist", "tod", "--min", "0", "--max", "20", "--step", "3")
    assert code == 2 and "multiple of step" in err


def test_saving_answers_and_results_commands(tod, capsys):
    assert cli.main(["--store", str(tod), "generate", "tod", "--events", "5000", "--name", "tod2", "--seed", "3"]) == 0
    capsys.readouterr()
    cmp = run_json(capsys, tod, "analyze", "compare", "tod", "tod2", "--save")
    assert cmp["buckets"] and cmp["before"]["count"] > cmp["after"]["count"]
    code, _, err = run(capsys, tod, "analyze", "hist", "tod", "--save")
    assert code == 0 and "saved as result" in err
    rid = int(err.split("saved as result")[1].split()[0])
    code, out, _ = run(capsys, tod, "results", "show", str(rid))
    assert code == 0 and "@usecs: " in out
    multi = run_json(capsys, tod, "analyze", "stats", "tod", "tod2", "--save")
    assert {r["trace"] for r in multi["rows"]} == {"tod", "tod2"}
    tables = run_json(capsys, tod, "results", "list", "--tool", "tracehouse.analysis.stats-by-type")
    assert tables and tables[-1]["traces"] == ["tod", "tod2"]
    a = run_json(capsys, tod, "results", "annotate", "tod", "tod2", "--text", "GC pause here", "--at", "1.2s")
    g = run_json(capsys, tod, "results", "group", "runs", "--search", "tod*")
    assert set(g["traces"]) >= {"tod", "tod2"}
    shown = run_json(capsys, tod, "results", "show", str(a["id"]))
    assert shown["kind"] == "annotation" and shown["payload"]["ts"] == 1_200_000_000
    run_json(capsys, tod, "results", "rm", str(a["id"]))
    code, _, err = run(capsys, tod, "results", "show", str(a["id"]))
    assert code == 2
    code, out, _ = run(capsys, tod, "results")
    assert code == 0 and "runs" in out


def test_index_command_builds_every_index(tod, capsys):
    r = run_json(capsys, tod, "analyze", "index", "tod")
    assert set(r["built_s"]) == {"spans", "calls", "objects", "locals", "density"}
    names = {x["name"] for x in run_json(capsys, tod, "results", "list", "--tool", "tracehouse.index")}
    # the call paths are saved beside the span index: a served store's first flame graph reads them
    assert {"spans", "calls", "objects", "locals", "density"} <= names


def test_plugin_analyses_join_the_analyze_command(tod, capsys, monkeypatch, tmp_path):
    """A third party's analysis, installed as pip would leave it (module + dist-info with
    entry_points.txt), becomes `tracehouse analyze longest` and saves its result."""
    import sys
    import textwrap

    root = tmp_path / "site"
    (root / "thanalysis").mkdir(parents=True)
    (root / "thanalysis" / "__init__.py").write_text(
        textwrap.dedent("""
        NAME = "longest"
        DESCRIPTION = "the n longest spans"

        def add_arguments(p):
            p.add_argument("--n", type=int, default=3)

        def run(store, args):
            return store.sql(f\'SELECT span_id, dur FROM "{args.trace}:spans".span ORDER BY dur DESC LIMIT {args.n}\')
    """)
    )
    di = root / "thanalysis-0.1.dist-info"
    di.mkdir()
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: thanalysis\nVersion: 0.1\n")
    (di / "entry_points.txt").write_text("[tracehouse.analyses]\nlongest = thanalysis\n")
    monkeypatch.syspath_prepend(str(root))
    try:
        run_json(capsys, tod, "analyze", "spans", "tod", "--save")
        rows = run_json(capsys, tod, "analyze", "longest", "tod", "--n", "2", "--save")["rows"]
        assert len(rows) == 2 and rows[0]["dur"] >= rows[1]["dur"]
        saved = run_json(capsys, tod, "results", "list", "--tool", "tracehouse.analysis.longest")
        assert saved and saved[-1]["traces"] == ["tod"]
    finally:
        sys.modules.pop("thanalysis", None)


def test_every_analysis_is_documented_in_the_analyses_page():
    """Every `tracehouse analyze NAME` of ours has its entry in docs/analyses.md (the reference
    generated from the registry: tests/analysis/test_registry.py checks it is current)."""
    page = (ROOT / "docs" / "analyses.md").read_text()
    parser = cli.build_parser()
    sub = next(
        a
        for a in parser._subparsers._group_actions[0].choices["analyze"]._actions
        if a.__class__.__name__ == "_SubParsersAction"
    )
    for name in sub.choices:
        if name == "longest":  # the plugin of the test above, when the parser was built with it
            continue
        assert f"### `analyze {name}`" in page, f"`tracehouse analyze {name}` is not in docs/analyses.md"


def test_rm_removes_the_processed_trace_and_the_index_files(tmp_path, capsys):
    """Regression: `rm` left a trace's index files in results/ and its `<trace>:spans` trace."""
    store = tmp_path / "s"
    run_json(capsys, store, "generate", "tod", "--events", "5000", "--name", "gone")
    run_json(capsys, store, "generate", "tod", "--events", "3000", "--name", "kept")
    for name in ("gone", "kept"):
        run_json(capsys, store, "analyze", "spans", name, "--save")
        run_json(capsys, store, "analyze", "index", name)
    files = lambda: sorted(p.name for p in (store / "results").iterdir())  # noqa: E731
    kept_files = {
        Path(r["path"]).name for r in run_json(capsys, store, "results", "list", "--trace", "kept") if r.get("path")
    }
    assert kept_files and set(files()) > kept_files
    spans_id = run_json(capsys, store, "info", "gone:spans")["id"]
    run_json(capsys, store, "rm", "gone")
    assert sorted(t["name"] for t in run_json(capsys, store, "ls")) == ["kept", "kept:spans"]
    assert not (store / "traces" / str(spans_id)).exists()
    assert set(files()) == kept_files
    assert all(set(r["traces"]) <= {"kept", "kept:spans"} for r in run_json(capsys, store, "results", "list"))
    # removing a processed trace itself drops the result that named it, not its source
    run_json(capsys, store, "rm", "kept:spans")
    assert [t["name"] for t in run_json(capsys, store, "ls")] == ["kept"]
    assert run_json(capsys, store, "results", "list", "--kind", "processed") == []
    code, _, _ = run(capsys, store, "analyze", "density", "kept")
    assert code == 0
