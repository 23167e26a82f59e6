//! Invariants of the TOD generator, checked on whole runs replayed event by event.

use super::*;
use arrow_schema::DataType;

/// One event of any type, flattened for checking.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Ev {
    ts: i64,
    producer: i32,
    seq: i64,
    parent: i64,
    /// Index into EVENT_TYPES.
    kind: usize,
    /// Type-specific columns, in schema order.
    cols: Vec<i64>,
}

fn flatten(b: &TodBatch, out: &mut Vec<Ev>) {
    let fw = &b.field_write;
    for i in 0..fw.ts.len() {
        out.push(Ev {
            ts: fw.ts[i],
            producer: fw.producer[i],
            seq: fw.seq[i],
            parent: fw.parent_seq[i],
            kind: 0,
            cols: vec![fw.field_id[i], fw.target[i], fw.value[i]],
        });
    }
    let vw = &b.var_write;
    for i in 0..vw.ts.len() {
        out.push(Ev {
            ts: vw.ts[i],
            producer: vw.producer[i],
            seq: vw.seq[i],
            parent: vw.parent_seq[i],
            kind: 1,
            cols: vec![vw.var_id[i], vw.value[i]],
        });
    }
    let be = &b.behavior_enter;
    for i in 0..be.ts.len() {
        let mut cols = vec![be.behavior_id[i], be.target[i], be.arg_count[i]];
        cols.extend(be.args.iter().map(|a| a[i]));
        out.push(Ev {
            ts: be.ts[i],
            producer: be.producer[i],
            seq: be.seq[i],
            parent: be.parent_seq[i],
            kind: 2,
            cols,
        });
    }
    let bx = &b.behavior_exit;
    for i in 0..bx.ts.len() {
        out.push(Ev {
            ts: bx.ts[i],
            producer: bx.producer[i],
            seq: bx.seq[i],
            parent: bx.parent_seq[i],
            kind: 3,
            cols: vec![bx.behavior_id[i], bx.ret_value[i]],
        });
    }
}

/// Runs `cfg` to exhaustion in chunks of `chunk` events; returns all events in ts order.
fn run(cfg: &TodConfig, chunk: usize) -> Vec<Ev> {
    let mut g = TodGenerator::new(cfg.clone()).unwrap();
    let mut all = Vec::new();
    loop {
        let mut b = TodBatch::with_capacity(chunk.min(1 << 16));
        let n = g.fill(chunk, &mut b);
        assert!(n <= chunk, "fill returned {n} > {chunk}");
        assert_eq!(n, b.len());
        if n == 0 {
            break;
        }
        let before = all.len();
        flatten(&b, &mut all);
        all[before..].sort_by_key(|e| e.ts);
    }
    assert!(g.is_exhausted());
    assert_eq!(g.emitted(), all.len() as u64);
    // A further call stays empty.
    assert_eq!(g.fill(10, &mut TodBatch::default()), 0);
    all
}

fn small(events: u64, seed: u64) -> TodConfig {
    TodConfig { events, seed, ..TodConfig::default() }
}

#[test]
fn same_seed_gives_same_events_whatever_the_chunking() {
    let cfg = small(50_000, 7);
    let a = run(&cfg, 1 << 20);
    let b = run(&cfg, 997);
    let c = run(&cfg, 1);
    assert_eq!(a, b);
    assert_eq!(a, c);
}

#[test]
fn different_seeds_give_different_events() {
    assert_ne!(run(&small(5_000, 1), 4096), run(&small(5_000, 2), 4096));
}

#[test]
fn ts_strictly_increasing_from_clock_start() {
    let ev = run(&small(100_000, 3), 10_000);
    assert!(ev[0].ts > CLOCK_START_NS - 1 && ev[0].ts <= CLOCK_START_NS + i64::from(MAX_STEP_NS));
    for w in ev.windows(2) {
        let dt = w[1].ts - w[0].ts;
        assert!((1..=i64::from(MAX_STEP_NS)).contains(&dt), "step {dt} between {:?} and {:?}", w[0], w[1]);
    }
}

#[test]
fn seq_is_successive_per_thread_across_types() {
    let cfg = small(100_000, 4);
    let ev = run(&cfg, 8192);
    let mut next = vec![0i64; cfg.threads as usize + 1];
    for e in &ev {
        assert!((1..=cfg.threads as i32).contains(&e.producer));
        assert_eq!(e.seq, next[e.producer as usize], "{e:?}");
        next[e.producer as usize] += 1;
    }
    // The scheduler is uniform: every thread got a fair share.
    for (p, &n) in next.iter().enumerate().skip(1) {
        assert!(n > 8_000 && n < 12_000, "producer {p} emitted {n}");
    }
}

#[test]
fn parents_are_open_enters_and_calls_balance() {
    let cfg = small(200_000, 5);
    let ev = run(&cfg, 65_536);
    // Per producer: stack of (enter seq, behavior id).
    let mut stacks: Vec<Vec<(i64, i64)>> = vec![Vec::new(); cfg.threads as usize + 1];
    let mut max_open = 0;
    for e in &ev {
        let st = &mut stacks[e.producer as usize];
        let top = st.last().map_or(-1, |f| f.0);
        assert_eq!(e.parent, top, "parent of {e:?}");
        match e.kind {
            0 | 1 => assert!(!st.is_empty(), "write outside a method: {e:?}"),
            2 => {
                st.push((e.seq, e.cols[0]));
                max_open = max_open.max(st.len());
            }
            3 => {
                let (_, method) = st.pop().expect("exit without enter");
                assert_eq!(e.cols[0], method, "exit closes another method: {e:?}");
            }
            _ => unreachable!(),
        }
    }
    assert!(stacks.iter().all(Vec::is_empty), "open frames left at the end");
    assert!(max_open <= cfg.max_depth as usize + 1);
    assert!(max_open >= 3, "calls never nest ({max_open})");
}

#[test]
fn total_is_requested_plus_a_small_unwind() {
    for (events, seed) in [(0, 1), (1, 1), (10, 2), (12_345, 3), (100_000, 4)] {
        let cfg = small(events, seed);
        let n = run(&cfg, 1000).len() as u64;
        let margin = u64::from(cfg.threads) * (u64::from(cfg.max_depth) + 1);
        assert!(n >= events && n <= events + margin, "{events} requested, {n} produced");
    }
}

#[test]
fn ids_are_in_range_and_args_follow_the_method() {
    let cfg =
        TodConfig { events: 50_000, seed: 9, methods: 20, fields: 7, locals: 3, objects: 5, max_depth: 3, threads: 4 };
    let g = TodGenerator::new(cfg.clone()).unwrap();
    let ev = run(&cfg, 4096);
    let obj = 1..=i64::from(cfg.objects);
    for e in &ev {
        match e.kind {
            0 => {
                assert!((0..i64::from(cfg.fields)).contains(&e.cols[0]));
                assert!(obj.contains(&e.cols[1]) && obj.contains(&e.cols[2]));
            }
            1 => {
                assert!((0..i64::from(cfg.locals)).contains(&e.cols[0]));
                assert!(obj.contains(&e.cols[1]));
            }
            2 => {
                let m = e.cols[0];
                assert!((0..i64::from(cfg.methods)).contains(&m));
                assert!(obj.contains(&e.cols[1]));
                let argc = e.cols[2];
                assert_eq!(argc, i64::from(g.param_count(m as u32)));
                for (k, &a) in e.cols[3..].iter().enumerate() {
                    if (k as i64) < argc {
                        assert!(obj.contains(&a));
                    } else {
                        assert_eq!(a, 0);
                    }
                }
            }
            3 => assert!(obj.contains(&e.cols[1])),
            _ => unreachable!(),
        }
    }
    let mut kinds = [0usize; 4];
    ev.iter().for_each(|e| kinds[e.kind] += 1);
    assert!(kinds.iter().all(|&k| k > 0), "{kinds:?}");
}

#[test]
fn action_mix_matches_the_model() {
    let ev = run(&small(400_000, 11), 1 << 16);
    let mut kinds = [0f64; 4];
    ev.iter().for_each(|e| kinds[e.kind] += 1.0);
    let total = ev.len() as f64;
    // Expected shares per invocation: 2.025 fw, 1.8 vw, 1 enter, 1 exit of 5.825 events.
    let expected = [0.348, 0.309, 0.172, 0.172];
    for (k, (&got, &want)) in kinds.iter().zip(&expected).enumerate() {
        assert!((got / total - want).abs() < 0.01, "{}: {} vs {want}", EVENT_TYPES[k], got / total);
    }
}

#[test]
fn invalid_parameters_are_named() {
    let err = TodGenerator::new(TodConfig { threads: 0, ..TodConfig::default() }).unwrap_err();
    assert_eq!(err.param, "threads");
    assert!(err.to_string().contains("threads"));
    assert!(TodGenerator::new(TodConfig { objects: 0, ..TodConfig::default() }).is_err());
}

#[test]
fn record_batches_have_the_declared_layout() {
    let mut g = TodGenerator::new(small(20_000, 12)).unwrap();
    let mut b = TodBatch::with_capacity(20_000);
    g.fill(20_000, &mut b);
    let lens = b.lens();
    let enters = b.behavior_enter.clone();
    let batches = b.into_record_batches();
    let names: Vec<_> = batches.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, EVENT_TYPES);
    let cols = |t: usize| -> Vec<String> { schema(t).fields().iter().map(|f| f.name().clone()).collect() };
    assert_eq!(cols(0), ["ts", "producer", "seq", "parent_seq", "field_id", "target", "value"]);
    assert_eq!(cols(1), ["ts", "producer", "seq", "parent_seq", "var_id", "value"]);
    assert_eq!(
        cols(2),
        ["ts", "producer", "seq", "parent_seq", "behavior_id", "target", "arg_count", "arg0", "arg1", "arg2", "arg3"]
    );
    assert_eq!(cols(3), ["ts", "producer", "seq", "parent_seq", "behavior_id", "ret_value"]);
    for (t, (_, rb)) in batches.iter().enumerate() {
        assert_eq!(rb.num_rows(), lens[t]);
        assert_eq!(rb.column(1).data_type(), &DataType::Int32);
    }
    let rb = &batches[2].1;
    for k in 0..4 {
        let want = enters.arg_count.iter().filter(|&&c| c <= k as i64).count();
        assert_eq!(rb.column(7 + k).null_count(), want, "arg{k}");
        assert_eq!(rb.column(k).null_count(), 0);
    }
}

#[test]
fn pooled_columns_give_the_same_batches_and_are_reused() {
    let pool = ColumnPool::new();
    let mut plain = TodGenerator::new(small(30_000, 13)).unwrap();
    let mut pooled = plain.clone();
    for round in 0..3 {
        let mut a = TodBatch::with_capacity(10_000);
        plain.fill(10_000, &mut a);
        let mut b = TodBatch::with_capacity_in(10_000, Some(&pool));
        pooled.fill(10_000, &mut b);
        let (a, b) = (a.into_record_batches(), b.into_record_batches_in(Some(&pool)));
        assert_eq!(a, b, "round {round}");
        drop(b);
        // 26 int64 columns per batch (6 + 5 + 10 + 5) went back to the pool.
        assert_eq!(pool.len(), 26, "round {round}");
    }
}
