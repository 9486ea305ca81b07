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
