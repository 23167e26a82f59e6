"""Exporters: one module per output format, each with `NAME`, `DESCRIPTION` and `export(...)`.

Owns the registry. `export(store, trace, out, *, progress=None) -> dict` writes
one trace to the path `out` and returns what it wrote (path, events, bytes).
Built-in exporters are listed here; other packages add theirs through the
`tracehouse.exporters` entry-point group (a module or object with the same
three attributes) without touching this package. Parquet and CSV are written
by `tracehouse export` itself (one file per event type) and listed in `CORE`.
"""

from __future__ import annotations

from importlib import metadata
from types import ModuleType

from ..errors import BadInput
from . import chrome

BUILTIN: dict[str, ModuleType] = {m.NAME: m for m in (chrome,)}
CORE = {
    "parquet": "Parquet, one file per event type plus producers (tracehouse export --format parquet)",
    "csv": "CSV, one file per event type plus producers (tracehouse export --format csv)",
}


def registry() -> dict:
    """Every exporter by name: ours, then those of installed plugins."""
    out: dict = dict(BUILTIN)
    for ep in metadata.entry_points(group="tracehouse.exporters"):
        if ep.name not in out and ep.name not in CORE:
            out[ep.name] = ep.load()
    return out


def get(name: str):
    reg = registry()
    if name not in reg:
        raise BadInput(f"no exporter named {name!r}", expected=" | ".join([*CORE, *reg]))
    return reg[name]


__all__ = ["BUILTIN", "CORE", "get", "registry"]
