"""`tracehouse serve` (and, from the load generator, `tracehouse load`): thin shells.

Registered through `tracehouse.cli.COMMAND_MODULES`.
"""

from __future__ import annotations

import logging
import os

from .config import ServerConfig


def _size(s: str) -> int:
    """'64M', '1G', '512k' or a plain byte count."""
    s = s.strip().upper().rstrip("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    return int(float(s[:-1] if mult > 1 else s) * mult)


def cmd_serve(args) -> int:
    from .. import default_path
    from .run import serve, write_ready_file

    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cfg = ServerConfig(
        host=args.host, port=args.port, tcp_port=None if args.tcp_port < 0 else args.tcp_port, fsync=args.fsync,
        group_commit_ms=args.group_commit_ms, token=args.token or os.environ.get("TRACEHOUSE_TOKEN") or None,
        format=args.trace_format, create_traces=not args.no_create, tcp_bucket=args.tcp_bucket,
        max_body=_size(args.max_body), max_line=_size(args.max_line), max_connections=args.max_connections,
        idle_timeout=args.idle_timeout, max_inflight=_size(args.max_inflight), overload_wait=args.overload_wait,
    )
    return serve(args.store or default_path(), cfg, ready=write_ready_file(args.ready_file))


def register(commands) -> None:
    d = ServerConfig()
    sp = commands.add("serve", cmd_serve,
                      "ingest server: InfluxDB line protocol over HTTP and TCP, Arrow IPC, read-only SQL over HTTP")
    sp.add_argument("--host", default=d.host, help="address to bind (default 127.0.0.1; others need --token)")
    sp.add_argument("--port", type=int, default=d.port, help=f"HTTP port (default {d.port}; 0 picks a free one)")
    sp.add_argument("--tcp-port", type=int, default=d.tcp_port,
                    help=f"line protocol over TCP (default {d.tcp_port}; 0 picks a free one, -1 turns it off)")
    sp.add_argument("--fsync", choices=("always", "batch", "off"), default=d.fsync,
                    help="durability of acknowledged writes (default batch: group commit)")
    sp.add_argument("--group-commit-ms", type=float, default=d.group_commit_ms)
    sp.add_argument("--token", help="required for writes and queries ('Authorization: Token ...'); "
                                    "default $TRACEHOUSE_TOKEN")
    sp.add_argument("--trace-format", default=d.format, help=f"format of traces created by writes (default {d.format})")
    sp.add_argument("--no-create", action="store_true", help="refuse writes to unknown buckets (404)")
    sp.add_argument("--tcp-bucket", default=d.tcp_bucket, help="trace of TCP lines whose connection names none")
    sp.add_argument("--max-body", default="64M", help="largest HTTP body, decompressed too (default 64M)")
    sp.add_argument("--max-line", default="1M", help="longest line-protocol line (default 1M)")
    sp.add_argument("--max-connections", type=int, default=d.max_connections,
                    help=f"open connections per protocol (default {d.max_connections})")
    sp.add_argument("--idle-timeout", type=float, default=d.idle_timeout,
                    help=f"seconds a connection may send nothing (default {d.idle_timeout:g})")
    sp.add_argument("--max-inflight", default="256M",
                    help="body bytes received but not yet durable, all clients (default 256M); then 503 / TCP pause")
    sp.add_argument("--overload-wait", type=float, default=d.overload_wait,
                    help="seconds a request waits for in-flight room before 503 (default 2)")
    sp.add_argument("--ready-file", help="write the bound addresses as JSON here once serving")
    sp.add_argument("--quiet", action="store_true", help="log warnings only")
