"""The `tracehouse` command: a surface over `Store` (nothing below imports it).

`command.py` parses arguments and runs a command; the command groups live one module each
beside it (`analyze`, `replay`, `serve`, ...). `main` here imports them only when called,
so `import tracehouse.cli` costs nothing.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    from .command import main as run

    return run(argv)


__all__ = ["main"]
