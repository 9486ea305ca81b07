//! The atomics the locks are built on: `std`'s, or loom's under `--cfg loom`
//! so that loom can explore the interleavings of the lock state machines.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::AtomicU32;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::AtomicU32;
pub(crate) use std::sync::atomic::Ordering;

/// Called once per iteration of a spin-wait loop. Under loom it yields, so
/// that the model checker lets the lock holder run.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}
