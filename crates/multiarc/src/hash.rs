//! The hash table: key -> entry, split into independently locked stripes.
//!
//! Like OpenZFS's `buf_hash_table`, a stripe's lock is also the lock that
//! guards the state of the entries hashed to it (their 0 <-> 1 hold
//! transitions and ARC state changes), so a lookup and the hold it takes are
//! one critical section, and lookups of keys in different stripes share no
//! lock and no written cache line. The lock is a reader-writer lock: the lazy
//! hit path only reads the table (its hold and reference bit are atomics), so
//! hits on one stripe do not wait for each other, and a reader preempted
//! inside it (32 threads on 2 cores) does not stall the other readers. Each stripe is a small chained table (a
//! slab of chain nodes plus a bucket array), which lets us report the same
//! health figures ZFS does: elements, collisions (inserts into an occupied
//! bucket) and the longest chain.
//!
//! Bits of the key's hash: the low bits pick the stripe, the high 32 bits
//! pick the bucket inside it (the sublist uses a third range, see `cache.rs`).

use crate::entry::Entry;
use crate::lock::{LockId, RwLock, RwLockReadGuard, RwLockWriteGuard};
use crossbeam_utils::CachePadded;
use std::sync::Arc;

const NIL: u32 = u32::MAX;

struct ChainNode<K> {
    next: u32,
    entry: Option<Arc<Entry<K>>>,
}

/// One stripe: a chained hash table of entries plus the loads in flight.
pub(crate) struct Stripe<K> {
    buckets: Vec<u32>,
    nodes: Vec<ChainNode<K>>,
    free: u32,
    len: usize,
    collisions: u64,
    chain_max: u32,
    /// Read-through loads in progress for keys of this stripe (few at a time).
    pub(crate) loading: Vec<(K, Arc<crate::cache::Pending<K>>)>,
}

impl<K: Eq> Stripe<K> {
    fn new(buckets: usize) -> Self {
        Stripe {
            buckets: vec![NIL; buckets.max(4).next_power_of_two()],
            nodes: Vec::new(),
            free: NIL,
            len: 0,
            collisions: 0,
            chain_max: 0,
            loading: Vec::new(),
        }
    }

    fn bucket(&self, hash: u64) -> usize {
        ((hash >> 32) as usize) & (self.buckets.len() - 1)
    }

    /// Marks every load in flight for `key` as superseded (see `Pending`).
    pub(crate) fn supersede_loads(&self, key: &K) {
        for (k, p) in &self.loading {
            if k == key {
                p.mark_superseded();
            }
        }
    }

    /// The entry for `key`, if any.
    pub(crate) fn find(&self, hash: u64, key: &K) -> Option<&Arc<Entry<K>>> {
        let mut at = self.buckets[self.bucket(hash)];
        while at != NIL {
            let node = &self.nodes[at as usize];
            let e = node.entry.as_ref().expect("chained node holds an entry");
            if e.hash == hash && e.key == *key {
                return Some(e);
            }
            at = node.next;
        }
        None
    }

    /// Adds `entry`, whose key must not be present.
    pub(crate) fn insert(&mut self, entry: Arc<Entry<K>>) {
        if self.len >= self.buckets.len() {
            self.grow();
        }
        let b = self.bucket(entry.hash);
        let head = self.buckets[b];
        if head != NIL {
            self.collisions += 1;
            let mut chain = 1u32;
            let mut at = head;
            while at != NIL {
                chain += 1;
                at = self.nodes[at as usize].next;
            }
            self.chain_max = self.chain_max.max(chain);
        } else {
            self.chain_max = self.chain_max.max(1);
        }
        let node = ChainNode {
            next: head,
            entry: Some(entry),
        };
        let slot = if self.free != NIL {
            let s = self.free;
            self.free = self.nodes[s as usize].next;
            self.nodes[s as usize] = node;
            s
        } else {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        };
        self.buckets[b] = slot;
        self.len += 1;
    }

    /// Removes and returns the entry for `key`.
    pub(crate) fn remove(&mut self, hash: u64, key: &K) -> Option<Arc<Entry<K>>> {
        let b = self.bucket(hash);
        let mut prev = NIL;
        let mut at = self.buckets[b];
        while at != NIL {
            let node = &self.nodes[at as usize];
            let e = node.entry.as_ref().expect("chained node holds an entry");
            if e.hash == hash && e.key == *key {
                let next = node.next;
                if prev == NIL {
                    self.buckets[b] = next;
                } else {
                    self.nodes[prev as usize].next = next;
                }
                let entry = self.nodes[at as usize].entry.take();
                self.nodes[at as usize].next = self.free;
                self.free = at;
                self.len -= 1;
                return entry;
            }
            prev = at;
            at = node.next;
        }
        None
    }

    /// Replaces the entry for `entry.key` (which must be present) by `entry`,
    /// returning the old one.
    pub(crate) fn replace(&mut self, entry: Arc<Entry<K>>) -> Arc<Entry<K>> {
        let mut at = self.buckets[self.bucket(entry.hash)];
        while at != NIL {
            let node = &mut self.nodes[at as usize];
            let e = node.entry.as_ref().expect("chained node holds an entry");
            if e.hash == entry.hash && e.key == entry.key {
                return node.entry.replace(entry).unwrap();
            }
            at = node.next;
        }
        panic!("replace of a key that is not in the table");
    }

    fn grow(&mut self) {
        let n = self.buckets.len() * 2;
        self.buckets = vec![NIL; n];
        for slot in 0..self.nodes.len() {
            let Some(e) = &self.nodes[slot].entry else {
                continue;
            };
            let b = ((e.hash >> 32) as usize) & (n - 1);
            self.nodes[slot].next = self.buckets[b];
            self.buckets[b] = slot as u32;
        }
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
pub(crate) struct HashTable<K> {
    stripes: Box<[CachePadded<RwLock<Stripe<K>>>]>,
}

impl<K: Eq> HashTable<K> {
    /// `stripes` (a power of two) stripes sized for about `expected` entries.
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
    pub(crate) fn stripe(&self, hash: u64) -> &RwLock<Stripe<K>> {
        &self.stripes[(hash as usize) & (self.stripes.len() - 1)]
    }

    /// Locks the stripe of `hash` exclusively (to change the table or the
    /// state of its entries).
    #[inline]
    pub(crate) fn write(&self, hash: u64) -> RwLockWriteGuard<'_, Stripe<K>> {
        self.stripe(hash).write()
    }

    /// Locks the stripe of `hash` shared (lookups that change nothing but
    /// atomics: the lazy hit path).
    #[inline]
    pub(crate) fn read(&self, hash: u64) -> RwLockReadGuard<'_, Stripe<K>> {
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

    fn e(k: u64, hash: u64) -> Arc<Entry<u64>> {
        Arc::new(Entry::new(k, hash, Box::default(), State::Mru, 0))
    }

    #[test]
    fn insert_find_remove_grow_and_collisions() {
        let mut s = Stripe::new(4);
        // Same bucket (same high bits): chained.
        s.insert(e(1, 7 << 32));
        s.insert(e(2, 7 << 32));
        s.insert(e(3, 7 << 32));
        assert_eq!(s.collisions, 2);
        assert_eq!(s.chain_max, 3);
        for k in 10..100u64 {
            s.insert(e(k, k.wrapping_mul(0x9E37_79B9_7F4A_7C15)));
        }
        assert!(s.buckets.len() >= 64);
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
}
