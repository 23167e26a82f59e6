"""The store's options (`tracehouse.open(path, **options)`): fsync policy, checkpoints, compaction.

Owns `WriterOptions`, apart from the writer that uses them: a `Store` holds its options from
the moment it opens, and a store opened to list or search traces never loads the writer
(nor pyarrow and numpy, which the writer needs).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import BadInput

POLICIES = ("always", "batch", "off")


@dataclass
class WriterOptions:
    fsync: str = "batch"
    group_commit_ms: float = 5.0
    # Checkpoint when this many bytes of columns are buffered (or `flush_rows` rows, when set),
    # or when the oldest buffered row is this old: a reader sees a row once its checkpoint is
    # registered, so the interval plus one checkpoint's duration must stay under a second
    # ("queryable within a second"), also when the 2 cores are shared. Measured at 10M TOD
    # events, max reader lag: 4M rows/1.0 s 1.4-2.3 s, 2M/0.5 s 0.8-1.7 s, 1M/0.5 s 0.6-0.9 s,
    # throughput unchanged; a small checkpoint also keeps the tail that close() encodes short.
    # Sized by bytes, not rows: 1M rows were 54 MB of TOD (8-11 columns) but ~500 MB
    # of 61-column QoS rows, held twice over under back-pressure. 64 MiB is 1.2M TOD rows.
    flush_bytes: int = 64 << 20
    flush_rows: int | None = None
    flush_interval_s: float = 0.5
    # Auto-compact a type once it has this many small segments. 16, not 8: with 1M-row
    # checkpoints a type gets a segment per checkpoint, and compacting every 8 rewrote each
    # row again mid-stream (10M TOD events streamed in 4.1-6.9 s instead of 1.8-2.1 s).
    compact_min_segments: int = 16
    # Automatic compaction merges groups of at least this many segments, each smaller than
    # 1/fanin of the target (`compact()` merges any two): a merge costs a full decode, sort
    # and re-encode of every row. With 61-column QoS rows the byte cap allows ~1.4M rows per
    # segment; 0.5 s checkpoints at 0.5-1M rows/s are 250-500K rows, and merging those 3-5
    # at a time took 20-40 % of a core and doubled the ack p99 at half rate (40 -> 80-120 ms).
    compact_min_fanin: int = 8
    compact_target_rows: int = 8_000_000  # segments at least this big are left alone
    # ... and at most this many bytes of decoded columns (8 per value) merged at once: a
    # compaction holds its inputs and their sorted copy in memory, and 8M rows of a 61-column
    # QoS type were ~4 GB (peak RSS 6 GB in `serve`); 8M TOD rows (~8 columns) stay 8M.
    compact_target_bytes: int = 512 << 20
    retire_grace_s: float = 60.0  # readers may still scan a compacted segment this long
    encode_threads: int = 2
    # Checkpoints encoding at once: the next snapshot need not wait for the previous one's
    # encoding (a 0.5 s checkpoint of ~450K QoS rows is one part on one encoder; with one in
    # flight the other core idled and appends met back-pressure at ~0.85M rows/s).
    checkpoints_in_flight: int = 2
    # Drop each segment's pages from the page cache once it is durable. For a server that
    # ingests for hours: on this VM the page cache growing into fresh memory made every write
    # slower (Arrow 128 x 1,000 fell 1.11M -> 0.88M rows/s over 50M rows as free memory went
    # 14 -> 8 GB; the kernel's page-cache copy doubled and page zeroing appeared), and with the
    # pages dropped 80M rows held 1.04-1.09M. Off by default: an import followed by analyses
    # reads its fresh segments from memory.
    drop_written_pages: bool = False
    # A checkpoint that found the disk full tries again this often (it holds its rows meanwhile).
    disk_full_retry_s: float = 1.0
    # A CRC-32 in every Parquet page header of the segments written (segments.py). Off only to
    # measure what they cost (`tracehouse bench integrity`).
    page_checksums: bool = True

    def __post_init__(self) -> None:
        if self.fsync not in POLICIES:
            raise BadInput(f"unknown fsync policy {self.fsync!r}", expected=" | ".join(POLICIES))
