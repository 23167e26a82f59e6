//! The `chrome` format, declared once (see `formats/decl.rs`): its event types (the parser's
//! tables are built from them, plus the `arg_<key>` / `end_arg_<key>` columns it discovers in
//! `args`; Python reads them through `_core.format_declarations()`), its parser's factory and
//! options, its profile and example queries.

use crate::formats::decl::types::{B, F, I, S};
use crate::formats::decl::{param, EventTypeDecl, FormatDecl, Param, ParserDecl, Profile, SpanProfile};
use crate::formats::parser::{ChunkParser, OptKind, OptionDecl, Options};

const NAME: Param = param("name", S, "text", "event name");
const CAT: Param = param("cat", S, "text", "comma-separated categories ('' when absent)");
const THREAD_TS: Param = param("thread_ts", I, "ns", "thread clock at the start (tts), in nanoseconds");
const ARGS: Param = param(
    "args",
    S,
    "JSON",
    "args without a typed arg_ column (nested values, nulls, type \
                         conflicts), as a JSON object; null when none",
);
const END_ARGS: Param = param(
    "end_args",
    S,
    "JSON",
    "args of the closing E/e event without a typed end_arg_ \
                             column, as a JSON object",
);
const ID: Param = param("id", S, "text", "the event's id (or id2.local/id2.global), as written");
const ID_LOCAL: Param = param(
    "id_local",
    B,
    "flag",
    "true for id2.local (scoped to the process), false for \
                             id2.global, null for a plain id",
);

const CHROME_SLICE: EventTypeDecl = EventTypeDecl {
    name: "slice",
    kind: "span",
    params: &[
        NAME,
        CAT,
        param("phase", S, "phase", "X (complete event) or B (a B/E pair matched on its thread)"),
        THREAD_TS,
        param("thread_dur", I, "ns", "thread clock duration (tdur, or E.tts - B.tts), in nanoseconds"),
        ARGS,
        END_ARGS,
    ],
    doc: "a duration event: X, or B closed by the next E of the same thread",
};

const CHROME_SLICE_BEGIN: EventTypeDecl = EventTypeDecl {
    name: "slice_begin",
    kind: "begin",
    params: &[NAME, CAT, param("phase", S, "phase", "B (never closed by an E) or X (without dur)"), THREAD_TS, ARGS],
    doc: "a B event without its E (or an X without dur): a slice still open at the end of the trace",
};

const CHROME_SLICE_END: EventTypeDecl = EventTypeDecl {
    name: "slice_end",
    kind: "end",
    params: &[NAME, CAT, THREAD_TS, ARGS],
    doc: "an E event with no open B on its thread",
};

const CHROME_INSTANT: EventTypeDecl = EventTypeDecl {
    name: "instant",
    kind: "instant",
    params: &[NAME, CAT, param("scope", S, "scope", "s: g (global), p (process) or t (thread, the default)"), ARGS],
    doc: "an instant event (I or i)",
};

const CHROME_COUNTER: EventTypeDecl = EventTypeDecl {
    name: "counter",
    kind: "counter",
    params: &[
        NAME,
        CAT,
        ID,
        param("series", S, "text", "the args key of this series"),
        param("value", F, "as recorded", "the series' value from ts on"),
        param(
            "int_value",
            I,
            "as recorded",
            "the value exactly, when it was written as an integer (null for a \
             float); export writes it back as that integer",
        ),
    ],
    doc: "one series of a C event (a C event with n numeric args gives n consecutive rows: same ts, producer, \
          name and id)",
};

const CHROME_ASYNC_SLICE: EventTypeDecl = EventTypeDecl {
    name: "async_slice",
    kind: "span",
    params: &[NAME, CAT, ID, ID_LOCAL, ARGS, END_ARGS],
    doc: "a nestable async b/e pair (or legacy S/F) matched by category, id and scope",
};

const CHROME_ASYNC_BEGIN: EventTypeDecl = EventTypeDecl {
    name: "async_begin",
    kind: "begin",
    params: &[NAME, CAT, ID, ID_LOCAL, ARGS],
    doc: "an async b (or S) never closed",
};

const CHROME_ASYNC_END: EventTypeDecl = EventTypeDecl {
    name: "async_end",
    kind: "end",
    params: &[NAME, CAT, ID, ID_LOCAL, ARGS],
    doc: "an async e (or F) with no open b",
};

const CHROME_ASYNC_INSTANT: EventTypeDecl = EventTypeDecl {
    name: "async_instant",
    kind: "instant",
    params: &[NAME, CAT, ID, ID_LOCAL, ARGS],
    doc: "an async instant (n, or legacy T/p)",
};

/// A flow arrow; the perfetto format's flows are rows of this same type (`perfetto::flows`).
pub const CHROME_FLOW: EventTypeDecl = EventTypeDecl {
    name: "flow",
    kind: "link",
    params: &[
        NAME,
        CAT,
        ID,
        param(
            "dst_producer",
            I,
            "id",
            "producer of the next flow step (th.producers.id); null when the flow \
             stops here",
        ),
        param("dst_ts", I, "ns", "time of the next flow step, in nanoseconds; null when the flow stops here"),
        param("src_phase", S, "phase", "s, t or f: the phase of this step"),
        param("dst_phase", S, "phase", "t or f: the phase of the next step"),
        param("bp", S, "text", "binding point of the next step ('e': the enclosing slice)"),
    ],
    doc: "one arrow of a flow (s -> t ... -> f), matched by category, name and id",
};

const CHROME_SAMPLE: EventTypeDecl = EventTypeDecl {
    name: "sample",
    kind: "instant",
    params: &[
        NAME,
        CAT,
        param("sf", S, "id", "stack frame id (sf)"),
        param("stack", S, "JSON", "the stack array, as JSON"),
        ARGS,
    ],
    doc: "a sample event (P)",
};

const CHROME_OTHER: EventTypeDecl = EventTypeDecl {
    name: "other",
    kind: "instant",
    params: &[
        NAME,
        CAT,
        param("phase", S, "phase", "the event's phase (R, O, N, D, c, M with another name, ...)"),
        ID,
        param("args", S, "JSON", "the event's args, as JSON"),
    ],
    doc: "any other phase, kept as written",
};

/// The `chrome` format.
pub const CHROME: FormatDecl = FormatDecl {
    name: "chrome",
    description: "Chrome Trace Event Format JSON (chrome://tracing, Perfetto UI): array or {traceEvents: [...]}, \
                  optionally gzipped",
    event_types: &[
        CHROME_SLICE,
        CHROME_SLICE_BEGIN,
        CHROME_SLICE_END,
        CHROME_INSTANT,
        CHROME_COUNTER,
        CHROME_ASYNC_SLICE,
        CHROME_ASYNC_BEGIN,
        CHROME_ASYNC_END,
        CHROME_ASYNC_INSTANT,
        CHROME_FLOW,
        CHROME_SAMPLE,
        CHROME_OTHER,
    ],
    priority: 90,
    parser: Some(ParserDecl {
        options: &[OptionDecl {
            name: "max_arg_columns",
            kind: OptKind::Int,
            doc: "most arg_/end_arg_ columns per event type; further keys go to the args text",
        }],
        make,
    }),
    profile: Profile {
        // The importer already pairs B/E (and X) into `slice` spans.
        spans: Some(SpanProfile { begin: "slice", end: None, key: None, name: Some("name") }),
        ..Profile::NONE
    },
    examples: &[
        (
            "time per slice name",
            "SELECT name, count(*) AS slices, sum(dur) / 1e6 AS ms, max(dur) / 1e6 AS longest_ms\n\
             FROM {t}.slice GROUP BY name ORDER BY ms DESC LIMIT 20",
        ),
        ("longest slices", "SELECT ts, producer, name, cat, dur / 1e3 AS us FROM {t}.slice ORDER BY dur DESC LIMIT 20"),
        (
            "counter series",
            "SELECT name, series, count(*) AS samples, min(value), max(value)\n\
             FROM {t}.counter GROUP BY ALL ORDER BY samples DESC",
        ),
    ],
    ..FormatDecl::BASE
};

fn make(o: &Options) -> Result<Box<dyn ChunkParser>, String> {
    let opts = super::Options {
        strict: o.strict(),
        batch_rows: o.batch_rows(),
        max_arg_columns: o.int("max_arg_columns", 200) as usize,
        max_record: o.max_line(),
    };
    Ok(Box::new(super::ChromeParser::new(opts)))
}
