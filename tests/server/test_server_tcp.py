"""Line protocol over raw TCP on the native front end (src/ingest/tcpfront.rs, server/tcp.py).

Clients written elsewhere where there are any: lines serialized by the `influxdb_client`
package (InfluxData's own serializer) and telegraf's output format, sent the way telegraf's
socket_writer sends them (one long-lived connection, writes cut anywhere, lines split across
packets). A SIGKILL under durable offsets loses no acknowledged row; a SIGTERM drains what
was received; random bytes never take the server down.
"""

from __future__ import annotations

import json
import random
import signal
import socket
import struct
import threading
import time

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.server import Server, read_lines

# telegraf 1.x output (inputs cpu, mem, disk, system, net; outputs.socket_writer data_format
# "influx"): escaped tag values, integer and unsigned fields, a string field with a comma and
# a space, booleans, and nanosecond timestamps.
TELEGRAF = [
    "cpu,cpu=cpu-total,host=web\\ 1 usage_guest=0,usage_idle=97.09,usage_iowait=0.25,usage_system=1.76,"
    "usage_user=0.9 {ts}",
    "mem,host=web\\ 1 active=2110586880i,available=6121013248i,available_percent=73.65,used_percent=26.35 {ts}",
    "disk,device=sda1,fstype=ext4,host=web\\ 1,mode=rw,path=/ free=41563893760i,inodes_used=401432i,"
    "total=62725623808i,used=17946456064i,used_percent=30.15 {ts}",
    "system,host=web\\ 1 load1=0.52,load15=0.41,load5=0.47,n_cpus=2i,n_users=1i {ts}",
    'system,host=web\\ 1 uptime_format="2 days,  3:04" {ts}',
    "net,host=web\\ 1,interface=eth0 bytes_recv=81712398u,bytes_sent=7731282u,err_in=0u,drop_in=12u {ts}",
    "docker,engine_host=web\\ 1,server_version=24.0.5 n_containers=3i,memory_total=8335798272i,healthy=true {ts}",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("tcp") / "store", "--max-line", "4k", "--idle-timeout", "10", "--quiet")
    yield s
    assert s.stop() == 0


def health(s: Server) -> dict:
    return json.loads(s.request("GET", "/health")[2])


def wait_for(s: Server, sql: str, want, timeout: float = 15):
    deadline = time.monotonic() + timeout
    got = None
    while time.monotonic() < deadline:
        try:
            got = s.sql(sql)
        except AssertionError:
            got = None
        if got == want:
            return got
        time.sleep(0.05)
    return got


def send_in_pieces(sock: socket.socket, data: bytes, rng: random.Random, most: int = 700) -> None:
    """Writes `data` in pieces of random size (a line cut anywhere), pausing now and then so
    the pieces reach the server as separate packets."""
    i = 0
    while i < len(data):
        n = rng.randint(1, most)
        sock.sendall(data[i : i + n])
        i += n
        if rng.random() < 0.02:
            time.sleep(0.005)


def test_telegraf_socket_writer_session_lines_cut_across_packets(server):
    rng = random.Random(17)
    rows0 = health(server)["tcp_rows"]
    s = server.tcp()
    lines = []
    for k in range(600):  # 600 gathering intervals of 7 lines, one long-lived connection
        ts = 1_700_000_000_000_000_000 + k * 10_000_000_000
        lines += [t.format(ts=ts) for t in TELEGRAF]
    send_in_pieces(s, ("\n".join(lines) + "\n").encode(), rng)
    n = len(lines)
    # The connection stays open (as socket_writer keeps it): rows arrive while it lives.
    assert wait_for(server, 'SELECT count(*) FROM "lineproto".cpu', [[600]]) == [[600]]
    s.sendall(TELEGRAF[0].format(ts=1).encode() + b"\n")
    s.shutdown(socket.SHUT_WR)
    s.settimeout(10)
    assert s.recv(100) == b""  # at most once: nothing is sent back, and the server closes after ingesting
    s.close()
    assert health(server)["tcp_rows"] - rows0 == n + 1
    assert health(server)["tcp_lines_refused"] == 0
    assert server.sql('SELECT count(*), sum(usage_idle) FROM "lineproto".cpu') == [[601, pytest.approx(601 * 97.09)]]
    assert server.sql('SELECT uptime_format FROM "lineproto".system WHERE uptime_format IS NOT NULL LIMIT 1') == [
        ["2 days,  3:04"]
    ]
    assert server.sql('SELECT min(bytes_recv), max(drop_in) FROM "lineproto".net') == [[81712398, 12]]
    tags = server.sql("SELECT attrs FROM th.producers WHERE trace = 'lineproto' AND name LIKE 'cpu=%'")
    assert [json.loads(t[0]) for t in tags] == [{"cpu": "cpu-total", "host": "web 1"}]


def test_a_string_field_with_newlines_cut_across_packets(server):
    """A string field may hold newlines (InfluxDB 1.x reads them so): the line ends at the first
    newline outside the string, wherever the packets cut it; a quote never closed is refused with
    its line alone (the line after it is kept)."""
    rng = random.Random(5)
    s = server.tcp()
    logs = [f'applog,host=h msg="entry {k}\nat line 2, \\"quoted\\"\n",k={k}i {1_700_000_000 + k}' for k in range(200)]
    body = "\n".join(logs) + '\napplog,host=h msg="never closed 1\napplog,host=h k=999i 2\n'
    send_in_pieces(s, body.encode(), rng, most=37)
    s.shutdown(socket.SHUT_WR)
    s.settimeout(10)
    assert s.recv(100) == b""
    s.close()
    assert wait_for(server, 'SELECT count(*) FROM "lineproto".applog', [[201]]) == [[201]]
    assert server.sql('SELECT msg FROM "lineproto".applog WHERE k = 7') == [['entry 7\nat line 2, "quoted"\n']]
    assert server.sql('SELECT count(*) FROM "lineproto".applog WHERE k = 999') == [[1]]


def test_influxdb_client_points_with_durable_offsets_and_ack_order(server):
    """Lines serialized by InfluxData's Python client; refused lines answered in line order."""
    from influxdb_client import Point, WritePrecision

    points = [
        Point("h2o")
        .tag("location", "coyote creek")
        .tag("note", "a,b=c")
        .field("level", 1.5 * i)
        .field("desc", f'below "{i}" feet')
        .field("ok", i % 2 == 0)
        .field("n", i)
        .time(1_600_000_000 + i, WritePrecision.S)
        for i in range(300)
    ]
    body = [p.to_line_protocol() for p in points]
    body[100] = "h2o,location=x level=1.2.3 1600000100"  # a malformed value, line 102 of the connection
    body[200] = 'h2o,location=coyote\\ creek level="str" 1600000200'  # a type conflict, line 202
    s = server.tcp()
    s.sendall(b"# tracehouse acks=1 bucket=influxc precision=s\n")
    send_in_pieces(s, ("\n".join(body) + "\n").encode(), random.Random(3), most=4000)
    s.shutdown(socket.SHUT_WR)
    got = read_lines(s, 100, timeout=15)
    s.close()
    assert got[-1] == "ok 301 298", got
    errs = [g for g in got if g.startswith("err")]
    assert [int(e.split()[1]) for e in errs] == [102, 202], got
    # Every `ok` counts up, and an `err` comes before the `ok` that covers its line.
    oks = [(i, int(g.split()[1]), int(g.split()[2])) for i, g in enumerate(got) if g.startswith("ok")]
    assert [o[1] for o in oks] == sorted(o[1] for o in oks) and [o[2] for o in oks] == sorted(o[2] for o in oks)
    for e in errs:
        line = int(e.split()[1])
        assert got.index(e) < next(i for i, upto, _r in oks if upto >= line)
    rows = server.sql('SELECT count(*), sum(n), count(DISTINCT producer) FROM "influxc".h2o')
    assert rows == [[298, sum(range(300)) - 100 - 200, 1]]


def test_a_client_that_disconnects_mid_line(server):
    # Reset mid-line (SO_LINGER 0: the kernel sends RST): the complete lines are kept, the cut
    # one is not guessed at.
    s = server.tcp()
    s.sendall(b"cut,host=a v=1i 1\ncut,host=a v=2i 2\ncut,host=a v=3")
    time.sleep(0.2)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    # A clean close (FIN) mid-line: as `nc` sends a last line without its newline, it counts.
    s = server.tcp()
    s.sendall(b"cut,host=b v=4i 4\ncut,host=b v=5i 5")
    s.shutdown(socket.SHUT_WR)
    s.settimeout(10)
    assert s.recv(10) == b""
    s.close()
    # Gone under durable offsets without reading a single acknowledgement.
    s = server.tcp()
    s.sendall(b"# tracehouse acks=1\n" + b"cut,host=c v=6i 6\n" * 1000 + b"cut,host=c v=")
    s.close()
    assert wait_for(server, 'SELECT count(*) FROM "lineproto".cut WHERE v = 6', [[1000]]) == [[1000]]
    assert server.sql('SELECT v FROM "lineproto".cut WHERE v <> 6 ORDER BY v') == [[1], [2], [4], [5]]
    deadline = time.monotonic() + 10
    while health(server)["tcp_connections"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.alive() and health(server)["tcp_connections"] == 0


def test_refused_connections_and_a_bad_handshake_are_answered_once(tmp_path):
    s = Server(tmp_path / "store", "--max-connections", "2", "--idle-timeout", "5", "--quiet")
    try:
        held = [s.tcp(), s.tcp()]
        time.sleep(0.2)
        extra = s.tcp()
        assert read_lines(extra, 1) == ["err 0 too many connections"]
        extra.close()
        for c in held:
            c.close()
        time.sleep(0.3)
        bad = s.tcp()
        bad.sendall(b"# tracehouse acks=1 precision=h\nm v=1 1\n")
        assert read_lines(bad, 2) == ["err 0 precision 'h': expected ns, us, ms or s"]
        bad.close()
        assert health(s)["refused_connections"] >= 1
    finally:
        assert s.stop() == 0


def _acked_writer(port: int, w: int, acked: list, stop: threading.Event, rng: random.Random) -> None:
    """Durable offsets; line L of the connection carries n = L - 2 (line 1 is the handshake).
    Batches of random size, cut anywhere, sent without waiting; a second thread reads the
    `ok` lines as they come: only what one covers counts as acknowledged."""

    def read_oks(f) -> None:
        try:
            for line in f:
                if line.startswith(b"ok "):
                    acked[w] = max(acked[w], int(line.split()[1]) - 1)  # every n below this is durable
        except (OSError, ValueError):
            pass  # the server died

    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        reader = threading.Thread(target=read_oks, args=(s.makefile("rb"),), daemon=True)
        reader.start()
        s.sendall(b"# tracehouse bucket=k9 acks=1\n")
        n = 0
        while not stop.is_set() and n < 500_000:
            k = rng.randint(1, 400)
            send_in_pieces(
                s, "".join(f"k,writer=t{w} w={w}i,n={i}i {i}\n" for i in range(n, n + k)).encode(), rng, most=3000
            )
            n += k
            time.sleep(0.002)
    except OSError:
        return  # the server died
    reader.join(30)


@pytest.mark.parametrize("ack", ["durable", "written"])
def test_sigkill_loses_no_row_acknowledged_over_tcp(tmp_path, ack):
    store = tmp_path / "store"
    s = Server(store, "--ack", ack, "--quiet")
    stop = threading.Event()
    acked = [0] * 4
    threads = [
        threading.Thread(target=_acked_writer, args=(s.tcp_port, w, acked, stop, random.Random(w))) for w in range(4)
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 20
    while min(acked) < 2000 and time.monotonic() < deadline:
        time.sleep(0.05)
    s.kill()  # SIGKILL while every writer is still sending
    stop.set()
    for t in threads:
        t.join(30)
    assert min(acked) > 0, acked
    s = Server(store, "--quiet")
    try:
        _st, _h, data = s.request(
            "POST",
            "/api/query",
            b'{"sql": "SELECT w, n FROM \\"k9\\".k", "format": "arrow"}',
            {"Content-Type": "application/json"},
        )
        t = pa.ipc.open_stream(data).read_all()
    finally:
        assert s.stop() == 0
    key = t.column("w").to_numpy() * 10**9 + t.column("n").to_numpy()
    uniq, counts = np.unique(key, return_counts=True)
    assert counts.max() == 1, f"{int((counts > 1).sum())} rows stored twice"
    want = np.concatenate([w * 10**9 + np.arange(0, a) for w, a in enumerate(acked)])
    missing = np.setdiff1d(want, uniq)
    assert missing.size == 0, f"{missing.size} acknowledged rows lost, e.g. {missing[:5]}"


def test_sigterm_drains_what_was_received_and_acknowledges_it(tmp_path):
    store = tmp_path / "store"
    s = Server(store, "--quiet")
    c = s.tcp(timeout=30)
    c.sendall(b"# tracehouse bucket=drain acks=1\n")
    c.sendall(b"".join(b"d,host=a n=%di %d\n" % (i, i) for i in range(20000)) + b"d,host=a n=")
    first = read_lines(c, 1)  # (all the lines that one read brought: acks may come together)
    assert first[0].startswith("ok ")  # the server is reading
    s.proc.send_signal(signal.SIGTERM)
    # Every ack, those of the first read too: when they came together, the drain may have no
    # line left to acknowledge (CI: the test read one, dropped the rest and found none after).
    got = first + read_lines(c, 10_000, timeout=30)  # until the server closes
    c.close()
    assert s.proc.wait(30) == 0
    assert got and all(g.startswith("ok ") for g in got), got[-3:]
    last = int(got[-1].split()[1])  # lines 2..last are durable: n = 0 .. last-2
    s = Server(store, "--quiet")
    try:
        rows = s.sql('SELECT count(*), min(n), max(n), count(DISTINCT n) FROM "drain".d')
    finally:
        assert s.stop() == 0
    assert rows[0][0] >= last - 1 and rows[0][1] == 0 and rows[0][3] == rows[0][0], (rows, last)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=300),
            st.sampled_from(
                [
                    b"\n",
                    b"# tracehouse acks=1 bucket=fz\n",
                    b"# tracehouse precision=",
                    b"fz,t=1 v=1i 1\n",
                    b'fz v="\\',
                    b"\x00\xff\r\n",
                    b"\\\n",
                    b"# tracehouse bucket=../x acks=1\n",
                    b"=,= =\n",
                ]
            ),
        ),
        max_size=12,
    ),
    st.booleans(),
)
def test_random_bytes_never_crash_the_server(server, pieces, reset):
    s = server.tcp()
    try:
        for p in pieces:
            s.sendall(p)
        if reset:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            s.shutdown(socket.SHUT_WR)
            s.settimeout(10)
            while s.recv(65536):
                pass
    except OSError:
        pass  # the server may close first (a refused handshake)
    finally:
        s.close()
    assert server.alive()
    t = server.tcp()
    t.sendall(b"# tracehouse acks=1 bucket=fzok\nok,h=1 v=1i 1\n")
    assert read_lines(t, 1) == ["ok 2 1"]
    t.close()
