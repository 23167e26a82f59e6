"""Chrome Trace Event JSON: import (real Node.js trace, hand-checked sample, every form), bad input, export, round trips."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import tracehouse
from helpers.paths import DATA
from tracehouse.cli import command as cli
from tracehouse.errors import BadInput
from tracehouse.formats import chrome as fmt
from tracehouse.formats import registry
from tracehouse.formats.chrome import exporter as chrome_export
from tracehouse.formats.chrome import importer as chrome_import
from tracehouse.formats.tod.generate import generate_tod

NODE = DATA / "node_trace.json"  # node 20: --trace-event-categories v8,node,node.async_hooks

SAMPLE = [
    {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "browser"}},
    {"name": "process_sort_index", "ph": "M", "pid": 1, "args": {"sort_index": 3}},
    {"name": "thread_name", "ph": "M", "pid": 1, "tid": 7, "args": {"name": "main"}},
    {
        "name": "load",
        "cat": "net",
        "ph": "X",
        "ts": 10.5,
        "dur": 2.25,
        "tts": 3,
        "tdur": 1,
        "pid": 1,
        "tid": 7,
        "args": {"url": "a", "bytes": 100, "ok": True, "t": 1.5, "nested": {"x": [1]}},
    },
    {"name": "outer", "ph": "B", "ts": 20, "pid": 1, "tid": 7, "args": {"depth": 0}},
    {"name": "inner", "ph": "B", "ts": 21, "pid": 1, "tid": 7},
    {"ph": "E", "ts": 22, "pid": 1, "tid": 7, "args": {"result": "r"}},
    {"ph": "E", "ts": 30, "pid": 1, "tid": 7},
    {"ph": "E", "ts": 31, "pid": 1, "tid": 7},
    {"name": "mark", "ph": "i", "s": "g", "ts": 40, "pid": 1, "tid": 7},
    {"name": "mem", "ph": "C", "ts": 50, "pid": 1, "args": {"heap": 10, "stack": 2.5}},
    {"name": "req", "cat": "io", "ph": "b", "id": "0x1", "ts": 60, "pid": 1, "tid": 7, "args": {"u": 1}},
    {"name": "req", "cat": "io", "ph": "n", "id": "0x1", "ts": 61, "pid": 1, "tid": 7},
    {"name": "req", "cat": "io", "ph": "e", "id2": {"global": "0x1"}, "ts": 65, "pid": 2, "tid": 9},
    {"name": "req", "cat": "io", "ph": "e", "id": "0x1", "ts": 66, "pid": 2, "tid": 9},
    {"name": "flow", "cat": "f", "ph": "s", "id": 5, "ts": 70, "pid": 1, "tid": 7},
    {"name": "flow", "cat": "f", "ph": "t", "id": 5, "ts": 72, "pid": 2, "tid": 9},
    {"name": "flow", "cat": "f", "ph": "f", "bp": "e", "id": 5, "ts": 75, "pid": 1, "tid": 7},
    {"name": "cpu", "ph": "P", "ts": 76, "pid": 1, "tid": 7, "sf": 12},
    {"name": "mark2", "ph": "R", "ts": 77, "pid": 1, "tid": 7},
    {"name": "open", "ph": "B", "ts": 80, "pid": 2, "tid": 9},
]


def count(store, sql):
    return store.sql(sql).column(0)[0].as_py()


def write_json(path: Path, events, form="object") -> Path:
    body = json.dumps({"traceEvents": events, "otherData": {"v": 1}} if form == "object" else events)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(body.encode()))
    else:
        path.write_text(body)
    return path


def test_real_node_trace(store):
    """Node's own trace of a small script, checked against a plain json.load of the same file."""
    events = json.loads(NODE.read_text())["traceEvents"]
    by_ph = {}
    for e in events:
        by_ph.setdefault(e["ph"], []).append(e)
    rep = chrome_import.import_file(store, NODE, "node")
    assert rep.rejected == 0
    # X and matched B/E pairs are slices; every B of node's trace is closed by an E on its thread.
    pairs, stack = [], {}
    for e in events:
        if e["ph"] == "B":
            stack.setdefault(e["tid"], []).append(e)
        elif e["ph"] == "E":
            pairs.append((stack[e["tid"]].pop(), e))
    assert len(pairs) == len(by_ph["B"]) == len(by_ph["E"]) == 6
    assert rep.by_type["slice"] == len(by_ph["X"]) + 6
    assert rep.by_type["instant"] == len(by_ph["I"])
    assert rep.by_type["async_slice"] == len(by_ph["b"]) == len(by_ph["e"]) == 5
    names = {e["name"] for e in by_ph["M"]} - {"process_name", "thread_name"}
    assert rep.by_type["other"] == sum(1 for e in by_ph["M"] if e["name"] in names)  # version, node
    assert rep.details == {"records": len(events), "metadata": len(by_ph["M"]) - rep.by_type["other"]}
    # Durations: exact nanoseconds from the microseconds of the file.
    want = sorted([round(e["dur"] * 1000) for e in by_ph["X"]] + [round((e["ts"] - b["ts"]) * 1000) for b, e in pairs])
    got = store.sql('SELECT dur FROM "node".slice ORDER BY dur').column(0).to_pylist()
    assert got == want
    assert (
        count(store, """SELECT dur FROM "node".slice WHERE name = 'fs.sync.read'""") == (2771569110 - 2771568557) * 1000
    )
    assert count(store, """SELECT end_arg_bytesRead FROM "node".slice WHERE name = 'fs.sync.read'""") == 3
    assert count(store, """SELECT arg_filename FROM "node".slice WHERE name = 'ContextifyScript::New'""") == "[eval]"
    # Async: Timeout (0x2) spans from its b to its e.
    assert (
        count(store, """SELECT dur FROM "node".async_slice WHERE name = 'Timeout'""")
        == (2771576408 - 2771551762) * 1000
    )
    # Producers: one process, the six threads of the file, named by the M events.
    prods = store.producers("node")
    threads = {p["attrs"]["tid"]: p["name"] for p in prods if p["kind"] == "thread"}
    want_threads = {e["tid"]: e["args"]["name"] for e in by_ph["M"] if e["name"] == "thread_name"}
    assert threads == want_threads
    assert [p["name"] for p in prods if p["kind"] == "process"] == ["node"]
    assert all(p["parent"] == 0 for p in prods if p["kind"] == "thread")


def test_hand_checked_sample_every_phase(store, tmp_path):
    path = write_json(tmp_path / "s.json", SAMPLE)
    rep = chrome_import.import_file(store, path, "s")
    assert rep.rejected == 0, rep.first_rejected
    assert rep.by_type == {
        "slice": 3,
        "instant": 1,
        "counter": 2,
        "async_slice": 1,
        "async_instant": 1,
        "async_end": 1,
        "flow": 2,
        "sample": 1,
        "other": 1,
        "slice_end": 1,
        "slice_begin": 1,
    }
    assert rep.details["unmatched_end"] == 1 and rep.details["unmatched_begin"] == 1
    rows = store.sql(
        "SELECT name, ts, dur, phase, thread_ts, thread_dur, arg_url, arg_bytes, arg_ok, arg_t, args, "
        'arg_depth, end_arg_result FROM "s".slice ORDER BY ts'
    ).to_pylist()
    assert [(r["name"], r["ts"], r["dur"], r["phase"]) for r in rows] == [
        ("load", 10_500, 2_250, "X"),
        ("outer", 20_000, 10_000, "B"),
        ("inner", 21_000, 1_000, "B"),
    ]
    assert (rows[0]["thread_ts"], rows[0]["thread_dur"]) == (3_000, 1_000)
    assert (rows[0]["arg_url"], rows[0]["arg_bytes"], rows[0]["arg_ok"], rows[0]["arg_t"]) == ("a", 100, True, 1.5)
    assert json.loads(rows[0]["args"]) == {"nested": {"x": [1]}}
    assert rows[1]["arg_depth"] == 0 and rows[2]["end_arg_result"] == "r"
    assert store.sql('SELECT series, value FROM "s".counter ORDER BY series').to_pylist() == [
        {"series": "heap", "value": 10.0},
        {"series": "stack", "value": 2.5},
    ]
    # The e with id2.global "0x1" (a global id, so on any process) closes the b; the next e finds nothing open.
    a = store.sql('SELECT ts, dur, id, id_local, arg_u FROM "s".async_slice').to_pylist()
    assert a == [{"ts": 60_000, "dur": 5_000, "id": "0x1", "id_local": None, "arg_u": 1}]
    assert store.sql('SELECT ts, producer FROM "s".async_end').to_pylist() == [{"ts": 66_000, "producer": 3}]
    flows = store.sql('SELECT ts, dst_ts, src_phase, dst_phase, bp FROM "s".flow ORDER BY ts').to_pylist()
    assert flows == [
        {"ts": 70_000, "dst_ts": 72_000, "src_phase": "s", "dst_phase": "t", "bp": None},
        {"ts": 72_000, "dst_ts": 75_000, "src_phase": "t", "dst_phase": "f", "bp": "e"},
    ]
    assert store.sql('SELECT phase FROM "s".other').column(0).to_pylist() == ["R"]
    prods = {p["id"]: p for p in store.producers("s")}
    assert prods[0]["name"] == "browser" and prods[0]["attrs"] == {"pid": 1, "sort_index": 3}
    assert prods[1]["name"] == "main" and prods[1]["parent"] == 0
    assert store.trace("s").metadata["chrome.otherData"] == '{"v": 1}'


def test_async_pairs_match_by_category_and_id(store, tmp_path):
    events = [
        {"name": "a", "cat": "c", "ph": "b", "id": 1, "ts": 1, "pid": 1},
        {"name": "b", "cat": "c", "ph": "b", "id": 1, "ts": 2, "pid": 1},
        {"name": "x", "cat": "other", "ph": "e", "id": 1, "ts": 3, "pid": 1},
        {"name": "b", "cat": "c", "ph": "e", "id": 1, "ts": 4, "pid": 1},
        {"name": "a", "cat": "c", "ph": "e", "id": 1, "ts": 6, "pid": 1},
    ]
    rep = chrome_import.import_file(store, write_json(tmp_path / "a.json", events, "array"), "a")
    assert rep.by_type == {"async_slice": 2, "async_end": 1}
    assert store.sql('SELECT name, dur FROM "a".async_slice ORDER BY ts').to_pylist() == [
        {"name": "a", "dur": 5_000},
        {"name": "b", "dur": 2_000},
    ]


@pytest.mark.parametrize("form, suffix", [("array", ".json"), ("object", ".json.gz"), ("array", ".json.gz")])
def test_forms_and_gzip(store, tmp_path, form, suffix):
    path = write_json(tmp_path / f"t{suffix}", SAMPLE, form)
    assert chrome_import.sniff(path.read_bytes()[:65536])
    rep = chrome_import.import_file(store, path, "t")
    assert rep.events == 15 and rep.rejected == 0


def test_array_without_closing_bracket(store, tmp_path):
    path = tmp_path / "cut.json"
    path.write_text(
        '[{"ph":"X","name":"a","ts":1,"dur":2,"pid":1,"tid":1},\n{"ph":"i","name":"b","ts":3,"pid":1,"tid":1},\n'
    )
    rep = chrome_import.import_file(store, path, "cut")
    assert (rep.events, rep.rejected) == (2, 0)


BAD = (
    "[\n"
    '{"ph":"X","name":"ok","ts":1,"dur":2,"pid":1,"tid":1},\n'
    '{"ph":"X","name":"late","ts":"soon","pid":1,"tid":1},\n'
    '{"ph":"X","name": broken\n'
    '{"ph":"i","name":"fine","ts":3,"pid":1,"tid":1},\n'
    '{"ph":"i","ts":4,"pid":[1]},\n'
    '{"ph":"E","ts":5,"pid":1,"tid":1}\n'
    "]\n"
)


def test_bad_lines_are_reported_and_skipped(store, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(BAD)
    rep = chrome_import.import_file(store, path, "bad")
    assert rep.events == 3 and rep.rejected == 3
    assert [(r.line, r.reason.split(":")[0]) for r in rep.first_rejected] == [
        (3, '"ts" is not a number (microseconds)'),
        (4, "invalid JSON at column 19"),
        (6, '"pid" is not an integer or a string'),
    ]


def test_strict_stops_at_the_first_bad_line_and_registers_nothing(store, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(BAD)
    with pytest.raises(BadInput) as e:
        chrome_import.import_file(store, path, "bad", strict=True)
    assert str(e.value).startswith(f"{path}:3: ")
    assert "ts" in str(e.value)
    assert store.traces() == []


def test_wrong_format_is_named(tmp_path):
    js = write_json(tmp_path / "t.json", SAMPLE)
    csv = tmp_path / "t.csv"
    csv.write_text("ts,producer,type\n1,a,x\n")
    with pytest.raises(BadInput, match="this looks like chrome, not csv"):
        registry.importer("csv", js)
    with pytest.raises(BadInput, match="this looks like csv, not chrome"):
        registry.importer("chrome", csv)
    assert registry.sniff(js) == "chrome"


def test_empty_or_eventless_input_is_an_error(store, tmp_path):
    for i, text in enumerate(["", "[]", '{"traceEvents": []}', "not json at all"]):
        path = tmp_path / f"e{i}.json"
        path.write_text(text)
        with pytest.raises(BadInput, match="no events"):
            chrome_import.import_file(store, path, f"e{i}")
    assert store.traces() == []


def test_args_columns_are_shared_by_the_format(store, tmp_path):
    """A key typed int by a first trace keeps that column in later traces; other types go to args text."""
    chrome_import.import_file(
        store, write_json(tmp_path / "a.json", [{"ph": "i", "ts": 1, "pid": 1, "args": {"k": 1}}]), "a"
    )
    chrome_import.import_file(
        store,
        write_json(
            tmp_path / "b.json",
            [{"ph": "i", "ts": 1, "pid": 1, "args": {"k": 2}}, {"ph": "i", "ts": 2, "pid": 1, "args": {"k": "two"}}],
        ),
        "b",
    )
    assert store.sql('SELECT arg_k, args FROM "b".instant ORDER BY ts').to_pylist() == [
        {"arg_k": 2, "args": None},
        {"arg_k": None, "args": '{"k":"two"}'},
    ]
    col = next(p for p in store.event_types("b")["instant"].params if p.name == "arg_k")
    assert (col.type, fmt.arg_key(col)) == ("int64", ("k", False))


# -- export and round trips ------------------------------------------------------------------


def slices(store, name):
    return store.sql(f'SELECT ts, dur, producer, name, phase FROM "{name}".slice ORDER BY ts, producer').to_pylist()


def test_tod_round_trip_keeps_every_event(store, tmp_path):
    generate_tod(store, "tod", 30_000, threads=4)
    out = tmp_path / "tod.json.gz"
    r = chrome_export.export(store, "tod", out)
    n = count(store, 'SELECT count(*) FROM "tod".events')
    assert r["events"] == n
    rep = chrome_import.import_file(store, out, "back")
    assert rep.rejected == 0 and rep.details.get("unmatched_begin", 0) == 0
    # Instants: same multiset of (ts, thread, type, params).
    for t, cols in (("field_write", "parent_seq, field_id, target, value"), ("var_write", "parent_seq, var_id, value")):
        a = store.sql(f'SELECT ts, producer, {cols} FROM "tod".{t} ORDER BY ts, producer').to_pylist()
        sel = ", ".join(f"arg_{c.strip()} AS {c.strip()}" for c in cols.split(","))
        b = store.sql(
            f"""SELECT ts, producer, {sel} FROM "back".instant WHERE name = '{t}' ORDER BY ts, producer"""
        ).to_pylist()
        assert a == b
    # Every enter/exit pair (exit.parent_seq = enter.seq) is one slice with its duration and both args.
    want = store.sql("""SELECT b.ts, e.ts - b.ts AS dur, b.producer, b.behavior_id, b.arg_count, e.ret_value
                        FROM "tod".behavior_enter b JOIN "tod".behavior_exit e ON e.producer = b.producer AND e.parent_seq = b.seq
                        ORDER BY b.ts, b.producer""").to_pylist()
    got = store.sql("""SELECT ts, dur, producer, arg_behavior_id AS behavior_id, arg_arg_count AS arg_count,
                       end_arg_ret_value AS ret_value FROM "back".slice ORDER BY ts, producer""").to_pylist()
    assert got == want
    assert count(store, 'SELECT count(*) FROM "back".instant') + 2 * len(got) == n
    assert {p["id"]: p["name"] for p in store.producers("back")} == {p["id"]: p["name"] for p in store.producers("tod")}


def test_chrome_round_trip_is_identical(store, tmp_path):
    path = write_json(tmp_path / "s.json", SAMPLE + json.loads(NODE.read_text())["traceEvents"])
    chrome_import.import_file(store, path, "one")
    chrome_export.export(store, "one", tmp_path / "one.json")
    json.loads((tmp_path / "one.json").read_text())  # valid JSON
    chrome_import.import_file(store, tmp_path / "one.json", "two")
    for et in fmt.EVENT_TYPES:
        cols = ", ".join(c.name for c in store.event_types("one")[et.name].columns if c.name != "seq")
        a = store.sql(f'SELECT {cols} FROM "one".{et.name} ORDER BY ALL').to_pylist()
        b = store.sql(f'SELECT {cols} FROM "two".{et.name} ORDER BY ALL').to_pylist()
        assert a == b, et.name
    strip = lambda ps: sorted((p["kind"], p["name"], json.dumps(p["attrs"], sort_keys=True)) for p in ps)  # noqa: E731
    assert strip(store.producers("one")) == strip(store.producers("two"))
    meta = [json.loads(store.trace(t).metadata["chrome.otherData"]) for t in ("one", "two")]
    assert meta[0] == meta[1] == {"v": 1}


def test_export_command(store_path, tmp_path, capsys):
    store = tracehouse.open(store_path)
    first = chrome_import.import_file(store, NODE, "node")
    store.close()
    out = tmp_path / "x"
    assert (
        cli.main(["--store", str(store_path), "export", "node", "--format", "chrome", "--out", str(out), "--json"]) == 0
    )
    r = json.loads(capsys.readouterr().out)
    doc = json.loads(Path(r["path"]).read_text())
    assert r["path"] == str(out / "node.json")
    assert {e["ph"] for e in doc["traceEvents"]} == {"M", "X", "B", "E", "b", "e", "i"}
    assert cli.main(["--store", str(store_path), "import", "chrome", r["path"], "--name", "again", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["events"] == first.events == 33 and rep["rejected"] == 0


def test_bulk_defers_automatic_compaction(store_path):
    """Store.bulk (used by the native importers): checkpoints still run, automatic compaction waits
    (a compaction holds up to compact_target_rows rows in memory, growing with the trace)."""
    import pyarrow as pa

    store = tracehouse.open(
        store_path, flush_rows=10_000_000, flush_interval_s=3600.0, compact_min_segments=2, compact_min_fanin=2
    )
    try:
        store.create_trace("t", "bulkfmt", event_types=[tracehouse.EventType("e", "instant")])
        batch = pa.table({"ts": [1, 2], "producer": pa.array([0, 0], pa.int32())})

        def segments():
            return store.sql("SELECT count(*) FROM th.segments WHERE trace = 't'").column(0)[0].as_py()

        with store.bulk("t"):
            for _ in range(3):
                store.append("t", "e", batch)
                store.flush("t")
            assert segments() == 3
        store.append("t", "e", batch)
        store.flush("t")  # outside bulk: the checkpoint compacts again
        assert segments() == 1
    finally:
        store.close()


def test_counter_events_go_back_whole_with_integers_as_integers(store, tmp_path):
    """Regression: a `C` event with several series came back as one event per series, and its
    integers as floats (10 -> 10.0; 2**53 + 1 not even the same number)."""
    counters = [
        {
            "name": "mem",
            "cat": "m",
            "ph": "C",
            "ts": 50,
            "pid": 1,
            "tid": 7,
            "args": {"heap": 10, "stack": 2.5, "big": 2**53 + 1, "neg": -3},
        },
        {
            "name": "mem",
            "cat": "m",
            "ph": "C",
            "ts": 50,
            "pid": 1,
            "tid": 7,
            "args": {"heap": 11},
        },  # same ts: its own event
        {"name": "mem", "cat": "m", "ph": "C", "ts": 51, "pid": 1, "tid": 7, "id": "7", "args": {"heap": 1.0e300}},
        {"name": "q", "ph": "C", "ts": 51, "pid": 2, "args": {"depth": 0}},
    ]
    events = [{"name": "x", "ph": "X", "ts": 49, "dur": 1, "pid": 1, "tid": 7}] + counters
    path = write_json(tmp_path / "c.json", events)
    chrome_import.import_file(store, path, "c")
    out = tmp_path / "c-out.json"
    r = chrome_export.export(store, "c", out)
    doc = json.loads(out.read_text())
    got = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    text = lambda e: json.dumps(e, sort_keys=True)  # noqa: E731  (10 and 10.0 differ as text)
    assert [text(e) for e in got] == [text(e) for e in counters]
    assert r["events"] == 1 + len(counters)
    # And back in, the same rows.
    chrome_import.import_file(store, out, "c2")
    q = 'SELECT ts, producer, name, cat, id, series, value, int_value FROM "{}".counter ORDER BY ALL'
    assert store.sql(q.format("c")).to_pylist() == store.sql(q.format("c2")).to_pylist()
    assert store.sql("SELECT int_value FROM c.counter WHERE series = 'big'").column(0).to_pylist() == [2**53 + 1]


@pytest.mark.skipif(__import__("shutil").which("strace") is None, reason="strace is not installed")
def test_strace_export_has_a_process_per_traced_process_real_tids_and_syscall_names(store, tmp_path):
    """Regression: every process of a strace capture was one Chrome process (children as its
    "threads"), and every slice was named "syscall"."""
    from tracehouse.formats import capture as cap

    cap.capture(store, ["sh", "-c", "cat /etc/hostname > /dev/null; ls / > /dev/null"], "sh")
    out = tmp_path / "sh.json"
    chrome_export.export(store, "sh", out)
    doc = json.loads(out.read_text())["traceEvents"]
    prods = store.producers("sh")
    procs = {p["attrs"]["pid"]: p["name"] for p in prods if p["kind"] == "process"}
    assert len(procs) == 3 and sorted(procs.values()) == ["cat", "ls", "sh"]
    assert {e["pid"]: e["args"]["name"] for e in doc if e["name"] == "process_name"} == procs
    threads = {(p["attrs"]["pid"], p["attrs"]["tid"]) for p in prods if p["kind"] == "thread"}
    assert {(e["pid"], e["tid"]) for e in doc if e["name"] == "thread_name"} == threads
    slices = [e for e in doc if e["ph"] == "X"]
    assert {(e["pid"], e["tid"]) for e in slices} <= threads
    # Named by syscall, not by the event type; the name is not repeated in args.
    want = store.sql("SELECT name, count(*) AS n FROM sh.syscall GROUP BY name").to_pylist()
    from collections import Counter

    assert Counter(e["name"] for e in slices) == {w["name"]: w["n"] for w in want}
    assert all("name" not in e.get("args", {}) for e in slices)
    # The execve of each child is in that child's own process.
    execs = {e["pid"] for e in slices if e["name"] == "execve" and e.get("args", {}).get("ret") == 0}
    assert execs == set(procs)


def test_an_event_over_16_mb_is_rejected_not_stored(store, tmp_path):
    """Regression: a 50 MB line was stored as one event."""
    events = [
        {"name": "a", "ph": "i", "ts": 1, "pid": 1, "tid": 1},
        {"name": "huge", "ph": "i", "ts": 2, "pid": 1, "tid": 1, "args": {"blob": "x" * (17 << 20)}},
        {"name": "b", "ph": "i", "ts": 3, "pid": 1, "tid": 1},
    ]
    path = tmp_path / "big.json"
    path.write_text("[\n" + ",\n".join(json.dumps(e) for e in events) + "\n]\n")
    rep = chrome_import.import_file(store, path, "big")
    assert rep.by_type == {"instant": 2}
    assert (rep.rejected, rep.first_rejected[0].line) == (1, 3)
    assert rep.first_rejected[0].reason == "event longer than 16777216 bytes (skipped)"
    with pytest.raises(BadInput) as e:
        chrome_import.import_file(store, path, "big2", strict=True)
    assert str(e.value).startswith(f"{path}:3: event longer than")
