"""Several stores queried as one by DuckDB (without Spark), the store list file,
trace-name collisions, and the CLI's `query --store A --store B`."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

import tracehouse
from tracehouse import Column, EventType
from tracehouse.cli import main
from tracehouse.errors import BadInput, NotFound
from tracehouse.store.engines import load_store_list, open_engine, parse_store

ET = EventType("m", "instant", (Column("v", "int64", "", ""),))


def _store(path, traces: dict[str, int]) -> None:
    with tracehouse.open(path, fsync="off") as s:
        for name, n in traces.items():
            s.create_trace(
                name,
                "f",
                event_types=[ET],
                producers=[{"id": 0, "parent": None, "kind": "host", "name": f"{path.name}-{name}", "attrs": {}}],
            )
            s.append(
                name,
                "m",
                pa.table(
                    {
                        "ts": pa.array(range(n), pa.int64()),
                        "producer": pa.array([0] * n, pa.int32()),
                        "v": pa.array(range(n), pa.int64()),
                    }
                ),
            )
            s.flush(name)


@pytest.fixture
def stores(tmp_path):
    _store(tmp_path / "a", {"run": 10, "Solo-A": 3})
    _store(tmp_path / "b", {"RUN": 20, "solo-b": 4})  # "RUN" collides with "run" (SQL ignores case)
    return tmp_path


def test_several_stores_one_duckdb(stores):
    with open_engine([f"x={stores / 'a'}", str(stores / "b")], "duckdb") as e:
        assert e.sql('SELECT count(*) AS n FROM "solo-a".events').column(0).to_pylist() == [3]
        assert e.sql('SELECT sum(v) AS s FROM "b/RUN".m').column(0).to_pylist() == [190]
        assert e.sql('SELECT count(*) AS n FROM "x/run".m').column(0).to_pylist() == [10]
        t = e.sql("SELECT store, name, event_count FROM th.traces ORDER BY store, name").to_pylist()
        assert t == [
            {"store": "b", "name": "b/RUN", "event_count": 20},
            {"store": "b", "name": "solo-b", "event_count": 4},
            {"store": "x", "name": "Solo-A", "event_count": 3},
            {"store": "x", "name": "x/run", "event_count": 10},
        ]
        p = e.sql("SELECT store, trace, name FROM th.producers ORDER BY store, trace").to_pylist()
        assert {"store": "b", "trace": "b/RUN", "name": "b-RUN"} in p
        with pytest.raises(BadInput, match='several stores.*"x/run" or "b/RUN"'):
            e.sql("SELECT * FROM run.m")
        with pytest.raises(NotFound, match="nosuch"):
            e.sql('SELECT * FROM "nosuch".m')
        assert e.trace("solo-b").event_count == 4 and list(e.event_types("b/RUN")) == ["m"]


def test_one_store_names_are_the_stores_own(stores):
    with open_engine(stores / "a", "duckdb") as e, tracehouse.open(stores / "a", readonly=True) as s:
        for q in ('SELECT * FROM "run".m ORDER BY ts', "SELECT * FROM th.traces", "SELECT * FROM th.producers"):
            assert e.sql(q).equals(s.sql(q))


def test_store_list_file(stores, tmp_path):
    f = tmp_path / "stores.toml"
    f.write_text('[[store]]\npath = "a"\nalias = "n1"\n[[store]]\npath = "b"\nurl = "s3a://bucket/b"\n')
    refs = load_store_list(f)
    assert [(r.alias, r.path) for r in refs] == [("n1", stores / "a"), ("b", stores / "b")]
    assert refs[1].file_url("traces/1/x.parquet") == "s3a://bucket/b/traces/1/x.parquet"
    assert refs[0].file_url("traces/1/x.parquet") == (stores / "a" / "traces/1/x.parquet").as_uri()
    f.write_text("[[store]]\nalias = 3\n")
    with pytest.raises(BadInput, match="stores.toml.*no path"):
        load_store_list(f)
    f.write_text("[[store]\n")
    with pytest.raises(BadInput, match="stores.toml"):
        load_store_list(f)
    assert parse_store("n=/x/y").alias == "n" and parse_store("/x/y").alias == "y"
    with pytest.raises(BadInput, match="two stores are named 'a'"):
        open_engine([stores / "a", f"a={stores / 'b'}"])


def test_cli_query_over_several_stores(stores, tmp_path, capsys):
    f = tmp_path / "list.toml"
    f.write_text('[[store]]\npath = "b"\n')
    assert (
        main(
            [
                "query",
                "SELECT name FROM th.traces ORDER BY name",
                "--json",
                "--store",
                f"n1={stores / 'a'}",
                "--store-list",
                str(f),
            ]
        )
        == 0
    )
    out = capsys.readouterr()
    assert [r["name"] for r in json.loads(out.out)] == ["Solo-A", "b/RUN", "n1/run", "solo-b"]
    assert "answered by duckdb" in out.err and "over 2 store(s)" in out.err
    assert main(["query", "SELECT * FROM run.m", "--store", str(stores / "a"), "--store", str(stores / "b")]) == 2
    assert '"a/run" or "b/RUN"' in capsys.readouterr().err
