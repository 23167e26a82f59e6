"""TSBS lastpoint (`SELECT * from cpu group by "hostname" order by time desc limit 1`, the string
its query generator writes) and its relatives over a real `tracehouse serve`, answered from the last
row of each series kept on write (store/lastrows.py): equal to the same question in SQL over every
row (`QUALIFY row_number() OVER (PARTITION BY hostname ORDER BY ts DESC, seq DESC) = 1`) after
out-of-order writes, a checkpoint, a restart and a SIGKILL."""

from __future__ import annotations

import json
import urllib.parse
from datetime import UTC, datetime

from helpers.server import Server

LASTPOINT = 'SELECT * from cpu group by "hostname" order by time desc limit 1'  # tests/data/tsbs
FIELDS = ("usage_user", "usage_system", "usage_idle")
T0 = 1_451_606_400 * 10**9  # 2016-01-01


def lines(hosts, minutes, shift: int = 0) -> str:
    out = []
    for h in hosts:
        for m in minutes:
            fields = ",".join(f"{f}={(h * 31 + m * 7 + i * 13 + shift) % 100}i" for i, f in enumerate(FIELDS))
            out.append(f"cpu,hostname=host_{h},region=r{h % 3} {fields} {T0 + m * 60 * 10**9}")
    return "\n".join(out)


def influx(server: Server, q: str) -> list[dict]:
    status, _, body = server.request("POST", "/query?" + urllib.parse.urlencode({"q": q, "db": "benchmark"}))
    assert status == 200, body[:500]
    (result,) = json.loads(body)["results"]
    assert "error" not in result, result
    return result.get("series", [])


def rfc3339(ns: int) -> str:
    return datetime.fromtimestamp(ns // 10**9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def by_sql(server: Server, cols: list[str], where: str = "") -> list[dict]:
    """The last row of each host (meeting `where`) in InfluxDB's shape, from every row; the hosts
    in reverse order, as InfluxDB lists the series of an ORDER BY time DESC query."""
    rows = server.sql(
        f'SELECT hostname, ts, {", ".join(cols)} FROM "benchmark".cpu {where} '
        "QUALIFY row_number() OVER (PARTITION BY hostname ORDER BY ts DESC, seq DESC) = 1 ORDER BY hostname DESC"
    )
    return [
        {"name": "cpu", "tags": {"hostname": r[0]}, "columns": ["time", *cols], "values": [[rfc3339(r[1]), *r[2:]]]}
        for r in rows
    ]


def check(server: Server) -> list[dict]:
    star = sorted([*FIELDS, "region"])
    got = influx(server, LASTPOINT)
    assert got == by_sql(server, star) and len(got) == 10
    # A condition on a field: a host whose last row fails it answers with an earlier row.
    q = 'SELECT usage_user from cpu where usage_user > 60 group by "hostname" order by time desc limit 1'
    assert influx(server, q) == by_sql(server, ["usage_user"], "WHERE usage_user > 60")
    # A condition on a tag leaves the other series out.
    q = "SELECT * from cpu where region = 'r1' group by \"hostname\" order by time desc limit 1"
    assert influx(server, q) == by_sql(server, star, "WHERE region = 'r1'")
    return got


def test_issue32_lastpoint_from_the_kept_rows_through_writes_restarts_and_a_kill(tmp_path):
    s = Server(tmp_path / "store", "--quiet")
    try:
        assert s.write(lines(range(10), range(0, 300)), "benchmark", v1=True)[0] == 204
        first = check(s)  # (the unflushed rows)
        # Older points written later: the last rows stay; a newer one and one at the same time
        # (written later, so it wins) change two hosts'.
        assert s.write(lines(range(5), range(100, 200), shift=1), "benchmark", v1=True)[0] == 204
        assert s.write(lines([5], [400]) + "\n" + lines([6], [299], shift=5), "benchmark", v1=True)[0] == 204
        after = check(s)
        changed = [a["tags"]["hostname"] for a, b in zip(after, first) if a != b]
        assert sorted(changed) == ["host_5", "host_6"]
    finally:
        assert s.stop() == 0  # (a checkpoint at shutdown)
    s = Server(tmp_path / "store", "--quiet")
    try:
        assert check(s) == after
        assert s.write(lines([7], [500, 450]), "benchmark", v1=True)[0] == 204  # acknowledged: in the WAL
    finally:
        s.kill()
    s = Server(tmp_path / "store", "--quiet")
    try:
        got = check(s)
        host7 = next(g for g in got if g["tags"]["hostname"] == "host_7")
        assert host7["values"][0][0] == rfc3339(T0 + 500 * 60 * 10**9)
    finally:
        assert s.stop() == 0
    import tracehouse

    with tracehouse.open(tmp_path / "store", readonly=True) as r:
        assert r.last_row_types("benchmark") == {"cpu"}


def test_issue32_lastpoint_answers_from_one_statement_unless_a_kept_row_fails(tmp_path):
    """The kept last rows answer in one statement (`Plan.fast`) when every series' kept row meets
    the condition; when one does not (its answer is an earlier row), the whole SQL runs after it.
    Both equal the question in SQL over every row."""
    import tracehouse
    from tracehouse.server.influxql import Executor, parse

    s = Server(tmp_path / "store", "--quiet")
    try:
        assert s.write(lines(range(10), range(0, 300)), "benchmark", v1=True)[0] == 204
    finally:
        assert s.stop() == 0  # (checkpointed: the kept rows are in their file)
    star = sorted([*FIELDS, "region"])
    failing = 'SELECT usage_user from cpu where usage_user > 60 group by "hostname" order by time desc limit 1'
    with tracehouse.open(tmp_path / "store", readonly=True) as store:

        class Ingest:
            pass

        ingest = Ingest()
        ingest.store = store
        for q, statements in ((LASTPOINT, 1), (failing, 2)):
            ran: list[str] = []

            def run_sql(sql, ran=ran):
                ran.append(sql)
                return store.sql(sql)

            (res,) = Executor(ingest, default_db="benchmark", run_sql=run_sql, native=False).run(parse(q))
            assert len(ran) == statements, (q, ran)
            assert ran[0].startswith("WITH _kept AS MATERIALIZED")
            assert "_failing" not in res["series"][0]["columns"]
            got = json.loads(json.dumps(res["series"]))
            want = star if q == LASTPOINT else ["usage_user"]
            s2 = Server(tmp_path / "store", "--quiet")
            try:
                assert got == by_sql(s2, want, "" if q == LASTPOINT else "WHERE usage_user > 60")
            finally:
                assert s2.stop() == 0
