//! The `tod` format: its four event types, declared once (see `formats/decl.rs`), its profile and
//! example queries. The generator's Arrow schemas are built from them (`workload/tod.rs`) and
//! Python reads them through `_core.format_declarations()`.

use crate::formats::decl::types::I;
use crate::formats::decl::{
    param, EventTypeDecl, FormatDecl, LocalsProfile, ObjectProfile, Param, Profile, SpanProfile,
};

const PARENT_SEQ: Param = param(
    "parent_seq",
    I,
    "seq",
    "seq of the enclosing behavior_enter in the same thread, \
                               -1 at the root",
);

const TOD_FIELD_WRITE: EventTypeDecl = EventTypeDecl {
    name: "field_write",
    kind: "instant",
    params: &[
        PARENT_SEQ,
        param("field_id", I, "id", "field written"),
        param("target", I, "object id", "object whose field is written"),
        param("value", I, "object id", "object assigned to the field"),
    ],
    doc: "a field of an object is assigned",
};

const TOD_VAR_WRITE: EventTypeDecl = EventTypeDecl {
    name: "var_write",
    kind: "instant",
    params: &[
        PARENT_SEQ,
        param("var_id", I, "id", "local variable written"),
        param("value", I, "object id", "object assigned to the variable"),
    ],
    doc: "a local variable is assigned",
};

const TOD_BEHAVIOR_ENTER: EventTypeDecl = EventTypeDecl {
    name: "behavior_enter",
    kind: "begin",
    params: &[
        PARENT_SEQ,
        param("behavior_id", I, "id", "method or constructor entered"),
        param("target", I, "object id", "receiver object"),
        param("arg_count", I, "count", "number of arguments"),
        param("arg0", I, "object id", "first argument, null if absent"),
        param("arg1", I, "object id", "second argument, null if absent"),
        param("arg2", I, "object id", "third argument, null if absent"),
        param("arg3", I, "object id", "fourth argument, null if absent"),
    ],
    doc: "a behavior (method or constructor) is entered",
};

const TOD_BEHAVIOR_EXIT: EventTypeDecl = EventTypeDecl {
    name: "behavior_exit",
    kind: "end",
    params: &[
        PARENT_SEQ,
        param("behavior_id", I, "id", "method or constructor exited"),
        param("ret_value", I, "object id", "returned object"),
    ],
    doc: "a behavior returns; parent_seq is the seq of its behavior_enter",
};

/// The `tod` format.
pub const TOD: FormatDecl = FormatDecl {
    name: "tod",
    description: "TOD omniscient-debugger workload (seed 001): field/variable writes, behavior enter/exit",
    event_types: &[TOD_FIELD_WRITE, TOD_VAR_WRITE, TOD_BEHAVIOR_ENTER, TOD_BEHAVIOR_EXIT],
    profile: Profile {
        spans: Some(SpanProfile {
            begin: "behavior_enter",
            end: Some("behavior_exit"),
            key: Some("behavior_id"),
            name: None,
        }),
        objects: Some(ObjectProfile { event_type: "field_write", object: "target", field: "field_id", value: "value" }),
        locals: Some(LocalsProfile { event_type: "var_write", frame: "parent_seq", var: "var_id", value: "value" }),
        ..Profile::NONE
    },
    examples: &[
        (
            "most called methods",
            "SELECT behavior_id, count(*) AS calls, round(avg(arg_count), 2) AS args\n\
             FROM {t}.behavior_enter GROUP BY behavior_id ORDER BY calls DESC LIMIT 20",
        ),
        (
            "most written fields",
            "SELECT field_id, count(*) AS writes, count(DISTINCT target) AS objects\n\
             FROM {t}.field_write GROUP BY field_id ORDER BY writes DESC LIMIT 20",
        ),
        (
            "calls per thread",
            "SELECT producer AS thread, count(*) AS calls FROM {t}.behavior_enter\n\
             GROUP BY producer ORDER BY calls DESC",
        ),
    ],
    ..FormatDecl::BASE
};
