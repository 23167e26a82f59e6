"""`tracehouse verify`: the store checked against itself, and the survey a writer takes first.

Owns what "files and catalog agree" means and the full check:

- `survey` (cheap: directory listings and a stat per segment; what `Store.become_writer` runs
  before it changes anything): trace directories the catalog does not know, registered segment
  files that are missing or not of their registered size, and segment files the catalog does not name, each judged by
  `orphan_verdict`: *redundant* (a checkpoint's leftover whose rows are still in the WAL, or a
  merge's output whose inputs are all live: removed by recovery), *unlogged* (written without a
  WAL, fsync off, and never registered: moved to quarantine/ by recovery) or *lost* (its rows
  are nowhere else: the catalog lost it). Unknown directories, missing or resized files and lost
  segments make the store refuse writes (`StoreDamaged` naming the catalog and them) until `repair`.
- `verify` (reads every byte): the catalog (SQLite's `quick_check`), the survey, every segment's
  footer (rows, columns and time range against the catalog) and page checksums
  (`segments.check_pages`), every WAL record's CRC (`wal.read_wal`), each trace's journal, and
  the analysis results' files against their checksums and the segments they were built from.
  The report says per trace what is intact, damaged or missing; `ok` is false when anything is
  damaged, missing or disagrees (exit code 1); a crash's leftovers (redundant or unlogged segment
  files, which the next writer removes or sets aside) are listed without making it false.

Read-only: verify changes nothing and takes no lock; it runs beside a live writer (a WAL record
being written reads as the log's end, segments are immutable).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import lazy
from .._core import crc32
from . import journal
from . import wal as walmod
from .catalog import Catalog
from .quarantine import DIR as QUARANTINE_DIR
from .quarantine import listing as quarantine_listing
from .segments import check_pages, read_segment_meta

pa = lazy.module("pyarrow")
pq = lazy.module("pyarrow.parquet")

CATALOG = "catalog.sqlite"


@dataclass
class Survey:
    """What the cheap look at a store's files found (see the module docstring)."""

    unknown_dirs: list[str] = field(default_factory=list)  # traces/<id>/ the catalog does not know
    missing: list[str] = field(default_factory=list)  # registered live segment files not there
    resized: list[str] = field(default_factory=list)  # registered live segment files of another size: "path (why)"
    orphans: list[tuple[str, str, str]] = field(default_factory=list)  # (path, verdict, why)
    partial: list[str] = field(default_factory=list)  # .tmp files of writes that never finished

    def disagreements(self) -> list[str]:
        """What makes the store refuse writes, one phrase each."""
        return (
            [f"{d}/ (a trace directory the catalog does not know)" for d in self.unknown_dirs]
            + [f"{p} (registered, missing)" for p in self.missing]
            + self.resized
            + [f"{p} ({why})" for p, verdict, why in self.orphans if verdict == "lost"]
        )


def holds_traces(root: Path) -> list[str]:
    """The trace directories under `root`/traces (relative paths), sorted by id."""
    d = Path(root) / "traces"
    if not d.is_dir():
        return []
    return [
        f"traces/{p.name}"
        for p in sorted(d.iterdir(), key=lambda p: (len(p.name), p.name))
        if p.is_dir() and p.name.isdigit()
    ]


def survey(root: Path, catalog: Catalog) -> Survey:
    """Catalog against files (module docstring): a directory listing per trace, a stat per
    segment, and the footer of each segment file the catalog does not name."""
    root = Path(root)
    out = Survey()
    ids = catalog.trace_ids()
    live = {t.id: t for t in catalog.traces()}
    out.unknown_dirs = [d for d in holds_traces(root) if int(d.split("/")[1]) not in ids]
    known = catalog.known_paths()
    segs_by_trace: dict[int, dict[str, Any]] = {}
    for s in catalog.all_live_segments():
        segs_by_trace.setdefault(s.trace_id, {})[s.path] = s
        try:
            size = (root / s.path).stat().st_size
        except FileNotFoundError:
            out.missing.append(s.path)
            continue
        if size != s.bytes:
            out.resized.append(f"{s.path} ({size:,} bytes, registered with {s.bytes:,})")
    for tid, info in live.items():
        seg_root = root / "traces" / str(tid) / "segments"
        if not seg_root.is_dir():
            continue
        for f in sorted(seg_root.rglob("*")):
            if not f.is_file():
                continue
            rel = f.relative_to(root).as_posix()
            if f.name.endswith(".tmp"):
                out.partial.append(rel)
            elif rel not in known:
                verdict, why = orphan_verdict(root, info, segs_by_trace.get(tid, {}), f)
                out.orphans.append((rel, verdict, why))
    return out


def orphan_verdict(root: Path, info: Any, live: dict[str, Any], path: Path) -> tuple[str, str]:
    """("redundant" | "unlogged" | "lost", why) for a segment file of trace `info` the catalog does
    not name; `live` its registered live segments by path."""
    try:
        meta = read_segment_meta(path)
    except Exception as e:  # noqa: BLE001 - an unreadable footer: written whole and renamed, so damaged
        return "unlogged", f"a segment the catalog does not name, unreadable ({e})"
    if meta is None:
        return "unlogged", "a segment the catalog does not name, which does not say where its rows came from"
    if meta.get("level", 0) == 0:
        n = meta.get("wal")
        if n is None:
            return "unlogged", "a checkpoint's segment written without a WAL (fsync off), never registered"
        if n > info.wal_covered and walmod.wal_path(root / "traces" / str(info.id) / "wal", n).exists():
            return "redundant", f"a checkpoint's leftover: its rows are still in WAL file {n}"
        return "lost", f"a checkpoint's segment of WAL file {n}, which is gone: the catalog lost its registration"
    inputs = meta.get("inputs") or []
    names = {Path(p).name: p for p in live}
    if inputs and all(i in names and (root / names[i]).is_file() for i in inputs):
        return "redundant", "a merge's leftover: the segments it merged are live"
    return "lost", "a merged segment whose inputs are gone: the catalog lost its registration"


# -- the full check ----------------------------------------------------------------------------


def check_segment(root: Path, path: str, expect: Any = None) -> dict:
    """One segment file: footer readable, rows/columns/time range as the catalog says (`expect`, a
    SegmentInfo, when known), every page against its CRC. {"path", "status": "intact" | "damaged"
    | "missing", "reason", "pages", "with_crc", "bytes", "rows"}."""
    f = Path(root) / path
    out: dict[str, Any] = {"path": path, "status": "intact", "reason": None}
    if not f.is_file():
        return out | {"status": "missing", "reason": "no such file"}
    try:
        md = pq.read_metadata(f)
        pages = check_pages(f, md)
    except Exception as e:  # noqa: BLE001 - whatever pyarrow says of the bytes is the finding
        return out | {"status": "damaged", "reason": f"unreadable footer: {e}"}
    out |= {"pages": pages["pages"], "with_crc": pages["with_crc"], "bytes": pages["bytes"], "rows": md.num_rows}
    problems = []
    if pages["bad"]:
        problems.append(pages["bad"])
    if expect is not None:
        if md.num_rows != expect.rows:
            problems.append(f"{md.num_rows:,} rows in its footer, the catalog says {expect.rows:,}")
        if f.stat().st_size != expect.bytes:
            problems.append(f"{f.stat().st_size:,} bytes, the catalog says {expect.bytes:,}")
        names = [md.schema.column(i).name for i in range(md.num_columns)]
        if names != list(expect.columns):
            problems.append(f"columns {names}, the catalog says {list(expect.columns)}")
        ts = _ts_range(md)
        if ts is not None and expect.ts_min is not None and ts != (expect.ts_min, expect.ts_max):
            problems.append(f"ts {ts[0]}..{ts[1]} in its statistics, the catalog says {expect.ts_min}..{expect.ts_max}")
    if problems:
        out |= {"status": "damaged", "reason": "; ".join(problems)}
    elif pages["pages"] and pages["with_crc"] < pages["pages"]:
        out["reason"] = f"{pages['pages'] - pages['with_crc']} of {pages['pages']} pages carry no checksum (unchecked)"
    return out


def _ts_range(md) -> tuple[int, int] | None:
    names = [md.schema.column(i).name for i in range(md.num_columns)]
    if "ts" not in names:
        return None
    i = names.index("ts")
    lo = hi = None
    for g in range(md.num_row_groups):
        st = md.row_group(g).column(i).statistics
        if st is None or not st.has_min_max:
            return None
        lo = st.min if lo is None else min(lo, st.min)
        hi = st.max if hi is None else max(hi, st.max)
    return None if lo is None else (lo, hi)


def check_catalog(root: Path) -> tuple[dict, Catalog | None]:
    """({"path", "status", "reason"}, the catalog open read-only, or None when it cannot be read)."""
    path = Path(root) / CATALOG
    doc = {"path": str(path), "status": "intact", "reason": None}
    if not path.exists():
        return doc | {"status": "missing", "reason": "no such file"}, None
    try:
        cat = Catalog(path, readonly=True)
        bad = [r[0] for r in cat.db.execute("PRAGMA quick_check").fetchall() if r[0] != "ok"]
        if bad:
            cat.close()
            return doc | {"status": "damaged", "reason": "; ".join(bad[:5])}, None
        return doc, cat
    except Exception as e:  # noqa: BLE001 - StoreDamaged or sqlite's word for it: the finding
        return doc | {"status": "damaged", "reason": str(e).split(": `tracehouse")[0]}, None


def check_wal(root: Path, trace_id: int, covered: int) -> dict:
    """The WAL files of a trace no checkpoint covers: every record's CRC."""
    d = Path(root) / "traces" / str(trace_id) / "wal"
    out: dict[str, Any] = {"files": 0, "records": 0, "rows": 0, "damaged": []}
    for n in walmod.wal_numbers(d):
        if n <= covered:
            continue
        scan = walmod.read_wal(walmod.wal_path(d, n))
        out["files"] += 1
        out["records"] += len(scan.records)
        out["rows"] += sum(b.num_rows for _, b in scan.records)
        for x in scan.losses():
            out["damaged"].append({"file": walmod.wal_path(d, n).relative_to(root).as_posix()} | x)
    return out


def check_results(root: Path, cat: Catalog, live_ids: set[int]) -> list[dict]:
    """Each analysis result's file against the checksum it was saved with, and an index's part
    against the segments it was built from (one naming a segment that is gone is stale: it is
    rebuilt on its next use, not damaged)."""
    out = []
    for r in cat.results():
        if not r["path"]:
            continue
        doc = {
            "id": r["id"],
            "name": r["name"],
            "tool": r["tool"],
            "path": r["path"],
            "status": "intact",
            "reason": None,
        }
        f = Path(root) / r["path"]
        if not f.is_file():
            out.append(doc | {"status": "missing", "reason": "no such file"})
            continue
        if r.get("checksum") is not None:
            got = file_crc(f)
            if got != r["checksum"]:
                out.append(doc | {"status": "damaged", "reason": f"CRC-32 {got:08x}, saved with {r['checksum']:08x}"})
                continue
        elif f.suffix == ".parquet":
            try:
                bad = check_pages(f)["bad"]
            except Exception as e:  # noqa: BLE001
                bad = f"unreadable footer: {e}"
            if bad:
                out.append(doc | {"status": "damaged", "reason": bad})
                continue
        segs = r["params"].get("segments") if isinstance(r["params"], dict) else None
        if segs and not set(segs) <= live_ids:
            doc["reason"] = (
                f"stale: built from segment(s) {sorted(set(segs) - live_ids)} no longer live (rebuilt on use)"
            )
        out.append(doc)
    return out


def file_crc(path: Path) -> int:
    """CRC-32 of a whole file (what a result's `checksum` is)."""
    value = 0
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(8 << 20):
            value = crc32(chunk, value)
    return value


def verify(root: Path, progress=None) -> dict:
    """The full check (module docstring) of the store at `root`; `progress(n)` is called with the
    bytes of each file checked."""
    root = Path(root).absolute()
    report: dict[str, Any] = {"store": str(root), "ok": True}
    cat_doc, cat = check_catalog(root)
    report["catalog"] = cat_doc
    dirs = holds_traces(root)
    if cat is None:
        report["traces"] = [_trace_from_files(root, int(d.split("/")[1]), progress) for d in dirs]
        report["unknown_dirs"] = dirs if cat_doc["status"] == "missing" else []
        report["orphans"], report["results"] = [], []
    else:
        try:
            report |= _verify_with_catalog(root, cat, progress)
        finally:
            cat.close()
    report["quarantine"] = quarantine_listing(root)
    # (a crash's leftovers, redundant or never acknowledged, are listed: the next writer clears them)
    lost = [o for o in report["orphans"] if o["verdict"] == "lost"]
    bad = (
        cat_doc["status"] != "intact"
        or report["unknown_dirs"]
        or lost
        or any(t["status"] != "intact" for t in report["traces"])
        or any(r["status"] != "intact" for r in report["results"])
    )
    report["ok"] = not bad
    return report


def _verify_with_catalog(root: Path, cat: Catalog, progress) -> dict:
    sv = survey(root, cat)
    traces = []
    seg_ids = set()
    for info in cat.traces():
        segs = cat.segments(info.id)
        seg_ids |= {s.id for s in segs}
        t: dict[str, Any] = {
            "id": info.id,
            "name": info.name,
            "format": info.format,
            "status": "intact",
            "state_reason": info.state_reason,
            "segments": [],
            "types": {},
        }
        for s in segs:
            doc = check_segment(root, s.path, s)
            if s.damaged and doc["status"] == "intact":
                doc |= {"status": "damaged", "reason": f"marked damaged: {s.damaged}"}
            doc["event_type"] = s.event_type
            t["segments"].append(doc)
            if progress is not None:
                progress(doc.get("bytes") or 0)
        t["wal"] = check_wal(root, info.id, info.wal_covered)
        t["journal"] = _journal_doc(root, info.id, info.name)
        _trace_status(t)
        traces.append(t)
    orphans = [{"path": p, "verdict": v, "reason": why} for p, v, why in sv.orphans]
    return {
        "traces": traces,
        "unknown_dirs": sv.unknown_dirs,
        "orphans": orphans,
        "results": check_results(root, cat, seg_ids),
    }


def _journal_doc(root: Path, tid: int, name: str | None) -> dict:
    j = journal.read(journal.journal_path(root, tid))
    doc = {"path": j.path.relative_to(root).as_posix(), "status": "intact", "entries": j.entries, "reason": None}
    if not j.path.exists():
        return doc | {"status": "missing", "reason": "no journal (written again when the trace's writer opens)"}
    if j.damaged:
        return doc | {
            "status": "damaged",
            "reason": f"{len(j.damaged)} damaged line(s), first: line "
            f"{j.damaged[0]['line']} ({j.damaged[0]['reason']})",
        }
    if j.trace is None or (name is not None and j.trace.get("name") != name):
        return doc | {"status": "damaged", "reason": "its trace entry is missing or names another trace"}
    return doc


def _trace_status(t: dict) -> None:
    """A trace's verdict from its parts: damaged if anything of it is damaged, missing if files are."""
    states = {s["status"] for s in t["segments"]}
    per_type: dict[str, dict] = {}
    for s in t["segments"]:
        d = per_type.setdefault(s["event_type"], {"segments": 0, "rows": 0, "status": "intact"})
        d["segments"] += 1
        d["rows"] += s.get("rows") or 0
        if s["status"] != "intact":
            d["status"] = s["status"]
    t["types"] = per_type
    if "damaged" in states or t["wal"]["damaged"] or t["journal"]["status"] == "damaged":
        t["status"] = "damaged"
    elif "missing" in states:
        t["status"] = "missing"


def _trace_from_files(root: Path, tid: int, progress) -> dict:
    """A trace directory checked without a catalog: what its journal, segments and WAL say."""
    j = journal.read(journal.journal_path(root, tid))
    name = j.trace["name"] if j.trace else None
    t: dict[str, Any] = {
        "id": tid,
        "name": name,
        "format": j.trace["format"] if j.trace else None,
        "status": "intact",
        "state_reason": None,
        "segments": [],
    }
    seg_root = root / "traces" / str(tid) / "segments"
    for f in sorted(seg_root.rglob("*.parquet")) if seg_root.is_dir() else []:
        doc = check_segment(root, f.relative_to(root).as_posix())
        doc["event_type"] = f.parent.name
        t["segments"].append(doc)
        if progress is not None:
            progress(doc.get("bytes") or 0)
    t["wal"] = check_wal(root, tid, -1)
    t["journal"] = _journal_doc(root, tid, name)
    _trace_status(t)
    return t


def render(report: dict) -> list[str]:
    """The report as lines of text (the CLI prints them)."""
    lines = []
    c = report["catalog"]
    lines.append(f"catalog {c['path']}: {c['status']}" + (f" ({c['reason']})" if c["reason"] else ""))
    for t in report["traces"]:
        segs = t["segments"]
        n_ok = sum(s["status"] == "intact" for s in segs)
        rows = sum(s.get("rows") or 0 for s in segs if s["status"] == "intact")
        label = t["name"] if t["name"] is not None else f"(trace directory {t['id']}, name unknown)"
        lines.append(
            f"{label}: {t['status']} - {n_ok}/{len(segs)} segments intact ({rows:,} rows), "
            f"WAL {t['wal']['records']} records ({t['wal']['rows']:,} rows) in {t['wal']['files']} file(s), "
            f"journal {t['journal']['status']}"
        )
        for s in segs:
            if s["status"] != "intact" or s.get("reason"):
                lines.append(f"  {s['status']}: {s['path']}: {s['reason']}")
        for w in t["wal"]["damaged"]:
            rows_cut = "rows uncounted" if w["rows"] is None else f"{w['rows']:,} rows"
            lines.append(f"  damaged: {w['file']}: {w['reason']} ({w['bytes']:,} bytes, {rows_cut})")
        if t["journal"]["status"] != "intact":
            lines.append(f"  {t['journal']['status']}: {t['journal']['path']}: {t['journal']['reason']}")
        if t.get("state_reason"):
            lines.append(f"  incomplete: {t['state_reason']}")
    for d in report["unknown_dirs"]:
        lines.append(f"not in the catalog: {d}/")
    for o in report["orphans"]:
        lines.append(f"not in the catalog: {o['path']} ({o['verdict']}: {o['reason']})")
    for r in report["results"]:
        if r["status"] != "intact" or r["reason"]:
            lines.append(f"result {r['id']} ({r['name']}): {r['status']}: {r['path']}: {r['reason']}")
    if report["quarantine"]:
        lines.append(
            f"quarantine/: {len(report['quarantine'])} file(s) set aside (see {QUARANTINE_DIR}/*/report.jsonl)"
        )
    lines.append(
        "ok: everything intact"
        if report["ok"]
        else "NOT OK: `tracehouse repair` rebuilds the catalog from the files and moves what is damaged to quarantine/"
    )
    return lines
