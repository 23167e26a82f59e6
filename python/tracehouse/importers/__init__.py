"""Importers: one module per format, each with `NAME`, `DESCRIPTION`, `sniff(head)` and `import_file(...)`.

Owns the registry. Built-in importers are listed here; other packages add
theirs through the `tracehouse.importers` entry-point group (a module or
object with the same four attributes) without touching this package.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from types import ModuleType

from ..errors import BadInput
from . import bpftrace, chrome, csv, paje, parquet, stap, strace
from .tabular import ImportReport, Mapping

BUILTIN: dict[str, ModuleType] = {m.NAME: m for m in (chrome, strace, bpftrace, stap, paje, parquet, csv)}


def registry() -> dict:
    """Every importer by name: ours, then those of installed plugins."""
    out: dict = dict(BUILTIN)
    for ep in metadata.entry_points(group="tracehouse.importers"):
        if ep.name not in out:
            out[ep.name] = ep.load()
    return out


def sniff(path: str | Path) -> str | None:
    """The name of the first importer that recognises the file's first bytes (CSV, whose
    sniffer accepts any text with a comma, is asked last)."""
    with open(path, "rb") as f:
        head = f.read(65536)
    for name, imp in registry().items():
        if imp.sniff(head):
            return name
    return None


def get(name: str, path: str | Path | None = None):
    reg = registry()
    if name not in reg:
        raise BadInput(f"no importer named {name!r}", expected=" | ".join(reg))
    imp = reg[name]
    if path is not None and Path(path).is_file():  # a directory (an -ff prefix, a Parquet export) is the importer's
        with open(path, "rb") as f:
            head = f.read(65536)
        if not imp.sniff(head):
            other = next((n for n, m in reg.items() if n != name and m.sniff(head)), None)
            hint = f"this looks like {other}, not {name}" if other else f"this does not look like {name}"
            raise BadInput(hint, file=str(path), line=1, expected=imp.DESCRIPTION)
    return imp


__all__ = ["BUILTIN", "ImportReport", "Mapping", "get", "registry", "sniff"]
