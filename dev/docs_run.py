"""Runs the shell blocks of the documentation: every ```sh (or bash) and ```python block of each
docs/ page, in the order of mkdocs.yml's nav, and the README's tour, top to bottom.

Owns what "every command in the docs runs" means. Each page runs as one bash script (`set -e`,
`pipefail`: its blocks share variables, a later block sees what an earlier one made) in a fresh
directory that looks like the root of a clone: `dev/`, `examples/`, `python/`, `tests/` and `.venv/`
are links to this repository's, so a page may name `python/tracehouse/server/ui/examples/...` or
`examples/io_users.c`, and everything it writes (the store `./tracehouse-data`, exported files)
lands in the fresh directory. A python block runs with the venv's interpreter in that directory.

Where user namespaces are allowed (`unshare -rn`), each page runs in a network namespace of its
own with only loopback up: the pages may use the documented default ports (8086, 8094) while
other servers run on this machine. Whatever a page leaves running is ended with it.

A block the runner must not run (it needs what CI lacks: a Spark cluster, kernel probes, hours)
is preceded by the marker line `<!-- docs: skip -->`, and the page shows why in an admonition
titled "Not run by the docs test" just above it; a marker without that note is an error, so a
reader always sees which examples were not run.

    .venv/bin/python dev/docs_run.py                  # every page; exit 1 when one fails
    .venv/bin/python dev/docs_run.py --page replay.md --page README.md
    .venv/bin/python dev/docs_run.py --list           # pages, blocks and markers, nothing run

tests/test_docs.py runs it from `make test`, one test per page.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_TOUR = "## Five-minute tour"  # the README's run starts at this heading and ends at the next
RUN_LANGS = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "python", "py": "python", "python3": "python"}
SKIP = "<!-- docs: skip -->"
NOTE_TITLE = "Not run by the docs test"
LINKED = ("dev", "examples", "python", "tests", ".venv")
PAGE_TIMEOUT_S = 300.0
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[A-Za-z0-9_+-]*)[^\n]*$")


@dataclasses.dataclass
class Block:
    page: str
    line: int  # 1-based line of the first line of code (after the fence)
    lang: str  # "sh" or "python"; "" for a block of another language
    code: str
    skip: bool


class DocsError(Exception):
    pass


def nav_pages() -> list[str]:
    """docs/ pages in the order of mkdocs.yml's nav, then any other page of docs/ (sorted)."""
    import yaml

    cfg = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    order: list[str] = []

    def walk(item) -> None:
        if isinstance(item, str):
            order.append(item)
        elif isinstance(item, dict):
            for v in item.values():
                walk(v)
        elif isinstance(item, list):
            for v in item:
                walk(v)

    walk(cfg.get("nav", []))
    rest = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if str(p.relative_to(DOCS)) not in order)
    return [p for p in order if p.endswith(".md")] + rest


def blocks(page: str, text: str) -> list[Block]:
    """The fenced blocks of one page, with their skip markers checked."""
    lines = text.splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if lines[i].strip() == SKIP and not _next_is_fence(lines, i):
                raise DocsError(f"{page}:{i + 1}: {SKIP} is not followed by a code block")
            i += 1
            continue
        indent, lang = len(m["indent"]), m["lang"].lower()
        start = i + 1
        j = start
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        if j == len(lines):
            raise DocsError(f"{page}:{i + 1}: a code block that is never closed")
        code = "\n".join(ln[indent:] if ln[:indent].strip() == "" else ln for ln in lines[start:j])
        skip = _marked(lines, i)
        if skip and not _noted(lines, i):
            raise DocsError(
                f'{page}:{i + 1}: a block marked {SKIP} needs an admonition titled "{NOTE_TITLE}" above it saying why'
            )
        out.append(Block(page, start + 1, RUN_LANGS.get(lang, ""), code, skip))
        i = j + 1
    return out


def _next_is_fence(lines: list[str], i: int) -> bool:
    j = i + 1
    while j < len(lines) and not lines[j].strip():
        j += 1
    return j < len(lines) and bool(FENCE.match(lines[j]))


def _marked(lines: list[str], fence: int) -> bool:
    j = fence - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    return j >= 0 and lines[j].strip() == SKIP


def _noted(lines: list[str], fence: int) -> bool:
    """An admonition titled NOTE_TITLE within the 15 lines above the marker."""
    return any(
        re.match(r'^\s*(!!!|\?\?\?)\+? *\w+ +"' + re.escape(NOTE_TITLE), ln) for ln in lines[max(0, fence - 16) : fence]
    )


def page_text(page: str) -> str:
    """The text a page runs: a docs page whole; the README from its tour heading to the next."""
    if page == "README.md":
        text = README.read_text()
        if README_TOUR not in text:
            raise DocsError(f"README.md has no '{README_TOUR}' section")
        head, tour = text.split(README_TOUR, 1)
        tour = tour.split("\n## ", 1)[0]
        # keep the line numbers of the README itself
        return "\n" * head.count("\n") + README_TOUR + tour
    return (DOCS / page).read_text()


def script(page: str) -> tuple[str, list[tuple[int, int]], list[Block]]:
    """The bash script of a page's runnable blocks and a map from its lines to the page's."""
    bs = blocks(page, page_text(page))
    lines = [
        "set -eEo pipefail",
        "trap 'echo \"docs-run: the command at script line $LINENO failed (exit $?)\" >&2' ERR",
    ]
    where: list[tuple[int, int]] = [(0, 0), (0, 0)]
    for b in bs:
        if not b.lang or b.skip:
            continue
        lines.append(f"echo '--- {page}:{b.line}' >&2")
        where.append((b.line, b.line))
        if b.lang == "python":
            if "__DOCS_PY__" in b.code:
                raise DocsError(f"{page}:{b.line}: a python block may not contain __DOCS_PY__")
            lines.append("python - <<'__DOCS_PY__'")
            where.append((b.line, b.line))
        for k, ln in enumerate(b.code.splitlines()):
            lines.append(ln)
            where.append((b.line + k, b.line))
        if b.lang == "python":
            lines.append("__DOCS_PY__")
            where.append((b.line, b.line))
    return "\n".join(lines) + "\n", where, bs


def _netns_prefix() -> list[str]:
    """`unshare -rn` with loopback up, when this machine allows it; else nothing."""
    if not (shutil.which("unshare") and shutil.which("ip")):
        return []
    try:
        r = subprocess.run(["unshare", "-rn", "ip", "link", "set", "lo", "up"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return ["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$0" "$@"'] if r.returncode == 0 else []


@dataclasses.dataclass
class Result:
    page: str
    ok: bool
    seconds: float
    blocks_run: int
    blocks_skipped: int
    output: str
    failed_line: int | None = None


def run_page(page: str, *, timeout: float = PAGE_TIMEOUT_S, keep: bool = False, isolate: bool = True) -> Result:
    text, where, bs = script(page)
    ran = sum(1 for b in bs if b.lang and not b.skip)
    skipped = sum(1 for b in bs if b.lang and b.skip)
    if not ran:
        return Result(page, True, 0.0, 0, skipped, "")
    work = Path(tempfile.mkdtemp(prefix="th-docs-"))
    try:
        for name in LINKED:
            if (ROOT / name).exists():
                (work / name).symlink_to(ROOT / name)
        (work / "docs-run.sh").write_text(text)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRACEHOUSE_")}
        venv_bin = ROOT / ".venv" / "bin"
        if not venv_bin.exists():
            venv_bin = Path(sys.executable).parent
        env["PATH"] = f"{venv_bin}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONUNBUFFERED"] = "1"
        env.pop("VIRTUAL_ENV", None)
        cmd = [*(_netns_prefix() if isolate else []), "bash", "docs-run.sh"]
        t0 = time.monotonic()
        # Output to a file, not a pipe: a server the page left running would hold a pipe open.
        with open(work / "docs-run.out", "w+") as log:
            proc = subprocess.Popen(
                cmd,
                cwd=work,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                rc = proc.wait(timeout=timeout)
                late = ""
            except subprocess.TimeoutExpired:
                rc = -1
                late = f"\ndocs-run: {page} did not finish within {timeout:.0f} s"
            seconds = time.monotonic() - t0
            _end_group(proc.pid)  # what the page left running (a server it did not stop)
            proc.wait()
            log.seek(0)
            out = log.read() + late
        failed = None
        m = re.findall(r"docs-run: the command at script line (\d+) failed", out)
        if m:
            n = int(m[-1])
            failed = where[n - 1][0] if 0 < n <= len(where) else None
        return Result(page, rc == 0, seconds, ran, skipped, out, failed)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}", file=sys.stderr)


def _end_group(pgid: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


def all_pages() -> list[str]:
    return ["README.md", *nav_pages()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--page", action="append", help="a page (docs/-relative, or README.md); repeat")
    ap.add_argument("--list", action="store_true", help="list pages and blocks, run nothing")
    ap.add_argument("--keep", action="store_true", help="keep each page's directory")
    ap.add_argument("--show", action="store_true", help="print every page's output, not only a failed one's")
    ap.add_argument("--no-netns", action="store_true", help="run in this network namespace")
    ap.add_argument("--timeout", type=float, default=PAGE_TIMEOUT_S, help="seconds per page")
    args = ap.parse_args()
    pages = args.page or all_pages()
    if args.list:
        for p in pages:
            bs = blocks(p, page_text(p))
            runs = [b for b in bs if b.lang]
            print(f"{p}: {sum(not b.skip for b in runs)} blocks to run, {sum(b.skip for b in runs)} marked skip")
        return 0
    failed = 0
    total = 0.0
    for p in pages:
        r = run_page(p, timeout=args.timeout, keep=args.keep, isolate=not args.no_netns)
        total += r.seconds
        state = "ok" if r.ok else f"FAILED at {p}:{r.failed_line}"
        print(f"{p}: {state} ({r.blocks_run} blocks run, {r.blocks_skipped} skipped, {r.seconds:.1f} s)", flush=True)
        if not r.ok:
            failed += 1
            print(r.output[-6000:], flush=True)
        elif args.show:
            print(r.output, flush=True)
    print(f"{len(pages) - failed} pages ok, {failed} failed, {total:.0f} s in all")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
