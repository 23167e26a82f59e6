"""Formats: one folder per format, and what their importers share.

`formats/<format>/__init__.py` names the format and holds its event types: read from the
Rust declaration (`src/formats/<format>/decl.rs`, listed in `src/formats/mod.rs` `FORMATS`,
through `declared.py`) when the format has a Rust half; csv and parquet type their events
from the data. `importer.py` reads its files into a store, `exporter.py` writes a trace out,
`capture.py` (strace) records a running program; `python` is the format `tracehouse record`
writes, `tod` the generated workload's. `registry.py` is the one table of formats, importers
and exporters (the Rust declarations plus the entry points, ours and installed plugins'
alike); `parser_loader.py` (the import loop around a format's Rust parser),
`column_mapping.py` (table-shaped input mapped onto a trace), `report.py` (the `ImportReport`
every importer returns), `stream.py` (pipes) and `probes.py` (bpftrace and SystemTap) are
shared by several importers.

Adding a format: docs/contributing.md#adding-a-format.
"""
