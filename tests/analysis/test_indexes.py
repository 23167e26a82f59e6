"""Derived indexes: packed (frame-of-reference / delta blocks, read in place) and
no larger than the trace; an index saved in the old layout is rebuilt, not misread; an
index of a growing trace is extended with the appended segments, not rebuilt."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import tracehouse
from helpers.analysis_ref import build_trace, ref_state
from tracehouse import _core
from tracehouse import analysis as an
from tracehouse.analysis import indexes
from tracehouse.analysis.profiles import LocalsConfig, ObjectConfig

OBJ = ObjectConfig("W", object="obj", field="field", value="value")
I64 = st.integers(-(2**63), 2**63 - 1)


# -- the packed layout ------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.one_of(
        st.lists(st.one_of(I64, st.none()), max_size=2500),
        st.lists(st.integers(-1000, 1000), max_size=3000).map(sorted),
        st.lists(st.integers(0, 2**40), min_size=1, max_size=3000).map(lambda v: list(np.cumsum(v).tolist())),
    ),
    probes=st.lists(st.integers(-(2**62), 2**62), max_size=8),
)
@example(values=[None, 2**63 - 1, -(2**63)], probes=[])  # nulls + the whole int64 range: stored plain
def test_packed_column_reads_back_every_value(values, probes):
    typ = pa.int64()
    if values and all(v is not None and -(2**63) <= v < 2**63 for v in values):
        arr = pa.array(values, typ)
    else:
        arr = pa.array([v if v is None or -(2**63) <= v < 2**63 else None for v in values], typ)
    t = pa.table({"v": arr, "k": pa.array(np.arange(len(values)) % 3 == 0)})
    idx = indexes.PackedIndex(indexes.pack(t))
    assert idx.num_rows == len(values)
    assert idx.column("v").to_pylist() == arr.to_pylist()
    assert idx.column("k").to_pylist() == t.column("k").to_pylist()
    n = len(values)
    if n:
        rows = np.array(sorted({0, n - 1, n // 2, min(n - 1, 1023), min(n - 1, 1024)}), np.int64)
        assert idx.take(rows).column("v").to_pylist() == arr.take(pa.array(rows)).to_pylist()
        assert idx.slice(n // 3, 1500).column("v").to_pylist() == arr.slice(n // 3, 1500).to_pylist()
    if arr.null_count == 0:
        a = arr.to_numpy()
        if n == 0 or (np.diff(a) >= 0).all():
            view = idx.view("v")
            for v in probes + ([int(a[0]), int(a[-1])] if n else []):
                for side in ("left", "right"):
                    assert indexes.search(view, v, side) == int(np.searchsorted(a, v, side=side))
                lo, hi = n // 4, n - n // 4
                assert indexes.search(view[lo:hi], v) == int(np.searchsorted(a[lo:hi], v))


def test_packed_columns_shrink_sorted_and_narrow_values():
    n = 100_000
    rng = np.random.default_rng(1)
    ts = np.cumsum(rng.integers(1, 5000, n)) + 10**15
    t = pa.table(
        {
            "ts": pa.array(ts),
            "depth": pa.array(rng.integers(0, 12, n).astype(np.int64)),
            "flag": pa.array(rng.integers(0, 2, n).astype(bool)),
        }
    )
    packed = indexes.pack(t)
    assert packed.nbytes < t.nbytes / 6
    idx = indexes.PackedIndex(packed)
    assert np.array_equal(idx.array("ts"), ts)


def test_relative_and_derived_columns_are_read_back():
    ts = np.arange(0, 50_000, 7, dtype=np.int64)
    end = ts + 3 + ts % 5
    t = pa.table(
        {
            "ts": pa.array(ts),
            "end_ts": pa.array(end),
            "dur": pa.array(end - ts),
            "end_max": pa.array(np.maximum.accumulate(end)),
        }
    )
    packed = indexes.pack(t, derived={"dur": ("end_ts", "ts")}, relative={"end_ts": "ts", "end_max": "end_ts"})
    idx = indexes.PackedIndex(packed)
    assert "dur" not in packed.column_names  # derived: not stored
    for c in ("ts", "end_ts", "dur", "end_max"):
        assert np.array_equal(idx.array(c), t.column(c).to_numpy()), c
    v = idx.view("end_max")
    for x in (0, 5, 7000, 10**9):
        assert indexes.search(v, x, "right") == int(np.searchsorted(t.column("end_max").to_numpy(), x, side="right"))


def test_sparse_blocks_keep_mostly_null_columns_small_and_exact():
    """Regression: a column that is mostly null (TOD's arg3: 82 % of the spans) took a full
    code per row (14 bits for values up to 10,000); sparse blocks store a bitmap and the
    non-null codes only. Fails on the old layout (1.77 B a row)."""
    rng = np.random.default_rng(4)
    n = 20_000
    vals = rng.integers(1, 10_001, n)
    arr = pa.array(vals, pa.int64(), mask=rng.random(n) < 0.8)
    packed = indexes.pack(pa.table({"arg3": arr}))
    stored = sum(packed.column(c).nbytes for c in packed.column_names)
    assert stored < 0.6 * n  # bytes: 0.125 a row for the bitmap + 1.75 per non-null value
    idx = indexes.PackedIndex(packed)
    assert idx.column("arg3").to_pylist() == arr.to_pylist()
    rows = np.array([0, 1, 63, 64, 1023, 1024, 5000, n - 1], np.int64)
    assert idx.take(rows).column("arg3").to_pylist() == arr.take(pa.array(rows)).to_pylist()
    assert idx.slice(1000, 3000).column("arg3").to_pylist() == arr.slice(1000, 3000).to_pylist()


def test_malformed_packed_parts_are_refused():
    data, base, bits = _core.pack_int64(pa.array(np.arange(3000, dtype=np.int64)))
    with pytest.raises(ValueError):
        _core.PackedColumn(data, base, bits, 5000, False)
    with pytest.raises(ValueError):
        _core.PackedColumn(data.slice(0, 1), base.slice(0, 1), bits.slice(0, 1), 3000, False)


# -- the layout of a saved index: an old one is rebuilt ---------------------------------------


def _writes(n: int = 400) -> list[dict]:
    rng = np.random.default_rng(3)
    ev, ts = [], 100
    for _ in range(n):
        ts += int(rng.integers(0, 3))
        ev.append(
            {
                "type": "W",
                "ts": ts,
                "producer": int(rng.integers(1, 4)),
                "obj": int(rng.integers(1, 5)),
                "field": int(rng.integers(0, 4)),
                "value": int(rng.integers(-50, 50)),
            }
        )
    return ev


def test_index_saved_in_the_old_layout_is_rebuilt_not_misread(tmp_path):
    """An index saved before the packed layout (a plain Arrow table, no `format` in its
    params) under the trace's current signature: it is rebuilt and deleted, never read."""
    events = _writes()
    with tracehouse.open(tmp_path / "s", fsync="off") as store:
        build_trace(store, "t", events)
        spec = {"config": OBJ.to_json()}
        # The old layout: plain columns; values deliberately wrong so misreading it shows.
        old = pa.table(
            {
                "object": pa.array([1], pa.int32()),
                "field": pa.array([0], pa.int32()),
                "ts": pa.array([0], pa.int64()),
                "value": pa.array([12345], pa.int64()),
                "producer": pa.array([1], pa.int32()),
                "seq": pa.array([0], pa.int64()),
            }
        )
        rid = store.save_result(
            "table",
            "objects",
            indexes.TOOL,
            ["t"],
            params={"spec": spec, "signature": store.stamp("t")},
            table=old,
            table_format="arrow",
        )
        indexes.forget(store)
        for obj in (1, 2, 3, 4):
            for t in (99, 150, 300, 10**6):
                got = an.object_state(store, "t", obj, t, OBJ).to_pylist()
                assert {r["field"]: (r["value"], r["ts"]) for r in got} == ref_state(events, obj, t)
        left = store.results(trace="t", tool=indexes.TOOL, name="objects")
        assert rid not in [r["id"] for r in left]
        assert [r["params"]["format"] for r in left] == [indexes.FORMAT]


def test_indexes_of_a_tod_trace_take_about_the_trace_s_bytes(tmp_path):
    """All four indexes together: 7.1x the trace's bytes unpacked (1M events), 1.43x in the
    first packed layout at 200K events (1.24-1.31x at 10M-1M), 1.13x now (sparse blocks,
    seqs read through the density index; 0.98x at 10M events, `tracehouse bench analyze`)."""
    with tracehouse.open(tmp_path / "s", fsync="off") as store:
        from tracehouse.formats.tod.generate import generate_tod

        generate_tod(store, "tod", 200_000, seed=5)
        an.span_index(store, "tod")
        an.objects_index(store, "tod")
        an.density_index(store, "tod")
        from tracehouse.analysis.stack import locals_index

        locals_index(store, "tod", an.locals_config(store, "tod"))
        paths = [store.path / r["path"] for r in store.results(trace="tod", tool=indexes.TOOL)]
        assert len(paths) == 4
        total = sum(p.stat().st_size for p in paths)
        assert total <= 1.2 * store.trace("tod").bytes


@pytest.mark.parametrize("bulk", [False, True])
def test_seq_columns_read_through_the_density_index_equal_the_trace(tmp_path, monkeypatch, bulk):
    """The objects index's seq and the density index's seq are stored as differences (to
    the density index's seq of the same event; to the row's rank in its thread): they read
    back as the trace's seqs, timestamps tied within a thread included; guessed row by row
    (Rust) or in bulk (numpy, an index build of many rows)."""
    from tracehouse.analysis import event_streams

    monkeypatch.setattr(event_streams, "BULK_LOOKUPS", 0 if bulk else 10**9)
    events = _writes(600)  # ts steps 0-2: many writes of one thread share a ts
    with tracehouse.open(tmp_path / "s", fsync="off") as store:
        build_trace(store, "t", events)
        want = sorted((e["producer"], e["ts"], e["seq"]) for e in events)
        dens = an.density_index(store, "t")
        assert "seq" in dens.column_names
        got = sorted(zip(dens.array("ts").tolist(), dens.array("seq").tolist()))
        assert got == sorted((e["ts"], e["seq"]) for e in events)
        objs = an.objects_index(store, "t", OBJ)
        got = sorted(zip(objs.array("producer").tolist(), objs.array("ts").tolist(), objs.array("seq").tolist()))
        assert got == want
        hist = an.field_history(store, "t", 2, 1, OBJ).to_pylist()
        ref = [(e["ts"], e["producer"], e["seq"]) for e in events if e["obj"] == 2 and e["field"] == 1]
        assert sorted((r["ts"], r["producer"], r["seq"]) for r in hist) == sorted(ref)


def test_seq_columns_of_a_tod_trace_take_no_bits(tmp_path):
    """On TOD (a thread's events have distinct timestamps and consecutive seqs) the span
    index's seq and end_seq, the objects index's seq and the density index's seq take
    ~0 bits; before, 1.56, 1.04, 2.15 and 0.77 B a row (1M events)."""
    with tracehouse.open(tmp_path / "s", fsync="off") as store:
        from tracehouse.formats.tod.generate import generate_tod

        generate_tod(store, "tod", 100_000, seed=3)
        for name, idx, cols in (
            ("spans", an.span_index(store, "tod"), ("seq", "end_seq")),
            ("objects", an.objects_index(store, "tod"), ("seq",)),
            ("density", an.density_index(store, "tod"), ("seq",)),
        ):
            for p in indexes.parts(idx):
                for c in cols:
                    b = sum(p.packed.column(k).nbytes for k in (c, c + "#base", c + "#bits"))
                    assert b / p.num_rows < 0.05, (name, c, b / p.num_rows)
        # 35K field writes: their seqs were guessed in bulk (numpy), the spans' one by one.
        objs = an.objects_index(store, "tod")
        fw = store.scan("tod", "field_write", ["producer", "ts", "seq"])
        assert sorted(zip(*(objs.array(c).tolist() for c in ("producer", "ts", "seq")))) == sorted(
            zip(*(fw.column(c).to_pylist() for c in ("producer", "ts", "seq")))
        )
        sp = an.span_table(store, "tod")
        idx = an.span_index(store, "tod")
        order = np.argsort(idx.array("span_id"))
        for c in ("seq", "end_seq", "end_parent_seq"):
            assert idx.column(c).take(pa.array(order)).to_pylist() == sp.column(c).to_pylist(), c


# -- a growing trace: the index is extended with the appended segments ------------------------

LOC = LocalsConfig("W", frame="obj", var="field", value="value")


def _append(store, name: str, events: list[dict], seqs: dict[int, int], *, flush: bool = True) -> None:
    """Append W events (seq continuing per producer) to trace `name`, then flush (a new segment)."""
    for e in events:
        e["seq"] = seqs.get(e["producer"], 0)
        seqs[e["producer"]] = e["seq"] + 1
    store.append(
        name,
        "W",
        pa.table(
            {
                "ts": pa.array([e["ts"] for e in events], pa.int64()),
                "producer": pa.array([e["producer"] for e in events], pa.int32()),
                "seq": pa.array([e["seq"] for e in events], pa.int64()),
                **{c: pa.array([e[c] for e in events], pa.int64()) for c in ("obj", "field", "value")},
            }
        ),
    )
    if flush:
        store.flush(name)


def _ref_locals(events, producer, frame, t):
    out = {}
    for e in sorted(events, key=lambda e: (e["ts"], e["producer"], e["seq"])):
        if e["producer"] == producer and e["obj"] == frame and e["ts"] <= t:
            out[e["field"]] = (e["value"], e["ts"])
    return out


def _answers(store, events, probes):
    """Every index question over the trace, checked against the brute-force references."""
    out = []
    for obj in (1, 2, 3, 4):
        for t in probes:
            got = an.object_state(store, "t", obj, t, OBJ).to_pylist()
            assert {r["field"]: (r["value"], r["ts"]) for r in got} == ref_state(events, obj, t)
            out.append(got)
        for field in (0, 2):
            h = an.field_history(store, "t", obj, field, OBJ)
            want = sorted(
                (e["ts"], e["producer"], e["seq"], e["value"])
                for e in events
                if e["obj"] == obj and e["field"] == field
            )
            assert list(zip(*[h.column(c).to_pylist() for c in ("ts", "producer", "seq", "value")])) == want
            out.append(h.to_pylist())
        for p in (1, 2, 3):
            for t in probes:
                loc = an.frame_locals(store, "t", p, obj, t, LOC)
                assert dict(
                    zip(
                        loc.column("var").to_pylist(),
                        zip(loc.column("value").to_pylist(), loc.column("ts").to_pylist()),
                    )
                ) == _ref_locals(events, p, obj, t)
                out.append(loc.to_pylist())
    lo, hi = min(e["ts"] for e in events), max(e["ts"] for e in events) + 1
    dens = an.density(store, "t", 7, by="both", start=lo, end=hi)
    edges = np.array([lo + -(-b * (hi - lo) // 7) for b in range(8)])
    for r in dens.to_pylist():
        assert r["events"] == sum(
            1 for e in events if e["producer"] == r["producer"] and edges[r["bin"]] <= e["ts"] < edges[r["bin"] + 1]
        )
    out.append(dens.to_pylist())
    for p in (1, 2):
        c = an.cursor(store, "t", producers=[p], at=probes[0])
        page = c.next(15)
        want = sorted((e["ts"], e["producer"], e["seq"]) for e in events if e["producer"] == p and e["ts"] >= probes[0])
        assert list(zip(*[page.column(k).to_pylist() for k in ("ts", "producer", "seq")])) == want[:15]
        out.append(page.to_pylist())
    return out


def _rebuilt(store, events, probes):
    """The same answers from indexes built at once (every saved part deleted first)."""
    for r in store.results(trace="t", tool=indexes.TOOL):
        store.delete_result(r["id"])
    indexes.forget(store)
    return _answers(store, events, probes)


@pytest.mark.parametrize("flush_last", [True, False])
def test_index_extended_after_append_equals_rebuild_and_reference(tmp_path, flush_last):
    rng = np.random.default_rng(11)
    ts = [100]

    def batch(n):
        out = []
        for _ in range(n):
            ts[0] += int(rng.integers(0, 4))
            out.append(
                {
                    "type": "W",
                    "ts": ts[0],
                    "producer": int(rng.integers(1, 4)),
                    "obj": int(rng.integers(1, 5)),
                    "field": int(rng.integers(0, 4)),
                    "value": int(rng.integers(-50, 50)),
                }
            )
        return out

    events = batch(300)
    with tracehouse.open(tmp_path / "s", fsync="off", flush_rows=10_000_000, flush_interval_s=3600.0) as store:
        build_trace(store, "t", events)
        seqs: dict[int, int] = {}
        for e in events:
            seqs[e["producer"]] = max(seqs.get(e["producer"], 0), e["seq"] + 1)
        an.objects_index(store, "t", OBJ)
        an.density_index(store, "t")
        first = {r["name"]: r["id"] for r in store.results(trace="t", tool=indexes.TOOL)}
        for k, n in enumerate((40, 25, 500, 30)):
            more = batch(n)
            _append(store, "t", more, seqs, flush=flush_last or k < 3)
            events += more
            probes = [99, events[len(events) // 2]["ts"], events[-1]["ts"], events[-1]["ts"] + 5]
            got = _answers(store, events, probes)
            if k == 1:
                # Two small appends: the first parts were extended (kept), not rebuilt.
                now = {r["id"] for r in store.results(trace="t", tool=indexes.TOOL)}
                assert first["objects"] in now and first["density"] in now
                assert len([r for r in store.results(trace="t", tool=indexes.TOOL) if r["name"] == "objects"]) > 1
        # The big append merged levels: few parts, each row in one part.
        parts = [r for r in store.results(trace="t", tool=indexes.TOOL) if r["name"] == "objects"]
        assert 1 <= len(parts) <= 3
        seg_ids = [i for r in parts for i in r["params"]["segments"]]
        assert len(seg_ids) == len(set(seg_ids)) == len(store.segments_of("t", "W"))
        assert _rebuilt(store, events, probes) == got


def test_compaction_that_rewrote_segments_rebuilds_the_index(tmp_path):
    events = _writes(200)
    with tracehouse.open(tmp_path / "s", fsync="off") as store:
        build_trace(store, "t", events[:100])
        an.objects_index(store, "t", OBJ)
        seqs: dict[int, int] = {}
        for e in events[:100]:
            seqs[e["producer"]] = max(seqs.get(e["producer"], 0), e["seq"] + 1)
        _append(store, "t", events[100:], seqs)
        an.objects_index(store, "t", OBJ)
        before = {r["id"] for r in store.results(trace="t", tool=indexes.TOOL)}
        store.compact("t")
        indexes.forget(store)
        for obj in (1, 2, 3, 4):
            got = an.object_state(store, "t", obj, 10**6, OBJ).to_pylist()
            assert {r["field"]: (r["value"], r["ts"]) for r in got} == ref_state(events, obj, 10**6)
        after = store.results(trace="t", tool=indexes.TOOL)
        live = {g.id for g in store.segments_of("t", "W")}
        assert not before & {r["id"] for r in after}
        assert all(set(r["params"]["segments"]) <= live for r in after)


def test_web_ui_streams_of_an_index_in_parts_equal_one_built_at_once(tmp_path):
    """The web UI's density streams (one per type and thread) read from an index in parts
    are those of an index built at once."""
    from tracehouse.server.ui.app import UiState

    def streams(store):
        state = UiState(store, token=None, run_query=lambda sql, params=None: store.sql(sql, params))
        s = state.prep.streams("t", build=True)
        return sorted(
            (t, int(p), s.ts[o : o + c].tolist()) for t, p, o, c in zip(s.types, s.producers, s.offsets, s.counts)
        )

    events = _writes(300)
    with tracehouse.open(tmp_path / "s", fsync="off") as store:
        build_trace(store, "t", events[:150])
        an.density_index(store, "t")
        seqs: dict[int, int] = {}
        for e in events[:150]:
            seqs[e["producer"]] = max(seqs.get(e["producer"], 0), e["seq"] + 1)
        _append(store, "t", events[150:170], seqs)
        _append(store, "t", events[170:], seqs, flush=False)
        assert isinstance(an.density_index(store, "t"), indexes.MultiIndex)
        parts = streams(store)
        for r in store.results(trace="t", tool=indexes.TOOL):
            store.delete_result(r["id"])
        indexes.forget(store)
        store.flush("t")
        store.compact("t")
        assert parts == streams(store)
        assert sum(len(x[2]) for x in parts) == len(events)
