"""Every format's Rust parser under random input: it never crashes, and how the input is cut into
chunks changes nothing (rows, counts, problems, producers; in strict mode, the record that
stopped the parse).

The formats come from the declarations (`_core.format_declarations()`: those with a
`NativeParser`), so a new format is fuzzed here without being listed; the bytes are random
and pieces of its own golden inputs, shuffled (format-specific fuzzing with well-formed
records is in each format's own test file).
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracehouse import _core

HERE = Path(__file__).parent
OPTIONS = {
    n: {o[0] for o in d["parser_options"]}
    for n, d in _core.format_declarations().items()
    if d["parser_options"] is not None
}
FORMATS = sorted(OPTIONS)


def _pieces(fmt: str) -> list[bytes]:
    """Lines of the format's golden inputs: material that reaches past the first checks."""
    out: list[bytes] = []
    for p in sorted((HERE / fmt).glob("*/input")):
        data = p.read_bytes()
        if data[:2] == b"\x1f\x8b":  # the import gunzips before the parser sees the bytes
            data = gzip.decompress(data)
        out += data.splitlines()[:200]
    return out or [b""]


def _parse(fmt: str, data: bytes, cuts: list[int], strict: bool):
    # A time a parser would take from the clock (line protocol without timestamps) is fixed.
    fixed = {"default_ts": 0} if "default_ts" in OPTIONS[fmt] else {}
    p = _core.NativeParser(fmt, strict=strict, batch_rows=5, **fixed)
    rows, prev = [], 0
    for c in sorted(set(min(c, len(data)) for c in cuts)) + [len(data)]:
        rows += p.feed(data[prev:c])
        prev = c
    rows += p.finish()
    while more := p.drain():  # a parser making its rows as they are taken (pprof's samples)
        rows += more
    by_type: dict[str, list] = {}
    for t, b in rows:
        by_type.setdefault(t, []).extend(b.to_pylist())
    return by_type, p.stats, p.problems, p.fatal, p.producers(), p.details_json


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_native_parser_survives_random_input_cut_anywhere(fmt):
    pieces = _pieces(fmt)
    line = st.one_of(
        st.binary(max_size=40), st.sampled_from(pieces), st.sampled_from(pieces).map(lambda b: b[: len(b) // 2])
    )

    @settings(max_examples=60, deadline=None)
    @given(st.lists(line, max_size=20), st.lists(st.integers(0, 800), max_size=5), st.booleans())
    def check(lines, cuts, strict):
        data = b"\n".join(lines)
        got, whole = _parse(fmt, data, cuts, strict), _parse(fmt, data, [], strict)
        if whole[3] is not None:
            # Stopped by a bad record (strict): that record is the same whatever the chunking; what
            # was parsed before it is dropped by the import (nothing of a strict failure registers).
            assert got[3] == whole[3]
        else:
            assert got == whole

    check()
