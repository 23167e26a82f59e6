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
