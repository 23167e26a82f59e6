"""The TOD-store experiment alone, SQL peers with and without primary keys, at sizes a busy
2-core machine runs in minutes: the run behind docs/benchmarks/2026-12-06-tod-keys.

`bench all --only tod_store` with the full or medium settings takes 10^3 ... 10^7 events and the
row-at-a-time paths (tens of minutes here); this keeps 10^4 and 10^5 events and the fast paths
(with keys: `fast`, without: `nokey`), up to 12 runs and 40 s per cell, and writes the same
results.json and report.md.

    .venv/bin/python dev/tod_keys.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tracehouse_bench import bench_all, report


def main(out: Path) -> None:
    bench_all.MEDIUM["tod_store"] = {
        "sizes": (10**4, 10**5),
        "cap_s": 60.0,
        "budget_s": 40.0,
        "max_runs": 12,
        "skip": ("sqlite row", "duckdb row", "postgres row", "mariadb row"),
    }
    bench_all.MEDIUM_SCOPE = (
        "Only the TOD-store experiment (seed 001), run alone to compare the SQL peers' fast paths with the seed's "
        "primary keys and without them (`nokey`, like for like: tracehouse enforces no key): 10^4 and 10^5 events "
        "(the sizes a busy 2-core machine shared with other agents' builds and tests runs in minutes), the "
        "row-at-a-time paths left out, up to 12 runs and 40 s per cell."
    )
    r = bench_all.run(quick=False, medium=True, out=out, only=("tod_store",), log=print)
    r["command"] = f"python dev/tod_keys.py {out}"
    (out / "results.json").write_text(json.dumps(r, indent=1, default=str))
    report.write(r, out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
