//! Read-through loads, single-flight: however many threads miss the same key
//! at once, one runs its loader and the others wait for its result
//! (`pending.rs` has the shared record).

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
                // SAFETY: in the table, under its stripe lock (held).
                if unsafe { e.header() }.state().is_live() {
                    // SAFETY: as above.
                    unsafe { M::hold_locked(core, e) };
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
        let mut guard = AbandonOnUnwind {
            core,
            hash,
            pending: &pending,
            armed: true,
        };
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
                    forget_pending(core, hash, &pending);
                    guard.armed = false;
                    pending.complete(LoadResult::Abandoned);
                    return Err(None);
                }
            },
        };
        match load {
            Ok(data) => {
                let entry =
                    insert_entry::<K, M, V>(core, key.clone(), &data, Some(&pending), l2_origin);
                guard.armed = false;
                pending.complete(LoadResult::Done(entry));
                return Ok(entry);
            }
            Err(err) => {
                core.events.count(Event::LoadFailure);
                let err = Arc::new(err);
                forget_pending(core, hash, &pending);
                guard.armed = false;
                pending.complete(LoadResult::Failed(Arc::clone(&err) as _));
                return Err(Some(err));
            }
        }
    }
}

fn forget_pending<K: Key, M>(core: &Core<K, M>, hash: u64, pending: &Arc<Pending<K>>) {
    core.table.write(hash).per_stripe().forget(pending);
}

/// Completes a pending load as abandoned if its loader unwinds.
struct AbandonOnUnwind<'a, K: Key, M> {
    core: &'a Core<K, M>,
    hash: u64,
    pending: &'a Arc<Pending<K>>,
    armed: bool,
}

impl<K: Key, M> Drop for AbandonOnUnwind<'_, K, M> {
    fn drop(&mut self) {
        if self.armed {
            forget_pending(self.core, self.hash, self.pending);
            self.pending.complete(LoadResult::Abandoned);
        }
    }
}
