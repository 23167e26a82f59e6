"""The registry of formats, importers and exporters: ours and installed plugins', found the same way.

Owns discovery. A format is declared once: in Rust (`src/formats/<format>/decl.rs`, read through
`declared.py`: its event types, sniffer and priority, parser options, the analyses' profile,
example queries), or, for a format without a Rust half, by its importer module (`FORMAT`,
`DESCRIPTION`, `EVENT_TYPES`, `PRIORITY`, `PROFILE`, `EXAMPLES`). `formats()` is the table of
both; the analyses' profiles, the web console's examples, the Chrome exporter's event names
and the command line's help are read from it, so adding a format edits none of them.

An importer is a module (or object) with `NAME` and `import_file(store, path, name, ...)`;
optional: `sniff(head) -> bool` (else its format's Rust sniffer), `DESCRIPTION` (else its
format's), `PRIORITY` (the order sniffers are asked in, highest first; else its format's),
`OPTIONS` ({name: argparse kwargs}), `import_stream(store, fd, name, ...)` (a pipe) and
`start(path)` (work begun before the store opens: the parse of the file, handed to
`import_file` as `started`). An exporter has `NAME`, `DESCRIPTION` and
`export(store, trace, out, *, progress=None) -> dict` (optional `EXTENSION`). Ours and
plugins' alike are entry points in the groups `tracehouse.importers` and
`tracehouse.exporters` (ours in pyproject.toml): there is no second list. A plugin cannot take
the name of one of ours. An exporter whose `LAYOUT` is "directory" (Parquet, CSV: one file per
event type, `typed_files`) writes into the directory it is given; the others write the one file
they are given.

The groups are read straight from the `entry_points.txt` files on `sys.path` (`_declared`),
falling back to `importlib.metadata` where that cannot be known (a zip on the path, a finder
of its own, an egg): importing `importlib.metadata` and scanning cost 44-57 ms of CPU in a
fresh interpreter against 1.7-2.5 ms for the hand reading (8 alternating runs each, load 5-7),
of a `tracehouse import` whose start-up is ~0.25 CPU-s.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BadInput
from ..schema import Column, EventType
from . import declared
from .column_mapping import Mapping
from .parser_loader import head_bytes
from .report import ImportReport

if TYPE_CHECKING:
    from importlib import metadata

GROUPS = {"importer": "tracehouse.importers", "exporter": "tracehouse.exporters", "analysis": "tracehouse.analyses"}
OURS = "tracehouse"  # the distribution whose tools are the built-ins


@dataclass(frozen=True)
class Format:
    """A format: its event types, result tables, sniff priority and what the analyses and
    surfaces know of it (`profile`: spans, objects, locals, samples, labels; `examples`:
    (title, SQL with `{t}` for the quoted trace and `{s}` for its name as a string))."""

    name: str
    description: str
    event_types: tuple[EventType, ...] = ()
    results: dict[str, tuple[Column, ...]] = field(default_factory=dict)
    priority: int = 0
    profile: dict = field(default_factory=dict)
    examples: tuple[tuple[str, str], ...] = ()
    parser_options: tuple[tuple[str, str, str], ...] | None = None  # a Rust parser's (name, type, doc)
    rust_sniffer: bool = False


def _rust_format(name: str, d: dict) -> Format:
    return Format(
        name,
        d["description"],
        declared.event_types(name),
        declared.results(name),
        d["priority"],
        d["profile"],
        tuple(map(tuple, d["examples"])),
        None if d["parser_options"] is None else tuple(map(tuple, d["parser_options"])),
        d["sniffs"],
    )


class Importer:
    """An importer as the surfaces use it: its module's attributes, and from its format's
    declaration what the module leaves out (description, sniffer, priority)."""

    def __init__(self, name: str, module: Any, fmt: Format | None) -> None:
        self.name = name
        self.module = module
        self.format = fmt
        self.NAME = getattr(module, "NAME", name)
        self.DESCRIPTION = getattr(module, "DESCRIPTION", None) or (fmt.description if fmt else name)
        self.priority = getattr(module, "PRIORITY", fmt.priority if fmt else 0)

    def sniff(self, head: bytes) -> bool:
        """Whether `head` (a file's first 64 KB) is this importer's input."""
        own = getattr(self.module, "sniff", None)
        if own is not None:
            return bool(own(head))
        return self.format is not None and self.format.rust_sniffer and self.name in declared.sniffed(head_bytes(head))

    def start(self, path: str | Path):
        """Work the importer begins on `path` before the store opens (handed to `import_file` as
        `started`, closed by the caller when the import never takes it), or None; what
        `start_early` began for this very file is handed over instead."""
        if _EARLY and _EARLY[0][:2] == (self.name, os.path.abspath(path)):
            return _EARLY.pop()[2]
        hook = getattr(self.module, "start", None)
        return hook(path) if hook is not None else None

    def __getattr__(self, name: str):
        return getattr(self.module, name)

    def __repr__(self) -> str:
        return f"<importer {self.name} ({getattr(self.module, '__name__', self.module)!r})>"


# -- entry points --------------------------------------------------------------------------------


class _EntryPoint:
    """What `importlib.metadata.EntryPoint` gives the registry: name, value, load(), dist name."""

    def __init__(self, name: str, value: str, dist: str | None) -> None:
        self.name, self.value, self.dist_name = name, value, dist

    def load(self):
        module, _, attr = self.value.partition(":")
        obj = importlib.import_module(module.strip())
        for part in filter(None, attr.strip().split(".")):
            obj = getattr(obj, part)
        return obj


def _declared(group: str) -> list[_EntryPoint] | None:
    """The entry points of `group` declared by the distributions on `sys.path`, read from their
    `entry_points.txt`; None when that cannot be known without importlib.metadata (a zip on the
    path, a finder of its own providing distributions, an unreadable file)."""
    from importlib.machinery import PathFinder

    if any(hasattr(f, "find_distributions") and f is not PathFinder for f in sys.meta_path):
        return None
    found: list[_EntryPoint] = []
    seen: set[str] = set()
    for entry in sys.path:
        d = entry or "."
        if d.lower().rstrip("/").endswith(".egg"):
            return None  # an egg (zipped or not): its EGG-INFO is importlib.metadata's to read
        if not os.path.isdir(d):
            if os.path.exists(d):
                return None  # a zip or egg file: importlib.metadata reads those
            continue
        try:
            with os.scandir(d) as it:
                infos = sorted(
                    e.path for e in it if e.name.lower().endswith((".dist-info", ".egg-info")) and e.is_dir()
                )
            for info in infos:
                dist = os.path.basename(info).split("-", 1)[0].replace("_", "-").lower()
                if dist in seen:
                    continue  # the first one on sys.path wins, as for importlib.metadata
                try:
                    with open(os.path.join(info, "entry_points.txt"), encoding="utf-8") as f:
                        text = f.read()
                except FileNotFoundError:
                    continue
                seen.add(dist)
                section = None
                for line in text.splitlines():
                    line = line.strip()
                    if line.startswith("[") and line.endswith("]"):
                        section = line[1:-1].strip()
                    elif section == group and "=" in line and not line.startswith(("#", ";")):
                        name, value = line.split("=", 1)
                        found.append(_EntryPoint(name.strip(), value.strip(), dist))
        except (OSError, UnicodeDecodeError):
            return None
    return found


def _entry_points(kind: str) -> list:
    """The entry points of a kind, each with `name`, `value`, `load()` and `dist_name`: read by
    hand (`_declared`), else through importlib.metadata."""
    found = _declared(GROUPS[kind])
    if found is not None:
        return found
    from importlib import metadata

    return [
        _EntryPoint(ep.name, ep.value, getattr(ep.dist, "name", None))
        for ep in metadata.entry_points(group=GROUPS[kind])
    ]


def entry_points(kind: str) -> list[metadata.EntryPoint]:
    """What the installed packages (ours too) declare for a kind: "importer", "exporter" or
    "analysis", as importlib.metadata's entry points (with their distribution and version)."""
    from importlib import metadata

    return list(metadata.entry_points(group=GROUPS[kind]))


def _ours_first(eps: list) -> list:
    return sorted(eps, key=lambda ep: (ep.dist_name or "").replace("_", "-").lower() != OURS)


def discover(kind: str, builtin: dict | None = None, *, skip: tuple[str, ...] = (), on_error=None) -> dict:
    """Every tool of a kind by name, ours first (a plugin cannot take one of their names). A
    plugin that fails to load raises, or is left out after `on_error(entry_point, exception)`
    when that is given."""
    out: dict = dict(builtin or {})
    for ep in _ours_first(_entry_points(kind)):
        if ep.name in out or ep.name in skip:
            continue
        try:
            out[ep.name] = ep.load()
        except Exception as e:
            if on_error is None:
                raise
            on_error(ep, e)
    return out


# -- formats and importers -----------------------------------------------------------------------


_FAILED: dict[str, str] = {}


@cache
def _importers(path: tuple[str, ...]) -> dict[str, Importer]:
    modules = discover("importer", on_error=lambda ep, e: _FAILED.__setitem__(ep.name, repr(e)))
    fmts = _formats_of(modules)
    reg = {
        name: Importer(name, m, fmts.get(getattr(m, "FORMAT", name)) or fmts.get(name)) for name, m in modules.items()
    }
    # Sniffers are asked by priority, highest first (a stable sort keeps ties in entry-point order).
    return dict(sorted(reg.items(), key=lambda kv: -kv[1].priority))


def _formats_of(modules: dict) -> dict[str, Format]:
    out = {name: _rust_format(name, d) for name, d in declared.formats().items()}
    for name, m in modules.items():
        fmt = getattr(m, "FORMAT", name)
        if fmt in out or not isinstance(fmt, str):
            continue
        out[fmt] = Format(
            fmt,
            getattr(m, "DESCRIPTION", fmt),
            tuple(getattr(m, "EVENT_TYPES", ())),
            {},
            getattr(m, "PRIORITY", 0),
            dict(getattr(m, "PROFILE", {}) or {}),
            tuple(getattr(m, "EXAMPLES", ())),
        )
    return out


def importers() -> dict[str, Importer]:
    """Every importer by name (ours, then those of installed plugins), highest sniff priority
    first; a plugin that fails to load is left out (`failed_importers`). Read once per
    `sys.path` (a plugin put on the path later is found then)."""
    return _importers(tuple(sys.path))


def failed_importers() -> dict[str, str]:
    """Importer plugins that failed to load: {name: the error}."""
    importers()
    return dict(_FAILED)


def formats() -> dict[str, Format]:
    """Every format by name: the Rust-declared ones, then those plugins' importers declare."""
    return _formats_of({name: imp.module for name, imp in importers().items()})


@cache
def _declared_format(name: str) -> Format | None:
    d = declared.formats().get(name)
    return None if d is None else _rust_format(name, d)


def format_of(name: str) -> Format | None:
    """The format called `name`, None when none is declared (a trace of a custom format). A
    Rust-declared one is found without loading any importer."""
    return _declared_format(name) or formats().get(name)


def exporters() -> dict:
    """Every exporter by name: ours, then those of installed plugins."""
    return discover("exporter")


def _head(path: str | Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(65536)


def sniff(path: str | Path) -> str | None:
    """The name of the first importer (by priority) that recognises the file's first bytes."""
    head = _head(path)
    for name, imp in importers().items():
        if imp.sniff(head):
            return name
    return None


def importer(name: str, path: str | Path | None = None) -> Importer:
    """The importer called `name`; given the file, refuses one that does not look like it."""
    reg = importers()
    if name not in reg:
        raise BadInput(f"no importer named {name!r}", expected=" | ".join(reg))
    imp = reg[name]
    if path is not None and Path(path).is_file():  # a directory (an -ff prefix, a Parquet export) is the importer's
        head = _head(path)
        if not imp.sniff(head):
            other = next((n for n, m in reg.items() if n != name and m.sniff(head)), None)
            hint = f"this looks like {other}, not {name}" if other else f"this does not look like {name}"
            raise BadInput(hint, file=str(path), line=1, expected=imp.DESCRIPTION)
    return imp


def exporter(name: str):
    """The exporter called `name`."""
    reg = exporters()
    if name not in reg:
        raise BadInput(f"no exporter named {name!r}", expected=" | ".join(reg))
    return reg[name]


# Work an importer began before the command loaded the rest of itself (`start_early`):
# (importer name, absolute path, what its `start` returned), taken by `importer(...).start`.
_EARLY: list[tuple[str, str, Any]] = []


def start_early(name: str, path: str) -> None:
    """`tracehouse import NAME PATH`, before the command's modules load and its arguments are
    parsed: when importer NAME declares `start`, it begins now (strace parses the file on
    threads of its own: ~45 ms of start-up it otherwise waited for). Only that importer's
    module is loaded; anything unexpected is left to the command, which checks everything as
    always."""
    try:
        ep = next((e for e in _ours_first(_entry_points("importer")) if e.name == name), None)
        hook = getattr(ep.load(), "start", None) if ep is not None else None
        started = hook(path) if hook is not None else None
    except Exception:  # noqa: BLE001 - the command reports it properly
        return
    if started is not None:
        _EARLY[:] = [(name, os.path.abspath(path), started)]


def importer_names() -> str:
    """`csv | parquet | strace | ...` for help texts, in sniff order."""
    return " | ".join(importers())


__all__ = [
    "GROUPS",
    "Format",
    "ImportReport",
    "Importer",
    "Mapping",
    "discover",
    "entry_points",
    "exporter",
    "exporters",
    "failed_importers",
    "format_of",
    "formats",
    "importer",
    "importer_names",
    "importers",
    "start_early",
    "sniff",
]
