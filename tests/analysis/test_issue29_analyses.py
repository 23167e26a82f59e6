"""Seed 004's workflow end to end on probe output with a `caller` field: a histogram grouped
by that field, the before/after share of jobs under 10 us (28.9 % -> 12.6 %), and a cursor
whose filter matches nothing.

The traces are bpftrace `-f json` output (printf records of job_start / job_end, as the
seed's tracer scripts print them) imported by the real importer with a --span pairing.
"""

from __future__ import annotations

import json
import re

import pytest

from helpers.cli import run, run_json

CALLERS = ("JoinHash", "TableScan", "Aggregate")
PATTERNS = [
    "--pattern",
    "job_start:job_start {ts} {tid} {task:hex} {caller:str}",
    "--pattern",
    "job_end:job_end {ts} {tid} {task:hex}",
    "--span",
    "job=job_start,job_end,task",
]


def _capture(path, n: int, under: int) -> None:
    """n jobs, `under` of them shorter than 10 us, callers in turn; as bpftrace -f json prints them."""
    recs = [{"type": "attached_probes", "data": {"probes": 2}}]
    t = 5_000_000_000_000
    for i in range(n):
        dur = 2_000 + (i * 37) % 7_000 if i < under else 11_000 + (i * 53) % 90_000
        recs.append({"type": "printf", "data": f"job_start {t} {100 + i % 3} 0x{i:x} {CALLERS[i % 3]}\n"})
        recs.append({"type": "printf", "data": f"job_end {t + dur} {100 + i % 3} 0x{i:x}\n"})
        t += 200_000
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from tracehouse.cli import main

    base = tmp_path_factory.mktemp("seed004")
    for name, under in (("before", 289), ("after", 126)):
        _capture(base / f"{name}.json", 1000, under)
        assert (
            main(
                [
                    "--store",
                    str(base / "s"),
                    "import",
                    "bpftrace",
                    str(base / f"{name}.json"),
                    "--name",
                    name,
                    *PATTERNS,
                    "--json",
                ]
            )
            == 0
        )
    return base / "s"


def test_issue29_hist_groups_by_a_probe_field_named_caller(store, capsys):
    h = run_json(capsys, store, "analyze", "hist", "before", "--type", "job", "--by", "caller", "--below", "10us")
    by = {}
    for b in h["buckets"]:
        by[b["group"]] = by.get(b["group"], 0) + b["count"]
    assert by == {"JoinHash": 334, "TableScan": 333, "Aggregate": 333}
    assert sum(v["below"] for v in h["below"].values()) == 289
    code, text, _ = run(capsys, store, "analyze", "hist", "before", "--type", "job", "--by", "caller")
    assert code == 0 and "@usecs[JoinHash]:" in text and "@usecs[Aggregate]:" in text
    # a column that is not there is still named as such
    code, _, err = run(capsys, store, "analyze", "hist", "before", "--type", "job", "--by", "name")
    assert code == 2 and "no column 'name'" in err and "caller" in err


def test_issue29_hist_without_type_names_the_types_with_that_column(store, capsys):
    code, _, err = run(capsys, store, "analyze", "hist", "before", "--by", "caller")
    assert code == 2
    assert "job" in err and "'caller'" in err and "--type job --by caller" in err


def test_issue29_compare_reports_the_share_below_the_threshold(store, capsys):
    code, text, _ = run(capsys, store, "analyze", "compare", "before", "after", "--type", "job", "--below", "10us")
    assert code == 0
    line = next(x for x in text.splitlines() if x.startswith("under 10 us"))
    assert re.search(r"28\.9% \(289 of 1,000\) -> 12\.6% \(126 of 1,000\)\s+\(-16\.3 pt\)", line), line
    j = run_json(capsys, store, "analyze", "compare", "before", "after", "--type", "job", "--below", "10us")
    assert j["below"]["threshold_ns"] == 10_000
    assert (j["below"]["before"]["share"], j["below"]["after"]["share"]) == (0.289, 0.126)
    assert j["below"]["before"]["below"] == 289 and j["below"]["after"]["count"] == 1000
    # without --below there is nothing to report
    assert run_json(capsys, store, "analyze", "compare", "before", "after", "--type", "job")["below"] is None


def test_issue29_cursor_with_no_match_says_so(store, capsys):
    code, text, err = run(capsys, store, "analyze", "cursor", "before", "--where", "caller = nosuch")
    assert code == 0 and text.strip() == "no events match"
    assert str(-(2**63)) not in text + err
    j = run_json(capsys, store, "analyze", "cursor", "before", "--where", "caller = nosuch")
    assert j["rows"] == [] and j["position"] is None and j["message"] == "no events match"
    code, text, _ = run(capsys, store, "analyze", "cursor", "before", "--type", "job", "--at", "9999999999999999")
    assert code == 0 and text.strip() == "no events match after 9999999999999999"
