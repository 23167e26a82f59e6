"""The strace parser never crashes or hangs: random bytes, truncated and mutated real lines, 1 MB lines.

Properties checked on every input: the parser returns (no exception, no hang), the
batches match the declared schemas, every line is either an event, a note or a
rejected line, and the result does not depend on how the input is cut into chunks.
The importer on top either imports or raises BadInput, never leaving a trace behind.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracehouse
from helpers import paths
from tracehouse import _core
from tracehouse.errors import BadInput
from tracehouse.formats.strace import importer as imp

DATA = paths.DATA / "strace"
REAL = [line for f in ("threads.strace", "single-noy.strace") for line in (DATA / f).read_bytes().split(b"\n") if line]
SCHEMAS = _core.strace_schemas()


def run(data: bytes, cuts: list[int], *, batch_rows: int = 7, max_line: int = 1 << 16) -> tuple[dict, list]:
    """Parse `data` fed in pieces ending at `cuts`; returns (stats, rows per type)."""
    p = _core.StraceParser(batch_rows=batch_rows, max_line=max_line)
    out: dict[str, list[pa.RecordBatch]] = {}
    pos = 0
    for c in sorted(set(min(max(c, 0), len(data)) for c in cuts)) + [len(data)]:
        if c > pos:  # an empty chunk would end the input
            for name, b in p.feed(data[pos:c]):
                out.setdefault(name, []).append(b)
            pos = c
    p.feed(b"")
    for name, b in p.finish() + p.late():
        out.setdefault(name, []).append(b)
    for name, bs in out.items():
        for b in bs:
            assert b.schema.equals(SCHEMAS[name])
    rows = {name: pa.Table.from_batches(bs).to_pylist() for name, bs in out.items()}
    st_ = p.stats
    assert len(p.rejects()) == min(10, st_["rejected"])
    return st_, rows


def check(data: bytes, cuts: list[int]) -> None:
    whole_stats, whole = run(data, [])
    cut_stats, cut = run(data, cuts)
    assert cut_stats == whole_stats
    assert {k: sorted(map(repr, v)) for k, v in cut.items()} == {k: sorted(map(repr, v)) for k, v in whole.items()}


mutation = st.sampled_from(
    [
        lambda line, k: line[:k],  # truncated
        lambda line, k: line[k:],  # front cut off
        lambda line, k: line[:k] + b"\xff\x00" + line[k:],  # junk bytes
        lambda line, k: line[:k] + b'"' + line[k:],  # unbalanced quote
        lambda line, k: line[:k] + b"<" + line[k:],  # stray angle
        lambda line, k: line[:k] + b")" * 3 + line[k:],  # stray parens
        lambda line, k: line,  # intact
    ]
)

real_line = st.builds(
    lambda i, m, k: m(REAL[i % len(REAL)], k % (len(REAL[i % len(REAL)]) + 1)),
    st.integers(0, 10_000),
    mutation,
    st.integers(0, 10_000),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=600), st.lists(st.integers(0, 600), max_size=6))
def test_random_bytes(data, cuts):
    check(data, cuts)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(real_line, min_size=1, max_size=40), st.lists(st.integers(0, 5000), max_size=8))
def test_truncated_and_mutated_real_lines(lines, cuts):
    check(b"\n".join(lines) + b"\n", cuts)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(real_line, min_size=1, max_size=20), st.booleans())
def test_importer_imports_or_says_bad_input(lines, strict):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "f.strace"
        path.write_bytes(b"\n".join(lines))
        store = tracehouse.open(Path(d) / "s")
        try:
            r = imp.import_file(store, path, "f", strict=strict)
        except BadInput:
            assert store.traces() == []
        else:
            n = store.sql('SELECT count(*) AS n FROM "f".events').column("n")[0].as_py()
            assert n == r.events > 0
            assert not strict or r.rejected == 0
        finally:
            store.close()


def test_one_megabyte_lines():
    big_write = b'1.0 write(1, "' + b"x" * (1 << 20) + b'", 1048576) = 1048576 <0.000001>'
    big_garbage = b"9" * (1 << 20)
    data = b"\n".join([REAL[0], big_write, big_garbage, REAL[1], big_write[:-40]]) + b"\n"
    check(data, [100, 70_000, 1 << 20, (1 << 20) + 5000])
    # Within the default limit (16 MiB) the 1 MB call is an event with its arguments.
    p = _core.StraceParser()
    batches = p.feed(big_write + b"\n") + p.finish() + p.late()
    t = pa.Table.from_batches([b for name, b in batches if name == "syscall"])
    assert t.column("size").to_pylist() == [1 << 20]
    assert p.stats["rejected"] == 0
    # Beyond max_line, lines are rejected without being held in memory.
    st_, rows = run(data, [10, 1 << 19], max_line=1000)
    assert st_["rejected"] == 3 and st_["lines"] == 5


def test_no_newline_at_all():
    check(b"1.0 read(0, " * 50_000, [7, 100_000, 300_000])
