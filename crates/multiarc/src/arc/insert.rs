//! The ARC's miss: an insert (by `insert`, or a completed load) and a
//! removal. Ghost hits adapt `p`, room is made (inline, or by waking the
//! evict thread), and the new entry is installed in the table.

use super::core::Core;
use super::evict::Evictor;
use super::hit_mode::HitModeImpl;
use super::inflight::Pending;
use super::key::Key;
use super::policy::GhostHit;
use super::replacement::MARK_NONE;
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
    insert_entry_as::<K, M, V>(core, key, data, pending, l2_origin, false)
}

/// [`insert_entry`], for bytes read ahead of any demand (`read_ahead`;
/// OpenZFS's prefetch read) or not. A buffer read ahead is no use of its
/// key yet: it enters MRU marked (`Header::read_ahead`), also on a ghost
/// hit, which then neither adapts `p` nor counts as a ghost hit (a read
/// ahead is no evidence that the lists are the wrong size), and the first
/// demand use of it will be its first use (`hit_mode.rs`). Demand readers
/// already waiting for the load make it a used buffer at once. A demand
/// insert over the MRU ghost of a buffer read ahead and evicted unused
/// adapts `p` as any ghost hit but enters MRU: it was never used before.
pub(crate) fn insert_entry_as<K: Key, M: HitModeImpl, V: Evictor>(
    core: &Core<K, M>,
    key: K,
    data: &[u8],
    pending: Option<&Arc<Pending<K>>>,
    l2_origin: Option<GhostHit>,
    read_ahead: bool,
) -> EntryPtr<K> {
    // A second tier's copy read back ahead of any demand is no ghost hit.
    let l2_origin = if read_ahead { None } else { l2_origin };
    let hash = core.hash(&key);
    let idx = core.sublist_of(hash);
    let size = data.len() as u64;
    // ARC and S3ARC move p before their REPLACE, CAR after it.
    let adapt_before_replace = core
        .replacement
        .adapts_before_replace(M::ADAPT_BEFORE_REPLACE);

    // 1. Was the key remembered? A ghost hit adapts p (ARC: with the ghost
    //    still counted, as the paper's delta does) and the ghost goes.
    let mut ghost_hit = None;
    // S3ARC: the MFU ghost hit was a buffer reused in MFU.
    let mut ghost_reused = false;
    // The MRU ghost of a buffer read ahead and evicted unused.
    let mut ghost_unused = false;
    // The policy's mark on the ghost (the adaptive policy's regrets).
    let mut ghost_mark = MARK_NONE;
    let mut reaccess = false;
    {
        let mut stripe = core.table.write(hash);
        if let Some(e) = stripe.find(hash, &key) {
            // SAFETY: in the table, under its stripe lock (held until the
            // block ends); once we take it out below, `detach` has it.
            let e = unsafe { e.header() };
            let state = e.state();
            if state.is_ghost() && read_ahead {
                // Read ahead: the ghost goes, nothing adapts (see above).
                let ghost = stripe.remove(hash, &key).expect("found above");
                // SAFETY: just out of the table under the stripe lock we
                // hold; not used after.
                unsafe { M::detach(core, ghost) };
            } else if state.is_ghost() {
                let hit = if state == State::MruGhost {
                    GhostHit::Mru
                } else {
                    GhostHit::Mfu
                };
                if adapt_before_replace {
                    core.adapt(hit, e.bytes, 0);
                }
                core.events.count(if hit == GhostHit::Mru {
                    Event::MruGhostHit
                } else {
                    Event::MfuGhostHit
                });
                let ghost = stripe.remove(hash, &key).expect("found above");
                ghost_hit = Some((hit, e.bytes));
                ghost_reused = e.reused_in_mfu();
                ghost_unused = e.read_ahead();
                ghost_mark = e.policy_mark();
                // SAFETY: just out of the table under the stripe lock we
                // hold; not used after.
                unsafe { M::detach(core, ghost) };
            } else {
                reaccess = true;
            }
        } else if let Some(hit) = l2_origin {
            if adapt_before_replace {
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
    // The generations policy: the buffer is queued in the generation it
    // reads now; then the miss ticks the clock, which moves on by the whole
    // steps ticked since, before the REPLACE (as the model's miss does).
    let generation = core.generations.as_ref().map(|clock| {
        let read = clock.current();
        clock.tick(size);
        clock.advance(core.c());
        read
    });
    V::make_room(core, size, b2_hit);

    // CAR adapts after its REPLACE, with the hit key still counted in
    // its ghost list (it was taken out above, so add its bytes back).
    if !adapt_before_replace {
        if let Some((hit, ghost_bytes)) = ghost_hit {
            core.adapt(hit, ghost_bytes, ghost_bytes);
        }
    }
    // After the REPLACE and the adaptation it was made for: a switch of
    // experts applies from the next decision on.
    if let Some((_, ghost_bytes)) = ghost_hit {
        core.regret(ghost_mark, ghost_bytes);
    }

    // 3. Install.
    let entry;
    let mut persist = false;
    {
        let mut stripe = core.table.write(hash);
        // The caller's hold, and each waiting loader's.
        let mut holds = 1;
        let mut demanded = false;
        match pending {
            Some(p) => {
                stripe.per_stripe().forget(p);
                let waiters = u64::from(p.waiters.load(Ordering::Relaxed));
                holds += waiters;
                demanded = waiters > 0;
                if p.superseded.load(Ordering::Relaxed) {
                    // The key was written or removed while we loaded:
                    // hand the bytes to the loader and its waiters only,
                    // as an anonymous buffer freed by the last handle.
                    core.events.count(Event::LoadSuperseded);
                    return EntryPtr::new(key, data, State::Anon, holds);
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
        // A ghost hit is admitted to MFU, an MFU-ghost hit as the policy
        // says (S3ARC: only a buffer reused in MFU; the others come back to
        // MRU as new).
        let ghost_to_mfu = match ghost_hit {
            Some((GhostHit::Mfu, _)) => core.replacement.admits_mfu_ghost_to_mfu(ghost_reused),
            Some((GhostHit::Mru, _)) => !ghost_unused,
            None => false,
        };
        let state = if ghost_to_mfu || reaccess || old_live == Some(true) {
            State::Mfu
        } else {
            State::Mru
        };
        entry = EntryPtr::new(key, data, state, holds);
        if let Some(generation) = generation {
            // SAFETY: ours (new, not yet in the table).
            unsafe { entry.header() }.queue_in_generation(generation as u8);
        }
        if read_ahead {
            core.events.count(Event::ReadAheadInsert);
            if demanded {
                // Demand readers waited for it: used already.
                core.events.count(Event::ReadAheadHit);
            } else if state == State::Mru {
                // SAFETY: ours (new, not yet in the table).
                unsafe { entry.header() }.set_read_ahead(true);
            }
        }
        // SAFETY: `entry` is new (and held by us); like every entry, it
        // leaves the table and its list (under their locks) before it is
        // freed. `old` is out of the table under the stripe lock we hold,
        // and not used after.
        unsafe {
            if old_live.is_some() {
                let old = stripe.replace(entry, hash);
                M::detach(core, old);
            } else {
                stripe.insert(entry, hash);
            }
            M::installed(core, state, entry, hash);
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::hit_mode::{Eager, Lazy};
    use super::super::policy;
    use super::super::replacement::{MARK_ARC, MARK_S3ARC};
    use super::super::test_support::{
        adaptive_core, core, count, data, hit, insert, insert_held, keys, mark_of, release,
        s3arc_core, state_of, Peek, BLOCK as B,
    };
    use super::*;
    use crate::mem::meta;

    /// The bytes `key` is cached with, via a lookup (released).
    fn cached<M: HitModeImpl>(core: &Core<u64, M>, key: u64) -> Option<Vec<u8>> {
        let (e, len) = M::lookup(core, core.hash(&key), &key)?;
        let bytes = e.peek_data(len).to_vec();
        release(core, e);
        Some(bytes)
    }

    fn new_key_enters_mru_and_a_reinsert_enters_mfu<M: HitModeImpl>() {
        let mode = M::MODE;
        let core = core::<M>(16 * B);
        insert(&core, 1, 100);
        assert_eq!(
            state_of(&core, 1),
            Some(State::Mru),
            "{mode:?}: a new key enters MRU"
        );
        assert_eq!(keys(&core, State::Mru), [1], "{mode:?}: linked in MRU");
        insert(&core, 1, 300);
        assert_eq!(
            state_of(&core, 1),
            Some(State::Mfu),
            "{mode:?}: a re-insert of a cached key enters MFU"
        );
        assert_eq!(
            (keys(&core, State::Mru), keys(&core, State::Mfu)),
            (vec![], vec![1]),
            "{mode:?}: the old buffer leaves MRU, the new one is linked in MFU"
        );
        let s = core.sizes();
        assert_eq!(
            (s.mru, s.mfu, s.anon),
            (0, 300, 0),
            "{mode:?}: the old bytes go, the new ones count in MFU"
        );
        assert_eq!(
            cached(&core, 1),
            Some(data(1, 300)),
            "{mode:?}: the new bytes are served"
        );
        assert_eq!(
            count(&core, Event::Insert),
            2,
            "{mode:?}: two inserts counted"
        );
    }

    #[test]
    fn a_new_key_enters_mru_and_a_reinsert_enters_mfu() {
        new_key_enters_mru_and_a_reinsert_enters_mfu::<Eager>();
        new_key_enters_mru_and_a_reinsert_enters_mfu::<Lazy>();
    }

    fn reinsert_leaves_the_old_bytes_to_their_handle<M: HitModeImpl>() {
        let mode = M::MODE;
        let core = core::<M>(16 * B);
        let old = insert_held(&core, 1, 100);
        insert(&core, 1, 300);
        assert_eq!(
            old.peek().state(),
            State::Anon,
            "{mode:?}: a replaced buffer still held becomes Anon"
        );
        assert_eq!(
            old.peek_data(100),
            &data(1, 100)[..],
            "{mode:?}: its handle still reads the old bytes"
        );
        let s = core.sizes();
        assert_eq!(
            (s.mfu, s.anon),
            (300, 100),
            "{mode:?}: the replaced bytes count as anon while held"
        );
        let _pinned = crate::mem::pin();
        release(&core, old);
        assert_eq!(
            core.sizes().anon,
            0,
            "{mode:?}: the last release of the replaced buffer frees its bytes"
        );
    }

    #[test]
    fn a_reinsert_leaves_the_old_bytes_to_their_handle() {
        reinsert_leaves_the_old_bytes_to_their_handle::<Eager>();
        reinsert_leaves_the_old_bytes_to_their_handle::<Lazy>();
    }

    fn ghost_hits_adapt_p<M: HitModeImpl>() {
        let mode = M::MODE;
        let c = 4 * B;
        let core = core::<M>(c);
        // MFU [3, 2, 1], then 4 and 5 in MRU: 5 evicts 4 (MRU, p = 0).
        for k in [1, 2, 3, 1, 2, 3, 4, 5] {
            insert(&core, k, B);
        }
        assert_eq!(
            state_of(&core, 4),
            Some(State::MruGhost),
            "{mode:?}: setup: 4 evicted from MRU"
        );
        let p0 = core.p();
        let before = core.sizes();
        insert(&core, 4, B);
        assert!(core.p() > p0, "{mode:?}: a B1 (MRU ghost) hit raises p");
        if M::ADAPT_BEFORE_REPLACE {
            assert_eq!(
                core.p(),
                policy::adapt(p0, c, GhostHit::Mru, B, &before),
                "{mode:?}: ARC adapts p before the replacement, the ghost still counted"
            );
        }
        assert_eq!(
            state_of(&core, 4),
            Some(State::Mfu),
            "{mode:?}: a ghost hit enters MFU"
        );
        assert_eq!(
            count(&core, Event::MruGhostHit),
            1,
            "{mode:?}: the B1 hit counted"
        );
        insert(&core, 6, B);
        assert_eq!(
            state_of(&core, 1),
            Some(State::MfuGhost),
            "{mode:?}: setup: 1 evicted from MFU"
        );
        let p1 = core.p();
        assert!(p1 > 0, "{mode:?}: setup: p above 0");
        let before = core.sizes();
        insert(&core, 1, B);
        assert!(core.p() < p1, "{mode:?}: a B2 (MFU ghost) hit lowers p");
        if M::ADAPT_BEFORE_REPLACE {
            assert_eq!(
                core.p(),
                policy::adapt(p1, c, GhostHit::Mfu, B, &before),
                "{mode:?}: ARC adapts p before the replacement, the ghost still counted"
            );
        }
        assert_eq!(
            state_of(&core, 1),
            Some(State::Mfu),
            "{mode:?}: a B2 hit enters MFU"
        );
        assert_eq!(
            count(&core, Event::MfuGhostHit),
            1,
            "{mode:?}: the B2 hit counted"
        );
    }

    #[test]
    fn a_ghost_hit_adapts_p_and_enters_mfu() {
        ghost_hits_adapt_p::<Eager>();
        ghost_hits_adapt_p::<Lazy>();
    }

    fn insert_supersedes_a_load<M: HitModeImpl>() {
        let mode = M::MODE;
        let core = core::<M>(16 * B);
        let hash = core.hash(&1);
        // A load of key 1 in flight, with one waiter.
        let pending = Arc::new(Pending::new());
        pending.waiters.store(1, Ordering::Relaxed);
        core.table
            .write(hash)
            .per_stripe()
            .push(1, Arc::clone(&pending));
        insert(&core, 1, 300);
        assert!(
            pending.superseded.load(Ordering::Relaxed),
            "{mode:?}: an insert supersedes a load of its key in flight"
        );
        // The load completes with its (older) bytes.
        let loaded = insert_entry::<u64, M, super::super::evict::Inline>(
            &core,
            1,
            &data(1, 100),
            Some(&pending),
            None,
        );
        assert_eq!(
            loaded.peek().state(),
            State::Anon,
            "{mode:?}: a superseded load's bytes are not cached"
        );
        assert_eq!(
            meta::holds(loaded.peek().word()),
            2,
            "{mode:?}: the loader and its waiter each hold the superseded bytes"
        );
        assert!(
            core.table.write(hash).per_stripe().find(&1).is_none(),
            "{mode:?}: the completed load is forgotten"
        );
        let s = core.sizes();
        assert_eq!(
            (s.mru, s.anon),
            (300, 100),
            "{mode:?}: the superseded bytes count as anon while held"
        );
        assert_eq!(
            cached(&core, 1),
            Some(data(1, 300)),
            "{mode:?}: the cache keeps the insert's bytes"
        );
        assert_eq!(count(&core, Event::LoadSuperseded), 1, "{mode:?}: counted");
        let _pinned = crate::mem::pin();
        release(&core, loaded);
        release(&core, loaded);
        assert_eq!(
            core.sizes().anon,
            0,
            "{mode:?}: the superseded bytes go with their last handle"
        );
    }

    #[test]
    fn an_insert_during_a_load_supersedes_it() {
        insert_supersedes_a_load::<Eager>();
        insert_supersedes_a_load::<Lazy>();
    }

    /// Per state, the counted bytes and the bytes linked in the state's
    /// list (counted by the multilist itself) when nothing is held.
    fn check_bytes<M: HitModeImpl>(core: &Core<u64, M>, step: usize, what: &str) {
        let s = core.sizes();
        let linked = |state| core.list(state).totals().0;
        let mode = M::MODE;
        assert_eq!(
            [s.mru, s.mfu, s.mru_ghost, s.mfu_ghost, s.anon],
            [
                linked(State::Mru),
                linked(State::Mfu),
                linked(State::MruGhost),
                linked(State::MfuGhost),
                0
            ],
            "{mode:?}: step {step} ({what}): bytes per state (MRU, MFU, B1, B2, anon) \
             differ from what the lists hold"
        );
        assert!(
            s.data() <= core.c(),
            "{mode:?}: step {step} ({what}): inline eviction left {} bytes over c",
            s.data() - core.c()
        );
    }

    fn byte_counts_are_exact<M: HitModeImpl>() {
        let core = core::<M>(16 * B);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for step in 0..600 {
            let r = next();
            let key = r % 48;
            let what = match (r >> 8) % 10 {
                0..=5 => {
                    insert(&core, key, 1 + (r >> 16) % (3 * B));
                    "insert"
                }
                6..=8 => {
                    hit(&core, key);
                    "hit"
                }
                _ => {
                    remove_key(&core, &key);
                    "remove"
                }
            };
            check_bytes(&core, step, what);
        }
        let s = core.sizes();
        assert!(
            s.mru > 0 && s.mfu > 0 && s.mru_ghost + s.mfu_ghost > 0,
            "{:?}: the run reached every list: {s:?}",
            M::MODE
        );
    }

    #[test]
    fn byte_counts_per_state_are_exact_after_each_step() {
        byte_counts_are_exact::<Eager>();
        byte_counts_are_exact::<Lazy>();
    }

    /// S3ARC's ghost rules, in a cache of 1,000 one-byte buffers (`p`
    /// between 5 and 100): an MRU-ghost hit raises `p` and enters MFU, an
    /// MFU-ghost hit lowers `p` and enters MRU, `p` within its bounds.
    #[test]
    fn s3arc_ghost_hits_move_p_within_its_bounds_and_admit_by_list() {
        let core = s3arc_core(1000);
        assert_eq!(core.p(), 100, "s3arc: p starts at 10% of c");
        for k in 0..1000 {
            insert(&core, k, 1);
        }
        // Full: 1000 evicts MRU's tail 0 (no hits) to the MRU ghost.
        insert(&core, 1000, 1);
        assert_eq!(state_of(&core, 0), Some(State::MruGhost));
        core.set_p_for_test(50);
        insert(&core, 0, 1);
        assert_eq!(
            (state_of(&core, 0), core.p()),
            (Some(State::Mfu), 51),
            "s3arc: an MRU-ghost hit raises p by ARC's step and enters MFU"
        );
        assert_eq!(state_of(&core, 1), Some(State::MruGhost), "its room: 1");
        // p above |MRU|: the next eviction is MFU's (0, no hits left).
        core.set_p_for_test(1000);
        insert(&core, 1001, 1);
        assert_eq!(state_of(&core, 0), Some(State::MfuGhost));
        let before = core.sizes();
        insert(&core, 0, 1);
        assert_eq!(
            state_of(&core, 0),
            Some(State::Mru),
            "s3arc: an MFU-ghost hit of a buffer never hit in MFU enters MRU as a new buffer"
        );
        assert_eq!(
            core.p(),
            policy::s3arc_clamp_p(policy::adapt(1000, 1000, GhostHit::Mfu, 1, &before), 1000),
            "s3arc: an MFU-ghost hit lowers p by ARC's step, into its bounds"
        );
        assert_eq!(core.p(), 100, "s3arc: at most 10% of c");
        assert_eq!(count(&core, Event::MfuGhostHit), 1);
        // At the bottom, p stays there: 1 (an MRU ghost) into MFU, out to
        // the MFU ghost, and back with p at its lower bound.
        insert(&core, 1, 1);
        assert_eq!(state_of(&core, 1), Some(State::Mfu));
        core.set_p_for_test(1000);
        insert(&core, 2000, 1);
        assert_eq!(state_of(&core, 1), Some(State::MfuGhost));
        core.set_p_for_test(5);
        insert(&core, 1, 1);
        assert_eq!(
            (state_of(&core, 1), core.p()),
            (Some(State::Mru), 5),
            "s3arc: p at least 0.5% of c"
        );
    }

    /// S3ARC: an MFU ghost remembers whether its buffer was hit in MFU (the
    /// evictor gave it a turn there); such a ghost hit is admitted to MFU,
    /// unmarked (one never hit there enters MRU: the test above).
    #[test]
    fn s3arc_mfu_ghost_of_a_buffer_reused_in_mfu_is_admitted_to_mfu() {
        let core = s3arc_core(1000);
        for k in 0..1000 {
            insert(&core, k, 1);
        }
        assert!(hit(&core, 0) && hit(&core, 0));
        // Full: MRU's tail 0 (two hits) moves to MFU, 1 is evicted.
        insert(&core, 1000, 1);
        assert_eq!(state_of(&core, 0), Some(State::Mfu));
        assert_eq!(state_of(&core, 1), Some(State::MruGhost));
        // Hit in MFU: the hand gives it a turn, then evicts it (p above
        // |MRU|, so MFU is evicted from).
        assert!(hit(&core, 0));
        core.set_p_for_test(1000);
        insert(&core, 1001, 1);
        assert_eq!(state_of(&core, 0), Some(State::MfuGhost));
        insert(&core, 0, 1);
        assert_eq!(
            state_of(&core, 0),
            Some(State::Mfu),
            "s3arc: an MFU-ghost hit of a buffer reused in MFU enters MFU"
        );
        assert_eq!(count(&core, Event::MfuGhostHit), 1);
        // Back in MFU it is unmarked: never hit there again, it leaves and
        // comes back to MRU.
        core.set_p_for_test(1000);
        insert(&core, 1002, 1);
        assert_eq!(state_of(&core, 0), Some(State::MfuGhost));
        insert(&core, 0, 1);
        assert_eq!(state_of(&core, 0), Some(State::Mru));
    }
    /// The adaptive policy at one sublist: CAR decides first, and marks
    /// the ghost of a buffer it evicts from the list S3ARC would have left;
    /// once its regrets make S3ARC decide, a once-hit MRU buffer that S3ARC
    /// evicts (CAR would have promoted it) is marked S3ARC's, and a miss on
    /// that ghost is S3ARC's regret.
    #[test]
    fn adaptive_marks_contested_evictions_and_counts_regrets_on_their_ghosts() {
        let core = adaptive_core(100);
        for k in 0..100 {
            insert(&core, k, 1);
        }
        for k in 0..50 {
            assert!(hit(&core, k));
        }
        // CAR at the MRU tail: the referenced 0..50 go to MFU, 50 is
        // evicted. S3ARC (p = 10) would also take MRU: no mark.
        insert(&core, 100, 1);
        assert_eq!(state_of(&core, 50), Some(State::MruGhost));
        assert_eq!(mark_of(&core, 50), Some(0), "both experts evict from MRU");
        // CAR's p high: it takes MFU (0 is at its tail), where S3ARC, with
        // MRU above its p, would take MRU.
        core.set_p_for_test(100);
        insert(&core, 101, 1);
        assert_eq!(state_of(&core, 0), Some(State::MfuGhost));
        assert_eq!(mark_of(&core, 0), Some(MARK_ARC), "ARC's contested call");
        insert(&core, 0, 1);
        assert_eq!(core.replacement.switches(), 0, "one regret is not enough");
        // One-byte buffers in a cache of 100 bytes.
        let bound = 100 * policy::ADAPTIVE_SWITCH_PERCENT / 100;
        for _ in 1..bound {
            core.regret(MARK_ARC, 1);
        }
        assert_eq!(core.replacement.switches(), 1, "S3ARC decides now");
        // The MRU tail buffer, hit once: S3ARC evicts it, CAR would not.
        let tail = *keys(&core, State::Mru).last().expect("MRU has buffers");
        assert!(hit(&core, tail));
        insert(&core, 102, 1);
        assert_eq!(state_of(&core, tail), Some(State::MruGhost));
        assert_eq!(
            mark_of(&core, tail),
            Some(MARK_S3ARC),
            "S3ARC's contested call"
        );
        for _ in 1..bound {
            core.regret(MARK_S3ARC, 1);
        }
        assert_eq!(core.replacement.switches(), 1);
        insert(&core, tail, 1);
        assert_eq!(
            core.replacement.switches(),
            2,
            "the miss on S3ARC's marked ghost was its last regret: ARC decides"
        );
    }

    /// Inserts `key` as read ahead (`len` bytes) and drops the hold.
    fn insert_ahead<M: HitModeImpl>(core: &Core<u64, M>, key: u64, len: u64) {
        let e = insert_entry_as::<u64, M, super::super::evict::Inline>(
            core,
            key,
            &data(key, len),
            None,
            None,
            true,
        );
        release(core, e);
    }

    /// A core of 4 blocks with two of them in MFU (so that MRU ghosts fit
    /// in ARC's bound of |T1| + |B1| <= c).
    fn half_mfu<M: HitModeImpl>() -> Core<u64, M> {
        let core = core::<M>(4 * B);
        for k in [100, 101, 100, 101] {
            insert(&core, k, B);
        }
        core
    }

    /// Whether `key`'s entry (live or ghost) is marked read ahead.
    fn marked<M>(core: &Core<u64, M>, key: u64) -> Option<bool> {
        let hash = core.hash(&key);
        let stripe = core.table.write(hash);
        // SAFETY: in the table, under its stripe lock (held).
        stripe
            .find(hash, &key)
            .map(|e| unsafe { e.header() }.read_ahead())
    }

    /// Lazy mode: one hit on a buffer read ahead, by the time the evictor
    /// reaches it, is its first use: requeued in MRU, unmarked; a hit after
    /// that promotes it as any MRU buffer's.
    #[test]
    fn lazy_the_first_use_of_a_buffer_read_ahead_keeps_it_in_mru() {
        let core = half_mfu::<Lazy>();
        insert_ahead(&core, 1, B);
        assert_eq!(
            (state_of(&core, 1), marked(&core, 1)),
            (Some(State::Mru), Some(true))
        );
        assert_eq!(count(&core, Event::ReadAheadInsert), 1);
        assert!(hit(&core, 1), "one read of it");
        insert(&core, 2, B);
        // Full: the walk meets 1 at the MRU tail, hit since it was read
        // ahead: requeued at the MRU head; 2 goes instead.
        insert(&core, 3, B);
        assert_eq!(
            (state_of(&core, 1), marked(&core, 1)),
            (Some(State::Mru), Some(false)),
            "lazy: the first use of a buffer read ahead does not promote it"
        );
        assert_eq!(state_of(&core, 2), Some(State::MruGhost));
        assert_eq!(count(&core, Event::ReadAheadHit), 1);
        assert_eq!(count(&core, Event::ReadAheadEvictedUnused), 0);
        assert!(hit(&core, 1));
        insert(&core, 4, B);
        assert_eq!(
            state_of(&core, 1),
            Some(State::Mfu),
            "lazy: a use after the first promotes it"
        );
        assert_eq!(state_of(&core, 3), Some(State::MruGhost));
    }

    /// Lazy mode: two hits on a buffer read ahead before the evictor came
    /// are two uses (eager mode's rule): promoted when it reaches the tail.
    #[test]
    fn lazy_a_buffer_read_ahead_and_used_twice_before_the_evictor_came_is_promoted() {
        let core = half_mfu::<Lazy>();
        insert_ahead(&core, 1, B);
        assert!(hit(&core, 1) && hit(&core, 1), "two reads of it");
        insert(&core, 2, B);
        insert(&core, 3, B);
        assert_eq!(
            (state_of(&core, 1), marked(&core, 1)),
            (Some(State::Mfu), Some(false)),
            "lazy: its first use and a second promote it"
        );
        assert_eq!(count(&core, Event::ReadAheadHit), 1);
        assert_eq!(state_of(&core, 2), Some(State::MruGhost));
    }

    /// A same-use hit of `key` (`lookup_same_use`), released at once.
    fn same_use_hit<M: HitModeImpl>(core: &Core<u64, M>, key: u64) -> bool {
        match M::lookup_same_use(core, core.hash(&key), &key) {
            Some((e, _)) => {
                release(core, e);
                true
            }
            None => false,
        }
    }

    /// Reads that are part of a use already counted count no access, in
    /// either mode: a buffer read ahead, used once and then read again that
    /// way, is not promoted (lazy: requeued in MRU, its one use; eager: it
    /// stayed in MRU and, least recent there, is evicted); a buffer
    /// inserted on demand (its first use) and read again that way stays in
    /// MRU, and is evicted as read once.
    fn same_use_reads_count_no_access<M: HitModeImpl>() {
        let mode = M::MODE;
        let core = half_mfu::<M>();
        insert_ahead(&core, 1, B);
        assert!(hit(&core, 1), "{mode:?}: its use");
        assert!(same_use_hit(&core, 1) && same_use_hit(&core, 1));
        insert(&core, 2, B);
        assert!(same_use_hit(&core, 2), "{mode:?}: part of its insert's use");
        assert_eq!(state_of(&core, 2), Some(State::Mru), "{mode:?}");
        insert(&core, 3, B);
        assert_ne!(state_of(&core, 1), Some(State::Mfu), "{mode:?}: one use");
        assert_eq!(marked(&core, 1), Some(false), "{mode:?}: used");
        assert_eq!(count(&core, Event::ReadAheadHit), 1, "{mode:?}");
        insert(&core, 4, B);
        assert_eq!(state_of(&core, 2), Some(State::MruGhost), "{mode:?}");
        assert!(!same_use_hit(&core, 2), "{mode:?}: a ghost is a miss");
        assert_eq!(
            (state_of(&core, 100), state_of(&core, 101)),
            (Some(State::Mfu), Some(State::Mfu)),
            "{mode:?}: what was read twice stays"
        );
    }

    #[test]
    fn lazy_same_use_reads_count_no_access() {
        same_use_reads_count_no_access::<Lazy>();
    }

    #[test]
    fn eager_same_use_reads_count_no_access() {
        same_use_reads_count_no_access::<Eager>();
    }

    /// Eager mode (OpenZFS's own rule): the first hit on a buffer read
    /// ahead clears the mark and leaves it in MRU; the next one promotes.
    #[test]
    fn eager_the_first_hit_on_a_buffer_read_ahead_keeps_it_in_mru() {
        let core = core::<Eager>(4 * B);
        insert_ahead(&core, 1, B);
        assert_eq!(marked(&core, 1), Some(true));
        assert!(hit(&core, 1));
        assert_eq!(
            (state_of(&core, 1), marked(&core, 1)),
            (Some(State::Mru), Some(false)),
            "eager: the first hit on a buffer read ahead does not promote it"
        );
        assert_eq!(count(&core, Event::ReadAheadHit), 1);
        assert!(hit(&core, 1));
        assert_eq!(
            state_of(&core, 1),
            Some(State::Mfu),
            "eager: the second does"
        );
        assert_eq!(count(&core, Event::ReadAheadHit), 1);
    }

    /// A buffer read ahead and evicted unused is counted and its ghost
    /// marked; a demand for it later adapts `p` as a ghost hit but enters
    /// MRU (it was never used), unmarked.
    fn unused_read_ahead_ghost<M: HitModeImpl>() {
        let mode = M::MODE;
        let core = half_mfu::<M>();
        insert_ahead(&core, 1, B);
        insert(&core, 2, B);
        insert(&core, 3, B);
        assert_eq!(
            (state_of(&core, 1), marked(&core, 1)),
            (Some(State::MruGhost), Some(true)),
            "{mode:?}: evicted unused, its ghost marked"
        );
        assert_eq!(count(&core, Event::ReadAheadEvictedUnused), 1, "{mode:?}");
        let p0 = core.p();
        insert(&core, 1, B);
        assert_eq!(
            (state_of(&core, 1), marked(&core, 1)),
            (Some(State::Mru), Some(false)),
            "{mode:?}: a demand for a buffer read ahead and evicted unused is its first use"
        );
        assert!(core.p() > p0, "{mode:?}: the ghost hit raised p");
        assert_eq!(count(&core, Event::MruGhostHit), 1, "{mode:?}");
    }

    #[test]
    fn a_buffer_read_ahead_and_evicted_unused_comes_back_to_mru() {
        unused_read_ahead_ghost::<Eager>();
        unused_read_ahead_ghost::<Lazy>();
    }

    /// A read ahead of a key remembered as a ghost is no ghost hit: `p`
    /// stays, nothing counted, the buffer enters MRU marked. Demand
    /// readers waiting for a load read ahead make it used at once.
    fn read_ahead_over_a_ghost_and_with_waiters<M: HitModeImpl>() {
        let mode = M::MODE;
        let core = half_mfu::<M>();
        for k in 1..=3 {
            insert(&core, k, B);
        }
        assert_eq!(state_of(&core, 1), Some(State::MruGhost), "{mode:?}");
        let p0 = core.p();
        insert_ahead(&core, 1, B);
        assert_eq!(
            (state_of(&core, 1), marked(&core, 1), core.p()),
            (Some(State::Mru), Some(true), p0),
            "{mode:?}: a read ahead over a ghost enters MRU marked, p unchanged"
        );
        assert_eq!(
            count(&core, Event::MruGhostHit) + count(&core, Event::MfuGhostHit),
            0,
            "{mode:?}: a read ahead is no ghost hit"
        );
        let hash = core.hash(&9);
        let pending = Arc::new(Pending::new());
        pending.waiters.store(1, Ordering::Relaxed);
        core.table
            .write(hash)
            .per_stripe()
            .push(9, Arc::clone(&pending));
        let e = insert_entry_as::<u64, M, super::super::evict::Inline>(
            &core,
            9,
            &data(9, B),
            Some(&pending),
            None,
            true,
        );
        assert_eq!(
            (state_of(&core, 9), marked(&core, 9)),
            (Some(State::Mru), Some(false)),
            "{mode:?}: a load read ahead that a demand waited for is used"
        );
        assert_eq!(count(&core, Event::ReadAheadHit), 1, "{mode:?}");
        assert_eq!(count(&core, Event::ReadAheadInsert), 2, "{mode:?}");
        release(&core, e);
        release(&core, e);
    }

    #[test]
    fn a_read_ahead_is_no_ghost_hit_and_a_waited_for_one_is_used() {
        read_ahead_over_a_ghost_and_with_waiters::<Eager>();
        read_ahead_over_a_ghost_and_with_waiters::<Lazy>();
    }
}
