use super::*;
use arrow_array::{Array, BooleanArray, Int64Array, StringArray};

fn run(
    tool: Tool,
    pats: &[&str],
    spans: &[&str],
    input: &str,
    chunk: usize,
) -> (ProbeParser, Vec<(String, RecordBatch)>) {
    let pats: Vec<String> = pats.iter().map(|s| s.to_string()).collect();
    let spans: Vec<String> = spans.iter().map(|s| s.to_string()).collect();
    let mut p = ProbeParser::new(tool, &pats, &spans, false, 4).unwrap();
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
