"""`tracehouse debug`: steps both ways, the stack, origins and histories of values, breakpoints,
on a recorded program (and on a TOD trace), each against what the program's text says."""

from __future__ import annotations

import json
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracehouse
from tracehouse.record import debug
from tracehouse.record.record import record

PROGRAM = """\
class Acc:
    def __init__(self):
        self.total = 0

def add(acc, k):
    acc.total = acc.total + k
    return acc.total

def square(x):
    y = x * x
    return y

def gen(n):
    for i in range(n):
        yield square(i)

acc = Acc()
values = []
for v in gen(4):
    s = add(acc, v)
    values.append(s)
last = square(7)
done = True
"""
LINE = {text.strip(): i + 1 for i, text in enumerate(PROGRAM.splitlines())}


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    d = tmp_path_factory.mktemp("dbg")
    prog = d / "prog.py"
    prog.write_text(PROGRAM)
    s = tracehouse.open(d / "store")
    rep = record(s, [sys.executable, str(prog)], "prog")
    assert rep.complete
    yield s
    s.close()


@pytest.fixture
def ses(rec):
    return debug.Session(rec, "prog")


def at(ans) -> tuple[str, int]:
    return ans["position"]["function"], ans["position"]["line"]


def test_starts_at_the_programs_first_line(ses):
    assert at(ses.view()) == ("<module>", 1)


def test_next_steps_over_calls_and_step_goes_into_them(ses):
    debug.run(ses, f"b prog.py:{LINE['acc = Acc()']}")
    assert at(debug.run(ses, "c")) == ("<module>", LINE["acc = Acc()"])
    assert at(debug.run(ses, "n")) == ("<module>", LINE["values = []"])
    assert at(debug.run(ses, "bn")) == ("<module>", LINE["acc = Acc()"])
    assert at(debug.run(ses, "s")) == ("Acc.__init__", LINE["self.total = 0"])
    assert at(debug.run(ses, "bo")) == ("<module>", LINE["acc = Acc()"])
    assert at(debug.run(ses, "s")) == ("Acc.__init__", LINE["self.total = 0"])
    assert at(debug.run(ses, "o")) == ("<module>", LINE["values = []"])
    assert "caller was not recorded" in debug.run(ses, "bo")["note"]


def test_next_over_a_yield_leaves_the_generator(ses):
    debug.run(ses, "b square")
    ans = debug.run(ses, "c")
    assert at(ans) == ("square", LINE["y = x * x"]) and ans["locals"]["x"]["value"] == 0
    # square returns into the middle of gen's line, which yields: the next line is the caller's.
    ans = debug.run(ses, "o")
    assert at(ans) == ("<module>", LINE["s = add(acc, v)"]) and ans["locals"]["v"]["value"] == 0
    debug.run(ses, "bd 1")
    debug.run(ses, f"b prog.py:{LINE['yield square(i)']}")
    ans = debug.run(ses, "c")
    assert at(ans) == ("gen", LINE["yield square(i)"]) and ans["locals"]["i"]["value"] == 1
    ans = debug.run(ses, "n")  # the yield suspends gen: on to the caller
    assert at(ans) == ("<module>", LINE["s = add(acc, v)"]) and ans["locals"]["v"]["value"] == 1


def test_stack_shows_every_frame_with_its_line_and_locals(ses):
    debug.run(ses, "b add")
    debug.run(ses, "c")
    ans = debug.run(ses, "c")  # the second call: v = 1
    assert ans["locals"]["k"]["value"] == 1
    frames = debug.run(ses, "stack")["frames"]
    assert [f["function"] for f in frames] == ["add", "<module>"]
    assert frames[0]["line"] == LINE["acc.total = acc.total + k"]
    assert frames[1]["line"] == LINE["s = add(acc, v)"]
    assert frames[1]["locals"]["v"]["value"] == 1 and frames[1]["locals"]["s"]["value"] == 0


def test_origin_goes_back_to_the_write_and_on_to_the_next(ses):
    debug.run(ses, "goto end")
    ans = debug.run(ses, "origin s")
    assert at(ans) == ("<module>", LINE["s = add(acc, v)"]) and ans["write"]["value"]["value"] == 0 + 1 + 4 + 9
    assert debug.run(ses, "origin s")["write"]["value"]["value"] == 0 + 1 + 4  # the write before
    assert debug.run(ses, "nw s")["write"]["value"]["value"] == 14
    # The position is the line that will write s = 14, before it runs: acc.total is still 5.
    ans = debug.run(ses, "origin acc.total")
    assert at(ans) == ("add", LINE["acc.total = acc.total + k"]) and ans["write"]["value"]["value"] == 5
    assert ans["locals"]["k"]["value"] == 4
    hist = debug.run(ses, "history acc.total")
    assert [w["value"]["value"] for w in hist["writes"]] == [0, 0, 1, 5, 14]
    assert hist["writes"][0]["line"] == LINE["self.total = 0"]


def test_breakpoints_stop_both_ways(ses):
    line = LINE["y = x * x"]
    debug.run(ses, f"b prog.py:{line}")
    xs = [debug.run(ses, "c")["locals"]["x"]["value"] for _ in range(5)]
    assert xs == [0, 1, 2, 3, 7]
    assert "no breakpoint is hit" in debug.run(ses, "c")["note"]
    back = [debug.run(ses, "bc")["locals"]["x"]["value"] for _ in range(4)]
    assert back == [3, 2, 1, 0]


def test_a_condition_stops_where_it_becomes_true(ses):
    debug.run(ses, "b s >= 5")
    ans = debug.run(ses, "c")
    assert at(ans) == ("<module>", LINE["s = add(acc, v)"]) and ans["write"]["value"]["value"] == 5
    ans = debug.run(ses, "c")
    assert ans["write"]["value"]["value"] == 14
    assert debug.run(ses, "bc")["write"]["value"]["value"] == 5


def test_print_follows_attributes(ses):
    debug.run(ses, "goto end")
    ans = debug.run(ses, "p acc")
    assert ans["fields"]["total"]["value"] == 14
    assert debug.run(ses, "p acc.total")["value"]["value"] == 14
    assert debug.run(ses, "p last")["value"]["value"] == 49


def test_unknown_names_and_commands_are_clear_errors(ses):
    with pytest.raises(tracehouse.BadInput, match="no variable 'nope'"):
        debug.run(ses, "p nope")
    with pytest.raises(tracehouse.BadInput, match="unknown debug command"):
        debug.run(ses, "frobnicate")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(moves=st.lists(st.sampled_from(["s", "n", "o"]), min_size=1, max_size=12))
def test_back_steps_undo_steps(rec, moves):
    """`bs` undoes `s`; `bn` undoes an `n` that stayed in its frame."""
    ses = debug.Session(rec, "prog")
    trail = [ses.position()]
    for m in moves:
        before = ses.position()
        after = debug.run(ses, m)["position"]
        if after["seq"] == before["seq"]:
            continue
        if m == "s":
            assert debug.run(ses, "bs")["position"]["seq"] == before["seq"]
            debug.run(ses, "s")
        if m == "n" and after["frame"] == before["frame"]:
            assert debug.run(ses, "bn")["position"]["seq"] == before["seq"]
            debug.run(ses, "n")
        trail.append(ses.position())
    for p in reversed(trail[:-1]):
        ses.pos = None
        ses.pos = ses._stop(p["producer"], p["ts"], True, inclusive=True)
        assert ses.position()["seq"] == p["seq"]


def test_debug_command_answers_json(rec, tmp_path, capsys):
    from tracehouse.cli import main

    code = main(["--store", str(rec.path), "debug", "prog", "-c", "n; n; p acc; frobnicate", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 2
    assert [a["command"] for a in out] == ["n", "n", "p acc", "frobnicate"]
    assert out[0]["position"]["line"] == LINE["def add(acc, k):"]
    assert "unknown debug command" in out[3]["error"]


def test_tod_traces_step_and_find_origins(tmp_path):
    from tracehouse.formats.tod.generate import generate_tod

    s = tracehouse.open(tmp_path / "store")
    generate_tod(s, "tod", 20_000, threads=2)
    ses = debug.Session(s, "tod")
    assert ses.position()["type"] == "behavior_enter"
    first = ses.position()
    debug.run(ses, "s")
    assert debug.run(ses, "bs")["position"]["seq"] == first["seq"]
    # Walk until a variable write, then find its origin from a later stop.
    for _ in range(200):
        if ses.pos["type"] == "var_write":
            break
        debug.run(ses, "s")
    w = ses.pos
    name = f"v{w['var_id']}"
    debug.run(ses, "s")
    ans = debug.run(ses, f"origin {name}")
    assert ans["position"]["seq"] == w["seq"] and ans["write"]["value"]["id"] == w["value"]
    # `out` lands on the frame's exit, whose span pairs with the frame's enter.
    frame = ses.pos["parent_seq"]
    ans = debug.run(ses, "o")
    assert ans["position"]["type"] == "behavior_exit" and ans["position"]["frame"] == frame
    s.close()
