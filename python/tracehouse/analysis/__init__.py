"""Analyses: the classic trace questions, answered fast on big traces.

    import tracehouse
    from tracehouse import analysis as an

    store = tracehouse.open("./tracehouse-data")
    sp = an.pair(store, "run1")                    # spans: depth, parent, self time, unmatched halves
    an.save_spans(store, sp)                       # ... as the processed trace "run1:spans"
    an.children(store, "run1", span_id=42)         # direct callees of one call
    an.stack_frames(store, "run1", producer=3, t=1_200_000_000)
    an.object_state(store, "run1", obj=17, t=1_200_000_000)
    an.cursor(store, "run1", types=["field_write"], where=["target = 17"], at=t).next(100)
    an.density(store, "run1", bins=1000, by="type")
    h = an.histogram(*an.span_values(store, "run1", group="caller")[:1], unit="us"); print(h.text())

One module per family of analyses; each says what it owns, how it is fast and what its
output columns are, and declares its analyses for the registry (`registry.py`: name,
parameters with units, output columns; the command line and the web UI are loops over
it). Vectorized Arrow/numpy or SQL (`sql/*.sql`) where that fits, Rust
(`tracehouse._core`) for the sequential passes; never a Python loop over events.
Derived data (the processed span trace, the indexes in `indexes.py`) is saved in the
store the first time a question needs it, so repeated questions are lookups.

    an.analyses()["stats"].call(store, "run1", an.Window(start=t0, end=t1), by="producer")
"""

from __future__ import annotations

from .calltree import aggregated_call_tree, call_tree, folded, top_spans
from .cursors import Cursor, Filter, cursor, open_search, parse_where
from .event_streams import density, density_index, multi_density
from .histograms import Histogram, compare, compare_text, histogram, span_values, type_values
from .profiles import LocalsConfig, ObjectConfig, SpanConfig, locals_config, object_config, span_config
from .registry import Analysis, Param, Window, analyses
from .results import annotate, file_text, group, save_file, save_search, save_table, show
from .spans import Spans, children, pair, span, span_index, span_table, thread_calls
from .spans import save as save_spans
from .stack import frame_locals, stack_at, stack_frames
from .state import field_history, object_state, objects_index
from .statistics import multi_stats, select_traces, stats

__all__ = [
    "Analysis",
    "Cursor",
    "Filter",
    "Histogram",
    "LocalsConfig",
    "ObjectConfig",
    "Param",
    "SpanConfig",
    "Spans",
    "Window",
    "aggregated_call_tree",
    "analyses",
    "call_tree",
    "annotate",
    "children",
    "compare",
    "compare_text",
    "cursor",
    "density",
    "density_index",
    "field_history",
    "file_text",
    "folded",
    "frame_locals",
    "group",
    "histogram",
    "locals_config",
    "multi_density",
    "multi_stats",
    "object_config",
    "object_state",
    "objects_index",
    "open_search",
    "pair",
    "parse_where",
    "save_file",
    "save_search",
    "save_spans",
    "save_table",
    "select_traces",
    "show",
    "span",
    "span_config",
    "span_index",
    "span_table",
    "span_values",
    "stack_at",
    "stack_frames",
    "stats",
    "thread_calls",
    "top_spans",
    "type_values",
]
