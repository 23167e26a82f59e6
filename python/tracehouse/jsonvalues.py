"""Arrow values as strict, exact JSON: what the SQL endpoint's and the CLI's JSON answers hold.

Owns the JSON form of an answer's values (`json_column`) and the strict encoder (`json_bytes`):
RFC 8259 has no NaN or Infinity (JavaScript's JSON.parse and Go refuse a body with one), and a
double cannot hold DuckDB's HUGEINT sums or wide decimals (`sum()` of two BIGINTs past 2^63
printed as 9.223372036854776e+18). A column is converted by Arrow at once; only the rare kinds
Arrow cannot convert (integers past int64, binary) go value by value.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

from . import lazy

pa = lazy.module("pyarrow")
pc = lazy.module("pyarrow.compute")


def json_bytes(doc: Any, separators: tuple[str, str] | None = None, indent: int | None = None) -> bytes:
    """`doc` as strict JSON (RFC 8259: no NaN or Infinity, which JSON.parse and Go refuse: a
    float that is not finite is null). default=str: dates, times and intervals become strings."""
    try:
        return json.dumps(doc, default=str, allow_nan=False, separators=separators, indent=indent).encode()
    except ValueError:  # a NaN or an infinity somewhere (an answer's float columns are done already)
        return json.dumps(_finite(doc), default=str, allow_nan=False, separators=separators, indent=indent).encode()


def _finite(v: Any) -> Any:
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    return v


def json_column(c) -> list:
    """A column of an answer as JSON-ready Python values, exact where JSON can be:
    - integer decimals (DuckDB's sum() of integers is HUGEINT) are JSON numbers, beyond int64 too
      (a cast to double turned sum(x) = 2^63 + 9 into 9.223372036854776e+18);
    - other decimals are numbers up to 15 digits (a double prints them back exactly), strings
      beyond;
    - floats that are not finite are null;
    - binary values are base64 strings (not Python's `b'...'`)."""
    t = c.type
    if pa.types.is_decimal(t):
        if t.scale == 0:
            try:
                return c.cast(pa.int64()).to_pylist()
            except pa.ArrowInvalid:  # beyond int64: Python's ints print exactly
                return [None if v is None else int(v) for v in c.to_pylist()]
        if t.precision <= 15:  # (through text: Arrow's decimal-to-double cast made 0.0017 0.0017000000000000001)
            return c.cast(pa.string()).cast(pa.float64()).to_pylist()
        return c.cast(pa.string()).to_pylist()
    if pa.types.is_floating(t):
        return pc.if_else(pc.is_finite(c), c, None).to_pylist()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return [None if v is None else base64.b64encode(v).decode() for v in c.to_pylist()]
    return c.to_pylist()


class RawSeries(bytes):
    """A whole InfluxDB series object (name, tags, columns, values) as JSON text already encoded
    natively (`_core.influx_raw_json`), spliced into the answer's JSON by its writer as it is."""
