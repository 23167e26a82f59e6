"""`tracehouse bench otlp`: spans per second over OTLP/HTTP protobuf into `tracehouse serve` with
durable acknowledgements (answered after the group commit's fsync), beside line protocol carrying
the same rows, in the same run.

The generator is the Rust load generator (`workload/loadgen.py`, `http-bodies`): `agents`
connections post prebuilt bodies in turn and count the 2xx answers. The OTLP bodies are
`ExportTraceServiceRequest`s built once with the `opentelemetry-proto` messages (the OpenTelemetry
SDK's own encoding classes): `spans` spans each, in the shape an instrumented web service
exports (one resource of service, host and pid; server spans with a method, status code and URL,
client and DB child spans, a few other attributes). The peer is line protocol of the same rows:
each span one line with the same stored columns (service/host/pid tags -> a producer; trace and
span ids, parent, name, kind, status, the promoted attributes and the rest as fields), posted the
same way to `/api/v2/write`. Runs alternate (OTLP, line protocol, OTLP, ...) so both see the same
machine load; the report gives each run, the best of each, their ratio, the load average and the
server's CPU share.

A third run per round, when `telemetrygen` is installed (`make setup` builds it from the
OpenTelemetry Collector's Go module into the venv's bin), is the Collector's own load generator:
`procs` telemetrygen processes (`telemetrygen traces --otlp-http`, `spans` spans per export, a
root and one child span per trace) for the same time. Its exporter sends one request at a time
per process and drops spans once its queue is full, so its rate is counted where it matters:
spans stored in the trace during the run (SQL before and after) per second of the run, with the
spans it generated beside them. Each process runs 50 workers of at most 1,000 traces/s each:
one worker without a limit (`--rate 0`) spins generating spans its queue drops, and a limit
above ~1,000/s is not kept (its limiter sleeps a timer tick per trace). Measured at load 10-13
(stored spans/s, 5 s runs): 2 processes x 1 worker unlimited 55-79K, 4 x 1 unlimited 63-64K,
2 x 50 86K, 4 x 25 91K, 4 x 50 101-127K, 4 x 100 84K, 8 x 50 88K; the server's CPU share
stayed at 10-17 %: telemetrygen itself is the bound on this 2-core machine.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

KINDS = (2, 3, 3, 1)  # server, client, client, internal
KIND_WORDS = {1: "internal", 2: "server", 3: "client"}


def _spans(n: int, seed: int) -> list[dict]:
    rnd = random.Random(seed)
    t0 = 1_700_000_000_000_000_000 + seed * 10**9
    out = []
    trace = rnd.getrandbits(128).to_bytes(16, "big")
    root = b""
    for i in range(n):
        if i % 4 == 0:
            trace = rnd.getrandbits(128).to_bytes(16, "big")
        sid = rnd.getrandbits(64).to_bytes(8, "big")
        kind = KINDS[i % 4]
        if kind == 2:
            root = sid
        attrs = {"http.request.method": "GET", "http.response.status_code": 200 if i % 50 else 500}
        if kind == 2:
            attrs["url.full"] = f"http://shop/items/{i % 97}"
        elif i % 4 == 2:
            attrs = {"db.system": "postgresql", "db.query.text": "SELECT * FROM items WHERE id = $1"}
        attrs["user.tier"] = "gold" if i % 3 else "free"
        start = t0 + i * 1_000
        out.append(
            {
                "trace_id": trace,
                "span_id": sid,
                "parent": b"" if kind == 2 else root,
                "name": ("GET /items", "GET", "SELECT items", "render")[i % 4],
                "kind": kind,
                "start": start,
                "end": start + 50_000 + rnd.randrange(1_000_000),
                "error": i % 50 == 0,
                "attrs": attrs,
            }
        )
    return out


def otlp_bodies(spans: int, count: int = 8) -> list[bytes]:
    """`count` ExportTraceServiceRequests of `spans` spans each (protobuf)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

    def kv(k, v):
        return KeyValue(key=k, value=AnyValue(int_value=v) if isinstance(v, int) else AnyValue(string_value=v))

    res = Resource(attributes=[kv("service.name", "shop"), kv("host.name", "bench-1"), kv("process.pid", 4242)])
    out = []
    for b in range(count):
        pb = [
            Span(
                trace_id=s["trace_id"],
                span_id=s["span_id"],
                parent_span_id=s["parent"],
                name=s["name"],
                kind=s["kind"],
                start_time_unix_nano=s["start"],
                end_time_unix_nano=s["end"],
                attributes=[kv(k, v) for k, v in s["attrs"].items()],
                status=Status(code=2 if s["error"] else 0),
            )
            for s in _spans(spans, b)
        ]
        req = ExportTraceServiceRequest(
            resource_spans=[
                ResourceSpans(
                    resource=res, scope_spans=[ScopeSpans(scope=InstrumentationScope(name="bench"), spans=pb)]
                )
            ]
        )
        out.append(req.SerializeToString())
    return out


PROMOTED = {
    "http.request.method": "http_method",
    "http.response.status_code": "http_status_code",
    "url.full": "url_full",
    "db.system": "db_system",
    "db.query.text": "db_statement",
}


def lp_bodies(spans: int, count: int = 8) -> list[bytes]:
    """The same rows as line protocol: one line per span, the same stored columns."""
    out = []
    for b in range(count):
        lines = []
        for s in _spans(spans, b):
            f = [
                f'trace_id="{s["trace_id"].hex()}"',
                f'span_id="{s["span_id"].hex()}"',
                *([f'parent_span_id="{s["parent"].hex()}"'] if s["parent"] else []),
                f'name="{s["name"]}"',
                f'kind="{KIND_WORDS[s["kind"]]}"',
                f'status="{"error" if s["error"] else "unset"}"',
                f"dur={s['end'] - s['start']}i",
                'service="shop"',
                'scope="bench"',
            ]
            rest = []
            for k, v in s["attrs"].items():
                if k in PROMOTED:
                    f.append(f"{PROMOTED[k]}={v}i" if isinstance(v, int) else f'{PROMOTED[k]}="{v}"')
                else:
                    rest.append(f'\\"{k}\\":\\"{v}\\"')
            f.append('attributes="{' + ",".join(rest) + '}"')
            lines.append(f"span,service=shop,host=bench-1,pid=4242 {','.join(f)} {s['start']}")
        out.append(("\n".join(lines) + "\n").encode())
    return out


def telemetrygen_path() -> str | None:
    """The telemetrygen binary: the venv's (where `make setup` installs it), else one on PATH."""
    here = Path(sys.executable).parent / "telemetrygen"
    return str(here) if here.exists() else shutil.which("telemetrygen")


def _count(port: int, sql: str) -> int:
    q = urllib.parse.urlencode({"sql": sql})
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/query?{q}", timeout=60) as r:
        return int(json.loads(r.read())["rows"][0][0])


TG_WORKERS = 50  # workers per telemetrygen process (see the module docs)
TG_RATE = 1000  # traces/s per worker at most


def run_telemetrygen(
    exe: str, port: int, pid: int | None, trace: str, *, procs: int, seconds: float, batch: int
) -> dict:
    """`procs` telemetrygen processes posting traces to `trace` for `seconds`: spans stored per
    second of the run (the trace's row count before and after), spans generated, failed exports."""
    from tracehouse.workload import loadgen

    try:
        before = _count(port, f"SELECT count(*) FROM {trace}.span")
    except OSError:  # HTTPError too: no such trace yet
        before = 0
    cmd = [
        exe,
        "traces",
        "--otlp-http",
        "--otlp-insecure",
        "--otlp-endpoint",
        f"127.0.0.1:{port}",
        "--otlp-header",
        f'x-tracehouse-trace="{trace}"',
        "--workers",
        str(TG_WORKERS),
        "--rate",
        str(TG_RATE),
        "--duration",
        f"{seconds:g}s",
        "--batch-size",
        str(batch),
        "--child-spans",
        "1",
    ]
    load0 = os.getloadavg()[0]
    s0 = loadgen.proc_cpu_s(pid) if pid else None
    t0 = time.perf_counter()
    ps = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(procs)]
    logs = [p.communicate(timeout=seconds + 120)[1] for p in ps]
    wall = time.perf_counter() - t0
    s1 = loadgen.proc_cpu_s(pid) if pid else None
    stored = _count(port, f"SELECT count(*) FROM {trace}.span") - before
    generated = sum(2 * int(n) for log in logs for n in re.findall(r'"traces": (\d+)', log))
    failed = [line for log in logs for line in log.splitlines() if "ERROR" in line or "failed" in line.lower()]
    ncpu = os.cpu_count() or 1
    return {
        "rows_acked_per_s": stored / wall,
        "rows_acked": stored,
        "spans_generated": generated,
        "errors": len(failed) + sum(p.returncode != 0 for p in ps),
        "error_samples": failed[:3],
        "server_cpu_share": (s1 - s0) / (wall * ncpu) if s0 is not None and s1 is not None else None,
        "elapsed_s": wall,
        "cpus": ncpu,
        "loadavg_1m": [load0, os.getloadavg()[0]],
    }


def run(
    *,
    seconds: float = 10.0,
    agents: int = 8,
    spans: int = 1000,
    rounds: int = 2,
    telemetrygen: bool = True,
    tg_procs: int = 4,
    progress=None,
) -> dict:
    from tracehouse.bench.write_systems import Tracehouse
    from tracehouse.workload import loadgen

    say = progress or (lambda m: None)
    say(f"building {spans:,}-span bodies")
    bodies = {"otlp": otlp_bodies(spans), "lineproto": lp_bodies(spans)}
    ctype = {"otlp": "application/x-protobuf", "lineproto": "text/plain; charset=utf-8"}
    path = {"otlp": "/v1/traces?trace=bench_otlp", "lineproto": "/api/v2/write?bucket=bench_lp"}
    runs = []
    tg = telemetrygen_path() if telemetrygen else None
    whats = ("otlp", "lineproto", "telemetrygen") if tg else ("otlp", "lineproto")
    with tempfile.TemporaryDirectory(prefix="bench-otlp-") as work, Tracehouse(work, "otlp") as th:
        target = loadgen.Target("127.0.0.1", th.port, th.tcp_port)
        for r in range(rounds):
            for what in whats:
                if what == "telemetrygen":
                    say(f"round {r + 1}/{rounds}: telemetrygen, {tg_procs} processes, {seconds:g} s")
                    got = run_telemetrygen(
                        tg, th.port, th.pid, "bench_tg", procs=tg_procs, seconds=seconds, batch=spans
                    )
                    runs.append({"what": what, "round": r + 1, "ack_p50_ms": None, "ack_p99_ms": None, **got})
                    continue
                say(f"round {r + 1}/{rounds}: {what}, {agents} agents, {seconds:g} s")
                rep = loadgen.run(
                    "qos",
                    target=target,
                    agents=agents,
                    rows_per_batch=spans,
                    duration_s=seconds,
                    path=path[what],
                    bodies=bodies[what],
                    content_type=ctype[what],
                )
                requests = rep["rows_acked"] / spans
                cpu_s = (
                    None
                    if rep["server_cpu_share"] is None
                    else rep["server_cpu_share"] * rep["elapsed_s"] * rep["cpus"]
                )
                runs.append(
                    {
                        "what": what,
                        "round": r + 1,
                        "rows_acked_per_s": rep["rows_acked_per_s"],
                        "rows_acked": rep["rows_acked"],
                        "ack_p50_ms": rep["ack_us"][0] / 1000,
                        "ack_p99_ms": rep["ack_us"][2] / 1000,
                        # the server's CPU time (all its threads) per acknowledged request
                        "server_cpu_us_per_request": None if cpu_s is None or not requests else cpu_s / requests * 1e6,
                        "errors": rep["errors"],
                        "error_samples": list(rep.get("error_samples") or [])[:3],
                        "server_cpu_share": rep["server_cpu_share"],
                        "loadavg_1m": [rep["loadavg_1m_before"], rep["loadavg_1m_after"]],
                    }
                )
    best = {w: max(x["rows_acked_per_s"] for x in runs if x["what"] == w) for w in whats}
    return {
        "bench": "otlp",
        "spans_per_request": spans,
        "agents": agents,
        "telemetrygen": {
            "path": tg,
            "processes": tg_procs,
            "workers": TG_WORKERS,
            "rate_per_worker": TG_RATE,
            "spans_per_s": best["telemetrygen"],
        }
        if tg
        else {"path": None, "skipped": "telemetrygen not installed (make setup builds it with Go)"},
        "seconds": seconds,
        "cpus": os.cpu_count(),
        "ack": "durable (fsync batch, answered after the group commit)",
        "runs": runs,
        "otlp_spans_per_s": best["otlp"],
        "lineproto_rows_per_s": best["lineproto"],
        "ratio": best["otlp"] / best["lineproto"] if best["lineproto"] else None,
        "loadavg_1m_end": os.getloadavg()[0],
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def render(r: dict) -> str:
    lines = [
        f"OTLP/HTTP protobuf vs line protocol, same rows ({r['spans_per_request']:,} per request, "
        f"{r['agents']} agents, {r['seconds']:g} s a run, durable acks)",
        f"{'run':<16} {'rows/s':>12} {'errors':>7} {'server cpu':>11} {'cpu/request':>12} {'ack p50':>8} "
        f"{'ack p99':>8} {'load 1m':>13}",
    ]
    ms = lambda v: "-" if v is None else f"{v:.1f} ms"  # noqa: E731
    for x in r["runs"]:
        cpu = "-" if x["server_cpu_share"] is None else f"{x['server_cpu_share']:.0%}"
        per = x.get("server_cpu_us_per_request")
        per = "-" if per is None else f"{per:,.0f} us"
        la = x["loadavg_1m"]
        lines.append(
            f"{x['what'] + ' #' + str(x['round']):<16} {x['rows_acked_per_s']:>12,.0f} {x['errors']:>7} {cpu:>11} "
            f"{per:>12} {ms(x['ack_p50_ms']):>8} {ms(x['ack_p99_ms']):>8} {la[0]:>6.1f}-{la[1]:<6.1f}"
        )
    ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"
    lines.append(
        f"best: OTLP {r['otlp_spans_per_s']:,.0f} spans/s, line protocol {r['lineproto_rows_per_s']:,.0f} rows/s "
        f"(OTLP/line protocol {ratio})"
    )
    tg = r.get("telemetrygen") or {}
    if tg.get("path"):
        gen = sum(x.get("spans_generated", 0) for x in r["runs"] if x["what"] == "telemetrygen")
        got = sum(x["rows_acked"] for x in r["runs"] if x["what"] == "telemetrygen")
        lines.append(
            f"telemetrygen ({tg['processes']} processes x {tg['workers']} workers, spans stored per second of the run): "
            f"{tg['spans_per_s']:,.0f} spans/s ({tg['spans_per_s'] / r['lineproto_rows_per_s']:.2f}x line protocol); "
            f"it generated {gen:,} spans, {got:,} were stored (its exporter drops what its queue cannot hold)"
        )
    elif tg:
        lines.append(f"telemetrygen: skipped ({tg.get('skipped')})")
    return "\n".join(lines)
