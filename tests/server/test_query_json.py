"""JSON answers of /api/query are strict JSON and exact: sums past int64, wide decimals, NaN and
infinities, binary values."""

from __future__ import annotations

import base64
import decimal
import json
import math
import shutil
import subprocess

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.server import Server
from tracehouse.jsonvalues import json_bytes, json_column


def strict(body: bytes):
    """json.loads as JSON.parse and Go read it: NaN, Infinity and -Infinity are errors."""

    def refuse(name):
        raise ValueError(f"not JSON: {name}")

    return json.loads(body, parse_constant=refuse)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("json") / "store", "--quiet")
    yield s
    s.stop()


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_curl_bodies_json_form_or_sql_whatever_their_content_type(served):
    """`curl -d '{"sql": ...}'` sends form-urlencoded: its JSON was run as SQL (Parser Error:
    zero-length delimited identifier). JSON, a form and the SQL itself are each read as such."""
    url = f"http://127.0.0.1:{served.port}/api/query"
    for args in (
        ["-d", '{"sql": "SELECT 40 + 2 AS n"}'],
        ["--data-urlencode", "sql=SELECT 40 + 2 AS n"],
        ["-d", "SELECT 40 + 2 AS n"],
        ["-H", "Content-Type: application/json", "-d", '{"sql": "SELECT 40 + 2 AS n"}'],
    ):
        r = subprocess.run(["curl", "-s", url, *args], capture_output=True, timeout=60)
        assert strict(r.stdout)["rows"] == [[42]], (args, r.stdout)
    r = subprocess.run(
        ["curl", "-s", url, "-d", "SELECT a=1 AS t FROM (VALUES (1)) v(a)"], capture_output=True, timeout=60
    )
    assert strict(r.stdout)["rows"] == [[True]], r.stdout  # SQL with `=` is not taken for a form


def test_overflowing_sums_wide_decimals_nan_and_blobs_come_back_exact(served):
    sql = (
        "SELECT sum(x) AS s, 'nan'::DOUBLE AS a, '-inf'::FLOAT AS b, 1.5::DECIMAL(10, 2) AS d,"
        " 12345678901234567.891::DECIMAL(38, 3) AS w, [1.0, 'inf'::DOUBLE] AS l, 'ab\\xFF'::BLOB AS blob"
        " FROM (VALUES (9223372036854775807::BIGINT), (10::BIGINT)) t(x)"
    )
    status, _, body = served.request(
        "POST", "/api/query", json.dumps({"sql": sql}).encode(), {"Content-Type": "application/json"}
    )
    assert status == 200, body
    row = strict(body)["rows"][0]
    # (a double made the sum 9.223372036854776e+18; NaN made the body unreadable to JSON.parse;
    # the blob read "b'ab\\xff'")
    assert row == [9223372036854775817, None, None, 1.5, "12345678901234567.891", [1.0, None], "YWL/"]


decimals = st.decimals(min_value=-(10**30), max_value=10**30, allow_nan=False, places=0)


@settings(deadline=None)
@given(st.lists(st.one_of(st.none(), decimals), max_size=20))
def test_integer_decimals_are_exact_json_numbers(values):
    col = pa.array(values, pa.decimal128(38, 0))
    got = strict(json_bytes(json_column(col)))
    assert got == [None if v is None else int(v) for v in values]


@settings(deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats()), max_size=20))
def test_floats_are_strict_json_with_null_where_not_finite(values):
    got = strict(json_bytes(json_column(pa.array(values, pa.float64()))))
    assert got == [None if v is None or not math.isfinite(v) else v for v in values]


@settings(deadline=None)
@given(st.lists(st.decimals(min_value=-(10**20), max_value=10**20, allow_nan=False, places=4), max_size=10))
def test_decimals_with_a_scale_read_back_to_the_same_value(values):
    for precision in (12, 30):
        typ = pa.decimal128(precision, 4)
        fitting = [v for v in values if abs(v) < decimal.Decimal(10) ** (precision - 4)]
        got = strict(json_bytes(json_column(pa.array(fitting, typ))))
        assert [decimal.Decimal(str(g)) for g in got] == fitting


@settings(deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=8)), max_size=10))
def test_binary_values_are_base64(values):
    got = strict(json_bytes(json_column(pa.array(values, pa.binary()))))
    assert got == [None if v is None else base64.b64encode(v).decode() for v in values]
