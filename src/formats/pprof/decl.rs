//! The `pprof` format, declared once (see `formats/decl.rs`): its event type, its sniffer, its
//! parser's factory, the analyses' profile (a sample is a stack sample weighed by its value of
//! the default sample type) and example queries.

use crate::formats::decl::types::{I, S};
use crate::formats::decl::{param, EventTypeDecl, FormatDecl, Param, ParserDecl, Profile, SampleProfile};
use crate::formats::parser::{ChunkParser, Options};
use crate::formats::pbwire::{self, Value};

const PARAMS: &[Param] = &[
    param(
        "value",
        I,
        "as recorded",
        "the sample's value of the profile's default sample type (the last one unless it names another: \
         cpu nanoseconds for Go's CPU profile, inuse_space bytes for its heap profile)",
    ),
    param("count", I, "count", "the sample's value of the first sample type counted in `count` (Go's samples)"),
    param("values", S, "text", "every value as type/unit=value, joined by ','"),
    param("leaf", S, "text", "the function the sample is in (its innermost frame)"),
    param("file", S, "path", "the leaf function's source file"),
    param("line", I, "line", "the leaf frame's source line"),
    param("dso", S, "path", "the leaf frame's object (the mapping's file)"),
    param(
        "stack",
        S,
        "text",
        "the call stack root first, function names joined by ';' (flamegraph.pl's folded form); null without a \
         frame",
    ),
    param("depth", I, "count", "frames in the stack (inlined calls count as frames)"),
    param("labels", S, "text", "the sample's labels as key=value joined by ','"),
];

/// One pprof sample.
pub const SAMPLE: EventTypeDecl = EventTypeDecl {
    name: "sample",
    kind: "instant",
    params: PARAMS,
    doc: "a pprof sample: a call stack with its values (ts is the profile's start: pprof keeps no sample times)",
};

/// The `pprof` format.
pub const PPROF: FormatDecl = FormatDecl {
    name: "pprof",
    description: "pprof profile.proto (gzipped or not: Go's runtime/pprof, go tool pprof, pprof-rs ...): stack \
                  samples with their values",
    event_types: &[SAMPLE],
    priority: 30,
    sniff: Some(sniff),
    parser: Some(ParserDecl { options: &[], make }),
    profile: Profile {
        samples: Some(SampleProfile { event_type: "sample", stack: "stack", weight: Some("value") }),
        labels: &[("sample", "leaf", None)],
        ..Profile::NONE
    },
    examples: &[
        (
            "hottest functions (flat: where samples landed)",
            "SELECT leaf, sum(value) AS flat, sum(count) AS samples,\n\
             round(100.0 * sum(value) / sum(sum(value)) OVER (), 2) AS pct\n\
             FROM {t}.sample GROUP BY leaf ORDER BY flat DESC LIMIT 20",
        ),
        (
            "hottest source lines",
            "SELECT leaf, file, line, sum(value) AS flat FROM {t}.sample\n\
             GROUP BY ALL ORDER BY flat DESC LIMIT 20",
        ),
        (
            "folded stacks (flamegraph.pl input)",
            "SELECT stack, sum(value) AS weight FROM {t}.sample\n\
             WHERE stack IS NOT NULL GROUP BY stack ORDER BY weight DESC LIMIT 50",
        ),
    ],
    ..FormatDecl::BASE
};

fn make(o: &Options) -> Result<Box<dyn ChunkParser>, String> {
    Ok(Box::new(super::PprofParser::new(o.strict(), o.batch_rows())))
}

/// The head is a run of whole Profile fields (the last may be cut by the end of the head), each
/// of the wire type the schema gives its number, among them a sample type (field 1: a ValueType
/// of varints 1 and 2). Go writes `time_nanos` first, other producers `sample_type`.
pub fn sniff(head: &[u8]) -> bool {
    let mut b = head;
    let mut sample_type = false;
    while !b.is_empty() {
        // A field cut by the end of the head: what came before decides.
        let Some((num, v, n)) = pbwire::field(b) else { return sample_type };
        let ok = match (num, v) {
            (1, Value::Bytes(vt)) => {
                sample_type = pbwire::walk(vt, |n, v| matches!((n, v), (1 | 2, Value::Varint(_))));
                sample_type
            }
            (2..=6 | 11, Value::Bytes(_)) => true,
            (7..=10 | 12 | 14 | 15, Value::Varint(_)) => true,
            (13, Value::Varint(_) | Value::Bytes(_)) => true,
            _ => false,
        };
        if !ok {
            return false;
        }
        b = &b[n..];
    }
    sample_type
}
