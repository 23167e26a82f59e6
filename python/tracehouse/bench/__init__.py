"""Benchmarks: workloads from the seeds, measured against peers in the same run.

Owns the bench harness. `peers` holds the in-memory workload and the systems we
compare with (raw append, SQLite, DuckDB); `ingest` is `tracehouse bench ingest`.
Benchmarks are never run by the test suite at full size.
"""

from __future__ import annotations

from .peers import Run, Workload

__all__ = ["Run", "Workload"]
