//! The record of a read-through load in flight, shared by the thread running
//! the loader and the threads waiting for it (the single-flight logic itself
//! is in `load.rs`). Each hash stripe keeps the loads of its keys as its
//! `per_stripe` value, under the stripe's lock.

use crate::mem::sync::{unpoisoned, LockUnpoisoned};
use crate::mem::sync::{AtomicBool, AtomicU32, Ordering};
use crate::mem::EntryPtr;
use std::any::Any;
use std::sync::{Arc, Condvar, Mutex};

/// The outcome of a read-through load, shared with the threads waiting for it.
pub(crate) enum LoadResult<K> {
    /// Loaded and inserted; each waiter's hold was taken for it.
    Done(EntryPtr<K>),
    /// The loader failed; the error (an `Arc<E>`) is shared.
    Failed(Arc<dyn Any + Send + Sync>),
    /// The loader panicked; waiters retry on their own.
    Abandoned,
}

/// A load in flight: other threads missing the same key wait here.
pub(crate) struct Pending<K> {
    /// Threads waiting; changed only under the key's stripe lock.
    pub(crate) waiters: AtomicU32,
    /// An `insert` or `remove` of the key came after this load started: its
    /// bytes may predate that change, so they go to the waiting callers but
    /// are not cached. Changed and read only under the key's stripe lock.
    pub(crate) superseded: AtomicBool,
    result: Mutex<Option<LoadResult<K>>>,
    ready: Condvar,
}

impl<K> Pending<K> {
    pub(crate) fn new() -> Self {
        Pending {
            waiters: AtomicU32::new(0),
            superseded: AtomicBool::new(false),
            result: Mutex::new(None),
            ready: Condvar::new(),
        }
    }

    pub(crate) fn complete(&self, result: LoadResult<K>) {
        *self.result.lock_unpoisoned() = Some(result);
        self.ready.notify_all();
    }

    pub(crate) fn wait(&self) -> LoadResult<K> {
        let mut r = self.result.lock_unpoisoned();
        loop {
            match &*r {
                Some(LoadResult::Done(e)) => return LoadResult::Done(*e),
                Some(LoadResult::Failed(err)) => return LoadResult::Failed(Arc::clone(err)),
                Some(LoadResult::Abandoned) => return LoadResult::Abandoned,
                None => r = unpoisoned(self.ready.wait(r)),
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

    pub(crate) fn push(&mut self, key: K, p: Arc<Pending<K>>) {
        self.0.push((key, p));
    }

    pub(crate) fn forget(&mut self, p: &Arc<Pending<K>>) {
        self.0.retain(|(_, q)| !Arc::ptr_eq(p, q));
    }
}
