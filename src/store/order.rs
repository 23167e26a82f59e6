//! Stable ordering of rows by several int64 key columns, and running maxima over rows
//! so ordered.
//!
//! Owns the one sort the analyses need: "give me the permutation that orders these rows
//! by (k1, k2, ...), ties kept in input order". The derived indexes (object history,
//! frame locals, span index, per-stream timestamps) are all such orders over data that
//! arrives sorted by `ts`, so stability gives the `ts` order inside each key for free.
//!
//! Decision: an LSD radix sort on a packed u64 key. Each key column is shifted to start
//! at 0 (`k - min`) and the columns are packed, most significant first, into as many
//! bits as their ranges need. The TOD keys (object ids, field ids, threads, depths,
//! seqs) pack into 20-40 bits, so 2-4 passes of 11 bits sort 35M rows in a few hundred
//! milliseconds, where a comparison sort of (k1, k2, row) tuples takes seconds. Passes
//! whose digit is the same for every row are skipped. When the ranges need more than 64
//! bits the rows are sorted by a stable comparison sort instead (correct, slower).

/// Bits per radix pass: 2^11 counters fit in L1 and 64 bits take at most 6 passes.
const DIGIT_BITS: u32 = 11;

/// Largest number of rows an order can hold (row numbers are u32).
pub const MAX_ROWS: usize = u32::MAX as usize;

/// The permutation that orders rows by `keys` lexicographically (first column most
/// significant), stable: rows with equal keys keep their input order.
///
/// Every key column must have the same length, at most [`MAX_ROWS`].
pub fn stable_order(keys: &[&[i64]]) -> Vec<u32> {
    let n = keys.first().map_or(0, |k| k.len());
    assert!(keys.iter().all(|k| k.len() == n), "key columns differ in length");
    assert!(n <= MAX_ROWS, "more than u32::MAX rows");
    if keys.is_empty() || n < 2 {
        return (0..n as u32).collect();
    }
    // Range of each column, and the bits needed to hold it.
    let mut mins = Vec::with_capacity(keys.len());
    let mut bits = Vec::with_capacity(keys.len());
    for k in keys {
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        for &v in k.iter() {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        let span = (hi as i128 - lo as i128) as u128;
        mins.push(lo);
        bits.push(128 - span.leading_zeros());
    }
    let total: u32 = bits.iter().sum();
    if total > 64 {
        return comparison_order(keys);
    }
    let mut packed = vec![0u64; n];
    let mut shift = total;
    for (c, k) in keys.iter().enumerate() {
        shift -= bits[c];
        if bits[c] == 0 {
            continue;
        }
        let lo = mins[c];
        for (p, &v) in packed.iter_mut().zip(k.iter()) {
            *p |= (v.wrapping_sub(lo) as u64) << shift;
        }
    }
    radix_order(packed, total)
}

/// LSD radix sort of row numbers by `packed` (only the low `bits` bits are set).
fn radix_order(mut keys: Vec<u64>, bits: u32) -> Vec<u32> {
    let n = keys.len();
    let mut rows: Vec<u32> = (0..n as u32).collect();
    let mut keys2 = vec![0u64; n];
    let mut rows2 = vec![0u32; n];
    let radix = 1usize << DIGIT_BITS;
    let mask = (radix - 1) as u64;
    let mut counts = vec![0usize; radix];
    let mut shift = 0;
    while shift < bits {
        counts.iter_mut().for_each(|c| *c = 0);
        for &k in &keys {
            counts[((k >> shift) & mask) as usize] += 1;
        }
        // A digit that is the same for every row moves nothing.
        if counts.contains(&n) {
            shift += DIGIT_BITS;
            continue;
        }
        let mut sum = 0;
        for c in counts.iter_mut() {
            let v = *c;
            *c = sum;
            sum += v;
        }
        for i in 0..n {
            let k = keys[i];
            let d = ((k >> shift) & mask) as usize;
            let at = counts[d];
            counts[d] += 1;
            keys2[at] = k;
            rows2[at] = rows[i];
        }
        std::mem::swap(&mut keys, &mut keys2);
        std::mem::swap(&mut rows, &mut rows2);
        shift += DIGIT_BITS;
    }
    rows
}

/// Stable comparison sort, for keys whose ranges do not pack into 64 bits.
fn comparison_order(keys: &[&[i64]]) -> Vec<u32> {
    let n = keys[0].len();
    let mut rows: Vec<u32> = (0..n as u32).collect();
    rows.sort_by(|&a, &b| {
        for k in keys {
            let o = k[a as usize].cmp(&k[b as usize]);
            if o != std::cmp::Ordering::Equal {
                return o;
            }
        }
        std::cmp::Ordering::Equal
    });
    rows
}

/// The running maximum of `values` within each run of rows with equal `keys` (rows
/// ordered so that equal keys are adjacent, as [`stable_order`] leaves them): `out[i]` is
/// the largest `values[j]` of i's run with j <= i. The span index stores it over `end_ts`
/// per (thread, depth): the spans open at t are then a binary search away even where
/// spans of one depth overlap (Chrome slices that overlap without nesting).
pub fn running_max_by_key(keys: &[&[i64]], values: &[i64]) -> Vec<i64> {
    let n = values.len();
    assert!(keys.iter().all(|k| k.len() == n), "key columns differ in length");
    let mut out = Vec::with_capacity(n);
    let mut m = i64::MIN;
    for i in 0..n {
        if i == 0 || keys.iter().any(|k| k[i] != k[i - 1]) {
            m = values[i];
        } else {
            m = m.max(values[i]);
        }
        out.push(m);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::rng::SplitMix64;

    #[test]
    fn running_max_restarts_with_each_key_run() {
        let k1 = [1i64, 1, 1, 2, 2, 2];
        let k2 = [0i64, 0, 1, 1, 1, 1];
        let v = [5i64, 3, 2, 1, 9, 4];
        assert_eq!(running_max_by_key(&[&k1, &k2], &v), vec![5, 5, 2, 1, 9, 9]);
        assert_eq!(running_max_by_key(&[&k1], &v), vec![5, 5, 5, 1, 9, 9]);
        assert!(running_max_by_key(&[&[]], &[]).is_empty());
    }

    fn reference(keys: &[&[i64]]) -> Vec<u32> {
        comparison_order(keys)
    }

    #[test]
    fn empty_and_single() {
        assert!(stable_order(&[&[]]).is_empty());
        assert_eq!(stable_order(&[&[5]]), vec![0]);
        assert_eq!(stable_order(&[]), Vec::<u32>::new());
    }

    #[test]
    fn ties_keep_input_order() {
        let k = [3i64, 1, 3, 1, 2];
        assert_eq!(stable_order(&[&k]), vec![1, 3, 4, 0, 2]);
    }

    #[test]
    fn matches_comparison_sort_on_random_keys() {
        let mut rng = SplitMix64::new(7);
        for &(n, range) in &[(1000usize, 10u64), (5000, 1 << 20), (3000, 3)] {
            let a: Vec<i64> = (0..n).map(|_| (rng.next_u64() % range) as i64 - 5).collect();
            let b: Vec<i64> = (0..n).map(|_| (rng.next_u64() % range) as i64).collect();
            assert_eq!(stable_order(&[&a, &b]), reference(&[&a, &b]));
            assert_eq!(stable_order(&[&b]), reference(&[&b]));
        }
    }

    #[test]
    fn wide_keys_fall_back_to_comparison() {
        let a = [i64::MAX, i64::MIN, 0, i64::MIN];
        let b = [1i64, i64::MAX, 2, i64::MIN];
        assert_eq!(stable_order(&[&a, &b]), vec![3, 1, 2, 0]);
    }

    #[test]
    fn full_range_single_column() {
        let a = [i64::MAX, i64::MIN, -1, 0, i64::MIN];
        assert_eq!(stable_order(&[&a]), vec![1, 4, 2, 3, 0]);
    }
}
