use super::*;
use arrow_array::{Array, Float64Array, Int32Array, Int64Array, StringArray};

const SMALL: &str = include_str!("../../../tests/data/small.paje");

fn run(input: &[u8], chunk: usize, strict: bool) -> (PajeParser, Vec<(String, RecordBatch)>) {
    let mut p = PajeParser::new(strict, 3, 1_000_000_000);
    let mut out = Vec::new();
    for c in input.chunks(chunk.max(1)) {
        p.feed(c);
        out.extend(p.take_batches(false));
    }
    p.finish();
    out.extend(p.take_batches(true));
    (p, out)
}

fn concat(out: &[(String, RecordBatch)], t: &str) -> Vec<RecordBatch> {
    out.iter().filter(|(n, _)| n == t).map(|(_, b)| b.clone()).collect()
}

fn i64s(bs: &[RecordBatch], col: &str) -> Vec<Option<i64>> {
    let mut v = Vec::new();
    for b in bs {
        let a = b.column(b.schema().index_of(col).unwrap()).as_any().downcast_ref::<Int64Array>().unwrap();
        v.extend((0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i))));
    }
    v
}

fn strs(bs: &[RecordBatch], col: &str) -> Vec<Option<String>> {
    let mut v = Vec::new();
    for b in bs {
        let a = b.column(b.schema().index_of(col).unwrap()).as_any().downcast_ref::<StringArray>().unwrap();
        v.extend((0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i).to_string())));
    }
    v
}

#[test]
fn small_trace() {
    for chunk in [1, 13, 1 << 20] {
        let (p, out) = run(SMALL.as_bytes(), chunk, false);
        assert_eq!(p.rejected, 0, "{:?}", p.problems);
        let c = p.containers();
        assert_eq!(c.len(), 3);
        assert_eq!((c[0].kind.as_str(), c[0].name.as_str(), c[0].parent), ("Program", "program 1", None));
        assert_eq!((c[2].kind.as_str(), c[2].name.as_str(), c[2].parent), ("Thread", "thread 2", Some(0)));
        assert_eq!(c[2].destroyed, Some(5_000_000_000));
        // States: thread 1 Running [1, 3) with Computing pushed [1.5, 2); Waiting [3, end=6);
        // thread 2 Running [1, 4) then reset; Computing pushed at 4.5, closed by the destroy at 5.
        let st = concat(&out, "state");
        let mut rows: Vec<_> = i64s(&st, "ts")
            .into_iter()
            .zip(i64s(&st, "dur"))
            .zip(strs(&st, "value"))
            .zip(i64s(&st, "depth"))
            .zip(st.iter().flat_map(|b| {
                let a = b.column(1).as_any().downcast_ref::<Int32Array>().unwrap().clone();
                (0..a.len()).map(move |i| a.value(i)).collect::<Vec<_>>()
            }))
            .map(|((((ts, d), v), depth), p)| (p, ts.unwrap(), d.unwrap(), v.unwrap(), depth.unwrap()))
            .collect();
        rows.sort();
        let s = 1_000_000_000i64;
        assert_eq!(
            rows,
            vec![
                (1, s, 2 * s, "Running".to_string(), 0),
                (1, 3 * s / 2, s / 2, "Computing".to_string(), 1),
                (1, 3 * s, 3 * s, "Waiting".to_string(), 0),
                (2, s, 3 * s, "Running".to_string(), 0),
                (2, 9 * s / 2, s / 2, "Computing".to_string(), 0),
            ]
        );
        assert_eq!(strs(&st, "state_type")[0].as_deref(), Some("Thread State"));
        assert!(strs(&st, "extra").contains(&Some("{\"Reason\":\"inner loop\"}".to_string())));
        assert_eq!(p.stats.states_closed_at_end, 1);
        assert_eq!(p.stats.states_closed_by_destroy, 1);
        let ev = concat(&out, "event");
        assert_eq!(strs(&ev, "value"), vec![Some("SIGUSR1".into()), Some("done".into())]);
        let var = concat(&out, "variable");
        let vals: Vec<f64> = var
            .iter()
            .flat_map(|b| b.column(4).as_any().downcast_ref::<Float64Array>().unwrap().values().to_vec())
            .collect();
        assert_eq!(vals, vec![100.0, 150.5, 130.5]);
        assert_eq!(strs(&var, "op"), vec![Some("set".into()), Some("add".into()), Some("sub".into())]);
        let links = concat(&out, "link");
        assert_eq!(i64s(&links, "ts"), vec![Some(s), Some(2 * s)]);
        assert_eq!(i64s(&links, "dst_producer"), vec![Some(2), None]);
        assert_eq!(i64s(&links, "dst_ts"), vec![Some(7 * s / 4), None]);
        assert_eq!(strs(&concat(&out, "link_end"), "key"), vec![Some("k3".into())]);
        assert_eq!((p.stats.unmatched_link_start, p.stats.unmatched_link_end), (1, 1));
    }
}

#[test]
fn bad_lines() {
    let bad = SMALL
        .replace("20 1.25 ET_E C_T1 \"SIGUSR1\"", "20 soon ET_E C_T1 \"SIGUSR1\"")
        .replace("12 2.0 ST_S C_T1", "99 2.0");
    let (p, _) = run(bad.as_bytes(), 7, false);
    assert_eq!(p.rejected, 2);
    let lines: Vec<u64> = p.problems.iter().map(|p| p.line).collect();
    let want: Vec<u64> = bad
        .lines()
        .enumerate()
        .filter(|(_, l)| l.starts_with("99 ") || l.contains("soon"))
        .map(|(i, _)| i as u64 + 1)
        .collect();
    assert_eq!(lines, want);
    assert!(p.problems[0].reason.contains("no %EventDef"), "{:?}", p.problems);
    let (p, _) = run(bad.as_bytes(), 7, true);
    assert_eq!(p.fatal.unwrap().line, want[0]);
}

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/paje");

fn pajeng(name: &str) -> Vec<u8> {
    std::fs::read(format!("{DATA}/pajeng/{name}")).unwrap()
}

/// Regression: PajeNG's containers.trace names threads `t1`, `t2` under several
/// processes (aliases `1t1`, `2t1`, ...): every one is a container, in its parent, and the
/// trace (only containers) parses without a reject.
#[test]
fn pajeng_containers_unique_within_their_parent() {
    for chunk in [1, 100, 1 << 20] {
        let (p, out) = run(&pajeng("containers.trace"), chunk, true);
        assert_eq!((p.rejected, &p.fatal), (0, &None), "{:?}", p.problems);
        assert!(out.is_empty());
        let c = p.containers();
        let got: Vec<(&str, &str, Option<&str>, Option<i32>)> =
            c.iter().map(|c| (c.kind.as_str(), c.name.as_str(), c.alias.as_deref(), c.parent)).collect();
        assert_eq!(
            got,
            vec![
                ("ROOT", "root", Some("root"), None),
                ("PROCESS", "p1", Some("p1"), Some(0)),
                ("PROCESS", "p2", Some("p2"), Some(0)),
                ("PROCESS", "p3", Some("p3"), Some(0)),
                ("THREAD", "t1", Some("1t1"), Some(1)),
                ("THREAD", "t2", Some("1t2"), Some(1)),
                ("THREAD", "t3", Some("1t3"), Some(1)),
                ("THREAD", "t1", Some("2t1"), Some(2)),
                ("THREAD", "t2", Some("2t2"), Some(2)),
                ("THREAD", "t1", Some("3t1"), Some(3)),
            ]
        );
        assert_eq!((c[2].destroyed, c[0].destroyed), (Some(760_000_000), Some(1_340_000_000)));
        assert_eq!(p.stats.event_defs, 21);
    }
}

#[test]
fn a_name_may_equal_another_containers_alias_and_ambiguous_names_are_named() {
    let head = SMALL.split("\n6 ").next().unwrap().to_string();
    let defs: String = head.lines().filter(|l| l.starts_with('%') || l.starts_with('#')).collect::<Vec<_>>().join("\n");
    // Container type and state type lines of small.paje, then: a container aliased "a" named
    // "b", another aliased "x" named "a" (legal: names and aliases are different things), and
    // a name two containers share.
    let body = "\n0 CT_P 0 \"Program\"\n0 CT_T CT_P \"Thread\"\n\
                6 0 a CT_P 0 \"b\"\n6 0 x CT_P 0 \"a\"\n6 0 y CT_T a \"w\"\n6 0 z CT_T x \"w\"\n\
                7 1 CT_P a\n7 2 CT_T w\n";
    let (p, _) = run(format!("{defs}{body}").as_bytes(), 5, false);
    let c = p.containers();
    assert_eq!(c.len(), 4, "{:?}", p.problems);
    assert_eq!((c[1].name.as_str(), c[1].alias.as_deref()), ("a", Some("x")));
    // "a" is the identifier (alias) of the first container: that one is destroyed at 1 s.
    assert_eq!((c[0].destroyed, c[1].destroyed), (Some(1_000_000_000), None));
    assert_eq!(p.rejected, 1);
    assert!(p.problems[0].reason.contains("\"w\" is not unique"), "{:?}", p.problems);
}

/// PajeTraceFile: each thread's events in a file of its own, read where it is named.
#[test]
fn trace_file_includes_are_followed_relative_to_the_naming_file() {
    let path = format!("{DATA}/include/split.paje");
    for chunk in [3, 1 << 20] {
        let mut p = PajeParser::new(true, 100, 1_000_000_000);
        p.set_source(std::path::Path::new(&path));
        let mut out = Vec::new();
        for c in std::fs::read(&path).unwrap().chunks(chunk) {
            p.feed(c);
        }
        p.finish();
        out.extend(p.take_batches(true));
        assert_eq!((p.rejected, &p.fatal), (0, &None), "{:?}", p.problems);
        assert_eq!(p.stats.includes, 3);
        let st = concat(&out, "state");
        let mut rows: Vec<_> = i64s(&st, "ts").into_iter().zip(strs(&st, "value")).collect();
        rows.sort();
        let s = 1_000_000_000;
        let v = |x: &str| Some(x.to_string());
        assert_eq!(
            rows,
            vec![
                (Some(s), v("run")),
                (Some(3 * s / 2), v("run")),
                (Some(2 * s), v("wait")),
                (Some(5 * s / 2), v("io")),
                (Some(3 * s), v("done"))
            ]
        );
    }
}

/// PajeNG's multiple_files/root.trace names itself: reported as a cycle, not followed forever.
#[test]
fn a_trace_file_cycle_is_reported_with_its_line() {
    let path = format!("{DATA}/pajeng/multiple_files/root.trace");
    let data = std::fs::read(&path).unwrap();
    for strict in [false, true] {
        let mut p = PajeParser::new(strict, 100, 1_000_000_000);
        p.set_source(std::path::Path::new(&path));
        p.feed(&data);
        p.finish();
        let line = data.split(|&b| b == b'\n').position(|l| l.starts_with(b"17 ")).unwrap() as u64 + 1;
        let prob = if strict { p.fatal.clone().unwrap() } else { p.problems[0].clone() };
        assert_eq!(prob.line, line);
        assert!(prob.reason.contains("cycle"), "{prob:?}");
    }
}

#[test]
fn overlong_lines_are_rejected_with_their_number_in_any_chunking() {
    let long = format!("20 1.3 ET_E C_T1 \"{}\"", "x".repeat(300));
    let text = SMALL.replace("20 1.25 ET_E C_T1 \"SIGUSR1\"", &long);
    let want = text.lines().position(|l| l.len() > 200).unwrap() as u64 + 1;
    for chunk in [1, 64, 1 << 20] {
        let mut p = PajeParser::new(false, 100, 1_000_000_000);
        p.set_max_line(200);
        for c in text.as_bytes().chunks(chunk) {
            p.feed(c);
        }
        p.finish();
        assert_eq!(p.rejected, 1);
        assert_eq!(p.problems[0].line, want);
        assert!(p.problems[0].reason.starts_with("line longer than 200 bytes"));
    }
}

#[test]
fn binary_input_is_refused_whole_in_any_chunking() {
    let noise: Vec<u8> = (0..100_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
    for chunk in [1, 4095, 1 << 20] {
        let (p, out) = run(&noise, chunk, false);
        assert!(out.is_empty() && p.containers().is_empty());
        assert!(p.fatal.as_ref().unwrap().reason.starts_with("binary data"), "{:?}", p.fatal);
    }
}
