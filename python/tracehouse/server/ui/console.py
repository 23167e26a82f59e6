"""The SQL console: one page of a read-only query, downloads, and example queries per format.

Owns paging and file formats only. Every statement runs through the server's own query
execution (`run`, given by the server: the `/api/query` path with its read-only check,
deadline and answer cap), never through a second one. A plain SELECT is paged by wrapping
it (`SELECT * FROM (...) LIMIT n+1 OFFSET k`, the extra row says whether a next page
exists); other statements (EXPLAIN, ...) are run as written and cut to one page. A bad
query answers DuckDB's own message (HTTP 400), never a stack trace.

Downloads run the statement as written and convert its Arrow answer to CSV or Parquet
(pyarrow), so a download is bounded by the same answer cap as `/api/query`.
"""

from __future__ import annotations

import io
import re
import time
from collections.abc import Callable

import duckdb
import pyarrow as pa

from ...errors import BadInput
from ...store.query import qident

MAX_PAGE = 1_000

# Parsing only: DuckDB's parser says which statements are plain SELECTs (pageable).
_parser = duckdb.connect(":memory:")


def _is_select(sql: str) -> bool:
    try:
        stmts = _parser.extract_statements(sql)
    except (duckdb.Error, ValueError):
        return False  # the query runner reports the error itself
    return len(stmts) == 1 and stmts[0].type == duckdb.StatementType.SELECT


def _strip(sql: str) -> str:
    return re.sub(r"[\s;]+$", "", sql)


def page(run: Callable[[str], pa.Table], sql: str, page_no: int = 0, page_size: int = 100) -> dict:
    """Rows [page_no * page_size, +page_size) of `sql`'s answer, with the time it took."""
    if not sql or not sql.strip():
        raise BadInput("empty query", expected="an SQL statement")
    page_size = max(1, min(int(page_size), MAX_PAGE))
    page_no = max(0, int(page_no))
    paged = _is_select(sql)
    text = (
        f"SELECT * FROM (\n{_strip(sql)}\n) AS th_console LIMIT {page_size + 1} OFFSET {page_no * page_size}"
        if paged
        else sql
    )
    t0 = time.perf_counter()
    table = run(text)
    secs = time.perf_counter() - t0
    if not paged:
        page_no = 0
    more = table.num_rows > page_size
    table = table.slice(0, page_size)
    return {
        "columns": table.column_names,
        "types": [str(f.type) for f in table.schema],
        "rows": rows_json(table),
        "page": page_no,
        "page_size": page_size,
        "has_more": more,
        "seconds": round(secs, 4),
        "paged": paged,
    }


EXACT = 2**53  # a browser's numbers are exact integers up to here: past it, integers go as text


def rows_json(t: pa.Table) -> list:
    # Column at a time (Arrow's own conversion); decimals (sum of integers) as numbers;
    # integers past 2^53 (epoch ns, addresses) as their digits, which a browser keeps exact.
    cols = []
    for c in t.columns:
        if pa.types.is_decimal(c.type):
            c = c.cast(pa.float64())
        elif pa.types.is_binary(c.type) or pa.types.is_large_binary(c.type):
            c = c.cast(pa.string(), safe=False)
        vals = c.to_pylist()
        if pa.types.is_integer(c.type) and any(v is not None and abs(v) > EXACT for v in vals):
            vals = [str(v) if v is not None and abs(v) > EXACT else v for v in vals]
        cols.append(vals)
    return [list(r) for r in zip(*cols)] if cols else []


def flame(run: Callable[[str], pa.Table], sql: str) -> tuple[pa.Table, int] | None:
    """The calling-context tree of `sql`'s whole answer, and its rows, when it is folded stacks:
    two columns (a `a;b;c` text and a number: `SELECT stack, count(*) ... GROUP BY stack` over
    samples) or one of folded lines (`a;b;c 12`); None when it is not."""
    from ...analysis.samples import folded_tree, stacks_tree

    t = run(sql)
    types = [f.type for f in t.schema]
    if t.num_rows == 0 or not pa.types.is_string(types[0]) and not pa.types.is_large_string(types[0]):
        return None
    if len(types) == 1:
        tree = folded_tree(t.column(0).combine_chunks())
        return None if tree is None else (tree, t.num_rows)
    if len(types) != 2 or not (pa.types.is_integer(types[1]) or pa.types.is_decimal(types[1])):
        return None
    return stacks_tree(t.column(0).combine_chunks(), t.column(1).combine_chunks()), t.num_rows


def download(run: Callable[[str], pa.Table], sql: str, fmt: str) -> tuple[bytes, str, str]:
    """(body, content type, file name) of `sql`'s whole answer as CSV or Parquet."""
    if fmt not in ("csv", "parquet"):
        raise BadInput(f"download format {fmt!r}", expected="csv | parquet")
    table = run(sql)
    sink = io.BytesIO()
    if fmt == "csv":
        import pyarrow.csv as pcsv

        pcsv.write_csv(_csv_safe(table), sink)
        return sink.getvalue(), "text/csv; charset=utf-8", "query.csv"
    import pyarrow.parquet as pq

    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue(), "application/vnd.apache.parquet", "query.parquet"


def _csv_safe(t: pa.Table) -> pa.Table:
    """Nested columns (lists, structs, maps) as JSON-ish text: CSV has no place for them."""
    cols = []
    for c in t.columns:
        if pa.types.is_nested(c.type):
            cols.append(pa.array([None if v is None else str(v) for v in c.to_pylist()], pa.string()))
        else:
            cols.append(c)
    return pa.table(cols, names=t.column_names)


# -- example queries -------------------------------------------------------------------------------

# The system calls whose return value is a byte count (strace examples).
_READS = ", ".join(f"'{c}'" for c in ("read", "pread64", "readv", "preadv", "preadv2", "recvfrom", "recvmsg"))
_WRITES = ", ".join(
    f"'{c}'"
    for c in (
        "write",
        "pwrite64",
        "writev",
        "pwritev",
        "pwritev2",
        "sendto",
        "sendmsg",
        "sendfile",
        "splice",
        "copy_file_range",
    )
)
_IO_CALLS = f"{_READS}, {_WRITES}"

GENERIC = [
    (
        "events by type",
        "SELECT type, count(*) AS events, min(ts) AS first_ns, max(ts) AS last_ns\n"
        "FROM {t}.events GROUP BY type ORDER BY events DESC",
    ),
    (
        "events per producer",
        "SELECT p.name AS producer, p.kind, count(*) AS events\nFROM {t}.events e\n"
        "JOIN th.producers p ON p.trace = {s} AND p.id = e.producer\n"
        "GROUP BY ALL ORDER BY events DESC LIMIT 20",
    ),
    (
        "events per second",
        "SELECT (ts - (SELECT min(ts) FROM {t}.events)) // 1000000000 AS second, count(*) AS events\n"
        "FROM {t}.events GROUP BY second ORDER BY second",
    ),
    (
        "event types and columns",
        "SELECT name, kind, params FROM th.event_types\nWHERE format = (SELECT format FROM th.traces WHERE name = {s})",
    ),
]


def by_format(fmt: str) -> list[tuple[str, str]]:
    """The example queries a format declares (beside its parser, `src/formats/<fmt>/decl.rs`, or
    a plugin importer's `EXAMPLES`): (title, SQL with `{t}` the quoted trace, `{s}` its name)."""
    from ...formats.registry import format_of

    f = format_of(fmt)
    return list(f.examples) if f is not None else []


def examples(store, trace: str | None = None) -> list[dict]:
    """Example queries for `trace` (its format's, then generic ones), or for the first trace
    of every format in the store when none is given."""
    infos = [store.trace(trace)] if trace else _one_per_format(store)
    out = []
    for info in infos:
        t, s = qident(info.name), "'" + info.name.replace("'", "''") + "'"
        for title, q in by_format(info.format) + GENERIC:
            out.append({"format": info.format, "trace": info.name, "title": title, "sql": q.format(t=t, s=s)})
    return out


def _one_per_format(store) -> list:
    seen: dict[str, object] = {}
    for info in store.traces():
        if info.format not in seen and not info.metadata.get("tool"):
            seen[info.format] = info
    return list(seen.values())
