"""The recording equals what a reference pure-Python `sys.settrace` recorder sees: at every line
of every thread, the same file, line and function, the same locals (with the attributes of the
objects they hold, and the same aliasing between them), and the same calls and returns.

One test per construct (recursion, closures, generators, exceptions, threads, async, objects,
globals, class bodies), then generated programs (hypothesis).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracehouse.record.record import PACKAGE_ROOT, record

from . import programs
from .replay_lines import replay


def reference(prog: Path, out: Path, python: str = sys.executable) -> tuple[int, list[dict]]:
    """The reference recorder's lines (and the program's exit status: a program may raise)."""
    env = {"PYTHONPATH": PACKAGE_ROOT, "PATH": "/usr/bin:/bin"}
    p = subprocess.run(
        [python, "-m", "tracehouse.record.reference", "--lines", str(out), "--", str(prog)],
        env=env,
        cwd=prog.parent,
        capture_output=True,
    )
    assert out.exists(), p.stderr.decode()
    return p.returncode, json.loads(out.read_text())


def ours(store, prog: Path, name: str, status: int = 0, python: str = sys.executable) -> list[dict]:
    rep = record(store, [python, str(prog)], name)
    assert rep.complete and rep.exit_status == status, rep.to_json()
    return replay(store, name)


def aliasing(state: dict) -> list[list[str]]:
    """Names holding one same object (an object's identity differs between two runs; which
    names share it does not)."""
    groups: dict[int, list[str]] = {}
    for name, (v, _, oid) in state.items():
        if isinstance(v, list) and oid is not None:
            groups.setdefault(oid, []).append(name)
    return sorted(sorted(g) for g in groups.values() if len(g) > 1)


def compare(ref: list[dict], got: list[dict]) -> None:
    assert len(got) == len(ref), f"threads: recorded {len(got)}, reference {len(ref)}"
    for k, (r, g) in enumerate(zip(ref, got)):
        assert g["calls"] == r["calls"], f"thread {k}: call tree differs"
        assert len(g["lines"]) == len(r["lines"]), (
            f"thread {k}: {len(g['lines'])} lines recorded, {len(r['lines'])} seen"
        )
        for i, (rl, gl) in enumerate(zip(r["lines"], g["lines"])):
            where = f"thread {k}, line event {i} ({rl[0]}:{rl[1]} in {rl[2]})"
            assert gl[:3] == rl[:3], where
            rs, gs = rl[3], gl[3]
            assert sorted(gs) == sorted(rs), f"{where}: locals {sorted(gs)} recorded, {sorted(rs)} seen"
            for name in rs:
                assert gs[name][0] == rs[name][0], f"{where}: {name} = {gs[name][0]!r} recorded, {rs[name][0]!r} seen"
                if rs[name][1] is not None:
                    assert gs[name][1] == rs[name][1], f"{where}: fields of {name}"
            assert aliasing(gs) == aliasing(rs), f"{where}: aliasing"


def check(store, tmp_path, name: str, text: str, python: str = sys.executable) -> tuple[list, list]:
    prog = tmp_path / f"{name}.py"
    prog.write_text(text)
    status, ref = reference(prog, tmp_path / f"{name}.json", python)
    got = ours(store, prog, name, status, python)
    compare(ref, got)
    return ref, got


@pytest.mark.parametrize("construct", sorted(programs.ALL))
def test_recording_equals_reference(store, tmp_path, construct):
    ref, got = check(store, tmp_path, construct, programs.ALL[construct])
    assert sum(len(t["lines"]) for t in got) > 5


def test_callbacks_from_library_and_c_code_are_recorded(store, tmp_path):
    """Recorded functions called back from C code under the library's Python frames (which
    run with the trace function switched off) are recorded at every call, nested two deep."""
    ref, got = check(store, tmp_path, "library_c_callbacks", programs.LIBRARY_C_CALLBACKS)
    in_fn: dict[str, int] = {}
    for file, _line, fn, *_ in got[0]["lines"]:
        if file.endswith("library_c_callbacks.py"):
            in_fn[fn] = in_fn.get(fn, 0) + 1
    # 3 words: replace 4 lines each, hook 2 lines x 3, by_len 2 lines x 3 keys x 3; then the
    # lambda once per "x" (3).
    assert (in_fn.get("replace"), in_fn.get("hook"), in_fn.get("by_len")) == (12, 6, 18), in_fn
    assert in_fn.get("<lambda>") == 3, in_fn


def test_the_recorder_and_the_untraced_harness_start_a_program_alike(store, tmp_path):
    """The bench compares the program's own time under the recorder with the untraced harness's:
    both run it as `python prog.py` does, with the same modules imported before its first line
    (a module imported later runs its top level inside the program's time), and neither
    preloads what a program that does not import it would not have."""
    prog = tmp_path / "modules.py"
    prog.write_text(
        "import sys\n"
        "modules = sorted(sys.modules)\n"
        "import json\n"
        "json.dump({'modules': modules, 'file': __file__, 'name': __name__, 'argv': sys.argv,\n"
        "           'main': sys.modules['__main__'].__dict__ is globals()}, open(sys.argv[1], 'w'))\n"
    )
    # The environment `record` gives its child (without HOME, `site` would import pwd).
    env = {**os.environ, "PYTHONPATH": PACKAGE_ROOT}
    untraced, recorded = tmp_path / "untraced.json", tmp_path / "recorded.json"
    subprocess.run(
        [sys.executable, "-m", "tracehouse.record.reference", "--none", "--", str(prog), str(untraced)],
        env=env,
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    rep = record(store, [sys.executable, str(prog), str(recorded)], "modules")
    assert rep.complete and rep.exit_status == 0, rep.to_json()
    a, b = json.loads(untraced.read_text()), json.loads(recorded.read_text())
    harness = {"tracehouse.record.reference", "tracehouse.record.__main__", "tracehouse._core"}
    assert set(a["modules"]) - harness == set(b["modules"]) - harness
    for m in ("typing", "re", "dis", "pkgutil"):
        assert m not in b["modules"], f"{m} imported before the program"
    assert a["file"] == b["file"] == str(prog) and a["name"] == b["name"] == "__main__"
    assert a["argv"] == [str(prog), str(untraced)] and b["argv"] == [str(prog), str(recorded)]
    assert a["main"] and b["main"]


def test_threads_are_separate_producers(store, tmp_path):
    ref, got = check(store, tmp_path, "threads", programs.THREADS)
    assert len(got) == 3
    names = [p["name"] for p in store.producers("threads") if p["kind"] == "thread"]
    assert names[0] == "MainThread" and all(n.startswith("Thread-") for n in names[1:])


def test_a_comparison_that_should_fail_does(store, tmp_path):
    """The comparison itself catches a wrong local (guards against a vacuous pass)."""
    prog = tmp_path / "p.py"
    prog.write_text("a = 1\nb = a + 1\nc = b\n")
    _, ref = reference(prog, tmp_path / "p.json")
    got = ours(store, prog, "p")
    compare(ref, got)
    mine = [line for line in got[0]["lines"] if line[0] == str(prog)]
    assert [line[1] for line in mine] == [1, 2, 3]
    mine[2][3]["b"][0] = 3
    with pytest.raises(AssertionError, match="b = 3 recorded"):
        compare(ref, got)


# -- generated programs ----------------------------------------------------------------------

NAMES = ["a", "b", "c"]


@st.composite
def statement(draw, depth=0):
    kind = draw(
        st.sampled_from(
            ["assign", "aug", "attr", "item", "call", "if", "for"]
            if depth < 2
            else ["assign", "aug", "attr", "item", "call"]
        )
    )
    x = draw(st.sampled_from(NAMES))
    y = draw(st.sampled_from(NAMES))
    k = draw(st.integers(-3, 9))
    if kind == "assign":
        rhs = draw(
            st.sampled_from(
                [f"{k}", f"{y} + {k}", f"{y} * 2", f"str({y})[:3]", f"{k} / 4", f"[{y}, {k}]", f"{k} // {y}"]
            )
        )  # some raise (str + int, // 0): the program then ends by it
        return [f"{x} = {rhs}"]
    if kind == "aug":
        return [f"{x} = {x} + 1 if isinstance({x}, int) else {k}"]
    if kind == "attr":
        return [f"o.{x} = {y}"]
    if kind == "item":
        return [f"d[{k}] = {y}"]
    if kind == "call":
        return [f"{x} = f({y})"]
    body = draw(st.lists(statement(depth + 1), min_size=1, max_size=3))
    inner = ["    " + line for stmt in body for line in stmt]
    if kind == "if":
        return [f"if isinstance({x}, int) and {x} > {k}:", *inner, "else:", f"    {y} = {k}"]
    return [f"for {x} in range({abs(k) % 4}):", *inner]


@st.composite
def program(draw):
    # main's o and d are returned, so the module's own cannot take their addresses (an
    # identity is an address: a dead object's may be given to a new one, docs/record.md).
    body = draw(st.lists(statement(), min_size=1, max_size=8))
    lines = [line for stmt in body for line in stmt]
    func = [
        "def main():",
        "    a, b, c = 0, 1, 2",
        "    o = O()",
        "    d = {}",
        *["    " + line for line in lines],
        "    return a, b, c, o, d",
        "",
    ]
    return "\n".join(
        [
            "class O:",
            "    pass",
            "",
            "def f(v):",
            "    w = v",
            "    return w",
            "",
            *func,
            "r = main()",
            *lines_module(lines),
            "",
        ]
    )


def lines_module(lines):
    return ["a, b, c = 0, 1, 2", "o = O()", "d = {}", *lines]


def check_generated(store, tmp_path_factory, text: str, python: str = sys.executable) -> None:
    """`check` of a generated program (one trace per distinct text: hypothesis may repeat one)."""
    tmp = tmp_path_factory.mktemp("gen")
    name = f"gen{abs(hash(text)) % 10**8}"
    if name in {t.name for t in store.traces()}:
        return
    check(store, tmp, name, text, python)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=program())
def test_generated_programs_equal_reference(store, tmp_path_factory, text):
    check_generated(store, tmp_path_factory, text)
