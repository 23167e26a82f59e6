"""The Python face of the native TOD generator (``tracehouse._core.TodGenerator``).

The event-level invariants are proven in ``cargo test`` (src/workload/tod/tests.rs); here we
check what crosses the binding: names, Arrow types, batching, determinism, errors.
"""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tracehouse import _core

COLUMNS = {
    "field_write": ["ts", "producer", "seq", "parent_seq", "field_id", "target", "value"],
    "var_write": ["ts", "producer", "seq", "parent_seq", "var_id", "value"],
    "behavior_enter": [
        "ts",
        "producer",
        "seq",
        "parent_seq",
        "behavior_id",
        "target",
        "arg_count",
        "arg0",
        "arg1",
        "arg2",
        "arg3",
    ],
    "behavior_exit": ["ts", "producer", "seq", "parent_seq", "behavior_id", "ret_value"],
}
ARGS = {"arg0", "arg1", "arg2", "arg3"}


def drain(gen, max_events=10_000):
    """All batches of ``gen``, concatenated per event type."""
    parts = {t: [] for t in _core.TOD_EVENT_TYPES}
    while (batches := gen.next_batches(max_events)) is not None:
        for t, b in batches.items():
            parts[t].append(b)
    return {t: pa.Table.from_batches(bs) for t, bs in parts.items() if bs}


def test_module_exports():
    assert _core.TOD_EVENT_TYPES == ("field_write", "var_write", "behavior_enter", "behavior_exit")
    assert isinstance(_core.__version__, str) and _core.__version__.count(".") == 2


def test_batches_have_declared_columns_and_types():
    batches = _core.TodGenerator(events=5_000).next_batches(5_000)
    assert list(batches) == list(_core.TOD_EVENT_TYPES)
    schemas = _core.tod_schemas()
    for name, batch in batches.items():
        assert isinstance(batch, pa.RecordBatch)
        assert batch.schema.names == COLUMNS[name]
        assert batch.schema.equals(schemas[name])
        for field in batch.schema:
            want = pa.int32() if field.name == "producer" else pa.int64()
            assert field.type == want, (name, field)
            assert field.nullable == (field.name in ARGS), (name, field)
        batch.validate(full=True)


def test_args_are_null_past_arg_count():
    enters = drain(_core.TodGenerator(events=20_000))["behavior_enter"]
    argc = enters["arg_count"]
    assert pc.min(argc).as_py() >= 0 and pc.max(argc).as_py() <= 4
    for k in range(4):
        valid = pc.is_valid(enters[f"arg{k}"])
        assert valid.equals(pc.greater(argc, k)), f"arg{k}"


def test_same_seed_same_events_whatever_the_batch_size():
    a = drain(_core.TodGenerator(events=30_000, seed=7), max_events=1_000_000)
    b = drain(_core.TodGenerator(events=30_000, seed=7), max_events=777)
    assert a.keys() == b.keys()
    for t in a:
        assert a[t].combine_chunks().equals(b[t].combine_chunks()), t


def test_other_seed_other_events():
    a = drain(_core.TodGenerator(events=5_000, seed=1))
    b = drain(_core.TodGenerator(events=5_000, seed=2))
    assert not a["field_write"].equals(b["field_write"])


@pytest.mark.parametrize("events", [0, 1, 999, 50_000])
def test_event_count_and_exhaustion(events):
    gen = _core.TodGenerator(events=events, threads=4, max_depth=5)
    assert gen.events == events and gen.emitted == 0
    total = sum(t.num_rows for t in drain(gen).values())
    assert events <= total <= events + 4 * (5 + 1)
    assert gen.emitted == total
    assert gen.exhausted
    assert gen.next_batches() is None
    assert gen.next_batches(5) is None


def test_max_events_is_respected():
    gen = _core.TodGenerator(events=10_000)
    sizes = []
    while (batches := gen.next_batches(max_events=333)) is not None:
        n = sum(b.num_rows for b in batches.values())
        assert 1 <= n <= 333
        assert all(b.num_rows > 0 for b in batches.values())
        sizes.append(n)
    assert sizes[:-1] == [333] * (len(sizes) - 1)
    assert sum(sizes) == gen.emitted


def test_iteration_yields_every_event():
    gen = _core.TodGenerator(events=200_000, seed=3)
    total = sum(sum(b.num_rows for b in batches.values()) for batches in gen)
    assert total == gen.emitted >= 200_000


def test_trace_invariants_hold_after_the_binding():
    tables = drain(_core.TodGenerator(events=40_000, seed=5))
    common = ["ts", "producer", "seq"]
    merged = pa.concat_tables([t.select(common) for t in tables.values()]).sort_by("ts")
    ts = merged["ts"].to_numpy()
    assert ts[0] >= 1_000_000_000
    assert (ts[1:] > ts[:-1]).all(), "ts strictly increasing across types"
    producers = merged["producer"].to_numpy()
    seqs = merged["seq"].to_numpy()
    assert set(producers.tolist()) == set(range(1, 11))
    for p in range(1, 11):
        s = seqs[producers == p]
        assert (s == np.arange(len(s))).all(), f"seq of producer {p}"
    assert tables["behavior_enter"].num_rows == tables["behavior_exit"].num_rows


@pytest.mark.parametrize("bad", [{"threads": 0}, {"methods": 0}, {"objects": 0}, {"locals": 0}])
def test_invalid_parameters_raise(bad):
    name = next(iter(bad))
    with pytest.raises(ValueError, match=name):
        _core.TodGenerator(events=10, **bad)


def test_invalid_max_events_raises():
    gen = _core.TodGenerator(events=10)
    with pytest.raises(ValueError, match="max_events"):
        gen.next_batches(0)
    with pytest.raises(OverflowError):
        gen.next_batches(-1)


def test_recycled_memory_never_changes_batches_still_referenced():
    """The generator reuses the columns of batches the caller dropped; whatever is still
    referenced (a column, a slice) must stay intact, and the dropped batches were right."""
    held = drain(_core.TodGenerator(events=60_000, seed=9), max_events=5_000)
    last = {t: COLUMNS[t][-1] for t in COLUMNS}  # value, value, arg3 (nullable), ret_value

    gen = _core.TodGenerator(events=60_000, seed=9)
    first = gen.next_batches(5_000)
    kept = {t: (b.column(0), b.slice(10, 20)) for t, b in first.items()}
    sums = {t: pc.sum(b[last[t]]).as_py() or 0 for t, b in first.items()}
    del first
    while (batches := gen.next_batches(5_000)) is not None:
        for t, b in batches.items():
            sums[t] += pc.sum(b[last[t]]).as_py() or 0
        del batches, b  # every batch is dropped: its columns may be reused from now on

    for t, table in held.items():
        assert pc.sum(table[last[t]]).as_py() == sums[t], t
        batch0 = table.to_batches()[0]
        col, sl = kept[t]
        assert col.equals(batch0.column(0)), t
        assert sl.equals(batch0.slice(10, 20)), t


def test_stub_matches_the_native_module():
    """python/tracehouse/_core.pyi is hand-written: every name it declares must exist,
    and every public name of the module must be declared."""
    import ast
    from pathlib import Path

    stub = ast.parse((Path(_core.__file__).parent / "_core.pyi").read_text())
    declared, methods = set(), {}
    for node in stub.body:
        if isinstance(node, ast.ClassDef):
            declared.add(node.name)
            methods[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        elif isinstance(node, ast.FunctionDef):
            declared.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            declared.add(node.target.id)
    public = {n for n in dir(_core) if not n.startswith("_")} | {"__version__"}
    assert declared == public
    for cls, names in methods.items():
        for name in names:
            assert hasattr(getattr(_core, cls), name), f"{cls}.{name}"


def _stub_parameters(fn, method: bool) -> tuple[list[str], list[str]]:
    pos = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    if method and pos and pos[0] in ("self", "cls"):
        pos = pos[1:]
    return pos, [a.arg for a in fn.args.kwonlyargs]


def _native_parameters(obj) -> tuple[list[str], list[str]] | None:
    import inspect

    try:
        sig = inspect.signature(obj)  # PyO3's __text_signature__
    except (TypeError, ValueError):
        return None
    pos = [p.name for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    kwonly = [p.name for p in sig.parameters.values() if p.kind == p.KEYWORD_ONLY]
    if pos and pos[0] in ("self", "cls", "$self", "$cls", "$type"):
        pos = pos[1:]
    return pos, kwonly


def test_stub_signatures_match_the_native_module():
    """Every function and method of the stub names the native one's parameters, in order and of
    the same kind (positional or keyword-only): a parameter added in Rust and not in the stub
    fails here (properties aside; a callable without a text signature is not checked)."""
    import ast
    from pathlib import Path

    stub = ast.parse((Path(_core.__file__).parent / "_core.pyi").read_text())
    checked, wrong = 0, []
    for node in stub.body:
        items = []
        if isinstance(node, ast.FunctionDef):
            items.append((node.name, getattr(_core, node.name), node, False))
        elif isinstance(node, ast.ClassDef):
            cls = getattr(_core, node.name)
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and not any(
                    isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list
                ):
                    items.append(
                        (f"{node.name}.{fn.name}", cls if fn.name == "__init__" else getattr(cls, fn.name), fn, True)
                    )
        for name, obj, fn, method in items:
            native = _native_parameters(obj)
            if native is None:
                continue
            checked += 1
            if native != _stub_parameters(fn, method):
                wrong.append(f"{name}: native {native}, stub {_stub_parameters(fn, method)}")
    assert checked > 100  # PyO3 gives text signatures: the check really ran
    assert not wrong, "\n".join(wrong)


def test_crc32_equals_zlib_on_every_buffer_kind():
    import os
    import zlib

    import pyarrow as pa

    data = os.urandom(100_003)
    for value in (0, 1, 0xFFFFFFFF):
        assert _core.crc32(data, value) == zlib.crc32(data, value)
    assert _core.crc32(b"") == 0
    assert _core.crc32(pa.py_buffer(data)) == zlib.crc32(data)  # pyarrow exports format "b"
    assert _core.crc32(memoryview(data)[7:9001]) == zlib.crc32(data[7:9001])
    assert _core.crc32(bytearray(b"123456789")) == 0xCBF43926  # the CRC-32 check value
    with pytest.raises(ValueError, match="contiguous"):
        _core.crc32(memoryview(data)[::2])
