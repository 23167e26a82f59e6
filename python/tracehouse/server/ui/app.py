"""The web UI's HTTP routes: a Starlette app over one Store.

Owns the routes, their parameters, authentication of the JSON API and the mapping of
errors to answers. Pages live in the browser (`static/`: one HTML page, hash routes); the
browser asks the JSON API under `/api/ui/` for aggregates:

  GET  /                      the page (index.html);  GET /ui/<asset>  its JS, CSS, icon
  GET  /api/ui/info           store, importers, whether a token is needed
  GET  /api/ui/traces         trace list: q (name/description substring), format, meta=K=GLOB,
                              start/end (overlaps, ns), min/max_events, min/max_bytes, sort, desc
  POST /api/ui/import         body = the file; ?format= (or sniffed) &name= &filename= &opt=K=V...
  GET  /api/ui/jobs?id=       a background job (import, preparing a big trace)
  GET  /api/ui/trace          one trace: metadata, event types, producers, spans, readiness
  GET  /api/ui/density        bins, by type        GET /api/ui/stats  by=type|producer|state|link
  GET  /api/ui/hist           kind=hist|lhist, unit, k | min max step
  GET  /api/ui/top            longest spans        GET /api/ui/timeline  rows=1;2,3;4 width max_depth
  GET  /api/ui/flame          call paths (root= a path's subtree)   GET /api/ui/frame  node=  (spans behind a frame)
  GET  /api/ui/analyses       every analysis of the registry (?trace= says which apply to it)
  GET  /api/ui/analysis       name= trace= + the window + its parameters by name: rows and JSON
  POST /api/ui/sql            {"sql", "page", "page_size", "id"}  (id: the client's name for it);
                              {"sql", "flame": true}: the whole answer as a flame graph (folded stacks)
  POST /api/ui/sql/cancel     {"id"}: stop that query (its query process is killed)
  POST /api/ui/sql/download   {"sql", "format": "csv"|"parquet"}
  GET  /api/ui/examples       example queries (?trace= for one trace's format)
  GET  /api/ui/results        saved results (?trace=, ?kind=, ?indexes=1)
  GET  /api/ui/result?id=     one result: table page, histogram, text or processed trace
  POST /api/ui/debug          the Debug page: commands of `tracehouse debug` from a state (debugview.py)
  GET  /api/ui/otel/search    the Waterfall page's trace search (waterfall.py): service, name, attr=K=V...,
                              min_dur, max_dur, errors_only, sort=slowest|newest, limit
  GET  /api/ui/otel/tree      trace_id= [collapsed=span ids, comma list] offset limit: waterfall rows
  GET  /api/ui/otel/span      trace_id= span_id=: one span's fields, attributes, events, links, children

Every trace view takes the linked selection: `trace`, `start`/`end` (ns) and `producers`
(comma list). With `rel=1` (what the page sends) `start`/`end` are ns from the trace's
first event and so is every time of the answer (`start`, `end`, `ts`, `end_ts`,
`bin_start`, `ts_min`, `ts_max`): epoch ns exceed 2^53, past which a browser's numbers
are not exact (`ts_max + 1 === ts_max`); offsets of a trace shorter than 104 days are. Answers: 200 JSON; 202 {"pending": job} while a big trace is being prepared
(the page polls `jobs`); 400 {"error"} for bad parameters and bad SQL (DuckDB's message);
401 without the token; 404 unknown trace or result; 500 {"error"} naming the exception
type only (the stack trace goes to the server log, never to the page).

The SQL routes only wait on the server's query processes: they run on threads of their own
(QUERY_THREADS), not on the UI's two compute threads, where a console query waited behind the
pages' work before its timeout began. A query past `--query-timeout` answers 504, as `/api/query` does (not 408,
which a browser resends on a kept-alive connection: a 30 s timeout arrived after 60 s).

Authentication: with `--token`, the static page and its assets are public (they hold no
data) and every `/api/ui/` request needs `Authorization: Token <token>` (or Bearer), as
the rest of the API; the page asks for the token once and keeps it in sessionStorage.
"""

from __future__ import annotations

import hmac
import json
import logging
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...analysis.profiles import infer_span_config
from ...analysis.registry import Window
from ...errors import BadInput, NotFound, TracehouseError
from ..queries import json_bytes
from . import console, debugview, views, waterfall
from .prepare import Jobs, Pending, Preparer

if TYPE_CHECKING:
    from .bridge import UiBridge

log = logging.getLogger("tracehouse.server.ui")

STATIC = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "debug.js": "text/javascript; charset=utf-8",
    "waterfall.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
ASSET_PATHS = ["/", "/favicon.ico"] + [f"/ui/{n}" for n in STATIC]  # public: served without the token
MAX_PRODUCERS_LISTED = 5_000
QUERY_THREADS = 8  # threads of the SQL routes: they wait on query processes (4 + the express one by default)


class UiState:
    """What the routes share: the store, its derived data, jobs, and how queries run."""

    def __init__(
        self,
        store,
        *,
        token: str | None,
        run_query: Callable[..., pa.Table],
        inline_events: int | None = None,
        check_sql: Callable[[str], None] | None = None,
        cancel_query: Callable[[str], bool] | None = None,
    ) -> None:
        self.store = store
        self.token = token
        self.run_query = run_query  # (sql, tag=None): tag names the query for cancel_query
        self.check_sql = check_sql  # refuses a statement over the server's size cap (413)
        self.cancel_query = cancel_query
        self.jobs = Jobs()
        self.prep = Preparer(store, self.jobs, **({} if inline_events is None else {"inline_events": inline_events}))
        self.prep.warm = self.warm
        self.prep.load_saved()

    def warm(self, trace: str) -> None:
        """The answers a trace's overview asks first, computed by its prepare job (kept by
        `Preparer.cached` under the keys the routes use)."""
        p, w = self.prep, Window()
        p.cached(trace, ("density", w, 1000), lambda: views.density(p, trace, w, 1000))
        for by in ("type", "producer", "state", "link"):
            p.cached(trace, ("stats", w, by), lambda by=by: views.stats(p, trace, w, by))
        kw = dict(kind="hist", unit="us", k=0, lo=None, hi=None, step=None)
        p.cached(trace, ("hist", w, tuple(sorted(kw.items()))), lambda: views.hist(p, trace, w, **kw))
        kw = dict(kind="lhist", unit="us", k=0, lo=None, hi=None, step=None)
        p.cached(trace, ("hist", w, tuple(sorted(kw.items()))), lambda: views.hist(p, trace, w, **kw))
        p.cached(trace, ("top", w, 25), lambda: views.top_spans(p, trace, w, 25))
        p.cached(trace, ("flame", w, 0.001), lambda: views.flame(p, trace, w, 0.001))
        sd = p.spans(trace)
        if sd is not None:
            from ...analysis import windows

            windows.cumdur(sd.index)  # the timeline's busy shares

    def close(self) -> None:
        self.jobs.close()


# -- plumbing -------------------------------------------------------------------------------------


def json_response(doc: Any, status: int = 200) -> Response:
    body = json_bytes(doc, separators=(",", ":"))  # (strict JSON: NaN and infinities are null)
    return Response(body, status, media_type="application/json", headers={"cache-control": "no-store"})


def _error(status: int, message: str, **extra) -> Response:
    return json_response({"error": message, **extra}, status)


def _authorized(state: UiState, request: Request) -> bool:
    if not state.token:
        return True
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() not in ("token", "bearer"):
        return False
    return hmac.compare_digest(value.strip().encode(), state.token.encode())


def api(state: UiState, fn: Callable[..., Any], *, body: bool = False, waits: bool = False):
    """An endpoint: auth, then `fn(params, body)` on a worker thread, its answer (a dict, or a
    Response) as JSON, and errors as {"error"} with the status they mean. `waits`: `fn` waits on
    a query process, on a thread of the QUERY_THREADS (not the UI's compute threads)."""
    limiter = []  # made on the UI's loop, at the first request

    async def call(fn, *args):
        if not waits:
            return await run_in_threadpool(fn, *args)
        import anyio.to_thread

        if not limiter:
            limiter.append(anyio.CapacityLimiter(QUERY_THREADS))
        return await anyio.to_thread.run_sync(fn, *args, limiter=limiter[0])

    async def endpoint(request: Request) -> Response:
        if not _authorized(state, request):
            return _error(401, "unauthorized: this server needs its token (Authorization: Token ...)", auth=True)
        data = await request.body() if body else None
        params = dict(request.query_params)
        params["_multi"] = request.query_params
        try:
            out = await call(fn, params, data)
        except Pending as p:
            return json_response(
                {"pending": True, "message": f"building {p.what} (first use of a big trace)", "job": p.job.to_json()},
                202,
            )
        except BadInput as e:
            return _error(400, str(e))
        except NotFound as e:
            return _error(404, str(e))
        except TracehouseError as e:
            status = getattr(e, "status", 500)
            status = status if isinstance(status, int) else 500
            return _error(status, str(e))
        except Exception as e:  # noqa: BLE001 - the page gets the kind of failure, the log the stack trace
            log.exception("web UI %s failed", request.url.path)
            return _error(500, f"internal error ({type(e).__name__}); the server log has the details")
        return out if isinstance(out, Response) else json_response(out)

    return endpoint


def _int(params: dict, name: str, default: int | None = None) -> int | None:
    v = params.get(name)
    if v is None or v == "":
        return default
    try:
        return int(float(v)) if "e" in v.lower() or "." in v else int(v)
    except ValueError:
        raise BadInput(f"parameter {name}={v!r}", expected="an integer") from None


def _window(params: dict, origin: int = 0) -> Window:
    prods = params.get("producers")
    producers = None
    if prods:
        try:
            producers = tuple(int(p) for p in prods.split(",") if p.strip())
        except ValueError:
            raise BadInput(f"producers={prods!r}", expected="producer ids separated by commas") from None
    start, end = _int(params, "start"), _int(params, "end")
    return Window(None if start is None else start + origin, None if end is None else end + origin, producers)


TIME_KEYS = frozenset({"start", "end", "ts", "end_ts", "bin_start", "ts_min", "ts_max"})


def _origin(state: UiState, params: dict, trace: str) -> int:
    """What times of this request are counted from: 0, or the trace's first event with rel=1."""
    if params.get("rel") not in ("1", "true"):
        return 0
    return state.store.trace(trace).ts_min or 0


def _rebased(x: Any, origin: int, key: str | None = None) -> Any:
    """An answer with its times (TIME_KEYS, and lists of them) counted from `origin`."""
    if not origin:
        return x
    if isinstance(x, dict):
        return {k: _rebased(v, origin, k) for k, v in x.items()}
    if key in TIME_KEYS:
        if isinstance(x, int) and not isinstance(x, bool):
            return x - origin
        if isinstance(x, list) and x and isinstance(x[0], int):
            return (np.asarray(x, np.int64) - origin).tolist()
    if isinstance(x, list):
        return [_rebased(v, origin) for v in x]
    return x


def _selection(state: UiState, params: dict) -> tuple[str, Window, int]:
    """The request's trace, its window (in epoch ns) and the origin of its times."""
    trace = _trace(state, params)
    origin = _origin(state, params, trace)
    return trace, _window(params, origin), origin


def _trace(state: UiState, params: dict) -> str:
    name = params.get("trace")
    if not name:
        raise BadInput("missing ?trace=", expected="a trace name")
    state.store.trace(name)  # NotFound when unknown
    return name


# -- handlers ------------------------------------------------------------------------------------


def info(state: UiState, params, _body) -> dict:
    from ... import __version__
    from ...formats import registry

    return {
        "version": __version__,
        "store": str(state.store.path),
        "token": bool(state.token),
        "importers": [
            {
                "name": n,
                "description": getattr(m, "DESCRIPTION", ""),
                "options": sorted(getattr(m, "OPTIONS", None) or {}),
            }
            for n, m in registry.importers().items()
        ],
    }


SORTS = ("name", "format", "created", "ts_min", "ts_max", "event_count", "bytes")


def traces(state: UiState, params, _body) -> dict:
    meta = {}
    for item in params["_multi"].getlist("meta"):
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise BadInput(f"meta={item!r}", expected="KEY=GLOB")
        meta[k] = v
    found = state.store.search(
        format=params.get("format") or None,
        metadata=meta or None,
        start=_int(params, "start"),
        end=_int(params, "end"),
        min_events=_int(params, "min_events"),
        max_events=_int(params, "max_events"),
        min_bytes=_int(params, "min_bytes"),
        max_bytes=_int(params, "max_bytes"),
    )
    q = (params.get("q") or "").lower()
    if q:
        found = [
            t
            for t in found
            if q in t.name.lower()
            or q in (t.description or "").lower()
            or any(q in str(v).lower() for v in t.metadata.values())
        ]
    sort = params.get("sort") or "name"
    if sort not in SORTS:
        raise BadInput(f"sort={sort!r}", expected=" | ".join(SORTS))
    desc = params.get("desc") in ("1", "true")
    found.sort(
        key=lambda t: (
            (getattr(t, sort) is None, getattr(t, sort) or 0)
            if sort != "name" and sort != "format"
            else getattr(t, sort)
        ),
        reverse=desc,
    )
    rows = [
        t.to_json()
        | {"derived": bool(t.metadata.get("tool")), "ts_min_text": None if t.ts_min is None else str(t.ts_min)}
        for t in found
    ]
    return {
        "traces": rows,
        "total": len(rows),
        "events": sum(t.event_count for t in found),
        "bytes": sum(t.bytes for t in found),
        "formats": sorted({t.format for t in state.store.traces()}),
    }


def trace_info(state: UiState, params, _body) -> dict:
    name = _trace(state, params)
    store = state.store
    info = store.trace(name)
    types = store.event_types(name)
    producers = store.producers(name)
    cfg, why = infer_span_config(store, name)
    derived = [
        r["params"].get("derived")
        for r in store.results(trace=name, kind="processed")
        if r["params"].get("derived") and r["params"].get("derived") != name
    ]
    results = [r for r in store.results(trace=name) if r["tool"] != "tracehouse.index"]
    origin = _origin(state, params, name)
    return {
        "trace": _rebased(info.to_json(), origin)
        | {
            "derived": bool(info.metadata.get("tool")),
            "ts_min_text": None if info.ts_min is None else str(info.ts_min),
        },
        "event_types": [
            {
                "name": t.name,
                "kind": t.kind,
                "doc": t.doc,
                "params": [{"name": c.name, "type": c.type, "unit": c.unit} for c in t.params],
            }
            for t in types.values()
        ],
        "producers": [
            {"id": int(p["id"]), "parent": p["parent"], "kind": p["kind"], "name": p["name"]}
            for p in producers[:MAX_PRODUCERS_LISTED]
        ],
        "producer_count": len(producers),
        "spans": cfg.to_json() if cfg is not None else None,
        "spans_why": why,
        "ready": state.prep.ready(name),
        "big": info.event_count > state.prep.inline_events,
        "derived_traces": derived,
        "results": len(results),
    }


def density(state: UiState, params, _body) -> dict:
    (trace, w, origin), bins = _selection(state, params), _int(params, "bins", 1000)
    return _rebased(
        state.prep.cached(trace, ("density", w, bins), lambda: views.density(state.prep, trace, w, bins)), origin
    )


def stats(state: UiState, params, _body) -> dict:
    (trace, w, origin), by = _selection(state, params), params.get("by") or "type"
    return _rebased(state.prep.cached(trace, ("stats", w, by), lambda: views.stats(state.prep, trace, w, by)), origin)


def hist(state: UiState, params, _body) -> dict:
    kind = params.get("kind") or "hist"
    if kind not in ("hist", "lhist"):
        raise BadInput(f"kind={kind!r}", expected="hist | lhist")
    trace, w, origin = _selection(state, params)
    kw = dict(
        kind=kind,
        unit=params.get("unit") or "us",
        k=_int(params, "k", 0),
        lo=_int(params, "min"),
        hi=_int(params, "max"),
        step=_int(params, "step"),
    )
    return _rebased(
        state.prep.cached(
            trace, ("hist", w, tuple(sorted(kw.items()))), lambda: views.hist(state.prep, trace, w, **kw)
        ),
        origin,
    )


def top(state: UiState, params, _body) -> dict:
    (trace, w, origin), n = _selection(state, params), _int(params, "n", 25)
    return _rebased(state.prep.cached(trace, ("top", w, n), lambda: views.top_spans(state.prep, trace, w, n)), origin)


def timeline(state: UiState, params, _body) -> dict:
    name, w, origin = _selection(state, params)
    return _rebased(
        views.timeline(
            state.prep,
            name,
            w,
            params.get("rows") or None,
            _int(params, "width", 1000),
            _int(params, "max_depth", 12),
            params.get("lines") != "0",
            params.get("fields") or None,
        ),
        origin,
    )


def analyses_list(state: UiState, params, _body) -> dict:
    trace = params.get("trace") or None
    if trace is not None:
        state.store.trace(trace)  # NotFound when unknown
    return {"analyses": views.analyses(state.prep, trace)}


WINDOW_PARAMS = ("trace", "start", "end", "producers", "name", "rel", "_multi")


def analysis(state: UiState, params, _body) -> dict:
    name = params.get("name")
    if not name:
        raise BadInput("missing ?name=", expected="an analysis from /api/ui/analyses")
    trace, w, origin = _selection(state, params)
    given = {k: v for k, v in params.items() if k not in WINDOW_PARAMS and v != ""}
    doc = views.analysis(state.prep, name, trace, w, given)
    if origin:  # the rows' time columns too
        at = [i for i, c in enumerate(doc["columns"]) if c["name"] in TIME_KEYS and c["type"] == "int64"]
        for r in doc["rows"]:
            for i in at:
                if isinstance(r[i], (int, str)):  # past 2^53 the digits come as text (console.rows_json)
                    r[i] = int(r[i]) - origin
    return doc


OTEL_FILTERS = ("service", "name", "min_dur", "max_dur", "errors_only", "sort")


def otel_search(state: UiState, params, _body) -> dict:
    trace, w, origin = _selection(state, params)
    given = {k: params[k] for k in OTEL_FILTERS if params.get(k)}
    attrs = [a for a in params["_multi"].getlist("attr") if a.strip()]
    if attrs:
        given["attr"] = attrs
    return _rebased(waterfall.search(state.prep, trace, w, given, _int(params, "limit", 50)), origin)


def _otel_id(params: dict, name: str) -> str:
    v = (params.get(name) or "").strip().lower()
    if not v or any(c not in "0123456789abcdef" for c in v):
        raise BadInput(f"{name}={params.get(name)!r}", expected="hex digits (an OpenTelemetry id)")
    return v


def otel_tree(state: UiState, params, _body) -> dict:
    trace = _trace(state, params)
    collapsed = [c.strip() for c in (params.get("collapsed") or "").split(",") if c.strip()]
    doc = waterfall.tree(
        state.prep,
        trace,
        _otel_id(params, "trace_id"),
        collapsed,
        _int(params, "offset", 0),
        _int(params, "limit", waterfall.MAX_ROWS),
    )
    return _rebased(doc, _origin(state, params, trace))


def otel_span(state: UiState, params, _body) -> dict:
    trace = _trace(state, params)
    doc = waterfall.span(state.prep, trace, _otel_id(params, "trace_id"), _otel_id(params, "span_id"))
    return _rebased(doc, _origin(state, params, trace))


def _float(params: dict, name: str, default: float) -> float:
    v = params.get(name)
    if v is None or v == "":
        return default
    try:
        x = float(v)
    except ValueError:
        raise BadInput(f"parameter {name}={v!r}", expected="a number") from None
    if x != x or x in (float("inf"), float("-inf")):
        raise BadInput(f"parameter {name}={v!r}", expected="a finite number")
    return x


def flame(state: UiState, params, _body) -> dict:
    share = _float(params, "min_share", 0.001)
    trace, w, origin = _selection(state, params)
    root = _int(params, "root")
    if root is not None:  # a zoomed frame: its subtree, asked of the server
        return _rebased(views.flame(state.prep, trace, w, share, root=root), origin)
    return _rebased(
        state.prep.cached(trace, ("flame", w, share), lambda: views.flame(state.prep, trace, w, share)), origin
    )


def frame(state: UiState, params, _body) -> dict:
    node = _int(params, "node")
    if node is None:
        raise BadInput("missing ?node=", expected="a call path id from /api/ui/flame")
    trace, w, origin = _selection(state, params)
    return _rebased(views.frame_spans(state.prep, trace, w, node, _int(params, "n", 100)), origin)


def _json_body(body: bytes | None) -> dict:
    try:
        doc = json.loads(body or b"{}")
    except ValueError as e:
        raise BadInput(f"body is not JSON: {e}") from None
    except RecursionError:  # (nested deeper than the parser's recursion allows)
        raise BadInput("body is not JSON this server reads: nested too deep") from None
    if not isinstance(doc, dict):
        raise BadInput("body is not a JSON object", expected='{"sql": "SELECT ..."}')
    return doc


def _sql_of(state: UiState, doc: dict) -> str:
    """The statement of a console request, refused (413) over the server's statement cap before
    anything parses it."""
    text = str(doc.get("sql") or "")
    if state.check_sql is not None:
        state.check_sql(text)
    return text


def sql(state: UiState, _params, body) -> dict:
    doc = _json_body(body)
    try:
        page_no, size = int(doc.get("page") or 0), int(doc.get("page_size") or 100)
    except (TypeError, ValueError):
        raise BadInput(f"page={doc.get('page')!r}, page_size={doc.get('page_size')!r}", expected="integers") from None
    tag = str(doc.get("id") or "")[:100] or None
    run = state.run_query if tag is None else (lambda text: state.run_query(text, tag=tag))
    if doc.get("flame"):  # the whole answer as a flame graph, when it is folded stacks
        got = console.flame(run, _sql_of(state, doc))
        return {"flame": None if got is None else _flame_doc(*got, "")}
    return console.page(run, _sql_of(state, doc), page_no, size)


def sql_cancel(state: UiState, _params, body) -> dict:
    """Stop the console query the page named `id` (its query process is killed: it answers 499)."""
    tag = str(_json_body(body).get("id") or "")[:100]
    if not tag:
        raise BadInput("missing id", expected='{"id": "<the id the query was sent with>"}')
    return {"cancelled": bool(state.cancel_query and state.cancel_query(tag))}


def sql_download(state: UiState, _params, body) -> Response:
    doc = _json_body(body)
    data, ctype, fname = console.download(state.run_query, _sql_of(state, doc), str(doc.get("format") or "csv"))
    return Response(
        data,
        200,
        media_type=ctype,
        headers={"content-disposition": f'attachment; filename="{fname}"', "cache-control": "no-store"},
    )


def examples(state: UiState, params, _body) -> dict:
    return {"examples": console.examples(state.store, params.get("trace") or None)}


def jobs(state: UiState, params, _body) -> dict:
    jid = _int(params, "id")
    if jid is not None:
        return state.jobs.get(jid).to_json()
    return {"jobs": [j.to_json() for j in state.jobs.list()]}


def import_upload(state: UiState, params, body: bytes) -> dict:
    from ...formats import registry
    from ...formats.column_mapping import Mapping

    if not body:
        raise BadInput("empty upload", expected="the file as the request body")
    filename = Path(params.get("filename") or "upload").name
    name = params.get("name") or filename.split(".")[0]
    from ...store.store import check_trace_name

    check_trace_name(name)
    if any(t.name == name for t in state.store.traces()):
        raise BadInput(f"a trace named {name!r} exists", expected="another name (or delete it first)")
    updir = Path(state.store.path) / "uploads"
    updir.mkdir(exist_ok=True)
    tmp = tempfile.NamedTemporaryFile(dir=updir, suffix="-" + filename, delete=False)  # noqa: SIM115 - with tmp below
    with tmp:
        tmp.write(body)
    path = Path(tmp.name)
    fmt = params.get("format") or registry.sniff(path)
    if not fmt:
        path.unlink(missing_ok=True)
        raise BadInput(f"{filename}: format not recognised", expected="pick the format")
    try:
        imp = registry.importer(fmt, path)
    except BadInput:
        path.unlink(missing_ok=True)
        raise
    options = _importer_options(imp, params["_multi"].getlist("opt"))

    def run(job) -> dict:
        try:
            job.step = f"importing {filename} ({len(body):,} bytes) as {fmt}"
            report = imp.import_file(
                state.store, path, name, mapping=Mapping(), description=f"uploaded {filename}", **options
            )
            return report.to_json()
        finally:
            path.unlink(missing_ok=True)

    job = state.jobs.submit("import", name, run)
    return {"job": job.to_json()}


def _importer_options(imp, items: list[str]) -> dict:
    known = getattr(imp, "OPTIONS", None) or {}
    out: dict = {}
    for item in items:
        k, sep, v = item.partition("=")
        k = k.strip().lstrip("-").replace("-", "_")
        if not sep or k not in known:
            raise BadInput(f"importer option {item!r}", expected=", ".join(f"{o}=VALUE" for o in known) or "none")
        if known[k].get("action") == "append":
            out.setdefault(k, []).append(v)
        else:
            out[k] = v
    return out


def results_list(state: UiState, params, _body) -> dict:
    trace = params.get("trace") or None
    rows = state.store.results(trace=trace, kind=params.get("kind") or None)
    if params.get("indexes") not in ("1", "true"):
        rows = [r for r in rows if r["tool"] != "tracehouse.index"]
    return {
        "results": [
            {
                "id": r["id"],
                "kind": r["kind"],
                "name": r["name"],
                "tool": r["tool"],
                "created": r["created"],
                "traces": r["traces"],
                "has_table": bool(r["path"]),
            }
            for r in rows
        ]
    }


HIST_COLUMNS = ({"lo", "hi", "count"}, {"label", "count"}, {"low", "high", "count"})


def result(state: UiState, params, _body) -> dict:
    rid = _int(params, "id")
    if rid is None:
        raise BadInput("missing ?id=", expected="a result id")
    r = state.store.result(rid)
    doc = {k: r.get(k) for k in ("id", "kind", "name", "tool", "params", "payload", "created")}
    doc["traces"] = r.get("traces")
    if r["kind"] == "processed":
        doc["view"] = "processed"
        doc["derived_trace"] = (r.get("payload") or {}).get("derived_trace") or r["params"].get("derived")
        return doc
    if not r.get("path"):
        doc["view"] = "note"
        return doc
    page_no, size = max(0, _int(params, "page", 0)), max(1, min(_int(params, "page_size", 200), 2000))
    table, total = _result_page(state.store, r, page_no * size, size)
    doc["table"] = {
        "columns": table.column_names,
        "types": [str(f.type) for f in table.schema],
        "rows": console.rows_json(table),
        "page": page_no,
        "page_size": size,
        "total": total,
    }
    cols = set(table.column_names)
    doc["view"] = "text" if r["kind"] == "file" else "histogram" if any(h <= cols for h in HIST_COLUMNS) else "table"
    folded = (r.get("params") or {}).get("value", "self_ns") == "self_ns"
    if doc["view"] == "text" and "line" in cols and folded and page_no == 0:  # (the later pages: text)
        flame = _folded_flame(state.store, r)
        if flame is not None:
            doc["view"], doc["flame"] = "flame", flame
    return doc


def _folded_flame(store, r: dict) -> dict | None:
    """A `file` result of folded stacks (its whole text, not one page) as the flame graph's
    nodes (those over 0.1 % of the whole, at most views.MAX_NODES), None when it is not that."""
    from ...analysis.samples import folded_tree

    text = store.result_table(r["id"])
    tree = folded_tree(text.column("line").combine_chunks())
    unit = "ns" if str(r.get("tool", "")).startswith("tracehouse.analysis.") else ""
    return None if tree is None else _flame_doc(tree, text.num_rows, unit)


def _flame_doc(tree: pa.Table, stacks: int, unit: str) -> dict | None:
    """A calling-context tree of stacks as the flame graph's nodes (those over 0.1 % of the
    whole, at most views.MAX_NODES); None when it is empty."""
    from ...analysis.samples import kept_nodes

    if tree.num_rows == 0:
        return None
    kept, threshold = kept_nodes(tree, 0.001, views.MAX_NODES)
    cols = {
        c: kept.column(c).to_pylist()
        for c in ("node", "parent", "depth", "name", "calls", "total_ns", "self_ns", "cut_ns")
    }
    nodes = [
        dict(zip(("id", "parent", "depth", "name", "calls", "total", "self", "cut"), vals))
        for vals in zip(*cols.values())
    ]
    roots = sum(n["total"] for n in nodes if n["parent"] < 0)
    return {
        "nodes": nodes,
        "total": roots,
        "paths": tree.num_rows,
        "spans": stacks,
        "what": "stacks",
        "unit": unit,
        "threshold_ns": threshold,
    }


def _result_page(store, r: dict, offset: int, n: int) -> tuple[pa.Table, int]:
    """Rows [offset, offset+n) of a result's table, reading only the row groups that hold them."""
    path = Path(store.path) / r["path"]
    if path.suffix == ".arrow":
        t = store.result_table(r["id"])  # memory-mapped
        return t.slice(offset, n), t.num_rows
    import pyarrow.parquet as pq

    f = pq.ParquetFile(path)
    md = f.metadata
    total = md.num_rows
    groups, first, pos = [], None, 0
    for i in range(md.num_row_groups):
        rows = md.row_group(i).num_rows
        if pos + rows > offset and pos < offset + n:
            groups.append(i)
            first = pos if first is None else first
        pos += rows
    if not groups:
        return f.schema_arrow.empty_table(), total
    t = f.read_row_groups(groups)
    return t.slice(offset - first, n), total


# -- the app -------------------------------------------------------------------------------------


def _asset(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


def build_app(state: UiState) -> Starlette:
    assets = {name: _asset(name) for name in STATIC}

    def static(name: str):
        async def serve(_request: Request) -> Response:
            return Response(assets[name], 200, media_type=STATIC[name], headers={"cache-control": "no-cache"})

        return serve

    def route(path: str, fn, methods=("GET",), body: bool = False, waits: bool = False) -> Route:
        return Route(path, api(state, lambda p, b: fn(state, p, b), body=body, waits=waits), methods=list(methods))

    routes = [
        Route("/", static("index.html")),
        Route("/favicon.ico", static("favicon.svg")),
        *[Route(f"/ui/{name}", static(name)) for name in STATIC],
        route("/api/ui/info", info),
        route("/api/ui/traces", traces),
        route("/api/ui/import", import_upload, ("POST",), body=True),
        route("/api/ui/jobs", jobs),
        route("/api/ui/trace", trace_info),
        route("/api/ui/density", density),
        route("/api/ui/stats", stats),
        route("/api/ui/hist", hist),
        route("/api/ui/top", top),
        route("/api/ui/timeline", timeline),
        route("/api/ui/flame", flame),
        route("/api/ui/frame", frame),
        route("/api/ui/analyses", analyses_list),
        route("/api/ui/analysis", analysis),
        route("/api/ui/sql", sql, ("POST",), body=True, waits=True),
        route("/api/ui/sql/cancel", sql_cancel, ("POST",), body=True, waits=True),
        route("/api/ui/sql/download", sql_download, ("POST",), body=True, waits=True),
        route("/api/ui/examples", examples),
        route("/api/ui/results", results_list),
        route("/api/ui/result", result),
        route("/api/ui/debug", debugview.debug_route, ("POST",), body=True),
        route("/api/ui/otel/search", otel_search),
        route("/api/ui/otel/tree", otel_tree),
        route("/api/ui/otel/span", otel_span),
    ]

    async def not_found(request: Request, _exc) -> Response:
        return _error(404, f"no route {request.url.path}")

    async def not_allowed(request: Request, _exc) -> Response:
        return _error(405, f"{request.method} {request.url.path} is not allowed")

    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed})


def start(store, token: str | None, api) -> UiBridge:
    """The UI attached to a running server: its app on its own thread (bridge.py), its SQL run
    by the server's own query execution (the `/api/query` path)."""
    from .bridge import UiBridge

    def run_query(sql_text: str, tag: str | None = None) -> pa.Table:
        # The server's query workers (server/queries.py): read-only check, deadline, answer cap.
        body, _ctype = api.queries.run(sql_text, "arrow", tag="ui:" + tag if tag else None)
        return pa.ipc.open_stream(body).read_all()

    state = UiState(
        store,
        token=token,
        run_query=run_query,
        check_sql=api.queries.check_size,
        cancel_query=lambda tag: api.queries.cancel("ui:" + tag),
    )
    return UiBridge(build_app(state), state=state, open_paths=ASSET_PATHS)
