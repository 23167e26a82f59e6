"""A reader process for the snapshot test: queries a read-only store until told to stop.

    reader_child.py STORE STOP_FILE TIMEOUT_S

Opens STORE read-only and repeatedly runs count(*), count(distinct id), max(id)
over "t".ev, printing each observation as `count distinct max` (max -1 when
empty). The first line is printed before the writer starts, so the parent knows
the reader is running. Once STOP_FILE exists it makes one last observation (which
therefore sees everything the writer registered before creating the file) and
exits 0; it exits 2 on timeout, and 1 (message on stderr) when a query fails.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import tracehouse

QUERY = 'SELECT count(*), count(DISTINCT id), coalesce(max(id), -1) FROM "t".ev'


def main() -> int:
    path, stop_file, timeout = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])
    store = tracehouse.open(path, readonly=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        last = stop_file.exists()
        try:
            c, d, m = store.sql(QUERY).to_pylist()[0].values()
        except Exception as e:  # reported, and the test fails on the exit code
            print(f"query failed: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        sys.stdout.write(f"{c} {d} {m}\n")
        sys.stdout.flush()
        if last:
            return 0
        time.sleep(0.002)
    return 2


if __name__ == "__main__":
    sys.exit(main())
