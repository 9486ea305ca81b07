//! Writing a batch at the ring's hand: the plan (`plan.rs`) carried out,
//! step by step, so that a crash at any point loses at most this batch
//! (and the copies it was keeping) and no read can return wrong bytes.
//!
//! 1. The tombstones waiting are taken for the new log block.
//! 2. The plan is made at the hand (from the ring's start if it does not
//!    fit before the end).
//! 3. What the hand lets go of leaves the index (and goes to the tier's
//!    history); what it keeps takes its new place on the tier's lists.
//! 4. The header names the region (a rebuild after a crash skips it).
//! 5. The new buffers go into the gaps between the kept copies.
//! 6. The log block goes after them, describing what is still this
//!    batch's, the kept copies still as they were, and the tombstones.
//! 7. The header points at it (and says clean if nothing waits).
//! 8. The batch's records become `Cached`, and the write is counted.
//!
//! A failed write puts the tombstones back and counts an I/O error; the
//! batch's records then go with the batch (`Batch`'s drop).

use super::batch::Batch;
use super::device::{AlignedBuf, UNIT};
use super::format::{encode_log, log_len, LogPtr};
use super::history::Ghost;
use super::index::Rec;
use super::plan::{Holdings, Lists, Plan, Planner};
use super::sectors;
use super::{L2Arc, Ring};
use crate::arc::Key;
use std::io;
use std::sync::atomic::Ordering;

/// The planner reads the index and the history.
impl<K: Key> Holdings<K> for L2Arc<K> {
    fn records_in(&self, start: u64, end: u64) -> Vec<(K, Rec)> {
        self.index.records_in(start, end)
    }

    fn lists(&self) -> Lists {
        let (t1, t2) = self.index.list_bytes();
        let p = self.history.lock().p();
        Lists { t1, t2, p }
    }
}

impl<K: Key> L2Arc<K> {
    /// Writes `batch` at the hand: see `Batch::commit`.
    pub(super) fn commit(&self, batch: &mut Batch<'_, K>) -> io::Result<usize> {
        let mut ring = self.ring.lock();
        let tombstones = self.take_tombstones();
        if batch.entries.is_empty() && tombstones.is_empty() {
            return Ok(0);
        }
        let mut plan = self.plan_at_hand(&mut ring, batch, tombstones.len());
        let start = ring.hand;
        self.let_go(&plan);
        let kept = self.keep(&mut plan);
        let written = self
            .name_region(start, plan.total)
            .and_then(|()| self.write_buffers(batch, &plan.placed))
            .and_then(|()| {
                let log = self.write_log(batch, &plan, &kept, &tombstones, &ring)?;
                ring.hand = log.offset + log.len as u64;
                ring.newest = log;
                self.point_header_at(log)?;
                Ok(log.len as u64)
            });
        drop(ring);
        let log_bytes = match written {
            Ok(log_bytes) => log_bytes,
            Err(e) => {
                self.pending.lock().extend(tombstones);
                self.counters.io_errors.fetch_add(1, Ordering::Relaxed);
                return Err(e);
            }
        };
        Ok(self.finish(batch, plan.placed, log_bytes, kept.len()))
    }

    /// Step 1: the tombstones this log block carries (at most
    /// `max_tombstones`), taken out of the pending set.
    fn take_tombstones(&self) -> Vec<K> {
        let mut p = self.pending.lock();
        let some: Vec<K> = p.iter().take(self.max_tombstones).cloned().collect();
        for k in &some {
            p.remove(k);
        }
        some
    }

    /// Step 2: the plan at the hand, keeping at most `keep_ratio` bytes per
    /// new byte (and a quarter of the ring); a batch that does not fit
    /// before the ring's end moves the hand to its start (and keeps
    /// nothing if it fits only so).
    fn plan_at_hand(&self, ring: &mut Ring, batch: &Batch<'_, K>, tombstones: usize) -> Plan<K> {
        let ring_len = self.ring_end - self.ring_start;
        let budget = batch
            .used
            .saturating_mul(self.device_config.keep_ratio)
            .min(ring_len / 4);
        let sizes: Vec<u64> = batch.entries.iter().map(|e| e.padded()).collect();
        let planner = Planner {
            held: self,
            key_len: self.codec.len,
            ring_end: self.ring_end,
        };
        let mut plan = planner.plan(ring.wrapped, ring.hand, &sizes, budget, tombstones);
        if ring.hand + plan.total > self.ring_end {
            ring.hand = self.ring_start;
            ring.wrapped = true;
            plan = planner.plan(ring.wrapped, ring.hand, &sizes, budget, tombstones);
            if ring.hand + plan.total > self.ring_end {
                // A batch near the ring's size: nothing is kept.
                plan = planner.plan(ring.wrapped, ring.hand, &sizes, 0, tombstones);
            }
        }
        plan
    }

    /// Step 3, first half: what the hand lets go of leaves the index (if
    /// it is still that copy) and goes to the history as a ghost.
    fn let_go(&self, plan: &Plan<K>) {
        let ring_len = self.ring_end - self.ring_start;
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
    }

    /// Step 3, second half: what the hand keeps takes its new place on the
    /// tier's lists (a judged copy goes onto T2, its bit cleared); returns
    /// the records kept (those still the copies planned on).
    fn keep(&self, plan: &mut Plan<K>) -> Vec<(K, Rec)> {
        let mut kept = Vec::with_capacity(plan.kept.len());
        for (key, rec, judged) in plan.kept.drain(..) {
            let t2 = rec.t2() || judged;
            let referenced = rec.referenced() && !judged;
            if let Some(now) = self.index.keep(&key, &rec, t2, referenced) {
                kept.push((key, now));
            }
        }
        kept
    }

    /// Step 4: the header names the region `[start, start + len)` before
    /// anything is written there.
    fn name_region(&self, start: u64, len: u64) -> io::Result<()> {
        let mut h = self.header.lock();
        h.trim = (start, start + len);
        self.write_header(&h)
    }

    /// Step 5: the new buffers at `placed` (each run of them in one write,
    /// straight from the batch).
    fn write_buffers(&self, batch: &Batch<'_, K>, placed: &[u64]) -> io::Result<()> {
        let entries = &batch.entries;
        let mut i = 0;
        while i < entries.len() {
            let first = i;
            let mut len = entries[i].padded();
            while i + 1 < entries.len() && placed[i + 1] == placed[i] + entries[i].padded() {
                i += 1;
                len += entries[i].padded();
            }
            let from = entries[first].at as usize;
            self.device
                .write_range(&batch.buf, from, len as usize, placed[first])?;
            i += 1;
        }
        Ok(())
    }

    /// Step 6: the log block at `plan.log_at`, for the batch's region from
    /// the hand: what is still this batch's, or still the kept record (a
    /// key rewritten or removed since is not described; one invalidated
    /// from here on is a tombstone of the next), and `tombstones`. Returns
    /// the pointer to it.
    fn write_log(
        &self,
        batch: &Batch<'_, K>,
        plan: &Plan<K>,
        kept: &[(K, Rec)],
        tombstones: &[K],
        ring: &Ring,
    ) -> io::Result<LogPtr> {
        let key_len = self.codec.len;
        let start = ring.hand;
        let prev = link_past(ring, start, plan.total);
        let encode = |k: &K| {
            let mut key = vec![0u8; key_len];
            (self.codec.encode)(k, &mut key);
            key
        };
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
        self.device.write_at(&log, plan.log_at)?;
        Ok(LogPtr {
            offset: plan.log_at,
            len: log_bytes as u32,
            cksum,
            generation,
        })
    }

    /// Step 7: the header points at the new log block `newest`, and says
    /// clean again if no tombstone waits (under `pending`, so that an
    /// invalidation meanwhile either waits or sees it clean).
    fn point_header_at(&self, newest: LogPtr) -> io::Result<()> {
        let mut h = self.header.lock();
        let p = self.pending.lock();
        h.newest = newest;
        h.trim = (0, 0);
        h.dirty = !p.is_empty();
        self.write_header(&h)?;
        self.dirty.store(h.dirty, Ordering::Release);
        Ok(())
    }

    /// Step 8: the batch's records still its own become `Cached` at their
    /// places; counts the write. Returns the buffers written.
    fn finish(
        &self,
        batch: &mut Batch<'_, K>,
        placed: Vec<u64>,
        log_bytes: u64,
        kept: usize,
    ) -> usize {
        let mut written = 0;
        for (e, at) in batch.entries.drain(..).zip(placed) {
            let unit = (at / UNIT) as u32;
            let sums = sectors::worth(e.len as u64).then(|| {
                let start = e.at as usize;
                sectors::sums(&batch.buf.bytes()[start..start + e.len as usize])
            });
            if self
                .index
                .finish_write(&e.key, batch.id, unit, e.cksum, sums)
            {
                written += 1;
            }
        }
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        self.counters
            .write_bytes
            .fetch_add(batch.used + log_bytes, Ordering::Relaxed);
        self.counters.kept.fetch_add(kept as u64, Ordering::Relaxed);
        written
    }
}

/// The log block the new one chains to: the ring's newest, unless it lies
/// in the region `[start, start + len)` about to be overwritten (then the
/// chain ends here).
fn link_past(ring: &Ring, start: u64, len: u64) -> LogPtr {
    let newest = ring.newest;
    if newest.offset < start + len && start < newest.offset + newest.len as u64 {
        LogPtr::default()
    } else {
        newest
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::test_support::{codec, config, data, path, write};
    use super::super::Added;
    use super::*;
    use crate::arc::Presence;
    use std::collections::HashMap;

    #[test]
    fn the_ring_wraps_and_never_returns_wrong_bytes() {
        let p = path("wrap");
        let tier = L2Arc::open(config(&p, 1 << 20, 64 << 10), codec()).unwrap();
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

    #[test]
    fn the_hand_keeps_what_was_read_back_where_it_is_and_a_restart_finds_it() {
        let p = path("keep");
        // 64 units of ring, batches of 8 one-unit buffers (and a log unit).
        let c = config(&p, 65 * UNIT, 8 * UNIT);
        let tier = L2Arc::open(c.clone(), codec()).unwrap();
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
        let tier = L2Arc::open(c, codec()).unwrap();
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
        let tier = L2Arc::open(config(&p, 65 * UNIT, 8 * UNIT), codec()).unwrap();
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
