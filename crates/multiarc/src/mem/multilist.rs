//! The multilist: one ARC state's LRU list split into sublists.
//!
//! Why: with one list per state, every cache hit takes the state's one list
//! lock twice (remove the buffer when it is first held, put it back at the
//! head when released). OpenZFS measured that lock ("arcs_mtx") capping 32
//! threads of cached 8K random reads at 3 GB/s; splitting each state's list
//! into sublists with their own locks took it to 9.9 GB/s (OpenZFS issue 5497).
//!
//! So a state's list is `n` sublists, each behind its own lock on its own
//! cache line. A buffer always lives in the sublist chosen by its key's hash,
//! which spreads inserts evenly and lets any thread find the right lock
//! without a search. The price is that "the LRU end" is no longer one place:
//! eviction takes a batch from the tail of one sublist, then moves to the
//! next, starting where the caller says (the cache: at the fullest), so the victims are the oldest buffers
//! of each sublist rather than the oldest overall. With `n = 1` the multilist
//! is exactly the single LRU list of the design before 5497.
//!
//! Each sublist is a doubly linked list threaded through a slab (`Vec` of
//! nodes linked by index), so linking and unlinking are O(1) with no
//! allocation in the steady state and no `unsafe`. An entry records its slot
//! in the slab while it is linked. Eviction walks a sublist from the tail with
//! a *marker* node (a node without an entry) that it moves past each buffer it
//! examines; it can drop the lock between batches and resume at the marker,
//! so no lock is held for a whole pass and buffers inserted at the head
//! meanwhile are not disturbed.
//!
//! A sublist can also be cut into *segments*, one per recent generation (a
//! number its user counts up): a marker opens a generation's segment at the
//! head, and an entry can be linked at the most recent end of an older
//! generation's segment ([`SublistList::link_in_generation`]), so the list
//! stays in order of generation (and of linking within one), as a queue per
//! generation would, with no search. Only so many segments are kept: older
//! generations share the oldest one. The generations policy keeps its MFU
//! this way (`arc/hit_mode.rs`); walks step over segment markers as over
//! their own.

use super::entry::{EntryPtr, Header, NO_SLOT};
use super::sync;
use crate::lock::CachePadded;
use crate::lock::{LockId, LockstatExt, Mutex, MutexGuard};
use std::collections::VecDeque;

const NIL: u32 = u32::MAX;

struct Node<K> {
    prev: u32,
    next: u32,
    /// `None` for markers and for free slots.
    entry: Option<EntryPtr<K>>,
}

/// One sublist: a slab-backed doubly linked list, head = most recently used.
pub(crate) struct SublistList<K> {
    nodes: Vec<Node<K>>,
    head: u32,
    tail: u32,
    /// Free slots, linked through `next`.
    free: u32,
    /// Linked entries (markers excluded) and their bytes.
    len: usize,
    bytes: u64,
    /// Segment markers, newest first: (generation, slot). A generation's
    /// segment runs from its marker headward to the next newer one.
    segments: VecDeque<(u64, u32)>,
}

impl<K> SublistList<K> {
    fn new() -> Self {
        SublistList {
            nodes: Vec::new(),
            head: NIL,
            tail: NIL,
            free: NIL,
            len: 0,
            bytes: 0,
            segments: VecDeque::new(),
        }
    }

    /// Number of linked entries.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes of linked entries (the evictable bytes of this sublist).
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    fn alloc(&mut self, entry: Option<EntryPtr<K>>) -> u32 {
        let node = Node {
            prev: NIL,
            next: NIL,
            entry,
        };
        if self.free != NIL {
            let slot = self.free;
            self.free = self.nodes[slot as usize].next;
            self.nodes[slot as usize] = node;
            slot
        } else {
            assert!(self.nodes.len() < NIL as usize - 1, "sublist slab full");
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        }
    }

    fn release(&mut self, slot: u32) -> Option<EntryPtr<K>> {
        let node = &mut self.nodes[slot as usize];
        let entry = node.entry.take();
        node.prev = NIL;
        node.next = self.free;
        self.free = slot;
        entry
    }

    /// Links `slot` (already allocated, unlinked) before `before`, or at the
    /// tail when `before` is NIL.
    fn link_before(&mut self, slot: u32, before: u32) {
        let prev = if before == NIL {
            self.tail
        } else {
            self.nodes[before as usize].prev
        };
        self.nodes[slot as usize].prev = prev;
        self.nodes[slot as usize].next = before;
        if prev == NIL {
            self.head = slot;
        } else {
            self.nodes[prev as usize].next = slot;
        }
        if before == NIL {
            self.tail = slot;
        } else {
            self.nodes[before as usize].prev = slot;
        }
    }

    fn unlink(&mut self, slot: u32) {
        let Node { prev, next, .. } = self.nodes[slot as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.nodes[next as usize].prev = prev;
        }
    }

    /// Links `entry` at the head (most recently used end).
    ///
    /// # Safety
    /// `entry` is alive, and stays so while it is linked: it is unlinked,
    /// under this sublist's lock, before it is freed.
    pub(crate) unsafe fn push_head(&mut self, entry: EntryPtr<K>) {
        let head = self.head;
        // SAFETY: this function's contract.
        unsafe { self.link_entry_before(entry, head) };
    }

    /// Links `entry` headward of node `before` (NIL: at the tail).
    ///
    /// # Safety
    /// As [`SublistList::push_head`].
    unsafe fn link_entry_before(&mut self, entry: EntryPtr<K>, before: u32) {
        // SAFETY: alive (this function's contract).
        let e = unsafe { entry.header() };
        debug_assert_eq!(e.slot(), NO_SLOT, "entry already linked");
        self.len += 1;
        self.bytes += e.bytes;
        let slot = self.alloc(Some(entry));
        self.link_before(slot, before);
        e.set_slot(slot);
    }

    /// Links `entry` at the most recent end of generation `generation`'s
    /// segment, `current` being the newest generation and `keep` the number
    /// of generations (at least 1) that keep segments of their own: a
    /// segment marker is dropped once its generation is `keep - 1` or more
    /// older than `current` (with `keep` k, the generations older than the
    /// newest k share the oldest segment; the markers that remain are those
    /// of the newest k - 1). A kept generation's marker is placed with its
    /// first entry, so the list is in order of generation, then of linking,
    /// as `multiarc_sim::generations`' T2 is. The entry then notes
    /// `generation` as the one it is queued in
    /// (`Header::queue_in_generation`).
    ///
    /// # Safety
    /// As [`SublistList::push_head`].
    pub(crate) unsafe fn link_in_generation(
        &mut self,
        entry: EntryPtr<K>,
        generation: u64,
        current: u64,
        keep: u64,
    ) {
        let oldest_kept = (current + 2).saturating_sub(keep.max(1));
        while let Some(&(g, marker)) = self.segments.back() {
            if g >= oldest_kept {
                break;
            }
            self.segments.pop_back();
            self.remove_marker(marker);
        }
        // Markers are newest first: `at` is where `generation`'s marker is
        // or would go, `newer` the marker of the next newer generation.
        let at = self.segments.partition_point(|&(g, _)| g > generation);
        let newer_end = match at {
            0 => self.head,
            _ => self.nodes[self.segments[at - 1].1 as usize].next,
        };
        let before = match self.segments.get(at) {
            // The segment is there: at its end, just tailward of the newer
            // one's marker (or at the head).
            Some(&(g, _)) if g == generation => newer_end,
            // Kept but not there yet: its marker goes just tailward of the
            // newer one's (every entry between them is older: a generation
            // in the kept range has a marker once it has an entry), and the
            // entry headward of it.
            _ if generation >= oldest_kept => {
                let marker = self.alloc(None);
                self.link_before(marker, newer_end);
                self.segments.insert(at, (generation, marker));
                marker
            }
            // Older than every kept segment: at the end of the oldest one,
            // which they share.
            _ => newer_end,
        };
        // SAFETY: this function's contract (alive while linked).
        unsafe {
            self.link_entry_before(entry, before);
            entry.header().queue_in_generation(generation as u8);
        }
    }

    /// The segment markers' generations, newest first (for tests).
    #[cfg(test)]
    pub(crate) fn segment_generations(&self) -> Vec<u64> {
        self.segments.iter().map(|&(g, _)| g).collect()
    }

    /// Unlinks `entry`, which must be linked in this sublist.
    pub(crate) fn remove(&mut self, entry: &Header<K>) -> EntryPtr<K> {
        let slot = entry.slot();
        assert_ne!(slot, NO_SLOT, "entry not linked");
        self.remove_slot(slot)
    }

    fn remove_slot(&mut self, slot: u32) -> EntryPtr<K> {
        self.unlink(slot);
        let entry = self.release(slot).expect("slot holds an entry");
        // SAFETY: it was linked until now, so alive (`push_head`), and we
        // hold this sublist's lock (`&mut self`).
        let e = unsafe { entry.header() };
        e.set_slot(NO_SLOT);
        self.len -= 1;
        self.bytes -= e.bytes;
        entry
    }

    /// Adds a marker at the tail and returns its slot.
    pub(crate) fn insert_marker_at_tail(&mut self) -> u32 {
        let slot = self.alloc(None);
        self.link_before(slot, NIL);
        slot
    }

    /// Removes a marker.
    pub(crate) fn remove_marker(&mut self, marker: u32) {
        debug_assert!(self.nodes[marker as usize].entry.is_none());
        self.unlink(marker);
        self.release(marker);
    }

    /// The node just headward of `marker` that holds an entry, moving the
    /// marker headward past it (and past any other markers on the way), or
    /// `None` when the marker has reached the head.
    pub(crate) fn step_marker(&mut self, marker: u32) -> Option<(u32, EntryPtr<K>)> {
        loop {
            let cand = self.nodes[marker as usize].prev;
            if cand == NIL {
                return None;
            }
            self.unlink(marker);
            self.link_before(marker, cand);
            if self.nodes[cand as usize].entry.is_some() {
                return Some((cand, self.nodes[cand as usize].entry.unwrap()));
            }
        }
    }

    /// Starts fetching what the next walks from `marker` will touch, and
    /// returns the entry the next one will meet first (for its caller to
    /// fetch that entry's table slot; it is linked here, so alive while the
    /// caller holds this sublist's lock). A pipeline over the walks of this
    /// sublist, which take its tail entries one after another:
    /// - the next entry: its node is in cache (stepping to the marker's
    ///   place touched it), and its header was fetched by the walk before
    ///   (as the second entry), so its key is read at once;
    /// - the second entry: its node was fetched by the walk before (as the
    ///   third node); its header is fetched now;
    /// - the third entry's node (which the walk after next relinks) is
    ///   fetched now.
    ///
    /// Where a walk went otherwise (a promotion, a marker in the way), a
    /// read here waits for its line, as the next walk would have. Nothing
    /// changes.
    pub(crate) fn prefetch_next(&self, marker: u32) -> Option<EntryPtr<K>> {
        let next = self.nodes[marker as usize].prev;
        if next == NIL {
            return None;
        }
        let node = &self.nodes[next as usize];
        if node.prev != NIL {
            let second = &self.nodes[node.prev as usize];
            if let Some(e) = second.entry {
                e.prefetch();
            }
            if second.prev != NIL {
                // An address only: `prev` is in the slab, and a prefetch
                // reads nothing.
                sync::prefetch(self.nodes.as_ptr().wrapping_add(second.prev as usize));
            }
        }
        node.entry
    }

    /// Unlinks the entry in `slot` (as returned by `step_marker`).
    pub(crate) fn take(&mut self, slot: u32) -> EntryPtr<K> {
        self.remove_slot(slot)
    }

    /// Entries from head to tail (for tests and checks).
    #[cfg(test)]
    pub(crate) fn keys_from_head(&self) -> Vec<K>
    where
        K: Clone,
    {
        let mut out = Vec::new();
        let mut at = self.head;
        while at != NIL {
            if let Some(e) = &self.nodes[at as usize].entry {
                // SAFETY: linked, so alive (`push_head`).
                out.push(unsafe { e.header() }.key.clone());
            }
            at = self.nodes[at as usize].next;
        }
        out
    }
}

/// One state's list: `n` independently locked sublists.
pub(crate) struct Multilist<K> {
    sublists: Box<[CachePadded<Mutex<SublistList<K>>>]>,
    class: &'static str,
}

impl<K> Multilist<K> {
    pub(crate) fn new(n: usize, class: &'static str) -> Self {
        Multilist {
            sublists: (0..n)
                .map(|_| CachePadded::new(Mutex::new(SublistList::new())))
                .collect(),
            class,
        }
    }

    /// Number of sublists.
    pub(crate) fn len(&self) -> usize {
        self.sublists.len()
    }

    /// The sublist an entry of this key hash lives in: the hash's bits
    /// 16..48 scaled to the sublist count (the hash table uses the low
    /// bits for its stripe and the top 32 for the home slot).
    #[inline]
    pub(crate) fn index_of(&self, hash: u64) -> usize {
        Self::index_in(self.sublists.len(), hash)
    }

    /// [`Multilist::index_of`] for a multilist of `n` sublists.
    #[inline]
    pub(crate) fn index_in(n: usize, hash: u64) -> usize {
        ((((hash >> 16) & 0xffff_ffff) * n as u64) >> 32) as usize
    }

    /// Locks sublist `i` (for a walk; inserts and removals find their
    /// sublist themselves).
    pub(crate) fn lock_sublist(&self, i: usize) -> MutexGuard<'_, SublistList<K>> {
        self.sublists[i].lock()
    }

    /// Links `entry`, whose key hashes to `hash`, at the head of its
    /// sublist.
    ///
    /// # Safety
    /// As [`SublistList::push_head`].
    pub(crate) unsafe fn push_head(&self, entry: EntryPtr<K>, hash: u64) {
        // SAFETY: this function's contract.
        unsafe { self.lock_sublist(self.index_of(hash)).push_head(entry) };
    }

    /// Links `entry`, whose key hashes to `hash`, in its sublist at the end
    /// of generation `generation`'s segment
    /// ([`SublistList::link_in_generation`]).
    ///
    /// # Safety
    /// As [`SublistList::push_head`].
    pub(crate) unsafe fn link_in_generation(
        &self,
        entry: EntryPtr<K>,
        hash: u64,
        generation: u64,
        current: u64,
        keep: u64,
    ) {
        // SAFETY: this function's contract.
        unsafe {
            self.lock_sublist(self.index_of(hash))
                .link_in_generation(entry, generation, current, keep)
        };
    }

    /// Unlinks `entry`, whose key hashes to `hash`, which is linked in its
    /// sublist.
    pub(crate) fn remove(&self, entry: &Header<K>, hash: u64) {
        self.lock_sublist(self.index_of(hash)).remove(entry);
    }

    /// Total linked (evictable) bytes and entries, summed over sublists
    /// (takes each lock in turn: for statistics, not hot paths).
    pub(crate) fn totals(&self) -> (u64, usize) {
        self.sublists.iter().fold((0, 0), |(b, n), s| {
            let s = s.lock();
            (b + s.bytes(), n + s.len())
        })
    }

    /// Calls `f` on every linked entry, one sublist lock at a time (for
    /// statistics, not hot paths).
    pub(crate) fn for_each(&self, mut f: impl FnMut(&Header<K>)) {
        for s in self.sublists.iter() {
            let s = s.lock();
            for e in s.nodes.iter().filter_map(|n| n.entry.as_ref()) {
                // SAFETY: linked, so alive while we hold the sublist's lock
                // (`push_head`).
                f(unsafe { e.header() });
            }
        }
    }

    /// Starts or stops lockstat tracing of every sublist lock.
    pub(crate) fn set_lockstat(&self, on: bool) {
        for (i, s) in self.sublists.iter().enumerate() {
            s.set_lockstat(on.then_some(LockId {
                class: self.class,
                index: i as u32,
            }));
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::mem::State;

    /// Test entries are leaked (a few hundred bytes per test).
    fn entry(k: u32) -> EntryPtr<u32> {
        EntryPtr::new(k, &[0; 10], State::Mru, 0)
    }

    /// A test entry's header.
    fn header(e: &EntryPtr<u32>) -> &Header<u32> {
        // SAFETY: test entries are never freed.
        unsafe { e.header() }
    }

    fn push_head(l: &mut SublistList<u32>, e: EntryPtr<u32>) {
        // SAFETY: test entries are never freed.
        unsafe { l.push_head(e) }
    }

    /// A walk's prefetch names the entry the next walk meets first, and
    /// nothing at the head; the list is unchanged.
    #[test]
    fn prefetch_next_names_the_next_tail_entry() {
        let mut l = SublistList::new();
        for k in [7, 8, 9] {
            push_head(&mut l, entry(k));
        }
        let marker = l.insert_marker_at_tail();
        let other = l.insert_marker_at_tail();
        assert_eq!(l.prefetch_next(marker).map(|e| header(&e).key), Some(7));
        let (slot, e) = l.step_marker(other).unwrap();
        assert_eq!(header(&e).key, 7);
        l.take(slot);
        assert_eq!(l.prefetch_next(other).map(|e| header(&e).key), Some(8));
        while l.step_marker(other).is_some() {}
        assert!(l.prefetch_next(other).is_none());
        assert_eq!(l.keys_from_head(), vec![9, 8]);
    }

    #[test]
    fn push_remove_and_order() {
        let mut l = SublistList::new();
        let es: Vec<_> = (0..5).map(entry).collect();
        for e in &es {
            push_head(&mut l, *e);
        }
        assert_eq!(l.keys_from_head(), vec![4, 3, 2, 1, 0]);
        assert_eq!((l.len(), l.bytes()), (5, 50));
        l.remove(header(&es[2]));
        assert_eq!(header(&es[2]).slot(), NO_SLOT);
        assert_eq!(l.keys_from_head(), vec![4, 3, 1, 0]);
        l.remove(header(&es[4]));
        l.remove(header(&es[0]));
        assert_eq!(l.keys_from_head(), vec![3, 1]);
        // Freed slots are reused.
        push_head(&mut l, es[0]);
        assert_eq!(l.nodes.len(), 5);
        assert_eq!(l.keys_from_head(), vec![0, 3, 1]);
    }

    #[test]
    fn marker_walks_from_tail_and_survives_head_inserts() {
        let mut l = SublistList::new();
        let es: Vec<_> = (0..4).map(entry).collect();
        for e in &es {
            push_head(&mut l, *e);
        }
        let m = l.insert_marker_at_tail();
        let (slot, e) = l.step_marker(m).unwrap();
        assert_eq!(header(&e).key, 0);
        l.take(slot);
        // A second marker (another pass) is stepped over, not returned.
        let m2 = l.insert_marker_at_tail();
        push_head(&mut l, entry(9));
        let (_, e) = l.step_marker(m).unwrap();
        assert_eq!(header(&e).key, 1); // skipped, stays linked
        let (slot, e) = l.step_marker(m).unwrap();
        assert_eq!(header(&e).key, 2);
        l.take(slot);
        let (_, e) = l.step_marker(m).unwrap();
        assert_eq!(header(&e).key, 3);
        let (_, e) = l.step_marker(m).unwrap();
        assert_eq!(header(&e).key, 9);
        assert!(l.step_marker(m).is_none());
        l.remove_marker(m);
        l.remove_marker(m2);
        assert_eq!(l.keys_from_head(), vec![9, 3, 1]);
        assert_eq!(l.len(), 3);
    }

    fn link(l: &mut SublistList<u32>, k: u32, generation: u64, current: u64, keep: u64) {
        // SAFETY: test entries are never freed.
        unsafe { l.link_in_generation(entry(k), generation, current, keep) }
    }

    /// Entries linked in a generation's segment come after every entry of
    /// older generations and before every one of newer generations, in
    /// the order they were linked; segments beyond the kept ones merge
    /// into the oldest, and walks step over their markers.
    #[test]
    fn segments_keep_generation_order() {
        let mut l = SublistList::new();
        // Generation 0: 1, 2; generation 1: 3; generation 2: 4.
        link(&mut l, 1, 0, 0, 4);
        link(&mut l, 2, 0, 0, 4);
        link(&mut l, 3, 1, 1, 4);
        link(&mut l, 4, 2, 2, 4);
        assert_eq!(l.keys_from_head(), vec![4, 3, 2, 1]);
        assert_eq!(l.segment_generations(), vec![2, 1, 0]);
        // Queued again in generation 0 and 1: at their segments' ends.
        link(&mut l, 5, 0, 2, 4);
        link(&mut l, 6, 1, 2, 4);
        assert_eq!(l.keys_from_head(), vec![4, 6, 3, 5, 2, 1]);
        let queued: Vec<u8> = [4, 6, 5]
            .iter()
            .map(|&k| {
                let e = l
                    .nodes
                    .iter()
                    .find_map(|n| n.entry.filter(|e| header(e).key == k));
                header(&e.unwrap()).queued_generation()
            })
            .collect();
        assert_eq!(queued, vec![2, 1, 0]);
        // Generation 4 with 4 kept: generations 1-4 keep segments of their
        // own, older ones share generation 1's, so the markers of 2 and 4
        // remain (of the newest k - 1; 3 has no entry yet). An entry of
        // generation 1 goes to the back of everything older than 2; the
        // first of generation 3 opens its segment between 2's and 4's.
        link(&mut l, 7, 4, 4, 4);
        assert_eq!(l.segment_generations(), vec![4, 2]);
        link(&mut l, 8, 1, 4, 4);
        link(&mut l, 9, 3, 4, 4);
        assert_eq!(l.keys_from_head(), vec![7, 9, 4, 8, 6, 3, 5, 2, 1]);
        assert_eq!(l.segment_generations(), vec![4, 3, 2]);
        // Generation 6: 2's and 3's markers go, and an entry of generation
        // 0 joins the back of the merged oldest segment.
        link(&mut l, 10, 0, 6, 4);
        assert_eq!(l.segment_generations(), vec![4]);
        assert_eq!(l.keys_from_head(), vec![7, 10, 9, 4, 8, 6, 3, 5, 2, 1]);
        // A walk meets the entries from the tail, markers stepped over.
        let m = l.insert_marker_at_tail();
        let mut walked = Vec::new();
        while let Some((_, e)) = l.step_marker(m) {
            walked.push(header(&e).key);
        }
        assert_eq!(walked, vec![1, 2, 5, 3, 6, 8, 4, 9, 10, 7]);
        assert_eq!((l.len(), l.bytes()), (10, 100));

        // A generation between two kept ones gets its marker with its first
        // entry, so a later entry of it still lands before newer ones.
        let mut l = SublistList::new();
        link(&mut l, 1, 0, 2, 8);
        link(&mut l, 2, 2, 2, 8);
        link(&mut l, 3, 1, 2, 8);
        link(&mut l, 4, 1, 2, 8);
        link(&mut l, 5, 0, 2, 8);
        assert_eq!(l.keys_from_head(), vec![2, 4, 3, 5, 1]);
        assert_eq!(l.segment_generations(), vec![2, 1, 0]);
    }
}
