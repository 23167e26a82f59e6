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
        pa.int8(): np.int8,
        pa.int16(): np.int16,
        pa.int32(): np.int32,
        pa.int64(): np.int64,
        pa.uint8(): np.uint8,
        pa.uint16(): np.uint16,
        pa.uint32(): np.uint32,
        pa.uint64(): np.uint64,
        pa.float32(): np.float32,
        pa.float64(): np.float64,
    }


def _chunk(a: pa.Array) -> np.ndarray:
    dtype = _numpy_types().get(a.type)
    if dtype is not None and not a.null_count:
        return np.frombuffer(a.buffers()[1], dtype=dtype, count=len(a), offset=a.offset * np.dtype(dtype).itemsize)
    if a.type == pa.bool_() and not a.null_count:  # (`to_numpy` of a boolean array imports pandas)
        bits = np.unpackbits(np.frombuffer(a.buffers()[1], np.uint8), bitorder="little", count=a.offset + len(a))
        return bits[a.offset :].astype(bool)
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


def filled(col: pa.Array | pa.ChunkedArray, fill) -> np.ndarray:
    """A numeric column as numpy with `fill` where it is null (`pc.fill_null` builds a scalar,
    which imports pandas)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if not col.null_count:
        return _chunk(col)
    dtype = _numpy_types()[col.type]
    values = np.frombuffer(col.buffers()[1], dtype=dtype, count=len(col), offset=col.offset * np.dtype(dtype).itemsize)
    valid = np.unpackbits(np.frombuffer(col.buffers()[0], np.uint8), bitorder="little", count=col.offset + len(col))[
        col.offset :
    ].astype(bool)
    return np.where(valid, values, fill)


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


def from_numpy(a, type=None):  # noqa: A002
    """A 1-d numpy array as a pyarrow array without `pa.array`: numbers and booleans over
    their buffer (numbers zero-copy), text (an object array of str or None) built from its
    UTF-8 bytes. `pa.array` imports pandas on its first call whatever it is given (pyarrow
    26: 0.3-0.8 s), which a command answering from an index in milliseconds cannot carry."""
    a = np.asarray(a)
    n = len(a)
    if a.dtype == bool:
        bits = np.packbits(a.astype(np.uint8), bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(bits)])
    if a.dtype.kind in "iuf":
        a = np.ascontiguousarray(a)
        typ = type or _arrow_types()[a.dtype]
        if typ != _arrow_types()[a.dtype]:
            return from_numpy(a.astype(np.dtype(_numpy_types()[typ])), typ)
        return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(a)])
    return strings(a.tolist())


def strings(values: list):
    """A list of str (or None) as a pyarrow string array, without `pa.array` (see `from_numpy`)."""
    n = len(values)
    encoded = [b"" if v is None else str(v).encode() for v in values]
    offsets = np.zeros(n + 1, np.int32)
    if n:
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
    valid = np.array([v is not None for v in values], bool)
    mask = None if valid.all() else pa.py_buffer(np.packbits(valid.astype(np.uint8), bitorder="little"))
    return pa.Array.from_buffers(pa.string(), n, [mask, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])


def with_nulls(a, valid):
    """`a` (a pyarrow array without nulls) with nulls where `valid` is false."""
    valid = np.asarray(valid, bool)
    if valid.all():
        return a
    bits = pa.py_buffer(np.packbits(valid.astype(np.uint8), bitorder="little"))
    return pa.Array.from_buffers(a.type, len(a), [bits, *a.buffers()[1:]])


@functools.cache
def _arrow_types() -> dict:
    return {np.dtype(v): k for k, v in _numpy_types().items()}
