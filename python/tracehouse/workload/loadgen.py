"""`tracehouse load`: the Rust load generator, with CPU shares and a readable report.

Owns the choice of wire protocol (line protocol over HTTP or TCP, Arrow IPC over
HTTP), the Arrow bodies for the Arrow protocol (built once with numpy before the
clock starts), and the CPU accounting: the generator's own share of the machine
(this process: every agent thread) and, when the server is local, the server's
(its /health names its pid; /proc gives its CPU time).

At-most-once TCP (`--protocol tcp`) has no answers to count errors from: the report reads a
tracehouse server's `/health` counters before and after the run (`tcp_rows` stored,
`tcp_lines_refused`) and counts the refused lines as errors. Every agent's connection is
drained (the server closes it once all it received is ingested) before the second read, so
the difference covers the run; it also counts any other TCP client of that server meanwhile.
"""

from __future__ import annotations

import http.client
import json
import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pyarrow as pa

from .. import _core

PROTOCOLS = ("http", "tcp", "tcp-acks", "arrow")
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class Target:
    host: str = "127.0.0.1"
    port: int = 8086
    tcp_port: int = 8094
    token: str | None = None

    @classmethod
    def parse(cls, url: str, tcp_port: int = 8094, token: str | None = None) -> Target:
        u = urlparse(url if "//" in url else f"http://{url}")
        return cls(u.hostname or "127.0.0.1", u.port or 8086, tcp_port, token)


def server_health(t: Target) -> dict:
    """A tracehouse server's /health document ({} for other servers or when unreachable)."""
    try:
        c = http.client.HTTPConnection(t.host, t.port, timeout=5)
        c.request("GET", "/health", headers={"Authorization": f"Token {t.token}"} if t.token else {})
        r = c.getresponse()
        doc = json.loads(r.read()) if r.status == 200 else {}
        c.close()
        return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError, http.client.HTTPException):
        return {}


def server_pid(t: Target, health: dict | None = None) -> int | None:
    """The pid a local tracehouse server reports in /health (None for others)."""
    pid = (server_health(t) if health is None else health).get("pid")
    try:
        return int(pid) if pid and os.path.exists(f"/proc/{int(pid)}/stat") else None
    except (TypeError, ValueError):
        return None


def _delta(before: dict, after: dict, key: str) -> int | None:
    if isinstance(before.get(key), int) and isinstance(after.get(key), int):
        return after[key] - before[key]
    return None


def proc_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process `pid` (all threads)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def self_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def arrow_bodies(workload: str, rows: int, count: int = 8, seed: int = 42) -> list[bytes]:
    """`count` Arrow IPC streams of `rows` rows of the workload's fields (ts, producer, params)."""
    return arrow_bodies_stamped(workload, rows, count, seed)[0]


def arrow_bodies_stamped(workload: str, rows: int, count: int = 8, seed: int = 42) -> tuple[list[bytes], list[int]]:
    """`arrow_bodies` plus the byte offset of each body's `ts` values, so the load generator can
    stamp every send with its own measurement time (repeating the same stamps made every
    checkpoint a full re-sort of identical time ranges, which no real agent produces)."""
    rng = np.random.default_rng(seed)
    out, offsets = [], []
    base = time.time_ns()
    for k in range(count):
        ts = base + np.arange(rows, dtype=np.int64) * 1000 + k
        cols = {"ts": pa.array(ts, pa.int64()), "producer": pa.array(np.full(rows, k, np.int32))}
        if workload == "qos":
            for name, typ, lo, hi in _core.QOS_RESULT_PARAMS:
                if typ == "float64":
                    cols[name] = pa.array(np.round(rng.uniform(lo, hi, rows), 3))
                else:
                    cols[name] = pa.array(rng.integers(int(lo), int(hi) + 1, rows, dtype=np.int64))
        else:
            for name in _core.CPU_FIELDS:
                cols[name] = pa.array(rng.integers(0, 101, rows, dtype=np.int64))
        t = pa.table(cols)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, t.schema) as w:
            w.write_table(t)
        body = sink.getvalue().to_pybytes()
        at = body.find(ts.astype("<i8").tobytes())
        if at < 0:
            raise AssertionError("ts values not found in the IPC body")  # pyarrow wrote them compressed?
        out.append(body)
        offsets.append(at)
    return out, offsets


def run(
    workload: str,
    *,
    target: Target,
    protocol: str = "http",
    bucket: str | None = None,
    agents: int = 8,
    rows_per_batch: int = 1000,
    interval_ms: float = 0.0,
    duration_s: float = 10.0,
    batches_per_agent: int = 0,
    seed: int = 42,
    path: str | None = None,
    bodies: list[bytes] | None = None,
    content_type: str | None = None,
) -> dict:
    """One load run; returns the generator's report plus rates and CPU shares. `bodies`:
    prebuilt request bodies of `rows_per_batch` rows each, posted in turn to `path` with
    `content_type` (any HTTP write API: OTLP, line protocol made elsewhere)."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol {protocol!r}: expected one of {', '.join(PROTOCOLS)}")
    bucket = bucket or workload
    kw: dict = {}
    if bodies is not None:
        kw.update(bodies=bodies, content_type=content_type or "application/octet-stream", path=path)
        proto = "http-bodies"
    elif protocol == "arrow":
        kw["bodies"], kw["ts_offsets"] = arrow_bodies_stamped(workload, rows_per_batch, seed=seed)
        kw["path"] = path or f"/api/v2/arrow?trace={bucket}&type={workload}"
        proto = "http-bodies"
    else:
        kw["path"] = path or f"/api/v2/write?bucket={bucket}"
        proto = protocol
    port = target.tcp_port if protocol.startswith("tcp") else target.port
    health0 = server_health(target)
    spid = server_pid(target, health0)
    s0 = proc_cpu_s(spid) if spid else None
    c0, w0 = self_cpu_s(), time.perf_counter()
    load0 = os.getloadavg()[0]
    rep = dict(
        _core.run_load(
            workload=workload,
            protocol=proto,
            host=target.host,
            port=port,
            bucket=bucket,
            token=target.token,
            agents=agents,
            rows_per_batch=rows_per_batch,
            interval_ms=interval_ms,
            duration_s=duration_s,
            batches_per_agent=batches_per_agent,
            seed=seed,
            **kw,
        )
    )
    wall = time.perf_counter() - w0
    c1 = self_cpu_s()
    s1 = proc_cpu_s(spid) if spid else None
    health1 = server_health(target)
    refused = _delta(health0, health1, "tcp_lines_refused")
    rep["server_tcp_rows"] = _delta(health0, health1, "tcp_rows")
    rep["server_tcp_lines_refused"] = refused
    if protocol == "tcp" and refused:
        # nothing is acknowledged at most once: the server's count is the only one there is
        rep["errors"] += refused
        rep["error_samples"] = [
            f"server refused {refused:,} lines (its /health tcp_lines_refused; the reasons are in its log)"
        ] + list(rep["error_samples"])
    ncpu = os.cpu_count() or 1
    el = rep["elapsed_s"] or wall
    rep.update(
        {
            "workload": workload,
            "protocol": protocol,
            "agents": agents,
            "rows_per_batch": rows_per_batch,
            "interval_ms": interval_ms,
            "duration_s": duration_s,
            "rows_sent_per_s": rep["rows_sent"] / el,
            "rows_acked_per_s": rep["rows_acked"] / el,
            "loadgen_cpu_share": (c1 - c0) / (wall * ncpu),
            "server_cpu_share": (s1 - s0) / (wall * ncpu) if s0 is not None and s1 is not None else None,
            "cpus": ncpu,
            "loadavg_1m_before": load0,
            "loadavg_1m_after": os.getloadavg()[0],
            "columns_per_row": (13 + 48) if workload == "qos" else 20,
        }
    )
    return rep


def render(rep: dict) -> str:
    ms = lambda us: f"{us / 1000:.1f}"  # noqa: E731
    srv = rep["server_cpu_share"]
    lines = [
        f"{rep['workload']} over {rep['protocol']}: {rep['agents']} agents x {rep['rows_per_batch']} rows/batch"
        + (f" every {rep['interval_ms']:g} ms" if rep["interval_ms"] else " (closed loop)")
        + f", {rep['elapsed_s']:.1f} s",
        f"  sent          {rep['rows_sent']:>12,} rows  {rep['rows_sent_per_s']:>12,.0f} rows/s"
        f"  ({rep['bytes_sent'] / max(rep['elapsed_s'], 1e-9) / 1e6:.1f} MB/s)",
        f"  acknowledged  {rep['rows_acked']:>12,} rows  {rep['rows_acked_per_s']:>12,.0f} rows/s",
        f"  ack latency   p50 {ms(rep['ack_us'][0])} ms  p90 {ms(rep['ack_us'][1])} ms  p99 {ms(rep['ack_us'][2])} ms"
        f"  max {ms(rep['ack_us'][3])} ms",
        f"  end-to-end    p50 {ms(rep['e2e_us'][0])} ms  p99 {ms(rep['e2e_us'][2])} ms (measurement time -> durable ack)",
        f"  errors        {rep['errors']:,}"
        + (f"  {rep['statuses']}" if rep["statuses"] else "")
        + (f"  e.g. {rep['error_samples'][0]}" if rep["error_samples"] else ""),
        *(
            [
                f"  server (TCP)  {rep['server_tcp_rows']:,} rows stored, {rep['server_tcp_lines_refused']:,} lines "
                "refused during the run (/health before and after; any TCP client of the server)"
            ]
            if rep["protocol"] == "tcp" and rep.get("server_tcp_rows") is not None
            else ["  server (TCP)  unknown: no tracehouse /health to count what was stored and refused"]
            if rep["protocol"] == "tcp"
            else []
        ),
        f"  CPU share     load generator {rep['loadgen_cpu_share']:.0%}"
        + (f", server {srv:.0%}" if srv is not None else "")
        + f" of {rep['cpus']} cores;"
        f" load average {rep['loadavg_1m_before']:.2f} -> {rep['loadavg_1m_after']:.2f}",
    ]
    return "\n".join(lines)
