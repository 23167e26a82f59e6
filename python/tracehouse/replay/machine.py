"""What the machine did during a replay: device and CPU utilisation from /proc.

Owns finding the block device under a directory (st_dev -> /sys/dev/block/M:m, a
partition resolved to its disk) and reading /proc/diskstats and /proc/stat into
`Sample`s, whose differences give utilisation over an interval: device busy time
(`io_ticks`, the iostat %util), sectors and requests moved, CPU busy, iowait and
steal shares of all cores, and this process's own CPU (getrusage: the replayer's
cost). A few reads of small text files every 100 ms: not a hot loop.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path

SECTOR = 512


@dataclass(frozen=True)
class Sample:
    """Counters at one instant (monotonic and wall clocks in ns)."""

    mono_ns: int
    wall_ns: int
    disk: tuple[int, ...] | None  # rd_ios, rd_sectors, wr_ios, wr_sectors, io_ticks_ms, flush_ios
    cpu: tuple[int, ...]  # user nice system idle iowait irq softirq steal (USER_HZ ticks, all cores)
    self_cpu_s: float


def device_of(path: str | os.PathLike) -> str | None:
    """The block device (whole disk) holding `path`, or None (tmpfs, overlay without one)."""
    st = os.stat(path)
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    sys = Path(f"/sys/dev/block/{major}:{minor}")
    if not sys.exists():
        return None
    real = sys.resolve()
    if (real / "partition").exists():
        real = real.parent
    return real.name


def _disk(device: str | None) -> tuple[int, ...] | None:
    if device is None:
        return None
    with open("/proc/diskstats") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 14 and parts[2] == device:
                v = [int(x) for x in parts[3:]]
                flush = v[15] if len(v) > 15 else 0
                return (v[0], v[2], v[4], v[6], v[9], flush)
    return None


def _cpu() -> tuple[int, ...]:
    with open("/proc/stat") as f:
        first = f.readline().split()
    return tuple(int(x) for x in first[1:9])


def sample(device: str | None) -> Sample:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return Sample(time.monotonic_ns(), time.time_ns(), _disk(device), _cpu(), ru.ru_utime + ru.ru_stime)


def between(a: Sample, b: Sample) -> dict:
    """Utilisation from `a` to `b`: device busy share, IOPS and MB/s, CPU busy/iowait/steal
    shares of all cores, and this process's CPU in cores."""
    secs = max(1e-9, (b.mono_ns - a.mono_ns) / 1e9)
    out: dict = {"seconds": secs}
    if a.disk is not None and b.disk is not None:
        d = [y - x for x, y in zip(a.disk, b.disk)]
        out.update(
            {
                "device_util": min(1.0, d[4] / 1e3 / secs),
                "device_reads_s": d[0] / secs,
                "device_writes_s": d[2] / secs,
                "device_read_mb_s": d[1] * SECTOR / 1e6 / secs,
                "device_write_mb_s": d[3] * SECTOR / 1e6 / secs,
                "device_flushes_s": d[5] / secs,
            }
        )
    c = [y - x for x, y in zip(a.cpu, b.cpu)]
    total = max(1, sum(c))
    out.update(
        {
            "cpu_util": (total - c[3] - c[4]) / total,
            "cpu_iowait": c[4] / total,
            "cpu_steal": c[7] / total,
            "replay_cpu_cores": (b.self_cpu_s - a.self_cpu_s) / secs,
        }
    )
    return out
