"""The WAL has one owner: `store/wal.py` reads every file through the native scan (src/store/walscan.rs).

The scan's rule for damage is checked against a reference transcribed from the reader the format
had in Python (frames, CRCs, zeros ending the log, a damaged record skipped only when an intact
one follows it), over damage hypothesis makes: cut files, flipped bytes, bytes overwritten, zeros
where a header goes.
"""

from __future__ import annotations

import shutil
import struct
import zlib
from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import wal_frames
from tracehouse import _core
from tracehouse.store import wal as walmod

HEADER = struct.Struct("<II")


def reference_scan(data: bytes, start: int = 0) -> tuple[list[tuple[int, bool]], int, str | None]:
    """(frames as (offset, crc ok), end, error): the Python reader's framing, decode=False."""

    def record_or_end(at: int) -> bool:
        if at >= len(data) or (len(data) - at >= 8 and not any(data[at : at + 8])):
            return True
        if len(data) - at < 8:
            return False
        length, crc = HEADER.unpack_from(data, at)
        end = at + 8 + length
        return 2 <= length <= 1 << 31 and end <= len(data) and zlib.crc32(data[at + 8 : end]) == crc

    frames: list[tuple[int, bool]] = []
    pos = 0
    if start == 0:
        if not data:
            return frames, 0, None
        if len(data) < 8 or data[:8] != walmod.MAGIC:
            return frames, 0, "missing WAL header" if len(data) < 8 else "bad WAL magic"
        pos = 8
    while pos < len(data):
        if pos + 8 > len(data):
            if any(data[pos:]):
                return frames, start + pos, f"truncated record header at byte {start + pos}"
            break
        length, crc = HEADER.unpack_from(data, pos)
        if length == 0 and crc == 0:
            break
        end = pos + 8 + length
        if length < 2 or length > 1 << 31 or end > len(data):
            return (
                frames,
                start + pos,
                f"record at byte {start + pos} claims {length} bytes, {len(data) - pos - 8} remain",
            )
        ok = zlib.crc32(data[pos + 8 : end]) == crc
        frames.append((start + pos, ok))
        last = end >= len(data) or (len(data) - end >= 8 and not any(data[end : end + 8]))
        if not ok and (last or not record_or_end(end)):
            return frames, start + pos, None  # the damaged last record, or nothing intact after it
        pos = end
    return frames, start + pos, None


def _wal_file(tmp_path: Path, batches: list[pa.RecordBatch]) -> Path:
    shutil.rmtree(tmp_path / "wal", ignore_errors=True)  # (hypothesis reuses the directory)
    w = walmod.WalWriter(tmp_path / "wal", 1)
    for i, b in enumerate(batches):
        w.append(f"t{i % 2}", b)
    w.close()
    return walmod.wal_path(tmp_path / "wal", 1)


def _batch(n: int, base: int = 0) -> pa.RecordBatch:
    return pa.record_batch(
        {"ts": pa.array(range(base, base + n), pa.int64()), "name": pa.array([f"n{i}" for i in range(n)], pa.string())}
    )


def test_issue31_the_reader_goes_through_the_native_scan(tmp_path):
    path = _wal_file(tmp_path, [_batch(3), _batch(2, 10), _batch(4, 20)])
    data = path.read_bytes()
    frames, end, error = _core.wal_scan(data)
    assert error is None and end == len(data) and _core.WAL_MAGIC == walmod.MAGIC == data[:8]
    assert [(f[0], f[0] + _core.WAL_HEADER_BYTES + f[1]) for f in frames] == wal_frames(path)
    assert [(f[2], f[3], f[5]) for f in frames] == [(1, "t0", None), (1, "t1", None), (0, "t0", None)]
    # The IPC stream starts right after the name: the reader decodes it from there.
    assert all(data[f[4] : f[4] + 4] == b"\xff\xff\xff\xff" for f in frames)
    scan = walmod.read_wal(path)
    assert [(n, b.num_rows) for n, b in scan.records] == [("t0", 3), ("t1", 2), ("t0", 4)]
    # From a boundary, as a reader polling a live log reads on: positions stay the file's own.
    second = frames[1][0]
    assert [f[0] for f in _core.wal_scan(data[second:], second)[0]] == [f[0] for f in frames[1:]]
    assert [b.num_rows for _, b in walmod.read_wal(path, start=second).records] == [2, 4]


def test_issue31_a_record_whose_name_overruns_it_is_skipped_not_fatal(tmp_path):
    """A record with a right CRC whose name length points past its payload: undecodable, skipped
    with its neighbours kept, and the reason says so (the Python reader sliced the name short and
    reported a UTF-8 error in the bytes after it)."""
    path = _wal_file(tmp_path, [_batch(3), _batch(2, 10), _batch(4, 20)])
    data = bytearray(path.read_bytes())
    frames = _core.wal_scan(bytes(data))[0]
    off, length = frames[1][0], frames[1][1]
    payload = bytearray(data[off + 8 : off + 8 + length])
    payload[0:2] = struct.pack("<H", 60000)
    data[off + 8 : off + 8 + length] = payload
    data[off + 4 : off + 8] = struct.pack("<I", zlib.crc32(payload))
    path.write_bytes(bytes(data))
    scan = walmod.read_wal(path)
    assert [b.num_rows for _, b in scan.records] == [3, 4]
    assert scan.error is None and scan.valid_bytes == len(data)
    (lost,) = scan.skipped
    assert lost["offset"] == off and lost["bytes"] == 8 + length
    assert lost["reason"] == (
        f"undecodable record: an event type name of 60000 bytes in a {length}-byte record in record at byte {off}"
    )


@st.composite
def damaged(draw):
    n = draw(st.integers(1, 5))
    sizes = draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
    edits = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["flip", "zero8", "cut", "junk"]), st.floats(0, 1), st.binary(min_size=1, max_size=12)
            ),
            max_size=3,
        )
    )
    start_at = draw(st.integers(0, n))  # scan from the start of record `start_at` (n: from the end)
    return sizes, edits, start_at


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=damaged())
def test_issue31_scan_keeps_the_python_readers_rule_for_damage(tmp_path, case):
    sizes, edits, start_at = case
    path = _wal_file(tmp_path, [_batch(k, 100 * i) for i, k in enumerate(sizes)])
    data = bytearray(path.read_bytes())
    bounds = [f[0] for f in _core.wal_scan(bytes(data))[0]] + [len(data)]
    start = bounds[start_at] if start_at < len(sizes) else len(data)
    for how, where, junk in edits:  # damage only after `start`: before it was read already
        at = start + int(where * max(0, len(data) - start - 1))
        if at >= len(data) or (start == 0 and at < 8):
            continue
        if how == "flip":
            data[at] ^= 0x5A
        elif how == "zero8":
            data[at : at + 8] = bytes(min(8, len(data) - at))
        elif how == "cut":
            del data[at:]
        else:
            data[at : at + len(junk)] = junk[: len(data) - at]
    raw = bytes(data)
    frames, end, error = _core.wal_scan(raw[start:], start)
    want_frames, want_end, want_error = reference_scan(raw[start:], start)
    assert [(f[0], f[5] != "CRC mismatch") for f in frames] == want_frames
    assert (end, error) == (want_end, want_error)
    path.write_bytes(raw)
    scan = walmod.read_wal(path, start=start)  # never raises on damage; what it keeps is intact
    assert scan.valid_bytes <= len(raw)
    for _, b in scan.records:
        assert b.schema.names == ["ts", "name"]
