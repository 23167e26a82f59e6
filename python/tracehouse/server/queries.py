"""The server's SQL queries: worker threads, a deadline per query, a cap on answer bytes, shutdown.

Owns running the read-only queries of `/api/query`. A query is checked first
(`sqlguard.check_read_only`), then runs on a cursor of its own (`QueryEngine.snapshot`: its
own transaction, rolled back after) on one of `query_workers` threads, so a slow query holds
one worker and `SELECT 1` is answered by another. A watchdog thread interrupts (DuckDB's
`interrupt()`) every query still running at its deadline (`query_timeout`), and again every
50 ms until it stops: an interrupt that lands between two statements of the client library
(bind, then execute) would otherwise be forgotten. The answer is encoded batch by batch as it
streams out of DuckDB (JSON rows or Arrow IPC) and the query is stopped once the encoded
answer passes `max_answer` bytes: a 300 MB answer no longer takes the server to 1.45 GB of RSS.
`close()` interrupts every running query and lets the threads go; they are daemons, so a
query that ignored its interrupt cannot keep the process alive.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable

import duckdb
import pyarrow as pa

from ..errors import BadInput, TracehouseError
from ..store.query import arrow_reader, error_line
from .config import ServerConfig
from .sqlguard import check_read_only

log = logging.getLogger("tracehouse.server")

ARROW_STREAM = "application/vnd.apache.arrow.stream"
BATCH_ROWS = 16_384  # rows per batch taken from DuckDB: bounds the Python objects of one JSON batch
QUEUED_PER_WORKER = 16  # queries waiting for a worker, per worker, before 503
REINTERRUPT_S = 0.05


class QueryStopped(TracehouseError):
    """A query stopped before its answer was complete; `status` is its HTTP answer."""

    def __init__(self, status: int, code: str, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.retry_after = retry_after


class _Running:
    """One query on its cursor, as the watchdog sees it."""

    __slots__ = ("cursor", "deadline", "stopped")

    def __init__(self, cursor, deadline: float | None) -> None:
        self.cursor = cursor
        self.deadline = deadline
        self.stopped: str | None = None  # "deadline" or "shutdown" once interrupted; "too large"


class QueryRunner:
    """`query_workers` threads running read-only queries over one store, each with a deadline."""

    def __init__(self, store, cfg: ServerConfig) -> None:
        self.store = store
        self.cfg = cfg
        self.jobs: queue.Queue = queue.Queue(maxsize=cfg.query_workers * QUEUED_PER_WORKER)
        self.cond = threading.Condition()
        self.running: set[_Running] = set()
        self.closing = False
        self.done = 0
        self.timeouts = 0
        self.too_large = 0
        self.threads = [threading.Thread(target=self._work, name=f"th-query-{i}", daemon=True)
                        for i in range(cfg.query_workers)]
        self.threads.append(threading.Thread(target=self._watch, name="th-query-watchdog", daemon=True))
        for t in self.threads:
            t.start()

    # -- the threads -------------------------------------------------------------------

    def submit(self, job: Callable[[], None]) -> None:
        """Queue `job` (which answers its request itself); QueryStopped 503 when the queue is full."""
        if self.closing:
            raise QueryStopped(503, "unavailable", "server shutting down", retry_after=self.cfg.retry_after)
        try:
            self.jobs.put_nowait(job)
        except queue.Full:
            raise QueryStopped(503, "unavailable",
                               f"too many queries waiting ({self.jobs.maxsize}) for the "
                               f"{self.cfg.query_workers} query workers; retry later",
                               retry_after=self.cfg.retry_after) from None

    def _work(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            try:
                job()
            except BaseException:  # noqa: BLE001 - a worker must survive anything; jobs answer their own errors
                log.exception("query job failed")

    def _watch(self) -> None:
        with self.cond:
            while not self.closing:
                now = time.monotonic()
                wait = None
                for r in self.running:
                    if r.stopped is None and r.deadline is not None and now >= r.deadline:
                        r.stopped = "deadline"
                    if r.stopped in ("deadline", "shutdown"):
                        r.cursor.interrupt()  # again until it ends (see the module's docstring)
                        wait = REINTERRUPT_S
                    elif r.deadline is not None:
                        left = r.deadline - now
                        wait = left if wait is None else min(wait, left)
                self.cond.wait(wait)

    def close(self, wait: float = 3.0) -> None:
        """Interrupt every running query, drop the queued ones, let the workers go (at most `wait` s)."""
        with self.cond:
            if self.closing:
                return
            self.closing = True
            for r in self.running:
                r.stopped = r.stopped or "shutdown"
                r.cursor.interrupt()
            self.cond.notify_all()
        while True:
            try:
                self.jobs.get_nowait()  # each queued request is answered by the front end's close
            except queue.Empty:
                break
        for _ in range(self.cfg.query_workers):
            try:
                self.jobs.put_nowait(None)
            except queue.Full:
                break
        end = time.monotonic() + wait
        for t in self.threads:
            t.join(max(0.0, end - time.monotonic()))
        with self.cond:  # interrupt any that started since, once more
            for r in self.running:
                r.cursor.interrupt()
        stuck = [t.name for t in self.threads if t.is_alive()]
        if stuck:
            log.warning("query threads still running at shutdown: %s", ", ".join(stuck))

    def stats(self) -> dict[str, int]:
        return {"queries_running": len(self.running), "queries_waiting": self.jobs.qsize(),
                "queries_done": self.done, "query_timeouts": self.timeouts, "answers_too_large": self.too_large}

    # -- one query ---------------------------------------------------------------------

    def run(self, sql: str, fmt: str) -> tuple[bytes, str]:
        """The answer to `sql` as (body, content type): JSON or an Arrow IPC stream.

        BadInput for a refused statement or an SQL error, QueryStopped past the deadline, past
        the answer cap or at shutdown."""
        check_read_only(sql)
        t0 = time.perf_counter()
        with self._running(sql) as (cur, query, r):
            rel = cur.sql(query)
            batches = iter(()) if rel is None else arrow_reader(rel, BATCH_ROWS)
            encode = _ArrowAnswer if fmt == "arrow" else _JsonAnswer
            answer = encode(self.cfg.max_answer, self.cfg.max_query_rows)
            if rel is not None:
                answer.start(batches.schema)
            for batch in batches:
                if r.stopped or not answer.add(batch):
                    break
            if r.stopped:
                raise duckdb.InterruptException("interrupted")
            if answer.over:
                self._too_large(r, answer.rows)
            body = answer.finish(time.perf_counter() - t0)
        return body, (ARROW_STREAM if fmt == "arrow" else "application/json")

    def table(self, sql: str) -> pa.Table:
        """The answer to `sql` (SQL this server wrote: InfluxQL's translation) as one Arrow table,
        under the same deadline, answer cap and shutdown as `run`."""
        with self._running(sql) as (cur, query, r):
            rel = cur.sql(query)
            if rel is None:
                return pa.table({})
            batches, size = [], 0
            reader = arrow_reader(rel, BATCH_ROWS)
            for batch in reader:
                if r.stopped:
                    raise duckdb.InterruptException("interrupted")
                batches.append(batch)
                size += batch.nbytes
                if size > self.cfg.max_answer:
                    self._too_large(r, sum(b.num_rows for b in batches))
            return pa.Table.from_batches(batches, reader.schema)

    def _too_large(self, r: _Running, rows: int) -> None:
        r.stopped = "too large"
        raise QueryStopped(
            422, "answer too large",
            f"the answer passed {self.cfg.max_answer:,} bytes (--max-answer) after {rows:,} rows: "
            "aggregate, add a LIMIT, select fewer columns, or raise --max-answer")

    @contextmanager
    def _running(self, sql: str):
        """(cursor, the SQL to run on it, its watch entry) for one query on a snapshot cursor, seen by
        the watchdog; DuckDB's and Arrow's errors become BadInput or QueryStopped."""
        timeout = self.cfg.query_timeout
        engine = self.store.query_engine
        with engine.snapshot(sql) as cur:
            r = _Running(cur, time.monotonic() + timeout if timeout > 0 else None)
            with self.cond:
                if self.closing:
                    raise QueryStopped(503, "unavailable", "server shutting down")
                self.running.add(r)
                self.cond.notify_all()
            try:
                yield cur, engine.snapshot_query(sql), r
            except (duckdb.Error, pa.ArrowException, OSError) as e:  # the Arrow reader reports an interrupt as OSError
                if r.stopped == "deadline":
                    raise QueryStopped(408, "query timeout",
                                       f"query cancelled after {timeout:g} s (--query-timeout)") from None
                if r.stopped == "shutdown":
                    raise QueryStopped(503, "unavailable", "server shutting down") from None
                raise BadInput(f"SQL error: {error_line(e)}", expected="a valid DuckDB query over the store's views") \
                    from None
            finally:
                with self.cond:
                    self.running.discard(r)
                    self.done += 1
                    self.timeouts += r.stopped == "deadline"
                    self.too_large += r.stopped == "too large"


class _JsonAnswer:
    """{"columns", "types", "rows", "row_count", "seconds", "truncated"}, built a batch at a time."""

    def __init__(self, max_bytes: int, max_rows: int) -> None:
        self.max_bytes = max_bytes
        self.max_rows = max_rows
        self.parts: list[bytes] = []
        self.size = 0
        self.rows = 0
        self.over = False
        self.truncated = False
        self.schema = pa.schema([])

    def start(self, schema: pa.Schema) -> None:
        self.schema = schema

    def add(self, batch: pa.RecordBatch) -> bool:
        """Takes a batch; False once no more are wanted (row cap reached or byte cap passed)."""
        if self.rows + batch.num_rows > self.max_rows:
            batch = batch.slice(0, self.max_rows - self.rows)
            self.truncated = True
        if batch.num_rows:
            # Column at a time (Arrow's own conversion), rows zipped in C: no per-row Python code.
            cols = [_json_column(c).to_pylist() for c in batch.columns]
            text = json.dumps(list(zip(*cols)), default=str, allow_nan=True).encode()
            self.parts.append(text[1:-1])
            self.size += len(text)
            self.rows += batch.num_rows
        if self.size > self.max_bytes:
            self.over = True
        return not (self.over or self.truncated)

    def finish(self, seconds: float) -> bytes:
        head = json_bytes({"columns": self.schema.names, "types": [str(f.type) for f in self.schema]})
        tail = json_bytes({"row_count": self.rows, "seconds": round(seconds, 6), "truncated": self.truncated})
        return head[:-1] + b', "rows": [' + b", ".join(self.parts) + b"], " + tail[1:]


class _ArrowAnswer:
    """An Arrow IPC stream, written a batch at a time (no row cap: the byte cap bounds it)."""

    def __init__(self, max_bytes: int, _max_rows: int) -> None:
        self.max_bytes = max_bytes
        self.sink = pa.BufferOutputStream()
        self.writer = None
        self.rows = 0
        self.over = False

    def start(self, schema: pa.Schema) -> None:
        self.writer = pa.ipc.new_stream(self.sink, schema)

    def add(self, batch: pa.RecordBatch) -> bool:
        self.writer.write_batch(batch)
        self.rows += batch.num_rows
        self.over = self.sink.tell() > self.max_bytes
        return not self.over

    def finish(self, _seconds: float) -> bytes:
        if self.writer is None:  # a statement without rows: an empty stream of no columns
            self.start(pa.schema([]))
        self.writer.close()
        return self.sink.getvalue().to_pybytes()


def json_bytes(doc: Any) -> bytes:
    """`doc` as JSON. default=str: dates, decimals and intervals of query answers become strings."""
    return json.dumps(doc, default=str, allow_nan=True).encode()


def _json_column(c):
    """DuckDB's sum() of integers is HUGEINT (Arrow decimal, scale 0): a JSON number, not a string."""
    if pa.types.is_decimal(c.type):
        try:
            return c.cast(pa.int64() if c.type.scale == 0 else pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return c.cast(pa.float64())
    return c
