"""Fixtures shared by the store tests: a store directory and an open store with small knobs."""

from __future__ import annotations

import pytest

import tracehouse


@pytest.fixture
def store_path(tmp_path):
    return tmp_path / "store"


@pytest.fixture
def store(store_path):
    """A writable store whose background checkpoints never run on their own (tests flush explicitly)."""
    s = tracehouse.open(store_path, flush_rows=10_000_000, flush_interval_s=3600.0, group_commit_ms=1)
    yield s
    s.close()


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite tests/formats/*/*/expected.csv from what the queries answer (then check them by hand)")
