//! Read-through loads, single-flight: however many threads miss the same key
//! at once, one runs its loader and the others wait for its result
//! (`inflight.rs` has the shared record and its states; `load_async.rs` is
//! the same for tasks, on the same records, so threads and tasks share
//! loads).

use super::core::Core;
use super::evict::Evictor;
use super::hit_mode::HitModeImpl;
use super::inflight::{LoadResult, Pending};
use super::insert::insert_entry;
use super::key::Key;
use super::policy::GhostHit;
use super::stats::Event;
use crate::mem::sync::Ordering;
use crate::mem::EntryPtr;
use std::sync::Arc;

/// The cached entry of `key` with a hold taken, or its copy in the second
/// tier, or the result of `loader`, cached (see `Cache::get_or_load`).
/// Without a loader (`Cache::get` of a key the second tier holds), a key
/// the tier cannot give back is an `Err(None)`.
pub(crate) fn get_or_load<K, M, V, E, F>(
    core: &Core<K, M>,
    key: K,
    loader: Option<F>,
) -> Result<EntryPtr<K>, Option<Arc<E>>>
where
    K: Key,
    M: HitModeImpl,
    V: Evictor,
    F: FnOnce() -> Result<Vec<u8>, E>,
    E: Send + Sync + 'static,
{
    let hash = core.hash(&key);
    let mut loader = loader;
    loop {
        if let Some((entry, _)) = M::lookup(core, hash, &key) {
            return Ok(entry);
        }
        let pending = {
            let mut stripe = core.table.write(hash);
            if let Some(e) = stripe.find(hash, &key) {
                if e.state().is_live() {
                    M::hold_locked(core, e);
                    return Ok(e);
                }
            }
            if let Some(p) = stripe.per_stripe().find(&key) {
                let p = Arc::clone(p);
                p.waiters.fetch_add(1, Ordering::Relaxed);
                drop(stripe);
                core.events.count(Event::Miss);
                core.events.count(Event::LoadWait);
                match p.wait() {
                    // Our hold was taken for us when it was inserted.
                    LoadResult::Done(entry) => return Ok(entry),
                    LoadResult::Failed(err) => match err.downcast::<E>() {
                        Ok(err) => return Err(Some(err)),
                        // Another caller's loader had another error type:
                        // its error is not ours to return; load ourselves.
                        Err(_) => continue,
                    },
                    LoadResult::Abandoned => continue,
                }
            }
            let p = Arc::new(Pending::new());
            stripe.per_stripe().push(key.clone(), Arc::clone(&p));
            p
        };
        core.events.count(Event::Miss);
        let mut guard = AbandonOnDrop::new(core, hash, &pending);
        // The second tier first: its copy is the cached bytes, verified.
        let (load, l2_origin) = match core.tier.as_deref().and_then(|t| t.read(&key)) {
            Some(read) => {
                let origin = if read.mfu {
                    GhostHit::Mfu
                } else {
                    GhostHit::Mru
                };
                (Ok(read.data), Some(origin))
            }
            None => match loader.take() {
                Some(loader) => {
                    core.events.count(Event::Load);
                    (loader(), None)
                }
                None => {
                    // Not in the tier after all (a `get`): let any waiter
                    // load with its own loader.
                    guard.disarm();
                    complete_unloaded(core, hash, &pending, LoadResult::Abandoned);
                    return Err(None);
                }
            },
        };
        match load {
            Ok(data) => {
                let entry =
                    insert_entry::<K, M, V>(core, key.clone(), &data, Some(&pending), l2_origin);
                guard.disarm();
                complete_done(core, &pending, entry);
                return Ok(entry);
            }
            Err(err) => {
                core.events.count(Event::LoadFailure);
                let err = Arc::new(err);
                guard.disarm();
                complete_unloaded(
                    core,
                    hash,
                    &pending,
                    LoadResult::Failed(Arc::clone(&err) as _),
                );
                return Err(Some(err));
            }
        }
    }
}

/// Completes a load whose entry `insert_entry` installed (and whose record
/// it forgot), releasing the holds taken for waiting tasks that left
/// meanwhile (`inflight.rs`).
pub(super) fn complete_done<K: Key, M: HitModeImpl>(
    core: &Core<K, M>,
    pending: &Pending<K>,
    entry: EntryPtr<K>,
) {
    for _ in 0..pending.complete(LoadResult::Done(entry)) {
        M::release(core, entry);
    }
}

/// Completes a load that cached nothing (failed or abandoned): forgets its
/// record, then wakes its waiters with `result`.
pub(super) fn complete_unloaded<K: Key, M>(
    core: &Core<K, M>,
    hash: u64,
    pending: &Arc<Pending<K>>,
    result: LoadResult<K>,
) {
    core.table.write(hash).per_stripe().forget(pending);
    // No hold was taken for anyone: nothing to release for waiters that left.
    let _ = pending.complete(result);
}

/// Completes a pending load as abandoned if its loader unwinds, or (async)
/// if the future running it is dropped before it is done: its waiters are
/// woken and retry, and the first to retry loads with its own loader.
pub(super) struct AbandonOnDrop<'a, K: Key, M> {
    core: &'a Core<K, M>,
    hash: u64,
    pending: &'a Arc<Pending<K>>,
    armed: bool,
}

impl<'a, K: Key, M> AbandonOnDrop<'a, K, M> {
    pub(super) fn new(core: &'a Core<K, M>, hash: u64, pending: &'a Arc<Pending<K>>) -> Self {
        AbandonOnDrop {
            core,
            hash,
            pending,
            armed: true,
        }
    }

    /// The load is being completed otherwise: the drop does nothing.
    pub(super) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl<K: Key, M> Drop for AbandonOnDrop<'_, K, M> {
    fn drop(&mut self) {
        if self.armed {
            complete_unloaded(self.core, self.hash, self.pending, LoadResult::Abandoned);
        }
    }
}
