//! Event density: how many timestamps of each stream fall in each time bin.
//!
//! Owns the counting behind `density` (seed 000's overview): given the timestamps of
//! many streams (one per event type and producer), each a sorted range of one array,
//! and sorted bin edges, count each stream's events per bin by binary
//! search at every edge. Cost: streams x edges x log(stream length), independent of the
//! number of events in the bins, which is what makes 1,000 bins over 100M events a
//! millisecond question once the sorted streams exist (`analysis/_index.py`).

/// `counts[s * bins + b]` = events of stream `s` with `edges[b] <= ts < edges[b + 1]`,
/// where stream `s` is `ts[starts[s]..ends[s]]` (sorted ascending) and
/// `bins = edges.len() - 1`. Edges must be sorted ascending.
pub fn binned_counts(ts: &[i64], starts: &[i64], ends: &[i64], edges: &[i64]) -> Result<Vec<i64>, String> {
    let bins = check_bins(ts.len(), starts, ends, edges)?;
    Ok(per_stream(starts.len(), bins, |s, row| {
        let stream = &ts[starts[s] as usize..ends[s] as usize];
        // Edges are sorted, so each search starts where the previous one ended;
        // and timestamps are close to evenly spread, so interpolation lands near
        // the answer and a short gallop around the guess finds it: a few cache
        // misses per edge where a binary search over a 2.5M-event stream costs ~20
        // (which made 1,000 bins over 100M events an 80 ms question).
        let mut from = locate(stream, 0, edges[0]);
        for (b, cell) in row.iter_mut().enumerate() {
            let next = locate(stream, from, edges[b + 1]);
            *cell = (next - from) as i64;
            from = next;
        }
    }))
}

/// Checks the arguments of a binned count over `len` timestamps (at least two sorted
/// edges, one end per start, every stream inside the timestamps); returns the bins.
pub fn check_bins(len: usize, starts: &[i64], ends: &[i64], edges: &[i64]) -> Result<usize, String> {
    if edges.len() < 2 {
        return Err("density needs at least two bin edges".into());
    }
    if edges.windows(2).any(|w| w[0] > w[1]) {
        return Err("bin edges must be sorted".into());
    }
    if starts.len() != ends.len() {
        return Err("one end per stream start".into());
    }
    if starts.iter().zip(ends).any(|(&a, &b)| a < 0 || a > b || b as usize > len) {
        return Err("stream ranges must lie inside the timestamps".into());
    }
    Ok(edges.len() - 1)
}

/// `streams x bins` counts, `count(s, row)` filling stream s's row. Streams are independent
/// and the searches wait on memory, not arithmetic: they are split over the cores (up to
/// 4 threads, each filling its own rows).
pub fn per_stream(streams: usize, bins: usize, count: impl Fn(usize, &mut [i64]) + Sync) -> Vec<i64> {
    let mut out = vec![0i64; streams * bins];
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 4).min(streams.max(1));
    let per = streams.div_ceil(threads.max(1)).max(1);
    let count = &count;
    std::thread::scope(|sc| {
        for (t, rows) in out.chunks_mut((per * bins).max(1)).enumerate() {
            sc.spawn(move || {
                for (i, row) in rows.chunks_mut(bins.max(1)).enumerate() {
                    count(t * per + i, row);
                }
            });
        }
    });
    out
}

/// The first index `i >= from` with `s[i] >= e` (`s` sorted): interpolate a guess
/// between `s[from]` and the last value, then gallop from the guess toward the answer.
fn locate(s: &[i64], from: usize, e: i64) -> usize {
    let n = s.len();
    if from >= n || s[from] >= e {
        return from;
    }
    let last = s[n - 1];
    if last < e {
        return n;
    }
    // s[from] < e <= last, so the answer is in (from, n - 1].
    let span = (last as i128 - s[from] as i128) as f64;
    let frac = (e as i128 - s[from] as i128) as f64 / span;
    let guess = (from + ((n - 1 - from) as f64 * frac) as usize).clamp(from + 1, n - 1);
    if s[guess - 1] < e && s[guess] >= e {
        return guess;
    }
    if s[guess] < e {
        return gallop(s, guess, e);
    }
    // s[guess] >= e: gallop backward to a value below e (s[from] is one).
    let (mut hi, mut step) = (guess, 1usize);
    let lo = loop {
        let probe = hi.saturating_sub(step).max(from);
        if s[probe] < e {
            break probe;
        }
        hi = probe;
        step *= 2;
    };
    lo + 1 + s[lo + 1..hi].partition_point(|&t| t < e)
}

/// The first index `i >= from` with `s[i] >= e` (`s` sorted), searching exponentially
/// outward from `from`.
fn gallop(s: &[i64], from: usize, e: i64) -> usize {
    let n = s.len();
    if from >= n || s[from] >= e {
        return from;
    }
    // s[lo] < e; find hi with s[hi] >= e (or n).
    let (mut lo, mut step) = (from, 1usize);
    let hi = loop {
        let probe = lo + step;
        if probe >= n {
            break n;
        }
        if s[probe] >= e {
            break probe;
        }
        lo = probe;
        step *= 2;
    };
    lo + 1 + s[lo + 1..hi].partition_point(|&t| t < e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_stream_and_bin() {
        // stream 0: 1 2 3 10; stream 1: 5 5 ; stream 2: empty
        let ts = [1, 2, 3, 10, 5, 5];
        let c = binned_counts(&ts, &[0, 4, 6], &[4, 6, 6], &[0, 3, 6, 11]).unwrap();
        assert_eq!(c, vec![2, 1, 1, 0, 2, 0, 0, 0, 0]);
    }

    #[test]
    fn locate_equals_partition_point() {
        let mut v: Vec<i64> = (0..2000).map(|i| (i * i) % 7919).collect();
        v.sort_unstable();
        for s in [&v[..], &v[..1], &v[..0], &[5, 5, 5, 5][..]] {
            for from in [0usize, 1, 3, 100, 1999, 2000] {
                if from > s.len() {
                    continue;
                }
                for e in [-1i64, 0, 1, 5, 6, 100, 4000, 7918, 7919, 9000] {
                    let want = from + s[from..].partition_point(|&t| t < e);
                    assert_eq!(locate(s, from, e), want, "from {from} e {e} len {}", s.len());
                }
            }
        }
    }

    #[test]
    fn gallop_equals_partition_point() {
        let s: Vec<i64> = (0..1000).map(|i| i / 3).collect();
        for from in [0usize, 1, 5, 500, 999, 1000] {
            for e in -1..340 {
                let want = from + s[from..].partition_point(|&t| t < e);
                assert_eq!(gallop(&s, from, e), want, "from {from} e {e}");
            }
        }
    }

    #[test]
    fn bad_arguments() {
        assert!(binned_counts(&[1], &[0], &[1], &[0]).is_err());
        assert!(binned_counts(&[1], &[0], &[1], &[2, 1]).is_err());
        assert!(binned_counts(&[1], &[0], &[2], &[0, 1]).is_err());
        assert!(binned_counts(&[1], &[0, 1], &[1], &[0, 1]).is_err());
    }
}
