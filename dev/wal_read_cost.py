"""CPU time of `wal.read_wal` over one WAL file, frames and CRCs only (decode=False, what `ls`
needs) and decoded, best of 5 (src/store/walscan.rs cites it).

    python dev/wal_read_cost.py DIR make 10000 100    # a WAL file of 10,000 records of 100 rows in DIR
    python dev/wal_read_cost.py DIR read              # read it; PYTHONPATH=<another tree>/python compares
"""

import sys
import time
from pathlib import Path

import pyarrow as pa

from tracehouse.store import wal as walmod

d = Path(sys.argv[1])
p = walmod.wal_path(d, 1)
if sys.argv[2] == "make":
    w = walmod.WalWriter(d, 1)
    for i in range(int(sys.argv[3])):
        n = int(sys.argv[4])
        w.append(
            "ev",
            pa.record_batch(
                {
                    "ts": pa.array(range(i * n, i * n + n), pa.int64()),
                    "producer": pa.array([i % 7] * n, pa.int32()),
                    "v": pa.array([float(j) for j in range(n)], pa.float64()),
                }
            ),
        )
    w.close()
    print(p.stat().st_size, "bytes")
    sys.exit()
for decode in (False, True):
    best = 1e9
    for _ in range(5):
        t = time.process_time()
        s = walmod.read_wal(p, decode=decode)
        best = min(best, time.process_time() - t)
    print(
        f"{walmod.__file__.split('/python/')[0]}: decode={decode} {best * 1e3:.1f} ms CPU, records {len(s.records)}, valid {s.valid_bytes}"
    )
