//! The tier's own adaptive history: ARC's ghost lists and target `p`, over
//! what the ring's hand lets go.
//!
//! Why the tier needs one: a ring that drops whatever its hand reaches keeps
//! a FIFO of what memory evicted, which on traces that reward frequency is
//! about LRU (OpenZFS's L2ARC behaves so). Here the tier keeps two lists
//! of its records, T1 (written once) and T2 (read back, or written again
//! after the tier let it go recently), and remembers what the hand dropped
//! from each (B1, B2). Writing a key that B1 remembers says T1 should be
//! larger, one that B2 remembers that T2 should; `p` is T1's target, moved
//! as ARC moves it. The hand then lets go of the list that is over its
//! target and writes the other list's copies again (`mod.rs`).
//!
//! A ghost is a key's 64-bit fingerprint and its length, not the key: 16
//! bytes in its queue and 25 in the map (at its capacity). A fingerprint that collides
//! only nudges `p`; it never decides what is read.

use std::collections::{HashMap, VecDeque};

/// B1 or B2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ghost {
    /// Let go of while on T1.
    B1 = 0,
    /// Let go of while on T2.
    B2 = 1,
}

#[derive(Default)]
pub(super) struct History {
    /// T1's target, in bytes.
    p: u64,
    /// Per list, oldest first: (fingerprint, sequence).
    queues: [VecDeque<(u64, u32)>; 2],
    /// Bytes remembered per list.
    bytes: [u64; 2],
    /// Fingerprint -> (list, length, sequence): the live ghosts (a queue
    /// entry whose sequence is not here any more was taken or replaced, and
    /// is skipped when it reaches the front).
    live: HashMap<u64, (Ghost, u32, u32), foldhash::fast::RandomState>,
    seq: u32,
}

impl History {
    pub(super) fn p(&self) -> u64 {
        self.p
    }

    /// A key of `len` bytes is written to the tier: if a ghost remembers it,
    /// forgets the ghost, moves `p` toward that list (ARC's adaptation, in
    /// bytes, within `capacity`) and returns which list it was on.
    pub(super) fn take(&mut self, fp: u64, len: u64, capacity: u64) -> Option<Ghost> {
        let (list, glen, _) = self.live.remove(&fp)?;
        // ARC's step, from the lists' sizes with this ghost still on its
        // own (so that list is never empty here).
        let (b1, b2) = (self.bytes[0].max(1), self.bytes[1].max(1));
        self.bytes[list as usize] -= glen as u64;
        let len = len.max(1);
        match list {
            Ghost::B1 => self.p = (self.p + len * (b2 / b1).max(1)).min(capacity),
            Ghost::B2 => self.p = self.p.saturating_sub(len * (b1 / b2).max(1)),
        }
        Some(list)
    }

    /// The hand let go of a record of `len` bytes from `list`; then the
    /// history is trimmed to ARC's bounds for a tier of `capacity` bytes
    /// whose lists hold `t1` and `t2` bytes: T1 + B1 <= c, everything <= 2c.
    pub(super) fn remember(
        &mut self,
        fp: u64,
        len: u64,
        list: Ghost,
        t: (u64, u64),
        capacity: u64,
    ) {
        let i = list as usize;
        self.seq = self.seq.wrapping_add(1);
        let len32 = len.min(u32::MAX as u64) as u32;
        if let Some((old, olen, _)) = self.live.insert(fp, (list, len32, self.seq)) {
            // Remembered already (a fingerprint collision): its older entry
            // goes stale.
            self.bytes[old as usize] -= olen as u64;
        }
        self.queues[i].push_back((fp, self.seq));
        self.bytes[i] += len32 as u64;
        if self.queues[i].len() > 2 * self.live.len() + 64 {
            // Mostly stale entries (taken ghosts): compact, amortised O(1).
            let live = &self.live;
            self.queues[i].retain(|(f, s)| {
                live.get(f)
                    .is_some_and(|&(l, _, ls)| l as usize == i && ls == *s)
            });
        }
        while t.0 + self.bytes[0] > capacity && self.pop(0) {}
        while t.0 + t.1 + self.bytes[0] + self.bytes[1] > 2 * capacity
            && (self.pop(1) || self.pop(0))
        {}
    }

    /// Forgets list `i`'s oldest live ghost; false if it has none.
    fn pop(&mut self, i: usize) -> bool {
        while let Some((fp, seq)) = self.queues[i].pop_front() {
            if let Some(&(l, len, s)) = self.live.get(&fp) {
                if l as usize == i && s == seq {
                    self.live.remove(&fp);
                    self.bytes[i] -= len as u64;
                    return true;
                }
            }
        }
        false
    }

    /// Ghosts remembered (B1, B2), for tests.
    #[cfg(all(test, not(loom)))]
    pub(super) fn lens(&self) -> (usize, usize) {
        let mut n = (0, 0);
        for (l, _, _) in self.live.values() {
            match l {
                Ghost::B1 => n.0 += 1,
                Ghost::B2 => n.1 += 1,
            }
        }
        n
    }

    /// Memory held: the queues' and the map's capacity.
    pub(super) fn memory(&self) -> u64 {
        let q: usize = self.queues.iter().map(|q| q.capacity() * 16).sum();
        let m = self.live.capacity() * (std::mem::size_of::<(u64, (Ghost, u32, u32))>() + 1);
        (q + m) as u64
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const U: u64 = 4096;

    #[test]
    fn a_ghost_hit_moves_p_as_arc_does_and_is_forgotten() {
        let mut h = History::default();
        let cap = 100 * U;
        // Nothing remembered: no hit, p stays.
        assert_eq!(h.take(1, U, cap), None);
        // B1: 1 ghost, B2: 3 ghosts (the tier is empty: no trimming).
        h.remember(1, U, Ghost::B1, (0, 0), cap);
        for fp in 2..5 {
            h.remember(fp, U, Ghost::B2, (0, 0), cap);
        }
        assert_eq!(h.lens(), (1, 3));
        // A B1 hit: p grows by len x |B2| / |B1| (sizes before the hit).
        assert_eq!(h.take(1, U, cap), Some(Ghost::B1));
        assert_eq!(h.p(), 3 * U);
        assert_eq!(h.take(1, U, cap), None, "forgotten");
        // A B2 hit with B1 empty: p shrinks by len x max(|B1| / |B2|, 1).
        assert_eq!(h.take(2, U, cap), Some(Ghost::B2));
        assert_eq!(h.p(), 2 * U);
        // p stays within [0, capacity].
        h.remember(9, U, Ghost::B1, (0, 0), cap);
        for fp in 10..20 {
            h.remember(fp, U, Ghost::B2, (0, 0), cap);
        }
        assert_eq!(h.take(9, U, 5 * U), Some(Ghost::B1));
        assert_eq!(h.p(), 5 * U, "clamped to the capacity");
        for fp in (3..5).chain(10..20) {
            assert_eq!(h.take(fp, U, cap), Some(Ghost::B2));
        }
        assert_eq!(h.p(), 0);
        assert_eq!(h.lens(), (0, 0));
    }

    #[test]
    fn the_history_keeps_arcs_bounds() {
        let mut h = History::default();
        let cap = 10 * U;
        // T1 holds 6 units: B1 may hold 4.
        for fp in 0..8 {
            h.remember(fp, U, Ghost::B1, (6 * U, 0), cap);
        }
        assert_eq!(h.lens(), (4, 0));
        // The oldest went first.
        assert_eq!(h.take(3, U, cap), None);
        assert_eq!(h.take(4, U, cap), Some(Ghost::B1));
        // Everything <= 2c: with T1 2, T2 8, B1 3, only 7 fit on B2.
        for fp in 100..120 {
            h.remember(fp, U, Ghost::B2, (2 * U, 8 * U), cap);
        }
        assert_eq!(h.lens(), (3, 7));
        assert_eq!(h.take(112, U, cap), None);
        assert_eq!(h.take(113, U, cap), Some(Ghost::B2));
    }

    #[test]
    fn taken_ghosts_do_not_pile_up_in_the_queues() {
        let mut h = History::default();
        let cap = 1 << 40;
        for fp in 0..100_000u64 {
            h.remember(fp, U, Ghost::B1, (0, 0), cap);
            assert_eq!(h.take(fp, U, cap), Some(Ghost::B1));
        }
        assert_eq!(h.lens(), (0, 0));
        assert!(h.queues[0].len() <= 64 + 1, "{}", h.queues[0].len());
        assert!(h.memory() < 64 << 10, "{}", h.memory());
    }
}
