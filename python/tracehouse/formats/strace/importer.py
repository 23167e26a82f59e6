"""strace importer: the Rust parser's batches into the store.

Owns finding the input files (one file, or the `PREFIX.<pid>` files of
`strace -ff -o PREFIX`, merged by timestamp in Rust), the loops handing batches to the
store (one file: read and parsed on a Rust thread of its own from the start of the import,
`_core.StraceFileParse`; -ff files: fed chunk by chunk in the order the merge asks), strict
mode and the import report. Every per-line loop is in `src/formats/strace/`; the event types
are declared in `tracehouse.formats.strace`.

`StraceSink` is the part shared with `tracehouse capture`, which feeds the
same parser from a pipe instead of files.
"""

from __future__ import annotations

import glob
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, NoReturn

from ...errors import BadInput
from .. import strace as fmt
from ..column_mapping import Mapping
from ..report import ImportReport

if TYPE_CHECKING:
    from ...store import Store

NAME = "strace"
DESCRIPTION = (
    "strace output with timestamps: `strace -f -ttt -T -y -o FILE CMD` "
    "(or -ff -o PREFIX: give PREFIX to merge PREFIX.<pid>)"
)

BATCH_ROWS = 1 << 16
# -ff files: one buffer per file is held at a time, MERGE_BUDGET bytes over all of them.
MERGE_BUDGET = 64 << 20
MIN_CHUNK = 64 << 10

# A strace line: optional pid column, timestamp, then a call, a resumption, a signal or an exit.
_LINE = re.compile(
    rb"^(?:\[pid\s+\d+\] |\d+ +)?(?:\s*\d+(?:\.\d+)?|\d\d:\d\d:\d\d(?:\.\d+)?)? *"
    rb"(?:[A-Za-z_][A-Za-z0-9_]*\(|<\.\.\. [A-Za-z0-9_]+ resumed>|--- |\+\+\+ )"
)


def sniff(head: bytes) -> bool:
    """True when the first line that is not a strace message looks like strace output."""
    lines = head.split(b"\n")
    if len(lines) > 1:
        lines = lines[:-1]  # the last one may be cut by the head
    for line in lines[:50]:
        if not line.strip() or line.startswith(b"strace: "):
            continue
        return bool(_LINE.match(line))
    return False


@dataclass
class StraceReport(ImportReport):
    """What an import or a capture did, beyond the common counts."""

    files: list[str] = field(default_factory=list)
    lines: int = 0
    bytes: int = 0
    notes: int = 0
    orphans: int = 0
    unfinished: int = 0


def _sources(path: Path) -> tuple[list[Path], list[int | None]]:
    """The files to read and the pid of each (from a `.N` suffix, for lines without a pid column)."""
    if path.is_file():
        return [path], [_pid_suffix(path)]
    if path.exists():
        raise BadInput("not a regular file", file=str(path), expected="an strace output file or an -ff prefix")
    parts = [
        p
        for p in path.parent.glob(glob.escape(path.name) + ".*")
        if p.is_file() and p.name[len(path.name) + 1 :].isdigit() and _pid_suffix(p) is not None
    ]
    parts.sort(key=lambda p: int(p.suffix[1:]))
    if not parts:
        raise BadInput("no such file (nor PREFIX.<pid> files of strace -ff)", file=str(path))
    return parts, [_pid_suffix(p) for p in parts]


def _pid_suffix(p: Path) -> int | None:
    s = p.suffix[1:]
    return int(s) if s.isdigit() and 0 < int(s) < 2**31 else None


class StraceSink:
    """Feeds one StraceParser and appends its batches to a new trace; `finish` registers it.

    On any error the caller calls `abort()`: nothing of the trace stays.
    """

    def __init__(
        self,
        store: Store,
        trace: str,
        sources: list[str],
        pids: list[int | None],
        *,
        strict: bool = False,
        description: str = "",
        metadata: dict | None = None,
        batch_rows: int = BATCH_ROWS,
    ) -> None:
        from ... import _core

        self.store = store
        self.trace = trace
        self.sources = sources
        self.strict = strict
        # (replaced by the finished parser of a file parsed on its own thread, `feed_native`)
        self.parser = _core.StraceParser(pids=pids, batch_rows=batch_rows)
        self.report = StraceReport(trace, sources[0] if len(sources) == 1 else ", ".join(sources), files=list(sources))
        store.create_trace(
            trace,
            fmt.FORMAT,
            description=description,
            event_types=fmt.EVENT_TYPES,
            format_description=fmt.DESCRIPTION,
            metadata={"source": self.report.source, **(metadata or {})},
            importing=True,
        )
        self._append = store.append
        self._lines = 0

    def feed(self, chunk: bytes, source: int = 0) -> int:
        """Parses one chunk, stores the batches it completed; returns lines read so far."""
        for type_name, batch in self.parser.feed(chunk, source):
            self._append(self.trace, type_name, batch)
        if self.strict and self.parser.rejected:
            self._fail_strict()
        return self.parser.lines

    def commit(self) -> None:
        """Every row parsed so far into registered segments, with the producers seen so far
        (an import from a pipe, `import_stream`): readers see them while the input goes on."""
        for type_name, batch in self.parser.drain():
            self._append(self.trace, type_name, batch)
        if self.strict and self.parser.rejected:
            self._fail_strict()
        producers = self.parser.producers()
        if producers:
            self.store.add_producers(self.trace, producers)
        self.store.flush(self.trace)

    def _where(self, source: int) -> str:
        return self.sources[source] if source < len(self.sources) else "?"

    def _fail_strict(self):
        src, line, reason = self.parser.rejects()[0]
        raise BadInput(
            reason, file=self._where(src), line=line, expected="a strace line (see `tracehouse import --help`)"
        )

    def finish(self) -> StraceReport:
        for type_name, batch in self.parser.finish():
            self._append(self.trace, type_name, batch)
        if self.strict and self.parser.rejected:
            self._fail_strict()
        # The last rows are encoded on the writer's threads while the producers go to the
        # catalog (1,078 producers of the 3M-line many-process log: ~0.06 s that came after
        # the wait for that encoding).
        self.store.checkpoint_soon(self.trace)
        late = self.parser.late()
        st = self.parser.stats
        r = self.report
        multi = len(self.sources) > 1
        for src, line, reason in self.parser.rejects():
            r.reject(line, f"{Path(self._where(src)).name}: {reason}" if multi else reason)
        r.rejected = st["rejected"]
        r.by_type = {k: v for k, v in st["events"].items() if v}
        r.events = sum(st["events"].values())
        r.lines, r.bytes = st["lines"], st["bytes"]
        r.notes, r.orphans, r.unfinished = st["notes"], st["orphans"], st["unfinished"]
        if r.events == 0:
            first = r.first_rejected[0] if r.first_rejected else None
            why = f"; {r.rejected} lines rejected, first: line {first.line}: {first.reason}" if first else ""
            raise BadInput(
                f"no strace events in the input{why}",
                file=self._where(0),
                line=first.line if first else None,
                expected=DESCRIPTION,
            )
        producers = self.parser.producers()
        self.store.add_producers(self.trace, producers)
        r.producers = len(producers)
        if late:
            # Calls that blocked for the whole trace (a thread waiting in futex or wait4) are
            # older than every row since: a checkpoint of their own keeps the others sorted.
            self.store.flush(self.trace)
            for type_name, batch in late:
                self._append(self.trace, type_name, batch)
        self.store.complete_import(self.trace)
        return r

    def abort(self, error: BaseException) -> NoReturn:
        """Remove the half-made trace and raise `error` (see `Store.rollback_import`)."""
        self.store.rollback_import(self.trace, error)


def feed_files(sink: StraceSink, files: list[BinaryIO], progress: Callable[[int], None] | None = None) -> None:
    """Reads the -ff files in the order the parser asks for them (the merge) until all have ended.

    Each file is read on demand, in the order the merge needs its lines; one buffer per file is
    held at a time.
    """
    seen = 0
    chunk = max(MIN_CHUNK, MERGE_BUDGET // len(files))
    while (i := sink.parser.need()) is not None:
        lines = sink.feed(files[i].read(chunk), i)
        if progress is not None and lines != seen:
            progress(lines - seen)
            seen = lines


def feed_native(sink: StraceSink, native, progress: Callable[[int], None] | None = None) -> None:
    """Appends the batches of a file parsed on its own thread (`_core.StraceFileParse`) until it
    ends; the sink then holds the finished parser. In strict mode the parse is stopped at the
    first batches after a rejected line (the sink's `finish` raises)."""
    seen = 0
    append, trace = sink._append, sink.trace
    while (batches := native.next()) is not None:
        for type_name, batch in batches:
            append(trace, type_name, batch)
        if sink.strict and native.rejected:
            native.stop()
        if progress is not None and native.lines != seen:
            progress(native.lines - seen)
            seen = native.lines
    sink.parser = native.parser()
    if progress is not None and sink.parser.lines != seen:
        progress(sink.parser.lines - seen)


def import_stream(
    store: Store,
    fd: int | None,
    name: str,
    *,
    source: str = "stdin",
    mapping: Mapping | None = None,
    strict: bool = False,
    description: str = "",
    progress=None,
    commit_s: float | None = None,
    chunks=None,
    metadata: dict | None = None,
) -> StraceReport:
    """Import strace output read from a pipe (`fd`) as it arrives, committed batch by batch
    (`formats/stream.py`): `strace -o /dev/stdout CMD | tracehouse import strace -`. `chunks`:
    the bytes and commit marks of a reader of its own instead (`tracehouse capture`'s)."""
    from ..stream import COMMIT_S, arrivals, stopped

    sink = StraceSink(
        store,
        name,
        [source],
        [None],
        strict=strict,
        description=description,
        metadata=metadata if metadata is not None else {"stream": source},
    )
    if chunks is None:
        chunks = arrivals(fd, COMMIT_S if commit_s is None else commit_s)
    seen = 0
    try:
        with store.bulk(name):  # no compaction while the stream comes in
            for chunk in chunks:
                if chunk is None:
                    sink.commit()
                    continue
                lines = sink.feed(chunk)
                if progress is not None and lines != seen:
                    progress(lines - seen)
                    seen = lines
            return sink.finish()
    except BaseException as e:
        # Nothing parsed: nothing to keep (the trace is removed, not left empty and incomplete).
        stopped(store, name, e, keep=not strict and sum(sink.parser.stats["events"].values()) > 0)


def start(path: str | Path):
    """The parse of `path` (one file) started on a thread of its own, before the caller opens the
    store (the importer hook `registry.Importer.start`): `tracehouse import` hands it to
    `import_file` as `started` and closes it if the import never takes it. None when `path` is
    not one readable file (`import_file` then says why).

    Opening a new store (its catalog, the disk-full reserve) took 12-70 ms of the command before
    the parse began (3M-line many-process log, load 4.3-4.6: `open_store` 177 -> 250 ms after
    the start of the process)."""
    from ... import _core

    path = Path(path)
    try:
        if not path.is_file():
            return None
        return _core.StraceFileParse(str(path), _pid_suffix(path), batch_rows=BATCH_ROWS)
    except (OSError, ValueError):
        return None


def import_file(
    store: Store,
    path: str | Path,
    name: str,
    *,
    mapping: Mapping | None = None,
    strict: bool = False,
    description: str = "",
    progress=None,
    started=None,
) -> StraceReport:
    """Import strace output from `path` (a file, or the PREFIX of `strace -ff -o PREFIX`) as trace `name`.

    `mapping` is ignored: strace lines map onto the format's fixed event types. `started`: the
    parse of this very file from `start` (else it is started here).
    """
    from ... import _core

    path = Path(path)
    paths, pids = _sources(path)
    # One file is parsed on a thread of its own from here on (or from `start`), while the
    # trace is made and pyarrow imported (`src/formats/strace/background.rs`); -ff files are
    # merged by `feed_files`.
    try:
        native = None
        if len(paths) == 1:
            native = started or _core.StraceFileParse(str(paths[0]), pids[0], batch_rows=BATCH_ROWS)
    except OSError as e:  # the Rust open's error names no file
        raise OSError(e.errno, e.strerror or str(e), str(paths[0])) from None
    try:
        # pyarrow is imported now, while the first batches are parsed, not when they are handed over.
        _core.strace_schemas()
        sink = StraceSink(
            store,
            name,
            [str(p) for p in paths],
            pids,
            strict=strict,
            description=description,
            metadata={"files": len(paths)} if len(paths) > 1 else None,
        )
    except BaseException:
        if native is not None:
            native.close()  # (else its thread waits with full queues until the object is collected)
        raise
    files = []
    try:
        # Compaction deferred for the whole import (it would hold up to compact_target_rows
        # rows in memory: peak memory must not grow with the file).
        with store.bulk(name):
            if native is not None:
                feed_native(sink, native, progress)
            else:
                for p in paths:
                    files.append(open(p, "rb"))  # noqa: SIM115 - closed by the finally below
                feed_files(sink, files, progress)
            return sink.finish()
    except BaseException as e:
        if native is not None:
            native.close()
        sink.abort(e)  # raises
    finally:
        for f in files:
            f.close()
