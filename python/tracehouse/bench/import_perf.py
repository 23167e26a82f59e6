"""The perf case of `tracehouse bench import`: `perf script` text of a real recording, in lines.

Owns the workload, its capture and its peers. The workload is a C program built with frame
pointers (two threads walking recursive call chains 8-40 frames deep into three leaf
functions) recorded with `perf record -F 999 -g`, then printed by `perf script`: stack samples
~25 frames deep on average, as a profile of a native service is. The template (~3,000
samples, ~80K lines) is replicated to the input sizes: copy k has every timestamp shifted by k
times the recording's span (plus 1 ms) and every thread id moved by k x 10^7, so each copy is
new threads.

Peers on the headline file: `wc -l` (reading it: the bound of any import), inferno's
`inferno-collapse-perf` when installed (`cargo install inferno`: the Rust port of FlameGraph's
stackcollapse-perf.pl, the usual first step of a flame graph, parsing the same text into
folded stacks and counting them, nothing stored), FlameGraph's own `stackcollapse-perf.pl`
when on PATH, a plain Python parse (each record's header split and its frames' symbols
joined: what a pure-Python importer would do before storing anything) and the Rust parser
alone with its batches dropped.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from ..errors import NotFound
from .import_ import Case, Input, Peer, parse_only_peer
from .import_strace import peer_wc

# A C program with frame pointers (so `perf record -g` unwinds it whole): two threads walking
# recursive call chains 8-40 deep into three different leaf functions.
WORKLOAD = r"""
#include <pthread.h>
#include <stdio.h>
static volatile double sink;
__attribute__((noinline)) static double leaf_a(double x) { for (int i = 0; i < 400; i++) x = x * 1.0000001 + 0.5; return x; }
__attribute__((noinline)) static double leaf_b(double x) { for (int i = 0; i < 400; i++) x = x / 1.0000001 + 0.25; return x; }
__attribute__((noinline)) static double leaf_c(double x) { for (int i = 0; i < 400; i++) x = x - 0.125 * (i & 3); return x; }
__attribute__((noinline)) static double walk(int depth, long i, double x) {
    if (depth == 0) return (i % 3 == 0) ? leaf_a(x) : (i % 3 == 1) ? leaf_b(x) : leaf_c(x);
    return walk(depth - 1, i, x) + 1e-9;
}
__attribute__((noinline)) static void run(long n, int base) {
    double x = 1;
    for (long i = 0; i < n; i++) x = walk(base + (int)(i % 33), i, x);
    sink = x;
}
static void *worker(void *arg) { run((long)arg, 8); return NULL; }
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    pthread_t t;
    pthread_create(&t, NULL, worker, (void *)n);
    run(n, 4);
    pthread_join(t, NULL);
    printf("%f\n", sink);
    return 0;
}
"""
ROUNDS = 200_000  # calls of each thread (~1.5 s of CPU each)
PID_STEP = 10_000_000
# COMM TID[/TID] [CPU] SECONDS.MICROS: (the header of a record; comm may hold spaces)
_HEADER = re.compile(rb"^(.*?\S)? +(\d+)(/(\d+))? +(\[\d+\] +)?(\d+)\.(\d{6}): ", re.M)


def capture_template(workdir: Path) -> Path:
    """`workdir/template.perf.txt`: the workload under `perf record -F 999 -g`, then `perf script`."""
    perf = shutil.which("perf")
    if perf is None:
        raise NotFound("perf is not installed (Debian/Ubuntu: apt-get install linux-perf)")
    cc = shutil.which("cc")
    if cc is None:
        raise NotFound("no C compiler to build the recorded program (Debian/Ubuntu: apt-get install gcc)")
    src, exe = workdir / "walk.c", workdir / "walk"
    src.write_text("#include <stdlib.h>\n" + WORKLOAD)
    subprocess.run(
        [cc, "-O1", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer", "-pthread", "-o", str(exe), str(src)],
        check=True,
    )
    data = workdir / "template.perf.data"
    r = subprocess.run(
        [perf, "record", "-F", "999", "-g", "-q", "-o", str(data), "--", str(exe), str(ROUNDS)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise NotFound(
            f"perf record cannot record here: {r.stderr.strip()[-300:]} "
            "(as root, or with /proc/sys/kernel/perf_event_paranoid at 2 or below)"
        )
    out = workdir / "template.perf.txt"
    with open(out, "wb") as f:
        subprocess.run([perf, "script", "-i", str(data)], stdout=f, stderr=subprocess.DEVNULL, check=True)
    data.unlink(missing_ok=True)
    return out


def replicate(template: Path, out: Path, lines: int) -> tuple[int, int]:
    """Writes `lines` lines of copies of `template`'s records, timestamps and thread ids moved per
    copy (see the module's docstring); returns (copies begun, lines written)."""
    body = template.read_bytes()
    heads = list(_HEADER.finditer(body))
    if not heads:
        raise NotFound(f"{template}: no perf script records")
    body = body[heads[0].start() :]
    heads = list(_HEADER.finditer(body))
    stamps = [int(m.group(6)) * 1_000_000 + int(m.group(7)) for m in heads]
    span = max(stamps) - min(stamps) + 1000
    # Each record: (its header's fields, the bytes after its time) in the template.
    starts = [m.start() for m in heads] + [len(body)]
    records = [
        (m.group(1) or b"", int(m.group(2)), m.group(4), m.group(5) or b"", t, body[m.end() : starts[i + 1]])
        for i, (m, t) in enumerate(zip(heads, stamps))
    ]
    written = copy = 0
    with open(out, "wb") as f:
        while written < lines:
            parts = []
            for comm, pid, tid, cpu, t, rest in records:
                if written >= lines:
                    break
                t += copy * span
                p = pid + copy * PID_STEP
                ids = b"%d/%d" % (p, int(tid) + copy * PID_STEP) if tid else b"%d" % p
                rec = b"%s %s %s%d.%06d: %s" % (comm, ids, cpu, t // 1_000_000, t % 1_000_000, rest)
                n = rec.count(b"\n")
                if written + n > lines:  # the last record cut at the size asked (fewer frames)
                    n = lines - written
                    rec = b"".join(rec.splitlines(keepends=True)[:n])
                parts.append(rec)
                written += n
            f.write(b"".join(parts))
            copy += 1
    return copy, written


def build(workdir: Path, sizes: list[int]) -> list[Input]:
    t0 = time.perf_counter()
    template = capture_template(workdir)
    text = template.read_bytes()
    inputs = []
    for n in sorted(sizes):
        path = workdir / f"perf-{n}.txt"
        copies, lines = replicate(template, path, n)
        inputs.append(
            Input(
                path,
                lines,
                path.stat().st_size,
                {
                    "template_lines": text.count(b"\n"),
                    "template_samples": len(_HEADER.findall(text)),
                    "copies": copies,
                    "template": f"C: two threads x {ROUNDS} recursive walks 8-40 frames deep under perf record -F 999 -g, "
                    "then perf script; copies with new thread ids",
                    "build_s": round(time.perf_counter() - t0, 2),
                },
            )
        )
    template.unlink(missing_ok=True)
    return inputs


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found is None:
        cargo = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo")) / "bin" / name
        found = str(cargo) if cargo.exists() else None
    return found


def _lines(inp: Input) -> int:
    return inp.units


def _collapse(name: str, exe_name: str, what: str, missing: str, inp: Input) -> Peer:
    """A folded-stacks tool run over the file (its output dropped), or why it was not."""
    exe = _tool(exe_name)
    if exe is None:
        return Peer(name, what, None, None, note=missing)
    t0 = time.perf_counter()
    subprocess.run([exe, str(inp.path)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return Peer(name, what, time.perf_counter() - t0, _lines(inp))


def peer_inferno(inp: Input) -> Peer:
    return _collapse(
        "inferno",
        "inferno-collapse-perf",
        "inferno-collapse-perf (Rust stackcollapse-perf): perf script text to folded stacks, nothing stored",
        "not installed (cargo install inferno)",
        inp,
    )


def peer_stackcollapse(inp: Input) -> Peer:
    return _collapse(
        "stackcollapse-perf.pl",
        "stackcollapse-perf.pl",
        "FlameGraph's stackcollapse-perf.pl (Perl): perf script text to folded stacks",
        "not on PATH (FlameGraph)",
        inp,
    )


def peer_python(inp: Input) -> Peer:
    """A plain Python parse: each header split, each frame's symbol taken, the stack joined."""
    t0 = time.perf_counter()
    rows = 0
    frames: list[bytes] = []
    with open(inp.path, "rb") as f:
        for line in f:
            if line[:1] in (b"\t", b" "):
                parts = line.split(None, 1)
                if len(parts) == 2:
                    frames.append(parts[1].rsplit(b" (", 1)[0].split(b"+0x", 1)[0])
            elif line.strip():
                head = line.split()
                frames = []
                rows += 1 if head else 0
            elif frames:
                b";".join(reversed(frames))
                frames = []
    return Peer(
        "python",
        "split each header, take each frame's symbol, join the stack (nothing stored)",
        time.perf_counter() - t0,
        _lines(inp),
        note=f"{rows:,} records",
    )


CASE = Case(
    name="perf",
    unit="lines",
    importer="perf",
    default_size=5_000_000,
    build=build,
    peers=(peer_wc, peer_inferno, peer_stackcollapse, peer_python, parse_only_peer("perf", "lines")),
    target=4_000_000,
    target_text=">= 4M lines/s parsed and stored (the strace import's target)",
    bytes_per_unit=60,
)
