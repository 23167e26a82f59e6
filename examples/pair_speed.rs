//! Measures the begin/end pairing pass alone (no Python, no Parquet) on a synthetic nested
//! workload of 10 threads. Run: `cargo run --release --no-default-features --example pair_speed [halves]`.
use std::time::Instant;
fn main() {
    let n: usize = std::env::args().nth(1).map_or(2_000_000, |a| a.parse().unwrap());
    // 10 threads, each: enter/exit pairs nested 3 deep, interleaved round robin
    let (mut bts, mut bp, mut bs, mut bk) = (vec![], vec![], vec![], vec![]);
    let (mut ets, mut ep, mut es, mut ek) = (vec![], vec![], vec![], vec![]);
    let mut seq = [0i64; 10];
    let mut depth = [0i32; 10];
    let mut ts = 0i64;
    for i in 0..n {
        let p = (i % 10) as i32;
        ts += 1;
        let d = &mut depth[p as usize];
        let s = &mut seq[p as usize];
        if *d < 3 && (i / 10) % 7 != 6 {
            bts.push(ts);
            bp.push(p);
            bs.push(*s);
            bk.push(*d as i64);
            *d += 1;
        } else if *d > 0 {
            *d -= 1;
            ets.push(ts);
            ep.push(p);
            es.push(*s);
            ek.push(*d as i64);
        } else {
            continue;
        }
        *s += 1;
    }
    for _ in 0..3 {
        let t = Instant::now();
        let b = _core::analysis::spans::Halves { ts: &bts, producer: &bp, seq: &bs, key: Some(&bk) };
        let e = _core::analysis::spans::Halves { ts: &ets, producer: &ep, seq: &es, key: Some(&ek) };
        let r = _core::analysis::spans::pair(b, e).unwrap();
        let el = t.elapsed();
        println!(
            "{} halves in {:?}: {:.1}M/s presorted={}",
            bts.len() + ets.len(),
            el,
            (bts.len() + ets.len()) as f64 / el.as_secs_f64() / 1e6,
            r.presorted
        );
    }
}
