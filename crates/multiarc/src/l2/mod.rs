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
//!   (in the gaps between the copies the hand keeps) followed by its log
//!   block.
//!
//! The feed (`feed.rs`) chooses *which* buffers to write, from the list
//! tails the ARC shows it (`arc::ArcTails`); the ARC sees the tier only
//! through `arc::SecondTier` (`second_tier.rs`).
//!
//! What the hand keeps (`plan`): a ring that overwrites whatever its hand
//! reaches keeps a FIFO of what memory evicted, about LRU, which loses to
//! ARC wherever frequency matters (measured: 6 points of hit ratio on the
//! CloudPhysics trace at 1% + 10%). So the tier runs ARC over its own
//! records (`history.rs`): T1 and T2, ghosts B1 and B2, a target p, with
//! the ring as the clock of CAR (ARC's clock form). When a batch is about
//! to overwrite copies, the hand judges those of the list over its target
//! as that list's clock would: one read back since it was written gets a
//! second chance (onto T2), one not read back is let go of; the other
//! list's copies are passed over as they are, reference bit and all (their
//! clock has not reached them).
//! A kept copy stays where it is: the batch's new buffers go into the
//! gaps between kept copies, and its log block describes the kept copies
//! again (older log blocks are cut off from the chain once the hand has
//! passed them). So keeping costs a log entry (32 bytes), not a write of
//! the copy: an earlier design that wrote kept copies again at the front of
//! the region paid 3.7x OpenZFS's device writes on P6 for a smaller
//! budget and a worse hit ratio (docs/history/l2-second-design.md). What it keeps is
//! bounded (`keep_ratio` bytes per new byte), so a batch's region, and
//! its log block, stay bounded too.
//!
//! Why it cannot return wrong bytes: every buffer's checksum is kept in
//! its header and checked on every read; a copy whose key was rewritten or
//! removed in memory is dropped first (`invalidate`, under the key's lock
//! in the cache, which a feed copying the old bytes also holds); a batch
//! marks its keys as being written (with their bytes' checksum) and turns
//! them into records only if they are still those copies when the write
//! is done (a key rewritten and added to the batch again keeps only its
//! newest bytes); a kept copy is not
//! written at all (it stays readable where it is), and the new log block
//! describes it only if its record is still that copy; what the hand is
//! about to overwrite leaves the index before the write, and the device
//! header names that region first, so a rebuild after a crash skips it. A
//! crash loses at most the batch being written, and the copies it was
//! keeping (their older log blocks are in the region). Across a
//! restart, a rewrite or removal holds too: its key is a tombstone in the
//! next log block (or in the last one, written at a clean stop), which
//! hides the key's entries in older blocks from the rebuild; until it is
//! on the device the header says dirty (written before the invalidation
//! returns), and a device found dirty (a crash in that window) starts
//! empty.
//!
//! Where the hand's overwrites are found: by a pass over the index
//! (`Index::records_in`), once per batch; at one batch a second that is a
//! few milliseconds for millions of records, and it needs no memory beyond
//! the records themselves (16 bytes each besides the key).

mod checksum;
mod device;
mod feed;
mod format;
mod history;
mod index;
mod second_tier;

pub(crate) use feed::{feed_once, FeedThread};

use crate::arc::{Key, Presence, TierFigures, TierRead};
use crate::lock::Mutex;
use device::{padded, units, AlignedBuf, Device, UNIT};
use format::{decode_log, encode_log, log_len, Header, HeaderProblem, LogPtr};
use history::{Ghost, History};
use index::{Index, Rec, MAX_LEN};
use std::collections::HashSet;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The second tier's tunables (`Builder::l2*`), with OpenZFS's names where
/// they fit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct L2Config {
    /// The device: a regular file (created if missing) or a block device.
    pub(crate) path: PathBuf,
    /// The bytes of the device the tier uses, header included.
    pub(crate) bytes: u64,
    /// `l2arc_write_max`: bytes written per feed (default 32 MiB).
    pub(crate) write_max: u64,
    /// `l2arc_headroom`: how far up the list tails a feed looks, as a
    /// multiple of `write_max` (default 8).
    pub(crate) headroom: u64,
    /// `l2arc_feed_secs`: the interval between feeds (default 1 s).
    pub(crate) feed_interval: Duration,
    /// `l2arc_feed_min_ms`: the interval when the last feed wrote more than
    /// half of `write_max` ("feed again", default 200 ms).
    pub(crate) feed_min_interval: Duration,
    /// `l2arc_mfuonly`: feed only buffers of the MFU list.
    pub(crate) mfu_only: bool,
    /// Bytes of copies the hand may keep (where they are) per byte of new
    /// buffers in a batch (default 32; 0: the hand lets go of everything
    /// it reaches, as OpenZFS's does).
    pub(crate) keep_ratio: u64,
    /// `l2arc_rebuild_enabled`: rebuild the index from the device on start.
    pub(crate) rebuild: bool,
    /// The cache identity written in the device header; a device with
    /// another identity is started empty.
    pub(crate) identity: u64,
    /// Open with `O_DIRECT` (default); false forces buffered I/O.
    pub(crate) direct: bool,
}

impl L2Config {
    /// A tier of `bytes` at `path` with OpenZFS's defaults for the rest (a
    /// `write_max` of 0 is resolved against the size by the builder).
    pub(crate) fn new(path: PathBuf, bytes: u64, write_max: u64) -> L2Config {
        L2Config {
            path,
            bytes,
            write_max,
            headroom: 8,
            feed_interval: Duration::from_secs(1),
            feed_min_interval: Duration::from_millis(200),
            mfu_only: false,
            keep_ratio: 32,
            rebuild: true,
            identity: 0,
            direct: true,
        }
    }

    /// These settings checked, with `write_max` 0 resolved to its default:
    /// an error names the setting and why.
    pub(crate) fn validated(&self) -> Result<L2Config, String> {
        let path = self.path.display();
        if self.bytes == 0 {
            return Err(format!("l2 size for {path} must be greater than 0"));
        }
        let mut l2 = self.clone();
        if l2.write_max == 0 {
            // The default: 32 MiB (OpenZFS's since its change 15457), or a
            // sixteenth of a small device (a device too small for it is
            // the tier's to refuse, by its size).
            l2.write_max = (32 << 20).min((l2.bytes / 16) / 4096 * 4096).max(4096);
        } else if l2.write_max > l2.bytes / 2 {
            return Err(format!(
                "l2_write_max ({}) must be at most half the l2 size ({})",
                l2.write_max,
                l2.bytes / 2
            ));
        }
        if l2.headroom == 0 || l2.headroom > 1024 {
            return Err(format!(
                "l2_headroom ({}) must be between 1 and 1024",
                l2.headroom
            ));
        }
        if l2.keep_ratio > 64 {
            return Err(format!(
                "l2_keep_ratio ({}) must be at most 64",
                l2.keep_ratio
            ));
        }
        if l2.feed_interval.is_zero() || l2.feed_min_interval.is_zero() {
            return Err("l2 feed intervals must be greater than 0".into());
        }
        if l2.feed_min_interval > l2.feed_interval {
            return Err(format!(
                "l2_feed_min_interval ({:?}) is longer than l2_feed_interval ({:?})",
                l2.feed_min_interval, l2.feed_interval
            ));
        }
        Ok(l2)
    }
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

/// Outcome of `Batch::add`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Added {
    /// Copied into the batch.
    Copied,
    /// The batch cannot take these bytes: the feed should stop.
    Full,
    /// The key is already on the device or being written.
    Present,
}

/// The ring's write state.
struct Ring {
    /// Where the next batch goes.
    hand: u64,
    /// The newest log block.
    newest: LogPtr,
    /// The hand has gone round at least once (or the device held data on
    /// start): an overwrite may meet records.
    wrapped: bool,
}

/// The header's changing fields, as last written.
#[derive(Default)]
struct Written {
    newest: LogPtr,
    trim: (u64, u64),
    dirty: bool,
}

/// The rebuild's state, for `wait_rebuild`.
struct Rebuild {
    running: AtomicBool,
    done: std::sync::Mutex<bool>,
    finished: Condvar,
    stop: AtomicBool,
    thread: std::sync::Mutex<Option<JoinHandle<()>>>,
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    writes: AtomicU64,
    write_bytes: AtomicU64,
    evictions: AtomicU64,
    kept: AtomicU64,
    cksum_bad: AtomicU64,
    io_errors: AtomicU64,
    rebuild_blocks: AtomicU64,
    rebuild_ms: AtomicU64,
}

/// The device and its index.
pub(crate) struct Tier<K> {
    config: L2Config,
    codec: KeyCodec<K>,
    device: Device,
    index: Index<K>,
    /// The tier's ghosts and T1 target (taken after an index stripe, or
    /// alone).
    history: Mutex<History>,
    ring: Mutex<Ring>,
    /// What the header on the device says, and the lock it is written
    /// under (taken after `ring`, or alone).
    header: Mutex<Written>,
    /// Keys rewritten or removed in memory whose older log entries no
    /// tombstone on the device hides yet (taken after `header`, or alone).
    pending: Mutex<HashSet<K, foldhash::fast::RandomState>>,
    /// The header on the device says dirty (`pending` was not empty when
    /// it was last written, or has been since).
    dirty: AtomicBool,
    /// The most tombstones one log block carries.
    max_tombstones: usize,
    ring_start: u64,
    ring_end: u64,
    next_batch: AtomicU32,
    rebuild: Rebuild,
    counters: Counters,
    /// Inline eviction: bytes inserted since the last (synchronous) feed.
    unfed: AtomicU64,
}

/// One feed's buffers, copied.
pub(crate) struct Batch<'a, K: Key> {
    tier: &'a Tier<K>,
    id: u32,
    /// The buffers, each at a unit boundary.
    buf: AlignedBuf,
    /// Bytes of buffers (padded).
    used: u64,
    entries: Vec<BatchEntry<K>>,
}

struct BatchEntry<K> {
    key: K,
    /// Offset in the batch.
    at: u64,
    len: u32,
    mfu: bool,
    /// On the tier's T2.
    t2: bool,
    cksum: u64,
}

impl<K> BatchEntry<K> {
    /// The device bytes it takes: its length in whole units.
    fn padded(&self) -> u64 {
        padded(self.len as u64)
    }
}

fn bad_config(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what)
}

impl<K: Key> Tier<K> {
    /// Opens (creating a missing regular file of `config.bytes`),
    /// takes an exclusive lock on it, and starts the rebuild of the index
    /// in the background when the header is valid and matches. Errors
    /// (one clear line, naming the path): unwritable path, device too
    /// small for one log block, `bytes` above the free space or the block
    /// device's size, the device locked by another cache.
    pub(crate) fn open(config: L2Config, codec: KeyCodec<K>) -> io::Result<Arc<Tier<K>>> {
        let path = config.path.display().to_string();
        let ring_start = UNIT;
        let ring_end = config.bytes / UNIT * UNIT;
        let max_log = log_len((config.write_max / UNIT).max(1) as usize, 0, codec.len);
        let min = ring_start + UNIT + log_len(1, 0, codec.len);
        if config.bytes < min {
            return Err(bad_config(format!(
                "l2 device {path}: {} bytes is too small: it needs at least {min} (a header, one log block and one block)",
                config.bytes
            )));
        }
        if units(config.write_max) + max_log > ring_end - ring_start {
            return Err(bad_config(format!(
                "l2 device {path}: {} bytes is too small for a batch of l2_write_max ({} bytes) and its log block",
                config.bytes, config.write_max
            )));
        }
        if ring_end / UNIT > u32::MAX as u64 {
            return Err(bad_config(format!(
                "l2 device {path}: {} bytes is above the largest device, 16 TiB",
                config.bytes
            )));
        }
        let device = Device::open(&config.path, config.bytes, config.direct)?;
        let mut head = AlignedBuf::zeroed(UNIT as usize);
        device.read_at(&mut head, 0).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("l2 device {path}: cannot read its header: {e}"),
            )
        })?;
        let found = Header::decode(head.bytes());
        let usable = match found {
            Ok(h) if h.identity != config.identity => Err(format!(
                "written by another cache (identity {}, this one {})",
                h.identity, config.identity
            )),
            Ok(h) if h.device_bytes != config.bytes => Err(format!(
                "written as a device of {} bytes, now {}",
                h.device_bytes, config.bytes
            )),
            Ok(h) if h.key_len as usize != codec.len => Err(format!(
                "written with {}-byte keys, these are {} bytes",
                h.key_len, codec.len
            )),
            Ok(_) if !config.rebuild => Err("l2_rebuild is off".to_string()),
            Ok(h) if h.dirty => Err(
                "its last run stopped before it wrote down which copies rewrites or removals made stale (a crash?)"
                    .to_string(),
            ),
            Ok(h) if h.newest.is_none() => Err(String::new()),
            Ok(h) => Ok(h),
            Err(HeaderProblem::Blank) => Err(String::new()),
            Err(HeaderProblem::Unreadable) => Err("its header is unreadable".to_string()),
            Err(HeaderProblem::Version(v)) => Err(format!(
                "its header is of format version {v}, this is {}",
                format::VERSION
            )),
        };
        let (ring, header) = match &usable {
            Ok(h) => (
                Ring {
                    hand: h.newest.offset + h.newest.len as u64,
                    newest: h.newest,
                    wrapped: true,
                },
                Some(*h),
            ),
            Err(why) => {
                if !why.is_empty() {
                    log::warn!("l2 device {path}: {why}, starting empty");
                }
                (
                    Ring {
                        hand: ring_start,
                        newest: LogPtr::default(),
                        wrapped: false,
                    },
                    None,
                )
            }
        };
        // What is left of the ring beside a full batch, in keys (a unit
        // spare for the rounding), and at most 64 Ki.
        let max_tombstones = ((ring_end - ring_start)
            .saturating_sub(units(config.write_max) + max_log + UNIT)
            / codec.len.max(1) as u64)
            .min(1 << 16) as usize;
        let tier = Arc::new(Tier {
            codec,
            device,
            index: Index::new(),
            history: Mutex::new(History::default()),
            header: Mutex::new(Written {
                newest: ring.newest,
                trim: header.map_or((0, 0), |h| h.trim),
                dirty: false,
            }),
            ring: Mutex::new(ring),
            pending: Mutex::new(HashSet::default()),
            dirty: AtomicBool::new(false),
            max_tombstones,
            ring_start,
            ring_end,
            next_batch: AtomicU32::new(1),
            rebuild: Rebuild {
                running: AtomicBool::new(header.is_some()),
                done: std::sync::Mutex::new(header.is_none()),
                finished: Condvar::new(),
                stop: AtomicBool::new(false),
                thread: std::sync::Mutex::new(None),
            },
            counters: Counters::default(),
            unfed: AtomicU64::new(0),
            config,
        });
        match header {
            None => {
                // A fresh header: older log blocks are unreachable from it.
                let h = tier.header.lock();
                tier.write_header(&h).map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("l2 device {path}: cannot write its header: {e}"),
                    )
                })?;
            }
            Some(h) => {
                tier.index.set_rebuilding(true);
                let t = Arc::clone(&tier);
                let handle = std::thread::Builder::new()
                    .name("multiarc-l2-rebuild".into())
                    .spawn(move || t.rebuild_from(h))
                    .map_err(|e| {
                        io::Error::new(
                            e.kind(),
                            format!("l2 device {path}: cannot start its rebuild: {e}"),
                        )
                    })?;
                *crate::mem::sync::unpoisoned(tier.rebuild.thread.lock()) = Some(handle);
            }
        }
        Ok(tier)
    }

    pub(crate) fn config(&self) -> &L2Config {
        &self.config
    }

    /// Writes the header as `h` says (the caller holds `header`).
    fn write_header(&self, h: &Written) -> io::Result<()> {
        let mut b = AlignedBuf::zeroed(UNIT as usize);
        Header {
            identity: self.config.identity,
            device_bytes: self.config.bytes,
            key_len: self.codec.len as u32,
            newest: h.newest,
            trim: h.trim,
            dirty: h.dirty,
        }
        .encode(b.bytes_mut());
        self.device.write_at(&b, 0)
    }

    /// The rebuild thread: walks the log blocks back from the header's
    /// newest, restoring records newest first.
    fn rebuild_from(&self, h: Header) {
        let started = Instant::now();
        let ring_len = self.ring_end - self.ring_start;
        let top = h.newest.offset + h.newest.len as u64;
        // How far back from the newest data's end `x` is, in (0, ring_len].
        let back = |x: u64| ((top + ring_len - x - 1) % ring_len) + 1;
        let mut ptr = h.newest;
        let mut covered = 0u64;
        let mut blocks = 0u64;
        while !ptr.is_none() && !self.rebuild.stop.load(Ordering::Relaxed) {
            let log_end = ptr.offset + ptr.len as u64;
            if ptr.offset < self.ring_start
                || log_end > self.ring_end
                || !(ptr.len as u64).is_multiple_of(UNIT)
            {
                break;
            }
            let mut b = AlignedBuf::zeroed(ptr.len as usize);
            if self.device.read_at(&mut b, ptr.offset).is_err() {
                self.counters.io_errors.fetch_add(1, Ordering::Relaxed);
                break;
            }
            blocks += 1;
            let Some(log) = decode_log(b.bytes(), &ptr, self.codec.len) else {
                break;
            };
            // Its batch, [start, log_end): intact, not under the trim, and
            // older than everything walked so far.
            if log.start < self.ring_start || log.start > ptr.offset {
                break;
            }
            let (lo, hi) = (log.start, log_end);
            if lo < h.trim.1 && h.trim.0 < hi {
                break;
            }
            let span = back(lo);
            if span <= covered {
                break;
            }
            covered = span;
            for e in &log.entries {
                let end = e.offset + padded(e.len as u64);
                if e.offset < lo
                    || end > ptr.offset
                    || e.offset % UNIT != 0
                    || e.len as u64 > MAX_LEN
                {
                    continue;
                }
                let key = (self.codec.decode)(&e.key);
                let rec = Rec::cached((e.offset / UNIT) as u32, e.len, e.mfu, e.t2, e.cksum);
                self.index.restore(key, rec);
            }
            // Older blocks' entries of these keys are stale.
            for t in &log.tombstones {
                self.index.tombstone((self.codec.decode)(t));
            }
            if log.generation == 0 || log.prev.generation + 1 != log.generation {
                break;
            }
            ptr = log.prev;
        }
        self.counters
            .rebuild_blocks
            .store(blocks, Ordering::Relaxed);
        self.counters
            .rebuild_ms
            .store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
        self.index.set_rebuilding(false);
        self.rebuild.running.store(false, Ordering::Release);
        *crate::mem::sync::unpoisoned(self.rebuild.done.lock()) = true;
        self.rebuild.finished.notify_all();
    }

    /// A lookup in the index only (no I/O).
    pub(crate) fn presence(&self, key: &K) -> Presence {
        match self.index.get(key) {
            None => Presence::Absent,
            Some(r) if r.is_writing() => Presence::Writing,
            Some(_) => Presence::Cached,
        }
    }

    /// Reads `key`'s copy and verifies it: `None` when it is not on the
    /// device, or the read failed or did not verify (then counted, and the
    /// header dropped). Counts `hits`/`misses`.
    pub(crate) fn read(&self, key: &K) -> Option<TierRead> {
        let c = &self.counters;
        let Some(rec) = self.index.get(key).filter(|r| !r.is_writing()) else {
            c.misses.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let len = rec.len() as usize;
        let mut b = AlignedBuf::zeroed(padded(len as u64) as usize);
        let outcome = self.device.read_at(&mut b, rec.unit() as u64 * UNIT);
        let verified = outcome.is_ok() && checksum::checksum(&b.bytes()[..len]) == rec.cksum();
        if !verified {
            // Still the record we read by? Then its copy is bad: drop it.
            // If the hand took it meanwhile, this was a plain miss.
            if self.index.remove_if(key, &rec) {
                if outcome.is_err() {
                    c.io_errors.fetch_add(1, Ordering::Relaxed);
                } else {
                    c.cksum_bad.fetch_add(1, Ordering::Relaxed);
                }
            }
            c.misses.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        c.hits.fetch_add(1, Ordering::Relaxed);
        self.index.reference(key, &rec);
        Some(TierRead {
            data: b.bytes()[..len].to_vec(),
            mfu: rec.mfu(),
        })
    }

    /// Forgets `key`'s copy (its buffer was written anew or removed), in
    /// memory. Also keeps a rebuild still running from bringing back an
    /// older copy, and a rebuild after a restart: the key goes into the
    /// next log block as a tombstone, and until then the header must say
    /// dirty, so that a crash before that block starts the tier empty
    /// instead of bringing the old copy back. Returns true when the header
    /// does not say so yet: the caller then calls
    /// [`Tier::persist_invalidations`] (device I/O) before it returns, once
    /// it holds no lock of the cache.
    pub(crate) fn invalidate(&self, key: &K) -> bool {
        let had = self.index.invalidate(key).is_some();
        if !had && !self.rebuilding() {
            return false;
        }
        let mut p = self.pending.lock();
        p.insert(key.clone());
        !self.dirty.load(Ordering::Acquire)
    }

    /// Writes the header as dirty if tombstones are waiting and it does
    /// not say so yet.
    pub(crate) fn persist_invalidations(&self) {
        // Only the header's own lock: a batch being written (which holds
        // `ring` for its I/O) does not hold this up for long.
        let mut h = self.header.lock();
        let p = self.pending.lock();
        if !self.dirty.load(Ordering::Acquire) && !p.is_empty() {
            h.dirty = true;
            match self.write_header(&h) {
                Ok(()) => self.dirty.store(true, Ordering::Release),
                Err(_) => {
                    self.counters.io_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Keys waiting to be written down as tombstones.
    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.lock().is_empty()
    }

    /// True while the index is being rebuilt (the feed waits).
    pub(crate) fn rebuilding(&self) -> bool {
        self.rebuild.running.load(Ordering::Acquire)
    }

    /// Blocks until the rebuild (if any) is over.
    pub(crate) fn wait_rebuild(&self) {
        let mut done = crate::mem::sync::unpoisoned(self.rebuild.done.lock());
        while !*done {
            done = crate::mem::sync::unpoisoned(self.rebuild.finished.wait(done));
        }
    }

    /// An empty batch.
    pub(crate) fn batch(&self) -> Batch<'_, K> {
        Batch {
            tier: self,
            id: self.next_batch.fetch_add(1, Ordering::Relaxed),
            buf: AlignedBuf::zeroed(units(self.config.write_max) as usize),
            used: 0,
            entries: Vec::new(),
        }
    }

    pub(crate) fn figures(&self) -> TierFigures {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        TierFigures {
            hits: get(&c.hits),
            misses: get(&c.misses),
            size: self.index.data_bytes(),
            writes: get(&c.writes),
            write_bytes: get(&c.write_bytes),
            evictions: get(&c.evictions),
            kept: get(&c.kept),
            cksum_bad: get(&c.cksum_bad),
            io_errors: get(&c.io_errors),
            hdr_bytes: self.index.memory(),
            ghost_bytes: self.history.lock().memory(),
            rebuild_blocks: get(&c.rebuild_blocks),
            rebuild_ms: get(&c.rebuild_ms),
        }
    }

    /// Stops the rebuild thread and writes the tombstones still waiting
    /// (the header is then clean); the device stays as it is otherwise (the
    /// next open rebuilds from it). If they cannot be written, the header
    /// stays dirty and the next open starts empty.
    pub(crate) fn shutdown(&self) {
        self.rebuild.stop.store(true, Ordering::Relaxed);
        let handle = crate::mem::sync::unpoisoned(self.rebuild.thread.lock()).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
        while self.max_tombstones > 0 && self.has_pending() {
            if self.batch().commit_now().is_err() {
                break;
            }
        }
    }

    /// Makes every device read (`reads`) or write (`writes`) fail with EIO
    /// until called again (`Cache::l2_inject_faults`, with the `test-util` feature).
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn set_faults(&self, reads: bool, writes: bool) {
        self.device.faults.reads.store(reads, Ordering::Relaxed);
        self.device.faults.writes.store(writes, Ordering::Relaxed);
    }

    /// Records in the index (tests).
    #[cfg(all(test, not(loom)))]
    fn records(&self) -> usize {
        self.index.len()
    }

    /// What a batch of `batch`'s new buffers at `start` overwrites, with at
    /// most `budget` bytes of copies kept where they are: see `Plan`. Pure:
    /// the caller acts on it.
    fn plan(
        &self,
        ring: &Ring,
        start: u64,
        batch: &Batch<'_, K>,
        budget: u64,
        tombstones: usize,
    ) -> Plan<K> {
        let key_len = self.codec.len;
        let (n, t) = (batch.entries.len(), tombstones);
        let sizes: Vec<u64> = batch.entries.iter().map(|e| e.padded()).collect();
        if !ring.wrapped {
            // Nothing in the way: the buffers in a row.
            return self.plan_over(start, &sizes, Vec::new(), budget, t);
        }
        let largest = sizes.iter().copied().max().unwrap_or(UNIT);
        // Far enough for the new buffers, the kept copies, the gaps too
        // small for the next buffer (one per kept copy at most) and the
        // log block; looked further if that was not enough.
        let mut reach = start
            + batch.used
            + budget
            + (budget / UNIT + 1) * largest
            + log_len(n + (budget / UNIT) as usize, t, key_len);
        loop {
            let end = reach.min(self.ring_end);
            let candidates = self.index.records_in(start / UNIT, end.div_ceil(UNIT));
            let plan = self.plan_over(start, &sizes, candidates, budget, t);
            if start + plan.total <= end || end == self.ring_end {
                return plan;
            }
            reach = reach.saturating_mul(2);
        }
    }

    /// `plan` over the records met from `start`, in device order.
    fn plan_over(
        &self,
        start: u64,
        sizes: &[u64],
        candidates: Vec<(K, Rec)>,
        budget: u64,
        t: usize,
    ) -> Plan<K> {
        let key_len = self.codec.len;
        let n = sizes.len();
        let (mut t1, mut t2) = self.index.list_bytes();
        let p = self.history.lock().p();
        let mut plan = Plan {
            total: 0,
            log_at: 0,
            placed: Vec::with_capacity(n),
            dropped: Vec::new(),
            kept: Vec::new(),
        };
        let mut kept_bytes = 0;
        let mut cursor = start;
        for (key, rec) in candidates {
            let at = rec.unit() as u64 * UNIT;
            // The gap before it takes the next new buffers that fit.
            while plan.placed.len() < n && cursor + sizes[plan.placed.len()] <= at {
                plan.placed.push(cursor);
                cursor += sizes[plan.placed.len() - 1];
            }
            let log = log_len(n + plan.kept.len(), t, key_len);
            if plan.placed.len() == n && cursor + log <= at {
                break;
            }
            // In the way. ARC's replacement, as CAR's two clocks: the list
            // over its target (T1 when it holds more than p, or T2 is
            // empty) is the one judged. A judged copy read back since it
            // was written gets its second chance (onto T2, its bit
            // cleared); one not read back is let go of. The other list's
            // copies are only passed over, reference bit and all (their
            // own clock has not reached them). Kept copies stay where they
            // are, described again by the new log block, while the budget
            // lasts.
            let padded = rec.device_bytes();
            let shrink_t1 = t1 > p || t2 == 0;
            let judged = rec.t2() != shrink_t1;
            let keep = kept_bytes + padded <= budget && (!judged || rec.referenced());
            if keep {
                kept_bytes += padded;
                if judged && !rec.t2() {
                    t1 = t1.saturating_sub(padded);
                    t2 += padded;
                }
                cursor = cursor.max(rec.end() * UNIT);
                plan.kept.push((key, rec, judged));
            } else {
                if rec.t2() {
                    t2 = t2.saturating_sub(padded);
                } else {
                    t1 = t1.saturating_sub(padded);
                }
                plan.dropped.push((key, rec));
            }
        }
        // Past the last record met: the rest in a row.
        while plan.placed.len() < n {
            plan.placed.push(cursor);
            cursor += sizes[plan.placed.len() - 1];
        }
        plan.log_at = cursor;
        plan.total = cursor + log_len(n + plan.kept.len(), t, key_len) - start;
        plan
    }

    /// Writes `batch` at the hand: see `Batch::commit`.
    fn commit(&self, batch: &mut Batch<'_, K>) -> io::Result<usize> {
        let key_len = self.codec.len;
        let ring_len = self.ring_end - self.ring_start;
        let mut ring = self.ring.lock();
        // The tombstones this log block carries.
        let tombstones: Vec<K> = {
            let mut p = self.pending.lock();
            let some: Vec<K> = p.iter().take(self.max_tombstones).cloned().collect();
            for k in &some {
                p.remove(k);
            }
            some
        };
        if batch.entries.is_empty() && tombstones.is_empty() {
            return Ok(0);
        }
        let t = tombstones.len();
        let budget = batch
            .used
            .saturating_mul(self.config.keep_ratio)
            .min(ring_len / 4);
        let mut plan = self.plan(&ring, ring.hand, batch, budget, t);
        if ring.hand + plan.total > self.ring_end {
            ring.hand = self.ring_start;
            ring.wrapped = true;
            plan = self.plan(&ring, ring.hand, batch, budget, t);
            if ring.hand + plan.total > self.ring_end {
                // A batch near the ring's size: nothing is kept.
                plan = self.plan(&ring, ring.hand, batch, 0, t);
            }
        }
        let start = ring.hand;
        let planned = plan.total;
        // 1. What the hand lets go of leaves the index (and goes to the
        //    history); what it keeps takes its new place on the tier's
        //    lists; the header names the region before anything is
        //    written there.
        for (key, rec) in &plan.dropped {
            if self.index.remove_if(key, rec) {
                self.counters.evictions.fetch_add(1, Ordering::Relaxed);
                let ghost = if rec.t2() { Ghost::B2 } else { Ghost::B1 };
                let fp = self.index.fingerprint(key);
                let t = self.index.list_bytes();
                self.history
                    .lock()
                    .remember(fp, rec.device_bytes(), ghost, t, ring_len);
            }
        }
        let mut kept = Vec::with_capacity(plan.kept.len());
        for (key, rec, judged) in plan.kept.drain(..) {
            let t2 = rec.t2() || judged;
            let referenced = rec.referenced() && !judged;
            if let Some(now) = self.index.keep(&key, &rec, t2, referenced) {
                kept.push((key, now));
            }
        }
        // The previous newest log block may lie in the region: then the
        // chain ends here, and the new block must not point into it.
        let prev = if ring.newest.offset < start + planned
            && start < ring.newest.offset + ring.newest.len as u64
        {
            LogPtr::default()
        } else {
            ring.newest
        };
        let named = {
            let mut h = self.header.lock();
            h.trim = (start, start + planned);
            self.write_header(&h)
        };
        let result = named.and_then(|()| {
            // 2. The new buffers, into the gaps between the kept copies
            //    (each run of them in one write, straight from the
            //    batch), then the log block after them all.
            let mut i = 0;
            while i < batch.entries.len() {
                let first = i;
                let mut len = batch.entries[i].padded();
                while i + 1 < batch.entries.len()
                    && plan.placed[i + 1] == plan.placed[i] + batch.entries[i].padded()
                {
                    i += 1;
                    len += batch.entries[i].padded();
                }
                let from = batch.entries[first].at as usize;
                self.device
                    .write_range(&batch.buf, from, len as usize, plan.placed[first])?;
                i += 1;
            }
            let log_at = plan.log_at;
            let encode = |k: &K| {
                let mut key = vec![0u8; key_len];
                (self.codec.encode)(k, &mut key);
                key
            };
            // Only what is still this batch's, or still the kept record:
            // a key rewritten or removed since is not described (one
            // invalidated from here on is a tombstone of the next).
            let new = batch
                .entries
                .iter()
                .zip(&plan.placed)
                .filter(|(e, _)| self.index.writing_in(&e.key, batch.id, e.cksum))
                .map(|(e, &at)| (encode(&e.key), at, e.len, e.mfu, e.t2, e.cksum));
            let still = kept
                .iter()
                .filter(|(k, r)| self.index.get(k).is_some_and(|now| now.same_copy(r)))
                .map(|(k, r)| {
                    let at = r.unit() as u64 * UNIT;
                    (encode(k), at, r.len(), r.mfu(), r.t2(), r.cksum())
                });
            let described: Vec<_> = new.chain(still).collect();
            let tombs: Vec<Vec<u8>> = tombstones.iter().map(encode).collect();
            let log_bytes = log_len(described.len(), tombs.len(), key_len);
            let generation = ring.newest.generation + 1;
            let mut log = AlignedBuf::zeroed(log_bytes as usize);
            let cksum = encode_log(
                log.bytes_mut(),
                generation,
                &prev,
                start,
                key_len,
                described.into_iter(),
                &tombs,
            );
            self.device.write_at(&log, log_at)?;
            // 3. The header points at the new log block.
            ring.newest = LogPtr {
                offset: log_at,
                len: log_bytes as u32,
                cksum,
                generation,
            };
            ring.hand = log_at + log_bytes;
            // Clean again if nothing waits; under `pending`, so that an
            // invalidation meanwhile either waits or sees it clean.
            let mut h = self.header.lock();
            let p = self.pending.lock();
            h.newest = ring.newest;
            h.trim = (0, 0);
            h.dirty = !p.is_empty();
            self.write_header(&h)?;
            self.dirty.store(h.dirty, Ordering::Release);
            Ok(log_bytes)
        });
        drop(ring);
        let log_bytes = match result {
            Ok(log_bytes) => log_bytes,
            Err(e) => {
                self.pending.lock().extend(tombstones);
                self.counters.io_errors.fetch_add(1, Ordering::Relaxed);
                return Err(e);
            }
        };
        let mut written = 0;
        for (e, at) in batch.entries.drain(..).zip(plan.placed) {
            let unit = (at / UNIT) as u32;
            if self.index.finish_write(&e.key, batch.id, unit, e.cksum) {
                written += 1;
            }
        }
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        self.counters
            .write_bytes
            .fetch_add(batch.used + log_bytes, Ordering::Relaxed);
        self.counters
            .kept
            .fetch_add(kept.len() as u64, Ordering::Relaxed);
        Ok(written)
    }
}

/// What one batch overwrites: the region `[hand, hand + total)` holds the
/// copies the hand keeps (where they are), the new buffers in the gaps
/// between them (at `placed`, in batch order) and the log block (at
/// `log_at`, after everything else); every record meeting it is either
/// `dropped` or `kept`.
struct Plan<K> {
    total: u64,
    log_at: u64,
    placed: Vec<u64>,
    dropped: Vec<(K, Rec)>,
    /// Kept copies, and whether the hand judged them (then they go onto
    /// T2 with their reference bit cleared) or only passed them over.
    kept: Vec<(K, Rec, bool)>,
}

impl<K: Key> Batch<'_, K> {
    /// Copies `data` for `key` into the batch and marks `key` `Writing`.
    /// The caller holds `key`'s hash-stripe lock, under which `invalidate`
    /// of `key` also runs, so a copy of stale bytes cannot be recorded.
    pub(crate) fn add(&mut self, key: &K, data: &[u8], mfu: bool) -> Added {
        let size = padded(data.len() as u64);
        if data.len() as u64 > MAX_LEN || self.used + size > units(self.tier.config.write_max) {
            return Added::Full;
        }
        // A key already there costs no checksum (`begin_write` checks again
        // under its lock).
        let tier = self.tier;
        if tier.index.get(key).is_some() {
            return Added::Present;
        }
        // A key the tier's history remembers goes onto T2 (and moves p).
        // The record being written carries the bytes' checksum: a key
        // invalidated after it joined this batch may join it again with
        // newer bytes, and only that copy may become its record.
        let cksum = checksum::checksum(data);
        let fp = tier.index.fingerprint(key);
        let capacity = tier.ring_end - tier.ring_start;
        let on_t2 = || tier.history.lock().take(fp, size, capacity).is_some();
        let Some(t2) = tier
            .index
            .begin_write(key, self.id, data.len() as u32, mfu, cksum, on_t2)
        else {
            return Added::Present;
        };
        let at = self.used;
        self.buf.bytes_mut()[at as usize..at as usize + data.len()].copy_from_slice(data);
        self.entries.push(BatchEntry {
            key: key.clone(),
            at,
            len: data.len() as u32,
            mfu,
            t2,
            cksum,
        });
        self.used += size;
        Added::Copied
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes of buffers in the batch, padded to the device's units.
    pub(crate) fn bytes(&self) -> u64 {
        self.used
    }

    /// Writes the batch at the hand (after invalidating what it overwrites)
    /// and its log block, then the device header; the keys become `Cached`.
    /// On an error, they become `Absent` again. Returns buffers written.
    /// While the tier rebuilds its index, writes nothing (returns 0).
    pub(crate) fn commit(self) -> io::Result<usize> {
        if self.tier.rebuilding() {
            return Ok(0);
        }
        self.commit_now()
    }

    /// `commit` without the rebuild's check (the rebuild is stopped).
    fn commit_now(mut self) -> io::Result<usize> {
        let tier = self.tier;
        tier.commit(&mut self)
    }
}

impl<K: Key> Drop for Batch<'_, K> {
    fn drop(&mut self) {
        // Not written (dropped, failed, or refused during a rebuild).
        for e in self.entries.drain(..) {
            self.tier.index.abort_write(&e.key, self.id);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::path::Path;

    fn codec() -> KeyCodec<u64> {
        KeyCodec {
            len: 8,
            encode: |k, out| out[..8].copy_from_slice(&k.to_le_bytes()),
            decode: |b| u64::from_le_bytes(b[..8].try_into().unwrap()),
        }
    }

    fn config(path: &Path, bytes: u64, write_max: u64) -> L2Config {
        L2Config::new(path.to_path_buf(), bytes, write_max)
    }

    /// A fresh path on the disk (the crate's target directory).
    fn path(name: &str) -> PathBuf {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/l2-unit-tests");
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        let _ = std::fs::remove_file(&p);
        p
    }

    fn data(key: u64, len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (key as usize * 131 + i * 7) as u8)
            .collect()
    }

    fn write(tier: &Tier<u64>, keys: impl Iterator<Item = (u64, usize)>) -> usize {
        let mut b = tier.batch();
        for (k, len) in keys {
            assert_eq!(b.add(&k, &data(k, len), k % 2 == 0), Added::Copied);
        }
        b.commit().unwrap()
    }

    #[test]
    fn a_batch_roundtrips_mixed_sizes() {
        let p = path("roundtrip");
        let tier = Tier::open(config(&p, 4 << 20, 512 << 10), codec()).unwrap();
        let sizes = [1usize, 4096, 8192, 100_000, 4095, 4097];
        let mut b = tier.batch();
        for (k, &len) in sizes.iter().enumerate() {
            assert_eq!(
                b.add(&(k as u64), &data(k as u64, len), true),
                Added::Copied
            );
            assert_eq!(tier.presence(&(k as u64)), Presence::Writing);
        }
        assert_eq!(b.add(&0, &data(0, 1), true), Added::Present);
        assert_eq!(b.commit().unwrap(), sizes.len());
        for (k, &len) in sizes.iter().enumerate() {
            assert_eq!(tier.presence(&(k as u64)), Presence::Cached);
            let r = tier.read(&(k as u64)).expect("on the device");
            assert_eq!(r.data, data(k as u64, len));
            assert!(r.mfu);
        }
        assert!(tier.read(&99).is_none());
        let f = tier.figures();
        assert_eq!((f.hits, f.misses, f.writes), (6, 1, 1));
        assert_eq!(f.size, sizes.iter().sum::<usize>() as u64);
        // A batch dropped unwritten leaves nothing behind.
        let mut b = tier.batch();
        assert_eq!(b.add(&50, &data(50, 10), false), Added::Copied);
        drop(b);
        assert_eq!(tier.presence(&50), Presence::Absent);
        // Invalidated while being written: never becomes a record.
        let mut b = tier.batch();
        assert_eq!(b.add(&51, &data(51, 10), false), Added::Copied);
        tier.invalidate(&51);
        assert_eq!(b.commit().unwrap(), 0);
        assert_eq!(tier.presence(&51), Presence::Absent);
        // A full batch says so.
        let mut b = tier.batch();
        assert_eq!(b.add(&60, &data(60, 600 << 10), false), Added::Full);
    }

    #[test]
    fn the_ring_wraps_and_never_returns_wrong_bytes() {
        let p = path("wrap");
        let tier = Tier::open(config(&p, 1 << 20, 64 << 10), codec()).unwrap();
        let mut model: HashMap<u64, usize> = HashMap::new();
        let mut k = 0u64;
        for round in 0..200 {
            let mut b = tier.batch();
            loop {
                let len = 1 + (k as usize * 977) % 9000;
                match b.add(&k, &data(k, len), false) {
                    Added::Copied => {
                        model.insert(k, len);
                        k += 1;
                    }
                    Added::Full => break,
                    Added::Present => unreachable!(),
                }
            }
            b.commit().unwrap();
            // No two copies share a unit, and all lie in the ring (the
            // new buffers go into the gaps between kept copies).
            let recs = tier.index.records_in(0, u64::MAX);
            for w in recs.windows(2) {
                assert!(w[0].1.end() <= w[1].1.unit() as u64, "overlap: {w:?}");
            }
            assert!(recs
                .iter()
                .all(|(_, r)| r.unit() as u64 * UNIT >= tier.ring_start
                    && r.end() * UNIT <= tier.ring_end));
            // Every read equals what was written for its key; reading some
            // (a third, then all) sets reference bits for the hand to keep.
            for (&key, &len) in &model {
                if round % 7 == 0 || key % 3 == round % 3 {
                    if let Some(r) = tier.read(&key) {
                        assert_eq!(r.data, data(key, len), "key {key}");
                    }
                }
            }
        }
        assert!(tier.figures().kept > 0, "the hand kept copies");
        let f = tier.figures();
        assert!(f.evictions > 0 && f.size <= 1 << 20, "{f:?}");
        assert_eq!(f.cksum_bad + f.io_errors, 0, "{f:?}");
        assert!(tier.records() > 50);
    }

    /// A key invalidated after it joined a batch can join the same batch
    /// again with its new bytes (the feed meets it at the MRU tail, then,
    /// rewritten, at the MFU tail): the batch's older copy must not become
    /// its record, on the device or after a restart.
    #[test]
    fn a_key_rewritten_into_the_same_batch_keeps_only_its_newest_bytes() {
        let p = path("same-batch");
        let c = config(&p, 1 << 20, 64 << 10);
        let tier = Tier::open(c.clone(), codec()).unwrap();
        let mut b = tier.batch();
        assert_eq!(b.add(&7, &data(7, 100), false), Added::Copied);
        tier.invalidate(&7);
        let mut newer = data(7, 100);
        newer[0] ^= 0xff;
        assert_eq!(b.add(&7, &newer, true), Added::Copied);
        b.commit().unwrap();
        assert_eq!(tier.read(&7).expect("cached").data, newer);
        tier.shutdown();
        drop(tier);
        let tier = Tier::open(c, codec()).unwrap();
        tier.wait_rebuild();
        if let Some(r) = tier.read(&7) {
            assert_eq!(r.data, newer, "after a restart");
        }
    }

    #[test]
    fn a_restart_finds_the_records_again() {
        let p = path("restart");
        let n;
        {
            let tier = Tier::open(config(&p, 4 << 20, 256 << 10), codec()).unwrap();
            for i in 0..10 {
                write(&tier, (i * 20..i * 20 + 20).map(|k| (k, 8192)));
            }
            n = tier.records();
            tier.shutdown();
        }
        let tier = Tier::open(config(&p, 4 << 20, 256 << 10), codec()).unwrap();
        tier.wait_rebuild();
        assert!(tier.records() * 100 >= n * 95, "{} of {n}", tier.records());
        for k in 0..200 {
            assert_eq!(tier.read(&k).expect("found again").data, data(k, 8192));
        }
        assert_eq!(tier.figures().rebuild_blocks, 10);
        // Another identity, size or key length: empty.
        drop(tier);
        let other = L2Config {
            identity: 9,
            ..config(&p, 4 << 20, 256 << 10)
        };
        let tier = Tier::open(other, codec()).unwrap();
        tier.wait_rebuild();
        assert_eq!(tier.records(), 0);
    }

    #[test]
    fn a_crash_between_the_writes_of_a_batch_loses_only_that_batch() {
        // Commit writes the header (naming the region), the batch, the
        // header again: fail each in turn, as a crash there would leave it.
        for failing in 1..=3u64 {
            let p = path(&format!("torn-{failing}"));
            let c = config(&p, 1 << 20, 64 << 10);
            {
                let tier = Tier::open(c.clone(), codec()).unwrap();
                // Fill the ring once, so the torn batch overwrites data.
                for i in 0..20u64 {
                    write(&tier, (i * 14..i * 14 + 14).map(|k| (k, 4096)));
                }
                tier.device
                    .faults
                    .write_countdown
                    .store(failing, Ordering::Relaxed);
                let mut b = tier.batch();
                for k in 1000..1014 {
                    b.add(&k, &data(k, 4096), false);
                }
                assert!(b.commit().is_err());
                assert_eq!(tier.presence(&1000), Presence::Absent);
                tier.shutdown();
            }
            let tier = Tier::open(c, codec()).unwrap();
            tier.wait_rebuild();
            assert!(tier.records() > 0, "failing write {failing}: nothing found");
            for k in (0..280).chain(1000..1014) {
                if let Some(r) = tier.read(&k) {
                    assert_eq!(r.data, data(k, 4096), "failing write {failing}: key {k}");
                }
            }
            assert_eq!(tier.figures().cksum_bad, 0, "failing write {failing}");
        }
    }

    #[test]
    fn io_errors_are_counted_misses_and_failed_writes_leave_nothing() {
        let p = path("faults");
        let tier = Tier::open(config(&p, 2 << 20, 128 << 10), codec()).unwrap();
        write(&tier, (0..10).map(|k| (k, 4096)));
        tier.set_faults(true, false);
        assert!(tier.read(&3).is_none());
        let f = tier.figures();
        assert_eq!((f.io_errors, f.misses), (1, 1));
        assert_eq!(
            tier.presence(&3),
            Presence::Absent,
            "a failed copy is dropped"
        );
        tier.set_faults(false, true);
        let mut b = tier.batch();
        b.add(&20, &data(20, 10), false);
        assert!(b.commit().is_err());
        assert_eq!(tier.presence(&20), Presence::Absent);
        tier.set_faults(false, false);
        assert_eq!(tier.read(&4).unwrap().data, data(4, 4096));
    }

    #[test]
    fn bad_devices_are_refused_clearly() {
        let e = |c: L2Config| Tier::open(c, codec()).err().expect("refused").to_string();
        let small = e(config(&path("small"), 8192, 4096));
        assert!(small.contains("too small"), "{small}");
        let p = path("busy");
        let first = Tier::open(config(&p, 1 << 20, 64 << 10), codec()).unwrap();
        let busy = e(config(&p, 1 << 20, 64 << 10));
        assert!(busy.contains("in use by another cache"), "{busy}");
        drop(first);
        let fifo = path("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let not_file = e(config(&fifo, 1 << 20, 64 << 10));
        assert!(not_file.contains("not a regular file"), "{not_file}");
    }

    #[test]
    fn a_rebuild_does_not_bring_back_what_was_invalidated() {
        let index: Index<u64> = Index::new();
        let rec = Rec::cached(5, 100, false, false, 1);
        index.set_rebuilding(true);
        index.invalidate(&7);
        assert!(!index.restore(7, rec), "invalidated during the rebuild");
        assert!(index.restore(8, rec));
        assert!(
            !index.restore(8, Rec::cached(9, 100, false, false, 2)),
            "a newer record stays"
        );
        index.set_rebuilding(false);
        assert!(index.restore(7, rec), "tombstones go with the rebuild");
    }

    #[test]
    fn the_hand_keeps_what_was_read_back_where_it_is_and_a_restart_finds_it() {
        let p = path("keep");
        // 64 units of ring, batches of 8 one-unit buffers (and a log unit).
        let c = config(&p, 65 * UNIT, 8 * UNIT);
        let tier = Tier::open(c.clone(), codec()).unwrap();
        for i in 0..7u64 {
            write(&tier, (i * 8..i * 8 + 8).map(|k| (k, 4096)));
        }
        // Keys 0..8 lie where the hand goes next: read two of them back.
        assert_eq!(tier.read(&3).unwrap().data, data(3, 4096));
        assert_eq!(tier.read(&5).unwrap().data, data(5, 4096));
        let before = [3u64, 5].map(|k| tier.index.get(&k).unwrap().unit());
        write(&tier, (100..108).map(|k| (k, 4096)));
        let f = tier.figures();
        assert_eq!(f.kept, 2, "{f:?}");
        assert!(f.evictions >= 6, "{f:?}");
        // Kept where they were; the new buffers took the gaps around them.
        assert_eq!(
            [3u64, 5].map(|k| tier.index.get(&k).unwrap().unit()),
            before
        );
        let mut units: Vec<u32> = [3u64, 5]
            .into_iter()
            .chain(100..108)
            .map(|k| tier.index.get(&k).unwrap().unit())
            .collect();
        units.sort_unstable();
        units.dedup();
        assert_eq!(units.len(), 10, "no two copies share a unit: {units:?}");
        assert!(
            units.iter().all(|&u| u < 1 + 12),
            "one region from the ring's start: {units:?}"
        );
        for k in [3u64, 5] {
            assert_eq!(tier.presence(&k), Presence::Cached, "key {k} kept");
            let r = tier.read(&k).expect("kept");
            assert_eq!(r.data, data(k, 4096));
            assert_eq!(r.mfu, k % 2 == 0, "kept with its flags");
        }
        for k in [0u64, 1, 2, 4, 6, 7] {
            assert_eq!(tier.presence(&k), Presence::Absent, "key {k} let go");
        }
        // Kept copies are T2 now; an unreferenced T2 copy is kept while T1
        // is over its target (p is 0 here).
        let (t1, t2) = tier.index.list_bytes();
        assert_eq!(t2, 2 * UNIT);
        assert_eq!(t1 + t2, tier.records() as u64 * UNIT);
        // Let go of keys are remembered: written again, they go onto T2.
        let mut b = tier.batch();
        b.add(&0, &data(0, 4096), false);
        assert!(tier.index.get(&0).unwrap().t2(), "remembered by B1");
        drop(b);
        tier.shutdown();
        drop(tier);
        let tier = Tier::open(c, codec()).unwrap();
        tier.wait_rebuild();
        for k in [3u64, 5].into_iter().chain(100..108) {
            assert_eq!(
                tier.read(&k).expect("found again").data,
                data(k, 4096),
                "key {k}"
            );
        }
        assert!(tier.index.get(&3).unwrap().t2(), "T2 survives a restart");
    }

    #[test]
    fn a_damaged_kept_copy_is_a_counted_miss_never_wrong_bytes() {
        let p = path("keep-fault");
        let tier = Tier::open(config(&p, 65 * UNIT, 8 * UNIT), codec()).unwrap();
        for i in 0..7u64 {
            write(&tier, (i * 8..i * 8 + 8).map(|k| (k, 4096)));
        }
        tier.read(&3).unwrap();
        // Damage key 3's copy on the device behind the tier's back.
        let rec = tier.index.get(&3).unwrap();
        let mut junk = AlignedBuf::zeroed(UNIT as usize);
        junk.bytes_mut().fill(0xa5);
        tier.device
            .write_at(&junk, rec.unit() as u64 * UNIT)
            .unwrap();
        // The hand keeps it where it is (it does not read what it keeps)...
        write(&tier, (100..108).map(|k| (k, 4096)));
        let f = tier.figures();
        assert_eq!((f.kept, f.cksum_bad), (1, 0), "{f:?}");
        assert_eq!(tier.presence(&3), Presence::Cached);
        // ... and the read that finds it damaged misses, counts it, and
        // drops the record.
        assert!(tier.read(&3).is_none());
        assert_eq!(tier.figures().cksum_bad, 1);
        assert_eq!(tier.presence(&3), Presence::Absent);
        for k in 100..108 {
            assert_eq!(tier.read(&k).unwrap().data, data(k, 4096));
        }
    }
}
