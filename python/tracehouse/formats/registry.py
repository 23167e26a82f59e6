"""The registry of importers and exporters: ours and installed plugins', found the same way.

Owns discovery. An importer is a module (or object) with `NAME`, `DESCRIPTION`,
`sniff(head) -> bool` and `import_file(store, path, name, ...)` (optional `OPTIONS`:
{name: argparse kwargs}); an exporter has `NAME`, `DESCRIPTION` and
`export(store, trace, out, *, progress=None) -> dict` (optional `EXTENSION`). Ours live in
`formats/<format>/importer.py` and `exporter.py` and are declared in pyproject.toml under the
entry-point groups `tracehouse.importers` and `tracehouse.exporters` like any third party's;
`discover` reads a group, after the built-in table (so a source checkout works before it is
installed, and a plugin cannot shadow a built-in name). An exporter whose `LAYOUT` is
"directory" (Parquet, CSV: one file per event type, `typed_files`) writes into the directory it is
given; the others write the one file they are given.

The group is first read straight from the `entry_points.txt` files on `sys.path`
(`_declared`): when it names nothing beyond the built-ins, as on an installation without
plugins, `importlib.metadata` is not imported at all (importing it and scanning cost
0.02-0.04 CPU-s of every `tracehouse import`, whose start-up is ~0.25 CPU-s).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from ..errors import BadInput
from .bpftrace import importer as bpftrace
from .chrome import exporter as chrome_exporter
from .chrome import importer as chrome
from .csv import exporter as csv_exporter
from .csv import importer as csv
from .paje import importer as paje
from .parquet import exporter as parquet_exporter
from .parquet import importer as parquet
from .report import ImportReport
from .stap import importer as stap
from .strace import importer as strace
from .tabular import Mapping

if TYPE_CHECKING:
    from importlib import metadata

GROUPS = {"importer": "tracehouse.importers", "exporter": "tracehouse.exporters", "analysis": "tracehouse.analyses"}
# CSV, whose sniffer accepts any text with a comma, is asked last.
IMPORTERS: dict[str, ModuleType] = {m.NAME: m for m in (chrome, strace, bpftrace, stap, paje, parquet, csv)}
EXPORTERS: dict[str, ModuleType] = {m.NAME: m for m in (parquet_exporter, csv_exporter, chrome_exporter)}


def entry_points(kind: str) -> list[metadata.EntryPoint]:
    """What the installed packages (ours too) declare for a kind: "importer", "exporter" or "analysis"."""
    from importlib import metadata

    return list(metadata.entry_points(group=GROUPS[kind]))


def _declared(group: str) -> set[str] | None:
    """The names declared in entry-point `group` by the distributions on `sys.path`, read from
    their `entry_points.txt`; None when that cannot be known without importlib.metadata (a zip
    on the path, a finder of its own providing distributions, an unreadable file)."""
    from importlib.machinery import PathFinder

    if any(hasattr(f, "find_distributions") and f is not PathFinder for f in sys.meta_path):
        return None
    names: set[str] = set()
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
                infos = [e.path for e in it if e.name.lower().endswith((".dist-info", ".egg-info")) and e.is_dir()]
            for info in infos:
                try:
                    with open(os.path.join(info, "entry_points.txt"), encoding="utf-8") as f:
                        text = f.read()
                except FileNotFoundError:
                    continue
                section = None
                for line in text.splitlines():
                    line = line.strip()
                    if line.startswith("[") and line.endswith("]"):
                        section = line[1:-1].strip()
                    elif section == group and "=" in line and not line.startswith(("#", ";")):
                        names.add(line.split("=", 1)[0].strip())
        except (OSError, UnicodeDecodeError):
            return None
    return names


def discover(kind: str, builtin: dict | None = None, *, skip: tuple[str, ...] = (), on_error=None) -> dict:
    """Every tool of a kind by name: the built-in ones, then those the installed packages
    declare in the kind's entry-point group. A plugin that fails to load raises, or is left
    out after `on_error(entry_point, exception)` when that is given."""
    out: dict = dict(builtin or {})
    declared = _declared(GROUPS[kind])
    if declared is not None and declared <= out.keys() | set(skip):
        return out  # only the built-ins are declared: no plugin to load
    for ep in entry_points(kind):
        if ep.name in out or ep.name in skip:
            continue
        try:
            out[ep.name] = ep.load()
        except Exception as e:
            if on_error is None:
                raise
            on_error(ep, e)
    return out


def importers() -> dict:
    """Every importer by name: ours, then those of installed plugins."""
    return discover("importer", IMPORTERS)


def exporters() -> dict:
    """Every exporter by name: ours, then those of installed plugins."""
    return discover("exporter", EXPORTERS)


def _head(path: str | Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(65536)


def sniff(path: str | Path) -> str | None:
    """The name of the first importer that recognises the file's first bytes."""
    head = _head(path)
    for name, imp in importers().items():
        if imp.sniff(head):
            return name
    return None


def importer(name: str, path: str | Path | None = None):
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


__all__ = ["EXPORTERS", "GROUPS", "IMPORTERS", "ImportReport", "Mapping", "discover", "exporter",
           "exporters", "importer", "importers", "sniff"]
