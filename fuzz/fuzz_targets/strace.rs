//! Fuzz target of the strace parser: any bytes, cut into chunks at positions the input
//! chooses, fed to one or two sources (the `-ff` merge). Never panics, never hangs, and
//! every batch matches its schema.
#![no_main]

use _core::formats::strace::{schema, Config, StraceParser, EVENT_TYPES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else { return };
    let sources = 1 + (ctl & 1) as usize;
    let step = 1 + (ctl >> 1) as usize;
    let pids: Vec<Option<u32>> = (0..sources).map(|i| if sources > 1 { Some(10 + i as u32) } else { None }).collect();
    let cfg = Config { batch_rows: 3, max_line: 256, keep_rejects: 4 };
    let mut p = StraceParser::new(cfg, &pids);
    let halves: Vec<&[u8]> = if sources == 1 {
        vec![rest]
    } else {
        let (a, b) = rest.split_at(rest.len() / 2);
        vec![a, b]
    };
    let mut pos = vec![0usize; sources];
    while let Some(i) = p.need() {
        let end = (pos[i] + step).min(halves[i].len());
        p.feed(i, &halves[i][pos[i]..end]);
        pos[i] = end;
    }
    p.finish();
    for (name, b) in p.take_batches().into_iter().chain(p.take_late()) {
        let k = EVENT_TYPES.iter().position(|n| *n == name).unwrap();
        assert_eq!(b.schema(), schema(k));
    }
});
