"""`tracehouse bench all`: the QoS read cases return the seed's row counts, the points follow
the seed's equations, and the quick run (every experiment, every peer) produces its report."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from helpers import child_env
from tracehouse.bench import protocol, qos_reads, reads


def test_every_case_returns_the_seeds_row_count_on_the_full_data_set():
    import duckdb

    cols = ("customer_id", "ul_delay", "ul_dupl")
    data = qos_reads.dataset(columns=cols)
    assert data.num_rows == qos_reads.TOTAL_ROWS == 2_032_000
    con = duckdb.connect()
    con.register("qos1", data)
    got = {c.name: con.execute(f"SELECT count(*) FROM qos1 t WHERE {qos_reads._qualify(c.where, 'schema1')}").fetchone()[0]
           for c in qos_reads.CASES}
    assert got == {c.name: c.rows for c in qos_reads.CASES}
    assert len(qos_reads.CASES) == 4 + 4 + 16 + 5 + 7  # tables 5.1-5.5


def test_layouts_select_what_the_seed_fetched():
    q3 = next(c for c in qos_reads.CASES if c.name == "Q3.1")  # one table, query cache on
    assert qos_reads.sql(q3, "schema3") == "SELECT x.* FROM qos3_secondary x WHERE x.ul_dupl < 1"
    assert "SQL_CACHE" in qos_reads.sql(q3, "schema2", dialect="mariadb")
    q4 = next(c for c in qos_reads.CASES if c.name == "Q4.4")
    s3 = qos_reads.sql(q4, "schema3")
    assert "i.customer_id > 56" in s3 and "m.ul_delay < 100" in s3 and "qos3_secondary" in s3


def test_the_three_schemas_and_tracehouse_answer_alike(tmp_path):
    """Every layout's SQL over its tables (DuckDB) and tracehouse's over a real store give the
    ground truth's row counts on a small data set."""
    import duckdb

    import tracehouse

    data = qos_reads.dataset(0.01)
    expect = reads.expected_rows(data)
    con = duckdb.connect()
    for layout in ("schema1", "schema2", "schema3"):
        for stmt in qos_reads.ddl(layout, data, "duckdb"):
            con.execute(stmt)
        for name, t in qos_reads.schema_tables(data, layout).items():
            con.register("_t", t)
            con.execute(f"INSERT INTO {name} SELECT * FROM _t")
            con.unregister("_t")
    with tracehouse.open(tmp_path / "store", fsync="off") as store:
        qos_reads.tracehouse_load(store, data)
        for case in qos_reads.CASES:
            for layout in ("schema1", "schema2", "schema3"):
                assert con.sql(qos_reads.sql(case, layout)).to_arrow_table().num_rows == expect[case.name], (
                    case, layout)
            assert store.sql(qos_reads.sql(case, "tracehouse")).num_rows == expect[case.name], case


def test_protocol_needs_five_runs_and_says_when_the_budget_stopped_it():
    xs = iter([10.0, 10.0, 10.0, 10.0, 10.0])
    m = protocol.repeat(lambda: next(xs))
    assert m["runs"] == 5 and m["converged"] and m["stopped"] == "se"
    noisy = iter([1.0, 9.0] * 50)
    m = protocol.repeat(lambda: next(noisy), max_runs=8)
    assert m["runs"] == 8 and not m["converged"] and m["stopped"] == "max_runs" and protocol.mark(m) == "*"
    m = protocol.repeat(lambda: 1.0, budget_s=0.0)  # one run, then the budget is spent
    assert m["runs"] == 1 and not m["converged"] and m["stopped"] == "budget"


def test_points_follow_equations_6_to_10():
    # Two systems, one query with two cases: the faster gets 10 per case (eq. 7), the slower
    # M = t/max*10 mirrored: max(M) + min(M) - M.
    cells = [{"system": "a", "layout": "schema1", "case": "Q1.1", "clients": 1, "mean": 1.0},
             {"system": "b", "layout": "schema2", "case": "Q1.1", "clients": 1, "mean": 2.0},
             {"system": "a", "layout": "schema1", "case": "Q1.2", "clients": 1, "mean": 4.0},
             {"system": "b", "layout": "schema2", "case": "Q1.2", "clients": 1, "mean": 4.0}]
    write = {"cells": [{"system": "postgres-copy", "rows_per_s": 50.0}, {"system": "mariadb", "rows_per_s": 100.0}]}
    p = reads.points({"cells": cells}, write)
    assert p["a schema 1"]["queries"][1] == pytest.approx((10 + 10) / 2)
    assert p["b schema 2"]["queries"][1] == pytest.approx((5 + 10) / 2)  # case 1: M = 5, 10 -> x = 10 + 5 - 10
    assert p["a schema 1"]["write"] is None  # no write matrix cells for system "a"


@pytest.fixture
def private_dir():
    """A directory of this test's own, outside pytest's numbered tmp dirs: a pytest session
    started meanwhile (other work on the same machine) prunes those, and this test runs minutes."""
    d = Path(tempfile.mkdtemp(prefix="tracehouse-test-bench-all-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.bench_all
def test_bench_all_quick_produces_the_report_with_every_peer(private_dir):
    from tracehouse.bench import pages

    out = private_dir / "benchmarks" / "2099-01-01"  # kept beside a generated index, as under docs/
    out.parent.mkdir()
    (out.parent / "index.md").write_text(pages.INDEX_MARK + "\n")
    r = subprocess.run([sys.executable, "-m", "tracehouse.cli", "bench", "all", "--quick", "--out", str(out),
                        "--workdir", str(private_dir), "--json"], env=child_env(), capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-2000:]
    doc = json.loads((out / "results.json").read_text())
    assert not doc["errors"]
    ex = doc["experiments"]
    assert set(ex) >= {"tod_store", "write", "reads", "soctrace", "ingest", "import", "analyze"}
    if importlib.util.find_spec("tracehouse.bench.replay") is not None:  # a later bench joins through the hook
        assert "replay" in ex
    # every peer the set-up installs took part (none skipped)
    assert not ex["tod_store"]["skipped"] and not ex["write"]["skipped"] and not ex["reads"]["skipped"]
    assert not ex["soctrace"]["skipped"]
    assert {c["system"] for c in ex["tod_store"]["cells"]} == {"raw", "tracehouse", "sqlite", "duckdb", "postgres",
                                                               "mariadb"}
    assert {c["system"] for c in ex["reads"]["cells"]} == {"tracehouse", "duckdb", "postgres", "mariadb", "sqlite",
                                                           "questdb"}
    assert all(c["runs"] >= 1 and c["mean"] > 0 for c in ex["reads"]["cells"])
    text = (out / "report.md").read_text()
    for heading in ("## Summary: tracehouse / best peer", "## 1. TOD event store", "## 2a. QoS write matrix",
                    "## 2b. QoS reads", "### Points", "## 3. SoC-Trace", "## 4a.", "## 4b.", "## 4c.",
                    "Figures where the protocol's criterion was not met"):
        assert heading in text, heading
    assert "883,903" in text.replace("883.9K", "883,903") or "883.9K" in text  # seed 001's raw figure beside ours
    assert "raw append" in text and "seed schema 2" in text
    for png in ("tod_store.png", "write.png", "reads_q1.png", "soctrace_storage.png"):
        assert (out / png).stat().st_size > 5_000, png
    index = (out.parent / "index.md").read_text()  # the docs' index of kept runs, refreshed by the run
    assert "[2099-01-01](2099-01-01/report.md)" in index and "| work | tracehouse | best peer |" in index
