"""OpenTelemetry data made by the OpenTelemetry Python SDK for the web UI's tests: a real
`tracehouse serve` into which tests/formats/otlp/sdk_app.py (the SDK with
`opentelemetry-exporter-otlp-proto-http`) posts its spans, logs and metrics.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers.server import Server

APP = Path(__file__).parents[1] / "formats" / "otlp" / "sdk_app.py"


def run_sdk_app(server: Server, trace: str, compression: str = "none", token: str | None = None) -> dict:
    """Runs the SDK app once against `server` into `trace`: {"trace_id": the checkout trace, ...}."""
    p = subprocess.run(
        [sys.executable, str(APP), str(server.port), trace, compression, *([token] if token else [])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert "Failed to export" not in p.stderr, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def shop_server(store: Path, runs: int = 2, *args: str) -> tuple[Server, list[str]]:
    """A server whose trace `shop` holds `runs` runs of the SDK app (each a `checkout` trace and
    an `audit` trace linked to it); the checkout trace ids."""
    s = Server(store, *args)
    try:
        tids = [run_sdk_app(s, "shop")["trace_id"] for _ in range(runs)]
    except BaseException:
        s.stop()
        raise
    return s, tids
