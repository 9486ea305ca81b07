//! The atomics the locks are built on: `std`'s, or loom's under `--cfg loom`
//! so that loom can explore the interleavings of the lock state machines.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::AtomicU32;
pub(crate) use std::sync::atomic::Ordering;

/// Under loom: a loom `AtomicU32`, created by [`AtomicU32::new_now`] or, in
/// a `const` context, on first use (`lock_api`'s `RawMutex::INIT` and
/// `RawRwLock::INIT` are constants; loom's atomics have no `const fn new`).
/// Loom runs a model's threads one at a time on one OS thread, and creating
/// a loom atomic is not a scheduling point, so the `OnceLock` never blocks.
/// Loom requires an atomic's creation to happen-before every access, which
/// a creation on first use in some thread does not guarantee: that is why
/// the crate's `Mutex::new` and `RwLock::new` under loom (`loom_types`)
/// create the atomics at once.
#[cfg(loom)]
pub(crate) struct AtomicU32 {
    init: u32,
    atomic: std::sync::OnceLock<loom::sync::atomic::AtomicU32>,
}

#[cfg(loom)]
impl AtomicU32 {
    /// An atomic holding `init` once first used.
    pub(crate) const fn new(init: u32) -> Self {
        AtomicU32 {
            init,
            atomic: std::sync::OnceLock::new(),
        }
    }

    /// An atomic holding `init`, created now: a lock created this way may be
    /// used by threads that do not happen-after its first use.
    pub(crate) fn new_now(init: u32) -> Self {
        AtomicU32 {
            init,
            atomic: std::sync::OnceLock::from(loom::sync::atomic::AtomicU32::new(init)),
        }
    }
}

#[cfg(loom)]
impl std::ops::Deref for AtomicU32 {
    type Target = loom::sync::atomic::AtomicU32;

    fn deref(&self) -> &Self::Target {
        self.atomic
            .get_or_init(|| loom::sync::atomic::AtomicU32::new(self.init))
    }
}

/// Called once per iteration of a spin-wait loop. Under loom it yields, so
/// that the model checker lets the lock holder run.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}
