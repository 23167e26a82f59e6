"""The HTTP API of `tracehouse serve`, over the native front end (`_core.HttpFront`).

Routes:
  POST /api/v2/write?bucket=T&precision=ns|us|ms|s   line protocol (InfluxDB 2.x API)
  POST /write?db=T&precision=n|u|ms|s                 line protocol (InfluxDB 1.x API)
  POST /api/v2/arrow?trace=T&type=E[&kind=instant]    Arrow IPC stream of one event type
  POST /v1/traces, /v1/logs, /v1/metrics [?trace=T]   OpenTelemetry OTLP/HTTP, protobuf or JSON (otlp.py)
  POST /api/query    {"sql": ..., "format": "json"|"arrow"} (or the SQL as the body, or a form sql=...)
  GET  /api/query?sql=...&format=...
  GET|POST /query?q=SHOW DATABASES&db=...             InfluxDB 1.x InfluxQL meta statements (influxql.py)
  GET  /ping, /health                                 204 / JSON stats (/ping needs no token)

Acknowledgements: a write answers only once its rows are durable under the
store's fsync policy (group commit for `batch`), or under `--ack written` once they
are in the WAL (fsynced within `--group-commit-ms`). 204: every line stored. 400
with a JSON body listing the failed lines (line number and reason) when some or
all lines were refused: the good lines of that body *are* stored and durable
(InfluxDB's partial-write behaviour). 413: body over `max_body`. 401: token
missing or wrong. 503 + Retry-After: the server's in-flight budget stayed full
for `overload_wait` seconds (clients are slowed, memory stays bounded). 507 +
Retry-After: the store's disk is full (nothing of that write was kept; writes are
taken again by themselves once there is room). 408: the body stalled for
`idle_timeout`, fell below `min_rate` or passed `request_timeout`. The front end
(Rust) answers 401 (the token is checked on the request head, before `100 Continue`
and before any body byte is read) and 408/413/431/503 for framing and limits itself;
everything else is decided here.

Owns routing, gzip, the write and query handlers and the dispatcher: the thread
that takes complete requests from the front end in rounds. The line-protocol
writes of one batch to one trace are decoded and logged together, in one native call when
they add nothing to the catalog (ingest.py; one WAL record per measurement, one group
commit), and so are its OTLP requests to one trace (otlp.py; one record per event type);
each answer is decided here and handed with
the request to the trace's group committer, whose thread sends it once the rows are
durable (no Python runs then): a dispatcher never waits for an fsync. Queries run on
their own workers (queries.py) so a slow query never delays a write.

Queries are read-only: one SELECT (or EXPLAIN of one) statement, checked by DuckDB's
parser (sqlguard.py), run on a cursor of its own with file access confined to the store
directory, a deadline and a cap on answer bytes; they see every acknowledged write.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
import time
import zlib
from urllib.parse import parse_qsl

from .. import _core
from ..errors import BadInput, NotFound, TracehouseError, is_disk_full
from . import influxql
from .config import ServerConfig
from .ingest import Ingestor, WriteResult
from .otlp import OtlpIngest
from .queries import ARROW_STREAM, AnswerFile, QueryRunner, QueryStopped
from .queries import json_bytes as _json
from .tcp import TcpChunks

log = logging.getLogger("tracehouse.server")

PRECISIONS = {"ns": "ns", "n": "ns", "us": "us", "u": "us", "ms": "ms", "s": "s"}
JSON_TYPE = [("content-type", "application/json")]
DISPATCHERS = 1  # see HttpServer: one thread takes the rounds
OPEN_PATHS = ["/ping"]  # served without the token: InfluxDB clients probe /ping unauthenticated
ROUND_BYTES = 4 << 20  # body bytes one dispatcher round takes at most (its requests are answered together)
DISK_FULL_RETRY_S = 5  # Retry-After of a 507: a checkpoint tries for room every second
INLINE_ROUND_S = 0.002  # of a round, spent running small known SELECTs on the dispatcher at most


class HttpError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


def _error_doc(code: str, message: str, **extra) -> bytes:
    # InfluxDB 2.x error shape ({"code", "message"}) plus 1.x's "error" key.
    return _json({"code": code, "message": message, "error": message, **extra})


@functools.lru_cache(maxsize=1024)
def _parsed_query(raw: str) -> tuple[tuple[str, str], ...]:
    return tuple(parse_qsl(raw, keep_blank_values=True))


def _query(raw: str) -> dict[str, str]:
    """The query string's parameters. A client sends the same one with every write: parsing it
    was ~15 % of the Python time of a small write, so parsed strings are kept (a dict copy each)."""
    return dict(_parsed_query(raw))


class Call:
    """One request being handled: its parsed parts and the one way to answer it."""

    __slots__ = ("req", "path", "method", "query", "headers", "body", "peer")

    def __init__(self, req) -> None:
        self.req = req
        self.path = req.path
        self.method = req.method
        self.query = _query(req.query)
        self.headers = dict(req.headers)
        self.body: bytes | None = None
        self.peer = req.peer

    def read_body(self, cfg: ServerConfig):
        """The (inflated) body: a `_core.Body` read in place (buffer protocol) or, gzip'd, bytes."""
        if self.body is None:
            body = self.req.take_body()
            enc = self.headers.get("content-encoding", "").lower()
            if enc == "gzip":
                body = _gunzip(body, cfg.max_body)
            elif enc not in ("", "identity"):
                raise HttpError(415, "unsupported", f"Content-Encoding {enc!r} (expected gzip or none)")
            self.body = body
        return self.body

    def reply(self, status: int, body: bytes = b"", headers: list[tuple[str, str]] | None = None) -> None:
        try:
            self.req.respond(status, headers or [], body)
        except RuntimeError:
            pass  # answered already (e.g. shutdown raced a late answer)

    def error(self, status: int, code: str, message: str, headers: dict | None = None, **extra) -> None:
        self.reply(status, _error_doc(code, message, **extra), JSON_TYPE + list((headers or {}).items()))

    def fail(self, e: BaseException, what: str) -> None:
        """Answer the error `e` raised while handling the request."""
        if isinstance(e, HttpError):
            self.error(e.status, e.code, e.message, e.headers)
        elif isinstance(e, QueryStopped):  # deadline, answer cap, full queue, shutdown
            retry = {"retry-after": str(e.retry_after)} if e.retry_after is not None else None
            self.error(e.status, e.code, str(e), retry)
        elif isinstance(e, NotFound):
            self.error(404, "not found", str(e))
        elif isinstance(e, BadInput):
            self.error(400, "invalid", str(e))
        elif is_disk_full(e):
            _log_disk_full(what, e)
            self.error(507, "insufficient storage", str(e), {"retry-after": str(DISK_FULL_RETRY_S)})
        elif isinstance(e, TracehouseError):
            log.error("%s failed: %s", what, e)
            self.error(500, "internal error", str(e))
        else:
            log.exception("%s failed", what, exc_info=e)
            self.error(500, "internal error", f"{type(e).__name__}: {e}")


_disk_full_logged = [0.0]  # when a refusal for a full disk was last logged


def _log_disk_full(what: str, e: BaseException) -> None:
    """Logs a 507 at most every 10 s: while the disk is full every write is refused."""
    now = time.monotonic()
    if now - _disk_full_logged[0] >= 10:
        _disk_full_logged[0] = now
        log.warning("%s refused (507, further refusals for 10 s not logged): %s", what, e)


class Api:
    """Routes and the handlers; answers every request it is given exactly once. (Auth is the
    front end's: a request reaches Api only with the token, when one is set.)"""

    def __init__(self, ingestor: Ingestor, cfg: ServerConfig) -> None:
        self.ingestor = ingestor
        self.cfg = cfg
        self.front = None  # the _core.HttpFront, for its counters
        self.ui = None  # the web UI (server/ui), when served: it takes its own paths
        self.queries = QueryRunner(ingestor.store, cfg)
        self.tcp = TcpChunks(ingestor, cfg)  # line protocol over TCP: its chunks come in the same rounds
        self.otlp = OtlpIngest(ingestor, cfg.otlp_trace)
        self.round_started = 0.0  # (`dispatch`: when the round began)
        # path -> (methods, handler); writes are named, not called: a round gathers them
        self.routes = {
            "/api/v2/write": (("POST",), "lp"),
            "/write": (("POST",), "lp"),
            "/api/v2/arrow": (("POST",), "arrow"),
            "/v1/traces": (("POST",), "otlp"),
            "/v1/logs": (("POST",), "otlp"),
            "/v1/metrics": (("POST",), "otlp"),
            "/api/query": (("GET", "POST"), self.query),
            "/query": (("GET", "POST"), self.influxql),
            "/ping": (("GET", "HEAD"), self.ping),
            "/health": (("GET",), self.health),
        }

    # -- plumbing ------------------------------------------------------------------

    def acknowledge(
        self, call: Call, res: WriteResult, status: int, headers: list[tuple[str, str]] | None = None, body: bytes = b""
    ) -> None:
        """Answer `call` once `res` is durable (at once when nothing was stored, or when the
        fsync policy made it durable in the append); under `--ack written` at once: the rows
        are in the WAL (written before this runs) and the committer fsyncs them within
        `--group-commit-ms`."""
        committer = None if res.lsn is None or self.cfg.ack == "written" else self.ingestor.committer(res.trace)
        if committer is None:
            call.reply(status, body, headers)
            return
        try:
            call.req.respond_when_durable(committer, res.lsn, status, headers or [], body)
        except RuntimeError:
            pass  # answered already (e.g. shutdown raced it)

    # -- dispatch ------------------------------------------------------------------

    def dispatch(self, reqs: list) -> None:
        """Handle a batch of requests (and TCP chunks) taken together from the front end."""
        self.round_started = time.perf_counter()
        lp: dict[str, list[tuple[Call, tuple]]] = {}
        arrow: dict[tuple[str, str, str], list[Call]] = {}
        otlp: dict[str, list[tuple[Call, tuple]]] = {}
        for req in reqs:
            if type(req) is _core.TcpChunk:
                try:
                    got = self.tcp.item(req)
                except BaseException as e:  # noqa: BLE001 - every chunk is finished
                    self.tcp.failed(req, e)
                    continue
                if got is not None:  # line protocol over TCP joins its trace's HTTP writes
                    lp.setdefault(got[0], []).append((req, got[1]))
                continue
            if self.ui is not None and self.ui.takes(req.path):
                self.ui.submit(req)  # answered on the UI's own thread (server/ui/bridge.py), never here
                continue
            call = Call(req)
            try:
                route = self.routes.get(call.path)
                if route is None:
                    raise HttpError(404, "not found", f"no route {call.path}")
                if call.method not in route[0]:
                    raise HttpError(
                        405, "method not allowed", f"{call.method} {call.path} (expected {' or '.join(route[0])})"
                    )
                # Writes are gathered per trace (and type) and appended together below.
                if route[1] == "arrow":
                    arrow.setdefault(self._arrow_key(call), []).append(call)
                elif route[1] == "lp":
                    trace, item = self._lp_item(call)
                    lp.setdefault(trace, []).append((call, item))
                elif route[1] == "otlp":
                    got = self.otlp.prepare(call, functools.partial(call.read_body, self.cfg))
                    if isinstance(got, tuple):
                        otlp.setdefault(got[0], []).append((call, got[1]))
                    else:  # refused alone (content type, size, trace)
                        call.reply(got.status, got.body, got.headers)
                else:
                    route[1](call)
            except BaseException as e:  # noqa: BLE001 - every request gets an answer
                call.fail(e, f"{call.method} {call.path}")
        for trace, calls in lp.items():
            self._write_lp(trace, calls)
        for key, calls in arrow.items():
            self._write_arrow(key, calls)
        for trace, calls in otlp.items():
            self._write_otlp(trace, calls)

    # -- writes --------------------------------------------------------------------

    def _lp_item(self, call: Call) -> tuple[str, tuple]:
        param = "bucket" if call.path == "/api/v2/write" else "db"
        bucket = call.query.get(param)
        if not bucket:
            raise HttpError(400, "invalid", f"missing ?{param}= (the trace to write to)")
        precision = call.query.get("precision", "ns")
        if precision not in PRECISIONS:
            raise HttpError(400, "invalid", f"precision {precision!r} (expected ns, us, ms or s)")
        received = time.time_ns()
        return bucket, (call.read_body(self.cfg), PRECISIONS[precision], received, 1)

    def _write_lp(self, trace: str, calls: list[tuple[Call, tuple]]) -> None:
        try:
            # At-most-once TCP lines alone wait for nobody: their round need not hurry an fsync.
            awaited = any(type(c) is not _core.TcpChunk or c.acks for c, _item in calls)
            results = self.ingestor.write_lp_many(trace, [item for _c, item in calls], awaited=awaited)
        except BaseException as e:  # noqa: BLE001 - the whole group failed (e.g. unknown bucket)
            for call, _item in calls:
                if type(call) is _core.TcpChunk:
                    self.tcp.failed(call, e)
                else:
                    call.fail(e, f"write to {trace}")
            return
        for (call, _item), res in zip(calls, results):
            if type(call) is _core.TcpChunk:
                self.tcp.done(call, res)
            elif res.error_count:
                first = res.errors[0] if res.errors else (0, "")
                msg = (
                    f"partial write: {res.error_count} of {res.lines} lines refused, {res.rows} stored; "
                    f"first at line {first[0]}: {first[1]}"
                )
                doc = _error_doc(
                    "invalid",
                    msg,
                    rows_written=res.rows,
                    lines=res.lines,
                    failed=res.error_count,
                    errors=[{"line": line, "message": m} for line, m in res.errors],
                )
                self.acknowledge(call, res, 400, JSON_TYPE, doc)
            else:
                self.acknowledge(call, res, 204)

    def _arrow_key(self, call: Call) -> tuple[str, str, str]:
        q = call.query
        trace, etype, kind = q.get("trace") or q.get("bucket"), q.get("type"), q.get("kind", "instant")
        if not trace or not etype:
            raise HttpError(400, "invalid", "missing ?trace= or ?type= (trace and event type to append to)")
        call.read_body(self.cfg)
        return trace, etype, kind

    def _write_arrow(self, key: tuple[str, str, str], calls: list[Call]) -> None:
        trace, etype, kind = key
        try:
            results = self.ingestor.write_arrow_many(trace, etype, [c.body for c in calls], kind=kind)
        except BaseException as e:  # noqa: BLE001 - the whole group failed (e.g. unknown trace)
            for call in calls:
                call.fail(e, f"Arrow write to {trace}")
            return
        for call, res in zip(calls, results):
            if isinstance(res, BaseException):
                call.fail(res, f"Arrow write to {trace}")
            else:
                self.acknowledge(call, res, 204, [("x-rows-written", str(res.rows))])

    def _write_otlp(self, trace: str, calls: list[tuple[Call, tuple]]) -> None:
        """OTLP/HTTP requests of a round to one trace, decoded and logged together (otlp.py);
        each answered in OTLP's own shapes once its rows are durable."""
        answers = self.otlp.write_round(trace, [item for _c, item in calls])
        for (call, _item), a in zip(calls, answers):
            if a.result is None:
                call.reply(a.status, a.body, a.headers)
            else:
                self.acknowledge(call, a.result, a.status, a.headers, a.body)

    # -- queries -------------------------------------------------------------------

    def query(self, call: Call) -> None:
        self.queries.submit(functools.partial(self._query, call))

    def _query(self, call: Call) -> None:
        try:
            fmt = call.query.get("format")
            sql = call.query.get("sql")
            if call.method == "POST" and sql is None:
                body = bytes(call.read_body(self.cfg))
                ctype = call.headers.get("content-type", "")
                # `curl -d '{"sql": ...}'` and `--data-urlencode sql=...` say form-urlencoded: a
                # body starting `{` is JSON (no SQL statement starts so), one starting `sql=` or
                # `format=` a form; any other is the SQL itself (`curl -d 'SELECT 1'`).
                if ctype.startswith("application/x-www-form-urlencoded") and body.startswith((b"sql=", b"format=")):
                    form = dict(parse_qsl(body.decode("utf-8", errors="replace")))
                    sql, fmt = form.get("sql"), fmt or form.get("format")
                elif ctype.startswith("application/json") or body.lstrip()[:1] == b"{":
                    try:
                        doc = json.loads(body)
                    except ValueError as e:
                        raise HttpError(400, "invalid", f"body is not JSON: {e}") from None
                    except RecursionError:  # (nested deeper than the parser's recursion allows)
                        raise HttpError(400, "invalid", "body is not JSON this server reads: nested too deep") from None
                    if not isinstance(doc, dict) or not isinstance(doc.get("sql"), str):
                        raise HttpError(400, "invalid", 'expected {"sql": "SELECT ...", "format": "json"|"arrow"}')
                    sql, fmt = doc["sql"], fmt or doc.get("format")
                else:
                    sql = body.decode("utf-8", errors="replace")
            if not sql:
                raise HttpError(400, "invalid", 'missing SQL (?sql=, a JSON body {"sql": ...} or a text body)')
            fmt = fmt or ("arrow" if ARROW_STREAM in call.headers.get("accept", "") else "json")
            if fmt not in ("json", "arrow"):
                raise HttpError(400, "invalid", f"format {fmt!r} (expected json or arrow)")
            body, ctype = self.queries.run(sql, fmt, keep_file=True)
            if isinstance(body, AnswerFile):  # a large answer: sent from its memory file (sendfile)
                try:
                    call.req.respond_file(200, [("content-type", ctype)], body.fd, body.size)
                except RuntimeError:
                    pass  # answered already (shutdown raced it)
                finally:
                    body.close()
            else:
                call.reply(200, body, [("content-type", ctype)])
        except BaseException as e:  # noqa: BLE001
            call.fail(e, "query")

    # -- the rest ------------------------------------------------------------------

    def influxql(self, call: Call) -> None:
        """InfluxDB 1.x `/query`: InfluxQL meta statements (SHOW DATABASES, CREATE DATABASE ...)."""
        influxql.handle(
            call,
            self.ingestor,
            cfg=self.cfg,
            submit=self.queries.submit,
            run_sql=self.queries.table,
            inline=self._inline_left,
        )

    def _inline_left(self) -> float:
        """Seconds this dispatcher round may still spend running SELECTs itself (`influxql.handle`):
        a round's writes wait for them."""
        return INLINE_ROUND_S - (time.perf_counter() - self.round_started)

    def ping(self, call: Call) -> None:
        call.reply(204, headers=[("x-influxdb-version", "tracehouse"), ("x-influxdb-build", "OSS")])

    def health(self, call: Call) -> None:
        front = self.front.stats() if self.front is not None else {}
        doc = {
            "status": "pass",
            "name": "tracehouse",
            "pid": os.getpid(),
            "ack": self.cfg.ack,
            # WAL records appended, not yet fsynced (under --ack written these may be acknowledged)
            "wal_records_unsynced": self.ingestor.store.wal_records_unsynced(),
            "inflight_bytes": front.get("inflight_bytes", 0) + front.get("tcp_inflight_bytes", 0),
            "inflight_limit": self.cfg.max_inflight,
            "overload_refusals": front.get("overload_refusals", 0),
            "auth_refusals": front.get("auth_refusals", 0),
            "slow_refusals": front.get("slow_refusals", 0),
            "http_connections": front.get("connections", 0),
            "tcp_connections": front.get("tcp_connections", 0),
            "refused_connections": front.get("refused_connections", 0) + front.get("tcp_refused_connections", 0),
            **self.queries.stats(),
            **self.ingestor.stats,
        }
        call.reply(200, _json(doc), JSON_TYPE)


class HttpServer:
    """The native front end on a listening socket (and the line-protocol TCP socket, when
    given) plus the dispatcher thread over `api`.

    One dispatcher: everything slow in a round runs with the GIL released (decode, WAL
    write, gunzip) and the answers go out from the committer's thread, so a second or third
    dispatcher only added contention for the interpreter lock. Measured with 1 / 2 / 3
    (rows/s): QoS 16 x 50 335K / 260K / 227K, 128 x 50 448K / 420K / 364K, TSBS 2 x 1,000
    1.56M / 1.18M / -, Arrow 128 x 1,000 1.07M / 1.02M / 0.96-1.04M. The cost: a round
    waits for the one before it (a 64 MB gzip body holds the next round ~0.2 s).
    """

    def __init__(self, api: Api, sock, cfg: ServerConfig, tcp_sock=None) -> None:
        self.api = api
        self.front = _core.HttpFront(
            os.dup(sock.fileno()),
            max_body=cfg.max_body,
            max_connections=cfg.max_connections,
            idle_timeout=cfg.idle_timeout,
            max_inflight=cfg.max_inflight,
            overload_wait=cfg.overload_wait,
            retry_after=cfg.retry_after,
            token=cfg.token or None,
            open_paths=OPEN_PATHS + (api.ui.open_paths if api.ui is not None else []),  # the UI's page and assets
            request_timeout=cfg.request_timeout,
            min_rate=cfg.min_rate,
        )
        sock.close()  # the front end owns its own descriptor of the socket
        if tcp_sock is not None:
            self.front.listen_tcp(
                os.dup(tcp_sock.fileno()),
                bucket=cfg.tcp_bucket,
                max_line=cfg.max_line,
                high_water=cfg.tcp_high_water,
                max_connections=cfg.max_connections,
                idle_timeout=cfg.idle_timeout,
                max_inflight=cfg.max_inflight,
                token=cfg.token or None,
            )
            tcp_sock.close()
        api.front = self.front
        self._stop = False
        self.threads = [
            threading.Thread(target=self._run, name=f"th-http-{i}", daemon=True) for i in range(DISPATCHERS)
        ]
        for t in self.threads:
            t.start()

    def _run(self) -> None:
        refusals = RefusalLog(self.front)
        while not self._stop:
            reqs = self.front.take(256, ROUND_BYTES, 0.2)
            if reqs:
                try:
                    self.api.dispatch(reqs)
                except BaseException:  # noqa: BLE001 - a dispatcher must survive anything
                    log.exception("dispatch failed")
            refusals.check()

    def drain_tcp(self, timeout: float = 10.0) -> int:
        """Stop reading TCP connections and wait (dispatching meanwhile) until what they sent is
        appended and acknowledged; returns the connections still open after `timeout`."""
        return self.front.close_tcp(timeout)

    def close(self) -> None:
        """Stop accepting and close every connection, then interrupt the running queries."""
        self._stop = True
        self.front.close()
        self.api.queries.close()
        for t in self.threads:
            t.join(timeout=5)


class RefusalLog:
    """Logs the front end's token refusals, at most one line a second: a client hammering the
    server without its token must not flood the log (each refusal is counted in /health)."""

    def __init__(self, front) -> None:
        self.front = front
        self.logged = 0
        self.at = 0.0

    def check(self) -> None:
        now = time.monotonic()
        if now - self.at < 1.0:
            return
        self.at = now
        n = self.front.stats()["auth_refusals"]
        if n > self.logged:
            log.warning(
                "refused %d request(s) without a valid token; last: %s", n - self.logged, self.front.last_auth_refusal()
            )
            self.logged = n


def _gunzip(body: bytes, limit: int) -> bytes:
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as e:
        raise HttpError(400, "invalid", f"bad gzip body: {e}") from None
    if len(out) > limit or d.unconsumed_tail:
        raise HttpError(413, "request too large", f"gzip body inflates beyond the limit of {limit} bytes")
    if not d.eof:
        raise HttpError(400, "invalid", "truncated gzip body")
    return out
