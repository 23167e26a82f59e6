"""TSBS's cpu-only queries on tracehouse (InfluxQL over `serve`) and on QuestDB (its own SQL), same
data, same machine, same run.

Owns the TSBS query experiment: `tsbs_generate_data` writes the cpu-only data set once in each
format (influx line protocol, QuestDB's ILP), `tsbs_load_influx` loads `tracehouse serve` and
`tsbs_load_questdb` loads QuestDB 9.1 (the jar `bench write` starts), then for every cpu-only query
type `tsbs_generate_queries` writes the same queries (same seed) for both and `tsbs_run_queries_influx`
/ `tsbs_run_queries_questdb` run them, one worker, each query type's queries once as a warm-up
pass (`--prewarm-queries`: the second, timed run of each is what counts) and report their
latency distribution (`--results-file`: TSBS's own HDR histogram). The figures are TSBS's:
median and p99 per query type, in ms, with tracehouse over QuestDB (<= 1.0: tracehouse as fast or
faster). The programs are TSBS's own, unmodified, found in $TSBS_BIN or on PATH: the Go module
proxy does not serve github.com/timescale/tsbs, so `make setup` cannot build them; build its
`cmd/tsbs_*` from TSBS's source (docs/influxql.md says how) to run this experiment.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from tracehouse.bench.write_systems import Tracehouse, Unavailable
from tracehouse.errors import TracehouseError

from .servers import QuestDB

QUERY_TYPES = (
    "single-groupby-1-1-1",
    "single-groupby-1-1-12",
    "single-groupby-1-8-1",
    "single-groupby-5-1-1",
    "single-groupby-5-1-12",
    "single-groupby-5-8-1",
    "cpu-max-all-1",
    "cpu-max-all-8",
    "double-groupby-1",
    "double-groupby-5",
    "double-groupby-all",
    "high-cpu-all",
    "high-cpu-1",
    "lastpoint",
    "groupby-orderby-limit",
)
START = "2016-01-01T00:00:00Z"
SEED = 123


def tool(name: str) -> str:
    """A TSBS program: in $TSBS_BIN, else on PATH; Unavailable when neither has it."""
    where = os.environ.get("TSBS_BIN")
    if where and (Path(where) / name).is_file():
        return str(Path(where) / name)
    found = shutil.which(name)
    if found is None:
        raise Unavailable(
            f"{name} not found in $TSBS_BIN or on PATH (TSBS is not served by the Go module proxy: "
            "build it from github.com/timescale/tsbs, see docs/influxql.md)"
        )
    return found


def _end(hours: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1451606400 + hours * 3600))


def _generate(fmt: str, hosts: int, hours: int, interval_s: int, path: Path) -> None:
    with open(path, "wb") as f:
        subprocess.run(
            [
                tool("tsbs_generate_data"),
                "--use-case=cpu-only",
                f"--seed={SEED}",
                f"--scale={hosts}",
                f"--timestamp-start={START}",
                f"--timestamp-end={_end(hours)}",
                f"--log-interval={interval_s}s",
                f"--format={fmt}",
            ],
            stdout=f,
            stderr=subprocess.DEVNULL,
            check=True,
        )


def _queries(fmt: str, qtype: str, hosts: int, hours: int, n: int, path: Path) -> None:
    with open(path, "wb") as f:
        subprocess.run(
            [
                tool("tsbs_generate_queries"),
                "--use-case=cpu-only",
                f"--seed={SEED}",
                f"--scale={hosts}",
                f"--timestamp-start={START}",
                f"--timestamp-end={_end(hours)}",
                f"--queries={n}",
                f"--query-type={qtype}",
                f"--format={fmt}",
            ],
            stdout=f,
            stderr=subprocess.DEVNULL,
            check=True,
        )


def _run(cmd: list[str], results: Path) -> dict:
    r = subprocess.run(
        [*cmd, "--workers=1", "--prewarm-queries", f"--results-file={results}", "--print-interval=0"],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        out = r.stdout + r.stderr
        panic = next((line for line in out.splitlines() if line.startswith("panic:")), None)
        raise RuntimeError(f"{Path(cmd[0]).name} failed ({r.returncode}): {panic or out[-800:]}")
    totals = json.loads(results.read_text())["Totals"]
    q = totals["overallQuantiles"]["warm_queries"]  # the second run of each query (--prewarm-queries)
    cold = totals["overallQuantiles"]["cold_queries"]
    return {"median_ms": q["q50"], "p99_ms": q["q99"], "max_ms": q["q100"], "cold_median_ms": cold["q50"]}


def run(
    *,
    hosts: int = 100,
    hours: int = 24,
    interval_s: int = 10,
    queries: int = 20,
    types=QUERY_TYPES,
    workdir: str | Path,
    progress=lambda s: None,
) -> dict:
    """Load both systems with the same data, run every query type on both; a JSON-able dict."""
    if hosts < 8 or hours < 13:
        from tracehouse.errors import BadInput

        raise BadInput(
            f"{hosts} hosts over {hours} h: TSBS's queries pick up to 8 hosts and windows up to 12 h",
            expected="--hosts 8 or more, --hours 13 or more",
        )
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    out = {
        "experiment": "tsbs",
        "hosts": hosts,
        "hours": hours,
        "interval_s": interval_s,
        "queries": queries,
        "rows": hosts * hours * 3600 // interval_s,
        "types": {},
        "loads": {},
        "loadavg_before": list(os.getloadavg()),
    }
    influx, ilp = work / "data.influx", work / "data.questdb"
    progress(f"tsbs: generating {out['rows']:,} rows ({hosts} hosts, {hours} h every {interval_s} s)")
    _generate("influx", hosts, hours, interval_s, influx)
    _generate("questdb", hosts, hours, interval_s, ilp)
    with (
        Tracehouse(work, "cpu", serve_args=("--max-answer", "1G", "--query-timeout", "600")) as th,
        QuestDB(work, "cpu") as qdb,
        _logs_kept_on_failure(work, th, qdb),
    ):
        t0 = time.perf_counter()
        r = subprocess.run(
            [
                tool("tsbs_load_influx"),
                f"--file={influx}",
                f"--urls=http://127.0.0.1:{th.port}",
                "--db-name=benchmark",
                "--workers=2",
                "--batch-size=5000",
            ],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            raise RuntimeError(f"tsbs_load_influx failed: {r.stdout[-500:]} {r.stderr[-500:]}")
        out["loads"]["tracehouse"] = round(time.perf_counter() - t0, 2)
        t0 = time.perf_counter()
        r = subprocess.run(
            [
                tool("tsbs_load_questdb"),
                f"--file={ilp}",
                f"--url=http://127.0.0.1:{qdb.port}",
                f"--ilp-bind-to=127.0.0.1:{qdb.tcp_port}",
                "--workers=2",
            ],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            raise RuntimeError(f"tsbs_load_questdb failed: {r.stdout[-500:]} {r.stderr[-500:]}")
        deadline = time.monotonic() + 600
        while _questdb_rows(qdb) < out["rows"]:  # its ILP commits in the background
            if time.monotonic() > deadline:
                raise RuntimeError(f"QuestDB holds {_questdb_rows(qdb):,} of {out['rows']:,} rows after 600 s")
            time.sleep(0.2)
        _index_hostname(qdb)
        out["loads"]["questdb"] = round(time.perf_counter() - t0, 2)
        progress(f"tsbs: loaded, tracehouse {out['loads']['tracehouse']} s, QuestDB {out['loads']['questdb']} s")
        for qtype in types:
            qi, qq = work / f"{qtype}.influx.gob", work / f"{qtype}.questdb.gob"
            _queries("influx", qtype, hosts, hours, queries, qi)
            cell = {
                "tracehouse": _run(
                    [
                        tool("tsbs_run_queries_influx"),
                        f"--file={qi}",
                        f"--urls=http://127.0.0.1:{th.port}",
                        "--db-name=benchmark",
                    ],
                    work / "r.json",
                ),
            }
            try:
                _queries("questdb", qtype, hosts, hours, queries, qq)
            except subprocess.CalledProcessError:  # its QuestDB generator lacks cpu-max-all (a signature mismatch)
                cell["questdb"] = {"error": "TSBS has no QuestDB query of this type"}
            else:
                try:
                    cell["questdb"] = _run(
                        [tool("tsbs_run_queries_questdb"), f"--file={qq}", f"--urls=http://127.0.0.1:{qdb.port}"],
                        work / "r.json",
                    )  # no /: it adds /exec
                except RuntimeError as e:
                    # TSBS's double-groupby SQL predates QuestDB 9, which answers it 400 "SELECT query
                    # must not contain both GROUP BY and SAMPLE BY" (its runner prints no body)
                    why = str(e).splitlines()[0].split("): ", 1)[-1].removeprefix("panic: ")
                    cell["questdb"] = {"error": f"QuestDB 9.1 refused TSBS's SQL: {why[:200]}"}
            if "error" not in cell["questdb"]:
                for k in ("median_ms", "p99_ms"):
                    cell[k.replace("_ms", "_ratio")] = cell["tracehouse"][k] / max(cell["questdb"][k], 1e-9)
            out["types"][qtype] = cell
            t, q = cell["tracehouse"], cell["questdb"]
            progress(
                f"  {qtype}: tracehouse median {t['median_ms']:.2f} ms p99 {t['p99_ms']:.2f}, QuestDB "
                + (f"{q['median_ms']:.2f} / {q['p99_ms']:.2f} ms" if "error" not in q else q["error"])
            )
        out["questdb_version"] = qdb.version
    out["loadavg_after"] = list(os.getloadavg())
    return out


@contextlib.contextmanager
def _logs_kept_on_failure(work: Path, *servers):
    """On a failure inside, each server's log is copied to `work`/logs before the servers stop
    (which deletes their directories) and the error says where: a run that failed can be read."""
    try:
        yield
    except Exception as e:
        kept = work / "logs"
        kept.mkdir(parents=True, exist_ok=True)
        for s in servers:
            log = Path(s.log)
            if log.is_file():
                shutil.copy(log, kept / f"{log.parent.name}-{log.name}")
        raise TsbsFailed(f"{e} (the servers' logs are kept in {kept})") from e


class TsbsFailed(TracehouseError):
    """A TSBS program or a server failed during `bench tsbs`; the message names the kept logs."""


def _index_hostname(qdb: QuestDB) -> None:
    """The index TSBS's QuestDB runner adds to `hostname` when it starts, added (and waited for) before
    any query: QuestDB applies it in the background, and a query arriving meanwhile was answered
    with an error status that stops the runner."""
    import urllib.parse
    import urllib.request

    def ex(sql: str) -> dict:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{qdb.port}/exec?" + urllib.parse.urlencode({"query": sql}), timeout=60
        ) as r:
            return json.loads(r.read())

    ex("ALTER TABLE cpu ALTER COLUMN hostname ADD INDEX")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        cols = ex("show columns from cpu")
        names = [c["name"] for c in cols["columns"]]
        if any(row[names.index("column")] == "hostname" and row[names.index("indexed")] for row in cols["dataset"]):
            return
        time.sleep(0.2)
    raise RuntimeError("QuestDB did not index cpu.hostname in 120 s")


def _questdb_rows(qdb: QuestDB) -> int:
    try:
        return qdb.count("cpu")
    except Exception:  # noqa: BLE001 - the table appears with its first commit
        return 0


def render(r: dict) -> str:
    lines = [
        f"TSBS cpu-only, {r['hosts']} hosts x {r['hours']} h every {r['interval_s']} s = {r['rows']:,} rows; "
        f"{r['queries']} queries per type, 1 worker, each query run twice and timed the second time; "
        f"load average {r['loadavg_before'][0]:.1f} before, {r['loadavg_after'][0]:.1f} after",
        f"loaded by TSBS's own loaders: tracehouse {r['loads']['tracehouse']} s, QuestDB "
        f"{r['loads']['questdb']} s (until every row is visible)",
        f"{'query type':<24} {'tracehouse ms':>16} {'QuestDB ms':>14} {'median x':>9} {'p99 x':>7}  verdict",
        f"{'':<24} {'median / p99':>16} {'median / p99':>14}",
    ]
    for qtype, c in r["types"].items():
        t, q = c["tracehouse"], c["questdb"]
        if "error" in q:
            lines.append(
                f"{qtype:<24} {t['median_ms']:>7.2f} / {t['p99_ms']:>6.2f} {'-':>14} {'':>9} {'':>7}  "
                f"no peer: {q['error'][:90]}"
            )
            continue
        ok = c["median_ratio"] <= 1.0 and c["p99_ratio"] <= 1.0
        lines.append(
            f"{qtype:<24} {t['median_ms']:>7.2f} / {t['p99_ms']:>6.2f} {q['median_ms']:>6.2f} / {q['p99_ms']:>5.2f} "
            f"{c['median_ratio']:>9.2f} {c['p99_ratio']:>7.2f}  {'met' if ok else 'not met'}"
        )
    return "\n".join(lines)


def summary(r: dict) -> list[tuple]:
    """(what, QuestDB's time over tracehouse's: > 1 means tracehouse is faster, peer, the samples
    of each figure) per query type and figure, for the report's summary table: a figure is over
    the type's `queries` timed queries, each one sample (distinct queries, not repeated runs)."""
    samples = [{"converged": True, "runs": r["queries"], "rel_se": None}] * 2
    out = []
    for qtype, c in r["types"].items():
        if "error" not in c["questdb"]:
            out.append((f"{qtype} median", 1 / c["median_ratio"], "questdb", samples))
            out.append((f"{qtype} p99", 1 / c["p99_ratio"], "questdb", samples))
    return out


def plot(r: dict, path: Path) -> Path | None:
    """Median latency per query type, both systems, log scale."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    types = list(r["types"])
    fig, ax = plt.subplots(figsize=(10, 4.5))
    x = range(len(types))
    for k, (name, off) in enumerate((("tracehouse", -0.2), ("questdb", 0.2))):
        got = [r["types"][t][name] for t in types]
        ax.bar(
            [i + off for i in x],
            [g.get("median_ms", 0) for g in got],
            width=0.4,
            label=f"{name} median",
            color=("C0", "C1")[k],
        )
        ax.errorbar([i + off for i in x], [g.get("p99_ms", float("nan")) for g in got], fmt="_", color="k")
    ax.set_xticks(list(x), types, rotation=45, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("ms (bar: median, mark: p99)")
    ax.set_title(f"TSBS cpu-only, {r['hosts']} hosts x {r['hours']} h: tracehouse (InfluxQL) vs QuestDB (SQL)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
