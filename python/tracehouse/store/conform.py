"""Batches into the stored layout of their event type.

Owns the two ways rows meet their type:
- `conform`: a batch being appended is checked and cast to the stored schema (missing
  params become null; a missing common column, a null where none may be, a value that
  does not cast or an undeclared column is a BadInput naming the column). Batches already
  in the stored layout never come here: the native append path (`_core.WalType.prepare`,
  src/store/wal.rs) recognises them; `conform_unnumbered` is what it falls back to;
- `align`: rows already written under an older, narrower version of the type (it was
  widened since) read as the current type, missing columns null.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence

from .. import lazy
from ..errors import BadInput
from ..schema import EventType

# Imported on first use (lazy.py): listing, searching and counting traces need none.
pa = lazy.module("pyarrow")
pc = lazy.module("pyarrow.compute")
np = lazy.module("numpy")


def conform_unnumbered(batch: pa.RecordBatch, et: EventType, *, source: str = "batch") -> pa.RecordBatch:
    """`conform`, for a batch that may lack `seq`: then it comes back without `seq` too (the
    stored layout minus that column), for the writer to number once every batch of the append
    was accepted (a rejected batch must not use up sequence numbers)."""
    if "seq" in batch.schema.names:
        return conform(batch, et, source=source)
    # A placeholder where the stored schema has seq (after ts, producer), so that a producer
    # column of the wrong type is a BadInput naming it, not a raw Arrow error at numbering.
    at = 2 if batch.schema.names[:2] == ["ts", "producer"] else batch.num_columns
    placeholder = pa.array(np.zeros(batch.num_rows, np.int64))
    out = conform(batch.add_column(at, pa.field("seq", pa.int64(), nullable=False), placeholder), et, source=source)
    return out.remove_column(out.schema.get_field_index("seq"))


def _relabelled(parts: Sequence[pa.RecordBatch | pa.Table], target: pa.Schema) -> pa.Table | None:
    """`parts` as one table under `target` without copying, when every part has exactly its
    column names and types (nullability and metadata may differ: the append path keeps a batch
    that is in the stored layout as the caller made it); None otherwise."""
    names_types = [(f.name, f.type) for f in target]
    tables, run = [], []

    def flush() -> bool:
        if not run:
            return True
        schema = run[0].schema
        if [(f.name, f.type) for f in schema] != names_types:
            return False
        t = pa.Table.from_batches(run) if isinstance(run[0], pa.RecordBatch) else pa.concat_tables(run)
        tables.append(t if schema.equals(target) else pa.Table.from_arrays(t.columns, schema=target))
        return True

    for p in parts:  # runs of one schema (a run is glued as is, then relabelled once)
        if (
            run
            and not (p.schema is run[0].schema or p.schema.equals(run[0].schema))
            or run
            and type(p) is not type(run[0])
        ):
            if not flush():
                return None
            run = []
        run.append(p)
    if not flush():
        return None
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables)


def align(parts: Sequence[pa.RecordBatch | pa.Table], et: EventType, columns: Sequence[str] | None = None) -> pa.Table:
    """Rows of one event type written at different times, as one table with `columns` of
    `et`: a column a part predates (the type was widened after it was written) is all
    null, a column of an older type is cast. Default: the stored schema (every column,
    the common ones not null: what segments are written with); with `columns`, every
    field nullable (what readers get from Parquet, whichever piece the rows come from).

    Every reader goes through here: checkpoints and compaction (`writer`, `compact`), the
    SQL views' unflushed tail (`query`) and the analyses' scans (`scan`)."""
    if columns is None:
        target = _conform_target(et)[0]
        if parts:
            same = _relabelled(parts, target)
            if same is not None:
                return same
        target = target.remove_metadata()
    else:
        types = {c.name: c.arrow_type for c in et.columns}
        target = pa.schema([pa.field(c, types[c]) for c in columns])
        if parts and len(columns) == len(types) and list(columns) == list(types):
            # Every column (a reader's tail): parts in the current layout are relabelled, not
            # rebuilt column by column (300 batches of 7 columns: 36 -> 10 ms).
            same = _relabelled(parts, target)
            if same is not None:
                return same
    aligned = []
    for p in parts:
        names = p.schema.names
        cols = []
        for f in target:
            if f.name in names:
                a = p.column(f.name)
                cols.append(a if a.type == f.type else a.cast(f.type))
            else:
                cols.append(pa.nulls(p.num_rows, f.type))
        aligned.append(pa.Table.from_arrays(cols, schema=target))
    if not aligned:
        return target.empty_table()
    return aligned[0] if len(aligned) == 1 else pa.concat_tables(aligned)


@functools.lru_cache(maxsize=1024)
def _conform_target_of(et: EventType) -> tuple[pa.Schema, list[tuple[str, pa.DataType]], tuple[int, ...]]:
    """The stored schema of `et`, its (name, type) list and the positions of its non-null columns."""
    cols = et.columns
    return (
        et.arrow_schema(),
        [(c.name, c.arrow_type) for c in cols],
        tuple(i for i, c in enumerate(cols) if not c.nullable),
    )


# Keyed by identity first: hashing a frozen EventType hashes every Column (~50 us for 60
# params), and writers hand the same object with every append.
_TARGET_BY_ID: dict[int, tuple[EventType, tuple]] = {}
# Schemas that passed the name/type comparison against a target (nullability differs).
_SAME_LAYOUT: dict[int, tuple[pa.Schema, pa.Schema]] = {}


def _conform_target(et: EventType) -> tuple[pa.Schema, list[tuple[str, pa.DataType]], tuple[int, ...]]:
    hit = _TARGET_BY_ID.get(id(et))
    if hit is not None and hit[0] is et:
        return hit[1]
    out = _conform_target_of(et)
    if len(_TARGET_BY_ID) > 4096:
        _TARGET_BY_ID.clear()
    _TARGET_BY_ID[id(et)] = (et, out)
    return out


def conform_target(et: EventType) -> pa.Schema:
    """The stored schema of `et` (cached per type object)."""
    return _conform_target(et)[0]


def _same_layout(schema: pa.Schema, target: pa.Schema, names_types: list) -> bool:
    """Same column names and types in the same order (nullability aside), remembered per target."""
    hit = _SAME_LAYOUT.get(id(target))
    if hit is not None and hit[0] is target and (hit[1] is schema or hit[1].equals(schema)):
        return True
    if [(f.name, f.type) for f in schema] != names_types:
        return False
    if len(_SAME_LAYOUT) > 4096:
        _SAME_LAYOUT.clear()
    _SAME_LAYOUT[id(target)] = (target, schema)
    return True


def _with_schema(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """`batch` under `schema` (same names and types, other nullability), no data copied.

    Through the Arrow C data interface: half the cost of `RecordBatch.from_arrays` over
    60 columns, which wraps every column in a Python object first.
    """
    c_array = ctypes.create_string_buffer(_ARROW_ARRAY_SIZE)
    batch._export_to_c(ctypes.addressof(c_array))
    return pa.RecordBatch._import_from_c(ctypes.addressof(c_array), schema)


_ARROW_ARRAY_SIZE = 80  # sizeof(struct ArrowArray), the C data interface's fixed layout


def conform(batch: pa.RecordBatch | pa.Table, et: EventType, *, source: str = "batch") -> pa.RecordBatch:
    """`batch` cast to the columns of `et`, in order; missing params become null.

    Raises BadInput naming the column when a common column is missing or null,
    a value does not cast, or a column is not declared.
    """
    if isinstance(batch, pa.Table):
        batch = (
            batch.combine_chunks().to_batches()[0]
            if batch.num_rows
            else pa.RecordBatch.from_pylist([], schema=batch.schema)
        )
    target, names_types, required = _conform_target(et)
    if batch.schema.equals(target, check_metadata=True):
        # Fast path (every live append of a known producer): nothing to cast or fill, only the
        # non-null check. The slow path below cost ~80 us per batch, mostly rebuilding schemas.
        if not any(batch.column(i).null_count for i in required):
            return batch
    elif _same_layout(batch.schema, target, names_types) and not any(batch.column(i).null_count for i in required):
        return _with_schema(batch, target)
    names = set(batch.schema.names)
    declared = {c.name for c in et.columns}
    extra = [n for n in batch.schema.names if n not in declared]
    if extra:
        raise BadInput(
            f"columns {extra} are not parameters of event type {et.name!r}",
            file=source,
            expected=", ".join(sorted(declared)),
        )
    arrays = []
    for c in et.columns:
        if c.name not in names:
            if not c.nullable:
                raise BadInput(f"event type {et.name!r} needs column {c.name!r}", file=source, column=c.name)
            arrays.append(pa.nulls(batch.num_rows, c.arrow_type))
            continue
        a = batch.column(c.name)
        if not c.nullable and a.null_count:
            raise BadInput(
                f"{a.null_count} null values in column {c.name!r}",
                file=source,
                column=c.name,
                expected=f"a value of type {c.type} in every row",
            )
        if a.type != c.arrow_type:
            if pa.types.is_dictionary(a.type):
                a = a.cast(a.type.value_type)
            try:
                a = pc.cast(a, c.arrow_type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise BadInput(
                    f"cannot store values as {c.type}: {e}", file=source, column=c.name, expected=c.type
                ) from None
        arrays.append(a)
    return pa.RecordBatch.from_arrays(arrays, schema=et.arrow_schema())
