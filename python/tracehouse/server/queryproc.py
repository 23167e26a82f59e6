"""A query process: runs the server's read-only SQL queries, one at a time, over the store.

Owns what happens to a statement after the server handed it over (queries.py owns the processes,
their deadlines and memory): the read-only check (`sqlguard.check_read_only`), the caps on its
parse tree (`max_parse_nodes` nodes, `max_relations` table references: 422 naming the limit,
before DuckDB plans it), the query on a cursor of its own (`QueryEngine.snapshot`: a transaction
rolled back after), the answer encoded batch by batch up to `max_answer` bytes (422 beyond).

The store is opened read-only and its SQL sandboxed (`Store.sandbox_sql`): files under the store
only, DuckDB's temp directory inside it (`<store>/tmp/query-<pid>`, removed when the process
ends), DuckDB's memory_limit at 3/4 of `query_memory` (the server kills the process at the whole).

The answer encoders (`_JsonAnswer`, `_ArrowAnswer`) and `QueryStopped` live here; queries.py
re-exports what the rest of the server uses.

Protocol on the pipe (multiprocessing.Connection, bytes): the server sends {"sql", "format"} as
JSON; the process answers with two messages: a JSON head ({"ok": true, "type"} or {"ok": false,
"kind", "status", "code", "message"}), then the body (the answer; empty for an error). A body of
FD_BYTES or more is written to a memory file (memfd) instead, the head says how long
(`fd_bytes`) and the file's descriptor follows (`send_answer`, `recv_answer`): it is freed when
both ends have closed it, so a process killed meanwhile leaves nothing behind. An Arrow answer
past HELD_BYTES is encoded into a memory file of its own as it streams (`_ArrowAnswer`), and the
server's HTTP front end sends it to the client from the file (`recv_answer(keep_file=True)`): QoS
Q1.4, 600,000 rows and 305 MB as Arrow, went from 1.8-1.9 s to 0.55-0.9 s served to one client at
load 3-4.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
from multiprocessing import reduction
from pathlib import Path

import duckdb
import pyarrow as pa

from ..errors import BadInput, TracehouseError
from ..jsonvalues import json_bytes, json_column
from ..store import Store
from ..store.query import arrow_reader, error_line, error_text
from .config import ServerConfig
from .sqlguard import check_read_only, parse_tree_size

ARROW_STREAM = "application/vnd.apache.arrow.stream"
BATCH_ROWS = 16_384  # rows per batch taken from DuckDB: bounds the Python objects of one JSON batch
FD_BYTES = 1 << 20  # answers this big go in a memory file, not through the pipe (`send_answer`)
WRITE_BUFFER = 1 << 20  # bytes an Arrow answer gathers before each write into its memory file
HELD_BYTES = 32 << 20  # an Arrow answer this big (DuckDB's batches) is encoded at once at its end


class QueryStopped(TracehouseError):
    """A query stopped before its answer was complete; `status` is its HTTP answer."""

    def __init__(self, status: int, code: str, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.retry_after = retry_after


def limits(cfg: ServerConfig) -> dict:
    """What a query process needs of the server's configuration."""
    return {
        "max_answer": cfg.max_answer,
        "max_query_rows": cfg.max_query_rows,
        "max_parse_nodes": cfg.max_parse_nodes,
        "max_relations": cfg.max_relations,
        "query_memory": cfg.query_memory,
    }


# A query process runs a step below the server (its ingest must not wait for the cores a query
# takes) and the express process (short statements while the others are busy must find a core).
# One step, not more: the niceness also ranks it below every other program of the machine, and at
# nice 5 a two-core query took 3x as long on a machine busy with others (QoS Q2.3 in a query
# process at load 19-23: 312 ms at nice 0, 416 ms at nice 1, 913 ms at nice 5).
NICE = 1


def main(conn, store_path: str, lim: dict, express: bool = False) -> None:
    """The process's loop: a request in, an answer out, until the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's to handle: it kills us
    if not express:
        try:
            os.nice(NICE)
        except OSError:
            pass
    tmp = Path(store_path) / "tmp" / f"query-{os.getpid()}"
    store = Store(store_path, readonly=True)
    try:
        memory = lim["query_memory"] * 3 // 4 if lim["query_memory"] else None
        store.sandbox_sql(temp_directory=str(tmp), memory_limit=memory)
        while True:
            try:
                req = json.loads(conn.recv_bytes())
            except (EOFError, OSError):
                return
            try:
                body, ctype = answer(store, req["sql"], req["format"], lim)
                head = {"ok": True, "type": ctype}
            except QueryStopped as e:
                head, body = (
                    {"ok": False, "kind": "QueryStopped", "status": e.status, "code": e.code, "message": str(e)},
                    b"",
                )
            except TracehouseError as e:
                head, body = {"ok": False, "kind": type(e).__name__, "message": str(e)}, b""
            except Exception as e:  # noqa: BLE001 - the server answers 500 with it
                head, body = {"ok": False, "kind": "TracehouseError", "message": f"{type(e).__name__}: {e}"}, b""
            try:
                send_answer(conn, head, body)
            finally:
                if isinstance(body, AnswerFile):
                    body.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def send_answer(conn, head: dict, body) -> None:
    """The head, then the body: on the pipe when small, else in a memory file whose descriptor
    goes over the pipe (the server reads it in one call, or its front end sends it to the client
    from the file). 30 MB over the pipe (a socket pair of ~200 KB buffers) takes ~150 round trips
    between the two processes, each waiting for the scheduler on a loaded machine: 46 ms at rest,
    171 ms at nice 5 and load 21, against one copy into the memory file and one read of it. An
    Arrow answer is written into its memory file as it is encoded (`_ArrowAnswer`)."""
    own = None
    if not isinstance(body, AnswerFile) and len(body) >= FD_BYTES:
        spill = _Spill()
        try:
            spill.write(body)
        except BaseException:
            spill.close()
            raise
        body = own = spill.take()
    try:
        if isinstance(body, AnswerFile) and body.size >= FD_BYTES:
            conn.send_bytes(json.dumps(dict(head, fd_bytes=body.size)).encode())
            reduction.send_handle(conn, body.fd, os.getppid())
            return
        if isinstance(body, AnswerFile):
            body = body.read()
        conn.send_bytes(json.dumps(head).encode())
        conn.send_bytes(body)
    finally:
        if own is not None:
            own.close()  # (the server holds its own descriptor of the file from here on)


class AnswerFile:
    """An answer's bytes in a memory file: its descriptor (owned: `close`) and its length."""

    __slots__ = ("fd", "size")

    def __init__(self, fd: int, size: int) -> None:
        self.fd = fd
        self.size = size

    def read(self) -> bytes:
        parts, done = [], 0
        while done < self.size:
            part = os.pread(self.fd, self.size - done, done)
            if not part:
                raise EOFError(f"the answer's memory file ended at {done:,} of {self.size:,} bytes")
            parts.append(part)
            done += len(part)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def recv_answer(conn, keep_file: bool = False) -> tuple[dict, bytes | AnswerFile]:
    """What `send_answer` sent: (head, body). `keep_file`: a body that came in a memory file is
    returned as that file (`AnswerFile`, the caller closes it), not read into bytes."""
    head = json.loads(conn.recv_bytes())
    n = head.pop("fd_bytes", None)
    if n is None:
        return head, conn.recv_bytes()
    f = AnswerFile(reduction.recv_handle(conn), n)
    if keep_file:
        return head, f
    try:
        return head, f.read()
    finally:
        f.close()


def answer(store: Store, sql: str, fmt: str, lim: dict) -> tuple[bytes | pa.Buffer, str]:
    """The answer to one read-only statement (module docstring): the body (bytes-like) and its type."""
    check_read_only(sql)
    nodes, relations = parse_tree_size(sql)
    if nodes > lim["max_parse_nodes"]:
        raise QueryStopped(
            422,
            "statement too complex",
            f"the statement's parse tree has {nodes:,} nodes, over {lim['max_parse_nodes']:,} (--max-parse-nodes)",
        )
    if relations > lim["max_relations"]:
        raise QueryStopped(
            422,
            "statement too complex",
            f"the statement names {relations:,} tables and joins, over {lim['max_relations']:,} (--max-relations)",
        )
    t0 = time.perf_counter()
    engine = store.query_engine
    with engine.snapshot(sql, keep_open=True), contextlib.ExitStack() as stack:
        # (nothing runs on the cursor but the relation; the stack closes an unfinished answer's file)
        try:
            rel = engine.snapshot_relation()
            batches = iter(()) if rel is None else arrow_reader(rel, BATCH_ROWS)
            encode = _ArrowAnswer if fmt == "arrow" else _JsonAnswer
            out = encode(lim["max_answer"], lim["max_query_rows"])
            stack.callback(out.close)
            if rel is not None:
                out.start(batches.schema)
            for batch in batches:
                if not out.add(batch):
                    break
            out.end()
            if out.over:
                raise QueryStopped(
                    422,
                    "answer too large",
                    f"the answer passed {lim['max_answer']:,} bytes (--max-answer) after {out.rows:,} rows: "
                    "aggregate, add a LIMIT, select fewer columns, or raise --max-answer",
                )
            body = out.finish(time.perf_counter() - t0)
            stack.pop_all()
        except duckdb.OutOfMemoryException as e:
            raise QueryStopped(
                422, "memory limit", f"the query ran out of its memory ({error_line(e)}; --query-memory)"
            ) from None
        except (duckdb.Error, pa.ArrowException, OSError) as e:
            raise BadInput(
                f"SQL error: {error_text(e)}", expected="a valid DuckDB query over the store's views"
            ) from None
    return body, (ARROW_STREAM if fmt == "arrow" else "application/json")


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
            cols = [json_column(c) for c in batch.columns]
            text = json_bytes(list(zip(*cols)))
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

    def end(self) -> None:
        pass

    def close(self) -> None:
        pass


class _ArrowAnswer:
    """An Arrow IPC stream (no row cap: the byte cap bounds it). DuckDB's batches are held as they
    come while they hold under HELD_BYTES (and the byte cap), then encoded at once into Arrow's
    own buffer (`end`): the body, which `send_answer` passes on, in a memory file from FD_BYTES.
    A longer answer is written as it streams, a batch at a time, through a buffer of WRITE_BUFFER
    bytes into a memory file of its own (Arrow's native file writer on it), which goes to the
    server, whose front end sends it to the client from there. Encoded into a growing buffer in
    memory first, the 305 MB of QoS Q1.4 took 1.0-1.7 s against 0.2-0.3 s for DuckDB's batches
    alone (the buffer copied as it grew, then copied again into the memory file).

    The stream went through `pa.PythonFile` into `_Spill` before (Arrow hands each write to
    Python as a new `bytes`): 5 MB of QoS Q1.2 (10,000 rows x 64 columns) took 8.8-18 ms to
    encode and put in a memory file against 3.4-12.8 ms encoded at once and written in one call;
    2.5 MB of Q4.2 25 against 7.7 ms (40 interleaved rounds each, load 9-10)."""

    def __init__(self, max_bytes: int, _max_rows: int) -> None:
        self.max_bytes = max_bytes
        self.schema: pa.Schema | None = None
        self.held: list[pa.RecordBatch] = []  # batches not encoded yet (`end`)
        self.held_bytes = 0
        self.body: pa.Buffer | None = None
        self.size = -1  # the stream's bytes once ended (`end`)
        self.fd = -1  # the memory file of a streamed answer
        self.sink = None
        self.writer = None
        self.rows = 0
        self.over = False

    def start(self, schema: pa.Schema) -> None:
        self.schema = schema

    def add(self, batch: pa.RecordBatch) -> bool:
        self.rows += batch.num_rows
        if self.writer is None:
            self.held.append(batch)
            self.held_bytes += batch.get_total_buffer_size()  # (`nbytes` took 0.1 ms for 64 columns)
            if self.held_bytes <= min(HELD_BYTES, self.max_bytes):
                return True
            self._stream()
        else:
            self.writer.write_batch(batch)
        self.over = self.sink.tell() > self.max_bytes
        return not self.over

    def _stream(self) -> None:
        """From here on the answer is written as it comes, into a memory file."""
        self.fd = os.memfd_create("tracehouse-answer", os.MFD_CLOEXEC)
        self.sink = pa.BufferedOutputStream(pa.OSFile(f"/proc/self/fd/{self.fd}", "w"), WRITE_BUFFER)
        self.writer = pa.ipc.new_stream(self.sink, self.schema)
        for b in self.held:
            self.writer.write_batch(b)
        self.held = []

    def end(self) -> None:
        """Every batch is in: the stream is ended, and `over` says whether it passed the byte cap
        (its end-of-stream marker counted)."""
        if self.size >= 0:
            return
        if self.writer is not None:
            self.writer.close()
            self.size = self.sink.tell()
            self.sink.close()  # (its own descriptor of the memory file)
        else:
            schema = self.schema if self.schema is not None else pa.schema([])  # (none: a statement without rows)
            # Measured first (no bytes copied), then written into a buffer of that size, not one
            # that copies itself as it grows: QoS Q4.3 (26 MB) 4.9 against 9.9 ms, Q1.2 (5 MB)
            # 0.85 against 1.25, Q1.1 (0.5 MB) 0.11 against 0.09 (41 interleaved, load 5).
            mock = pa.MockOutputStream()
            self._encode(mock, schema)
            self.body = pa.allocate_buffer(mock.size())
            self._encode(pa.FixedSizeBufferWriter(self.body), schema)
            self.held, self.size = [], self.body.size
        self.over = self.size > self.max_bytes

    def _encode(self, sink, schema: pa.Schema) -> None:
        with pa.ipc.new_stream(sink, schema) as w:
            for b in self.held:
                w.write_batch(b)

    def finish(self, _seconds: float) -> pa.Buffer | AnswerFile:
        self.end()
        if self.writer is None:
            return self.body
        fd, self.fd = self.fd, -1
        return AnswerFile(fd, self.size)

    def close(self) -> None:
        """Frees the memory file of an answer not finished (an error or the byte cap)."""
        if self.fd >= 0:
            if self.sink is not None and not self.sink.closed:
                self.sink.close()
            os.close(self.fd)
            self.fd = -1


class _Spill:
    """A write-only file that keeps its bytes in memory until they reach FD_BYTES, then moves
    them into a memory file and writes the rest there (`send_answer`: a large body in bytes, a
    JSON answer's or an encoded Arrow one's). Opening a memory file for every answer added
    60-130 µs to a one-row answer."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.fd = -1

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        n = len(view)
        if self.fd < 0 and self.size + n < FD_BYTES:
            self.parts.append(bytes(view))
        else:
            if self.fd < 0:
                self.fd = os.memfd_create("tracehouse-answer", os.MFD_CLOEXEC)
                self._put(memoryview(b"".join(self.parts)))
                self.parts = []
            self._put(view)
        self.size += n
        return n

    def _put(self, view: memoryview) -> None:
        done = 0
        while done < len(view):
            done += os.write(self.fd, view[done:])

    def take(self) -> bytes | AnswerFile:
        """What was written: bytes, or the memory file (now the caller's)."""
        if self.fd < 0:
            return b"".join(self.parts)
        fd, self.fd = self.fd, -1
        return AnswerFile(fd, self.size)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
