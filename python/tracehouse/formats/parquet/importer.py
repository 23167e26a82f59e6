"""Parquet importer: any Parquet file whose columns map onto events.

Owns reading Parquet in row-group batches (memory bounded by the batch, not
the file) and handing them to the tabular mapping, and reading back what
`tracehouse export --format parquet` wrote: each file carries its event type
(kind, typed parameters with units and docs) and the trace's format in its
key-value metadata (`EXPORT_KEY`), so importing an exported file, or the whole
exported directory with its `producers.parquet`, restores the trace without
mapping flags. A row group whose pages do not decode (corrupt or truncated
data) is bad input naming the file, the row group and its rows; the import is
then rolled back like any failed import.
"""

from __future__ import annotations

import json
from pathlib import Path

from ... import lazy
from ...errors import BadInput
from ...schema import EventType
from ..column_mapping import Mapping, TabularLoader
from ..report import ImportReport

# Imported on first use (lazy.py): `tracehouse import` loads every importer to read its options.
np = lazy.module("numpy")
pa = lazy.module("pyarrow")
pq = lazy.module("pyarrow.parquet")

NAME = "parquet"
DESCRIPTION = "Apache Parquet file (one event per row), or a directory written by `tracehouse export --format parquet`"
PRIORITY = 40  # the PAR1 magic: a strict signature

# Parquet key-value metadata of an exported event type file (see export_meta).
EXPORT_KEY = "tracehouse.event_type"
PRODUCERS = "producers.parquet"


def sniff(head: bytes) -> bool:
    return head.startswith(b"PAR1")


def export_meta(info, et: EventType) -> str:
    """What `tracehouse export --format parquet` records in each file: the trace's format and the
    event type as declared."""
    return json.dumps(
        {"format": info.format, "name": et.name, "kind": et.kind, "doc": et.doc, "params": et.params_json()}
    )


def import_file(
    store,
    path: str | Path,
    name: str,
    *,
    mapping: Mapping | None = None,
    strict: bool = False,
    description: str = "",
    progress=None,
) -> ImportReport:
    path = Path(path)
    if path.is_dir():
        return _import_export_dir(
            store, path, name, mapping=mapping, strict=strict, description=description, progress=progress
        )
    source = str(path)
    mapping = mapping or Mapping()
    pf = _open(path)
    recorded = _recorded(pf, source)
    if recorded is not None:
        mapping = _adopt(mapping, recorded, pf.schema_arrow.names)
    if mapping.format is None:
        mapping.format = NAME
    loader = TabularLoader(store, name, mapping, source, strict=strict, description=description)
    try:
        if recorded is not None:
            _declare(loader, [recorded[1]], path.parent / PRODUCERS)
        _feed(loader, pf, progress)
        return loader.finish()
    except BaseException as e:
        loader.abort(e)  # raises


def _open(path: Path) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(path)
    except FileNotFoundError:
        raise BadInput("no such file", file=str(path)) from None
    except (pa.ArrowInvalid, OSError) as e:
        raise BadInput(f"not a readable Parquet file: {e}", file=str(path), expected="a Parquet file") from None


def _feed(loader: TabularLoader, pf: pq.ParquetFile, progress) -> None:
    row = 0
    for group in range(pf.num_row_groups):
        for batch in _row_group_batches(pf, group, loader.source, row + 1):
            rows = np.arange(row + 1, row + 1 + batch.num_rows, dtype=np.int64)  # 1-based row numbers
            row += batch.num_rows
            loader.add(batch, rows)
            if progress is not None:
                progress(batch.num_rows)


def _row_group_batches(pf: pq.ParquetFile, group: int, source: str, first_row: int):
    """The batches of one row group; a page that does not decode is a BadInput naming the group."""
    it = pf.iter_batches(batch_size=1 << 20, row_groups=[group])
    while True:
        try:
            batch = next(it)
        except StopIteration:
            return
        except (OSError, pa.ArrowException) as e:  # pyarrow: "Unexpected end of stream", bad thrift, zstd...
            n = pf.metadata.row_group(group).num_rows
            raise BadInput(
                f"row group {group} (rows {first_row:,}-{first_row + n - 1:,} of "
                f"{pf.metadata.num_rows:,}) does not decode: {e}",
                file=source,
                expected="a Parquet file whose data pages are intact",
            ) from None
        yield batch


def _recorded(pf: pq.ParquetFile, source: str) -> tuple[str, EventType] | None:
    """(format, event type) recorded by our own export, or None for any other Parquet file."""
    meta = pf.schema_arrow.metadata or {}
    raw = meta.get(EXPORT_KEY.encode())
    if raw is None:
        return None
    try:
        d = json.loads(raw)
        from ...schema import Column

        et = EventType(d["name"], d["kind"], tuple(Column.from_json(p) for p in d["params"]), d.get("doc", ""))
        return d["format"], et
    except (ValueError, KeyError, TypeError) as e:
        raise BadInput(
            f"unreadable {EXPORT_KEY} metadata: {e}",
            file=source,
            expected="the metadata `tracehouse export --format parquet` writes",
        ) from None


def _adopt(mapping: Mapping, recorded: tuple[str, EventType], names: list[str]) -> Mapping:
    """The mapping with what the export recorded wherever the user left the default."""
    fmt, et = recorded
    d = Mapping()
    m = Mapping(**mapping.__dict__)
    if m.seq is None and "seq" in names:
        m.seq = "seq"
    if m.dur is None and et.kind == "span" and "dur" in names:
        m.dur = "dur"
    if m.event_type == d.event_type and m.type == d.type and m.type not in names:
        m.event_type = et.name
    if m.kind is None:
        m.kind = et.kind
    if m.format is None:
        m.format = fmt
    return m


def _declare(loader: TabularLoader, types: list[EventType], producers: Path) -> None:
    """Declares the recorded event types (kinds, units and docs as exported) and, when the
    export's producers file is there, the producers with their hierarchy and attributes."""
    for et in types:
        loader.types[et.name] = loader.store.add_event_type(loader.report.trace, et)
    if not producers.is_file():
        return
    t = _open(producers).read()
    if not {"id", "parent", "kind", "name", "attrs"} <= set(t.schema.names):
        raise BadInput(
            "not the producers file of an export", file=str(producers), expected="columns id, parent, kind, name, attrs"
        )
    rows = [
        r | {"attrs": json.loads(r["attrs"] or "{}")}
        for r in t.select(["id", "parent", "kind", "name", "attrs"]).to_pylist()
    ]
    loader.store.add_producers(loader.report.trace, rows)
    loader.known_producers.update(r["id"] for r in rows)
    loader.report.producers = len(rows)


def _import_export_dir(
    store, path: Path, name: str, *, mapping: Mapping | None, strict: bool, description: str, progress
) -> ImportReport:
    """A directory written by `tracehouse export --format parquet`: one file per event type, one trace."""
    files = sorted(p for p in path.glob("*.parquet") if p.name != PRODUCERS)
    if not files:
        raise BadInput(
            "no .parquet files in the directory",
            file=str(path),
            expected="a directory written by `tracehouse export --format parquet`",
        )
    opened = []
    for f in files:
        pf = _open(f)
        recorded = _recorded(pf, str(f))
        if recorded is None:
            raise BadInput(
                f"{f.name} was not written by `tracehouse export` (no {EXPORT_KEY} metadata)",
                file=str(f),
                expected="import a foreign Parquet file on its own, with mapping flags",
            )
        opened.append((f, pf, recorded))
    formats = {r[0] for _, _, r in opened}
    if len(formats) > 1:
        raise BadInput(
            f"files of several formats: {', '.join(sorted(formats))}",
            file=str(path),
            expected="the files of one exported trace",
        )
    base = mapping or Mapping()
    first = _adopt(base, opened[0][2], opened[0][1].schema_arrow.names)
    loader = TabularLoader(store, name, first, str(path), strict=strict, description=description)
    try:
        _declare(loader, [r[1] for _, _, r in opened], path / PRODUCERS)
        for f, pf, recorded in opened:
            loader.mapping = _adopt(base, recorded, pf.schema_arrow.names)
            loader.source = str(f)
            _feed(loader, pf, progress)
        return loader.finish()
    except BaseException as e:
        loader.abort(e)  # raises
