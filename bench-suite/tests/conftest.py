"""The benchmark suite's tests: each a benchmark smoke test (marker `bench`, as tests/bench/), run by
`make test` beside tracehouse's own; they check that the experiments run and report, never a speed.
tests/helpers (pytest's pythonpath) is shared with tracehouse's tests."""

import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "/bench-suite/tests/" in str(item.path):
            item.add_marker(pytest.mark.bench)
