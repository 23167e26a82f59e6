"""A trace with `segment_order=producer` keeps its segments sorted by (producer, ts) in 64K-row
row groups: a query for one producer skips the others' row groups, and every answer (SQL,
cursors, counts) is the one a time-ordered trace of the same rows gives."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import tracehouse
from tracehouse import Column, EventType
from tracehouse import analysis as an

ET = EventType("m", "instant", (Column("v", "float64", "", ""),))
N, PRODUCERS = 300_000, 50


def _data(seed: int = 3) -> pa.Table:
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.integers(0, 10**9, N))
    return pa.table(
        {"ts": ts, "producer": pa.array(rng.integers(0, PRODUCERS, N).astype(np.int32)), "v": rng.random(N)}
    )


def _stores(tmp_path):
    data = _data()
    out = {}
    for order in ("ts", "producer"):
        s = tracehouse.open(tmp_path / order, fsync="off")
        s.create_trace("q", "custom", event_types=[ET], metadata={} if order == "ts" else {"segment_order": "producer"})
        for k in range(0, N, 100_000):  # three checkpoints' worth, then one compacted segment
            s.append("q", "m", data.slice(k, 100_000))
            s.flush()
        out[order] = s
    return data, out


def _row_groups_scanned(store, sql: str) -> list[tuple[int, int]]:
    """(row groups scanned, row groups to scan) of every Parquet scan of `sql`, run."""
    plan = json.loads(store.sql(f"EXPLAIN (ANALYZE, FORMAT json) {sql}").column(1)[0].as_py())
    todo, found = list(plan["operator"]), []
    while todo:
        n = todo.pop()
        todo += n.get("children", [])
        if n.get("name") == "READ_PARQUET":
            found.append((n["row_groups_scanned"], n["total_row_groups_to_scan"]))
    return found


def test_producer_order_sorts_segments_and_prunes_row_groups(tmp_path):
    data, stores = _stores(tmp_path)
    by_p, by_ts = stores["producer"], stores["ts"]
    for s in (by_p, by_ts):
        assert s.compact("q") >= 2
    (seg,) = by_p.sql("SELECT path FROM th.segments WHERE trace = 'q'").column(0).to_pylist()
    f = pq.ParquetFile(by_p.path / seg)
    t = f.read(columns=["ts", "producer"])
    p, ts = t.column("producer").to_numpy(), t.column("ts").to_numpy()
    assert np.all((p[1:] > p[:-1]) | ((p[1:] == p[:-1]) & (ts[1:] >= ts[:-1])))
    assert f.metadata.num_row_groups == -(-N // (64 * 1024))
    sql = 'SELECT * FROM "q".m WHERE producer = 7'
    (scanned,) = _row_groups_scanned(by_p, sql)
    assert scanned == (1, f.metadata.num_row_groups), scanned  # the other producers' row groups skipped
    ((done, total),) = _row_groups_scanned(by_ts, sql)
    assert done == total  # time order: every row group holds producer 7
    # The same answers as the time-ordered trace.
    for q in (
        sql + " ORDER BY ts",
        'SELECT producer, count(*), round(sum(v), 6) FROM "q".m GROUP BY 1 ORDER BY 1',
        'SELECT * FROM "q".m WHERE ts BETWEEN 200000000 AND 200500000 ORDER BY ts, producer, seq',
        'SELECT count(*) FROM "q".events',
    ):
        assert by_p.sql(q).equals(by_ts.sql(q)), q
    want = data.filter(pa.compute.equal(data.column("producer"), 7)).column("v").to_pylist()
    assert by_p.sql(sql + " ORDER BY ts, seq").column("v").to_pylist() == want
    for s in stores.values():
        s.close()


def test_cursor_pages_are_the_same_over_either_order(tmp_path):
    _data_, stores = _stores(tmp_path)
    pages = {}
    for order, s in stores.items():
        c = an.cursor(s, "q", types=["m"], producers=[3, 9], at=400_000_000)
        nxt = c.next(200)
        c2 = an.cursor(s, "q", types=["m"], where=["v < 0.1"], at=700_000_000)
        pages[order] = (nxt.to_pylist(), c2.prev(50).to_pylist())
        s.close()
    assert pages["ts"] == pages["producer"]
    assert len(pages["ts"][0]) == 200 and len(pages["ts"][1]) == 50


def test_string_statistics_only_where_they_prune(tmp_path):
    """A checkpoint's segment in ts order keeps no min/max of its strings (segments.write_options:
    over a row group in time order they span every value); its ints and ts keep theirs. Segments in
    producer order, where a row group holds a few series' tags, and compacted segments keep them; a
    query on a string is answered the same either way."""
    tagged = EventType("m", "instant", (Column("tag", "string", "", ""), Column("v", "int64", "", "")))
    n = 40_000
    data = pa.table(
        {
            "ts": pa.array(range(n), pa.int64()),
            "producer": pa.array([i % 8 for i in range(n)], pa.int32()),
            "tag": [f"host-{i % 8}" for i in range(n)],
            "v": pa.array(range(n), pa.int64()),
        }
    )

    def stats(store) -> list[dict]:
        out = []
        for path in store.sql("SELECT path FROM th.segments WHERE trace = 'q'").column(0).to_pylist():
            rg = pq.ParquetFile(store.path / path).metadata.row_group(0)
            names = [rg.column(i).path_in_schema for i in range(rg.num_columns)]
            out.append({c: rg.column(names.index(c)).is_stats_set for c in ("ts", "v", "tag")})
        return out

    answers = []
    for order in ("ts", "producer"):
        with tracehouse.open(tmp_path / order, fsync="off") as s:
            s.create_trace(
                "q", "custom", event_types=[tagged], metadata={} if order == "ts" else {"segment_order": "producer"}
            )
            for k in range(0, n, 10_000):
                s.append("q", "m", data.slice(k, 10_000))
                s.flush()
            assert stats(s) == [{"ts": True, "v": True, "tag": order == "producer"}] * 4, order
            answers.append(
                s.sql("SELECT producer, count(*), sum(v) FROM \"q\".m WHERE tag = 'host-3' GROUP BY 1").to_pylist()
            )
            assert s.compact("q") >= 2
            assert stats(s) == [{"ts": True, "v": True, "tag": True}]
    assert answers[0] == answers[1] == [{"producer": 3, "count_star()": n // 8, "sum(v)": sum(range(3, n, 8))}]
