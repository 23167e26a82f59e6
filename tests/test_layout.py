"""The package's layering (docs/architecture.md, "The house"): data flows one way, nothing imports the CLI, no
cycles. dev/importgraph.py reads the sources with `ast`; this runs its check."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_imports_flow_one_way_and_nothing_imports_the_cli():
    r = subprocess.run(
        [sys.executable, str(ROOT / "dev" / "importgraph.py"), "--check"], capture_output=True, text=True
    )
    assert r.returncode == 0, "layering violations:\n" + r.stdout + r.stderr


def test_help_loads_no_heavy_module():
    """`tracehouse --help` imports neither pyarrow nor DuckDB nor the command modules (start-up time)."""
    code = (
        "import sys\nfrom tracehouse.cli import command\n"
        "try:\n    command.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyarrow', 'duckdb', 'numpy', 'rich')"
        " or m.startswith('tracehouse.cli.') and m != 'tracehouse.cli.command'))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip().splitlines()[-1] == "[]"


_HEAVY = ("pyarrow", "numpy", "duckdb", "pandas", "sqlglot")


def _loaded_heavy(argv: list[str], setup: str = "") -> tuple[list[str], str]:
    """(the heavy modules loaded, stdout) when the CLI runs `argv` in a fresh interpreter."""
    code = (
        "import contextlib, io, sys\nfrom tracehouse.cli import command\nbuf = io.StringIO()\n"
        f"with contextlib.redirect_stdout(buf):\n    rc = command.main({argv!r})\n"
        "assert rc == 0, rc\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({_HEAVY!r})))\n"
        "print(buf.getvalue(), end='')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    first, _, rest = r.stdout.partition("\n")
    return eval(first), rest  # noqa: S307 - our own subprocess's printed list


def _store_with_a_trace(path: Path) -> None:
    """A store holding trace `t`: flushed segments, and an unflushed tail left in the WAL by a
    writer that went away (read-only opens read it, as a server's)."""
    code = (
        "import sys, pyarrow as pa, tracehouse\n"
        "from tracehouse import Column, EventType\n"
        "s = tracehouse.open(sys.argv[1], fsync='always', flush_rows=10**9, flush_interval_s=3600)\n"
        "s.create_trace('t', 'custom', event_types=[EventType('a', 'instant', (Column('x', 'int64', '', ''),))])\n"
        "rows = lambda n, t0: pa.table({'ts': pa.array(range(t0, t0 + n), pa.int64()),"
        " 'producer': pa.array([0] * n, pa.int32()), 'x': pa.array([1] * n, pa.int64())})\n"
        "s.append('t', 'a', rows(100, 0)); s.flush()\n"
        "s.append('t', 'a', rows(7, 1000), wait=True)\n"
        "import os; os._exit(0)\n"  # no close: the 7 rows stay in the WAL only
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=True)


def test_listing_traces_loads_no_heavy_module(tmp_path):
    """`tracehouse ls` (table and --json), `search` and `info` read the SQLite catalog only:
    no pyarrow, numpy or DuckDB (`ls` took 1.0-1.2 s, importing them to open the store)."""
    _store_with_a_trace(tmp_path)
    for argv in (["ls"], ["ls", "--json"], ["search", "t*", "--json"], ["info", "t", "--json"]):
        heavy, out = _loaded_heavy(["--store", str(tmp_path), *argv])
        assert heavy == [], (argv, heavy)
        assert '"t"' in out or " t " in out, (argv, out)


def test_whole_count_query_loads_no_heavy_module(tmp_path):
    """`tracehouse query 'SELECT count(*) FROM "<trace>".events' --format csv` is answered from the
    catalog's counts without DuckDB (<= 0.35 s for the whole command); with an unflushed
    tail in another process's WAL it reads that WAL (pyarrow) and still needs no DuckDB, and the
    number is DuckDB's own."""
    _store_with_a_trace(tmp_path)
    sql = 'SELECT count(*) FROM "t".events'
    heavy, out = _loaded_heavy(["--store", str(tmp_path), "query", sql, "--format", "csv"])
    assert "duckdb" not in heavy and "pandas" not in heavy and "sqlglot" not in heavy, heavy
    assert out.splitlines() == ["count_star()", "107"]
    _, duck = _loaded_heavy(
        ["--store", str(tmp_path), "query", 'SELECT count(ts) AS "count_star()" FROM "t".events', "--format", "csv"]
    )
    assert duck == out
    import tracehouse

    with tracehouse.open(tmp_path) as s:  # the writer's open recovers the WAL into segments
        s.flush()
    heavy, out = _loaded_heavy(["--store", str(tmp_path), "query", sql, "--format", "csv"])
    assert heavy == [] and out.splitlines() == ["count_star()", "107"], (heavy, out)
    heavy, out = _loaded_heavy(["--store", str(tmp_path), "query", sql, "--json"])
    assert heavy == [] and '"count_star()": 107' in out, (heavy, out)


def test_lazy_module_imports_on_first_attribute():
    """`lazy.module(name)` binds a name without importing the module; the first attribute read
    imports it, later reads are the module's own attributes (the stand-in holds them)."""
    code = (
        "import sys\nfrom tracehouse import lazy\n"
        "m = lazy.module('colorsys')\n"
        "assert 'colorsys' not in sys.modules\n"
        "assert m.rgb_to_hsv(1.0, 0.0, 0.0) == (0.0, 1.0, 1.0)\n"
        "import colorsys\n"
        "assert 'colorsys' in sys.modules and m.rgb_to_hsv is colorsys.rgb_to_hsv\n"
        "assert 'rgb_to_hsv' in vars(m)\n"
        "assert lazy.module('colorsys') is colorsys\n"  # already imported: the module itself
        "try:\n    m.no_such_name\nexcept AttributeError:\n    print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


@pytest.mark.parametrize("json_flag", [["--json"], []], ids=["json", "piped"])
def test_strace_import_loads_only_what_it_uses(tmp_path, json_flag):
    """`tracehouse import strace FILE --json` needs pyarrow (batches) and numpy (the store's
    sort), not DuckDB, pyarrow.compute (~0.1-0.2 CPU-s of docstrings) or rich (start-up
    is part of the end-to-end import rate). Before: all three were loaded. Nor importlib.metadata
    (0.02-0.04 CPU-s) when no installed package declares importers beyond ours. Without --json
    and piped, its one line is written without rich too (`output.say`; before, rich was loaded
    to print it)."""
    data = ROOT / "tests" / "data" / "strace" / "single.strace"
    code = (
        "import contextlib, io, sys\nfrom tracehouse.cli import command\n"
        "with contextlib.redirect_stdout(io.StringIO()) as printed:\n"
        f"    rc = command.main(['--store', {str(tmp_path)!r}, 'import', 'strace', {str(data)!r}, '--name', 'x', "
        f"*{json_flag!r}])\n"
        "assert rc == 0, rc\n"
        "print(printed.getvalue().strip().splitlines()[-1])\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'duckdb', 'rich', 'pandas', 'sqlglot'}"
        " | {m for m in sys.modules if m in ('pyarrow.compute', 'importlib.metadata')}))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    *_, line, loaded = r.stdout.strip().splitlines()
    assert loaded == "[]", r.stdout
    if not json_flag:
        assert re.fullmatch(r"imported 53 events into x in [0-9.]+ s \([0-9,]+ events/s\): syscall 52, exit 1", line)


def test_no_module_uses_another_rooms_private_names(tmp_path):
    """dev/importgraph.py --check refuses a private name (`_x`) of another room, imported or read
    off a module (as the web UI imported `analysis._index`, `spans._begin_name`,
    `histograms._summary`, `store.query._first_line`); within a room it is allowed, and the
    native module `tracehouse._core` is the one exception."""
    sys.path.insert(0, str(ROOT / "dev"))
    try:
        import importgraph
    finally:
        sys.path.pop(0)
    known = importgraph.modules()
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from ...analysis import _index\nfrom ...analysis.spans import _begin_name\n"
        "from ...analysis import spans\nfrom ... import _core\nx = spans._name_strings\n"
    )
    ok = tmp_path / "ok.py"
    ok.write_text("from . import _private_helper\nfrom .spans import _begin_name\n")
    found = importgraph.private_uses(known | {"tracehouse.server.ui.bad": bad, "tracehouse.analysis.ok": ok})
    mine = [f for f in found if f.startswith("tracehouse.server.ui.bad")]
    assert len(mine) == 3 and all("_core" not in f for f in mine), mine
    assert not [f for f in found if f.startswith("tracehouse.analysis.ok")]
    assert importgraph.private_uses(known) == []  # and the package itself has none


def test_the_layering_check_catches_the_server_importing_a_bench_and_tracehouse_importing_the_suite():
    """What `--check` must refuse: the server importing a bench, tracehouse importing the benchmark
    suite (it plugs in through entry points), the suite importing the CLI."""
    sys.path.insert(0, str(ROOT / "dev"))
    try:
        import importgraph
    finally:
        sys.path.pop(0)
    bad = {
        "tracehouse.server.ui.demo": {"tracehouse.bench.concurrent_writes"},
        "tracehouse.store.store": {"tracehouse_bench.report"},
        "tracehouse_bench.cli": {"tracehouse.cli.output"},
        "tracehouse.bench.concurrent_writes": {"tracehouse.workload.loadgen"},
    }
    found = importgraph.violations(bad)
    assert any("server.ui.demo" in v and "arrow back up" in v for v in found), found
    assert any("tracehouse.store.store" in v and "tracehouse_bench.report" in v for v in found), found
    assert any("tracehouse_bench.cli imports the surface tracehouse.cli.output" in v for v in found), found
    assert not any(v.startswith("tracehouse.bench.concurrent_writes") for v in found), found
    graph = importgraph.imports(importgraph.modules())
    assert "tracehouse_bench.bench_all" in graph  # the suite's modules are read too
