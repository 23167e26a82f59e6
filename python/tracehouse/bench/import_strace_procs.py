"""The many-process strace case of `tracehouse bench import`: 3M lines from a real capture of
many multithreaded processes, imported end to end (`tracehouse import strace`, start-up included).

Owns the workload (a Python program forking 16 processes of 4 threads each; every thread does
database-like IO on its own file: pwrite, pread, periodic fdatasync), its capture with
`strace -f -ttt -T -y -s0`, and its replication into a log of many processes: copy k has every
timestamp shifted by k times the capture's span (plus 1 ms) and every pid (line prefixes, clone
and wait4 results, wait4/kill arguments, `si_pid=`) moved by k x 10^7, so each copy is new
processes and threads with their own fd tables, as a busy machine's log is. The same peers as
the single-capture case run on the same file (`import_strace`).

The figure this case adds is the end-to-end one: the wall time of the `tracehouse import strace`
command from outside (interpreter start-up and imports, parse, store, close), beside the harness's
timed region inside the child.
"""

from __future__ import annotations

import bisect
import itertools
import re
import time
from pathlib import Path

from ..errors import NotFound
from .import_ import Case, Input
from .import_strace import capture, peer_parse_only, peer_regex, peer_wc

WORKLOAD = r"""
import os, sys, threading
d, nproc, nthr, ops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def work(i, j):
    fd = os.open(os.path.join(d, f"p{i}t{j}.db"), os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    page = b"x" * 4096
    for k in range(ops):
        os.pwrite(fd, page, (k % 64) * 4096)
        if k % 4 == 0:
            os.pread(fd, 4096, ((k * 7) % 64) * 4096)
        if k % 64 == 63:
            os.fdatasync(fd)
    os.close(fd)
pids = []
for i in range(nproc):
    pid = os.fork()
    if pid == 0:
        ts = [threading.Thread(target=work, args=(i, j)) for j in range(nthr)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        os._exit(0)
    pids.append(pid)
for pid in pids:
    os.waitpid(pid, 0)
"""
PROCESSES, THREADS, OPS = 16, 4, 300
PID_STEP = 10_000_000  # copy k's pids: pid + k x PID_STEP (pids stay below 2^31 for 200 copies)

_PREFIX = re.compile(rb"^(\d+)( +)(\d{10})\.(\d{6}) ", re.M)
_PID_REFS = re.compile(rb"(= |si_pid=|wait4\(|kill\(|tgkill\()(\d+)")


def capture_template(workdir: Path) -> Path:
    """A real capture of the workload (about 280K lines: the threads' futex calls included)."""
    return capture(workdir, "template-procs", WORKLOAD, [str(PROCESSES), str(THREADS), str(OPS)])


class _Copies:
    """The template cut once into literal bytes and the numbers a copy moves (each line's pid and
    stamp, every pid it names), so a copy is made by arithmetic and one join. Substituting with a
    regular expression and a Python callback per number for every copy took 136 s for 3M lines
    (load 20); measured at load 9 on the 284K-line template: 700K lines 16.3 s -> 6.1 s, 3M lines
    39.2 s -> 16.9 s, the same bytes (`cmp` against the old code's output)."""

    def __init__(self, body: bytes, pids: set[int]) -> None:
        found = [
            (m.start(), m.end(), (int(m.group(1)), m.group(2), int(m.group(3)) * 1_000_000 + int(m.group(4))))
            for m in _PREFIX.finditer(body)
        ]
        found += [
            (m.start(), m.end(), (m.group(1), int(m.group(2))))
            for m in _PID_REFS.finditer(body)
            if int(m.group(2)) in pids
        ]
        found.sort(key=lambda x: x[0])
        self.body = body
        self.starts = [start for start, _, _ in found]
        self.ends = [end for _, end, _ in found]
        self.fields = [f for _, _, f in found]  # (pid, spaces, stamp in us) of a prefix, or (text before, pid)

    def render(self, shift_us: int, shift_pid: int, stop: int | None = None) -> bytes:
        """One copy (of the template's first `stop` bytes, a line boundary)."""
        body, stop = self.body, len(self.body) if stop is None else stop
        n = bisect.bisect_left(self.starts, stop)
        parts = []
        add = parts.append
        pos = 0
        for start, end, f in zip(self.starts[:n], self.ends[:n], self.fields[:n]):
            add(body[pos:start])
            if len(f) == 3:
                t = f[2] + shift_us
                add(b"%d%s%010d.%06d " % (f[0] + shift_pid, f[1], t // 1_000_000, t % 1_000_000))
            else:
                add(b"%s%d" % (f[0], f[1] + shift_pid))
            pos = end
        add(body[pos:stop])
        return b"".join(parts)


def replicate(template: Path, out: Path, lines: int) -> int:
    """Writes `lines` lines of copies of `template` (timestamps and pids moved per copy, see the
    module's docstring); returns the number of distinct pids written."""
    raw = template.read_bytes()
    body = b"".join(line for line in raw.splitlines(keepends=True) if _PREFIX.match(line))
    if not body:
        raise NotFound(f"{template}: no strace lines with -f -ttt stamps")
    ends = list(itertools.accumulate(len(line) for line in body.splitlines(keepends=True)))
    copies = _Copies(body, {int(m.group(1)) for m in _PREFIX.finditer(body)})
    pids = {f[0] for f in copies.fields if len(f) == 3}
    stamps = [f[2] for f in copies.fields if len(f) == 3]
    span = max(stamps) - min(stamps) + 1000
    written = copy = 0
    with open(out, "wb") as f:
        while written < lines:
            take = min(len(ends), lines - written)
            f.write(copies.render(copy * span, copy * PID_STEP, ends[take - 1]))
            written += take
            copy += 1
    return len(pids) * copy


def build(workdir: Path, sizes: list[int]) -> list[Input]:
    t0 = time.perf_counter()
    template = capture_template(workdir)
    tlines = template.read_bytes().count(b"\n")
    inputs = []
    for n in sorted(sizes):
        path = workdir / f"strace-procs-{n}.log"
        procs = replicate(template, path, n)
        inputs.append(
            Input(
                path,
                n,
                path.stat().st_size,
                {
                    "template_lines": tlines,
                    "pids": procs,
                    "template": f"python: {PROCESSES} forked processes x {THREADS} threads doing pwrite/pread/fdatasync "
                    f"({OPS} ops each) under strace -f -ttt -T -y -s0; copies with new pids",
                    "build_s": round(time.perf_counter() - t0, 2),
                },
            )
        )
    template.unlink(missing_ok=True)
    return inputs


CASE = Case(
    name="strace-procs",
    unit="lines",
    importer="strace",
    default_size=3_000_000,
    build=build,
    peers=(peer_wc, peer_regex, peer_parse_only),
    target=4_000_000,
    target_text=">= 4M lines/s end to end (the tracehouse import command, start-up included)",
    bytes_per_unit=90,
    end_to_end=True,
)
