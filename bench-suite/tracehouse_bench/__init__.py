"""tracehouse's benchmark suite: the seeds' experiments against the peers they name, one report.

A separate distribution in tracehouse's source tree (bench-suite/, `pip install ./bench-suite`;
`make setup` installs it), so the product ships what its users run and this lab, which starts
and stops database servers, lives beside it. It imports tracehouse; tracehouse never imports it:
it plugs in through entry points (pyproject.toml), `tracehouse.bench` for its commands and
`tracehouse.bench_peers` for the peers `tracehouse bench write` can compare with.

  cli.py              `tracehouse bench all` and `tracehouse bench tsbs` (registered on the CLI)
  bench_all.py        every experiment in one run: the order, the sizes (quick, medium, full)
  tod_store.py        seed 001: storing TOD events, every peer in the seed's relational model
  qos_reads.py        seed 003: Q1-Q5 with 1 ... 50 clients, the seed's points
  qos_read_systems.py the systems of the read experiment, loaded alike, read by concurrent clients
  soctrace.py         seed 000: storage size, import time, search-and-save (SoC-Trace's designs)
  tsbs.py             TSBS's cpu-only queries on tracehouse (InfluxQL) and QuestDB
  servers/            the peers that are servers of their own: QuestDB, PostgreSQL, MariaDB
  report.py           DIR/report.md and its plots, from results.json
  pages.py            the documentation's benchmark pages and the README's table, from kept runs
"""
