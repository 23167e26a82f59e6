"""`tracehouse bench analyze` at toy size: every question answered by both systems, same answers."""

from __future__ import annotations

import json

from tracehouse.bench import analyze
from tracehouse.cli import command as cli


def test_bench_analyze_toy_run(tmp_path, capsys):
    r = analyze.run(20_000, workdir=str(tmp_path), queries=20, duck_queries=3)
    names = [q["question"] for q in r["questions"]]
    assert names == list(analyze.TARGETS)
    for q in r["questions"]:
        assert q["tracehouse"] > 0 and q["duckdb"] > 0 and q["speedup"] > 0, q
        assert q["met"] in (True, False)
    assert r["spans"] > 0 and r["build"]["index_bytes"] > 0
    assert not list(tmp_path.iterdir())  # the store is removed afterwards
    assert "DuckDB" in str(analyze.render(r).columns[2].header)
    code = cli.main(
        [
            "bench",
            "analyze",
            "--events",
            "5000",
            "--queries",
            "5",
            "--duck-queries",
            "2",
            "--workdir",
            str(tmp_path),
            "--json",
        ]
    )
    assert code == 0
    assert json.loads(capsys.readouterr().out)["trace"]["events"] >= 5000


def test_bench_analyze_refuses_when_the_disk_is_too_small(tmp_path, monkeypatch):
    import shutil

    import pytest

    monkeypatch.setattr(shutil, "disk_usage", lambda p: type("U", (), {"free": 1 << 20})())
    with pytest.raises(analyze.NotEnoughSpace):
        analyze.run(10_000_000, workdir=str(tmp_path))
