"""The server's SQL queries: each in a process of its own, with a deadline, a memory cap and
caps on the statement, its parse tree and its answer.

Owns running the read-only queries of `/api/query` (and the web UI's SQL console). A query runs
in a query process (`queryproc.py`), never in the server's own: DuckDB checks its interrupt only
while it executes, so a statement whose *planning* took long could not be stopped (a 200-way
self-join cancelled after 34 s of a 5 s timeout; 20,000 x `UNION ALL` never, at 8.8 GB), and four
of them held every worker for minutes. A process can be killed at any moment. So:

- the statement is refused at once over `max_statement` bytes (413); the query process refuses a
  parse tree over `max_parse_nodes` nodes or `max_relations` table references (422, naming the
  limit) before planning; what passes plans in well under a second (measured: 1,000 x UNION ALL
  SELECT 1 is 5,009 nodes and plans in 0.08-0.2 s; a 50-way join, 99 relations, 0.14 s; a 100-way
  join, 199 relations, 2.9 s and an interrupt does not stop it);
- a watchdog thread kills the query process of a query past its deadline (`query_timeout`,
  counted from its arrival: waiting for a process counts; 504) or whose process's resident
  memory passes `query_memory` (422; DuckDB's own memory_limit in the process is 3/4 of it, so an
  operator spills to the store's temp directory before that);
- processes are forked from a preloaded server process (`multiprocessing`'s forkserver: ~10 ms
  a process, not the 0.5 s an interpreter takes to import DuckDB and Arrow), started on first
  need and kept; a killed one is replaced on the next need. `query_workers` processes take any
  query; one more takes only short statements (at most EXPRESS_BYTES) when those are all busy,
  so `SELECT 1` answers while hostile queries hold the others (it is made beside the first
  regular one, and runs at a higher priority than they do: queryproc.NICE).
- `cancel(tag)` kills the process of the query its client named (the web console's Cancel: 499);
  a query cancelled while it waits for a process is stopped when it gets one.
- A query process opens the store read-only: it sees the registered segments and every WAL
  record the server's writer has written (acknowledged rows are in the WAL before their answer).

The answer is encoded batch by batch in the query process as it streams out of DuckDB (JSON rows
or Arrow IPC) and stopped once it passes `max_answer` bytes. An answer of 1 MiB or more crosses
to the server as a memory file (queryproc.py), which the HTTP front end sends to the client from
the file (`run(keep_file=True)`): QoS Q1.4's 305 MB Arrow answer to one client went from
1.4-1.9 s to 0.7-1.0 s at load 4 (the encode's growing buffer, a read into bytes and a copy into
the front end's buffer taken out). `submit` runs a request's job
(reading the request, then `run`) on one of the runner's threads; `close()` kills every query
process at once (they hold nothing that must be saved) and lets the threads go.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import queue
import threading
import time
from collections.abc import Callable

from ..errors import TracehouseError
from . import queryproc
from .config import ServerConfig
from .queryproc import ARROW_STREAM, AnswerFile, QueryStopped, json_bytes

__all__ = ["ARROW_STREAM", "AnswerFile", "QueryRunner", "QueryStopped", "json_bytes"]

log = logging.getLogger("tracehouse.server")

QUEUED_PER_WORKER = 16  # queries waiting for a worker, per worker, before 503
WATCH_S = 0.05  # the watchdog's period: deadlines and memory are checked this often
EXPRESS_BYTES = 256  # statements at most this long may use the express process


class _Proc:
    """One query process and the parent's end of its pipe."""

    __slots__ = ("proc", "conn", "express")

    def __init__(self, proc, conn, express: bool) -> None:
        self.proc = proc
        self.conn = conn
        self.express = express

    def kill(self) -> None:
        try:
            self.proc.kill()
        except (OSError, ValueError, AttributeError):
            pass

    def rss(self) -> int:
        """Resident bytes of the process (0 once it is gone)."""
        try:
            with open(f"/proc/{self.proc.pid}/statm", "rb") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            return 0


class _Running:
    """One query in its process, as the watchdog sees it."""

    __slots__ = ("proc", "deadline", "stopped", "tag")

    def __init__(self, proc: _Proc, deadline: float | None, tag: str | None = None) -> None:
        self.proc = proc
        self.deadline = deadline
        self.stopped: str | None = None  # "deadline", "memory", "cancelled" or "shutdown" once killed
        self.tag = tag  # the client's name for the query (`cancel`)


class QueryRunner:
    """Read-only queries over one store, each in a query process (module docstring)."""

    def __init__(self, store, cfg: ServerConfig) -> None:
        self.store = store
        self.cfg = cfg
        self.jobs: queue.Queue = queue.Queue(maxsize=cfg.query_workers * QUEUED_PER_WORKER)
        self.cond = threading.Condition()
        self.running: set[_Running] = set()
        self.idle: list[_Proc] = []  # started, waiting for a query
        self.started = 0  # regular processes alive or being started
        self.express: _Proc | None = None
        self.express_busy = False
        self.closing = False
        self.done = 0
        self.timeouts = 0
        self.too_large = 0
        self.memory_kills = 0
        self._ctx = None
        self.cancelled: dict[str, float] = {}  # tags cancelled before their query had a process
        # Jobs wait for a process on their thread: twice as many threads as processes, so that a
        # short query still finds a thread (then the express process) while hostile ones wait.
        n_threads = 2 * cfg.query_workers + 2
        self.threads = [
            threading.Thread(target=self._work, name=f"th-query-{i}", daemon=True) for i in range(n_threads)
        ]
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
            raise QueryStopped(
                503,
                "unavailable",
                f"too many queries waiting ({self.jobs.maxsize}) for the "
                f"{self.cfg.query_workers} query workers; retry later",
                retry_after=self.cfg.retry_after,
            ) from None

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
                for r in self.running:
                    if r.stopped is not None:
                        continue
                    if r.deadline is not None and now >= r.deadline:
                        r.stopped = "deadline"
                    elif self.cfg.query_memory and r.proc.rss() > self.cfg.query_memory:
                        r.stopped = "memory"
                    if r.stopped is not None:
                        r.proc.kill()
                self.cond.wait(WATCH_S)

    def close(self, wait: float = 3.0) -> None:
        """Kill every query process, drop the queued queries, let the threads go (at most `wait` s)."""
        with self.cond:
            if self.closing:
                return
            self.closing = True
            for r in self.running:
                r.stopped = r.stopped or "shutdown"
            procs = [r.proc for r in self.running] + self.idle + ([self.express] if self.express else [])
            self.idle = []
            self.cond.notify_all()
        for p in procs:
            p.kill()
        while True:
            try:
                self.jobs.get_nowait()  # each queued request is answered by the front end's close
            except queue.Empty:
                break
        for _ in self.threads:
            try:
                self.jobs.put_nowait(None)
            except queue.Full:
                break
        end = time.monotonic() + wait
        for t in self.threads:
            t.join(max(0.0, end - time.monotonic()))
        for p in procs:
            try:
                p.proc.join(max(0.0, end - time.monotonic()))
            except (AssertionError, ValueError):
                pass
        stuck = [t.name for t in self.threads if t.is_alive()]
        if stuck:
            log.warning("query threads still running at shutdown: %s", ", ".join(stuck))

    def stats(self) -> dict[str, int]:
        return {
            "queries_running": len(self.running),
            "queries_waiting": self.jobs.qsize(),
            "queries_done": self.done,
            "query_timeouts": self.timeouts,
            "answers_too_large": self.too_large,
            "query_memory_kills": self.memory_kills,
            "query_processes": self.started + (self.express is not None),
        }

    # -- query processes ---------------------------------------------------------------

    def _spawn(self, express: bool) -> _Proc:
        if self._ctx is None:
            self._ctx = multiprocessing.get_context("forkserver")
            self._ctx.set_forkserver_preload(["tracehouse.server.queryproc"])
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(
            target=queryproc.main,
            args=(child, str(self.store.path), queryproc.limits(self.cfg), express),
            name="tracehouse-query",
            daemon=True,
        )
        proc.start()
        child.close()
        return _Proc(proc, parent, express)

    def _acquire(self, sql: str, deadline: float | None) -> _Proc:
        """A query process for `sql`: an idle one, a new one while fewer than `query_workers` run,
        or the express one for a short statement; else wait (504 past the deadline)."""
        small = len(sql) <= EXPRESS_BYTES
        with self.cond:
            while True:
                if self.closing:
                    raise QueryStopped(503, "unavailable", "server shutting down")
                if self.idle:
                    return self.idle.pop()
                if self.started < self.cfg.query_workers:
                    self.started += 1
                    express = False
                    break
                if small and not self.express_busy:
                    self.express_busy = True
                    if self.express is not None and self.express.proc.is_alive():
                        return self.express
                    express = True
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise QueryStopped(
                        504,
                        "query timeout",
                        f"no query process was free within {self.cfg.query_timeout:g} s "
                        f"(--query-timeout; {self.cfg.query_workers} busy, --query-workers)",
                    )
                self.cond.wait(left)
        if not express and self.express is None and not self.express_busy:
            # The express process made ahead, beside the first regular one: when it is needed the
            # others are busy, and a process's first query opens the store and DuckDB (~0.2-0.4 s).
            threading.Thread(target=self._prepare_express, name="th-query-express", daemon=True).start()
        try:
            p = self._spawn(express)
        except BaseException:
            with self.cond:
                if express:
                    self.express_busy = False
                else:
                    self.started -= 1
                self.cond.notify_all()
            raise
        if express:
            with self.cond:
                self.express = p
        return p

    def _prepare_express(self) -> None:
        with self.cond:
            if self.express is not None or self.express_busy or self.closing:
                return
            self.express_busy = True
        p = None
        try:
            p = self._spawn(True)
            p.conn.send_bytes(json.dumps({"sql": "SELECT 1", "format": "json"}).encode())
            p.conn.recv_bytes()
            p.conn.recv_bytes()
        except (OSError, EOFError, ValueError) as e:
            log.warning("express query process not started: %s", e)
            if p is not None:
                p.kill()
            p = None
        with self.cond:
            self.express, self.express_busy = p, False
            if self.closing and p is not None:
                p.kill()
            self.cond.notify_all()

    def _release(self, p: _Proc, alive: bool) -> None:
        with self.cond:
            if p.express:
                self.express_busy = False
                if not alive:
                    self.express = None
            elif alive and not self.closing:
                self.idle.append(p)
            else:
                self.started -= 1
            self.cond.notify_all()
        if not alive:
            p.kill()
            try:
                p.conn.close()
            except OSError:
                pass

    # -- one query ---------------------------------------------------------------------

    def check_size(self, sql: str) -> None:
        """QueryStopped 413 for a statement over `max_statement` bytes (checked before anything parses it)."""
        n = len(sql.encode("utf-8", errors="replace")) if len(sql) * 4 > self.cfg.max_statement else len(sql)
        if n > self.cfg.max_statement:
            raise QueryStopped(
                413,
                "statement too large",
                f"the statement is {n:,} bytes, over {self.cfg.max_statement:,} (--max-statement)",
            )

    def cancel(self, tag: str) -> bool:
        """Stop the query named `tag` (its process killed: it answers 499); True when it was
        running. A query not yet running is stopped when it gets its process."""
        with self.cond:
            now = time.monotonic()
            self.cancelled = {t: at for t, at in self.cancelled.items() if now - at < 300}
            hit = [r for r in self.running if r.tag == tag and r.stopped is None]
            for r in hit:
                r.stopped = "cancelled"
                r.proc.kill()
            if not hit:
                self.cancelled[tag] = now
        return bool(hit)

    def run(
        self, sql: str, fmt: str, tag: str | None = None, keep_file: bool = False
    ) -> tuple[bytes | queryproc.AnswerFile, str]:
        """The answer to `sql` as (body, content type): JSON or an Arrow IPC stream. `tag`: a
        name for the query, which `cancel(tag)` stops. `keep_file`: a large body is returned as
        the memory file it came in (`queryproc.AnswerFile`, the caller closes it), for the front
        end to send from (`HttpRequest.respond_file`), not read into bytes.

        BadInput for a refused statement or an SQL error; QueryStopped past the deadline (504),
        over a limit (413, 422), cancelled (499) or at shutdown (503)."""
        self.check_size(sql)
        timeout = self.cfg.query_timeout
        deadline = time.monotonic() + timeout if timeout > 0 else None
        p = self._acquire(sql, deadline)
        r = _Running(p, deadline, tag)
        with self.cond:
            self.running.add(r)
            if r.deadline is not None and time.monotonic() >= r.deadline:
                r.stopped = "deadline"
            elif tag is not None and self.cancelled.pop(tag, None) is not None:
                r.stopped = "cancelled"
        alive = False
        try:
            if r.stopped is None:
                p.conn.send_bytes(json.dumps({"sql": sql, "format": fmt}).encode())
                head, body = queryproc.recv_answer(p.conn, keep_file)
                alive = True
            else:
                raise EOFError
        except (
            EOFError,
            OSError,
            ValueError,
            RuntimeError,
        ):  # (RuntimeError: a descriptor cut short, reduction.recvfds)
            raise self._stopped(r) from None
        finally:
            with self.cond:
                self.running.discard(r)
                self.done += 1
                self.timeouts += r.stopped == "deadline"
                self.memory_kills += r.stopped == "memory"
            self._release(p, alive and r.stopped is None)
        if not head["ok"]:
            self.too_large += head.get("code") == "answer too large"
            raise _error(head)
        return body, head["type"]

    def table(self, sql: str):
        """The answer to `sql` (SQL this server wrote: InfluxQL's translation) as one Arrow table, run
        as `run` runs a query: in a query process, under the same deadline, caps and shutdown."""
        import pyarrow as pa

        body, _ = self.run(sql, "arrow")
        return pa.ipc.open_stream(body).read_all()

    def _stopped(self, r: _Running) -> TracehouseError:
        if r.stopped == "deadline":
            return QueryStopped(
                504, "query timeout", f"query cancelled after {self.cfg.query_timeout:g} s (--query-timeout)"
            )
        if r.stopped == "cancelled":
            return QueryStopped(499, "cancelled", "query cancelled by its client")
        if r.stopped == "memory":
            return QueryStopped(
                422,
                "memory limit",
                f"the query passed {self.cfg.query_memory:,} bytes of memory (--query-memory) and was stopped",
            )
        if r.stopped == "shutdown" or self.closing:
            return QueryStopped(503, "unavailable", "server shutting down")
        code = r.proc.proc.exitcode
        log.error("query process %s ended unexpectedly (exit code %s)", r.proc.proc.pid, code)
        return TracehouseError(f"the query process ended unexpectedly (exit code {code})")


def _error(head: dict) -> TracehouseError:
    """The error a query process answered with."""
    from ..errors import BadInput, NotFound, StoreDamaged

    kind, message = head["kind"], head["message"]
    if kind == "QueryStopped":
        return QueryStopped(head["status"], head["code"], message)
    return {"BadInput": BadInput, "NotFound": NotFound, "StoreDamaged": StoreDamaged}.get(kind, TracehouseError)(
        message
    )
