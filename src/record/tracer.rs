//! The native tracer: records a running Python program from inside its interpreter.
//!
//! Owns the trace callbacks (CPython 3.11's `PyEval_SetTrace` with opcode events, one
//! installation per thread; 3.12+'s `sys.monitoring`, one tool for every thread), what they
//! record (calls, returns, yields and exceptions leaving a frame, line steps, writes of locals,
//! attributes, items, globals and closure cells, each value encoded without running the
//! program's own code) and the hand-over of full buffers to the writer thread ([`wire`]).
//!
//! How a write is seen: every instruction of a recorded frame raises an opcode event *before* it
//! runs; at a `STORE_*` / `DELETE_*` the value and its target are on the frame's value stack, whose
//! top the interpreter saved in the frame just before the event (`stacktop`). Reading them there
//! costs a few loads, where a Python-level tracer must call `frame.f_locals` (which copies every
//! local into a dict) and cannot see an attribute's target at all. Under `sys.monitoring` an
//! instruction that is not a store is disabled at its first event (`DISABLE`), so a recorded
//! loop raises events only for its stores and lines; code outside the recorded files is disabled
//! at its first event too and then costs nothing.
//!
//! Frame layouts: the tracer reads CPython's `_PyInterpreterFrame` (its code, globals, locals
//! dict, stack top and `localsplus`) at the offsets of 3.11, 3.12 and 3.13, checks them against
//! the public API when it starts (`Layout::check`) and refuses to start on any other version.
//!
//! Every callback holds the interpreter lock and the recorder's state is touched only then
//! ([`GilCell`]); the writer thread never touches Python.
//!
//! Over 600 lines: one state machine (threads, frames, code objects, symbols) that every
//! callback of both interpreter interfaces shares.

use std::cell::{Cell, UnsafeCell};
use std::ffi::{c_char, c_int, c_ulong, CStr};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use pyo3::ffi;
use rustc_hash::{FxHashMap, FxHashSet};

use super::clock::{self, now_ns, Clock};
use super::wire::{self, Outbox};

/// `value_kind` codes (see `record/decl.rs`).
pub mod kind {
    /// Deleted variable, empty cell.
    pub const UNBOUND: i64 = 0;
    /// `None`.
    pub const NONE: i64 = 1;
    /// `True` / `False` (value 1 / 0).
    pub const BOOL: i64 = 2;
    /// An int that fits int64.
    pub const INT: i64 = 3;
    /// A float (its bits in value).
    pub const FLOAT: i64 = 4;
    /// A str (value is its symbol).
    pub const STR: i64 = 5;
    /// Any other object (value is its identity).
    pub const OBJECT: i64 = 6;
    /// A closure cell (value is its identity).
    pub const CELL: i64 = 7;
}

/// What an opcode does for the tracer, by opcode number (the table comes from Python's `dis`,
/// so each interpreter version maps its own numbers).
pub mod action {
    /// Nothing to record.
    pub const NONE: u8 = 0;
    /// `STORE_FAST i`: local i = TOS.
    pub const STORE_FAST: u8 = 1;
    /// `STORE_NAME i`: name i = TOS in the frame's namespace.
    pub const STORE_NAME: u8 = 2;
    /// `STORE_GLOBAL i`.
    pub const STORE_GLOBAL: u8 = 3;
    /// `STORE_DEREF i`: the cell in local slot i.
    pub const STORE_DEREF: u8 = 4;
    /// `STORE_ATTR i`: TOS.name = TOS1.
    pub const STORE_ATTR: u8 = 5;
    /// `STORE_SUBSCR`: TOS1[TOS] = TOS2.
    pub const STORE_SUBSCR: u8 = 6;
    /// `DELETE_FAST i`.
    pub const DELETE_FAST: u8 = 7;
    /// `DELETE_NAME i`.
    pub const DELETE_NAME: u8 = 8;
    /// `DELETE_GLOBAL i`.
    pub const DELETE_GLOBAL: u8 = 9;
    /// `DELETE_DEREF i`.
    pub const DELETE_DEREF: u8 = 10;
    /// `DELETE_ATTR i`: del TOS.name.
    pub const DELETE_ATTR: u8 = 11;
    /// `DELETE_SUBSCR`: del TOS1[TOS].
    pub const DELETE_SUBSCR: u8 = 12;
    /// 3.13 `STORE_FAST_STORE_FAST a<<4|b`: a = TOS, b = TOS1.
    pub const STORE_FAST_STORE_FAST: u8 = 13;
    /// 3.13 `STORE_FAST_LOAD_FAST a<<4|b`: a = TOS.
    pub const STORE_FAST_LOAD_FAST: u8 = 14;
    /// `EXTENDED_ARG`: high bits of the next instruction's argument.
    pub const EXTENDED_ARG: u8 = 15;
    /// `YIELD_VALUE`: a return event here is a yield.
    pub const YIELD_VALUE: u8 = 16;
    /// `RESUME`: argument 0 at a call, more after a yield or await.
    pub const RESUME: u8 = 17;
    /// `STORE_SLICE` (3.12+): TOS2[TOS1:TOS] = TOS3.
    pub const STORE_SLICE: u8 = 18;
}

/// Longest str value kept, in bytes (cut at a character boundary).
const MAX_STR: usize = 200;
/// Elements shown in the short repr of a container.
const PREVIEW_ITEMS: usize = 5;
/// Slots of the recent-reprs cache (a power of two).
const REPR_SLOTS: usize = 4096;
/// Largest source file stored.
const MAX_SOURCE: u64 = 16 << 20;
/// Slots of the code lookup cache (a power of two).
const CODE_CACHE: usize = 1024;
/// Flushes queued for the writer before the program waits for it (each up to `flush_rows`).
const QUEUE: usize = 4;

// PyFrameObject (3.11-3.13, release builds): ob_refcnt, ob_type, f_back, f_frame, f_trace,
// f_lineno (int), f_trace_lines, f_trace_opcodes (char).
const FRAME_F_FRAME: usize = 24;
const FRAME_LINENO: usize = 40;
const FRAME_TRACE_LINES: usize = 44;
const FRAME_TRACE_OPCODES: usize = 45;
// PyCellObject: ob_refcnt, ob_type, ob_ref.
const CELL_REF: usize = 16;

extern "C" {
    fn PyThread_get_thread_ident() -> c_ulong;
}

/// Offsets into `_PyInterpreterFrame` of the running interpreter.
#[derive(Clone, Copy, Debug)]
struct Layout {
    code: usize,
    globals: usize,
    locals: usize,
    stacktop: usize,
    localsplus: usize,
}

impl Layout {
    fn for_version(minor: u32) -> Option<Layout> {
        match minor {
            11 => Some(Layout { code: 32, globals: 8, locals: 24, stacktop: 64, localsplus: 72 }),
            12 | 13 => Some(Layout { code: 0, globals: 24, locals: 40, stacktop: 64, localsplus: 72 }),
            _ => None,
        }
    }

    /// Checks the offsets on a live frame against the public API.
    unsafe fn check(&self, frame: *mut ffi::PyFrameObject) -> Result<(), String> {
        let code = ffi::PyFrame_GetCode(frame) as *mut ffi::PyObject;
        let globals = ffi::PyObject_GetAttrString(frame.cast(), c"f_globals".as_ptr());
        let f = iframe(frame);
        let ok = !f.is_null()
            && rd::<*mut ffi::PyObject>(f, self.code) == code
            && rd::<*mut ffi::PyObject>(f, self.globals) == globals;
        ffi::Py_XDECREF(code);
        ffi::Py_XDECREF(globals);
        ffi::PyErr_Clear();
        if ok {
            Ok(())
        } else {
            Err("this interpreter's frame layout is not the one the recorder reads (CPython 3.11-3.13 release builds)"
                .into())
        }
    }
}

#[inline]
unsafe fn rd<T: Copy>(base: *const u8, off: usize) -> T {
    base.add(off).cast::<T>().read_unaligned()
}

#[inline]
unsafe fn iframe(frame: *mut ffi::PyFrameObject) -> *const u8 {
    rd::<*const u8>(frame.cast(), FRAME_F_FRAME)
}

/// A cell for the recorder's state, touched only while holding the interpreter lock.
pub struct GilCell<T>(UnsafeCell<T>);

// SAFETY: every access goes through `get`, whose callers hold the interpreter lock, which
// serialises them across threads.
unsafe impl<T> Sync for GilCell<T> {}

impl<T> GilCell<T> {
    /// # Safety
    /// The caller holds the interpreter lock and keeps no other reference alive.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn get(&self) -> &mut T {
        &mut *self.0.get()
    }
}

static RECORDER: GilCell<Option<Box<Recorder>>> = GilCell(UnsafeCell::new(None));

thread_local! {
    /// This OS thread's key (0 until its first event); see `Recorder::thread`.
    static THREAD_KEY: Cell<u64> = const { Cell::new(0) };
}
static NEXT_THREAD_KEY: AtomicU64 = AtomicU64::new(1);

/// The running recorder, if any (interpreter lock held).
///
/// # Safety
/// Interpreter lock held; the reference must not outlive the callback.
pub unsafe fn recorder() -> Option<&'static mut Recorder> {
    RECORDER.get().as_deref_mut()
}

/// What `start` needs.
pub struct Config {
    /// Descriptor the wire is written to (owned by the recorder from now on).
    pub fd: i32,
    /// (path prefix, recorded?) rules: the longest matching prefix decides; none matching: recorded.
    pub rules: Vec<(String, bool)>,
    /// `action` code per opcode number.
    pub actions: [u8; 256],
    /// Events per flush to the writer thread.
    pub flush_rows: usize,
    /// JSON of the hello frame.
    pub hello: String,
    /// true: sys.monitoring callbacks (3.12+); false: PyEval_SetTrace in each thread (3.11).
    pub monitoring: bool,
    /// Under sys.monitoring: a Python callable `code -> bytes` giving the stack depth before
    /// each instruction (int16 per code unit, -1 unknown). An INSTRUCTION event does not save
    /// the frame's stack pointer (3.11's opcode events do), so the depth comes from the
    /// bytecode. A new reference, or null.
    pub depths: usize,
}

#[derive(Clone, Copy)]
struct Open {
    frame: usize,
    enter_seq: i64,
    code: u32,
    /// The frame's current line (its last line step), the `call_line` of a call it makes.
    line: i64,
}

struct Thread {
    producer: i64,
    next_seq: i64,
    stack: Vec<Open>,
    /// The exception last raised in this thread, encoded (for an exit by exception on 3.11).
    exc: [i64; 4],
}

const LOCAL: u8 = 0;
const CELLVAR: u8 = 1;
const FREEVAR: u8 = 2;

struct Code {
    included: bool,
    id: i64,
    /// Symbols of `co_names` (attributes, globals, names).
    names: Vec<i64>,
    /// Symbols of the local slots (`localsplus`), and their kind.
    vars: Vec<i64>,
    kinds: Vec<u8>,
    /// The deoptimised bytecode (`co_code`) decoded: (action, argument) per code unit, read at
    /// every opcode event (one load, where decoding there cost 7 % of nbody's recording).
    decoded: Vec<(u8, u32)>,
    /// Under sys.monitoring: the value stack's depth before each instruction (per code unit,
    /// -1 where unknown), computed from the bytecode at first sight (`Config::depths`).
    depths: Vec<i16>,
    /// 3.11: the lines holding a write ([`StoreLines`]).
    store_lines: StoreLines,
}

/// Which lines of a code object hold an instruction the tracer records (3.11). Opcode events
/// are asked for (`f_trace_opcodes`) only while such a line runs: CPython 3.11 raises a line
/// event whenever the running instruction's line differs from the last one's (or on a backward
/// jump), so at each line event the tracer knows every instruction up to the next one is of
/// that line. An opcode event costs about as much as a line event, and most lines write
/// nothing (`json.loads(obj)`, `if x:`, `return y`); a write on an instruction without a line
/// (none in CPython 3.11's compiler output seen so far) keeps opcode events on throughout.
#[derive(Default)]
struct StoreLines {
    /// true: opcode events everywhere in this code (or the line table could not be read).
    always: bool,
    first: i64,
    /// Bit `line - first` is set when that line holds a write.
    bits: Vec<u64>,
}

impl StoreLines {
    fn has(&self, line: i64) -> bool {
        if self.always {
            return true;
        }
        let i = line - self.first;
        i >= 0 && (i as usize) < self.bits.len() * 64 && self.bits[i as usize / 64] & (1 << (i % 64)) != 0
    }
}

/// Counts of what was recorded, for the end frame and `stop`'s report.
#[derive(Default, Clone, Debug)]
pub struct Counts {
    /// Events per event tag (`wire::EVENT_TAGS`).
    pub events: [u64; 5],
    /// Symbols interned.
    pub symbols: u64,
    /// Code objects recorded.
    pub codes: u64,
    /// Code objects left out by the rules.
    pub excluded_codes: u64,
    /// Threads seen.
    pub threads: u64,
    /// Source files stored.
    pub sources: u64,
}

/// The recorder's state (one per process).
pub struct Recorder {
    layout: Layout,
    monitoring: bool,
    depths_fn: usize,
    actions: [u8; 256],
    rules: Vec<(String, bool)>,
    flush_rows: usize,
    clock_offset: i64,
    clock: Clock,
    last_ts: i64,
    threads: Vec<Thread>,
    by_key: FxHashMap<u64, usize>,
    cur_key: u64,
    cur: usize,
    codes: Vec<Code>,
    by_code: FxHashMap<usize, u32>,
    /// The last code objects looked up, by address bits: a frame evaluator call (every frame,
    /// library frames too) finds its code here with one compare, not a hash probe (3 frames
    /// per `json.loads` call; the map probe was the largest of the recorder's own costs there).
    code_cache: Box<[(usize, u32); CODE_CACHE]>,
    files: FxHashMap<String, bool>,
    symbols: FxHashMap<Box<[u8]>, i64>,
    next_symbol: i64,
    /// Recent short reprs ([`Recorder::intern_repr`]), direct-mapped by hash.
    reprs: Vec<(u64, i64, Vec<u8>)>,
    types: FxHashMap<usize, i64>,
    namespaces: FxHashSet<usize>,
    /// Under sys.monitoring: the line each suspended generator frame yielded on (its next LINE
    /// there is no step, as for 3.12's settrace, which keeps the last line in the frame).
    yielded_on: FxHashMap<usize, i64>,
    out: Outbox,
    pending: usize,
    tx: Option<SyncSender<Outbox>>,
    back: Receiver<Outbox>,
    writer: Option<JoinHandle<Result<u64, String>>>,
    scratch: String,
    stopped: bool,
    /// The writer failed: events are dropped from then on (the error is in `stop`'s report).
    broken: bool,
    counts: Counts,
    sym_module: i64,
    sym_cell: i64,
}

fn writer_loop(fd: i32, rx: Receiver<Outbox>, back: SyncSender<Outbox>) -> Result<u64, String> {
    // SAFETY: the recorder was given `fd` and hands it to this thread alone.
    let file = unsafe { File::from_raw_fd(fd) };
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut written = 0u64;
    let mut failed: Option<String> = None;
    for mut ob in rx {
        if failed.is_none() {
            let mut counter = CountingWriter { inner: &mut out, n: 0 };
            match ob.write_to(&mut counter).and_then(|_| counter.flush()) {
                Ok(()) => written += counter.n,
                Err(e) => failed = Some(format!("writing the recording failed: {e}")),
            }
        }
        ob.clear();
        let _ = back.try_send(ob);
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(written),
    }
}

struct CountingWriter<'a, W: Write> {
    inner: &'a mut W,
    n: u64,
}

impl<W: Write> Write for CountingWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

unsafe fn py_str(obj: *mut ffi::PyObject) -> Option<&'static [u8]> {
    if obj.is_null() || ffi::PyUnicode_Check(obj) == 0 {
        return None;
    }
    let mut n: ffi::Py_ssize_t = 0;
    let p = ffi::PyUnicode_AsUTF8AndSize(obj, &mut n);
    if p.is_null() {
        ffi::PyErr_Clear();
        return None;
    }
    Some(std::slice::from_raw_parts(p.cast::<u8>(), n as usize))
}

unsafe fn getattr(obj: *mut ffi::PyObject, name: &CStr) -> *mut ffi::PyObject {
    let r = ffi::PyObject_GetAttrString(obj, name.as_ptr());
    if r.is_null() {
        ffi::PyErr_Clear();
    }
    r
}

fn cut_utf8(b: &[u8], max: usize) -> &[u8] {
    if b.len() <= max {
        return b;
    }
    let mut n = max;
    while n > 0 && (b[n] & 0xC0) == 0x80 {
        n -= 1;
    }
    &b[..n]
}

/// Saves the pending exception state around work that may raise and clear (first sight of a
/// code object or thread), so the program's own exception in flight is left as it was.
struct SavedError(*mut ffi::PyObject, *mut ffi::PyObject, *mut ffi::PyObject);

// PyErr_Fetch/Restore: deprecated from 3.12 on, but the only pair that exists in 3.11 too.
#[allow(deprecated)]
impl SavedError {
    unsafe fn take() -> Self {
        let (mut a, mut b, mut c) = (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
        ffi::PyErr_Fetch(&mut a, &mut b, &mut c);
        SavedError(a, b, c)
    }
    unsafe fn restore(self) {
        ffi::PyErr_Clear();
        ffi::PyErr_Restore(self.0, self.1, self.2);
    }
}

impl Recorder {
    fn new(cfg: Config, minor: u32) -> Result<Self, String> {
        let layout = Layout::for_version(minor)
            .ok_or_else(|| format!("the recorder runs on CPython 3.11-3.13, not 3.{minor}"))?;
        let (tx, rx) = sync_channel::<Outbox>(QUEUE);
        let (back_tx, back) = sync_channel::<Outbox>(QUEUE + 2);
        let fd = cfg.fd;
        let writer = std::thread::Builder::new()
            .name("th-record-writer".into())
            .spawn(move || writer_loop(fd, rx, back_tx))
            .map_err(|e| format!("cannot start the recorder's writer thread: {e}"))?;
        let clock_offset = now_ns(libc::CLOCK_REALTIME) - now_ns(libc::CLOCK_MONOTONIC);
        let mut r = Recorder {
            layout,
            monitoring: cfg.monitoring,
            depths_fn: cfg.depths,
            actions: cfg.actions,
            rules: cfg.rules,
            flush_rows: cfg.flush_rows.max(1),
            clock_offset,
            clock: Clock::new(clock::counter_usable()),
            last_ts: 0,
            threads: Vec::new(),
            by_key: FxHashMap::default(),
            cur_key: 0,
            cur: 0,
            codes: Vec::new(),
            by_code: FxHashMap::default(),
            code_cache: Box::new([(0, 0); CODE_CACHE]),
            files: FxHashMap::default(),
            symbols: FxHashMap::default(),
            next_symbol: 1,
            reprs: vec![(0, 0, Vec::new()); REPR_SLOTS],
            types: FxHashMap::default(),
            namespaces: FxHashSet::default(),
            yielded_on: FxHashMap::default(),
            out: Outbox::default(),
            pending: 0,
            tx: Some(tx),
            back,
            writer: Some(writer),
            scratch: String::new(),
            stopped: false,
            broken: false,
            counts: Counts::default(),
            sym_module: 0,
            sym_cell: 0,
        };
        r.tick();
        r.out.push_frame(wire::TAG_HELLO, 0, cfg.hello.as_bytes());
        r.sym_module = r.intern(b"module");
        r.sym_cell = r.intern(b"cell");
        Ok(r)
    }

    #[inline]
    fn tick(&mut self) -> i64 {
        let t = self.clock.now() + self.clock_offset;
        self.last_ts = if t > self.last_ts { t } else { self.last_ts + 1 };
        self.last_ts
    }

    /// Writes take the next nanosecond after the event that announced them (no clock read).
    #[inline]
    fn tick_write(&mut self) -> i64 {
        self.last_ts += 1;
        self.last_ts
    }

    fn intern(&mut self, text: &[u8]) -> i64 {
        if let Some(&id) = self.symbols.get(text) {
            return id;
        }
        let id = self.new_symbol(text);
        self.symbols.insert(text.into(), id);
        id
    }

    fn new_symbol(&mut self, text: &[u8]) -> i64 {
        let id = self.next_symbol;
        self.next_symbol += 1;
        self.out.ts = self.last_ts;
        self.out.push_symbol(id as u32, text);
        self.counts.symbols += 1;
        id
    }

    /// The symbol of a short repr. Unlike names and str values (`intern`: one symbol per text,
    /// compared by id), a repr is only shown, and most are seen once (a list of floats written
    /// in a loop has a new one each time): a small direct-mapped cache of recent ones keeps the
    /// repeats without a table that grows and rehashes with every new text (measured on
    /// nbody: 500 000 reprs, 12 % of the recording's time in the table). A text may so get
    /// several symbols, each holding it.
    fn intern_repr(&mut self, text: &[u8]) -> i64 {
        use std::hash::{BuildHasher, Hasher};
        let mut h = rustc_hash::FxBuildHasher.build_hasher();
        h.write(text);
        let hash = h.finish();
        let slot = (hash as usize) & (REPR_SLOTS - 1);
        let (sh, sid, stext) = &self.reprs[slot];
        if *sid != 0 && *sh == hash && stext.as_slice() == text {
            return *sid;
        }
        let id = self.new_symbol(text);
        let entry = &mut self.reprs[slot];
        entry.0 = hash;
        entry.1 = id;
        entry.2.clear();
        entry.2.extend_from_slice(text);
        id
    }

    unsafe fn intern_obj(&mut self, s: *mut ffi::PyObject) -> i64 {
        match py_str(s) {
            Some(b) => self.intern(b),
            None => 0,
        }
    }

    // -- threads -------------------------------------------------------------------------

    /// This OS thread's index in `threads`. A thread is known by a key of its own thread-local
    /// storage, never by its `PyThreadState` address or its ident: both are handed to the next
    /// thread once one ends (glibc caches thread stacks), which merged sequential threads.
    #[inline]
    unsafe fn thread(&mut self) -> usize {
        let key = THREAD_KEY.with(|k| {
            let v = k.get();
            if v != 0 {
                return v;
            }
            let v = NEXT_THREAD_KEY.fetch_add(1, Ordering::Relaxed);
            k.set(v);
            v
        });
        if key == self.cur_key {
            return self.cur;
        }
        let i = match self.by_key.get(&key) {
            Some(&i) => i,
            None => self.new_thread(key, PyThread_get_thread_ident() as u64),
        };
        self.cur_key = key;
        self.cur = i;
        i
    }

    unsafe fn new_thread(&mut self, key: u64, ident: u64) -> usize {
        let producer = self.threads.len() as i64 + 1;
        let saved = SavedError::take();
        let name = thread_name(ident).unwrap_or_else(|| format!("thread-{producer}"));
        saved.restore();
        let sym = self.intern(name.as_bytes());
        let ts = self.tick();
        self.out.threads.extend_from_slice(&[ts, producer, ident as i64, sym]);
        self.threads.push(Thread { producer, next_seq: 0, stack: Vec::new(), exc: [kind::UNBOUND, 0, 0, 0] });
        self.by_key.insert(key, self.threads.len() - 1);
        self.counts.threads += 1;
        self.threads.len() - 1
    }

    #[inline]
    fn seq(&mut self, th: usize) -> (i64, i64) {
        let t = &mut self.threads[th];
        let s = t.next_seq;
        t.next_seq += 1;
        (t.producer, s)
    }

    // -- code objects ----------------------------------------------------------------------

    #[inline]
    unsafe fn code_index(&mut self, code: *mut ffi::PyObject) -> u32 {
        // Code objects stay alive for the recording (new_code keeps a reference): an address
        // names one code object, so a cached entry never goes stale.
        let key = code as usize;
        let slot = ((key >> 5) ^ (key >> 14)) & (CODE_CACHE - 1);
        let (k, i) = self.code_cache[slot];
        if k == key {
            return i;
        }
        let i = match self.by_code.get(&key) {
            Some(&i) => i,
            None => {
                let saved = SavedError::take();
                let i = self.new_code(code);
                saved.restore();
                i
            }
        };
        self.code_cache[slot] = (key, i);
        i
    }

    fn decide(&self, file: &str) -> bool {
        let mut best: Option<(usize, bool)> = None;
        for (prefix, rec) in &self.rules {
            if file.starts_with(prefix.as_str()) && best.is_none_or(|(n, _)| prefix.len() >= n) {
                best = Some((prefix.len(), *rec));
            }
        }
        best.is_none_or(|(_, rec)| rec)
    }

    unsafe fn new_code(&mut self, code: *mut ffi::PyObject) -> u32 {
        // The code object is kept alive for the recording: its address stays its key.
        ffi::Py_INCREF(code);
        let fname_obj = getattr(code, c"co_filename");
        let file = py_str(fname_obj).map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
        ffi::Py_XDECREF(fname_obj);
        let included = match self.files.get(&file) {
            Some(&inc) => inc,
            None => {
                let inc = self.decide(&file);
                self.files.insert(file.clone(), inc);
                if inc {
                    self.store_source(&file);
                }
                inc
            }
        };
        let idx = self.codes.len() as u32;
        self.by_code.insert(code as usize, idx);
        if !included {
            self.counts.excluded_codes += 1;
            self.codes.push(Code {
                included: false,
                id: -1,
                names: vec![],
                vars: vec![],
                kinds: vec![],
                decoded: vec![],
                depths: vec![],
                store_lines: StoreLines::default(),
            });
            return idx;
        }
        let id = self.counts.codes as i64;
        self.counts.codes += 1;
        let names = self.tuple_syms(code, c"co_names");
        let cellvars = getattr(code, c"co_cellvars");
        let freevars = getattr(code, c"co_freevars");
        let nvars = tuple_len(getattr_owned(code, c"co_varnames"));
        let ncell = tuple_len_borrowed(cellvars);
        let nfree = tuple_len_borrowed(freevars);
        let mut vars = Vec::new();
        let mut kinds = Vec::new();
        let meth = getattr(code, c"_varname_from_oparg");
        if !meth.is_null() {
            for i in 0..(nvars + ncell + nfree) {
                let n = ffi::PyLong_FromSsize_t(i as ffi::Py_ssize_t);
                let name = ffi::PyObject_CallOneArg(meth, n);
                ffi::Py_DECREF(n);
                if name.is_null() {
                    ffi::PyErr_Clear();
                    break;
                }
                vars.push(self.intern_obj(name));
                let is_cell = !cellvars.is_null() && ffi::PySequence_Contains(cellvars, name) == 1;
                kinds.push(if is_cell { CELLVAR } else { LOCAL });
                ffi::Py_DECREF(name);
            }
            ffi::Py_DECREF(meth);
        }
        // Free variables are the last slots.
        let n = kinds.len();
        for k in kinds.iter_mut().skip(n.saturating_sub(nfree)) {
            *k = FREEVAR;
        }
        ffi::Py_XDECREF(cellvars);
        ffi::Py_XDECREF(freevars);
        ffi::PyErr_Clear();
        let bytes_obj = getattr(code, c"co_code");
        let mut bytes = Vec::new();
        if !bytes_obj.is_null() && ffi::PyBytes_Check(bytes_obj) != 0 {
            let p = ffi::PyBytes_AsString(bytes_obj);
            let n = ffi::PyBytes_Size(bytes_obj);
            bytes.extend_from_slice(std::slice::from_raw_parts(p.cast::<u8>(), n as usize));
        }
        ffi::Py_XDECREF(bytes_obj);
        let mut depths = Vec::new();
        if self.depths_fn != 0 {
            let d = ffi::PyObject_CallOneArg(self.depths_fn as *mut ffi::PyObject, code);
            if !d.is_null() && ffi::PyBytes_Check(d) != 0 {
                let p = ffi::PyBytes_AsString(d).cast::<u8>();
                let n = ffi::PyBytes_Size(d) as usize;
                depths = std::slice::from_raw_parts(p, n)
                    .chunks_exact(2)
                    .map(|c| i16::from_le_bytes([c[0], c[1]]))
                    .collect();
            }
            ffi::Py_XDECREF(d);
            ffi::PyErr_Clear();
        }
        let qual = getattr(code, c"co_qualname");
        let qual_sym = match py_str(qual) {
            Some(b) => self.intern(b),
            None => self.intern(b"?"),
        };
        ffi::Py_XDECREF(qual);
        let first = getattr(code, c"co_firstlineno");
        let first_line = if first.is_null() { 0 } else { ffi::PyLong_AsLongLong(first) };
        ffi::Py_XDECREF(first);
        ffi::PyErr_Clear();
        let file_sym = self.intern(file.as_bytes());
        let ts = self.last_ts;
        self.out.code.extend_from_slice(&[ts, id, file_sym, qual_sym, first_line]);
        let store_lines = if self.monitoring { StoreLines::default() } else { self.store_lines(code, &bytes) };
        let decoded = (0..bytes.len() / 2).map(|u| self.decode_at(&bytes, 2 * u)).collect();
        self.codes.push(Code { included: true, id, names, vars, kinds, decoded, depths, store_lines });
        idx
    }

    /// The lines of `code` holding a write, from `co_lines()` (ranges of bytecode offsets and
    /// their line).
    unsafe fn store_lines(&self, code: *mut ffi::PyObject, bytes: &[u8]) -> StoreLines {
        let everywhere = StoreLines { always: true, ..StoreLines::default() };
        let it = ffi::PyObject_CallMethod(code, c"co_lines".as_ptr(), std::ptr::null());
        if it.is_null() {
            ffi::PyErr_Clear();
            return everywhere;
        }
        let mut lines: Vec<i64> = Vec::new();
        let mut always = false;
        loop {
            let item = ffi::PyIter_Next(it);
            if item.is_null() {
                break;
            }
            if ffi::PyTuple_Check(item) != 0 && ffi::PyTuple_Size(item) == 3 {
                let start = ffi::PyLong_AsSsize_t(ffi::PyTuple_GetItem(item, 0)).max(0) as usize;
                let end = ffi::PyLong_AsSsize_t(ffi::PyTuple_GetItem(item, 1)).max(0) as usize;
                let line = ffi::PyTuple_GetItem(item, 2);
                let writes = (start..end.min(bytes.len())).step_by(2).any(|off| self.is_write_op(bytes[off]));
                if writes {
                    if line == ffi::Py_None() {
                        always = true;
                    } else {
                        lines.push(ffi::PyLong_AsLongLong(line));
                    }
                }
            } else {
                always = true;
            }
            ffi::Py_DECREF(item);
        }
        ffi::Py_DECREF(it);
        if !ffi::PyErr_Occurred().is_null() {
            ffi::PyErr_Clear();
            return everywhere;
        }
        let first = lines.iter().copied().min().unwrap_or(0);
        let span = lines.iter().copied().max().map_or(0, |m| (m - first + 1) as usize);
        let mut bits = vec![0u64; span.div_ceil(64)];
        for l in lines {
            let i = (l - first) as usize;
            bits[i / 64] |= 1 << (i % 64);
        }
        StoreLines { always, first, bits }
    }

    unsafe fn tuple_syms(&mut self, obj: *mut ffi::PyObject, attr: &CStr) -> Vec<i64> {
        let t = getattr(obj, attr);
        let mut out = Vec::new();
        if !t.is_null() && ffi::PyTuple_Check(t) != 0 {
            for i in 0..ffi::PyTuple_Size(t) {
                let s = ffi::PyTuple_GetItem(t, i);
                out.push(self.intern_obj(s));
            }
        }
        ffi::Py_XDECREF(t);
        ffi::PyErr_Clear();
        out
    }

    fn store_source(&mut self, file: &str) {
        let ok = std::fs::metadata(file).map(|m| m.is_file() && m.len() <= MAX_SOURCE).unwrap_or(false);
        if !ok {
            return;
        }
        if let Ok(text) = std::fs::read(file) {
            let text = String::from_utf8_lossy(&text).into_owned();
            let ts = self.last_ts;
            self.out.push_source(ts, file, &text);
            self.counts.sources += 1;
        }
    }

    // -- values ----------------------------------------------------------------------------

    unsafe fn type_sym(&mut self, tp: *mut ffi::PyTypeObject) -> i64 {
        if let Some(&s) = self.types.get(&(tp as usize)) {
            return s;
        }
        // The type is kept alive for the recording: its address stays its key.
        ffi::Py_INCREF(tp.cast());
        let name = CStr::from_ptr((*tp).tp_name).to_bytes();
        // A static type's tp_name carries its module ("collections.OrderedDict"); keep the last part.
        let short = name.rsplit(|&c| c == b'.').next().unwrap_or(name).to_vec();
        let s = self.intern(&short);
        self.types.insert(tp as usize, s);
        s
    }

    /// (kind, value, type symbol, repr symbol) of `v` (see `kind`); runs no code of the program.
    unsafe fn encode(&mut self, v: *mut ffi::PyObject) -> [i64; 4] {
        if v.is_null() {
            return [kind::UNBOUND, 0, 0, 0];
        }
        if v == ffi::Py_None() {
            return [kind::NONE, 0, 0, 0];
        }
        let tp = ffi::Py_TYPE(v);
        if tp == &raw mut ffi::PyBool_Type {
            return [kind::BOOL, i64::from(v == ffi::Py_True()), 0, 0];
        }
        if tp == &raw mut ffi::PyLong_Type {
            return self.encode_int(v, 0);
        }
        if tp == &raw mut ffi::PyFloat_Type {
            return [kind::FLOAT, ffi::PyFloat_AsDouble(v).to_bits() as i64, 0, 0];
        }
        if tp == &raw mut ffi::PyUnicode_Type {
            return [kind::STR, self.str_sym(v), 0, 0];
        }
        let flags = (*tp).tp_flags;
        if flags & ffi::Py_TPFLAGS_LONG_SUBCLASS != 0 {
            let t = self.type_sym(tp);
            return self.encode_int(v, t);
        }
        if flags & ffi::Py_TPFLAGS_UNICODE_SUBCLASS != 0 {
            let t = self.type_sym(tp);
            return [kind::STR, self.str_sym(v), t, 0];
        }
        let t = self.type_sym(tp);
        let r = self.short_repr(v, tp);
        [kind::OBJECT, v as i64, t, r]
    }

    unsafe fn encode_int(&mut self, v: *mut ffi::PyObject, type_sym: i64) -> [i64; 4] {
        let mut overflow: c_int = 0;
        let x = ffi::PyLong_AsLongLongAndOverflow(v, &mut overflow);
        if overflow == 0 {
            if x == -1 && !ffi::PyErr_Occurred().is_null() {
                ffi::PyErr_Clear();
            } else {
                return [kind::INT, x, type_sym, 0];
            }
        }
        // Beyond int64: an object of type int, its digits as the repr (or its size when long).
        let t = if type_sym != 0 { type_sym } else { self.type_sym(ffi::Py_TYPE(v)) };
        let bits = ffi::PyObject_CallMethod(v, c"bit_length".as_ptr(), std::ptr::null());
        let nbits = if bits.is_null() { i64::MAX } else { ffi::PyLong_AsLongLong(bits) };
        ffi::Py_XDECREF(bits);
        ffi::PyErr_Clear();
        let r = if nbits <= 4096 {
            let s = ffi::PyObject_Repr(v);
            let sym = match py_str(s) {
                Some(b) => {
                    let b = cut_utf8(b, MAX_STR).to_vec();
                    self.intern_repr(&b)
                }
                None => 0,
            };
            ffi::Py_XDECREF(s);
            ffi::PyErr_Clear();
            sym
        } else {
            let text = format!("<int of {nbits} bits>");
            self.intern(text.as_bytes())
        };
        [kind::OBJECT, v as i64, t, r]
    }

    unsafe fn str_sym(&mut self, v: *mut ffi::PyObject) -> i64 {
        match py_str(v) {
            Some(b) => self.intern(cut_utf8(b, MAX_STR)),
            None => self.intern(b"<str that is not UTF-8>"),
        }
    }

    /// The scalar or placeholder text of a container element (no code of the program runs).
    unsafe fn element_text(&mut self, v: *mut ffi::PyObject, out: &mut String) {
        use std::fmt::Write as _;
        if v.is_null() {
            out.push_str("<NULL>");
        } else if v == ffi::Py_None() {
            out.push_str("None");
        } else {
            let tp = ffi::Py_TYPE(v);
            if tp == &raw mut ffi::PyBool_Type {
                out.push_str(if v == ffi::Py_True() { "True" } else { "False" });
            } else if tp == &raw mut ffi::PyLong_Type {
                let mut overflow: c_int = 0;
                let x = ffi::PyLong_AsLongLongAndOverflow(v, &mut overflow);
                if overflow == 0 {
                    let _ = write!(out, "{x}");
                } else {
                    out.push_str("<big int>");
                }
                ffi::PyErr_Clear();
            } else if tp == &raw mut ffi::PyFloat_Type {
                let _ = write!(out, "{:?}", ffi::PyFloat_AsDouble(v));
            } else if tp == &raw mut ffi::PyUnicode_Type {
                let b = py_str(v).map(|b| cut_utf8(b, 24)).unwrap_or(b"?");
                let full = py_str(v).map(<[u8]>::len).unwrap_or(0);
                out.push('\'');
                out.push_str(&String::from_utf8_lossy(b));
                if b.len() < full {
                    out.push('…');
                }
                out.push('\'');
            } else {
                let name = CStr::from_ptr((*tp).tp_name).to_string_lossy();
                let _ = write!(out, "<{name}>");
            }
        }
    }

    /// A short repr of containers, functions, classes, modules, exceptions and bytes, built
    /// from their fields (their `__repr__` is never called); 0 for other objects.
    unsafe fn short_repr(&mut self, v: *mut ffi::PyObject, tp: *mut ffi::PyTypeObject) -> i64 {
        use std::fmt::Write as _;
        let mut s = std::mem::take(&mut self.scratch);
        s.clear();
        let flags = (*tp).tp_flags;
        if flags & (ffi::Py_TPFLAGS_LIST_SUBCLASS | ffi::Py_TPFLAGS_TUPLE_SUBCLASS) != 0 {
            let is_list = flags & ffi::Py_TPFLAGS_LIST_SUBCLASS != 0;
            let n = ffi::PySequence_Size(v);
            s.push(if is_list { '[' } else { '(' });
            for i in 0..n.min(PREVIEW_ITEMS as ffi::Py_ssize_t) {
                if i > 0 {
                    s.push_str(", ");
                }
                let item = if is_list { ffi::PyList_GetItem(v, i) } else { ffi::PyTuple_GetItem(v, i) };
                self.element_text(item, &mut s);
            }
            if n > PREVIEW_ITEMS as ffi::Py_ssize_t {
                let _ = write!(s, ", … {n} items");
            } else if n == 1 && !is_list {
                s.push(',');
            }
            s.push(if is_list { ']' } else { ')' });
        } else if flags & ffi::Py_TPFLAGS_DICT_SUBCLASS != 0 {
            let n = ffi::PyDict_Size(v);
            let mut pos: ffi::Py_ssize_t = 0;
            let (mut k, mut val) = (std::ptr::null_mut(), std::ptr::null_mut());
            s.push('{');
            let mut i = 0;
            while i < PREVIEW_ITEMS && ffi::PyDict_Next(v, &mut pos, &mut k, &mut val) != 0 {
                if i > 0 {
                    s.push_str(", ");
                }
                self.element_text(k, &mut s);
                s.push_str(": ");
                self.element_text(val, &mut s);
                i += 1;
            }
            if n > PREVIEW_ITEMS as ffi::Py_ssize_t {
                let _ = write!(s, ", … {n} items");
            }
            s.push('}');
        } else if tp == &raw mut ffi::PySet_Type || tp == &raw mut ffi::PyFrozenSet_Type {
            let _ = write!(s, "{{… {} items}}", ffi::PySet_Size(v));
        } else if flags & ffi::Py_TPFLAGS_BYTES_SUBCLASS != 0 {
            let n = ffi::PyBytes_Size(v) as usize;
            let p = ffi::PyBytes_AsString(v).cast::<u8>();
            let b = std::slice::from_raw_parts(p, n.min(32));
            let _ = write!(s, "b'{}'", b.escape_ascii());
            if n > 32 {
                let _ = write!(s, "… {n} bytes");
            }
        } else if flags & ffi::Py_TPFLAGS_TYPE_SUBCLASS != 0 {
            let name = CStr::from_ptr((*v.cast::<ffi::PyTypeObject>()).tp_name).to_string_lossy();
            let _ = write!(s, "<class '{name}'>");
        } else if tp == &raw mut ffi::PyFunction_Type {
            let q = getattr(v, c"__qualname__");
            let _ = write!(s, "<function {}>", py_str(q).map(String::from_utf8_lossy).unwrap_or_default());
            ffi::Py_XDECREF(q);
        } else if tp == &raw mut ffi::PyModule_Type {
            let name = ffi::PyModule_GetNameObject(v);
            let _ = write!(s, "<module '{}'>", py_str(name).map(String::from_utf8_lossy).unwrap_or_default());
            ffi::Py_XDECREF(name);
            ffi::PyErr_Clear();
        } else if flags & ffi::Py_TPFLAGS_BASE_EXC_SUBCLASS != 0 {
            let name = CStr::from_ptr((*tp).tp_name).to_string_lossy().into_owned();
            let args = getattr(v, c"args");
            s.push_str(name.rsplit('.').next().unwrap_or(&name));
            s.push('(');
            if !args.is_null() && ffi::PyTuple_Check(args) != 0 && ffi::PyTuple_Size(args) > 0 {
                self.element_text(ffi::PyTuple_GetItem(args, 0), &mut s);
            }
            s.push(')');
            ffi::Py_XDECREF(args);
        } else {
            self.scratch = s;
            return 0;
        }
        let id = self.intern_repr(cut_utf8(s.as_bytes(), MAX_STR));
        self.scratch = s;
        id
    }

    /// The field symbol of an item key: `[3]`, `['a']`, `[(1, 2)]`.
    unsafe fn item_sym(&mut self, key: *mut ffi::PyObject) -> i64 {
        let mut s = std::mem::take(&mut self.scratch);
        s.clear();
        s.push('[');
        if !key.is_null() && ffi::PyTuple_Check(key) != 0 {
            s.push('(');
            for i in 0..ffi::PyTuple_Size(key) {
                if i > 0 {
                    s.push_str(", ");
                }
                self.element_text(ffi::PyTuple_GetItem(key, i), &mut s);
            }
            s.push(')');
        } else if !key.is_null() && ffi::PySlice_Check(key) != 0 {
            let start = getattr(key, c"start");
            let stop = getattr(key, c"stop");
            if start != ffi::Py_None() {
                self.element_text(start, &mut s);
            }
            s.push(':');
            if stop != ffi::Py_None() {
                self.element_text(stop, &mut s);
            }
            ffi::Py_XDECREF(start);
            ffi::Py_XDECREF(stop);
        } else {
            self.element_text(key, &mut s);
        }
        s.push(']');
        let text = cut_utf8(s.as_bytes(), MAX_STR).to_vec();
        self.scratch = s;
        self.intern(&text)
    }

    // -- events ----------------------------------------------------------------------------

    #[inline]
    fn maybe_flush(&mut self) {
        self.pending += 1;
        if self.pending >= self.flush_rows {
            self.flush();
        }
    }

    fn flush(&mut self) {
        self.pending = 0;
        if self.out.is_empty() {
            return;
        }
        let fresh = self.back.try_recv().unwrap_or_default();
        let full = std::mem::replace(&mut self.out, fresh);
        if let Some(tx) = &self.tx {
            if tx.send(full).is_err() {
                self.broken = true;
            }
        }
    }

    #[inline]
    fn push_event(&mut self, tag: usize, row: &[i64]) {
        if self.broken {
            return;
        }
        self.out.events[tag].extend_from_slice(row);
        self.counts.events[tag] += 1;
        self.maybe_flush();
    }

    unsafe fn var_write(&mut self, th: usize, parent: i64, var: i64, v: [i64; 4], snapshot: i64) {
        let ts = self.tick_write();
        let (p, s) = self.seq(th);
        self.push_event(2, &[ts, p, s, parent, var, v[0], v[1], v[2], v[3], snapshot]);
    }

    #[allow(clippy::too_many_arguments)]
    unsafe fn field_write(
        &mut self,
        th: usize,
        parent: i64,
        field: i64,
        target: i64,
        ttype: i64,
        v: [i64; 4],
        snapshot: i64,
    ) {
        let ts = self.tick_write();
        let (p, s) = self.seq(th);
        self.push_event(3, &[ts, p, s, parent, field, target, ttype, v[0], v[1], v[2], v[3], snapshot]);
    }

    /// A frame of included code starts or resumes.
    unsafe fn enter(&mut self, frame: *mut ffi::PyFrameObject, ci: u32, resumed: bool) {
        let th = self.thread();
        let ts = self.tick();
        let (p, seq) = self.seq(th);
        let (parent, call_line) = self.threads[th].stack.last().map_or((-1, 0), |o| (o.enter_seq, o.line));
        let f = iframe(frame);
        let id = self.codes[ci as usize].id;
        let locals: *mut ffi::PyObject = rd(f, self.layout.locals);
        let globals: *mut ffi::PyObject = rd(f, self.layout.globals);
        let ns = if !locals.is_null() && locals == globals { globals as i64 } else { 0 };
        self.push_event(0, &[ts, p, seq, parent, id, i64::from(resumed), f as i64, call_line, ns]);
        let line = if resumed && self.monitoring { self.yielded_on.remove(&(frame as usize)).unwrap_or(0) } else { 0 };
        self.threads[th].stack.push(Open { frame: frame as usize, enter_seq: seq, code: ci, line });
        self.snapshot(th, seq, f, ci);
    }

    /// The frame's variables as it is entered: arguments, a resumed generator's locals,
    /// closure cells and their contents, a module's globals, a class body's namespace.
    unsafe fn snapshot(&mut self, th: usize, seq: i64, f: *const u8, ci: u32) {
        let locals: *mut ffi::PyObject = rd(f, self.layout.locals);
        let globals: *mut ffi::PyObject = rd(f, self.layout.globals);
        if !locals.is_null() && ffi::PyDict_Check(locals) != 0 {
            let module = locals == globals;
            if module {
                self.namespaces.insert(globals as usize);
            }
            let mut pos: ffi::Py_ssize_t = 0;
            let (mut k, mut v) = (std::ptr::null_mut(), std::ptr::null_mut());
            let mut items = Vec::new();
            while ffi::PyDict_Next(locals, &mut pos, &mut k, &mut v) != 0 {
                items.push((k, v));
            }
            for (k, v) in items {
                let name = self.intern_obj(k);
                if name == 0 {
                    continue;
                }
                let val = self.encode(v);
                if module {
                    self.field_write(th, seq, name, globals as i64, self.sym_module, val, 1);
                } else {
                    self.var_write(th, seq, name, val, 1);
                }
            }
            return;
        }
        let lp = f.add(self.layout.localsplus).cast::<*mut ffi::PyObject>();
        let n = self.codes[ci as usize].vars.len();
        for i in 0..n {
            let v = *lp.add(i);
            if v.is_null() {
                continue;
            }
            let (name, k) = (self.codes[ci as usize].vars[i], self.codes[ci as usize].kinds[i]);
            if k != LOCAL && ffi::Py_TYPE(v) == &raw mut ffi::PyCell_Type {
                self.var_write(th, seq, name, [kind::CELL, v as i64, 0, 0], 1);
                let c: *mut ffi::PyObject = rd(v.cast(), CELL_REF);
                if !c.is_null() {
                    let val = self.encode(c);
                    self.field_write(th, seq, name, v as i64, self.sym_cell, val, 1);
                }
            } else {
                let val = self.encode(v);
                self.var_write(th, seq, name, val, 1);
            }
        }
    }

    /// The frame on top of this thread's recorded stack is `frame`'s (else the event is not ours).
    #[inline]
    unsafe fn top(&mut self, frame: *mut ffi::PyFrameObject) -> Option<(usize, Open)> {
        let th = self.thread();
        match self.threads[th].stack.last() {
            Some(o) if o.frame == frame as usize => Some((th, *o)),
            _ => None,
        }
    }

    unsafe fn exit(&mut self, frame: *mut ffi::PyFrameObject, how: i64, value: Option<*mut ffi::PyObject>) {
        let Some((th, open)) = self.top(frame) else { return };
        let v = match value {
            Some(v) => self.encode(v),
            None => self.threads[th].exc,
        };
        let ts = self.tick();
        let (p, seq) = self.seq(th);
        let id = self.codes[open.code as usize].id;
        self.push_event(1, &[ts, p, seq, open.enter_seq, id, how, v[0], v[1], v[2], v[3]]);
        self.threads[th].stack.pop();
        if self.monitoring {
            if how == 2 {
                self.yielded_on.insert(open.frame, open.line);
            } else if !self.yielded_on.is_empty() {
                self.yielded_on.remove(&open.frame);
            }
        }
    }

    /// Records a line step; returns whether the line holds a write (3.11: whether its
    /// instructions need opcode events), None when the frame is not recorded.
    unsafe fn line(&mut self, frame: *mut ffi::PyFrameObject, line: i64) -> Option<bool> {
        let (th, open) = self.top(frame)?;
        if let Some(o) = self.threads[th].stack.last_mut() {
            o.line = line;
        }
        let ts = self.tick();
        let (p, seq) = self.seq(th);
        let code = &self.codes[open.code as usize];
        let (id, writes) = (code.id, code.store_lines.has(line));
        self.push_event(4, &[ts, p, seq, open.enter_seq, id, line]);
        Some(writes)
    }

    #[inline]
    fn opcode_at(&self, ci: u32, off: usize) -> (u8, u32) {
        self.codes[ci as usize].decoded.get(off / 2).copied().unwrap_or((action::NONE, 0))
    }

    /// (action, argument with its EXTENDED_ARG prefixes) of the instruction at `off` of `b`.
    fn decode_at(&self, b: &[u8], off: usize) -> (u8, u32) {
        if off + 1 >= b.len() {
            return (action::NONE, 0);
        }
        let act = self.actions[b[off] as usize];
        let mut arg = u32::from(b[off + 1]);
        let mut k = off;
        let mut shift = 8;
        while k >= 2 && self.actions[b[k - 2] as usize] == action::EXTENDED_ARG && shift < 32 {
            arg |= u32::from(b[k - 1]) << shift;
            shift += 8;
            k -= 2;
        }
        (act, arg)
    }

    /// Whether the instruction at `off` of code `ci` is one the tracer records.
    fn is_write(&self, ci: u32, off: usize) -> bool {
        let (act, _) = self.opcode_at(ci, off);
        Self::writes(act)
    }

    fn is_write_op(&self, op: u8) -> bool {
        Self::writes(self.actions[op as usize])
    }

    fn writes(act: u8) -> bool {
        act != action::NONE && act != action::EXTENDED_ARG && act != action::YIELD_VALUE && act != action::RESUME
    }

    /// Records the write the instruction at `off` is about to make.
    unsafe fn instruction(&mut self, th: usize, open: Open, f: *const u8, off: usize) {
        let ci = open.code;
        let (act, arg) = self.opcode_at(ci, off);
        if act == action::NONE || act >= action::EXTENDED_ARG && act != action::STORE_SLICE {
            return;
        }
        let top: c_int = if self.monitoring {
            // The stack pointer is not saved at an INSTRUCTION event: the depth from the bytecode.
            let code = &self.codes[ci as usize];
            match code.depths.get(off / 2) {
                Some(&d) if d >= 0 => code.vars.len() as c_int + c_int::from(d),
                _ => return,
            }
        } else {
            rd(f, self.layout.stacktop)
        };
        let lp = f.add(self.layout.localsplus).cast::<*mut ffi::PyObject>();
        let depth = |k: i32| -> *mut ffi::PyObject {
            if k < top && top > 0 {
                *lp.add((top - 1 - k) as usize)
            } else {
                std::ptr::null_mut()
            }
        };
        let parent = open.enter_seq;
        let code = &self.codes[ci as usize];
        let var = |i: u32| code.vars.get(i as usize).copied().unwrap_or(0);
        let name = |i: u32| code.names.get(i as usize).copied().unwrap_or(0);
        let unbound = [kind::UNBOUND, 0, 0, 0];
        match act {
            action::STORE_FAST | action::DELETE_FAST => {
                if act == action::STORE_FAST && top <= 0 {
                    return;
                }
                // A null stored is an unbinding: 3.12's inlined comprehension puts back the
                // variable it borrowed (LOAD_FAST_AND_CLEAR ... STORE_FAST), unbound before.
                let v = if act == action::STORE_FAST { depth(0) } else { std::ptr::null_mut() };
                let sym = var(arg);
                let val = self.encode(v);
                self.var_write(th, parent, sym, val, 0);
            }
            action::STORE_FAST_STORE_FAST => {
                let (a, b) = (var(arg >> 4), var(arg & 15));
                let (va, vb) = (depth(0), depth(1));
                let ea = self.encode(va);
                self.var_write(th, parent, a, ea, 0);
                let eb = self.encode(vb);
                self.var_write(th, parent, b, eb, 0);
            }
            action::STORE_FAST_LOAD_FAST => {
                let a = var(arg >> 4);
                let v = self.encode(depth(0));
                self.var_write(th, parent, a, v, 0);
            }
            action::STORE_NAME | action::DELETE_NAME => {
                let sym = name(arg);
                let v = if act == action::STORE_NAME { self.encode(depth(0)) } else { unbound };
                let locals: *mut ffi::PyObject = rd(f, self.layout.locals);
                let globals: *mut ffi::PyObject = rd(f, self.layout.globals);
                if locals == globals {
                    self.namespaces.insert(globals as usize);
                    self.field_write(th, parent, sym, globals as i64, self.sym_module, v, 0);
                } else {
                    self.var_write(th, parent, sym, v, 0);
                }
            }
            action::STORE_GLOBAL | action::DELETE_GLOBAL => {
                let sym = name(arg);
                let v = if act == action::STORE_GLOBAL { self.encode(depth(0)) } else { unbound };
                let globals: *mut ffi::PyObject = rd(f, self.layout.globals);
                self.namespaces.insert(globals as usize);
                self.field_write(th, parent, sym, globals as i64, self.sym_module, v, 0);
            }
            action::STORE_DEREF | action::DELETE_DEREF => {
                let cell = *lp.add(arg as usize);
                if cell.is_null() || ffi::Py_TYPE(cell) != &raw mut ffi::PyCell_Type {
                    return;
                }
                let sym = var(arg);
                let v = if act == action::STORE_DEREF { self.encode(depth(0)) } else { unbound };
                self.field_write(th, parent, sym, cell as i64, self.sym_cell, v, 0);
            }
            action::STORE_ATTR | action::DELETE_ATTR => {
                let owner = depth(0);
                if owner.is_null() {
                    return;
                }
                let sym = name(arg);
                let v = if act == action::STORE_ATTR { self.encode(depth(1)) } else { unbound };
                let (target, ttype) = self.target_of(owner);
                self.field_write(th, parent, sym, target, ttype, v, 0);
            }
            action::STORE_SUBSCR | action::DELETE_SUBSCR => {
                let (key, container) = (depth(0), depth(1));
                if container.is_null() || key.is_null() {
                    return;
                }
                let sym = if self.namespaces.contains(&(container as usize)) && ffi::PyUnicode_Check(key) != 0 {
                    self.intern_obj(key)
                } else {
                    self.item_sym(key)
                };
                let v = if act == action::STORE_SUBSCR { self.encode(depth(2)) } else { unbound };
                let ttype = if self.namespaces.contains(&(container as usize)) {
                    self.sym_module
                } else {
                    self.type_sym(ffi::Py_TYPE(container))
                };
                self.field_write(th, parent, sym, container as i64, ttype, v, 0);
            }
            action::STORE_SLICE => {
                let (stop, start, container, v) = (depth(0), depth(1), depth(2), depth(3));
                if container.is_null() {
                    return;
                }
                let slice = ffi::PySlice_New(start, stop, std::ptr::null_mut());
                let sym = if slice.is_null() { self.intern(b"[:]") } else { self.item_sym(slice) };
                ffi::Py_XDECREF(slice);
                ffi::PyErr_Clear();
                let val = self.encode(v);
                let ttype = self.type_sym(ffi::Py_TYPE(container));
                self.field_write(th, parent, sym, container as i64, ttype, val, 0);
            }
            _ => {}
        }
    }

    /// The object an attribute write changes: a module's attributes are its globals, so
    /// they are written to its dict (the target of `global` writes in its functions).
    unsafe fn target_of(&mut self, owner: *mut ffi::PyObject) -> (i64, i64) {
        if ffi::PyModule_Check(owner) != 0 {
            let d = ffi::PyModule_GetDict(owner);
            if !d.is_null() {
                self.namespaces.insert(d as usize);
                return (d as i64, self.sym_module);
            }
        }
        (owner as i64, self.type_sym(ffi::Py_TYPE(owner)))
    }

    /// Files of recorded code seen so far.
    pub fn files(&self) -> Vec<String> {
        let mut v: Vec<String> = self.files.iter().filter(|(_, &inc)| inc).map(|(f, _)| f.clone()).collect();
        v.sort();
        v
    }
}

/// `threading._active[ident].name`, without creating a thread object for a foreign thread.
unsafe fn thread_name(ident: u64) -> Option<String> {
    let modname = ffi::PyUnicode_FromString(c"threading".as_ptr());
    let threading = ffi::PyImport_GetModule(modname);
    ffi::Py_DECREF(modname);
    if threading.is_null() {
        ffi::PyErr_Clear();
        return None;
    }
    let active = getattr(threading, c"_active");
    ffi::Py_DECREF(threading);
    if active.is_null() {
        return None;
    }
    let key = ffi::PyLong_FromUnsignedLongLong(ident);
    let t = ffi::PyDict_GetItem(active, key);
    ffi::Py_DECREF(key);
    let name = if t.is_null() {
        None
    } else {
        let n = getattr(t, c"name");
        let s = py_str(n).map(|b| String::from_utf8_lossy(b).into_owned());
        ffi::Py_XDECREF(n);
        s
    };
    ffi::Py_DECREF(active);
    ffi::PyErr_Clear();
    name
}

fn getattr_owned(obj: *mut ffi::PyObject, name: &CStr) -> *mut ffi::PyObject {
    // SAFETY: callers hold the interpreter lock and pass a live object.
    unsafe { getattr(obj, name) }
}

fn tuple_len(t: *mut ffi::PyObject) -> usize {
    let n = tuple_len_borrowed(t);
    // SAFETY: `t` is a new reference (or null) handed over by the caller.
    unsafe { ffi::Py_XDECREF(t) };
    n
}

fn tuple_len_borrowed(t: *mut ffi::PyObject) -> usize {
    // SAFETY: interpreter lock held by the caller; `t` is null or a live object.
    unsafe {
        if t.is_null() || ffi::PyTuple_Check(t) == 0 {
            0
        } else {
            ffi::PyTuple_Size(t) as usize
        }
    }
}

// -- CPython 3.11: PyEval_SetTrace -------------------------------------------------------

/// The C-level trace function of 3.11 (one installation per thread).
unsafe extern "C" fn trace_func(
    _obj: *mut ffi::PyObject,
    frame: *mut ffi::PyFrameObject,
    what: c_int,
    arg: *mut ffi::PyObject,
) -> c_int {
    let Some(r) = recorder() else { return 0 };
    if r.stopped {
        return 0;
    }
    match what {
        ffi::PyTrace_CALL => {
            let f = iframe(frame);
            let code: *mut ffi::PyObject = rd(f, r.layout.code);
            let ci = r.code_index(code);
            let fb = frame.cast::<u8>();
            if !r.codes[ci as usize].included {
                // No line or opcode events in code that is not recorded.
                *fb.add(FRAME_TRACE_LINES) = 0;
                *fb.add(FRAME_TRACE_OPCODES) = 0;
                return 0;
            }
            *fb.add(FRAME_TRACE_OPCODES) = 1;
            let lasti = ffi::PyFrame_GetLasti(frame).max(0) as usize;
            let (act, arg) = r.opcode_at(ci, lasti);
            r.enter(frame, ci, !(act == action::RESUME && arg == 0));
        }
        ffi::PyTrace_RETURN => {
            if arg.is_null() {
                r.exit(frame, 1, None);
            } else {
                let Some((_, open)) = r.top(frame) else { return 0 };
                let lasti = ffi::PyFrame_GetLasti(frame).max(0) as usize;
                let how = if r.opcode_at(open.code, lasti).0 == action::YIELD_VALUE { 2 } else { 0 };
                r.exit(frame, how, Some(arg));
            }
        }
        ffi::PyTrace_LINE => {
            let line: c_int = rd(frame.cast(), FRAME_LINENO);
            if let Some(writes) = r.line(frame, i64::from(line)) {
                // Read after this callback returns, for this same instruction on.
                *frame.cast::<u8>().add(FRAME_TRACE_OPCODES) = u8::from(writes);
            }
        }
        ffi::PyTrace_OPCODE => {
            if let Some((th, open)) = r.top(frame) {
                let lasti = ffi::PyFrame_GetLasti(frame).max(0) as usize;
                r.instruction(th, open, iframe(frame), lasti);
            }
        }
        ffi::PyTrace_EXCEPTION
            if r.top(frame).is_some()
                && !arg.is_null()
                && ffi::PyTuple_Check(arg) != 0
                && ffi::PyTuple_Size(arg) >= 2 =>
        {
            let th = r.thread();
            let v = r.encode(ffi::PyTuple_GetItem(arg, 1));
            r.threads[th].exc = v;
        }
        _ => {}
    }
    0
}

/// This thread's 3.11 tracing: not installed (0: a thread the recorder has not reached yet, or
/// the recording ended), on ([`TRACING`]: the trace function is installed) or suspended
/// ([`SUSPENDED`]: removed while a frame of code that is not recorded runs).
const NOT_TRACED: u8 = 0;
const TRACING: u8 = 1;
const SUSPENDED: u8 = 2;

thread_local! {
    static MODE: Cell<u8> = const { Cell::new(NOT_TRACED) };
}

extern "C" {
    fn _PyEval_EvalFrameDefault(
        tstate: *mut ffi::PyThreadState,
        frame: *mut ffi::_PyInterpreterFrame,
        throwflag: c_int,
    ) -> *mut ffi::PyObject;
}

/// The frame evaluator that ran before the recorder's (null: the interpreter's own).
static PREV_EVAL: GilCell<Option<ffi::_PyFrameEvalFunction>> = GilCell(UnsafeCell::new(None));

unsafe fn eval_prev(ts: *mut ffi::PyThreadState, f: *mut ffi::_PyInterpreterFrame, throw: c_int) -> *mut ffi::PyObject {
    match *PREV_EVAL.get() {
        Some(prev) => prev(ts, f, throw),
        None => _PyEval_EvalFrameDefault(ts, f, throw),
    }
}

/// Sets the calling thread's mode, the trace function installed (TRACING) or not.
unsafe fn set_mode(mode: u8) {
    MODE.with(|m| switch(m, mode));
}

/// The frame evaluator while recording on 3.11 (PEP 523): a frame of code that is not recorded
/// runs with the trace function removed, a recorded frame with it installed, each restored
/// when the frame returns or yields. A traced thread pays CPython's tracing path at every
/// instruction of every frame (the line table looked up, a frame object made, specialised
/// instructions undone), recorded or not; a program whose time is spent in the standard library
/// (json, re) paid it for the library's frames, which record nothing. With the hook they run as
/// they do untraced; the price is that calls between Python functions are no longer inlined.
///
/// The thread's mode is looked up once per call (its cell's address serves the return too; it
/// was up to three `__tls_get_addr` calls). Removing the trace function (`PyEval_SetTrace`, with
/// its `sys.settrace` audit event) was measured against suspending it with CPython's public
/// `PyThreadState_EnterTracing` / `LeaveTracing` (two stores each, the function left installed),
/// in instructions (callgrind, same Python tree, load-independent): 220 fewer per call into the
/// library on 1M `re.search` calls, 1M fewer (3 % of the recording's added instructions) on
/// json_loads at 100 loops, but 0.4M more per loop on regex_effbot and 1,000 more per call on a
/// loop of `os.environ.get` misses: with the function installed, the interpreter hands every
/// exception raised in a library frame to `call_exc_trace` (exception normalised, a 3-tuple
/// packed) before dropping it, and `re`'s cache misses (`except KeyError` in `re._compile`, 1,500
/// per loop of regex_effbot, which purges the cache) are such exceptions. A wash on the two
/// programs whose gain is closest to the target, a new cost for exception-heavy library code:
/// the trace function is removed.
unsafe extern "C" fn eval_frame(
    ts: *mut ffi::PyThreadState,
    f: *mut ffi::_PyInterpreterFrame,
    throw: c_int,
) -> *mut ffi::PyObject {
    // One thread-local lookup per call: the cell lives as long as the thread, which outlives it.
    let cell: &Cell<u8> = &*MODE.with(|m| m as *const Cell<u8>);
    let mode = cell.get();
    if mode == NOT_TRACED {
        return eval_prev(ts, f, throw);
    }
    let want = match recorder() {
        Some(r) if !r.stopped => {
            let code: *mut ffi::PyObject = rd(f.cast::<u8>(), r.layout.code);
            let ci = r.code_index(code);
            if r.codes[ci as usize].included {
                TRACING
            } else {
                SUSPENDED
            }
        }
        _ => mode,
    };
    if want == mode {
        return eval_prev(ts, f, throw);
    }
    switch(cell, want);
    let out = eval_prev(ts, f, throw);
    // The recording may have stopped (or this thread been forgotten) meanwhile.
    if cell.get() == want && recorder().is_some_and(|r| !r.stopped) {
        switch(cell, mode);
    }
    out
}

/// Sets this thread's mode (its cell) and installs or removes the trace function to match.
unsafe fn switch(cell: &Cell<u8>, mode: u8) {
    cell.set(mode);
    ffi::PyEval_SetTrace(if mode == TRACING { Some(trace_func) } else { None }, std::ptr::null_mut());
}

// -- CPython 3.12+: sys.monitoring --------------------------------------------------------

/// Which sys.monitoring event a callback serves (the names are `sys.monitoring.events`').
pub const MONITORING_EVENTS: [&str; 9] =
    ["PY_START", "PY_RESUME", "PY_THROW", "PY_RETURN", "PY_YIELD", "PY_UNWIND", "LINE", "INSTRUCTION", "JUMP"];

static DISABLE: GilCell<usize> = GilCell(UnsafeCell::new(0));

unsafe fn none() -> *mut ffi::PyObject {
    let n = ffi::Py_None();
    ffi::Py_INCREF(n);
    n
}

unsafe fn disable() -> *mut ffi::PyObject {
    let d = *DISABLE.get() as *mut ffi::PyObject;
    if d.is_null() {
        return none();
    }
    ffi::Py_INCREF(d);
    d
}

unsafe fn mon_args<'a>(args: *mut *mut ffi::PyObject, nargs: ffi::Py_ssize_t) -> &'a [*mut ffi::PyObject] {
    let n = ffi::PyVectorcall_NARGS(nargs as usize);
    std::slice::from_raw_parts(args, n as usize)
}

/// Enter (start, resume, throw): DISABLE (a local event) for code that is not recorded.
unsafe fn mon_enter(args: &[*mut ffi::PyObject], resumed: bool, local: bool) -> *mut ffi::PyObject {
    let Some(r) = recorder() else { return none() };
    if r.stopped || args.is_empty() {
        return none();
    }
    let ci = r.code_index(args[0]);
    if !r.codes[ci as usize].included {
        return if local { disable() } else { none() };
    }
    let frame = ffi::PyEval_GetFrame();
    if !frame.is_null() {
        r.enter(frame, ci, resumed);
    }
    none()
}

unsafe fn mon_exit(args: &[*mut ffi::PyObject], how: i64, local: bool) -> *mut ffi::PyObject {
    let Some(r) = recorder() else { return none() };
    if r.stopped || args.len() < 3 {
        return none();
    }
    let ci = r.code_index(args[0]);
    if !r.codes[ci as usize].included {
        return if local { disable() } else { none() };
    }
    let frame = ffi::PyEval_GetFrame();
    if !frame.is_null() {
        r.exit(frame, how, Some(args[2]));
    }
    none()
}

macro_rules! callback {
    ($name:ident, |$args:ident| $body:expr) => {
        unsafe extern "C" fn $name(
            _slf: *mut ffi::PyObject,
            args: *mut *mut ffi::PyObject,
            nargs: ffi::Py_ssize_t,
        ) -> *mut ffi::PyObject {
            let $args = mon_args(args, nargs);
            $body
        }
    };
}

callback!(cb_start, |a| mon_enter(a, false, true));
callback!(cb_resume, |a| mon_enter(a, true, true));
callback!(cb_throw, |a| mon_enter(a, true, false));
callback!(cb_return, |a| mon_exit(a, 0, true));
callback!(cb_yield, |a| mon_exit(a, 2, true));
callback!(cb_unwind, |a| mon_exit(a, 1, false));
callback!(cb_line, |a| {
    let Some(r) = recorder() else { return none() };
    if r.stopped || a.len() < 2 {
        return none();
    }
    let ci = r.code_index(a[0]);
    if !r.codes[ci as usize].included {
        return disable();
    }
    let line = ffi::PyLong_AsLongLong(a[1]);
    let frame = ffi::PyEval_GetFrame();
    // As 3.12's settrace: a line already stepped to is not stepped to again (a resumed
    // generator goes on on its yield's line; a backward jump's JUMP event stepped first).
    if !frame.is_null() && r.top(frame).is_some_and(|(_, o)| o.line != line) {
        r.line(frame, line);
    }
    none()
});
// A backward jump is a line step (to the jump's destination), as settrace has it, even on the
// line running (a one-line loop); a forward jump never is (DISABLE: its LINE event follows).
callback!(cb_jump, |a| {
    let Some(r) = recorder() else { return none() };
    if r.stopped || a.len() < 3 {
        return none();
    }
    let ci = r.code_index(a[0]);
    let (from, to) = (ffi::PyLong_AsLongLong(a[1]), ffi::PyLong_AsLongLong(a[2]));
    if !r.codes[ci as usize].included || to > from {
        return disable();
    }
    let line = ffi::PyCode_Addr2Line(a[0].cast(), to as c_int);
    let frame = ffi::PyEval_GetFrame();
    if !frame.is_null() && line >= 0 {
        r.line(frame, i64::from(line));
    }
    none()
});
callback!(cb_instruction, |a| {
    let Some(r) = recorder() else { return none() };
    if r.stopped || a.len() < 2 {
        return none();
    }
    let ci = r.code_index(a[0]);
    let off = ffi::PyLong_AsSsize_t(a[1]).max(0) as usize;
    if !r.codes[ci as usize].included || !r.is_write(ci, off) {
        return disable();
    }
    let frame = ffi::PyEval_GetFrame();
    if !frame.is_null() {
        if let Some((th, open)) = r.top(frame) {
            r.instruction(th, open, iframe(frame), off);
        }
    }
    none()
});

static METHOD_DEFS: GilCell<[ffi::PyMethodDef; 9]> = GilCell(UnsafeCell::new([ffi::PyMethodDef::zeroed(); 9]));

/// The sys.monitoring callbacks, in [`MONITORING_EVENTS`] order (new references).
///
/// # Safety
/// Interpreter lock held.
pub unsafe fn monitoring_callbacks() -> Vec<*mut ffi::PyObject> {
    let fns: [(&'static CStr, ffi::PyCFunctionFast); 9] = [
        (c"record_py_start", cb_start),
        (c"record_py_resume", cb_resume),
        (c"record_py_throw", cb_throw),
        (c"record_py_return", cb_return),
        (c"record_py_yield", cb_yield),
        (c"record_py_unwind", cb_unwind),
        (c"record_line", cb_line),
        (c"record_instruction", cb_instruction),
        (c"record_jump", cb_jump),
    ];
    let defs = METHOD_DEFS.get();
    let mut out = Vec::with_capacity(9);
    for (i, (name, f)) in fns.into_iter().enumerate() {
        defs[i] = ffi::PyMethodDef {
            ml_name: name.as_ptr(),
            ml_meth: ffi::PyMethodDefPointer { PyCFunctionFast: f },
            ml_flags: ffi::METH_FASTCALL,
            ml_doc: std::ptr::null::<c_char>(),
        };
        out.push(ffi::PyCFunction_NewEx(&mut defs[i], std::ptr::null_mut(), std::ptr::null_mut()));
    }
    out
}

// -- starting and stopping -----------------------------------------------------------------

/// Starts recording in this process: the calling thread at once (3.11) or every thread (3.12+,
/// once the caller registered [`monitoring_callbacks`]). `disable` is `sys.monitoring.DISABLE`.
///
/// # Safety
/// Interpreter lock held; `cfg.fd` is an open descriptor the recorder may own.
pub unsafe fn start(cfg: Config, disable_obj: *mut ffi::PyObject) -> Result<(), String> {
    if recorder().is_some() {
        return Err("a recording is already running in this process".into());
    }
    let version = ffi::Py_Version;
    let (major, minor) = ((version >> 24) & 0xff, (version >> 16) & 0xff);
    if major != 3 {
        return Err(format!("the recorder runs on CPython 3, not {major}"));
    }
    let r = Recorder::new(cfg, minor as u32)?;
    let frame = ffi::PyEval_GetFrame();
    if !frame.is_null() {
        r.layout.check(frame)?;
    }
    if !disable_obj.is_null() {
        ffi::Py_INCREF(disable_obj);
        *DISABLE.get() = disable_obj as usize;
    }
    let monitoring = r.monitoring;
    *RECORDER.get() = Some(Box::new(r));
    if !monitoring {
        let interp = ffi::PyInterpreterState_Get();
        let prev = ffi::_PyInterpreterState_GetEvalFrameFunc(interp);
        *PREV_EVAL.get() =
            if prev as usize == _PyEval_EvalFrameDefault as *const () as usize { None } else { Some(prev) };
        ffi::_PyInterpreterState_SetEvalFrameFunc(interp, Some(eval_frame));
        set_mode(TRACING);
    }
    Ok(())
}

/// Puts back the frame evaluator that ran before the recording (3.11).
unsafe fn uninstall_eval() {
    let interp = ffi::PyInterpreterState_Get();
    let ours = ffi::_PyInterpreterState_GetEvalFrameFunc(interp) as usize == eval_frame as *const () as usize;
    if ours {
        ffi::_PyInterpreterState_SetEvalFrameFunc(interp, *PREV_EVAL.get());
    }
}

/// Installs the 3.11 trace function in the calling thread (threads started after `start`).
///
/// # Safety
/// Interpreter lock held.
pub unsafe fn attach_thread() {
    if let Some(r) = recorder() {
        if !r.stopped && !r.monitoring {
            set_mode(TRACING);
        }
    }
}

/// Stops recording: no event after this; the end frame (`end_json` plus the counts) is written,
/// and the writer thread is joined. Returns the counts, bytes written and the writer's error.
///
/// # Safety
/// Interpreter lock held; the caller releases it around nothing here (the join is short: the
/// writer only drains what is queued).
pub unsafe fn stop(end_json: &str) -> Result<(Counts, u64, Vec<String>), String> {
    let Some(r) = recorder() else { return Err("no recording is running".into()) };
    if r.stopped {
        return Err("the recording was already stopped".into());
    }
    r.stopped = true;
    if !r.monitoring {
        set_mode(NOT_TRACED);
        uninstall_eval();
    }
    r.tick();
    let c = &r.counts;
    let end = format!(
        "{{\"events\": {}, \"by_type\": {{\"behavior_enter\": {}, \"behavior_exit\": {}, \"var_write\": {}, \"field_write\": {}, \"line_step\": {}}}, \"symbols\": {}, \"codes\": {}, \"excluded_codes\": {}, \"threads\": {}, \"sources\": {}, \"program\": {}}}",
        c.events.iter().sum::<u64>(),
        c.events[0],
        c.events[1],
        c.events[2],
        c.events[3],
        c.events[4],
        c.symbols,
        c.codes,
        c.excluded_codes,
        c.threads,
        c.sources,
        end_json
    );
    r.out.push_frame(wire::TAG_END, 0, end.as_bytes());
    r.broken = false;
    r.flush();
    r.tx = None;
    let files = r.files();
    let joined = match r.writer.take() {
        Some(h) => h.join().unwrap_or_else(|_| Err("the recorder's writer thread panicked".into())),
        None => Ok(0),
    };
    let counts = r.counts.clone();
    joined.map(|bytes| (counts, bytes, files))
}

/// After `fork()` in the child: this process records nothing more and never writes the wire
/// (the writer thread does not exist in it; the descriptor is closed by the caller).
///
/// # Safety
/// Interpreter lock held.
pub unsafe fn forget() {
    if let Some(r) = recorder() {
        r.stopped = true;
        if !r.monitoring {
            set_mode(NOT_TRACED);
            uninstall_eval();
        }
        // The writer thread's handle and channel belong to the parent: leak them.
        std::mem::forget(r.writer.take());
        std::mem::forget(r.tx.take());
    }
}
