"""QuestDB as a peer: the server (the Maven Central jar, on a JVM) in its own directory on loopback,
and `bench write`'s writers to it (the Rust load generator over InfluxDB line protocol).

  questdb            ILP over HTTP: 204 after commit (no fsync by default, cairo.commit.mode=nosync:
                     survives a crash of QuestDB, not a power loss)
  questdb-sync       the same with cairo.commit.mode=sync: 204 once the commit is flushed to disk
  questdb-tcp        ILP over TCP: nothing acknowledged (rows sent)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

from tracehouse import _core
from tracehouse.bench.write_systems import Sample, Unavailable, free_port, stop_process, wait_for
from tracehouse.workload.loadgen import self_cpu_s

QUESTDB_VERSION = "9.1.0"


def questdb_jar() -> Path:
    """The QuestDB jar from the local Maven repository, fetched from Maven Central when missing."""
    env = os.environ.get("TRACEHOUSE_QUESTDB_JAR")
    if env:
        return Path(env)
    jar = Path.home() / f".m2/repository/org/questdb/questdb/{QUESTDB_VERSION}/questdb-{QUESTDB_VERSION}.jar"
    if not jar.exists():
        if not shutil.which("mvn"):
            raise Unavailable("QuestDB jar not found and mvn is not installed (set TRACEHOUSE_QUESTDB_JAR)")
        r = subprocess.run(
            ["mvn", "-q", "dependency:get", f"-Dartifact=org.questdb:questdb:{QUESTDB_VERSION}"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if r.returncode != 0 or not jar.exists():
            raise Unavailable(f"could not fetch QuestDB {QUESTDB_VERSION} with mvn: {r.stdout[-500:]}{r.stderr[-500:]}")
    return jar


class QuestDB:
    commit_mode = "nosync"  # QuestDB's default: a commit flushes nothing (the page cache keeps it)

    def __init__(self, workdir: Path, workload: str, name: str = "questdb") -> None:
        self.dir = Path(workdir) / f"questdb-{self.commit_mode}"
        self.workload = workload
        self.name = name
        self.proc = None

    def __enter__(self) -> QuestDB:
        if not shutil.which("java"):
            raise Unavailable("java is not installed")
        jar = questdb_jar()
        shutil.rmtree(self.dir, ignore_errors=True)
        (self.dir / "conf").mkdir(parents=True)
        self.port, self.tcp_port, pg = free_port(), free_port(), free_port()
        (self.dir / "conf" / "server.conf").write_text(
            f"http.bind.to=127.0.0.1:{self.port}\nhttp.min.enabled=false\n"
            f"line.tcp.net.bind.to=127.0.0.1:{self.tcp_port}\npg.net.bind.to=127.0.0.1:{pg}\n"
            f"line.udp.enabled=false\ntelemetry.enabled=false\ncairo.commit.mode={self.commit_mode}\n"
        )
        self.log = self.dir / "questdb.log"
        self.proc = subprocess.Popen(
            ["java", "-Xmx2g", "-p", str(jar), "-m", "io.questdb/io.questdb.ServerMain", "-d", str(self.dir)],
            stdout=open(self.log, "wb"),
            stderr=subprocess.STDOUT,
        )

        def ping():
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/ping", timeout=2) as r:
                return r.status == 204

        wait_for(ping, 90, "QuestDB", self.proc, self.log)
        self.pid = self.proc.pid
        self.version = QUESTDB_VERSION
        return self

    def __exit__(self, *exc) -> None:
        stop_process(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)

    def count(self, table: str) -> int:
        q = urllib.parse.quote(f"select count() from {table}")
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/exec?query={q}", timeout=30) as r:
            return json.loads(r.read())["dataset"][0][0]

    def measure(self, writers: int, rows: int, seconds: float, name: str | None = None) -> Sample:

        tcp = (name or self.name) == "questdb-tcp"
        c0 = self_cpu_s()
        r = _core.run_load(
            workload=self.workload,
            protocol="tcp-plain" if tcp else "http",
            host="127.0.0.1",
            port=self.tcp_port if tcp else self.port,
            path="/write?precision=n",
            agents=writers,
            rows_per_batch=rows,
            duration_s=seconds,
        )
        return Sample(r["rows_sent"] if tcp else r["rows_acked"], r["elapsed_s"], r["errors"], self_cpu_s() - c0)


class QuestDBSync(QuestDB):
    """QuestDB with `cairo.commit.mode=sync`: a commit (and so an ILP/HTTP 204) waits for its flush."""

    commit_mode = "sync"
