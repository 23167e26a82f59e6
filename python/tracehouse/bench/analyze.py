"""`tracehouse bench analyze`: the analysis questions of seeds 000, 001 and 004 on a big TOD
trace, each beside the same question put to DuckDB as a plain query over the same data.

Owns the analysis benchmark. One run: generate a TOD trace (100M events by default) into
a fresh store, pair its spans and save them (the processed trace), build the derived
indexes, then time every question with tracehouse and with DuckDB (`store.sql`, the same
Parquet segments through the store's views, no index), in the same process, one after
the other. Build steps are reported too (they are paid once per trace).

Questions and their DuckDB form:

  span pairing        row groups read while a Rust pass   | window functions: running depth per thread,
                      pairs them (wall time of both)      | n-th begin at depth d with the n-th end at depth d
  children of a call  span index, one range               | WHERE parent_id = ? on the spans
  object state at t   objects index, one range            | sql/object_state.sql (arg_max per field)
  stack frame at t    span + locals indexes               | open spans (ts <= t < end_ts) of the thread
  density 1000 bins   density index, galloping searches   | sql/density.sql (GROUP BY bin, type, producer)
  next 100 matches    cursor: row-group ts statistics      | WHERE producer = ? AND ts >= t ORDER BY .. LIMIT 100
  duration histogram  Rust bpftrace buckets over span dur | CASE/log2 bucket, GROUP BY

Latencies over random inputs are reported as p50 / p99 (tracehouse: `--queries`
samples; DuckDB: `--duck-queries` samples, it is slower). The machine's load average is
recorded before and after: other processes skew every number.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from rich import box
from rich.table import Table

from ..errors import TracehouseError

TRACE = "tod-bench"
BYTES_PER_EVENT = (
    80  # trace (~10 B/event) + processed spans (~5) + indexes (~63, the density index with seq), with margin
)

TARGETS = {  # question -> (target, unit, better)
    "span pairing": (20e6, "events/s", "higher"),
    "children of one call": (10, "ms", "lower"),
    "object state at t (p50)": (10, "ms", "lower"),
    "object state at t (p99)": (100, "ms", "lower"),
    "stack frame at t (p99)": (100, "ms", "lower"),
    "density, 1000 bins": (100, "ms", "lower"),
    "next 100 cursor matches": (50, "ms", "lower"),
    "duration histogram": (1000, "ms", "lower"),
}


class NotEnoughSpace(TracehouseError):
    """The work directory's filesystem cannot hold the benchmark's trace and indexes."""

    exit_code = 2


def _lat(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


DUCK_PAIRING = """
WITH ev AS (
  SELECT producer, seq, ts, 1 AS d FROM {t}.behavior_enter
  UNION ALL SELECT producer, seq, ts, -1 AS d FROM {t}.behavior_exit),
lv AS (SELECT *, sum(d) OVER (PARTITION BY producer ORDER BY seq ROWS UNBOUNDED PRECEDING) AS lvl FROM ev),
k AS (SELECT producer, seq, ts, d, CASE WHEN d = 1 THEN lvl ELSE lvl + 1 END AS depth FROM lv),
m AS (SELECT *, row_number() OVER (PARTITION BY producer, depth, d ORDER BY seq) AS k FROM k)
SELECT count(*) AS spans, sum(e.ts - b.ts) AS total_dur
FROM m b JOIN m e ON b.producer = e.producer AND b.depth = e.depth AND b.k = e.k AND b.d = 1 AND e.d = -1
"""

DUCK_HIST = """
SELECT CASE WHEN dur < 0 THEN 0 WHEN dur = 0 THEN 1 ELSE CAST(floor(log2(dur)) AS BIGINT) + 2 END AS bucket,
       count(*) AS n
FROM {s}.span WHERE closed GROUP BY 1 ORDER BY 1
"""


def run(
    events: int = 100_000_000,
    *,
    workdir: str | None = None,
    queries: int = 1000,
    duck_queries: int = 20,
    keep: bool = False,
    progress: Callable[[str], None] | None = None,
    seed: int = 7,
) -> dict:
    """Runs the benchmark; returns a JSON-able dict (see `render`)."""
    import tracehouse

    from .. import analysis as an
    from ..analysis import event_streams as STS
    from ..analysis.sql import text as sql_text
    from ..analysis.stack import locals_index
    from ..formats.tod.generate import generate_tod
    from ..store.query import qident

    say = progress or (lambda msg: None)
    base = Path(workdir) if workdir else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(base).free
    need = events * BYTES_PER_EVENT + (256 << 20)
    if free < need:
        raise NotEnoughSpace(
            f"{base} has {free / 2**30:.1f} GiB free; {events:,} events need about "
            f"{need / 2**30:.1f} GiB (pass --events smaller or --workdir elsewhere)"
        )
    directory = Path(tempfile.mkdtemp(prefix="th-bench-analyze-", dir=base))
    rng = np.random.default_rng(seed)
    out: dict = {
        "events": events,
        "queries": queries,
        "duck_queries": duck_queries,
        "directory": str(directory),
        "machine": {"cpus": os.cpu_count(), "loadavg_before": list(os.getloadavg())},
        "build": {},
        "questions": [],
    }

    def question(name: str, ours: float, duck: float, unit: str, detail: str = "", **extra) -> None:
        better = TARGETS.get(name, (None, unit, "lower"))[2]
        ratio = (ours / duck if better == "higher" else duck / ours) if ours and duck else None
        target = TARGETS.get(name, (None,))[0]
        met = None if target is None else (ours >= target if better == "higher" else ours <= target)
        out["questions"].append(
            {
                "question": name,
                "tracehouse": ours,
                "duckdb": duck,
                "unit": unit,
                "speedup": ratio,
                "target": target,
                "met": met,
                "detail": detail,
                **extra,
            }
        )
        say(f"{name}: tracehouse {ours:,.3f} {unit}, duckdb {duck:,.3f} {unit}")

    try:
        with tracehouse.open(directory, fsync="off") as s:
            say(f"generating {events:,} TOD events")
            t0 = time.perf_counter()
            gen = generate_tod(s, TRACE, events)
            out["build"]["generate_s"] = round(time.perf_counter() - t0, 2)
            info = s.trace(TRACE)
            out["trace"] = {
                "events": info.event_count,
                "bytes": info.bytes,
                "ts_min": info.ts_min,
                "ts_max": info.ts_max,
                "generate_events_per_s": gen["events_per_s"],
            }
            tq = qident(TRACE)

            # -- span pairing -------------------------------------------------------------
            say("pairing spans")
            sp = an.pair(s, TRACE)
            halves = sp.stats["begins"] + sp.stats["ends"]
            pair_s = sp.stats["read_s"] + sp.stats["pair_s"]
            t0 = time.perf_counter()
            duck_pairs = s.sql(DUCK_PAIRING.format(t=tq)).to_pylist()[0]
            duck_s = time.perf_counter() - t0
            assert duck_pairs["spans"] == sp.stats["closed"], (duck_pairs, sp.stats)
            # pair_s: wall time from the start of the read to the end of the pass. Reading
            # and the pass overlap (row groups read on one thread, paired on another):
            # read_s is the wall time until the last row group was read, pair_s the rest
            # of the pass; the busy times say how long each side worked.
            question(
                "span pairing",
                halves / pair_s,
                halves / duck_s,
                "events/s",
                f"{halves:,} begin/end events ({info.event_count:,} in the trace: "
                f"{info.event_count / pair_s / 1e6:.0f}M trace events/s) in {pair_s:.2f} s wall: read "
                f"{sp.stats['read_s']:.2f} s + the rest of the Rust pass {sp.stats['pair_s']:.2f} s "
                f"({'overlapped; ' if sp.stats.get('overlapped') else ''}reader busy {sp.stats['read_busy_s']:.2f} s, "
                f"pass busy {sp.stats['pass_busy_s']:.2f} s); the Rust pass alone "
                f"{halves / sp.stats['pass_busy_s'] / 1e6:.0f}M/s",
                seconds=round(pair_s, 3),
                duckdb_seconds=round(duck_s, 3),
                pass_events_per_s=halves / sp.stats["pass_busy_s"],
            )
            out["build"]["span_table_s"] = sp.stats["table_s"]
            say("saving the processed trace")
            t0 = time.perf_counter()
            saved = an.save_spans(s, sp)
            out["build"]["save_processed_s"] = round(time.perf_counter() - t0, 2)
            n_spans = sp.table.num_rows
            spans_name = saved["params"]["derived"]
            sq = qident(spans_name)
            del sp, saved

            # -- derived indexes --------------------------------------------------------
            for name, build in (
                ("span index", lambda: an.span_index(s, TRACE, save=True)),
                ("objects index", lambda: an.objects_index(s, TRACE, save=True)),
                ("locals index", lambda: locals_index(s, TRACE, an.locals_config(s, TRACE), save=True)),
                ("density index", lambda: an.density_index(s, TRACE, save=True)),
            ):
                say(f"building the {name}")
                t0 = time.perf_counter()
                build()
                out["build"][name.replace(" ", "_") + "_s"] = round(time.perf_counter() - t0, 2)
            by_index: dict[str, int] = {}
            for r in s.results(trace=TRACE, tool="tracehouse.index"):
                if r["path"]:
                    by_index[r["name"]] = by_index.get(r["name"], 0) + (directory / r["path"]).stat().st_size
            out["build"]["index_bytes"] = sum(by_index.values())
            out["build"]["index_bytes_by_index"] = by_index
            out["build"]["processed_bytes"] = s.trace(spans_name).bytes

            # -- children of one call ---------------------------------------------------
            say("children of a call")
            idx = an.span_index(s, TRACE)
            depth = idx.column("depth").to_numpy()
            parents = np.unique(idx.column("parent_id").to_numpy())
            parents = parents[parents >= 0]
            pick = rng.choice(parents, size=min(queries, len(parents)), replace=False)
            it = iter(pick.tolist())
            ours = _lat(lambda: an.children(s, TRACE, next(it)), len(pick))
            it = iter(pick[:duck_queries].tolist())
            duck = _lat(
                lambda: s.sql(f"SELECT * FROM {sq}.span WHERE parent_id = ? ORDER BY ts", [next(it)]),
                min(duck_queries, len(pick)),
            )
            question(
                "children of one call",
                _pct(ours, 50),
                _pct(duck, 50),
                "ms",
                f"p50 over {len(ours)} calls (p99 {_pct(ours, 99):.2f} ms); DuckDB p50 over {len(duck)}",
                p99=_pct(ours, 99),
                duckdb_p99=_pct(duck, 99),
            )
            del depth, parents

            # -- object state at t ------------------------------------------------------
            say("object state at t")
            objs = rng.integers(1, 10_001, queries)
            ts = rng.integers(info.ts_min, info.ts_max + 1, queries)
            it = iter(zip(objs.tolist(), ts.tolist()))
            ours = _lat(lambda: an.object_state(s, TRACE, *next(it)), queries)
            q = sql_text("object_state")
            it = iter(zip(objs.tolist(), ts.tolist()))

            def duck_state():
                o, t = next(it)
                return s.sql(
                    q.format(trace=tq, type="field_write", field="field_id", value="value", object="target", obj=o, t=t)
                )

            duck = _lat(duck_state, duck_queries)
            question(
                "object state at t (p50)",
                _pct(ours, 50),
                _pct(duck, 50),
                "ms",
                f"{queries} random (object, t); DuckDB {duck_queries}",
            )
            question(
                "object state at t (p99)",
                _pct(ours, 99),
                _pct(duck, 99),
                "ms",
                f"{queries} random (object, t); DuckDB {duck_queries}",
            )

            # -- stack frame at t -------------------------------------------------------
            say("stack frame at t")
            threads = rng.integers(1, 11, queries)
            it = iter(zip(threads.tolist(), ts.tolist()))
            ours = _lat(lambda: an.stack_frames(s, TRACE, *next(it)), queries)
            it = iter(zip(threads.tolist(), ts.tolist()))

            def duck_stack():
                p, t = next(it)
                frames = s.sql(
                    f"SELECT * FROM {sq}.span WHERE producer = ? AND ts <= ? AND end_ts > ? ORDER BY depth", [p, t, t]
                ).to_pylist()
                for f in frames:  # locals: last write of each variable of the frame up to t
                    s.sql(
                        f"SELECT var_id, arg_max(value, ts) FROM {tq}.var_write WHERE producer = ? AND parent_seq = ?"
                        " AND ts <= ? GROUP BY var_id",
                        [p, f["seq"], t],
                    )
                return frames

            duck = _lat(duck_stack, duck_queries)
            question(
                "stack frame at t (p99)",
                _pct(ours, 99),
                _pct(duck, 99),
                "ms",
                f"frames with arguments and locals; p50 {_pct(ours, 50):.2f} ms; {queries} random (thread, t); "
                f"DuckDB {duck_queries}",
                p50=_pct(ours, 50),
                duckdb_p50=_pct(duck, 50),
            )

            # -- density ----------------------------------------------------------------
            say("density in 1000 bins")
            an.density(s, TRACE, 1000, by="type")  # warm the mapping once
            ours = _lat(lambda: an.density(s, TRACE, 1000, by="type"), 10)
            duck = _lat(lambda: STS.density_sql(s, TRACE, 1000, info.ts_min, info.ts_max + 1), 3)
            question(
                "density, 1000 bins",
                _pct(ours, 50),
                _pct(duck, 50),
                "ms",
                f"by type over {info.event_count:,} events; median of 10 (DuckDB 3)",
            )

            # -- cursor -----------------------------------------------------------------
            say("next 100 cursor matches")
            cts = rng.integers(info.ts_min, info.ts_max + 1, min(queries, 200))
            cps = rng.integers(1, 11, len(cts))
            it = iter(zip(cps.tolist(), cts.tolist()))
            ours = _lat(lambda: (lambda p, t: an.cursor(s, TRACE, producers=[p], at=t).next(100))(*next(it)), len(cts))
            it = iter(zip(cps.tolist(), cts.tolist()))
            duck = _lat(
                lambda: s.sql(
                    f"SELECT ts, producer, seq, dur, type FROM {tq}.events WHERE producer = ? AND ts >= ?"
                    " ORDER BY ts, producer, seq LIMIT 100",
                    list(next(it)),
                ),
                duck_queries,
            )
            question(
                "next 100 cursor matches",
                _pct(ours, 50),
                _pct(duck, 50),
                "ms",
                f"one thread's events (all 4 types) from a random t; p99 {_pct(ours, 99):.1f} ms over {len(cts)}; "
                f"DuckDB {duck_queries}",
                p99=_pct(ours, 99),
                duckdb_p99=_pct(duck, 99),
            )

            # -- duration histogram -----------------------------------------------------
            say("duration histogram")

            def ours_hist():  # bucket counts, as DuckDB's query gives (no percentiles)
                v = an.span_values(s, TRACE)[0]
                return an.histogram(v, unit="ns", summary=False)

            h = ours_hist()
            ours = _lat(ours_hist, 3)
            duck = _lat(lambda: s.sql(DUCK_HIST.format(s=sq)), 3)
            question(
                "duration histogram",
                _pct(ours, 50),
                _pct(duck, 50),
                "ms",
                f"bpftrace hist() of {int(h.counts.sum()):,} span durations (read from the processed trace + "
                f"buckets); median of 3",
            )
            out["spans"] = n_spans
    finally:
        out["machine"]["loadavg_after"] = list(os.getloadavg())
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
    return out


def render(result: dict) -> Table:
    """The result as a rich table: one row per question, tracehouse beside DuckDB."""
    m = result["machine"]
    t = Table(
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
        title=f"analyses on a {result['trace']['events']:,}-event TOD trace ({m['cpus']} CPUs, load "
        f"{m['loadavg_before'][0]:.1f} before, {m['loadavg_after'][0]:.1f} after)",
    )
    for col, just in (
        ("question", "left"),
        ("tracehouse", "right"),
        ("DuckDB", "right"),
        ("×", "right"),
        ("target", "right"),
        ("", "left"),
    ):
        t.add_column(col, justify=just, no_wrap=col != "question")

    def fmt(v: float, unit: str) -> str:
        if unit == "events/s":
            return f"{v / 1e6:,.1f}M ev/s"
        return f"{v:,.2f} ms" if v < 100 else f"{v:,.0f} ms"

    for q in result["questions"]:
        target = (
            ""
            if q["target"] is None
            else (f"≥ {q['target'] / 1e6:.0f}M/s" if q["unit"] == "events/s" else f"≤ {q['target']:g} ms")
        )
        t.add_row(
            q["question"],
            fmt(q["tracehouse"], q["unit"]),
            fmt(q["duckdb"], q["unit"]),
            "" if q["speedup"] is None else f"{q['speedup']:,.0f}" if q["speedup"] >= 10 else f"{q['speedup']:.1f}",
            target,
            "" if q["met"] is None else ("ok" if q["met"] else "MISSED"),
        )
    b = result["build"]
    t.caption = (
        f"one-time: generate {b.get('generate_s', 0):.0f} s, save processed spans {b.get('save_processed_s', 0):.0f} s, "
        f"span index {b.get('span_index_s', 0):.0f} s, objects {b.get('objects_index_s', 0):.0f} s, "
        f"locals {b.get('locals_index_s', 0):.0f} s, density {b.get('density_index_s', 0):.0f} s; "
        f"indexes {b.get('index_bytes', 0) / 2**30:.2f} GiB "
        f"({b.get('index_bytes', 0) / max(1, result['trace']['bytes']):.2f} x the trace), "
        f"trace {result['trace']['bytes'] / 2**30:.2f} GiB"
    )
    return t
