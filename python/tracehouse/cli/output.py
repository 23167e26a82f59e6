"""What every command prints with: the consoles, JSON, human-readable sizes and times, tables,
the progress bar, and opening the store a command names (`--store`, else $TRACEHOUSE_HOME).

Owns the output conventions: tables on stdout sized to their content when piped (scripts
read every digit), errors on stderr as one greppable line, `--json` as indented JSON,
progress bars on stderr only.
"""

from __future__ import annotations

import csv as csvmod
import datetime as dt
import io
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .. import default_path
from ..schema import EPOCH_MIN_NS

if TYPE_CHECKING:
    import pyarrow as pa
    from rich.console import Console

    from ..store import Store


class _OnFirstUse:
    """A rich Console made when first used: importing rich costs 0.05-0.08 CPU-s, more than
    `ls --json` or a CSV count needs in all (they print without it)."""

    def __init__(self, make) -> None:
        self._make = make
        self._console: Console | None = None

    @property
    def console(self) -> Console:
        if self._console is None:
            self._console = self._make()
        return self._console

    def __getattr__(self, name: str):
        return getattr(self.console, name)


def _stdout_console() -> Console:
    from rich.console import Console

    # Piped or redirected, rich would fit tables to 80 columns, cutting numbers and names
    # ("1,000,…"): tables then take the width they need (scripts read every digit).
    return Console(soft_wrap=True, width=None if sys.stdout.isatty() else 1 << 16)


def _stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, soft_wrap=True)  # errors stay one greppable line


out = _OnFirstUse(_stdout_console)
err = _OnFirstUse(_stderr_console)


def say(*parts: str | tuple[str, str]) -> None:
    """One line on stdout from plain text and (text, rich style) parts: styled by rich on a
    terminal; piped or redirected, written as plain text without importing rich (0.05-0.08
    CPU-s, a tenth of a 3M-line `tracehouse import`, whose only output is such a line)."""
    if sys.stdout.isatty():
        from rich.text import Text

        out.print(Text.assemble(*parts), highlight=False)
    else:
        sys.stdout.write("".join(p if isinstance(p, str) else p[0] for p in parts) + "\n")


def open_store(args, *, write: bool = False, **options) -> Store:
    from ..store import Store

    path = args.store or default_path()
    if not write:
        return Store(path, readonly=True)
    return Store(path, **options)


def emit_json(data: Any) -> None:
    """`data` as strict JSON (jsonvalues.py: a NaN or an infinity is null)."""
    from ..jsonvalues import json_bytes

    sys.stdout.write(json_bytes(data, indent=2).decode() + "\n")


def human_bytes(n: int | None) -> str:
    if n is None:
        return ""
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def human_ns(ns: int | None) -> str:
    if ns is None:
        return ""
    if ns >= EPOCH_MIN_NS:
        return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).isoformat(timespec="microseconds")
    return f"{ns / 1e9:.6f} s"


@contextmanager
def progress_bar(description: str, total: int | None, enabled: bool = True):
    """Yields advance(n); draws a bar on stderr when the terminal (or FORCE) allows."""
    if not enabled:
        yield lambda n: None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = [
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, console=err.console, transient=True) as p:
        task = p.add_task(description, total=total)
        yield lambda n: p.advance(task, n)


def arrow_table_render(
    t: pa.Table, fmt: str, limit: int | None = None, more: str = "use --format csv or json for all"
) -> None:
    """`t` as JSON, CSV or a table of its first `limit` rows (`more` says how to see the rest)."""
    import pyarrow as pa

    numeric = [pa.types.is_integer(f.type) or pa.types.is_floating(f.type) for f in t.schema]
    if fmt == "json":  # exact and strict (jsonvalues.py): HUGEINT sums as numbers, blobs as base64
        from ..jsonvalues import json_column

        cols = [json_column(c) for c in t.columns]
        emit_json([dict(zip(t.column_names, r)) for r in zip(*cols)])
        return
    rows = t.slice(0, limit).to_pylist() if limit and fmt == "table" else t.to_pylist()
    rows_render(t.column_names, numeric, rows, t.num_rows, fmt, limit, more)


def rows_render(
    columns: list[str],
    numeric: list[bool],
    rows: list[dict],
    total: int,
    fmt: str,
    limit: int | None = None,
    more: str = "use --format csv or json for all",
) -> None:
    """Rows (dicts by column) as JSON, CSV or a table (numeric columns right-aligned) of the
    first `limit` of `total` rows: `arrow_table_render` without Arrow (a count the store
    answers from its catalog is printed without loading pyarrow)."""
    if fmt == "json":
        emit_json(rows)
    elif fmt == "csv":
        buf = io.StringIO()
        w = csvmod.writer(buf)
        w.writerow(columns)
        for row in rows:
            w.writerow([row[c] for c in columns])
        sys.stdout.write(buf.getvalue())
    else:
        from rich.markup import escape
        from rich.table import Table

        table = Table(show_edge=False, header_style="bold")
        for c, num in zip(columns, numeric):
            table.add_column(c, justify="right" if num else "left")
        for row in rows[:limit] if limit else rows:
            table.add_row(*["NULL" if v is None else escape(str(v)) for v in row.values()])
        out.print(table)
        if limit and total > limit:
            err.print(f"({total:,} rows, {limit} shown; {more})")


def trace_rows(traces) -> list[dict]:
    return [t.to_json() for t in traces]


def print_traces(traces, as_json: bool) -> None:
    if as_json:
        emit_json(trace_rows(traces))
        return
    from rich.markup import escape
    from rich.table import Table

    table = Table(show_edge=False, header_style="bold")
    for c, j in (
        ("name", "left"),
        ("format", "left"),
        ("events", "right"),
        ("bytes", "right"),
        ("from", "left"),
        ("to", "left"),
        ("created", "left"),
    ):
        table.add_column(c, justify=j)
    for t in traces:
        created = dt.datetime.fromtimestamp(t.created).strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(
            t.name,
            t.format,
            f"{t.event_count:,}",
            human_bytes(t.bytes),
            human_ns(t.ts_min),
            human_ns(t.ts_max),
            created,
        )
    out.print(table)
    if not traces:
        err.print("no traces")
    for t in traces:
        if t.state_reason is not None:
            err.print(f"[yellow]{escape(t.name)} is incomplete:[/yellow] {escape(t.state_reason)}")


def add_spark_args(p) -> None:
    """`--master` and `--conf KEY=VALUE` of the commands that run on Spark (docs/spark.md)."""
    p.add_argument("--master", help="Spark master URL (default local[2])")
    p.add_argument(
        "--conf",
        action="append",
        type=_conf_pair,
        metavar="KEY=VALUE",
        help="a Spark setting, e.g. spark.driver.host=10.0.0.5 (repeat); "
        "$SPARK_CONF_DIR/spark-defaults.conf is read too",
    )


def spark_conf(args) -> dict:
    """The `--conf` settings given, as a dict."""
    return dict(getattr(args, "conf", None) or [])


def _conf_pair(text: str) -> tuple[str, str]:
    import argparse

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE, e.g. spark.executor.memory=4g")
    return key.strip(), value
