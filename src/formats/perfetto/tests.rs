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
