//! The Perfetto parser's hot path decoded by hand: a `TracePacket` read in place, its
//! `TrackEvent` and ftrace `sched_switch`/`sched_waking` borrowed from the packet's bytes
//! (names, categories and comms as `&str` into the trace, nothing allocated per event), the
//! rare messages (descriptors, interned data, defaults, clock snapshots, the process tree)
//! decoded with prost from their bytes.
//!
//! Exactly prost's reading of the schema in `proto.rs`: the key, varint, skip (groups
//! included) and UTF-8 rules are prost's own (`prost::encoding`), wire types are checked field
//! by field as prost's generated code does, scalars are cast as prost casts them, the last of a
//! repeated scalar wins. Where this decoder stops ([`packet`] returns `Err`) the packet goes to
//! prost whole: a packet prost refuses is rejected with prost's message, one it reads (a
//! message field given twice, which protobuf merges) is encoded again by prost and read here.
//! `tests.rs` checks the two agree on mutated packets.
//!
//! Why: prost's `TracePacket::decode` allocated every string and list of every packet (perf of
//! an import of 4M events: `decode` + `merge_field` + `decode_varint` + malloc/free + memcpy of
//! the strings were ~55 % of the parser's samples). The parser alone on 2M events (1.8M packets:
//! slices, instants, counters, 62K ftrace bundles of 4 sched_switch; chunks in memory), CPU
//! seconds, prost and this interleaved at load 12.7-13.1: 0.455 / 0.483 / 0.455 with prost,
//! 0.322 / 0.321 / 0.319 with this (with the interned names shared and the packet's rare
//! messages boxed: a ~700-byte packet moved by value was 9 % of the samples in memmove).

use prost::bytes::Buf;
use prost::encoding::{skip_field, DecodeContext, WireType};
use prost::Message;

use super::proto;

/// `Err`: prost decodes the packet instead (it names what is wrong, or merges what this does not).
pub type R<T> = Result<T, ()>;

/// A field's payload.
#[derive(Clone, Copy)]
enum F<'a> {
    V(u64),
    I64(u64),
    B(&'a [u8]),
    I32,
    Group,
}

/// A varint as prost reads one (`encoding::decode_varint`: at most 10 bytes, the 10th 0 or 1),
/// a one-byte one without a call.
#[inline(always)]
fn varint(b: &mut &[u8]) -> R<u64> {
    match b.first() {
        Some(&x) if x < 0x80 => {
            *b = &b[1..];
            Ok(u64::from(x))
        }
        _ => varint_long(b),
    }
}

fn varint_long(b: &mut &[u8]) -> R<u64> {
    let mut v = 0u64;
    for i in 0..10 {
        let x = *b.get(i).ok_or(())?;
        if i == 9 && x >= 2 {
            return Err(());
        }
        v |= u64::from(x & 0x7f) << (7 * i);
        if x < 0x80 {
            *b = &b[i + 1..];
            return Ok(v);
        }
    }
    Err(())
}

/// A key as prost reads one (`encoding::decode_key`): at most u32, wire type 0-5, tag 1 up.
#[inline(always)]
fn key(b: &mut &[u8]) -> R<(u32, WireType)> {
    let k = varint(b)?;
    if k > u64::from(u32::MAX) || k < 8 {
        return Err(());
    }
    Ok(((k as u32) >> 3, WireType::try_from(k & 7).map_err(drop)?))
}

#[inline(always)]
fn field<'a>(b: &mut &'a [u8]) -> R<(u32, F<'a>)> {
    let (tag, wt) = key(b)?;
    let f = match wt {
        WireType::Varint => F::V(varint(b)?),
        WireType::SixtyFourBit => {
            if b.len() < 8 {
                return Err(());
            }
            F::I64(b.get_u64_le())
        }
        WireType::LengthDelimited => {
            let len = varint(b)?;
            if len > b.len() as u64 {
                return Err(());
            }
            let (body, rest) = b.split_at(len as usize);
            *b = rest;
            F::B(body)
        }
        WireType::ThirtyTwoBit => {
            if b.len() < 4 {
                return Err(());
            }
            b.advance(4);
            F::I32
        }
        WireType::StartGroup | WireType::EndGroup => {
            skip_field(wt, tag, b, DecodeContext::default()).map_err(drop)?;
            F::Group
        }
    };
    Ok((tag, f))
}

#[inline]
fn utf8(s: &[u8]) -> R<&str> {
    std::str::from_utf8(s).map_err(drop)
}

/// A packed run of varints, whole.
fn packed_varints(mut p: &[u8]) -> R<()> {
    while !p.is_empty() {
        varint(&mut p)?;
    }
    Ok(())
}

/// The fields of a message this module read once already (so they are well formed).
fn fields(mut b: &[u8]) -> impl Iterator<Item = (u32, F<'_>)> {
    std::iter::from_fn(move || if b.is_empty() { None } else { field(&mut b).ok() })
}

/// A `TracePacket`: its scalars, the hot messages read in place, the others decoded by prost.
#[derive(Default)]
pub struct Packet<'a> {
    pub timestamp: Option<u64>,
    pub trusted_packet_sequence_id: Option<u32>,
    pub sequence_flags: Option<u32>,
    pub incremental_state_cleared: Option<bool>,
    pub previous_packet_dropped: Option<u32>,
    pub timestamp_clock_id: Option<u32>,
    pub track_event: Option<TrackEvent<'a>>,
    pub ftrace_events: Option<Bundle<'a>>,
    // Boxed: a packet is returned and moved by value, and these made it ~700 bytes to copy.
    pub interned_data: Option<Box<proto::InternedData>>,
    pub trace_packet_defaults: Option<Box<proto::TracePacketDefaults>>,
    pub track_descriptor: Option<Box<proto::TrackDescriptor>>,
    pub process_tree: Option<Box<proto::ProcessTree>>,
    pub clock_snapshot: Option<Box<proto::ClockSnapshot>>,
}

/// A message field decoded by prost; given again, it is merged as protobuf says.
fn merge<M: Message + Default>(slot: &mut Option<Box<M>>, body: &[u8]) -> R<()> {
    slot.get_or_insert_with(Box::default).merge(body).map_err(drop)
}

/// Reads a packet; `Err` where prost must (see the module's comment).
pub fn packet(mut b: &[u8]) -> R<Packet<'_>> {
    let mut p = Packet::default();
    while !b.is_empty() {
        match field(&mut b)? {
            (8, F::V(v)) => p.timestamp = Some(v),
            (10, F::V(v)) => p.trusted_packet_sequence_id = Some(v as u32),
            (13, F::V(v)) => p.sequence_flags = Some(v as u32),
            (41, F::V(v)) => p.incremental_state_cleared = Some(v != 0),
            (42, F::V(v)) => p.previous_packet_dropped = Some(v as u32),
            (58, F::V(v)) => p.timestamp_clock_id = Some(v as u32),
            (11, F::B(m)) if p.track_event.is_none() => p.track_event = Some(track_event(m)?),
            (1, F::B(m)) if p.ftrace_events.is_none() => p.ftrace_events = Some(bundle(m)?),
            (12, F::B(m)) => merge(&mut p.interned_data, m)?,
            (59, F::B(m)) => merge(&mut p.trace_packet_defaults, m)?,
            (60, F::B(m)) => merge(&mut p.track_descriptor, m)?,
            (2, F::B(m)) => merge(&mut p.process_tree, m)?,
            (6, F::B(m)) => merge(&mut p.clock_snapshot, m)?,
            (1 | 2 | 6 | 8 | 10 | 11 | 12 | 13 | 41 | 42 | 58 | 59 | 60, _) => return Err(()),
            _ => {}
        }
    }
    Ok(p)
}

/// A `TrackEvent` read in place; its categories and debug annotations are walked on demand.
#[derive(Default)]
pub struct TrackEvent<'a> {
    body: &'a [u8],
    pub name: Option<&'a str>,
    pub name_iid: Option<u64>,
    pub r#type: Option<i32>,
    pub track_uuid: Option<u64>,
    pub counter_value: Option<i64>,
    pub double_counter_value: Option<f64>,
    /// How many categories it has (literal and interned), and the first read: with one (the
    /// usual case) the categories are not walked again.
    pub category_count: usize,
    pub first_category: Option<Category<'a>>,
    pub has_annotations: bool,
    /// Whether it names flows (`flow_ids`, `terminating_flow_ids` or their `_old` spellings):
    /// read on demand by [`TrackEvent::flow_ids`].
    pub has_flows: bool,
}

fn track_event(body: &[u8]) -> R<TrackEvent<'_>> {
    let mut e = TrackEvent { body, ..Default::default() };
    let mut b = body;
    while !b.is_empty() {
        match field(&mut b)? {
            (3, F::V(v)) => e.category(Category::Iid(v)),
            (3, F::B(mut p)) => {
                while !p.is_empty() {
                    let v = varint(&mut p)?;
                    e.category(Category::Iid(v));
                }
            }
            (22, F::B(s)) => e.category(Category::Name(utf8(s)?)),
            (10, F::V(v)) => e.name_iid = Some(v),
            (23, F::B(s)) => e.name = Some(utf8(s)?),
            (9, F::V(v)) => e.r#type = Some(v as i32),
            (11, F::V(v)) => e.track_uuid = Some(v),
            (30, F::V(v)) => e.counter_value = Some(v as i64),
            (44, F::I64(v)) => e.double_counter_value = Some(f64::from_bits(v)),
            (4, F::B(m)) => {
                annotation(m)?;
                e.has_annotations = true;
            }
            (36 | 42, F::V(_)) | (47 | 48, F::I64(_)) => e.has_flows = true,
            (36 | 42, F::B(p)) => {
                packed_varints(p)?;
                e.has_flows |= !p.is_empty();
            }
            (47 | 48, F::B(p)) if p.len() % 8 == 0 => e.has_flows |= !p.is_empty(),
            (3 | 4 | 9 | 10 | 11 | 22 | 23 | 30 | 36 | 42 | 44 | 47 | 48, _) => return Err(()),
            _ => {}
        }
    }
    Ok(e)
}

/// A category of a track event: interned or literal.
#[derive(Clone, Copy)]
pub enum Category<'a> {
    Iid(u64),
    Name(&'a str),
}

impl<'a> TrackEvent<'a> {
    fn category(&mut self, c: Category<'a>) {
        self.category_count += 1;
        self.first_category.get_or_insert(c);
    }

    /// Its categories: the literal ones, then the interned ones (each in its order).
    pub fn categories(&self) -> impl Iterator<Item = Category<'a>> + 'a {
        let names = fields(self.body).filter_map(|(t, f)| match (t, f) {
            (22, F::B(s)) => utf8(s).ok().map(Category::Name),
            _ => None,
        });
        let iids = fields(self.body).flat_map(|(t, f)| {
            let (one, mut packed): (Option<u64>, &[u8]) = match (t, f) {
                (3, F::V(v)) => (Some(v), &[]),
                (3, F::B(p)) => (None, p),
                _ => (None, &[]),
            };
            one.into_iter()
                .chain(std::iter::from_fn(move || if packed.is_empty() { None } else { varint(&mut packed).ok() }))
                .map(Category::Iid)
        });
        names.chain(iids)
    }

    /// Its flow ids as prost collects them: the `_old` field's (varints, packed or not) then
    /// the new field's (fixed64), each in order; `terminating`: the terminating ones.
    pub fn flow_ids(&self, terminating: bool) -> Vec<u64> {
        let (old, new) = if terminating { (42, 48) } else { (36, 47) };
        let mut out = Vec::new();
        for (t, f) in fields(self.body) {
            match f {
                F::V(v) if t == old => out.push(v),
                F::B(mut p) if t == old => {
                    while !p.is_empty() {
                        match varint(&mut p) {
                            Ok(v) => out.push(v),
                            Err(()) => break,
                        }
                    }
                }
                _ => {}
            }
        }
        for (t, f) in fields(self.body) {
            match f {
                F::I64(v) if t == new => out.push(v),
                F::B(p) if t == new => {
                    out.extend(p.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))))
                }
                _ => {}
            }
        }
        out
    }

    /// Its debug annotations, in order.
    pub fn annotations(&self) -> impl Iterator<Item = Annotation<'a>> + 'a {
        fields(self.body).filter_map(|(t, f)| match (t, f) {
            (4, F::B(m)) => annotation(m).ok(),
            _ => None,
        })
    }
}

/// A `DebugAnnotation` (the value kinds `proto.rs` declares).
#[derive(Default)]
pub struct Annotation<'a> {
    pub name_iid: Option<u64>,
    pub name: Option<&'a str>,
    pub bool_value: Option<bool>,
    pub uint_value: Option<u64>,
    pub int_value: Option<i64>,
    pub double_value: Option<f64>,
    pub string_value: Option<&'a str>,
    pub pointer_value: Option<u64>,
}

fn annotation(mut b: &[u8]) -> R<Annotation<'_>> {
    let mut a = Annotation::default();
    while !b.is_empty() {
        match field(&mut b)? {
            (1, F::V(v)) => a.name_iid = Some(v),
            (10, F::B(s)) => a.name = Some(utf8(s)?),
            (2, F::V(v)) => a.bool_value = Some(v != 0),
            (3, F::V(v)) => a.uint_value = Some(v),
            (4, F::V(v)) => a.int_value = Some(v as i64),
            (5, F::I64(v)) => a.double_value = Some(f64::from_bits(v)),
            (6, F::B(s)) => a.string_value = Some(utf8(s)?),
            (7, F::V(v)) => a.pointer_value = Some(v),
            (1..=7 | 10, _) => return Err(()),
            _ => {}
        }
    }
    Ok(a)
}

/// An `FtraceEventBundle`: its CPU and its events.
pub struct Bundle<'a> {
    pub cpu: Option<u32>,
    pub event: Vec<FtraceEvent<'a>>,
}

fn bundle(mut b: &[u8]) -> R<Bundle<'_>> {
    let mut out = Bundle { cpu: None, event: Vec::new() };
    while !b.is_empty() {
        match field(&mut b)? {
            (1, F::V(v)) => out.cpu = Some(v as u32),
            (2, F::B(m)) => out.event.push(ftrace_event(m)?),
            (1 | 2, _) => return Err(()),
            _ => {}
        }
    }
    Ok(out)
}

/// An `FtraceEvent` with the two events read.
#[derive(Default)]
pub struct FtraceEvent<'a> {
    pub timestamp: Option<u64>,
    pub pid: Option<u32>,
    pub sched_switch: Option<SchedSwitch<'a>>,
    pub sched_waking: Option<SchedWaking<'a>>,
}

#[derive(Default)]
pub struct SchedSwitch<'a> {
    pub prev_comm: Option<&'a str>,
    pub prev_pid: Option<i32>,
    pub prev_prio: Option<i32>,
    pub prev_state: Option<i64>,
    pub next_comm: Option<&'a str>,
    pub next_pid: Option<i32>,
    pub next_prio: Option<i32>,
}

#[derive(Default)]
pub struct SchedWaking<'a> {
    pub comm: Option<&'a str>,
    pub pid: Option<i32>,
    pub prio: Option<i32>,
    pub target_cpu: Option<i32>,
}

fn ftrace_event(mut b: &[u8]) -> R<FtraceEvent<'_>> {
    let mut e = FtraceEvent::default();
    while !b.is_empty() {
        match field(&mut b)? {
            (1, F::V(v)) => e.timestamp = Some(v),
            (2, F::V(v)) => e.pid = Some(v as u32),
            (4, F::B(m)) if e.sched_switch.is_none() => e.sched_switch = Some(sched_switch(m)?),
            (20, F::B(m)) if e.sched_waking.is_none() => e.sched_waking = Some(sched_waking(m)?),
            (1 | 2 | 4 | 20, _) => return Err(()),
            _ => {}
        }
    }
    Ok(e)
}

fn sched_switch(mut b: &[u8]) -> R<SchedSwitch<'_>> {
    let mut s = SchedSwitch::default();
    while !b.is_empty() {
        match field(&mut b)? {
            (1, F::B(c)) => s.prev_comm = Some(utf8(c)?),
            (2, F::V(v)) => s.prev_pid = Some(v as i32),
            (3, F::V(v)) => s.prev_prio = Some(v as i32),
            (4, F::V(v)) => s.prev_state = Some(v as i64),
            (5, F::B(c)) => s.next_comm = Some(utf8(c)?),
            (6, F::V(v)) => s.next_pid = Some(v as i32),
            (7, F::V(v)) => s.next_prio = Some(v as i32),
            (1..=7, _) => return Err(()),
            _ => {}
        }
    }
    Ok(s)
}

fn sched_waking(mut b: &[u8]) -> R<SchedWaking<'_>> {
    let mut w = SchedWaking::default();
    while !b.is_empty() {
        match field(&mut b)? {
            (1, F::B(c)) => w.comm = Some(utf8(c)?),
            (2, F::V(v)) => w.pid = Some(v as i32),
            (3, F::V(v)) => w.prio = Some(v as i32),
            (5, F::V(v)) => w.target_cpu = Some(v as i32),
            (1 | 2 | 3 | 5, _) => return Err(()),
            _ => {}
        }
    }
    Ok(w)
}
