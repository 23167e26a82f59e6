"""The last row of every series, kept on write: `"<trace>".<type>_last` and InfluxQL's lastpoint.

Owns the side files of a trace that keeps them (metadata `last_rows=series`: every bucket the
server's line-protocol and Arrow writes and `CREATE DATABASE` create; an older one keeps them
from its next checkpoint once the metadata is set): per event type one
Parquet file, `traces/<id>/last/<type>.<rows>.parquet`, holding for each producer (a series) its
row of highest (ts, seq) among the first `<rows>` rows of the type, which are the rows its
registered segments hold. A checkpoint writes the next file (the last file's rows and its own,
reduced) before it registers its segments, so a reader that finds the file named by the rows the
catalog registers reads exactly those segments' last rows: a crash before the registration
leaves the older file the right one (the rows come back from the WAL into the tail), a crash after
it leaves the new one. The count names the file, not a WAL number, because a checkpoint under
`fsync=off` has none, and compaction, which merges segments without changing their rows, leaves
the file right. Retention drops rows: it deletes the type's files first (`drop`), and the next
checkpoint computes the last rows again from the segments (`from_segments`); so does the first
checkpoint of a trace that kept none (an older store), and nothing is needed at recovery (the
rows the WAL brings back are the tail, which the view reads beside the file).

Exact under out-of-order writes: a row is the last of its series only by (ts, seq), so a later
write of an older time never replaces it; of two rows at one time the later written (higher seq)
wins, as a later point at the same time overwrites an earlier one in InfluxDB.

Why: TSBS's lastpoint (`SELECT * FROM cpu GROUP BY * ORDER BY time DESC LIMIT 1`) read every
row of every series to keep one per series (a bound on time first: tests/server/test_tsbs.py).
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

from .. import lazy

np = lazy.module("numpy")
pa = lazy.module("pyarrow")
pq = lazy.module("pyarrow.parquet")
duckdb = lazy.module("duckdb")

log = logging.getLogger("tracehouse.store")

LAST_META = "last_rows"  # trace metadata: "series" keeps the last row of every series
SERIES = "series"
VIEW_SUFFIX = "_last"  # "<trace>".<type>_last
ORDER = "ts DESC, seq DESC"  # what "last" means, in SQL


def wanted(metadata: dict) -> bool:
    """Whether a trace keeps the last row of each series."""
    return metadata.get(LAST_META) == SERIES


def directory(root: Path, trace_id: int) -> Path:
    return Path(root) / "traces" / str(trace_id) / "last"


def path_for(root: Path, trace_id: int, type_name: str, rows: int) -> Path:
    """The file of a type's last rows among its first `rows` rows."""
    return directory(root, trace_id) / f"{type_name}.{int(rows)}.parquet"


def last_indices(producer, ts, seq):
    """Indices of the row of highest (ts, seq) of each producer (numpy arrays of one length)."""
    n = len(producer)
    if n == 0:
        return np.zeros(0, np.int64)
    lo, hi = int(producer.min()), int(producer.max())
    if hi - lo <= 4 * n + 1024:  # dense producer ids (they are numbered per trace): O(n)
        k = producer.astype(np.int64) - lo
        best_ts = np.full(hi - lo + 1, np.iinfo(np.int64).min, np.int64)
        np.maximum.at(best_ts, k, ts)
        cand = ts == best_ts[k]
        best_seq = np.full(hi - lo + 1, np.iinfo(np.int64).min, np.int64)
        np.maximum.at(best_seq, k[cand], seq[cand])
        idx = np.flatnonzero(cand & (seq == best_seq[k]))
        if len(idx) == len(np.unique(k[idx])):
            return idx
    order = np.lexsort((seq, ts, producer))  # by producer, then ts, then seq: the last of each run
    p = producer[order]
    return order[np.r_[p[1:] != p[:-1], True]]


def last_rows(table: pa.Table) -> pa.Table:
    """One row per producer of `table`: its row of highest (ts, seq)."""
    if table.num_rows == 0:
        return table
    cols = [table.column(c).to_numpy() for c in ("producer", "ts", "seq")]
    return table.take(pa.array(last_indices(*cols)))


def load(root: Path, trace_id: int, type_name: str, rows: int) -> pa.Table | None:
    """The kept last rows of a type's first `rows` rows, or None when there is no such file."""
    try:
        return pq.read_table(path_for(root, trace_id, type_name, rows))
    except FileNotFoundError:
        return None


def from_segments(root: Path, segments: list) -> pa.Table | None:
    """The last rows of the rows of `segments` (one type's), read from their files (DuckDB)."""
    if not segments:
        return None
    files = [str(Path(root) / s.path) for s in segments]
    con = duckdb.connect()
    try:
        rel = con.sql(
            "SELECT * FROM read_parquet(?, union_by_name = true) "
            f"QUALIFY row_number() OVER (PARTITION BY producer ORDER BY {ORDER}) = 1",
            params=[files],
        )
        f = getattr(rel, "to_arrow_table", None) or rel.arrow
        return f()
    finally:
        con.close()


def write(root: Path, trace_id: int, type_name: str, rows: int, table: pa.Table, *, keep: int, fsync: bool) -> Path:
    """Write the file of a type's first `rows` rows (by rename); the type's other files go, but
    the one of `keep` rows (the catalog's until this checkpoint registers)."""
    d = directory(root, trace_id)
    d.mkdir(parents=True, exist_ok=True)
    dst = path_for(root, trace_id, type_name, rows)
    tmp = d / f".{uuid.uuid4().hex}.tmp"
    pq.write_table(table, tmp, compression="zstd")
    if fsync:
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    os.rename(tmp, dst)
    keep_name = path_for(root, trace_id, type_name, keep).name
    for old in _files(d, type_name):
        if old.name not in (dst.name, keep_name):
            old.unlink(missing_ok=True)
    return dst


def drop(root: Path, trace_id: int, type_names) -> None:
    """Delete the kept last rows of `type_names` (rows are about to be dropped: retention)."""
    d = directory(root, trace_id)
    for name in type_names:
        for f in _files(d, name):
            f.unlink(missing_ok=True)


def _files(d: Path, type_name: str) -> list[Path]:
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return []
    out = []
    for n in names:
        stem, _, ext = n.rpartition(".")
        base, _, count = stem.rpartition(".")
        if ext == "parquet" and base == type_name and count.isdigit():
            out.append(d / n)
    return out


def view_sql(body: str) -> str:
    """The last row of each producer among the rows of `body` (SQL with ts, producer and seq)."""
    return f"SELECT * FROM ({body}) QUALIFY row_number() OVER (PARTITION BY producer ORDER BY {ORDER}) = 1"
