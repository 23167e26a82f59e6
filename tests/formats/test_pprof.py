"""The pprof format and exporter: Go's own CPU profiles imported as stack samples, and any sampled or
span trace exported as a profile that `go tool pprof` reads back with the same numbers.

The golden case (tests/formats/pprof/cpu/) is a real profile of tests/formats/pprof/burn.go; here:
the analyses over the imported samples against SQL, `go tool pprof -top` on the original and on
our export of its import listing the same functions with the same flat and cumulative values
and sample counts, the export of a perf trace and of a span trace (Chrome) checked the same way
against our own SQL and call tree, a fresh profile made by the test, bad input named by file,
and the example queries. Random bytes and chunking: tests/formats/test_native_fuzz.py.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

import tracehouse
from helpers import child_env
from tracehouse import _core
from tracehouse.cli import main
from tracehouse.errors import BadInput
from tracehouse.formats import registry
from tracehouse.formats.pprof import importer as pprof_importer

HERE = Path(__file__).parent
CPU = HERE / "pprof" / "cpu" / "input"
GO = shutil.which("go")
needs_go = pytest.mark.skipif(GO is None, reason="go is not installed: go tool pprof reads the profiles")


def top(path: Path, *extra: str) -> dict[str, tuple[int, int]]:
    """`go tool pprof -top` of a profile: {function: (flat, cum)} in the raw unit of the sample index."""
    out = subprocess.run(
        [
            GO,
            "tool",
            "pprof",
            "-top",
            "-nodecount=10000",
            "-nodefraction=0",
            "-edgefraction=0",
            "-unit=ns" if "-sample_index=samples" not in extra else "-unit=count",
            *extra,
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=child_env(),
        check=True,
    ).stdout
    rows: dict[str, tuple[int, int]] = {}
    body = False
    for line in out.splitlines():
        if line.strip().startswith("flat"):
            body = True
            continue
        if body and line.strip():
            f = line.split(None, 5)
            rows[f[5]] = (_num(f[0]), _num(f[3]))
    return rows


def _num(s: str) -> int:
    for unit in ("ns", "s", "ms", "us"):
        if s.endswith(unit) and s[: -len(unit)].replace(".", "").isdigit():
            return int(round(float(s[: -len(unit)]) * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[unit]))
    return int(float(s))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = tracehouse.open(tmp_path_factory.mktemp("pprof") / "store")
    pprof_importer.import_file(s, CPU, "cpu")
    s.flush()
    yield s
    s.close()


def test_sniffed_as_pprof_and_nothing_else_takes_it():
    assert registry.sniff(CPU) == "pprof"
    from tracehouse.formats.parser_loader import head_bytes

    head = head_bytes(CPU.read_bytes()[:65536])
    assert [n for n, imp in registry.importers().items() if imp.sniff(head)] == ["pprof"]


def test_samples_are_go_s_stacks_and_values(store):
    rows = store.sql('SELECT stack, leaf, labels, value, count, "values" FROM cpu.sample').to_pylist()
    assert rows and all(r["stack"].startswith("runtime.main;main.main") for r in rows)
    assert all(r["value"] == r["count"] * 10_000_000 for r in rows)  # 100 Hz: 10 ms a sample
    assert all(r["values"] == f"samples/count={r['count']},cpu/nanoseconds={r['value']}" for r in rows)
    warm = [r for r in rows if "main.warm" in r["stack"]]
    assert warm and all(r["labels"] == "phase=warm" for r in warm)
    assert all(r["labels"] is None for r in rows if "main.hot" in r["stack"])
    assert store.producers("cpu")[0]["name"] == "burn"


def test_flame_tree_density_and_stats_read_the_samples(store, capsys):
    want = {
        r["stack"]: r["w"] for r in store.sql("SELECT stack, sum(value) AS w FROM cpu.sample GROUP BY 1").to_pylist()
    }
    assert main(["--store", str(store.path), "analyze", "flame", "cpu"]) == 0
    got = {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in capsys.readouterr().out.splitlines()}
    assert got == want
    n = store.sql("SELECT count(*) AS n FROM cpu.sample").column("n")[0].as_py()
    assert main(["--store", str(store.path), "analyze", "density", "cpu", "--bins", "2", "--json"]) == 0
    assert sum(b["events"] for b in json.loads(capsys.readouterr().out)["rows"]) == n
    assert main(["--store", str(store.path), "analyze", "stats", "cpu", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"]


def test_example_queries_of_the_format_run(store):
    from tracehouse.server.ui import console

    mine = [e for e in console.examples(store, "cpu") if e["format"] == "pprof"]
    assert len(mine) >= 3
    for e in mine:
        store.sql(e["sql"])


@needs_go
def test_export_of_the_import_reads_in_go_tool_pprof_as_the_original(store, tmp_path):
    out = tmp_path / "cpu.pb.gz"
    assert main(["--store", str(store.path), "export", "cpu", "--format", "pprof", "--out", str(out), "--json"]) == 0
    assert top(out) == top(CPU)
    assert top(out, "-sample_index=samples") == top(CPU, "-sample_index=samples")
    assert len(top(CPU)) >= 5


@needs_go
def test_a_fresh_go_profile_imports_with_go_s_numbers(tmp_path):
    """A profile the test has Go write now (not the committed one): our rows sum to what pprof says."""
    prof = tmp_path / "fresh.pprof"
    subprocess.run(
        [GO, "run", str(HERE / "pprof" / "burn.go"), str(prof)],
        check=True,
        timeout=300,
        cwd=tmp_path,
        env={**child_env(), "GO111MODULE": "off", "GOCACHE": os.environ.get("GOCACHE", str(tmp_path / "gocache"))},
    )
    with tracehouse.open(tmp_path / "s") as s:
        pprof_importer.import_file(s, prof, "fresh")
        flat = {
            r["leaf"]: r["v"] for r in s.sql("SELECT leaf, sum(value) AS v FROM fresh.sample GROUP BY 1").to_pylist()
        }
    assert {k: v for k, v in ((k, v[0]) for k, v in top(prof).items()) if v} == flat


@needs_go
def test_export_of_a_perf_trace_lists_its_hottest_functions_and_counts(tmp_path):
    with tracehouse.open(tmp_path / "s") as s:
        from tracehouse.formats.perf import importer as perf_importer

        perf_importer.import_file(s, HERE / "perf" / "threads" / "input", "burn")
        want = {
            r["leaf"]: (r["n"], r["w"])
            for r in s.sql("SELECT leaf, count(*) AS n, sum(period) AS w FROM burn.sample GROUP BY 1").to_pylist()
        }
    out = tmp_path / "burn.pb.gz"
    assert main(["--store", str(tmp_path / "s"), "export", "burn", "--format", "pprof", "--out", str(out)]) == 0
    counts, weights = top(out, "-sample_index=samples"), top(out)
    assert {k: v[0] for k, v in counts.items() if v[0]} == {k: n for k, (n, _) in want.items()}
    assert {k: v[0] for k, v in weights.items() if v[0]} == {k: w for k, (_, w) in want.items()}


@needs_go
def test_export_of_a_span_trace_is_its_call_tree(tmp_path, capsys):
    """Chrome slices: pprof's flat per function is the spans' self time, its cum the time under them."""
    case = sorted((HERE / "chrome").glob("*/input"))[0]
    with tracehouse.open(tmp_path / "s"):
        pass
    assert main(["--store", str(tmp_path / "s"), "import", "chrome", str(case), "--name", "web"]) == 0
    assert main(["--store", str(tmp_path / "s"), "analyze", "tree", "web", "--json"]) == 0
    capsys.readouterr()
    with tracehouse.open(tmp_path / "s", readonly=True) as s:
        from tracehouse.analysis import pprof_export

        stacks, vals, types = pprof_export.profile_of(s, "web")
    self_by_fn: dict[str, int] = {}
    for st, (_, ns) in zip(stacks, vals):
        leaf = st.rsplit(";", 1)[-1]
        self_by_fn[leaf] = self_by_fn.get(leaf, 0) + ns
    out = tmp_path / "web.pb.gz"
    assert main(["--store", str(tmp_path / "s"), "export", "web", "--format", "pprof", "--out", str(out)]) == 0
    assert types == [("spans", "count"), ("time", "nanoseconds")]
    got = top(out)
    assert {k: v[0] for k, v in got.items() if v[0]} == {k: v for k, v in self_by_fn.items() if v}


def test_damaged_profiles_are_named_by_file(tmp_path):
    bad = tmp_path / "cut.pb.gz"
    raw = gzip.decompress(CPU.read_bytes())
    bad.write_bytes(gzip.compress(raw[: len(raw) // 2]))
    with tracehouse.open(tmp_path / "s") as s:
        with pytest.raises(BadInput) as e:
            pprof_importer.import_file(s, bad, "cut", strict=True)
        assert "not a pprof profile" in str(e.value) and "cut.pb.gz" in str(e.value)
        assert "cut" not in s.traces_names() if hasattr(s, "traces_names") else True


# -- samples made rows one batch at a time ----------------------------------------------------------

_frame = hst.sampled_from(["main", "a", "b;c", "runtime.mallocgc", "x" * 40])


def _rows(data: bytes, batch_rows: int, strict: bool = False):
    p = _core.NativeParser("pprof", strict=strict, batch_rows=batch_rows)
    p.feed(data)
    batches = list(p.finish())
    sizes = [b.num_rows for _, b in batches]
    while more := p.drain():
        batches += more
        sizes += [b.num_rows for _, b in more]
    rows = [r for _, b in batches for r in b.to_pylist()]
    return rows, sizes, p.stats


@settings(max_examples=60, deadline=None)
@given(
    hst.lists(hst.lists(_frame, min_size=1, max_size=6).map(";".join), min_size=0, max_size=40),
    hst.integers(1, 9),
    hst.integers(0, 2000),
    hst.integers(0, 255),
)
def test_issue34_samples_in_bounded_batches_whatever_the_batch_size_and_a_damaged_byte(stacks, batch_rows, at, byte):
    """Every sample becomes one row, in batches of at most `batch_rows`, the same rows whatever the
    batch size; a byte changed anywhere never crashes the parser, and the samples are then rows or
    rejects, never more than were written."""
    values = [[i + 1] for i in range(len(stacks))]
    data = _core.pprof_encode(stacks, values, [("samples", "count")], "prog", 7, 9)
    rows, sizes, stats = _rows(data, batch_rows)
    assert [r["value"] for r in rows] == [v[0] for v in values] and stats["rejected"] == 0
    assert [r["stack"] for r in rows] == stacks
    assert all(0 < n <= batch_rows for n in sizes)
    assert rows == _rows(data, 1000)[0]
    if data:
        bad = bytearray(data)
        bad[at % len(bad)] = byte
        for strict in (False, True):
            got, sizes, stats = _rows(bytes(bad), batch_rows, strict)
            assert len(got) == stats["samples"] <= len(stacks)
            assert all(0 < n <= batch_rows for n in sizes)
