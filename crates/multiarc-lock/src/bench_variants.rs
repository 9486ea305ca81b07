//! Lock variants that exist only to be measured against [`super::Mutex`] by
//! `multiarc lockbench`; the cache does not use them.

use crate::futex::{Futex, PlatformFutex};
use crate::sync::{spin_hint, AtomicU32, Ordering::*};
use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

/// How many times [`SpinWakeAllMutex`] re-checks a held lock before sleeping.
pub const SPIN_WAKE_ALL_SPINS: u32 = 100;

const FREE: u32 = 0;
const HELD: u32 = 1;
const CONTENDED: u32 = 2;

/// The spin-then-sleep mutex of the field report's first version: a
/// contended locker spins [`SPIN_WAKE_ALL_SPINS`] times before sleeping, and
/// unlocking a contended lock wakes *all* sleepers, who race for it again.
/// 4 bytes, no statistics.
pub struct SpinWakeAllMutex<T: ?Sized> {
    word: AtomicU32,
    data: UnsafeCell<T>,
}

// SAFETY: as for `super::Mutex`: one thread at a time gets access to `T`.
unsafe impl<T: ?Sized + Send> Send for SpinWakeAllMutex<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send> Sync for SpinWakeAllMutex<T> {}

/// Exclusive access to a [`SpinWakeAllMutex`]'s data; unlocks when dropped.
#[must_use = "the lock is released at once if the guard is not kept"]
pub struct SpinWakeAllGuard<'a, T: ?Sized> {
    mutex: &'a SpinWakeAllMutex<T>,
    not_send: PhantomData<*const ()>,
}

impl<T> SpinWakeAllMutex<T> {
    /// A new unlocked mutex holding `value`.
    pub fn new(value: T) -> Self {
        SpinWakeAllMutex {
            word: AtomicU32::new(FREE),
            data: UnsafeCell::new(value),
        }
    }

    /// Consumes the mutex and returns its data.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: ?Sized> SpinWakeAllMutex<T> {
    /// Acquires the lock: spin, then sleep.
    #[inline]
    pub fn lock(&self) -> SpinWakeAllGuard<'_, T> {
        if self
            .word
            .compare_exchange(FREE, HELD, Acquire, Relaxed)
            .is_err()
        {
            self.lock_slow();
        }
        SpinWakeAllGuard {
            mutex: self,
            not_send: PhantomData,
        }
    }

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

impl<T: ?Sized> Deref for SpinWakeAllGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard proves this thread holds the lock.
        unsafe { &*self.mutex.data.get() }
    }
}

impl<T: ?Sized> DerefMut for SpinWakeAllGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard proves exclusive access.
        unsafe { &mut *self.mutex.data.get() }
    }
}

impl<T: ?Sized> Drop for SpinWakeAllGuard<'_, T> {
    fn drop(&mut self) {
        if self.mutex.word.swap(FREE, Release) == CONTENDED {
            PlatformFutex::wake_all(&self.mutex.word);
        }
    }
}
