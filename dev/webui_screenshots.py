"""The web UI screenshots of the README and docs/webui.md (docs/webui/*.png): `tracehouse demo` served into a fresh store
and each page shot by Debian's headless Chromium through Python playwright, the same way
tests/server/test_webui_browser.py drives it. Nothing is fetched from the network.

    .venv/bin/python dev/webui_screenshots.py            # writes docs/webui/{traces,overview,...}.png
    .venv/bin/python dev/webui_screenshots.py --only waterfall   # that page's only

The PNGs are 1280x800 (the viewport, not the whole page), reduced to a 256-colour palette with
Pillow (a matplotlib dependency) so the set stays small in the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("TRACEHOUSE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
WAIT_MS = 60_000  # every wait ends: a page that never draws fails the script instead of hanging it
IDLE = "!document.querySelector('.pending[role=status]')"


def _serve_demo(store: Path, events: int) -> tuple[subprocess.Popen, str]:
    ready = store.parent / "ready.json"
    env = dict(os.environ, TRACEHOUSE_HOME=str(store))
    env.pop("TRACEHOUSE_TOKEN", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tracehouse.cli",
            "demo",
            "--events",
            str(events),
            "--port",
            "0",
            "--ready-file",
            str(ready),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    end = time.monotonic() + 600
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > end:
            proc.kill()
            sys.exit("tracehouse demo did not start")
        time.sleep(0.2)
    return proc, json.loads(ready.read_text())["http"]


def _shoot(pg, out: Path, name: str) -> None:
    pg.wait_for_function(IDLE, timeout=WAIT_MS)
    pg.wait_for_timeout(300)  # the last redraw after the answers arrived
    raw = out / f"{name}.raw.png"
    pg.screenshot(path=str(raw), timeout=WAIT_MS)
    Image.open(raw).convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT).save(
        out / f"{name}.png", optimize=True
    )
    raw.unlink()
    print(f"{out / (name + '.png')}: {(out / (name + '.png')).stat().st_size:,} bytes", file=sys.stderr)


def shoot_waterfall(pg, base: str, out: Path) -> None:
    """The OpenTelemetry example's traces with an error, the slowest opened, its payment span picked."""
    pg.goto(base + "/#/waterfall/demo-otlp?errors=1")
    pg.wait_for_selector("table[aria-label='trace results'] tbody tr a")
    pg.locator("table[aria-label='trace results'] tbody tr a").first.click()
    pg.wait_for_selector(".wf-row[data-span-id]")
    pg.locator(".wf-row.error[data-span-id]", has_text="charge").first.click()
    pg.wait_for_selector("table[aria-label='span attributes']")
    _shoot(pg, out, "waterfall")


def shoot_pages(base: str, out: Path, only: set[str] | None = None) -> None:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], timeout=WAIT_MS)
        try:
            pg = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
            pg.set_default_timeout(WAIT_MS)
            if only:
                if "waterfall" in only:
                    shoot_waterfall(pg, base, out)
                return
            pg.goto(base + "/#/")
            pg.wait_for_function("document.querySelectorAll('table[aria-label=traces] tbody tr').length >= 8")
            _shoot(pg, out, "traces")

            pg.goto(base + "/#/trace/demo-tod")
            pg.wait_for_selector("[data-stats=type] .legend")
            pg.wait_for_selector("svg[aria-label^=hist] rect.bar")
            _shoot(pg, out, "overview")

            pg.goto(base + "/#/timeline/demo-strace")
            pg.wait_for_selector("#tl-labels .lab")
            pg.wait_for_function("document.querySelector('#tl-canvas-box canvas').height > 50")
            pg.fill("input[name=find]", "write")  # the search: the first write, on its thread, outlined
            pg.keyboard.press("Enter")
            pg.wait_for_function("location.hash.includes('producers=')")
            pg.wait_for_selector("#tl-labels .lab")
            pg.wait_for_function("document.querySelector('main').getAttribute('aria-busy') === 'false'")
            box = pg.locator("#tl-canvas-box canvas").bounding_box()
            pg.mouse.click(box["x"] + box["width"] / 2, box["y"] + 7)  # its details
            pg.wait_for_selector("dl[aria-label='span details']")
            _shoot(pg, out, "timeline")

            pg.goto(base + "/#/timeline/demo-lineproto")  # counters: two fields of a row in one track
            pg.wait_for_selector(".fields input[name=field]")
            boxes = pg.locator(".fields input[name=field]")
            unchecked = [i for i, c in enumerate(boxes.evaluate_all("bs => bs.map(b => b.checked)")) if not c]
            if unchecked:
                boxes.nth(unchecked[0]).check()
            pg.wait_for_selector("#tl-labels .series-legend [data-series] >> nth=1")
            pg.wait_for_function("document.querySelector('main').getAttribute('aria-busy') === 'false'")
            legend = pg.locator("#tl-labels .series-legend").first.bounding_box()
            box = pg.locator("#tl-canvas-box canvas").bounding_box()
            pg.mouse.click(box["x"] + box["width"] * 0.6, legend["y"] + legend["height"] / 2)  # the values there
            pg.mouse.move(box["x"] + box["width"] * 0.6, legend["y"] + legend["height"] / 2)
            _shoot(pg, out, "counters")

            pg.goto(base + "/#/calls/demo-chrome")
            pg.wait_for_selector(".flame svg rect")
            box = pg.locator(".flame svg text", has_text="RunTimers").first.bounding_box()
            with pg.expect_response(lambda r: "root=" in r.url):  # a frame zoomed: its subtree asked of the server
                pg.mouse.click(box["x"] + 5, box["y"] + box["height"] / 2)
            pg.wait_for_selector("table[aria-label=spans] tbody tr")  # the spans behind it listed
            pg.evaluate("window.scrollTo(0, 0)")
            _shoot(pg, out, "calls")

            pg.goto(base + "/#/sql")
            pg.wait_for_selector("select[aria-label='example queries'] optgroup", state="attached")
            pg.fill(
                "textarea.sql",
                "SELECT type, count(*) AS events, round(avg(dur) / 1e3, 1) AS mean_us\n"
                'FROM "demo-strace".events GROUP BY type ORDER BY events DESC',
            )
            pg.get_by_role("button", name="Run").click()
            pg.wait_for_selector("table[aria-label='query result'] tbody tr")
            _shoot(pg, out, "sql")

            pg.goto(base + "/#/results")
            pg.wait_for_selector("table[aria-label=results] tbody tr")
            pg.locator("table[aria-label=results] tbody tr", has_text="stap").locator("a").first.click()
            pg.wait_for_selector("svg[aria-label^=histogram] rect.bar", state="attached")
            _shoot(pg, out, "results")
            shoot_waterfall(pg, base, out)
        finally:
            browser.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "webui")
    ap.add_argument("--events", type=int, default=200_000, help="TOD events of the demo (default 200K)")
    ap.add_argument("--only", action="append", choices=["waterfall"], help="shoot only this page (repeat)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="th-shots-"))
    proc, base = _serve_demo(tmp / "store", args.events)
    try:
        shoot_pages(base, args.out, set(args.only or ()))
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
