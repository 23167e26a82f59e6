"""mkdocs hooks (mkdocs.yml `hooks:`): the build fails under --strict when a generated page is stale.

Owns the link between the site and dev/docs_gen.py: before a build, every page that script
writes (the CLI reference from the argparse definitions, the benchmark index, the README's
table) is compared with what it would write now, and each one that differs is a warning, which
`mkdocs build --strict` (`make docs`, CI) turns into a failure naming the file and the command
that brings it up to date.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

log = logging.getLogger("mkdocs.hooks.tracehouse")
_GEN = Path(__file__).resolve().parent / "docs_gen.py"


def on_pre_build(config, **kwargs) -> None:
    spec = importlib.util.spec_from_file_location("tracehouse_docs_gen", _GEN)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for path in gen.stale():
        log.warning("%s is stale: run .venv/bin/python dev/docs_gen.py", path.relative_to(gen.ROOT))
