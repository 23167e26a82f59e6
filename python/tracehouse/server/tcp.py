"""Line protocol over raw TCP (telegraf's socket_writer, `nc`, the load generator): the
dispatcher's side.

The native front end (`src/ingest/tcpfront.rs`) accepts the connections, frames their lines,
reads the handshake, enforces the limits and back-pressure and writes the acknowledgements;
its chunks (`_core.TcpChunk`) come out of `HttpFront.take` beside the HTTP requests, and the
dispatcher (http.py) decodes and appends a round's line-protocol bodies of one trace together,
whatever their protocol. This module owns what happens to a chunk around that append:
its decode arguments, the counters and warnings of refused lines, and finishing it (the
durable-offset `ok` waits for the store's group committer, as an HTTP `204` does).

Acknowledgements — chosen semantics:
- By default a TCP connection is **at-most-once**, like InfluxDB's and QuestDB's TCP
  listeners: nothing is sent back; lines are appended as they arrive and are durable one
  group commit later; a crash may lose what was received in the last few milliseconds, and
  the sender cannot tell.
- A client that opens with the comment line `# tracehouse acks=1` (any line protocol parser
  skips it) gets **durable offsets**: once a chunk of its lines is durable under the fsync
  policy (under `--ack written`: once in the WAL, fsynced within `--group-commit-ms`), the
  server writes `ok <line> <rows>\n` (every line up to number `<line>` is processed; `<rows>`
  stored so far on this connection) after `err <line> <reason>\n` for each refused line. A
  client that keeps its lines until their `ok` can resend after a crash: at-least-once.
The same first line may carry `bucket=NAME` (the trace; default `--tcp-bucket`),
`precision=ns|us|ms|s` and `token=TOKEN` (required when the server has a token).

Refused lines (bad syntax, a field whose type differs from its column, ...) are counted
(`/health`: `tcp_lines_refused`, beside `tcp_rows` stored) and logged as a warning naming the
bucket, the client and the first reason, at most once per bucket every
`REFUSAL_LOG_INTERVAL` seconds (the lines refused in between are summed into the next
warning): an at-most-once sender hears nothing, so the server's log and counters are where
a refusal shows (`tracehouse load --protocol tcp` reads the counters before and after).
A chunk whose append fails as a whole (an invalid bucket name, a full disk) is logged, its
error sent under durable offsets, and its connection closed.
"""

from __future__ import annotations

import logging
import threading
import time

from .config import ServerConfig
from .ingest import Ingestor, WriteResult

log = logging.getLogger("tracehouse.server")

REFUSAL_LOG_INTERVAL = 10.0  # s between two warnings about refused lines of one bucket


class TcpChunks:
    """Turns the front end's TCP chunks into decode items and finishes them once appended."""

    def __init__(self, ingestor: Ingestor, cfg: ServerConfig) -> None:
        self.ingestor = ingestor
        self.cfg = cfg
        self._refusal_log: dict[str, tuple[float, int]] = {}  # bucket -> (next warning at, refused since)
        self._lock = threading.Lock()

    def item(self, chunk) -> tuple[str, tuple] | None:
        """(trace, decode item) of a chunk of lines; None for a dropped line (finished here)."""
        if chunk.dropped is not None:
            line, why = chunk.dropped
            self.done(chunk, WriteResult(chunk.bucket, errors=[(line, why)], error_count=1, last_line=line))
            return None
        return chunk.bucket, (chunk.take_body(), chunk.precision, chunk.received_ns, chunk.first_line)

    def done(self, chunk, res: WriteResult) -> None:
        """`chunk` was appended as `res` says: count, warn, and finish it (its `ok` waits for
        durability under durable offsets and `--ack durable`)."""
        self.ingestor.count_tcp(rows=res.rows, refused=res.error_count)
        if res.error_count:
            self._warn(chunk.bucket, chunk.peer, res)
        committer = None
        if chunk.acks and res.lsn is not None and self.cfg.ack == "durable":
            committer = self.ingestor.committer(res.trace)
        try:
            chunk.finish(res.rows, res.errors[: self.cfg.max_errors], res.last_line, committer, res.lsn or 0)
        except RuntimeError:
            pass  # finished already (cannot happen: one round finishes a chunk once)

    def failed(self, chunk, e: BaseException) -> None:
        log.warning("TCP write to %s from %s failed: %s", chunk.bucket, chunk.peer, e)
        try:
            chunk.fail(str(e))
        except RuntimeError:
            pass

    def _warn(self, bucket: str, peer: str, res: WriteResult) -> None:
        """Warn about `res`'s refused lines, at most once per bucket per interval."""
        now = time.monotonic()
        with self._lock:
            due, since = self._refusal_log.get(bucket, (0.0, 0))
            since += res.error_count
            if now < due:
                self._refusal_log[bucket] = (due, since)
                return
            self._refusal_log[bucket] = (now + REFUSAL_LOG_INTERVAL, 0)
        first = res.errors[0] if res.errors else (0, "")
        log.warning(
            "TCP line protocol to %s from %s: %d lines refused (%d since the last warning, %d stored); "
            "first: line %d: %s",
            bucket,
            peer,
            res.error_count,
            since,
            res.rows,
            first[0],
            first[1],
        )
