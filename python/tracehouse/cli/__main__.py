"""`python -m tracehouse.cli ...`: the same command as `tracehouse ...`."""

from . import run

run()
