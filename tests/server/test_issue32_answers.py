"""A query process's Arrow answer (server/queryproc.py `_ArrowAnswer`): held and encoded at once
while small, streamed into a memory file of its own past HELD_BYTES; both give the whole stream,
both stop at the byte cap, and neither leaves a memory file behind."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import tracehouse
from tracehouse.server import queryproc

SQL = "SELECT range AS i, range * 3 AS x, repeat('y', 20) || range AS pad FROM range({n}) ORDER BY i"
LIMITS = {"max_answer": 1 << 30, "max_query_rows": 10**9, "max_parse_nodes": 10**6, "max_relations": 1000}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("answers") / "store"
    tracehouse.open(path).close()
    with tracehouse.open(path, readonly=True) as s:
        yield s


def _memory_files() -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    return [f for f in out if "tracehouse-answer" in f]


def _stream(body) -> pa.Table:
    if isinstance(body, queryproc.AnswerFile):
        f = body
        try:
            body = f.read()
        finally:
            f.close()
    return pa.ipc.open_stream(body).read_all()


@pytest.mark.parametrize("held", [True, False])
@pytest.mark.parametrize("n", [0, 10, 100_000])
def test_issue32_an_arrow_answer_is_the_whole_stream_held_or_streamed(store, monkeypatch, held, n):
    if not held:  # every answer past its first batch streams into its memory file
        monkeypatch.setattr(queryproc, "HELD_BYTES", 1)
    sql = SQL.format(n=n)
    want = store.sql(sql)
    before = _memory_files()
    body, ctype = queryproc.answer(store, sql, "arrow", LIMITS)
    assert ctype == queryproc.ARROW_STREAM
    if held or n == 0:
        assert isinstance(body, pa.Buffer)  # (send_answer puts one of FD_BYTES or more in a memory file)
    else:
        assert isinstance(body, queryproc.AnswerFile)
    got = _stream(body)
    assert got.equals(want), (got.num_rows, want.num_rows)
    assert _memory_files() == before


@pytest.mark.parametrize("held", [True, False])
def test_issue32_an_arrow_answer_past_the_byte_cap_is_refused_and_frees_its_file(store, monkeypatch, held):
    if not held:
        monkeypatch.setattr(queryproc, "HELD_BYTES", 1)
    before = _memory_files()
    sql = SQL.format(n=100_000)
    body, _ = queryproc.answer(store, sql, "arrow", LIMITS)
    size = body.size if isinstance(body, queryproc.AnswerFile) else len(body)
    _stream(body)
    # Just under: answered; one byte less than the stream: refused (the exact encoded size counts).
    body, _ = queryproc.answer(store, sql, "arrow", dict(LIMITS, max_answer=size))
    assert _stream(body).num_rows == 100_000
    with pytest.raises(queryproc.QueryStopped) as e:
        queryproc.answer(store, sql, "arrow", dict(LIMITS, max_answer=size - 1))
    assert e.value.status == 422 and "--max-answer" in str(e.value)
    with pytest.raises(queryproc.QueryStopped):
        queryproc.answer(store, sql, "arrow", dict(LIMITS, max_answer=1000))
    assert _memory_files() == before
