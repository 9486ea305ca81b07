//! A batch: one feed's buffers, copied out of memory under their keys'
//! locks and marked as being written in the index, until `commit.rs`
//! writes them at the hand (or the batch is dropped, and they are not).

use super::checksum::checksum;
use super::device::{padded, units, AlignedBuf};
use super::index::MAX_LEN;
use super::L2Arc;
use crate::arc::Key;
use std::io;
use std::sync::atomic::Ordering;

/// A batch's first buffer, allocated at its first `add` (a feed that adds
/// nothing allocates nothing), in bytes (a multiple of the unit), or its
/// cap if smaller.
const FIRST_BUF: u64 = 256 << 10;

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

/// One feed's buffers, copied.
pub(crate) struct Batch<'a, K: Key> {
    pub(super) tier: &'a L2Arc<K>,
    pub(super) id: u32,
    /// The buffers, each at a unit boundary. Taken at the first `add` from
    /// the tier's spare (the last written batch's buffer), or allocated
    /// small and grown once, to `cap`, as buffers are added: a feed that
    /// copies little or nothing zeroes and allocates little or nothing (the
    /// evict thread feeds in rounds that often find nothing, and a buffer
    /// of `write_max` zeroed for each cost it 5% of the object bench's
    /// time). The spare spares busy feeds the zeroing and page faults of a
    /// fresh buffer each (a quarter of a bucket mount's time on cold random
    /// reads went there); a feed that copies nothing lets it go, so an
    /// idle tier holds no buffer.
    pub(super) buf: AlignedBuf,
    /// The most bytes (padded) it takes: `write_max`, or less (`batch_of`).
    cap: u64,
    /// Bytes of buffers (padded).
    pub(super) used: u64,
    pub(super) entries: Vec<BatchEntry<K>>,
}

pub(super) struct BatchEntry<K> {
    pub(super) key: K,
    /// Offset in the batch.
    pub(super) at: u64,
    pub(super) len: u32,
    pub(super) mfu: bool,
    /// On the tier's T2.
    pub(super) t2: bool,
    pub(super) cksum: u64,
}

impl<K> BatchEntry<K> {
    /// The device bytes it takes: its length in whole units.
    pub(super) fn padded(&self) -> u64 {
        padded(self.len as u64)
    }
}

impl<K: Key> L2Arc<K> {
    /// An empty batch of up to `write_max` bytes.
    pub(crate) fn batch(&self) -> Batch<'_, K> {
        self.batch_of(self.feed.write_max)
    }

    /// An empty batch of up to `max_bytes` (at most `write_max`, at least
    /// one unit).
    pub(crate) fn batch_of(&self, max_bytes: u64) -> Batch<'_, K> {
        let cap = units(max_bytes.min(self.feed.write_max)).max(units(1));
        Batch {
            tier: self,
            id: self.next_batch.fetch_add(1, Ordering::Relaxed),
            buf: AlignedBuf::empty(),
            cap,
            used: 0,
            entries: Vec::new(),
        }
    }
}

impl<K: Key> Batch<'_, K> {
    /// Copies `data` for `key` into the batch and marks `key` `Writing`.
    /// The caller holds `key`'s hash-stripe lock, under which `invalidate`
    /// of `key` also runs, so a copy of stale bytes cannot be recorded.
    pub(crate) fn add(&mut self, key: &K, data: &[u8], mfu: bool) -> Added {
        let size = padded(data.len() as u64);
        if data.len() as u64 > MAX_LEN || self.used + size > self.cap {
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
        let cksum = checksum(data);
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
        if at + size > self.buf.bytes().len() as u64 {
            self.grow(at + size);
        }
        let slot = &mut self.buf.bytes_mut()[at as usize..(at + size) as usize];
        slot[..data.len()].copy_from_slice(data);
        // The padding to the unit: a reused buffer holds older bytes there.
        slot[data.len()..].fill(0);
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

    /// A buffer of at least `need` bytes (at most `cap`), the buffers so
    /// far copied into it.
    fn grow(&mut self, need: u64) {
        if self.buf.bytes().is_empty() {
            let spare = std::mem::replace(&mut *self.tier.spare_buf.lock(), AlignedBuf::empty());
            if spare.bytes().len() as u64 >= need {
                self.buf = spare;
                return;
            }
        }
        // The first buffer is small; past it, the cap at once: a buffer
        // that doubled held the old one and the new one together while it
        // copied (18 MiB for a cap of 10), and the pages of the new one
        // that no buffer reaches are never touched (a buffer this large is
        // mapped on its own, zero until written).
        let len = if self.buf.bytes().is_empty() {
            need.max(FIRST_BUF)
        } else {
            self.cap
        }
        .min(self.cap);
        let mut bigger = AlignedBuf::zeroed(len as usize);
        let used = self.used as usize;
        bigger.bytes_mut()[..used].copy_from_slice(&self.buf.bytes()[..used]);
        self.buf = bigger;
    }

    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes of buffers in the batch, padded to the device's units.
    pub(super) fn bytes(&self) -> u64 {
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
    pub(super) fn commit_now(mut self) -> io::Result<usize> {
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
        // The buffer goes to the next batch (the bigger of two); a batch
        // that copied nothing says the feeds went idle: no spare then.
        let mut spare = self.tier.spare_buf.lock();
        if self.used == 0 {
            *spare = AlignedBuf::empty();
        } else if self.buf.bytes().len() > spare.bytes().len() {
            *spare = std::mem::replace(&mut self.buf, AlignedBuf::empty());
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::device::UNIT;
    use super::super::test_support::{codec, config, data, path};
    use super::*;
    use crate::arc::Presence;

    #[test]
    fn a_batch_roundtrips_mixed_sizes() {
        let p = path("roundtrip");
        let tier = L2Arc::open(config(&p, 4 << 20, 512 << 10), codec()).unwrap();
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

    /// A batch starts with a small buffer and grows it once, to its cap,
    /// as buffers are added (keeping those already copied).
    #[test]
    fn a_batch_grows_its_buffer_and_keeps_what_it_copied() {
        let p = path("grow");
        let tier = L2Arc::open(config(&p, 64 << 20, 8 << 20), codec()).unwrap();
        let mut b = tier.batch();
        assert!(b.buf.bytes().is_empty(), "nothing allocated before an add");
        // 700 buffers of 10,000 bytes (padded to 12 KiB): 8.2 MiB at most
        // fits in 8 MiB, so the batch grows past its first buffer and fills.
        let mut added = 0u64;
        for k in 0..700u64 {
            match b.add(&k, &data(k, 10_000), false) {
                Added::Copied => added += 1,
                Added::Full => break,
                Added::Present => unreachable!(),
            }
            let len = b.buf.bytes().len() as u64;
            assert!(
                len == FIRST_BUF || len == 8 << 20,
                "the first buffer, or the cap at once: {len}"
            );
        }
        assert_eq!(added, (8 << 20) / 12288);
        assert_eq!(b.buf.bytes().len(), 8 << 20);
        assert_eq!(b.commit().unwrap() as u64, added);
        for k in 0..added {
            assert_eq!(tier.read(&k).expect("on the device").data, data(k, 10_000));
        }
        // The next batch writes into that buffer again, its padding zeroed
        // where the older batch left bytes.
        let mut b = tier.batch();
        assert_eq!(b.add(&4000, &data(4000, 100), false), Added::Copied);
        assert_eq!(b.buf.bytes().len(), 8 << 20, "the spare was taken");
        assert!(
            b.buf.bytes()[100..UNIT as usize].iter().all(|&x| x == 0),
            "stale bytes in the padding"
        );
        assert_eq!(b.commit().unwrap(), 1);
        assert_eq!(
            tier.read(&4000).expect("on the device").data,
            data(4000, 100)
        );
        // A feed that copies nothing lets the spare go, and a batch of
        // little then stays small.
        drop(tier.batch());
        assert!(tier.spare_buf.lock().bytes().is_empty());
        let mut b = tier.batch();
        assert_eq!(b.add(&5000, &data(5000, 100), false), Added::Copied);
        assert_eq!(b.buf.bytes().len() as u64, FIRST_BUF);
        assert_eq!(b.commit().unwrap(), 1);
        assert_eq!(
            tier.read(&5000).expect("on the device").data,
            data(5000, 100)
        );
    }

    /// A key invalidated after it joined a batch can join the same batch
    /// again with its new bytes (the feed meets it at the MRU tail, then,
    /// rewritten, at the MFU tail): the batch's older copy must not become
    /// its record, on the device or after a restart.
    #[test]
    fn a_key_rewritten_into_the_same_batch_keeps_only_its_newest_bytes() {
        let p = path("same-batch");
        let c = config(&p, 1 << 20, 64 << 10);
        let tier = L2Arc::open(c.clone(), codec()).unwrap();
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
        let tier = L2Arc::open(c, codec()).unwrap();
        tier.wait_rebuild();
        if let Some(r) = tier.read(&7) {
            assert_eq!(r.data, newer, "after a restart");
        }
    }
}
