"""The perfetto format: traces written by Perfetto's own Python TraceProtoBuilder imported, checked against
what the builder was told, and exported to Chrome JSON event for event.

The golden inputs (tests/formats/perfetto/*/input) are written by make_traces.py with the
`perfetto` package; here: they are what the builder writes today (rebuilt and compared byte for
byte), the slices, instants and counters against the builder's event list (nesting, interned
names and categories, sequence defaults, the incremental state flags, debug annotations), the
producers (threads under their process, the counter track under its parent), the per-CPU
scheduling spans against the sched_switch list, the Chrome export of the import against the same
lists event for event, a pipe, a damaged trace named by file and packet, and a large builder-made
trace cut into random chunks. Random bytes: tests/formats/test_native_fuzz.py.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

import tracehouse
from helpers import child_env
from tracehouse.cli import main
from tracehouse.errors import BadInput
from tracehouse.formats import registry
from tracehouse.formats.perfetto import importer as pf_importer

HERE = Path(__file__).parent / "perfetto"
sys.path.insert(0, str(HERE))
make_traces = pytest.importorskip("make_traces", reason="the perfetto package (its TraceProtoBuilder) is not installed")
TRACK_EVENTS, SCHED = HERE / "track_events" / "input", HERE / "sched" / "input"
FLOWS = HERE / "flows" / "input"
THREAD_NAMES = {make_traces.MAIN: "main", make_traces.WORKER: "decoder"}


def expected_slices() -> list[tuple]:
    """(thread, name, category, ts, dur, args) of each begin/end pair the builder wrote."""
    stacks: dict[int, list] = {}
    out = []
    for ts, kind, track, name, cat, ann in make_traces.EVENTS:
        if kind == "B":
            stacks.setdefault(track, []).append((ts, name, cat, ann))
        elif kind == "E":
            t0, n, c, a = stacks[track].pop()
            out.append((THREAD_NAMES[track], n, c, t0, ts - t0, a))
    return sorted(out, key=lambda r: (r[0], r[3]))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = tracehouse.open(tmp_path_factory.mktemp("perfetto") / "store")
    pf_importer.import_file(s, TRACK_EVENTS, "ui")
    pf_importer.import_file(s, SCHED, "sched")
    pf_importer.import_file(s, FLOWS, "flows")
    s.flush()
    yield s
    s.close()


def test_golden_inputs_are_what_the_builder_writes():
    assert (
        subprocess.run(
            [sys.executable, str(HERE / "make_traces.py"), "--check"], env=child_env(), timeout=120
        ).returncode
        == 0
    )


def test_sniffed_as_perfetto_and_nothing_else_takes_it():
    from tracehouse.formats.parser_loader import head_bytes

    for p in (TRACK_EVENTS, SCHED):
        assert registry.sniff(p) == "perfetto"
        head = head_bytes(p.read_bytes()[:65536])
        assert [n for n, imp in registry.importers().items() if imp.sniff(head)] == ["perfetto"]


def test_slices_instants_and_counters_are_the_builder_s(store):
    got = store.sql(
        "SELECT p.name AS thread, s.name, s.category, s.ts, s.dur, s.args, s.closed FROM ui.slice s "
        "JOIN th.producers p ON p.trace = 'ui' AND p.id = s.producer ORDER BY 1, s.ts"
    ).to_pylist()
    assert [
        (r["thread"], r["name"], r["category"], r["ts"], r["dur"], json.loads(r["args"] or "{}")) for r in got
    ] == expected_slices()
    assert all(r["closed"] for r in got)
    inst = store.sql("SELECT name, category, ts, args FROM ui.instant").to_pylist()
    assert inst == [
        {
            "name": "vsync",
            "category": "input",
            "ts": 1_600_000,
            "args": json.dumps({"late": True, "why": 'busy "gpu"'}, separators=(",", ":")),
        }
    ]
    ctr = store.sql("SELECT name, ts, value, int_value FROM ui.counter ORDER BY ts").to_pylist()
    assert [(r["name"], r["ts"], r["int_value"]) for r in ctr] == [
        ("cpu_percent", ts, v) for ts, k, _, _, _, v in make_traces.EVENTS if k == "C"
    ]


def test_tracks_are_producers_under_their_process(store):
    prods = {p["id"]: p for p in store.producers("ui")}
    by_name = {p["name"]: p for p in prods.values()}
    assert by_name["browser"]["kind"] == "process" and by_name["browser"]["parent"] is None
    for n in ("main", "decoder", "cpu_percent"):
        assert prods[by_name[n]["parent"]]["name"] == "browser", n
    assert by_name["decoder"]["kind"] == "thread" and by_name["cpu_percent"]["kind"] == "counter"


def test_sched_switch_is_per_cpu_thread_spans(store):
    want = []
    for cpu in (0, 1):
        sw = [s for s in make_traces.SWITCHES if s[0] == cpu]
        for a, b in zip(sw, sw[1:]):
            want.append((cpu, a[4], a[5], a[1], b[1] - a[1], {0: "R", 1: "S", 2: "D"}[b[3]]))
    got = store.sql("SELECT cpu, tid, comm, ts, dur, end_state FROM sched.sched_slice ORDER BY cpu, ts").to_pylist()
    assert [tuple(r.values()) for r in got] == want
    wake = store.sql("SELECT ts, tid, comm, target_cpu FROM sched.sched_waking ORDER BY ts").to_pylist()
    assert [tuple(r.values()) for r in wake] == sorted((ts, t, c, tc) for _, ts, t, c, tc in make_traces.WAKINGS)
    cpus = {p["name"] for p in store.producers("sched")}
    assert cpus == {"cpu 0", "cpu 1"}


def test_chrome_export_agrees_event_for_event(store, tmp_path):
    out = tmp_path / "ui.json"
    assert main(["--store", str(store.path), "export", "ui", "--format", "chrome", "--out", str(out), "--json"]) == 0
    events = json.loads(out.read_text())["traceEvents"]
    tids = {e["args"]["name"]: e["tid"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    xs = sorted(
        (e["tid"], e["name"], e.get("cat"), round(e["ts"] * 1000), round(e["dur"] * 1000))
        for e in events
        if e["ph"] == "X"
    )
    assert xs == sorted((tids[t], n, c, ts, d) for t, n, c, ts, d, _ in expected_slices())
    inst = [(e["name"], round(e["ts"] * 1000)) for e in events if e["ph"] == "i"]
    assert inst == [("vsync", 1_600_000)]
    cs = sorted((round(e["ts"] * 1000), e["name"]) for e in events if e["ph"] == "C")
    assert cs == [(ts, "cpu_percent") for ts, k, *_ in make_traces.EVENTS if k == "C"]
    # And back: our Chrome export imports as the same slices.
    assert main(["--store", str(tmp_path / "back"), "import", "chrome", str(out), "--name", "ui_back"]) == 0
    with tracehouse.open(tmp_path / "back", readonly=True) as b:
        back = b.sql("SELECT name, ts, dur FROM ui_back.slice ORDER BY ts, name").to_pylist()
    mine = store.sql("SELECT name, ts, dur FROM ui.slice ORDER BY ts, name").to_pylist()
    assert back == mine


def test_a_pipe_and_gzip(store, tmp_path):
    raw = gzip.decompress(SCHED.read_bytes())
    cmd = [
        sys.executable,
        "-m",
        "tracehouse.cli",
        "--store",
        str(tmp_path / "s"),
        "import",
        "perfetto",
        "-",
        "--name",
        "p",
        "--json",
    ]
    r = subprocess.run(cmd, input=raw, capture_output=True, env=child_env(), timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    with tracehouse.open(tmp_path / "s", readonly=True) as s:
        assert (
            s.sql("SELECT count(*) AS n FROM p.sched_slice").column("n")[0].as_py()
            == store.sql("SELECT count(*) AS n FROM sched.sched_slice").column("n")[0].as_py()
        )


def test_a_cut_trace_is_named_by_file_and_packet(tmp_path):
    bad = tmp_path / "cut.pftrace"
    data = TRACK_EVENTS.read_bytes()
    bad.write_bytes(data[: len(data) - 5])
    with tracehouse.open(tmp_path / "s") as s:
        with pytest.raises(BadInput) as e:
            pf_importer.import_file(s, bad, "cut", strict=True)
        assert "cut.pftrace" in str(e.value) and "ends inside a packet" in str(e.value)
        r = pf_importer.import_file(s, bad, "lenient")
        assert r.rejected == 1 and r.events > 0


def test_a_large_builder_trace_in_any_chunks_gives_the_same_rows(tmp_path):
    """10,000 slices on 4 threads with interned names, parsed whole and in odd-sized chunks."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket, TrackEvent
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder

    from tracehouse import _core

    b = TraceProtoBuilder()
    for t in range(4):
        p = b.add_packet()
        p.track_descriptor.uuid = 100 + t
        p.track_descriptor.thread.pid, p.track_descriptor.thread.tid = 1, 100 + t
    for i in range(2500):
        for t in range(4):
            for k, ty in enumerate((TrackEvent.TYPE_SLICE_BEGIN, TrackEvent.TYPE_SLICE_END)):
                p = b.add_packet()
                p.timestamp = i * 1000 + t * 10 + k * 5
                p.trusted_packet_sequence_id = 1 + t
                p.sequence_flags = (
                    TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
                    if i == 0 and k == 0
                    else TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
                )
                p.track_event.type = ty
                p.track_event.track_uuid = 100 + t
                if k == 0:
                    if i % 100 == 0:
                        e = p.interned_data.event_names.add()
                        e.iid, e.name = i // 100 + 1, f"step{i // 100}"
                    p.track_event.name_iid = i // 100 + 1
    data = b.serialize()

    def rows(chunk):
        parser = _core.NativeParser("perfetto", batch_rows=999)
        out = []
        for i in range(0, len(data), chunk):
            out += parser.feed(data[i : i + chunk])
        out += parser.finish()
        return sorted(
            r for _, bt in out for r in zip(*[bt.column(c).to_pylist() for c in ("ts", "producer", "dur", "name")])
        )

    whole = rows(len(data))
    assert len(whole) == 10_000 and {r[3] for r in whole} == {f"step{j}" for j in range(25)}
    assert all(r[2] == 5 for r in whole)
    assert rows(7) == whole and rows(4093) == whole


def test_slices_are_spans_for_the_call_tree_and_pprof(store, tmp_path, capsys):
    """The slices nest by time per track: `analyze tree` and the pprof export read them."""
    assert main(["--store", str(store.path), "analyze", "tree", "ui", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    by_name = {r["name"]: r for r in rows}
    assert by_name["layout"]["depth"] == 1 and by_name["frame"]["depth"] == 0
    assert by_name["frame"]["total_ns"] == 1_000_000 and by_name["frame"]["self_ns"] == 700_000
    assert by_name["decode"]["calls"] == 2 and by_name["decode"]["total_ns"] == 1_100_000
    from tracehouse.analysis import pprof_export

    stacks, vals, _ = pprof_export.profile_of(store, "ui")
    assert dict(zip(stacks, [v[1] for v in vals])) == {"frame": 700_000, "frame;layout": 300_000, "decode": 1_100_000}


# -- clock snapshots -----------------------------------------------------------------------------------


def test_issue34_timestamps_of_other_clocks_are_converted_through_the_clock_snapshots(tmp_path):
    """A trace written by TraceProtoBuilder whose packets are stamped in MONOTONIC (one sequence's
    default clock) and in REALTIME (per packet), with two snapshots drifting apart: each time is
    converted to BOOTTIME through the latest snapshot at or before it, as Perfetto's trace
    processor does; a clock no snapshot reads stays as written and is counted."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackEvent
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder

    BOOT, MONO, REAL, RAW = 6, 3, 1, 5
    b = TraceProtoBuilder()
    # Snapshot 1: boot 1,000,000 = mono 400,000 = real 10^18. Snapshot 2 (boot advanced by 50 more
    # than mono: a suspend): boot 2,000,050 = mono 1,400,000 = real 10^18 + 10^6.
    for boot, mono, real in ((1_000_000, 400_000, 10**18), (2_000_050, 1_400_000, 10**18 + 10**6)):
        p = b.add_packet()
        for cid, ts in ((BOOT, boot), (MONO, mono), (REAL, real)):
            c = p.clock_snapshot.clocks.add()
            c.clock_id, c.timestamp = cid, ts
    p = b.add_packet()
    p.trusted_packet_sequence_id = 7
    p.track_descriptor.uuid = 11
    p.track_descriptor.name = "t"
    p = b.add_packet()  # sequence 7's packets are in MONOTONIC unless they say otherwise
    p.trusted_packet_sequence_id = 7
    p.sequence_flags = 1
    p.trace_packet_defaults.timestamp_clock_id = MONO
    p.trace_packet_defaults.track_event_defaults.track_uuid = 11

    def event(ts, typ, name=None, clock=None):
        p = b.add_packet()
        p.trusted_packet_sequence_id = 7
        p.timestamp = ts
        if clock is not None:
            p.timestamp_clock_id = clock
        p.track_event.type = typ
        if name:
            p.track_event.name = name
        return p

    event(500_000, TrackEvent.TYPE_SLICE_BEGIN, "mono_early")  # snapshot 1: boot 1,100,000
    event(500_100, TrackEvent.TYPE_SLICE_END)
    event(1_500_000, TrackEvent.TYPE_SLICE_BEGIN, "mono_late")  # snapshot 2: boot 2,100,050
    event(1_500_300, TrackEvent.TYPE_SLICE_END)
    event(10**18 + 2 * 10**6, TrackEvent.TYPE_INSTANT, "real", clock=REAL)  # boot 3,000,050
    event(300_000, TrackEvent.TYPE_INSTANT, "before_any", clock=MONO)  # before snapshot 1: the first
    event(123, TrackEvent.TYPE_INSTANT, "boot", clock=BOOT)
    event(77, TrackEvent.TYPE_INSTANT, "raw", clock=RAW)  # no snapshot reads MONOTONIC_RAW
    path = tmp_path / "clocks.pftrace"
    path.write_bytes(b.serialize())
    with tracehouse.open(tmp_path / "s") as s:
        r = pf_importer.import_file(s, path, "clk")
        slices = s.sql('SELECT name, ts, dur FROM "clk".slice ORDER BY ts').to_pylist()
        instants = {r["name"]: r["ts"] for r in s.sql('SELECT name, ts FROM "clk".instant').to_pylist()}
    assert slices == [
        {"name": "mono_early", "ts": 1_100_000, "dur": 100},
        {"name": "mono_late", "ts": 2_100_050, "dur": 300},
    ]
    assert instants == {"real": 3_000_050, "before_any": 900_000, "boot": 123, "raw": 77}
    assert r.details["clock_snapshots"] == 2
    assert r.details["converted_timestamps"] == 6 and r.details["unconverted_timestamps"] == 1


def test_issue34_a_snapshot_s_primary_trace_clock_is_the_trace_s_clock(tmp_path):
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackEvent
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder

    b = TraceProtoBuilder()
    p = b.add_packet()
    p.clock_snapshot.primary_trace_clock = 3  # MONOTONIC
    for cid, ts in ((6, 5_000), (3, 1_000)):
        c = p.clock_snapshot.clocks.add()
        c.clock_id, c.timestamp = cid, ts
    # MONOTONIC stays; a packet that names no clock is BOOTTIME (the trace clock changed, not its default).
    for ts, clock, name in ((2_000, 3, "mono"), (6_000, None, "boot")):
        p = b.add_packet()
        p.trusted_packet_sequence_id = 1
        p.timestamp = ts
        if clock:
            p.timestamp_clock_id = clock
        p.track_event.type = TrackEvent.TYPE_INSTANT
        p.track_event.name = name
        p.track_event.track_uuid = 5
    path = tmp_path / "primary.pftrace"
    path.write_bytes(b.serialize())
    with tracehouse.open(tmp_path / "s") as s:
        pf_importer.import_file(s, path, "p")
        got = {r["name"]: r["ts"] for r in s.sql('SELECT name, ts FROM "p".instant').to_pylist()}
    assert got == {"mono": 2_000, "boot": 2_000}


@settings(max_examples=40, deadline=None)
@given(
    hst.lists(hst.tuples(hst.integers(0, 10**12), hst.integers(0, 10**12)), min_size=1, max_size=5),
    hst.lists(hst.integers(0, 2 * 10**12), min_size=1, max_size=8),
)
def test_issue34_clock_conversion_is_the_snapshot_rule(snaps, stamps):
    """Random snapshots of BOOTTIME and MONOTONIC and random MONOTONIC stamps: each converted time is
    the rule's (the last snapshot whose MONOTONIC reading is at or before it, else the first)."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackEvent
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder

    from tracehouse import _core

    b = TraceProtoBuilder()
    for boot, mono in snaps:
        p = b.add_packet()
        for cid, ts in ((6, boot), (3, mono)):
            c = p.clock_snapshot.clocks.add()
            c.clock_id, c.timestamp = cid, ts
    for i, ts in enumerate(stamps):
        p = b.add_packet()
        p.trusted_packet_sequence_id = 1
        p.timestamp, p.timestamp_clock_id = ts, 3
        p.track_event.type = TrackEvent.TYPE_INSTANT
        p.track_event.name = f"e{i}"
        p.track_event.track_uuid = 9
    parser = _core.NativeParser("perfetto")
    rows = parser.feed(b.serialize()) + parser.finish()
    got = {r["name"]: r["ts"] for t, batch in rows if t == "instant" for r in batch.to_pylist()}

    def rule(ts):
        best = None
        for boot, mono in snaps:
            if mono <= ts and (best is None or mono >= best[1]):
                best = (boot, mono)
        boot, mono = best or snaps[0]
        return max(0, ts - mono + boot)

    assert got == {f"e{i}": rule(ts) for i, ts in enumerate(stamps)}


def flow_arrows(events) -> tuple[list[tuple], int, int]:
    """Flows of `events` ((ts, kind B/E/I, thread, flow ids, terminating ids)) as Perfetto's trace
    processor joins them (ids global to the trace; a step: the event carrying the id, a slice at
    its start; the old varint fields the same ids): [(id, src thread, src ts, dst thread, dst ts,
    src phase, dst phase)] in Chrome's phases (s first, f last), first steps never followed,
    terminating ids without a flow."""
    pending: dict[int, tuple] = {}  # id -> (its last step, the arrow into it or None)
    open_at: dict[object, list[int]] = {}
    arrows, unmatched, unfollowed = [], 0, 0

    def arrow(i, src, dst, first, last):
        arrows.append((i, *src, *dst, "s" if first else "t", "f" if last else "t"))

    for ts, kind, thread, ids, ends in events:
        at = ts
        if kind == "B":
            open_at.setdefault(thread, []).append(ts)
        elif kind == "E":
            at = open_at[thread].pop()
        step = (thread, at)
        for i in ids:
            if i in pending:
                last, into = pending[i]
                if into is not None:
                    arrow(i, into[0], last, into[1], False)
                pending[i] = (step, (last, into is None))
            else:
                pending[i] = (step, None)
        for i in ends:
            if i not in pending:
                unmatched += 1
                continue
            last, into = pending.pop(i)
            if into is not None:
                arrow(i, into[0], last, into[1], False)
            arrow(i, last, step, into is None, True)
    for i, (last, into) in pending.items():
        if into is None:
            unfollowed += 1
        else:
            arrow(i, into[0], last, into[1], True)
    return sorted(arrows, key=lambda a: (a[2], a[0])), unfollowed, unmatched


def expected_flow_arrows() -> tuple[list[tuple], int, int]:
    """The golden `flows` case's arrows: [(id, src thread, src ts, dst thread, dst ts)], ..."""
    events = [
        (ts, kind, make_traces.FLOW_THREADS[tid], ids, ends)
        for ts, kind, tid, _name, ids, ends, _old in make_traces.FLOW_EVENTS
    ]
    arrows, unfollowed, unmatched = flow_arrows(events)
    return [a[:5] for a in arrows], unfollowed, unmatched


@settings(max_examples=60, deadline=None)
@given(
    hst.lists(
        hst.tuples(
            hst.integers(0, 2),
            hst.lists(hst.integers(1, 4), max_size=2, unique=True),
            hst.lists(hst.integers(1, 4), max_size=2, unique=True),
            hst.booleans(),
        ),
        max_size=40,
    )
)
def test_issue34_flows_of_any_instants_are_trace_processor_s_arrows(steps):
    """Random flow ids on instants of three threads (new or old fields, continuing and
    terminating, ids reused): the parser's rows are the reference rule's arrows, phases and all."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackEvent
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder

    from tracehouse import _core

    b = TraceProtoBuilder()
    for t in range(3):
        p = b.add_packet()
        p.track_descriptor.uuid = 10 + t
        p.track_descriptor.thread.pid, p.track_descriptor.thread.tid = 1, 10 + t
    events = []
    for n, (t, ids, ends, old) in enumerate(steps):
        p = b.add_packet()
        p.timestamp = 1000 * (n + 1)
        p.trusted_packet_sequence_id = 1
        p.track_event.type = TrackEvent.TYPE_INSTANT
        p.track_event.track_uuid = 10 + t
        (p.track_event.flow_ids_old if old else p.track_event.flow_ids).extend(ids)
        (p.track_event.terminating_flow_ids_old if old else p.track_event.terminating_flow_ids).extend(ends)
        events.append((1000 * (n + 1), "I", t, ids, ends))
    parser = _core.NativeParser("perfetto", batch_rows=7)
    out = parser.feed(b.serialize()) + parser.finish()
    cols = ("id", "producer", "ts", "dst_producer", "dst_ts", "src_phase", "dst_phase")
    got = sorted(
        (r for name, bt in out if name == "flow" for r in zip(*[bt.column(c).to_pylist() for c in cols])),
        key=lambda r: (r[2], int(r[0], 16)),
    )
    thread_of = {ts: t for ts, _k, t, _i, _e in events}
    producer = {r[1]: thread_of[r[2]] for r in got} | {r[3]: thread_of[r[4]] for r in got}
    assert len(set(producer.values())) == len(producer)  # one producer per thread
    want, _, _ = flow_arrows(events)
    assert [(int(r[0], 16), producer[r[1]], r[2], producer[r[3]], r[4], r[5], r[6]) for r in got] == want


def test_issue34_flows_are_the_chrome_flow_type_across_threads(store):
    """Flows across threads, in the new and the old fields, terminated, an id used again after
    its flow ended, a flow the trace ends during: the arrows trace processor's rule gives."""
    want, unfollowed, unmatched = expected_flow_arrows()
    got = store.sql(
        "SELECT f.id, p.name AS src, f.ts, q.name AS dst, f.dst_ts, f.src_phase, f.dst_phase, f.bp, f.name "
        "FROM flows.flow f JOIN th.producers p ON p.trace = 'flows' AND p.id = f.producer "
        "JOIN th.producers q ON q.trace = 'flows' AND q.id = f.dst_producer ORDER BY f.ts, f.id"
    ).to_pylist()
    assert [(int(r["id"], 16), r["src"], r["ts"], r["dst"], r["dst_ts"]) for r in got] == want
    assert len(want) == 5 and (unfollowed, unmatched) == (1, 1)
    # Chrome's phases: a chain s -> t ... -> f, every step bound to its enclosing slice.
    assert [(r["src_phase"], r["dst_phase"]) for r in got] == [
        ("s", "t"),
        ("t", "f"),
        ("s", "f"),
        ("s", "f"),
        ("s", "f"),
    ]
    assert {r["bp"] for r in got} == {"e"} and {r["name"] for r in got} == {"flow"}
    # The same event type as the chrome format's, column for column.
    chrome_flow = next(t for t in registry.format_of("chrome").event_types if t.name == "flow")
    assert store.event_types("flows")["flow"].params == chrome_flow.params


def test_issue34_flow_counts_are_in_the_import_report(tmp_path):
    with tracehouse.open(tmp_path / "s") as s:
        rep = pf_importer.import_file(s, FLOWS, "f")
    _, unfollowed, unmatched = expected_flow_arrows()
    assert rep.by_type["flow"] == 5
    assert (rep.details["flow_arrows"], rep.details["unfollowed_flows"], rep.details["unmatched_flow_ends"]) == (
        5,
        unfollowed,
        unmatched,
    )


def test_issue34_chrome_export_of_flows_agrees_event_for_event(store, tmp_path):
    out = tmp_path / "flows.json"
    assert main(["--store", str(store.path), "export", "flows", "--format", "chrome", "--out", str(out), "--json"]) == 0
    events = json.loads(out.read_text())["traceEvents"]
    threads = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    steps = [
        (e["ph"], int(e["id"], 16), threads[e["tid"]], round(e["ts"] * 1000))
        for e in events
        if e.get("ph") in ("s", "t", "f")
    ]
    want, _, _ = expected_flow_arrows()
    expected = []
    for n, (i, src, ts, dst, dts) in enumerate(want):
        chained = n > 0 and want[n - 1][0] == i and want[n - 1][3:] == (src, ts)
        ends = not any(w[0] == i and w[1:3] == (dst, dts) for w in want[n + 1 :])
        if not chained:
            expected.append(("s", i, src, ts))
        expected.append(("f" if ends else "t", i, dst, dts))
    assert steps == expected
    assert all(e.get("bp") == "e" for e in events if e.get("ph") in ("t", "f"))
    # And back: the Chrome importer reads our export as the same arrows.
    assert main(["--store", str(tmp_path / "back"), "import", "chrome", str(out), "--name", "fb"]) == 0
    q = (
        "SELECT f.id, p.name AS src, f.ts, q.name AS dst, f.dst_ts, f.src_phase, f.dst_phase FROM {t}.flow f "
        "JOIN th.producers p ON p.trace = '{t}' AND p.id = f.producer "
        "JOIN th.producers q ON q.trace = '{t}' AND q.id = f.dst_producer ORDER BY f.ts, f.id"
    )
    with tracehouse.open(tmp_path / "back", readonly=True) as b:
        back = b.sql(q.format(t="fb")).to_pylist()
    mine = store.sql(q.format(t="flows")).to_pylist()
    strip = lambda rows: [{**r, "src": r["src"].split("/")[-1], "dst": r["dst"].split("/")[-1]} for r in rows]  # noqa: E731
    assert strip(back) == strip(mine)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _packets(path: Path) -> list[bytes]:
    """The packets of a trace (each `Trace.packet` field's bytes)."""
    data, out, pos = path.read_bytes(), [], 0
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    while pos < len(data):
        assert data[pos] == 0x0A
        pos += 1
        n = shift = 0
        while True:
            b = data[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        out.append(data[pos : pos + n])
        pos += n
    return out


GOLDEN_PACKETS = _packets(TRACK_EVENTS) + _packets(SCHED)


@settings(max_examples=150, deadline=None)
@given(
    hst.lists(
        hst.tuples(
            hst.sampled_from(range(len(GOLDEN_PACKETS))),
            hst.lists(hst.tuples(hst.integers(0, 1 << 16), hst.integers(0, 255), hst.booleans()), max_size=3),
        ),
        min_size=1,
        max_size=25,
    ),
    hst.lists(hst.integers(0, 4000), max_size=6),
)
def test_issue34_damaged_packets_are_rejected_by_packet_and_offset_in_any_chunks(picked, cuts):
    """The builder's packets, some bytes of each changed, inserted or cut (the framing kept):
    the hand-written decoder never crashes, each problem names its packet (number and byte
    offset of its frame) and what was wrong, and the chunking changes nothing."""
    from tracehouse import _core

    data, starts = bytearray(), []
    for i, edits in picked:
        body = bytearray(GOLDEN_PACKETS[i])
        for at, byte, insert in edits:
            k = at % (len(body) + 1)
            if insert or k == len(body):
                body.insert(k, byte)
            else:
                body[k] = byte
        starts.append(len(data))
        data += b"\x0a" + _varint(len(body)) + body
    data = bytes(data)

    def parse(cut_at):
        p = _core.NativeParser("perfetto", batch_rows=7)
        rows, prev = [], 0
        for c in sorted({min(c, len(data)) for c in cut_at}) + [len(data)]:
            rows += p.feed(data[prev:c])
            prev = c
        rows += p.finish()
        got = sorted((t, sorted(map(repr, b.to_pylist()))) for t, b in rows)
        return got, p.stats, p.problems

    got, whole = parse(cuts), parse([])
    assert got == whole
    stats, problems = whole[1], whole[2]
    assert stats["packets"] == len(picked)
    for line, offset, reason in problems:
        assert starts[line - 1] == offset and reason, (line, offset, reason)


CHROME_STARTUP = HERE / "chrome" / "startup.pftrace.gz"


def _chrome_slice_begins(data: bytes) -> list[int]:
    """The begin times of every slice in a Chrome trace, worked out here from the protos (not by
    the importer): a sequence's clock a snapshot marks incremental stamps deltas in its unit,
    summed from the snapshot's reading; the sum goes to the trace clock through that snapshot."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

    t = Trace()
    t.ParseFromString(data)
    trace_clock = 6
    for p in t.packet:
        if p.HasField("clock_snapshot") and p.clock_snapshot.primary_trace_clock:
            trace_clock = p.clock_snapshot.primary_trace_clock
    last, snap, default = {}, {}, {}
    begins = []
    for p in t.packet:
        seq = p.trusted_packet_sequence_id
        if p.HasField("trace_packet_defaults") and p.trace_packet_defaults.HasField("timestamp_clock_id"):
            default[seq] = p.trace_packet_defaults.timestamp_clock_id
        if p.HasField("clock_snapshot"):
            readings = {c.clock_id: c.timestamp * (c.unit_multiplier_ns or 1) for c in p.clock_snapshot.clocks}
            for c in p.clock_snapshot.clocks:
                if c.is_incremental:
                    last[seq, c.clock_id] = (readings[c.clock_id], c.unit_multiplier_ns or 1)
                    snap[seq, c.clock_id] = (readings[c.clock_id], readings[trace_clock])
        clock = p.timestamp_clock_id or default.get(seq, 6)
        if (seq, clock) not in last:
            assert not p.HasField("track_event"), "Chrome stamps its track events on its incremental clock"
            continue
        value, unit = last[seq, clock]
        last[seq, clock] = (value + p.timestamp * unit, unit)
        if p.HasField("track_event") and p.track_event.type == 1:  # TYPE_SLICE_BEGIN
            reading, trace_reading = snap[seq, clock]
            begins.append(value + p.timestamp * unit - reading + trace_reading)
    return sorted(begins)


def test_a_chrome_trace_on_its_incremental_clock_gets_the_trace_clocks_times(tmp_path):
    """Chromium's own startup trace (`--trace-startup-format=proto`): its track events are
    stamped on sequence clock 64, µs deltas from the sequence's clock snapshot. Read as absolute
    times they were deltas (the whole trace in 0-0.5 ms); every slice begins where the protos
    say, on the trace's MONOTONIC clock, within the 1 s the browser traced."""
    data = gzip.decompress(CHROME_STARTUP.read_bytes())
    want = _chrome_slice_begins(data)
    assert len(want) > 10_000
    with tracehouse.open(tmp_path / "s") as store:
        r = pf_importer.import_file(store, CHROME_STARTUP, "cr")
        assert r.details.get("unconverted_timestamps", 0) == 0 and r.details["converted_timestamps"] > 0
        got = [row["ts"] for row in store.sql("SELECT ts FROM cr.slice ORDER BY ts").to_pylist()]
        span = store.sql("SELECT (max(ts) - min(ts)) / 1e9 AS s FROM cr.slice").to_pylist()[0]["s"]
    assert got == want
    assert 0.5 < span < 3
