//! What the ARC room's unit tests share: a small core with inline eviction
//! and one sublist (so each list is one LRU order), and short ways to
//! insert, look up and look at it. Keys are `u64`, a key's bytes are
//! `data(key, len)`.

use super::config::{Config, HitMode};
use super::core::Core;
use super::evict::Inline;
use super::hit_mode::HitModeImpl;
use super::insert::insert_entry;
use super::stats::Event;
use crate::mem::{EntryPtr, State};

/// One block of the tests' caches.
pub(super) const BLOCK: u64 = 4096;

/// Settings for a core of `max_bytes`: inline eviction, one sublist.
pub(super) fn config(max_bytes: u64, hit_mode: HitMode) -> Config {
    Config {
        max_bytes,
        min_bytes: 0,
        sublists: 1,
        evict_batch_limit: 10,
        overflow_shift: 7,
        hash_stripes: 64,
        inline_eviction: true,
        hit_mode,
    }
}

/// A core of `max_bytes` in hit mode `M`, with no second tier.
pub(super) fn core<M: HitModeImpl>(max_bytes: u64) -> Core<u64, M> {
    Core::new(config(max_bytes, M::MODE), None)
}

/// The bytes the tests cache under `key`.
pub(super) fn data(key: u64, len: u64) -> Vec<u8> {
    (0..len).map(|i| (key * 31 + i * 7) as u8).collect()
}

/// Inserts `len` bytes under `key` (inline eviction); the caller keeps
/// the returned entry's hold.
pub(super) fn insert_held<M: HitModeImpl>(
    core: &Core<u64, M>,
    key: u64,
    len: u64,
) -> EntryPtr<u64> {
    insert_entry::<u64, M, Inline>(core, key, &data(key, len), None, None)
}

/// Inserts `len` bytes under `key` and lets go of the handle.
pub(super) fn insert<M: HitModeImpl>(core: &Core<u64, M>, key: u64, len: u64) {
    let e = insert_held(core, key, len);
    M::release(core, e);
}

/// A lookup of `key`: the entry, held, on a hit.
pub(super) fn lookup<M: HitModeImpl>(core: &Core<u64, M>, key: u64) -> Option<EntryPtr<u64>> {
    M::lookup(core, core.hash(&key), &key).map(|(e, _)| e)
}

/// A hit on `key` and the handle's drop; false on a miss.
pub(super) fn hit<M: HitModeImpl>(core: &Core<u64, M>, key: u64) -> bool {
    match lookup(core, key) {
        Some(e) => {
            M::release(core, e);
            true
        }
        None => false,
    }
}

/// The state of `key`'s entry in the table (live or ghost), if any.
pub(super) fn state_of<M>(core: &Core<u64, M>, key: u64) -> Option<State> {
    let hash = core.hash(&key);
    let stripe = core.table.write(hash);
    stripe.find(hash, &key).map(|e| e.state())
}

/// The keys linked in `state`'s list, head (most recent) first.
pub(super) fn keys<M>(core: &Core<u64, M>, state: State) -> Vec<u64> {
    assert_eq!(core.config.sublists, 1, "the tests' lists are one sublist");
    core.list(state).lock_sublist(0).keys_from_head()
}

/// An event counter's value.
pub(super) fn count<M>(core: &Core<u64, M>, event: Event) -> u64 {
    core.events.get(event)
}
