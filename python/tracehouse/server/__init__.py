"""The ingest server: `tracehouse serve`.

Owns live ingest into one store: InfluxDB line protocol over HTTP and TCP,
Arrow IPC over HTTP, read-only SQL over HTTP. Modules:

  config.py   ServerConfig: every limit and its default
  ingest.py   Ingestor: bytes -> decoded batches -> registered producers/columns -> store.append;
              the in-flight memory budget (TCP); DurabilityWaiter (LSN -> asyncio future, TCP)
  http.py     routes, auth, gzip, write/query handlers and the dispatcher threads over the
              native HTTP front end (_core.HttpFront: sockets, framing, limits; src/httpfront.rs);
              write answers are sent by the store's group committer once durable
  tcp.py      line protocol over TCP (at-most-once, or durable offsets on request)
  run.py      serve(): sockets, the HTTP front end, the TCP listener (asyncio), shutdown
  cli.py      `tracehouse serve` and `tracehouse load`
"""

from __future__ import annotations

from .config import ServerConfig

__all__ = ["ServerConfig"]
