//! Time for the replayer: one monotonic clock in ns, and waiting until an absolute time.
//!
//! Owns the schedule's clock (`CLOCK_MONOTONIC`, read through the vDSO: ~20 ns), the
//! per-thread timer slack (`prctl(PR_SET_TIMERSLACK, 1)`: the default 50 µs lets the
//! kernel fire a sleep that much late to batch wakeups), and [`wait_until`]: sleep with
//! `clock_nanosleep(TIMER_ABSTIME)` until `spin` ns before the target, then spin on the
//! clock. Absolute targets mean a late wakeup never shifts the ops after it (the drift
//! of a relative `sleep(gap)` replayer). [`calibrate`] measures how late this machine's
//! wakeups are, so the spin covers them without burning more CPU than needed.

use std::sync::atomic::{AtomicBool, Ordering};

/// Monotonic time, ns.
#[inline]
pub fn now() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-parameter.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Wall-clock time, ns since the epoch.
pub fn wall() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-parameter.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Sets the calling thread's timer slack to 1 ns (0 would mean "the default").
pub fn minimise_timer_slack() -> bool {
    // SAFETY: PR_SET_TIMERSLACK takes one unsigned long.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) == 0 }
}

/// Puts the calling thread under SCHED_FIFO at the lowest real-time priority (`on`), or
/// back under SCHED_OTHER. False when not permitted (no CAP_SYS_NICE). The kernel's
/// real-time throttling (sched_rt_runtime_us, 95 % by default) still leaves the rest of
/// the machine a share should a worker spin.
pub fn set_realtime(on: bool) -> bool {
    let param = libc::sched_param { sched_priority: if on { 1 } else { 0 } };
    let policy = if on { libc::SCHED_FIFO } else { libc::SCHED_OTHER };
    // SAFETY: param is valid; 0 is the calling thread.
    unsafe { libc::sched_setscheduler(0, policy, &param) == 0 }
}

/// Sleeps until monotonic `t` (absolute; returns early on a signal, the caller loops).
#[inline]
fn sleep_until(t: i64) {
    let ts = libc::timespec { tv_sec: t / 1_000_000_000, tv_nsec: t % 1_000_000_000 };
    // SAFETY: ts is valid; a null remainder is allowed with TIMER_ABSTIME.
    unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
}

/// Waits until monotonic `target`: sleeps until `spin` ns before it, then spins.
/// Returns early when `stop` is set.
#[inline]
pub fn wait_until(target: i64, spin: i64, stop: &AtomicBool) {
    loop {
        let t = now();
        if t >= target {
            return;
        }
        if target - t > spin {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            // Sleep at most 50 ms at a time, so a cancel is seen.
            sleep_until((target - spin).min(t + 50_000_000));
        } else {
            while now() < target {
                std::hint::spin_loop();
            }
            return;
        }
    }
}

/// How late absolute sleeps wake up here: the 90th percentile over `n` sleeps of
/// `sleep_ns` (ns late). Run on a thread with minimised timer slack.
pub fn calibrate(n: usize, sleep_ns: i64) -> (i64, i64) {
    let mut late: Vec<i64> = Vec::with_capacity(n);
    for _ in 0..n {
        let target = now() + sleep_ns;
        sleep_until(target);
        late.push(now() - target);
    }
    late.sort_unstable();
    let p = |q: f64| late[((late.len() - 1) as f64 * q) as usize];
    (p(0.5), p(0.9))
}
