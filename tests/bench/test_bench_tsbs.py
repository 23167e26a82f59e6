"""`tracehouse bench tsbs` at a tiny size, where TSBS's programs are installed ($TSBS_BIN or PATH:
the Go module proxy does not serve TSBS, so set-up cannot build them) and Java runs QuestDB: every
query type is timed on tracehouse, QuestDB has a figure for each type but the five TSBS writes no
working QuestDB SQL for, and the table's verdicts, its ratios and the report's summary agree."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import child_env

NO_PEER = {"cpu-max-all-1", "cpu-max-all-8", "double-groupby-1", "double-groupby-5", "double-groupby-all"}


def _installed() -> bool:
    where = os.environ.get("TSBS_BIN")
    names = ("tsbs_generate_data", "tsbs_load_questdb", "tsbs_run_queries_influx", "tsbs_run_queries_questdb")
    found = all((where and (Path(where) / n).is_file()) or shutil.which(n) for n in names)
    return found and shutil.which("java") is not None


@pytest.mark.skipif(not _installed(), reason="TSBS's programs (or Java for QuestDB) are not installed")
def test_bench_tsbs_times_every_type_and_its_verdicts_agree_with_its_ratios(tmp_path):
    from tracehouse_bench import tsbs

    r = subprocess.run(
        [sys.executable, "-m", "tracehouse.cli", "bench", "tsbs", "--json", "--hosts", "8", "--hours", "13"]
        + ["--interval", "120", "--queries", "2", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        env=child_env(),
    )
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert list(res["types"]) == list(tsbs.QUERY_TYPES)
    assert res["rows"] == 8 * 13 * 3600 // 120
    table = {line.split()[0]: line for line in tsbs.render(res).splitlines()[4:]}
    summary = {what: v for what, v, _peer in tsbs.summary(res)}
    for qtype, cell in res["types"].items():
        t, q = cell["tracehouse"], cell["questdb"]
        assert 0 < t["median_ms"] <= t["p99_ms"] <= t["max_ms"], qtype
        if qtype in NO_PEER:
            assert "error" in q and "no peer" in table[qtype], (qtype, q)
            assert f"{qtype} median" not in summary
            continue
        assert "error" not in q and 0 < q["median_ms"] <= q["p99_ms"], (qtype, q)
        assert cell["median_ratio"] == pytest.approx(t["median_ms"] / q["median_ms"])
        met = cell["median_ratio"] <= 1 and cell["p99_ratio"] <= 1
        assert table[qtype].endswith("not met") != met, table[qtype]
        # the report's summary: QuestDB's time over tracehouse's (> 1: tracehouse faster)
        assert summary[f"{qtype} median"] == pytest.approx(1 / cell["median_ratio"])
        assert summary[f"{qtype} p99"] == pytest.approx(1 / cell["p99_ratio"])


def test_a_failed_run_keeps_the_servers_logs_and_says_where(tmp_path):
    from types import SimpleNamespace

    from tracehouse_bench import tsbs

    servers = []
    for name, text in (("tracehouse-durable", "native InfluxQL executor failed"), ("questdb-x", "qdb says")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "server.log").write_text(text)
        servers.append(SimpleNamespace(log=tmp_path / name / "server.log"))
    with pytest.raises(tsbs.TsbsFailed) as got:
        with tsbs._logs_kept_on_failure(tmp_path, *servers):
            raise RuntimeError("tsbs_run_queries_influx failed (1): panic: non-200")
    kept = tmp_path / "logs"
    assert str(kept) in str(got.value) and "panic: non-200" in str(got.value)
    assert (kept / "tracehouse-durable-server.log").read_text() == "native InfluxQL executor failed"
    assert (kept / "questdb-x-server.log").read_text() == "qdb says"
    with tsbs._logs_kept_on_failure(tmp_path / "ok", *servers):
        pass
    assert not (tmp_path / "ok").exists()
