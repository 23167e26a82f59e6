"""Errors raised by tracehouse, each carrying enough context to act on.

Owns the exception hierarchy. Bad input always names the file, line and column
(when known) and what was expected; the CLI maps `BadInput` to exit code 2.
"""

from __future__ import annotations


class TracehouseError(Exception):
    """Base class of every error tracehouse raises on purpose."""

    exit_code = 1


class BadInput(TracehouseError):
    """Input that does not match what was expected (file, line, column, reason)."""

    exit_code = 2

    def __init__(
        self,
        reason: str,
        *,
        file: str | None = None,
        line: int | None = None,
        column: str | int | None = None,
        offset: int | None = None,
        expected: str | None = None,
    ) -> None:
        self.reason = reason
        self.file = file
        self.line = line
        self.column = column
        self.offset = offset
        self.expected = expected
        super().__init__(self.render())

    def render(self) -> str:
        where = ""
        if self.file is not None:
            where = str(self.file)
            if self.line is not None:
                where += f":{self.line}"
            if self.offset is not None:
                where += f" (byte {self.offset})"
            where += ": "
        col = f"column {self.column!r}: " if self.column is not None else ""
        # A reason of several lines (DuckDB's `LINE 1: ...` and its `^`) keeps its last line to itself.
        exp = ("\n" if "\n" in self.reason else " ") + f"(expected {self.expected})" if self.expected else ""
        return f"{where}{col}{self.reason}{exp}"


class NotFound(TracehouseError):
    """A trace, event type, result or file that does not exist."""

    exit_code = 2


class AlreadyExists(TracehouseError):
    exit_code = 2


class StoreLocked(TracehouseError):
    """Another process holds the store's single writer lock."""

    exit_code = 3


class StoreDamaged(TracehouseError):
    """The store's files and its catalog disagree, or a file of the store is damaged.

    The message names the catalog file and the directories or files in question. Nothing is
    changed: writes are refused until `tracehouse repair` (which rebuilds the catalog from what
    the files hold and moves damaged files into quarantine/, deleting nothing); reads of what
    is intact go on. `tracehouse verify` says what is intact, damaged or missing.
    """

    exit_code = 5


class ReadOnly(TracehouseError):
    """A write was attempted through a read-only store handle."""

    exit_code = 2


class DiskFull(TracehouseError):
    """The store's file system has no space (or quota) left for a write.

    Nothing half-written stays behind: a failed WAL append is cut back, a checkpoint keeps
    its rows in the WAL and retries, an import is rolled back. The server answers 507 with
    Retry-After while it lasts.
    """

    exit_code = 4


# Errno values that mean "no room to write": ENOSPC, and EDQUOT (a quota is full).
_FULL_ERRNOS = frozenset({28, 122})


def is_disk_full(e: BaseException | None) -> bool:
    """Whether `e` (or an exception it was raised from) says the disk or a quota is full:
    DiskFull, an OSError with ENOSPC/EDQUOT (pyarrow's write errors carry the errno; the group
    committer's fsync error only its text), or SQLite's "database or disk is full". Only
    errors of those kinds count: a BadInput quoting a traced program's ENOSPC is bad input."""
    import sqlite3

    seen = 0
    while e is not None and seen < 16:
        if isinstance(e, DiskFull):
            return True
        if isinstance(e, OSError) and (
            e.errno in _FULL_ERRNOS or "No space left on device" in str(e) or "Disk quota exceeded" in str(e)
        ):
            return True
        if isinstance(e, sqlite3.Error) and "database or disk is full" in str(e):
            return True
        e = cause_of(e)
        seen += 1
    return False


def cause_of(e: BaseException) -> BaseException | None:
    """The exception `e` was raised from, as its traceback would show it (`from None` hides it)."""
    if e.__cause__ is not None:
        return e.__cause__
    return None if e.__suppress_context__ else e.__context__
