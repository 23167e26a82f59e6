"""The web UI over selected ranges: every answer of a range equals plain SQL over the span
table for the same range (cuts at arbitrary instants, spans cut by an edge included), and the
prepared data (call paths beside the span and density indexes) is kept in the store: a
restarted server answers its first request from disk, a damaged file is rebuilt, `verify`
checks it.

How a span cut by the range's edge counts (the flame graph, `analysis.windows`): a span
overlapping [start, end) (ts < end and end_ts > start) is one call of its path, with only
its part inside the range as its time (min(end_ts, end) - max(ts, start)); a path's self time
is its time minus its child paths' times. Statistics by state, histograms and the longest
spans take the closed spans starting in [start, end), whole.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import numpy as np
import pytest

from tracehouse.analysis import calltree, indexes
from tracehouse.formats.tod.generate import generate_tod
from tracehouse.server.ui import views
from tracehouse.server.ui.app import UiState, build_app
from tracehouse.server.ui.bridge import call_app


def run_sql(store):
    return lambda q: store.sql(q)


def ui(store, **kw):
    state = UiState(store, token=None, run_query=run_sql(store), **kw)
    return state, build_app(state)


def get(app, path, params=None):
    status, _hdrs, out = asyncio.run(call_app(app, "GET", path, urlencode(params or {}), [], b""))
    return status, json.loads(out)


@pytest.fixture(scope="module")
def tod(tmp_path_factory):
    import tracehouse

    s = tracehouse.open(tmp_path_factory.mktemp("ranges") / "store")
    generate_tod(s, "t", 40_000, seed=33)
    s.flush()
    state, app = ui(s)
    st, _ = get(app, "/api/ui/flame", {"trace": "t"})  # prepares the span table, indexes, call paths
    assert st == 200
    yield s, app, state
    state.close()
    s.close()


def _windows(info, rng, n=12):
    """Windows at random cuts (mostly inside spans), small to whole, one or several producers."""
    out = []
    for i in range(n):
        a, b = sorted(rng.integers(info.ts_min - 10, info.ts_max + 10, 2).tolist())
        producers = None if i % 3 else sorted(rng.choice(np.arange(1, 9), 2, replace=False).tolist())
        out.append((a, b + 1, producers))
    out.append((info.ts_min + 1, info.ts_max, None))  # nearly whole, given by hand
    return out


def _span_sql(store) -> str:
    """The span table's name column (the pairing's: TOD names spans by behavior_id)."""
    from tracehouse.analysis.profiles import infer_span_config
    from tracehouse.analysis.spans import begin_column

    cfg, _ = infer_span_config(store, "t")
    assert cfg.name_column
    return begin_column(cfg.name_column)


def _paths_sql(store, a, b, producers) -> dict[str, tuple[int, int]]:
    """Per call path 'root;...;leaf': (calls, clipped ns) of the spans overlapping [a, b), by SQL."""
    name = _span_sql(store)
    where = f"ts < {b} AND end_ts > {a}" + (f" AND producer IN ({','.join(map(str, producers))})" if producers else "")
    q = f"""
    WITH RECURSIVE p(span_id, path) AS (
        SELECT span_id, CAST({name} AS VARCHAR) FROM "t:spans".span WHERE parent_id < 0 OR parent_id IS NULL
        UNION ALL
        SELECT s.span_id, p.path || ';' || CAST(s.{name} AS VARCHAR)
        FROM "t:spans".span s JOIN p ON s.parent_id = p.span_id
    )
    SELECT path, count(*) AS calls, sum(least(end_ts, {b}) - greatest(ts, {a})) AS total
    FROM "t:spans".span JOIN p USING (span_id) WHERE {where} GROUP BY path
    """
    return {r["path"]: (r["calls"], r["total"]) for r in store.sql(q).to_pylist()}


def _flame_paths(doc) -> dict[str, tuple[int, int, int]]:
    by_id = {n["id"]: n for n in doc["nodes"]}

    def path(n):
        return n["name"] if n["parent"] < 0 else path(by_id[n["parent"]]) + ";" + n["name"]

    return {path(n): (n["calls"], n["total"], n["self"]) for n in doc["nodes"]}


def test_issue33_flame_of_any_range_equals_sql_with_spans_cut_at_the_edges(tod):
    store, app, state = tod
    info = store.trace("t")
    for a, b, producers in _windows(info, np.random.default_rng(5)):
        # every path (the page's requests cut paths under 0.1 % and send at most 5,000)
        d = views.flame(
            state.prep, "t", views.Window(a, b, None if producers is None else tuple(producers)), 0.0, 10**9
        )
        want = _paths_sql(store, a, b, producers)
        got = _flame_paths(d)
        assert {p: v[:2] for p, v in got.items()} == want, (a, b, producers)
        # self = the path's time minus its child paths' times
        for p, (_c, total, self_ns) in got.items():
            kids = sum(v[1] for q_, v in want.items() if q_.rsplit(";", 1)[0] == p and ";" in q_)
            assert self_ns == max(total - kids, 0)
        assert d["spans"] == sum(c for c, _t in want.values()) and d["paths"] == len(want)
        # as the page asks: paths under 0.1 % of the roots' total cut (summed over candidates only)
        cut = views.flame(state.prep, "t", views.Window(a, b, None if producers is None else tuple(producers)))
        kept = _flame_paths(cut)
        assert kept and all(v == got[p] for p, v in kept.items()), (a, b, producers)
        assert all(t < cut["threshold_ns"] for p, (_c, t) in want.items() if p not in kept)
        assert (cut["spans"], cut["paths"], cut["total"]) == (d["spans"], d["paths"], d["total"])
        by_cut = {n["id"]: n for n in cut["nodes"]}
        for n in cut["nodes"]:
            kids = sum(k["total"] for k in cut["nodes"] if k["parent"] == n["id"])
            assert n["cut"] == max(n["total"] - n["self"] - kids, 0) and (n["parent"] < 0 or n["parent"] in by_cut)
        # the spans behind the biggest frame: as many as SQL counts, longest inside the range first
        big = max(d["nodes"], key=lambda n: (n["total"], n["id"]))
        w = views.Window(a, b, None if producers is None else tuple(producers))
        f = views.frame_spans(state.prep, "t", w, big["id"], n=5)
        by_id = {n["id"]: n for n in d["nodes"]}
        path, p_ = [], big
        while p_ is not None:
            path.append(p_["name"])
            p_ = by_id.get(p_["parent"])
        assert f["count"] == want[";".join(path[::-1])][0] and f["path"] == path[::-1]
        inside = [min(r["end_ts"], b) - max(r["ts"], a) for r in f["rows"]]
        assert inside == sorted(inside, reverse=True) and all(x > 0 or r["dur"] == 0 for x, r in zip(inside, f["rows"]))


def test_issue33_state_hist_and_top_of_any_range_equal_sql(tod):
    store, app, _state = tod
    info = store.trace("t")
    name = _span_sql(store)
    for a, b, producers in _windows(info, np.random.default_rng(6)):
        where = f"closed AND ts >= {a} AND ts < {b}" + (
            f" AND producer IN ({','.join(map(str, producers))})" if producers else ""
        )
        q = {"trace": "t", "start": a, "end": b} | ({"producers": ",".join(map(str, producers))} if producers else {})
        st, d = get(app, "/api/ui/stats", q | {"by": "state"})
        assert st == 200
        want = {
            r["s"]: (r["n"], r["total"], r["self"], r["longest"])
            for r in store.sql(
                f"SELECT CAST({name} AS VARCHAR) AS s, count(*) AS n, sum(dur) AS total, sum(self_time) AS self, "
                f'max(dur) AS longest FROM "t:spans".span WHERE {where} GROUP BY 1'
            ).to_pylist()
        }
        got = {r["label"]: (r["spans"], r["total_dur"], r["self_dur"], r["max_dur"]) for r in d["table"]}
        # the table lists the 200 largest by self time; the sums and the group count cover all
        assert got == {k: want[k] for k in got} and d["groups"] == len(want), (a, b, producers)
        assert d["spans"] == sum(v[0] for v in want.values()) and d["total"] == sum(v[2] for v in want.values())
        assert len(got) == min(200, len(want))
        st, h = get(app, "/api/ui/hist", q | {"kind": "hist", "unit": "ns"})
        assert st == 200
        (n,) = store.sql(f'SELECT count(*) AS n FROM "t:spans".span WHERE {where}').column("n").to_pylist()
        assert h["spans"] == n
        want_b = {
            r["b"]: r["n"]
            for r in store.sql(
                f"SELECT CASE WHEN dur = 0 THEN 1 ELSE CAST(floor(log2(dur)) AS BIGINT) + 2 END AS b, count(*) AS n "
                f'FROM "t:spans".span WHERE {where} GROUP BY 1'
            ).to_pylist()
        }
        assert {x["bucket"]: x["count"] for x in h["buckets"] if x["count"]} == want_b
        st, t = get(app, "/api/ui/top", q | {"n": 10})
        assert st == 200 and t["spans"] == n
        top = store.sql(f'SELECT span_id FROM "t:spans".span WHERE {where} ORDER BY dur DESC, span_id LIMIT 10').column(
            "span_id"
        )
        assert [r["span_id"] for r in t["rows"]] == top.to_pylist()


def _calls_results(store) -> list[tuple[int, str, float]]:
    return sorted(
        (r["id"], r["path"], (store.path / r["path"]).stat().st_mtime)
        for r in store.results(trace="t", tool=indexes.TOOL, name="calls")
    )


def test_issue33_prepared_call_paths_are_read_back_not_rebuilt(tod, monkeypatch):
    """A new process (here: this process with its kept call paths dropped) maps the saved call
    paths; a big trace's first request answers at once, not Pending."""
    store, _app, _state = tod
    saved = _calls_results(store)
    assert len(saved) == 3  # per span row, per path, the names
    before = views.flame(UiState(store, token=None, run_query=run_sql(store)).prep, "t", views.Window())
    calltree._PATHS.clear()
    indexes.forget(store)
    built = []
    monkeypatch.setattr(calltree, "_call_paths", lambda *a: built.append(a) or pytest.fail("rebuilt"))
    state, a2 = ui(store, inline_events=1_000)  # the trace counts as big: a missing part would be Pending
    info = store.trace("t")
    st, d = get(a2, "/api/ui/flame", {"trace": "t", "start": info.ts_min + 77, "end": info.ts_max - 99})
    assert st == 200, d
    st, d = get(a2, "/api/ui/flame", {"trace": "t"})
    assert st == 200 and d["nodes"] == before["nodes"]
    assert not built and _calls_results(store) == saved
    state.close()


def test_issue33_a_damaged_call_paths_file_is_rebuilt_and_verify_reports_it(tmp_path):
    import tracehouse

    with tracehouse.open(tmp_path / "s") as s:
        generate_tod(s, "t", 5_000, seed=4)
        s.flush()
        state, app = ui(s)
        assert get(app, "/api/ui/flame", {"trace": "t"})[0] == 200
        state.close()
        (r,) = [
            r for r in s.results(trace="t", tool=indexes.TOOL, name="calls") if r["params"]["spec"]["part"] == "rows"
        ]
        f = s.path / r["path"]
        data = bytearray(f.read_bytes())
        data[len(data) // 2] ^= 0xFF
        f.write_bytes(bytes(data))
        from tracehouse.store import verify_store

        rep = verify_store(s.path)
        assert any(x["id"] == r["id"] and x["status"] == "damaged" for x in rep["results"])
        calltree._PATHS.clear()
        indexes.forget(s)
        state, app = ui(s)
        st, d = get(app, "/api/ui/flame", {"trace": "t"})
        assert st == 200 and d["nodes"]
        state.close()
        now = [
            x for x in s.results(trace="t", tool=indexes.TOOL, name="calls") if x["params"]["spec"]["part"] == "rows"
        ]
        assert [x["id"] for x in now] != [r["id"]] and len(now) == 1  # rebuilt, the damaged one deleted
        assert not any(x["status"] == "damaged" for x in verify_store(s.path)["results"])


def _serve(store: Path, ready: Path):
    env = dict(os.environ, TRACEHOUSE_HOME=str(store))
    env.pop("TRACEHOUSE_TOKEN", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracehouse.cli", "--store", str(store), "serve", "--port", "0", "--tcp-port", "-1"]
        + ["--quiet", "--ready-file", str(ready)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    end = time.monotonic() + 120
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > end:
            proc.kill()
            raise AssertionError("server did not start: " + proc.stderr.read().decode()[-2000:])
        time.sleep(0.1)
    return proc, json.loads(ready.read_text())["http"]


def _stop(proc) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


def _fetch(base: str, path: str, **q) -> tuple[int, dict]:
    from urllib.error import HTTPError

    try:
        with urllib.request.urlopen(f"{base}{path}?{urlencode(q)}", timeout=120) as r:
            return r.status, json.loads(r.read())
    except HTTPError as e:
        return e.code, json.loads(e.read())


def test_issue33_a_restarted_server_answers_from_what_it_prepared(tmp_path):
    """A real server process prepares the trace; after a restart its first flame graph is
    answered from the call paths saved then: no result is rebuilt (same ids, same files)."""
    import tracehouse

    store = tmp_path / "store"
    with tracehouse.open(store) as s:
        generate_tod(s, "t", 30_000, seed=8)
        s.flush()
    proc, base = _serve(store, tmp_path / "r1.json")
    try:
        st, first = _fetch(base, "/api/ui/flame", trace="t")
        assert st == 200 and first["nodes"]
    finally:
        _stop(proc)

    def files():
        with tracehouse.open(store, readonly=True) as s:
            rs = s.results(trace="t", tool=indexes.TOOL)
            return sorted((r["name"], r["id"], (store / r["path"]).stat().st_mtime_ns) for r in rs)

    prepared = files()
    assert {n for n, _i, _m in prepared} >= {"calls", "spans", "density"}
    proc, base = _serve(store, tmp_path / "r2.json")
    try:
        st, again = _fetch(base, "/api/ui/flame", trace="t")
        assert st == 200 and again["nodes"] == first["nodes"]
        info = _fetch(base, "/api/ui/trace", trace="t")[1]["trace"]
        st, part = _fetch(
            base, "/api/ui/flame", trace="t", start=info["ts_min"] + 5, end=(info["ts_min"] + info["ts_max"]) // 2 + 3
        )
        assert st == 200 and part["nodes"]
    finally:
        _stop(proc)
    assert files() == prepared


def test_issue33_a_pages_requests_do_not_wait_behind_slow_ones(tmp_path):
    """Three slow SQL console requests hold three UI worker threads; a quick request sent after
    them answers while they run (with two worker threads it waited for one of them to end)."""
    import threading

    import tracehouse

    store = tmp_path / "store"
    with tracehouse.open(store) as s:
        generate_tod(s, "t", 2_000, seed=1)
        s.flush()
    proc, base = _serve(store, tmp_path / "r.json")
    done: list[float] = []

    def slow():
        body = json.dumps({"sql": "SELECT sum(hash(i)) AS h FROM range(3000000000) t(i)"}).encode()
        req = urllib.request.Request(
            base + "/api/ui/sql", data=body, method="POST", headers={"content-type": "application/json"}
        )
        try:
            urllib.request.urlopen(req, timeout=120).read()
        except Exception:  # noqa: BLE001 - a timeout answer ends it too
            pass
        done.append(time.monotonic())

    try:
        threads = [threading.Thread(target=slow) for _ in range(3)]
        for t in threads:
            t.start()
        time.sleep(1.0)  # the slow ones are running
        st, _doc = _fetch(base, "/api/ui/traces")
        quick = time.monotonic()
        assert st == 200
        assert not done, "a slow request ended before the quick one could answer: the test proves nothing"
        for t in threads:
            t.join()
        assert quick < min(done)
    finally:
        _stop(proc)


def test_issue33_a_big_traces_whole_trace_answers_are_read_back_after_a_restart(tmp_path, monkeypatch):
    """The prepare job of a big trace saves the overview's whole-trace answers beside its
    indexes; a new server's first requests are answered from them, nothing computed."""
    import tracehouse

    with tracehouse.open(tmp_path / "s") as s:
        generate_tod(s, "big", 20_000, seed=9)
        s.flush()
        state, app = ui(s, inline_events=1_000)
        st, d = get(app, "/api/ui/flame", {"trace": "big"})
        assert st == 202
        for _ in range(600):
            job = get(app, "/api/ui/jobs", {"id": d["job"]["id"]})[1]
            if job["state"] in ("done", "failed"):
                break
            time.sleep(0.1)
        assert job["state"] == "done", job
        asks = [
            ("/api/ui/flame", {}),
            ("/api/ui/density", {"bins": 1000}),
            ("/api/ui/stats", {"by": "state"}),
            ("/api/ui/stats", {"by": "producer"}),
            ("/api/ui/hist", {"kind": "hist", "unit": "us"}),
            ("/api/ui/top", {"n": 25}),
        ]
        before = [get(app, p, q | {"trace": "big"}) for p, q in asks]
        state.close()
        calltree._PATHS.clear()
        indexes.forget(s)
        for name in ("flame", "density", "stats", "hist", "top_spans"):
            monkeypatch.setattr(views, name, lambda *a, name=name, **k: pytest.fail(f"{name} computed again"))
        state, app = ui(s, inline_events=1_000)
        after = [get(app, p, q | {"trace": "big"}) for p, q in asks]
        state.close()
        assert after == before and all(st == 200 for st, _ in after)
