"""`tracehouse load`: the Rust load generator against a real server, at toy size (no timing asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from helpers import child_env
from helpers.server import Server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("load") / "store", "--quiet")
    yield s
    s.stop()


def load(server, *args):
    cmd = [
        sys.executable,
        "-m",
        "tracehouse.cli",
        "load",
        *args,
        "--url",
        f"http://127.0.0.1:{server.port}",
        "--tcp-port",
        str(server.tcp_port),
        "--duration",
        "1",
        "--json",
    ]
    r = subprocess.run(cmd, env=child_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("protocol", ["http", "tcp-acks", "arrow"])
def test_qos_agents_every_acknowledged_row_is_stored(server, protocol):
    bucket = f"qos_{protocol.replace('-', '_')}"
    started = time.time_ns()
    rep = load(server, "qos", "--agents", "3", "--rows-per-batch", "20", "--protocol", protocol, "--bucket", bucket)
    assert rep["errors"] == 0, rep["error_samples"]
    assert rep["rows_acked"] > 0 and rep["rows_acked"] == rep["rows_sent"]
    assert rep["ack_us"][0] <= rep["ack_us"][2] <= rep["ack_us"][3]
    assert 0 <= rep["loadgen_cpu_share"] <= 1 and rep["server_cpu_share"] is not None
    ((n, cols),) = server.sql(
        f"SELECT count(*), (SELECT count(*) FROM information_schema.columns "
        f"WHERE table_schema = '{bucket}' AND table_name = 'qos') FROM \"{bucket}\".qos"
    )
    assert n == rep["rows_acked"]
    # ts, producer, seq + the 48 result parameters, and the 13 measurement ids as tag columns when they are
    # line-protocol tags (Arrow writes name producers by id: no tags)
    assert cols == 3 + 48 + (0 if protocol == "arrow" else 13)
    if protocol != "arrow":
        prods = server.sql(f"SELECT attrs FROM th.producers WHERE trace = '{bucket}'")
        assert len(prods) == 3 and all(len(json.loads(a)) == 13 for (a,) in prods)
    # Every send is stamped with its own measurement time (rows 1 us apart), Arrow bodies too:
    # batches do not repeat each other's stamps (agents may collide on a few by chance), and
    # the stamps are of this run. Repeated bodies would give count(DISTINCT ts) = 8 x rows.
    ((distinct, lo),) = server.sql(f'SELECT count(DISTINCT ts), min(ts) FROM "{bucket}".qos')
    assert distinct >= 0.95 * n and lo > started - 60 * 10**9


def test_tsbs_cpu_hosts_over_tcp_and_interval(server):
    rep = load(server, "cpu", "--hosts", "4", "--rows-per-batch", "5", "--protocol", "tcp", "--bucket", "cpu1")
    assert rep["rows_sent"] > 0 and rep["rows_acked"] == 0  # at-most-once: nothing comes back
    rep = load(server, "cpu", "--hosts", "2", "--rows-per-batch", "1", "--interval", "50", "--bucket", "cpu2")
    assert rep["errors"] == 0 and 10 <= rep["batches_acked"] <= 60
    rows = server.sql('SELECT count(DISTINCT producer), min(usage_user), max(usage_user) FROM "cpu2".cpu')
    assert rows[0][0] == 2 and 0 <= rows[0][1] <= rows[0][2] <= 100
