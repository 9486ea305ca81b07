//! The second tier's in-memory headers (OpenZFS's L2-only `arc_buf_hdr_t`):
//! per key, where its copy lies on the device, its length, checksum and
//! the list it was fed from; or that it is being written. Striped maps;
//! 16 bytes per record beside the key.

use crate::key::Key;
use crate::lock::Mutex;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;

const STRIPES: usize = 64;
/// `len` flag: fed from the MFU list.
const MFU: u32 = 1 << 31;
/// `len` flag: in a batch being written (`unit` is then the batch's id).
const WRITING: u32 = 1 << 30;
/// The largest buffer a record describes (below both flags).
pub(crate) const MAX_LEN: u64 = (1 << 30) - 1;

/// One key's record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rec {
    /// Device offset in units; while writing, the batch's id.
    unit: u32,
    /// Length and flags.
    len: u32,
    cksum: u64,
}

impl Rec {
    pub(crate) fn cached(unit: u32, len: u32, mfu: bool, cksum: u64) -> Rec {
        Rec {
            unit,
            len: len | if mfu { MFU } else { 0 },
            cksum,
        }
    }

    fn writing(batch: u32, len: u32, mfu: bool) -> Rec {
        Rec {
            unit: batch,
            len: len | WRITING | if mfu { MFU } else { 0 },
            cksum: 0,
        }
    }

    pub(crate) fn is_writing(&self) -> bool {
        self.len & WRITING != 0
    }

    pub(crate) fn unit(&self) -> u32 {
        self.unit
    }

    pub(crate) fn len(&self) -> u32 {
        self.len & !(MFU | WRITING)
    }

    pub(crate) fn mfu(&self) -> bool {
        self.len & MFU != 0
    }

    pub(crate) fn cksum(&self) -> u64 {
        self.cksum
    }
}

/// Keys a running rebuild must not bring back (invalidated meanwhile).
struct Tombstones<K> {
    active: bool,
    keys: HashSet<K, foldhash::fast::RandomState>,
}

pub(crate) struct Index<K> {
    hasher: foldhash::fast::RandomState,
    stripes: Box<[Mutex<HashMap<K, Rec, foldhash::fast::RandomState>>]>,
    tombstones: Mutex<Tombstones<K>>,
}

impl<K: Key> Index<K> {
    pub(crate) fn new() -> Index<K> {
        Index {
            hasher: Default::default(),
            stripes: (0..STRIPES)
                .map(|_| Mutex::new(HashMap::default()))
                .collect(),
            tombstones: Mutex::new(Tombstones {
                active: false,
                keys: HashSet::default(),
            }),
        }
    }

    fn stripe(&self, key: &K) -> &Mutex<HashMap<K, Rec, foldhash::fast::RandomState>> {
        &self.stripes[(self.hasher.hash_one(key) >> 58) as usize % STRIPES]
    }

    pub(crate) fn get(&self, key: &K) -> Option<Rec> {
        self.stripe(key).lock().get(key).copied()
    }

    /// Marks `key` as being written in batch `batch`; false if the index
    /// already has a record of it.
    pub(crate) fn begin_write(&self, key: &K, batch: u32, len: u32, mfu: bool) -> bool {
        let mut map = self.stripe(key).lock();
        if map.contains_key(key) {
            return false;
        }
        map.insert(key.clone(), Rec::writing(batch, len, mfu));
        true
    }

    /// The write of `key` in `batch` is on the device at `unit`: true if
    /// its record was still that batch's (not invalidated meanwhile).
    pub(crate) fn finish_write(&self, key: &K, batch: u32, unit: u32, cksum: u64) -> bool {
        let mut map = self.stripe(key).lock();
        match map.get_mut(key) {
            Some(r) if r.is_writing() && r.unit == batch => {
                *r = Rec::cached(unit, r.len(), r.mfu(), cksum);
                true
            }
            _ => false,
        }
    }

    /// Drops `key`'s record of `batch` (a write that failed or was dropped).
    pub(crate) fn abort_write(&self, key: &K, batch: u32) {
        let mut map = self.stripe(key).lock();
        if map
            .get(key)
            .is_some_and(|r| r.is_writing() && r.unit == batch)
        {
            map.remove(key);
        }
    }

    /// Drops `key`'s record if it is still `rec`; true if it was.
    pub(crate) fn remove_if(&self, key: &K, rec: &Rec) -> bool {
        let mut map = self.stripe(key).lock();
        if map.get(key) == Some(rec) {
            map.remove(key);
            return true;
        }
        false
    }

    /// Drops `key`'s record (rewritten or removed in memory), and keeps a
    /// rebuild in progress from bringing an older one back. Returns the
    /// record dropped.
    pub(crate) fn invalidate(&self, key: &K) -> Option<Rec> {
        let mut map = self.stripe(key).lock();
        let old = map.remove(key);
        let mut t = self.tombstones.lock();
        if t.active {
            t.keys.insert(key.clone());
        }
        old
    }

    /// A rebuild starts (`true`) or ends.
    pub(crate) fn set_rebuilding(&self, on: bool) {
        let mut t = self.tombstones.lock();
        t.active = on;
        if !on {
            t.keys = HashSet::default();
        }
    }

    /// A record found by a rebuild: kept unless the key has a record
    /// already (newer) or was invalidated since the start.
    pub(crate) fn restore(&self, key: K, rec: Rec) -> bool {
        let mut map = self.stripe(&key).lock();
        if map.contains_key(&key) || self.tombstones.lock().keys.contains(&key) {
            return false;
        }
        map.insert(key, rec);
        true
    }

    /// Drops every cached record whose extent meets `[start, end)` (unit
    /// offsets); returns (records, data bytes) dropped.
    pub(crate) fn evict_range(&self, start: u64, end: u64) -> (u64, u64) {
        let (mut n, mut bytes) = (0, 0);
        for s in self.stripes.iter() {
            s.lock().retain(|_, r| {
                if r.is_writing() {
                    return true;
                }
                let lo = r.unit as u64;
                let hi = lo + (r.len() as u64).div_ceil(super::device::UNIT).max(1);
                let hit = lo < end && start < hi;
                if hit {
                    n += 1;
                    bytes += r.len() as u64;
                }
                !hit
            });
        }
        (n, bytes)
    }

    /// Memory held by the maps: their buckets (key and record) and control
    /// bytes, at their current capacity.
    pub(crate) fn memory(&self) -> u64 {
        let per = (std::mem::size_of::<(K, Rec)>() + 1) as u64;
        self.stripes
            .iter()
            .map(|s| s.lock().capacity() as u64 * per)
            .sum()
    }

    /// Records (cached or being written).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn len(&self) -> usize {
        self.stripes.iter().map(|s| s.lock().len()).sum()
    }
}
