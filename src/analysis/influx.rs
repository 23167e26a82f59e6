//! The native InfluxQL executor's loops: aggregates and raw points of one measurement's columns,
//! held in memory as parts sorted by series (producer), time and sequence number.
//!
//! Owns the per-row work of the InfluxQL SELECT shapes the server answers without DuckDB
//! (`python/tracehouse/server/influxql_native.py` decides which, builds the parts from the
//! store's consistent cut and formats the answer): a series' rows in a time range are two
//! binary searches in each part (producer, then time), and a query walks only those rows.
//!
//! Semantics are InfluxDB 1.x's as the DuckDB translation (`influxql_sql.py`) implements them:
//! a row counts when it passes every field condition and one of the query's fields is present;
//! `count` counts a field's non-null values, `sum` of integers wraps as Go's int64 does, `mean`
//! is a double, `min`/`max` keep the earliest point of their value, `first`/`last` the point of
//! least/greatest (time, producer, seq). Windows are aligned to the epoch plus the offset.

use arrow_array::{Array, Float64Array, Int64Array};
use std::cmp::Ordering;

/// One numeric field column of a part (null where a row lacks the field).
#[derive(Clone, Debug)]
pub enum Field {
    /// A float field.
    F(Float64Array),
    /// An integer field.
    I(Int64Array),
}

/// A value of a field: a float or an integer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// A float.
    F(f64),
    /// An integer.
    I(i64),
}

impl Value {
    /// The value as a float.
    pub fn as_f64(self) -> f64 {
        match self {
            Value::F(v) => v,
            Value::I(v) => v as f64,
        }
    }

    /// The value as an integer (a float truncated).
    pub fn as_i64(self) -> i64 {
        match self {
            Value::I(v) => v,
            Value::F(v) => v as i64,
        }
    }

    /// Total order of two values of one field (floats by `total_cmp`: a NaN sorts last).
    fn cmp(self, other: Value) -> Ordering {
        match (self, other) {
            (Value::I(a), Value::I(b)) => a.cmp(&b),
            (a, b) => a.as_f64().total_cmp(&b.as_f64()),
        }
    }
}

impl Field {
    fn get(&self, row: usize) -> Option<Value> {
        match self {
            Field::F(a) => a.is_valid(row).then(|| Value::F(a.value(row))),
            Field::I(a) => a.is_valid(row).then(|| Value::I(a.value(row))),
        }
    }

    fn len(&self) -> usize {
        match self {
            Field::F(a) => a.len(),
            Field::I(a) => a.len(),
        }
    }
}

/// A part of a measurement: rows sorted by (producer, ts, seq), and its fields by the
/// measurement's field index (None: the part has no values of that field).
#[derive(Debug)]
pub struct Part {
    /// (producer, first row, end row, first time, last time) of each producer's run, by
    /// producer: a run inside a query's bounds, or passed for its times, is known without a
    /// read of `ts` (rows far apart: each read a miss of the cache).
    runs: Vec<(i32, usize, usize, i64, i64)>,
    ts: Int64Array,
    seq: Int64Array,
    fields: Vec<Option<Field>>,
}

impl Part {
    /// A part of `producer`, `ts`, `seq` (non-null, sorted by the three) and its fields, each as
    /// long or absent. Errors name what is wrong.
    pub fn new(producer: &[i32], ts: Int64Array, seq: Int64Array, fields: Vec<Option<Field>>) -> Result<Part, String> {
        let n = producer.len();
        if ts.len() != n || seq.len() != n || fields.iter().flatten().any(|f| f.len() != n) {
            return Err("columns differ in length".into());
        }
        if ts.null_count() != 0 || seq.null_count() != 0 {
            return Err("ts and seq must not be null".into());
        }
        let (t, s) = (ts.values(), seq.values());
        let mut runs: Vec<(i32, usize, usize, i64, i64)> = Vec::new();
        for i in 0..n {
            if i > 0 && (producer[i - 1], t[i - 1], s[i - 1]) > (producer[i], t[i], s[i]) {
                return Err(format!("rows not sorted by (producer, ts, seq) at row {i}"));
            }
            match runs.last_mut() {
                Some(r) if r.0 == producer[i] => (r.2, r.4) = (i + 1, t[i]),
                _ => runs.push((producer[i], i, i + 1, t[i], t[i])),
            }
        }
        Ok(Part { runs, ts, seq, fields })
    }

    /// Rows held.
    pub fn rows(&self) -> usize {
        self.ts.len()
    }

    /// Bytes of its columns (what it holds in memory).
    pub fn bytes(&self) -> usize {
        let f: usize = self
            .fields
            .iter()
            .flatten()
            .map(|f| match f {
                Field::F(a) => a.get_buffer_memory_size(),
                Field::I(a) => a.get_buffer_memory_size(),
            })
            .sum();
        f + self.ts.get_buffer_memory_size()
            + self.seq.get_buffer_memory_size()
            + self.runs.len() * std::mem::size_of::<(i32, usize, usize, i64, i64)>()
    }

    /// The rows of `producer` with `lo <= ts < hi`.
    fn range(&self, producer: i32, lo: i64, hi: i64) -> (usize, usize) {
        let (a, b, _, _) = self.range_times(producer, lo, hi);
        (a, b)
    }

    /// `range`, with the first and last time of its rows (when it has any).
    fn range_times(&self, producer: i32, lo: i64, hi: i64) -> (usize, usize, i64, i64) {
        let Ok(k) = self.runs.binary_search_by_key(&producer, |r| r.0) else {
            return (0, 0, 0, 0);
        };
        let (_, a, b, first, last) = self.runs[k];
        if first >= lo && last < hi {
            return (a, b, first, last);
        }
        // (a run inside a bound needs no search: TSBS lastpoint, no time range, 100 series x 8
        // parts, spent ~0.2 ms in the two searches, their reads missing the cache)
        let t = &self.ts.values()[a..b];
        let start = if first >= lo { a } else { a + t.partition_point(|&x| x < lo) };
        let end = if last < hi { b } else { a + t.partition_point(|&x| x < hi) };
        if end <= start {
            return (start, start, 0, 0);
        }
        let v = self.ts.values();
        (start, end, v[start], v[end - 1])
    }

    fn field(&self, i: usize) -> Option<&Field> {
        self.fields.get(i).and_then(|f| f.as_ref())
    }
}

/// A comparison of a field with a number (`usage_user > 90.0`).
#[derive(Clone, Copy, Debug)]
pub enum Op {
    /// =
    Eq,
    /// !=
    Ne,
    /// <
    Lt,
    /// <=
    Le,
    /// >
    Gt,
    /// >=
    Ge,
}

impl Op {
    /// The operator of its InfluxQL spelling.
    pub fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "=" => Op::Eq,
            "!=" => Op::Ne,
            "<" => Op::Lt,
            "<=" => Op::Le,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            _ => return None,
        })
    }

    fn holds(self, o: Ordering) -> bool {
        match self {
            Op::Eq => o == Ordering::Equal,
            Op::Ne => o != Ordering::Equal,
            Op::Lt => o == Ordering::Less,
            Op::Le => o != Ordering::Greater,
            Op::Gt => o == Ordering::Greater,
            Op::Ge => o != Ordering::Less,
        }
    }
}

/// Which rows a query reads: its series (producers) in groups, its time range, its field
/// conditions (AND-ed) and the fields one of which must be present.
#[derive(Clone, Debug)]
pub struct Selection {
    /// The producers of each output group, groups in output order.
    pub groups: Vec<Vec<i32>>,
    /// Inclusive lower time bound (i64::MIN: none).
    pub lo: i64,
    /// Exclusive upper time bound.
    pub hi: i64,
    /// (field, operator, value): a row passes when every one holds (a null field fails).
    pub filters: Vec<(usize, Op, Value)>,
    /// Fields one of which must be non-null for a row to count.
    pub present: Vec<usize>,
}

impl Selection {
    /// Rows the selection's ranges hold, at most `per_range` of each (series, part): what a
    /// query over it will walk, to decide whether its loop is worth letting Python's other
    /// threads run meanwhile.
    pub fn work(&self, parts: &[&Part], per_range: usize) -> usize {
        let mut n = 0usize;
        for g in &self.groups {
            for &p in g {
                for part in parts {
                    let (a, b) = part.range(p, self.lo, self.hi);
                    n = n.saturating_add((b - a).min(per_range));
                }
            }
        }
        n
    }

    fn passes(&self, part: &Part, row: usize) -> bool {
        for &(f, op, v) in &self.filters {
            let Some(x) = part.field(f).and_then(|c| c.get(row)) else {
                return false;
            };
            let o = match (x, v) {
                (Value::I(a), Value::I(b)) => a.cmp(&b),
                (a, b) => match a.as_f64().partial_cmp(&b.as_f64()) {
                    Some(o) => o,
                    None => return false, // NaN compares false, as in SQL
                },
            };
            if !op.holds(o) {
                return false;
            }
        }
        self.present.iter().any(|&f| part.field(f).is_some_and(|c| c.get(row).is_some()))
    }
}

/// An aggregate function.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Agg {
    /// count(x)
    Count,
    /// sum(x)
    Sum,
    /// mean(x)
    Mean,
    /// min(x)
    Min,
    /// max(x)
    Max,
    /// first(x)
    First,
    /// last(x)
    Last,
}

impl Agg {
    /// The function of its InfluxQL name.
    pub fn parse(s: &str) -> Option<Agg> {
        Some(match s {
            "count" => Agg::Count,
            "sum" => Agg::Sum,
            "mean" => Agg::Mean,
            "min" => Agg::Min,
            "max" => Agg::Max,
            "first" => Agg::First,
            "last" => Agg::Last,
            _ => return None,
        })
    }
}

/// The running state of one aggregate in one window.
#[derive(Clone, Copy, Debug)]
struct State {
    n: i64,
    fsum: f64,
    isum: i64,
    wide: i128,
    best: Option<(Value, (i64, i32, i64))>, // min/max/first/last: the value and its point's key
}

const EMPTY: State = State { n: 0, fsum: 0.0, isum: 0, wide: 0, best: None };

impl State {
    fn add(&mut self, agg: Agg, v: Value, key: (i64, i32, i64)) {
        self.n += 1;
        match agg {
            Agg::Count => {}
            Agg::Sum | Agg::Mean => match v {
                Value::F(x) => self.fsum += x,
                Value::I(x) => {
                    self.isum = self.isum.wrapping_add(x);
                    self.wide += x as i128;
                }
            },
            Agg::Min | Agg::Max => {
                let better = match self.best {
                    None => true,
                    Some((b, bk)) => {
                        let o = v.cmp(b);
                        let o = if agg == Agg::Max { o } else { o.reverse() };
                        o == Ordering::Greater || (o == Ordering::Equal && key.0 < bk.0)
                    }
                };
                if better {
                    self.best = Some((v, key));
                }
            }
            Agg::First | Agg::Last => {
                // (points of one time: the greater value, as InfluxDB's FloatFirstReduce and
                // its kin pick; then the least or greatest (producer, seq))
                let better = match self.best {
                    None => true,
                    Some((b, bk)) if key.0 == bk.0 => match v.cmp(b) {
                        Ordering::Equal => (agg == Agg::First) == (key < bk),
                        o => o == Ordering::Greater,
                    },
                    Some((_, bk)) => (agg == Agg::First) == (key.0 < bk.0),
                };
                if better {
                    self.best = Some((v, key));
                }
            }
        }
    }

    /// Folds the rows `r0..r1` of one series' part (time order) that `mask` keeps (all without
    /// one) and where `col` has a value: the loops hoisted out of `add`'s per-row dispatch.
    #[allow(clippy::too_many_arguments)]
    fn fold(
        &mut self,
        agg: Agg,
        col: &Field,
        r0: usize,
        r1: usize,
        mask: Option<&[bool]>,
        ts: &[i64],
        seq: &[i64],
        p: i32,
    ) {
        let nulls = match col {
            Field::F(a) => a.nulls(),
            Field::I(a) => a.nulls(),
        };
        let ok = |r: usize| nulls.is_none_or(|n| n.is_valid(r)) && mask.is_none_or(|m| m[r - r0]);
        let key = |r: usize| (ts[r], p, seq[r]);
        match agg {
            Agg::Count => self.n += (r0..r1).filter(|&r| ok(r)).count() as i64,
            Agg::Sum | Agg::Mean => match col {
                Field::I(a) if nulls.is_none() && mask.is_none() => {
                    // every row: sums the compiler vectorizes (the exact sum from 32-bit halves)
                    let v = &a.values()[r0..r1];
                    self.n += v.len() as i64;
                    self.isum = v.iter().fold(self.isum, |s, &x| s.wrapping_add(x));
                    let low: u64 = v.iter().map(|&x| x as u64 & 0xffff_ffff).sum();
                    let high: i64 = v.iter().map(|&x| x >> 32).sum();
                    self.wide += ((high as i128) << 32) + low as i128;
                }
                Field::I(a) => {
                    let v = a.values();
                    for r in (r0..r1).filter(|&r| ok(r)) {
                        self.n += 1;
                        self.isum = self.isum.wrapping_add(v[r]);
                        self.wide += v[r] as i128;
                    }
                }
                Field::F(a) => {
                    let v = a.values();
                    for r in (r0..r1).filter(|&r| ok(r)) {
                        self.n += 1;
                        self.fsum += v[r];
                    }
                }
            },
            Agg::Min | Agg::Max => {
                let mut best: Option<(Value, usize)> = None;
                let mut n = 0;
                macro_rules! scan {
                    ($vals:expr, $wrap:expr, $better:expr) => {{
                        let v = $vals;
                        let mut bi = usize::MAX;
                        for r in (r0..r1).filter(|&r| ok(r)) {
                            n += 1;
                            if bi == usize::MAX || $better(v[r], v[bi]) {
                                bi = r;
                            }
                        }
                        if bi != usize::MAX {
                            best = Some(($wrap(v[bi]), bi));
                        }
                    }};
                }
                match (col, agg == Agg::Max) {
                    (Field::I(a), max) if nulls.is_none() && mask.is_none() => {
                        // every row: the extreme by a vectorized pass, then its first row
                        let v = &a.values()[r0..r1];
                        let m = if max { v.iter().max() } else { v.iter().min() };
                        if let Some(&m) = m {
                            n = v.len() as i64;
                            let at = r0 + v.iter().position(|&x| x == m).unwrap_or(0);
                            best = Some((Value::I(m), at));
                        }
                    }
                    (Field::I(a), true) => scan!(a.values(), Value::I, |x: i64, y: i64| x > y),
                    (Field::I(a), false) => scan!(a.values(), Value::I, |x: i64, y: i64| x < y),
                    (Field::F(a), true) => scan!(a.values(), Value::F, |x: f64, y: f64| x.total_cmp(&y).is_gt()),
                    (Field::F(a), false) => scan!(a.values(), Value::F, |x: f64, y: f64| x.total_cmp(&y).is_lt()),
                }
                self.n += n;
                if let Some((v, r)) = best {
                    self.n -= 1; // (`add` counts the one it merges)
                    self.add(agg, v, key(r));
                }
            }
            Agg::First | Agg::Last => {
                let pick = if agg == Agg::First { (r0..r1).find(|&r| ok(r)) } else { (r0..r1).rev().find(|&r| ok(r)) };
                // (`n` of a selector only says whether it has a point: the picked one is
                // enough. Counting the run's rows too made TSBS lastpoint, 100 series x 8,640
                // rows x 10 fields, read every row: the core call 1.43 -> 0.38 ms, the whole
                // in-process request 0.92 -> 0.58 ms, medians of 300 at load 17)
                if let Some(r) = pick {
                    let v = match col {
                        Field::I(a) => Value::I(a.value(r)),
                        Field::F(a) => Value::F(a.value(r)),
                    };
                    self.add(agg, v, key(r));
                }
            }
        }
    }

    /// The function's value; `count` of no points is null (its row made by another field's
    /// points: InfluxDB's count iterator gives no point there) unless `zero_count` (fill(null)
    /// under GROUP BY time fills count's windows with 0).
    fn value(&self, agg: Agg, int: bool, zero_count: bool) -> Option<Value> {
        match agg {
            Agg::Count => (self.n != 0 || zero_count).then_some(Value::I(self.n)),
            _ if self.n == 0 => None,
            Agg::Sum => Some(if int { Value::I(self.isum) } else { Value::F(self.fsum) }),
            Agg::Mean => Some(Value::F(if int { self.wide as f64 } else { self.fsum } / self.n as f64)),
            Agg::Min | Agg::Max | Agg::First | Agg::Last => self.best.map(|b| b.0),
        }
    }
}

/// What an aggregate query asks beyond its rows.
#[derive(Clone, Debug)]
pub struct AggQuery {
    /// (function, field) of each output column.
    pub aggs: Vec<(Agg, usize)>,
    /// Whether each field is an integer field (by field index).
    pub int_fields: Vec<bool>,
    /// GROUP BY time's interval in ns (0: no time grouping).
    pub interval: i64,
    /// GROUP BY time's offset in ns.
    pub offset: i64,
    /// fill(none): windows without points are left out (else: null, count 0).
    pub fill_none: bool,
    /// Without GROUP BY time, the time of each row (the range's start, or 0).
    pub stamp: i64,
    /// Without GROUP BY time and with one selector: the row's time is the selected point's.
    pub selector_time: bool,
    /// ORDER BY time DESC.
    pub descending: bool,
    /// OFFSET and LIMIT (0: none) per series.
    pub page_offset: usize,
    /// LIMIT per series (0: none).
    pub page_limit: usize,
    /// Windows of one query at most (more: `Err`).
    pub max_buckets: i64,
    /// With GROUP BY time: where the windows end (exclusive; the range's end, or now).
    pub grid_hi: i64,
}

/// The rows of an answer: each row's group and time, and per output column its values.
#[derive(Debug, Default)]
pub struct Answer {
    /// The group (index in `Selection::groups`) of each row.
    pub group: Vec<u32>,
    /// Each row's time (ns).
    pub time: Vec<i64>,
    /// Each row's producer (raw queries).
    pub producer: Vec<i32>,
    /// Per output column, its values by row.
    pub columns: Vec<Vec<Option<Value>>>,
}

fn bucket_of(t: i64, interval: i64, offset: i64) -> i64 {
    let off = offset.rem_euclid(interval);
    t - (t - off).rem_euclid(interval)
}

fn paged<T>(rows: impl Iterator<Item = T>, offset: usize, limit: usize) -> impl Iterator<Item = T> {
    rows.skip(offset).take(if limit == 0 { usize::MAX } else { limit })
}

/// An aggregate query's answer (`Err`: more windows than `max_buckets`).
pub fn aggregate(parts: &[&Part], sel: &Selection, q: &AggQuery) -> Result<Answer, String> {
    let na = q.aggs.len();
    let mut out = Answer { columns: vec![Vec::new(); na], ..Answer::default() };
    let ints: Vec<bool> = q.aggs.iter().map(|&(_, f)| q.int_fields.get(f).copied().unwrap_or(false)).collect();
    if q.interval <= 0 {
        let mut st = vec![EMPTY; na];
        for g in 0..sel.groups.len() {
            st.iter_mut().for_each(|s| *s = EMPTY);
            let mut present = [false];
            let any = fold_group(parts, sel, g, q, &mut st, &mut present, None);
            if !any {
                continue;
            }
            let mut time = q.stamp;
            if q.selector_time {
                if let Some((_, k)) = st[0].best {
                    time = k.0;
                }
            }
            for _ in paged(std::iter::once(()), q.page_offset, q.page_limit) {
                out.group.push(g as u32);
                out.time.push(time);
                for (k, &(agg, _)) in q.aggs.iter().enumerate() {
                    out.columns[k].push(st[k].value(agg, ints[k], false));
                }
            }
        }
        return Ok(out);
    }
    let (i, off) = (q.interval, q.offset);
    // The first window: the range's start's, or (no lower bound) the earliest counted point's.
    let lo = if sel.lo == i64::MIN {
        let mut min: Option<i64> = None;
        for g in 0..sel.groups.len() {
            for &p in &sel.groups[g] {
                for part in parts {
                    let (a, b) = part.range(p, sel.lo, sel.hi);
                    if let Some(r) = (a..b).find(|&r| sel.passes(part, r)) {
                        let t = part.ts.values()[r];
                        min = Some(min.map_or(t, |m: i64| m.min(t)));
                    }
                }
            }
        }
        match min {
            Some(t) => bucket_of(t, i, off),
            None => return Ok(out),
        }
    } else {
        bucket_of(sel.lo, i, off)
    };
    let span = (q.grid_hi as i128 - lo as i128).max(0);
    if span / i as i128 > q.max_buckets as i128 {
        return Err(format!("more than {} windows", q.max_buckets));
    }
    let nb = ((span + i as i128 - 1) / i as i128) as usize;
    // With fill(null) and a LIMIT, the windows kept are the first (or last) offset + limit of
    // the grid whatever the points: only their rows are folded (TSBS groupby-orderby-limit:
    // 5 one-minute windows of 21 hours). Whether a series has points at all is asked apart.
    let (b0, b1) = match q.page_offset.checked_add(q.page_limit) {
        Some(n) if q.page_limit > 0 && !q.fill_none && q.descending => (nb.saturating_sub(n), nb),
        Some(n) if q.page_limit > 0 && !q.fill_none => (0, n.min(nb)),
        _ => (0, nb),
    };
    let narrow = Selection {
        lo: sel.lo.max((lo as i128 + b0 as i128 * i as i128).min(i64::MAX as i128) as i64),
        hi: sel.hi.min((lo as i128 + b1 as i128 * i as i128).min(i64::MAX as i128) as i64),
        ..sel.clone()
    };
    let mut st = vec![EMPTY; nb * na];
    let mut present = vec![false; nb];
    for g in 0..sel.groups.len() {
        st.iter_mut().for_each(|s| *s = EMPTY);
        present.iter_mut().for_each(|p| *p = false);
        let mut any = fold_group(parts, &narrow, g, q, &mut st, &mut present, Some((lo, i)));
        if !any && (b0, b1) != (0, nb) {
            any = sel.groups[g].iter().any(|&p| {
                parts.iter().any(|part| {
                    let (a, b) = part.range(p, sel.lo, sel.hi);
                    (a..b).any(|r| sel.passes(part, r))
                })
            });
        }
        if !any {
            continue;
        }
        let order: Box<dyn Iterator<Item = usize>> =
            if q.descending { Box::new((b0..b1).rev()) } else { Box::new(b0..b1) };
        let kept = order.filter(|&b| present[b] || !q.fill_none);
        for b in paged(kept, q.page_offset, q.page_limit) {
            out.group.push(g as u32);
            out.time.push(lo + b as i64 * i);
            for (k, &(agg, _)) in q.aggs.iter().enumerate() {
                let v = if present[b] {
                    st[b * na + k].value(agg, ints[k], !q.fill_none)
                } else if agg == Agg::Count {
                    Some(Value::I(0))
                } else {
                    None
                };
                out.columns[k].push(v);
            }
        }
    }
    Ok(out)
}

/// Folds group `g`'s rows into `st` (window-major, `q.aggs` per window) and marks the windows
/// with points in `present`: run by run, a run being one series' rows of one part in one window
/// (`windows`: the first window's start and the interval; None: one window). Whether the group
/// has any point (a point past the last window counts).
fn fold_group(
    parts: &[&Part],
    sel: &Selection,
    g: usize,
    q: &AggQuery,
    st: &mut [State],
    present: &mut [bool],
    windows: Option<(i64, i64)>,
) -> bool {
    let na = q.aggs.len();
    let nb = present.len();
    let mut any = false;
    let mut mask: Vec<bool> = Vec::new();
    for &p in &sel.groups[g] {
        for part in parts {
            let (a, b) = part.range(p, sel.lo, sel.hi);
            if a == b {
                continue;
            }
            let (ts, seq) = (part.ts.values(), part.seq.values());
            // every row passes when nothing filters and a present field has no nulls in the part
            let all = sel.filters.is_empty()
                && sel.present.iter().any(|&f| {
                    part.field(f).is_some_and(|c| match c {
                        Field::F(x) => x.null_count() == 0,
                        Field::I(x) => x.null_count() == 0,
                    })
                });
            let mut r = a;
            while r < b {
                let (w, e) = match windows {
                    None => (0usize, b),
                    Some((lo, i)) => {
                        let w = (ts[r] as i128 - lo as i128) / i as i128;
                        let end = lo as i128 + (w + 1) * i as i128;
                        let mut e = r + 1;
                        while e < b && (ts[e] as i128) < end {
                            e += 1;
                        }
                        (w as usize, e)
                    }
                };
                let m = if all {
                    None
                } else {
                    mask.clear();
                    mask.extend((r..e).map(|x| sel.passes(part, x)));
                    if !mask.iter().any(|&k| k) {
                        r = e;
                        continue;
                    }
                    Some(&mask[..])
                };
                any = true;
                if w >= nb {
                    break; // (past the last window: the series is in the answer, its points are not)
                }
                present[w] = true;
                for (k, &(agg, f)) in q.aggs.iter().enumerate() {
                    if let Some(col) = part.field(f) {
                        st[w * na + k].fold(agg, col, r, e, m, ts, seq, p);
                    }
                }
                r = e;
            }
        }
    }
    any
}

/// A row a raw query may answer with: its order key (time, its producer's place in the group,
/// seq), its part and row, and its producer.
type RawCandidate = ((i64, u32, i64), usize, usize, i32);

/// A raw query's rows per group at most this many (offset + limit): the parts whose rows of a
/// series cannot be among them are passed after one look at their first or last time (TSBS
/// lastpoint, `ORDER BY time DESC LIMIT 1` over 100 series x 10 parts, in-process at load 4.6:
/// `influx_raw_json` 248 -> 191 us; then its strings borrowed, not copied: 117 us).
const PRUNE_WANT: usize = 64;

/// `cand` cut to its `want` first rows in the answer's order.
fn keep_best(cand: &mut Vec<RawCandidate>, want: usize, descending: bool) {
    if descending {
        cand.sort_unstable_by_key(|x| std::cmp::Reverse(x.0));
    } else {
        cand.sort_unstable_by_key(|x| x.0);
    }
    cand.truncate(want);
}

/// A raw query's answer: the rows of each group that pass, ordered by (time, the producer's
/// place in its group, seq) (all descending with `descending`): the caller lists a group's
/// producers in the order of their series' keys, as InfluxDB merges series; `offset` and `limit`
/// (0: none) per group; `fields`: the output columns' fields.
pub fn raw(
    parts: &[&Part],
    sel: &Selection,
    fields: &[usize],
    descending: bool,
    offset: usize,
    limit: usize,
) -> Answer {
    let mut out = Answer { columns: vec![Vec::new(); fields.len()], ..Answer::default() };
    let want = if limit == 0 { usize::MAX } else { offset.saturating_add(limit) };
    let prune = want <= PRUNE_WANT;
    // candidates: (key, part, row); with a limit, at most `want` of each series' range
    let mut cand: Vec<RawCandidate> = Vec::new();
    for g in 0..sel.groups.len() {
        cand.clear();
        for (place, &p) in sel.groups[g].iter().enumerate() {
            // (newest parts first when descending: the tail's, then the latest segments')
            for k in 0..parts.len() {
                let pi = if descending { parts.len() - 1 - k } else { k };
                let part = parts[pi];
                let (a, b, first, last) = part.range_times(p, sel.lo, sel.hi);
                if a == b {
                    continue;
                }
                if prune && cand.len() >= want {
                    // `want` rows found: a part whose rows of the series all come after (before,
                    // descending) the want-th of them has none of the answer
                    keep_best(&mut cand, want, descending);
                    let bound = cand[want - 1].0 .0;
                    if if descending { last < bound } else { first > bound } {
                        continue;
                    }
                }
                let mut taken = 0usize;
                let mut take = |r: usize| {
                    if sel.passes(part, r) {
                        cand.push(((part.ts.values()[r], place as u32, part.seq.values()[r]), pi, r, p));
                        taken += 1;
                    }
                    taken < want
                };
                if descending {
                    for r in (a..b).rev() {
                        if !take(r) {
                            break;
                        }
                    }
                } else {
                    for r in a..b {
                        if !take(r) {
                            break;
                        }
                    }
                }
            }
        }
        if descending {
            cand.sort_unstable_by_key(|x| std::cmp::Reverse(x.0));
        } else {
            cand.sort_unstable_by_key(|x| x.0);
        }
        for &(key, pi, r, p) in paged(cand.iter(), offset, limit) {
            out.group.push(g as u32);
            out.time.push(key.0);
            out.producer.push(p);
            for (k, &f) in fields.iter().enumerate() {
                out.columns[k].push(parts[pi].field(f).and_then(|c| c.get(r)));
            }
        }
    }
    out
}

/// `ns` as Go's RFC3339Nano prints it (InfluxDB's default time format): UTC, the fraction's
/// trailing zeros dropped.
pub fn rfc3339_nano(ns: i64, out: &mut Vec<u8>) {
    let secs = ns.div_euclid(1_000_000_000);
    let frac = ns.rem_euclid(1_000_000_000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // civil_from_days (H. Hinnant's algorithm)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    if (0..=9999).contains(&y) {
        digits(out, y, 4);
    } else {
        int(out, y);
    }
    out.push(b'-');
    digits(out, m, 2);
    out.push(b'-');
    digits(out, d, 2);
    out.push(b'T');
    digits(out, sod / 3600, 2);
    out.push(b':');
    digits(out, sod / 60 % 60, 2);
    out.push(b':');
    digits(out, sod % 60, 2);
    if frac != 0 {
        let mut f = frac;
        let mut n = 9;
        while f % 10 == 0 {
            f /= 10;
            n -= 1;
        }
        out.push(b'.');
        digits(out, f, n);
    }
    out.push(b'Z');
}

/// `v` (0 <= v < 10^n) in exactly `n` decimal digits.
fn digits(out: &mut Vec<u8>, mut v: i64, n: usize) {
    let at = out.len();
    out.resize(at + n, b'0');
    for i in (0..n).rev() {
        out[at + i] = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

/// `v` in decimal.
fn int(out: &mut Vec<u8>, v: i64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut u = v.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if v < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[i..]);
}

/// An output column of `raw_series_json`: the answer's field column `k`, or tag `j`.
#[derive(Clone, Copy, Debug)]
pub enum Out {
    /// The answer's column `k` (an integer column when `ints[k]`).
    Field(usize),
    /// Tag `j`: `tag_text[j]` at the row's producer's place in `producers`.
    Tag(usize),
}

/// A raw answer as whole InfluxDB series, JSON text, one per group with rows (in group order):
/// `prefixes[g]` (the series' object up to its `"values":`), its rows `[time, outs...]`, then `}`.
/// A field value is an integer, or a float as the shortest text that reads back the same (not
/// finite: `null`); a tag is
/// JSON text given per producer (`producers` sorted; a producer not there: `null`).
pub fn raw_series_json<T: AsRef<str>, P: AsRef<str>>(
    ans: &Answer,
    epoch_div: i64,
    outs: &[Out],
    ints: &[bool],
    producers: &[i32],
    tag_text: &[Vec<T>],
    prefixes: &[P],
) -> Vec<Vec<u8>> {
    use std::io::Write;
    let mut out = Vec::new();
    let n = ans.time.len();
    let mut r = 0;
    while r < n {
        let g = ans.group[r];
        let end = r + ans.group[r..].iter().take_while(|&&x| x == g).count();
        let prefix = prefixes[g as usize].as_ref();
        let mut buf: Vec<u8> = Vec::with_capacity(prefix.len() + (end - r) * (16 + 10 * outs.len()) + 4);
        buf.extend_from_slice(prefix.as_bytes());
        buf.push(b'[');
        for row in r..end {
            if row > r {
                buf.push(b',');
            }
            buf.push(b'[');
            if epoch_div > 0 {
                int(&mut buf, ans.time[row].div_euclid(epoch_div));
            } else {
                buf.push(b'"');
                rfc3339_nano(ans.time[row], &mut buf);
                buf.push(b'"');
            }
            let place = ans.producer.get(row).and_then(|p| producers.binary_search(p).ok());
            for o in outs {
                buf.push(b',');
                match *o {
                    Out::Field(k) => match ans.columns[k][row] {
                        Some(v) if ints[k] => int(&mut buf, v.as_i64()),
                        Some(v) if v.as_f64().is_finite() => {
                            let _ = write!(buf, "{:?}", v.as_f64());
                        }
                        _ => buf.extend_from_slice(b"null"),
                    },
                    Out::Tag(j) => match place {
                        Some(i) => buf.extend_from_slice(tag_text[j][i].as_ref().as_bytes()),
                        None => buf.extend_from_slice(b"null"),
                    },
                }
            }
            buf.push(b']');
        }
        buf.extend_from_slice(b"]}");
        out.push(buf);
        r = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_series_json_writes_a_series_per_group_with_tags_by_producer_and_nulls() {
        let ans = Answer {
            group: vec![0, 0, 2],
            time: vec![1_000_000_000, 1_500_000_000, 2_000_000_000],
            producer: vec![7, 9, 4],
            columns: vec![
                vec![Some(Value::I(3)), None, Some(Value::F(2.9))],
                vec![Some(Value::F(0.25)), Some(Value::F(f64::NAN)), Some(Value::I(2))],
            ],
        };
        let outs = [Out::Field(0), Out::Tag(0), Out::Field(1)];
        let tags = vec![vec!["\"a\"".to_string(), "null".to_string()]];
        let prefixes: Vec<String> = ["<g0>", "<g1>", "<g2>"].iter().map(|s| s.to_string()).collect();
        let texts = raw_series_json(&ans, 0, &outs, &[true, false], &[7, 9], &tags, &prefixes);
        let texts: Vec<String> = texts.into_iter().map(|t| String::from_utf8(t).unwrap()).collect();
        assert_eq!(
            texts,
            vec![
                r#"<g0>[["1970-01-01T00:00:01Z",3,"a",0.25],["1970-01-01T00:00:01.5Z",null,null,null]]}"#,
                r#"<g2>[["1970-01-01T00:00:02Z",2,null,2.0]]}"#,
            ]
        );
        let secs = raw_series_json(&ans, 1_000_000_000, &outs[..1], &[true], &[], &[] as &[Vec<String>], &prefixes);
        assert_eq!(String::from_utf8(secs[1].clone()).unwrap(), "<g2>[[2,2]]}");
    }

    /// (producer, ts, seq, integer field, float field)
    type Row = (i32, i64, i64, Option<i64>, Option<f64>);

    fn part(rows: &[Row]) -> Part {
        let p: Vec<i32> = rows.iter().map(|r| r.0).collect();
        let ts = Int64Array::from(rows.iter().map(|r| r.1).collect::<Vec<_>>());
        let seq = Int64Array::from(rows.iter().map(|r| r.2).collect::<Vec<_>>());
        let a = Int64Array::from(rows.iter().map(|r| r.3).collect::<Vec<_>>());
        let b = Float64Array::from(rows.iter().map(|r| r.4).collect::<Vec<_>>());
        Part::new(&p, ts, seq, vec![Some(Field::I(a)), Some(Field::F(b))]).unwrap()
    }

    fn sel(groups: Vec<Vec<i32>>, lo: i64, hi: i64) -> Selection {
        Selection { groups, lo, hi, filters: vec![], present: vec![0, 1] }
    }

    fn q(aggs: Vec<(Agg, usize)>, interval: i64) -> AggQuery {
        AggQuery {
            aggs,
            int_fields: vec![true, false],
            interval,
            offset: 0,
            fill_none: false,
            stamp: 0,
            selector_time: false,
            descending: false,
            page_offset: 0,
            page_limit: 0,
            max_buckets: 1_000_000,
            grid_hi: 30,
        }
    }

    #[test]
    fn times_and_integers_as_json() {
        let mut b = Vec::new();
        rfc3339_nano(1_451_606_400_000_000_000, &mut b);
        rfc3339_nano(-1, &mut b);
        rfc3339_nano(951_782_400_120_000_000, &mut b); // 2000-02-29
        assert_eq!(
            String::from_utf8(b).unwrap(),
            "2016-01-01T00:00:00Z1969-12-31T23:59:59.999999999Z2000-02-29T00:00:00.12Z"
        );
        let mut b = Vec::new();
        int(&mut b, i64::MIN);
        b.push(b' ');
        int(&mut b, 0);
        assert_eq!(String::from_utf8(b).unwrap(), "-9223372036854775808 0");
    }

    #[test]
    fn sums_and_extremes_of_columns_without_nulls() {
        let rows: Vec<Row> = [i64::MAX, i64::MIN, -1, i64::MAX, 5, i64::MAX]
            .iter()
            .enumerate()
            .map(|(k, &v)| (1, k as i64, k as i64, Some(v), Some(1.0)))
            .collect();
        let a = part(&rows);
        let s = sel(vec![vec![1]], i64::MIN, i64::MAX);
        let ans =
            aggregate(&[&a], &s, &q(vec![(Agg::Sum, 0), (Agg::Mean, 0), (Agg::Max, 0), (Agg::Min, 0)], 0)).unwrap();
        let wide: i128 = [i64::MAX, i64::MIN, -1, i64::MAX, 5, i64::MAX].iter().map(|&x| x as i128).sum();
        let wrapped = [i64::MIN, -1, i64::MAX, 5, i64::MAX].iter().fold(i64::MAX, |s, &x| s.wrapping_add(x));
        assert_eq!(ans.columns[0][0], Some(Value::I(wrapped)));
        assert_eq!(ans.columns[1][0], Some(Value::F(wide as f64 / 6.0)));
        assert_eq!(ans.columns[2][0], Some(Value::I(i64::MAX)));
        assert_eq!(ans.columns[3][0], Some(Value::I(i64::MIN)));
        let mut qq = q(vec![(Agg::Max, 0)], 0);
        qq.selector_time = true;
        assert_eq!(aggregate(&[&a], &s, &qq).unwrap().time, vec![0]); // the first of the maxima
    }

    #[test]
    fn unsorted_rows_are_refused() {
        let p = [1, 1];
        let r = Part::new(&p, Int64Array::from(vec![5, 4]), Int64Array::from(vec![0, 1]), vec![]);
        assert!(r.unwrap_err().contains("row 1"));
    }

    #[test]
    fn windows_max_count_and_empty_windows() {
        let a = part(&[(1, 0, 0, Some(3), None), (1, 5, 1, Some(9), Some(1.5)), (1, 25, 2, None, Some(2.0))]);
        let b = part(&[(2, 1, 3, Some(4), None)]);
        let s = sel(vec![vec![1, 2]], 0, 30);
        let ans = aggregate(&[&a, &b], &s, &q(vec![(Agg::Max, 0), (Agg::Count, 0), (Agg::Sum, 1)], 10)).unwrap();
        assert_eq!(ans.time, vec![0, 10, 20]);
        assert_eq!(ans.columns[0], vec![Some(Value::I(9)), None, None]);
        assert_eq!(ans.columns[1], vec![Some(Value::I(3)), Some(Value::I(0)), Some(Value::I(0))]);
        assert_eq!(ans.columns[2], vec![Some(Value::F(1.5)), None, Some(Value::F(2.0))]);
    }

    #[test]
    fn selector_time_and_int_sum_wraps() {
        let a = part(&[(1, 0, 0, Some(i64::MAX), None), (1, 7, 1, Some(1), None), (1, 9, 2, Some(i64::MAX), None)]);
        let s = sel(vec![vec![1]], i64::MIN, 100);
        let mut qq = q(vec![(Agg::Max, 0)], 0);
        qq.selector_time = true;
        let ans = aggregate(&[&a], &s, &qq).unwrap();
        assert_eq!((ans.time[0], ans.columns[0][0]), (0, Some(Value::I(i64::MAX))));
        let ans = aggregate(&[&a], &s, &q(vec![(Agg::Sum, 0), (Agg::Mean, 0)], 0)).unwrap();
        assert_eq!(ans.columns[0][0], Some(Value::I(i64::MAX.wrapping_add(1).wrapping_add(i64::MAX))));
        let mean = ((i64::MAX as i128) * 2 + 1) as f64 / 3.0;
        assert_eq!(ans.columns[1][0], Some(Value::F(mean)));
    }

    #[test]
    fn raw_last_point_per_group_with_filter() {
        let a = part(&[(1, 0, 0, Some(95), None), (1, 5, 1, Some(10), None), (2, 3, 2, Some(99), None)]);
        let mut s = sel(vec![vec![1], vec![2]], i64::MIN, i64::MAX);
        s.filters = vec![(0, Op::Gt, Value::F(90.0))];
        let ans = raw(&[&a], &s, &[0], true, 0, 1);
        assert_eq!(ans.time, vec![0, 3]);
        assert_eq!(ans.producer, vec![1, 2]);
        assert_eq!(ans.columns[0], vec![Some(Value::I(95)), Some(Value::I(99))]);
    }

    #[test]
    fn raw_with_a_limit_over_overlapping_parts_is_every_row_sorted_and_paged() {
        // three parts whose times of one series interleave (a segment, a later one, a tail),
        // two series in a group and one alone; some rows fail the filter or have no value
        let mut rows: [Vec<Row>; 3] = Default::default();
        let mut x: u64 = 7;
        for i in 0..240i64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let (prod, pi, ts) = ((x >> 33) % 3 + 1, ((x >> 40) % 3) as usize, (x >> 45) as i64 % 60);
            let v = if (x >> 20).is_multiple_of(7) { None } else { Some(((x >> 24) % 100) as i64) };
            rows[pi].push((prod as i32, ts, i, v, None));
        }
        let parts: Vec<Part> = rows
            .iter_mut()
            .map(|r| {
                r.sort_by_key(|r| (r.0, r.1, r.2));
                part(r)
            })
            .collect();
        let refs: Vec<&Part> = parts.iter().collect();
        let groups = vec![vec![2, 1], vec![3]];
        for (desc, offset, limit, lo, hi) in
            [(true, 0, 1, 0, 60), (false, 0, 1, 0, 60), (true, 2, 3, 10, 50), (false, 1, 4, 5, 40)]
        {
            let mut s = sel(groups.clone(), lo, hi);
            s.filters = vec![(0, Op::Gt, Value::I(20))];
            let ans = raw(&refs, &s, &[0], desc, offset, limit);
            // the reference: every passing row of the group, sorted, paged
            let (mut time, mut value) = (vec![], vec![]);
            for g in &groups {
                let mut all: Vec<((i64, u32, i64), Option<i64>)> = rows
                    .iter()
                    .flatten()
                    .filter_map(|r| {
                        let place = g.iter().position(|&p| p == r.0)? as u32;
                        (r.1 >= lo && r.1 < hi && r.3.is_some_and(|v| v > 20)).then_some(((r.1, place, r.2), r.3))
                    })
                    .collect();
                all.sort_by_key(|r| r.0);
                if desc {
                    all.reverse();
                }
                for (k, v) in all.into_iter().skip(offset).take(limit) {
                    time.push(k.0);
                    value.push(v.map(Value::I));
                }
            }
            assert_eq!((ans.time, ans.columns[0].clone()), (time, value), "desc {desc} offset {offset} limit {limit}");
        }
    }
}
