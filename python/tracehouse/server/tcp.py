"""Line protocol over raw TCP (telegraf's socket_writer, `nc`, the load generator).

Owns one asyncio protocol per connection: newline framing, an ordered queue of
complete-line chunks handed to `Ingestor.write_lp` (decoded in Rust off the event
loop), per-connection back-pressure and the connection limits.

Acknowledgements — chosen semantics:
- By default a TCP connection is **at-most-once**, like InfluxDB's and QuestDB's
  TCP listeners: nothing is sent back; lines are appended as they arrive and are
  durable one group commit later; a crash may lose what was received in the last
  few milliseconds, and the sender cannot tell.
- A client that opens with the comment line `# tracehouse acks=1` (any line
  protocol parser skips it) gets **durable offsets**: after each chunk of its
  lines is durable under the fsync policy (under `--ack written`: once in the WAL,
  fsynced within `--group-commit-ms`), the server writes `ok <line> <rows>\n`
  (every line up to number `<line>` is processed; `<rows>` stored so far on this
  connection) and `err <line> <reason>\n` for each refused line. A client that
  keeps its lines until their `ok` can resend after a crash: at-least-once.
The same first line may carry `bucket=NAME` (the trace; default `--tcp-bucket`),
`precision=ns|us|ms|s` and `token=TOKEN` (required when the server has a token).

Refused lines (bad syntax, a field whose type differs from its column, ...) are counted
(`/health`: `tcp_lines_refused`, beside `tcp_rows` stored) and logged as a warning naming the
bucket, the client and the first reason, at most once per bucket every
`REFUSAL_LOG_INTERVAL` seconds (the lines refused in between are summed into the next
warning): an at-most-once sender hears nothing, so the server's log and counters are where
a refusal shows (`tracehouse load --protocol tcp` reads the counters before and after).

Limits: lines longer than `max_line` are dropped as they stream in (an error for
that line, the connection goes on); reads pause while more than `tcp_high_water`
bytes of a connection wait for ingestion, or while the server's in-flight budget
is full (the sender is slowed by TCP); connections beyond `max_connections` are
closed at once; a connection silent for `idle_timeout` is closed.
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import logging
import time

from ..errors import TracehouseError
from .config import ServerConfig
from .ingest import Coalescer, DurabilityWaiter, Ingestor, WriteResult

log = logging.getLogger("tracehouse.server")

CHUNK = 4 << 20  # most bytes handed to one decode
REFUSAL_LOG_INTERVAL = 10.0  # s between two warnings about refused lines of one bucket


class TcpServerState:
    def __init__(self, ingestor: Ingestor, cfg: ServerConfig, waiter: DurabilityWaiter, coalescer: Coalescer) -> None:
        self.ingestor = ingestor
        self.coalescer = coalescer
        self.cfg = cfg
        self.waiter = waiter
        self.connections: set["LineProtocolTcp"] = set()
        self.refused = 0
        self.auth_refused = 0
        self._refusal_log: dict[str, tuple[float, int]] = {}  # bucket -> (next warning at, refused since)

    def lines_refused(self, bucket: str, peer, res) -> None:
        """Count `res`'s refused lines and warn about them, at most once per bucket per interval."""
        self.ingestor.count_tcp(rows=res.rows, refused=res.error_count)
        if not res.error_count:
            return
        now = time.monotonic()
        due, since = self._refusal_log.get(bucket, (0.0, 0))
        since += res.error_count
        if now < due:
            self._refusal_log[bucket] = (due, since)
            return
        first = res.errors[0] if res.errors else (0, "")
        log.warning("TCP line protocol to %s from %s: %d lines refused (%d since the last warning, %d stored); "
                    "first: line %d: %s", bucket, peer, res.error_count, since, res.rows, first[0], first[1])
        self._refusal_log[bucket] = (now + REFUSAL_LOG_INTERVAL, 0)


class LineProtocolTcp(asyncio.Protocol):
    def __init__(self, state: TcpServerState) -> None:
        self.state = state
        self.cfg = state.cfg
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.queue: collections.deque = collections.deque()  # (first_line, bytes) or (line, None, message)
        self.queued = 0
        self.lines_in = 0  # lines received (complete), for numbering
        self.discarding = False
        self.paused = False
        self.eof = False
        self.started = False
        self.bucket = self.cfg.tcp_bucket
        self.precision = "ns"
        self.acks = False
        self.rows = 0
        self.last_activity = time.monotonic()
        self.wake = asyncio.Event()
        self.task: asyncio.Task | None = None
        self.ack_queue: collections.deque = collections.deque()  # ("res", result, bytes, rows) | ("err", line, why)
        self.ack_wake = asyncio.Event()
        self.ack_task: asyncio.Task | None = None
        self.ingest_done = False
        self.timer: asyncio.TimerHandle | None = None
        self.closed = False

    # -- connection ----------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        st = self.state
        if len(st.connections) >= self.cfg.max_connections:
            st.refused += 1
            transport.write(b"err 0 too many connections\n")
            transport.close()
            self.closed = True
            return
        st.connections.add(self)
        loop = asyncio.get_running_loop()
        self.task = loop.create_task(self._consume())
        self._arm_idle(loop)

    def _arm_idle(self, loop) -> None:
        self.timer = loop.call_later(max(0.05, self.cfg.idle_timeout / 4), self._check_idle, loop)

    def _check_idle(self, loop) -> None:
        if self.closed:
            return
        busy = self.queue or self.queued
        if not busy and not self.eof and time.monotonic() - self.last_activity > self.cfg.idle_timeout:
            log.info("closing idle TCP connection (%g s without data)", self.cfg.idle_timeout)
            self._close()
            return
        self._arm_idle(loop)

    def connection_lost(self, exc) -> None:
        self.state.connections.discard(self)
        self.eof = True  # whatever was received is still ingested (at-most-once, not at-most-never)
        if self.timer is not None:
            self.timer.cancel()
        self.wake.set()

    def _close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.timer is not None:
                self.timer.cancel()
            if self.transport is not None:
                self.transport.close()
            self.state.connections.discard(self)
            self.wake.set()

    def _peer(self):
        return self.transport.get_extra_info("peername") if self.transport is not None else None

    # -- framing -------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.last_activity = time.monotonic()
        if self.discarding:
            i = data.find(b"\n")
            if i < 0:
                return
            data = data[i + 1:]
            self.discarding = False
        self.buf += data
        end = self.buf.rfind(b"\n")
        if end >= 0:
            chunk = bytes(self.buf[:end + 1])
            del self.buf[:end + 1]
            if not self.started and not self._handshake(chunk):
                return
            first = self.lines_in + 1
            self.lines_in += chunk.count(b"\n")
            self._enqueue((first, chunk))
        if len(self.buf) > self.cfg.max_line:
            self.lines_in += 1
            self._enqueue((self.lines_in, None, f"line is longer than the limit of {self.cfg.max_line} bytes; dropped"))
            self.buf.clear()
            self.discarding = True

    def _handshake(self, chunk: bytes) -> bool:
        self.started = True
        first = chunk[:chunk.find(b"\n")].strip()
        opts = {}
        if first.startswith(b"# tracehouse"):
            for word in first[len(b"# tracehouse"):].decode("utf-8", "replace").split():
                k, _, v = word.partition("=")
                opts[k] = v
        if "bucket" in opts:
            self.bucket = opts["bucket"]
        if "precision" in opts:
            self.precision = {"n": "ns", "u": "us"}.get(opts["precision"], opts["precision"])
        self.acks = opts.get("acks", "0") not in ("0", "", "false")
        token = self.cfg.token
        if token and not hmac.compare_digest(opts.get("token", "").encode(), token.encode()):
            self.state.auth_refused += 1
            peer = self.transport.get_extra_info("peername") if self.transport else None
            log.warning("refused TCP connection from %s: %s", peer, "no token" if "token" not in opts else "wrong token")
            self.transport.write(b"err 0 unauthorized: first line must be '# tracehouse token=<token>'\n")
            self._close()
            return False
        if self.precision not in ("ns", "us", "ms", "s"):
            self.transport.write(f"err 0 precision {self.precision!r}: expected ns, us, ms or s\n".encode())
            self._close()
            return False
        return True

    def _enqueue(self, item) -> None:
        self.queue.append(item)
        if item[1] is not None:
            self.queued += len(item[1])
            if self.queued > self.cfg.tcp_high_water and not self.paused:
                self.paused = True
                self.transport.pause_reading()
        self.wake.set()

    def eof_received(self):
        # A last line without '\n' still counts.
        if self.buf and not self.discarding and not self.closed:
            chunk = bytes(self.buf) + b"\n"
            self.buf.clear()
            if self.started or self._handshake(chunk):
                first = self.lines_in + 1
                self.lines_in += 1
                self._enqueue((first, chunk))
        self.eof = True
        self.wake.set()
        return True  # keep the transport to send the last acknowledgements

    # -- ingestion -----------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def _ack(self, item) -> None:
        """Queue an acknowledgement line; they are sent in order once their rows are durable."""
        self.ack_queue.append(item)
        self.ack_wake.set()
        if self.ack_task is None:
            self.ack_task = asyncio.get_running_loop().create_task(self._send_acks())

    async def _send_acks(self) -> None:
        # Apart from ingestion, so a connection's next chunks are decoded and appended while
        # earlier ones wait for their group commit (one fsync for a whole streamed batch, not
        # one per network read).
        budget = self.state.ingestor.budget
        max_errors = self.cfg.max_errors
        try:
            while True:
                await self.ack_wake.wait()
                self.ack_wake.clear()
                while self.ack_queue:
                    item = self.ack_queue.popleft()
                    if item[0] == "err":
                        self._write(f"err {item[1]} {item[2]}\n".encode())
                        continue
                    _kind, res, n, total = item
                    try:
                        if res.lsn is not None and self.cfg.ack == "durable":
                            await self.state.waiter.wait(res.trace, res.lsn)
                    except TracehouseError as e:
                        log.warning("TCP write to %s not durable: %s", self.bucket, e)
                        self._write(f"err {res.last_line} {e}\n".encode())
                        self._close()
                        return
                    finally:
                        budget.release(n)
                    out = [f"err {line} {msg}\n" for line, msg in res.errors[:max_errors]]
                    out.append(f"ok {res.last_line} {total}\n")
                    self._write("".join(out).encode())
                if self.ingest_done:
                    return
        finally:
            for item in self.ack_queue:  # closed early: give back what the unsent ones held
                if item[0] == "res":
                    budget.release(item[2])
            self.ack_queue.clear()

    async def _consume(self) -> None:
        ing = self.state.ingestor
        budget = ing.budget
        try:
            while True:
                await self.wake.wait()
                self.wake.clear()
                while self.queue:
                    item = self.queue[0]
                    if item[1] is None:  # a dropped over-long line
                        self.queue.popleft()
                        self.state.lines_refused(self.bucket, self._peer(), WriteResult(
                            self.bucket, errors=[(item[0], item[2])], error_count=1))
                        if self.acks:
                            self._ack(("err", item[0], item[2]))
                        continue
                    parts, n, first = [], 0, item[0]
                    while self.queue and self.queue[0][1] is not None and n < CHUNK:
                        it = self.queue.popleft()
                        parts.append(it[1])
                        n += len(it[1])
                    body = parts[0] if len(parts) == 1 else b"".join(parts)
                    while not budget.try_acquire(n):  # the server is full: this client waits, reads paused
                        if not self.paused and self.transport is not None:
                            self.paused = True
                            self.transport.pause_reading()
                        await asyncio.sleep(0.01)
                    try:
                        res = await self.state.coalescer.write(self.bucket, body, self.precision, None, first)
                    except TracehouseError as e:
                        budget.release(n)
                        log.warning("TCP write to %s failed: %s", self.bucket, e)
                        if self.acks:
                            self._ack(("err", first, str(e)))
                        break
                    self.rows += res.rows
                    self.queued -= n
                    self.state.lines_refused(self.bucket, self._peer(), res)
                    if self.acks:
                        self._ack(("res", res, n, self.rows))  # the budget is released once durable
                    else:
                        budget.release(n)
                    if self.paused and self.queued <= self.cfg.tcp_high_water // 2 and not self.closed:
                        self.paused = False
                        self.transport.resume_reading()
                else:
                    if not (self.eof or self.closed):
                        continue
                # End of stream (or a failed write): send the last acknowledgements, then close.
                self.ingest_done = True
                if self.ack_task is not None:
                    self.ack_wake.set()
                    await self.ack_task
                if self.transport is not None and not self.transport.is_closing():
                    self.transport.close()
                self.state.connections.discard(self)
                return
        except asyncio.CancelledError:
            raise
        except Exception:  # never let one connection take the server down
            log.exception("TCP connection failed")
            self._close()
