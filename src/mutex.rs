//! Locking that outlives a panicking holder.
//!
//! Owns the one `lock()` every native module uses. A mutex whose holder panicked is
//! poisoned; we take its guard anyway, because every state behind our mutexes is updated
//! only once its checks passed (a line-protocol line is checked before it is recorded, a
//! commit's state is advanced after its fsync returned, a connection is listed after it
//! was accepted), so a panic never leaves one half-updated. Unwrapping instead would turn
//! one panicked request into every later request failing.

use std::sync::{Mutex, MutexGuard};

/// The guard of `m`, also when an earlier holder panicked (see the module docs).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
