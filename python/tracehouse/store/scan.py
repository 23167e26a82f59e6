"""The one reader: a trace's events as they are now, for SQL, analyses and exports.

Owns "the rows of an event type": its registered segments (immutable Parquet) plus its
unflushed tail - the rows the writer of this process buffers, or, when another process
writes the trace, the records of its WAL no checkpoint covers yet - every piece read as
the current version of the type (a column a piece predates is null: `conform.align`).

- `Cut`: one consistent cut of a trace (`Store.cut`): its types, segments and tail
  batches, and a signature that changes whenever its rows do. The SQL views
  (`query.py`) are built from a cut; so are the reads below.
- `read`: whole columns of one type (projection, time range, row-group pruning on the
  `ts` statistics) with a DuckDB connection of this thread's own: DuckDB's Parquet
  reader decodes a few columns 3-10x faster than `pyarrow.parquet.read_table` here
  (measured on 1.7M TOD enters x 4 columns: 50-70 ms against 130-690 ms, pyarrow's
  column threads suffering most from a loaded machine).
- `parts`: the same rows cut into row groups, each read on demand (pyarrow, one
  thread, no DuckDB): span pairing reads them on one thread while the Rust pass
  consumes them on another (a row group of 4 columns decodes at ~80M rows/s on one core).
- `sources` and `select`: one piece at a time through SQL (a cursor's top-N page asks
  each piece that can still hold it).

Row order: `read(..., order=True)` returns rows ordered by (ts, producer, seq), the
total order every analysis uses; segments of one type rarely overlap in time, so this
is usually a check, not a sort.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .. import _core, lazy
from ..arrays import as_numpy
from ..errors import BadInput
from ..schema import EventType
from .catalog import SegmentInfo, TraceInfo
from .conform import align
from .query import _to_arrow, qident, qstr

# Imported on first use (lazy.py): listing, searching and counting traces need none.
duckdb = lazy.module("duckdb")
np = lazy.module("numpy")
pa = lazy.module("pyarrow")
pc = lazy.module("pyarrow.compute")
pq = lazy.module("pyarrow.parquet")


@dataclass
class Cut:
    """One consistent cut of a trace: what a reader sees of it at one moment."""

    info: TraceInfo
    root: Path  # the store directory segment paths are relative to
    types: dict[str, EventType]
    segments: list[SegmentInfo]  # registered and live, by ts_min
    tails: dict[str, list[pa.RecordBatch]]  # unflushed rows by event type, as appended
    signature: tuple  # equal while the trace's rows are the same
    _tail_tables: dict = field(default_factory=dict, repr=False)

    def event_type(self, name: str) -> EventType:
        et = self.types.get(name)
        if et is None:
            raise BadInput(
                f"trace {self.info.name!r} has no event type {name!r}",
                expected=", ".join(self.types) or "an event type",
            )
        return et

    def segments_of(self, type_name: str) -> list[SegmentInfo]:
        return [s for s in self.segments if s.event_type == type_name]

    def tail(self, type_name: str) -> pa.Table | None:
        """The unflushed rows of a type with every column of its current version (None: none)."""
        t = self._tail_tables.get(type_name)
        if t is None and self.tails.get(type_name):
            et = self.event_type(type_name)
            t = self._tail_tables[type_name] = align(self.tails[type_name], et, [c.name for c in et.columns])
        return t

    @property
    def tail_rows(self) -> int:
        return sum(b.num_rows for bs in self.tails.values() for b in bs)

    def stamp(self) -> str:
        """Changes whenever the trace's events do: what derived data built on it records
        (an index or a processed trace whose stamp differs is stale)."""
        i = self.info
        return f"{i.id}:{i.event_count}:{i.ts_min}:{i.ts_max}:{self.tail_rows}"


def _columns(et: EventType, type_name: str, columns: Iterable[str] | None) -> list[str]:
    names = [c.name for c in et.columns]
    cols = list(columns) if columns is not None else names
    for c in cols:
        if c not in names:
            raise BadInput(f"event type {type_name!r} has no column {c!r}", expected=", ".join(names))
    return cols


# -- one piece at a time ----------------------------------------------------------------


@dataclass
class Source:
    """A piece of one event type's rows: a segment file, or the unflushed tail (a table)."""

    ts_min: int | None
    ts_max: int | None
    rows: int
    columns: tuple[str, ...]  # the columns it has (a segment may predate some)
    path: str | None = None
    table: pa.Table | None = None


def sources(cut: Cut, type_name: str) -> list[Source]:
    """The pieces of a type's rows in storage order: segments by ts_min, then the tail."""
    cut.event_type(type_name)
    out = [
        Source(s.ts_min, s.ts_max, s.rows, s.columns, path=str(cut.root / s.path)) for s in cut.segments_of(type_name)
    ]
    t = cut.tail(type_name)
    if t is not None and t.num_rows:
        ts = t.column("ts")
        out.append(Source(pc.min(ts).as_py(), pc.max(ts).as_py(), t.num_rows, tuple(t.column_names), table=t))
    return out


_DUCK = threading.local()


def _duck() -> duckdb.DuckDBPyConnection:
    """This thread's DuckDB connection for scanning segments (no views, no store state)."""
    con = getattr(_DUCK, "con", None)
    if con is None:
        con = _DUCK.con = duckdb.connect(":memory:")
        # Segments are immutable: their Parquet footers can be cached across queries (a
        # cursor page asks one segment per event type; re-reading its footer each time
        # cost more than the rows it decoded).
        con.execute("SET parquet_metadata_cache = true")
    return con


def select(source: Source | list[str], sql: str, params: list | None = None) -> pa.Table:
    """`sql` with `{src}` standing for one piece (or a list of segment files of one layout),
    run on this thread's scanning connection."""
    con = _duck()
    if isinstance(source, list):
        return _to_arrow(
            con.sql(sql.format(src=f"read_parquet([{', '.join(qstr(p) for p in source)}])"), params=params)
        )
    if source.path is not None:
        return _to_arrow(con.sql(sql.format(src=f"read_parquet({qstr(source.path)})"), params=params))
    view = f"_scan_tail_{id(source.table)}"
    con.register(view, source.table)
    try:
        return _to_arrow(con.sql(sql.format(src=view), params=params))
    finally:
        con.unregister(view)


def _filtered(paths: list[str], columns: list[str], start: int | None, end: int | None) -> pa.Table:
    """`columns` of Parquet files of one type (every file has them), in file order."""
    where = []
    if start is not None:
        where.append(f"ts >= {int(start)}")
    if end is not None:
        where.append(f"ts < {int(end)}")
    return select(
        paths,
        f"SELECT {', '.join(qident(c) for c in columns)} FROM {{src}}"
        + (" WHERE " + " AND ".join(where) if where else ""),
    )


# -- whole columns ----------------------------------------------------------------------


def read(
    cut: Cut,
    type_name: str,
    columns: Iterable[str] | None = None,
    *,
    start: int | None = None,
    end: int | None = None,
    order: bool = True,
) -> pa.Table:
    """Rows of one event type with `columns` (default all), ts in [start, end).

    order=True: rows ordered by (ts, producer, seq); False: in storage order.
    """
    et = cut.event_type(type_name)
    cols = _columns(et, type_name, columns)
    need = list(dict.fromkeys(cols + (["ts", "producer", "seq"] if order else [])))
    srcs = [
        s
        for s in sources(cut, type_name)
        if (start is None or s.ts_max is None or s.ts_max >= start)
        and (end is None or s.ts_min is None or s.ts_min < end)
    ]
    parts: list[pa.Table] = []
    # Runs of consecutive segments holding every needed column are scanned together (one
    # multi-file scan decodes on both cores); a segment written before a column existed
    # is read alone and the column filled with nulls. Storage order is kept.
    run: list[str] = []
    for s in srcs + [None]:
        if s is not None and s.path is not None and all(c in s.columns for c in need):
            run.append(s.path)
            continue
        if run:
            parts.append(_filtered(run, need, start, end))
            run = []
        if s is None:
            continue
        if s.path is not None:
            parts.append(_filtered([s.path], [c for c in need if c in s.columns], start, end))
        else:
            t = s.table.select(need)
            mask = None
            if start is not None:
                mask = pc.greater_equal(t.column("ts"), int(start))
            if end is not None:
                m2 = pc.less(t.column("ts"), int(end))
                mask = m2 if mask is None else pc.and_(mask, m2)
            parts.append(t if mask is None else t.filter(mask))
    table = align(parts, et, need)
    if order:
        table = sort_rows(table)
    return table.select(cols)


def empty_table(et: EventType, columns: list[str]) -> pa.Table:
    """No rows, with `columns` of the type."""
    return align([], et, columns)


# -- row groups on demand -----------------------------------------------------------------


@dataclass
class Part:
    """A piece of one event type's rows: a row group of a segment, or the unflushed tail."""

    ts_min: int | None
    rows: int
    read: Callable[[], pa.Table]


def parts(cut: Cut, type_name: str, columns: list[str]) -> list[Part]:
    """The rows of one event type with `columns` as row-group parts, in storage order:
    concatenated, they are `read(cut, type_name, columns, order=False)`. Each `read()`
    decodes one row group on the calling thread (a segment that predates a column gives
    nulls for it)."""
    et = cut.event_type(type_name)
    _columns(et, type_name, columns)
    out: list[Part] = []
    for s in sources(cut, type_name):
        if s.table is not None:
            t = s.table.select(columns)
            out.append(Part(s.ts_min, s.rows, lambda t=t: t))
            continue
        f = pq.ParquetFile(s.path)
        md = f.metadata
        present = [c for c in columns if c in s.columns]
        ts_at = md.schema.to_arrow_schema().get_field_index("ts")
        for i in range(md.num_row_groups):
            rg = md.row_group(i)
            st = rg.column(ts_at).statistics if ts_at >= 0 else None
            lo = st.min if st is not None and st.has_min_max else s.ts_min
            out.append(
                Part(
                    lo,
                    rg.num_rows,
                    lambda f=f, i=i, present=present: align(
                        [f.read_row_group(i, columns=present, use_threads=False)], et, columns
                    ),
                )
            )
    return out


# -- the total order --------------------------------------------------------------------


def is_ordered(ts: np.ndarray, producer: np.ndarray, seq: np.ndarray) -> bool:
    """True when rows are ordered by (ts, producer, seq)."""
    if len(ts) < 2:
        return True
    if (ts[1:] > ts[:-1]).all():  # the usual case, one pass and no temporaries beyond a mask
        return True
    dt = np.diff(ts)
    if (dt < 0).any():
        return False
    tie = dt == 0
    dp = np.diff(producer.astype(np.int64))
    if (dp[tie] < 0).any():
        return False
    same = tie & (dp == 0)
    return bool((np.diff(seq)[same] > 0).all())


def ordering(table: pa.Table) -> pa.Array | None:
    """The permutation ordering `table` by (ts, producer, seq), None when already ordered."""
    ts = as_numpy(table.column("ts"))
    if len(ts) < 2 or (ts[1:] > ts[:-1]).all():
        return None
    producer = as_numpy(table.column("producer"))
    seq = as_numpy(table.column("seq"))
    if is_ordered(ts, producer, seq):
        return None
    return _core.stable_order([pa.array(ts), pa.array(producer.astype(np.int64)), pa.array(seq)])


def sort_rows(table: pa.Table) -> pa.Table:
    """`table` ordered by (ts, producer, seq): a check when already so, else a stable sort."""
    order = ordering(table)
    return table if order is None else table.take(order)
