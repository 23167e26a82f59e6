use arrow_array::{Array, Int64Array, StringArray};
use prost::Message;

use super::proto::*;
use super::*;

fn kv(k: &str, v: any_value::Value) -> KeyValue {
    KeyValue { key: k.into(), value: Some(AnyValue { value: Some(v) }) }
}

fn s(v: &str) -> any_value::Value {
    any_value::Value::StringValue(v.into())
}

fn request() -> ExportTraceServiceRequest {
    let span = |id: u8, parent: Option<u8>, start: u64, end: u64, attrs: Vec<KeyValue>| Span {
        trace_id: vec![7; 16],
        span_id: vec![id; 8],
        parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
        name: format!("op{id}"),
        kind: 2,
        start_time_unix_nano: start,
        end_time_unix_nano: end,
        attributes: attrs,
        status: Some(Status { code: 2, message: "boom".into() }),
        events: vec![SpanEvent { time_unix_nano: start + 1, name: "exception".into(), attributes: vec![] }],
        ..Default::default()
    };
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    kv("service.name", s("shop")),
                    kv("host.name", s("box")),
                    kv("process.pid", any_value::Value::IntValue(42)),
                    kv("telemetry.sdk.language", s("rust")),
                ],
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope { name: "lib".into(), ..Default::default() }),
                spans: vec![
                    span(
                        1,
                        None,
                        100,
                        500,
                        vec![
                            kv("http.method", s("GET")),
                            kv("http.response.status_code", any_value::Value::IntValue(503)),
                            kv("thread.id", any_value::Value::IntValue(9)),
                            kv("custom", s("x\"y")),
                        ],
                    ),
                    span(2, Some(1), 200, 300, vec![]),
                    span(3, Some(1), 300, 200, vec![]),
                ],
            }],
        }],
    }
}

fn strs(b: &RecordBatch, c: &str) -> Vec<String> {
    let a = b.column_by_name(c).unwrap().as_any().downcast_ref::<StringArray>().unwrap();
    (0..a.len()).map(|i| if a.is_null(i) { "NULL".into() } else { a.value(i).to_string() }).collect()
}

fn ints(b: &RecordBatch, c: &str) -> Vec<i64> {
    let a = b.column_by_name(c).unwrap().as_any().downcast_ref::<Int64Array>().unwrap();
    (0..a.len()).map(|i| if a.is_null(i) { -1 } else { a.value(i) }).collect()
}

#[test]
fn spans_map_to_rows_producers_and_rejects() {
    let body = request().encode_to_vec();
    let req = decode_traces(&body, false).unwrap();
    let mut p = Producers::new(5);
    let mut seq = SeqCounters::new();
    let mut d = Decoder::new(16);
    let o = d.traces(&req, &mut p, &mut seq);
    assert_eq!((o.accepted, o.rejected), (2, 1));
    assert!(o.first_error.unwrap().contains("spans[2]: endTimeUnixNano 200 before startTimeUnixNano 300"));
    let batches: FastMap<String, RecordBatch> = d.take().into_iter().collect();
    let span = &batches["span"];
    assert_eq!(strs(span, "span_id"), ["0101010101010101", "0202020202020202"]);
    assert_eq!(strs(span, "parent_span_id"), ["NULL", "0101010101010101"]);
    assert_eq!(strs(span, "kind"), ["server", "server"]);
    assert_eq!(strs(span, "status"), ["error", "error"]);
    assert_eq!(ints(span, "dur"), [400, 100]);
    assert_eq!(strs(span, "http_method"), ["GET", "NULL"]);
    assert_eq!(ints(span, "http_status_code"), [503, -1]);
    assert_eq!(strs(span, "attributes"), ["{\"custom\":\"x\\\"y\"}", "NULL"]);
    assert_eq!(batches["span_event"].num_rows(), 2);
    let rows = p.take_new();
    let kinds: Vec<(i32, Option<i32>, &str, &str)> =
        rows.iter().map(|r| (r.id, r.parent, r.kind.as_str(), r.name.as_str())).collect();
    assert_eq!(
        kinds,
        [
            (5, None, "service", "shop"),
            (6, Some(5), "host", "box"),
            (7, Some(6), "process", "pid 42"),
            (8, Some(7), "thread", "thread 9")
        ]
    );
    // the resource's other attributes are on its deepest producer
    assert!(rows[2].attrs.iter().any(|(k, _)| k == "telemetry.sdk.language"));
    // the same request again: no new producer
    d.traces(&req, &mut p, &mut seq);
    assert!(p.take_new().is_empty());
}

#[test]
fn json_and_protobuf_decode_alike() {
    let json = br#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"shop"}}]},
      "scopeSpans":[{"scope":{"name":"lib"},"spans":[{"traceId":"07070707070707070707070707070707","spanId":"0101010101010101",
      "name":"op1","kind":2,"startTimeUnixNano":"100","endTimeUnixNano":"500",
      "attributes":[{"key":"n","value":{"intValue":"3"}},{"key":"a","value":{"arrayValue":{"values":[{"boolValue":true}]}}}],
      "status":{"code":2}}]}]}]}"#;
    let req = decode_traces(json, true).unwrap();
    let sp = &req.resource_spans[0].scope_spans[0].spans[0];
    assert_eq!((sp.trace_id.clone(), sp.start_time_unix_nano, sp.kind), (vec![7; 16], 100, 2));
    let mut d = Decoder::new(4);
    let o = d.traces(&req, &mut Producers::new(0), &mut SeqCounters::new());
    assert_eq!(o.accepted, 1);
    let b = d.take();
    assert_eq!(strs(&b[0].1, "attributes"), ["{\"n\":3,\"a\":[true]}"]);
    let e = decode_traces(br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"xyz"}]}]}]}"#, true).unwrap_err();
    assert!(e.contains("resourceSpans[0].scopeSpans[0].spans[0].traceId: expected 32 hex digits"), "{e}");
    let e = decode_traces(b"{\"resourceSpans\":[", true).unwrap_err();
    assert!(e.contains("JSON at byte 18: expected a value"), "{e}");
    let deep = "[".repeat(10_000);
    assert!(decode_traces(format!("{{\"resourceSpans\":{deep}").as_bytes(), true).unwrap_err().contains("nesting"));
    assert!(decode_traces(b"\xff\xff\xff", false).unwrap_err().starts_with("not an OTLP protobuf"));
}

#[test]
fn answers_encode() {
    assert_eq!(response(Signal::Traces, 0, "", true), b"{}");
    assert!(response(Signal::Traces, 0, "", false).is_empty());
    let r = ExportResponse::decode(response(Signal::Logs, 2, "bad", false).as_slice()).unwrap();
    assert_eq!(r.partial_success.unwrap(), PartialSuccess { rejected: 2, error_message: "bad".into() });
    assert_eq!(
        String::from_utf8(response(Signal::Traces, 2, "a\"b", true)).unwrap(),
        r#"{"partialSuccess":{"rejectedSpans":"2","errorMessage":"a\"b"}}"#
    );
    assert_eq!(String::from_utf8(status(3, "no", true)).unwrap(), r#"{"code":3,"message":"no"}"#);
}

#[test]
fn the_file_parser_reads_json_lines_in_any_chunking() {
    let line = String::from_utf8(response(Signal::Traces, 0, "", true)).unwrap();
    assert_eq!(line, "{}");
    let one = r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"07070707070707070707070707070707","spanId":"0101010101010101","name":"a","startTimeUnixNano":"1","endTimeUnixNano":"2"}]}]}]}"#;
    let text = format!("{one}\n\nnot json\n{one}");
    for size in [1, 7, 64, text.len()] {
        let mut p = OtlpParser::new(false, 1000);
        for c in text.as_bytes().chunks(size) {
            p.feed(c);
        }
        p.finish();
        let rows: usize = p.take_batches(true).iter().map(|(_, b)| b.num_rows()).sum();
        assert_eq!(rows, 2, "chunks of {size}");
        assert_eq!(p.rejects.first.len(), 1);
        assert_eq!(p.rejects.first[0].line, 3, "chunks of {size}");
    }
}

#[test]
fn a_span_refused_for_its_event_time_stores_no_row() {
    let mut req = request();
    let spans = &mut req.resource_spans[0].scope_spans[0].spans;
    spans[1].events[0].time_unix_nano = u64::MAX; // past 2262
    let body = req.encode_to_vec();
    let (mut p, mut seq, mut d) = (Producers::new(0), SeqCounters::new(), Decoder::new(16));
    let o = d.request(Signal::Traces, &body, false, &mut p, &mut seq).unwrap();
    assert_eq!((o.accepted, o.rejected), (1, 2));
    assert_eq!(d.table_rows(), [1, 1, 0, 0, 0, 0]);
    let batches: FastMap<String, RecordBatch> = d.take().into_iter().collect();
    assert_eq!(strs(&batches["span"], "span_id"), ["0101010101010101"]);
    // an undecodable body buffers nothing
    assert!(d.request(Signal::Traces, b"\xff\xff", false, &mut p, &mut seq).is_err());
    assert_eq!(d.table_rows(), [0; 6]);
}
