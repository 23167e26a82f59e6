//! Running a plan: one OS thread per traced thread and copy, on an absolute schedule.
//!
//! Owns [`Runner`] (start, progress, cancel, join), the worker loop and the execution of
//! each [`Kind`] as the real syscall on the target. Per operation a worker
//!
//! 1. waits for its dependencies (another thread's op issued or completed: a
//!    per-thread pair of counters, cache-line padded; spin, then yield, then 20 µs
//!    sleeps — dependencies are rare and short next to the schedule's gaps);
//! 2. waits for its planned time (`clock::wait_until`: absolute, sleep then spin);
//! 3. reads the clock, issues the call, reads the clock, and records planned time,
//!    issue time, completion, return value, errno and the time spent on dependencies
//!    into a preallocated per-thread buffer (no allocation, lock or shared write on
//!    the path but the thread's own two counters).
//!
//! Timings ([`Timing`]): `Original(speed)` issues each call at its traced offset
//! divided by `speed`; `Think(speed)` keeps each thread's think times (the traced gap
//! between a call's end and the next one's start) after the replayed call's actual
//! completion, a closed loop; `Asap` issues as soon as program order and dependencies
//! allow; `Relative` is the seed's ioreplay way (sleep for the traced gap after each
//! call, default timer slack, no spin), kept as the peer that `tracehouse bench replay`
//! measures against.
//!
//! `K` copies replay the same plan side by side, each in its own root and with its
//! own slots and counters: the same schedule for K users.
//!
//! A full target aborts the run: the first call that fails with ENOSPC, EDQUOT or EFBIG
//! stops every worker ([`Runner::aborted`] says which call): a replay on a full disk
//! measures the error path, not the workload. A request larger than the worker's buffer
//! (64 MiB) is still issued whole, as one vectored call over the buffer repeated
//! (`write` becomes `writev`, `pread` `preadv`...): the kernel moves the same bytes.
//!
//! Over 600 lines: the workers, their slots and ordering waits, and the timer share one run
//! state.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::clock::{self, now};
use super::fsroot::{errno, link_count, open_beneath, pattern, Root};
use super::plan::{Dep, Kind, Op, Plan, NONE, OPT_LINKS_OK, OPT_POS_IN, OPT_POS_OUT};

/// Largest buffer a worker allocates; larger requests are issued whole as vectored calls
/// over it.
pub const MAX_BUF: usize = 64 << 20;
/// Most bytes one read or write moves (Linux's MAX_RW_COUNT, 2 GiB - 4 KiB): the iovecs of
/// the largest request.
const MAX_RW: usize = 0x7fff_f000;
const MAX_IOV: usize = MAX_RW.div_ceil(MAX_BUF);

/// Whether `e` says the target has no room (the disk, a quota, the file-size limit).
pub fn is_full(e: i32) -> bool {
    e == libc::ENOSPC || e == libc::EDQUOT || e == libc::EFBIG
}
/// Most threads a run may start (copies x traced threads).
pub const MAX_THREADS: usize = 4096;

/// When calls are issued. See the module documentation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Timing {
    /// At the traced offsets divided by the speed factor.
    Original(f64),
    /// Traced think times after each actual completion, divided by the speed factor.
    Think(f64),
    /// As soon as order allows.
    Asap,
    /// ioreplay-style relative sleeps (the peer).
    Relative,
}

/// Run settings.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Independent copies of the plan replayed at once.
    pub copies: usize,
    /// When calls are issued.
    pub timing: Timing,
    /// Spin window before each planned time, ns (None: calibrated).
    pub spin_ns: Option<i64>,
    /// Time from start to the schedule's zero, ns (threads start and settle meanwhile).
    pub lead_ns: i64,
    /// Run the workers under SCHED_FIFO (lowest real-time priority): a shared machine's
    /// other runnable threads then no longer delay a wakeup by a time slice. Needs
    /// CAP_SYS_NICE; without it the run goes on at normal priority and says so.
    pub realtime: bool,
}

/// One replayed call.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rec {
    /// Planned issue time (monotonic ns; `i64::MIN` for asap).
    pub planned: i64,
    /// Issue time (monotonic ns, read just before the syscall).
    pub issue: i64,
    /// Completion time (monotonic ns, read just after).
    pub done: i64,
    /// Return value (-1 on error).
    pub ret: i64,
    /// errno of a failed call, else 0.
    pub errno: i32,
    /// ns spent waiting for dependencies.
    pub wait: i64,
    /// The worker was ready (previous call done, dependencies met) before the planned
    /// time: the lag is then the timer's error alone, not the replay running behind.
    pub ready: bool,
}

/// Facts about a run's clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunInfo {
    /// Schedule zero, monotonic ns.
    pub t0: i64,
    /// Wall-clock ns at the schedule's zero.
    pub wall0: i64,
    /// Spin window used, ns.
    pub spin: i64,
    /// Calibration: median and 90th percentile lateness of absolute sleeps, ns.
    pub late_p50: i64,
    /// See `late_p50`.
    pub late_p90: i64,
    /// Whether the timer slack could be set.
    pub slack_ok: bool,
    /// Whether real-time scheduling was asked for and obtained (by every worker).
    pub realtime: bool,
}

/// A worker's two counters, on their own cache line.
#[repr(align(64))]
#[derive(Default)]
struct Progress {
    issued: AtomicU32,
    done: AtomicU32,
}

struct Copy {
    root: Root,
    slots: Box<[AtomicI32]>,
    progress: Box<[Progress]>,
}

struct Shared {
    plan: Arc<Plan>,
    realtime: bool,
    realtime_failed: AtomicBool,
    paths: Vec<CString>,
    targets: Vec<CString>,
    /// The errno that aborted the run (0: none), and where: copy, thread, op index.
    abort: AtomicI32,
    abort_at: std::sync::Mutex<Option<(usize, usize, usize)>>,
    copies: Vec<Copy>,
    stop: AtomicBool,
    timing: Timing,
    t0: i64,
    spin: i64,
}

/// A running replay.
pub struct Runner {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<Vec<Rec>>>,
    /// Clock facts.
    pub info: RunInfo,
}

/// A 4 KiB-aligned buffer (O_DIRECT needs aligned memory).
struct Buf {
    ptr: *mut u8,
    len: usize,
}

impl Buf {
    fn new(len: usize) -> Buf {
        let len = len.clamp(4096, MAX_BUF).next_multiple_of(4096);
        let layout = std::alloc::Layout::from_size_align(len, 4096).expect("valid layout");
        // SAFETY: len > 0.
        let ptr = unsafe { std::alloc::alloc(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        let fill = pattern(len);
        // SAFETY: ptr holds len bytes.
        unsafe { std::ptr::copy_nonoverlapping(fill.as_ptr(), ptr, len) };
        Buf { ptr, len }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: allocated in new with this layout.
        unsafe { std::alloc::dealloc(self.ptr, std::alloc::Layout::from_size_align(self.len, 4096).unwrap()) };
    }
}

/// Opens the copies' roots: `root` itself for one copy, `root/copy-<k>` for several.
pub fn copy_roots(root: &std::path::Path, copies: usize) -> Result<Vec<Root>, String> {
    let base = Root::open(root).map_err(|e| format!("{}: {e}", root.display()))?;
    if copies == 1 {
        return Ok(vec![base]);
    }
    (0..copies)
        .map(|k| {
            let name = format!("copy-{k}");
            base.sub(name.as_bytes())
                .map_err(|e| format!("{}/{name}: {}", root.display(), io::Error::from_raw_os_error(e)))
        })
        .collect()
}

/// Raises the soft limit on open files to the hard one (K copies hold K times the fds).
fn raise_nofile() {
    // SAFETY: getrlimit/setrlimit with a valid struct.
    unsafe {
        let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

impl Runner {
    /// Starts the workers; the schedule's zero is `lead_ns` from now.
    pub fn start(plan: Arc<Plan>, roots: Vec<Root>, cfg: &RunConfig) -> Result<Runner, String> {
        if roots.len() != cfg.copies || cfg.copies == 0 {
            return Err(format!("{} roots for {} copies", roots.len(), cfg.copies));
        }
        let nthreads = plan.threads.len() * cfg.copies;
        if nthreads > MAX_THREADS {
            return Err(format!(
                "{} threads x {} copies = {nthreads} threads (at most {MAX_THREADS})",
                plan.threads.len(),
                cfg.copies
            ));
        }
        if let Timing::Original(s) | Timing::Think(s) = cfg.timing {
            if !(s.is_finite() && s > 0.0) {
                return Err(format!("speed factor {s}: expected a positive number"));
            }
        }
        raise_nofile();
        let paths = plan
            .paths
            .iter()
            .map(|p| CString::new(p.as_slice()).map_err(|_| "NUL byte in a path".to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        let targets = plan
            .targets
            .iter()
            .map(|p| CString::new(p.as_slice()).map_err(|_| "NUL byte in a symlink target".to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        let slack_ok = clock::minimise_timer_slack();
        // Calibrate under the scheduling class the workers will have.
        let rt_here = cfg.realtime && clock::set_realtime(true);
        let (late_p50, late_p90) = match cfg.timing {
            Timing::Asap => (0, 0),
            _ => clock::calibrate(40, 200_000),
        };
        if rt_here {
            clock::set_realtime(false);
        }
        // Spin through the usual lateness plus a margin, bounded both ways. The upper bound
        // is the issue-time error worth buying with CPU (Buttress's p99 bar, 100 µs, plus
        // margin): a loaded machine whose wakeups are 0.5 ms late would otherwise have
        // every thread spin 0.5 ms per call, and at 10,000 IOPS over 4 threads on 2 cores
        // the spinning threads starved each other (measured: 17 % of calls on time with a
        // 568 µs window at load 9; see `tracehouse bench replay`). --realtime is the cure
        // for late wakeups, not a longer spin.
        let spin = cfg.spin_ns.unwrap_or_else(|| (late_p90 + 20_000).clamp(20_000, 150_000));
        let copies = roots
            .into_iter()
            .map(|root| Copy {
                root,
                slots: (0..plan.slots).map(|_| AtomicI32::new(-1)).collect(),
                progress: (0..plan.threads.len()).map(|_| Progress::default()).collect(),
            })
            .collect();
        let lead = cfg.lead_ns.max(1_000_000) + 100_000 * nthreads as i64;
        let t0 = now() + lead;
        let wall0 = clock::wall() + (t0 - now());
        let shared = Arc::new(Shared {
            plan,
            realtime: cfg.realtime,
            realtime_failed: AtomicBool::new(cfg.realtime && !rt_here),
            paths,
            targets,
            abort: AtomicI32::new(0),
            abort_at: std::sync::Mutex::new(None),
            copies,
            stop: AtomicBool::new(false),
            timing: cfg.timing,
            t0,
            spin,
        });
        let mut handles = Vec::with_capacity(nthreads);
        for c in 0..cfg.copies {
            for t in 0..shared.plan.threads.len() {
                let sh = shared.clone();
                let h = std::thread::Builder::new()
                    .name(format!("replay-{c}-{t}"))
                    .stack_size(256 << 10)
                    .spawn(move || worker(&sh, c, t));
                match h {
                    Ok(h) => handles.push(h),
                    Err(e) => {
                        shared.stop.store(true, Ordering::Relaxed);
                        for h in handles {
                            let _ = h.join();
                        }
                        return Err(format!("starting replay threads: {e}"));
                    }
                }
            }
        }
        let info = RunInfo { t0, wall0, spin, late_p50, late_p90, slack_ok, realtime: rt_here };
        Ok(Runner { shared, handles, info })
    }

    /// Whether every worker ran under real-time scheduling (false when not asked).
    pub fn realtime(&self) -> bool {
        self.shared.realtime && !self.shared.realtime_failed.load(Ordering::Relaxed)
    }

    /// Calls completed so far, over all threads and copies.
    pub fn done_ops(&self) -> u64 {
        self.shared.copies.iter().flat_map(|c| c.progress.iter()).map(|p| p.done.load(Ordering::Relaxed) as u64).sum()
    }

    /// Whether every worker has ended.
    pub fn finished(&self) -> bool {
        self.handles.iter().all(|h| h.is_finished())
    }

    /// Asks the workers to stop after their current call.
    pub fn cancel(&self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }

    /// Whether the run was cancelled (by [`Runner::cancel`] or an abort).
    pub fn cancelled(&self) -> bool {
        self.shared.stop.load(Ordering::Relaxed)
    }

    /// The call that aborted the run because the target was full: its errno, copy, thread
    /// and op index; None when nothing did.
    pub fn aborted(&self) -> Option<(i32, usize, usize, usize)> {
        let e = self.shared.abort.load(Ordering::Acquire);
        let at = *self.shared.abort_at.lock().unwrap_or_else(|p| p.into_inner());
        at.filter(|_| e != 0).map(|(c, t, i)| (e, c, t, i))
    }

    /// Waits for the workers; records by copy, then thread (in plan order).
    pub fn join(self) -> Vec<Vec<Vec<Rec>>> {
        let per = self.shared.plan.threads.len();
        let mut out: Vec<Vec<Vec<Rec>>> = Vec::new();
        for (i, h) in self.handles.into_iter().enumerate() {
            if i % per.max(1) == 0 {
                out.push(Vec::with_capacity(per));
            }
            out.last_mut().expect("pushed").push(h.join().unwrap_or_default());
        }
        // Close what the trace left open (its copy's fds).
        for c in &self.shared.copies {
            for s in c.slots.iter() {
                let fd = s.swap(-1, Ordering::AcqRel);
                if fd >= 0 {
                    // SAFETY: the slot owned this fd.
                    unsafe { libc::close(fd) };
                }
            }
        }
        out
    }
}

/// Waits until dependency `d` holds in copy `c`.
#[inline]
fn wait_dep(c: &Copy, d: &Dep, stop: &AtomicBool) {
    let p = &c.progress[d.thread as usize];
    let ctr = if d.complete { &p.done } else { &p.issued };
    let need = d.idx + 1;
    let mut spins = 0u32;
    while ctr.load(Ordering::Acquire) < need {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        spins += 1;
        if spins < 200 {
            std::hint::spin_loop();
        } else if spins < 1000 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
}

fn worker(sh: &Shared, copy: usize, thread: usize) -> Vec<Rec> {
    let th = &sh.plan.threads[thread];
    let c = &sh.copies[copy];
    let relative = sh.timing == Timing::Relative;
    if !relative {
        clock::minimise_timer_slack();
    }
    if sh.realtime && !clock::set_realtime(true) {
        sh.realtime_failed.store(true, Ordering::Relaxed);
    }
    let mut buf = Buf::new(th.max_size.max(0) as usize);
    let mut recs = Vec::with_capacity(th.ops.len());
    clock::wait_until(sh.t0, sh.spin, &sh.stop);
    let mut prev_done = sh.t0;
    let prog = &c.progress[thread];
    for (i, op) in th.ops.iter().enumerate() {
        if sh.stop.load(Ordering::Relaxed) {
            break;
        }
        let deps = sh.plan.deps_of(op);
        let mut wait = 0;
        if !deps.is_empty() {
            let w0 = now();
            for d in deps {
                wait_dep(c, d, &sh.stop);
            }
            wait = now() - w0;
        }
        // Parents of calls on names are resolved before the schedule, off the timed path.
        let pre = op.kind.on_names().then(|| parents(c, sh, op));
        let planned = match sh.timing {
            Timing::Original(speed) => sh.t0 + (op.at as f64 / speed) as i64,
            Timing::Think(speed) => {
                if i == 0 {
                    sh.t0 + (op.at as f64 / speed) as i64
                } else {
                    prev_done + (op.gap as f64 / speed) as i64
                }
            }
            Timing::Asap => i64::MIN,
            Timing::Relative => {
                if op.gap > 0 {
                    std::thread::sleep(Duration::from_nanos(op.gap as u64));
                }
                sh.t0 + op.at
            }
        };
        let mut ready = false;
        if planned != i64::MIN {
            ready = now() < planned;
            if !relative {
                clock::wait_until(planned, sh.spin, &sh.stop);
            }
        }
        let issue = now();
        prog.issued.store(i as u32 + 1, Ordering::Release);
        let (ret, err) = match pre {
            Some(Err(e)) => (-1, e),
            Some(Ok(dirs)) => exec_path(op, sh, &dirs),
            None => exec(op, c, sh, &mut buf),
        };
        let done = now();
        prog.done.store(i as u32 + 1, Ordering::Release);
        recs.push(Rec { planned, issue, done, ret, errno: err, wait, ready });
        prev_done = done;
        if is_full(err) {
            // The first full call stops the run (every copy): see the module documentation.
            if sh.abort.compare_exchange(0, err, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                *sh.abort_at.lock().unwrap_or_else(|p| p.into_inner()) = Some((copy, thread, i));
            }
            sh.stop.store(true, Ordering::Relaxed);
            break;
        }
    }
    recs
}

/// Parent directories (opened beneath the copy's root) and last components of an
/// unlink's or rename's paths.
type Parents = Vec<(OwnedFd, CString)>;

fn parents(c: &Copy, sh: &Shared, op: &Op) -> Result<Parents, i32> {
    let mut out = Vec::with_capacity(2);
    let second = matches!(op.kind, Kind::Rename | Kind::Link);
    for p in [op.path, if second { op.path2 } else { NONE }] {
        if p != NONE {
            out.push(c.root.parent_of(sh.paths[p as usize].as_bytes())?);
        }
    }
    Ok(out)
}

#[inline]
fn result(r: i64) -> (i64, i32) {
    if r < 0 {
        (-1, errno())
    } else {
        (r, 0)
    }
}

fn exec_path(op: &Op, sh: &Shared, dirs: &Parents) -> (i64, i32) {
    let r = match op.kind {
        // SAFETY: the dir fd is open, the name NUL-terminated.
        Kind::Unlink => unsafe { libc::unlinkat(dirs[0].0.as_raw_fd(), dirs[0].1.as_ptr(), op.flags) as i64 },
        // SAFETY: as above, for both entries.
        Kind::Rename => unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                dirs[0].0.as_raw_fd(),
                dirs[0].1.as_ptr(),
                dirs[1].0.as_raw_fd(),
                dirs[1].1.as_ptr(),
                op.flags as libc::c_uint,
            )
        },
        // SAFETY: as above.
        Kind::Mkdir => unsafe {
            libc::mkdirat(dirs[0].0.as_raw_fd(), dirs[0].1.as_ptr(), op.flags as libc::mode_t) as i64
        },
        // SAFETY: as above; flags 0: a symlink is linked, not followed.
        Kind::Link => unsafe {
            libc::linkat(dirs[0].0.as_raw_fd(), dirs[0].1.as_ptr(), dirs[1].0.as_raw_fd(), dirs[1].1.as_ptr(), 0) as i64
        },
        // SAFETY: the target is NUL-terminated; the name as above.
        Kind::Symlink => unsafe {
            libc::symlinkat(sh.targets[op.path2 as usize].as_ptr(), dirs[0].0.as_raw_fd(), dirs[0].1.as_ptr()) as i64
        },
        _ => unreachable!("calls on names only"),
    };
    result(r)
}

/// Whether an open with these flags may change the file (write access or O_TRUNC).
#[inline]
fn writes_file(flags: i32) -> bool {
    flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0
}

/// iovecs covering `n` bytes with `buf` repeated (one per 64 MiB).
#[inline]
fn iovs(buf: &Buf, n: usize) -> ([libc::iovec; MAX_IOV], usize) {
    let mut v = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; MAX_IOV];
    let n = n.min(MAX_RW);
    let mut k = 0;
    let mut left = n;
    while left > 0 {
        let len = left.min(buf.len);
        v[k] = libc::iovec { iov_base: buf.ptr.cast(), iov_len: len };
        left -= len;
        k += 1;
    }
    (v, k.max(1))
}

#[inline]
fn exec(op: &Op, c: &Copy, sh: &Shared, buf: &mut Buf) -> (i64, i32) {
    let slot = |s: u32| if s == NONE { -1 } else { c.slots[s as usize].load(Ordering::Acquire) };
    let fd = slot(op.slot);
    let want = op.size.max(0) as usize;
    let n = want.min(buf.len);
    let iov = libc::iovec { iov_base: buf.ptr.cast(), iov_len: n };
    // Larger than the buffer: the vectored call over it (see the module documentation).
    let big = want > buf.len;
    let many = || iovs(buf, want);
    let p = buf.ptr.cast::<libc::c_void>();
    // SAFETY (every arm): fds are plain integers (a stale or -1 fd fails with EBADF);
    // buffers are `buf`, which holds at least `n` bytes; paths are NUL-terminated.
    let r: i64 = unsafe {
        match op.kind {
            Kind::Open => {
                return match open_beneath(c.root.fd(), &sh.paths[op.path as usize], op.flags, 0o644) {
                    // A second name of a file the trace did not link: perhaps a file outside
                    // the root (fsroot.rs). Refused like a path leaving it.
                    Ok(fd) if writes_file(op.flags) && op.opt & OPT_LINKS_OK == 0 && link_count(fd) > 1 => {
                        libc::close(fd);
                        (-1, libc::EXDEV)
                    }
                    Ok(fd) => {
                        if op.new_slot != NONE {
                            let old = c.slots[op.new_slot as usize].swap(fd, Ordering::AcqRel);
                            if old >= 0 {
                                libc::close(old);
                            }
                        }
                        (fd as i64, 0)
                    }
                    Err(e) => (-1, e),
                };
            }
            Kind::Close => {
                let fd = c.slots[op.slot as usize].swap(-1, Ordering::AcqRel);
                libc::close(fd) as i64
            }
            Kind::Read | Kind::Readv if big => {
                let (v, k) = many();
                libc::readv(fd, v.as_ptr(), k as i32) as i64
            }
            Kind::Write | Kind::Writev if big => {
                let (v, k) = many();
                libc::writev(fd, v.as_ptr(), k as i32) as i64
            }
            Kind::Pread | Kind::Preadv if big => {
                let (v, k) = many();
                libc::preadv(fd, v.as_ptr(), k as i32, op.pos) as i64
            }
            Kind::Pwrite | Kind::Pwritev if big => {
                let (v, k) = many();
                libc::pwritev(fd, v.as_ptr(), k as i32, op.pos) as i64
            }
            Kind::Read => libc::read(fd, p, n) as i64,
            Kind::Write => libc::write(fd, p, n) as i64,
            Kind::Pread => libc::pread(fd, p, n, op.pos) as i64,
            Kind::Pwrite => libc::pwrite(fd, p, n, op.pos) as i64,
            Kind::Readv => libc::readv(fd, &iov, 1) as i64,
            Kind::Writev => libc::writev(fd, &iov, 1) as i64,
            Kind::Preadv => libc::preadv(fd, &iov, 1, op.pos) as i64,
            Kind::Pwritev => libc::pwritev(fd, &iov, 1, op.pos) as i64,
            Kind::Getdents => libc::syscall(libc::SYS_getdents64, fd, p, n),
            Kind::Fallocate => libc::fallocate(fd, op.flags, op.pos, op.size) as i64,
            Kind::CopyRange | Kind::Sendfile => {
                let (mut a, mut b) = (op.pos, op.pos2);
                let pa: *mut i64 = if op.opt & OPT_POS_IN != 0 { &mut a } else { std::ptr::null_mut() };
                let pb: *mut i64 = if op.opt & OPT_POS_OUT != 0 { &mut b } else { std::ptr::null_mut() };
                let out = slot(op.slot2);
                if op.kind == Kind::CopyRange {
                    libc::copy_file_range(fd, pa, out, pb, want, 0) as i64
                } else {
                    libc::sendfile(out, fd, pa, want) as i64
                }
            }
            Kind::Truncate => {
                let flags = libc::O_WRONLY;
                let tfd = match open_beneath(c.root.fd(), &sh.paths[op.path as usize], flags, 0) {
                    Ok(tfd) => tfd,
                    Err(e) => return (-1, e),
                };
                if op.opt & OPT_LINKS_OK == 0 && link_count(tfd) > 1 {
                    libc::close(tfd);
                    return (-1, libc::EXDEV);
                }
                let r = libc::ftruncate(tfd, op.size);
                let e = errno();
                libc::close(tfd);
                if r < 0 {
                    return (-1, e);
                }
                0
            }
            Kind::Lseek => libc::lseek(fd, op.pos, op.flags),
            Kind::Fsync => libc::fsync(fd) as i64,
            Kind::Fdatasync => libc::fdatasync(fd) as i64,
            Kind::Ftruncate => libc::ftruncate(fd, op.size) as i64,
            Kind::Dup => {
                let nfd = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0);
                if nfd >= 0 {
                    let old = c.slots[op.new_slot as usize].swap(nfd, Ordering::AcqRel);
                    if old >= 0 {
                        libc::close(old);
                    }
                    if op.aux != NONE {
                        let gone = c.slots[op.aux as usize].swap(-1, Ordering::AcqRel);
                        if gone >= 0 {
                            libc::close(gone);
                        }
                    }
                }
                nfd as i64
            }
            Kind::Unlink | Kind::Rename | Kind::Mkdir | Kind::Link | Kind::Symlink => {
                unreachable!("calls on names go through exec_path")
            }
        }
    };
    result(r)
}

/// Prepares every copy's root as the plan says (directories, sized files, removals).
pub fn prepare(plan: &Plan, roots: &[Root], cold: bool) -> Vec<super::fsroot::Prepared> {
    use super::plan::Prep;
    roots
        .iter()
        .map(|root| {
            let mut out = super::fsroot::Prepared::default();
            for p in &plan.prep {
                let (id, r) = match *p {
                    Prep::Dir(id) => (id, root.mkdir_all(&plan.paths[id as usize]).map(|n| out.dirs += n)),
                    Prep::File(id, size) => (id, root.prepare_file(&plan.paths[id as usize], size, cold, &mut out)),
                    Prep::Absent(id) => (
                        id,
                        root.remove(&plan.paths[id as usize]).map(|gone| {
                            if gone {
                                out.removed += 1
                            }
                        }),
                    ),
                };
                if let Err(e) = r {
                    out.errors.push((plan.paths[id as usize].clone(), e));
                }
            }
            out
        })
        .collect()
}

/// The copy root's path as bytes (for records).
pub fn root_bytes(root: &Root) -> Vec<u8> {
    root.path().as_os_str().as_bytes().to_vec()
}

/// The peer `tracehouse bench replay` measures the replayer against: the same preads in
/// a bare loop (no schedule, no dependencies, no records), `threads` threads, thread `t`
/// on `paths[t % paths.len()]` reading `size` bytes at its share of `offsets`. Returns
/// the wall seconds from a common start to the last thread's end.
pub fn raw_preads(paths: &[std::path::PathBuf], offsets: &[i64], size: usize, threads: usize) -> io::Result<f64> {
    use std::os::unix::fs::FileExt;
    let threads = threads.max(1);
    let files = (0..threads).map(|t| std::fs::File::open(&paths[t % paths.len()])).collect::<io::Result<Vec<_>>>()?;
    let per = offsets.len().div_ceil(threads);
    let barrier = std::sync::Barrier::new(threads);
    let spans: Vec<(i64, i64)> = std::thread::scope(|s| {
        let hs: Vec<_> = files
            .iter()
            .enumerate()
            .map(|(t, f)| {
                let chunk = &offsets[(t * per).min(offsets.len())..((t + 1) * per).min(offsets.len())];
                let barrier = &barrier;
                s.spawn(move || {
                    let mut buf = vec![0u8; size];
                    barrier.wait();
                    let start = now();
                    for &off in chunk {
                        let _ = f.read_at(&mut buf, off as u64);
                    }
                    (start, now())
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or((0, 0))).collect()
    });
    let start = spans.iter().map(|s| s.0).min().unwrap_or(0);
    let end = spans.iter().map(|s| s.1).max().unwrap_or(0);
    Ok((end - start) as f64 / 1e9)
}
