//! Statistics: what [`Cache::stats`](crate::Cache::stats) reports (the
//! counterpart of OpenZFS's `arcstats`).
//!
//! Event counters are striped per thread (see `counter.rs`), so counting a
//! hit writes only the counting thread's own cache line.

use crate::counter::{thread_stripe, Striped};

/// Event counters, by index into the striped cells.
#[derive(Clone, Copy)]
#[repr(usize)]
pub(crate) enum Event {
    Miss,
    MruHit,
    MfuHit,
    MruGhostHit,
    MfuGhostHit,
    Insert,
    Remove,
    Eviction,
    EvictedBytes,
    EvictSkip,
    EvictNotEnough,
    OverflowWait,
    GhostDropped,
    Load,
    LoadFailure,
    LoadWait,
    LoadSuperseded,
}

pub(crate) const EVENTS: usize = Event::LoadSuperseded as usize + 1;

/// Per-thread striped event counters.
pub(crate) struct Events(Striped<EVENTS>);

impl Events {
    pub(crate) fn new(stripes: usize) -> Events {
        Events(Striped::new(stripes))
    }

    #[inline]
    pub(crate) fn count(&self, e: Event) {
        self.0.add(thread_stripe(), e as usize, 1);
    }

    #[inline]
    pub(crate) fn add(&self, e: Event, n: u64) {
        self.0.add(thread_stripe(), e as usize, n);
    }

    pub(crate) fn get(&self, e: Event) -> u64 {
        self.0.sum(e as usize)
    }
}

/// A snapshot of the cache's statistics. Counters count since the cache was
/// built; sizes are current. Taken without stopping the cache, so figures
/// that change meanwhile may not add up exactly.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// `get`/`get_or_load` calls that found the buffer cached.
    pub hits: u64,
    /// Lookups that did not (including ghost hits).
    pub misses: u64,
    /// Hits on buffers in the MRU state (seen once recently).
    pub mru_hits: u64,
    /// Hits on buffers in the MFU state (seen twice or more).
    pub mfu_hits: u64,
    /// Inserts of a key remembered in the MRU ghost list (the MRU target `p` grows).
    pub mru_ghost_hits: u64,
    /// Inserts of a key remembered in the MFU ghost list (`p` shrinks).
    pub mfu_ghost_hits: u64,
    /// Buffers inserted (by `insert` or by a completed load).
    pub inserts: u64,
    /// Buffers removed by `remove` or replaced by a new insert of their key.
    pub removes: u64,
    /// Buffers evicted.
    pub evictions: u64,
    /// Bytes evicted.
    pub evicted_bytes: u64,
    /// Buffers eviction passed over because a thread was taking a hold on
    /// them at that moment (held buffers themselves are not on the lists).
    pub evict_skip: u64,
    /// Eviction passes that could not bring the cache under its target
    /// (everything left was held).
    pub evict_not_enough: u64,
    /// Inserts that had to wait for the evict thread (cache past
    /// `c + c >> overflow_shift`).
    pub overflow_waits: u64,
    /// Ghost entries dropped to keep the history within its bounds.
    pub ghosts_dropped: u64,
    /// Loader runs by `get_or_load`.
    pub loads: u64,
    /// Loader runs that failed.
    pub load_failures: u64,
    /// Loads whose bytes were returned but not cached, because the key was
    /// inserted or removed while they ran (their bytes may predate it).
    pub loads_superseded: u64,
    /// `get_or_load` calls that waited for another thread's load of the same key.
    pub load_waits: u64,
    /// Bytes of cached data: `mru_bytes + mfu_bytes + anon_bytes`.
    pub size: u64,
    /// The target size `c` (the current `max_bytes`).
    pub c: u64,
    /// The adaptive target for the MRU state's bytes, `0 <= p <= c`.
    pub p: u64,
    /// The floor for `set_max_bytes`.
    pub min_bytes: u64,
    /// Bytes in the MRU state (held or not).
    pub mru_bytes: u64,
    /// Bytes in the MFU state (held or not).
    pub mfu_bytes: u64,
    /// Bytes of evicted MRU buffers remembered by the MRU ghost list.
    pub mru_ghost_bytes: u64,
    /// Bytes of evicted MFU buffers remembered by the MFU ghost list.
    pub mfu_ghost_bytes: u64,
    /// Bytes not in any state: buffers being inserted and removed buffers
    /// still held (OpenZFS's anonymous state).
    pub anon_bytes: u64,
    /// Bytes of MRU/MFU buffers currently held by handles (off the lists, so
    /// not evictable).
    pub held_bytes: u64,
    /// Bytes of MRU/MFU buffers on the lists (evictable now).
    pub evictable_bytes: u64,
    /// Entries in the hash table (cached buffers and ghosts).
    pub hash_elements: u64,
    /// Hash inserts whose home slot was already taken.
    pub hash_collisions: u64,
    /// The longest probe run seen in the (open-addressed) hash table: the
    /// counterpart of ZFS's longest hash chain.
    pub hash_chain_max: u64,
    /// Sublists per state list.
    pub sublists: u64,
}

impl Stats {
    /// Hits divided by lookups (0 when there were none).
    pub fn hit_ratio(&self) -> f64 {
        let total = self.hits + self.misses;
        if total == 0 {
            0.0
        } else {
            self.hits as f64 / total as f64
        }
    }

    /// Every figure as `(name, value)`, in a stable order (for `arcstats`-style output).
    pub fn to_pairs(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("hits", self.hits),
            ("misses", self.misses),
            ("mru_hits", self.mru_hits),
            ("mfu_hits", self.mfu_hits),
            ("mru_ghost_hits", self.mru_ghost_hits),
            ("mfu_ghost_hits", self.mfu_ghost_hits),
            ("inserts", self.inserts),
            ("removes", self.removes),
            ("evictions", self.evictions),
            ("evicted_bytes", self.evicted_bytes),
            ("evict_skip", self.evict_skip),
            ("evict_not_enough", self.evict_not_enough),
            ("overflow_waits", self.overflow_waits),
            ("ghosts_dropped", self.ghosts_dropped),
            ("loads", self.loads),
            ("load_failures", self.load_failures),
            ("loads_superseded", self.loads_superseded),
            ("load_waits", self.load_waits),
            ("size", self.size),
            ("c", self.c),
            ("p", self.p),
            ("min_bytes", self.min_bytes),
            ("mru_bytes", self.mru_bytes),
            ("mfu_bytes", self.mfu_bytes),
            ("mru_ghost_bytes", self.mru_ghost_bytes),
            ("mfu_ghost_bytes", self.mfu_ghost_bytes),
            ("anon_bytes", self.anon_bytes),
            ("held_bytes", self.held_bytes),
            ("evictable_bytes", self.evictable_bytes),
            ("hash_elements", self.hash_elements),
            ("hash_collisions", self.hash_collisions),
            ("hash_chain_max", self.hash_chain_max),
            ("sublists", self.sublists),
        ]
    }
}
