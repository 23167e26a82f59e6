"""SQL over a store: DuckDB views built from the catalog.

Owns the mapping from catalog to SQL names:
  "<trace>".<event_type>  every column of that type (segments + unflushed tail: the writer's
                          own in its process, the uncovered WAL records read from disk in others)
  "<trace>".events        common columns of every type, plus `type`
  th.traces, th.event_types, th.producers, th.results, th.segments, th.metadata
Views are rebuilt only when the catalog version or a writer's tail changes,
and only for traces whose name the SQL mentions (a store may hold thousands
of traces; binding a view reads Parquet footers).

Queries of this process run on its one connection under the engine's lock; the server's run
side by side, each on a cursor of its own (`snapshot`), confined by `sandbox`. A thread whose kept
transaction still answers its query (nothing it reads changed: `_kept`) takes no lock at all:
20 embedded clients of one process queued on it one query at a time. Such a query reads the
catalog once (its version, without letting go of the interpreter's lock) and stats the trace's
WAL files: each call that lets go of that lock costs 20 clients wall time (`_kept`: QoS Q1.2
80.6 -> 58.3 ms per client, DuckDB's own file 73.6).

A type whose view is its read cache's table column for column (store/readcache.py) is read from
that table: the query's `"<trace>".<type>` names the table before it is bound (`direct_sql`),
since DuckDB binds a view's query anew at every run (QoS Q1.1, 1,000 rows x 64 columns: 1.98 ms
of CPU per run through the view, 1.61 from the table, DuckDB's own file 2.59).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import lazy
from ..errors import BadInput
from ..schema import EventType
from . import lastrows
from .conform import align

# Imported on first use (lazy.py): listing, searching and counting traces need none.
duckdb = lazy.module("duckdb")
pa = lazy.module("pyarrow")
pc = lazy.module("pyarrow.compute")

if TYPE_CHECKING:
    from .catalog import Catalog

# Names DuckDB gives a schema or catalog of its own (`main`, `temp`, `system`: the database's
# schemas and catalogs; `memory`: the in-memory database's name; `information_schema`,
# `pg_catalog`: its views of itself) and `th`, the catalog's views: a trace is a schema, so a trace
# of one of these names took over (th: the catalog's views for every SQL user) or broke every
# query mentioning the word. Compared ignoring case, as SQL compares them. New traces may not take
# them (`store.check_new_trace_name`); one of an older store gets no views (`refresh`).
RESERVED_TRACE_NAMES = ("th", "main", "temp", "system", "memory", "information_schema", "pg_catalog")
RESERVED_RULE = "a name other than " + ", ".join(RESERVED_TRACE_NAMES) + " (any case): SQL names its own schemas so"

DUCK_TYPES = {"int64": "BIGINT", "int32": "INTEGER", "float64": "DOUBLE", "bool": "BOOLEAN", "string": "VARCHAR"}


# The catalog as SQL: each th.<name> is one catalog query and its typed output columns (Arrow
# type names: pyarrow is imported only when a th.* table is made, see `_th_type`).
_LIVE = "t.state = 'live'"
TH_TABLES: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "traces": (  # {incomplete}: the column, or NULL in a catalog made before it (read-only)
        "SELECT id, name, format, description, created, ts_min, ts_max, event_count, bytes,"
        " CASE WHEN {incomplete} IS NULL THEN 'complete' ELSE 'incomplete' END, {incomplete} FROM traces t"
        f" WHERE {_LIVE} ORDER BY name",
        [
            ("id", "int64"),
            ("name", "string"),
            ("format", "string"),
            ("description", "string"),
            ("created", "float64"),
            ("ts_min", "int64"),
            ("ts_max", "int64"),
            ("event_count", "int64"),
            ("bytes", "int64"),
            ("state", "string"),
            ("state_reason", "string"),
        ],
    ),
    "event_types": (
        # a format's types (trace NULL), then the types of traces that own theirs (line protocol)
        "SELECT format, name, kind, params, doc, NULL, id FROM event_types UNION ALL"
        " SELECT t.format, e.name, e.kind, e.params, e.doc, t.name, e.id FROM trace_event_types e"
        f" JOIN traces t ON t.id = e.trace_id WHERE {_LIVE} ORDER BY 6, 1, 7",
        [
            ("format", "string"),
            ("name", "string"),
            ("kind", "string"),
            ("params", "string"),
            ("doc", "string"),
            ("trace", "string"),
        ],
    ),
    "producers": (
        "SELECT t.name, p.id, p.parent, p.kind, p.name, p.attrs FROM producers p JOIN traces t ON t.id = p.trace_id"
        f" WHERE {_LIVE} ORDER BY t.name, p.id",
        [
            ("trace", "string"),
            ("id", "int32"),
            ("parent", "int32"),
            ("kind", "string"),
            ("name", "string"),
            ("attrs", "string"),
        ],
    ),
    "results": (
        "SELECT r.id, r.kind, r.name, r.tool, r.params, r.created, (SELECT json_group_array(t.name)"
        " FROM result_traces rt JOIN traces t ON t.id = rt.trace_id WHERE rt.result_id = r.id) FROM results r"
        " ORDER BY r.id",
        [
            ("id", "int64"),
            ("kind", "string"),
            ("name", "string"),
            ("tool", "string"),
            ("params", "string"),
            ("created", "float64"),
            ("traces", "list<string>"),
        ],
    ),
    "segments": (
        "SELECT t.name, s.id, s.event_type, s.path, s.rows, s.bytes, s.ts_min, s.ts_max, s.level"
        f" FROM segments s JOIN traces t ON t.id = s.trace_id WHERE s.retired IS NULL AND {_LIVE}",
        [
            ("trace", "string"),
            ("id", "int64"),
            ("event_type", "string"),
            ("path", "string"),
            ("rows", "int64"),
            ("bytes", "int64"),
            ("ts_min", "int64"),
            ("ts_max", "int64"),
            ("level", "int64"),
        ],
    ),
    "metadata": (
        f"SELECT t.name, m.key, m.value FROM trace_metadata m JOIN traces t ON t.id = m.trace_id WHERE {_LIVE}",
        [("trace", "string"), ("key", "string"), ("value", "string")],
    ),
}


def _th_type(name: str) -> pa.DataType:
    return pa.list_(pa.string()) if name == "list<string>" else pa.type_for_alias(name)


def _th_value(v, typ: str):
    # Lists arrive from SQLite as JSON text (json_group_array).
    return json.loads(v) if typ == "list<string>" and isinstance(v, str) else v


def qident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def qstr(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def th_tables(catalog: Catalog) -> dict[str, pa.Table]:
    """Every th.* table read from a catalog (inside one read transaction for a consistent set)."""
    out = {}
    for name, (sql, columns) in TH_TABLES.items():
        if name == "event_types" and not catalog.per_trace_types:
            sql = "SELECT format, name, kind, params, doc, NULL FROM event_types ORDER BY format, id"  # older store
        rows = catalog.db.execute(sql.replace("{incomplete}", catalog.incomplete_col)).fetchall()
        out[name] = pa.table(
            {col: pa.array([_th_value(r[i], typ) for r in rows], _th_type(typ)) for i, (col, typ) in enumerate(columns)}
        )
    return out


def _select(cols, present: Iterable[str], src: str) -> str:
    present = set(present)
    parts = []
    for c in cols:
        if c.name in present:
            parts.append(qident(c.name))
        else:
            parts.append(f"CAST(NULL AS {DUCK_TYPES[c.type]}) AS {qident(c.name)}")
    return f"SELECT {', '.join(parts)} FROM {src}"


def segment_damage(root, seg) -> str | None:
    """What is visibly wrong with a registered segment's file (a damage mark a check left in the
    catalog, the file missing, its size not the registered one, no Parquet footer), else None.
    A stat and a 4-byte read: flipped bytes inside it are for `verify` and the scrub to find."""
    if seg.damaged:
        return seg.damaged
    path = Path(root) / seg.path
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size != seg.bytes:
                return f"{size:,} bytes, the catalog registered {seg.bytes:,}"
            f.seek(max(0, size - 4))
            if f.read(4) != b"PAR1":
                return "no Parquet footer"
    except FileNotFoundError:
        return "the file is missing"
    except OSError as e:
        return f"unreadable: {e.strerror}"
    return None


def damaged_view_sql(et: EventType, trace: str, damaged: list[tuple[str, str]]) -> str:
    """The view body of a type whose segments include damaged ones (path, what is wrong): its
    columns, typed, and an error naming the files when a query reads it (DuckDB drops a branch
    a filter rules out, so `"<trace>".events WHERE type = 'other'` still answers)."""
    what = "; ".join(f"{p} ({why})" for p, why in damaged[:3]) + (
        f"; and {len(damaged) - 3} more" if len(damaged) > 3 else ""
    )
    msg = (
        f"event type {et.name} of trace {trace!r} cannot be read: damaged segment(s) {what}. `tracehouse verify` "
        "says what is intact, `tracehouse repair` sets the damaged files aside (deleting nothing); the trace's "
        "other event types are readable"
    )
    sel = ", ".join(f"CAST(NULL AS {DUCK_TYPES[c.type]}) AS {qident(c.name)}" for c in et.columns)
    return f"SELECT {sel} FROM range(1) WHERE error({qstr(msg)}) IS NULL"


def type_view_sql(
    et: EventType, files: list[tuple[str, Iterable[str]]], tail: tuple[str, Iterable[str]] | None = None
) -> str:
    """The DuckDB view body of one event type: its segment files (path, columns in the
    file) read by name, then the registered tail table (name, columns); a column a file
    predates reads null. No files and no tail: no rows, typed."""
    cols = et.columns
    selects = []
    if files:
        present: set[str] = set()
        same = True
        for _path, fcols in files:
            present.update(fcols)
            same = same and list(fcols) == [c.name for c in cols]
        paths = "[" + ", ".join(qstr(p) for p, _ in files) + "]"
        src = f"read_parquet({paths}{'' if same else ', union_by_name = true'})"
        selects.append(_select(cols, present, src))
    if tail is not None:
        selects.append(_select(cols, tail[1], tail[0]))
    if not selects:
        sel = ", ".join(f"CAST(NULL AS {DUCK_TYPES[c.type]}) AS {qident(c.name)}" for c in cols)
        return f"SELECT {sel} WHERE false"
    if len(selects) == 1:
        return selects[0]
    # Segments and tail: a constant first, dropped outside (see `events_view_sql`: a count
    # then reads no column of either side).
    names = ", ".join(qident(c.name) for c in cols)
    return (
        f"SELECT {names} FROM (\n"
        + "\nUNION ALL\n".join(s.replace("SELECT ", "SELECT 0 AS _part, ", 1) for s in selects)
        + "\n)"
    )


# -- tags as columns ---------------------------------------------------------------------------
#
# A line-protocol bucket's series are its producers (kind `tags`, one per tag set, the tags as
# their JSON attributes); a trace whose metadata says `tag_columns=attrs` (seed 003's QoS trace:
# the 13 measurement-id parameters) has every producer's attributes as its tags. Each type view
# of such a trace carries every tag key as a column, after `producer`, NULL where a series lacks
# the key: `SELECT hostname, max(usage_user) FROM "benchmark".cpu GROUP BY hostname`.
#
# The tags are one small DuckDB table per trace (`_tags."<trace>"`: producer + one column per
# key, a row per series), LEFT JOINed in the view. A filter on a tag is then a filter on that
# table, and DuckDB's join filter pushdown hands the matching producer ids (their min/max) to the
# Parquet scan, whose row-group statistics on `producer` skip the other series in producer-ordered
# segments (`segment_order=producer`). Measured on seed 003's QoS set (2,032,000 rows in 2
# segments, 556 series; best of 5, load 8-11): `customer_id = 60` through the view 10.7 ms
# against 14.4 ms for `producer = 60` on the bare files; the join costs a query that uses no tag
# 4-8 ms per 2M rows scanned (`sum(mos)` 11.2 -> 19.4 ms). DuckDB keeps the join even then (no
# join elimination), so a trace without tags gets no join. A scalar lookup instead (a list of
# each key's values indexed by producer) cost nothing when unused but could not be pushed into
# the scan: a filter on it read every row group.

TAG_TABLES = "_tags"
TAG_KIND = "tags"  # producers made from line-protocol tag sets (server/ingest.py)
TAG_COLUMNS_META = "tag_columns"  # trace metadata: "attrs" = every producer's attributes are tags


def tag_keys(producers: list[dict], metadata: dict) -> dict[str, str]:
    """The tag keys of a trace and their DuckDB types (VARCHAR unless every value is a bool, an
    integer or a number), in key order; empty for a trace without tags."""
    every = metadata.get(TAG_COLUMNS_META) == "attrs"
    kinds: dict[str, set] = {}
    for p in producers:
        if not (every or p["kind"] == TAG_KIND):
            continue
        for k, v in (p["attrs"] or {}).items():
            kinds.setdefault(str(k), set()).add(type(v))
    out = {}
    for k in sorted(kinds):
        ts = kinds[k] - {type(None)}
        if ts == {bool}:
            out[k] = "BOOLEAN"
        elif ts and ts <= {int}:
            out[k] = "BIGINT"
        elif ts and ts <= {int, float}:
            out[k] = "DOUBLE"
        else:
            out[k] = "VARCHAR"
    return out


def tag_table_column(i: int) -> str:
    """The column of `tag_table` holding the `i`-th tag key's values. Positional, not the key:
    a tag may be named `producer` (the join key) or hold characters another engine quotes
    differently (Spark's backticks)."""
    return f"t{i}"


def tag_table(producers: list[dict], metadata: dict, keys: dict[str, str]) -> pa.Table:
    """One row per series: `producer` and each tag key's value (None where it lacks the key), the
    keys in `keys`' order under `tag_table_column(i)`."""
    every = metadata.get(TAG_COLUMNS_META) == "attrs"
    rows = [p for p in producers if every or p["kind"] == TAG_KIND]
    arrow = {"VARCHAR": pa.string(), "BIGINT": pa.int64(), "DOUBLE": pa.float64(), "BOOLEAN": pa.bool_()}
    cols = {"producer": pa.array([int(p["id"]) for p in rows], pa.int32())}
    for i, (k, typ) in enumerate(keys.items()):
        vals = [(p["attrs"] or {}).get(k) for p in rows]
        if typ == "VARCHAR":
            vals = [v if v is None or isinstance(v, str) else json.dumps(v) for v in vals]
        cols[tag_table_column(i)] = pa.array(vals, arrow[typ])
    return pa.table(cols)


def trace_tags(th_producers: pa.Table, trace: str, metadata: dict) -> tuple[dict[str, str], pa.Table | None]:
    """`tag_keys` and `tag_table` of one trace from a `th.producers` table (the engines over
    several stores and Spark build their views from a catalog snapshot's th.* tables)."""
    t = th_producers.filter(pc.equal(th_producers.column("trace"), trace))
    producers = [
        {"id": r["id"], "kind": r["kind"], "attrs": json.loads(r["attrs"] or "{}")}
        for r in t.select(["id", "kind", "attrs"]).to_pylist()
    ]
    keys = tag_keys(producers, metadata)
    return keys, (tag_table(producers, metadata, keys) if keys else None)


def tag_column_names(et: EventType, keys: Iterable[str]) -> dict[str, str]:
    """Each tag key's column name in `et`'s view: the key, or with `_tag` appended (again while
    taken) when the type has a column of that name (a field named like a tag, or `ts`)."""
    taken = {c.name for c in et.columns}
    out = {}
    for k in keys:
        name = k
        while name in taken:
            name += "_tag"
        taken.add(name)
        out[k] = name
    return out


def tag_columns_sql(et: EventType, keys: Iterable[str]) -> list[str]:
    """The tag columns of `et`'s view, read from a `tag_table` joined as `t`."""
    return [f"t.{tag_table_column(i)} AS {qident(n)}" for i, n in enumerate(tag_column_names(et, keys).values())]


def tagged_view_sql(et: EventType, body: str, tag_ref: str, keys: Iterable[str]) -> str:
    """`body` (a type's view) with the tag columns of `tag_ref` joined by producer, after `producer`."""
    parts = []
    for c in et.columns:
        parts.append(f"b.{qident(c.name)}")
        if c.name == "producer":
            parts += tag_columns_sql(et, keys)
    return f"SELECT {', '.join(parts)} FROM ({body}) b LEFT JOIN {tag_ref} t ON t.producer = b.producer"


def events_view_sql(schema: str, types: dict[str, EventType]) -> str:
    """The body of `<schema>.events`: the common columns of every type's view, plus `type`.

    `type` (a constant per branch) is the UNION ALL's first column and the outer SELECT puts it
    last: a query that needs no column of the branches (`count(*)`) keeps only the first one,
    so the Parquet scans read none and count from the footers. With `ts` first, DuckDB read
    the whole `ts` column: 0.26 s for a count over 100M events instead of a few ms."""
    selects = []
    for name, et in types.items():
        dur = "dur" if et.kind == "span" else "CAST(NULL AS BIGINT) AS dur"
        selects.append(f"SELECT {qstr(name)} AS type, ts, producer, seq, {dur} FROM {schema}.{qident(name)}")
    if not selects:
        selects = [
            "SELECT CAST(NULL AS VARCHAR) type, CAST(NULL AS BIGINT) ts, CAST(NULL AS INTEGER) producer,"
            " CAST(NULL AS BIGINT) seq, CAST(NULL AS BIGINT) dur WHERE false"
        ]
    return "SELECT ts, producer, seq, dur, type FROM (\n" + "\nUNION ALL\n".join(selects) + "\n)"


class QueryEngine:
    def __init__(self, store) -> None:
        self.store = store  # the Store that owns this engine (not imported: store.py imports this module)
        self.con = duckdb.connect(":memory:")
        # The Parquet footers the views read are cached across queries instead of read by each:
        # segments are immutable, and DuckDB reads a footer again when its file changed since it
        # was cached (a kept-last-rows file written anew under its name after retention). A query
        # over the 6 segments of 864,000 TSBS rows whose time range pruned them all, in-process at
        # load 16, two rounds: 2.3-2.5 ms against 2.6-3.5 ms.
        self.con.execute("SET parquet_metadata_cache = true")
        self.lock = threading.RLock()
        self._catalog_version = -1
        self._live_traces: list = []  # the catalog's live traces at `_catalog_version`
        self._th_version = -1
        self._trace_sigs: dict[str, Any] = {}  # trace name -> signature of its views
        # trace name -> what its views are made of apart from the tail's rows (`_refresh_trace`)
        self._trace_shapes: dict[str, Any] = {}
        # trace name -> its types whose `_last` view reads the kept last rows (`_last_views`)
        self._last_fast: dict[str, set[str]] = {}
        # trace name -> (signature of its producers, its tag keys and types): `_refresh_tags`
        self._tags: dict[str, tuple[Any, dict[str, str]]] = {}
        # read-cache file -> the name it is attached under (`_cached_select`)
        self._attached: dict[str, str] = {}
        # (trace, type), lower-cased -> the attached read cache whose table of that name is the
        # type's view, column for column (`direct_sql`); replaced, never changed in place
        self._direct: dict[tuple[str, str], str] = {}
        # (trace id, type) -> (the type's columns, the tail's batches, their aligned table):
        # see `_tail_table`
        self._tail_cache: dict[tuple[int, str], tuple[tuple, list, pa.Table]] = {}
        # Arrow tables the views read, by registered name: name -> (trace name or None for th.*, table).
        # A cursor does not see its connection's registrations; `snapshot` registers them on it.
        self._sources: dict[str, tuple[str | None, pa.Table]] = {}
        # `snapshot`'s cursor of each thread (the server's query workers), kept between queries
        # with the th.* tables registered on it: see `snapshot`.
        self._local = threading.local()
        self._generation = 0  # bumped by every statement that changes the views (`_ddl`)
        self._closed = False

    def close(self) -> None:
        """Close the connection; a query still running on a cursor of it (a server's UI thread at
        shutdown) is interrupted first, and a connection DuckDB says is busy is left to the
        process's exit, not raised: closing the store must go on to release its writer lock."""
        self._closed = True
        try:
            self.con.interrupt()
            self.con.close()
        except duckdb.Error as e:
            import logging

            logging.getLogger("tracehouse.store").warning("SQL engine not closed: %s", error_line(e))

    def _ddl(self, sql: str, params: list | None = None):
        """Run a statement that changes the views (or what they read) on the engine's connection:
        a cursor's open transaction from before it is not reused (`snapshot`)."""
        self._generation += 1
        return self.con.execute(sql, params)

    def _register(self, name: str, trace: str | None, table: pa.Table) -> None:
        self.con.register(name, table)
        self._sources[name] = (trace, table)

    def _unregister(self, name: str) -> None:
        self.con.unregister(name)
        del self._sources[name]

    # -- view maintenance ----------------------------------------------------------

    def _refresh_th(self) -> None:
        self._ddl("CREATE SCHEMA IF NOT EXISTS th")
        for name, table in th_tables(self.store.catalog).items():
            reg = f"_th_{name}"
            self._register(reg, None, table)
            self._ddl(f"CREATE OR REPLACE VIEW th.{name} AS SELECT * FROM {reg}")

    def _type_sources(self, trace_name: str, trace_id: int, et: EventType, segs, tail) -> str:
        files = [(str(self.store.path / s.path), s.columns) for s in segs]
        tail_src = None
        if tail is not None:
            reg = f"_tail_{trace_id}_{et.name}"
            self._register(reg, trace_name, tail)
            tail_src = (reg, tail.column_names)
        return type_view_sql(et, files, tail_src)

    def _tail_table(self, trace_id: int, et: EventType, batches: list) -> tuple[pa.Table | None, bool]:
        """The unflushed rows of a type as one table with every column of `et` (None: none), and
        whether it differs from the last call's.

        Incremental: between two polls of a live trace its tail only grows at the end (appends)
        and loses whole batches at the front (a checkpoint registered them), and the batches are
        the same objects (the writer's tail; the records `wal.read_uncovered` keeps). So only
        the new batches are aligned; the rows that stay are a slice of the last table. Aligning
        the whole tail on every poll cost a reader of a live 10M-event stream ~6 ms a poll
        (now ~1.4 ms, cProfile'd)."""
        key = (trace_id, et.name)
        if not batches:
            self._tail_cache.pop(key, None)
            return None, True
        cols = [c.name for c in et.columns]
        layout = tuple((c.name, c.type) for c in et.columns)  # a widened type aligns anew
        prev = self._tail_cache.get(key)
        table = None
        if prev is not None and prev[0] == layout:
            _layout, old, old_table = prev
            first = next((i for i, b in enumerate(old) if b is batches[0]), None)
            keep = len(old) - first if first is not None else 0
            if keep and keep <= len(batches) and all(a is b for a, b in zip(old[first:], batches)):
                if first == 0 and keep == len(batches):
                    return old_table, False
                dropped = sum(b.num_rows for b in old[:first])
                parts = [old_table.slice(dropped)]
                if len(batches) > keep:
                    parts.append(align(batches[keep:], et, cols))
                table = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
        if table is None:
            table = align(batches, et, cols)
        self._tail_cache[key] = (layout, list(batches), table)
        return table, True

    def _refresh_trace(self, info) -> None:
        try:
            self._refresh_trace_views(info)
        except BaseException:
            # Half done (a register or a view failed): forget this trace's cached tails and view
            # shape, else a tail cached here but never registered would count as unchanged and
            # the view would keep serving the older, shorter one. The next look rebuilds whole.
            for key in [k for k in self._tail_cache if k[0] == info.id]:
                del self._tail_cache[key]
            self._trace_shapes.pop(info.name, None)
            self._trace_sigs.pop(info.name, None)
            raise

    def _refresh_trace_views(self, info) -> None:
        cut = self.store.cut(info)  # segments + unflushed tail, one consistent cut (scan.Cut)
        if self._trace_sigs.get(info.name) == cut.signature:
            return
        types, segs = cut.types, cut.segments
        tails = {}
        changed = set()
        for name, et in types.items():
            table, differs = self._tail_table(info.id, et, cut.tails.get(name) or [])
            if table is not None:
                tails[name] = table
            if differs:
                changed.add(name)
        # What the views' SQL depends on: the catalog's state (segments, type versions) and which
        # types read a tail. While only the tails' rows change (a live trace between two
        # checkpoints: every poll of a reader), the views stay and only the changed tail tables
        # are registered again under their names. bench ingest's reader (a poll each 50 ms):
        # rebuilding every view each poll cost 18 ms of its ~68 ms a poll. With this, the
        # incremental tail and wal.read_wal's decoding, one of its polls cost 84-97 ms of CPU
        # against 136-148 ms before (10M events streamed beside it, old and new code alternating,
        # load 4.1-4.4); over 10 alternating `bench ingest` runs (load 4.4-5.5) its CPU went
        # 1.79 -> 1.54 s (start-up included), its polls 7 -> 9 and its lag 0.83 -> 0.63 s (medians).
        man = self.store.read_cache_manifest(info)  # store/readcache.py, or None
        last_files = self._last_files(info, types, segs)
        shape = (
            cut.signature[0],
            tuple((n, tuple(c.name for c in et.columns)) for n, et in types.items()),
            tuple(s.id for s in segs),
            tuple(sorted(tails)),
            man and man["file"],
            tuple(sorted(last_files.items())),
        )
        if self._trace_shapes.get(info.name) == shape:
            for name in changed:
                if name in tails:
                    self._register(f"_tail_{info.id}_{name}", info.name, tails[name])
            self._trace_sigs[info.name] = cut.signature
            return
        by_type: dict[str, list] = {}
        for s in segs:
            by_type.setdefault(s.event_type, []).append(s)
        schema = qident(info.name)
        # Start from an empty schema: views of a type this trace no longer has (the name was
        # deleted and reused by a trace of another format) would still answer with old rows.
        self._ddl(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        self._ddl(f"CREATE SCHEMA {schema}")
        # ... and let go of its old tail tables (a flushed tail would stay pinned in memory); a
        # tail still there is registered again below, over the old one (an unregister costs
        # DuckDB ~4 ms).
        prefix = f"_tail_{info.id}_"
        keep = {f"{prefix}{name}" for name in tails}
        for reg in [r for r in self._sources if r.startswith(prefix) and r not in keep]:
            self._unregister(reg)
        for key in [k for k in self._tail_cache if k[0] == info.id and k[1] not in types]:
            del self._tail_cache[key]
        keys = self._refresh_tags(info)
        root = self.store.path
        direct: dict[str, str] = {}
        self._set_direct(info.name, direct)
        for name, et in types.items():
            damaged = [(s.path, why) for s in by_type.get(name, []) if (why := segment_damage(root, s))]
            if damaged:  # a query that reads this type fails naming the files; the others stay readable
                body = damaged_view_sql(et, info.name, damaged)
                if keys:  # the same columns as an intact type's view
                    body = tagged_view_sql(et, body, f"{TAG_TABLES}.{qident(info.name)}", keys)
                self._ddl(f"CREATE OR REPLACE VIEW {schema}.{qident(name)} AS {body}")
                continue
            type_segs = by_type.get(name, [])
            cached = _usable(man, name, {s.id for s in type_segs})
            if cached is not None:  # the read cache's table, and Parquet for the segments it lacks
                held = set(cached["segments"])
                type_segs = [s for s in type_segs if s.id not in held]
            parts = []
            if type_segs or name in tails or cached is None:
                body = self._type_sources(info.name, info.id, et, type_segs, tails.get(name))
                parts.append(tagged_view_sql(et, body, f"{TAG_TABLES}.{qident(info.name)}", keys) if keys else body)
            if cached is not None:
                parts.insert(0, self._cached_select(info, man, cached, et, keys))
            body = parts[0] if len(parts) == 1 else "\nUNION ALL\n".join(f"({p})" for p in parts)
            self._ddl(f"CREATE OR REPLACE VIEW {schema}.{qident(name)} AS {body}")
            if parts == [self._cached_select(info, man, cached, et, keys, whole=True)]:
                direct[name.lower()] = self._attached[man["path"]]
        self._set_direct(info.name, direct)
        self._last_views(info, types, tails, keys, last_files)
        self._ddl(f"CREATE OR REPLACE VIEW {schema}.events AS " + events_view_sql(schema, types))
        for vname, sql in _format_views(info.format):  # a format's own views (otlp: `spans`)
            if vname not in types:
                try:
                    self._ddl(
                        f"CREATE OR REPLACE VIEW {schema}.{qident(vname)} AS " + sql.format(t=schema, s=qstr(info.name))
                    )
                except duckdb.Error:  # (its types' columns missing in an older trace): the rest stays readable
                    pass
        self._trace_sigs[info.name] = cut.signature
        self._trace_shapes[info.name] = shape

    def _last_files(self, info, types: dict[str, EventType], segs) -> dict[str, tuple[str, int] | None]:
        """For a trace that keeps the last row of each series (store/lastrows.py): per type, the
        file of its registered rows' last rows and their count (no file: "", 0 rows), or None
        when there is none for them (retention dropped rows since, a trace that kept none)."""
        if not lastrows.wanted(info.metadata):
            return {}
        counts: dict[str, int] = {}
        for s in segs:
            counts[s.event_type] = counts.get(s.event_type, 0) + s.rows
        out = {}
        for name in types:
            n = counts.get(name, 0)
            path = lastrows.path_for(self.store.path, info.id, name, n)
            out[name] = ("", 0) if n == 0 else (str(path), n) if path.exists() else None
        return out

    def _last_views(self, info, types: dict[str, EventType], tails: dict, keys: dict[str, str], files: dict) -> None:
        """`"<trace>".<type>_last` of a trace that keeps them: the last row of each series, from
        the kept file and the unflushed tail; where no file fits, from the type's view itself
        (the same rows, every row read)."""
        schema = qident(info.name)
        fast = self._last_fast[info.name] = set()
        for name, et in types.items():
            if name not in files or name + lastrows.VIEW_SUFFIX in types:
                continue
            kept = files[name]
            if kept is None:
                body = lastrows.view_sql(f"SELECT * FROM {schema}.{qident(name)}")
            else:
                import pyarrow.parquet as pq

                path, rows = kept
                tail = tails.get(name)
                body = type_view_sql(
                    et,
                    [(path, pq.read_schema(path).names)] if rows else [],
                    None if tail is None else (f"_tail_{info.id}_{name}", tail.column_names),
                )
                if tail is not None:  # (the file alone has one row per producer already)
                    body = lastrows.view_sql(body)
                if keys:
                    body = tagged_view_sql(et, body, f"{TAG_TABLES}.{qident(info.name)}", keys)
                fast.add(name)
            self._ddl(f"CREATE OR REPLACE VIEW {schema}.{qident(name + lastrows.VIEW_SUFFIX)} AS {body}")

    def last_row_types(self, trace: str) -> set[str]:
        """The types of `trace` whose `_last` view reads the kept last rows (store/lastrows.py),
        not every row; their views refreshed first."""
        with self.lock:
            info = self.store.catalog.trace(trace)
            if info.name.lower() not in RESERVED_TRACE_NAMES:
                self._refresh_trace(info)
            return set(self._last_fast.get(info.name, ()))

    def _cached_select(
        self, info, man: dict, entry: dict, et: EventType, keys: dict[str, str], whole: bool = False
    ) -> str | None:
        """The SELECT of a type's rows from its read-cache table, in the view's columns (a column
        the cache predates reads null). The cache file is attached once, read-only. `whole`: the
        same SELECT when the table is named as the type and holds the view's columns in its order
        (a query may read the table for the view: `direct_sql`), else None."""
        if whole and (entry is None or entry["table"] != et.name):
            return None
        alias = self._attached.get(man["path"])
        if alias is None:
            alias = f"_rc_{info.id}_{man['file'].split('.')[0][:12]}"
            self._ddl(f"ATTACH {qstr(man['path'])} AS {qident(alias)} (READ_ONLY)")
            for old, old_alias in list(self._attached.items()):  # this trace's older caches
                if old_alias.startswith(f"_rc_{info.id}_"):
                    try:
                        self._ddl(f"DETACH {qident(old_alias)}")
                        del self._attached[old]
                    except duckdb.Error:
                        pass  # still read by a query: detached at the next change
            self._attached[man["path"]] = alias
        have = set(entry["columns"])
        names = [(c.name, DUCK_TYPES[c.type]) for c in et.columns]
        if keys:
            i = next(i for i, (n, _t) in enumerate(names) if n == "producer") + 1
            names[i:i] = [(n, keys[k]) for k, n in tag_column_names(et, keys).items()]
        if whole and [n for n, _t in names] != entry["columns"]:
            return None
        cols = [qident(n) if n in have else f"CAST(NULL AS {t}) AS {qident(n)}" for n, t in names]
        return f"SELECT {', '.join(cols)} FROM {qident(alias)}.{qident(entry['table'])}"

    def _set_direct(self, trace: str, types: dict[str, str]) -> None:
        """The types of `trace` a query may read from the read cache's tables (`direct_sql`):
        type (lower-cased) -> attached name. A new mapping: a snapshot keeps the one its
        transaction began with."""
        t = trace.lower()
        new = {k: v for k, v in self._direct.items() if k[0] != t}
        new.update({(t, name): alias for name, alias in types.items()})
        self._direct = new

    def _refresh_tags(self, info) -> dict[str, str]:
        """The trace's tag keys (`tag_keys`), its `_tags."<trace>"` table made anew when its
        producers changed (their count, highest id and attributes' length: producers are
        added, never edited, by the writers that make tags)."""
        sig = self.store.catalog.db.execute(
            "SELECT count(*), max(id), total(length(attrs)), total(kind = ?) FROM producers WHERE trace_id = ?",
            (TAG_KIND, info.id),
        ).fetchone() + (info.id, info.metadata.get(TAG_COLUMNS_META))
        known = self._tags.get(info.name)
        if known is not None and known[0] == sig:
            return known[1]
        producers = self.store.catalog.producers(info.id)
        keys = tag_keys(producers, info.metadata)
        ref = f"{TAG_TABLES}.{qident(info.name)}"
        if keys:
            self._ddl(f"CREATE SCHEMA IF NOT EXISTS {TAG_TABLES}")
            self.con.register("_tags_new", tag_table(producers, info.metadata, keys))
            try:
                self._ddl(f"CREATE OR REPLACE TABLE {ref} AS SELECT * FROM _tags_new")
            finally:
                self.con.unregister("_tags_new")
        else:
            self._ddl(f"DROP TABLE IF EXISTS {ref}")
        self._tags[info.name] = (sig, keys)
        return keys

    def tag_keys(self, trace: str) -> dict[str, str]:
        """The tag keys the views of `trace` carry as columns, with their DuckDB types."""
        with self.lock:
            return dict(self._refresh_tags(self.store.catalog.trace(trace)))

    def refresh(self, sql: str | None = None) -> None:
        version = self.store.catalog.version()
        lowered = sql.lower() if sql is not None else None
        # th.* is built from Python objects, and DuckDB imports pandas (0.3 s) to register any:
        # plain trace queries (read_parquet views only) skip it.
        if (lowered is None or _mentions_th(lowered)) and version != self._th_version:
            self._th_version = version
            self._refresh_th()
        if version != self._catalog_version:
            live_traces = self._live_traces = self.store.catalog.traces()
            live = {t.name for t in live_traces}
            live_ids = {t.id for t in live_traces}
            for key in [k for k in self._tail_cache if k[0] not in live_ids]:
                del self._tail_cache[key]
            for gone in set(self._trace_sigs) - live:
                self._ddl(f"DROP SCHEMA IF EXISTS {qident(gone)} CASCADE")
                if self._tags.pop(gone, None) is not None:
                    self._ddl(f"DROP TABLE IF EXISTS {TAG_TABLES}.{qident(gone)}")
                del self._trace_sigs[gone]
                self._set_direct(gone, {})
                self._trace_shapes.pop(gone, None)
                self._last_fast.pop(gone, None)
            # Last: `_kept` (no lock) trusts the views of a version only once its traces are
            # read and the schemas of the gone ones dropped.
            self._catalog_version = version
        for info in self._live_traces:  # (read again above whenever the catalog changed)
            if info.name.lower() in RESERVED_TRACE_NAMES:
                continue  # (made before names were checked: its views would shadow SQL's own)
            if lowered is None or info.name.lower() in lowered:
                self._refresh_trace(info)

    # -- running SQL ---------------------------------------------------------------

    def sandbox(self, directory: str, temp_directory: str, memory_limit: int | None = None) -> None:
        """From now on DuckDB may read files under `directory` only (no other path, no URL,
        no extension install), and no statement may change its configuration (SET, PRAGMA).
        Its temp directory (where operators spill) is `temp_directory`, inside `directory`:
        DuckDB's default, `.tmp/` of the working directory, was readable through `read_text`
        (DuckDB allows its temp directory); `memory_limit` bytes, when given, bound what its
        operators hold before they spill."""
        with self.lock:
            self._ddl("SET temp_directory = ?", [temp_directory])
            if memory_limit:
                self._ddl(f"SET memory_limit = '{int(memory_limit)}B'")
            self._ddl("SET allowed_directories = ?", [[directory]])
            self._ddl("SET enable_external_access = false")
            self._ddl("SET autoinstall_known_extensions = false")
            self._ddl("SET lock_configuration = true")

    @contextmanager
    def snapshot(self, query: str, keep_open: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor of its own for running `query` without holding the engine's lock.

        The views `query` needs are refreshed and the Arrow tables they read registered on the
        cursor; its transaction begins and `query` is bound in it (`snapshot_relation`: binding
        reads the catalog, which fixes what the transaction sees) before the lock is let go, so a
        refresh for a later query cannot change the views under it. Nothing the cursor ran
        outlives the transaction: it is rolled back. `interrupt()` the cursor from another
        thread to stop it.

        Binding the query itself is the catalog read: a separate `SELECT current_schema()` for
        it cost 0.2-0.5 ms of every query, and the caller then bound the query again (QoS Q4.1,
        500 rows, embedded: 7.3 -> 6.5 ms of CPU, median of 31 interleaved, load 11).

        Each thread keeps its cursor between queries, with the th.* tables it registered (kept
        while the catalog has not changed; a trace's tail tables are registered per query and let
        go after, so an idle thread pins no rows). Made and registered afresh for every query,
        the cursor cost 2-8 ms of a small query's answer (registering th.producers alone ~1-6 ms
        at load 1-25), more than DuckDB took to answer it.

        `keep_open`, for a caller that runs nothing on the cursor but `snapshot_relation()` (the
        server's query workers): a query that read (its relation lazy, DuckDB's QUERY_RELATION:
        not a statement that ran at the bind) and needed no table registered for it leaves its
        transaction open when it ends without an error, and the thread's next such query runs in
        it while no view has changed since (`_generation`: every statement that changes the
        views bumps it). The rollback, the BEGIN and the bind under the lock were 0.45 ms of the
        1.2 ms a QoS Q1.1 (1,000 rows, read cache) took beyond DuckDB reading its own file (load
        6-7). The bind then happens in `snapshot_relation`, outside the lock, once per query text
        in a transaction: the relation is kept (at most `_KEPT_RELATIONS`) and run again by the
        same query (a dashboard's refresh), which binds it anew and reads the rows afresh. DuckDB's
        Python relations bind a query when made and again when run; through a view of 64 columns
        a bind costs ~0.25 ms more than over the table (QoS Q1.1: 0.65 against 0.42 ms). Any
        other query rolls back at its end; a registration, a view change or an error rolls back
        first, and forgets the kept relations.
        """
        local = self._local
        if not (keep_open and self._kept(query)):
            with self.lock:
                self._prepare(query, keep_open)
        clean = False
        try:
            yield local.cur
            clean = True
        finally:
            cur = local.cur
            per_query, local.per_query = local.per_query, []
            read = getattr(local.rel, "type", None) == "QUERY_RELATION"
            local.rel = local.error = None
            local.bound = False
            keep = keep_open and clean and read and not per_query and local.plain and cur is not None
            try:
                if cur is not None and not keep:
                    local.txn, local.rels = None, {}
                    cur.rollback()
                    for name in per_query:
                        cur.unregister(name)
            except duckdb.Error:
                self._drop_cursor()  # interrupted: the transaction was aborted already; start clean
            except BaseException:
                self._drop_cursor()
                raise

    def _kept(self, query: str) -> bool:
        """Whether this thread's open transaction answers `query` as `_prepare` would, checked
        without the engine's lock (and if so, `query`'s kept relation made this query's).

        Yes when the transaction holds `query` bound (`local.rels`: a plain query, no count the
        catalog answered), no view changed since it began (`_generation`), the catalog is at the
        version the views were last made from, each trace the query names has the cut its views
        were made from (`store.cut`: the catalog's segments and, for another process's trace, its
        uncovered WAL files: a write acknowledged before this query began changes it), and the
        query needs no table registered for it (a trace's unflushed tail, th.*). Anything else
        takes the lock (`_prepare`). The generation is read again last: a refresh that ran
        meanwhile changed it.

        Under the lock, 20 threads of one process queued for it one query at a time, and each
        hand-over waited for the interpreter's lock as well (the thread woken up needs it, while
        the others convert their answers): QoS Q1.1 with 20 embedded clients spent 13.7 ms of its
        19.4 ms per client waiting for the engine's lock, held 0.2 ms per query (load 3.6). Without
        it, main's engine and this one in alternating processes (20 clients, 11 rounds, load
        1.9-4.3): Q1.1 23.6, 26.2 -> 15.4, 13.3 ms per client (DuckDB's own file 15-17), Q4.1
        26.8, 28.1 -> 18.3, 10.7 (16-18), Q1.2 82 -> 65, 76 (75-95). On a machine whose other work
        takes every core (load 12-14) the wait costs nothing and the per-query CPU decides; it is
        DuckDB's (both engines interleaved in one process: Q1.1 3.65 ms, main's 4.08, DuckDB's
        file 3.92; Q4.1 3.85, 4.43, 4.22; Q1.2 10.9, 9.8, 10.7).

        The catalog's version is read once, after the WAL listings (`Store.wal_signature`), where
        it was read three times (here, and before and after `Store.cut`'s listing). Each read of the
        shared SQLite connection lets go of the interpreter's lock and waits to get it back while
        the other clients run: with the per-query CPU equal to DuckDB's own client, the 20 clients'
        wall time was not. 20 embedded clients, this engine and the one with three reads loaded
        side by side in one process with DuckDB's own file (schema 1), 25 interleaved rounds, ms
        per client (load 10-12): Q1.1 21.3 -> 19.4 (DuckDB 18.2), Q1.2 73.7 -> 63.9 (68.1), Q4.1
        19.7 -> 19.0 (19.2), Q4.2 56.6 -> 51.3 (49.1). The one read left still costs: the same
        clients with the version read taken out (a probe only: it is what makes an acknowledged
        write visible), load 7-8: Q1.1 19.5 -> 16.3, Q4.1 23.6 -> 16.2, Q4.2 51.3 -> 41.6 ms
        (DuckDB 18.9, 21.2, 62.5); a connection per thread for it gained nothing. So the read is
        `Catalog.version_held`: SQLite's C API called with the interpreter's lock kept. The three
        engines side by side with DuckDB's file, 20 clients, 25 interleaved rounds, ms per client
        (load 5-6), three reads / one read / one read holding the lock (DuckDB): Q1.1 21.2 / 20.0 /
        19.1 (20.1), Q1.2 80.6 / 65.2 / 58.3 (73.6), Q4.1 20.8 / 19.4 / 16.8 (19.1), Q4.2 45.0 /
        40.6 / 34.7 (46.8)."""
        local = self._local
        rels = getattr(local, "rels", None)
        if not rels or getattr(local, "cur", None) is None:
            return False
        rel = rels.get(query)
        generation = local.txn
        if rel is None or generation is None or generation != self._generation:
            return False
        lowered = query.lower()
        if _mentions_th(lowered):
            return False
        try:
            if any(trace is not None and trace.lower() in lowered for trace, _table in list(self._sources.values())):
                return False
        except RuntimeError:  # (changed while listed: a refresh is under way)
            return False
        read_at = set()  # the catalog versions the WAL listings' signatures rest on
        for info in self._live_traces:
            name = info.name.lower()
            if name not in lowered or name in RESERVED_TRACE_NAMES:
                continue
            sig = self.store.wal_signature(info)  # (another process's trace: no catalog read)
            if sig is None:
                sig = self.store.cut(info).signature  # (this process's writer: its tail's version)
            else:
                read_at.add(sig[0])
            if sig != self._trace_sigs.get(info.name):
                return False
        # The one catalog read, after the listings: a version unchanged since the one the listings
        # rest on proves each listing whole (`Store.wal_signature`).
        version = self.store.catalog.version_held()
        if version != self._catalog_version or any(v != version for v in read_at):
            return False
        if generation != self._generation:
            return False
        local.per_query, local.query, local.plain = [], query, True
        local.rel, local.error, local.bound = rel, None, True
        return True

    def _prepare(self, query: str, keep_open: bool) -> None:
        """`snapshot`'s part under the lock: views refreshed, tables registered on this thread's
        cursor (`local.per_query`: the names registered for this query only, let go at its end),
        the transaction begun (or the open one kept) and a plain query bound."""
        self.refresh(query)
        lowered = query.lower()
        local = self._local
        cur = getattr(local, "cur", None)
        if cur is None:
            cur = local.cur = self.con.cursor()
            local.th = {}  # registered name -> the table it was
            local.txn = None  # the `_generation` at which the cursor's open transaction began
            local.rels = {}  # query -> its relation bound in that transaction (`snapshot_relation`)
            local.direct = {}  # `_direct` when that transaction began
        per_query = local.per_query = []
        local.plain = False
        try:
            regs = []
            for name, (trace, table) in self._sources.items():
                # Registering costs ~1 ms: only what the views the query may name read.
                if trace is None:
                    if _mentions_th(lowered, name[len("_th_") :]) and local.th.get(name) is not table:
                        regs.append((name, table, False))
                elif trace.lower() in lowered:
                    regs.append((name, table, True))
            local.query = self._whole_count(query) or query
            local.rel, local.error, local.bound = None, None, False
            local.plain = _PLAIN_QUERY.match(local.query) is not None
            reuse = keep_open and local.txn is not None and local.txn == self._generation and not regs and local.plain
            if not reuse and local.txn is not None:
                local.txn, local.rels = None, {}
                cur.rollback()  # (a registration inside a transaction is undone with it)
            for name, table, once in regs:
                cur.register(name, table)
                if once:
                    per_query.append(name)
                else:
                    local.th[name] = table
            if reuse:
                return  # the open transaction fixes the views; bound in snapshot_relation
            if local.plain:
                # A query is bound, never run, by `sql`; any other statement (EXPLAIN, PIVOT,
                # DDL a guard let through) would run there, under the lock: not here.
                # BEGIN alone fixes nothing: DuckDB starts the transaction's view of the catalog
                # at its first catalog lookup, which binding the query is.
                cur.execute("BEGIN TRANSACTION")
                local.txn = self._generation
                local.direct = self._direct  # (the views this transaction sees)
                local.bound = True
                try:
                    local.rel = local.rels[local.query] = _bind(cur, local.query, local.direct)
                except duckdb.Error as e:  # raised by snapshot_relation, in the caller's hands
                    local.error = e  # (the transaction is aborted: nothing else runs in it)
            else:
                cur.execute("BEGIN TRANSACTION; SELECT current_schema()").fetchall()
                local.txn = self._generation
                local.direct = self._direct
        except BaseException:
            self._drop_cursor()
            raise

    def snapshot_relation(self):
        """The relation of the query `snapshot(query)` bound on this thread's cursor (None for a
        statement without rows); raises the error binding it gave (a `duckdb.Error`)."""
        local = self._local
        if getattr(local, "error", None) is not None:
            raise local.error
        if not getattr(local, "bound", False):
            if not getattr(local, "plain", False):
                return local.cur.sql(local.query)
            try:
                rel = local.rels.get(local.query)
                if rel is None:
                    if len(local.rels) >= _KEPT_RELATIONS:
                        local.rels.clear()
                    rel = local.rels[local.query] = _bind(local.cur, local.query, local.direct)
                local.rel = rel
            except duckdb.TransactionException:
                # The kept transaction was aborted (a caller caught a failed query inside its
                # `snapshot`): begin afresh, as a query after a rollback does.
                with self.lock:
                    local.txn, local.rels = None, {}
                    local.cur.rollback()
                    self._prepare(local.query, False)
                if local.error is not None:
                    raise local.error from None
            local.bound = True
        return local.rel

    def snapshot_query(self, query: str) -> str:
        """What to run on the cursor `snapshot(query)` yields (this thread's): `query`, or the
        same answer from the catalog's counts (`_whole_count`)."""
        return getattr(self._local, "query", None) or query

    def _whole_count(self, query: str) -> str | None:
        """`whole_count` as a SELECT of the number itself, else None."""
        count = whole_count(self.store, query)
        return None if count is None else f"SELECT CAST({count[1]} AS BIGINT) AS {qident(count[0])}"

    def _drop_cursor(self) -> None:
        cur = getattr(self._local, "cur", None)
        self._local.cur = None
        self._local.txn, self._local.rels = None, {}
        if cur is not None:
            try:
                cur.close()
            except duckdb.Error:
                pass

    def sql(self, query: str, params: list | dict | None = None) -> pa.Table:
        with self.lock:
            self._generation += 1  # (it may write what a kept transaction would not see: `snapshot`)
            count = self._whole_count(query)
            if count is None:
                self.refresh(query)
            try:
                if count is None and _PLAIN_QUERY.match(query) is not None:
                    rel = _bind(self.con, query, self._direct, params)
                else:
                    rel = self.con.sql(count or query, params=params)
                return pa.table({}) if rel is None else _to_arrow(rel)
            except duckdb.Error as e:
                raise BadInput(
                    f"SQL error: {error_text(e)}", expected="a valid DuckDB query over the store's views"
                ) from None

    def batches(self, query: str, params: list | dict | None = None, rows: int = 65_536):
        """Yields the result as record batches of up to `rows` rows, streamed (the engine
        stays locked while the generator is consumed: finish or close it before other SQL)."""
        with self.lock:
            self._generation += 1
            self.refresh(query)
            try:
                rel = self.con.sql(self._whole_count(query) or query, params=params)
                if rel is None:
                    return
                reader = arrow_reader(rel, rows)
            except duckdb.Error as e:
                raise BadInput(
                    f"SQL error: {error_text(e)}", expected="a valid DuckDB query over the store's views"
                ) from None
            yield from reader


_IDENT = r'("(?:[^"]|"")+"|[^\s."();,]+)'
_WHOLE_COUNT = re.compile(
    r"\s*select\s+count\s*\(\s*\*\s*\)(?:\s+(?:as\s+)?"
    + _IDENT
    + r")?\s+from\s+"
    + _IDENT
    + r"\s*\.\s*"
    + _IDENT
    + r"\s*;?\s*",
    re.IGNORECASE,
)


def whole_count(store, query: str) -> tuple[str, int] | None:
    """`SELECT count(*) [[AS] name] FROM "<trace>".<view> [;]` over a whole view (events or one
    type) of `store`: (the result's column name, the number), else None. The whole statement
    is matched (a filter, a join, a second statement, a comment: None, DuckDB answers). The
    number is the rows the catalog registered for the view's segments plus the unflushed
    tail's (this process's writer's, or the WAL records no segment covers yet), taken as one
    cut the way the views are.

    DuckDB counts one read_parquet from the footers, but through a UNION ALL (the events
    view, a type with an unflushed tail) every row streams as an empty chunk: 0.22 s over
    100M events in 26 segments; and the views themselves take a process's first query
    0.15 s to make (footers read to bind them), which a count does not need. Nor does it
    need DuckDB itself (0.2-0.4 s to import): `Store.sql` and `tracehouse query` answer
    it without loading it."""
    m = _WHOLE_COUNT.fullmatch(query)
    if m is None:
        return None
    alias, trace, view = (_unquote(g) if g else g for g in m.groups())
    cat = store.catalog
    info = next((t for t in cat.traces() if t.name == trace), None)
    if info is None and not m.group(2).startswith('"'):  # unquoted: DuckDB's case-insensitive names
        info = next((t for t in cat.traces() if t.name.lower() == trace.lower()), None)
    if info is None:
        return None
    cut = store.cut(info)  # the same consistent cut the views are made from
    types, segs, tails = cut.types, cut.segments, cut.tails
    if view != "events" and view not in types:  # a name we did not make (or in another case): DuckDB decides
        return None
    counted = [s for s in segs if view == "events" or s.event_type == view]
    if any(segment_damage(store.path, s) for s in counted):
        return None  # the registered count would hide the damage: DuckDB's view names it
    rows = sum(s.rows for s in counted)
    rows += sum(b.num_rows for name, bs in tails.items() if view == "events" or name == view for b in bs)
    return alias or "count_star()", int(rows)


_VIEWS: dict[str, list[tuple[str, str]]] = {}
_KEPT_RELATIONS = 64  # relations a thread's kept transaction holds by query text (`snapshot`)


def _format_views(fmt: str) -> list[tuple[str, str]]:
    """The views a format declares (`FormatDecl.views`, read once through `_core`)."""
    if not _VIEWS:
        from .. import _core

        _VIEWS.update({f: [tuple(v) for v in d["views"]] for f, d in _core.format_declarations().items()})
        _VIEWS.setdefault("", [])
    return _VIEWS.get(fmt, [])


def _usable(man: dict | None, type_name: str, live_ids: set[int]) -> dict | None:
    """A read cache manifest's entry for `type_name` when every segment it holds is still live
    (else the cache is not read for that type: compaction merged them or retention dropped them)."""
    if not man:
        return None
    entry = man["types"].get(type_name)
    if entry is None or not entry["segments"] or not set(entry["segments"]) <= live_ids:
        return None
    return entry


def direct_sql(query: str, direct: dict[tuple[str, str], str]) -> str:
    """`query` with each `<trace>.<type>` whose view is its read cache's table, column for
    column (`direct`: `QueryEngine._direct`), naming that table instead: `"<cache>".<type>`.
    Only a name of two parts is changed (not `memory.<trace>.<type>` nor a column's
    `<trace>.<type>.col`), read token by token (a string or a comment is left as it is); the
    table is named as the type, so the name the query reads its rows under stays the same.

    Why: DuckDB binds a view's query at every run, and a run of a kept relation binds it again
    (DuckDB's Python relation runs its SQL text). Seed 003's QoS Q1.1 (1,000 rows x 64 columns
    from the cache), a kept relation run again, process CPU ms per run, medians of 25 interleaved
    rounds of 30 (load 3.7-4.7): through the view 1.98, from the table 1.61, DuckDB's own file
    (schema 1) 2.59; a bind alone 0.70 against 0.42 ms."""
    if not direct:
        return query
    lowered = query.lower()
    if not any(t in lowered and n in lowered for t, n in direct):
        return query
    toks = duckdb.tokenize(query)
    ends = [p for p, _k in toks[1:]] + [len(query)]
    text = [query[p:e].rstrip() for (p, _k), e in zip(toks, ends, strict=True)]
    ident = duckdb.token_type.identifier
    out, done = [], 0
    for i in range(len(toks) - 2):
        if toks[i][1] != ident or text[i + 1] != "." or toks[i + 2][1] != ident:
            continue
        if (i > 0 and text[i - 1] == ".") or (i + 3 < len(toks) and text[i + 3] == "."):
            continue
        alias = direct.get((_unquote(text[i]).lower(), _unquote(text[i + 2]).lower()))
        if alias is not None:
            out += [query[done : toks[i][0]], qident(alias)]
            done = toks[i][0] + len(text[i])
    return "".join(out) + query[done:] if out else query


def _bind(con, query: str, direct: dict[tuple[str, str], str], params=None):
    """`con.sql(query)` over the read caches' tables where they are the views (`direct_sql`); a
    query that does not bind so is bound as it is (its error names what the query named)."""
    rewritten = direct_sql(query, direct)
    if rewritten is not query:
        try:
            return con.sql(rewritten, params=params)
        except duckdb.Error:
            pass
    return con.sql(query, params=params)


def _unquote(ident: str) -> str:
    return ident[1:-1].replace('""', '"') if ident.startswith('"') else ident


# A statement `snapshot` binds under its lock: SELECT, WITH or FROM first (after comments and
# parentheses), one statement (no `;` but a last one). Read token by token, left to right: a `;`
# inside a '...' string, a "..." name or a comment is no statement's end (InfluxQL's translations
# carry one in an error message: every GROUP BY time() query was taken for a script, rolled its
# kept transaction back and was bound three times); an E'...' string (its backslash escapes a
# quote), a `$` (dollar quoting) or an unclosed comment or string ends the reading: not plain.
# Possessive quantifiers, and each failed alternative scans at most once to the end: with
# `[^;]*` a long run of spaces before a `;` backtracked quadratically (200,000 spaces: 472 s).
_PLAIN_QUERY = re.compile(
    r"(?:\s|--[^\n]*\n|/\*.*?\*/|\()*+(?:select|with|from)\b"
    r"(?:[^;'\"$eE/-]|'[^']*+'|\"[^\"]*+\"|--[^\n]*+|/\*.*?\*/|/(?!\*)|-(?!-)|[eE](?!'))*+;?\s*+\Z",
    re.I | re.S,
)


def _mentions_th(lowered: str, view: str = "") -> bool:
    """Whether lower-cased SQL may name a th.* view (`th.traces`, `"th".traces`, `th . x`), or
    the th.`view` one."""
    return re.search(r'\bth"?\s*\.\s*"?' + view, lowered) is not None


def arrow_reader(rel, rows: int):
    """A relation's rows streamed as Arrow record batches of about `rows` rows."""
    # duckdb 2 renamed fetch_record_batch() to to_arrow_reader(); accept both.
    f = getattr(rel, "to_arrow_reader", None) or rel.fetch_record_batch
    return f(rows)


def _to_arrow(rel) -> pa.Table:
    # duckdb 2 renamed arrow() to to_arrow_table(); accept both.
    f = getattr(rel, "to_arrow_table", None) or rel.arrow
    return f()


def error_line(e: Exception) -> str:
    """An engine's error message on one line (runs of whitespace, newlines included, as one space)."""
    return re.sub(r"\s+", " ", str(e)).strip()


def error_text(e: Exception) -> str:
    """An engine's error message with its lines kept (blank ones dropped): DuckDB's
    `LINE 1: ...` and the `^` under the mistake stay aligned for a reader with a fixed font."""
    return "\n".join(line.rstrip() for line in str(e).strip().splitlines() if line.strip())
