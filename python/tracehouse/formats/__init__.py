"""Formats: one folder per format, and what their importers share.

`formats/<format>/__init__.py` names the format and holds its event types: read from the
Rust declaration (`src/formats/<format>/decl.rs`, tod's `src/workload/tod/decl.rs`, through
`declared.py`) when the format has a Rust parser or generator; csv, parquet and line protocol type their events from the data.
`importer.py` reads its files into a store, `exporter.py` writes a trace out, `capture.py`
(strace) records a running program; `python` is the format `tracehouse record` writes. `registry.py` finds importers and exporters (ours and
installed plugins', through the same entry points); `tabular.py` (the column mapping and the
`ImportReport` every importer returns), `native.py` (the loop around a Rust parser) and
`probes.py` (bpftrace and SystemTap) are shared by several importers.
"""

from . import bpftrace, chrome, paje, python, stap, strace, tod

BUILTIN = {m.FORMAT: m for m in (tod, python, strace, chrome, bpftrace, stap, paje)}

__all__ = ["BUILTIN", "bpftrace", "chrome", "paje", "python", "stap", "strace", "tod"]
