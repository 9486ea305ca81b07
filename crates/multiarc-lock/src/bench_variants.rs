//! Lock variants that exist only to be measured against [`crate::Mutex`] by
//! `multiarc lockbench`; the cache does not use them. Compiled with the
//! `bench-variants` feature only.

use crate::futex::Futex;
use crate::platform::PlatformFutex;
use crate::sync::{spin_hint, AtomicU32, Ordering::*};

/// How many times [`SpinWakeAllMutex`] re-checks a held lock before sleeping.
pub const SPIN_WAKE_ALL_SPINS: u32 = 100;

const FREE: u32 = 0;
const HELD: u32 = 1;
const CONTENDED: u32 = 2;

/// The spin-then-sleep mutex of the field report's first version: a
/// contended locker spins [`SPIN_WAKE_ALL_SPINS`] times before sleeping, and
/// unlocking a contended lock wakes *all* sleepers, who race for it again.
/// 4 bytes, no statistics.
pub type SpinWakeAllMutex<T> = lock_api::Mutex<RawSpinWakeAll, T>;

/// Exclusive access to a [`SpinWakeAllMutex`]'s data; unlocks when dropped.
pub type SpinWakeAllGuard<'a, T> = lock_api::MutexGuard<'a, RawSpinWakeAll, T>;

/// The raw lock of [`SpinWakeAllMutex`].
pub struct RawSpinWakeAll {
    word: AtomicU32,
}

impl RawSpinWakeAll {
    #[cold]
    fn lock_slow(&self) {
        for _ in 0..SPIN_WAKE_ALL_SPINS {
            spin_hint();
            if self.word.load(Relaxed) == FREE
                && self
                    .word
                    .compare_exchange(FREE, HELD, Acquire, Relaxed)
                    .is_ok()
            {
                return;
            }
        }
        while self.word.swap(CONTENDED, Acquire) != FREE {
            PlatformFutex::wait(&self.word, CONTENDED);
        }
    }
}

// SAFETY: the lock is taken only by a compare-exchange or swap (Acquire)
// that finds the word FREE and leaves it non-FREE, and released by a swap
// to FREE (Release): mutual exclusion with acquire/release ordering. Nothing
// panics; the lock holds no pointers, so moving or dropping it (or
// forgetting a guard) while held is safe.
unsafe impl lock_api::RawMutex for RawSpinWakeAll {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawSpinWakeAll = RawSpinWakeAll {
        word: AtomicU32::new(FREE),
    };

    type Guard = lock_api::GuardNoSend;

    #[inline]
    fn lock(&self) -> Self::Guard {
        if self
            .word
            .compare_exchange(FREE, HELD, Acquire, Relaxed)
            .is_err()
        {
            self.lock_slow();
        }
        lock_api::GuardNoSend::new()
    }

    fn try_lock(&self) -> Option<Self::Guard> {
        self.word
            .compare_exchange(FREE, HELD, Acquire, Relaxed)
            .is_ok()
            .then(lock_api::GuardNoSend::new)
    }

    unsafe fn unlock(&self, _guard: Self::Guard) {
        if self.word.swap(FREE, Release) == CONTENDED {
            PlatformFutex::wake_all(&self.word);
        }
    }

    fn is_locked(&self) -> bool {
        self.word.load(Relaxed) != FREE
    }
}
