"""Paje: the hand-written small.paje replayed into producers, states, events, variables and links; bad input; fuzz."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracehouse
from tracehouse import _core, importers
from tracehouse.errors import BadInput
from tracehouse.exporters import chrome as chrome_export
from tracehouse.formats import paje as fmt
from tracehouse.importers import chrome as chrome_import
from tracehouse.importers import paje

SMALL = Path(__file__).parent / "data" / "small.paje"
S = 1_000_000_000


def test_rust_tables_match_the_declared_event_types():
    tables = _core.paje_tables()
    assert list(tables) == [et.name for et in fmt.EVENT_TYPES]
    for et in fmt.EVENT_TYPES:
        assert tables[et.name] == (et.kind, [(c.name, c.type) for c in et.columns])


def test_small_trace(store):
    rep = paje.import_file(store, SMALL, "p")
    assert rep.rejected == 0
    assert rep.by_type == {"state": 5, "event": 2, "variable": 3, "link": 2, "link_end": 1}
    assert rep.details == {"events": 29, "definitions": 9, "states_closed_at_end": 1, "states_closed_by_destroy": 1,
                           "unmatched_link_start": 1, "unmatched_link_end": 1}
    prods = {p["name"]: p for p in store.producers("p")}
    assert set(prods) == {"program 1", "thread 1", "thread 2"}
    assert prods["program 1"]["kind"] == "Program" and prods["program 1"]["parent"] is None
    assert prods["thread 2"]["parent"] == prods["program 1"]["id"]
    assert prods["thread 2"]["attrs"] == {"alias": "C_T2", "created_ns": S // 2, "destroyed_ns": 5 * S}
    states = store.sql('''SELECT p.name AS container, s.value, s.ts, s.dur, s.depth FROM "p".state s
                          JOIN th.producers p ON p.trace = 'p' AND p.id = s.producer ORDER BY container, ts''').to_pylist()
    assert [(r["container"], r["value"], r["ts"], r["dur"], r["depth"]) for r in states] == [
        ("thread 1", "Running", S, 2 * S, 0), ("thread 1", "Computing", 3 * S // 2, S // 2, 1),
        ("thread 1", "Waiting", 3 * S, 3 * S, 0),  # held until the last time of the trace, 6 s
        ("thread 2", "Running", S, 3 * S, 0),  # reset at 4 s
        ("thread 2", "Computing", 9 * S // 2, S // 2, 0)]  # closed by the destruction at 5 s
    assert store.sql('SELECT value, op, operand FROM "p".variable ORDER BY ts').to_pylist() == [
        {"value": 100.0, "op": "set", "operand": 100.0}, {"value": 150.5, "op": "add", "operand": 50.5},
        {"value": 130.5, "op": "sub", "operand": 20.0}]
    links = store.sql('SELECT link_type, key, producer, dst_producer, ts, dst_ts FROM "p".link ORDER BY ts').to_pylist()
    t1, t2 = prods["thread 1"]["id"], prods["thread 2"]["id"]
    assert links == [{"link_type": "Message", "key": "k1", "producer": t1, "dst_producer": t2, "ts": S, "dst_ts": 7 * S // 4},
                     {"link_type": "Message", "key": "k2", "producer": t2, "dst_producer": None, "ts": 2 * S, "dst_ts": None}]
    assert store.sql('SELECT event_type, value FROM "p".event ORDER BY ts').to_pylist() == [
        {"event_type": "Signal", "value": "SIGUSR1"}, {"event_type": "Signal", "value": "done"}]
    assert store.sql('''SELECT extra FROM "p".state WHERE value = 'Computing' ORDER BY ts''').column(0).to_pylist() == [
        '{"Reason":"inner loop"}', '{"Reason":"tail"}']


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
    assert store.sql('SELECT DISTINCT name, series FROM "c".counter').to_pylist() == [{"name": "Memory", "series": "value"}]
    assert store.sql('SELECT name FROM "c".slice ORDER BY ts, name').column(0).to_pylist() == [
        "Running", "Running", "Computing", "Waiting", "Computing"]
    assert store.sql('SELECT sum(dur) FROM "c".slice').column(0)[0].as_py() == \
        store.sql('SELECT sum(dur) FROM "p".state').column(0)[0].as_py()


def test_bad_lines_and_strict(store, tmp_path):
    bad = tmp_path / "bad.paje"
    text = SMALL.read_text()
    bad.write_text(text.replace("20 1.25 ET_E", "20 soon ET_E").replace('13 4.0 ST_S C_T2', '13 4.0 ST_S C_T9'))
    rep = paje.import_file(store, bad, "bad")
    assert rep.rejected == 2
    lines = text.splitlines()
    assert [r.line for r in rep.first_rejected] == [lines.index("13 4.0 ST_S C_T2") + 1, lines.index('20 1.25 ET_E C_T1 "SIGUSR1"') + 1]
    assert "unknown container" in rep.first_rejected[0].reason
    with pytest.raises(BadInput) as e:
        paje.import_file(store, bad, "strict", strict=True)
    assert str(e.value).startswith(f"{bad}:{lines.index('13 4.0 ST_S C_T2') + 1}: ")
    assert [t.name for t in store.traces()] == ["bad"]


def test_sniffer():
    assert importers.sniff(SMALL) == "paje"
    with pytest.raises(BadInput, match="this looks like paje, not chrome"):
        importers.get("chrome", SMALL)


lines = st.one_of(st.binary(max_size=50), st.sampled_from(SMALL.read_bytes().splitlines()),
                  st.sampled_from([b"%EventDef PajeSetState 10", b"%EndEventDef", b"% Time date", b'10 "unterminated',
                                   b"12 1e400 ST_S C_T1", b"11 -5 ST_S C_T1 V_C x", b"7 1.0 CT_T C_T1", b"6 1 C_X CT_T C_Y y"]))


@settings(max_examples=100, deadline=None)
@given(st.lists(lines, max_size=40), st.lists(st.integers(0, 3000), max_size=5), st.booleans())
def test_parser_never_crashes_whatever_the_chunking(ls, cuts, strict):
    data = b"\n".join(ls)

    def run(cuts):
        p = _core.PajeParser(strict=strict, batch_rows=3)
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
