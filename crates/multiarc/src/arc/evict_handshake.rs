//! How inserting threads talk to the evict thread (a leaf: the thread and
//! the eviction walk are in `evict.rs`).
//!
//! An insert waits only when the cache is *overflowing*, past `c + (c >>
//! overflow_shift)`: then it waits for the evict thread to have freed as many
//! bytes as it adds. Waiters are served in arrival order because each waits
//! for a running total of freed bytes to reach its own, increasing, mark
//! (OpenZFS `arc_evict_count`). The wait is bounded: if a pass cannot free
//! enough (everything is held) or a second passes, the waiter goes on and the
//! cache overshoots rather than hangs.

use crate::mem::sync::{unpoisoned, LockUnpoisoned};
use crate::mem::sync::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long an overflowing insert waits at most.
const MAX_OVERFLOW_WAIT: Duration = Duration::from_secs(1);
/// How often the idle evict thread looks at the sizes without being asked.
pub(crate) const IDLE_CHECK: Duration = Duration::from_millis(100);

#[derive(Default)]
pub(crate) struct Progress {
    pub(crate) shutdown: bool,
    /// Bytes freed by all passes so far.
    pub(crate) freed: u64,
    /// Passes completed, and how many of them could not reach the target.
    pub(crate) passes: u64,
    pub(crate) not_enough: u64,
}

/// Shared between the cache and its evict thread.
#[derive(Default)]
pub(crate) struct EvictHandshake {
    pub(crate) requested: AtomicBool,
    progress: Mutex<Progress>,
    /// The evict thread sleeps here.
    pub(crate) wake: Condvar,
    /// Waiting inserters (and `wait_for_eviction`) sleep here.
    pub(crate) done: Condvar,
}

impl EvictHandshake {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.progress.lock_unpoisoned()
    }

    /// Asks the evict thread for a pass (cheap when one is already asked for).
    pub(crate) fn request(&self) {
        if !self.requested.swap(true, Ordering::AcqRel) {
            let _g = self.lock();
            self.wake.notify_one();
        }
    }

    /// Waits until the evict thread has freed `bytes` more bytes than it had
    /// when this call started, a pass gives up, a pass ends with
    /// `still_over()` false (the freed bytes went to another waiter, but the
    /// cache is back within bounds: no further pass would come), or the wait
    /// times out.
    pub(crate) fn wait_for_freed(&self, bytes: u64, still_over: impl Fn() -> bool) {
        let deadline = Instant::now() + MAX_OVERFLOW_WAIT;
        let mut p = self.lock();
        let target = p.freed + bytes;
        let not_enough = p.not_enough;
        let passes = p.passes;
        self.requested.store(true, Ordering::Release);
        self.wake.notify_one();
        while p.freed < target
            && p.not_enough == not_enough
            && !p.shutdown
            && (p.passes == passes || still_over())
        {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            p = unpoisoned(self.done.wait_timeout(p, deadline - now)).0;
        }
    }

    /// Requests a pass and waits until it completes; returns false if that
    /// pass could not reach the target.
    pub(crate) fn wait_for_pass(&self) -> bool {
        let mut p = self.lock();
        let passes = p.passes;
        let not_enough = p.not_enough;
        self.requested.store(true, Ordering::Release);
        self.wake.notify_one();
        while p.passes == passes && !p.shutdown {
            p = unpoisoned(self.done.wait_timeout(p, IDLE_CHECK)).0;
        }
        p.not_enough == not_enough
    }
}
