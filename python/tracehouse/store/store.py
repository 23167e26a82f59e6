"""`Store`: the one object that owns a store directory.

Owns the catalog, the per-trace writers, the single-writer lock, recovery on
open, deletes, and the query engine. The CLI, the HTTP server and the Python
API are thin callers of this class.

Layout of a store directory:
  catalog.sqlite            the catalog (traces, types, producers, segments, results)
  writer.lock               held (flock) by the one process allowed to write
  disk-full.reserve         1 MB the writer frees when the disk is full, so the catalog can
                            still record that (mark a trace incomplete, roll an import back)
  traces/<id>/wal/          write-ahead log files of trace <id>
  traces/<id>/segments/<type>/*.parquet   immutable sorted segments
  results/<id>.parquet      table results

Over 600 lines: Store is the one door, so every public operation is a method here; the work is
in catalog.py, writer.py, compact.py, conform.py, scan.py and query.py.
"""

from __future__ import annotations

import fcntl
import logging
import numbers
import os
import re
import shutil
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from .. import _core, lazy
from ..errors import (
    BadInput,
    DiskFull,
    NotFound,
    ReadOnly,
    StoreDamaged,
    StoreLocked,
    TracehouseError,
    cause_of,
    is_disk_full,
)
from ..schema import EventType, check_ident, one_event_type
from . import journal
from . import verify as verifymod
from .catalog import INCOMPLETE_IMPORT, RESULT_KINDS, Catalog, SegmentInfo, TraceInfo, wal_damage_reason
from .options import WriterOptions
from .quarantine import Quarantine

if TYPE_CHECKING:
    from .query import QueryEngine
    from .scan import Cut
    from .writer import RecoveryReport, TraceWriter, WriterHost

# Imported on first use (lazy.py): listing and searching traces read only the catalog, and a
# count of a whole view reads the catalog and the unflushed tail; the writer, the reader,
# the SQL engine and the libraries under them are loaded by the first call that needs them.
np = lazy.module("numpy")
pa = lazy.module("pyarrow")
pq = lazy.module("pyarrow.parquet")
querymod = lazy.module("tracehouse.store.query")
scanmod = lazy.module("tracehouse.store.scan")
segmod = lazy.module("tracehouse.store.segments")
walmod = lazy.module("tracehouse.store.wal")
writermod = lazy.module("tracehouse.store.writer")

log = logging.getLogger("tracehouse.store")

# Letters and digits of any script (`\w`: `データ`, `café`), and _ . : @ + -.
TRACE_NAME = re.compile(r"\w[\w.:@+-]{0,127}")
TRACE_NAME_RULE = (
    "letters or digits (any script) and _ . : @ + - (starting with a letter, digit or _, "
    "no '..', at most 128 characters)"
)


def check_trace_name(name: str) -> str:
    """Trace names become SQL schema names: no path separators, quotes, spaces or '..'."""
    if not isinstance(name, str) or not TRACE_NAME.fullmatch(name) or ".." in name:
        raise BadInput(f"invalid trace name {name!r}", expected=TRACE_NAME_RULE)
    return name


def check_new_trace_name(name: str) -> str:
    """`check_trace_name`, and not a name SQL keeps for itself (RESERVED_TRACE_NAMES): for a
    trace being created (an existing one keeps its name, whatever it is)."""
    from .query import RESERVED_RULE, RESERVED_TRACE_NAMES  # (the SQL namespace's rules are query.py's)

    check_trace_name(name)
    if name.lower() in RESERVED_TRACE_NAMES:
        raise BadInput(f"trace name {name!r} is reserved", expected=RESERVED_RULE)
    return name


def trace_name_from(text: str, default: str = "trace") -> str:
    """A valid trace name made from `text` (a file name, a command): Unicode NFC (a name
    typed on a Mac is then the same name), other characters at either end dropped and
    each run of them inside one `_`, no '..', at most 128 characters; `default` when
    nothing is left. `my events (1)` -> `my_events_1`, `データ` stays."""
    name = re.sub(r"^\W+|\W+$", "", unicodedata.normalize("NFC", text))
    name = re.sub(r"\.{2,}", ".", re.sub(r"[^\w.:@+-]+", "_", name))[:128]
    return name if TRACE_NAME.fullmatch(name) else default


def check_producers(rows: Iterable[dict]) -> list[dict]:
    """Producer rows validated up front: a bad row must not leave a half-created trace behind."""
    out = []
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise BadInput(f"producer #{i} is a {type(r).__name__}", expected="a dict with id, kind, name")
        missing = [k for k in ("id", "kind", "name") if k not in r]
        if missing:
            raise BadInput(f"producer #{i} has no {', '.join(missing)}", expected="a dict with id, kind, name")
        for k, types in (
            # numbers.Integral holds int and numpy's integers (numpy registers them) without
            # importing numpy: a recording creates its trace before anything needs it.
            ("id", (numbers.Integral,)),
            ("parent", (numbers.Integral, type(None))),
            ("kind", (str,)),
            ("name", (str,)),
            ("attrs", (dict, type(None))),
        ):
            v = r.get(k)
            if isinstance(v, bool) or not isinstance(v, types):
                raise BadInput(
                    f"producer #{i} has {k}={v!r}",
                    column=k,
                    expected={"id": "an int", "parent": "an int or None", "attrs": "a dict"}.get(k, "a string"),
                )
        out.append(r)
    return out


RESERVE = "disk-full.reserve"
RESERVE_BYTES = 1 << 20  # a catalog transaction needs a few 4 KB pages of SQLite's WAL

# Mean rows per chunk from which a several-chunk table is appended chunk by chunk, not glued:
# each batch costs a conform and an IPC message (~30-60 us for 61 columns, about 1 us a column),
# gluing ~8 ns a value: both grow with the columns, and they meet near 128 rows. It was 4096:
# the Arrow writes of `bench write --half-rate` (rounds of 4 bodies of 1,000 QoS rows, 50
# columns, through the server's ingestor, /tmp/ib/disp.py) took 1,366-1,374 us of the
# dispatcher's CPU per body, 795-858 us at 128 (830 at 512): gluing copied 1.6 MB a round. The
# copy moves to the checkpoint, which concatenates the tail anyway: the maximum Arrow rate of
# `bench write --half-rate arrow` stayed within its noise (518-540K against 552-597K rows/s, in
# turn), while the thread that answers writes does 40 % less per write.
BIG_CHUNK_ROWS = 128


class Store:
    """A tracehouse store directory. Open with `tracehouse.open(path)`.

    Any number of processes may read; the first write takes the store's
    writer lock (a second writing process gets `StoreLocked`).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        readonly: bool = False,
        create: bool = True,
        options: WriterOptions | None = None,
        **option_kw: Any,
    ) -> None:
        self.path = Path(path).absolute()
        self.readonly = readonly
        self.options = options or WriterOptions(**option_kw)
        cat_path = self.path / "catalog.sqlite"
        if not cat_path.exists():
            held = verifymod.holds_traces(self.path)
            if held:  # a catalog made now would not know them: the next writer would take their ids
                raise StoreDamaged(
                    f"{self.path} has no catalog ({cat_path} is missing) but holds {len(held)} trace "
                    f"director{'y' if len(held) == 1 else 'ies'} ({', '.join(held[:5])}"
                    f"{', ...' if len(held) > 5 else ''}): nothing was changed. `tracehouse repair` "
                    "rebuilds the catalog from them"
                )
            if readonly or not create:
                raise NotFound(f"no tracehouse store at {self.path} (run `tracehouse init` first)")
            self.path.mkdir(parents=True, exist_ok=True)
            (self.path / "traces").mkdir(exist_ok=True)
        self.catalog = Catalog(cat_path, readonly=readonly)
        self._lock_fd: int | None = None
        # Threads of this process racing for their first write: one takes the flock (a second
        # flock from the same process fails as if another process held it) and one TraceWriter
        # is made per trace (a second one loses rows and replays the same WAL twice).
        self._writer_lock = threading.RLock()
        self._writers: dict[int, TraceWriter] = {}
        self._append_writers: dict[str, TraceWriter] = {}  # trace name -> writer, for append's hot path
        self.recovery: list[RecoveryReport] = []
        self._query: QueryEngine | None = None
        self._query_lock = threading.Lock()  # (`query_engine`: one engine, whichever thread asks first)
        # Keyed by (trace id, created): a trace deleted in another process and made again under its
        # name (InfluxQL DROP + CREATE DATABASE) is another trace, whose WAL file may even get the
        # old one's number and inode; its reads must not continue the old one's (they did: a
        # query process counted the dropped bucket's rows with the new ones).
        self._wal_reads: dict[tuple, tuple] = {}  # -> (signature, records) of its last WAL read
        self._wal_files: dict[tuple, dict] = {}  # -> what each WAL file gave so far (wal.read_uncovered)
        # -> (catalog version, event types, segments, covered WAL number) as last read: `cut`
        self._cut_catalog: dict[tuple, tuple] = {}
        self._wal_dirs: dict[int, Path] = {}  # trace id -> its WAL directory (`_wal_dir`)
        # -> (catalog version, event types, segments) of a trace this process writes, as last read
        # by `cut` (the same reads, kept while the version stays)
        self._writer_cut: dict[tuple, tuple] = {}
        if not readonly and _has_pending_work(self):
            try:
                self.become_writer()
            except StoreLocked:
                pass  # the process holding the lock owns recovery; we read registered segments
            except StoreDamaged as e:  # reads of what is intact go on; writes say this again
                log.warning("%s", e)

    # -- the writer lock -----------------------------------------------------------

    def become_writer(self) -> None:
        """Take the store's writer lock now (StoreLocked if another process holds it) and
        recover what an earlier writer left; writes otherwise take it on first use."""
        with self._writer_lock:
            self._become_writer_locked()

    def _become_writer_locked(self) -> None:
        if self.readonly:
            raise ReadOnly(f"store {self.path} was opened read-only")
        if self._lock_fd is not None:
            return
        fd = os.open(self.path / "writer.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StoreLocked(
                f"store {self.path} is being written by another process (pid {holder}); "
                "one writer per store — stop it, or read with a read-only open"
            ) from None
        try:
            survey = verifymod.survey(self.path, self.catalog)
            wrong = survey.disagreements()
            if wrong:
                raise StoreDamaged(
                    f"store {self.path}: its catalog ({self.catalog.path}) and its files disagree: "
                    + "; ".join(wrong[:8])
                    + (f"; and {len(wrong) - 8} more" if len(wrong) > 8 else "")
                    + ". Nothing was changed and writes are refused: `tracehouse verify` says what is intact, "
                    "`tracehouse repair` rebuilds the catalog from the files (deleting nothing)"
                )
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock_fd = fd
        self.ensure_reserve()
        self._recover(survey)

    # -- the disk-full reserve -------------------------------------------------------
    # The catalog lives on the disk the events fill: when it is full, even the transaction that
    # marks a trace incomplete or rolls an import back fails. The writer keeps a little space
    # taken and gives it back at that moment.

    def ensure_reserve(self) -> None:
        """Take the reserve if it is not held (best effort: on a full disk it waits for later)."""
        path = self.path / RESERVE
        if path.exists():
            return
        tmp = path.with_name(f".{RESERVE}.{os.getpid()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.posix_fallocate(fd, 0, RESERVE_BYTES)
            finally:
                os.close(fd)
            os.rename(tmp, path)
        except OSError:
            tmp.unlink(missing_ok=True)

    def release_reserve(self) -> bool:
        """Give the reserve back to the file system; True if it was held."""
        try:
            (self.path / RESERVE).unlink()
            return True
        except FileNotFoundError:
            return False

    def catalog_write(self, write: Callable[[], Any]) -> Any:
        """Run a catalog write that must succeed on a full disk: if the catalog finds no room,
        the reserve is given back and the write tried once more."""
        try:
            return write()
        except DiskFull:
            if not self.release_reserve():
                raise
            log.warning(
                "disk full under %s: gave back the %d KB reserve for the catalog", self.path, RESERVE_BYTES >> 10
            )
            return write()

    def _recover(self, survey: verifymod.Survey) -> None:
        """Finish interrupted deletes, clear what crashed writes left (`survey`: files the catalog
        does not name whose rows are elsewhere; never a directory the catalog does not know),
        replay uncovered WAL."""
        for tid in self.catalog.deleting():
            shutil.rmtree(self.path / "traces" / str(tid), ignore_errors=True)
            self.catalog.drop_trace_rows(tid)
        for rel in survey.partial:  # a segment never renamed into place: never registered
            (self.path / rel).unlink(missing_ok=True)
        quarantine = None
        for rel, verdict, why in survey.orphans:
            if verdict == "redundant":
                (self.path / rel).unlink(missing_ok=True)
            elif verdict == "unlogged":  # no other copy of its rows, but never acknowledged: kept aside
                quarantine = quarantine or Quarantine(self.path)
                dest = quarantine.move(self.path / rel, why)
                log.warning("moved %s to %s: %s", rel, dest, why)
        self._delete_retired()
        for info in self.catalog.traces():
            wal_dir = self._wal_dir(info)
            if wal_dir.exists() and any(wal_dir.iterdir()):
                w = self._writer(info)
                if w.recovery.wal_files:
                    self.recovery.append(w.recovery)

    def _delete_retired(self) -> None:
        """Delete files of compacted-away segments once readers had `retire_grace_s` to finish."""
        cutoff = time.time() - self.options.retire_grace_s
        gone = []
        for sid, rel in self.catalog.retired_before(cutoff):
            (self.path / rel).unlink(missing_ok=True)
            gone.append(sid)
        self.catalog.forget_segments(gone)

    def _writer_host(self) -> WriterHost:
        return writermod.WriterHost(
            root=self.path,
            catalog=self.catalog,
            catalog_write=self.catalog_write,
            ensure_reserve=self.ensure_reserve,
            delete_retired=self._delete_retired,
            next_seq=self._max_seq_by_producer,
        )

    def _writer(self, info: TraceInfo) -> TraceWriter:
        w = self._writers.get(info.id)
        if w is None:
            with self._writer_lock:
                self.become_writer()  # its recovery may have made this trace's writer already
                w = self._writers.get(info.id)
                if w is None:
                    if not journal.journal_path(self.path, info.id).exists():  # (a store made before journals)
                        journal.snapshot(
                            self.path, info, self.catalog.trace_types(info).values(), self.catalog.producers(info.id)
                        )
                    w = writermod.TraceWriter(
                        self._writer_host(), info.id, info.name, self.catalog.trace_types(info), self.options
                    )
                    self._writers[info.id] = w
        return w

    # -- traces --------------------------------------------------------------------

    def create_trace(
        self,
        name: str,
        format: str = "custom",
        *,
        description: str = "",
        metadata: dict[str, Any] | None = None,
        event_types: Iterable[EventType] = (),
        producers: list[dict] | None = None,
        format_description: str = "",
        own_types: bool = False,
        importing: bool = False,
    ) -> TraceInfo:
        """Create an empty trace; its format's event types are registered once.

        `own_types`: the trace's event types are its own, not its format's (line protocol: two
        buckets may hold a measurement of one name with different field types).
        `importing`: the trace is filled by an import that either completes
        (`complete_import`) or is rolled back (`rollback_import`); until then it is marked
        incomplete (th.traces.state), so one whose importer died stays marked."""
        check_new_trace_name(name)
        check_ident(format, "format")
        producers = check_producers(producers or [])  # before anything is registered
        event_types = list(event_types)
        self.become_writer()
        self.catalog.ensure_format(format, format_description)
        stored = []
        if not own_types:
            for et in event_types:  # (a type stored already costs no catalog write: put_event_type)
                stored.append(self.catalog.put_event_type(format, et))
                self._widen_writers(format, stored[-1])
        mark = (
            f"{INCOMPLETE_IMPORT} (pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S')})"
            if importing
            else None
        )
        tid = self.catalog.create_trace(name, format, description, metadata or {}, own_types=own_types, incomplete=mark)
        info = self.catalog.trace(name)
        # The trace's own record of what the catalog says of it (repair rebuilds from it).
        journal.append(
            self.path,
            tid,
            [
                journal.trace_entry(info, format_description),
                *({"op": "type", "type": et.to_json()} for et in stored or event_types),
                *([journal.producers_entry(producers)] if producers else []),
            ],
        )
        if producers:
            self.catalog.put_producers(tid, producers)
        if own_types:
            for et in event_types:
                self.catalog.put_event_type(format, et, info)
        return info

    def checkpoint_soon(self, trace: str) -> None:
        """Have `trace`'s writer start a checkpoint of what it buffers now, without waiting for it
        (an import that has read its input starts encoding its last rows before its last catalog
        writes; `flush` or `complete_import` then waits for them)."""
        self._live_writer(trace).flush_request.set()

    def complete_import(self, trace: str) -> None:
        """Make every row of an import durable in segments, then clear its incomplete mark."""
        self.flush(trace)
        self.catalog.set_incomplete(self.catalog.trace(trace).id, None, only_if=INCOMPLETE_IMPORT)

    def rollback_import(self, trace: str, error: BaseException) -> NoReturn:
        """Delete what a failed import made of `trace` (an import either completes or leaves
        nothing), then raise `error` - for a full disk, a DiskFull saying what was rolled back.
        Call it from the `except` that caught `error`. If the delete fails too, the trace keeps
        its incomplete mark."""
        try:
            self.catalog_write(lambda: self.rm(trace))
            undone = "was rolled back (nothing of it is kept)"
        except Exception as e:  # noqa: BLE001 - the import's own error is the one to report
            log.warning("could not roll back the import of trace %s: %s", trace, e)
            undone = f"could not be rolled back ({e}): it stays, marked incomplete; remove it with `tracehouse rm`"
        if is_disk_full(error) and isinstance(error, Exception):
            raise DiskFull(
                f"no space left on the store's disk ({self.path}): the import of trace {trace!r} "
                f"{undone}; cause: {_root_cause(error)}"
            ) from error
        raise error

    def trace(self, name: str) -> TraceInfo:
        return self.catalog.trace(name)

    def traces(self) -> list[TraceInfo]:
        return self.catalog.traces()

    def search(
        self,
        name: str | None = None,
        *,
        format: str | None = None,
        metadata: dict[str, str] | None = None,
        start: int | None = None,
        end: int | None = None,
        min_events: int | None = None,
        max_events: int | None = None,
        min_bytes: int | None = None,
        max_bytes: int | None = None,
    ) -> list[TraceInfo]:
        """Traces matching every given criterion.

        name: glob pattern (`*`, `?`); start/end: ns, the trace overlaps [start, end];
        metadata: key -> glob pattern on the value.
        """
        where, args = [], []
        if format is not None:
            where.append("format = ?")
            args.append(format)
        if start is not None:
            where.append("ts_max >= ?")
            args.append(int(start))
        if end is not None:
            where.append("ts_min <= ?")
            args.append(int(end))
        for col, op, v in (
            ("event_count", ">=", min_events),
            ("event_count", "<=", max_events),
            ("bytes", ">=", min_bytes),
            ("bytes", "<=", max_bytes),
        ):
            if v is not None:
                where.append(f"{col} {op} ?")
                args.append(int(v))
        for k, pattern in (metadata or {}).items():
            where.append("id IN (SELECT trace_id FROM trace_metadata WHERE key = ? AND value GLOB ?)")
            args += [k, pattern]
        if name is not None:
            where.append("name GLOB ?")
            args.append(name)
        return self.catalog.traces(" AND ".join(where), tuple(args))

    def set_metadata(self, trace: str, metadata: dict[str, Any]) -> None:
        self.become_writer()
        tid = self.catalog.trace(trace).id
        journal.append(self.path, tid, [{"op": "metadata", "values": {str(k): str(v) for k, v in metadata.items()}}])
        self.catalog.set_metadata(tid, metadata)

    def event_types(self, trace: str) -> dict[str, EventType]:
        info = self.catalog.trace(trace)
        w = self._writers.get(info.id)
        return dict(w.event_types) if w else self.catalog.trace_types(info)

    def writer_event_types(self, trace_id: int) -> dict[str, EventType] | None:
        """The event types of this process's writer of the trace as they are (not a copy: read
        it, never change it), or None when no writer of this process holds the trace. A type is
        changed only by putting a new EventType under its name (`add_event_type`, after the
        catalog's version moved), so a reader that kept a copy knows it is stale when a value is
        no longer the same object: what a cache of facts keyed by the catalog's version needs
        beside it (server/influxql.py `_source_facts`)."""
        w = self._writers.get(trace_id)
        return None if w is None else w.event_types

    def event_type(self, trace: str, name: str) -> EventType:
        """One event type of a trace (BadInput naming the ones it has when it has none of that name)."""
        return one_event_type(self.event_types(trace), trace, name)

    def add_event_type(self, trace: str, et: EventType) -> EventType:
        """Declare (or widen) an event type of the trace's format (or of the trace, when it owns
        its types)."""
        info = self.catalog.trace(trace)
        self.become_writer()
        stored = self.catalog.put_event_type(info.format, et, info)
        journal.append(self.path, info.id, [{"op": "type", "type": stored.to_json()}])
        if info.own_types:
            w = self._writers.get(info.id)
            if w is not None:
                w.event_types[stored.name] = stored
        else:
            self._widen_writers(info.format, stored)
        return stored

    def _widen_writers(self, fmt: str, stored: EventType) -> None:
        """Event types belong to the format: every open writer of a trace of `fmt` sees the new one
        (updating only the named trace's writer left the others rejecting the new columns);
        traces that own their types are not the format's."""
        for t in self.catalog.traces("format = ? AND own_types = 0", (fmt,)):
            w = self._writers.get(t.id)
            if w is not None:
                w.event_types[stored.name] = stored

    # -- producers -----------------------------------------------------------------

    def add_producers(self, trace: str, rows: list[dict]) -> None:
        """Insert or replace producers: dicts with id, parent, kind, name, attrs."""
        rows = check_producers(rows)
        self.become_writer()
        tid = self.catalog.trace(trace).id
        journal.append(self.path, tid, [journal.producers_entry(rows)])  # first: it holds all the catalog does
        self.catalog.put_producers(tid, rows)

    def producers(self, trace: str) -> list[dict]:
        return self.catalog.producers(self.catalog.trace(trace).id)

    # -- appending -----------------------------------------------------------------

    def append(
        self,
        trace: str,
        event_type: str,
        batch: pa.RecordBatch | pa.Table,
        *,
        wait: bool = False,
        source: str = "batch",
    ) -> int:
        """Append events of one type. Returns the log sequence number of the write.

        `batch` needs ts (int64 ns) and producer (int32); seq is assigned per
        producer when absent; params not given are null. With `wait=True` the
        call returns once the write is durable under the store's fsync policy.
        """
        w = self._live_writer(trace)
        if not isinstance(batch, (pa.RecordBatch, pa.Table)):
            raise BadInput(f"events must be a pyarrow RecordBatch or Table, not {type(batch).__name__}", file=source)
        et = w.event_types.get(event_type)
        if et is None:
            info = self.catalog.trace(trace)
            raise BadInput(
                f"trace {trace!r} (format {info.format!r}) has no event type {event_type!r}",
                expected=", ".join(w.event_types) or "a declared event type (store.add_event_type)",
            )
        if isinstance(batch, pa.Table):
            if batch.num_rows == 0:
                batch = pa.RecordBatch.from_pylist([], schema=batch.schema)
            elif all(c.num_chunks == 1 for c in batch.columns):  # no copy for one-chunk tables
                batch = pa.RecordBatch.from_arrays([c.chunk(0) for c in batch.columns], schema=batch.schema)
            elif batch.num_rows < BIG_CHUNK_ROWS * max(1, batch.column(0).num_chunks):
                batch = batch.combine_chunks().to_batches()[0]  # small chunks: one copy beats a conform each
            else:
                # Big chunks (e.g. client batches of thousands of rows gathered into one write)
                # stay several batches of one WAL record: gluing them copied every value.
                parts = [b for b in batch.to_batches() if b.num_rows]
                return w.append_many(event_type, parts, wait=wait, source=source)
        # Conform, seq and the WAL record: the writer's native path (src/store/wal.rs).
        return w.append_many(event_type, [batch], wait=wait, source=source)

    def write_round(self, trace: str, decode: Callable[[dict], dict]) -> dict:
        """Decode and log a round of writes to `trace` in one native call: `decode` gets what
        logging needs and returns what it logged (`TraceWriter.write_round`; the line-protocol
        server hands it `_core.decode_lines_many`). Batches it did not log (a round that must
        first register producers or columns) come back with LSN None for `append`."""
        return self._live_writer(trace).write_round(decode)

    def _live_writer(self, trace: str) -> TraceWriter:
        # Hot path: a live append of a known trace costs no catalog query (the one writer
        # process owns every trace; rm drops the entry).
        w = self._append_writers.get(trace)
        if w is None or w.closed:
            w = self._writer(self.catalog.trace(trace))
            self._append_writers[trace] = w
        return w

    def assign_seq(self, trace: str, producer) -> pa.Array:
        """Sequence numbers for new events of `producer` (one per row, in row order),
        continuing each producer's numbering. For writers that split a batch by event type
        before appending: numbering the batch first keeps `seq` in source order."""
        return self._live_writer(trace).assign_seq(producer)

    def committer(self, trace: str) -> _core.GroupCommit | None:
        """The group committer of `trace`'s live writer (fsync batch), for callers that hand it
        work to do once records are durable; None under fsync always/off."""
        return self._live_writer(trace).committer

    def wal_records_unsynced(self) -> int:
        """WAL records appended by this process's writers and not yet fsynced (group commit)."""
        return sum(max(0, w.lsn - w.durable_lsn) for w in list(self._writers.values()) if not w.closed)

    def seq_counters(self, trace: str) -> _core.SeqCounters:
        """The per-producer numbering of `trace`'s live writer (for writers that number rows
        themselves, e.g. the line-protocol decoder, which builds batches in the stored layout)."""
        return self._live_writer(trace).seq_counters()

    @contextmanager
    def bulk(self, trace: str):
        """Defer the trace's automatic compaction while a bulk import streams into it.

        A compaction merges up to `compact_target_rows` rows of a type in memory; during an
        import that would make peak memory grow with the file. Checkpoints still run; the
        small segments are merged by a later `compact()` or by the next writes' checkpoints.
        """
        w = self._writer(self.catalog.trace(trace))
        w.compactor.paused = True
        try:
            yield
        finally:
            w.compactor.paused = False

    def wait_durable(self, trace: str, lsn: int, timeout: float | None = None) -> bool:
        """Wait until the write numbered `lsn` (what `append` returned) is durable; False on timeout."""
        return self._live_writer(trace).wait_durable(lsn, timeout)

    def durable_lsn(self, trace: str) -> int:
        """The highest write number of `trace` durable under the fsync policy (it only grows)."""
        return self._live_writer(trace).durable_lsn

    def next_producer_id(self, trace: str) -> int:
        """An id no producer of `trace` has yet (one above the highest)."""
        return self.catalog.next_producer_id(self.catalog.trace(trace).id)

    def flush(self, trace: str | None = None) -> None:
        """Checkpoint buffered events into registered segments (all traces by default)."""
        for w in self._selected_writers(trace):
            w.flush()

    def compact(self, trace: str | None = None) -> int:
        """Merge small segments now; returns how many segments were merged."""
        n = 0
        names = [trace] if trace else [t.name for t in self.catalog.traces()]
        for name in names:
            w = self._writer(self.catalog.trace(name))
            w.flush()
            n += w.maybe_compact(force=True)
        self._delete_retired()
        return n

    def set_retention(self, trace: str, keep_ns: int | None) -> int:
        """Keep the rows of `trace` for `keep_ns` nanoseconds (None or 0: forever) and apply it
        now: whole segments whose newest row is older than now - keep_ns are dropped from the
        catalog (their files after the grace readers get); the same happens at every later
        compaction. Returns how many segments were dropped. Nothing else is deleted (compact.py)."""
        self.become_writer()
        n = self._writer(self.catalog.trace(trace)).compactor.retain(int(keep_ns or 0))
        self._delete_retired()
        return n

    def read_cache_manifest(self, info: TraceInfo) -> dict | None:
        """The current read cache of a trace that keeps one (store/readcache.py), else None."""
        from . import readcache

        return readcache.manifest(self.path, info.id) if readcache.wanted(info.metadata) else None

    def build_read_cache(self, trace: str) -> dict:
        """Write the trace's read cache now (store/readcache.py: its live segments decoded into a
        DuckDB file the views read instead of their Parquet) and ask for it to be kept
        (`read_cache=duckdb`: rebuilt after compactions). Returns its manifest."""
        from . import readcache

        self.become_writer()
        info = self.catalog.trace(trace)
        if not readcache.wanted(info.metadata):
            self.catalog.set_metadata(info.id, {readcache.CACHE_META: "duckdb"})
            info = self.catalog.trace(trace)
        w = self._writer(info)
        return w.compactor.rebuild_read_cache()

    def retention(self, trace: str) -> int:
        """The retention of `trace` in ns (0: every row is kept)."""
        from .compact import retention_ns

        return retention_ns(self.catalog.trace(trace).metadata)

    def _selected_writers(self, trace: str | None) -> list[TraceWriter]:
        if trace is None:
            return list(self._writers.values())
        info = self.catalog.trace(trace)
        w = self._writers.get(info.id)
        return [w] if w else []

    def _max_seq_by_producer(self, trace: str) -> dict[int, int]:
        t = self.sql(f"SELECT producer, max(seq) + 1 AS n FROM {querymod.qident(trace)}.events GROUP BY producer")
        return dict(zip(t.column("producer").to_pylist(), t.column("n").to_pylist()))

    # -- reading -------------------------------------------------------------------

    def cut(self, trace: str | TraceInfo) -> Cut:
        """One consistent cut of a trace (`scan.Cut`): its event types, registered segments and
        unflushed tail. The tail is what this process's writer buffers; for a trace no writer of
        this process holds, it is the records of its WAL no checkpoint covers yet (rows another
        process - e.g. a server whose checkpoints cannot write - has logged but not
        checkpointed). Takes no lock of the trace and changes nothing.

        Another process's trace: what the catalog says of it (types, segments, covered WAL
        number) is read again only when the catalog's version moved (every catalog change bumps
        it: `Catalog.transaction`); the WAL files are looked at every time (`_wal_view`).

        This process's trace: its types and segments are kept the same way (read again when the
        version moved), its tail is the writer's at the call. Read every call, the two catalog
        reads were 0.12-0.37 ms of each served InfluxQL query (TSBS lastpoint, load 2-5)."""
        info = trace if isinstance(trace, TraceInfo) else self.catalog.trace(trace)
        w = self._writers.get(info.id)
        if w is None:
            return self._cut_of_wal(info)
        key = (info.id, info.created)
        with w.view_lock, w.lock:  # registered segments + unflushed tail as one cut (view_lock: registrations)
            # (read keeping the interpreter lock, `version_held`: sqlite3 lets it go, and this
            # thread holds the writer's lock while it waits to get it back)
            version = self.catalog.version_held()
            cached = self._writer_cut.get(key)
            if cached is None or cached[0] != version:
                # (the version read first: what is kept is never older than its key)
                cached = (version, self.catalog.trace_types(info), self.catalog.segments(info.id))
                if len(self._writer_cut) > 256:
                    self._writer_cut.clear()
                self._writer_cut[key] = cached
            _version, types, segs = cached
            tails = {k: list(v) for k, v in w.tail().items()}
            sig = (version, w.tail_version, tuple(types))
            types = dict(types, **w.event_types)
        return scanmod.Cut(info, self.path, types, list(segs), tails, sig)

    def _cut_of_wal(self, info: TraceInfo) -> scanmod.Cut:
        """`cut` of a trace no writer of this process holds: its segments, and the records of its
        WAL no checkpoint covers yet as the tail."""
        key = (info.id, info.created)
        known = self._wal_reads.get(key)
        version, types, segs, wal_sig, records = self._wal_view(info, known[0] if known else None)
        if records is None:
            records = known[1]
        else:
            self._wal_reads[key] = (wal_sig, records)
        tails: dict[str, list[pa.RecordBatch]] = {}
        for name, batch in records:  # (records of a type the catalog does not list are never made)
            tails.setdefault(name, []).append(batch)
        return scanmod.Cut(info, self.path, dict(types), list(segs), tails, _wal_cut_signature(version, wal_sig, types))

    def _wal_view(self, info: TraceInfo, known: tuple | None = None):
        """The catalog version, event types and registered segments of a trace and the records of
        its WAL files not yet covered by them, from one catalog state. Returns (version, types,
        segments, signature, records); records is None when the signature equals `known`
        (nothing changed since that read).

        The catalog's part is read again only when its version moved since the last call: a
        query over an unchanged store reads one number of the catalog (twice) and stats the
        uncovered WAL files, where reading types and segments took ~0.1 ms of its catalog
        and its Python objects (QoS Q1.1 in a query process; more for a trace of many segments)."""
        key = (info.id, info.created)
        wal_dir = self._wal_dir(info)
        version = self.catalog.version()
        for _ in range(100):
            cached = self._cut_catalog.get(key)
            if cached is None or cached[0] != version:
                with self.catalog.snapshot():  # types, segments and covered number from one catalog state
                    version = self.catalog.version()
                    cached = self._cut_catalog[key] = (
                        version,
                        self.catalog.trace_types(info),
                        self.catalog.segments(info.id),
                        self.catalog.wal_covered(info.id),
                    )
            _version, types, segs, covered = cached
            try:
                files = walmod.uncovered_files(wal_dir, covered, self._wal_files.get(key))
                # A checkpoint that registered after the catalog was read may have dropped its WAL
                # files before they were listed: they are then in neither half (rows missing at
                # the end; a reader saw 1,200 rows, then 1,150). Files are dropped only after a
                # catalog transaction moved the covered number past them (and the version with
                # it), so an unchanged version proves the listing whole.
                now = self.catalog.version()
                if now != version:
                    version = now
                    continue
                sig = (covered, files)
                if sig == known or not files:
                    return version, types, segs, sig, None if sig == known else []
                return (
                    version,
                    types,
                    segs,
                    sig,
                    walmod.read_uncovered(wal_dir, files, self._wal_files.setdefault(key, {})),
                )
            except FileNotFoundError:
                version = self.catalog.version()
                continue  # a checkpoint registered a file after our snapshot and dropped it: look again
        raise TracehouseError(f"trace {info.name!r}: its WAL kept changing under 100 consistent reads")

    def wal_signature(self, info: TraceInfo) -> tuple | None:
        """`cut(info).signature` as it is now if the catalog is still at the version `cut` last read
        for the trace, found without reading the catalog: that version, covered WAL number and types
        with a fresh look at the WAL files. None for a trace a writer of this process holds, one not
        cut yet, or a WAL file that vanished while listed (`cut` then says). The caller reads the
        catalog's version after this and trusts the signature only when that version is the
        signature's (`[0]`): no catalog transaction ran from that read to the listing's end, so the
        listing saw one catalog state (files are dropped only after a transaction moved the covered
        number past them), as `_wal_view`'s read after its listing proves.

        Why: a query over an unchanged store (store/query.py `_kept`) read the version three times
        (`_kept`, and before and after `_wal_view`'s listing), and each read of the shared SQLite
        connection lets go of the interpreter's lock and waits for it again: one read is enough."""
        if info.id in self._writers:
            return None
        key = (info.id, info.created)
        cached = self._cut_catalog.get(key)
        if cached is None:
            return None
        version, types, _segs, covered = cached
        try:
            files = walmod.uncovered_files(self._wal_dir(info), covered, self._wal_files.get(key))
        except FileNotFoundError:
            return None
        return _wal_cut_signature(version, (covered, files), types)

    def _wal_dir(self, info: TraceInfo) -> Path:
        d = self._wal_dirs.get(info.id)  # (made once: a kept read lists it every query)
        if d is None:
            d = self._wal_dirs[info.id] = self.path / "traces" / str(info.id) / "wal"
        return d

    def check_pages(self, trace: str) -> None:
        """Every page of the trace's segments against its CRC (`segments.check_pages`); raises
        StoreDamaged naming the first damaged file (export runs it: DuckDB does not check)."""
        for seg in self.segments_of(trace):
            try:
                bad = seg.damaged or segmod.check_pages(self.path / seg.path)["bad"]
            except (OSError, pa.ArrowException) as e:
                bad = f"unreadable: {e}"
            if bad:
                raise StoreDamaged(
                    f"segment {seg.path} of trace {trace!r} ({seg.event_type}) is damaged: {bad}. "
                    "Nothing was written. `tracehouse verify` says what is intact, `tracehouse repair` "
                    "sets damaged files aside"
                )

    def unknown_trace_dirs(self) -> list[str]:
        """Trace directories the catalog does not know (a damaged catalog lost them): writes are
        refused until `tracehouse repair` registers them again."""
        ids = self.catalog.trace_ids()
        return [d for d in verifymod.holds_traces(self.path) if int(d.split("/")[1]) not in ids]

    def damaged_segments(self, trace: str) -> list[tuple[SegmentInfo, str]]:
        """The trace's registered segments whose files are visibly damaged or missing, with what
        is wrong (`query.segment_damage`; `verify` reads every page)."""
        return [(s, why) for s in self.segments_of(trace) if (why := querymod.segment_damage(self.path, s))]

    def pending_wal_damage(self, trace: str) -> str | None:
        """What recovery will cut from the trace's WAL (a mark it will set, `wal_damage_reason`),
        when no writer holds the store (a live one recovered at its start); else None."""
        if self._lock_fd is not None or _writer_alive(self.path):
            return None
        info = self.catalog.trace(trace)
        wal_dir = self._wal_dir(info)
        losses = []
        for n in walmod.iter_uncovered(wal_dir, info.wal_covered):
            path = walmod.wal_path(wal_dir, n)
            losses += [x | {"file": str(path)} for x in walmod.read_wal(path, decode=False).losses()]
        return wal_damage_reason(losses) + " (not yet recovered: the next writer will cut it)" if losses else None

    def segments_of(self, trace: str, event_type: str | None = None) -> list[SegmentInfo]:
        """The registered, live segments of a trace (of one event type), by ts_min."""
        return self.catalog.segments(self.catalog.trace(trace).id, event_type)

    def scan(
        self,
        trace: str,
        event_type: str,
        columns: Iterable[str] | None = None,
        *,
        start: int | None = None,
        end: int | None = None,
        order: bool = True,
    ) -> pa.Table:
        """Rows of one event type with `columns` (default all), ts in [start, end), unflushed
        ones included; order=True: by (ts, producer, seq), else in storage order (`scan.read`)."""
        return scanmod.read(self.cut(trace), event_type, columns, start=start, end=end, order=order)

    def scan_parts(self, trace: str, event_type: str, columns: list[str]) -> list[scanmod.Part]:
        """The rows `scan(..., order=False)` gives, as row-group parts read on demand (`scan.parts`)."""
        return scanmod.parts(self.cut(trace), event_type, columns)

    def scan_sources(self, trace: str, event_type: str) -> list[scanmod.Source]:
        """The pieces of a type's rows (segments, then the unflushed tail) for `scan.select`."""
        return scanmod.sources(self.cut(trace), event_type)

    def stamp(self, trace: str) -> str:
        """Changes whenever the trace's events do: derived data records it to know it is stale."""
        return self.cut(trace).stamp()

    @property
    def query_engine(self) -> QueryEngine:
        q = self._query
        if q is None:
            # Threads racing for the first query made an engine each: a thread's `read_connection`
            # prepared its cursor on one, and its `snapshot_relation()` asked the other (no cursor).
            with self._query_lock:
                if self._query is None:
                    self._query = querymod.QueryEngine(self)
                q = self._query
        return q

    def tag_keys(self, trace: str) -> dict[str, str]:
        """The tag keys the views of `trace` carry as columns (line-protocol tags, or producer
        attributes with `tag_columns=attrs`), with their DuckDB types; see store/query.py."""
        return self.query_engine.tag_keys(trace)

    def last_row_types(self, trace: str) -> set[str]:
        """The event types of `trace` whose view `"<trace>".<type>_last` reads the last row of
        each series kept on write (store/lastrows.py), not every row."""
        return self.query_engine.last_row_types(trace)

    def read_connection(self, query: str, *, keep_open: bool = False):
        """A context manager giving a DuckDB cursor of its own to run `query` on, outside the
        engine's lock (`QueryEngine.snapshot`): its views are fixed when it is handed out,
        and whatever it runs is rolled back; `query_engine.snapshot_relation()` is `query`
        already bound on it. `interrupt()` it from another thread to stop it. `keep_open`:
        the caller runs nothing on the cursor but `snapshot_relation()`, so a read's
        transaction may serve this thread's next query (QueryEngine.snapshot)."""
        return self.query_engine.snapshot(query, keep_open)

    def sandbox_sql(self, temp_directory: str | None = None, memory_limit: int | None = None) -> None:
        """From now on SQL may read the store's own files only (no other path, no URL, no
        extension install) and may not change its configuration: what a server runs. DuckDB
        spills into `temp_directory` (default `<store>/tmp/duckdb-<pid>`), which must be inside
        the store; `memory_limit` bytes bound its operators."""
        tmp = Path(temp_directory or self.path / "tmp" / f"duckdb-{os.getpid()}").absolute()
        if not tmp.is_relative_to(self.path):
            raise BadInput(f"DuckDB's temp directory {tmp} is outside the store {self.path}")
        self.query_engine.sandbox(str(self.path), str(tmp), memory_limit)

    def sql(self, query: str, params: list | dict | None = None) -> pa.Table:
        """Run SQL over the store's views; returns an Arrow table."""
        if not params:
            count = self.whole_count(query)
            if count is not None:  # answered without DuckDB (see whole_count)
                return pa.table({count[0]: pa.array([count[1]], pa.int64())})
        return self.query_engine.sql(query, params)

    def whole_count(self, query: str) -> tuple[str, int] | None:
        """For `SELECT count(*) [AS name] FROM "<trace>".<view>` over a whole view (events or one
        type; the whole statement, nothing more): (column name, the count), from the catalog's
        counts and the unflushed tail, without DuckDB; else None (`sql` runs it). The number
        is the one DuckDB gives on the views (tests/store/test_query_counts.py)."""
        return querymod.whole_count(self, query)

    def sql_batches(self, query: str, params: list | dict | None = None, rows: int = 65_536):
        """Like `sql`, streamed: yields record batches of up to `rows` rows without holding the
        whole result in memory. Consume (or close) the generator before running other SQL."""
        return self.query_engine.batches(query, params, rows)

    def events(
        self,
        trace: str,
        types: str | Iterable[str] | None = None,
        *,
        start: int | None = None,
        end: int | None = None,
        producers: Iterable[int] | None = None,
        columns: Iterable[str] | None = None,
        output: str = "arrow",
    ):
        """Events of a trace in ts order, filtered by type, time range [start, end) and producer.

        One type: all of its columns. Several types (or None): the common
        columns plus `type`. output: arrow | pandas | polars.
        """
        info = self.catalog.trace(trace)
        known = self.event_types(trace)
        if isinstance(types, str):
            types = [types]
        types = list(types) if types is not None else None
        for t in types or []:
            if t not in known:
                raise BadInput(f"trace {trace!r} has no event type {t!r}", expected=", ".join(known))
        qident = querymod.qident
        schema = qident(info.name)
        if types is not None and len(types) == 1:
            src, type_filter = f"{schema}.{qident(types[0])}", None
        else:
            src, type_filter = f"{schema}.events", types
        cols = "*" if columns is None else ", ".join(qident(c) for c in columns)
        where, args = [], []
        if start is not None:
            where.append("ts >= ?")
            args.append(int(start))
        if end is not None:
            where.append("ts < ?")
            args.append(int(end))
        if producers is not None:
            ps = [int(p) for p in producers]
            where.append(f"producer IN ({', '.join('?' * len(ps))})" if ps else "false")
            args += ps
        if type_filter is not None:
            where.append(f"type IN ({', '.join('?' * len(type_filter))})" if type_filter else "false")
            args += type_filter
        sql = (
            f"SELECT {cols} FROM {src}"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY ts, producer, seq"
        )
        table = self.sql(sql, args)
        return convert(table, output)

    # -- analysis results ------------------------------------------------------------

    def save_result(
        self,
        kind: str,
        name: str,
        tool: str,
        traces: Iterable[str],
        *,
        params: dict | None = None,
        payload: Any = None,
        table: pa.Table | None = None,
        table_format: str = "parquet",
    ) -> int:
        """Save an analysis result linked to one or more traces; returns its id.

        table_format: "parquet" (zstd) or "arrow" (uncompressed Arrow IPC, one record
        batch: `result_table` memory-maps it, for indexes read by random access).
        """
        self.become_writer()
        if kind not in RESULT_KINDS:  # checked before the table file is written, not after
            raise BadInput(f"unknown result kind {kind!r}", expected=" | ".join(RESULT_KINDS))
        if table_format not in ("parquet", "arrow"):
            raise BadInput(f"unknown table format {table_format!r}", expected="parquet | arrow")
        ids = [self.catalog.trace(t).id for t in traces]
        path = checksum = None
        if table is not None:
            (self.path / "results").mkdir(exist_ok=True)
            tmp = self.path / "results" / f".{os.getpid()}-{time.time_ns()}.{table_format}.tmp"
            if table_format == "parquet":
                pq.write_table(table, tmp, compression="zstd", write_page_checksum=True)
            else:
                table = table.combine_chunks()
                with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
                    w.write_table(table, max_chunksize=max(1, table.num_rows))
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            checksum = verifymod.file_crc(tmp)  # (an index is Arrow IPC, which has no checksum of its own)
            path = f"results/{tmp.name[1:-4]}"
            os.rename(tmp, self.path / path)
        return self.catalog.add_result(
            kind, name, tool, params or {}, ids, payload=payload, path=path, checksum=checksum
        )

    def delete_result(self, rid: int) -> None:
        """Delete a result: its catalog row first, then its table file."""
        r = self.result(rid)
        self.become_writer()
        self.catalog.delete_result(int(rid))
        if r["path"]:
            (self.path / r["path"]).unlink(missing_ok=True)

    def results(
        self, *, trace: str | None = None, tool: str | None = None, name: str | None = None, kind: str | None = None
    ) -> list[dict]:
        where, args = [], []
        if trace is not None:
            where.append("r.id IN (SELECT result_id FROM result_traces WHERE trace_id = ?)")
            args.append(self.catalog.trace(trace).id)
        for col, v in (("tool", tool), ("name", name), ("kind", kind)):
            if v is not None:
                where.append(f"r.{col} = ?")
                args.append(v)
        return self.catalog.results(" AND ".join(where), tuple(args))

    def result(self, rid: int) -> dict:
        rows = self.catalog.results("r.id = ?", (int(rid),))
        if not rows:
            raise NotFound(f"no result with id {rid}")
        return rows[0]

    def result_table(self, rid: int) -> pa.Table:
        """The table of a result (an Arrow IPC table is memory-mapped, not read)."""
        r = self.result(rid)
        if not r["path"]:
            raise NotFound(f"result {rid} ({r['kind']}) has no table")
        path = self.path / r["path"]
        if path.suffix == ".arrow":
            return pa.ipc.open_file(pa.memory_map(str(path))).read_all()
        return pq.read_table(path)

    # -- deleting --------------------------------------------------------------------

    def rm(self, trace: str) -> None:
        """Delete a trace: hidden in one catalog transaction first, files after.

        What was derived from it goes with it: the processed traces made from it (a
        `processed` result naming its derived trace in params["derived"], e.g.
        `<trace>:spans`), removed the same way, and the results linked to no other trace
        (its derived indexes, tables, annotations: catalog rows, then files). A result
        linked to other traces too stays, linked to those; a processed result whose
        derived trace this is goes.
        """
        info = self.catalog.trace(trace)
        self.become_writer()
        linked = self.results(trace=info.name)
        for r in linked:
            derived = r["kind"] == "processed" and r["params"].get("derived")
            if derived and derived != info.name and any(t.name == derived for t in self.catalog.traces()):
                self.rm(derived)
        self._append_writers.pop(info.name, None)
        self._wal_reads.pop((info.id, info.created), None)
        self._wal_files.pop((info.id, info.created), None)
        self._cut_catalog.pop((info.id, info.created), None)
        w = self._writers.pop(info.id, None)
        if w is not None:
            try:
                w.close(flush=False)
            except Exception as e:  # noqa: BLE001 - a writer that failed (a full disk) is deleted all the same
                log.warning("trace %s: closing its writer for rm: %s", info.name, e)
        self.catalog.mark_deleting(info.id)
        shutil.rmtree(self.path / "traces" / str(info.id), ignore_errors=True)
        self.catalog.drop_trace_rows(info.id)
        for r in linked:
            others = [t for t in r["traces"] if t != info.name]
            if not others or (r["kind"] == "processed" and r["params"].get("derived") == info.name):
                try:
                    self.delete_result(r["id"])
                except NotFound:  # went with a derived trace removed above
                    pass

    # -- closing ---------------------------------------------------------------------

    def close(self) -> None:
        """Close writers (a last checkpoint each), the SQL engine and the catalog; the writer lock
        is let go whatever failed before it (the first error is raised after)."""
        errors = []
        try:
            for w in list(self._writers.values()):
                try:
                    w.close()
                except Exception as e:  # keep closing the others; report the first
                    errors.append(e)
            self._writers.clear()
            if self._query is not None:
                self._query.close()
                self._query = None
            self.catalog.close()
        finally:
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None
        if errors:
            raise errors[0]

    def scrub(self, trace: str) -> list[tuple[SegmentInfo, str]]:
        """Check every page of the trace's live segments against its CRC (`check_pages`) and mark
        the damaged ones in the catalog (queries naming them then fail naming them); returns
        the segments newly found damaged, with what is wrong. For `serve --scrub-interval`."""
        self.become_writer()
        found = []
        for seg in self.segments_of(trace):
            if seg.damaged:
                continue
            try:
                bad = segmod.check_pages(self.path / seg.path)["bad"]
            except FileNotFoundError:
                bad = None  # (compacted away meanwhile: gone after its grace, not damaged)
            except (OSError, pa.ArrowException) as e:
                bad = f"unreadable: {e}"
            if bad:
                self.catalog_write(lambda s=seg, b=bad: self.catalog.mark_damaged(s.id, b))
                found.append((seg, bad))
        return found

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _writer_alive(root: Path) -> bool:
    """Whether a process holds the store's writer lock now."""
    try:
        fd = os.open(root / "writer.lock", os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _has_pending_work(store: Store) -> bool:
    """True when opening must recover (uncovered WAL, unfinished delete, stray files)."""
    if store.catalog.deleting():
        return True
    traces = store.path / "traces"
    if not traces.exists():
        return False
    for d in traces.iterdir():
        wal = d / "wal"
        if wal.exists() and any(wal.iterdir()):
            return True
    return False


def _root_cause(e: BaseException) -> str:
    """The innermost error of `e`'s chain that says the disk is full (or `e`)."""
    best, seen = e, 0
    while e is not None and seen < 16:
        if isinstance(e, OSError) or "database or disk is full" in str(e):
            best = e
        e = cause_of(e)
        seen += 1
    return str(best)


def convert(table: pa.Table, output: str):
    if output == "arrow":
        return table
    if output == "pandas":
        return table.to_pandas()
    if output == "polars":
        import polars as pl

        return pl.from_arrow(table)
    raise BadInput(f"unknown output {output!r}", expected="arrow | pandas | polars")


def _wal_cut_signature(version: int, wal: tuple, types) -> tuple:
    """The signature of a cut read from the catalog and the WAL files (`Store._cut_of_wal`), as
    `Store.wal_signature` predicts it: one shape for both, or `_kept` never matches."""
    return (version, ("wal", wal), tuple(types))
