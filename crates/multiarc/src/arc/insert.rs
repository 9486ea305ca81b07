//! The ARC's miss: an insert (by `insert`, or a completed load) and a
//! removal. Ghost hits adapt `p`, room is made (inline, or by waking the
//! evict thread), and the new entry is installed in the table.

use super::core::Core;
use super::evict::Evictor;
use super::hit_mode::HitModeImpl;
use super::inflight::Pending;
use super::key::Key;
use super::policy::GhostHit;
use super::stats::Event;
use crate::mem::sync::Ordering;
use crate::mem::{EntryPtr, State};
use std::sync::Arc;

/// Inserts `data` under `key`: returns the new entry with one hold for the
/// caller plus one per waiter of `pending` (the load it completes).
/// `l2_origin`: the bytes were read back from the second tier, fed from
/// this list; if the key's ghost is gone by now, it counts as a ghost hit
/// of that list all the same (OpenZFS: an L2-only header is still history).
pub(crate) fn insert_entry<K: Key, M: HitModeImpl, V: Evictor>(
    core: &Core<K, M>,
    key: K,
    data: &[u8],
    pending: Option<&Arc<Pending<K>>>,
    l2_origin: Option<GhostHit>,
) -> EntryPtr<K> {
    let hash = core.hash(&key);
    let idx = core.sublist_of(hash);
    let size = data.len() as u64;

    // 1. Was the key remembered? A ghost hit adapts p (ARC: with the ghost
    //    still counted, as the paper's delta does) and the ghost goes.
    let mut ghost_hit = None;
    let mut reaccess = false;
    {
        let mut stripe = core.table.write(hash);
        if let Some(e) = stripe.find(hash, &key) {
            // SAFETY: in the table, under its stripe lock (held until the
            // block ends); once we take it out below, `detach` has it.
            let e = unsafe { e.header() };
            let state = e.state();
            if state.is_ghost() {
                let hit = if state == State::MruGhost {
                    GhostHit::Mru
                } else {
                    GhostHit::Mfu
                };
                if M::ADAPT_BEFORE_REPLACE {
                    core.adapt(hit, e.bytes, 0);
                }
                core.events.count(if hit == GhostHit::Mru {
                    Event::MruGhostHit
                } else {
                    Event::MfuGhostHit
                });
                let ghost = stripe.remove(hash, &key).expect("found above");
                ghost_hit = Some((hit, e.bytes));
                // SAFETY: just out of the table under the stripe lock we
                // hold; not used after.
                unsafe { M::detach(core, ghost) };
            } else {
                reaccess = true;
            }
        } else if let Some(hit) = l2_origin {
            if M::ADAPT_BEFORE_REPLACE {
                core.adapt(hit, size, size);
            }
            core.events.count(if hit == GhostHit::Mru {
                Event::MruGhostHit
            } else {
                Event::MfuGhostHit
            });
            ghost_hit = Some((hit, size));
        }
    }

    // 2. Make room before the buffer joins a list (the paper's REPLACE
    //    runs before the new page is placed). Its bytes count as
    //    anonymous meanwhile.
    core.add_bytes(idx, State::Anon, size);
    let b2_hit = matches!(ghost_hit, Some((GhostHit::Mfu, _)));
    V::make_room(core, size, b2_hit);

    // CAR adapts after its REPLACE, with the hit key still counted in
    // its ghost list (it was taken out above, so add its bytes back).
    if !M::ADAPT_BEFORE_REPLACE {
        if let Some((hit, ghost_bytes)) = ghost_hit {
            core.adapt(hit, ghost_bytes, ghost_bytes);
        }
    }

    // 3. Install.
    let entry;
    let mut persist = false;
    {
        let mut stripe = core.table.write(hash);
        // The caller's hold, and each waiting loader's.
        let mut holds = 1;
        match pending {
            Some(p) => {
                stripe.per_stripe().forget(p);
                holds += u64::from(p.waiters.load(Ordering::Relaxed));
                if p.superseded.load(Ordering::Relaxed) {
                    // The key was written or removed while we loaded:
                    // hand the bytes to the loader and its waiters only,
                    // as an anonymous buffer freed by the last handle.
                    core.events.count(Event::LoadSuperseded);
                    return EntryPtr::new(key, hash, data, State::Anon, holds);
                }
            }
            None => {
                stripe.per_stripe().supersede(&key);
                // New bytes: a copy in the second tier is stale now. Under
                // the stripe lock, which a feed copying the old bytes holds
                // (memory only: made durable below, without the lock).
                if let Some(tier) = &core.tier {
                    persist = tier.invalidate(&key);
                }
            }
        }
        // SAFETY: in the table, under its stripe lock (held).
        let old_live = stripe
            .find(hash, &key)
            .map(|o| unsafe { o.header() }.state().is_live());
        let state = if ghost_hit.is_some() || reaccess || old_live == Some(true) {
            State::Mfu
        } else {
            State::Mru
        };
        entry = EntryPtr::new(key, hash, data, state, holds);
        // SAFETY: `entry` is new (and held by us); like every entry, it
        // leaves the table and its list (under their locks) before it is
        // freed. `old` is out of the table under the stripe lock we hold,
        // and not used after.
        unsafe {
            if old_live.is_some() {
                let old = stripe.replace(entry);
                M::detach(core, old);
            } else {
                stripe.insert(entry);
            }
            M::installed(core, state, entry);
        }
        core.move_bytes(idx, State::Anon, state, size);
        core.events.count(Event::Insert);
    }
    if persist {
        if let Some(tier) = &core.tier {
            tier.persist_invalidations();
        }
    }
    V::after_insert(core);
    entry
}

/// Drops `key` from the cache (and forgets its ghost); true if a buffer was
/// cached. A load of `key` in flight is superseded.
pub(crate) fn remove_key<K: Key, M: HitModeImpl>(core: &Core<K, M>, key: &K) -> bool {
    let hash = core.hash(key);
    let mut stripe = core.table.write(hash);
    stripe.per_stripe().supersede(key);
    let persist = core.tier.as_ref().is_some_and(|t| t.invalidate(key));
    let live = match stripe.remove(hash, key) {
        // SAFETY: just out of the table under the stripe lock we hold (so
        // alive), and not used after `detach`.
        Some(old) => unsafe {
            let live = old.header().state().is_live();
            M::detach(core, old);
            live
        },
        None => false,
    };
    drop(stripe);
    if persist {
        if let Some(tier) = &core.tier {
            tier.persist_invalidations();
        }
    }
    live
}
