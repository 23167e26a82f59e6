"""Seed 003's QoS data set (workload/qos.py): every case of tables 5.1-5.5 returns the seed's row
count, each layout's SQL selects what the seed fetched, and the seed's three schemas and
tracehouse's layout answer alike."""

from __future__ import annotations

from tracehouse.workload import qos


def test_every_case_returns_the_seeds_row_count_on_the_full_data_set():
    import duckdb

    cols = ("customer_id", "ul_delay", "ul_dupl")
    data = qos.dataset(columns=cols)
    assert data.num_rows == qos.TOTAL_ROWS == 2_032_000
    con = duckdb.connect()
    con.register("qos1", data)
    got = {
        c.name: con.execute(f"SELECT count(*) FROM qos1 t WHERE {qos._qualify(c.where, 'schema1')}").fetchone()[0]
        for c in qos.CASES
    }
    assert got == {c.name: c.rows for c in qos.CASES}
    assert len(qos.CASES) == 4 + 4 + 16 + 5 + 7  # tables 5.1-5.5


def test_layouts_select_what_the_seed_fetched():
    q3 = next(c for c in qos.CASES if c.name == "Q3.1")  # one table, query cache on
    assert qos.sql(q3, "schema3") == "SELECT x.* FROM qos3_secondary x WHERE x.ul_dupl < 1"
    assert "SQL_CACHE" in qos.sql(q3, "schema2", dialect="mariadb")
    q4 = next(c for c in qos.CASES if c.name == "Q4.4")
    s3 = qos.sql(q4, "schema3")
    assert "i.customer_id > 56" in s3 and "m.ul_delay < 100" in s3 and "qos3_secondary" in s3


def test_the_three_schemas_and_tracehouse_answer_alike(tmp_path):
    """Every layout's SQL over its tables (DuckDB) and tracehouse's over a real store give the
    ground truth's row counts on a small data set."""
    import duckdb

    import tracehouse

    data = qos.dataset(0.01)
    expect = qos.expected_rows(data)
    con = duckdb.connect()
    for layout in ("schema1", "schema2", "schema3"):
        for stmt in qos.ddl(layout, data, "duckdb"):
            con.execute(stmt)
        for name, t in qos.schema_tables(data, layout).items():
            con.register("_t", t)
            con.execute(f"INSERT INTO {name} SELECT * FROM _t")
            con.unregister("_t")
    with tracehouse.open(tmp_path / "store", fsync="off") as store:
        qos.tracehouse_load(store, data)
        for case in qos.CASES:
            for layout in ("schema1", "schema2", "schema3"):
                assert con.sql(qos.sql(case, layout)).to_arrow_table().num_rows == expect[case.name], (case, layout)
            assert store.sql(qos.sql(case, "tracehouse")).num_rows == expect[case.name], case
