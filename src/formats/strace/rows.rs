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
use arrow_buffer::{BooleanBuffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::SchemaRef;

use super::names::NameOf;
use crate::formats::decl::EventTypeDecl;
use crate::slab::{advise_huge, Frozen, Part, Slab, SlabLayout, SlabPool};

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
    /// Memory of emitted batches' columns, back once the store has written them (slab.rs).
    slabs: SlabPool,
    /// Row and arena buffers of built cuts, reused ([`Rows::recycle`]).
    spare_rows: Vec<Vec<Row>>,
    spare_arenas: Vec<Vec<u8>>,
}

/// An empty vector with room for `cap` values, on huge pages where it spans any (see slab.rs:
/// the rows and arenas of the cuts in flight, ~20 MB each, were ~30K of the import's page faults).
fn fresh<T>(cap: usize) -> Vec<T> {
    let v = Vec::with_capacity(cap);
    advise_huge(v.as_ptr() as *const u8, cap * std::mem::size_of::<T>());
    v
}

impl Rows {
    /// No rows yet, with room for `rows` of them and `arena` bytes of their strings (grown when
    /// more come).
    pub fn with_capacity(rows: usize, arena: usize) -> Rows {
        Rows { rows: fresh(rows), arena: fresh(arena), ..Rows::default() }
    }

    /// Rows held.
    #[inline]
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// No row held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
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
        let out = build(aside.iter(), &self.aside_arena, names, &self.slabs);
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
        let mut rest = self.spare_rows.pop().unwrap_or_else(|| fresh(rows_cap));
        let mut arena = self.spare_arenas.pop().unwrap_or_else(|| fresh(arena_cap));
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
        Cut { rows, arena, late, events, slabs: self.slabs.clone() }
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
    slabs: SlabPool,
}

impl Cut {
    /// The record batches of the cut (one per event type that has rows); the buffers stay,
    /// for [`Rows::recycle`].
    pub fn build(&mut self, names: &impl NameOf) -> Vec<(&'static str, RecordBatch)> {
        let mut emit: Vec<&Row> = self.rows.iter().filter(|r| r.hole == COMPLETE).collect();
        if self.late {
            emit.sort_by_key(|r| r.ts);
        }
        build(emit.into_iter(), &self.arena, names, &self.slabs)
    }
}

/// Record batches (one per event type that has rows) of `rows`, in that order, every column of
/// them carved from one slab (slab.rs): written in place, no vector grown, no copy.
fn build<'a>(
    rows: impl Iterator<Item = &'a Row> + Clone,
    arena: &[u8],
    names: &impl NameOf,
    slabs: &SlabPool,
) -> Vec<(&'static str, RecordBatch)> {
    // Exact sizes first: rows of each type and string bytes of each slot (s[0..7], then name).
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
    let mut layout = SlabLayout::default();
    let plans: [Plan; 3] = std::array::from_fn(|t| Plan::new(t, count[t], &bytes[t], &mut layout));
    let mut slab = slabs.take(&layout);
    let mut out: [Cols; 3] = std::array::from_fn(|t| Cols::new(&plans[t], &mut slab));
    for r in rows {
        out[r.kind as usize].push(r, arena, names);
    }
    let slab = slab.freeze();
    let mut batches = Vec::new();
    for (t, cols) in out.iter().enumerate() {
        if count[t] > 0 {
            batches.push((EVENT_TYPES[t], cols.finish(t, &plans[t], &slab)));
        }
    }
    batches
}

/// Where the columns of one event type lie in the slab (unused slots have empty parts).
struct Plan {
    rows: usize,
    ts: Part,
    producer: Part,
    seq: Part,
    dur: Part,
    name: StrPlan,
    /// int64 slots: values, validity
    i: [(Part, Part); 6],
    s: [StrPlan; 7],
    /// exit's `core` (a bitmap of values)
    core: Part,
}

#[derive(Clone, Copy)]
struct StrPlan {
    offsets: Part,
    values: Part,
    valid: Part,
}

impl Plan {
    /// `bytes`: string bytes of slots s[0..7], then of `name`.
    fn new(t: usize, rows: usize, bytes: &[usize; 8], layout: &mut SlabLayout) -> Plan {
        // slots each type fills: syscall all six int64 and seven strings, signal i[0] and
        // s[0..3], exit i[0], i[1] (core) and s[0]
        let (ints, strs) = [(6, 7), (1, 3), (1, 1)][t];
        let syscall = t == Kind::Syscall as usize;
        let bits = rows.div_ceil(8);
        let n = |used: bool| if used { rows } else { 0 };
        let str_plan = |used: bool, bytes: usize, layout: &mut SlabLayout| StrPlan {
            offsets: layout.part::<i32>(if used { rows + 1 } else { 0 }),
            values: layout.part::<u8>(if used { bytes } else { 0 }),
            valid: layout.part::<u8>(if used { bits } else { 0 }),
        };
        Plan {
            rows,
            ts: layout.part::<i64>(rows),
            producer: layout.part::<i32>(rows),
            seq: layout.part::<i64>(rows),
            dur: layout.part::<i64>(n(syscall)),
            name: str_plan(syscall, bytes[7], layout),
            i: std::array::from_fn(|k| {
                (layout.part::<i64>(n(k < ints)), layout.part::<u8>(if k < ints { bits } else { 0 }))
            }),
            s: std::array::from_fn(|k| str_plan(k < strs, bytes[k], layout)),
            core: layout.part::<u8>(if t == Kind::Exit as usize { bits } else { 0 }),
        }
    }
}

/// A nullable string column being written into its parts of the slab.
struct StrOut {
    offsets: *mut i32,
    values: *mut u8,
    valid: *mut u8,
    len: usize,
    room: usize,
    nulls: usize,
}

impl StrOut {
    fn new(p: &StrPlan, slab: &mut Slab) -> StrOut {
        let (offsets, values, valid) = (slab.ptr::<i32>(p.offsets), slab.ptr::<u8>(p.values), slab.ptr::<u8>(p.valid));
        // SAFETY: the parts are this column's (an unused column's are empty: nothing is written).
        unsafe {
            std::ptr::write_bytes(valid, 0, p.valid.bytes()); // (a reused slab holds old bits)
            if p.offsets.bytes() > 0 {
                offsets.write(0);
            }
        }
        StrOut { offsets, values, valid, len: 0, room: p.values.bytes(), nulls: 0 }
    }

    /// Appends string `b` (None: null) as row `at`.
    #[inline]
    fn push(&mut self, at: usize, b: Option<&[u8]>) {
        // SAFETY: `at` < the column's rows and the strings fit the values part, both asserted
        // (the sizes were counted over the same rows).
        unsafe {
            match b {
                Some(b) => {
                    assert!(self.len + b.len() <= self.room, "strace column overflows its slab part");
                    std::ptr::copy_nonoverlapping(b.as_ptr(), self.values.add(self.len), b.len());
                    self.len += b.len();
                    *self.valid.add(at >> 3) |= 1 << (at & 7);
                }
                None => self.nulls += 1,
            }
            self.offsets.add(at + 1).write(self.len as i32);
        }
    }

    fn finish(&self, rows: usize, p: &StrPlan, slab: &Frozen) -> ArrayRef {
        let offsets = ScalarBuffer::<i32>::new(slab.buffer(p.offsets), 0, rows + 1);
        let nulls = (self.nulls > 0).then(|| {
            // SAFETY: `nulls` is the count of unset bits among the first `rows`.
            unsafe { NullBuffer::new_unchecked(BooleanBuffer::new(slab.buffer(p.valid), 0, rows), self.nulls) }
        });
        // SAFETY: offsets start at 0 and never decrease (each push appends), the last one is
        // values.len() (cut before 2 GiB: see the parser's arena limit), and every value was
        // checked to be UTF-8 before it entered the arena (`unescape_into`, or ASCII from the
        // grammar, or from_utf8 on raw text).
        let array =
            unsafe { StringArray::new_unchecked(OffsetBuffer::new_unchecked(offsets), slab.buffer(p.values), nulls) };
        Arc::new(array)
    }
}

/// The columns of one event type being written into the slab.
struct Cols {
    rows: usize,
    at: usize,
    ts: *mut i64,
    producer: *mut i32,
    seq: *mut i64,
    dur: *mut i64,
    name: StrOut,
    /// int64 slots: values, validity, nulls
    i: [(*mut i64, *mut u8, usize); 6],
    s: [StrOut; 7],
    core: *mut u8,
}

impl Cols {
    fn new(p: &Plan, slab: &mut Slab) -> Cols {
        let i = std::array::from_fn(|k| {
            let (values, valid) = p.i[k];
            let bits = slab.ptr::<u8>(valid);
            // SAFETY: the validity part of this slot (a reused slab holds old bits).
            unsafe { std::ptr::write_bytes(bits, 0, valid.bytes()) };
            (slab.ptr::<i64>(values), bits, 0)
        });
        let core = slab.ptr::<u8>(p.core);
        // SAFETY: exit's `core` bitmap part (empty for the other types).
        unsafe { std::ptr::write_bytes(core, 0, p.core.bytes()) };
        Cols {
            rows: p.rows,
            at: 0,
            ts: slab.ptr(p.ts),
            producer: slab.ptr(p.producer),
            seq: slab.ptr(p.seq),
            dur: slab.ptr(p.dur),
            name: StrOut::new(&p.name, slab),
            i,
            s: std::array::from_fn(|k| StrOut::new(&p.s[k], slab)),
            core,
        }
    }

    #[inline]
    fn int(&mut self, k: usize, v: i64) {
        let (values, valid, nulls) = &mut self.i[k];
        // SAFETY: `at` < rows (asserted in push) and slot k is one this type fills.
        unsafe {
            values.add(self.at).write(v);
            if v == NULL {
                *nulls += 1;
            } else {
                *valid.add(self.at >> 3) |= 1 << (self.at & 7);
            }
        }
    }

    #[inline]
    fn push(&mut self, r: &Row, arena: &[u8], names: &impl NameOf) {
        let at = self.at;
        assert!(at < self.rows, "more strace rows than counted");
        // SAFETY: `at` < rows, the length of these parts.
        unsafe {
            self.ts.add(at).write(r.ts);
            self.producer.add(at).write(r.producer);
            self.seq.add(at).write(r.seq);
        }
        let opt = |s: Str| if s.is_null() { None } else { Some(&arena[s.off as usize..(s.off + s.len) as usize]) };
        match r.kind {
            Kind::Syscall => {
                // SAFETY: as above (syscalls have `dur`).
                unsafe { self.dur.add(at).write(r.dur) };
                self.name.push(at, Some(names.name_of(r.name)));
                for k in 0..6 {
                    self.int(k, r.i[k]);
                }
                for k in 0..7 {
                    self.s[k].push(at, opt(r.s[k]));
                }
            }
            Kind::Signal => {
                self.int(0, r.i[0]);
                for k in 0..3 {
                    self.s[k].push(at, opt(r.s[k]));
                }
            }
            Kind::Exit => {
                self.int(0, r.i[0]);
                if r.i[1] == 1 {
                    // SAFETY: as above (exits have the `core` bitmap).
                    unsafe { *self.core.add(at >> 3) |= 1 << (at & 7) };
                }
                self.s[0].push(at, opt(r.s[0]));
            }
        }
        self.at += 1;
    }

    fn finish(&self, t: usize, p: &Plan, slab: &Frozen) -> RecordBatch {
        let rows = p.rows;
        assert_eq!(self.at, rows, "fewer strace rows than counted");
        let int =
            |part: Part| -> ArrayRef { Arc::new(Int64Array::new(ScalarBuffer::new(slab.buffer(part), 0, rows), None)) };
        let nullable = |k: usize| -> ArrayRef {
            let ((values, valid), nulls) = (p.i[k], self.i[k].2);
            let nulls = (nulls > 0).then(|| {
                // SAFETY: `nulls` is the count of unset bits among the first `rows`.
                unsafe { NullBuffer::new_unchecked(BooleanBuffer::new(slab.buffer(valid), 0, rows), nulls) }
            });
            Arc::new(Int64Array::new(ScalarBuffer::new(slab.buffer(values), 0, rows), nulls))
        };
        let s = |k: usize| self.s[k].finish(rows, &p.s[k], slab);
        let mut cols: Vec<ArrayRef> = vec![
            int(p.ts),
            Arc::new(Int32Array::new(ScalarBuffer::new(slab.buffer(p.producer), 0, rows), None)),
            int(p.seq),
        ];
        match t {
            0 => {
                cols.push(int(p.dur));
                cols.push(self.name.finish(rows, &p.name, slab));
                // fd, path, path2, pos, size, ret, errno, flags, args
                cols.extend([nullable(0), s(0), s(1), nullable(1), nullable(2), nullable(3), s(2), s(3), s(4)]);
                // added later, so existing columns keep their places: fd2, pos2, path_arg, path2_arg
                cols.extend([nullable(4), nullable(5), s(5), s(6)]);
            }
            1 => {
                // signal, code, sender, info
                cols.extend([s(0), s(1), nullable(0), s(2)]);
            }
            _ => {
                // status, signal, core
                let core = BooleanArray::new(BooleanBuffer::new(slab.buffer(p.core), 0, rows), None);
                cols.extend([nullable(0), s(0), Arc::new(core) as ArrayRef]);
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
