"""The strace case of `tracehouse bench import`: a log of N lines built from a real capture.

Owns the workload (a Python program whose 8 forked workers do database-like file
IO side by side: pwrite, pread, lseek + read, write, periodic fdatasync, each on its
own file), its capture with `strace -f -ttt -T -y -s0` (every syscall: the futex and
signal lines of a real multithreaded process included), the replication of that
capture into a log of any size, and the two peers measured on the very same file:
`wc -l` (reading the lines, nothing more) and a plain Python regular expression
that only recognises strace lines (what a pure-Python importer would do before any
parsing).

Replication: copy k of the capture has every timestamp shifted by k times the
capture's span (plus 1 ms), so the log stays in time order; pids are kept, as a
system reusing them would (each copy's threads exit before the next copy starts,
so every copy makes new producers). The timestamps are fixed width (10.6 digits),
so each copy is the capture's bytes with the stamp digits rewritten by numpy:
building a 5M-line log takes about a second, not the parse we are measuring.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ..errors import NotFound
from .import_ import Case, Input, Peer

WORKLOAD = r"""
import os, sys
d, nproc, ops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def work(i):
    fd = os.open(os.path.join(d, f"t{i}.db"), os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    page = b"x" * 4096
    for k in range(ops):
        os.pwrite(fd, page, (k % 256) * 4096)
        if k % 4 == 0:
            os.pread(fd, 4096, ((k * 7) % 256) * 4096)
        if k % 128 == 127:
            os.fdatasync(fd)
        os.lseek(fd, 0, 0)
        os.read(fd, 512)
        os.write(fd, page[:100])
    os.close(fd)
pids = []
for i in range(nproc):
    pid = os.fork()
    if pid == 0:
        work(i)
        os._exit(0)
    pids.append(pid)
for pid in pids:
    os.waitpid(pid, 0)
"""
# Processes, not threads: Python threads contend for the GIL and under strace their trace
# is mostly futex; forked workers do their IO side by side, as a database's threads do.
WORKERS = 8
OPS = 1000

# The peer "python re": one regular expression recognising a whole strace -f -ttt -T line
# (pid, stamp; a call with its arguments, result, errno and duration, an unfinished call,
# a resumption, a signal or an exit), groups captured but nothing converted or stored:
# the least a pure-Python importer does per line.
_RESULT = rb"(-?\w+|\?)(?:<.*?>)?(?: (E\w+) \(.*?\))?(?: \(.*\))?(?: <(\d+\.\d+)>)?"
PEER_REGEX = (
    rb"^(\d+) +(\d+\.\d+) (?:(\w+)\((.*)\) += " + _RESULT + rb"|(\w+)\((.*) <unfinished \.\.\.>"
    rb"|<\.\.\. (\w+) resumed>(.*)\) += " + _RESULT + rb"|--- (.*) ---|\+\+\+ (.*) \+\+\+)$"
)

_PREFIX = re.compile(rb"^(\d+) +(\d{10})\.(\d{6}) ")


def capture_template(workdir: Path) -> Path:
    """A real capture of the workload (about 100K lines)."""
    return capture(workdir, "template", WORKLOAD, [str(WORKERS), str(OPS)])


def capture(workdir: Path, name: str, program: str, args: list[str]) -> Path:
    """`workdir/NAME.strace`: the Python `program` (given a scratch directory and `args`) run
    under `strace -f -ttt -T -y -s0`; the scratch directory is removed afterwards."""
    strace = shutil.which("strace")
    if strace is None:
        raise NotFound("strace is not installed (Debian/Ubuntu: apt-get install strace)")
    data = workdir / f"{name}-data"
    data.mkdir(exist_ok=True)
    log = workdir / f"{name}.strace"
    subprocess.run(
        [strace, "-f", "-ttt", "-T", "-y", "-s0", "-o", str(log), sys.executable, "-c", program, str(data), *args],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    shutil.rmtree(data, ignore_errors=True)
    return log


def replicate(template: Path, out: Path, lines: int) -> np.ndarray:
    """Writes `lines` lines of copies of `template`, timestamps shifted per copy.

    Returns the end offset of each line of one copy (every copy has the same bytes
    but for the stamps' digits), from which the offset of any line follows."""
    raw = template.read_bytes()
    if not raw.endswith(b"\n"):
        raw = raw[: raw.rfind(b"\n") + 1]
    # Every line strace wrote has the -f -ttt prefix; anything else is dropped.
    lines_ = [line for line in raw.splitlines(keepends=True) if _PREFIX.match(line)]
    if not lines_:
        raise NotFound(f"{template}: no strace lines with -f -ttt stamps")
    offsets, stamps, lens = [], [], []
    o = 0
    for line in lines_:
        m = _PREFIX.match(line)
        offsets.append(o + m.start(2))  # the stamp's first digit
        stamps.append(int(m.group(2)) * 1_000_000 + int(m.group(3)))
        lens.append(len(line))
        o += len(line)
    body = b"".join(lines_)
    buf0 = np.frombuffer(body, np.uint8)
    ends = np.cumsum(np.array(lens, np.int64))  # end offset of each line in `body`
    off = np.array(offsets, np.int64)
    us = np.array(stamps, np.int64)
    span = int(us.max() - us.min()) + 1000
    cols = np.arange(17, dtype=np.int64)
    idx = off[:, None] + cols[None, :]
    digit_cols = np.r_[0:10, 11:17]
    written = 0
    with open(out, "wb") as f:
        copy = 0
        while written < lines:
            t = us + copy * span
            secs, frac = t // 1_000_000, t % 1_000_000
            digits = np.empty((len(t), 16), np.uint8)
            for j in range(9, -1, -1):
                digits[:, j] = secs % 10 + 48
                secs //= 10
            for j in range(15, 9, -1):
                digits[:, j] = frac % 10 + 48
                frac //= 10
            buf = buf0.copy()
            buf[idx[:, digit_cols]] = digits
            take = min(len(t), lines - written)
            f.write(buf[: ends[take - 1]].tobytes())
            written += take
            copy += 1
    return ends


def _offset(ends: np.ndarray, n: int) -> int:
    """Byte offset of the end of line `n` of a replicated log."""
    full, rest = divmod(n, len(ends))
    return int(full * ends[-1] + (ends[rest - 1] if rest else 0))


def build(workdir: Path, sizes: list[int]) -> list[Input]:
    """One log per size (lines), the smaller ones prefixes of the largest."""
    t0 = time.perf_counter()
    template = capture_template(workdir)
    tlines = template.read_bytes().count(b"\n")
    big = workdir / f"strace-{max(sizes)}.log"
    ends = replicate(template, big, max(sizes))
    inputs = []
    for n in sorted(sizes):
        path = big if n == max(sizes) else workdir / f"strace-{n}.log"
        if path != big:
            with open(big, "rb") as src, open(path, "wb") as dst:
                left = _offset(ends, n)
                while left:
                    chunk = src.read(min(left, 16 << 20))
                    dst.write(chunk)
                    left -= len(chunk)
        inputs.append(
            Input(
                path,
                n,
                path.stat().st_size,
                {
                    "template_lines": tlines,
                    "template": "python processes doing pwrite/pread/lseek/read/write/fdatasync "
                    f"({WORKERS} forked workers x {OPS} ops) under strace -f -ttt -T -y -s0",
                    "build_s": round(time.perf_counter() - t0, 2),
                },
            )
        )
    template.unlink(missing_ok=True)
    return inputs


def peer_wc(inp: Input) -> Peer:
    wc = shutil.which("wc")
    if wc is None:
        return Peer("wc -l", "count newlines (coreutils)", None, None, note="wc not found")
    subprocess.run([wc, "-l", str(inp.path)], check=True, capture_output=True)  # page cache warm
    t0 = time.perf_counter()
    outp = subprocess.run([wc, "-l", str(inp.path)], check=True, capture_output=True, text=True).stdout
    secs = time.perf_counter() - t0
    return Peer("wc -l", "count newlines (coreutils), file in page cache", secs, int(outp.split()[0]))


def peer_regex(inp: Input) -> Peer:
    rx = re.compile(PEER_REGEX)
    t0 = time.perf_counter()
    n = 0
    with open(inp.path, "rb") as f:
        for line in f:
            if rx.match(line):
                n += 1
    secs = time.perf_counter() - t0
    return Peer("python re", "one regex recognising each whole line (groups, no conversion, nothing stored)", secs, n)


def peer_parse_only(inp: Input) -> Peer:
    """The Rust parser alone, batches dropped: how much of the import is parsing."""
    from .. import _core

    p = _core.StraceParser()
    t0 = time.perf_counter()
    with open(inp.path, "rb") as f:
        while True:
            chunk = f.read(4 << 20)
            p.feed(chunk)
            if not chunk:
                break
    p.finish()
    secs = time.perf_counter() - t0
    return Peer("tracehouse parse", "Rust parser only, batches dropped (no store)", secs, p.lines)


CASE = Case(
    name="strace",
    unit="lines",
    importer="strace",
    default_size=5_000_000,
    build=build,
    peers=(peer_wc, peer_regex, peer_parse_only),
    target=4_000_000,
    target_text=">= 4M lines/s parsed and stored",
    bytes_per_unit=85,
)
