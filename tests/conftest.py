"""Fixtures shared by the store tests (a store directory and an open store with small knobs), and CI's hypothesis profile."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

import tracehouse

# CI (`.ci/run` sets CI) draws the same examples on every run: a landing must not depend on
# whether this run's random draw meets a latent bug (a local `make test` keeps exploring, and
# what it finds becomes an explicit @example). Each property test still runs its examples.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


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
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite tests/formats/*/*/expected.csv from what the queries answer (then check them by hand)",
    )
