//! Perfetto traces (`.perfetto-trace`, `.pftrace`: the protobuf `Trace` that Perfetto's tracing
//! service, the Perfetto SDK, Chrome, Android and Perfetto's Python `TraceProtoBuilder` write).
//!
//! Owns the streaming parse of a trace into the event types of `decl.rs`. The file is a run of
//! `Trace.packet` fields (field 1, length-delimited); packets are cut as the chunks arrive
//! ([`pbwire::delimited_head`]), one packet kept at most (capped at the `max_line` option), each
//! read in place by [`wire`] (the schema of [`proto`], prost's rules; prost for the rare
//! messages and for what `wire` leaves to it). Per packet:
//!
//! - track events (`TrackEvent`): slice begin/end pairs on a track become one `slice` span
//!   (nested slices on a track are a stack; an end without a begin is counted, a begin never
//!   ended is a `slice` with `closed` false and no duration), instants an `instant`, counter
//!   values a `counter`; names and categories are literal or interned (`name_iid`,
//!   `category_iids` through the sequence's `InternedData`), debug annotations become `args`
//!   (a JSON object text);
//! - the incremental state rules of each sequence (`trusted_packet_sequence_id`): a packet
//!   flagged `SEQ_INCREMENTAL_STATE_CLEARED` (or `incremental_state_cleared`) resets the
//!   sequence's interned names and defaults; after `previous_packet_dropped` the state is
//!   unknown until the next reset, and packets flagged `SEQ_NEEDS_INCREMENTAL_STATE` are skipped
//!   (counted) meanwhile; `trace_packet_defaults` gives the sequence's default track;
//! - track descriptors: every track is a producer (a process track kind `process` with its
//!   pid, a thread track kind `thread` with tid and pid under its process, a counter or plain
//!   track under its parent), named as described;
//! - ftrace `sched_switch` becomes the `sched_slice` spans of each CPU (a thread on the CPU from
//!   its switch-in to its switch-out, with the state it left in) and `sched_waking` an
//!   instant; their producer is the CPU.
//!
//! Times are the packets' `timestamp` in ns of the trace's clock: BOOTTIME, or the
//! `primary_trace_clock` of a `ClockSnapshot`. A packet's clock is its `timestamp_clock_id`,
//! else its sequence's default in `trace_packet_defaults`, else BOOTTIME (ids 64 and up are the
//! sequence's own); stamped in another clock than the trace's, it is converted through the snapshots, as Perfetto's trace processor
//! does: of the snapshots that read both clocks, the last whose reading of the packet's clock
//! is at or before its timestamp (else the first), `ts - reading(clock) + reading(trace clock)`,
//! times the clock's `unit_multiplier_ns`; with no such snapshot the timestamp stays as written
//! and is counted (`unconverted_timestamps`). A clock a snapshot marks incremental (Chrome's
//! sequence clock 64, in µs) stamps deltas: each packet's timestamp adds to the clock's last
//! value, from the snapshot's reading on, and that sum is converted. The ftrace clock is not
//! converted. Flows (`flow_ids`, `terminating_flow_ids`, their `_old` spellings) become the
//! `flow` rows of the Chrome importer's type ([`flows`]). Legacy (JSON-era) events and the other
//! data sources are counted and skipped.
//!
//! Speed (`tracehouse bench import --format perfetto --sizes 2000000,4000000 --repeat 3`: 12 %
//! of the events ftrace sched_switch; file to registered segments, 2 cores; prost's decoding and
//! this interleaved, load 4.6-5.1, best of 3): 2M events 1.34 / 0.93 s with prost, 1.03 / 0.77 s
//! read in place (0.88-0.89 against 0.69-0.70 CPU s); 4M events 2.15 / 1.58 s against 1.29 /
//! 1.25 s (1.53-1.54 against 1.24 CPU s): 2.0-3.2M events/s, 2.9-3.2M per CPU second. The
//! store's checkpoints encode on the writer's threads while the parser runs (the flush left at
//! the end took 0.07-0.29 s of 3.2-5.7 s for 4M events at load 14), so parse and write overlap.

use std::collections::hash_map::Entry;
use std::io::Write as _;
use std::sync::Arc;

use arrow_array::RecordBatch;
use prost::Message;

use super::parser::{Attr, Problem, ProducerRow, Rejects};
use super::pbwire;
use super::table::{FastMap, Table, DUR};

pub mod decl;
mod flows;
pub mod proto;
#[cfg(test)]
mod tests;
mod wire;

/// Event types, in [`decl::PERFETTO`]'s order.
const T_SLICE: usize = 0;
const T_INSTANT: usize = 1;
const T_COUNTER: usize = 2;
const T_SCHED: usize = 3;
const T_WAKING: usize = 4;
const T_FLOW: usize = 5;
/// Bytes of string data after which a batch is cut whatever its rows.
const MAX_STR_BYTES: usize = 64 << 20;

/// Where a producer hangs.
#[derive(Debug, Clone, PartialEq)]
enum Parent {
    None,
    Track(u64),
    Pid(i64),
}

#[derive(Debug, Clone)]
struct Producer {
    kind: &'static str,
    name: String,
    parent: Parent,
    attrs: Vec<(String, Attr)>,
    seq: i64,
}

#[derive(Debug, Default)]
struct Sequence {
    /// Interned strings, shared with the open slices that name them (no copy per event).
    names: FastMap<u64, Arc<str>>,
    categories: FastMap<u64, Arc<str>>,
    annotation_names: FastMap<u64, String>,
    default_track: Option<u64>,
    /// The clock of the sequence's packets without a `timestamp_clock_id` of their own.
    default_clock: Option<u32>,
    /// False after a dropped packet, until the state is cleared.
    valid: bool,
}

#[derive(Debug)]
struct Open {
    ts: i64,
    name: Arc<str>,
    category: Option<Arc<str>>,
    args: Option<String>,
}

#[derive(Debug)]
struct Running {
    ts: i64,
    tid: i64,
    comm: String,
    prio: i64,
}

/// The streaming Perfetto parser.
pub struct PerfettoParser {
    strict: bool,
    batch_rows: usize,
    max_packet: usize,
    carry: Vec<u8>,
    /// Bytes of the current packet still to skip (one over the size limit).
    skipping: usize,
    offset: u64,
    packets: u64,
    tables: [Table; 6],
    rejects: Rejects,
    producers: Vec<Producer>,
    by_track: FastMap<u64, i32>,
    by_cpu: FastMap<u32, i32>,
    sequences: FastMap<u32, Sequence>,
    open: FastMap<u64, Vec<Open>>,
    running: FastMap<u32, Running>,
    stopped: bool,
    counts: Counts,
    clocks: Clocks,
    flows: flows::Flows,
}

#[derive(Debug, Default)]
struct Counts {
    slices: u64,
    instants: u64,
    counters: u64,
    sched_slices: u64,
    sched_wakings: u64,
    unclosed_slices: u64,
    unmatched_ends: u64,
    skipped_without_state: u64,
    unknown_iids: u64,
    other_packets: u64,
    clock_snapshots: u64,
    converted_timestamps: u64,
    unconverted_timestamps: u64,
}

/// The clock snapshots met so far and the trace's clock.
#[derive(Debug)]
struct Clocks {
    trace_clock: u32,
    /// Each snapshot: clock key ([`clock_key`]) -> (reading in ns, unit multiplier).
    snapshots: Vec<FastMap<u64, (i128, i128)>>,
    /// Incremental clocks (a sequence's own, as Chrome stamps its track events: each packet's
    /// timestamp is a delta from the previous one on that clock, in `unit_multiplier_ns`):
    /// clock key -> (the last absolute value in ns, unit multiplier), from the snapshot's reading on.
    incremental: FastMap<u64, (i128, i128)>,
}

/// A clock's key: a builtin clock by its id, a sequence's own clock by sequence and id.
fn clock_key(seq: u32, clock: u32) -> u64 {
    if clock >= proto::FIRST_SEQUENCE_CLOCK {
        (u64::from(seq) << 32) | u64::from(clock)
    } else {
        u64::from(clock)
    }
}

impl Clocks {
    fn snapshot(&mut self, seq: u32, s: &proto::ClockSnapshot) {
        if let Some(c) = s.primary_trace_clock.and_then(|c| u32::try_from(c).ok()).filter(|&c| c > 0) {
            self.trace_clock = c;
        }
        let mut m = FastMap::default();
        for c in &s.clocks {
            if let (Some(id), Some(ts)) = (c.clock_id, c.timestamp) {
                let (key, mult) = (clock_key(seq, id), i128::from(c.unit_multiplier_ns.unwrap_or(1).max(1)));
                m.insert(key, (i128::from(ts) * mult, mult));
                if c.is_incremental == Some(true) {
                    self.incremental.insert(key, (i128::from(ts) * mult, mult));
                } else {
                    self.incremental.remove(&key);
                }
            }
        }
        self.snapshots.push(m);
    }

    /// A packet's `ts` on an incremental clock as that clock's absolute ns (the delta added to
    /// the clock's last value, which it becomes); None for any other clock.
    fn advance(&mut self, seq: u32, clock: u32, ts: u64) -> Option<i128> {
        let (last, mult) = self.incremental.get_mut(&clock_key(seq, clock))?;
        *last += i128::from(ts) * *mult;
        Some(*last)
    }

    /// `ts` of `clock` (on sequence `seq`; `abs`: its value in ns when already known, an
    /// incremental clock's) in the trace clock's ns; None when no snapshot reads both.
    fn convert(&self, seq: u32, clock: u32, ts: u64, abs: Option<i128>) -> Option<i64> {
        let (key, trace) = (clock_key(seq, clock), u64::from(self.trace_clock));
        let mut best: Option<(i128, i128, i128)> = None; // (reading of clock, of trace clock, mult)
        let mut first = None;
        for s in &self.snapshots {
            let (Some(&(c, mult)), Some(&(t, _))) = (s.get(&key), s.get(&trace)) else { continue };
            first.get_or_insert((c, t, mult));
            if c <= abs.unwrap_or(i128::from(ts) * mult) && best.is_none_or(|(b, _, _)| c >= b) {
                best = Some((c, t, mult));
            }
        }
        let (c, t, mult) = best.or(first)?;
        let v = abs.unwrap_or(i128::from(ts) * mult) - c + t;
        Some(v.clamp(0, i128::from(i64::MAX)) as i64)
    }
}

impl PerfettoParser {
    /// A parser cutting batches of `batch_rows` rows; a packet longer than `max_packet` bytes is
    /// rejected and skipped.
    pub fn new(strict: bool, batch_rows: usize, max_packet: usize) -> Self {
        let cap = batch_rows.clamp(1, 1 << 16);
        let t = |i: usize| {
            let et = &decl::PERFETTO.event_types[i];
            Table::new(et.name, et.is_span(), &et.columns(), cap)
        };
        PerfettoParser {
            strict,
            batch_rows: batch_rows.max(1),
            max_packet: max_packet.max(1),
            carry: Vec::new(),
            skipping: 0,
            offset: 0,
            packets: 0,
            tables: [t(T_SLICE), t(T_INSTANT), t(T_COUNTER), t(T_SCHED), t(T_WAKING), t(T_FLOW)],
            rejects: Rejects::default(),
            producers: Vec::new(),
            by_track: FastMap::default(),
            by_cpu: FastMap::default(),
            sequences: FastMap::default(),
            open: FastMap::default(),
            running: FastMap::default(),
            stopped: false,
            counts: Counts::default(),
            clocks: Clocks {
                trace_clock: proto::CLOCK_BOOTTIME,
                snapshots: Vec::new(),
                incremental: FastMap::default(),
            },
            flows: flows::Flows::default(),
        }
    }

    /// Parses a chunk (cut anywhere).
    pub fn feed(&mut self, mut chunk: &[u8]) {
        if self.stopped {
            return;
        }
        if self.skipping > 0 {
            let n = self.skipping.min(chunk.len());
            self.skipping -= n;
            self.offset += n as u64;
            chunk = &chunk[n..];
        }
        while !self.carry.is_empty() && !chunk.is_empty() {
            // A packet begun in an earlier chunk: completed with the bytes it lacks (only those
            // copied; the whole chunk joining it was 2 % of the parse), a header 16 bytes at a time.
            let want = match pbwire::delimited_head(&self.carry, 1) {
                Some(Ok((len, _))) if len > self.max_packet => 0, // `cut` rejects it and skips the rest
                Some(Ok((len, h))) => (h + len).saturating_sub(self.carry.len()),
                _ => 16,
            };
            let n = want.min(chunk.len());
            let mut carry = std::mem::take(&mut self.carry);
            carry.extend_from_slice(&chunk[..n]);
            chunk = &chunk[n..];
            let used = self.cut(&carry, false);
            if self.stopped {
                return;
            }
            carry.drain(..used);
            self.carry = carry;
            if self.skipping > 0 {
                let n = self.skipping.min(chunk.len());
                self.skipping -= n;
                self.offset += n as u64;
                chunk = &chunk[n..];
            }
        }
        if !self.carry.is_empty() {
            return;
        }
        let used = self.cut(chunk, false);
        if !self.stopped {
            self.carry = chunk[used..].to_vec();
        }
    }

    /// Ends the input: a cut packet is rejected, open slices are emitted unclosed.
    pub fn finish(&mut self) {
        if !self.stopped && !self.carry.is_empty() {
            let carry = std::mem::take(&mut self.carry);
            self.cut(&carry, true);
        }
        if self.stopped {
            return;
        }
        let mut open: Vec<(u64, Vec<Open>)> = self.open.drain().collect();
        open.sort_by_key(|(t, _)| *t);
        for (track, stack) in open {
            for o in stack {
                self.counts.unclosed_slices += 1;
                self.slice_row(track, o, None);
            }
        }
        self.flows.finish(&mut self.tables[T_FLOW]);
    }

    /// Batches that reached the batch size (all non-empty ones when `all`).
    pub fn take_batches(&mut self, all: bool) -> Vec<(String, RecordBatch)> {
        let mut out = Vec::new();
        for t in &mut self.tables {
            if all || t.rows() >= self.batch_rows || t.str_bytes >= MAX_STR_BYTES {
                if let Some(b) = t.take() {
                    out.push((t.name.clone(), b));
                }
            }
        }
        out
    }

    /// Cuts and handles the whole packets at the start of `b`; returns the bytes used. At the
    /// end of the input (`last`), what is left is a cut packet.
    fn cut(&mut self, b: &[u8], last: bool) -> usize {
        let mut pos = 0;
        while pos < b.len() && !self.stopped {
            match pbwire::delimited_head(&b[pos..], 1) {
                None if !last => break,
                None => {
                    self.reject("the trace ends inside a packet's header".into());
                    return b.len();
                }
                Some(Err(())) => {
                    self.reject("expected a Trace.packet (field 1, length-delimited): not a Perfetto trace".into());
                    self.stopped = true;
                    return b.len();
                }
                Some(Ok((len, h))) => {
                    if len > self.max_packet {
                        self.reject(format!("packet of {len} bytes, more than the {} accepted", self.max_packet));
                        self.packets += 1;
                        let avail = b.len() - pos - h;
                        if avail >= len {
                            pos += h + len;
                            self.offset += (h + len) as u64;
                            continue;
                        }
                        self.skipping = len - avail;
                        self.offset += (b.len() - pos) as u64;
                        return b.len();
                    }
                    if b.len() - pos - h < len {
                        if last {
                            self.reject(format!(
                                "the trace ends inside a packet ({} of {len} bytes)",
                                b.len() - pos - h
                            ));
                            return b.len();
                        }
                        break;
                    }
                    self.packet(&b[pos + h..pos + h + len]);
                    pos += h + len;
                    self.offset += (h + len) as u64;
                }
            }
        }
        pos
    }

    fn reject(&mut self, reason: String) {
        let p = Problem { line: self.packets + 1, offset: self.offset, reason };
        if !self.rejects.reject(self.strict, p) {
            self.stopped = true;
        }
    }

    /// Handles a packet; it counts once handled, so that a problem met on the way names it.
    fn packet(&mut self, bytes: &[u8]) {
        self.handle(bytes);
        self.packets += 1;
    }

    fn handle(&mut self, bytes: &[u8]) {
        // Read in place ([`wire`]); where that stops, prost reads the packet (refusing it with
        // its message, or merging what `wire` leaves to it, encoded again for `wire`).
        let canonical: Vec<u8>;
        let p = match wire::packet(bytes) {
            Ok(p) => p,
            Err(()) => match proto::TracePacket::decode(bytes) {
                Ok(m) => {
                    canonical = m.encode_to_vec();
                    match wire::packet(&canonical) {
                        Ok(p) => p,
                        Err(()) => {
                            self.reject("a packet prost reads but its encoding again does not decode".into());
                            return;
                        }
                    }
                }
                Err(e) => {
                    self.reject(format!("a packet that is not a TracePacket: {e}"));
                    return;
                }
            },
        };
        let seq_id = p.trusted_packet_sequence_id.unwrap_or(0);
        let flags = p.sequence_flags.unwrap_or(0);
        let seq = self.sequences.entry(seq_id).or_insert_with(|| Sequence { valid: true, ..Default::default() });
        if p.previous_packet_dropped.unwrap_or(0) != 0 {
            seq.valid = false;
        }
        if flags & proto::SEQ_INCREMENTAL_STATE_CLEARED != 0 || p.incremental_state_cleared == Some(true) {
            *seq = Sequence { valid: true, ..Default::default() };
        }
        if flags & proto::SEQ_NEEDS_INCREMENTAL_STATE != 0 && !seq.valid {
            self.counts.skipped_without_state += 1;
            return;
        }
        if let Some(d) = &p.trace_packet_defaults {
            seq.default_track = d.track_event_defaults.as_ref().and_then(|t| t.track_uuid);
            seq.default_clock = d.timestamp_clock_id;
        }
        if let Some(i) = &p.interned_data {
            for (list, map) in [(&i.event_names, &mut seq.names), (&i.event_categories, &mut seq.categories)] {
                for e in list {
                    if let (Some(iid), Some(n)) = (e.iid, &e.name) {
                        map.insert(iid, Arc::from(n.as_str()));
                    }
                }
            }
            for e in &i.debug_annotation_names {
                if let (Some(iid), Some(n)) = (e.iid, &e.name) {
                    seq.annotation_names.insert(iid, n.clone());
                }
            }
        }
        // A packet's clock: its own, its sequence's default, else BOOTTIME (whatever the trace clock).
        let clock = p.timestamp_clock_id.or(seq.default_clock).unwrap_or(proto::CLOCK_BOOTTIME);
        if let Some(c) = &p.clock_snapshot {
            self.clocks.snapshot(seq_id, c);
            self.counts.clock_snapshots += 1;
        }
        let ts = match (p.timestamp, clock) {
            (Some(t), c) if c != self.clocks.trace_clock => {
                let abs = self.clocks.advance(seq_id, c, t);
                match self.clocks.convert(seq_id, c, t, abs) {
                    Some(v) => {
                        self.counts.converted_timestamps += 1;
                        v
                    }
                    None => {
                        self.counts.unconverted_timestamps += 1;
                        abs.map_or(t.min(i64::MAX as u64) as i64, |a| a.clamp(0, i128::from(i64::MAX)) as i64)
                    }
                }
            }
            (t, _) => t.map_or(0, |t| t.min(i64::MAX as u64) as i64),
        };
        if let Some(d) = p.track_descriptor {
            self.descriptor(*d);
        } else if let Some(e) = &p.track_event {
            self.track_event(seq_id, ts, e);
        } else if let Some(b) = &p.ftrace_events {
            self.ftrace(b);
        } else if let Some(t) = p.process_tree {
            self.process_tree(*t);
        } else if p.interned_data.is_none() && p.trace_packet_defaults.is_none() && p.clock_snapshot.is_none() {
            self.counts.other_packets += 1;
        }
    }

    fn track_producer(&mut self, uuid: u64) -> i32 {
        if let Some(&id) = self.by_track.get(&uuid) {
            return id;
        }
        let id = self.producers.len() as i32;
        let name = format!("track {uuid}");
        self.producers.push(Producer {
            kind: "track",
            name,
            parent: Parent::None,
            attrs: vec![("uuid".into(), Attr::Int(uuid as i64))],
            seq: 0,
        });
        self.by_track.insert(uuid, id);
        id
    }

    fn descriptor(&mut self, d: proto::TrackDescriptor) {
        let Some(uuid) = d.uuid else {
            self.reject("a track descriptor without a uuid".into());
            return;
        };
        let id = self.track_producer(uuid);
        let named = d.name.clone().or(d.static_name.clone());
        let pr = &mut self.producers[id as usize];
        pr.attrs = vec![("uuid".into(), Attr::Int(uuid as i64))];
        if let Some(t) = &d.thread {
            pr.kind = "thread";
            let tid = t.tid.unwrap_or(0);
            pr.name = named.or(t.thread_name.clone()).unwrap_or_else(|| format!("tid {tid}"));
            pr.attrs.push(("tid".into(), Attr::Int(tid)));
            if let Some(pid) = t.pid {
                pr.attrs.push(("pid".into(), Attr::Int(pid.into())));
                pr.parent = Parent::Pid(pid.into());
            }
        } else if let Some(pd) = &d.process {
            pr.kind = "process";
            let pid = pd.pid.unwrap_or(0);
            pr.name = named
                .or(pd.process_name.clone())
                .or_else(|| pd.cmdline.first().cloned())
                .unwrap_or_else(|| format!("pid {pid}"));
            pr.attrs.push(("pid".into(), Attr::Int(pid.into())));
        } else {
            pr.kind = if d.counter.is_some() { "counter" } else { "track" };
            if let Some(n) = named {
                pr.name = n;
            }
            if let Some(u) = d.counter.as_ref().and_then(|c| c.unit_name.clone()) {
                pr.attrs.push(("unit".into(), Attr::Str(u)));
            }
        }
        if let Some(p) = d.parent_uuid {
            pr.parent = Parent::Track(p);
        }
    }

    fn track_event(&mut self, seq_id: u32, ts: i64, e: &wire::TrackEvent<'_>) {
        let seq = &self.sequences[&seq_id];
        let mut unknown = 0;
        let name: Option<Arc<str>> = match (e.name, e.name_iid) {
            (Some(n), _) => Some(Arc::from(n)),
            (None, Some(iid)) => Some(seq.names.get(&iid).cloned().unwrap_or_else(|| {
                unknown += 1;
                Arc::from(format!("[name iid {iid}]"))
            })),
            (None, None) => None,
        };
        // One category (the usual case) is the interned string itself; several are joined.
        let mut category: Option<Arc<str>> = None;
        if e.category_count > 0 {
            let mut joined: Option<String> = None;
            let mut walk;
            let mut one;
            let cats: &mut dyn Iterator<Item = wire::Category<'_>> = if e.category_count == 1 {
                one = e.first_category.into_iter();
                &mut one
            } else {
                walk = e.categories();
                &mut walk
            };
            for c in cats {
                let c: Arc<str> = match c {
                    wire::Category::Name(n) => Arc::from(n),
                    wire::Category::Iid(iid) => seq.categories.get(&iid).cloned().unwrap_or_else(|| {
                        unknown += 1;
                        Arc::from(format!("[category iid {iid}]"))
                    }),
                };
                match (&category, &mut joined) {
                    (None, _) => category = Some(c),
                    (Some(first), None) => joined = Some(format!("{first},{c}")),
                    (Some(_), Some(j)) => {
                        j.push(',');
                        j.push_str(&c);
                    }
                }
            }
            if let Some(j) = joined {
                category = Some(Arc::from(j));
            }
        }
        let args = if !e.has_annotations {
            None
        } else {
            let mut out = Vec::with_capacity(64);
            out.push(b'{');
            for (i, a) in e.annotations().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                let unnamed;
                let key: &str = match (a.name, a.name_iid) {
                    (Some(n), _) => n,
                    (None, Some(iid)) => match seq.annotation_names.get(&iid) {
                        Some(n) => n,
                        None => {
                            unknown += 1;
                            unnamed = format!("[iid {iid}]");
                            &unnamed
                        }
                    },
                    (None, None) => {
                        unnamed = format!("arg{i}");
                        &unnamed
                    }
                };
                super::json::write_str(&mut out, key.as_bytes());
                out.push(b':');
                // Writes into a Vec do not fail.
                if let Some(v) = a.bool_value {
                    out.extend_from_slice(if v { b"true" } else { b"false" });
                } else if let Some(v) = a.int_value {
                    let _ = write!(out, "{v}");
                } else if let Some(v) = a.uint_value {
                    let _ = write!(out, "{v}");
                } else if let Some(v) = a.double_value.filter(|v| v.is_finite()) {
                    let _ = write!(out, "{v:?}");
                } else if let Some(v) = a.string_value {
                    super::json::write_str(&mut out, v.as_bytes());
                } else if let Some(v) = a.pointer_value {
                    super::json::write_str(&mut out, format!("0x{v:x}").as_bytes());
                } else {
                    out.extend_from_slice(b"null");
                }
            }
            out.push(b'}');
            Some(String::from_utf8_lossy(&out).into_owned())
        };
        let track = e.track_uuid.or(seq.default_track).unwrap_or(u64::from(seq_id) | (1 << 63));
        self.counts.unknown_iids += unknown;
        let kind = e.r#type.unwrap_or(0);
        let flows = e.has_flows;
        if flows && matches!(kind, proto::TYPE_SLICE_BEGIN | proto::TYPE_SLICE_END | proto::TYPE_INSTANT) {
            // The step is the slice (its start: an end's flows go to the slice it ends) or the instant.
            let at = if kind == proto::TYPE_SLICE_END {
                self.open.get(&track).and_then(|s| s.last()).map(|o| o.ts)
            } else {
                Some(ts)
            };
            match at {
                Some(at) => self.flow_steps(track, at, e),
                None => self.flows.unmatched_ends += 1,
            }
        }
        match kind {
            proto::TYPE_SLICE_BEGIN => {
                let name = name.unwrap_or_else(|| Arc::from(""));
                self.open.entry(track).or_default().push(Open { ts, name, category, args });
            }
            proto::TYPE_SLICE_END => match self.open.get_mut(&track).and_then(|s| s.pop()) {
                Some(o) => self.slice_row(track, o, Some(ts)),
                None => self.counts.unmatched_ends += 1,
            },
            proto::TYPE_INSTANT => {
                let producer = self.track_producer(track);
                let seqn = self.next_seq(producer);
                let t = &mut self.tables[T_INSTANT];
                t.start(ts, producer, seqn);
                set_opt(t, 3, name.as_deref());
                set_opt(t, 4, category.as_deref());
                set_opt(t, 5, args.as_deref());
                t.end();
                self.counts.instants += 1;
            }
            proto::TYPE_COUNTER => {
                let producer = self.track_producer(track);
                let seqn = self.next_seq(producer);
                let t = &mut self.tables[T_COUNTER];
                t.start(ts, producer, seqn);
                t.set_str(3, &self.producers[producer as usize].name);
                if let Some(v) = e.counter_value {
                    t.set_f64(4, v as f64);
                    t.set_i64(5, v);
                } else if let Some(v) = e.double_counter_value {
                    t.set_f64(4, v);
                }
                t.end();
                self.counts.counters += 1;
            }
            other => {
                self.reject(format!(
                    "track event of type {other} (expected slice begin 1, end 2, instant 3, counter 4)"
                ));
            }
        }
    }

    /// The flow steps of a track event at `at` on `track`: its continuing ids, then its terminating ones.
    fn flow_steps(&mut self, track: u64, at: i64, e: &wire::TrackEvent<'_>) {
        let producer = self.track_producer(track);
        let ids = e.flow_ids(false).into_iter().map(|i| (i, false));
        let ends = e.flow_ids(true).into_iter().map(|i| (i, true));
        for (id, terminating) in ids.chain(ends) {
            let seq = self.next_seq(producer);
            self.flows.step(&mut self.tables[T_FLOW], id, flows::Step { ts: at, producer, seq }, terminating);
        }
    }

    fn next_seq(&mut self, producer: i32) -> i64 {
        let p = &mut self.producers[producer as usize];
        p.seq += 1;
        p.seq - 1
    }

    fn slice_row(&mut self, track: u64, o: Open, end: Option<i64>) {
        let producer = self.track_producer(track);
        let seqn = self.next_seq(producer);
        let t = &mut self.tables[T_SLICE];
        t.start(o.ts, producer, seqn);
        t.set_i64(DUR, end.map_or(0, |e| (e - o.ts).max(0)));
        t.set_str(4, &o.name);
        set_opt(t, 5, o.category.as_deref());
        set_opt(t, 6, o.args.as_deref());
        t.set_bool(7, end.is_some());
        t.end();
        self.counts.slices += 1;
    }

    fn cpu_producer(&mut self, cpu: u32) -> i32 {
        if let Some(&id) = self.by_cpu.get(&cpu) {
            return id;
        }
        let id = self.producers.len() as i32;
        self.producers.push(Producer {
            kind: "cpu",
            name: format!("cpu {cpu}"),
            parent: Parent::None,
            attrs: vec![("cpu".into(), Attr::Int(cpu.into()))],
            seq: 0,
        });
        self.by_cpu.insert(cpu, id);
        id
    }

    fn ftrace(&mut self, b: &wire::Bundle<'_>) {
        let Some(cpu) = b.cpu else {
            self.reject("an ftrace event bundle without its cpu".into());
            return;
        };
        let producer = self.cpu_producer(cpu);
        for e in &b.event {
            let ts = e.timestamp.map_or(0, |t| t.min(i64::MAX as u64) as i64);
            if let Some(s) = &e.sched_switch {
                let (tid, comm, prio) =
                    (s.next_pid.unwrap_or(0).into(), s.next_comm.unwrap_or(""), s.next_prio.unwrap_or(0).into());
                // The CPU's running thread ends here and the next one starts (its comm's buffer reused).
                let r = match self.running.entry(cpu) {
                    Entry::Vacant(v) => {
                        v.insert(Running { ts, tid, comm: comm.to_string(), prio });
                        continue;
                    }
                    Entry::Occupied(o) => o.into_mut(),
                };
                let p = &mut self.producers[producer as usize];
                let seqn = p.seq;
                p.seq += 1;
                let t = &mut self.tables[T_SCHED];
                t.start(r.ts, producer, seqn);
                t.set_i64(DUR, (ts - r.ts).max(0));
                t.set_i64(4, cpu.into());
                t.set_i64(5, r.tid);
                t.set_str(6, &r.comm);
                t.set_i64(7, r.prio);
                t.set_str(8, task_state(s.prev_state.unwrap_or(0)));
                t.end();
                self.counts.sched_slices += 1;
                (r.ts, r.tid, r.prio) = (ts, tid, prio);
                r.comm.clear();
                r.comm.push_str(comm);
            } else if let Some(w) = &e.sched_waking {
                let seqn = self.next_seq(producer);
                let t = &mut self.tables[T_WAKING];
                t.start(ts, producer, seqn);
                t.set_i64(3, cpu.into());
                t.set_i64(4, w.pid.unwrap_or(0).into());
                t.set_str(5, w.comm.unwrap_or(""));
                t.set_i64(6, w.prio.unwrap_or(0).into());
                if let Some(c) = w.target_cpu {
                    t.set_i64(7, c.into());
                }
                t.end();
                self.counts.sched_wakings += 1;
            } else {
                self.counts.other_packets += 1;
            }
        }
    }

    fn process_tree(&mut self, t: proto::ProcessTree) {
        for p in t.processes {
            let Some(pid) = p.pid else { continue };
            let uuid = process_uuid(pid.into());
            let id = self.track_producer(uuid);
            let pr = &mut self.producers[id as usize];
            pr.kind = "process";
            pr.name = p.cmdline.first().cloned().unwrap_or_else(|| format!("pid {pid}"));
            pr.attrs = vec![("pid".into(), Attr::Int(pid.into()))];
        }
        for th in t.threads {
            let Some(tid) = th.tid else { continue };
            let uuid = thread_uuid(tid.into());
            let id = self.track_producer(uuid);
            let pr = &mut self.producers[id as usize];
            pr.kind = "thread";
            pr.name = th.name.unwrap_or_else(|| format!("tid {tid}"));
            pr.attrs = vec![("tid".into(), Attr::Int(tid.into()))];
            if let Some(pid) = th.tgid {
                pr.attrs.push(("pid".into(), Attr::Int(pid.into())));
                pr.parent = Parent::Pid(pid.into());
            }
        }
    }
}

/// Track keys of the process tree's processes and threads (outside the space of real uuids
/// the way Perfetto's own importer keys them: by kind and id).
fn process_uuid(pid: i64) -> u64 {
    (3 << 62) | (pid as u64 & 0xffff_ffff)
}

fn thread_uuid(tid: i64) -> u64 {
    (2 << 62) | (tid as u64 & 0xffff_ffff)
}

fn set_opt(t: &mut Table, i: usize, v: Option<&str>) {
    if let Some(v) = v {
        t.set_str(i, v);
    }
}

/// The kernel's task state of `sched_switch`'s prev_state as `ps` letters (R runnable, S
/// sleeping, D uninterruptible, T stopped, t traced, X dead, Z zombie, P parked, I idle; `+`
/// preempted).
fn task_state(s: i64) -> &'static str {
    const NAMES: [&str; 9] = ["S", "D", "T", "t", "X", "Z", "P", "I", "+"];
    if s == 0 {
        return "R";
    }
    if s & 0x100 != 0 || s & 0x800 != 0 {
        return "R+";
    }
    for (i, n) in NAMES.iter().enumerate().take(8) {
        if s & (1 << i) != 0 {
            return n;
        }
    }
    "?"
}

super::chunk_parser!(PerfettoParser {
    /// Every track (processes, threads under their process, counters and plain tracks under
    /// their parent) and every CPU of the scheduling events.
    fn producers(&self) -> Vec<ProducerRow> {
        let mut out: Vec<ProducerRow> = Vec::with_capacity(self.producers.len());
        let mut by_pid: FastMap<i64, i32> = FastMap::default();
        for (i, p) in self.producers.iter().enumerate() {
            if p.kind == "process" {
                if let Some(Attr::Int(pid)) = p.attrs.iter().find(|(k, _)| k == "pid").map(|(_, v)| v) {
                    by_pid.entry(*pid).or_insert(i as i32);
                }
            }
        }
        let mut extra: Vec<ProducerRow> = Vec::new();
        let base = self.producers.len() as i32;
        for (i, p) in self.producers.iter().enumerate() {
            let parent = match &p.parent {
                Parent::None => None,
                Parent::Track(u) => self.by_track.get(u).copied().filter(|&t| t != i as i32),
                Parent::Pid(pid) => Some(*by_pid.entry(*pid).or_insert_with(|| {
                    let id = base + extra.len() as i32;
                    extra.push(ProducerRow {
                        id,
                        parent: None,
                        kind: "process".into(),
                        name: format!("pid {pid}"),
                        attrs: vec![("pid".into(), Attr::Int(*pid))],
                    });
                    id
                })),
            };
            out.push(ProducerRow { id: i as i32, parent, kind: p.kind.into(), name: p.name.clone(), attrs: p.attrs.clone() });
        }
        out.extend(extra);
        out
    }

    fn stats(&self) -> Vec<(String, u64)> {
        let c = &self.counts;
        [
            ("packets", self.packets),
            ("slices", c.slices),
            ("instants", c.instants),
            ("counters", c.counters),
            ("sched_slices", c.sched_slices),
            ("sched_wakings", c.sched_wakings),
            ("unclosed_slices", c.unclosed_slices),
            ("unmatched_ends", c.unmatched_ends),
            ("skipped_without_state", c.skipped_without_state),
            ("unknown_iids", c.unknown_iids),
            ("other_packets", c.other_packets),
            ("clock_snapshots", c.clock_snapshots),
            ("converted_timestamps", c.converted_timestamps),
            ("unconverted_timestamps", c.unconverted_timestamps),
            ("flow_arrows", self.flows.arrows),
            ("unfollowed_flows", self.flows.unfollowed),
            ("unmatched_flow_ends", self.flows.unmatched_ends),
            ("rejected", self.rejects.count),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    fn problems(&self) -> Vec<Problem> {
        self.rejects.first.clone()
    }

    fn fatal(&self) -> Option<Problem> {
        self.rejects.fatal.clone()
    }
});
