"""The HTTP API of `tracehouse serve` (a Starlette app on uvicorn).

Routes:
  POST /api/v2/write?bucket=T&precision=ns|us|ms|s   line protocol (InfluxDB 2.x API)
  POST /write?db=T&precision=n|u|ms|s                 line protocol (InfluxDB 1.x API)
  POST /api/v2/arrow?trace=T&type=E[&kind=instant]    Arrow IPC stream of one event type
  POST /api/query    {"sql": ..., "format": "json"|"arrow"} (or the SQL as text/plain)
  GET  /api/query?sql=...&format=...
  POST /query?q=CREATE DATABASE x                     1.x clients creating their database
  GET  /ping, /health                                 204 / JSON stats

Acknowledgements: a write answers only once its rows are durable under the
store's fsync policy (group commit for `batch`). 204: every line stored. 400
with a JSON body listing the failed lines (line number and reason) when some or
all lines were refused: the good lines of that body *are* stored and durable
(InfluxDB's partial-write behaviour). 413: body over `max_body`. 401: token
missing or wrong. 503 + Retry-After: the server's in-flight budget stayed full
for `overload_wait` seconds (clients are slowed, memory stays bounded). 408: the
body stalled for `idle_timeout`.

Queries are read-only: one SELECT (or EXPLAIN) statement, run by DuckDB with
file access confined to the store directory; they see every acknowledged write.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import time
import zlib
from typing import Any

import duckdb
import pyarrow as pa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..errors import BadInput, NotFound, TracehouseError
from .config import ServerConfig
from .ingest import Coalescer, DurabilityWaiter, Ingestor, WriteResult

log = logging.getLogger("tracehouse.server")

ARROW_STREAM = "application/vnd.apache.arrow.stream"
PRECISIONS = {"ns": "ns", "n": "ns", "us": "us", "u": "us", "ms": "ms", "s": "s"}


class HttpError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


def _error(status: int, code: str, message: str, headers: dict | None = None, **extra) -> JSONResponse:
    # InfluxDB 2.x error shape ({"code", "message"}) plus 1.x's "error" key.
    return JSONResponse({"code": code, "message": message, "error": message, **extra}, status_code=status,
                        headers=headers)


class Api:
    """The request handlers; owns auth, body reading under limits, and acknowledgement."""

    def __init__(self, ingestor: Ingestor, cfg: ServerConfig) -> None:
        self.ingestor = ingestor
        self.cfg = cfg
        self.waiter: DurabilityWaiter | None = None
        self.coalescer: Coalescer | None = None
        self.auth_refused = 0

    # -- plumbing ------------------------------------------------------------------

    def check_auth(self, request: Request) -> None:
        token = self.cfg.token
        if not token:
            return
        given = None
        h = request.headers.get("authorization", "")
        scheme, _, value = h.partition(" ")
        if scheme.lower() in ("token", "bearer"):
            given = value.strip()
        elif scheme.lower() == "basic":
            import base64

            try:
                given = base64.b64decode(value.strip()).decode().partition(":")[2]
            except Exception:
                given = None
        elif "p" in request.query_params:  # InfluxDB 1.x ?u=&p=
            given = request.query_params["p"]
        if given is None or not hmac.compare_digest(given.encode(), token.encode()):
            self.auth_refused += 1
            client = request.client.host if request.client else "?"
            log.warning("refused %s %s from %s: %s", request.method, request.url.path, client,
                        "no token" if given is None else "wrong token")
            raise HttpError(401, "unauthorized", "unauthorized: send 'Authorization: Token <token>'")

    async def read_body(self, request: Request) -> tuple[bytes, int]:
        """The request body under the size limit and the idle timeout; returns (body, budget bytes held)."""
        cfg = self.cfg
        length = request.headers.get("content-length")
        try:
            declared = int(length) if length is not None else None
        except ValueError:
            raise HttpError(400, "invalid", f"bad Content-Length {length!r}") from None
        if declared is not None and declared > cfg.max_body:
            raise HttpError(413, "request too large", f"body of {declared} bytes exceeds the limit of {cfg.max_body}")
        hold = declared if declared is not None else cfg.max_body
        budget = self.ingestor.budget
        deadline = time.monotonic() + cfg.overload_wait
        while not budget.try_acquire(hold):
            if time.monotonic() >= deadline:
                budget.refused += 1
                raise HttpError(503, "unavailable", "server overloaded: too many bytes in flight, retry later",
                                {"Retry-After": str(cfg.retry_after)})
            await asyncio.sleep(0.01)
        try:
            chunks, total = [], 0
            receive = request.receive
            while True:
                try:
                    msg = await asyncio.wait_for(receive(), cfg.idle_timeout)
                except asyncio.TimeoutError:
                    raise HttpError(408, "request timeout",
                                    f"no body bytes for {cfg.idle_timeout:g} s after {total} bytes") from None
                if msg["type"] == "http.disconnect":
                    raise HttpError(499, "client closed", "client disconnected before the body ended")
                chunk = msg.get("body", b"")
                if chunk:
                    total += len(chunk)
                    if total > cfg.max_body:
                        raise HttpError(413, "request too large", f"body exceeds the limit of {cfg.max_body} bytes")
                    chunks.append(chunk)
                if not msg.get("more_body", False):
                    break
            body = b"".join(chunks) if len(chunks) != 1 else chunks[0]
            enc = request.headers.get("content-encoding", "").lower()
            if enc == "gzip":
                body = await asyncio.to_thread(_gunzip, body, cfg.max_body)
            elif enc not in ("", "identity"):
                raise HttpError(415, "unsupported", f"Content-Encoding {enc!r} (expected gzip or none)")
            return body, hold
        except BaseException:
            budget.release(hold)
            raise

    async def acknowledge(self, res: WriteResult) -> None:
        if res.lsn is not None and self.waiter is not None:
            await self.waiter.wait(res.trace, res.lsn)

    # -- writes --------------------------------------------------------------------

    async def write_v2(self, request: Request) -> Response:
        q = request.query_params
        return await self._write_lp(request, q.get("bucket"), q.get("precision", "ns"), "bucket")

    async def write_v1(self, request: Request) -> Response:
        q = request.query_params
        return await self._write_lp(request, q.get("db"), q.get("precision", "ns"), "db")

    async def _write_lp(self, request: Request, bucket: str | None, precision: str, param: str) -> Response:
        try:
            self.check_auth(request)
            if not bucket:
                raise HttpError(400, "invalid", f"missing ?{param}= (the trace to write to)")
            if precision not in PRECISIONS:
                raise HttpError(400, "invalid", f"precision {precision!r} (expected ns, us, ms or s)")
            received = time.time_ns()
            body, hold = await self.read_body(request)
            try:
                res = await self.coalescer.write(bucket, body, PRECISIONS[precision], received)
                await self.acknowledge(res)
            finally:
                self.ingestor.budget.release(hold)
        except HttpError as e:
            return _error(e.status, e.code, e.message, e.headers)
        except NotFound as e:
            return _error(404, "not found", str(e))
        except BadInput as e:
            return _error(400, "invalid", str(e))
        except TracehouseError as e:
            log.error("write to %s failed: %s", bucket, e)
            return _error(500, "internal error", str(e))
        if res.error_count:
            first = res.errors[0] if res.errors else (0, "")
            msg = (f"partial write: {res.error_count} of {res.lines} lines refused, {res.rows} stored; "
                   f"first at line {first[0]}: {first[1]}")
            return _error(400, "invalid", msg, rows_written=res.rows, lines=res.lines, failed=res.error_count,
                          errors=[{"line": line, "message": m} for line, m in res.errors])
        return Response(status_code=204)

    async def write_arrow(self, request: Request) -> Response:
        q = request.query_params
        trace, etype, kind = q.get("trace") or q.get("bucket"), q.get("type"), q.get("kind", "instant")
        try:
            self.check_auth(request)
            if not trace or not etype:
                raise HttpError(400, "invalid", "missing ?trace= or ?type= (trace and event type to append to)")
            body, hold = await self.read_body(request)
            try:
                res = await asyncio.to_thread(self.ingestor.write_arrow, trace, etype, body, kind=kind)
                await self.acknowledge(res)
            finally:
                self.ingestor.budget.release(hold)
        except HttpError as e:
            return _error(e.status, e.code, e.message, e.headers)
        except NotFound as e:
            return _error(404, "not found", str(e))
        except BadInput as e:
            return _error(400, "invalid", str(e))
        except TracehouseError as e:
            log.error("arrow write to %s failed: %s", trace, e)
            return _error(500, "internal error", str(e))
        return Response(status_code=204, headers={"X-Rows-Written": str(res.rows)})

    # -- queries -------------------------------------------------------------------

    async def query(self, request: Request) -> Response:
        try:
            self.check_auth(request)
            fmt = request.query_params.get("format")
            sql = request.query_params.get("sql")
            if request.method == "POST" and sql is None:
                body, hold = await self.read_body(request)
                self.ingestor.budget.release(hold)
                ctype = request.headers.get("content-type", "")
                if ctype.startswith("application/json"):
                    try:
                        doc = json.loads(body)
                    except ValueError as e:
                        raise HttpError(400, "invalid", f"body is not JSON: {e}") from None
                    if not isinstance(doc, dict) or not isinstance(doc.get("sql"), str):
                        raise HttpError(400, "invalid", 'expected {"sql": "SELECT ...", "format": "json"|"arrow"}')
                    sql, fmt = doc["sql"], fmt or doc.get("format")
                else:
                    sql = body.decode("utf-8", errors="replace")
            if not sql:
                raise HttpError(400, "invalid", "missing SQL (?sql=, a JSON body {\"sql\": ...} or a text body)")
            accept = request.headers.get("accept", "")
            fmt = fmt or ("arrow" if ARROW_STREAM in accept else "json")
            if fmt not in ("json", "arrow"):
                raise HttpError(400, "invalid", f"format {fmt!r} (expected json or arrow)")
            t0 = time.perf_counter()
            table = await asyncio.to_thread(self._run_query, sql)
            secs = time.perf_counter() - t0
        except HttpError as e:
            return _error(e.status, e.code, e.message, e.headers)
        except BadInput as e:
            return _error(400, "invalid", str(e))
        except TracehouseError as e:
            return _error(500, "internal error", str(e))
        if fmt == "arrow":
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as w:
                w.write_table(table)
            return Response(sink.getvalue().to_pybytes(), media_type=ARROW_STREAM)
        truncated = table.num_rows > self.cfg.max_query_rows
        if truncated:
            table = table.slice(0, self.cfg.max_query_rows)
        return JSON(_table_json(table) | {"seconds": round(secs, 6), "truncated": truncated})

    def _run_query(self, sql: str) -> pa.Table:
        try:
            stmts = duckdb.extract_statements(sql)
        except duckdb.Error as e:
            raise BadInput(f"SQL error: {str(e).splitlines()[0]}") from None
        if len(stmts) != 1:
            raise BadInput(f"{len(stmts)} statements: send exactly one")
        allowed = (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN)
        if stmts[0].type not in allowed:
            raise BadInput(f"read-only API: {stmts[0].type.name} statements are refused", expected="SELECT or EXPLAIN")
        return self.ingestor.store.sql(sql)

    async def create_database(self, request: Request) -> Response:
        """InfluxDB 1.x `/query?q=CREATE DATABASE name` (telegraf sends it on start)."""
        try:
            self.check_auth(request)
        except HttpError as e:
            return _error(e.status, e.code, e.message)
        q = request.query_params.get("q", "")
        if request.method == "POST" and not q:
            form = await request.form()
            q = str(form.get("q", ""))
        words = q.strip().rstrip(";").split()
        if len(words) == 3 and words[0].upper() == "CREATE" and words[1].upper() == "DATABASE":
            name = words[2].strip('"')
            try:
                await asyncio.to_thread(self.ingestor.trace, name, create=True)
            except TracehouseError as e:
                return JSONResponse({"results": [{"statement_id": 0, "error": str(e)}]})
            return JSONResponse({"results": [{"statement_id": 0}]})
        return JSONResponse({"results": [{"statement_id": 0, "error": "only CREATE DATABASE is supported here; "
                                          "query with POST /api/query (SQL)"}]}, status_code=400)

    async def ping(self, request: Request) -> Response:
        return Response(status_code=204, headers={"X-Influxdb-Version": "tracehouse", "X-Influxdb-Build": "OSS"})

    async def health(self, request: Request) -> Response:
        b = self.ingestor.budget
        return JSONResponse({"status": "pass", "name": "tracehouse", "pid": os.getpid(), "inflight_bytes": b.used,
                             "inflight_limit": b.limit, "overload_refusals": b.refused,
                             "auth_refusals": self.auth_refused, **self.ingestor.stats})


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


def _table_json(t: pa.Table) -> dict[str, Any]:
    # Column at a time (Arrow's own conversion), rows zipped in C: no per-row Python code.
    cols = [_json_column(c).to_pylist() for c in t.columns]
    return {"columns": t.column_names, "types": [str(f.type) for f in t.schema],
            "rows": list(zip(*cols)) if cols else [], "row_count": t.num_rows}


def _json_column(c):
    """DuckDB's sum() of integers is HUGEINT (Arrow decimal, scale 0): a JSON number, not a string."""
    if pa.types.is_decimal(c.type):
        try:
            return c.cast(pa.int64() if c.type.scale == 0 else pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return c.cast(pa.float64())
    return c


class JSON(Response):
    """JSON whose dates, decimals and intervals become strings (json's default=str)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return json.dumps(content, default=str, allow_nan=True).encode()


def build_app(api: Api) -> Starlette:
    routes = [
        Route("/api/v2/write", api.write_v2, methods=["POST"]),
        Route("/write", api.write_v1, methods=["POST"]),
        Route("/api/v2/arrow", api.write_arrow, methods=["POST"]),
        Route("/api/query", api.query, methods=["GET", "POST"]),
        Route("/query", api.create_database, methods=["GET", "POST"]),
        Route("/ping", api.ping, methods=["GET", "HEAD"]),
        Route("/health", api.health, methods=["GET"]),
    ]
    return Starlette(routes=routes)
