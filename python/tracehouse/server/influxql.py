"""InfluxDB 1.x `/query`: the InfluxQL statements that existing clients send, over the traces.

Owns the InfluxQL tokenizer and parser (a subset: the meta statements below, case-insensitive
keywords, bare and double-quoted identifiers, single-quoted strings, regexes, durations, bound
`$parameters`, `--` and `/* */` comments, several statements separated by `;`), their execution
over a store (a database is a trace), and InfluxDB's JSON shapes for the answers.

Statements answered (what telegraf, Grafana's InfluxDB data source, TSBS's `tsbs_load_influx`
and the `influxdb` Python client send):

  SHOW DATABASES
  CREATE DATABASE name [WITH [DURATION d] [REPLICATION n] [SHARD DURATION d] [NAME rp]]
  DROP DATABASE name
  SHOW MEASUREMENTS [ON db] [WITH MEASUREMENT =|=~ m] [WHERE tags] [LIMIT n] [OFFSET n]
  SHOW FIELD KEYS [ON db] [FROM m, ...] [LIMIT n] [OFFSET n]
  SHOW TAG KEYS [ON db] [FROM m, ...] [WHERE tags] [LIMIT n] [OFFSET n]
  SHOW TAG VALUES [ON db] [FROM m, ...] WITH KEY =|!=|=~|!~|IN ... [WHERE tags] [LIMIT n] [OFFSET n]
  SHOW SERIES [ON db] [FROM m, ...] [WHERE tags] [LIMIT n] [OFFSET n]
  SHOW RETENTION POLICIES [ON db]
  CREATE|ALTER|DROP RETENTION POLICY rp ON db [DURATION d] [REPLICATION n] [SHARD DURATION d] [DEFAULT]
  SELECT ...   (parsed by influxql_select.py, translated to SQL by influxql_sql.py, run here)

Every other statement InfluxQL has parses as far as its first keywords and answers InfluxDB's
error shape, `{"results": [{"statement_id": 0, "error": "..."}]}`, naming SQL
over `POST /api/query` for data. A statement that cannot be parsed is a 400 with
`{"error": "error parsing query: ..."}` and nothing runs, as in InfluxDB.

Decisions:
- A database is a trace; a measurement is an event type; a series is a measurement and one of
  its producers (a tag set); field keys are the type's typed columns. `SHOW TAG KEYS` and
  `SHOW SERIES` read which producers each measurement has with one DISTINCT query per trace
  (DuckDB over the stored columns), not from a separate index.
- `DROP DATABASE` deletes the trace, as a careful InfluxDB user expects (TSBS drops its
  database before every load), but only a trace that an InfluxDB client made (line protocol,
  Arrow writes or `CREATE DATABASE` through `serve`): a trace imported from a file (strace,
  Chrome ...) is refused, with `tracehouse rm` named. Like every request, it needs the
  server's token when one is set; every drop is logged with the client's address.
- A database has one retention policy, the trace's retention (store/compact.py: whole
  segments older than its duration are dropped); `CREATE DATABASE ... WITH DURATION`, CREATE
  RETENTION POLICY ... DEFAULT and ALTER RETENTION POLICY set it; a CREATE without DEFAULT is
  not applied (in InfluxDB it holds only the writes that name it, not the database's rows);
  DROP RETENTION POLICY is refused (it would delete the data). `REPLICATION` above 1 is accepted with a warning message (one node); time conditions
  in a `SHOW` statement's WHERE are not applied (warning): the whole trace is listed.
- As in InfluxDB, a statement that fails stops the rest of the request (they answer
  "not executed"), and write statements sent with GET carry InfluxDB's deprecation warning.

Over 600 lines: a tokenizer, a parser and the execution of the statements clients send, kept
together because each statement's grammar and its answer change together.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from ..errors import AlreadyExists, BadInput, NotFound, TracehouseError
from ..jsonvalues import RawSeries, json_bytes
from ..store.compact import format_duration
from ..store.query import qident, tag_column_names
from .influxql_select import Measurement as Source
from .influxql_select import SelectParser, Subquery, Wildcard
from .ingest import SOURCE
from .queries import QueryStopped

log = logging.getLogger("tracehouse.server")

# -- tokens ---------------------------------------------------------------------------------

IDENT, STRING, NUMBER, INTEGER, DURATION, REGEX, BOUND, OP, EOF = (
    "identifier",
    "string",
    "number",
    "integer",
    "duration",
    "regex",
    "bound parameter",
    "operator",
    "EOF",
)

KEYWORDS = frozenset(
    [
        "ALL",
        "ALTER",
        "ANALYZE",
        "ANY",
        "AS",
        "ASC",
        "BEGIN",
        "BY",
        "CARDINALITY",
        "CREATE",
        "CONTINUOUS",
        "DATABASE",
        "DATABASES",
        "DEFAULT",
        "DELETE",
        "DESC",
        "DESTINATIONS",
        "DIAGNOSTICS",
        "DISTINCT",
        "DROP",
        "DURATION",
        "END",
        "EVERY",
        "EXACT",
        "EXPLAIN",
        "FIELD",
        "FOR",
        "FROM",
        "GRANT",
        "GRANTS",
        "GROUP",
        "GROUPS",
        "IN",
        "INF",
        "INSERT",
        "INTO",
        "KEY",
        "KEYS",
        "KILL",
        "LIMIT",
        "MEASUREMENT",
        "MEASUREMENTS",
        "NAME",
        "OFFSET",
        "ON",
        "ORDER",
        "PASSWORD",
        "POLICIES",
        "POLICY",
        "PRIVILEGES",
        "QUERIES",
        "QUERY",
        "READ",
        "REPLICATION",
        "RESAMPLE",
        "RETENTION",
        "REVOKE",
        "SELECT",
        "SERIES",
        "SET",
        "SHARD",
        "SHARDS",
        "SHOW",
        "SLIMIT",
        "SOFFSET",
        "STATS",
        "SUBSCRIPTION",
        "SUBSCRIPTIONS",
        "TAG",
        "TO",
        "USER",
        "USERS",
        "VALUES",
        "WHERE",
        "WITH",
        "WRITE",
        "AND",
        "OR",
    ]
)

DURATION_UNITS = {
    "ns": 1,
    "u": 1_000,
    "µ": 1_000,
    "ms": 1_000_000,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
    "d": 86400 * 10**9,
    "w": 7 * 86400 * 10**9,
}
_DURATION = re.compile(r"([0-9]+)(ns|ms|u|µ|s|m|h|d|w)")
_DURATION_LIT = re.compile(r"((?:[0-9]+(?:ns|ms|u|µ|s|m|h|d|w))+)(?![A-Za-z0-9_])")
_NUMBER_LIT = re.compile(r"[0-9]*\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?")
_DIGITS = frozenset("0123456789")
_OPS = (
    "=~",
    "!~",
    "!=",
    "<>",
    "<=",
    ">=",
    "::",
    "=",
    "<",
    ">",
    "+",
    "-",
    "*",
    "/",
    "%",
    "&",
    "|",
    "^",
    ",",
    ";",
    "(",
    ")",
    ".",
)


@dataclass
class Token:
    kind: str
    value: Any
    pos: int  # offset in the query text
    text: str = ""  # the source text (for errors)
    keyword: str | None = None  # upper-case keyword of a bare identifier that is one
    end: int = 0  # offset just past it


class ParseError(Exception):
    pass


class Scanner:
    """InfluxQL tokens on demand; regexes are scanned only where the parser expects one
    (a `/` elsewhere is division)."""

    def __init__(self, text: str, params: dict[str, Any] | None = None) -> None:
        self.text = text
        self.i = 0
        self.params = params or {}

    def where(self, pos: int) -> str:
        line = self.text.count("\n", 0, pos) + 1
        col = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return f"line {line}, char {col}"

    def error(self, msg: str, pos: int) -> ParseError:
        return ParseError(f"{msg} at {self.where(pos)}")

    def _skip_space(self) -> None:
        t, n = self.text, len(self.text)
        while self.i < n:
            c = t[self.i]
            if c.isspace():
                self.i += 1
            elif t.startswith("--", self.i):
                j = t.find("\n", self.i)
                self.i = n if j < 0 else j + 1
            elif t.startswith("/*", self.i):
                j = t.find("*/", self.i + 2)
                if j < 0:
                    raise self.error("unterminated comment", self.i)
                self.i = j + 2
            else:
                return

    def scan(self) -> Token:
        tok = self._scan()
        tok.end = self.i
        return tok

    def _scan(self) -> Token:
        self._skip_space()
        t, i = self.text, self.i
        if i >= len(t):
            return Token(EOF, None, i, "EOF")
        c = t[i]
        if c.isalpha() or c == "_":
            j = i + 1
            while j < len(t) and (t[j].isalnum() or t[j] == "_"):
                j += 1
            self.i = j
            word = t[i:j]
            up = word.upper()
            return Token(IDENT, word, i, word, up if up in KEYWORDS else None)
        if c == '"':
            return self._quoted('"', IDENT)
        if c == "'":
            return self._quoted("'", STRING)
        if c in _DIGITS or (c == "." and i + 1 < len(t) and t[i + 1] in _DIGITS):
            return self._number()
        if c == "$":
            j = i + 1
            if j < len(t) and t[j] == '"':
                self.i = j
                name = self._quoted('"', IDENT).value
            else:
                while j < len(t) and (t[j].isalnum() or t[j] == "_"):
                    j += 1
                name = t[i + 1 : j]
                self.i = j
            if not name:
                raise self.error("found $, expected a bound parameter name", i)
            if name not in self.params:
                raise self.error(f"missing parameter: {name}", i)
            v = self.params[name]
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                raise self.error(f"unsupported value of parameter {name}: {v!r}", i)
            return Token(BOUND, v, i, t[i : self.i])
        for op in _OPS:
            if t.startswith(op, i):
                self.i = i + len(op)
                return Token(OP, op, i, op)
        raise self.error(f"found {c!r}, expected a statement", i)

    def _quoted(self, q: str, kind: str) -> Token:
        t, start = self.text, self.i
        j = start + 1
        out = []
        while True:
            if j >= len(t) or t[j] == "\n":
                raise self.error("unterminated " + ("quoted identifier" if q == '"' else "string"), start)
            c = t[j]
            if c == "\\" and j + 1 < len(t):
                nxt = t[j + 1]
                out.append({"n": "\n", "t": "\t"}.get(nxt, nxt) if nxt in (q, "\\", "n", "t") else c + nxt)
                j += 2
                continue
            if c == q:
                break
            out.append(c)
            j += 1
        self.i = j + 1
        return Token(kind, "".join(out), start, t[start : j + 1])

    def _number(self) -> Token:
        t, start = self.text, self.i
        m = _DURATION_LIT.match(t, start)
        if m:
            ns = sum(int(a) * DURATION_UNITS[u] for a, u in _DURATION.findall(m.group(1)))
            self.i = m.end()
            return Token(DURATION, ns, start, m.group(1))
        m = _NUMBER_LIT.match(t, start)
        self.i = m.end()
        s = m.group(0)
        if all(ch in _DIGITS for ch in s):
            return Token(INTEGER, int(s), start, s)
        return Token(NUMBER, float(s), start, s)

    def scan_regex(self, slash: Token) -> Token:
        """The regex starting at the `/` token already scanned."""
        t, j = self.text, slash.pos + 1
        out = []
        while True:
            if j >= len(t) or t[j] == "\n":
                raise self.error("unterminated regex", slash.pos)
            c = t[j]
            if c == "\\" and j + 1 < len(t) and t[j + 1] == "/":
                out.append("/")
                j += 2
                continue
            if c == "\\" and j + 1 < len(t):
                out.append(t[j : j + 2])
                j += 2
                continue
            if c == "/":
                break
            out.append(c)
            j += 1
        self.i = j + 1
        end = self.i
        src = "".join(out)
        try:
            rx = re.compile(src)
        except (re.error, RecursionError, OverflowError, ValueError) as e:
            raise self.error(f"invalid regex /{src}/: {e}", slash.pos) from None
        return Token(REGEX, rx, slash.pos, t[slash.pos : j + 1], end=end)


# -- statements -----------------------------------------------------------------------------


@dataclass
class Cond:
    """A tag condition tree: ("and"|"or", a, b) or ("cmp", key, op, value) or ("time",)."""

    node: tuple


@dataclass
class Statement:
    kind: str  # "show databases", "create database", ..., "unsupported"
    text: str  # its source text
    database: str | None = None  # ON db / the database named by the statement
    sources: list[Source] = field(default_factory=list)
    where: Cond | None = None
    limit: int = 0
    offset: int = 0
    key_op: str | None = None  # SHOW TAG VALUES WITH KEY
    key_value: Any = None
    measurement_filter: Source | None = None  # SHOW MEASUREMENTS WITH MEASUREMENT
    options: dict[str, Any] = field(default_factory=dict)  # CREATE DATABASE ... WITH
    writes: bool = False


# Statement kinds InfluxQL has beyond the ones answered: parsed by their leading keywords, answered
# with an error (InfluxDB's parser would accept them).
MAX_NESTING = 100  # parentheses in a condition (the parser recurses on them)
_UNSUPPORTED_STARTS = ("SELECT", "DELETE", "ALTER", "GRANT", "REVOKE", "KILL", "SET", "EXPLAIN")


class Parser:
    def __init__(self, text: str, params: dict[str, Any] | None = None) -> None:
        self.s = Scanner(text, params)
        self.buf: list[Token] = []
        self.last_end = 0  # end of the last token consumed
        self.depth = 0  # open parentheses of a WHERE condition

    # -- token plumbing
    def next(self) -> Token:
        tok = self.buf.pop() if self.buf else self.s.scan()
        self.last_end = max(self.last_end, tok.end)
        return tok

    def peek(self) -> Token:
        if not self.buf:
            self.buf.append(self.s.scan())
        return self.buf[-1]

    def unscan(self, tok: Token) -> None:
        self.buf.append(tok)

    def fail(self, tok: Token, expected: str) -> ParseError:
        found = "EOF" if tok.kind == EOF else (tok.text or str(tok.value))
        return self.s.error(f"found {found}, expected {expected}", tok.pos)

    def keyword(self, *words: str) -> str:
        tok = self.next()
        if tok.keyword not in words:
            raise self.fail(tok, ", ".join(words))
        return tok.keyword

    def accept(self, *words: str) -> str | None:
        tok = self.peek()
        if tok.kind == IDENT and tok.keyword in words:
            self.next()
            return tok.keyword
        return None

    def accept_op(self, *ops: str) -> str | None:
        tok = self.peek()
        if tok.kind == OP and tok.value in ops:
            self.next()
            return tok.value
        return None

    def ident(self, what: str = "identifier") -> str:
        tok = self.next()
        # Keywords may be used as identifiers only when quoted (InfluxQL's rule).
        if tok.kind == IDENT and (tok.keyword is None or tok.text.startswith('"')):
            return tok.value
        if tok.kind == BOUND and isinstance(tok.value, str):
            return tok.value
        raise self.fail(tok, what)

    def integer(self) -> int:
        tok = self.next()
        if tok.kind == INTEGER or (tok.kind == BOUND and isinstance(tok.value, int)):
            return int(tok.value)
        raise self.fail(tok, "integer")

    # -- statements
    def parse(self) -> list[Statement]:
        out: list[Statement] = []
        while True:
            while self.accept_op(";"):
                pass
            if self.peek().kind == EOF:
                return out
            start = self.peek().pos
            st = self.statement()
            end = self.peek()
            if end.kind == EOF or (end.kind == OP and end.value == ";"):
                st.text = self.s.text[start : self.last_end].strip()
                out.append(st)
                continue
            raise self.fail(end, ";")

    def statement(self) -> Statement:
        tok = self.next()
        kw = tok.keyword if tok.kind == IDENT else None
        if kw == "SHOW":
            return self.show()
        if kw == "CREATE":
            if self.accept("DATABASE"):
                return self.create_database()
            if self.accept("RETENTION"):
                return self.retention_policy("create retention policy")
            return self.unsupported(tok, "CREATE " + self._word())
        if kw == "ALTER" and self.accept("RETENTION"):
            return self.retention_policy("alter retention policy")
        if kw == "DROP":
            if self.accept("DATABASE"):
                return Statement("drop database", "", database=self.ident("database name"), writes=True)
            if self.accept("RETENTION"):
                return self.retention_policy("drop retention policy")
            return self.unsupported(tok, "DROP " + self._word())
        if kw == "SELECT":
            sel = SelectParser(self).select()
            if sel.tz is not None:
                from .influxql_sql import QueryError, zone_name

                try:
                    zone_name(sel.tz)
                except QueryError as e:  # (InfluxDB: a parse error, nothing runs)
                    raise ParseError(str(e)) from None
            return Statement("select", "", options={"select": sel})
        if kw in _UNSUPPORTED_STARTS:
            return self.unsupported(tok, kw)
        raise self.fail(tok, "SELECT, DELETE, SHOW, CREATE, DROP, EXPLAIN, GRANT, REVOKE, ALTER, SET, KILL")

    def _word(self) -> str:
        tok = self.peek()
        return (tok.keyword or "") if tok.kind == IDENT else ""

    def unsupported(self, first: Token, what: str) -> Statement:
        # Skip to the end of the statement: the tokens still have to make sense (strings closed).
        while True:
            tok = self.peek()
            if tok.kind == EOF or (tok.kind == OP and tok.value == ";"):
                break
            self.next()
        return Statement("unsupported", "", options={"what": what.strip()})

    def on(self, st: Statement) -> None:
        if self.accept("ON"):
            st.database = self.ident("database name")

    def show(self) -> Statement:
        tok = self.next()
        kw = tok.keyword if tok.kind == IDENT else None
        if kw == "DATABASES":
            return Statement("show databases", "")
        if kw == "RETENTION":
            self.keyword("POLICIES")
            st = Statement("show retention policies", "")
            self.on(st)
            return st
        if kw == "MEASUREMENTS":
            st = Statement("show measurements", "")
            self.on(st)
            if self.accept("WITH"):
                self.keyword("MEASUREMENT")
                op = self.accept_op("=", "=~")
                if op is None:
                    raise self.fail(self.peek(), "= or =~")
                st.measurement_filter = self.regex_source() if op == "=~" else Source(name=self.ident("measurement"))
            self.where_limit(st)
            return st
        if kw == "FIELD":
            self.keyword("KEYS")
            st = Statement("show field keys", "")
            self.on(st)
            self.from_(st)
            self.limit_offset(st)
            return st
        if kw == "TAG":
            which = self.keyword("KEYS", "VALUES")
            st = Statement("show tag keys" if which == "KEYS" else "show tag values", "")
            self.on(st)
            self.from_(st)
            if which == "VALUES":
                self.keyword("WITH")
                self.keyword("KEY")
                op = self.accept_op("=", "!=", "<>", "=~", "!~")
                if op is None and self.accept("IN"):
                    op = "in"
                if op is None:
                    raise self.fail(self.peek(), "=, !=, =~, !~ or IN")
                st.key_op = "!=" if op == "<>" else op
                if op in ("=~", "!~"):
                    st.key_value = self.regex()
                elif op == "in":
                    if not self.accept_op("("):
                        raise self.fail(self.peek(), "(")
                    keys = [self.ident("tag key")]
                    while self.accept_op(","):
                        keys.append(self.ident("tag key"))
                    if not self.accept_op(")"):
                        raise self.fail(self.peek(), ")")
                    st.key_value = keys
                else:
                    st.key_value = self.ident("tag key")
            self.where_limit(st)
            return st
        if kw == "SERIES":
            if self.peek().keyword in ("CARDINALITY", "EXACT"):
                return self.unsupported(tok, "SHOW SERIES CARDINALITY")
            st = Statement("show series", "")
            self.on(st)
            self.from_(st)
            self.where_limit(st)
            return st
        if kw is not None:
            return self.unsupported(tok, "SHOW " + kw)
        raise self.fail(tok, "DATABASES, MEASUREMENTS, FIELD KEYS, TAG KEYS, TAG VALUES, SERIES, RETENTION POLICIES")

    def retention_policy(self, kind: str) -> Statement:
        """[CREATE|ALTER|DROP] RETENTION POLICY name ON db [DURATION d] [REPLICATION n]
        [SHARD DURATION d] [DEFAULT] (RETENTION consumed); CREATE needs DURATION and REPLICATION."""
        self.keyword("POLICY")
        st = Statement(kind, "", writes=True)
        st.options["rp_name"] = self.ident("retention policy name")
        self.keyword("ON")
        st.database = self.ident("database name")
        if kind == "drop retention policy":
            return st
        seen = set()
        while True:
            if self.accept("DURATION"):
                st.options["duration"] = self._duration_value()
                seen.add("duration")
            elif self.accept("REPLICATION"):
                n = self.integer()
                if n < 1:
                    raise self.s.error(f"invalid value {n}: must be 1 <= n <= 2147483647", self.last_end)
                st.options["replication"] = n
                seen.add("replication")
            elif self.accept("SHARD"):
                self.keyword("DURATION")
                st.options["shard_duration"] = self._duration_value()
            elif self.accept("DEFAULT"):
                st.options["default"] = True
            else:
                break
        if kind == "create retention policy":
            for need in ("DURATION", "REPLICATION"):
                if need.lower() not in seen:
                    raise self.fail(self.peek(), need)
        elif not seen and not st.options.get("default") and "shard_duration" not in st.options:
            raise self.fail(self.peek(), "DURATION, REPLICATION, SHARD, DEFAULT")
        return st

    def _duration_value(self) -> int:
        tok = self.next()
        if tok.kind == DURATION or (tok.kind == INTEGER and tok.value == 0):
            return tok.value
        if tok.keyword == "INF":
            return 0
        raise self.fail(tok, "duration")

    def create_database(self) -> Statement:
        st = Statement("create database", "", database=self.ident("database name"), writes=True)
        if self.accept("WITH"):
            seen = False
            while True:
                if self.accept("DURATION"):
                    st.options["duration"] = self._duration_value()
                elif self.accept("REPLICATION"):
                    n = self.integer()
                    if n < 1:
                        raise self.s.error(f"invalid value {n}: must be 1 <= n <= 2147483647", self.peek().pos)
                    st.options["replication"] = n
                elif self.accept("SHARD"):
                    self.keyword("DURATION")
                    tok = self.next()
                    if tok.kind not in (DURATION, INTEGER):
                        raise self.fail(tok, "duration")
                    st.options["shard_duration"] = tok.value
                elif self.accept("NAME"):
                    st.options["rp_name"] = self.ident("retention policy name")
                else:
                    if not seen:
                        raise self.fail(self.peek(), "DURATION, REPLICATION, SHARD, NAME")
                    break
                seen = True
        return st

    def from_(self, st: Statement) -> None:
        if not self.accept("FROM"):
            return
        st.sources.append(self.source())
        while self.accept_op(","):
            st.sources.append(self.source())

    def source(self) -> Source:
        tok = self.peek()
        if tok.kind == OP and tok.value == "/":
            return self.regex_source()
        # m | rp.m | db.rp.m | db..m (each part an identifier; the last may be a regex)
        parts: list[str] = [self.ident("measurement")]
        while self.accept_op("."):
            tok = self.peek()
            if tok.kind == OP and tok.value == ".":  # db..m: the default retention policy
                parts.append("")
                continue
            if tok.kind == OP and tok.value == "/":
                if len(parts) > 2:
                    raise self.fail(tok, "measurement")
                src = self.regex_source()
                src.database = parts[0] if len(parts) == 2 else None
                return src
            parts.append(self.ident("measurement"))
        if len(parts) > 3:
            raise self.fail(self.peek(), "measurement, rp.measurement or db.rp.measurement")
        return Source(name=parts[-1], database=parts[0] if len(parts) == 3 else None)

    def regex(self) -> re.Pattern:
        tok = self.next()
        if tok.kind == OP and tok.value == "/":
            rx = self.s.scan_regex(tok)
            self.last_end = rx.end
            return rx.value
        raise self.fail(tok, "regex")

    def regex_source(self) -> Source:
        return Source(regex=self.regex())

    def where_limit(self, st: Statement) -> None:
        if self.accept("WHERE"):
            st.where = Cond(self.expr())
        self.limit_offset(st)

    def limit_offset(self, st: Statement) -> None:
        while True:
            kw = self.accept("LIMIT", "OFFSET", "SLIMIT", "SOFFSET")
            if kw is None:
                return
            n = self.integer()
            if kw == "LIMIT":
                st.limit = n
            elif kw == "OFFSET":
                st.offset = n
            # SLIMIT/SOFFSET (series limits) are accepted; meta answers are one series per measurement

    # -- conditions: or_expr := and_expr (OR and_expr)*; and_expr := term (AND term)*
    def expr(self) -> tuple:
        left = self.and_expr()
        while self.accept("OR"):
            left = ("or", left, self.and_expr())
        return left

    def and_expr(self) -> tuple:
        left = self.term()
        while self.accept("AND"):
            left = ("and", left, self.term())
        return left

    def term(self) -> tuple:
        if self.accept_op("("):
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise self.s.error(f"conditions nested deeper than {MAX_NESTING} parentheses", self.last_end)
            e = self.expr()
            if not self.accept_op(")"):
                raise self.fail(self.peek(), ")")
            self.depth -= 1
            return e
        key_tok = self.peek()
        key = self.ident("tag key")
        op = self.accept_op("=", "!=", "<>", "=~", "!~", "<", "<=", ">", ">=")
        if op is None:
            raise self.fail(self.peek(), "=, !=, =~, !~")
        if key.lower() == "time":
            self._skip_value()
            return ("time",)
        if op in ("=~", "!~"):
            return ("cmp", key, op, self.regex())
        tok = self.next()
        if tok.kind == STRING or (tok.kind == BOUND and isinstance(tok.value, str)):
            value = tok.value
        elif tok.kind in (INTEGER, NUMBER) or tok.kind == BOUND:
            value = str(tok.value)
        else:
            raise self.fail(tok, "string")
        if op not in ("=", "!=", "<>"):
            raise self.s.error(f"tag {key!r} compared with {op}: tags are compared with =, !=, =~ or !~", key_tok.pos)
        return ("cmp", key, "!=" if op == "<>" else op, value)

    def _skip_value(self) -> None:
        # A time expression (now() - 1h, '2020-01-01T00:00:00Z', 1600000000000000000): skipped,
        # balanced parentheses, up to the next AND/OR/)/;/LIMIT.
        depth = 0
        while True:
            tok = self.peek()
            if tok.kind == EOF or (tok.kind == OP and tok.value == ";"):
                return
            if depth == 0 and (
                tok.keyword in ("AND", "OR", "LIMIT", "OFFSET", "SLIMIT", "SOFFSET")
                or (tok.kind == OP and tok.value == ")")
            ):
                return
            self.next()
            if tok.kind == OP and tok.value == "(":
                depth += 1
            elif tok.kind == OP and tok.value == ")":
                depth -= 1


def parse(text: str, params: dict[str, Any] | None = None) -> list[Statement]:
    """The statements of `text`; ParseError names the line and character of the first mistake."""
    return Parser(text, params).parse()


PARSED_KEPT = 256  # request texts whose parsed SELECTs are kept (all let go when full)
PARSED_TEXT_MAX = 4096  # characters of a text kept at most (a longer one is parsed each time)
_PARSED: dict[str, list[Statement]] = {}


def parse_kept(text: str, params: dict[str, Any] | None = None) -> list[Statement]:
    """`parse`, with the statements of a text of SELECTs only (no bound parameters) kept by the
    text: a dashboard or a benchmark sends the same texts again and again, and nothing executes
    a SELECT by changing its statement (the statements are read, never written, past the
    parser). Their answers are not kept: each runs again. In-process, TSBS lastpoint's text
    parsed in 34 us and high-cpu-1's in 65 us (load ~5); a kept one is a dict look-up."""
    if params or len(text) > PARSED_TEXT_MAX:
        return parse(text, params)
    got = _PARSED.get(text)
    if got is None:
        got = parse(text)
        if got and all(st.kind == "select" for st in got):
            if len(_PARSED) >= PARSED_KEPT:
                _PARSED.clear()
                _LAST_RUNS.clear()
            _PARSED[text] = got
    return got


# -- execution ------------------------------------------------------------------------------

FIELD_TYPES = {"float64": "float", "int64": "integer", "int32": "integer", "string": "string", "bool": "boolean"}
COMMON_COLUMNS = ("ts", "producer", "seq", "dur")
NOT_EXECUTED = "not executed"
RP_META = "retention_policy"  # trace metadata: the name of its one retention policy (default autogen)
SHARD_META = "shard_duration"  # trace metadata: a SHARD DURATION given (shown, not used: segments are not shards)


class StatementError(Exception):
    pass


def measurement_types(types: dict) -> dict[str, str]:
    """Measurement name -> its event type (`cpu.load` is stored as the type `cpu_load`)."""
    return {et.key or name: name for name, et in types.items()}


def field_keys(et) -> dict:
    """The fields of a measurement by their key (the column's `key`, or its name), without the
    common columns and without a field called `time`, which InfluxQL cannot name (InfluxDB
    refuses to store one; a line-protocol write here keeps it, for SQL)."""
    out = {}
    for c in et.columns:
        if c.name not in COMMON_COLUMNS and (c.key or c.name) != "time":
            out[c.key or c.name] = c
    return out


# store -> {database or ("keys", database): what `_source_facts` / `_measurement_tag_keys` keep}
_SOURCE_FACTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class SourceFacts:
    """What a SELECT reads of a database before it runs, as of one catalog version."""

    version: int  # the catalog's version these were read at (or after)
    info: Any  # its TraceInfo
    types: dict  # its event types (this process's writer's, when it holds the trace)
    tag_keys: dict[str, str]  # the tag keys its views carry, with their DuckDB types
    kept: set[str]  # the types whose last rows are kept (store/lastrows.py: lastpoint reads them)
    writer_types: dict | None  # the writer's types as they were read (None: no writer)
    # a kept statement's measurement (by its id, and whether `*` is named) -> (it, its Sources):
    # what `_select`'s `sources_of` made of these facts (in-process, medians at load 19: TSBS
    # lastpoint 226 -> 198 us a statement, high-cpu-1 142 -> 128)
    sources: dict = field(default_factory=dict, compare=False)
    # a kept statement's plan over one of its Sources (influxql_native.py `_Plan`)
    plans: dict = field(default_factory=dict, compare=False)


FACTS_SOURCES = 256  # measurements' Sources kept per SourceFacts (all let go when full)


def _source_facts(store, db: str, version: int) -> SourceFacts:
    """A database's trace, event types, tag keys and types with kept last rows, kept while the
    catalog's version stays at `version` (read by the caller before this: producers, segments
    and types change only in a catalog transaction, which bumps it, so what is kept is never
    older than its key) and while this process's writer of the trace holds the same event type
    objects (`Store.writer_event_types`: `add_event_type` bumps the version before it puts the
    new type in the writer, so the version alone could keep the old one). Asked of the catalog
    and the store's views each time, a SELECT read the trace twice and the version three times
    (TSBS lastpoint served, load 4-6: ~100 us of the statement before its columns are looked at)."""
    facts = _SOURCE_FACTS.setdefault(store, {})
    got = facts.get(db)
    if got is not None and got.version == version:
        live = store.writer_event_types(got.info.id)
        was = got.writer_types
        if live is None and was is None:
            return got
        same = live is not None and was is not None and len(live) == len(was)
        if same and all(live.get(k) is v for k, v in was.items()):
            return got
    info = store.catalog.trace(db)
    live = store.writer_event_types(info.id)
    was = dict(live) if live is not None else None
    types = dict(was) if was is not None else store.catalog.trace_types(info)
    got = facts[db] = SourceFacts(version, info, types, store.tag_keys(db), store.last_row_types(db), was)
    return got


def _series_page(series: list[dict], sel) -> list[dict] | None:
    """A SELECT's series after its SOFFSET and SLIMIT (None: no series)."""
    if sel.soffset:
        series = series[sel.soffset :]
    if sel.slimit:
        series = series[: sel.slimit]
    return series or None


def _has_wildcard(sel) -> bool:
    """Whether a SELECT (or its subquery) names `*` in its fields or GROUP BY."""
    if any(d.kind in ("wildcard", "regex") for d in sel.dimensions):
        return True
    if any(isinstance(f.expr, Wildcard) for f in sel.fields):
        return True
    return any(isinstance(s, Subquery) and _has_wildcard(s.select) for s in sel.sources)


def _measurement_tag_keys(store, db: str, kept: set[str], version: int) -> dict[str, set[str]]:
    """The tag keys of each measurement's series, for the types whose last rows are kept (one
    row per series: their producers, whose tags are the keys), kept while the catalog's version
    stays. InfluxDB's `GROUP BY *` and `SELECT *` take a measurement's own keys; a bucket's
    other keys are not its tags. Types without kept rows are left out (their views' keys stand).
    `version`: the catalog's version, read by the caller before this."""
    facts = _SOURCE_FACTS.setdefault(store, {})
    got = facts.get(("keys", db))
    if got is None or got[0] != version:
        from ..store.query import qident, qstr

        keys: dict[str, set[str]] = {}
        if kept:
            sql = "\nUNION ALL\n".join(
                f"SELECT DISTINCT {qstr(t)} AS t, producer FROM {qident(db)}.{qident(t + '_last')}"
                for t in sorted(kept)
            )
            rows = store.sql(sql)
            attrs = {int(p["id"]): (p["attrs"] or {}) for p in store.producers(db)}
            keys = {t: set() for t in kept}
            for t, pid in zip(rows.column("t").to_pylist(), rows.column("producer").to_pylist()):
                keys[t].update(str(k) for k in attrs.get(pid, {}))
        got = facts[("keys", db)] = (version, keys)
    return got[1]


def _escape_key(s: str, chars: str) -> str:
    for c in "\\" + chars:
        s = s.replace(c, "\\" + c)
    return s


class Executor:
    """Runs parsed statements against the server's store and ingestor.

    `ingestor` gives `store` (catalog, SQL), `trace(name, create=True)` and `drop_trace(name)`.
    """

    def __init__(
        self,
        ingestor,
        *,
        default_db: str | None = None,
        peer: str = "",
        read_only: bool = False,
        epoch: str | None = None,
        run_sql: Callable | None = None,
        native: bool = True,
        raw_json: bool = False,
        inline: tuple | None = None,
    ) -> None:
        self.ingestor = ingestor
        # on the dispatcher (`handle`): the columns' views of the text's last run, which this one
        # must find again, else it is handed to the query workers (`Handoff`)
        self.inline = inline
        self.views: list = []  # the columns' views the native SELECTs read (`handle` keeps them)
        self.native = native  # SELECTs of the native shapes answered without DuckDB (influxql_native.py)
        self.raw_json = raw_json  # their series as JSON text (jsonvalues.RawSeries) for `answer`
        # "native" when every SELECT was answered without DuckDB, "duckdb" once one was not ("": none
        # ran): the answer's X-Tracehouse-Engine header
        self.engine = ""
        self.store = ingestor.store
        self.default_db = default_db or None
        self.peer = peer
        self.read_only = read_only  # a GET: write statements run, with InfluxDB's deprecation warning
        self.epoch = epoch  # SELECT's times: RFC 3339 (None) or integers in this unit
        self.run_sql = run_sql or self.store.sql  # the server's query workers' deadline and answer cap
        self._series: dict[str, list[tuple[str, dict[str, str]]]] = {}

    def run(self, statements: list[Statement]) -> list[dict]:
        results = []
        failed = False
        for i, st in enumerate(statements):
            if failed:
                results.append({"statement_id": i, "error": NOT_EXECUTED})
                continue
            messages: list[dict] = []
            try:
                series = self.execute(st, messages)
            except StatementError as e:
                results.append({"statement_id": i, "error": str(e)})
                failed = True
                continue
            except (BadInput, NotFound, AlreadyExists, QueryStopped) as e:  # QueryStopped: deadline, answer cap
                results.append({"statement_id": i, "error": str(e)})
                failed = True
                continue
            res: dict[str, Any] = {"statement_id": i}
            if series is not None:
                res["series"] = series
            if st.writes and self.read_only:
                messages.insert(
                    0,
                    {
                        "level": "warning",
                        "text": f"deprecated use of '{st.text}' in a read only "
                        "context, please use a POST request instead",
                    },
                )
            if messages:
                res["messages"] = messages
            results.append(res)
        return results

    def execute(self, st: Statement, messages: list[dict]) -> list[dict] | None:
        handler: Callable = getattr(self, "_" + st.kind.replace(" ", "_"))
        return handler(st, messages)

    # -- databases
    def _db(self, st: Statement, *, must_exist: bool = True) -> str:
        db = st.database or self.default_db
        if not db:
            raise StatementError("database name required")
        if must_exist:
            try:
                self.store.trace(db)
            except NotFound:
                raise StatementError(f"database not found: {db}") from None
        return db

    def _show_databases(self, st: Statement, messages) -> list[dict]:
        row: dict[str, Any] = {"name": "databases", "columns": ["name"]}
        names = [t.name for t in self.store.traces()]
        if names:
            row["values"] = [[n] for n in names]
        return [row]

    def _create_database(self, st: Statement, messages) -> None:
        name = st.database
        if st.options.get("replication", 1) > 1:
            messages.append(
                {
                    "level": "warning",
                    "text": "REPLICATION above 1 is not applied: tracehouse is one "
                    "node (each write is durable on its disk before 204)",
                }
            )
        wants_policy = "duration" in st.options or "rp_name" in st.options
        if wants_policy:
            try:
                current, dur, _meta = self._policy(name)
            except NotFound:
                pass
            else:  # InfluxDB: an existing database's policy is not changed by CREATE DATABASE
                if st.options.get("rp_name", current) != current or st.options.get("duration", dur) != dur:
                    raise StatementError("retention policy conflicts with an existing policy")
                return None
        try:
            self.ingestor.trace(name, create=True)
        except BadInput as e:
            raise StatementError(f"invalid name: {e}") from None
        if wants_policy:
            self._set_policy(name, st.options.get("rp_name"), st.options.get("duration"), st.options)
        return None

    # -- retention: one policy per database, applied to whole segments (store/compact.py)
    def _policy(self, db: str) -> tuple[str, int, dict]:
        info = self.store.trace(db)
        return info.metadata.get(RP_META, "autogen"), self.store.retention(db), info.metadata

    def _set_policy(self, db: str, rp: str | None, duration: int | None, options: dict) -> None:
        meta = {RP_META: rp} if rp else {}
        if "shard_duration" in options:
            meta[SHARD_META] = str(options["shard_duration"])
        if meta:
            self.store.set_metadata(db, meta)
        if duration is not None:
            dropped = self.store.set_retention(db, duration)
            if dropped:
                log.warning(
                    "retention of %s set to %s by %s: %d segments dropped",
                    db,
                    format_duration(duration),
                    self.peer,
                    dropped,
                )

    def _create_retention_policy(self, st: Statement, messages) -> None:
        db = self._db(st)
        rp = st.options["rp_name"]
        current, dur, _meta = self._policy(db)
        if current == rp:  # InfluxDB: the same policy again is nothing, a different one an error
            if st.options["duration"] != dur:
                raise StatementError("retention policy already exists")
            return None
        if not st.options.get("default"):
            # In InfluxDB a policy that is not the default holds only the writes that name it: the
            # database's rows keep their own. Applied here, its duration would delete them.
            messages.append(
                {
                    "level": "warning",
                    "text": f"retention policy {rp!r} is not applied: tracehouse keeps one retention policy per "
                    f"database, {current!r} on {db!r}, and writes naming {rp!r} are kept under it; "
                    f"CREATE RETENTION POLICY ... DEFAULT or ALTER RETENTION POLICY {current} sets it",
                }
            )
            return None
        if current != rp:
            messages.append(
                {
                    "level": "warning",
                    "text": f"tracehouse keeps one retention policy per database: "
                    f"{rp!r} replaces {current!r} on {db!r}",
                }
            )
        if st.options.get("replication", 1) > 1:
            messages.append({"level": "warning", "text": "REPLICATION above 1 is not applied: tracehouse is one node"})
        self._set_policy(db, rp, st.options["duration"], st.options)
        return None

    def _alter_retention_policy(self, st: Statement, messages) -> None:
        db = self._db(st)
        current, _dur, _meta = self._policy(db)
        if current != st.options["rp_name"]:
            raise StatementError(f"retention policy not found: {st.options['rp_name']}")
        self._set_policy(db, None, st.options.get("duration"), st.options)
        return None

    def _drop_retention_policy(self, st: Statement, messages) -> None:
        db = self._db(st)
        current, _dur, _meta = self._policy(db)
        if current != st.options["rp_name"]:
            return None  # InfluxDB: dropping a policy that does not exist is not an error
        raise StatementError(
            f"retention policy {current!r} is not dropped: tracehouse deletes rows only by a "
            f"retention's duration, never a whole policy's data; keep every row with ALTER RETENTION "
            f"POLICY {current} ON {db} DURATION INF, or remove the database"
        )

    def _drop_database(self, st: Statement, messages) -> None:
        name = st.database
        try:
            info = self.store.trace(name)
        except NotFound:
            return None  # InfluxDB: dropping a database that does not exist is not an error
        if info.metadata.get("source") != SOURCE:
            raise StatementError(
                f"database {name!r} is a trace imported from a file (format {info.format}), not one an InfluxDB "
                f"client created; it is not dropped over HTTP: remove it with `tracehouse rm {name}`"
            )
        log.warning("DROP DATABASE %s from %s: trace removed", name, self.peer)
        self.ingestor.drop_trace(name)
        return None

    def _show_retention_policies(self, st: Statement, messages) -> list[dict]:
        db = self._db(st)
        name, dur, meta = self._policy(db)
        try:
            shard = int(meta.get(SHARD_META) or 0)
        except ValueError:
            shard = 0
        if not shard:  # InfluxDB's normalised shard group duration for a policy's duration
            shard = (
                7 * 86400 if dur == 0 or dur >= 180 * 86400 * 10**9 else 86400 if dur >= 2 * 86400 * 10**9 else 3600
            ) * 10**9
        return [
            {
                "columns": ["name", "duration", "shardGroupDuration", "replicaN", "default"],
                "values": [[name, format_duration(dur), format_duration(shard), 1, True]],
            }
        ]

    # -- measurements, fields, tags
    def _measurement_types(self, db: str) -> dict[str, str]:
        return measurement_types(self.store.event_types(db))

    def _measurements(self, db: str, sources: list[Source]) -> list[str]:
        names = sorted(self._measurement_types(db))
        if sources:
            names = [m for m in names if any(s.matches(m) for s in sources)]
        return names

    def _sources_db(self, st: Statement) -> str:
        dbs = {s.database for s in st.sources if s.database}
        if len(dbs) > 1:
            raise StatementError("FROM names measurements of several databases: name one")
        if dbs and not st.database:
            st.database = dbs.pop()
        return self._db(st)

    def _series_of(self, db: str) -> list[tuple[str, dict[str, str]]]:
        """(measurement, tags) of every series of `db`: one DISTINCT query over the trace."""
        got = self._series.get(db)
        if got is not None:
            return got
        from ..store.query import qident, qstr

        types = sorted(self._measurement_types(db).items())
        pairs: list[tuple[str, int]] = []
        if types:
            sql = "\nUNION ALL\n".join(
                f"SELECT DISTINCT {qstr(m)} AS m, producer FROM {qident(db)}.{qident(t)}" for m, t in types
            )
            t = self.store.sql(sql)
            pairs = list(zip(t.column("m").to_pylist(), t.column("producer").to_pylist()))
        tags = {int(p["id"]): {str(k): str(v) for k, v in (p["attrs"] or {}).items()} for p in self.store.producers(db)}
        got = [(m, tags.get(pid, {})) for m, pid in pairs if pid is not None]
        self._series[db] = got
        return got

    def _where(self, st: Statement, messages: list[dict]) -> Callable[[dict[str, str]], bool]:
        if st.where is None:
            return lambda tags: True
        noted = []

        def ev(node: tuple, tags: dict[str, str]) -> bool:
            if node[0] == "and":
                return ev(node[1], tags) and ev(node[2], tags)
            if node[0] == "or":
                return ev(node[1], tags) or ev(node[2], tags)
            if node[0] == "time":
                return True
            _c, key, op, value = node
            have = tags.get(key, "")
            if op == "=":
                return have == value
            if op == "!=":
                return have != value
            if op == "=~":
                return value.search(have) is not None
            return value.search(have) is None

        def has_time(node: tuple) -> bool:
            return node[0] == "time" or (node[0] in ("and", "or") and (has_time(node[1]) or has_time(node[2])))

        if has_time(st.where.node) and not noted:
            messages.append(
                {
                    "level": "warning",
                    "text": "time conditions are not applied to SHOW statements: "
                    "every series of the database is listed",
                }
            )
            noted.append(True)
        return lambda tags: ev(st.where.node, tags)

    @staticmethod
    def _page(items: list, st: Statement) -> list:
        if st.offset:
            items = items[st.offset :]
        if st.limit:
            items = items[: st.limit]
        return items

    def _show_measurements(self, st: Statement, messages) -> list[dict] | None:
        db = self._db(st)
        names = self._measurements(db, [st.measurement_filter] if st.measurement_filter else [])
        if st.where is not None:
            keep = self._where(st, messages)
            with_series = {m for m, tags in self._series_of(db) if keep(tags)}
            names = [m for m in names if m in with_series]
        names = self._page(names, st)
        if not names:
            return None
        return [{"name": "measurements", "columns": ["name"], "values": [[m] for m in names]}]

    def _show_field_keys(self, st: Statement, messages) -> list[dict] | None:
        db = self._sources_db(st)
        types = self.store.event_types(db)
        type_of = self._measurement_types(db)
        out = []
        for m in self._measurements(db, st.sources):
            keys = sorted(
                [k, FIELD_TYPES.get(c.type, c.type)] for k, c in field_keys(types[type_of[m]]).items()
            )  # by name, as InfluxDB lists them
            keys = self._page(keys, st)
            if keys:
                out.append({"name": m, "columns": ["fieldKey", "fieldType"], "values": keys})
        return out or None

    def _show_tag_keys(self, st: Statement, messages) -> list[dict] | None:
        db = self._sources_db(st)
        wanted = set(self._measurements(db, st.sources))
        keep = self._where(st, messages)
        keys: dict[str, set[str]] = {}
        for m, tags in self._series_of(db):
            if m in wanted and keep(tags):
                keys.setdefault(m, set()).update(tags)
        out = []
        for m in sorted(keys):
            ks = self._page(sorted(keys[m]), st)
            if ks:
                out.append({"name": m, "columns": ["tagKey"], "values": [[k] for k in ks]})
        return out or None

    def _show_tag_values(self, st: Statement, messages) -> list[dict] | None:
        db = self._sources_db(st)
        wanted = set(self._measurements(db, st.sources))
        keep = self._where(st, messages)
        op, kv = st.key_op, st.key_value

        def key_ok(k: str) -> bool:
            if op == "=":
                return k == kv
            if op == "!=":
                return k != kv
            if op == "in":
                return k in kv
            if op == "=~":
                return kv.search(k) is not None
            return kv.search(k) is None

        values: dict[str, set[tuple[str, str]]] = {}
        for m, tags in self._series_of(db):
            if m in wanted and keep(tags):
                for k, v in tags.items():
                    if key_ok(k):
                        values.setdefault(m, set()).add((k, v))
        out = []
        for m in sorted(values):
            vs = self._page(sorted(values[m]), st)
            if vs:
                out.append({"name": m, "columns": ["key", "value"], "values": [list(v) for v in vs]})
        return out or None

    def _show_series(self, st: Statement, messages) -> list[dict] | None:
        db = self._sources_db(st)
        wanted = set(self._measurements(db, st.sources))
        keep = self._where(st, messages)
        keys = sorted(
            {
                ",".join(
                    [_escape_key(m, ", ")]
                    + [f"{_escape_key(k, ', =')}={_escape_key(v, ', =')}" for k, v in sorted(tags.items())]
                )
                for m, tags in self._series_of(db)
                if m in wanted and keep(tags)
            }
        )
        keys = self._page(keys, st)
        if not keys:
            return None
        return [{"columns": ["key"], "values": [[k] for k in keys]}]

    # -- SELECT (influxql_select.py parses it, influxql_sql.py translates it to SQL over the views)
    def _select(self, st: Statement, messages) -> list[dict] | None:
        from .influxql_sql import QueryError, Source, answer_series, plan_table, translate, zone_name

        sel = st.options["select"]

        wildcard = _has_wildcard(sel)
        # (read once for the statement, first: what `facts` keeps is never older than it)
        version = self.store.catalog.version_held()

        def facts(db: str) -> SourceFacts:
            try:
                return _source_facts(self.store, db, version)
            except NotFound:
                raise StatementError(f"database not found: {db}") from None

        def sources_of(m) -> list[Source]:
            db = m.database or self.default_db
            if not db:
                raise StatementError("database name required")
            f = facts(db)
            got = f.sources.get((id(m), wildcard))
            if got is not None and got[0] is m:  # (m kept beside its id: the id names no other)
                return list(got[1])
            types = f.types
            names = [(k, n) for k, n in sorted(measurement_types(types).items()) if m.matches(k)]
            if not names:
                return []
            keys, kept = f.tag_keys, f.kept
            own = _measurement_tag_keys(self.store, db, kept, version) if wildcard else {}
            out = []
            for key, name in names:
                et = types[name]
                fields = {k: (c.name, c.type) for k, c in field_keys(et).items()}
                tags = {k: col for k, col in tag_column_names(et, keys).items() if k != "time"}
                if name in own:  # (`*` reads the measurement's own tag keys, as InfluxDB's index has them)
                    tags = {k: col for k, col in tags.items() if k in own[name]}
                last = f"{qident(db)}.{qident(name + '_last')}" if name in kept else None
                out.append(
                    Source(
                        key,
                        f"{qident(db)}.{qident(name)}",
                        fields,
                        tags,
                        tiebreak=("producer", "seq"),
                        last=last,
                        db=db,
                        type_name=name,
                    )
                )
            if len(f.sources) >= FACTS_SOURCES:
                f.sources.clear()
            f.sources[(id(m), wildcard)] = (m, out)
            return list(out)

        now = time.time_ns()
        if self.native and not any(isinstance(m, Subquery) for m in sel.sources):
            # the shapes answered without DuckDB (influxql_native.py), else the SQL below
            from . import influxql_native

            try:
                series = influxql_native.select(
                    self.store,
                    sel,
                    [s for m in sel.sources for s in sources_of(m)],
                    now,
                    self.epoch,
                    facts,
                    raw_json=self.raw_json,
                    views=(self.views, self.inline),
                )
            except influxql_native.Unsupported:
                if self.inline is not None:
                    raise Handoff from None
                pass
            except (StatementError, QueryError):
                raise
            except Exception:  # noqa: BLE001 - DuckDB answers it; the failure is logged to be fixed
                if self.inline is not None:
                    raise Handoff from None
                log.exception("native InfluxQL executor failed on %r; DuckDB answers it", sel)
            else:
                self.engine = self.engine or "native"
                return _series_page(series, sel)
        if self.inline is not None:
            raise Handoff
        self.engine = "duckdb"
        try:
            plans = translate(sel, sources_of, now)
            series: list[dict] = []
            for plan in plans:
                series += answer_series(plan, plan_table(plan, self.run_sql), self.epoch, tz=zone_name(sel.tz))
        except QueryError as e:
            raise StatementError(str(e)) from None
        return _series_page(series, sel)

    def _unsupported(self, st: Statement, messages) -> None:
        what = st.options.get("what", "this statement")
        if what == "SELECT":
            raise StatementError(
                "SELECT over InfluxQL is not supported by tracehouse (it answers the meta statements: SHOW DATABASES, "
                "MEASUREMENTS, FIELD KEYS, TAG KEYS, TAG VALUES, SERIES, RETENTION POLICIES, CREATE/DROP DATABASE); "
                'query the data with SQL: POST /api/query {"sql": "SELECT ... FROM \\"<database>\\".<measurement>"}'
            )
        raise StatementError(
            f"{what} is not supported by tracehouse (InfluxQL meta statements answered: SHOW "
            "DATABASES, MEASUREMENTS, FIELD KEYS, TAG KEYS, TAG VALUES, SERIES, RETENTION POLICIES, "
            "CREATE DATABASE, DROP DATABASE; data: SQL over POST /api/query)"
        )


# -- HTTP -----------------------------------------------------------------------------------

EPOCHS = ("n", "ns", "u", "µ", "us", "ms", "s", "m", "h")


@dataclass
class Request:
    """The parameters of one `/query` request (query string, then a form body)."""

    q: str
    db: str | None
    epoch: str | None
    chunked: bool
    pretty: bool
    params: dict[str, Any]
    chunk_size: int = 10_000  # rows per chunk of a chunked answer (InfluxDB's default)


def request_params(query: dict[str, str], body: bytes | None, content_type: str) -> Request:
    """InfluxDB reads `q`, `db`, `epoch`, `params`, `chunked`, `pretty` from the URL and, for POST,
    from an `application/x-www-form-urlencoded` body (the URL wins, as Go's FormValue does)."""
    merged = dict(query)
    if body:
        ctype = content_type.split(";")[0].strip().lower()
        if ctype in ("application/x-www-form-urlencoded", "") or "q" not in merged:
            try:
                form = dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
            except UnicodeDecodeError:
                raise BadInput("/query body is not UTF-8 form data", expected="q=...&db=...") from None
            for k, v in form.items():
                merged.setdefault(k, v)
    q = merged.get("q", "")
    if not q.strip():
        raise BadInput('missing required parameter "q"')
    epoch = merged.get("epoch") or None
    if epoch is not None and epoch not in EPOCHS:
        raise BadInput(f"invalid epoch {epoch!r}", expected="n, u, ms, s, m or h")
    params: dict[str, Any] = {}
    if merged.get("params"):
        try:
            params = json.loads(merged["params"])
        except ValueError as e:
            raise BadInput(f"error parsing query parameters: {e}") from None
        if not isinstance(params, dict):
            raise BadInput("error parsing query parameters: expected a JSON object")
    truthy = ("true", "1", "yes")
    try:
        chunk_size = int(merged.get("chunk_size") or 10_000)
    except ValueError:
        raise BadInput(f"invalid chunk_size {merged['chunk_size']!r}", expected="a positive integer") from None
    return Request(
        q=q,
        db=merged.get("db") or None,
        epoch=epoch,
        chunked=merged.get("chunked", "").lower() in truthy,
        pretty=merged.get("pretty", "").lower() in truthy,
        params=params,
        chunk_size=max(1, chunk_size),
    )


_RAW_MARK = re.compile(rb'"\\u0000([0-9a-f]{16}):([0-9]+)"')  # `answer`'s place of a series' values


def answer(results: list[dict], req: Request) -> bytes:
    """InfluxDB's JSON for `results`: one document, or when chunked one per chunk of at most
    `chunk_size` rows of a series (`"partial": true` on a series that goes on in the next chunk,
    and on every chunk of a statement but its last)."""
    indent = 4 if req.pretty else None
    if not (req.chunked or req.pretty) and all(_only_raw(r) for r in results):
        # (what the splice below gives, written at once: no document, nonce or search of it;
        # 100 series of TSBS lastpoint's shape, 48 kB, in-process at load 7: 24 -> 14 us)
        return b"".join(
            [
                b'{"results": [',
                b", ".join(
                    b'{"statement_id": %d, "series": [%b]}' % (r["statement_id"], b", ".join(r["series"]))
                    if "series" in r
                    else b'{"statement_id": %d}' % r["statement_id"]
                    for r in results
                ),
                b"]}",
            ]
        )
    # (strict JSON, jsonvalues.py: a value that is not finite, which InfluxDB never returns, is null)
    raws: list[bytes] = []
    nonce = secrets.token_hex(8)
    mark = f"\x00{nonce}:"  # (a nonce: no value of the answer holds it)
    for r in results:
        series = r.get("series", ())
        if series and not (req.chunked or req.pretty) and all(isinstance(s, RawSeries) for s in series):
            # (one splice for the whole array: 100 series of TSBS lastpoint's shape, in-process,
            # median of 500 at load 20: 0.070 ms spliced one at a time, 0.014 ms as one)
            r["series"] = f"{mark}{len(raws)}"
            raws.append(b"[" + b", ".join(series) + b"]")
            continue
        for i, s in enumerate(series):
            if isinstance(s, RawSeries):  # (a whole series: the native executor's raw points)
                if req.chunked or req.pretty:
                    series[i] = json.loads(s)
                else:
                    series[i] = f"{mark}{len(raws)}"
                    raws.append(s)
    if raws:  # the values the native executor encoded (influxql_native.py), spliced in
        body = json_bytes({"results": results})
        pieces = _RAW_MARK.split(body)
        out = [pieces[0]]
        for k in range(1, len(pieces), 3):
            who, n, rest = pieces[k : k + 3]
            out += [raws[int(n)] if who == nonce.encode() else b'"\\u0000' + who + b":" + n + b'"', rest]
        return b"".join(out)
    if req.chunked:
        return b"".join(
            json_bytes({"results": [c]}, indent=indent) + b"\n" for r in results for c in _chunks(r, req.chunk_size)
        )
    return json_bytes({"results": results}, indent=indent)


def _only_raw(result: dict) -> bool:
    """Whether a statement's result is its id and natively written series only (`answer`)."""
    if type(result.get("statement_id")) is not int or not set(result) <= {"statement_id", "series"}:
        return False
    return all(type(s) is RawSeries for s in result.get("series") or ())


def _chunks(result: dict, size: int) -> list[dict]:
    if "series" not in result:
        return [result]
    pieces = []
    for s in result["series"]:
        values = s.get("values", [])
        for i in range(0, max(1, len(values)), size):
            piece = dict(s, values=values[i : i + size])
            if i + size < len(values):
                piece["partial"] = True
            pieces.append(piece)
    out = []
    for k, piece in enumerate(pieces):
        c = {"statement_id": result["statement_id"], "series": [piece]}
        if k == 0 and "messages" in result:
            c["messages"] = result["messages"]
        if k < len(pieces) - 1:
            c["partial"] = True
        out.append(c)
    return out


def error_body(message: str) -> bytes:
    return json.dumps({"error": message}).encode()


class Handoff(Exception):
    """A SELECT run on the dispatcher (`handle`) that is not its last run again: the query
    workers answer it."""


INLINE_S = 0.001  # a text's last run took at most this long: the next may run on the dispatcher
_LAST_RUNS: dict[str, tuple[float, list]] = {}  # kept text -> (seconds, its views, weakly): `handle`


def handle(
    call,
    ingestor,
    *,
    cfg,
    submit: Callable[[Callable[[], None]], Any],
    run_sql: Callable | None = None,
    inline: Callable[[], float] | None = None,
) -> None:
    """Answer one `/query` request (`call` from server/http.py). Read-only statements run through
    `submit` (the query pool); a request that creates or drops a database runs here, on the
    dispatcher, in order with the writes it may affect.

    A text of SELECTs kept by `parse_kept` runs here too, not through the pool, when its last
    run was answered natively in at most `INLINE_S` and this run reads the very same columns'
    views (`Executor.inline`: the same plans over the same parts, so the same work; a write, a
    checkpoint or a new field between makes new views) and `inline()` (the dispatcher's round's
    time left for such runs, server/http.py) is positive. Anything else - DuckDB, columns to
    bring up to date, other views - is handed to the pool at its first sign (`Handoff`), so a
    dispatcher is held at most about `INLINE_S` a request and its round's budget in all. The hop
    to a query thread was ~30 us of a served TSBS lastpoint (median, load 17; p90 45-120)."""
    json_type = [
        ("content-type", "application/json"),
        ("x-influxdb-version", "tracehouse"),
        ("x-influxdb-build", "OSS"),
    ]
    try:
        body = bytes(call.read_body(cfg)) if call.method == "POST" else None
        req = request_params(call.query, body, call.headers.get("content-type", ""))
        statements = parse_kept(req.q, req.params)
    except BadInput as e:
        call.reply(400, error_body(str(e)), json_type)
        return
    except ParseError as e:
        call.reply(400, error_body(f"error parsing query: {e}"), json_type)
        return
    if not statements:
        call.reply(400, error_body('missing required parameter "q"'), json_type)
        return

    def executor(views: tuple | None = None) -> Executor:
        return Executor(
            ingestor,
            default_db=req.db,
            peer=str(call.peer),
            read_only=call.method == "GET",
            epoch=req.epoch,
            run_sql=run_sql,
            native=getattr(cfg, "influxql_native", True),
            raw_json=not (req.chunked or req.pretty),
            inline=views,
        )

    def run(views: tuple | None = None) -> None:
        ex = executor(views)
        try:
            started = time.perf_counter()
            results = ex.run(statements)
            took = time.perf_counter() - started
            if _PARSED.get(req.q) is statements:  # (a kept text: its run, for the next one's place)
                # (by weak references: a view kept here would keep its parts past MAX_BYTES)
                _LAST_RUNS[req.q] = (took, [weakref.ref(v) for v in ex.views] if ex.engine == "native" else [])
            body = answer(results, req)
            call.reply(200, body, [*json_type, *([("x-tracehouse-engine", ex.engine)] if ex.engine else [])])
        except Handoff:
            submit(run)
        except TracehouseError as e:
            log.error("InfluxQL %r failed: %s", req.q[:200], e)
            call.reply(500, error_body(str(e)), json_type)
        except Exception as e:  # noqa: BLE001 - every request gets an answer
            log.exception("InfluxQL %r failed", req.q[:200])
            call.reply(500, error_body(f"{type(e).__name__}: {e}"), json_type)

    if any(st.writes for st in statements):
        run()
        return
    last = _LAST_RUNS.get(req.q)
    views = tuple(r() for r in last[1]) if last is not None and last[0] <= INLINE_S else ()
    if views and all(v is not None for v in views) and inline is not None and inline() > 0:
        run(views)
    else:
        submit(run)
