"""Generated workloads, the Python sides of `src/workload/`.

Owns what drives load into tracehouse or a peer, for users and benchmarks alike:

  loadgen.py  `tracehouse load`: the Rust write load generator (seed 003's QoS agents, TSBS cpu-only
              hosts) against a server, its Arrow bodies and its CPU accounting
  qos.py      seed 003's QoS data set (2,032,000 measurement rows at scale 1) and its read queries
              Q1-Q5, in tracehouse's layout and the seed's three schemas

The TOD generator (seed 001) is a format's: `formats/tod/generate.py`. Nothing here starts a
peer database: that is the benchmark suite's (bench-suite/).
"""
