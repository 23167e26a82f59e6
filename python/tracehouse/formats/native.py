"""Running a native (Rust) streaming parser into a new trace.

Owns what the Chrome, bpftrace, SystemTap and Paje importers share: reading a
file in chunks (gunzipping on the fly when it starts with the gzip magic),
feeding a `_core` parser with the GIL released, declaring the columns the
parser discovers, appending its Arrow batches, turning its problems into the
import report (or, with `strict`, into a BadInput naming file:line), and
deleting the half-made trace when anything fails, so a failed import
registers nothing.

`chunks` may hold None between byte chunks: the input is a pipe (`formats/stream.py`) and a
commit is due; the parser's `drain()` hands over its rows and the store registers them.

A parser object has `feed(bytes) -> [(type, batch)]`, `finish() -> [...]`, `drain()`,
`new_columns() -> [(type, column, ptype, key)]`, `producers() -> [dict]`,
and the properties `stats`, `problems`, `fatal`.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import Callable, Iterator, NoReturn

from ..errors import BadInput
from ..schema import Column, EventType
from .report import ImportReport

CHUNK = 4 << 20
GZIP_MAGIC = b"\x1f\x8b"


def head_bytes(head: bytes, limit: int = 65536) -> bytes:
    """The first bytes of the content: `head` itself, or what it gunzips to."""
    if head[:2] != GZIP_MAGIC:
        return head
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, limit)
    except zlib.error:
        return b""


def read_chunks(path: str | Path, size: int = CHUNK) -> Iterator[bytes]:
    """The file's content in chunks of about `size` bytes, gunzipped when it is gzip."""
    with open(path, "rb") as raw:
        gz = raw.read(2) == GZIP_MAGIC
        raw.seek(0)
        f = gzip.GzipFile(fileobj=raw) if gz else raw
        try:
            while True:
                chunk = f.read(size)
                if not chunk:
                    return
                yield chunk
        except (OSError, EOFError, zlib.error) as e:
            raise BadInput(f"unreadable gzip data: {e}", file=str(path), expected="a complete gzip file") from None


class NativeLoader:
    """Feeds one parser's output into one new trace."""

    def __init__(self, store, trace: str, source: str, fmt, *, strict: bool, description: str = "",
                 metadata: dict | None = None, declare: Callable[[dict[str, EventType]], None] | None = None,
                 column: Callable[[str, str, str, str], Column] | None = None) -> None:
        self.store = store
        self.trace = trace
        self.source = source
        self.strict = strict
        self.fmt = fmt
        self.column = column or (lambda t, name, ptype, key: Column(name, ptype, "as recorded", key))
        self.report = ImportReport(trace, source)
        self.stream = False  # set for an import from a pipe: a failure keeps what was committed
        store.create_trace(trace, fmt.FORMAT, description=description, metadata={"source": source, **(metadata or {})},
                           event_types=getattr(fmt, "EVENT_TYPES", ()), format_description=fmt.DESCRIPTION,
                           importing=True)
        self.types: dict[str, EventType] = dict(store.event_types(trace))
        if declare is not None:
            declare(self.types)

    def run(self, parser, chunks: Iterator[bytes], progress=None, after=None) -> ImportReport:
        """Feeds every chunk; `after(parser)` runs at the end and returns how many other things
        (result tables) it stored: a trace with those but no events is still an import."""
        try:
            # Compaction deferred for the whole import, final checkpoint included: it would hold
            # up to compact_target_rows rows in memory, and peak memory must not grow with the file.
            with self.store.bulk(self.trace):
                for chunk in chunks:
                    if chunk is None:  # a pipe's commit is due (formats/stream.py): what arrived, registered
                        self._take(parser, parser.drain(), progress)
                        self.store.flush(self.trace)
                        continue
                    self._take(parser, parser.feed(chunk), progress)
                self._take(parser, parser.finish(), progress)
                self.store.flush(self.trace)
            for line, _offset, reason in parser.problems:
                self.report.reject(line, reason)
            self.report.rejected = parser.stats["rejected"]
            prods = parser.producers()
            if prods:
                self.store.add_producers(self.trace, prods)
            self.report.producers = len(prods)
            others = after(parser) if after is not None else 0
            if self.report.events == 0 and not others:
                first = self.report.first_rejected[0] if self.report.first_rejected else None
                why = f"; {self.report.rejected} rejected, first: {first.reason}" if first else ""
                raise BadInput(f"no events in the input{why}", file=self.source,
                               line=first.line if first else None, expected=self.fmt.DESCRIPTION)
            self.store.complete_import(self.trace)
            return self.report
        except BaseException as e:
            if self.stream:
                from .stream import stopped

                stopped(self.store, self.trace, e, keep=not self.strict)
            self.abort(e)  # raises

    def _take(self, parser, batches, progress) -> None:
        fatal = parser.fatal
        if fatal is not None:
            line, offset, reason = fatal
            raise BadInput(reason, file=self.source, line=line, expected=self.fmt.DESCRIPTION)
        new = parser.new_columns()
        if new:
            by_type: dict[str, list[Column]] = {}
            for t, name, ptype, key in new:
                by_type.setdefault(t, []).append(self.column(t, name, ptype, key))
            for t, cols in by_type.items():
                et = self.types.get(t)
                if et is None:
                    raise BadInput(f"parser produced undeclared event type {t!r}", file=self.source)
                known = {p.name for p in et.params}
                extra = [c for c in cols if c.name not in known]
                if extra:
                    self.types[t] = self.store.add_event_type(self.trace, et.with_params(extra))
        for t, batch in batches:
            if t not in self.types:
                self.types[t] = self.store.add_event_type(self.trace, self.fmt.event_type(t, batch.schema))
            self.store.append(self.trace, t, batch, source=self.source)
            self.report.events += batch.num_rows
            self.report.by_type[t] = self.report.by_type.get(t, 0) + batch.num_rows
            if progress is not None:
                progress(batch.num_rows)

    def abort(self, error: BaseException) -> NoReturn:
        """Remove the half-made trace and raise `error` (see `Store.rollback_import`)."""
        self.store.rollback_import(self.trace, error)
