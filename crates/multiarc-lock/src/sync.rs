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

/// How many of a [`SpinWait`]'s steps pause (2, 4, then 8 `pause`
/// instructions); the later ones yield the CPU.
const PAUSE_STEPS: u32 = 3;

/// The waits between a contended locker's looks at the lock before it
/// sleeps, after `parking_lot`'s: the first [`PAUSE_STEPS`] steps are 2, 4
/// and 8 `pause` instructions (a look every 50 to 200 ns on the 2-vCPU EPYC
/// measured, where a `pause` takes about 24 ns; the holder keeps the lock's
/// cache line between looks), the
/// later ones a `sched_yield`, which lets a holder that was preempted run
/// when there are more threads than CPUs. After [`crate::spin_count`] steps
/// the locker goes to sleep.
pub(crate) struct SpinWait {
    step: u32,
    limit: u32,
}

impl SpinWait {
    /// A new wait with the current spin count.
    #[inline]
    pub(crate) fn new() -> SpinWait {
        SpinWait {
            step: 0,
            limit: crate::spin_count(),
        }
    }

    /// Waits before the next look at the lock; returns false, without
    /// waiting, once the spin count is spent: time to sleep.
    #[inline]
    pub(crate) fn spin(&mut self) -> bool {
        if self.step >= self.limit {
            return false;
        }
        if self.step < PAUSE_STEPS {
            // Under loom one yield stands for the pauses.
            let pauses = if cfg!(loom) { 1 } else { 2u32 << self.step };
            for _ in 0..pauses {
                spin_hint();
            }
        } else {
            #[cfg(not(loom))]
            std::thread::yield_now();
            #[cfg(loom)]
            loom::thread::yield_now();
        }
        self.step += 1;
        true
    }
}
