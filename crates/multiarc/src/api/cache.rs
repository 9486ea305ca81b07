//! The facade: [`Cache`], its [`Handle`]s and [`OwnedHandle`]s.
//!
//! A cache is a [`Core`] in the hit mode and with the evictor the builder
//! chose (`ByHitMode`, `ByEvictor`). Each public call matches on them once
//! and runs that combination's code, which has no mode or evictor branches
//! of its own. To follow a `get`: [`Cache::get`] -> `Lazy::lookup`
//! (`arc/hit_mode.rs`: a probe with no lock, `mem/table.rs`, then one
//! `fetch_add` on the entry's meta word) -> a [`Handle`], whose drop is
//! `Lazy::release` (one `fetch_sub`). An insert: [`Cache::insert`] ->
//! `insert_entry` (`arc/insert.rs`) -> the evictor's `make_room`
//! (`arc/evict.rs`, the walk).

use super::builder::{Builder, ConfigError, MAX_BYTES};
use crate::arc::{
    get_or_load, get_or_load_async, insert_entry, load_ahead_async, remove_key, Core, CoreRef,
    Eager, Event, EvictThread, Evictable, Evictor, HitMode, HitModeImpl, Inline, IoPool, Key, Lazy,
    Presence, SecondTier, Stats, Supplied, Threaded,
};
use crate::l2::{self, FeedThread, L2Arc};
use crate::mem::meta::{self, HOLD, HOLD_LIMIT};
use crate::mem::sync::Ordering;
use crate::mem::EntryPtr;
use std::fmt;
use std::future::Future;
use std::ops::{Deref, Range};
use std::sync::Arc;

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
    shared: ByHitMode<K>,
    /// The second tier, if the builder added one (the core sees it only as
    /// a `SecondTier`).
    tier: Option<Arc<L2Arc<K>>>,
    /// Stopped (and joined) before the core goes: declared after `shared`,
    /// dropped after it, but the thread keeps its own `Arc` of the core.
    _evict_thread: Option<EvictThread>,
    /// The second tier's feed thread, if any (threaded eviction only).
    _feed_thread: Option<FeedThread>,
    /// The threads that read the second tier for `get_or_load_async`
    /// (started on its first device read; joined when the cache goes).
    io: IoPool,
}

/// The core in the hit mode the builder chose.
enum ByHitMode<K: Key> {
    Lazy(ByEvictor<K, Lazy>),
    Eager(ByEvictor<K, Eager>),
}

/// The core with the evictor the builder chose.
enum ByEvictor<K: Key, M> {
    Threaded(Arc<Core<K, M>>),
    Inline(Arc<Core<K, M>>),
}

/// Runs `$body` with `$core` bound to the cache's core, whatever its hit
/// mode, and (second form) the type `$evictor` naming its evictor (one
/// match per call; the body is compiled once per combination).
macro_rules! dispatch {
    ($shared:expr, $core:ident => $body:expr) => {
        match $shared {
            ByHitMode::Lazy(ByEvictor::Threaded($core) | ByEvictor::Inline($core)) => $body,
            ByHitMode::Eager(ByEvictor::Threaded($core) | ByEvictor::Inline($core)) => $body,
        }
    };
    ($shared:expr, $core:ident, $evictor:ident => $body:expr) => {
        match $shared {
            ByHitMode::Lazy(ByEvictor::Threaded($core)) => {
                type $evictor = Threaded;
                $body
            }
            ByHitMode::Lazy(ByEvictor::Inline($core)) => {
                type $evictor = Inline;
                $body
            }
            ByHitMode::Eager(ByEvictor::Threaded($core)) => {
                type $evictor = Threaded;
                $body
            }
            ByHitMode::Eager(ByEvictor::Inline($core)) => {
                type $evictor = Inline;
                $body
            }
        }
    };
}

/// A memory miss of `get`: the second tier's copy, if it holds one (read
/// single-flight, like a load, and cached again in memory).
#[cold]
fn l2_get<'a, K: Key, M: HitModeImpl, V: Evictor>(
    core: &'a Core<K, M>,
    tier: &dyn SecondTier<K>,
    key: &K,
) -> Option<Handle<'a, K>> {
    if tier.presence(key) != Presence::Cached {
        core.events.count(Event::Miss);
        return None;
    }
    type NoLoader = fn() -> Result<Vec<u8>, std::convert::Infallible>;
    get_or_load::<K, M, V, _, NoLoader>(core, key.clone(), None)
        .ok()
        // SAFETY: `get_or_load` returns the entry with a hold for us.
        .map(|e| unsafe { Handle::new(core, e) })
}

/// A hold on a cached buffer: derefs to its bytes. While any handle to a
/// buffer exists, the buffer is neither evicted nor freed; dropping the last
/// one makes it evictable again (at the head of its list).
pub struct Handle<'a, K: Key> {
    core: CoreRef<'a, K>,
    /// Held: live until this handle's hold is released.
    entry: EntryPtr<K>,
    /// The data's length, kept here so that reading the bytes does not wait
    /// for the entry's header (see `mem/table.rs`, `Slot`).
    len: usize,
}

impl<'a, K: Key> Handle<'a, K> {
    /// A handle for `entry`.
    ///
    /// # Safety
    /// The caller holds a hold on `entry`, an entry of `core`, and hands it
    /// to the handle.
    #[inline]
    unsafe fn new<M: HitModeImpl>(core: &'a Core<K, M>, entry: EntryPtr<K>) -> Self {
        // SAFETY: held (the hold this handle takes over).
        unsafe { Self::with_len(core, entry, entry.header().data_len()) }
    }

    /// A handle for `entry`, whose data is `len` bytes long.
    ///
    /// # Safety
    /// As [`Handle::new`]; and `len` is at most the data's length.
    #[inline]
    unsafe fn with_len<M: HitModeImpl>(
        core: &'a Core<K, M>,
        entry: EntryPtr<K>,
        len: usize,
    ) -> Self {
        Handle {
            core: M::core_ref(core),
            entry,
            len,
        }
    }
}

impl<K: Key> Builder<K> {
    /// Checks the configuration and starts the cache: its evict thread and,
    /// with a second tier, its feed thread.
    pub fn build(self) -> Result<Cache<K>, ConfigError> {
        let config = self.config()?;
        let l2_config = self.l2_config()?;
        let inline = config.inline_eviction;
        let tier = match (l2_config, self.key_codec) {
            (Some(l2), Some(codec)) => {
                let path = l2.device.path.clone();
                Some(L2Arc::open(l2, codec).map_err(|e| ConfigError::device(path, e))?)
            }
            _ => None,
        };
        let as_second = tier.clone().map(|t| t as Arc<dyn SecondTier<K>>);
        fn by_evictor<K: Key, M>(core: &Arc<Core<K, M>>, inline: bool) -> ByEvictor<K, M> {
            if inline {
                ByEvictor::Inline(Arc::clone(core))
            } else {
                ByEvictor::Threaded(Arc::clone(core))
            }
        }
        let (shared, evictable, tails): (ByHitMode<K>, Arc<dyn Evictable>, _) =
            match config.hit_mode {
                HitMode::Lazy => {
                    let core = Arc::new(Core::<K, Lazy>::new(config, as_second));
                    let tails: Arc<dyn crate::arc::ArcTails<K>> = core.clone();
                    (ByHitMode::Lazy(by_evictor(&core, inline)), core, tails)
                }
                HitMode::Eager => {
                    let core = Arc::new(Core::<K, Eager>::new(config, as_second));
                    let tails: Arc<dyn crate::arc::ArcTails<K>> = core.clone();
                    (ByHitMode::Eager(by_evictor(&core, inline)), core, tails)
                }
            };
        let evict_thread = dispatch!(&shared, _core, V => V::start(evictable))
            .map_err(|e| ConfigError::thread("multiarc-evict", e))?;
        let feed_thread = match &tier {
            Some(tier) if !inline => Some(
                FeedThread::start(Arc::clone(tier), tails)
                    .map_err(|e| ConfigError::thread("multiarc-l2-feed", e))?,
            ),
            _ => None,
        };
        Ok(Cache {
            shared,
            tier,
            _evict_thread: evict_thread,
            _feed_thread: feed_thread,
            io: IoPool::default(),
        })
    }
}

impl<K: Key> Drop for Cache<K> {
    fn drop(&mut self) {
        // Stops a rebuild of the second tier's index still running (the
        // feed thread stops with its field).
        if let Some(tier) = &self.tier {
            tier.shutdown();
        }
    }
}

impl<K: Key> Cache<K> {
    /// Runs one feed of the second tier now, in this thread, and returns
    /// the bytes it wrote (0 without a second tier). The feed thread (or,
    /// with inline eviction, the inserts) feed on their own: this is for
    /// tests and tools that want the tier's contents settled.
    pub fn l2_feed(&self) -> u64 {
        let Some(tier) = &self.tier else {
            return 0;
        };
        dispatch!(&self.shared, core => l2::feed_once(tier, &**core))
    }

    /// Copies to the second tier every buffer memory holds that it does
    /// not hold yet (up to the device's size), in this thread, and returns
    /// the bytes written (0 without a second tier, or while it rebuilds
    /// its index). The feed copies only what eviction reaches soon: a
    /// working set that fits in memory never reaches the tier on its own,
    /// so a cache whose device should serve the next start calls this
    /// before it is dropped (the mounts do at unmount). Takes as long as
    /// writing that much to the device.
    pub fn l2_flush(&self) -> u64 {
        let Some(tier) = &self.tier else {
            return 0;
        };
        dispatch!(&self.shared, core => l2::flush(tier, &**core))
    }

    /// True while the second tier is rebuilding its index from the device
    /// (reads are served meanwhile; feeding waits).
    pub fn l2_rebuilding(&self) -> bool {
        self.tier.as_ref().is_some_and(|t| t.rebuilding())
    }

    /// Blocks until the second tier's rebuild (if any) is over.
    pub fn l2_wait_rebuild(&self) {
        if let Some(tier) = &self.tier {
            tier.wait_rebuild();
        }
    }

    /// Makes every read (`reads`) or write (`writes`) of the second tier's
    /// device fail with EIO until called again: for fault-injection tests
    /// of callers and of the tier. No effect without a second tier. Only
    /// with the `test-support` feature.
    #[cfg(any(test, feature = "test-support"))]
    pub fn l2_inject_faults(&self, reads: bool, writes: bool) {
        if let Some(tier) = &self.tier {
            tier.set_faults(reads, writes);
        }
    }

    /// A [`Builder`] for a cache.
    pub fn builder() -> Builder<K> {
        Builder::new()
    }

    /// True if a buffer for `key` is cached in memory. Counts nothing and
    /// changes nothing (not an access).
    pub fn contains(&self, key: &K) -> bool {
        dispatch!(&self.shared, core => {
            let hash = core.hash(key);
            let stripe = core.table.stripe(hash).read();
            stripe
                .find_with_len(hash, key)
                // SAFETY: in the table, under its stripe lock (shared, held).
                .is_some_and(|(e, _)| unsafe { e.header() }.state().is_live())
        })
    }

    /// True if the second tier holds a copy of `key` (no I/O: its index).
    pub fn l2_contains(&self, key: &K) -> bool {
        self.tier
            .as_ref()
            .is_some_and(|t| t.presence(key) == Presence::Cached)
    }

    /// Bytes `range` of `key`'s buffer from the second tier, read without
    /// bringing the buffer into memory and verified by the checksums of
    /// the 16 KiB sectors the range meets only: a small read of a large
    /// block then reads a sector or two from the device, not the block.
    ///
    /// `None` when the tier cannot serve the range so: no second tier, no
    /// copy there, an empty range or one past the buffer, a buffer under
    /// 64 KiB (read whole), or a buffer read in parts past half of it since
    /// it was last read whole. Then [`Cache::get_or_load`] (or its async
    /// forms) reads it whole and caches it in memory as any read-back, so a
    /// block read much comes back into memory. A copy that fails to read or
    /// verify is dropped and counted, as in a whole read.
    ///
    /// It does not look in memory: call it after a memory miss. It counts
    /// an L2 hit (`l2_hits` and `l2_part_hits`), not a use of the buffer in
    /// memory's lists. Device I/O on the caller's thread; see
    /// [`Cache::l2_read_part_async`].
    pub fn l2_read_part(&self, key: &K, range: Range<u64>) -> Option<Vec<u8>> {
        self.tier.as_ref()?.read_part(key, range)
    }

    /// [`Cache::l2_read_part`] with the device read on the cache's I/O
    /// threads (as [`Cache::get_or_load_async`] reads the second tier).
    pub async fn l2_read_part_async(&self, key: &K, range: Range<u64>) -> Option<Vec<u8>> {
        let tier = self.tier.as_ref()?;
        if range.start >= range.end || tier.presence(key) != Presence::Cached {
            return None;
        }
        let (tier, key) = (Arc::clone(tier), key.clone());
        self.io
            .run(move || tier.read_part(&key, range))
            .await
            .flatten()
    }

    /// True if a load of `key` ([`Cache::get_or_load`] or
    /// [`Cache::get_or_load_async`]) is in flight now, so that a caller
    /// missing `key` would wait for it rather than load. Counts nothing. A
    /// hint: the load may end, or another begin, right after it answers
    /// (e.g. a prefetcher that skips keys someone is already loading).
    pub fn is_loading(&self, key: &K) -> bool {
        dispatch!(&self.shared, core => {
            let hash = core.hash(key);
            core.table.write(hash).per_stripe().find(key).is_some()
        })
    }

    /// Looks `key` up in memory only: never does I/O, even with a second
    /// tier (for callers that must not block on a device, and to tell the
    /// tiers apart). Otherwise as [`Cache::get`].
    #[inline]
    pub fn get_in_memory(&self, key: &K) -> Option<Handle<'_, K>> {
        #[inline(always)]
        fn get<'a, K: Key, M: HitModeImpl>(core: &'a Core<K, M>, key: &K) -> Option<Handle<'a, K>> {
            match M::lookup(core, core.hash(key), key) {
                // SAFETY: `lookup` returns the entry with a hold for us, and
                // the length of its data.
                Some((e, len)) => Some(unsafe { Handle::with_len(core, e, len) }),
                None => {
                    core.events.count(Event::Miss);
                    None
                }
            }
        }
        dispatch!(&self.shared, core => get(core, key))
    }

    /// Looks `key` up. On a hit returns a hold on the buffer (and counts the
    /// access: a buffer seen a second time moves from MRU to MFU). With a
    /// second tier, a memory miss of a key the tier holds reads it from the
    /// device (verified) and caches it in memory again.
    #[inline]
    pub fn get(&self, key: &K) -> Option<Handle<'_, K>> {
        #[inline(always)]
        fn get<'a, K: Key, M: HitModeImpl>(core: &'a Core<K, M>, key: &K) -> Option<Handle<'a, K>> {
            match M::lookup(core, core.hash(key), key) {
                // SAFETY: `lookup` returns the entry with a hold for us, and
                // the length of its data.
                Some((e, len)) => Some(unsafe { Handle::with_len(core, e, len) }),
                None => {
                    if core.tier.is_none() {
                        core.events.count(Event::Miss);
                    }
                    None
                }
            }
        }
        // The hit path is the memory-only lookup; the second tier is a
        // separate, cold call on a miss.
        match dispatch!(&self.shared, core => get(core, key)) {
            Some(h) => Some(h),
            None => self.get_from_l2(key),
        }
    }

    /// `get`'s memory miss: the second tier's copy, if any.
    #[cold]
    #[inline(never)]
    fn get_from_l2(&self, key: &K) -> Option<Handle<'_, K>> {
        dispatch!(&self.shared, core, V => match &core.tier {
            Some(tier) => l2_get::<K, _, V>(core, &**tier, key),
            None => None,
        })
    }

    /// A hint that `key` will be looked up or inserted soon: starts fetching
    /// the part of the hash table that call will read first, so that the
    /// fetch overlaps with other work (a caller that knows its next keys,
    /// such as a trace replay, can issue it a few requests ahead). Changes
    /// nothing and counts nothing.
    #[inline]
    pub fn prefetch(&self, key: &K) {
        dispatch!(&self.shared, core => core.table.prefetch(core.hash(key)))
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
        self.insert_slice(key, &data)
    }

    /// [`Cache::insert`] with borrowed bytes: the cache copies them into its
    /// own buffer either way, so a caller need not make a `Vec` first.
    pub fn insert_slice(&self, key: K, data: &[u8]) -> Handle<'_, K> {
        dispatch!(&self.shared, core, V => {
            let entry = insert_entry::<K, _, V>(&**core, key, data, None, None);
            // SAFETY: `insert_entry` returns the entry with a hold for us.
            unsafe { Handle::new(core, entry) }
        })
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
        dispatch!(&self.shared, core, V => {
            get_or_load::<K, _, V, E, F>(&**core, key, Some(loader))
                // SAFETY: `get_or_load` returns the entry with a hold for us.
                .map(|e| unsafe { Handle::new(&**core, e) })
                .map_err(|e| e.expect("a load with a loader fails with its error"))
        })
    }

    /// [`Cache::get_or_load`] for async code: returns the cached buffer for
    /// `key`, or its copy in the second tier, or awaits `loader()` to
    /// produce it, caches it and returns it. Runtime-agnostic (it needs no
    /// particular executor), and it never blocks the thread polling it on
    /// a load:
    ///
    /// - **Single flight**, across tasks and threads alike: however many
    ///   callers miss `key` at once, through this method or
    ///   [`Cache::get_or_load`], one runs its loader and the others wait
    ///   for its result. A waiting task is woken when the load completes;
    ///   it does not block its thread. A failed load returns the same error
    ///   to all of them and caches nothing.
    /// - **Second tier**: a memory miss of a key the tier holds reads it
    ///   from the device on the cache's own I/O threads (at most four,
    ///   started on the first such read) while the task awaits.
    /// - **Cancellation**: dropping the future is safe at any point. If it
    ///   was running the load (its loader's future, or the tier read), the
    ///   load is abandoned, as when a loader panics: the callers waiting for
    ///   it are woken and retry, and the first to retry runs its own loader
    ///   (the load is taken over, never left pending). If it was waiting for
    ///   another caller's load, it just leaves.
    /// - **Panics**: if the loader (or its future) panics, the waiting
    ///   callers retry with their own loaders, as with `get_or_load`.
    ///
    /// The returned [`Handle`] borrows the cache, like every handle, and so
    /// does the future: it may be held across `.await` points, but it is
    /// not `'static`. For `tokio::spawn` (or any executor that wants
    /// `'static` tasks), call [`Cache::get_or_load_async_owned`] on an
    /// `Arc<Cache<K>>` clone: its future owns that clone and returns an
    /// [`OwnedHandle`]. Or move the clone into the task and call this
    /// method there, the handle then living within the task (tokio is only
    /// this example's executor: the cache needs none):
    ///
    /// ```
    /// use multiarc::{BlockKey, Cache};
    /// use std::sync::Arc;
    ///
    /// let cache = Arc::new(Cache::<BlockKey>::builder().max_bytes(1 << 20).build()?);
    /// let key = BlockKey::new(7, 0);
    /// let fetch = || async { Ok::<_, std::io::Error>(vec![1; 4096]) };
    /// let rt = tokio::runtime::Builder::new_current_thread().build()?;
    /// let owned = rt.block_on(async {
    ///     let c = Arc::clone(&cache);
    ///     let len = tokio::spawn(async move {
    ///         let block = c.get_or_load_async(key, fetch).await?;
    ///         Ok::<_, Arc<std::io::Error>>(block.len())
    ///     });
    ///     assert_eq!(len.await.unwrap().unwrap(), 4096);
    ///     // A 'static future as it is, and a handle that leaves the task.
    ///     tokio::spawn(Arc::clone(&cache).get_or_load_async_owned(key, fetch)).await
    /// })?;
    /// assert_eq!(owned.unwrap()[0], 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// The insert that caches a loaded buffer is the synchronous insert: far
    /// past its target, it waits (bounded) for eviction, as
    /// [`Cache::insert`] does.
    ///
    /// ```
    /// use multiarc::{BlockKey, Cache};
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     let waker = std::task::Waker::noop();
    /// #     let mut cx = std::task::Context::from_waker(&waker);
    /// #     let mut f = std::pin::pin!(f);
    /// #     loop {
    /// #         if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
    /// #             return v;
    /// #         }
    /// #     }
    /// # }
    /// let cache = Cache::<BlockKey>::builder().max_bytes(1 << 20).build().unwrap();
    /// let key = BlockKey::new(7, 0);
    /// let block = block_on(cache.get_or_load_async(key, || async {
    ///     Ok::<_, std::io::Error>(vec![1; 4096]) // fetch the block here
    /// }))
    /// .unwrap();
    /// assert_eq!(block.len(), 4096);
    /// ```
    pub async fn get_or_load_async<E, F, Fut>(
        &self,
        key: K,
        loader: F,
    ) -> Result<Handle<'_, K>, Arc<E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Vec<u8>, E>>,
        E: Send + Sync + 'static,
    {
        let io = &self.io;
        dispatch!(&self.shared, core, V => {
            let core: &Core<K, _> = core;
            get_or_load_async::<K, _, V, E, F, Fut>(core, io, key, loader)
                .await
                // SAFETY: the load returns the entry with a hold for us.
                .map(|e| unsafe { Handle::new(core, e) })
        })
    }

    /// Loads `key` into memory ahead of a read expected soon (readahead,
    /// prefetch), marked as read ahead, as OpenZFS marks its prefetch
    /// reads: a read ahead is not a use of the block. Returns true if this
    /// call loaded it.
    ///
    /// - If memory holds `key`, or another caller is loading it, nothing is
    ///   done and nothing is counted (no hit: the block is not promoted).
    /// - Otherwise the block comes from the second tier or `loader` (as in
    ///   [`Cache::get_or_load_async`]; callers of `get_or_load` or
    ///   `get_or_load_async` meanwhile wait for this load) and enters MRU
    ///   marked, also if the cache remembered the key as a ghost (the ghost
    ///   hit then neither moves the MRU/MFU split nor counts as one).
    /// - The first demand use of a block read ahead is its first use, not
    ///   its second: it stays in MRU, and only a later hit promotes it to
    ///   MFU. So data read once, sequentially, after being read ahead does
    ///   not fill MFU and push out what is read again. In the lazy hit mode
    ///   the hit path is unchanged (one atomic): eviction, reaching a marked
    ///   block at the MRU tail, counts its first hit as that use and a
    ///   second as a second use (then it goes to MFU), so a reader that
    ///   goes through one block in several reads must count one use: the
    ///   rest of the way with [`Cache::get_in_memory_same_use`]. A caller
    ///   waiting for the load when it completes is that first use.
    /// - A block read ahead and evicted before any use is counted
    ///   (`read_ahead_evicted_unused`), and a later demand miss on it is a
    ///   ghost hit that adapts the split but enters MRU, not MFU.
    ///
    /// Statistics: `read_ahead_inserts`, `read_ahead_hits` (blocks read
    /// ahead that a demand read used) and `read_ahead_evicted_unused`.
    /// A failed load caches nothing and returns its error.
    pub async fn load_ahead_async<E, F, Fut>(&self, key: K, loader: F) -> Result<bool, Arc<E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Vec<u8>, E>>,
        E: Send + Sync + 'static,
    {
        let io = &self.io;
        dispatch!(&self.shared, core, V => {
            let core: &Core<K, _> = core;
            let loaded = load_ahead_async::<K, _, V, E, F, Fut>(core, io, key, loader).await?;
            Ok(loaded.map(|e| {
                // SAFETY: the load returns the entry with a hold for us,
                // released at once.
                drop(unsafe { Handle::new(core, e) });
            }).is_some())
        })
    }

    /// [`Cache::get_or_load_async`] for a cache shared in an [`Arc`]: the
    /// future owns its share of the cache (it is `'static` when the key, the
    /// loader and its future are, so it can be given to `tokio::spawn` as
    /// it is), and so does the [`OwnedHandle`] it returns, which may leave
    /// the task that got it.
    pub async fn get_or_load_async_owned<E, F, Fut>(
        self: Arc<Self>,
        key: K,
        loader: F,
    ) -> Result<OwnedHandle<K>, Arc<E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Vec<u8>, E>>,
        E: Send + Sync + 'static,
    {
        let handle = self.get_or_load_async(key, loader).await?;
        Ok(self.own(handle))
    }

    /// [`Cache::get_in_memory`], returning an [`OwnedHandle`]: a memory hit
    /// as a hold that may outlive the borrow of the cache (the owner of a
    /// `bytes::Bytes`, say). Never does I/O; counts as `get_in_memory`.
    pub fn get_in_memory_owned(&self, key: &K) -> Option<OwnedHandle<K>> {
        self.get_in_memory(key).map(|handle| self.own(handle))
    }

    /// [`Cache::get_in_memory_owned`] for a read that is part of a use of
    /// the block already counted: a reader that goes through one block in
    /// several reads (a file's 128 KiB reads of a 256 KiB block, say) looks
    /// it up once as a use and the rest of the way with this. It takes a
    /// hold and counts no access: the buffer is neither promoted (from MRU
    /// to MFU) nor kept from eviction by it. Counted as `same_use_hits`
    /// (not in `hits`); a miss counts as `get_in_memory`'s.
    ///
    /// Why it matters: ARC tells data read once from data read again by
    /// counting accesses, so one use counted twice looks like reuse. A scan
    /// whose blocks are each read in two pieces would then fill MFU and push
    /// out what is read again.
    pub fn get_in_memory_same_use(&self, key: &K) -> Option<OwnedHandle<K>> {
        fn get<'a, K: Key, M: HitModeImpl>(core: &'a Core<K, M>, key: &K) -> Option<Handle<'a, K>> {
            match M::lookup_same_use(core, core.hash(key), key) {
                Some((e, len)) => {
                    core.events.count(Event::SameUseHit);
                    // SAFETY: `lookup_same_use` returns the entry with a
                    // hold for us, and the length of its data.
                    Some(unsafe { Handle::with_len(core, e, len) })
                }
                None => {
                    core.events.count(Event::Miss);
                    None
                }
            }
        }
        let handle = dispatch!(&self.shared, core => get(core, key))?;
        Some(self.own(handle))
    }

    /// `handle`'s hold (taken on this cache), as an [`OwnedHandle`].
    fn own(&self, handle: Handle<'_, K>) -> OwnedHandle<K> {
        // The hold passes to the owned handle: the handle is not dropped.
        let handle = std::mem::ManuallyDrop::new(handle);
        let core = match &self.shared {
            ByHitMode::Lazy(ByEvictor::Threaded(c) | ByEvictor::Inline(c)) => {
                CoreArc::Lazy(Arc::clone(c))
            }
            ByHitMode::Eager(ByEvictor::Threaded(c) | ByEvictor::Inline(c)) => {
                CoreArc::Eager(Arc::clone(c))
            }
        };
        OwnedHandle {
            core,
            entry: handle.entry,
            len: handle.len,
        }
    }

    /// Drops `key` from the cache (and forgets its ghost). Returns true if a
    /// buffer was cached. A held buffer stays readable by its holders and is
    /// freed when the last hold goes. A load of `key` already running does
    /// not cache its result (as with [`Cache::insert`]).
    pub fn remove(&self, key: &K) -> bool {
        dispatch!(&self.shared, core => remove_key(&**core, key))
    }

    /// Changes the cache's size bound at run time. Growing takes effect at
    /// once; shrinking lets the evict thread bring the cache down in the
    /// background. The learned MRU/MFU split is kept in proportion, so a
    /// resize never resets or pins the adaptation. Fails if `bytes` is 0 or
    /// below `min_bytes`.
    pub fn set_max_bytes(&self, bytes: u64) -> Result<(), ConfigError> {
        fn set<K: Key, M: HitModeImpl, V: Evictor>(
            core: &Core<K, M>,
            bytes: u64,
        ) -> Result<(), ConfigError> {
            if bytes > MAX_BYTES {
                return Err(ConfigError::invalid(format!(
                    "max_bytes ({bytes}) is above the largest cache, {MAX_BYTES} bytes (4 EiB)"
                )));
            }
            if bytes == 0 || bytes < core.config.min_bytes {
                return Err(ConfigError::invalid(format!(
                    "max_bytes ({bytes}) must be at least min_bytes ({})",
                    core.config.min_bytes
                )));
            }
            let old = core.set_target(bytes);
            if bytes < old {
                V::after_shrink(core);
            }
            Ok(())
        }
        dispatch!(&self.shared, core, V => set::<K, _, V>(&**core, bytes))
    }

    /// The cache's size bound now (the builder's `max_bytes`, or the last
    /// [`Cache::set_max_bytes`]): one atomic load, unlike [`Cache::stats`].
    pub fn max_bytes(&self) -> u64 {
        dispatch!(&self.shared, core => core.c())
    }

    /// Blocks until eviction has brought the cache under its target (or
    /// cannot, because the rest is held). With inline eviction, evicts now.
    pub fn wait_for_eviction(&self) {
        dispatch!(&self.shared, core, V => V::wait(&**core))
    }

    /// A snapshot of the statistics.
    pub fn stats(&self) -> Stats {
        fn stats<K: Key, M: HitModeImpl>(core: &Core<K, M>) -> Stats {
            let s = core.sizes();
            let held = M::held_bytes(core, &s);
            let evictable = (s.mru + s.mfu).saturating_sub(held);
            let (mru_hits, mfu_hits) = M::hits(core);
            let h = core.table.figures();
            let l2 = core.tier.as_ref().map(|t| t.figures()).unwrap_or_default();
            // The event counters are read by `Stats::collect`; the rest:
            let supplied = Supplied {
                hits: mru_hits + mfu_hits,
                mru_hits,
                mfu_hits,
                size: s.data(),
                c: core.c(),
                p: core.p(),
                min_bytes: core.config.min_bytes,
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
                sublists: core.config.sublists as u64,
                policy_switches: core.replacement.switches(),
                l2_hits: l2.hits,
                l2_part_hits: l2.part_hits,
                l2_misses: l2.misses,
                l2_size: l2.size,
                l2_writes: l2.writes,
                l2_write_bytes: l2.write_bytes,
                l2_evictions: l2.evictions,
                l2_kept: l2.kept,
                l2_cksum_bad: l2.cksum_bad,
                l2_io_errors: l2.io_errors,
                l2_hdr_bytes: l2.hdr_bytes,
                l2_ghost_bytes: l2.ghost_bytes,
                l2_rebuild_blocks: l2.rebuild_blocks,
                l2_rebuild_ms: l2.rebuild_ms,
            };
            Stats::collect(&core.events, supplied)
        }
        dispatch!(&self.shared, core => stats(&**core))
    }

    /// Starts (`true`) or stops recording lock statistics for every lock of
    /// this cache, in [`crate::lock::lockstat`] under the classes
    /// `hash.stripe`, `mru.sublist`, `mfu.sublist`, `mru_ghost.sublist` and
    /// `mfu_ghost.sublist`.
    pub fn set_lockstat(&self, on: bool) {
        dispatch!(&self.shared, core => {
            core.table.set_lockstat(on);
            for l in core.lists() {
                l.set_lockstat(on);
            }
        })
    }
}

impl<K: Key> fmt::Debug for Cache<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        dispatch!(&self.shared, core => f
            .debug_struct("Cache")
            .field("size", &core.sizes().data())
            .field("c", &core.c())
            .field("p", &core.p())
            .field("sublists", &core.config.sublists)
            .field("hit_mode", &hit_mode_of(&**core))
            .field("policy", &core.config.policy)
            .finish_non_exhaustive())
    }
}

fn hit_mode_of<K: Key, M: HitModeImpl>(_: &Core<K, M>) -> HitMode {
    M::MODE
}

impl<K: Key> Handle<'_, K> {
    /// The key of the held buffer.
    pub fn key(&self) -> &K {
        // SAFETY: our hold keeps the entry alive while `self` lives.
        &unsafe { self.entry.header() }.key
    }
}

impl<K: Key> Deref for Handle<'_, K> {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        // SAFETY: our hold keeps the entry alive while `self` lives; `len` is
        // its data's length (its slot's, or its own).
        unsafe { self.entry.data_prefix(self.len) }
    }
}

impl<K: Key> AsRef<[u8]> for Handle<'_, K> {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl<K: Key> Clone for Handle<'_, K> {
    /// Another hold on the same buffer (no lock: it is already held, so no
    /// list membership changes in either mode).
    fn clone(&self) -> Self {
        // SAFETY: our hold keeps the entry alive.
        let prev = unsafe { self.entry.header() }
            .meta
            .fetch_add(HOLD, Ordering::Relaxed);
        if meta::holds(prev) >= HOLD_LIMIT {
            crate::arc::too_many_holds();
        }
        Handle {
            core: self.core,
            entry: self.entry,
            len: self.len,
        }
    }
}

impl<K: Key> Drop for Handle<'_, K> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the hold this handle took over, given up; the entry is not
        // used after.
        unsafe { self.core.release(self.entry) };
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

/// A hold on a cached buffer, like a [`Handle`], that owns a share of the
/// cache's core instead of borrowing the cache: it is `'static`, so it can
/// outlive the task or scope that got it (as the owner of a `bytes::Bytes`,
/// say), and even the [`Cache`] value itself: the cache's memory is freed
/// when the last of the cache and its owned handles goes. From
/// [`Cache::get_or_load_async_owned`].
pub struct OwnedHandle<K: Key> {
    core: CoreArc<K>,
    /// Held: live until this handle's hold is released.
    entry: EntryPtr<K>,
    len: usize,
}

/// A shared core, named by its hit mode (what an owned handle keeps).
enum CoreArc<K: Key> {
    Lazy(Arc<Core<K, Lazy>>),
    Eager(Arc<Core<K, Eager>>),
}

impl<K: Key> OwnedHandle<K> {
    /// The key of the held buffer.
    pub fn key(&self) -> &K {
        // SAFETY: our hold keeps the entry alive while `self` lives.
        &unsafe { self.entry.header() }.key
    }
}

impl<K: Key> Deref for OwnedHandle<K> {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        // SAFETY: our hold keeps the entry alive while `self` lives; `len` is
        // its data's length.
        unsafe { self.entry.data_prefix(self.len) }
    }
}

impl<K: Key> AsRef<[u8]> for OwnedHandle<K> {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl<K: Key> Clone for OwnedHandle<K> {
    /// Another hold on the same buffer (as [`Handle::clone`]).
    fn clone(&self) -> Self {
        // SAFETY: our hold keeps the entry alive.
        let prev = unsafe { self.entry.header() }
            .meta
            .fetch_add(HOLD, Ordering::Relaxed);
        if meta::holds(prev) >= HOLD_LIMIT {
            crate::arc::too_many_holds();
        }
        let core = match &self.core {
            CoreArc::Lazy(c) => CoreArc::Lazy(Arc::clone(c)),
            CoreArc::Eager(c) => CoreArc::Eager(Arc::clone(c)),
        };
        OwnedHandle {
            core,
            entry: self.entry,
            len: self.len,
        }
    }
}

impl<K: Key> Drop for OwnedHandle<K> {
    fn drop(&mut self) {
        // The hold goes before this share of the core does.
        match &self.core {
            // SAFETY: the hold this handle owns, given up; the entry is not
            // used after.
            CoreArc::Lazy(c) => unsafe { Lazy::release(c, self.entry) },
            // SAFETY: as above.
            CoreArc::Eager(c) => unsafe { Eager::release(c, self.entry) },
        }
    }
}

impl<K: Key + fmt::Debug> fmt::Debug for OwnedHandle<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedHandle")
            .field("key", self.key())
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod l2_tests {
    use super::*;

    /// OpenZFS's first rule for the L2ARC's locks: eviction skips a buffer
    /// that is being written to the second tier (`evict_l2_skip`), and the
    /// write, once done, leaves nothing marked as being written.
    #[test]
    fn eviction_skips_a_buffer_being_written_to_the_second_tier() {
        let dir =
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/l2-unit-tests");
        std::fs::create_dir_all(&dir).unwrap();
        for mode in [HitMode::Eager, HitMode::Lazy] {
            let path = dir.join(format!("evict-skip-{mode:?}"));
            let _ = std::fs::remove_file(&path);
            let cache = Cache::<u64>::builder()
                .max_bytes(16 * 4096)
                .sublists(1)
                .inline_eviction(true)
                .hit_mode(mode)
                .l2(&path, 1 << 20)
                .l2_write_max(64 << 10)
                .build()
                .unwrap();
            for k in 0..16u64 {
                drop(cache.insert(k, vec![k as u8; 4096]));
            }
            {
                let tier = cache.tier.as_ref().unwrap();
                // Key 0, the LRU buffer, is in a batch being written.
                let mut batch = tier.batch();
                assert_eq!(batch.add(&0, &[0u8; 4096], false), crate::l2::Added::Copied);
                drop(cache.insert(100, vec![1; 4096]));
                let s = cache.stats();
                assert_eq!(s.evict_l2_skip, 1, "{mode:?}: {s:?}");
                assert!(cache.contains(&0), "{mode:?}: evicted while being written");
                let left = (0..16u64).filter(|k| cache.contains(k)).count();
                assert_eq!(left, 15, "{mode:?}: another buffer went instead");
                assert_eq!(batch.commit().unwrap(), 1);
                assert_eq!(tier.presence(&0), Presence::Cached);
            }
            // Written: now it may go, and it is on the device.
            for k in 200..216u64 {
                drop(cache.insert(k, vec![2; 4096]));
            }
            assert!(!cache.contains(&0) && cache.l2_contains(&0), "{mode:?}");
            assert_eq!(*cache.get(&0).unwrap(), [0u8; 4096][..]);
            drop(cache);
        }
    }

    /// Read and write errors of the device through the cache: a failed
    /// read is a miss (the loader runs), a failed feed writes nothing.
    #[test]
    fn device_errors_are_misses_through_the_cache() {
        let dir =
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/l2-unit-tests");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cache-faults");
        let _ = std::fs::remove_file(&path);
        let cache = Cache::<u64>::builder()
            .max_bytes(16 * 4096)
            .inline_eviction(true)
            .l2(&path, 1 << 20)
            .l2_write_max(64 << 10)
            .build()
            .unwrap();
        for k in 0..64u64 {
            drop(cache.insert(k, vec![k as u8; 4096]));
        }
        let on_device: Vec<u64> = (0..64).filter(|k| cache.l2_contains(k)).collect();
        assert!(on_device.len() > 20);
        cache.l2_inject_faults(true, false);
        let k = on_device[0];
        let loaded = cache
            .get_or_load(k, || Ok::<_, std::io::Error>(vec![k as u8; 4096]))
            .unwrap();
        assert_eq!(*loaded, vec![k as u8; 4096][..]);
        drop(loaded);
        let s = cache.stats();
        assert_eq!((s.l2_io_errors, s.loads), (1, 1), "{s:?}");
        cache.l2_inject_faults(false, true);
        let writes = cache.stats().l2_writes;
        for k in 1000..1064u64 {
            drop(cache.insert(k, vec![3; 4096]));
        }
        let s = cache.stats();
        assert_eq!(s.l2_writes, writes, "{s:?}");
        assert!(s.l2_io_errors > 1, "{s:?}");
        assert!((1000..1064).all(|k| !cache.l2_contains(&k)));
        cache.l2_inject_faults(false, false);
    }

    /// The evict thread spares buffers the second tier has not copied yet
    /// and feeds it first; a device whose writes fail copies nothing, and
    /// eviction must then go on without the copies (dropping them,
    /// counted), not wait for them: threads inserting far past memory all
    /// finish, and memory ends within its target.
    #[test]
    fn a_device_that_fails_its_writes_never_stalls_the_evict_thread() {
        let dir =
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/l2-unit-tests");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cache-write-faults");
        let _ = std::fs::remove_file(&path);
        let cache = Cache::<u64>::builder()
            .max_bytes(32 * 4096)
            .inline_eviction(false)
            .l2(&path, 4 << 20)
            .l2_write_max(64 << 10)
            .build()
            .unwrap();
        cache.l2_inject_faults(false, true);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let cache = &cache;
                s.spawn(move || {
                    for k in t * 1000..t * 1000 + 1000 {
                        drop(cache.insert(k, vec![k as u8; 4096]));
                    }
                });
            }
        });
        cache.wait_for_eviction();
        let s = cache.stats();
        assert!(s.evict_l2_eligible > 0, "{s:?}");
        assert!(s.l2_io_errors > 0, "{s:?}");
        assert!(s.size <= s.c, "{s:?}");
        cache.l2_inject_faults(false, false);
    }
}

#[cfg(all(test, not(loom)))]
mod seed_tests {
    use super::*;

    /// A loop of 1,200 keys with a fifth of the requests elsewhere at
    /// random, through an inline-evicting cache of 1,000 buffers with
    /// `seed`: its statistics and which keys it holds.
    fn replay(mode: HitMode, seed: u64) -> (Stats, Vec<u64>) {
        let cache = Cache::<u64>::builder()
            .max_bytes(1000)
            .sublists(8)
            .inline_eviction(true)
            .hit_mode(mode)
            .seed(seed)
            .build()
            .unwrap();
        // The trace's own randomness (an xorshift), the same every run.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next_in_loop = 0;
        for _ in 0..30_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = if x.is_multiple_of(5) {
                x % 1200
            } else {
                next_in_loop = (next_in_loop + 1) % 1200;
                next_in_loop
            };
            if cache.get(&key).is_none() {
                drop(cache.insert(key, vec![0]));
            }
        }
        let held = (0..1200).filter(|k| cache.contains(k)).collect();
        (cache.stats(), held)
    }

    /// Two caches with the same seed and the same requests make the same
    /// choices: equal statistics (hits, evictions, ghost hits, `p`) and
    /// equal contents. Each builds its own key hasher and draws its own
    /// random starts, so this fails if either came from anything but the
    /// seed.
    #[test]
    fn the_same_seed_and_requests_give_the_same_cache() {
        for mode in [HitMode::Lazy, HitMode::Eager] {
            let (stats, held) = replay(mode, 7);
            assert!(stats.evictions > 0, "{mode:?}: {stats:?}");
            for _ in 0..3 {
                let (again, held_again) = replay(mode, 7);
                assert_eq!(again, stats, "{mode:?}");
                assert_eq!(held_again, held, "{mode:?}");
            }
        }
    }
}
