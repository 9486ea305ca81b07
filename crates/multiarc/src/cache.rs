//! The concurrent cache: [`Cache`], [`Handle`] and the protocol that ties the
//! hash table, the multilists and the evict thread together.
//!
//! # Locks and who may take what
//!
//! - A *stripe lock* (hash.rs, a reader-writer lock) guards the lookup of a
//!   key and every state change of the entries hashed to it: the 0 -> 1 and
//!   1 -> 0 hold transitions of the eager mode, ARC state changes, replacing
//!   an entry by its ghost. Those take it exclusively; the lazy hit path,
//!   which changes only atomics, takes it shared.
//! - A *sublist lock* (multilist.rs) guards one sublist's links and the slot
//!   field of the entries linked there.
//! - Order: stripe, then a live sublist, then a ghost sublist. The one
//!   exception, eviction, walks a sublist first and only *tries* the stripe
//!   lock of each candidate, skipping it when busy, so it cannot deadlock.
//!
//! # Held buffers are off the lists
//!
//! As in OpenZFS (`add_reference`/`remove_reference`), the first hold on a
//! buffer unlinks it from its state's sublist and the last release links it
//! back at the head. So the lists contain exactly the evictable buffers, the
//! evict thread never has to skip over held ones, and a hold is a guarantee:
//! while a buffer is held it is on no list, so no eviction can reach it. The
//! invariant that makes this work: *a live entry in the table with zero holds
//! is linked in its state's sublist*, and since holds leave and reach zero
//! only under the stripe lock, an evictor holding that lock and seeing the
//! entry linked knows nobody holds it or can start to. Holds above one are
//! added and dropped with plain atomics (no lock) because they cannot change
//! list membership.
//!
//! Hits write no shared cache line beyond the key's own stripe, sublist and
//! entry: statistics and per-state byte counts are striped (counter.rs).
//!
//! # The lazy hit mode
//!
//! [`HitMode::Lazy`] drops the list work from hits (CAR): a buffer stays
//! linked while held, and a hold is nothing but a clone of the entry's `Arc`
//! (plus setting its reference bit, once), taken under the stripe's shared
//! lock; a release is the `Arc`'s drop, with no lock. The table and the list
//! own one reference each, so the evictor, holding the stripe lock
//! exclusively (no clone can start) and one reference of its own, knows an
//! entry is held exactly when its strong count exceeds three; it skips held
//! buffers, moves referenced ones (clearing the bit) and evicts the rest. A
//! buffer removed while held is freed by whoever drops the last reference,
//! which `Arc::into_inner` designates, so its bytes are accounted once.

use crate::config::{Builder, Config, ConfigError, HitMode};
use crate::counter::{thread_random, Striped};
use crate::entry::{Entry, State, HOLDS, REFERENCED};
use crate::evict::{EvictSignal, EvictThread};
use crate::hash::{HashTable, Stripe};
use crate::key::Key;
use crate::multilist::Multilist;
use crate::policy::{self, GhostHit, Sizes};
use crate::stats::{Event, Events, Stats};
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::any::Any;
use std::fmt;
use std::hash::BuildHasher;
use std::ops::Deref;
use std::sync::{Arc, Condvar, Mutex};

/// Hashes keys: seeded at random per cache (so adversarial keys cannot be
/// aimed at one stripe), except under loom, whose executions must repeat.
#[cfg(not(loom))]
type KeyHasher = foldhash::fast::RandomState;
#[cfg(loom)]
type KeyHasher = foldhash::fast::FixedState;

/// References an unheld entry has in the lazy mode: the table's and its
/// sublist's.
const LAZY_UNHELD_REFS: usize = 2;

/// What one eviction pass achieved.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct EvictOutcome {
    pub(crate) freed: u64,
    pub(crate) not_enough: bool,
}

/// What one walk of a state's list did.
#[derive(Clone, Copy, Debug, Default)]
struct Walk {
    /// Bytes taken out of the state.
    freed: u64,
    /// Bytes of referenced or held buffers moved instead (lazy mode).
    moved: u64,
}

/// The outcome of a read-through load, shared with the threads waiting for it.
enum LoadResult<K> {
    /// Loaded and inserted; each waiter's hold was taken for it.
    Done(Arc<Entry<K>>),
    /// The loader failed; the error (an `Arc<E>`) is shared.
    Failed(Arc<dyn Any + Send + Sync>),
    /// The loader panicked; waiters retry on their own.
    Abandoned,
}

/// A load in flight: other threads missing the same key wait here.
pub(crate) struct Pending<K> {
    /// Threads waiting; changed only under the key's stripe lock.
    waiters: AtomicU32,
    /// An `insert` or `remove` of the key came after this load started: its
    /// bytes may predate that change, so they go to the waiting callers but
    /// are not cached. Changed and read only under the key's stripe lock.
    superseded: AtomicBool,
    result: Mutex<Option<LoadResult<K>>>,
    ready: Condvar,
}

impl<K> Pending<K> {
    fn new() -> Self {
        Pending {
            waiters: AtomicU32::new(0),
            superseded: AtomicBool::new(false),
            result: Mutex::new(None),
            ready: Condvar::new(),
        }
    }

    /// Called under the key's stripe lock.
    pub(crate) fn mark_superseded(&self) {
        self.superseded.store(true, Ordering::Relaxed);
    }

    fn complete(&self, result: LoadResult<K>) {
        *self.result.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
        self.ready.notify_all();
    }

    fn wait(&self) -> LoadResult<K> {
        let mut r = self.result.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match &*r {
                Some(LoadResult::Done(e)) => return LoadResult::Done(Arc::clone(e)),
                Some(LoadResult::Failed(err)) => return LoadResult::Failed(Arc::clone(err)),
                Some(LoadResult::Abandoned) => return LoadResult::Abandoned,
                None => r = self.ready.wait(r).unwrap_or_else(|e| e.into_inner()),
            }
        }
    }
}

/// Everything the cache's threads share.
pub(crate) struct Inner<K> {
    config: Config,
    hasher: KeyHasher,
    table: HashTable<K>,
    /// Indexed by `State as usize`: MRU, MFU, MRU ghost, MFU ghost.
    lists: [Multilist<K>; 4],
    /// The target size `c` and the MRU target `p`, in bytes.
    c: AtomicU64,
    p: AtomicU64,
    /// Bytes per state (indexed by `State as usize`), striped by sublist.
    bytes: Striped<5>,
    events: Events,
    pub(crate) signal: EvictSignal,
}

/// A concurrent, byte-bounded ARC cache of buffers keyed by `K`.
///
/// Share it between threads by reference (it is `Sync`) or in an `Arc`.
/// Dropping it stops its evict thread; handles borrow it, so none outlives it.
///
/// ```
/// use multiarc::{BlockKey, Cache};
/// let cache = Cache::<BlockKey>::builder().max_bytes(1 << 20).build().unwrap();
/// let key = BlockKey::new(7, 0);
/// assert!(cache.get(&key).is_none());
/// cache.insert(key, vec![1; 4096]);
/// let block = cache.get(&key).expect("cached");
/// assert_eq!(block.len(), 4096);
/// ```
pub struct Cache<K: Key> {
    inner: Arc<Inner<K>>,
    _evict_thread: Option<EvictThread<K>>,
}

/// A hold on a cached buffer: derefs to its bytes. While any handle to a
/// buffer exists, the buffer is neither evicted nor freed; dropping the last
/// one makes it evictable again (at the head of its list).
pub struct Handle<'a, K: Key> {
    inner: &'a Inner<K>,
    /// Always `Some` until the handle is dropped (the drop takes it).
    entry: Option<Arc<Entry<K>>>,
}

impl<K: Key> Cache<K> {
    /// A [`Builder`] for a cache.
    pub fn builder() -> Builder<K> {
        Builder::new()
    }

    pub(crate) fn from_config(config: Config) -> Result<Cache<K>, ConfigError> {
        let n = config.sublists;
        let expected = (config.max_bytes / 4096).min(1 << 26) as usize;
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let inner = Arc::new(Inner {
            hasher: KeyHasher::default(),
            table: HashTable::new(config.hash_stripes, expected),
            lists: [
                Multilist::new(n, "mru.sublist"),
                Multilist::new(n, "mfu.sublist"),
                Multilist::new(n, "mru_ghost.sublist"),
                Multilist::new(n, "mfu_ghost.sublist"),
            ],
            c: AtomicU64::new(config.max_bytes),
            // The paper starts with p = 0; ghost hits move it from there.
            p: AtomicU64::new(0),
            bytes: Striped::new(n),
            events: Events::new((cpus * 2).max(8)),
            signal: EvictSignal::default(),
            config,
        });
        let evict_thread =
            (!inner.config.inline_eviction).then(|| EvictThread::start(Arc::clone(&inner)));
        Ok(Cache {
            inner,
            _evict_thread: evict_thread,
        })
    }

    /// Looks `key` up. On a hit returns a hold on the buffer (and counts the
    /// access: a buffer seen a second time moves from MRU to MFU).
    pub fn get(&self, key: &K) -> Option<Handle<'_, K>> {
        let inner = &*self.inner;
        let hash = inner.hash(key);
        match inner.lookup(hash, key) {
            Some(entry) => Some(Handle {
                inner,
                entry: Some(entry),
            }),
            None => {
                inner.events.count(Event::Miss);
                None
            }
        }
    }

    /// Caches `data` under `key`, replacing any buffer cached for it (holders
    /// of the old one keep seeing the old bytes), and returns a hold on it.
    ///
    /// A new key enters MRU; a key the cache still remembers (a ghost, or a
    /// cached buffer being replaced) enters MFU, and a ghost adapts the
    /// MRU/MFU split. If the insert takes the cache past its target the evict
    /// thread is woken; far past it, this call waits for eviction (bounded).
    ///
    /// A `get_or_load` of `key` already running when `insert` is called
    /// returns its own bytes to its callers but does not cache them: they may
    /// be older than these (a file layer writing back a block relies on this).
    pub fn insert(&self, key: K, data: Vec<u8>) -> Handle<'_, K> {
        let entry = self.inner.insert_entry(key, data.into_boxed_slice(), None);
        Handle {
            inner: &self.inner,
            entry: Some(entry),
        }
    }

    /// Returns the cached buffer for `key`, or runs `loader` to produce it,
    /// caches it and returns it. However many threads miss the same key at
    /// once, one runs its loader and the others wait and share the result; a
    /// failed load returns the same error to all of them and caches nothing.
    /// If the loader panics, the waiting threads retry with their own loaders.
    pub fn get_or_load<E, F>(&self, key: K, loader: F) -> Result<Handle<'_, K>, Arc<E>>
    where
        F: FnOnce() -> Result<Vec<u8>, E>,
        E: Send + Sync + 'static,
    {
        let inner = &*self.inner;
        let hash = inner.hash(&key);
        let mut loader = Some(loader);
        loop {
            if let Some(entry) = inner.lookup(hash, &key) {
                return Ok(Handle {
                    inner,
                    entry: Some(entry),
                });
            }
            let pending = {
                let mut stripe = inner.table.write(hash);
                if let Some(e) = stripe.find(hash, &key) {
                    if e.state().is_live() {
                        let e = Arc::clone(e);
                        inner.hold_locked(&e);
                        return Ok(Handle {
                            inner,
                            entry: Some(e),
                        });
                    }
                }
                if let Some((_, p)) = stripe.loading.iter().find(|(k, _)| *k == key) {
                    let p = Arc::clone(p);
                    p.waiters.fetch_add(1, Ordering::Relaxed);
                    drop(stripe);
                    inner.events.count(Event::Miss);
                    inner.events.count(Event::LoadWait);
                    match p.wait() {
                        LoadResult::Done(entry) => {
                            return Ok(Handle {
                                inner,
                                entry: Some(entry),
                            })
                        }
                        LoadResult::Failed(err) => match err.downcast::<E>() {
                            Ok(err) => return Err(err),
                            // Another caller's loader had another error type:
                            // its error is not ours to return; load ourselves.
                            Err(_) => continue,
                        },
                        LoadResult::Abandoned => continue,
                    }
                }
                let p = Arc::new(Pending::new());
                stripe.loading.push((key.clone(), Arc::clone(&p)));
                p
            };
            inner.events.count(Event::Miss);
            inner.events.count(Event::Load);
            let mut guard = AbandonOnUnwind {
                inner,
                hash,
                pending: &pending,
                armed: true,
            };
            let load = (loader.take().expect("loader runs once"))();
            match load {
                Ok(data) => {
                    let entry =
                        inner.insert_entry(key.clone(), data.into_boxed_slice(), Some(&pending));
                    guard.armed = false;
                    pending.complete(LoadResult::Done(Arc::clone(&entry)));
                    return Ok(Handle {
                        inner,
                        entry: Some(entry),
                    });
                }
                Err(err) => {
                    inner.events.count(Event::LoadFailure);
                    let err = Arc::new(err);
                    inner.forget_pending(hash, &pending);
                    guard.armed = false;
                    pending.complete(LoadResult::Failed(Arc::clone(&err) as _));
                    return Err(err);
                }
            }
        }
    }

    /// Drops `key` from the cache (and forgets its ghost). Returns true if a
    /// buffer was cached. A held buffer stays readable by its holders and is
    /// freed when the last hold goes. A load of `key` already running does
    /// not cache its result (as with [`Cache::insert`]).
    pub fn remove(&self, key: &K) -> bool {
        let inner = &*self.inner;
        let hash = inner.hash(key);
        let mut stripe = inner.table.write(hash);
        stripe.supersede_loads(key);
        let Some(old) = stripe.remove(hash, key) else {
            return false;
        };
        let live = old.state().is_live();
        inner.detach_locked(old);
        live
    }

    /// Changes the cache's size bound at run time. Growing takes effect at
    /// once; shrinking lets the evict thread bring the cache down in the
    /// background. The learned MRU/MFU split is kept in proportion, so a
    /// resize never resets or pins the adaptation. Fails if `bytes` is 0 or
    /// below `min_bytes`.
    pub fn set_max_bytes(&self, bytes: u64) -> Result<(), ConfigError> {
        let inner = &*self.inner;
        if bytes == 0 || bytes < inner.config.min_bytes {
            return Err(ConfigError::new(format!(
                "max_bytes ({bytes}) must be at least min_bytes ({})",
                inner.config.min_bytes
            )));
        }
        let old = inner.c.swap(bytes, Ordering::AcqRel);
        let _ = inner
            .p
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| {
                Some(policy::rescale_p(p, old, bytes))
            });
        if bytes < old {
            if inner.config.inline_eviction {
                inner.evict_to_target(false);
                inner.trim_ghosts();
            } else {
                inner.signal.request();
            }
        }
        Ok(())
    }

    /// Blocks until eviction has brought the cache under its target (or
    /// cannot, because the rest is held). With inline eviction, evicts now.
    pub fn wait_for_eviction(&self) {
        let inner = &*self.inner;
        if inner.config.inline_eviction {
            inner.evict_to_target(false);
            inner.trim_ghosts();
            return;
        }
        while inner.needs_eviction() {
            if !inner.signal.wait_for_pass() {
                return;
            }
        }
    }

    /// A snapshot of the statistics.
    pub fn stats(&self) -> Stats {
        let inner = &*self.inner;
        let s = inner.sizes();
        let (held, evictable) = if inner.config.hit_mode == HitMode::Lazy {
            // Held buffers stay linked; count them on the lists (O(entries),
            // one sublist lock at a time, so no cost on the hit path).
            let held: u64 = [State::Mru, State::Mfu]
                .iter()
                .map(|&st| inner.lists[st as usize].held_bytes(LAZY_UNHELD_REFS))
                .sum();
            (held, (s.mru + s.mfu).saturating_sub(held))
        } else {
            let (mru_list, _) = inner.lists[State::Mru as usize].totals();
            let (mfu_list, _) = inner.lists[State::Mfu as usize].totals();
            let listed = mru_list + mfu_list;
            ((s.mru + s.mfu).saturating_sub(listed), listed)
        };
        let h = inner.table.figures();
        let ev = |e| inner.events.get(e);
        Stats {
            hits: ev(Event::MruHit) + ev(Event::MfuHit),
            misses: ev(Event::Miss),
            mru_hits: ev(Event::MruHit),
            mfu_hits: ev(Event::MfuHit),
            mru_ghost_hits: ev(Event::MruGhostHit),
            mfu_ghost_hits: ev(Event::MfuGhostHit),
            inserts: ev(Event::Insert),
            removes: ev(Event::Remove),
            evictions: ev(Event::Eviction),
            evicted_bytes: ev(Event::EvictedBytes),
            evict_skip: ev(Event::EvictSkip),
            evict_not_enough: ev(Event::EvictNotEnough),
            overflow_waits: ev(Event::OverflowWait),
            ghosts_dropped: ev(Event::GhostDropped),
            loads: ev(Event::Load),
            load_failures: ev(Event::LoadFailure),
            loads_superseded: ev(Event::LoadSuperseded),
            load_waits: ev(Event::LoadWait),
            size: s.data(),
            c: inner.c.load(Ordering::Relaxed),
            p: inner.p.load(Ordering::Relaxed),
            min_bytes: inner.config.min_bytes,
            mru_bytes: s.mru,
            mfu_bytes: s.mfu,
            mru_ghost_bytes: s.mru_ghost,
            mfu_ghost_bytes: s.mfu_ghost,
            anon_bytes: s.anon,
            held_bytes: held,
            evictable_bytes: evictable,
            hash_elements: h.elements,
            hash_collisions: h.collisions,
            hash_chain_max: h.chain_max,
            sublists: inner.config.sublists as u64,
        }
    }

    /// Starts (`true`) or stops recording lock statistics for every lock of
    /// this cache, in [`crate::lock::lockstat`] under the classes
    /// `hash.stripe`, `mru.sublist`, `mfu.sublist`, `mru_ghost.sublist` and
    /// `mfu_ghost.sublist`.
    pub fn set_lockstat(&self, on: bool) {
        self.inner.table.set_lockstat(on);
        for l in &self.inner.lists {
            l.set_lockstat(on);
        }
    }
}

impl<K: Key> fmt::Debug for Cache<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.inner.sizes();
        f.debug_struct("Cache")
            .field("size", &s.data())
            .field("c", &self.inner.c.load(Ordering::Relaxed))
            .field("p", &self.inner.p.load(Ordering::Relaxed))
            .field("sublists", &self.inner.config.sublists)
            .finish_non_exhaustive()
    }
}

/// Completes a pending load as abandoned if its loader unwinds.
struct AbandonOnUnwind<'a, K: Key> {
    inner: &'a Inner<K>,
    hash: u64,
    pending: &'a Arc<Pending<K>>,
    armed: bool,
}

impl<K: Key> Drop for AbandonOnUnwind<'_, K> {
    fn drop(&mut self) {
        if self.armed {
            self.inner.forget_pending(self.hash, self.pending);
            self.pending.complete(LoadResult::Abandoned);
        }
    }
}

impl<K: Key> Inner<K> {
    #[inline]
    fn hash(&self, key: &K) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The sublist (same index in every state's multilist) of a hash.
    #[inline]
    fn sublist_of(&self, hash: u64) -> usize {
        ((((hash >> 16) & 0xffff_ffff) * self.config.sublists as u64) >> 32) as usize
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

    fn c(&self) -> u64 {
        self.c.load(Ordering::Acquire)
    }

    fn overflow(&self, c: u64) -> u64 {
        (c >> self.config.overflow_shift).max(1)
    }

    /// True when data or history is above its bound.
    pub(crate) fn needs_eviction(&self) -> bool {
        let s = self.sizes();
        let c = self.c();
        s.data() > c || policy::ghost_excess(&s, c) != (0, 0)
    }

    /// Moves `n` bytes between states. Adds before it subtracts: a
    /// concurrent reader of the sums may then over-count for a moment (and
    /// evict a little early) but never under-count and stop evicting while
    /// the cache is over its target (loom found that race).
    fn move_bytes(&self, idx: usize, from: State, to: State, n: u64) {
        self.bytes.add(idx, to as usize, n);
        self.bytes.sub(idx, from as usize, n);
    }

    /// Finds live `key` and takes a hold on it (recording the access): under
    /// the stripe's shared lock in the lazy mode, its exclusive lock in the
    /// eager mode (where a first hold changes list membership).
    fn lookup(&self, hash: u64, key: &K) -> Option<Arc<Entry<K>>> {
        let hold = |stripe: &Stripe<K>| {
            let e = stripe.find(hash, key).filter(|e| e.state().is_live())?;
            self.hold_locked(e);
            Some(Arc::clone(e))
        };
        if self.config.hit_mode == HitMode::Lazy {
            hold(&self.table.read(hash))
        } else {
            hold(&self.table.write(hash))
        }
    }

    /// Takes a hold on live entry `e` and records the access. Caller holds
    /// `e`'s stripe lock (shared is enough in the lazy mode).
    fn hold_locked(&self, e: &Arc<Entry<K>>) {
        let state = e.state();
        if self.config.hit_mode == HitMode::Lazy {
            // The hold is the caller's clone of the Arc; only the reference
            // bit is ours to set, and only when it is clear.
            if e.holds.load(Ordering::Relaxed) & REFERENCED == 0 {
                e.holds.fetch_or(REFERENCED, Ordering::Relaxed);
            }
            self.events.count(if state == State::Mru {
                Event::MruHit
            } else {
                Event::MfuHit
            });
            return;
        }
        if e.holds.fetch_add(1, Ordering::Acquire) == 0 {
            // 0 -> 1: the buffer leaves its list (see the module comment).
            let idx = self.sublist_of(e.hash);
            self.lists[state as usize].sublist(idx).lock().remove(e);
        }
        if state == State::Mru {
            self.events.count(Event::MruHit);
            // Second access: MRU -> MFU (the paper's case I). The entry is
            // held, so it is on no list: only the state and the bytes move.
            e.set_state(State::Mfu);
            self.move_bytes(self.sublist_of(e.hash), State::Mru, State::Mfu, e.bytes);
        } else {
            self.events.count(Event::MfuHit);
        }
    }

    /// Drops one hold on `e`.
    fn release(&self, e: &Arc<Entry<K>>) {
        let mut cur = e.holds.load(Ordering::Relaxed);
        while cur > 1 {
            match e
                .holds
                .compare_exchange_weak(cur, cur - 1, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
        // Possibly the last hold: 1 -> 0 happens only under the stripe lock.
        let _stripe = self.table.write(e.hash);
        if e.holds.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        let idx = self.sublist_of(e.hash);
        match e.state() {
            s @ (State::Mru | State::Mfu) => {
                self.lists[s as usize]
                    .sublist(idx)
                    .lock()
                    .push_head(Arc::clone(e));
            }
            State::Anon => self.bytes.sub(idx, State::Anon as usize, e.bytes),
            s => unreachable!("a held entry in state {s:?}"),
        }
    }

    /// Takes `old`, just removed from or replaced in the table, out of its
    /// state. Caller holds its stripe lock.
    fn detach_locked(&self, old: Arc<Entry<K>>) {
        let idx = self.sublist_of(old.hash);
        let state = old.state();
        match state {
            State::Mru | State::Mfu if self.config.hit_mode == HitMode::Lazy => {
                // Lazy: always linked, and releases take no lock: whoever
                // drops the last reference (this call or the last handle)
                // frees the bytes.
                self.events.count(Event::Remove);
                self.lists[state as usize].sublist(idx).lock().remove(&old);
                self.move_bytes(idx, state, State::Anon, old.bytes);
                old.set_state(State::Anon);
                if let Some(last) = Arc::into_inner(old) {
                    self.bytes.sub(idx, State::Anon as usize, last.bytes);
                }
            }
            State::Mru | State::Mfu => {
                self.events.count(Event::Remove);
                if old.holds.load(Ordering::Acquire) == 0 {
                    self.lists[state as usize].sublist(idx).lock().remove(&old);
                    self.bytes.sub(idx, state as usize, old.bytes);
                } else {
                    old.set_state(State::Anon);
                    self.move_bytes(idx, state, State::Anon, old.bytes);
                }
            }
            State::MruGhost | State::MfuGhost => {
                self.lists[state as usize].sublist(idx).lock().remove(&old);
                self.bytes.sub(idx, state as usize, old.bytes);
            }
            State::Anon => unreachable!("an anonymous entry in the table"),
        }
    }

    fn forget_pending(&self, hash: u64, pending: &Arc<Pending<K>>) {
        let mut stripe = self.table.write(hash);
        stripe.loading.retain(|(_, p)| !Arc::ptr_eq(p, pending));
    }

    /// The insert path shared by `insert` and completed loads: returns the
    /// new entry with one hold for the caller (plus one per waiter of
    /// `pending`).
    fn insert_entry(
        &self,
        key: K,
        data: Box<[u8]>,
        pending: Option<&Arc<Pending<K>>>,
    ) -> Arc<Entry<K>> {
        let hash = self.hash(&key);
        let idx = self.sublist_of(hash);
        let size = data.len() as u64;

        // 1. Was the key remembered? A ghost hit adapts p (with the ghost
        //    still counted, as the paper's delta does) and the ghost goes.
        let mut ghost_hit = None;
        let mut reaccess = false;
        {
            let mut stripe = self.table.write(hash);
            if let Some(e) = stripe.find(hash, &key) {
                let state = e.state();
                if state.is_ghost() {
                    let hit = if state == State::MruGhost {
                        GhostHit::Mru
                    } else {
                        GhostHit::Mfu
                    };
                    if self.config.hit_mode == HitMode::Eager {
                        self.adapt(hit, e.bytes, 0);
                    }
                    self.events.count(if hit == GhostHit::Mru {
                        Event::MruGhostHit
                    } else {
                        Event::MfuGhostHit
                    });
                    let ghost = stripe.remove(hash, &key).expect("found above");
                    ghost_hit = Some((hit, ghost.bytes));
                    self.detach_locked(ghost);
                } else {
                    reaccess = true;
                }
            }
        }

        // 2. Make room before the buffer joins a list (the paper's REPLACE
        //    runs before the new page is placed). Its bytes count as
        //    anonymous meanwhile.
        self.bytes.add(idx, State::Anon as usize, size);
        let b2_hit = matches!(ghost_hit, Some((GhostHit::Mfu, _)));
        if self.config.inline_eviction {
            self.evict_to_target(b2_hit);
        } else {
            let c = self.c();
            let data_bytes = self.sizes().data();
            if data_bytes > c {
                if data_bytes > c + self.overflow(c) {
                    self.events.count(Event::OverflowWait);
                    self.signal.wait_for_freed(size, || {
                        let c = self.c();
                        self.sizes().data() > c + self.overflow(c)
                    });
                } else {
                    self.signal.request();
                }
            }
        }

        // CAR adapts after its REPLACE, with the hit key still counted in
        // its ghost list (it was taken out above, so add its bytes back).
        if let (HitMode::Lazy, Some((hit, ghost_bytes))) = (self.config.hit_mode, ghost_hit) {
            self.adapt(hit, ghost_bytes, ghost_bytes);
        }

        // 3. Install.
        let entry;
        {
            let mut stripe = self.table.write(hash);
            // Eager holds are counted in the entry (the caller's, and each
            // waiting loader's); lazy holds are the Arc clones themselves.
            let lazy = self.config.hit_mode == HitMode::Lazy;
            let mut holds = if lazy { 0 } else { 1 };
            match pending {
                Some(p) => {
                    stripe.loading.retain(|(_, q)| !Arc::ptr_eq(p, q));
                    if !lazy {
                        holds += p.waiters.load(Ordering::Relaxed);
                    }
                    if p.superseded.load(Ordering::Relaxed) {
                        // The key was written or removed while we loaded:
                        // hand the bytes to the loader and its waiters only,
                        // as an anonymous buffer freed by the last handle.
                        self.events.count(Event::LoadSuperseded);
                        return Arc::new(Entry::new(key, hash, data, State::Anon, holds));
                    }
                }
                None => stripe.supersede_loads(&key),
            }
            let old_live = stripe.find(hash, &key).map(|o| o.state().is_live());
            let state = if ghost_hit.is_some() || reaccess || old_live == Some(true) {
                State::Mfu
            } else {
                State::Mru
            };
            entry = Arc::new(Entry::new(key, hash, data, state, holds));
            if old_live.is_some() {
                let old = stripe.replace(Arc::clone(&entry));
                self.detach_locked(old);
            } else {
                stripe.insert(Arc::clone(&entry));
            }
            if lazy {
                // Lazy: buffers are linked even while held.
                self.lists[state as usize]
                    .sublist(idx)
                    .lock()
                    .push_head(Arc::clone(&entry));
            }
            self.move_bytes(idx, State::Anon, state, size);
            self.events.count(Event::Insert);
        }
        if self.config.inline_eviction {
            self.trim_ghosts();
        }
        entry
    }

    /// Moves `p` for a ghost hit of `size` bytes; `absent` bytes of the hit
    /// key's ghost are no longer counted in its list but should be.
    fn adapt(&self, hit: GhostHit, size: u64, absent: u64) {
        let c = self.c();
        let mut s = self.sizes();
        match hit {
            GhostHit::Mru => s.mru_ghost += absent,
            GhostHit::Mfu => s.mfu_ghost += absent,
        }
        let _ = self
            .p
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| {
                Some(policy::adapt(p, c, hit, size, &s))
            });
    }

    /// Evicts until the cached data fits in `c` (the ARC's REPLACE, repeated;
    /// CAR's in the lazy mode). `b2_hit`: the miss being served was an
    /// MFU-ghost hit (the paper's tie-break; only meaningful with inline
    /// eviction).
    pub(crate) fn evict_to_target(&self, b2_hit: bool) -> EvictOutcome {
        let lazy = self.config.hit_mode == HitMode::Lazy;
        let inline = self.config.inline_eviction;
        let mut outcome = EvictOutcome::default();
        // Bytes moved (lazy mode) since anything was freed. Once that exceeds
        // twice the cached bytes, every unheld buffer has lost its reference
        // bit and come round again: what is left is held, so stop.
        let mut moved_since_free = 0u64;
        loop {
            let c = self.c();
            let p = self.p.load(Ordering::Acquire);
            let s = self.sizes();
            if s.data() <= c {
                return outcome;
            }
            let want = s.data() - c;
            let from_mru = if lazy {
                policy::car_evict_from_mru(&s, p)
            } else {
                policy::evict_from_mru(&s, p, b2_hit)
            };
            let (first, second) = if from_mru {
                (State::Mru, State::Mfu)
            } else {
                (State::Mfu, State::Mru)
            };
            let amount = if inline {
                // One buffer at a time, re-deciding each time, as the papers do.
                1
            } else if from_mru && s.mru > p {
                want.min(s.mru - p)
            } else {
                want
            };
            // Inline lazy eviction looks at one buffer per decision (CAR
            // re-evaluates |T1| >= p after every move).
            let candidates = if inline && lazy { 1 } else { usize::MAX };
            let mut walk = self.evict_state(first, amount, candidates);
            if walk.freed == 0 && walk.moved == 0 {
                walk = self.evict_state(second, amount, candidates);
            }
            if walk.freed == 0 {
                moved_since_free += walk.moved;
                if walk.moved == 0 || moved_since_free > 2 * (s.mru + s.mfu) {
                    self.events.count(Event::EvictNotEnough);
                    outcome.not_enough = true;
                    return outcome;
                }
                continue;
            }
            moved_since_free = 0;
            outcome.freed += walk.freed;
        }
    }

    /// Drops ghosts until the history is within its bounds.
    pub(crate) fn trim_ghosts(&self) {
        let (b1, b2) = policy::ghost_excess(&self.sizes(), self.c());
        if b1 > 0 {
            self.evict_state(State::MruGhost, b1, usize::MAX);
        }
        if b2 > 0 {
            self.evict_state(State::MfuGhost, b2, usize::MAX);
        }
    }

    /// Takes at least `amount` bytes out of `state`'s list, from sublist
    /// tails, `evict_batch_limit` buffers per sublist visit, starting at a
    /// random sublist (OpenZFS `arc_evict_state`), looking at no more than
    /// `candidates` buffers. Live buffers become ghosts; ghosts are
    /// forgotten. In the lazy mode a referenced buffer is moved instead (CAR)
    /// and a held one is passed over.
    fn evict_state(&self, state: State, amount: u64, candidates: usize) -> Walk {
        let lazy = self.config.hit_mode == HitMode::Lazy && state.is_live();
        let list = &self.lists[state as usize];
        let n = list.len();
        let start = (thread_random() % n as u64) as usize;
        let batch = self.config.evict_batch_limit;
        // Moves do not free anything: bound how many a visit may make.
        let visit_limit = batch.saturating_mul(8);
        let mut markers: Vec<Option<u32>> = vec![None; n];
        let mut walk = Walk::default();
        let mut examined = 0usize;
        // Buffers are freed after their locks are dropped.
        let mut dead: Vec<Arc<Entry<K>>> = Vec::new();
        let mut idle_rounds = 0;
        'rounds: loop {
            let before = walk;
            for k in 0..n {
                let i = (start + k) % n;
                let mut sl = list.sublist(i).lock();
                let marker = *markers[i].get_or_insert_with(|| sl.insert_marker_at_tail());
                let (mut taken, mut looked) = (0, 0);
                while taken < batch
                    && looked < visit_limit
                    && walk.freed < amount
                    && examined < candidates
                {
                    let Some((slot, found)) = sl.step_marker(marker) else {
                        break;
                    };
                    looked += 1;
                    examined += 1;
                    let Some(mut stripe) = self.table.stripe(found.hash).try_write() else {
                        // Someone is taking a hold on it (or working on a
                        // neighbour key) right now: pass over it.
                        self.events.count(Event::EvictSkip);
                        continue;
                    };
                    // Our reference, declared after the stripe guard so that
                    // on every `continue` it is dropped while the stripe is
                    // still locked: the entry is then still in the table, so
                    // ours is never the last reference. (Dropped after the
                    // unlock, it could be: a buffer just moved to the other
                    // list can be removed at once, its last handle dropped,
                    // and an unaccounted last drop would leak its bytes.)
                    let e = Arc::clone(found);
                    if lazy {
                        // Holds (Arc clones) and reference bits are only
                        // taken under the stripe lock, which we hold
                        // exclusively: neither can appear now.
                        let word = e.holds.load(Ordering::Acquire);
                        if word & REFERENCED != 0 {
                            e.holds.fetch_and(!REFERENCED, Ordering::AcqRel);
                            let moving = sl.take(slot);
                            if state == State::Mru {
                                // Referenced in T1: to T2's head (CAR).
                                moving.set_state(State::Mfu);
                                self.lists[State::Mfu as usize]
                                    .sublist(i)
                                    .lock()
                                    .push_head(moving);
                                self.move_bytes(i, State::Mru, State::Mfu, e.bytes);
                            } else {
                                sl.push_head(moving);
                            }
                            walk.moved += e.bytes.max(1);
                            continue;
                        }
                        if Arc::strong_count(&e) > LAZY_UNHELD_REFS + 1 {
                            // Held (our clone is the +1): passed over, to the
                            // head so the walk does not meet it again at once.
                            let held = sl.take(slot);
                            sl.push_head(held);
                            walk.moved += e.bytes.max(1);
                            self.events.count(Event::EvictSkip);
                            continue;
                        }
                        // Unheld: the releases that dropped the last clones
                        // happened before; order the freeing after them.
                        std::sync::atomic::fence(Ordering::Acquire);
                    } else {
                        debug_assert_eq!(e.holds.load(Ordering::Relaxed) & HOLDS, 0);
                    }
                    sl.take(slot);
                    if state.is_live() {
                        let ghost =
                            Arc::new(Entry::ghost(e.key.clone(), e.hash, e.bytes, state.ghost()));
                        stripe.replace(Arc::clone(&ghost));
                        self.lists[state.ghost() as usize]
                            .sublist(i)
                            .lock()
                            .push_head(ghost);
                        self.move_bytes(i, state, state.ghost(), e.bytes);
                        self.events.count(Event::Eviction);
                        self.events.add(Event::EvictedBytes, e.bytes);
                    } else {
                        stripe.remove(e.hash, &e.key);
                        self.bytes.sub(i, state as usize, e.bytes);
                        self.events.count(Event::GhostDropped);
                    }
                    drop(stripe);
                    walk.freed += e.bytes.max(1);
                    taken += 1;
                    dead.push(e);
                }
                drop(sl);
                dead.clear();
                if walk.freed >= amount || examined >= candidates {
                    break 'rounds;
                }
            }
            if walk.freed == before.freed {
                // A round that freed nothing. In the lazy mode the first such
                // round may have cleared reference bits that make the next
                // one succeed; a second means there is nothing to take.
                idle_rounds += 1;
                if !lazy || walk.moved == before.moved || idle_rounds >= 2 {
                    break;
                }
            }
        }
        for (i, m) in markers.iter().enumerate() {
            if let Some(m) = *m {
                list.sublist(i).lock().remove_marker(m);
            }
        }
        walk
    }
}

impl<K: Key> Handle<'_, K> {
    fn entry(&self) -> &Entry<K> {
        self.entry.as_ref().expect("a live handle has its entry")
    }

    /// The key of the held buffer.
    pub fn key(&self) -> &K {
        &self.entry().key
    }
}

impl<K: Key> Deref for Handle<'_, K> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.entry().data
    }
}

impl<K: Key> AsRef<[u8]> for Handle<'_, K> {
    fn as_ref(&self) -> &[u8] {
        &self.entry().data
    }
}

impl<K: Key> Clone for Handle<'_, K> {
    /// Another hold on the same buffer (no lock: it is already held).
    fn clone(&self) -> Self {
        let e = self.entry.as_ref().expect("a live handle has its entry");
        if self.inner.config.hit_mode == HitMode::Eager {
            e.holds.fetch_add(1, Ordering::Relaxed);
        }
        Handle {
            inner: self.inner,
            entry: Some(Arc::clone(e)),
        }
    }
}

impl<K: Key> Drop for Handle<'_, K> {
    fn drop(&mut self) {
        let Some(e) = self.entry.take() else { return };
        if self.inner.config.hit_mode == HitMode::Eager {
            self.inner.release(&e);
        } else if let Some(last) = Arc::into_inner(e) {
            // Lazy: the table and the list had already let go, so the buffer
            // was removed while we held it; the last holder frees its bytes.
            debug_assert_eq!(last.state(), State::Anon);
            let idx = self.inner.sublist_of(last.hash);
            self.inner.bytes.sub(idx, State::Anon as usize, last.bytes);
        }
    }
}

impl<K: Key + fmt::Debug> fmt::Debug for Handle<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("key", self.key())
            .field("len", &self.len())
            .finish()
    }
}
