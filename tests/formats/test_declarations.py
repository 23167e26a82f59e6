"""The event types declared in Rust (src/formats/decl.rs) are what the parsers emit.

The Python format modules read their event types from `_core.format_declarations()`, so there
is no second copy to compare; what can still go wrong is a parser whose batches do not follow
its declaration (a column added to one and not the other). Each parser is fed a real capture
and every batch it emits is held against the declared columns and Arrow types.
"""

from __future__ import annotations

import gzip
import importlib
from pathlib import Path

import pyarrow as pa
import pytest

from tracehouse import _core
from tracehouse.formats import bpftrace, registry, stap

DATA = Path(__file__).parent.parent / "data"
GOLDEN = Path(__file__).parent
DECLARED = _core.format_declarations()
# Each declared format's module: `tracehouse.formats.<name>` (a format is its folder).
MODULES = {name: importlib.import_module(f"tracehouse.formats.{name}") for name in DECLARED}


def _run(parser, data: bytes) -> list[tuple[str, pa.RecordBatch]]:
    return list(parser.feed(data)) + list(parser.finish())


def _strace(path: Path):
    p = _core.StraceParser()
    out = []
    while p.need() is not None:
        out += p.feed(path.read_bytes())
        out += p.feed(b"")
    return out + list(p.finish()) + list(p.late())


def _golden(fmt: str):
    """A format's parser over its first golden case (without the case's flags: bpftrace's and
    SystemTap's lines then land in their declared `printf` type)."""
    case = min(p.parent for p in (GOLDEN / fmt).glob("*/input"))
    data = (case / "input").read_bytes()
    if data[:2] == b"\x1f\x8b":  # the import gunzips before the parser sees the bytes
        data = gzip.decompress(data)
    return _run(_core.NativeParser(fmt), data)


# Every format with a NativeParser is run over its golden input; the others here by hand.
CASES = {name: (lambda n=name: _golden(n)) for name, d in DECLARED.items() if d["parser_options"] is not None}
CASES |= {
    "strace": lambda: _strace(DATA / "strace" / "threads.strace"),
    "tod": lambda: list(_core.TodGenerator(events=2_000, threads=3).next_batches(10_000).items()),
}


def test_the_rust_declared_formats_are_the_builtin_ones():
    declared = DECLARED
    assert set(declared) <= set(registry.formats())
    for name, mod in MODULES.items():
        assert name == mod.FORMAT and declared[name]["description"] == mod.DESCRIPTION
        assert [et.name for et in mod.EVENT_TYPES] == [e[0] for e in declared[name]["event_types"]]
        for et in mod.EVENT_TYPES:
            assert all(c.unit and c.doc for c in et.params), (name, et.name)
    assert set(bpftrace.RESULTS) == set(stap.RESULTS) == {"hist", "map", "stats"}


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_parser_batches_follow_the_declaration(fmt):
    types = {et.name: et for et in MODULES[fmt].EVENT_TYPES}
    batches = CASES[fmt]()
    seen = set()
    for name, batch in batches:
        if name not in types:  # a bpftrace/SystemTap --pattern or --span type, a measurement: made per import
            assert fmt in ("bpftrace", "stap", "lineproto"), (fmt, name)
            continue
        seen.add(name)
        want = [(c.name, c.arrow_type) for c in types[name].columns]
        got = [(f.name, f.type) for f in batch.schema]
        assert got[: len(want)] == want, (fmt, name)
        # Only Chrome adds columns, one per args key it meets.
        assert all(n.startswith(("arg_", "end_arg_")) for n, _ in got[len(want) :]), (fmt, name, got[len(want) :])
    assert seen or not types, f"{fmt}: no batch of a declared type"


def test_bpftrace_aggregates_follow_the_declared_result_tables():
    p = _core.NativeParser("bpftrace")
    _run(p, (DATA / "bpftrace" / "aggregates.json").read_bytes())
    kinds = set()
    for kind, batch in p.results():
        kinds.add(kind)
        assert [(f.name, f.type) for f in batch.schema] == [(c.name, c.arrow_type) for c in bpftrace.RESULTS[kind]]
    assert kinds == {"hist", "map", "stats"}
