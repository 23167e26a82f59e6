"""The Chrome parser never crashes or hangs: random bytes, truncated documents, wrong types, any chunking, 1 MB lines."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_chrome import SAMPLE

import tracehouse
from tracehouse import _core
from tracehouse.errors import BadInput
from tracehouse.formats.chrome import importer as chrome_import

DOC = json.dumps({"traceEvents": SAMPLE}, indent=1).encode()

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), st.text(max_size=6)
)
values = st.recursive(
    scalars,
    lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=4), c, max_size=3)),
    max_leaves=6,
)
event = st.fixed_dictionaries(
    {},
    optional={
        "ph": st.one_of(st.sampled_from(list("XBEiICbenstfPMR")), values),
        "ts": st.one_of(st.integers(-(2**64), 2**64), st.floats(allow_nan=False, allow_infinity=False), values),
        "dur": st.one_of(st.integers(-5, 10**6), values),
        "pid": st.one_of(st.integers(0, 3), st.text(max_size=2), values),
        "tid": st.one_of(st.integers(0, 3), values),
        "name": st.one_of(st.sampled_from(["a", "b", "process_name", "thread_name"]), values),
        "cat": values,
        "id": st.one_of(st.integers(0, 2), values),
        "id2": values,
        "s": values,
        "bp": values,
        "args": st.one_of(
            st.dictionaries(st.sampled_from(["k", "name", "v", "sort_index", "x.y"]), values, max_size=3), values
        ),
    },
)


def run(data: bytes, cuts: list[int], strict: bool = False):
    p = _core.NativeParser("chrome", strict=strict, batch_rows=7)
    rows = 0
    prev = 0
    for c in sorted(set(min(max(c, 0), len(data)) for c in cuts)) + [len(data)]:
        rows += sum(b.num_rows for _, b in p.feed(data[prev:c]))
        prev = c
    rows += sum(b.num_rows for _, b in p.finish())
    p.producers()
    assert p.stats["rejected"] >= len(p.problems)
    return p, rows


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=400), st.lists(st.integers(0, 400), max_size=5), st.booleans())
def test_random_bytes(data, cuts, strict):
    run(data, cuts, strict)


@settings(max_examples=150, deadline=None)
@given(st.lists(event, max_size=8), st.lists(st.integers(0, 2000), max_size=6), st.booleans(), st.booleans())
def test_wrong_types_and_any_chunking(events, cuts, strict, array):
    data = json.dumps(events if array else {"traceEvents": events}).encode()
    p, rows = run(data, cuts, strict)
    whole, whole_rows = run(data, [], strict)
    assert rows == whole_rows
    assert p.stats == whole.stats
    assert p.problems == whole.problems


@settings(max_examples=100, deadline=None)
@given(st.integers(0, len(DOC)), st.lists(st.integers(0, len(DOC)), max_size=4))
def test_truncated_documents(cut, cuts):
    _, rows = run(DOC[:cut], cuts)
    _, full = run(DOC, [])
    assert rows <= full


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(event, min_size=1, max_size=6), st.booleans())
def test_imports_never_half_register(events, strict):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "f.json"
        path.write_text(json.dumps(events))
        store = tracehouse.open(Path(d) / "s")
        try:
            rep = chrome_import.import_file(store, path, "f", strict=strict)
        except BadInput:
            assert store.traces() == []
        else:
            n = store.sql('SELECT count(*) FROM "f".events').column(0)[0].as_py()
            assert n == rep.events > 0
            assert not strict or rep.rejected == 0
        finally:
            store.close()


def test_one_megabyte_lines(store, tmp_path):
    big = "x" * (1 << 20)
    path = tmp_path / "big.json"
    path.write_text(
        "[\n"
        + json.dumps({"ph": "i", "ts": 1, "pid": 1, "name": big, "args": {"k": big}})
        + ",\n"
        + '{"ph": "i", "ts": 2, "pid": 1, "name": "'
        + big
        + "\n"
        + '{"ph":"i","ts":3,"pid":1}]\n'
    )
    rep = chrome_import.import_file(store, path, "big")
    assert (rep.events, rep.rejected) == (2, 1)
    assert store.sql('SELECT length(name) FROM "big".instant ORDER BY ts').column(0).to_pylist() == [1 << 20, 0]
