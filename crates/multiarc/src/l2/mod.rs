//! The second tier (OpenZFS's L2ARC): buffers about to be evicted from
//! memory are copied, in large sequential batches, to a ring on a local
//! file or block device; a later miss in memory is served from there. The
//! ARC sees it only as `arc::SecondTier`, which [`L2Arc`] implements
//! (`second_tier`).
//!
//! This file is the tier's front door: [`L2Arc`] (the device, the ring's
//! write hand, the in-memory index of what the device holds), its opening,
//! reads with checksum verification, and invalidation. The rest, by role:
//! - `config`: the device's and the feed's settings, and their checks;
//! - `recover`: what the header on start says the device holds, and the
//!   rebuild of the index from the device's log blocks (persistent L2ARC);
//! - `batch`: one feed's buffers, copied; `commit`: a batch written at the
//!   hand, in the gaps between the copies the hand keeps, followed by its
//!   log block; `plan` (pure): what a batch overwrites and what it keeps;
//! - `feed`: which buffers go to the tier, and the feed thread (OpenZFS's
//!   `l2arc_feed_thread`);
//! - `index` (the L2 headers), `history` (the tier's own ARC ghosts),
//!   `format` (the header and log blocks on the device), `device` (the
//!   file and its I/O), `checksum`, `sectors` (the checksums per sector
//!   that let a read of part of a large buffer verify only that part).
//!
//! Why it cannot return wrong bytes: every buffer's checksum is kept in
//! its header and checked on every read; a copy whose key was rewritten or
//! removed in memory is dropped first (`invalidate`, under the key's lock
//! in the cache, which a feed copying the old bytes also holds); a batch
//! marks its keys as being written (with their bytes' checksum) and turns
//! them into records only if they are still those copies when the write
//! is done (a key rewritten and added to the batch again keeps only its
//! newest bytes); a kept copy is not written at all (it stays readable
//! where it is), and the new log block describes it only if its record is
//! still that copy; what the hand is about to overwrite leaves the index
//! before the write, and the device header names that region first, so a
//! rebuild after a crash skips it. A crash loses at most the batch being
//! written, and the copies it was keeping (their older log blocks are in
//! the region). Across a restart, a rewrite or removal holds too: its key
//! is a tombstone in the next log block (or in the last one, written at a
//! clean stop), which hides the key's entries in older blocks from the
//! rebuild; until it is on the device the header says dirty (written
//! before the invalidation returns), and a device found dirty (a crash in
//! that window) starts empty.

mod as_second_tier;
mod batch;
mod checksum;
mod commit;
mod config;
mod device;
mod feed;
mod format;
mod history;
mod index;
mod plan;
mod recover;
mod sectors;
#[cfg(all(test, not(loom)))]
mod test_support;

pub(crate) use batch::Added;
pub(crate) use config::L2Config;
pub(crate) use feed::{feed_once, flush, FeedThread};

use crate::arc::{Key, LoadedBytes, Presence, TierFigures, TierRead};
use crate::lock::Mutex;
use config::{DeviceConfig, FeedConfig};
use device::{padded, refused, units, with_path, AlignedBuf, Device, UNIT};
use format::{log_len, Header, LogPtr};
use history::History;
use index::Index;
use recover::{Found, Rebuild};
use std::collections::HashSet;
use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

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

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    part_hits: AtomicU64,
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

/// The L2ARC: the device and its index.
pub(crate) struct L2Arc<K> {
    device_config: DeviceConfig,
    feed: FeedConfig,
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
    /// The last written batch's buffer, for the next batch (`batch.rs`):
    /// kept while feeds keep writing, let go by a feed that copies nothing
    /// (taken alone or under a hash stripe's lock; nothing under it).
    spare_buf: Mutex<AlignedBuf>,
    /// Held by a feed from its batch's first copy to its commit
    /// (`feed.rs`): one batch is filled at a time, so the feeds' buffers
    /// (the spare and one batch's) stay within one `write_max`, the share
    /// of memory a bucket mount keeps for them (taken alone, before any
    /// hash stripe's lock).
    feeding: Mutex<()>,
}

impl<K: Key> L2Arc<K> {
    /// Opens (creating a missing regular file of `config.device.bytes`),
    /// takes an exclusive lock on it, and starts the rebuild of the index
    /// in the background when the header is valid and matches. Errors
    /// (one clear line, naming the path): unwritable path, device too
    /// small for one log block, `bytes` above the free space or the block
    /// device's size, the device locked by another cache.
    pub(crate) fn open(config: L2Config, codec: KeyCodec<K>) -> io::Result<Arc<L2Arc<K>>> {
        let L2Config {
            device: device_config,
            feed,
        } = config;
        let path = &device_config.path;
        let bytes = device_config.bytes;
        let ring_start = UNIT;
        let ring_end = bytes / UNIT * UNIT;
        let max_log = log_len((feed.write_max / UNIT).max(1) as usize, 0, codec.len);
        let min = ring_start + UNIT + log_len(1, 0, codec.len);
        let invalid = io::ErrorKind::InvalidInput;
        if bytes < min {
            return Err(refused(path, invalid, format_args!(
                "{bytes} bytes is too small: it needs at least {min} (a header, one log block and one block)"
            )));
        }
        if units(feed.write_max) + max_log > ring_end - ring_start {
            return Err(refused(path, invalid, format_args!(
                "{bytes} bytes is too small for a batch of l2_write_max ({} bytes) and its log block",
                feed.write_max
            )));
        }
        if ring_end / UNIT > u32::MAX as u64 {
            return Err(refused(
                path,
                invalid,
                format_args!("{bytes} bytes is above the largest device, 16 TiB"),
            ));
        }
        let device = Device::open(path, bytes, device_config.direct)?;
        let mut head = AlignedBuf::zeroed(UNIT as usize);
        device
            .read_at(&mut head, 0)
            .map_err(|e| with_path(path, "cannot read its header", e))?;
        let found = Found::triage(Header::decode(head.bytes()), &device_config, codec.len);
        if found.worth_saying() {
            log::warn!("l2 device {}: {found}, starting empty", path.display());
        }
        let header = found.usable();
        let ring = match header {
            Some(h) => Ring {
                hand: h.newest.offset + h.newest.len as u64,
                newest: h.newest,
                wrapped: true,
            },
            None => Ring {
                hand: ring_start,
                newest: LogPtr::default(),
                wrapped: false,
            },
        };
        // What is left of the ring beside a full batch, in keys (a unit
        // spare for the rounding), and at most 64 Ki.
        let max_tombstones = ((ring_end - ring_start)
            .saturating_sub(units(feed.write_max) + max_log + UNIT)
            / codec.len.max(1) as u64)
            .min(1 << 16) as usize;
        let tier = Arc::new(L2Arc {
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
            spare_buf: Mutex::new(AlignedBuf::empty()),
            feeding: Mutex::new(()),
            dirty: AtomicBool::new(false),
            max_tombstones,
            ring_start,
            ring_end,
            next_batch: AtomicU32::new(1),
            rebuild: Rebuild::new(header.is_some()),
            counters: Counters::default(),
            unfed: AtomicU64::new(0),
            device_config,
            feed,
        });
        match header {
            None => {
                // A fresh header: older log blocks are unreachable from it.
                let h = tier.header.lock();
                tier.write_header(&h).map_err(|e| {
                    with_path(&tier.device_config.path, "cannot write its header", e)
                })?;
            }
            Some(h) => tier.start_rebuild(h)?,
        }
        Ok(tier)
    }

    /// The feed's settings.
    /// The bytes the ring of log blocks spans on the device.
    pub(super) fn ring_bytes(&self) -> u64 {
        self.ring_end - self.ring_start
    }

    pub(super) fn feed_config(&self) -> &FeedConfig {
        &self.feed
    }

    /// Writes the header as `h` says (the caller holds `header`).
    fn write_header(&self, h: &Written) -> io::Result<()> {
        let mut b = AlignedBuf::zeroed(UNIT as usize);
        Header {
            identity: self.device_config.identity,
            device_bytes: self.device_config.bytes,
            key_len: self.codec.len as u32,
            newest: h.newest,
            trim: h.trim,
            dirty: h.dirty,
        }
        .encode(b.bytes_mut());
        self.device.write_at(&b, 0)
    }

    /// A lookup in the index only (no I/O).
    pub(super) fn presence(&self, key: &K) -> Presence {
        match self.index.get(key) {
            None => Presence::Absent,
            Some(r) if r.is_writing() => Presence::Writing,
            Some(_) => Presence::Cached,
        }
    }

    /// Reads `key`'s copy and verifies it: `None` when it is not on the
    /// device, or the read failed or did not verify (then counted, and the
    /// header dropped). Counts `hits`/`misses`.
    pub(super) fn read(&self, key: &K) -> Option<TierRead> {
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
            self.failed(key, &rec, outcome.is_err());
            return None;
        }
        c.hits.fetch_add(1, Ordering::Relaxed);
        self.index.reference(key, &rec);
        if sectors::worth(len as u64) {
            self.index
                .read_whole(key, &rec, || sectors::sums(&b.bytes()[..len]));
        }
        let (buf, window) = b.into_window(len);
        Some(TierRead {
            data: LoadedBytes::window(buf, window),
            mfu: rec.mfu(),
            as_new: self.device_config.readback_as_new,
        })
    }

    /// Reads bytes `range` of `key`'s copy, verifying only the sectors
    /// they meet (`sectors.rs`): `None` when the range is empty or past the
    /// buffer, the tier has no copy or no sector checksums of it, the parts
    /// read of it since its last whole read would pass half of it with this
    /// one (a buffer read that much is worth bringing back whole), or the
    /// read failed or did not verify (then counted as in `read`, and the
    /// header dropped). Counts `hits` and `part_hits`; a `None` with a copy
    /// on the device counts nothing (the caller reads it whole next).
    pub(crate) fn read_part(&self, key: &K, range: Range<u64>) -> Option<Vec<u8>> {
        if range.start >= range.end {
            return None;
        }
        let part = self.index.part(key, &range)?;
        let rec = part.rec;
        let start = part.first as u64 * sectors::SECTOR;
        let end = (start + part.sums.len() as u64 * sectors::SECTOR).min(rec.len() as u64);
        let mut b = AlignedBuf::zeroed(units(end - start) as usize);
        let outcome = self
            .device
            .read_at(&mut b, rec.unit() as u64 * UNIT + start);
        let verified =
            outcome.is_ok() && sectors::verify(&b.bytes()[..(end - start) as usize], &part.sums);
        if !verified {
            self.failed(key, &rec, outcome.is_err());
            return None;
        }
        let c = &self.counters;
        c.hits.fetch_add(1, Ordering::Relaxed);
        c.part_hits.fetch_add(1, Ordering::Relaxed);
        self.index.reference(key, &rec);
        let at = (range.start - start) as usize..(range.end - start) as usize;
        Some(b.bytes()[at].to_vec())
    }

    /// A read of `key`'s copy `rec` failed (`io_error`) or did not verify:
    /// if the record is still that copy, the copy is bad and is dropped (if
    /// the hand took it meanwhile, this was a plain miss). Counts the miss.
    fn failed(&self, key: &K, rec: &index::Rec, io_error: bool) {
        let c = &self.counters;
        if self.index.remove_if(key, rec) {
            if io_error {
                c.io_errors.fetch_add(1, Ordering::Relaxed);
            } else {
                c.cksum_bad.fetch_add(1, Ordering::Relaxed);
            }
        }
        c.misses.fetch_add(1, Ordering::Relaxed);
    }

    /// Forgets `key`'s copy (its buffer was written anew or removed), in
    /// memory. Also keeps a rebuild still running from bringing back an
    /// older copy, and a rebuild after a restart: the key goes into the
    /// next log block as a tombstone, and until then the header must say
    /// dirty, so that a crash before that block starts the tier empty
    /// instead of bringing the old copy back. Returns true when the header
    /// does not say so yet: the caller then calls
    /// [`L2Arc::persist_invalidations`] (device I/O) before it returns, once
    /// it holds no lock of the cache.
    pub(super) fn invalidate(&self, key: &K) -> bool {
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
    pub(super) fn persist_invalidations(&self) {
        // Only the header's own lock: a batch being written (which holds
        // `ring` for its I/O) does not hold this up for long.
        let mut h = self.header.lock();
        let p = self.pending.lock();
        if !self.dirty.load(Ordering::Acquire) && !p.is_empty() {
            h.dirty = true;
            match self.write_header(&h) {
                Ok(()) => self.dirty.store(true, Ordering::Release),
                Err(e) => {
                    self.counters.io_errors.fetch_add(1, Ordering::Relaxed);
                    log::debug!(
                        "l2 device {}: cannot mark its header dirty: {e}",
                        self.device_config.path.display()
                    );
                }
            }
        }
    }

    /// Keys waiting to be written down as tombstones.
    pub(super) fn has_pending(&self) -> bool {
        !self.pending.lock().is_empty()
    }

    pub(super) fn figures(&self) -> TierFigures {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        TierFigures {
            hits: get(&c.hits),
            part_hits: get(&c.part_hits),
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
        self.stop_rebuild();
        while self.max_tombstones > 0 && self.has_pending() {
            if self.batch().commit_now().is_err() {
                break;
            }
        }
    }

    /// Makes every device read (`reads`) or write (`writes`) fail with EIO
    /// until called again (`Cache::l2_inject_faults`, with the `test-support` feature).
    #[cfg(any(test, feature = "test-support"))]
    pub(crate) fn set_faults(&self, reads: bool, writes: bool) {
        self.device.faults.reads.store(reads, Ordering::Relaxed);
        self.device.faults.writes.store(writes, Ordering::Relaxed);
    }

    /// Records in the index (tests).
    #[cfg(all(test, not(loom)))]
    fn records(&self) -> usize {
        self.index.len()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::test_support::{codec, config, data, path, write};
    use super::*;

    #[test]
    fn io_errors_are_counted_misses_and_failed_writes_leave_nothing() {
        let p = path("faults");
        let tier = L2Arc::open(config(&p, 2 << 20, 128 << 10), codec()).unwrap();
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
    fn a_part_of_a_large_buffer_is_read_and_verified_alone() {
        use sectors::SECTOR;
        let p = path("parts");
        let tier = L2Arc::open(config(&p, 8 << 20, 1 << 20), codec()).unwrap();
        // Key 1: 256 KiB + 100 bytes (a short last sector); key 2: 32 KiB,
        // too small to be read in parts.
        let len = (256 << 10) + 100;
        write(&tier, [(1, len), (2, 32 << 10)].into_iter());
        let whole = data(1, len);
        let ranges = [
            0..8192,
            SECTOR - 10..SECTOR + 10,
            3 * SECTOR..3 * SECTOR + 8192,
            len as u64 - 50..len as u64,
        ];
        for r in &ranges {
            let got = tier.read_part(&1, r.clone()).expect("read in part");
            assert_eq!(got, whole[r.start as usize..r.end as usize], "{r:?}");
        }
        let f = tier.figures();
        assert_eq!((f.hits, f.part_hits, f.misses), (4, 4, 0));
        // Not in parts: empty, past the end, a small buffer, an absent key.
        assert!(tier.read_part(&1, 5..5).is_none());
        assert!(tier.read_part(&1, 0..len as u64 + 1).is_none());
        assert!(tier.read_part(&2, 0..4096).is_none());
        assert!(tier.read_part(&3, 0..4096).is_none());
        // Past half of it in parts, it is to be read whole; a whole read
        // starts the count again.
        let mut read = 8192 + 20 + 8192 + 50;
        while read + 8192 <= len / 2 {
            assert!(tier.read_part(&1, 0..8192).is_some());
            read += 8192;
        }
        assert!(tier.read_part(&1, 0..8192).is_none(), "past half");
        assert_eq!(tier.read(&1).unwrap().data, whole);
        assert!(tier.read_part(&1, 0..8192).is_some(), "counted again");
        assert_eq!(tier.figures().misses, 0);
    }

    #[test]
    fn a_damaged_sector_drops_the_copy() {
        use std::os::unix::fs::FileExt;
        let p = path("parts-damaged");
        let tier = L2Arc::open(config(&p, 8 << 20, 1 << 20), codec()).unwrap();
        write(&tier, [(1, 256 << 10)].into_iter());
        let at = tier.index.get(&1).unwrap().unit() as u64 * UNIT;
        // Damage the third sector, as the disk would, behind the tier.
        let file = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        file.write_all_at(&[0xee; 64], at + 2 * sectors::SECTOR + 100)
            .unwrap();
        file.sync_all().unwrap();
        let r = tier
            .read_part(&1, 0..8192)
            .expect("the first sector is sound");
        assert_eq!(r, data(1, 8192));
        // Key 2 on a device that fails its reads: a miss, counted, dropped.
        write(&tier, [(2, 256 << 10)].into_iter());
        tier.set_faults(true, false);
        assert!(tier.read_part(&2, 0..8192).is_none());
        tier.set_faults(false, false);
        assert_eq!(tier.figures().io_errors, 1);
        assert_eq!(
            tier.presence(&2),
            Presence::Absent,
            "a failed copy is dropped"
        );
        assert!(tier
            .read_part(&1, 2 * sectors::SECTOR..2 * sectors::SECTOR + 8192)
            .is_none());
        let f = tier.figures();
        assert_eq!((f.cksum_bad, f.misses), (1, 2));
        assert_eq!(tier.presence(&1), Presence::Absent, "a bad copy is dropped");
    }

    #[test]
    fn after_a_restart_a_buffer_is_read_in_parts_once_read_whole() {
        let p = path("parts-restart");
        {
            let tier = L2Arc::open(config(&p, 8 << 20, 1 << 20), codec()).unwrap();
            write(&tier, [(1, 128 << 10)].into_iter());
            tier.shutdown();
        }
        let tier = L2Arc::open(config(&p, 8 << 20, 1 << 20), codec()).unwrap();
        tier.wait_rebuild();
        assert!(tier.read_part(&1, 0..4096).is_none(), "no sums yet");
        assert_eq!(tier.read(&1).unwrap().data, data(1, 128 << 10));
        assert_eq!(tier.read_part(&1, 100..200).unwrap(), data(1, 200)[100..]);
    }

    #[test]
    fn device_errors_keep_the_systems_kind_and_errno() {
        let p = std::path::Path::new("/nonexistent-dir/l2.dev");
        let e = L2Arc::open(config(p, 1 << 20, 64 << 10), codec())
            .err()
            .expect("refused");
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        assert!(e.to_string().contains("/nonexistent-dir/l2.dev"), "{e}");
        let system = e
            .get_ref()
            .and_then(|inner| inner.source())
            .and_then(|s| s.downcast_ref::<io::Error>());
        assert_eq!(system.and_then(io::Error::raw_os_error), Some(libc::ENOENT));
    }

    #[test]
    fn bad_devices_are_refused_clearly() {
        let e = |c: L2Config| L2Arc::open(c, codec()).err().expect("refused").to_string();
        let small = e(config(&path("small"), 8192, 4096));
        assert!(small.contains("too small"), "{small}");
        let p = path("busy");
        let first = L2Arc::open(config(&p, 1 << 20, 64 << 10), codec()).unwrap();
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
}
