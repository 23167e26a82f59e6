"""`tracehouse replay`: replay a strace trace's IO on a target directory, record every call.

Owns the driver around the Rust engine (`_core.ReplayPlan` / `_core.ReplayRun`,
src/replay/): reading the source trace's `syscall` table in `ts` order, building
the plan (per-thread operations, fd slots, cross-thread ordering, the files the
trace implies), preparing the root of each copy, running with device and CPU
sampling and a progress bar, and storing the outcome as a new trace of format
`replay` linked to its source as a processed trace (`th.results`, tool
`tracehouse.replay`) with the run's summary as the result's parameters. The summary
(throughput, latency and issue-time error percentiles, run length against the
trace's, device and CPU utilisation) is what `tracehouse extrapolate` reads.

Independent of how the trace was made: any trace with the strace `syscall` table
(`tracehouse capture`, `tracehouse import strace`) replays.

Safety: the root (resolved: a symlink to / is /, refused) must be empty, missing, or
a root an earlier replay made (it holds `.tracehouse-replay`): preparing resizes and
removes files in it. Every path is opened beneath it by the kernel's RESOLVE_BENEATH,
and a file in it with a second name (a hard link, perhaps to a file outside) is copied
before anything writes it (src/replay/fsroot.rs).

A full target (ENOSPC, EDQUOT, EFBIG) aborts the run at its first such call: the run is
stored, marked invalid (`valid: false` and why, in the summary) for inspection, the
command fails, and `tracehouse extrapolate` never fits it. Calls that differ from the
trace (`divergent`): a call that failed on the target but not in the trace or the
reverse, and a write that moved fewer bytes than the traced one.
"""

from __future__ import annotations

import errno as errnomod
import os
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import _core
from ..errors import BadInput, DiskFull, NotFound
from ..schema import Column, EventType
from . import machine

if TYPE_CHECKING:
    from ..store import Store

FORMAT = "replay"
TOOL = "tracehouse.replay"
MARKER = ".tracehouse-replay"
TIMINGS = ("original", "think", "asap")

# Columns of the source trace the planner reads, with the types it expects.
SOURCE_SCHEMA = pa.schema(
    [
        ("ts", pa.int64()),
        ("dur", pa.int64()),
        ("producer", pa.int32()),
        ("seq", pa.int64()),
        ("name", pa.string()),
        ("fd", pa.int64()),
        ("path", pa.string()),
        ("path2", pa.string()),
        ("pos", pa.int64()),
        ("size", pa.int64()),
        ("ret", pa.int64()),
        ("errno", pa.string()),
        ("flags", pa.string()),
        ("fd2", pa.int64()),
        ("pos2", pa.int64()),
        ("args", pa.string()),
        ("target", pa.string()),
    ]
)
# Syscalls whose printed arguments the planner reads (stat sizes and types, unlinkat flags,
# mkdir modes, whether a copy's offsets were explicit); others' args are not fetched.
ARGS_NEEDED = (
    "fstat",
    "newfstatat",
    "stat",
    "lstat",
    "statx",
    "fstat64",
    "stat64",
    "lstat64",
    "fstatat64",
    "unlinkat",
    "mkdir",
    "mkdirat",
    "copy_file_range",
    "sendfile",
    "sendfile64",
    "splice",
)
# Syscalls whose path argument as passed is the planner's (a symlink's target).
TARGET_NEEDED = ("symlink", "symlinkat")
READS = ("read", "pread", "readv", "preadv", "getdents")
WRITES = ("write", "pwrite", "writev", "pwritev")
COPIES = ("copy_file_range", "sendfile")
CLASSES = {
    "read": READS,
    "write": WRITES,
    "copy": COPIES,
    "sync": ("fsync", "fdatasync"),
    "open/close": ("open", "close", "dup"),
    "tree": ("unlink", "rename", "mkdir", "link", "symlink"),
    "other": ("lseek", "ftruncate", "truncate", "fallocate"),
}
# A call that moved fewer bytes than the traced one differs from the trace.
SHORT_COUNTS = WRITES + COPIES

EVENT_TYPES = (
    EventType(
        "op",
        "span",
        (
            Column("name", "string", "", "the traced syscall (pread64, openat, ...)"),
            Column(
                "kind",
                "string",
                "",
                "what was replayed: " + ", ".join(_core.REPLAY_KINDS) + " (a splice, or a "
                "copy with one side not replayed, is the read or write it is on the file's side)",
            ),
            Column("copy", "int64", "", "which copy of the trace (0..K-1 with --copies K)"),
            Column("path", "string", "path", "the file on the target, relative to --root"),
            Column("pos", "int64", "B", "offset of positional calls (pread/pwrite/lseek), as traced"),
            Column("size", "int64", "B", "bytes asked (read/write) or length (ftruncate), as traced"),
            Column("ret", "int64", "", "return value on the target (bytes, fd, offset; -1 on error)"),
            Column("errno", "string", "", "error on the target (ENOENT, EXDEV: refused, it would leave --root)"),
            Column("planned", "int64", "ns", "when the schedule said to issue it (epoch ns; null with --timing asap)"),
            Column("lag", "int64", "ns", "issue-time error: actual issue minus planned (null with --timing asap)"),
            Column("wait", "int64", "ns", "time spent waiting for other threads' calls it is ordered after"),
            Column(
                "on_time",
                "bool",
                "",
                "the thread was ready before the planned time (its previous call done, the "
                "calls it waits for done): lag is then the timer's error alone, not the replay running behind",
            ),
            Column("source_ts", "int64", "ns", "start of the traced call"),
            Column("source_dur", "int64", "ns", "duration of the traced call"),
            Column("source_ret", "int64", "", "return value in the trace"),
            Column("source_errno", "string", "", "error in the trace"),
            Column("source_producer", "int64", "id", "thread producer of the traced call in the source trace"),
            Column("source_seq", "int64", "", "seq of the traced call in the source trace"),
        ),
        "one replayed call: ts is its issue time on the target, dur its latency",
    ),
    EventType(
        "skip",
        "instant",
        (
            Column("name", "string", "", "the traced syscall not replayed"),
            Column("reason", "string", "", "why: " + ", ".join(_core.REPLAY_SKIP_REASONS)),
            Column("path", "string", "path", "its path in the trace"),
            Column("source_ts", "int64", "ns", "its start in the trace"),
            Column("source_producer", "int64", "id", "thread producer in the source trace"),
            Column("source_seq", "int64", "", "seq in the source trace"),
        ),
        "a traced call the replay skipped; ts is when the replay passed it (with original timing, its planned "
        "time; otherwise the issue time of the last replayed call that preceded it in the trace)",
    ),
    EventType(
        "sample",
        "counter",
        (
            Column(
                "device_util",
                "float64",
                "fraction",
                "share of the interval the root's block device was busy "
                "(/proc/diskstats io_ticks, iostat %util; the whole device, neighbours included)",
            ),
            Column("device_reads_s", "float64", "1/s", "read requests completed per second"),
            Column("device_writes_s", "float64", "1/s", "write requests completed per second"),
            Column("device_read_mb_s", "float64", "MB/s", "MB read from the device per second"),
            Column("device_write_mb_s", "float64", "MB/s", "MB written to the device per second"),
            Column("cpu_util", "float64", "fraction", "busy share of all cores (/proc/stat; neighbours included)"),
            Column("cpu_iowait", "float64", "fraction", "iowait share of all cores"),
            Column("replay_cpu_cores", "float64", "cores", "CPU the replayer itself used (getrusage), in cores"),
            Column("ops_done", "int64", "", "replayed calls completed so far"),
        ),
        "machine counters sampled during the run, every 100 ms by default",
    ),
)


@dataclass
class ReplayReport:
    """The outcome: the derived trace, its result id and the summary."""

    source: str
    trace: str
    result_id: int
    summary: dict
    prepared: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "source": self.source,
            "trace": self.trace,
            "result_id": self.result_id,
            "summary": self.summary,
            "prepared": self.prepared,
        }


def parse_timing(text: str) -> tuple[str, float]:
    """`original`, `scale:X` (X times as fast), `asap`, `think` or `think:X` -> (mode, speed)."""
    mode, _, factor = text.partition(":")
    if mode == "scale" and factor:
        mode = "original"
    elif not (mode in ("original", "asap") and not factor) and mode != "think":
        raise BadInput(f"--timing {text!r}", expected="original | scale:X | asap | think | think:X")
    speed = 1.0
    if factor:
        try:
            speed = float(factor)
        except ValueError:
            speed = -1.0
        if not (speed > 0 and np.isfinite(speed)):
            raise BadInput(f"--timing {text!r}: {factor!r} is not a positive number", expected="e.g. scale:2")
    return mode, speed


def parse_maps(maps: Iterable[str]) -> list[tuple[str, str]]:
    out = []
    for m in maps:
        old, sep, new = m.partition("=")
        if not sep or not old or not new:
            raise BadInput(f"--map {m!r}", expected="OLD=NEW, e.g. --map /var/lib/mysql=db")
        out.append((old, new))
    return out


def resolve_root(root: str | os.PathLike) -> Path:
    """The root as the kernel will reach it (symlinks resolved); refused when that is /,
    whatever named it and with --force too."""
    given = Path(root)
    real = Path(os.path.realpath(given))
    if real == Path("/"):
        via = "" if os.path.abspath(given) == "/" else f" ({given} resolves to /)"
        raise BadInput(
            f"--root {given}: the whole filesystem cannot be a replay root{via}", expected="a directory of its own"
        )
    return real


def check_root(root: Path, force: bool = False) -> Path:
    """The root, resolved; refused when it is / or a non-empty directory no replay made (the
    marker must be a regular file, not a symlink planted there)."""
    root = resolve_root(root)
    if root.exists():
        if not root.is_dir():
            raise BadInput(f"--root {root}: not a directory")
        marker = root / MARKER
        made = marker.is_file() and not marker.is_symlink()
        if not force and not made and any(root.iterdir()):
            raise BadInput(
                f"--root {root}: not empty and not made by tracehouse replay (preparing resizes and "
                f"removes files in it)",
                expected="an empty or new directory, or --force",
            )
    else:
        root.mkdir(parents=True)
    (root / MARKER).touch()
    return root


def source_batches(store: Store, trace: str) -> pa.Table:
    """The source trace's syscalls in ts order, with the planner's columns."""
    info = store.trace(trace)
    types = store.event_types(trace)
    if "syscall" not in types or not {"fd", "path", "ret"} <= {c.name for c in types["syscall"].params}:
        raise BadInput(
            f"trace {trace!r} is format {info.format!r}: replay needs a strace trace",
            expected="a trace from tracehouse capture or tracehouse import strace",
        )
    names = ", ".join(f"'{n}'" for n in ARGS_NEEDED)
    have = {c.name for c in types["syscall"].params}
    cols = [
        c.name if c.name in have or c.name in ("ts", "dur", "producer", "seq") else f"NULL AS {c.name}"
        for c in SOURCE_SCHEMA
        if c.name not in ("args", "target")
    ]
    args = f"CASE WHEN name IN ({names}) THEN args END AS args" if "args" in have else "NULL AS args"
    tnames = ", ".join(f"'{n}'" for n in TARGET_NEEDED)
    target = f"CASE WHEN name IN ({tnames}) THEN path_arg END AS target" if "path_arg" in have else "NULL AS target"
    q = f'SELECT {", ".join(cols)}, {args}, {target} FROM "{trace}".syscall ORDER BY ts, producer, seq'
    return store.sql(q).cast(SOURCE_SCHEMA)


def build_plan(store: Store, trace: str, maps: list[tuple[str, str]] = (), only: Iterable[str] = ()):
    """(plan, source table): the plan of `trace` with the path mapping."""
    table = source_batches(store, trace)
    prods = store.producers(trace)
    kind = {p["id"]: p["kind"] for p in prods}
    process_of = {p["id"]: p["parent"] for p in prods if p["kind"] == "thread" and p["parent"] is not None}
    parent_of = {
        p["id"]: p["parent"]
        for p in prods
        if p["kind"] == "process" and p["parent"] is not None and kind.get(p["parent"]) == "process"
    }
    try:
        plan = _core.ReplayPlan(table.to_batches(), process_of, parent_of, list(maps), list(only))
    except ValueError as e:
        raise BadInput(str(e)) from None
    return plan, table


def default_name(store: Store, trace: str) -> str:
    have = {t.name for t in store.traces()}
    n = 1
    while f"{trace}:replay-{n}" in have:
        n += 1
    return f"{trace}:replay-{n}"


def _errno_names(codes: pa.Array) -> pa.Array:
    """int errno -> its name (null for 0), through a dictionary of the few distinct codes."""
    uniq = pc.unique(codes).to_pylist()
    names = [None if c == 0 else errnomod.errorcode.get(c, f"E{c}") for c in uniq]
    return pc.take(pa.array(names, pa.string()), pc.index_in(codes, pa.array(uniq, codes.type)))


def _quantiles(values: np.ndarray, qs=(0.5, 0.9, 0.99, 0.999)) -> dict:
    if values.size == 0:
        return {}
    out = {f"p{q * 100:g}": float(np.quantile(values, q)) for q in qs}
    out["max"] = float(values.max())
    out["mean"] = float(values.mean())
    return out


def _us(d: dict) -> dict:
    return {k: round(v / 1e3, 3) for k, v in d.items()}


def replay(
    store: Store,
    trace: str,
    root: str | os.PathLike,
    *,
    maps: Iterable[str] = (),
    only: Iterable[str] = (),
    timing: str = "original",
    copies: int = 1,
    name: str | None = None,
    cold: bool = False,
    force: bool = False,
    spin_us: float | None = None,
    realtime: bool = False,
    sample_s: float = 0.1,
    progress: Callable[[int], None] | None = None,
    peer_timing: str | None = None,
) -> ReplayReport:
    """Replay `trace` under `root` (see the module documentation); returns the report.

    timing: original | scale:X | think | think:X | asap. copies: K independent copies
    (`root/copy-<k>` each, one root for K=1). realtime: workers under SCHED_FIFO (needs
    CAP_SYS_NICE; the summary says whether it was granted). `peer_timing` ("relative") is
    for the benchmark only: the seed's ioreplay way, relative sleeps.
    """
    if copies < 1:
        raise BadInput(f"--copies {copies}", expected="at least 1")
    mode, speed = parse_timing(timing) if peer_timing is None else (peer_timing, 1.0)
    mapping = parse_maps(maps)
    resolve_root(root)  # / refused before anything else
    store.trace(trace)  # NotFound before touching the root
    name = name or default_name(store, trace)
    if any(t.name == name for t in store.traces()):
        raise BadInput(f"trace {name!r} exists", expected="a new --name")
    plan, source = build_plan(store, trace, mapping, only)
    stats = plan.stats()
    if stats["ops"] == 0:
        raise BadInput(
            f"trace {trace!r}: nothing to replay ({stats['rows']} syscalls, none on regular files)",
            expected="a trace with open/read/write/... calls on files",
        )
    root = check_root(Path(root), force)
    prepared = plan.prepare(str(root), copies, cold)
    errors = [e for p in prepared for e in p["errors"]]
    if any(p["full"] for p in prepared):
        first = next(e for p in prepared if p["full"] for e in p["errors"])
        raise DiskFull(
            f"--root {root}: the filesystem is full while preparing the trace's files "
            f"({first[0]}: {first[1]}; {stats['prepare']['bytes']:,} bytes to prepare per copy); "
            f"nothing was replayed"
        )
    device = machine.device_of(root)
    samples = [machine.sample(device)]
    done_at = [0]
    run = plan.start(
        str(root), copies, mode, speed, None if spin_us is None else int(spin_us * 1000), realtime=realtime
    )
    info = run.info()
    seen = 0
    try:
        while not run.wait(sample_s):
            samples.append(machine.sample(device))
            done = run.done_ops()
            done_at.append(done)
            if progress is not None:
                progress(done - seen)
            seen = done
    except KeyboardInterrupt:
        run.cancel()
        run.wait(60.0)
    samples.append(machine.sample(device))
    done_at.append(run.done_ops())
    if progress is not None:
        progress(done_at[-1] - seen)
    res = run.result()
    ops = _op_table(plan, source, res, copies)
    util = machine.between(samples[0], samples[-1])
    summary = _summarise(ops, stats, info, copies, mode, speed, util, device, res["cancelled"])
    summary["valid"] = res["aborted"] is None
    if res["aborted"] is not None:
        a = res["aborted"]
        row = source.slice(plan.op_columns()["src"][a["op"]].as_py(), 1).to_pylist()[0]
        summary["complete"] = False
        summary["invalid"] = (
            f"the target is full (no space, quota or file-size limit left): {row['name']} on "
            f"{row['path']} (copy {a['copy']}) "
            f"failed with {errnomod.errorcode.get(a['errno'], a['errno'])} ({a['message']}); "
            f"the run stopped there"
        )
    summary["realtime"] = {"asked": realtime, "granted": bool(res["realtime"])}
    summary["prepare"] = {
        "dirs": sum(p["dirs"] for p in prepared),
        "files": sum(p["files"] for p in prepared),
        "kept": sum(p["kept"] for p in prepared),
        "bytes_written": sum(p["bytes"] for p in prepared),
        "removed": sum(p["removed"] for p in prepared),
        "hard_links_copied": sum(p["unlinked"] for p in prepared),
        "errors": errors[:10],
        "error_count": len(errors),
        "cold": cold,
    }
    summary["skipped"] = stats["skipped_by_reason"]
    summary["source"] = trace
    summary["root"] = str(root)
    summary["maps"] = [f"{a}={b}" for a, b in mapping]
    summary["loadavg"] = list(os.getloadavg())
    skips = _skip_table(plan, source, ops, stats["t_start"], info["wall0"], mode, speed)
    _store(store, trace, name, source, plan, ops, skips, samples, done_at, summary, copies)
    rid = _save_result(store, trace, name, summary)
    return ReplayReport(trace, name, rid, summary, prepared)


def _op_table(plan, source: pa.Table, res: dict, copies: int) -> pa.Table:
    """The records as the `op` table (ts = issue, dur = latency), joined to the source rows."""
    opc = plan.op_columns()
    op = res["op"]
    src = pc.take(opc["src"], op)
    kinds = pa.array(list(_core.REPLAY_KINDS), pa.string())
    paths = pa.array(plan.paths() + [None], pa.string())
    path_id = pc.take(opc["path"], op)
    path_id = pc.if_else(pc.less(path_id, 0), len(paths) - 1, path_id)
    path = pc.take(paths, path_id)
    if copies > 1:
        prefix = pc.take(pa.array([f"copy-{k}/" for k in range(copies)]), res["copy"])
        path = pc.binary_join_element_wise(prefix, path, "")
    threads = plan.threads()
    src_prod = pc.take(pa.array(threads, pa.int64()), res["thread"])
    table = pa.table(
        {
            "ts": res["issue"],
            "dur": res["latency"],
            "src_thread": res["thread"],
            "name": pc.take(source.column("name"), src),
            "kind": pc.take(kinds, pc.take(opc["kind"], op)),
            "copy": pc.cast(res["copy"], pa.int64()),
            "path": path,
            "pos": pc.take(source.column("pos"), src),
            "size": pc.take(source.column("size"), src),
            "ret": res["ret"],
            "errno": _errno_names(res["errno"]),
            "planned": res["planned"],
            "lag": res["lag"],
            "wait": res["wait"],
            "on_time": res["ready"],
            "source_ts": pc.take(source.column("ts"), src),
            "source_dur": pc.take(source.column("dur"), src),
            "source_ret": pc.take(source.column("ret"), src),
            "source_errno": pc.take(source.column("errno"), src),
            "source_producer": src_prod,
            "source_seq": pc.take(source.column("seq"), src),
        }
    )
    return table


def _summarise(
    ops: pa.Table,
    stats: dict,
    info: dict,
    copies: int,
    mode: str,
    speed: float,
    util: dict,
    device: str | None,
    cancelled: bool,
) -> dict:
    n = ops.num_rows
    ts = ops.column("ts").to_numpy()
    lat = ops.column("dur").to_numpy()
    end = int((ts + lat).max()) if n else info["wall0"]
    seconds = max(1e-9, (end - info["wall0"]) / 1e9)
    original = stats["span_ns"] / 1e9
    kind = ops.column("kind")
    ret = ops.column("ret").to_numpy()
    moved = pc.is_in(kind, pa.array(READS + WRITES + COPIES)).to_numpy(zero_copy_only=False)
    nbytes = int(ret[moved & (ret > 0)].sum())
    errs = ops.column("errno").is_valid().to_numpy(zero_copy_only=False)
    src_err = ops.column("source_errno").is_valid().to_numpy(zero_copy_only=False)
    # A write or copy that moved fewer bytes than the traced one (the disk filling up, a
    # prepared source shorter than the trace's).
    src_ret = ops.column("source_ret").fill_null(0).to_numpy(zero_copy_only=False)
    counted = pc.is_in(kind, pa.array(SHORT_COUNTS)).to_numpy(zero_copy_only=False)
    short = counted & ~errs & (ret < src_ret)
    refused = int(pc.sum(pc.equal(ops.column("errno"), "EXDEV")).as_py() or 0)
    lag = ops.column("lag").drop_null().to_numpy() if mode != "asap" else np.array([], np.int64)
    ready = ops.column("on_time").to_numpy(zero_copy_only=False)
    timer = ops.column("lag").to_numpy(zero_copy_only=False)[ready] if mode != "asap" else np.array([], np.int64)
    waited = ops.column("wait").to_numpy()
    by_class = {}
    for cls, members in CLASSES.items():
        m = pc.is_in(kind, pa.array(members)).to_numpy(zero_copy_only=False)
        if m.any():
            by_class[cls] = {"ops": int(m.sum()), **_us(_quantiles(lat[m].astype(np.float64)))}
    expected_ops = stats["ops"] * copies
    out = {
        "timing": mode if mode != "original" or speed == 1.0 else f"scale:{speed:g}",
        "speed": speed,
        "copies": copies,
        "threads": stats["threads"],
        "ops": n,
        "ops_per_copy": stats["ops"],
        "complete": n == expected_ops and not cancelled,
        "cancelled": cancelled,
        "errors": int(errs.sum()),
        "divergent": int(((errs != src_err) | short).sum()),
        "short_writes": int(short.sum()),
        "refused_outside_root": refused,
        "seconds": round(seconds, 6),
        "original_seconds": round(original / (speed if mode == "original" else 1.0), 6),
        "length_ratio": round(seconds / (original / speed), 6)
        if original > 0 and mode in ("original", "relative")
        else None,
        "ops_per_s": n / seconds,
        "mb_per_s": nbytes / 1e6 / seconds,
        "bytes": nbytes,
        "latency_us": _us(_quantiles(lat.astype(np.float64))),
        "latency_by_class_us": by_class,
        "response_time_s": float(lat.mean() / 1e9) if n else None,
        "lag_us": _us(_quantiles(lag.astype(np.float64))),
        "issue_error_us": _us(_quantiles(timer.astype(np.float64))),
        "on_time_share": float(ready.mean()) if n and mode != "asap" else None,
        "dependency_waits": int((waited > 0).sum()),
        "dependency_wait_us": _us(_quantiles(waited[waited > 0].astype(np.float64))),
        "spin_us": info["spin_ns"] / 1e3,
        "wakeup_late_us": {"p50": info["late_p50_ns"] / 1e3, "p90": info["late_p90_ns"] / 1e3},
        "timer_slack_minimised": bool(info["slack_ok"]),
        "device": device,
        "utilisation": {k: (round(v, 6) if isinstance(v, float) else v) for k, v in util.items()},
        "cores": os.cpu_count(),
        "started_ns": info["wall0"],
    }
    # Service demand per call for the models: device busy time and the replayer's CPU.
    if n:
        if "device_util" in util:
            out["device_demand_us"] = util["device_util"] * util["seconds"] / n * 1e6
        out["cpu_demand_us"] = util["replay_cpu_cores"] * util["seconds"] / n * 1e6
    return out


def _skip_table(plan, source: pa.Table, ops: pa.Table, t_start: int, wall0: int, mode: str, speed: float) -> pa.Table:
    """The skipped calls, each at the replay's time when it passed them (see EVENT_TYPES)."""
    sk = plan.skip_columns()
    src = sk["src"]
    reasons = pa.array(list(_core.REPLAY_SKIP_REASONS), pa.string())
    source_ts = pc.take(source.column("ts"), src)
    st = source_ts.to_numpy(zero_copy_only=False)
    if mode == "original":
        ts = wall0 + ((st - t_start) / speed).astype(np.int64)
    else:
        # The issue time of the last replayed call (copy 0) that started before it in the trace.
        first = pc.equal(ops.column("copy"), 0)
        o_src = ops.column("source_ts").filter(first).to_numpy(zero_copy_only=False)
        o_ts = ops.column("ts").filter(first).to_numpy(zero_copy_only=False)
        order = np.argsort(o_src, kind="stable")
        o_src, o_ts = o_src[order], np.maximum.accumulate(o_ts[order]) if len(o_ts) else o_ts
        k = np.searchsorted(o_src, st, side="right") - 1
        ts = np.where(k >= 0, o_ts[np.maximum(k, 0)] if len(o_ts) else wall0, wall0)
    return pa.table(
        {
            "ts": pa.array(np.asarray(ts, np.int64)),
            "src_producer": pc.take(source.column("producer"), src),
            "name": pc.take(source.column("name"), src),
            "reason": pc.take(reasons, sk["reason"]),
            "path": pc.take(source.column("path"), src),
            "source_ts": source_ts,
            "source_producer": pc.cast(pc.take(source.column("producer"), src), pa.int64()),
            "source_seq": pc.take(source.column("seq"), src),
        }
    )


def _store(
    store: Store,
    source_name: str,
    name: str,
    source: pa.Table,
    plan,
    ops: pa.Table,
    skips: pa.Table,
    samples: list,
    done_at: list[int],
    summary: dict,
    copies: int,
) -> None:
    """The derived trace: producers (host, a process per copy, its threads), ops, skips, samples."""
    src_prods = {p["id"]: p for p in store.producers(source_name)}
    threads = sorted(p for p, r in src_prods.items() if r["kind"] == "thread") or sorted(
        set(pc.unique(source.column("producer")).to_pylist())
    )
    index = {p: j for j, p in enumerate(threads)}
    stride = len(threads) + 1
    producers = [{"id": 0, "parent": None, "kind": "host", "name": socket.gethostname(), "attrs": {}}]
    for k in range(copies):
        pid = 1 + k * stride
        producers.append({"id": pid, "parent": None, "kind": "process", "name": f"copy-{k}", "attrs": {"copy": k}})
        for p, j in index.items():
            r = src_prods.get(p, {})
            producers.append(
                {
                    "id": pid + 1 + j,
                    "parent": pid,
                    "kind": "thread",
                    "name": r.get("name", str(p)),
                    "attrs": {"copy": k, "source_producer": p},
                }
            )
    store.create_trace(
        name,
        FORMAT,
        description=f"replay of {source_name} ({summary['timing']}, {copies} copies)",
        metadata={
            "source": source_name,
            "tool": TOOL,
            "timing": summary["timing"],
            "copies": str(copies),
            "root": summary["root"],
        },
        event_types=EVENT_TYPES,
        producers=producers,
        format_description="IO calls replayed by tracehouse replay, with their timing on the target",
    )
    lut = pa.array([index.get(p, -1) for p in plan.threads()], pa.int64())
    j = pc.take(lut, ops.column("src_thread"))
    producer = pc.cast(pc.add(pc.add(pc.multiply(ops.column("copy"), stride), 2), j), pa.int32())
    ops = ops.drop_columns(["src_thread"]).add_column(1, "producer", producer)
    ops = ops.sort_by([("ts", "ascending"), ("producer", "ascending")])
    for off in range(0, ops.num_rows, 1 << 20):
        store.append(name, "op", ops.slice(off, 1 << 20))
    if skips.num_rows:
        keys = pa.array(list(index), pa.int32())
        pos = pc.index_in(skips.column("src_producer"), keys)
        sp = pc.cast(pc.if_else(pos.is_null(), 0, pc.add(pos, 2)), pa.int32())
        skips = skips.drop_columns(["src_producer"]).add_column(1, "producer", sp).sort_by("ts")
        store.append(name, "skip", skips)
    rows = [dict(machine.between(a, b), ts=b.wall_ns, ops_done=d) for a, b, d in zip(samples, samples[1:], done_at[1:])]
    if rows:
        cols = [c.name for c in EVENT_TYPES[2].params]
        tab = pa.table(
            {
                "ts": pa.array([r["ts"] for r in rows], pa.int64()),
                "producer": pa.array([0] * len(rows), pa.int32()),
                **{c: pa.array([r.get(c) for r in rows]) for c in cols},
            }
        )
        store.append(name, "sample", tab)
    store.flush(name)


def _save_result(store: Store, source: str, name: str, summary: dict) -> int:
    return store.save_result(
        "processed",
        "replay",
        TOOL,
        [source, name],
        params={"derived": name, "summary": summary},
        payload={"derived_trace": name},
    )


def runs(store: Store, source: str) -> list[dict]:
    """Summaries of the replays of `source` still stored, oldest first."""
    out = []
    have = {t.name for t in store.traces()}
    for r in store.results(trace=source, tool=TOOL, kind="processed"):
        p = r["params"]
        if p.get("derived") in have and p.get("summary", {}).get("source") == source:
            out.append(p["summary"] | {"trace": p["derived"], "result_id": r["id"]})
    if not out:
        raise NotFound(f"no replays of {source!r} stored (run tracehouse replay {source} --root DIR first)")
    return out
