//! The column buffers of a batch (or of a few batches built together), carved from one mapping.
//!
//! Owns [`SlabPool`] and [`Slab`]: one anonymous mapping, backed by 2 MiB transparent huge pages
//! where the kernel has them (`madvise(MADV_HUGEPAGE)`: this machine's THP mode is "madvise"),
//! holds every column of the batches built from it. Each column is handed to Arrow as a buffer
//! over its part of the mapping, without a copy; when the last of them is dropped the mapping goes
//! back to the pool (bounded) for the next batches, or is unmapped.
//!
//! Why: a strace import keeps its batches from their build until their checkpoint is written,
//! which for a few million lines is most of the import, so nearly every column was fresh memory
//! (the import's fault count hardly grew with the file: 92K at 3M lines, 112K at 12M). ~50K of
//! its ~95K page faults were the builder's (`perf record -e page-faults`), each ~2 µs of kernel
//! time (the fault, the memory-cgroup charge, the zeroing: faults were 15 % of the command's CPU),
//! and ~30K more were the parser's row and string buffers ([`advise_huge`], rows.rs). A huge page
//! is one fault for 512 pages. Columns pooled one by one (colpool.rs) came back too late to help.
//! Measured on the 3M-line many-process log, interleaved with the code before (12 runs each,
//! load 1.5-1.7): `tracehouse import strace` median 0.740 -> 0.630 s, 1.285 -> 1.110 CPU-s,
//! 93K -> 20K minor faults; the parse alone (`examples/strace_speed.rs`) 0.43-0.45 -> 0.35-0.37 s,
//! 47-53K -> 7.8K faults. The builder also writes each column in place instead of pushing to
//! growing vectors, and validity bits straight into bitmaps.

use std::ptr::NonNull;
use std::sync::{Arc, Mutex, Weak};

use arrow_buffer::Buffer;

/// A transparent huge page.
const HUGE: usize = 2 << 20;
/// Alignment of every buffer carved (Arrow's own allocations are 64-byte aligned).
const ALIGN: usize = 64;
/// Most idle mappings kept, and most bytes of them.
const MAX_IDLE: usize = 8;
const MAX_IDLE_BYTES: usize = 256 << 20;

/// Memory of one slab: a huge-page-aligned anonymous mapping, or (when mmap failed) a heap
/// allocation.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    heap: bool,
}

// SAFETY: a Mapping is plain memory owned by whoever holds it; nothing in it is thread-bound.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    /// At least `bytes` of zeroed memory: a whole number of huge pages, or for less than one
    /// (a small batch, which a huge page would make 2 MiB of memory) an ordinary allocation.
    fn new(bytes: usize) -> Mapping {
        if bytes < HUGE {
            return Mapping::on_heap(bytes.max(1).div_ceil(ALIGN) * ALIGN);
        }
        let len = bytes.div_ceil(HUGE) * HUGE;
        // Mapped one huge page longer, then trimmed, so that the start is 2 MiB aligned: only
        // aligned 2 MiB ranges can be huge pages.
        // SAFETY: an anonymous private mapping of len + HUGE bytes at an address of the kernel's
        // choosing; the parts unmapped below are ours and nothing refers to them.
        unsafe {
            let raw = libc::mmap(
                std::ptr::null_mut(),
                len + HUGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if raw == libc::MAP_FAILED {
                return Mapping::on_heap(len);
            }
            let start = (raw as usize).div_ceil(HUGE) * HUGE;
            let head = start - raw as usize;
            if head > 0 {
                libc::munmap(raw, head);
            }
            if HUGE - head > 0 {
                libc::munmap((start + len) as *mut libc::c_void, HUGE - head);
            }
            // (advice only: without THP the pages are ordinary ones)
            libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
            Mapping { ptr: NonNull::new_unchecked(start as *mut u8), len, heap: false }
        }
    }

    fn on_heap(len: usize) -> Mapping {
        let layout = std::alloc::Layout::from_size_align(len, ALIGN).expect("slab layout");
        // SAFETY: len > 0 (callers round up from at least 1).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        Mapping { ptr, len, heap: true }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what `new` or `on_heap` made, released once.
        unsafe {
            if self.heap {
                std::alloc::dealloc(self.ptr.as_ptr(), std::alloc::Layout::from_size_align_unchecked(self.len, ALIGN));
            } else {
                libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len);
            }
        }
    }
}

/// Asks for huge pages under the 2 MiB-aligned part of `bytes` bytes at `ptr` (memory this
/// process allocated and has not touched yet: a fresh big `Vec`, which glibc maps on its own).
/// Advice only; a no-op for less than an aligned huge page.
pub fn advise_huge(ptr: *const u8, bytes: usize) {
    let start = (ptr as usize).div_ceil(HUGE) * HUGE;
    let end = (ptr as usize + bytes) / HUGE * HUGE;
    if end > start {
        // SAFETY: madvise changes no memory; the range lies inside the caller's allocation.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

#[derive(Default)]
struct Idle {
    maps: Vec<Mapping>,
    bytes: usize,
}

/// A bounded pool of slab mappings. Cheap to clone (shared).
#[derive(Clone, Default)]
pub struct SlabPool {
    idle: Arc<Mutex<Idle>>,
}

impl SlabPool {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// A slab for `layout`'s parts: the smallest idle mapping that fits, else a new one. Its
    /// memory is initialised (zeroes, or what an earlier batch left): write every byte a
    /// buffer exposes.
    pub fn take(&self, layout: &SlabLayout) -> Slab {
        let bytes = layout.total;
        let reuse = {
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            let best = idle.maps.iter().enumerate().filter(|(_, m)| m.len >= bytes).min_by_key(|(_, m)| m.len);
            best.map(|(i, _)| i).map(|i| {
                let m = idle.maps.swap_remove(i);
                idle.bytes -= m.len;
                m
            })
        };
        let map = reuse.unwrap_or_else(|| Mapping::new(bytes));
        Slab { map, used: bytes, pool: Arc::downgrade(&self.idle) }
    }

    /// Idle mappings held (for tests).
    pub fn idle(&self) -> usize {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).maps.len()
    }
}

/// A part of a [`Slab`]: `bytes` bytes at offset `off` (64-byte aligned).
#[derive(Clone, Copy, Debug)]
pub struct Part {
    off: usize,
    bytes: usize,
}

impl Part {
    /// Its length in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// Sizes of the parts to carve, summed before the slab is taken.
#[derive(Default)]
pub struct SlabLayout {
    total: usize,
}

impl SlabLayout {
    /// Room for `n` values of `T` (64-byte aligned).
    pub fn part<T: Copy>(&mut self, n: usize) -> Part {
        let off = self.total.div_ceil(ALIGN) * ALIGN;
        let bytes = n * std::mem::size_of::<T>();
        self.total = off + bytes;
        Part { off, bytes }
    }
}

/// A slab being written: parts laid out by a [`SlabLayout`] are filled through [`Slab::ptr`],
/// then the slab is frozen and its parts handed to Arrow ([`Frozen::buffer`]).
pub struct Slab {
    map: Mapping,
    /// Bytes of its layout (at most the mapping's length).
    used: usize,
    pool: Weak<Mutex<Idle>>,
}

impl Slab {
    /// Where `part` starts, for writing `part.bytes / size_of::<T>()` values of `T`.
    pub fn ptr<T: Copy>(&mut self, part: Part) -> *mut T {
        assert!(part.off + part.bytes <= self.used && part.off.is_multiple_of(std::mem::align_of::<T>()));
        // SAFETY: inside the mapping (checked against `used`, which `take` made fit it).
        unsafe { self.map.ptr.as_ptr().add(part.off) as *mut T }
    }

    /// The slab read-only, shared by the buffers made from it.
    pub fn freeze(self) -> Frozen {
        let Slab { map, pool, .. } = self;
        Frozen(Arc::new(Owner { map: Some(map), pool }))
    }
}

/// A filled slab; its mapping returns to the pool when the last buffer over it is dropped.
#[derive(Clone)]
pub struct Frozen(Arc<Owner>);

impl Frozen {
    /// `part` as an Arrow buffer (no copy).
    pub fn buffer(&self, part: Part) -> Buffer {
        let map = self.0.map.as_ref().expect("a frozen slab keeps its mapping");
        assert!(part.off + part.bytes <= map.len);
        // SAFETY: the part lies inside the mapping, which lives (unchanged: nothing writes a
        // frozen slab) as long as the Arc this buffer holds.
        unsafe {
            let ptr = NonNull::new_unchecked(map.ptr.as_ptr().add(part.off));
            Buffer::from_custom_allocation(ptr, part.bytes, self.0.clone())
        }
    }
}

struct Owner {
    map: Option<Mapping>,
    pool: Weak<Mutex<Idle>>,
}

impl std::fmt::Debug for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "slab of {} bytes", self.map.as_ref().map_or(0, |m| m.len))
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        let (Some(map), Some(pool)) = (self.map.take(), self.pool.upgrade()) else { return };
        let mut idle = pool.lock().unwrap_or_else(|e| e.into_inner());
        if idle.maps.len() < MAX_IDLE && idle.bytes + map.len <= MAX_IDLE_BYTES {
            idle.bytes += map.len;
            idle.maps.push(map);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Int64Array;
    use arrow_buffer::ScalarBuffer;

    fn filled(pool: &SlabPool, n: usize, v: i64) -> (Int64Array, usize) {
        let mut layout = SlabLayout::default();
        let _pad = layout.part::<u8>(3); // the next part still starts aligned
        let part = layout.part::<i64>(n);
        let mut slab = pool.take(&layout);
        let p = slab.ptr::<i64>(part);
        for i in 0..n {
            // SAFETY: n values fit the part.
            unsafe { p.add(i).write(v + i as i64) };
        }
        let addr = p as usize;
        let frozen = slab.freeze();
        (Int64Array::new(ScalarBuffer::new(frozen.buffer(part), 0, n), None), addr)
    }

    #[test]
    fn parts_are_aligned_and_come_back_to_the_pool() {
        let pool = SlabPool::new();
        let (a, addr) = filled(&pool, 1000, 7);
        assert_eq!(addr % ALIGN, 0);
        assert_eq!((a.value(0), a.value(999)), (7, 1006));
        let slice = a.slice(10, 3);
        drop(a);
        assert_eq!(pool.idle(), 0, "returned while a slice still refers to it");
        assert_eq!(slice.value(0), 17);
        drop(slice);
        assert_eq!(pool.idle(), 1);
        let (b, addr2) = filled(&pool, 500, 1);
        assert_eq!(addr2, addr, "the same mapping is reused");
        assert_eq!(b.value(499), 500);
        assert_eq!(pool.idle(), 0);
    }

    #[test]
    fn a_slab_gives_only_the_parts_of_its_layout() {
        let pool = SlabPool::new();
        let mut layout = SlabLayout::default();
        let part = layout.part::<i64>(HUGE); // 16 MiB: a bigger mapping than one huge page
        let mut bigger = SlabLayout { total: layout.total };
        let beyond = bigger.part::<i64>(1);
        let mut slab = pool.take(&layout);
        let p = slab.ptr::<i64>(part);
        // SAFETY: the last value of the part.
        unsafe { p.add(HUGE - 1).write(5) };
        let r = std::panic::catch_unwind(move || slab.ptr::<i64>(beyond) as usize);
        assert!(r.is_err(), "a part past the layout");
    }

    #[test]
    fn the_pool_is_bounded_and_may_die_first() {
        let pool = SlabPool::new();
        let arrays: Vec<_> = (0..MAX_IDLE + 3).map(|i| filled(&pool, 10, i as i64).0).collect();
        drop(arrays);
        assert_eq!(pool.idle(), MAX_IDLE);
        let (a, _) = filled(&pool, 10, 3);
        drop(pool);
        assert_eq!(a.value(9), 12);
        drop(a); // unmapped, no pool to return to
    }
}
