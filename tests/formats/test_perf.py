"""The perf format: `perf script` output imported, read by the analyses like any trace, recorded live.

The golden cases (tests/formats/perf/) hold real captures of tests/formats/perf/burn.c; here:
the analyses (flame graph, call tree, density, statistics, the web UI's flame graph) over the
imported samples against plain SQL over the same rows, bad lines named by file:line, pipes,
the Chrome export's names, the parser under random bytes and any chunking (hypothesis), and a
live `perf record` + `perf script` + import of a program recorded by the test (skipped, with
the reason, where perf cannot record).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracehouse
from helpers import child_env
from helpers.tracers import perf_cannot_record
from tracehouse import _core
from tracehouse.analysis import samples
from tracehouse.cli import main
from tracehouse.errors import BadInput
from tracehouse.formats import registry
from tracehouse.formats.perf import importer as perf_importer

HERE = Path(__file__).parent / "perf"
THREADS = HERE / "threads" / "input"
TRACEPOINTS = HERE / "tracepoints" / "input"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = tracehouse.open(tmp_path_factory.mktemp("perf") / "store")
    perf_importer.import_file(s, THREADS, "burn")
    perf_importer.import_file(s, TRACEPOINTS, "tp")
    s.flush()
    yield s
    s.close()


def test_sniffed_as_perf_and_nothing_else_takes_it():
    for p in (THREADS, TRACEPOINTS, HERE / "processes" / "input"):
        assert registry.sniff(p) == "perf"
    head = THREADS.read_bytes()[:65536]
    assert [n for n, imp in registry.importers().items() if imp.sniff(head)] == ["perf"]


def test_flame_and_tree_are_the_stacks_grouped(store, capsys):
    """`analyze flame` prints the folded stacks: each distinct stack with the sum of its samples'
    periods, as a GROUP BY over the rows says; `tree` has every prefix of them as a node."""
    want = {
        r["stack"]: r["w"]
        for r in store.sql("SELECT stack, sum(period) AS w FROM burn.sample GROUP BY stack").to_pylist()
    }
    assert main(["--store", str(store.path), "analyze", "flame", "burn"]) == 0
    got = {}
    for line in capsys.readouterr().out.splitlines():
        stack, value = line.rsplit(" ", 1)
        got[stack] = int(value)
    assert got == want and len(got) == 5
    assert main(["--store", str(store.path), "analyze", "tree", "burn", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    roots = {r["name"]: r for r in rows if r["parent"] == -1}
    assert set(roots) == {"start_thread", "__libc_start_call_main"}
    assert sum(r["calls"] for r in roots.values()) == 162
    assert sum(r["total_ns"] for r in roots.values()) == sum(want.values())
    assert sum(r["self_ns"] for r in rows) == sum(want.values())


def test_one_thread_and_a_time_range(store):
    t = store.sql("SELECT min(ts) AS a, max(ts) AS b FROM burn.sample").to_pylist()[0]
    mid = (t["a"] + t["b"]) // 2
    tree = samples.call_tree(store, "burn", producers=[1], start=mid)
    n = store.sql(f"SELECT count(*) AS n FROM burn.sample WHERE producer = 1 AND ts >= {mid}").column("n")[0].as_py()
    assert tree.filter(tree.column("depth").to_numpy() == 0).column("calls").to_pylist() == [n]
    assert tree.column("name").to_pylist()[0] == "start_thread"


def test_density_and_stats_read_samples_like_any_events(store, capsys):
    assert main(["--store", str(store.path), "analyze", "density", "burn", "--bins", "4", "--json"]) == 0
    bins = json.loads(capsys.readouterr().out)["rows"]
    assert sum(b["events"] for b in bins) == 162
    assert main(["--store", str(store.path), "analyze", "stats", "burn", "--by", "producer", "--json"]) == 0
    by = {r["producer"]: r["events"] for r in json.loads(capsys.readouterr().out)["rows"]}
    want = {
        r["producer"]: r["n"]
        for r in store.sql("SELECT producer, count(*) AS n FROM burn.sample GROUP BY producer").to_pylist()
    }
    assert {int(k): v for k, v in by.items()} == want


def test_the_web_ui_flame_graph_of_samples(store):
    from tracehouse.server.ui.app import UiState, build_app
    from tracehouse.server.ui.bridge import call_app

    state = UiState(store, token=None, run_query=lambda q: store.sql(q))
    app = build_app(state)
    try:

        def get(path, params):
            status, hdrs, out = asyncio.run(call_app(app, "GET", path, urlencode(params), [], b""))
            return status, json.loads(out)

        st, d = get("/api/ui/flame", {"trace": "burn", "min_share": "0"})
        assert st == 200 and d["samples"] == 162
        by_name = {}
        for n in d["nodes"]:
            by_name.setdefault(n["name"], 0)
            by_name[n["name"]] += n["self"]
        leafs = {
            r["leaf"]: r["w"]
            for r in store.sql("SELECT leaf, sum(period) AS w FROM burn.sample GROUP BY leaf").to_pylist()
        }
        assert {k: v for k, v in by_name.items() if v} == leafs
        st, d = get("/api/ui/flame", {"trace": "burn", "producers": "0"})
        assert st == 200 and d["samples"] == 53
        st, f = get("/api/ui/frame", {"trace": "burn", "node": d["nodes"][0]["id"]})
        assert st == 200 and f["rows"] == [] and "sample" in f["why"]
    finally:
        state.close()


def test_example_queries_of_the_format_run(store):
    from tracehouse.server.ui import console

    ex = console.examples(store, "burn")
    mine = [e for e in ex if e["format"] == "perf"]
    assert len(mine) >= 4
    for e in mine:
        store.sql(e["sql"])


def test_chrome_export_names_samples_by_their_leaf(store, tmp_path):
    out = tmp_path / "burn.json"
    assert main(["--store", str(store.path), "export", "burn", "--format", "chrome", "--out", str(out), "--json"]) == 0
    events = [e for e in json.loads(out.read_text())["traceEvents"] if e.get("ph") == "i"]
    assert len(events) == 162 and {e["name"] for e in events} == {"leaf_div", "leaf_mul", "finish_task_switch.isra.0"}


def test_bad_lines_are_named_by_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    text = THREADS.read_text().splitlines()
    text.insert(6, "this is not perf output")
    bad.write_text("\n".join(text) + "\n")
    s = str(tmp_path / "s")
    assert main(["--store", s, "import", "perf", str(bad), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["rejected"] == 1 and rep["first_rejected"][0]["line"] == 7 and rep["events"] == 162
    assert main(["--store", s, "import", "perf", str(bad), "--name", "strict", "--strict"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:7" in err and "COMM PID" in err
    with tracehouse.open(s, readonly=True) as st_:
        assert [t.name for t in st_.traces()] == ["bad"]  # the strict one left nothing
    capsys.readouterr()
    # perf.data itself (binary) is refused whole, with what to run instead.
    data = tmp_path / "perf.data"
    data.write_bytes(b"PERFILE2" + bytes(range(256)) * 40)
    assert main(["--store", s, "import", "perf", str(data)]) == 2


def test_gzip_and_a_pipe(tmp_path):
    import gzip

    gz = tmp_path / "burn.txt.gz"
    gz.write_bytes(gzip.compress(THREADS.read_bytes()))
    s = tmp_path / "s"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "tracehouse.cli",
            "--store",
            str(s),
            "import",
            "perf",
            str(gz),
            "--name",
            "gz",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )
    assert r.returncode == 0 and json.loads(r.stdout)["events"] == 162, r.stderr
    with open(THREADS, "rb") as f:
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "tracehouse.cli",
                "--store",
                str(s),
                "import",
                "perf",
                "-",
                "--name",
                "piped",
                "--json",
            ],
            stdin=f,
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=120,
        )
    assert r.returncode == 0, r.stderr
    with tracehouse.open(s, readonly=True) as st_:
        q = "SELECT stack, count(*) AS n FROM {}.sample GROUP BY ALL ORDER BY ALL"
        assert st_.sql(q.format("gz")).equals(st_.sql(q.format("piped")))


# -- the parser under random input ---------------------------------------------------------------

perf_lines = st.one_of(
    st.binary(max_size=30),
    st.sampled_from(
        [
            b"",
            b"\t",
            b"# x",
            b"python3 1/2 [000] 1.5: 10 cpu-clock:ppp:",
            b"a 3 2.000001: sched:s: x=1",
            b"\tffff f+0x1 (/x)",
            b"\t0 [unknown] ([unknown])",
            b"\tzz not a frame",
            b"x 1 1.0: PERF_RECORD_X:",
            b"c 9 99999999999.999999999: 1 cycles:u:",
            b"c 9 1.0: 99999999999999999999 cycles:",
            b"\t12 a (b (c)",
            b"\t12 a) (b)",
            b"\t12 (x)",
            "comm é 5 1.1: cycles: \t1 ü+0x2 (/é)".encode(),
        ]
    ),
)


def _parse(data: bytes, cuts: list[int], strict: bool):
    p = _core.NativeParser("perf", strict=strict, batch_rows=3)
    rows, prev = [], 0
    for c in sorted(set(min(c, len(data)) for c in cuts)) + [len(data)]:
        rows += p.feed(data[prev:c])
        prev = c
    rows += p.finish()
    out = {}
    for t, b in rows:
        out.setdefault(t, []).extend(b.to_pylist())
    return out, p.stats, p.problems, p.fatal, p.producers()


@settings(max_examples=200, deadline=None)
@given(st.lists(perf_lines, max_size=25), st.lists(st.integers(0, 600), max_size=6), st.booleans())
def test_never_crashes_and_any_chunking_gives_the_same_trace(lines, cuts, strict):
    data = b"\n".join(lines)
    assert _parse(data, cuts, strict) == _parse(data, [], strict)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=2000), st.booleans())
def test_random_bytes(data, strict):
    _parse(data, [len(data) // 3], strict)


# -- a live recording --------------------------------------------------------------------------------


def test_live_record_script_and_import(tmp_path):
    why = perf_cannot_record()
    if why:
        pytest.skip(why)
    exe = tmp_path / "burn"
    subprocess.run(
        ["cc", "-O0", "-g", "-fno-omit-frame-pointer", "-pthread", "-o", str(exe), str(HERE / "burn.c")],
        check=True,
        timeout=120,
    )
    data = tmp_path / "perf.data"
    subprocess.run(
        ["perf", "record", "-F", "999", "-g", "--sample-cpu", "-o", str(data), "-q", "--", str(exe)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    text = tmp_path / "perf.txt"
    with open(text, "wb") as f:
        subprocess.run(["perf", "script", "-i", str(data), "-F", "+pid"], stdout=f, check=True, timeout=120)
    s = tracehouse.open(tmp_path / "s")
    try:
        rep = perf_importer.import_file(s, text, "live", strict=True)
        assert rep.events > 20 and rep.rejected == 0
        tree = samples.call_tree(s, "live")
        names = set(tree.column("name").to_pylist())
        # The program's own functions are in the stacks, under main and the thread's start.
        assert {"main", "worker", "compute"} <= names and ({"leaf_mul", "leaf_div"} & names)
        procs = s.sql("SELECT count(*) AS n FROM th.producers WHERE trace = 'live' AND kind = 'process'")
        assert procs.column("n")[0].as_py() >= 1
    finally:
        s.close()
    with pytest.raises(BadInput), tracehouse.open(tmp_path / "s2") as s2:
        perf_importer.import_file(s2, data, "binary")  # perf.data itself, not its script
