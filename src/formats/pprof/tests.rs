use prost::Message;

use arrow_array::Array;

use super::*;
use crate::formats::ChunkParser;

fn parse(bytes: &[u8], strict: bool) -> (PprofParser, Vec<RecordBatch>) {
    let mut p = PprofParser::new(strict, 1000);
    for c in bytes.chunks(7) {
        p.feed(c);
    }
    p.finish();
    let mut b = Vec::new();
    loop {
        let got = p.take_batches(true);
        if got.is_empty() {
            break;
        }
        b.extend(got.into_iter().map(|(_, b)| b));
    }
    (p, b)
}

fn col_str(b: &RecordBatch, name: &str) -> Vec<Option<String>> {
    let a = b.column_by_name(name).unwrap().as_any().downcast_ref::<arrow_array::StringArray>().unwrap();
    (0..a.len()).map(|i| (!a.is_null(i)).then(|| a.value(i).to_string())).collect()
}

fn col_i64(b: &RecordBatch, name: &str) -> Vec<Option<i64>> {
    let a = b.column_by_name(name).unwrap().as_any().downcast_ref::<arrow_array::Int64Array>().unwrap();
    (0..a.len()).map(|i| (!a.is_null(i)).then(|| a.value(i))).collect()
}

#[test]
fn encoded_stacks_decode_to_the_same_stacks_and_values() {
    let stacks = vec!["main;work;spin".to_string(), "main;a;b".to_string(), "main".to_string()];
    let values = vec![vec![3, 30], vec![1, 10], vec![2, 20]];
    let types = vec![("samples".to_string(), "count".to_string()), ("cpu".to_string(), "nanoseconds".to_string())];
    let bytes = encode(&stacks, &values, &types, "/usr/bin/prog", 5, 7).unwrap();
    assert!(decl::sniff(&bytes));
    let (p, b) = parse(&bytes, true);
    assert_eq!(p.rejects.count, 0);
    let b = &b[0];
    assert_eq!(col_str(b, "stack"), stacks.iter().map(|s| Some(s.clone())).collect::<Vec<_>>());
    assert_eq!(col_str(b, "leaf"), vec![Some("spin".into()), Some("b".into()), Some("main".into())]);
    assert_eq!(col_i64(b, "value"), vec![Some(30), Some(10), Some(20)]);
    assert_eq!(col_i64(b, "count"), vec![Some(3), Some(1), Some(2)]);
    assert_eq!(col_i64(b, "ts"), vec![Some(5); 3]);
    assert_eq!(col_str(b, "values")[0].as_deref(), Some("samples/count=3,cpu/nanoseconds=30"));
    assert_eq!(p.producers()[0].name, "prog");
    assert!(p.details_json().contains("\"default_sample_type\":\"cpu/nanoseconds\""), "{}", p.details_json());
}

#[test]
fn inlined_lines_unknown_functions_and_bad_samples() {
    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let prof = proto::Profile {
        sample_type: vec![proto::ValueType { r#type: 1, unit: 2 }],
        string_table: s(&["", "alloc_space", "bytes", "inner;x", "outer", "/lib/libc.so.6", "k", "v", "f.go"]),
        mapping: vec![proto::Mapping { id: 9, filename: 5, ..Default::default() }],
        function: vec![
            proto::Function { id: 1, name: 3, filename: 8, ..Default::default() },
            proto::Function { id: 2, name: 4, ..Default::default() },
        ],
        location: vec![
            proto::Location {
                id: 1,
                mapping_id: 9,
                address: 0x10,
                line: vec![
                    proto::Line { function_id: 1, line: 12, column: 0 },
                    proto::Line { function_id: 2, line: 40, column: 0 },
                ],
                is_folded: false,
            },
            proto::Location { id: 2, mapping_id: 9, address: 0x20, line: vec![], is_folded: false },
        ],
        sample: vec![
            proto::Sample {
                location_id: vec![1, 2, 77],
                value: vec![64],
                label: vec![proto::Label { key: 6, str: 7, num: 0, num_unit: 0 }],
            },
            proto::Sample { location_id: vec![1], value: vec![1, 2], label: vec![] },
        ],
        ..Default::default()
    };
    let (p, b) = parse(&prof.encode_to_vec(), false);
    let b = &b[0];
    assert_eq!(col_str(b, "stack"), vec![Some("[location 77];[libc.so.6];outer;inner:x".into())]);
    assert_eq!(col_str(b, "file"), vec![Some("f.go".into())]);
    assert_eq!(col_i64(b, "line"), vec![Some(12)]);
    assert_eq!(col_str(b, "labels"), vec![Some("k=v".into())]);
    assert_eq!(col_i64(b, "count"), vec![None]);
    assert_eq!(col_i64(b, "depth"), vec![Some(4)]);
    assert_eq!(p.rejects.count, 1);
    assert!(p.rejects.first[0].reason.contains("sample 1: 2 values for 1 sample types"), "{:?}", p.rejects.first);
    assert_eq!(p.unknown_locations, 1);
}

#[test]
fn garbage_is_rejected_not_a_crash() {
    let (p, b) = parse(b"\x0a\x04\x08\x01\x10\x02\xff\xff\xff", true);
    assert!(b.is_empty());
    assert!(p.rejects.fatal.as_ref().unwrap().reason.starts_with("not a pprof profile"));
    assert!(!decl::sniff(b"{\"traceEvents\": []}"));
    assert!(!decl::sniff(b"perf 123 [000] 1.0: cpu-clock:\n"));
}

#[test]
fn samples_become_rows_one_batch_at_a_time() {
    let n = 2500;
    let stacks: Vec<String> = (0..n).map(|i| format!("main;f{};g{}", i % 7, i % 3)).collect();
    let values: Vec<Vec<i64>> = (0..n).map(|i| vec![i as i64]).collect();
    let bytes = encode(&stacks, &values, &[("samples".into(), "count".into())], "prog", 1, 2).unwrap();
    let mut p = PprofParser::new(true, 1000);
    p.feed(&bytes);
    p.finish();
    assert_eq!(p.table.rows(), 0, "no row is made before it is taken");
    let mut sizes = Vec::new();
    let mut got = Vec::new();
    loop {
        let b = p.take_batches(true);
        if b.is_empty() {
            break;
        }
        sizes.push(b[0].1.num_rows());
        got.extend(col_str(&b[0].1, "stack").into_iter().map(Option::unwrap));
    }
    assert_eq!(sizes, vec![1000, 1000, 500]);
    assert_eq!(got, stacks);
    assert_eq!(p.samples, n as u64);
}
