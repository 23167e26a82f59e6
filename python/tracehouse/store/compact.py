"""Compaction: a trace's small segments merged into bigger ones.

Owns when and what to merge. Every checkpoint leaves one segment per event type (and
part); once a type has `compact_min_segments` small ones, groups of at least
`compact_min_fanin` of them are read, sorted by time and written as one segment of the
next level, registered in the catalog in one transaction that retires the inputs (their
files stay `retire_grace_s` for readers still scanning them, then `delete_retired` drops
them). `Store.compact` (and `tracehouse compact`) forces a merge of any two.

Retention: a trace whose metadata `retention` holds a duration in ns (set by `Store.set_retention`,
`tracehouse retain`, InfluxQL's `CREATE DATABASE ... WITH DURATION` and retention policies) loses
whole segments whose newest row is older than now minus that duration, at each compaction (after
checkpoints, every `RETAIN_EVERY_S` while a writer holds the trace, and when the retention is
set). They are retired in the catalog like merged inputs (the trace's counts and time bounds
recomputed in the same transaction; the files deleted after their grace). Nothing else is
deleted: a segment that still holds one row inside the window stays whole, and the unflushed
tail, producers and event types stay. Times before `EPOCH_MIN_NS` (1973) are a trace's own clock
(strace -tt's time of day): setting a retention on a trace that holds them is refused (every
one of its segments is older than any cutoff: `retain --keep 30d` dropped a whole strace
import), and a segment of them is never expired.

Automatic compaction runs on its own niced thread, not on the checkpoint thread: a merge
of 512 MB of columns took seconds, and checkpoints queued behind it stalled appends (the
write back-pressure) - the ack latency tail under load. It yields to ingest: while
checkpoints are behind, it waits for the next request.

Inputs are checked against their page checksums first: a damaged segment is never merged (its
pages would be copied into a new file under new checksums, the damage made permanent); it is
marked damaged in the catalog (queries naming it then fail naming it) and left for `repair`.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from pathlib import Path

from .. import lazy
from ..errors import BadInput, is_disk_full
from ..schema import EPOCH_MIN_NS, EventType
from . import lastrows, readcache
from .conform import align
from .segments import check_pages, segment_meta, sort_rows, write_segment

# Imported on first use (lazy.py): listing, searching and counting traces need none.
pa = lazy.module("pyarrow")
pq = lazy.module("pyarrow.parquet")

log = logging.getLogger("tracehouse.store")

RETENTION_META = "retention"  # trace metadata: rows are kept this many ns ("0" or absent: forever)
RETAIN_EVERY_S = 60.0  # an idle writer applies its trace's retention this often


def retention_ns(metadata: dict) -> int:
    """The retention of a trace's metadata in ns; 0 keeps every row."""
    try:
        return max(0, int(metadata.get(RETENTION_META) or 0))
    except (TypeError, ValueError):
        return 0


_UNITS = {
    "ns": 1,
    "u": 10**3,
    "us": 10**3,
    "µs": 10**3,
    "ms": 10**6,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
    "d": 86400 * 10**9,
    "w": 7 * 86400 * 10**9,
}
_DURATION = re.compile(r"(\d+)(ns|us|µs|u|ms|s|m|h|d|w)")


def parse_duration(text: str) -> int:
    """A retention as InfluxQL writes durations (`30d`, `12h`, `1w2d`, `90m`) in ns; `inf`, `0`
    or `0s` is 0 (forever). BadInput names what was expected."""
    t = text.strip().lower()
    if t in ("inf", "0", "forever"):
        return 0
    parts = _DURATION.findall(t)
    if not parts or "".join(a + u for a, u in parts) != t:
        raise BadInput(f"invalid duration {text!r}", expected="a duration such as 30d, 12h, 1w or 90m, or inf")
    return sum(int(a) * _UNITS[u] for a, u in parts)


def format_duration(ns: int) -> str:
    """`ns` as Go's time.Duration prints it (InfluxDB's retention policies): 720h0m0s, 1h30m0s, 0s."""
    if ns == 0:
        return "0s"
    h, rest = divmod(ns, 3600 * 10**9)
    m, rest = divmod(rest, 60 * 10**9)
    sec = f"{rest // 10**9}" if rest % 10**9 == 0 else f"{rest / 1e9:.9f}".rstrip("0")
    if h:
        return f"{h}h{m}m{sec}s"
    if m:
        return f"{m}m{sec}s"
    return f"{sec}s"


def expired(segments: list, now_ns: int, keep_ns: int) -> list:
    """The segments whose newest row is older than `keep_ns` before `now_ns` (none when keep_ns is 0)."""
    if keep_ns <= 0:
        return []
    cutoff = now_ns - keep_ns
    # a segment of a trace's own clock (ts before EPOCH_MIN_NS) is never compared with the machine's
    return [s for s in segments if s.ts_max is not None and EPOCH_MIN_NS <= s.ts_max < cutoff]


def _check_epoch_times(info) -> None:
    """Refuse a retention for a trace whose times are its own clock, not the epoch's: strace -tt's
    time of day (62976.18 s) is before every cutoff, and its whole trace would be dropped."""
    if info.ts_min is not None and info.ts_min < EPOCH_MIN_NS:
        raise BadInput(
            f"trace {info.name!r} holds times that are not epoch times (from {info.ts_min / 1e9:.6f} s): "
            "a retention compares rows with the machine's clock and would drop them all",
            expected="a retention only for a trace whose ts are ns since 1970 (line protocol, OTLP, strace -ttt)",
        )


class Compactor:
    """Merges the small segments of one trace's writer: on request (its thread) or now (`run`)."""

    def __init__(self, writer) -> None:  # the TraceWriter owning it (not imported: it imports us)
        self.writer = writer
        # Store.bulk(): automatic compaction deferred while a bulk import streams in (a
        # compaction holds up to compact_target_rows rows of a type in memory at once).
        self.paused = False
        self._request = threading.Event()
        self._lock = threading.Lock()  # one compaction at a time (it merges what it listed)
        self._thread = threading.Thread(target=self._loop, name=f"th-compact-{writer.trace_id}", daemon=True)
        self._thread.start()

    def request(self) -> None:
        """Look for something to merge soon (after a checkpoint registered)."""
        self._request.set()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def run(self, force: bool = False) -> int:
        """Drop the segments past the trace's retention, then merge small live segments of each
        type; returns how many were merged."""
        if self.paused and not force:
            return 0
        with self._lock:
            dropped = self._retain()
            n = self._merge(force)
            if n and readcache.wanted(self._metadata()):
                self._build_read_cache()  # the merged inputs left the old cache unusable for their types
        if n or dropped:
            self.writer.host.delete_retired()
        return n

    def _metadata(self) -> dict:
        """The trace's metadata; empty once the trace is being removed (rm flushes its writer)."""
        w = self.writer
        live = w.host.catalog.traces("id = ?", (w.trace_id,))
        return live[0].metadata if live else {}

    def rebuild_read_cache(self) -> dict:
        """The trace's read cache (store/readcache.py) written anew from its live segments."""
        with self._lock:
            return self._build_read_cache()

    def _build_read_cache(self) -> dict:
        w = self.writer
        cat = w.host.catalog
        info = cat.trace(w.trace_name)
        man = readcache.build(w.root, info, dict(w.event_types), cat.segments(w.trace_id), cat.producers(w.trace_id))
        # A catalog change readers notice (their views are rebuilt on the catalog's version)
        cat.set_metadata(w.trace_id, {readcache.BUILT_META: man["file"]})
        return man

    def retain(self, keep_ns: int | None = None) -> int:
        """Apply the trace's retention now (first set to `keep_ns`, when given: under the lock a
        compaction takes, so the segments it drops are counted here); returns how many segments
        were dropped."""
        with self._lock:
            if keep_ns is not None:
                w = self.writer
                if keep_ns > 0:
                    _check_epoch_times(w.host.catalog.trace(w.trace_name))
                w.host.catalog.set_metadata(w.trace_id, {RETENTION_META: str(int(keep_ns))})
            n = self._retain()
        if n:
            self.writer.host.delete_retired()
        return n

    def _retain(self) -> int:
        w = self.writer
        cat = w.host.catalog
        self._next_retain = time.monotonic() + RETAIN_EVERY_S
        keep = retention_ns(self._metadata())
        old = expired(cat.segments(w.trace_id), time.time_ns(), keep)
        if not old:
            return 0
        # The kept last rows of the types losing rows go first (lastrows.py): a reader never
        # pairs a file with fewer rows than it was taken from; the next checkpoint takes them again.
        with w.last_lock:
            lastrows.drop(w.root, w.trace_id, {s.event_type for s in old})
            for s in old:
                w.last.pop(s.event_type, None)
            with w.view_lock:  # as a merge registers: readers take their cut under it
                cat.register_segments(w.trace_id, [], retire=[s.id for s in old])
                with w.cond:
                    w.tail_version += 1
        log.info(
            "trace %s: retention %d s dropped %d segments (%d rows)",
            w.trace_name,
            keep // 10**9,
            len(old),
            sum(s.rows for s in old),
        )
        return len(old)

    def rows_per_merge(self, et: EventType) -> int:
        """Rows one compaction of `et` merges at most (and the size it leaves alone)."""
        opts = self.writer.opts
        width = 8 * max(1, len(et.columns))
        return max(1, min(opts.compact_target_rows, opts.compact_target_bytes // width))

    def _loop(self) -> None:
        w = self.writer
        try:  # below the appenders and the checkpoint encoders when the cores are busy
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 5)
        except (OSError, AttributeError):
            pass
        self._next_retain = time.monotonic() + RETAIN_EVERY_S
        while not w.stopping:
            if not self._request.wait(0.2):
                if time.monotonic() < self._next_retain or self.paused:
                    continue
                try:
                    self.retain()
                except BaseException as e:  # noqa: BLE001 - as a merge's failure below
                    if not is_disk_full(e):
                        w.fail(e)
                        return
                continue
            self._request.clear()
            if w.stopping:
                return
            try:
                self.run()
            except BaseException as e:
                if is_disk_full(e):  # a merge needs room for its output: the inputs stay, tried later
                    log.warning("trace %s: compaction skipped: %s", w.trace_name, e)
                    continue
                w.fail(e)  # surfaced to the next append / flush
                return

    def _merge(self, force: bool) -> int:
        w = self.writer
        opts = w.opts
        merged = 0
        cat = w.host.catalog
        for name in w.event_types:
            target = self.rows_per_merge(w.event_types[name])
            # Automatically, only segments that `compact_min_fanin` of could merge within the
            # target: a bigger one would be rewritten for a 2-3x smaller file count.
            fanin = 2 if force else max(2, opts.compact_min_fanin)
            limit = target if force else max(1, target // fanin)
            small = [s for s in cat.segments(w.trace_id, name) if s.rows < limit and not s.damaged]
            if len(small) < (2 if force else opts.compact_min_segments):
                continue
            groups = []
            for tier in [small] if force else size_tiers(small, fanin):
                cur, cur_rows = [], 0
                for s in tier:
                    if cur and cur_rows + s.rows > target:
                        groups.append(cur)
                        cur, cur_rows = [], 0
                    cur.append(s)
                    cur_rows += s.rows
                if cur:
                    groups.append(cur)
            et = w.event_types[name]
            for g in groups:
                if len(g) < fanin:
                    continue
                if not force and (w.stopping or w.ingest_saturated()):
                    break  # the next checkpoint asks again
                try:
                    tables = [_read_segment(w.root / s.path) for s in g]
                except SegmentDamaged as e:
                    # Never merged (its damaged pages would be copied into a new segment, checksummed
                    # anew): the group waits; queries naming the segment fail naming it.
                    self._damaged(e)
                    continue
                table = sort_rows(align(tables, et), w.by_producer)  # the trace's segment order
                level = 1 + max(s.level for s in g)
                meta = segment_meta(
                    w.trace_id, w.trace_name, w.format, et, level, inputs=[Path(s.path).name for s in g]
                )
                row = write_segment(
                    w.root,
                    f"{w.trace_dir}/segments/{name}",
                    table,
                    level=level,
                    keep_cached=not opts.drop_written_pages,
                    row_group=w.row_group,
                    meta=meta,
                    checksums=opts.page_checksums,
                )
                row["event_type"] = name
                try:
                    with w.view_lock:  # not `cond`: appends do not wait for the catalog's fsync
                        cat.register_segments(w.trace_id, [row], retire=[s.id for s in g])
                        with w.cond:
                            w.tail_version += 1
                except BaseException:
                    (w.root / row["path"]).unlink(missing_ok=True)  # never registered
                    raise
                merged += len(g)
        return merged

    def _damaged(self, e: SegmentDamaged) -> None:
        """Mark a segment compaction found damaged (once; the catalog keeps the mark)."""
        w = self.writer
        rel = Path(e.path).relative_to(w.root).as_posix()
        seg = next((s for s in w.host.catalog.segments(w.trace_id) if s.path == rel), None)
        if seg is None or seg.damaged:
            return
        log.error(
            "trace %s: segment %s is damaged, not merged (`tracehouse verify`, `tracehouse repair`): %s",
            w.trace_name,
            e.path,
            e.reason,
        )
        w.host.catalog_write(lambda: w.host.catalog.mark_damaged(seg.id, e.reason))


class SegmentDamaged(Exception):
    """A segment compaction read is damaged (its path and what is wrong)."""

    def __init__(self, path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def _read_segment(path) -> pa.Table:
    """One segment whole, its pages checked against their CRCs first (`check_pages`: a merge must
    never copy a damaged page into a new segment, where it would get a checksum of its own); a
    damaged one raises SegmentDamaged. Not `pq.read_table`: that goes through pyarrow.dataset,
    whose first import (~0.45 s, holding the interpreter lock in stretches of up to 24 ms) landed
    on the first compaction of a server under load and stalled its dispatcher (bpftrace on
    take_gil/drop_gil during `bench write --half-rate arrow`, 2026-11-26)."""
    try:
        with pq.ParquetFile(path) as f:
            bad = check_pages(path, f.metadata)["bad"]
            if bad is None:
                return f.read().replace_schema_metadata(None)
    except (OSError, pa.ArrowException) as e:
        raise SegmentDamaged(path, f"unreadable: {e}") from None
    raise SegmentDamaged(path, bad)


def size_tiers(segments: list, fanin: int) -> list[list]:
    """`segments` grouped by size tier (tier k: fanin**k <= rows < fanin**(k+1)), each in its order.

    Automatic compaction merges segments of one tier only, at least `fanin` at a time, so a
    merge's output is at least one tier up and a row is rewritten at most once per tier: about
    log_fanin(target / checkpoint size) times. Merging every small segment together instead
    rewrote the growing merged one with each new group of checkpoints (60,000 rows in 100-row
    checkpoints, fan-in 8: 8.75 rewrites per row, segments at level 9; tiered: at most 3).
    """
    tiers: dict[int, list] = {}
    for s in segments:
        k, size = 0, fanin
        while s.rows >= size:
            k, size = k + 1, size * fanin
        tiers.setdefault(k, []).append(s)
    return [tiers[k] for k in sorted(tiers)]
