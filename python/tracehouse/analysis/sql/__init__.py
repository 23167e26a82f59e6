"""The SQL analyses shipped as `.sql` files beside this module, each opening with a comment
that documents its output columns, and what running them takes: a window as a condition,
the engine (`--engine duckdb|spark`) and its parameters."""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources

from ..registry import Param

ENGINE_PARAMS = (
    Param(
        "engine",
        "str",
        "",
        "answer by plain SQL on this engine (default: indexes and the Rust core)",
        choices=("duckdb", "spark"),
    ),
    Param("master", "str", "", "Spark master URL (default local[2])"),
    Param(
        "conf",
        "str",
        "",
        "a Spark setting KEY=VALUE, e.g. spark.driver.host=10.0.0.5 (repeat); "
        "$SPARK_CONF_DIR/spark-defaults.conf is read too",
        many=True,
        metavar="KEY=VALUE",
    ),
)


def conf_pairs(items: list[str] | None) -> dict:
    """`--conf KEY=VALUE` settings as a dict."""
    from ...errors import BadInput

    out = {}
    for text in items or []:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"--conf {text!r}", expected="KEY=VALUE, e.g. spark.executor.memory=4g")
        out[key.strip()] = value
    return out


def text(name: str) -> str:
    """The text of `<name>.sql` without its comment lines, with `{placeholders}` left for `str.format`."""
    body = resources.files(__package__).joinpath(f"{name}.sql").read_text()
    return "\n".join(line for line in body.splitlines() if not line.startswith("--"))


def where(
    start: int | None = None,
    end: int | None = None,
    col: str = "ts",
    producers: Iterable[int] | None = None,
    producer_col: str = "producer",
) -> str:
    """The SQL condition of a window: `col` in [start, end) (None: open) and the producer among
    `producers` (None: any); `true` when nothing narrows it."""
    parts = []
    if start is not None:
        parts.append(f"{col} >= {int(start)}")
    if end is not None:
        parts.append(f"{col} < {int(end)}")
    if producers is not None:
        parts.append(f"{producer_col} IN ({', '.join(str(int(p)) for p in producers) or 'NULL'})")
    return " AND ".join(parts) or "true"


def engine(store, name: str | None, master: str | None = None, conf: list[str] | dict | None = None):
    """A context manager giving the engine an SQL analysis runs on: `name` = duckdb | spark
    (`store.engines.open_engine`), or None: nothing (the analysis' own fast path)."""
    from contextlib import nullcontext

    if not name:
        return nullcontext()
    from ...store.engines import open_engine

    return open_engine(store, name, master=master, conf=conf if isinstance(conf, dict) else conf_pairs(conf))


def answered_by(engine, default: str = "duckdb") -> str:
    return f"answered by {engine.description} (SQL)" if engine is not None else f"answered by {default}"
