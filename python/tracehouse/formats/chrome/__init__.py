"""The Chrome Trace Event format: what chrome://tracing, Perfetto UI and many profilers read and write.

Owns the declaration of the `chrome` event types. The Rust parser
(`tracehouse._core.ChromeParser`, src/formats/chrome/mod.rs) emits batches with
exactly these columns, plus the `arg_<key>` / `end_arg_<key>` parameters it
discovers in `args` (typed by the first value met; the original key is kept in
the column's doc as ``ARG_DOC + json.dumps(key)``). Producers: each pid is a
process, each (pid, tid) a thread under it, named by `M` events.

Timestamps in the file are microseconds (decimals allowed); stored `ts`,
`dur`, `thread_ts`, ... are exact integer nanoseconds.
"""

from __future__ import annotations

import json

from ...schema import Column, EventType

FORMAT = "chrome"
DESCRIPTION = "Chrome Trace Event Format JSON (chrome://tracing, Perfetto UI): array or {traceEvents: [...]}, optionally gzipped"

# A parameter made from an args key documents the key so exporters can write it back.
ARG_DOC = "args key "
END_ARG_DOC = "args key of the closing event "

_name = Column("name", "string", "text", "event name")
_cat = Column("cat", "string", "text", "comma-separated categories ('' when absent)")
_args = Column("args", "string", "JSON", "args without a typed arg_ column (nested values, nulls, type conflicts), as a JSON object; null when none")
_end_args = Column("end_args", "string", "JSON", "args of the closing E/e event without a typed end_arg_ column, as a JSON object")
_id = Column("id", "string", "text", "the event's id (or id2.local/id2.global), as written")
_id_local = Column("id_local", "bool", "flag", "true for id2.local (scoped to the process), false for id2.global, null for a plain id")
_tts = Column("thread_ts", "int64", "ns", "thread clock at the start (tts), in nanoseconds")

EVENT_TYPES = (
    EventType("slice", "span", (
        _name, _cat,
        Column("phase", "string", "phase", "X (complete event) or B (a B/E pair matched on its thread)"),
        _tts,
        Column("thread_dur", "int64", "ns", "thread clock duration (tdur, or E.tts - B.tts), in nanoseconds"),
        _args, _end_args,
    ), "a duration event: X, or B closed by the next E of the same thread"),
    EventType("slice_begin", "begin", (
        _name, _cat,
        Column("phase", "string", "phase", "B (never closed by an E) or X (without dur)"),
        _tts, _args,
    ), "a B event without its E (or an X without dur): a slice still open at the end of the trace"),
    EventType("slice_end", "end", (_name, _cat, _tts, _args), "an E event with no open B on its thread"),
    EventType("instant", "instant", (
        _name, _cat,
        Column("scope", "string", "scope", "s: g (global), p (process) or t (thread, the default)"),
        _args,
    ), "an instant event (I or i)"),
    EventType("counter", "counter", (
        _name, _cat, _id,
        Column("series", "string", "text", "the args key of this series"),
        Column("value", "float64", "as recorded", "the series' value from ts on"),
        Column("int_value", "int64", "as recorded", "the value exactly, when it was written as an integer "
               "(null for a float); export writes it back as that integer"),
    ), "one series of a C event (a C event with n numeric args gives n consecutive rows: same ts, "
       "producer, name and id)"),
    EventType("async_slice", "span", (_name, _cat, _id, _id_local, _args, _end_args),
              "a nestable async b/e pair (or legacy S/F) matched by category, id and scope"),
    EventType("async_begin", "begin", (_name, _cat, _id, _id_local, _args), "an async b (or S) never closed"),
    EventType("async_end", "end", (_name, _cat, _id, _id_local, _args), "an async e (or F) with no open b"),
    EventType("async_instant", "instant", (_name, _cat, _id, _id_local, _args), "an async instant (n, or legacy T/p)"),
    EventType("flow", "link", (
        _name, _cat, _id,
        Column("dst_producer", "int64", "id", "producer of the next flow step (th.producers.id); null when the flow stops here"),
        Column("dst_ts", "int64", "ns", "time of the next flow step, in nanoseconds; null when the flow stops here"),
        Column("src_phase", "string", "phase", "s, t or f: the phase of this step"),
        Column("dst_phase", "string", "phase", "t or f: the phase of the next step"),
        Column("bp", "string", "text", "binding point of the next step ('e': the enclosing slice)"),
    ), "one arrow of a flow (s -> t ... -> f), matched by category, name and id"),
    EventType("sample", "instant", (
        _name, _cat,
        Column("sf", "string", "id", "stack frame id (sf)"),
        Column("stack", "string", "JSON", "the stack array, as JSON"),
        _args,
    ), "a sample event (P)"),
    EventType("other", "instant", (
        _name, _cat,
        Column("phase", "string", "phase", "the event's phase (R, O, N, D, c, M with another name, ...)"),
        _id,
        Column("args", "string", "JSON", "the event's args, as JSON"),
    ), "any other phase, kept as written"),
)

BY_NAME = {et.name: et for et in EVENT_TYPES}


def arg_key(column: Column) -> tuple[str, bool] | None:
    """(args key, is it an end arg) of an `arg_`/`end_arg_` parameter, else None."""
    for prefix, doc, end in (("end_arg_", END_ARG_DOC, True), ("arg_", ARG_DOC, False)):
        if column.name.startswith(prefix):
            if column.doc.startswith(doc):
                try:
                    return json.loads(column.doc[len(doc):]), end
                except ValueError:
                    pass
            return column.name[len(prefix):], end
    return None


def arg_column(name: str, ptype: str, key: str, end: bool) -> Column:
    """The parameter declared for an args key the parser met."""
    return Column(name, ptype, "as recorded", (END_ARG_DOC if end else ARG_DOC) + json.dumps(key))
