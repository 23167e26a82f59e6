"""Object state, field history, frame locals and cursors against brute-force references."""

from __future__ import annotations

import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracehouse
from helpers.analysis_ref import build_trace, ref_matches, ref_state
from tracehouse import analysis as an
from tracehouse.analysis.profiles import ObjectConfig
from tracehouse.errors import BadInput

OBJ = ObjectConfig("W", object="obj", field="field", value="value")


def writes_strategy(max_size: int = 50):
    ev = st.tuples(
        st.integers(1, 3),
        st.sampled_from("WWWBE"),
        st.integers(1, 3),
        st.integers(0, 3),
        st.integers(-5, 5),
        st.integers(0, 2),
    )
    return st.lists(ev, max_size=max_size)


def to_events(raw) -> list[dict]:
    out, ts = [], 100
    for p, kind, obj, field, value, dt in raw:
        ts += dt
        e = {"type": kind, "ts": ts, "producer": p}
        if kind == "W":
            e.update(obj=obj, field=field, value=value)
        else:
            e["key"] = field
        out.append(e)
    return out


def open_store(d: str):
    return tracehouse.open(d, flush_rows=10_000_000, flush_interval_s=3600.0, fsync="off")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=writes_strategy(), probes=st.lists(st.integers(95, 200), min_size=1, max_size=5), flush=st.booleans())
def test_object_state_and_history_match_brute_force(raw, probes, flush):
    events = to_events(raw)
    with tempfile.TemporaryDirectory() as d, open_store(d) as store:
        build_trace(store, "t", events, flush=flush)
        for obj in (1, 2, 3):
            for t in probes:
                got = an.object_state(store, "t", obj, t, OBJ).to_pylist()
                assert {r["field"]: (r["value"], r["ts"]) for r in got} == ref_state(events, obj, t)
                assert [r["field"] for r in got] == sorted(r["field"] for r in got)
            for field in (0, 3):
                hist = an.field_history(store, "t", obj, field, OBJ)
                want = sorted(
                    (e["ts"], e["producer"], e["seq"], e["value"])
                    for e in events
                    if e["type"] == "W" and e["obj"] == obj and e["field"] == field
                )
                assert list(zip(*[hist.column(c).to_pylist() for c in ("ts", "producer", "seq", "value")])) == want
                lo = an.field_history(store, "t", obj, field, OBJ, start=120, end=150).column("ts").to_pylist()
                assert lo == [w[0] for w in want if 120 <= w[0] < 150]


def test_object_state_is_one_row_a_field_when_only_one_part_holds_the_object(store):
    # Review of the parted objects index: with several parts each keeps every row tied at a
    # field's last ts, to be reduced in the merge; the merge was skipped when only one part held
    # rows of the object, and two writes of one field at one ts both came back.
    import pyarrow as pa

    events = [
        {"type": "W", "ts": 100, "producer": 1, "obj": 1, "field": 0, "value": 1},
        {"type": "W", "ts": 100, "producer": 1, "obj": 1, "field": 0, "value": 2},
        {"type": "W", "ts": 101, "producer": 2, "obj": 2, "field": 0, "value": 3},
    ]
    build_trace(store, "t", events)
    an.objects_index(store, "t", OBJ)
    store.append(
        "t",
        "W",
        pa.table(
            {
                "ts": pa.array([200], pa.int64()),
                "producer": pa.array([2], pa.int32()),
                "obj": pa.array([2], pa.int64()),
                "field": pa.array([0], pa.int64()),
                "value": pa.array([9], pa.int64()),
            }
        ),
    )
    store.flush("t")
    from tracehouse.analysis import indexes

    assert len(indexes.parts(an.objects_index(store, "t", OBJ))) == 2
    got = an.object_state(store, "t", 1, 10**6, OBJ).to_pylist()
    assert [(r["field"], r["value"], r["ts"]) for r in got] == [(0, 2, 100)]
    assert {r["field"]: (r["value"], r["ts"]) for r in got} == ref_state(events, 1, 10**6)


def test_a_saved_objects_part_reads_true_seqs_after_a_smaller_seq_lands_on_its_timestamp(store):
    # Review of the seqs stored against the density index: a saved part keeps seq minus the
    # smallest seq at its (type, producer, ts), taken again when read; a later row there with a
    # caller's smaller seq shifted the saved rows (the write at ts 110 read back -5, not 10).
    import pyarrow as pa

    events = [{"type": "W", "ts": 100 + i, "producer": 1, "obj": 1, "field": i % 3, "value": i} for i in range(20)]
    build_trace(store, "t", events)
    an.objects_index(store, "t", OBJ)
    store.append(
        "t",
        "W",
        pa.table(
            {
                "ts": pa.array([110], pa.int64()),
                "producer": pa.array([1], pa.int32()),
                "seq": pa.array([-5], pa.int64()),
                "obj": pa.array([2], pa.int64()),
                "field": pa.array([0], pa.int64()),
                "value": pa.array([0], pa.int64()),
            }
        ),
    )
    for flush in (False, True):  # the row in the unflushed tail, then in a segment
        if flush:
            store.flush("t")
        objs = an.objects_index(store, "t", OBJ)
        got = sorted(zip(objs.array("object").tolist(), objs.array("ts").tolist(), objs.array("seq").tolist()))
        want = sorted(
            zip(*(store.scan("t", "W", ["obj", "ts", "seq"]).column(c).to_pylist() for c in ("obj", "ts", "seq")))
        )
        assert got == want, f"flush={flush}"
        hist = an.field_history(store, "t", 1, 1, OBJ).to_pylist()
        assert [(r["ts"], r["seq"]) for r in hist] == [(100 + i, i) for i in range(20) if i % 3 == 1]


def test_object_state_sql_reference_agrees(store):
    from tracehouse.analysis.sql import text as sql_text
    from tracehouse.store.query import qident

    rng = np.random.default_rng(5)
    events = [
        {
            "type": "W",
            "ts": int(t),
            "producer": int(rng.integers(1, 4)),
            "obj": int(rng.integers(1, 6)),
            "field": int(rng.integers(0, 7)),
            "value": int(rng.integers(0, 100)),
        }
        for t in np.sort(rng.choice(10_000, 500, replace=False))
    ]
    build_trace(store, "t", events)
    for obj, t in ((1, 5000), (3, 9999), (5, 10)):
        q = sql_text("object_state").format(
            trace=qident("t"), type="W", field="field", value="value", object="obj", obj=obj, t=t
        )
        assert (
            store.sql(q).select(["field", "value", "ts"]).to_pylist()
            == an.object_state(store, "t", obj, t, OBJ).select(["field", "value", "ts"]).to_pylist()
        )


def test_tod_frame_locals_are_the_last_writes_in_the_frame(tmp_path):
    from tracehouse.formats.tod.generate import generate_tod

    with tracehouse.open(tmp_path / "s", fsync="off") as store:
        generate_tod(store, "tod", 20_000)
        vw = store.sql('SELECT ts, producer, parent_seq, var_id, value FROM "tod".var_write ORDER BY ts').to_pylist()
        spans = an.span_table(store, "tod")
        ts = spans.column("ts").to_pylist()
        for i in (10, 500, 1500, len(ts) - 3):
            t = ts[i] + 1
            for p in (1, 4, 10):
                frames = an.stack_frames(store, "tod", p, t)
                for f in frames:
                    want = {}
                    for w in vw:
                        if w["producer"] == p and w["parent_seq"] == f["seq"] and w["ts"] <= t:
                            want[w["var_id"]] = w["value"]
                    assert f["locals"] == want
                # the frames are exactly the spans open at t
                open_ = sorted(
                    (r["depth"], r["span_id"])
                    for r in spans.to_pylist()
                    if r["producer"] == p and r["ts"] <= t < r["end_ts"]
                )
                assert [(f["depth"], f["span_id"]) for f in frames] == open_


# -- cursors -------------------------------------------------------------------------------


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    raw=writes_strategy(70),
    at=st.integers(90, 230),
    n=st.integers(1, 12),
    types=st.sampled_from([None, ("W",), ("B", "E"), ("W", "E")]),
    producers=st.sampled_from([None, (1,), (2, 3)]),
    pred=st.sampled_from([None, "value >= 0", "key = 1"]),
    rng=st.sampled_from([(None, None), (120, 180)]),
    flush=st.booleans(),
    indexed=st.booleans(),
)
def test_cursor_pages_match_brute_force(monkeypatch, raw, at, n, types, producers, pred, rng, flush, indexed):
    import tracehouse.store.segments as seg
    from tracehouse.analysis import cursors as C

    monkeypatch.setattr(seg, "ROW_GROUP", 7)  # many row groups: the pruning is exercised (same for every example)
    events = to_events(raw)
    pyfn = None
    if pred == "value >= 0":
        pyfn = lambda e: e.get("value") is not None and e["type"] == "W" and e["value"] >= 0  # noqa: E731
    elif pred == "key = 1":
        pyfn = lambda e: e["type"] in ("B", "E") and e["key"] == 1  # noqa: E731
    with tempfile.TemporaryDirectory() as d, open_store(d) as store:
        build_trace(store, "t", events, flush=flush)
        scans = []
        if indexed:  # a fresh density index: pages over given producers come from it
            an.density_index(store, "t")
            scan = C.Cursor._scan_page
            monkeypatch.setattr(C.Cursor, "_scan_page", lambda self, k, fw: scans.append(k) or scan(self, k, fw))
        kinds = set(types) if types else {"B", "E", "W"}
        if pred == "value >= 0" and not (kinds & {"W"}) or pred == "key = 1" and not (kinds & {"B", "E"}):
            with pytest.raises(BadInput):
                an.cursor(store, "t", types=types, where=[pred])
            return
        want = ref_matches(
            events, types=kinds, producers=set(producers) if producers else None, pred=pyfn, start=rng[0], end=rng[1]
        )
        c = an.cursor(
            store, "t", types=types, producers=producers, where=[pred] if pred else [], start=rng[0], end=rng[1], at=at
        )
        after = [w for w in want if w[0] >= at]
        got = []
        while True:
            page = c.next(n)
            assert page.num_rows <= n
            if page.num_rows == 0:
                break
            got += list(zip(*[page.column(k).to_pylist() for k in ("ts", "producer", "seq")]))
        assert got == after
        c = an.cursor(
            store, "t", types=types, producers=producers, where=[pred] if pred else [], start=rng[0], end=rng[1], at=at
        )
        back = []
        while True:
            page = c.prev(n)
            if page.num_rows == 0:
                break
            back = list(zip(*[page.column(k).to_pylist() for k in ("ts", "producer", "seq")])) + back
        assert back == [w for w in want if w[0] < at]
        if indexed and producers and not pred and types != ("W",):
            assert not scans, "the density index should have served every page"


def test_cursor_columns_one_type_all_columns_several_types_common(store):
    build_trace(
        store,
        "t",
        [
            {"type": "W", "ts": 5, "producer": 1, "obj": 1, "field": 2, "value": 3},
            {"type": "B", "ts": 6, "producer": 1, "key": 0},
        ],
    )
    one = an.cursor(store, "t", types=["W"]).next(10)
    assert one.column_names == ["ts", "producer", "seq", "obj", "field", "value", "type"]
    both = an.cursor(store, "t").next(10)
    assert both.column_names == ["ts", "producer", "seq", "dur", "type"]
    assert both.column("type").to_pylist() == ["W", "B"]
    with pytest.raises(BadInput):
        an.cursor(store, "t", where=["nothing = 1"])
    with pytest.raises(BadInput):
        an.cursor(store, "t", types=["W"], where=["obj = x"]).next(1)


def test_saved_search_resumes(store):
    build_trace(
        store, "t", [{"type": "W", "ts": i, "producer": 1, "obj": 1, "field": 1, "value": i} for i in range(10)]
    )
    c = an.cursor(store, "t", types=["W"], where=["value >= 4"], at=0)
    rid = an.save_search(store, "big values", "t", c.filter, at=6)
    r = store.result(rid)
    assert r["kind"] == "search" and r["traces"] == ["t"]
    again = an.open_search(store, rid)
    assert again.next(100).column("value").to_pylist() == [6, 7, 8, 9]
    assert again.prev(100).column("value").to_pylist() == [4, 5, 6, 7, 8, 9]
