"""The traced process starts its interpreter while the storing side creates the trace, and runs
the program only once the trace exists: a recording the store refuses runs nothing."""

from __future__ import annotations

import sys

import pytest

from tracehouse.errors import AlreadyExists
from tracehouse.record.record import record


def test_issue35_program_runs_only_once_its_trace_exists(tmp_path, store):
    prog, ran = tmp_path / "prog.py", tmp_path / "ran"
    prog.write_text(f"def f():\n    y = 2\n    return y\n\n\nf()\nopen({str(ran)!r}, 'a').write('ran\\n')\n")
    store.create_trace("taken", "custom")
    with pytest.raises(AlreadyExists):
        record(store, [sys.executable, str(prog)], "taken")
    assert not ran.exists(), "the program ran though its trace could not be created"
    rep = record(store, [sys.executable, str(prog)], "free")
    assert rep.exit_status == 0 and rep.complete and rep.by_type.get("behavior_enter", 0) >= 1
    assert ran.read_text() == "ran\n"
