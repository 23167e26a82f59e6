"""The Chrome Trace Event format: what chrome://tracing, Perfetto UI and many profilers read and write.

Owns the format's name and the `arg_<key>` parameters' docs; the event types are
declared once, in Rust (src/formats/chrome/decl.rs, read through
`formats/declared.py`). The Rust parser (`tracehouse._core.NativeParser("chrome")`,
src/formats/chrome/mod.rs) emits batches with exactly those columns, plus the `arg_<key>` / `end_arg_<key>` parameters it
discovers in `args` (typed by the first value met; the original key is kept in
the column's doc as ``ARG_DOC + json.dumps(key)``). Producers: each pid is a
process, each (pid, tid) a thread under it, named by `M` events.

Timestamps in the file are microseconds (decimals allowed); stored `ts`,
`dur`, `thread_ts`, ... are exact integer nanoseconds.
"""

from __future__ import annotations

import json

from ...schema import Column
from .. import declared

FORMAT = "chrome"
DESCRIPTION = declared.description(FORMAT)
EVENT_TYPES = declared.event_types(FORMAT)

# A parameter made from an args key documents the key so exporters can write it back.
ARG_DOC = "args key "
END_ARG_DOC = "args key of the closing event "


def arg_key(column: Column) -> tuple[str, bool] | None:
    """(args key, is it an end arg) of an `arg_`/`end_arg_` parameter, else None."""
    for prefix, doc, end in (("end_arg_", END_ARG_DOC, True), ("arg_", ARG_DOC, False)):
        if column.name.startswith(prefix):
            if column.doc.startswith(doc):
                try:
                    return json.loads(column.doc[len(doc) :]), end
                except ValueError:
                    pass
            return column.name[len(prefix) :], end
    return None


def arg_column(name: str, ptype: str, key: str, end: bool) -> Column:
    """The parameter declared for an args key the parser met."""
    return Column(name, ptype, "as recorded", (END_ARG_DOC if end else ARG_DOC) + json.dumps(key))
