//! Begin/end pairing: control-flow reconstitution (seed 001) in one sequential pass.
//!
//! Owns the rule that turns the begin and end halves of a trace (TOD behavior
//! enter/exit, Chrome B/E, probe start/end) into spans with a depth, a parent span, an
//! end, a duration and a self time, and the report of the halves that pair with
//! nothing. Rules, per producer, in `seq` order (the producer's own order):
//!
//! - a begin opens a span one level below the innermost open span (its parent);
//! - without keys, an end closes the innermost open span; with keys (method id, name)
//!   it closes the innermost open span *with the same key*: open spans above that one
//!   lost their end (a dropped probe, a longjmp) and are closed there as *unclosed*;
//! - an end that finds no span to close is an *unmatched end*;
//! - spans still open when the producer's halves run out are closed as unclosed at the
//!   producer's last half, and reported ([`Spans::open_at_end`]): the caller moves that
//!   cut to the producer's last event of any type (`tracehouse.analysis.spans.pair`,
//!   the documented rule, docs/analyses.md: a call was running at least until the thread's last event), a
//!   question of the whole trace the pass does not see.
//!
//! Self time is the duration minus the durations of the direct children (unclosed
//! children included, with their cut duration).
//!
//! Speed: inputs arrive as Arrow chunks (the store's segments decoded batch by batch) and
//! are read in place, never concatenated on the fast path. Begins and ends usually come
//! each sorted by `ts` and a producer's `seq` grows with `ts`; then one merge of the two
//! inputs by (`ts`, `seq`) visits every producer's rows in `seq` order while reading
//! each column sequentially (checked on every row: `seq` must grow per producer), on one
//! thread, fed batch by batch so that reading overlaps with it ([`Stream`],
//! `spans/stream.rs`). Otherwise the chunks are
//! concatenated and rows grouped by producer (a stable counting sort of row numbers),
//! each producer's begins and ends merged by `seq` (sorted first when they are not) and
//! walked with one stack. Both paths equal ordering every half by (`producer`, `seq`),
//! begins before ends on equal `seq` ([`crate::store::order::stable_order`], the tests'
//! reference).

use std::collections::HashMap;

mod stream;
pub use stream::{Batch, Cols, Stream, UnmatchedEnds};

#[cfg(test)]
use crate::store::order::stable_order;

/// One input: the begin or the end halves, as parallel columns.
#[derive(Clone, Copy, Debug)]
pub struct Halves<'a> {
    /// Event time, ns.
    pub ts: &'a [i64],
    /// Producer (thread) id.
    pub producer: &'a [i32],
    /// Order of the event within its producer.
    pub seq: &'a [i64],
    /// Matching key (method id, interned name); `None` pairs by nesting alone.
    pub key: Option<&'a [i64]>,
}

impl<'a> Halves<'a> {
    fn len(&self) -> usize {
        self.ts.len()
    }

    fn chunked(&self) -> Chunked<'a> {
        Chunked {
            ts: vec![self.ts],
            producer: vec![self.producer],
            seq: vec![self.seq],
            key: self.key.map(|k| vec![k]),
        }
    }
}

/// One input as chunks (Arrow chunked arrays): chunk k of every column holds the same rows.
#[derive(Clone, Debug, Default)]
pub struct Chunked<'a> {
    /// Event time, ns.
    pub ts: Vec<&'a [i64]>,
    /// Producer (thread) id.
    pub producer: Vec<&'a [i32]>,
    /// Order of the event within its producer.
    pub seq: Vec<&'a [i64]>,
    /// Matching key; `None` pairs by nesting alone.
    pub key: Option<Vec<&'a [i64]>>,
}

impl Chunked<'_> {
    fn len(&self) -> usize {
        self.ts.iter().map(|c| c.len()).sum()
    }

    fn check(&self, what: &str) -> Result<(), String> {
        let k = self.ts.len();
        if self.producer.len() != k || self.seq.len() != k || self.key.as_ref().is_some_and(|x| x.len() != k) {
            return Err(format!("{what}: columns have different numbers of chunks"));
        }
        for i in 0..k {
            let n = self.ts[i].len();
            if self.producer[i].len() != n
                || self.seq[i].len() != n
                || self.key.as_ref().is_some_and(|x| x[i].len() != n)
            {
                return Err(format!("{what}: columns differ in length"));
            }
        }
        if self.len() > crate::store::order::MAX_ROWS {
            return Err(format!("{what}: more than u32::MAX rows"));
        }
        Ok(())
    }

    /// True when rows are ordered by (ts, producer, seq).
    fn ordered(&self) -> bool {
        let mut last: Option<(i64, i32, i64)> = None;
        for i in 0..self.ts.len() {
            for j in 0..self.ts[i].len() {
                let k = (self.ts[i][j], self.producer[i][j], self.seq[i][j]);
                if last.is_some_and(|l| l > k) {
                    return false;
                }
                last = Some(k);
            }
        }
        true
    }

    fn producer_range(&self) -> (i64, i64) {
        self.producer
            .iter()
            .flat_map(|c| c.iter())
            .fold((i64::MAX, i64::MIN), |(l, h), &p| (l.min(p as i64), h.max(p as i64)))
    }

    fn concat(&self) -> Owned {
        Owned {
            ts: self.ts.concat(),
            producer: self.producer.concat(),
            seq: self.seq.concat(),
            key: self.key.as_ref().map(|k| k.concat()),
        }
    }
}

/// Concatenated chunks, for the paths that need random access.
struct Owned {
    ts: Vec<i64>,
    producer: Vec<i32>,
    seq: Vec<i64>,
    key: Option<Vec<i64>>,
}

impl Owned {
    fn halves(&self) -> Halves<'_> {
        Halves { ts: &self.ts, producer: &self.producer, seq: &self.seq, key: self.key.as_deref() }
    }
}

/// The spans, one per begin row (in the begin input's order), and the unmatched ends.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Spans {
    /// Row of the end that closed the span, -1 when it is unclosed.
    pub end_row: Vec<i64>,
    /// End time, ns (for unclosed spans: where they were cut).
    pub end_ts: Vec<i64>,
    /// Nesting depth, 0 for a root span.
    pub depth: Vec<i32>,
    /// Begin row of the enclosing span, -1 at the root.
    pub parent: Vec<i64>,
    /// Duration minus the durations of the direct children, ns.
    pub self_ns: Vec<i64>,
    /// False when no matching end closed the span.
    pub closed: Vec<bool>,
    /// End rows that closed no span, ascending.
    pub unmatched_end: Vec<i64>,
    /// Begin rows of the spans still open when their producer's halves ran out (cut at
    /// its last half), ascending.
    pub open_at_end: Vec<i64>,
    /// True when every producer's rows already came in `seq` order (no sort needed).
    pub presorted: bool,
    /// True when the begins came ordered by (ts, producer, seq) (span ids are then ranks).
    pub begins_ordered: bool,
}

#[derive(Clone, Copy)]
struct Frame {
    row: u32,
    ts: i64,
    key: i64,
    child: i64,
}

/// Producer id -> dense slot (direct table for compact id ranges, a map otherwise).
enum Slots {
    Dense { min: i64, table: Vec<u32> },
    Sparse(HashMap<i32, u32>),
}

impl Slots {
    fn new((lo, hi): (i64, i64)) -> Self {
        if lo <= hi && hi - lo < (1 << 22) {
            Slots::Dense { min: lo, table: vec![u32::MAX; (hi - lo + 1) as usize] }
        } else {
            Slots::Sparse(HashMap::new())
        }
    }

    #[inline(always)]
    fn get(&mut self, p: i32, next: &mut u32) -> usize {
        match self {
            Slots::Dense { min, table } => {
                let s = &mut table[(p as i64 - *min) as usize];
                if *s == u32::MAX {
                    *s = *next;
                    *next += 1;
                }
                *s as usize
            }
            Slots::Sparse(m) => {
                let s = *m.entry(p).or_insert(*next);
                if s == *next {
                    *next += 1;
                }
                s as usize
            }
        }
    }
}

struct Producer {
    stack: Vec<Frame>,
    max_ts: i64,
}

/// Raw views of the per-begin output columns of one `Spans`, written by the general
/// path's pairer (it once served several pairers on threads, each writing only the begin
/// rows of its own producers; one pairer now, the `Spans` outliving it).
#[derive(Clone, Copy)]
struct Out {
    end_row: *mut i64,
    end_ts: *mut i64,
    depth: *mut i32,
    parent: *mut i64,
    self_ns: *mut i64,
    closed: *mut bool,
    len: usize,
}

impl Out {
    fn of(s: &mut Spans) -> Self {
        Out {
            end_row: s.end_row.as_mut_ptr(),
            end_ts: s.end_ts.as_mut_ptr(),
            depth: s.depth.as_mut_ptr(),
            parent: s.parent.as_mut_ptr(),
            self_ns: s.self_ns.as_mut_ptr(),
            closed: s.closed.as_mut_ptr(),
            len: s.end_row.len(),
        }
    }

    #[inline(always)]
    fn open(&self, r: usize, depth: i32, parent: i64) {
        assert!(r < self.len);
        // SAFETY: r is in bounds; only this pairer writes row r (see the type's doc).
        unsafe {
            *self.depth.add(r) = depth;
            *self.parent.add(r) = parent;
        }
    }

    #[inline(always)]
    fn close(&self, r: usize, end_row: i64, end_ts: i64, self_ns: i64) {
        assert!(r < self.len);
        // SAFETY: as in `open`.
        unsafe {
            *self.end_row.add(r) = end_row;
            *self.end_ts.add(r) = end_ts;
            *self.self_ns.add(r) = self_ns;
            *self.closed.add(r) = end_row >= 0;
        }
    }
}

/// Output columns for `nb` begins. Every row is written by the pass (`open` when its
/// begin is visited, `close` when it is closed or cut), so zeroed allocations do: they
/// come from the kernel as untouched zero pages, where a fill of -1 would write every
/// page once more before the pass does (17M spans: 0.3 s of the pass).
fn new_spans(nb: usize) -> Spans {
    Spans {
        end_row: vec![0; nb],
        end_ts: vec![0; nb],
        depth: vec![0; nb],
        parent: vec![0; nb],
        self_ns: vec![0; nb],
        closed: vec![false; nb],
        unmatched_end: Vec::new(),
        open_at_end: Vec::new(),
        presorted: false,
        begins_ordered: false,
    }
}

/// The stack machine of the rules, for the producers one thread owns.
struct Pairer {
    keyed: bool,
    slots: Slots,
    next_slot: u32,
    producers: Vec<Producer>,
    out: Out,
    unmatched: Vec<i64>,
    open_at_end: Vec<i64>,
}

impl Pairer {
    fn new(keyed: bool, range: (i64, i64), out: Out) -> Self {
        Self {
            keyed,
            slots: Slots::new(range),
            next_slot: 0,
            producers: Vec::new(),
            out,
            unmatched: Vec::new(),
            open_at_end: Vec::new(),
        }
    }

    #[inline(always)]
    fn producer(&mut self, p: i32) -> usize {
        let s = self.slots.get(p, &mut self.next_slot);
        if s == self.producers.len() {
            self.producers.push(Producer { stack: Vec::new(), max_ts: i64::MIN });
        }
        s
    }

    /// Visits one event (begin or end row `row`, time `ts`, key `key`) of producer slot `s`.
    #[inline(always)]
    fn visit(&mut self, s: usize, is_end: bool, row: usize, ts: i64, key: i64) {
        let st = &mut self.producers[s];
        st.max_ts = st.max_ts.max(ts);
        if !is_end {
            self.out.open(row, st.stack.len() as i32, st.stack.last().map_or(-1, |f| f.row as i64));
            st.stack.push(Frame { row: row as u32, ts, key, child: 0 });
            return;
        }
        let at = if self.keyed { st.stack.iter().rposition(|f| f.key == key) } else { st.stack.len().checked_sub(1) };
        let Some(at) = at else {
            self.unmatched.push(row as i64);
            return;
        };
        while st.stack.len() > at + 1 {
            let f = st.stack.pop().expect("frame above the match");
            close(&self.out, &mut st.stack, f, ts, -1);
        }
        let f = st.stack.pop().expect("the matching frame");
        close(&self.out, &mut st.stack, f, ts, row as i64);
    }

    /// Closes what is still open (cut at each producer's last ts); returns the unmatched
    /// ends and the rows so closed.
    fn finish(mut self) -> (Vec<i64>, Vec<i64>) {
        for st in &mut self.producers {
            while let Some(f) = st.stack.pop() {
                self.open_at_end.push(f.row as i64);
                close(&self.out, &mut st.stack, f, st.max_ts, -1);
            }
        }
        (self.unmatched, self.open_at_end)
    }
}

#[inline(always)]
fn close(out: &Out, stack: &mut [Frame], f: Frame, end_ts: i64, end_row: i64) {
    let dur = end_ts.wrapping_sub(f.ts);
    out.close(f.row as usize, end_row, end_ts, dur.wrapping_sub(f.child));
    if let Some(top) = stack.last_mut() {
        top.child = top.child.wrapping_add(dur);
    }
}

/// Pairs `begin` with `end` halves into spans (see the module rules).
pub fn pair(begin: Halves, end: Halves) -> Result<Spans, String> {
    pair_chunked(&begin.chunked(), &end.chunked())
}

/// [`pair`] over chunked inputs, read in place on the fast path.
pub fn pair_chunked(begin: &Chunked, end: &Chunked) -> Result<Spans, String> {
    begin.check("begin")?;
    end.check("end")?;
    if begin.key.is_some() != end.key.is_some() {
        return Err("keys must be given for both begins and ends, or for neither".into());
    }
    let mut stream = Stream::new(begin.key.is_some(), begin.len());
    for (is_end, h) in [(false, begin), (true, end)] {
        for i in 0..h.ts.len() {
            let key = h.key.as_ref().map(|k| k[i]);
            stream.push(is_end, Halves { ts: h.ts[i], producer: h.producer[i], seq: h.seq[i], key })?;
        }
    }
    Ok(match stream.finish() {
        Some((s, _)) => s,
        None => {
            let (b, e) = (begin.concat(), end.concat());
            let mut s = grouped(b.halves(), e.halves());
            s.begins_ordered = begin.ordered();
            s
        }
    })
}

/// The general path: rows grouped by producer, each producer's halves merged by seq.
fn grouped(begin: Halves, end: Halves) -> Spans {
    let mut spans = new_spans(begin.len());
    let range = begin.chunked().producer_range();
    let range2 = end.chunked().producer_range();
    let mut p = Pairer::new(begin.key.is_some(), (range.0.min(range2.0), range.1.max(range2.1)), Out::of(&mut spans));
    // Slot of every row, then rows grouped by slot (stable counting sort).
    let bslot: Vec<u32> = begin.producer.iter().map(|&x| p.producer(x) as u32).collect();
    let eslot: Vec<u32> = end.producer.iter().map(|&x| p.producer(x) as u32).collect();
    let nslots = p.producers.len();
    let (bstart, brows) = group(&bslot, nslots);
    let (estart, erows) = group(&eslot, nslots);
    drop((bslot, eslot));
    let mut presorted = true;
    let mut bbuf = Vec::new();
    let mut ebuf = Vec::new();
    let key = |h: &Halves, r: usize| h.key.map_or(0, |k| k[r]);
    for s in 0..nslots {
        let mut bs = &brows[bstart[s]..bstart[s + 1]];
        let mut es = &erows[estart[s]..estart[s + 1]];
        if !seq_sorted(begin.seq, bs) {
            presorted = false;
            bbuf.clear();
            bbuf.extend_from_slice(bs);
            bbuf.sort_by_key(|&r| begin.seq[r as usize]);
            bs = &bbuf;
        }
        if !seq_sorted(end.seq, es) {
            presorted = false;
            ebuf.clear();
            ebuf.extend_from_slice(es);
            ebuf.sort_by_key(|&r| end.seq[r as usize]);
            es = &ebuf;
        }
        let (mut i, mut j) = (0, 0);
        while i < bs.len() || j < es.len() {
            if j >= es.len() || (i < bs.len() && begin.seq[bs[i] as usize] <= end.seq[es[j] as usize]) {
                let r = bs[i] as usize;
                p.visit(s, false, r, begin.ts[r], key(&begin, r));
                i += 1;
            } else {
                let r = es[j] as usize;
                p.visit(s, true, r, end.ts[r], key(&end, r));
                j += 1;
            }
        }
    }
    let (mut unmatched, mut open_at_end) = p.finish();
    unmatched.sort_unstable();
    open_at_end.sort_unstable();
    spans.unmatched_end = unmatched;
    spans.open_at_end = open_at_end;
    spans.presorted = presorted;
    spans
}

/// Row numbers grouped by slot, keeping row order inside a slot: (group starts, rows).
fn group(slot: &[u32], nslots: usize) -> (Vec<usize>, Vec<u32>) {
    let mut start = vec![0usize; nslots + 1];
    for &s in slot {
        start[s as usize + 1] += 1;
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    let mut at = start.clone();
    let mut rows = vec![0u32; slot.len()];
    for (r, &s) in slot.iter().enumerate() {
        rows[at[s as usize]] = r as u32;
        at[s as usize] += 1;
    }
    (start, rows)
}

fn seq_sorted(seq: &[i64], rows: &[u32]) -> bool {
    rows.windows(2).all(|w| seq[w[0] as usize] <= seq[w[1] as usize])
}

/// Depth, parent and self time of spans that already carry their duration (Chrome `X`
/// slices, strace syscalls, any `span`-kind event type), one per row in input order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Nested {
    /// Nesting depth, 0 for a root span.
    pub depth: Vec<i32>,
    /// Row of the enclosing span, -1 at the root.
    pub parent: Vec<i64>,
    /// Duration minus the durations of the direct children, ns.
    pub self_ns: Vec<i64>,
}

/// Nests spans given as (ts, dur) per producer by time: per producer, spans sorted by
/// start, longer first on equal starts (then seq), each goes under the innermost open
/// span that contains it. An open span is closed (popped) once a span starts at or after
/// its end, or ends after it (overlap without nesting: the two become siblings).
pub fn nest(ts: &[i64], dur: &[i64], producer: &[i32], seq: &[i64]) -> Result<Nested, String> {
    let n = ts.len();
    if dur.len() != n || producer.len() != n || seq.len() != n {
        return Err("ts, dur, producer and seq differ in length".into());
    }
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_unstable_by(|&a, &b| {
        let (a, b) = (a as usize, b as usize);
        (producer[a], ts[a], std::cmp::Reverse(dur[a]), seq[a], a).cmp(&(
            producer[b],
            ts[b],
            std::cmp::Reverse(dur[b]),
            seq[b],
            b,
        ))
    });
    let mut out = Nested { depth: vec![0; n], parent: vec![-1; n], self_ns: dur.to_vec() };
    let mut stack: Vec<usize> = Vec::new();
    let mut current: Option<i32> = None;
    for &r in &order {
        let r = r as usize;
        if current != Some(producer[r]) {
            stack.clear();
            current = Some(producer[r]);
        }
        let end = ts[r].saturating_add(dur[r]);
        while let Some(&top) = stack.last() {
            let top_end = ts[top].saturating_add(dur[top]);
            if top_end <= ts[r] || end > top_end {
                stack.pop();
            } else {
                break;
            }
        }
        if let Some(&top) = stack.last() {
            out.parent[r] = top as i64;
            out.depth[r] = stack.len() as i32;
            out.self_ns[top] = out.self_ns[top].wrapping_sub(dur[r]);
        }
        stack.push(r);
    }
    Ok(out)
}

/// The reference order: every half sorted by (producer, seq), begins before ends on ties.
#[cfg(test)]
fn by_producer(b: Halves, e: Halves) -> Spans {
    let nb = b.len();
    let producer: Vec<i64> = b.producer.iter().chain(e.producer.iter()).map(|&p| p as i64).collect();
    let seq: Vec<i64> = b.seq.iter().chain(e.seq.iter()).copied().collect();
    let order = stable_order(&[&producer, &seq]);
    let mut spans = new_spans(nb);
    let mut p = Pairer::new(b.key.is_some(), (i32::MIN as i64, i32::MAX as i64), Out::of(&mut spans));
    for &r in &order {
        let r = r as usize;
        let (is_end, row) = if r < nb { (false, r) } else { (true, r - nb) };
        let h = if is_end { e } else { b };
        let s = p.producer(h.producer[row]);
        p.visit(s, is_end, row, h.ts[row], h.key.map_or(0, |k| k[row]));
    }
    let (mut unmatched, mut open_at_end) = p.finish();
    unmatched.sort_unstable();
    open_at_end.sort_unstable();
    spans.unmatched_end = unmatched;
    spans.open_at_end = open_at_end;
    spans
}

#[cfg(test)]
mod tests;
