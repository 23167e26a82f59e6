"""Arrow columns as numpy arrays and the other way round, without copies where possible.

Owns the conversions every layer needs between pyarrow (what the store and `_core`
speak) and numpy (what vectorized analysis code speaks). Not `Array.to_numpy()` on the
hot paths: for a null-free integer column that goes through pandas' type machinery and
imported pandas (0.4-0.9 s) on first use, which once stalled the first checkpoint of
every process while it held the import lock; `np.frombuffer` over the Arrow buffer is
free.
"""

from __future__ import annotations

import functools

from . import lazy

# Imported on first use (lazy.py): listing, searching and counting traces need none.
np = lazy.module("numpy")
pa = lazy.module("pyarrow")


@functools.cache
def _numpy_types() -> dict:
    """Arrow numeric type -> numpy dtype (made on first use: it needs both modules)."""
    return {
        pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64,
        pa.uint8(): np.uint8, pa.uint16(): np.uint16, pa.uint32(): np.uint32, pa.uint64(): np.uint64,
        pa.float32(): np.float32, pa.float64(): np.float64,
    }


def _chunk(a: pa.Array) -> np.ndarray:
    dtype = _numpy_types().get(a.type)
    if dtype is not None and not a.null_count:
        return np.frombuffer(a.buffers()[1], dtype=dtype, count=len(a), offset=a.offset * np.dtype(dtype).itemsize)
    return a.to_numpy(zero_copy_only=False)


def as_numpy(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A column as one numpy array (zero-copy for one null-free numeric chunk)."""
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 1:
            return _chunk(col.chunk(0))
        if col.num_chunks == 0:
            return np.array([], dtype=_numpy_types().get(col.type, object))
        return np.concatenate([_chunk(c) for c in col.chunks])
    return _chunk(col)


def _one_array(col: pa.Array | pa.ChunkedArray, typ: pa.DataType) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return col if col.type == typ else col.cast(typ)


def int64_array(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A non-null column as one int64 pyarrow array (what `_core` takes)."""
    return _one_array(col, pa.int64())


def int32_array(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A non-null column as one int32 pyarrow array (producer ids, for `_core`)."""
    return _one_array(col, pa.int32())
