"""CSV importer: streaming, typed, with line numbers in every complaint.

Owns reading CSV files into mapped batches. Column types are inferred by
pyarrow from the first block; every block is then read as text and each
column validated against its type with vectorized regular expressions, so a
bad value later in the file rejects that row (or, with `strict`, stops the
import naming the file, line and column) instead of aborting the whole read
at an unknown position. Malformed rows (wrong number of fields) come from
pyarrow's invalid-row handler, which knows their line number.

pyarrow reads in blocks and refuses a line longer than about two of them
("straddles two block boundaries"), without saying where. The import then
starts again (what the first read appended rolled back) with a block that holds the
longest line, found by one scan of the file; a line over `MAX_LINE` is refused
naming its number and length.
"""

from __future__ import annotations

import codecs
import contextlib
import sys
from pathlib import Path

from ... import lazy
from ...errors import BadInput
from ..column_mapping import Mapping, TabularLoader
from ..report import ImportReport

# Imported on first use (lazy.py): `tracehouse import` loads every importer to read its options.
np = lazy.module("numpy")
pa = lazy.module("pyarrow")
pc = lazy.module("pyarrow.compute")
pacsv = lazy.module("pyarrow.csv")

NAME = "csv"
DESCRIPTION = "comma-separated values with a header row (one event per row)"
PRIORITY = 0  # asked last: the sniffer takes any text with a comma in its first line
BLOCK = 1 << 22
MAX_LINE = 256 << 20  # a longer CSV line is refused (named), not read into one block

_INT = r"^\s*[-+]?[0-9]+\s*$"
_FLOAT = r"^\s*[-+]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?|[iI]nf(inity)?|[nN]a[nN])\s*$"
_BOOL = r"^\s*(true|false|True|False|TRUE|FALSE|1|0)\s*$"
_TIME = r"^\s*[0-9]{4}-[0-9]{2}-[0-9]{2}([ T][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?)?(Z|[+-][0-9]{2}:?[0-9]{2})?\s*$"


def sniff(head: bytes) -> bool:
    """A CSV has a header line with a separator and no JSON/Parquet magic."""
    if head.startswith(b"PAR1") or head.lstrip()[:1] in (b"{", b"["):
        return False
    first = head.split(b"\n", 1)[0]
    return b"," in first and b"\x00" not in head[:4096]


def _validate(col: pa.Array, typ: pa.DataType) -> tuple[pa.Array, pa.Array]:
    """(typed column, bool mask of rows whose text is not a valid `typ`); '' is null."""
    empty = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(col)), 0)
    col = pc.if_else(empty, pa.scalar(None, pa.string()), col)
    if pa.types.is_string(typ) or pa.types.is_null(typ):
        return col, pa.array(np.zeros(len(col), dtype=bool))
    pattern = (
        _INT
        if pa.types.is_integer(typ)
        else _FLOAT
        if pa.types.is_floating(typ)
        else _BOOL
        if pa.types.is_boolean(typ)
        else _TIME
    )
    ok = pc.fill_null(pc.match_substring_regex(col, pattern), True)
    bad = pc.invert(ok)
    clean = pc.if_else(ok, pc.utf8_trim_whitespace(col), pa.scalar(None, pa.string()))
    try:
        return pc.cast(clean, typ), bad
    except pa.ArrowInvalid:
        # Matches the pattern but does not fit (an integer beyond int64): find those rows.
        vals = clean.to_pylist() if len(clean) < 1_000_000 else None
        if vals is None:
            raise
        over = [v is not None and not (-(2**63) <= int(v) < 2**63) for v in vals]
        bad = pc.or_(bad, pa.array(over))
        return pc.cast(pc.if_else(pa.array(over), pa.scalar(None, pa.string()), clean), typ), bad


def _straddles(e: Exception) -> bool:
    """pyarrow's "straddling object straddles two block boundaries": a line longer than its block."""
    return "straddl" in str(e)


def _line_numbers(first_row: int, n: int, header_lines: int, skipped: np.ndarray) -> np.ndarray:
    """Source line of each of `n` valid rows starting at valid-row index `first_row`.

    `skipped`: the sorted line numbers of rows left out (malformed). Valid row k is the b-th
    kept line, b = k + header_lines + 1, so its line is b + the number of skipped lines before
    it; skipped line s_j comes before it exactly when fewer than b kept lines precede s_j, i.e.
    s_j - j <= b (s_j - j never decreases, so one binary search counts them). An iteration to
    a fixed point stood here and gave wrong lines after 64 or more consecutive skipped rows."""
    base = np.arange(first_row, first_row + n, dtype=np.int64) + header_lines + 1
    if not skipped.size:
        return base
    return base + np.searchsorted(skipped - np.arange(skipped.size, dtype=np.int64), base, side="right")


class _LineTooLong(Exception):
    """pyarrow met a line longer than its block can hold (internal: the import starts again)."""


def longest_line(path: str | Path, chunk: int = 16 << 20) -> tuple[int, int]:
    """(1-based number, length in bytes without the newline) of the file's longest line, in one
    vectorized pass (newline positions per chunk; only run when pyarrow refused a line)."""
    best, best_line = -1, 0
    line, start, pos = 1, 0, 0  # current line number, its start offset, offset of the chunk
    with open(path, "rb") as f:
        while data := f.read(chunk):
            nl = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10) + pos
            if nl.size:
                starts = np.concatenate(([start], nl[:-1] + 1))
                lengths = nl - starts
                i = int(np.argmax(lengths))
                if lengths[i] > best:
                    best, best_line = int(lengths[i]), line + i
                line += nl.size
                start = int(nl[-1]) + 1
            pos += len(data)
    if pos - start > best:  # the last line, without a newline
        best, best_line = pos - start, line
    return best_line, best


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
    source = str(path)
    block, done, shown = BLOCK, [0], [0]

    def advance(n: int) -> None:  # a retry does not count its rows twice
        done[0] += n
        if progress is not None and done[0] > shown[0]:
            progress(done[0] - shown[0])
            shown[0] = done[0]

    while True:
        done[0] = 0
        try:
            with _undecodable_rows_quiet():
                return _import(
                    store,
                    path,
                    name,
                    mapping=mapping,
                    strict=strict,
                    description=description,
                    progress=advance,
                    block=block,
                )
        except _LineTooLong:
            line, length = longest_line(path)
            if length + 1 > MAX_LINE:
                raise BadInput(
                    f"line of {length:,} bytes (a CSV line may have at most {MAX_LINE:,})",
                    file=source,
                    line=line,
                    expected="one event per line",
                ) from None
            grown = 1 << max(length + 1, 1).bit_length()  # a power of two that holds the longest line
            if grown <= block:  # pyarrow refused a line the block holds: do not loop
                raise BadInput(
                    f"pyarrow could not read a line in blocks of {block:,} bytes (longest line: {length:,} bytes)",
                    file=source,
                    line=line,
                    expected="one event per line",
                ) from None
            block = grown


@contextlib.contextmanager
def _undecodable_rows_quiet():
    """pyarrow decodes a malformed row to text before calling the invalid-row handler; when
    the row is not UTF-8 that decode fails inside pyarrow, which prints "Exception ignored"
    and a traceback on stderr, then fails the read (reported by `first_non_utf8`)."""
    previous = sys.unraisablehook

    def hook(u) -> None:
        if not isinstance(u.exc_value, UnicodeDecodeError):
            previous(u)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


def _not_utf8(path: str | Path) -> BadInput | None:
    """The error naming the first byte of `path` that is not UTF-8, or None when it is all UTF-8."""
    at = first_non_utf8(path)
    if at is None:
        return None
    return BadInput(
        f"not UTF-8 text (byte 0x{at[2]:02x})",
        file=str(path),
        line=at[0],
        offset=at[1],
        expected="UTF-8 text, one event per line",
    )


def first_non_utf8(path: str | Path, chunk: int = 16 << 20) -> tuple[int, int, int] | None:
    """(line, byte offset in the file, the byte) of the first byte that is not UTF-8, or None."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    line, offset = 1, 0
    with open(path, "rb") as f:
        while True:
            data = f.read(chunk)
            try:
                decoder.decode(data, final=not data)
            except UnicodeDecodeError as e:
                # e.start indexes the decoder's pending bytes + this chunk; pending is < 4 bytes
                pending = len(e.object) - len(data)
                return line + e.object.count(b"\n", 0, e.start), offset - pending + e.start, e.object[e.start]
            if not data:
                return None
            line += data.count(b"\n")
            offset += len(data)


def _import(  # noqa: C901 - one pass over the file's options; its parts share the open reader
    store,
    path: Path,
    name: str,
    *,
    mapping: Mapping | None,
    strict: bool,
    description: str,  # noqa: C901
    progress,
    block: int,
) -> ImportReport:
    source = str(path)
    mapping = mapping or Mapping()
    if mapping.format is None:
        mapping.format = NAME
    try:
        with open(path, "rb") as f:
            header = f.readline(1 << 20)
    except FileNotFoundError:
        raise BadInput("no such file", file=source) from None
    try:
        header.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(
            f"header is not UTF-8 text (byte {e.start})",
            file=source,
            line=1,
            offset=e.start,
            expected="a header line of column names",
        ) from None
    try:
        # Types come from the first block; malformed rows are the second pass's business.
        probe = pacsv.open_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=block),
            parse_options=pacsv.ParseOptions(invalid_row_handler=lambda row: "skip"),
        )
        inferred = probe.schema
    except FileNotFoundError:
        raise BadInput("no such file", file=source) from None
    except (pa.ArrowInvalid, UnicodeDecodeError) as e:
        if _straddles(e):
            raise _LineTooLong() from None
        raise _not_utf8(path) or BadInput(
            f"not a readable CSV: {e}", file=source, line=None, expected="a header line, then one event per line"
        ) from None
    text_types = {f.name: pa.string() for f in inferred}
    skipped: list[int] = []
    reasons: dict[int, str] = {}  # line -> reason; -1 holds the strict-mode failure

    def on_invalid(row) -> str:
        # Raising here would be swallowed by pyarrow: record the row and let it fail the read.
        reason = f"expected {row.expected_columns} fields, got {row.actual_columns}"
        if strict:
            reasons[-1] = f"{row.number}\t{reason}"
            return "error"
        skipped.append(row.number)
        reasons[row.number] = reason
        return "skip"

    def read_error(e: Exception, row: int) -> Exception:
        if _straddles(e):
            return _LineTooLong()
        if -1 in reasons:
            line, reason = reasons[-1].split("\t", 1)
            return BadInput(reason, file=source, line=int(line), expected="the header's number of fields")
        # the usual cause: name its line rather than pyarrow's row
        return _not_utf8(path) or BadInput(
            f"unreadable CSV after data row {row}: {e}", file=source, expected="UTF-8 text, one event per line"
        )

    try:
        reader = pacsv.open_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=block, use_threads=False),
            parse_options=pacsv.ParseOptions(invalid_row_handler=on_invalid),
            convert_options=pacsv.ConvertOptions(column_types=text_types, strings_can_be_null=False),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError) as e:
        raise read_error(e, 0) from None

    def batches():
        row = 0
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                return
            except (pa.ArrowInvalid, UnicodeDecodeError) as e:
                raise read_error(e, row) from None
            row += batch.num_rows
            yield batch

    loader = TabularLoader(store, name, mapping, source, strict=strict, description=description)
    try:
        row = 0
        reported = 0
        for batch in batches():
            for ln in skipped[reported:]:
                loader.report.reject(ln, reasons[ln])
            reported = len(skipped)
            lines = _line_numbers(row, batch.num_rows, 1, np.array(skipped, dtype=np.int64))
            row += batch.num_rows
            arrays, bad_any = [], np.zeros(batch.num_rows, dtype=bool)
            for f in inferred:
                typed, bad = _validate(batch.column(f.name), f.type)
                badn = bad.to_numpy(zero_copy_only=False)
                if badn.any():
                    idx = np.flatnonzero(badn)
                    reason = f"column {f.name!r}: {batch.column(f.name)[int(idx[0])].as_py()!r} is not a valid {f.type}"
                    if strict:
                        raise BadInput(reason, file=source, line=int(lines[idx[0]]), expected=str(f.type))
                    for i in idx:
                        if not bad_any[i]:
                            loader.report.reject(
                                int(lines[i]), reason if i == idx[0] else f"column {f.name!r}: not a valid {f.type}"
                            )
                    bad_any |= badn
                arrays.append(typed)
            typed_batch = pa.RecordBatch.from_arrays(arrays, names=inferred.names)
            if bad_any.any():
                keep = pa.array(~bad_any)
                typed_batch = typed_batch.filter(keep)
                lines = lines[~bad_any]
            if typed_batch.num_rows:
                loader.add(typed_batch, lines)
            if progress is not None:
                progress(batch.num_rows)
        for ln in skipped[reported:]:
            loader.report.reject(ln, reasons[ln])
        return loader.finish()
    except BaseException as e:
        loader.abort(e)  # raises
