"""Field types belong to a trace: two buckets may type one measurement differently;
the documented write (docs/http-api.md) then the load generator works over HTTP and TCP; refused TCP lines are logged
(rate-limited), counted by the server and in the load generator's report.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import time

import pytest

import tracehouse
from helpers import child_env
from helpers.paths import ROOT
from helpers.server import Server
from tracehouse import Column, EventType
from tracehouse.errors import BadInput

HTTP_API = ROOT / "docs" / "http-api.md"


def documented_telegraf_write() -> tuple[str, str]:
    """The path and body of the documented telegraf-style curl write, as written there."""
    text = HTTP_API.read_text()
    m = re.search(r"curl -i -XPOST 'http://127\.0\.0\.1:8086(/api/v2/write\?[^']*)' --data-binary '([^']*)'", text)
    assert m, "docs/http-api.md lost its curl write"
    return m.group(1), m.group(2)


def load(server: Server, *args: str) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "tracehouse.cli",
        "load",
        *args,
        "--url",
        f"http://127.0.0.1:{server.port}",
        "--tcp-port",
        str(server.tcp_port),
        "--duration",
        "1",
        "--json",
    ]
    r = subprocess.run(cmd, env=child_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def wait_rows(server: Server, sql: str, n: int, headers: dict | None = None, timeout: float = 10) -> int:
    """At most once, the rows may still be on their way in when the sender is done: wait for `n`."""
    deadline = time.monotonic() + timeout
    got = -1
    while time.monotonic() < deadline:
        got = server.sql(sql, headers)[0][0]
        if got >= n:
            break
        time.sleep(0.05)
    return got


def test_documented_write_then_load_cpu_over_http_and_tcp(tmp_path):
    """The documented sequence: the telegraf curl (`cpu` with float usage_user into bucket `telegraf`),
    then `tracehouse load cpu` (TSBS `cpu`, integer fields). Before types belonged to a trace,
    HTTP answered 400 to every batch and TCP dropped 100 % of the rows while reporting 0 errors."""
    s = Server(tmp_path / "store")
    try:
        path, body = documented_telegraf_write()
        status, _h, data = s.request("POST", path, body.encode())
        assert status == 204, data
        rep = load(s, "cpu", "--hosts", "4", "--rows-per-batch", "50", "--protocol", "http")
        assert rep["errors"] == 0, rep["error_samples"]
        assert rep["rows_acked"] == rep["rows_sent"] > 0
        assert s.sql('SELECT count(*) FROM "cpu".cpu') == [[rep["rows_acked"]]]
        rep = load(s, "cpu", "--hosts", "4", "--rows-per-batch", "50", "--protocol", "tcp", "--bucket", "cputcp")
        assert rep["errors"] == 0, rep["error_samples"]
        assert rep["server_tcp_lines_refused"] == 0 and rep["server_tcp_rows"] == rep["rows_sent"] > 0
        assert wait_rows(s, 'SELECT count(*) FROM "cputcp".cpu', rep["rows_sent"]) == rep["rows_sent"]
        # The telegraf bucket keeps its own typing of `cpu`; each bucket answers with its types.
        assert s.sql('SELECT usage_user, procs FROM "telegraf".cpu ORDER BY usage_user') == [[12.5, 212], [55.0, 187]]
        types = dict(s.sql("SELECT trace, params FROM th.event_types WHERE name = 'cpu'"))
        assert json.loads(types["telegraf"])[0] == {
            "name": "usage_user",
            "type": "float64",
            "unit": "",
            "doc": "line-protocol field",
        }
        assert json.loads(types["cpu"])[0]["type"] == "int64"
    finally:
        assert s.stop() == 0


def test_two_buckets_type_one_measurement_differently_across_a_restart(tmp_path):
    store = tmp_path / "store"
    s = Server(store)
    try:
        assert s.write("cpu,host=a usage=1.5 1\n", bucket="b1")[0] == 204
        assert s.write("cpu,host=a usage=7i 1\n", bucket="b2")[0] == 204
        assert s.write('cpu,host=a usage="busy" 1\n', bucket="b3")[0] == 204
        st, doc = s.write("cpu,host=a usage=2i 2\n", bucket="b1")  # within one bucket a type still holds
        assert st == 400 and "type conflict" in doc["errors"][0]["message"]
    finally:
        assert s.stop() == 0
    s = Server(store)  # the decoder's types come back per trace from the catalog
    try:
        assert s.write("cpu,host=b usage=8i 2\n", bucket="b2")[0] == 204
        assert s.write("cpu,host=b usage=2.5 2\n", bucket="b1")[0] == 204
        assert s.sql('SELECT sum(usage) FROM "b1".cpu') == [[4.0]]
        assert s.sql('SELECT sum(usage) FROM "b2".cpu') == [[15]]
        assert s.sql('SELECT usage FROM "b3".cpu') == [["busy"]]
    finally:
        assert s.stop() == 0
    with tracehouse.open(store, readonly=True) as ro:
        assert {t: ro.event_types(t)["cpu"].params[0].type for t in ("b1", "b2", "b3")} == {
            "b1": "float64",
            "b2": "int64",
            "b3": "string",
        }


def test_store_traces_that_own_their_types_and_a_store_made_before_them(tmp_path):
    ev = EventType("ev", "instant", (Column("x", "int64", "", "x"),))
    with tracehouse.open(tmp_path / "s") as s:
        s.create_trace("shared1", "fmt", event_types=[ev])
        s.create_trace("shared2", "fmt")
        s.create_trace("own", "fmt", own_types=True)
        assert set(s.event_types("shared2")) == {"ev"} and s.event_types("own") == {}
        s.add_event_type("own", EventType("ev", "instant", (Column("x", "string", "", "x"),)))
        assert s.event_types("own")["ev"].params[0].type == "string"
        assert s.event_types("shared1")["ev"].params[0].type == "int64"  # the format's type is untouched
        s.add_event_type("shared1", EventType("ev", "instant", (Column("y", "bool", "", "y"),)))
        assert [p.name for p in s.event_types("own")["ev"].params] == ["x"]  # format widening stays out
        rows = s.sql("SELECT format, name, trace FROM th.event_types ORDER BY trace NULLS FIRST").to_pylist()
        assert rows == [{"format": "fmt", "name": "ev", "trace": None}, {"format": "fmt", "name": "ev", "trace": "own"}]
        s.rm("own")
        assert s.sql("SELECT count(*) FROM th.event_types").column(0)[0].as_py() == 1
    # A catalog as earlier versions wrote it: no own_types column, no trace_event_types table,
    # no key of an event type.
    db = sqlite3.connect(tmp_path / "s" / "catalog.sqlite")
    db.executescript(
        "DROP TABLE trace_event_types; ALTER TABLE traces DROP COLUMN own_types; ALTER TABLE event_types DROP COLUMN key;"
    )
    db.close()
    with tracehouse.open(tmp_path / "s", readonly=True) as ro:  # read-only: cannot migrate, still reads
        assert [t.name for t in ro.traces()] == ["shared1", "shared2"]
        assert ro.sql("SELECT count(*) FROM th.event_types").column(0)[0].as_py() == 1
        assert ro.event_types("shared1")["ev"].key == ""
    with tracehouse.open(tmp_path / "s") as s:  # the first writable open adds what is missing
        s.create_trace("own2", "fmt", own_types=True)
        assert s.event_types("own2") == {} and set(s.event_types("shared2")) == {"ev"}
        s.add_event_type(
            "own2", EventType("cpu_load", "instant", (Column("v", "float64", "", "", key="v.1"),), key="cpu.load")
        )
    with tracehouse.open(tmp_path / "s", readonly=True) as ro:
        et = ro.event_types("own2")["cpu_load"]
        assert (et.key, et.params[0].key) == ("cpu.load", "v.1")


def test_refused_tcp_lines_are_logged_rate_limited_and_counted_in_the_load_report(tmp_path):
    s = Server(tmp_path / "store")
    try:
        # `cpu` of bucket `clash` is typed float by a first write: TSBS's integer rows are all refused.
        assert s.write("cpu,hostname=x usage_user=1.5 1\n", bucket="clash")[0] == 204
        rep = load(s, "cpu", "--hosts", "3", "--rows-per-batch", "20", "--protocol", "tcp", "--bucket", "clash")
        assert rep["rows_sent"] > 0
        assert rep["server_tcp_lines_refused"] == rep["rows_sent"] and rep["server_tcp_rows"] == 0
        assert rep["errors"] == rep["rows_sent"]  # at most once, yet counted
        assert "server refused" in rep["error_samples"][0]
        health = json.loads(s.request("GET", "/health")[2])
        assert health["tcp_lines_refused"] == rep["rows_sent"]
        warnings = [ln for ln in s.log.read_text().splitlines() if "TCP line protocol to clash" in ln]
        assert len(warnings) == 1, warnings  # many batches in one second: one warning (10 s apart)
        assert "lines refused" in warnings[0] and "type conflict" in warnings[0]
        text = subprocess.run(
            [
                sys.executable,
                "-m",
                "tracehouse.cli",
                "load",
                "cpu",
                "--hosts",
                "1",
                "--rows-per-batch",
                "5",
                "--protocol",
                "tcp",
                "--bucket",
                "clash",
                "--duration",
                "0.3",
                "--url",
                f"http://127.0.0.1:{s.port}",
                "--tcp-port",
                str(s.tcp_port),
            ],
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        assert re.search(r"errors\s+[1-9]", text) and "lines refused during the run" in text
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("acks", [False, True])
def test_load_generator_tcp_names_its_bucket_and_token(tmp_path, acks):
    s = Server(tmp_path / "store", "--token", "tk", "--quiet")
    try:
        proto = "tcp-acks" if acks else "tcp"
        rep = load(
            s,
            "cpu",
            "--hosts",
            "2",
            "--rows-per-batch",
            "10",
            "--protocol",
            proto,
            "--bucket",
            "named",
            "--token",
            "tk",
        )
        assert rep["errors"] == 0 and rep["rows_sent"] > 0
        got = wait_rows(s, 'SELECT count(*) FROM "named".cpu', rep["rows_sent"], {"Authorization": "Token tk"})
        assert got == rep["rows_sent"]
    finally:
        assert s.stop() == 0


def test_parameters_that_differ_only_in_case_are_refused_whole(tmp_path):
    # A view of `a_b` and `A_B` read `a_b`'s values under both names (DuckDB binds Parquet
    # columns ignoring case): refused, as a new type and as a widening, and nothing is stored.
    both = EventType("ev", "instant", (Column("a_b", "int64", "", ""), Column("A_B", "int64", "", "")))
    with tracehouse.open(tmp_path / "s") as s:
        with pytest.raises(BadInput, match="'A_B' of ev .*differs only in case from 'a_b'"):
            s.create_trace("t", "fmt", event_types=[both])
        assert s.traces() == []
        s.create_trace("t", "fmt", own_types=True, event_types=[EventType("ev", "instant", both.params[:1])])
        with pytest.raises(BadInput, match="differs only in case"):
            s.add_event_type("t", EventType("ev", "instant", (Column("A_b", "float64", "", ""),)))
        assert [p.name for p in s.event_types("t")["ev"].params] == ["a_b"]


def test_a_csv_header_of_names_sql_cannot_tell_apart_is_refused_naming_the_file(tmp_path, capsys):
    from tracehouse.cli import main

    csv = tmp_path / "names.csv"
    csv.write_text("ts,a_b,A_B\n1,20,30\n")
    assert main(["--store", str(tmp_path / "s"), "import", "csv", str(csv), "--name", "c"]) == 2
    assert f"{csv}: column 'A_B'" in capsys.readouterr().err
