"""The web UI of `tracehouse serve`: a trace explorer that asks the server for aggregates.

Modules (each says what it owns):
  bridge.py     runs the UI's ASGI app in-process, on a thread and event loop of its own,
                for the requests the native front end hands over (`/`, `/ui/...`, `/api/ui/...`)
  app.py        the Starlette app: routes, auth, errors as JSON, static assets
  prepare.py    derived data a page needs (density index, spans, span index, call paths),
                built inline for small traces, on a background job for big ones
  views.py      what each page shows, computed from the analyses and the derived indexes:
                density, statistics, histograms, top spans, timeline level of detail, flame graph
  console.py    the SQL console: pages, downloads (CSV, Parquet) and example queries,
                over the server's own query execution
  demo.py       `tracehouse demo`: example traces of every format, then the UI
  static/       index.html, app.js, app.css: hand-written, no build step, no network

Why a framework in-process and not a second server: the native front end already owns the
socket, the limits and the token check; the UI's routes are few and read-mostly, and
Starlette gives them routing, typed responses and error handling without a second port.
The dispatcher only recognises the path and passes the request on, so UI work never runs
on the ingest hot path.
"""
