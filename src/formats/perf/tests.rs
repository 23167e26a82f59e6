//! Tests of the perf script parser: header shapes, frames, stacks, chunking, bad lines.

use arrow_array::{Array, Int32Array, Int64Array, RecordBatch, StringArray};

use super::decl::sniff;
use super::{fold_symbol as fold, is_tracepoint, PerfParser};
use crate::formats::ChunkParser;

/// Real `perf script` output (perf 6.1, cpu-clock on a 2-CPU VM), trimmed: a sample with a
/// kernel and a user frame, one with an unknown symbol, a -F pid/tid,cpu header, a tracepoint.
const TEXT: &str = "\
python3 18242  8762.807921:    1001001 cpu-clock:ppp: \n\
\tffffffff815ffded unmap_page_range+0x51d ([kernel.kallsyms])\n\
\t           d4ad7 __GI___execve+0x7 (/usr/lib/x86_64-linux-gnu/libc.so.6)\n\
\n\
bash 18242  8762.822434:    1001001 cpu-clock:ppp: \n\
\t           12cbe _dl_cache_libcmp+0xe (/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)\n\
\t            541c [unknown] ([unknown])\n\
\t            9f10 [unknown] (/usr/bin/python3.11)\n\
\n\
Web Content  2001/2002  [001]  8762.900000123:     250000 cycles:u: \n\
\t    55d0 std::vector<int>::push_back(int const&)+0x10 (/opt/app (deleted))\n\
\t    55e0 main;odd+0x3 (/opt/app)\n\
\n\
perf 18772 [000]  8770.626628:       sched:sched_switch: prev_comm=perf prev_pid=18772 ==> next_comm=x next_pid=18\n\
\tffffffff82249848 __schedule+0x628 ([kernel.kallsyms])\n\
\n";

fn parse(text: &[u8], chunk: usize, strict: bool) -> (PerfParser, Vec<(String, RecordBatch)>) {
    let mut p = PerfParser::new(strict, 3, 1 << 20);
    let mut out = Vec::new();
    for c in text.chunks(chunk.max(1)) {
        p.feed(c);
        out.extend(p.take_batches(false));
    }
    p.finish();
    out.extend(p.take_batches(true));
    (p, out)
}

fn col(bs: &[(String, RecordBatch)], t: &str, c: &str) -> Vec<Option<String>> {
    let mut v = Vec::new();
    for (_, b) in bs.iter().filter(|(n, _)| n == t) {
        let a = b.column_by_name(c).unwrap();
        if let Some(s) = a.as_any().downcast_ref::<StringArray>() {
            v.extend((0..s.len()).map(|i| s.is_valid(i).then(|| s.value(i).to_string())));
        } else if let Some(s) = a.as_any().downcast_ref::<Int32Array>() {
            v.extend((0..s.len()).map(|i| s.is_valid(i).then(|| s.value(i).to_string())));
        } else {
            let s = a.as_any().downcast_ref::<Int64Array>().unwrap();
            v.extend((0..s.len()).map(|i| s.is_valid(i).then(|| s.value(i).to_string())));
        }
    }
    v
}

fn some(v: &[&str]) -> Vec<Option<String>> {
    v.iter().map(|s| Some(s.to_string())).collect()
}

#[test]
fn samples_and_tracepoints_with_their_stacks() {
    let (p, bs) = parse(TEXT.as_bytes(), TEXT.len(), true);
    assert_eq!(ChunkParser::fatal(&p), None);
    assert_eq!(
        col(&bs, "sample", "stack"),
        some(&[
            "__GI___execve;unmap_page_range",
            "[python3.11];[unknown];_dl_cache_libcmp",
            "main:odd;std::vector<int>::push_back(int const&)",
        ])
    );
    assert_eq!(col(&bs, "sample", "leaf")[2], Some("std::vector<int>::push_back(int const&)".into()));
    assert_eq!(col(&bs, "sample", "dso")[2], Some("/opt/app (deleted)".into()));
    assert_eq!(col(&bs, "sample", "ts"), some(&["8762807921000", "8762822434000", "8762900000123"]));
    assert_eq!(col(&bs, "sample", "period"), some(&["1001001", "1001001", "250000"]));
    assert_eq!(col(&bs, "sample", "cpu"), vec![None, None, Some("1".into())]);
    assert_eq!(col(&bs, "sample", "event"), some(&["cpu-clock:ppp", "cpu-clock:ppp", "cycles:u"]));
    assert_eq!(col(&bs, "sample", "depth"), some(&["2", "3", "2"]));
    assert_eq!(col(&bs, "tracepoint", "event"), some(&["sched:sched_switch"]));
    assert_eq!(col(&bs, "tracepoint", "fields"), some(&["prev_comm=perf prev_pid=18772 ==> next_comm=x next_pid=18"]));
    // The same thread under two command names is one producer, named by the last.
    let prods = ChunkParser::producers(&p);
    let names: Vec<&str> = prods.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["bash", "Web Content", "perf", "Web Content"]);
    assert_eq!(prods[1].parent, Some(3));
    assert_eq!((prods[3].kind.as_str(), prods[3].parent), ("process", None));
    assert_eq!(col(&bs, "sample", "producer"), some(&["0", "0", "1"]));
    assert_eq!(col(&bs, "sample", "seq"), some(&["0", "1", "0"]));
}

#[test]
fn any_chunking_gives_the_same_rows() {
    let (_, whole) = parse(TEXT.as_bytes(), TEXT.len(), false);
    for size in [1, 2, 3, 5, 17, 64] {
        let (_, bs) = parse(TEXT.as_bytes(), size, false);
        for c in ["stack", "ts", "cpu", "period"] {
            assert_eq!(col(&bs, "sample", c), col(&whole, "sample", c), "chunks of {size}: {c}");
        }
        assert_eq!(col(&bs, "tracepoint", "fields"), col(&whole, "tracepoint", "fields"));
    }
}

#[test]
fn without_a_call_graph_the_frame_is_on_the_header() {
    let text = "python3 99/100 [000] 12.5: 1000 cpu-clock:ppp:  7f00 PyEval_EvalFrame+0x1 (/usr/bin/python3)\n\
                python3 99/100 [000] 12.6: 1000 cpu-clock:ppp:  7f01 [unknown] (/usr/bin/python3)\n";
    let (p, bs) = parse(text.as_bytes(), 7, true);
    assert_eq!(ChunkParser::fatal(&p), None);
    assert_eq!(col(&bs, "sample", "stack"), some(&["PyEval_EvalFrame", "[python3]"]));
    assert_eq!(col(&bs, "sample", "ts"), some(&["12500000000", "12600000000"]));
}

#[test]
fn bad_lines_are_named_and_side_band_records_skipped() {
    let text = "# ========\n# captured on: x\n\
                bash 1 1.0: PERF_RECORD_COMM: bash:1/1\n\
                \tffff stray\n\
                not a perf line\n\
                python3 5  3.000001:  10 cpu-clock: \n\
                \tabc f+0x1 (/x)\n\
                \t  /src/f.c:12\n";
    let (p, bs) = parse(text.as_bytes(), 5, false);
    let lines: Vec<u64> = ChunkParser::problems(&p).iter().map(|x| x.line).collect();
    assert_eq!(lines, [4, 5]);
    assert_eq!(col(&bs, "sample", "stack"), some(&["f"]));
    let stats: std::collections::HashMap<String, u64> = ChunkParser::stats(&p).into_iter().collect();
    assert_eq!((stats["side_band_records"], stats["other_lines"], stats["rejected"]), (1, 1, 2));
    let (p, _) = parse(text.as_bytes(), 5, true);
    assert_eq!(ChunkParser::fatal(&p).map(|f| f.line), Some(4));
}

#[test]
fn random_bytes_never_panic() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for round in 0..200 {
        let mut buf = Vec::new();
        for _ in 0..(round * 13 % 700) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let pick = (x % 23) as usize;
            let piece: &[u8] = match pick {
                0 => b"\n",
                1 => b"\t",
                2 => b" ",
                3 => b"1.5:",
                4 => b"[001]",
                5 => b"12/34",
                6 => b"cpu-clock:",
                7 => b"(",
                8 => b")",
                9 => b"+0x",
                10 => b"ffff",
                11 => b"sched:x:",
                12 => b"99999999999999999999.9999999999:",
                _ => &[(x >> 8) as u8],
            };
            buf.extend_from_slice(piece);
        }
        for size in [1, 7, 4096] {
            let _ = parse(&buf, size, round % 2 == 0);
        }
    }
}

#[test]
fn folded_symbols_and_event_kinds() {
    let f = |s: &str, d: &str| {
        let mut o = String::new();
        fold(s.as_bytes(), d.as_bytes(), &mut o);
        o
    };
    assert_eq!(f("foo+0x1f", "/x"), "foo");
    assert_eq!(f("a;b", ""), "a:b");
    assert_eq!(f("[unknown]", "/usr/lib/libc.so.6"), "[libc.so.6]");
    assert_eq!(f("[unknown]", "[unknown]"), "[unknown]");
    assert_eq!(f("x+y", ""), "x+y");
    assert!(is_tracepoint(b"sched:sched_switch") && is_tracepoint(b"probe_libc:malloc"));
    assert!(!is_tracepoint(b"cycles:u") && !is_tracepoint(b"cpu-clock:ppp") && !is_tracepoint(b"instructions"));
    assert!(!is_tracepoint(b"cpu/event=0x3c,umask=0x0/u"));
}

#[test]
fn sniffer() {
    assert!(sniff(TEXT.as_bytes()));
    assert!(sniff(b"# header\npython3 1/2 [000] 1.000001: 1 cycles:\n\t1 a (b)\n"));
    assert!(!sniff(b"12345 1700000000.123456 read(3, \"x\", 1) = 1\n"));
    assert!(!sniff(b"cpu,host=a usage=1.5 1000\n"));
    assert!(!sniff(b"a,b,c\n1,2,3\n"));
    assert!(!sniff(b"[{\"ph\": \"X\"}]"));
    assert!(!sniff(b""));
}
