"""`Ingestor`: the server's one path from received bytes to durable rows.

Owns, for the store the server holds:
- line protocol → store: `write_lp_many` hands the bodies of a round to one native call
  (`_core.decode_lines_many` through `Store.write_round`, GIL released once) that decodes
  them into one batch per measurement and, when the round adds no producer, measurement or
  column, logs them too (WAL records, the fsync policy's step). A round that does add some
  comes back decoded: the tag sets it interned are registered as producers and the fields it
  added as event-type columns, then its batches are appended;
- Arrow IPC → store: `write_arrow_many` appends the batches of IPC streams (many
  requests' streams of one type as one append), creating or widening the event type
  from the stream's schema;
- decoder state per type scope (`_core.LpSchemas`: measurement → typed columns) and
  per-trace producer tables (`_core.LpProducers`: tag set → id), seeded from the
  catalog when the server starts, so a restart interns the same tag set to the same id.
  Traces created here own their event types (`own_types`): a bucket's `cpu` is typed by
  what was written to that bucket, so two buckets may type one measurement differently
  (older stores' traces keep their format's shared types);

Ordering rule (why acknowledged rows never point at unregistered producers or
columns): ids and columns are handed out monotonically by the decoder; before a
batch is appended, every producer id up to the batch's highest and every column
it carries is registered in the catalog (under a per-trace lock, taking *all*
pending registrations, which includes any other request's). A batch is appended
only after that; durability of the append implies durability of the catalog rows
(SQLite commits before the append starts). The one-call path keeps the rule by checking
it natively: it logs a round only when its highest producer id is at most the highest
registered one and every batch has exactly its stored type's columns.

All methods here are blocking and thread-safe; the dispatcher calls them for HTTP and
TCP writes alike.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from .. import _core
from ..errors import AlreadyExists, BadInput, NotFound
from ..schema import Column, EventType, check_ident, infer_event_type
from ..store import Store, lastrows
from ..store.store import check_trace_name
from .config import ServerConfig

log = logging.getLogger("tracehouse.server")

PRODUCER_KIND = "tags"  # kind of the producers made from line-protocol tag sets
ARROW_PRODUCER_KIND = "arrow"  # kind of the producers named by id in Arrow writes
LP_KIND = "instant"  # kind of the event types made from measurements
SOURCE = "tracehouse serve"  # metadata `source` of the traces created here (DROP DATABASE may remove only these)


@dataclass
class WriteResult:
    """What one write stored and what it refused."""

    trace: str
    rows: int = 0
    lines: int = 0
    errors: list[tuple[int, str]] = field(default_factory=list)  # (line, message), the first max_errors
    error_count: int = 0
    lsn: int | None = None  # wait for this to be durable before acknowledging
    last_line: int = 0

    def merge_error(self, line: int, message: str, limit: int) -> None:
        self.error_count += 1
        if len(self.errors) < limit:
            self.errors.append((line, message))


class _TypeState:
    """The decoder's view of one set of event types: a trace's own, or a format's shared ones."""

    def __init__(self, types: dict[str, EventType]) -> None:
        self.schemas = _core.LpSchemas()
        self.columns: dict[str, int] = {}  # event type -> params registered in the catalog
        self.lock = threading.Lock()
        for et in types.values():
            self.declare(et)

    def declare(self, et: EventType) -> None:
        """Tell the decoder about a stored type (string/int/float/bool params only)."""
        cols = [(p.name, p.type) for p in et.params]
        try:
            self.schemas.declare(et.name, cols, {p.name: p.key for p in et.params if p.key}, et.key or None)
        except ValueError as e:  # cannot happen for a type the catalog widened consistently
            log.warning("event type %s: %s", et.name, e)
        self.columns[et.name] = max(self.columns.get(et.name, 0), len(cols))


class _TraceState:
    def __init__(self, store: Store, name: str) -> None:
        self.name = name
        info = store.trace(name)
        self.id = info.id
        self.format = info.format
        # whose event types it writes: its own, or its format's (traces of older stores)
        self.types_key = ("trace", info.id) if info.own_types else ("format", info.format)
        self.producers = _core.LpProducers(store.next_producer_id(name))
        producers = store.producers(name)
        for p in producers:
            if p["kind"] == PRODUCER_KIND:
                self.producers.declare(int(p["id"]), [(str(k), str(v)) for k, v in (p["attrs"] or {}).items()])
        self.registered_max = self.producers.next_id - 1
        self.known_ids = {int(p["id"]) for p in producers}  # registered producers
        self.lock = threading.Lock()
        # event type -> the IPC schema message (bytes) last found declared
        self.arrow_schema_keys: dict[str, bytes] = {}


def _schema_key(body) -> bytes | None:
    """The bytes of an Arrow IPC stream's first message, its schema (equal bytes decode to equal
    schemas); None when `body` does not start with a whole message."""
    mv = memoryview(body)
    if len(mv) < 8:
        return None
    n = int.from_bytes(mv[0:4], "little", signed=True)
    start = 4
    if n == -1:  # the continuation marker of the current format (before 0.15: the length first)
        n, start = int.from_bytes(mv[4:8], "little", signed=True), 8
    if n <= 0 or start + n > len(mv):
        return None
    return bytes(mv[: start + n])


class Ingestor:
    """Owns the path from request bytes to appended rows for one store."""

    def __init__(self, store: Store, cfg: ServerConfig) -> None:
        self.store = store
        self.cfg = cfg
        self._lock = threading.Lock()
        self._types: dict[tuple, _TypeState] = {}
        self._traces: dict[str, _TraceState] = {}
        # tcp_*: what TCP connections stored and refused (an at-most-once sender sees no answer)
        self.stats = {"rows": 0, "lines": 0, "line_errors": 0, "requests": 0, "tcp_rows": 0, "tcp_lines_refused": 0}
        self._stats_lock = threading.Lock()

    def _count(self, **kw: int) -> None:
        with self._stats_lock:
            for k, v in kw.items():
                self.stats[k] += v
            self.stats["requests"] += 1

    def count_tcp(self, *, rows: int, refused: int) -> None:
        with self._stats_lock:
            self.stats["tcp_rows"] += rows
            self.stats["tcp_lines_refused"] += refused

    # -- state ---------------------------------------------------------------------

    def _types_of(self, trace: _TraceState) -> _TypeState:
        st = self._types.get(trace.types_key)
        if st is None:
            with self._lock:
                st = self._types.get(trace.types_key)
                if st is None:
                    st = self._types[trace.types_key] = _TypeState(self.store.event_types(trace.name))
        return st

    def trace(self, name: str, *, create: bool | None = None) -> _TraceState:
        """The state of trace `name`, creating the trace when allowed."""
        st = self._traces.get(name)
        if st is not None:
            return st
        with self._lock:
            st = self._traces.get(name)
            if st is not None:
                return st
            check_trace_name(name)
            try:
                self.store.trace(name)
            except NotFound:
                same = [t.name for t in self.store.traces() if t.name.lower() == name.lower()]
                if same:  # (a bucket is a SQL schema: names that differ only in case are one)
                    raise BadInput(
                        f"bucket (trace) {name!r} differs only in case from the trace {same[0]!r}: "
                        "trace names are case-insensitive in SQL",
                        expected=f"the name {same[0]!r}",
                    ) from None
                if not (self.cfg.create_traces if create is None else create):
                    raise NotFound(
                        f"bucket (trace) {name!r} not found; create it first or serve with trace creation on"
                    ) from None
                try:
                    self.store.create_trace(
                        name,
                        self.cfg.format,
                        description="live ingest (tracehouse serve)",
                        # the last row of each series kept on write (store/lastrows.py: lastpoint)
                        metadata={"source": SOURCE, lastrows.LAST_META: lastrows.SERIES},
                        own_types=True,
                        format_description="InfluxDB line protocol: measurement -> event type, "
                        "tag set -> producer, fields -> columns",
                    )
                    log.info("created trace %s", name)
                except AlreadyExists as e:  # another thread made it, or one of another case did meanwhile
                    if not any(t.name == name for t in self.store.traces()):
                        raise BadInput(str(e)) from None
            st = self._traces[name] = _TraceState(self.store, name)
            return st

    def drop_trace(self, name: str) -> None:
        """Delete trace `name` (InfluxQL `DROP DATABASE`); a later write to it creates it anew."""
        with self._lock:
            st = self._traces.pop(name, None)
            if st is not None and st.types_key[0] == "trace":
                self._types.pop(st.types_key, None)
            self.store.rm(name)

    # -- line protocol -------------------------------------------------------------

    def write_lp(
        self, trace: str, body: bytes, *, precision: str = "ns", default_ts: int | None = None, first_line: int = 1
    ) -> WriteResult:
        """Decode and append `body`; returns what was stored, what was refused and the LSN to await."""
        return self.write_lp_many(trace, [(body, precision, default_ts, first_line)])[0]

    def write_lp_many(
        self, trace: str, items: list[tuple[bytes, str, int | None, int]], *, awaited: bool = True
    ) -> list[WriteResult]:
        """Several bodies (body, precision, default_ts, first_line) decoded in one pass into one
        batch per measurement (each body keeps its line numbers, errors and row counts) and
        appended together: many small concurrent requests cost one WAL record and one LSN.
        `awaited`: someone waits for these rows to be durable (see `_pace_commits`)."""
        st = self.trace(trace)
        self._pace_commits(trace, awaited)
        fst = self._types_of(st)
        cfg = self.cfg
        now = time.time_ns()
        inputs = [
            (body, precision, now if default_ts is None else default_ts, first_line)
            for body, precision, default_ts, first_line in items
        ]
        # Rows come numbered per producer (the writer's counters) in the stored layout. A round
        # that adds no producer, measurement or column is logged by the decoding call itself,
        # under the writer's lock (Store.write_round); any other comes back for the catalog
        # rows to be registered first, then appended below. A measurement refused after
        # decoding (e.g. its name is a type of another kind) leaves a gap in its producers' numbers.
        d = self.store.write_round(
            trace,
            lambda log: _core.decode_lines_many(
                inputs,
                fst.schemas,
                st.producers,
                seq=self.store.seq_counters(trace),
                max_line=cfg.max_line,
                max_producers=cfg.max_producers,
                max_columns=cfg.max_columns,
                max_errors=cfg.max_errors,
                registered_max=st.registered_max,
                **log,
            ),
        )
        results = [
            WriteResult(
                trace,
                lines=b["lines"],
                errors=list(b["errors"]),
                error_count=b["error_count"],
                last_line=b["last_line"],
            )
            for b in d["bodies"]
        ]
        stored: list = d["lsns"]  # per batch: its LSN, or the BadInput that refused that measurement
        if None in stored:
            if d["max_producer"] > st.registered_max:
                self._register_producers(st, d["max_producer"])
            for i, (name, batch) in enumerate(d["batches"]):
                if stored[i] is not None:
                    continue
                try:
                    self._ensure_columns(st, fst, name, batch.num_columns - 3)
                    stored[i] = self.store.append(trace, name, batch)
                except BadInput as e:  # e.g. the type exists with another kind: that measurement only
                    stored[i] = e
        for res, body in zip(results, d["bodies"]):
            for i, n in body["rows_by_batch"]:
                got = stored[i]
                if isinstance(got, BaseException):
                    name = d["batches"][i][0]
                    res.merge_error(0, f"measurement {name!r} ({n} rows) not stored: {got}", cfg.max_errors)
                else:
                    res.rows += n
                    res.lsn = got if res.lsn is None else max(res.lsn, got)
        for res in results:
            self._count(rows=res.rows, lines=res.lines, line_errors=res.error_count)
        return results

    def _register_producers(self, st: _TraceState, upto: int) -> None:
        with st.lock:
            if upto <= st.registered_max:
                return  # another request registered them meanwhile
            new = st.producers.take_new()
            if new:
                self.store.add_producers(
                    st.name,
                    [
                        {"id": pid, "parent": None, "kind": PRODUCER_KIND, "name": name, "attrs": dict(tags)}
                        for pid, name, tags in new
                    ],
                )
                st.registered_max = max(st.registered_max, max(p[0] for p in new))
                st.known_ids.update(p[0] for p in new)

    def _ensure_columns(self, st: _TraceState, fst: _TypeState, name: str, ncols: int) -> None:
        if fst.columns.get(name, -1) >= ncols:
            return
        with fst.lock:
            if fst.columns.get(name, -1) >= ncols:
                return
            cols = fst.schemas.columns(name) or []
            keys = fst.schemas.keys(name)
            et = EventType(
                name,
                LP_KIND,
                tuple(Column(c, t, "", "line-protocol field", key=keys.get(c, "")) for c, t in cols),
                doc="line-protocol measurement",
                key=fst.schemas.measurement_key(name) or "",
            )
            stored = self.store.add_event_type(st.name, et)
            fst.columns[name] = len(stored.params)

    # -- Arrow IPC -----------------------------------------------------------------

    def write_arrow(self, trace: str, event_type: str, body, *, kind: str = "instant") -> WriteResult:
        """Append every record batch of one Arrow IPC stream as events of `event_type`."""
        res = self.write_arrow_many(trace, event_type, [body], kind=kind)[0]
        if isinstance(res, BaseException):
            raise res
        return res

    def write_arrow_many(self, trace: str, event_type: str, bodies: list, *, kind: str = "instant") -> list:
        """Several Arrow IPC streams of one event type appended together: one `WriteResult`
        (or the `BadInput` that refused that body, which then stored nothing) per body.

        Many small concurrent writes cost one conform, one WAL record and one LSN; a body is
        read whole before anything is appended, so a stream broken half-way stores nothing.
        """
        check_ident(event_type, "event type")
        st = self.trace(trace)
        self._pace_commits(trace, True)  # every Arrow write waits for its answer
        out: list = []
        groups: list[tuple[pa.Schema, list]] = []  # streams with equal schemas append together
        for body in bodies:
            try:
                # A truncated stream is an ArrowIOError (an OSError), not ArrowInvalid.
                try:
                    reader = pa.ipc.open_stream(pa.py_buffer(body))
                except (pa.ArrowInvalid, OSError) as e:
                    raise BadInput(f"not an Arrow IPC stream: {e}") from None
                schema = reader.schema
                self._ensure_arrow_type(st, event_type, kind, schema, _schema_key(body))
                try:
                    batches = [b for b in reader if b.num_rows]
                except (pa.ArrowInvalid, OSError) as e:
                    raise BadInput(f"broken Arrow IPC stream: {e}") from None
            except BadInput as e:
                out.append(e)
                continue
            try:
                self._register_arrow_producers(st, batches)
            except BadInput as e:
                out.append(e)
                continue
            res = WriteResult(trace, rows=sum(b.num_rows for b in batches))
            out.append(res)
            if not batches:
                continue
            for gschema, members in groups:
                if gschema.equals(schema):
                    members.append((len(out) - 1, batches))
                    break
            else:
                groups.append((schema, [(len(out) - 1, batches)]))
        for schema, members in groups:
            allb = [b for _r, bs in members for b in bs]
            try:
                # Several streams: one table of their batches, one WAL record (Store.append
                # glues small chunks and keeps big ones apart).
                lsn = self.store.append(
                    trace,
                    event_type,
                    allb[0] if len(allb) == 1 else pa.Table.from_batches(allb, schema),
                    source="arrow stream",
                )
                for i, _bs in members:
                    out[i].lsn = lsn
            except BadInput:
                # One body is bad (e.g. nulls in ts): append them apart so only it is refused.
                for i, bs in members:
                    try:
                        for b in bs:
                            out[i].lsn = self.store.append(trace, event_type, b, source="arrow stream")
                    except BadInput as e:
                        out[i] = e  # by position: WriteResults compare by value, two can be equal
        for r in out:
            if isinstance(r, WriteResult):
                self._count(rows=r.rows)
        return out

    def _register_arrow_producers(self, st: _TraceState, batches: list[pa.RecordBatch]) -> None:
        """Producer ids an Arrow writer chose become producers of the trace (kind `arrow`) before
        their rows are appended, and are never handed to a line-protocol tag set."""
        ids: set[int] = set()
        for b in batches:
            i = b.schema.get_field_index("producer")
            if i < 0 or not pa.types.is_integer(b.schema.field(i).type):
                return  # conform refuses the batch with the reason
            # An agent's batch is usually one producer: its range says so in one native pass
            # (pc.unique + drop_null + to_pylist were ~15 % of the dispatcher's CPU per 1,000-row
            # QoS body, dev/arrow_dispatch_cost.py under py-spy; before/after in _ensure_arrow_type).
            try:
                lo, hi = _core.int_range(b.select([i])) or (0, -1)
            except (TypeError, ValueError):  # nulls (conform refuses them), or not int32/int64
                lo, hi = 0, -1
            if lo == hi:
                ids.add(lo)
            else:
                ids.update(pc.unique(b.column(i)).drop_null().to_pylist())  # distinct ids: a few per batch
        new = ids - st.known_ids
        if not new:
            return
        bad = [i for i in new if not 0 <= i < 2**31 - 1]
        if bad:
            raise BadInput(f"producer ids {sorted(bad)[:5]} out of range", expected="0 <= producer < 2**31-1")
        with st.lock:
            new = sorted(new - st.known_ids)
            if not new:
                return
            for pid in new:
                st.producers.reserve(pid)
            self.store.add_producers(
                st.name,
                [
                    {"id": pid, "parent": None, "kind": ARROW_PRODUCER_KIND, "name": f"producer {pid}", "attrs": {}}
                    for pid in new
                ],
            )
            st.known_ids.update(new)

    def _ensure_arrow_type(self, st: _TraceState, name: str, kind: str, schema: pa.Schema, key: bytes | None) -> None:
        # A schema found complete once stays complete (types only widen): agents sending the
        # same layout again cost one comparison of the stream's schema message bytes (`key`),
        # not two catalog queries. (Schema.equals, before, computed the new schema's
        # fingerprint every time: with the producer range below, the dispatcher's CPU per
        # 1,000-row QoS body 802-828 -> 643-675 us in two alternating runs, 740-755 -> 619-714 us
        # in three later ones; dev/arrow_dispatch_cost.py, this file's old and new version in turn.)
        if key is not None and st.arrow_schema_keys.get(name) == key:
            return
        self._declare_arrow_type(st, name, kind, schema)
        if key is not None:
            st.arrow_schema_keys[name] = key

    def _declare_arrow_type(self, st: _TraceState, name: str, kind: str, schema: pa.Schema) -> None:
        fst = self._types_of(st)
        known = self.store.event_types(st.name).get(name)
        if known is not None:
            have = {c.name for c in known.columns}
            missing = [f for f in schema if f.name not in have and f.name not in ("ts", "producer", "seq", "dur")]
            if not missing:
                return
            kind = known.kind
            schema = pa.schema(missing)
        with fst.lock:
            et = infer_event_type(name, kind, schema)
            fst.declare(self.store.add_event_type(st.name, et))

    # -- durability ----------------------------------------------------------------

    def wait_durable(self, trace: str, lsn: int, timeout: float | None = None) -> bool:
        return self.store.wait_durable(trace, lsn, timeout)

    def committer(self, trace: str) -> _core.GroupCommit | None:
        """The group committer that makes `trace`'s appends durable (None when the fsync
        policy makes them durable in the append itself: always, off)."""
        return self.store.committer(trace)

    def _pace_commits(self, trace: str, awaited: bool) -> None:
        """Under `--ack durable`, a round whose rows someone waits for makes the committer
        eager: the fsync starts as the WAL record is written, not once the round's answers are
        handed over (src/store/commit.rs). A round nobody waits for (at-most-once TCP lines)
        turns it back: those rows are fsynced within `--group-commit-ms`, not one fsync each."""
        if self.cfg.ack != "durable":
            return
        c = self.store.committer(trace)
        if c is not None and c.eager != awaited:
            c.eager = awaited
