"""The SQL analyses shipped as `.sql` files beside this module, each opening with a comment
that documents its output columns."""

from __future__ import annotations

from importlib import resources
from typing import Iterable


def text(name: str) -> str:
    """The text of `<name>.sql` without its comment lines, with `{placeholders}` left for `str.format`."""
    body = resources.files(__package__).joinpath(f"{name}.sql").read_text()
    return "\n".join(line for line in body.splitlines() if not line.startswith("--"))


def where(start: int | None = None, end: int | None = None, col: str = "ts",
          producers: Iterable[int] | None = None, producer_col: str = "producer") -> str:
    """The SQL condition of a window: `col` in [start, end) (None: open) and the producer among
    `producers` (None: any); `true` when nothing narrows it."""
    parts = []
    if start is not None:
        parts.append(f"{col} >= {int(start)}")
    if end is not None:
        parts.append(f"{col} < {int(end)}")
    if producers is not None:
        parts.append(f"{producer_col} IN ({', '.join(str(int(p)) for p in producers) or 'NULL'})")
    return " AND ".join(parts) or "true"
