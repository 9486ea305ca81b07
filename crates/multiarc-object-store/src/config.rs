//! The builder of a [`CachedStore`](crate::CachedStore) and its settings.

use crate::key::ObjectBlockKey;
use crate::metadata::MetadataCache;
use crate::readahead::Readahead;
use crate::state::{ReadConfig, State};
use crate::store::CachedStore;
use multiarc::{Cache, HitMode};
use object_store::ObjectStore;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// The default block size: 256 KiB (measured; see the crate docs).
pub const DEFAULT_BLOCK_SIZE: u64 = 256 << 10;
/// The default bound on one coalesced block fetch: 16 MiB.
pub const DEFAULT_MAX_FETCH: u64 = 16 << 20;
/// The default bound on cached metadata entries: 65536 objects.
pub const DEFAULT_MAX_METADATA_ENTRIES: usize = 1 << 16;
/// The default metadata TTL: 10 s.
pub const DEFAULT_METADATA_TTL: Duration = Duration::from_secs(10);
/// The default bound on sequential readahead: 8 MiB (measured; see the
/// crate docs, *Readahead*).
pub const DEFAULT_READAHEAD: u64 = 8 << 20;

/// Why a [`CachedStore`] could not be built.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// A setting is out of its range; the message names it.
    Invalid(String),
    /// The block cache could not be built (its settings, or the second
    /// tier's device).
    Cache(multiarc::ConfigError),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Invalid(msg) => write!(f, "invalid cached store configuration: {msg}"),
            BuildError::Cache(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Invalid(_) => None,
            BuildError::Cache(e) => Some(e),
        }
    }
}

impl<S: ObjectStore> CachedStore<S> {
    /// A [`Builder`] of a cached store in front of `inner`.
    pub fn builder(inner: S) -> Builder<S> {
        Builder::new(inner)
    }
}

/// A caller's further settings of the block cache.
type ConfigureCache =
    Box<dyn FnOnce(multiarc::Builder<ObjectBlockKey>) -> multiarc::Builder<ObjectBlockKey>>;

/// Builds a [`CachedStore`]: `CachedStore::builder(inner).max_bytes(..)`,
/// optionally `.l2(path, bytes)`, `.block_size(..)`, `.metadata_ttl(..)`,
/// then `.build()`.
pub struct Builder<S> {
    inner: S,
    max_bytes: Option<u64>,
    l2: Option<(PathBuf, u64)>,
    block_size: u64,
    max_fetch_bytes: u64,
    readahead: u64,
    metadata_ttl: Option<Duration>,
    max_metadata_entries: usize,
    namespace: Option<String>,
    configure: Option<ConfigureCache>,
}

impl<S: ObjectStore> Builder<S> {
    pub(crate) fn new(inner: S) -> Builder<S> {
        Builder {
            inner,
            max_bytes: None,
            l2: None,
            block_size: DEFAULT_BLOCK_SIZE,
            max_fetch_bytes: DEFAULT_MAX_FETCH,
            readahead: DEFAULT_READAHEAD,
            metadata_ttl: Some(DEFAULT_METADATA_TTL),
            max_metadata_entries: DEFAULT_MAX_METADATA_ENTRIES,
            namespace: None,
            configure: None,
        }
    }

    /// The memory the block cache may use. Required.
    pub fn max_bytes(mut self, bytes: u64) -> Builder<S> {
        self.max_bytes = Some(bytes);
        self
    }

    /// Adds a second tier of `bytes` on the file or block device at `path`
    /// ([`multiarc::Builder::l2`]): blocks evicted from memory are kept
    /// there and found again after a restart.
    ///
    /// A block read back from it that memory has forgotten (no ghost left)
    /// comes back as a new block, onto the recency list
    /// ([`multiarc::Builder::l2_readback_as_new`], on here): as ARC treats
    /// a block whose last use is further back than its ghost lists reach.
    /// So full scans that repeat and fit in the L2 are served from the L2
    /// without pushing the hot set out of memory. Measured against the
    /// cache's own default (a read-back is a ghost hit of the list it was
    /// fed from, as OpenZFS counts an L2-only header, which lets each
    /// scan's blocks into the frequency list): the Parquet benchmark's
    /// queries per second rose at 1 and 2 tasks and the hot set stayed in
    /// memory after a scan (docs/BENCHMARKS.md).
    /// [`Builder::configure_cache`] with `l2_readback_as_new(false)` gives
    /// the cache's default back.
    pub fn l2(mut self, path: impl Into<PathBuf>, bytes: u64) -> Builder<S> {
        self.l2 = Some((path.into(), bytes));
        self
    }

    /// The block size: reads are served from aligned blocks of this many
    /// bytes (the last block of an object is shorter). Default 256 KiB; at
    /// least 4 KiB. Changing it makes earlier L2 contents unreachable (the
    /// block size is part of each block's identity), never wrong.
    pub fn block_size(mut self, bytes: u64) -> Builder<S> {
        self.block_size = bytes;
        self
    }

    /// The largest single ranged GET that coalesces adjacent missing blocks
    /// of one read (rounded down to whole blocks, at least one). Default 16 MiB.
    pub fn max_fetch_bytes(mut self, bytes: u64) -> Builder<S> {
        self.max_fetch_bytes = bytes;
        self
    }

    /// The largest readahead window: a read that continues a sequential
    /// stream through an object and misses fetches up to this many bytes
    /// past its end in the same request (the window starts at twice the
    /// read and doubles at each miss of the stream; see the crate docs,
    /// *Readahead*). Rounded down to whole blocks; less than one block (0)
    /// disables readahead. Default 8 MiB. Read-ahead blocks are cached
    /// like the others, within [`Builder::max_bytes`].
    pub fn readahead(mut self, max_bytes: u64) -> Builder<S> {
        self.readahead = max_bytes;
        self
    }

    /// How long an object's metadata (its ETag, version and size: which
    /// version reads serve) is trusted before it is fetched again. Default
    /// 10 s. `Duration::ZERO` fetches it on every read.
    pub fn metadata_ttl(mut self, ttl: Duration) -> Builder<S> {
        self.metadata_ttl = Some(ttl);
        self
    }

    /// Trusts cached metadata forever (for immutable data sets): only
    /// writes through this store, or a read that finds the object changed,
    /// make it fetch an object's metadata again.
    pub fn metadata_forever(mut self) -> Builder<S> {
        self.metadata_ttl = None;
        self
    }

    /// How many objects' metadata is kept at most (default 65536): past it,
    /// expired entries are dropped, then arbitrary ones (each costs a HEAD
    /// on its next read). At least 1.
    pub fn max_metadata_entries(mut self, entries: usize) -> Builder<S> {
        self.max_metadata_entries = entries;
        self
    }

    /// The name hashed into every block's identity, so that one L2 file
    /// reused in front of another store can never serve this one's blocks.
    /// Default: the inner store's `Display` (e.g. `AmazonS3(bucket)`).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Builder<S> {
        self.namespace = Some(namespace.into());
        self
    }

    /// Further settings of the block cache (sublists, hit mode, L2 feed,
    /// ...), applied after `max_bytes` and `l2`, so they also override the
    /// three this builder sets: `overflow_shift` (chosen so that the
    /// allowance past the memory target holds 16 blocks, 8 down to 3),
    /// `hit_mode(HitMode::Eager)` and, with an L2,
    /// `l2_readback_as_new(true)` (see [`Builder::l2`]).
    ///
    /// **Why eager hits.** The block cache's own default, the lazy hit
    /// mode, keeps CAR's clocks: a hit only marks its buffer, so that a hit
    /// takes no lock. When every buffer of the frequent list has been
    /// marked since the clock's last turn (a query engine's warm pass reads
    /// everything it keeps), the mark no longer tells which were read
    /// last, and the clock evicts in the order buffers entered the list.
    /// A scan of data read before then takes the blocks the hot queries
    /// read just before it. Eager hits keep the lists in exact LRU order
    /// (exactly ARC), for a sublist lock per hit: nothing beside a request
    /// of this store's, measured in docs/BENCHMARKS.md. TPC-H's hot queries
    /// after a scan of `lineitem` through DataFusion sent 2 requests
    /// (eager) against 11 and 37 (lazy).
    pub fn configure_cache(
        mut self,
        configure: impl FnOnce(multiarc::Builder<ObjectBlockKey>) -> multiarc::Builder<ObjectBlockKey>
            + 'static,
    ) -> Builder<S> {
        self.configure = Some(Box::new(configure));
        self
    }

    /// Checks the settings, builds the block cache (opening the L2) and
    /// returns the store.
    pub fn build(self) -> Result<CachedStore<S>, BuildError> {
        let max_bytes = self
            .max_bytes
            .ok_or_else(|| BuildError::Invalid("max_bytes is required".into()))?;
        if self.block_size < 4096 || self.block_size > (1 << 30) {
            return Err(BuildError::Invalid(format!(
                "block_size ({}) must be between 4 KiB and 1 GiB",
                self.block_size
            )));
        }
        let mut cache = Cache::<ObjectBlockKey>::builder()
            .max_bytes(max_bytes)
            .overflow_shift(overflow_shift(max_bytes, self.block_size))
            .hit_mode(HitMode::Eager);
        if let Some((path, bytes)) = self.l2 {
            cache = cache.l2(path, bytes).l2_readback_as_new(true);
        }
        if let Some(configure) = self.configure {
            cache = configure(cache);
        }
        let cache = cache.build().map_err(BuildError::Cache)?;
        let config = ReadConfig {
            block_size: self.block_size,
            max_fetch_blocks: (self.max_fetch_bytes / self.block_size).max(1),
            max_kept_blocks: (max_bytes / self.block_size / 8).max(1),
            namespace: self.namespace.unwrap_or_else(|| self.inner.to_string()),
        };
        let metadata = MetadataCache::new(self.metadata_ttl, self.max_metadata_entries);
        let readahead = Readahead::new(self.readahead / self.block_size);
        Ok(CachedStore::new(State::new(
            self.inner, cache, config, metadata, readahead,
        )))
    }
}

/// The cache's `overflow_shift` for `max_bytes` of memory in blocks of
/// `block_size`: the cache's default (8) where `max_bytes >> 8` holds 16
/// blocks, else the largest shift down to 3 (an eighth of memory) whose
/// allowance holds them. An insert past `c` plus `c >> shift` waits for
/// the evict thread; with the default shift and a small memory of large
/// blocks (8 MiB of 64 KiB blocks: 32 KiB, half a block) nearly every
/// insert into a full cache waited (1,168 of 2,594 on average per
/// measurement of the object benchmark), each a round trip between two
/// threads. OpenZFS makes the allowance at least its largest block (16
/// MiB) for the same reason.
pub(crate) fn overflow_shift(max_bytes: u64, block_size: u64) -> u32 {
    let want = block_size.saturating_mul(16);
    (3..=8u32)
        .rev()
        .find(|&shift| max_bytes >> shift >= want)
        .unwrap_or(3)
}

#[cfg(test)]
mod tests {
    use super::overflow_shift;

    #[test]
    fn the_overflow_allowance_holds_16_blocks_where_an_eighth_of_memory_can() {
        const M: u64 = 1 << 20;
        assert_eq!(overflow_shift(4096 * M, 256 << 10), 8, "16 MiB: 64 blocks");
        assert_eq!(overflow_shift(8 * M, 64 << 10), 3, "1 MiB: 16 blocks");
        assert_eq!(overflow_shift(64 * M, 256 << 10), 4, "4 MiB: 16 blocks");
        assert_eq!(overflow_shift(M, 256 << 10), 3, "never past an eighth");
        assert_eq!(overflow_shift(u64::MAX, u64::MAX), 3);
    }
}
