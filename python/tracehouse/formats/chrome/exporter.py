"""Export any trace as Chrome Trace Event JSON, the format Perfetto UI and chrome://tracing open.

Owns the mapping from tracehouse's model to Chrome's: producers become pid/tid
(a root producer or one of kind `process` is a process, with its `pid` attribute
as pid when it has one; every producer below it a thread of that process, with
its `tid` attribute as tid; all named by `M` events), and each event type is selected with SQL that
names its columns by role for the Rust encoder (`_core.ChromeWriter`, see
src/formats/chrome/export.rs). Types of the `chrome` format are written back exactly as
they were read (phases, ids, scopes, args with their original keys), and so is the chrome
`flow` type where another format declares it (perfetto's flows: s -> t ... -> f); other
formats map by kind: span -> X, instant -> i, begin/end -> B/E, counter -> C,
link (with dst_producer/dst_ts) -> a flow s -> f, with the event type as name
(or the column that names the event better: a strace syscall's name, a Paje
state's value), the format as category and the parameters as args. Counter
rows that came from one `C` event go back as that one event with all its series,
integers as integers.

Begin/end halves of every type go out in one query ordered by (ts, producer,
seq), so B and E interleave as they happened; a matched slice is written as its
B and E side by side. Rows are streamed from DuckDB batch by batch: memory does
not grow with the trace.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from ... import _core
from ...schema import EventType
from ...store.query import qident, qstr
from .. import chrome as fmt

NAME = "chrome"
EXTENSION = "json"
DESCRIPTION = "Chrome Trace Event JSON (opens in Perfetto UI and chrome://tracing); a .gz path is gzipped"

_KIND_PH = {"span": "X", "instant": "i", "begin": "B", "end": "E", "counter": "C", "link": "s"}

# Role columns of each chrome event type (column -> role), beside ts, producer, dur.
_CHROME_ROLES = {
    "slice": {
        "phase": "__ph",
        "thread_ts": "__tts",
        "thread_dur": "__tdur",
        "args": "__args",
        "end_args": "__end_args",
    },
    "slice_begin": {"phase": "__ph", "thread_ts": "__tts", "args": "__args"},
    "slice_end": {"thread_ts": "__tts", "args": "__args"},
    "instant": {"scope": "__s", "args": "__args"},
    "counter": {"id": "__id", "series": "__series", "value": "__value", "int_value": "__ivalue"},
    "async_slice": {"id": "__id", "id_local": "__id_local", "args": "__args", "end_args": "__end_args"},
    "async_begin": {"id": "__id", "id_local": "__id_local", "args": "__args"},
    "async_end": {"id": "__id", "id_local": "__id_local", "args": "__args"},
    "async_instant": {"id": "__id", "id_local": "__id_local", "args": "__args"},
    "flow": {
        "src_phase": "__ph",
        "id": "__id",
        "dst_producer": "__dst_producer",
        "dst_ts": "__dst_ts",
        "dst_phase": "__dst_ph",
        "bp": "__bp",
    },
    "sample": {"sf": "__sf", "stack": "__stack", "args": "__args"},
    "other": {"phase": "__ph", "id": "__id", "args": "__args"},
}
_CHROME_PH = {
    "slice": "X",
    "slice_begin": "B",
    "slice_end": "E",
    "instant": "i",
    "counter": "C",
    "async_slice": "b",
    "async_begin": "b",
    "async_end": "e",
    "async_instant": "n",
    "flow": "s",
    "sample": "P",
    "other": "i",
}


def _label_roles(fmt_name: str, event_type: str) -> dict[str, str]:
    """Columns of another format's event type that name its events better than the type does,
    and their category (column -> role): the format's declared labels (a strace syscall by its
    name, a Paje state by its value, a perf sample by the function it hit)."""
    from ..registry import format_of

    fmt = format_of(fmt_name)
    for t, name, cat in fmt.profile.get("labels", ()) if fmt is not None else ():
        if t == event_type:
            return {name: "__name"} | ({cat: "__cat"} if cat else {})
    return {}


def producer_map(producers: list[dict]) -> tuple[list[tuple[int, str, str]], list[dict]]:
    """([(producer id, pid JSON, tid JSON or '')], metadata events naming them)."""
    by_id = {p["id"]: p for p in producers}

    def root(p):
        """The producer that is p's Chrome process: p itself when it is a root or of kind
        `process` (a forked child is a process of its own, not a thread of its parent), else
        its nearest such ancestor."""
        seen = set()
        while (
            str(p.get("kind")).lower() != "process"
            and p.get("parent") is not None
            and p["parent"] in by_id
            and p["id"] not in seen
        ):
            seen.add(p["id"])
            p = by_id[p["parent"]]
        return p

    pids: dict[int, object] = {}
    used_pids: set = set()
    for p in sorted(producers, key=lambda p: p["id"]):
        if root(p) is p:
            pid = (p.get("attrs") or {}).get("pid", p["id"])
            if not isinstance(pid, (int, str)) or isinstance(pid, bool) or pid in used_pids:
                pid = p["id"]
                while pid in used_pids:
                    pid += 1_000_000
            used_pids.add(pid)
            pids[p["id"]] = pid
    mapping, meta = [], []
    used_tids: dict[object, set] = {}
    for p in sorted(producers, key=lambda p: p["id"]):
        attrs = p.get("attrs") or {}
        r = root(p)
        pid = pids[r["id"]]
        if r is p:
            mapping.append((p["id"], json.dumps(pid), ""))
            meta.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": p["name"]}})
            if "sort_index" in attrs:
                meta.append(
                    {"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": attrs["sort_index"]}}
                )
            if "labels" in attrs:
                meta.append({"name": "process_labels", "ph": "M", "pid": pid, "args": {"labels": attrs["labels"]}})
            continue
        taken = used_tids.setdefault(pid, set())
        tid = attrs.get("tid", p["id"])
        if not isinstance(tid, (int, str)) or isinstance(tid, bool) or tid in taken:
            tid = p["id"]
            while tid in taken:
                tid += 1_000_000
        taken.add(tid)
        name = p["name"]
        parent = by_id.get(p.get("parent"))
        if parent is not None and parent is not r:
            name = f"{parent['name']}/{name}"
        mapping.append((p["id"], json.dumps(pid), json.dumps(tid)))
        meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
        if "sort_index" in attrs:
            meta.append(
                {
                    "name": "thread_sort_index",
                    "ph": "M",
                    "pid": pid,
                    "tid": tid,
                    "args": {"sort_index": attrs["sort_index"]},
                }
            )
    return mapping, meta


def _is_chrome_flow(et: EventType) -> bool:
    """Whether `et` is the chrome format's `flow` type, declared by another format (perfetto's
    flows): written back as Chrome flow steps, as the chrome format's own."""
    flow = next((t for t in fmt.EVENT_TYPES if t.name == "flow"), None)
    return (
        et.name == "flow"
        and flow is not None
        and [(p.name, p.type) for p in et.params] == [(p.name, p.type) for p in flow.params]
    )


def _branch(trace: str, fmt_name: str, et: EventType, n: int) -> tuple[str, str]:
    """(SELECT of one event type with its columns named by role, default phase)."""
    cols = [qident("ts"), qident("producer"), qident("seq")]
    if et.kind == "span":
        cols.append(qident("dur"))
    chrome = et.name in _CHROME_ROLES and (fmt_name == fmt.FORMAT or _is_chrome_flow(et))
    if chrome:
        ph = _CHROME_PH[et.name]
        roles = dict(_CHROME_ROLES[et.name], name="__name", cat="__cat")
        for p in et.params:
            if p.name in roles:
                cols.append(f"{qident(p.name)} AS {qident(roles[p.name])}")
                continue
            k = fmt.arg_key(p)
            if k is not None:
                cols.append(f"{qident(p.name)} AS {qident(('e' if k[1] else 'a') + f'{n}:' + k[0])}")
        if "__ph" not in roles.values():
            cols.append(f"{qstr(ph)} AS __ph")
    else:
        ph = _KIND_PH[et.kind]
        names = {p.name for p in et.params}
        link = et.kind == "link" and {"dst_producer", "dst_ts"} <= names
        if et.kind == "link" and not link:
            ph = "i"
        roles = _label_roles(fmt_name, et.name)
        cols.append(f"{qstr(ph)} AS __ph")
        if "__name" not in roles.values():
            cols.append(f"{qstr(et.name)} AS __name")
        if "__cat" not in roles.values():
            cols.append(f"{qstr(fmt_name)} AS __cat")
        # A counter with a numeric `value` is that one series; other counters chart every numeric param.
        series = et.kind == "counter" and any(p.name == "value" and p.type in ("int64", "float64") for p in et.params)
        for p in et.params:
            if p.name in roles:
                cols.append(f"{qident(p.name)} AS {qident(roles[p.name])}")
            elif link and p.name in ("dst_producer", "dst_ts"):
                cols.append(f"{qident(p.name)} AS {qident('__' + p.name)}")
            elif series and p.name == "value":
                cols += ["'value' AS __series", f"{qident(p.name)} AS __value"]  # an integer stays one
            elif not series:
                cols.append(f"{qident(p.name)} AS {qident(f'a{n}:' + p.name)}")
        if link:
            cols.append(f"'{et.name}-' || producer || '-' || seq AS __id")
    return f"SELECT {', '.join(cols)} FROM {qident(trace)}.{qident(et.name)}", ph


def queries(trace: str, fmt_name: str, types: dict[str, EventType]) -> list[tuple[str, str]]:
    """[(SQL, default phase)]: one per event type, the begin/end halves of all types in one."""
    out, halves = [], []
    for n, et in enumerate(types.values()):
        sql, ph = _branch(trace, fmt_name, et, n)
        if et.kind in ("begin", "end"):
            halves.append(sql)
        else:
            out.append((sql + " ORDER BY ts, producer, seq", ph))
    if halves:
        union = "\nUNION ALL BY NAME\n".join(f"({h})" for h in halves)
        out.append((f"SELECT * FROM ({union}) ORDER BY ts, producer, seq", "i"))
    return out


def export(store, trace: str, out: str | Path, *, progress=None) -> dict:
    """Write `trace` to `out` (gzipped when it ends in .gz); returns path, events and bytes."""
    info = store.trace(trace)
    types = store.event_types(trace)
    mapping, meta_events = producer_map(store.producers(trace))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    writer = _core.ChromeWriter(mapping, first=not meta_events)
    tmp = out.with_name(out.name + ".tmp")
    opener = (lambda p: gzip.open(p, "wb", compresslevel=3)) if out.suffix == ".gz" else (lambda p: open(p, "wb"))  # noqa: SIM115 - opened by the with below
    with opener(tmp) as f:
        f.write(b'{"traceEvents":[')
        if meta_events:
            f.write(("\n" + ",\n".join(json.dumps(e, separators=(",", ":")) for e in meta_events)).encode())
        for sql, ph in queries(info.name, info.format, types):
            for batch in store.sql_batches(sql):
                f.write(writer.encode(batch, ph, "", ""))
                if progress is not None:
                    progress(batch.num_rows)
        f.write(writer.finish())
        tail = {}
        for k, v in (info.metadata or {}).items():
            if k.startswith("chrome.") and k not in ("chrome.traceEvents",):
                try:
                    tail[k[len("chrome.") :]] = json.loads(v)
                except (TypeError, ValueError):
                    pass
        tail.setdefault("otherData", {"tracehouse_trace": info.name, "format": info.format})
        f.write(b"\n]")
        for k, v in tail.items():
            f.write(b"," + json.dumps(k).encode() + b":" + json.dumps(v, separators=(",", ":")).encode())
        f.write(b"}\n")
    tmp.replace(out)
    return {
        "trace": info.name,
        "path": str(out),
        "events": writer.events,
        "metadata_events": len(meta_events),
        "bytes": out.stat().st_size,
    }
