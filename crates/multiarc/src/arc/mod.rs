//! The ARC (Megiddo & Modha, FAST '03) over the memory structures of
//! `mem`: the core state, the replacement policy, the two ways of
//! recording a hit, the miss (insert, single-flight loads), and eviction
//! with its thread. It knows no second tier beyond the trait in
//! `second_tier`.
//!
//! - `core`: [`Core`], what every thread shares: the table, the four state
//!   lists, the targets `c` and `p`, byte counts, statistics.
//! - `policy`: ARC's, CAR's and S3ARC's arithmetic on sizes (pure);
//!   `replacement`: the policy as a type, its rules chosen once.
//! - `hit_mode`: how a hit is recorded ([`HitModeImpl`]: `Eager`, the
//!   OpenZFS way, or `Lazy`, CAR's clock) and what eviction does with a
//!   buffer at a list tail.
//! - `insert`, `load` (with `inflight`): the miss; `load_async` is the
//!   load for tasks (a loader that is a future), on the same in-flight
//!   records, with `io_pool`'s threads for its second-tier reads.
//! - `evict` (with `evict_handshake`): the eviction walk, the evictors and
//!   the evict thread.
//! - `second_tier`: the second tier as the ARC sees it.
//! - `generations`: the generations policy's clock.
//! - `config`, `key`, `stats`: the settings, keys and statistics the facade
//!   shows.
//!
//! # Policies
//!
//! [`Policy`] (the builder's `policy`) says what eviction does; the hit
//! mode says how a hit is recorded. `Policy::Arc` is ARC in the eager mode
//! and CAR in the lazy mode. `Policy::S3arc` (lazy mode only) keeps the
//! same four lists with other rules: MRU is S3-FIFO's probationary queue
//! (`p` within 0.5%..10% of `c`), MFU a clock whose buffers keep a
//! frequency of at most 4, and each ghost list its own bound (80% and 50%
//! of `c`); an MFU ghost remembers whether its buffer was reused in MFU
//! (the header's `reused_in_mfu`). The policy is a type
//! (`replacement`: [`Replacement`](replacement::Replacement), with
//! `ArcRules` and `S3arcRules`), chosen once when the cache is built; the
//! miss and eviction side ask it where the rules differ: the evictor's
//! reading of a tail buffer's hit count (`Lazy::s3arc_at_tail` under
//! S3ARC's tail rule), the choice of list, the ghost bounds and the walk's
//! first sublist (the fullest, not a random one: `evict`), the bounds of
//! `p` (`core`), and where a ghost hit is admitted (`insert`). A hit, a
//! release and the locking below are the lazy mode's, unchanged.
//! `Policy::Adaptive` (lazy mode only) holds both rule sets as experts
//! (`AdaptiveRules`), one deciding at a time: where the other would have
//! chosen differently (the list, by its own `p`; or an MRU buffer hit once,
//! which only S3ARC evicts), the evicted buffer's ghost carries the
//! deciding expert's mark (the header's `policy_mark`), and a miss on a
//! marked ghost is that expert's regret; enough regrets and the other
//! expert decides. Hits are untouched: all of it happens on misses and in
//! the evictor.
//! `Policy::Generations` (lazy mode only) is ARC's rules with MFU in order
//! of coarse generations: a hit notes the clock's generation in its
//! entry, once per generation (the header's policy bytes), and moves an
//! MRU buffer to MFU where the stripe lock is free; each MFU sublist is cut
//! into segments, one per recent generation (`mem::multilist`), and the
//! evictor queues a tail buffer that noted a later generation again in
//! that one's segment (`Lazy::at_tail`, `generations`).
//!
//! # Locking model
//!
//! Every lock of the cache, what it protects, and the order they are taken
//! in (a lock may be taken while holding only locks above it in this list):
//!
//! 1. **Hash stripe** (`mem::table`, a reader-writer lock per stripe of
//!    keys). Exclusive: every change of the stripe's slots, every state
//!    change of an entry hashed to it (ARC state, and in the eager mode a
//!    hold going 0 -> 1 or 1 -> 0), and the stripe's loads in flight
//!    (`inflight`). Shared: the eager lookup's fallback in the lazy mode
//!    and readers that must see an entry stay (the second tier's feed).
//!    The lazy hit takes no lock at all: it probes the slots against the
//!    stripe's sequence count and pins the epoch, so memory it may read is
//!    freed only after it is done (`mem::epoch`).
//! 2. **Sublist** (`mem::multilist`, a mutex per sublist of each state's
//!    list). Its links, and the slot field of the entries linked there.
//!    Two sublists are nested only as MRU -> MFU (same index: a
//!    referenced MRU buffer moved to the MFU head by the lazy walk) and
//!    live -> ghost (same index: an evicted buffer's ghost linked).
//! 3. **Second tier** (`l2/`), only as the [`SecondTier`] calls say: under
//!    a hash stripe (exclusive), `invalidate` takes an index stripe, then
//!    the tier's pending-tombstone set; under a stripe and a sublist, the
//!    eviction walk's `presence` takes an index stripe. No tier call made
//!    under an ARC lock does device I/O: the header write that makes an
//!    invalidation durable (`persist_invalidations`) runs after the stripe
//!    is dropped. Inside the tier: ring, then header, then the pending set;
//!    the history after an index stripe or alone. A feed (the feed
//!    thread's, the evict thread's, or an inline one) first takes the
//!    tier's feed lock, holding no other lock, and keeps it until its batch
//!    is written: one batch fills at a time. The feed holds a stripe
//!    (shared) while it copies a buffer into its batch and marks it
//!    `Writing` in the index (an index stripe under it), and takes the
//!    tier's spare batch buffer there, alone under the stripe.
//! 4. **Leaf locks**, taken last and alone: a garbage bin of retired
//!    entries (`core`), the evict handshake's progress (`evict_handshake`),
//!    a load's outcome (`inflight`: its result, the wakers of waiting
//!    tasks, and the count of tasks that left), lock statistics, the
//!    adaptive policy's switch (`replacement`: a miss that found a marked
//!    ghost takes it, after its REPLACE, holding no other lock). The I/O
//!    pool's queue and a job's completion slot (`io_pool`) are taken with
//!    no cache lock held, and the pool's jobs (a [`SecondTier::read`]) run
//!    holding none. A slab shard (`mem::slab`), under which an entry's
//!    memory is taken and given back, may be taken holding any lock above
//!    (a garbage bin's, when retired entries are freed) and takes none.
//!
//! No one waits for a load holding a lock: a waiting thread sleeps on the
//! load's condvar, a waiting task has left its waker in the load's outcome
//! and returned `Pending`. Completing a load takes the stripe lock (to
//! forget it), drops it, then sets the outcome, notifies the condvar and
//! wakes the wakers, in that order and holding nothing when it wakes. A
//! task that leaves a load early takes the stripe lock (to uncount itself
//! while the load is registered), or else the outcome's lock, never both.
//!
//! The one path against that order, eviction, walks a sublist first and
//! only *tries* each candidate's stripe lock, passing over a buffer whose
//! stripe is busy, so it cannot deadlock. The evict thread and the feed
//! thread hold no lock while they sleep; an insert waits for the evict
//! thread (bounded, `evict_handshake`) holding no lock.
//!
//! Lazy hits write no shared cache line beyond the key's own entry (eager
//! hits also write their stripe lock and sublist lock): per-state byte
//! counts and the statistics are striped (`mem::striped`), and lazy hits
//! count themselves in the entry's meta word.
//!
//! The generations policy (`Policy::Generations`, lazy mode) adds two
//! things to a hit: a first hit in a generation stores a byte of its entry
//! and adds to its thread's stripe of the clock (`generations.rs`), and a
//! hit on an MRU buffer *tries* the stripe lock and, holding it, takes the
//! MRU and then the MFU sublist lock to move the buffer: the documented
//! order, and a busy stripe only leaves the move to the evictor.

mod config;
mod core;
mod evict;
mod evict_handshake;
mod generations;
mod hit_mode;
mod inflight;
mod insert;
mod io_pool;
mod key;
mod load;
mod load_async;
mod policy;
mod replacement;
mod second_tier;
mod stats;
#[cfg(all(test, not(loom)))]
mod test_support;

pub use config::{HitMode, Policy};
pub use key::{BlockKey, Key, PersistentKey};
pub use stats::Stats;

pub(crate) use self::core::Core;
pub(crate) use config::Config;
pub(crate) use evict::{EvictThread, Evictable, Evictor, Inline, Threaded};
pub(crate) use hit_mode::{too_many_holds, CoreRef, Eager, HitModeImpl, Lazy};
pub(crate) use insert::{insert_entry, remove_key};
pub(crate) use io_pool::IoPool;
pub(crate) use load::get_or_load;
pub(crate) use load_async::{get_or_load_async, load_ahead_async};
pub(crate) use second_tier::{
    ArcTails, EvictedCopy, LoadedBytes, Presence, SecondTier, TierFigures, TierRead,
};
pub(crate) use stats::{Event, Supplied};
