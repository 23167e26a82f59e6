"""The web UI's Debug page: `POST /api/ui/debug`, `tracehouse debug` over HTTP.

Owns the one route of the page (`static/debug.js` draws it). The page holds the session's
state (its position, the write it shows, its breakpoints) and sends it with the commands to
run; the answer is each command's answer (as `tracehouse debug --json` gives it), the new
state, and what the page draws: the position, the source around the current line, and the
stack with every frame's variables. The route keeps one `debug.Session` per trace (its indexes
mapped once) and sets the state on it for each request, under a lock per trace: answers are a
few binary searches, so requests of one trace take turns.

    POST /api/ui/debug  {"trace": T, "state": {"producer", "ts", "focus", "breakpoints": [spec]} | null,
                         "commands": ["n", "origin x", ...]}
    -> {"answers": [...], "state": {...}, "position": {...}, "source": {...}, "frames": [...]}
"""

from __future__ import annotations

import json
import threading
from typing import Any

from ...errors import BadInput

_SESSIONS: dict[tuple[str, str, str], tuple[Any, threading.Lock]] = {}
_LOCK = threading.Lock()
MAX_COMMANDS = 50


def _session(store, trace: str):
    from ...record import debug

    key = (str(store.path), trace, store.stamp(trace))
    with _LOCK:
        got = _SESSIONS.get(key)
        if got is None:
            for k in [k for k in _SESSIONS if k[:2] == key[:2]]:
                del _SESSIONS[k]
            got = _SESSIONS[key] = (debug.Session(store, trace), threading.Lock())
    return got


def _restore(ses, state: dict | None) -> None:
    ses.focus = None
    ses.breakpoints = []
    if not state:
        ses.pos = ses._main_stop(None) or ses._first_stop(None)
        return
    p, ts = int(state["producer"]), int(state["ts"])
    stop = ses._stop(p, ts, True, inclusive=True)
    if stop is None:
        raise BadInput(f"no stop of thread {p} at {ts}", expected="a state the page was given")
    ses.pos = stop
    for spec in state.get("breakpoints") or []:
        if spec.get("kind") == "watch":
            ses.watch(spec["spec"])
        else:
            ses.add_break(spec["spec"])
    f = state.get("focus")
    ses.focus = dict(f) if f else None
    for b, spec in zip(ses.breakpoints, state.get("breakpoints") or []):
        b.id = int(spec.get("id", b.id))


def _state(ses) -> dict:
    return {
        "producer": ses.pos["producer"],
        "ts": ses.pos["ts"],
        "focus": ses.focus,
        "breakpoints": [b.to_json() for b in ses.breakpoints],
    }


def debug_route(ui_state, _params, body: bytes | None) -> dict:
    from ...record import debug

    try:
        req = json.loads(body or b"{}")
    except ValueError:
        raise BadInput("the body is not JSON", expected='{"trace": ..., "commands": [...]}') from None
    trace = req.get("trace")
    if not isinstance(trace, str):
        raise BadInput("no trace", expected='{"trace": NAME, ...}')
    commands = req.get("commands") or []
    if not isinstance(commands, list) or len(commands) > MAX_COMMANDS:
        raise BadInput("commands", expected=f"a list of at most {MAX_COMMANDS} command strings")
    ses, lock = _session(ui_state.store, trace)
    with lock:
        _restore(ses, req.get("state"))
        answers = []
        for c in commands:
            try:
                answers.append({"command": c, **debug.run(ses, str(c))})
            except BadInput as e:
                answers.append({"command": c, "error": str(e)})
        return {
            "answers": answers,
            "state": _state(ses),
            "position": ses.position(),
            "view": ses.view(),
            "source": ses.source(12),
            "frames": ses.frames(),
            "threads": ses.threads,
        }
