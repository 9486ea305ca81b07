//! The 4-byte futex mutex.
//!
//! State word layout: bit 0 `LOCKED`, bit 1 `WAITERS` (`LOCKED | WAITERS` is
//! the "contended" state), bits 2..32 the lockstat slot (0 = not traced).
//! Between an unlock's two steps the word may briefly be `WAITERS` without
//! `LOCKED`: free, and lockable like any free word.

use crate::futex::Futex;
use crate::lockstat;
use crate::platform::PlatformFutex;
use crate::sync::{AtomicU32, Ordering::*, SpinWait};
use crate::LockId;
use std::fmt;
use std::marker::PhantomData;
use std::time::Instant;

const LOCKED: u32 = 1;
const WAITERS: u32 = 2;
/// Held, and some thread may be asleep waiting for it.
const CONTENDED: u32 = LOCKED | WAITERS;
/// The lock-state bits; the others hold the lockstat slot.
const STATE: u32 = LOCKED | WAITERS;
const SLOT_SHIFT: u32 = 2;
/// The largest lockstat slot the word can hold.
pub(crate) const MAX_SLOT: u32 = u32::MAX >> SLOT_SHIFT;

/// The lock without data: the state machine, over a [`Futex`] implementation
/// (a type parameter so the portable fallback can be tested on Linux).
pub(crate) struct FutexMutex<F: Futex = PlatformFutex> {
    word: AtomicU32,
    futex: PhantomData<fn() -> F>,
}

impl<F: Futex> FutexMutex<F> {
    /// An unlocked, untraced mutex.
    pub(crate) const fn new() -> Self {
        FutexMutex {
            word: AtomicU32::new(0),
            futex: PhantomData,
        }
    }

    /// Acquires the lock, sleeping while another thread holds it.
    #[inline]
    pub(crate) fn lock(&self) {
        // Fails when held, and also whenever the lock is traced (slot bits set).
        if let Err(word) = self.word.compare_exchange(0, LOCKED, Acquire, Relaxed) {
            self.lock_slow(word);
        }
    }

    /// Acquires the lock if it is free.
    #[inline]
    pub(crate) fn try_lock(&self) -> bool {
        match self.word.compare_exchange(0, LOCKED, Acquire, Relaxed) {
            Ok(_) => true,
            Err(word) => self.try_lock_slow(word),
        }
    }

    /// Releases the lock.
    ///
    /// # Safety
    /// The calling context must hold the lock (acquired by `lock`/`try_lock`
    /// and not yet released).
    #[inline]
    pub(crate) unsafe fn unlock(&self) {
        // One unconditional `lock xadd`: clears LOCKED, keeps the slot bits
        // (cheaper than a compare-exchange, which a `swap(0)` would need to
        // preserve them).
        let old = self.word.fetch_sub(LOCKED, Release);
        debug_assert!(old & LOCKED != 0, "unlock of an unlocked mutex");
        if old & WAITERS != 0 {
            self.wake_waiter();
        }
    }

    /// Stores `slot` (0 = untraced) in the word, leaving the lock state alone.
    pub(crate) fn set_slot(&self, slot: u32) {
        debug_assert!(slot <= MAX_SLOT);
        let _ = self.word.fetch_update(Relaxed, Relaxed, |word| {
            Some((word & STATE) | (slot << SLOT_SHIFT))
        });
    }

    #[cold]
    #[inline(never)]
    fn try_lock_slow(&self, mut word: u32) -> bool {
        while word & LOCKED == 0 {
            match self
                .word
                .compare_exchange_weak(word, word | LOCKED, Acquire, Relaxed)
            {
                Ok(_) => {
                    lockstat::record(word >> SLOT_SHIFT, None);
                    return true;
                }
                Err(now) => word = now,
            }
        }
        false
    }

    #[cold]
    #[inline(never)]
    fn lock_slow(&self, mut word: u32) {
        // Free, but traced or still marked by an unlock in progress: an
        // uncontended acquisition.
        while word & LOCKED == 0 {
            match self
                .word
                .compare_exchange_weak(word, word | LOCKED, Acquire, Relaxed)
            {
                Ok(_) => {
                    lockstat::record(word >> SLOT_SHIFT, None);
                    return;
                }
                Err(now) => word = now,
            }
        }
        // Contended. Time the wait only if the lock is traced.
        let slot = word >> SLOT_SHIFT;
        let start = (slot != 0).then(Instant::now);
        let end = self.lock_contended(word, start.is_some());
        if let (Some(start), Some(end)) = (start, end) {
            lockstat::record(slot, Some(end.saturating_duration_since(start)));
        }
    }

    /// Acquires a lock found held. If `timed`, returns the time just before
    /// the successful attempt: the wait's end, read outside the critical
    /// section so that tracing does not lengthen it.
    ///
    /// Before each sleep the locker looks at the word again up to the spin
    /// count ([`crate::spin_count`]) times or for the spin's time budget,
    /// waiting longer between looks each time ([`SpinWait`]): a holder that
    /// is running usually releases within that, and a locker
    /// that takes the lock before marking it contended saves its own
    /// `FUTEX_WAIT` and the unlocker's `FUTEX_WAKE`. It does not spin while
    /// the word is marked contended: sleepers mean a queue, which a spinner
    /// would only jump (`parking_lot` spins only while no thread is parked,
    /// and the [`crate::RwLock`] stops spinning once waiters are flagged).
    /// Until its first sleep the locker takes the lock leaving the WAITERS
    /// mark as it found it; once woken it takes it marked contended, because
    /// the waker cleared the mark and other sleepers may be left that only
    /// this locker's unlock will wake.
    fn lock_contended(&self, mut word: u32, timed: bool) -> Option<Instant> {
        let clock = || timed.then(Instant::now);
        // The bits an acquisition sets: LOCKED, and WAITERS once woken.
        let mut take = LOCKED;
        loop {
            let mut spin = SpinWait::new();
            loop {
                if word & LOCKED == 0 {
                    let before = clock();
                    match self
                        .word
                        .compare_exchange_weak(word, word | take, Acquire, Relaxed)
                    {
                        Ok(_) => return before,
                        Err(now) => {
                            word = now;
                            continue;
                        }
                    }
                }
                // Sleepers mean a queue: join it rather than spin.
                if word & WAITERS != 0 || !spin.spin() {
                    break;
                }
                word = self.word.load(Relaxed);
            }
            // Mark the lock contended; if it was free we now hold it (marked
            // contended, which at worst costs one unneeded wake-up).
            let before = clock();
            let old = self.word.fetch_or(CONTENDED, Acquire);
            if old & LOCKED == 0 {
                return before;
            }
            // Sleep while the word is unchanged: still held, still marked, same slot.
            F::wait(&self.word, old | CONTENDED);
            take = CONTENDED;
            word = self.word.load(Relaxed);
        }
    }

    /// The unlock found WAITERS set: the word is now free but still marked.
    /// Clear the mark and wake one sleeper, which marks the word again if it
    /// has to go back to sleep (so a sleeper is never left unmarked). A locker
    /// that took the lock in between keeps it; clearing its mark is safe for
    /// the same reason.
    #[cold]
    #[inline(never)]
    fn wake_waiter(&self) {
        self.word.fetch_and(!WAITERS, Relaxed);
        F::wake_one(&self.word);
    }
}

/// The raw 4-byte mutex, for [`lock_api::Mutex`]: [`crate::Mutex<T>`] is
/// `lock_api::Mutex<RawMutex, T>`.
///
/// Like `std::sync::Mutex` but without poisoning: a panic while the lock is
/// held just releases it. A contended locker spins briefly before it sleeps
/// ([`crate::set_spin_count`]).
pub struct RawMutex(FutexMutex);

impl RawMutex {
    /// Starts (`Some`) or stops (`None`) recording [`lockstat`] statistics
    /// for this lock instance under `id`.
    ///
    /// Acquisitions already waiting when tracing is switched on or off are
    /// recorded according to the state they found on arrival.
    pub fn set_lockstat(&self, id: Option<LockId>) {
        let slot = match id {
            Some(id) => lockstat::slot_for(id, MAX_SLOT).unwrap_or(0),
            None => 0,
        };
        self.0.set_slot(slot);
    }
}

#[cfg(loom)]
impl RawMutex {
    /// An unlocked mutex whose loom atomic is created now (see `sync.rs`).
    pub(crate) fn new_loom() -> RawMutex {
        RawMutex(FutexMutex {
            word: AtomicU32::new_now(0),
            futex: PhantomData,
        })
    }
}

impl fmt::Debug for RawMutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawMutex").finish_non_exhaustive()
    }
}

// SAFETY: `lock`/`try_lock` return a guard only once the LOCKED bit was set
// by this thread's successful compare-exchange or `fetch_or` (Acquire), and
// no other thread can set it until `unlock` clears it (Release): mutual
// exclusion with acquire/release ordering. A panic in `lock` (none is
// expected: lockstat recording only appends to thread-local tables) could
// only come after the acquisition, from `lockstat::record`, which cannot
// fail in practice. Forgetting a guard leaves the lock held, which is safe;
// the lock holds no pointers, so moving or dropping it while held is safe.
unsafe impl lock_api::RawMutex for RawMutex {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawMutex = RawMutex(FutexMutex::new());

    /// Guards are not `Send`, like `std`'s: unlock on the locking thread.
    type Guard = lock_api::GuardNoSend;

    #[inline]
    fn lock(&self) -> Self::Guard {
        self.0.lock();
        lock_api::GuardNoSend::new()
    }

    #[inline]
    fn try_lock(&self) -> Option<Self::Guard> {
        self.0.try_lock().then(lock_api::GuardNoSend::new)
    }

    #[inline]
    unsafe fn unlock(&self, _guard: Self::Guard) {
        // SAFETY: the caller hands back the state of a held acquisition.
        unsafe { self.0.unlock() }
    }

    fn is_locked(&self) -> bool {
        self.0.word.load(Relaxed) & LOCKED != 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::parking::ParkingFutex;
    use std::cell::UnsafeCell;
    use std::sync::Arc;

    /// Increments a non-atomic counter under the raw lock from many threads.
    fn hammer<F: Futex + 'static>(threads: usize, iterations: usize) {
        struct Shared<F: Futex> {
            lock: FutexMutex<F>,
            counter: UnsafeCell<usize>,
        }
        // SAFETY: `counter` is only accessed while `lock` is held.
        unsafe impl<F: Futex> Sync for Shared<F> {}
        let shared = Arc::new(Shared::<F> {
            lock: FutexMutex::new(),
            counter: UnsafeCell::new(0),
        });
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || {
                    for _ in 0..iterations {
                        shared.lock.lock();
                        // SAFETY: the lock is held.
                        unsafe { *shared.counter.get() += 1 };
                        // SAFETY: locked just above.
                        unsafe { shared.lock.unlock() };
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        // SAFETY: all threads are joined.
        assert_eq!(unsafe { *shared.counter.get() }, threads * iterations);
        assert_eq!(shared.lock.word.load(Relaxed), 0, "unlocked and untraced");
    }

    #[test]
    fn excludes_with_the_platform_futex() {
        hammer::<PlatformFutex>(8, 20_000);
    }

    #[test]
    fn excludes_with_the_portable_fallback() {
        hammer::<ParkingFutex>(8, 20_000);
    }

    #[test]
    fn unlock_keeps_the_slot_bits() {
        let raw = FutexMutex::<PlatformFutex>::new();
        raw.set_slot(5);
        raw.lock();
        assert_eq!(raw.word.load(Relaxed), (5 << SLOT_SHIFT) | LOCKED);
        // SAFETY: locked just above.
        unsafe { raw.unlock() };
        assert_eq!(raw.word.load(Relaxed), 5 << SLOT_SHIFT);
        assert!(raw.try_lock());
        assert!(!raw.try_lock());
        // SAFETY: locked by try_lock.
        unsafe { raw.unlock() };
        raw.set_slot(0);
        assert_eq!(raw.word.load(Relaxed), 0);
    }

    #[test]
    fn a_waiter_marks_the_word_contended() {
        let raw = Arc::new(FutexMutex::<PlatformFutex>::new());
        raw.lock();
        let waiter = {
            let raw = Arc::clone(&raw);
            std::thread::spawn(move || {
                raw.lock();
                // SAFETY: locked just above.
                unsafe { raw.unlock() };
            })
        };
        while raw.word.load(Relaxed) != CONTENDED {
            std::thread::yield_now();
        }
        // SAFETY: locked at the start of the test.
        unsafe { raw.unlock() };
        waiter.join().unwrap();
        assert_eq!(raw.word.load(Relaxed), 0);
    }
}
