"""The native Parquet writer of integer-only level-0 segments (src/store/intparquet.rs).

What it writes must read back exactly (pyarrow and DuckDB, every chunking, nulls, the extremes
of int32/int64), carry the statistics readers prune with (equal to what parquet-cpp computes),
keep pyarrow's schema metadata, and be what a checkpoint of an integer-only type writes."""

from __future__ import annotations

import os

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tracehouse import _core
from tracehouse.schema import Column, EventType
from tracehouse.store import segments

I64 = st.integers(-(2**63), 2**63 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)


def _write(path, table: pa.Table, *, dictionary=("producer",), row_group=1000, level=0) -> int:
    native = segments._native_options(table.schema, level)
    assert native is not None
    _, kv = native
    return _core.write_int_parquet(
        str(path), table.to_batches(), table.schema, list(dictionary), row_group, kv, segments.CREATED_BY
    )


@st.composite
def int_tables(draw):
    n = draw(st.integers(0, 700))
    cols, fields = [], []
    for i in range(draw(st.integers(1, 4))):
        wide = draw(st.booleans())
        nullable = draw(st.booleans())
        kind = draw(st.sampled_from(["any", "small", "sorted", "const"]))
        ints = I64 if wide else I32
        if kind == "any":
            vals = draw(st.lists(ints, min_size=n, max_size=n))
        elif kind == "small":
            vals = draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n))
        elif kind == "sorted":
            vals = sorted(draw(st.lists(ints, min_size=n, max_size=n)))
        else:
            vals = [draw(ints)] * n
        mask = draw(st.lists(st.booleans(), min_size=n, max_size=n)) if nullable else None
        t = pa.int64() if wide else pa.int32()
        cols.append(pa.array(vals, t, mask=np.array(mask, bool) if mask is not None else None))
        fields.append(pa.field(f"c{i}" if i else "producer", t, nullable=nullable))
    table = pa.Table.from_arrays(cols, schema=pa.schema(fields))
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3)))
    parts = [table.slice(a, b - a) for a, b in zip([0, *cuts], [*cuts, n])]
    return pa.concat_tables(parts) if parts else table, draw(st.integers(1, 300))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(int_tables())
@example((pa.table({"producer": pa.array([None, 2**63 - 1, -(2**63)], pa.int64())}), 2))
@example((pa.table({"producer": pa.array(range(70_000), pa.int32())}), 100_000))  # dictionary overflows
@example(
    (
        pa.table(
            {
                "producer": pa.array([0] * 3, pa.int32()),  # int32 deltas wrap in 32 bits
                "c1": pa.array([2**31 - 1, -(2**31), 2**31 - 1], pa.int32()),
            }
        ),
        2,
    )
)
def test_native_segments_read_back_exactly(tmp_path_factory, drawn):
    table, row_group = drawn
    path = tmp_path_factory.mktemp("seg") / "s.parquet"
    size = _write(path, table, row_group=row_group)
    assert size == os.path.getsize(path)
    back = pq.read_table(path)
    assert back.schema.equals(table.schema)
    assert back.equals(table)
    got = duckdb.sql(f"SELECT * FROM read_parquet('{path}')").to_arrow_table()
    assert got.cast(table.schema).equals(table)
    md = pq.read_metadata(path)
    assert md.num_rows == table.num_rows
    start = 0
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        assert rg.num_rows == min(row_group, table.num_rows - start)
        part = table.slice(start, rg.num_rows)
        for c in range(rg.num_columns):
            col = part.column(c)
            stats = rg.column(c).statistics
            assert stats.null_count == col.null_count
            if col.null_count < len(col):
                valid = [v for v in col.to_pylist() if v is not None]
                assert (stats.min, stats.max) == (min(valid), max(valid))
            else:
                assert not stats.has_min_max
        start += rg.num_rows


def test_statistics_metadata_and_bytes_match_parquet_cpp(tmp_path):
    rng = np.random.default_rng(7)
    n = 50_000
    schema = pa.schema(
        [
            pa.field("ts", pa.int64(), False, metadata={"unit": "ns"}),
            pa.field("producer", pa.int32(), False),
            pa.field("arg", pa.int64()),
        ],
        metadata={"tracehouse": "yes"},
    )
    table = pa.Table.from_arrays(
        [
            pa.array(np.cumsum(rng.integers(0, 500, n))),
            pa.array(rng.integers(1, 9, n).astype(np.int32)),
            pa.array(rng.integers(0, 10_000, n), mask=rng.random(n) < 0.4),
        ],
        schema=schema,
    )
    ours, theirs = tmp_path / "native.parquet", tmp_path / "cpp.parquet"
    _write(ours, table, row_group=segments.ROW_GROUP)
    pq.write_table(table, theirs, **segments.write_options(schema, 0))
    a, b = pq.read_metadata(ours), pq.read_metadata(theirs)
    assert a.created_by.startswith("tracehouse") and not b.created_by.startswith("tracehouse")
    # pyarrow's own schema metadata (field units, the schema's keys) comes back the same
    assert pq.read_schema(ours).equals(pq.read_schema(theirs), check_metadata=True)
    for c in range(3):
        sa, sb = a.row_group(0).column(c).statistics, b.row_group(0).column(c).statistics
        assert (sa.min, sa.max, sa.null_count) == (sb.min, sb.max, sb.null_count)
        assert set(a.row_group(0).column(c).encodings) == set(b.row_group(0).column(c).encodings)
    # The same encodings, no compression on these columns either way: sizes within a few %.
    assert os.path.getsize(ours) < 1.05 * os.path.getsize(theirs)
    # DuckDB prunes row groups by these statistics: a filter past the maximum reads nothing.
    hi = int(table["ts"][-1].as_py())
    assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{ours}') WHERE ts > {hi}").fetchall() == [(0,)]


def test_the_native_writer_refuses_what_it_does_not_write(tmp_path):
    floats = pa.table({"x": pa.array([1.5])})
    assert segments._native_options(floats.schema, 0) is None
    ints = pa.table({"ts": pa.array([1, 2], pa.int64())})
    assert segments._native_options(ints.schema, 1) is None  # compaction keeps parquet-cpp (zstd producer)
    with pytest.raises(ValueError, match="not an int32/int64"):
        _core.write_int_parquet(str(tmp_path / "f.parquet"), floats.to_batches(), floats.schema, [], 10, [], "t")
    required = pa.schema([pa.field("ts", pa.int64(), False)])
    with_null = pa.RecordBatch.from_arrays([pa.array([1, None], pa.int64())], names=["ts"])
    with pytest.raises(ValueError, match="nulls in a column declared not null"):
        _core.write_int_parquet(str(tmp_path / "g.parquet"), [with_null], required, [], 10, [], "t")
    swapped = pa.RecordBatch.from_arrays([pa.array([1], pa.int64()), pa.array([2], pa.int64())], names=["b", "a"])
    with pytest.raises(ValueError, match="column a: a batch has b in its place"):
        _core.write_int_parquet(
            str(tmp_path / "s.parquet"), [swapped], pa.schema([("a", pa.int64()), ("b", pa.int64())]), [], 10, [], "t"
        )
    path = tmp_path / "h.parquet"
    path.write_bytes(b"x")
    with pytest.raises(FileExistsError):
        _core.write_int_parquet(str(path), ints.to_batches(), ints.schema, [], 10, [], "t")
    assert path.read_bytes() == b"x"


def test_a_checkpoint_writes_integer_types_natively_and_others_with_parquet_cpp(store, store_path):
    store.create_trace(
        "t",
        "custom",
        event_types=[
            EventType("ints", "instant", (Column("v", "int64", "", ""),)),
            EventType("mixed", "instant", (Column("x", "float64", "", ""),)),
        ],
    )
    store.append(
        "t",
        "ints",
        pa.table(
            {
                "ts": pa.array([3, 1, 2], pa.int64()),
                "producer": pa.array([1, 1, 2], pa.int32()),
                "v": pa.array([None, 5, 6], pa.int64()),
            }
        ),
    )
    store.append(
        "t",
        "mixed",
        pa.table({"ts": pa.array([1], pa.int64()), "producer": pa.array([1], pa.int32()), "x": pa.array([0.5])}),
    )
    store.flush()
    made = {p.parent.name: pq.read_metadata(p).created_by for p in store_path.glob("traces/*/segments/*/*.parquet")}
    assert made["ints"].startswith("tracehouse") and not made["mixed"].startswith("tracehouse")
    rows = store.sql('SELECT ts, producer, v FROM "t".ints ORDER BY ts').to_pylist()
    assert rows == [
        {"ts": 1, "producer": 1, "v": 5},
        {"ts": 2, "producer": 2, "v": 6},
        {"ts": 3, "producer": 1, "v": None},
    ]
