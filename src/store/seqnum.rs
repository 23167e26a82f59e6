//! Per-producer sequence numbers of one trace.
//!
//! Owns the counters behind the stored `seq` column: every producer numbers its events
//! 0, 1, 2, ... in the order they were appended, continuing from what the trace holds.
//! The store's writer seeds one [`SeqCounters`] per trace from the stored maxima; the
//! line-protocol decoder numbers its rows with the same counters while it builds a batch,
//! so a decoded batch arrives in the stored layout and is appended without another pass.

use rustc_hash::FxHashMap as FxMap;

/// Next sequence number per producer id.
#[derive(Debug, Default)]
pub struct SeqCounters {
    next: FxMap<i32, i64>,
}

impl SeqCounters {
    /// Counters that start every producer at 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes `producer` continue at `next` at least (a stored maximum + 1).
    pub fn seed(&mut self, producer: i32, next: i64) {
        let e = self.next.entry(producer).or_insert(0);
        *e = (*e).max(next);
    }

    /// The number the next event of `producer` gets.
    pub fn peek(&self, producer: i32) -> i64 {
        self.next.get(&producer).copied().unwrap_or(0)
    }

    /// The next number of `producer`, used up.
    #[inline]
    pub fn take(&mut self, producer: i32) -> i64 {
        let e = self.next.entry(producer).or_insert(0);
        *e += 1;
        *e - 1
    }

    /// Numbers `producers` (one per row, in row order): each row gets its producer's next number.
    pub fn assign(&mut self, producers: &[i32]) -> Vec<i64> {
        let mut out = Vec::with_capacity(producers.len());
        let Some(&first) = producers.first() else { return out };
        if producers.iter().all(|&p| p == first) {
            // One producer (an agent's batch): one counter, one range.
            let base = self.peek(first);
            out.extend(base..base + producers.len() as i64);
            self.next.insert(first, base + producers.len() as i64);
            return out;
        }
        // Runs of one producer are common (several agents' batches glued): the counter of
        // the current run is held until the producer changes.
        let mut cur = first;
        let mut n = self.peek(first);
        for &p in producers {
            if p != cur {
                self.next.insert(cur, n);
                cur = p;
                n = self.peek(p);
            }
            out.push(n);
            n += 1;
        }
        self.next.insert(cur, n);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_producer_is_a_range_continuing_the_seed() {
        let mut c = SeqCounters::new();
        c.seed(7, 10);
        assert_eq!(c.assign(&[7, 7, 7]), vec![10, 11, 12]);
        assert_eq!(c.assign(&[7]), vec![13]);
        assert_eq!(c.peek(7), 14);
        assert_eq!(c.peek(8), 0);
    }

    #[test]
    fn interleaved_producers_number_in_row_order() {
        let mut c = SeqCounters::new();
        c.seed(2, 5);
        assert_eq!(c.assign(&[1, 2, 1, 1, 2, 3]), vec![0, 5, 1, 2, 6, 0]);
        assert_eq!(c.assign(&[3, 1]), vec![1, 3]);
        assert_eq!((c.take(3), c.take(9)), (2, 0));
        assert_eq!((c.peek(1), c.peek(2), c.peek(3)), (4, 7, 3));
    }

    #[test]
    fn seed_never_lowers_a_counter() {
        let mut c = SeqCounters::new();
        c.assign(&[4, 4, 4]);
        c.seed(4, 1);
        assert_eq!(c.peek(4), 3);
        assert!(c.assign(&[]).is_empty());
    }
}
