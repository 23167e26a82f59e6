"""A reader process for the snapshot test: queries a read-only store until it sees the final count.

    reader_child.py STORE TARGET TIMEOUT_S

Opens STORE read-only and repeatedly runs count(*), count(distinct id), max(id)
over "t".ev, printing each observation as `count distinct max` (max -1 when
empty). The first line is printed before the writer starts, so the parent knows
the reader is running. Exits 0 once it observed count >= TARGET, 2 on timeout,
and 1 (message on stderr) when a query fails.
"""

from __future__ import annotations

import sys
import time

import tracehouse

QUERY = 'SELECT count(*), count(DISTINCT id), coalesce(max(id), -1) FROM "t".ev'


def main() -> int:
    path, target, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    store = tracehouse.open(path, readonly=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            c, d, m = store.sql(QUERY).to_pylist()[0].values()
        except Exception as e:  # reported, and the test fails on the exit code
            print(f"query failed: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        sys.stdout.write(f"{c} {d} {m}\n")
        sys.stdout.flush()
        if c >= target:
            return 0
        time.sleep(0.002)
    return 2


if __name__ == "__main__":
    sys.exit(main())
