"""The Rust line-protocol decoder (`_core.decode_lines_many`, the server's path) under hypothesis.

Properties: any bytes, split into any number of bodies, decode without a crash into
accepted rows plus line errors numbered within each body, with each body's row counts
adding up to the shared batches; valid points written with every escape come back
exactly (values, types, timestamps, tag sets interned once) however they are split.
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tracehouse import _core

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def decode(items: list[tuple[bytes, str, int, int]], **kw):
    schemas, producers = _core.LpSchemas(), _core.LpProducers()
    return _core.decode_lines_many(items, schemas, producers, **kw), schemas, producers


# -- any input ------------------------------------------------------------------------

lp_bytes = st.lists(
    st.one_of(
        st.binary(max_size=40),
        st.sampled_from(
            [
                b"m",
                b"m,t=1",
                b" v=1",
                b"=",
                b",",
                b"\\",
                b'"',
                b" ",
                b"\n",
                b"1i",
                b"t",
                b"\xff",
                b"9223372036854775807",
                b"-1.5e3",
                b"#",
                b"\r\n",
                b"u",
            ]
        ),
    ),
    max_size=30,
).map(b"".join)


@SETTINGS
@given(
    st.lists(
        st.tuples(lp_bytes, st.sampled_from(["ns", "us", "ms", "s"]), st.integers(1, 1000)), min_size=1, max_size=4
    )
)
def test_any_bytes_decode_into_rows_and_numbered_errors(bodies):
    items = [(body, precision, 0, first) for body, precision, first in bodies]
    d, schemas, producers = decode(items, max_line=64, max_errors=1000)
    assert len(d["bodies"]) == len(items)
    per_batch = [0] * len(d["batches"])
    for (body, _p, first), b in zip(bodies, d["bodies"]):
        assert b["rows"] + b["error_count"] == b["lines"]
        lines = [line for line, _msg in b["errors"]]
        assert lines == sorted(set(lines))
        assert all(first <= line <= b["last_line"] for line in lines)
        assert b["last_line"] == first + body.count(b"\n") - (1 if body.endswith(b"\n") else 0) or body == b""
        assert sum(n for _i, n in b["rows_by_batch"]) == b["rows"]
        for i, n in b["rows_by_batch"]:
            per_batch[i] += n
    assert per_batch == [batch.num_rows for _n, batch in d["batches"]]
    assert all(n > 0 for n in per_batch)  # no empty batches
    for name, b in d["batches"]:
        assert b.schema.names[:2] == ["ts", "producer"]
        assert [c for c, _t in schemas.columns(name)] == b.schema.names[2:]
        assert b.column("producer").null_count == 0 and b.column("ts").null_count == 0
    new = producers.take_new()
    assert [p[0] for p in new] == list(range(len(new)))


# -- valid points round-trip ------------------------------------------------------------

ident = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True).filter(
    lambda s: s not in ("ts", "producer", "seq", "dur", "type")
)
free_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), min_size=1, max_size=12)


def esc(s: str, chars: str) -> str:
    out = s.replace("\\", "\\\\")
    for c in chars:
        out = out.replace(c, "\\" + c)
    return out


def value_strategy(t: str):
    return {
        "float64": st.floats(allow_nan=False, allow_infinity=False),
        "int64": st.integers(-(2**63), 2**63 - 1),
        "string": st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=20),
        "bool": st.booleans(),
    }[t]


def fmt_value(t: str, v) -> str:
    if t == "float64":
        return repr(float(v))
    if t == "int64":
        return f"{v}i"
    if t == "bool":
        return "true" if v else "F"
    return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'


@st.composite
def points(draw):
    fields = draw(
        st.dictionaries(ident, st.sampled_from(["float64", "int64", "string", "bool"]), min_size=1, max_size=6)
    )
    tagsets = draw(
        st.lists(
            st.dictionaries(
                free_text.filter(lambda s: s.strip() == s and not s.startswith("#")), free_text, max_size=3
            ),
            min_size=1,
            max_size=4,
        )
    )
    meas = draw(ident)
    out = []
    for _ in range(draw(st.integers(1, 15))):
        keys = draw(st.lists(st.sampled_from(sorted(fields)), min_size=1, max_size=len(fields), unique=True))
        vals = {k: draw(value_strategy(fields[k])) for k in keys}
        tags = draw(st.sampled_from(tagsets))
        ts = draw(st.one_of(st.none(), st.integers(-(2**63) + 1, 2**63 - 1)))
        out.append((tags, vals, ts))
    return meas, fields, out


@SETTINGS
@given(points(), st.lists(st.integers(0, 15), max_size=3))
@example(
    ("A", {"U": "float64", "u": "float64"}, [({}, {"U": 0.0, "u": 0.0}, None)]), []
)  # (CI's draw: keys one SQL name)
def test_valid_points_round_trip_with_escapes(case, cuts):
    meas, fields, pts = case
    lines = []
    for tags, vals, ts in pts:
        tag_txt = "".join(f",{esc(k, ',= ')}={esc(v, ',= ')}" for k, v in tags.items())
        field_txt = ",".join(f"{esc(k, ',= ')}={fmt_value(fields[k], v)}" for k, v in vals.items())
        lines.append(f"{esc(meas, ', ')}{tag_txt} {field_txt}" + ("" if ts is None else f" {ts}"))
    # The points split into consecutive bodies, body k stamping lines without a ts with -5 - k.
    bounds = [0, *sorted({min(c, len(lines)) for c in cuts}), len(lines)]
    parts = [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]
    items = [("\n".join(lines[a:b]).encode(), "ns", -5 - k, 1) for k, (a, b) in enumerate(parts)]
    d, schemas, producers = decode(items, max_errors=1000)
    assert [b["errors"] for b in d["bodies"]] == [[]] * len(parts), d["bodies"][:2]
    assert [b["rows"] for b in d["bodies"]] == [b - a for a, b in parts]
    ((name, batch),) = d["batches"]
    assert name == meas
    # each field key its own column, named by the key unless another key took that SQL name
    # (`U` beside `u`: `u_2`), the key then recorded beside it
    keys = schemas.keys(meas)
    by_key = {keys.get(c, c): (c, t) for c, t in schemas.columns(meas)}
    assert {k: t for k, (_c, t) in by_key.items()} == {k: fields[k] for k in by_key} and set(by_key) <= set(fields)
    got = batch.to_pydict()
    default = [-5 - k for k, (a, b) in enumerate(parts) for _ in range(a, b)]
    assert got["ts"] == [dflt if ts is None else ts for dflt, (_t, _v, ts) in zip(default, pts)]
    for i, (_tags, vals, _ts) in enumerate(pts):
        for k, (c, _t) in by_key.items():
            want = vals.get(k)
            have = got[c][i]
            if isinstance(want, float):
                assert have == want or (math.isnan(have) and math.isnan(want))
            else:
                assert have == want, (k, i)
    # One producer per distinct tag set, its tags exact.
    new = {pid: dict(tags) for pid, _name, tags in producers.take_new()}
    for i, (tags, _vals, _ts) in enumerate(pts):
        assert new[got["producer"][i]] == tags
    assert len(new) == len({tuple(sorted(t.items())) for t, _v, _ts in pts})


# -- the fast path agrees with the general path -------------------------------------------

# Field values as text, many near the typed parsers' edges (digit counts, signs, exponents,
# suffixes), so a line often keeps the previous line's layout but not its types.
value_text = st.one_of(
    st.from_regex(r"[+-]?[0-9]{1,17}(\.[0-9]{0,4})?", fullmatch=True),
    st.from_regex(r"-?[0-9]{1,20}[iu]", fullmatch=True),
    st.sampled_from(["1e5", ".5", "5.", "-.5", "+3i", "t", "FALSE", '"x,y z"', '"a\\"b"', "1.2.3", "-", "i", "1x"]),
)


@st.composite
def shaped_lines(draw):
    keys = draw(
        st.lists(st.sampled_from(["a", "b", "c", "d\\ e", "f\\,g", "h\\=i"]), min_size=1, max_size=4, unique=True)
    )
    out = []
    for _ in range(draw(st.integers(1, 25))):
        meas = draw(st.sampled_from(["m", "m", "n"]))
        tags = draw(st.sampled_from(["", ",host=a", ",host=b", ",host=a\\ b,dc=x"]))
        ks = keys if draw(st.booleans()) else draw(st.permutations(keys))[: draw(st.integers(1, len(keys)))]
        fields = ",".join(f"{k}={draw(value_text)}" for k in ks)
        ts = draw(st.sampled_from(["", " 5", " -7", " 1234567890123456789", " 99999999999999999999", " 1x", " 5 6"]))
        out.append(f"{meas}{tags} {fields}{ts}".encode())
    return out


def _rows_and_errors(lines: list[bytes], together: bool, seq: bool):
    """Each line's outcome: ("row", {column: value}) or ("error", message)."""
    schemas, producers = _core.LpSchemas(), _core.LpProducers()
    counters = _core.SeqCounters() if seq else None
    calls = [b"\n".join(lines)] if together else lines
    out: list = []
    for body in calls:
        d = _core.decode_lines_many([(body, "ns", 0, 1)], schemas, producers, seq=counters, max_errors=1000)
        errors = dict(d["bodies"][0]["errors"])
        cursors = {name: 0 for name, _b in d["batches"]}
        tables = {name: b.to_pylist() for name, b in d["batches"]}
        for no, line in enumerate(body.split(b"\n"), start=1):
            if no in errors:
                out.append(("error", errors[no]))
                continue
            name = line.split(b" ")[0].split(b",")[0].decode()
            row = tables[name][cursors[name]]
            cursors[name] += 1
            out.append(("row", name, {k: v for k, v in row.items() if v is not None}))
    return out


@SETTINGS
@given(shaped_lines(), st.booleans())
def test_lines_decoded_together_equal_lines_decoded_one_by_one(lines, seq):
    # One call per line never takes the fast path (a call's first line has no layout to
    # follow); one call for all of them takes it whenever a line repeats the last shape.
    assert _rows_and_errors(lines, True, seq) == _rows_and_errors(lines, False, seq)
