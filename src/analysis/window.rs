//! Aggregates of a time window's spans, read straight from the span index's row ranges.
//!
//! The span index is ordered by (producer, depth, ts), so a window selects one contiguous
//! range of rows in each (producer, depth) run (two binary searches per run, done by the
//! caller: `python/tracehouse/analysis/windows.py`). These passes walk those ranges once,
//! without materialising the row numbers (a 90 % window of a 100M-event TOD trace holds
//! 15M spans: the numpy way built 15M row numbers, gathered four columns through them and
//! sorted the call paths to group them, 1.0 s of CPU; one pass here: ~0.1 s).
//!
//! - [`overlap_paths`]: per call path, the spans overlapping [lo, hi) (`end_ts > lo`; the
//!   ranges already stop before `ts >= hi`), their durations clipped to the window, and the
//!   self time of the path (its total minus its child paths' totals): a flame graph of a
//!   selected range. A span cut by an edge counts as one call with only its part inside.
//! - [`overlap_candidates`]: the same for a flame graph cut at a threshold: only the paths
//!   that may reach it (`cand`: those whose whole-trace total does) are summed, the others
//!   only counted (spans, distinct paths) in bitsets that stay in cache; a candidate's self
//!   time is its spans' own self times, and for a span cut by an edge its clipped time, its
//!   children's clipped times taken off by the caller (`edges`: a few per run). 0.05 s of
//!   CPU for 15M spans where summing every path costs 0.5 s (8.66M paths: a cache miss a span).
//! - [`start_groups`]: per group (a span name), the closed spans starting in the window:
//!   count, total and self durations and the longest (the statistics by state).

use rustc_hash::FxHashMap;

/// A window's call paths with spans in it, ascending path id.
#[derive(Debug, Default, PartialEq)]
pub struct Paths {
    /// Path id (index into the call tree's nodes).
    pub ids: Vec<i64>,
    /// Position of the path's parent in `ids`, -1 at a root.
    pub ppos: Vec<i64>,
    /// Spans of the path overlapping the window.
    pub calls: Vec<i64>,
    /// Their durations clipped to the window, summed.
    pub total: Vec<i64>,
    /// `total` minus the child paths' totals, at least 0.
    pub self_ns: Vec<i64>,
}

fn check_ranges(starts: &[i64], ends: &[i64], n: usize) -> Result<(), String> {
    if starts.len() != ends.len() {
        return Err("starts and ends differ in length".into());
    }
    for (&a, &b) in starts.iter().zip(ends) {
        if a < 0 || b < a || b as usize > n {
            return Err(format!("row range [{a}, {b}) outside 0..{n}"));
        }
    }
    Ok(())
}

/// Per call path, the spans in rows `[starts[k], ends[k])` with `end_ts > lo`: calls, durations
/// clipped to `[lo, hi)`, self time. `node[r]` is row r's path, `parent[p]` path p's parent
/// (-1 at a root).
#[allow(clippy::too_many_arguments)]
pub fn overlap_paths(
    node: &[i32],
    ts: &[i64],
    end_ts: &[i64],
    parent: &[i64],
    starts: &[i64],
    ends: &[i64],
    lo: i64,
    hi: i64,
) -> Result<Paths, String> {
    let n = node.len();
    if ts.len() != n || end_ts.len() != n {
        return Err("node, ts and end_ts differ in length".into());
    }
    check_ranges(starts, ends, n)?;
    let np = parent.len();
    let mut calls = vec![0i64; np];
    let mut total = vec![0i64; np];
    for (&a, &b) in starts.iter().zip(ends) {
        let (a, b) = (a as usize, b as usize);
        for r in a..b {
            let e = end_ts[r];
            if e <= lo {
                continue;
            }
            let p = node[r];
            if p < 0 || p as usize >= np {
                return Err(format!("row {r}: call path {p} outside 0..{np}"));
            }
            let p = p as usize;
            calls[p] += 1;
            total[p] += e.min(hi) - ts[r].max(lo);
        }
    }
    // Child paths' totals, then the touched paths in id order with their parent's position.
    let mut child = vec![0i64; np];
    let mut pos = vec![-1i64; np];
    let mut out = Paths::default();
    for p in 0..np {
        if calls[p] == 0 {
            continue;
        }
        let q = parent[p];
        if q >= 0 && (q as usize) < np {
            child[q as usize] += total[p];
        }
        pos[p] = out.ids.len() as i64;
        out.ids.push(p as i64);
    }
    for &p in &out.ids {
        let p = p as usize;
        let q = parent[p];
        out.ppos.push(if q >= 0 && (q as usize) < np { pos[q as usize] } else { -1 });
        out.calls.push(calls[p]);
        out.total.push(total[p]);
        out.self_ns.push((total[p] - child[p]).max(0));
    }
    Ok(out)
}

/// What [`overlap_candidates`] sums: per candidate path (in `cand` order) and overall.
#[derive(Debug, Default, PartialEq)]
pub struct Candidates {
    /// Spans of each candidate path overlapping the window.
    pub calls: Vec<i64>,
    /// Their durations clipped to the window.
    pub total: Vec<i64>,
    /// Their self times (a span cut by an edge: its clipped time, children not yet taken off).
    pub self_ns: Vec<i64>,
    /// Rows of the candidates' spans cut by an edge (`ts < lo` or `end_ts > hi`).
    pub edges: Vec<i64>,
    /// Spans overlapping the window, every path.
    pub spans: i64,
    /// Distinct paths with spans overlapping the window.
    pub paths: i64,
}

/// [`overlap_paths`] for the paths `cand` only (distinct ids below `n_paths`); see the module doc.
#[allow(clippy::too_many_arguments)]
pub fn overlap_candidates(
    node: &[i32],
    ts: &[i64],
    end_ts: &[i64],
    self_time: &[i64],
    starts: &[i64],
    ends: &[i64],
    lo: i64,
    hi: i64,
    n_paths: usize,
    cand: &[i64],
) -> Result<Candidates, String> {
    let n = node.len();
    if ts.len() != n || end_ts.len() != n || self_time.len() != n {
        return Err("node, ts, end_ts and self_time differ in length".into());
    }
    check_ranges(starts, ends, n)?;
    let words = n_paths.div_ceil(64);
    let (mut seen, mut is_cand) = (vec![0u64; words], vec![0u64; words]);
    let mut slot: FxHashMap<u32, u32> = FxHashMap::default();
    for (k, &p) in cand.iter().enumerate() {
        if p < 0 || p as usize >= n_paths {
            return Err(format!("candidate path {p} outside 0..{n_paths}"));
        }
        is_cand[p as usize >> 6] |= 1 << (p & 63);
        slot.insert(p as u32, k as u32);
    }
    let m = cand.len();
    let mut out = Candidates { calls: vec![0; m], total: vec![0; m], self_ns: vec![0; m], ..Default::default() };
    for (&a, &b) in starts.iter().zip(ends) {
        for r in a as usize..b as usize {
            let e = end_ts[r];
            if e <= lo {
                continue;
            }
            let p = node[r];
            if p < 0 || p as usize >= n_paths {
                return Err(format!("row {r}: call path {p} outside 0..{n_paths}"));
            }
            let (w, bit) = (p as usize >> 6, 1u64 << (p & 63));
            out.spans += 1;
            seen[w] |= bit;
            if is_cand[w] & bit == 0 {
                continue;
            }
            let s = slot[&(p as u32)] as usize;
            let t = ts[r];
            let clipped = e.min(hi) - t.max(lo);
            out.calls[s] += 1;
            out.total[s] += clipped;
            if t < lo || e > hi {
                out.self_ns[s] += clipped;
                out.edges.push(r as i64);
            } else {
                out.self_ns[s] += self_time[r];
            }
        }
    }
    out.paths = seen.iter().map(|w| w.count_ones() as i64).sum();
    Ok(out)
}

/// Per group, the spans in rows `[starts[k], ends[k])` whose `closed` is not 0 (all of them
/// when `closed` is None): (count, total dur, total self time, longest dur), `n_groups` each.
/// A negative group code counts in the last group (null names).
#[allow(clippy::type_complexity)]
pub fn start_groups(
    group: &[i32],
    dur: &[i64],
    self_time: &[i64],
    closed: Option<&[u8]>,
    starts: &[i64],
    ends: &[i64],
    n_groups: usize,
) -> Result<(Vec<i64>, Vec<i64>, Vec<i64>, Vec<i64>), String> {
    let n = group.len();
    if dur.len() != n || self_time.len() != n || closed.is_some_and(|c| c.len() != n) {
        return Err("group, dur, self_time and closed differ in length".into());
    }
    if n_groups == 0 {
        return Err("n_groups: expected at least 1".into());
    }
    check_ranges(starts, ends, n)?;
    let (mut count, mut total, mut selfs, mut longest) =
        (vec![0i64; n_groups], vec![0i64; n_groups], vec![0i64; n_groups], vec![0i64; n_groups]);
    for (&a, &b) in starts.iter().zip(ends) {
        for r in a as usize..b as usize {
            if closed.is_some_and(|c| c[r] == 0) {
                continue;
            }
            let g = group[r];
            let g = if g < 0 { n_groups - 1 } else { g as usize };
            if g >= n_groups {
                return Err(format!("row {r}: group {g} outside 0..{n_groups}"));
            }
            count[g] += 1;
            total[g] += dur[r];
            selfs[g] += self_time[r];
            longest[g] = longest[g].max(dur[r]);
        }
    }
    Ok((count, total, selfs, longest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_clips_at_the_edges_and_sums_children() {
        // path 0 = main (root), path 1 = main;f. Rows: main [0,100), f [10,20), f [60,90).
        let node = [0, 1, 1];
        let ts = [0, 10, 60];
        let end_ts = [100, 20, 90];
        let parent = [-1, 0];
        let p = overlap_paths(&node, &ts, &end_ts, &parent, &[0, 1], &[1, 3], 15, 70).unwrap();
        assert_eq!(p.ids, vec![0, 1]);
        assert_eq!(p.ppos, vec![-1, 0]);
        assert_eq!(p.calls, vec![1, 2]);
        assert_eq!(p.total, vec![55, 5 + 10]);
        assert_eq!(p.self_ns, vec![40, 15]);
    }

    #[test]
    fn overlap_leaves_out_spans_ending_at_the_start() {
        let p = overlap_paths(&[0, 0], &[0, 5], &[5, 9], &[-1], &[0], &[2], 5, 10).unwrap();
        assert_eq!((p.calls, p.total), (vec![1], vec![4]));
    }

    #[test]
    fn candidates_sum_like_every_path_and_list_the_cut_spans() {
        // main [0,100) self 75; f [10,20) self 10; f [60,90) self 15; window [15, 70)
        let node = [0, 1, 1];
        let (ts, end_ts, self_time) = ([0, 10, 60], [100, 20, 90], [75, 10, 15]);
        let c = overlap_candidates(&node, &ts, &end_ts, &self_time, &[0, 1], &[1, 3], 15, 70, 2, &[0]).unwrap();
        assert_eq!((c.calls, c.total, c.self_ns), (vec![1], vec![55], vec![55]));
        assert_eq!((c.edges, c.spans, c.paths), (vec![0], 3, 2));
        assert!(overlap_candidates(&node, &ts, &end_ts, &self_time, &[0], &[3], 15, 70, 2, &[2]).is_err());
    }

    #[test]
    fn bad_ranges_and_paths_are_errors() {
        assert!(overlap_paths(&[0], &[0], &[1], &[-1], &[0], &[2], 0, 1).is_err());
        assert!(overlap_paths(&[3], &[0], &[1], &[-1], &[0], &[1], 0, 1).is_err());
        assert!(start_groups(&[0], &[1], &[1], None, &[1], &[0], 1).is_err());
    }

    #[test]
    fn start_groups_skip_open_spans_and_count_nulls_last() {
        let (c, t, s, m) =
            start_groups(&[0, -1, 0, 1], &[5, 7, 9, 1], &[1, 7, 2, 1], Some(&[1, 1, 0, 1]), &[0], &[4], 3).unwrap();
        assert_eq!(c, vec![1, 1, 1]);
        assert_eq!(t, vec![5, 1, 7]);
        assert_eq!(s, vec![1, 1, 7]);
        assert_eq!(m, vec![5, 1, 7]);
    }
}
