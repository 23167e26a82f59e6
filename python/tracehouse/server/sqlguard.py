"""Which SQL `POST/GET /api/query` runs: one read-only statement, decided by DuckDB's own parser.

Owns `check_read_only`. A prefix filter cannot be made safe (`EXPLAIN ANALYZE DROP VIEW ...`
is an EXPLAIN and executes the DROP), so the text is parsed: it must be exactly one statement,
and that statement must be a SELECT tree (WITH, VALUES, FROM-first, DESCRIBE/SHOW/SUMMARIZE
of a query, PIVOT with an IN list: DuckDB parses all of them to a SELECT) or `EXPLAIN
[ANALYZE] [(options)]` of one. "A SELECT tree" is what `json_serialize_sql` accepts: it
serializes SELECT statements only, so a statement of any other kind, or a PIVOT without an IN
list (which DuckDB expands into a CREATE TYPE plus a SELECT), is refused.

This is the first of two walls: the query then runs on a cursor of its own inside a
transaction that is rolled back, with file access confined to the store and the
configuration locked (`QueryEngine.snapshot`, `QueryEngine.sandbox`).
"""

from __future__ import annotations

import functools
import json
import re
import threading

import duckdb

from ..errors import BadInput
from ..store.query import error_text

EXPECTED = "one SELECT (or WITH ..., VALUES, FROM ..., DESCRIBE/SHOW/SUMMARIZE) or EXPLAIN [ANALYZE] of one"

# Parsing needs a connection (duckdb.extract_statements would share the module's default one
# with the rest of the process); this one never sees data, and a lock keeps it to one thread.
_parser = duckdb.connect(":memory:")
_parser_lock = threading.Lock()
_WORD = re.compile(r"[A-Za-z_]+")


def check_read_only(sql: str) -> None:
    """Raise BadInput unless `sql` is one read-only statement (see the module's docstring)."""
    if _single_select(sql):  # the common case, one parse: a single SELECT
        return
    try:
        with _parser_lock:
            statements = _parser.extract_statements(sql)
        kinds = [s.type for s in statements]
    except duckdb.Error as e:
        raise BadInput(f"SQL error: {error_text(e)}", expected=EXPECTED) from None
    except ValueError:  # a statement kind this duckdb's Python enum does not name (UPDATE EXTENSIONS)
        raise BadInput("read-only API: a statement that is not a query", expected=EXPECTED) from None
    if len(statements) != 1:
        raise BadInput(f"read-only API: {len(statements)} statements (send exactly one)", expected=EXPECTED)
    kind = kinds[0]
    if kind == duckdb.StatementType.SELECT:
        body = sql
    elif kind == duckdb.StatementType.EXPLAIN:
        body = _explained(sql)
    elif kind.name == "MULTI":  # what DuckDB makes of a PIVOT without IN (...)
        raise BadInput(
            "read-only API: a PIVOT without an IN (...) list runs as a CREATE TYPE plus a SELECT; "
            "name the pivot values",
            expected=EXPECTED,
        )
    else:
        raise BadInput(f"read-only API: {kind.name} statements are refused", expected=EXPECTED)
    _one_select(body, sql)


def _explained(sql: str) -> str:
    """The statement an EXPLAIN explains: the text after `EXPLAIN [ANALYZE] [(options)]`."""
    tokens = [(pos, kind) for pos, kind in duckdb.tokenize(sql) if kind != duckdb.token_type.comment]
    i = 0

    def word(k: int) -> str:
        m = _WORD.match(sql, tokens[k][0]) if k < len(tokens) else None
        return m.group(0).upper() if m else ""

    if word(i) != "EXPLAIN":
        raise BadInput("read-only API: an EXPLAIN that does not start with EXPLAIN", expected=EXPECTED)
    i += 1
    if word(i) in ("ANALYZE", "ANALYSE"):
        i += 1
    if i < len(tokens) and sql.startswith("(", tokens[i][0]):
        # Options such as (FORMAT json): words, commas and constants only, no nesting.
        i += 1
        while i < len(tokens) and not sql.startswith(")", tokens[i][0]):
            if tokens[i][1] == duckdb.token_type.operator and not sql.startswith(",", tokens[i][0]):
                raise BadInput("read-only API: EXPLAIN options must be words (FORMAT json)", expected=EXPECTED)
            i += 1
        i += 1
    if i >= len(tokens):
        raise BadInput("read-only API: EXPLAIN of nothing", expected=EXPECTED)
    return sql[tokens[i][0] :]


@functools.lru_cache(maxsize=4096)
def _single_select(text: str) -> bool:
    """Whether `text` is exactly one SELECT. The verdict depends on the text alone, and clients
    (dashboards, benchmarks) send the same queries again: remembered, not parsed and serialized
    again (0.5-2 ms for a 1.5 KB SELECT, the QoS benchmark's, at load 1-20)."""
    return _serialized_selects(text) == 1


def _serialized_selects(text: str) -> int | str:
    """How many SELECT statements `text` holds, or why DuckDB cannot serialize it (any other
    statement kind, a parse error)."""
    with _parser_lock:
        doc = json.loads(_parser.execute("SELECT json_serialize_sql(?)", [text]).fetchone()[0])
    if doc.get("error"):
        return doc.get("error_message") or "not serializable"
    return len(doc.get("statements", ()))


# Table references in a parse tree (DuckDB's TableRef types, as json_serialize_sql names them).
_RELATIONS = frozenset(
    {
        "BASE_TABLE",
        "TABLE_FUNCTION",
        "JOIN",
        "SUBQUERY",
        "EXPRESSION_LIST",
        "PIVOT",
        "SHOW_REF",
        "COLUMN_DATA",
        "DELIM_GET",
    }
)


@functools.lru_cache(maxsize=4096)
def parse_tree_size(sql: str) -> tuple[int, int]:
    """(nodes, table references) of the parse tree DuckDB makes of `sql` (an EXPLAIN counts what
    it explains): what planning grows with (queries.py: unions with the nodes, join ordering
    with the relations). Remembered by text, as `_single_select` is: 0.23-0.34 ms of every
    query for the QoS benchmark's 1.5 KB SELECTs."""
    with _parser_lock:
        text = _parser.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()[0]
    nodes = relations = 0
    stack = [json.loads(text)]  # (iterative: a deep tree must not exhaust Python's recursion)
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            nodes += 1
            if x.get("type") in _RELATIONS and "alias" in x:
                relations += 1
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return nodes, relations


def _one_select(body: str, sql: str) -> None:
    n = _serialized_selects(body)
    if n != 1:
        what = "EXPLAIN of a statement that is not a query" if body is not sql else "a statement that is not a query"
        if isinstance(n, str) and "Only SELECT" not in n:
            what += f" ({n})"
        raise BadInput(f"read-only API: {what}", expected=EXPECTED)
