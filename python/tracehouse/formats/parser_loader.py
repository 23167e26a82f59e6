"""Importing with a format's Rust parser: the loop every format with one shares.

Owns reading a file in chunks (gunzipping on the fly when it starts with the gzip magic) or a
pipe as it arrives, feeding a `_core.NativeParser` with the GIL released, declaring the
columns and event types the parser discovers, appending its Arrow batches, saving its result
tables, turning its problems into the import report (or, with `strict`, into a BadInput naming
file:line), and deleting the half-made trace when anything fails, so a failed import registers
nothing. `import_parsed` is a whole import for a format declared in Rust; an importer module
with nothing of its own to add (perf's) is `NAME` plus a call to it.

`chunks` may hold None between byte chunks: the input is a pipe (`formats/stream.py`) and a
commit is due; the parser's `drain()` hands over its rows and the store registers them.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

from .. import _core
from ..errors import BadInput
from ..schema import Column, EventType, infer_event_type
from . import declared
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


class ParserLoader:
    """Feeds one parser's output into one new trace.

    `fmt` is the format's module (`FORMAT`, `DESCRIPTION`, `EVENT_TYPES`; optional
    `OWN_TYPES`: the trace's event types are its own, typed by its data, not its format's;
    `event_type(name, schema)`: the type of a batch of an undeclared type); `types`: event
    types made from the options (bpftrace's patterns), declared with the trace."""

    def __init__(
        self,
        store,
        trace: str,
        source: str,
        fmt,
        *,
        strict: bool,
        description: str = "",
        metadata: dict | None = None,
        declare: Callable[[dict[str, EventType]], None] | None = None,
        column: Callable[[str, str, str, str], Column] | None = None,
        types: tuple[EventType, ...] = (),
    ) -> None:
        self.store = store
        self.trace = trace
        self.source = source
        self.strict = strict
        self.fmt = fmt
        self.column = column or (lambda t, name, ptype, key: Column(name, ptype, "as recorded", key))
        self.report = ImportReport(trace, source)
        self.stream = False  # set for an import from a pipe: a failure keeps what was committed
        store.create_trace(
            trace,
            fmt.FORMAT,
            description=description,
            metadata={"source": source, **(metadata or {})},
            event_types=(*getattr(fmt, "EVENT_TYPES", ()), *types),
            format_description=fmt.DESCRIPTION,
            own_types=getattr(fmt, "OWN_TYPES", False),
            importing=True,
        )
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
                # A parser that makes its rows as they are taken (pprof's samples) hands over
                # one batch a call after the end of its input, until it has none.
                while batches := parser.drain():
                    self._take(parser, batches, progress)
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
                raise BadInput(
                    f"no events in the input{why}",
                    file=self.source,
                    line=first.line if first else None,
                    expected=self.fmt.DESCRIPTION,
                )
            self.store.complete_import(self.trace)
            return self.report
        except BaseException as e:
            if self.stream:
                from .stream import stopped

                # Nothing parsed: nothing to keep (the trace is removed, not left empty and incomplete).
                stopped(self.store, self.trace, e, keep=not self.strict and self.report.events > 0)
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
                make = getattr(self.fmt, "event_type", None)
                et = make(t, batch.schema) if make is not None else infer_event_type(t, "instant", batch.schema)
                self.types[t] = self.store.add_event_type(self.trace, et)
            self.store.append(self.trace, t, batch, source=self.source)
            self.report.events += batch.num_rows
            self.report.by_type[t] = self.report.by_type.get(t, 0) + batch.num_rows
            if progress is not None:
                progress(batch.num_rows)

    def abort(self, error: BaseException) -> NoReturn:
        """Remove the half-made trace and raise `error` (see `Store.rollback_import`)."""
        self.store.rollback_import(self.trace, error)


def parser_options(fmt: str, given: dict) -> dict:
    """The options of `given` (an importer's keyword arguments) that format `fmt`'s parser takes."""
    names = {name for name, _type, _doc in declared.formats()[fmt]["parser_options"] or ()}
    return {k: v for k, v in given.items() if k in names and v is not None}


def import_parsed(
    fmt,
    store,
    path: str | Path,
    name: str,
    *,
    strict: bool = False,
    description: str = "",
    progress=None,
    stream: int | None = None,
    metadata: dict | None = None,
    parser=None,
    loader_args: dict | None = None,
    after=None,
    chunks=None,
    **options,
) -> ImportReport:
    """Import `path` (or, `stream`: a file descriptor `path` names, a pipe read as the data
    arrives, committed batch by batch; `chunks`: the bytes and commit marks (None) of a reader
    of its own, `tracehouse capture`'s, `path` naming it) with the Rust parser of format module `fmt`'s `FORMAT`,
    given `options` (`parser`: one made already). The report's details are the parser's counts
    (nonzero ones, `rejected` aside) and its details. `after(parser)` saves what else the
    import keeps (result tables) and returns how many."""
    source = str(path)
    if stream is None and chunks is None and not Path(path).is_file():
        raise BadInput("no such file", file=source)
    if parser is None:
        parser = _core.NativeParser(fmt.FORMAT, strict=strict, **options)
    loader = ParserLoader(
        store,
        name,
        source,
        fmt,
        strict=strict,
        description=description,
        metadata=metadata,
        types=tuple(declared.input_types(parser)),
        **(loader_args or {}),
    )
    if chunks is not None:
        loader.stream = True
    elif stream is not None:
        from .stream import arrivals

        loader.stream = True
        chunks = arrivals(stream)
    else:
        chunks = read_chunks(path)
    report = loader.run(parser, chunks, progress, after=after)
    details = {k: v for k, v in parser.stats.items() if v and k != "rejected"}
    report.details = details | {k: v for k, v in json.loads(parser.details_json).items() if v}
    return report


def plain_importer(fmt):
    """(`import_file`, `import_stream`) of a format whose parser takes no options (perf,
    pprof, Perfetto): its importer module is its NAME and these two."""

    def import_file(
        store,
        path: str | Path,
        name: str,
        *,
        mapping=None,
        strict: bool = False,
        description: str = "",
        progress=None,
    ) -> ImportReport:
        return import_parsed(fmt, store, path, name, strict=strict, description=description, progress=progress)

    def import_stream(
        store,
        fd: int,
        name: str,
        *,
        source: str = "stdin",
        mapping=None,
        strict: bool = False,
        description: str = "",
        progress=None,
    ) -> ImportReport:
        """The same from a pipe, committed batch by batch as the data arrives (a format that
        needs the whole input, as pprof, parses it when the pipe closes)."""
        return import_parsed(
            fmt, store, source, name, strict=strict, description=description, progress=progress, stream=fd
        )

    return import_file, import_stream
