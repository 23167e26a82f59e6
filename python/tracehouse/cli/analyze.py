"""`tracehouse analyze NAME TRACE ...`: thin shells over `tracehouse.analysis`.

Owns the analyses' command-line surface: arguments, human output (tables, trees,
bpftrace-style histograms), `--json`, and `--save` (the answer becomes a result in the
store, linked to the traces it was computed over). Derived data (processed span trace,
indexes) is saved on first use whenever the store can be written; when another process
holds the writer lock it is kept in memory for the command instead.

A saved result records, under `params["args"]`, every argument of the analysis that can
change its answer (all of them but the ones that only change what is shown: `--json`,
`--limit`, `--top`, `--out`, ...; times in ns, the traces a `--search` selected by name),
and `params["analysis"]`; `replay_argv` turns them back into the command line that
computes the same answer (`tracehouse results show ID` prints it).

Over 600 lines on purpose: some twenty analyses, each a short function beside the arguments
it takes, and `replay_argv`, which rebuilds a saved result's command line from that same
parser; split by analysis they would each import the same dozen helpers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .. import default_path
from ..errors import BadInput
from ..store import Store
from .output import add_spark_args, spark_conf


def _out():
    from .output import arrow_table_render, emit_json, err, out

    return out, err, emit_json, arrow_table_render


def open_store(args) -> Store:
    """Writable (lazily: the writer lock is taken on the first save), fsync off: derived
    data can always be recomputed."""
    return Store(args.store or default_path(), fsync="off")


def _ns(text: str | int | None) -> int | None:
    """An int in ns, or a number with a unit: 1500, 1.5us, 2ms, 0.25s."""
    if text is None or isinstance(text, int):
        return text
    t = str(text).strip().replace("_", "")
    for suffix, mult in (("ns", 1), ("us", 1_000), ("µs", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000)):
        if t.endswith(suffix) and t[: -len(suffix)].replace(".", "", 1).lstrip("-").isdigit():
            return int(round(float(t[: -len(suffix)]) * mult))
    try:
        return int(t)
    except ValueError:
        raise BadInput(f"time {text!r}", expected="ns as an integer, or a number with ns/us/ms/s") from None


def _time(text: str) -> int:
    """argparse type of a time argument: ns, or a number with a unit (recorded as ns)."""
    try:
        return _ns(text)
    except BadInput as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _span_cfg(store: Store, args):
    from ..analysis.format_defaults import span_config

    return span_config(store, args.trace, getattr(args, "begin", None), getattr(args, "end", None),
                       getattr(args, "key", None), getattr(args, "name", None))


SPAN_VIEW = ("span_id", "producer", "depth", "ts", "dur", "self_time", "closed")


def _render(args, table: pa.Table, *, title: str | None = None, limit: int = 50, view: tuple[str, ...] = ()) -> None:
    """JSON (every row and column) with --json, else a table of the first `limit` rows'
    `view` columns (all when empty)."""
    out, err, emit_json, render = _out()
    if args.json:
        emit_json({"rows": table.to_pylist()} | ({"title": title} if title else {}))
        return
    if title:
        out.print(title, markup=False, highlight=False, style="bold")
    if view:
        table = table.select([c for c in view if c in table.column_names])
    render(table, "table", limit=limit, more="--limit N shows more, --json all")


# Arguments that never change an answer, only how it is shown or where it goes (and the
# parser's own plumbing): not recorded with a saved result.
_NOT_ANSWER = frozenset({"json", "save", "save_name", "limit", "top", "out", "store", "command", "analysis",
                         "analysis_fn", "fn", "results_fn", "results_cmd"})


def answer_args(args, resolved: dict | None = None) -> dict:
    """Every argument of the analysis that can change its answer, as parsed (times in ns),
    with `resolved` values in place of the given ones (the trace names a --search found)."""
    out = {k: v for k, v in sorted(vars(args).items()) if k not in _NOT_ANSWER and not callable(v)}
    if args.analysis == "cursor":  # a cursor's answer is its page: its size and direction
        out["limit"] = args.limit
    return out | (resolved or {})


def result_params(args, extra: dict | None = None, resolved: dict | None = None) -> dict:
    """The params of a saved result: `extra` (what the analysis adds for SQL readers), the
    analysis name and its answer's arguments (`answer_args`)."""
    return (extra or {}) | {"analysis": args.analysis, "args": answer_args(args, resolved)}


def _saved(args, rid: int | None) -> None:
    if rid is None:
        return
    out, err, *_ = _out()
    err.print(f"saved as result {rid}")


# -- analyses --------------------------------------------------------------------------


def a_spans(args) -> int:
    from ..analysis import spans as S

    out, err, emit_json, render = _out()
    with open_store(args) as s:
        cfg = _span_cfg(s, args)
        sp = S.pair(s, args.trace, cfg)
        saved = S.save(s, sp, params=result_params(args)) if args.save else None
        data = {"trace": args.trace, "config": cfg.to_json(), "stats": sp.stats,
                "rows": sp.table.slice(0, args.limit).to_pylist(), "total": sp.table.num_rows,
                "unmatched": sp.unmatched.slice(0, args.limit).to_pylist(),
                "processed_trace": saved["params"]["derived"] if saved else None,
                "result": saved["id"] if saved else None}
    if args.json:
        emit_json(data)
        return 0
    st = sp.stats
    out.print(f"[bold]{args.trace}[/bold]: {st['spans']:,} spans from {st['begins']:,} {cfg.begin} / "
              f"{st['ends']:,} {cfg.end} (key {cfg.key or 'nesting only'}) in {st['seconds']:.2f} s "
              f"(read {st['read_s']:.2f} s, pair {st['pair_s']:.2f} s)")
    out.print(f"closed {st['closed']:,}, unclosed begins {st['unclosed_begins']:,}, "
              f"unmatched ends {st['unmatched_ends']:,}")
    name_col = cfg.name_column
    view = SPAN_VIEW[:3] + ((S._begin_name(name_col),) if name_col else ()) + SPAN_VIEW[3:]
    render(sp.table.slice(0, args.limit).select([c for c in view if c in sp.table.column_names]), "table")
    if sp.table.num_rows > args.limit:
        err.print(f"({sp.table.num_rows:,} spans, {args.limit} shown; --limit N, --json)")
    if sp.unmatched.num_rows:
        out.print("unmatched halves", style="bold")
        render(sp.unmatched, "table", limit=10, more="--json lists them")
    if saved:
        out.print(f"saved as processed trace [bold]{saved['params']['derived']}[/bold] (result {saved['id']})")
    return 0


def a_children(args) -> int:
    from ..analysis import spans as S

    with open_store(args) as s:
        cfg = _span_cfg(s, args)
        t = S.children(s, args.trace, args.span, cfg)
        rid = _save_table(s, args, "children", [args.trace], t, {"config": cfg.to_json()})
    cfg = _span_cfg_quiet(args)
    view = SPAN_VIEW[:3] + ((cfg,) if cfg else ()) + SPAN_VIEW[3:]
    _render(args, t, title=f"children of span {args.span}: {t.num_rows}", limit=args.limit, view=view)
    _saved(args, rid)
    return 0


def _span_cfg_quiet(args) -> str | None:
    """The name column the pairing flags (or the TOD profile) give, for display."""
    if getattr(args, "name", None) or getattr(args, "key", None):
        return args.name or args.key
    return "behavior_id" if getattr(args, "begin", None) is None else None


def _save_table(s: Store, args, analysis: str, traces: list[str], t: pa.Table, params: dict | None = None,
                payload: Any = None, resolved: dict | None = None):
    if not args.save:
        return None
    from ..analysis.results import save_table

    return save_table(s, analysis, traces, t, params=result_params(args, params, resolved), payload=payload)


def a_calltree(args) -> int:
    from ..analysis import spans as S

    out, err, emit_json, render = _out()
    with open_store(args) as s:
        cfg = _span_cfg(s, args)
        t = S.thread_calls(s, args.trace, args.thread, cfg, start=_ns(args.start), end=_ns(args.end_time),
                           max_depth=args.max_depth)
        rid = _save_table(s, args, "calltree", [args.trace], t, {"config": cfg.to_json()})
    if args.json:
        emit_json({"rows": t.slice(0, args.limit).to_pylist(), "total": t.num_rows})
        return 0
    name_col = cfg.name_column
    rows = t.slice(0, args.limit).to_pylist()
    for r in rows:
        name = r.get(name_col) if name_col else cfg.begin
        mark = "" if r["closed"] else "  (unclosed)"
        out.print(f"{'  ' * r['depth']}{name}  [span {r['span_id']}]  {r['ts']} +{r['dur']:,} ns "
                  f"(self {r['self_time']:,}){mark}", highlight=False, markup=False)
    if t.num_rows > args.limit:
        err.print(f"({t.num_rows:,} calls, {args.limit} shown; --limit, --start/--end, --max-depth narrow it)")
    _saved(args, rid)
    return 0


def _call_tree(s: Store, args) -> tuple[pa.Table, dict]:
    """The aggregated call tree `tree` and `flame` show, and its configuration: the trace's stack
    samples when its format declares them and no pairing flag is given, else its spans."""
    from ..analysis import samples
    from ..analysis import spans as S

    pairing = any(getattr(args, k, None) is not None for k in ("begin", "end", "key", "name"))
    sc = None if pairing else samples.sample_config(s, args.trace)
    if sc is not None:
        return samples.call_tree(s, args.trace, sc, producers=args.thread or None), {"samples": sc.to_json()}
    cfg = _span_cfg(s, args)
    return S.aggregated_call_tree(s, args.trace, cfg, producers=args.thread or None), {"config": cfg.to_json()}


def a_tree(args) -> int:
    with open_store(args) as s:
        t, config = _call_tree(s, args)
        rid = _save_table(s, args, "calltree-aggregated", [args.trace], t, config)
    top = t.take(pc.sort_indices(t, [("total_ns", "descending")])) if t.num_rows else t
    _render(args, top, title=f"aggregated call tree: {t.num_rows:,} call paths (by total time)", limit=args.limit)
    _saved(args, rid)
    return 0


def a_flame(args) -> int:
    from ..analysis import spans as S

    out, err, *_ = _out()
    with open_store(args) as s:
        t, config = _call_tree(s, args)
        text = S.folded(t, "total_ns" if args.total else "self_ns")
        rid = None
        if args.save:
            from ..analysis.results import save_file

            rid = save_file(s, "flame", [args.trace], text, filename=f"{args.trace}.folded",
                            params=result_params(args, config | {"value": "total_ns" if args.total else "self_ns"}))
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        err.print(f"wrote {text.count(chr(10)):,} stacks to {args.out} (flamegraph.pl, speedscope, inferno read it)")
    elif args.json:
        from .output import emit_json

        emit_json({"folded": text})
    else:
        sys.stdout.write(text)
    _saved(args, rid)
    return 0


def _where_list(args) -> list:
    from ..analysis.cursors import parse_where

    return [parse_where(w) for w in args.where or []]


def a_cursor(args) -> int:
    from ..analysis.cursors import cursor

    out, err, emit_json, render = _out()
    with open_store(args) as s:
        c = cursor(s, args.trace, types=args.type or None, producers=args.producer or None, where=_where_list(args),
                   start=_ns(args.start), end=_ns(args.end), at=_ns(args.at))
        if args.at is None:
            if args.backward:
                c.seek_end()
        t0 = time.perf_counter()
        page = c.prev(args.limit) if args.backward else c.next(args.limit)
        secs = time.perf_counter() - t0
        rid = None
        if args.save:
            from ..analysis.results import save_search

            rid = save_search(s, args.save_name or f"cursor {args.trace}", args.trace, c.filter, at=_ns(args.at),
                              params=result_params(args))
    if args.json:
        # An empty page moved nowhere: no position (the cursor's start sentinel is no event).
        emit_json({"rows": page.to_pylist(), "position": list(c.position) if page.num_rows else None,
                   "after": c.after if page.num_rows else None, "seconds": round(secs, 4)}
                  | ({"message": _no_match(args)} if not page.num_rows else {}))
    else:
        if page.num_rows == 0:
            out.print(_no_match(args), highlight=False, markup=False)
        else:
            render(page, "table", limit=args.limit)
            err.print(f"{page.num_rows} events in {secs * 1000:.1f} ms; next page: --at {c.position[0]} "
                      f"(position {c.position[0]}/{c.position[1]}/{c.position[2]})")
    _saved(args, rid)
    return 0


def _no_match(args) -> str:
    """What an empty cursor page says: no event matches (after / before --at when given)."""
    if args.at is None:
        return "no events match"
    return f"no events match {'before' if args.backward else 'after'} {args.at}"


def a_state(args) -> int:
    from ..analysis import state as ST
    from ..analysis.format_defaults import object_config

    with open_store(args) as s:
        cfg = object_config(s, args.trace, args.type, args.object_col, args.field_col, args.value_col)
        t0 = time.perf_counter()
        t = ST.object_state(s, args.trace, args.object, _ns(args.at), cfg)
        secs = time.perf_counter() - t0
        rid = _save_table(s, args, "state", [args.trace], t, {"config": cfg.to_json()})
    _render(args, t, title=f"object {args.object} at {_ns(args.at)}: {t.num_rows} fields ({secs * 1000:.1f} ms)",
            limit=args.limit)
    _saved(args, rid)
    return 0


def a_history(args) -> int:
    from ..analysis import state as ST
    from ..analysis.format_defaults import object_config

    with open_store(args) as s:
        cfg = object_config(s, args.trace, args.type, args.object_col, args.field_col, args.value_col)
        t = ST.field_history(s, args.trace, args.object, args.field, cfg, start=_ns(args.start), end=_ns(args.end))
        rid = _save_table(s, args, "history", [args.trace], t, {"config": cfg.to_json()})
    _render(args, t, title=f"object {args.object} field {args.field}: {t.num_rows} writes", limit=args.limit)
    _saved(args, rid)
    return 0


def a_stack(args) -> int:
    from ..analysis import stack as SK

    out, err, emit_json, render = _out()
    with open_store(args) as s:
        cfg = _span_cfg(s, args)
        t0 = time.perf_counter()
        frames = SK.stack_frames(s, args.trace, args.thread, _ns(args.at), cfg)
        secs = time.perf_counter() - t0
        rid = None
        if args.save:
            t = pa.Table.from_pylist([f | {"locals": json.dumps(f["locals"])} for f in frames]) if frames \
                else pa.table({"depth": pa.array([], pa.int64())})
            rid = _save_table(s, args, "stack", [args.trace], t, {"config": cfg.to_json()})
    if args.json:
        emit_json({"frames": [f | {"locals": {str(k): v for k, v in f["locals"].items()}} for f in frames],
                   "seconds": round(secs, 4)})
        return 0
    name_col = cfg.name_column
    out.print(f"thread {args.thread} at {_ns(args.at)}: {len(frames)} frames ({secs * 1000:.1f} ms)", style="bold",
              markup=False, highlight=False)
    skip = {"span_id", "ts", "end_ts", "dur", "self_time", "producer", "seq", "end_seq", "depth", "parent_id",
            "closed", "locals", name_col}
    for f in frames:
        args_txt = ", ".join(f"{k}={v}" for k, v in f.items() if k not in skip and not k.startswith("end_") and v is not None)
        loc = ", ".join(f"{k}={v}" for k, v in f["locals"].items())
        out.print(f"#{f['depth']:<3} {f.get(name_col) if name_col else cfg.begin}({args_txt})  since {f['ts']}"
                  + (f"  locals: {loc}" if loc else ""), highlight=False, markup=False)
    _saved(args, rid)
    return 0


def _engine(args, s: Store):
    """The engine of `--engine duckdb|spark` (pure-SQL path), or None: the store's own
    (indexes, Rust) path."""
    if not getattr(args, "engine", None):
        return None
    from ..store.engines import open_engine

    return open_engine(s, args.engine, master=args.master, conf=spark_conf(args))


def _answered(engine, default: str = "duckdb") -> str:
    return f"answered by {engine.description} (SQL)" if engine is not None else f"answered by {default}"


def a_density(args) -> int:
    from ..analysis import statistics as ST

    with open_store(args) as s, _engine(args, s) or _none() as e:
        traces = ST.select_traces(s, args.traces, _search(args))
        t0 = time.perf_counter()
        kw = {"by": args.by, "start": args.start, "end": args.end, "types": args.type or None,
              "producers": args.producer or None}
        if e is not None:
            parts = [ST.density_by_sql(e, tr, args.bins, **kw) for tr in traces]
            t = parts[0] if len(parts) == 1 else pa.concat_tables(
                [p.add_column(0, "trace", pa.array([tr] * p.num_rows, pa.string())) for tr, p in zip(traces, parts)])
        elif len(traces) == 1:
            t = ST.density(s, traces[0], args.bins, **kw)
        else:
            t = ST.multi_density(s, traces, args.bins, **kw)
        secs = time.perf_counter() - t0
        rid = _save_table(s, args, "density", traces, t, {"search": args.search}, resolved=_resolved(args, traces))
    _render(args, t, title=f"density: {args.bins} bins by {args.by} over {len(traces)} trace(s) ({secs * 1000:.1f} ms, "
                          f"{_answered(e) if e is not None else 'density index'})", limit=args.limit)
    _saved(args, rid)
    return 0


def _search(args) -> dict | None:
    if not args.search:
        return None
    return {"name": args.search, "format": getattr(args, "format", None)}


def _resolved(args, traces: list[str]) -> dict:
    """The traces a --search selected, recorded by name (replaying gives the same answer
    after more traces match the pattern)."""
    return {"traces": traces, "search": None} | ({"format": None} if "format" in vars(args) else {})


def a_stats(args) -> int:
    from ..analysis import statistics as ST

    with open_store(args) as s, _engine(args, s) or _none() as e:
        traces = ST.select_traces(s, args.traces or [], _search(args))
        t = ST.multi_stats(e or s, traces, args.by, start=args.start, end=args.end, state=args.state,
                           source_type=args.type)
        rid = _save_table(s, args, f"stats-by-{args.by}", traces, t, {"by": args.by, "search": args.search},
                          resolved=_resolved(args, traces))
        title = f"statistics by {args.by} of {len(traces)} trace(s), {_answered(e)}"
    _render(args, t, title=title, limit=args.limit)
    _saved(args, rid)
    return 0


def _values(s: Store, args, trace: str):
    from ..analysis import histograms as H

    if args.type:
        return H.type_values(s, trace, args.type, args.value, group=args.by, start=_ns(args.start),
                             end=_ns(args.end_time))
    from ..analysis.format_defaults import span_config

    cfg = span_config(s, trace, args.begin, args.end, args.key, args.name)
    got = H.span_values(s, trace, group=args.by, config=cfg, include_unclosed=args.unclosed,
                        start=_ns(args.start), end=_ns(args.end_time))
    if len(got[0]) == 0 and args.by not in ("none", "producer"):
        # `--by caller` without --type groups spans by their calling span; a probe field named
        # caller (seed 004's scripts print one) is a column of an event type: say which.
        typed = H.types_with_column(s, trace, args.by)
        if typed:
            raise BadInput(f"no spans of trace {trace!r} to group by {args.by}; event type(s) "
                           f"{', '.join(typed)} have a column {args.by!r}",
                           expected=f"--type {typed[0]} --by {args.by} groups by that column")
    return got


def _hist_of(s: Store, args, trace: str):
    from ..analysis import histograms as H

    values, codes, names, stack = _values(s, args, trace)
    kind = args.analysis if args.analysis in ("hist", "lhist") else args.kind
    kw = {"k": args.k} if kind == "hist" else {"min": args.min, "max": args.max, "step": args.step}
    return H.histogram(values, kind=kind, unit=args.unit, groups=codes, group_names=names, below=_ns(args.below),
                       stack_keys=stack, **kw)


def a_hist(args) -> int:
    from ..analysis import histograms as H

    out, err, emit_json, render = _out()
    with open_store(args) as s, _engine(args, s) or _none() as e:
        t0 = time.perf_counter()
        if e is not None:
            if not args.type:
                raise BadInput(f"--engine {args.engine} histograms are of an event type's column",
                               expected="--type TYPE (span pairing runs in the Rust core, not in SQL)")
            kind = args.analysis if args.analysis in ("hist", "lhist") else args.kind
            kw = {"k": args.k} if kind == "hist" else {"min": args.min, "max": args.max, "step": args.step}
            h = H.type_histogram_sql(e, args.trace, args.type, args.value, group=args.by, start=_ns(args.start),
                                     end=_ns(args.end_time), kind=kind, unit=args.unit, below=_ns(args.below), **kw)
        else:
            h = _hist_of(s, args, args.trace)
        secs = time.perf_counter() - t0
        rid = None
        if args.save:
            rid = _save_table(s, args, args.analysis, [args.trace], h.buckets(), {
                "kind": h.kind, **h.params, "unit": h.unit},
                payload={"text": h.text(args.top), "below": h.below, "summary": dict(list(h.summary.items())[:20])})
    if args.json:
        emit_json(h.to_json(args.top) | {"seconds": round(secs, 4), "engine": _answered(e, "the Rust core")})
        return 0
    sys.stdout.write(h.text(args.top))
    n = int(h.counts.sum())
    err.print(f"{n:,} values in {len(h.groups):,} group(s), {secs * 1000:.0f} ms, {_answered(e, 'the Rust core')}"
              + (f"; {args.top} largest groups shown" if len(h.groups) > args.top else ""))
    for g in h.order(args.top)[::-1][:10] if h.below else []:
        b = h.below[h.groups[g]]
        label = f"[{h.groups[g]}] " if h.groups[g] else ""
        out.print(f"{label}{b['share'] * 100:.1f}% of {b['count']:,} under {args.below:,} ns ({b['below']:,})",
                  highlight=False, markup=False)
    _saved(args, rid)
    return 0


def a_compare(args) -> int:
    from ..analysis import histograms as H

    out, err, emit_json, render = _out()
    args.by = "none"
    with open_store(args) as s:
        before = _hist_of(s, args, args.before)
        after = _hist_of(s, args, args.after)
        table = H.compare(before, after)
        text = H.compare_text(before, after, (args.before, args.after))
        rid = None
        if args.save:
            from ..analysis.results import save_table

            rid = save_table(s, "compare", [args.before, args.after], table,
                             params=result_params(args, {"kind": before.kind, **before.params, "unit": before.unit}),
                             payload={"text": text, "before": before.summary, "after": after.summary})
    if args.json:
        emit_json({"buckets": table.to_pylist(), "before": next(iter(before.summary.values()), {}),
                   "after": next(iter(after.summary.values()), {}), "below": H.below_change(before, after)})
    else:
        sys.stdout.write(text)
    _saved(args, rid)
    return 0


def a_index(args) -> int:
    from ..analysis import spans as S
    from ..analysis import stack as SK
    from ..analysis import state as ST
    from ..analysis import statistics as STS
    from ..analysis.format_defaults import PROFILES, locals_config

    out, err, emit_json, render = _out()
    what = args.what.split(",") if args.what else ["spans", "objects", "locals", "density"]
    done = {}
    with open_store(args) as s:
        fmt = s.trace(args.trace).format
        prof = PROFILES.get(fmt)
        for w in what:
            t0 = time.perf_counter()
            if w == "spans":
                S.span_index(s, args.trace, save=True)
            elif w == "objects":
                if prof is None or prof.objects is None:
                    err.print(f"skipping objects: no object profile for format {fmt!r}")
                    continue
                ST.objects_index(s, args.trace, save=True)
            elif w == "locals":
                cfg = locals_config(s, args.trace)
                if cfg is None:
                    err.print(f"skipping locals: no locals profile for format {fmt!r}")
                    continue
                SK.locals_index(s, args.trace, cfg, save=True)
            elif w == "density":
                STS.density_index(s, args.trace, save=True)
            else:
                raise BadInput(f"index {w!r}", expected="spans, objects, locals, density")
            done[w] = round(time.perf_counter() - t0, 3)
    if args.json:
        emit_json({"trace": args.trace, "built_s": done})
    else:
        for w, secs in done.items():
            out.print(f"{w}: ready ({secs:.2f} s)")
    return 0


# -- plugin analyses ----------------------------------------------------------------------


def _plugin_runner(name: str, plugin):
    """`tracehouse analyze NAME` for a plugin: `run(store, args)` returns a pyarrow Table
    (rendered, saved with --save), a str (printed) or a JSON-able value."""

    def fn(args) -> int:
        out, err, emit_json, render = _out()
        with open_store(args) as s:
            result = plugin.run(s, args)
            rid = None
            if isinstance(result, pa.Table):
                traces = [args.trace] if getattr(args, "trace", None) else []
                rid = _save_table(s, args, name, traces, result, {"plugin": name})
        if isinstance(result, pa.Table):
            _render(args, result, title=f"{name}: {result.num_rows} rows", limit=args.limit)
        elif isinstance(result, str) and not args.json:
            sys.stdout.write(result if result.endswith("\n") else result + "\n")
        else:
            emit_json(result)
        _saved(args, rid)
        return 0

    return fn


def _add_plugins(sub) -> None:
    """Analyses other packages declare under the `tracehouse.analyses` entry-point group:
    a module or object with NAME, DESCRIPTION, `run(store, args)` and optionally
    `add_arguments(parser)` (the trace argument, --json, --save, --limit are given)."""
    from ..formats import registry

    # A plugin that fails to load is left out: `tracehouse tools` lists the failure.
    plugins = registry.discover("analysis", skip=tuple(sub.choices), on_error=lambda ep, e: None)
    for name, plugin in plugins.items():
        if not callable(getattr(plugin, "run", None)):
            continue
        p = _common(sub.add_parser(name, help=getattr(plugin, "DESCRIPTION", "") or f"plugin analysis {name}"),
                    _plugin_runner(name, plugin))
        if callable(getattr(plugin, "add_arguments", None)):
            plugin.add_arguments(p)


# -- parser -----------------------------------------------------------------------------


def cmd_analyze(args) -> int:
    return args.analysis_fn(args)


def _span_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("pairing (default: the format's profile)")
    g.add_argument("--begin", help="begin event type")
    g.add_argument("--end", help="end event type")
    g.add_argument("--key", help="column matching an end to its begin (default: nesting only)")
    g.add_argument("--name", help="begin column naming a span (default: the key)")


def _obj_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("object writes (default: the format's profile)")
    g.add_argument("--type", help="event type writing fields")
    g.add_argument("--object-col", help="its object column")
    g.add_argument("--field-col", help="its field column")
    g.add_argument("--value-col", help="its value column")


def _none():
    from contextlib import nullcontext

    return nullcontext()


def _engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=("duckdb", "spark"),
                   help="answer by plain SQL on this engine (default: indexes and the Rust core)")
    add_spark_args(p)


def _common(p: argparse.ArgumentParser, fn, *, trace: bool = True, limit: int = 50) -> argparse.ArgumentParser:
    if trace:
        p.add_argument("trace")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument("--save", action="store_true", help="save the answer as a result in the store")
    p.add_argument("--limit", type=int, default=limit, help=f"rows shown (default {limit})")
    p.set_defaults(analysis_fn=fn)
    return p


def _hist_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--by", default="none",
                   help="group by: none | caller | stack | name | producer | a column (default none)")
    p.add_argument("--unit", default="us", choices=("ns", "us", "ms", "s"), help="value unit (default us)")
    p.add_argument("--below", type=_time, help="report the share of values under this duration, e.g. 10us")
    p.add_argument("--type", help="histogram of an event type's column instead of span durations")
    p.add_argument("--value", default="dur", help="that column (default dur)")
    p.add_argument("--unclosed", action="store_true", help="include spans cut without an end")
    p.add_argument("--start", type=_time, help="span start time range, from (ns or with a unit)")
    p.add_argument("--end-time", dest="end_time", type=_time, help="... to")
    p.add_argument("--top", type=int, default=20, help="groups printed, the largest (default 20)")
    _span_args(p)


def _add_analyses(sub) -> None:
    """`analyze NAME ...` for every analysis, ours and the plugins'."""
    _add_builtin_analyses(sub)
    _add_plugins(sub)


class _Listing:
    """Stands for the subparsers of `analyze` to list what `_add_builtin_analyses` adds."""

    def __init__(self) -> None:
        self.names: list[tuple[str, str]] = []

    def add_parser(self, name: str, help: str = "", **_) -> argparse.ArgumentParser:
        self.names.append((name, help))
        return argparse.ArgumentParser(add_help=False)


def builtin_analyses() -> list[tuple[str, str]]:
    """(name, help) of the built-in `tracehouse analyze NAME` subcommands."""
    listing = _Listing()
    _add_builtin_analyses(listing)
    return listing.names


def _add_builtin_analyses(sub) -> None:
    p = _common(sub.add_parser("spans", help="pair begins and ends into spans; --save keeps them as a processed trace"),
                a_spans)
    _span_args(p)
    p = _common(sub.add_parser("children", help="direct callees of one call"), a_children)
    p.add_argument("span", type=int, help="span id (span_id column)")
    _span_args(p)
    p = _common(sub.add_parser("calltree", help="the call tree of one thread, indented"), a_calltree, limit=200)
    p.add_argument("--thread", type=int, required=True, help="producer id")
    p.add_argument("--start", type=_time, help="calls overlapping [start, end) (ns or with a unit)")
    p.add_argument("--end-time", dest="end_time", type=_time, help="...")
    p.add_argument("--max-depth", type=int)
    _span_args(p)
    p = _common(sub.add_parser("tree", help="aggregated call tree: spans merged by call path"), a_tree)
    p.add_argument("--thread", type=int, action="append", help="only these producers (repeat)")
    _span_args(p)
    p = _common(sub.add_parser("flame", help="folded-stack flame graph text (flamegraph.pl, speedscope)"), a_flame)
    p.add_argument("--thread", type=int, action="append", help="only these producers (repeat)")
    p.add_argument("--total", action="store_true", help="total instead of self time per path")
    p.add_argument("--out", help="write to this file instead of stdout")
    _span_args(p)
    p = _common(sub.add_parser("cursor", help="events matching a filter, a page forward or backward from t"),
                a_cursor, limit=100)
    p.add_argument("--type", action="append", help="event type (repeat; default all)")
    p.add_argument("--producer", type=int, action="append", help="producer id (repeat)")
    p.add_argument("--where", action="append", help="parameter predicate 'COL OP VALUE' (repeat)")
    p.add_argument("--start", type=_time, help="ts >= start")
    p.add_argument("--end", type=_time, help="ts < end")
    p.add_argument("--at", type=_time, help="stand just before time t (default: the start, or the end with --backward)")
    p.add_argument("--backward", action="store_true", help="the page before the position")
    p.add_argument("--save-name", help="name of the saved search (with --save)")
    p = _common(sub.add_parser("state", help="every field of an object at time t"), a_state)
    p.add_argument("object", type=int)
    p.add_argument("--at", required=True, type=_time, help="time t (ns or with a unit)")
    _obj_args(p)
    p = _common(sub.add_parser("history", help="every value one field of an object took"), a_history, limit=100)
    p.add_argument("object", type=int)
    p.add_argument("field", type=int)
    p.add_argument("--start", type=_time)
    p.add_argument("--end", type=_time)
    _obj_args(p)
    p = _common(sub.add_parser("stack", help="the call stack of a thread at time t, with arguments and locals"), a_stack)
    p.add_argument("thread", type=int)
    p.add_argument("--at", required=True, type=_time, help="time t (ns or with a unit)")
    _span_args(p)
    p = _common(sub.add_parser("density", help="events per equal time bin, by type / producer"), a_density,
                trace=False, limit=20)
    p.add_argument("traces", nargs="*", help="traces (several: one table with a trace column)")
    p.add_argument("--bins", type=int, default=1000)
    p.add_argument("--by", default="type", choices=("none", "type", "producer", "both"))
    p.add_argument("--start", type=_time)
    p.add_argument("--end", type=_time)
    p.add_argument("--type", action="append", help="only these event types")
    p.add_argument("--producer", type=int, action="append", help="only these producers")
    p.add_argument("--search", help="every trace whose name matches this glob")
    _engine_args(p)
    p = _common(sub.add_parser("stats", help="counts and durations by type / producer / state, one or many traces"),
                a_stats, trace=False)
    p.add_argument("traces", nargs="*")
    p.add_argument("--by", default="type", choices=("type", "producer", "state"))
    p.add_argument("--search", help="also every trace whose name matches this glob")
    p.add_argument("--format", help="with --search: only traces of this format")
    p.add_argument("--start", type=_time)
    p.add_argument("--end", type=_time)
    p.add_argument("--state", help="by state: the state column (default: the span name)")
    p.add_argument("--type", help="by state: a span-kind event type instead of paired spans")
    _engine_args(p)
    for kind, help_ in (("hist", "log2 duration histogram, bpftrace hist() buckets"),
                        ("lhist", "linear duration histogram, bpftrace lhist() buckets")):
        p = _common(sub.add_parser(kind, help=help_), a_hist)
        _hist_args(p)
        _engine_args(p)
        if kind == "hist":
            p.add_argument("--k", type=int, default=0, help="2^k buckets per power of 2 (0..5)")
        else:
            p.add_argument("--min", type=int, required=True)
            p.add_argument("--max", type=int, required=True)
            p.add_argument("--step", type=int, required=True)
    p = _common(sub.add_parser("compare", help="before/after duration histograms of two traces"), a_compare, trace=False)
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--kind", default="hist", choices=("hist", "lhist"))
    p.add_argument("--k", type=int, default=0)
    p.add_argument("--min", type=int, default=0)
    p.add_argument("--max", type=int, default=100)
    p.add_argument("--step", type=int, default=10)
    _hist_args(p)
    p = _common(sub.add_parser("index", help="build the derived indexes now (else built on first use)"), a_index)
    p.add_argument("--what", help="comma-separated: spans, objects, locals, density (default all)")


def replay_argv(result: dict) -> list[str] | None:
    """The `tracehouse` arguments that compute a saved result's answer again, from the
    arguments it recorded (`params["args"]`), None for a result no analysis recorded
    them for (indexes, annotations, groups, results saved before they were recorded).
    Arguments at their default are left out."""
    params = result.get("params") or {}
    name, given = params.get("analysis"), params.get("args")
    if not isinstance(name, str) or not isinstance(given, dict):
        return None
    sub = argparse.ArgumentParser(add_help=False).add_subparsers(dest="analysis")
    _add_analyses(sub)
    parser = sub.choices.get(name)
    if parser is None:
        return None
    argv = ["analyze", name]
    for action in parser._actions:  # argparse has no public list of a parser's arguments
        if action.dest not in given:
            continue
        value = given[action.dest]
        if not action.option_strings:  # positional
            argv += [str(v) for v in value] if isinstance(value, list) else [str(value)]
        elif value == action.default or value is None:
            continue
        elif isinstance(action, argparse._StoreTrueAction):
            argv.append(action.option_strings[-1])
        elif isinstance(value, list):
            for v in value:
                argv += [action.option_strings[-1], str(v)]
        else:
            argv += [action.option_strings[-1], str(value)]
    return argv


def register(commands) -> None:
    """Adds `tracehouse analyze ...` (`tracehouse results` is cli/results.py)."""
    sp = commands.add("analyze", cmd_analyze)
    _add_analyses(sp.add_subparsers(dest="analysis", required=True, metavar="ANALYSIS"))
