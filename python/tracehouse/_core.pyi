"""Typed stub of ``tracehouse._core``, the native (Rust) half of tracehouse.

Hand-written: keep it in step with ``src/lib.rs`` and ``src/py/``.
"""

from collections.abc import Iterator
from typing import Any, Final

import pyarrow as pa

__version__: Final[str]

def format_declarations() -> dict[str, dict]:
    """Every format declared in Rust (src/formats/mod.rs FORMATS, each src/formats/<fmt>/decl.rs),
    by name: {"description": str, "event_types": [(name, kind, doc, [(column, type, unit, doc),
    ...]), ...], "results": {kind: [(column, type, unit, doc), ...]}, "priority": int (sniffers
    are asked highest first), "sniffs": bool (a Rust sniffer), "parser_options": [(name, type,
    doc), ...] or None (no NativeParser), "profile": {"spans"?: {begin, end, key, name},
    "objects"?: {type, object, field, value}, "locals"?: {type, frame, var, value}, "samples"?:
    {type, stack, weight}, "labels": [(event type, name column, category column or None)]},
    "examples": [(title, SQL with {t} and {s})]}; parameters only (the common columns are
    schema.py's)."""
    ...

def sniff_formats(head: bytes) -> list[str]:
    """The declared formats whose sniffer recognises ``head`` (an input's first bytes,
    gunzipped), highest priority first."""
    ...

# -- every format's streaming parser (src/py/parser.rs over src/formats/parser.rs) ----------------

class NativeParser:
    """The streaming parser a format declares (``format_declarations()[fmt]["parser_options"]``
    not None): chrome, paje, bpftrace, stap, lineproto, perf, and plugins' formats built in.

    ``options`` are the common ones (``strict``: stop at the first bad record; ``batch_rows``;
    ``max_line``: the longest line or record, in bytes, default 16 MB) and the format's own
    (chrome ``max_arg_columns``; paje ``time_unit``, ``source``; bpftrace/stap ``patterns``,
    ``spans``; lineproto ``precision``); None values are left out. ValueError names an unknown
    format or option, or a bad value (a pattern that does not compile). Feed byte chunks of any
    size, cut anywhere; parsing releases the GIL."""

    def __init__(self, format: str, **options: bool | int | str | list[str] | None) -> None: ...
    @property
    def format(self) -> str: ...
    def feed(self, chunk: bytes) -> list[tuple[str, pa.RecordBatch]]:
        """Parse a chunk; returns the batches that are full, as (event type, batch)."""
    def finish(self) -> list[tuple[str, pa.RecordBatch]]:
        """End of input: the last record, what is still open closed; returns every remaining batch."""
    def drain(self) -> list[tuple[str, pa.RecordBatch]]:
        """Every row parsed so far as batches, the input going on (what is still open stays)."""
    def declare(self, event_type: str, column: str, ptype: str, key: str, end: bool = False) -> bool:
        """Store key ``key`` in ``column`` (type ``ptype``), as an earlier trace did (chrome's args);
        False when the format has no such columns or the name is taken."""
    def new_columns(self) -> list[tuple[str, str, str, str]]:
        """(event type, column, type, key) discovered since the last call."""
    def input_types(self) -> list[tuple[str, str, str, list[tuple[str, str, str, str]]]]:
        """Event types made from the options or the input (bpftrace's patterns and spans):
        (name, kind, doc, [(column, type, unit, doc)])."""
    def results(self) -> list[tuple[str, pa.RecordBatch]]:
        """Result tables to save beside the trace, taken: (kind, batch) (bpftrace's hist, map, stats)."""
    def producers(self) -> list[dict]:
        """Producer rows: {id, parent, kind, name, attrs}."""
    @property
    def stats(self) -> dict[str, int]:
        """Counts for the import report, ``rejected`` included."""
    @property
    def details_json(self) -> str:
        """Anything else the report shows, as a JSON object (chrome: {"top_level": [[key, JSON text]]}: the members beside traceEvents;
        bpftrace/stap: {"spans": {...}, "empty_results": [[kind, map]]})."""
    @property
    def problems(self) -> list[tuple[int, int, str]]:
        """The first rejected records: (line, byte offset or 0, reason)."""
    @property
    def fatal(self) -> tuple[int, int, str] | None:
        """strict mode: the record that stopped the parse."""

TOD_EVENT_TYPES: Final[tuple[str, str, str, str]]
"""("field_write", "var_write", "behavior_enter", "behavior_exit"), the order batches come in."""

def crc32(data: bytes | bytearray | memoryview | pa.Buffer, value: int = 0) -> int:
    """CRC-32 of a contiguous buffer continuing from `value`; equals zlib.crc32 (GIL released)."""
    ...

def tod_schemas() -> dict[str, pa.Schema]:
    """{event type: schema} of the four TOD event types.

    Every column is a non-null int64 except ``producer`` (int32) and ``arg0..arg3`` of
    ``behavior_enter`` (nullable: null from index ``arg_count`` on). Columns:

    - field_write: ts, producer, seq, parent_seq, field_id, target, value
    - var_write: ts, producer, seq, parent_seq, var_id, value
    - behavior_enter: ts, producer, seq, parent_seq, behavior_id, target, arg_count, arg0, arg1, arg2, arg3
    - behavior_exit: ts, producer, seq, parent_seq, behavior_id, ret_value

    ``ts`` is in ns on one global clock starting at 1_000_000_000 (strictly increasing
    over the whole trace); ``producer`` is the thread, 1..threads; ``seq`` numbers a
    thread's events 0, 1, 2, ... across all four types; ``parent_seq`` is the ``seq`` of
    the enclosing ``behavior_enter`` of the same thread (-1 for root calls; for an exit,
    the enter it closes). Object ids (target, value, args, ret_value) are 1..objects.
    """

class TodGenerator(Iterator[dict[str, pa.RecordBatch]]):
    """Deterministic generator of the TOD benchmark workload (seed 001).

    ``threads`` simulated threads call a root method in an endless loop; each method body
    performs 1..8 actions: a field write (45 %), a local-variable write (40 %) or a call
    (15 %, a variable write at ``max_depth``). A global scheduler interleaves the threads.
    Once ``events`` events are out, every thread exits its open calls, so the total is
    ``events`` plus at most ``threads * (max_depth + 1)``. Equal arguments give equal
    events, however the output is sliced into batches. Raises ValueError for a count
    below 1 (events may be 0).
    """

    def __init__(
        self,
        events: int = 1_000_000,
        seed: int = 42,
        threads: int = 10,
        methods: int = 1_000,
        fields: int = 1_000,
        locals: int = 50,
        objects: int = 10_000,
        max_depth: int = 10,
    ) -> None: ...
    def next_batches(self, max_events: int = 65_536) -> dict[str, pa.RecordBatch] | None:
        """Up to ``max_events`` (>= 1) next events, as {event type: RecordBatch} holding only
        the types that got rows, in TOD_EVENT_TYPES order; None once exhausted.
        Generation runs without the GIL (Ctrl-C is checked every ~1M events). The memory
        of batches the caller has dropped is reused for later ones, so dropping them
        before the next call (rather than holding many) keeps generation fastest."""
    def __iter__(self) -> TodGenerator: ...
    def __next__(self) -> dict[str, pa.RecordBatch]:
        """``next_batches()`` with the default size; StopIteration once exhausted."""
    @property
    def emitted(self) -> int:
        """Events produced so far."""
    @property
    def events(self) -> int:
        """Events requested."""
    @property
    def exhausted(self) -> bool:
        """True once every event has been produced."""

# -- line protocol (src/ingest/lineproto.rs, src/py/lineproto.rs) -----------------------------

class LpSchemas:
    """Measurements of one format and their typed field columns, shared by every decode of it.

    Column types are tracehouse parameter types: "float64", "int64", "string", "bool".
    Thread-safe (locks internally)."""

    def __init__(self) -> None: ...
    def declare(
        self,
        measurement: str,
        columns: list[tuple[str, str]],
        keys: dict[str, str] | None = None,
        key: str | None = None,
    ) -> None:
        """Declare (or widen) a measurement with columns the store has, in stored order,
        {column: field key} of the columns whose field key is not their name, and the
        measurement name `key` where it is not `measurement`.
        ValueError when a column is known with another type."""
    def measurement_key(self, measurement: str) -> str | None:
        """The measurement name of event type `measurement` where it is not the type's name."""
    def columns(self, measurement: str) -> list[tuple[str, str]] | None:
        """[(column, type)] in stored order, or None for an unknown measurement."""
    def keys(self, measurement: str) -> dict[str, str]:
        """{column: field key} of the columns whose field key is not their name."""
    def measurements(self) -> list[str]: ...

class LpProducers:
    """Tag sets of one trace and their producer ids (interned once). Thread-safe."""

    def __init__(self, next_id: int = 0) -> None: ...
    def declare(self, id: int, tags: list[tuple[str, str]]) -> None:
        """A producer the store already has (tags in any order)."""
    def take_new(self) -> list[tuple[int, str, list[tuple[str, str]]]]:
        """[(id, "k=v,k=v", [(tag, value)])] interned since the last call, in id order, tags sorted by key."""
    def reserve(self, id: int) -> None:
        """Keep `id` (chosen by an Arrow writer) from ever being given to a tag set."""
    @property
    def next_id(self) -> int: ...
    def __len__(self) -> int: ...

class OtlpProducers:
    """The producer tree of one OTLP trace (service -> host -> process -> thread), kept across
    requests. Thread-safe."""

    def __init__(self, next_id: int = 0, max: int = 1000000) -> None: ...
    def declare(self, id: int, parent: int | None, kind: str, key: str) -> None:
        """A producer the store already has: kind service|host|process|thread and its key
        (service.name, host.name, process.pid, thread.id)."""
    def take_new(self) -> list[dict]:
        """Producers made since the last call, as Store.add_producers takes them."""
    @property
    def next_id(self) -> int: ...
    def __len__(self) -> int: ...

class GroupCommit:
    """The group committer of one trace's WAL (fsync batch; src/store/commit.rs): a native thread
    fsyncs what was written (at once when anyone waits, else within `interval`) and runs
    what waits for it. The writer keeps `fd` open until it reports a switch or calls `stop`."""

    def __init__(self, fd: int, interval: float) -> None: ...
    def written(self, lsn: int) -> None:
        """Records up to `lsn` are written."""
    def switched(self, old_fd: int, new_fd: int) -> None:
        """The writer moved to `new_fd`; `old_fd` is handed over (fsynced, closed by the next commit)."""
    @property
    def durable(self) -> int: ...
    @property
    def error(self) -> str | None: ...
    def wait(self, lsn: int, timeout: float | None = None) -> bool:
        """Block (GIL released) until `lsn` is durable (True) or `timeout` (False); OSError if never."""
    def stop(self) -> None:
        """Commit everything written and stop (idempotent)."""

class WalRecord:
    """One framed WAL record (src/store/wal.rs): references the batches' buffers, no copy."""

    @property
    def size(self) -> int:
        """Bytes of the record, frame included."""
    def to_bytes(self) -> bytes:
        """The record as bytes (a copy: tests and the crash tests' torn writes)."""

class WalType:
    """The stored layout of one event type as the WAL append path checks and writes it."""

    def __init__(self, name: str, schema: pa.Schema) -> None: ...
    @property
    def schema(self) -> pa.Schema: ...
    def prepare(
        self, batches: list[pa.RecordBatch], seq: SeqCounters | None = None, encode: bool = True
    ) -> tuple[list[pa.RecordBatch], WalRecord | None, int] | None:
        """None when a batch is not in the stored layout (or it without seq): conform it first.
        Else (the batches as stored, seq numbered where absent; their record with `encode`;
        bytes of their columns). The checksum runs with the GIL released."""

class WalLog:
    """The current WAL file of a trace and its append policy (src/store/wallog.rs): small records
    over zeros written ahead, big ones into blocks reserved ahead, all-or-nothing writes."""

    def __init__(self) -> None: ...
    def set_file(self, fd: int, path: str, size: int, min_free: int = ...) -> None:
        """Make `fd` (the file at `path`, `size` bytes of records) the current file; nothing is
        written or reserved ahead with less than `min_free` bytes free (default 1 GiB)."""
    @property
    def size(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def reserved(self) -> int: ...
    @property
    def broken(self) -> tuple[int, str] | None:
        """(errno, message) once an append failed and could not be cut back."""
    def unreserve(self) -> None:
        """Cut the zeros and reserved blocks past the last record (before the file is closed)."""
    def write(self, record: WalRecord) -> int:
        """Append `record` (all or nothing, GIL released); returns where the records end."""
    def append(
        self,
        wal_type: WalType,
        batches: list[pa.RecordBatch],
        seq: SeqCounters | None = None,
        lsn: int = 0,
        fsync: str = "batch",
        committer: GroupCommit | None = None,
    ) -> tuple[list[pa.RecordBatch], int] | None:
        """Log `batches` as one record: conform fast path, `seq` where absent, framing, the
        write, then the fsync ("always") or `committer.written(lsn)` ("batch"), in one call
        with the GIL released once. None when a batch is not in the stored layout (nothing
        logged); else (stored batches, bytes of their columns). OSError when the write failed."""

    ...

def write_int_parquet(
    path: str,
    data: list[pa.RecordBatch] | pa.Table,
    schema: pa.Schema,
    dictionary: list[str],
    row_group: int,
    metadata: list[tuple[str, str]],
    created_by: str,
    checksums: bool = True,
) -> int:
    """Write `data` (a list of batches, or a Table / anything with `__arrow_c_stream__`, read
    without the GIL; int32/int64 columns of `schema` only) as the new Parquet file `path`
    (refused if it exists): DELTA_BINARY_PACKED, uncompressed, `dictionary` columns RLE_DICTIONARY,
    `row_group` rows per row group, `metadata` as key-value metadata, row-group statistics, a
    CRC-32 in every page header (`checksums`). Returns its size; GIL released (src/store/intparquet.rs). ValueError for other column types or
    nulls in a non-null column."""
    ...

def parquet_page_check(path: str, chunks: list[tuple[int, int]]) -> tuple[int, int, int, int | None, str | None]:
    """Walk the pages of the column chunks `chunks` ((byte offset, length) each) of the Parquet file
    `path` and compare each page's CRC-32 with its header's: (pages, pages with a CRC, bytes, the
    first damaged page's byte offset or None, why or None). GIL released."""
    ...

def segment_order(keys: pa.Table) -> pa.UInt32Array | None:
    """The stable order of the rows of `keys` (int32/int64 columns without nulls, first most
    significant; read as one Arrow C stream, GIL released): None when already in that order.
    ValueError for nulls, TypeError for other column types (src/py/segment.rs)."""
    ...

def int_range(table: pa.Table) -> tuple[int, int] | None:
    """`(min, max)` of the one int32/int64 column of `table` (GIL released); None when empty."""
    ...

class WriteBehind:
    """`with WriteBehind(fd):` a thread writes the file `fd` refers to back to the disk a step
    (1 MiB) at a time while another writer (parquet-cpp) writes it, waiting for each step, so
    the fsync after it does not queue the whole file at once (src/store/writeback.rs). Leaving the
    block stops it; the descriptor is duplicated, the caller closes its own."""

    def __init__(self, fd: int, step: int = ...) -> None: ...
    @property
    def settled(self) -> int:
        """Bytes written back so far."""
        ...
    def finish(self) -> None: ...
    def __enter__(self) -> WriteBehind: ...
    def __exit__(self, *exc: object) -> bool: ...

WAL_MAGIC: Final[bytes]
WAL_HEADER_BYTES: Final[int]
WAL_ZERO_RECORD_MAX: Final[int]
WAL_ZERO_AHEAD: Final[int]
WAL_RESERVE_AHEAD: Final[int]
WAL_RESERVE_MIN_FREE: Final[int]

def wal_scan(
    data: bytes, start: int = 0
) -> tuple[list[tuple[int, int, int, str | None, int, str | None]], int, str | None]:
    """The frames of a WAL file's bytes from byte `start` (src/store/walscan.rs, GIL released):
    (frames, end, error). A frame is (offset, length, then, name, ipc, damage): then 0 the log
    ends after it, 1 an intact frame follows, 2 anything else; ipc the index in `data` where its
    Arrow IPC stream begins; damage None, "CRC mismatch" or "undecodable record: ..."."""

def wal_failpoint(after: int) -> None:
    """Test hook: the `after`-th WAL record written from now writes half its record's payload (not its
    header, written last) and SIGKILLs the process."""
    ...

class SeqCounters:
    """Next sequence number per producer of one trace (the stored ``seq`` column). The store's
    writer owns one per trace and seeds it from the stored maxima. Thread-safe."""

    def __init__(self) -> None: ...
    def seed(self, next: dict[int, int]) -> None:
        """Make each producer continue at least at its number."""
    def assign(self, producer: pa.Array) -> pa.Array:
        """int64 numbers for rows of `producer` (int32, no nulls), in row order."""

def decode_otlp(
    body: bytes | Body, signal: str, producers: OtlpProducers, *, json: bool = False, seq: SeqCounters | None = None
) -> dict:
    """One OTLP request body (signal "traces" or "logs"; protobuf, or JSON when `json`) into
    {"batches": [(event type, RecordBatch)], "accepted", "rejected", "error"}; ValueError naming
    what was expected when the body is not such a request."""

def decode_otlp_many(
    items: list[tuple[bytes | Body, str, bool]],
    producers: OtlpProducers,
    *,
    seq: SeqCounters | None = None,
    log: WalLog | None = None,
    types: dict[str, WalType] | None = None,
    lsn: int = 0,
    fsync: str = "batch",
    committer: GroupCommit | None = None,
) -> dict:
    """The OTLP requests `(body, signal, json)` of one server round decoded together into one
    batch per event type: {"batches": [(event type, RecordBatch)], "bodies": [{"accepted",
    "rejected", "error", "invalid", "batches", "rows"}], "new_producers", "logged", "error"}.
    Per body: ``invalid`` why it is not such a request (else None), ``batches`` the indices of
    the batches holding its rows. Given `log` and `types` (under the writer's lock), a round
    that made no producer and whose batches are in their stored layouts is logged in the same
    call (batch i as record ``lsn + i``, then the fsync or ``committer.written``; GIL released
    once): ``logged`` the bytes of each batch's columns, ``error`` (errno, message) of a write
    that stopped the rest; ``logged`` None when nothing was tried."""

def otlp_response(signal: str, rejected: int = 0, message: str = "", *, json: bool = False) -> bytes:
    """An Export*ServiceResponse, with a partial success when items were refused."""

def otlp_status(code: int, message: str, *, json: bool = False) -> bytes:
    """A google.rpc.Status (the body of an OTLP/HTTP error answer)."""

def decode_lines_many(
    items: list[tuple[bytes | Body, str, int, int]],
    schemas: LpSchemas,
    producers: LpProducers,
    *,
    seq: SeqCounters | None = None,
    max_line: int = 1048576,
    max_producers: int = 1000000,
    max_columns: int = 1000,
    max_measurements: int = 10000,
    max_errors: int = 100,
    log: WalLog | None = None,
    types: dict[str, WalType] | None = None,
    registered_max: int = -1,
    lsn: int = 0,
    fsync: str = "batch",
    committer: GroupCommit | None = None,
) -> dict:
    """Bodies `(body, precision, default_ts, first_line)` decoded together into one batch per
    measurement (rows in input order): {"batches": [(measurement, RecordBatch)], "bodies":
    [{"lines", "rows", "errors", "error_count", "last_line", "rows_by_batch": [(batch index,
    rows)]}], "max_producer", "logged", "error"}. Each body keeps its own line numbers and errors.

    Given `log` (under its writer's lock) and `types` (the trace's stored layouts), a round whose
    producers are all at most `registered_max` and whose batches are all in their type's stored
    layout is logged in the same call (batch i as record ``lsn + i``, then the fsync or
    ``committer.written``; GIL released once): ``logged`` the bytes of each logged batch's
    columns, ``error`` (errno, message) of a write that stopped the rest; ``logged`` None when
    the round must first add producers, measurements or columns to the catalog.

    Each batch has ``ts`` (int64 ns, the body's ``default_ts`` when a line has none),
    ``producer`` (int32, the interned tag set), with `seq` given ``seq`` (int64, numbered per
    producer from those counters: the store's layout) and the measurement's columns in stored
    order (nullable). A line with a syntax error, invalid UTF-8, a type conflict, a timestamp
    outside int64 ns or over a limit is refused alone and changes no schema and no producer
    table. Field and measurement names become identifiers (other bytes -> ``_``, a leading
    digit gets ``_``, ts/producer/seq/dur/type get a ``_`` suffix)."""

# -- load generator (src/workload/loadgen.rs, src/py/loadgen.rs) ----------------------------------

QOS_ID_PARAMS: Final[list[str]]
"""The 13 measurement-id parameters of a Qosmet measurement (seed 003), written as tags."""
QOS_RESULT_PARAMS: Final[list[tuple[str, str, float, float]]]
"""The 48 result parameters: (name, "float64" | "int64", low, high) of their generated values."""
CPU_TAGS: Final[list[str]]
"""TSBS cpu-only tags (10)."""
CPU_FIELDS: Final[list[str]]
"""TSBS cpu-only fields (10, integers 0..100)."""

def run_load(
    *,
    workload: str = "qos",
    protocol: str = "http",
    host: str = "127.0.0.1",
    port: int = 8086,
    path: str = "/api/v2/write?bucket=qos",
    bucket: str = "qos",
    token: str | None = None,
    agents: int = 8,
    rows_per_batch: int = 1000,
    interval_ms: float = 0.0,
    duration_s: float = 10.0,
    batches_per_agent: int = 0,
    seed: int = 42,
    bodies: list[bytes] | None = None,
    content_type: str = "application/vnd.apache.arrow.stream",
    ts_offsets: list[int] | None = None,
) -> dict:
    """Run write load (one thread per agent, GIL released; Ctrl-C stops it).

    workload: "qos" | "cpu"; protocol: "http" (POST path, 2xx acknowledges), "tcp" (nothing
    acknowledged; opens with the tracehouse comment line naming bucket and token), "tcp-plain"
    (nothing acknowledged, no handshake: any line-protocol listener), "tcp-acks" (tracehouse
    durable offsets), "http-bodies" (POST the given
    ``bodies`` in turn; with ``ts_offsets``, the byte offset of each body's ``ts`` values,
    every send stamped with its own time). Returns elapsed_s, rows_sent, rows_acked, batches_sent,
    batches_acked, errors, statuses [(code, n)], error_samples, ack_us and e2e_us
    ([p50, p90, p99, max] microseconds), bytes_sent."""

# -- Chrome Trace Event JSON writer (src/formats/chrome/export.rs) -------------------------------------

class ChromeWriter:
    """Encodes record batches whose columns are named by role as Chrome JSON events."""

    def __init__(self, producers: list[tuple[int, str, str]], first: bool = True) -> None: ...
    def encode(self, batch: pa.RecordBatch, ph: str, name: str, cat: str) -> bytes:
        """The batch's events, each preceded by its separator (none before the very first); the last
        counter event is left open for the next row's series."""
    def finish(self) -> bytes:
        """What closes the last event: call once after the last batch."""
    @property
    def events(self) -> int: ...

"""("syscall", "signal", "exit"): the strace event types (tracehouse.formats.strace)."""

def strace_schemas() -> dict[str, pa.Schema]:
    """{event type: schema} of the strace event types; equal to the ``arrow_schema()`` of the
    EventTypes declared in ``tracehouse.formats.strace`` (units and meaning are there).

    - syscall: ts, producer, seq, dur, name, fd, path, path2, pos, size, ret, errno, flags, args
    - signal: ts, producer, seq, signal, code, sender, info
    - exit: ts, producer, seq, status, signal, core
    """

class StraceFileParse:
    """One strace file parsed on a thread of its own (src/formats/strace/background.rs), started at
    once: the importer makes the trace and imports pyarrow meanwhile. ``next()`` gives the batches
    as they complete (same rules as ``StraceParser``; at most a few messages are held ahead);
    dropping the object stops the thread."""

    def __init__(
        self,
        path: str,
        pid: int | None = None,
        batch_rows: int = 65_536,
        max_line: int = 16 << 20,
        keep_rejects: int = 10,
    ) -> None: ...
    def next(self) -> list[tuple[str, pa.RecordBatch]] | None:
        """The next batches (never empty), waited for without the GIL; None at the end. A read
        error is raised as OSError."""
    def stop(self) -> None:
        """End the parse at its next chunk (``next()`` then hands over what it has, then None)."""
    def close(self) -> None:
        """Stop the parse and wait for its thread (held batches dropped); ``next()`` then gives None."""
    def parser(self) -> StraceParser:
        """After ``next()`` returned None: the finished parser (stats, rejects, producers, late)."""
    @property
    def lines(self) -> int:
        """Lines read, as of the batches handed over so far."""
    @property
    def rejected(self) -> int:
        """Lines rejected, as of the batches handed over so far."""

class StraceParser:
    """Streaming parser of strace output (src/formats/strace/mod.rs): byte chunks in, batches out.

    ``pids`` has one entry per source: None for a file with a pid column (``-f``) or
    none needed, a tid for a ``-ff`` per-thread file whose lines have no pid column.
    With several sources, lines are merged by timestamp; feed the source ``need()``
    names. A chunk may end anywhere (partial lines are kept); ``b""`` ends a source.
    Batches hold at most ``batch_rows`` rows and arrive sorted by ``ts`` (a call left
    unfinished for more than two batches comes from ``late()``); ``seq`` is numbered per
    producer. Lines longer than ``max_line`` bytes are rejected without being held.
    Parsing runs without the GIL. Bad lines are counted, the first ``keep_rejects``
    kept with their source, line number and reason; parsing never raises on input.
    """

    def __init__(
        self,
        pids: list[int | None] | None = None,
        batch_rows: int = 65_536,
        max_line: int = 16 << 20,
        keep_rejects: int = 10,
    ) -> None: ...
    def need(self) -> int | None:
        """The source to feed next; None once every source has ended."""
    def feed(self, chunk: bytes | bytearray | memoryview, source: int = 0) -> list[tuple[str, pa.RecordBatch]]:
        """Parse a chunk (any contiguous bytes-like object, e.g. a memoryview of an mmap:
        read in place) of ``source`` (empty: its end); the batches completed so far. Nothing
        of the chunk is referenced after the call returns."""
    def finish(self) -> list[tuple[str, pa.RecordBatch]]:
        """End the input: unfinished calls are recorded (null ``ret``); the last batches."""
    def drain(self) -> list[tuple[str, pa.RecordBatch]]:
        """Every row parsed so far as batches, the input going on (a pipe committed as it
        arrives); a call not yet resumed is let go, its row comes from ``late()``."""
    def late(self) -> list[tuple[str, pa.RecordBatch]]:
        """After ``finish()``: calls left unfinished for more than two batches (a thread
        blocked in futex all along), sorted, but older than rows already returned: store
        them as a checkpoint of their own to keep every other checkpoint in order."""
    def producers(self) -> list[dict]:
        """[{id, parent, kind, name, attrs}]: processes (attrs pid) and threads (attrs tid, pid)."""
    def rejects(self) -> list[tuple[int, int, str]]:
        """The first rejected lines as (source, line number from 1, reason)."""
    @property
    def stats(self) -> dict:
        """lines, bytes, events (by type), rejected, notes (strace messages, -C table),
        orphans (resumed without a start), unfinished (never resumed)."""
    @property
    def rejected(self) -> int:
        """Rejected lines so far."""
    @property
    def lines(self) -> int:
        """Lines read so far."""

# -- analyses (src/analysis/: spans.rs, calltree.rs, hist.rs, density.rs; src/store/order.rs) ------
# Every array argument is a non-null pyarrow array of the stated type, imported without a
# copy; every pass runs with the GIL released.

def stable_order(keys: list[pa.Array]) -> pa.UInt32Array:
    """The permutation ordering rows by the int64 ``keys`` columns (first most significant),
    ties in input order (LSD radix sort on the packed key; a comparison sort when the key
    ranges need more than 64 bits). At most 2^32 - 1 rows."""

def running_max_by_key(keys: list[pa.Array], values: pa.Array) -> pa.Int64Array:
    """The running maximum of the int64 ``values`` within each run of rows with equal int64
    ``keys`` (rows ordered so equal keys are adjacent): out[i] = max of values[j], j <= i in
    i's run."""

_Col = pa.Array | pa.ChunkedArray | list[pa.Array]

def pair_spans(
    begin_ts: _Col,
    begin_producer: _Col,
    begin_seq: _Col,
    end_ts: _Col,
    end_producer: _Col,
    end_seq: _Col,
    begin_key: _Col | None = None,
    end_key: _Col | None = None,
) -> dict[str, pa.Array | bool]:
    """Pairs begin and end halves into spans, per producer in seq order (rules in
    ``src/analysis/spans.rs``). Columns are int64 (producer int32), each one array, a ChunkedArray
    or a list of arrays, with the same chunk lengths on one side; chunks are read in place.
    Returns, one row per begin (input order): ``end_row`` (int64, -1 when unclosed),
    ``end_ts``, ``depth`` (int32), ``parent`` (begin row, -1 at the root), ``self_ns``,
    ``closed`` (bool); ``unmatched_end`` (end rows that closed nothing), ``open_at_end``
    (begin rows still open when their producer's halves ran out, cut at its last half;
    ascending), ``presorted``
    (bool: no producer needed a sort) and ``begins_ordered`` (bool: the begins came in
    (ts, producer, seq) order). Raises ValueError on ragged columns or keys given for
    only one side."""

class SpanPairer:
    """``pair_spans`` fed batch by batch (``src/analysis/spans/stream.rs``): push begins and ends in
    their input order as they are read; each ``push`` pairs, without the GIL, as far as
    both sides have rows (one thread; the caller reads the next batches on another).
    The fast path only: inputs sorted by ts, every producer's seq growing along the
    merge by (ts, producer, seq)."""

    def __init__(self, keyed: bool, begins_hint: int = 0) -> None:
        """``begins_hint``: the number of begins expected (sizes the outputs once)."""
    def push(
        self,
        is_end: bool,
        ts: _Col,
        producer: _Col,
        seq: _Col,
        key: _Col | None = None,
    ) -> bool:
        """Adds begins (``is_end`` false) or ends, chunks aligned across the columns; False
        once the inputs broke the fast path's order (nothing more is paired: pair the
        whole input with ``pair_spans``). ValueError on ragged columns or a key on one
        side only."""
    def finish(self) -> dict[str, pa.Array | bool] | None:
        """What ``pair_spans`` returns plus ``unmatched_end_ts``, ``unmatched_end_producer``
        (int32), ``unmatched_end_seq`` and ``unmatched_end_key`` (int64 codes, 0 without
        keys): the values of the unmatched ends, in row order. None when the fast path
        was off."""

def nest_spans(
    ts: pa.Int64Array, dur: pa.Int64Array, producer: pa.Int32Array, seq: pa.Int64Array
) -> dict[str, pa.Array]:
    """Spans that carry their duration, nested by time per producer (rules in
    ``src/analysis/spans.rs``, ``nest``): ``depth`` (int32), ``parent`` (row, -1 at the root) and
    ``self_ns`` per row, in input order."""

def call_tree(parent: pa.Int64Array, key: pa.Int64Array, depth: pa.Int32Array) -> dict[str, pa.Array]:
    """Calling-context tree: ``node_of`` (node of each span), and per node ``parent``,
    ``key``, ``depth`` (nodes in creation order, parents first). ValueError when a parent is
    not one level above its child."""

def window_paths(
    node: pa.Int32Array,
    ts: pa.Int64Array,
    end_ts: pa.Int64Array,
    parent: pa.Int64Array,
    starts: pa.Int64Array,
    ends: pa.Int64Array,
    lo: int,
    hi: int,
) -> dict[str, pa.Int64Array]:
    """Per call path, the span index rows ``[starts[k], ends[k])`` with ``end_ts > lo``: ``ids``
    (the paths with spans, ascending), ``ppos`` (the parent's position in ids, -1), ``calls``,
    ``total`` (durations clipped to ``[lo, hi)``) and ``self_ns`` (total minus the child paths'
    totals). ValueError on a row range or path out of bounds."""

def window_candidates(
    node: pa.Int32Array,
    ts: pa.Int64Array,
    end_ts: pa.Int64Array,
    self_time: pa.Int64Array,
    starts: pa.Int64Array,
    ends: pa.Int64Array,
    lo: int,
    hi: int,
    n_paths: int,
    cand: pa.Int64Array,
) -> dict[str, Any]:
    """``window_paths`` for the call paths ``cand`` only: per candidate ``calls``, ``total``,
    ``self_ns`` (a span cut by an edge: its clipped time, children not taken off), the rows
    cut by an edge (``edges``), and over every path the overlapping ``spans`` and distinct
    ``paths``."""

def window_groups(
    group: pa.Int32Array,
    dur: pa.Int64Array,
    self_time: pa.Int64Array,
    closed: pa.UInt8Array | None,
    starts: pa.Int64Array,
    ends: pa.Int64Array,
    n_groups: int,
) -> tuple[pa.Int64Array, pa.Int64Array, pa.Int64Array, pa.Int64Array]:
    """Per group (a negative code: the last group), the rows ``[starts[k], ends[k])`` whose
    ``closed`` is not 0 (None: all): count, total dur, total self time, longest dur."""

def hist_log2(
    values: pa.Int64Array, k: int = 0, groups: pa.Int64Array | None = None, n_groups: int = 1
) -> pa.UInt64Array:
    """bpftrace ``hist(v, k)`` counts, ``n_groups`` x ``hist_log2_buckets(k)`` (row-major);
    values whose group is outside 0..n_groups are skipped."""

def hist_log2_buckets(k: int) -> int:
    """Number of ``hist(v, k)`` buckets (k in 0..5)."""

def hist_linear(
    values: pa.Int64Array, min: int, max: int, step: int, groups: pa.Int64Array | None = None, n_groups: int = 1
) -> pa.UInt64Array:
    """bpftrace ``lhist(v, min, max, step)`` counts, ``n_groups`` x ((max - min) / step + 2).
    ValueError unless step >= 1, min < max and (max - min) is a multiple of step."""

def binned_counts(ts: pa.Int64Array, starts: pa.Int64Array, ends: pa.Int64Array, edges: pa.Int64Array) -> pa.Int64Array:
    """Events per (stream, bin), streams x (len(edges) - 1): stream s is the sorted
    ``ts[starts[s]:ends[s]]``, bin b is [edges[b], edges[b + 1])."""

# -- packed index columns (src/analysis/packed.rs) ------------------------------------------------------

def pack_int64(
    values: pa.Int64Array, nullable: bool = False
) -> tuple[pa.LargeBinaryArray, pa.Int64Array, pa.UInt8Array]:
    """(data, base, bits): ``values`` in blocks of 1,024, each frame-of-reference bit-packed
    or delta-coded (whichever is smaller); ``nullable`` reserves code 0 for null."""

class PackedColumn:
    """A packed column read in place (the arrays are kept alive, typically memory-mapped);
    with ``rel`` the stored values are ``value - rel`` and reads add ``rel``'s."""

    def __init__(
        self,
        data: pa.LargeBinaryArray,
        base: pa.Int64Array,
        bits: pa.UInt8Array,
        len: int,
        nullable: bool,
        rel: PackedColumn | None = None,
    ) -> None: ...
    def __len__(self) -> int: ...
    def get(self, i: int) -> int | None:
        """Value i (None = null)."""
    def search(self, lo: int, hi: int, v: int, right: bool = False) -> int:
        """First row in [lo, hi) (sorted there) whose value is >= v (right: > v)."""
    def search_runs(self, starts: pa.Int64Array, ends: pa.Int64Array, v: int) -> int:
        """The row holding v in one of the sorted runs [starts[k], ends[k]), or -1."""
    def decode(self, a: int, b: int) -> pa.Int64Array:
        """Values [a, b)."""
    def take(self, rows: pa.Int64Array) -> pa.Int64Array:
        """The values at ``rows``."""
    def binned_counts(self, starts: pa.Int64Array, ends: pa.Int64Array, edges: pa.Int64Array) -> pa.Int64Array:
        """``binned_counts`` over this column (sorted within each stream)."""

# -- pprof export (src/formats/pprof/, src/py/pprof.rs) ----------------------------------------

def pprof_encode(
    stacks: list[str],
    values: list[list[int]],
    sample_types: list[tuple[str, str]],
    program: str,
    time_nanos: int = 0,
    duration_nanos: int = 0,
) -> bytes:
    """profile.proto bytes (not gzipped) of `stacks` (root first, `;`-joined) and their values
    (one per sample type); the GIL is released while it encodes."""

# -- HTTP front end of `tracehouse serve` (src/ingest/httpfront.rs) -------------------------------

class Body:
    """A request body handed over without a copy: read-only buffer protocol (pyarrow.py_buffer,
    zlib, memoryview, decode_lines_many read it in place); ``bytes(body)`` copies."""

    def __len__(self) -> int: ...
    def __bytes__(self) -> bytes: ...

class HttpRequest:
    """One complete request taken from an HttpFront; answer it exactly once with ``respond``."""

    @property
    def method(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def query(self) -> str:
        """The raw query string, without '?'."""
    @property
    def headers(self) -> list[tuple[str, str]]:
        """[(name, value)] in order, names lower-cased."""
    @property
    def peer(self) -> str: ...
    @property
    def answered(self) -> bool: ...
    def take_body(self) -> Body:
        """The body (de-chunked, not decompressed); a second call returns an empty one."""
    def respond(self, status: int, headers: list[tuple[str, str]] = ..., body: bytes = ...) -> None:
        """Answer (content-length and connection headers are added); a second answer raises."""
    def respond_when_durable(
        self, commit: GroupCommit, lsn: int, status: int, headers: list[tuple[str, str]] = ..., body: bytes = ...
    ) -> None:
        """Answer from `commit`'s thread once record `lsn` is durable (500 with the reason if it
        never will be); a second answer raises."""
    def respond_file(self, status: int, headers: list[tuple[str, str]], fd: int, len: int) -> None:
        """Answer with the first `len` bytes of file descriptor `fd` (from its start) as the body,
        sent from the file (sendfile); `fd` is duplicated, the caller closes its own."""

class TcpChunk:
    """Complete lines of one TCP connection (or the error of one line dropped for its length),
    taken from an HttpFront; finish it exactly once with ``finish`` or ``fail``."""

    @property
    def bucket(self) -> str: ...
    @property
    def precision(self) -> str: ...
    @property
    def peer(self) -> str: ...
    @property
    def acks(self) -> bool:
        """Whether the connection asked for durable offsets (`# tracehouse acks=1`)."""
    @property
    def first_line(self) -> int: ...
    @property
    def received_ns(self) -> int: ...
    @property
    def dropped(self) -> tuple[int, str] | None:
        """(line, reason) of a line dropped for its length, else None."""
    @property
    def finished(self) -> bool: ...
    def take_body(self) -> Body:
        """Its lines (each ending in newline); a second call returns an empty one."""
    def finish(
        self, rows: int, errors: list[tuple[int, str]], last_line: int, commit: GroupCommit | None = None, lsn: int = 0
    ) -> None:
        """Appended: under durable offsets `err`/`ok` lines are sent, the `ok` once `lsn` is
        durable in `commit` (None: at once)."""
    def fail(self, why: str) -> None:
        """Not appended: its error is sent (durable offsets) and the connection closed."""

class HttpFront:
    """Native HTTP/1.1 front end on a listening socket: thread per connection, framing
    (Content-Length, chunked, 100-continue), the token check on the head (401 before any body
    byte is read), limits (connections, head, body, bytes in flight) and timeouts (idle, whole
    request, minimum body rate); complete requests wait in one queue for ``take``."""

    def __init__(
        self,
        fd: int,
        *,
        max_body: int,
        max_connections: int,
        idle_timeout: float,
        max_inflight: int,
        overload_wait: float,
        retry_after: int = 1,
        max_head: int = 65536,
        token: str | None = None,
        open_paths: list[str] = ...,
        request_timeout: float = 300.0,
        min_rate: int = 0,
    ) -> None:
        """Takes ownership of listening socket descriptor `fd` (pass a dup). With `token`, every
        request but those to `open_paths` needs it (Token/Bearer, Basic password or ?p=)."""
    def take(self, max: int = 64, max_bytes: int = 8388608, timeout: float = 0.1) -> list[HttpRequest | TcpChunk]:
        """Up to `max` requests holding at most `max_bytes` of body, then up to `max` TCP chunks
        holding at most `max_bytes` of lines (at least one of either), waiting at most `timeout` s
        for the first (GIL released)."""
    def listen_tcp(
        self,
        fd: int,
        *,
        bucket: str,
        max_line: int,
        high_water: int,
        max_connections: int,
        idle_timeout: float,
        max_inflight: int,
        token: str | None = None,
    ) -> None:
        """Serve line protocol over TCP on listening socket `fd` (pass a dup) beside HTTP
        (src/ingest/tcpfront.rs): framing, the `# tracehouse ...` handshake, limits,
        back-pressure and the durable-offset acknowledgements; chunks come out of ``take``."""
    def close_tcp(self, timeout: float) -> int:
        """Stop accepting and reading TCP connections and wait up to `timeout` s for what they
        sent to be ingested and acknowledged (keep taking meanwhile); the connections left."""
    def close(self) -> None: ...
    def stats(self) -> dict[str, int]:
        """connections, refused_connections, overload_refusals, requests, inflight_bytes,
        auth_refusals (HTTP and TCP), slow_refusals; with TCP tcp_connections,
        tcp_refused_connections, tcp_inflight_bytes."""
    def last_auth_refusal(self) -> str:
        """The last request refused for its token ("POST /path from peer: wrong token"), or ""."""

REPLAY_KINDS: Final[list[str]]
"""Names of the replayed operation kinds, by the `kind` code of `ReplayPlan.op_columns`."""

REPLAY_SKIP_REASONS: Final[list[str]]
"""Why a traced call is not replayed, by the `reason` code of `ReplayPlan.skip_columns`."""

class ReplayPlan:
    """A replay plan built from a strace trace's `syscall` table (src/replay/plan.rs).

    ``batches``: the table in ts order with columns ts, dur, producer, name, fd, path, path2,
    pos, size, ret, errno, flags, fd2, pos2, args (types as stored) and target (a symlink's
    target as passed: the stored path_arg of symlink/symlinkat rows). ``process_of``: thread producer ->
    process producer; ``parent_of``: process -> forking process. ``maps``: (OLD, NEW) prefix
    rules (NEW relative to the root); ``only``: traced path prefixes to keep. Raises
    ValueError for a bad rule or a column of the wrong type. Building runs without the GIL.
    """

    def __init__(
        self,
        batches: list[pa.RecordBatch],
        process_of: dict[int, int],
        parent_of: dict[int, int],
        maps: list[tuple[str, str]] = ...,
        only: list[str] = ...,
    ) -> None: ...
    def stats(self) -> dict:
        """rows, ops, threads, slots, dependencies, span_ns, t_start, ops_by_kind,
        skipped_by_reason, prepare {dirs, files, bytes, absent}."""
        ...
    def threads(self) -> list[int]:
        """Producer id of each plan thread."""
        ...
    def paths(self) -> list[str]:
        """Mapped paths (relative to a copy's root), by path id."""
        ...
    def prep(self) -> list[tuple[str, str, int]]:
        """What the target gets before the run: (dir | file | absent, path, size)."""
        ...
    def op_columns(self) -> dict[str, pa.Array]:
        """Per op in (thread, index) order: thread, src (input row), kind, path (-1: none), at (ns), deps."""
        ...
    def skip_columns(self) -> dict[str, pa.Array]:
        """Per skipped row: src (input row), reason (index into REPLAY_SKIP_REASONS)."""
        ...
    def prepare(self, root: str, copies: int = 1, cold: bool = False) -> list[dict]:
        """Prepares each copy's root (root itself for one, root/copy-<k> for several): per copy
        dirs, files, kept, bytes, removed, unlinked (files with a second name replaced by a
        copy), errors [(path, message)], full (an error said the filesystem is full). OSError
        if the root cannot be opened or is /."""
        ...
    def start(
        self,
        root: str,
        copies: int = 1,
        timing: str = "original",
        speed: float = 1.0,
        spin_ns: int | None = None,
        lead_ns: int = 20_000_000,
        realtime: bool = False,
    ) -> ReplayRun:
        """Starts the workers (timing: original | think | asap | relative). ValueError for a bad
        timing, speed or copy count, or more than 4096 threads."""
        ...

class ReplayRun:
    """A replay running in its own threads; `result()` joins them."""

    def done_ops(self) -> int: ...
    def wait(self, timeout: float) -> bool:
        """True once every worker has ended (waits up to `timeout` seconds, GIL released)."""
        ...
    def cancel(self) -> None: ...
    def info(self) -> dict:
        """t0 (monotonic ns), wall0 (epoch ns), spin_ns, late_p50_ns, late_p90_ns, slack_ok, realtime."""
        ...
    def result(self) -> dict:
        """Joins; per replayed call in (copy, thread, index) order: copy, thread, op, planned (epoch
        ns, null for asap), issue (epoch ns), latency, lag (null for asap), ret, errno (0 ok), wait,
        ready (bool: ready before the planned time, so lag is the timer's error);
        plus cancelled, realtime and aborted (None, or the call that found the target full:
        errno, message, copy, op). RuntimeError if taken twice."""
        ...

def replay_raw_preads(paths: list[str], offsets: pa.Int64Array, size: int, threads: int) -> float:
    """The replay benchmark's peer: the preads in a bare loop over `threads` threads; wall seconds."""
    ...

# -- the recorder of Python programs (src/record/, src/py/record.rs) ------------------------

RECORD_EVENT_TYPES: Final[list[str]]
"""The event types a recording's program events come as: behavior_enter, behavior_exit,
var_write, field_write, line_step (the `python` format; code, symbol and source describe it)."""

def record_start(
    fd: int,
    rules: list[tuple[str, bool]],
    actions: bytes,
    *,
    flush_rows: int = 32768,
    hello: str = "{}",
    monitoring: bool = False,
    disable: object | None = None,
    depths: object | None = None,
) -> None:
    """Starts recording this process into descriptor `fd` (taken over): 3.11 installs the C trace
    function in the calling thread; with `monitoring` (3.12+) the caller has registered
    `record_callbacks()` and passes `sys.monitoring.DISABLE` and `depths` (code -> int16 stack
    depths per code unit). `rules`: (path prefix, recorded?), the longest match decides;
    `actions`: one action code per opcode (tracehouse.record.child.opcode_actions)."""
    ...

def record_attach_thread() -> None:
    """Installs the 3.11 trace function in the calling thread (threads started after record_start)."""
    ...

def record_callbacks() -> dict[str, object]:
    """{sys.monitoring event name: callback} of a 3.12+ recording."""
    ...

def record_stop(end: str) -> dict:
    """Stops recording, writes the end frame (`end`: JSON of the program's end) and joins the
    writer: {events, by_type, symbols, codes, excluded_codes, threads, sources, bytes, files}."""
    ...

def record_forget() -> None:
    """In a forked child: records nothing more and never writes the parent's stream."""
    ...

class RecordReader:
    """Decodes a recorder stream (a descriptor it takes over, or a file path) into record batches
    (one per event type and read; `ts_offset` added to every event's ts)."""

    def __init__(self, source: int | str, ts_offset: int = 0) -> None: ...
    def read(self, max_rows: int = 262144) -> dict:
        """About `max_rows` events (interpreter lock released while reading): {"batches": [(type,
        pyarrow.RecordBatch)], "threads": [{producer, ident, name, ts}], "hello": str | None,
        "end": str | None, "eof": bool}. A cut or damaged stream raises ValueError naming the byte."""
        ...
    @property
    def offset(self) -> int:
        """Bytes decoded so far."""
        ...
    def close(self) -> None: ...

class SeriesPart:
    """A part of a measurement's columns for the native InfluxQL executor: rows sorted by
    (producer, ts, seq), fields by the measurement's field index (double or int64, nulls allowed;
    None: the part has none of that field). Unsorted rows raise ValueError naming the row."""

    def __init__(self, producer: pa.Array, ts: pa.Array, seq: pa.Array, fields: list[pa.Array | None]) -> None: ...
    @property
    def rows(self) -> int: ...
    @property
    def nbytes(self) -> int: ...

def influx_aggregate(
    parts: list[SeriesPart],
    selection: tuple[list[list[int]], int, int, list[tuple[int, str, int | float]], list[int]],
    aggs: list[tuple[str, int]],
    int_fields: list[bool],
    interval: int,
    offset: int,
    fill_none: bool,
    stamp: int,
    selector_time: bool,
    descending: bool,
    page_offset: int,
    page_limit: int,
    max_buckets: int,
    grid_hi: int,
    prefixes: list[str] | None = None,
    epoch_div: int = 0,
) -> tuple[pa.UInt32Array, pa.Int64Array, pa.Int32Array, list[pa.Array]] | list[bytes] | None:
    """An aggregate InfluxQL query over `parts` and `selection` ((the producers of each output
    group, time lo, time hi, (field, op, number) conditions, fields one of which is present)):
    each row's group,
    time and values (count, integer sum/min/max/first/last: int64; else double), or None when
    it has more than `max_buckets` windows. With `prefixes`, whole series as JSON text instead
    (one per group with rows, as `influx_raw_json` writes them)."""
    ...

def influx_raw(
    parts: list[SeriesPart],
    selection: tuple[list[list[int]], int, int, list[tuple[int, str, int | float]], list[int]],
    fields: list[int],
    int_fields: list[bool],
    descending: bool,
    offset: int,
    limit: int,
) -> tuple[pa.UInt32Array, pa.Int64Array, pa.Int32Array, list[pa.Array]]:
    """The points of a raw InfluxQL query over `parts` (interpreter lock released): each row's
    group, time, producer and the values of `fields`, by (time, producer, seq) per group."""
    ...

def influx_raw_json(
    parts: list[SeriesPart],
    selection: tuple[list[list[int]], int, int, list[tuple[int, str, int | float]], list[int]],
    fields: list[int],
    int_fields: list[bool],
    descending: bool,
    offset: int,
    limit: int,
    epoch_div: int,
    outs: list[tuple[bool, int]],
    producers: list[int],
    tag_text: list[list[str]],
    prefixes: list[str],
) -> list[bytes]:
    """A raw InfluxQL query as `influx_raw` runs it, answered as whole InfluxDB series (JSON text,
    one per group with rows): `prefixes[g]` (the series object up to `"values":`), its rows with
    `outs` (is a tag, index into `fields` or `tag_text`; a tag's text by the row producer's place
    in the sorted `producers`), then `}`."""
    ...
