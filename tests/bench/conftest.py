"""Every test under tests/bench/ is a benchmark smoke test (marker `bench`): `pytest -m "not bench"`
leaves them out for a quick run; CI runs them all (they check that each bench runs and reports, never
a speed)."""

import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "/tests/bench/" in str(item.path):
            item.add_marker(pytest.mark.bench)
