"""InfluxQL `SELECT` answered without DuckDB: the native executor's shapes, its columns, its answer.

Owns which SELECTs the server answers from a measurement's columns held in memory by the Rust
loops of `_core.influx_aggregate` / `_core.influx_raw` (src/analysis/influx.rs), and the columns
themselves. Every other SELECT (and any that this module is unsure of) goes on to the DuckDB
translation (`influxql_sql.py`), which stays the reference: tests/server/test_influxql_native.py
runs random queries of the shapes below through both and compares the answers.

Why: DuckDB's fixed cost per statement (parse, bind, optimize, first batch) was 7.7 ms of the
11.3 ms TSBS single-groupby-1-1-1 spent in the server (load 5.5), where QuestDB answers in ~1 ms.
`tracehouse bench tsbs` (864,000 rows, TSBS's own runner, medians in ms, tracehouse / QuestDB in
the same run), through DuckDB at load 3-5, then natively at load 2.4-2.7: single-groupby-1-1-1
10.97 / 1.04 -> 0.90 / 0.83, high-cpu-1 17.94 / 0.70 -> 1.39 / 0.93, high-cpu-all 248 / 49 ->
44 / 51, lastpoint 14.41 / 0.51 -> 1.66 / 0.54, groupby-orderby-limit 25.8 / 7.1 -> 8.0 / 6.1
(then 0.45 ms in-process: only the kept windows are folded), double-groupby-all 20 ms. The
last run (runs folded per window, one struct array out; load 17-22, QuestDB in the same run):
single-groupby-1-1-1 1.06 / 1.02, single-groupby-5-1-1 0.95 / 2.35, high-cpu-1 3.65 / 1.91,
high-cpu-all 52 / 65, lastpoint 4.10 / 1.45, groupby-orderby-limit 1.17 / 13.6,
double-groupby-all 14.4: 7 of the 10 types with a QuestDB peer at or under it by the median.
In-process, a request's parts at load ~2 (single-groupby-1-1-1): parse 0.10 ms, the executor
0.35 (of which the Rust loop 0.05, the rest the source's Python: the cut, catalog reads, the
series groups), JSON 0.02-0.08; served, the HTTP front end and the query thread's hop add ~0.3.
Raw points (`SELECT *`, lastpoint, high-cpu) are written whole as series JSON in Rust
(`_core.influx_raw_json`): served, cProfile'd, `influx_raw` took 2.4 ms a lastpoint where it
takes 0.29 ms in-process, the rest waiting to get the interpreter lock back after pyarrow's
import of its answer let it go; then 1.3 ms of Python made series dicts, tags and JSON. TSBS's
runner against two servers of the same 864,000 rows, interleaved, medians (p99) in ms, before ->
after, load 10-12: lastpoint 2.00-2.23 (4.0-22) -> 1.31-1.46 (2.4-5.9), high-cpu-1 1.36-1.54
-> 0.93-0.97, high-cpu-all 54 -> 39. Aggregates too (`influx_aggregate` with `prefixes`), then
at load 18-19, three runs each: single-groupby-1-1-1 0.86-1.09 -> 0.60-0.72, 1-8-1 0.99-1.02
-> 0.78-0.85, 5-1-1 0.96-1.00 -> 0.70-0.77, 5-8-1 1.15-1.37 -> 0.88-1.15; lastpoint 2.48-2.62
-> 1.23-2.08, high-cpu-1 1.46-1.54 -> 0.93-1.06. Then a run inside a query's time bound is
taken without a binary search (`Part::range`): lastpoint's raw loop in-process 0.224 -> 0.077
ms; served, against the code before all of this, three runs each at load 17-18: lastpoint
2.34-3.20 -> 0.93-1.01 ms. Then a served request's stages were stamped (socket to last byte,
TSBS lastpoint, medians at load 4-6): parse 70-110 us, the hop to a query thread 30-50, the
SELECT's catalog reads and sources 105-145, the columns 50-65, the series groups 45-60, the
Rust call and its strings 265-450, the answer 30-65, the send 70-240. What each SELECT made
anew and read again is now kept while it is the same: statements by their text
(influxql.py `parse_kept`), a database's trace, types and tag keys per catalog version and
writer types (`SourceFacts`, the version read once), its Sources and each statement's plan
(`_Plan`); the Rust call borrows its strings and passes the parts a LIMIT cannot reach; a
kept text whose last run was short and over the same columns runs on the dispatcher. TSBS's
runner against two servers of the same 864,000 rows loaded fresh, interleaved, three runs
each, medians ms, before -> after (load 7): lastpoint 1.24-1.40 -> 0.59-0.66, high-cpu-1
1.23-1.38 -> 0.63-0.85, single-groupby-1-1-1 0.69-0.85 -> 0.43-0.45, single-groupby-5-8-1
0.94-1.32 -> 0.47-0.50, groupby-orderby-limit 0.78-1.14 -> 0.49-0.66 (then the dispatcher's
runs, load 3.5-4.5: lastpoint 0.52-0.65 -> 0.44-0.53). Served lastpoint's stages then, load
17: parse 11 us, hop 30, sources 40, columns 10 (the cut of a restarted server's trace, read
from its WAL files: 86), groups 4, the Rust call 155-185, answer 20, send 45-215.

Shapes answered natively (TSBS's cpu-only queries and Grafana's default panels):
- aggregates `count sum mean min max first last` of integer and float fields (each field a
  plain call; names and aliases as InfluxDB gives them), GROUP BY time(interval[, offset]) and
  tags (names, `*`, /regex/), fill(null) or fill(none), ORDER BY time [DESC], LIMIT/OFFSET,
  SLIMIT/SOFFSET; without GROUP BY time, a row per series (a lone selector: its point's time);
- raw points: `SELECT *` or field and tag names, e.g. TSBS high-cpu and lastpoint
  (`SELECT * ... GROUP BY "hostname" ORDER BY time DESC LIMIT 1`);
- WHERE: the time range; tag `=` / `!=` with a string, joined by AND / OR; AND-ed comparisons
  of a field with a number (`usage_user > 90.0`).
Not native (DuckDB answers): tz(), regexes, string and boolean fields, arithmetic, other functions,
fill(previous|linear|<n>), subqueries, tags that are not strings, conditions mixing fields and
tags under OR, a database with more rows than the memory bound.

Columns: per measurement (a trace's event type), the store's consistent cut (`Store.cut`:
registered segments + the writer's unflushed tail) as parts, each sorted by (producer, ts,
seq): one per segment (read from its Parquet file once, kept while the segment is live) and
the tail's batches (a part per batch appended since the last query, merged into one past
`TAIL_PARTS`). A query compares the cut's signature with the one its columns were built from
and brings them up to date first, so every acknowledged write is seen; in `serve` a thread
(`warm`) does the same every 0.5 s for the measurements held, so the Parquet file of a
checkpoint's or a compaction's new segment is mostly read before a query needs it. A series and a time
range are two binary searches in each part. Memory: the parts of all measurements are bounded
by `MAX_BYTES` (least recently used measurements let go first); a measurement bigger than that
is answered by DuckDB. The columns live in the server process and the loops run there, with
the interpreter lock released (no pipe, no process hop); they are the store's rows only, the
same rows a query process would read.

Which path a query took: the `/query` answer's `X-Tracehouse-Engine` header, `native` when
every SELECT of the request was answered here, else `duckdb`.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from .. import _core
from ..jsonvalues import RawSeries
from ..store.conform import align
from ..store.query import TAG_COLUMNS_META, TAG_KIND
from .influxql_select import Binary, Call, Literal, Paren, Select, Subquery, VarRef, field_name
from .influxql_sql import (
    EPOCH_DIVISORS,
    MAX_BUCKETS,
    SMALL_ANSWER_ROWS,
    Plan,
    QueryError,
    Source,
    Translator,
    _unique,
    answer_series,
    describe,
    zone_name,
)

log = logging.getLogger("tracehouse.server")

MAX_BYTES = 512 << 20  # columns held for all measurements (least recently used let go first)
TAIL_PARTS = 8  # parts of a tail before they are merged into one
AGGS = ("count", "sum", "mean", "min", "max", "first", "last")
SELECTORS = ("min", "max", "first", "last")
NUMERIC = {"int64": True, "int32": True, "float64": False}  # field type -> is integer
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


class Unsupported(Exception):
    """This SELECT is not one of the native shapes: DuckDB answers it."""


# -- the columns ----------------------------------------------------------------------------


@dataclass
class _Columns:
    """One measurement's parts at one cut of its trace."""

    fields: list[str]  # column names, by field index
    ints: list[bool]
    layout: tuple  # the type's columns and types: a change rebuilds everything
    signature: tuple = ()
    segments: dict[int, Any] = field(default_factory=dict)  # segment id -> SeriesPart
    seg_producers: dict[int, set] = field(default_factory=dict)
    tail_batches: list = field(default_factory=list)  # the tail batches the tail parts hold
    tail_parts: list = field(default_factory=list)
    tail_producers: set = field(default_factory=set)
    nbytes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    info: Any = None  # the trace (its latest TraceInfo) and type these are of, for `refresh`
    type_name: str = ""
    # at the current cut, replaced as one (a query reads one cut's, whatever another query
    # brings up to date meanwhile): the parts, the producers with rows (sorted), and what queries
    # derived from them and the tags (`memo`: a query's series groups, a tag's values by producer)
    view: _View = field(default_factory=lambda: _View([], [], {}))

    def parts(self) -> list:
        return self.view.parts


@dataclass(frozen=True)
class _View:
    parts: list
    producers: list[int]
    memo: dict


def _part(table, fields: list[str], ints: list[bool]):
    """A SeriesPart of an Arrow table of (producer, ts, seq, fields...): sorted, typed."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = table.combine_chunks() if table.num_rows else table
    prod = table.column("producer").combine_chunks().cast(pa.int32())
    ts = table.column("ts").combine_chunks().cast(pa.int64())
    seq = table.column("seq").combine_chunks().cast(pa.int64())
    if prod.null_count or ts.null_count or seq.null_count:
        raise Unsupported("null producer, ts or seq")
    order = _core.stable_order([prod.cast(pa.int64()), ts, seq])
    if table.num_rows > 1 and not pc.all(pc.equal(order, pa.array(range(table.num_rows), pa.uint32()))).as_py():
        prod, ts, seq = prod.take(order), ts.take(order), seq.take(order)
    else:
        order = None
    cols = []
    for name, is_int in zip(fields, ints):
        if name not in table.column_names:
            cols.append(None)
            continue
        c = table.column(name).combine_chunks().cast(pa.int64() if is_int else pa.float64())
        cols.append(c.take(order) if order is not None else c)
    part = _core.SeriesPart(prod, ts, seq, cols)
    return part, set(pc.unique(prod).to_pylist())


class ColumnCache:
    """The measurements' columns of one store (`columns`), bounded by `MAX_BYTES`."""

    def __init__(self, store, max_bytes: int = MAX_BYTES) -> None:
        self.store = store
        self.max_bytes = max_bytes
        self.lock = threading.Lock()
        self.held: collections.OrderedDict[tuple, _Columns] = collections.OrderedDict()

    def columns(self, info, type_name: str, current_only: bool = False) -> _Columns:
        """`type_name`'s columns at the trace's current cut (built or brought up to date; with
        `current_only`, Unsupported unless they are current already)."""
        cut = self.store.cut(info)
        et = cut.types.get(type_name)
        if et is None:
            raise Unsupported("no such type in the cut")
        layout = tuple((c.name, c.type) for c in et.columns)
        key = (info.id, info.created, type_name)
        if current_only:
            cols = self.held.get(key)
            if cols is None or cols.signature != cut.signature:
                raise Unsupported("columns not current")
            return cols
        with self.lock:
            cols = self.held.get(key)
            if cols is None or cols.layout != layout:
                numeric = [c for c in et.columns if c.type in NUMERIC and c.name not in ("ts", "producer", "seq")]
                cols = _Columns([c.name for c in numeric], [NUMERIC[c.type] for c in numeric], layout)
                self.held[key] = cols
            self.held.move_to_end(key)
        cols.info, cols.type_name = info, type_name
        with cols.lock:
            if cols.signature != cut.signature:
                self._update(cols, cut, et, type_name)
        with self.lock:
            total = sum(c.nbytes for c in self.held.values())
            while total > self.max_bytes and len(self.held) > 1:
                k, old = next(iter(self.held.items()))
                if old is cols:
                    break
                del self.held[k]
                total -= old.nbytes
            if cols.nbytes > self.max_bytes:
                self.held.pop(key, None)
                raise Unsupported(f"measurement holds {cols.nbytes:,} bytes, over the native bound {self.max_bytes:,}")
        return cols

    def refresh(self) -> int:
        """Bring the held measurements' columns up to their trace's current cut (`warm`'s
        round); the measurements brought up to date. A query does the same for its own, so this
        only moves the reading of a new segment out of a query's time."""
        with self.lock:
            held = list(self.held.values())
        done = 0
        for cols in held:
            cut = self.store.cut(cols.info)
            et = cut.types.get(cols.type_name)
            if cut.signature == cols.signature or et is None:
                continue
            if tuple((c.name, c.type) for c in et.columns) != cols.layout:
                continue  # (a new column: the next query builds them anew)
            with cols.lock:
                if cols.signature != cut.signature:
                    self._update(cols, cut, et, cols.type_name)
                    done += 1
        return done

    def _update(self, cols: _Columns, cut, et, type_name: str) -> None:
        import pyarrow.parquet as pq

        read = ["producer", "ts", "seq", *cols.fields]
        live = {s.id: s for s in cut.segments_of(type_name)}
        for sid in [s for s in cols.segments if s not in live]:
            del cols.segments[sid]
            del cols.seg_producers[sid]
        for sid, seg in live.items():
            if sid in cols.segments:
                continue
            if seg.damaged:
                raise Unsupported(f"segment {seg.path} is damaged")
            present = [c for c in read if c in seg.columns] if seg.columns else read
            table = pq.read_table(cut.root / seg.path, columns=present)
            cols.segments[sid], cols.seg_producers[sid] = _part(table, cols.fields, cols.ints)
        batches = list(cut.tails.get(type_name) or [])
        old = cols.tail_batches
        grows = len(batches) >= len(old) and all(a is b for a, b in zip(old, batches))
        if not grows or len(cols.tail_parts) >= TAIL_PARTS:
            cols.tail_parts, cols.tail_producers, old = [], set(), []
        new = batches[len(old) :]
        if new:
            names = [c.name for c in et.columns]
            part, prods = _part(align(new, et, names), cols.fields, cols.ints)
            cols.tail_parts.append(part)
            cols.tail_producers |= prods
        cols.tail_batches = batches
        parts = list(cols.segments.values()) + cols.tail_parts
        cols.view = _View(parts, sorted(set(cols.tail_producers).union(*cols.seg_producers.values())), {})
        cols.nbytes = sum(p.nbytes for p in parts)
        cols.signature = cut.signature


_CACHES: dict[int, ColumnCache] = {}
_CACHES_LOCK = threading.Lock()


def cache_of(store) -> ColumnCache:
    with _CACHES_LOCK:
        c = _CACHES.get(id(store))
        if c is None or c.store is not store:
            c = _CACHES[id(store)] = ColumnCache(store)
        return c


WARM_S = 0.5  # how often `warm` looks for a cut that moved


def warm(store, stopping: threading.Event) -> threading.Thread:
    """A thread that, until `stopping` is set, brings the held columns up to each new cut
    (`ColumnCache.refresh`) soon after a checkpoint or a compaction registers a segment, so the
    first query after it does not read the segment's Parquet file itself (a compaction of TSBS's
    864,000 rows: one query of 50 took ~40 ms where the others took 1)."""

    def run() -> None:
        while not stopping.wait(WARM_S):
            c = _CACHES.get(id(store))
            if c is None or c.store is not store or not c.held:
                continue
            try:
                c.refresh()
            except Exception as e:  # noqa: BLE001 - a trace dropped meanwhile, a store closing: a query redoes it
                if not stopping.is_set():
                    log.debug("warming the InfluxQL columns: %s", e)

    t = threading.Thread(target=run, name="th-influx-warm", daemon=True)
    t.start()
    return t


# -- tags -----------------------------------------------------------------------------------

_TAGS: dict[tuple, dict[int, dict[str, str]]] = {}


def producer_tags(store, info, keys: dict[str, str], version: int) -> dict[int, dict[str, str]]:
    """Each tagged producer's tags (strings), kept while the catalog's version stays (`version`,
    read by the caller before this: producers change only in a catalog transaction)."""
    k = (id(store), info.id, version)
    got = _TAGS.get(k)
    if got is None:
        if any(t != "VARCHAR" for t in keys.values()):
            raise Unsupported("a tag whose values are not strings")
        every = info.metadata.get(TAG_COLUMNS_META) == "attrs"
        got = {}
        for p in store.catalog.producers(info.id):
            if every or p["kind"] == TAG_KIND:
                attrs = p["attrs"] or {}
                if any(not isinstance(v, str) for v in attrs.values()):
                    raise Unsupported("a tag whose values are not strings")
                got[int(p["id"])] = {str(a): v for a, v in attrs.items() if a in keys}
        if len(_TAGS) > 64:
            _TAGS.clear()
        _TAGS[k] = got
    return got


# -- the query ------------------------------------------------------------------------------


def _tag_pred(e, src: Source):
    """A tags-only condition as a predicate over a series' tags; Unsupported otherwise."""
    if isinstance(e, Paren):
        return _tag_pred(e.expr, src)
    if isinstance(e, Binary) and e.op in ("and", "or"):
        a, b = _tag_pred(e.left, src), _tag_pred(e.right, src)
        return (lambda t: a(t) and b(t)) if e.op == "and" else (lambda t: a(t) or b(t))
    if isinstance(e, Binary) and e.op in ("=", "!="):
        left, right = e.left, e.right
        if isinstance(left, Literal):
            left, right = right, left
        if not (isinstance(left, VarRef) and isinstance(right, Literal) and right.kind == "string"):
            raise Unsupported("not a tag comparison")
        if _kind(left, src)[0] != "tag":
            raise Unsupported("not a tag")
        k, v = left.name, right.value
        if e.op == "=":
            return (lambda t: t.get(k) == v) if v else (lambda t: not t.get(k))
        return (lambda t: t.get(k) != v) if v else (lambda t: bool(t.get(k)))
    raise Unsupported("not a tag condition")


def _kind(v: VarRef, src: Source) -> tuple[str, str]:
    """("tag", key) or ("field", key) as the translator reads a reference (`Translator.ref`)."""
    if v.type == "tag":
        if v.name in src.tags:
            return "tag", v.name
        raise Unsupported("unknown tag")
    if v.name in src.fields:
        return "field", v.name
    if v.name in src.tags and v.type is None:
        return "tag", v.name
    raise Unsupported("unknown name")


def _field_filter(e, src: Source, index: dict[str, int]):
    """A field compared with a number: (field index, op, value)."""
    if isinstance(e, Paren):
        return _field_filter(e.expr, src, index)
    flip = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "=": "=", "!=": "!="}
    if not (isinstance(e, Binary) and e.op in flip):
        raise Unsupported("not a comparison")
    left, op, right = e.left, e.op, e.right
    if isinstance(left, Literal) and isinstance(right, VarRef):
        left, op, right = right, flip[op], left
    if not (isinstance(left, VarRef) and isinstance(right, Literal) and right.kind in ("integer", "number")):
        raise Unsupported("not a field compared with a number")
    kind, name = _kind(left, src)
    col = src.fields[name][0] if kind == "field" else None
    if col not in index:
        raise Unsupported("not a numeric field")
    return (index[col], op, right.value)


def _is_tags_only(e, src: Source) -> bool:
    try:
        _tag_pred(e, src)
        return True
    except Unsupported:
        return False


def select(
    store,
    sel: Select,
    sources: list[Source],
    now: int,
    epoch: str | None,
    facts,
    raw_json: bool = False,
    views: tuple = ([], None),
) -> list[dict]:
    """The series of `sel` over `sources` (one per measurement it reads), or Unsupported.
    `facts(db)`: a database's facts as of the statement's catalog version (influxql.py
    `SourceFacts`: its `version`, trace `info` and `tag_keys`, read once for the statement). With
    `raw_json`, each series is JSON text written natively (`RawSeries`), not a dict. `views`:
    (a list the columns' views read are added to, None or the views this run must read: another
    is Unsupported before its columns are brought up to date, influxql.py `handle`)."""
    if any(isinstance(s, Subquery) for s in sel.sources):
        raise Unsupported("subquery")
    if sel.fill not in ("null", "none"):
        raise Unsupported(f"fill({sel.fill})")
    if zone_name(sel.tz) is not None:
        raise Unsupported("tz(): windows and times of a zone")
    series: list[dict] = []
    for src in sources:
        series += _source(store, sel, src, now, epoch, facts, raw_json, views)
    return series


def _outputs(fields: list, src: Source, index: dict[str, int]) -> list[tuple[str, Any]]:
    """Per output column: ("field", field index), ("tag", key) or (function, field index)."""
    outs: list[tuple[str, Any]] = []
    for f in fields:
        e = f.expr
        if isinstance(e, Call):
            if e.name not in AGGS or len(e.args) != 1 or not isinstance(e.args[0], VarRef):
                raise Unsupported(f"{e.name}()")
            kind, name = _kind(e.args[0], src)
            if kind != "field" or src.fields[name][0] not in index:
                raise Unsupported("a call of a tag or a non-numeric field")
            outs.append((e.name, index[src.fields[name][0]]))
        elif isinstance(e, VarRef):
            kind, name = _kind(e, src)
            if kind == "field":
                if src.fields[name][0] not in index:
                    raise Unsupported("a non-numeric field")
                outs.append(("field", index[src.fields[name][0]]))
            else:
                outs.append(("tag", name))
        else:
            raise Unsupported("an expression")
    return outs


PLANS_KEPT = 256  # statements' plans kept per database's facts (all let go when full)


@dataclass(frozen=True)
class _Plan:
    """What a SELECT over one source is before its columns are read: the translator's names,
    outputs, conditions and range over one measurement's columns (`cols`: the field indexes are
    theirs). Kept with the database's facts (influxql.py `SourceFacts.plans`, let go when the
    catalog's version or the writer's types move) for a kept statement (`parse_kept`) whose
    conditions do not read `now()`: the same text sent again runs from here (not its answer:
    the columns, the series groups and the loops are the current cut's). In-process, a statement
    made each time -> kept, medians at load 17-18: TSBS lastpoint 175 -> 133 us, high-cpu-1 129
    -> 65, single-groupby-1-1-1 76 -> 54 (the translator, the conditions sorted into tags and
    fields, the outputs, the names)."""

    cols: Any
    names: list[str]
    outs: list
    present: list[int]
    filters: list
    calls: list
    tag_preds: list
    tag_desc: tuple  # the tags-only conditions as text (the series groups' memo key)
    tag_keys: tuple  # the source's tag keys, sorted
    gt: list[str]
    dim: Any
    range: Any


def _translator(sel: Select, src: Source, now: int) -> Translator:
    try:
        tr = Translator(sel, src, now)
        tr.fields = tr.expand_fields()
    except QueryError as e:
        raise Unsupported(str(e)) from None
    if not tr.fields:
        raise Unsupported("no fields")
    return tr


def _plan(sel: Select, src: Source, tr: Translator, cols: _Columns, facts) -> _Plan:
    """`sel` over `src` as `_Plan`, kept in `facts.plans` unless it reads `now()`."""
    fields = tr.fields
    index = {name: i for i, name in enumerate(cols.fields)}  # column name -> field index
    # WHERE: tags-only conjuncts pick series, field comparisons pick rows
    tag_preds, tag_conds, filters = [], [], []
    for c in tr.conds:
        if _is_tags_only(c, src):
            tag_preds.append(_tag_pred(c, src))
            tag_conds.append(c)
        else:
            filters.append(_field_filter(c, src, index))
    calls = [f.expr for f in fields if isinstance(f.expr, Call)]
    if calls and len(calls) != len(fields):
        raise Unsupported("calls beside other fields")
    names = _unique([field_name(f) for f in fields])
    outs = _outputs(fields, src, index)
    present = sorted({i for k, i in outs if k != "tag"})
    if not present:
        raise Unsupported("no field present")
    if not calls and tr.dim is not None:
        raise Unsupported("GROUP BY time without a function")
    tag_desc = tuple(describe(c) for c in tag_conds)
    plan = _Plan(
        cols,
        names,
        outs,
        present,
        filters,
        calls,
        tag_preds,
        tag_desc,
        tuple(sorted(src.tags)),
        tr.group_tags,
        tr.dim,
        tr.range,
    )
    if not _mentions_now(sel.condition):
        if len(facts.plans) >= PLANS_KEPT:
            facts.plans.clear()
        facts.plans[(id(sel), id(src))] = (sel, src, plan)  # (sel and src kept beside their ids)
    return plan


def _mentions_now(e) -> bool:
    """Whether an expression calls `now()` anywhere (its value is the statement's time)."""
    if isinstance(e, Call) and e.name == "now":
        return True
    if isinstance(e, (list, tuple)):
        return any(_mentions_now(x) for x in e)
    if dataclasses.is_dataclass(e) and not isinstance(e, type):
        return any(_mentions_now(getattr(e, f.name)) for f in dataclasses.fields(e))
    return False


def _source(
    store, sel: Select, src: Source, now: int, epoch: str | None, facts, raw_json: bool, views: tuple = ([], None)
) -> list[dict]:
    import pyarrow as pa

    if src.db is None or src.type_name is None:
        raise Unsupported("not a stored measurement")
    f = facts(src.db)
    info = f.info
    kept = f.plans.get((id(sel), id(src)))
    plan = kept[2] if kept is not None and kept[0] is sel and kept[1] is src else None
    seen, expected = views
    if expected is not None and plan is None:
        raise Unsupported("no kept plan")
    if plan is None:
        tr = _translator(sel, src, now)  # (Unsupported before any columns are made)
        cols = cache_of(store).columns(info, src.type_name)
        plan = _plan(sel, src, tr, cols, f)
    else:
        cols = cache_of(store).columns(info, src.type_name, current_only=expected is not None)
        if expected is not None and (plan.cols is not cols or all(v is not cols.view for v in expected)):
            raise Unsupported("not the columns of the last run")
        if plan.cols is not cols:  # (the type's columns changed: names and fields indexed anew)
            plan = _plan(sel, src, _translator(sel, src, now), cols, f)
    seen.append(cols.view)
    names, outs, present, filters, calls, tag_preds = (
        plan.names,
        plan.outs,
        plan.present,
        plan.filters,
        plan.calls,
        plan.tag_preds,
    )
    # the series: producers of the measurement whose tags pass, grouped by the GROUP BY tags
    tags_of = producer_tags(store, info, f.tag_keys, f.version)
    gt = plan.gt
    # (the same conditions and GROUP BY over the same series and tags: the groups of before)
    memo_key = ("groups", id(tags_of), plan.tag_desc, tuple(gt), plan.tag_keys)
    view = cols.view
    got = view.memo.get(memo_key)
    if got is None:
        groups: dict[tuple, list[int]] = {}
        for p in view.producers:
            t = tags_of.get(p, {})
            if all(pred(t) for pred in tag_preds):
                groups.setdefault(tuple(t.get(k) or "" for k in gt), []).append(p)
        keys = sorted(groups)

        def series_key(p: int) -> str:  # (the other tags, keys sorted: raw points of one time by it)
            t = tags_of.get(p, {})
            return ",".join(f"{k}={t[k]}" for k in sorted(src.tags) if k not in gt and t.get(k))

        got = view.memo[memo_key] = (keys, [sorted(groups[k], key=series_key) for k in keys], tags_of)
    keys, group_list = got[0], got[1]
    if sel.descending:  # ORDER BY time DESC lists the series in reverse order too (InfluxDB)
        keys, group_list = keys[::-1], group_list[::-1]
    rng = plan.range
    lo = I64_MIN if rng.lo is None else rng.lo
    parts = view.parts
    selection = (group_list, lo, I64_MAX if rng.hi is None else rng.hi, filters, present)
    opening_key = ("openings", memo_key, sel.descending, src.name, tuple(names))  # (`_openings`)
    if calls:
        grid_hi = rng.hi if rng.hi is not None else now + 1
        dim = plan.dim
        one_selector = len(calls) == 1 and calls[0].name in SELECTORS and dim is None
        json_args = ()
        if raw_json:  # (whole series as JSON text, written in Rust: `_openings`)
            json_args = (_openings(view, opening_key, src.name, gt, keys, names), EPOCH_DIVISORS[epoch] if epoch else 0)
        got = _core.influx_aggregate(
            parts,
            selection,
            outs,
            cols.ints,
            dim.interval if dim else 0,
            dim.offset if dim else 0,
            sel.fill == "none",
            rng.lo if rng.lo is not None else 0,
            one_selector,
            sel.descending,
            sel.offset,
            sel.limit,
            MAX_BUCKETS,
            grid_hi,
            *json_args,
        )
        if got is None:
            raise Unsupported("more windows than max-select-buckets")
        if raw_json:
            return [RawSeries(t) for t in got]
        group, times, _prod, values = got
    elif raw_json:
        prefixes = _openings(view, opening_key, src.name, gt, keys, names)
        return _raw_json_series(view, selection, prefixes, outs, cols.ints, sel, epoch, tags_of)
    else:
        fidx = [i for k, i in outs if k == "field"]
        group, times, prod, fvalues = _core.influx_raw(
            parts, selection, fidx, cols.ints, sel.descending, sel.offset, sel.limit
        )
        values, it = [], iter(fvalues)
        pos = None
        # A small answer's tags by Python's dicts: an Arrow kernel lets the interpreter lock go
        # and getting it back waits for the server's other threads (TSBS lastpoint's 100 rows
        # and 10 tags served at load 6-10: 2-12 ms in this function with `take`, 0.7-1.7 without).
        small = len(prod) <= SMALL_ANSWER_ROWS
        prods = prod.to_pylist() if small else None
        for k, key in outs:
            if k == "field":
                values.append(next(it))
                continue
            if small:
                values.append(pa.array([tags_of.get(p, {}).get(key) for p in prods], pa.string()))
                continue
            if pos is None:
                import pyarrow.compute as pc

                pos = pc.index_in(prod, value_set=_memo(view, ("ids",), lambda: pa.array(view.producers, pa.int32())))
            # (tags_of kept beside its id: the id names no other dict while the entry lives)
            by_producer, _ = _memo(
                view,
                ("tag", id(tags_of), key),
                lambda key=key: (
                    pa.array([tags_of.get(p, {}).get(key) for p in view.producers], pa.string()),
                    tags_of,
                ),
            )
            values.append(by_producer.take(pos))
    table = {f"t{j}": pa.array([k[j] for k in keys], pa.string()).take(group) for j in range(len(gt))}
    table["time"] = times
    for i, v in enumerate(values):
        table[f"v{i}"] = v
    return answer_series(Plan("", src.name, gt, names), pa.table(table), epoch)


def _memo(view: _View, key: tuple, make):
    got = view.memo.get(key)
    if got is None:
        got = view.memo[key] = make()
    return got


def _openings(
    view: _View, opening_key: tuple, name: str, gt: list[str], keys: list[tuple], names: list[str]
) -> list[str]:
    """Each group's series object as JSON text up to its `"values":` (`name`, tags, columns), kept
    with the columns' view under `opening_key` (the groups' memo key, which holds the GROUP BY
    tags, with the order, the measurement and the names)."""

    def make() -> list[str]:
        out = []
        for key in keys:
            s: dict[str, Any] = {"name": name}
            if gt:
                s["tags"] = dict(zip(gt, key))
            s["columns"] = ["time", *names]
            s["values"] = 0
            out.append(json.dumps(s)[: -len("0}")])
        return out

    return _memo(view, opening_key, make)


def _raw_json_series(view: _View, selection, prefixes, outs, ints, sel, epoch, tags_of) -> list:
    """The series of a raw query, each whole as JSON text (`RawSeries`) written by
    `_core.influx_raw_json`: no Arrow crossing and no Python object per row or series. What
    each producer's tags and each group's series opening are as JSON is kept with the columns'
    view (`_memo`), so a repeated query encodes none of it again. TSBS high-cpu-all (40,000
    rows of 21 columns, 6-7 MB of JSON), in-process, median of 30 at load 2-2.6: 85 ms to run
    and 57 ms to encode as lists; 29 ms and 2.1 ms with the values as text written in Rust."""
    fidx, louts, tag_text = [], [], []
    for k, i in outs:
        if k == "field":
            louts.append((False, len(fidx)))
            fidx.append(i)
            continue
        # (tags_of kept beside its id: the id names no other dict while the entry lives)
        text, _ = _memo(
            view,
            ("tag json", id(tags_of), i),
            lambda key=i: ([json.dumps(tags_of.get(p, {}).get(key)) for p in view.producers], tags_of),
        )
        louts.append((True, len(tag_text)))
        tag_text.append(text)
    texts = _core.influx_raw_json(
        view.parts,
        selection,
        fidx,
        ints,
        sel.descending,
        sel.offset,
        sel.limit,
        EPOCH_DIVISORS[epoch] if epoch else 0,
        louts,
        view.producers,
        tag_text,
        prefixes,
    )
    return [RawSeries(t) for t in texts]
