"""InfluxQL SELECT over `tracehouse serve` (the translator, influxql_sql.py, end to end): each test
writes nothing of its own but asks the module's small bucket a question whose InfluxDB 1.x answer is
worked out by hand here (times, windows, fills, selectors' times, series, names, errors)."""

from __future__ import annotations

import json
import math
from urllib.parse import urlencode

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.server import Server

T0 = 1_600_000_020  # 2020-09-13T12:27:00Z, on a minute boundary
LINES = f"""m,host=a,dc=x v=1i,f=1.5,s="one",b=true {T0}
m,host=a,dc=x v=3i,f=2.5 {T0 + 10}
m,host=a,dc=x v=2i {T0 + 20}
m,host=b v=10i,f=0.5 {T0}
m,host=b v=20i {T0 + 60}
m,host=b v=5i,f=-1 {T0 + 75}
big,host=a n=9223372036854775807i {T0}
big,host=a n=1i {T0 + 1}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("influxql-select") / "store", "--quiet")
    assert s.write(LINES, bucket="t", precision="s")[0] == 204
    yield s
    assert s.stop() == 0


def q(server, query: str, **params) -> dict:
    """The statement's result (the first), asked with GET /query?db=t&epoch=s unless told otherwise."""
    args = {"q": query, "db": "t", "epoch": "s", **params}
    args = {k: v for k, v in args.items() if v is not None}
    status, _h, body = server.request("GET", "/query?" + urlencode(args))
    assert status == 200, body
    return json.loads(body)["results"][0]


def values(server, query: str, **params) -> list:
    r = q(server, query, **params)
    assert "error" not in r, r["error"]
    (s,) = r["series"]
    return s["values"]


# -- raw queries ------------------------------------------------------------------------------


def test_raw_field_in_time_order_and_only_points_that_have_it(server):
    assert values(server, "SELECT v FROM m") == [
        [T0, 1],
        [T0, 10],
        [T0 + 10, 3],
        [T0 + 20, 2],
        [T0 + 60, 20],
        [T0 + 75, 5],
    ]
    assert values(server, "SELECT f FROM m") == [[T0, 1.5], [T0, 0.5], [T0 + 10, 2.5], [T0 + 75, -1.0]]


def test_select_star_is_every_field_and_tag_by_name(server):
    r = q(server, "SELECT * FROM m WHERE host = 'a'", epoch=None)
    (s,) = r["series"]
    assert s["name"] == "m" and s["columns"] == ["time", "b", "dc", "f", "host", "s", "v"]
    assert s["values"][0] == ["2020-09-13T12:27:00Z", True, "x", 1.5, "a", "one", 1]
    assert s["values"][2] == ["2020-09-13T12:27:20Z", None, "x", None, "a", None, 2]


def test_a_missing_tag_is_the_empty_string(server):
    only_b = [[T0, 10], [T0 + 60, 20], [T0 + 75, 5]]
    assert values(server, "SELECT v FROM m WHERE dc = ''") == only_b
    assert values(server, "SELECT v FROM m WHERE dc != 'x'") == only_b
    assert values(server, "SELECT v FROM m WHERE dc !~ /x/") == only_b
    assert values(server, "SELECT v FROM m WHERE dc =~ /^$/") == only_b
    assert values(server, "SELECT v FROM m WHERE host =~ /(?i)^A$/ AND dc <> ''") == [
        [T0, 1],
        [T0 + 10, 3],
        [T0 + 20, 2],
    ]


def test_field_conditions_and_arithmetic(server):
    assert values(server, "SELECT v FROM m WHERE v > 4 AND (f < 1 OR s = 'one')") == [[T0, 10], [T0 + 75, 5]]
    assert values(server, "SELECT v * 2 + 1, f / 2 FROM m WHERE host = 'a'") == [
        [T0, 3, 0.75],
        [T0 + 10, 7, 1.25],
        [T0 + 20, 5, None],
    ]
    r = q(server, "SELECT v * 2 + 1, f / 2 AS half FROM m WHERE host = 'a'")
    assert r["series"][0]["columns"] == ["time", "v", "half"]
    assert values(server, "SELECT v FROM m WHERE b = true") == [[T0, 1]]


@pytest.mark.parametrize(
    "cond",
    [
        f"time >= {T0 + 10}s AND time <= '2020-09-13T12:27:20Z'",
        f"time > {T0 * 10**9} AND time < {T0 * 10**9} + 21s",
        "time >= '2020-09-13T12:27:10Z' AND time < '2020-09-13 12:27:21'",
        f"'2020-09-13T12:27:10.000Z' <= time AND time < {T0 + 21}000ms",
    ],
)
def test_time_conditions_in_every_form(server, cond):
    assert values(server, f"SELECT v FROM m WHERE host = 'a' AND {cond}") == [[T0 + 10, 3], [T0 + 20, 2]]


def test_now_and_time_errors(server):
    assert q(server, "SELECT v FROM m WHERE time > now() - 1h") == {"statement_id": 0}  # 2020 is long gone
    assert len(values(server, "SELECT v FROM m WHERE time > now() - 3650d")) == 6
    assert "invalid time condition" in q(server, "SELECT v FROM m WHERE time > 1 OR v > 1")["error"]
    assert "invalid timestamp" in q(server, "SELECT v FROM m WHERE time > 'yesterday'")["error"]


def test_limit_offset_order_desc_per_series_and_slimit(server):
    # DESC lists the series in reverse order too (InfluxDB 1.8.3 answers so: test_influxdb_peer.py)
    r = q(server, "SELECT v FROM m GROUP BY host ORDER BY time DESC LIMIT 2 OFFSET 1")
    assert [(s["tags"], s["values"]) for s in r["series"]] == [
        ({"host": "b"}, [[T0 + 60, 20], [T0, 10]]),
        ({"host": "a"}, [[T0 + 10, 3], [T0, 1]]),
    ]
    r = q(server, "SELECT v FROM m GROUP BY host ORDER BY time DESC SLIMIT 1")
    assert [(s["tags"], s["values"][0]) for s in r["series"]] == [({"host": "b"}, [T0 + 75, 5])]
    r = q(server, "SELECT v FROM m GROUP BY * SLIMIT 1 SOFFSET 1")  # series by their tags, keys sorted
    assert [s["tags"] for s in r["series"]] == [{"dc": "x", "host": "a"}]
    r = q(server, "SELECT count(v) FROM m GROUP BY host, dc")
    assert [s["tags"] for s in r["series"]] == [{"dc": "", "host": "b"}, {"dc": "x", "host": "a"}]


# -- aggregates -------------------------------------------------------------------------------


def test_aggregates_without_group_by_time_are_stamped_with_the_range_start(server):
    r = q(
        server,
        "SELECT count(v), sum(v), mean(v), median(v), mode(v), spread(v), stddev(v), percentile(v, 50), "
        "count(distinct(v)) FROM m",
    )
    (s,) = r["series"]
    assert s["columns"] == [
        "time",
        "count",
        "sum",
        "mean",
        "median",
        "mode",
        "spread",
        "stddev",
        "percentile",
        "count_1",
    ]
    t, count, total, mean, median, mode, spread, stddev, pct, distinct = s["values"][0]
    vs = [1, 3, 2, 10, 20, 5]
    m = sum(vs) / 6
    assert (t, count, total, mean, median, mode, spread, pct, distinct) == (0, 6, 41, m, 4.0, 1, 19, 3, 6)
    assert math.isclose(stddev, math.sqrt(sum((x - m) ** 2 for x in vs) / 5))
    assert values(server, f"SELECT count(v) FROM m WHERE time >= {T0 + 5}s") == [[T0 + 5, 4]]


def test_a_single_selector_is_stamped_with_its_point_and_brings_its_fields(server):
    assert values(server, "SELECT max(v) FROM m") == [[T0 + 60, 20]]
    assert values(server, "SELECT min(f) FROM m") == [[T0 + 75, -1.0]]
    assert values(server, "SELECT first(f) FROM m WHERE host = 'a'") == [[T0, 1.5]]
    assert values(server, "SELECT last(f) FROM m WHERE host = 'a'") == [[T0 + 10, 2.5]]
    # nearest rank: of 6 values the 90th percentile is the 5th (floor(6 * 0.9 + 0.5)), the 95th the 6th
    assert values(server, "SELECT percentile(v, 90) FROM m") == [[T0, 10]]
    assert values(server, "SELECT percentile(v, 95) FROM m") == [[T0 + 60, 20]]
    assert values(server, "SELECT max(v), host, f FROM m") == [[T0 + 60, 20, "b", None]]
    # two selectors: the range start; of a and b's points at T0 first() takes the greater value (b's
    # 10), as InfluxDB's IntegerFirstReduce does
    assert values(server, "SELECT first(v), last(v) FROM m") == [[0, 10, 5]]


def test_group_by_time_fills(server):
    base = f"FROM m WHERE time >= {T0}s AND time < {T0 + 90}s GROUP BY time(30s)"
    assert values(server, f"SELECT count(v), sum(v), mean(v) {base}") == [
        [T0, 4, 16, 4.0],
        [T0 + 30, 0, None, None],
        [T0 + 60, 2, 25, 12.5],
    ]
    assert values(server, f"SELECT sum(v) {base} fill(none)") == [[T0, 16], [T0 + 60, 25]]
    assert values(server, f"SELECT sum(v) {base} fill(previous)") == [[T0, 16], [T0 + 30, 16], [T0 + 60, 25]]
    assert values(server, f"SELECT mean(v) {base} fill(linear)") == [[T0, 4.0], [T0 + 30, 8.25], [T0 + 60, 12.5]]
    assert values(server, f"SELECT sum(v) {base} fill(-7)") == [[T0, 16], [T0 + 30, -7], [T0 + 60, 25]]
    assert values(server, f"SELECT max(v) {base} ORDER BY time DESC LIMIT 2") == [[T0 + 60, 20], [T0 + 30, None]]


def test_group_by_time_with_offset_and_without_a_lower_bound(server):
    # windows start at epoch + 15 s + k * 30 s: T0 = 1600000020 is 15 s into the one from T0 - 15
    assert values(server, f"SELECT count(v) FROM m WHERE time < {T0 + 40}s GROUP BY time(30s, 15s)") == [
        [T0 - 15, 3],
        [T0 + 15, 1],
    ]  # from the earliest point's window to the upper bound
    assert values(server, f"SELECT count(v) FROM m WHERE time < {T0 + 40}s GROUP BY time(30s, -15s)") == [
        [T0 - 15, 3],
        [T0 + 15, 1],
    ]
    assert values(server, f"SELECT count(v) FROM m WHERE time < {T0 + 40}s GROUP BY time(30s)") == [
        [T0, 4],
        [T0 + 30, 0],
    ]


def test_group_by_tags_time_and_star(server):
    r = q(server, f"SELECT mean(v) FROM m WHERE time >= {T0}s AND time < {T0 + 60}s GROUP BY time(30s), host")
    assert [(s["tags"], s["values"]) for s in r["series"]] == [
        ({"host": "a"}, [[T0, 2.0], [T0 + 30, None]]),
        ({"host": "b"}, [[T0, 10.0], [T0 + 30, None]]),
    ]
    r = q(server, "SELECT count(v) FROM m GROUP BY *")
    assert [(s["tags"], s["values"]) for s in r["series"]] == [
        ({"dc": "", "host": "b"}, [[0, 3]]),
        ({"dc": "x", "host": "a"}, [[0, 3]]),
    ]
    r = q(server, "SELECT count(v) FROM m GROUP BY /^h/")
    assert [s["tags"] for s in r["series"]] == [{"host": "a"}, {"host": "b"}]


def test_top_bottom_distinct_keep_point_times(server):
    assert values(server, "SELECT top(v, 2) FROM m") == [[T0, 10], [T0 + 60, 20]]
    assert values(server, "SELECT bottom(v, 2) FROM m") == [[T0, 1], [T0 + 20, 2]]
    r = q(server, f"SELECT top(v, 1) FROM m WHERE time >= {T0}s AND time < {T0 + 90}s GROUP BY time(30s)")
    assert r["series"][0]["values"] == [[T0, 10], [T0 + 60, 20]]
    # in the order of their first points (InfluxDB's DistinctReducer), and LIMIT counts them
    assert values(server, "SELECT distinct(v) FROM m WHERE host = 'b'") == [[0, 10], [0, 20], [0, 5]]
    assert values(server, "SELECT distinct(v) FROM m WHERE host = 'b' LIMIT 2") == [[0, 10], [0, 20]]


def test_integral_interpolates_at_window_boundaries(server):
    # host b's f: 0.5 at T0, -1 at T0+75: one trapezoid of 75 s, mean -0.25: -18.75 (value-seconds)
    assert values(server, "SELECT integral(f) FROM m WHERE host = 'b'") == [[0, -18.75]]
    assert values(server, "SELECT integral(f, 1m) FROM m WHERE host = 'b'") == [[0, -18.75 / 60]]
    # split at T0+60: the value there is 0.5 - 1.5 * 60/75 = -0.7; 0.5*(0.5-0.7)*60 = -6, 0.5*(-0.7-1)*15 = -12.75
    got = values(
        server,
        f"SELECT integral(f) FROM m WHERE host = 'b' AND time >= {T0}s AND time < {T0 + 120}s GROUP BY time(60s)",
    )
    assert [t for t, _ in got] == [T0, T0 + 60] and math.isclose(got[0][1], -6) and math.isclose(got[1][1], -12.75)


def test_integer_sums_wrap_as_int64_does(server):
    assert values(server, "SELECT sum(n) FROM big") == [[0, -(2**63)]]


def test_subquery_one_level(server):
    inner = f"SELECT max(v) AS top FROM m WHERE time >= {T0}s AND time < {T0 + 90}s GROUP BY time(30s), host"
    # inner (fill null): a: 3, null, null; b: 10, null, 20
    assert values(server, f"SELECT mean(top) FROM ({inner})") == [[0, 11.0]]
    r = q(server, f"SELECT mean(top), count(top) FROM ({inner}) GROUP BY host")
    assert [(s["tags"], s["values"]) for s in r["series"]] == [
        ({"host": "a"}, [[0, 3.0, 1]]),
        ({"host": "b"}, [[0, 15.0, 2]]),
    ]
    # the outer range reaches a subquery that names none
    assert values(server, f"SELECT max(x) FROM (SELECT v AS x FROM m) WHERE time >= {T0 + 30}s") == [[T0 + 60, 20]]


# -- transformations -----------------------------------------------------------------------------


def test_derivative_and_difference_of_a_field(server):
    assert values(server, "SELECT derivative(v) FROM m WHERE host = 'a'") == [[T0 + 10, 0.2], [T0 + 20, -0.1]]
    r = q(server, "SELECT non_negative_derivative(v, 1m) FROM m GROUP BY host")
    assert [(x["tags"], x["values"]) for x in r["series"]] == [
        ({"host": "a"}, [[T0 + 10, 12.0]]),
        ({"host": "b"}, [[T0 + 60, 10.0]]),  # 20 -> 5 falls: left out
    ]
    assert values(server, "SELECT difference(v) FROM m WHERE host = 'b'") == [[T0 + 60, 10], [T0 + 75, -15]]
    assert values(server, "SELECT non_negative_difference(v) FROM m WHERE host = 'b'") == [[T0 + 60, 10]]
    # time order DESC: each point against the one after it, the elapsed time counted forward
    assert values(server, "SELECT derivative(v) FROM m WHERE host = 'a' ORDER BY time DESC") == [
        [T0 + 10, 0.1],
        [T0, -0.2],
    ]
    r = q(server, "SELECT derivative(v) * 10 AS d10 FROM m WHERE host = 'a' LIMIT 1")
    assert r["series"][0]["columns"] == ["time", "d10"] and r["series"][0]["values"] == [[T0 + 10, 2.0]]


def test_cumulative_sum_moving_average_elapsed(server):
    # integers stay integers and wrap as int64 does; cumulative_sum has a point for every point
    assert values(server, "SELECT difference(n), cumulative_sum(n) FROM big") == [
        [T0, None, 2**63 - 1],
        [T0 + 1, 1 - (2**63 - 1), -(2**63)],
    ]
    assert values(server, "SELECT moving_average(v, 2) FROM m WHERE host = 'a'") == [[T0 + 10, 2.0], [T0 + 20, 2.5]]
    assert values(server, "SELECT elapsed(v, 1s) FROM m WHERE host = 'b'") == [[T0 + 60, 60], [T0 + 75, 15]]
    assert values(server, "SELECT elapsed(f) FROM m WHERE host = 'b'") == [[T0 + 75, 75 * 10**9]]


def test_transformation_of_windows_reads_one_window_before_the_range(server):
    # the range holds one window (T0+60: mean 12.5); its derivative is against the window before
    # the range (T0: 10), per the GROUP BY interval
    query = f"SELECT derivative(mean(v)) FROM m WHERE host = 'b' AND time >= {T0 + 60}s AND time < {T0 + 120}s GROUP BY time(1m)"
    assert values(server, query) == [[T0 + 60, 2.5]]
    query = f"SELECT cumulative_sum(sum(v)) FROM m WHERE time >= {T0}s AND time < {T0 + 120}s GROUP BY time(1m)"
    assert values(server, query) == [[T0, 16], [T0 + 60, 41]]


def test_transformation_errors_are_influxdbs(server):
    assert (
        q(server, "SELECT derivative(mean(v)) FROM m")["error"] == "derivative aggregate requires a GROUP BY interval"
    )
    r = q(server, f"SELECT derivative(v) FROM m WHERE time >= {T0}s GROUP BY time(1m)")
    assert r["error"] == "aggregate function required inside the call to derivative"
    assert (
        q(server, "SELECT moving_average(v, 1) FROM m")["error"]
        == "moving_average window must be greater than 1, got 1"
    )
    r = q(server, f"SELECT mean(v), derivative(mean(v)) FROM m WHERE time >= {T0}s GROUP BY time(1m)")
    assert r["error"] == "mixing aggregate and non-aggregate queries is not supported"
    assert q(server, "SELECT derivative(v, 3) FROM m")["error"] == "second argument to derivative must be a duration"


# -- the answer's shape: epochs, chunks, several statements, errors ----------------------------------


def test_epochs_and_rfc3339(server):
    assert values(server, "SELECT max(v) FROM m", epoch=None) == [["2020-09-13T12:28:00Z", 20]]
    assert values(server, "SELECT max(v) FROM m", epoch="ms") == [[(T0 + 60) * 1000, 20]]
    assert values(server, "SELECT max(v) FROM m", epoch="ns") == [[(T0 + 60) * 10**9, 20]]
    assert values(server, "SELECT max(v) FROM m", epoch="m") == [[(T0 + 60) // 60, 20]]


def test_chunked_answers(server):
    status, _h, body = server.request(
        "GET",
        "/query?"
        + urlencode(
            {
                "q": "SELECT v FROM m GROUP BY host; SELECT count(v) FROM m",
                "db": "t",
                "epoch": "s",
                "chunked": "true",
                "chunk_size": "2",
            }
        ),
    )
    assert status == 200
    chunks = [json.loads(line)["results"][0] for line in body.decode().splitlines()]
    assert [
        (
            c["statement_id"],
            c["series"][0]["tags"]["host"] if "tags" in c["series"][0] else None,
            len(c["series"][0]["values"]),
            c["series"][0].get("partial", False),
            c.get("partial", False),
        )
        for c in chunks
    ] == [
        (0, "a", 2, True, True),
        (0, "a", 1, False, True),
        (0, "b", 2, True, True),
        (0, "b", 1, False, False),
        (1, None, 1, False, False),
    ]


def test_several_statements_and_influxdb_errors(server):
    status, _h, body = server.request(
        "GET",
        "/query?"
        + urlencode(
            {"q": "SELECT count(v) FROM m; SELECT nosuch(v) FROM m; SELECT count(v) FROM m", "db": "t", "epoch": "s"}
        ),
    )
    r = json.loads(body)["results"]
    assert r[0]["series"][0]["values"] == [[0, 6]]
    assert r[1] == {"statement_id": 1, "error": "undefined function nosuch()"}
    assert r[2] == {"statement_id": 2, "error": "not executed"}
    for query, message in [
        ("SELECT v, mean(v) FROM m", "mixing aggregate and non-aggregate queries is not supported"),
        ("SELECT v, max(v), min(v) FROM m", "mixing aggregate and non-aggregate queries is not supported"),
        ("SELECT max(v, 2) FROM m", "invalid number of arguments for max, expected 1, got 2"),
        ("SELECT percentile(v) FROM m", "invalid number of arguments for percentile, expected 2, got 1"),
        ("SELECT v FROM m GROUP BY time(1m)", "GROUP BY requires at least one aggregate function"),
        ("SELECT time FROM m", "at least 1 non-time field must be queried"),
        ("SELECT top(v, 0) FROM m", "limit (0) in top function must be at least 1"),
        ("SELECT top(v, 2), max(v) FROM m", "top() cannot be combined with other functions or fields"),
        ("SELECT v FROM nosuchdb..m", "database not found: nosuchdb"),
    ]:
        assert q(server, query).get("error") == message, query
    assert q(server, "SELECT v FROM nosuchmeasurement") == {"statement_id": 0}
    assert q(server, "SELECT host FROM m") == {"statement_id": 0}  # tags alone: no data, as in InfluxDB
    status, _h, body = server.request("GET", "/query?" + urlencode({"q": "SELECT FROM m", "db": "t"}))
    assert status == 400 and json.loads(body)["error"].startswith("error parsing query: found FROM, expected")


def test_too_many_filled_windows_are_refused_with_influxdbs_text(server):
    """A filled answer past max-select-buckets (1,000,000 windows) is refused, in InfluxDB's words:
    counted before anything runs where the range has a start (as InfluxDB counts), else over the
    series' first point; without a fill there is no grid and nothing to refuse."""
    refused = "max-select-buckets limit exceeded: (2000000/1000000)"
    assert q(server, "SELECT count(v) FROM m WHERE time >= 0s AND time < 2000000s GROUP BY time(1s)") == {
        "statement_id": 0,
        "error": refused,
    }
    assert q(server, f"SELECT count(v) FROM m WHERE time < {T0 + 2_000_000}s GROUP BY time(1s)") == {
        "statement_id": 0,
        "error": refused,
    }
    assert values(server, f"SELECT count(v) FROM m WHERE time < {T0 + 2_000_000}s GROUP BY time(1s) fill(none)")[0] == [
        T0,
        2,
    ]
    assert values(server, f"SELECT count(v) FROM m WHERE time < {T0 + 1_000_000}s GROUP BY time(1s)")[0] == [T0, 2]


def test_from_regex_and_several_measurements_give_a_series_each(server):
    r = q(server, "SELECT count(*) FROM /./")
    assert [(s["name"], s["columns"], s["values"]) for s in r["series"]] == [
        ("big", ["time", "count_n"], [[0, 2]]),
        ("m", ["time", "count_b", "count_f", "count_s", "count_v"], [[0, 1, 4, 1, 6]]),
    ]
    r = q(server, 'SELECT max(v) FROM "t"."autogen"."m", big')
    assert [s["name"] for s in r["series"]] == ["m"]  # big has no field v: no series


# -- the answer's columns, vectorized, against the row-at-a-time reference --------------------

_NS = st.integers(min_value=-(2**63) + 2, max_value=2**63 - 1)


def _reference_series(plan, table, epoch):
    """What `answer_series` returns, worked out a row at a time (format_time, NaN as None, a new
    series wherever a tag value differs from the row before's)."""
    from tracehouse.server.influxql_sql import EPOCH_DIVISORS, format_time

    rows = table.to_pylist()
    out = []
    for r in rows:
        t = r["time"]
        t = None if t is None else (t // EPOCH_DIVISORS[epoch] if epoch else format_time(t))
        vals = [None if isinstance(v, float) and v != v else v for v in (r[f"v{i}"] for i in range(len(plan.columns)))]
        tags = [r[f"t{i}"] for i in range(len(plan.tags))]
        if not out or out[-1][0] != tags:
            out.append((tags, []))
        out[-1][1].append([t, *vals])
    return [
        {
            "name": plan.name,
            **({"tags": dict(zip(plan.tags, tags))} if plan.tags else {}),
            "columns": ["time", *plan.columns],
            "values": v,
        }
        for tags, v in out
    ]


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from([None, "", "a", "b"]),
            st.one_of(st.none(), _NS, st.integers(min_value=0, max_value=10**6).map(lambda s: s * 10**9)),
            st.one_of(st.none(), st.floats(allow_infinity=False)),
            st.one_of(st.none(), st.integers(min_value=-(2**63), max_value=2**63 - 1)),
        ),
        max_size=40,
    ),
    epoch=st.sampled_from([None, "ns", "u", "ms", "s", "m", "h"]),
    tagged=st.booleans(),
    small=st.booleans(),
)
def test_answer_series_equals_the_row_at_a_time_reference(rows, epoch, tagged, small):
    """Both ways of formatting: a value at a time (answers of up to SMALL_ANSWER_ROWS rows) and a
    column at a time (larger ones; the threshold set to 0 here)."""
    from unittest import mock

    import pyarrow as pa

    from tracehouse.server import influxql_sql
    from tracehouse.server.influxql_sql import Plan, answer_series

    cols = {"time": pa.array([r[1] for r in rows], pa.int64())}
    if tagged:
        cols = {"t0": pa.array([r[0] for r in rows], pa.string()), **cols}
    cols["v0"] = pa.array([r[2] for r in rows], pa.float64())
    cols["v1"] = pa.array([r[3] for r in rows], pa.int64())
    table = pa.table(cols)
    plan = Plan("", "m", ["host"] if tagged else [], ["f", "n"])
    with mock.patch.object(influxql_sql, "SMALL_ANSWER_ROWS", 10**6 if small else 0):
        got = answer_series(plan, table, epoch)
    assert json.loads(json.dumps(got)) == json.loads(json.dumps(_reference_series(plan, table, epoch)))
