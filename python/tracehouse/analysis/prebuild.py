"""`analyze index`: the derived indexes of a trace built now rather than on first use.

Owns building every index a trace's format has a profile for (spans, the call paths over
them, objects, locals, density), saved in the store, with the time each took: a trace about to be questioned
many times (a served store, a benchmark) pays the builds once, up front.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pyarrow as pa

from ..errors import BadInput
from ..schema import Column
from .registry import Analysis, Answer, Note, Param, Title

KINDS = ("spans", "calls", "objects", "locals", "density")


@dataclass
class Built(Answer):
    trace: str
    seconds: dict
    skipped: list[str] = field(default_factory=list)

    def table(self) -> pa.Table:
        return pa.table(
            {
                "index": pa.array(list(self.seconds), pa.string()),
                "seconds": pa.array(list(self.seconds.values()), pa.float64()),
            }
        )

    def to_json(self, shown: dict) -> dict:
        return {"trace": self.trace, "built_s": self.seconds}

    def show(self, shown: dict) -> list:
        return [Note(s) for s in self.skipped] + [
            Title(f"{w}: ready ({secs:.2f} s)") for w, secs in self.seconds.items()
        ]

    def save(self, store, name, traces, params, shown) -> None:
        return None  # the indexes are saved already; there is nothing else to keep


def _index(store, trace, window, *, what=None) -> Built:
    from . import calltree, event_streams, spans, stack, state
    from .profiles import PROFILES, locals_config, span_config

    wanted = what.split(",") if what else list(KINDS)
    bad = [w for w in wanted if w not in KINDS]
    if bad:
        raise BadInput(f"index {bad[0]!r}", expected=", ".join(KINDS))
    fmt = store.trace(trace).format
    prof = PROFILES.get(fmt)
    out = Built(trace, {})
    for w in wanted:
        t0 = time.perf_counter()
        if w == "spans":
            spans.span_index(store, trace, save=True)
        elif w == "calls":  # the flame graph's, call tree's and timeline's paths per span
            calltree.call_paths(store, trace, span_config(store, trace))
        elif w == "objects":
            if prof is None or prof.objects is None:
                out.skipped.append(f"skipping objects: no object profile for format {fmt!r}")
                continue
            state.objects_index(store, trace, save=True)
        elif w == "locals":
            cfg = locals_config(store, trace)
            if cfg is None:
                out.skipped.append(f"skipping locals: no locals profile for format {fmt!r}")
                continue
            stack.locals_index(store, trace, cfg, save=True)
        else:
            event_streams.density_index(store, trace, save=True)
        out.seconds[w] = round(time.perf_counter() - t0, 3)
    return out


INDEX = Analysis(
    "index",
    "build the derived indexes now (else built on first use)",
    _index,
    params=(Param("what", "str", "", "comma-separated: spans, calls, objects, locals, density (default all)"),),
    columns=(Column("index", "string", "", "the index built"), Column("seconds", "float64", "s", "how long it took")),
    fast=False,
)
