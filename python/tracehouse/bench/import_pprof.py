"""The pprof case of `tracehouse bench import`: a heap profile written by Go's runtime/pprof, in samples.

Owns the workload and its peers. pprof profiles are aggregated (one sample per distinct stack), so
a large one is a program with many distinct call paths: the Go program below allocates at the end
of N paths of a binary recursion log2(N) levels deep (each level calls one of two functions by a
bit of the path number), with `runtime.MemProfileRate = 1` so every allocation is recorded, and
writes its heap profile (4 sample types: alloc_objects, alloc_space, inuse_objects, inuse_space;
one sample per path, 2 log2(N) + 3 frames deep, plus the runtime's own allocations, which are
counted first and left out of N so the profile has the size asked, give or take the one or two
the runtime's allocations vary by between runs); the unit is the sample.

Peers on the headline file: reading it (gunzipping: the bound), `go tool pprof -top` (Go's own
profile parser, the reference reader, which also aggregates by function) and the Rust parser
alone with its batches dropped.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import time
from pathlib import Path

from ..errors import NotFound
from .import_ import Case, Input, Peer, parse_only_peer

PROGRAM = r"""
package main

import (
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
)

var keep [][]byte

//go:noinline
func left(path, depth int) { walk(path, depth-1) }

//go:noinline
func right(path, depth int) { walk(path, depth-1) }

func walk(path, depth int) {
	if depth == 0 {
		keep = append(keep, make([]byte, 64))
		return
	}
	if path>>uint(depth-1)&1 == 1 {
		right(path, depth)
	} else {
		left(path, depth)
	}
}

func main() {
	runtime.MemProfileRate = 1
	n, _ := strconv.Atoi(os.Args[2])
	bits, _ := strconv.Atoi(os.Args[3])
	keep = make([][]byte, 0, n+1)
	for p := 0; p < n; p++ {
		walk(p, bits)
	}
	runtime.GC()
	f, _ := os.Create(os.Args[1])
	pprof.WriteHeapProfile(f)
	f.Close()
}
"""


def _samples(path: Path) -> int:
    from .. import _core

    p = _core.NativeParser("pprof")
    p.feed(gzip.decompress(path.read_bytes()))
    p.finish()
    while p.drain():  # the samples are made rows a batch at a time
        pass
    return p.stats["samples"]


def build(workdir: Path, sizes: list[int]) -> list[Input]:
    go = shutil.which("go")
    if go is None:
        raise NotFound("go is not installed: Go's runtime/pprof writes the workload (apt-get install golang)")
    t0 = time.perf_counter()
    src = workdir / "paths.go"
    src.write_text(PROGRAM)
    exe = workdir / "paths"
    subprocess.run(
        [go, "build", "-o", str(exe), str(src)], check=True, cwd=workdir, env={**os.environ, "GO111MODULE": "off"}
    )
    inputs = []
    for n in sorted(sizes):
        bits = max(1, (n - 1).bit_length())
        path = workdir / f"heap-{n}.pb.gz"
        # The runtime's own allocations are samples too: measured with no path walked, then left out.
        subprocess.run([str(exe), str(path), "0", str(bits)], check=True)
        paths = max(n - _samples(path), 1)
        for _ in range(3):  # the runtime's allocations vary by one or two between runs
            subprocess.run([str(exe), str(path), str(paths), str(bits)], check=True)
            got = _samples(path)
            if got == n:
                break
            paths = max(paths + n - got, 1)
        inputs.append(
            Input(
                path,
                got,
                path.stat().st_size,
                {
                    "template": f"Go heap profile (MemProfileRate 1) of a binary recursion {bits} levels deep: "
                    f"one sample per path",
                    "bits": bits,
                    "paths": paths,
                    "build_s": round(time.perf_counter() - t0, 2),
                },
            )
        )
    return inputs


def peer_read(inp: Input) -> Peer:
    t0 = time.perf_counter()
    gzip.decompress(inp.path.read_bytes())
    return Peer("read+gunzip", "reading and gunzipping the file (the bound)", time.perf_counter() - t0, inp.units)


def peer_go_pprof(inp: Input) -> Peer:
    go = shutil.which("go")
    what = "go tool pprof -top (Go's profile parser, aggregating by function)"
    if go is None:
        return Peer("go tool pprof", what, None, None, note="go not installed")
    subprocess.run([go, "tool", "pprof", "-top", "-nodecount=1", str(inp.path)], capture_output=True, check=True)
    t0 = time.perf_counter()  # the second run: the tool is built and cached
    subprocess.run([go, "tool", "pprof", "-top", "-nodecount=1", str(inp.path)], capture_output=True, check=True)
    return Peer("go tool pprof", what, time.perf_counter() - t0, inp.units)


CASE = Case(
    name="pprof",
    unit="samples",
    importer="pprof",
    default_size=262_144,
    build=build,
    peers=(peer_read, peer_go_pprof, parse_only_peer("pprof", "samples")),
    target=1_000_000,
    target_text=">= 1M samples/s parsed and stored",
    bytes_per_unit=40,
)
