"""The derived data behind the UI's pages: whether it is there, and the background jobs that build it.

Owns deciding, per trace, whether the derived data an analysis reads (`Analysis.uses`)
exists, and building what is missing; the data and the analyses over it are
`tracehouse.analysis`'s:

  density   the density index (analysis/event_streams.py): every event's ts (and dur) by
            (type, producer, ts); counts per time bin or range are binary searches
  spans     the span table paired and saved as the processed trace `<trace>:spans`, and
            the span index (analysis/spans.py): spans by (producer, depth, ts), mmapped
  calls     every span's call path and name code, aligned with the span index rows
            (analysis/calltree.py, saved beside the span index): a flame graph or a
            by-name statistic of any time range or producer set is then one native pass
            over the range's rows

A request never waits for a build on a big trace: traces up to `INLINE_EVENTS` events are
prepared inside the request (a 2M-event trace in about a second); a bigger one gets one
background job (`Jobs`, one worker thread: builds are CPU- and memory-heavy and this
machine has two cores) that builds every part in turn, and the request answers at once
with `Pending` (HTTP 202 and the job's progress; the page polls and redraws). Built
indexes and call paths are saved in the store (`analysis/indexes.py`: Arrow IPC files with
the trace's signature and a CRC-32, checked by `tracehouse verify`; a stale or damaged one
is rebuilt), so a restarted server maps them and answers at once, nothing Pending.

What is kept in this process (by the analyses, per trace state): the parsed stream table
of the density index, the span index columns the range passes read (decoded once) and the
call paths (int32 per span: 68 MB for 17M spans); the mmapped files themselves cost no heap.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...analysis import calltree, event_streams, indexes, spans
from ...analysis.profiles import SpanConfig, infer_span_config
from ...analysis.registry import Window
from ...errors import BadInput, ReadOnly, StoreLocked, TracehouseError

if TYPE_CHECKING:
    from ...store import Store

log = logging.getLogger("tracehouse.server.ui")

INLINE_EVENTS = 2_000_000  # traces up to this many events are prepared inside the request
ANSWERS_KEPT = 256  # answers kept (Preparer.cached)
ANSWER = "ui-answer"  # name of a whole-trace answer saved beside the indexes (tool tracehouse.index)


class Pending(Exception):
    """The data a request needs is being built by a background job (HTTP 202)."""

    def __init__(self, job: Job, what: str) -> None:
        super().__init__(f"building {what} of {job.trace!r}")
        self.job = job
        self.what = what


@dataclass
class Job:
    """A background build or import, as the page sees it (`to_json`)."""

    id: int
    kind: str  # "prepare" | "import"
    trace: str
    run: Callable[[Job], dict | None]
    state: str = "queued"  # queued | running | done | failed
    step: str = ""
    done_steps: int = 0
    steps: int = 1
    error: str | None = None
    result: dict | None = None
    created: float = field(default_factory=time.time)
    finished: float | None = None

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "kind": self.kind,
            "trace": self.trace,
            "state": self.state,
            "step": self.step,
            "done_steps": self.done_steps,
            "steps": self.steps,
            "error": self.error,
            "result": self.result,
            "seconds": round((self.finished or time.time()) - self.created, 2),
        }


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
            for old in sorted(self._jobs)[: -self.KEEP]:
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
                # (a job the server's shutdown cut short fails on the closed store: not a bug to log)
                if not isinstance(e, TracehouseError) and not self._closed:
                    log.error("web UI job %s (%s %s) failed:\n%s", job.id, job.kind, job.trace, traceback.format_exc())
            job.finished = time.time()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


# -- the derived data of one trace -----------------------------------------------------------------


@dataclass
class SpanData:
    config: SpanConfig
    index: object  # the span index (analysis.indexes.PackedIndex): spans by (producer, depth, ts), mmapped


class Preparer:
    """Finds or builds each trace's derived data (see the module doc)."""

    def __init__(self, store: Store, jobs: Jobs, inline_events: int = INLINE_EVENTS) -> None:
        self.store = store
        self.jobs = jobs
        self.inline_events = inline_events
        self._lock = threading.RLock()
        self._builds: dict[str, threading.RLock] = {}
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
        cfg, _why = infer_span_config(self.store, trace)
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

    def load_saved(self) -> None:
        """At the server's start: one background job per big trace that maps what was prepared
        for it and decodes the span index columns a range reads (`_load`), so the first range
        asked after a restart does not pay that (17M spans: ~2 s of CPU) itself."""
        for info in self.store.traces():
            if info.event_count > self.inline_events:
                self.jobs.submit("load", info.name, lambda job, t=info.name: self._load(t, job))

    def _load(self, trace: str, job: Job) -> dict | None:
        job.step = "reading what was prepared"
        have = self.ready(trace)
        if not have["density"] or have["spans"] is False or have["calls"] is False:
            return None  # not prepared: its first request starts the prepare job
        t0 = time.perf_counter()
        self.streams(trace, build=True)
        sd, cp = self.spans(trace, build=True), self.calls(trace, build=True)
        if sd is not None:
            for c in ("ts", "end_ts", "dur", "self_time", "closed", "span_id", "parent_id"):
                indexes.array(sd.index, c)
            if cp is not None:
                calltree.whole_totals(sd.index, cp)
        return {"load_s": round(time.perf_counter() - t0, 2)}

    def ready(self, trace: str) -> dict:
        """Which parts exist now (nothing is built)."""
        cfg, _ = infer_span_config(self.store, trace)
        return {
            "density": event_streams.density_index(self.store, trace, build=False) is not None,
            "spans": spans.span_index(self.store, trace, cfg, build=False) is not None if cfg is not None else None,
            "calls": calltree.call_paths(self.store, trace, cfg, build=False) is not None if cfg is not None else None,
        }

    def ensure(self, trace: str, uses: tuple[str, ...]) -> None:
        """The derived data an analysis reads (`Analysis.uses`) is there, or being built (Pending)."""
        if "density" in uses:
            self.streams(trace)
        if ("spans" in uses or "calls" in uses) and infer_span_config(self.store, trace)[0] is not None:
            self.spans(trace)
            if "calls" in uses:
                self.calls(trace)

    # -- the parts -----------------------------------------------------------------------

    def streams(self, trace: str, *, build: bool = False) -> event_streams.Streams:
        """The density index's streams (`event_streams.streams`)."""
        if build:
            return event_streams.streams(self.store, trace)
        return self._need(
            trace,
            "the density index",
            lambda: event_streams.streams(self.store, trace, build=False),
            lambda: event_streams.streams(self.store, trace),
        )

    def spans(self, trace: str, *, build: bool = False) -> SpanData | None:
        """The span index of `trace`, None when the trace has no spans."""
        cfg, _why = infer_span_config(self.store, trace)
        if cfg is None:
            return None

        def wrap(idx) -> SpanData | None:
            return None if idx is None else SpanData(cfg, idx)

        if build:
            return wrap(spans.span_index(self.store, trace, cfg))
        return self._need(
            trace,
            "the span index",
            lambda: wrap(spans.span_index(self.store, trace, cfg, build=False)),
            lambda: wrap(spans.span_index(self.store, trace, cfg)),
        )

    def calls(self, trace: str, *, build: bool = False) -> calltree.CallPaths | None:
        """Call paths and name codes per span index row, None without spans."""
        cfg, _why = infer_span_config(self.store, trace)
        if cfg is None:
            return None
        if build:
            return calltree.call_paths(self.store, trace, cfg)
        return self._need(
            trace,
            "the call paths",
            lambda: calltree.call_paths(self.store, trace, cfg, build=False),
            lambda: calltree.call_paths(self.store, trace, cfg),
        )

    def cached(self, trace: str, what: tuple, make: Callable[[], dict]) -> dict:
        """An answer kept per (trace signature, question): a page shown again, the same selection in
        another view, and the whole-trace answers the prepare job computes ahead. A whole-trace
        answer of a big trace is also saved in the store beside its indexes, so a restarted
        server answers the overview's first requests from disk (`_saved_answer`)."""
        key = (self._key(trace), what)
        with self._lock:
            if key in self._answers:
                self._answers.move_to_end(key)
                return self._answers[key]
        whole = len(what) > 1 and isinstance(what[1], Window) and what[1] == Window()
        big = whole and self.store.trace(trace).event_count > self.inline_events
        doc = self._saved_answer(trace, what, key[0][1]) if big else None
        if doc is None:
            doc = make()
            if big:
                self._save_answer(trace, what, key[0][1], doc)
        with self._lock:
            self._answers[key] = doc
            while len(self._answers) > ANSWERS_KEPT:
                self._answers.popitem(last=False)
        return doc

    def _saved_answer(self, trace: str, what: tuple, stamp: str) -> dict | None:
        for r in self.store.results(trace=trace, tool=indexes.TOOL, name=ANSWER):
            if r["params"].get("what") == repr(what) and r["params"].get("signature") == stamp:
                return r["payload"]
        return None

    def _save_answer(self, trace: str, what: tuple, stamp: str, doc: dict) -> None:
        """Saved as a result of the trace (payload in the catalog; the trace's other saved answers
        to the same question, of an older signature, deleted)."""
        if self.store.readonly:
            return
        try:
            old = [r for r in self.store.results(trace=trace, tool=indexes.TOOL, name=ANSWER)]
            self.store.save_result(
                "table", ANSWER, indexes.TOOL, [trace], params={"what": repr(what), "signature": stamp}, payload=doc
            )
            for r in old:
                if r["params"].get("what") == repr(what):
                    self.store.delete_result(r["id"])
        except (ReadOnly, StoreLocked) as e:
            log.info("answer of %s not saved: %s", trace, e)
