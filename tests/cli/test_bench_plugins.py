"""`tracehouse bench` commands and `bench write` peers of other distributions, through entry points:
the benchmark suite (bench-suite/, installed by `make setup`) adds `bench all`, `bench tsbs` and the
server peers so, as a third party's package would; without the suite, asking for one of them says
how to install it and the rest of tracehouse's benches run as before."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from importlib import metadata

import pytest

from helpers import child_env
from tracehouse.bench import concurrent_writes, write_systems
from tracehouse.cli import command as cli

BENCH = '''
"""A third party's benchmark: `tracehouse bench hello`."""
import json


def cmd_hello(args):
    print(json.dumps({"hello": args.who}))
    return 0


def register(commands):
    sp = commands.bench("hello", cmd_hello, help="says hello (a plugin's benchmark)")
    sp.add_argument("--who", default="world")
'''


@pytest.fixture
def bench_plugin(tmp_path):
    """A package 'thbench' 0.3 as pip would leave it, declaring `hello` under `tracehouse.bench`."""
    root = tmp_path / "site"
    root.mkdir()
    (root / "thbench.py").write_text(BENCH)
    di = root / "thbench-0.3.dist-info"
    di.mkdir()
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: thbench\nVersion: 0.3\n")
    (di / "entry_points.txt").write_text(
        textwrap.dedent("""
        [tracehouse.bench]
        hello = thbench
        ingest = thbench
    """)
    )
    return root


def _cli(site, *argv: str) -> subprocess.CompletedProcess:
    env = child_env()
    env["PYTHONPATH"] = f"{site}:{env.get('PYTHONPATH', '')}"
    return subprocess.run(
        [sys.executable, "-m", "tracehouse.cli", *argv], capture_output=True, text=True, env=env, timeout=120
    )


def test_a_benchmark_of_another_distribution_runs_as_a_bench_command(bench_plugin):
    r = _cli(bench_plugin, "bench", "hello", "--who", "plugin", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"hello": "plugin"}
    r = _cli(bench_plugin, "bench", "--help")
    assert r.returncode == 0 and "says hello" in r.stdout and " ingest " in r.stdout
    # A plugin naming one of ours does not replace it: `bench ingest` is still ours.
    r = _cli(bench_plugin, "bench", "ingest", "--help")
    assert r.returncode == 0 and "--events" in r.stdout, r.stdout


def test_the_suite_adds_bench_all_and_tsbs_and_the_server_peers():
    """`make setup` installs the benchmark suite: its commands and peers are found by name."""
    assert {"all", "tsbs"} <= {ep.name for ep in metadata.entry_points(group=cli.BENCH_GROUP)}
    p = cli.build_parser(["bench", "all", "--help"])
    sub = next(a for a in p._actions if a.__class__.__name__ == "_SubParsersAction")
    bench_sub = next(a for a in sub.choices["bench"]._actions if a.__class__.__name__ == "_SubParsersAction")
    assert "--quick" in bench_sub.choices["all"].format_help()
    for name, cls in (
        ("questdb", "QuestDB"),
        ("questdb-sync", "QuestDBSync"),
        ("postgres-copy", "Postgres"),
        ("mariadb", "MariaDB"),
    ):
        found = write_systems.system(name)
        assert found.__name__ == cls and found.__module__.startswith("tracehouse_bench.servers."), name
    assert set(write_systems.SUITE_PEERS) <= set(write_systems.names())


@pytest.fixture
def without_the_suite(monkeypatch):
    """This process as it is where the suite is not installed: its entry points are not there."""
    real = metadata.entry_points

    def entry_points(**kw):
        return [ep for ep in real(**kw) if ep.value.split(".")[0] != "tracehouse_bench"]

    monkeypatch.setattr(metadata, "entry_points", entry_points)


def test_without_the_suite_bench_all_says_how_to_install_it(without_the_suite, capsys):
    assert cli.main(["bench", "all", "--quick", "--json"]) == 2
    out = capsys.readouterr()
    assert json.loads(out.out)["kind"] == "BadInput"
    assert "pip install ./bench-suite" in out.err and "benchmark suite" in out.err
    with pytest.raises(SystemExit):
        cli.main(["bench", "--help"])
    listing = capsys.readouterr().out
    assert "all" in listing and "not installed" in listing and "ingest" in listing


def test_without_the_suite_bench_write_skips_its_peers_and_says_why(without_the_suite, tmp_path):
    with pytest.raises(write_systems.Unavailable, match="pip install ./bench-suite"):
        write_systems.system("questdb")
    with pytest.raises(ValueError, match="unknown system 'nope'"):
        write_systems.system("nope")
    r = concurrent_writes.run(
        systems=("sqlite", "questdb", "postgres-copy"),
        writers=(2,),
        batches=(100,),
        seconds=0.2,
        min_runs=2,
        max_runs=2,
        workdir=str(tmp_path),
    )
    assert [c["system"] for c in r["cells"]] == ["sqlite"] and r["cells"][0]["rows_per_s"] > 0
    assert set(r["skipped"]) == {"questdb", "postgres-copy"}
    assert all("pip install ./bench-suite" in why for why in r["skipped"].values())
