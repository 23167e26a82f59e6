//! The event types of a recorded Python program (format `python`), declared once (see
//! `formats/decl.rs`): the wire reader builds its Arrow schemas from them and Python reads them
//! through `_core.format_declarations()`.
//!
//! The five event types of the running program keep TOD's names and its core columns
//! (`parent_seq`, `behavior_id`, `var_id`, `field_id`, `target`, `value`), so the analyses that
//! answer TOD's questions (stack, object state, locals, call tree) answer them on a recording
//! too; what a Python value needs beyond TOD's object ids is in the `value_*` columns. Every
//! column of those five types is an integer: their segments take the native integer Parquet
//! writer (`intparquet.rs`, about twice parquet-cpp's encoding speed), which is what the ingest
//! of millions of events a second rests on. Floats are therefore kept as their IEEE-754 bits in
//! `value` (`value_kind` 4), and the debugger and `python_value()` decode them.
//!
//! Value kinds (`value_kind`): 0 unbound (the variable was deleted, or a cell is empty), 1 None,
//! 2 bool (`value` 0/1), 3 int (`value`; an int beyond int64 is an object of type `int` with its
//! digits as `value_repr`), 4 float (bits in `value`), 5 str (`value` is the symbol of its text,
//! cut at 200 bytes), 6 object (`value` is its identity, `id()`), 7 cell (a closure variable:
//! `value` is the cell's identity; its contents are the cell's `cell_contents` field).

use crate::formats::decl::types::{I, S};
use crate::formats::decl::{
    param, EventTypeDecl, FormatDecl, LocalsProfile, ObjectProfile, Param, Profile, SpanProfile,
};

const PARENT_SEQ: Param =
    param("parent_seq", I, "seq", "seq of the enclosing behavior_enter in the same thread, -1 at the root");
const KIND: Param =
    param("value_kind", I, "code", "0 unbound, 1 None, 2 bool, 3 int, 4 float, 5 str, 6 object, 7 cell");
const VALUE: Param =
    param("value", I, "as kind", "bool or int value, float bits, symbol of a str, identity of an object or cell");
const VALUE_TYPE: Param =
    param("value_type", I, "symbol", "type name of the value (0 for None, bool, int, float, str)");
const VALUE_REPR: Param =
    param("value_repr", I, "symbol", "a short repr of an object (containers, functions, big ints), 0 if none");
const SNAPSHOT: Param = param(
    "snapshot",
    I,
    "flag",
    "1 when the value is what the variable held as the frame was entered or resumed (arguments, a generator's \
     locals, closure cells), 0 for an assignment",
);

const PY_BEHAVIOR_ENTER: EventTypeDecl = EventTypeDecl {
    name: "behavior_enter",
    kind: "begin",
    params: &[
        PARENT_SEQ,
        param("behavior_id", I, "id", "code object entered (code.code_id)"),
        param("resumed", I, "flag", "1 when a generator or coroutine resumes, 0 for a call"),
        param("frame", I, "id", "identity of the frame (a generator's frame keeps it over its resumptions)"),
        param("call_line", I, "line", "the caller's line that made the call (0 when the caller is not recorded)"),
        param(
            "namespace",
            I,
            "object id",
            "a module body's globals dict (its variables are that object's fields), 0 for other frames",
        ),
    ],
    doc: "a function, module or class body starts running, or a generator resumes",
};

const PY_BEHAVIOR_EXIT: EventTypeDecl = EventTypeDecl {
    name: "behavior_exit",
    kind: "end",
    params: &[
        PARENT_SEQ,
        param("behavior_id", I, "id", "code object left"),
        param("how", I, "code", "0 return, 1 an exception propagates out, 2 yield (the frame is suspended)"),
        KIND,
        VALUE,
        VALUE_TYPE,
        VALUE_REPR,
    ],
    doc: "a frame returns, yields or is left by an exception (the value is the returned, yielded or raised one); \
          parent_seq is the seq of its behavior_enter",
};

const PY_VAR_WRITE: EventTypeDecl = EventTypeDecl {
    name: "var_write",
    kind: "instant",
    params: &[
        PARENT_SEQ,
        param("var_id", I, "symbol", "the variable's name"),
        KIND,
        VALUE,
        VALUE_TYPE,
        VALUE_REPR,
        SNAPSHOT,
    ],
    doc: "a local variable is assigned or deleted (value_kind 0)",
};

const PY_FIELD_WRITE: EventTypeDecl = EventTypeDecl {
    name: "field_write",
    kind: "instant",
    params: &[
        PARENT_SEQ,
        param("field_id", I, "symbol", "attribute name, `[key]` for an item, the bare name for a module global"),
        param("target", I, "object id", "identity of the object written (a module's globals dict for its globals)"),
        param("target_type", I, "symbol", "type name of the target"),
        KIND,
        VALUE,
        VALUE_TYPE,
        VALUE_REPR,
        SNAPSHOT,
    ],
    doc: "an attribute, item, module global or closure cell is assigned or deleted (value_kind 0)",
};

const PY_LINE_STEP: EventTypeDecl = EventTypeDecl {
    name: "line_step",
    kind: "instant",
    params: &[
        PARENT_SEQ,
        param("behavior_id", I, "id", "code object running"),
        param("line", I, "line", "source line about to run (1-based)"),
    ],
    doc: "a new source line starts running in a frame",
};

const PY_CODE: EventTypeDecl = EventTypeDecl {
    name: "code",
    kind: "instant",
    params: &[
        param("code_id", I, "id", "the code object (behavior_id of the other types)"),
        param("file", S, "path", "its source file as the interpreter names it"),
        param("qualname", S, "text", "qualified name (`<module>` for a module body)"),
        param("first_line", I, "line", "line of its def, class or module start"),
    ],
    doc: "a code object seen for the first time (producer 0)",
};

const PY_SYMBOL: EventTypeDecl = EventTypeDecl {
    name: "symbol",
    kind: "instant",
    params: &[
        param("symbol_id", I, "id", "the symbol (var_id, field_id, value of a str, value_type, value_repr)"),
        param("text", S, "text", "its text"),
    ],
    doc: "an interned string (name, type, str value or short repr) seen for the first time (producer 0)",
};

const PY_SOURCE: EventTypeDecl = EventTypeDecl {
    name: "source",
    kind: "instant",
    params: &[
        param("file", S, "path", "the file, as code.file names it"),
        param("text", S, "text", "its text when the recording ended"),
    ],
    doc: "a source file of recorded code, stored so the trace is self-contained (producer 0)",
};

/// The `python` format.
pub const PYTHON: FormatDecl = FormatDecl {
    name: "python",
    description: "a Python program recorded omnisciently (tracehouse record): calls, returns, line steps, \
                  local, attribute and item writes, code and source",
    event_types: &[
        PY_BEHAVIOR_ENTER,
        PY_BEHAVIOR_EXIT,
        PY_VAR_WRITE,
        PY_FIELD_WRITE,
        PY_LINE_STEP,
        PY_CODE,
        PY_SYMBOL,
        PY_SOURCE,
    ],
    // A recorded Python program keeps TOD's types and columns.
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
    ..FormatDecl::BASE
};
