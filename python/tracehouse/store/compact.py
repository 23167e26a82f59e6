"""Compaction: a trace's small segments merged into bigger ones.

Owns when and what to merge. Every checkpoint leaves one segment per event type (and
part); once a type has `compact_min_segments` small ones, groups of at least
`compact_min_fanin` of them are read, sorted by time and written as one segment of the
next level, registered in the catalog in one transaction that retires the inputs (their
files stay `retire_grace_s` for readers still scanning them, then `delete_retired` drops
them). `Store.compact` (and `tracehouse compact`) forces a merge of any two.

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
import threading
from pathlib import Path

from .. import lazy
from ..errors import is_disk_full
from ..schema import EventType
from .conform import align
from .segments import check_pages, segment_meta, sort_rows, write_segment

# Imported on first use (lazy.py): listing, searching and counting traces need none.
pa = lazy.module("pyarrow")
pq = lazy.module("pyarrow.parquet")

log = logging.getLogger("tracehouse.store")


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
        """Merge small live segments of each type; returns how many were merged."""
        if self.paused and not force:
            return 0
        with self._lock:
            n = self._merge(force)
        if n:
            self.writer.host.delete_retired()
        return n

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
        while not w.stopping:
            if not self._request.wait(0.2):
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
            for tier in ([small] if force else size_tiers(small, fanin)):
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
                meta = segment_meta(w.trace_id, w.trace_name, w.format, et, level,
                                    inputs=[Path(s.path).name for s in g])
                row = write_segment(w.root, f"{w.trace_dir}/segments/{name}", table, level=level,
                                    keep_cached=not opts.drop_written_pages, row_group=w.row_group, meta=meta,
                                    checksums=opts.page_checksums)
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
        log.error("trace %s: segment %s is damaged, not merged (`tracehouse verify`, `tracehouse repair`): %s",
                  w.trace_name, e.path, e.reason)
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
