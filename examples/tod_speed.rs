//! Measures the TOD generator alone (no Python): events/s into column buffers and into
//! Arrow record batches. Run: `cargo run --release --no-default-features --example tod_speed [events] [chunk] [mode]`.

use std::time::Instant;

use _core::colpool::ColumnPool;
use _core::workload::tod::{TodBatch, TodConfig, TodGenerator};

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.replace('_', "").parse::<u64>().expect("integer argument"));
    let events = args.next().unwrap_or(10_000_000);
    let chunk = args.next().unwrap_or(65_536) as usize;
    // Optional third argument: run only mode 0 (buffers), 1 (arrow) or 2 (arrow, pooled).
    let only = args.next();
    for (mode, (to_arrow, pooled)) in [(false, false), (true, false), (true, true)].into_iter().enumerate() {
        if only.is_some_and(|m| m != mode as u64) {
            continue;
        }
        let pool = pooled.then(ColumnPool::new);
        let mut g = TodGenerator::new(TodConfig { events, ..TodConfig::default() }).unwrap();
        let t0 = Instant::now();
        let mut rows = 0usize;
        loop {
            let mut b = TodBatch::with_capacity_in(chunk, pool.as_ref());
            if g.fill(chunk, &mut b) == 0 {
                break;
            }
            if to_arrow {
                rows += b.into_record_batches_in(pool.as_ref()).iter().map(|(_, rb)| rb.num_rows()).sum::<usize>();
            } else {
                rows += b.len();
            }
        }
        let s = t0.elapsed().as_secs_f64();
        let what = match (to_arrow, pooled) {
            (false, _) => "column buffers",
            (true, false) => "arrow batches",
            (true, true) => "arrow batches, pooled columns",
        };
        println!("{rows} events into {what} in {s:.3} s: {:.1} M events/s (chunk {chunk})", rows as f64 / s / 1e6);
    }
}
