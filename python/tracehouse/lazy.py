"""Heavy third-party modules (pyarrow, numpy, DuckDB) bound at import, loaded on first use.

Owns `module(name)`: a stand-in for `import name` at the top of a module. The store's
modules name pyarrow, numpy and DuckDB everywhere, but listing or searching traces reads
only the SQLite catalog, and a count of a whole view is answered from it too: importing
those three costs 0.5-0.9 s of CPU (`python -X importtime`), 5-40x what the command
itself needs. With `pa = lazy.module("pyarrow")` the name is bound at once and the
module is imported the first time an attribute of it is read; the stand-in then holds
the module's attributes itself, so a hot loop reading `pa.int64` pays a plain module
attribute lookup, as with the real module.

Not `importlib.util.LazyLoader`: it puts a half-made module into `sys.modules` (a
check of what a command loaded would see pyarrow everywhere), and a module made from
submodules and C extensions (pyarrow.parquet, numpy) is not safe to load that way.
"""

from __future__ import annotations

import importlib
import types


class _Deferred(types.ModuleType):
    """Stands for the module named at creation; imports it when an attribute is first read."""

    def __getattr__(self, attr: str):
        # Only called for names not in this object's __dict__: before the first load, and
        # for attributes the real module gained after it (a submodule imported later).
        real = importlib.import_module(self.__dict__["_deferred_name"])
        self.__dict__.update(real.__dict__)
        return getattr(real, attr)

    def __repr__(self) -> str:
        return f"<deferred module {self.__dict__['_deferred_name']!r}>"


def module(name: str) -> types.ModuleType:
    """`name` itself if it is imported already, else a stand-in importing it on first use."""
    import sys

    real = sys.modules.get(name)
    if real is not None:
        return real
    m = _Deferred(name)
    m.__dict__["_deferred_name"] = name
    return m
