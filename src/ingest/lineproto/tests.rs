use super::*;
use arrow_array::{Array, BooleanArray, Float64Array, StringArray};

fn run(body: &str) -> (Decoded, Schemas, Producers) {
    let s = Mutex::new(Schemas::new());
    let p = Mutex::new(Producers::new(0));
    let d = decode(body.as_bytes(), 1, Precision::Ns, 777, &s, &p, &Limits::default());
    (d, s.into_inner().unwrap(), p.into_inner().unwrap())
}

/// One body of a [`decode_many`] call: ns timestamps, numbered from line 1.
fn ns(body: &[u8]) -> Input<'_> {
    Input { body, first_line: 1, precision: Precision::Ns, default_ts: 0 }
}

/// The measurements of a call's batches, in order.
fn names(d: &DecodedMany) -> Vec<&str> {
    d.batches.iter().map(|(n, _)| n.as_str()).collect()
}

/// `decode` over plain tables (the tests own them).
fn dec(body: &[u8], first: u64, prec: Precision, ts: i64, s: &mut Schemas, p: &mut Producers, l: &Limits) -> Decoded {
    let sm = Mutex::new(std::mem::take(s));
    let pm = Mutex::new(std::mem::take(p));
    let d = decode(body, first, prec, ts, &sm, &pm, l);
    *s = sm.into_inner().unwrap();
    *p = pm.into_inner().unwrap();
    d
}

fn col<'a, T: 'static>(b: &'a RecordBatch, name: &str) -> &'a T {
    b.column_by_name(name).unwrap_or_else(|| panic!("no column {name}")).as_any().downcast_ref::<T>().expect("type")
}

#[test]
fn one_line_every_type() {
    let (d, s, mut p) = run("cpu,host=a,region=eu f=1.5,i=-3i,u=7u,s=\"hi\",b=t 1700000000000000000\n");
    assert_eq!(d.body.errors, vec![]);
    assert_eq!((d.body.lines, d.body.rows, d.max_producer), (1, 1, 0));
    let (name, b) = &d.batches[0];
    assert_eq!(name, "cpu");
    let names: Vec<_> = b.schema().fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(names, ["ts", "producer", "f", "i", "u", "s", "b"]);
    assert_eq!(col::<Int64Array>(b, "ts").value(0), 1_700_000_000_000_000_000);
    assert_eq!(col::<Float64Array>(b, "f").value(0), 1.5);
    assert_eq!(col::<Int64Array>(b, "i").value(0), -3);
    assert_eq!(col::<Int64Array>(b, "u").value(0), 7);
    assert_eq!(col::<StringArray>(b, "s").value(0), "hi");
    assert!(col::<BooleanArray>(b, "b").value(0));
    let cols: Vec<_> = s.get("cpu").unwrap().columns.iter().map(|(n, t)| (n.as_str(), t.name())).collect();
    assert_eq!(cols, [("f", "float64"), ("i", "int64"), ("u", "int64"), ("s", "string"), ("b", "bool")]);
    let np = p.take_new();
    assert_eq!(
        np,
        vec![NewProducer {
            id: 0,
            name: "host=a,region=eu".into(),
            tags: vec![("host".into(), "a".into()), ("region".into(), "eu".into())]
        }]
    );
    assert!(p.take_new().is_empty());
}

#[test]
fn tag_order_does_not_matter_and_ids_are_interned_once() {
    let (d, _, mut p) = run("m,b=2,a=1 v=1 1\nm,a=1,b=2 v=2 2\nm v=3 3\nm,a=1,b=2 v=4 4\n");
    let b = &d.batches[0].1;
    assert_eq!(col::<Int32Array>(b, "producer").values().to_vec(), vec![0, 0, 1, 0]);
    let np = p.take_new();
    assert_eq!(np.len(), 2);
    assert_eq!(np[0].name, "a=1,b=2");
    assert_eq!(np[1].name, "");
}

#[test]
fn declared_producers_and_columns_are_reused() {
    let mut s = Schemas::new();
    s.declare("m", &[("v".into(), FieldType::Int)], &Default::default()).unwrap();
    let mut p = Producers::new(0);
    p.declare(5, &[("host".into(), "x".into())]);
    let d =
        dec(b"m,host=x v=1i\nm,host=y v=2.5\nm,host=y v=3i", 1, Precision::Ns, 9, &mut s, &mut p, &Limits::default());
    assert_eq!(d.body.rows, 2);
    assert_eq!(d.body.errors.len(), 1);
    assert_eq!(d.body.errors[0].line, 2);
    assert!(d.body.errors[0].message.contains("type conflict"), "{}", d.body.errors[0].message);
    let b = &d.batches[0].1;
    assert_eq!(col::<Int32Array>(b, "producer").values().to_vec(), vec![5, 6]);
    assert_eq!(col::<Int64Array>(b, "ts").values().to_vec(), vec![9, 9]);
    assert!(s.declare("m", &[("v".into(), FieldType::Float)], &Default::default()).is_err());
}

#[test]
fn a_new_field_adds_a_column_null_before_it() {
    let (d, s, _) = run("m a=1 1\nm a=2,b=\"x\" 2\nm b=\"y\" 3\n");
    let b = &d.batches[0].1;
    let a = col::<Float64Array>(b, "a");
    let bb = col::<StringArray>(b, "b");
    assert_eq!((a.is_null(0), a.is_null(1), a.is_null(2)), (false, false, true));
    assert_eq!((bb.is_null(0), bb.value(1), bb.value(2)), (true, "x", "y"));
    assert_eq!(s.get("m").unwrap().columns.len(), 2);
}

#[test]
fn a_rejected_line_changes_nothing() {
    let (d, s, mut p) = run("m,t=new a=1,b=2i,a2=\"bad 1\n");
    assert_eq!(d.body.rows, 0);
    assert!(d.batches.is_empty());
    assert!(s.get("m").is_none());
    assert!(p.take_new().is_empty() || d.body.rows == 0);
}

#[test]
fn escapes_per_the_spec() {
    let (d, _, mut p) =
        run("my\\ meas\\,x,tag\\ key=tag\\,va\\=l\\ ue field\\=k=\"str \\\"q\\\" \\\\ end\",other=1i 5\n");
    assert_eq!(d.body.errors, vec![]);
    let (name, b) = &d.batches[0];
    assert_eq!(name, "my_meas_x");
    assert_eq!(col::<StringArray>(b, "field_k").value(0), "str \"q\" \\ end");
    let np = p.take_new();
    assert_eq!(np[0].tags, vec![("tag key".to_string(), "tag,va=l ue".to_string())]);
}

#[test]
fn precision_scales_and_overflow_is_a_line_error() {
    let mut s = Schemas::new();
    let mut p = Producers::new(0);
    let d = dec(b"m v=1 2\nm v=1 9223372036854775807\n", 1, Precision::S, 0, &mut s, &mut p, &Limits::default());
    assert_eq!(col::<Int64Array>(&d.batches[0].1, "ts").value(0), 2_000_000_000);
    assert_eq!(d.body.errors.len(), 1);
    assert_eq!(d.body.errors[0].line, 2);
    assert!(d.body.errors[0].message.contains("out of range"));
}

#[test]
fn malformed_lines_get_their_line_numbers() {
    let body = "ok v=1 1\n\
                nofields\n\
                m v= 1\n\
                m v=1 notanumber\n\
                m,t v=1\n\
                m,t= v=1\n\
                m v=\"open\n\
                m v=1,\n\
                m v=nan\n\
                m v=1i9\n\
                ,t=1 v=1\n\
                m v=99999999999999999999i\n\
                m v=18446744073709551615u\n\
                m v=1 1 extra\n\
                # a comment\n\
                \n\
                m v=2 2\n";
    let (d, _, _) = run(body);
    let lines: Vec<u64> = d.body.errors.iter().map(|e| e.line).collect();
    assert_eq!(lines, vec![2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]);
    assert_eq!(d.body.rows, 2);
    assert_eq!(d.body.lines, 15);
    assert_eq!(d.body.last_line, 17);
}

#[test]
fn invalid_utf8_and_long_lines_are_rejected_alone() {
    let mut s = Schemas::new();
    let mut p = Producers::new(0);
    let mut body = b"m v=1 1\nm,t=\xff v=1 2\n".to_vec();
    body.extend(std::iter::repeat_n(b'x', 100));
    body.extend(b" v=1\nm v=3 3");
    let limits = Limits { max_line: 50, ..Limits::default() };
    let d = dec(&body, 10, Precision::Ns, 0, &mut s, &mut p, &limits);
    assert_eq!(d.body.rows, 2);
    let lines: Vec<u64> = d.body.errors.iter().map(|e| e.line).collect();
    assert_eq!(lines, vec![11, 12]);
    assert!(d.body.errors[0].message.contains("UTF-8"));
    assert!(d.body.errors[1].message.contains("longer than"));
}

#[test]
fn limits_on_producers_columns_and_errors() {
    let mut s = Schemas::new();
    let mut p = Producers::new(0);
    let limits = Limits { max_producers: 2, max_columns: 2, max_errors: 1, ..Limits::default() };
    let d = dec(
        b"m,h=1 a=1\nm,h=2 a=1\nm,h=3 a=1\nm,h=1 a=1,b=1,c=1\nm,h=1 b=1\n",
        1,
        Precision::Ns,
        0,
        &mut s,
        &mut p,
        &limits,
    );
    assert_eq!(d.body.rows, 3);
    assert_eq!(d.body.error_count, 2);
    assert_eq!(d.body.errors.len(), 1);
    assert!(d.body.errors[0].message.contains("tag sets"));
}

#[test]
fn field_names_become_identifiers() {
    assert_eq!(ident("usage_user", true), "usage_user");
    assert_eq!(ident("2serviceMapIdAddr", true), "_2serviceMapIdAddr");
    assert_eq!(ident("bytes-sent.total", true), "bytes_sent_total");
    assert_eq!(ident("ts", true), "ts_");
    assert_eq!(ident("type", true), "type_");
    assert_eq!(ident("ts", false), "ts");
    assert_eq!(ident(&"x".repeat(100), true).len(), 63);
}

#[test]
fn keys_made_the_same_identifier_keep_columns_of_their_own() {
    // `a.b`, `a_b`, `a-b` and `ts`/`ts_` each name another field: none may take another's column.
    let (d, s, _) = run("m a.b=1,a_b=2,ts=3,ts_=4 1\nm a-b=5 2\nm a_b=6,a.b=7 3\n");
    assert_eq!(d.body.errors, vec![]);
    let b = &d.batches[0].1;
    let schema = b.schema();
    let got: Vec<&str> = schema.fields().iter().skip(2).map(|f| f.name().as_str()).collect();
    assert_eq!(got, ["a_b", "a_b_2", "ts_", "ts__2", "a_b_3"]);
    let m = s.get("m").unwrap();
    let keys: Vec<Option<&str>> = m.keys.iter().map(|k| k.as_deref()).collect();
    assert_eq!(keys, [Some("a.b"), Some("a_b"), Some("ts"), Some("ts_"), Some("a-b")]);
    assert_eq!(col::<Float64Array>(b, "a_b").values().to_vec()[..], [1.0, 0.0, 7.0][..]);
    assert_eq!(col::<Float64Array>(b, "a_b_2").value(2), 6.0);
    assert_eq!(col::<Float64Array>(b, "ts__2").value(0), 4.0);
    assert_eq!(col::<Float64Array>(b, "a_b_3").value(1), 5.0);
    assert!(col::<Float64Array>(b, "a_b").is_null(1));
}

#[test]
fn declared_keys_map_back_to_their_columns() {
    let mut s = Schemas::new();
    let keys = [("a_b".to_string(), "a.b".to_string())].into_iter().collect();
    s.declare("m", &[("a_b".into(), FieldType::Float), ("ts_".into(), FieldType::Int)], &keys).unwrap();
    let m = s.get("m").unwrap();
    assert_eq!(m.column_of("a.b"), Some(0));
    assert_eq!(m.column_of("a_b"), None); // a column of another key
    assert_eq!(m.column_of("ts_"), Some(1)); // a column declared without a key is its name's
    assert_eq!(m.free_name("a_b"), "a_b_2");
    assert_eq!(m.free_name(&"y".repeat(70)), "y".repeat(63));
}

#[test]
fn measurement_names_made_the_same_identifier_keep_types_of_their_own() {
    let (d, s, _) = run("cpu.load v=1 1\ncpu_load v=2 2\ncpu-load v=3 3\ncpu.load v=4 4\n");
    assert_eq!(d.body.errors, vec![]);
    let mut got: Vec<(&str, usize)> = d.batches.iter().map(|(n, b)| (n.as_str(), b.num_rows())).collect();
    got.sort_unstable();
    assert_eq!(got, [("cpu_load", 2), ("cpu_load_2", 1), ("cpu_load_3", 1)]);
    assert_eq!(s.type_of("cpu.load"), Some("cpu_load"));
    assert_eq!(s.type_of("cpu_load"), Some("cpu_load_2"));
    assert_eq!(s.key_of("cpu_load"), Some("cpu.load"));
    assert_eq!(s.key_of("cpu_load_3"), Some("cpu-load"));
    let mut declared = Schemas::new();
    declared.declare_keyed("cpu_load", "cpu.load", &[("v".into(), FieldType::Float)], &Default::default()).unwrap();
    assert_eq!(declared.type_of("cpu.load"), Some("cpu_load"));
    assert_eq!(declared.type_of("cpu_load"), None);
    assert_eq!(declared.free_name("cpu_load"), "cpu_load_2");
    assert_eq!(declared.free_name("Events"), "Events_"); // (a trace's view of every type is `events`)
    assert_eq!(declared.free_name("CPU_LOAD"), "CPU_LOAD_2"); // (SQL names ignore case)
    assert_eq!(declared.get("cpu_load").unwrap().free_name("V"), "V_2");
}

#[test]
fn floats_and_bools() {
    let (d, _, _) = run("m a=1,b=-1.5e3,c=.5,d=+2.,e=TRUE,f=False,g=1E-2\n");
    assert_eq!(d.body.errors, vec![]);
    let b = &d.batches[0].1;
    assert_eq!(col::<Float64Array>(b, "b").value(0), -1500.0);
    assert_eq!(col::<Float64Array>(b, "c").value(0), 0.5);
    assert_eq!(col::<Float64Array>(b, "g").value(0), 0.01);
    assert!(col::<BooleanArray>(b, "e").value(0));
    assert!(!col::<BooleanArray>(b, "f").value(0));
}

#[test]
fn several_measurements_one_batch_each_in_first_seen_order() {
    let (d, _, _) = run("b v=1\na v=1\nb v=2\r\n");
    let names: Vec<_> = d.batches.iter().map(|(n, b)| (n.as_str(), b.num_rows())).collect();
    assert_eq!(names, [("b", 2), ("a", 1)]);
}

#[test]
fn a_line_refused_for_its_types_interns_no_producer() {
    let mut s = Schemas::new();
    s.declare("m", &[("v".into(), FieldType::Float)], &Default::default()).unwrap();
    let mut p = Producers::new(0);
    let d = dec(b"m,h=new v=1i\nm,h=other v=1\n", 1, Precision::Ns, 0, &mut s, &mut p, &Limits::default());
    assert_eq!(d.body.rows, 1);
    let new = p.take_new();
    assert_eq!(new.len(), 1);
    assert_eq!((new[0].id, new[0].name.as_str()), (0, "h=other"));
}

#[test]
fn fast_float_agrees_with_the_parser() {
    for s in ["0", "1.5", "-0.001", "123456789.123456", "999999999999999", "+7.25", "0.1", "3.141592653589793"] {
        let want: f64 = s.parse().unwrap();
        match fast_float(s.as_bytes()) {
            Some(x) => assert_eq!(x.to_bits(), want.to_bits(), "{s}"),
            None => assert!(s.replace(['.', '-', '+'], "").len() > 15, "{s}"),
        }
    }
    assert_eq!(fast_float(b"1e3"), None);
    assert_eq!(fast_float(b"."), None);
    assert_eq!(fast_float(b"1.2.3"), None);
}

#[test]
fn memchr_finds_every_position() {
    let hay: Vec<u8> = (0..40).map(|i| if i % 13 == 12 { b'\n' } else { b'a' }).collect();
    for start in 0..hay.len() {
        assert_eq!(memchr(b'\n', &hay[start..]), hay[start..].iter().position(|&c| c == b'\n'));
    }
}

#[test]
fn fast_path_keeps_types_nulls_and_producers_right() {
    let (d, _, mut p) =
        run("m,h=a x=1,y=2i 1\nm,h=a x=2,y=3i 2\nm,h=b x=3,y=4i 3\nm,h=a x=4,y=\"s\" 4\nm,h=a y=5i,x=5 5\n\
                             m,h=a x=6 6\nm,h=a x=7,x=8,y=9i 7\nm,h=a x=9,y=10i 8\n");
    assert_eq!(d.body.errors.len(), 1);
    assert_eq!(d.body.errors[0].line, 4);
    let b = &d.batches[0].1;
    assert_eq!(col::<Float64Array>(b, "x").values().to_vec(), vec![1.0, 2.0, 3.0, 5.0, 6.0, 8.0, 9.0]);
    let y = col::<Int64Array>(b, "y");
    assert_eq!((y.value(3), y.is_null(4), y.value(5), y.value(6)), (5, true, 9, 10));
    assert_eq!(col::<Int32Array>(b, "producer").values().to_vec(), vec![0, 0, 1, 0, 0, 0, 0]);
    assert_eq!(p.take_new().len(), 2);
}

#[test]
fn many_bodies_share_batches_but_keep_their_lines_errors_and_counts() {
    let s = Mutex::new(Schemas::new());
    let p = Mutex::new(Producers::new(0));
    let one = b"cpu,host=a v=1 10\nbad line\nmem,host=a used=5i 11\n";
    let two = b"cpu,host=b v=2,extra=9 5\ncpu,host=a v=x 6\n";
    let three = b"# nothing\n";
    let inputs = [ns(one), Input { body: two, first_line: 40, precision: Precision::S, default_ts: 0 }, ns(three)];
    let d = decode_many(&inputs, &s, &p, None, &Limits::default());
    assert_eq!(names(&d), ["cpu", "mem"]);
    let cpu = &d.batches[0].1;
    assert_eq!(cpu.num_rows(), 2); // one row of each body, in input order
    assert_eq!(col::<Int64Array>(cpu, "ts").values(), &[10, 5_000_000_000]); // each body its precision
    assert_eq!(col::<Float64Array>(cpu, "v").values(), &[1.0, 2.0]);
    let extra = col::<Float64Array>(cpu, "extra"); // widened by the second body: null before
    assert!(extra.is_null(0) && extra.value(1) == 9.0);
    assert_eq!(d.bodies.len(), 3);
    let (b1, b2, b3) = (&d.bodies[0], &d.bodies[1], &d.bodies[2]);
    assert_eq!((b1.lines, b1.rows, b1.error_count, b1.last_line), (3, 2, 1, 3));
    assert_eq!(b1.errors[0].line, 2);
    assert_eq!(b1.rows_by_batch, vec![(0, 1), (1, 1)]);
    assert_eq!((b2.lines, b2.rows, b2.error_count, b2.last_line), (2, 1, 1, 41));
    assert_eq!(b2.errors[0].line, 41); // numbered from the body's first line
    assert_eq!(b2.rows_by_batch, vec![(0, 1)]);
    assert_eq!((b3.lines, b3.rows, b3.rows_by_batch.len()), (0, 0, 0));
    assert_eq!(d.max_producer, 1);
}

#[test]
fn a_measurement_whose_every_line_failed_makes_no_batch() {
    let s = Mutex::new(Schemas::new());
    let p = Mutex::new(Producers::new(0));
    let body = b"cpu v=1 1\nmem x=1i 2\n";
    let conflict = b"mem x=\"text\" 3\ncpu v=2 4\n";
    let inputs = [ns(body)];
    decode_many(&inputs, &s, &p, None, &Limits::default());
    let inputs = [ns(conflict)];
    let d = decode_many(&inputs, &s, &p, None, &Limits::default());
    assert_eq!(names(&d), ["cpu"]);
    assert_eq!(d.bodies[0].rows_by_batch, vec![(0, 1)]);
    assert_eq!(d.bodies[0].error_count, 1);
}

#[test]
fn numbered_batches_have_seq_per_producer_and_one_schema_per_layout() {
    use crate::store::seqnum::SeqCounters;
    let s = Mutex::new(Schemas::new());
    let p = Mutex::new(Producers::new(0));
    let seq = Mutex::new(SeqCounters::new());
    lock(&seq).seed(1, 7); // host=b continues a stored numbering
    let body = b"cpu,host=a v=1 1\ncpu,host=b v=2 2\ncpu,host=a v=3 3\nbad\n";
    let inputs = [ns(body)];
    let d = decode_many(&inputs, &s, &p, Some(&seq), &Limits::default());
    let cpu = &d.batches[0].1;
    let fields: Vec<_> = cpu.schema().fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(fields, ["ts", "producer", "seq", "v"]);
    assert!(!cpu.schema().field(2).is_nullable() && cpu.schema().field(3).is_nullable());
    assert_eq!(col::<Int64Array>(cpu, "seq").values(), &[0, 7, 1]);
    // The next call continues each producer; an unchanged layout reuses the schema itself.
    let d2 = decode_many(&inputs, &s, &p, Some(&seq), &Limits::default());
    assert_eq!(col::<Int64Array>(&d2.batches[0].1, "seq").values(), &[2, 8, 3]);
    assert!(Arc::ptr_eq(&cpu.schema(), &d2.batches[0].1.schema()));
    // A new column makes a new schema.
    let wide = [ns(b"cpu,host=a v=1,w=2 9\n")];
    let d3 = decode_many(&wide, &s, &p, Some(&seq), &Limits::default());
    assert_eq!(d3.batches[0].1.num_columns(), 5);
    assert_eq!(col::<Int64Array>(&d3.batches[0].1, "seq").values(), &[4]);
    // Unnumbered decodes keep the two-column head.
    let d4 = decode_many(&inputs, &s, &p, None, &Limits::default());
    assert_eq!(d4.batches[0].1.schema().field(2).name(), "v");
    assert_eq!(lock(&seq).peek(0), 5);
    // A producer's rows are numbered in line order across measurements.
    let mixed = b"cpu,host=a v=1 1\nmem,host=a x=1i 2\ncpu,host=a v=2 3\n";
    let inputs = [ns(mixed)];
    let d5 = decode_many(&inputs, &s, &p, Some(&seq), &Limits::default());
    assert_eq!(col::<Int64Array>(&d5.batches[0].1, "seq").values(), &[5, 7]);
    assert_eq!(col::<Int64Array>(&d5.batches[1].1, "seq").values(), &[6]);
}

#[test]
fn a_repeated_field_key_keeps_its_last_value_as_influxdb_does() {
    // (InfluxDB 1.8.3 answers `SELECT v` with 2; the first value stood here)
    let (d, _s, _p) = run("m,t=a v=1,v=2,w=3i\nm,t=a v=4,w=5i,w=6i\n");
    assert_eq!(d.body.errors, vec![]);
    let (_, b) = &d.batches[0];
    let v = col::<Float64Array>(b, "v");
    assert_eq!((v.value(0), v.value(1)), (2.0, 4.0));
    let w = col::<arrow_array::Int64Array>(b, "w");
    assert_eq!((w.value(0), w.value(1)), (3, 6));
    // a repeated key of another type is refused, and nothing of its line is kept
    let (d, _s, _p) = run("m v=1,v=\"s\"\n");
    assert_eq!(d.body.rows, 0);
    assert!(d.body.errors[0].message.contains("given twice with different types"), "{:?}", d.body.errors);
}

#[test]
fn a_string_field_may_hold_newlines_as_influxdb_reads_them() {
    let body = "log,host=a msg=\"first\nsecond\\\"\nthird\",n=1i 1\nlog,host=a msg=\"plain\" 2\nlog n=x 3\n";
    let (d, _s, _p) = run(body);
    assert_eq!((d.body.lines, d.body.rows), (3, 2));
    // the bad line is counted as an editor shows it: line 5 (the first string spans lines 1-3)
    assert_eq!(d.body.errors.iter().map(|e| e.line).collect::<Vec<_>>(), vec![5]);
    let (_, b) = &d.batches[0];
    let msg = col::<StringArray>(b, "msg");
    assert_eq!((msg.value(0), msg.value(1)), ("first\nsecond\"\nthird", "plain"));
    assert_eq!(col::<Int64Array>(b, "n").value(0), 1);
}

#[test]
fn an_unmatched_quote_is_refused_alone_and_the_next_lines_are_kept() {
    let (d, _s, _p) = run("m s=\"open 1\nm v=1 2\nm v=2 3\n");
    assert_eq!((d.body.lines, d.body.rows), (3, 2));
    assert_eq!(d.body.errors.iter().map(|e| e.line).collect::<Vec<_>>(), vec![1]);
}

#[test]
fn line_end_follows_influxdbs_scan_line() {
    for (buf, want) in [
        (&b"m v=1\nm v=2"[..], 5),
        (b"m s=\"a\nb\" 1\nx", 11),
        (b"m,t=\"a\nb v=1", 6),        // a quote in a tag is no string
        (b"m s=\"a\\\"\nb\" 1\n", 13), // an escaped quote does not close it
        (b"m a=1,s=\"x\ny\"\n", 13),
        (b"m s=\"open\nm v=1", 9), // never closed: the first newline
        (b"no newline", 10),
    ] {
        assert_eq!(line_end(buf), want, "{:?}", String::from_utf8_lossy(buf));
    }
}

#[test]
fn whole_lines_holds_back_a_line_whose_string_is_open() {
    assert_eq!(whole_lines(b"m v=1\nm v=2", 100), 6);
    assert_eq!(whole_lines(b"m v=1\nm s=\"a\nb", 100), 6); // the string may close in the next bytes
    assert_eq!(whole_lines(b"m v=1\nm s=\"a\nb\" 1\n", 100), 18);
    assert_eq!(whole_lines(b"m s=\"a\nb", 3), 7); // longer than a line may be: ends at its newline
    assert_eq!(whole_lines(b"no newline", 100), 0);
}
