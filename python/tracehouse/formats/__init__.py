"""Formats: one folder per format, and what their importers share.

`formats/<format>/__init__.py` declares the format's event types once, as data (with each
column's unit); `importer.py` reads its files into a store, `exporter.py` writes a trace out,
`capture.py` (strace) records a running program. `registry.py` finds importers and exporters
(ours and installed plugins', through the same entry points); `tabular.py` (the column mapping
and the `ImportReport` every importer returns), `native.py` (the loop around a Rust parser) and
`probes.py` (bpftrace and SystemTap) are shared by several importers.
"""

from . import bpftrace, chrome, paje, stap, strace, tod

BUILTIN = {m.FORMAT: m for m in (tod, strace, chrome, bpftrace, stap, paje)}

__all__ = ["BUILTIN", "bpftrace", "chrome", "paje", "stap", "strace", "tod"]
