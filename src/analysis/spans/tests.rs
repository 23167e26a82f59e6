//! Pairing rules on hand-made sequences, and the fast merge path against the general one.

use super::*;
use crate::workload::rng::SplitMix64;

struct Ev {
    ts: Vec<i64>,
    producer: Vec<i32>,
    seq: Vec<i64>,
    key: Vec<i64>,
}

impl Ev {
    fn new() -> Self {
        Ev { ts: vec![], producer: vec![], seq: vec![], key: vec![] }
    }
    fn push(&mut self, ts: i64, p: i32, seq: i64, key: i64) {
        self.ts.push(ts);
        self.producer.push(p);
        self.seq.push(seq);
        self.key.push(key);
    }
    fn halves(&self, keyed: bool) -> Halves<'_> {
        Halves { ts: &self.ts, producer: &self.producer, seq: &self.seq, key: keyed.then_some(&self.key[..]) }
    }
}

/// (is_end, ts, producer, key) in seq order; seq is the position.
fn split(events: &[(bool, i64, i32, i64)]) -> (Ev, Ev) {
    let (mut b, mut e) = (Ev::new(), Ev::new());
    for (i, &(is_end, ts, p, k)) in events.iter().enumerate() {
        if is_end {
            e.push(ts, p, i as i64, k)
        } else {
            b.push(ts, p, i as i64, k)
        }
    }
    (b, e)
}

#[test]
fn nested_calls_get_depth_parent_and_self_time() {
    // a(0..100) { b(10..30) { c(15..20) }  d(40..90) }
    let (b, e) = split(&[
        (false, 0, 1, 1),
        (false, 10, 1, 2),
        (false, 15, 1, 3),
        (true, 20, 1, 3),
        (true, 30, 1, 2),
        (false, 40, 1, 4),
        (true, 90, 1, 4),
        (true, 100, 1, 1),
    ]);
    let s = pair(b.halves(true), e.halves(true)).unwrap();
    assert!(s.presorted);
    assert_eq!(s.depth, vec![0, 1, 2, 1]);
    assert_eq!(s.parent, vec![-1, 0, 1, 0]);
    assert_eq!(s.end_ts, vec![100, 30, 20, 90]);
    assert_eq!(s.self_ns, vec![100 - 20 - 50, 20 - 5, 5, 50]);
    assert_eq!(s.end_row, vec![3, 1, 0, 2]);
    assert!(s.closed.iter().all(|&c| c));
    assert!(s.unmatched_end.is_empty());
}

#[test]
fn unmatched_end_and_unclosed_begin() {
    // end with nothing open; a begin never closed (cut at the producer's last ts)
    let (b, e) = split(&[(true, 5, 1, 9), (false, 10, 1, 1), (false, 12, 1, 2), (true, 20, 1, 2)]);
    let s = pair(b.halves(false), e.halves(false)).unwrap();
    assert_eq!(s.unmatched_end, vec![0]);
    assert_eq!(s.closed, vec![false, true]);
    assert_eq!(s.end_ts, vec![20, 20]);
    assert_eq!(s.end_row, vec![-1, 1]);
    assert_eq!(s.self_ns, vec![10 - 8, 8]);
    assert_eq!(s.open_at_end, vec![0]);
}

#[test]
fn keyed_end_cuts_the_frames_above_its_match() {
    // a { b { c   ...end of a arrives: b and c lost their ends
    let (b, e) = split(&[(false, 0, 1, 1), (false, 1, 1, 2), (false, 2, 1, 3), (true, 10, 1, 1), (true, 11, 1, 7)]);
    let s = pair(b.halves(true), e.halves(true)).unwrap();
    assert_eq!(s.closed, vec![true, false, false]);
    assert_eq!(s.end_ts, vec![10, 10, 10]);
    assert_eq!(s.unmatched_end, vec![1]);
    // without keys the end of `a` closes `c`, the stray end closes `b`, `a` stays open
    let s = pair(b.halves(false), e.halves(false)).unwrap();
    assert_eq!(s.closed, vec![false, true, true]);
    assert_eq!(s.end_ts, vec![11, 11, 10]);
}

#[test]
fn producers_are_independent_and_interleaved() {
    let (b, e) = split(&[
        (false, 0, 1, 1),
        (false, 1, 2, 1),
        (false, 2, 1, 2),
        (true, 3, 2, 1),
        (true, 4, 1, 2),
        (true, 5, 1, 1),
    ]);
    let s = pair(b.halves(true), e.halves(true)).unwrap();
    assert_eq!(s.depth, vec![0, 0, 1]);
    assert_eq!(s.parent, vec![-1, -1, 0]);
    assert_eq!(s.end_ts, vec![5, 3, 4]);
}

#[test]
fn seq_order_decides_not_ts() {
    // producer 1: seq order is begin(ts 10), end(ts 5): paired by seq, a negative span.
    let mut b = Ev::new();
    let mut e = Ev::new();
    b.push(10, 1, 0, 0);
    e.push(5, 1, 1, 0);
    let s = pair(b.halves(false), e.halves(false)).unwrap();
    assert!(s.presorted);
    assert_eq!(s.closed, vec![true]);
    assert_eq!(s.end_ts, vec![5]);
    assert_eq!(s.self_ns, vec![-5]);
}

#[test]
fn mismatched_lengths_and_keys_are_errors() {
    let b = Ev::new();
    let mut e = Ev::new();
    e.push(1, 1, 0, 0);
    assert!(pair(b.halves(true), e.halves(false)).is_err());
    let bad = Halves { ts: &[1, 2], producer: &[1], seq: &[0, 1], key: None };
    assert!(pair(bad, e.halves(false)).is_err());
}

fn random_trace(rng: &mut SplitMix64, n: usize, producers: i32, keys: i64) -> (Ev, Ev) {
    let (mut b, mut e) = (Ev::new(), Ev::new());
    let mut seqs = vec![0i64; producers as usize];
    let mut ts = 0i64;
    for _ in 0..n {
        ts += (rng.next_u64() % 3) as i64; // ties happen
        let p = rng.below(producers as u32) as i32;
        let k = (rng.next_u64() % keys as u64) as i64;
        let seq = seqs[p as usize];
        seqs[p as usize] += 1;
        if rng.below(2) == 0 {
            b.push(ts, p, seq, k)
        } else {
            e.push(ts, p, seq, k)
        }
    }
    (b, e)
}

#[test]
fn merge_path_equals_producer_path_on_random_unbalanced_traces() {
    let mut rng = SplitMix64::new(3);
    for round in 0..200 {
        let (b, e) = random_trace(&mut rng, 1 + round * 3, 1 + (round % 5) as i32, 1 + (round % 4) as i64);
        for keyed in [false, true] {
            let fast = pair(b.halves(keyed), e.halves(keyed)).unwrap();
            assert!(fast.presorted);
            let mut slow = by_producer(b.halves(keyed), e.halves(keyed));
            slow.presorted = true;
            slow.begins_ordered = fast.begins_ordered;
            assert_eq!(fast, slow, "round {round} keyed {keyed}");
        }
    }
}

#[test]
fn rows_out_of_seq_order_are_sorted_per_producer() {
    let mut rng = SplitMix64::new(11);
    for round in 0..100 {
        let (b, e) = random_trace(&mut rng, 5 + round * 4, 3, 2);
        // Reverse the inputs: every producer's rows now come in falling seq order.
        let rev = |x: &Ev| Ev {
            ts: x.ts.iter().rev().copied().collect(),
            producer: x.producer.iter().rev().copied().collect(),
            seq: x.seq.iter().rev().copied().collect(),
            key: x.key.iter().rev().copied().collect(),
        };
        let (rb, re) = (rev(&b), rev(&e));
        for keyed in [false, true] {
            let got = pair(rb.halves(keyed), re.halves(keyed)).unwrap();
            let mut want = by_producer(rb.halves(keyed), re.halves(keyed));
            want.presorted = got.presorted;
            want.begins_ordered = got.begins_ordered;
            assert_eq!(got, want, "round {round}");
        }
    }
}

#[test]
fn nest_by_time() {
    // producer 1: a [0, 100) { b [10, 30) { c [10, 20) } z [30, 30) d [40, 100) }; e [100, 110)
    let ts = [0, 10, 10, 40, 100, 30, 5];
    let dur = [100, 20, 10, 60, 10, 0, 1];
    let pr = [1, 1, 1, 1, 1, 1, 2];
    let seq = [0, 1, 2, 4, 5, 3, 0];
    let n = nest(&ts, &dur, &pr, &seq).unwrap();
    assert_eq!(n.parent, vec![-1, 0, 1, 0, -1, 0, -1]);
    assert_eq!(n.depth, vec![0, 1, 2, 1, 0, 1, 0]);
    assert_eq!(n.self_ns, vec![100 - 20 - 60, 10, 10, 60, 10, 0, 1]);
}

#[test]
fn nest_overlap_makes_siblings() {
    let n = nest(&[0, 5], &[10, 10], &[1, 1], &[0, 1]).unwrap();
    assert_eq!(n.parent, vec![-1, -1]);
    assert!(nest(&[0], &[1, 2], &[1], &[0]).is_err());
}

#[test]
fn chunked_inputs_pair_like_contiguous_ones() {
    let mut rng = SplitMix64::new(5);
    for round in 0..60 {
        let (b, e) = random_trace(&mut rng, 10 + round * 5, 3, 2);
        let cut = |x: &Ev, k: usize| -> Vec<usize> {
            let n = x.ts.len();
            let mut at: Vec<usize> = (0..k).map(|i| rng_below(n + 1, round * 31 + k * 7 + i)).collect();
            at.push(0);
            at.push(n);
            at.sort_unstable();
            at
        };
        for keyed in [false, true] {
            let want = pair(b.halves(keyed), e.halves(keyed)).unwrap();
            let (bc, ec) = (cut(&b, 3), cut(&e, 2));
            let got = pair_chunked(&chunks(&b, &bc, keyed), &chunks(&e, &ec, keyed)).unwrap();
            assert_eq!(got, want, "round {round}");
        }
    }
}

fn chunks<'a>(x: &'a Ev, at: &[usize], keyed: bool) -> Chunked<'a> {
    Chunked {
        ts: at.windows(2).map(|w| &x.ts[w[0]..w[1]]).collect(),
        producer: at.windows(2).map(|w| &x.producer[w[0]..w[1]]).collect(),
        seq: at.windows(2).map(|w| &x.seq[w[0]..w[1]]).collect(),
        key: keyed.then(|| at.windows(2).map(|w| &x.key[w[0]..w[1]]).collect()),
    }
}

fn rng_below(n: usize, salt: usize) -> usize {
    let mut r = SplitMix64::new(salt as u64 * 7919 + n as u64);
    (r.next_u64() % n as u64) as usize
}

#[test]
fn begins_out_of_ts_order_are_reported() {
    let (b, e) = split(&[(false, 5, 1, 0), (true, 6, 1, 0), (false, 7, 1, 0), (true, 8, 1, 0)]);
    assert!(pair(b.halves(false), e.halves(false)).unwrap().begins_ordered);
    let rb = Ev { ts: vec![7, 5], producer: vec![1, 1], seq: vec![2, 0], key: vec![0, 0] };
    let s = pair(rb.halves(false), e.halves(false)).unwrap();
    assert!(!s.begins_ordered);
    assert_eq!(s.end_ts, vec![8, 6]);
}

/// Cuts of `0..n` into `k` random batches (boundaries, first 0, last n).
fn cuts(rng: &mut SplitMix64, n: usize, k: usize) -> Vec<usize> {
    let mut at: Vec<usize> = (0..k).map(|_| (rng.next_u64() % (n as u64 + 1)) as usize).collect();
    at.push(0);
    at.push(n);
    at.sort_unstable();
    at
}

#[test]
fn stream_fed_in_interleaved_batches_pairs_like_the_whole_input() {
    let mut rng = SplitMix64::new(17);
    for round in 0..150 {
        let (b, e) = random_trace(&mut rng, 1 + round * 4, 1 + (round % 6) as i32, 1 + (round % 3) as i64);
        let (b, e) = (by_ts(&b), by_ts(&e));
        for keyed in [false, true] {
            let want = by_producer(b.halves(keyed), e.halves(keyed));
            let (bc, ec) = (cuts(&mut rng, b.ts.len(), 4), cuts(&mut rng, e.ts.len(), 3));
            // Batches of both sides pushed in the order of their first ts (as the store's
            // row groups are read), a hint too small half the time (the columns grow).
            let mut order: Vec<(i64, bool, usize)> = Vec::new();
            for (is_end, x, at) in [(false, &b, &bc), (true, &e, &ec)] {
                for (w, &start) in at[..at.len() - 1].iter().enumerate() {
                    order.push((x.ts.get(start).copied().unwrap_or(i64::MAX), is_end, w));
                }
            }
            order.sort_by_key(|&(t, is_end, w)| (t, w, is_end));
            let hint = if round % 2 == 0 { b.ts.len() } else { b.ts.len() / 3 };
            let mut s = Stream::new(keyed, hint);
            for &(_, is_end, w) in &order {
                let (x, at) = if is_end { (&e, &ec) } else { (&b, &bc) };
                let r = at[w]..at[w + 1];
                let key = keyed.then(|| &x.key[r.clone()]);
                let h = Halves { ts: &x.ts[r.clone()], producer: &x.producer[r.clone()], seq: &x.seq[r], key };
                s.push(is_end, h).unwrap();
                assert!(s.ok(), "round {round} keyed {keyed}");
            }
            let (mut got, um) = s.finish().expect("sorted inputs stay on the fast path");
            let rows: Vec<usize> = got.unmatched_end.iter().map(|&r| r as usize).collect();
            assert_eq!(um.ts, rows.iter().map(|&r| e.ts[r]).collect::<Vec<_>>());
            assert_eq!(um.producer, rows.iter().map(|&r| e.producer[r]).collect::<Vec<_>>());
            assert_eq!(um.seq, rows.iter().map(|&r| e.seq[r]).collect::<Vec<_>>());
            assert_eq!(um.key, rows.iter().map(|&r| if keyed { e.key[r] } else { 0 }).collect::<Vec<_>>());
            got.begins_ordered = false;
            let mut want = want.clone();
            want.presorted = true;
            assert_eq!(got, want, "round {round} keyed {keyed}");
        }
    }
}

#[test]
fn stream_reports_inputs_out_of_order() {
    // A batch starting before the previous one ended (overlapping segments).
    let (b, e) = split(&[(false, 5, 1, 0), (false, 6, 1, 0), (true, 7, 1, 0), (true, 8, 1, 0)]);
    let mut s = Stream::new(false, 2);
    s.push(false, Halves { ts: &b.ts[1..], producer: &b.producer[1..], seq: &b.seq[1..], key: None }).unwrap();
    s.push(false, Halves { ts: &b.ts[..1], producer: &b.producer[..1], seq: &b.seq[..1], key: None }).unwrap();
    assert!(!s.ok());
    assert!(s.finish().is_none());
    // A producer whose seq falls as ts grows: the merge would visit it out of seq order.
    let b2 = Ev { ts: vec![1, 2], producer: vec![1, 1], seq: vec![5, 4], key: vec![0, 0] };
    let mut s = Stream::new(false, 2);
    s.push(false, b2.halves(false)).unwrap();
    s.push(true, e.halves(false)).unwrap();
    assert!(s.finish().is_none());
    // Keys on one side only, ragged columns.
    let mut s = Stream::new(true, 0);
    assert!(s.push(false, b.halves(false)).is_err());
    let bad = Halves { ts: &[1, 2], producer: &[1], seq: &[0, 1], key: None };
    assert!(Stream::new(false, 0).push(false, bad).is_err());
}

/// Rows ordered by (ts, producer, seq), as the store's segments hold them.
fn by_ts(x: &Ev) -> Ev {
    let mut at: Vec<usize> = (0..x.ts.len()).collect();
    at.sort_by_key(|&r| (x.ts[r], x.producer[r], x.seq[r]));
    Ev {
        ts: at.iter().map(|&r| x.ts[r]).collect(),
        producer: at.iter().map(|&r| x.producer[r]).collect(),
        seq: at.iter().map(|&r| x.seq[r]).collect(),
        key: at.iter().map(|&r| x.key[r]).collect(),
    }
}
