"""The journal of one trace: its catalog rows, kept beside its data (`traces/<id>/journal`).

Owns the file from which `tracehouse repair` rebuilds what the catalog said of a trace when
the catalog is lost or damaged: its id, name, format, description, creation time and
metadata, the event types it reads and writes (kind, typed parameters, units, docs) and its
producers. The events themselves are in its segments and WAL, which say their trace and event
type too (`segments.segment_meta`, the WAL's record names); this holds what no event file does.

Format: text, one entry a line, `<CRC-32 of the JSON, 8 hex digits> <JSON>\\n`, appended. A line
whose checksum does not match (a flipped byte, a torn last line) is reported and skipped; the
entries before and after it still count. Entries, replayed in order (`replay`):

  {"op": "trace", "id", "name", "format", "format_description", "description", "created",
   "metadata", "own_types"}                    written once the catalog has given the trace its id
  {"op": "type", "type": {name, kind, params, doc}}   a type the trace uses, as created or widened
  {"op": "producers", "rows": [{id, parent, kind, name, attrs}, ...]}   inserted or replaced
  {"op": "metadata", "values": {key: value}}

A change is journalled before the catalog transaction that makes it (so the journal holds at
least what the catalog does), except the first entry, written just after the catalog gave the
trace its id. Each append is fsynced (an fdatasync, beside the catalog commit's fsyncs it
precedes): producers are registered once per new tag set (a live server's first writes), a type
once per new column, so appends are rare once a trace has its shape.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._core import crc32
from .wal import fsync_dir

NAME = "journal"


def journal_path(root: Path, trace_id: int) -> Path:
    return Path(root) / "traces" / str(trace_id) / NAME


def _line(entry: dict) -> bytes:
    text = json.dumps(entry, separators=(",", ":"), default=str).encode()
    return b"%08x " % crc32(text) + text + b"\n"


def append(root: Path, trace_id: int, entries: Iterable[dict]) -> None:
    """Append `entries` to the trace's journal and make them durable (the directory is made,
    and made durable, when the journal is new)."""
    data = b"".join(_line(e) for e in entries)
    if not data:
        return
    path = journal_path(root, trace_id)
    new = not path.exists()
    if new:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fdatasync(fd)
    finally:
        os.close(fd)
    if new:
        fsync_dir(path.parent)
        fsync_dir(path.parent.parent)


def trace_entry(info: Any, format_description: str = "") -> dict:
    """The first entry of a trace's journal, from its catalog row (`catalog.TraceInfo`)."""
    return {
        "op": "trace",
        "id": info.id,
        "name": info.name,
        "format": info.format,
        "format_description": format_description,
        "description": info.description,
        "created": info.created,
        "metadata": dict(info.metadata),
        "own_types": bool(info.own_types),
    }


def producers_entry(rows: Iterable[dict]) -> dict:
    """The entry of producers inserted or replaced (ids as ints: numpy integers are allowed in)."""
    return {
        "op": "producers",
        "rows": [
            {
                "id": int(r["id"]),
                "parent": None if r.get("parent") is None else int(r["parent"]),
                "kind": r["kind"],
                "name": r["name"],
                "attrs": r.get("attrs") or {},
            }
            for r in rows
        ],
    }


def snapshot(root: Path, info: Any, types: Iterable[Any], producers: list[dict], format_description: str = "") -> None:
    """Write the whole journal of trace `info` anew (its catalog rows now): for a trace whose
    journal is missing (made before journals, or lost)."""
    path = journal_path(root, info.id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{NAME}.{os.getpid()}.tmp")
    entries = [trace_entry(info, format_description), *({"op": "type", "type": et.to_json()} for et in types)]
    if producers:
        entries.append(producers_entry(producers))
    with open(tmp, "wb") as f:
        f.write(b"".join(_line(e) for e in entries))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


@dataclass
class Journal:
    """What a trace's journal says (`read`)."""

    path: Path
    trace: dict | None = None
    types: dict[str, dict] = field(default_factory=dict)  # name -> type JSON, as last written
    producers: dict[int, dict] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)
    entries: int = 0
    damaged: list[dict] = field(default_factory=list)  # {"line", "reason"} of lines skipped

    def to_json(self) -> dict:
        return {
            "path": str(self.path),
            "entries": self.entries,
            "damaged": self.damaged,
            "trace": self.trace,
            "types": len(self.types),
            "producers": len(self.producers),
        }


def read(path: Path) -> Journal:
    """Replay the journal at `path` (a missing file reads as an empty journal)."""
    j = Journal(Path(path))
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return j
    lines = data.split(b"\n")
    for n, line in enumerate(lines, 1):
        if not line:
            if n < len(lines):
                j.damaged.append({"line": n, "reason": "empty line"})
            continue
        head, _, text = line.partition(b" ")
        try:
            ok = len(head) == 8 and int(head, 16) == crc32(text)
        except ValueError:
            ok = False
        if not ok:
            why = "no newline at its end (cut)" if n == len(lines) else "checksum mismatch"
            j.damaged.append({"line": n, "reason": why})
            continue
        try:
            entry = json.loads(text)
            _apply(j, entry)
        except (ValueError, KeyError, TypeError) as e:
            j.damaged.append({"line": n, "reason": f"unreadable entry: {e}"})
            continue
        j.entries += 1
    return j


def _apply(j: Journal, e: dict) -> None:
    op = e["op"]
    if op == "trace":
        j.trace = {k: e[k] for k in ("id", "name", "format", "description", "created", "own_types")}
        j.trace["format_description"] = e.get("format_description", "")
        j.metadata.update({str(k): str(v) for k, v in (e.get("metadata") or {}).items()})
    elif op == "type":
        j.types[e["type"]["name"]] = e["type"]
    elif op == "producers":
        for r in e["rows"]:
            j.producers[int(r["id"])] = r
    elif op == "metadata":
        j.metadata.update({str(k): str(v) for k, v in e["values"].items()})
    else:
        raise ValueError(f"unknown op {op!r}")
