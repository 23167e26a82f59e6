"""Apache Spark as the query engine of one store or several (scale-out).

Owns the Spark side of `open_engine(..., engine="spark")`: the session (`local[N]` on this
machine or a cluster's master URL), one temp view per (trace, event type), per trace's
`events` and per `th.*` table over exactly the registered segment files of one catalog
snapshot (`engines.Snapshot`), the translation of our DuckDB dialect to Spark SQL (sqlglot,
the rules of `spark_sql`, and the table names: Spark has no per-trace schemas), and
the answer: Spark's Arrow result renamed and cast to the schema DuckDB gives the same query
(bound by DuckDB over empty views of the same types), so both engines return the same table.
Where the two dialects would answer the same text differently, `spark_sql` rewrites the
construct or refuses it (never a different answer).

Errors: every error of Spark's (analysis, parse, overflow, a bad cast, a store `url` Spark
cannot read) is a tracehouse error (`BadInput`/`NotFound`, exit 2) naming the construct, with
no Java or Python stack trace. The JVM's own output (its banners, log4j lines) goes to a log
file (`jvm_log_path()`, named in errors; removed at exit unless an error named it), not to
the terminal, and pyspark's `SQLQueryContextLogger` is silenced.

Cluster settings: `conf` (the CLI's `--conf KEY=VALUE`) or Spark's own
`$SPARK_CONF_DIR/spark-defaults.conf`, which spark-submit reads when the JVM starts.

Spark reads the files when the query runs: a segment compacted away after the snapshot stays
readable for the writer's `retire_grace_s` (60 s by default); longer Spark jobs over a store
being compacted need a longer grace on the writer.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Sequence
from importlib import resources

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import BadInput, NotFound, TracehouseError
from ..schema import EventType
from .engines import (
    DuckViews,
    EngineBase,
    Snapshot,
    TraceSource,
    mentions_th,
    parse,
    referenced_traces,
    table_refs,
    view_name,
)
from .query import tag_column_names, tag_table_column, trace_tags

DEFAULT_MASTER = "local[2]"
# pyspark warns about pandas 3 whenever it checks for pandas; tracehouse hands it Arrow only.
warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
_ENGINE_NO = itertools.count()


def _spark_type(t: str):
    from pyspark.sql import types as T

    return {
        "int64": T.LongType(),
        "int32": T.IntegerType(),
        "float64": T.DoubleType(),
        "bool": T.BooleanType(),
        "string": T.StringType(),
    }[t]


def struct_of(et: EventType):
    """The Spark schema of an event type's segments (every column nullable: a column a
    segment predates reads null)."""
    from pyspark.sql import types as T

    return T.StructType([T.StructField(c.name, _spark_type(c.type), True) for c in et.columns])


def spark_session(master: str = DEFAULT_MASTER, conf: dict | None = None):
    """A SparkSession for tracehouse (an existing one is reused: Spark allows one per process).

    Local masters bind to loopback and use few shuffle partitions (Spark's 200 cost more
    than the work on one machine); timestamps are UTC; ANSI SQL on (overflow and bad casts
    are errors, as in DuckDB)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise TracehouseError("the Spark engine needs Java 17 or later (e.g. apt-get install openjdk-17-jre-headless)")
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise TracehouseError("the Spark engine needs pyspark: pip install 'tracehouse[spark]'") from None
    log4j = resources.files(__package__).joinpath("spark-log4j2.properties")
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.ansi.enabled": "true",
        "spark.driver.memory": "2g",
        "spark.driver.extraJavaOptions": f"-Dlog4j.configurationFile={log4j}",
    }
    if master.startswith("local"):
        settings |= {
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.sql.shuffle.partitions": "4",
        }
    b = SparkSession.builder.master(master).appName("tracehouse")
    for k, v in (settings | dict(conf or {})).items():
        b = b.config(k, str(v))
    if SparkSession.getActiveSession() is not None:
        _quiet_python_loggers()
        return b.getOrCreate()
    # The JVM inherits our stdout and stderr when it starts: it gets the log file instead
    # (its banners and log4j lines stay off the terminal and out of a CSV on stdout).
    log = jvm_log_path()
    with open(log, "ab") as f, _fds_to(f.fileno()):
        s = b.getOrCreate()
    atexit.register(_drop_log, log)
    s.sparkContext.setLogLevel("ERROR")
    _quiet_python_loggers()
    return s


def _quiet_python_loggers() -> None:
    """pyspark logs every SQL error it raises as a JSON line on stderr (its query-context
    loggers); the error reaches the caller as tracehouse's, once."""
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:
        return
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).disabled = True


def jvm_log_path() -> str:
    """Where the JVM of this process writes its output (one file per process)."""
    return os.path.join(tempfile.gettempdir(), f"tracehouse-spark-{os.getuid()}-{os.getpid()}.log")


_LOG_NAMED = False  # an error named the log: it stays for the user to read


def _drop_log(path: str) -> None:
    if not _LOG_NAMED:
        try:
            os.unlink(path)
        except OSError:
            pass


class _fds_to:
    """Points file descriptors 1 and 2 at `fd` for the block (a child started in it inherits
    them), then back."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __enter__(self):
        for s in (sys.stdout, sys.stderr):
            try:
                s.flush()
            except (OSError, ValueError):
                pass
        self.saved = [os.dup(1), os.dup(2)]
        os.dup2(self.fd, 1)
        os.dup2(self.fd, 2)
        return self

    def __exit__(self, *exc) -> None:
        for target, saved in zip((1, 2), self.saved):
            os.dup2(saved, target)
            os.close(saved)


class SparkEngine(EngineBase):
    """Spark SQL over the registered segments of one store or several (see the module doc)."""

    name = "spark"

    def __init__(self, stores: Sequence, *, master: str | None = None, spark=None, conf: dict | None = None) -> None:
        super().__init__(stores)
        from pyspark.sql import SparkSession

        self._own_session = spark is None and SparkSession.getActiveSession() is None
        self.spark = spark if spark is not None else spark_session(master or DEFAULT_MASTER, conf)
        self.master = self.spark.sparkContext.master
        self.typing = DuckViews(files=False)
        # DuckDB's zone for TIMESTAMPTZ (the local one, as in Store.sql): spark_sql refuses what depends on it
        self.timezone = self.typing.con.sql("SELECT current_setting('TimeZone')").fetchall()[0][0]
        self._no = next(_ENGINE_NO)
        self._ids: dict[tuple[str, int], int] = {}
        self._views: dict[tuple[str, int], tuple[tuple, dict[str, str]]] = {}  # trace -> (signature, type -> view)
        self._th_version: tuple | None = None
        self._th_views: dict[str, str] = {}

    @property
    def description(self) -> str:
        return f"spark {self.master} (Spark {self.spark.version})"

    # -- views ----------------------------------------------------------------------------

    def _trace_views(self, src: TraceSource) -> dict[str, str]:
        """lower-case type name (and "events") -> temp view, made when the trace changed."""
        key = (src.store.ref.alias, src.info.id)
        sig = src.signature()
        cached = self._views.get(key)
        if cached is not None and cached[0] == sig:
            return cached[1]
        from pyspark.sql import functions as F

        idx = self._ids.setdefault(key, len(self._ids))
        views, parts = {}, []
        keys, tags = trace_tags(src.store.th["producers"], src.info.name, src.info.metadata)
        tags_df = self.spark.createDataFrame(tags) if tags is not None else None
        for name, et in src.types.items():
            urls = [src.store.ref.file_url(s.path) for s in src.segments(name)]
            schema = struct_of(et)
            try:
                df = self.spark.read.schema(schema).parquet(*urls) if urls else self.spark.createDataFrame([], schema)
            except Exception as e:  # noqa: BLE001 - pyspark's and py4j's errors alike
                if not _is_spark_error(e):
                    raise
                ref = src.store.ref
                raise NotFound(
                    f"Spark cannot read the segments of trace {src.sql_name!r} of store {ref.alias!r} at "
                    f"{ref.file_url('')}: {_first_line(e)}"
                ) from None
            base = df
            if tags_df is not None:  # tags as columns after `producer`, as DuckDB's views have them
                names = tag_column_names(et, keys)
                cols = []
                for c in et.columns:
                    cols.append(F.col("b." + c.name))
                    if c.name == "producer":
                        cols += [F.col("t." + tag_table_column(i)).alias(n) for i, n in enumerate(names.values())]
                df = (
                    df.alias("b")
                    .join(tags_df.alias("t"), F.col("b.producer") == F.col("t.producer"), "left")
                    .select(*cols)
                )
            v = view_name(self._no, idx, name)
            df.createOrReplaceTempView(v)
            views[name.lower()] = v
            dur = F.col("dur") if et.kind == "span" else F.lit(None).cast("bigint").alias("dur")
            parts.append(base.select("ts", "producer", "seq", dur, F.lit(name).alias("type")))
        if parts:
            events = parts[0]
            for p in parts[1:]:
                events = events.unionAll(p)
        else:
            events = self.spark.sql(
                "SELECT CAST(NULL AS BIGINT) ts, CAST(NULL AS INT) producer, CAST(NULL AS BIGINT) seq,"
                " CAST(NULL AS BIGINT) dur, CAST(NULL AS STRING) type WHERE false"
            )
        v = view_name(self._no, idx, "events")
        events.createOrReplaceTempView(v)
        views.setdefault("events", v)
        for old in set((cached or ((), {}))[1].values()) - set(views.values()):
            self.spark.catalog.dropTempView(old)
        self._views[key] = (sig, views)
        return views

    def _th(self, snap: Snapshot) -> dict[str, str]:
        if self._th_version != snap.version():
            for name, table in snap.th().items():
                with warnings.catch_warnings():  # pyspark's pandas-version notice; no pandas is used
                    warnings.simplefilter("ignore", FutureWarning)
                    df = self.spark.createDataFrame(table)
                v = view_name(self._no, "th", name)
                df.createOrReplaceTempView(v)
                self._th_views[name] = v
            self._th_version = snap.version()
        return self._th_views

    # -- translation ------------------------------------------------------------------------

    def _spark_tree(self, snap: Snapshot, tree, params):
        """The tree with parameters inlined, translated (`spark_sql`: DuckDB's meaning kept or
        refused) and every store table renamed to its view."""
        from sqlglot import exp

        from .spark_sql import translate

        tree = tree.copy()
        _bind_params(tree, params)
        tree = translate(tree, _schema(snap, tree), self.timezone)
        th = self._th(snap) if mentions_th(tree, "") else {}
        for t in table_refs(tree):
            db, name = t.db, t.name
            if db.lower() == "th":
                view = th.get(name.lower())
            else:
                view = self._trace_views(snap.trace(db)).get(name.lower())
            if view is None:
                continue  # DuckDB already refused unknown names; leave anything else as written
            t.set("db", None)
            t.set("this", exp.to_identifier(view, quoted=True))
            if not t.alias:
                t.set("alias", exp.TableAlias(this=exp.to_identifier(name, quoted=True)))
        return tree

    def translate(self, query: str, params: list | dict | None = None) -> str:
        """The Spark SQL this engine runs for a DuckDB-dialect query (its views registered)."""
        with self.lock:
            snap = self.snapshots.take()
            return self._spark_tree(snap, parse(query), params).sql(dialect="spark")

    # -- running --------------------------------------------------------------------------------

    def sql(self, query: str, params: list | dict | None = None, output: str = "arrow"):
        from .store import convert

        with self.lock:
            snap = self.snapshots.take()
            tree = parse(query)
            # DuckDB binds the query over empty views of the same types: it judges the SQL
            # (same errors as the DuckDB engine) and names the result's columns and types.
            self.typing.update(snap, referenced_traces(snap, query, tree), mentions_th(tree, query))
            schema = self.typing.run(query, params, schema_only=True).schema
            spark_sql = self._spark_tree(snap, tree, params).sql(dialect="spark")
            result = self._run(spark_sql)
            return convert(conform(result, schema), output)

    def _run(self, spark_sql: str) -> pa.Table:
        try:
            with warnings.catch_warnings():  # pyspark's pandas-version notice: toArrow uses no pandas
                warnings.simplefilter("ignore", FutureWarning)
                return self.spark.sql(spark_sql).toArrow()
        except Exception as e:  # noqa: BLE001 - pyspark's and py4j's errors alike
            if not _is_spark_error(e):
                raise
            raise spark_error(e, spark_sql) from None

    def close(self) -> None:
        try:
            for _sig, views in self._views.values():
                for v in set(views.values()):
                    self.spark.catalog.dropTempView(v)
            for v in self._th_views.values():
                self.spark.catalog.dropTempView(v)
        finally:
            self.typing.close()
            super().close()
            if self._own_session:
                self.spark.stop()


def _is_spark_error(e: BaseException) -> bool:
    """An error raised by Spark (pyspark's exceptions, py4j's for what pyspark does not convert)."""
    mod = type(e).__module__ or ""
    return mod.startswith(("pyspark", "py4j"))


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("An error occurred while calling", "py4j.", "Traceback")):
            return line[:300]
    return type(e).__name__


def spark_error(e: BaseException, spark_sql: str) -> BadInput:
    """A Spark error as tracehouse's: its class and first line, the construct it points at
    (Spark's query context), the translated SQL and where the JVM's log is."""
    cls = ""
    try:
        cls = e.getCondition() or ""  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - older pyspark, or a py4j error
        pass
    where = ""
    try:
        ctx = e.getQueryContext()  # type: ignore[attr-defined]
        if ctx and ctx[0].fragment():
            where = f" at `{ctx[0].fragment()}`"
    except Exception:  # noqa: BLE001 - no query context
        pass
    global _LOG_NAMED
    _LOG_NAMED = True
    msg = _first_line(e)
    if cls and cls not in msg:
        msg = f"[{cls}] {msg}"
    return BadInput(
        f"Spark could not answer{where}: {msg}",
        expected=f"a query Spark can run (translated: {spark_sql}; Spark's log: {jvm_log_path()})",
    )


_SQL_TYPES = {"int64": "BIGINT", "int32": "INT", "float64": "DOUBLE", "bool": "BOOLEAN", "string": "VARCHAR"}


def _schema(snap: Snapshot, tree) -> dict:
    """{trace: {type: {column: type}}} of the traces a tree names, and th.* (sqlglot's schema)."""
    out: dict = {}
    for t in table_refs(tree):
        db = t.db
        if db.lower() == "th" or db in out:
            continue
        try:
            src = snap.trace(db)
        except TracehouseError:
            continue
        keys, tags = trace_tags(src.store.th["producers"], src.info.name, src.info.metadata)
        tables = {}
        for name, et in src.types.items():
            cols: dict = {}
            names = tag_column_names(et, keys) if tags is not None else {}
            for c in et.columns:
                cols[c.name] = _SQL_TYPES[c.type]
                if c.name == "producer":  # tags as columns after `producer`, as the views have them
                    cols.update(
                        {
                            n: _arrow_sql(tags.schema.field(tag_table_column(i)).type)
                            for i, n in enumerate(names.values())
                        }
                    )
            tables[name] = cols
        tables["events"] = {"ts": "BIGINT", "producer": "INT", "seq": "BIGINT", "dur": "BIGINT", "type": "VARCHAR"}
        out[db] = tables
    if mentions_th(tree, ""):
        out["th"] = {name: {f.name: _arrow_sql(f.type) for f in t.schema} for name, t in snap.th().items()}
    return out


def _arrow_sql(t: pa.DataType) -> str:
    if pa.types.is_integer(t):
        return "BIGINT" if t.bit_width == 64 else "INT"
    if pa.types.is_floating(t):
        return "DOUBLE"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "VARCHAR"
    return "UNKNOWN"


def _bind_params(tree, params: list | dict | None) -> None:
    """Inline `?`, `$n` and `$name` parameters as typed literals (DuckDB binds the same
    values; floats stay DOUBLE, not Spark's DECIMAL literals)."""
    if params is None:
        return
    from sqlglot import exp

    def literal(v):
        if isinstance(v, float):
            return exp.cast(exp.Literal.string(repr(v)), "DOUBLE")
        return exp.convert(v)

    position = 0
    for node in list(tree.walk(bfs=False)):
        if not isinstance(node, exp.Placeholder):
            continue
        key = node.this
        if key is None:
            if not isinstance(params, (list, tuple)) or position >= len(params):
                raise BadInput("more ? placeholders than parameters")
            value = params[position]
            position += 1
        elif isinstance(params, dict):
            if key not in params:
                raise BadInput(f"no value for parameter ${key}", expected=", ".join(params))
            value = params[key]
        else:
            value = params[int(key) - 1]
        node.replace(literal(value))


def conform(t: pa.Table, schema: pa.Schema) -> pa.Table:
    """Spark's answer with DuckDB's column names and types (same values: counts stay
    int64, sums DuckDB widens are cast up, strings come back as Spark's large strings)."""
    if t.num_columns != len(schema):
        raise TracehouseError(
            f"Spark answered {t.num_columns} columns where DuckDB binds {len(schema)}: "
            f"{t.column_names} vs {schema.names}"
        )
    cols = []
    for col, f in zip(t.columns, schema):
        cols.append(col if col.type == f.type else pc.cast(col, f.type))
    return pa.Table.from_arrays(cols, schema=schema)
