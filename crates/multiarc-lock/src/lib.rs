//! Compact futex locks with lock statistics ("lockstat"): the locks of the
//! [multiarc](https://docs.rs/multiarc) block cache, usable on their own.
//!
//! * [`Mutex`]: the 4-byte, three-state futex mutex of the cache's field
//!   report (free, held, contended);
//! * [`RwLock`]: an 8-byte writer-preferring reader-writer lock;
//! * [`lockstat`]: per lock instance, how often it was acquired, how often it
//!   had to wait and for how long; switched on per instance at run time and
//!   free on the uncontended path while off.
//!
//! They are chosen over `std`'s or `parking_lot`'s for two reasons: they
//! are small (a [`Mutex`] is one 32-bit word, a [`RwLock`] two), and every
//! instance can report how often it was contended ([`lockstat`]), which is
//! how a hot lock is found.
//!
//! # Use on its own
//!
//! [`RawMutex`] implements [`lock_api::RawMutex`] and [`RawRwLock`]
//! implements [`lock_api::RawRwLock`], as `parking_lot`'s raw locks do;
//! [`Mutex<T>`] and [`RwLock<T>`] (and their guards) are the `lock_api` types
//! over them, with `lock_api`'s whole interface (`lock`, `try_lock`, `read`,
//! `try_write`, `get_mut`, `into_inner`, mapped guards, ...). Lock statistics
//! are switched on per instance through [`LockstatExt`]:
//!
//! ```
//! use multiarc_lock::{lockstat, LockId, LockstatExt, Mutex, RwLock};
//!
//! let counter = Mutex::new(0u64);
//! let table = RwLock::new(vec![1, 2, 3]);
//! counter.set_lockstat(Some(LockId::new("example.counter", 0)));
//! *counter.lock() += 1;
//! assert_eq!(table.read().len(), 3);
//! if let Some(mut t) = table.try_write() {
//!     t.push(4);
//! }
//! let report = lockstat::snapshot().filter_class_prefix("example.");
//! assert_eq!(report.total_acquisitions(), 1);
//! assert_eq!(report.rows[0].id.to_string(), "example.counter[0]");
//! ```
//!
//! [`lockstat::snapshot`] returns the figures as data ([`lockstat::Report`]);
//! formatting them (the `multiarc` command prints them in the layout of
//! illumos `lockstat(8)`) is up to the caller. With the `serde` feature the
//! report types implement `Serialize`.
//!
//! [`CachePadded`] pads a value to its own cache lines (128 bytes), for
//! arrays of locks that must not share one.
//!
//! [`poison`] takes `std`'s mutexes and reader-writer locks as if a panic
//! while one was held had not poisoned it.
//!
//! # Design
//!
//! * [`Mutex`]: the classic three-state futex mutex (free, held, contended).
//!   Locking is one compare-exchange free->held; on failure the locker looks
//!   at the word a few more times (see the spinning item below), then marks
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
//!   traced). [`LockstatExt::set_lockstat`] stores a non-zero slot there, which
//!   makes the fast path's compare-exchange against the all-zero free word
//!   fail, so traced locks (and only they) take the slow path, which records
//!   the acquisition, and, if it had to wait, the wait time. Unlocking
//!   preserves the slot bits. The counters are accumulated per thread (see
//!   [`lockstat`]) so that recording does not itself become a contended lock.
//! * Sleeping and waking go through the `futex` module: the Linux system call, a
//!   portable fallback built on `std`'s `Mutex`/`Condvar` on other targets,
//!   and an emulation on loom's primitives under `--cfg loom`, so that the
//!   state machines are model-checked (`tests/loom_lock.rs`).
//! * A contended locker spins before it sleeps (unless others already
//!   sleep on the lock), with exponential backoff: it looks at the lock
//!   again after 2, 4, 8, ... `pause` instructions, up to 1024 between
//!   looks, each wait from the fourth on after a `sched_yield` (a holder
//!   preempted on this CPU can run), for at most about 20 µs, what a futex
//!   sleep and wake-up cost where measured, or [`DEFAULT_SPIN_COUNT`] looks
//!   (a run-time tunable, [`set_spin_count`], measured by `multiarc
//!   lockbench --spins`). Rare looks leave the lock's cache line with a
//!   holder that re-locks. Without a spin nearly every contended
//!   acquisition cost a `FUTEX_WAIT` that found the lock already released
//!   and two `FUTEX_WAKE`s that woke nobody (the unlock that found the
//!   contended mark, then the unlock of the locker that set it).
//!
//! # Features
//!
//! * `serde`: `Serialize` for [`LockId`] and the [`lockstat`] report types.
//! * `bench-variants`: `bench_variants`, lock variants that exist only to be
//!   measured against [`Mutex`] by `multiarc lockbench`.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod futex;
#[cfg(loom)]
mod loom_types;
mod mutex;
mod parking;
mod platform;
mod rwlock;
mod sync;

#[cfg(feature = "bench-variants")]
pub mod bench_variants;
pub mod lockstat;
mod lockstat_table;
pub mod poison;

pub use mutex::RawMutex;
pub use rwlock::RawRwLock;

#[cfg(loom)]
pub use loom_types::{Mutex, RwLock};

/// A mutual-exclusion lock in 4 bytes, with optional lock statistics
/// ([`LockstatExt::set_lockstat`]). No poisoning: a panic while the lock is
/// held just releases it.
#[cfg(not(loom))]
pub type Mutex<T> = lock_api::Mutex<RawMutex, T>;
/// Exclusive access to a [`Mutex`]'s data; unlocks when dropped.
pub type MutexGuard<'a, T> = lock_api::MutexGuard<'a, RawMutex, T>;
/// A writer-preferring reader-writer lock in 8 bytes, with optional lock
/// statistics ([`LockstatExt::set_lockstat`]). No poisoning.
///
/// [`RwLock::read`] panics if 65534 read guards of one lock are alive at once.
#[cfg(not(loom))]
pub type RwLock<T> = lock_api::RwLock<RawRwLock, T>;
/// Shared access to an [`RwLock`]'s data; releases it when dropped.
pub type RwLockReadGuard<'a, T> = lock_api::RwLockReadGuard<'a, RawRwLock, T>;
/// Exclusive access to an [`RwLock`]'s data; releases it when dropped.
pub type RwLockWriteGuard<'a, T> = lock_api::RwLockWriteGuard<'a, RawRwLock, T>;

/// Lock statistics switches for [`Mutex`] and [`RwLock`], which are
/// `lock_api` types: import this trait to call `set_lockstat` on them.
pub trait LockstatExt {
    /// Starts (`Some`) or stops (`None`) recording [`lockstat`] statistics
    /// for this lock instance under `id` (see [`RawMutex::set_lockstat`] and
    /// [`RawRwLock::set_lockstat`]).
    fn set_lockstat(&self, id: Option<LockId>);
}

impl<T: ?Sized> LockstatExt for lock_api::Mutex<RawMutex, T> {
    fn set_lockstat(&self, id: Option<LockId>) {
        // SAFETY: `set_lockstat` only changes the statistics slot bits of the
        // state word; it never locks or unlocks, so every live guard and
        // reference to the data stays valid.
        unsafe { self.raw() }.set_lockstat(id);
    }
}

impl<T: ?Sized> LockstatExt for lock_api::RwLock<RawRwLock, T> {
    fn set_lockstat(&self, id: Option<LockId>) {
        // SAFETY: as for `Mutex`: only the slot bits change.
        unsafe { self.raw() }.set_lockstat(id);
    }
}

/// Pads and aligns a value to 128 bytes (two cache lines, the unit the
/// adjacent-line prefetcher of x86 CPUs fetches), so that values in
/// neighbouring array elements never share a cache line: the cache keeps
/// each sublist lock, hash stripe and counter cell in one.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
#[repr(align(128))]
pub struct CachePadded<T> {
    value: T,
}

impl<T> CachePadded<T> {
    /// Pads `value`.
    pub const fn new(value: T) -> CachePadded<T> {
        CachePadded { value }
    }

    /// The padded value.
    pub fn into_inner(self) -> T {
        self.value
    }
}

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> std::ops::DerefMut for CachePadded<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for CachePadded<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachePadded")
            .field("value", &self.value)
            .finish()
    }
}

impl<T> From<T> for CachePadded<T> {
    fn from(value: T) -> Self {
        CachePadded::new(value)
    }
}

/// Names one lock instance for [`lockstat`]: its class (e.g. `"mru.sublist"`,
/// `"hash.stripe"`) and its index within the class.
///
/// Two locks traced under the same `LockId` share one row of statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
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

/// The default of [`set_spin_count`]: how many times at most a contended
/// locker re-checks the lock before it sleeps. High enough that the spin's
/// time budget (about 20 µs) is what ends it where a `pause` takes 10 ns or
/// more.
#[cfg(not(loom))]
pub const DEFAULT_SPIN_COUNT: u32 = 40;
/// Under loom a spin is a yield to the model checker; one re-check is
/// enough for the models to cover the spinning paths.
#[cfg(loom)]
pub const DEFAULT_SPIN_COUNT: u32 = 1;

/// How many times a contended locker re-checks the lock before sleeping.
/// A plain std atomic even under loom: it is configuration, not lock state.
static SPIN_COUNT: std::sync::atomic::AtomicU32 =
    std::sync::atomic::AtomicU32::new(DEFAULT_SPIN_COUNT);

/// Sets how many times a contended locker of [`Mutex`] or [`RwLock`] looks
/// at the lock again before it goes to sleep: 0 sleeps at once; the default
/// is [`DEFAULT_SPIN_COUNT`]. The looks are 2, 4, 8, ... `pause`
/// instructions apart, at most 1024, from the fourth on after a
/// `sched_yield`, and the spin ends after about 20 µs whatever the count.
/// It applies to all locks of this module.
pub fn set_spin_count(n: u32) {
    SPIN_COUNT.store(n, std::sync::atomic::Ordering::Relaxed);
}

/// The current spin count (see [`set_spin_count`]).
pub fn spin_count() -> u32 {
    SPIN_COUNT.load(std::sync::atomic::Ordering::Relaxed)
}
