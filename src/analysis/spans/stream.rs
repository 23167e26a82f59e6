//! The fast path of pairing, fed batch by batch: [`Stream`].
//!
//! Owns the single merge of the begin and end inputs by (`ts`, `producer`, `seq`) that
//! visits every producer's rows in `seq` order when both inputs come sorted by `ts` (the
//! store's segments are) and each producer's `seq` grows with `ts` (checked on every row;
//! rows tied on `ts` must come by producer and seq, or at least not against a producer's
//! seq order). Batches
//! of either side are pushed in their input order, as they are read: the merge runs as
//! far as both sides have rows, so reading the next row groups overlaps with pairing the
//! previous ones (`tracehouse.analysis.spans.pair` reads on one thread while this runs,
//! without the GIL, on another). When an input breaks the order (a batch not sorted by
//! `ts`, a `seq` that does not grow), the stream says so and the caller pairs the whole
//! input on the general path (`grouped` in `spans.rs`).
//!
//! Speed: one thread, one pass. The previous fast path dealt producers to two threads,
//! each merging every row and skipping the other's: two unpredictable branches per row
//! (which side, whose producer) on each core, 1.2 s for 34.3M halves on two cores. Here
//! the merge and the pairing share one data-dependent branch (begin or end), the inner
//! loop runs over two plain slices (chunk changes are handled outside it) and the output
//! columns are written in place; the second core is left to the reader.

use std::collections::{HashMap, VecDeque};

use arrow_buffer::ScalarBuffer;

use super::{Halves, Spans};

/// The columns of one batch of halves (all the same length; `key` on both sides or neither).
pub trait Cols {
    /// Event time, ns.
    fn ts(&self) -> &[i64];
    /// Producer (thread) id.
    fn producer(&self) -> &[i32];
    /// Order of the event within its producer.
    fn seq(&self) -> &[i64];
    /// Matching key, None to pair by nesting alone.
    fn key(&self) -> Option<&[i64]>;
}

impl Cols for Halves<'_> {
    fn ts(&self) -> &[i64] {
        self.ts
    }
    fn producer(&self) -> &[i32] {
        self.producer
    }
    fn seq(&self) -> &[i64] {
        self.seq
    }
    fn key(&self) -> Option<&[i64]> {
        self.key
    }
}

/// A batch holding its columns (Arrow buffers shared with the caller, no copy).
#[derive(Clone, Debug)]
pub struct Batch {
    /// Event time, ns.
    pub ts: ScalarBuffer<i64>,
    /// Producer (thread) id.
    pub producer: ScalarBuffer<i32>,
    /// Order of the event within its producer.
    pub seq: ScalarBuffer<i64>,
    /// Matching key.
    pub key: Option<ScalarBuffer<i64>>,
}

impl Cols for Batch {
    fn ts(&self) -> &[i64] {
        &self.ts
    }
    fn producer(&self) -> &[i32] {
        &self.producer
    }
    fn seq(&self) -> &[i64] {
        &self.seq
    }
    fn key(&self) -> Option<&[i64]> {
        self.key.as_deref()
    }
}

#[derive(Clone, Copy)]
struct Frame {
    row: u32,
    ts: i64,
    key: i64,
    child: i64,
}

struct Producer {
    stack: Vec<Frame>,
    last_seq: i64,
    max_ts: i64,
}

/// Producer ids in [0, DENSE) find their slot in a table, others in a map.
const DENSE: usize = 1 << 22;

/// The values of the ends that closed nothing (`Spans::unmatched_end` gives their rows):
/// a caller that does not keep the end columns builds its report from these.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UnmatchedEnds {
    /// Event time, ns.
    pub ts: Vec<i64>,
    /// Producer (thread) id.
    pub producer: Vec<i32>,
    /// Order of the event within its producer.
    pub seq: Vec<i64>,
    /// Matching key (0 without keys).
    pub key: Vec<i64>,
}

/// The pairing state: per-producer stacks and the output columns.
struct State<const KEYED: bool> {
    dense: Vec<u32>,
    sparse: HashMap<i32, u32>,
    producers: Vec<Producer>,
    out: Spans,
    unmatched: UnmatchedEnds,
}

impl<const KEYED: bool> State<KEYED> {
    #[inline(always)]
    fn slot(&mut self, p: i32) -> usize {
        let i = p as u32 as usize;
        if let Some(&s) = self.dense.get(i) {
            if s != u32::MAX {
                return s as usize;
            }
        }
        self.new_slot(p)
    }

    #[cold]
    #[inline(never)]
    fn new_slot(&mut self, p: i32) -> usize {
        let i = p as u32 as usize;
        let next = self.producers.len() as u32;
        let s = if i < DENSE {
            if i >= self.dense.len() {
                self.dense.resize((i + 1).next_power_of_two().min(DENSE), u32::MAX);
            }
            if self.dense[i] == u32::MAX {
                self.dense[i] = next;
            }
            self.dense[i]
        } else {
            *self.sparse.entry(p).or_insert(next)
        };
        if s == next {
            self.producers.push(Producer { stack: Vec::with_capacity(64), last_seq: i64::MIN, max_ts: i64::MIN });
        }
        s as usize
    }

    fn new(out: Spans) -> Self {
        State { dense: Vec::new(), sparse: HashMap::new(), producers: Vec::new(), out, unmatched: Default::default() }
    }

    /// The producer's slot once its seq grew (seq and max ts recorded); None when it did not.
    #[inline(always)]
    fn advance(&mut self, p: i32, ts: i64, seq: i64) -> Option<usize> {
        let s = self.slot(p);
        let st = &mut self.producers[s];
        if seq <= st.last_seq {
            return None;
        }
        st.last_seq = seq;
        st.max_ts = st.max_ts.max(ts);
        Some(s)
    }

    /// A begin (row `row` of the begin input). False when the producer's seq did not grow.
    #[inline(always)]
    fn begin(&mut self, p: i32, ts: i64, seq: i64, key: i64, row: usize) -> bool {
        let Some(s) = self.advance(p, ts, seq) else { return false };
        let st = &mut self.producers[s];
        let out = &mut self.out;
        out.depth[row] = st.stack.len() as i32;
        out.parent[row] = st.stack.last().map_or(-1, |f| f.row as i64);
        st.stack.push(Frame { row: row as u32, ts, key, child: 0 });
        true
    }

    /// An end (row `row` of the end input). False when the producer's seq did not grow.
    #[inline(always)]
    fn end(&mut self, p: i32, ts: i64, seq: i64, key: i64, row: usize) -> bool {
        let Some(s) = self.advance(p, ts, seq) else { return false };
        let st = &mut self.producers[s];
        match st.stack.last() {
            Some(f) if !KEYED || f.key == key => {
                let f = *f;
                st.stack.pop();
                close(&mut self.out, &mut st.stack, f, ts, row as i64);
            }
            _ => {
                if !end_slow(&mut self.out, &mut st.stack, KEYED, ts, key, row) {
                    let u = &mut self.unmatched;
                    u.ts.push(ts);
                    u.producer.push(p);
                    u.seq.push(seq);
                    u.key.push(key);
                }
            }
        }
        true
    }

    /// Pairs the rows of `b` from `i` and of `e` from `j` in (ts, seq) order until one
    /// runs out; returns where each stopped, None when a producer's seq did not grow.
    #[inline(never)]
    fn merge<C: Cols>(
        &mut self,
        b: &C,
        mut i: usize,
        bbase: usize,
        e: &C,
        mut j: usize,
        ebase: usize,
    ) -> Option<(usize, usize)> {
        // Every column of a side re-sliced to the side's length: the loop condition then
        // proves each index in bounds and the checks go.
        let bts = b.ts();
        let ets = e.ts();
        let (bp, bs) = (&b.producer()[..bts.len()], &b.seq()[..bts.len()]);
        let (ep, es) = (&e.producer()[..ets.len()], &e.seq()[..ets.len()]);
        let (bk, ek) = if KEYED {
            (&b.key().unwrap_or(&[])[..bts.len()], &e.key().unwrap_or(&[])[..ets.len()])
        } else {
            (&[][..], &[][..])
        };
        while i < bts.len() && j < ets.len() {
            let (tb, te, sb, se) = (bts[i], ets[j], bs[i], es[j]);
            let (pb, pe) = (bp[i], ep[j]);
            // (ts, producer, seq): a proper merge of inputs sorted so (ts ties across
            // producers in any other order may break a producer's seq order: checked).
            if tb < te || (tb == te && (pb, sb) <= (pe, se)) {
                if !self.begin(pb, tb, sb, if KEYED { bk[i] } else { 0 }, bbase + i) {
                    return None;
                }
                i += 1;
            } else {
                if !self.end(pe, te, se, if KEYED { ek[j] } else { 0 }, ebase + j) {
                    return None;
                }
                j += 1;
            }
        }
        Some((i, j))
    }

    /// Every row of `c` from `i` (the other side has no more rows).
    fn rest<C: Cols>(&mut self, c: &C, i: usize, base: usize, is_end: bool) -> bool {
        let (ts, p, seq) = (c.ts(), c.producer(), c.seq());
        let key = |r: usize| if KEYED { c.key().map_or(0, |k| k[r]) } else { 0 };
        for r in i..ts.len() {
            let ok = if is_end {
                self.end(p[r], ts[r], seq[r], key(r), base + r)
            } else {
                self.begin(p[r], ts[r], seq[r], key(r), base + r)
            };
            if !ok {
                return false;
            }
        }
        true
    }

    /// Closes what is still open, cut at each producer's last ts (rows in `open_at_end`).
    fn close_open(&mut self) {
        for st in &mut self.producers {
            while let Some(f) = st.stack.pop() {
                self.out.open_at_end.push(f.row as i64);
                close(&mut self.out, &mut st.stack, f, st.max_ts, -1);
            }
        }
    }
}

#[inline(always)]
fn close(out: &mut Spans, stack: &mut [Frame], f: Frame, end_ts: i64, end_row: i64) {
    let dur = end_ts.wrapping_sub(f.ts);
    let r = f.row as usize;
    out.end_row[r] = end_row;
    out.end_ts[r] = end_ts;
    out.self_ns[r] = dur.wrapping_sub(f.child);
    out.closed[r] = end_row >= 0;
    if let Some(top) = stack.last_mut() {
        top.child = top.child.wrapping_add(dur);
    }
}

/// An end whose key is not the innermost open span's (or with nothing open): it closes
/// the innermost open span with its key, cutting the ones above, or is unmatched (false).
#[cold]
#[inline(never)]
fn end_slow(out: &mut Spans, stack: &mut Vec<Frame>, keyed: bool, ts: i64, key: i64, row: usize) -> bool {
    let at = if keyed { stack.iter().rposition(|f| f.key == key) } else { stack.len().checked_sub(1) };
    let Some(at) = at else {
        out.unmatched_end.push(row as i64);
        return false;
    };
    while stack.len() > at + 1 {
        let f = stack.pop().expect("frame above the match");
        close(out, stack, f, ts, -1);
    }
    let f = stack.pop().expect("the matching frame");
    close(out, stack, f, ts, row as i64);
    true
}

/// One side's batches not yet paired.
struct Side<C> {
    queue: VecDeque<C>,
    /// Next row in the front batch.
    off: usize,
    /// Row number (in the side's whole input) of the front batch's first row.
    base: usize,
    /// Rows pushed so far.
    rows: usize,
    /// Last ts pushed.
    last_ts: i64,
}

impl<C> Side<C> {
    fn new() -> Self {
        Side { queue: VecDeque::new(), off: 0, base: 0, rows: 0, last_ts: i64::MIN }
    }
}

enum Keyed<C> {
    No(State<false>, [Side<C>; 2]),
    Yes(State<true>, [Side<C>; 2]),
}

/// Pairing fed batch by batch (see the module doc): `push` begins and ends in their
/// input order, then `finish`.
pub struct Stream<C: Cols> {
    inner: Keyed<C>,
    keyed: bool,
    /// The inputs broke the fast path's order: the caller pairs on the general path.
    broken: bool,
    /// The begins came ordered by (ts, producer, seq) so far.
    begins_ordered: bool,
    last_begin: (i64, i32, i64),
}

impl<C: Cols> Stream<C> {
    /// A stream; `begins_hint`, the number of begins expected, sizes the output columns
    /// once (they grow when more come).
    pub fn new(keyed: bool, begins_hint: usize) -> Self {
        let hint = begins_hint.min(crate::store::order::MAX_ROWS);
        let out = Spans {
            // Zeroed allocations come from the kernel as untouched pages: the pass writes
            // every row once (`begin` and `close`), nothing is written twice.
            end_row: vec![Default::default(); hint],
            end_ts: vec![Default::default(); hint],
            depth: vec![Default::default(); hint],
            parent: vec![Default::default(); hint],
            self_ns: vec![Default::default(); hint],
            closed: vec![Default::default(); hint],
            ..Spans::default()
        };
        let sides = [Side::new(), Side::new()];
        let inner = if keyed { Keyed::Yes(State::new(out), sides) } else { Keyed::No(State::new(out), sides) };
        Stream { inner, keyed, broken: false, begins_ordered: true, last_begin: (i64::MIN, i32::MIN, i64::MIN) }
    }

    /// False once the inputs broke the fast path's order (nothing more is paired; the
    /// caller pairs the whole input on the general path).
    pub fn ok(&self) -> bool {
        !self.broken
    }

    /// Adds a batch of begins (`is_end` false) or ends and pairs as far as both sides go.
    /// Errors on ragged columns, a key on a stream without keys or the reverse, or more
    /// than u32::MAX rows on a side.
    pub fn push(&mut self, is_end: bool, batch: C) -> Result<(), String> {
        let what = if is_end { "end" } else { "begin" };
        let n = batch.ts().len();
        if batch.producer().len() != n || batch.seq().len() != n || batch.key().is_some_and(|k| k.len() != n) {
            return Err(format!("{what}: columns differ in length"));
        }
        if batch.key().is_some() != self.keyed {
            return Err("keys must be given for both begins and ends, or for neither".into());
        }
        if self.broken || n == 0 {
            return Ok(());
        }
        if !is_end && self.begins_ordered {
            let (ordered, last) = ordered_from(&batch, self.last_begin);
            self.begins_ordered = ordered;
            self.last_begin = last;
        }
        match &mut self.inner {
            Keyed::No(st, sides) => {
                self.broken = !(queue(st, sides, is_end, batch, what)? && advance(st, sides));
            }
            Keyed::Yes(st, sides) => {
                self.broken = !(queue(st, sides, is_end, batch, what)? && advance(st, sides));
            }
        }
        if self.broken {
            self.release();
        }
        Ok(())
    }

    fn release(&mut self) {
        match &mut self.inner {
            Keyed::No(st, sides) => {
                st.out = Spans::default();
                sides.iter_mut().for_each(|s| s.queue.clear());
            }
            Keyed::Yes(st, sides) => {
                st.out = Spans::default();
                sides.iter_mut().for_each(|s| s.queue.clear());
            }
        }
    }

    /// Pairs what is left and closes what is still open: the spans and the values of
    /// the unmatched ends. None when the inputs broke the fast path's order.
    pub fn finish(self) -> Option<(Spans, UnmatchedEnds)> {
        if self.broken {
            return None;
        }
        let (mut spans, unmatched) = match self.inner {
            Keyed::No(st, sides) => drain(st, sides)?,
            Keyed::Yes(st, sides) => drain(st, sides)?,
        };
        spans.presorted = true;
        spans.begins_ordered = self.begins_ordered;
        Some((spans, unmatched))
    }
}

/// Whether the rows of `b` are ordered by (ts, producer, seq) and come after `last`; the
/// last row's key. Rows sorted by ts are checked with one comparison each (ties compare
/// producer and seq).
fn ordered_from<C: Cols>(b: &C, last: (i64, i32, i64)) -> (bool, (i64, i32, i64)) {
    let (ts, p, s) = (b.ts(), b.producer(), b.seq());
    let n = ts.len();
    if n == 0 {
        return (true, last);
    }
    let key = |r: usize| (ts[r], p[r], s[r]);
    if key(0) < last {
        return (false, last);
    }
    for r in 1..n {
        if ts[r] <= ts[r - 1] && key(r) < key(r - 1) {
            return (false, last);
        }
    }
    (true, key(n - 1))
}

/// Appends a batch to its side (checking it continues the side's ts order) and makes
/// room in the output columns for new begins. Ok(false): the order is broken.
fn queue<C: Cols, const K: bool>(
    st: &mut State<K>,
    sides: &mut [Side<C>; 2],
    is_end: bool,
    batch: C,
    what: &str,
) -> Result<bool, String> {
    let side = &mut sides[is_end as usize];
    let ts = batch.ts();
    let n = ts.len();
    if side.rows + n > crate::store::order::MAX_ROWS {
        return Err(format!("{what}: more than u32::MAX rows"));
    }
    if ts[0] < side.last_ts || ts.windows(2).any(|w| w[0] > w[1]) {
        return Ok(false);
    }
    side.last_ts = ts[n - 1];
    side.rows += n;
    if !is_end && st.out.end_row.len() < side.rows {
        let len = side.rows.max(st.out.end_row.len() * 2).min(crate::store::order::MAX_ROWS);
        let o = &mut st.out;
        o.end_row.resize(len, 0);
        o.end_ts.resize(len, 0);
        o.depth.resize(len, 0);
        o.parent.resize(len, 0);
        o.self_ns.resize(len, 0);
        o.closed.resize(len, false);
    }
    side.queue.push_back(batch);
    Ok(true)
}

/// Merges while both sides have rows. False when a producer's seq did not grow.
fn advance<C: Cols, const K: bool>(st: &mut State<K>, sides: &mut [Side<C>; 2]) -> bool {
    let [b, e] = sides;
    while let (Some(bc), Some(ec)) = (b.queue.front(), e.queue.front()) {
        let Some((i, j)) = st.merge(bc, b.off, b.base, ec, e.off, e.base) else {
            return false;
        };
        (b.off, e.off) = (i, j);
        for s in [&mut *b, &mut *e] {
            let len = s.queue.front().map_or(0, |c| c.ts().len());
            if s.off >= len {
                s.queue.pop_front();
                s.base += len;
                s.off = 0;
            }
        }
    }
    true
}

/// The rows left on one side once the other has none, then the open spans closed.
fn drain<C: Cols, const K: bool>(mut st: State<K>, mut sides: [Side<C>; 2]) -> Option<(Spans, UnmatchedEnds)> {
    if !advance(&mut st, &mut sides) {
        return None;
    }
    for (is_end, s) in sides.iter_mut().enumerate() {
        let mut off = s.off;
        let mut base = s.base;
        while let Some(c) = s.queue.pop_front() {
            if !st.rest(&c, off, base, is_end == 1) {
                return None;
            }
            base += c.ts().len();
            off = 0;
        }
    }
    st.close_open();
    st.out.open_at_end.sort_unstable();
    let nb = sides[0].rows;
    let mut out = st.out;
    for v in [&mut out.end_row, &mut out.end_ts, &mut out.parent, &mut out.self_ns] {
        v.truncate(nb);
    }
    out.depth.truncate(nb);
    out.closed.truncate(nb);
    // Ends are visited in their input order: the unmatched rows (and their values) ascend.
    debug_assert!(out.unmatched_end.windows(2).all(|w| w[0] < w[1]));
    Some((out, st.unmatched))
}
