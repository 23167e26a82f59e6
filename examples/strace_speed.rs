//! Measures the strace parse of one file alone, as the importer runs it (`FileParse`: its own
//! thread, batches handed over and dropped; no Python, no Parquet). For instruction counts that
//! a loaded machine does not disturb, run it under callgrind on a cut of the many-process log
//! (`tracehouse bench import --format strace-procs --keep`):
//! `cargo build --release --no-default-features --example strace_speed &&
//!  valgrind --tool=callgrind target/release/examples/strace_speed LOG`.
use std::time::Instant;

use _core::formats::strace::background::{FileParse, Msg};
use _core::formats::strace::Config;

fn main() {
    let path = std::env::args().nth(1).expect("usage: strace_speed FILE");
    let t0 = Instant::now();
    let file = std::fs::File::open(&path).expect("open");
    let mut p = FileParse::start(file, None, Config::default()).expect("start");
    let (mut rows, mut lines) = (0usize, 0u64);
    while let Some(msg) = p.recv() {
        match msg {
            Msg::Batches { batches, lines: l, .. } => {
                rows += batches.iter().map(|(_, b)| b.num_rows()).sum::<usize>();
                lines = l;
            }
            Msg::Done(r) => {
                let parser = r.expect("parse");
                lines = parser.stats().lines;
            }
        }
    }
    let s = t0.elapsed().as_secs_f64();
    println!("{lines} lines, {rows} rows in {s:.3} s = {:.2}M lines/s", lines as f64 / s / 1e6);
}
