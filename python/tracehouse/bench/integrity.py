"""`tracehouse bench integrity`: what the store's checksums cost, beside the same work without them.

Owns one experiment in one run, with its peers measured alternately in the same process:

- write: a generated TOD trace (every column an integer: the native writer, src/store/intparquet.rs)
  and a CSV import (strings and floats: parquet-cpp, pyarrow's writer) into fresh stores, with
  page CRCs (the default) and without (`WriterOptions.page_checksums=False`), `rounds` times each
  in turn; median wall and CPU seconds, and the ratio.
- the writers alone: every segment of that store written again by its writer, with and without
  CRCs (CPU seconds: the end-to-end runs carry the generator, the CSV parser and the fsyncs).
- check: over the segments those stores hold (in the page cache: what is measured is CPU, not the
  disk), MB/s of `tracehouse verify` (every page's CRC, footers, catalog, WAL, journals), of the
  page walk alone (`segments.check_pages`), of a plain read of the same files' bytes, of decoding
  them with pyarrow, and of decoding them with pyarrow checking every page's CRC as it reads
  (what checking on every query read would cost a reader that can; DuckDB cannot).

The load average is printed with the figures: this machine's two cores are shared.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w0, time.process_time() - c0


def _metrics_csv(path: Path, rows: int) -> None:
    """`rows` rows of host metrics: ts, producer, type (string), value (float), note (string)."""
    rng = np.random.default_rng(7)
    ts = 1_700_000_000 * 10**9 + np.arange(rows, dtype=np.int64) * 1000
    host = rng.integers(0, 64, rows)
    kind = np.array(["cpu_percent", "memory_mb", "disk_io"])[rng.integers(0, 3, rows)]
    val = np.round(rng.random(rows) * 100, 2)
    with open(path, "w") as f:
        f.write("ts,producer,type,value\n")
        for i in range(0, rows, 100_000):
            j = min(rows, i + 100_000)
            f.write("\n".join(f"{a},host-{b},{c},{d}" for a, b, c, d in zip(ts[i:j], host[i:j], kind[i:j], val[i:j])))
            f.write("\n")


def run(
    events: int = 5_000_000,
    csv_rows: int = 2_000_000,
    rounds: int = 3,
    workdir: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict:
    import pyarrow.parquet as pq

    import tracehouse
    from tracehouse.formats import registry
    from tracehouse.formats.column_mapping import Mapping
    from tracehouse.formats.tod.generate import generate_tod
    from tracehouse.store import verify_store
    from tracehouse.store.segments import check_pages

    say = progress or (lambda _m: None)
    root = Path(tempfile.mkdtemp(prefix="th-bench-integrity-", dir=workdir))
    try:
        csv = root / "metrics.csv"
        _metrics_csv(csv, csv_rows)
        times: dict[tuple[str, bool], list[tuple[float, float]]] = {}
        stores: dict[bool, Path] = {}
        for r in range(rounds):
            for ck in (True, False) if r % 2 == 0 else (False, True):
                path = root / f"store-{r}-{'crc' if ck else 'nocrc'}"
                with tracehouse.open(path, page_checksums=ck) as s:
                    times.setdefault(("tod", ck), []).append(_timed(lambda s=s: generate_tod(s, "tod", events)))
                    times.setdefault(("csv", ck), []).append(
                        _timed(
                            lambda s=s: registry.importer("csv", csv).import_file(
                                s, csv, "csv", mapping=Mapping(kind="counter")
                            )
                        )
                    )
                say(
                    f"round {r + 1}/{rounds}, page checksums {'on' if ck else 'off'}: TOD "
                    f"{times[('tod', ck)][-1][0]:.2f} s, CSV {times[('csv', ck)][-1][0]:.2f} s"
                )
                if stores.get(ck) is not None:
                    shutil.rmtree(stores[ck])
                stores[ck] = path
        write = {}
        for what in ("tod", "csv"):
            on = [t for t in times[(what, True)]]
            off = [t for t in times[(what, False)]]
            med = {
                k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
                for k, v in (("on", on), ("off", off))
            }
            write[what] = {
                "rows": events if what == "tod" else csv_rows,
                "seconds_with": round(med["on"][0], 4),
                "seconds_without": round(med["off"][0], 4),
                "cpu_with": round(med["on"][1], 4),
                "cpu_without": round(med["off"][1], 4),
                "ratio_wall": round(med["on"][0] / med["off"][0], 3),
                "ratio_cpu": round(med["on"][1] / med["off"][1], 3),
                "runs": len(on),
            }
        store = stores[True]
        files = sorted(store.glob("traces/*/segments/*/*.parquet"))
        nbytes = sum(f.stat().st_size for f in files)
        write["segments"] = _segment_writes(root, files, max(5, rounds), say)

        def plain_read() -> None:
            for f in files:
                with open(f, "rb", buffering=0) as fh:
                    while fh.read(8 << 20):
                        pass

        def decode(verify_crc: bool) -> Callable[[], None]:
            def go() -> None:
                for f in files:
                    with pq.ParquetFile(f, page_checksum_verification=verify_crc) as p:
                        p.read()

            return go

        def pages() -> None:
            for f in files:
                assert check_pages(f)["bad"] is None

        def whole_verify() -> None:
            assert verify_store(store)["ok"]

        check = {}
        for name, fn in (
            ("plain read", plain_read),
            ("page walk", pages),
            ("tracehouse verify", whole_verify),
            ("pyarrow decode", decode(False)),
            ("pyarrow decode + CRC", decode(True)),
        ):
            fn()  # (warm: every file in the page cache, every import done)
            best = min(_timed(fn)[0] for _ in range(max(5, rounds)))
            check[name] = {"seconds": round(best, 4), "mb_per_s": round(nbytes / best / 1e6, 1)}
            say(f"{name}: {check[name]['mb_per_s']:,} MB/s")
        base = check["plain read"]["seconds"]
        for v in check.values():
            v["x_plain_read"] = round(v["seconds"] / base, 2)
        decode_s = check["pyarrow decode"]["seconds"]
        check["pyarrow decode + CRC"]["x_decode"] = round(check["pyarrow decode + CRC"]["seconds"] / decode_s, 3)
        return {
            "events": events,
            "csv_rows": csv_rows,
            "rounds": rounds,
            "segment_files": len(files),
            "segment_bytes": nbytes,
            "write": write,
            "check": check,
            "load_average": os.getloadavg()[0],
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _segment_writes(root: Path, files: list[Path], rounds: int, say) -> dict:
    """The writers alone: every segment of the store written again (the same tables, the same
    writer: native for integer-only types, pyarrow for the rest), with and without page CRCs,
    `rounds` times each in turn; median CPU seconds (this process's threads)."""
    import pyarrow.parquet as pq

    from tracehouse.store.segments import write_segment

    tables = [(f.parent.name, pq.read_table(f).replace_schema_metadata(None)) for f in files]
    out_dir = root / "rewrite"
    cpu: dict[bool, list[float]] = {True: [], False: []}
    for r in range(rounds):
        for ck in (True, False) if r % 2 == 0 else (False, True):
            shutil.rmtree(out_dir, ignore_errors=True)
            c0 = time.process_time()
            for name, t in tables:
                write_segment(out_dir, name, t, checksums=ck)
            cpu[ck].append(time.process_time() - c0)
    with_, without = statistics.median(cpu[True]), statistics.median(cpu[False])
    say(f"segment writes: {with_:.3f} CPU-s with page CRCs, {without:.3f} without")
    return {
        "rows": sum(t.num_rows for _, t in tables),
        "files": len(tables),
        "cpu_with": round(with_, 4),
        "cpu_without": round(without, 4),
        "ratio_cpu": round(with_ / without, 3),
        "runs": rounds,
    }


def render(r: dict) -> str:
    lines = [f"page checksums: write ({r['rounds']} runs each, alternating; medians)"]
    for what, w in r["write"].items():
        if what == "segments":
            lines.append(
                f"  {'the writers alone':30} {w['rows']:>11,} rows in {w['files']} segments: with "
                f"{w['cpu_with']:.3f} CPU-s, without {w['cpu_without']:.3f} CPU-s: x{w['ratio_cpu']:.3f} CPU "
                f"({w['runs']} runs)"
            )
            continue
        label = "TOD generate (native writer)" if what == "tod" else "CSV import (pyarrow writer)"
        lines.append(
            f"  {label:30} {w['rows']:>11,} rows: with {w['seconds_with']:.3f} s ({w['cpu_with']:.3f} CPU-s), "
            f"without {w['seconds_without']:.3f} s ({w['cpu_without']:.3f} CPU-s): x{w['ratio_wall']:.3f} wall, "
            f"x{w['ratio_cpu']:.3f} CPU"
        )
    lines.append(
        f"check: {r['segment_files']} segment files, {r['segment_bytes'] / 1e6:.1f} MB in the page cache (best of 5)"
    )
    for name, c in r["check"].items():
        extra = f", x{c['x_decode']:.3f} pyarrow decode" if "x_decode" in c else ""
        lines.append(
            f"  {name:22} {c['mb_per_s']:>9,.1f} MB/s  ({c['seconds']:.3f} s, x{c['x_plain_read']:.2f} "
            f"plain read{extra})"
        )
    lines.append(f"load average {r['load_average']:.2f}")
    return "\n".join(lines)
