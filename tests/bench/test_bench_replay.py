"""`tracehouse bench replay` at toy size: every section measured, peers beside, the store removed."""

from __future__ import annotations

import json

from tracehouse.bench import replay as bench
from tracehouse.cli import command as cli


def test_bench_replay_toy_run(tmp_path, capsys):
    r = bench.run(
        iops=1000,
        seconds=0.2,
        threads=2,
        asap_ops=4000,
        asap_threads=2,
        cycles=3,
        repeat=1,
        seeds=1,
        workdir=str(tmp_path),
        progress=lambda m: None,
    )
    f = r["fidelity"]
    for label in ("tracehouse", "tracehouse --realtime", "ioreplay-style peer"):
        assert f[label]["ops"] == 200 + 2 * 2  # the preads, and each thread's open and close
        assert f[label]["lag_us"]["p50"] >= 0 and f[label]["length_ratio"] > 0.5
        assert 0 <= f[label]["on_time_share"] <= 1
    for t in (1, 2):
        a = r["asap"][f"threads_{t}"]
        assert a["ops"] == 4000 // 2 * t + 2 * t and a["raw_ops_per_s"] > 0 and a["ops_per_s"] > 0
    assert [s["system"] for s in r["synthetic"]] == [s[0] for s in bench.SYNTHETIC]
    assert all(set(s["mean_abs_error"]) == {"perfext", "usl", "mva"} for s in r["synthetic"])
    for rr in r["real"]:
        assert [x["copies"] for x in rr["runs"]] == [1, 2, 4, 8, 16]
        assert [h["concurrency"] for h in rr["holdout"]] == [8, 16]
    assert not list(tmp_path.iterdir())
    text = bench.render(r)
    assert "ioreplay-style peer" in text and "bare pread loop" in text and "held out 16 copies" in text
    assert (
        cli.main(
            [
                "bench",
                "replay",
                "--iops",
                "500",
                "--seconds",
                "0.1",
                "--threads",
                "1",
                "--asap-ops",
                "1000",
                "--asap-threads",
                "1",
                "--no-real",
                "--seeds",
                "1",
                "--workdir",
                str(tmp_path),
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert "real" not in out and out["fidelity"]["threads"] == 1
