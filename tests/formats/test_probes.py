"""bpftrace and SystemTap output: printf patterns, start/end spans (seed 004), aggregates as result tables, bad input, fuzz."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracehouse
from helpers.paths import DATA
from tracehouse import _core
from tracehouse.cli import command as cli
from tracehouse.errors import BadInput
from tracehouse.formats import registry
from tracehouse.formats.bpftrace import importer as bpftrace
from tracehouse.formats.stap import importer as stap

STAP = DATA / "hyrise_jobs.stap.txt"
BPF = DATA / "hyrise_jobs.bpftrace.json"
BPF_TEXT = DATA / "bpftrace_text.txt"
PATTERNS = ["job_start:job_start {ts} {tid} {task:hex}", "job_end:job_end {ts} {tid} {task:hex}"]
SPANS = ["job=job_start,job_end,task"]
# The seven jobs of the run, as (thread, task pointer, start us, duration us) — see the files.
JOBS = [
    (101, 0x55D0C0A01000, 1000, 1),
    (102, 0x55D0C0A02000, 1000.5, 3),
    (101, 0x55D0C0A03000, 1010, 5),
    (102, 0x55D0C0A01000, 1020, 12),
    (101, 0x55D0C0A04000, 1020, 12),
    (102, 0x55D0C0A05000, 1040, 40),
    (101, 0x55D0C0A06000, 1100, 100000),
]
BASE = 5_000_000_000_000


def tids(store, trace):
    return {p["id"]: p["attrs"].get("tid") for p in store.producers(trace)}


@pytest.mark.parametrize("imp, path", [(stap, STAP), (bpftrace, BPF)])
def test_hyrise_jobs_become_spans(store, imp, path):
    rep = imp.import_file(store, path, "jobs", pattern=PATTERNS, span=SPANS)
    assert rep.rejected == 0
    assert rep.by_type == {"job": 7, "job_start": 1, "job_end": 1, **({"printf": 1} if imp is stap else {})}
    assert rep.details["spans"] == {"job": {"matched": 7, "unmatched_begin": 1, "unmatched_end": 1}}
    t = tids(store, "jobs")
    got = [
        (t[r["producer"]], r["task"], r["ts"], r["dur"])
        for r in store.sql('SELECT producer, task, ts, dur FROM "jobs".job ORDER BY ts, producer').to_pylist()
    ]
    want = sorted([(tid, ptr, BASE + int(s * 1000), d * 1000) for tid, ptr, s, d in JOBS], key=lambda r: (r[2], r[0]))
    assert got == want
    # The reused task pointer 0x55d0c0a01000 closes the job that started on it last.
    left = store.sql('SELECT ts, task FROM "jobs".job_start').to_pylist()
    assert left == [{"ts": BASE + 200_000_000, "task": 0x55D0C0A07000}]
    assert store.sql('SELECT task FROM "jobs".job_end').column(0).to_pylist() == [0x55D0C0A00F00]
    assert sorted(v for v in t.values() if v) == [101, 102, 103]
    # Seed 004's question: the share of jobs under 10 us.
    assert store.sql('SELECT avg((dur < 10000)::INT) FROM "jobs".job').column(0)[0].as_py() == pytest.approx(3 / 7)


def test_stap_histogram_with_elision(store):
    stap.import_file(store, STAP, "s")
    [res] = store.results(trace="s")
    assert (res["kind"], res["name"], res["tool"], res["params"]["kind"]) == (
        "table",
        "job durations (us)",
        "stap",
        "hist",
    )
    rows = store.result_table(res["id"]).to_pylist()
    assert [(r["lo"], r["hi"], r["count"], r["elided"]) for r in rows] == [
        (0, 1, 0, False),
        (1, 2, 1, False),
        (2, 4, 1, False),
        (4, 8, 1, False),
        (8, 16, 2, False),
        (16, 32, 0, False),
        (32, 64, 1, False),
        (64, 128, 0, False),
        (128, 256, 0, False),
        (256, 16384, 0, True),
        (16384, 32768, 0, False),
        (32768, 65536, 0, False),
        (65536, 131072, 1, False),
        (131072, 262144, 0, False),
        (262144, 524288, 0, False),
    ]
    # The table agrees with the printf lines: 7 jobs, bucket by bucket.
    assert sum(r["count"] for r in rows) == len(JOBS)
    for _, _, _, d in JOBS:
        assert sum(r["count"] for r in rows if r["lo"] <= d < r["hi"]) >= 1


def test_bpftrace_aggregates_are_results(store):
    rep = bpftrace.import_file(store, BPF, "b", pattern=PATTERNS, span=SPANS)
    res = {r["name"]: r for r in store.results(trace="b")}
    assert set(res) == {"@us", "@jobs", "@dur"}
    us = store.result_table(res["@us"]["id"]).to_pylist()
    assert (us[0]["lo"], us[0]["hi"], us[-1]["lo"], us[-1]["hi"]) == (1, 2, 65536, 131072)
    assert sum(r["count"] for r in us) == 7
    jobs = store.result_table(res["@jobs"]["id"]).to_pylist()
    assert {r["key"]: r["value"] for r in jobs} == {"101": 4, "102": 3}
    dur = store.result_table(res["@dur"]["id"]).to_pylist()
    assert (dur[0]["count"], dur[0]["total"]) == (7, sum(d for *_, d in JOBS))
    assert rep.details["attached_probes"] == 2


def test_bpftrace_text_output(store):
    rep = bpftrace.import_file(store, BPF_TEXT, "t")
    assert rep.by_type == {"printf": 2}
    res = {r["name"]: store.result_table(r["id"]).to_pylist() for r in store.results(trace="t")}
    assert [(r["lo"], r["hi"], r["count"]) for r in res["@usecs"]] == [
        (0, 1, 3),
        (1, 2, 0),
        (2, 4, 1),
        (4, 8, 31),
        (1024, 2048, 2),
        (2048, None, 1),
    ]
    assert [(r["key"], r["lo"], r["hi"]) for r in res["@lat"]] == [("sshd", None, 0), ("sshd", 0, 10)]
    assert {r["key"]: r["value"] for r in res["@count"]} == {"read": 120, "write, 3": 7}
    assert res["@name"][0]["text"] == "hello"
    assert (res["@st"][0]["count"], res["@st"][0]["average"], res["@st"][0]["total"]) == (4, 25, 100)


def test_no_pattern_keeps_printf_lines(store):
    rep = stap.import_file(store, STAP, "raw")
    assert rep.by_type == {"printf": 2 * len(JOBS) + 2 + 1}  # job lines, the two unmatched, the title
    first = store.sql('SELECT text, line FROM "raw".printf ORDER BY line LIMIT 1').to_pylist()[0]
    assert first == {"text": "job_end 5000000999000 103 0x55d0c0a00f00", "line": 1}


def test_cli_import_with_patterns(store_path, capsys):
    args = ["--store", str(store_path), "import", "stap", str(STAP), "--name", "c", "--json"]
    for p in PATTERNS:
        args += ["--pattern", p]
    assert cli.main(args + ["--span", SPANS[0]]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["by_type"]["job"] == 7
    assert (
        cli.main(["--store", str(store_path), "import", "chrome", str(DATA / "node_trace.json"), "--pattern", "x:y"])
        == 2
    )
    assert "does not apply to the chrome importer" in capsys.readouterr().err


def test_bad_patterns_and_lines(store, tmp_path):
    with pytest.raises(BadInput, match="unknown type"):
        stap.import_file(store, STAP, "x", pattern=["a:{v:weird}"])
    with pytest.raises(BadInput, match="no pattern named"):
        stap.import_file(store, STAP, "x", pattern=PATTERNS, span=["job=job_start,nope,task"])
    bad = tmp_path / "bad.json"
    bad.write_text(
        BPF.read_text()
        .replace('"job_start 5000001010000', '"job_start 99999999999999999999', 1)
        .replace('{"type": "map"', '{"type": broken', 1)
    )
    rep = bpftrace.import_file(store, bad, "bad", pattern=PATTERNS, span=SPANS)
    assert rep.rejected == 2
    assert [r.line for r in rep.first_rejected] == [7, 19]
    assert "field ts" in rep.first_rejected[0].reason
    with pytest.raises(BadInput) as e:
        bpftrace.import_file(store, bad, "strict", pattern=PATTERNS, span=SPANS, strict=True)
    assert str(e.value).startswith(f"{bad}:7: ")
    assert [t.name for t in store.traces()] == ["bad"]


BT = DATA / "bpftrace"  # real `bpftrace -f json` captures (see its README.md)


def results_of(store, trace):
    return {
        r["name"]: (r["params"]["kind"], store.result_table(r["id"]).to_pylist()) for r in store.results(trace=trace)
    }


def test_real_bpftrace_uprobe_capture(store):
    """bpftrace 0.17 tracing a real program's job_start/job_end functions with uprobes: 100
    jobs on 4 threads, and the avg() map it printed as a `stats` record (dropped before)."""
    rep = bpftrace.import_file(store, BT / "jobs.json", "jobs", pattern=PATTERNS, span=SPANS)
    assert rep.rejected == 0 and rep.by_type == {"job": 100}
    assert rep.details["spans"]["job"] == {"matched": 100, "unmatched_begin": 0, "unmatched_end": 0}
    per = store.sql("SELECT producer, count(*) AS n FROM jobs.job GROUP BY producer").to_pylist()
    assert sorted(r["n"] for r in per) == [25, 25, 25, 25]
    res = results_of(store, "jobs")
    assert res["@avg_us"] == (
        "stats",
        [{"map": "@avg_us", "key": None, "count": None, "average": 1022, "total": None, "line": 204}],
    )
    # The hist counts the same 100 jobs, and its average matches the spans' (within its rounding).
    assert sum(r["count"] for r in res["@us"][1]) == 100
    avg_us = store.sql("SELECT avg(dur) / 1000 FROM jobs.job").column(0)[0].as_py()
    assert abs(avg_us - 1022) < 5
    assert {r["key"]: r["value"] for r in res["@per_thread"][1]} == {
        str(t): 25 for t in tids(store, "jobs").values() if t
    }


def test_real_bpftrace_aggregates_only(store, tmp_path, capsys):
    """Regression: an output of only aggregates, with avg() maps (`stats` records of
    numbers), print() values of tuples and an emptied histogram (`{"@z": []}`), imports."""
    path = BT / "aggregates.json"
    assert cli.main(["--store", str(tmp_path / "s"), "import", "bpftrace", str(path), "--name", "agg", "--strict"]) == 0
    capsys.readouterr()
    with tracehouse.open(tmp_path / "s", readonly=True) as s:
        res = results_of(s, "agg")
    assert res["@z"] == ("hist", [])
    assert [(r["key"], r["average"]) for r in res["@a"][1]] == [("x", 10), ("y", 30)]
    assert [(r["key"], r["average"]) for r in res["@avg1"][1]] == [(None, 7)]
    assert [(r["count"], r["average"], r["total"]) for r in res["@s"][1]] == [(2, 6, 12)]
    assert [(r["value"], r["text"]) for r in res["value"][1]] == [(None, '[1,"two"]'), (None, "bpftrace"), (42, None)]
    assert res["@tup"][1][0]["text"] == '[1,2,"string"]'
    assert len(res) == 12


def test_tseries_records_are_counter_events(store, tmp_path):
    path = tmp_path / "ts.json"
    path.write_text(
        '{"type": "attached_probes", "count": 1, "data": {"probes": 1}}\n'
        '{"type": "tseries", "data": {"@rate": [{"interval_start":"2025-03-01 12:00:00","value":3},'
        '{"interval_start":"2025-03-01 12:00:01","value":5}]}}\n'
    )
    rep = bpftrace.import_file(store, path, "ts")
    assert rep.by_type == {"tseries": 2}
    assert store.event_types("ts")["tseries"].kind == "counter"
    rows = store.sql("SELECT epoch_ns(make_timestamp(2025, 3, 1, 12, 0, 0)) AS base").column(0)[0].as_py()
    assert store.sql("SELECT ts, map, value FROM ts.tseries ORDER BY ts").to_pylist() == [
        {"ts": rows, "map": "@rate", "value": 3.0},
        {"ts": rows + 1_000_000_000, "map": "@rate", "value": 5.0},
    ]


def test_pretty_printed_json_is_refused_with_a_clear_error(tmp_path, capsys):
    # As bpftrace's own test files hold it (tests/runtime/outputs/stats.json): one record over lines.
    path = tmp_path / "pretty.json"
    path.write_text('{"type": "stats", "data": {\n  "@stats": {"count": 2, "average": 6, "total": 12}\n}}\n')
    assert cli.main(["--store", str(tmp_path / "s"), "import", "bpftrace", str(path), "--name", "p"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:1: a JSON record that continues on the next line (pretty-printed JSON?)" in err
    assert "jq -c" in err


def test_random_bytes_are_refused_not_imported(tmp_path):
    """Regression: 1 MB of random bytes became 4,047 printf events."""
    import random

    path = tmp_path / "noise.bin"
    path.write_bytes(random.Random(7).randbytes(1 << 20))
    with tracehouse.open(tmp_path / "s") as s:
        for imp in (bpftrace, stap):  # the importers themselves (the CLI's sniffer may stop it first)
            with pytest.raises(BadInput) as e:
                imp.import_file(s, path, "n")
            assert str(e.value).startswith(f"{path}:1: binary data, not ")
        assert s.traces() == []


def test_a_line_over_16_mb_is_rejected_not_stored(store, tmp_path):
    path = tmp_path / "big.txt"
    lines = STAP.read_text().splitlines()
    lines.insert(3, "x" * (17 << 20))
    path.write_text("\n".join(lines) + "\n")
    rep = stap.import_file(store, path, "big", pattern=PATTERNS, span=SPANS)
    assert (rep.rejected, rep.first_rejected[0].line, rep.first_rejected[0].reason) == (
        1,
        4,
        "line longer than 16777216 bytes (skipped)",
    )
    assert store.sql("SELECT max(length(text)) FROM big.printf").column(0)[0].as_py() < 100


def test_stap_strict_stops_at_the_first_bad_line(tmp_path, capsys):
    """Regression: `--strict` was ignored by the stap importer: lines that start like a
    --pattern but do not match it, and broken histogram rows, became printf text."""
    lines = STAP.read_text().splitlines()
    bad_at = lines.index("job_end 5000001015000 101 0x55d0c0a03000")
    lines[bad_at] = "job_end 5000001015000 101 0xZZ"
    path = tmp_path / "bad.stap"
    path.write_text("\n".join(lines) + "\n")
    args = ["--store", str(tmp_path / "s"), "import", "stap", str(path), "--name", "b"]
    for p in PATTERNS:
        args += ["--pattern", p]
    assert cli.main(args + ["--strict"]) == 2
    assert f"{path}:{bad_at + 1}: starts like --pattern job_end but does not match it" in capsys.readouterr().err
    assert cli.main(args + ["--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["rejected"] == 1 and rep["first_rejected"][0]["line"] == bad_at + 1
    assert rep["by_type"]["printf"] == 1  # only the table's title


@pytest.mark.skipif(
    __import__("shutil").which("bpftrace") is None or __import__("os").geteuid() != 0, reason="needs bpftrace and root"
)
def test_live_bpftrace_output_imports(tmp_path):
    """When bpftrace runs here, its output of every aggregate kind imports as it did when captured."""
    import subprocess

    prog = (
        'BEGIN { @h = hist(2); @h = hist(1025); @s = stats(2); @s = stats(10); @a["x"] = avg(10); '
        '@z = hist(3); zero(@z); @c["k"] = count(); $t = (1, "two"); print($t); exit(); }'
    )
    r = subprocess.run(["bpftrace", "-f", "json", "-e", prog], capture_output=True, timeout=60)
    if r.returncode != 0 or b'"type"' not in r.stdout:
        pytest.skip(f"bpftrace cannot run here: {r.stderr.decode(errors='replace')[-300:]}")
    path = tmp_path / "live.json"
    path.write_bytes(r.stdout)
    with tracehouse.open(tmp_path / "s") as s:
        bpftrace.import_file(s, path, "live", strict=True)
        res = results_of(s, "live")
    assert res["@z"] == ("hist", [])
    assert [r["average"] for r in res["@a"][1]] == [10]
    assert [(r["count"], r["total"]) for r in res["@s"][1]] == [(2, 12)]
    assert sum(r["count"] for r in res["@h"][1]) == 2


def test_sniffers_name_the_format(tmp_path):
    assert registry.sniff(STAP) == "stap"
    assert registry.sniff(BPF) == "bpftrace"
    assert registry.sniff(BPF_TEXT) == "bpftrace"
    with pytest.raises(BadInput, match="this looks like bpftrace, not stap"):
        registry.importer("stap", BPF)
    with pytest.raises(BadInput, match="this looks like stap, not chrome"):
        registry.importer("chrome", STAP)


lines = st.one_of(
    st.binary(max_size=60),
    st.sampled_from(
        [
            b"job_start 1 2 0x3",
            b"job_end 5 2 0x3",
            b"job_end 0 2 0x3",
            b"value |----- count",
            b"  4 |@@ 2",
            b"~",
            b"@x[a]: 5",
            b"@h:",
            b"[1, 2)   3 |@@@|",
            b"(..., 0) 1 |@|",
            b'{"type": "printf", "data": "job_start 9 1 0x1\\n"}',
            b'{"type": "hist", "data": {"@": [{"min": 1}]}}',
            b'{"type": "map", "data": {"@": {"k": [1]}}}',
            b'{"type": "stats", "data": {"@": {"a": {"count": "x"}}}}',
            b'{"type": 5}',
            b"Attaching 1 probe...",
            b"job_start 99999999999999999999 1 0x1",
            b"\xff\xfe",
        ]
    ),
)


@settings(max_examples=120, deadline=None)
@given(
    st.sampled_from(["bpftrace", "stap"]),
    st.lists(lines, max_size=15),
    st.lists(st.integers(0, 400), max_size=5),
    st.booleans(),
)
def test_probe_parser_never_crashes_whatever_the_chunking(tool, ls, cuts, strict):
    data = b"\n".join(ls)

    def run(cuts):
        p = _core.NativeParser(tool, patterns=PATTERNS, spans=SPANS, strict=strict, batch_rows=3)
        rows, prev = 0, 0
        for c in sorted(set(min(c, len(data)) for c in cuts)) + [len(data)]:
            rows += sum(b.num_rows for _, b in p.feed(data[prev:c]))
            prev = c
        rows += sum(b.num_rows for _, b in p.finish())
        aggs = sum(b.num_rows for _, b in p.results())
        p.producers()
        return rows, aggs, p.stats, p.problems, p.details_json

    assert run(cuts) == run([])


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(lines, min_size=1, max_size=8), st.booleans())
def test_imports_never_half_register(ls, strict):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "f.txt"
        path.write_bytes(b"\n".join(ls) + b"\n" + b"x" * (1 << 20))
        store = tracehouse.open(Path(d) / "s")
        try:
            rep = bpftrace.import_file(store, path, "f", pattern=PATTERNS, span=SPANS, strict=strict)
        except BadInput:
            assert store.traces() == []
        else:
            assert store.sql('SELECT count(*) FROM "f".events').column(0)[0].as_py() == rep.events
        finally:
            store.close()
