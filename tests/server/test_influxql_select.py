"""The InfluxQL SELECT parser (influxql_select.py): its tree, InfluxDB's column names, its errors with
line and character, and that no input crashes it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracehouse.server import influxql
from tracehouse.server.influxql_select import (
    Binary,
    Call,
    Dimension,
    Field,
    Literal,
    Measurement,
    Paren,
    RegexRef,
    Subquery,
    VarRef,
    Wildcard,
    field_name,
)


def select(text: str, params=None):
    (s,) = influxql.parse(text, params)
    assert s.kind == "select"
    return s.options["select"]


def test_a_whole_statement_parses_into_its_tree():
    s = select(
        'select MEAN("usage user") AS m, max(x) * 2 + 1, "h"::tag, *, /^disk/ from "db"."rp"."cpu", /^m/ '
        "where (host = 'a' or host =~ /b/) and time >= now() - 1h and x > -2.5 "
        "group by time(5m, -1m), host, * fill(-3) order by time desc limit 10 offset 2 slimit 3 soffset 1 tz('UTC')"
    )
    assert s.fields[0] == Field(Call("mean", [VarRef("usage user")]), "m")
    assert s.fields[1].expr == Binary(
        "+", Binary("*", Call("max", [VarRef("x")]), Literal("integer", 2)), Literal("integer", 1)
    )
    assert s.fields[2].expr == VarRef("h", "tag") and isinstance(s.fields[3].expr, Wildcard)
    assert isinstance(s.fields[4].expr, RegexRef) and s.fields[4].expr.regex.pattern == "^disk"
    assert s.sources[0] == Measurement(name="cpu", database="db") and s.sources[1].regex.pattern == "^m"
    where = s.condition
    assert where.op == "and" and where.right == Binary(">", VarRef("x"), Literal("number", -2.5))
    assert isinstance(where.left.left, Paren) and where.left.left.expr.op == "or"
    now = where.left.right
    assert now == Binary(">=", VarRef("time"), Binary("-", Call("now", []), Literal("duration", 3600 * 10**9)))
    assert s.dimensions == [
        Dimension("time", interval=300 * 10**9, offset=-60 * 10**9),
        Dimension("tag", "host"),
        Dimension("wildcard"),
    ]
    assert (s.fill, s.fill_value, s.descending, s.limit, s.offset, s.slimit, s.soffset, s.tz) == (
        "value",
        -3,
        True,
        10,
        2,
        3,
        1,
        "UTC",
    )


def test_precedence_subquery_distinct_and_bound_parameters():
    s = select("SELECT a + b * c - d FROM m")
    assert s.fields[0].expr == Binary("-", Binary("+", VarRef("a"), Binary("*", VarRef("b"), VarRef("c"))), VarRef("d"))
    s = select("SELECT x FROM m WHERE a = 1 OR b = 2 AND c = 3")
    assert s.condition.op == "or" and s.condition.right.op == "and"
    s = select(
        "SELECT count(distinct(v)) FROM (SELECT max(v) AS v FROM m GROUP BY time(1m)) WHERE h = $h", {"h": "web1"}
    )
    assert s.fields[0].expr == Call("count", [Call("distinct", [VarRef("v")])])
    assert isinstance(s.sources[0], Subquery) and s.sources[0].select.time_dimension.interval == 60 * 10**9
    assert s.condition == Binary("=", VarRef("h"), Literal("string", "web1"))
    s = select("SELECT v FROM m WHERE t =~ $re", {"re": "^a"})
    assert s.condition.right.kind == "regex" and s.condition.right.value.pattern == "^a"


@pytest.mark.parametrize(
    "text, name",
    [
        ("SELECT mean(v) FROM m", "mean"),
        ("SELECT v FROM m", "v"),
        ("SELECT mean(a) + max(b) FROM m", "mean_max"),
        ("SELECT a * 2 FROM m", "a"),
        ("SELECT (a + b) / c FROM m", "a_b_c"),
        ("SELECT max(v) AS top FROM m", "top"),
    ],
)
def test_column_names_follow_influxdb(text, name):
    assert field_name(select(text).fields[0]) == name


@pytest.mark.parametrize(
    "text, message",
    [
        ("SELECT", "found EOF, expected identifier, string, number, bool at line 1, char 7"),
        ("SELECT v", "found EOF, expected FROM at line 1, char 9"),
        ("SELECT v FROM m GROUP BY time(x)", "found x, expected duration"),
        ("SELECT v FROM m GROUP BY time(1m), time(2m)", "multiple time dimensions"),
        ("SELECT v FROM m fill(sometimes)", "expected null, none, previous, linear or a number"),
        ("SELECT v FROM m ORDER BY v", "only ORDER BY time supported at this time"),
        ("SELECT v INTO x FROM m", "SELECT ... INTO is not supported"),
        ("SELECT v FROM (SELECT v FROM (SELECT v FROM m))", "subqueries nested more than one level"),
        ("SELECT v FROM m WHERE a =~ 'x'", "found 'x', expected regex"),
        ("SELECT v FROM m\nWHERE (a = 1", "found EOF, expected ) at line 2, char 13"),
        ("SELECT " + "max(" * 120 + "v" + ")" * 120 + " FROM m", "nested deeper than"),
    ],
)
def test_parse_errors_name_what_and_where(text, message):
    with pytest.raises(influxql.ParseError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        influxql.parse(text)


WORDS = [
    "SELECT",
    "FROM",
    "WHERE",
    "GROUP",
    "BY",
    "ORDER",
    "LIMIT",
    "OFFSET",
    "SLIMIT",
    "SOFFSET",
    "AS",
    "AND",
    "OR",
    "DESC",
    "time",
    "now()",
    "fill",
    "tz",
    "mean",
    "(",
    ")",
    ",",
    "*",
    "+",
    "-",
    "/",
    "%",
    "=",
    "!=",
    "<>",
    "<",
    ">=",
    "=~",
    "!~",
    "::",
    "::tag",
    "/re/",
    "'s'",
    '"q"',
    "1",
    "1.5",
    "10s",
    "-1m",
    "$p",
    "m",
    "v",
    "distinct",
    "true",
    "INTO",
    ";",
]


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.lists(st.sampled_from(WORDS), max_size=20).map(lambda ws: "SELECT " + " ".join(ws)),
        st.text(max_size=60).map(lambda t: "SELECT " + t),
    )
)
def test_select_parser_never_crashes(text):
    try:
        influxql.parse(text, {"p": "v"})
    except influxql.ParseError:
        pass
