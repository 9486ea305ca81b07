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

/// A `pthread_mutex_t` (default attributes) guarding a `T`: the C library's
/// mutex, as `multiarc lockbench` measures it. The mutex is boxed because
/// POSIX forbids moving an initialised mutex. The data is boxed with it,
/// right after it, as a Rust `Mutex<T>` holds its data beside its word.
///
/// `OFFSET` is where the mutex starts in its 128-byte-aligned allocation,
/// which nothing else shares. It matters: glibc's lock reads the mutex's
/// kind (byte 16) before its compare-exchange on the word (byte 0), so at a
/// line's start (0) a contended lock first fetches the line shared and then
/// again to write it; at 48 the kind sits alone on the next line. Measured
/// on a 2-CPU Intel VM at 4 threads: about 13 against 54 Macq/s.
#[cfg(unix)]
pub struct PthreadMutexAt<T, const OFFSET: usize> {
    inner: Box<PthreadInner<T, OFFSET>>,
}

/// The mutex and its data in one allocation, the mutex at byte `OFFSET`.
/// Aligned to 128 bytes (two lines: the adjacent-line prefetcher) so that no
/// other allocation shares the mutex's lines, as the benchmark's other locks
/// sit in an allocation of their own.
#[cfg(unix)]
#[repr(C, align(128))]
struct PthreadInner<T, const OFFSET: usize> {
    /// Places the mutex at byte `OFFSET`.
    pad: [u8; OFFSET],
    mutex: std::cell::UnsafeCell<libc::pthread_mutex_t>,
    data: std::cell::UnsafeCell<T>,
}

/// Size of a `pthread_mutex_t` without data, in bytes (the mutex itself;
/// [`PthreadMutexAt`] holds it behind a pointer).
#[cfg(unix)]
pub const PTHREAD_MUTEX_SIZE: usize = std::mem::size_of::<libc::pthread_mutex_t>();

// SAFETY: a pthread mutex may be locked and unlocked from any thread, and
// `data` is only reached through a guard, that is while the mutex is held;
// `T: Send` is what moving the data's access between threads needs.
#[cfg(unix)]
unsafe impl<T: Send, const OFFSET: usize> Send for PthreadMutexAt<T, OFFSET> {}
// SAFETY: as above: shared references only ever hand out the data under the
// mutex, one guard at a time.
#[cfg(unix)]
unsafe impl<T: Send, const OFFSET: usize> Sync for PthreadMutexAt<T, OFFSET> {}

#[cfg(unix)]
impl<T, const OFFSET: usize> PthreadMutexAt<T, OFFSET> {
    /// A new, unlocked mutex guarding `data`.
    pub fn new(data: T) -> Self {
        // SAFETY: an all-zero `pthread_mutex_t` is valid storage to pass to
        // `pthread_mutex_init`, which initialises it in place.
        let zeroed: libc::pthread_mutex_t = unsafe { std::mem::zeroed() };
        let inner = Box::new(PthreadInner {
            pad: [0; OFFSET],
            mutex: std::cell::UnsafeCell::new(zeroed),
            data: std::cell::UnsafeCell::new(data),
        });
        // SAFETY: `inner.mutex` is writable storage that never moves (it is
        // boxed); a null attribute pointer selects the default mutex type.
        let rc = unsafe { libc::pthread_mutex_init(inner.mutex.get(), std::ptr::null()) };
        assert_eq!(rc, 0, "pthread_mutex_init failed");
        PthreadMutexAt { inner }
    }

    /// Locks the mutex (blocking); unlocks when the guard is dropped.
    pub fn lock(&self) -> PthreadMutexGuard<'_, T, OFFSET> {
        // SAFETY: the mutex was initialised in `new` and is destroyed only in
        // `drop`, which cannot run while `self` is borrowed.
        let rc = unsafe { libc::pthread_mutex_lock(self.inner.mutex.get()) };
        assert_eq!(rc, 0, "pthread_mutex_lock failed");
        PthreadMutexGuard {
            lock: self,
            _not_send: std::marker::PhantomData,
        }
    }
}

#[cfg(unix)]
impl<T, const OFFSET: usize> Drop for PthreadMutexAt<T, OFFSET> {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, and unlocked: no guard outlives the
        // borrow of `self` that `drop`'s `&mut self` excludes.
        unsafe { libc::pthread_mutex_destroy(self.inner.mutex.get()) };
    }
}

/// Exclusive access to a [`PthreadMutexAt`]'s data; unlocks when dropped.
#[cfg(unix)]
pub struct PthreadMutexGuard<'a, T, const OFFSET: usize> {
    lock: &'a PthreadMutexAt<T, OFFSET>,
    /// Not `Send`: a pthread mutex must be unlocked by the thread that
    /// locked it.
    _not_send: std::marker::PhantomData<*const ()>,
}

#[cfg(unix)]
impl<T, const OFFSET: usize> std::ops::Deref for PthreadMutexGuard<'_, T, OFFSET> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the mutex, so no other reference to the
        // data exists.
        unsafe { &*self.lock.inner.data.get() }
    }
}

#[cfg(unix)]
impl<T, const OFFSET: usize> std::ops::DerefMut for PthreadMutexGuard<'_, T, OFFSET> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only
        // reference through the guard.
        unsafe { &mut *self.lock.inner.data.get() }
    }
}

#[cfg(unix)]
impl<T, const OFFSET: usize> Drop for PthreadMutexGuard<'_, T, OFFSET> {
    fn drop(&mut self) {
        // SAFETY: this guard locked the mutex in `lock`, on this thread (the
        // guard is not `Send`), and unlocks it once.
        unsafe { libc::pthread_mutex_unlock(self.lock.inner.mutex.get()) };
    }
}
