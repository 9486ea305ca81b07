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

/// The longest wait between two looks, as a power of two: 2^10 `pause`
/// instructions (about 10 µs on the 2-vCPU Intel Xeon VM measured, where a
/// `pause` takes 10 ns).
const MAX_PAUSES_LOG2: u32 = 10;

/// The first step that yields the CPU before its pauses (after 2, 4 and 8
/// pauses).
#[cfg(not(loom))]
const YIELD_STEP: u32 = 3;

/// The first step whose wait is long enough (2^8 pauses) that reading the
/// clock beside it costs nothing that matters; the budget is checked from
/// there on.
#[cfg(not(loom))]
const CLOCKED_STEP: u32 = 7;

/// How long a contended locker spins at most before it sleeps: about what a
/// sleep and a wake-up cost, so that spinning never costs more than twice
/// what sleeping at once would (the classic competitive rule). A futex
/// hand-over (`FUTEX_WAKE` until the woken thread runs) took 13-27 µs on the
/// 2-vCPU Intel Xeon VM measured.
#[cfg(not(loom))]
pub(crate) const SPIN_BUDGET: std::time::Duration = std::time::Duration::from_micros(20);

/// The `pause`s before look `step` (from 0): 2, 4, 8, ... up to
/// 2^[`MAX_PAUSES_LOG2`].
fn pauses_before_look(step: u32) -> u32 {
    2u32 << step.min(MAX_PAUSES_LOG2 - 1)
}

/// The waits between a contended locker's looks at the lock before it
/// sleeps: exponential backoff. The waits double from 2 `pause`
/// instructions up to 2^[`MAX_PAUSES_LOG2`]; from the fourth look on, each
/// wait first gives the CPU away (`sched_yield`), so that with more threads
/// than CPUs a holder preempted on this one can run. The locker stops after
/// [`crate::spin_count`] looks or once [`SPIN_BUDGET`] has passed, whichever
/// comes first. Each look takes the lock's cache line from its holder,
/// whose next acquisition then misses; looks that grow rarer let a holder
/// that re-locks keep its line. On the 2-vCPU Intel VM, against the earlier
/// schedule (looks after 2, 4 and 8 pauses, then after each of up to seven
/// bare `sched_yield`s), `lockbench` rose from 27.3 / 43.1 / 46.2 to
/// 54.0 / 55.3 / 53.4 Macq/s at 2 / 4 / 32 threads, and the file layer's
/// lock workloads at 2 and 32 threads stayed within noise or gained
/// (docs/BENCHMARKS.md).
pub(crate) struct SpinWait {
    step: u32,
    limit: u32,
    #[cfg(not(loom))]
    start: Option<std::time::Instant>,
}

impl SpinWait {
    /// A new wait with the current spin count.
    #[inline]
    pub(crate) fn new() -> SpinWait {
        SpinWait {
            step: 0,
            limit: crate::spin_count(),
            #[cfg(not(loom))]
            start: None,
        }
    }

    /// Waits before the next look at the lock; returns false, without
    /// waiting, once the spin count or the budget is spent: time to sleep.
    #[inline]
    pub(crate) fn spin(&mut self) -> bool {
        if self.step >= self.limit {
            return false;
        }
        #[cfg(not(loom))]
        if self.step >= CLOCKED_STEP {
            let now = std::time::Instant::now();
            let start = *self.start.get_or_insert(now);
            if now.saturating_duration_since(start) >= SPIN_BUDGET {
                return false;
            }
        }
        // Under loom one yield stands for the pauses.
        let pauses = if cfg!(loom) {
            1
        } else {
            pauses_before_look(self.step)
        };
        // From the fourth look on, give the CPU away first: with more
        // threads than CPUs the holder may be preempted on this one.
        #[cfg(not(loom))]
        if self.step >= YIELD_STEP {
            std::thread::yield_now();
        }
        for _ in 0..pauses {
            spin_hint();
        }
        self.step += 1;
        true
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_waits_double_up_to_the_cap_and_stop_at_the_count() {
        let waits: Vec<u32> = (0..14).map(pauses_before_look).collect();
        assert_eq!(&waits[..4], [2, 4, 8, 16]);
        assert_eq!(waits[9], 1024);
        assert_eq!(waits[13], 1024);
        let mut spin = SpinWait {
            step: 0,
            limit: 3,
            start: None,
        };
        assert!(spin.spin() && spin.spin() && spin.spin());
        assert!(!spin.spin(), "the count is spent after three looks");
    }

    #[test]
    fn the_budget_ends_a_long_spin() {
        let mut spin = SpinWait {
            step: 0,
            limit: u32::MAX,
            start: None,
        };
        let begun = std::time::Instant::now();
        let mut looks = 0u32;
        while spin.spin() {
            looks += 1;
            assert!(looks < 1_000_000, "a spin without end");
        }
        // At least the steps before the clock is read; and it stopped after
        // the budget, not much later (generously: on a loaded machine each
        // yield may give away a whole time slice).
        assert!(looks >= CLOCKED_STEP);
        assert!(begun.elapsed() >= SPIN_BUDGET);
        assert!(begun.elapsed() < std::time::Duration::from_secs(2));
    }
}
