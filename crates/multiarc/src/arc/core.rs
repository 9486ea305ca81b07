//! What every part of the ARC shares: the configuration, the hash table,
//! the four state lists, the ARC targets `c` and `p`, the striped byte
//! and event counters, and the second tier if any. `Core<K, M>` is generic
//! over the hit mode `M` (`hit_mode.rs`) only so that each mode's code is
//! compiled on its own; the struct itself is the same for both. Which lock
//! guards what, and in which order they are taken: the locking model at
//! the top of `arc/mod.rs`.

use super::config::{Config, HitMode, Policy, GENERATIONS_KEPT};
use super::evict_handshake::EvictHandshake;
use super::generations::GenerationClock;
use super::inflight::InFlight;
use super::policy::{GhostHit, Sizes};
use super::replacement::{rules, Replacement};
use super::second_tier::SecondTier;
use super::stats::Events;
use crate::lock::{CachePadded, Mutex};
use crate::mem::sync::{AtomicU64, Ordering};
use crate::mem::{Draws, EntryPtr, HashTable, Limbo, Multilist, State, Striped};
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;
use std::sync::Arc;

/// Hashes keys: seeded at random per cache (so adversarial keys cannot be
/// aimed at one stripe) unless `Builder::seed` gave a seed, and fixed under
/// loom, whose executions must repeat.
#[cfg(not(loom))]
type KeyHasher = foldhash::fast::SeedableRandomState;
#[cfg(loom)]
type KeyHasher = foldhash::fast::FixedState;

/// Retired entries of one sublist index, on their own cache line.
type GarbageBin<K> = CachePadded<Mutex<Limbo<EntryPtr<K>>>>;

/// Everything the cache's threads share.
pub(crate) struct Core<K, M> {
    /// The replacement policy's rules, chosen once from `config.policy`.
    pub(crate) replacement: Box<dyn Replacement>,
    pub(crate) config: Config,
    /// The hash table, which also holds the key hasher (`hash`).
    pub(crate) table: HashTable<K, InFlight<K>, KeyHasher>,
    /// Indexed by `State as usize`: MRU, MFU, MRU ghost, MFU ghost.
    lists: [Multilist<K>; 4],
    /// The target size `c` and the MRU target `p`, in bytes.
    c: AtomicU64,
    p: AtomicU64,
    /// Bytes per state (indexed by `State as usize`), striped by sublist.
    bytes: Striped<5>,
    pub(crate) events: Events,
    pub(crate) handshake: EvictHandshake,
    /// The second tier, if the builder added one.
    pub(crate) tier: Option<Arc<dyn SecondTier<K>>>,
    /// The random starts of eviction walks and feeds (`random`).
    draws: Draws,
    /// The generations policy's clock (`Policy::Generations` only).
    pub(crate) generations: Option<GenerationClock>,
    /// Entries out of the table that a probe without the lock may still be
    /// reading (lazy mode), one bin per sublist index.
    garbage: Box<[GarbageBin<K>]>,
    /// Under loom: entries whose grace period passed, marked `freed` and
    /// kept until the cache goes (see `mem/entry.rs`).
    #[cfg(loom)]
    graveyard: Mutex<Vec<EntryPtr<K>>>,
    mode: PhantomData<fn() -> M>,
}

/// A garbage bin tries to free what it holds every this many retirements
/// (two epoch scans and two `membarrier`s per try: a retired entry needs two
/// advances). What waits is then about a batch per bin, or a few while a
/// pinned reader holds the epoch back. Under loom, every retirement tries,
/// so that the models meet frees racing with probes.
#[cfg(not(loom))]
const RETIRE_BATCH: usize = 16;
#[cfg(loom)]
const RETIRE_BATCH: usize = 1;

impl<K: Eq + Hash, M> Core<K, M> {
    pub(crate) fn new(config: Config, tier: Option<Arc<dyn SecondTier<K>>>) -> Self {
        let n = config.sublists;
        let expected = (config.max_bytes / 4096).min(1 << 26) as usize;
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let replacement = rules(config.policy, config.max_bytes);
        Core {
            table: HashTable::new(
                config.hash_stripes,
                expected,
                config.hit_mode == HitMode::Lazy,
                key_hasher(config.seed),
            ),
            lists: [
                Multilist::new(n, "mru.sublist"),
                Multilist::new(n, "mfu.sublist"),
                Multilist::new(n, "mru_ghost.sublist"),
                Multilist::new(n, "mfu_ghost.sublist"),
            ],
            c: AtomicU64::new(config.max_bytes),
            p: AtomicU64::new(replacement.initial_p(config.max_bytes)),
            bytes: Striped::new(n),
            events: Events::new((cpus * 2).max(8)),
            handshake: EvictHandshake::default(),
            tier,
            draws: Draws::new(config.seed.unwrap_or_else(random_seed)),
            generations: (config.policy == Policy::Generations)
                .then(|| GenerationClock::new((cpus * 2).max(8))),
            garbage: (0..n)
                .map(|_| CachePadded::new(Mutex::new(Limbo::default())))
                .collect(),
            #[cfg(loom)]
            graveyard: Mutex::new(Vec::new()),
            replacement,
            config,
            mode: PhantomData,
        }
    }

    #[inline]
    pub(crate) fn hash(&self, key: &K) -> u64 {
        self.table.hash(key)
    }

    /// Frees what the garbage bins and the table's replaced slot arrays
    /// may free now (the evict thread, after each pass).
    pub(crate) fn collect_garbage(&self) {
        for bin in self.garbage.iter() {
            bin.lock().collect(|e| self.free_retired(e));
        }
        self.table.collect_retired();
    }
}

/// The shared half of the key hasher's seed: fixed, not drawn per process.
///
/// For a `u64` key, foldhash multiplies the key, XORed with the per-cache
/// seed, by a constant of this shared seed and folds the product. A block
/// cache's keys are mostly runs of consecutive block numbers, and over such
/// a run that product is a Weyl sequence: how evenly the run's homes spread
/// over a stripe's slots depends on the constant only (the per-cache seed
/// shifts the run, which changes nothing). foldhash's fixed constant and
/// one per-process draw in a few cluster them: linear probing then passes
/// about 0.26 slots past the home on average at a quarter full, where
/// random homes pass 0.17, and each slot passed costs a hit a compare and
/// often a mispredicted branch. `from_u64(24)`'s constant was chosen by
/// simulating the table (256 stripes) over 4,096 keys at strides 1, 2, 8,
/// 4,096, 8,192 and 65,536: mean displacement 0.00-0.10 at a quarter full;
/// eight objects of 4,096 keys, half full: 0.46-0.47, random homes 0.50.
/// It made 1-thread hold hits 7-14% faster in each of five processes
/// alternated with `global_fixed()` (docs/BENCHMARKS.md). The
/// per-cache seed stays random: keys cannot be aimed at one stripe of a
/// cache whose seed they do not know.
///
/// A cache built with `Builder::seed` still hashes with foldhash's
/// `global_fixed()` shared seed, as before: its placement, and so the lazy
/// mode's replayed hit ratios (sublists come from the same hash), stay
/// those every recorded replay figure was measured with.
#[cfg(not(loom))]
static KEY_HASH_SHARED_SEED: foldhash::SharedSeed = foldhash::SharedSeed::from_u64(24);

/// The key hasher of a cache with seed `seed` (`None`: random).
#[cfg(not(loom))]
fn key_hasher(seed: Option<u64>) -> KeyHasher {
    match seed {
        Some(seed) => KeyHasher::with_seed(seed, foldhash::SharedSeed::global_fixed()),
        None => KeyHasher::with_seed(random_seed(), &KEY_HASH_SHARED_SEED),
    }
}

#[cfg(loom)]
fn key_hasher(_seed: Option<u64>) -> KeyHasher {
    KeyHasher::default()
}

/// A seed for a cache built without one.
fn random_seed() -> u64 {
    foldhash::fast::RandomState::default().hash_one(0u64)
}

impl<K, M> Core<K, M> {
    /// A number of the cache's own pseudo-random sequence (`Builder::seed`),
    /// for where an L2 feed's walk over the sublists starts.
    pub(crate) fn random(&self) -> u64 {
        self.draws.next()
    }

    /// The sublist holding the most bytes of `state` (the lowest index of
    /// those that tie). Sublists whose count reads as negative (a move half
    /// done) count as empty.
    pub(crate) fn fullest_sublist(&self, state: State) -> usize {
        let mut best = (0, 0);
        for i in 0..self.config.sublists {
            let b = self.bytes.get(i, state as usize);
            if b <= u64::MAX / 2 && b > best.1 {
                best = (i, b);
            }
        }
        best.0
    }

    /// The sublist (same index in every state's multilist) of a hash.
    #[inline]
    pub(crate) fn sublist_of(&self, hash: u64) -> usize {
        Multilist::<K>::index_in(self.config.sublists, hash)
    }

    /// The list of a state (live or ghost).
    #[inline]
    pub(crate) fn list(&self, state: State) -> &Multilist<K> {
        &self.lists[state as usize]
    }

    /// Links live `entry`, whose key hashes to `hash`, in MFU: at the head,
    /// or under the generations policy at the end of the segment of the
    /// generation it noted.
    ///
    /// # Safety
    /// As `Multilist::push_head`; the caller holds the entry's stripe lock
    /// exclusively.
    pub(crate) unsafe fn push_mfu(&self, entry: EntryPtr<K>, hash: u64) {
        let list = self.list(State::Mfu);
        match &self.generations {
            // SAFETY: this function's contract.
            None => unsafe { list.push_head(entry, hash) },
            Some(clock) => {
                // SAFETY: alive (this function's contract).
                let noted = unsafe { entry.header() }.noted_generation();
                // SAFETY: this function's contract.
                unsafe {
                    list.link_in_generation(
                        entry,
                        hash,
                        clock.widen(noted),
                        clock.current(),
                        GENERATIONS_KEPT,
                    )
                };
            }
        }
    }

    /// The four lists: MRU, MFU, MRU ghost, MFU ghost.
    pub(crate) fn lists(&self) -> &[Multilist<K>; 4] {
        &self.lists
    }

    /// The MRU target `p`.
    pub(crate) fn p(&self) -> u64 {
        self.p.load(Ordering::Acquire)
    }

    /// Sets the target size `c` to `bytes`, keeping the learned MRU/MFU
    /// split `p` in proportion (within the policy's bounds for the new
    /// `c`); returns the old `c`.
    pub(crate) fn set_target(&self, bytes: u64) -> u64 {
        let old = self.c.swap(bytes, Ordering::AcqRel);
        let rules = &*self.replacement;
        rules.rescale_others(old, bytes);
        let _ = self
            .p
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| {
                Some(rules.rescale_p(p, old, bytes))
            });
        old
    }

    /// How many ghost bytes to drop (from B1, from B2): the policy's bounds.
    pub(crate) fn ghost_excess(&self, s: &Sizes, c: u64) -> (u64, u64) {
        self.replacement.ghost_excess(s, c)
    }

    /// Counts `n` more bytes in `state` (sublist `idx`'s stripe).
    #[inline]
    pub(crate) fn add_bytes(&self, idx: usize, state: State, n: u64) {
        self.bytes.add(idx, state as usize, n);
    }

    /// Counts `n` fewer bytes in `state` (sublist `idx`'s stripe).
    #[inline]
    pub(crate) fn sub_bytes(&self, idx: usize, state: State, n: u64) {
        self.bytes.sub(idx, state as usize, n);
    }

    /// Frees `e` once no probe without the lock can be reading it
    /// (`mem::epoch`).
    ///
    /// # Safety
    /// `e` is out of the table and every list, and unheld (`Dead`): the
    /// caller is its last user, retires it once and does not use it after.
    pub(crate) unsafe fn retire(&self, e: EntryPtr<K>)
    where
        K: Eq + Hash,
    {
        // SAFETY: ours until retired (this function's contract).
        let hash = self.hash(&unsafe { e.header() }.key);
        let mut bin = self.garbage[self.sublist_of(hash)].lock();
        bin.retire(e);
        // Every RETIRE_BATCH retirements, not every one past it: while a
        // reader stays pinned (preempted), the bin grows, and each attempt
        // costs a membarrier.
        if bin.len().is_multiple_of(RETIRE_BATCH) {
            bin.collect_advancing(2, |e| self.free_retired(e));
        }
    }

    /// `e`'s grace period has passed (the limbo hands out no other).
    fn free_retired(&self, e: EntryPtr<K>) {
        #[cfg(not(loom))]
        // SAFETY: retired (out of the table and every list, unheld) and no
        // probe that could have seen it is still running.
        unsafe {
            e.free()
        };
        #[cfg(loom)]
        {
            // SAFETY: under loom, retired entries are kept until the core
            // goes (in the graveyard), only marked freed.
            unsafe { e.header() }.freed.store(true, Ordering::Relaxed);
            self.graveyard.lock().push(e);
        }
    }

    pub(crate) fn sizes(&self) -> Sizes {
        Sizes {
            mru: self.bytes.sum(State::Mru as usize),
            mfu: self.bytes.sum(State::Mfu as usize),
            mru_ghost: self.bytes.sum(State::MruGhost as usize),
            mfu_ghost: self.bytes.sum(State::MfuGhost as usize),
            anon: self.bytes.sum(State::Anon as usize),
        }
    }

    pub(crate) fn c(&self) -> u64 {
        self.c.load(Ordering::Acquire)
    }

    pub(crate) fn overflow(&self, c: u64) -> u64 {
        (c >> self.config.overflow_shift).max(1)
    }

    /// True when data or history is above its bound.
    pub(crate) fn needs_eviction(&self) -> bool {
        let s = self.sizes();
        let c = self.c();
        s.data() > c || self.ghost_excess(&s, c) != (0, 0)
    }

    /// Moves `n` bytes between states. Adds before it subtracts: a
    /// concurrent reader of the sums may then over-count for a moment (and
    /// evict a little early) but never under-count and stop evicting while
    /// the cache is over its target (loom found that race).
    pub(crate) fn move_bytes(&self, idx: usize, from: State, to: State, n: u64) {
        self.bytes.add(idx, to as usize, n);
        self.bytes.sub(idx, from as usize, n);
    }

    /// Moves `p` for a ghost hit of `size` bytes; `absent` bytes of the hit
    /// key's ghost are no longer counted in its list but should be.
    pub(crate) fn adapt(&self, hit: GhostHit, size: u64, absent: u64) {
        let c = self.c();
        let mut s = self.sizes();
        match hit {
            GhostHit::Mru => s.mru_ghost += absent,
            GhostHit::Mfu => s.mfu_ghost += absent,
        }
        let rules = &*self.replacement;
        let _ = self
            .p
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| {
                Some(rules.adapt(p, c, hit, size, &s))
            });
        rules.adapt_others(c, hit, size, &s);
    }

    /// A miss found a ghost of `size` bytes that the policy marked `mark`
    /// (`Header::policy_mark`): the adaptive policy counts the regret, and
    /// may switch experts.
    pub(crate) fn regret(&self, mark: u8, size: u64) {
        self.replacement.regret(mark, size, self.c(), &self.p);
    }
}

impl<K, M> Drop for Core<K, M> {
    fn drop(&mut self) {
        // No handle outlives the cache (they borrow it), so every entry left
        // is in the table (held-while-removed ones were freed by their last
        // release); the sublists only point at them.
        for e in self.table.drain() {
            // SAFETY: `&mut self`: no other thread can reach the core, and
            // each entry is in the table once.
            unsafe { e.free() };
        }
        #[cfg(loom)]
        for e in self.graveyard.get_mut().drain(..) {
            // SAFETY: marked freed, in nothing else; `&mut self`.
            unsafe { e.free() };
        }
        for bin in self.garbage.iter_mut() {
            for e in bin.get_mut().drain() {
                // SAFETY: retired entries are in no table or list, and no
                // probe of this cache is running (`&mut self`).
                unsafe { e.free() };
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
impl<K, M> Core<K, M> {
    /// Sets the MRU target `p`: for tests of a decision that depends on it.
    pub(super) fn set_p_for_test(&self, p: u64) {
        self.p.store(p, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::hit_mode::Lazy;
    use super::super::policy;
    use super::super::test_support::{core, s3arc_core, BLOCK as B};
    use super::*;

    #[test]
    fn set_target_returns_the_old_c_and_keeps_p_in_proportion() {
        let core = core::<Lazy>(8 * B);
        core.set_p_for_test(2 * B);
        assert_eq!(
            core.set_target(4 * B),
            8 * B,
            "set_target returns the old c"
        );
        assert_eq!(
            (core.c(), core.p()),
            (4 * B, B),
            "set_target keeps the MRU/MFU split: p scaled with c"
        );
    }

    #[test]
    fn bytes_per_state_follow_add_move_and_sub() {
        let core = core::<Lazy>(8 * B);
        core.add_bytes(0, State::Mru, 300);
        core.move_bytes(0, State::Mru, State::Mfu, 100);
        core.sub_bytes(0, State::Mfu, 40);
        let s = core.sizes();
        assert_eq!(
            (s.mru, s.mfu, s.data()),
            (200, 60, 260),
            "per-state bytes after add, move and sub"
        );
    }

    #[test]
    fn eviction_is_needed_past_c_or_past_a_ghost_bound() {
        let core = core::<Lazy>(8 * B);
        core.add_bytes(0, State::Mru, 8 * B);
        assert!(!core.needs_eviction(), "at c exactly: no eviction needed");
        core.add_bytes(0, State::Anon, 1);
        assert!(core.needs_eviction(), "data above c: eviction needed");
        core.sub_bytes(0, State::Anon, 1);
        core.add_bytes(0, State::MruGhost, 1);
        assert!(
            core.needs_eviction(),
            "|T1| + |B1| above c: the ghosts need trimming"
        );
    }

    #[test]
    fn s3arc_p_starts_at_ten_percent_and_a_resize_keeps_it_in_bounds() {
        let core = s3arc_core(1000 * B);
        assert_eq!(core.p(), 100 * B, "s3arc: p starts at 10% of c");
        core.set_target(500 * B);
        assert_eq!(core.p(), 50 * B, "s3arc: p scaled with c");
        core.set_p_for_test(3 * B);
        core.set_target(1000 * B);
        assert_eq!(core.p(), 6 * B, "s3arc: scaled, within 0.5%..10%");
        core.set_p_for_test(1);
        core.set_target(100 * B);
        assert_eq!(
            core.p(),
            policy::s3arc_p_bounds(100 * B).0,
            "s3arc: a p below 0.5% of the new c is raised to it"
        );
        core.set_p_for_test(100 * B);
        core.set_target(200 * B);
        assert_eq!(core.p(), 20 * B, "s3arc: at most 10% of the new c");
    }

    #[test]
    fn fullest_sublist_reads_each_sublists_bytes() {
        let mut config = super::super::test_support::config(8 * B, HitMode::Lazy);
        config.sublists = 4;
        let core = Core::<u64, ()>::new(config, None);
        assert_eq!(core.fullest_sublist(State::Mru), 0, "all empty: the first");
        core.add_bytes(1, State::Mru, 100);
        core.add_bytes(2, State::Mru, 300);
        core.add_bytes(3, State::Mfu, 900);
        assert_eq!(core.fullest_sublist(State::Mru), 2);
        assert_eq!(core.fullest_sublist(State::Mfu), 3);
        // A count below zero (a move half done) counts as empty.
        core.sub_bytes(0, State::Mru, 5);
        assert_eq!(core.fullest_sublist(State::Mru), 2);
        core.add_bytes(1, State::Mru, 200);
        assert_eq!(
            core.fullest_sublist(State::Mru),
            1,
            "ties: the lowest index"
        );
    }
}
