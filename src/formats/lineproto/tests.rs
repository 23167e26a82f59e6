//! Tests of the line-protocol file parser: chunks cut anywhere decode as one body, new fields
//! are announced as new columns, bad lines are reported with their numbers, and the sniffer.

use arrow_array::Array;

use super::decl::sniff;
use super::LineProtoParser;
use crate::formats::ChunkParser;
use crate::ingest::lineproto::Precision;

const TEXT: &[u8] = b"# telegraf\ncpu,host=a usage=1.5 1000\ncpu,host=b usage=2.5 2000\n\
    mem,host=a used=10i 3000\ncpu,host=a usage=3.5,idle=90.0 4000\nbad line\ncpu,host=a usage=\"x\" 5000\n";

fn run(size: usize, strict: bool) -> LineProtoParser {
    let mut p = LineProtoParser::new(Precision::Ns, strict, 1 << 20);
    for c in TEXT.chunks(size) {
        p.feed(c);
    }
    p.finish();
    p
}

#[test]
fn any_chunking_gives_the_same_rows_and_lines() {
    for size in [1, 2, 7, 13, TEXT.len()] {
        let mut p = run(size, false);
        let rows: usize = p.take_batches(true).iter().map(|(_, b)| b.num_rows()).sum();
        assert_eq!(rows, 4, "chunks of {size}");
        let problems = ChunkParser::problems(&p);
        assert_eq!(problems.iter().map(|p| p.line).collect::<Vec<_>>(), [6, 7], "chunks of {size}");
        assert_eq!(ChunkParser::producers(&p).len(), 2);
    }
}

#[test]
fn a_field_met_later_is_a_new_column_and_strict_stops() {
    let mut p = LineProtoParser::new(Precision::Ns, false, 1 << 20);
    p.feed(b"cpu,host=a usage=1.5 1000\n");
    let first = p.take_batches(false);
    assert_eq!(first[0].1.num_columns(), 4); // ts, producer, seq, usage
    assert!(p.take_new_columns().is_empty());
    p.feed(b"cpu,host=a usage=2.5,idle=9.0 2000\n");
    let new = p.take_new_columns();
    assert_eq!(new.len(), 1);
    assert_eq!((new[0].0.as_str(), new[0].1.as_str()), ("cpu", "idle"));
    let b = &p.take_batches(false)[0].1;
    assert_eq!(b.column(2).as_any().downcast_ref::<arrow_array::Int64Array>().unwrap().value(0), 1);
    let p = run(3, true);
    assert_eq!(ChunkParser::fatal(&p).map(|f| f.line), Some(6));
}

#[test]
fn sniffer() {
    assert!(sniff(TEXT));
    assert!(sniff(b"weather,location=us-midwest temperature=82 1465839830100400200\n"));
    assert!(sniff(b"m f=\"a b, c\",g=1i\n"));
    assert!(sniff(b"m,t=1 f=true\n"));
    assert!(sniff(b"log,host=a msg=\"first\nsecond, \\\"q\\\"\" 1000\n")); // a string across lines
    assert!(!sniff(b"a,b,c\n1,2,3\n"));
    assert!(!sniff(b"python3 18242  8762.807921:    1001001 cpu-clock:ppp:\n"));
    assert!(!sniff(b"12345 1700000000.123456 read(3, \"x\", 1) = 1\n"));
    assert!(!sniff(b"{\"traceEvents\": []}"));
    assert!(!sniff(b""));
}

#[test]
fn a_string_with_newlines_decodes_alike_at_any_chunking() {
    let text: &[u8] = b"log,host=a msg=\"one\ntwo, \\\"three\\\"\n\" 1000\nlog,host=a msg=\"four\" 2000\nbad\n";
    for size in [1, 2, 5, 11, text.len()] {
        let mut p = LineProtoParser::new(Precision::Ns, false, 1 << 20);
        for c in text.chunks(size) {
            p.feed(c);
        }
        p.finish();
        let batches = p.take_batches(true);
        let msgs: Vec<String> = batches
            .iter()
            .flat_map(|(_, b)| {
                let c = b.column_by_name("msg").unwrap().as_any().downcast_ref::<arrow_array::StringArray>().unwrap();
                (0..c.len()).map(|i| c.value(i).to_string()).collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(msgs, ["one\ntwo, \"three\"\n", "four"], "chunks of {size}");
        assert_eq!(ChunkParser::problems(&p).iter().map(|p| p.line).collect::<Vec<_>>(), [5], "chunks of {size}");
    }
}
