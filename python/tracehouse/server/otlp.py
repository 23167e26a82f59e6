"""OTLP/HTTP ingest: `POST /v1/traces`, `/v1/logs` and `/v1/metrics` of `tracehouse serve`.

Owns the OpenTelemetry side of the write path: the encoding (`Content-Type`
application/x-protobuf or application/json; gzip is the request's `Content-Encoding`, inflated
by the caller under `max_body`), which store trace receives the items, the producer tree of
each such trace, and the answers the OTLP specification asks for:

- 200 with an `Export*ServiceResponse` in the request's encoding once the rows are durable
  (the same acknowledgement as line protocol: after the group commit's fsync under
  `--ack durable`); items refused one by one (a span without a valid id, an end before its
  start) give a `partial_success` with their count and the first reason, the rest is stored;
- 400 with a `google.rpc.Status` (code 3) when the body is not such a request (nothing stored);
- 415 for another content type or encoding, 413 past `max_body`, 404 when the trace does not
  exist and trace creation is off;
- 503 + Retry-After when the disk is full (OTLP clients retry 429/502/503/504, not 507); the
  native front end answers 401 (token), 413 and 503 + Retry-After (overload) itself.

Which trace: `?trace=NAME`, else the `X-Tracehouse-Trace` header, else `--otlp-trace` (default
`otlp`). One store trace for every service by default, with the service as the root of its
producer tree: a distributed trace's spans from several services then sit side by side, so a
parent link that crosses services is a join inside one trace. Decoding is native
(`_core.decode_otlp`: protobuf or JSON into Arrow batches, GIL released for big bodies);
producers are registered in the catalog before the rows that name them are appended, as the
line-protocol path does (ingest.py's ordering rule).

Rounds: the requests the dispatcher takes together are decoded together per trace
(`write_round`, `_core.decode_otlp_many`): one batch per event type for the round, and when
the round makes no new producer (every round after a service's first) the same native call
writes the WAL records and tells the group committer, the interpreter lock released once, as
line protocol's rounds do. Each request keeps its own answer (its partial success, or its 400
alone when its body is not a request) and waits for the records holding its rows.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from .. import _core
from ..errors import AlreadyExists, BadInput, NotFound, TracehouseError, is_disk_full
from ..formats import otlp as fmt
from ..store.store import check_trace_name
from .ingest import SOURCE, Ingestor, WriteResult

log = logging.getLogger("tracehouse.server")

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
TRACE_HEADER = "x-tracehouse-trace"
SIGNALS = {"/v1/traces": "traces", "/v1/logs": "logs", "/v1/metrics": "metrics"}
ITEMS = {"traces": "spans", "logs": "log records", "metrics": "data points"}
DISK_FULL_RETRY_S = 5
# gRPC codes of the google.rpc.Status an error answer carries, by HTTP status
GRPC_CODES = {400: 3, 401: 16, 404: 5, 408: 4, 413: 8, 415: 3, 429: 8, 503: 14, 504: 4, 507: 14}


@dataclass
class Answer:
    """What to answer an OTLP request: status, body, headers, and the write to wait for."""

    status: int
    body: bytes
    headers: list[tuple[str, str]]
    result: WriteResult | None = None


class _OtlpTrace:
    def __init__(self, store, name: str, exists: bool, max_producers: int) -> None:
        self.name = name
        self.exists = exists  # a new trace is created by its first request that stores something
        self.producers = _core.OtlpProducers(store.next_producer_id(name) if exists else 0, max_producers)
        for p in store.producers(name) if exists else ():  # a restart keeps giving a service ... its id
            key = fmt.PRODUCER_KEYS.get(p["kind"])
            if key is not None and key in (p["attrs"] or {}):
                self.producers.declare(int(p["id"]), p["parent"], p["kind"], str(p["attrs"][key]))
        self.lock = threading.Lock()


class OtlpIngest:
    """Decodes OTLP requests and appends their rows, for the server's dispatcher."""

    def __init__(self, ingestor: Ingestor, default_trace: str) -> None:
        self.ingestor = ingestor
        self.store = ingestor.store
        self.cfg = ingestor.cfg
        self.default_trace = default_trace
        self._traces: dict[str, _OtlpTrace] = {}
        self._lock = threading.Lock()

    def trace_of(self, call) -> str:
        return call.query.get("trace") or call.headers.get(TRACE_HEADER) or self.default_trace

    def _trace(self, name: str) -> _OtlpTrace:
        st = self._traces.get(name)
        if st is not None:
            return st
        with self._lock:
            st = self._traces.get(name)
            if st is not None:
                return st
            check_trace_name(name)
            try:
                info = self.store.trace(name)
            except NotFound:
                if not self.cfg.create_traces:
                    raise
                info = None
            if info is not None and info.format != fmt.FORMAT:
                raise BadInput(
                    f"trace {name!r} is a {info.format} trace: OTLP writes go to otlp traces",
                    expected="?trace= naming an otlp trace or a new one",
                )
            st = self._traces[name] = _OtlpTrace(self.store, name, info is not None, self.cfg.max_producers)
            return st

    def _create(self, st: _OtlpTrace) -> None:
        with self._lock:
            try:
                self.store.create_trace(
                    st.name,
                    fmt.FORMAT,
                    description="OpenTelemetry (OTLP) ingest (tracehouse serve)",
                    metadata={"source": SOURCE},
                    event_types=fmt.EVENT_TYPES,
                    format_description=fmt.DESCRIPTION,
                )
            except AlreadyExists:  # made meanwhile (another writer of the store, a line-protocol write)
                if self.store.trace(st.name).format != fmt.FORMAT:
                    self._traces.pop(st.name, None)
                    raise
            log.info("created trace %s (otlp)", st.name)
            st.exists = True

    def prepare(self, call, read_body) -> tuple[str, tuple] | Answer:
        """What one request asks to write, `(trace, (body, signal, json))`, for `write_round`; or
        the answer when it is refused before decoding (content type, encoding, size, trace)."""
        signal = SIGNALS[call.path]
        ctype = call.headers.get("content-type", "").split(";")[0].strip().lower()
        as_json = ctype == JSON
        try:
            if ctype not in (PROTOBUF, JSON):
                return _error(415, f"Content-Type {ctype or 'none'!r} (expected {PROTOBUF} or {JSON})", as_json)
            body = read_body()  # gunzipped under max_body (413, 415 for another encoding)
            name = self.trace_of(call)
            self._trace(name)
            return name, (body, signal, as_json)
        except BaseException as e:  # noqa: BLE001 - every request gets an answer
            return self._failed(e, as_json, signal)

    def write(self, call, read_body) -> Answer:
        """Handle one request alone; never raises: every failure is an OTLP answer."""
        got = self.prepare(call, read_body)
        return got if isinstance(got, Answer) else self.write_round(got[0], [got[1]])[0]

    def write_round(self, name: str, items: list[tuple]) -> list[Answer]:
        """The requests `items` (`(body, signal, json)`, from `prepare`) of one dispatcher round
        to trace `name`, decoded together into one batch per event type; one answer per item,
        in order, never raising. When the round makes no producer, the decoding call also
        writes its WAL records (`Store.write_round`: one record per event type and one group
        commit for the round, as line protocol's rounds); otherwise its producers are
        registered first and its batches appended. Each answer waits for the records holding
        that request's rows."""
        try:
            return self._write_round(name, items)
        except BaseException as e:  # noqa: BLE001 - every request gets an answer
            return [self._failed(e, as_json, signal) for _b, signal, as_json in items]

    def _write_round(self, name: str, items: list[tuple]) -> list[Answer]:
        st = self._trace(name)
        with st.lock:
            if st.exists:
                self.ingestor._pace_commits(name, True)  # someone waits: the fsync starts with the record
                d = self.store.write_round(
                    name,
                    lambda log: _core.decode_otlp_many(items, st.producers, seq=self.store.seq_counters(name), **log),
                )
                lsns: list = d["lsns"]
            else:
                d = _core.decode_otlp_many(items, st.producers)
                lsns = [None] * len(d["batches"])
            new = st.producers.take_new()
            batches = d["batches"]
            if not st.exists and (new or batches):
                self._create(st)
                # numbered by the decoder's own counters: numbered again by the writer's
                counters = self.store.seq_counters(name)
                batches = [(t, _renumber(b, counters)) for t, b in batches]
            if new:
                try:
                    self.store.add_producers(name, new)
                except BaseException:
                    # The decoder's tree now holds ids the catalog does not: a later round would
                    # name them without registering them. The next request rebuilds it from the store.
                    with self._lock:
                        self._traces.pop(name, None)
                    raise
            if None in lsns:
                self.ingestor._pace_commits(name, True)
                for i, (etype, batch) in enumerate(batches):
                    if lsns[i] is None:
                        lsns[i] = self.store.append(name, etype, batch, source="OTLP")
        out = []
        for (_b, signal, as_json), body in zip(items, d["bodies"]):
            if body["invalid"] is not None:
                out.append(_error(400, body["invalid"], as_json))
                continue
            res = WriteResult(name, rows=body["rows"])
            if body["batches"]:
                res.lsn = max(lsns[i] for i in body["batches"])
            self.ingestor._count(rows=res.rows)
            msg = body["error"] or ""
            if body["rejected"]:
                msg = f"{body['rejected']} {ITEMS[signal]} refused; first: {msg}"
            resp = _core.otlp_response(signal, body["rejected"], msg, json=as_json)
            out.append(Answer(200, resp, [("content-type", JSON if as_json else PROTOBUF)], res))
        return out

    def _failed(self, e: BaseException, as_json: bool, signal: str) -> Answer:
        status = getattr(e, "status", None)  # the server's HttpError (413, 415, 400 for bad gzip)
        if isinstance(status, int):
            return _error(status, getattr(e, "message", str(e)), as_json)
        if isinstance(e, NotFound):
            return _error(404, str(e), as_json)
        if isinstance(e, BadInput):
            return _error(400, str(e), as_json)
        if is_disk_full(e):
            log.warning("OTLP %s refused (disk full): %s", signal, e)
            return _error(503, f"disk full: {e}", as_json, [("retry-after", str(DISK_FULL_RETRY_S))])
        if isinstance(e, TracehouseError):
            log.error("OTLP %s failed: %s", signal, e)
        else:
            log.exception("OTLP %s failed", signal, exc_info=e)
        return _error(500, f"{type(e).__name__}: {e}", as_json)


def _renumber(batch, counters):
    i = batch.schema.get_field_index("seq")
    return batch.set_column(i, batch.schema.field(i), counters.assign(batch.column("producer")))


def _error(status: int, message: str, as_json: bool, headers: list | None = None) -> Answer:
    body = _core.otlp_status(GRPC_CODES.get(status, 2), message, json=as_json)
    return Answer(status, body, [("content-type", JSON if as_json else PROTOBUF), *(headers or [])])
