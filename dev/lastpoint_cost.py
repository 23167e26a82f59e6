"""TSBS lastpoint (`SELECT * from cpu group by "hostname" order by time desc limit 1`) with and
without the last rows kept on write (store/lastrows.py), in one run: the InfluxQL translated twice
over one store (the bound on time from every series' maximum, and from the kept rows), the two SQL
statements run interleaved in-process; and the whole request through `tracehouse serve`.

    python dev/lastpoint_cost.py DIR [HOSTS] [ROWS_PER_HOST] [ROUNDS] [PORT]

TSBS cpu-only's shape: hosts with its 10 tags, 10 integer fields, one row every 10 s; written by
line protocol to a server started on PORT (default 8105), which is stopped before the timing.
"""

import json
import os
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import tracehouse
from tracehouse.server.influxql import parse
from tracehouse.server.influxql_sql import Source, translate
from tracehouse.store.query import qident, tag_column_names

LASTPOINT = 'SELECT * from cpu group by "hostname" order by time desc limit 1'
TAGS = ("region", "datacenter", "rack", "os", "arch", "team", "service", "service_version", "service_environment")
FIELDS = ("usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait", "usage_irq", "usage_softirq")
FIELDS += ("usage_steal", "usage_guest", "usage_guest_nice")
T0 = 1_451_606_400 * 10**9

d = Path(sys.argv[1])
hosts = int(sys.argv[2]) if len(sys.argv) > 2 else 100
per_host = int(sys.argv[3]) if len(sys.argv) > 3 else 4680
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 15
port = int(sys.argv[5]) if len(sys.argv) > 5 else 8105
store_path = d / "store"


def serve():
    cmd = [sys.executable, "-m", "tracehouse.cli", "--store", str(store_path), "serve", "--port", str(port)]
    cmd += ["--tcp-port", str(port + 1), "--quiet"]
    p = subprocess.Popen(cmd)
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=1)
            return p
        except OSError:
            time.sleep(0.1)
    p.kill()
    raise SystemExit("server did not start")


def post(path: str, body: bytes | None = None) -> bytes:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method="POST")
    with urllib.request.urlopen(req, timeout=600) as r:
        return r.read()


if not store_path.exists():
    p = serve()
    try:
        for h in range(hosts):
            tags = ",".join(f"{k}={k}_{(h * 7 + i) % 5}" for i, k in enumerate(TAGS))
            lines = []
            for m in range(per_host):
                fields = ",".join(f"{f}={(h * 31 + m * 7 + i * 13) % 100}i" for i, f in enumerate(FIELDS))
                lines.append(f"cpu,hostname=host_{h},{tags} {fields} {T0 + m * 10 * 10**9}")
            post("/write?db=benchmark", "\n".join(lines).encode())
    finally:
        p.terminate()
        p.wait()

s = tracehouse.open(store_path, readonly=True)
types, keys = s.event_types("benchmark"), s.tag_keys("benchmark")
et = types["cpu"]
fields = {c.name: (c.name, c.type) for c in et.columns if c.name not in ("ts", "producer", "seq")}
tags = dict(tag_column_names(et, keys))
assert s.last_row_types("benchmark") == {"cpu"}


def plan(last):
    src = Source("cpu", '"benchmark".cpu', fields, tags, tiebreak=("producer", "seq"), last=last)
    (st,) = parse(LASTPOINT)
    (p,) = translate(st.options["select"], lambda m: [src], time.time_ns())
    return p.sql


sqls = {"every series' maximum": plan(None), "kept last rows": plan(f'"benchmark".{qident("cpu_last")}')}
answers = {k: s.sql(q) for k, q in sqls.items()}
(a, b) = answers.values()
assert a.equals(b) and a.num_rows == hosts
rows = s.sql('SELECT count(*) FROM "benchmark".cpu').column(0)[0].as_py()
times = {k: [] for k in sqls}
for r in range(rounds):
    for k in list(sqls)[r % 2 :] + list(sqls)[: r % 2]:
        t0 = time.perf_counter()
        s.sql(sqls[k])
        times[k].append(time.perf_counter() - t0)
s.close()
p = serve()
try:
    http = []
    q = "/query?" + urllib.parse.urlencode({"q": LASTPOINT, "db": "benchmark"})
    assert len(json.loads(post(q))["results"][0]["series"]) == hosts
    for _ in range(rounds):
        t0 = time.perf_counter()
        post(q)
        http.append(time.perf_counter() - t0)
finally:
    p.terminate()
    p.wait()
print(f"{rows:,} rows, {hosts} hosts, {rounds} rounds each (interleaved), load {os.getloadavg()[0]:.1f}")
for k, xs in times.items():
    print(f"  SQL bound by {k:22s} median {statistics.median(xs) * 1e3:8.2f} ms  min {min(xs) * 1e3:8.2f} ms")
print(
    f"  /query through serve (kept rows)      median {statistics.median(http) * 1e3:8.2f} ms  min {min(http) * 1e3:8.2f} ms"
)
