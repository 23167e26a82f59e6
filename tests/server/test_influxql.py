"""InfluxDB 1.x `/query`: InfluxQL meta statements, InfluxDB's JSON shapes, the real
`influxdb` (1.x) and `influxdb-client` (2.x) Python clients, and TSBS's `tsbs_load_influx` session.

The TSBS session below is the loader's HTTP traffic reconstructed from its source
(timescale/tsbs: cmd/tsbs_load_influx/{creator,http_writer,process}.go, load/loader.go): byte for
byte what Go's net/http and fasthttp send, and each answer checked the way the loader reads it.
"""

from __future__ import annotations

import gzip
import json
import socket
import string
from urllib.parse import quote, urlencode

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.server import Server
from tracehouse.server import influxql

# -- the parser -----------------------------------------------------------------------------


def test_parser_reads_meta_statements_case_insensitively_with_quotes_and_comments():
    sts = influxql.parse(
        'show   DATABASES; Create Database "my \\"db" WITH duration INF replication 1 shard duration 1h name "rp";\n'
        '-- a comment\nSHOW TAG KEYS ON "b\\"q" FROM "cpu", /^m.*/ WHERE "host" = \'a\\\'b\' OR region =~ /e/ '
        "LIMIT 2 OFFSET 1 /* trailing */"
    )
    assert [s.kind for s in sts] == ["show databases", "create database", "show tag keys"]
    assert (
        sts[1].database == 'my "db'
        and sts[1].writes
        and sts[1].options == {"duration": 0, "replication": 1, "shard_duration": 3600 * 10**9, "rp_name": "rp"}
    )
    assert sts[2].database == 'b"q'
    assert sts[2].sources[0].name == "cpu" and sts[2].sources[1].regex.pattern == "^m.*"
    assert sts[2].where.node == ("or", ("cmp", "host", "=", "a'b"), ("cmp", "region", "=~", sts[2].where.node[2][3]))
    assert (sts[2].limit, sts[2].offset) == (2, 1)
    assert sts[2].text.startswith("SHOW TAG KEYS") and sts[2].text.endswith("OFFSET 1")


def test_parser_bound_parameters_and_sources_in_other_databases():
    (st_,) = influxql.parse("SHOW SERIES FROM db1.autogen.cpu WHERE host = $h", {"h": "web1"})
    assert st_.sources[0].database == "db1" and st_.where.node == ("cmp", "host", "=", "web1")
    (st_,) = influxql.parse("SHOW FIELD KEYS FROM db2..mem")
    assert st_.sources[0].database == "db2" and st_.sources[0].name == "mem"
    (st_,) = influxql.parse('SHOW TAG VALUES WITH KEY IN (host, "region")')
    assert st_.key_op == "in" and st_.key_value == ["host", "region"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("SHOW", "found EOF, expected DATABASES, MEASUREMENTS"),
        ("frobnicate", "found frobnicate, expected SELECT, DELETE, SHOW"),
        ("SHOW DATABASES extra", "found extra, expected ; at line 1, char 16"),
        ("CREATE DATABASE", "expected database name at line 1, char 16"),
        ("SHOW TAG VALUES FROM cpu", "expected WITH"),
        ("SHOW MEASUREMENTS\nWITH MEASUREMENT =~ /(/", "invalid regex /(/"),
        ("CREATE DATABASE x WITH", "expected DURATION, REPLICATION, SHARD, NAME"),
        ("SHOW MEASUREMENTS ON $db", "missing parameter: db"),
        ("SHOW DATABASES; SHOW 'x", "unterminated string at line 1, char 22"),
        ("CREATE DATABASE select", "expected database name"),  # keywords must be quoted
        ("SHOW SERIES WHERE " + "(" * 500 + "a = 'b'" + ")" * 500, "nested deeper than 100"),
    ],
)
def test_parse_errors_name_what_and_where(text, message):
    with pytest.raises(influxql.ParseError, match=message.replace("(", r"\(").replace("/", "/")):
        influxql.parse(text)


def test_other_statements_parse_and_are_answered_with_an_error_not_a_parse_failure():
    sts = influxql.parse(
        "SELECT mean(v) FROM cpu WHERE t = 'a;b' GROUP BY time(1m); DROP MEASUREMENT cpu; "
        "SHOW USERS; SHOW SERIES CARDINALITY"
    )
    assert [s.kind for s in sts] == ["select"] + ["unsupported"] * 3
    assert [s.options["what"] for s in sts[1:]] == ["DROP MEASUREMENT", "SHOW USERS", "SHOW SERIES CARDINALITY"]


INFLUXQL_WORDS = [
    "SHOW",
    "DATABASES",
    "MEASUREMENTS",
    "TAG",
    "KEYS",
    "VALUES",
    "FIELD",
    "SERIES",
    "FROM",
    "WHERE",
    "WITH",
    "KEY",
    "IN",
    "LIMIT",
    "OFFSET",
    "ON",
    "CREATE",
    "DROP",
    "DATABASE",
    "RETENTION",
    "POLICIES",
    "DURATION",
    "REPLICATION",
    "SHARD",
    "NAME",
    "AND",
    "OR",
    "SELECT",
    "=",
    "=~",
    "!~",
    "!=",
    ",",
    ";",
    "(",
    ")",
    ".",
    "/",
    "'a'",
    '"q"',
    "cpu",
    "1h",
    "12",
    "$p",
    "/x/",
    "--c\n",
]


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        st.text(max_size=80),
        st.lists(st.sampled_from(INFLUXQL_WORDS), max_size=14).map(" ".join),
        st.binary(max_size=60).map(lambda b: b.decode("latin-1")),
    )
)
def test_parser_never_crashes_on_random_text(text):
    try:
        influxql.parse(text, {"p": "v"})
    except influxql.ParseError:
        pass


# -- the server -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("influxql") / "store", "--quiet")
    yield s
    assert s.stop() == 0


def q(
    server,
    query: str,
    method: str = "GET",
    db: str | None = None,
    body: bytes | None = None,
    headers: dict | None = None,
    **params,
) -> tuple[int, dict]:
    args = {"q": query, **({"db": db} if db else {}), **params}
    path = "/query?" + urlencode(args) if body is None else "/query"
    status, _h, data = server.request(method, path, body, headers)
    return status, json.loads(data)


def test_show_databases_shape_and_create_database_with_clauses(server):
    status, doc = q(server, 'CREATE DATABASE shape1 WITH DURATION 1d REPLICATION 1 NAME "rp"', "POST")
    assert status == 200
    assert doc["results"][0] == {"statement_id": 0}  # the duration is applied (tests/store/test_retention.py)
    _s, doc = q(server, "SHOW RETENTION POLICIES ON shape1")
    assert doc["results"][0]["series"][0]["values"] == [["rp", "24h0m0s", "1h0m0s", 1, True]]
    status, doc = q(server, "SHOW DATABASES")
    assert status == 200
    (res,) = doc["results"]
    assert res["statement_id"] == 0
    (series,) = res["series"]
    assert series["name"] == "databases" and series["columns"] == ["name"]
    assert ["shape1"] in series["values"] and all(isinstance(v[0], str) and len(v) == 1 for v in series["values"])
    # Idempotent, like InfluxDB; sent with GET it works and carries InfluxDB's deprecation warning.
    status, doc = q(server, "create database shape1")
    assert status == 200 and "error" not in doc["results"][0]
    assert "please use a POST request" in doc["results"][0]["messages"][0]["text"]


def test_measurements_field_keys_tag_keys_series_and_tag_values(server):
    body = (
        'cpu,host=web1,region=eu usage_user=12.5,procs=212i,ok=true,note="x" 1\n'
        "cpu,host=web2,region=us usage_user=55.0,procs=187i 2\n"
        "mem,host=web1 used=71.2 3\n"
    )
    assert server.write(body, bucket="meta1")[0] == 204
    status, doc = q(server, "SHOW MEASUREMENTS", db="meta1")
    assert doc == {
        "results": [
            {"statement_id": 0, "series": [{"name": "measurements", "columns": ["name"], "values": [["cpu"], ["mem"]]}]}
        ]
    }
    _s, doc = q(server, 'SHOW FIELD KEYS FROM "cpu"', db="meta1")
    assert doc["results"][0]["series"] == [
        {
            "name": "cpu",
            "columns": ["fieldKey", "fieldType"],
            "values": [["note", "string"], ["ok", "boolean"], ["procs", "integer"], ["usage_user", "float"]],
        }
    ]
    _s, doc = q(server, "SHOW TAG KEYS ON meta1")
    assert doc["results"][0]["series"] == [
        {"name": "cpu", "columns": ["tagKey"], "values": [["host"], ["region"]]},
        {"name": "mem", "columns": ["tagKey"], "values": [["host"]]},
    ]
    _s, doc = q(server, "SHOW SERIES WHERE region = 'eu' OR host = 'web1'", db="meta1")
    assert doc["results"][0]["series"] == [
        {"columns": ["key"], "values": [["cpu,host=web1,region=eu"], ["mem,host=web1"]]}
    ]
    _s, doc = q(server, 'SHOW TAG VALUES FROM cpu WITH KEY = "host" WHERE region =~ /u/', db="meta1")
    assert doc["results"][0]["series"] == [
        {"name": "cpu", "columns": ["key", "value"], "values": [["host", "web1"], ["host", "web2"]]}
    ]
    _s, doc = q(server, "SHOW MEASUREMENTS WITH MEASUREMENT =~ /^m/ LIMIT 5", db="meta1")
    assert doc["results"][0]["series"][0]["values"] == [["mem"]]
    _s, doc = q(server, "SHOW MEASUREMENTS WHERE region = 'us'", db="meta1")
    assert doc["results"][0]["series"][0]["values"] == [["cpu"]]
    _s, doc = q(server, "SHOW RETENTION POLICIES ON meta1")
    assert doc["results"][0]["series"] == [
        {
            "columns": ["name", "duration", "shardGroupDuration", "replicaN", "default"],
            "values": [["autogen", "0s", "168h0m0s", 1, True]],
        }
    ]
    # Nothing to list is a result without series, as InfluxDB answers.
    _s, doc = q(server, "SHOW MEASUREMENTS WITH MEASUREMENT = nothing", db="meta1")
    assert doc == {"results": [{"statement_id": 0}]}


def test_several_statements_post_form_body_chunked_and_errors(server):
    assert server.write("m v=1 1\n", bucket="multi1")[0] == 204
    form = urlencode({"q": "SHOW MEASUREMENTS; SHOW TAG KEYS FROM nope; SHOW DATABASES", "db": "multi1"}).encode()
    status, doc = q(server, "", "POST", body=form, headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 200
    r0, r1, r2 = doc["results"]
    assert r0["series"][0]["values"] == [["m"]] and r1 == {"statement_id": 1}
    assert r2["series"][0]["name"] == "databases"
    # A failing statement stops the rest, as in InfluxDB; the error is InfluxQL-shaped with status 200.
    status, doc = q(server, "SHOW MEASUREMENTS ON nosuchdb; SHOW DATABASES")
    assert status == 200 and doc["results"] == [
        {"statement_id": 0, "error": "database not found: nosuchdb"},
        {"statement_id": 1, "error": "not executed"},
    ]
    status, doc = q(server, "SHOW FIELD KEYS")
    assert doc["results"][0]["error"] == "database name required"
    status, doc = q(server, "SELECT * FROM m", db="multi1")
    assert status == 200 and doc["results"][0]["series"][0]["values"] == [["1970-01-01T00:00:00.000000001Z", 1.0]]
    status, doc = q(server, "DROP MEASUREMENT m", db="multi1")
    assert status == 200 and "POST /api/query" in doc["results"][0]["error"]
    # Parse errors: 400 and nothing runs.
    status, doc = q(server, "CREATE DATABASE never1; SHOW BOGUS STUFF (")
    assert status == 400 and doc["error"].startswith("error parsing query: ")
    assert "never1" not in json.dumps(q(server, "SHOW DATABASES")[1])
    status, _h, data = server.request("GET", "/query")
    assert status == 400 and json.loads(data) == {"error": 'missing required parameter "q"'}
    assert q(server, "SHOW DATABASES", epoch="ms")[0] == 200
    assert q(server, "SHOW DATABASES", epoch="fortnight")[0] == 400
    status, _h, data = server.request(
        "GET", "/query?" + urlencode({"q": "SHOW MEASUREMENTS; SHOW DATABASES", "db": "multi1", "chunked": "true"})
    )
    chunks = [json.loads(line) for line in data.decode().splitlines()]
    assert [c["results"][0]["statement_id"] for c in chunks] == [0, 1]


def test_influxdb_1x_python_client(server):
    from influxdb import InfluxDBClient
    from influxdb.exceptions import InfluxDBClientError

    c = InfluxDBClient("127.0.0.1", server.port, database="py1x", timeout=30)
    assert c.ping() == "tracehouse"
    c.create_database("py1x")
    assert {"name": "py1x"} in c.get_list_database()
    points = [
        {
            "measurement": "cpu",
            "tags": {"host": f"h{i % 3}", "region": "eu"},
            "time": 1_600_000_000 + i,
            "fields": {"usage": i * 0.5, "n": i},
        }
        for i in range(30)
    ]
    assert c.write_points(points, time_precision="s")
    assert c.get_list_measurements() == [{"name": "cpu"}]
    assert list(c.query("SHOW FIELD KEYS").get_points()) == [
        {"fieldKey": "n", "fieldType": "integer"},
        {"fieldKey": "usage", "fieldType": "float"},
    ]
    assert [p["tagKey"] for p in c.query('SHOW TAG KEYS FROM "cpu"').get_points()] == ["host", "region"]
    assert c.get_list_series(measurement="cpu", tags={"host": "h1"}) == ["cpu,host=h1,region=eu"]
    assert c.get_list_retention_policies() == [
        {"name": "autogen", "duration": "0s", "shardGroupDuration": "168h0m0s", "replicaN": 1, "default": True}
    ]
    assert server.sql('SELECT count(*), sum(n) FROM "py1x".cpu') == [[30, sum(range(30))]]
    rows = list(c.query("SELECT mean(usage), max(n) FROM cpu GROUP BY host").get_points(tags={"host": "h1"}))
    assert rows == [{"time": "1970-01-01T00:00:00Z", "mean": sum(i * 0.5 for i in range(1, 30, 3)) / 10, "max": 28}]
    with pytest.raises(InfluxDBClientError, match="undefined function"):
        c.query("SELECT nosuch(n) FROM cpu")
    c.drop_database("py1x")
    assert {"name": "py1x"} not in c.get_list_database()
    c.close()


def test_influxdb_2x_python_client_sync_and_batching(server):
    from influxdb_client import InfluxDBClient, Point, WriteOptions
    from influxdb_client.client.write_api import SYNCHRONOUS

    with InfluxDBClient(url=f"http://127.0.0.1:{server.port}", token="unused", org="org") as c:
        w = c.write_api(write_options=SYNCHRONOUS)
        w.write(
            bucket="py2x",
            record=[Point("cpu").tag("host", "a").field("usage", 1.5).time(1, "s"), "cpu,host=b usage=2.5 2000000000"],
        )
        with c.write_api(write_options=WriteOptions(batch_size=100, flush_interval=200)) as bw:
            for i in range(1000):
                bw.write(bucket="py2x", record=Point("mem").tag("host", f"h{i % 7}").field("used", i).time(10 + i, "s"))
    assert server.sql('SELECT count(*) FROM "py2x".cpu') == [[2]]
    assert server.sql('SELECT count(*), count(DISTINCT producer), sum(used) FROM "py2x".mem') == [[1000, 7, 499500]]
    _s, doc = q(server, "SHOW FIELD KEYS", db="py2x")
    assert doc["results"][0]["series"] == [
        {"name": "cpu", "columns": ["fieldKey", "fieldType"], "values": [["usage", "float"]]},
        {"name": "mem", "columns": ["fieldKey", "fieldType"], "values": [["used", "integer"]]},
    ]


# -- TSBS's loader, request by request ------------------------------------------------------

# TSBS cpu-only rows as its influx serializer writes them (integer fields with the `i` suffix).
TSBS_TAGS = (
    "region=eu-central-1,datacenter=eu-central-1a,rack=6,os=Ubuntu15.10,arch=x86,team=SF,service=19,"
    "service_version=1,service_environment=test"
)
TSBS_FIELDS = (
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


def tsbs_rows(hosts: int, readings: int) -> bytes:
    out = []
    for r in range(readings):
        for h in range(hosts):
            fields = ",".join(f"{f}={(h * 31 + r * 7 + i * 13) % 100}i" for i, f in enumerate(TSBS_FIELDS))
            out.append(f"cpu,hostname=host_{h},{TSBS_TAGS} {fields} {1451606400000000000 + r * 10_000_000_000}")
    return ("\n".join(out) + "\n").encode()


def raw(port: int, request: bytes) -> tuple[int, bytes]:
    """One request on its own connection, as Go's clients send it; (status, body)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        s.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            assert chunk, data
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(b":") for ln in head.split(b"\r\n")[1:])}
        n = int(headers.get(b"content-length", b"0"))
        while len(body) < n:
            chunk = s.recv(65536)
            assert chunk
            body += chunk
        return status, body[:n]
    finally:
        s.close()


def go_get(port: int, target: str, token: str | None = None) -> bytes:
    # net/http: Host, User-Agent, (Authorization), Accept-Encoding: gzip
    auth = f"Authorization: Token {token}\r\n" if token else ""
    return (
        f"GET {target} HTTP/1.1\r\nHost: localhost:{port}\r\nUser-Agent: Go-http-client/1.1\r\n{auth}"
        "Accept-Encoding: gzip\r\n\r\n"
    ).encode()


def go_post_empty(port: int, target: str, token: str | None = None) -> bytes:
    # http.NewRequest("POST", u, nil): Content-Length 0; the loader adds Content-Type only with a token
    extra = f"Content-Type: text/plain\r\nAuthorization: Token {token}\r\n" if token else ""
    return (
        f"POST {target} HTTP/1.1\r\nHost: localhost:{port}\r\nUser-Agent: Go-http-client/1.1\r\n"
        f"Content-Length: 0\r\n{extra}Accept-Encoding: gzip\r\n\r\n"
    ).encode()


def fasthttp_write(port: int, db: str, body: bytes, token: str | None = None) -> bytes:
    # HTTPWriter: POST /write?consistency=all&db=..., text/plain, gzip, fasthttp's User-Agent (Client.Name)
    auth = f"Authorization: Token {token}\r\n" if token else ""
    return (
        f"POST /write?consistency=all&db={quote(db)} HTTP/1.1\r\nHost: localhost:{port}\r\n"
        f"Content-Type: text/plain\r\nUser-Agent: tsbs_load_influx\r\nContent-Encoding: gzip\r\n{auth}"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def tsbs_list_databases(body: bytes) -> list[str]:
    """creator.go listDatabases: json.Unmarshal into Results[].Series[].Values [][]string, then
    Results[0].Series[0].Values (a missing series panics: index out of range)."""
    listing = json.loads(body)
    assert isinstance(listing, dict)
    results = listing.get("results") or []
    names = []
    if results:
        series = results[0].get("series") or []
        assert series, "tsbs_load_influx would panic: index out of range [0] with length 0 (Series)"
        for v in series[0].get("values") or []:
            assert isinstance(v, list) and all(isinstance(x, str) for x in v), "Values must unmarshal as [][]string"
            if v[0] != "_internal":
                names.append(v[0])
    return names


def tsbs_session(port: int, db: str, batches: list[bytes], token: str | None = None) -> None:
    """load.BenchmarkRunner with the influx target: DBExists, RemoveOldDB when it exists, CreateDB,
    then gzip'd batches, each of which must be answered 204 (anything else is fatal)."""
    status, body = raw(port, go_get(port, "/query?q=show%20databases", token))
    exists = db in tsbs_list_databases(body)
    if exists:
        status, _ = raw(port, go_post_empty(port, f"/query?q=drop+database+{db}", token))
        assert status == 200, "RemoveOldDB: drop db returned non-200 code"
    create = "/query?" + urlencode({"consistency": "all", "q": f"CREATE DATABASE {db} WITH REPLICATION 1"})
    status, _ = raw(port, go_get(port, create, token))
    assert status == 200, "CreateDB: bad db create"
    for b in batches:
        status, body = raw(port, fasthttp_write(port, db, gzip.compress(b), token))
        assert status == 204, f"Invalid write response (status {status}): {body!r}"


def test_tsbs_load_influx_captured_session(tmp_path):
    # A fresh server (no database at all: SHOW DATABASES must still have its series) and a token.
    s = Server(tmp_path / "store", "--token", "tsbs-token", "--quiet")
    try:
        rows = tsbs_rows(hosts=10, readings=30)
        lines = rows.splitlines(keepends=True)
        batches = [b"".join(lines[i : i + 100]) for i in range(0, len(lines), 100)]
        tsbs_session(s.port, "benchmark", batches, token="tsbs-token")
        auth = {"Authorization": "Token tsbs-token"}
        assert s.sql('SELECT count(*), count(DISTINCT producer) FROM "benchmark".cpu', auth) == [[300, 10]]
        # A second run finds the database, drops it (the default --do-create-db) and loads again.
        tsbs_session(s.port, "benchmark", batches[:1], token="tsbs-token")
        assert s.sql('SELECT count(*) FROM "benchmark".cpu', auth) == [[100]]
        status, _ = raw(s.port, go_get(s.port, "/query?q=show%20databases"))  # no token
        assert status == 401
    finally:
        assert s.stop() == 0


def test_drop_database_is_for_influx_made_databases_and_needs_the_token(tmp_path):
    import tracehouse
    from tracehouse import Column, EventType

    store = tmp_path / "store"
    with tracehouse.open(store) as st_:
        st_.create_trace(
            "imported", "strace", event_types=[EventType("ev", "instant", (Column("x", "int64", "", "x"),))]
        )
    s = Server(store, "--token", "t0k", "--quiet")
    try:
        auth = {"Authorization": "Token t0k"}
        status, _h, _d = s.request("POST", "/query?" + urlencode({"q": "DROP DATABASE imported"}))
        assert status == 401
        assert s.write("m v=1 1\n", bucket="live1", headers=auth)[0] == 204
        st2, doc = q(s, "DROP DATABASE imported; DROP DATABASE live1", "POST", u="admin", p="t0k")
        assert st2 == 200
        assert "tracehouse rm imported" in doc["results"][0]["error"]
        assert doc["results"][1] == {"statement_id": 1, "error": "not executed"}
        st2, doc = q(s, "DROP DATABASE live1; DROP DATABASE never_existed", "POST", headers=auth)
        assert doc["results"] == [{"statement_id": 0}, {"statement_id": 1}]
        names = [v[0] for v in q(s, "SHOW DATABASES", headers=auth)[1]["results"][0]["series"][0]["values"]]
        assert names == ["imported"]
        # Writing again after the drop makes a new, empty database of that name.
        assert s.write("m v=2 2\n", bucket="live1", headers=auth)[0] == 204
        assert s.sql('SELECT v FROM "live1".m', auth) == [[2.0]]
    finally:
        assert s.stop() == 0
    assert "DROP DATABASE live1" in s.log.read_text()


def test_identifier_characters_round_trip(server):
    name = "db_" + "".join(c for c in string.ascii_letters[:5])
    status, doc = q(server, f'CREATE DATABASE "{name}"', "POST")
    assert status == 200 and "error" not in doc["results"][0]
    status, doc = q(server, 'CREATE DATABASE "bad/name"', "POST")
    assert status == 200 and doc["results"][0]["error"].startswith("invalid name")
