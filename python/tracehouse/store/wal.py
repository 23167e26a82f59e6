"""The write-ahead log of one trace: numbered files of length+CRC framed records.

Owns the on-disk WAL format, appending, fsync, rotation and reading back with
torn-tail detection. A file is `wal/<number>.wal`: an 8-byte magic, then
records `[u32 payload length][u32 crc32(payload)][payload]`, where payload is
`[u16 name length][event type name][Arrow IPC stream of one record batch]`.
Numbers only grow; the catalog records the highest number whose records are
all in registered segments (`traces.wal_covered`), so recovery replays exactly
the files above it.
"""

from __future__ import annotations

import errno
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from .._core import crc32  # zlib's CRC-32, SIMD: the WAL's checksum
from .. import lazy

# Imported on first use (lazy.py): listing, searching and counting traces need none.
pa = lazy.module("pyarrow")

MAGIC = b"THWAL001"
HEADER = struct.Struct("<II")
NAME_LEN = struct.Struct("<H")
MAX_RECORD = 1 << 31  # a length beyond this is garbage, not a record


def wal_path(directory: Path, number: int) -> Path:
    return directory / f"{number:012d}.wal"


def wal_numbers(directory: Path) -> list[int]:
    if not directory.exists():
        return []
    out = []
    for p in directory.iterdir():
        if p.suffix == ".wal" and p.stem.isdigit():
            out.append(int(p.stem))
    return sorted(out)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


IOV_MAX = 1024


def encode_batch(batch: pa.RecordBatch) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    return sink.getvalue()


class WalWriter:
    """Appends records to the current WAL file; `rotate()` starts the next one."""

    def __init__(self, directory: Path, number: int) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.number = number
        self.fd = -1
        self.size = 0
        # Set when a failed append could not be cut back: the file then holds a torn record
        # that would end the log at recovery, so nothing more may be appended after it.
        self.broken: OSError | None = None
        self._schemas: dict[str, tuple[pa.Schema, bytes, pa.Buffer]] = {}
        self._open(number)

    def _open(self, number: int) -> None:
        """Make `number` the current file. On failure (a full disk) the current file stays
        current and a new file that got no complete header is removed."""
        path = wal_path(self.directory, number)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        size = -1
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                if os.write(fd, MAGIC) != len(MAGIC):
                    raise OSError(errno.ENOSPC, f"No space left on device: short write of the header of {path}")
            fsync_dir(self.directory)
        except BaseException:
            os.close(fd)
            if size == 0:  # made here: it holds no record
                path.unlink(missing_ok=True)
            raise
        size = size or len(MAGIC)
        self.fd, self.size, self.number = fd, size, number

    def append(self, event_type: str, batch: pa.RecordBatch) -> int:
        """Write one record; returns the file size after it (not yet durable)."""
        return self.write(self.encode_many(event_type, [batch]))

    def encode_many(self, event_type: str, batches: list[pa.RecordBatch]) -> list:
        """The framed record of `batches` (one schema), ready for `write` (thread-safe: callers
        encode outside the lock that orders writes, so only the write itself is serialized)."""
        # The payload is an IPC stream: the type's schema message (serialized once and
        # cached) followed by the batch messages. A new stream writer per record cost 3x more.
        schema = batches[0].schema
        cached = self._schemas.get(event_type)
        if cached is None or not (cached[0] is schema or cached[0].equals(schema)):
            name = event_type.encode()
            cached = (schema, NAME_LEN.pack(len(name)) + name, schema.serialize())
            self._schemas[event_type] = cached
        _, head, schema_msg = cached
        bodies = [b.serialize() for b in batches]
        crc = crc32(schema_msg, crc32(head))
        for body in bodies:
            crc = crc32(body, crc)
        size = len(head) + schema_msg.size + sum(body.size for body in bodies)
        return [HEADER.pack(size, crc), head, schema_msg, *bodies]

    def write(self, parts: list) -> int:
        """Append records made by `encode_many` (one list, or several concatenated); returns the file size.

        All or nothing: when the write fails (a full disk: ENOSPC or a short write) the file is
        cut back to where it was, so a later append does not follow a torn record (recovery
        stops at the first bad record: everything after it would be lost). If even the cut
        fails, `broken` is set and every later write is refused."""
        if self.broken is not None:
            raise self.broken
        n = 0
        expected = sum(len(p) if isinstance(p, bytes) else p.size for p in parts)
        try:
            for i in range(0, len(parts), IOV_MAX):  # writev takes at most IOV_MAX buffers
                n += os.writev(self.fd, parts[i : i + IOV_MAX])
            if n != expected:  # a short write on a regular file means the disk is full
                raise OSError(errno.ENOSPC, f"No space left on device: short write to "
                              f"{wal_path(self.directory, self.number)}, {n} of {expected} bytes")
        except OSError as e:
            if n or os.fstat(self.fd).st_size != self.size:
                try:
                    os.ftruncate(self.fd, self.size)
                except OSError as cut:
                    self.broken = OSError(cut.errno, f"WAL file {wal_path(self.directory, self.number)} holds a "
                                          f"torn record that could not be cut ({cut}) after: {e}")
                    raise self.broken from e
            raise
        self.size += n
        return self.size

    def sync(self) -> None:
        os.fsync(self.fd)

    def switch(self) -> tuple[int, int]:
        """Start the next file without syncing this one; returns (its number, its open fd).

        The caller fsyncs and closes that fd later, outside its locks: at hundreds of MB/s an
        fsync of the closed file takes tens of ms, and appends must not wait for it.
        """
        old, fd = self.number, self.fd
        self._open(old + 1)
        return old, fd

    def rotate(self) -> int:
        """Make the current file durable, close it and open the next; returns the closed number."""
        old, fd = self.number, self.fd
        os.fsync(fd)
        self._open(old + 1)  # on a full disk this fails and the current file stays open and current
        os.close(fd)
        return old

    def close(self) -> None:
        if self.fd >= 0:
            os.fsync(self.fd)
            os.close(self.fd)
            self.fd = -1


@dataclass
class WalScan:
    """What reading one WAL file found."""

    path: Path
    records: list[tuple[str, pa.RecordBatch]] = field(default_factory=list)
    valid_bytes: int = 0
    file_bytes: int = 0
    error: str | None = None

    @property
    def torn_bytes(self) -> int:
        return self.file_bytes - self.valid_bytes


def read_wal(path: Path) -> WalScan:
    """Read every intact record of a WAL file, stopping at the first bad one."""
    data = Path(path).read_bytes()
    scan = WalScan(Path(path), file_bytes=len(data))
    if not data:  # created, then the writer died before the header: an empty log, nothing torn
        return scan
    if len(data) < len(MAGIC) or data[: len(MAGIC)] != MAGIC:
        scan.error = "missing WAL header" if len(data) < len(MAGIC) else "bad WAL magic"
        return scan
    pos = len(MAGIC)
    mv = memoryview(data)
    while pos < len(data):
        if pos + HEADER.size > len(data):
            scan.error = f"truncated record header at byte {pos}"
            break
        length, crc = HEADER.unpack_from(data, pos)
        start, end = pos + HEADER.size, pos + HEADER.size + length
        if length < NAME_LEN.size or length > MAX_RECORD or end > len(data):
            scan.error = f"record at byte {pos} claims {length} bytes, {len(data) - start} remain"
            break
        payload = mv[start:end]
        if crc32(payload) != crc:
            scan.error = f"CRC mismatch in record at byte {pos}"
            break
        (nlen,) = NAME_LEN.unpack_from(payload, 0)
        try:
            name = bytes(payload[2 : 2 + nlen]).decode()
            reader = pa.ipc.open_stream(pa.py_buffer(payload[2 + nlen :]))
            batches = list(reader)
        except (UnicodeDecodeError, pa.ArrowInvalid) as e:
            scan.error = f"undecodable record at byte {pos}: {e}"
            break
        for b in batches:
            scan.records.append((name, b))
        pos = end
    scan.valid_bytes = pos if scan.error is None else pos
    if scan.error is None:
        scan.valid_bytes = len(data)
    return scan


def cut_tail(scan: WalScan) -> None:
    """Truncate a WAL file to its last intact record and make that durable."""
    with open(scan.path, "r+b") as f:
        f.truncate(max(scan.valid_bytes, len(MAGIC)) if scan.valid_bytes >= len(MAGIC) else 0)
        f.flush()
        os.fsync(f.fileno())


def iter_uncovered(directory: Path, covered: int) -> Iterator[int]:
    for n in wal_numbers(directory):
        if n > covered:
            yield n


def uncovered_files(directory: Path, covered: int) -> tuple[tuple[int, int, int], ...]:
    """(number, size, mtime ns) of each WAL file above `covered`: what a reader in another
    process must read besides the registered segments, and whether it changed since the last
    look. Raises FileNotFoundError when a file vanished meanwhile (a checkpoint covered it)."""
    out = []
    for n in iter_uncovered(Path(directory), covered):
        st = os.stat(wal_path(directory, n))
        out.append((n, st.st_size, st.st_mtime_ns))
    return tuple(out)


def read_uncovered(directory: Path, files: tuple[tuple[int, int, int], ...]) -> list[tuple[str, pa.RecordBatch]]:
    """The intact records of `files` (from `uncovered_files`), read without a lock and without
    changing anything: a torn or half-written tail (the writer may be appending) ends a file's
    records and is left for the writer's recovery to cut. Raises FileNotFoundError like
    `uncovered_files`."""
    records: list[tuple[str, pa.RecordBatch]] = []
    for n, _size, _mtime in files:
        records += read_wal(wal_path(Path(directory), n)).records
    return records
