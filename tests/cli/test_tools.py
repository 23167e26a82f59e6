"""Plugins: a third-party package adds an importer and an exporter through entry points; `tracehouse tools` lists them."""

from __future__ import annotations

import json
import sys
import textwrap
from importlib import metadata

import pytest

from tracehouse.cli import command as cli
from tracehouse.formats import registry

PLUGIN = '''
"""A third-party importer: one event per line "TS VALUE"."""
import pyarrow as pa
from tracehouse.formats.report import ImportReport

NAME = "tsv2"
DESCRIPTION = "two-column lines: ts value"
OPTIONS = {"scale": {"type": int, "help": "tsv2: multiply ts by this"}}


def sniff(head):
    return head.startswith(b"#tsv2")


def import_file(store, path, name, *, mapping=None, strict=False, description="", progress=None, scale=None):
    rows = [l.split() for l in open(path).read().splitlines()[1:] if l.strip()]
    from tracehouse import EventType, Column
    store.create_trace(name, "tsv2", event_types=[EventType("v", "instant", (Column("value", "int64", "1", "the value"),))],
                       producers=[{"id": 0, "parent": None, "kind": "file", "name": "f", "attrs": {}}])
    t = pa.table({"ts": [int(r[0]) * (scale or 1) for r in rows], "producer": pa.array([0] * len(rows), pa.int32()),
                  "value": [int(r[1]) for r in rows]})
    store.append(name, "v", t)
    store.flush(name)
    rep = ImportReport(name, str(path), events=len(rows), by_type={"v": len(rows)})
    return rep
'''

EXPORTER = """
NAME = "lines"
DESCRIPTION = "one line per event"
EXTENSION = "txt"


def export(store, trace, out, *, progress=None):
    t = store.sql(f'SELECT ts, type FROM "{trace}".events ORDER BY ts')
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(f"{r['ts']} {r['type']}\\n" for r in t.to_pylist()))
    return {"trace": trace, "path": str(out), "events": t.num_rows, "bytes": out.stat().st_size}
"""


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """A package 'thplugin' 1.2 as pip would leave it: module files and a dist-info with entry_points.txt."""
    root = tmp_path / "site"
    (root / "thplugin").mkdir(parents=True)
    (root / "thplugin" / "__init__.py").write_text("")
    (root / "thplugin" / "tsv2.py").write_text(PLUGIN)
    (root / "thplugin" / "lines.py").write_text(EXPORTER)
    (root / "thplugin" / "broken.py").write_text("raise ImportError('missing dependency')\n")
    di = root / "thplugin-1.2.dist-info"
    di.mkdir()
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: thplugin\nVersion: 1.2\n")
    (di / "entry_points.txt").write_text(
        textwrap.dedent("""
        [tracehouse.importers]
        tsv2 = thplugin.tsv2

        [tracehouse.exporters]
        lines = thplugin.lines

        [tracehouse.analyses]
        broken = thplugin.broken
    """)
    )
    monkeypatch.syspath_prepend(str(root))
    yield root
    for m in [m for m in sys.modules if m.startswith("thplugin")]:
        del sys.modules[m]


def test_our_tools_are_entry_points_too():
    eps = {ep.name for ep in metadata.entry_points(group="tracehouse.importers")}
    assert {"csv", "parquet", "chrome", "bpftrace", "stap", "paje", "lineproto", "perf"} <= eps
    assert {"parquet", "csv", "chrome"} <= {ep.name for ep in metadata.entry_points(group="tracehouse.exporters")}
    # The registry has no list of its own: every importer and exporter it knows is an entry point.
    assert set(registry.importers()) == eps
    assert set(registry.exporters()) == {ep.name for ep in metadata.entry_points(group="tracehouse.exporters")}


def test_tools_lists_ours(capsys):
    assert cli.main(["tools", "--json"]) == 0
    listed = {(t["kind"], t["name"]): t for t in json.loads(capsys.readouterr().out)}
    for name in ("csv", "parquet", "chrome", "bpftrace", "stap", "paje"):
        assert listed[("importer", name)]["source"] == "tracehouse"
        assert listed[("importer", name)]["description"]
    assert {("exporter", n) for n in ("chrome", "parquet", "csv")} <= set(listed)
    assert listed[("importer", "bpftrace")]["options"] == ["pattern", "span"]
    analyses = [t for t in listed.values() if t["kind"] == "analysis"]
    assert analyses and all(t["source"] == "tracehouse" and t["description"] for t in analyses)


def test_third_party_plugin_is_picked_up(plugin, tmp_path, capsys):
    assert "tsv2" in registry.importers()
    assert "lines" in registry.exporters()
    assert cli.main(["tools", "--json"]) == 0
    listed = {(t["kind"], t["name"]): t for t in json.loads(capsys.readouterr().out)}
    t = listed[("importer", "tsv2")]
    assert (t["source"], t["version"], t["description"], t["options"]) == (
        "thplugin",
        "1.2",
        "two-column lines: ts value",
        ["scale"],
    )
    assert listed[("exporter", "lines")]["source"] == "thplugin"
    assert listed[("analysis", "broken")]["description"].startswith("failed to load")
    # And it works end to end through the CLI: sniffing, its own option, export.
    data = tmp_path / "d.txt"
    data.write_text("#tsv2\n1 10\n2 20\n")
    assert registry.sniff(data) == "tsv2"
    store = str(tmp_path / "store")
    assert cli.main(["--store", store, "import", "tsv2", str(data), "--name", "p", "--scale", "1000", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["events"] == 2
    assert cli.main(["--store", store, "query", 'SELECT ts, value FROM "p".v ORDER BY ts', "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"ts": 1000, "value": 10}, {"ts": 2000, "value": 20}]
    assert cli.main(["--store", store, "export", "p", "--format", "lines", "--out", str(tmp_path / "o"), "--json"]) == 0
    assert (tmp_path / "o" / "p.txt").read_text() == "1000 v\n2000 v\n"
    with pytest.raises(SystemExit):
        cli.main(["tools", "--kind", "nonsense"])


def test_declared_entry_points_match_importlib_metadata(plugin):
    """The registry's own read of entry_points.txt (which spares importlib.metadata when only
    built-ins are declared) finds what importlib.metadata finds, a plugin's names included."""
    for group in registry.GROUPS.values():
        ours = {(ep.name, ep.value) for ep in registry._declared(group)}
        assert ours == {(ep.name, ep.value) for ep in metadata.entry_points(group=group)}
    assert "tsv2" in {ep.name for ep in registry._declared("tracehouse.importers")}
