"""`tracehouse repair`: the catalog rebuilt from what the store's files hold; nothing deleted.

Owns the rebuild. Under the store's writer lock (no writer may run beside it):

1. The old catalog (`catalog.sqlite` and its -wal/-shm) is read for what no other file holds
   (analysis results and their links, formats' descriptions, incomplete marks, and a trace's
   rows when its journal is missing), when SQLite can still read it, then moved to quarantine/.
2. Each `traces/<id>/` is registered again under its id: name, format, description, metadata,
   event types and producers from its journal (`journal.py`; without one, from the old catalog,
   else from what its segments say of themselves and `<id>` as its name). Every segment file is
   checked (footer, page CRCs): a damaged one is moved to quarantine/; an intact one is
   registered from its own description (`segments.segment_meta`): live, or retired when an intact
   merged segment names it as an input; a checkpoint's segments are registered only when all its
   parts are there or its WAL file is gone (else its rows are replayed from that WAL file and the
   partial segments are the leftovers recovery removes). `wal_covered` is the highest WAL file a
   registered checkpoint covers: recovery then replays exactly the files above it.
3. The store is opened once as a writer: recovery replays the WAL and reports damaged records.

The report says per trace what was registered, what was set aside and why, and what could not be
known (producers of a trace without a journal). A trace that lost anything is marked incomplete
with the reason. Repair deletes nothing: what it cannot use goes to quarantine/<run>/ with
`report.jsonl`.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import lazy
from .._core import int_range
from ..errors import StoreLocked
from ..schema import Column, EventType
from . import journal
from . import wal as walmod
from .catalog import Catalog
from .quarantine import Quarantine
from .segments import read_segment_meta
from .verify import CATALOG, check_catalog, check_segment, file_crc, holds_traces

pa = lazy.module("pyarrow")
pq = lazy.module("pyarrow.parquet")


def repair(root: Path, progress: Callable[[str], None] | None = None) -> dict:
    """Rebuild the catalog of the store at `root` (module docstring); returns the report."""
    root = Path(root).absolute()
    say = progress or (lambda _m: None)
    lock = _lock(root)
    try:
        q = Quarantine(root)
        old = _read_old_catalog(root)
        report: dict[str, Any] = {"store": str(root), "old_catalog": old["doc"], "traces": [], "results": 0, "lost": []}
        for name in (CATALOG, CATALOG + "-wal", CATALOG + "-shm"):
            if (root / name).exists():
                q.move(
                    root / name,
                    f"the catalog before repair ({old['doc']['status']}"
                    + (f": {old['doc']['reason']})" if old["doc"]["reason"] else ")"),
                )
        (root / "traces").mkdir(exist_ok=True)
        cat = Catalog(root / CATALOG)
        try:
            for fmt, desc in old["formats"].items():
                cat.ensure_format(fmt, desc)
            names: set[str] = set()
            for d in holds_traces(root):
                tid = int(d.split("/")[1])
                say(f"trace directory {d}")
                if tid in old["deleting"]:
                    q.move(root / d, "a trace being deleted (tracehouse rm) when the store stopped")
                    report["traces"].append({"id": tid, "name": None, "action": "quarantined: being deleted"})
                    continue
                report["traces"].append(_restore(root, cat, q, tid, old, names))
            report["results"] = _restore_results(root, cat, q, old, {t["id"] for t in report["traces"]})
        finally:
            cat.close()
        report["quarantine"] = str(q.dir.relative_to(root)) if q.dir else None
        report["quarantined"] = q.entries
    finally:
        os.close(lock)
    say("recovering (WAL replay)")
    from .store import Store  # (store imports this module's siblings; Store itself only here)

    with Store(root) as s:
        s.become_writer()
        report["recovery"] = [r.to_json() for r in s.recovery]
    return report


def _lock(root: Path) -> int:
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / "writer.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise StoreLocked(
            f"store {root} is being written by another process (pid {holder}): stop it, then repair"
        ) from None
    return fd


def _read_old_catalog(root: Path) -> dict:
    """What the old catalog holds that files do not, as far as SQLite can read it."""
    doc, cat = check_catalog(root)
    old: dict[str, Any] = {
        "doc": doc,
        "formats": {},
        "traces": {},
        "types": {},
        "producers": {},
        "results": [],
        "result_traces": {},
        "deleting": set(),
    }
    if cat is None:
        return old
    try:
        old["formats"] = dict(cat.db.execute("SELECT name, description FROM formats").fetchall())
        old["deleting"] = set(cat.deleting())
        for info in cat.traces():
            old["traces"][info.id] = info
            old["types"][info.id] = cat.trace_types(info)
            old["producers"][info.id] = cat.producers(info.id)
        old["results"] = cat.results()
        for rid, tid in cat.db.execute("SELECT result_id, trace_id FROM result_traces").fetchall():
            old["result_traces"].setdefault(rid, []).append(tid)
    except Exception as e:  # noqa: BLE001 - whatever it could read is used; the rest comes from the files
        doc["reason"] = (doc["reason"] + "; " if doc["reason"] else "") + f"partly unreadable: {e}"
    finally:
        cat.close()
    return old


def _restore(root: Path, cat: Catalog, q: Quarantine, tid: int, old: dict, names: set[str]) -> dict:
    """Register trace directory `tid` again; returns what was done."""
    j = journal.read(journal.journal_path(root, tid))
    lost: list[str] = []
    out: dict[str, Any] = {"id": tid, "segments": 0, "retired": 0, "quarantined": [], "rows": 0}
    if j.damaged:
        lost.append(f"{len(j.damaged)} damaged journal line(s)")
    segs, metas = _segments(root, q, tid, out)
    info = old["traces"].get(tid)
    first_meta = next(iter(metas.values()), None)
    if j.trace is not None:
        name, fmt, desc, created, own = (
            j.trace["name"],
            j.trace["format"],
            j.trace["description"],
            j.trace["created"],
            j.trace["own_types"],
        )
        metadata = dict(j.metadata)
    elif info is not None:
        name, fmt, desc, created, own = info.name, info.format, info.description, info.created, info.own_types
        metadata = dict(info.metadata)
    else:
        name = first_meta["trace"] if first_meta else f"recovered_{tid}"
        fmt = first_meta["format"] if first_meta else "recovered"
        desc, created, own, metadata = f"recovered by tracehouse repair (trace directory {tid})", time.time(), True, {}
        lost.append("its journal (name, description, metadata and producers were taken from its segments)")
    if name in names or name.lower() in {n.lower() for n in names}:
        lost.append(f"its name {name!r}, taken by another trace directory (renamed)")
        name = f"{name}.{tid}"
    names.add(name)
    out["name"] = name
    # Event types: the journal's, widened by what the segments and the WAL say.
    types: dict[str, EventType] = {}
    for tj in j.types.values():
        _merge_type(types, EventType.from_json(tj))
    for et in (old["types"].get(tid) or {}).values() if j.trace is None else ():
        _merge_type(types, et)
    for m in metas.values():
        if m.get("event_type"):
            _merge_type(types, EventType.from_json(m["event_type"]))
    for s in segs["live"] + segs["retired"]:
        if s["event_type"] not in types:
            _merge_type(types, _inferred(s["event_type"], s["columns"]))
    wal_types = _wal_types(root, tid, segs["covered"])
    for n, schema in wal_types.items():
        if n not in types:
            _merge_type(types, _inferred(n, schema.names, schema))
    for n, et in list(types.items()):
        if et.kind == "instant" and any(n == s["event_type"] and "dur" in s["columns"] for s in segs["live"]):
            types[n] = EventType(n, "span", et.params, et.doc, et.key)
    mark = old["traces"][tid].state_reason if tid in old["traces"] else None
    if out["quarantined"]:
        lost.append(f"{len(out['quarantined'])} damaged segment(s) moved to quarantine/")
    if j.trace is None and info is None:
        lost.append("its producers (ids kept in the events; no names or attributes)")
    if lost:
        why = f"repaired {time.strftime('%Y-%m-%d %H:%M:%S')}: lost " + "; ".join(lost)
        mark = why if not mark else f"{why}; {mark}"
    cat.restore_trace(
        tid,
        name,
        fmt,
        desc,
        created,
        metadata,
        own_types=own,
        incomplete=mark,
        segments=segs["live"],
        retired=segs["retired"],
        wal_covered=segs["covered"],
    )
    restored = cat.trace(name)
    for et in types.values():
        try:
            cat.put_event_type(fmt, et, restored)
        except Exception as e:  # noqa: BLE001 - a format's type typed otherwise by another trace: said, not fatal
            lost.append(f"event type {et.name}: {e}")
    producers = list(j.producers.values()) if j.trace is not None else old["producers"].get(tid, [])
    if producers:
        cat.put_producers(tid, producers)
    if j.trace is None:  # the journal is written again from what was restored
        journal.snapshot(root, restored, types.values(), producers, old["formats"].get(fmt, ""))
    out |= {
        "action": "registered",
        "format": fmt,
        "types": sorted(types),
        "producers": len(producers),
        "wal_covered": segs["covered"],
        "lost": lost,
    }
    out["rows"] = sum(s["rows"] for s in segs["live"])
    return out


def _segments(root: Path, q: Quarantine, tid: int, out: dict) -> tuple[dict, dict]:
    """The trace's segment files sorted into live, retired (merged into an intact one) and set
    aside; and each intact file's description by path."""
    seg_root = root / "traces" / str(tid) / "segments"
    wal_dir = root / "traces" / str(tid) / "wal"
    intact: dict[str, dict] = {}
    metas: dict[str, dict] = {}
    for f in sorted(seg_root.rglob("*.parquet")) if seg_root.is_dir() else []:
        rel = f.relative_to(root).as_posix()
        doc = check_segment(root, rel)
        if doc["status"] != "intact":
            q.move(f, f"damaged segment: {doc['reason']}")
            out["quarantined"].append({"path": rel, "reason": doc["reason"]})
            continue
        md = pq.read_metadata(f)
        meta = read_segment_meta(f) or {}
        ts = int_range(pq.read_table(f, columns=["ts"])) if "ts" in md.schema.names else None
        metas[rel] = meta
        intact[rel] = {
            "event_type": (meta.get("event_type") or {}).get("name") or f.parent.name,
            "path": rel,
            "rows": md.num_rows,
            "bytes": f.stat().st_size,
            "ts_min": ts[0] if ts else None,
            "ts_max": ts[1] if ts else None,
            "columns": md.schema.names,
            "level": meta.get("level", 0),
        }
    by_name = {Path(p).name: p for p in intact}
    superseded = {by_name[i] for m in metas.values() for i in (m.get("inputs") or []) if i in by_name}
    # A checkpoint whose parts are not all here, while its WAL file is: its rows come back from the
    # WAL, so none of its parts is registered (recovery removes them as leftovers).
    parts: dict[str, list[str]] = {}
    for p, m in metas.items():
        if m.get("checkpoint"):
            parts.setdefault(m["checkpoint"], []).append(p)
    partial = set()
    for _ck, ps in parts.items():
        m = metas[ps[0]]
        if len(ps) < (m.get("parts") or 0) and m.get("wal") is not None and walmod.wal_path(wal_dir, m["wal"]).exists():
            partial |= set(ps)
    live = [r for p, r in intact.items() if p not in superseded and p not in partial]
    retired = [r for p, r in intact.items() if p in superseded]
    covered = max([m["wal"] for p, m in metas.items() if m.get("wal") is not None and p not in partial], default=-1)
    out["segments"], out["retired"] = len(live), len(retired)
    return {"live": live, "retired": retired, "covered": covered}, {p: metas[p] for p in intact}


def _merge_type(types: dict[str, EventType], et: EventType) -> None:
    have = types.get(et.name)
    if have is None:
        types[et.name] = et
        return
    names = {p.name for p in have.params}
    extra = [p for p in et.params if p.name not in names]
    if extra:
        types[et.name] = have.with_params(extra)


def _inferred(name: str, columns, schema=None) -> EventType:
    """A type known only from its columns (a segment without a description, a WAL record)."""
    common = {"ts", "producer", "seq", "dur"}
    params = []
    for c in columns:
        if c in common:
            continue
        t = "string"
        if schema is not None:
            f = schema.field(c)
            t = (
                "int64"
                if pa.types.is_integer(f.type)
                else "float64"
                if pa.types.is_floating(f.type)
                else "bool"
                if pa.types.is_boolean(f.type)
                else "string"
            )
        params.append(Column(c, t, "", ""))
    return EventType(name, "span" if "dur" in columns else "instant", tuple(params))


def _wal_types(root: Path, tid: int, covered: int) -> dict[str, Any]:
    """The event types (name -> Arrow schema) the trace's uncovered WAL records hold."""
    d = root / "traces" / str(tid) / "wal"
    out: dict[str, Any] = {}
    for n in walmod.wal_numbers(d):
        if n > covered:
            for name, batch in walmod.read_wal(walmod.wal_path(d, n)).records:
                out.setdefault(name, batch.schema)
    return out


def _restore_results(root: Path, cat: Catalog, q: Quarantine, old: dict, traces: set[int]) -> int:
    """The old catalog's results whose files are still there and intact (or that have none),
    linked to the traces restored; a damaged file goes to quarantine/ (a derived index is built
    again on its next use). Returns how many were kept."""
    n = 0
    for r in old["results"]:
        if r["path"] and not (root / r["path"]).is_file():
            continue
        if r["path"] and r.get("checksum") is not None and file_crc(root / r["path"]) != r["checksum"]:
            q.move(
                root / r["path"],
                f"result {r['id']} ({r['name']}, {r['tool']}): its file fails the checksum it was saved with",
            )
            continue
        ids = [t for t in old["result_traces"].get(r["id"], []) if t in traces]
        cat.restore_result(r, ids)
        n += 1
    return n


def render(report: dict) -> list[str]:
    lines = [
        f"old catalog: {report['old_catalog']['status']}"
        + (f" ({report['old_catalog']['reason']})" if report["old_catalog"]["reason"] else "")
    ]
    for t in report["traces"]:
        if t.get("action") != "registered":
            lines.append(f"trace directory {t['id']}: {t['action']}")
            continue
        wal = "every WAL file replayed" if t["wal_covered"] < 0 else f"WAL files above {t['wal_covered']} replayed"
        lines.append(
            f"{t['name']} (id {t['id']}, {t['format']}): {t['segments']} segment(s), {t['rows']:,} rows "
            f"registered; {wal}"
        )
        for x in t["quarantined"]:
            lines.append(f"  quarantined {x['path']}: {x['reason']}")
        for x in t["lost"]:
            lines.append(f"  lost: {x}")
    for r in report.get("recovery") or []:
        for x in r["torn"]:
            lines.append(f"  {r['trace']}: WAL {x['file']}: {x['reason']} ({x['bytes_cut']:,} bytes cut)")
    lines.append(f"{report['results']} analysis result(s) kept")
    if report["quarantine"]:
        lines.append(
            f"set aside in {report['quarantine']}/ (report.jsonl says why): {len(report['quarantined'])} file(s)"
        )
    return lines
