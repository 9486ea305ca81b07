//! The 8-byte writer-preferring reader-writer lock.
//!
//! The state machine follows `std`'s futex `RwLock`: a state word and a
//! `writer_notify` sequence word that waiting writers sleep on, so a writer
//! can be woken without waking the readers (who sleep on the state word).
//!
//! State word layout: bits 0..16 the reader count, or `WRITE_LOCKED` (all
//! ones) while a writer holds it; bit 16 `READERS_WAITING`; bit 17
//! `WRITERS_WAITING`; bits 18..32 the lockstat slot (0 = not traced). Readers
//! do not take the lock while a writer waits, so writers are not starved.

use crate::futex::Futex;
use crate::lockstat;
use crate::platform::PlatformFutex;
use crate::sync::{AtomicU32, Ordering::*, SpinWait};
use crate::LockId;
use std::fmt;
use std::marker::PhantomData;
use std::time::Instant;

const READ_LOCKED: u32 = 1;
const COUNT: u32 = 0xFFFF;
const WRITE_LOCKED: u32 = COUNT;
const MAX_READERS: u32 = COUNT - 1;
const READERS_WAITING: u32 = 1 << 16;
const WRITERS_WAITING: u32 = 1 << 17;
/// Every bit but the lockstat slot.
const LOCK_BITS: u32 = COUNT | READERS_WAITING | WRITERS_WAITING;
const SLOT_SHIFT: u32 = 18;
/// The largest lockstat slot the word can hold.
pub(crate) const MAX_SLOT: u32 = u32::MAX >> SLOT_SHIFT;

fn is_unlocked(state: u32) -> bool {
    state & COUNT == 0
}

fn is_write_locked(state: u32) -> bool {
    state & COUNT == WRITE_LOCKED
}

fn has_readers_waiting(state: u32) -> bool {
    state & READERS_WAITING != 0
}

fn has_writers_waiting(state: u32) -> bool {
    state & WRITERS_WAITING != 0
}

/// A reader may enter: not write-locked, room for one more reader, and
/// nobody waiting (waiting writers take precedence over new readers).
fn is_read_lockable(state: u32) -> bool {
    state & COUNT < MAX_READERS && state & (READERS_WAITING | WRITERS_WAITING) == 0
}

fn slot(state: u32) -> u32 {
    state >> SLOT_SHIFT
}

/// The lock without data, over a [`Futex`] implementation.
pub(crate) struct FutexRwLock<F: Futex = PlatformFutex> {
    state: AtomicU32,
    /// Incremented to wake a writer; writers sleep on it.
    writer_notify: AtomicU32,
    futex: PhantomData<fn() -> F>,
}

impl<F: Futex> FutexRwLock<F> {
    /// An unlocked, untraced lock.
    pub(crate) const fn new() -> Self {
        FutexRwLock {
            state: AtomicU32::new(0),
            writer_notify: AtomicU32::new(0),
            futex: PhantomData,
        }
    }

    /// Stores `slot` (0 = untraced) in the state word.
    pub(crate) fn set_slot(&self, slot: u32) {
        debug_assert!(slot <= MAX_SLOT);
        let _ = self.state.fetch_update(Relaxed, Relaxed, |state| {
            Some((state & LOCK_BITS) | (slot << SLOT_SHIFT))
        });
    }

    /// Acquires a shared lock.
    #[inline]
    pub(crate) fn read(&self) {
        let state = self.state.load(Relaxed);
        // `state < MAX_READERS` means: no flags, no slot, room for a reader.
        if state >= MAX_READERS
            || self
                .state
                .compare_exchange_weak(state, state + READ_LOCKED, Acquire, Relaxed)
                .is_err()
        {
            self.read_slow();
        }
    }

    /// Acquires a shared lock if that needs no waiting.
    pub(crate) fn try_read(&self) -> bool {
        let mut state = self.state.load(Relaxed);
        while is_read_lockable(state) {
            match self
                .state
                .compare_exchange_weak(state, state + READ_LOCKED, Acquire, Relaxed)
            {
                Ok(_) => {
                    lockstat::record(slot(state), None);
                    return true;
                }
                Err(now) => state = now,
            }
        }
        false
    }

    /// Releases a shared lock.
    ///
    /// # Safety
    /// The calling context must hold a shared lock.
    #[inline]
    pub(crate) unsafe fn read_unlock(&self) {
        let state = self.state.fetch_sub(READ_LOCKED, Release) - READ_LOCKED;
        // Readers only wait while a writer waits too, so the last reader
        // out has something to do only if a writer waits.
        if is_unlocked(state) && has_writers_waiting(state) {
            self.wake_writer_or_readers(state);
        }
    }

    /// Acquires the exclusive lock.
    #[inline]
    pub(crate) fn write(&self) {
        if let Err(state) = self
            .state
            .compare_exchange_weak(0, WRITE_LOCKED, Acquire, Relaxed)
        {
            self.write_slow(state);
        }
    }

    /// Acquires the exclusive lock if it is free.
    pub(crate) fn try_write(&self) -> bool {
        let mut state = self.state.load(Relaxed);
        while is_unlocked(state) {
            match self
                .state
                .compare_exchange_weak(state, state | WRITE_LOCKED, Acquire, Relaxed)
            {
                Ok(_) => {
                    lockstat::record(slot(state), None);
                    return true;
                }
                Err(now) => state = now,
            }
        }
        false
    }

    /// Releases the exclusive lock.
    ///
    /// # Safety
    /// The calling context must hold the exclusive lock.
    #[inline]
    pub(crate) unsafe fn write_unlock(&self) {
        let state = self.state.fetch_sub(WRITE_LOCKED, Release) - WRITE_LOCKED;
        debug_assert!(is_unlocked(state));
        if has_writers_waiting(state) || has_readers_waiting(state) {
            self.wake_writer_or_readers(state);
        }
    }

    #[cold]
    #[inline(never)]
    fn read_slow(&self) {
        let mut state = self.state.load(Relaxed);
        // Lockable but traced (or a failed weak compare-exchange).
        while is_read_lockable(state) {
            match self
                .state
                .compare_exchange_weak(state, state + READ_LOCKED, Acquire, Relaxed)
            {
                Ok(_) => {
                    lockstat::record(slot(state), None);
                    return;
                }
                Err(now) => state = now,
            }
        }
        let start = (slot(state) != 0).then(Instant::now);
        let end = self.read_contended(start.is_some());
        if let (Some(start), Some(end)) = (start, end) {
            lockstat::record(slot(state), Some(end.saturating_duration_since(start)));
        }
    }

    /// Acquires a shared lock found unavailable. If `timed`, returns the
    /// time read just before the successful attempt (the wait's end, read
    /// outside the critical section).
    fn read_contended(&self, timed: bool) -> Option<Instant> {
        let clock = || timed.then(Instant::now);
        let mut state = self.spin_read();
        let mut before = clock();
        loop {
            if is_read_lockable(state) {
                match self
                    .state
                    .compare_exchange_weak(state, state + READ_LOCKED, Acquire, Relaxed)
                {
                    Ok(_) => return before,
                    Err(now) => {
                        state = now;
                        continue;
                    }
                }
            }
            assert!(
                state & COUNT != MAX_READERS,
                "too many active read locks on RwLock"
            );
            // Make sure the waiting flag is set before going to sleep.
            if !has_readers_waiting(state) {
                if let Err(now) =
                    self.state
                        .compare_exchange(state, state | READERS_WAITING, Relaxed, Relaxed)
                {
                    state = now;
                    continue;
                }
            }
            F::wait(&self.state, state | READERS_WAITING);
            state = self.spin_read();
            before = clock();
        }
    }

    #[cold]
    #[inline(never)]
    fn write_slow(&self, mut state: u32) {
        // Free but traced (or a failed weak compare-exchange).
        while state & LOCK_BITS == 0 {
            match self
                .state
                .compare_exchange_weak(state, state | WRITE_LOCKED, Acquire, Relaxed)
            {
                Ok(_) => {
                    lockstat::record(slot(state), None);
                    return;
                }
                Err(now) => state = now,
            }
        }
        let start = (slot(state) != 0).then(Instant::now);
        let end = self.write_contended(start.is_some());
        if let (Some(start), Some(end)) = (start, end) {
            lockstat::record(slot(state), Some(end.saturating_duration_since(start)));
        }
    }

    /// Acquires the exclusive lock found unavailable. If `timed`, returns
    /// the time read just before the successful attempt.
    fn write_contended(&self, timed: bool) -> Option<Instant> {
        let clock = || timed.then(Instant::now);
        let mut state = self.spin_write();
        let mut before = clock();
        // Once we waited, other writers may be waiting too: keep their flag set.
        let mut other_writers_waiting = 0;
        loop {
            if is_unlocked(state) {
                match self.state.compare_exchange_weak(
                    state,
                    state | WRITE_LOCKED | other_writers_waiting,
                    Acquire,
                    Relaxed,
                ) {
                    Ok(_) => return before,
                    Err(now) => {
                        state = now;
                        continue;
                    }
                }
            }
            if !has_writers_waiting(state) {
                if let Err(now) =
                    self.state
                        .compare_exchange(state, state | WRITERS_WAITING, Relaxed, Relaxed)
                {
                    state = now;
                    continue;
                }
            }
            other_writers_waiting = WRITERS_WAITING;
            // Read the sequence before re-checking the state: a wake-up sent
            // after the check changes the sequence, so the wait returns.
            let seq = self.writer_notify.load(Acquire);
            state = self.state.load(Relaxed);
            if is_unlocked(state) || !has_writers_waiting(state) {
                continue;
            }
            F::wait(&self.writer_notify, seq);
            state = self.spin_write();
            before = clock();
        }
    }

    /// Called by the last unlocker when someone waits: wakes one writer if
    /// any waits, otherwise all readers.
    #[cold]
    fn wake_writer_or_readers(&self, mut state: u32) {
        debug_assert!(is_unlocked(state));
        let slot_bits = state & !LOCK_BITS;
        if state & LOCK_BITS == WRITERS_WAITING {
            match self
                .state
                .compare_exchange(state, slot_bits, Relaxed, Relaxed)
            {
                Ok(_) => {
                    self.wake_writer();
                    return;
                }
                Err(now) => state = now,
            }
        }
        if state & LOCK_BITS == READERS_WAITING | WRITERS_WAITING {
            if self
                .state
                .compare_exchange(state, slot_bits | READERS_WAITING, Relaxed, Relaxed)
                .is_err()
            {
                // Someone locked it meanwhile: its unlock will wake.
                return;
            }
            if self.wake_writer() {
                return;
            }
            // No writer was certainly asleep: wake the readers instead.
            state = slot_bits | READERS_WAITING;
        }
        if state & LOCK_BITS == READERS_WAITING
            && self
                .state
                .compare_exchange(state, state & !READERS_WAITING, Relaxed, Relaxed)
                .is_ok()
        {
            F::wake_all(&self.state);
        }
    }

    fn wake_writer(&self) -> bool {
        self.writer_notify.fetch_add(1, Release);
        F::wake_one(&self.writer_notify)
    }

    /// Spins (at most the spin count) until readers could enter or must wait.
    fn spin_read(&self) -> u32 {
        self.spin_until(|state| {
            !is_write_locked(state) || has_readers_waiting(state) || has_writers_waiting(state)
        })
    }

    /// Spins (at most the spin count) until a writer could enter or must wait.
    fn spin_write(&self) -> u32 {
        self.spin_until(|state| is_unlocked(state) || has_writers_waiting(state))
    }

    fn spin_until(&self, done: impl Fn(u32) -> bool) -> u32 {
        let mut spin = SpinWait::new();
        loop {
            let state = self.state.load(Relaxed);
            if done(state) || !spin.spin() {
                return state;
            }
        }
    }
}

/// The raw 8-byte writer-preferring reader-writer lock, for
/// [`lock_api::RwLock`]: [`crate::RwLock<T>`] is `lock_api::RwLock<RawRwLock, T>`.
/// No poisoning.
///
/// # Panics
/// A shared acquisition panics if 65534 shared acquisitions of this lock are
/// held at once.
pub struct RawRwLock(FutexRwLock);

impl RawRwLock {
    /// Starts (`Some`) or stops (`None`) recording [`lockstat`] statistics
    /// for this lock instance under `id` (read and write acquisitions alike).
    ///
    /// The state word has room for 16383 slots (one per distinct [`LockId`]
    /// ever traced, shared with [`crate::RawMutex`]); past that the lock stays
    /// untraced.
    pub fn set_lockstat(&self, id: Option<LockId>) {
        let slot = match id {
            Some(id) => lockstat::slot_for(id, MAX_SLOT).unwrap_or(0),
            None => 0,
        };
        self.0.set_slot(slot);
    }
}

#[cfg(loom)]
impl RawRwLock {
    /// An unlocked lock whose loom atomics are created now (see `sync.rs`).
    pub(crate) fn new_loom() -> RawRwLock {
        RawRwLock(FutexRwLock {
            state: AtomicU32::new_now(0),
            writer_notify: AtomicU32::new_now(0),
            futex: PhantomData,
        })
    }
}

impl fmt::Debug for RawRwLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawRwLock").finish_non_exhaustive()
    }
}

// SAFETY: a shared acquisition succeeds only by a compare-exchange (Acquire)
// that adds a reader to a count that is not `WRITE_LOCKED`, an exclusive one
// only by a compare-exchange (Acquire) from a zero count to `WRITE_LOCKED`;
// the unlocks undo exactly that with a Release `fetch_sub`. So readers share,
// a writer excludes everyone, with acquire/release ordering. The only panic
// (too many readers) happens before any acquisition. Forgetting a guard
// leaves the lock held, which is safe; the lock holds no pointers, so moving
// or dropping it while held is safe.
unsafe impl lock_api::RawRwLock for RawRwLock {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawRwLock = RawRwLock(FutexRwLock::new());

    /// Guards are not `Send`, like `std`'s.
    type SharedGuard = lock_api::GuardNoSend;
    /// Guards are not `Send`, like `std`'s.
    type ExclusiveGuard = lock_api::GuardNoSend;

    #[inline]
    fn lock_shared(&self) -> Self::SharedGuard {
        self.0.read();
        lock_api::GuardNoSend::new()
    }

    #[inline]
    fn try_lock_shared(&self) -> Option<Self::SharedGuard> {
        self.0.try_read().then(lock_api::GuardNoSend::new)
    }

    #[inline]
    unsafe fn unlock_shared(&self, _guard: Self::SharedGuard) {
        // SAFETY: the caller hands back the state of a held shared acquisition.
        unsafe { self.0.read_unlock() }
    }

    #[inline]
    fn lock_exclusive(&self) -> Self::ExclusiveGuard {
        self.0.write();
        lock_api::GuardNoSend::new()
    }

    #[inline]
    fn try_lock_exclusive(&self) -> Option<Self::ExclusiveGuard> {
        self.0.try_write().then(lock_api::GuardNoSend::new)
    }

    #[inline]
    unsafe fn unlock_exclusive(&self, _guard: Self::ExclusiveGuard) {
        // SAFETY: the caller hands back the state of the held exclusive acquisition.
        unsafe { self.0.write_unlock() }
    }

    fn is_locked(&self) -> bool {
        !is_unlocked(self.0.state.load(Relaxed))
    }

    fn is_locked_exclusive(&self) -> bool {
        is_write_locked(self.0.state.load(Relaxed))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::parking::ParkingFutex;
    use std::cell::UnsafeCell;
    use std::sync::Arc;

    /// Writers keep two counters equal; readers check they are.
    fn hammer<F: Futex + 'static>(readers: usize, writers: usize, iterations: usize) {
        struct Shared<F: Futex> {
            lock: FutexRwLock<F>,
            pair: UnsafeCell<(usize, usize)>,
        }
        // SAFETY: `pair` is written only under the write lock, read only
        // under a lock.
        unsafe impl<F: Futex> Sync for Shared<F> {}
        let shared = Arc::new(Shared::<F> {
            lock: FutexRwLock::new(),
            pair: UnsafeCell::new((0, 0)),
        });
        let mut handles = Vec::new();
        for i in 0..readers + writers {
            let shared = Arc::clone(&shared);
            handles.push(std::thread::spawn(move || {
                for _ in 0..iterations {
                    if i < writers {
                        shared.lock.write();
                        // SAFETY: write-locked.
                        let pair = unsafe { &mut *shared.pair.get() };
                        pair.0 += 1;
                        std::hint::black_box(&mut *pair);
                        pair.1 += 1;
                        // SAFETY: locked just above.
                        unsafe { shared.lock.write_unlock() };
                    } else {
                        shared.lock.read();
                        // SAFETY: read-locked.
                        let pair = unsafe { *shared.pair.get() };
                        assert_eq!(pair.0, pair.1);
                        // SAFETY: locked just above.
                        unsafe { shared.lock.read_unlock() };
                    }
                }
            }));
        }
        for handle in handles {
            handle.join().unwrap();
        }
        // SAFETY: all threads are joined.
        let pair = unsafe { *shared.pair.get() };
        assert_eq!(pair, (writers * iterations, writers * iterations));
        assert_eq!(shared.lock.state.load(Relaxed), 0);
    }

    #[test]
    fn excludes_with_the_platform_futex() {
        hammer::<PlatformFutex>(4, 4, 10_000);
    }

    #[test]
    fn excludes_with_the_portable_fallback() {
        hammer::<ParkingFutex>(4, 4, 10_000);
    }

    #[test]
    fn unlock_keeps_the_slot_bits() {
        let raw = FutexRwLock::<PlatformFutex>::new();
        raw.set_slot(MAX_SLOT);
        raw.read();
        raw.read();
        assert!(!raw.try_write());
        // SAFETY: read-locked twice above.
        unsafe { raw.read_unlock() };
        // SAFETY: as above.
        unsafe { raw.read_unlock() };
        raw.write();
        assert!(!raw.try_read());
        // SAFETY: write-locked just above.
        unsafe { raw.write_unlock() };
        assert_eq!(raw.state.load(Relaxed), MAX_SLOT << SLOT_SHIFT);
        raw.set_slot(0);
        assert_eq!(raw.state.load(Relaxed), 0);
    }

    #[test]
    fn a_waiting_writer_blocks_new_readers() {
        let raw = Arc::new(FutexRwLock::<PlatformFutex>::new());
        raw.read();
        let writer = {
            let raw = Arc::clone(&raw);
            std::thread::spawn(move || {
                raw.write();
                // SAFETY: locked just above.
                unsafe { raw.write_unlock() };
            })
        };
        while !has_writers_waiting(raw.state.load(Relaxed)) {
            std::thread::yield_now();
        }
        assert!(
            !raw.try_read(),
            "a waiting writer must keep new readers out"
        );
        // SAFETY: read-locked at the start.
        unsafe { raw.read_unlock() };
        writer.join().unwrap();
        assert_eq!(raw.state.load(Relaxed), 0);
    }
}
