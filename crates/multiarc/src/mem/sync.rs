//! The atomics the cache uses: std's normally, loom's under `cfg(loom)` so the
//! hold/release/evict protocol can be model-checked; and poison-ignoring locking.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

/// A spin-wait hint (loom: a yield, so that models make progress).
#[cfg(loom)]
pub(crate) fn spin_loop() {
    loom::thread::yield_now();
}

/// A spin-wait hint.
#[cfg(not(loom))]
#[inline]
pub(crate) fn spin_loop() {
    std::hint::spin_loop();
}

/// Asks the processor to start fetching the cache line at `at` now, for a
/// use a little later: a hint, which reads nothing and changes nothing (a
/// no-op where there is no stable prefetch instruction, and under loom).
/// Any address will do, even a dangling one: a prefetch never faults.
#[inline]
pub(crate) fn prefetch<T>(at: *const T) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    // SAFETY: SSE, which the instruction needs, is part of every x86-64
    // processor; a prefetch reads no memory and never faults.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(at as *const i8)
    };
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    let _ = at;
}

/// Locking that ignores poisoning: the library's mutexes guard state that
/// every critical section leaves consistent (or that is only ever replaced
/// whole), so a panic while one was held must not make later callers panic
/// (the lock crate's `poison` module, tested there).
pub(crate) use crate::lock::poison::{unpoisoned, LockUnpoisoned};
