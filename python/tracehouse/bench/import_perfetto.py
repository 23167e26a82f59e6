"""The Perfetto case of `tracehouse bench import`: a protobuf trace written with Perfetto's own TraceProtoBuilder.

Owns the workload and its peers. The template is what an instrumented app's SDK writes: one
process with 8 thread tracks and a counter track, each thread on its own sequence with interned
event names and categories (incremental state cleared on its first packet, the track from the
sequence's defaults), slices nested 3 deep with a debug annotation on the outer one, an instant
and a counter value per frame; and the kernel's side as traced_probes writes it, an ftrace
bundle per CPU and frame of 4 `sched_switch` between the workers and idle on 2 CPUs (12 % of
the events). The template's packets (`perfetto` package's TracePacket messages, the ones its
TraceProtoBuilder writes) are written again for each copy with new track uuids, thread ids and
sequence ids and times moved past the previous copy, so each copy is new threads (2M events:
62 copies, 8 s); the unit is the event in the file (a track event: a slice's begin and its end
are two; an ftrace event), not the row stored (a slice is one).

Peers on the headline file: reading it (the bound of any import), Google's protobuf parser
(upb, the C parser under the `protobuf` package) decoding every packet into messages with
nothing stored (what a Python importer would start from), the Rust parser alone with its
batches dropped, and our Chrome JSON import of the same trace (exported by us).
"""

from __future__ import annotations

import time
from pathlib import Path

from ..errors import NotFound
from .import_ import Case, Input, Peer

THREADS = 8
FRAMES = 500  # per thread in the template
CPUS = 2
SWITCHES = 4  # sched_switch events per CPU per frame, one ftrace bundle per CPU per frame
COPY_STEP = 1_000_000  # uuid, tid and sequence id offset per copy
NAMES = ["frame", "layout", "paint", "decode", "raster", "commit"]


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _template():
    """The template's packets (TracePacket messages) and the span of its times."""
    try:
        from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket, TrackEvent
    except ImportError:
        raise NotFound(
            "the perfetto package is not installed (pip install perfetto: its TraceProtoBuilder's "
            "messages write the workload)"
        ) from None
    packets = []
    p = TracePacket()
    p.track_descriptor.uuid = 1
    p.track_descriptor.process.pid = 1
    p.track_descriptor.process.process_name = "app"
    packets.append(p)
    p = TracePacket()
    p.track_descriptor.uuid = 2
    p.track_descriptor.parent_uuid = 1
    p.track_descriptor.name = "fps"
    packets.append(p)
    for t in range(THREADS):
        p = TracePacket()
        p.track_descriptor.uuid = 10 + t
        p.track_descriptor.thread.pid = 1
        p.track_descriptor.thread.tid = 10 + t
        p.track_descriptor.thread.thread_name = f"worker-{t}"
        packets.append(p)
    B, E, I, C = (  # noqa: E741 - the track event types' own letters
        TrackEvent.TYPE_SLICE_BEGIN,
        TrackEvent.TYPE_SLICE_END,
        TrackEvent.TYPE_INSTANT,
        TrackEvent.TYPE_COUNTER,
    )
    for t in range(THREADS):
        seq = 100 + t
        for f in range(FRAMES):
            base = f * 16_000_000 + t * 1000
            evs = [
                (base, B, 0),
                (base + 1_000_000, B, 1),
                (base + 2_000_000, B, 2 + f % 4),
                (base + 5_000_000, E, None),
                (base + 6_000_000, I, 1),
                (base + 8_000_000, E, None),
                (base + 12_000_000, E, None),
            ]
            for k, (ts, ty, name) in enumerate(evs):
                p = TracePacket()
                p.timestamp = ts
                p.trusted_packet_sequence_id = seq
                if f == 0 and k == 0:
                    p.sequence_flags = TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
                    p.trace_packet_defaults.track_event_defaults.track_uuid = 10 + t
                    for i, n in enumerate(NAMES):
                        e = p.interned_data.event_names.add()
                        e.iid, e.name = i + 1, n
                    c = p.interned_data.event_categories.add()
                    c.iid, c.name = 1, "app"
                else:
                    p.sequence_flags = TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
                p.track_event.type = ty
                if name is not None:
                    p.track_event.name_iid = name + 1
                    p.track_event.category_iids.append(1)
                if k == 0:
                    a = p.track_event.debug_annotations.add()
                    a.name, a.int_value = "frame", f
                packets.append(p)
            if t == 0:
                p = TracePacket()
                p.timestamp = base + 12_000_000
                p.trusted_packet_sequence_id = 99
                p.track_event.type = C
                p.track_event.track_uuid = 2
                p.track_event.counter_value = 55 + f % 10
                packets.append(p)
    # The kernel's side: each CPU's switches between the worker threads (and idle, pid 0), one
    # ftrace bundle per CPU and frame as traced_probes writes them (cpu, then its events).
    for f in range(FRAMES):
        for cpu in range(CPUS):
            p = TracePacket()
            p.trusted_packet_sequence_id = 2
            b = p.ftrace_events
            b.cpu = cpu
            for k in range(SWITCHES):
                i = f * SWITCHES + k
                prev, nxt = _on_cpu(cpu, i - 1), _on_cpu(cpu, i)
                e = b.event.add()
                e.timestamp = f * 16_000_000 + k * 4_000_000 + cpu * 500 + 100
                e.pid = prev
                s = e.sched_switch
                s.prev_pid, s.prev_comm, s.prev_prio = prev, _comm(prev), 120
                s.prev_state = 1 if k % 2 else 0
                s.next_pid, s.next_comm, s.next_prio = nxt, _comm(nxt), 120
            packets.append(p)
    return packets, FRAMES * 16_000_000 + 1_000_000


def _on_cpu(cpu: int, i: int) -> int:
    """The thread on `cpu` after its `i`th switch of the template: the CPU's half of the
    workers in turn, idle (0) every fifth."""
    if i < 0 or i % 5 == 4:
        return 0
    return 10 + cpu + CPUS * (i % (THREADS // CPUS))


def _comm(pid: int) -> str:
    return f"worker-{pid - 10}" if pid else "swapper"


def _events(p) -> int:
    """The events a packet holds: a track event, or an ftrace bundle's events."""
    if p.HasField("track_event"):
        return 1
    return len(p.ftrace_events.event) if p.HasField("ftrace_events") else 0


def write(out: Path, events: int) -> tuple[int, int]:
    """Writes copies of the template until `events` track events; returns (copies, events)."""
    packets, span = _template()
    written = copy = 0
    with open(out, "wb") as f:
        while written < events:
            parts = []
            for p in packets:
                n = _events(p)
                if written >= events and n:
                    continue
                q = type(p)()
                q.CopyFrom(p)
                off = copy * COPY_STEP
                if q.HasField("track_descriptor"):
                    d = q.track_descriptor
                    d.uuid += off
                    if d.HasField("parent_uuid"):
                        d.parent_uuid += off
                    if d.HasField("process"):
                        d.process.pid += off
                    if d.HasField("thread"):
                        d.thread.pid += off
                        d.thread.tid += off
                elif q.HasField("ftrace_events"):
                    # The CPUs are the same; the threads on them the copy's (idle stays 0).
                    for e in q.ftrace_events.event:
                        e.timestamp += copy * span
                        s = e.sched_switch
                        poff = off if e.pid else 0
                        e.pid += poff
                        s.prev_pid += off if s.prev_pid else 0
                        s.next_pid += off if s.next_pid else 0
                    written += n
                else:
                    q.timestamp += copy * span
                    q.trusted_packet_sequence_id += off
                    if q.HasField("trace_packet_defaults"):
                        q.trace_packet_defaults.track_event_defaults.track_uuid += off
                    if q.track_event.HasField("track_uuid"):
                        q.track_event.track_uuid += off
                    written += n
                b = q.SerializeToString()
                parts.append(b"\x0a" + _varint(len(b)) + b)
            f.write(b"".join(parts))
            copy += 1
    return copy, written


def build(workdir: Path, sizes: list[int]) -> list[Input]:
    t0 = time.perf_counter()
    inputs = []
    for n in sorted(sizes):
        path = workdir / f"perfetto-{n}.pftrace"
        copies, events = write(path, n)
        inputs.append(
            Input(
                path,
                events,
                path.stat().st_size,
                {
                    "copies": copies,
                    "template": f"TraceProtoBuilder messages: {THREADS} threads x {FRAMES} frames of slices "
                    "nested 3 deep with interned names, an instant and a counter per frame; "
                    f"{SWITCHES} sched_switch per CPU and frame on {CPUS} CPUs",
                    "build_s": round(time.perf_counter() - t0, 2),
                },
            )
        )
    return inputs


def peer_read(inp: Input) -> Peer:
    t0 = time.perf_counter()
    with open(inp.path, "rb") as f:
        while f.read(4 << 20):
            pass
    return Peer("read", "reading the file in 4 MB chunks (the bound)", time.perf_counter() - t0, inp.units)


def peer_upb(inp: Input) -> Peer:
    """Google's protobuf (upb) decoding the whole trace into messages, counting track events."""
    try:
        from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace
    except ImportError:
        return Peer("protobuf (upb)", "Google's protobuf C parser", None, None, note="perfetto not installed")
    from google.protobuf.internal import api_implementation

    t0 = time.perf_counter()
    trace = Trace.FromString(inp.path.read_bytes())
    n = sum(_events(p) for p in trace.packet)
    return Peer(
        "protobuf (upb)",
        f"Google's protobuf ({api_implementation.Type()}) decoding every packet into messages, nothing stored",
        time.perf_counter() - t0,
        n,
    )


def peer_parse_only(inp: Input) -> Peer:
    """The Rust parser alone, batches dropped: how much of the import is parsing."""
    from .. import _core
    from ..formats.parser_loader import read_chunks

    p = _core.NativeParser("perfetto")
    t0 = time.perf_counter()
    for chunk in read_chunks(inp.path):
        p.feed(chunk)
    p.finish()
    s = p.stats
    return Peer(
        "tracehouse parse",
        "Rust parser only, batches dropped (no store)",
        time.perf_counter() - t0,
        # A CPU's first switch starts its first sched_slice: each CPU has one switch more than slices.
        2 * s["slices"] - s["unclosed_slices"] + s["instants"] + s["counters"] + s["sched_slices"] + CPUS,
    )


def peer_chrome(inp: Input) -> Peer:
    """Our Chrome JSON importer on the same trace: the headline file imported (not timed) and
    exported as Chrome JSON by our exporter, that file imported in a child process as ours is."""
    import shutil

    import tracehouse

    from ..formats import registry
    from ..formats.chrome.exporter import export
    from .import_ import _run_child

    work = inp.path.parent / "chrome-peer"
    work.mkdir(exist_ok=True)
    try:
        with tracehouse.open(work / "source", fsync="off") as s:
            registry.importer("perfetto").import_file(s, inp.path, "source")
            export(s, "source", work / "same.json")
        size = (work / "same.json").stat().st_size
        r = _run_child("chrome", work / "same.json", work / "store")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Peer(
        "tracehouse import chrome",
        f"our Chrome JSON import of the same trace (our export of it: {r['events']:,} JSON events, "
        f"{size / 1e6:.0f} MB), parse + store",
        r["seconds"],
        inp.units,
    )


CASE = Case(
    name="perfetto",
    unit="events",
    importer="perfetto",
    default_size=2_000_000,
    build=build,
    peers=(peer_read, peer_upb, peer_parse_only, peer_chrome),
    target=1_000_000,
    target_text=">= 1M track events/s parsed and stored",
    bytes_per_unit=20,
)
