//! A second tier below the ARC, as the ARC sees it: the trait the core
//! calls ([`SecondTier`]), and what a tier may see of the ARC in turn
//! ([`ArcTails`], for its feed). The core knows no tier beyond these: the
//! builder hands it one (`l2/` implements them for OpenZFS's L2ARC).
//!
//! What the core asks of a tier, and where:
//! - a memory miss: [`SecondTier::read`] (device I/O, no ARC lock held);
//! - an insert or removal: [`SecondTier::invalidate`] under the key's
//!   stripe lock (memory only: no I/O there), then
//!   [`SecondTier::persist_invalidations`] after that lock is dropped and
//!   before the call returns;
//! - the eviction walk: [`SecondTier::presence`] under the candidate's
//!   stripe and sublist locks (memory only), to skip a buffer being copied
//!   and to account what it drops ([`SecondTier::classify_eviction`]; the
//!   evict thread also passes over a buffer the tier could hold and has
//!   not copied, and feeds again: `evict.rs`'s `evict_feeding`);
//! - inline eviction: [`SecondTier::before_room`], before room is made,
//!   with no ARC lock held;
//! - the evict thread: [`SecondTier::before_evict_pass`], before each
//!   pass and again while the pass spares uncopied buffers (a bounded
//!   number of times, each looking further up the tails), with no ARC
//!   lock held.

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

/// The bytes a load inserts: a loader's `Vec`, or a window of the buffer a
/// tier read its device into (aligned for `O_DIRECT`), handed over as it
/// is: the insert copies them into the entry, the one copy of a read-back.
pub(crate) struct LoadedBytes {
    buf: Vec<u8>,
    window: std::ops::Range<usize>,
}

impl LoadedBytes {
    /// Bytes `window` of `buf`.
    pub(crate) fn window(buf: Vec<u8>, window: std::ops::Range<usize>) -> LoadedBytes {
        assert!(window.start <= window.end && window.end <= buf.len());
        LoadedBytes { buf, window }
    }
}

impl From<Vec<u8>> for LoadedBytes {
    fn from(buf: Vec<u8>) -> LoadedBytes {
        let window = 0..buf.len();
        LoadedBytes { buf, window }
    }
}

impl std::ops::Deref for LoadedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[self.window.clone()]
    }
}

impl std::fmt::Debug for LoadedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LoadedBytes({} bytes)", self.window.len())
    }
}

impl PartialEq<Vec<u8>> for LoadedBytes {
    fn eq(&self, other: &Vec<u8>) -> bool {
        **self == other[..]
    }
}

/// A buffer read back from the tier.
pub(crate) struct TierRead {
    pub(crate) data: LoadedBytes,
    /// It was fed from the MFU list (for the ARC's ghost adaptation when
    /// its ghost is gone).
    pub(crate) mfu: bool,
    /// It comes back as a new block when memory has no ghost of it
    /// (`Builder::l2_readback_as_new`).
    pub(crate) as_new: bool,
}

/// How eviction accounts a live buffer it drops (OpenZFS's
/// `evict_l2_cached`, `evict_l2_eligible`, `evict_l2_ineligible`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EvictedCopy {
    /// The tier holds a copy.
    Cached,
    /// The tier could have held it but does not (its feed fell behind).
    Eligible,
    /// The tier would not take it (too big, or not of the list it feeds from).
    Ineligible,
}

/// The tier's figures, for `Stats`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TierFigures {
    pub(crate) hits: u64,
    pub(crate) part_hits: u64,
    pub(crate) misses: u64,
    pub(crate) size: u64,
    pub(crate) writes: u64,
    pub(crate) write_bytes: u64,
    pub(crate) evictions: u64,
    pub(crate) kept: u64,
    pub(crate) cksum_bad: u64,
    pub(crate) io_errors: u64,
    pub(crate) hdr_bytes: u64,
    pub(crate) ghost_bytes: u64,
    pub(crate) rebuild_blocks: u64,
    pub(crate) rebuild_ms: u64,
}

/// A second tier (see the module comment for when each call comes).
pub(crate) trait SecondTier<K>: Send + Sync {
    /// What the tier holds of `key`: a lookup in memory, never I/O.
    fn presence(&self, key: &K) -> Presence;

    /// `key`'s bytes were written anew or removed: drops its copy, in
    /// memory only (the caller holds the key's stripe lock). Returns true
    /// when the drop must still be made durable: the caller then calls
    /// [`SecondTier::persist_invalidations`] once that lock is dropped.
    fn invalidate(&self, key: &K) -> bool;

    /// Makes the invalidations so far durable (a restart must not bring
    /// back a dropped copy). May write to the device; no ARC lock is held.
    fn persist_invalidations(&self);

    /// `key`'s copy, read from the device and verified; `None` when the
    /// tier has none (or it failed to read or verify).
    fn read(&self, key: &K) -> Option<TierRead>;

    /// How eviction accounts a live buffer of `bytes` it drops from the MFU
    /// (`mfu`) or MRU list, whose presence in the tier was `presence`.
    fn classify_eviction(&self, presence: Presence, bytes: u64, mfu: bool) -> EvictedCopy;

    /// Inline eviction only: an insert of `size` bytes is about to make
    /// room; the tier may copy what eviction is about to drop first.
    fn before_room(&self, arc: &dyn ArcTails<K>, size: u64);

    /// Threaded eviction only: the evict thread is about to drop about
    /// `bytes` from the list tails; the tier may copy the buffers there
    /// that it could hold but has not copied yet, first (at most one
    /// batch: the pass, and the inserts waiting for it, wait that long at
    /// most). No ARC lock is held. `round`: how many times this pass has
    /// called already (the pass spares uncopied buffers and calls again;
    /// each round looks twice as far up the tails, up to the feed's
    /// reach).
    fn before_evict_pass(&self, arc: &dyn ArcTails<K>, bytes: u64, round: u32);

    /// The tier's figures for the statistics.
    fn figures(&self) -> TierFigures;
}

/// What a second tier's feed may see of the ARC: the keys near the list
/// tails (what eviction takes next) and, under a key's stripe lock, a live
/// buffer's bytes.
pub(crate) trait ArcTails<K>: Send + Sync {
    /// Sublists per list.
    fn sublists(&self) -> usize;

    /// A number of the cache's own pseudo-random sequence (`Builder::seed`),
    /// for where the feed's walk over the sublists starts.
    fn random(&self) -> u64;

    /// True when eviction would take from the MRU list now (ARC's REPLACE,
    /// as things stand).
    fn evicting_mru_first(&self) -> bool;

    /// The keys and hashes within `budget` bytes of the tail of sublist `i`
    /// of the MFU (`mfu`) or MRU list, tail first.
    fn tail_keys(&self, mfu: bool, i: usize, budget: u64) -> Vec<(K, u64)>;

    /// Runs `f` on the bytes of `key`'s live buffer and whether it is on
    /// the MFU list, under the key's stripe lock (shared), so that the
    /// buffer cannot go or change meanwhile. False when `key` has no live
    /// buffer.
    fn with_live(&self, key: &K, hash: u64, f: &mut dyn FnMut(&[u8], bool)) -> bool;

    /// Bytes evicted so far.
    fn evicted_bytes(&self) -> u64;

    /// Bytes eviction has dropped so far that the tier could have held
    /// but did not ([`EvictedCopy::Eligible`]).
    fn missed_bytes(&self) -> u64;

    /// The ARC's target size `c`.
    fn target_bytes(&self) -> u64;

    /// Bytes of data cached in memory now.
    fn data_bytes(&self) -> u64;
}
