//! The metadata cache: each object's last HEAD answer, kept for a TTL.

use multiarc::lock::poison::LockUnpoisoned;
use object_store::path::Path;
use object_store::{Attributes, ObjectMeta};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a HEAD of an object said: the version a read serves.
#[derive(Debug)]
pub(crate) struct ObjectHead {
    pub(crate) meta: ObjectMeta,
    pub(crate) attributes: Attributes,
}

struct Entry {
    head: Arc<ObjectHead>,
    fetched: Instant,
}

/// Each object's last HEAD answer, served while younger than the TTL
/// (`None`: forever).
///
/// A HEAD that was in flight while a write through the cached store
/// invalidated anything is not cached: it may describe the version before
/// the write (the write epoch says so; see [`MetadataCache::epoch`]).
pub(crate) struct MetadataCache {
    ttl: Option<Duration>,
    /// Entries kept at most: past it, expired ones go, then arbitrary ones.
    max_entries: usize,
    entries: Mutex<HashMap<Path, Entry>>,
    /// Counts invalidations.
    epoch: AtomicU64,
}

impl MetadataCache {
    pub(crate) fn new(ttl: Option<Duration>, max_entries: usize) -> MetadataCache {
        MetadataCache {
            ttl,
            max_entries: max_entries.max(1),
            entries: Mutex::new(HashMap::new()),
            epoch: AtomicU64::new(0),
        }
    }

    /// The cached head of `location`, if it is younger than the TTL.
    pub(crate) fn fresh(&self, location: &Path) -> Option<Arc<ObjectHead>> {
        let entries = self.entries.lock_unpoisoned();
        let entry = entries.get(location)?;
        match self.ttl {
            Some(ttl) if entry.fetched.elapsed() >= ttl => None,
            _ => Some(Arc::clone(&entry.head)),
        }
    }

    /// The write epoch: read before a HEAD is sent, and handed back to
    /// [`MetadataCache::insert`] with its answer.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Caches `head` as fetched at `fetched`, unless an invalidation
    /// happened since `epoch` was read (the answer may then be older than
    /// a write) or the TTL is zero.
    pub(crate) fn insert(
        &self,
        location: &Path,
        head: Arc<ObjectHead>,
        fetched: Instant,
        epoch: u64,
    ) {
        if self.ttl == Some(Duration::ZERO) {
            return;
        }
        let mut entries = self.entries.lock_unpoisoned();
        // Checked under the lock that `invalidate` takes after bumping it.
        if self.epoch.load(Ordering::SeqCst) != epoch {
            return;
        }
        if entries.len() >= self.max_entries && !entries.contains_key(location) {
            self.make_room(&mut entries);
        }
        entries.insert(location.clone(), Entry { head, fetched });
    }

    /// Frees an eighth of the entries (or more): the expired ones, then
    /// arbitrary ones (a forgotten entry costs one HEAD later, never
    /// correctness).
    fn make_room(&self, entries: &mut HashMap<Path, Entry>) {
        if let Some(ttl) = self.ttl {
            entries.retain(|_, e| e.fetched.elapsed() < ttl);
        }
        let target = self.max_entries - self.max_entries / 8 - 1;
        if entries.len() > target {
            let excess = entries.len() - target;
            let victims: Vec<Path> = entries.keys().take(excess).cloned().collect();
            for path in victims {
                entries.remove(&path);
            }
        }
    }

    /// Forgets `location`'s head (whatever its age) and returns it.
    pub(crate) fn invalidate(&self, location: &Path) -> Option<Arc<ObjectHead>> {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        self.entries
            .lock_unpoisoned()
            .remove(location)
            .map(|e| e.head)
    }

    /// Forgets `location`'s head if it is still `stale` (a read found that
    /// the object changed), without counting as a write.
    pub(crate) fn forget_if(&self, location: &Path, stale: &Arc<ObjectHead>) {
        let mut entries = self.entries.lock_unpoisoned();
        if entries
            .get(location)
            .is_some_and(|e| Arc::ptr_eq(&e.head, stale))
        {
            entries.remove(location);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(size: u64) -> Arc<ObjectHead> {
        Arc::new(ObjectHead {
            meta: ObjectMeta {
                location: Path::from("x"),
                last_modified: Default::default(),
                size,
                e_tag: Some(format!("e{size}")),
                version: None,
            },
            attributes: Attributes::default(),
        })
    }

    #[test]
    fn entries_stay_within_the_bound() {
        let cache = MetadataCache::new(None, 64);
        for i in 0..1000u64 {
            cache.insert(
                &Path::from(format!("o{i}")),
                head(i),
                Instant::now(),
                cache.epoch(),
            );
            assert!(cache.entries.lock_unpoisoned().len() <= 64);
        }
        // The last one inserted is there.
        assert_eq!(cache.fresh(&Path::from("o999")).unwrap().meta.size, 999);
    }

    #[test]
    fn an_answer_older_than_an_invalidation_is_not_cached() {
        let cache = MetadataCache::new(None, 64);
        let path = Path::from("o");
        let epoch = cache.epoch();
        cache.invalidate(&path);
        cache.insert(&path, head(1), Instant::now(), epoch);
        assert!(cache.fresh(&path).is_none());
        cache.insert(&path, head(2), Instant::now(), cache.epoch());
        assert_eq!(cache.fresh(&path).unwrap().meta.size, 2);
    }

    #[test]
    fn entries_expire_after_the_ttl() {
        let cache = MetadataCache::new(Some(Duration::from_millis(30)), 64);
        let path = Path::from("o");
        cache.insert(&path, head(1), Instant::now(), cache.epoch());
        assert!(cache.fresh(&path).is_some());
        std::thread::sleep(Duration::from_millis(40));
        assert!(cache.fresh(&path).is_none());
        let zero = MetadataCache::new(Some(Duration::ZERO), 64);
        zero.insert(&path, head(1), Instant::now(), zero.epoch());
        assert!(zero.fresh(&path).is_none());
    }
}
