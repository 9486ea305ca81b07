//! The hash table: key -> entry, split into independently locked stripes.
//!
//! Like OpenZFS's `buf_hash_table`, a stripe's lock is also the lock that
//! guards the state of the entries hashed to it (their ARC state changes,
//! and in the eager mode their 0 <-> 1 hold transitions), so lookups of keys
//! in different stripes share no lock and no written cache line.
//!
//! Each stripe is an open-addressed table with linear probing. A slot is
//! one 8-byte word: the entry's address, the distance from its home slot,
//! the line of its data's last byte and 8 bits of its key's hash (see
//! [`Slot`]). Removal shifts later slots of the probe run back (no
//! tombstones), so probes stay short under churn; the table starts small and
//! doubles at 3/4 full. We report the figures ZFS does for its table:
//! elements, collisions (inserts whose home slot was taken) and the longest
//! probe run seen (ZFS's longest chain).
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
//! pick the home slot inside it, and the top 8 are the slot's tag (the
//! sublist uses a third range, see `multilist.rs`). Entries do not keep
//! their hash: where the table needs one it has no caller's for (doubling
//! a stripe; a backward shift past a slot too far from home to say how
//! far), it hashes the entry's key with the table's hasher, which is also
//! the cache's ([`HashTable::hash`]).
//!
//! The table stores [`EntryPtr`]s and does not own what they point to: the
//! cache frees an entry after taking it out (see `entry.rs`). Besides its
//! slots, each stripe carries a `per_stripe` value of the cache's choosing, guarded
//! by the same lock (the cache keeps its loads in flight there); the table
//! itself knows nothing about it.

use super::entry::{EntryPtr, Header, NO_LAST_LINE};
use super::epoch::{Guard, Limbo};
use super::sync::{self, fence, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use crate::lock::CachePadded;
use crate::lock::{LockId, LockstatExt, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;
use std::ptr;

/// A slot: one word, 0 when empty, else
///
/// ```text
///  63     56 55       48 47  44 43                                      0
///  +--------+-----------+------+-----------------------------------------+
///  | tag    | last line | disp | entry address >> 4                      |
///  +--------+-----------+------+-----------------------------------------+
/// ```
///
/// - the address: entries are 16-byte aligned and below 2^48
///   ([`EntryPtr`]'s allocation checks both), so 44 bits say it;
/// - the displacement: how far the slot is past the entry's home slot,
///   saturating at [`FAR`] (then the home is found by hashing the key);
/// - the last line: which line of the entry holds its data's last byte
///   ([`EntryPtr::last_data_line`]), so that a probe that matches the tag
///   fetches it at once, beside the header's line, instead of after it
///   (the length is in the header). A hit that reads its buffer's first and
///   last bytes then waits for one DRAM round trip, not two;
/// - the tag: the hash's top 8 bits, compared before the key, so a probe
///   reads the header of another key about once in 256 slots it passes.
///
/// 8 bytes: eight slots per line. The slot used to carry the data's exact
/// length and the high half of the hash (16 bytes, issue 42): that was 17
/// bytes per cached buffer at a million buffers, more than a quarter of
/// what the cache spent on each.
struct Slot<K> {
    word: AtomicU64,
    entry: PhantomData<fn() -> K>,
}

const ADDR_BITS: u32 = 44;
const ADDR_MASK: u64 = (1 << ADDR_BITS) - 1;
const DISP_SHIFT: u32 = ADDR_BITS;
const LINE_SHIFT: u32 = 48;
const TAG_SHIFT: u32 = 56;
/// The saturated displacement: "far, hash the key to find the home".
const FAR: usize = 0xf;

/// The tag of a hash, or of a slot word (the top 8 bits).
#[inline]
fn tag_of(hash: u64) -> u64 {
    hash >> TAG_SHIFT
}

/// The home slot of a hash, before masking: its high 32 bits.
#[inline]
fn home_of(hash: u64) -> usize {
    (hash >> 32) as usize
}

/// A slot word for `entry`, `disp` slots past its home, with `hash`'s tag.
///
/// # Safety
/// `entry` is alive (its header is read: the data's length).
#[inline]
unsafe fn pack<K>(entry: EntryPtr<K>, disp: usize, hash: u64) -> u64 {
    let addr = entry.as_raw() as u64;
    debug_assert!(
        addr & 0xf == 0 && addr >> 48 == 0,
        "entry address {addr:#x}"
    );
    // SAFETY: alive (this function's contract).
    let line = entry.last_data_line(unsafe { entry.header() }.data_len());
    (tag_of(hash) << TAG_SHIFT)
        | (u64::from(line) << LINE_SHIFT)
        | ((disp.min(FAR) as u64) << DISP_SHIFT)
        | (addr >> 4)
}

/// The last-line field of a slot word (`NO_LAST_LINE`: none).
#[inline]
fn line_of(word: u64) -> u8 {
    (word >> LINE_SHIFT) as u8
}

/// The entry of a slot word (`None` for an empty slot).
#[inline]
fn entry_of<K>(word: u64) -> Option<EntryPtr<K>> {
    EntryPtr::from_raw(((word & ADDR_MASK) << 4) as *mut Header<K>)
}

/// `word` with its displacement set to `disp` (saturating).
#[inline]
fn with_disp(word: u64, disp: usize) -> u64 {
    (word & !((FAR as u64) << DISP_SHIFT)) | ((disp.min(FAR) as u64) << DISP_SHIFT)
}

/// The displacement of a slot word (`FAR`: unknown, at least that).
#[inline]
fn disp_of(word: u64) -> usize {
    ((word >> DISP_SHIFT) & FAR as u64) as usize
}

impl<K> Slot<K> {
    fn empty() -> Slot<K> {
        Slot {
            word: AtomicU64::new(0),
            entry: PhantomData,
        }
    }

    /// The slot's word (Acquire: a reader that sees an entry's address sees
    /// the entry's contents).
    #[inline]
    fn load(&self) -> u64 {
        self.word.load(Ordering::Acquire)
    }

    #[inline]
    fn get(&self) -> Option<EntryPtr<K>> {
        entry_of(self.load())
    }

    /// Writer side: stores a word made by [`pack`] (Release: see `load`).
    fn set(&self, word: u64) {
        self.word.store(word, Ordering::Release);
    }

    /// Writer side: empties the slot.
    fn clear(&self) {
        self.word.store(0, Ordering::Release);
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

/// One stripe: its lock-free part, its locked part, and the key hasher
/// (the table's, for the rare slot whose home it must recompute).
pub(crate) struct Stripe<K, S, H> {
    published: Published<K>,
    lock: RwLock<Inner<K, S>>,
    hasher: H,
    /// Readers probe without the lock: retire replaced arrays instead of
    /// freeing them.
    lock_free_readers: bool,
    /// Slot arrays waiting in `Inner::retired` (read without the lock, to
    /// skip stripes with none).
    retired_arrays: AtomicUsize,
}

/// Stripes start with room for their share of the cache's expected entries,
/// in at most this many slots (1 KiB), and double as they fill: an empty
/// cache costs little memory whatever its bound (256 KiB of slots over the
/// default 256 stripes), and one doubling rehashes a single stripe under its
/// write lock (for 1M cached buffers over the default stripes, at most about
/// three thousand entries).
///
/// Why not fewer: a stripe that doubles while the cache fills gets its new
/// array among the buffers allocated meanwhile, so a small cache's slot
/// arrays end up scattered over as many pages as it has stripes, and a hit
/// then needs one more page in the TLB. Sized up front, they sit together.
/// With room for 12 entries at most (16 slots), 32 MiB of 8 KiB buffers
/// made 1-thread hold hits 6% slower in the median of 10 processes, and
/// 10-15% in some (docs/history/benchmarks-record-2026-11.md).
const MAX_INITIAL_SLOTS: usize = 128;

/// What a probe without the lock found.
pub(crate) enum Probe<K> {
    /// An entry with this key (not yet pinned).
    Found(EntryPtr<K>),
    /// No entry with this key.
    Absent,
}

impl<K: Eq, S: Default, H> Stripe<K, S, H> {
    /// A stripe with room for `expected` entries (in at most
    /// `MAX_INITIAL_SLOTS` slots) before it first grows.
    fn new(expected: usize, lock_free_readers: bool, hasher: H) -> Self {
        let n = (expected.clamp(3, MAX_INITIAL_SLOTS) * 4 / 3 + 1)
            .next_power_of_two()
            .min(MAX_INITIAL_SLOTS);
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
            hasher,
            lock_free_readers,
            retired_arrays: AtomicUsize::new(0),
        }
    }
}

impl<K: Eq, S, H> Stripe<K, S, H> {
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
            Some((_, e)) => Probe::Found(e),
            None => Probe::Absent,
        }
    }

    /// The probe loop, for readers without the lock ([`Stripe::probe`]) and
    /// for writers (who also need the slot index): the slot index and entry
    /// of `key`, if its run holds it.
    ///
    /// # Safety
    /// The caller is pinned or holds the stripe's lock (shared or
    /// exclusive), so the slot arrays and entries it may meet stay alive.
    #[inline]
    unsafe fn search(&self, hash: u64, key: &K) -> Option<(usize, EntryPtr<K>)> {
        let p = &self.published;
        let mask = p.mask.load(Ordering::Acquire);
        let base = p.slots.load(Ordering::Acquire);
        let tag = tag_of(hash);
        let mut i = home_of(hash);
        // At most one pass over the array: writers racing with us could
        // otherwise keep us going round.
        for _ in 0..=mask {
            // SAFETY: `mask` read before `base` (see the module comment);
            // the caller is pinned or holds the lock.
            let word = unsafe { Published::slot(base, mask, i) }.load();
            let found = entry_of::<K>(word)?;
            // SAFETY: in the table when its slot was read, and the caller is
            // pinned or locked, so it is not freed meanwhile (entries leave
            // the table before they are freed: `StripeWrite::insert`).
            #[cfg(loom)]
            assert!(
                !unsafe { found.header() }.freed.load(Ordering::Relaxed),
                "a probe reached an entry whose grace period had passed"
            );
            if tag_of(word) == tag {
                // Most likely the key: its data's last line is fetched now,
                // while the header's (compared next) is on its way.
                let line = line_of(word);
                if line != NO_LAST_LINE {
                    found.prefetch_line(line);
                }
                // SAFETY: as above.
                let e = unsafe { found.header() };
                if e.key == *key {
                    return Some((i & mask, found));
                }
            }
            i = i.wrapping_add(1);
        }
        None
    }

    /// [`Stripe::search`]'s entry and its data length.
    ///
    /// # Safety
    /// The caller holds the stripe's lock (shared or exclusive), under which
    /// an entry in the table stays alive.
    #[inline]
    unsafe fn find_with_len(&self, hash: u64, key: &K) -> Option<(EntryPtr<K>, usize)> {
        // SAFETY: the caller holds the lock (this function's contract).
        let (_, e) = unsafe { self.search(hash, key) }?;
        // SAFETY: in the table, under the lock the caller holds.
        Some((e, unsafe { e.header() }.data_len()))
    }

    /// Locks the stripe exclusively.
    #[inline]
    pub(crate) fn write(&self) -> StripeWrite<'_, K, S, H> {
        StripeWrite {
            inner: self.lock.write(),
            stripe: self,
        }
    }

    /// Locks the stripe exclusively if it is free.
    #[inline]
    pub(crate) fn try_write(&self) -> Option<StripeWrite<'_, K, S, H>> {
        Some(StripeWrite {
            inner: self.lock.try_write()?,
            stripe: self,
        })
    }

    /// Locks the stripe shared: probes then see a stable table.
    #[inline]
    pub(crate) fn read(&self) -> StripeRead<'_, K, S, H> {
        StripeRead {
            _inner: self.lock.read(),
            stripe: self,
        }
    }
}

impl<K, S, H> Drop for Stripe<K, S, H> {
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
pub(crate) struct StripeRead<'a, K, S, H> {
    _inner: RwLockReadGuard<'a, Inner<K, S>>,
    stripe: &'a Stripe<K, S, H>,
}

impl<K: Eq, S, H> StripeRead<'_, K, S, H> {
    /// The entry for `key`, if any, and its data length.
    #[inline]
    pub(crate) fn find_with_len(&self, hash: u64, key: &K) -> Option<(EntryPtr<K>, usize)> {
        // SAFETY: we hold the stripe's lock (shared).
        unsafe { self.stripe.find_with_len(hash, key) }
    }
}

/// A stripe locked exclusively: the table's writers.
pub(crate) struct StripeWrite<'a, K, S, H> {
    inner: RwLockWriteGuard<'a, Inner<K, S>>,
    stripe: &'a Stripe<K, S, H>,
}

impl<K: Eq + Hash, S, H: BuildHasher> StripeWrite<'_, K, S, H> {
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
        unsafe { self.stripe.search(hash, key) }.map(|(i, _)| i)
    }

    /// The entry for `key`, if any.
    pub(crate) fn find(&self, hash: u64, key: &K) -> Option<EntryPtr<K>> {
        // SAFETY: we hold the stripe's lock (exclusive).
        unsafe { self.stripe.search(hash, key) }.map(|(_, e)| e)
    }

    /// The entry for `key`, if any, and its data length.
    pub(crate) fn find_with_len(&self, hash: u64, key: &K) -> Option<(EntryPtr<K>, usize)> {
        // SAFETY: we hold the stripe's lock (exclusive).
        unsafe { self.stripe.find_with_len(hash, key) }
    }

    /// The first empty slot of the probe run from `home`, and the slots
    /// examined.
    fn free_slot(&self, home: usize) -> (usize, u32) {
        let mask = self.mask();
        let mut i = home & mask;
        let mut probes = 1;
        while self.slot(i).get().is_some() {
            i = (i + 1) & mask;
            probes += 1;
        }
        (i, probes)
    }

    /// The hash of `e`'s key, for an entry in the stripe (entries do not
    /// keep their hash).
    fn hash_of(&self, e: EntryPtr<K>) -> u64 {
        // SAFETY: in the table, whose lock we hold (exclusive), so alive.
        self.stripe.hasher.hash_one(&unsafe { e.header() }.key)
    }

    /// The home slot (unmasked, as [`home_of`]) of the entry whose slot
    /// word is `word`, found in slot `at`: from its displacement, or, for a
    /// slot too far from home to say, from its key's hash.
    fn home_in(&self, at: usize, word: u64) -> usize {
        match disp_of(word) {
            FAR => home_of(self.hash_of(entry_of(word).expect("an occupied slot"))),
            d => at.wrapping_sub(d),
        }
    }

    /// Adds `entry`, whose key (of hash `hash`) must not be present.
    ///
    /// # Safety
    /// `entry` is alive, and stays so while it is in the table: whoever
    /// takes it out ([`StripeWrite::remove`], [`StripeWrite::replace`],
    /// [`HashTable::drain`]) frees it only after that, and, in a table with
    /// lock-free readers, only once every probe that could have seen it has
    /// ended (a grace period of `epoch`).
    pub(crate) unsafe fn insert(&mut self, entry: EntryPtr<K>, hash: u64) {
        if (self.inner.len + 1) * 4 > (self.mask() + 1) * 3 {
            self.grow();
        }
        let (i, probes) = self.free_slot(home_of(hash));
        if probes > 1 {
            self.inner.collisions += 1;
        }
        self.inner.chain_max = self.inner.chain_max.max(probes);
        // A new entry in an empty slot moves nothing: no probe can miss a
        // key because of it, so no sequence write.
        // SAFETY: alive (this function's contract).
        self.slot(i)
            .set(unsafe { pack(entry, probes as usize - 1, hash) });
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
            loop {
                let word = w.slot(j).load();
                if word == 0 {
                    break;
                }
                let home = w.home_in(j, word) & mask;
                if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                    w.slot(hole)
                        .set(with_disp(word, hole.wrapping_sub(home) & mask));
                    w.slot(j).clear();
                    hole = j;
                }
                j = (j + 1) & mask;
            }
        });
        removed
    }

    /// Replaces the entry for `key` (of hash `hash`; it must be present) by
    /// `entry`, with the same key, returning the old one.
    ///
    /// # Safety
    /// As [`StripeWrite::insert`], for `entry`.
    pub(crate) unsafe fn replace(&mut self, entry: EntryPtr<K>, hash: u64) -> EntryPtr<K> {
        // SAFETY: alive (this function's contract).
        let e = unsafe { entry.header() };
        let at = self
            .position(hash, &e.key)
            .expect("replace of a key that is not in the table");
        let word = self.slot(at).load();
        let old = entry_of(word).expect("a found slot holds an entry");
        // SAFETY: alive (this function's contract).
        self.changing(|w| w.slot(at).set(unsafe { pack(entry, disp_of(word), hash) }));
        old
    }

    /// Doubles the stripe. Each entry's new home takes one more bit of its
    /// hash than the slot keeps, so this hashes every key again (reading
    /// each header): a stripe doubles rarely, and holds a small share of
    /// the cache (at most about three thousand entries at a million, by default).
    fn grow(&mut self) {
        let old_len = self.mask() + 1;
        let bigger = SlotArray::<K>::new(old_len * 2);
        let new_mask = old_len * 2 - 1;
        let mut chain_max = self.inner.chain_max;
        for i in 0..old_len {
            let Some(e) = self.slot(i).get() else {
                continue;
            };
            let hash = self.hash_of(e);
            let mut j = home_of(hash) & new_mask;
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
            // SAFETY: `bigger` as above; `e` is in the table, whose lock we
            // hold, so alive.
            unsafe {
                Published::slot(bigger.ptr, new_mask, j).set(pack(e, probes as usize - 1, hash))
            };
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
                let e = slot.get();
                slot.clear();
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

/// The striped table, and the hasher of its keys.
pub(crate) struct HashTable<K, S, H> {
    stripes: Box<[CachePadded<Stripe<K, S, H>>]>,
    hasher: H,
}

impl<K, S, H> HashTable<K, S, H> {
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

impl<K: Eq, S: Default, H: Clone> HashTable<K, S, H> {
    /// `stripes` (a power of two) stripes for about `expected` entries in
    /// all; each starts with room for its share, in no more than
    /// `MAX_INITIAL_SLOTS` slots, and grows from there. `lock_free_readers`:
    /// some lookups probe without the stripe lock ([`Stripe::probe`]).
    /// `hasher` hashes the keys ([`HashTable::hash`]).
    pub(crate) fn new(stripes: usize, expected: usize, lock_free_readers: bool, hasher: H) -> Self {
        let per_stripe = expected / stripes + 1;
        HashTable {
            stripes: (0..stripes)
                .map(|_| {
                    CachePadded::new(Stripe::new(per_stripe, lock_free_readers, hasher.clone()))
                })
                .collect(),
            hasher,
        }
    }
}

impl<K: Hash, S, H: BuildHasher> HashTable<K, S, H> {
    /// The hash of `key`: what every method taking a `hash` expects.
    #[inline]
    pub(crate) fn hash(&self, key: &K) -> u64 {
        self.hasher.hash_one(key)
    }
}

impl<K: Eq, S, H> HashTable<K, S, H> {
    /// The stripe of `hash`.
    #[inline]
    pub(crate) fn stripe(&self, hash: u64) -> &Stripe<K, S, H> {
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
        sync::prefetch(base.wrapping_add(home_of(hash) & mask));
    }

    /// Locks the stripe of `hash` exclusively (to change the table or the
    /// state of its entries).
    #[inline]
    pub(crate) fn write(&self, hash: u64) -> StripeWrite<'_, K, S, H> {
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
    use std::hash::{BuildHasherDefault, Hasher};

    /// Hashes a `u64` key to itself: a test key is its own hash, so tests
    /// choose home slots, tags and collisions.
    #[derive(Default)]
    struct KeyIsHash(u64);

    impl Hasher for KeyIsHash {
        fn finish(&self) -> u64 {
            self.0
        }
        fn write(&mut self, _: &[u8]) {
            unreachable!("test keys are u64")
        }
        fn write_u64(&mut self, k: u64) {
            self.0 = k;
        }
    }

    type TestStripe = Stripe<u64, (), BuildHasherDefault<KeyIsHash>>;
    type TestWrite<'a> = StripeWrite<'a, u64, (), BuildHasherDefault<KeyIsHash>>;

    /// Test entries are leaked: a few hundred bytes per test.
    fn e(k: u64) -> EntryPtr<u64> {
        EntryPtr::new(k, &[], State::Mru, 0)
    }

    /// The key of a test entry.
    fn key(e: EntryPtr<u64>) -> u64 {
        // SAFETY: test entries are never freed.
        unsafe { e.header() }.key
    }

    /// Inserts a test entry (its key is its hash).
    fn insert(w: &mut TestWrite<'_>, entry: EntryPtr<u64>) {
        // SAFETY: test entries are never freed.
        unsafe { w.insert(entry, key(entry)) }
    }

    fn stripe_for(expected: usize) -> TestStripe {
        Stripe::new(expected, true, BuildHasherDefault::default())
    }

    fn probe(s: &TestStripe, key: u64) -> Option<u64> {
        let g = reclaim::pin();
        match s.probe(&g, key, &key) {
            Probe::Found(e) => Some(self::key(e)),
            Probe::Absent => None,
        }
    }

    #[test]
    fn insert_find_remove_grow_and_collisions() {
        let s = stripe_for(4);
        let mut w = s.write();
        // Same home slot (same high bits), other keys: one probe run.
        let [a, b, c] = [1, 2, 3].map(|k| (7u64 << 32) | k);
        for k in [a, b, c] {
            insert(&mut w, e(k));
        }
        assert_eq!(w.inner.collisions, 2);
        assert_eq!(w.inner.chain_max, 3);
        let spread = |k: u64| k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for k in 10..100u64 {
            insert(&mut w, e(spread(k)));
        }
        assert!(w.mask() + 1 >= 128);
        assert_eq!(key(w.find(b, &b).unwrap()), b);
        let absent = (7 << 32) | 4;
        assert!(w.find(absent, &absent).is_none());
        assert_eq!(key(w.remove(b, &b).unwrap()), b);
        assert!(w.find(b, &b).is_none());
        assert_eq!(key(w.find(c, &c).unwrap()), c);
        let new_c = e(c);
        // SAFETY: test entries are never freed.
        let old = unsafe { w.replace(new_c, c) };
        assert!(old != new_c && key(old) == c);
        assert!(w.find(c, &c) == Some(new_c));
        for k in 10..100u64 {
            let k = spread(k);
            assert_eq!(key(w.remove(k, &k).unwrap()), k);
        }
        assert_eq!(w.inner.len, 2);
        drop(w);
        assert_eq!(probe(&s, c), Some(c));
        assert_eq!(probe(&s, b), None);
    }

    /// A slot word gives back the entry, its tag and its displacement,
    /// saturating at `FAR`.
    #[test]
    fn slot_words_round_trip() {
        let header = std::mem::size_of::<Header<u64>>();
        for len in [0usize, 1, 8192, 20_000] {
            let entry = EntryPtr::new(1u64, &vec![0; len], State::Mru, 0);
            let in_line = entry.as_raw() as usize & 63;
            let line = match len {
                0 => NO_LAST_LINE,
                n if (in_line + header + n - 1) / 64 >= usize::from(NO_LAST_LINE) => NO_LAST_LINE,
                n => ((in_line + header + n - 1) / 64) as u8,
            };
            for (disp, hash) in [
                (0, 0),
                (3, u64::MAX),
                (14, 0xab << 56),
                (15, 1),
                (10_000, 2),
            ] {
                // SAFETY: test entries are never freed.
                let w = unsafe { pack(entry, disp, hash) };
                assert!(entry_of::<u64>(w) == Some(entry));
                assert_eq!(tag_of(w), tag_of(hash));
                assert_eq!(disp_of(w), disp.min(FAR));
                assert_eq!(line_of(w), line, "len {len}");
                let moved = with_disp(w, 7);
                assert!(entry_of::<u64>(moved) == Some(entry));
                assert_eq!(
                    (tag_of(moved), disp_of(moved), line_of(moved)),
                    (tag_of(hash), 7, line)
                );
            }
        }
        assert!(entry_of::<u64>(0).is_none());
    }

    /// Random inserts and removes with few distinct home slots (long,
    /// wrapping, interleaved probe runs) agree with a set, and every
    /// present key stays reachable, locked and lock-free, after each
    /// backward shift.
    #[test]
    fn probe_runs_survive_removal_like_a_map() {
        use std::collections::HashSet;
        let s = stripe_for(8);
        let mut model = HashSet::new();
        use rand::Rng;
        let mut rng = multiarc_sim::workload::rng(0x2545_F491_4F6C_DD1D);
        for step in 0..20_000 {
            let x = rng.next_u64();
            let k = x % 64;
            // Only 8 home slots, some near the table's end: many keys share
            // a run, and runs wrap around to the start. Half the keys share
            // a tag too.
            let k = ((k % 2) << 60) | (((k % 8) * 13 + 120) << 32) | k;
            let mut w = s.write();
            if x & 1 == 0 && !model.contains(&k) {
                insert(&mut w, e(k));
                model.insert(k);
            } else if model.remove(&k) {
                assert_eq!(w.remove(k, &k).map(key), Some(k), "step {step}");
            } else {
                assert!(w.remove(k, &k).is_none(), "step {step}");
            }
            if step % 97 == 0 {
                for &k in &model {
                    assert_eq!(w.find(k, &k).map(key), Some(k), "step {step}");
                }
                assert_eq!(w.inner.len, model.len());
                drop(w);
                for &k in &model {
                    assert_eq!(probe(&s, k), Some(k), "step {step}");
                }
            }
        }
    }

    /// A run longer than a slot can say (displacements past `FAR`): its
    /// entries stay reachable through growth and backward shifts, which
    /// then find homes by hashing keys.
    #[test]
    fn runs_longer_than_a_slot_can_say() {
        use std::collections::HashSet;
        let s = stripe_for(8);
        let mut w = s.write();
        // 700 keys of one home slot, then keys of the next homes, which
        // sit past the run.
        let run: Vec<u64> = (0..700u64)
            .map(|i| ((i % 4) << 60) | (9 << 32) | i)
            .collect();
        let after: Vec<u64> = (0..50u64)
            .map(|i| ((10 + i % 3) << 32) | (1 << 20) | i)
            .collect();
        for &k in run.iter().chain(&after) {
            insert(&mut w, e(k));
        }
        assert!(w.inner.chain_max as usize > FAR);
        let mut present: HashSet<u64> = run.iter().chain(&after).copied().collect();
        use rand::Rng;
        let mut rng = multiarc_sim::workload::rng(7);
        let mut order: Vec<u64> = present.iter().copied().collect();
        order.sort_unstable();
        for step in 0..order.len() {
            let k = order.swap_remove(rng.next_u64() as usize % order.len());
            assert_eq!(w.remove(k, &k).map(key), Some(k), "step {step}");
            present.remove(&k);
            if step % 37 == 0 {
                for &k in &present {
                    assert_eq!(w.find(k, &k).map(key), Some(k), "step {step}");
                }
            }
        }
        assert_eq!(w.inner.len, 0);
    }

    /// A probe racing a writer that shifts and grows the stripe never reads
    /// past its array, and a miss it reports with the sequence count
    /// unchanged is a real miss: a key that stays in the table throughout
    /// is never reported absent.
    #[test]
    fn lock_free_probes_racing_writers_never_miss_a_resident_key() {
        use std::sync::atomic::AtomicBool;
        let s = stripe_for(4);
        let resident = (5u64 << 32) | 1_000_000;
        insert(&mut s.write(), e(resident));
        // Keys sharing the resident key's run: removing them shifts it, and
        // inserting them grows the stripe. The same entries each time (they
        // are never freed, so a probe may read them at any time).
        let others: Vec<_> = (0..64u64).map(|j| e(((5 + j % 3) << 32) | j)).collect();
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let mut w = s.write();
                    for &o in &others {
                        insert(&mut w, o);
                    }
                    for &o in &others {
                        w.remove(key(o), &key(o));
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
                match st.probe(&g, resident, &resident) {
                    Probe::Found(e) => assert_eq!(key(e), resident),
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
