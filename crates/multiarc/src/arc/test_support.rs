//! What the ARC room's unit tests share: a small core with inline eviction
//! and one sublist (so each list is one LRU order), and short ways to
//! insert, look up and look at it. Keys are `u64`, a key's bytes are
//! `data(key, len)`.

use super::config::{Config, HitMode, Policy};
use super::core::Core;
use super::evict::Inline;
use super::hit_mode::{HitModeImpl, Lazy};
use super::insert::insert_entry;
use super::stats::Event;
use crate::mem::{EntryPtr, Header, State};

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
        policy: Policy::Arc,
        seed: Some(0),
    }
}

/// A core of `max_bytes` in hit mode `M`, with no second tier.
pub(super) fn core<M: HitModeImpl>(max_bytes: u64) -> Core<u64, M> {
    Core::new(config(max_bytes, M::MODE), None)
}

/// A core of `max_bytes` with `Policy::S3arc` (lazy hits), no second tier.
pub(super) fn s3arc_core(max_bytes: u64) -> Core<u64, Lazy> {
    let mut config = config(max_bytes, HitMode::Lazy);
    config.policy = Policy::S3arc;
    Core::new(config, None)
}

/// A core of `max_bytes` with `Policy::Adaptive` (lazy hits), no second
/// tier.
pub(super) fn adaptive_core(max_bytes: u64) -> Core<u64, Lazy> {
    let mut config = config(max_bytes, HitMode::Lazy);
    config.policy = Policy::Adaptive;
    Core::new(config, None)
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
    release(core, e);
}

/// A lookup of `key`: the entry, held, on a hit.
pub(super) fn lookup<M: HitModeImpl>(core: &Core<u64, M>, key: u64) -> Option<EntryPtr<u64>> {
    M::lookup(core, core.hash(&key), &key).map(|(e, _)| e)
}

/// A hit on `key` and the handle's drop; false on a miss.
pub(super) fn hit<M: HitModeImpl>(core: &Core<u64, M>, key: u64) -> bool {
    match lookup(core, key) {
        Some(e) => {
            release(core, e);
            true
        }
        None => false,
    }
}

/// `f` of `key`'s entry in the table (live or ghost), if any.
fn with_entry<M, T>(core: &Core<u64, M>, key: u64, f: impl Fn(&Header<u64>) -> T) -> Option<T> {
    let hash = core.hash(&key);
    let stripe = core.table.write(hash);
    // SAFETY: in the table, under its stripe lock.
    stripe.find(hash, &key).map(|e| f(unsafe { e.header() }))
}

/// The state of `key`'s entry in the table (live or ghost), if any.
pub(super) fn state_of<M>(core: &Core<u64, M>, key: u64) -> Option<State> {
    with_entry(core, key, Header::state)
}

/// The policy's mark on `key`'s entry in the table, if any.
pub(super) fn mark_of<M>(core: &Core<u64, M>, key: u64) -> Option<u8> {
    with_entry(core, key, Header::policy_mark)
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

/// Reading an entry in the tests. Each test looks only at entries it keeps
/// alive: held by the test, or retired (lazy mode) while the test is pinned
/// or before any garbage collection (test cores run no evict thread, and
/// only a collection frees a retired entry), or live in a core that only
/// this thread uses. Eager entries are read only while held or cached.
pub(super) trait Peek {
    type Key;
    /// The entry's header.
    fn peek(&self) -> &crate::mem::Header<Self::Key>;
    /// The first `len` bytes of its data.
    fn peek_data(&self, len: usize) -> &[u8];
}

impl<K> Peek for EntryPtr<K> {
    type Key = K;
    fn peek(&self) -> &crate::mem::Header<K> {
        // SAFETY: the tests keep the entries they read alive (the trait's
        // comment says how).
        unsafe { self.header() }
    }
    fn peek_data(&self, len: usize) -> &[u8] {
        // SAFETY: as `peek`; `len` is at most the data's length (tests pass
        // a length the table gave or the entry's own).
        unsafe { self.data_prefix(len) }
    }
}

/// Drops a hold the test took (`HitModeImpl::release`).
pub(super) fn release<M: HitModeImpl>(core: &Core<u64, M>, e: EntryPtr<u64>) {
    // SAFETY: the test took this hold (an insert or a lookup) and releases
    // it once.
    unsafe { M::release(core, e) }
}

/// What eviction would do with `e`, linked in `state`'s list, at its tail
/// (`HitModeImpl::at_tail`), under the locks the walk holds then: its
/// stripe's (exclusive) and its sublist's.
pub(super) fn at_tail<M: HitModeImpl>(
    core: &Core<u64, M>,
    e: EntryPtr<u64>,
    state: State,
) -> super::hit_mode::Tail {
    let hash = core.hash(&e.peek().key);
    let _stripe = core.table.write(hash);
    let _sublist = core.list(state).lock_sublist(core.sublist_of(hash));
    // SAFETY: linked in `state`'s list (the test's own core, used by this
    // thread only), with its stripe and sublist locks held.
    unsafe { M::at_tail(core, e, state) }
}
