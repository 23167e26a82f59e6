"""Chrome Trace Event JSON importer: a thin shell over `_core.NativeParser("chrome")`.

Owns the wiring: args columns already known to the `chrome` format are
declared to the parser (so every trace stores a key in the same column with the
same type), discovered ones are added to the format as they appear, producer
names come from `M` events, and small top-level members (`otherData`,
`displayTimeUnit`, `metadata`) become trace metadata `chrome.<key>`.
The event types are declared in `tracehouse.formats.chrome`.
"""

from __future__ import annotations

from pathlib import Path

from ... import _core
from .. import chrome as fmt
from ..column_mapping import Mapping
from ..parser_loader import head_bytes, import_parsed
from ..report import ImportReport

NAME = "chrome"


def sniff(head: bytes) -> bool:
    """A JSON array whose first element has a "ph", or an object with "traceEvents"."""
    s = head_bytes(head).lstrip(b"\xef\xbb\xbf \t\r\n")
    if s.startswith(b"["):
        rest = s[1:].lstrip()
        return rest.startswith(b"]") or (rest.startswith(b"{") and b'"ph"' in rest[:8192])
    if s.startswith(b"{"):
        return b'"traceEvents"' in s
    return False


def import_file(
    store,
    path: str | Path,
    name: str,
    *,
    mapping: Mapping | None = None,
    strict: bool = False,
    description: str = "",
    progress=None,
) -> ImportReport:
    parser = _core.NativeParser("chrome", strict=strict)

    def declare(types):
        for et in types.values():
            for p in et.params:
                k = fmt.arg_key(p)
                if k is not None:
                    parser.declare(et.name, p.name, p.type, k[0], end=k[1])

    def column(t, name, ptype, key):
        return fmt.arg_column(name, ptype, key, name.startswith("end_arg_"))

    report = import_parsed(
        fmt,
        store,
        path,
        name,
        strict=strict,
        description=description,
        progress=progress,
        parser=parser,
        loader_args={"declare": declare, "column": column},
    )
    meta = {f"chrome.{k}": v for k, v in report.details.pop("top_level", [])}
    if meta:
        store.set_metadata(name, meta)
    return report
