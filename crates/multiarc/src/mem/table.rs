//! The hash table: key -> entry, split into independently locked stripes.
//!
//! Like OpenZFS's `buf_hash_table`, a stripe's lock is also the lock that
//! guards the state of the entries hashed to it (their ARC state changes,
//! and in the eager mode their 0 <-> 1 hold transitions), so lookups of keys
//! in different stripes share no lock and no written cache line.
//!
//! Each stripe is an open-addressed table with linear probing. A slot holds
//! the entry pointer, the high half of the key's hash and the length of the
//! entry's data (see [`Slot`]). Removal shifts later slots of the probe run
//! back (no tombstones), so probes stay short under churn; the table starts
//! small and doubles at 3/4 full. We report the figures ZFS does for its
//! table: elements, collisions (inserts whose home slot was taken) and the
//! longest probe run seen (ZFS's longest chain).
//!
//! # Probes without the lock
//!
//! Writers take the stripe's lock exclusively. The lazy hit path takes no
//! lock at all ([`Stripe::probe`]): the slots are atomics, and a per-stripe
//! sequence count (a seqlock) tells a reader that a writer changed the
//! stripe while it probed. A reader trusts what it found only in two cases:
//! an entry it then pinned with a hold and found live (it was in the table
//! when the probe read its slot, so the hit linearises there), or a miss
//! with the sequence count unchanged. Anything else is retried, and after
//! two tries done under the lock, shared. Memory a probe may still read, an
//! entry taken out of the table or a slot array replaced by a bigger one, is
//! freed only after every probe that could have seen it has ended
//! (`epoch.rs`). A stripe's slot array only ever grows, and a writer
//! publishes a new one's pointer before its mask, so a reader that read the
//! mask first never indexes past the array it reads.
//!
//! Bits of the key's hash: the low bits pick the stripe, the high 32 bits
//! pick the home slot inside it (the sublist uses a third range, see
//! `multilist.rs`).
//!
//! The table stores [`EntryPtr`]s and does not own what they point to: the
//! cache frees an entry after taking it out (see `entry.rs`). Besides its
//! slots, each stripe carries a `per_stripe` value of the cache's choosing, guarded
//! by the same lock (the cache keeps its loads in flight there); the table
//! itself knows nothing about it.

use super::entry::{EntryPtr, Header};
use super::epoch::{Guard, Limbo};
use super::sync::{self, fence, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use crate::lock::CachePadded;
use crate::lock::{LockId, LockstatExt, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::ptr;

/// A slot: empty (null `entry`), or an entry, the high half of its key's
/// hash (the home slot and the probe's first comparison) and the length of
/// its data, packed as `tag << 32 | len`. 16 bytes: four slots per line.
///
/// The length is here, not only in the entry, so that a hit knows where its
/// bytes end before the entry's cache line arrives: the CPU can then fetch
/// the first and the last line of a buffer at once, where reading the
/// length from the entry would make the second fetch wait for the first.
struct Slot<K> {
    tag_len: AtomicU64,
    entry: AtomicPtr<Header<K>>,
}

/// A slot's length for buffers too long to say in 32 bits.
const LEN_IN_ENTRY: u32 = u32::MAX;

/// The slot tag (and home-slot bits) of a hash.
#[inline]
fn tag_of(hash: u64) -> u32 {
    (hash >> 32) as u32
}

impl<K> Slot<K> {
    fn empty() -> Slot<K> {
        Slot {
            tag_len: AtomicU64::new(0),
            entry: AtomicPtr::new(ptr::null_mut()),
        }
    }

    #[inline]
    fn tag(&self) -> u32 {
        (self.tag_len.load(Ordering::Relaxed) >> 32) as u32
    }

    #[inline]
    fn get(&self) -> Option<EntryPtr<K>> {
        EntryPtr::from_raw(self.entry.load(Ordering::Acquire))
    }

    /// Writer side: `tag_len` first, then the pointer (Release: a reader
    /// that sees the pointer sees the entry's contents and the tag).
    ///
    /// # Safety
    /// `entry` is alive (see [`StripeWrite::insert`]).
    unsafe fn set(&self, entry: EntryPtr<K>) {
        // SAFETY: alive (this function's contract).
        let e = unsafe { entry.header() };
        let len = u32::try_from(e.data_len()).unwrap_or(LEN_IN_ENTRY);
        self.tag_len.store(
            (u64::from(tag_of(e.hash)) << 32) | u64::from(len),
            Ordering::Relaxed,
        );
        self.entry.store(entry.as_raw(), Ordering::Release);
    }

    /// Writer side: empties the slot.
    fn clear(&self) {
        self.entry.store(ptr::null_mut(), Ordering::Release);
    }

    fn copy_from(&self, other: &Slot<K>) {
        self.tag_len
            .store(other.tag_len.load(Ordering::Relaxed), Ordering::Relaxed);
        self.entry
            .store(other.entry.load(Ordering::Relaxed), Ordering::Release);
    }
}

/// A slot array, owned through a raw pointer: readers without the lock hold
/// `&Slot`s into it while writers store to the same slots (atomics only).
struct SlotArray<K> {
    ptr: *mut Slot<K>,
    len: usize,
}

// SAFETY: a slot array is atomics only; sending it moves ownership of the
// allocation (freed once, by its owner).
unsafe impl<K: Send + Sync> Send for SlotArray<K> {}
// SAFETY: shared access to a slot array is to its atomics only.
unsafe impl<K: Send + Sync> Sync for SlotArray<K> {}

impl<K> SlotArray<K> {
    fn new(len: usize) -> SlotArray<K> {
        let b: Box<[Slot<K>]> = (0..len).map(|_| Slot::empty()).collect();
        SlotArray {
            ptr: Box::into_raw(b) as *mut Slot<K>,
            len,
        }
    }

    /// Frees the array.
    ///
    /// # Safety
    /// No reader can reach it any more (it was retired and its grace period
    /// passed, or nobody probes without the lock).
    unsafe fn free(self) {
        // SAFETY: allocated by `new` as a boxed slice of `len` slots.
        drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(self.ptr, self.len)) });
    }
}

/// What probes without the lock read: the slot array, its mask, and the
/// sequence count (odd while a writer changes the stripe).
struct Published<K> {
    seq: AtomicU64,
    mask: AtomicUsize,
    slots: AtomicPtr<Slot<K>>,
}

impl<K> Published<K> {
    /// Slot `i & mask` of the array read with `mask`.
    ///
    /// # Safety
    /// `base` and `mask` were read as `probe` reads them (mask first), or
    /// under the stripe's lock; the caller is pinned or holds the lock.
    #[inline]
    unsafe fn slot<'a>(base: *const Slot<K>, mask: usize, i: usize) -> &'a Slot<K> {
        // SAFETY: per the contract the array has at least `mask + 1` slots
        // and is not freed while the caller is pinned or locked.
        unsafe { &*base.add(i & mask) }
    }
}

/// The lock-guarded part of a stripe.
pub(crate) struct Inner<K, S> {
    len: usize,
    collisions: u64,
    /// Longest probe run seen: slots examined to reach an inserted entry.
    chain_max: u32,
    /// Slot arrays replaced by bigger ones, freed when no probe can be in
    /// them any more.
    retired: Limbo<SlotArray<K>>,
    /// The cache's per-stripe data (its loads in flight).
    per_stripe: S,
}

/// One stripe: its lock-free part and its locked part.
pub(crate) struct Stripe<K, S> {
    published: Published<K>,
    lock: RwLock<Inner<K, S>>,
    /// Readers probe without the lock: retire replaced arrays instead of
    /// freeing them.
    lock_free_readers: bool,
    /// Slot arrays waiting in `Inner::retired` (read without the lock, to
    /// skip stripes with none).
    retired_arrays: AtomicUsize,
}

/// Stripes start with room for at most this many entries and double as they
/// fill: an empty cache costs little memory whatever its bound, and one
/// doubling rehashes a single stripe under its write lock (for 1M cached
/// buffers over the default stripes, about a thousand entries).
const MAX_INITIAL_ENTRIES: usize = 12;

/// What a probe without the lock found.
pub(crate) enum Probe<K> {
    /// An entry with this key (not yet pinned) and its data length as the
    /// slot told it.
    Found(EntryPtr<K>, usize),
    /// No entry with this key.
    Absent,
}

impl<K: Eq, S: Default> Stripe<K, S> {
    /// A stripe with room for `expected` entries (at most
    /// `MAX_INITIAL_ENTRIES`) before it first grows.
    fn new(expected: usize, lock_free_readers: bool) -> Self {
        let expected = expected.min(MAX_INITIAL_ENTRIES);
        let n = (expected.max(3) * 4 / 3 + 1).next_power_of_two();
        let array = SlotArray::new(n);
        Stripe {
            published: Published {
                seq: AtomicU64::new(0),
                mask: AtomicUsize::new(n - 1),
                slots: AtomicPtr::new(array.ptr),
            },
            lock: RwLock::new(Inner {
                len: 0,
                collisions: 0,
                chain_max: 0,
                retired: Limbo::default(),
                per_stripe: S::default(),
            }),
            lock_free_readers,
            retired_arrays: AtomicUsize::new(0),
        }
    }
}

impl<K: Eq, S> Stripe<K, S> {
    /// The sequence count to validate a probe with, or `None` while a
    /// writer is at work.
    #[inline]
    pub(crate) fn begin_probe(&self) -> Option<u64> {
        let s = self.published.seq.load(Ordering::Acquire);
        (s & 1 == 0).then_some(s)
    }

    /// True if no writer changed the stripe since `begin_probe` returned
    /// `seq` (the loads before this call are then a consistent view).
    #[inline]
    pub(crate) fn unchanged(&self, seq: u64) -> bool {
        fence(Ordering::Acquire);
        self.published.seq.load(Ordering::Relaxed) == seq
    }

    /// Looks `key` up without the lock (see the module comment), pinned:
    /// the entry found may be read while `_pinned` lives (it is freed only
    /// after a grace period), and beyond only with a hold taken meanwhile.
    /// Do not trust `Absent` unless [`Stripe::unchanged`] says so afterwards.
    #[inline]
    pub(crate) fn probe(&self, _pinned: &Guard, hash: u64, key: &K) -> Probe<K> {
        // SAFETY: pinned (the guard).
        match unsafe { self.search(hash, key) } {
            Some((_, e, len)) => Probe::Found(e, len),
            None => Probe::Absent,
        }
    }

    /// The probe loop, for readers without the lock ([`Stripe::probe`]) and
    /// for writers (who also need the slot index): the slot index, entry and
    /// data length of `key`, if its run holds it.
    ///
    /// # Safety
    /// The caller is pinned or holds the stripe's lock (shared or
    /// exclusive), so the slot arrays and entries it may meet stay alive.
    #[inline]
    unsafe fn search(&self, hash: u64, key: &K) -> Option<(usize, EntryPtr<K>, usize)> {
        let p = &self.published;
        let mask = p.mask.load(Ordering::Acquire);
        let base = p.slots.load(Ordering::Acquire);
        let tag = tag_of(hash);
        let mut i = tag as usize;
        // At most one pass over the array: writers racing with us could
        // otherwise keep us going round.
        for _ in 0..=mask {
            // SAFETY: `mask` read before `base` (see the module comment);
            // the caller is pinned or holds the lock.
            let slot = unsafe { Published::slot(base, mask, i) };
            let found = slot.get()?;
            // SAFETY: in the table when its slot was read, and the caller is
            // pinned or locked, so it is not freed meanwhile (entries leave
            // the table before they are freed: `StripeWrite::insert`).
            let e = unsafe { found.header() };
            #[cfg(loom)]
            assert!(
                !e.freed.load(Ordering::Relaxed),
                "a probe reached an entry whose grace period had passed"
            );
            let tl = slot.tag_len.load(Ordering::Relaxed);
            if (tl >> 32) as u32 == tag && e.key == *key {
                let len = match tl as u32 {
                    LEN_IN_ENTRY => e.data_len(),
                    n => n as usize,
                };
                return Some((i & mask, found, len));
            }
            i = i.wrapping_add(1);
        }
        None
    }

    /// Locks the stripe exclusively.
    #[inline]
    pub(crate) fn write(&self) -> StripeWrite<'_, K, S> {
        StripeWrite {
            inner: self.lock.write(),
            stripe: self,
        }
    }

    /// Locks the stripe exclusively if it is free.
    #[inline]
    pub(crate) fn try_write(&self) -> Option<StripeWrite<'_, K, S>> {
        Some(StripeWrite {
            inner: self.lock.try_write()?,
            stripe: self,
        })
    }

    /// Locks the stripe shared: probes then see a stable table.
    #[inline]
    pub(crate) fn read(&self) -> StripeRead<'_, K, S> {
        StripeRead {
            _inner: self.lock.read(),
            stripe: self,
        }
    }
}

impl<K, S> Drop for Stripe<K, S> {
    fn drop(&mut self) {
        let inner = self.lock.get_mut();
        for a in inner.retired.drain() {
            // SAFETY: `&mut self`: no probe of this stripe is running.
            unsafe { a.free() };
        }
        let array = SlotArray::<K> {
            ptr: self.published.slots.load(Ordering::Relaxed),
            len: self.published.mask.load(Ordering::Relaxed) + 1,
        };
        // SAFETY: as above; the current array, freed once.
        unsafe { array.free() };
    }
}

/// A stripe locked shared.
pub(crate) struct StripeRead<'a, K, S> {
    _inner: RwLockReadGuard<'a, Inner<K, S>>,
    stripe: &'a Stripe<K, S>,
}

impl<K: Eq, S> StripeRead<'_, K, S> {
    /// The entry for `key`, if any, and its data length.
    #[inline]
    pub(crate) fn find_with_len(&self, hash: u64, key: &K) -> Option<(EntryPtr<K>, usize)> {
        // SAFETY: we hold the stripe's lock (shared).
        unsafe { self.stripe.search(hash, key) }.map(|(_, e, len)| (e, len))
    }
}

/// A stripe locked exclusively: the table's writers.
pub(crate) struct StripeWrite<'a, K, S> {
    inner: RwLockWriteGuard<'a, Inner<K, S>>,
    stripe: &'a Stripe<K, S>,
}

impl<K: Eq, S> StripeWrite<'_, K, S> {
    /// The cache's per-stripe value.
    #[inline]
    pub(crate) fn per_stripe(&mut self) -> &mut S {
        &mut self.inner.per_stripe
    }

    #[inline]
    fn mask(&self) -> usize {
        self.stripe.published.mask.load(Ordering::Relaxed)
    }

    #[inline]
    fn slot(&self, i: usize) -> &Slot<K> {
        let p = &self.stripe.published;
        // SAFETY: we hold the lock: the array is the current one and stays.
        unsafe { Published::slot(p.slots.load(Ordering::Relaxed), self.mask(), i) }
    }

    /// Runs `change` as one write of the sequence count (see `unchanged`).
    fn changing<R>(&mut self, change: impl FnOnce(&mut Self) -> R) -> R {
        let seq = &self.stripe.published.seq;
        let s = seq.load(Ordering::Relaxed);
        seq.store(s + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        let r = change(self);
        seq.store(s + 2, Ordering::Release);
        r
    }

    /// The slot index of `key`, if present.
    fn position(&self, hash: u64, key: &K) -> Option<usize> {
        // SAFETY: we hold the stripe's lock (exclusive).
        unsafe { self.stripe.search(hash, key) }.map(|(i, _, _)| i)
    }

    /// The entry for `key`, if any.
    pub(crate) fn find(&self, hash: u64, key: &K) -> Option<EntryPtr<K>> {
        // SAFETY: we hold the stripe's lock (exclusive).
        unsafe { self.stripe.search(hash, key) }.map(|(_, e, _)| e)
    }

    /// The entry for `key`, if any, and its data length.
    pub(crate) fn find_with_len(&self, hash: u64, key: &K) -> Option<(EntryPtr<K>, usize)> {
        // SAFETY: we hold the stripe's lock (exclusive).
        unsafe { self.stripe.search(hash, key) }.map(|(_, e, len)| (e, len))
    }

    /// The first empty slot of `tag`'s probe run, and the slots examined.
    fn free_slot(&self, tag: u32) -> (usize, u32) {
        let mask = self.mask();
        let mut i = tag as usize & mask;
        let mut probes = 1;
        while self.slot(i).get().is_some() {
            i = (i + 1) & mask;
            probes += 1;
        }
        (i, probes)
    }

    /// Adds `entry`, whose key must not be present.
    ///
    /// # Safety
    /// `entry` is alive, and stays so while it is in the table: whoever
    /// takes it out ([`StripeWrite::remove`], [`StripeWrite::replace`],
    /// [`HashTable::drain`]) frees it only after that, and, in a table with
    /// lock-free readers, only once every probe that could have seen it has
    /// ended (a grace period of `epoch`).
    pub(crate) unsafe fn insert(&mut self, entry: EntryPtr<K>) {
        if (self.inner.len + 1) * 4 > (self.mask() + 1) * 3 {
            self.grow();
        }
        // SAFETY: alive (this function's contract).
        let hash = unsafe { entry.header() }.hash;
        let (i, probes) = self.free_slot(tag_of(hash));
        if probes > 1 {
            self.inner.collisions += 1;
        }
        self.inner.chain_max = self.inner.chain_max.max(probes);
        // A new entry in an empty slot moves nothing: no probe can miss a
        // key because of it, so no sequence write.
        // SAFETY: alive (this function's contract).
        unsafe { self.slot(i).set(entry) };
        self.inner.len += 1;
    }

    /// Removes and returns the entry for `key`.
    pub(crate) fn remove(&mut self, hash: u64, key: &K) -> Option<EntryPtr<K>> {
        let at = self.position(hash, key)?;
        let removed = self.slot(at).get();
        self.changing(|w| {
            w.slot(at).clear();
            w.inner.len -= 1;
            // Backward shift: walk the rest of the run; an entry may fill the
            // hole if the hole lies between its home slot and where it sits
            // (cyclically), so every entry stays reachable from its home.
            let mask = w.mask();
            let mut hole = at;
            let mut j = (at + 1) & mask;
            while w.slot(j).get().is_some() {
                let home = w.slot(j).tag() as usize & mask;
                if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                    w.slot(hole).copy_from(w.slot(j));
                    w.slot(j).clear();
                    hole = j;
                }
                j = (j + 1) & mask;
            }
        });
        removed
    }

    /// Replaces the entry for `entry.key` (which must be present) by `entry`,
    /// returning the old one.
    ///
    /// # Safety
    /// As [`StripeWrite::insert`], for `entry`.
    pub(crate) unsafe fn replace(&mut self, entry: EntryPtr<K>) -> EntryPtr<K> {
        // SAFETY: alive (this function's contract).
        let e = unsafe { entry.header() };
        let at = self
            .position(e.hash, &e.key)
            .expect("replace of a key that is not in the table");
        let old = self.slot(at).get().expect("a found slot holds an entry");
        // SAFETY: as above.
        self.changing(|w| unsafe { w.slot(at).set(entry) });
        old
    }

    fn grow(&mut self) {
        let old_len = self.mask() + 1;
        let bigger = SlotArray::<K>::new(old_len * 2);
        let new_mask = old_len * 2 - 1;
        let mut chain_max = self.inner.chain_max;
        for i in 0..old_len {
            let from = self.slot(i);
            if from.get().is_none() {
                continue;
            }
            let mut j = from.tag() as usize & new_mask;
            let mut probes = 1;
            // SAFETY: `bigger` is ours alone until published below.
            while unsafe { Published::slot(bigger.ptr, new_mask, j) }
                .get()
                .is_some()
            {
                j = (j + 1) & new_mask;
                probes += 1;
            }
            chain_max = chain_max.max(probes);
            // SAFETY: as above.
            unsafe { Published::slot(bigger.ptr, new_mask, j) }.copy_from(from);
        }
        self.inner.chain_max = chain_max;
        let old = self.changing(|w| {
            let p = &w.stripe.published;
            let old = SlotArray {
                ptr: p.slots.load(Ordering::Relaxed),
                len: old_len,
            };
            // Pointer before mask (see the module comment).
            p.slots.store(bigger.ptr, Ordering::Release);
            p.mask.store(new_mask, Ordering::Release);
            old
        });
        if self.stripe.lock_free_readers {
            self.inner.retired.retire(old);
            // Growth is rare (a stripe doubles), so it may pay for two epoch
            // advances: with no probe pinned meanwhile, the old array goes
            // at once instead of doubling the table's memory.
            // SAFETY: the limbo frees only arrays whose grace period passed.
            let left = self
                .inner
                .retired
                .collect_advancing(2, |a| unsafe { a.free() });
            self.stripe.retired_arrays.store(left, Ordering::Relaxed);
        } else {
            // SAFETY: nobody probes this table without its lock.
            unsafe { old.free() };
        }
    }
}

impl<K, S> Inner<K, S> {
    /// Takes every entry out of `published` (to free them when the cache is
    /// dropped).
    fn drain(&mut self, published: &Published<K>) -> Vec<EntryPtr<K>> {
        self.len = 0;
        let mask = published.mask.load(Ordering::Relaxed);
        let base = published.slots.load(Ordering::Relaxed);
        (0..=mask)
            .filter_map(|i| {
                // SAFETY: exclusive access (`&mut` of the stripe's data).
                let slot = unsafe { Published::slot(base, mask, i) };
                let e = EntryPtr::from_raw(slot.entry.load(Ordering::Relaxed));
                slot.entry.store(ptr::null_mut(), Ordering::Relaxed);
                e
            })
            .collect()
    }
}

/// Figures describing the table's health.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct HashFigures {
    pub(crate) elements: u64,
    pub(crate) collisions: u64,
    pub(crate) chain_max: u64,
}

/// The striped table.
pub(crate) struct HashTable<K, S> {
    stripes: Box<[CachePadded<Stripe<K, S>>]>,
}

impl<K, S> HashTable<K, S> {
    /// Every entry, taken out of the table.
    pub(crate) fn drain(&mut self) -> Vec<EntryPtr<K>> {
        let mut all = Vec::new();
        for s in self.stripes.iter_mut() {
            let s = &mut **s;
            all.extend(s.lock.get_mut().drain(&s.published));
        }
        all
    }
}

impl<K: Eq, S: Default> HashTable<K, S> {
    /// `stripes` (a power of two) stripes for about `expected` entries in
    /// all; each starts with room for its share, but for no more than
    /// `MAX_INITIAL_ENTRIES`, and grows from there. `lock_free_readers`:
    /// some lookups probe without the stripe lock ([`Stripe::probe`]).
    pub(crate) fn new(stripes: usize, expected: usize, lock_free_readers: bool) -> Self {
        let per_stripe = expected / stripes + 1;
        HashTable {
            stripes: (0..stripes)
                .map(|_| CachePadded::new(Stripe::new(per_stripe, lock_free_readers)))
                .collect(),
        }
    }
}

impl<K: Eq, S> HashTable<K, S> {
    /// The stripe of `hash`.
    #[inline]
    pub(crate) fn stripe(&self, hash: u64) -> &Stripe<K, S> {
        &self.stripes[(hash as usize) & (self.stripes.len() - 1)]
    }

    /// Starts fetching the home slot of `hash` (a hint for a lookup or a
    /// change of that key a little later, whose first cache miss is that
    /// slot): reads the stripe's published mask and array, and nothing else.
    /// A race with a growing stripe only makes the hint point elsewhere.
    #[inline]
    pub(crate) fn prefetch(&self, hash: u64) {
        let p = &self.stripe(hash).published;
        let mask = p.mask.load(Ordering::Relaxed);
        let base = p.slots.load(Ordering::Relaxed);
        // An address only (never dereferenced here): `wrapping_add` keeps
        // it safe whatever the array is by now.
        sync::prefetch(base.wrapping_add(tag_of(hash) as usize & mask));
    }

    /// Locks the stripe of `hash` exclusively (to change the table or the
    /// state of its entries).
    #[inline]
    pub(crate) fn write(&self, hash: u64) -> StripeWrite<'_, K, S> {
        self.stripe(hash).write()
    }

    /// Frees the replaced slot arrays whose grace period has passed (a
    /// stripe's growth tries at once; what a pinned reader held back then
    /// goes here, from the evict thread). Skips stripes that are busy.
    pub(crate) fn collect_retired(&self) {
        for s in self.stripes.iter() {
            if s.retired_arrays.load(Ordering::Relaxed) == 0 {
                continue;
            }
            let Some(mut w) = s.try_write() else {
                continue;
            };
            // SAFETY: the limbo frees only arrays whose grace period passed.
            let left = w.inner.retired.collect(|a| unsafe { a.free() });
            s.retired_arrays.store(left, Ordering::Relaxed);
        }
    }

    pub(crate) fn figures(&self) -> HashFigures {
        let mut f = HashFigures::default();
        for s in self.stripes.iter() {
            let w = s.lock.read();
            f.elements += w.len as u64;
            f.collisions += w.collisions;
            f.chain_max = f.chain_max.max(w.chain_max as u64);
        }
        f
    }

    pub(crate) fn set_lockstat(&self, on: bool) {
        for (i, s) in self.stripes.iter().enumerate() {
            s.lock.set_lockstat(on.then_some(LockId {
                class: "hash.stripe",
                index: i as u32,
            }));
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::mem as reclaim;
    use crate::mem::State;

    /// Test entries are leaked: a few hundred bytes per test.
    fn e(k: u64, hash: u64) -> EntryPtr<u64> {
        EntryPtr::new(k, hash, &[], State::Mru, 0)
    }

    /// The key of a test entry.
    fn key(e: EntryPtr<u64>) -> u64 {
        // SAFETY: test entries are never freed.
        unsafe { e.header() }.key
    }

    /// Inserts a test entry.
    fn insert(w: &mut StripeWrite<'_, u64, ()>, entry: EntryPtr<u64>) {
        // SAFETY: test entries are never freed.
        unsafe { w.insert(entry) }
    }

    fn stripe() -> Stripe<u64, ()> {
        Stripe::new(4, true)
    }

    fn probe(s: &Stripe<u64, ()>, hash: u64, key: u64) -> Option<u64> {
        let g = reclaim::pin();
        match s.probe(&g, hash, &key) {
            Probe::Found(e, _) => Some(self::key(e)),
            Probe::Absent => None,
        }
    }

    #[test]
    fn insert_find_remove_grow_and_collisions() {
        let s = stripe();
        let mut w = s.write();
        // Same home slot (same high bits): one probe run.
        insert(&mut w, e(1, 7 << 32));
        insert(&mut w, e(2, 7 << 32));
        insert(&mut w, e(3, 7 << 32));
        assert_eq!(w.inner.collisions, 2);
        assert_eq!(w.inner.chain_max, 3);
        for k in 10..100u64 {
            insert(&mut w, e(k, k.wrapping_mul(0x9E37_79B9_7F4A_7C15)));
        }
        assert!(w.mask() + 1 >= 128);
        assert_eq!(key(w.find(7 << 32, &2).unwrap()), 2);
        assert!(w.find(7 << 32, &4).is_none());
        assert_eq!(key(w.remove(7 << 32, &2).unwrap()), 2);
        assert!(w.find(7 << 32, &2).is_none());
        assert_eq!(key(w.find(7 << 32, &3).unwrap()), 3);
        // SAFETY: test entries are never freed.
        let old = unsafe { w.replace(e(3, 7 << 32)) };
        assert_eq!(key(old), 3);
        for k in 10..100u64 {
            let h = k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            assert_eq!(key(w.remove(h, &k).unwrap()), k);
        }
        assert_eq!(w.inner.len, 2);
        drop(w);
        assert_eq!(probe(&s, 7 << 32, 3), Some(3));
        assert_eq!(probe(&s, 7 << 32, 2), None);
    }

    /// Random inserts and removes with few distinct home slots (long,
    /// wrapping, interleaved probe runs) agree with a `HashMap`, and every
    /// present key stays reachable, locked and lock-free, after each
    /// backward shift.
    #[test]
    fn probe_runs_survive_removal_like_a_map() {
        use std::collections::HashMap;
        let s = Stripe::<u64, ()>::new(8, true);
        let mut model: HashMap<u64, u64> = HashMap::new();
        use rand::Rng;
        let mut rng = multiarc_sim::workload::rng(0x2545_F491_4F6C_DD1D);
        for step in 0..20_000 {
            let x = rng.next_u64();
            let k = x % 64;
            // Only 8 home slots, some near the table's end: many keys share
            // a run, and runs wrap around to the start.
            let hash = (((k % 8) * 13 + 120) << 32) | k;
            let mut w = s.write();
            if x & 1 == 0 && !model.contains_key(&k) {
                insert(&mut w, e(k, hash));
                model.insert(k, hash);
            } else if let Some(h) = model.remove(&k) {
                assert_eq!(w.remove(h, &k).map(key), Some(k), "step {step}");
            } else {
                assert!(w.remove(hash, &k).is_none(), "step {step}");
            }
            if step % 97 == 0 {
                for (&k, &h) in &model {
                    assert_eq!(w.find(h, &k).map(key), Some(k), "step {step}");
                }
                assert_eq!(w.inner.len, model.len());
                drop(w);
                for (&k, &h) in &model {
                    assert_eq!(probe(&s, h, k), Some(k), "step {step}");
                }
            }
        }
    }

    /// A probe racing a writer that shifts and grows the stripe never reads
    /// past its array, and a miss it reports with the sequence count
    /// unchanged is a real miss: a key that stays in the table throughout
    /// is never reported absent.
    #[test]
    fn lock_free_probes_racing_writers_never_miss_a_resident_key() {
        use std::sync::atomic::AtomicBool;
        let s = Stripe::<u64, ()>::new(4, true);
        let resident_hash = 5u64 << 32;
        insert(&mut s.write(), e(1_000_000, resident_hash));
        // Keys sharing the resident key's run: removing them shifts it, and
        // inserting them grows the stripe. The same entries each time (they
        // are never freed, so a probe may read them at any time).
        let others: Vec<_> = (0..64u64).map(|j| e(j, ((5 + j % 3) << 32) | j)).collect();
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let mut w = s.write();
                    for &o in &others {
                        insert(&mut w, o);
                    }
                    for o in &others {
                        // SAFETY: test entries are never freed.
                        let o = unsafe { o.header() };
                        w.remove(o.hash, &o.key);
                    }
                }
            });
            let mut checked = 0u64;
            for _ in 0..200_000 {
                let g = reclaim::pin();
                let st = &s;
                let Some(seq) = st.begin_probe() else {
                    continue;
                };
                match st.probe(&g, resident_hash, &1_000_000) {
                    Probe::Found(e, _) => assert_eq!(key(e), 1_000_000),
                    Probe::Absent => {
                        assert!(!st.unchanged(seq), "a resident key reported absent");
                    }
                }
                checked += 1;
            }
            stop.store(true, Ordering::Relaxed);
            assert!(checked > 0);
        });
    }
}
