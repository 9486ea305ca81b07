//! The second tier's in-memory headers (OpenZFS's L2-only `arc_buf_hdr_t`):
//! per key, where its copy lies on the device, its length, checksum, the
//! memory list it was fed from, the tier's own list (T1: written once, T2:
//! read back or remembered by the tier's history) and a reference bit; or
//! that it is being written. Striped maps; 16 bytes per record beside the
//! key. A large buffer's record may also have its sector checksums
//! ([`Parts`], `sectors.rs`), in a second map of the same stripe, so that
//! they leave with the record under the same lock. The bytes of the cached
//! records of each tier list are counted here, for the hand's choice
//! (`mod.rs`).

use super::sectors::covering;
use crate::arc::Key;
use crate::lock::Mutex;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

const STRIPES: usize = 64;
/// `len` flag: fed from the MFU list.
const MFU: u32 = 1 << 31;
/// `len` flag: in a batch being written (`unit` is then the batch's id).
const WRITING: u32 = 1 << 30;
/// `len` flag: on the tier's second list (T2).
const T2: u32 = 1 << 29;
/// `len` flag: read back since it was written (CAR's reference bit).
const REF: u32 = 1 << 28;
const FLAGS: u32 = MFU | WRITING | T2 | REF;
/// The largest buffer a record describes (below the flags).
pub(super) const MAX_LEN: u64 = (1 << 28) - 1;

/// One key's record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Rec {
    /// Device offset in units; while writing, the batch's id.
    unit: u32,
    /// Length and flags.
    len: u32,
    cksum: u64,
}

fn flag(on: bool, f: u32) -> u32 {
    if on {
        f
    } else {
        0
    }
}

impl Rec {
    pub(super) fn cached(unit: u32, len: u32, mfu: bool, t2: bool, cksum: u64) -> Rec {
        Rec {
            unit,
            len: len | flag(mfu, MFU) | flag(t2, T2),
            cksum,
        }
    }

    /// Being written in `batch`, with bytes of checksum `cksum` (which
    /// tells this copy from an older one of the key in the same batch).
    fn writing(batch: u32, len: u32, mfu: bool, t2: bool, cksum: u64) -> Rec {
        Rec {
            unit: batch,
            len: len | WRITING | flag(mfu, MFU) | flag(t2, T2),
            cksum,
        }
    }

    pub(super) fn is_writing(&self) -> bool {
        self.len & WRITING != 0
    }

    pub(super) fn unit(&self) -> u32 {
        self.unit
    }

    pub(super) fn len(&self) -> u32 {
        self.len & !FLAGS
    }

    /// On the tier's second list.
    pub(super) fn t2(&self) -> bool {
        self.len & T2 != 0
    }

    /// Read back since it was written.
    pub(super) fn referenced(&self) -> bool {
        self.len & REF != 0
    }

    /// Device units it covers, `[unit, end)` (cached records).
    pub(super) fn end(&self) -> u64 {
        self.unit as u64 + self.device_bytes() / super::device::UNIT
    }

    /// The device bytes its copy takes: its length in whole units.
    pub(super) fn device_bytes(&self) -> u64 {
        super::device::padded(self.len() as u64)
    }

    pub(super) fn mfu(&self) -> bool {
        self.len & MFU != 0
    }

    pub(super) fn cksum(&self) -> u64 {
        self.cksum
    }

    /// This record with its reference bit set (tests).
    #[cfg(all(test, not(loom)))]
    pub(super) fn read_back(self) -> Rec {
        Rec {
            len: self.len | REF,
            ..self
        }
    }

    /// The same cached copy as `other` (its lists and bit aside).
    pub(super) fn same_copy(&self, other: &Rec) -> bool {
        !self.is_writing()
            && !other.is_writing()
            && self.unit == other.unit
            && self.len() == other.len()
            && self.cksum == other.cksum
    }
}

/// A cached record's sector checksums, and the bytes read of it in parts
/// since it was last read whole.
struct Parts {
    /// The checksum of the whole buffer they were taken from (the record's).
    cksum: u64,
    sums: Box<[u64]>,
    read: u64,
}

/// What a read of part of a buffer needs: its record, the first sector
/// the part meets, and the checksums of the sectors it meets.
pub(super) struct Part {
    pub(super) rec: Rec,
    pub(super) first: usize,
    pub(super) sums: Vec<u64>,
}

/// One stripe: the records, and the sector checksums of some of them.
struct Stripe<K> {
    recs: HashMap<K, Rec, foldhash::fast::RandomState>,
    parts: HashMap<K, Parts, foldhash::fast::RandomState>,
}

impl<K: Key> Stripe<K> {
    /// Drops `key`'s record and its sector checksums.
    fn remove(&mut self, key: &K) -> Option<Rec> {
        self.parts.remove(key);
        self.recs.remove(key)
    }
}

/// Keys a running rebuild must not bring back (invalidated meanwhile).
struct Tombstones<K> {
    active: bool,
    keys: HashSet<K, foldhash::fast::RandomState>,
}

pub(super) struct Index<K> {
    hasher: foldhash::fast::RandomState,
    stripes: Box<[Mutex<Stripe<K>>]>,
    tombstones: Mutex<Tombstones<K>>,
    /// Device bytes (whole units) of the cached records on T1 and on T2.
    list_bytes: [AtomicU64; 2],
    /// Bytes of buffers of the cached records.
    data_bytes: AtomicU64,
}

impl<K: Key> Index<K> {
    pub(super) fn new() -> Index<K> {
        Index {
            hasher: Default::default(),
            stripes: (0..STRIPES)
                .map(|_| {
                    Mutex::new(Stripe {
                        recs: HashMap::default(),
                        parts: HashMap::default(),
                    })
                })
                .collect(),
            tombstones: Mutex::new(Tombstones {
                active: false,
                keys: HashSet::default(),
            }),
            list_bytes: [AtomicU64::new(0), AtomicU64::new(0)],
            data_bytes: AtomicU64::new(0),
        }
    }

    /// A fingerprint of `key` (the tier's history remembers these).
    pub(super) fn fingerprint(&self, key: &K) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Counts a cached record in (`add`) or out of its list's bytes.
    fn account(&self, r: &Rec, add: bool) {
        if r.is_writing() {
            return;
        }
        let b = &self.list_bytes[usize::from(r.t2())];
        if add {
            b.fetch_add(r.device_bytes(), Ordering::Relaxed);
            self.data_bytes.fetch_add(r.len() as u64, Ordering::Relaxed);
        } else {
            b.fetch_sub(r.device_bytes(), Ordering::Relaxed);
            self.data_bytes.fetch_sub(r.len() as u64, Ordering::Relaxed);
        }
    }

    /// Bytes of buffers of the cached records.
    pub(super) fn data_bytes(&self) -> u64 {
        self.data_bytes.load(Ordering::Relaxed)
    }

    /// Device bytes of the cached records on (T1, T2).
    pub(super) fn list_bytes(&self) -> (u64, u64) {
        (
            self.list_bytes[0].load(Ordering::Relaxed),
            self.list_bytes[1].load(Ordering::Relaxed),
        )
    }

    fn stripe(&self, key: &K) -> &Mutex<Stripe<K>> {
        &self.stripes[(self.fingerprint(key) >> 58) as usize % STRIPES]
    }

    pub(super) fn get(&self, key: &K) -> Option<Rec> {
        self.stripe(key).lock().recs.get(key).copied()
    }

    /// Marks `key` as being written in batch `batch` with bytes of
    /// checksum `cksum`, onto the tier list that `list` chooses (T2 if
    /// true; called once the key is known to be absent, with the stripe
    /// lock held); `None` if the index already has a record of it, else
    /// whether it goes onto T2.
    pub(super) fn begin_write(
        &self,
        key: &K,
        batch: u32,
        len: u32,
        mfu: bool,
        cksum: u64,
        list: impl FnOnce() -> bool,
    ) -> Option<bool> {
        let mut map = self.stripe(key).lock();
        if map.recs.contains_key(key) {
            return None;
        }
        let t2 = list();
        map.recs
            .insert(key.clone(), Rec::writing(batch, len, mfu, t2, cksum));
        Some(t2)
    }

    /// The hand keeps `key`'s cached record `old` where it is, onto T2
    /// if `t2`, its reference bit set if `referenced`: the record as it is
    /// now, or `None` if it is no longer `old` (a reference bit set since
    /// is kept, unless the hand judged it).
    pub(super) fn keep(&self, key: &K, old: &Rec, t2: bool, referenced: bool) -> Option<Rec> {
        let mut map = self.stripe(key).lock();
        let r = map.recs.get_mut(key).filter(|r| r.same_copy(old))?;
        self.account(r, false);
        let read_since = r.referenced() && !old.referenced();
        r.len = (r.len & !(T2 | REF)) | flag(t2, T2) | flag(referenced || read_since, REF);
        self.account(r, true);
        Some(*r)
    }

    /// The write of `key`'s bytes of checksum `cksum` in `batch` is on the
    /// device at `unit`: true if its record was still that copy's (not
    /// invalidated meanwhile, nor added to the batch again with newer
    /// bytes). `sums`: the bytes' sector checksums, if they have them.
    pub(super) fn finish_write(
        &self,
        key: &K,
        batch: u32,
        unit: u32,
        cksum: u64,
        sums: Option<Box<[u64]>>,
    ) -> bool {
        let mut map = self.stripe(key).lock();
        match map.recs.get_mut(key) {
            Some(r) if r.is_writing() && r.unit == batch && r.cksum == cksum => {
                *r = Rec::cached(unit, r.len(), r.mfu(), r.t2(), cksum);
                self.account(r, true);
                if let Some(sums) = sums {
                    let parts = Parts {
                        cksum,
                        sums,
                        read: 0,
                    };
                    map.parts.insert(key.clone(), parts);
                }
                true
            }
            _ => false,
        }
    }

    /// `key`'s record was read whole: if it is still `rec`, its sector
    /// checksums are `sums()` (taken only if it has none yet) and no part of
    /// it has been read since.
    pub(super) fn read_whole(&self, key: &K, rec: &Rec, sums: impl FnOnce() -> Box<[u64]>) {
        let mut map = self.stripe(key).lock();
        if !map.recs.get(key).is_some_and(|r| r.same_copy(rec)) {
            return;
        }
        match map.parts.get_mut(key) {
            Some(p) if p.cksum == rec.cksum => p.read = 0,
            _ => {
                let parts = Parts {
                    cksum: rec.cksum,
                    sums: sums(),
                    read: 0,
                };
                map.parts.insert(key.clone(), parts);
            }
        }
    }

    /// What a read of bytes `range` (not empty, within the buffer) of
    /// `key`'s cached record needs, counted as read: `None` if there is no
    /// such record, it has no sector checksums, or the parts read of it
    /// since its last whole read would pass half of it with this one (then
    /// it is worth reading whole).
    pub(super) fn part(&self, key: &K, range: &Range<u64>) -> Option<Part> {
        let mut map = self.stripe(key).lock();
        let rec = map.recs.get(key).copied().filter(|r| !r.is_writing())?;
        let p = map.parts.get_mut(key).filter(|p| p.cksum == rec.cksum)?;
        let sectors = covering(range);
        let len = range.end - range.start;
        let limit = rec.len() as u64 / 2;
        if range.end > rec.len() as u64 || sectors.end > p.sums.len() || p.read + len > limit {
            return None;
        }
        p.read += len;
        Some(Part {
            rec,
            first: sectors.start,
            sums: p.sums[sectors].to_vec(),
        })
    }

    /// `key`'s record is its copy of checksum `cksum` being written in
    /// `batch`.
    pub(super) fn writing_in(&self, key: &K, batch: u32, cksum: u64) -> bool {
        self.stripe(key)
            .lock()
            .recs
            .get(key)
            .is_some_and(|r| r.is_writing() && r.unit == batch && r.cksum == cksum)
    }

    /// A rebuild found a tombstone of `key`: its entries in older log
    /// blocks must not come back.
    pub(super) fn tombstone(&self, key: K) {
        let mut t = self.tombstones.lock();
        if t.active {
            t.keys.insert(key);
        }
    }

    /// Sets the reference bit of `key`'s record if it is still `rec`.
    pub(super) fn reference(&self, key: &K, rec: &Rec) {
        let mut map = self.stripe(key).lock();
        if let Some(r) = map.recs.get_mut(key).filter(|r| *r == rec) {
            r.len |= REF;
        }
    }

    /// Drops `key`'s record of `batch` (a write that failed or was dropped).
    pub(super) fn abort_write(&self, key: &K, batch: u32) {
        let mut map = self.stripe(key).lock();
        if map
            .recs
            .get(key)
            .is_some_and(|r| r.is_writing() && r.unit == batch)
        {
            map.remove(key);
        }
    }

    /// Drops `key`'s record if it is still the copy `rec` is (its lists
    /// and reference bit may have changed since: a read meanwhile does not
    /// save a copy the hand is about to overwrite); true if it was.
    pub(super) fn remove_if(&self, key: &K, rec: &Rec) -> bool {
        let mut map = self.stripe(key).lock();
        if let Some(now) = map.recs.get(key).copied().filter(|r| r.same_copy(rec)) {
            map.remove(key);
            self.account(&now, false);
            return true;
        }
        false
    }

    /// Drops `key`'s record (rewritten or removed in memory), and keeps a
    /// rebuild in progress from bringing an older one back. Returns the
    /// record dropped.
    pub(super) fn invalidate(&self, key: &K) -> Option<Rec> {
        let mut map = self.stripe(key).lock();
        let old = map.remove(key);
        if let Some(r) = &old {
            self.account(r, false);
        }
        let mut t = self.tombstones.lock();
        if t.active {
            t.keys.insert(key.clone());
        }
        old
    }

    /// A rebuild starts (`true`) or ends.
    pub(super) fn set_rebuilding(&self, on: bool) {
        let mut t = self.tombstones.lock();
        t.active = on;
        if !on {
            t.keys = HashSet::default();
        }
    }

    /// A record found by a rebuild: kept unless the key has a record
    /// already (newer) or was invalidated since the start.
    pub(super) fn restore(&self, key: K, rec: Rec) -> bool {
        let mut map = self.stripe(&key).lock();
        if map.recs.contains_key(&key) || self.tombstones.lock().keys.contains(&key) {
            return false;
        }
        self.account(&rec, true);
        map.recs.insert(key, rec);
        true
    }

    /// The cached records whose extents meet `[start, end)` (unit
    /// offsets), in device order.
    pub(super) fn records_in(&self, start: u64, end: u64) -> Vec<(K, Rec)> {
        let mut out = Vec::new();
        for s in self.stripes.iter() {
            for (k, r) in s.lock().recs.iter() {
                if !r.is_writing() && (r.unit as u64) < end && start < r.end() {
                    out.push((k.clone(), *r));
                }
            }
        }
        out.sort_unstable_by_key(|(_, r)| r.unit);
        out
    }

    /// Memory held by the maps: their buckets (key and record, key and
    /// sector checksums) and control bytes, at their current capacity, and
    /// the checksums themselves.
    pub(super) fn memory(&self) -> u64 {
        let per = (std::mem::size_of::<(K, Rec)>() + 1) as u64;
        let per_parts = (std::mem::size_of::<(K, Parts)>() + 1) as u64;
        self.stripes
            .iter()
            .map(|s| {
                let s = s.lock();
                let sums: usize = s.parts.values().map(|p| p.sums.len()).sum();
                s.recs.capacity() as u64 * per
                    + s.parts.capacity() as u64 * per_parts
                    + sums as u64 * 8
            })
            .sum()
    }

    /// Records (cached or being written).
    #[cfg(all(test, not(loom)))]
    pub(super) fn len(&self) -> usize {
        self.stripes.iter().map(|s| s.lock().recs.len()).sum()
    }
}
