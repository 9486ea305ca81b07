//! Reads of an object held open: for a reader that keeps one version of
//! an object open across many small reads and serves them from memory
//! when it can, without a request; a filesystem's open file is one (the
//! bucket mount, `multiarc-bucket`). Everything else reads through the
//! `ObjectStore` methods of [`CachedStore`].
//!
//! An [`OpenObject`] names the version the reader opened (as the store
//! described it) and remembers which blocks this reader used lately, so
//! that the several reads that make up one use of a block (the kernel's
//! 128 KiB reads of a 256 KiB block, at once or out of order) count one
//! access in the cache: otherwise a file read once in pieces would look
//! like reuse, and fill the cache's frequency list. A [`LastBlock`] keeps
//! the rest of the block a reader's last read ended in, so that reads in
//! order look each block up once.

use crate::key::{ObjectBlockKey, ObjectIdentity};
use crate::read;
use crate::stats::Counters;
use crate::store::CachedStore;
use crate::used_blocks::UsedBlocks;
use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, Result};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use crate::used_blocks::SAME_USE_WINDOW;

/// One version of one object, as the cache names its blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CachedVersion {
    identity: ObjectIdentity,
    size: u64,
}

/// The rest of the block a reader's last read ended in (from where it
/// ended), for [`OpenObject::read_in_memory`]: one per reader (a file
/// handle, say), empty at first.
///
/// A reader that goes through a block in several reads in order (a file
/// read 128 KiB at a time over blocks of 256 KiB, or reads that straddle
/// blocks) then looks each block up once, so the cache counts one use of
/// it, not one per read: a block read once, sequentially, is not taken for
/// one read twice and promoted to the frequency list. (Reads of one reader
/// at once, or out of order, may still look a block up again.) The bytes
/// kept are a hold on the cached block (it stays in memory until the
/// reader's next read, or until this is dropped) or, from
/// [`OpenObject::keep_last`], a copy. The blocks a store's readers keep
/// at once are bounded (an eighth of its memory's blocks): past that, a
/// read keeps nothing, and the next one looks its block up again.
#[derive(Default)]
pub struct LastBlock(Option<Kept>);

struct Kept {
    key: ObjectBlockKey,
    /// The object's offset of `bytes`' first byte.
    at: u64,
    bytes: Bytes,
    _counted: KeptCount,
}

/// One of the store's kept blocks, counted until dropped.
struct KeptCount(Arc<AtomicU64>);

impl KeptCount {
    /// One more kept block, if fewer than `max` are.
    fn take(count: &Arc<AtomicU64>, max: u64) -> Option<KeptCount> {
        count
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| KeptCount(Arc::clone(count)))
    }
}

impl Drop for KeptCount {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for LastBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LastBlock")
            .field(&self.0.as_ref().map(|k| k.at..k.at + k.bytes.len() as u64))
            .finish()
    }
}

/// One version of an object held open by one reader: see the
/// [module](self) documentation.
pub struct OpenObject {
    version: CachedVersion,
    used: UsedBlocks,
}

impl std::fmt::Debug for OpenObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenObject")
            .field("size", &self.version.size)
            .finish_non_exhaustive()
    }
}

impl OpenObject {
    /// The version `meta` describes (as a HEAD or a read of `store`
    /// returned it), opened by one reader: its reads of a block within
    /// `same_use_window` of the read that counted a use of it are part of
    /// that use ([`SAME_USE_WINDOW`] is the usual one). Its identity is a
    /// hash (location, ETag, version, size, mtime, block size), computed
    /// here once.
    pub fn new<S>(store: &CachedStore<S>, meta: &ObjectMeta, same_use_window: Duration) -> Self {
        let config = &store.state.config;
        OpenObject {
            version: CachedVersion {
                identity: ObjectIdentity::of(
                    &config.namespace,
                    &meta.location,
                    meta,
                    config.block_size,
                ),
                size: meta.size,
            },
            used: UsedBlocks::with_window(same_use_window),
        }
    }

    /// The cache key of block `block` of this version.
    pub fn block_key(&self, block: u64) -> ObjectBlockKey {
        self.version.identity.block(block)
    }

    /// Whether this is still the version of `location` that the store
    /// holds: as the metadata cache says within its TTL, else as a HEAD
    /// says (with a TTL of zero, always a HEAD). For a reader that must
    /// check the version at each read and then reads the blocks with
    /// [`OpenObject::read_in_memory`]. The store's errors pass through.
    pub async fn is_current<S: ObjectStore>(
        &self,
        store: &CachedStore<S>,
        location: &Path,
    ) -> Result<bool> {
        let head = store.state.head(location).await?;
        let config = &store.state.config;
        let now = ObjectIdentity::of(
            &config.namespace,
            &head.meta.location,
            &head.meta,
            config.block_size,
        );
        Ok(now == self.version.identity && head.meta.size == self.version.size)
    }

    /// Bytes `range` of this version (clipped to its size), if memory
    /// holds every block they cover, whole: read on the caller's thread,
    /// with no metadata check and no request (`None` otherwise, and
    /// nothing counted but what the block cache counts of a lookup). The
    /// caller vouches for the version: the one it opened, which it keeps
    /// reading whatever the store holds now (the blocks are that
    /// version's, never another's). Counts a memory hit per block, as a
    /// read through [`ObjectStore::get_opts`] served from memory does, and
    /// follows the read in the sequential readahead's streams. A read
    /// within one block is not copied (the [`Bytes`] own a hold on the
    /// block).
    ///
    /// `last`, if given, is the reader's own (see [`LastBlock`]): the rest
    /// of the block its last read ended in. A block found there is served
    /// from it, with no lookup; the block this read ends in, if it ends
    /// inside it, is kept there in turn (a hold on it, until the reader's
    /// next read). Random readers need not keep anything.
    ///
    /// A block this reader used within the same-use window (see
    /// [`OpenObject::new`]) is looked up without counting an access (the
    /// read is part of that use), so a block read in several pieces, at
    /// once or out of order, counts one use.
    pub fn read_in_memory<S>(
        &self,
        store: &CachedStore<S>,
        range: Range<u64>,
        mut last: Option<&mut LastBlock>,
    ) -> Option<Bytes> {
        let (version, used) = (&self.version, &self.used);
        let state = &store.state;
        let block_size = state.config.block_size;
        let range = range.start..range.end.min(version.size);
        let kept = last.as_mut().and_then(|last| last.0.take());
        if range.start >= range.end {
            return Some(Bytes::new());
        }
        let (first, last_block) = (range.start / block_size, (range.end - 1) / block_size);
        let cache = &state.cache;
        // The kept rest of the first block, if it covers the read's part.
        let kept = kept.filter(|k| k.key == version.identity.block(first) && k.at <= range.start);
        // Checked first (counting nothing), so that a read memory cannot
        // serve leaves the cache's counters to the read that follows.
        let from = first + u64::from(kept.is_some());
        if !(from..=last_block).all(|block| cache.contains(&version.identity.block(block))) {
            return None;
        }
        // Block `block` from byte `at` (of the object) to its end.
        let mut kept = kept;
        let mut rest_of = |block: u64| -> Option<(u64, Bytes)> {
            if let Some(k) = kept.take() {
                return Some((k.at, k.bytes));
            }
            let key = version.identity.block(block);
            let held = if used.starts_use(block) {
                cache.get_in_memory_owned(&key)?
            } else {
                cache.get_in_memory_same_use(&key)?
            };
            if held.len() as u64 != read::block_len(version.size, block_size, block) {
                return None;
            }
            Some((block * block_size, Bytes::from_owner(held)))
        };
        let (bytes, tail) = if first == last_block {
            let (at, block) = rest_of(first)?;
            let out = block.slice((range.start - at) as usize..(range.end - at) as usize);
            (out, (at, block))
        } else {
            let mut out = Vec::with_capacity((range.end - range.start) as usize);
            let mut tail = None;
            for block in first..=last_block {
                let (at, bytes) = rest_of(block)?;
                let from = range.start.max(at) - at;
                let to = range.end.min(at + bytes.len() as u64) - at;
                out.extend_from_slice(&bytes[from as usize..to as usize]);
                tail = Some((at, bytes));
            }
            (Bytes::from(out), tail?)
        };
        let (at, block) = tail;
        if let Some(last) = last.filter(|_| range.end < at + block.len() as u64) {
            last.0 =
                KeptCount::take(&state.kept_blocks, state.config.max_kept_blocks).map(|counted| {
                    Kept {
                        key: version.identity.block(last_block),
                        at: range.end,
                        bytes: block.slice((range.end - at) as usize..),
                        _counted: counted,
                    }
                });
        }
        Counters::add(&state.counters.memory_hits, last_block - first + 1);
        self.served_without_fetch(store, range);
        Some(bytes)
    }

    /// Tells the store's readahead that `range` was read without a fetch
    /// (as a read through the store that missed nothing tells it).
    fn served_without_fetch<S>(&self, store: &CachedStore<S>, range: Range<u64>) {
        let block_size = store.state.config.block_size;
        let (identity, size) = (&self.version.identity, self.version.size);
        let blocks = size.div_ceil(block_size);
        store
            .state
            .readahead
            .advance(identity, range, false, block_size, blocks);
    }

    /// A small read within one block that memory does not hold, served
    /// from the second tier's copy of that block by reading and verifying
    /// only the part the read covers ([`multiarc::Cache::l2_read_part`]),
    /// on the caller's thread: a random 8 KiB read of a 256 KiB block then
    /// reads 16 KiB from the local device, not the block, and does not
    /// push a block out of memory. `None` (nothing counted) when the read
    /// spans blocks, memory holds the block, the tier has no copy, or the
    /// tier declines (the read is large, or the block was read in parts
    /// past half of it: it is then read whole through
    /// [`ObjectStore::get_opts`] and cached in memory). A read for a
    /// filesystem's thread pool, which does its I/O synchronously anyway;
    /// an async reader gets the same through `get_opts`, with the device
    /// read on the cache's I/O threads.
    pub fn read_l2_part<S>(&self, store: &CachedStore<S>, range: Range<u64>) -> Option<Bytes> {
        let (state, version) = (&store.state, &self.version);
        let block_size = state.config.block_size;
        let range = range.start..range.end.min(version.size);
        if range.start >= range.end || range.start / block_size != (range.end - 1) / block_size {
            return None;
        }
        let block = range.start / block_size;
        let key = version.identity.block(block);
        // A block memory holds is read from there; the tier answers `None`
        // itself where it has no copy.
        let cache = &state.cache;
        if cache.contains(&key) {
            return None;
        }
        let at = block * block_size;
        let bytes = cache.l2_read_part(&key, range.start - at..range.end - at)?;
        state.counters.l2_part_hit();
        self.served_without_fetch(store, range);
        Some(Bytes::from(bytes))
    }

    /// Records that this reader used the blocks `range` covers now, having
    /// read them some other way (through [`ObjectStore::get_opts`], which
    /// counted that use): its next reads of them within the window count
    /// none.
    pub fn note_use<S>(&self, store: &CachedStore<S>, range: Range<u64>) {
        let block_size = store.state.config.block_size;
        if range.start < range.end {
            for block in range.start / block_size..=(range.end - 1) / block_size {
                self.used.starts_use(block);
            }
        }
    }

    /// Keeps `bytes`, the bytes of this version from `at` to the end of the
    /// block `at` is in (or fewer), as `last`'s (see [`LastBlock`]): for a
    /// reader that read them through [`ObjectStore::get_opts`] past the end
    /// of its read, so that its next read there is served from them.
    pub fn keep_last<S>(
        &self,
        store: &CachedStore<S>,
        at: u64,
        bytes: Bytes,
        last: &mut LastBlock,
    ) {
        let (state, version) = (&store.state, &self.version);
        let block_size = state.config.block_size;
        let block = at / block_size;
        let room = (block + 1) * block_size - at;
        last.0 = None;
        if bytes.is_empty() {
            return;
        }
        last.0 =
            KeptCount::take(&state.kept_blocks, state.config.max_kept_blocks).map(|counted| Kept {
                key: version.identity.block(block),
                at,
                bytes: bytes.slice(..bytes.len().min(room as usize)),
                _counted: counted,
            });
    }
}

/// Blocks kept by the readers' [`LastBlock`]s of `store` now (bounded: an
/// eighth of memory's blocks).
pub fn kept_blocks<S>(store: &CachedStore<S>) -> u64 {
    store.state.kept_blocks.load(Ordering::Relaxed)
}
