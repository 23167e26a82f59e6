"""Page checksums and the store's refusals, on real files.

Every Parquet writer of the store writes a CRC-32 in every page header (the native integer
writer, parquet-cpp through pyarrow for checkpoints, merges, results and exports); DuckDB reads
a page with a flipped byte as other numbers (measured here, so that the day it checks them the
docs are changed), while `check_pages`, compaction, export and the scrub name the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tracehouse
from helpers import BATCH_TYPE, batch_table
from helpers.cli import run
from tracehouse import StoreDamaged
from tracehouse.formats.tod.generate import generate_tod
from tracehouse.store.segments import check_pages

FLOATS = tracehouse.EventType(
    "m", "counter", (tracehouse.Column("v", "float64", "", ""), tracehouse.Column("host", "string", "", ""))
)


def floats(n: int, start: int = 0) -> pa.Table:
    return pa.table(
        {
            "ts": np.arange(start, start + n, dtype=np.int64),
            "producer": pa.array(np.zeros(n, np.int32)),
            "v": np.random.default_rng(start).random(n),
            "host": [f"h{i % 7}" for i in range(n)],
        }
    )


def all_pages_checksummed(path: Path) -> dict:
    got = check_pages(path)
    assert got["pages"] > 0 and got["with_crc"] == got["pages"] and got["bad"] is None, (path, got)
    return got


def test_issue28_every_writer_writes_a_crc_in_every_page(tmp_path, capsys):
    store = tmp_path / "store"
    with tracehouse.open(store, flush_interval_s=3600.0) as s:
        generate_tod(s, "tod", 20_000)  # the native integer writer
        s.create_trace("f", "floatfmt", event_types=[FLOATS])  # parquet-cpp: strings, floats
        s.append("f", "m", floats(500))
        s.flush("f")
        s.append("f", "m", floats(500, 500))
        s.flush("f")
        s.compact("f")  # a merge
        assert [x.level for x in s.segments_of("f")] == [1]
        s.save_result("table", "r", "test", ["f"], table=floats(10))  # a result table
        rid = s.save_result("table", "idx", "test", ["f"], table=floats(10), table_format="arrow")
        segs = [store / x.path for t in ("tod", "f") for x in s.segments_of(t)]
        assert s.result(rid)["checksum"] is not None  # (Arrow IPC: the whole file's CRC)
    for f in segs + sorted((store / "results").glob("*.parquet")):
        all_pages_checksummed(f)
    code, _out, err = run(capsys, store, "export", "f", "--out", str(tmp_path / "out"))
    assert code == 0, err
    for f in (tmp_path / "out" / "f").glob("*.parquet"):  # (DuckDB's COPY wrote none: exported by pyarrow)
        all_pages_checksummed(f)


def _plain_int_file(path: Path, n: int = 10_000) -> tuple[int, int]:
    """A PLAIN, uncompressed int64 column with page CRCs; returns (sum, byte offset inside its data)."""
    x = np.arange(n, dtype=np.int64) * 3
    pq.write_table(
        pa.table({"x": x}),
        path,
        compression="none",
        use_dictionary=False,
        column_encoding={"x": "PLAIN"},
        write_page_checksum=True,
    )
    col = pq.read_metadata(path).row_group(0).column(0)
    return int(x.sum()), col.data_page_offset + col.total_compressed_size - 100


def test_issue28_duckdb_reads_a_flipped_page_byte_as_another_number_and_check_pages_names_it(tmp_path):
    import duckdb

    f = tmp_path / "x.parquet"
    want, at = _plain_int_file(f)
    data = bytearray(f.read_bytes())
    data[at] ^= 0x40
    f.write_bytes(bytes(data))
    got = duckdb.connect().execute(f"SELECT sum(x) FROM '{f}'").fetchall()[0][0]
    assert got != want  # no error: what `serve --scrub-interval` and `verify` are for (docs/storage.md)
    bad = check_pages(f)["bad"]
    assert bad is not None and "checksum mismatch" in bad


def one_segment(s, batch: int):
    """Trace "t" of one segment holding `batch_table(batch)`; returns that segment."""
    s.create_trace("t", "crashfmt", event_types=[BATCH_TYPE])
    s.append("t", "ev", batch_table(batch))
    s.flush()
    (seg,) = s.segments_of("t")
    return seg


def flip_a_page(path: Path) -> None:
    """One bit flipped inside the data of the file's first column chunk (not a page header)."""
    col = pq.read_metadata(path).row_group(0).column(0)
    data = bytearray(path.read_bytes())
    data[col.data_page_offset + col.total_compressed_size - 4] ^= 1
    path.write_bytes(bytes(data))


def test_issue28_scrub_marks_a_damaged_segment_and_queries_name_it(tmp_path):
    store = tmp_path / "store"
    with tracehouse.open(store) as s:
        seg = one_segment(s, 5)
        flip_a_page(store / seg.path)
        assert s.sql('SELECT count(*) AS n FROM "t".ev WHERE ts >= 0').column(0)[0].as_py() == len(batch_table(5))
        (found,) = s.scrub("t")
        assert found[0].path == seg.path and "checksum mismatch" in found[1]
        with pytest.raises(tracehouse.BadInput, match=seg.path):
            s.sql('SELECT sum(ts) FROM "t".ev')
        assert s.scrub("t") == []  # (marked once)


def test_issue28_the_typed_file_exporters_refuse_a_damaged_trace_and_write_nothing(tmp_path):
    # Through the exporters themselves (the API's door), not only `tracehouse export`.
    from tracehouse.formats import registry

    store = tmp_path / "store"
    with tracehouse.open(store) as s:
        seg = one_segment(s, 5)
        flip_a_page(store / seg.path)
        for fmt in ("parquet", "csv"):
            out = tmp_path / fmt
            with pytest.raises(StoreDamaged, match=seg.path):
                registry.exporter(fmt).export(s, "t", out)
            assert not out.exists()


def test_issue28_no_catalog_is_made_over_trace_directories(tmp_path):
    store = tmp_path / "store"
    with tracehouse.open(store) as s:
        s.create_trace("t", "crashfmt", event_types=[BATCH_TYPE])
        s.append("t", "ev", batch_table(1))
    for f in store.glob("catalog.sqlite*"):
        f.unlink()
    with pytest.raises(StoreDamaged, match="traces/1"):
        tracehouse.open(store)
    assert not (store / "catalog.sqlite").exists()
    assert (store / "traces" / "1" / "segments").is_dir()


def test_issue28_a_new_trace_never_takes_the_id_of_a_directory_the_catalog_lost(tmp_path):
    store = tmp_path / "store"
    with tracehouse.open(store) as s:
        s.create_trace("a", "crashfmt", event_types=[BATCH_TYPE])
    (store / "traces" / "2" / "segments").mkdir(parents=True)  # what a lost catalog transaction leaves
    marker = store / "traces" / "2" / "segments" / "keep"
    marker.write_text("rows")
    with pytest.raises(StoreDamaged, match="traces/2"), tracehouse.open(store) as s:
        s.create_trace("b", "crashfmt", event_types=[BATCH_TYPE])
    assert marker.read_text() == "rows"
    with tracehouse.open(store, readonly=True) as s:
        assert [t.name for t in s.traces()] == ["a"]


def test_issue28_info_and_verify_json_say_what_is_damaged(tmp_path, capsys):
    store = tmp_path / "store"
    with tracehouse.open(store) as s:
        seg = one_segment(s, 3)
    (store / seg.path).unlink()
    code, out, _ = run(capsys, store, "info", "t", "--json")
    assert code == 0 and json.loads(out)["event_types"][0]["damaged"] == [f"{seg.path}: the file is missing"]
    code, out, _ = run(capsys, store, "verify", "--json")
    report = json.loads(out)
    assert code == 1 and report["traces"][0]["status"] == "missing"


def test_issue28_a_trace_dropped_and_made_again_is_read_afresh_by_another_process(tmp_path):
    """Queries run in processes of their own (the server's query processes): one that read a
    trace's WAL must not take a trace made again under that name for the same one (its WAL file
    gets the old number, often the old inode: the reader counted the dropped rows too)."""
    store = tmp_path / "store"
    w = tracehouse.open(store, fsync="always", flush_interval_s=3600.0)
    try:
        w.create_trace("t", "crashfmt", event_types=[BATCH_TYPE])
        for b in (1, 2, 3):
            w.append("t", "ev", batch_table(b), wait=True)
        with tracehouse.open(store, readonly=True) as r:
            q = 'SELECT count(*) AS n FROM "t".ev'
            assert r.sql(q + " WHERE ts >= 0").column(0)[0].as_py() == sum(len(batch_table(b)) for b in (1, 2, 3))
            first = w.trace("t").id
            w.rm("t")
            w.create_trace("t", "crashfmt", event_types=[BATCH_TYPE])
            assert w.trace("t").id != first  # (ids are never given again)
            w.append("t", "ev", batch_table(4), wait=True)
            assert r.sql(q + " WHERE ts >= 0").column(0)[0].as_py() == len(batch_table(4))
    finally:
        w.close()
