use super::*;
use arrow_array::{Array, BooleanArray, Float64Array, Int32Array, Int64Array, StringArray};

fn parse_chunks(input: &[u8], chunk: usize, strict: bool) -> (ChromeParser, Vec<(String, RecordBatch)>) {
    parse_with(input, chunk, Options { strict, batch_rows: 3, ..Options::default() })
}

fn parse_with(input: &[u8], chunk: usize, opts: Options) -> (ChromeParser, Vec<(String, RecordBatch)>) {
    let mut p = ChromeParser::new(opts);
    let mut out = Vec::new();
    for c in input.chunks(chunk.max(1)) {
        p.feed(c);
        out.extend(p.take_batches(false));
    }
    p.finish();
    out.extend(p.take_batches(true));
    (p, out)
}

fn rows(out: &[(String, RecordBatch)], t: &str) -> usize {
    out.iter().filter(|(n, _)| n == t).map(|(_, b)| b.num_rows()).sum()
}

fn col<'a, T: 'static>(b: &'a RecordBatch, name: &str) -> &'a T {
    b.column(b.schema().index_of(name).unwrap()).as_any().downcast_ref::<T>().unwrap()
}

fn one(out: &[(String, RecordBatch)], t: &str) -> RecordBatch {
    let bs: Vec<_> = out.iter().filter(|(n, _)| n == t).map(|(_, b)| b.clone()).collect();
    assert_eq!(bs.len(), 1, "{t}: {} batches", bs.len());
    bs.into_iter().next().unwrap()
}

const SAMPLE: &str = r#"{"displayTimeUnit": "ns", "traceEvents": [
{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "browser"}},
{"name": "thread_name", "ph": "M", "pid": 1, "tid": 7, "args": {"name": "main"}},
{"name": "load", "cat": "net", "ph": "X", "ts": 10.5, "dur": 2.25, "pid": 1, "tid": 7, "args": {"url": "a", "bytes": 100, "ok": true, "t": 1.5, "nested": {"x": [1]}}},
{"name": "outer", "ph": "B", "ts": 20, "pid": 1, "tid": 7, "args": {"depth": 0}},
{"name": "inner", "ph": "B", "ts": 21, "pid": 1, "tid": 7},
{"ph": "E", "ts": 22, "pid": 1, "tid": 7, "args": {"result": "r"}},
{"ph": "E", "ts": 30, "pid": 1, "tid": 7},
{"ph": "E", "ts": 31, "pid": 1, "tid": 7},
{"name": "mark", "ph": "i", "s": "g", "ts": 40, "pid": 1, "tid": 7},
{"name": "mem", "ph": "C", "ts": 50, "pid": 1, "args": {"heap": 10, "stack": 2.5, "label": "x"}},
{"name": "req", "cat": "io", "ph": "b", "id": "0x1", "ts": 60, "pid": 1, "tid": 7},
{"name": "req", "cat": "io", "ph": "e", "id": "0x1", "ts": 65, "pid": 2, "tid": 9},
{"name": "flow", "cat": "f", "ph": "s", "id": 5, "ts": 70, "pid": 1, "tid": 7},
{"name": "flow", "cat": "f", "ph": "f", "bp": "e", "id": 5, "ts": 75, "pid": 2, "tid": 9},
{"name": "open", "ph": "B", "ts": 80, "pid": 2, "tid": 9}
], "otherData": {"version": "1"}}"#;

#[test]
fn sample_trace_every_phase() {
    let (p, out) = parse_chunks(SAMPLE.as_bytes(), 1 << 20, false);
    assert_eq!(p.rejected, 0, "{:?}", p.problems);
    assert_eq!(rows(&out, "slice"), 3);
    assert_eq!(rows(&out, "slice_end"), 1);
    assert_eq!(rows(&out, "slice_begin"), 1);
    assert_eq!(rows(&out, "instant"), 1);
    assert_eq!(rows(&out, "counter"), 2);
    assert_eq!(rows(&out, "async_slice"), 1);
    assert_eq!(rows(&out, "flow"), 1);
    assert_eq!(p.stats.metadata, 2);
    assert_eq!(p.stats.unmatched_end, 1);
    assert_eq!(p.stats.unmatched_begin, 1);
    assert_eq!(p.stats.skipped_counter_args, 1);
    assert_eq!(
        p.metadata,
        vec![("displayTimeUnit".into(), "\"ns\"".into()), ("otherData".into(), "{\"version\": \"1\"}".into())]
    );

    let s = one(&out, "slice");
    // Rows come out in completion order: X, inner (B/E), outer (B/E).
    assert_eq!(col::<Int64Array>(&s, "ts").values(), &[10_500, 21_000, 20_000]);
    assert_eq!(col::<Int64Array>(&s, "dur").values(), &[2_250, 1_000, 10_000]);
    assert_eq!(col::<Int64Array>(&s, "seq").values(), &[0, 2, 1]);
    let names = col::<StringArray>(&s, "name");
    assert_eq!((names.value(0), names.value(1), names.value(2)), ("load", "inner", "outer"));
    let phase = col::<StringArray>(&s, "phase");
    assert_eq!((phase.value(0), phase.value(1)), ("X", "B"));
    assert_eq!(col::<StringArray>(&s, "arg_url").value(0), "a");
    assert_eq!(col::<Int64Array>(&s, "arg_bytes").value(0), 100);
    assert!(col::<BooleanArray>(&s, "arg_ok").value(0));
    assert_eq!(col::<Float64Array>(&s, "arg_t").value(0), 1.5);
    assert_eq!(col::<StringArray>(&s, "args").value(0), r#"{"nested":{"x": [1]}}"#);
    assert_eq!(col::<Int64Array>(&s, "arg_depth").value(2), 0);
    assert_eq!(col::<StringArray>(&s, "end_arg_result").value(1), "r");
    assert!(col::<StringArray>(&s, "end_arg_result").is_null(2));

    let c = one(&out, "counter");
    assert_eq!(col::<StringArray>(&c, "series").value(1), "stack");
    assert_eq!(col::<Float64Array>(&c, "value").values(), &[10.0, 2.5]);
    // The counter has no tid: it belongs to the process.
    assert_eq!(col::<Int32Array>(&c, "producer").value(0), 0);

    let a = one(&out, "async_slice");
    assert_eq!(col::<Int64Array>(&a, "dur").value(0), 5_000);
    assert_eq!(col::<StringArray>(&a, "id").value(0), "0x1");

    let f = one(&out, "flow");
    assert_eq!(col::<Int64Array>(&f, "dst_ts").value(0), 75_000);
    assert_eq!(col::<StringArray>(&f, "bp").value(0), "e");

    let prods = p.producers();
    assert_eq!(prods.len(), 4);
    assert_eq!(prods[0].name.as_deref(), Some("browser"));
    assert_eq!((prods[1].kind, prods[1].parent, prods[1].name.as_deref()), ("thread", Some(0), Some("main")));
    assert_eq!(prods[3].tid.as_deref(), Some("9"));
}

#[test]
fn any_chunking_gives_the_same_rows() {
    let (_, whole) = parse_chunks(SAMPLE.as_bytes(), 1 << 20, false);
    for chunk in [1, 2, 3, 7, 64] {
        let (p, out) = parse_chunks(SAMPLE.as_bytes(), chunk, false);
        assert_eq!(p.rejected, 0);
        for t in ["slice", "counter", "instant", "flow", "async_slice", "slice_begin", "slice_end"] {
            assert_eq!(rows(&out, t), rows(&whole, t), "chunk {chunk} type {t}");
        }
        assert_eq!(p.metadata.len(), 2);
    }
}

#[test]
fn array_form_without_closing_bracket() {
    let input = b"[{\"name\":\"a\",\"ph\":\"X\",\"ts\":1,\"dur\":1,\"pid\":1,\"tid\":1},\n{\"name\":\"b\",\"ph\":\"i\",\"ts\":2,\"pid\":1,\"tid\":1},\n";
    let (p, out) = parse_chunks(input, 5, false);
    assert_eq!(p.rejected, 0);
    assert_eq!(rows(&out, "slice") + rows(&out, "instant"), 2);
}

#[test]
fn bad_records_are_skipped_with_their_line() {
    let input = b"[\n{\"name\":\"a\",\"ph\":\"X\",\"ts\":1,\"dur\":1,\"pid\":1,\"tid\":1},\n{\"name\":\"b\",\"ph\":\"X\",\"ts\":\"soon\",\"pid\":1},\n{\"name\": broken\n{\"ph\":\"i\",\"ts\":3,\"pid\":1},\n{\"ph\":\"i\",\"ts\":4,\"pid\":1,\"tid\":{}},\n{\"name\":\"last\",\"ph\":\"i\",\"ts\":5,\"pid\":1}]";
    let (p, out) = parse_chunks(input, 4, false);
    assert_eq!(p.rejected, 3);
    assert_eq!(p.problems[0].line, 3);
    assert!(p.problems[0].reason.contains("\"ts\" is not a number"), "{:?}", p.problems);
    assert_eq!(p.problems[1].line, 4);
    assert!(p.problems[1].reason.contains("invalid JSON"));
    assert_eq!(p.problems[2].line, 6);
    assert_eq!(rows(&out, "slice"), 1);
    assert_eq!(rows(&out, "instant"), 2);

    let (p, _) = parse_chunks(input, 4, true);
    let f = p.fatal.unwrap();
    assert_eq!(f.line, 3);
}

#[test]
fn garbage_and_truncation() {
    let (p, out) = parse_chunks(b"strace: hello", 3, false);
    assert_eq!(p.rejected, 1);
    assert!(out.is_empty());
    let (p, out) = parse_chunks(b"[{\"ph\":\"i\",\"ts\":1,\"pid\":1},{\"ph\":\"i\",\"ts\"", 3, false);
    assert_eq!(rows(&out, "instant"), 1);
    assert_eq!(p.rejected, 1);
    assert!(p.problems[0].reason.contains("truncated"), "{:?}", p.problems);
    let (p, _) = parse_chunks(b"", 3, false);
    assert_eq!(p.rejected, 1);
}

#[test]
fn late_columns_and_type_conflicts() {
    let input = br#"[{"ph":"i","ts":1,"pid":1,"args":{"v":1}},{"ph":"i","ts":2,"pid":1,"args":{"v":"x","w":2.5,"a.b":1}},{"ph":"i","ts":3,"pid":1,"args":{"a_b":7}}]"#;
    let mut p = ChromeParser::new(Options::default());
    p.feed(input);
    p.finish();
    let cols = p.take_new_columns();
    let names: Vec<_> = cols.iter().map(|c| (c.1.as_str(), c.3.as_str())).collect();
    assert_eq!(names, vec![("arg_v", "v"), ("arg_w", "w"), ("arg_a_b", "a.b")]);
    let out = p.take_batches(true);
    let b = one(&out, "instant");
    assert_eq!(col::<StringArray>(&b, "args").value(1), r#"{"v":"x"}"#);
    // "a_b" would collide with the column of "a.b": it stays in the text.
    assert_eq!(col::<StringArray>(&b, "args").value(2), r#"{"a_b":7}"#);
}

#[test]
fn keys_that_differ_only_in_case_take_one_column() {
    // SQL names ignore case: a column `arg_URL` beside `arg_url` read `arg_url`'s values.
    let input = br#"[{"ph":"i","ts":1,"pid":1,"args":{"url":"x","URL":"y"}}]"#;
    let mut p = ChromeParser::new(Options::default());
    p.feed(input);
    p.finish();
    let names: Vec<_> = p.take_new_columns().iter().map(|c| c.1.clone()).collect();
    assert_eq!(names, vec!["arg_url"]);
    let b = one(&p.take_batches(true), "instant");
    assert_eq!(col::<StringArray>(&b, "arg_url").value(0), "x");
    assert_eq!(col::<StringArray>(&b, "args").value(0), r#"{"URL":"y"}"#);
}

#[test]
fn declared_columns_keep_their_type() {
    let mut p = ChromeParser::new(Options::default());
    assert!(p.declare("instant", "arg_v", PType::Float, "v", false));
    p.feed(br#"[{"ph":"i","ts":1,"pid":1,"args":{"v":1}}]"#);
    p.finish();
    assert!(p.take_new_columns().is_empty());
    let b = one(&p.take_batches(true), "instant");
    assert_eq!(col::<Float64Array>(&b, "arg_v").value(0), 1.0);
}

#[test]
fn huge_line_and_deep_nesting() {
    let mut s = String::from("[{\"ph\":\"i\",\"ts\":1,\"pid\":1,\"args\":{\"big\":\"");
    s.push_str(&"x".repeat(1 << 20));
    s.push_str("\",\"deep\":");
    s.push_str(&"[".repeat(100_000));
    s.push_str(&"]".repeat(100_000));
    s.push_str("}}]");
    let (p, out) = parse_chunks(s.as_bytes(), 4096, false);
    assert_eq!(p.rejected, 0);
    assert_eq!(rows(&out, "instant"), 1);
}

#[test]
fn write_us_is_exact() {
    for (ns, s) in [(1_234_567, "1234.567"), (7_000, "7"), (-1, "-0.001"), (1_500, "1.5"), (0, "0")] {
        let mut out = Vec::new();
        write_us(&mut out, ns);
        assert_eq!(String::from_utf8(out).unwrap(), s);
    }
}

/// Regression: a 50 MB line was stored as one event. An event record longer than
/// `max_record` is rejected with its line and skipped as it streams by; the rest imports.
#[test]
fn an_event_longer_than_the_limit_is_rejected_and_skipped_in_any_chunking() {
    let big = format!(
        "{{\"name\": \"huge\", \"ph\": \"i\", \"ts\": 2, \"pid\": 1, \"tid\": 1, \"args\": {{\"blob\": \"{}\", \"n\": [{{\"a\": \"}}]\"}}]}}}}",
        "z".repeat(5000)
    );
    let input = format!(
        "[\n{{\"name\": \"a\", \"ph\": \"i\", \"ts\": 1, \"pid\": 1, \"tid\": 1}},\n{big},\n{{\"name\": \"b\", \"ph\": \"i\", \"ts\": 3, \"pid\": 1, \"tid\": 1}}\n]"
    );
    for chunk in [1, 333, 4096, 1 << 20] {
        let (p, out) =
            parse_with(input.as_bytes(), chunk, Options { max_record: 1000, batch_rows: 3, ..Options::default() });
        assert_eq!(rows(&out, "instant"), 2, "chunk {chunk}: {:?}", p.problems);
        assert_eq!(p.problems.len(), 1);
        assert_eq!((p.problems[0].line, p.problems[0].reason.as_str()), (3, "event longer than 1000 bytes (skipped)"));
        assert!(p.buf.capacity() < 1000 + 2 * chunk.max(4096) + 8192, "buffered {}", p.buf.capacity());
    }
}
