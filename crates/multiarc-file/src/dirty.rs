//! A file's dirty blocks: written, not yet in the backing store.
//!
//! They live here, outside the cache, so eviction cannot touch them: the
//! cache only ever holds clean copies. Reads look here first. The table is
//! split into shards by block number, each with its own lock and a count
//! that readers check without locking, so a read of a file with no dirty
//! blocks near it takes no lock at all, and readers and writers of different
//! blocks rarely share a lock.

use multiarc_lock::CachePadded;
use multiarc_lock::{Mutex, MutexGuard};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// One dirty block: its bytes (always a whole block; zeros past the end of
/// the file) and the generation of its last write.
#[derive(Clone, Debug)]
pub(crate) struct DirtyBlock {
    /// Shared with readers copying out and the flusher writing back; a
    /// writer copies it first if either still holds it (`Arc::make_mut`).
    pub(crate) data: Arc<Vec<u8>>,
    pub(crate) generation: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Shard {
    pub(crate) blocks: HashMap<u64, DirtyBlock>,
    /// Incremented whenever a block leaves this shard (written back or
    /// truncated away). A writer that read a block's clean bytes outside the
    /// lock checks it did not change meanwhile (see `CachedFile::write_block`).
    pub(crate) cleanings: u64,
}

struct ShardSlot {
    shard: Mutex<Shard>,
    /// `shard.blocks.len()`, readable without the lock.
    len: AtomicUsize,
}

pub(crate) struct DirtyTable {
    shards: Box<[CachePadded<ShardSlot>]>,
}

/// A locked shard; keeps the lock-free count in step on drop.
pub(crate) struct ShardGuard<'a> {
    guard: MutexGuard<'a, Shard>,
    len: &'a AtomicUsize,
}

impl std::ops::Deref for ShardGuard<'_> {
    type Target = Shard;
    fn deref(&self) -> &Shard {
        &self.guard
    }
}

impl std::ops::DerefMut for ShardGuard<'_> {
    fn deref_mut(&mut self) -> &mut Shard {
        &mut self.guard
    }
}

impl Drop for ShardGuard<'_> {
    fn drop(&mut self) {
        self.len.store(self.guard.blocks.len(), Ordering::Release);
    }
}

impl DirtyTable {
    pub(crate) fn new(shards: usize) -> DirtyTable {
        DirtyTable {
            shards: (0..shards.max(1).next_power_of_two())
                .map(|_| {
                    CachePadded::new(ShardSlot {
                        shard: Mutex::new(Shard::default()),
                        len: AtomicUsize::new(0),
                    })
                })
                .collect(),
        }
    }

    fn slot(&self, block: u64) -> &ShardSlot {
        // Consecutive blocks in different shards: a sequential writer and a
        // reader a few blocks behind it do not meet.
        &self.shards[(block as usize) & (self.shards.len() - 1)]
    }

    pub(crate) fn lock(&self, block: u64) -> ShardGuard<'_> {
        let slot = self.slot(block);
        ShardGuard {
            guard: slot.shard.lock(),
            len: &slot.len,
        }
    }

    /// Whether `block`'s shard may hold dirty blocks. `false` is reliable
    /// for writes that happened before (by the file's range lock) this call.
    pub(crate) fn maybe_dirty(&self, block: u64) -> bool {
        self.slot(block).len.load(Ordering::Acquire) != 0
    }

    /// Every shard, locked one at a time.
    pub(crate) fn each_shard(&self, mut f: impl FnMut(&mut ShardGuard<'_>)) {
        for slot in self.shards.iter() {
            let mut g = ShardGuard {
                guard: slot.shard.lock(),
                len: &slot.len,
            };
            f(&mut g);
        }
    }

    pub(crate) fn blocks(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.len.load(Ordering::Relaxed))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirty_block(byte: u8) -> DirtyBlock {
        DirtyBlock {
            data: Arc::new(vec![byte; 16]),
            generation: u64::from(byte),
        }
    }

    fn dirty_flags(t: &DirtyTable, blocks: std::ops::Range<u64>) -> Vec<bool> {
        blocks.map(|b| t.maybe_dirty(b)).collect()
    }

    #[test]
    fn shard_count_is_a_power_of_two_and_at_least_one() {
        for (asked, got) in [(0, 1), (1, 1), (5, 8), (64, 64), (65, 128)] {
            assert_eq!(DirtyTable::new(asked).shards.len(), got, "asked {asked}");
        }
    }

    /// Consecutive blocks go to different shards (a sequential writer and a
    /// reader just behind it do not share a lock); blocks a shard count
    /// apart share one.
    #[test]
    fn consecutive_blocks_fall_in_different_shards() {
        let t = DirtyTable::new(8);
        let slot = |b: u64| t.slot(b) as *const ShardSlot;
        let first: Vec<_> = (0..8).map(slot).collect();
        for (i, a) in first.iter().enumerate() {
            assert!(
                !first[i + 1..].contains(a),
                "blocks {i} and a later one share a shard"
            );
        }
        for b in 0..8 {
            assert_eq!(slot(b), slot(b + 8));
            assert_eq!(slot(b), slot(b + 8 * 1000));
        }
    }

    /// The lock-free count follows every change made under a shard's guard,
    /// once the guard is gone: `maybe_dirty` is true exactly for the shards
    /// holding dirty blocks, and `blocks` is the total.
    #[test]
    fn counts_follow_the_guard_and_maybe_dirty_names_the_shard() {
        let t = DirtyTable::new(4);
        assert_eq!(t.blocks(), 0);
        assert_eq!(dirty_flags(&t, 0..8), [false; 8]);
        t.lock(1).blocks.insert(1, dirty_block(1));
        assert_eq!(t.blocks(), 1);
        // Block 5 shares block 1's shard: it may be dirty, as far as the
        // count can tell.
        assert_eq!(
            dirty_flags(&t, 0..8),
            [false, true, false, false, false, true, false, false]
        );
        t.lock(5).blocks.insert(5, dirty_block(5));
        t.lock(2).blocks.insert(2, dirty_block(2));
        assert_eq!(t.blocks(), 3);
        assert!(t.lock(1).blocks.remove(&1).is_some());
        assert_eq!(t.blocks(), 2);
        assert!(t.maybe_dirty(1), "block 5 is still in the shard");
        assert!(t.lock(5).blocks.remove(&5).is_some());
        assert_eq!(
            dirty_flags(&t, 0..8),
            [false, false, true, false, false, false, true, false]
        );
        // A guard taken and dropped without a change keeps the count.
        drop(t.lock(2));
        assert_eq!(t.blocks(), 1);
    }

    /// `each_shard` visits every shard once, and what it removes leaves the
    /// counts (the truncation and discard paths use it).
    #[test]
    fn each_shard_visits_every_shard_once_and_keeps_counts() {
        let t = DirtyTable::new(4);
        for b in 0..10 {
            t.lock(b).blocks.insert(b, dirty_block(b as u8));
        }
        let (mut visits, mut seen) = (0, 0);
        t.each_shard(|s| {
            visits += 1;
            seen += s.blocks.len();
        });
        assert_eq!((visits, seen), (4, 10));
        t.each_shard(|s| s.blocks.retain(|&b, _| b % 2 == 0));
        assert_eq!(t.blocks(), 5);
        assert_eq!(
            dirty_flags(&t, 0..4),
            [true, false, true, false],
            "odd blocks' shards hold only odd blocks here"
        );
    }

    /// `cleanings` belongs to a shard: blocks of other shards do not see it.
    #[test]
    fn cleanings_count_per_shard() {
        let t = DirtyTable::new(4);
        t.lock(0).cleanings += 1;
        assert_eq!(t.lock(4).cleanings, 1, "same shard as block 0");
        assert_eq!(t.lock(1).cleanings, 0);
        let mut total = 0;
        t.each_shard(|s| total += s.cleanings);
        assert_eq!(total, 1);
    }

    /// Writers of neighbouring blocks insert and remove concurrently; when
    /// they are done the counts are exact.
    #[test]
    fn concurrent_writers_leave_exact_counts() {
        let t = DirtyTable::new(8);
        std::thread::scope(|s| {
            for w in 0..4u64 {
                let t = &t;
                s.spawn(move || {
                    // Writer `w` owns the blocks `w + 4 i`, i < 50, spread
                    // over every shard: it dirties each three times over,
                    // then cleans the upper half.
                    for round in 0..200u64 {
                        let i = round % 50;
                        let b = w + 4 * i;
                        let mut g = t.lock(b);
                        if round < 150 {
                            g.blocks.insert(b, dirty_block(round as u8));
                        } else if i >= 25 {
                            assert!(g.blocks.remove(&b).is_some());
                        }
                    }
                });
            }
        });
        assert_eq!(t.blocks(), 4 * 25);
        let mut held = 0;
        t.each_shard(|s| held += s.blocks.len());
        assert_eq!(held, 4 * 25);
    }
}
