"""Comparing two engines' answers: equal Arrow tables, values and types."""

from __future__ import annotations

import pyarrow as pa


def same(a: pa.Table, b: pa.Table, ordered: bool = True) -> None:
    """Equal values and Arrow types (rows sorted first when the query has no ORDER BY)."""
    assert a.schema == b.schema, f"{a.schema} != {b.schema}"
    if not ordered:
        keys = [(c, "ascending") for c in a.column_names]
        a, b = a.sort_by(keys), b.sort_by(keys)
    assert a.num_rows == b.num_rows
    assert a.to_pylist() == b.to_pylist()
