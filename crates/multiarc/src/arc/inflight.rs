//! The record of a read-through load in flight, shared by the caller running
//! the loader and the callers waiting for it (the single-flight logic itself
//! is in `load.rs`, and `load_async.rs` for tasks). Each hash stripe keeps
//! the loads of its keys as its `per_stripe` value, under the stripe's lock.
//!
//! # The states of a load in flight
//!
//! A [`Pending`] is *registered* (in its stripe's [`InFlight`], so new
//! callers join it) from when its loader's caller creates it until its
//! result is decided; it is then *forgotten* (taken out of `InFlight`,
//! under the stripe lock) and *completed* (its result set, after the stripe
//! lock is dropped):
//!
//! 1. **Registered, no result.** Waiters join under the stripe lock
//!    (`waiters` + 1). A waiting thread sleeps on the condvar; a waiting
//!    task leaves its `Waker` in the record ([`Pending::poll_result`]).
//! 2. **Forgotten, no result.** The insert that ends a successful load
//!    reads `waiters` and takes one hold per waiter in the same stripe
//!    critical section in which it forgets the record (`insert_entry`); a
//!    failed or abandoned load forgets it without holds. No one joins now.
//! 3. **Completed** ([`Pending::complete`]): `Done` (the entry, one hold
//!    taken per waiter), `Failed` (the loader's error, shared) or
//!    `Abandoned` (the loader panicked, or the future running it was
//!    dropped: waiters retry, and the first to retry loads with its own
//!    loader). Completion wakes every waiter: the condvar's threads and the
//!    registered wakers' tasks.
//!
//! A waiting *task* may leave early (its future dropped). In state 1 it
//! takes itself out of `waiters` under the stripe lock, so no hold is taken
//! for it. In state 2 a hold may be taken for it that it will never
//! collect: it records itself as `left` ([`Pending::leave`]) and the
//! completer releases that many holds of a `Done` entry; in state 3 it
//! releases its own hold. Waiting threads never leave early.

#[cfg(loom)]
use loom::sync::{Condvar, Mutex};
#[cfg(not(loom))]
use std::sync::{Condvar, Mutex};

use crate::mem::sync::{unpoisoned, LockUnpoisoned};
use crate::mem::sync::{AtomicBool, AtomicU32, Ordering};
use crate::mem::EntryPtr;
use std::any::Any;
use std::sync::Arc;
use std::task::{Poll, Waker};

/// The outcome of a read-through load, shared with the callers waiting for it.
pub(crate) enum LoadResult<K> {
    /// Loaded and inserted; each waiter's hold was taken for it.
    Done(EntryPtr<K>),
    /// The loader failed; the error (an `Arc<E>`) is shared.
    Failed(Arc<dyn Any + Send + Sync>),
    /// The loader panicked or its future was dropped; waiters retry on
    /// their own (one of them loads).
    Abandoned,
}

impl<K> LoadResult<K> {
    /// This result for one more waiter (a `Done` entry's hold was taken
    /// for each waiter when it was inserted).
    fn share(&self) -> LoadResult<K> {
        match self {
            LoadResult::Done(e) => LoadResult::Done(*e),
            LoadResult::Failed(err) => LoadResult::Failed(Arc::clone(err)),
            LoadResult::Abandoned => LoadResult::Abandoned,
        }
    }
}

/// What the waiters of a load read and write (the record's leaf lock).
struct Outcome<K> {
    result: Option<LoadResult<K>>,
    /// The wakers of waiting tasks, by ticket (`None`: left or not yet
    /// polled again).
    wakers: Vec<Option<Waker>>,
    /// Counted waiters that left after the record was forgotten and before
    /// it completed: a `Done` entry holds one hold for each, which the
    /// completer releases.
    left: u32,
}

/// A load in flight: other callers missing the same key wait here.
pub(crate) struct Pending<K> {
    /// Callers waiting; changed only under the key's stripe lock, while
    /// the record is registered.
    pub(crate) waiters: AtomicU32,
    /// An `insert` or `remove` of the key came after this load started: its
    /// bytes may predate that change, so they go to the waiting callers but
    /// are not cached. Changed and read only under the key's stripe lock.
    pub(crate) superseded: AtomicBool,
    outcome: Mutex<Outcome<K>>,
    ready: Condvar,
}

impl<K> Pending<K> {
    pub(crate) fn new() -> Self {
        Pending {
            waiters: AtomicU32::new(0),
            superseded: AtomicBool::new(false),
            outcome: Mutex::new(Outcome {
                result: None,
                wakers: Vec::new(),
                left: 0,
            }),
            ready: Condvar::new(),
        }
    }

    /// Sets the result (the record must have been forgotten first) and
    /// wakes every waiter, threads and tasks. Returns how many counted
    /// waiters left before it: with `Done`, the caller releases that many
    /// holds of the entry.
    #[must_use = "a Done load's holds of waiters that left must be released"]
    pub(crate) fn complete(&self, result: LoadResult<K>) -> u32 {
        let (wakers, left) = {
            let mut o = self.outcome.lock_unpoisoned();
            o.result = Some(result);
            (std::mem::take(&mut o.wakers), std::mem::take(&mut o.left))
        };
        self.ready.notify_all();
        for w in wakers.into_iter().flatten() {
            w.wake();
        }
        left
    }

    /// A waiting thread: blocks until the result is in.
    pub(crate) fn wait(&self) -> LoadResult<K> {
        let mut o = self.outcome.lock_unpoisoned();
        loop {
            match &o.result {
                Some(r) => return r.share(),
                None => o = unpoisoned(self.ready.wait(o)),
            }
        }
    }

    /// A waiting task: the result if it is in, or its `waker` kept (under
    /// `ticket`, given on the first call) to be woken when it comes.
    pub(crate) fn poll_result(
        &self,
        ticket: &mut Option<usize>,
        waker: &Waker,
    ) -> Poll<LoadResult<K>> {
        let mut o = self.outcome.lock_unpoisoned();
        if let Some(r) = &o.result {
            return Poll::Ready(r.share());
        }
        match *ticket {
            Some(t) => match &mut o.wakers[t] {
                Some(w) if w.will_wake(waker) => {}
                slot => *slot = Some(waker.clone()),
            },
            None => {
                *ticket = Some(o.wakers.len());
                o.wakers.push(Some(waker.clone()));
            }
        }
        Poll::Pending
    }

    /// A waiting task leaves while the record is still registered (it has
    /// taken itself out of `waiters` under the stripe lock): drops its waker.
    pub(crate) fn forget_waker(&self, ticket: Option<usize>) {
        if let Some(t) = ticket {
            let mut o = self.outcome.lock_unpoisoned();
            if let Some(slot) = o.wakers.get_mut(t) {
                *slot = None;
            }
        }
    }

    /// A counted waiting task leaves after the record was forgotten (a
    /// hold may have been taken for it). Returns the entry whose hold it
    /// must release itself, if the load is done; if the result is not in
    /// yet, the completer releases its hold (see [`Pending::complete`]).
    pub(crate) fn leave(&self, ticket: Option<usize>) -> Option<EntryPtr<K>> {
        let mut o = self.outcome.lock_unpoisoned();
        if let Some(slot) = ticket.and_then(|t| o.wakers.get_mut(t)) {
            *slot = None;
        }
        match &o.result {
            Some(LoadResult::Done(e)) => Some(*e),
            Some(_) => None,
            None => {
                o.left += 1;
                None
            }
        }
    }
}

/// The loads in flight for the keys of one hash stripe (few at a time).
pub(crate) struct InFlight<K>(Vec<(K, Arc<Pending<K>>)>);

impl<K> Default for InFlight<K> {
    fn default() -> Self {
        InFlight(Vec::new())
    }
}

impl<K: Eq> InFlight<K> {
    /// Marks every load in flight for `key` as superseded.
    pub(crate) fn supersede(&self, key: &K) {
        for (k, p) in &self.0 {
            if k == key {
                p.superseded.store(true, Ordering::Relaxed);
            }
        }
    }

    /// The load in flight for `key` that a new caller may join: not one
    /// superseded (its bytes may be older than an insert or removal that
    /// has returned; they go to its loader and the waiters that joined it
    /// before, and a new caller loads for itself).
    pub(crate) fn find(&self, key: &K) -> Option<&Arc<Pending<K>>> {
        self.0
            .iter()
            .find(|(k, p)| k == key && !p.superseded.load(Ordering::Relaxed))
            .map(|(_, p)| p)
    }

    /// True while `p` is registered (not yet forgotten).
    pub(crate) fn holds(&self, p: &Arc<Pending<K>>) -> bool {
        self.0.iter().any(|(_, q)| Arc::ptr_eq(p, q))
    }

    pub(crate) fn push(&mut self, key: K, p: Arc<Pending<K>>) {
        self.0.push((key, p));
    }

    pub(crate) fn forget(&mut self, p: &Arc<Pending<K>>) {
        self.0.retain(|(_, q)| !Arc::ptr_eq(p, q));
    }
}
