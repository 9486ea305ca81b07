//! The ARC's settings, as the builder validated them, and the public
//! choices of hit mode and replacement policy.

/// How a cache hit is recorded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HitMode {
    /// The OpenZFS way: the first hold on a buffer unlinks it from its
    /// sublist and the last release links it back at the head, so the lists
    /// are exact LRU orders of the unheld buffers (ARC exactly). Each hit
    /// takes its sublist lock twice.
    Eager,
    /// CAR (Bansal & Modha, FAST '04): a hit only takes a hold and sets the
    /// entry's reference bit; buffers stay linked while held and no sublist
    /// lock is taken on a hit or a release. The evictor does the list work:
    /// a referenced buffer at a list tail moves (MRU to MFU, MFU back to the
    /// MFU head) with its bit cleared instead of being evicted. Same ghost
    /// lists, same adaptation of `p`, same statistics.
    ///
    /// The default: measured 2-4x the eager mode's hit throughput on this
    /// project's benchmark, and within half a point of ARC's hit ratio on
    /// the CloudPhysics trace (docs/BENCHMARKS.md).
    #[default]
    Lazy,
}

/// What eviction does with the lists: which buffers move between them,
/// which are evicted, where a ghost hit is admitted and how far `p` moves.
/// A hit records the same either way (the [`HitMode`]'s).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    /// ARC (Megiddo & Modha, FAST '03): exactly in the eager hit mode, with
    /// CAR's clocks (Bansal & Modha, FAST '04) in the lazy mode. `p`
    /// anywhere in `0..=c`, both ghost lists together up to `c` beside the
    /// cached data.
    #[default]
    Arc,
    /// S3ARC: S3-FIFO's probationary queue (Yang et al., SOSP '23) with
    /// ARC's ghost lists and self-tuning split. Lazy hit mode only (the
    /// builder refuses it with [`HitMode::Eager`]): a hit is still the one
    /// atomic add to the buffer's hit count, and the evictor reads the count:
    ///
    /// - MRU (the probationary queue, target `p`, kept within 0.5%..10% of
    ///   `c` and starting at 10%): a buffer at the tail with two hits or
    ///   more moves to MFU with its count cleared; any other is evicted to
    ///   the MRU ghost list (one-hit wonders leave quickly).
    /// - MFU (the main clock): a buffer at the tail with hits goes round
    ///   again with `min(hits, 4) - 1` (a frequency, decaying), marked as
    ///   reused in MFU; one with none is evicted to the MFU ghost list,
    ///   which remembers the mark.
    /// - A miss on the MRU ghost list (80% of `c`) is admitted to MFU and
    ///   raises `p` by ARC's step; a miss on the MFU ghost list (50% of
    ///   `c`) lowers `p` by ARC's step and is admitted to MFU if the buffer
    ///   was reused in MFU, else enters MRU as a new buffer.
    ///
    /// The reference model is `multiarc_sim::s3arc::S3ArcPolicy`; the
    /// cache makes its decisions request by request at one sublist with
    /// inline eviction (`tests/differential.rs`). Hit ratios against ARC:
    /// docs/BENCHMARKS.md, "S3ARC in the cache".
    S3arc,
    /// Adaptive: ARC's rules (CAR's clocks) and S3ARC's as two experts, one
    /// of them deciding at a time, chosen by regret, after LeCaR (Vietri et
    /// al., HotStorage '18). Lazy hit mode only. Where the experts would
    /// have decided differently (the list to evict from, given each one's
    /// own `p`; or an MRU buffer hit once, which CAR promotes and S3ARC
    /// evicts), the evicted buffer's ghost is marked with the expert that
    /// decided; a miss that finds such a ghost is a regret of that expert,
    /// counted in the ghost's bytes (a regret of the expert not deciding
    /// takes its bytes off). Once the deciding expert's regrets reach twice
    /// the cache's target size, the other expert decides, with its own `p`
    /// (each expert's `p` follows every ghost hit by its own rule). A switch
    /// reshapes the lists (S3ARC keeps MRU within 10% of the cache) and
    /// costs misses of its own, so switches are rare by design. It starts
    /// with ARC's rules. A hit does the same as under any policy; only
    /// misses and the evictor do more.
    ///
    /// Its page-based reference model is `multiarc_sim::adaptive`: at one
    /// sublist, with 1-byte blocks, the cache makes the model's hits and
    /// misses request by request, through its switches
    /// (`tests/differential.rs`); unit tests check the marks, regrets and
    /// switches (`arc/insert.rs`, `arc/replacement.rs`). Hit ratios
    /// against ARC:
    /// docs/BENCHMARKS.md, "Held-out traces".
    Adaptive,
    /// Generations: ARC's rules, with MFU (T2) kept in order of coarse
    /// *generations* instead of CAR's clock. Lazy hit mode only. A hit
    /// still takes its hold and counts itself in one atomic add; in
    /// addition it compares the generation its buffer last noted (a byte
    /// of the header) with the cache's current one and, where they differ
    /// (a *first hit*, at most once per buffer per generation), stores the
    /// current one with a plain store and counts its bytes on a counter of
    /// its thread's own. A hit on an MRU buffer moves it to MFU at once,
    /// as ARC's does, where the locks are free (a try-lock: else the
    /// evictor moves it when it reaches MRU's tail, as CAR's clock would).
    /// The generation advances every `c / 16` bytes of misses and first
    /// hits. Each MFU sublist is cut into segments, one per generation of
    /// the newest 64: the evictor re-queues an MFU
    /// buffer at its tail that noted a later generation than it was queued
    /// in at the end of that generation's segment, and evicts the others.
    ///
    /// Its page-based reference model is
    /// `multiarc_sim::generations::GenerationArcPolicy` named
    /// `arc-gen-16-firsts-k64`; the cache follows it at one sublist with
    /// inline eviction, up to when a generation advances (at misses, not
    /// at first hits; `tests/differential.rs`).
    Generations,
}

/// Generations per cache size (`Policy::Generations`): the generation
/// advances every `c / GENERATIONS_PER_CACHE` bytes of misses and first
/// hits.
pub(crate) const GENERATIONS_PER_CACHE: u64 = 16;
/// The generations with a segment of their own in each MFU sublist
/// (`Policy::Generations`); older ones share the oldest.
pub(crate) const GENERATIONS_KEPT: u64 = 64;

/// The tunables, as the builder validated them (`api/builder.rs`).
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) max_bytes: u64,
    pub(crate) min_bytes: u64,
    pub(crate) sublists: usize,
    pub(crate) evict_batch_limit: usize,
    pub(crate) overflow_shift: u32,
    pub(crate) hash_stripes: usize,
    pub(crate) inline_eviction: bool,
    pub(crate) hit_mode: HitMode,
    pub(crate) policy: Policy,
    /// `Builder::seed`: where the cache's random choices (the key hasher,
    /// the walks' random starts) come from; `None`: a random seed.
    pub(crate) seed: Option<u64>,
}
