"""A query process: runs the server's read-only SQL queries, one at a time, over the store.

Owns what happens to a statement after the server handed it over (queries.py owns the processes,
their deadlines and memory): the read-only check (`sqlguard.check_read_only`), the caps on its
parse tree (`max_parse_nodes` nodes, `max_relations` table references: 422 naming the limit,
before DuckDB plans it), the query on a cursor of its own (`QueryEngine.snapshot`: a transaction
rolled back after), the answer encoded batch by batch up to `max_answer` bytes (422 beyond).

The store is opened read-only and its SQL sandboxed (`Store.sandbox_sql`): files under the store
only, DuckDB's temp directory inside it (`<store>/tmp/query-<pid>`, removed when the process
ends), DuckDB's memory_limit at 3/4 of `query_memory` (the server kills the process at the whole).

Protocol on the pipe (multiprocessing.Connection, bytes): the server sends {"sql", "format"} as
JSON; the process answers with two messages: a JSON head ({"ok": true, "type"} or {"ok": false,
"kind", "status", "code", "message"}), then the body (the answer; empty for an error).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import duckdb
import pyarrow as pa

from ..errors import BadInput, TracehouseError
from ..store import Store
from ..store.query import _first_line, arrow_reader
from .config import ServerConfig
from .queries import ARROW_STREAM, BATCH_ROWS, QueryStopped, _ArrowAnswer, _JsonAnswer
from .sqlguard import check_read_only, parse_tree_size


def limits(cfg: ServerConfig) -> dict:
    """What a query process needs of the server's configuration."""
    return {"max_answer": cfg.max_answer, "max_query_rows": cfg.max_query_rows, "max_parse_nodes": cfg.max_parse_nodes,
            "max_relations": cfg.max_relations, "query_memory": cfg.query_memory}


# A query process runs below the server (its ingest must not wait for the cores a query takes)
# and the express process (short statements while the others are busy must find a core).
NICE = 5


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
                head, body = {"ok": False, "kind": "QueryStopped", "status": e.status, "code": e.code,
                              "message": str(e)}, b""
            except TracehouseError as e:
                head, body = {"ok": False, "kind": type(e).__name__, "message": str(e)}, b""
            except Exception as e:  # noqa: BLE001 - the server answers 500 with it
                head, body = {"ok": False, "kind": "TracehouseError", "message": f"{type(e).__name__}: {e}"}, b""
            conn.send_bytes(json.dumps(head).encode())
            conn.send_bytes(body)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def answer(store: Store, sql: str, fmt: str, lim: dict) -> tuple[bytes, str]:
    """The answer to one read-only statement (module docstring)."""
    check_read_only(sql)
    nodes, relations = parse_tree_size(sql)
    if nodes > lim["max_parse_nodes"]:
        raise QueryStopped(422, "statement too complex", f"the statement's parse tree has {nodes:,} nodes, over "
                                                         f"{lim['max_parse_nodes']:,} (--max-parse-nodes)")
    if relations > lim["max_relations"]:
        raise QueryStopped(422, "statement too complex", f"the statement names {relations:,} tables and joins, over "
                                                         f"{lim['max_relations']:,} (--max-relations)")
    t0 = time.perf_counter()
    engine = store.query_engine
    with engine.snapshot(sql) as cur:
        try:
            rel = cur.sql(engine.snapshot_query(sql))
            batches = iter(()) if rel is None else arrow_reader(rel, BATCH_ROWS)
            encode = _ArrowAnswer if fmt == "arrow" else _JsonAnswer
            out = encode(lim["max_answer"], lim["max_query_rows"])
            if rel is not None:
                out.start(batches.schema)
            for batch in batches:
                if not out.add(batch):
                    break
            if out.over:
                raise QueryStopped(
                    422, "answer too large",
                    f"the answer passed {lim['max_answer']:,} bytes (--max-answer) after {out.rows:,} rows: "
                    "aggregate, add a LIMIT, select fewer columns, or raise --max-answer")
            body = out.finish(time.perf_counter() - t0)
        except duckdb.OutOfMemoryException as e:
            raise QueryStopped(422, "memory limit", f"the query ran out of its memory ({_first_line(e)}; "
                                                    "--query-memory)") from None
        except (duckdb.Error, pa.ArrowException, OSError) as e:
            raise BadInput(f"SQL error: {_first_line(e)}", expected="a valid DuckDB query over the store's views") \
                from None
    return body, (ARROW_STREAM if fmt == "arrow" else "application/json")
