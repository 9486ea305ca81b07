//! Building a cache: tunables, their defaults and validation
//! ([`Builder::build`], which starts the cache, is in `cache.rs`). The
//! second tier's settings, its device's and its feed's, are the tier's to
//! check (`l2::L2Config`).

pub use super::error::ConfigError;
use crate::arc::{Config, HitMode, PersistentKey, Policy};
use crate::l2::{KeyCodec, L2Config};
use std::fmt;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::time::Duration;

/// The largest `max_bytes` a cache takes (4 EiB): the ARC's arithmetic on
/// its target (twice it bounds the history) must not overflow.
pub const MAX_BYTES: u64 = 1 << 62;

/// Builds a [`Cache`](crate::Cache) with keys of type `K`. Only `max_bytes` is required.
///
/// ```
/// let cache: multiarc::Cache<u64> = multiarc::Cache::builder().max_bytes(64 << 20).build().unwrap();
/// # drop(cache);
/// ```
pub struct Builder<K> {
    _key: PhantomData<fn() -> K>,
    max_bytes: Option<u64>,
    min_bytes: Option<u64>,
    sublists: Option<usize>,
    evict_batch_limit: Option<usize>,
    overflow_shift: Option<u32>,
    hash_stripes: Option<usize>,
    inline_eviction: bool,
    hit_mode: HitMode,
    policy: Policy,
    seed: Option<u64>,
    l2: Option<L2Config>,
    /// Set by `l2` (which needs `K: PersistentKey`); `build` hands it to
    /// the tier.
    pub(crate) key_codec: Option<KeyCodec<K>>,
}

/// The default number of sublists per state: `max(available parallelism, 4)`.
pub fn default_sublists() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .max(4)
}

impl<K> Clone for Builder<K> {
    fn clone(&self) -> Self {
        Builder {
            _key: PhantomData,
            max_bytes: self.max_bytes,
            min_bytes: self.min_bytes,
            sublists: self.sublists,
            evict_batch_limit: self.evict_batch_limit,
            overflow_shift: self.overflow_shift,
            hash_stripes: self.hash_stripes,
            inline_eviction: self.inline_eviction,
            hit_mode: self.hit_mode,
            policy: self.policy,
            seed: self.seed,
            l2: self.l2.clone(),
            key_codec: self.key_codec.clone(),
        }
    }
}

impl<K> fmt::Debug for Builder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("max_bytes", &self.max_bytes)
            .field("min_bytes", &self.min_bytes)
            .field("sublists", &self.sublists)
            .field("evict_batch_limit", &self.evict_batch_limit)
            .field("overflow_shift", &self.overflow_shift)
            .field("hash_stripes", &self.hash_stripes)
            .field("inline_eviction", &self.inline_eviction)
            .field("hit_mode", &self.hit_mode)
            .field("policy", &self.policy)
            .field("seed", &self.seed)
            .field("l2", &self.l2)
            .finish()
    }
}

impl<K> Default for Builder<K> {
    fn default() -> Self {
        Builder {
            _key: PhantomData,
            max_bytes: None,
            min_bytes: None,
            sublists: None,
            evict_batch_limit: None,
            overflow_shift: None,
            hash_stripes: None,
            inline_eviction: false,
            hit_mode: HitMode::default(),
            policy: Policy::default(),
            seed: None,
            l2: None,
            key_codec: None,
        }
    }
}

impl<K> Builder<K> {
    /// A builder with every tunable at its default.
    pub fn new() -> Builder<K> {
        Builder::default()
    }

    /// Upper bound on the bytes of cached data (the ARC's `c` starts here).
    /// Required.
    pub fn max_bytes(mut self, bytes: u64) -> Builder<K> {
        self.max_bytes = Some(bytes);
        self
    }

    /// Lowest value [`Cache::set_max_bytes`](crate::Cache::set_max_bytes) accepts. Default: `max_bytes / 32`
    /// (at least 1).
    pub fn min_bytes(mut self, bytes: u64) -> Builder<K> {
        self.min_bytes = Some(bytes);
        self
    }

    /// Sublists per ARC state list (each with its own lock). Default:
    /// `max(available parallelism, 4)`. `1` reproduces the single-list design
    /// before OpenZFS 5497, for comparison.
    pub fn sublists(mut self, n: usize) -> Builder<K> {
        self.sublists = Some(n);
        self
    }

    /// Buffers the evict thread takes from one sublist before moving to the
    /// next (OpenZFS `zfs_arc_evict_batch_limit`). Default: 10.
    pub fn evict_batch_limit(mut self, n: usize) -> Builder<K> {
        self.evict_batch_limit = Some(n);
        self
    }

    /// An insert that takes the cache past `c + (c >> overflow_shift)` waits
    /// for the evict thread instead of only waking it (OpenZFS
    /// `zfs_arc_overflow_shift`). Default: 8 (0.4% of `c`).
    pub fn overflow_shift(mut self, shift: u32) -> Builder<K> {
        self.overflow_shift = Some(shift);
        self
    }

    /// Hash table stripes (rounded up to a power of two). Default: 16 per
    /// sublist, at least 256. Lazy hits take no stripe lock, so stripes
    /// bound only write concurrency (and eager hits); fewer, denser stripes
    /// keep the hit path's metadata in cache (256 measured faster than 1024
    /// at one thread).
    pub fn hash_stripes(mut self, n: usize) -> Builder<K> {
        self.hash_stripes = Some(n);
        self
    }

    /// Test and replay hook: with `true` there is no evict thread and every
    /// insert evicts synchronously, exactly enough to fit, before it returns.
    /// Deterministic, but every miss pays for eviction. Default: `false`.
    pub fn inline_eviction(mut self, inline: bool) -> Builder<K> {
        self.inline_eviction = inline;
        self
    }

    /// How hits are recorded: [`HitMode::Lazy`] (default) or [`HitMode::Eager`].
    pub fn hit_mode(mut self, mode: HitMode) -> Builder<K> {
        self.hit_mode = mode;
        self
    }

    /// The replacement policy: [`Policy::Arc`] (default: ARC, with CAR's
    /// clocks in the lazy hit mode), [`Policy::S3arc`] (S3-FIFO's
    /// probationary queue with ARC's ghost lists and adaptation) or
    /// [`Policy::Adaptive`] (the two as experts, chosen by regret) or
    /// [`Policy::Generations`] (ARC with MFU in coarse generations). All
    /// but ARC need the lazy hit mode: `build` refuses them with
    /// [`HitMode::Eager`]. The policy changes what eviction does, never
    /// what a hit does.
    ///
    /// ```
    /// use multiarc::{Cache, Policy};
    /// let cache: Cache<u64> = Cache::builder()
    ///     .max_bytes(64 << 20)
    ///     .policy(Policy::S3arc)
    ///     .build()
    ///     .unwrap();
    /// # drop(cache);
    /// ```
    pub fn policy(mut self, policy: Policy) -> Builder<K> {
        self.policy = policy;
        self
    }

    /// The seed of the cache's random choices: the key hasher (which keys
    /// share a sublist and a lock stripe) and where each eviction walk and
    /// second-tier feed starts among the sublists. With a seed, inline
    /// eviction and one thread, the same requests give the same hits,
    /// evictions and contents in every run (`multiarc replay` relies on
    /// it); with the evict thread, its timing still varies.
    ///
    /// Default: a random seed per cache, as a `HashMap`'s: keys chosen to
    /// collide cannot be aimed at one sublist or stripe of a cache they
    /// do not know the seed of. Set one for reproducible runs (tests,
    /// simulations), not for a cache that faces untrusted keys. A seeded
    /// cache also hashes with foldhash's fixed multiplier, which spreads
    /// runs of consecutive block numbers less evenly over the table than an
    /// unseeded cache's: its hits on such keys were 7-14% slower at one
    /// thread (docs/BENCHMARKS.md, "Hit throughput").
    pub fn seed(mut self, seed: u64) -> Builder<K> {
        self.seed = Some(seed);
        self
    }

    pub(crate) fn config(&self) -> Result<Config, ConfigError> {
        let max_bytes = self
            .max_bytes
            .ok_or_else(|| ConfigError::invalid("max_bytes is required"))?;
        if max_bytes == 0 {
            return Err(ConfigError::invalid("max_bytes must be greater than 0"));
        }
        if max_bytes > MAX_BYTES {
            return Err(ConfigError::invalid(format!(
                "max_bytes ({max_bytes}) is above the largest cache, {MAX_BYTES} bytes (4 EiB)"
            )));
        }
        let min_bytes = self.min_bytes.unwrap_or((max_bytes / 32).max(1));
        if min_bytes == 0 {
            return Err(ConfigError::invalid("min_bytes must be greater than 0"));
        }
        if min_bytes > max_bytes {
            return Err(ConfigError::invalid(format!(
                "min_bytes ({min_bytes}) is greater than max_bytes ({max_bytes})"
            )));
        }
        let sublists = self.sublists.unwrap_or_else(default_sublists);
        if sublists == 0 {
            return Err(ConfigError::invalid("sublists must be at least 1"));
        }
        if sublists > 1 << 16 {
            return Err(ConfigError::invalid(format!(
                "sublists ({sublists}) is more than 65536"
            )));
        }
        let evict_batch_limit = self.evict_batch_limit.unwrap_or(10);
        if evict_batch_limit == 0 {
            return Err(ConfigError::invalid("evict_batch_limit must be at least 1"));
        }
        let overflow_shift = self.overflow_shift.unwrap_or(8);
        if overflow_shift == 0 || overflow_shift > 63 {
            return Err(ConfigError::invalid(format!(
                "overflow_shift ({overflow_shift}) must be between 1 and 63"
            )));
        }
        let hash_stripes = self.hash_stripes.unwrap_or((sublists * 16).max(256));
        if hash_stripes == 0 || hash_stripes > 1 << 24 {
            return Err(ConfigError::invalid(format!(
                "hash_stripes ({hash_stripes}) must be between 1 and 16777216"
            )));
        }
        if self.policy != Policy::Arc && self.hit_mode == HitMode::Eager {
            let name = match self.policy {
                Policy::S3arc => "S3ARC",
                Policy::Generations => "generations",
                _ => "adaptive",
            };
            return Err(ConfigError::invalid(format!(
                "the {name} policy needs the lazy hit mode (it reads the hit counts \
                 that lazy hits keep; eager hits move buffers instead)"
            )));
        }
        Ok(Config {
            max_bytes,
            min_bytes,
            sublists,
            evict_batch_limit,
            overflow_shift,
            hash_stripes: hash_stripes.next_power_of_two(),
            inline_eviction: self.inline_eviction,
            hit_mode: self.hit_mode,
            policy: self.policy,
            seed: self.seed,
        })
    }

    /// The second tier's settings, checked by the tier (`None`: no tier).
    pub(crate) fn l2_config(&self) -> Result<Option<L2Config>, ConfigError> {
        self.l2
            .as_ref()
            .map(|l2| l2.validated().map_err(ConfigError::invalid))
            .transpose()
    }

    fn l2_mut(&mut self) -> &mut L2Config {
        // A write_max of 0: the default, resolved against the size (`l2_config`).
        self.l2
            .get_or_insert_with(|| L2Config::new(PathBuf::new(), 0, 0))
    }
}

/// The second tier (OpenZFS's L2ARC): its keys must be [`PersistentKey`]s,
/// since its index is rebuilt from the device after a restart.
impl<K: PersistentKey> Builder<K> {
    /// Adds a second tier of `bytes` on the file or block device at `path`
    /// (a missing file is created and its space reserved): buffers about to
    /// be evicted from memory are written there by a feed thread, and a
    /// later miss is served from it. Opened with `O_DIRECT` (buffered, with
    /// a one-line warning, where the filesystem refuses it); locked
    /// exclusively, so two caches cannot share it. On start, what the
    /// device holds is found again in the background (persistent L2ARC).
    pub fn l2(mut self, path: impl Into<PathBuf>, bytes: u64) -> Builder<K> {
        let l2 = self.l2_mut();
        l2.device.path = path.into();
        l2.device.bytes = bytes;
        self.key_codec = Some(KeyCodec {
            len: K::ENCODED_LEN,
            encode: K::encode,
            decode: K::decode,
        });
        self
    }

    /// `l2arc_write_max`: bytes written to the second tier per feed
    /// (default 32 MiB, as OpenZFS's since its change 15457, or a sixteenth of a
    /// device smaller than 512 MiB);
    /// at most half the device.
    pub fn l2_write_max(mut self, bytes: u64) -> Builder<K> {
        self.l2_mut().feed.write_max = bytes.max(1);
        self
    }

    /// `l2arc_headroom`: how far up the list tails a feed looks for
    /// buffers to write, as a multiple of the write size (default 8, as
    /// OpenZFS's since its change 15457).
    pub fn l2_headroom(mut self, multiple: u64) -> Builder<K> {
        self.l2_mut().feed.headroom = multiple;
        self
    }

    /// `l2arc_feed_secs`: the time between feeds (default 1 s).
    pub fn l2_feed_interval(mut self, interval: Duration) -> Builder<K> {
        self.l2_mut().feed.feed_interval = interval;
        self
    }

    /// `l2arc_feed_min_ms`: the time between feeds while the last one
    /// wrote more than half the write size (default 200 ms).
    pub fn l2_feed_min_interval(mut self, interval: Duration) -> Builder<K> {
        self.l2_mut().feed.feed_min_interval = interval;
        self
    }

    /// `l2arc_mfuonly`: feed only buffers of the MFU list (default false).
    pub fn l2_mfu_only(mut self, mfu_only: bool) -> Builder<K> {
        self.l2_mut().feed.mfu_only = mfu_only;
        self
    }

    /// How many bytes of copies the second tier's hand may keep per byte
    /// of new buffers in a batch (default 32, at most 64). The hand keeps,
    /// instead of overwriting, the copies of the tier list that is under
    /// its adaptive target and those read back since they were written
    /// (ARC's choice and CAR's second chance, on the ring). A kept copy
    /// stays where it is (the batch's new buffers go into the gaps around
    /// it) and costs an entry in the batch's log block, not a write of its
    /// bytes. 0 lets the hand overwrite everything it reaches, as
    /// OpenZFS's L2ARC does (a FIFO of what memory evicted).
    pub fn l2_keep_ratio(mut self, ratio: u64) -> Builder<K> {
        self.l2_mut().device.keep_ratio = ratio;
        self
    }

    /// How a block read back from the second tier comes back to memory
    /// when memory has forgotten it (no ghost left). false (the default):
    /// as history, a hit of the ghost list of the list it was fed from
    /// (as OpenZFS counts an L2-only header), which adapts the MRU/MFU
    /// split and enters MFU. true: as a new block, onto MRU with the split
    /// left alone, as a miss would be without the tier; then scans that
    /// repeat and fit in the tier do not push the hot set out of memory.
    /// It can cost hit ratio where the tier serves most hits (the ARC
    /// traces: see docs/BENCHMARKS.md).
    pub fn l2_readback_as_new(mut self, as_new: bool) -> Builder<K> {
        self.l2_mut().device.readback_as_new = as_new;
        self
    }

    /// `l2arc_rebuild_enabled`: find what the device holds on start
    /// (default true); false starts it empty.
    pub fn l2_rebuild(mut self, rebuild: bool) -> Builder<K> {
        self.l2_mut().device.rebuild = rebuild;
        self
    }

    /// The identity written in the device header (default 0). A device
    /// written under another identity is started empty: give caches of
    /// different data different identities.
    pub fn l2_identity(mut self, identity: u64) -> Builder<K> {
        self.l2_mut().device.identity = identity;
        self
    }

    /// Whether to open the device with `O_DIRECT` (default true).
    pub fn l2_direct(mut self, direct: bool) -> Builder<K> {
        self.l2_mut().device.direct = direct;
        self
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_configurations_with_clear_errors() {
        let err = |b: Builder<u64>| b.config().unwrap_err().to_string();
        assert!(err(Builder::new()).contains("max_bytes is required"));
        assert!(err(Builder::new().max_bytes(0)).contains("max_bytes must be greater than 0"));
        assert!(err(Builder::new().max_bytes(u64::MAX)).contains("largest cache"));
        assert!(err(Builder::new().max_bytes(10).min_bytes(0)).contains("min_bytes"));
        assert!(err(Builder::new().max_bytes(10).min_bytes(11)).contains("greater than max_bytes"));
        assert!(err(Builder::new().max_bytes(10).sublists(0)).contains("sublists"));
        assert!(
            err(Builder::new().max_bytes(10).evict_batch_limit(0)).contains("evict_batch_limit")
        );
        assert!(err(Builder::new().max_bytes(10).overflow_shift(0)).contains("overflow_shift"));
        assert!(err(Builder::new().max_bytes(10).hash_stripes(0)).contains("hash_stripes"));
        assert!(err(Builder::new()
            .max_bytes(10)
            .hit_mode(HitMode::Eager)
            .policy(Policy::S3arc))
        .contains("S3ARC policy needs the lazy hit mode"));
        assert!(err(Builder::new()
            .max_bytes(10)
            .hit_mode(HitMode::Eager)
            .policy(Policy::Generations))
        .contains("generations policy needs the lazy hit mode"));
        let c = Builder::<u64>::new()
            .max_bytes(10)
            .policy(Policy::S3arc)
            .config()
            .unwrap();
        assert_eq!((c.policy, c.hit_mode), (Policy::S3arc, HitMode::Lazy));
    }

    #[test]
    fn defaults() {
        let c = Builder::<u64>::new().max_bytes(1 << 20).config().unwrap();
        assert_eq!(c.min_bytes, 1 << 15);
        assert!(c.sublists >= 4);
        assert_eq!(c.evict_batch_limit, 10);
        assert_eq!(c.overflow_shift, 8);
        assert!(c.hash_stripes.is_power_of_two() && c.hash_stripes >= 256);
        assert_eq!(c.policy, Policy::Arc);
    }
}
