//! The `paje` format, declared once (see `formats/decl.rs`): its event types (the parser's tables
//! are built from them; Python reads them through `_core.format_declarations()`), its parser's
//! factory and options, its profile and example queries.

use crate::formats::decl::types::{F, I, S};
use crate::formats::decl::{param, EventTypeDecl, FormatDecl, Param, ParserDecl, Profile};
use crate::formats::parser::{ChunkParser, OptKind, OptionDecl, Options};

const EXTRA: Param = param(
    "extra",
    S,
    "JSON",
    "fields beyond the standard ones of the event's %EventDef, as a \
                          JSON object of strings",
);

const PAJE_STATE: EventTypeDecl = EventTypeDecl {
    name: "state",
    kind: "span",
    params: &[
        param("state_type", S, "text", "name of the state type (PajeDefineStateType)"),
        param("value", S, "text", "the state held (entity value name, or the value as written)"),
        param("depth", I, "levels", "nesting: 0 for a set state, n for the n-th pushed one"),
        EXTRA,
    ],
    doc: "a state held by a container from Set/PushState until Pop/Set/ResetState, its destruction or the trace \
          end",
};

const PAJE_EVENT: EventTypeDecl = EventTypeDecl {
    name: "event",
    kind: "instant",
    params: &[
        param("event_type", S, "text", "name of the event type (PajeDefineEventType)"),
        param("value", S, "text", "the event's value"),
        EXTRA,
    ],
    doc: "PajeNewEvent",
};

const PAJE_VARIABLE: EventTypeDecl = EventTypeDecl {
    name: "variable",
    kind: "counter",
    params: &[
        param("variable_type", S, "text", "name of the variable type (PajeDefineVariableType)"),
        param("value", F, "as recorded", "the variable's value from ts on, after this operation"),
        param("op", S, "text", "set, add or sub (PajeSet/Add/SubVariable)"),
        param("operand", F, "as recorded", "the number the line carried"),
        EXTRA,
    ],
    doc: "a variable's new value",
};

const PAJE_LINK: EventTypeDecl = EventTypeDecl {
    name: "link",
    kind: "link",
    params: &[
        param("link_type", S, "text", "name of the link type (PajeDefineLinkType)"),
        param("value", S, "text", "the value of the start (PajeStartLink)"),
        param("key", S, "text", "the key matching start and end"),
        param("dst_producer", I, "id", "the end container (th.producers.id); null when the link never ended"),
        param("dst_ts", I, "ns", "time of the end, in nanoseconds; null when the link never ended"),
        EXTRA,
    ],
    doc: "a link from its start container (producer, ts) to its end container",
};

const PAJE_LINK_END: EventTypeDecl = EventTypeDecl {
    name: "link_end",
    kind: "end",
    params: &[
        param("link_type", S, "text", "name of the link type"),
        param("value", S, "text", "the value of the end"),
        param("key", S, "text", "the key no start had"),
        EXTRA,
    ],
    doc: "a PajeEndLink whose start never came",
};

/// The `paje` format.
pub const PAJE: FormatDecl = FormatDecl {
    name: "paje",
    description: "Paje trace (%EventDef header, then events): containers, states, events, variables, links",
    event_types: &[PAJE_STATE, PAJE_EVENT, PAJE_VARIABLE, PAJE_LINK, PAJE_LINK_END],
    priority: 50,
    parser: Some(ParserDecl {
        options: &[
            OptionDecl {
                name: "time_unit",
                kind: OptKind::Str,
                doc: "unit of the file's times: s (the default, as Paje, ViTE and SimGrid write them), ms, us or ns",
            },
            OptionDecl {
                name: "source",
                kind: OptKind::Str,
                doc: "the file's path: PajeTraceFile names are relative to its directory",
            },
        ],
        make,
    }),
    profile: Profile {
        labels: &[
            ("state", "value", Some("state_type")),
            ("event", "event_type", None),
            ("variable", "variable_type", None),
            ("link", "link_type", None),
            ("link_end", "link_type", None),
        ],
        ..Profile::NONE
    },
    examples: &[
        (
            "time per state",
            "SELECT state_type, value, count(*) AS states, sum(dur) / 1e6 AS ms\n\
             FROM {t}.state GROUP BY ALL ORDER BY ms DESC",
        ),
        (
            "links",
            "SELECT link_type, producer AS src, dst_producer AS dst, count(*) AS links,\n\
             avg(dst_ts - ts) / 1e3 AS mean_us FROM {t}.link GROUP BY ALL ORDER BY links DESC",
        ),
        (
            "variables",
            "SELECT variable_type, producer, count(*) AS changes, min(value), max(value)\n\
             FROM {t}.variable GROUP BY ALL",
        ),
    ],
    ..FormatDecl::BASE
};

fn make(o: &Options) -> Result<Box<dyn ChunkParser>, String> {
    let scale = match o.str("time_unit").unwrap_or("s") {
        "s" => 1_000_000_000,
        "ms" => 1_000_000,
        "us" => 1_000,
        "ns" => 1,
        u => return Err(format!("unknown time unit {u:?} (s, ms, us, ns)")),
    };
    let mut p = super::PajeParser::new(o.strict(), o.batch_rows(), scale);
    if let Some(src) = o.str("source") {
        p.set_source(std::path::Path::new(src));
    }
    p.set_max_line(o.max_line());
    Ok(Box::new(p))
}
