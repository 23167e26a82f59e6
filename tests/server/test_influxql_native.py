"""The native InfluxQL executor (server/influxql_native.py, src/analysis/influx.rs) against the
DuckDB translation (influxql_sql.py): random SELECTs of the native shapes run through both paths
over one store and their answers compared exactly; and over `tracehouse serve`, which path a
query took (X-Tracehouse-Engine) and that every acknowledged write is seen (write, query, write,
query).

The store: 5 hosts of `cpu` (one without a region tag), an integer field `u` and a float field `f`
(each null in some rows; floats are multiples of 1/4, so sums are exact in any order), in a
checkpointed segment and an unflushed tail (the WAL of a running server, read by the in-process
store as its tail). Timestamps differ between series (a host's are offset by its number in ns);
points of one time are checked against InfluxDB itself (test_influxdb_peer.py: the greater value)."""

from __future__ import annotations

import json
import random
import time
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.server import Server

T0 = 1_600_000_000 * 10**9  # 2020-09-13T12:26:40Z
STEP = 10 * 10**9
ROWS = 180  # per host and write: 30 minutes


def lines(first: int, rows: int, seed: int) -> str:
    rng = random.Random(seed)
    out = []
    for h in range(5):
        tags = f"host=h{h}" + (f",region=r{h % 2}" if h != 4 else "")
        for i in range(first, first + rows):
            fields = []
            if rng.random() > 0.1:
                fields.append(f"u={rng.randint(-50, 100)}i")
            if rng.random() > 0.2 or not fields:
                fields.append(f"f={rng.randint(-400, 400) / 4}")
            out.append(f"cpu,{tags} {','.join(fields)} {T0 + i * STEP + h}")
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """(run(query, native) -> results, the server) over a segment and an unflushed tail."""
    import tracehouse
    from tracehouse.server.influxql import Executor, Request, answer, parse

    path = tmp_path_factory.mktemp("native") / "store"
    s = Server(path, "--quiet")
    assert s.write(lines(0, ROWS, 1), "db", v1=True)[0] == 204
    assert s.stop() == 0  # (checkpointed: a segment)
    s = Server(path, "--quiet")
    assert s.write(lines(ROWS, ROWS, 2), "db", v1=True)[0] == 204  # (the tail: in the WAL)
    store = tracehouse.open(path, readonly=True)

    class Ingest:
        pass

    ingest = Ingest()
    ingest.store = store

    def run(q: str, native: bool, epoch: str | None = "ns"):
        # (natively: the values encoded as JSON text in Rust and spliced in, as `serve` answers)
        ex = Executor(ingest, default_db="db", native=native, epoch=epoch, raw_json=native)
        req = Request(q=q, db="db", epoch=epoch, chunked=False, pretty=False, params={})
        return json.loads(answer(ex.run(parse(q)), req))["results"], ex.engine

    s.in_process = store
    try:
        yield run, s
    finally:
        store.close()
        assert s.stop() == 0


def test_the_store_has_a_segment_and_a_tail(both):
    run, _s = both
    store = both[1].in_process
    cut = store.cut("db")
    assert cut.segments and cut.tail_rows == ROWS * 5
    (res,), engine = run("SELECT count(u), count(f) FROM cpu", native=True)
    assert engine == "native"
    (series,) = res["series"]
    total = series["values"][0]
    assert 0 < total[1] < 2 * ROWS * 5 and 0 < total[2] < 2 * ROWS * 5
    (want,), engine = run("SELECT count(u), count(f) FROM cpu", native=False)
    assert engine == "duckdb" and want == res


T_LO, T_HI = T0 - 5 * STEP, T0 + 2 * ROWS * STEP + 5 * STEP
times = st.integers(T_LO, T_HI)
fields = st.sampled_from(["u", "f"])
tag_conds = st.sampled_from(
    [
        None,
        "host = 'h1'",
        "(host = 'h0' or host = 'h3' or host = 'h4')",
        "region = ''",
        "region != 'r0'",
        "(region = 'r1' and host != 'h3')",
        "host = 'nope'",
    ]
)
field_conds = st.sampled_from([None, "u > 50", "f <= -10.5", "u >= 0 and f < 80.0", "u != 7", "90 < u"])
intervals = st.sampled_from(["10s", "1m", "7m", "1h", "90s"])
group_tags = st.sampled_from([None, "host", "region", "*", '"host", region'])


def where(lo, hi, tag, fcond) -> str:
    parts = []
    if lo is not None:
        parts.append(f"time >= {lo}")
    if hi is not None:
        parts.append(f"time < {hi}")
    parts += [c for c in (tag, fcond) if c]
    return (" WHERE " + " AND ".join(parts)) if parts else ""


@st.composite
def aggregate_queries(draw) -> str:
    n = draw(st.integers(1, 3))
    calls = [
        f"{draw(st.sampled_from(['count', 'sum', 'mean', 'min', 'max', 'first', 'last']))}({draw(fields)})"
        for _ in range(n)
    ]
    dim = draw(st.booleans())
    lo = draw(st.none() | times)
    hi = draw(times) if dim else draw(st.none() | times)
    q = f"SELECT {', '.join(calls)} FROM cpu{where(lo, hi, draw(tag_conds), draw(field_conds))}"
    groups = []
    if dim:
        iv = draw(intervals)
        off = draw(st.sampled_from(["", ", 15s", ", -3s"]))
        groups.append(f"time({iv}{off})")
    tags = draw(group_tags)
    if tags:
        groups.append(tags)
    if groups:
        q += " GROUP BY " + ", ".join(groups)
    if dim and draw(st.booleans()):
        q += " fill(none)"
    if draw(st.booleans()):
        q += " ORDER BY time DESC"
    if draw(st.booleans()):
        q += f" LIMIT {draw(st.integers(1, 4))}"
        if draw(st.booleans()):
            q += f" OFFSET {draw(st.integers(1, 3))}"
    if draw(st.booleans()):
        q += " SLIMIT 2"
    return q


@st.composite
def raw_queries(draw) -> str:
    cols = draw(st.sampled_from(["*", "u", "f, host", "u, f, region", "region, u"]))
    q = f"SELECT {cols} FROM cpu{where(draw(st.none() | times), draw(st.none() | times), draw(tag_conds), draw(field_conds))}"
    tags = draw(group_tags)
    if tags:
        q += " GROUP BY " + tags
    if draw(st.booleans()):
        q += " ORDER BY time DESC"
    if draw(st.booleans()):
        q += f" LIMIT {draw(st.integers(1, 5))}"
        if draw(st.booleans()):
            q += f" OFFSET {draw(st.integers(1, 3))}"
    return q


def same(run, q: str, epoch: str | None = "ns") -> None:
    got, engine = run(q, True, epoch)
    want, _ = run(q, False, epoch)
    assert engine == "native", q
    assert got == want, q


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(aggregate_queries())
def test_aggregates_answer_as_duckdb_does(both, q):
    same(both[0], q)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw_queries())
def test_raw_points_answer_as_duckdb_does(both, q):
    same(both[0], q)


@pytest.mark.parametrize(
    "q",
    [
        # TSBS's cpu-only shapes
        "SELECT max(u) FROM cpu WHERE (host = 'h2') AND time >= '2020-09-13T12:30:00Z' AND time < "
        "'2020-09-13T13:30:00Z' GROUP BY time(1m)",
        "SELECT max(u), max(f) FROM cpu WHERE (host = 'h2' or host = 'h0') AND time >= '2020-09-13T12:30:00Z' "
        "AND time < '2020-09-13T12:50:00Z' GROUP BY time(1m)",
        "SELECT mean(u), mean(f) FROM cpu WHERE time >= '2020-09-13T12:30:00Z' AND time < '2020-09-13T13:30:00Z' "
        "GROUP BY time(10m), host",
        "SELECT * FROM cpu WHERE u > 90.0 AND time >= '2020-09-13T12:30:00Z' AND time < '2020-09-13T13:30:00Z'",
        "SELECT * FROM cpu WHERE u > 90.0 AND (host = 'h1') AND time >= '2020-09-13T12:30:00Z' AND time < "
        "'2020-09-13T13:30:00Z'",
        'SELECT * FROM cpu GROUP BY "host" ORDER BY time DESC LIMIT 1',
        "SELECT max(u) FROM cpu WHERE time < '2020-09-13T13:00:00Z' GROUP BY time(1m) LIMIT 5",
        # a lone selector without GROUP BY time: its point's time
        "SELECT max(u) FROM cpu GROUP BY host",
        "SELECT first(f) FROM cpu WHERE time >= 1600000100000000000",
        "SELECT last(u) AS x, min(f) FROM cpu GROUP BY region",
    ],
)
@pytest.mark.parametrize("epoch", [None, "ms"])
def test_tsbs_shapes_and_time_formats(both, q, epoch):
    same(both[0], q, epoch)


@pytest.mark.parametrize(
    "q",
    [
        "SELECT max(u) FROM cpu WHERE host =~ /h1/",  # regex
        "SELECT median(u) FROM cpu",  # another function
        "SELECT u + 1 FROM cpu",  # arithmetic
        "SELECT max(u) FROM cpu WHERE time >= 1600000000000000000 AND time < 1600000600000000000 "
        "GROUP BY time(1m) fill(previous)",
        "SELECT max(u) FROM cpu WHERE u > 1 OR host = 'h1'",  # fields and tags under OR
        "SELECT max(m) FROM (SELECT max(u) AS m FROM cpu GROUP BY time(1m), host) WHERE time >= 1600000000000000000"
        " AND time < 1600000600000000000 GROUP BY time(5m)",
    ],
)
def test_other_shapes_go_to_duckdb(both, q):
    run = both[0]
    got, engine = run(q, True)
    want, _ = run(q, False)
    assert engine == "duckdb" and got == want


def test_served_write_query_write_query_sees_every_acknowledged_write(tmp_path):
    s = Server(tmp_path / "store", "--quiet")
    try:

        def ask(q: str):
            status, headers, body = s.request("GET", "/query?" + urlencode({"q": q, "db": "w", "epoch": "s"}))
            assert status == 200, body
            return {k.lower(): v for k, v in headers.items()}.get("x-tracehouse-engine"), json.loads(body)

        q = "SELECT count(v), last(v) FROM m GROUP BY host"
        for i in range(1, 6):
            assert s.write(f"m,host=a v={i}i {1_600_000_000 + i}\nm,host=b v={10 * i}i {1_600_000_000 + i}\n", "w",
                           precision="s")[0] == 204  # fmt: skip
            engine, body = ask(q)
            assert engine == "native"
            series = body["results"][0]["series"]
            assert [(x["tags"]["host"], x["values"]) for x in series] == [
                ("a", [[0, i, i]]),
                ("b", [[0, i, 10 * i]]),
            ]
        engine, _ = ask("SELECT median(v) FROM m")
        assert engine == "duckdb"
        # chunked and pretty answers (values as lists again) hold the same series
        _, whole = ask(q)
        for extra in ({"chunked": "true", "chunk_size": "1"}, {"pretty": "true"}):
            args = urlencode({"q": q, "db": "w", "epoch": "s", **extra})
            status, _h, body = s.request("GET", "/query?" + args)
            assert status == 200
            docs = (
                [json.loads(line) for line in body.decode().split("\n") if line.strip()]
                if "chunked" in extra
                else [json.loads(body)]
            )
            series = [x for d in docs for x in d["results"][0]["series"]]
            assert series == whole["results"][0]["series"]
    finally:
        assert s.stop() == 0


def test_answer_splices_native_values_and_leaves_look_alike_strings_alone():
    from tracehouse.jsonvalues import RawSeries
    from tracehouse.server.influxql import Request, answer

    fake = "\x00" + "ab" * 8 + ":0"  # shaped like the splice's mark, with another nonce
    res = [
        {
            "statement_id": 0,
            "series": [  # (a series of dicts beside a native one: spliced one by one)
                {"name": "m", "tags": {"h": fake}, "columns": ["time", "v"], "values": [[1, 2.5]]},
                RawSeries(b'{"name": "m", "tags": {"h": "b"}, "columns": ["time", "v"], "values": [[2,null]]}'),
            ],
        }
    ]
    req = Request(q="", db=None, epoch=None, chunked=False, pretty=False, params={})
    doc = json.loads(answer(res, req))
    assert doc["results"][0]["series"][0] == {
        "name": "m",
        "tags": {"h": fake},
        "columns": ["time", "v"],
        "values": [[1, 2.5]],
    }
    assert doc["results"][0]["series"][1]["values"] == [[2, None]]


def test_served_raw_series_see_every_acknowledged_write_across_checkpoints_and_compactions(tmp_path):
    """Raw points go out as whole series written in Rust (`_core.influx_raw_json`), with each
    producer's tags and each series' opening kept with the columns' view, and the writer's cut
    keeps its catalog reads while the catalog's version stays (`Store.cut`). Each round writes
    (acknowledged), then asks TSBS lastpoint's shape and one host's points: every round's newest
    row and every row so far are in the answers. About 4 s of rounds: some rounds follow a
    checkpoint or a compaction of the server (segments registered, the version moved), most not."""
    s = Server(tmp_path / "store", "--quiet")
    try:

        def ask(q: str):
            status, headers, body = s.request("GET", "/query?" + urlencode({"q": q, "db": "w", "epoch": "ns"}))
            assert status == 200, body
            assert {k.lower(): v for k, v in headers.items()}.get("x-tracehouse-engine") == "native", q
            return json.loads(body)["results"][0].get("series", [])

        started, rounds, total = time.monotonic(), 0, 0
        while time.monotonic() - started < 4 or rounds < 30:
            lines = [
                f"m,host=h{i % 3},dc=d{i % 3} v={total + i}i,u={(total + i) / 4} {10**9 + total + i}" for i in range(6)
            ]
            assert s.write("\n".join(lines), "w", precision="ns")[0] == 204
            total += len(lines)
            last = ask('SELECT * FROM m GROUP BY "host" ORDER BY time DESC LIMIT 1')
            assert [(x["name"], x["tags"], x["columns"]) for x in last] == [
                ("m", {"host": f"h{h}"}, ["time", "dc", "u", "v"]) for h in (2, 1, 0)
            ]
            for x in last:
                h = int(x["tags"]["host"][1])
                i = max(i for i in range(total) if i % 3 == h)
                assert x["values"] == [[10**9 + i, f"d{h}", i / 4, i]], (rounds, x)
            points = ask("SELECT v FROM m WHERE host = 'h0'")
            assert points[0]["values"] == [[10**9 + i, i] for i in range(0, total, 3)], rounds
            rounds += 1
        segments = json.loads(
            s.request("GET", "/api/query?" + urlencode({"sql": "SELECT count(*) FROM th.segments WHERE trace = 'w'"}))[
                2
            ]
        )["rows"][0][0]
    finally:
        assert s.stop() == 0
    assert segments >= 1  # (rows were registered as segments while it ran)


def test_writer_cut_keeps_its_catalog_reads_only_while_the_version_stays(tmp_path):
    """`Store.cut` of a trace this process writes: append, cut, append, cut (the tail moves, the
    catalog does not), flush (segments registered: the version moves), compact, cut: each cut
    holds every row appended before it, once."""
    import pyarrow.parquet as pq

    import tracehouse
    from helpers import BATCH_TYPE, batch_table

    def rows(cut) -> int:
        segs = sum(pq.read_metadata(cut.root / g.path).num_rows for g in cut.segments_of("ev"))
        return segs + sum(b.num_rows for b in cut.tails.get("ev", []))

    with tracehouse.open(tmp_path / "store") as st:
        st.create_trace("t", "crashfmt", event_types=[BATCH_TYPE])
        n = 0
        for round_ in range(3):
            for b in (5 + 2 * round_, 6 + 2 * round_):
                batch = batch_table(b)
                st.append("t", "ev", batch)
                n += batch.num_rows
                assert rows(st.cut("t")) == n, round_
            st.flush("t")
            assert rows(st.cut("t")) == n and len(st.cut("t").segments_of("ev")) >= 1, round_
        st.compact("t")
        cut = st.cut("t")
        assert rows(cut) == n and not cut.tails.get("ev")


def test_held_columns_follow_new_cuts_without_a_query(tmp_path):
    """`warm` (started by `serve`) brings the held columns up to each new cut off the query path:
    after rows are acknowledged (the tail moves) and after a checkpoint (a segment registered),
    the columns reach the new cut's signature with no query asking, and the next query's answer
    holds every row once without bringing them up to date itself; `refresh` alone does the same
    and says how many measurements it moved."""
    import threading

    import tracehouse
    from tracehouse.server.influxql import Executor, Request, answer, parse
    from tracehouse.server.influxql_native import cache_of, warm

    path = tmp_path / "store"
    srv = Server(path, "--quiet")
    n = 0

    def write(rows: int) -> None:
        nonlocal n
        body = "\n".join(f"m,host=h{(n + i) % 3} v={n + i}i {10**9 + n + i}" for i in range(rows))
        assert srv.write(body, "w", precision="ns")[0] == 204
        n += rows

    write(50)
    st = tracehouse.open(path, readonly=True)
    stopping = threading.Event()
    try:

        class Ingest:
            store = st

        def count() -> int:
            q = "SELECT count(v) FROM m"
            ex = Executor(Ingest(), default_db="w", native=True, raw_json=True)
            req = Request(q=q, db="w", epoch="ns", chunked=False, pretty=False, params={})
            doc = json.loads(answer(ex.run(parse(q)), req))
            assert ex.engine == "native"
            return doc["results"][0]["series"][0]["values"][0][1]

        assert count() == 50
        cache = cache_of(st)
        (cols,) = cache.held.values()
        info = st.catalog.trace("w")
        write(20)  # (the writer's tail)
        assert cols.signature != st.cut(info).signature
        assert cache.refresh() == 1 and cache.refresh() == 0
        assert cols.signature == st.cut(info).signature and count() == 70
        warm(st, stopping)
        for round_ in range(2):
            write(30)
            if round_ == 1:  # a checkpoint: the rows move from the WAL into a segment
                assert srv.stop() == 0
                srv = Server(path, "--quiet")
            deadline = time.monotonic() + 10
            while cols.signature != st.cut(info).signature and time.monotonic() < deadline:
                time.sleep(0.05)
            assert cols.signature == st.cut(info).signature, round_  # (no query asked)
            assert count() == n, round_
        assert n == 130
    finally:
        stopping.set()
        st.close()
        assert srv.stop() == 0


@pytest.mark.parametrize("segments", ["tail", "flushed", "compacted"])
def test_issue32_kept_facts_and_statements_follow_new_tags_fields_and_measurements(tmp_path, segments):
    """What a SELECT keeps between requests (influxql.py `SourceFacts` per catalog version and
    writer types, `parse_kept`'s statements, the cut's catalog reads): write, query, write, query
    with the same texts, in the writing process, a new tag value, then a new tag key and a new
    field (a wider type: `add_event_type` puts it in the writer after the version moved), then a
    new measurement; the rows left in the tail, flushed to segments, or compacted between. Each
    answer holds every acknowledged row, natively and through DuckDB."""
    from tracehouse.server.config import ServerConfig
    from tracehouse.server.influxql import Executor, Request, answer, parse_kept
    from tracehouse.server.ingest import Ingestor
    from tracehouse.store.store import Store

    store = Store(tmp_path / "s", flush_interval_s=3600.0, flush_rows=10**9)
    store.become_writer()
    ing = Ingestor(store, ServerConfig())
    last_q = 'SELECT * FROM m GROUP BY "host" ORDER BY time DESC LIMIT 1'

    def write(body: str) -> None:
        res = ing.write_lp("w", body.encode())
        assert res.rows == body.count("\n") and not res.error_count, res.errors
        assert ing.wait_durable("w", res.lsn, timeout=10)
        if segments != "tail":
            store.flush("w")
        if segments == "compacted":
            store.compact("w")

    def ask(q: str, native: bool = True):
        ex = Executor(ing, default_db="w", epoch="ns", native=native, raw_json=native)
        req = Request(q=q, db="w", epoch="ns", chunked=False, pretty=False, params={})
        statements = parse_kept(q)
        assert parse_kept(q) is statements  # (a text of SELECTs: kept)
        got = json.loads(answer(ex.run(statements), req))["results"][0]
        assert "error" not in got, got
        assert ex.engine == ("native" if native else "duckdb"), q
        return [(s.get("tags"), s["columns"], s["values"]) for s in got.get("series", [])]

    try:
        write("m,host=h0 v=1i 100\n")
        for native in (True, False):
            assert ask(last_q, native) == [({"host": "h0"}, ["time", "v"], [[100, 1]])]
        write("m,host=h1 v=2i 200\nm,host=h0 v=3i 300\n")  # a new tag value: a new producer
        for native in (True, False):
            assert ask(last_q, native) == [
                ({"host": "h1"}, ["time", "v"], [[200, 2]]),
                ({"host": "h0"}, ["time", "v"], [[300, 3]]),
            ]
        write("m,host=h0,dc=d0 v=4i,u=0.5 400\n")  # a new tag key and a new field: a wider type
        for native in (True, False):
            assert ask(last_q, native) == [
                ({"host": "h1"}, ["time", "dc", "u", "v"], [[200, None, None, 2]]),
                ({"host": "h0"}, ["time", "dc", "u", "v"], [[400, "d0", 0.5, 4]]),
            ]
            assert ask("SELECT u, v FROM m WHERE host = 'h0'", native) == [
                (None, ["time", "u", "v"], [[100, None, 1], [300, None, 3], [400, 0.5, 4]])
            ]
        write("n,host=h2 w=7i 500\n")  # a new measurement
        for native in (True, False):
            assert ask('SELECT * FROM n GROUP BY "host" ORDER BY time DESC LIMIT 1', native) == [
                ({"host": "h2"}, ["time", "w"], [[500, 7]])
            ]
            assert ask("SELECT count(v) FROM m", native) == [(None, ["time", "count"], [[0, 4]])]
        if segments != "tail":
            assert store.cut("w").segments_of("m")
    finally:
        store.close()


def test_issue32_kept_facts_are_not_kept_across_a_type_widened_between_version_and_writer(tmp_path):
    """`Store.add_event_type` moves the catalog's version before it puts the wider type in the
    writer: a SELECT run in between (here: from inside the catalog's call, as another thread
    could) reads the new version with the writer's old type. What it kept must not answer the
    next SELECT, which sees the new field (`SourceFacts.writer_types`)."""
    from tracehouse.server.config import ServerConfig
    from tracehouse.server.influxql import Executor, Request, answer, parse_kept
    from tracehouse.server.ingest import Ingestor
    from tracehouse.store.store import Store

    store = Store(tmp_path / "s", flush_interval_s=3600.0, flush_rows=10**9)
    store.become_writer()
    ing = Ingestor(store, ServerConfig())
    q = 'SELECT * FROM m GROUP BY "host" ORDER BY time DESC LIMIT 1'

    def ask():
        ex = Executor(ing, default_db="w", epoch="ns", raw_json=True)
        req = Request(q=q, db="w", epoch="ns", chunked=False, pretty=False, params={})
        got = json.loads(answer(ex.run(parse_kept(q)), req))["results"][0]
        assert ex.engine == "native"
        return [(s["columns"], s["values"]) for s in got["series"]]

    try:
        assert ing.write_lp("w", b"m,host=h0 v=1i 100\n").rows == 1
        assert ask() == [(["time", "v"], [[100, 1]])]
        put = store.catalog.put_event_type
        between = []

        def put_then_ask(*a, **kw):
            stored = put(*a, **kw)
            between.append(ask())  # (the version moved; the writer has the old type)
            return stored

        store.catalog.put_event_type = put_then_ask
        res = ing.write_lp("w", b"m,host=h0 v=2i,u=0.5 200\n")
        assert res.rows == 1 and between == [[(["time", "v"], [[100, 1]])]]
        assert ask() == [(["time", "u", "v"], [[200, 0.5, 2]])]
    finally:
        store.close()


def test_issue32_a_kept_statement_that_reads_now_is_planned_at_each_run(tmp_path):
    """A SELECT's plan is kept for its text (influxql_native.py `_Plan`) only when its conditions
    do not read `now()`: `time > now() - 1s` asked twice, 1.5 s apart, over a point written just
    before the first, finds it the first time and not the second; the same text without now()
    is kept and finds it both times."""
    from tracehouse.server.config import ServerConfig
    from tracehouse.server.influxql import Executor, Request, _source_facts, answer, parse_kept
    from tracehouse.server.ingest import Ingestor
    from tracehouse.store.store import Store

    store = Store(tmp_path / "s", flush_interval_s=3600.0, flush_rows=10**9)
    store.become_writer()
    ing = Ingestor(store, ServerConfig())

    def ask(q: str):
        ex = Executor(ing, default_db="w", epoch="ns", raw_json=True)
        req = Request(q=q, db="w", epoch="ns", chunked=False, pretty=False, params={})
        got = json.loads(answer(ex.run(parse_kept(q)), req))["results"][0]
        assert ex.engine == "native", q
        return [v for s in got.get("series", []) for v in s["values"]]

    try:
        t = time.time_ns()
        assert ing.write_lp("w", f"m,host=h0 v=1i {t}\n".encode()).rows == 1
        recent = "SELECT v FROM m WHERE time > now() - 1s"
        fixed = f"SELECT v FROM m WHERE time > {t - 10**9}"
        assert ask(recent) == [[t, 1]] and ask(fixed) == [[t, 1]]
        time.sleep(1.5)
        assert ask(recent) == [] and ask(fixed) == [[t, 1]]
        plans = _source_facts(store, "w", store.catalog.version_held()).plans
        kept = [st.options["select"] for st in parse_kept(fixed)]
        assert [id(p[0]) for p in plans.values()] == [id(s) for s in kept], "only the text without now()"
    finally:
        store.close()


def test_issue32_a_known_small_select_on_the_dispatcher_sees_every_acknowledged_write(tmp_path):
    """A kept SELECT text whose last run was native, short and over the same columns' views runs
    on the dispatcher (influxql.py `handle`); a write, a new tag value or a new field between
    makes new views and the run goes back to the query workers. Served: the same texts asked
    three times after each acknowledged write answer every row so far."""
    s = Server(tmp_path / "store", "--quiet")
    try:

        def ask(q: str):
            status, headers, body = s.request("GET", "/query?" + urlencode({"q": q, "db": "w", "epoch": "ns"}))
            assert status == 200, body
            assert {k.lower(): v for k, v in headers.items()}.get("x-tracehouse-engine") == "native", q
            return [(x.get("tags"), x["columns"], x["values"]) for x in json.loads(body)["results"][0]["series"]]

        last_q = 'SELECT * FROM m GROUP BY "host" ORDER BY time DESC LIMIT 1'
        rows: list[tuple[int, str, int]] = []
        for n, line in enumerate(
            ["m,host=h0 v=1i 100", "m,host=h0 v=2i 200", "m,host=h1 v=3i 300", "m,host=h1 v=4i 400"]
        ):
            assert s.write(line, "w", precision="ns")[0] == 204
            rows.append((100 * (n + 1), line.split(",")[1].split()[0][5:], n + 1))
            for _ in range(3):
                newest = {}
                for t, h, v in rows:
                    newest[h] = (t, v)
                assert ask(last_q) == [
                    ({"host": h}, ["time", "v"], [[newest[h][0], newest[h][1]]]) for h in sorted(newest, reverse=True)
                ]
                assert ask("SELECT count(v) FROM m") == [(None, ["time", "count"], [[0, len(rows)]])]
        assert s.write("m,host=h0 v=5i,u=0.5 500", "w", precision="ns")[0] == 204  # a new field
        for _ in range(3):
            assert ask(last_q) == [
                ({"host": "h1"}, ["time", "u", "v"], [[400, None, 4]]),
                ({"host": "h0"}, ["time", "u", "v"], [[500, 0.5, 5]]),
            ]
    finally:
        assert s.stop() == 0
