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
        exp = f" (expected {self.expected})" if self.expected else ""
        return f"{where}{col}{self.reason}{exp}"


class NotFound(TracehouseError):
    """A trace, event type, result or file that does not exist."""

    exit_code = 2


class AlreadyExists(TracehouseError):
    exit_code = 2


class StoreLocked(TracehouseError):
    """Another process holds the store's single writer lock."""

    exit_code = 3


class ReadOnly(TracehouseError):
    """A write was attempted through a read-only store handle."""

    exit_code = 2
