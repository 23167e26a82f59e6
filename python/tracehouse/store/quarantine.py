"""quarantine/: where damaged or doubtful files of a store go instead of being deleted.

Owns moving (or copying) a file of the store aside with the reason: `quarantine/<UTC time>-<pid>/`
keeps the file under its path relative to the store (`traces/3/segments/ev/....parquet`) and
`report.jsonl`, one line per file: {"path", "reason", "action": "moved" | "copied", "at"}. Nothing
in the store reads it again and nothing deletes it: a user who has read the report removes it.

Who puts files here: recovery (a segment file the catalog does not name and whose rows no WAL
holds, a damaged WAL file's copy before its intact records are replayed) and `tracehouse repair`
(damaged segments, the damaged catalog, what it could not register).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

DIR = "quarantine"


class Quarantine:
    """The folder under quarantine/ of one repair or recovery run (made on first use)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.dir: Path | None = None
        self.entries: list[dict] = []

    def _folder(self) -> Path:
        if self.dir is None:
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            self.dir = self.root / DIR / f"{stamp}-{os.getpid()}"
            self.dir.mkdir(parents=True, exist_ok=True)
        return self.dir

    def _target(self, path: Path) -> tuple[str, Path]:
        rel = Path(path).absolute().relative_to(self.root).as_posix()
        dest = self._folder() / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        return rel, dest

    def move(self, path: Path, reason: str) -> Path:
        """Move `path` (a file or directory of the store) here; returns where it went."""
        rel, dest = self._target(path)
        shutil.move(str(path), dest)  # a rename: the quarantine is on the store's file system
        self._note(rel, reason, "moved")
        return dest

    def copy(self, path: Path, reason: str) -> Path | None:
        """Copy `path` here, unless an earlier run kept a copy of it at that size already."""
        rel = Path(path).absolute().relative_to(self.root).as_posix()
        size = Path(path).stat().st_size
        for older in (self.root / DIR).glob(f"*/{rel}"):
            if older.is_file() and older.stat().st_size == size:
                return None
        rel, dest = self._target(path)
        shutil.copy2(path, dest)
        self._note(rel, reason, "copied")
        return dest

    def _note(self, rel: str, reason: str, action: str) -> None:
        entry = {"path": rel, "reason": reason, "action": action, "at": time.time()}
        self.entries.append(entry)
        with open(self._folder() / "report.jsonl", "a") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()
            os.fsync(f.fileno())


def listing(root: Path) -> list[dict]:
    """Every entry of every report under `root`/quarantine/ (with its folder)."""
    out = []
    for report in sorted((Path(root) / DIR).glob("*/report.jsonl")):
        for line in report.read_text().splitlines():
            try:
                out.append(json.loads(line) | {"folder": report.parent.name})
            except ValueError:
                out.append({"folder": report.parent.name, "path": None, "reason": f"unreadable report line: {line!r}"})
    return out
