"""Paje: the hand-written small.paje replayed into producers, states, events, variables and links; bad input; fuzz."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracehouse
from helpers.paths import DATA
from tracehouse import _core
from tracehouse.errors import BadInput
from tracehouse.formats import registry
from tracehouse.formats.chrome import exporter as chrome_export
from tracehouse.formats.chrome import importer as chrome_import
from tracehouse.formats.paje import importer as paje

SMALL = DATA / "small.paje"
S = 1_000_000_000


def test_small_trace(store):
    rep = paje.import_file(store, SMALL, "p")
    assert rep.rejected == 0
    assert rep.by_type == {"state": 5, "event": 2, "variable": 3, "link": 2, "link_end": 1}
    assert rep.details == {
        "events": 29,
        "definitions": 9,
        "states_closed_at_end": 1,
        "states_closed_by_destroy": 1,
        "unmatched_link_start": 1,
        "unmatched_link_end": 1,
    }
    prods = {p["name"]: p for p in store.producers("p")}
    assert set(prods) == {"program 1", "thread 1", "thread 2"}
    assert prods["program 1"]["kind"] == "Program" and prods["program 1"]["parent"] is None
    assert prods["thread 2"]["parent"] == prods["program 1"]["id"]
    assert prods["thread 2"]["attrs"] == {"alias": "C_T2", "created_ns": S // 2, "destroyed_ns": 5 * S}
    states = store.sql("""SELECT p.name AS container, s.value, s.ts, s.dur, s.depth FROM "p".state s
                          JOIN th.producers p ON p.trace = 'p' AND p.id = s.producer ORDER BY container, ts""").to_pylist()
    assert [(r["container"], r["value"], r["ts"], r["dur"], r["depth"]) for r in states] == [
        ("thread 1", "Running", S, 2 * S, 0),
        ("thread 1", "Computing", 3 * S // 2, S // 2, 1),
        ("thread 1", "Waiting", 3 * S, 3 * S, 0),  # held until the last time of the trace, 6 s
        ("thread 2", "Running", S, 3 * S, 0),  # reset at 4 s
        ("thread 2", "Computing", 9 * S // 2, S // 2, 0),
    ]  # closed by the destruction at 5 s
    assert store.sql('SELECT value, op, operand FROM "p".variable ORDER BY ts').to_pylist() == [
        {"value": 100.0, "op": "set", "operand": 100.0},
        {"value": 150.5, "op": "add", "operand": 50.5},
        {"value": 130.5, "op": "sub", "operand": 20.0},
    ]
    links = store.sql('SELECT link_type, key, producer, dst_producer, ts, dst_ts FROM "p".link ORDER BY ts').to_pylist()
    t1, t2 = prods["thread 1"]["id"], prods["thread 2"]["id"]
    assert links == [
        {"link_type": "Message", "key": "k1", "producer": t1, "dst_producer": t2, "ts": S, "dst_ts": 7 * S // 4},
        {"link_type": "Message", "key": "k2", "producer": t2, "dst_producer": None, "ts": 2 * S, "dst_ts": None},
    ]
    assert store.sql('SELECT event_type, value FROM "p".event ORDER BY ts').to_pylist() == [
        {"event_type": "Signal", "value": "SIGUSR1"},
        {"event_type": "Signal", "value": "done"},
    ]
    assert store.sql("""SELECT extra FROM "p".state WHERE value = 'Computing' ORDER BY ts""").column(0).to_pylist() == [
        '{"Reason":"inner loop"}',
        '{"Reason":"tail"}',
    ]


def test_time_unit(store):
    rep = paje.import_file(store, SMALL, "ms", time_unit="ms")
    assert rep.events == 13
    assert store.sql('SELECT max(ts) FROM "ms".events').column(0)[0].as_py() == 6_000_000


def test_export_to_chrome_and_back(store, tmp_path):
    """A Paje trace opens in Perfetto: states are slices, links flows, variables counters."""
    paje.import_file(store, SMALL, "p")
    chrome_export.export(store, "p", tmp_path / "p.json")
    rep = chrome_import.import_file(store, tmp_path / "p.json", "c")
    assert rep.rejected == 0
    assert rep.by_type == {"slice": 5, "instant": 2, "counter": 3, "flow": 2, "slice_end": 1}
    assert store.sql('SELECT DISTINCT name, series FROM "c".counter').to_pylist() == [
        {"name": "Memory", "series": "value"}
    ]
    assert store.sql('SELECT name FROM "c".slice ORDER BY ts, name').column(0).to_pylist() == [
        "Running",
        "Running",
        "Computing",
        "Waiting",
        "Computing",
    ]
    assert (
        store.sql('SELECT sum(dur) FROM "c".slice').column(0)[0].as_py()
        == store.sql('SELECT sum(dur) FROM "p".state').column(0)[0].as_py()
    )


def test_bad_lines_and_strict(store, tmp_path):
    bad = tmp_path / "bad.paje"
    text = SMALL.read_text()
    bad.write_text(text.replace("20 1.25 ET_E", "20 soon ET_E").replace("13 4.0 ST_S C_T2", "13 4.0 ST_S C_T9"))
    rep = paje.import_file(store, bad, "bad")
    assert rep.rejected == 2
    lines = text.splitlines()
    assert [r.line for r in rep.first_rejected] == [
        lines.index("13 4.0 ST_S C_T2") + 1,
        lines.index('20 1.25 ET_E C_T1 "SIGUSR1"') + 1,
    ]
    assert "unknown container" in rep.first_rejected[0].reason
    with pytest.raises(BadInput) as e:
        paje.import_file(store, bad, "strict", strict=True)
    assert str(e.value).startswith(f"{bad}:{lines.index('13 4.0 ST_S C_T2') + 1}: ")
    assert [t.name for t in store.traces()] == ["bad"]


def test_sniffer():
    assert registry.sniff(SMALL) == "paje"
    with pytest.raises(BadInput, match="this looks like paje, not chrome"):
        registry.importer("chrome", SMALL)


PAJENG = DATA / "paje" / "pajeng"  # PajeNG's own test traces (see its README.md)


def state_rows(store, trace):
    return store.sql(f"""SELECT s.ts, s.dur, p.name AS container, s.state_type, s.value, s.depth
                         FROM "{trace}".state s JOIN th.producers p ON p.trace = '{trace}' AND p.id = s.producer
                         ORDER BY s.ts, s.depth""").to_pylist()


def test_pajeng_traces_golden(store):
    """PajeNG's states/events/variables/links traces, every row checked against the file."""
    paje.import_file(store, PAJENG / "states.trace", "states")
    assert [(r["ts"], r["dur"], r["container"], r["value"], r["depth"]) for r in state_rows(store, "states")] == [
        (0, 1_340_000_000, "p1", "Inicio", 0),  # set at 0, closed by p1's destruction
        (320_000_000, 210_000_000, "p1", "Meio", 1),  # pushed at 0.32, popped at 0.53
        (860_000_000, 130_000_000, "p1", "Fim", 1),
    ]  # pushed at 0.86, popped at 0.99
    paje.import_file(store, PAJENG / "events.trace", "events")
    assert store.sql('SELECT ts, event_type, value FROM "events".event ORDER BY ts').to_pylist() == [
        {"ts": 2_430_000_000, "event_type": "EV", "value": "PrimeiroEvento"},
        {"ts": 2_870_000_000, "event_type": "EV", "value": "SegundoEvento"},
    ]
    paje.import_file(store, PAJENG / "variables.trace", "variables")
    assert store.sql('SELECT ts, value, op, operand FROM "variables".variable ORDER BY ts').to_pylist() == [
        {"ts": 0, "value": 10.0, "op": "set", "operand": 10.0},
        {"ts": 320_000_000, "value": 13.0, "op": "add", "operand": 3.0},
        {"ts": 530_000_000, "value": 11.0, "op": "sub", "operand": 2.0},
    ]
    paje.import_file(store, PAJENG / "links.trace", "links")
    names = {p["id"]: p["name"] for p in store.producers("links")}
    got = store.sql('SELECT ts, producer, dst_producer, dst_ts, key FROM "links".link ORDER BY ts').to_pylist()
    assert [(r["ts"], names[r["producer"]], names[r["dst_producer"]], r["dst_ts"], r["key"]) for r in got] == [
        (240_000_000, "p1", "p2", 1_020_000_000, "myKey-001"),
        (1_040_000_000, "p1", "p3", 2_100_000_000, "myKey-002"),
    ]


def test_a_trace_of_only_containers_imports(tmp_path, capsys):
    """Regression: PajeNG's containers.trace (no events; threads t1, t2 under several
    processes) failed with "container t1 created twice" and "no events in the input"."""
    store = tmp_path / "s"
    rc = __import__("tracehouse.cli", fromlist=["main"]).main(
        ["--store", str(store), "import", "paje", str(PAJENG / "containers.trace"), "--strict", "--json"]
    )
    out = capsys.readouterr()
    assert rc == 0, out.err
    rep = __import__("json").loads(out.out)
    assert (rep["events"], rep["producers"], rep["rejected"]) == (0, 10, 0)
    with tracehouse.open(store, readonly=True) as s:
        prods = {p["id"]: p for p in s.producers("containers")}
        path = lambda p: (path(prods[p["parent"]]) + "/" if p["parent"] is not None else "") + p["name"]  # noqa: E731
        assert sorted(path(p) for p in prods.values() if p["kind"] == "THREAD") == [
            "root/p1/t1",
            "root/p1/t2",
            "root/p1/t3",
            "root/p2/t1",
            "root/p2/t2",
            "root/p3/t1",
        ]
        assert sorted(p["attrs"]["alias"] for p in prods.values() if p["name"] == "t1") == ["1t1", "2t1", "3t1"]
        assert s.trace("containers").event_count == 0


def test_trace_file_includes_are_followed(store):
    rep = paje.import_file(store, DATA / "paje" / "include" / "split.paje", "split", strict=True)
    assert rep.details["includes"] == 3 and rep.rejected == 0
    assert [(r["ts"] / S, r["container"], r["value"]) for r in state_rows(store, "split")] == [
        (1.0, "t1", "run"),
        (1.5, "t2", "run"),
        (2.0, "t1", "wait"),
        (2.5, "t2", "io"),
        (3.0, "t1", "done"),
    ]


def test_a_trace_file_naming_itself_is_a_reported_cycle(store):
    root = PAJENG / "multiple_files" / "root.trace"
    line = root.read_text().splitlines().index('17 "0" "0" "root.trace"') + 1
    rep = paje.import_file(store, root, "root")
    assert rep.events == 0 and rep.rejected == 1
    assert rep.first_rejected[0].line == line and "cycle" in rep.first_rejected[0].reason
    with pytest.raises(BadInput) as e:
        paje.import_file(store, root, "root2", strict=True)
    assert str(e.value).startswith(f"{root}:{line}: ")


def test_a_line_over_16_mb_is_rejected_not_stored(store, tmp_path):
    """Regression: a 50 MB line became one event."""
    text = SMALL.read_text().splitlines()
    at = text.index('20 1.25 ET_E C_T1 "SIGUSR1"')
    text[at] = '20 1.25 ET_E C_T1 "' + "x" * (17 << 20) + '"'
    big = tmp_path / "big.paje"
    big.write_text("\n".join(text) + "\n")
    rep = paje.import_file(store, big, "big")
    assert (rep.rejected, rep.first_rejected[0].line) == (1, at + 1)
    assert rep.first_rejected[0].reason == "line longer than 16777216 bytes (skipped)"
    assert rep.by_type["event"] == 1
    with pytest.raises(BadInput) as e:
        paje.import_file(store, big, "big2", strict=True)
    assert str(e.value).startswith(f"{big}:{at + 1}: line longer than")


def test_binary_input_is_refused(store, tmp_path):
    junk = tmp_path / "junk.paje"
    junk.write_bytes(bytes(range(256)) * 4000)
    with pytest.raises(BadInput, match="binary data, not a text Paje trace"):
        paje.import_file(store, junk, "junk")
    assert store.traces() == []


lines = st.one_of(
    st.binary(max_size=50),
    st.sampled_from(SMALL.read_bytes().splitlines()),
    st.sampled_from(
        [
            b"%EventDef PajeSetState 10",
            b"%EndEventDef",
            b"% Time date",
            b'10 "unterminated',
            b"12 1e400 ST_S C_T1",
            b"11 -5 ST_S C_T1 V_C x",
            b"7 1.0 CT_T C_T1",
            b"6 1 C_X CT_T C_Y y",
        ]
    ),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(lines, max_size=40), st.lists(st.integers(0, 3000), max_size=5), st.booleans())
def test_parser_never_crashes_whatever_the_chunking(ls, cuts, strict):
    data = b"\n".join(ls)

    def run(cuts):
        p = _core.NativeParser("paje", strict=strict, batch_rows=3)
        rows, prev = 0, 0
        for c in sorted(set(min(c, len(data)) for c in cuts)) + [len(data)]:
            rows += sum(b.num_rows for _, b in p.feed(data[prev:c]))
            prev = c
        rows += sum(b.num_rows for _, b in p.finish())
        return rows, p.stats, p.problems, p.producers()

    assert run(cuts) == run([])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(lines, min_size=1, max_size=60), st.booleans())
def test_imports_never_half_register(ls, strict):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "f.paje"
        path.write_bytes(SMALL.read_bytes() + b"\n".join(ls) + b"\n" + b"#" * (1 << 20))
        store = tracehouse.open(Path(d) / "s")
        try:
            rep = paje.import_file(store, path, "f", strict=strict)
        except BadInput:
            assert store.traces() == []
        else:
            assert store.sql('SELECT count(*) FROM "f".events').column(0)[0].as_py() == rep.events
        finally:
            store.close()
