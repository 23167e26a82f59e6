"""The web UI's Debug page: `POST /api/ui/debug` in-process (its answers equal `tracehouse debug`'s,
the state it hands back continues the session), then the page in headless Chromium."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

import tracehouse
from tracehouse.record import debug
from tracehouse.record.record import record
from tracehouse.server.ui.app import UiState, build_app
from tracehouse.server.ui.bridge import call_app

PROGRAM = """\
def square(x):
    y = x * x
    return y

total = 0
for k in range(3):
    total = total + square(k)
"""


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    d = tmp_path_factory.mktemp("dbgui")
    (d / "prog.py").write_text(PROGRAM)
    s = tracehouse.open(d / "store")
    record(s, [sys.executable, str(d / "prog.py")], "prog")
    yield s
    s.close()


def post(app, body) -> tuple[int, dict]:
    status, _h, out = asyncio.run(
        call_app(app, "POST", "/api/ui/debug", "", [("content-type", "application/json")], json.dumps(body).encode())
    )
    return status, json.loads(out)


def test_debug_route_answers_as_the_command_does_and_continues_from_its_state(rec):
    state = UiState(rec, token=None, run_query=rec.sql)
    app = build_app(state)
    st, r = post(app, {"trace": "prog", "commands": ["b square", "c"]})
    assert st == 200
    ses = debug.Session(rec, "prog")
    debug.run(ses, "b square")
    want = debug.run(ses, "c")
    assert r["answers"][1]["position"] == want["position"] and r["position"]["function"] == "square"
    assert [x["current"] for x in r["source"]["lines"]].count(True) == 1
    assert [f["function"] for f in r["frames"]] == ["square", "<module>"]
    # The state handed back continues the session: the breakpoint too.
    st, r2 = post(app, {"trace": "prog", "state": r["state"], "commands": ["c"]})
    assert r2["frames"][0]["locals"]["x"]["value"] == 1
    st, r3 = post(app, {"trace": "prog", "state": r2["state"], "commands": ["origin total", "nope"]})
    assert r3["answers"][0]["write"]["value"]["value"] == 0 and "unknown debug command" in r3["answers"][1]["error"]
    st, bad = post(app, {"commands": ["n"]})
    assert st == 400 and "no trace" in bad["error"]
    state.close()


def test_debug_page_steps_and_highlights_the_line(rec, tmp_path):
    from server.test_webui_browser import CHROMIUM, _start, _stop, _watched

    playwright = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    rec.flush()
    rec.close()
    proc, info = _start(
        ["serve", "--port", "0", "--tcp-port", "-1", "--quiet"], Path(rec.path), tmp_path / "ready.json"
    )
    try:
        with playwright.sync_playwright() as p:
            b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                with _watched(b, viewport={"width": 1280, "height": 900}) as ctx:
                    pg = ctx.new_page()
                    errors = []
                    pg.on("pageerror", lambda e: errors.append(str(e)))
                    pg.goto(info["http"] + "/#/debug/prog")
                    pg.wait_for_selector(".debug-source .current")
                    first = pg.locator(".debug-position").inner_text()
                    pg.click("button[data-cmd=n]")
                    pg.wait_for_function(f"document.querySelector('.debug-position').innerText !== {first!r}")
                    pg.fill("input[aria-label='debugger command']", "b square")
                    pg.keyboard.press("Enter")
                    pg.wait_for_selector(".debug-answers >> text=breakpoints")
                    pg.click("button[data-cmd=c]")
                    pg.wait_for_function("document.querySelector('.debug-position').innerText.includes('square')")
                    assert "y = x * x" in pg.locator(".debug-source .current").inner_text()
                    pg.click("button[data-cmd=bo]")
                    pg.wait_for_function("document.querySelector('.debug-position').innerText.includes('<module>')")
                    assert not errors, errors
            finally:
                b.close()
    finally:
        _stop(proc)
