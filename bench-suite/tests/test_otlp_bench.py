"""`tracehouse bench otlp` at a small size (CI): both protocols run, every request is answered 2xx
and counted, the two carry the same rows into the store, and the report gives the ratio."""

from __future__ import annotations

import json

from tracehouse.cli import main
from tracehouse_bench import otlp


def test_the_line_protocol_peer_carries_the_same_rows_as_the_otlp_bodies(tmp_path):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    (pb,) = otlp.otlp_bodies(40, count=1)
    (lp,) = otlp.lp_bodies(40, count=1)
    spans = ExportTraceServiceRequest.FromString(pb).resource_spans[0].scope_spans[0].spans
    lines = lp.decode().splitlines()
    assert len(spans) == len(lines) == 40
    for s, line in zip(spans, lines):
        assert f'span_id="{s.span_id.hex()}"' in line and line.endswith(f" {s.start_time_unix_nano}")
        assert f"dur={s.end_time_unix_nano - s.start_time_unix_nano}i" in line


def test_bench_otlp_runs_and_reports_the_ratio(capsys):
    argv = ["bench", "otlp", "--seconds", "1", "--rounds", "1", "--spans", "100", "--agents", "2"]
    assert main([*argv, "--telemetrygen-procs", "1", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    tg = otlp.telemetrygen_path() is not None  # (make setup builds it; without Go the run is left out)
    assert [x["what"] for x in r["runs"]] == ["otlp", "lineproto"] + (["telemetrygen"] if tg else [])
    assert all(x["errors"] == 0 and x["rows_acked"] > 0 for x in r["runs"]), r["runs"]
    assert r["ratio"] == r["otlp_spans_per_s"] / r["lineproto_rows_per_s"]
    assert all(x["server_cpu_us_per_request"] > 0 and x["ack_p99_ms"] > 0 for x in r["runs"][:2])
    if tg:
        run = r["runs"][2]
        # what it stored is at most what it generated (its exporter drops what its queue cannot hold)
        assert 0 < run["rows_acked"] <= run["spans_generated"]
        assert r["telemetrygen"]["spans_per_s"] == run["rows_acked_per_s"]
    else:
        assert "not installed" in r["telemetrygen"]["skipped"]
