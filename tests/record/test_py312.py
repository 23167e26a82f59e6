"""The recorder under CPython 3.12 (`sys.monitoring` callbacks instead of 3.11's trace function):
the equivalence tests' constructs and a few generated programs, the program and the reference
recorder both run by a 3.12 interpreter, the recording stored by this one (about 30 s).

The interpreter is pyenv's (the machine image has one; `make setup` builds the 3.12 core beside
the 3.11 one: Makefile `core312`). Skipped, saying so, where no 3.12 interpreter exists; a 3.12
interpreter without its core is a failure (the set-up did not build it).
"""

from __future__ import annotations

import glob
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tracehouse.record.record import PACKAGE_ROOT

from . import programs
from .test_equivalence import check, check_generated, program


def _python312() -> str | None:
    found = glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")) + glob.glob("/usr/bin/python3.12")
    for exe in found:
        try:
            out = subprocess.run(
                [exe, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip() == b"(3, 12)":
            return exe
    return None


PY312 = _python312()
pytestmark = pytest.mark.skipif(PY312 is None, reason="no CPython 3.12 on this machine (pyenv's or /usr/bin)")


def test_the_312_core_is_built():
    cores = glob.glob(str(Path(PACKAGE_ROOT) / "tracehouse" / "_core.cpython-312-*.so"))
    assert cores, "no tracehouse/_core.cpython-312-*.so: `make setup` (core312) builds it"
    out = subprocess.run(
        [PY312, "-c", "from tracehouse import _core; print(_core.__file__)"],
        env={"PYTHONPATH": PACKAGE_ROOT, "PATH": "/usr/bin:/bin"},
        capture_output=True,
    )
    assert out.returncode == 0 and b"cpython-312" in out.stdout, out.stderr.decode()


@pytest.mark.parametrize("construct", sorted(programs.ALL))
def test_recording_under_312_equals_reference(store, tmp_path, construct):
    ref, got = check(store, tmp_path, construct, programs.ALL[construct], python=PY312)
    assert sum(len(t["lines"]) for t in got) > 5
    meta = store.trace(construct).metadata
    assert meta["mode"] == "sys.monitoring" and meta["python"].startswith("3.12")


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=program())
def test_generated_programs_under_312_equal_reference(store, tmp_path_factory, text):
    check_generated(store, tmp_path_factory, text, python=PY312)
