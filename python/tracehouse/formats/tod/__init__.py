"""The TOD format (seed 001): events of an omniscient debugger's simulated program.

Owns the format's name and its producers; the four event types are declared once,
in Rust (src/workload/tod/decl.rs, read through `formats/declared.py`), and the
generator (`tracehouse._core.TodGenerator`) builds its batches' schemas from it;
producers are one process (id 0) and its threads (ids 1..threads).
"""

from __future__ import annotations

from .. import declared

FORMAT = "tod"
DESCRIPTION = declared.description(FORMAT)
EVENT_TYPES = declared.event_types(FORMAT)


def producers(threads: int) -> list[dict]:
    """The producer rows of a generated TOD trace: the program, then its threads."""
    rows = [{"id": 0, "parent": None, "kind": "process", "name": "tod-program", "attrs": {}}]
    rows += [
        {"id": i, "parent": 0, "kind": "thread", "name": f"thread-{i}", "attrs": {"tid": i}}
        for i in range(1, threads + 1)
    ]
    return rows
