"""The suite's server peers (servers/): one that cannot start here is skipped by the bench that asked
for it, with the reason, and the run goes on."""

from __future__ import annotations

from tracehouse.bench import concurrent_writes


def test_unavailable_peer_is_skipped_not_fatal(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEHOUSE_QUESTDB_JAR", str(tmp_path / "missing.jar"))
    monkeypatch.setenv("PATH", "/nonexistent")  # no java, no mvn
    res = concurrent_writes.run(
        systems=("questdb",), writers=(1,), batches=(10,), seconds=0.1, min_runs=1, max_runs=1, workdir=str(tmp_path)
    )
    assert "questdb" in res["skipped"] and res["cells"] == []
