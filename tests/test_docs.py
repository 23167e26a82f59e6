"""The documentation: every shell block of docs/ and the README's tour runs (dev/docs_run.py, one
test per page, each on a fresh store), every `tracehouse ...` command the pages show is one the
CLI accepts, generated pages are current, the README stays short, and the pages speak of the
software, not of how it was built."""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.paths import ROOT
from tracehouse.cli import command as cli

sys.path.insert(0, str(ROOT / "dev"))
import docs_gen  # noqa: E402
import docs_run  # noqa: E402

README = ROOT / "README.md"
DOCS = ROOT / "docs"


def _pages(reports: bool = False) -> list[Path]:
    """README and docs/; with `reports`, the kept benchmark runs' reports too (generated text)."""
    runs = DOCS / "benchmarks"
    return [README, *sorted(p for p in DOCS.rglob("*.md") if reports or p.parent.parent != runs)]


def _written_pages() -> list[Path]:
    """The pages whose commands someone wrote (the CLI reference is the parsers' own)."""
    return [p for p in _pages() if p != DOCS / "cli.md"]


def _runnable() -> list[str]:
    return [
        p for p in docs_run.all_pages() if any(b.lang and not b.skip for b in docs_run.blocks(p, docs_run.page_text(p)))
    ]


# -- every block runs ------------------------------------------------------------------------------


@pytest.mark.docs
@pytest.mark.parametrize("page", _runnable())
def test_docs_shell_blocks_run_on_a_fresh_store(page):
    r = docs_run.run_page(page)
    assert r.ok, f"{page}:{r.failed_line} failed\n{r.output[-5000:]}"


def test_the_runner_follows_the_nav_and_refuses_a_skip_without_a_note():
    pages = docs_run.all_pages()
    assert pages[0] == "README.md" and pages.index("getting-started.md") < pages.index("analyses.md")
    assert set(_runnable()) >= {"README.md", "getting-started.md", "formats/strace.md", "http-api.md", "replay.md"}
    silent = "Some text.\n\n<!-- docs: skip -->\n```sh\ntracehouse ls\n```\n"
    with pytest.raises(docs_run.DocsError, match="needs an admonition"):
        docs_run.blocks("x.md", silent)
    noted = '!!! note "Not run by the docs test"\n    Needs a cluster.\n\n<!-- docs: skip -->\n```sh\nfalse\n```\n'
    (b,) = docs_run.blocks("x.md", noted)
    assert b.skip and b.lang == "sh"
    with pytest.raises(docs_run.DocsError, match="never closed"):
        docs_run.blocks("x.md", "```sh\ntracehouse ls\n")


def test_a_failing_block_names_its_page_line(tmp_path, monkeypatch):
    page = tmp_path / "docs" / "broken.md"
    page.parent.mkdir()
    page.write_text("# Broken\n\n```sh\ntrue\ntracehouse query 'SELECT no_such_column FROM nowhere'\necho never\n```\n")
    monkeypatch.setattr(docs_run, "DOCS", page.parent)
    r = docs_run.run_page("broken.md", timeout=120)
    assert not r.ok and r.failed_line == 5, r.output
    assert "\nnever\n" not in r.output  # set -e: the page stops at its first failure


def test_the_readme_tour_is_what_runs():
    text = docs_run.page_text("README.md")
    assert text.count("\n") < README.read_text().count("\n")
    first = next(b for b in docs_run.blocks("README.md", text) if b.lang)
    assert README.read_text().splitlines()[first.line - 1].strip() == first.code.splitlines()[0].strip()
    assert "tracehouse serve" in text and "influxdb_client" in text and "analyze" in text


# -- the commands the pages show exist -------------------------------------------------------------


def _block_commands() -> list[tuple[str, str]]:
    """Every `tracehouse ...` command of the pages' code blocks, run or not (continuations and
    multi-line quotes joined), with its page. A ```text block is a program's output (a bench
    table whose rows are named `tracehouse import`), not commands."""
    cmds = []
    for page in _written_pages():
        for lang, block in re.findall(r"```([a-z]*)\n(.*?)```", page.read_text(), re.S):
            if lang == "text":
                continue
            lines = block.replace("\\\n", " ").splitlines()
            i = 0
            while i < len(lines):
                line = lines[i].strip().removeprefix("$ ")
                line = re.sub(r"^(PYTHONPATH=\S+ )", "", line)
                if line.startswith("tracehouse "):
                    while True:
                        try:
                            shlex.split(line, comments=True)
                            break
                        except ValueError:  # a quote spanning lines
                            i += 1
                            line += "\n" + lines[i]
                    cmds.append((page.name, line))
                i += 1
    return cmds


@functools.cache
def _parser():
    return cli.build_parser()


def _parser_of(words: list[str]):
    """The (sub)parser `tracehouse WORDS...` reaches, and the words after the command names."""
    import argparse

    p = _parser()
    rest = list(words)
    while rest:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or rest[0] not in subs[0].choices:
            break
        p = subs[0].choices[rest.pop(0)]
    return p, rest


def _flags(p) -> set[str]:
    """Options of parser `p` and of every subcommand below it (`analyze NAME ... [--save]`)."""
    import argparse

    out = {o for a in p._actions for o in a.option_strings}
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub in a.choices.values():
                out |= _flags(sub)
    return out


class _NoExit:
    """Fails the test with the page's line when argparse rejects it."""

    def __init__(self, where: str) -> None:
        self.where = where

    def __enter__(self):
        return self

    def __exit__(self, et, e, tb):
        if et is SystemExit and e.code:
            pytest.fail(f"the CLI rejects this line of {self.where}")
        return et is SystemExit  # --version, --help: accepted


def test_every_command_in_the_docs_is_accepted_by_the_cli():
    cmds = _block_commands()
    assert len(cmds) > 150
    for page, c in cmds:
        words = shlex.split(c, comments=True)[1:]
        if "longest" in words:  # the plugin analysis contributing.md installs on PYTHONPATH
            continue
        argv = []
        for w in words:
            if w in ("&", "|", "||", "&&", ";") or w.startswith((">", "2>")):
                break  # the shell's, not the command's
            argv.append("1" if w.startswith("$") else w)  # a variable set by an earlier line
            if w.startswith("$("):
                break  # a command substitution standing for one word
        with _NoExit(f"{page}: {c}"):
            _parser().parse_args(argv)


def test_every_flag_the_docs_name_after_a_command_exists():
    # Inline mentions too: "`tracehouse compact` (`store.compact()`)", usage forms like
    # "`tracehouse results [list --trace T --tool X --kind K]`".
    spans = [s for page in _written_pages() for s in re.findall(r"`(tracehouse [^`]+)`", page.read_text())]
    assert "tracehouse compact" in spans
    for span in spans:
        words = span.replace("[", " ").replace("]", " ").replace("|", " ").split()[1:]
        # After `--` come the program's own arguments (`tracehouse record -- python prog.py`).
        words = words[: words.index("--")] if "--" in words else words
        p, rest = _parser_of(words)
        assert p.prog != "tracehouse" or not words or words[0].startswith("-"), f"unknown command in `{span}`"
        known = _flags(p)
        for w in rest:
            flag = w.split("=", 1)[0]
            if flag.startswith("--"):
                assert flag in known, f"`{span}`: {p.prog} has no {flag}"


def test_every_command_and_analysis_has_its_page():
    ref = (DOCS / "cli.md").read_text()
    for name in cli.COMMANDS:
        assert f"## tracehouse {name}\n" in ref, name
    analyses = (DOCS / "analyses.md").read_text()
    import argparse

    sub = next(a for a in _parser_of(["analyze"])[0]._actions if isinstance(a, argparse._SubParsersAction))
    for name in sub.choices:
        assert f"analyze {name}" in analyses, f"`tracehouse analyze {name}` is not in docs/analyses.md"


# -- generated, short, about the software ----------------------------------------------------------


def test_generated_pages_are_current():
    """docs/cli.md, docs/benchmarks/index.md and the README's table, and each kept run's
    report.md: `python dev/docs_gen.py --reports` brings them up to date."""
    assert docs_gen.stale(with_reports=True) == []


def test_the_cli_reference_is_generated_from_the_parsers(monkeypatch):
    text = docs_gen.cli_reference()
    assert text.startswith(docs_gen.MARK)
    assert "| `--max-body MAX_BODY` | `64M` |" in text  # serve's flag, its default
    assert "### tracehouse analyze hist" in text and "### tracehouse bench all" in text
    import argparse

    real = cli.build_parser

    def with_new_flag(argv=None):
        p = real(argv)
        sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        sub.choices["ls"].add_argument("--a-new-flag", help="a flag the page does not have yet")
        return p

    monkeypatch.setattr(cli, "build_parser", with_new_flag)
    assert "--a-new-flag" in docs_gen.cli_reference()
    assert docs_gen.CLI_PAGE in docs_gen.stale()


def test_the_readme_is_short_and_its_quick_start_is_true():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "make demo" in quick and "make test" in quick
    r = subprocess.run(["make", "-n", "demo", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "tracehouse demo" in r.stdout and "pytest" in r.stdout
    assert "![" in text.split("## Quick start", 1)[0]  # the screenshot
    assert (ROOT / "docs/webui/traces.png").exists()


CHRONOLOGY = [  # the story of the work, in code and prose alike
    r"\bissue ?#?\d+",
    r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(?:st|nd|rd|th)) sessions?\b",
    r"\bthis session\b",
]
PROSE_ONLY = [  # in code these words have their plain sense (a second pass over the data, a retry attempt)
    r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth) (?:pass|attempt|helper)s?\b",
    r"\battempts?\b",
    r"\bstop \d\b",
]


def _chronology(text: str, patterns=CHRONOLOGY) -> list[str]:
    out = []
    for pat in patterns:
        out += [m.group(0) for m in re.finditer(pat, text, re.I)]
    return out


def test_the_docs_speak_of_the_software_not_of_its_history():
    for page in _pages(reports=True):
        found = _chronology(page.read_text(), CHRONOLOGY + PROSE_ONLY)
        assert not found, f"{page.relative_to(ROOT)}: {found}"


def test_code_comments_tell_no_history():
    """Comments and docstrings of the package, the Rust core, dev/ and the tests say what the code
    does and why; the story of attempts is in git (an issue number may tag a test's name, as in
    `test_issue11_...`, not its prose)."""
    bad = []
    for root, exts in (
        (ROOT / "python" / "tracehouse", (".py",)),
        (ROOT / "src", (".rs",)),
        (ROOT / "dev", (".py",)),
        (ROOT / "examples", (".c", ".rs")),
        (ROOT / "tests", (".py",)),
    ):
        for f in root.rglob("*"):
            if f.suffix in exts:
                bad += [f"{f.relative_to(ROOT)}: {hit}" for hit in _chronology(f.read_text())]
    assert not bad, bad
