"""`telemetrygen`, the OpenTelemetry Collector's load generator (its Go module, built by `make
setup` into the venv's bin), against `tracehouse serve`: every span, metric point and log record it
says it generated is stored once, with its resource as the producer tree and its attributes,
status, links, values and bodies. Skipped, saying why, where telemetrygen is not installed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.server import Server

TOKEN = "tg-s3cret"


def _telemetrygen() -> str | None:
    here = Path(sys.executable).parent / "telemetrygen"
    return str(here) if here.exists() else shutil.which("telemetrygen")


TG = _telemetrygen()
pytestmark = pytest.mark.skipif(
    TG is None, reason="telemetrygen is not installed (make setup builds it from its Go module; needs Go)"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("tg") / "store", "--quiet", "--token", TOKEN)
    yield s
    assert s.stop() == 0


def auth() -> dict:
    return {"Authorization": f"Token {TOKEN}"}


def telemetrygen(server, signal: str, trace: str, *args: str) -> int:
    """Runs telemetrygen `signal` against the server; returns how many items it says it generated."""
    cmd = [
        TG,
        signal,
        "--otlp-http",
        "--otlp-insecure",
        "--otlp-endpoint",
        f"127.0.0.1:{server.port}",
        "--otlp-header",
        f'Authorization="Token {TOKEN}"',
        "--otlp-header",
        f'x-tracehouse-trace="{trace}"',
        "--rate",
        "0",
        "--workers",
        "2",
        "--service",
        "checkout",
        "--otlp-attributes",
        'host.name="node-7"',
        "--telemetry-attributes",
        'run.id="r42"',
        *args,
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    # it exits non-zero when an export fails (no --allow-export-failures)
    assert p.returncode == 0, p.stderr
    counts = re.findall(rf'{signal} generated\s+\{{"worker": \d+, "{signal}": (\d+)\}}', p.stderr)
    assert len(counts) == 2, p.stderr
    return sum(map(int, counts))


def test_telemetrygen_traces_are_stored_span_for_span(server):
    traces = telemetrygen(server, "traces", "tg_traces", "--traces", "40", "--child-spans", "2", "--span-links", "1")
    assert traces == 80
    got = server.sql(
        "SELECT name, kind, count(*), count(DISTINCT trace_id), count(parent_span_id), count(DISTINCT span_id), "
        "bool_and(status = 'unset'), bool_and(service = 'checkout'), bool_and(dur >= 123000), "
        "bool_and(json_extract_string(attributes, '$.\"run.id\"') = 'r42'), "
        "bool_and(json_extract_string(attributes, '$.\"network.peer.address\"') = '1.2.3.4') "
        "FROM tg_traces.span GROUP BY ALL ORDER BY name",
        auth(),
    )
    # every trace: a client root span and its two server children, each in every trace once
    assert got == [
        ["lets-go", "client", 80, 80, 0, 80, True, True, True, True, True],
        ["okey-dokey-0", "server", 80, 80, 80, 80, True, True, True, True, True],
        ["okey-dokey-1", "server", 80, 80, 80, 80, True, True, True, True, True],
    ]
    # each child's parent is its trace's root
    assert server.sql(
        "SELECT count(*) FROM tg_traces.span c JOIN tg_traces.span r ON r.span_id = c.parent_span_id "
        "AND r.trace_id = c.trace_id AND r.name = 'lets-go'",
        auth(),
    ) == [[160]]
    # a link row per link a span counts, pointing at a stored span
    assert (
        server.sql(
            "SELECT (SELECT sum(links) FROM tg_traces.span), count(*), count(s.span_id) FROM tg_traces.span_link l "
            "LEFT JOIN tg_traces.span s ON s.span_id = l.linked_span_id AND s.trace_id = l.linked_trace_id",
            auth(),
        )[0]
        == [server.sql("SELECT count(*) FROM tg_traces.span_link", auth())[0][0]] * 3
    )
    # the resource is the producer tree: service -> host
    assert server.sql(
        "SELECT kind, name, parent IS NULL FROM th.producers WHERE trace = 'tg_traces' ORDER BY id", auth()
    ) == [["service", "checkout", True], ["host", "node-7", False]]


@pytest.mark.parametrize("kind", ["Gauge", "Sum", "Histogram", "ExponentialHistogram"])
def test_telemetrygen_metrics_are_stored_point_for_point(server, kind):
    trace = f"tg_m_{kind.lower()}"
    points = telemetrygen(server, "metrics", trace, "--metrics", "25", "--metric-type", kind)
    assert points == 50
    table, mtype = {
        "Gauge": ("metric", "gauge"),
        "Sum": ("metric", "sum"),
        "Histogram": ("histogram", "histogram"),
        "ExponentialHistogram": ("histogram", "exponential_histogram"),
    }[kind]
    got = server.sql(
        f"SELECT name, metric_type, count(*), bool_and(service = 'checkout'), "
        f"bool_and(json_extract_string(attributes, '$.\"run.id\"') = 'r42') FROM {trace}.{table} GROUP BY ALL",
        auth(),
    )
    assert got == [["gen", mtype, 50, True, True]]
    if table == "histogram":  # every point holds the values it counts
        assert server.sql(f"SELECT bool_and(count > 0 AND sum IS NOT NULL) FROM {trace}.histogram", auth()) == [[True]]


def test_telemetrygen_logs_are_stored_record_for_record(server):
    logs = telemetrygen(
        server, "logs", "tg_logs", "--logs", "60", "--body", "payment declined", "--severity-number", "17",
        "--severity-text", "Error",
    )  # fmt: skip
    assert logs == 120
    assert server.sql(
        "SELECT severity, severity_text, body, service, json_extract_string(attributes, '$.\"run.id\"'), count(*) "
        "FROM tg_logs.log GROUP BY ALL",
        auth(),
    ) == [[17, "Error", "payment declined", "checkout", "r42", 120]]
