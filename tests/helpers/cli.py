"""Driving `tracehouse` through its real entry point in-process (pytest's capsys catches the output)."""

from __future__ import annotations

import json
from pathlib import Path

from tracehouse import cli


def run(capsys, store: Path, *argv: str) -> tuple[int, str, str]:
    """`tracehouse --store STORE ARGV...`: (exit code, stdout, stderr)."""
    code = cli.main(["--store", str(store), *argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def run_json(capsys, store: Path, *argv: str):
    """The same with `--json`, which must succeed: the parsed output."""
    code, out, err = run(capsys, store, *argv, "--json")
    assert code == 0, err
    return json.loads(out)
