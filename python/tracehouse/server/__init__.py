"""The ingest server: `tracehouse serve`.

Owns live ingest into one store: InfluxDB line protocol over HTTP and TCP,
Arrow IPC over HTTP, read-only SQL over HTTP. Modules:

  config.py   ServerConfig: every limit and its default
  ingest.py   Ingestor: bytes -> decoded batches -> registered producers/columns -> store.append
  http.py     routes, gzip, write/query handlers and the dispatcher thread over the
              native front end (_core.HttpFront: sockets, framing, the token on the head,
              limits and timeouts; src/ingest/httpfront.rs, tcpfront.rs); write answers are
              sent by the store's group committer once durable
  queries.py  QueryRunner: SQL queries in killable processes: deadlines that cover planning,
              a memory cap, the statement cap, an express process for short statements, shutdown
  queryproc.py a query process: read-only check, parse-tree caps, the answer and its byte cap
  sqlguard.py which SQL /api/query runs: one read-only statement, by DuckDB's own parser
  tcp.py      line protocol over TCP (at-most-once, or durable offsets on request): the
              dispatcher's side of the native TCP chunks (counters, refusal warnings, acks)
  run.py      serve(): sockets, the native front end (HTTP and TCP), the scrub, shutdown
  (cli/serve.py: `tracehouse serve` and `tracehouse load`)
"""

from __future__ import annotations

from .config import ServerConfig

__all__ = ["ServerConfig"]
