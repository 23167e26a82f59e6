"""The Paje trace format (Paje, ViTE, FrameSoC, SimGrid): `%EventDef` headers, then events.

Owns the declaration of the `paje` event types. The Rust parser
(`tracehouse._core.PajeParser`, src/formats/paje/mod.rs) replays the file: containers
become producers (kind = container type name, nested like the containers),
states become `state` spans, PajeNewEvent `event` instants, variables
`variable` counters, links `link` rows. Times in the file are in --time-unit
(seconds by default); stored times are integer nanoseconds.
"""

from __future__ import annotations

from ...schema import Column, EventType

FORMAT = "paje"
DESCRIPTION = "Paje trace (%EventDef header, then events): containers, states, events, variables, links"

_extra = Column("extra", "string", "JSON", "fields beyond the standard ones of the event's %EventDef, as a JSON object of strings")

EVENT_TYPES = (
    EventType("state", "span", (
        Column("state_type", "string", "text", "name of the state type (PajeDefineStateType)"),
        Column("value", "string", "text", "the state held (entity value name, or the value as written)"),
        Column("depth", "int64", "levels", "nesting: 0 for a set state, n for the n-th pushed one"),
        _extra,
    ), "a state held by a container from Set/PushState until Pop/Set/ResetState, its destruction or the trace end"),
    EventType("event", "instant", (
        Column("event_type", "string", "text", "name of the event type (PajeDefineEventType)"),
        Column("value", "string", "text", "the event's value"),
        _extra,
    ), "PajeNewEvent"),
    EventType("variable", "counter", (
        Column("variable_type", "string", "text", "name of the variable type (PajeDefineVariableType)"),
        Column("value", "float64", "as recorded", "the variable's value from ts on, after this operation"),
        Column("op", "string", "text", "set, add or sub (PajeSet/Add/SubVariable)"),
        Column("operand", "float64", "as recorded", "the number the line carried"),
        _extra,
    ), "a variable's new value"),
    EventType("link", "link", (
        Column("link_type", "string", "text", "name of the link type (PajeDefineLinkType)"),
        Column("value", "string", "text", "the value of the start (PajeStartLink)"),
        Column("key", "string", "text", "the key matching start and end"),
        Column("dst_producer", "int64", "id", "the end container (th.producers.id); null when the link never ended"),
        Column("dst_ts", "int64", "ns", "time of the end, in nanoseconds; null when the link never ended"),
        _extra,
    ), "a link from its start container (producer, ts) to its end container"),
    EventType("link_end", "end", (
        Column("link_type", "string", "text", "name of the link type"),
        Column("value", "string", "text", "the value of the end"),
        Column("key", "string", "text", "the key no start had"),
        _extra,
    ), "a PajeEndLink whose start never came"),
)
