//! Recycling of column allocations between Arrow batches.
//!
//! Owns [`ColumnPool`]: `Vec<i64>` columns handed to Arrow without a copy and returned
//! to the pool when the last Arrow (or pyarrow) reference to them is dropped.
//!
//! Why: a generator or parser writes ~70 bytes per event into fresh columns. Once a
//! column passes glibc's mmap threshold (128 KiB at first, i.e. batches of a few tens of
//! thousands of events), every batch is a new mapping and every 4 KiB page of it costs a
//! page fault (~1 µs) the first time it is written; freeing the batch unmaps it again.
//! Measured on the TOD generator with 1M-event batches: 29 M events/s with fresh
//! columns, the page faults taking a third of the time. A consumer that drops its
//! batches before asking for the next ones (ingest into the store does) gets the same
//! warm pages back instead. A consumer that keeps them simply finds the pool empty.

use std::ptr::NonNull;
use std::sync::{Arc, Mutex, Weak};

use arrow_buffer::{Buffer, ScalarBuffer};

/// Most columns the pool keeps, whatever their size.
const MAX_COLUMNS: usize = 64;
/// Most bytes of capacity the pool keeps (it never holds more than this idle).
const MAX_BYTES: usize = 256 << 20;

#[derive(Debug, Default)]
struct Shelf {
    columns: Vec<Vec<i64>>,
    bytes: usize,
}

/// A bounded pool of `Vec<i64>` column allocations. Cheap to clone (shared).
#[derive(Clone, Debug, Default)]
pub struct ColumnPool {
    shelf: Arc<Mutex<Shelf>>,
}

impl ColumnPool {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty column with room for at least `capacity` values: the smallest pooled
    /// allocation that fits, else a new one.
    pub fn take(&self, capacity: usize) -> Vec<i64> {
        let mut shelf = self.shelf.lock().unwrap_or_else(|e| e.into_inner());
        let best = shelf
            .columns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.capacity() >= capacity)
            .min_by_key(|(_, c)| c.capacity())
            .map(|(i, _)| i);
        match best {
            Some(i) => {
                let mut col = shelf.columns.swap_remove(i);
                shelf.bytes -= col.capacity() * 8;
                col.clear();
                col
            }
            None => Vec::with_capacity(capacity),
        }
    }

    /// Number of pooled columns (for tests and diagnostics).
    pub fn len(&self) -> usize {
        self.shelf.lock().unwrap_or_else(|e| e.into_inner()).columns.len()
    }

    /// True when no column is pooled.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `col` as an Arrow buffer that returns its allocation to this pool when dropped.
    pub fn share(&self, col: Vec<i64>) -> ScalarBuffer<i64> {
        let len = col.len();
        if col.capacity() == 0 {
            return ScalarBuffer::from(col);
        }
        let mut owner = PooledColumn { col, pool: Arc::downgrade(&self.shelf) };
        let ptr = NonNull::new(owner.col.as_mut_ptr().cast::<u8>()).expect("allocated Vec has a non-null pointer");
        // SAFETY: `ptr` points at `len` initialised i64s owned by `owner.col`; moving the
        // Vec into the Arc below does not move its heap allocation, and the Arc keeps it
        // alive (and unmodified: nothing else can reach it) as long as the buffer lives.
        let buffer = unsafe { Buffer::from_custom_allocation(ptr, len * 8, Arc::new(owner)) };
        ScalarBuffer::new(buffer, 0, len)
    }
}

/// Owner of a column lent to Arrow: puts the allocation back on the shelf on drop.
struct PooledColumn {
    col: Vec<i64>,
    pool: Weak<Mutex<Shelf>>,
}

impl Drop for PooledColumn {
    fn drop(&mut self) {
        let Some(shelf) = self.pool.upgrade() else { return };
        let mut shelf = shelf.lock().unwrap_or_else(|e| e.into_inner());
        let bytes = self.col.capacity() * 8;
        if shelf.columns.len() < MAX_COLUMNS && shelf.bytes + bytes <= MAX_BYTES {
            shelf.bytes += bytes;
            shelf.columns.push(std::mem::take(&mut self.col));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Int64Array;

    #[test]
    fn columns_come_back_when_arrow_drops_them() {
        let pool = ColumnPool::new();
        let mut col = pool.take(1000);
        col.extend(0..1000);
        let ptr = col.as_ptr();
        let arr = Int64Array::new(pool.share(col), None);
        assert_eq!(arr.len(), 1000);
        assert_eq!(arr.value(999), 999);
        let copy = arr.slice(10, 5);
        drop(arr);
        assert!(pool.is_empty(), "returned while a slice still refers to it");
        assert_eq!(copy.value(0), 10);
        drop(copy);
        assert_eq!(pool.len(), 1);
        let again = pool.take(500);
        assert_eq!(again.as_ptr(), ptr, "the same allocation is reused");
        assert!(again.is_empty() && again.capacity() >= 1000);
        assert!(pool.is_empty());
    }

    #[test]
    fn take_picks_the_smallest_fitting_column() {
        let pool = ColumnPool::new();
        for cap in [100, 10_000, 1_000] {
            let mut c = Vec::with_capacity(cap);
            c.push(1);
            drop(Int64Array::new(pool.share(c), None));
        }
        assert_eq!(pool.len(), 3);
        assert!((1_000..10_000).contains(&pool.take(500).capacity()));
        assert!(pool.take(20_000).capacity() >= 20_000);
        assert_eq!(pool.len(), 2);
    }

    #[test]
    fn the_pool_is_bounded_and_may_die_first() {
        let pool = ColumnPool::new();
        let arrays: Vec<_> = (0..MAX_COLUMNS + 10).map(|i| Int64Array::new(pool.share(vec![i as i64]), None)).collect();
        drop(arrays);
        assert_eq!(pool.len(), MAX_COLUMNS);
        let arr = Int64Array::new(pool.share(vec![1, 2, 3]), None);
        drop(pool);
        assert_eq!(arr.values().as_ref(), &[1, 2, 3]);
        drop(arr); // frees the allocation itself, no pool to return to
    }
}
