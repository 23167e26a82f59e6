"""The CSV importer never crashes on arbitrary input: it imports or says BadInput."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracehouse
from tracehouse.errors import BadInput
from tracehouse.formats.csv import importer as csv_importer

HEADER = b"ts,producer,type,v\n"

line = st.one_of(
    st.binary(max_size=40),
    st.builds(
        lambda ts, p, t, v: f"{ts},{p},{t},{v}".encode(),
        st.one_of(st.integers(-(2**70), 2**70), st.text(max_size=5)),
        st.one_of(st.integers(0, 5), st.sampled_from(["a", "b", ""])),
        st.sampled_from(["x", "y", "", "1bad", "ok_type"]),
        st.one_of(st.floats(allow_nan=True), st.text(max_size=5), st.integers()),
    ),
)


def _check(data: bytes, strict: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "f.csv"
        path.write_bytes(data)
        store = tracehouse.open(Path(d) / "s")
        try:
            rep = csv_importer.import_file(store, path, "f", strict=strict)
        except BadInput:
            assert [t.name for t in store.traces()] == []  # nothing half-registered
        else:
            got = store.sql('SELECT count(*) AS n FROM "f".events').column("n")[0].as_py()
            assert got == rep.events > 0
            assert not strict or rep.rejected == 0
        finally:
            store.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(line, max_size=12), st.booleans())
def test_csv_lines_never_crash(lines, strict):
    _check(HEADER + b"\n".join(lines) + b"\n", strict)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300), st.booleans())
def test_random_bytes_never_crash(data, strict):
    _check(data, strict)


def test_one_megabyte_line(tmp_path):
    _check(HEADER + b"1,a,x," + b"9" * (1 << 20) + b"\n2,a,x,1\n", strict=False)
