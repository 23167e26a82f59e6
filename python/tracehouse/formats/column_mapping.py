"""Mapping table-shaped input (CSV, Parquet, Arrow) onto a trace.

Owns the column mapping shared by the CSV and Parquet importers: which
column is the timestamp (and its unit), the producer (ids or names, names are
interned into producer rows once), the event type (or one fixed type), and
optionally seq and dur. Every other column becomes a typed parameter of its
event type. All work is vectorized per batch: the only Python loops run over
distinct producers and distinct event types, never over rows.

An import either completes or leaves nothing: on error the half-made trace is
deleted (crash-safe delete) before the error propagates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from .. import lazy
from ..errors import BadInput
from ..schema import EventType, check_ident, infer_event_type
from .report import ImportReport

# Imported on first use (lazy.py): `tracehouse import` loads every importer to read its options.
np = lazy.module("numpy")
pa = lazy.module("pyarrow")
pc = lazy.module("pyarrow.compute")

if TYPE_CHECKING:
    from ..store import Store

_TYPE = "__tracehouse_type__"
TS_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


@dataclass
class Mapping:
    """Which input columns hold the common event columns."""

    ts: str = "ts"
    ts_unit: str = "ns"
    producer: str | None = "producer"
    type: str | None = "type"
    seq: str | None = None
    dur: str | None = None
    event_type: str = "event"  # the type of every row when there is no type column
    kind: str | None = None  # default: span when a dur column is mapped, else instant
    format: str | None = None  # default: the importer's name

    def __post_init__(self) -> None:
        if self.ts_unit not in TS_UNITS:
            raise BadInput(f"unknown timestamp unit {self.ts_unit!r}", expected=" | ".join(TS_UNITS))

    @property
    def event_kind(self) -> str:
        return self.kind or ("span" if self.dur else "instant")


class TabularLoader:
    """Feeds mapped record batches into one new trace."""

    def __init__(
        self,
        store: Store,
        trace: str,
        mapping: Mapping,
        source: str,
        *,
        strict: bool = False,
        description: str = "",
        metadata: dict | None = None,
    ) -> None:
        self.store = store
        self.mapping = mapping
        self.source = source
        self.strict = strict
        self.report = ImportReport(trace, source)
        fmt = mapping.format or "custom"
        check_ident(fmt, "format")
        self.info = store.create_trace(
            trace, fmt, description=description, metadata={"source": source, **(metadata or {})}, importing=True
        )
        self.producer_ids: dict[str, int] = {}
        self.known_producers: set[int] = set()
        self.types: dict[str, EventType] = dict(store.event_types(trace))

    # -- per batch -------------------------------------------------------------------

    def add(self, batch: pa.RecordBatch, lines: np.ndarray | None = None) -> None:
        """Map and append one batch. `lines` holds the source line of each row (for errors)."""
        m = self.mapping
        names = batch.schema.names
        for need in (m.ts, m.producer, m.type, m.seq, m.dur):
            if need is not None and need not in names:
                if need == m.producer and need == "producer":
                    continue  # optional by default: all rows from producer 0
                if need == m.type and need == "type":
                    continue
                raise BadInput(
                    f"no column {need!r} in the input",
                    file=self.source,
                    column=need,
                    expected="one of " + ", ".join(names),
                )
        cols: dict[str, pa.Array] = {}
        cols["ts"] = self._ts(batch.column(m.ts), lines)
        if m.producer in names:
            cols["producer"] = self._producers(batch.column(m.producer), lines)
        else:
            self._ensure_producers(np.array([0], dtype=np.int32))
            cols["producer"] = pa.array(np.zeros(batch.num_rows, dtype=np.int32))
        if m.seq:
            cols["seq"] = self._int(batch.column(m.seq), m.seq, lines)
        if m.dur:
            cols["dur"] = self._int(batch.column(m.dur), m.dur, lines)
        skip = {m.ts, m.producer, m.type, m.seq, m.dur}
        for n in names:
            if n in skip:
                continue
            if n in cols or n in ("ts", "producer", "seq", "dur", "type"):
                raise BadInput(
                    f"column {n!r} clashes with a common column name",
                    file=self.source,
                    column=n,
                    expected="map it with --ts/--producer/--type or rename it",
                )
            a = batch.column(n)
            if pa.types.is_dictionary(a.type):
                a = a.cast(a.type.value_type)
            if pa.types.is_null(a.type):
                a = a.cast(pa.string())
            cols[n] = a
        if m.type in names:
            cols[_TYPE] = batch.column(m.type)
        mapped = pa.RecordBatch.from_pydict(cols)
        bad = pc.is_null(mapped.column("ts"))
        if pc.any(bad).as_py():
            mapped = self._drop(mapped, bad, lines, "missing or invalid timestamp", m.ts)
            lines = None if lines is None else lines[~bad.to_numpy(zero_copy_only=False)]
        if not m.seq and mapped.num_rows:
            # Number the rows per producer in file order *before* splitting them by type:
            # appending type by type would number all of a batch's begins before its ends,
            # and seq is the order of a producer's events (begin/end pairing follows it).
            mapped = mapped.append_column("seq", self.store.assign_seq(self.report.trace, mapped.column("producer")))
        if _TYPE in mapped.schema.names:
            types = mapped.column(_TYPE)
            self._split_by_type(mapped.drop_columns([_TYPE]), types, lines)
        else:
            self._append(m.event_type, mapped)

    def _drop(self, batch: pa.RecordBatch, bad: pa.Array, lines, reason: str, column: str) -> pa.RecordBatch:
        idx = np.flatnonzero(bad.to_numpy(zero_copy_only=False))
        first = None if lines is None else int(lines[idx[0]])
        if self.strict:
            raise BadInput(reason, file=self.source, line=first, column=column)
        for i in idx[:10]:
            self.report.reject(None if lines is None else int(lines[i]), f"column {column!r}: {reason}")
        self.report.rejected += max(0, len(idx) - 10)
        return batch.filter(pc.invert(bad))

    def _ts(self, a: pa.Array, lines) -> pa.Array:
        if pa.types.is_timestamp(a.type):
            return pc.cast(a.cast(pa.timestamp("ns")), pa.int64())
        if pa.types.is_duration(a.type):
            return pc.cast(a.cast(pa.duration("ns")), pa.int64())
        scale = TS_UNITS[self.mapping.ts_unit]
        # Values that do not fit int64 nanoseconds become null: rejected rows with their lines.
        if pa.types.is_floating(a.type):
            ns = pc.round(pc.multiply(a.cast(pa.float64()), float(scale)))
            fits = pc.and_(pc.is_finite(ns), pc.and_(pc.greater(ns, -9.2e18), pc.less(ns, 9.2e18)))
            return pc.cast(pc.if_else(fits, ns, pa.scalar(None, pa.float64())), pa.int64())
        if pa.types.is_integer(a.type):
            if pa.types.is_uint64(a.type):
                a = pc.if_else(pc.less_equal(a, 2**63 - 1), a, pa.scalar(None, a.type))
            a = a.cast(pa.int64())
            if scale == 1:
                return a
            limit = (2**63 - 1) // scale
            fits = pc.and_(pc.less_equal(a, limit), pc.greater_equal(a, -limit))
            return pc.multiply(pc.if_else(fits, a, pa.scalar(None, pa.int64())), scale)
        raise BadInput(
            f"timestamps of type {a.type} are not supported",
            file=self.source,
            column=self.mapping.ts,
            expected="integer or float (in --ts-unit) or an ISO timestamp",
        )

    def _int(self, a: pa.Array, name: str, lines) -> pa.Array:
        if not pa.types.is_integer(a.type):
            raise BadInput(f"column of type {a.type}", file=self.source, column=name, expected="integers")
        return a.cast(pa.int64())

    def _producers(self, a: pa.Array, lines) -> pa.Array:
        if pa.types.is_integer(a.type):
            ids = a.cast(pa.int32())
            uniq = pc.unique(ids.filter(pc.is_valid(ids))).to_numpy()
            self._ensure_producers(uniq)
            return pc.fill_null(ids, 0)
        if pa.types.is_dictionary(a.type):
            a = a.cast(a.type.value_type)
        enc = pc.dictionary_encode(pc.fill_null(a.cast(pa.string()), ""))
        dictionary = enc.dictionary.to_pylist()  # distinct names of this batch: few
        new = [n for n in dictionary if n not in self.producer_ids]
        if new:
            start = max([*self.producer_ids.values(), *self.known_producers, -1]) + 1
            rows = []
            for i, n in enumerate(new):
                self.producer_ids[n] = start + i
                rows.append({"id": start + i, "parent": None, "kind": "producer", "name": n or "(none)", "attrs": {}})
            self.store.add_producers(self.report.trace, rows)
            self.report.producers += len(rows)
        lut = pa.array([self.producer_ids[n] for n in dictionary], pa.int32())
        return pc.take(lut, enc.indices)

    def _ensure_producers(self, ids: np.ndarray) -> None:
        new = [int(i) for i in ids if int(i) not in self.known_producers]
        if new:
            self.store.add_producers(
                self.report.trace,
                [{"id": i, "parent": None, "kind": "producer", "name": str(i), "attrs": {}} for i in new],
            )
            self.known_producers.update(new)
            self.report.producers += len(new)

    def _split_by_type(self, mapped: pa.RecordBatch, types: pa.Array, lines) -> None:
        enc = pc.dictionary_encode(pc.fill_null(types.cast(pa.string()), ""))
        for i, name in enumerate(enc.dictionary.to_pylist()):
            if not name:
                mask = pc.equal(enc.indices, i)
                self._drop(mapped, mask, lines, "empty event type", self.mapping.type or "type")
                continue
            sub = mapped.filter(pc.equal(enc.indices, i))
            self._append(name, sub)

    def _append(self, type_name: str, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        et = self.types.get(type_name)
        wanted = infer_event_type(check_ident(type_name, "event type"), self.mapping.event_kind, batch.schema)
        if et is None or any(p.name not in {q.name for q in et.params} for p in wanted.params):
            et = self.store.add_event_type(
                self.report.trace,
                wanted
                if et is None
                else et.with_params([p for p in wanted.params if p.name not in {q.name for q in et.params}]),
            )
            self.types[type_name] = et
        self.store.append(self.report.trace, type_name, batch, source=self.source)
        self.report.events += batch.num_rows
        self.report.by_type[type_name] = self.report.by_type.get(type_name, 0) + batch.num_rows

    def finish(self) -> ImportReport:
        if self.report.events == 0:
            first = self.report.first_rejected[0] if self.report.first_rejected else None
            why = f"; {self.report.rejected} rejected, first: {first.reason}" if first else ""
            raise BadInput(
                f"no valid events in the input{why}",
                file=self.source,
                line=first.line if first else None,
                expected=f"rows with a {self.mapping.ts!r} timestamp that fits int64 ns",
            )
        self.store.complete_import(self.report.trace)
        return self.report

    def abort(self, error: BaseException) -> NoReturn:
        """Remove the half-made trace (nothing of a failed import stays registered) and raise
        `error` (for a full disk, one saying the import was rolled back)."""
        self.store.rollback_import(self.report.trace, error)
