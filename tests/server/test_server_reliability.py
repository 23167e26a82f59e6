"""Crash test of `tracehouse serve`: SIGKILL under load from several writers.

HTTP writers (204 = durable, or written under `--ack written`) and TCP writers in
durable-offset mode (`ok <line>`)
write rows with unique (writer, n) ids for a bounded time; the server is killed
with SIGKILL mid-load and restarted on the same store. Every acknowledged row must
be there exactly once; unacknowledged rows may be missing, never doubled.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time

import numpy as np
import pyarrow as pa
import pytest

from helpers.server import Server

ROWS_PER_WRITE = 50


def http_writer(port: int, w: int, acked: list, stop: threading.Event) -> None:
    n = 0
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        while not stop.is_set() and n < 200_000:
            ids = range(n, n + ROWS_PER_WRITE)
            body = "".join(f'k,writer=h{w} w={w}i,n={i}i,pad="{"x" * 20}" {i}\n' for i in ids).encode()
            c.request("POST", "/api/v2/write?bucket=crash", body)
            r = c.getresponse()
            r.read()
            if r.status == 204:
                acked.append((w, n, n + ROWS_PER_WRITE))
            n += ROWS_PER_WRITE
    except (OSError, http.client.HTTPException):
        pass  # the server died: whatever was not acknowledged may be lost


def tcp_writer(port: int, w: int, acked: list, stop: threading.Event) -> None:
    """Durable-offset mode: line L of the connection carries n = L - 2 (line 1 is the handshake)."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"# tracehouse bucket=crash acks=1\n")
        n = 0
        buf = b""
        s.settimeout(0.05)
        while not stop.is_set() and n < 200_000:
            body = "".join(f"k,writer=t{w} w={w}i,n={i}i {i}\n" for i in range(n, n + ROWS_PER_WRITE)).encode()
            s.sendall(body)
            n += ROWS_PER_WRITE
            try:
                buf += s.recv(65536)
            except TimeoutError:
                pass
            *done, buf = buf.split(b"\n")
            for line in done:
                if line.startswith(b"ok "):
                    last = int(line.split()[1])
                    acked.append((w, 0, last - 1))  # lines 2..last hold n = 0..last-2
    except OSError:
        pass


@pytest.mark.parametrize("fsync,ack", [("batch", "durable"), ("always", "durable"), ("batch", "written")])
def test_sigkill_under_load_loses_no_acknowledged_row_and_doubles_none(tmp_path, fsync, ack):
    # --ack written answers before the fsync: its rows are in the WAL in the kernel's page
    # cache, which a SIGKILL of the server does not touch (a power loss could lose them).
    store = tmp_path / "store"
    s = Server(store, "--fsync", fsync, "--ack", ack, "--quiet")
    stop = threading.Event()
    acked_http: list = []
    acked_tcp: list = []
    threads = [threading.Thread(target=http_writer, args=(s.port, w, acked_http, stop)) for w in range(4)]
    threads += [threading.Thread(target=tcp_writer, args=(s.tcp_port, 100 + w, acked_tcp, stop)) for w in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 20
    while (len(acked_http) < 20 or len(acked_tcp) < 4) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    s.kill()  # SIGKILL, writers still sending
    stop.set()
    for t in threads:
        t.join(30)
    assert acked_http and acked_tcp, "the writers got no acknowledgement before the kill"

    s = Server(store, "--quiet")
    try:
        _status, _h, data = s.request(
            "POST",
            "/api/query",
            b'{"sql": "SELECT w, n FROM \\"crash\\".k", "format": "arrow"}',
            {"Content-Type": "application/json"},
        )
        t = pa.ipc.open_stream(data).read_all()
    finally:
        s.stop()
    key = t.column("w").to_numpy() * 10**9 + t.column("n").to_numpy()
    uniq, counts = np.unique(key, return_counts=True)
    assert counts.max() == 1, f"{int((counts > 1).sum())} rows stored twice"
    want = np.concatenate([w * 10**9 + np.arange(a, b) for w, a, b in acked_http + acked_tcp])
    missing = np.setdiff1d(want, uniq)
    assert missing.size == 0, f"{missing.size} acknowledged rows lost, e.g. {missing[:5]}"
