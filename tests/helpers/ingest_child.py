"""A writer process for the crash tests: appends batches forever and prints each acknowledged id.

    ingest_child.py STORE FSYNC FIRST_ID [DIE_AT DIE_AFTER]

Opens STORE as its writer (recovering whatever the previous, killed, child left),
appends to trace "t" batches whose rows carry their batch id (`helpers.batch_table`),
waits until each is durable under FSYNC (`append(..., wait=True)`), then prints the
id and flushes stdout: a printed id is an acknowledged one. Small `flush_rows`, a
short flush interval and `compact_min_segments=3` make checkpoints and compactions
run all the time, and every 20 batches the main thread checkpoints too, so a SIGKILL
from the parent lands in any phase.

With DIE_AT the child kills itself (SIGKILL) at the DIE_AFTER-th time it reaches
one exact point, to cover each phase deterministically:
  wal-append     half of a WAL record's payload written by the native writer, not its header
  segment-tmp    a segment's temporary file half written
  segment-file   a segment renamed into place but not registered (an orphan)
  registered     a checkpoint's segments registered, its WAL files not yet deleted
  compaction-tmp   a compaction's temporary output file half written
  compaction-file  a compaction's output renamed into place but not registered
  compacted      a compaction registered, the retired segment files not yet deleted
"""

from __future__ import annotations

import os
import signal
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tracehouse  # noqa: E402
from helpers import batch_table  # noqa: E402
from tracehouse import _core  # noqa: E402
from tracehouse.store import catalog as catmod  # noqa: E402
from tracehouse.store import compact as compactmod  # noqa: E402
from tracehouse.store import segments as segmod  # noqa: E402


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def arm(point: str, after: int) -> None:
    count = {"n": 0}

    def due() -> bool:
        count["n"] += 1
        return count["n"] >= after

    if point == "wal-append":
        # Inside the native write itself (src/store/wal.rs): the after-th record written
        # goes half to disk, in the writev steps of a real write, then the process is killed.
        _core.wal_failpoint(after)
    elif point in ("segment-tmp", "segment-file", "compaction-tmp", "compaction-file"):
        orig = compactmod.write_segment

        def write_segment(root, rel_dir, table, level=0, keep_cached=True, row_group=None, meta=None, checksums=True):
            if not due():
                return orig(root, rel_dir, table, level, keep_cached, row_group, meta, checksums)
            if point in ("segment-file", "compaction-file"):
                orig(root, rel_dir, table, level, keep_cached, row_group, meta, checksums)
            else:
                d = Path(root) / rel_dir
                d.mkdir(parents=True, exist_ok=True)
                (d / f".{uuid.uuid4().hex}.parquet.tmp").write_bytes(b"PAR1" + b"\0" * 100)
            die()

        # Checkpoints reach it through segments.write_sorted_part, compactions from compact.py.
        if point.startswith("compaction"):
            compactmod.write_segment = write_segment
        else:
            compactmod.write_segment = segmod.write_segment = write_segment
    elif point in ("registered", "compacted"):
        orig = catmod.Catalog.register_segments

        def register_segments(self, trace_id, segments, *, wal_covered=None, retire=()):
            ids = orig(self, trace_id, segments, wal_covered=wal_covered, retire=retire)
            phase = "compacted" if retire else "registered" if wal_covered is not None else None
            if phase == point and due():
                die()
            return ids

        catmod.Catalog.register_segments = register_segments
    else:
        raise SystemExit(f"unknown DIE_AT {point!r}")


def main() -> None:
    store_path, fsync, first = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if len(sys.argv) > 4:
        arm(sys.argv[4], int(sys.argv[5]))
    store = tracehouse.open(
        store_path,
        fsync=fsync,
        flush_rows=300,
        flush_interval_s=0.05,
        compact_min_segments=3,
        retire_grace_s=0.2,
        group_commit_ms=2,
    )
    b = first
    while b < first + 100_000:
        store.append("t", "ev", batch_table(b), wait=True)
        sys.stdout.write(f"{b}\n")
        sys.stdout.flush()
        b += 1
        if b % 20 == 0:
            store.flush("t")
    os._exit(0)  # never closes cleanly: the parent always kills before this


if __name__ == "__main__":
    main()
