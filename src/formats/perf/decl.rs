//! The `perf` format, declared once (see `formats/decl.rs`): its two event types, its sniffer,
//! its parser's factory, the analyses' profile (samples are stack samples weighed by their
//! period) and example queries.

use crate::formats::decl::types::{I, S};
use crate::formats::decl::{param, EventTypeDecl, FormatDecl, Param, ParserDecl, Profile, SampleProfile};
use crate::formats::parser::{ChunkParser, Options};

const CPU: Param = param("cpu", I, "cpu", "CPU the record was taken on; null when perf script printed none");
const LEAF: Param =
    param("leaf", S, "text", "the function the record hit: its top frame's symbol, or [object] when unknown");
const DSO: Param = param("dso", S, "path", "the object (binary, library, [kernel.kallsyms]) of the top frame");
const STACK: Param = param(
    "stack",
    S,
    "text",
    "the call stack root first, symbols joined by ';' (flamegraph.pl's folded form); null without a frame",
);
const DEPTH: Param = param("depth", I, "count", "frames in the stack (0 without one)");

/// A counter's sample (`perf record -g`: cpu-clock, cycles, ...).
pub const SAMPLE: EventTypeDecl = EventTypeDecl {
    name: "sample",
    kind: "instant",
    params: &[
        CPU,
        param("event", S, "text", "the sampled event as perf names it (cpu-clock:ppp, cycles:u)"),
        param(
            "period",
            I,
            "event count",
            "the sample's period: events counted since the thread's last sample (nanoseconds of CPU time for \
             cpu-clock and task-clock); null when not printed",
        ),
        LEAF,
        DSO,
        STACK,
        DEPTH,
    ],
    doc: "a stack sample: where a thread was when the counter overflowed",
};

/// A tracepoint's record (`perf record -e sched:sched_switch`).
pub const TRACEPOINT: EventTypeDecl = EventTypeDecl {
    name: "tracepoint",
    kind: "instant",
    params: &[
        CPU,
        param("event", S, "text", "the tracepoint (subsystem:name, sched:sched_switch)"),
        param("fields", S, "text", "the tracepoint's fields as perf printed them"),
        LEAF,
        DSO,
        STACK,
        DEPTH,
    ],
    doc: "a tracepoint hit, with its call stack when recorded with -g",
};

/// The `perf` format.
pub const PERF: FormatDecl = FormatDecl {
    name: "perf",
    description: "perf script output (after perf record [-g] [-e EVENT]): stack samples and tracepoint events, \
                  per thread and CPU",
    event_types: &[SAMPLE, TRACEPOINT],
    priority: 65,
    sniff: Some(sniff),
    parser: Some(ParserDecl { options: &[], make }),
    profile: Profile {
        samples: Some(SampleProfile { event_type: "sample", stack: "stack", weight: Some("period") }),
        labels: &[("sample", "leaf", Some("event")), ("tracepoint", "event", None)],
        ..Profile::NONE
    },
    examples: &[
        (
            "hottest functions (where samples landed)",
            "SELECT leaf, dso, count(*) AS samples, round(100.0 * count(*) / sum(count(*)) OVER (), 2) AS pct\n\
             FROM {t}.sample GROUP BY ALL ORDER BY samples DESC LIMIT 20",
        ),
        (
            "samples per thread and CPU",
            "SELECT p.name AS thread, s.cpu, count(*) AS samples, sum(s.period) AS period\n\
             FROM {t}.sample s JOIN th.producers p ON p.trace = {s} AND p.id = s.producer\n\
             GROUP BY ALL ORDER BY samples DESC LIMIT 20",
        ),
        (
            "folded stacks (flamegraph.pl input)",
            "SELECT stack, sum(period) AS weight FROM {t}.sample\n\
             WHERE stack IS NOT NULL GROUP BY stack ORDER BY weight DESC LIMIT 50",
        ),
        ("tracepoints", "SELECT event, count(*) AS events FROM {t}.tracepoint GROUP BY event ORDER BY events DESC"),
    ],
    ..FormatDecl::BASE
};

fn make(o: &Options) -> Result<Box<dyn ChunkParser>, String> {
    Ok(Box::new(super::PerfParser::new(o.strict(), o.batch_rows(), o.max_line())))
}

/// The first line that is not blank or a comment is a perf script record header (see
/// `perf/mod.rs`), and what follows it (when the head holds more) is a frame, a blank line or
/// another header.
pub fn sniff(head: &[u8]) -> bool {
    let mut lines = head.split(|&b| b == b'\n').filter(|l| !l.starts_with(b"#"));
    let Some(first) = lines.find(|l| !l.iter().all(u8::is_ascii_whitespace)) else { return false };
    let mut tok = Vec::new();
    let Some(h) = super::parse_header(first.strip_suffix(b"\r").unwrap_or(first), &mut tok) else { return false };
    if h.event.is_empty() {
        return false;
    }
    match lines.next() {
        None | Some(b"") => true,
        Some(next) if next.starts_with(b"\t") || next.starts_with(b" ") => {
            let n = super::trim(next);
            n.is_empty() || super::parse_frame(n).is_some()
        }
        Some(next) => super::parse_header(next, &mut tok).is_some() || !head.ends_with(next),
    }
}
