"""The otlp format: files of OTLP requests imported (`tracehouse import otlp`), and the native
decoder that `tracehouse serve`'s /v1/traces and /v1/logs share with it, fuzzed.

Golden cases: tests/formats/otlp/ (an SDK-encoded protobuf request, OTLP JSON lines). The live
path with the OpenTelemetry SDK's exporters: tests/server/test_otlp_ingest.py. Random bytes and
chunking of the file parser: tests/formats/test_native_fuzz.py (it takes every declared parser).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracehouse
from tracehouse import _core
from tracehouse.cli import main
from tracehouse.errors import BadInput
from tracehouse.formats import registry

HERE = Path(__file__).parent / "otlp"
SDK = HERE / "sdk" / "input"
JSONL = HERE / "json_lines" / "input"


def test_sniffer_takes_otlp_json_lines_and_protobuf_not_other_inputs(tmp_path):
    assert registry.sniff(JSONL) == "otlp"
    assert registry.sniff(SDK) == "otlp"
    other = tmp_path / "chrome.json"
    other.write_text('{"traceEvents": []}')
    assert registry.sniff(other) != "otlp"
    for pb in (HERE.parent / "pprof" / "cpu" / "input", *HERE.parent.glob("perfetto/*/input")):
        assert registry.sniff(pb) != "otlp", pb


def test_import_of_a_gzipped_sdk_request(tmp_path):
    gz = tmp_path / "spans.pb.gz"
    gz.write_bytes(gzip.compress(SDK.read_bytes()))
    store = tracehouse.open(tmp_path / "store")
    rep = registry.importer("otlp").import_file(store, gz, "sdk")
    assert rep.by_type == {"span": 4, "span_event": 1, "span_link": 1} and rep.rejected == 0
    rows = store.sql("SELECT name, service FROM sdk.span ORDER BY ts").to_pylist()
    assert [r["name"] for r in rows] == ["POST /invoice", "INSERT invoices", "invoices publish", "reconcile"]
    assert {r["service"] for r in rows} == {"billing"}


def test_bad_lines_are_named_by_line_and_strict_stops(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    lines = JSONL.read_text().splitlines()
    bad.write_text(lines[0] + '\n{"resourceSpans": [{"scopeSpans": 7}]}\n' + lines[1] + "\n")
    store = tracehouse.open(tmp_path / "store")
    rep = registry.importer("otlp").import_file(store, bad, "lenient")
    assert rep.by_type["span"] == 2 and rep.rejected == 1
    (p,) = rep.first_rejected
    assert p.line == 2 and "resourceSpans[0].scopeSpans: expected an array, found a number" in p.reason
    with pytest.raises(BadInput) as e:
        registry.importer("otlp").import_file(store, bad, "strict", strict=True)
    assert "bad.jsonl:2" in str(e.value)


# -- the decoder under random input -------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048), st.sampled_from(["traces", "logs"]), st.booleans())
def test_random_bytes_never_crash_the_decoder(data, signal, as_json):
    try:
        d = _core.decode_otlp(data, signal, _core.OtlpProducers(), json=as_json)
    except ValueError as e:
        what = "ExportTraceServiceRequest" if signal == "traces" else "ExportLogsServiceRequest"
        assert f"not an OTLP {'JSON' if as_json else 'protobuf'} {what}" in str(e)
    else:
        assert d["accepted"] + d["rejected"] >= 0


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_damaged_requests_are_refused_or_decoded_never_crash(data):
    body = bytearray(SDK.read_bytes())
    for _ in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(0, len(body) - 1))
        body[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(body)))
    try:
        d = _core.decode_otlp(bytes(body[:cut]), "traces", _core.OtlpProducers())
    except ValueError as e:
        assert "not an OTLP protobuf ExportTraceServiceRequest" in str(e)
    else:
        for _name, b in d["batches"]:
            assert b.num_rows >= 0


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
        max_leaves=20,
    )
)
def test_any_json_value_is_decoded_or_refused_with_its_path(value):
    doc = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [value]}]}]}).encode()
    try:
        _core.decode_otlp(doc, "traces", _core.OtlpProducers(), json=True)
    except ValueError as e:
        assert "resourceSpans[0].scopeSpans[0].spans[0]" in str(e)


def test_the_answers_decode_with_the_official_messages():
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    r = ExportTraceServiceResponse.FromString(_core.otlp_response("traces", 3, "why"))
    assert (r.partial_success.rejected_spans, r.partial_success.error_message) == (3, "why")
    assert _core.otlp_response("traces") == b""


def test_cli_import_and_the_example_queries(tmp_path, capsys):
    store = tmp_path / "store"
    assert main(["--store", str(store), "import", "otlp", str(JSONL), "--name", "j", "--json"]) == 0
    capsys.readouterr()
    s = tracehouse.open(store)
    for title, sql in registry.formats()["otlp"].examples:
        s.sql(sql.format(t='"j"', s="'j'"))  # every example runs
        assert title


# -- trace search: the spans view and `analyze traces` ---------------------------------------------


@pytest.fixture
def billing(tmp_path):
    store = tmp_path / "store"
    assert main(["--store", str(store), "import", "otlp", str(SDK), "--name", "billing"]) == 0
    return store


def analyze(store, capsys, *args) -> list[dict]:
    capsys.readouterr()
    assert main(["--store", str(store), "analyze", "traces", "billing", "--json", *args]) == 0
    out = json.loads(capsys.readouterr().out)
    return out["rows"] if isinstance(out, dict) else out


def test_spans_view_has_end_ms_error_and_root(billing):
    s = tracehouse.open(billing)
    rows = s.sql(
        "SELECT s.name, end_ts - ts AS d, ms, error, root, p.kind AS producer_kind, p.name AS producer_name "
        "FROM billing.spans s JOIN th.producers p ON p.trace = 'billing' AND p.id = s.producer ORDER BY ts"
    ).to_pylist()
    assert [r["name"] for r in rows] == ["POST /invoice", "INSERT invoices", "invoices publish", "reconcile"]
    assert rows[0]["d"] == 9_000_000 and rows[0]["ms"] == 9.0 and rows[0]["root"]
    assert [r["error"] for r in rows] == [False, False, True, False]
    assert rows[3]["producer_kind"] == "process" and rows[1]["producer_name"] == "thread 11"


def test_analyze_traces_answers_the_everyday_questions(billing, capsys):
    tid = "abcdef0123456789abcdef0123456789"
    tree = analyze(billing, capsys, "--show", "tree", "--trace-id", tid.upper())
    assert [(r["depth"], r["span"]) for r in tree] == [
        (0, "POST /invoice"),
        (1, "  INSERT invoices"),
        (1, "  invoices publish"),
        (0, "reconcile"),
    ]
    assert [r["name"] for r in analyze(billing, capsys, "--attr", "db.system=postgresql")] == ["INSERT invoices"]
    assert [r["name"] for r in analyze(billing, capsys, "--attr", "tags=a")] == []
    assert [r["name"] for r in analyze(billing, capsys, "--min-dur", "2ms", "--max-dur", "5ms")] == ["INSERT invoices"]
    assert [r["name"] for r in analyze(billing, capsys, "--name", "%invoice%", "--service", "billing")] == [
        "POST /invoice",
        "INSERT invoices",
        "invoices publish",
    ]
    errs = analyze(billing, capsys, "--show", "errors")
    assert [(r["name"], r["status_message"]) for r in errs] == [("invoices publish", "broker unavailable")]
    slow = analyze(billing, capsys, "--show", "slowest")
    assert [(r["trace_id"], r["spans"], r["errors"], r["ms"]) for r in slow] == [(tid, 4, 1, 21.0)]
    capsys.readouterr()
    assert main(["--store", str(billing), "analyze", "traces", "billing", "--show", "tree"]) != 0


def test_issue34_a_span_sent_twice_is_one_node_of_the_tree(billing, capsys):
    """An exporter that retries a batch the server had stored sends its spans again: the tree
    of the trace is the same (each level below a doubled span would double)."""
    tid = "abcdef0123456789abcdef0123456789"
    once = analyze(billing, capsys, "--show", "tree", "--trace-id", tid)
    assert main(["--store", str(billing), "import", "otlp", str(SDK), "--name", "again"]) == 0
    s = tracehouse.open(billing)
    cols = ["ts", "producer", "dur", *(p.name for p in s.event_types("billing")["span"].params)]
    s.append("billing", "span", s.sql('SELECT * FROM "again".span').select(cols), wait=True)
    s.close()
    assert tracehouse.open(billing).sql("SELECT count(*) AS n FROM billing.spans").to_pylist() == [{"n": 8}]
    twice = analyze(billing, capsys, "--show", "tree", "--trace-id", tid)
    assert [(r["depth"], r["span"], r["children"]) for r in twice] == [
        (r["depth"], r["span"], r["children"]) for r in once
    ]
