//! Duration histograms with bpftrace's exact bucket rules (seed 004).
//!
//! Owns the bucket index of a value for `hist(n, k)` (log2, 2^k sub-buckets per power
//! of two) and `lhist(n, min, max, step)` (linear), and the counting of many values
//! into per-group bucket vectors in one pass. Labels and the `@` text live in Python
//! (`analysis/histogram.py`); the indexes here are the contract they decode.
//!
//! `hist` indexes, as bpftrace's `TextOutput::hist_to_str` reads them (N = 2^k):
//! index 0 holds negative values, indexes 1..=N the values 0..N-1 (one each), and from
//! there every power of two [2^l, 2^(l+1)) with l >= k is split into N equal
//! sub-buckets: value v gets index ((l - k + 1) << k) + s + 1 where s is the k bits
//! after v's leading one. With k = 0: 0 -> 1, 1 -> 2, [2,4) -> 3, [4,8) -> 4, ...
//!
//! `lhist` indexes: 0 for v < min, 1 + (v - min) / step for min <= v < max, and
//! (max - min) / step + 1 for v >= max (bpftrace's below-min and above-max buckets).

/// Number of `hist` buckets for `k` (enough for every int64).
pub fn log2_buckets(k: u32) -> usize {
    (((64 - k) as usize) << k) + 1
}

/// The `hist(v, k)` bucket index of `v` (`k` <= 5).
#[inline(always)]
pub fn log2_index(v: i64, k: u32) -> usize {
    if v < 0 {
        return 0;
    }
    let n = 1i64 << k;
    if v < n {
        return v as usize + 1;
    }
    let l = 63 - v.leading_zeros(); // floor(log2 v) >= k
    let s = ((v >> (l - k)) - n) as usize;
    (((l - k + 1) as usize) << k) + s + 1
}

/// Number of `lhist` buckets: the linear ones plus below-min and above-max.
pub fn linear_buckets(min: i64, max: i64, step: i64) -> usize {
    ((max - min) / step) as usize + 2
}

/// The `lhist(v, min, max, step)` bucket index of `v` (`step` > 0, `min` < `max`).
#[inline(always)]
pub fn linear_index(v: i64, min: i64, max: i64, step: i64) -> usize {
    if v < min {
        0
    } else if v >= max {
        ((max - min) / step) as usize + 1
    } else {
        ((v - min) / step) as usize + 1
    }
}

/// Checks `lhist` arguments; the message names what is wrong.
pub fn check_linear(min: i64, max: i64, step: i64) -> Result<(), String> {
    if step <= 0 {
        return Err(format!("lhist step {step}: expected at least 1"));
    }
    if min >= max {
        return Err(format!("lhist min {min} and max {max}: expected min < max"));
    }
    if (max as i128 - min as i128) % step as i128 != 0 {
        return Err(format!("lhist range {min}..{max} is not a multiple of step {step}"));
    }
    if (max as i128 - min as i128) / step as i128 > 100_000 {
        return Err("lhist: (max - min) / step must be at most 100,000 buckets".into());
    }
    Ok(())
}

/// Counts `values` into `groups` x `buckets` cells (row-major by group). `group` gives
/// each value's group in 0..groups (all in group 0 when `None`); values whose group is
/// out of range are skipped (callers use -1 for "no group").
pub fn count<F: Fn(i64) -> usize>(
    values: &[i64],
    group: Option<&[i64]>,
    groups: usize,
    buckets: usize,
    index: F,
) -> Vec<u64> {
    let mut out = vec![0u64; groups.max(1) * buckets];
    match group {
        None => {
            for &v in values {
                out[index(v)] += 1;
            }
        }
        Some(g) => {
            for (&v, &gi) in values.iter().zip(g) {
                if gi >= 0 && (gi as usize) < groups {
                    out[gi as usize * buckets + index(v)] += 1;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lower bound of `hist` bucket `i` as bpftrace's JSON output computes it.
    fn low(i: usize, k: u32) -> i64 {
        let n = 1usize << k;
        if i <= 2 << k {
            return i as i64 - 1;
        }
        let i = i - 1;
        let power = (i >> k) - 1;
        let bucket = i & (n - 1);
        (1i64 << power) * (n + bucket) as i64
    }

    #[test]
    fn log2_k0_documented_edges() {
        assert_eq!(log2_index(-5, 0), 0);
        assert_eq!(log2_index(i64::MIN, 0), 0);
        assert_eq!(log2_index(0, 0), 1);
        assert_eq!(log2_index(1, 0), 2);
        assert_eq!(log2_index(2, 0), 3);
        assert_eq!(log2_index(3, 0), 3);
        assert_eq!(log2_index(4, 0), 4);
        assert_eq!(log2_index(1023, 0), 11);
        assert_eq!(log2_index(1024, 0), 12); // [1K, 2K)
        assert_eq!(log2_index(i64::MAX, 0), 64);
        assert_eq!(log2_buckets(0), 65);
    }

    #[test]
    fn log2_index_is_monotone_and_matches_bucket_lows() {
        for k in 0..=5 {
            let mut prev = 0;
            for v in 0..5000i64 {
                let i = log2_index(v, k);
                assert!(i >= prev && i <= prev + 1, "k {k} v {v}");
                assert!(low(i, k) <= v, "k {k} v {v} index {i}");
                if i + 1 < log2_buckets(k) {
                    assert!(v < low(i + 1, k), "k {k} v {v}");
                }
                prev = i;
            }
            assert!(log2_index(i64::MAX, k) < log2_buckets(k));
        }
    }

    #[test]
    fn linear_edges() {
        check_linear(0, 10, 1).unwrap();
        assert!(check_linear(0, 10, 3).is_err());
        assert!(check_linear(5, 5, 1).is_err());
        assert!(check_linear(0, 10, 0).is_err());
        assert_eq!(linear_index(-1, 0, 10, 2), 0);
        assert_eq!(linear_index(0, 0, 10, 2), 1);
        assert_eq!(linear_index(1, 0, 10, 2), 1);
        assert_eq!(linear_index(9, 0, 10, 2), 5);
        assert_eq!(linear_index(10, 0, 10, 2), 6);
        assert_eq!(linear_buckets(0, 10, 2), 7);
    }

    #[test]
    fn grouped_counts() {
        let c = count(&[0, 1, 1, 5, -2], Some(&[0, 1, 1, 0, -1]), 2, log2_buckets(0), |v| log2_index(v, 0));
        let b = log2_buckets(0);
        assert_eq!(c[1], 1);
        assert_eq!(c[4], 1);
        assert_eq!(c[b + 2], 2);
        assert_eq!(c.iter().sum::<u64>(), 4);
    }
}
