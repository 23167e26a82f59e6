"""InfluxQL `SELECT`: its syntax tree and its parser.

Owns the grammar of InfluxDB 1.x's SELECT statement as clients send it (Grafana's InfluxDB data
source in InfluxQL mode, TSBS's `tsbs_run_queries_influx`, the `influxdb` Python client):

  SELECT field [AS alias], ... FROM source, ... [WHERE condition]
    [GROUP BY time(interval[, offset]) | tag | * | /regex/, ...] [fill(none|null|previous|linear|<number>)]
    [ORDER BY time [ASC|DESC]] [LIMIT n] [OFFSET n] [SLIMIT n] [SOFFSET n] [tz('UTC')]

A field is an expression over field and tag references (`usage_user`, `"host"::tag`, `*`,
`/re/`), literals and calls (`max(usage_user)`, `percentile(x, 95)`, `count(distinct(x))`), with
`+ - * / % & | ^`; a source is a measurement (`cpu`, `db.rp.cpu`, `db..cpu`, `/re/`) or one
parenthesised subquery. Conditions are the same expressions with comparisons (`= != <> < <= > >=
=~ !~`) joined by AND and OR. The tokens are `influxql.Scanner`'s; this module adds the
expression grammar (InfluxQL's precedence: OR < AND < comparisons < `+ - | ^` < `* / % &`).

Translation to SQL and execution live in `influxql_sql.py`: a tree here says what was written,
never what it means over a store.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# -- the tree -------------------------------------------------------------------------------


@dataclass
class VarRef:
    """A field or tag named in an expression; `type` is the `::field` / `::tag` cast, if any."""

    name: str
    type: str | None = None


@dataclass
class Wildcard:
    """`*` (every field and tag), `*::field` or `*::tag`."""

    type: str | None = None


@dataclass
class RegexRef:
    """`/re/` in a field list or a call: every field (or tag) whose name it matches."""

    regex: re.Pattern


@dataclass
class Literal:
    """A number (`float`), integer, string, boolean, duration (ns) or regex."""

    kind: str  # "number" | "integer" | "string" | "bool" | "duration" | "regex"
    value: Any


@dataclass
class Call:
    name: str  # lower case
    args: list = field(default_factory=list)


@dataclass
class Binary:
    op: str  # "+ - * / % & | ^ = != < <= > >= =~ !~ and or" (AND, OR lower case)
    left: Any
    right: Any


@dataclass
class Paren:
    expr: Any


@dataclass
class Field:
    expr: Any
    alias: str | None = None


@dataclass
class Measurement:
    """A measurement named in FROM (or a regex over names), optionally in another database; the
    meta statements' FROM too (influxql.py)."""

    name: str | None = None
    regex: re.Pattern | None = None
    database: str | None = None

    def matches(self, m: str) -> bool:
        return self.regex.search(m) is not None if self.regex is not None else self.name == m


@dataclass
class Subquery:
    select: Select


@dataclass
class Dimension:
    """One GROUP BY item: time(interval, offset), a tag, `*` or a regex over tag keys."""

    kind: str  # "time" | "tag" | "wildcard" | "regex"
    name: str | None = None
    interval: int = 0  # ns
    offset: int = 0  # ns
    regex: re.Pattern | None = None


@dataclass
class Select:
    fields: list[Field]
    sources: list
    condition: Any = None
    dimensions: list[Dimension] = field(default_factory=list)
    fill: str = "null"  # "null" | "none" | "previous" | "linear" | "value"
    fill_value: Any = None
    descending: bool = False
    limit: int = 0
    offset: int = 0
    slimit: int = 0
    soffset: int = 0
    tz: str | None = None

    @property
    def time_dimension(self) -> Dimension | None:
        return next((d for d in self.dimensions if d.kind == "time"), None)


# -- the parser -----------------------------------------------------------------------------

# Binary operators by precedence (InfluxQL's, influxql/token.go)
_PRECEDENCE = {
    "or": 1,
    "and": 2,
    "=": 4,
    "!=": 4,
    "<>": 4,
    "<": 4,
    "<=": 4,
    ">": 4,
    ">=": 4,
    "=~": 4,
    "!~": 4,
    "+": 5,
    "-": 5,
    "|": 5,
    "^": 5,
    "*": 6,
    "/": 6,
    "%": 6,
    "&": 6,
}
MAX_DEPTH = 100  # nested parentheses and calls (the parser recurses on them)
FILL_MODES = ("null", "none", "previous", "linear")


class SelectParser:
    """Parses a SELECT with an `influxql.Parser`'s token plumbing (`p`), its keyword SELECT consumed."""

    def __init__(self, p) -> None:
        self.p = p
        self.depth = 0
        self.in_subquery = False  # one level of subquery

    def _error(self, tok, expected: str):
        return self.p.fail(tok, expected)

    def _op(self, tok, *ops: str) -> bool:
        return tok.kind == "operator" and tok.value in ops

    def _enter(self, pos: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.p.s.error(f"expression nested deeper than {MAX_DEPTH} levels", pos)

    def select(self, *, sub: bool = False) -> Select:
        p = self.p
        fields = self.fields()
        if p.accept("INTO"):
            raise p.s.error(
                "SELECT ... INTO is not supported by tracehouse (it stores nothing from a query)", p.last_end
            )
        if not p.accept("FROM"):
            raise self._error(p.peek(), "FROM")
        sources = [self.source()]
        while p.accept_op(","):
            sources.append(self.source())
        st = Select(fields, sources)
        if p.accept("WHERE"):
            st.condition = self.expr()
        if p.accept("GROUP"):
            p.keyword("BY")
            st.dimensions = self.dimensions()
        self.fill(st)
        if p.accept("ORDER"):
            p.keyword("BY")
            tok = p.next()
            if not (tok.kind == "identifier" and tok.value.lower() == "time"):
                raise p.s.error("only ORDER BY time supported at this time", tok.pos)
            if p.accept("DESC"):
                st.descending = True
            else:
                p.accept("ASC")
        while True:
            kw = p.accept("LIMIT", "OFFSET", "SLIMIT", "SOFFSET")
            if kw is None:
                break
            setattr(st, kw.lower(), p.integer())
        tok = p.peek()
        if tok.kind == "identifier" and tok.keyword is None and tok.value.lower() == "tz":
            p.next()
            if not p.accept_op("("):
                raise self._error(p.peek(), "(")
            tz = p.next()
            if tz.kind != "string":
                raise self._error(tz, "string")
            if not p.accept_op(")"):
                raise self._error(p.peek(), ")")
            st.tz = tz.value
        return st

    # -- SELECT list
    def fields(self) -> list[Field]:
        out = [self.field()]
        while self.p.accept_op(","):
            out.append(self.field())
        return out

    def field(self) -> Field:
        p = self.p
        tok = p.peek()
        if self._op(tok, "*"):
            p.next()
            expr: Any = Wildcard(self.cast())
        else:
            expr = self.expr()
        alias = p.ident("alias") if p.accept("AS") else None
        return Field(expr, alias)

    def cast(self) -> str | None:
        if self.p.accept_op("::"):
            tok = self.p.next()
            typ = tok.value.lower() if tok.kind == "identifier" else ""
            if typ not in ("field", "tag", "float", "integer", "string", "boolean"):
                raise self._error(tok, "field, tag, float, integer, string or boolean")
            return typ
        return None

    # -- FROM
    def source(self):
        p = self.p
        tok = p.peek()
        if self._op(tok, "("):
            p.next()
            inner = p.next()
            if inner.keyword != "SELECT":
                raise self._error(inner, "SELECT")
            if self.depth > 0 or self.in_subquery:
                raise p.s.error("subqueries nested more than one level are not supported by tracehouse", inner.pos)
            self.in_subquery = True
            try:
                sub = self.select(sub=True)
            finally:
                self.in_subquery = False
            if not p.accept_op(")"):
                raise self._error(p.peek(), ")")
            return Subquery(sub)
        return p.source()

    # -- GROUP BY, fill
    def dimensions(self) -> list[Dimension]:
        out = [self.dimension()]
        while self.p.accept_op(","):
            out.append(self.dimension())
        if sum(d.kind == "time" for d in out) > 1:
            raise self.p.s.error("multiple time dimensions", self.p.last_end)
        return out

    def dimension(self) -> Dimension:
        p = self.p
        tok = p.peek()
        if self._op(tok, "*"):
            p.next()
            return Dimension("wildcard")
        if self._op(tok, "/"):
            return Dimension("regex", regex=p.regex())
        name = p.ident("time() or a tag key")
        if name.lower() == "time" and not tok.text.startswith('"') and p.accept_op("("):
            interval = self.p.next()
            if interval.kind != "duration":
                raise self._error(interval, "duration")
            if interval.value <= 0:
                raise p.s.error("time dimension must have a positive duration", interval.pos)
            offset = 0
            if p.accept_op(","):
                sign = -1 if p.accept_op("-") else 1
                off = p.next()
                if off.kind != "duration" and not (off.kind == "integer" and off.value == 0):
                    raise self._error(off, "duration")
                offset = sign * off.value
            if not p.accept_op(")"):
                raise self._error(p.peek(), ")")
            return Dimension("time", interval=interval.value, offset=offset)
        self.cast()  # GROUP BY host::tag
        return Dimension("tag", name=name)

    def fill(self, st: Select) -> None:
        p = self.p
        tok = p.peek()
        if not (
            tok.kind == "identifier"
            and tok.keyword is None
            and tok.value.lower() == "fill"
            and not tok.text.startswith('"')
        ):
            return
        p.next()
        if not p.accept_op("("):
            raise self._error(p.peek(), "(")
        tok = p.next()
        neg = False
        if self._op(tok, "-"):
            neg, tok = True, p.next()
        if tok.kind == "identifier" and not neg and tok.value.lower() in FILL_MODES:
            st.fill = tok.value.lower()
        elif tok.kind in ("integer", "number") or tok.kind == "bound parameter" and isinstance(tok.value, (int, float)):
            st.fill, st.fill_value = "value", -tok.value if neg else tok.value
        else:
            raise self._error(tok, "null, none, previous, linear or a number")
        if not p.accept_op(")"):
            raise self._error(p.peek(), ")")

    # -- expressions
    def expr(self, min_prec: int = 1):
        p = self.p
        left = self.unary()
        while True:
            tok = p.peek()
            op = None
            if tok.kind == "operator" and tok.value in _PRECEDENCE:
                op = tok.value
            elif tok.kind == "identifier" and tok.keyword in ("AND", "OR"):
                op = tok.keyword.lower()
            if op is None or _PRECEDENCE[op] < min_prec:
                return left
            p.next()
            if op in ("=~", "!~"):
                nxt = p.peek()
                if self._op(nxt, "/"):
                    right: Any = Literal("regex", p.regex())
                elif nxt.kind == "bound parameter":
                    p.next()
                    try:
                        right = Literal("regex", re.compile(str(nxt.value)))
                    except re.error as e:
                        raise p.s.error(f"invalid regex {nxt.value!r}: {e}", nxt.pos) from None
                else:
                    raise self._error(nxt, "regex")
            else:
                right = self.expr(_PRECEDENCE[op] + 1)
            left = Binary("!=" if op == "<>" else op, left, right)

    def unary(self):
        p = self.p
        tok = p.peek()
        if self._op(tok, "-", "+"):
            p.next()
            operand = self.unary()
            if tok.value == "+":
                return operand
            if isinstance(operand, Literal) and operand.kind in ("number", "integer", "duration"):
                return Literal(operand.kind, -operand.value)
            return Binary("*", Literal("integer", -1), operand)
        return self.operand()

    def operand(self):
        p = self.p
        tok = p.next()
        kind = tok.kind
        if kind == "operator":
            if tok.value == "(":
                self._enter(tok.pos)
                e = self.expr()
                if not p.accept_op(")"):
                    raise self._error(p.peek(), ")")
                self.depth -= 1
                return Paren(e)
            if tok.value == "/":
                rx = p.s.scan_regex(tok)
                p.last_end = rx.end
                return RegexRef(rx.value)
            if tok.value == "*":
                return Wildcard(self.cast())
            raise self._error(tok, "identifier, string, number, bool")
        if kind == "string":
            return Literal("string", tok.value)
        if kind == "integer":
            return Literal("integer", tok.value)
        if kind == "number":
            return Literal("number", tok.value)
        if kind == "duration":
            return Literal("duration", tok.value)
        if kind == "bound parameter":
            v = tok.value
            if isinstance(v, str):
                return Literal("string", v)
            return Literal("integer" if isinstance(v, int) else "number", v)
        if kind == "identifier":
            quoted = tok.text.startswith('"')
            if not quoted and tok.value.lower() in ("true", "false"):
                return Literal("bool", tok.value.lower() == "true")
            call = not quoted and self._op(p.peek(), "(")
            if tok.keyword is not None and not quoted and not (call and tok.keyword == "DISTINCT"):
                raise self._error(tok, "identifier, string, number, bool")
            if call:
                p.next()
                self._enter(tok.pos)
                args = []
                if not p.accept_op(")"):
                    args.append(self.expr())
                    while p.accept_op(","):
                        args.append(self.expr())
                    if not p.accept_op(")"):
                        raise self._error(p.peek(), ")")
                self.depth -= 1
                return Call(tok.value.lower(), args)
            # `db.m` style names are not expressions; a field's name is one identifier
            return VarRef(tok.value, self.cast())
        raise self._error(tok, "identifier, string, number, bool")


def field_name(f: Field) -> str:
    """InfluxDB's column name of a field: its alias, a call's name, a reference's name, or the
    names met in an expression joined with `_` (influxql's BinaryExprName)."""
    if f.alias:
        return f.alias
    names: list[str] = []

    def walk(e) -> None:
        if isinstance(e, (Call, VarRef)):
            names.append(e.name)
        elif isinstance(e, Binary):
            walk(e.left)
            walk(e.right)
        elif isinstance(e, Paren):
            walk(e.expr)

    walk(f.expr)
    return "_".join(names) if names else ""
