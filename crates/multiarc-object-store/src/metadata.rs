//! The metadata cache: each object's last HEAD answer, kept for a TTL.

use object_store::path::Path;
use object_store::{Attributes, ObjectMeta};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
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
    entries: Mutex<HashMap<Path, Entry>>,
    /// Counts invalidations.
    epoch: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl MetadataCache {
    pub(crate) fn new(ttl: Option<Duration>) -> MetadataCache {
        MetadataCache {
            ttl,
            entries: Mutex::new(HashMap::new()),
            epoch: AtomicU64::new(0),
        }
    }

    /// The cached head of `location`, if it is younger than the TTL.
    pub(crate) fn fresh(&self, location: &Path) -> Option<Arc<ObjectHead>> {
        let entries = lock(&self.entries);
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
        let mut entries = lock(&self.entries);
        // Checked under the lock that `invalidate` takes after bumping it.
        if self.epoch.load(Ordering::SeqCst) != epoch {
            return;
        }
        entries.insert(location.clone(), Entry { head, fetched });
    }

    /// Forgets `location`'s head (whatever its age) and returns it.
    pub(crate) fn invalidate(&self, location: &Path) -> Option<Arc<ObjectHead>> {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        lock(&self.entries).remove(location).map(|e| e.head)
    }

    /// Forgets `location`'s head if it is still `stale` (a read found that
    /// the object changed), without counting as a write.
    pub(crate) fn forget_if(&self, location: &Path, stale: &Arc<ObjectHead>) {
        let mut entries = lock(&self.entries);
        if entries
            .get(location)
            .is_some_and(|e| Arc::ptr_eq(&e.head, stale))
        {
            entries.remove(location);
        }
    }
}
