//! The recorder's event clock: `CLOCK_MONOTONIC`, read between its readings through the CPU's
//! time-stamp counter.
//!
//! Owns one thing: the nanosecond an event happened at. Every call, return and line step takes
//! one reading (writes take the next nanosecond after the event that announced them, see
//! `Recorder::tick_write`), so the reading is paid millions of times per second: on this
//! project's 2-CPU machine (AMD EPYC, KVM, clocksource `tsc`) `clock_gettime(CLOCK_MONOTONIC)`
//! through the vDSO costs 24 ns of CPU, a bare `rdtsc` 9.7 ns (`rdtscp` 18.9, `lfence; rdtsc`
//! 19.1, `CLOCK_MONOTONIC_COARSE` 4.8 but only 4 ms resolution); a perf profile of a recorded
//! loop had `__vdso_clock_gettime` at 11-13 % of the recorder's own added time.
//!
//! Measured on pyperformance's richards (4.7M events; perf at 2 kHz, one run each, load 12-13):
//! the clock's samples (the vDSO plus `Recorder::line`, where the counter read is inlined) went
//! from 166 to 102 of ~1,000, about 6 % of the recording's CPU; interleaved CPU time over 8
//! rounds, paired with untraced runs: +483 ms (interquartile 471-519) before, +474 (454-486)
//! after, which the machine's noise does not resolve better than that.
//!
//! How the counter stays `CLOCK_MONOTONIC`: the clock keeps an anchor, a pair (monotonic ns,
//! counter) read together, and a rate (ns per tick) measured from the first anchor to the latest
//! one. An event within [`MAX_GAP_NS`] of the anchor (in ticks at that rate) gets
//! `anchor_ns + ticks * rate` without a system clock reading; any other event (a gap longer than
//! that, the counter behind the anchor) reads `CLOCK_MONOTONIC` and becomes the new anchor. So an
//! interpolation spans at most 20 µs, and its error is that span times the rate's error (the
//! rate is measured over >= [`CALIBRATE_NS`] and gets more exact as the recording goes on: at
//! 10 ms and a reading's skew of <= [`MAX_READ_TICKS`] ticks, below 1e-4, so < 2 ns), plus the
//! skew of the anchor's two reads. A pair whose reads were further apart than [`MAX_READ_TICKS`]
//! (the thread was preempted between them) is not used as an anchor. Events of one recording
//! still get strictly increasing timestamps (`Recorder::tick` adds 1 ns to a reading that is not
//! past the last event's).
//!
//! The counter is used only on x86-64 when the kernel itself keeps time with it (its clocksource
//! is `tsc`, which it chooses only for a constant-rate counter that is in step across CPUs) and
//! `TRACEHOUSE_RECORD_CLOCK` is not `clock_gettime`; otherwise every event reads
//! `clock_gettime(CLOCK_MONOTONIC)`, as the recorder did before.

/// Longest span (ns) read from the counter past the last system clock reading.
pub const MAX_GAP_NS: f64 = 20_000.0;
/// The rate is first used once the anchors span this long (ns); until then every event reads
/// the system clock.
pub const CALIBRATE_NS: i64 = 10_000_000;
/// A (clock, counter) pair whose counter moved more than this across the clock read is not an
/// anchor (about 0.5-1 µs at 1-2 GHz; a read takes ~60 ticks).
pub const MAX_READ_TICKS: u64 = 1_000;

/// `clock_gettime(clock)` in ns.
pub fn now_ns(clock: libc::clockid_t) -> i64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(clock, &mut t) };
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn counter() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86-64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn counter() -> u64 {
    0
}

/// Whether this machine's counter may stand in for `CLOCK_MONOTONIC` (see the module doc).
pub fn counter_usable() -> bool {
    if !cfg!(target_arch = "x86_64") || std::env::var("TRACEHOUSE_RECORD_CLOCK").is_ok_and(|v| v == "clock_gettime") {
        return false;
    }
    std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
        .is_ok_and(|s| s.trim() == "tsc")
}

/// `CLOCK_MONOTONIC`, interpolated by the counter between readings (see the module doc).
pub struct Clock {
    use_counter: bool,
    /// The first good anchor (the rate's start); counter 0: none yet.
    base_ns: i64,
    base_ticks: u64,
    anchor_ns: i64,
    anchor_ticks: u64,
    /// ns per tick; 0 until the anchors span CALIBRATE_NS.
    rate: f64,
    /// MAX_GAP_NS in ticks (0 until calibrated: every event reads the system clock).
    max_ticks: u64,
    /// System clock readings taken (for the tests and the module doc's figures).
    pub readings: u64,
}

impl Clock {
    /// A clock; `use_counter`: may interpolate with the counter ([`counter_usable`]).
    pub fn new(use_counter: bool) -> Clock {
        Clock {
            use_counter,
            base_ns: 0,
            base_ticks: 0,
            anchor_ns: 0,
            anchor_ticks: 0,
            rate: 0.0,
            max_ticks: 0,
            readings: 0,
        }
    }

    /// Now, in `CLOCK_MONOTONIC` ns.
    #[inline]
    pub fn now(&mut self) -> i64 {
        if self.max_ticks != 0 {
            let d = counter().wrapping_sub(self.anchor_ticks);
            if d <= self.max_ticks {
                return self.anchor_ns + (d as f64 * self.rate) as i64;
            }
        }
        self.read()
    }

    /// A system clock reading, taken as the new anchor when its counter reads were close.
    #[cold]
    fn read(&mut self) -> i64 {
        self.readings += 1;
        if !self.use_counter {
            return now_ns(libc::CLOCK_MONOTONIC);
        }
        let t0 = counter();
        let ns = now_ns(libc::CLOCK_MONOTONIC);
        let t1 = counter();
        if t1 < t0 || t1 - t0 > MAX_READ_TICKS {
            // Preempted (or migrated) between the reads: this pair says nothing exact.
            self.max_ticks = 0;
            return ns;
        }
        let ticks = t0 + (t1 - t0) / 2;
        if self.base_ticks == 0 {
            (self.base_ns, self.base_ticks) = (ns, ticks);
        } else if ticks <= self.base_ticks {
            // A counter behind the first anchor is no clock: the system clock from now on.
            self.use_counter = false;
            self.max_ticks = 0;
            return ns;
        } else if ns - self.base_ns >= CALIBRATE_NS {
            self.rate = (ns - self.base_ns) as f64 / (ticks - self.base_ticks) as f64;
            self.max_ticks = (MAX_GAP_NS / self.rate) as u64;
        }
        (self.anchor_ns, self.anchor_ticks) = (ns, ticks);
        ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_time_stays_within_a_few_ns_of_the_system_clock() {
        let mut c = Clock::new(counter_usable());
        let (mut last, mut worst, mut n) = (0i64, 0i64, 0u64);
        let start = now_ns(libc::CLOCK_MONOTONIC);
        let mut calibrated: Option<(u64, u64, i64)> = None;
        // 20 ms past the calibration (at most 2 s: a loaded machine may preempt the first reads).
        loop {
            let elapsed = now_ns(libc::CLOCK_MONOTONIC) - start;
            if elapsed > 200 * CALIBRATE_NS || calibrated.is_some_and(|(_, _, at)| elapsed - at > 2 * CALIBRATE_NS) {
                break;
            }
            if calibrated.is_none() && c.max_ticks != 0 {
                calibrated = Some((n, c.readings, elapsed));
            }
            let before = now_ns(libc::CLOCK_MONOTONIC);
            let t = c.now();
            let after = now_ns(libc::CLOCK_MONOTONIC);
            // Inside the window of two system readings, give or take an interpolation's error
            // (a preempted iteration widens the window, never narrows it).
            worst = worst.max(before - t).max(t - after);
            assert!(t >= last - 50, "went back {} ns", last - t);
            last = t;
            n += 1;
        }
        assert!(worst <= 200, "off the system clock by {worst} ns");
        if c.use_counter {
            // Once calibrated, most events read the counter alone (a reading per 20 µs).
            let (n0, r0, _) = calibrated.expect("calibrated");
            let (events, readings) = (n - n0, c.readings - r0);
            assert!(readings * 10 < events, "{readings} system readings for {events} events");
        } else {
            assert_eq!(c.readings, n);
        }
    }

    #[test]
    fn a_gap_longer_than_the_span_reads_the_system_clock() {
        let mut c = Clock::new(counter_usable());
        let start = now_ns(libc::CLOCK_MONOTONIC);
        while now_ns(libc::CLOCK_MONOTONIC) - start < 2 * CALIBRATE_NS {
            c.now();
        }
        let r = c.readings;
        std::thread::sleep(std::time::Duration::from_micros(200));
        let before = now_ns(libc::CLOCK_MONOTONIC);
        let t = c.now();
        assert_eq!(c.readings, r + 1);
        assert!(t >= before);
    }
}
