//! The TOD workload generator (seed 001, "Event generation").
//!
//! Owns the simulated debugged program of the TOD benchmarks: `threads` threads each
//! calling a root method in an infinite loop, every method body doing a random number
//! of field writes, local-variable writes and nested calls, interleaved by a global
//! scheduler on one nanosecond clock. It owns the four event types' column layouts
//! ([`TodBatch`]) and their Arrow schemas, and nothing Python: the PyO3 wrapper lives
//! in `py/tod.rs`.
//!
//! Decisions:
//! - One PRNG drives everything (scheduler and all threads), one event per scheduler
//!   step. The event stream therefore depends on the seed and the parameters only, never
//!   on how a caller slices it into batches (`fill` can stop after any event).
//! - Each thread is an explicit stack of open frames instead of recursion, so the
//!   generator can stop and resume anywhere and costs no Rust stack.
//! - Columns are plain `Vec`s handed to Arrow without a copy (`ScalarBuffer::from(Vec)`);
//!   the hot loop never touches Arrow builders.
//! - Like the seed's generator, reaching the requested count does not cut the program
//!   short: every thread then exits its open frames (innermost first, thread 1 first), so
//!   the total is `events` plus at most `threads * (max_depth + 1)`.
//!
//! Over 600 lines: one generator state machine (threads, frames, objects) reproducing seed
//! 001's program; tests are in tod/tests.rs.

use std::fmt;
use std::sync::{Arc, OnceLock};

use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch};
use arrow_buffer::{BooleanBuffer, NullBuffer, ScalarBuffer};
use arrow_schema::SchemaRef;

use crate::colpool::ColumnPool;
use crate::formats::decl::EventTypeDecl;
use crate::formats::tod::decl;
use crate::workload::rng::{scale32, SplitMix64};

/// Names of the four event types, in the order batches are returned.
pub const EVENT_TYPES: [&str; 4] = [TYPES[0].name, TYPES[1].name, TYPES[2].name, TYPES[3].name];

/// Their declarations (`formats/tod/decl.rs`: columns, units), in the same order.
const TYPES: &[EventTypeDecl] = decl::TOD.event_types;

/// First timestamp of the global clock, in nanoseconds.
pub const CLOCK_START_NS: i64 = 1_000_000_000;
/// The clock advances by a uniform 1..=`MAX_STEP_NS` nanoseconds per event.
pub const MAX_STEP_NS: u32 = 50;
/// A method body performs a uniform 1..=`MAX_ACTIONS` actions.
pub const MAX_ACTIONS: u32 = 8;
/// Parameter counts are drawn uniformly in 0..=`MAX_PARAMS` once per method.
pub const MAX_PARAMS: u32 = 4;
/// Action mix, in percent: field write below `FIELD_WRITE_PCT`, variable write below
/// `VAR_WRITE_PCT`, call above (a call at `max_depth` becomes a variable write).
const FIELD_WRITE_PCT: u32 = 45;
const VAR_WRITE_PCT: u32 = 85;

/// Parameters of one simulated run. `Default` is the seed's setup (10 threads,
/// 1,000 methods, 1,000 fields, 50 locals) with 10,000 objects and depth 10.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TodConfig {
    /// Events to generate before the program is wound down (the total ends slightly above).
    pub events: u64,
    /// Seed of the single PRNG: equal seeds and parameters give equal traces.
    pub seed: u64,
    /// Simulated threads; producer ids are 1..=threads.
    pub threads: u32,
    /// Methods (behavior ids 0..methods), each with a fixed random parameter count.
    pub methods: u32,
    /// Fields (field ids 0..fields).
    pub fields: u32,
    /// Local variables (var ids 0..locals).
    pub locals: u32,
    /// Objects (object ids 1..=objects), used for targets, values, arguments, returns.
    pub objects: u32,
    /// Deepest call depth; root calls are at depth 0.
    pub max_depth: u32,
}

impl Default for TodConfig {
    fn default() -> Self {
        Self {
            events: 1_000_000,
            seed: 42,
            threads: 10,
            methods: 1_000,
            fields: 1_000,
            locals: 50,
            objects: 10_000,
            max_depth: 10,
        }
    }
}

/// A parameter outside what the generator can simulate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The offending parameter's name.
    pub param: &'static str,
    /// What was expected of it.
    pub expected: &'static str,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid TOD generator parameter `{}`: expected {}", self.param, self.expected)
    }
}

impl std::error::Error for ConfigError {}

impl TodConfig {
    /// Checks every parameter; the generator relies on all counts being >= 1.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            ("threads", self.threads),
            ("methods", self.methods),
            ("fields", self.fields),
            ("locals", self.locals),
            ("objects", self.objects),
        ];
        for (param, v) in positive {
            if v == 0 {
                return Err(ConfigError { param, expected: "at least 1" });
            }
        }
        if self.threads > 1 << 20 {
            return Err(ConfigError { param: "threads", expected: "at most 1,048,576" });
        }
        if self.max_depth > 1 << 16 {
            return Err(ConfigError { param: "max_depth", expected: "at most 65,536" });
        }
        Ok(())
    }
}

/// `field_write` columns: ts, producer, seq, parent_seq, field_id, target, value.
// Fields are the columns, named and documented once, in `schema()`.
#[allow(missing_docs)]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldWrites {
    pub ts: Vec<i64>,
    pub producer: Vec<i32>,
    pub seq: Vec<i64>,
    pub parent_seq: Vec<i64>,
    pub field_id: Vec<i64>,
    pub target: Vec<i64>,
    pub value: Vec<i64>,
}

/// `var_write` columns: ts, producer, seq, parent_seq, var_id, value.
// Fields are the columns, named and documented once, in `schema()`.
#[allow(missing_docs)]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VarWrites {
    pub ts: Vec<i64>,
    pub producer: Vec<i32>,
    pub seq: Vec<i64>,
    pub parent_seq: Vec<i64>,
    pub var_id: Vec<i64>,
    pub value: Vec<i64>,
}

/// `behavior_enter` columns: ts, producer, seq, parent_seq, behavior_id, target,
/// arg_count, arg0..arg3. `args[k][i]` is meaningful only when `k < arg_count[i]`
/// (it holds 0 otherwise and becomes null in Arrow).
// Fields are the columns, named and documented once, in `schema()`.
#[allow(missing_docs)]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BehaviorEnters {
    pub ts: Vec<i64>,
    pub producer: Vec<i32>,
    pub seq: Vec<i64>,
    pub parent_seq: Vec<i64>,
    pub behavior_id: Vec<i64>,
    pub target: Vec<i64>,
    pub arg_count: Vec<i64>,
    pub args: [Vec<i64>; 4],
}

/// `behavior_exit` columns: ts, producer, seq, parent_seq, behavior_id, ret_value.
// Fields are the columns, named and documented once, in `schema()`.
#[allow(missing_docs)]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BehaviorExits {
    pub ts: Vec<i64>,
    pub producer: Vec<i32>,
    pub seq: Vec<i64>,
    pub parent_seq: Vec<i64>,
    pub behavior_id: Vec<i64>,
    pub ret_value: Vec<i64>,
}

/// The events of one `fill`, one column set per event type, each in `ts` order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TodBatch {
    /// `field_write` rows.
    pub field_write: FieldWrites,
    /// `var_write` rows.
    pub var_write: VarWrites,
    /// `behavior_enter` rows.
    pub behavior_enter: BehaviorEnters,
    /// `behavior_exit` rows.
    pub behavior_exit: BehaviorExits,
}

/// Expected share of each type in a long run, used only to size buffers. Per method
/// invocation: 1 enter + 1 exit + 4.5 actions of which 45 % field writes, 40 % variable
/// writes (the 15 % calls are counted in the callee), i.e. 34.8/30.9/17.2/17.2 %.
const SHARE_PERMILLE: [usize; 4] = [360, 320, 180, 180];

/// Most events [`TodBatch::with_capacity`] reserves room for (about 300 MB of columns).
pub const MAX_RESERVE: usize = 1 << 22;

impl TodBatch {
    /// An empty batch with room for about `events` events without reallocating (at most
    /// [`MAX_RESERVE`]: past that the columns grow as they fill, so a huge `max_events`
    /// never reserves memory the run will not use).
    pub fn with_capacity(events: usize) -> Self {
        Self::with_capacity_in(events, None)
    }

    /// Like [`TodBatch::with_capacity`], taking the int64 columns from `pool` when given.
    pub fn with_capacity_in(events: usize, pool: Option<&ColumnPool>) -> Self {
        let events = events.min(MAX_RESERVE);
        let cap = |t: usize| events / 1000 * SHARE_PERMILLE[t] + (events % 1000) * SHARE_PERMILLE[t] / 1000 + 16;
        let v = |t: usize| match pool {
            Some(p) => p.take(cap(t)),
            None => Vec::with_capacity(cap(t)),
        };
        let (fw, vw, be, bx) = (0, 1, 2, 3);
        Self {
            field_write: FieldWrites {
                ts: v(fw),
                producer: Vec::with_capacity(cap(fw)),
                seq: v(fw),
                parent_seq: v(fw),
                field_id: v(fw),
                target: v(fw),
                value: v(fw),
            },
            var_write: VarWrites {
                ts: v(vw),
                producer: Vec::with_capacity(cap(vw)),
                seq: v(vw),
                parent_seq: v(vw),
                var_id: v(vw),
                value: v(vw),
            },
            behavior_enter: BehaviorEnters {
                ts: v(be),
                producer: Vec::with_capacity(cap(be)),
                seq: v(be),
                parent_seq: v(be),
                behavior_id: v(be),
                target: v(be),
                arg_count: v(be),
                args: [v(be), v(be), v(be), v(be)],
            },
            behavior_exit: BehaviorExits {
                ts: v(bx),
                producer: Vec::with_capacity(cap(bx)),
                seq: v(bx),
                parent_seq: v(bx),
                behavior_id: v(bx),
                ret_value: v(bx),
            },
        }
    }

    /// Rows per event type, in [`EVENT_TYPES`] order.
    pub fn lens(&self) -> [usize; 4] {
        [self.field_write.ts.len(), self.var_write.ts.len(), self.behavior_enter.ts.len(), self.behavior_exit.ts.len()]
    }

    /// Total events held.
    pub fn len(&self) -> usize {
        self.lens().iter().sum()
    }

    /// True when no event is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One `RecordBatch` per event type that has rows, in [`EVENT_TYPES`] order, with
    /// the schemas of [`schema`]. The columns move into Arrow without a copy.
    pub fn into_record_batches(self) -> Vec<(&'static str, RecordBatch)> {
        self.into_record_batches_in(None)
    }

    /// Like [`TodBatch::into_record_batches`]; with a `pool`, the int64 columns go back
    /// to it once Arrow drops them (see [`ColumnPool`]).
    pub fn into_record_batches_in(self, pool: Option<&ColumnPool>) -> Vec<(&'static str, RecordBatch)> {
        let lens = self.lens();
        let mut out = Vec::with_capacity(4);
        let mut push = |t: usize, columns: Vec<ArrayRef>| {
            if lens[t] > 0 {
                let batch = RecordBatch::try_new(schema(t), columns).expect("TOD columns always match their schema");
                out.push((EVENT_TYPES[t], batch));
            }
        };
        let buf = |v: Vec<i64>| match pool {
            Some(p) => p.share(v),
            None => ScalarBuffer::from(v),
        };
        let i64s = |v: Vec<i64>| -> ArrayRef { Arc::new(Int64Array::new(buf(v), None)) };
        let FieldWrites { ts, producer, seq, parent_seq, field_id, target, value } = self.field_write;
        push(0, vec![i64s(ts), i32s(producer), i64s(seq), i64s(parent_seq), i64s(field_id), i64s(target), i64s(value)]);
        let VarWrites { ts, producer, seq, parent_seq, var_id, value } = self.var_write;
        push(1, vec![i64s(ts), i32s(producer), i64s(seq), i64s(parent_seq), i64s(var_id), i64s(value)]);
        let BehaviorEnters { ts, producer, seq, parent_seq, behavior_id, target, arg_count, args } =
            self.behavior_enter;
        let mut cols = Vec::with_capacity(11);
        for (k, col) in args.into_iter().enumerate() {
            let valid = BooleanBuffer::collect_bool(arg_count.len(), |i| arg_count[i] > k as i64);
            cols.push(Arc::new(Int64Array::new(buf(col), Some(NullBuffer::new(valid)))) as ArrayRef);
        }
        let arg_cols = std::mem::take(&mut cols);
        cols.extend([i64s(ts), i32s(producer), i64s(seq), i64s(parent_seq), i64s(behavior_id), i64s(target)]);
        cols.push(i64s(arg_count));
        cols.extend(arg_cols);
        push(2, cols);
        let BehaviorExits { ts, producer, seq, parent_seq, behavior_id, ret_value } = self.behavior_exit;
        push(3, vec![i64s(ts), i32s(producer), i64s(seq), i64s(parent_seq), i64s(behavior_id), i64s(ret_value)]);
        out
    }
}

fn i32s(v: Vec<i32>) -> ArrayRef {
    Arc::new(Int32Array::new(ScalarBuffer::from(v), None))
}

/// Arrow schema of event type `t` (index into [`EVENT_TYPES`]). Every column is a
/// non-null int64 except `producer` (int32) and the `arg0..arg3` of `behavior_enter`
/// (nullable: null past the method's `arg_count`). Units: `ts` in ns on the global
/// clock; `seq` per producer over all four types; `parent_seq` the `seq` of the
/// enclosing `behavior_enter` of the same producer (-1 at the root); ids are dense
/// from 0 (`behavior_id`, `field_id`, `var_id`) or 1 (objects: target, value, args,
/// ret_value).
pub fn schema(t: usize) -> SchemaRef {
    static SCHEMAS: OnceLock<[SchemaRef; 4]> = OnceLock::new();
    SCHEMAS.get_or_init(build_schemas)[t].clone()
}

fn build_schemas() -> [SchemaRef; 4] {
    // Every column is always set except the arguments past `arg_count`.
    let never_null = |t: &EventTypeDecl| -> Vec<&str> {
        t.params.iter().map(|p| p.name).filter(|n| !matches!(*n, "arg0" | "arg1" | "arg2" | "arg3")).collect()
    };
    [0, 1, 2, 3].map(|t| Arc::new(TYPES[t].arrow_schema(&never_null(&TYPES[t]))))
}

/// An open method invocation on a thread's stack.
#[derive(Clone, Copy, Debug)]
struct Frame {
    method: u32,
    enter_seq: i64,
    /// Actions of the body still to perform; at 0 the next step exits the frame.
    remaining: u32,
}

#[derive(Clone, Debug, Default)]
struct Thread {
    next_seq: i64,
    stack: Vec<Frame>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// The scheduler interleaves threads until `emitted == events`.
    Running,
    /// Threads `thread..` still exit their open frames, one after the other.
    Draining {
        thread: usize,
    },
    Done,
}

/// The generator: call [`TodGenerator::fill`] until it returns 0.
#[derive(Clone, Debug)]
pub struct TodGenerator {
    cfg: TodConfig,
    rng: SplitMix64,
    /// Parameter count of each method, drawn once at start.
    params: Vec<u8>,
    threads: Vec<Thread>,
    /// Timestamp of the last event emitted (the next one is strictly later).
    clock: i64,
    emitted: u64,
    phase: Phase,
}

impl TodGenerator {
    /// A generator at the start of the run described by `cfg`.
    pub fn new(cfg: TodConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let mut rng = SplitMix64::new(cfg.seed);
        let params = (0..cfg.methods).map(|_| rng.below(MAX_PARAMS + 1) as u8).collect();
        let threads = vec![Thread::default(); cfg.threads as usize];
        let phase = if cfg.events == 0 { Phase::Draining { thread: 0 } } else { Phase::Running };
        Ok(Self { cfg, rng, params, threads, clock: CLOCK_START_NS - 1, emitted: 0, phase })
    }

    /// The parameters of this run.
    pub fn config(&self) -> &TodConfig {
        &self.cfg
    }

    /// Events produced so far.
    pub fn emitted(&self) -> u64 {
        self.emitted
    }

    /// True once every event has been produced.
    pub fn is_exhausted(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Parameter count of method `m`.
    pub fn param_count(&self, m: u32) -> u32 {
        u32::from(self.params[m as usize])
    }

    /// An upper bound of the events still to come.
    pub fn remaining_bound(&self) -> u64 {
        let open: u64 = self.threads.iter().map(|t| t.stack.len() as u64).sum();
        match self.phase {
            Phase::Running => (self.cfg.events - self.emitted)
                .saturating_add(open)
                .saturating_add(u64::from(self.cfg.threads) * (u64::from(self.cfg.max_depth) + 1)),
            Phase::Draining { .. } => open,
            Phase::Done => 0,
        }
    }

    /// Appends up to `max_events` next events to `out` and returns how many; 0 means
    /// the generator is exhausted.
    pub fn fill(&mut self, max_events: usize, out: &mut TodBatch) -> usize {
        let mut n = 0usize;
        while n < max_events {
            match self.phase {
                Phase::Running => {
                    let left = self.cfg.events - self.emitted;
                    let k = left.min((max_events - n) as u64);
                    for _ in 0..k {
                        self.step(out);
                    }
                    n += k as usize;
                    self.emitted += k;
                    if self.emitted == self.cfg.events {
                        self.phase = Phase::Draining { thread: 0 };
                    }
                }
                Phase::Draining { thread } => {
                    if thread == self.threads.len() {
                        self.phase = Phase::Done;
                        continue;
                    }
                    if self.threads[thread].stack.is_empty() {
                        self.phase = Phase::Draining { thread: thread + 1 };
                        continue;
                    }
                    let dt = self.rng.below(MAX_STEP_NS);
                    self.clock += i64::from(dt) + 1;
                    self.exit(thread, out);
                    self.emitted += 1;
                    n += 1;
                }
                Phase::Done => break,
            }
        }
        n
    }

    /// One scheduler step: pick a thread, advance the clock, let the thread emit one event.
    #[inline(always)]
    fn step(&mut self, out: &mut TodBatch) {
        let (t, dt) = self.rng.below2(self.cfg.threads, MAX_STEP_NS);
        self.clock += i64::from(dt) + 1;
        let t = t as usize;
        let open = self.threads[t].stack.len();
        match self.threads[t].stack.last_mut() {
            None => {
                // The thread's main loop calls its root method again.
                let r = self.rng.next_u64();
                let method = scale32(r as u32, self.cfg.methods);
                self.enter(t, method, -1, out);
            }
            Some(top) if top.remaining == 0 => {
                self.exit(t, out);
            }
            Some(top) => {
                top.remaining -= 1;
                let parent = top.enter_seq;
                let r = self.rng.next_u64();
                let kind = scale32(r as u32, 100);
                let hi = (r >> 32) as u32;
                // The current method runs at depth `open - 1`: it may call while that is
                // below max_depth; otherwise the call becomes a variable write.
                if kind < FIELD_WRITE_PCT {
                    self.field_write(t, parent, scale32(hi, self.cfg.fields), out);
                } else if kind < VAR_WRITE_PCT || open > self.cfg.max_depth as usize {
                    self.var_write(t, parent, scale32(hi, self.cfg.locals), out);
                } else {
                    self.enter(t, scale32(hi, self.cfg.methods), parent, out);
                }
            }
        }
    }

    #[inline(always)]
    fn take_seq(&mut self, t: usize) -> i64 {
        let th = &mut self.threads[t];
        let s = th.next_seq;
        th.next_seq += 1;
        s
    }

    #[inline(always)]
    fn object(&mut self) -> i64 {
        i64::from(self.rng.below(self.cfg.objects)) + 1
    }

    #[inline(always)]
    fn objects2(&mut self) -> (i64, i64) {
        let (a, b) = self.rng.below2(self.cfg.objects, self.cfg.objects);
        (i64::from(a) + 1, i64::from(b) + 1)
    }

    #[inline(always)]
    fn field_write(&mut self, t: usize, parent: i64, field: u32, out: &mut TodBatch) {
        let seq = self.take_seq(t);
        let (target, value) = self.objects2();
        let o = &mut out.field_write;
        o.ts.push(self.clock);
        o.producer.push(t as i32 + 1);
        o.seq.push(seq);
        o.parent_seq.push(parent);
        o.field_id.push(i64::from(field));
        o.target.push(target);
        o.value.push(value);
    }

    #[inline(always)]
    fn var_write(&mut self, t: usize, parent: i64, var: u32, out: &mut TodBatch) {
        let seq = self.take_seq(t);
        let value = self.object();
        let o = &mut out.var_write;
        o.ts.push(self.clock);
        o.producer.push(t as i32 + 1);
        o.seq.push(seq);
        o.parent_seq.push(parent);
        o.var_id.push(i64::from(var));
        o.value.push(value);
    }

    #[inline(always)]
    fn enter(&mut self, t: usize, method: u32, parent: i64, out: &mut TodBatch) {
        let seq = self.take_seq(t);
        let (actions, target) = self.rng.below2(MAX_ACTIONS, self.cfg.objects);
        let argc = self.params[method as usize];
        let mut args = [0i64; 4];
        if argc > 0 {
            (args[0], args[1]) = self.objects2();
            if argc > 2 {
                (args[2], args[3]) = self.objects2();
            }
            for a in &mut args[argc as usize..] {
                *a = 0;
            }
        }
        self.threads[t].stack.push(Frame { method, enter_seq: seq, remaining: actions + 1 });
        let o = &mut out.behavior_enter;
        o.ts.push(self.clock);
        o.producer.push(t as i32 + 1);
        o.seq.push(seq);
        o.parent_seq.push(parent);
        o.behavior_id.push(i64::from(method));
        o.target.push(i64::from(target) + 1);
        o.arg_count.push(i64::from(argc));
        for (col, a) in o.args.iter_mut().zip(args) {
            col.push(a);
        }
    }

    #[inline(always)]
    fn exit(&mut self, t: usize, out: &mut TodBatch) {
        let seq = self.take_seq(t);
        let frame = self.threads[t].stack.pop().expect("exit needs an open frame");
        let ret = self.object();
        let o = &mut out.behavior_exit;
        o.ts.push(self.clock);
        o.producer.push(t as i32 + 1);
        o.seq.push(seq);
        o.parent_seq.push(frame.enter_seq);
        o.behavior_id.push(i64::from(frame.method));
        o.ret_value.push(ret);
    }
}

#[cfg(test)]
mod tests;
