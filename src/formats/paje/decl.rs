//! The `paje` event types, declared once (see `formats/decl.rs`): the parser's tables are built
//! from them; Python reads them through `_core.format_declarations()`.

use crate::formats::decl::types::{F, I, S};
use crate::formats::decl::{param, EventTypeDecl, FormatDecl, Param};

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
    results: &[],
};
