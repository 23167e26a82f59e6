"""`tracehouse bench ui`: every web UI endpoint timed over HTTP against a real server, beside a
plain-SQL peer answering the same question through `/api/query` on the same server.

Owns the endpoint list and the report. The server is `tracehouse serve` in a child process over
the store (`--store`, trace `--trace`), or over a temporary store holding a TOD trace generated
for the run (`--events`). First the trace is prepared (the UI's background job: density index,
spans, span index, call paths; timed as `prepare`), then:

- the whole trace: each request repeated `--repeat` times, its first, median and maximum wall
  time and the answer's size (the first request of a question not computed ahead is the
  uncached one; later ones are answered from the answers kept per trace signature);
- selected ranges: each range endpoint (what the Overview, Calls and Timeline pages ask) over
  windows of 10 %, 50 % and 90 % of the trace and of random size, `--repeat` windows each at
  random places (seeded): every request a new question, none answered from a cache; p50 and
  p99 of those;
- 8 concurrent requests: the Overview's eight requests of one new range sent at once,
  `--repeat` rounds; p50 and p99 per request and of the round (the page is drawn when the
  last answers).

The target is 1 s per request on a 100M-event trace (the verdict reads the p99 column of the
tables: every request of every table within it), and answers of at most ~100K numbers.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import statistics as st
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlencode

TARGET_S = 1.0


def _get(base: str, path: str, params: dict | None = None, body: bytes | None = None) -> tuple[int, bytes, float]:
    url = base + path + ("?" + urlencode(params) if params else "")
    req = urllib.request.Request(
        url,
        data=body,
        method="POST" if body is not None else "GET",
        headers={"content-type": "application/json"} if body is not None else {},
    )
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            data, status = r.read(), r.status
    except urllib.error.HTTPError as e:
        data, status = e.read(), e.code
    return status, data, time.perf_counter() - t0


def _numbers(doc) -> int:
    """Numbers and strings in an answer: what the browser has to hold."""
    if isinstance(doc, dict):
        return sum(_numbers(v) for v in doc.values())
    if isinstance(doc, list):
        return sum(_numbers(v) for v in doc)
    return 1


def _sql(q: str) -> bytes:
    return json.dumps({"sql": q}).encode()


def _p(times: list[float], q: float) -> float:
    """The q-quantile of `times` (nearest rank: with fewer than 100 samples p99 is the largest)."""
    xs = sorted(times)
    return xs[min(len(xs) - 1, max(0, int(-(-q * len(xs) // 1)) - 1))]


RANGES = (("10 %", 0.10), ("50 %", 0.50), ("90 %", 0.90), ("random", None))


# The Overview's requests of a range (what a selection on its density chart asks at once).
OVERVIEW_OF_RANGE = (
    ("density, 1,000 bins", "/api/ui/density", {"bins": 1000}),
    ("stats by type", "/api/ui/stats", {"by": "type"}),
    ("stats by producer", "/api/ui/stats", {"by": "producer"}),
    ("stats by state", "/api/ui/stats", {"by": "state"}),
    ("stats by link", "/api/ui/stats", {"by": "link"}),
    ("histogram log2", "/api/ui/hist", {"kind": "hist", "unit": "us"}),
    ("top 25 spans", "/api/ui/top", {"n": 25}),
)
OVERVIEW = (("trace info", "/api/ui/trace", {}),) + OVERVIEW_OF_RANGE


def range_endpoints(rows: str) -> list[tuple[str, str, dict]]:
    """(name, path, parameters) of the requests a selected range makes: the Overview's
    (density, four statistics, histogram, longest spans), the Calls page's flame graph and
    the Timeline's rows."""
    return list(OVERVIEW_OF_RANGE) + [
        ("flame graph", "/api/ui/flame", {}),
        ("timeline, 40 rows", "/api/ui/timeline", {"rows": rows, "width": 1200}),
    ]


def _window(rng: random.Random, lo: int, hi: int, share: float | None) -> tuple[int, int]:
    """A window of `share` of [lo, hi] at a random place (share None: of a random size too)."""
    span = hi + 1 - lo
    share = share if share is not None else rng.uniform(0.001, 1.0)
    width = max(1, int(span * share))
    start = lo + rng.randrange(0, max(1, span - width + 1))
    return start, start + width


def ranges(base: str, trace: str, info: dict, rows: str, repeat: int, progress, seed: int = 33) -> list[dict]:
    """Each range endpoint over `repeat` new windows of each size of RANGES: p50, p99 (s)."""
    rng = random.Random(seed)
    lo, hi = info["ts_min"], info["ts_max"]
    out = []
    for name, path, params in range_endpoints(rows):
        for label, share in RANGES:
            times, status, size = [], 200, 0
            for _ in range(repeat):
                a, b = _window(rng, lo, hi, share)
                st_, data, secs = _get(base, path, dict(params, trace=trace, start=a, end=b))
                times.append(secs)
                size = max(size, len(data))
                status = st_ if st_ != 200 else status
            row = {
                "endpoint": name,
                "range": label,
                "status": status,
                "p50_ms": round(_p(times, 0.5) * 1000, 1),
                "p99_ms": round(_p(times, 0.99) * 1000, 1),
                "bytes": size,
            }
            out.append(row)
            progress(f"{name}, {label} range: p50 {row['p50_ms']} ms, p99 {row['p99_ms']} ms")
    return out


def concurrent(base: str, trace: str, info: dict, repeat: int, progress, seed: int = 34) -> dict:
    """The Overview's eight requests of one new range at once, `repeat` rounds (ranges of
    10-90 % at random places): per request and per round, p50 and p99 (s)."""
    rng = random.Random(seed)
    lo, hi = info["ts_min"], info["ts_max"]
    per: dict[str, list[float]] = {n: [] for n, _p_, _q in OVERVIEW}
    bad: dict[str, int] = {}
    rounds = []
    with ThreadPoolExecutor(len(OVERVIEW)) as pool:
        for _ in range(repeat):
            a, b = _window(rng, lo, hi, rng.uniform(0.1, 0.9))
            t0 = time.perf_counter()
            futs = {n: pool.submit(_get, base, path, dict(q, trace=trace, start=a, end=b)) for n, path, q in OVERVIEW}
            for n, f in futs.items():
                st_, _data, secs = f.result()
                per[n].append(secs)
                if st_ != 200:
                    bad[n] = st_
            rounds.append(time.perf_counter() - t0)
            progress(f"8 concurrent requests: the slowest answered in {rounds[-1] * 1000:.0f} ms")
    rows = [
        {
            "endpoint": n,
            "status": bad.get(n, 200),
            "p50_ms": round(_p(ts, 0.5) * 1000, 1),
            "p99_ms": round(_p(ts, 0.99) * 1000, 1),
        }
        for n, ts in per.items()
    ]
    return {
        "requests": rows,
        "round_p50_ms": round(_p(rounds, 0.5) * 1000, 1),
        "round_p99_ms": round(_p(rounds, 0.99) * 1000, 1),
    }


def cases(trace: str, info: dict, tinfo: dict) -> list[dict]:
    """(name, UI request, plain-SQL peer) for the whole trace, a 1 % window and one thread."""
    lo, hi = info["ts_min"], info["ts_max"]
    mid = (lo + hi) // 2
    w0, w1 = mid, mid + max(1, (hi - lo) // 100)
    prods = [p["id"] for p in tinfo["producers"]]
    thread = prods[-1] if prods else 0
    rows = ";".join(str(p) for p in prods[:40])
    t = '"' + trace.replace('"', '""') + '"'
    spans = tinfo["derived_traces"][0] if tinfo.get("derived_traces") else None
    sp = '"' + spans.replace('"', '""') + '"' if spans else None
    name_col = (tinfo.get("spans") or {}).get("name") or (tinfo.get("spans") or {}).get("key")
    out = [
        ("trace info", "/api/ui/trace", {}, None),
        (
            "density, whole trace, 1,000 bins",
            "/api/ui/density",
            {"bins": 1000},
            f"SELECT (ts - {lo}) * 1000 // ({hi + 1 - lo}) AS bin, type, count(*) FROM {t}.events GROUP BY ALL",
        ),
        (
            "density, 1% window",
            "/api/ui/density",
            {"bins": 1000, "start": w0, "end": w1},
            f"SELECT (ts - {w0}) * 1000 // ({w1 - w0}) AS bin, type, count(*) FROM {t}.events "
            f"WHERE ts >= {w0} AND ts < {w1} GROUP BY ALL",
        ),
        (
            "stats by type",
            "/api/ui/stats",
            {"by": "type"},
            f"SELECT type, count(*), sum(dur) FROM {t}.events GROUP BY type",
        ),
        (
            "stats by producer",
            "/api/ui/stats",
            {"by": "producer"},
            f"SELECT producer, count(*), sum(dur) FROM {t}.events GROUP BY producer",
        ),
        (
            "stats by type, 1% window",
            "/api/ui/stats",
            {"by": "type", "start": w0, "end": w1},
            f"SELECT type, count(*), sum(dur) FROM {t}.events WHERE ts >= {w0} AND ts < {w1} GROUP BY type",
        ),
        (
            "stats by state duration",
            "/api/ui/stats",
            {"by": "state"},
            f"SELECT {name_col}, count(*), sum(dur) FROM {sp}.span WHERE closed GROUP BY 1"
            if sp and name_col
            else None,
        ),
        ("stats by link duration", "/api/ui/stats", {"by": "link"}, None),
        (
            "histogram log2",
            "/api/ui/hist",
            {"kind": "hist", "unit": "us"},
            f"SELECT floor(log2(greatest(dur, 1) / 1000.0)) AS b, count(*) FROM {sp}.span WHERE closed GROUP BY b"
            if sp
            else None,
        ),
        ("histogram linear", "/api/ui/hist", {"kind": "lhist", "unit": "us"}, None),
        (
            "top 25 spans",
            "/api/ui/top",
            {"n": 25},
            f"SELECT * FROM {sp}.span WHERE closed ORDER BY dur DESC LIMIT 25" if sp else None,
        ),
        ("timeline, 40 rows, whole trace", "/api/ui/timeline", {"rows": rows, "width": 1200}, None),
        (
            "timeline, 40 rows, 1% window",
            "/api/ui/timeline",
            {"rows": rows, "width": 1200, "start": w0, "end": w1},
            f"SELECT producer, depth, ts, dur FROM {sp}.span WHERE ts < {w1} AND end_ts > {w0} AND depth <= 12"
            if sp
            else None,
        ),
        (
            "timeline, 1 thread, 0.01% window",
            "/api/ui/timeline",
            {"rows": str(thread), "width": 1200, "start": w0, "end": w0 + max(1, (hi - lo) // 10_000)},
            None,
        ),
        ("flame graph, whole trace", "/api/ui/flame", {}, None),
        ("flame graph, one thread, 1% window", "/api/ui/flame", {"producers": thread, "start": w0, "end": w1}, None),
        ("frame spans", "/api/ui/frame", {"node": "@top"}, None),
        ("SQL console page", "/api/ui/sql", _sql(f"SELECT * FROM {t}.events"), None),
        ("traces list", "/api/ui/traces", {}, None),
    ]
    return [{"name": n, "path": p, "params": pr, "peer": peer} for n, p, pr, peer in out]


def run(*, store: str | None, trace: str | None, events: int, repeat: int, progress: Callable[[str], None]) -> dict:
    tmp = None
    if trace is None:
        tmp = tempfile.mkdtemp(prefix="th-bench-ui-")
        store = os.path.join(tmp, "store")
        trace = "bench"
        progress(f"generating {events:,} TOD events")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "tracehouse.cli",
                "--store",
                store,
                "generate",
                "tod",
                "--events",
                str(events),
                "--name",
                trace,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    ready = Path(tempfile.mkdtemp(prefix="th-bench-ui-ready-")) / "ready.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tracehouse.cli",
            "--store",
            str(store),
            "serve",
            "--port",
            "0",
            "--tcp-port",
            "-1",
            "--quiet",
            "--ready-file",
            str(ready),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        t_end = time.monotonic() + 120
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > t_end:
                raise RuntimeError("server did not start: " + (proc.stderr.read().decode() if proc.stderr else ""))
            time.sleep(0.1)
        base = json.loads(ready.read_text())["http"]
        load0 = os.getloadavg()
        # prepare (cold): the first request needing derived data starts the job (or builds inline
        # when the trace is small); ready once the views needing each part answer 200
        t0 = time.perf_counter()
        probes = [
            ("/api/ui/density", {"bins": 10}),
            ("/api/ui/flame", {"min_share": 0.5}),
            ("/api/ui/stats", {"by": "state"}),
        ]
        while True:
            answers = [_get(base, path, dict(q, trace=trace)) for path, q in probes]
            waiting = [json.loads(b)["job"] for st_, b, _ in answers if st_ == 202]
            failed = [b for st_, b, _ in answers if st_ not in (200, 202)]
            if failed:
                raise RuntimeError(f"preparing failed: {failed[0][:500]!r}")
            if not waiting:
                break
            progress(f"preparing: {waiting[0]['step'] or 'queued'} ({waiting[0]['seconds']} s)")
            time.sleep(2)
        prepare_s = time.perf_counter() - t0
        _s, tinfo_b, _ = _get(base, "/api/ui/trace", {"trace": trace})
        tinfo = json.loads(tinfo_b)
        out = []
        for c in cases(trace, tinfo["trace"], tinfo):
            params = c["params"]
            body_b = params if isinstance(params, bytes) else None
            q = {} if body_b is not None else dict(params, trace=trace)
            if q.get("node") == "@top":
                _s, fl, _ = _get(base, "/api/ui/flame", {"trace": trace})
                nodes = json.loads(fl).get("nodes") or [{"id": 0}]
                q["node"] = max(nodes, key=lambda n: n.get("total", 0))["id"]
            times, size, items, status = [], 0, 0, None
            for _ in range(repeat):
                status, data, secs = _get(base, c["path"], q or None, body_b)
                times.append(secs)
                size = len(data)
            if status == 200:
                items = _numbers(json.loads(data))
            row = {
                "endpoint": c["name"],
                "path": c["path"],
                "status": status,
                "first_ms": round(times[0] * 1000, 1),
                "p50_ms": round(st.median(times) * 1000, 1),
                "max_ms": round(max(times) * 1000, 1),
                "bytes": size,
                "items": items,
            }
            if c["peer"]:
                pt = []
                for _ in range(max(1, repeat // 2)):
                    ps, pdata, psecs = _get(base, "/api/query", None, _sql(c["peer"]))
                    pt.append(psecs)
                row["peer_sql_ms"] = round(st.median(pt) * 1000, 1) if ps == 200 else None
                row["peer_status"] = ps
                row["peer_x"] = round(st.median(pt) / max(st.median(times), 1e-9), 1) if ps == 200 else None
            out.append(row)
            progress(f"{c['name']}: {row['p50_ms']} ms (max {row['max_ms']})")
        prods = [p["id"] for p in tinfo["producers"]]
        by_range = ranges(base, trace, tinfo["trace"], ";".join(str(p) for p in prods[:40]), repeat, progress)
        conc = concurrent(base, trace, tinfo["trace"], repeat, progress)
        ok = [r["max_ms"] for r in out if r["status"] == 200]
        ok += [r["p99_ms"] for r in by_range + conc["requests"] if r["status"] == 200]
        return {
            "trace": trace,
            "events": tinfo["trace"]["event_count"],
            "prepare_s": round(prepare_s, 2),
            "repeat": repeat,
            "load_before": [round(x, 2) for x in load0],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "target_s": TARGET_S,
            "endpoints": out,
            "ranges": by_range,
            "concurrent": conc,
            "slowest_ms": max(ok, default=0.0),
            "within_target": all(x <= TARGET_S * 1000 for x in ok),
            "max_items": max((r["items"] for r in out), default=0),
        }
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(ready.parent, ignore_errors=True)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def render(rep: dict) -> str:
    lines = [
        f"web UI on {rep['trace']} ({rep['events']:,} events); prepare (first open, background job): "
        f"{rep['prepare_s']} s; load average {rep['load_before'][0]} before, {rep['load_after'][0]} after; "
        f"{rep['repeat']} requests each",
        "",
        f"{'endpoint':<38} {'first ms':>8} {'p50 ms':>8} {'max ms':>8} {'bytes':>10} {'numbers':>8} "
        f"{'SQL peer ms':>12} {'x':>6}",
    ]
    for r in rep["endpoints"]:
        peer = "" if r.get("peer_sql_ms") is None else f"{r['peer_sql_ms']:,.1f}"
        x = "" if r.get("peer_x") is None else f"{r['peer_x']:,.1f}"
        flag = "" if r["status"] == 200 else f"  HTTP {r['status']}"
        lines.append(
            f"{r['endpoint']:<38} {r['first_ms']:>8,.1f} {r['p50_ms']:>8,.1f} {r['max_ms']:>8,.1f} "
            f"{r['bytes']:>10,} {r['items']:>8,} "
            f"{peer:>12} {x:>6}{flag}"
        )
    over = rep["target_s"] * 1000
    lines += ["", f"selected ranges ({rep['repeat']} new windows each, at random places: none cached)", ""]
    sizes = [label for label, _ in RANGES]
    lines.append(f"{'endpoint':<24} " + " ".join(f"{s + ' p50':>11} {s + ' p99':>11}" for s in sizes))
    by = {(r["endpoint"], r["range"]): r for r in rep.get("ranges", [])}
    for name in dict.fromkeys(r["endpoint"] for r in rep.get("ranges", [])):
        cells = []
        for s_ in sizes:
            r = by.get((name, s_))
            if r is None or r["status"] != 200:
                cells.append(f"{'HTTP ' + str(r['status']) if r else '':>23}")
                continue
            mark = "!" if r["p99_ms"] > over else " "
            cells.append(f"{r['p50_ms']:>11,.1f} {r['p99_ms']:>10,.1f}{mark}")
        lines.append(f"{name:<24} " + " ".join(cells))
    conc = rep.get("concurrent")
    if conc:
        lines += ["", f"the Overview's 8 requests of one new range at once ({rep['repeat']} rounds)", ""]
        lines.append(f"{'request':<24} {'p50 ms':>9} {'p99 ms':>9}")
        for r in conc["requests"]:
            flag = "" if r["status"] == 200 else f"  HTTP {r['status']}"
            mark = "!" if r["p99_ms"] > over else " "
            lines.append(f"{r['endpoint']:<24} {r['p50_ms']:>9,.1f} {r['p99_ms']:>8,.1f}{mark}{flag}")
        lines.append(f"{'all 8 answered':<24} {conc['round_p50_ms']:>9,.1f} {conc['round_p99_ms']:>8,.1f}")
    lines.append("")
    lines.append(
        f"every request within {rep['target_s']:g} s (whole trace: max; ranges and concurrent: p99; "
        f"'!' marks one over): {'yes' if rep['within_target'] else 'NO'} (slowest {rep.get('slowest_ms', 0):,.1f} ms); "
        f"largest answer {rep['max_items']:,} numbers"
    )
    return "\n".join(lines)
