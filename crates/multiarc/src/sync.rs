//! The atomics the cache uses: std's normally, loom's under `cfg(loom)` so the
//! hold/release/evict protocol can be model-checked.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
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
