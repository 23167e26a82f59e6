"""`serve()`: one process owning the store's writer, serving HTTP and line protocol over TCP
(both on the native front end, one dispatcher).

Owns start-up (writer lock, socket binding, the query sandbox), the native front end with
its dispatcher thread, the scrub (`--scrub-interval`), and an orderly shutdown on SIGINT/SIGTERM:
stop reading TCP connections and ingest and acknowledge what they sent (at most TCP_DRAIN_S),
stop accepting HTTP, kill running queries' processes (at once: they hold nothing to save), close
the store (a final checkpoint) and let go of its writer lock, whatever failed before. A SIGKILL
loses nothing that was acknowledged: the WAL is replayed on the next open. At start it logs what
recovery cut from damaged WAL records.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..child_processes import exit_with_parent
from ..errors import BadInput
from ..store import Store
from .config import ServerConfig
from .http import Api, HttpServer
from .ingest import Ingestor

log = logging.getLogger("tracehouse.server")


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((host, port))
    except OSError as e:
        s.close()
        raise BadInput(
            f"cannot listen on {host}:{port}: {e.strerror}", expected="a free port (--port / --tcp-port; 0 picks one)"
        ) from None
    s.listen(4096)
    s.setblocking(False)
    return s


TCP_DRAIN_S = 10.0  # s a shutdown waits for what TCP clients sent to be ingested and acknowledged

# How long freed Arrow memory stays mapped before it goes back to the OS.
ARROW_MEMORY_DECAY_MS = 10_000


def _keep_freed_memory() -> None:
    """Arrow buffers from jemalloc, returned to the OS only after ARROW_MEMORY_DECAY_MS.

    Every checkpoint allocates its sorted copy of ~0.5 s of rows (hundreds of MB at
    0.9M 61-column rows/s) and frees it when encoded. pyarrow's mimalloc and its jemalloc
    default (decay 0) gave that memory back at once, so each checkpoint faulted it in again
    and the kernel zeroed every page: clear_page was 20 % of the server's CPU, and Arrow
    ingest at 128 x 1,000 rose from ~0.75M to ~0.9M rows/s with freed pages kept.
    """
    import pyarrow as pa

    try:
        pool = pa.jemalloc_memory_pool()
        pa.jemalloc_set_decay_ms(ARROW_MEMORY_DECAY_MS)
    except (NotImplementedError, pa.ArrowNotImplementedError):  # a pyarrow built without jemalloc
        return
    pa.set_memory_pool(pool)


def serve(store_path: str | os.PathLike, cfg: ServerConfig, *, ready: Callable[[dict], None] | None = None) -> int:
    """Run the server until SIGINT/SIGTERM; returns an exit code."""
    cfg.check()
    _raise_fd_limit()
    _keep_freed_memory()
    # The server ingests for hours: its segments leave the page cache once durable (see
    # WriterOptions.drop_written_pages; queries then read them from disk).
    store = Store(store_path, fsync=cfg.fsync, group_commit_ms=cfg.group_commit_ms, drop_written_pages=True)
    http = api = scrubber = warmer = None
    stopping = threading.Event()
    try:
        store.become_writer()  # fail now (StoreLocked, StoreDamaged) rather than at the first write
        log_recovery(store)
        store.sandbox_sql()  # DuckDB of the server's queries may read the store's files and nothing else
        ingestor = Ingestor(store, cfg)
        api = Api(ingestor, cfg)
        if cfg.ui:
            from .ui.app import start as start_ui

            api.ui = start_ui(store, cfg.token, api)
        http_sock = _bind(cfg.host, cfg.port)
        tcp_sock = _bind(cfg.host, cfg.tcp_port) if cfg.tcp_port is not None else None
        info = {
            "pid": os.getpid(),
            "store": str(store.path),
            "fsync": cfg.fsync,
            "ack": cfg.ack,
            "http": f"http://{url_host(cfg.host)}:{http_sock.getsockname()[1]}",
            "http_port": http_sock.getsockname()[1],
            "tcp_port": tcp_sock.getsockname()[1] if tcp_sock else None,
        }

        http = HttpServer(api, http_sock, cfg, tcp_sock)
        if getattr(cfg, "influxql_native", True):
            from .influxql_native import warm

            warmer = warm(store, stopping)  # the InfluxQL columns follow checkpoints off the query path
        if cfg.scrub_interval > 0:
            scrubber = Scrubber(store, cfg.scrub_interval, stopping)

        def stop(sig: int, _frame) -> None:
            if stopping.is_set() and sig == signal.SIGINT:
                os._exit(130)  # a second Ctrl-C: leave now (the WAL keeps what was acknowledged)
            stopping.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, stop)
        exit_with_parent()  # under a bench: stop when it dies (tracehouse/child_processes.py)
        if ready is not None:
            ready(info)
        while not stopping.wait(0.5):
            pass
        if tcp_sock is not None:
            left = http.drain_tcp(TCP_DRAIN_S)  # the dispatcher runs on meanwhile
            if left:
                log.warning("%d TCP connection(s) not drained within %g s", left, TCP_DRAIN_S)
    finally:
        stopping.set()
        try:
            if http is not None:
                http.close()
            if warmer is not None:
                warmer.join(5)
            if api is not None and api.ui is not None:
                api.ui.close()
            if scrubber is not None:
                scrubber.join(5)
        finally:
            store.close()  # (lets go of the writer lock whatever failed before)
    return 0


def log_recovery(store: Store) -> None:
    """Say at start what recovery cut from each trace's WAL (the trace is marked incomplete too)."""
    for rep in store.recovery:
        for t in rep.torn:
            rows = "rows uncounted" if t.get("rows_cut") is None else f"{t['rows_cut']:,} rows"
            log.warning(
                "recovery of trace %s cut a damaged WAL record: %s: %s (%s bytes, %s)%s",
                rep.trace,
                t["file"],
                t["reason"],
                f"{t['bytes_cut']:,}",
                rows,
                f"; a copy is in {t['quarantined']}" if t.get("quarantined") else "",
            )
        if rep.records:
            log.info("trace %s: %d WAL records (%d rows) replayed", rep.trace, rep.records, rep.rows)


class Scrubber(threading.Thread):
    """`--scrub-interval`: every `interval` s, every live segment's pages against their CRCs
    (`Store.scrub`); a damaged one is logged and marked (queries naming it fail naming it).
    DuckDB does not check page CRCs as it reads (segments.py), so this is what finds a flipped
    byte before a query reads it as another number."""

    def __init__(self, store: Store, interval: float, stopping: threading.Event) -> None:
        super().__init__(name="th-scrub", daemon=True)
        self.store, self.interval, self.stopping = store, interval, stopping
        self.start()

    def run(self) -> None:
        try:  # below ingest and queries when the cores are busy
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        except (OSError, AttributeError):
            pass
        while not self.stopping.wait(self.interval):
            t0, segments = time.monotonic(), 0
            for info in self.store.traces():
                if self.stopping.is_set():
                    return
                try:
                    for seg, why in self.store.scrub(info.name):
                        log.error(
                            "scrub: segment %s of trace %s is damaged: %s (marked: queries naming it fail; "
                            "`tracehouse repair` sets it aside)",
                            seg.path,
                            info.name,
                            why,
                        )
                    segments += len(self.store.segments_of(info.name))
                except Exception as e:  # noqa: BLE001 - a trace deleted meanwhile, a full disk: next round
                    log.warning("scrub of trace %s: %s", info.name, e)
            log.info("scrub: %d segments checked in %.1f s", segments, time.monotonic() - t0)


def url_host(host: str) -> str:
    """`host` as a URL writes it: an IPv6 address in brackets (`http://[::1]:8086`)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def write_ready_file(path: str | None):
    """A `ready` callback printing the server's addresses (and writing them as JSON to `path`)."""

    def ready(info: dict) -> None:
        tcp = (
            f", line protocol over tcp://{info['http'].split('//')[1].rsplit(':', 1)[0]}:{info['tcp_port']}"
            if info["tcp_port"]
            else ""
        )
        print(
            f"tracehouse serving {info['http']} (line protocol, Arrow, SQL){tcp}; store {info['store']}, "
            f"fsync={info['fsync']}, ack={info.get('ack', 'durable')}",
            file=sys.stderr,
            flush=True,
        )
        if path:
            tmp = Path(path).with_suffix(".tmp")
            tmp.write_text(json.dumps(info))
            os.replace(tmp, path)

    return ready
