"""DuckDB SQL into Spark SQL with the same meaning, or a refusal naming the construct.

Owns the rules the Spark engine (`spark.py`) applies to a query's sqlglot tree before sqlglot
writes it in Spark's dialect. sqlglot translates names and syntax; where DuckDB and Spark
would give a different answer to the same translated text, a rule here rewrites the construct
into Spark SQL that answers what DuckDB answers, or refuses it (`BadInput`, exit 2, naming the
construct and why). A query is never answered differently, only refused.

Types decide most rules (a sum of BIGINT is not a sum of DOUBLE), so the tree is first
qualified and typed by sqlglot's optimizer against the store's schema (every trace's event
types, `events`, the `th.*` tables); where a rule needs a type sqlglot could not tell (a cast
to an integer, a value turned into text), the construct is refused.

Rewritten (DuckDB's meaning kept):
- `sum(int)`: DuckDB sums integers into a HUGEINT (decimal(38,0) in Arrow); Spark's BIGINT
  sum overflows on epoch-nanosecond timestamps. Summed as DECIMAL(38,0).
- `avg(int | decimal)`: DuckDB divides an exact sum; Spark's average of integers adds doubles
  (its rounding shows on epoch-ns values) and of decimals rounds to 4 more digits. Written
  as the exact sum over the count, divided as doubles.
- `x / y`: always DOUBLE in DuckDB (of integers and decimals alike; `1000000000.0` is a
  DECIMAL literal), a rounded DECIMAL in Spark when a side is decimal: divided as doubles.
- `CAST(double AS <integer>)`: DuckDB rounds half to even, Spark truncates: BROUND first;
  `CAST(decimal AS <integer>)`: DuckDB rounds half away from zero: ROUND first.
- `concat(...)`: DuckDB skips NULLs and casts; sqlglot's `COALESCE(fd, '')` is an invalid cast
  of '' to BIGINT under ANSI mode: every argument is cast to STRING before the COALESCE.
- `date_diff(unit, a, b)` / `datediff`: DuckDB counts unit boundaries crossed, Spark whole
  units: both ends are truncated to the unit first (weeks: DuckDB's whole days / 7).
- `quantile_cont(x, q)`, `percentile_cont(q) WITHIN GROUP (ORDER BY x)`: Spark's exact
  `percentile(x, q)` (sqlglot wrote the approximate one); `quantile_disc(x, q)`,
  `quantile(x, q)`, `percentile_disc(q) WITHIN GROUP (...)`: DuckDB's rank rule over Spark's
  sorted `collect_list` (Spark's `percentile_disc` goes through DOUBLE: epoch-ns values lost
  their last digits).
- `to_timestamp(seconds)`: DuckDB keeps microseconds (seconds * 1e6 rounded half to even);
  sqlglot's `from_unixtime` keeps whole seconds: `timestamp_micros(bround(x * 1e6))`.
- `extract(second | millisecond | microsecond FROM t)`, `date_part(...)`: whole numbers in
  DuckDB (milliseconds and microseconds count the seconds too), a decimal with the fraction
  in Spark: floored.
- `strlen(s)` (bytes): `octet_length`.

The Spark session runs in UTC. DuckDB takes a TIMESTAMPTZ (`to_timestamp`'s) in its TimeZone
setting, the process's local zone: where that is not UTC, a day, an hour, a truncation, a
difference or a text of one is refused.

Refused (`REFUSED`, `_refuse`): casts of floating-point numbers, timestamps, times and
intervals to text (the engines print them differently), in `concat` and `||` too;
`regexp_replace` without the `g` flag (DuckDB replaces the first match, Spark every one);
aggregates whose answer depends on the order rows arrive in (`first`, `list`, `string_agg`,
`any_value`, `mode` ...), approximations (`approx_count_distinct`, `approx_quantile`),
random values, hashes, `typeof`, and a quantile with a list of fractions or a descending
continuous one.
"""

from __future__ import annotations

from ..errors import BadInput

# Anonymous (unknown to sqlglot) DuckDB functions whose Spark namesake differs, or that have
# no deterministic answer: name -> why.
REFUSED_FUNCTIONS = {
    "arbitrary": "it returns any row's value: the engines pick different rows",
    "hash": "DuckDB and Spark hash with different functions",
    "printf": "Spark's printf follows Java's format syntax, not C's",
    "histogram": "DuckDB's histogram() returns a MAP Spark cannot return alike",
    "date_sub": "Spark's date_sub(start, days) is another function; use date_diff or arithmetic",
    "age": "Spark has no age() over timestamps",
    "reservoir_quantile": "it samples: the engines sample differently",
    "approx_top_k": "an approximation: the engines approximate differently",
}
REFUSED = {  # sqlglot expression class name -> why
    "Rand": "random values differ between engines",
    "Uuid": "random values differ between engines",
    "ApproxDistinct": "an approximation: the engines approximate differently",
    "ApproxQuantile": "an approximation: the engines approximate differently",
    "First": "it depends on the order rows arrive in, which differs between engines",
    "Last": "it depends on the order rows arrive in, which differs between engines",
    "AnyValue": "it returns any row's value: the engines pick different rows",
    "ArrayAgg": "the order of the list's items is not defined: the engines differ",
    "GroupConcat": "the order of the items is not defined: the engines differ (and Spark has no string_agg)",
    "Mode": "ties are broken differently",
    "Typeof": "the engines name their types differently",
}
# Casting these to text prints them differently (DuckDB '1e+20', '2024-01-02 03:04:05+00';
# Spark '1.0E20', '2024-01-02 03:04:05').
_TEXT_DIFFERS = (
    "FLOAT",
    "DOUBLE",
    "UDOUBLE",
    "TIMESTAMPTZ",
    "TIMESTAMPLTZ",
    "TIMESTAMP",
    "TIMESTAMPNTZ",
    "TIMESTAMP_S",
    "TIMESTAMP_MS",
    "TIMESTAMP_NS",
    "TIME",
    "TIMETZ",
    "INTERVAL",
    "ARRAY",
    "LIST",
    "STRUCT",
    "MAP",
)
_NOT_NUMBERS = {"INTERVAL", "DATE", "TIMESTAMP", "TIMESTAMPTZ", "TIME"}  # `/` of these is not a division of doubles
_DAY_UNITS = {  # DuckDB date part names -> Spark's
    "us": "MICROSECOND",
    "usec": "MICROSECOND",
    "usecs": "MICROSECOND",
    "microsecond": "MICROSECOND",
    "microseconds": "MICROSECOND",
    "ms": "MILLISECOND",
    "msec": "MILLISECOND",
    "msecs": "MILLISECOND",
    "millisecond": "MILLISECOND",
    "milliseconds": "MILLISECOND",
    "s": "SECOND",
    "sec": "SECOND",
    "secs": "SECOND",
    "second": "SECOND",
    "seconds": "SECOND",
    "m": "MINUTE",
    "min": "MINUTE",
    "mins": "MINUTE",
    "minute": "MINUTE",
    "minutes": "MINUTE",
    "h": "HOUR",
    "hr": "HOUR",
    "hrs": "HOUR",
    "hour": "HOUR",
    "hours": "HOUR",
    "d": "DAY",
    "day": "DAY",
    "days": "DAY",
    "w": "WEEK",
    "week": "WEEK",
    "weeks": "WEEK",
    "mon": "MONTH",
    "mons": "MONTH",
    "month": "MONTH",
    "months": "MONTH",
    "q": "QUARTER",
    "quarter": "QUARTER",
    "quarters": "QUARTER",
    "y": "YEAR",
    "yr": "YEAR",
    "yrs": "YEAR",
    "year": "YEAR",
    "years": "YEAR",
}


def refuse(node, why: str):
    """BadInput naming the construct (as written in DuckDB's SQL) and why it is refused."""
    text = node.sql(dialect="duckdb")
    if len(text) > 120:
        text = text[:117] + "..."
    return BadInput(
        f"the Spark engine refuses {text}: {why}",
        expected="a query both engines answer alike (docs/spark.md lists what is translated and refused)",
    )


def _type_name(node) -> str | None:
    """The sqlglot type of a typed node, upper case ('BIGINT', 'DECIMAL', ...); None when unknown."""
    t = getattr(node, "type", None)
    if t is None:
        return None
    name = t.this.value if hasattr(t.this, "value") else str(t.this)
    return None if name in ("UNKNOWN", "NULL") else name


def _is(node, kinds) -> bool | None:
    name = _type_name(node)
    return None if name is None else name in {k.value for k in kinds}


def typed(tree, schema: dict):
    """The tree qualified and typed against `schema` ({db: {table: {column: type}}}), or the
    tree typed as it is when sqlglot cannot qualify it (its column types are then unknown)."""
    from sqlglot.errors import SqlglotError
    from sqlglot.optimizer.annotate_types import annotate_types
    from sqlglot.optimizer.qualify import qualify

    try:
        q = qualify(
            tree.copy(),
            schema=schema,
            dialect="duckdb",
            validate_qualify_columns=False,
            quote_identifiers=False,
            identify=False,
        )
        return annotate_types(q, schema=schema, dialect="duckdb")
    except (SqlglotError, KeyError, ValueError, TypeError):
        try:
            return annotate_types(tree.copy(), dialect="duckdb")
        except (SqlglotError, KeyError, ValueError, TypeError):
            return tree.copy()


def translate(tree, schema: dict, timezone: str = "UTC"):
    """The tree rewritten so that Spark answers what DuckDB answers (see the module doc);
    BadInput for a construct that cannot be. `timezone`: DuckDB's TimeZone setting (Spark's
    session runs in UTC)."""
    from sqlglot import exp

    t = typed(tree, schema)
    for node in list(t.walk()):
        _refuse(node)
        if timezone not in _UTC:
            _zone(node, timezone, exp)
    # Innermost first: a rewrite of an outer node sees its arguments already rewritten.
    for node in reversed(list(t.walk())):
        if node is t:
            continue
        new = _rewrite(node, exp)
        if new is not None and new is not node:
            new.type = node.type  # DuckDB's type of the construct stays what an outer rule sees
            node.replace(new)
    return t


def _refuse(node) -> None:
    from sqlglot import exp

    name = type(node).__name__
    if name in REFUSED:
        raise refuse(node, REFUSED[name])
    if isinstance(node, exp.Anonymous) and str(node.this).lower() in REFUSED_FUNCTIONS:
        raise refuse(node, REFUSED_FUNCTIONS[str(node.this).lower()])
    if isinstance(node, exp.IgnoreNulls) and isinstance(node.this, exp.AnyValue):
        raise refuse(node, REFUSED["AnyValue"])
    if isinstance(node, exp.RegexpReplace):
        mods = node.args.get("modifiers")
        flags = mods.name if isinstance(mods, exp.Literal) else None if mods is None else "?"
        if flags != "g":
            raise refuse(
                node,
                "without the 'g' flag DuckDB replaces the first match and Spark every match "
                "(give 'g' to replace every match)"
                if not flags
                else f"the flags {flags!r} have no Spark equivalent here (only 'g' is translated)",
            )
    if isinstance(node, (exp.Cast, exp.TryCast)) and node.to.this in {
        exp.DataType.Type.VARCHAR,
        exp.DataType.Type.TEXT,
    }:
        _text_of(node, node.this, "a CAST of {type} to text")
    if isinstance(node, exp.DPipe):
        for side in (node.this, node.expression):
            _text_of(node, side, "|| over {type}")


# Expressions that give text whatever sqlglot could tell of their type (its typing knows no
# type for some string functions): taken as text in concat and ||.
_TEXT_FUNCTIONS = (
    "Pad",
    "RegexpExtract",
    "JSONExtractScalar",
    "JSONExtract",
    "Substring",
    "Trim",
    "Replace",
    "Lower",
    "Upper",
    "Concat",
    "DPipe",
    "Left",
    "Right",
    "Reverse",
    "Repeat",
    "SplitPart",
    "MD5",
    "TimeToStr",
    "Chr",
    "Initcap",
    "Null",
    "GroupConcat",
)


_UTC = {"UTC", "Etc/UTC", "GMT", "Etc/GMT", "Z", "Etc/Universal", "Universal", "Zulu", "Etc/Zulu"}


def _zone(node, timezone: str, exp) -> None:
    """DuckDB takes a TIMESTAMPTZ's days, hours, truncations and text in its TimeZone setting
    (the process's local zone), Spark in its session's UTC: where they differ, a query whose
    answer depends on the zone is refused."""
    parts = (exp.TimestampTrunc, exp.DateTrunc, exp.DateDiff, exp.Extract, exp.TimeToStr)
    dependent = (
        isinstance(node, parts)
        or (isinstance(node, exp.Anonymous) and str(node.this).lower() == "date_part")
        or (
            isinstance(node, (exp.Cast, exp.TryCast))
            and node.to.this in {exp.DataType.Type.DATE, exp.DataType.Type.TIME}
        )
    )
    if not dependent:
        return
    for sub in node.walk():
        tz = (
            (isinstance(sub, exp.UnixToTime) and sub.args.get("scale") is None and sub.args.get("format") is None)
            or isinstance(sub, (exp.CurrentTimestamp,))
            or (isinstance(sub, (exp.Cast, exp.TryCast)) and sub.to.this == exp.DataType.Type.TIMESTAMPTZ)
        )
        if tz:
            raise refuse(
                node,
                f"its answer depends on the time zone of a TIMESTAMPTZ: DuckDB works in {timezone} here, "
                "the Spark session in UTC (run with TZ=UTC)",
            )


def _text_of(node, arg, what: str) -> None:
    """Refuses `node` when `arg` is of a type the engines print differently as text, or of a
    type that cannot be told (it might be one)."""
    name = _type_name(arg)
    if name is not None and name in _TEXT_DIFFERS:
        raise refuse(node, what.format(type=name) + ": DuckDB and Spark print it differently as text")
    if name is None and type(arg).__name__ not in _TEXT_FUNCTIONS:
        raise refuse(
            node,
            f"the type of {arg.sql(dialect='duckdb')} cannot be told, and DuckDB and Spark print "
            "floating-point numbers and timestamps differently as text (CAST it)",
        )


def _wrapped(node, exp):
    """The node with the FILTER / OVER wrappers an aggregate carries (the outermost one)."""
    outer = node
    while (
        isinstance(outer.parent, (exp.Filter, exp.Window, exp.IgnoreNulls, exp.RespectNulls))
        and outer.parent.this is outer
    ):
        outer = outer.parent
    return outer


def _like(outer, inner, agg, exp):
    """`agg` wrapped as `inner` is wrapped up to `outer` (the same FILTER and window)."""
    if outer is inner:
        return agg
    chain = []
    n = inner
    while n is not outer:
        n = n.parent
        chain.append(n)
    out = agg
    for w in chain:
        c = w.copy()
        c.set("this", out)
        out = c
    return out


def _rewrite(node, exp):  # noqa: C901 - one branch per rule of the module doc
    D = exp.DataType
    if isinstance(node, exp.Sum) and _is(node.this, D.INTEGER_TYPES):
        return exp.Sum(this=exp.cast(node.this, "DECIMAL(38, 0)"))
    if isinstance(node, exp.Avg):
        arg = node.this
        if _is(arg, D.INTEGER_TYPES) or _type_name(arg) == "DECIMAL":
            outer = _wrapped(node, exp)
            total = exp.Sum(this=exp.cast(arg.copy(), "DECIMAL(38, 0)") if _is(arg, D.INTEGER_TYPES) else arg.copy())
            count = exp.Count(this=arg.copy())
            div = exp.Div(
                this=exp.cast(_like(outer, node, total, exp), "DOUBLE"),
                expression=exp.Nullif(
                    this=exp.cast(_like(outer, node, count, exp), "DOUBLE"), expression=exp.Literal.number(0)
                ),
            )
            if outer is not node:
                outer.replace(exp.Paren(this=div))
                return None
            return exp.Paren(this=div)
        return None
    if isinstance(node, exp.Div) and not any(_type_name(x) in _NOT_NUMBERS for x in (node.this, node.expression)):
        return exp.Div(this=exp.cast(node.this, "DOUBLE"), expression=exp.cast(node.expression, "DOUBLE"))
    if isinstance(node, (exp.Cast, exp.TryCast)) and node.to.this in D.INTEGER_TYPES:
        src = _type_name(node.this)
        # (text from JSON is cast as text: Spark's ANSI cast of '3.5' to an integer is an error, never 3)
        if src is None and not isinstance(node.this, (exp.Null, exp.JSONExtract, exp.JSONExtractScalar)):
            raise refuse(
                node,
                f"the type of {node.this.sql(dialect='duckdb')} cannot be told: DuckDB rounds a "
                "floating-point or decimal value cast to an integer, Spark truncates it",
            )
        if src in ("DOUBLE", "FLOAT"):
            node.set("this", exp.Anonymous(this="BROUND", expressions=[node.this, exp.Literal.number(0)]))
        elif src == "DECIMAL":
            node.set("this", exp.Round(this=node.this, decimals=exp.Literal.number(0)))
        return None
    if isinstance(node, exp.Concat):
        args = []
        for a in node.expressions:
            _text_of(node, a, "concat() of {type}")
            s = a if _is(a, D.TEXT_TYPES) else exp.cast(a, "STRING")
            args.append(exp.Coalesce(this=s, expressions=[exp.Literal.string("")]) if node.args.get("coalesce") else s)
        return exp.Concat(expressions=args, safe=False, coalesce=False)
    if isinstance(node, exp.DateDiff):
        return _date_diff(node, exp)
    if isinstance(node, (exp.PercentileCont, exp.PercentileDisc, exp.Quantile)) and not isinstance(
        node.parent, exp.WithinGroup
    ):
        q = node.expression if node.args.get("expression") is not None else node.args.get("quantile")
        return _quantile(node, node.this, q, cont=isinstance(node, exp.PercentileCont), desc=False, exp=exp)
    if isinstance(node, exp.WithinGroup) and isinstance(node.this, (exp.PercentileCont, exp.PercentileDisc)):
        order = node.expression.expressions if isinstance(node.expression, exp.Order) else []
        if len(order) != 1:
            raise refuse(node, "a quantile orders by one value")
        return _quantile(
            node,
            order[0].this,
            node.this.this,
            cont=isinstance(node.this, exp.PercentileCont),
            desc=bool(order[0].args.get("desc")),
            exp=exp,
        )
    if isinstance(node, exp.UnixToTime) and node.args.get("scale") is None and node.args.get("format") is None:
        # DuckDB rounds seconds * 1e6 half to even (nearbyint): Spark's BROUND
        micros = exp.cast(
            exp.Anonymous(
                this="BROUND",
                expressions=[
                    exp.Mul(this=exp.Paren(this=node.this), expression=exp.Literal.number(1_000_000)),
                    exp.Literal.number(0),
                ],
            ),
            "BIGINT",
        )
        return exp.Anonymous(this="TIMESTAMP_MICROS", expressions=[micros])
    if isinstance(node, exp.Extract) or (
        isinstance(node, exp.Anonymous)
        and str(node.this).lower() == "date_part"
        and len(node.expressions) == 2
        and isinstance(node.expressions[0], exp.Literal)
    ):
        return _extract(node, exp)
    if isinstance(node, exp.Anonymous) and str(node.this).lower() == "strlen":
        return exp.Anonymous(this="OCTET_LENGTH", expressions=list(node.expressions))
    return None


def _quantile(node, x, q, *, cont: bool, desc: bool, exp):
    if not isinstance(q, exp.Literal) or q.is_string:
        raise refuse(
            node, "the fraction must be one number (a list of fractions returns a list Spark cannot return alike)"
        )
    if cont:
        if desc:
            raise refuse(node, "a continuous quantile in descending order (write 1 - q in ascending order)")
        return exp.Anonymous(this="PERCENTILE", expressions=[x.copy(), q.copy()])
    # DuckDB's discrete quantile is the value at max(1, n - floor(n - n * q)) of the sorted
    # values (exact arithmetic for a decimal q): written so in Spark, whose percentile_disc goes
    # through DOUBLE (epoch-ns BIGINTs lose their last digits).
    n = exp.Count(this=x.copy())
    at = exp.Greatest(
        this=exp.Literal.number(1),
        expressions=[
            exp.Sub(
                this=n,
                expression=exp.Floor(
                    this=exp.Sub(this=n.copy(), expression=exp.Mul(this=n.copy(), expression=q.copy()))
                ),
            )
        ],
    )
    values = exp.Anonymous(this="ARRAY_SORT", expressions=[exp.Anonymous(this="COLLECT_LIST", expressions=[x.copy()])])
    if desc:
        values = exp.Anonymous(this="REVERSE", expressions=[values])
    return exp.Anonymous(this="TRY_ELEMENT_AT", expressions=[values, exp.cast(at, "INT")])


def _extract(node, exp):
    """DuckDB's second, millisecond and microsecond parts are integers (ms and us count the
    whole seconds too: 25.098452 s -> 25, 25098, 25098452); Spark's SECOND part is a
    decimal with the fraction."""
    if isinstance(node, exp.Extract):
        unit, x = node.this.name.lower(), node.expression
    else:
        unit, x = node.expressions[0].name.lower(), node.expressions[1]
    scale = {
        "second": 1,
        "seconds": 1,
        "s": 1,
        "sec": 1,
        "millisecond": 1000,
        "milliseconds": 1000,
        "ms": 1000,
        "microsecond": 1_000_000,
        "microseconds": 1_000_000,
        "us": 1_000_000,
    }.get(unit)
    if scale is None:
        return exp.Extract(this=exp.var(unit.upper()), expression=x) if not isinstance(node, exp.Extract) else None
    seconds = exp.Extract(this=exp.var("SECOND"), expression=x)
    value = seconds if scale == 1 else exp.Mul(this=seconds, expression=exp.Literal.number(scale))
    return exp.cast(exp.Floor(this=value), "BIGINT")


def _date_diff(node, exp):
    unit_node = node.args.get("unit")
    unit = (unit_node.name if unit_node is not None else "day").lower()
    spark_unit = _DAY_UNITS.get(unit)
    if spark_unit is None:
        raise refuse(node, f"the date part {unit!r} is not translated (microsecond ... year are)")
    a, b = node.expression, node.this
    if spark_unit == "WEEK":  # DuckDB: whole weeks of the days crossed
        days = exp.DateDiff(
            this=exp.TimestampTrunc(this=b.copy(), unit=exp.var("DAY")),
            expression=exp.TimestampTrunc(this=a.copy(), unit=exp.var("DAY")),
            unit=exp.var("DAY"),
        )
        return exp.Paren(this=exp.IntDiv(this=days, expression=exp.Literal.number(7)))
    u = exp.var(spark_unit)
    return exp.DateDiff(
        this=exp.TimestampTrunc(this=b.copy(), unit=u),
        expression=exp.TimestampTrunc(this=a.copy(), unit=u),
        unit=exp.var(spark_unit),
    )
