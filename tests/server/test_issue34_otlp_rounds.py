"""OTLP requests taken in one dispatcher round are decoded together and, once their services are
known, logged by the decoding call itself (one WAL record per event type, one group commit),
while each request keeps its own answer: its partial success, or its 400 alone.

In process (an `OtlpIngest` over a real store, as `tracehouse serve` holds it): which rounds take
the one-call path is observed through `Store.append` (the path of a round that makes producers)
and the WAL's record count; what was stored is read back through SQL. Through a real server:
concurrent clients with good, partly refused and undecodable bodies each get their own answer.
"""

from __future__ import annotations

import threading

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from helpers.server import Server
from tracehouse.server.config import ServerConfig
from tracehouse.server.ingest import Ingestor
from tracehouse.server.otlp import OtlpIngest
from tracehouse.store import Store
from tracehouse.store import wal as walmod


def _res(service: str) -> Resource:
    return Resource(attributes=[KeyValue(key="service.name", value=AnyValue(string_value=service))])


def traces(first: int, n: int, *, service: str = "shop", bad: tuple[int, ...] = (), events: int = 0) -> bytes:
    """n spans with span ids first+1..first+n; those at the offsets `bad` end before they start."""
    spans = [
        Span(
            trace_id=b"\x01" * 16,
            span_id=(1 + first + i).to_bytes(8, "big"),
            name=f"op{i % 3}",
            start_time_unix_nano=1_000 + first + i,
            end_time_unix_nano=(500 if i in bad else 2_000) + first + i,
            events=[Span.Event(time_unix_nano=1_500 + first + i, name="e") for _ in range(events)],
        )
        for i in range(n)
    ]
    rs = ResourceSpans(resource=_res(service), scope_spans=[ScopeSpans(spans=spans)])
    return ExportTraceServiceRequest(resource_spans=[rs]).SerializeToString()


def logs(n: int, *, service: str = "shop") -> bytes:
    recs = [LogRecord(time_unix_nano=10 + i, severity_number=9, body=AnyValue(string_value=f"l{i}")) for i in range(n)]
    rl = ResourceLogs(resource=_res(service), scope_logs=[ScopeLogs(log_records=recs)])
    return ExportLogsServiceRequest(resource_logs=[rl]).SerializeToString()


@pytest.mark.parametrize("fsync", ["batch", "always"])
def test_issue34_a_steady_otlp_round_is_logged_by_its_decoding_call(tmp_path, monkeypatch, fsync):
    store = Store(tmp_path / "s", fsync=fsync, flush_interval_s=3600.0, flush_rows=10**9)
    store.become_writer()
    otlp = OtlpIngest(Ingestor(store, ServerConfig()), "otlp")
    appended: list[str] = []
    real_append = Store.append

    def counted(self, trace, event_type, batch, **kw):
        appended.append(event_type)
        return real_append(self, trace, event_type, batch, **kw)

    monkeypatch.setattr(Store, "append", counted)

    def records() -> int:
        w = store._live_writer("t")
        return len(walmod.read_wal(walmod.wal_path(w.wal_dir, w.wal.number)).records)

    # The trace's first round: created, its service registered, then appended.
    first = otlp.write_round(
        "t",
        [
            (traces(0, 10), "traces", False),
            (b"\xff\xff\xff", "traces", False),
            (traces(10, 5, bad=(1, 3)), "traces", False),
        ],
    )
    assert [a.status for a in first] == [200, 400, 200]
    assert b"not an OTLP protobuf ExportTraceServiceRequest" in first[1].body and first[1].result is None
    assert ExportTraceServiceResponse.FromString(first[0].body).HasField("partial_success") is False
    ps = ExportTraceServiceResponse.FromString(first[2].body).partial_success
    assert ps.rejected_spans == 2 and "spans[1]: endTimeUnixNano" in ps.error_message
    assert (first[0].result.rows, first[2].result.rows) == (10, 3) and appended == ["span"]
    assert store.wait_durable("t", first[2].result.lsn, timeout=10)
    before = records()

    # A steady round (the service is known): spans with events, logs, an undecodable body and a
    # partly refused one, in one native call: one record per event type, nothing through append.
    appended.clear()
    items = [
        (traces(100, 20, events=2), "traces", False),
        (logs(7), "logs", False),
        (traces(200, 4, bad=(0,)), "traces", False),
        (b"\x0a\x05broken", "traces", False),
        (traces(300, 30), "traces", False),
    ]
    steady = otlp.write_round("t", items)
    assert [a.status for a in steady] == [200, 200, 200, 400, 200]
    assert appended == [], "a steady OTLP round went through Store.append"
    assert records() == before + 3, "one WAL record per event type of the round (span, span_event, log)"
    assert [a.result.rows for i, a in enumerate(steady) if i != 3] == [60, 7, 3, 30]
    assert ExportTraceServiceResponse.FromString(steady[2].body).partial_success.rejected_spans == 1
    lsns = [a.result.lsn for i, a in enumerate(steady) if i != 3]
    # each answer waits for the last record holding its rows (records in the order span, span_event, log)
    assert lsns[2] == lsns[3] == lsns[0] - 1 and lsns[1] == lsns[0] + 1
    assert store.wait_durable("t", max(lsns), timeout=10)

    # A new service in the round: its producer is registered first, then the batches appended.
    appended.clear()
    new = otlp.write_round("t", [(traces(400, 3, service="billing"), "traces", False), (logs(2), "logs", False)])
    assert [a.status for a in new] == [200, 200] and sorted(appended) == ["log", "span"]
    assert store.wait_durable("t", max(a.result.lsn for a in new), timeout=10)

    got = store.sql("SELECT service, count(*) FROM t.span GROUP BY service ORDER BY service").to_pylist()
    assert got == [{"service": "billing", "count_star()": 3}, {"service": "shop", "count_star()": 66}]
    assert store.sql("SELECT count(*) AS n FROM t.span_event").to_pylist() == [{"n": 40}]
    assert store.sql("SELECT count(*) AS n FROM t.log").to_pylist() == [{"n": 9}]
    # the refused spans are not stored, the rest once each
    ids = {int(r["span_id"], 16) - 1 for r in store.sql("SELECT span_id FROM t.span").to_pylist()}
    want = set(range(0, 10)) | {10, 12, 14} | set(range(100, 120)) | {201, 202, 203} | set(range(300, 330))
    assert ids == want | {400, 401, 402}
    # rows numbered per producer without a gap or a repeat across rounds and event types
    assert store.sql(
        "SELECT count(*) = count(DISTINCT (producer, seq)) AND bool_and(n = seq + 1) AS ok FROM (SELECT producer, "
        "seq, row_number() OVER (PARTITION BY producer ORDER BY seq) AS n FROM t.events)"
    ).to_pylist() == [{"ok": True}]
    store.close()


def test_issue34_concurrent_otlp_clients_each_get_their_own_answer(tmp_path):
    """Clients posting at once share rounds: every good body is acknowledged with its own count of
    refused spans, every broken one refused alone, and exactly the acknowledged spans are stored."""
    import http.client

    s = Server(tmp_path / "store", "--quiet")
    answers: list = []
    failures: list = []

    def client(w: int) -> None:
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        try:
            for n in range(30):
                first = (w << 20) + n * 100
                kind = n % 3
                body = b"\x0a\x07garbage" if kind == 2 else traces(first, 50, bad=(7, 9) if kind == 1 else ())
                c.request("POST", "/v1/traces?trace=mixed", body, {"Content-Type": "application/x-protobuf"})
                r = c.getresponse()
                answers.append((w, n, kind, r.status, r.read()))
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(repr(e))

    threads = [threading.Thread(target=client, args=(w,)) for w in range(1, 7)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not failures, failures
        assert len(answers) == 6 * 30
        for w, n, kind, status, body in answers:
            if kind == 2:
                assert status == 400 and b"not an OTLP protobuf" in body, (w, n, status, body)
                continue
            assert status == 200, (w, n, status, body)
            ps = ExportTraceServiceResponse.FromString(body).partial_success
            assert ps.rejected_spans == (2 if kind == 1 else 0), (w, n, ps)
        have = [int(r[0], 16) - 1 for r in s.sql("SELECT span_id FROM mixed.span")]
        want = {
            (w << 20) + n * 100 + i
            for w, n, kind, _s, _b in answers
            if kind != 2
            for i in range(50)
            if not (kind == 1 and i in (7, 9))
        }
        assert len(have) == len(set(have)) and set(have) == want
    finally:
        assert s.stop() == 0


def test_a_round_whose_producers_cannot_be_registered_leaves_no_unregistered_ids(tmp_path, monkeypatch):
    """Registering a round's new services failed (the disk filled at that moment): the request
    gets a 5xx, and the next round registers the service itself instead of naming an id the
    catalog never got (its rows would belong to no producer)."""
    store = Store(tmp_path / "s", flush_interval_s=3600.0, flush_rows=10**9)
    store.become_writer()
    otlp = OtlpIngest(Ingestor(store, ServerConfig()), "otlp")
    assert otlp.write_round("t", [(traces(0, 3, service="shop"), "traces", False)])[0].status == 200
    real = Store.add_producers

    def disk_full(self, *a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Store, "add_producers", disk_full)
    failed = otlp.write_round("t", [(traces(10, 2, service="cart"), "traces", False)])
    assert failed[0].status >= 500
    monkeypatch.setattr(Store, "add_producers", real)
    again = otlp.write_round("t", [(traces(20, 2, service="cart"), "traces", False)])
    assert again[0].status == 200
    orphans = (
        store.sql(
            """SELECT count(*) AS n FROM "t".spans
           WHERE producer NOT IN (SELECT id FROM th.producers WHERE trace = 't')"""
        )
        .column("n")[0]
        .as_py()
    )
    services = store.sql("""SELECT count(*) AS n FROM "t".spans""").column("n")[0].as_py()
    assert (orphans, services) == (0, 5)
    store.close()
