"""tracehouse's own benchmarks: what its users run to measure it, each beside peers measured in
the same run (`tracehouse bench NAME`).

Owns the user-facing benches, one module each (each says what it measures and against what):
tod_ingest (`bench ingest`, with its in-process peers in tod_ingest_peers: raw append, SQLite,
DuckDB), concurrent_writes (`bench write`, its systems in write_systems), analyze, import_ (and
its cases import_strace, import_strace_procs, import_chrome), chrome, engines, replay, record,
debug and ui; and what they share: stat_protocol (seed 003's statistical protocol) and progress.

The lab that starts peer database servers (QuestDB, PostgreSQL, MariaDB), runs the seeds'
experiments (`bench all`, `bench tsbs`) and writes the benchmark pages is a separate distribution
in the source tree, bench-suite/, which plugs its commands and peers in through entry points.
Benchmarks are never run by the test suite at full size.
"""
