use super::records::timestamp_ns;
use super::*;
use arrow_array::{Array, BooleanArray, Int64Array, StringArray};

fn run(
    tool: Tool,
    pats: &[&str],
    spans: &[&str],
    input: &str,
    chunk: usize,
) -> (ProbeParser, Vec<(String, RecordBatch)>) {
    run_with(tool, pats, spans, input, chunk, |_| {})
}

/// [`run`] with the parser adjusted by `setup` first.
fn run_with(
    tool: Tool,
    pats: &[&str],
    spans: &[&str],
    input: &str,
    chunk: usize,
    setup: impl Fn(&mut ProbeParser),
) -> (ProbeParser, Vec<(String, RecordBatch)>) {
    let pats: Vec<String> = pats.iter().map(|s| s.to_string()).collect();
    let spans: Vec<String> = spans.iter().map(|s| s.to_string()).collect();
    let mut p = ProbeParser::new(tool, &pats, &spans, false, 4).unwrap();
    setup(&mut p);
    let mut out = Vec::new();
    for c in input.as_bytes().chunks(chunk.max(1)) {
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

fn ints(out: &[(String, RecordBatch)], t: &str, col: &str) -> Vec<Option<i64>> {
    let mut v = Vec::new();
    for (_, b) in out.iter().filter(|(n, _)| n == t) {
        let a = b.column(b.schema().index_of(col).unwrap()).as_any().downcast_ref::<Int64Array>().unwrap().clone();
        v.extend((0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i))));
    }
    v
}

const HYRISE_JSON: &str = r#"{"type": "attached_probes", "data": {"probes": 2}}
{"type": "printf", "data": "job_start 1000 11 0x7f00aa\n"}
{"type": "printf", "data": "job_start 1500 12 0x7f00bb\n"}
{"type": "printf", "data": "job_start 1600 11 0x7f00aa\n"}
{"type": "printf", "data": "job_end 2000 11 0x7f00aa\njob_end 2600 12 0x7f00bb\n"}
{"type": "printf", "data": "job_end 3000 "}
{"type": "printf", "data": "11 0x7f00aa\n"}
{"type": "printf", "data": "job_end 3100 13 0x7f00cc\n"}
{"type": "printf", "data": "job_start 4000 11 0x7f00dd\n"}
{"type": "printf", "data": "hello\n"}
{"type": "lost_events", "data": {"events": 3}}
{"type": "hist", "data": {"@usecs": [{"max": -1, "count": 1}, {"min": 0, "max": 0, "count": 2}, {"min": 2, "max": 3, "count": 5}, {"min": 4, "count": 1}]}}
{"type": "hist", "data": {"@bytes": {"sshd": [{"min": 1, "max": 1, "count": 1}], "bash": [{"min": 8, "max": 15, "count": 4}]}}}
{"type": "map", "data": {"@calls": {"read": 10, "write": 3}}}
{"type": "map", "data": {"@total": 42}}
{"type": "stats", "data": {"@s": {"count": 2, "average": 5, "total": 10}}}
{"type": "stats", "data": {"@ks": {"a": {"count": 1, "average": 7, "total": 7}}}}
"#;

const PATS: [&str; 2] = ["job_start:job_start {ts} {tid} {task:hex}", "job_end:job_end {ts} {tid} {task:hex}"];

#[test]
fn hyrise_jobs_pair_by_task_pointer() {
    for chunk in [1, 7, 4096] {
        let (mut p, out) = run(Tool::Bpftrace, &PATS, &["job=job_start,job_end,task"], HYRISE_JSON, chunk);
        assert_eq!(p.rejected, 0, "{:?}", p.problems);
        // The second job_start on 0x7f00aa (ts 1600) is closed by the first job_end (ts 2000),
        // the first (ts 1000) by the job_end at 3000: the most recent unmatched start.
        let mut ts_dur: Vec<_> = ints(&out, "job", "ts").into_iter().zip(ints(&out, "job", "dur")).collect();
        ts_dur.sort();
        assert_eq!(ts_dur, vec![(Some(1000), Some(2000)), (Some(1500), Some(1100)), (Some(1600), Some(400))]);
        assert_eq!(rows(&out, "job_start"), 1); // 0x7f00dd never ended
        assert_eq!(rows(&out, "job_end"), 1); // 0x7f00cc never started
        assert_eq!(ints(&out, "job_end", "task"), vec![Some(0x7f00cc)]);
        assert_eq!(rows(&out, "printf"), 1);
        let st = p.span_stats();
        assert_eq!(st[0].1, SpanStats { matched: 3, unmatched_begin: 1, unmatched_end: 1 });
        assert_eq!(p.counts.get("lost_events"), Some(&3));
        assert_eq!(p.counts.get("attached_probes"), Some(&2));
        let aggs = p.take_aggregates();
        let hist = &aggs.iter().find(|(n, _)| *n == "hist").unwrap().1;
        assert_eq!(hist.num_rows(), 6);
        let lo = hist.column(2).as_any().downcast_ref::<Int64Array>().unwrap();
        let hi = hist.column(3).as_any().downcast_ref::<Int64Array>().unwrap();
        assert!(lo.is_null(0) && hi.value(0) == 0);
        assert_eq!((lo.value(2), hi.value(2)), (2, 4));
        assert!(hi.is_null(3));
        let keys = hist.column(1).as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(keys.value(5), "bash");
        let map = &aggs.iter().find(|(n, _)| *n == "map").unwrap().1;
        assert_eq!(map.num_rows(), 3);
        let stats = &aggs.iter().find(|(n, _)| *n == "stats").unwrap().1;
        assert_eq!(stats.num_rows(), 2);
        // Producers: threads 11, 12, 13 (no pid), and the tool for the printf line.
        assert_eq!(p.producers().len(), 4);
    }
}

const BT_TEXT: &str = "Attaching 2 probes...
Tracing block I/O... Hit Ctrl-C to end.
^C
@usecs:
[0]                    3 |@                                                   |
[1]                    0 |                                                    |
[2, 4)                 1 |                                                    |
[4, 8)                31 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[1K, 2K)               2 |@@@                                                 |
[2K, ...)              1 |                                                    |

@lat[sshd]:
(..., 0)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[0, 10)                1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

@count[read]: 120
@count[write, 3]: 7
@name: hello
@st: count 4, average 25, total 100
";

#[test]
fn bpftrace_text_output() {
    let (mut p, out) = run(Tool::Bpftrace, &[], &[], BT_TEXT, 5);
    assert_eq!(p.rejected, 0, "{:?}", p.problems);
    assert_eq!(rows(&out, "printf"), 2); // the "Tracing ..." banner and ^C
    let aggs = p.take_aggregates();
    let hist = &aggs.iter().find(|(n, _)| *n == "hist").unwrap().1;
    assert_eq!(hist.num_rows(), 8);
    let lo = hist.column(2).as_any().downcast_ref::<Int64Array>().unwrap();
    let hi = hist.column(3).as_any().downcast_ref::<Int64Array>().unwrap();
    let count = hist.column(4).as_any().downcast_ref::<Int64Array>().unwrap();
    assert_eq!((lo.value(0), hi.value(0), count.value(0)), (0, 1, 3));
    assert_eq!((lo.value(4), hi.value(4)), (1024, 2048));
    assert!(hi.is_null(5));
    assert!(lo.is_null(6));
    let map = &aggs.iter().find(|(n, _)| *n == "map").unwrap().1;
    assert_eq!(map.num_rows(), 3);
    let keys = map.column(1).as_any().downcast_ref::<StringArray>().unwrap();
    assert_eq!(keys.value(1), "write, 3");
    let text = map.column(3).as_any().downcast_ref::<StringArray>().unwrap();
    assert_eq!(text.value(2), "hello");
    let stats = &aggs.iter().find(|(n, _)| *n == "stats").unwrap().1;
    assert_eq!(stats.column(4).as_any().downcast_ref::<Int64Array>().unwrap().value(0), 100);
}

const STAP: &str = "job durations (us):
value |-------------------------------------------------- count
    0 |                                                    0
    1 |                                                    0
    2 |@@                                                  2
    4 |@@@@@@@@@@@@@                                      13
    8 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@ 50
   16 |                                                    0
   32 |                                                    0
      ~
 1024 |                                                    0
 2048 |@                                                   1
 4096 |                                                    0
 8192 |                                                    0

value |-------------------------------------------------- count
    0 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@ 1650
  200 |                                                    8
  400 |                                                    0
  600 |                                                    0
      ~
 1200 |                                                    0
 1400 |                                                    1
 1600 |                                                    0
 1800 |                                                    0
 >2000|                                                    3
";

#[test]
fn systemtap_tables_with_elision() {
    let (mut p, out) = run(Tool::Stap, &[], &[], STAP, 3);
    assert_eq!(p.rejected, 0, "{:?}", p.problems);
    assert_eq!(rows(&out, "printf"), 1);
    let aggs = p.take_aggregates();
    let hist = &aggs.iter().find(|(n, _)| *n == "hist").unwrap().1;
    assert_eq!(hist.num_rows(), 12 + 10);
    let map = hist.column(0).as_any().downcast_ref::<StringArray>().unwrap();
    assert_eq!(map.value(0), "job durations (us)");
    assert_eq!(map.value(12), "hist2");
    let lo = hist.column(2).as_any().downcast_ref::<Int64Array>().unwrap();
    let hi = hist.column(3).as_any().downcast_ref::<Int64Array>().unwrap();
    let count = hist.column(4).as_any().downcast_ref::<Int64Array>().unwrap();
    let elided = hist.column(5).as_any().downcast_ref::<BooleanArray>().unwrap();
    // Log: 8 covers [8, 16); the ~ row covers [64, 1024) with no samples.
    assert_eq!((lo.value(4), hi.value(4), count.value(4)), (8, 16, 50));
    assert!(elided.value(7));
    assert_eq!((lo.value(7), hi.value(7), count.value(7)), (64, 1024, 0));
    assert_eq!(count.iter().take(12).map(|c| c.unwrap()).sum::<i64>(), 66);
    // Linear, width 200: the ~ row covers [800, 1200); >2000 is open above.
    assert_eq!((lo.value(12), hi.value(12)), (0, 200));
    assert_eq!((lo.value(16), hi.value(16)), (800, 1200));
    assert_eq!((lo.value(21), count.value(21)), (2000, 3));
    assert!(hi.is_null(21));
}

#[test]
fn patterns_compile_and_match() {
    let p = Pattern::compile("io:{comm} read {bytes:int:B} bytes in {lat:float:us} us at {ts:us}").unwrap();
    let mut out = Vec::new();
    assert!(p.matches(b"  bash read 512 bytes in 1.5 us at 12.25  ", &mut out));
    assert_eq!(out, vec![&b"bash"[..], b"512", b"1.5", b"12.25"]);
    assert!(!p.matches(b"bash read x bytes in 1.5 us at 12.25", &mut out));
    assert_eq!(p.fields[1].unit, "B");
    assert!(Pattern::compile("bad name:x").is_err());
    assert!(Pattern::compile("x:{ts:int}").is_err());
    assert!(Pattern::compile("x:{a} {a}").is_err());
    assert!(SpanDef::parse("job=a,b").is_err());
    assert_eq!(parse_field(b"0xffffffffffffffff", FieldType::Hex), Ok(FVal::Int(-1)));
    assert!(parse_field(b"99999999999999999999", FieldType::Int).is_err());
}

#[test]
fn bad_lines_are_rejected_with_their_number() {
    let input = "{\"type\": \"printf\", \"data\": \"job_start 1 1 0x1\\n\"}\n{\"type\": broken\n{\"type\": \"printf\", \"data\": \"job_start 99999999999999999999 1 0x1\\n\"}\n";
    let (p, out) = run(Tool::Bpftrace, &PATS, &[], input, 2);
    assert_eq!(rows(&out, "job_start"), 1);
    assert_eq!(p.rejected, 2);
    assert_eq!(p.problems[0].line, 2);
    assert_eq!(p.problems[1].line, 3);
    assert!(p.problems[1].reason.contains("field ts"), "{:?}", p.problems);
}

/// Real `bpftrace -f json` output (bpftrace 0.17.0, Debian 12; the command is in
/// tests/data/bpftrace/README.md): every aggregate kind, print() values, an avg() map and
/// an emptied histogram.
const AGGREGATES: &str = include_str!("../../../tests/data/bpftrace/aggregates.json");

fn agg_rows(p: &mut ProbeParser, kind: &str) -> Vec<Vec<String>> {
    let aggs = p.take_aggregates();
    let Some((_, b)) = aggs.into_iter().find(|(n, _)| *n == kind) else { return Vec::new() };
    (0..b.num_rows())
        .map(|i| {
            b.columns()
                .iter()
                .map(|c| {
                    if c.is_null(i) {
                        return String::new();
                    }
                    if let Some(x) = c.as_any().downcast_ref::<Int64Array>() {
                        return x.value(i).to_string();
                    }
                    if let Some(x) = c.as_any().downcast_ref::<StringArray>() {
                        return x.value(i).to_string();
                    }
                    c.as_any().downcast_ref::<BooleanArray>().unwrap().value(i).to_string()
                })
                .collect()
        })
        .collect()
}

/// Regression: avg() maps come as `stats` records of numbers (`{"@a": {"x": 10}}`,
/// `{"@avg1": 7}`) and were dropped (an input of only those: "no events", exit 2); a `value`
/// record of a tuple or struct was one fake map per key; `{"@z": []}` was nothing at all.
#[test]
fn real_bpftrace_aggregates_are_all_kept() {
    for chunk in [1, 37, 1 << 20] {
        let (mut p, out) = run(Tool::Bpftrace, &[], &[], AGGREGATES, chunk);
        assert_eq!((p.rejected, &p.fatal), (0, &None), "{:?}", p.problems);
        assert!(out.is_empty());
        assert_eq!(p.empty_aggregates(), &[("hist", "@z".to_string())]);
        let stats = agg_rows(&mut p, "stats");
        let cols = |r: &Vec<String>| r[..5].join(" ");
        assert_eq!(
            stats.iter().map(cols).collect::<Vec<_>>(),
            ["@a x  10 ", "@a y  30 ", "@avg1   7 ", "@ks curl 1 2 2", "@ks zsh 1 10 10", "@s  2 6 12",]
        );
        let (mut p, _) = run(Tool::Bpftrace, &[], &[], AGGREGATES, chunk);
        let map = agg_rows(&mut p, "map");
        let values: Vec<_> = map.iter().filter(|r| r[0] == "value").map(|r| (r[2].clone(), r[3].clone())).collect();
        assert_eq!(
            values,
            [("".into(), "[1,\"two\"]".into()), ("".into(), "bpftrace".into()), ("42".to_string(), "".to_string())]
        );
        assert!(map.iter().any(|r| r[0] == "@tup" && r[3] == "[1,2,\"string\"]"));
        let (mut p, _) = run(Tool::Bpftrace, &[], &[], AGGREGATES, chunk);
        let hist = agg_rows(&mut p, "hist");
        // lhist's last bucket is open above; @kh is keyed.
        assert!(hist.iter().any(|r| r[0] == "@lh" && r[2] == "100" && r[3].is_empty() && r[4] == "1"));
        assert_eq!(hist.iter().filter(|r| r[0] == "@kh").map(|r| r[1].as_str()).collect::<Vec<_>>(), ["bash", "curl"]);
    }
}

/// A `value` record whose data is an object (a struct print()) is one value, not a map per field.
#[test]
fn a_struct_value_is_one_value() {
    let (mut p, _) =
        run(Tool::Bpftrace, &[], &[], "{\"type\": \"value\", \"data\": {\"y\": {\"m\": [2]}, \"a\": {\"n\": 3}}}\n", 4);
    let map = agg_rows(&mut p, "map");
    assert_eq!(map.len(), 1);
    assert_eq!((map[0][0].as_str(), map[0][3].as_str()), ("value", "{\"y\": {\"m\": [2]}, \"a\": {\"n\": 3}}"));
}

/// tseries() maps as bpftrace's JSON writer prints them (src/output/json.cpp: one object per
/// interval, `interval_start` the printed UTC time point; an earlier version left out the
/// commas between points): one `tseries` counter row per interval, at its start.
#[test]
fn tseries_records_become_a_time_series() {
    let input = "{\"type\": \"tseries\", \"data\": {\"@a\": [{\"interval_start\":\"2025-03-01 12:00:00.250000000\",\"value\":9},{\"interval_start\":\"2025-03-01 12:00:01.250000000\",\"value\":4}]}}\n\
                 {\"type\": \"tseries\", \"data\": {\"@k\": {\"cpu0\": [{\"interval_start\":\"2025-03-01 12:00:00\",\"value\":1.5}{\"interval_start\":\"2025-03-01 12:00:01\",\"value\":2}]}}}\n";
    for chunk in [1, 50, 1 << 20] {
        let (p, out) = run(Tool::Bpftrace, &[], &[], input, chunk);
        assert_eq!((p.rejected, &p.fatal), (0, &None), "{:?}", p.problems);
        let ts = ints(&out, "tseries", "ts");
        let base = 1_740_830_400_000_000_000i64; // 2025-03-01T12:00:00Z
        assert_eq!(ts, [Some(base + 250_000_000), Some(base + 1_250_000_000), Some(base), Some(base + 1_000_000_000)]);
        let vals: Vec<f64> = out
            .iter()
            .filter(|(n, _)| n == "tseries")
            .flat_map(|(_, b)| {
                let a = b.column(b.schema().index_of("value").unwrap()).clone();
                let f = a.as_any().downcast_ref::<arrow_array::Float64Array>().unwrap().clone();
                f.values().to_vec()
            })
            .collect();
        assert_eq!(vals, [9.0, 4.0, 1.5, 2.0]);
    }
    assert_eq!(timestamp_ns(b"1970-01-01 00:00:01.5"), Some(1_500_000_000));
    assert_eq!(timestamp_ns(b"12:00:00"), Some(43_200_000_000_000));
    assert_eq!(timestamp_ns(b"2024-02-29 00:00:00"), Some(1_709_164_800_000_000_000));
}

/// Pretty-printed JSON (as bpftrace's own test files are) would make a printf event of every
/// line: refused whole, strict or not, naming the line.
#[test]
fn pretty_printed_json_is_refused() {
    let pretty = "{\"type\": \"attached_probes\", \"data\": {\"probes\": 1}}\n{\n  \"type\": \"tseries\",\n  \"data\": {\n    \"@a\": []\n  }\n}\n";
    for strict in [false, true] {
        let pats: Vec<String> = Vec::new();
        let mut p = ProbeParser::new(Tool::Bpftrace, &pats, &[], strict, 10).unwrap();
        p.feed(pretty.as_bytes());
        p.finish();
        let f = p.fatal.clone().unwrap();
        assert_eq!(f.line, 2);
        assert!(f.reason.contains("pretty-printed"), "{f:?}");
        assert!(p.take_batches(true).is_empty());
    }
    // A last record cut short (bpftrace killed while writing) is a bad line, not a refusal.
    let cut = "{\"type\": \"printf\", \"data\": \"job_start 1 1 0x1\\n\"}\n{\"type\": \"printf\", \"da\n\n";
    let (p, out) = run(Tool::Bpftrace, &PATS, &[], cut, 3);
    assert_eq!((rows(&out, "job_start"), p.fatal.is_none()), (1, true));
    assert_eq!(
        p.problems.iter().map(|p| (p.line, p.reason.as_str())).collect::<Vec<_>>(),
        [(2, "truncated JSON record at the end of the input")]
    );
}

/// Regression: 1 MB of random bytes became 4,047 printf events.
#[test]
fn binary_input_is_refused_whole_in_any_chunking() {
    let noise: Vec<u8> = (0..1_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 9) as u8).collect();
    for tool in [Tool::Bpftrace, Tool::Stap] {
        for chunk in [1000, 4096, 1 << 20] {
            let mut p = ProbeParser::new(tool, &[], &[], false, 64).unwrap();
            let mut rows = 0;
            for c in noise.chunks(chunk) {
                p.feed(c);
                rows += p.take_batches(false).iter().map(|(_, b)| b.num_rows()).sum::<usize>();
            }
            p.finish();
            rows += p.take_batches(true).iter().map(|(_, b)| b.num_rows()).sum::<usize>();
            assert_eq!(rows, 0);
            assert!(p.fatal.as_ref().unwrap().reason.starts_with("binary data"), "{:?}", p.fatal);
        }
    }
}

/// Regression: `--strict` did nothing for SystemTap output because nothing was ever a bad
/// line: a line that starts like a --pattern without matching it, and a broken histogram
/// row, became printf text. They are rejected (and stop a strict parse) with their number.
#[test]
fn stap_lines_that_look_like_something_and_are_not_are_rejected() {
    let input = "job_start 5 101 0x1\njob_start soon 101 0x2\nhist:\nvalue |------ count\n    1 |@@ 2\n    2 |@@ x\n\njob_started fine\n";
    let pats = ["job_start:job_start {ts} {tid} {task:hex}"];
    let (p, out) = run(Tool::Stap, &pats, &[], input, 3);
    assert_eq!(rows(&out, "job_start"), 1);
    assert_eq!(rows(&out, "printf"), 2); // "hist:" is a title; "job_started fine" is text
    let got: Vec<(u64, &str)> = p.problems.iter().map(|p| (p.line, p.reason.as_str())).collect();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0].0, 2);
    assert!(got[0].1.contains("starts like --pattern job_start"), "{got:?}");
    assert_eq!(got[1].0, 6);
    assert!(got[1].1.starts_with("histogram row"), "{got:?}");
    let pats: Vec<String> = pats.iter().map(|s| s.to_string()).collect();
    let mut p = ProbeParser::new(Tool::Stap, &pats, &[], true, 4).unwrap();
    p.feed(input.as_bytes());
    p.finish();
    assert_eq!(p.fatal.unwrap().line, 2);
}

#[test]
fn overlong_lines_are_rejected_with_their_number_in_any_chunking() {
    let input = format!("job_start 1 1 0x1\n{}\njob_start 2 1 0x2\n", "y".repeat(5000));
    for chunk in [1, 777, 1 << 20] {
        let (p, out) = run_with(Tool::Bpftrace, &PATS, &[], &input, chunk, |p| p.set_max_line(1000));
        assert_eq!((rows(&out, "job_start"), rows(&out, "printf")), (2, 0));
        assert_eq!(p.problems.iter().map(|p| p.line).collect::<Vec<_>>(), [2]);
        assert!(p.problems[0].reason.starts_with("line longer than 1000 bytes"));
    }
}
