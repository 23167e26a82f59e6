"""Writes the Perfetto golden inputs with Perfetto's own Python TraceProtoBuilder (the `perfetto` package).

    python tests/formats/perfetto/make_traces.py            # rewrites */input
    python tests/formats/perfetto/make_traces.py --check    # exits 1 when an input differs

`track_events`: a process with two thread tracks and a counter track; nested slices with interned
names and categories on one sequence (incremental state cleared on its first packet, defaults
giving its track), literal names on another, instants with debug annotations, counter values.
`sched`: ftrace sched_switch and sched_waking on two CPUs. `flows`: slices and instants on three
threads joined by flows (`FLOW_EVENTS`): a flow across threads and back, one in the older varint
fields (`flow_ids_old`, `terminating_flow_ids_old`), an id reused after its flow terminated, a
flow the trace ends during, a first step never followed and a terminating id without a flow. `tests/formats/test_perfetto.py`
imports the same builder to check our import and Chrome export event for event (`EVENTS`).
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket, TrackEvent
from perfetto.trace_builder.proto_builder import TraceProtoBuilder

HERE = Path(__file__).parent
PID, MAIN, WORKER, CPU_COUNTER = 1234, 1234, 1240, 99
SEQ_A, SEQ_B = 7, 8
CLEARED, NEEDS = TracePacket.SEQ_INCREMENTAL_STATE_CLEARED, TracePacket.SEQ_NEEDS_INCREMENTAL_STATE

# (ts ns, type, track uuid, name, category, debug annotations): what track_events holds, in order.
EVENTS = [
    (1_000_000, "B", MAIN, "frame", "render", {"frame": 1}),
    (1_200_000, "B", MAIN, "layout", "render", {}),
    (1_500_000, "E", MAIN, None, None, {}),
    (1_600_000, "I", MAIN, "vsync", "input", {"late": True, "why": 'busy "gpu"'}),
    (2_000_000, "E", MAIN, None, None, {}),
    (1_100_000, "B", WORKER, "decode", "io", {"bytes": 4096}),
    (1_900_000, "E", WORKER, None, None, {}),
    (2_100_000, "B", WORKER, "decode", "io", {"bytes": 512}),
    (2_400_000, "E", WORKER, None, None, {}),
    (1_000_000, "C", CPU_COUNTER, None, None, 12),
    (1_500_000, "C", CPU_COUNTER, None, None, 80),
    (2_000_000, "C", CPU_COUNTER, None, None, 35),
]
TYPES = {
    "B": TrackEvent.TYPE_SLICE_BEGIN,
    "E": TrackEvent.TYPE_SLICE_END,
    "I": TrackEvent.TYPE_INSTANT,
    "C": TrackEvent.TYPE_COUNTER,
}


def track_events() -> bytes:
    b = TraceProtoBuilder()
    p = b.add_packet()
    p.track_descriptor.uuid = PID
    p.track_descriptor.process.pid = PID
    p.track_descriptor.process.process_name = "browser"
    for tid, name in ((MAIN, "main"), (WORKER, "decoder")):
        p = b.add_packet()
        p.track_descriptor.uuid = tid if tid != PID else PID * 10
        p.track_descriptor.thread.pid = PID
        p.track_descriptor.thread.tid = tid
        p.track_descriptor.thread.thread_name = name
    p = b.add_packet()
    p.track_descriptor.uuid = CPU_COUNTER
    p.track_descriptor.parent_uuid = PID
    p.track_descriptor.name = "cpu_percent"
    p.track_descriptor.counter.unit_name = "%"
    interned: dict[str, int] = {}
    cats: dict[str, int] = {}
    first = True
    for ts, kind, track, name, cat, ann in EVENTS:
        p = b.add_packet()
        p.timestamp = ts
        uuid = PID * 10 if track == MAIN else track
        if track == MAIN:
            # Sequence A: interned names and categories, its track from the sequence's defaults.
            p.trusted_packet_sequence_id = SEQ_A
            if first:
                p.sequence_flags = CLEARED
                p.trace_packet_defaults.track_event_defaults.track_uuid = uuid
                first = False
            else:
                p.sequence_flags = NEEDS
            if name is not None:
                if name not in interned:
                    interned[name] = len(interned) + 1
                    e = p.interned_data.event_names.add()
                    e.iid, e.name = interned[name], name
                if cat not in cats:
                    cats[cat] = len(cats) + 1
                    c = p.interned_data.event_categories.add()
                    c.iid, c.name = cats[cat], cat
                p.track_event.name_iid = interned[name]
                p.track_event.category_iids.append(cats[cat])
        else:
            p.trusted_packet_sequence_id = SEQ_B
            p.track_event.track_uuid = uuid
            if name is not None:
                p.track_event.name = name
                p.track_event.categories.append(cat)
        p.track_event.type = TYPES[kind]
        if kind == "C":
            p.track_event.counter_value = ann
        else:
            for k, v in ann.items():
                a = p.track_event.debug_annotations.add()
                a.name = k
                if isinstance(v, bool):
                    a.bool_value = v
                elif isinstance(v, int):
                    a.int_value = v
                else:
                    a.string_value = v
    return b.serialize()


# (cpu, ts, prev tid, prev state, next tid, next comm) sched_switch records; (cpu, ts, tid, comm, target) wakings.
SWITCHES = [
    (0, 10_000, 0, 0, 501, "make"),
    (0, 25_000, 501, 1, 502, "cc1"),
    (0, 60_000, 502, 0, 0, "swapper/0"),
    (1, 12_000, 0, 0, 600, "Xorg"),
    (1, 18_000, 600, 2, 501, "make"),
    (1, 40_000, 501, 1, 0, "swapper/1"),
]
WAKINGS = [(1, 11_000, 600, "Xorg", 1), (0, 24_000, 502, "cc1", 0)]


def sched() -> bytes:
    b = TraceProtoBuilder()
    for cpu in (0, 1):
        p = b.add_packet()
        p.ftrace_events.cpu = cpu
        events = [(ts, "s", rest) for c, ts, *rest in SWITCHES if c == cpu] + [
            (ts, "w", rest) for c, ts, *rest in WAKINGS if c == cpu
        ]
        for ts, kind, rest in sorted(events, key=lambda e: e[0]):
            e = p.ftrace_events.event.add()
            e.timestamp = ts
            if kind == "s":
                prev, state, nxt, comm = rest
                e.sched_switch.prev_pid, e.sched_switch.prev_state = prev, state
                e.sched_switch.next_pid, e.sched_switch.next_comm, e.sched_switch.next_prio = nxt, comm, 120
            else:
                tid, comm, target = rest
                e.sched_waking.pid, e.sched_waking.comm, e.sched_waking.target_cpu = tid, comm, target
                e.sched_waking.prio = 120
    return b.serialize()


IO = 1250
# (ts ns, type, thread tid, name, flow ids, terminating flow ids, the older fields?): what `flows` holds.
FLOW_EVENTS = [
    (1_000, "B", MAIN, "post", [1], [], False),
    (1_500, "E", MAIN, None, [], [], False),
    (2_000, "B", WORKER, "run", [1], [], False),
    (2_400, "I", WORKER, "note", [2], [], True),
    (2_800, "E", WORKER, None, [], [], False),
    (3_000, "B", MAIN, "reply", [], [1], False),
    (3_200, "E", MAIN, None, [], [], False),
    (4_000, "B", IO, "write", [], [2], True),
    (4_500, "E", IO, None, [], [], False),
    (5_000, "B", WORKER, "again", [1], [], False),
    (5_100, "E", WORKER, None, [], [], False),
    (6_000, "B", MAIN, "done", [], [1], False),
    (6_100, "E", MAIN, None, [], [], False),
    (7_000, "I", MAIN, "lonely", [3], [], False),
    (7_500, "I", IO, "orphan", [], [4], False),
    (8_000, "B", IO, "open-ended", [5], [], False),
    (8_200, "E", IO, None, [], [], False),
    (9_000, "B", WORKER, "tail", [5], [], False),
    (9_100, "E", WORKER, None, [], [], False),
]
FLOW_THREADS = {MAIN: "main", WORKER: "worker", IO: "io"}


def flows() -> bytes:
    b = TraceProtoBuilder()
    p = b.add_packet()
    p.track_descriptor.uuid = PID
    p.track_descriptor.process.pid = PID
    p.track_descriptor.process.process_name = "browser"
    for tid, name in FLOW_THREADS.items():
        p = b.add_packet()
        p.track_descriptor.uuid = tid * 10
        p.track_descriptor.thread.pid = PID
        p.track_descriptor.thread.tid = tid
        p.track_descriptor.thread.thread_name = name
    for ts, kind, tid, name, ids, ends, old in FLOW_EVENTS:
        p = b.add_packet()
        p.timestamp = ts
        p.trusted_packet_sequence_id = SEQ_B
        p.track_event.track_uuid = tid * 10
        p.track_event.type = TYPES[kind]
        if name is not None:
            p.track_event.name = name
        (p.track_event.flow_ids_old if old else p.track_event.flow_ids).extend(ids)
        (p.track_event.terminating_flow_ids_old if old else p.track_event.terminating_flow_ids).extend(ends)
    return b.serialize()


CASES = {"track_events": track_events, "sched": sched, "flows": flows}


def main() -> int:
    differ = []
    for name, make in CASES.items():
        data = make()
        path = HERE / name / "input"
        # sched is stored gzipped (as traces often travel), track_events as written.
        want = gzip.compress(data, mtime=0) if name == "sched" else data
        if "--check" in sys.argv:
            have = path.read_bytes()
            if (gzip.decompress(have) if name == "sched" else have) != data:
                differ.append(name)
        else:
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(want)
    if differ:
        print("differ:", ", ".join(differ))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
