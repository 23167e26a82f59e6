use arrow_array::{Array, BooleanArray, Int64Array, StringArray};
use prost::Message;

use super::proto::*;
use super::*;
use crate::formats::ChunkParser;

fn frame(packets: &[TracePacket]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in packets {
        let b = p.encode_to_vec();
        out.push(0x0a);
        prost::encoding::encode_varint(b.len() as u64, &mut out);
        out.extend_from_slice(&b);
    }
    out
}

fn parse(bytes: &[u8], chunk: usize) -> (PerfettoParser, FastMap<String, RecordBatch>) {
    let mut p = PerfettoParser::new(false, 1000, 1 << 20);
    for c in bytes.chunks(chunk.max(1)) {
        p.feed(c);
    }
    p.finish();
    let b = p.take_batches(true).into_iter().collect();
    (p, b)
}

fn strs(b: &RecordBatch, c: &str) -> Vec<String> {
    let a = b.column_by_name(c).unwrap().as_any().downcast_ref::<StringArray>().unwrap();
    (0..a.len()).map(|i| if a.is_null(i) { "NULL".into() } else { a.value(i).to_string() }).collect()
}

fn ints(b: &RecordBatch, c: &str) -> Vec<i64> {
    let a = b.column_by_name(c).unwrap().as_any().downcast_ref::<Int64Array>().unwrap();
    (0..a.len()).map(|i| a.value(i)).collect()
}

fn ev(ts: u64, ty: i32, name_iid: Option<u64>, name: Option<&str>, seq: u32, flags: u32) -> TracePacket {
    TracePacket {
        timestamp: Some(ts),
        trusted_packet_sequence_id: Some(seq),
        sequence_flags: Some(flags),
        track_event: Some(TrackEvent {
            r#type: Some(ty),
            name_iid,
            name: name.map(String::from),
            track_uuid: Some(7),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn slices_nest_interned_names_resolve_and_state_rules_hold() {
    let mut first = ev(100, TYPE_SLICE_BEGIN, Some(1), None, 1, SEQ_INCREMENTAL_STATE_CLEARED);
    first.interned_data = Some(InternedData {
        event_names: vec![Interned { iid: Some(1), name: Some("outer".into()) }],
        ..Default::default()
    });
    let desc = TracePacket {
        track_descriptor: Some(TrackDescriptor {
            uuid: Some(7),
            thread: Some(ThreadDescriptor { pid: Some(10), tid: Some(11), thread_name: Some("worker".into()) }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut dropped = ev(400, TYPE_INSTANT, Some(1), None, 1, SEQ_NEEDS_INCREMENTAL_STATE);
    dropped.previous_packet_dropped = Some(1);
    let packets = vec![
        desc,
        first,
        ev(150, TYPE_SLICE_BEGIN, None, Some("inner"), 1, SEQ_NEEDS_INCREMENTAL_STATE),
        ev(200, TYPE_SLICE_END, None, None, 1, 0),
        ev(300, TYPE_SLICE_END, None, None, 1, 0),
        dropped,
        ev(500, TYPE_SLICE_END, None, None, 1, 0),
        ev(600, TYPE_SLICE_BEGIN, None, Some("never ended"), 1, 0),
    ];
    let bytes = frame(&packets);
    assert!(decl::sniff(&bytes));
    for chunk in [1, 3, 64, 1 << 20] {
        let (p, b) = parse(&bytes, chunk);
        let s = &b["slice"];
        assert_eq!(strs(s, "name"), ["inner", "outer", "never ended"], "chunk {chunk}");
        assert_eq!(ints(s, "ts"), [150, 100, 600]);
        assert_eq!(ints(s, "dur"), [50, 200, 0]);
        let closed = s.column_by_name("closed").unwrap().as_any().downcast_ref::<BooleanArray>().unwrap();
        assert!(closed.value(0) && closed.value(1) && !closed.value(2));
        let st: FastMap<String, u64> = p.stats().into_iter().collect();
        assert_eq!((st["skipped_without_state"], st["unmatched_ends"], st["unclosed_slices"]), (1, 1, 1));
        let prods = p.producers();
        assert_eq!(prods[0].name, "worker");
        assert_eq!(prods[0].kind, "thread");
        assert_eq!(prods[prods[0].parent.unwrap() as usize].name, "pid 10");
    }
}

#[test]
fn sched_switch_makes_per_cpu_thread_slices() {
    let sw = |ts: u64, prev: i32, state: i64, next: i32, comm: &str| FtraceEvent {
        timestamp: Some(ts),
        pid: None,
        sched_switch: Some(SchedSwitch {
            prev_pid: Some(prev),
            prev_state: Some(state),
            next_pid: Some(next),
            next_comm: Some(comm.into()),
            ..Default::default()
        }),
        sched_waking: None,
    };
    let bundle = TracePacket {
        ftrace_events: Some(FtraceEventBundle {
            cpu: Some(1),
            event: vec![sw(10, 0, 0, 5, "a"), sw(30, 5, 1, 6, "b"), sw(45, 6, 0, 0, "swapper")],
        }),
        ..Default::default()
    };
    let (_, b) = parse(&frame(&[bundle]), 5);
    let s = &b["sched_slice"];
    assert_eq!(strs(s, "comm"), ["a", "b"]);
    assert_eq!(ints(s, "dur"), [20, 15]);
    assert_eq!(strs(s, "end_state"), ["S", "R"]);
}

#[test]
fn garbage_and_cut_traces_are_rejected() {
    let (p, _) = parse(b"\x08\x01garbage", 3);
    assert!(p.rejects.first[0].reason.contains("not a Perfetto trace"));
    let good = frame(&[ev(1, TYPE_INSTANT, None, Some("x"), 1, 0)]);
    let (p, b) = parse(&good[..good.len() - 2], 4);
    assert!(b.is_empty());
    assert!(p.rejects.first[0].reason.contains("ends inside a packet"), "{:?}", p.rejects.first);
    assert!(!decl::sniff(b"\x0a\x04\x08\x01\x10\x02"));
}

/// What a packet says, as `wire` reads it.
fn said_wire(p: &wire::Packet<'_>) -> String {
    let e = p.track_event.as_ref().map(|e| {
        let cats: Vec<String> = e
            .categories()
            .map(|c| match c {
                wire::Category::Name(n) => format!("n:{n}"),
                wire::Category::Iid(i) => format!("i:{i}"),
            })
            .collect();
        let anns: Vec<String> = e
            .annotations()
            .map(|a| {
                format!(
                    "{:?}",
                    (
                        a.name_iid,
                        a.name,
                        a.bool_value,
                        a.uint_value,
                        a.int_value,
                        a.double_value.map(f64::to_bits),
                        a.string_value,
                        a.pointer_value
                    )
                )
            })
            .collect();
        format!(
            "{:?}",
            (
                e.name,
                e.name_iid,
                e.r#type,
                e.track_uuid,
                e.counter_value,
                e.double_counter_value.map(f64::to_bits),
                cats,
                anns,
                (e.flow_ids(false), e.flow_ids(true))
            )
        )
    });
    let f = p.ftrace_events.as_ref().map(|b| {
        let evs: Vec<String> = b
            .event
            .iter()
            .map(|e| {
                let s = e.sched_switch.as_ref().map(|s| {
                    (s.prev_comm, s.prev_pid, s.prev_prio, s.prev_state, s.next_comm, s.next_pid, s.next_prio)
                });
                let w = e.sched_waking.as_ref().map(|w| (w.comm, w.pid, w.prio, w.target_cpu));
                format!("{:?}", (e.timestamp, e.pid, s, w))
            })
            .collect();
        format!("{:?}", (b.cpu, evs))
    });
    format!(
        "{:?}",
        (
            (p.timestamp, p.trusted_packet_sequence_id, p.sequence_flags),
            (p.incremental_state_cleared, p.previous_packet_dropped, p.timestamp_clock_id),
            e,
            f,
            (&p.interned_data, &p.trace_packet_defaults, &p.track_descriptor, &p.process_tree, &p.clock_snapshot)
        )
    )
}

/// The same of prost's reading.
fn said_prost(p: &TracePacket) -> String {
    let e = p.track_event.as_ref().map(|e| {
        let cats: Vec<String> = e
            .categories
            .iter()
            .map(|n| format!("n:{n}"))
            .chain(e.category_iids.iter().map(|i| format!("i:{i}")))
            .collect();
        let anns: Vec<String> = e
            .debug_annotations
            .iter()
            .map(|a| {
                format!(
                    "{:?}",
                    (
                        a.name_iid,
                        a.name.as_deref(),
                        a.bool_value,
                        a.uint_value,
                        a.int_value,
                        a.double_value.map(f64::to_bits),
                        a.string_value.as_deref(),
                        a.pointer_value
                    )
                )
            })
            .collect();
        format!(
            "{:?}",
            (
                e.name.as_deref(),
                e.name_iid,
                e.r#type,
                e.track_uuid,
                e.counter_value,
                e.double_counter_value.map(f64::to_bits),
                cats,
                anns,
                (
                    [&e.flow_ids_old[..], &e.flow_ids[..]].concat(),
                    [&e.terminating_flow_ids_old[..], &e.terminating_flow_ids[..]].concat()
                )
            )
        )
    });
    let f = p.ftrace_events.as_ref().map(|b| {
        let evs: Vec<String> = b
            .event
            .iter()
            .map(|e| {
                let s = e.sched_switch.as_ref().map(|s| {
                    (
                        s.prev_comm.as_deref(),
                        s.prev_pid,
                        s.prev_prio,
                        s.prev_state,
                        s.next_comm.as_deref(),
                        s.next_pid,
                        s.next_prio,
                    )
                });
                let w = e.sched_waking.as_ref().map(|w| (w.comm.as_deref(), w.pid, w.prio, w.target_cpu));
                format!("{:?}", (e.timestamp, e.pid, s, w))
            })
            .collect();
        format!("{:?}", (b.cpu, evs))
    });
    format!(
        "{:?}",
        (
            (p.timestamp, p.trusted_packet_sequence_id, p.sequence_flags),
            (p.incremental_state_cleared, p.previous_packet_dropped, p.timestamp_clock_id),
            e,
            f,
            (&p.interned_data, &p.trace_packet_defaults, &p.track_descriptor, &p.process_tree, &p.clock_snapshot)
        )
    )
}

#[test]
fn the_hand_decoder_reads_what_prost_reads_or_leaves_the_packet_to_it() {
    let mut e = ev(100, TYPE_SLICE_BEGIN, Some(1), Some("lit"), 3, SEQ_INCREMENTAL_STATE_CLEARED);
    let te = e.track_event.as_mut().unwrap();
    te.category_iids = vec![1, 300];
    te.categories = vec!["c".into()];
    te.counter_value = Some(-5);
    te.double_counter_value = Some(1.5);
    te.flow_ids = vec![9, u64::MAX];
    te.flow_ids_old = vec![8, 300];
    te.terminating_flow_ids = vec![7];
    te.terminating_flow_ids_old = vec![1 << 40];
    te.debug_annotations = vec![
        DebugAnnotation { name: Some("k".into()), int_value: Some(-3), ..Default::default() },
        DebugAnnotation {
            name_iid: Some(2),
            string_value: Some("v".into()),
            double_value: Some(0.25),
            ..Default::default()
        },
    ];
    e.interned_data = Some(InternedData {
        event_names: vec![Interned { iid: Some(1), name: Some("n".into()) }],
        ..Default::default()
    });
    e.timestamp_clock_id = Some(64);
    e.previous_packet_dropped = Some(1);
    e.incremental_state_cleared = Some(true);
    let ft = TracePacket {
        ftrace_events: Some(FtraceEventBundle {
            cpu: Some(2),
            event: vec![
                FtraceEvent {
                    timestamp: Some(5),
                    pid: Some(7),
                    sched_switch: Some(SchedSwitch {
                        prev_comm: Some("a".into()),
                        prev_pid: Some(-1),
                        prev_prio: Some(120),
                        prev_state: Some(1 << 40),
                        next_comm: Some("b".into()),
                        next_pid: Some(9),
                        next_prio: Some(100),
                    }),
                    sched_waking: None,
                },
                FtraceEvent {
                    timestamp: Some(6),
                    pid: None,
                    sched_switch: None,
                    sched_waking: Some(SchedWaking {
                        comm: Some("w".into()),
                        pid: Some(3),
                        prio: Some(1),
                        target_cpu: Some(0),
                    }),
                },
            ],
        }),
        trace_packet_defaults: Some(TracePacketDefaults {
            track_event_defaults: Some(TrackEventDefaults { track_uuid: Some(4) }),
            timestamp_clock_id: Some(6),
        }),
        ..Default::default()
    };
    let desc = TracePacket {
        track_descriptor: Some(TrackDescriptor {
            uuid: Some(7),
            process: Some(ProcessDescriptor { pid: Some(1), cmdline: vec!["x".into()], process_name: None }),
            ..Default::default()
        }),
        clock_snapshot: Some(ClockSnapshot {
            clocks: vec![Clock { clock_id: Some(6), timestamp: Some(10), ..Default::default() }],
            primary_trace_clock: Some(6),
        }),
        ..Default::default()
    };
    let bases: Vec<Vec<u8>> = [e, ft, desc].iter().map(|p| p.encode_to_vec()).collect();
    // Two fields protobuf merges (the track event given twice; an unknown group) and a packed list.
    let mut merged = bases[0].clone();
    merged.extend_from_slice(&[0x5a, 0x02, 0x48, 0x03]); // track_event { type: 3 } again
    merged.extend_from_slice(&[0xfb, 0x06, 0x08, 0x01, 0xfc, 0x06]); // field 111, a group
    let mut packed = bases[1].clone();
    packed.extend_from_slice(&[0x5a, 0x04, 0x1a, 0x02, 0x05, 0x06]); // category_iids packed [5, 6]
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rnd = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n.max(1) as u64) as usize
    };
    let (mut read, mut left, mut refused) = (0, 0, 0);
    for i in 0..40_000 {
        let mut b = [&bases[..], &[merged.clone(), packed.clone()]].concat()[i % 5].clone();
        for _ in 0..(i % 4) {
            match rnd(4) {
                0 if !b.is_empty() => {
                    let k = rnd(b.len());
                    b[k] = rnd(256) as u8;
                }
                1 if !b.is_empty() => {
                    let k = rnd(b.len());
                    b.truncate(k);
                }
                2 => {
                    let k = rnd(b.len() + 1);
                    b.insert(k, rnd(256) as u8);
                }
                _ if !b.is_empty() => {
                    let k = rnd(b.len());
                    b.remove(k);
                }
                _ => {}
            }
        }
        let prost = TracePacket::decode(b.as_slice());
        match (wire::packet(&b), &prost) {
            (Ok(w), Ok(p)) => {
                read += 1;
                assert_eq!(said_wire(&w), said_prost(p), "packet {b:?}");
            }
            (Ok(w), Err(e)) => panic!("wire read what prost refuses ({e}): {b:?} -> {}", said_wire(&w)),
            (Err(()), Ok(p)) => {
                left += 1;
                let again = p.encode_to_vec();
                let w = wire::packet(&again).expect("prost's own encoding reads");
                assert_eq!(said_wire(&w), said_prost(p));
            }
            (Err(()), Err(_)) => refused += 1,
        }
    }
    // Varints at prost's limit: ten bytes, the last 0 or 1 (2 and an eleventh byte are refused).
    for last in [0u8, 1, 2, 0x80] {
        let mut b = vec![0x40];
        b.extend_from_slice(&[0xff; 9]);
        b.push(last);
        let (w, p) = (wire::packet(&b), TracePacket::decode(b.as_slice()));
        assert_eq!((w.is_ok(), p.is_ok()), (last < 2, last < 2), "last byte {last}");
        if let (Ok(w), Ok(p)) = (w, p) {
            assert_eq!(said_wire(&w), said_prost(&p));
        }
    }
    assert!(read > 5_000 && left > 1_000 && refused > 10_000, "{read} {left} {refused}");
    // The merged packet: prost merges the second track event into the first.
    let (p, b) = parse(&frame(&[TracePacket::decode(merged.as_slice()).unwrap()]), 7);
    assert_eq!(p.counts.instants, 1);
    assert_eq!(strs(&b["instant"], "category"), ["c,[category iid 1],[category iid 300]"]);
}
