"""The analysis registry: every analysis described once (parameters with units, output columns),
the command line and the web UI listing exactly the registry, a third party's analysis
reaching both without a line of ours, the fast paths equal to the SQL analyses, and the
generated reference page equal to the registry."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from urllib.parse import urlencode

import numpy as np
import pytest

import tracehouse
from helpers.cli import run, run_json
from helpers.paths import ROOT
from tracehouse.analysis import registry
from tracehouse.analysis.profiles import SpanConfig
from tracehouse.analysis.registry import Window
from tracehouse.cli import command as cli
from tracehouse.errors import BadInput

NUMERIC = ("int", "float", "time", "duration")


def test_every_builtin_declares_its_parameters_with_units_and_its_output_columns():
    ours = [a for a in registry.analyses().values() if a.source == "tracehouse"]
    assert {a.name for a in ours} >= {
        "spans",
        "children",
        "calltree",
        "tree",
        "flame",
        "top",
        "path",
        "cursor",
        "state",
        "history",
        "stack",
        "density",
        "stats",
        "hist",
        "lhist",
        "compare",
        "index",
        "timeline",
    }
    for a in ours:
        assert a.summary and a.run, a.name
        for p in a.params:
            assert p.doc, (a.name, p.name)
            if p.type in NUMERIC:
                assert p.unit, f"{a.name} --{p.name}: a number without a unit"
            if p.type in ("time", "duration"):
                assert p.unit == "ns", (a.name, p.name)
        assert a.columns, f"{a.name} documents no output column"
        for c in a.columns:
            assert c.doc and c.type, (a.name, c.name)
            if c.type in ("int64", "int32", "float64") and c.name not in ("row",):
                assert c.unit, f"{a.name}: column {c.name} has no unit"


def _analyze_choices() -> set[str]:
    parser = cli.build_parser(["analyze"])
    sub = next(
        a
        for a in parser._subparsers._group_actions[0].choices["analyze"]._actions
        if a.__class__.__name__ == "_SubParsersAction"
    )
    return set(sub.choices)


@pytest.fixture(scope="module")
def tod(tmp_path_factory):
    store = tmp_path_factory.mktemp("registry") / "s"
    assert cli.main(["--store", str(store), "generate", "tod", "--events", "20000", "--name", "tod", "--json"]) == 0
    return store


def _ui(store):
    from tracehouse.server.ui.app import UiState, build_app
    from tracehouse.server.ui.bridge import call_app

    state = UiState(store, token=None, run_query=lambda q: store.sql(q))
    app = build_app(state)

    def get(path, params=None):
        status, hdrs, out = asyncio.run(call_app(app, "GET", path, urlencode(params or {}, doseq=True), [], b""))
        return status, json.loads(out)

    return state, get


def test_the_command_line_and_the_web_ui_list_exactly_the_registry(tod, capsys):
    names = set(registry.analyses())
    assert _analyze_choices() == names
    assert {t["name"] for t in run_json(capsys, tod, "tools", "--kind", "analysis")} == names
    with tracehouse.open(tod) as s:
        state, get = _ui(s)
        try:
            st, doc = get("/api/ui/analyses", {"trace": "tod"})
        finally:
            state.close()
    assert st == 200 and {a["name"] for a in doc["analyses"]} == names
    by_name = {a["name"]: a for a in doc["analyses"]}
    assert by_name["state"]["applies"] and by_name["stats"]["applies"]
    assert [p["name"] for p in by_name["hist"]["params"]][:3] == ["by", "unit", "below"]


PLUGIN = '''
"""A third party's analysis: the n longest spans of a trace, over the window."""
import pyarrow as pa

from tracehouse.analysis.registry import Analysis, Param
from tracehouse.schema import Column


def run(store, trace, window, *, n=3):
    where = [f"ts >= {window.start}"] if window.start is not None else []
    where += [f"ts < {window.end}"] if window.end is not None else []
    if window.producers is not None:
        where.append("producer IN (" + ", ".join(map(str, window.producers)) + ")")
    q = (f'SELECT span_id, dur FROM "{trace}:spans".span WHERE {" AND ".join(where) or "true"} '
         f"ORDER BY dur DESC, span_id LIMIT {int(n)}")
    return store.sql(q)


LONGEST = Analysis(
    "longest", "the n longest spans", run,
    params=(Param("n", "int", "count", "spans listed", default=3),
            Param("start", "time", "ns", "from", window="start"),
            Param("producer", "int", "id", "only these producers", many=True, window="producers")),
    columns=(Column("span_id", "int64", "id", "the span"), Column("dur", "int64", "ns", "its duration")),
    applies_to=("spans",), uses=("spans",))
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """A package 'thlongest' 0.3 as pip leaves it: a module and a dist-info declaring its analysis."""
    root = tmp_path / "site"
    (root / "thlongest").mkdir(parents=True)
    (root / "thlongest" / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    di = root / "thlongest-0.3.dist-info"
    di.mkdir()
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: thlongest\nVersion: 0.3\n")
    (di / "entry_points.txt").write_text("[tracehouse.analyses]\nlongest = thlongest:LONGEST\n")
    monkeypatch.syspath_prepend(str(root))
    yield root
    sys.modules.pop("thlongest", None)


def test_a_third_party_analysis_reaches_analyze_and_the_web_ui_by_itself(plugin, tod, capsys):
    a = registry.get("longest")
    assert (a.source, a.version) == ("thlongest", "0.3")
    assert "longest" in _analyze_choices()
    run_json(capsys, tod, "analyze", "spans", "tod", "--save")
    want = run_json(
        capsys, tod, "query", 'SELECT span_id, dur FROM "tod:spans".span ORDER BY dur DESC, span_id LIMIT 2'
    )
    assert run_json(capsys, tod, "analyze", "longest", "tod", "--n", "2")["rows"] == want
    # its window parameters are the window's: a producer narrows the answer
    p3 = run_json(capsys, tod, "analyze", "longest", "tod", "--n", "2", "--producer", "3")["rows"]
    want3 = run_json(
        capsys,
        tod,
        "query",
        'SELECT span_id, dur FROM "tod:spans".span WHERE producer = 3 ORDER BY dur DESC, span_id LIMIT 2',
    )
    assert p3 == want3 != want
    # saved with the arguments that reproduce it
    code, _, err = run(capsys, tod, "analyze", "longest", "tod", "--n", "2", "--save")
    rid = int(err.rsplit("saved as result ", 1)[1].split()[0])
    shown = run_json(capsys, tod, "results", "show", str(rid))
    assert (
        shown["replay"] == ["analyze", "longest", "tod", "--n", "2"] and shown["tool"] == "tracehouse.analysis.longest"
    )
    tools = {t["name"]: t for t in run_json(capsys, tod, "tools", "--kind", "analysis")}
    assert (tools["longest"]["source"], tools["longest"]["version"]) == ("thlongest", "0.3")
    # the web UI lists it with its parameters and runs it over a selection
    with tracehouse.open(tod) as s:
        state, get = _ui(s)
        try:
            st, doc = get("/api/ui/analyses", {"trace": "tod"})
            assert st == 200
            listed = {x["name"]: x for x in doc["analyses"]}["longest"]
            assert [p["name"] for p in listed["params"]] == ["n", "start", "producer"] and listed["applies"]
            st, got = get("/api/ui/analysis", {"name": "longest", "trace": "tod", "n": "2", "producers": "3"})
            assert st == 200, got
            assert got["rows"] == [[r["span_id"], r["dur"]] for r in want3] and got["json"]["rows"] == want3
            assert [c["unit"] for c in got["columns"]] == ["id", "ns"]
            st, bad = get("/api/ui/analysis", {"name": "longest", "trace": "tod", "n": "two"})
            assert st == 400 and "integer" in bad["error"]
        finally:
            state.close()


def test_parameters_are_checked_and_window_parts_are_not_keywords(tod):
    with tracehouse.open(tod) as s:
        stats = registry.get("stats")
        with pytest.raises(BadInput, match="no parameter"):
            stats.call(s, ["tod"], Window(), colour="red")
        with pytest.raises(BadInput, match="window"):
            stats.call(s, ["tod"], Window(), start=5)
        with pytest.raises(BadInput):
            stats.call(s, ["tod"], Window(), by="colour")
        for text in ("nan", "inf", "-inf", "abc"):  # a float parameter takes finite numbers only
            with pytest.raises(BadInput, match="min_share"):
                registry.get("tree").call(s, "tod", Window(), min_share=text)
        got = stats.call(s, ["tod"], Window(), by="producer").table()
        assert got.num_rows == s.sql('SELECT count(DISTINCT producer) AS n FROM "tod".events').column(0)[0].as_py()


# -- the fast paths are the SQL analyses' answers ---------------------------------------------------


def _same(a, b, key):
    a, b = a.to_pylist(), b.to_pylist()
    assert [r[key] for r in a] == [r[key] for r in b]
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for k in x:
            if isinstance(x[k], float) or isinstance(y[k], float):
                assert x[k] == pytest.approx(y[k], rel=1e-9, nan_ok=True), (k, x, y)
            else:
                assert x[k] == y[k], (k, x, y)


def _chrome(path):
    """Slices (spans with a duration), instants (none) and a counter, on three threads."""
    ev = []
    for i in range(300):
        tid = 1 + i % 3
        ev.append({"name": f"f{i % 7}", "ph": "X", "ts": i * 10, "dur": 3 + i % 5, "pid": 1, "tid": tid})
        ev.append({"name": "tick", "ph": "i", "ts": i * 10 + 1, "pid": 1, "tid": tid, "s": "t"})
    path.write_text(json.dumps({"traceEvents": ev}))


def test_statistics_from_the_indexes_equal_the_sql_analyses(tod, tmp_path, capsys):
    from tracehouse.analysis import statistics

    _chrome(tmp_path / "c.json")
    run_json(capsys, tod, "import", "chrome", str(tmp_path / "c.json"), "--name", "c")
    with tracehouse.open(tod) as s:
        for trace in ("tod", "c"):
            info = s.trace(trace)
            lo, hi = info.ts_min, info.ts_max
            rng = np.random.default_rng(7)
            windows = [(None, None, None), (lo + (hi - lo) // 3, None, None), (None, hi - (hi - lo) // 4, (1, 2))]
            for _ in range(4):
                a, b = sorted(rng.integers(lo - 10, hi + 10, 2).tolist())
                windows.append((a, b + 1, tuple(sorted(rng.choice([1, 2, 3], 2, replace=False).tolist()))))
            for start, end, producers in windows:
                for by, key in (("type", "type"), ("producer", "producer")):
                    kw = dict(start=start, end=end, producers=producers)
                    _same(statistics.stats(s, trace, by, **kw), statistics.stats(s, trace, by, sql=True, **kw), key)
                kw = dict(start=start, end=end, producers=producers)
                for unclosed in (False, True):
                    _same(
                        statistics.stats(s, trace, "state", unclosed=unclosed, **kw),
                        statistics.stats(s, trace, "state", unclosed=unclosed, sql=True, **kw),
                        "state",
                    )
        # spans that name nothing are all in one state, their type (the web UI's bpftrace spans)
        unnamed = SpanConfig("slice", None)
        fast = statistics.stats(s, "c", "state", config=unnamed)
        _same(fast, statistics.stats(s, "c", "state", config=unnamed, sql=True), "state")
        assert fast.column("state").to_pylist() == ["slice"]


def test_flame_and_top_from_the_call_paths_equal_the_reference(tod):
    from tracehouse.analysis import calltree
    from tracehouse.analysis.profiles import span_config

    with tracehouse.open(tod) as s:
        cfg = span_config(s, "tod")
        ref = calltree.aggregated_call_tree(s, "tod", cfg)
        fast = calltree.call_tree(s, "tod", cfg).rows
        lines = lambda t, v="self_ns": sorted(calltree.folded(t, v).splitlines())  # noqa: E731 - paths: any order
        assert lines(fast) == lines(ref) and lines(fast, "total_ns") == lines(ref, "total_ns")
        sub_ref = calltree.aggregated_call_tree(s, "tod", cfg, producers=[2, 5])
        sub = calltree.call_tree(s, "tod", cfg, Window(producers=(2, 5))).rows
        assert lines(sub) == lines(sub_ref)
        top, count = calltree.top_spans(s, "tod", cfg, Window(), 10)
        want = s.sql('SELECT span_id, dur FROM "tod:spans".span WHERE closed ORDER BY dur DESC, span_id LIMIT 10')
        assert list(zip(top.column("span_id").to_pylist(), top.column("dur").to_pylist())) == list(
            zip(want.column("span_id").to_pylist(), want.column("dur").to_pylist())
        )


# -- the reference page ---------------------------------------------------------------------------------

BEGIN, END = "<!-- BEGIN analyses reference -->", "<!-- END analyses reference -->"


def test_the_committed_reference_page_is_the_registrys():
    """docs/analyses.md holds `registry.markdown()` between its markers (regenerate with
    `python -m tracehouse.analysis.registry --write docs/analyses.md`)."""
    page = (ROOT / "docs" / "analyses.md").read_text()
    assert BEGIN in page and END in page
    got = page.split(BEGIN, 1)[1].split(END, 1)[0]
    assert got.strip() == registry.markdown().strip()
    for name, a in registry.analyses().items():
        if a.source == "tracehouse":
            assert f"### `analyze {name}`" in got
