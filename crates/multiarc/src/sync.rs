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

/// Locking that ignores poisoning. The library's mutexes guard state that
/// every critical section leaves consistent (or that is only ever replaced
/// whole), so a panic while one was held must not make later callers panic:
/// they take the lock as if it had not been poisoned.
pub(crate) trait LockUnpoisoned {
    /// The guard `lock_unpoisoned` returns.
    type Guard<'a>
    where
        Self: 'a;

    /// Locks, ignoring poisoning.
    fn lock_unpoisoned(&self) -> Self::Guard<'_>;
}

impl<T: ?Sized> LockUnpoisoned for std::sync::Mutex<T> {
    type Guard<'a>
        = std::sync::MutexGuard<'a, T>
    where
        T: 'a;

    fn lock_unpoisoned(&self) -> std::sync::MutexGuard<'_, T> {
        unpoisoned(self.lock())
    }
}

#[cfg(loom)]
impl<T> LockUnpoisoned for loom::sync::Mutex<T> {
    type Guard<'a>
        = loom::sync::MutexGuard<'a, T>
    where
        T: 'a;

    fn lock_unpoisoned(&self) -> loom::sync::MutexGuard<'_, T> {
        unpoisoned(self.lock())
    }
}

/// Read and write locking of a std `RwLock`, ignoring poisoning (see
/// [`LockUnpoisoned`]).
// Used by the tests only since the file layer moved to multiarc-file (which
// uses `multiarc_lock::poison`).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) trait RwLockUnpoisoned<T: ?Sized> {
    fn read_unpoisoned(&self) -> std::sync::RwLockReadGuard<'_, T>;
    fn write_unpoisoned(&self) -> std::sync::RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> RwLockUnpoisoned<T> for std::sync::RwLock<T> {
    fn read_unpoisoned(&self) -> std::sync::RwLockReadGuard<'_, T> {
        unpoisoned(self.read())
    }

    fn write_unpoisoned(&self) -> std::sync::RwLockWriteGuard<'_, T> {
        unpoisoned(self.write())
    }
}

/// The value of a lock operation whose lock may be poisoned: a guard, a
/// condvar wait's guard (and timeout flag), a mutex's inner value.
pub(crate) fn unpoisoned<G>(r: std::sync::LockResult<G>) -> G {
    r.unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::{Condvar, Mutex, RwLock};
    use std::time::Duration;

    /// After a panic under each lock, later callers still get the lock and
    /// the value left behind.
    #[test]
    fn poisoned_locks_stay_usable() {
        let m = Mutex::new(1);
        let rw = RwLock::new(2);
        std::thread::scope(|s| {
            let _ = s
                .spawn(|| {
                    let _g = m.lock_unpoisoned();
                    let _w = rw.write_unpoisoned();
                    panic!("poison both");
                })
                .join();
        });
        assert!(m.is_poisoned() && rw.is_poisoned());
        *m.lock_unpoisoned() += 1;
        *rw.write_unpoisoned() += 1;
        assert_eq!((*m.lock_unpoisoned(), *rw.read_unpoisoned()), (2, 3));
        let cv = Condvar::new();
        let (g, timeout) = unpoisoned(cv.wait_timeout(m.lock_unpoisoned(), Duration::ZERO));
        assert!(timeout.timed_out());
        assert_eq!(*g, 2);
        drop(g);
        assert_eq!(unpoisoned(m.into_inner()), 2);
    }
}
