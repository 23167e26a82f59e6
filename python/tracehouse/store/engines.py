"""Query engines over one store or several: DuckDB in this process, or Apache Spark.

Owns the engine-neutral half of scale-out:

- `StoreRef`: one store of a query (its directory, the alias naming it in SQL, and the URL
  prefix Spark executors read its files from); `parse_store`, `load_store_list` (a TOML
  file of stores).
- `Snapshot`: what a query runs on. Every store's catalog is read in one SQLite read
  transaction on a read-only connection of its own (the way any reader process does), so a
  query sees, per store, the registered segments of one catalog version: never a file being
  written (segments are registered only once durable and renamed), never both a compaction's
  inputs and its output, never half of a flush. Rows a writer has not yet registered are not
  seen (`Store.sql` of one store also reads a writer's unflushed tail or WAL records).
- Names across stores: with one store, SQL names are the store's own (`"<trace>".<type>`,
  `th.*`). With several, a trace keeps its bare name when no other store has a trace of that
  name (case-insensitively, as SQL matches it); a name several stores hold is ambiguous and
  refused, naming the qualified names `"<alias>/<trace>"` that always work (`/` cannot occur
  in a trace name, so a qualified name never collides with a real one). Every `th.*` table
  then starts with a `store` column (the alias) and holds traces under their SQL names.
- `DuckDBEngine` (several stores: views built from a snapshot) and `open_engine`, the one
  door to either engine; the Spark engine is `spark.SparkEngine`. Every engine answers
  `sql(query, params)` with an Arrow table and names itself (`description`), and quacks like
  a `Store` for the pure-SQL analyses (`trace`, `event_types`, `sql`).
"""

from __future__ import annotations

import re
import threading
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .. import lazy
from ..errors import BadInput, NotFound
from ..schema import EventType, one_event_type
from .catalog import Catalog, SegmentInfo, TraceInfo
from .query import (
    TH_TABLES,
    _to_arrow,
    error_line,
    events_view_sql,
    qident,
    tagged_view_sql,
    th_tables,
    trace_tags,
    type_view_sql,
)

# Imported on first use (lazy.py): listing, searching and counting traces need none.
duckdb = lazy.module("duckdb")
pa = lazy.module("pyarrow")
pc = lazy.module("pyarrow.compute")

if TYPE_CHECKING:
    from .store import Store

ENGINES = ("duckdb", "spark")
QUALIFIER = "/"  # "<alias>/<trace>": never part of a trace name (check_trace_name)


# -- which stores -----------------------------------------------------------------------------


@dataclass(frozen=True)
class StoreRef:
    """One store of a query: its directory, its alias in SQL and the URL prefix under which
    Spark executors read its files (default: the directory as a file:// URL, i.e. a shared
    filesystem mounted at the same path everywhere)."""

    path: Path
    alias: str
    url: str | None = None

    def file_url(self, rel: str) -> str:
        if self.url:
            return self.url.rstrip("/") + "/" + rel
        return (self.path / rel).as_uri()


def parse_store(text: str | Path) -> StoreRef:
    """`[ALIAS=]DIR` -> StoreRef (alias default: the directory's name)."""
    s = str(text)
    alias, sep, path = s.partition("=")
    if not sep or "/" in alias or not alias:
        alias, path = "", s
    p = Path(path).expanduser().absolute()
    return StoreRef(p, alias or p.name)


def load_store_list(path: str | Path) -> list[StoreRef]:
    """Stores listed in a TOML file: `[[store]]` tables with `path` (relative paths are
    relative to the file), optional `alias` and `url` (where Spark executors read its files,
    e.g. an object-store prefix the directory is mirrored to)."""
    f = Path(path)
    try:
        data = tomllib.loads(f.read_text())
    except FileNotFoundError:
        raise NotFound(f"no store list at {f}") from None
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"{e}", file=str(f), expected="TOML with [[store]] tables (path, alias, url)") from None
    entries = data.get("store")
    if not isinstance(entries, list) or not entries:
        raise BadInput("no [[store]] table", file=str(f), expected='[[store]] tables with path = "DIR"')
    refs = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not isinstance(e.get("path"), str):
            raise BadInput(f"[[store]] #{i + 1} has no path", file=str(f), expected='path = "DIR"')
        p = (f.parent / Path(e["path"]).expanduser()).absolute()
        alias = e.get("alias") or p.name
        if not isinstance(alias, str) or QUALIFIER in alias:
            raise BadInput(f"[[store]] #{i + 1}: alias {alias!r}", file=str(f), expected="a name without '/'")
        refs.append(StoreRef(p, alias, e.get("url")))
    return refs


def store_refs(stores: Iterable[str | Path | StoreRef | Store]) -> list[StoreRef]:
    """StoreRefs for paths, `ALIAS=DIR` strings, Stores or StoreRefs; aliases must differ."""
    refs = []
    for s in stores:
        if isinstance(s, StoreRef):
            refs.append(s)
        elif hasattr(s, "catalog") and hasattr(s, "path"):
            refs.append(StoreRef(Path(s.path), Path(s.path).name))
        else:
            refs.append(parse_store(s))
    if not refs:
        raise BadInput("no store given", expected="one or more store directories")
    seen: dict[str, Path] = {}
    for r in refs:
        other = seen.get(r.alias.lower())
        if other is not None:
            raise BadInput(
                f"two stores are named {r.alias!r} ({other} and {r.path})",
                expected="distinct aliases: --store ALIAS=DIR",
            )
        seen[r.alias.lower()] = r.path
    return refs


# -- one consistent read of the catalogs ------------------------------------------------------


@dataclass
class StoreSnapshot:
    """One store's catalog at one version (read in one transaction)."""

    ref: StoreRef
    version: int
    traces: list[TraceInfo]
    types: dict[int, dict[str, EventType]]  # trace id -> its event types (its own, or its format's)
    segments: dict[int, dict[str, list[SegmentInfo]]]  # trace id -> type -> live segments
    th: dict[str, pa.Table]


class _Reader:
    """A read-only catalog connection of one store, kept open between queries."""

    def __init__(self, ref: StoreRef) -> None:
        cat = ref.path / "catalog.sqlite"
        if not cat.exists():
            raise NotFound(f"no tracehouse store at {ref.path} (run `tracehouse init` first)")
        self.ref = ref
        self.catalog = Catalog(cat, readonly=True)
        self.last: StoreSnapshot | None = None

    def snapshot(self) -> StoreSnapshot:
        db = self.catalog.db
        db.execute("BEGIN")  # deferred: the snapshot is taken by the first read below
        try:
            version = self.catalog.version()
            if self.last is not None and self.last.version == version:
                return self.last
            traces = self.catalog.traces()
            by_format = {fmt: self.catalog.event_types(fmt) for fmt in sorted({t.format for t in traces})}
            types = {t.id: self.catalog.trace_types(t) if t.own_types else by_format[t.format] for t in traces}
            segs: dict[int, dict[str, list[SegmentInfo]]] = {}
            for s in self.catalog.all_live_segments():
                segs.setdefault(s.trace_id, {}).setdefault(s.event_type, []).append(s)
            th = th_tables(self.catalog)
        finally:
            db.execute("COMMIT")
        self.last = StoreSnapshot(self.ref, version, traces, types, segs, th)
        return self.last

    def close(self) -> None:
        self.catalog.close()


@dataclass(frozen=True)
class TraceSource:
    """One trace as a query sees it: its SQL name, its store's snapshot, its catalog row."""

    sql_name: str
    store: StoreSnapshot
    info: TraceInfo

    @property
    def types(self) -> dict[str, EventType]:
        return self.store.types.get(self.info.id, {})

    def segments(self, type_name: str) -> list[SegmentInfo]:
        return self.store.segments.get(self.info.id, {}).get(type_name, [])

    def signature(self) -> tuple:
        """Changes whenever the trace's views would (segments, event types, or its producers: the
        tags its views carry as columns)."""
        segs = self.store.segments.get(self.info.id, {})
        producers = self.store.th["producers"]
        n = pc.sum(pc.equal(producers.column("trace"), self.info.name)).as_py() if producers.num_rows else 0
        return (
            self.store.ref.alias,
            self.info.id,
            tuple(self.types.values()),
            tuple((k, tuple(s.id for s in v)) for k, v in sorted(segs.items())),
            n,
            tuple(sorted(self.info.metadata.items())),
        )


@dataclass
class Snapshot:
    """All stores of a query at one moment, with the SQL name of every trace."""

    stores: list[StoreSnapshot]
    by_name: dict[str, TraceSource] = field(default_factory=dict)  # lower-case SQL name -> trace
    ambiguous: dict[str, list[str]] = field(default_factory=dict)  # lower-case bare name -> qualified names
    _th: dict[str, pa.Table] | None = None

    @classmethod
    def of(cls, stores: list[StoreSnapshot]) -> Snapshot:
        snap = cls(stores)
        if len(stores) == 1:
            for t in stores[0].traces:
                snap.by_name[t.name.lower()] = TraceSource(t.name, stores[0], t)
            return snap
        holders: dict[str, list[tuple[StoreSnapshot, TraceInfo]]] = {}
        for st in stores:
            for t in st.traces:
                holders.setdefault(t.name.lower(), []).append((st, t))
        for key, hs in holders.items():
            for st, t in hs:
                qualified = f"{st.ref.alias}{QUALIFIER}{t.name}"
                name = t.name if len(hs) == 1 else qualified
                src = TraceSource(name, st, t)
                snap.by_name[qualified.lower()] = src
                if len(hs) == 1:
                    snap.by_name[key] = src
            if len(hs) > 1:
                snap.ambiguous[key] = [f"{st.ref.alias}{QUALIFIER}{t.name}" for st, t in hs]
        return snap

    def version(self) -> tuple:
        return tuple((s.ref.alias, s.version) for s in self.stores)

    def trace(self, name: str) -> TraceSource:
        src = self.by_name.get(name.lower())
        if src is not None:
            return src
        if name.lower() in self.ambiguous:
            names = " or ".join(f'"{q}"' for q in self.ambiguous[name.lower()])
            raise BadInput(f"trace {name!r} is in several stores", expected=f"a qualified name: {names}")
        where = ", ".join(str(s.ref.path) for s in self.stores)
        raise NotFound(f"no trace named {name!r} in {where}")

    def traces(self) -> list[TraceSource]:
        seen, out = set(), []
        for src in self.by_name.values():
            if id(src) not in seen:
                seen.add(id(src))
                out.append(src)
        return sorted(out, key=lambda s: s.sql_name)

    def th(self) -> dict[str, pa.Table]:
        """The th.* tables; with several stores, a leading `store` column and SQL trace names."""
        if len(self.stores) == 1:
            return self.stores[0].th
        if self._th is not None:
            return self._th
        out = {}
        for name, (_sql, _columns) in TH_TABLES.items():
            parts = []
            for st in self.stores:
                t = st.th[name]
                rename = {t_.name: self.trace_of(st, t_.name).sql_name for t_ in st.traces}
                t = _rename_traces(name, t, rename)
                parts.append(t.add_column(0, "store", pa.array([st.ref.alias] * t.num_rows, pa.string())))
            out[name] = pa.concat_tables(parts)
        self._th = out
        return out

    def trace_of(self, st: StoreSnapshot, name: str) -> TraceSource:
        return self.by_name[f"{st.ref.alias}{QUALIFIER}{name}".lower()]


def _rename_traces(table: str, t: pa.Table, rename: dict[str, str]) -> pa.Table:
    """Trace names in a th table replaced by their SQL names."""
    col = {
        "traces": "name",
        "producers": "trace",
        "segments": "trace",
        "metadata": "trace",
        "results": "traces",
        "event_types": "trace",
    }.get(table)
    if col is None or not rename or all(k == v for k, v in rename.items()):
        return t
    i = t.schema.get_field_index(col)
    values = t.column(col).to_pylist()
    if table == "results":
        new = pa.array(
            [[rename.get(x, x) for x in v] if v is not None else None for v in values], t.schema.field(i).type
        )
    else:
        new = pa.array([rename.get(v, v) for v in values], pa.string())
    return t.set_column(i, t.schema.field(i), new)


class Snapshots:
    """Readers of every store of an engine; `take()` is one consistent snapshot of all."""

    def __init__(self, refs: list[StoreRef]) -> None:
        self.refs = refs
        self._readers = [_Reader(r) for r in refs]
        self._last: Snapshot | None = None

    def take(self) -> Snapshot:
        stores = [r.snapshot() for r in self._readers]
        if self._last is not None and all(a is b for a, b in zip(self._last.stores, stores)):
            return self._last
        self._last = Snapshot.of(stores)
        return self._last

    def close(self) -> None:
        for r in self._readers:
            r.close()


# -- which traces a query names -----------------------------------------------------------------


def parse(query: str):
    """The query as a sqlglot tree (DuckDB dialect); BadInput naming sqlglot's complaint."""
    import sqlglot
    from sqlglot.errors import ParseError, TokenError

    try:
        trees = [t for t in sqlglot.parse(query, read="duckdb") if t is not None]
    except (ParseError, TokenError) as e:
        raise BadInput(f"SQL error: {error_line(e)}", expected="a query in DuckDB's SQL dialect") from None
    if len(trees) != 1:
        raise BadInput(f"{len(trees)} statements", expected="one SQL statement")
    return trees[0]


def table_refs(tree) -> list:
    """The table nodes of a tree that name a schema (`"<trace>".<type>`, `th.<name>`)."""
    from sqlglot import exp

    return [t for t in tree.find_all(exp.Table) if t.args.get("db") is not None and not t.args.get("catalog")]


def referenced_traces(snap: Snapshot, query: str, tree=None) -> dict[str, TraceSource]:
    """The traces a query names, by the name it uses (bare or `alias/trace`); an ambiguous
    or unknown name is an error naming it."""
    if tree is None:
        try:
            tree = parse(query)
        except BadInput:
            # Not parseable by sqlglot: every trace whose name appears (DuckDB itself will
            # judge the SQL), as the single-store engine does.
            low = query.lower()
            return {s.sql_name: s for s in snap.traces() if s.sql_name.lower() in low}
    out: dict[str, TraceSource] = {}
    for t in table_refs(tree):
        if t.db.lower() != "th":
            out[t.db] = snap.trace(t.db)
    return out


def mentions_th(tree, query: str) -> bool:
    if tree is None:
        return "th." in query.lower()
    return any(t.db.lower() == "th" for t in table_refs(tree))


# -- DuckDB over several stores ----------------------------------------------------------------------


class DuckViews:
    """DuckDB views of a snapshot's traces in one connection: over their segment files, or
    (files=False) empty and typed, which is how the Spark engine learns the exact Arrow
    types DuckDB would answer with."""

    def __init__(self, files: bool = True) -> None:
        self.con = duckdb.connect(":memory:")
        self.files = files
        self._sigs: dict[str, tuple] = {}
        self._th_version: tuple | None = None

    def update(self, snap: Snapshot, traces: dict[str, TraceSource], th: bool) -> None:
        """Views of `th` (when asked) and of every trace under the name the query uses."""
        if th and self._th_version != snap.version():
            self.con.execute("CREATE SCHEMA IF NOT EXISTS th")
            for name, table in snap.th().items():
                reg = f"_th_{name}"
                self.con.register(reg, table if self.files else table.slice(0, 0))
                self.con.execute(f"CREATE OR REPLACE VIEW th.{name} AS SELECT * FROM {reg}")
            self._th_version = snap.version()
        for written, src in traces.items():
            sig = src.signature()
            if self._sigs.get(written.lower()) == sig:
                continue
            schema = qident(written)
            self.con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            self.con.execute(f"CREATE SCHEMA {schema}")
            keys, tags = trace_tags(src.store.th["producers"], src.info.name, src.info.metadata)
            tag_ref = f"_tags_{len(self._sigs)}_{abs(hash(written.lower()))}"
            if tags is not None:
                self.con.register(tag_ref, tags if self.files else tags.slice(0, 0))
            for name, et in src.types.items():
                files = (
                    [(str(src.store.ref.path / s.path), s.columns) for s in src.segments(name)] if self.files else []
                )
                body = type_view_sql(et, files)
                if keys:  # tags as columns, as the single-store views have them (store/query.py)
                    body = tagged_view_sql(et, body, tag_ref, keys)
                self.con.execute(f"CREATE VIEW {schema}.{qident(name)} AS {body}")
            self.con.execute(f"CREATE VIEW {schema}.events AS {events_view_sql(schema, src.types)}")
            self._sigs[written.lower()] = sig

    def run(self, query: str, params=None, *, schema_only: bool = False) -> pa.Table:
        try:
            rel = self.con.sql(query, params=params)
            if rel is None:
                return pa.table({})
            return _to_arrow(rel.limit(0) if schema_only else rel)
        except duckdb.Error as e:
            raise BadInput(
                f"SQL error: {error_line(e)}", expected="a valid DuckDB query over the store's views"
            ) from None

    def close(self) -> None:
        self.con.close()


class EngineBase:
    """What every engine shares: the stores, their snapshots, and the Store-like lookups
    (`trace`, `event_types`) the pure-SQL analyses use beside `sql`."""

    name = "?"

    def __init__(self, stores: Sequence) -> None:
        self.refs = store_refs(stores)
        self.snapshots = Snapshots(self.refs)
        self.lock = threading.RLock()

    @property
    def description(self) -> str:
        return self.name

    def trace(self, name: str) -> TraceInfo:
        return self.snapshots.take().trace(name).info

    def traces(self) -> list[TraceInfo]:
        return [s.info for s in self.snapshots.take().traces()]

    def event_types(self, trace: str) -> dict[str, EventType]:
        return dict(self.snapshots.take().trace(trace).types)

    def event_type(self, trace: str, name: str) -> EventType:
        """One event type of a trace, as `Store.event_type` (the analyses take either)."""
        return one_event_type(self.event_types(trace), trace, name)

    def sql(self, query: str, params: list | dict | None = None, output: str = "arrow"):
        raise NotImplementedError

    def close(self) -> None:
        self.snapshots.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class DuckDBEngine(EngineBase):
    """DuckDB over one store or several, reading registered segments only (for one store
    opened in the writer process, `Store.sql` also sees the unflushed tail)."""

    name = "duckdb"

    def __init__(self, stores: Sequence) -> None:
        super().__init__(stores)
        self.views = DuckViews(files=True)

    @property
    def description(self) -> str:
        return f"duckdb {duckdb.__version__}"

    def sql(self, query: str, params: list | dict | None = None, output: str = "arrow"):
        from .store import convert

        with self.lock:
            snap = self.snapshots.take()
            try:
                tree = parse(query)
            except BadInput:
                tree = None
            self.views.update(snap, referenced_traces(snap, query, tree), mentions_th(tree, query))
            return convert(self.views.run(query, params), output)

    def close(self) -> None:
        self.views.close()
        super().close()


def open_engine(
    stores: str | Path | Store | StoreRef | Sequence = None,
    engine: str = "duckdb",
    *,
    master: str | None = None,
    spark=None,
    conf: dict | None = None,
) -> EngineBase:
    """An engine over one store or several: engine "duckdb" (this process) or "spark"
    (`master`: a Spark master URL, default local[2]; or a running SparkSession as `spark`)."""
    if stores is None:
        from .. import default_path

        stores = [default_path()]
    elif isinstance(stores, (str, Path, StoreRef)) or hasattr(stores, "catalog"):
        stores = [stores]
    if engine == "duckdb":
        return DuckDBEngine(stores)
    if engine == "spark":
        from .spark import SparkEngine

        return SparkEngine(stores, master=master, spark=spark, conf=conf)
    raise BadInput(f"engine {engine!r}", expected=" | ".join(ENGINES))


_IDENT_SAFE = re.compile(r"[^A-Za-z0-9_]")


def view_name(*parts: object) -> str:
    """A flat identifier for an engine that has no per-trace schemas (Spark temp views)."""
    return "__th_" + "_".join(_IDENT_SAFE.sub("_", str(p)) for p in parts)
