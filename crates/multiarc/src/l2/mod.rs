//! The second tier (OpenZFS's L2ARC): buffers about to be evicted from
//! memory are copied, in large sequential batches, to a ring on a local
//! file or block device; a later miss in memory is served from there.
//!
//! This module is the device side only, and knows nothing of the ARC:
//! - `Tier`: the device, the ring's write hand, the in-memory index of what
//!   the device holds (the L2 headers), reads with checksum verification,
//!   invalidation, and the rebuild of the index from the device's log
//!   blocks on start (persistent L2ARC).
//! - `Batch`: one feed's worth of buffers, copied, then written at the hand
//!   in one sequential write followed by its log block.
//!
//! The feed thread that chooses *which* buffers to write lives with the
//! cache (`feed.rs`), as OpenZFS's `l2arc_feed_thread` lives in `arc.c`.
//!
//! API CONTRACT (the skeleton the implementation fills in; keep the
//! signatures, the cache side is written against them).

#![allow(dead_code)] // until the cache side uses every part

use crate::key::Key;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The second tier's tunables (`Builder::l2*`), with OpenZFS's names where
/// they fit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct L2Config {
    /// The device: a regular file (created if missing) or a block device.
    pub(crate) path: PathBuf,
    /// The bytes of the device the tier uses, header included.
    pub(crate) bytes: u64,
    /// `l2arc_write_max`: bytes written per feed (default 8 MiB).
    pub(crate) write_max: u64,
    /// `l2arc_headroom`: how far up the list tails a feed looks, as a
    /// multiple of `write_max` (default 2).
    pub(crate) headroom: u64,
    /// `l2arc_feed_secs`: the interval between feeds (default 1 s).
    pub(crate) feed_interval: Duration,
    /// `l2arc_feed_min_ms`: the interval when the last feed wrote more than
    /// half of `write_max` ("feed again", default 200 ms).
    pub(crate) feed_min_interval: Duration,
    /// `l2arc_mfuonly`: feed only buffers of the MFU list.
    pub(crate) mfu_only: bool,
    /// `l2arc_rebuild_enabled`: rebuild the index from the device on start.
    pub(crate) rebuild: bool,
    /// The cache identity written in the device header; a device with
    /// another identity is started empty.
    pub(crate) identity: u64,
    /// Open with `O_DIRECT` (default); false forces buffered I/O.
    pub(crate) direct: bool,
}

/// How the tier stores keys of type `K` in its log blocks: a fixed-length
/// encoding (the key type's `PersistentKey` implementation).
pub(crate) struct KeyCodec<K> {
    pub(crate) len: usize,
    pub(crate) encode: fn(&K, &mut [u8]),
    pub(crate) decode: fn(&[u8]) -> K,
}

impl<K> Clone for KeyCodec<K> {
    fn clone(&self) -> Self {
        KeyCodec {
            len: self.len,
            encode: self.encode,
            decode: self.decode,
        }
    }
}

/// What the tier knows of a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Presence {
    /// Not on the device.
    Absent,
    /// In a batch being written right now.
    Writing,
    /// On the device.
    Cached,
}

/// A buffer read back from the device.
pub(crate) struct L2Read {
    pub(crate) data: Vec<u8>,
    /// It was fed from the MFU list (for the ARC's ghost adaptation when
    /// its ghost is gone).
    pub(crate) mfu: bool,
}

/// The tier's figures, for `Stats`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct L2Figures {
    pub(crate) hits: u64,
    pub(crate) misses: u64,
    pub(crate) size: u64,
    pub(crate) writes: u64,
    pub(crate) write_bytes: u64,
    pub(crate) evictions: u64,
    pub(crate) cksum_bad: u64,
    pub(crate) io_errors: u64,
    pub(crate) hdr_bytes: u64,
    pub(crate) rebuild_blocks: u64,
    pub(crate) rebuild_ms: u64,
}

/// Outcome of `Batch::add`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Added {
    Added,
    /// The batch cannot take these bytes: the feed should stop.
    Full,
    /// The key is already on the device or being written.
    Present,
}

/// The device and its index.
pub(crate) struct Tier<K> {
    _k: std::marker::PhantomData<K>,
}

/// One feed's buffers, copied.
pub(crate) struct Batch<'a, K: Key> {
    tier: &'a Tier<K>,
}

impl<K: Key> Tier<K> {
    /// Opens the device (creating a missing regular file of `config.bytes`),
    /// takes an exclusive lock on it, and starts the rebuild of the index
    /// in the background when the header is valid and matches. Errors
    /// (one clear line, naming the path): unwritable path, device too
    /// small for one log block, `bytes` above the free space or the block
    /// device's size, the device locked by another cache.
    pub(crate) fn open(_config: L2Config, _codec: KeyCodec<K>) -> io::Result<Arc<Tier<K>>> {
        unimplemented!()
    }

    pub(crate) fn config(&self) -> &L2Config {
        unimplemented!()
    }

    /// A lookup in the index only (no I/O).
    pub(crate) fn presence(&self, _key: &K) -> Presence {
        unimplemented!()
    }

    /// Reads `key`'s copy and verifies it: `None` when it is not on the
    /// device, or the read failed or did not verify (then counted, and the
    /// header dropped). Counts `hits`/`misses`.
    pub(crate) fn read(&self, _key: &K) -> Option<L2Read> {
        unimplemented!()
    }

    /// Forgets `key`'s copy (its buffer was written anew or removed). Also
    /// keeps a rebuild still running from bringing back an older copy.
    pub(crate) fn invalidate(&self, _key: &K) {
        unimplemented!()
    }

    /// True while the index is being rebuilt (the feed waits).
    pub(crate) fn rebuilding(&self) -> bool {
        unimplemented!()
    }

    /// Blocks until the rebuild (if any) is over.
    pub(crate) fn wait_rebuild(&self) {
        unimplemented!()
    }

    /// An empty batch.
    pub(crate) fn batch(&self) -> Batch<'_, K> {
        unimplemented!()
    }

    pub(crate) fn figures(&self) -> L2Figures {
        unimplemented!()
    }

    /// Stops the rebuild thread; the device stays as it is (the next open
    /// rebuilds from it).
    pub(crate) fn shutdown(&self) {
        unimplemented!()
    }
}

impl<K: Key> Batch<'_, K> {
    /// Copies `data` for `key` into the batch and marks `key` `Writing`.
    /// The caller holds `key`'s hash-stripe lock, under which `invalidate`
    /// of `key` also runs, so a copy of stale bytes cannot be recorded.
    pub(crate) fn add(&mut self, _key: &K, _data: &[u8], _mfu: bool) -> Added {
        unimplemented!()
    }

    pub(crate) fn is_empty(&self) -> bool {
        unimplemented!()
    }

    pub(crate) fn bytes(&self) -> u64 {
        unimplemented!()
    }

    /// Writes the batch at the hand (after invalidating what it overwrites)
    /// and its log block, then the device header; the keys become `Cached`.
    /// On an error, they become `Absent` again. Returns buffers written.
    pub(crate) fn commit(self) -> io::Result<usize> {
        let _ = self.tier;
        unimplemented!()
    }
}
