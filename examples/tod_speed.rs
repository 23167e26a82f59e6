//! Measures the TOD generator alone (no Python): events/s into column buffers and into
//! Arrow record batches. Run: `cargo run --release --no-default-features --example tod_speed [events] [chunk]`.

use std::time::Instant;

use _core::tod::{TodBatch, TodConfig, TodGenerator};

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.replace('_', "").parse::<u64>().expect("integer argument"));
    let events = args.next().unwrap_or(10_000_000);
    let chunk = args.next().unwrap_or(65_536) as usize;
    for to_arrow in [false, true] {
        let mut g = TodGenerator::new(TodConfig { events, ..TodConfig::default() }).unwrap();
        let t0 = Instant::now();
        let mut rows = 0usize;
        loop {
            let mut b = TodBatch::with_capacity(chunk);
            if g.fill(chunk, &mut b) == 0 {
                break;
            }
            if to_arrow {
                rows += b.into_record_batches().iter().map(|(_, rb)| rb.num_rows()).sum::<usize>();
            } else {
                rows += b.len();
            }
        }
        let s = t0.elapsed().as_secs_f64();
        let what = if to_arrow { "arrow batches" } else { "column buffers" };
        println!("{rows} events into {what} in {s:.3} s: {:.1} M events/s (chunk {chunk})", rows as f64 / s / 1e6);
    }
}
