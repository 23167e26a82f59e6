"""Where the test suite's files are: the repository root, tests/ and tests/data/ (real captures)."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
DATA = TESTS / "data"
