//! Parsed events waiting to become Arrow record batches, and the strace schemas.
//!
//! Owns [`Rows`]: fixed-size rows plus one byte arena for their strings, cut into
//! record batches of the three event types ([`EVENT_TYPES`]). Rows are kept in the
//! order their first line came, which is `ts` order: a call printed as `<unfinished
//! ...>` reserves its row when it starts and fills it when its `<... resumed>` line
//! comes, after lines of other threads that started later. A cut emits the complete
//! prefix (up to the oldest row still unfilled), so batches reach the store sorted
//! without a sort. A call that stays unfinished for more than a batch (a thread
//! blocked in futex or wait4 all along) is let go: its placeholder is dropped and its
//! row, when it completes, is set aside and emitted at the very end, so only the last
//! batch is out of order (the store sorts a checkpoint that is not in order: one late
//! row in every checkpoint made the store sort them all).
//! `seq` is numbered per producer when a row completes: a thread's calls complete in
//! the order they started, so that is `ts` order over the three types.

use std::sync::{Arc, OnceLock};

use arrow_array::{ArrayRef, BooleanArray, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::SchemaRef;

use super::names::NameOf;
use crate::colpool::ColumnPool;
use crate::formats::decl::EventTypeDecl;

/// Names of the event types, in the order of `Kind`.
pub const EVENT_TYPES: [&str; 3] = [TYPES[0].name, TYPES[1].name, TYPES[2].name];

/// Their declarations (`decl.rs`), in the same order.
const TYPES: &[EventTypeDecl] = super::decl::STRACE.event_types;

/// Null of an int64 slot.
pub(super) const NULL: i64 = i64::MIN;

/// [`Row::hole`]: a complete row.
pub(super) const COMPLETE: u8 = 0;
/// [`Row::hole`]: a placeholder for a call whose `<... resumed>` line has not come.
pub(super) const WAITING: u8 = 1;
/// [`Row::hole`]: a placeholder that is never emitted.
pub(super) const DROPPED: u8 = 2;

/// Which event type a row is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Syscall = 0,
    Signal = 1,
    Exit = 2,
}

/// A string in the arena; `len == u32::MAX` is null.
#[derive(Clone, Copy, Debug)]
pub(super) struct Str {
    off: u32,
    len: u32,
}

impl Str {
    pub const NULL: Str = Str { off: 0, len: u32::MAX };

    #[inline]
    pub fn is_null(self) -> bool {
        self.len == u32::MAX
    }
}

/// One event. Slot meaning by kind:
/// - syscall: `i` = fd, offset, size, ret, fd2, pos2; `s` = path, path2, errno, flags, args,
///   path_arg, path2_arg
/// - signal:  `i[0]` = sender pid; `s` = signal, code, info
/// - exit:    `i[0]` = status, `i[1]` = core dumped (0/1); `s[0]` = signal
#[derive(Clone, Copy, Debug)]
pub(super) struct Row {
    pub kind: Kind,
    /// [`COMPLETE`], [`WAITING`] (a placeholder for a call not resumed yet) or
    /// [`DROPPED`] (a placeholder given up on, or whose resumption was rejected).
    pub hole: u8,
    pub ts: i64,
    pub dur: i64,
    pub seq: i64,
    pub producer: i32,
    pub name: u32,
    pub i: [i64; 6],
    pub s: [Str; 7],
}

impl Row {
    pub fn new(kind: Kind, ts: i64, producer: i32) -> Self {
        Row { kind, hole: COMPLETE, ts, dur: 0, seq: 0, producer, name: 0, i: [NULL; 6], s: [Str::NULL; 7] }
    }
}

/// Rows not yet emitted, with their strings.
#[derive(Default)]
pub(super) struct Rows {
    rows: Vec<Row>,
    arena: Vec<u8>,
    /// Global index of `rows[0]` (rows emitted or dropped before it).
    base: u64,
    /// Rows appended out of `ts` order since the last cut.
    late: bool,
    /// Rows whose placeholder was let go, with their strings: emitted at the end.
    aside: Vec<Row>,
    aside_arena: Vec<u8>,
    /// The int64 columns of emitted batches, back once the store has written them (see `Pool`).
    pool: ColumnPool,
    /// Row and arena buffers of built cuts, reused ([`Rows::recycle`]).
    spare_rows: Vec<Vec<Row>>,
    spare_arenas: Vec<Vec<u8>>,
}

impl Rows {
    /// Rows held.
    #[inline]
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Bytes of strings held.
    #[inline]
    pub fn arena_bytes(&self) -> usize {
        self.arena.len()
    }

    /// Appends `bytes` (valid UTF-8) to the arena.
    #[inline]
    pub fn text(&mut self, bytes: &[u8]) -> Str {
        let off = self.arena.len() as u32;
        self.arena.extend_from_slice(bytes);
        Str { off, len: bytes.len() as u32 }
    }

    /// The arena itself, for callers that write a string in place (then [`Rows::since`]).
    #[inline]
    pub fn arena_mut(&mut self) -> &mut Vec<u8> {
        &mut self.arena
    }

    /// The string written to the arena since it held `start` bytes.
    #[inline]
    pub fn since(&self, start: usize) -> Str {
        Str { off: start as u32, len: (self.arena.len() - start) as u32 }
    }

    /// The bytes of `s` (empty for null).
    #[inline]
    pub fn get(&self, s: Str) -> &[u8] {
        if s.is_null() {
            &[]
        } else {
            &self.arena[s.off as usize..(s.off + s.len) as usize]
        }
    }

    #[inline]
    pub fn push(&mut self, row: Row) {
        if let Some(last) = self.rows.last() {
            if row.ts < last.ts {
                self.late = true;
            }
        }
        self.rows.push(row);
    }

    /// Reserves the row of a call whose result comes later; returns its slot.
    #[inline]
    pub fn reserve(&mut self, ts: i64, producer: i32, name: u32) -> u64 {
        let mut row = Row::new(Kind::Syscall, ts, producer);
        row.hole = WAITING;
        row.name = name;
        self.push(row);
        self.base + self.rows.len() as u64 - 1
    }

    /// Fills the row reserved at `slot`, or appends it when the placeholder was let go.
    #[inline]
    pub fn fill(&mut self, slot: u64, row: Row) {
        match slot.checked_sub(self.base) {
            Some(k) if (k as usize) < self.rows.len() && self.rows[k as usize].hole == WAITING => {
                self.rows[k as usize] = row
            }
            _ => {
                let mut row = row;
                for s in row.s.iter_mut().filter(|s| !s.is_null()) {
                    let off = self.aside_arena.len() as u32;
                    self.aside_arena.extend_from_slice(&self.arena[s.off as usize..(s.off + s.len) as usize]);
                    s.off = off;
                }
                self.aside.push(row);
            }
        }
    }

    /// Emits the rows set aside (see the module documentation), sorted by `ts`.
    pub fn take_aside(&mut self, names: &impl NameOf) -> Vec<(&'static str, RecordBatch)> {
        let mut aside = std::mem::take(&mut self.aside);
        aside.sort_by_key(|r| r.ts);
        let out = build(aside.iter(), &self.aside_arena, names, &self.pool);
        self.aside_arena.clear();
        out
    }

    /// Gives up the row reserved at `slot` (its resumption was rejected).
    pub fn drop_slot(&mut self, slot: u64) {
        if let Some(k) = slot.checked_sub(self.base) {
            if let Some(r) = self.rows.get_mut(k as usize) {
                if r.hole == WAITING {
                    r.hole = DROPPED;
                }
            }
        }
    }

    /// Rows that can be emitted now: those before the first placeholder.
    pub fn ready(&self) -> usize {
        self.rows.iter().position(|r| r.hole == WAITING).unwrap_or(self.rows.len())
    }

    /// The complete rows before the first placeholder (all rows with `force`, dropping the
    /// placeholders), with their strings, to be built into record batches ([`Cut::build`]): the rows and the
    /// arena are moved out (the rows left keep their strings in a fresh arena), so the build
    /// can run on another thread (`background.rs`) while this one parses on.
    pub fn take_cut(&mut self, force: bool) -> Cut {
        let k = if force { self.rows.len() } else { self.ready() };
        let (rows_cap, arena_cap) = (self.rows.capacity(), self.arena.capacity());
        let mut rest = self.spare_rows.pop().unwrap_or_else(|| Vec::with_capacity(rows_cap));
        let mut arena = self.spare_arenas.pop().unwrap_or_else(|| Vec::with_capacity(arena_cap));
        rest.clear();
        arena.clear();
        // Keep the rest, with their strings moved to the fresh arena.
        for r in &self.rows[k..] {
            let mut r = *r;
            for s in r.s.iter_mut() {
                if !s.is_null() {
                    let off = arena.len() as u32;
                    arena.extend_from_slice(&self.arena[s.off as usize..(s.off + s.len) as usize]);
                    s.off = off;
                }
            }
            rest.push(r);
        }
        let mut rows = std::mem::replace(&mut self.rows, rest);
        rows.truncate(k);
        let arena = std::mem::replace(&mut self.arena, arena);
        self.base += k as u64;
        let late = self.late;
        self.late = self.rows.windows(2).any(|w| w[1].ts < w[0].ts);
        let mut events = [0u64; 3];
        for r in rows.iter().filter(|r| r.hole == COMPLETE) {
            events[r.kind as usize] += 1;
        }
        Cut { rows, arena, late, events, pool: self.pool.clone() }
    }

    /// Takes back the buffers of a built [`Cut`] for later cuts (fresh ones of this size
    /// are fresh pages to fault in).
    pub fn recycle(&mut self, rows: Vec<Row>, arena: Vec<u8>) {
        if self.spare_rows.len() < SPARES {
            self.spare_rows.push(rows);
        }
        if self.spare_arenas.len() < SPARES {
            self.spare_arenas.push(arena);
        }
    }
}

/// Buffers of built cuts kept for reuse (a cut in flight on the builder, one coming back).
const SPARES: usize = 2;

/// Rows cut by [`Rows::take_cut`], to be built into record batches.
pub(super) struct Cut {
    /// The rows cut, in start order (placeholders among them are skipped).
    pub rows: Vec<Row>,
    /// Their strings.
    pub arena: Vec<u8>,
    /// Rows out of `ts` order among them (the build sorts).
    late: bool,
    /// Complete rows by event type (what the build will emit).
    pub events: [u64; 3],
    pool: ColumnPool,
}

impl Cut {
    /// The record batches of the cut (one per event type that has rows); the buffers stay,
    /// for [`Rows::recycle`].
    pub fn build(&mut self, names: &impl NameOf) -> Vec<(&'static str, RecordBatch)> {
        let mut emit: Vec<&Row> = self.rows.iter().filter(|r| r.hole == COMPLETE).collect();
        if self.late {
            emit.sort_by_key(|r| r.ts);
        }
        build(emit.into_iter(), &self.arena, names, &self.pool)
    }
}

/// Record batches (one per event type that has rows) of `rows`, in that order.
fn build<'a>(
    rows: impl Iterator<Item = &'a Row> + Clone,
    arena: &[u8],
    names: &impl NameOf,
    pool: &ColumnPool,
) -> Vec<(&'static str, RecordBatch)> {
    // Exact capacities first: growing ~14 columns by doubling cost a fifth of the cut.
    let mut count = [0usize; 3];
    let mut bytes = [[0usize; 8]; 3];
    for r in rows.clone() {
        let k = r.kind as usize;
        count[k] += 1;
        if r.kind == Kind::Syscall {
            bytes[k][7] += names.name_of(r.name).len();
        }
        for (b, s) in bytes[k].iter_mut().zip(r.s) {
            if !s.is_null() {
                *b += s.len as usize;
            }
        }
    }
    let mut cols: [Cols; 3] = std::array::from_fn(|k| Cols::with_capacity(k, count[k], &bytes[k], pool));
    for r in rows {
        cols[r.kind as usize].push(r, arena, names);
    }
    let mut out = Vec::new();
    for (t, c) in cols.into_iter().enumerate() {
        if !c.ts.is_empty() {
            out.push((EVENT_TYPES[t], c.finish(t, pool)));
        }
    }
    out
}

/// A nullable string column being built.
struct StrCol {
    offsets: Vec<i32>,
    values: Vec<u8>,
    valid: Vec<bool>,
    nulls: usize,
}

impl StrCol {
    fn with_capacity(rows: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        StrCol { offsets, values: Vec::with_capacity(bytes), valid: Vec::with_capacity(rows), nulls: 0 }
    }

    #[inline]
    fn push(&mut self, bytes: Option<&[u8]>) {
        match bytes {
            Some(b) => {
                self.values.extend_from_slice(b);
                self.valid.push(true);
            }
            None => {
                self.valid.push(false);
                self.nulls += 1;
            }
        }
        self.offsets.push(self.values.len() as i32);
    }

    fn finish(self) -> ArrayRef {
        let nulls = if self.nulls > 0 { Some(NullBuffer::from(self.valid)) } else { None };
        // SAFETY: offsets start at 0 and never decrease (each push appends), the last one
        // is values.len() (cut before 2 GiB: see the parser's arena limit), and every value
        // was checked to be UTF-8 before it entered the arena (`unescape_into`, or ASCII
        // from the grammar, or from_utf8 on raw text).
        let array = unsafe {
            StringArray::new_unchecked(
                OffsetBuffer::new_unchecked(ScalarBuffer::from(self.offsets)),
                Buffer::from_vec(self.values),
                nulls,
            )
        };
        Arc::new(array)
    }
}

fn i64_col(v: Vec<i64>, nullable: bool, pool: &ColumnPool) -> ArrayRef {
    let nulls = if nullable && v.contains(&NULL) {
        Some(NullBuffer::new(BooleanBuffer::collect_bool(v.len(), |i| v[i] != NULL)))
    } else {
        None
    };
    // (small columns are not pooled: they would take the pool's places and never fit a big batch)
    let values = if v.capacity() >= POOLED_ROWS { pool.share(v) } else { ScalarBuffer::from(v) };
    Arc::new(Int64Array::new(values, nulls))
}

/// Batches at least this big take their int64 columns from the pool. The import's store keeps
/// a checkpoint's batches (~6 of 64K rows) until their segments are written, then drops them
/// all: their columns come back warm for the next ones, where fresh columns were new pages
/// each (a third of the import's page faults, `perf record -e page-faults`; see colpool.rs).
const POOLED_ROWS: usize = 4096;

/// An empty int64 column with room for `rows` values (`used`: the event type has it).
fn i64_vec(rows: usize, used: bool, pool: &ColumnPool) -> Vec<i64> {
    if !used {
        Vec::new()
    } else if rows >= POOLED_ROWS {
        pool.take(rows)
    } else {
        Vec::with_capacity(rows)
    }
}

/// The columns of one event type being built.
struct Cols {
    ts: Vec<i64>,
    producer: Vec<i32>,
    seq: Vec<i64>,
    dur: Vec<i64>,
    name: StrCol,
    i: [Vec<i64>; 6],
    s: [StrCol; 7],
}

impl Cols {
    /// Room for `rows` rows of event type `t`; `bytes`: string bytes of slots s[0..7], then of
    /// `name`.
    fn with_capacity(t: usize, rows: usize, bytes: &[usize; 8], pool: &ColumnPool) -> Self {
        // int64 slots each type fills: syscall all six, signal i[0], exit i[0] and i[1]
        let ints = [6, 1, 2][t];
        let syscall = t == Kind::Syscall as usize;
        Cols {
            ts: i64_vec(rows, true, pool),
            producer: Vec::with_capacity(rows),
            seq: i64_vec(rows, true, pool),
            dur: i64_vec(rows, syscall, pool),
            name: StrCol::with_capacity(rows, bytes[7]),
            i: std::array::from_fn(|k| i64_vec(rows, k < ints, pool)),
            s: std::array::from_fn(|k| StrCol::with_capacity(rows, bytes[k])),
        }
    }

    #[inline]
    fn push(&mut self, r: &Row, arena: &[u8], names: &impl NameOf) {
        self.ts.push(r.ts);
        self.producer.push(r.producer);
        self.seq.push(r.seq);
        let opt = |s: Str| if s.is_null() { None } else { Some(&arena[s.off as usize..(s.off + s.len) as usize]) };
        match r.kind {
            Kind::Syscall => {
                self.dur.push(r.dur);
                self.name.push(Some(names.name_of(r.name)));
                for k in 0..6 {
                    self.i[k].push(r.i[k]);
                }
                for k in 0..7 {
                    self.s[k].push(opt(r.s[k]));
                }
            }
            Kind::Signal => {
                self.i[0].push(r.i[0]);
                for k in 0..3 {
                    self.s[k].push(opt(r.s[k]));
                }
            }
            Kind::Exit => {
                self.i[0].push(r.i[0]);
                self.i[1].push(r.i[1]);
                self.s[0].push(opt(r.s[0]));
            }
        }
    }

    fn finish(self, t: usize, pool: &ColumnPool) -> RecordBatch {
        let Cols { ts, producer, seq, dur, name, i, s } = self;
        let [i0, i1, i2, i3, i4, i5] = i;
        let [s0, s1, s2, s3, s4, s5, s6] = s;
        let mut cols: Vec<ArrayRef> = vec![
            i64_col(ts, false, pool),
            Arc::new(Int32Array::new(ScalarBuffer::from(producer), None)),
            i64_col(seq, false, pool),
        ];
        match t {
            0 => {
                cols.push(i64_col(dur, false, pool));
                cols.push(name.finish());
                // fd, path, path2, pos, size, ret, errno, flags, args
                cols.push(i64_col(i0, true, pool));
                cols.push(s0.finish());
                cols.push(s1.finish());
                cols.push(i64_col(i1, true, pool));
                cols.push(i64_col(i2, true, pool));
                cols.push(i64_col(i3, true, pool));
                cols.push(s2.finish());
                cols.push(s3.finish());
                cols.push(s4.finish());
                // added later, so existing columns keep their places: fd2, pos2, path_arg, path2_arg
                cols.push(i64_col(i4, true, pool));
                cols.push(i64_col(i5, true, pool));
                cols.push(s5.finish());
                cols.push(s6.finish());
            }
            1 => {
                // signal, code, sender, info
                cols.push(s0.finish());
                cols.push(s1.finish());
                cols.push(i64_col(i0, true, pool));
                cols.push(s2.finish());
            }
            _ => {
                // status, signal, core
                let core = BooleanArray::new(BooleanBuffer::collect_bool(i1.len(), |k| i1[k] == 1), None);
                cols.push(i64_col(i0, true, pool));
                cols.push(s0.finish());
                cols.push(Arc::new(core));
            }
        }
        RecordBatch::try_new(schema(t), cols).expect("strace columns always match their schema")
    }
}

/// Arrow schema of event type `t` (index into [`EVENT_TYPES`]), from its declaration
/// (`decl.rs`): the common columns, then every parameter, nullable.
///
/// - syscall (span): ts, producer, seq, dur, name, fd, path, path2, pos, size, ret,
///   errno, flags, args, fd2, pos2, path_arg, path2_arg
/// - signal (instant): ts, producer, seq, signal, code, sender, info
/// - exit (instant): ts, producer, seq, status, signal, core
pub fn schema(t: usize) -> SchemaRef {
    static SCHEMAS: OnceLock<[SchemaRef; 3]> = OnceLock::new();
    SCHEMAS.get_or_init(build_schemas)[t].clone()
}

fn build_schemas() -> [SchemaRef; 3] {
    [0, 1, 2].map(|t| Arc::new(TYPES[t].arrow_schema(&[])))
}
