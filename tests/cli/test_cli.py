"""The `tracehouse` command driven through its real entry point (`cli.main`)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from helpers.cli import run, run_json


def test_init_then_ls_is_empty(tmp_path, capsys):
    store = tmp_path / "s"
    assert run_json(capsys, store, "init")["store"] == str(store)
    assert (store / "catalog.sqlite").exists()
    assert run_json(capsys, store, "ls") == []


def test_reading_a_missing_store_says_so(tmp_path, capsys):
    code, _, err = run(capsys, tmp_path / "nothing", "ls")
    assert code == 2
    assert "tracehouse init" in err


def test_generate_info_query_agree(tmp_path, capsys):
    store = tmp_path / "s"
    gen = run_json(capsys, store, "generate", "tod", "--events", "30000", "--name", "t1")
    assert gen["events"] >= 30000
    info = run_json(capsys, store, "info", "t1")
    assert info["event_count"] == gen["events"]
    assert {e["name"] for e in info["event_types"]} == {"field_write", "var_write", "behavior_enter", "behavior_exit"}
    assert sum(e["events"] for e in info["event_types"]) == gen["events"]
    assert info["producers"] == 11  # the program and its 10 threads
    rows = run_json(capsys, store, "query", 'SELECT type, count(*) AS n FROM "t1".events GROUP BY type')
    by_type = {r["type"]: r["n"] for r in rows}
    assert by_type == {e["name"]: e["events"] for e in info["event_types"]}
    # every enter has its exit: the generator unwinds open calls at the end
    assert by_type["behavior_enter"] == by_type["behavior_exit"]
    code, out, _ = run(capsys, store, "query", 'SELECT count(*) AS n FROM "t1".field_write', "--format", "csv")
    assert code == 0
    assert out.splitlines() == ["n", str(by_type["field_write"])]


def test_search_by_name_format_metadata_and_size(tmp_path, capsys):
    store = tmp_path / "s"
    run_json(capsys, store, "generate", "tod", "--events", "5000", "--name", "run-a")
    run_json(capsys, store, "generate", "tod", "--events", "20000", "--name", "run-b", "--seed", "7")
    assert [t["name"] for t in run_json(capsys, store, "search", "run-*")] == ["run-a", "run-b"]
    assert [t["name"] for t in run_json(capsys, store, "search", "--meta", "seed=7")] == ["run-b"]
    assert [t["name"] for t in run_json(capsys, store, "search", "--min-events", "10000")] == ["run-b"]
    assert run_json(capsys, store, "search", "--format", "csv") == []
    code, _, err = run(capsys, store, "search", "--meta", "novalue")
    assert code == 2 and "KEY=GLOB" in err


def test_export_parquet_and_csv_round_trip_counts(tmp_path, capsys):
    store = tmp_path / "s"
    run_json(capsys, store, "generate", "tod", "--events", "10000", "--name", "t")
    info = run_json(capsys, store, "info", "t")
    counts = {e["name"]: e["events"] for e in info["event_types"]}
    res = run_json(capsys, store, "export", "t", "--out", str(tmp_path / "out"))
    files = {f["event_type"]: f["path"] for f in res["files"] if f["event_type"]}
    for name, path in files.items():
        table = pq.read_table(path)
        assert table.num_rows == counts[name]
        ts = table.column("ts").to_pylist()
        assert ts == sorted(ts)
    res = run_json(capsys, store, "export", "t", "--format", "csv", "--out", str(tmp_path / "csv"))
    fw = next(f["path"] for f in res["files"] if f["event_type"] == "field_write")
    assert len(Path(fw).read_text().splitlines()) == counts["field_write"] + 1


def test_import_parquet_of_our_own_export_needs_no_flags(tmp_path, capsys):
    """Regression: `import parquet` refused the files `export --format parquet` writes ("column 'seq'
    clashes with a common column name"). A file alone, or the exported directory, comes back as it was."""
    store = tmp_path / "s"
    run_json(capsys, store, "generate", "tod", "--events", "5000", "--name", "t")
    out = tmp_path / "out"
    run_json(capsys, store, "export", "t", "--out", str(out))
    one = run_json(capsys, store, "import", "parquet", str(out / "t" / "behavior_enter.parquet"), "--name", "enters")
    enters = {e["name"]: e["events"] for e in run_json(capsys, store, "info", "t")["event_types"]}["behavior_enter"]
    assert one["by_type"] == {"behavior_enter": enters} and one["rejected"] == 0
    whole = run_json(capsys, store, "import", "parquet", str(out / "t"), "--name", "back")
    assert whole["rejected"] == 0
    a, b = run_json(capsys, store, "info", "t"), run_json(capsys, store, "info", "back")
    assert b["format"] == a["format"] == "tod" and b["event_count"] == a["event_count"]
    kinds = lambda i: {e["name"]: (e["kind"], e["events"]) for e in i["event_types"]}  # noqa: E731
    assert kinds(b) == kinds(a)
    for et in a["event_types"]:
        q = 'SELECT * FROM "{}".{} ORDER BY ALL'
        assert run_json(capsys, store, "query", q.format("t", et["name"])) == run_json(
            capsys, store, "query", q.format("back", et["name"])
        ), et["name"]
    q = "SELECT id, parent, kind, name, attrs FROM th.producers WHERE trace = '{}' ORDER BY id"
    assert run_json(capsys, store, "query", q.format("t")) == run_json(capsys, store, "query", q.format("back"))
    # A file alone keeps its kind, seq and the producers beside it.
    q = 'SELECT ts, producer, seq FROM "{}".behavior_enter ORDER BY ALL'
    assert run_json(capsys, store, "query", q.format("enters")) == run_json(capsys, store, "query", q.format("t"))
    assert {e["name"]: e["kind"] for e in run_json(capsys, store, "info", "enters")["event_types"] if e["events"]} == {
        "behavior_enter": "begin"
    }
    # A directory of foreign Parquet files is named, not half-imported.
    (tmp_path / "foreign").mkdir()
    pq.write_table(__import__("pyarrow").table({"ts": [1], "v": [2]}), tmp_path / "foreign" / "x.parquet")
    code, _, err = run(capsys, store, "import", "parquet", str(tmp_path / "foreign"), "--name", "f")
    assert code == 2 and "x.parquet was not written by `tracehouse export`" in err


def test_rm_removes_trace_views_and_files(tmp_path, capsys):
    store = tmp_path / "s"
    run_json(capsys, store, "generate", "tod", "--events", "5000", "--name", "gone")
    tid = run_json(capsys, store, "info", "gone")["id"]
    assert (store / "traces" / str(tid)).exists()
    run_json(capsys, store, "rm", "gone")
    assert run_json(capsys, store, "ls") == []
    assert not (store / "traces" / str(tid)).exists()
    code, _, err = run(capsys, store, "query", 'SELECT count(*) FROM "gone".events')
    assert code == 2 and "gone" in err


def test_unknown_trace_is_exit_2(tmp_path, capsys):
    store = tmp_path / "s"
    run_json(capsys, store, "init")
    code, _, err = run(capsys, store, "info", "nope")
    assert code == 2
    assert "no trace named 'nope'" in err


def test_demo_prints_summary_and_can_rerun(tmp_path, capsys):
    store = tmp_path / "s"
    first = run_json(capsys, store, "demo", "--events", "20000", "--no-serve")  # without: serves the UI until Ctrl-C
    assert first["ingest"]["events"] >= 20000
    by_type = {r["type"]: r["events"] for r in first["queries"]["events by type"]["rows"]}
    assert sum(by_type.values()) == first["ingest"]["events"]
    second = run_json(capsys, store, "demo", "--events", "20000", "--no-serve")
    assert second["ingest"]["events"] == first["ingest"]["events"]  # deterministic, and replaced not doubled
    assert second["examples"] == [dict(e, seconds=s["seconds"]) for e, s in zip(first["examples"], second["examples"])]
    names = {t["name"] for t in run_json(capsys, store, "ls")}
    assert names == {"demo-tod"} | {e["trace"] for e in first["examples"]}
    code, out, _ = run(capsys, store, "demo", "--events", "20000", "--no-serve")
    assert code == 0 and "most called methods" in out


# -- import --------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_import_csv_maps_types_producers_and_units(tmp_path, capsys):
    store = tmp_path / "s"
    src = write(
        tmp_path / "ev.csv", "time,who,kind,bytes,ok\n1.5,web,read,100,true\n2,db,write,7,false\n2.25,web,read,,true\n"
    )
    rep = run_json(
        capsys,
        store,
        "import",
        "csv",
        str(src),
        "--name",
        "ev",
        "--ts",
        "time",
        "--ts-unit",
        "s",
        "--producer",
        "who",
        "--type",
        "kind",
    )
    assert rep["events"] == 3 and rep["by_type"] == {"read": 2, "write": 1} and rep["rejected"] == 0
    rows = run_json(capsys, store, "query", 'SELECT ts, producer, seq, bytes, ok FROM "ev".read ORDER BY ts')
    assert [r["ts"] for r in rows] == [1_500_000_000, 2_250_000_000]
    assert [r["bytes"] for r in rows] == [100, None]
    assert [r["seq"] for r in rows] == [0, 1]
    prods = run_json(capsys, store, "query", "SELECT id, name FROM th.producers WHERE trace = 'ev' ORDER BY id")
    names = {r["id"]: r["name"] for r in prods}
    assert sorted(names.values()) == ["db", "web"]
    web = [k for k, v in names.items() if v == "web"][0]
    assert {r["producer"] for r in rows} == {web}


def test_import_csv_reports_rejected_lines_with_numbers(tmp_path, capsys):
    store = tmp_path / "s"
    src = write(tmp_path / "bad.csv", "ts,producer,v\n1,a,1\n2,a\n3,a,3\n,a,4\n5,a,5,9\n6,a,6\n")
    rep = run_json(capsys, store, "import", "csv", str(src), "--name", "b")
    assert rep["events"] == 3  # lines 2, 4 and 7
    lines = sorted(r["line"] for r in rep["first_rejected"])
    assert lines == [3, 5, 6]
    assert rep["rejected"] == 3
    rows = run_json(capsys, store, "query", 'SELECT ts, v FROM "b".event ORDER BY ts')
    assert [(r["ts"], r["v"]) for r in rows] == [(1, 1), (3, 3), (6, 6)]


def test_import_csv_strict_stops_at_first_bad_line_and_registers_nothing(tmp_path, capsys):
    store = tmp_path / "s"
    run_json(capsys, store, "init")
    src = write(tmp_path / "bad.csv", "ts,producer,v\n1,a,1\n2,a,2\n3,a\n4,a,4\n")
    code, _, err = run(capsys, store, "import", "csv", str(src), "--name", "b", "--strict")
    assert code == 2
    assert f"{src}:4" in err and "expected 3 fields, got 2" in err
    assert run_json(capsys, store, "ls") == []
    assert list((store / "traces").iterdir()) == []


def test_import_csv_wrong_type_in_a_later_block_names_line_and_column(tmp_path, capsys, monkeypatch):
    from tracehouse.formats.csv import importer as csv_importer

    monkeypatch.setattr(csv_importer, "BLOCK", 256)  # types are inferred from the first block only
    store = tmp_path / "s"
    run_json(capsys, store, "init")
    body = "".join(f"{i},p,{i * 10}\n" for i in range(1, 60))
    src = write(tmp_path / "t.csv", "ts,producer,v\n" + body + "60,p,abc\n61,p,610\n")
    code, _, err = run(capsys, store, "import", "csv", str(src), "--name", "t", "--strict")
    assert code == 2
    assert f"{src}:61" in err and "'v'" in err and "'abc'" in err
    assert run_json(capsys, store, "ls") == []
    rep = run_json(capsys, store, "import", "csv", str(src), "--name", "t")
    assert rep["events"] == 60 and rep["rejected"] == 1 and rep["first_rejected"][0]["line"] == 61


def test_import_rejects_names_that_escape_the_store(tmp_path, capsys):
    store = tmp_path / "s"
    run_json(capsys, store, "init")
    src = write(tmp_path / "ok.csv", "ts,producer\n1,1\n")
    for bad in ("../x", "a/b", 'q"uote', "..", ".hidden", ""):
        code, _, err = run(capsys, store, "import", "csv", str(src), "--name", bad)
        assert code == 2, bad
        assert "invalid trace name" in err
    assert run_json(capsys, store, "ls") == []
    allowed = {"catalog.sqlite", "catalog.sqlite-shm", "catalog.sqlite-wal", "traces", "writer.lock"}
    assert {p.name for p in store.iterdir()} <= allowed
    assert list((store / "traces").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.csv", "s"]  # nothing written beside the store


def test_import_wrong_format_is_named(tmp_path, capsys):
    store = tmp_path / "s"
    src = write(tmp_path / "x.csv", "ts,producer\n1,1\n")
    code, _, err = run(capsys, store, "import", "parquet", str(src), "--name", "x")
    assert code == 2 and "this looks like csv, not parquet" in err


def test_import_parquet_with_timestamps_and_string_types(tmp_path, capsys):
    import datetime as dt

    import pyarrow as pa

    store = tmp_path / "s"
    t0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    table = pa.table(
        {
            "when": pa.array([t0, t0 + dt.timedelta(microseconds=5)], pa.timestamp("us", tz="UTC")),
            "host": ["a", "b"],
            "op": ["x", "x"],
            "value": [1.5, 2.5],
        }
    )
    pq.write_table(table, tmp_path / "m.parquet")
    rep = run_json(
        capsys,
        store,
        "import",
        "parquet",
        str(tmp_path / "m.parquet"),
        "--name",
        "m",
        "--ts",
        "when",
        "--producer",
        "host",
        "--type",
        "op",
    )
    assert rep["events"] == 2
    rows = run_json(capsys, store, "query", 'SELECT ts, value FROM "m".x ORDER BY ts')
    base = int(t0.timestamp()) * 10**9
    assert [r["ts"] for r in rows] == [base, base + 5000]
    assert [r["value"] for r in rows] == [1.5, 2.5]


def test_import_missing_file_and_missing_column(tmp_path, capsys):
    store = tmp_path / "s"
    code, _, err = run(capsys, store, "import", "csv", str(tmp_path / "none.csv"))
    assert code == 2 and "no such file" in err
    src = write(tmp_path / "nots.csv", "time,producer\n1,1\n")
    code, _, err = run(capsys, store, "import", "csv", str(src), "--name", "n")
    assert code == 2 and "no column 'ts'" in err
    assert run_json(capsys, store, "ls") == []


@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_query_formats(tmp_path, capsys, fmt):
    store = tmp_path / "s"
    run_json(capsys, store, "init")
    code, out, _ = run(capsys, store, "query", "SELECT 1 AS a, 'x' AS b", "--format", fmt)
    assert code == 0
    if fmt == "json":
        assert json.loads(out) == [{"a": 1, "b": "x"}]
    elif fmt == "csv":
        assert out.splitlines() == ["a,b", "1,x"]
    else:
        assert "a" in out and "x" in out


def test_bad_sql_is_exit_2(tmp_path, capsys):
    store = tmp_path / "s"
    run_json(capsys, store, "init")
    code, _, err = run(capsys, store, "query", "SELEC nonsense")
    assert code == 2 and "SQL error" in err


def test_query_json_is_strict_and_exact(tmp_path, capsys):
    store = tmp_path / "s"
    run(capsys, store, "init")
    code, out, _ = run(
        capsys,
        store,
        "query",
        "SELECT sum(x) AS s, 'nan'::DOUBLE AS a, 'ab'::BLOB AS b FROM (VALUES (9223372036854775807), (10)) t(x)",
        "--json",
    )
    assert code == 0

    def refuse(name):
        raise ValueError(name)

    # (the sum was printed as a string, NaN as a bare NaN, the blob as "b'ab'")
    assert json.loads(out, parse_constant=refuse) == [{"s": 9223372036854775817, "a": None, "b": "YWI="}]
