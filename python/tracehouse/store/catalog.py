"""The catalog: one SQLite database (`catalog.sqlite`) describing a whole store.

Owns the tables for traces (and their key/value metadata), formats and their
event types (stored once per format, or per trace for a trace created with
`own_types`: line protocol, where two buckets may type one measurement differently),
producers, segments, analysis results and the link between results and traces. Every change that must be atomic
(registering segments together with the WAL range they cover, retiring
compacted segments, deleting a trace) is one SQLite transaction here.
Nothing in this module reads or writes event data.

A catalog SQLite cannot read (`database disk image is malformed`, `file is not a database`, a
catalog cut to nothing) raises `StoreDamaged` naming the file and `tracehouse repair`, from
every query (`_Db`), never a bare sqlite3 error. What the catalog holds can be rebuilt from
the files (`store/repair.py`): each trace directory keeps a journal of its catalog rows
(`store/journal.py`) and each segment says what it holds.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import AlreadyExists, BadInput, DiskFull, NotFound, StoreDamaged, is_disk_full
from ..schema import Column, EventType

SCHEMA_VERSION = 1

RESULTS_COLUMNS = """
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: a deleted result's id names nothing else
    kind TEXT NOT NULL CHECK (kind IN ('annotation','group','search','processed','file','table')),
    name TEXT NOT NULL,
    tool TEXT NOT NULL,
    params TEXT NOT NULL DEFAULT '{}',
    created REAL NOT NULL,
    payload TEXT,                    -- JSON for small results
    path TEXT,                       -- relative path of a file or table (Parquet) result
    checksum INTEGER                 -- CRC-32 of the file at `path` (verify compares)"""

DDL = (
    """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS formats(
    name TEXT PRIMARY KEY,
    description TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS event_types(
    id INTEGER PRIMARY KEY,
    format TEXT NOT NULL REFERENCES formats(name),
    name TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('instant','span','begin','end','counter','link')),
    params TEXT NOT NULL,            -- JSON list of {name, type, unit, doc[, key]}
    doc TEXT NOT NULL DEFAULT '',
    key TEXT NOT NULL DEFAULT '',    -- the source's name of the type where it differs (schema.EventType)
    UNIQUE(format, name)
);
CREATE TABLE IF NOT EXISTS traces(
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    format TEXT NOT NULL REFERENCES formats(name),
    description TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,           -- unix seconds
    ts_min INTEGER,                  -- ns, over registered segments
    ts_max INTEGER,
    event_count INTEGER NOT NULL DEFAULT 0,
    bytes INTEGER NOT NULL DEFAULT 0,
    wal_covered INTEGER NOT NULL DEFAULT -1,  -- WAL files numbered <= this are in segments
    state TEXT NOT NULL DEFAULT 'live' CHECK (state IN ('live','deleting')),
    own_types INTEGER NOT NULL DEFAULT 0,  -- 1: its event types are its own (trace_event_types)
    incomplete TEXT                  -- NULL, or why the trace is incomplete (see INCOMPLETE_*)
);
CREATE TABLE IF NOT EXISTS trace_event_types(
    id INTEGER PRIMARY KEY,
    trace_id INTEGER NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('instant','span','begin','end','counter','link')),
    params TEXT NOT NULL,            -- JSON list of {name, type, unit, doc[, key]}
    doc TEXT NOT NULL DEFAULT '',
    key TEXT NOT NULL DEFAULT '',    -- the source's name of the type where it differs (schema.EventType)
    UNIQUE(trace_id, name)
);
CREATE TABLE IF NOT EXISTS trace_metadata(
    trace_id INTEGER NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY(trace_id, key)
);
CREATE TABLE IF NOT EXISTS producers(
    trace_id INTEGER NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
    id INTEGER NOT NULL,
    parent INTEGER,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    attrs TEXT NOT NULL DEFAULT '{}',  -- JSON object: typed attributes
    PRIMARY KEY(trace_id, id)
);
CREATE TABLE IF NOT EXISTS segments(
    id INTEGER PRIMARY KEY,
    trace_id INTEGER NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
    event_type TEXT NOT NULL,
    path TEXT NOT NULL,              -- relative to the store root
    rows INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    ts_min INTEGER,
    ts_max INTEGER,
    columns TEXT NOT NULL,           -- JSON list of column names in the file
    level INTEGER NOT NULL DEFAULT 0,  -- 0 = flushed from the WAL, n = compacted n times
    created REAL NOT NULL,
    retired REAL,                    -- set when compaction replaced it; file deleted after a grace period
    damaged TEXT                     -- NULL, or what a check found wrong with its file (queries naming it fail)
);
CREATE INDEX IF NOT EXISTS segments_live ON segments(trace_id, event_type) WHERE retired IS NULL;
CREATE TABLE IF NOT EXISTS results("""
    + RESULTS_COLUMNS
    + """
);
CREATE TABLE IF NOT EXISTS result_traces(
    result_id INTEGER NOT NULL REFERENCES results(id) ON DELETE CASCADE,
    trace_id INTEGER NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
    PRIMARY KEY(result_id, trace_id)
);
"""
)

RESULT_KINDS = ("annotation", "group", "search", "processed", "file", "table")

# Why a trace is incomplete (`traces.incomplete`, th.traces.state = 'incomplete'). Each starts
# with its own prefix: whoever sets a mark clears only its own.
INCOMPLETE_IMPORT = "import did not finish"  # set when an import creates the trace, cleared when it ends
INCOMPLETE_CHECKPOINT = "checkpoint waiting for disk space"  # cleared by the next registered checkpoint
# Set by recovery when a WAL record it read was damaged: acknowledged rows may be lost. Never
# cleared by the store (it is true of the trace from then on); `wal_damage_reason` words it.
INCOMPLETE_WAL = "WAL damaged"


def wal_damage_reason(losses: list[dict], quarantined: str | None = None) -> str:
    """The incomplete mark of a trace whose WAL lost `losses` ({"file", "offset", "bytes", "rows",
    "reason"} each): how many records, bytes and rows were cut, and where."""
    nbytes = sum(x["bytes"] for x in losses)
    counted = [x["rows"] for x in losses if x.get("rows") is not None]
    rows = (
        f"{sum(counted):,} rows" + ("" if len(counted) == len(losses) else " + uncounted ones")
        if counted
        else "rows uncounted"
    )
    files = sorted({Path(x["file"]).name for x in losses})
    first = losses[0]
    where = f" (copies in {quarantined})" if quarantined else ""
    return (
        f"{INCOMPLETE_WAL}: {len(losses)} record(s), {nbytes:,} bytes ({rows}) cut from "
        f"{', '.join(files)}; first: {first['reason']}{where}"
    )


@dataclass(frozen=True)
class TraceInfo:
    id: int
    name: str
    format: str
    description: str
    created: float
    ts_min: int | None
    ts_max: int | None
    event_count: int
    bytes: int
    wal_covered: int
    own_types: bool  # its event types belong to it, not to its format (see trace_event_types)
    metadata: dict[str, str]
    state_reason: str | None = None  # why the trace is incomplete; None when complete

    @property
    def state(self) -> str:
        """'complete', or 'incomplete' (an import that did not finish, rows only in the WAL)."""
        return "complete" if self.state_reason is None else "incomplete"

    def to_json(self) -> dict:
        d = dict(self.__dict__)
        d.pop("wal_covered")
        d.pop("own_types")
        d["state"] = self.state
        return d


@dataclass(frozen=True)
class SegmentInfo:
    id: int
    trace_id: int
    event_type: str
    path: str
    rows: int
    bytes: int
    ts_min: int | None
    ts_max: int | None
    columns: tuple[str, ...]
    level: int
    damaged: str | None = None  # what a check found wrong with its file (queries naming it fail)


# SQLite's answers that mean the file is not (or no longer) a catalog it can read.
_DAMAGED_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB


def catalog_damaged(path: Path, e: sqlite3.Error) -> StoreDamaged | None:
    """The StoreDamaged for `e` when it says the catalog file `path` is damaged, else None."""
    code = getattr(e, "sqlite_errorcode", None)
    text = str(e)
    if not (
        code in _DAMAGED_CODES
        or "malformed" in text
        or "not a database" in text
        or (isinstance(e, sqlite3.OperationalError) and text.startswith("no such table"))
    ):
        return None
    return StoreDamaged(
        f"the catalog {path} is damaged ({text}): `tracehouse verify` says what the store's files "
        "still hold, `tracehouse repair` rebuilds the catalog from them (the damaged one is kept "
        "in quarantine/)"
    )


# `"<trace>".events` is the view of every type of a trace: a type of that name made the views
# recurse ("infinite recursion detected") and its rows unreachable.
RESERVED_TYPE_NAMES = ("events",)


def _event_type(row) -> EventType:
    """An event type from its row: (name, kind, params, doc, key)."""
    return EventType(row[0], row[1], tuple(Column.from_json(p) for p in json.loads(row[2])), row[3], row[4])


def _check_new_name(db, table: str, key: str, value, et: EventType, owner: str) -> None:
    """A new event type's name is not reserved and does not differ only in case from one its
    owner has (SQL names are case-insensitive: `cpu`, `CPU` and `Cpu` would be one view, two of
    them unreachable)."""
    if et.name.lower() in RESERVED_TYPE_NAMES:
        raise BadInput(
            f"event type name {et.name!r} ({owner}) is reserved",
            expected="a name other than events (any case): the view of every event type of a trace",
        )
    row = db.execute(
        f"SELECT name FROM {table} WHERE {key} = ? AND name = ? COLLATE NOCASE", (value, et.name)
    ).fetchone()
    if row is not None:
        raise BadInput(
            f"event type {et.name!r} differs only in case from {row[0]!r} ({owner}): SQL names ignore "
            f"case, so both would be one view",
            expected=f"the name {row[0]!r} itself, or another name",
        )


def _extra_params(stored: EventType, et: EventType, owner: str) -> list[Column]:
    """The params of `et` that `stored` lacks; a kind or a param type other than stored's is an
    error."""
    if stored.kind != et.kind:
        raise BadInput(f"event type {et.name} of {owner} is stored with kind {stored.kind!r}, not {et.kind!r}")
    have = {p.name: p for p in stored.params}
    extra = []
    for p in et.params:
        if p.name not in have:
            extra.append(p)
        elif have[p.name].type != p.type:
            raise BadInput(
                f"parameter {p.name!r} of {et.name} ({owner}) is stored as {have[p.name].type}, not {p.type}",
                column=p.name,
            )
    return extra


def _check_param_names(et: EventType, stored: tuple = (), owner: str = "") -> None:
    """No two parameters of a type differ only in case (SQL names ignore case: a view of `a_b`
    and `A_B` read `a_b`'s values under both names)."""
    seen = {p.name.lower(): p.name for p in stored}
    for p in et.params:
        other = seen.setdefault(p.name.lower(), p.name)
        if other != p.name:
            raise BadInput(
                f"parameter {p.name!r} of {et.name} ({owner}) differs only in case from {other!r}: SQL names "
                "ignore case, so a query could not tell them apart",
                column=p.name,
                expected="parameter names that differ in more than case",
            )


def _guarded(path: Path, f, *args):
    """`f(*args)`, a sqlite3 error saying the catalog file is damaged raised as StoreDamaged."""
    try:
        return f(*args)
    except sqlite3.DatabaseError as e:
        raise (catalog_damaged(path, e) or e) from None


class _Cursor:
    """A sqlite3 cursor whose fetches raise StoreDamaged for a damaged catalog (rows are read lazily)."""

    __slots__ = ("cur", "db")

    def __init__(self, cur: sqlite3.Cursor, db: _Db) -> None:
        self.cur = cur
        self.db = db

    def fetchone(self):
        return self.db._call(self.cur.fetchone)

    def fetchall(self):
        return self.db._call(self.cur.fetchall)

    def __iter__(self):
        return iter(self.fetchall())

    @property
    def rowcount(self) -> int:
        return self.cur.rowcount

    @property
    def lastrowid(self):
        return self.cur.lastrowid


class _Db:
    """The catalog's SQLite connection: every call that finds the file damaged raises
    StoreDamaged naming it (`catalog_damaged`), not sqlite3's error (a traceback at the CLI,
    a 500 at the server).

    The connection is shared by the store's threads (check_same_thread=False), and CPython's
    sqlite3 frees the database handle in `close()` even while another thread is stepping a
    statement on it: a web UI job still reading the catalog when the server shut the store
    crashed the process (SIGSEGV in `sqlite3_step`). So `close()` waits for the calls in
    flight and later calls raise sqlite3's own "closed database" error. The count costs two
    uncontended lock round trips per call (~0.3 µs beside SQLite's ~5 µs for the cheapest query)."""

    __slots__ = ("con", "path", "_cond", "_busy", "_closed")

    def __init__(self, con: sqlite3.Connection, path: Path) -> None:
        self.con = con
        self.path = path
        self._cond = threading.Condition(threading.Lock())
        self._busy = 0
        self._closed = False

    def _call(self, f, *args):
        with self._cond:
            if self._closed:
                raise sqlite3.ProgrammingError(f"Cannot operate on a closed database ({self.path} was closed).")
            self._busy += 1
        try:
            return _guarded(self.path, f, *args)
        finally:
            with self._cond:
                self._busy -= 1
                if not self._busy:
                    self._cond.notify_all()

    def execute(self, sql: str, args=()) -> _Cursor:
        return _Cursor(self._call(self.con.execute, sql, args), self)

    def executemany(self, sql: str, rows) -> _Cursor:
        return _Cursor(self._call(self.con.executemany, sql, rows), self)

    def executescript(self, sql: str) -> None:
        self._call(self.con.executescript, sql)

    @property
    def in_transaction(self) -> bool:
        return self.con.in_transaction

    def close(self) -> None:
        with self._cond:
            self._closed = True
            while self._busy:
                self._cond.wait()
            self.con.close()


class _HeldVersionRead:
    """The catalog's version read through SQLite's C API without letting go of the interpreter's
    lock (ctypes.PyDLL keeps it through the call): `Catalog.version_held`.

    Why: CPython's sqlite3 lets go of it around every step, and a thread that let go waits to get
    it back while the process's other threads run. A kept query of the embedded read path reads
    the version once (store/query.py `_kept`); 20 clients of one process, interleaved rounds, ms
    per client (load 8-9): Q1.1 30.1 -> 22.1, Q4.1 29.9 -> 18.6, Q4.2 67.1 -> 56.6, Q1.2 122.3
    -> 108.7 (DuckDB's own file 27.0, 23.1, 75.8, 120.5). One read-only handle of the same
    SQLite library the sqlite3 module uses (checked by its version), stepped by one thread at a
    time: a thread that finds it busy, a step that does not give the row (SQLITE_BUSY), or no such
    library returns None and the caller reads as before."""

    _lib: Any = None

    def __init__(self, path: Path | None) -> None:
        self._lock = threading.Lock()
        self._stmt = self._db = None
        lib = self._library() if path is not None else None  # (None: a closed catalog's)
        if lib is None:
            return
        import ctypes

        db, stmt = ctypes.c_void_p(), ctypes.c_void_p()
        if lib.sqlite3_open_v2(f"file:{path}?mode=ro".encode(), ctypes.byref(db), 0x01 | 0x40, None) != 0:
            lib.sqlite3_close_v2(db)
            return
        self._db = db.value
        if lib.sqlite3_prepare_v2(db, b"SELECT value FROM meta WHERE key='version'", -1, ctypes.byref(stmt), None):
            self.close()
            return
        self._stmt = stmt.value

    @classmethod
    def _library(cls):
        if cls._lib is None:
            import ctypes
            import ctypes.util

            cls._lib = False
            name = ctypes.util.find_library("sqlite3")
            try:
                lib = ctypes.PyDLL(name) if name else None
            except OSError:
                lib = None
            if lib is not None:
                lib.sqlite3_libversion.restype = ctypes.c_char_p
                lib.sqlite3_column_int64.restype = ctypes.c_int64
                lib.sqlite3_column_int64.argtypes = [ctypes.c_void_p, ctypes.c_int]
                for f in ("sqlite3_step", "sqlite3_reset", "sqlite3_finalize", "sqlite3_close_v2"):
                    getattr(lib, f).argtypes = [ctypes.c_void_p]
                if lib.sqlite3_libversion().decode() == sqlite3.sqlite_version:
                    cls._lib = lib
        return cls._lib or None

    def read(self) -> int | None:
        if self._stmt is None or not self._lock.acquire(blocking=False):
            return None
        try:
            if self._stmt is None:
                return None
            lib = self._lib
            rc = lib.sqlite3_step(self._stmt)
            v = lib.sqlite3_column_int64(self._stmt, 0) if rc == 100 else None  # SQLITE_ROW
            lib.sqlite3_reset(self._stmt)
            return v
        finally:
            self._lock.release()

    def close(self) -> None:
        with self._lock:
            if self._stmt is not None:
                self._lib.sqlite3_finalize(self._stmt)
            if self._db is not None:
                self._lib.sqlite3_close_v2(self._db)
            self._stmt = self._db = None


class Catalog:
    """SQLite catalog of one store. Safe to open from many processes."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        # The connection is shared by the store's threads (caller, flusher, checkpoints): SQLite
        # has one transaction per connection, so a second thread's BEGIN failed with
        # "cannot start a transaction within a transaction". Transactions take turns.
        self._tx_lock = threading.RLock()
        self._held: _HeldVersionRead | None = None  # (made on first use: `version_held`)
        if readonly:
            uri = f"file:{self.path}?mode=ro"
            con = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=30)
        else:
            con = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        self.db = _Db(con, self.path)
        self._type_key_columns: dict[str, str] = {}  # (see _type_key)
        try:
            self._open(readonly)
        except BaseException:
            con.close()
            raise

    def _open(self, readonly: bool) -> None:
        if not readonly:
            self.db.execute("PRAGMA journal_mode=WAL")
            # FULL: a registered segment must survive power loss before its WAL range is dropped.
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.executescript(DDL)
            # Columns added since the first stores were made (another process may add one first).
            for table, col, decl in (
                ("traces", "own_types", "INTEGER NOT NULL DEFAULT 0"),
                ("traces", "incomplete", "TEXT"),
                ("segments", "damaged", "TEXT"),
                ("results", "checksum", "INTEGER"),
                ("event_types", "key", "TEXT NOT NULL DEFAULT ''"),
                ("trace_event_types", "key", "TEXT NOT NULL DEFAULT ''"),
            ):
                if col not in self._columns(table):
                    try:
                        self.db.execute(f"ALTER TABLE {table} ADD COLUMN {col} {decl}")
                    except sqlite3.OperationalError as e:
                        if "duplicate column" not in str(e):
                            raise
            self.db.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?), ('version', '0')",
                (str(SCHEMA_VERSION),),
            )
            self._results_autoincrement()
        self.db.execute("PRAGMA foreign_keys=ON")
        cols = self._columns("traces")
        if not cols:  # (a read-only open of a file SQLite reads, but no catalog: cut to nothing)
            self.db.execute("SELECT 1 FROM traces")  # raises StoreDamaged naming the file
        # A read-only open of a store made before per-trace types cannot add the column: such a
        # store has no trace that owns its types. Nor one made before incomplete marks: NULL,
        # complete; nor one made before damage marks or result checksums.
        self.per_trace_types = "own_types" in cols
        self.incomplete_col = "incomplete" if "incomplete" in cols else "NULL"
        self.damaged_col = "damaged" if "damaged" in self._columns("segments") else "NULL"
        self.checksum_col = "checksum" if "checksum" in self._columns("results") else "NULL"
        self._trace_cols = (
            self._TRACE_COLS if self.per_trace_types else self._TRACE_COLS.replace("own_types", "0 AS own_types")
        ) + f", {self.incomplete_col}"

    @staticmethod
    def _prefixed(alias: str, col: str) -> str:
        """`alias.col`, or NULL for a column this (older, read-only) catalog does not have."""
        return col if col == "NULL" else f"{alias}.{col}"

    def _columns(self, table: str) -> set[str]:
        return {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}

    def _results_autoincrement(self) -> None:
        """Stores made before result ids were AUTOINCREMENT reused the id of a deleted
        result for the next one (a saved id then named another result): their results
        table is rebuilt with AUTOINCREMENT, rows and ids kept (SQLite's documented
        table rebuild; foreign keys are still off here, so result_traces is untouched)."""

        def old() -> bool:
            row = self.db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'results'").fetchone()
            return row is not None and "AUTOINCREMENT" not in row[0].upper()

        if not old():
            return
        with self.transaction() as db:
            if not old():  # another process migrated it first
                return
            db.execute("DROP TABLE IF EXISTS results_autoincrement")
            db.execute(f"CREATE TABLE results_autoincrement({RESULTS_COLUMNS}\n)")
            db.execute(
                "INSERT INTO results_autoincrement(id, kind, name, tool, params, created, payload, path)"
                " SELECT id, kind, name, tool, params, created, payload, path FROM results"
            )
            db.execute("DROP TABLE results")
            db.execute("ALTER TABLE results_autoincrement RENAME TO results")

    def close(self) -> None:
        with self._tx_lock:
            held, self._held = self._held, _HeldVersionRead(None)
        if held is not None:
            held.close()
        self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; bumps the catalog version readers use to refresh views."""
        with self._tx_lock:
            try:
                self.db.execute("BEGIN IMMEDIATE")
                try:
                    yield self.db
                    self.db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'version'")
                    self.db.execute("COMMIT")
                except BaseException:
                    if self.db.in_transaction:  # SQLITE_FULL may have rolled it back already
                        self.db.execute("ROLLBACK")
                    raise
            except sqlite3.OperationalError as e:
                if is_disk_full(e):
                    raise DiskFull(f"no space left for the catalog {self.path}: {e}") from e
                raise

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every query inside sees the same committed catalog (a
        reader pairing the registered segments with the trace's covered WAL number)."""
        with self._tx_lock:
            self.db.execute("BEGIN")
            try:
                yield self.db
            finally:
                self.db.execute("COMMIT")

    def version(self) -> int:
        # Not inside another thread's transaction of the shared connection (`snapshot`'s BEGIN):
        # it would read that transaction's older state, and a reader whose views looked current
        # by it (store/query.py `_kept`, no engine lock) would miss a write acknowledged since.
        with self._tx_lock:
            return int(self.db.execute("SELECT value FROM meta WHERE key='version'").fetchone()[0])

    def version_held(self) -> int:
        """`version()`, read without letting go of the interpreter's lock where it can be
        (`_HeldVersionRead`: a query path that reads it once per query from many threads)."""
        held = self._held
        if held is None:
            with self._tx_lock:
                if self._held is None:
                    self._held = _HeldVersionRead(self.path)
                held = self._held
        v = held.read()
        return self.version() if v is None else v

    # -- formats and event types -------------------------------------------------

    def ensure_format(self, name: str, description: str = "") -> None:
        # Known: no write transaction (each commits with an fsync and bumps the version readers
        # refresh their views on).
        if self.db.execute("SELECT 1 FROM formats WHERE name = ?", (name,)).fetchone():
            return
        with self.transaction() as db:
            db.execute("INSERT OR IGNORE INTO formats(name, description) VALUES (?, ?)", (name, description))

    def event_types(self, fmt: str) -> dict[str, EventType]:
        """The event types of format `fmt` (shared by its traces that do not own theirs)."""
        return self._types("event_types", "format", fmt)

    def trace_types(self, info: TraceInfo) -> dict[str, EventType]:
        """The event types trace `info` reads and writes: its own, or its format's."""
        return (
            self._types("trace_event_types", "trace_id", info.id) if info.own_types else self.event_types(info.format)
        )

    def _types(self, table: str, key: str, value) -> dict[str, EventType]:
        rows = self.db.execute(
            f"SELECT name, kind, params, doc, {self._type_key(table)} FROM {table} WHERE {key} = ? ORDER BY id",
            (value,),
        ).fetchall()
        return {r[0]: _event_type(r) for r in rows}

    def _type_key(self, table: str) -> str:
        """The `key` column of an event type table, or '' in a store made before it that a
        read-only open could not widen."""
        known = self._type_key_columns.get(table)
        if known is None:
            known = self._type_key_columns[table] = "key" if "key" in self._columns(table) else "''"
        return known

    def put_event_type(self, fmt: str, et: EventType, trace: TraceInfo | None = None) -> EventType:
        """Register `et` under `fmt` (or, for a `trace` that owns its types, under that trace),
        or widen the stored type with new params.

        Existing params keep their type: a conflicting type or kind is an error.
        Returns the stored (possibly widened) type.
        """
        if trace is not None and trace.own_types:
            table, key, value, owner = "trace_event_types", "trace_id", trace.id, f"trace {trace.name!r}"
        else:
            table, key, value, owner = "event_types", "format", fmt, f"format {fmt!r}"
        select = f"SELECT name, kind, params, doc, key FROM {table} WHERE {key} = ? AND name = ?"
        row = self.db.execute(select, (value, et.name)).fetchone()
        if row is not None and not _extra_params(_event_type(row), et, owner):
            # Known already: no write transaction (each commits with an fsync and bumps the
            # version readers refresh their views on; a `tracehouse record` of 8 known types made 8).
            return _event_type(row)
        with self.transaction() as db:
            row = db.execute(select, (value, et.name)).fetchone()
            if row is None:
                _check_new_name(db, table, key, value, et, owner)
                _check_param_names(et, owner=owner)
                db.execute(
                    f"INSERT INTO {table}({key}, name, kind, params, doc, key) VALUES (?, ?, ?, ?, ?, ?)",
                    (value, et.name, et.kind, json.dumps(et.params_json()), et.doc, et.key),
                )
                return et
            stored = _event_type(row)
            extra = _extra_params(stored, et, owner)
            if not extra:
                return stored
            _check_param_names(EventType(et.name, et.kind, tuple(extra)), stored.params, owner)
            widened = stored.with_params(extra)
            db.execute(
                f"UPDATE {table} SET params = ? WHERE {key} = ? AND name = ?",
                (json.dumps(widened.params_json()), value, et.name),
            )
            return widened

    # -- traces ------------------------------------------------------------------

    def create_trace(
        self,
        name: str,
        fmt: str,
        description: str,
        metadata: dict[str, Any],
        *,
        own_types: bool = False,
        incomplete: str | None = None,
    ) -> int:
        with self.transaction() as db:
            # Case-insensitive: a trace is a SQL schema and DuckDB matches identifiers ignoring
            # case, so "App" and "app" would share (and overwrite) one set of views.
            row = db.execute("SELECT name FROM traces WHERE name = ? COLLATE NOCASE", (name,)).fetchone()
            if row:
                same = "" if row[0] == name else f" (as {row[0]!r}: trace names are case-insensitive in SQL)"
                raise AlreadyExists(f"trace {name!r} already exists{same}")
            db.execute("INSERT OR IGNORE INTO formats(name) VALUES (?)", (fmt,))
            # Ids are never reused (SQLite gives a deleted last row's id again): a reader in another
            # process keys what it cached of a trace by it, and a directory named by an id the catalog
            # no longer knows must stay someone else's (below).
            top = db.execute("SELECT coalesce(max(id), 0) FROM traces").fetchone()[0]
            row = db.execute("SELECT value FROM meta WHERE key = 'next_trace_id'").fetchone()
            tid = max(int(top) + 1, int(row[0]) if row else 1)
            db.execute(
                "INSERT INTO traces(id, name, format, description, created, own_types, incomplete)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (tid, name, fmt, description, time.time(), int(own_types), incomplete),
            )
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('next_trace_id', ?)", (str(tid + 1),))
            # A directory under that id holds another trace's files the catalog lost (a damaged
            # catalog): the id is not taken over, nothing is created (the transaction rolls back).
            taken = self.path.parent / "traces" / str(tid)
            if taken.exists():
                raise StoreDamaged(
                    f"the catalog {self.path} does not know the directory {taken}, which the new "
                    f"trace {name!r} would take over: nothing was created. `tracehouse verify` says "
                    "what the files hold, `tracehouse repair` rebuilds the catalog from them"
                )
            db.executemany(
                "INSERT INTO trace_metadata(trace_id, key, value) VALUES (?, ?, ?)",
                [(tid, str(k), str(v)) for k, v in metadata.items()],
            )
            return tid

    def _trace_from_row(self, r: tuple) -> TraceInfo:
        md = dict(self.db.execute("SELECT key, value FROM trace_metadata WHERE trace_id = ?", (r[0],)).fetchall())
        return TraceInfo(*r[:10], own_types=bool(r[10]), metadata=md, state_reason=r[11])

    _TRACE_COLS = "id, name, format, description, created, ts_min, ts_max, event_count, bytes, wal_covered, own_types"

    def trace(self, name: str) -> TraceInfo:
        r = self.db.execute(
            f"SELECT {self._trace_cols} FROM traces WHERE name = ? AND state = 'live'", (name,)
        ).fetchone()
        if r is None:
            raise NotFound(f"no trace named {name!r} in {self.path.parent}")
        return self._trace_from_row(r)

    def traces(self, where: str = "", args: tuple = ()) -> list[TraceInfo]:
        sql = f"SELECT {self._trace_cols} FROM traces WHERE state = 'live'"
        if where:
            sql += f" AND ({where})"
        rows = self.db.execute(sql + " ORDER BY name", args).fetchall()
        return [self._trace_from_row(r) for r in rows]

    def set_metadata(self, trace_id: int, metadata: dict[str, Any]) -> None:
        with self.transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO trace_metadata(trace_id, key, value) VALUES (?, ?, ?)",
                [(trace_id, str(k), str(v)) for k, v in metadata.items()],
            )

    def set_incomplete(self, trace_id: int, reason: str | None, *, only_if: str | None = None) -> None:
        """Mark the trace incomplete with `reason`, or complete (None). `only_if`: change it only
        while its reason starts with this prefix (each marker clears only its own mark)."""
        with self.transaction() as db:
            if only_if is None:
                db.execute("UPDATE traces SET incomplete = ? WHERE id = ?", (reason, trace_id))
            else:
                db.execute(
                    "UPDATE traces SET incomplete = ? WHERE id = ? AND substr(incomplete, 1, ?) = ?",
                    (reason, trace_id, len(only_if), only_if),
                )

    def wal_covered(self, trace_id: int) -> int:
        return int(self.db.execute("SELECT wal_covered FROM traces WHERE id = ?", (trace_id,)).fetchone()[0])

    def mark_deleting(self, trace_id: int) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE traces SET state = 'deleting', name = name || '#deleting#' || id WHERE id = ?", (trace_id,)
            )

    def deleting(self) -> list[int]:
        return [r[0] for r in self.db.execute("SELECT id FROM traces WHERE state = 'deleting'")]

    def drop_trace_rows(self, trace_id: int) -> None:
        with self.transaction() as db:
            db.execute("DELETE FROM segments WHERE trace_id = ?", (trace_id,))
            db.execute("DELETE FROM producers WHERE trace_id = ?", (trace_id,))
            db.execute("DELETE FROM trace_event_types WHERE trace_id = ?", (trace_id,))
            db.execute("DELETE FROM trace_metadata WHERE trace_id = ?", (trace_id,))
            db.execute("DELETE FROM result_traces WHERE trace_id = ?", (trace_id,))
            db.execute("DELETE FROM traces WHERE id = ?", (trace_id,))

    # -- producers ---------------------------------------------------------------

    def put_producers(self, trace_id: int, rows: list[dict]) -> None:
        """Insert or replace producers: dicts with id, parent, kind, name, attrs."""
        with self.transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO producers(trace_id, id, parent, kind, name, attrs) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (trace_id, int(r["id"]), r.get("parent"), r["kind"], r["name"], json.dumps(r.get("attrs") or {}))
                    for r in rows
                ],
            )

    def producers(self, trace_id: int) -> list[dict]:
        rows = self.db.execute(
            "SELECT id, parent, kind, name, attrs FROM producers WHERE trace_id = ? ORDER BY id", (trace_id,)
        ).fetchall()
        return [{"id": r[0], "parent": r[1], "kind": r[2], "name": r[3], "attrs": json.loads(r[4])} for r in rows]

    def next_producer_id(self, trace_id: int) -> int:
        r = self.db.execute("SELECT MAX(id) FROM producers WHERE trace_id = ?", (trace_id,)).fetchone()
        return 0 if r[0] is None else int(r[0]) + 1

    # -- segments ----------------------------------------------------------------

    def register_segments(
        self,
        trace_id: int,
        segments: list[dict],
        *,
        wal_covered: int | None = None,
        retire: list[int] = (),
    ) -> list[int]:
        """Register written segment files in one transaction.

        `wal_covered` advances the trace's covered WAL number (flush);
        `retire` marks replaced segments (compaction). Trace statistics are
        recomputed from the live segments in the same transaction.
        """
        now = time.time()
        with self.transaction() as db:
            if retire:
                n = db.execute(
                    f"UPDATE segments SET retired = ? WHERE retired IS NULL AND trace_id = ? AND id IN ({','.join('?' * len(retire))})",
                    (now, trace_id, *retire),
                ).rowcount
                if n != len(retire):
                    raise RuntimeError(f"compaction raced: {len(retire) - n} of its input segments are gone")
            ids = []
            for s in segments:
                cur = db.execute(
                    "INSERT INTO segments(trace_id, event_type, path, rows, bytes, ts_min, ts_max, columns, level, created)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        trace_id,
                        s["event_type"],
                        s["path"],
                        s["rows"],
                        s["bytes"],
                        s["ts_min"],
                        s["ts_max"],
                        json.dumps(list(s["columns"])),
                        s.get("level", 0),
                        now,
                    ),
                )
                ids.append(int(cur.lastrowid))
            db.execute(
                "UPDATE traces SET (event_count, bytes, ts_min, ts_max) = "
                "(SELECT COALESCE(SUM(rows), 0), COALESCE(SUM(bytes), 0), MIN(ts_min), MAX(ts_max)"
                "   FROM segments WHERE trace_id = ? AND retired IS NULL) WHERE id = ?",
                (trace_id, trace_id),
            )
            if wal_covered is not None:
                db.execute("UPDATE traces SET wal_covered = MAX(wal_covered, ?) WHERE id = ?", (wal_covered, trace_id))
            if not retire:  # a checkpoint that registers clears the mark of one that waited for disk space
                db.execute(
                    "UPDATE traces SET incomplete = NULL WHERE id = ? AND substr(incomplete, 1, ?) = ?",
                    (trace_id, len(INCOMPLETE_CHECKPOINT), INCOMPLETE_CHECKPOINT),
                )
            return ids

    def restore_trace(
        self,
        tid: int,
        name: str,
        fmt: str,
        description: str,
        created: float,
        metadata: dict,
        *,
        own_types: bool,
        incomplete: str | None,
        segments: list[dict],
        retired: list[dict],
        wal_covered: int,
    ) -> None:
        """Register a trace again under its own id, with its segments (`retired`: files a merge
        replaced, deleted after the grace period as usual), in one transaction (`repair`)."""
        now = time.time()
        with self.transaction() as db:
            db.execute("INSERT OR IGNORE INTO formats(name) VALUES (?)", (fmt,))
            db.execute(
                "INSERT INTO traces(id, name, format, description, created, own_types, incomplete, wal_covered)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (tid, name, fmt, description, created, int(own_types), incomplete, wal_covered),
            )
            db.executemany(
                "INSERT INTO trace_metadata(trace_id, key, value) VALUES (?, ?, ?)",
                [(tid, str(k), str(v)) for k, v in metadata.items()],
            )
            for rows, retired_at in ((segments, None), (retired, now)):
                db.executemany(
                    "INSERT INTO segments(trace_id, event_type, path, rows, bytes, ts_min, ts_max, columns, level,"
                    " created, retired) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            tid,
                            r["event_type"],
                            r["path"],
                            r["rows"],
                            r["bytes"],
                            r["ts_min"],
                            r["ts_max"],
                            json.dumps(list(r["columns"])),
                            r.get("level", 0),
                            now,
                            retired_at,
                        )
                        for r in rows
                    ],
                )
            db.execute(
                "UPDATE traces SET (event_count, bytes, ts_min, ts_max) = "
                "(SELECT COALESCE(SUM(rows), 0), COALESCE(SUM(bytes), 0), MIN(ts_min), MAX(ts_max)"
                "   FROM segments WHERE trace_id = ? AND retired IS NULL) WHERE id = ?",
                (tid, tid),
            )

    def restore_result(self, r: dict, trace_ids: list[int]) -> None:
        """Register a result again under its own id (`repair`, from a damaged catalog it could read)."""
        with self.transaction() as db:
            db.execute(
                "INSERT INTO results(id, kind, name, tool, params, created, payload, path, checksum)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    r["id"],
                    r["kind"],
                    r["name"],
                    r["tool"],
                    json.dumps(r["params"]),
                    r["created"],
                    None if r["payload"] is None else json.dumps(r["payload"]),
                    r["path"],
                    r.get("checksum"),
                ),
            )
            db.executemany(
                "INSERT INTO result_traces(result_id, trace_id) VALUES (?, ?)", [(r["id"], t) for t in trace_ids]
            )

    def segments(self, trace_id: int, event_type: str | None = None) -> list[SegmentInfo]:
        sql = (
            "SELECT id, trace_id, event_type, path, rows, bytes, ts_min, ts_max, columns, level,"
            f" {self.damaged_col} FROM segments WHERE trace_id = ? AND retired IS NULL"
        )
        args: tuple = (trace_id,)
        if event_type is not None:
            sql += " AND event_type = ?"
            args += (event_type,)
        rows = self.db.execute(sql + " ORDER BY ts_min, id", args).fetchall()
        return [SegmentInfo(*r[:8], tuple(json.loads(r[8])), r[9], r[10]) for r in rows]

    def all_live_segments(self) -> list[SegmentInfo]:
        rows = self.db.execute(
            "SELECT s.id, s.trace_id, s.event_type, s.path, s.rows, s.bytes, s.ts_min, s.ts_max, s.columns, s.level,"
            f" {self._prefixed('s', self.damaged_col)} FROM segments s JOIN traces t ON t.id = s.trace_id"
            " WHERE s.retired IS NULL AND t.state = 'live' ORDER BY s.trace_id, s.event_type, s.ts_min, s.id"
        ).fetchall()
        return [SegmentInfo(*r[:8], tuple(json.loads(r[8])), r[9], r[10]) for r in rows]

    def mark_damaged(self, segment_id: int, reason: str | None) -> None:
        """Record what a check found wrong with a segment's file (None: nothing); queries that
        read it then fail naming it (`query.type_view_sql`)."""
        with self.transaction() as db:
            db.execute("UPDATE segments SET damaged = ? WHERE id = ?", (reason, segment_id))

    def retired_before(self, cutoff: float) -> list[tuple[int, str]]:
        return self.db.execute(
            "SELECT id, path FROM segments WHERE retired IS NOT NULL AND retired < ?", (cutoff,)
        ).fetchall()

    def forget_segments(self, ids: list[int]) -> None:
        if not ids:
            return
        with self.transaction() as db:
            db.executemany("DELETE FROM segments WHERE id = ?", [(i,) for i in ids])

    def known_paths(self) -> set[str]:
        """Every segment file the catalog names (live, or retired and not yet deleted)."""
        return {r[0] for r in self.db.execute("SELECT path FROM segments")}

    def trace_ids(self) -> set[int]:
        """Ids of every trace the catalog holds, live or being deleted."""
        return {r[0] for r in self.db.execute("SELECT id FROM traces")}

    # -- results -----------------------------------------------------------------

    def add_result(
        self,
        kind: str,
        name: str,
        tool: str,
        params: dict,
        trace_ids: list[int],
        payload: Any = None,
        path: str | None = None,
        checksum: int | None = None,
    ) -> int:
        if kind not in RESULT_KINDS:
            raise BadInput(f"unknown result kind {kind!r}", expected=" | ".join(RESULT_KINDS))
        with self.transaction() as db:
            cur = db.execute(
                "INSERT INTO results(kind, name, tool, params, created, payload, path, checksum)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    kind,
                    name,
                    tool,
                    json.dumps(params),
                    time.time(),
                    None if payload is None else json.dumps(payload),
                    path,
                    checksum,
                ),
            )
            rid = int(cur.lastrowid)
            db.executemany(
                "INSERT INTO result_traces(result_id, trace_id) VALUES (?, ?)", [(rid, t) for t in trace_ids]
            )
            return rid

    def results(self, where: str = "", args: tuple = ()) -> list[dict]:
        sql = (
            "SELECT r.id, r.kind, r.name, r.tool, r.params, r.created, r.payload, r.path,"
            " (SELECT json_group_array(t.name) FROM result_traces rt JOIN traces t ON t.id = rt.trace_id"
            f"   WHERE rt.result_id = r.id), {self._prefixed('r', self.checksum_col)} FROM results r"
        )
        if where:
            sql += f" WHERE {where}"
        out = []
        for r in self.db.execute(sql + " ORDER BY r.id", args).fetchall():
            out.append(
                {
                    "id": r[0],
                    "kind": r[1],
                    "name": r[2],
                    "tool": r[3],
                    "params": json.loads(r[4]),
                    "created": r[5],
                    "payload": None if r[6] is None else json.loads(r[6]),
                    "path": r[7],
                    "traces": json.loads(r[8]),
                    "checksum": r[9],
                }
            )
        return out

    def delete_result(self, rid: int) -> None:
        with self.transaction() as db:
            db.execute("DELETE FROM results WHERE id = ?", (rid,))
