//! The hash table: key -> entry, split into independently locked stripes.
//!
//! Like OpenZFS's `buf_hash_table`, a stripe's lock is also the lock that
//! guards the state of the entries hashed to it (their 0 <-> 1 hold
//! transitions and ARC state changes), so a lookup and the hold it takes are
//! one critical section, and lookups of keys in different stripes share no
//! lock and no written cache line. The lock is a reader-writer lock: the lazy
//! hit path only reads the table (its hold and reference bit are atomics), so
//! hits on one stripe do not wait for each other, and a reader preempted
//! inside it (32 threads on 2 cores) does not stall the other readers.
//!
//! Each stripe is an open-addressed table with linear probing whose slots
//! hold the key's full hash beside the entry pointer. A hit therefore costs
//! two dependent cache misses before the data (the slot's line, then the
//! entry), where ZFS's chains (and our first version: a bucket array of
//! indexes into a slab of chain nodes) cost three; a miss usually ends in the
//! slot's line without touching any entry, since the hashes of the slots it
//! probes differ from the key's. Removal shifts later slots of the probe
//! run back (no tombstones), so probes stay short under churn; the table
//! starts small and doubles at 3/4 full. We still report the figures ZFS
//! does for its table: elements, collisions (inserts whose home slot was
//! taken) and the longest probe run seen (ZFS's longest chain).
//!
//! Bits of the key's hash: the low bits pick the stripe, the high 32 bits
//! pick the home slot inside it (the sublist uses a third range, see
//! `shared.rs`).
//!
//! The table stores [`EntryPtr`]s and does not own what they point to: the
//! cache frees an entry after taking it out (see `entry.rs`). Besides its
//! slots, each stripe carries a `side` value of the cache's choosing, guarded
//! by the same lock (the cache keeps its loads in flight there); the table
//! itself knows nothing about it.

use crate::entry::EntryPtr;
use crate::lock::{LockId, RwLock, RwLockReadGuard, RwLockWriteGuard};
use crossbeam_utils::CachePadded;

/// A slot: empty (`entry` is `None`), or an entry and its key's hash.
struct Slot<K> {
    hash: u64,
    entry: Option<EntryPtr<K>>,
}

impl<K> Slot<K> {
    const EMPTY: Slot<K> = Slot {
        hash: 0,
        entry: None,
    };
}

/// One stripe: an open-addressed table of entries, plus the user's `side`
/// value under the same lock.
pub(crate) struct Stripe<K, S> {
    slots: Box<[Slot<K>]>,
    len: usize,
    collisions: u64,
    /// Longest probe run seen: slots examined to reach an inserted entry.
    chain_max: u32,
    /// The cache's per-stripe data (its loads in flight).
    pub(crate) side: S,
}

/// Stripes start with room for at most this many entries and double as they
/// fill: an empty cache costs little memory whatever its bound, and one
/// doubling rehashes a single stripe under its write lock (for 1M cached
/// buffers over the default stripes, about a thousand entries).
const MAX_INITIAL_ENTRIES: usize = 12;

fn empty_slots<K>(n: usize) -> Box<[Slot<K>]> {
    (0..n).map(|_| Slot::EMPTY).collect()
}

impl<K: Eq, S: Default> Stripe<K, S> {
    /// A stripe with room for `expected` entries (at most
    /// `MAX_INITIAL_ENTRIES`) before it first grows.
    fn new(expected: usize) -> Self {
        let expected = expected.min(MAX_INITIAL_ENTRIES);
        let slots = (expected.max(3) * 4 / 3 + 1).next_power_of_two();
        Stripe {
            slots: empty_slots(slots),
            len: 0,
            collisions: 0,
            chain_max: 0,
            side: S::default(),
        }
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    #[inline]
    fn home(&self, hash: u64) -> usize {
        ((hash >> 32) as usize) & self.mask()
    }

    /// The slot index of `key`, if present.
    #[inline]
    fn position(&self, hash: u64, key: &K) -> Option<usize> {
        let mask = self.mask();
        let mut i = self.home(hash);
        // Terminates: the table is never full (it grows at 3/4).
        loop {
            let slot = &self.slots[i];
            match &slot.entry {
                None => return None,
                Some(e) if slot.hash == hash && e.key == *key => return Some(i),
                Some(_) => i = (i + 1) & mask,
            }
        }
    }

    /// The entry for `key`, if any.
    #[inline]
    pub(crate) fn find(&self, hash: u64, key: &K) -> Option<EntryPtr<K>> {
        self.position(hash, key).and_then(|i| self.slots[i].entry)
    }

    /// Adds `entry`, whose key must not be present.
    pub(crate) fn insert(&mut self, entry: EntryPtr<K>) {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        let (i, probes) = self.free_slot(entry.hash);
        if probes > 1 {
            self.collisions += 1;
        }
        self.chain_max = self.chain_max.max(probes);
        self.slots[i] = Slot {
            hash: entry.hash,
            entry: Some(entry),
        };
        self.len += 1;
    }

    /// The first empty slot of `hash`'s probe run, and the slots examined.
    fn free_slot(&self, hash: u64) -> (usize, u32) {
        let mask = self.mask();
        let mut i = self.home(hash);
        let mut probes = 1;
        while self.slots[i].entry.is_some() {
            i = (i + 1) & mask;
            probes += 1;
        }
        (i, probes)
    }

    /// Removes and returns the entry for `key`.
    pub(crate) fn remove(&mut self, hash: u64, key: &K) -> Option<EntryPtr<K>> {
        let at = self.position(hash, key)?;
        let removed = self.slots[at].entry.take();
        self.len -= 1;
        // Backward shift: walk the rest of the run; an entry may fill the
        // hole if the hole lies between its home slot and where it sits
        // (cyclically), so every entry stays reachable from its home.
        let mask = self.mask();
        let mut hole = at;
        let mut j = (at + 1) & mask;
        while self.slots[j].entry.is_some() {
            let home = self.home(self.slots[j].hash);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole] = std::mem::replace(&mut self.slots[j], Slot::EMPTY);
                hole = j;
            }
            j = (j + 1) & mask;
        }
        removed
    }

    /// Replaces the entry for `entry.key` (which must be present) by `entry`,
    /// returning the old one.
    pub(crate) fn replace(&mut self, entry: EntryPtr<K>) -> EntryPtr<K> {
        let at = self
            .position(entry.hash, &entry.key)
            .expect("replace of a key that is not in the table");
        self.slots[at]
            .entry
            .replace(entry)
            .expect("a found slot holds an entry")
    }

    fn grow(&mut self) {
        let bigger = empty_slots(self.slots.len() * 2);
        let old = std::mem::replace(&mut self.slots, bigger);
        for slot in old.into_vec() {
            if slot.entry.is_some() {
                let (i, probes) = self.free_slot(slot.hash);
                self.chain_max = self.chain_max.max(probes);
                self.slots[i] = slot;
            }
        }
    }
}

impl<K, S> Stripe<K, S> {
    /// Takes every entry out (to free them when the cache is dropped).
    fn drain(&mut self) -> Vec<EntryPtr<K>> {
        self.len = 0;
        self.slots
            .iter_mut()
            .filter_map(|s| s.entry.take())
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

/// One stripe behind its lock, on its own cache line.
type LockedStripe<K, S> = CachePadded<RwLock<Stripe<K, S>>>;

/// The striped table.
pub(crate) struct HashTable<K, S> {
    stripes: Box<[LockedStripe<K, S>]>,
}

impl<K, S> HashTable<K, S> {
    /// Every entry, taken out of the table.
    pub(crate) fn drain(&mut self) -> Vec<EntryPtr<K>> {
        let mut all = Vec::new();
        for s in self.stripes.iter_mut() {
            all.extend(s.get_mut().drain());
        }
        all
    }
}

impl<K: Eq, S: Default> HashTable<K, S> {
    /// `stripes` (a power of two) stripes for about `expected` entries in
    /// all; each starts with room for its share, but for no more than
    /// `MAX_INITIAL_ENTRIES`, and grows from there.
    pub(crate) fn new(stripes: usize, expected: usize) -> Self {
        let per_stripe = expected / stripes + 1;
        HashTable {
            stripes: (0..stripes)
                .map(|_| CachePadded::new(RwLock::new(Stripe::new(per_stripe))))
                .collect(),
        }
    }

    /// The stripe lock of `hash`.
    #[inline]
    pub(crate) fn stripe(&self, hash: u64) -> &RwLock<Stripe<K, S>> {
        &self.stripes[(hash as usize) & (self.stripes.len() - 1)]
    }

    /// Locks the stripe of `hash` exclusively (to change the table or the
    /// state of its entries).
    #[inline]
    pub(crate) fn write(&self, hash: u64) -> RwLockWriteGuard<'_, Stripe<K, S>> {
        self.stripe(hash).write()
    }

    /// Locks the stripe of `hash` shared (lookups that change nothing but
    /// atomics: the lazy hit path).
    #[inline]
    pub(crate) fn read(&self, hash: u64) -> RwLockReadGuard<'_, Stripe<K, S>> {
        self.stripe(hash).read()
    }

    pub(crate) fn figures(&self) -> HashFigures {
        let mut f = HashFigures::default();
        for s in self.stripes.iter() {
            let s = s.read();
            f.elements += s.len as u64;
            f.collisions += s.collisions;
            f.chain_max = f.chain_max.max(s.chain_max as u64);
        }
        f
    }

    pub(crate) fn set_lockstat(&self, on: bool) {
        for (i, s) in self.stripes.iter().enumerate() {
            s.set_lockstat(on.then_some(LockId {
                class: "hash.stripe",
                index: i as u32,
            }));
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::entry::State;

    /// Test entries are leaked: a few hundred bytes per test.
    fn e(k: u64, hash: u64) -> EntryPtr<u64> {
        EntryPtr::new(k, hash, &[], State::Mru, 0)
    }

    #[test]
    fn insert_find_remove_grow_and_collisions() {
        let mut s = Stripe::<u64, ()>::new(4);
        // Same home slot (same high bits): one probe run.
        s.insert(e(1, 7 << 32));
        s.insert(e(2, 7 << 32));
        s.insert(e(3, 7 << 32));
        assert_eq!(s.collisions, 2);
        assert_eq!(s.chain_max, 3);
        for k in 10..100u64 {
            s.insert(e(k, k.wrapping_mul(0x9E37_79B9_7F4A_7C15)));
        }
        assert!(s.slots.len() >= 128);
        assert_eq!(s.find(7 << 32, &2).unwrap().key, 2);
        assert!(s.find(7 << 32, &4).is_none());
        assert_eq!(s.remove(7 << 32, &2).unwrap().key, 2);
        assert!(s.find(7 << 32, &2).is_none());
        assert_eq!(s.find(7 << 32, &3).unwrap().key, 3);
        let old = s.replace(e(3, 7 << 32));
        assert_eq!(old.key, 3);
        for k in 10..100u64 {
            let h = k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            assert_eq!(s.remove(h, &k).unwrap().key, k);
        }
        assert_eq!(s.len, 2);
    }

    /// Random inserts and removes with few distinct home slots (long,
    /// wrapping, interleaved probe runs) agree with a `HashMap`, and every
    /// present key stays reachable after each backward shift.
    #[test]
    fn probe_runs_survive_removal_like_a_map() {
        use std::collections::HashMap;
        let mut s = Stripe::<u64, ()>::new(8);
        let mut model: HashMap<u64, u64> = HashMap::new();
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for step in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = x % 64;
            // Only 8 home slots, some near the table's end: many keys share
            // a run, and runs wrap around to the start.
            let hash = (((k % 8) * 13 + 120) << 32) | k;
            if x & 1 == 0 && !model.contains_key(&k) {
                s.insert(e(k, hash));
                model.insert(k, hash);
            } else if let Some(h) = model.remove(&k) {
                assert_eq!(s.remove(h, &k).map(|e| e.key), Some(k), "step {step}");
            } else {
                assert!(s.remove(hash, &k).is_none(), "step {step}");
            }
            if step % 97 == 0 {
                for (&k, &h) in &model {
                    assert_eq!(s.find(h, &k).map(|e| e.key), Some(k), "step {step}");
                }
                assert_eq!(s.len, model.len());
            }
        }
    }
}
