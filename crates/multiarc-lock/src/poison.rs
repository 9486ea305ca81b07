//! `std` locks that ignore poisoning.
//!
//! A `std::sync::Mutex` or `RwLock` is poisoned when a thread panics while
//! holding it, and every later `lock` returns an error. State that every
//! critical section leaves consistent (or that is only ever replaced whole)
//! needs no such alarm: a panic elsewhere must not make later callers panic
//! too. These helpers take such a lock as if it had not been poisoned.
//! (This crate's own [`Mutex`](crate::Mutex) and [`RwLock`](crate::RwLock)
//! never poison.)
//!
//! ```
//! use multiarc_lock::poison::{unpoisoned, LockUnpoisoned, RwLockUnpoisoned};
//! use std::sync::{Condvar, Mutex, RwLock};
//! use std::time::Duration;
//!
//! let count = Mutex::new(0);
//! *count.lock_unpoisoned() += 1;
//! let table = RwLock::new(vec![1]);
//! table.write_unpoisoned().push(2);
//! assert_eq!(table.read_unpoisoned().len(), 2);
//! // A condition variable's wait, whose result may carry poisoning too.
//! let cv = Condvar::new();
//! let (g, _timeout) = unpoisoned(cv.wait_timeout(count.lock_unpoisoned(), Duration::ZERO));
//! assert_eq!(*g, 1);
//! ```

/// Locking a mutex, ignoring poisoning (see the [module](self) comment).
pub trait LockUnpoisoned {
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

/// Read and write locking of a `std` `RwLock`, ignoring poisoning (see the
/// [module](self) comment).
pub trait RwLockUnpoisoned<T: ?Sized> {
    /// Locks for reading, ignoring poisoning.
    fn read_unpoisoned(&self) -> std::sync::RwLockReadGuard<'_, T>;
    /// Locks for writing, ignoring poisoning.
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
/// condition variable wait's guard (and timeout flag), a mutex's inner value.
pub fn unpoisoned<G>(r: std::sync::LockResult<G>) -> G {
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
