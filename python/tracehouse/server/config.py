"""`ServerConfig`: every knob of `tracehouse serve`, with its default and why.

Owns the limits that keep the server's memory bounded whatever the clients do,
and the check that a server bound beyond loopback has a token.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

from ..errors import BadInput


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8086  # InfluxDB's port: telegraf and the client libraries default to it
    tcp_port: int | None = 8094  # line protocol over raw TCP (telegraf socket_writer); None: off
    fsync: str = "batch"  # the store's policy; 204 means durable under it
    group_commit_ms: float = 5.0
    # When a write is acknowledged: "durable" once fsynced under `fsync`; "written" once in the
    # WAL (the kernel's page cache: kept through a crash of this process, fsynced within
    # group_commit_ms, lost only to a power loss or kernel crash in that window) - the contract
    # of QuestDB's and InfluxDB's defaults.
    ack: str = "durable"
    token: str | None = None  # required for writes and queries when set; must be set off loopback
    format: str = "lineproto"  # the format (owner of event types) of traces created by line protocol
    create_traces: bool = True  # a write to an unknown bucket creates the trace
    tcp_bucket: str = "lineproto"  # trace of TCP lines whose connection names none
    otlp_trace: str = "otlp"  # trace of OTLP writes naming none (?trace=, X-Tracehouse-Trace)
    # -- limits -----------------------------------------------------------------------
    max_body: int = 64 << 20  # bytes of one HTTP request body (decompressed, too): 413 beyond
    max_line: int = 1 << 20  # bytes of one line-protocol line: that line is rejected
    max_connections: int = 4096  # HTTP (503 beyond) and TCP (closed beyond), each
    idle_timeout: float = 30.0  # s without a byte: headers, body chunks, TCP reads, keep-alive
    # A body trickled faster than the idle timeout would otherwise hold its connection forever:
    request_timeout: float = 300.0  # s for one whole HTTP request (head + body) from its first byte: 408
    min_rate: int = 1024  # bytes/s a body must average after its first idle_timeout s: 408 below
    max_inflight: int = 256 << 20  # body bytes accepted but not yet durable, all clients together
    overload_wait: float = 2.0  # s a request waits for room in `max_inflight` before 503
    retry_after: int = 1  # s, the Retry-After of 429/503
    max_query_rows: int = 1_000_000  # rows of one JSON query answer (Arrow answers are not cut)
    max_answer: int = 64 << 20  # bytes of one query answer, JSON or Arrow: 422 beyond
    query_timeout: float = 30.0  # s from a query's arrival to its answer, planning included (504); 0: no limit
    query_workers: int = (
        4  # query processes side by side (and one for short statements); more wait (503 beyond 16 per worker)
    )
    # A query's process may hold this much resident memory (422 beyond, the process killed); DuckDB
    # spills its operators at 3/4 of it into the store's tmp/.
    query_memory: int = 2 << 30
    max_statement: int = 64 << 10  # bytes of one SQL statement (413 beyond, before anything parses it)
    # Parse-tree caps, checked before DuckDB plans a statement (422 beyond): planning time grows with
    # the nodes (1,000 x UNION ALL: 5,009 nodes, 0.1-0.2 s) and with the relations a join orders
    # (50-way join: 99 relations, 0.14 s; 100-way: 199, 2.9 s). Typical queries: 20-200 nodes.
    max_parse_nodes: int = 5_000
    max_relations: int = 128
    # s between two scrubs of the store's segments (page CRCs: DuckDB does not check them as it
    # reads); 0: none. A scrub reads every segment once, at the pace of one core (run.Scrubber).
    scrub_interval: float = 0.0
    max_producers: int = 1_000_000  # distinct tag sets per trace
    max_columns: int = 1_000  # field columns per measurement
    max_errors: int = 100  # line errors described per request (all are counted)
    tcp_high_water: int = 8 << 20  # bytes queued on one TCP connection before its reads pause
    ui: bool = True  # serve the web UI (server/ui) at / beside the API

    def check(self) -> None:
        if self.fsync not in ("always", "batch", "off"):
            raise BadInput(f"--fsync {self.fsync!r}", expected="always | batch | off")
        if self.ack not in ("durable", "written"):
            raise BadInput(f"--ack {self.ack!r}", expected="durable | written")
        if self.ack == "written" and self.fsync == "off":
            raise BadInput(
                "--ack written with --fsync off: there is no WAL to have written the rows to",
                expected="--fsync batch (fsynced within --group-commit-ms) or always",
            )
        for name in (
            "max_body",
            "max_line",
            "max_connections",
            "max_inflight",
            "max_query_rows",
            "max_answer",
            "query_workers",
            "request_timeout",
            "max_statement",
            "max_parse_nodes",
            "max_relations",
        ):
            if getattr(self, name) <= 0:
                raise BadInput(f"{name} must be positive, not {getattr(self, name)}")
        if self.idle_timeout <= 0:
            raise BadInput(f"idle timeout must be positive, not {self.idle_timeout}")
        if self.query_timeout < 0 or self.min_rate < 0 or self.scrub_interval < 0 or self.query_memory < 0:
            raise BadInput(
                f"--query-timeout {self.query_timeout:g}, --min-rate {self.min_rate}, --query-memory "
                f"{self.query_memory} and --scrub-interval {self.scrub_interval:g}",
                expected="0 (no limit, or off) or more",
            )
        if not is_loopback(self.host) and not self.token:
            raise BadInput(
                f"serving on {self.host} (beyond loopback) needs a token",
                expected="--token TOKEN or $TRACEHOUSE_TOKEN; clients send 'Authorization: Token TOKEN'",
            )


def is_loopback(host: str) -> bool:
    """True when every address `host` names is a loopback address."""
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)
