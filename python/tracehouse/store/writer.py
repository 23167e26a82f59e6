"""The writer of one trace: WAL append, group commit, checkpoints into segments.

Owns the path of an appended batch from acknowledgement to segment:

  append ──> WAL record (framed, CRC) ──> in-memory tail ──checkpoint──> Parquet segments
                 │                                            (rotate WAL, write, fsync, rename,
                 └─ fsync policy: always | batch | off         register + advance wal_covered, drop WAL)

* `always`: append returns after fsync of its record.
* `batch`: a native group committer (`_core.GroupCommit`, src/store/commit.rs) fsyncs what was
  written at once when someone waits, else within `group_commit_ms`; `wait_durable(lsn)`
  (or `append(..., wait=True)`) blocks until a commit covers the record, and the HTTP
  server has its write requests answered from the committer's thread.
* `off`: no WAL at all (bulk import that can be redone); rows are durable
  only once a checkpoint has registered them (`flush()`).

One checkpoint runs at a time in a background thread while appends continue
into the next WAL file; if a second one is due before the first finishes,
append waits (back-pressure bounds memory to about two checkpoints of rows).
Segments of a checkpoint are encoded in parallel (pyarrow releases the GIL).

A full disk (ENOSPC, EDQUOT, SQLite's "database or disk is full") does not stop the
writer: an append whose WAL write fails is cut back out of the log and refused with
`DiskFull`; a checkpoint that cannot write its segments (or register them) removes
what it wrote, keeps its rows in memory and in the WAL, marks the trace incomplete
and tries again every `disk_full_retry_s`, registering as soon as there is room.
Meanwhile appends go on into the WAL until the back-pressure limit, where they are
refused with `DiskFull` instead of waiting; `flush()` has the waiting checkpoints try
once more at once and raises `DiskFull` if that finds no room either.
Any other error stops the writer: every later call raises it.

The append path itself (conform's fast path, seq numbers, the WAL record from the batches' own
buffers, one writev, the zeros and blocks allocated ahead, the fsync under `always` or the
group committer told under `batch`) is one native call, `_core.WalLog.append` (src/store/wal.rs
and wallog.rs, with their measurements), made under the writer's lock with the interpreter
lock released. Python only conforms batches not already in the stored layout and keeps the
tail (the batches appended since the last checkpoint).

Over 600 lines: the WAL append path, checkpoints and recovery share the writer's lock and its
tail; compaction is compact.py, conform is conform.py.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import _core, lazy
from ..errors import DiskFull, NotFound, TracehouseError, is_disk_full
from ..schema import EventType
from . import lastrows
from . import wal as walmod
from .catalog import INCOMPLETE_CHECKPOINT, INCOMPLETE_WAL, Catalog, wal_damage_reason
from .compact import Compactor
from .conform import align, conform_target, conform_unnumbered
from .options import WriterOptions
from .quarantine import Quarantine
from .segments import PRODUCER_ORDER, PRODUCER_ROW_GROUP, row_order, segment_meta, write_sorted_part

# Imported on first use (lazy.py): listing, searching and counting traces need none.
np = lazy.module("numpy")
pa = lazy.module("pyarrow")

log = logging.getLogger("tracehouse.store")

MIN_SPLIT_ROWS = 256 * 1024  # a checkpoint never splits a type into parts smaller than this


@dataclass
class RecoveryReport:
    trace: str
    wal_files: int = 0
    records: int = 0
    rows: int = 0
    torn: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class WriterHost:
    """What a trace's writer asks of the store holding it (the writer never sees `Store`)."""

    root: Path
    catalog: Catalog
    # a catalog write that must succeed on a full disk (Store.catalog_write)
    catalog_write: Callable[[Callable[[], Any]], Any]
    ensure_reserve: Callable[[], None]  # take the disk-full reserve again once there is room
    delete_retired: Callable[[], None]  # drop files of compacted-away segments past their grace
    next_seq: Callable[[str], dict[int, int]]  # trace name -> producer -> next seq (what it holds)


RELEASE_HOLD_S = 0.001  # how long `release_batches` frees batches before it offers the lock


def release_batches(snapshot: dict[str, list]) -> None:
    """Free a registered checkpoint's batches in stretches of about a millisecond, letting the
    appenders run between.

    Freeing a batch runs the release callbacks of its columns with the interpreter lock held.
    Left to the last reference (the pool's work item) a checkpoint of a few hundred server
    writes freed them all at once, and the dispatcher waited for the lock up to 42 ms (bpftrace
    on take_gil/drop_gil during `bench write --half-rate arrow`, 2026-11-26): the
    acknowledgement p99. `time.sleep(0)` hands the lock to a waiting thread. Not after every
    batch: an appender always waits for the lock, and taking it back after each of 4,000
    batches doubled the last checkpoint of 10M streamed events (flush 0.12 -> 0.27 s)."""
    clock = time.perf_counter
    until = clock() + RELEASE_HOLD_S
    for batches in snapshot.values():
        while batches:
            batches.pop()
            if clock() >= until:
                time.sleep(0)
                until = clock() + RELEASE_HOLD_S


class TraceWriter:
    """Appends to one trace. Created by `Store`; not shared between processes."""

    def __init__(
        self, host: WriterHost, trace_id: int, trace_name: str, event_types: dict[str, EventType], opts: WriterOptions
    ) -> None:
        self.host = host
        self.trace_id = trace_id
        self.trace_name = trace_name
        self.event_types = dict(event_types)
        self.opts = opts
        self.root = host.root
        self.trace_dir = f"traces/{trace_id}"
        # Segment order (segments.py): by ts, or by (producer, ts) when the trace asks for it.
        try:
            info = host.catalog.trace(trace_name)
            self.by_producer = info.metadata.get("segment_order") == PRODUCER_ORDER
            self.format = info.format  # (segments say it: segments.segment_meta)
            self.keep_last = lastrows.wanted(info.metadata)
        except NotFound:  # a trace being deleted, recovered only to be dropped
            self.by_producer = False
            self.format = ""
            self.keep_last = False
        # The last row of each series (lastrows.py): type -> (the rows it was taken from, the
        # table), as the last checkpoint left it; held under `last_lock` with the files.
        self.last: dict[str, tuple[int, pa.Table]] = {}
        self.last_lock = threading.Lock()
        self._aligned: dict[int, dict[str, pa.Table]] = {}  # id(snapshot) -> its rows as tables
        self.row_group = PRODUCER_ROW_GROUP if self.by_producer else None  # None: segments.ROW_GROUP
        self.wal_dir = self.root / self.trace_dir / "wal"
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        # Held while segments are registered (a checkpoint's or a compaction's catalog
        # transaction: an fsync of SQLite's log) and by readers taking one consistent cut of
        # registered segments + tail (`view_lock`, then `lock`). Registering under `lock` alone
        # made every append wait for that fsync: the acknowledgement tail at half rate.
        self.view_lock = threading.Lock()
        # Checkpoints overlap (up to `checkpoints_in_flight`): each takes its snapshot and
        # switches the WAL under `cond`, encodes on its own, and registers strictly in the
        # order the snapshots were taken - a later one registered first would advance
        # wal_covered over an earlier one's WAL file before its rows are in segments.
        self.ckpt_taken = 0  # snapshots taken (tickets handed out)
        self.ckpt_registered = 0  # tickets registered, in order
        self.active: dict[str, list[pa.RecordBatch]] = {}
        self.active_rows = 0
        self.active_bytes = 0  # bytes of the buffered columns (checkpoints are sized by them)
        self.active_since = 0.0
        self.inflight: dict[int, dict[str, list[pa.RecordBatch]]] = {}  # ticket -> snapshot being checkpointed
        self.tail_version = 0  # bumped whenever the unflushed tail changes
        self.lsn = 0
        self._durable_lsn = 0  # fsync always/off; batch: the committer's
        self.error: BaseException | None = None  # the first error that stopped the writer
        # Set while a checkpoint waits for disk space (see the module docstring); cleared
        # when a checkpoint registers.
        self.disk_full: DiskFull | None = None
        self.full_failures = 0  # checkpoint attempts that found the disk full, ever
        self.full_kicks = 0  # bumped by flush(): waiting checkpoints try again at once
        self.switch_retry_at: float | None = None  # when to try again a WAL switch that found no room
        self.closed = False
        # Per-producer numbering (native, locked inside): shared with the line-protocol decoder,
        # which numbers rows while it builds a batch. Seeded from the stored maxima on first use.
        self.seq = _core.SeqCounters()
        self.seq_seeded = False
        self.seq_lock = threading.Lock()  # one seeding
        self._wal_types: dict[str, tuple[EventType, _core.WalType]] = {}  # see _wal_type
        self.pool = ThreadPoolExecutor(max_workers=max(1, opts.encode_threads), thread_name_prefix="th-encode")
        self.ckpt_pool = ThreadPoolExecutor(
            max_workers=max(1, opts.checkpoints_in_flight), thread_name_prefix="th-ckpt"
        )
        self.recovery = self._recover()
        self.wal: walmod.WalWriter | None = None
        self.committer: _core.GroupCommit | None = None
        if opts.fsync != "off":
            nums = walmod.wal_numbers(self.wal_dir)
            covered = host.catalog.trace(trace_name).wal_covered
            self.wal = walmod.WalWriter(self.wal_dir, max([covered, *nums]) + 1)
            if opts.fsync == "batch":
                self.committer = _core.GroupCommit(self.wal.fd, opts.group_commit_ms / 1000.0)
        self._stop = False
        self.flush_request = threading.Event()
        self.flusher = threading.Thread(target=self._flush_loop, name=f"th-flush-{trace_id}", daemon=True)
        self.flusher.start()
        self.compactor = Compactor(self)

    # -- recovery ----------------------------------------------------------------

    def _recover(self) -> RecoveryReport:
        """Replay WAL files above the covered number into the tail; report (and mark the trace
        incomplete for) damaged records, which are skipped (`wal.WalScan`)."""
        report = RecoveryReport(self.trace_name)
        # Highest WAL file replayed into the tail. With fsync=off there is no WalWriter to
        # rotate, so the first checkpoint must cover these files itself; otherwise they are
        # never dropped and every later open replays them again (duplicated rows).
        self.replayed_wal: int | None = None
        covered = self.host.catalog.trace(self.trace_name).wal_covered
        for n in walmod.wal_numbers(self.wal_dir):
            path = walmod.wal_path(self.wal_dir, n)
            if n <= covered:  # a crash after registration but before the WAL was dropped
                path.unlink(missing_ok=True)
                continue
            scan = walmod.read_wal(path)
            report.wal_files += 1
            self.replayed_wal = n
            losses = scan.losses()
            if losses:
                # Kept as it is (its intact records are replayed below and checkpointed, then the
                # file goes like any covered one), with a copy in quarantine/ for whoever looks.
                kept = Quarantine(self.root).copy(path, f"WAL file with damaged records: {losses[0]['reason']}")
                for x in losses:
                    report.torn.append(
                        {
                            "file": str(path),
                            "offset": x["offset"],
                            "bytes_cut": x["bytes"],
                            "rows_cut": x["rows"],
                            "reason": x["reason"],
                            "quarantined": str(kept) if kept else None,
                        }
                    )
            if not scan.records:  # (a damaged one: its copy is in quarantine/)
                # Nothing to replay (e.g. killed right after a rotation): drop it now, or every
                # later open would find "pending work", take the lock and recover it again.
                path.unlink()
                continue
            for name, batch in scan.records:
                et = self.event_types.get(name)
                if et is None:
                    raise TracehouseError(f"{path}: WAL record for unknown event type {name!r}")
                self._buffer(name, [batch], batch.nbytes)
                report.records += 1
                report.rows += batch.num_rows
        if report.torn:
            self._mark_wal_damage(report)
        return report

    def _mark_wal_damage(self, report: RecoveryReport) -> None:
        """Say on the trace (th.traces, ls, info) that recovery cut damaged WAL records."""
        losses = [
            {
                "file": t["file"],
                "offset": t["offset"],
                "bytes": t["bytes_cut"],
                "rows": t["rows_cut"],
                "reason": t["reason"],
            }
            for t in report.torn
        ]
        copies = next((t["quarantined"] for t in report.torn if t["quarantined"]), None)
        folder = "/".join(Path(copies).relative_to(self.root).parts[:2]) if copies else None  # quarantine/<run>
        reason = wal_damage_reason(losses, folder)
        log.warning("trace %s: %s", self.trace_name, reason)
        cat = self.host.catalog
        try:
            before = cat.trace(self.trace_name).state_reason
        except NotFound:
            return  # being deleted
        if before and not before.startswith(INCOMPLETE_WAL):
            reason = f"{reason}; {before}"
        self.host.catalog_write(lambda: cat.set_incomplete(self.trace_id, reason))

    # -- appending ---------------------------------------------------------------

    def _check(self) -> None:
        if self.error is None and self.committer is not None and self.committer.error is not None:
            self.fail(OSError(self.committer.error))
        if self.error is not None:
            # Always worded from the first error itself, never from an error raised by an
            # earlier _check (that gave "failed earlier: failed earlier: ...").
            raise TracehouseError(f"writer of trace {self.trace_name!r} failed earlier: {self.error}") from self.error
        if self.closed:
            raise TracehouseError(f"writer of trace {self.trace_name!r} is closed")

    def _refuse_full(self, what: str) -> DiskFull:
        """The error for `what` while a checkpoint waits for disk space (caused by its error)."""
        full = self.disk_full
        e = DiskFull(f"{what} of trace {self.trace_name!r} refused: {full}")
        e.__cause__ = full.__cause__ if full is not None else None
        return e

    def _buffer(self, name: str, batches: list[pa.RecordBatch], nbytes: int) -> None:
        if not self.active_rows:
            self.active_since = time.monotonic()
        self.active.setdefault(name, []).extend(batches)
        self.active_rows += sum(b.num_rows for b in batches)
        self.active_bytes += nbytes
        self.tail_version += 1

    def _tail_full(self, factor: int = 1) -> bool:
        """The buffered rows reach `factor` checkpoints' worth (bytes, or rows when capped)."""
        rows = self.opts.flush_rows
        return self.active_bytes >= factor * self.opts.flush_bytes or (
            rows is not None and self.active_rows >= factor * rows
        )

    def append(self, event_type: str, batch: pa.RecordBatch, *, wait: bool = False, source: str = "batch") -> int:
        """Log and buffer one batch of `event_type`; returns its log sequence number."""
        return self.append_many(event_type, [batch], wait=wait, source=source)

    def _wal_type(self, event_type: str) -> _core.WalType:
        """The native view of `event_type`'s stored layout (made again when the type was widened)."""
        et = self.event_types[event_type]
        hit = self._wal_types.get(event_type)
        if hit is None or hit[0] is not et:
            hit = self._wal_types[event_type] = (et, walmod.wal_type(event_type, conform_target(et)))
        return hit[1]

    def append_many(
        self, event_type: str, batches: list[pa.RecordBatch], *, wait: bool = False, source: str = "batch"
    ) -> int:
        """Log batches of one type as one WAL record (one LSN) and buffer them.

        The batches are conformed to the stored layout and get `seq` numbers when they have
        none (all of them checked before any is numbered). The native path (src/store/wal.rs)
        takes a batch already in that layout as it is: no Python loop and no copy of a value
        (the tail keeps the caller's batch; checkpoints relabel its schema, `conform.align`).
        Anything else is conformed here first (casts, null-filled params, or a BadInput naming
        the column)."""
        self._check()
        batches = [b for b in batches if b.num_rows]
        if not batches:
            return self.lsn
        wt = self._wal_type(event_type)
        seq = self.seq_counters() if any("seq" not in b.schema.names for b in batches) else None
        if self.wal is None:  # fsync=off: no WAL record, only the tail
            prepared = wt.prepare(batches, seq, False)
            if prepared is None:
                prepared = wt.prepare(self._conformed(event_type, batches, source), seq, False)
            if prepared is None:
                raise TracehouseError(f"conformed batches of {event_type!r} are not in its stored layout")
            batches, _record, nbytes = prepared
        with self.cond:
            self._wait_room(f"append of {sum(b.num_rows for b in batches):,} rows")
            lsn = self.lsn + 1
            if self.wal is not None:
                # One native call: conform fast path, seq, the record, its write, the fsync
                # policy's step (src/store/wallog.rs); the interpreter lock released once.
                try:
                    logged = self._log(wt, batches, seq, lsn)
                    if logged is None:
                        logged = self._log(wt, self._conformed(event_type, batches, source), seq, lsn)
                        if logged is None:
                            raise TracehouseError(f"conformed batches of {event_type!r} are not in its stored layout")
                except OSError as e:
                    err = self._log_failed(e, sum(b.num_rows for b in batches))
                    if err is e:
                        raise
                    raise err from e
                batches, nbytes = logged
            self._logged(lsn, event_type, batches, nbytes)
        if wait:
            self.wait_durable(lsn)
        return lsn

    def write_round(self, decode: Callable[[dict], dict]) -> dict:
        """Run `decode` under the writer's lock, handing it what logging a round needs (`log`,
        `types`: event type -> `WalType`, `lsn`, `fsync`, `committer`; all None/empty under
        fsync=off), for a native decoder that logs what it decoded in the same call when no
        catalog row must change first (`_core.decode_lines_many`). Its result says what it
        logged (`logged`: bytes per batch, in order; None: nothing) and why it stopped
        (`error`: (errno, message)); the logged batches are buffered here and get their LSNs,
        returned as `lsns` (one per batch, None for those not logged: the caller appends them).
        Raises as `append_many` does when a write failed (the batches before it are kept)."""
        self._check()
        with self.cond:
            self._wait_room("a write")
            lsn = self.lsn + 1
            args: dict = {}
            if self.wal is not None:
                types = {n: self._wal_type(n) for n in self.event_types}
                args = dict(log=self.wal.log, types=types, lsn=lsn, fsync=self.opts.fsync, committer=self.committer)
            out = decode(args)
            logged = out.get("logged") or []
            lsns: list = [None] * len(out["batches"])
            for i, nbytes in enumerate(logged):
                name, batch = out["batches"][i]
                self._logged(lsn + i, name, [batch], nbytes)
                lsns[i] = lsn + i
            out["lsns"] = lsns
            if out.get("error") is not None:
                rows = sum(b.num_rows for _n, b in out["batches"][len(logged) :])
                e = OSError(*out["error"])
                err = self._log_failed(e, rows)
                raise err from (None if err is e else e)
        return out

    def _wait_room(self, what: str) -> None:
        """Back-pressure (under `cond`): wait while the tail holds two checkpoints' worth and one
        is under way; refused at once while a checkpoint waits for disk space."""
        while self._tail_full(2) and self.inflight and self.error is None:
            if self.disk_full is not None:  # waiting would last until someone frees space
                raise self._refuse_full(what)
            self.cond.wait(0.05)  # back-pressure: the checkpoint thread is behind
        self._check()

    def _logged(self, lsn: int, event_type: str, batches: list, nbytes: int) -> None:
        """Record `lsn` (logged, or under fsync=off not) holds `batches`: buffer them (under `cond`)."""
        self.lsn = lsn
        self._buffer(event_type, batches, nbytes)
        if self.committer is None:  # always: fsynced by the append; off: durable once checkpointed
            self.durable_lsn = lsn
        if self._tail_full():
            self.flush_request.set()

    def _log_failed(self, e: OSError, rows: int) -> BaseException:
        """The error to raise for a WAL write of `rows` rows that failed with `e` (nothing of it
        was kept): DiskFull for a full disk; a log that could not be cut back stops the writer."""
        if self.wal.broken is not None:
            self.fail(self.wal.broken)
            self._check()  # raises: the writer stopped
        if is_disk_full(e):
            return DiskFull(
                f"no space to log {rows:,} rows of trace {self.trace_name!r} (nothing of them was kept): {e}"
            )
        return e

    def _log(self, wt: _core.WalType, batches: list, seq, lsn: int):
        """`batches` logged as record `lsn` (`_core.WalLog.append`): (stored batches, bytes), or
        None when one is not in the stored layout (nothing was logged)."""
        return self.wal.log.append(wt, batches, seq, lsn, self.opts.fsync, self.committer)

    def _conformed(self, event_type: str, batches: list, source: str) -> list:
        et = self.event_types[event_type]
        return [conform_unnumbered(b, et, source=source) for b in batches]

    @property
    def durable_lsn(self) -> int:
        """Highest LSN durable under the fsync policy."""
        return self.committer.durable if self.committer is not None else self._durable_lsn

    @durable_lsn.setter
    def durable_lsn(self, lsn: int) -> None:
        self._durable_lsn = lsn

    def wait_durable(self, lsn: int, timeout: float | None = None) -> bool:
        self._check()
        if self.committer is None:
            return True  # always/off: durable when append returned
        try:
            return self.committer.wait(lsn, timeout)
        except OSError:
            self._check()  # the committer's error, or closed
            raise

    def sync(self) -> None:
        """Make every appended record durable now (fsync=off: a no-op)."""
        with self.cond:
            lsn = self.lsn
            if self.committer is None:
                self.durable_lsn = lsn
        if self.committer is not None:
            self.wait_durable(lsn)

    # -- tail for in-process queries ------------------------------------------------

    def tail(self) -> dict[str, list[pa.RecordBatch]]:
        """Batches appended but not yet in registered segments (call under `lock`)."""
        out: dict[str, list[pa.RecordBatch]] = {}
        for src in (*self.inflight.values(), self.active):
            for k, v in src.items():
                out.setdefault(k, []).extend(v)
        return out

    # -- checkpoints ---------------------------------------------------------------

    def _flush_loop(self) -> None:
        while True:
            self.flush_request.wait(0.1)
            retry_at = self.switch_retry_at
            if self._stop and (not self.active_rows or retry_at is not None):
                return  # (rows that found no room stay in the WAL for the next open)
            now = time.monotonic()
            if retry_at is None:
                due = self.active_rows and now - self.active_since >= self.opts.flush_interval_s
            else:
                due = self.active_rows and now >= retry_at
            if not (self.flush_request.is_set() or due):
                continue
            self.flush_request.clear()
            try:
                self._start_checkpoint()
            except DiskFull:
                pass  # no room for the next WAL file: the rows stay in the tail, tried at switch_retry_at
            except BaseException as e:  # surfaced to the next append / flush
                self.fail(e)
                return

    def fail(self, e: BaseException) -> None:
        """Stop the writer with `e`: every later append, flush and close raises it."""
        with self.cond:
            if self.error is None:  # the first error is the cause; later ones are its echoes
                self.error = e
            self.cond.notify_all()

    def _start_checkpoint(self, fail_after: int | None = None):
        """Take a snapshot of the buffered rows and switch the WAL; its encoding and registration
        run on the checkpoint pool (returns that future, None when nothing was buffered).
        Waits while `checkpoints_in_flight` are under way (`fail_after`: raises DiskFull instead
        once a checkpoint finds the disk full after `full_failures` was this)."""
        wal = self.wal
        if wal is not None and not self.closed:
            wal.prepare_next()  # the next WAL file made now, not under the lock appends need
        with self.cond:
            while len(self.inflight) >= max(1, self.opts.checkpoints_in_flight) and self.error is None:
                if self._stop:
                    break
                if fail_after is not None and self.full_failures > fail_after:
                    raise self._refuse_full("checkpoint")
                self.cond.wait(0.05)
            self._check()
            if not self.active_rows:
                return None
            # The WAL switches before the snapshot is taken: when the disk has no room for the
            # next file, nothing has changed and the rows stay in the tail.
            try:
                if self.wal is None:
                    covered = self.replayed_wal
                elif self.opts.fsync == "batch":
                    # The closed file is made durable by the next group commit (the committer
                    # fsyncs it before any later record counts), not here under the lock appends need.
                    covered, old_fd = self.wal.switch()
                    self.committer.switched(old_fd, self.wal.fd)
                else:
                    covered = self.wal.rotate()
                    self.durable_lsn = self.lsn  # rotation fsynced the closed file
            except OSError as e:
                if not is_disk_full(e):
                    raise
                self._note_disk_full(e)
                self.switch_retry_at = time.monotonic() + self.opts.disk_full_retry_s
                raise DiskFull(f"no space for a new WAL file of trace {self.trace_name!r}: {e}") from e
            self.switch_retry_at = None
            if not self.inflight:
                self.disk_full = None  # (set by a switch that failed; a waiting checkpoint sets it again)
            snapshot, self.active, self.active_rows, self.active_bytes = self.active, {}, 0, 0
            self.replayed_wal = None
            self.ckpt_taken += 1
            ticket = self.ckpt_taken
            self.inflight[ticket] = snapshot
            self.tail_version += 1
            self.cond.notify_all()
        return self.ckpt_pool.submit(self._finish_checkpoint, ticket, snapshot, covered)

    def _finish_checkpoint(self, ticket: int, snapshot: dict, covered: int | None) -> None:
        rows = None
        try:
            while True:
                try:
                    if rows is None:
                        rows = self._write_segments(snapshot, covered)
                        tables = self._aligned.pop(id(snapshot), {})
                    with self.cond:
                        while self.ckpt_registered != ticket - 1:  # the earlier checkpoints first
                            self._check()
                            self.cond.wait(0.05)
                    # Only this ticket can register now (the next waits for ckpt_registered).
                    # Appends go on meanwhile; readers wait (view_lock) so they never see these
                    # rows both in the new segments and in the snapshot. The last rows of its
                    # series are written first (lastrows.py: a crash between leaves the older file
                    # the one the catalog names).
                    with self.last_lock:
                        last = self._last_rows(tables) if self.keep_last else {}
                        with self.view_lock:
                            self.host.catalog.register_segments(self.trace_id, rows, wal_covered=covered)
                            with self.cond:
                                del self.inflight[ticket]
                                self.ckpt_registered = ticket
                                self.tail_version += 1
                                resumed = self.disk_full is not None
                                self.disk_full = None
                                self.cond.notify_all()
                        self.last.update(last)
                    if resumed:
                        log.warning("trace %s: checkpoints register again (disk space is back)", self.trace_name)
                        self.host.ensure_reserve()
                    release_batches(snapshot)
                    break
                except BaseException as e:
                    if not is_disk_full(e) or self._stop or self.error is not None:
                        raise
                    # The rows stay in the snapshot (and the WAL): try again once there is room.
                    self._note_disk_full(e)
                    self._wait_retry()
        except BaseException as e:
            if rows:  # written but never registered: orphans holding space
                for r in rows:
                    (self.root / r["path"]).unlink(missing_ok=True)
            # Later checkpoints must not register over this one's WAL file: the writer stops.
            self.fail(e)
            raise
        if covered is not None:
            for n in walmod.wal_numbers(self.wal_dir):
                if n <= covered:
                    walmod.wal_path(self.wal_dir, n).unlink(missing_ok=True)
        self.compactor.request()
        self.host.delete_retired()

    def _last_rows(self, tables: dict[str, pa.Table]) -> dict[str, tuple[int, pa.Table]]:
        """Write the last row of each series of every type among its registered rows and the
        checkpoint's `tables` (lastrows.py); returns what `self.last` becomes. A failure other
        than a full disk costs only the files (readers then take the last rows from the rows
        themselves), never the checkpoint."""
        segs = self.host.catalog.segments(self.trace_id)
        out = {}
        for name, t in tables.items():
            et = self.event_types[name]
            mine = [s for s in segs if s.event_type == name]
            base = sum(s.rows for s in mine)
            try:
                known = self.last.get(name)
                if known is not None and known[0] == base:
                    old = known[1]
                else:  # (a trace that kept none yet, or retention dropped rows since)
                    old = lastrows.load(self.root, self.trace_id, name, base)
                    if old is None and base:
                        old = lastrows.from_segments(self.root, mine)
                parts = [t] if old is None else [align([old], et), t]
                new = lastrows.last_rows(parts[0] if len(parts) == 1 else pa.concat_tables(parts))
                lastrows.write(
                    self.root, self.trace_id, name, base + t.num_rows, new, keep=base, fsync=self.opts.fsync != "off"
                )
                out[name] = (base + t.num_rows, new)
            except BaseException as e:
                if is_disk_full(e):
                    raise
                log.warning("trace %s: last rows of %s not kept: %s", self.trace_name, name, e)
                lastrows.drop(self.root, self.trace_id, [name])
                self.last.pop(name, None)
        return out

    def _write_segments(self, snapshot: dict[str, list[pa.RecordBatch]], covered: int | None) -> list[dict]:
        tables = {name: align(batches, self.event_types[name]) for name, batches in snapshot.items()}
        if self.keep_last:  # (for `_last_rows`, once the earlier checkpoints registered)
            self._aligned[id(snapshot)] = tables
        # Encoding cost ~ rows x columns. A type is split (each part still one ts range) only
        # when it alone would keep one encoder busier than its fair share: the types of a
        # checkpoint already spread over the threads, and every extra part is one more small
        # segment for compaction to merge later.
        threads = max(1, self.opts.encode_threads)
        share = sum(t.num_rows * t.num_columns for t in tables.values()) / threads
        jobs = []
        for name, table in tables.items():
            order = row_order(table, self.by_producer)
            cost = table.num_rows * table.num_columns
            parts = min(threads, int(-(-cost // share))) if share and table.num_rows >= 2 * MIN_SPLIT_ROWS else 1
            step = -(-table.num_rows // parts)
            for i in range(parts):
                start, stop = i * step, min(table.num_rows, (i + 1) * step)
                if stop > start:
                    jobs.append((name, table, order, start, stop))
        jobs.sort(key=lambda j: -(j[4] - j[3]) * j[1].num_columns)  # longest first
        # Each segment says which checkpoint (and WAL file) its rows are from: recovery and repair
        # tell a checkpoint's leftovers from what the catalog lost (segments.segment_meta).
        ckpt = uuid.uuid4().hex

        def meta(name: str) -> dict:
            return segment_meta(
                self.trace_id,
                self.trace_name,
                self.format,
                self.event_types[name],
                0,
                wal=covered,
                checkpoint=ckpt,
                parts=len(jobs),
            )

        futures = [
            (
                name,
                self.pool.submit(
                    write_sorted_part,
                    self.root,
                    f"{self.trace_dir}/segments/{name}",
                    t,
                    order,
                    a,
                    b,
                    0,
                    not self.opts.drop_written_pages,
                    self.row_group,
                    meta(name),
                    self.opts.page_checksums,
                ),
            )
            for name, t, order, a, b in jobs
        ]
        out, error = [], None
        for name, f in futures:
            try:
                row = f.result()
            except BaseException as e:  # the other parts finish first: their files are removed below
                error = error or e
                continue
            row["event_type"] = name
            out.append(row)
        if error is not None:
            for r in out:
                (self.root / r["path"]).unlink(missing_ok=True)
            raise error
        return out

    def _note_disk_full(self, e: BaseException) -> None:
        """Enter (or stay in) the disk-full state: appends past the back-pressure limit and
        `flush()` are refused; the trace is marked incomplete while its rows wait."""
        first = self.disk_full is None
        self.full_failures += 1
        where = "the WAL" if self.wal is not None else "memory (fsync=off)"
        self.disk_full = DiskFull(
            f"no space left to checkpoint (rows wait in {where}; retried every {self.opts.disk_full_retry_s:g} s): {e}"
        )
        self.disk_full.__cause__ = e
        if not first:
            return
        # (an import - no WAL - is rolled back and says so itself)
        log.log(
            logging.WARNING if self.wal is not None else logging.INFO, "trace %s: %s", self.trace_name, self.disk_full
        )
        reason = (
            f"{INCOMPLETE_CHECKPOINT} since {time.strftime('%Y-%m-%d %H:%M:%S')}: rows appended after "
            f"the last checkpoint are only in {where}"
        )
        try:
            self.host.catalog_write(lambda: self.host.catalog.set_incomplete(self.trace_id, reason))
        except Exception as mark_error:  # the catalog's disk may be the full one: the state is in memory too
            log.warning("trace %s: could not mark it incomplete: %s", self.trace_name, mark_error)

    def _wait_retry(self) -> None:
        """Wait `disk_full_retry_s`, or less when flush() asks for an attempt now."""
        deadline = time.monotonic() + self.opts.disk_full_retry_s
        with self.cond:
            kicks = self.full_kicks
            while (
                not self._stop
                and self.error is None
                and self.full_kicks == kicks
                and (left := deadline - time.monotonic()) > 0
            ):
                self.cond.wait(min(left, 0.25))

    def flush(self) -> None:
        """Checkpoint everything appended so far and wait until it is registered.

        Raises DiskFull when that finds the disk full: the checkpoints waiting for space try once
        more at once (not at their next retry), and a failure of that attempt is the answer."""
        self._check()
        with self.cond:  # checkpoints waiting for space try again now: it may be back
            failures = self.full_failures
            self.full_kicks += 1
            self.cond.notify_all()
        self._start_checkpoint(fail_after=failures)
        with self.cond:  # this checkpoint and every one before it
            while self.inflight and self.error is None:
                if self.full_failures > failures:
                    raise self._refuse_full("flush")
                self.cond.wait(0.05)
        self._check()
        self.maybe_compact()  # an explicit flush leaves the trace as tidy as the policy asks

    # -- compaction (compact.py) ------------------------------------------------------

    @property
    def stopping(self) -> bool:
        """close() has begun: background work (checkpoint retries, compaction) winds down."""
        return self._stop

    def maybe_compact(self, force: bool = False) -> int:
        """Merge small live segments of each type now; returns how many were merged."""
        return self.compactor.run(force)

    def ingest_saturated(self) -> bool:
        """Checkpoints are behind the appends: automatic compaction waits for a quieter moment
        (it competes with them for the cores, and appends meet back-pressure when they lag)."""
        return len(self.inflight) >= max(1, self.opts.checkpoints_in_flight) or self._tail_full()

    # -- sequence numbers ----------------------------------------------------------

    def seq_counters(self) -> _core.SeqCounters:
        """The trace's per-producer counters, seeded from what it holds (thread-safe)."""
        if not self.seq_seeded:
            # Its own lock, not `lock`: seeding queries the trace, and a query takes the
            # query engine's lock and then `lock`.
            with self.seq_lock:
                if not self.seq_seeded:
                    self.seq.seed(self.host.next_seq(self.trace_name))
                    self.seq_seeded = True
        return self.seq

    def assign_seq(self, producer) -> pa.Array:
        """Per-producer sequence numbers (int64) continuing from what the trace holds, one per
        row of `producer` (int32 values) in row order (thread-safe)."""
        if not isinstance(producer, pa.Array) or producer.type != pa.int32():
            producer = pa.array(np.asarray(producer), pa.int32())
        return self.seq_counters().assign(producer)

    # -- closing -------------------------------------------------------------------

    def close(self, flush: bool = True) -> None:
        if self.closed:
            return
        try:
            if flush and self.error is None:
                self.flush()
        finally:
            self.closed = True
            self._stop = True
            self.flush_request.set()
            # Wakes the compactor now: it would otherwise notice `_stop` only at its next 0.2 s
            # poll, and close() waited for it (measured: 0.20-0.25 s of every close; a 10^3-event
            # TOD store then stored 0.38x SQLite's events/s, bench tod_store).
            self.compactor.request()
            with self.cond:
                self.cond.notify_all()
            self.flusher.join(timeout=30)
            self.ckpt_pool.shutdown(wait=True)
            self.compactor.join(timeout=120)  # a merge under way finishes (its inputs stay live)
            self.pool.shutdown(wait=True)
            if self.committer is not None:
                self.committer.stop()  # commits what was written, closes switched-away files
            if self.wal is not None:
                self.wal.close()
                # The file opened after the last rotation holds nothing when flushed.
                path = walmod.wal_path(self.wal_dir, self.wal.number)
                if flush and self.error is None and path.exists() and path.stat().st_size <= len(walmod.MAGIC):
                    path.unlink()

    def abandon(self) -> None:
        """Stop threads without flushing (used by tests that simulate a crash in-process)."""
        self.close(flush=False)
