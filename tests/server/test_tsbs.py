"""TSBS's cpu-only queries against `tracehouse serve`; every answer is compared with the same
question written by hand in SQL over `"benchmark".cpu` (tags as columns), put in InfluxDB's JSON
shape here. A tiny scale (10 hosts, 13 hours at one row a minute: TSBS's longest query windows are
12 hours); the full sizes run in `tracehouse bench tsbs`.

Two ways in:
- everywhere (CI too): the 45 queries TSBS's `tsbs_generate_queries` wrote for the 15 query types
  (recorded in tests/data/tsbs/cpu-only-queries.tsv), sent as `tsbs_run_queries_influx` sends
  them (POST /query?q=...&db=benchmark, no body), over TSBS-shaped rows loaded by line protocol;
- where TSBS's own programs are installed ($TSBS_BIN or PATH; the Go module proxy does not serve
  TSBS, so set-up cannot build them): generated data loaded by `tsbs_load_influx`, and the queries
  generated and run by `tsbs_generate_queries` and `tsbs_run_queries_influx`, unmodified."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import urllib.parse
from datetime import UTC, datetime
from pathlib import Path

import pytest

from helpers.server import Server
from tracehouse_bench.tsbs import QUERY_TYPES  # the query types bench tsbs runs

RECORDED = Path(__file__).resolve().parents[1] / "data" / "tsbs" / "cpu-only-queries.tsv"
START, END = "2016-01-01T00:00:00Z", "2016-01-01T13:00:00Z"
SCALE, SEED = 10, 123


def tool(name: str) -> str:
    where = os.environ.get("TSBS_BIN")
    if where and (Path(where) / name).is_file():
        return str(Path(where) / name)
    found = shutil.which(name)
    if found is None:
        pytest.skip(
            f"{name} is not installed ($TSBS_BIN or PATH): the Go module proxy does not serve TSBS, so set-up "
            "cannot build it; the recorded TSBS queries are tested instead"
        )
    return found


def ns(text: str) -> int:
    dt = datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return int(dt.timestamp()) * 10**9


def rfc3339(t: int) -> str:
    return datetime.fromtimestamp(t // 10**9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tsbs")
    data = tmp / "data.influx"
    with open(data, "wb") as f:
        subprocess.run(
            [
                tool("tsbs_generate_data"),
                "--use-case=cpu-only",
                f"--seed={SEED}",
                f"--scale={SCALE}",
                f"--timestamp-start={START}",
                f"--timestamp-end={END}",
                "--log-interval=60s",
                "--format=influx",
            ],
            stdout=f,
            stderr=subprocess.DEVNULL,
            check=True,
            timeout=120,
        )
    s = Server(tmp / "store", "--quiet")
    try:
        r = subprocess.run(
            [
                tool("tsbs_load_influx"),
                f"--file={data}",
                f"--urls=http://127.0.0.1:{s.port}",
                "--db-name=benchmark",
                "--workers=2",
                "--batch-size=1000",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        assert "loaded 7800 rows" in r.stdout
        yield s, tmp
    finally:
        assert s.stop() == 0


def run_queries(server: Server, tmp: Path, query_type: str, n: int = 3) -> list[dict]:
    """The queries TSBS generates for `query_type`, as its runner sent them and printed the answers."""
    qfile = tmp / f"{query_type}.gob"
    with open(qfile, "wb") as f:
        subprocess.run(
            [
                tool("tsbs_generate_queries"),
                "--use-case=cpu-only",
                f"--seed={SEED}",
                f"--scale={SCALE}",
                f"--timestamp-start={START}",
                f"--timestamp-end={END}",
                f"--queries={n}",
                f"--query-type={query_type}",
                "--format=influx",
            ],
            stdout=f,
            stderr=subprocess.DEVNULL,
            check=True,
            timeout=120,
        )
    r = subprocess.run(
        [
            tool("tsbs_run_queries_influx"),
            f"--file={qfile}",
            f"--urls=http://127.0.0.1:{server.port}",
            "--db-name=benchmark",
            "--workers=2",
            "--print-responses",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]  # the runner panics on any answer but 200
    # json.MarshalIndent with the prefix "ID n: " on every line but the first
    docs: list[list[str]] = []
    for line in r.stdout.splitlines():
        if line == "{":
            docs.append([line])
        elif docs and (m := re.match(r"ID \d+: (.*)", line)):
            docs[-1].append(m.group(1))
    out = [json.loads("\n".join(d)) for d in docs]
    assert len(out) == n
    return out


# -- the same questions written by hand in SQL ----------------------------------------------------


def sql(server: Server, query: str) -> list[list]:
    return server.sql(query)


def fields_and_tags(server: Server) -> list[str]:
    cols = [r[0] for r in sql(server, 'SELECT column_name FROM (DESCRIBE "benchmark".cpu)')]
    return sorted(c for c in cols if c not in ("ts", "producer", "seq"))


def params(q: str) -> dict:
    times = dict((op, ns(t)) for op, t in re.findall(r"time (>=|<) '([^']+)'", q))
    interval = re.search(r"group by time\((\d+)([mh])\)", q)
    return {
        "hosts": re.findall(r"hostname = '([^']+)'", q),
        "lo": times.get(">="),
        "hi": times.get("<"),
        "metrics": re.findall(r"(?:max|mean)\((\w+)\)", q),
        "every": int(interval.group(1)) * {"m": 60, "h": 3600}[interval.group(2)] * 10**9 if interval else None,
    }


def windows_by_time(server, p, agg: str, by_host: bool) -> list[dict]:
    """max/mean of the metrics per window (and host) over every window of the range (null where empty)."""
    every, lo, hi = p["every"], p["lo"], p["hi"]
    first = lo - lo % every
    hosts = f" AND hostname IN ({', '.join(repr(h) for h in p['hosts'])})" if p["hosts"] else ""
    vals = ", ".join(f"{agg}({m}) AS c{i}" for i, m in enumerate(p["metrics"]))
    key = "hostname, " if by_host else ""
    rows = sql(
        server,
        f"""
        WITH a AS (SELECT {key}ts - ts % {every} AS t, {vals} FROM "benchmark".cpu
                   WHERE ts >= {lo} AND ts < {hi}{hosts} GROUP BY ALL),
             s AS (SELECT DISTINCT {key}1 AS one FROM a)
        SELECT {key}g.t, {", ".join(f"a.c{i}" for i in range(len(p["metrics"])))}
        FROM (SELECT s.*, w.t FROM s, range({first}, {hi}, {every}) w(t)) g LEFT JOIN a USING ({key}t)
        ORDER BY {key}g.t""",
    )
    names = [agg] + [f"{agg}_{i}" for i in range(1, len(p["metrics"]))]
    series: dict = {}
    for r in rows:
        host = r[0] if by_host else None
        series.setdefault(host, []).append([rfc3339(r[1 if by_host else 0]), *r[2 if by_host else 1 :]])
    out = []
    for host, values in series.items():
        s = {"name": "cpu", "columns": ["time", *names], "values": values}
        if by_host:
            s["tags"] = {"hostname": host}
        out.append(s)
    return out


def high_cpu(server, p) -> list[dict]:
    cols = fields_and_tags(server)
    hosts = f" AND hostname IN ({', '.join(repr(h) for h in p['hosts'])})" if p["hosts"] else ""
    rows = sql(
        server,
        f"""SELECT ts, {", ".join(cols)} FROM "benchmark".cpu
                           WHERE usage_user > 90.0 AND ts >= {p["lo"]} AND ts < {p["hi"]}{hosts} ORDER BY ts, hostname""",
    )
    if not rows:
        return []
    return [{"name": "cpu", "columns": ["time", *cols], "values": [[rfc3339(r[0]), *r[1:]] for r in rows]}]


def lastpoint(server, _p) -> list[dict]:
    cols = [c for c in fields_and_tags(server) if c != "hostname"]
    rows = sql(
        server,
        f"""SELECT hostname, ts, {", ".join(cols)} FROM "benchmark".cpu
                           QUALIFY row_number() OVER (PARTITION BY hostname ORDER BY ts DESC) = 1 ORDER BY hostname DESC""",
    )
    return [
        {"name": "cpu", "tags": {"hostname": r[0]}, "columns": ["time", *cols], "values": [[rfc3339(r[1]), *r[2:]]]}
        for r in rows
    ]


def orderby_limit(server, p) -> list[dict]:
    every, hi = p["every"], p["hi"]
    rows = sql(
        server,
        f"""
        WITH a AS (SELECT ts - ts % {every} AS t, max(usage_user) AS m FROM "benchmark".cpu WHERE ts < {hi} GROUP BY 1)
        SELECT w.t, a.m FROM range((SELECT min(t) FROM a), {hi}, {every}) w(t) LEFT JOIN a USING (t) ORDER BY 1 LIMIT 5""",
    )
    return [{"name": "cpu", "columns": ["time", "max"], "values": [[rfc3339(r[0]), r[1]] for r in rows]}]


def expected(server, query_type: str, q: str) -> list[dict]:
    p = params(q)
    if query_type.startswith(("single-groupby", "cpu-max-all")):
        return windows_by_time(server, p, "max", by_host=False)
    if query_type.startswith("double-groupby"):
        return windows_by_time(server, p, "mean", by_host=True)
    if query_type.startswith("high-cpu"):
        return high_cpu(server, p)
    if query_type == "lastpoint":
        return lastpoint(server, p)
    return orderby_limit(server, p)


def same(got, want, where: str) -> None:
    if isinstance(want, float) or isinstance(got, float):
        assert got is not None and want is not None and math.isclose(got, want, rel_tol=1e-12), where
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: {len(got or [])} != {len(want)} items"
        for i, (g, w) in enumerate(zip(got, want)):
            same(g, w, f"{where}[{i}]")
    elif isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), f"{where}: keys {sorted(got)} != {sorted(want)}"
        for k in want:
            same(got[k], want[k], f"{where}.{k}")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


@pytest.mark.parametrize("query_type", QUERY_TYPES)
def test_tsbs_run_queries_influx_answers_equal_hand_written_sql(loaded, query_type):
    server, tmp = loaded
    answered = 0
    for doc in run_queries(server, tmp, query_type):
        q = doc["influxql"]
        (result,) = doc["response"]["results"]
        assert "error" not in result, (q, result)
        want = expected(server, query_type, q)
        answered += bool(want)
        if query_type.startswith("high-cpu"):  # one series; rows of one time in any order
            for s in result.get("series", []):
                s["values"].sort(key=lambda v: (v[0], v[s["columns"].index("hostname")]))
        same(result.get("series", []), want, q)
    assert answered, "the hand-written SQL found nothing for any query: a test of nothing"


# -- TSBS's recorded queries, sent as its runner sends them ---------------------------------------

TAGS = ("region", "datacenter", "rack", "os", "arch", "team", "service", "service_version", "service_environment")
FIELDS = (
    "usage_user",
    "usage_system",
    "usage_idle",
    "usage_nice",
    "usage_iowait",
    "usage_irq",
    "usage_softirq",
    "usage_steal",
    "usage_guest",
    "usage_guest_nice",
)


def recorded() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in RECORDED.read_text().splitlines():
        if line and not line.startswith("#"):
            qt, q = line.split("\t")
            out.setdefault(qt, []).append(q)
    return out


def tsbs_rows() -> bytes:
    """TSBS's cpu-only shape as line protocol (ns): host_0..host_9, its 9 tags and 10 integer
    fields, one row a minute over the 13 hours the recorded queries were generated for."""
    lo = ns(START)
    lines = []
    for h in range(SCALE):
        tags = ",".join(f"{k}={k}_{(h * 7 + i) % 5}" for i, k in enumerate(TAGS))
        for m in range(13 * 60):
            fields = ",".join(f"{f}={(h * 31 + m * 7 + i * 13) % 100}i" for i, f in enumerate(FIELDS))
            lines.append(f"cpu,hostname=host_{h},{tags} {fields} {lo + m * 60 * 10**9}")
    return "\n".join(lines).encode()


@pytest.fixture(scope="module")
def rows_loaded(tmp_path_factory):
    """TSBS's cpu-only shape (host_0..host_9, its 9 tags and 10 integer fields, one row a minute over the
    13 hours the queries were generated for), values of our own, written over line protocol."""
    tmp = tmp_path_factory.mktemp("tsbs-rows")
    s = Server(tmp / "store", "--quiet")
    try:
        body = tsbs_rows()
        status, _, text = s.request("POST", "/write?db=benchmark", body=body)
        assert status == 204, text
        yield s
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("query_type", QUERY_TYPES)
def test_tsbs_recorded_queries_answer_as_hand_written_sql(rows_loaded, query_type):
    server = rows_loaded
    queries = recorded()[query_type]
    assert len(queries) == 3
    answered = 0
    for q in queries:
        status, headers, body = server.request("POST", "/query?" + urllib.parse.urlencode({"q": q}) + "&db=benchmark")
        assert status == 200, (q, body[:500])
        # every TSBS cpu-only query takes the native executor (server/influxql_native.py)
        assert {k.lower(): v for k, v in headers.items()}.get("x-tracehouse-engine") == "native", q
        (result,) = json.loads(body)["results"]
        assert "error" not in result, (q, result)
        want = expected(server, query_type, q)
        answered += bool(want)
        if query_type.startswith("high-cpu"):
            for s in result.get("series", []):
                s["values"].sort(key=lambda v: (v[0], v[s["columns"].index("hostname")]))
        same(result.get("series", []), want, q)
    assert answered, "the hand-written SQL found nothing for any query: a test of nothing"
