"""The derived data behind the UI's pages, and the background jobs that build it.

Owns deciding, per trace, which derived data exists and building what is missing:

  density   the density index (analysis/statistics.py): every event's ts (and dur) by
            (type, producer, ts); counts per time bin or range are binary searches
  spans     the span table paired and saved as the processed trace `<trace>:spans`, and
            the span index (analysis/spans.py): spans by (producer, depth, ts), mmapped
  calls     every span's call path (`_core.call_tree`, as the aggregated call tree does)
            and name code, aligned with the span index rows: a flame graph or a
            by-name statistic of any time range or producer set is then one bincount

A request never waits for a build on a big trace: traces up to `INLINE_EVENTS` events are
prepared inside the request (a 2M-event trace in about a second); a bigger one gets one
background job (`Jobs`, one worker thread: builds are CPU- and memory-heavy and this
machine has two cores) that builds every part in turn, and the request answers at once
with `Pending` (HTTP 202 and the job's progress; the page polls and redraws). Built
indexes are saved in the store (`analysis/indexes.py`), so a server restart finds them.

What is kept in this process: per trace signature, the parsed stream table of the
density index and the call paths (int32 per span: 68 MB for 17M spans); the mmapped
indexes themselves cost no heap.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
import traceback
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import numpy as np
import pyarrow as pa

from ... import _core
from ...analysis import indexes
from ...analysis.profiles import PROFILES, SpanConfig, span_config
from ...analysis.spans import _begin_name, _name_strings, span_index
from ...analysis.event_streams import density_index, seq_guesser
from ...arrays import as_numpy
from ...errors import BadInput, TracehouseError

if TYPE_CHECKING:
    from ...store import Store

log = logging.getLogger("tracehouse.server.ui")

INLINE_EVENTS = 2_000_000  # traces up to this many events are prepared inside the request
ANSWERS_KEPT = 256  # answers kept (Preparer.cached)
NAME_COLUMNS = ("name", "syscall", "value", "state", "func", "probe", "event")  # a span's label, in this order


class Pending(Exception):
    """The data a request needs is being built by a background job (HTTP 202)."""

    def __init__(self, job: "Job", what: str) -> None:
        super().__init__(f"building {what} of {job.trace!r}")
        self.job = job
        self.what = what


@dataclass
class Job:
    """A background build or import, as the page sees it (`to_json`)."""

    id: int
    kind: str  # "prepare" | "import"
    trace: str
    run: Callable[["Job"], dict | None]
    state: str = "queued"  # queued | running | done | failed
    step: str = ""
    done_steps: int = 0
    steps: int = 1
    error: str | None = None
    result: dict | None = None
    created: float = field(default_factory=time.time)
    finished: float | None = None

    def to_json(self) -> dict:
        return {"id": self.id, "kind": self.kind, "trace": self.trace, "state": self.state, "step": self.step,
                "done_steps": self.done_steps, "steps": self.steps, "error": self.error, "result": self.result,
                "seconds": round((self.finished or time.time()) - self.created, 2)}


class Jobs:
    """Background jobs run one at a time on one thread; the last 100 are kept for the pages."""

    KEEP = 100

    def __init__(self) -> None:
        self._jobs: dict[int, Job] = {}
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self._queue: list[Job] = []
        self._closed = False
        self._thread = threading.Thread(target=self._work, name="th-ui-jobs", daemon=True)
        self._thread.start()

    def submit(self, kind: str, trace: str, run: Callable[[Job], dict | None], steps: int = 1) -> Job:
        """A job for (kind, trace): the one already queued or running, else a new one."""
        with self._cond:
            for j in self._jobs.values():
                if j.kind == kind and j.trace == trace and j.state in ("queued", "running") and kind != "import":
                    return j
            job = Job(next(self._ids), kind, trace, run, steps=steps)
            self._jobs[job.id] = job
            for old in sorted(self._jobs)[:-self.KEEP]:
                if self._jobs[old].state in ("done", "failed"):
                    del self._jobs[old]
            self._queue.append(job)
            self._cond.notify()
            return job

    def get(self, jid: int) -> Job:
        with self._cond:
            if jid not in self._jobs:
                from ...errors import NotFound

                raise NotFound(f"no job {jid}")
            return self._jobs[jid]

    def list(self) -> list[Job]:
        with self._cond:
            return list(self._jobs.values())

    def failed(self, kind: str, trace: str) -> Job | None:
        """The last job of (kind, trace) if it failed (a page shows why instead of retrying forever)."""
        with self._cond:
            last = [j for j in self._jobs.values() if j.kind == kind and j.trace == trace]
        return last[-1] if last and last[-1].state == "failed" else None

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                job = self._queue.pop(0)
                job.state = "running"
            try:
                job.result = job.run(job)
                job.state = "done"
            except BaseException as e:  # noqa: BLE001 - a failed job is reported on its page
                job.error = str(e) if isinstance(e, TracehouseError) else f"{type(e).__name__}: {e}"
                job.state = "failed"
                if not isinstance(e, TracehouseError):
                    log.error("web UI job %s (%s %s) failed:\n%s", job.id, job.kind, job.trace, traceback.format_exc())
            job.finished = time.time()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


# -- what a trace's spans are -----------------------------------------------------------------


def ui_span_config(store: "Store", trace: str) -> tuple[SpanConfig | None, str]:
    """(how the trace's spans are made, why not when None): the format's profile or the
    analyses' inference (`span_config`), except that a format without a profile that has a
    span-kind type shows those spans (nested by time); labelled by the first string column
    among NAME_COLUMNS when the pairing names none."""
    info = store.trace(trace)
    if info.metadata.get("tool"):  # a processed trace (`<trace>:spans`): its spans are its source's
        return None, f"a trace derived by {info.metadata['tool']}: open {info.metadata.get('source', 'its source')}"
    types = store.event_types(trace)
    spans = [t for t in types.values() if t.kind == "span"]
    try:
        if info.format not in PROFILES and spans:
            # Spans the importer already made (bpftrace/stap --span, Paje states, CSV --dur) rather
            # than pairing again the begin/end halves it left over.
            raise BadInput("spans of a span-kind type")
        cfg = span_config(store, trace)
    except BadInput as e:
        if not spans:
            return None, f"no spans: {e.reason}"
        cfg = SpanConfig(spans[0].name, None)
    if cfg.begin not in types or (cfg.end is not None and cfg.end not in types):
        return None, f"no event type {cfg.begin!r} in this trace"
    if cfg.name_column is None:
        strings = {c.name for c in types[cfg.begin].params if c.type == "string"}
        name = next((n for n in NAME_COLUMNS if n in strings), None)
        cfg = SpanConfig(cfg.begin, cfg.end, cfg.key, name)
    return cfg, ""


def span_index_params(cfg: SpanConfig) -> dict:
    """The parameters `analysis.spans.span_index` saves its index under (to find it without building it)."""
    from ...analysis import spans

    rules = getattr(spans, "RULES", None)
    return {"config": cfg.to_json()} | ({"rules": rules} if rules is not None else {})


# -- the derived data of one trace -----------------------------------------------------------------


@dataclass
class Streams:
    """The density index's stream table as arrays: stream i is rows [offset, offset+count)."""

    index: indexes.PackedIndex
    types: np.ndarray  # object: type name per stream
    producers: np.ndarray  # int64
    offsets: np.ndarray  # int64
    counts: np.ndarray  # int64
    ts: np.ndarray  # the index's ts column (mmapped view)
    dur: np.ndarray | None  # its dur column (nulls as -1), when some type is a span kind
    lo: int | None  # first and last ts of the trace
    hi: int | None


@dataclass
class Calls:
    """Call paths of every span, aligned with the span index rows."""

    node: np.ndarray  # int32 node id per span index row
    parent: np.ndarray  # per node
    depth: np.ndarray  # per node
    label: np.ndarray  # per node: the name code of its frame
    names: pa.Array  # name code -> text
    code: np.ndarray  # int32 name code per span index row


@dataclass
class Blocks:
    """Runs of span index rows with one (producer, depth): block i is rows [start, end)."""

    start: np.ndarray
    end: np.ndarray
    producer: np.ndarray
    depth: np.ndarray
    all_closed: bool
    cumdur: np.ndarray | None = None  # prefix sums of dur, made on first use (Preparer.cumdur)


@dataclass
class SpanData:
    config: SpanConfig
    index: indexes.PackedIndex  # span index: spans by (producer, depth, ts), packed and mmapped
    processed: str | None  # name of the processed trace


class Preparer:
    """Finds or builds each trace's derived data (see the module doc)."""

    def __init__(self, store: "Store", jobs: Jobs, inline_events: int = INLINE_EVENTS) -> None:
        self.store = store
        self.jobs = jobs
        self.inline_events = inline_events
        self._lock = threading.RLock()
        self._streams: dict[tuple, Streams] = {}
        self._calls: dict[tuple, Calls] = {}
        self._builds: dict[str, threading.RLock] = {}
        self._blocks: dict[tuple, Blocks] = {}
        self._answers: OrderedDict = OrderedDict()
        self.warm: Callable[[str], None] | None = None  # computes a trace's whole-trace answers ahead (app.py)

    def _build_lock(self, trace: str) -> threading.RLock:
        with self._lock:
            return self._builds.setdefault(trace, threading.RLock())

    def _key(self, trace: str) -> tuple:
        return trace, self.store.stamp(trace)

    # -- readiness -----------------------------------------------------------------------

    def _need(self, trace: str, what: str, fresh: Callable[[], object | None], build: Callable[[], object]):
        """`fresh()` when built; else built here (small trace) or by the prepare job (Pending)."""
        got = fresh()
        if got is not None:
            return got
        info = self.store.trace(trace)
        if info.event_count <= self.inline_events:
            # Requests of one page arrive together: one builds, the others wait for it and
            # find it fresh (two builds would both save a processed trace of the same name).
            with self._build_lock(trace):
                got = fresh()
                return got if got is not None else build()
        failed = self.jobs.failed("prepare", trace)
        if failed is not None and failed.created > time.time() - 60:
            raise BadInput(f"preparing {trace!r} failed: {failed.error}")
        job = self.jobs.submit("prepare", trace, lambda job: self._prepare_all(trace, job), steps=4)
        raise Pending(job, what)

    def _prepare_all(self, trace: str, job: Job) -> dict:
        with self._build_lock(trace):
            return self._prepare_steps(trace, job)

    def _prepare_steps(self, trace: str, job: Job) -> dict:
        t0 = time.perf_counter()
        out = {}
        job.step = "density index"
        self.streams(trace, build=True)
        out["density_s"] = round(time.perf_counter() - t0, 2)
        job.done_steps = 1
        cfg, _why = ui_span_config(self.store, trace)
        if cfg is not None:
            job.step = "spans and span index"
            t1 = time.perf_counter()
            self.spans(trace, build=True)
            out["spans_s"] = round(time.perf_counter() - t1, 2)
            job.done_steps = 2
            job.step = "call paths"
            t2 = time.perf_counter()
            self.calls(trace, build=True)
            out["calls_s"] = round(time.perf_counter() - t2, 2)
        job.done_steps = 3
        if self.warm is not None:
            job.step = "the overview of the whole trace"
            t3 = time.perf_counter()
            self.warm(trace)
            out["overview_s"] = round(time.perf_counter() - t3, 2)
        job.done_steps = 4
        job.step = "ready"
        return out

    def ready(self, trace: str) -> dict:
        """Which parts exist now (nothing is built)."""
        key = self._key(trace)
        cfg, _ = ui_span_config(self.store, trace)
        spans = cfg is not None and indexes.fresh(self.store, trace, "spans", span_index_params(cfg)) is not None
        return {"density": key in self._streams or density_index(self.store, trace, build=False) is not None,
                "spans": spans if cfg is not None else None,
                "calls": (key in self._calls) if cfg is not None else None}

    # -- the parts -----------------------------------------------------------------------

    def streams(self, trace: str, *, build: bool = False) -> Streams:
        key = self._key(trace)
        with self._lock:
            got = self._streams.get(key)
        if got is not None:
            return got

        def make(idx: pa.Table) -> Streams:
            rows = json.loads(idx.schema.metadata[b"streams"])
            ts = indexes.array(idx, "ts") if idx.num_rows else np.zeros(0, np.int64)
            dur = None
            if "dur" in idx.column_names and idx.num_rows:
                d = idx.column("dur")
                dur = as_numpy(d.fill_null(-1) if d.null_count else d)
            rows, ts, dur = _one_stream_each(rows, ts, dur)
            counts = np.array([r["count"] for r in rows], np.int64)
            offsets = np.array([r["offset"] for r in rows], np.int64)
            nz = counts > 0
            lo = int(ts[offsets[nz]].min()) if nz.any() else None
            hi = int(ts[offsets[nz] + counts[nz] - 1].max()) if nz.any() else None
            s = Streams(idx, np.array([r["type"] for r in rows], dtype=object),
                        np.array([r["producer"] for r in rows], np.int64), offsets, counts, ts, dur, lo, hi)
            with self._lock:
                for k in [k for k in self._streams if k[0] == trace]:
                    del self._streams[k]
                self._streams[key] = s
            return s

        if build:
            return make(density_index(self.store, trace))
        return self._need(trace, "the density index",
                          lambda: (lambda i: None if i is None else make(i))(density_index(self.store, trace, build=False)),
                          lambda: make(density_index(self.store, trace)))

    def spans(self, trace: str, *, build: bool = False) -> SpanData | None:
        """The span index of `trace`, None when the trace has no spans."""
        cfg, _why = ui_span_config(self.store, trace)
        if cfg is None:
            return None
        params = span_index_params(cfg)

        def wrap(idx: pa.Table | None) -> SpanData | None:
            if idx is None:
                return None
            from ...analysis.spans import processed

            return SpanData(cfg, idx, processed(self.store, trace, cfg))

        if build:
            return wrap(span_index(self.store, trace, cfg))
        return self._need(trace, "the span index", lambda: wrap(indexes.fresh(self.store, trace, "spans", params, seq_guesser(self.store, trace))),
                          lambda: wrap(span_index(self.store, trace, cfg)))

    def blocks(self, trace: str, sd: SpanData) -> Blocks:
        """The (producer, depth) blocks of the span index (one pass, kept per trace signature)."""
        key = self._key(trace)
        with self._lock:
            got = self._blocks.get(key)
        if got is None:
            got = _blocks(sd.index)
            with self._lock:
                for k in [k for k in self._blocks if k[0] == trace]:
                    del self._blocks[k]
                self._blocks[key] = got
        return got

    def cumdur(self, trace: str, sd: SpanData) -> np.ndarray:
        """Prefix sums of the span durations over the span index rows (len + 1; 8 bytes a span):
        a level's busy time between two instants is then two lookups (the timeline)."""
        b = self.blocks(trace, sd)
        if b.cumdur is None:
            dur = indexes.array(sd.index, "end_ts") - indexes.array(sd.index, "ts")
            b.cumdur = np.concatenate([[0], np.cumsum(dur)])
        return b.cumdur

    def all_closed(self, trace: str, sd: SpanData) -> bool:
        return self.blocks(trace, sd).all_closed

    def cached(self, trace: str, what: tuple, make: Callable[[], dict]) -> dict:
        """An answer kept per (trace signature, question): a page shown again, the same selection in
        another view, and the whole-trace answers the prepare job computes ahead."""
        key = (self._key(trace), what)
        with self._lock:
            if key in self._answers:
                self._answers.move_to_end(key)
                return self._answers[key]
        doc = make()
        with self._lock:
            self._answers[key] = doc
            while len(self._answers) > ANSWERS_KEPT:
                self._answers.popitem(last=False)
        return doc

    def calls(self, trace: str, *, build: bool = False) -> Calls | None:
        """Call paths and name codes per span index row, None without spans."""
        key = self._key(trace)

        def cached() -> Calls | None:
            with self._lock:
                return self._calls.get(key)

        def make() -> Calls | None:
            sd = self.spans(trace, build=build)
            if sd is None:
                return None
            c = _call_paths(sd)
            with self._lock:
                for k in [k for k in self._calls if k[0] == trace]:
                    del self._calls[k]
                self._calls[key] = c
            return c

        got = cached()
        if got is not None or build:
            return got if got is not None else make()
        if ui_span_config(self.store, trace)[0] is None:
            return None
        return self._need(trace, "the call paths", cached, make)


def _one_stream_each(rows: list[dict], ts: np.ndarray, dur: np.ndarray | None):
    """The density index's streams with one entry per (type, producer): an index in parts
    (`indexes.get_parts`) lists a stream once per part; their rows are merged in ts order."""
    keys = [(r["type"], r["producer"]) for r in rows]
    if len(set(keys)) == len(keys):
        return rows, ts, dur
    groups: dict[tuple, list[dict]] = {}
    for k, r in zip(keys, rows):
        groups.setdefault(k, []).append(r)
    out_rows, ts_parts, dur_parts, off = [], [], [], 0
    for (typ, prod), rs in groups.items():  # one step per stream, not per event
        idx = np.concatenate([np.arange(r["offset"], r["offset"] + r["count"]) for r in rs])
        idx = idx[np.argsort(ts[idx], kind="stable")]
        ts_parts.append(ts[idx])
        if dur is not None:
            dur_parts.append(dur[idx])
        out_rows.append({"type": typ, "producer": prod, "offset": off, "count": len(idx)})
        off += len(idx)
    ts = np.concatenate(ts_parts) if ts_parts else ts[:0]
    return out_rows, ts, (np.concatenate(dur_parts) if dur_parts else dur)


def _call_paths(sd: SpanData) -> Calls:
    """Every span's node of the calling-context tree (`_core.call_tree`, the aggregated call
    tree's own pass), aligned with the span index rows (which are ordered by producer,
    depth, ts: the pass wants span_id order, so columns go through `row_of`)."""
    idx = sd.index
    n = idx.num_rows
    row_of = np.empty(n, np.int64)  # the row of span i (span_id is a permutation of 0..n-1)
    row_of[indexes.array(idx, "span_id")] = np.arange(n, dtype=np.int64)
    name_col = _begin_name(sd.config.name_column) if sd.config.name_column else None
    if name_col and name_col in idx.column_names:
        codes_rows, names = _name_strings(idx.column(name_col))
    else:
        codes_rows, names = np.zeros(n, np.int64), pa.array([sd.config.begin])
    if n == 0:
        z = np.zeros(0, np.int64)
        return Calls(z.astype(np.int32), z, z.astype(np.int32), z, names, z.astype(np.int32))
    parent_rows = indexes.array(idx, "parent_id")
    depth_rows = indexes.array(idx, "depth")
    # span_id order: column[row_of[i]] is span i's value.
    parent = parent_rows[row_of]
    codes = codes_rows[row_of]
    depth = depth_rows[row_of].astype(np.int32)
    ct = _core.call_tree(pa.array(parent), pa.array(codes), pa.array(depth))
    node_sid = ct["node_of"].to_numpy()
    sid_rows = indexes.array(idx, "span_id")
    node_rows = node_sid[sid_rows].astype(np.int32)
    key = ct["key"].to_numpy()
    return Calls(node_rows, ct["parent"].to_numpy(), ct["depth"].to_numpy(), np.where(key < 0, 0, key), names,
                 codes_rows.astype(np.int32))


def _blocks(idx: pa.Table) -> Blocks:
    n = idx.num_rows
    if n == 0:
        z = np.zeros(0, np.int64)
        return Blocks(z, z, z, z, True)
    prod = indexes.array(idx, "producer")
    depth = indexes.array(idx, "depth")
    cut = np.flatnonzero((prod[1:] != prod[:-1]) | (depth[1:] != depth[:-1])) + 1
    start = np.concatenate([[0], cut]).astype(np.int64)
    end = np.concatenate([cut, [n]]).astype(np.int64)
    return Blocks(start, end, prod[start].astype(np.int64), depth[start].astype(np.int64),
                  bool(indexes.array(idx, "closed").all()))
