//! The `perfetto` format, declared once (see `formats/decl.rs`): its event types, its sniffer,
//! its parser's factory, the analyses' profile and example queries.

use crate::formats::decl::types::{B, F, I, S};
use crate::formats::decl::{param, EventTypeDecl, FormatDecl, Param, ParserDecl, Profile, SpanProfile};
use crate::formats::parser::{ChunkParser, Options};
use crate::formats::pbwire::{self, Value};

const NAME: Param = param("name", S, "text", "the event's name (literal or interned)");
const CATEGORY: Param = param("category", S, "text", "its categories, joined by ','");
const ARGS: Param = param("args", S, "json", "its debug annotations as a JSON object");
const CPU: Param = param("cpu", I, "cpu", "the CPU");

/// A slice: a begin and its end on one track.
pub const SLICE: EventTypeDecl = EventTypeDecl {
    name: "slice",
    kind: "span",
    params: &[
        NAME,
        CATEGORY,
        ARGS,
        param("closed", B, "flag", "false for a slice the trace never ended (its dur is 0)"),
    ],
    doc: "a track event slice (TYPE_SLICE_BEGIN to its TYPE_SLICE_END on the same track); producer: the track",
};

/// An instant track event.
pub const INSTANT: EventTypeDecl = EventTypeDecl {
    name: "instant",
    kind: "instant",
    params: &[NAME, CATEGORY, ARGS],
    doc: "a track event instant (TYPE_INSTANT); producer: the track",
};

/// A counter value.
pub const COUNTER: EventTypeDecl = EventTypeDecl {
    name: "counter",
    kind: "counter",
    params: &[
        param("name", S, "text", "the counter track's name"),
        param("value", F, "as recorded", "the value (its unit is the track's unit attribute)"),
        param("int_value", I, "as recorded", "the value when it was an integer"),
    ],
    doc: "a counter track's value (TYPE_COUNTER); producer: the counter track",
};

/// A thread on a CPU, from ftrace's sched_switch.
pub const SCHED_SLICE: EventTypeDecl = EventTypeDecl {
    name: "sched_slice",
    kind: "span",
    params: &[
        CPU,
        param("tid", I, "tid", "the thread that ran (0: the idle task)"),
        param("comm", S, "text", "its command name"),
        param("prio", I, "priority", "its kernel priority"),
        param("end_state", S, "text", "the state it left the CPU in (R runnable/preempted, S sleeping, D disk ...)"),
    ],
    doc: "a thread running on a CPU, from one sched_switch to the next on that CPU; producer: the CPU",
};

/// A wakeup, from ftrace's sched_waking.
pub const SCHED_WAKING: EventTypeDecl = EventTypeDecl {
    name: "sched_waking",
    kind: "instant",
    params: &[
        CPU,
        param("tid", I, "tid", "the thread woken"),
        param("comm", S, "text", "its command name"),
        param("prio", I, "priority", "its kernel priority"),
        param("target_cpu", I, "cpu", "the CPU it is to run on"),
    ],
    doc: "a thread being woken (sched_waking); producer: the CPU that woke it",
};

/// A flow arrow between track events (`flow_ids`, `terminating_flow_ids`): the Chrome importer's
/// `flow` type, columns and all, so analyses and the Chrome exporter read both alike.
pub use crate::formats::chrome::decl::CHROME_FLOW as FLOW;

/// The `perfetto` format.
pub const PERFETTO: FormatDecl = FormatDecl {
    name: "perfetto",
    description: "Perfetto protobuf trace (.perfetto-trace, .pftrace; gzipped or not): track event slices, \
                  instants, counters and flows per track, ftrace scheduling per CPU",
    event_types: &[SLICE, INSTANT, COUNTER, SCHED_SLICE, SCHED_WAKING, FLOW],
    priority: 30,
    sniff: Some(sniff),
    parser: Some(ParserDecl { options: &[], make }),
    profile: Profile {
        // The parser pairs begins and ends into `slice` spans; nested by time per track.
        spans: Some(SpanProfile { begin: "slice", end: None, key: None, name: Some("name") }),
        labels: &[
            ("slice", "name", Some("category")),
            ("instant", "name", Some("category")),
            ("counter", "name", None),
            ("sched_slice", "comm", None),
            ("sched_waking", "comm", None),
        ],
        ..Profile::NONE
    },
    examples: &[
        (
            "slowest slices",
            "SELECT s.name, p.name AS track, s.dur / 1e6 AS ms FROM {t}.slice s\n\
             JOIN th.producers p ON p.trace = {s} AND p.id = s.producer ORDER BY s.dur DESC LIMIT 20",
        ),
        (
            "time by slice name",
            "SELECT name, count(*) AS n, sum(dur) / 1e6 AS total_ms, avg(dur) / 1e3 AS avg_us\n\
             FROM {t}.slice GROUP BY name ORDER BY total_ms DESC LIMIT 20",
        ),
        (
            "CPU time by thread (sched)",
            "SELECT comm, tid, sum(dur) / 1e6 AS on_cpu_ms, count(*) AS slices\n\
             FROM {t}.sched_slice WHERE tid <> 0 GROUP BY ALL ORDER BY on_cpu_ms DESC LIMIT 20",
        ),
        ("counters", "SELECT name, count(*) AS n, min(value), max(value), avg(value) FROM {t}.counter GROUP BY name"),
    ],
    ..FormatDecl::BASE
};

fn make(o: &Options) -> Result<Box<dyn ChunkParser>, String> {
    Ok(Box::new(super::PerfettoParser::new(o.strict(), o.batch_rows(), o.max_line())))
}

/// The head starts with a `Trace.packet` (field 1, length-delimited) whose fields, as far as the
/// head holds them, are TracePacket's with the wire types the schema gives the known ones, at
/// least one of them known.
pub fn sniff(head: &[u8]) -> bool {
    let Some(Ok((len, h))) = pbwire::delimited_head(head, 1) else { return false };
    let body = &head[h..head.len().min(h + len)];
    let (mut known, mut bad) = (0, false);
    let whole = pbwire::walk(body, |num, v| {
        let ok = match num {
            1 | 2 | 11 | 12 | 43 | 44 | 59 | 60 => matches!(v, Value::Bytes(_)),
            8 | 10 | 13 | 41 | 42 | 58 | 79 | 87 => matches!(v, Value::Varint(_)),
            _ => true,
        };
        if matches!(num, 1 | 2 | 8 | 10 | 11 | 12 | 13 | 41 | 42 | 43 | 44 | 58 | 59 | 60 | 79 | 87) {
            known += 1;
        }
        bad |= !ok;
        ok
    });
    !bad && known > 0 && (whole || body.len() < len)
}
