"""Requests from the native front end, answered by the UI's ASGI app on a thread of its own.

Owns the hand-over: the server's dispatcher gives a whole request (`_core.HttpRequest`:
head and body already read by the front end) to `UiBridge.submit`, which only queues it on
the UI's event loop and returns; the loop turns it into an ASGI `http` scope, runs the app
and answers the request once with the collected response. The app's synchronous handlers
run on a pool of worker threads (anyio's default limiter, set to `threads`, 8: a page's
requests for one selection arrive together, the Overview's eight at once, and each runs
at once rather than queued behind the slowest; their work is DuckDB, numpy and Rust,
which release the interpreter lock, so they share the cores).

Bounded: at most `max_pending` UI requests are queued or running; more are answered 503
with Retry-After at once (the browser retries), so a stuck page cannot grow memory.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import Any

log = logging.getLogger("tracehouse.server.ui")

UI_PATHS = ("/", "/favicon.ico")
UI_PREFIXES = ("/ui/", "/api/ui/")


def is_ui_path(path: str) -> bool:
    """Whether `path` belongs to the web UI (and not to the ingest/query API)."""
    return path in UI_PATHS or path.startswith(UI_PREFIXES)


class UiBridge:
    """An ASGI app served in-process: its own thread and event loop, bounded work."""

    def __init__(
        self, app, *, threads: int = 8, max_pending: int = 64, state=None, open_paths: list[str] | None = None
    ) -> None:
        self.app = app
        self.open_paths = list(open_paths or [])  # served without the token (the page and its assets)
        self.state = state  # the app's shared state (closed with the bridge)
        self.threads = threads
        self.max_pending = max_pending
        self.pending = 0
        self.refused = 0
        self._lock = threading.Lock()
        self.loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self.thread = threading.Thread(target=self._run, name="th-ui", daemon=True)
        self.thread.start()
        self._started.wait()

    takes = staticmethod(is_ui_path)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def limit_threads() -> None:
            import anyio.to_thread

            anyio.to_thread.current_default_thread_limiter().total_tokens = self.threads

        self.loop.run_until_complete(limit_threads())
        self._started.set()
        self.loop.run_forever()

    def submit(self, req) -> None:
        """Queue `req` on the UI's loop (called from the dispatcher: returns at once)."""
        with self._lock:
            full = self.pending >= self.max_pending
            if not full:
                self.pending += 1
            else:
                self.refused += 1
        if full:
            _respond(
                req,
                503,
                [("content-type", "application/json"), ("retry-after", "1")],
                json.dumps({"error": f"the web UI has {self.max_pending} requests in hand; retry"}).encode(),
            )
            return
        try:
            self.loop.call_soon_threadsafe(lambda: self.loop.create_task(self._serve(req)))
        except RuntimeError:  # the loop is closed: shutting down
            self._done()
            _respond(req, 503, [("content-type", "application/json")], b'{"error": "server shutting down"}')

    def _done(self) -> None:
        with self._lock:
            self.pending -= 1

    async def _serve(self, req) -> None:
        try:
            status, headers, body = await call_app(
                self.app, req.method, req.path, req.query, req.headers, bytes(req.take_body()), req.peer
            )
        except BaseException as e:  # noqa: BLE001 - every request gets an answer
            log.exception("web UI request %s %s failed", req.method, req.path)
            status, headers = 500, [("content-type", "application/json")]
            body = json.dumps({"error": f"internal error: {type(e).__name__}"}).encode()
        finally:
            self._done()
        _respond(req, status, headers, body)

    def stats(self) -> dict[str, int]:
        return {"ui_requests_pending": self.pending, "ui_requests_refused": self.refused}

    def close(self) -> None:
        if self.state is not None:
            self.state.close()
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)


async def call_app(
    app, method: str, path: str, query: str, headers, body: bytes, peer: str = ""
) -> tuple[int, list[tuple[str, str]], bytes]:
    """Run ASGI `app` on one complete request; returns (status, headers, body)."""
    host, _, port = peer.rpartition(":")
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode("latin-1"),
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers],
        "client": (host, int(port)) if port.isdigit() else None,
        "server": None,
    }
    sent_body = False

    async def receive() -> dict:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # nothing more comes: the client's disconnect is not seen here
        return {"type": "http.disconnect"}

    status = 500
    out_headers: list[tuple[str, str]] = []
    chunks: list[bytes] = []

    async def send(message: dict) -> None:
        nonlocal status, out_headers
        if message["type"] == "http.response.start":
            status = int(message["status"])
            # The front end writes Content-Length and Connection itself.
            out_headers = [
                (k.decode("latin-1"), v.decode("latin-1"))
                for k, v in message.get("headers", [])
                if k.lower() not in (b"content-length", b"connection")
            ]
        elif message["type"] == "http.response.body":
            chunks.append(bytes(message.get("body", b"")))

    await app(scope, receive, send)
    return status, out_headers, b"".join(chunks)


def _respond(req, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
    try:
        req.respond(status, headers, body)
    except RuntimeError:
        pass  # answered already (shutdown raced it)
