"""What every importer returns: the `ImportReport` (events by type, producers, rejected lines
with the first reasons, format-specific details), printed by `tracehouse import` and kept as JSON."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Rejected:
    line: int | None
    reason: str

    def to_json(self) -> dict:
        return {"line": self.line, "reason": self.reason}


@dataclass
class ImportReport:
    trace: str
    source: str
    events: int = 0
    by_type: dict[str, int] = field(default_factory=dict)
    producers: int = 0
    rejected: int = 0
    first_rejected: list[Rejected] = field(default_factory=list)
    details: dict = field(default_factory=dict)  # format-specific counts (unmatched halves, ...)

    def reject(self, line: int | None, reason: str, keep: int = 10) -> None:
        self.rejected += 1
        if len(self.first_rejected) < keep:
            self.first_rejected.append(Rejected(line, reason))

    def to_json(self) -> dict:
        d = dict(self.__dict__)
        d["first_rejected"] = [r.to_json() for r in self.first_rejected]
        return d
