//! Compact futex locks with lock statistics ("lockstat").
//!
//! The cache's sublists and hash stripes are guarded by these locks rather
//! than by `std`'s or `parking_lot`'s, for three reasons: they are small (a
//! [`Mutex`] is one 32-bit word, a [`RwLock`] two), they never spin unless told
//! to (spinning measured as a loss under contention on the machines we run
//! on), and every instance can report how often it was contended
//! ([`lockstat`]), which is how a hot lock is found.
//!
//! # Design
//!
//! * [`Mutex`]: the classic three-state futex mutex (free, held, contended).
//!   Locking is one compare-exchange free->held; on failure the locker marks
//!   the word contended and sleeps on it with `futex(FUTEX_WAIT)`. Unlocking
//!   is one `fetch_sub` clearing the held bit; only if the word was marked
//!   contended does it clear the mark and issue `futex(FUTEX_WAKE, 1)`. So an
//!   uncontended lock/unlock pair is two atomic instructions (`lock cmpxchg`,
//!   `lock xadd`) and no system call.
//! * [`RwLock`]: a writer-preferring reader-writer lock in 8 bytes (a state
//!   word with the reader count and waiting flags, and a wake-up sequence word
//!   writers sleep on), after the design of `std`'s futex `RwLock`.
//! * Lock statistics cost nothing on the uncontended path while they are off:
//!   the high bits of each lock's state word hold a *statistics slot* (0 = not
//!   traced). [`Mutex::set_lockstat`] stores a non-zero slot there, which makes
//!   the fast path's compare-exchange against the all-zero free word fail, so
//!   traced locks (and only they) take the slow path, which records the
//!   acquisition, and, if it had to wait, the wait time. Unlocking preserves
//!   the slot bits. The counters are accumulated per thread (see
//!   [`lockstat`]) so that recording does not itself become a contended lock.
//! * Sleeping and waking go through the `futex` module: the Linux system call, a
//!   portable fallback built on `std`'s `Mutex`/`Condvar` on other targets,
//!   and an emulation on loom's primitives under `--cfg loom`, so that the
//!   state machines are model-checked (`tests/loom_lock.rs`).
//! * Spinning before sleeping is a run-time tunable ([`set_spin_count`],
//!   default 0) kept for measurement (`multiarc lockbench --spins`).

mod futex;
mod mutex;
mod parking;
mod rwlock;
mod sync;

pub mod bench_variants;
pub mod lockstat;

pub use mutex::{Mutex, MutexGuard};
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Names one lock instance for [`lockstat`]: its class (e.g. `"mru.sublist"`,
/// `"hash.stripe"`) and its index within the class.
///
/// Two locks traced under the same `LockId` share one row of statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockId {
    /// The lock's class: what kind of data it guards.
    pub class: &'static str,
    /// The instance's index within its class (e.g. the sublist number).
    pub index: u32,
}

impl LockId {
    /// A lock id from its class and index.
    pub const fn new(class: &'static str, index: u32) -> LockId {
        LockId { class, index }
    }
}

impl std::fmt::Display for LockId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}[{}]", self.class, self.index)
    }
}

/// How many times a contended locker re-checks the lock before sleeping.
/// A plain std atomic even under loom: it is configuration, not lock state.
static SPIN_COUNT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Sets how many times a contended locker of [`Mutex`] or [`RwLock`] re-tries
/// before it goes to sleep (0, the default, sleeps at once). A tunable for
/// measurement; it applies to all locks of this module.
pub fn set_spin_count(n: u32) {
    SPIN_COUNT.store(n, std::sync::atomic::Ordering::Relaxed);
}

/// The current spin count (see [`set_spin_count`]).
pub fn spin_count() -> u32 {
    SPIN_COUNT.load(std::sync::atomic::Ordering::Relaxed)
}
