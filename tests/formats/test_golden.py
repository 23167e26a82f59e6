"""Golden tests, one folder per case: `tests/formats/<format>/<case>/` holds `input` (a small real
file of that format), `query.sql` and `expected.csv` (what the query answers; the contract).

Each case imports its input into a fresh store as trace `golden` through the real entry point
(`tracehouse import <format> input --name golden --strict` plus the flags in the optional `args`
file; `tod` has no file format: its `input` is the generator's JSON parameters), runs the query
through the Store's SQL and compares the answer, as CSV, with `expected.csv`. Every registered
format has at least one case (`python`, what `tracehouse record` writes, is checked against the
programs it records in tests/record/).

Regenerate after a deliberate change with `pytest tests/formats --update-golden` (or
`TRACEHOUSE_UPDATE_GOLDEN=1`), then read the diff: an expected file is checked by hand.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import os
import shlex
from pathlib import Path

import pytest

import tracehouse
from tracehouse import cli

HERE = Path(__file__).parent
CASES = sorted(p.parent for p in HERE.glob("*/*/query.sql"))
TRACE = "golden"
NULL = "[NULL]"  # a null cell (an empty cell is the empty string)


def _cell(v) -> str:
    if v is None:
        return NULL
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def as_csv(table) -> str:
    """The answer as CSV: a header, then one line per row, cells as Python prints them."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(table.column_names)
    for row in table.to_pylist():
        w.writerow([_cell(row[c]) for c in table.column_names])
    return out.getvalue()


def load(case: Path, store_path: Path) -> None:
    """Imports the case's input into a fresh store as trace `golden`."""
    fmt = case.parent.name
    extra = shlex.split((case / "args").read_text()) if (case / "args").exists() else []
    if fmt == "tod":
        params = json.loads((case / "input").read_text())
        argv = ["generate", "tod", "--name", TRACE] + [f"--{k}={v}" for k, v in params.items()]
    else:
        argv = ["import", fmt, str(case / "input"), "--name", TRACE, "--strict", *extra]
    assert cli.main(["--store", str(store_path), *argv, "--json"]) == 0, f"{case}: import failed"


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.name}" for c in CASES])
def test_golden(case, tmp_path, capsys, request):
    load(case, tmp_path / "store")
    capsys.readouterr()
    with tracehouse.open(tmp_path / "store", readonly=True) as s:
        got = as_csv(s.sql((case / "query.sql").read_text()))
    expected = case / "expected.csv"
    if request.config.getoption("--update-golden") or os.environ.get("TRACEHOUSE_UPDATE_GOLDEN"):
        expected.write_text(got)
    want = expected.read_text() if expected.exists() else ""
    assert got == want, "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), str(expected), "got"))


def test_every_format_has_a_golden_case():
    from tracehouse.formats import registry

    formats = (set(registry.formats()) | set(registry.importers())) - {"python"}
    assert formats <= {c.parent.name for c in CASES}
    for c in CASES:
        assert (c / "input").exists() and (c / "expected.csv").exists(), c
