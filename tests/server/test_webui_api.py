"""The web UI's JSON API, called in-process through its ASGI app (server/ui): every answer
checked against the analyses or plain SQL over the same store, the bounds on what the
browser receives, the level-of-detail switch, pending builds of big traces, auth and errors.
"""

from __future__ import annotations

import asyncio
import json
import time
from urllib.parse import urlencode

import numpy as np
import pyarrow as pa
import pytest

from tracehouse import analysis as an
from tracehouse.analysis import lanes, windows
from tracehouse.formats.tod.generate import generate_tod
from tracehouse.server.ui import console, views
from tracehouse.server.ui.app import UiState, build_app
from tracehouse.server.ui.bridge import call_app


@pytest.fixture(scope="module")
def tod_store(tmp_path_factory):
    import tracehouse

    s = tracehouse.open(tmp_path_factory.mktemp("ui") / "store")
    generate_tod(s, "t", 60_000, seed=3)
    s.flush()
    yield s
    s.close()


def run_sql(store):
    return lambda q: store.sql(q)


def ui(store, **kw):
    state = UiState(store, token=kw.pop("token", None), run_query=run_sql(store), **kw)
    return state, build_app(state)


def get(app, path, params=None, *, headers=(), method="GET", body=b""):
    status, hdrs, out = asyncio.run(
        call_app(app, method, path, urlencode(params or {}, doseq=True), list(headers), body)
    )
    ctype = dict(hdrs).get("content-type", "")
    return status, (json.loads(out) if ctype.startswith("application/json") else out)


@pytest.fixture(scope="module")
def app(tod_store):
    state, a = ui(tod_store)
    yield a
    state.close()


def test_density_equals_plain_sql_counts(tod_store, app):
    st, d = get(app, "/api/ui/density", {"trace": "t", "bins": 50})
    assert st == 200 and d["bins"] == 50 and len(d["bin_start"]) == 50
    ref = an.event_streams.density_sql(tod_store, "t", 50, d["start"], d["end"])
    total = np.zeros(50, np.int64)
    for b, n in zip(ref.column("bin").to_pylist(), ref.column("events").to_pylist()):
        total[b] += n
    assert d["total"] == total.tolist()
    assert sum(d["total"]) == tod_store.trace("t").event_count
    by_type = {s["type"]: sum(s["counts"]) for s in d["series"]}
    assert by_type == {
        r["type"]: r["n"] for r in tod_store.sql('SELECT type, count(*) AS n FROM "t".events GROUP BY type').to_pylist()
    }


def test_density_of_a_range_and_producers(tod_store, app):
    info = tod_store.trace("t")
    start = info.ts_min + (info.ts_max - info.ts_min) // 3
    end = start + (info.ts_max - info.ts_min) // 5
    st, d = get(app, "/api/ui/density", {"trace": "t", "bins": 10, "start": start, "end": end, "producers": "1,2"})
    assert st == 200 and d["start"] == start and d["end"] == end
    n = (
        tod_store.sql(f'SELECT count(*) FROM "t".events WHERE ts >= {start} AND ts < {end} AND producer IN (1, 2)')
        .column(0)[0]
        .as_py()
    )
    assert sum(d["total"]) == n > 0


def test_stats_by_type_and_producer_equal_the_sql_analysis(tod_store, app):
    info = tod_store.trace("t")
    start, end = info.ts_min + 1000, info.ts_max - 1000
    for by, key in (("type", "type"), ("producer", "producer")):
        st, d = get(app, "/api/ui/stats", {"trace": "t", "by": by, "start": start, "end": end})
        assert st == 200
        ref = an.stats(tod_store, "t", by, start=start, end=end)
        assert {r["key"]: r["events"] for r in d["rows"]} == dict(
            zip(ref.column(key).to_pylist(), ref.column("events").to_pylist())
        )


def test_stats_by_state_equal_the_sql_analysis(tod_store, app):
    st, d = get(app, "/api/ui/stats", {"trace": "t", "by": "state"})
    assert st == 200
    ref = an.stats(tod_store, "t", "state")
    closed = tod_store.sql(
        'SELECT CAST(behavior_id AS VARCHAR) AS s, count(*) AS n, sum(dur) AS d FROM "t:spans".span '
        "WHERE closed GROUP BY 1"
    ).to_pylist()
    want = {r["s"]: (r["n"], r["d"]) for r in closed}
    top = d["rows"][:-1]  # the last row is "other"
    assert len(top) == views.TOP_GROUPS and d["rows"][-1]["key"] is None
    for r in top:
        assert (r["spans"], r["total_dur"]) == want[r["key"]]
    assert d["spans"] == sum(n for n, _ in want.values())
    assert ref.num_rows >= len(top)


def test_link_stats_of_paje(tmp_path):
    import tracehouse
    from tracehouse.formats.paje import importer as paje
    from tracehouse.server.ui.demo import example_path

    with tracehouse.open(tmp_path / "s") as s:
        paje.import_file(s, example_path("small.paje"), "p")
        state, a = ui(s)
        st, d = get(a, "/api/ui/stats", {"trace": "p", "by": "link"})
        state.close()
        ref = s.sql('SELECT count(*) AS n, sum(dst_ts - ts) AS d FROM "p".link WHERE dst_ts IS NOT NULL').to_pylist()[0]
    assert st == 200 and sum(r["links"] for r in d["rows"]) == ref["n"] > 0
    assert sum(r["total_dur"] for r in d["rows"]) == ref["d"]


def test_histogram_is_bpftraces_over_the_closed_spans(tod_store, app):
    st, d = get(app, "/api/ui/hist", {"trace": "t", "unit": "us"})
    assert st == 200
    dur = tod_store.sql('SELECT dur FROM "t:spans".span WHERE closed').column(0).to_numpy()
    h = an.histogram(dur, unit="us")
    assert [b["count"] for b in d["buckets"]] == [b["count"] for b in h.to_json()["buckets"]]
    assert d["spans"] == len(dur)
    st, lin = get(app, "/api/ui/hist", {"trace": "t", "kind": "lhist", "unit": "us"})
    assert st == 200 and lin["kind"] == "lhist" and sum(b["count"] for b in lin["buckets"]) == len(dur)


def test_top_spans_are_the_longest(tod_store, app):
    st, d = get(app, "/api/ui/top", {"trace": "t", "n": 5})
    want = tod_store.sql(
        'SELECT span_id, dur FROM "t:spans".span WHERE closed ORDER BY dur DESC, span_id LIMIT 5'
    ).to_pylist()
    assert st == 200 and [r["dur"] for r in d["rows"]] == [w["dur"] for w in want]


def test_flame_of_the_whole_trace_is_the_aggregated_call_tree(tod_store, app):
    st, d = get(app, "/api/ui/flame", {"trace": "t", "min_share": "0"})
    assert st == 200
    tree = an.aggregated_call_tree(tod_store, "t")
    from tracehouse.analysis.calltree import node_paths

    paths = node_paths(
        tree.column("parent").to_numpy(), tree.column("depth").to_numpy(), np.arange(tree.num_rows), tree.column("name")
    )
    want = {
        p: (c, t) for p, c, t in zip(paths, tree.column("calls").to_pylist(), tree.column("total_ns").to_pylist()) if c
    }
    by_id = {n["id"]: n for n in d["nodes"]}

    def path(n):
        return n["name"] if n["parent"] < 0 else path(by_id[n["parent"]]) + ";" + n["name"]

    got = {path(n): (n["calls"], n["total"]) for n in d["nodes"] if n["calls"]}
    # Unclosed spans are cut at the trace's end in both; the window is the whole trace. Paths
    # under the threshold (raised until at most 5,000 nodes are sent) are left out.
    assert len(d["nodes"]) <= 5_000 and got
    assert all(want[p] == v for p, v in got.items())
    assert all(t < d["threshold_ns"] for p, (c, t) in want.items() if p not in got)


def test_flame_of_a_range_clips_durations_and_lists_the_spans_of_a_frame(tod_store, app):
    info = tod_store.trace("t")
    start = (info.ts_min + info.ts_max) // 2
    end = start + 200_000
    st, d = get(app, "/api/ui/flame", {"trace": "t", "start": start, "end": end, "producers": "3"})
    assert st == 200 and d["nodes"]
    roots = sum(n["total"] for n in d["nodes"] if n["parent"] < 0)
    assert roots <= end - start  # one thread's root calls cannot cover more than the range
    biggest = max(d["nodes"], key=lambda n: n["total"])
    st, f = get(
        app, "/api/ui/frame", {"trace": "t", "start": start, "end": end, "producers": "3", "node": biggest["id"]}
    )
    assert st == 200 and f["count"] == biggest["calls"] and f["path"][-1] == biggest["name"]
    assert all(r["producer"] == 3 and r["ts"] < end and r["end_ts"] > start for r in f["rows"])


def test_timeline_switches_to_per_pixel_aggregates_and_stays_bounded(tod_store, app, monkeypatch):
    monkeypatch.setattr(lanes, "LEVEL_ITEMS", 100)  # this small trace has ~300 root calls per thread
    monkeypatch.setattr(lanes, "TICK_ITEMS", 100)
    info = tod_store.trace("t")
    st, whole = get(app, "/api/ui/timeline", {"trace": "t", "width": 300, "rows": "1;2;3,4"})
    assert st == 200 and len(whole["rows"]) == 3
    lv0 = whole["rows"][0]["levels"][0]
    n_depth0 = (
        tod_store.sql('SELECT count(*) FROM "t:spans".span WHERE producer = 1 AND depth = 0').column(0)[0].as_py()
    )
    assert n_depth0 > lanes.LEVEL_ITEMS
    assert lv0["mode"] == "busy" and len(lv0["busy"]) == 150 and lv0["spans"] == n_depth0  # 2-pixel bins
    assert [lv["mode"] for lv in whole["rows"][2]["levels"]] == ["sum"]  # a collapsed group: the sum of its producers
    assert {t["type"] for t in whole["rows"][2]["ticks"]} >= {"field_write", "var_write"}
    count = sum(len(v) for r in whole["rows"] for lv in r["levels"] for k, v in lv.items() if isinstance(v, list))
    count += sum(len(t.get("ts", t.get("counts", []))) for r in whole["rows"] for t in r["ticks"])
    assert count <= lanes.MAX_ITEMS
    # zoomed in: the spans themselves
    start = info.ts_min + 100_000
    st, near = get(
        app, "/api/ui/timeline", {"trace": "t", "width": 300, "rows": "1", "start": start, "end": start + 20_000}
    )
    lv = near["rows"][0]["levels"][0]
    assert lv["mode"] == "items" and lv["ts"]
    rows = tod_store.sql(
        f'SELECT ts, dur FROM "t:spans".span WHERE producer = 1 AND depth = 0 AND ts < {start + 20_000} '
        f"AND end_ts > {start} ORDER BY ts"
    ).to_pylist()
    assert list(zip(lv["ts"], lv["dur"])) == [(r["ts"], r["dur"]) for r in rows]
    assert set(near["names"]) >= {str(c) for c in lv["name"]}  # JSON keys: the codes as text


def test_busy_share_is_exact():
    ts = np.array([0, 10, 30], np.int64)
    end_ts = np.array([5, 25, 40], np.int64)
    edges = np.array([0, 10, 20, 30, 40], np.int64)
    assert lanes.busy_share(ts, end_ts, edges).tolist() == [0.5, 1.0, 0.5, 1.0]


def test_a_big_trace_is_prepared_by_a_background_job(tmp_path):
    import tracehouse

    with tracehouse.open(tmp_path / "s") as s:
        generate_tod(s, "big", 20_000, seed=5)
        s.flush()
        state, a = ui(s, inline_events=1_000)  # "big" for this test
        st, d = get(a, "/api/ui/density", {"trace": "big", "bins": 10})
        assert st == 202 and d["pending"] and d["job"]["kind"] == "prepare"
        for _ in range(600):
            st, job = get(a, "/api/ui/jobs", {"id": d["job"]["id"]})
            if job["state"] in ("done", "failed"):
                break
            time.sleep(0.1)
        assert job["state"] == "done", job
        for path in ("/api/ui/density", "/api/ui/flame", "/api/ui/hist"):
            st, doc = get(a, path, {"trace": "big"})
            assert st == 200, (path, doc)
        state.close()


def test_sql_console_pages_times_and_reports_duckdb_errors(tod_store, app):
    body = json.dumps({"sql": 'SELECT ts FROM "t".events ORDER BY ts;', "page": 2, "page_size": 7}).encode()
    st, d = get(app, "/api/ui/sql", method="POST", body=body)
    want = tod_store.sql('SELECT ts FROM "t".events ORDER BY ts LIMIT 7 OFFSET 14').column(0).to_pylist()
    assert st == 200 and [r[0] for r in d["rows"]] == want and d["has_more"] and d["seconds"] >= 0
    st, e = get(app, "/api/ui/sql", method="POST", body=json.dumps({"sql": "SELECT nope FROM th.traces"}).encode())
    assert st == 400 and "nope" in e["error"] and "Traceback" not in e["error"]
    st, e = get(app, "/api/ui/sql", method="POST", body=b"not json")
    assert st == 400 and "JSON" in e["error"]


def test_issue33_a_duckdb_error_keeps_its_lines_and_the_caret_under_the_mistake(app):
    """DuckDB's multi-line error (`LINE 1: ...` then `^` under the mistake) reached the console
    flattened to one line, the caret pointing nowhere."""
    sql = "SELECT 1 FORM x"
    st, e = get(app, "/api/ui/sql", method="POST", body=json.dumps({"sql": sql}).encode())
    assert st == 400, e
    lines = e["error"].splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("LINE 1: "))
    assert lines[at] == "LINE 1: " + sql
    assert lines[at + 1].strip() == "^" and lines[at + 1].index("^") == len("LINE 1: ") + sql.index("x")


def test_sql_downloads(app):
    body = json.dumps({"sql": "SELECT 1 AS a, 'x' AS b UNION ALL SELECT 2, 'y'", "format": "csv"}).encode()
    st, out = get(app, "/api/ui/sql/download", method="POST", body=body)
    assert st == 200 and out.decode().splitlines() == ['"a","b"', '1,"x"', '2,"y"']
    body = json.dumps({"sql": "SELECT 1 AS a", "format": "parquet"}).encode()
    st, out = get(app, "/api/ui/sql/download", method="POST", body=body)
    import pyarrow.parquet as pq

    assert st == 200 and pq.read_table(pa.BufferReader(out)).to_pylist() == [{"a": 1}]


def test_every_example_query_runs_on_the_demo_traces(tmp_path):
    import tracehouse
    from tracehouse.server.ui import demo

    with tracehouse.open(tmp_path / "s") as s:
        generate_tod(s, "demo-tod", 5_000)
        demo.load_examples(s, say=lambda m: None, workdir=tmp_path)
        formats = {t.format for t in s.traces()}
        assert formats >= {"tod", "strace", "chrome", "bpftrace", "stap", "paje", "csv"}
        ex = console.examples(s)
        assert {e["format"] for e in ex} >= formats - {"tod_spans"}
        for e in ex:
            page = console.page(run_sql(s), e["sql"], 0, 5)
            assert page["columns"], e


def test_traces_search_sort_and_counts(tod_store, app):
    st, d = get(app, "/api/ui/traces", {"sort": "event_count", "desc": "1"})
    assert st == 200 and d["traces"][0]["name"] == "t" and d["total"] == len(d["traces"])
    assert d["events"] == sum(t["event_count"] for t in d["traces"])
    st, d = get(app, "/api/ui/traces", {"q": "spans"})
    assert [t["name"] for t in d["traces"]] == ["t:spans"] and d["traces"][0]["derived"]
    st, d = get(app, "/api/ui/traces", {"meta": "generator=to*", "min_events": 1000})
    assert [t["name"] for t in d["traces"]] == ["t"]
    st, d = get(app, "/api/ui/traces", {"meta": "nokey"})
    assert st == 400 and "KEY=GLOB" in d["error"]


def test_upload_import_runs_as_a_job(tmp_path):
    import tracehouse
    from tracehouse.server.ui.demo import example_path

    with tracehouse.open(tmp_path / "s") as s:
        state, a = ui(s)
        data = example_path("small.paje").read_bytes()
        st, d = get(a, "/api/ui/import", {"filename": "small.paje", "name": "up"}, method="POST", body=data)
        assert st == 200
        for _ in range(300):
            st, job = get(a, "/api/ui/jobs", {"id": d["job"]["id"]})
            if job["state"] in ("done", "failed"):
                break
            time.sleep(0.05)
        assert job["state"] == "done" and job["result"]["events"] == 13
        assert s.trace("up").format == "paje" and not list((tmp_path / "s" / "uploads").iterdir())
        st, bad = get(
            a, "/api/ui/import", {"filename": "x.bin", "format": "strace"}, method="POST", body=b"\x00\x01garbage"
        )
        assert st == 400 and "strace" in bad["error"]
        state.close()


def test_results_open_as_tables_histograms_and_processed_traces(tmp_path):
    import tracehouse
    from tracehouse.server.ui import demo

    with tracehouse.open(tmp_path / "s") as s:
        demo.load_examples(s, say=lambda m: None, workdir=tmp_path)
        generate_tod(s, "tt", 3_000)
        an.save_spans(s, an.pair(s, "tt"))
        state, a = ui(s)
        st, d = get(a, "/api/ui/results")
        kinds = {(r["tool"], r["kind"]) for r in d["results"]}
        assert ("bpftrace", "table") in kinds and ("tracehouse.analysis.spans", "processed") in kinds
        opened = [
            get(a, "/api/ui/result", {"id": r["id"]})[1] for r in d["results"] if r["tool"] in ("bpftrace", "stap")
        ]
        views_of = {(o["tool"], o["view"]) for o in opened}
        assert {("bpftrace", "histogram"), ("stap", "histogram"), ("bpftrace", "table")} <= views_of
        h = next(o for o in opened if o["tool"] == "stap")
        assert h["table"]["rows"] and {"lo", "hi", "count"} <= set(h["table"]["columns"])
        proc = next(r for r in d["results"] if r["kind"] == "processed")
        st, p = get(a, "/api/ui/result", {"id": proc["id"]})
        assert p["view"] == "processed" and p["derived_trace"] == "tt:spans"
        st, nf = get(a, "/api/ui/result", {"id": 99999})
        assert st == 404
        state.close()


def test_token_is_needed_for_the_api_not_for_the_page(tod_store):
    state, a = ui(tod_store, token="s3cret")
    st, page = get(a, "/")
    assert st == 200 and b"<title>tracehouse</title>" in page
    st, d = get(a, "/api/ui/traces")
    assert st == 401 and d["auth"]
    st, d = get(a, "/api/ui/traces", headers=[("authorization", "Token wrong")])
    assert st == 401
    st, d = get(a, "/api/ui/traces", headers=[("authorization", "Token s3cret")])
    assert st == 200 and d["traces"]
    state.close()


def test_errors_are_json_without_stack_traces(app):
    st, d = get(app, "/api/ui/density", {"trace": "missing"})
    assert st == 404 and "missing" in d["error"]
    st, d = get(app, "/api/ui/density", {"trace": "t", "start": "abc"})
    assert st == 400 and "integer" in d["error"]
    st, d = get(app, "/api/ui/stats", {"trace": "t", "by": "colour"})
    assert st == 400 and "type | producer | state | link" in d["error"]
    st, d = get(app, "/api/ui/nowhere")
    assert st == 404


def test_window_rows_by_block_searches_equal_a_full_scan(tod_store, app):
    """The span rows of a window found per (producer, depth) block are exactly those a mask over
    every span finds (overlapping for flame graphs, starting-in for histograms)."""
    from tracehouse.analysis import indexes

    state = UiState(tod_store, token=None, run_query=run_sql(tod_store))
    prep = state.prep
    sd = prep.spans("t")
    ts, end_ts = indexes.column(sd.index, "ts"), indexes.column(sd.index, "end_ts")
    prod, closed = indexes.column(sd.index, "producer"), indexes.column(sd.index, "closed")
    info = tod_store.trace("t")
    rng = np.random.default_rng(1)
    for _ in range(20):
        a, b = sorted(rng.integers(info.ts_min - 1000, info.ts_max + 1000, 2).tolist())
        ps = (
            tuple(sorted(rng.choice(np.arange(1, 11), rng.integers(1, 4), replace=False).tolist()))
            if rng.random() < 0.5
            else None
        )
        w = views.Window(a, b + 1, ps)
        in_p = np.ones(len(ts), bool) if ps is None else np.isin(prod, ps)
        rows, clipped = windows.overlapping(sd.index, w, info.ts_min, info.ts_max)
        assert np.array_equal(np.sort(np.arange(len(ts))[rows]), np.flatnonzero(in_p & (ts < b + 1) & (end_ts > a)))
        assert (np.minimum(clipped, b + 1 - a) == clipped).all()
        starting = windows.starting(sd.index, w, info.ts_min, info.ts_max)
        assert np.array_equal(
            np.sort(np.arange(len(ts))[starting]), np.flatnonzero(in_p & (ts >= a) & (ts < b + 1) & closed)
        )
    state.close()


def test_timeline_cuts_levels_past_its_budget(tod_store, app, monkeypatch):
    monkeypatch.setattr(lanes, "MAX_ITEMS", 4_000)
    monkeypatch.setattr(lanes, "LEVEL_ITEMS", 50)
    st, d = get(app, "/api/ui/timeline", {"trace": "t", "width": 400, "rows": "1;2;3;4", "lines": 0})
    assert st == 200
    numbers = sum(len(v) for r in d["rows"] for lv in r["levels"] for v in lv.values() if isinstance(v, list))
    numbers += sum(len(t.get("ts", t.get("counts", []))) for r in d["rows"] for t in r["ticks"])
    assert numbers <= 4_000
    assert any(lv["mode"] == "cut" for r in d["rows"] for lv in r["levels"])


def test_issue33_a_collapsed_group_is_the_sum_of_its_producers_top_level_spans(tod_store, app):
    """A row of several producers drew nothing ("levels": []); it is the sum of its subtree:
    per pixel how many of them are inside a top-level span, exact to the rounding."""
    info = tod_store.trace("t")
    start, end = info.ts_min + 50_000, info.ts_min + 2_050_000
    st, d = get(app, "/api/ui/timeline", {"trace": "t", "width": 200, "rows": "1,2,3", "start": start, "end": end})
    assert st == 200
    (lv,) = d["rows"][0]["levels"]
    assert lv["mode"] == "sum" and lv["producers"] == 3
    bin_ns = (end - start) / len(lv["busy"])
    got = sum(lv["busy"]) * bin_ns
    want = (
        tod_store.sql(
            f'SELECT CAST(sum(least(end_ts, {end}) - greatest(ts, {start})) AS BIGINT) AS ns FROM "t:spans".span '
            f"WHERE producer IN (1, 2, 3) AND depth = 0 AND ts < {end} AND end_ts > {start}"
        )
        .column(0)[0]
        .as_py()
    )
    assert want > 0 and abs(got - want) <= 0.0005 * bin_ns * len(lv["busy"])  # busy shares are rounded to 0.001
    assert max(lv["busy"]) <= 3


def test_issue33_rel_times_are_offsets_from_the_first_event_both_ways(tod_store, app):
    """With rel=1 the page sends and receives ns from the trace's first event (epoch ns are
    not exact in a browser): the same answer as the absolute one, shifted."""
    t0 = tod_store.trace("t").ts_min
    a = {"trace": "t", "width": 300, "rows": "1", "start": t0 + 100_000, "end": t0 + 120_000}
    st, absolute = get(app, "/api/ui/timeline", a)
    st2, relative = get(app, "/api/ui/timeline", a | {"rel": "1", "start": 100_000, "end": 120_000})
    assert st == st2 == 200 and relative["start"] == 100_000 and relative["end"] == 120_000
    lv_a, lv_r = absolute["rows"][0]["levels"][0], relative["rows"][0]["levels"][0]
    assert lv_a["ts"] and [t - t0 for t in lv_a["ts"]] == lv_r["ts"] and lv_a["dur"] == lv_r["dur"]
    st, top = get(app, "/api/ui/top", {"trace": "t", "rel": "1", "n": 3})
    ref = get(app, "/api/ui/top", {"trace": "t", "n": 3})[1]
    assert [r["ts"] - t0 for r in ref["rows"]] == [r["ts"] for r in top["rows"]]
    st, info = get(app, "/api/ui/trace", {"trace": "t", "rel": "1"})
    assert info["trace"]["ts_min"] == 0 and info["trace"]["ts_min_text"] == str(t0)


def test_issue33_a_zoomed_frame_is_its_subtree_with_what_was_cut(tod_store, app):
    """The flame graph sent only frames over its threshold; zooming asks for a frame's subtree
    (root=), and each frame says how much of its children's time was left out (cut)."""
    st, whole = get(app, "/api/ui/flame", {"trace": "t"})
    nodes = {n["id"]: n for n in whole["nodes"]}
    for n in whole["nodes"]:  # total = self + children drawn + cut
        kids = sum(k["total"] for k in whole["nodes"] if k["parent"] == n["id"])
        assert n["total"] == n["self"] + kids + n["cut"]
    cut = [n for n in whole["nodes"] if n["cut"] > 0 and n["parent"] >= 0]
    assert cut, "the test needs a frame whose children were cut"
    n = max(cut, key=lambda n: n["cut"])
    st, sub = get(app, "/api/ui/flame", {"trace": "t", "root": n["id"]})
    assert st == 200
    sub_nodes = {k["id"]: k for k in sub["nodes"]}
    assert n["id"] in sub_nodes and set(sub_nodes) - set(nodes)  # frames the whole graph left out
    ancestors, p = set(), n["parent"]
    while p >= 0:
        ancestors.add(p)
        p = nodes[p]["parent"]
    assert ancestors <= set(sub_nodes)
    tree = an.aggregated_call_tree(tod_store, "t")
    from tracehouse.analysis.calltree import node_paths

    paths = node_paths(
        tree.column("parent").to_numpy(), tree.column("depth").to_numpy(), np.arange(tree.num_rows), tree.column("name")
    )
    want = dict(zip(paths, tree.column("total_ns").to_pylist()))
    by = sub_nodes

    def path(k):
        return k["name"] if k["parent"] < 0 else path(by[k["parent"]]) + ";" + k["name"]

    assert all(want[path(k)] == k["total"] for k in sub["nodes"])
    st, bad = get(app, "/api/ui/flame", {"trace": "t", "root": 10**9})
    assert st == 400 and "root" in bad["error"]


def test_issue33_state_statistics_are_by_self_time_with_a_table(tod_store, app):
    st, d = get(app, "/api/ui/stats", {"trace": "t", "by": "state"})
    ref = an.stats(tod_store, "t", "state").to_pylist()
    assert d["measure"] == "self_dur" and d["total"] == sum(r["self_dur"] for r in ref)
    assert d["total"] < sum(r["total_dur"] for r in ref)  # nested spans: their totals overlap
    assert [r["label"] for r in d["table"]] == [r["state"] for r in sorted(ref, key=lambda r: -r["self_dur"])][:200]
