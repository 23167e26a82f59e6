"""A real `tracehouse serve` process for tests: start on free loopback ports, talk HTTP/TCP, stop or kill.

Every address is 127.0.0.1; every wait is bounded.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from helpers import child_env


class Server:
    def __init__(self, store: Path, *args: str, env: dict | None = None) -> None:
        self.store = Path(store)
        self.ready_file = self.store.parent / f"ready-{os.getpid()}-{time.monotonic_ns()}.json"
        self.log = self.store.parent / f"server-{time.monotonic_ns()}.log"
        cmd = [
            sys.executable,
            "-m",
            "tracehouse.cli",
            "--store",
            str(store),
            "serve",
            "--port",
            "0",
            "--tcp-port",
            "0",
            "--ready-file",
            str(self.ready_file),
            *args,
        ]
        self._log = open(self.log, "wb")  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen(
            cmd, env={**child_env(), **(env or {})}, stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 60
        while not self.ready_file.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.log.read_text()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"server not ready in 60 s: {self.log.read_text()}")
            time.sleep(0.05)
        self.info = json.loads(self.ready_file.read_text())
        self.port = self.info["http_port"]
        self.tcp_port = self.info["tcp_port"]

    # -- HTTP ------------------------------------------------------------------------

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict | None = None, timeout: float = 30
    ) -> tuple[int, dict, bytes]:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def write(
        self,
        body: bytes | str,
        bucket: str = "t",
        precision: str | None = None,
        headers: dict | None = None,
        v1: bool = False,
    ) -> tuple[int, dict]:
        if isinstance(body, str):
            body = body.encode()
        q = f"/write?db={bucket}" if v1 else f"/api/v2/write?bucket={bucket}"
        if precision:
            q += f"&precision={precision}"
        status, _h, data = self.request("POST", q, body, headers)
        return status, (json.loads(data) if data else {})

    def sql(self, sql: str, headers: dict | None = None) -> list:
        status, _h, data = self.request(
            "POST",
            "/api/query",
            json.dumps({"sql": sql}).encode(),
            {"Content-Type": "application/json", **(headers or {})},
        )
        if status != 200:
            raise AssertionError(f"query failed ({status}): {data[:500]!r}")
        return json.loads(data)["rows"]

    def tcp(self, timeout: float = 10) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.tcp_port), timeout=timeout)
        return s

    # -- lifetime --------------------------------------------------------------------

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self._log.close()


def read_lines(sock: socket.socket, n: int, timeout: float = 10) -> list[str]:
    """The next `n` newline-terminated lines from `sock` (bounded wait)."""
    deadline = time.monotonic() + timeout
    buf = b""
    while buf.count(b"\n") < n and time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        if not chunk:
            break
        buf += chunk
    return buf.decode().splitlines()
