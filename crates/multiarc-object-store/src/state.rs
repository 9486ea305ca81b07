//! What a cached store's operations (and its streams, which outlive a
//! call) share: the store behind it, the block cache, the settings, the
//! counters, the metadata cache and the metadata fetches in flight.

use crate::error::{self, FetchError};
use crate::key::{ObjectBlockKey, ObjectIdentity};
use crate::metadata::{MetadataCache, ObjectHead};
use crate::readahead::Readahead;
use crate::stats::Counters;
use futures::future::{BoxFuture, FutureExt, Shared};
use multiarc::lock::poison::LockUnpoisoned;
use multiarc::Cache;
use object_store::path::Path;
use object_store::{GetOptions, ObjectStore, Result};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

/// How many times a read starts again when the object changes under it
/// before it gives up with `Precondition`.
const READ_ATTEMPTS: u32 = 3;

/// A metadata fetch, shared by the reads that need it meanwhile.
type HeadFetch = Shared<BoxFuture<'static, Result<Arc<ObjectHead>, Arc<object_store::Error>>>>;

/// The settings a cached store reads with.
#[derive(Clone, Debug)]
pub(crate) struct ReadConfig {
    pub(crate) block_size: u64,
    /// Blocks in one coalesced fetch, at most.
    pub(crate) max_fetch_blocks: u64,
    /// Blocks kept by readers' `LastBlock`s at once, at most (an
    /// eighth of memory's blocks, at least one).
    pub(crate) max_kept_blocks: u64,
    pub(crate) namespace: String,
}

/// What a cached store's operations (and its streams, which outlive a
/// call) share.
pub(crate) struct State<S> {
    /// Shared with metadata fetches in flight (which hold no `State`, so
    /// that a fetch left in `heads_in_flight` makes no cycle).
    pub(crate) inner: Arc<S>,
    /// Shared with the [`bytes::Bytes`] that reads return: each owns a hold
    /// on its block (see `read::load_through_cache`).
    pub(crate) cache: Arc<Cache<ObjectBlockKey>>,
    pub(crate) config: ReadConfig,
    pub(crate) counters: Counters,
    pub(crate) readahead: Readahead,
    /// Blocks kept by readers' `LastBlock`s now.
    pub(crate) kept_blocks: Arc<AtomicU64>,
    pub(crate) metadata: MetadataCache,
    /// Metadata fetches in flight, by location (with an id, so that only
    /// the fetch that registered an entry removes it).
    heads_in_flight: Mutex<HashMap<Path, (u64, HeadFetch)>>,
    next_head_id: AtomicU64,
}

impl<S> State<S> {
    pub(crate) fn new(
        inner: S,
        cache: Cache<ObjectBlockKey>,
        config: ReadConfig,
        metadata: MetadataCache,
        readahead: Readahead,
    ) -> State<S> {
        State {
            inner: Arc::new(inner),
            cache: Arc::new(cache),
            config,
            counters: Counters::default(),
            readahead,
            kept_blocks: Arc::default(),
            metadata,
            heads_in_flight: Mutex::new(HashMap::new()),
            next_head_id: AtomicU64::new(0),
        }
    }
}

impl<S: ObjectStore> State<S> {
    /// The metadata of `location`: cached and fresh, or fetched (one fetch
    /// per location at a time, shared by the reads that need it).
    pub(crate) async fn head(self: &Arc<Self>, location: &Path) -> Result<Arc<ObjectHead>> {
        if let Some(head) = self.metadata.fresh(location) {
            Counters::add(&self.counters.metadata_hits, 1);
            return Ok(head);
        }
        let fetch = {
            let mut in_flight = self.heads_in_flight.lock_unpoisoned();
            match in_flight.get(location) {
                Some((_, fetch)) => {
                    Counters::add(&self.counters.metadata_waits, 1);
                    fetch.clone()
                }
                None => {
                    let id = self.next_head_id.fetch_add(1, Ordering::Relaxed);
                    let fetch = fetch_head(
                        Arc::clone(&self.inner),
                        Arc::downgrade(self),
                        location.clone(),
                        id,
                    )
                    .boxed()
                    .shared();
                    in_flight.insert(location.clone(), (id, fetch.clone()));
                    fetch
                }
            }
        };
        fetch.await.map_err(|e| error::share(&e))
    }

    /// Forgets `location`'s metadata, its metadata fetch in flight (later
    /// reads fetch it again) and the blocks of the version it described.
    pub(crate) fn invalidate(&self, location: &Path) {
        Counters::add(&self.counters.invalidations, 1);
        let old = self.metadata.invalidate(location);
        self.heads_in_flight.lock_unpoisoned().remove(location);
        if let Some(old) = old {
            let block_size = self.config.block_size;
            let identity =
                ObjectIdentity::of(&self.config.namespace, location, &old.meta, block_size);
            for block in 0..old.meta.size.div_ceil(block_size) {
                self.cache.remove(&identity.block(block));
            }
        }
    }

    /// After a read of the version `head` failed with `err`: `Ok` to start
    /// again (the object changed; `attempt` counts it), or the error to
    /// return.
    pub(crate) fn after_failed_read(
        &self,
        location: &Path,
        head: &Arc<ObjectHead>,
        err: &FetchError,
        attempt: &mut u32,
    ) -> Result<()> {
        self.metadata.forget_if(location, head);
        match err {
            FetchError::Changed(why) => {
                Counters::add(&self.counters.version_changes, 1);
                *attempt += 1;
                log::debug!("{location}: {why}; reading again ({attempt})");
                if *attempt >= READ_ATTEMPTS {
                    return Err(object_store::Error::Precondition {
                        path: location.to_string(),
                        source: format!(
                            "the object changed during the read {READ_ATTEMPTS} times in a row; last: {why}"
                        )
                        .into(),
                    });
                }
                Ok(())
            }
            FetchError::Store(e) => Err(error::share(e)),
        }
    }

    /// True if reads of this version can be cached: it has an ETag or a
    /// version to key its blocks and condition their fetches on.
    pub(crate) fn cacheable(head: &ObjectHead) -> bool {
        head.meta.e_tag.is_some() || head.meta.version.is_some()
    }

    /// Counts a read passed to the store as it is, not cached.
    pub(crate) fn count_passthrough_read(&self) {
        Counters::add(&self.counters.store_requests, 1);
        Counters::add(&self.counters.passthrough_reads, 1);
    }
}

/// One HEAD of `location`; then, if the store is still there, the answer
/// is cached (unless a write invalidated anything meanwhile) and the
/// in-flight entry `id` is removed.
async fn fetch_head<S: ObjectStore>(
    inner: Arc<S>,
    state: Weak<State<S>>,
    location: Path,
    id: u64,
) -> Result<Arc<ObjectHead>, Arc<object_store::Error>> {
    let epoch = state.upgrade().map(|state| {
        Counters::add(&state.counters.store_requests, 1);
        Counters::add(&state.counters.metadata_requests, 1);
        state.metadata.epoch()
    });
    let sent = Instant::now();
    let result = inner
        .get_opts(&location, GetOptions::new().with_head(true))
        .await
        .map(|response| {
            Arc::new(ObjectHead {
                meta: response.meta,
                attributes: response.attributes,
            })
        })
        .map_err(Arc::new);
    if let Some(state) = state.upgrade() {
        if let (Ok(head), Some(epoch)) = (&result, epoch) {
            // Aged from when it was asked for: the TTL bounds how old the
            // answer may be.
            state
                .metadata
                .insert(&location, Arc::clone(head), sent, epoch);
        }
        let mut in_flight = state.heads_in_flight.lock_unpoisoned();
        if in_flight.get(&location).is_some_and(|(i, _)| *i == id) {
            in_flight.remove(&location);
        }
    }
    result
}
