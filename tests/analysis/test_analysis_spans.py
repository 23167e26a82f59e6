"""Spans, call trees and stacks against brute-force references (random, unbalanced,
interleaved begin/end sequences) and hand-computed answers on small real traces."""

from __future__ import annotations

import tempfile

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracehouse
from helpers.analysis_ref import build_trace, ref_call_tree, ref_spans, ref_stack
from tracehouse import analysis as an
from tracehouse.analysis import calltree as CT
from tracehouse.analysis import spans as S
from tracehouse.analysis.profiles import SpanConfig
from tracehouse.analysis.samples import folded_tree

CFG_KEYED = SpanConfig("B", "E", key="key", name="name")
CFG_NEST = SpanConfig("B", "E", key=None, name="name")


def events_strategy(max_size: int = 60):
    # W (a field write) is an event of another type: spans left open are cut at the
    # thread's last event of any type, which may be one of these.
    ev = st.tuples(st.integers(1, 3), st.sampled_from("BBEBBEW"), st.integers(0, 2), st.integers(0, 3))
    return st.lists(ev, min_size=0, max_size=max_size)


def to_events(raw, scramble_ts: bool = False) -> list[dict]:
    out, ts = [], 1000
    for i, (p, kind, key, dt) in enumerate(raw):
        ts += dt
        out.append(
            {
                "type": kind,
                "ts": (ts if not scramble_ts else 1000 + (i * 7919) % 97),
                "producer": p,
                "key": key,
                "obj": key,
                "field": 0,
                "value": i,
            }
        )
    return out


def open_store(d: str):
    return tracehouse.open(d, flush_rows=10_000_000, flush_interval_s=3600.0, fsync="off")


def check_pairing(store, events, keyed: bool) -> None:
    cfg = CFG_KEYED if keyed else CFG_NEST
    want, want_unmatched = ref_spans(events, keyed)
    sp = S.pair(store, "t", cfg)
    got = sp.table.to_pylist()
    assert len(got) == len(want)
    for g, w in zip(got, want):
        for k in (
            "span_id",
            "ts",
            "producer",
            "seq",
            "end_ts",
            "end_seq",
            "depth",
            "parent_id",
            "closed",
            "dur",
            "self_time",
        ):
            assert g[k] == w[k], (k, g, w)
        assert g["name"] == f"f{w['key']}"
    um = [{k: r[k] for k in ("half", "ts", "producer", "seq")} for r in sp.unmatched.to_pylist()]
    assert um == want_unmatched
    assert sp.stats["unmatched_ends"] == sum(u["half"] == "end" for u in want_unmatched)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=events_strategy(), keyed=st.booleans(), flush=st.booleans(), scramble=st.booleans())
def test_pairing_matches_brute_force(raw, keyed, flush, scramble):
    events = to_events(raw, scramble)
    with tempfile.TemporaryDirectory() as d, open_store(d) as store:
        build_trace(store, "t", events, flush=flush)
        check_pairing(store, events, keyed)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=events_strategy(40), keyed=st.booleans(), probes=st.lists(st.integers(995, 1130), min_size=1, max_size=6))
def test_children_thread_calls_stack_and_call_tree_match_brute_force(raw, keyed, probes):
    events = to_events(raw)
    cfg = CFG_KEYED if keyed else CFG_NEST
    with tempfile.TemporaryDirectory() as d, open_store(d) as store:
        build_trace(store, "t", events)
        want, _ = ref_spans(events, keyed)
        for s in want:
            kids = [w["span_id"] for w in want if w["parent_id"] == s["span_id"]]
            assert S.children(store, "t", s["span_id"], cfg).column("span_id").to_pylist() == kids
        for p in (1, 2, 3):
            calls = S.thread_calls(store, "t", p, cfg).column("span_id").to_pylist()
            assert calls == [w["span_id"] for w in want if w["producer"] == p]
            for t in probes:
                got = an.stack_at(store, "t", p, t, cfg).column("span_id").to_pylist()
                assert got == ref_stack(want, p, t), (p, t)
        tree = CT.aggregated_call_tree(store, "t", cfg).to_pylist()
        by_id = {r["node"]: r for r in tree}

        def path(r):
            out = []
            while r is not None:
                out.append(r["name"])
                r = by_id.get(r["parent"])
            return tuple(reversed(out))

        got = {path(r): (r["calls"], r["total_ns"], r["self_ns"]) for r in tree}
        assert got == ref_call_tree(want)
        # The fast path (call paths kept per span index, one bincount) is the same tree.
        fast = CT.call_tree(store, "t", cfg).rows.to_pylist()
        by_id = {r["node"]: r for r in fast}
        assert {path(r): (r["calls"], r["total_ns"], r["self_ns"]) for r in fast} == ref_call_tree(want)
        folded = {}
        for line in CT.folded(CT.aggregated_call_tree(store, "t", cfg)).splitlines():
            stack, value = line.rsplit(" ", 1)
            folded[tuple(stack.split(";"))] = int(value)
        assert folded == {k: v[2] for k, v in ref_call_tree(want).items() if v[2] > 0}
        # ... and read back as a tree (the web UI's flame graph of a folded result): every path's
        # total and self time again
        text = CT.folded(CT.aggregated_call_tree(store, "t", cfg))
        back = folded_tree(pa.array(text.splitlines(), pa.string())) if text else None
        rows = back.to_pylist() if back is not None else []
        by_id = {r["node"]: r for r in rows}
        got = {path(r): (r["total_ns"], r["self_ns"]) for r in rows}
        assert got == {k: (v[1], v[2]) for k, v in ref_call_tree(want).items() if v[1] > 0}


def test_hand_computed_nested_calls(store):
    # thread 1: f0 [0, 100) { f1 [10, 30) { f2 [15, 20) }  f1 [40, 90) }; thread 2: f0 [5, 8) + an end of nothing
    ev = [
        {"type": "B", "ts": 0, "producer": 1, "key": 0},
        {"type": "B", "ts": 5, "producer": 2, "key": 0},
        {"type": "E", "ts": 8, "producer": 2, "key": 0},
        {"type": "E", "ts": 9, "producer": 2, "key": 0},
        {"type": "B", "ts": 10, "producer": 1, "key": 1},
        {"type": "B", "ts": 15, "producer": 1, "key": 2},
        {"type": "E", "ts": 20, "producer": 1, "key": 2},
        {"type": "E", "ts": 30, "producer": 1, "key": 1},
        {"type": "B", "ts": 40, "producer": 1, "key": 1},
        {"type": "E", "ts": 90, "producer": 1, "key": 1},
        {"type": "E", "ts": 100, "producer": 1, "key": 0},
    ]
    build_trace(store, "t", ev)
    sp = S.pair(store, "t", CFG_KEYED)
    rows = [
        (r["span_id"], r["ts"], r["end_ts"], r["depth"], r["parent_id"], r["self_time"]) for r in sp.table.to_pylist()
    ]
    assert rows == [
        (0, 0, 100, 0, -1, 100 - 20 - 50),
        (1, 5, 8, 0, -1, 3),
        (2, 10, 30, 1, 0, 15),
        (3, 15, 20, 2, 2, 5),
        (4, 40, 90, 1, 0, 50),
    ]
    assert sp.unmatched.to_pylist() == [{"ts": 9, "producer": 2, "seq": 2, "half": "end", "key": "0"}]
    assert S.children(store, "t", 0, CFG_KEYED).column("span_id").to_pylist() == [2, 4]
    assert an.stack_at(store, "t", 1, 17, CFG_KEYED).column("span_id").to_pylist() == [0, 2, 3]
    assert an.stack_at(store, "t", 1, 30, CFG_KEYED).column("span_id").to_pylist() == [0]
    assert CT.folded(CT.aggregated_call_tree(store, "t", CFG_KEYED)).splitlines() == ["f0 33", "f0;f1 65", "f0;f1;f2 5"]
    assert sorted(CT.folded(CT.call_tree(store, "t", CFG_KEYED).rows).splitlines()) == [
        "f0 33",
        "f0;f1 65",
        "f0;f1;f2 5",
    ]


def test_processed_trace_is_saved_and_linked(store):
    ev = [
        {"type": "B", "ts": 1, "producer": 1, "key": 0},
        {"type": "E", "ts": 4, "producer": 1, "key": 0},
        {"type": "B", "ts": 6, "producer": 1, "key": 1},
    ]
    build_trace(store, "t", ev)
    sp = S.pair(store, "t", CFG_KEYED)
    r = S.save(store, sp)
    assert r["kind"] == "processed" and set(r["traces"]) == {"t", "t:spans"}
    assert store.trace("t:spans").metadata["source"] == "t"
    rows = store.sql('SELECT span_id, dur, closed, name, end_ret FROM "t:spans".span ORDER BY span_id').to_pylist()
    assert rows == [
        {"span_id": 0, "dur": 3, "closed": True, "name": "f0", "end_ret": 10},
        {"span_id": 1, "dur": 0, "closed": False, "name": "f1", "end_ret": None},
    ]
    assert store.sql('SELECT half FROM "t:spans".unmatched').column("half").to_pylist() == ["begin"]
    # span_table reads the processed trace back while it is fresh ...
    assert S.processed(store, "t", CFG_KEYED) == "t:spans"
    assert S.span_table(store, "t", CFG_KEYED).column("span_id").to_pylist() == [0, 1]
    # ... and not once the source changed
    store.append("t", "E", pa.table({"ts": [9], "producer": pa.array([1], pa.int32()), "key": [1], "ret": [0]}))
    assert S.processed(store, "t", CFG_KEYED) is None
    assert S.span_table(store, "t", CFG_KEYED, save_processed=False).column("closed").to_pylist() == [True, True]


def test_tod_trace_spans_follow_the_generators_links(tmp_path):
    """TOD exits carry parent_seq = the seq of their enter: pairing must agree on every span."""
    from tracehouse.formats.tod.generate import generate_tod

    with tracehouse.open(tmp_path / "s", fsync="off") as store:
        generate_tod(store, "tod", 20_000)
        t = S.span_table(store, "tod")
        assert t.num_rows == store.sql('SELECT count(*) n FROM "tod".behavior_enter').column("n")[0].as_py()
        assert all(t.column("closed").to_pylist())
        # the end's own link (end_parent_seq) names the begin it closes
        assert t.column("end_parent_seq").to_pylist() == t.column("seq").to_pylist()
        # depth and parent agree with the enters' parent_seq links
        seq_of = dict(zip(t.column("span_id").to_pylist(), t.column("seq").to_pylist()))
        for pid, pseq in zip(t.column("parent_id").to_pylist(), t.column("parent_seq").to_pylist()):
            assert (pid == -1 and pseq == -1) or seq_of[pid] == pseq
        frames = an.stack_frames(store, "tod", 3, int(t.column("ts")[t.num_rows // 2].as_py()))
        assert frames and all("locals" in f for f in frames)


def test_pairing_streamed_by_row_group_equals_pairing_whole_columns(tmp_path, monkeypatch):
    """The pairing columns are read row group by row group on a second thread while the
    Rust pass consumes them (`_stream_pair`): same spans as reading the whole columns first."""
    import tracehouse.store.segments as seg
    from tracehouse.formats.tod.generate import generate_tod

    monkeypatch.setattr(seg, "ROW_GROUP", 997)  # many row groups, cut anywhere in a call
    with tracehouse.open(tmp_path / "s", fsync="off", flush_rows=7_000) as store:
        generate_tod(store, "tod", 60_000, batch=5_000)
        store.append(
            "tod",
            "behavior_exit",
            pa.table(
                {  # an unflushed tail: an end closing nothing
                    "ts": [10**15],
                    "producer": pa.array([1], pa.int32()),
                    "seq": [10**12],
                    "parent_seq": [-1],
                    "behavior_id": [5],
                    "ret_value": [0],
                }
            ),
        )
        assert len(store.scan_parts("tod", "behavior_enter", ["ts"])) > 5
        streamed = S.pair(store, "tod")
        assert streamed.stats["overlapped"] and streamed.stats["presorted"]
        assert streamed.stats["unmatched_ends"] == 1
        monkeypatch.setattr(S, "_streamable", lambda *a: False)
        whole = S.pair(store, "tod")
        assert not whole.stats["overlapped"]
        assert streamed.table.equals(whole.table)
        assert streamed.unmatched.equals(whole.unmatched)
