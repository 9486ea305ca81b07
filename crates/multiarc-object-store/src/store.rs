//! [`CachedStore`]: the `ObjectStore` in front of another, and its shared state.

use crate::config::{Builder, ReadConfig};
use crate::error::{self, FetchError};
use crate::key::{ObjectBlockKey, ObjectIdentity};
use crate::lock;
use crate::metadata::{MetadataCache, ObjectHead};
use crate::read;
use crate::readahead::Readahead;
use crate::stats::{CachedStoreStats, Counters};
use crate::uses::UsedBlocks;
use async_trait::async_trait;
use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt, Shared};
use futures::stream::BoxStream;
use futures::StreamExt;
use multiarc::Cache;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
    UploadPart,
};
use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

/// How many times a read starts again when the object changes under it
/// before it gives up with `Precondition`.
const READ_ATTEMPTS: u32 = 3;

/// A metadata fetch, shared by the reads that need it meanwhile.
type HeadFetch = Shared<BoxFuture<'static, Result<Arc<ObjectHead>, Arc<object_store::Error>>>>;

/// An [`ObjectStore`] that serves reads of `S` from a multiarc block cache
/// (memory, plus an optional second tier on a local device). See the crate
/// documentation for what it caches and the consistency that results.
pub struct CachedStore<S> {
    state: Arc<State<S>>,
}

/// One version of one object, as [`CachedStore::version`] names it for
/// [`CachedStore::read_in_memory`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachedVersion {
    identity: ObjectIdentity,
    size: u64,
}

/// The rest of the block a reader's last read ended in (from where it
/// ended), for [`CachedStore::read_in_memory`]: one per reader (a file
/// handle, say), empty at first.
///
/// A reader that goes through a block in several reads in order (a file
/// read 128 KiB at a time over blocks of 256 KiB, or reads that straddle
/// blocks) then looks each block up once, so the cache counts one use of
/// it, not one per read: a block read once, sequentially, is not taken for
/// one read twice and promoted to the frequency list. (Reads of one reader
/// at once, or out of order, may still look a block up again.) The bytes
/// kept are a hold on the cached block (it stays in memory until the
/// reader's next read, or until this is dropped) or, from
/// [`CachedStore::keep_last`], a copy. The blocks a store's readers keep
/// at once are bounded (an eighth of its memory's blocks): past that, a
/// read keeps nothing, and the next one looks its block up again.
#[derive(Default)]
pub struct LastBlock(Option<Kept>);

struct Kept {
    key: ObjectBlockKey,
    /// The object's offset of `bytes`' first byte.
    at: u64,
    bytes: Bytes,
    _counted: KeptCount,
}

/// One of the store's kept blocks, counted until dropped.
struct KeptCount(Arc<AtomicU64>);

impl KeptCount {
    /// One more kept block, if fewer than `max` are.
    fn take(count: &Arc<AtomicU64>, max: u64) -> Option<KeptCount> {
        count
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| KeptCount(Arc::clone(count)))
    }
}

impl Drop for KeptCount {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for LastBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LastBlock")
            .field(&self.0.as_ref().map(|k| k.at..k.at + k.bytes.len() as u64))
            .finish()
    }
}

impl CachedVersion {
    /// The cache key of block `block` of this version (as
    /// [`CachedStore::block_key`], without hashing the identity again).
    pub fn block(&self, block: u64) -> ObjectBlockKey {
        self.identity.block(block)
    }
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
    /// Blocks kept by readers' [`LastBlock`]s now.
    kept_blocks: Arc<AtomicU64>,
    metadata: MetadataCache,
    /// Metadata fetches in flight, by location (with an id, so that only
    /// the fetch that registered an entry removes it).
    heads_in_flight: Mutex<HashMap<Path, (u64, HeadFetch)>>,
    next_head_id: AtomicU64,
}

impl<S: ObjectStore> CachedStore<S> {
    /// A [`Builder`] of a cached store in front of `inner`.
    pub fn builder(inner: S) -> Builder<S> {
        Builder::new(inner)
    }

    pub(crate) fn new(
        inner: S,
        cache: Cache<ObjectBlockKey>,
        config: ReadConfig,
        metadata: MetadataCache,
        readahead: Readahead,
    ) -> CachedStore<S> {
        CachedStore {
            state: Arc::new(State {
                inner: Arc::new(inner),
                cache: Arc::new(cache),
                config,
                counters: Counters::default(),
                readahead,
                kept_blocks: Arc::default(),
                metadata,
                heads_in_flight: Mutex::new(HashMap::new()),
                next_head_id: AtomicU64::new(0),
            }),
        }
    }

    /// The store the cache is in front of.
    pub fn inner(&self) -> &S {
        &self.state.inner
    }

    /// The block cache (its statistics, `l2_feed`, ...).
    pub fn cache(&self) -> &Cache<ObjectBlockKey> {
        &self.state.cache
    }

    /// The block size reads are served in.
    pub fn block_size(&self) -> u64 {
        self.state.config.block_size
    }

    /// The cache key of block `block` of the version of `location` that
    /// `meta` describes (for tools and tests that look into the cache).
    pub fn block_key(&self, location: &Path, meta: &ObjectMeta, block: u64) -> ObjectBlockKey {
        let config = &self.state.config;
        ObjectIdentity::of(&config.namespace, location, meta, config.block_size).block(block)
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> CachedStoreStats {
        self.state.counters.snapshot()
    }

    /// Blocks kept by readers' [`LastBlock`]s now (bounded: an eighth of
    /// memory's blocks).
    pub fn kept_blocks(&self) -> u64 {
        self.state.kept_blocks.load(Ordering::Relaxed)
    }

    /// Loads bytes `range` of `location` into the block cache ahead of the
    /// reads expected to need them (a prefetch), returning nothing of
    /// them: the blocks that cover the range and that memory does not
    /// hold (nor anyone is loading) come from the second tier or from the
    /// store (adjacent ones in one ranged GET, conditional on the version,
    /// as a read's), and are cached marked as read ahead
    /// ([`Cache::load_ahead_async`]): not a use of the block, so the one
    /// read that later consumes a block does not promote it to the
    /// cache's frequency list, and sequential data read once leaves
    /// memory before what is read again. `if_match`: the ETag the caller
    /// read (a `Precondition` error if the object has another). The range
    /// is clipped to the object. Returns the blocks this call loaded.
    /// An object that cannot be cached (neither ETag nor version) is not
    /// read.
    pub async fn load_ahead(
        &self,
        location: &Path,
        range: Range<u64>,
        if_match: Option<String>,
    ) -> Result<u64> {
        let state = &self.state;
        let options = GetOptions {
            if_match,
            ..GetOptions::default()
        };
        let mut attempt = 0;
        loop {
            let head = state.head(location).await?;
            if !State::<S>::cacheable(&head) {
                return Ok(0);
            }
            options.check_preconditions(&head.meta)?;
            let end = range.end.min(head.meta.size);
            if range.start >= end {
                return Ok(0);
            }
            let block_size = state.config.block_size;
            let blocks = range.start / block_size..(end - 1) / block_size + 1;
            match read::load_ahead(state, location, &head, blocks).await {
                Ok(loaded) => return Ok(loaded),
                Err(e) => state.after_failed_read(location, &head, &e, &mut attempt)?,
            }
        }
    }

    /// The version `meta` describes (as a HEAD or a read of this store
    /// returned it), named as [`CachedStore::read_in_memory`] reads it:
    /// its identity is a hash (location, ETag, version, size, mtime, block
    /// size), computed here once for a caller that reads the version often.
    pub fn version(&self, meta: &ObjectMeta) -> CachedVersion {
        let config = &self.state.config;
        CachedVersion {
            identity: ObjectIdentity::of(
                &config.namespace,
                &meta.location,
                meta,
                config.block_size,
            ),
            size: meta.size,
        }
    }

    /// Whether `version` is still the version of `location` that the store
    /// holds: as the metadata cache says within its TTL, else as a HEAD
    /// says (with a TTL of zero, always a HEAD). For a caller that must
    /// check the version at each read and then reads the blocks with
    /// [`CachedStore::read_in_memory`]. The store's errors pass through.
    pub async fn is_current(&self, location: &Path, version: &CachedVersion) -> Result<bool> {
        let head = self.state.head(location).await?;
        Ok(self.version(&head.meta) == *version)
    }

    /// Bytes `range` of `version` (clipped to its size), if memory holds
    /// every block they cover, whole: read on the caller's thread, with no
    /// metadata check and no request (`None` otherwise, and nothing counted
    /// but what the block cache counts of a lookup). The caller vouches for
    /// the version: what a reader opened, say, which it keeps reading
    /// whatever the store holds now (the blocks are that version's, never
    /// another's). Counts a memory hit per block, as a read through
    /// [`ObjectStore::get_opts`] served from memory does, and follows the
    /// read in the sequential readahead's streams. A read within one block
    /// is not copied (the [`Bytes`] own a hold on the block).
    ///
    /// `last`, if given, is the reader's own (see [`LastBlock`]): the rest
    /// of the block its last read ended in. A block found there is served
    /// from it, with no lookup; the block this read ends in, if it ends
    /// inside it, is kept there in turn (a hold on it, until the reader's
    /// next read). Random readers need not keep anything.
    ///
    /// `used`, if given, is the reader's own too (see [`UsedBlocks`]): a
    /// block it used within the last [`SAME_USE_WINDOW_MS`] is looked up
    /// without counting an access (the read is part of that use), so a
    /// block read in several pieces, at once or out of order, counts one
    /// use. Without it every lookup counts.
    ///
    /// [`SAME_USE_WINDOW_MS`]: crate::SAME_USE_WINDOW_MS
    pub fn read_in_memory(
        &self,
        version: &CachedVersion,
        range: Range<u64>,
        mut last: Option<&mut LastBlock>,
        used: Option<&UsedBlocks>,
    ) -> Option<Bytes> {
        let state = &self.state;
        let block_size = state.config.block_size;
        let range = range.start..range.end.min(version.size);
        let kept = last.as_mut().and_then(|last| last.0.take());
        if range.start >= range.end {
            return Some(Bytes::new());
        }
        let (first, last_block) = (range.start / block_size, (range.end - 1) / block_size);
        let cache = &state.cache;
        // The kept rest of the first block, if it covers the read's part.
        let kept = kept.filter(|k| k.key == version.identity.block(first) && k.at <= range.start);
        // Checked first (counting nothing), so that a read memory cannot
        // serve leaves the cache's counters to the read that follows.
        let from = first + u64::from(kept.is_some());
        if !(from..=last_block).all(|block| cache.contains(&version.identity.block(block))) {
            return None;
        }
        // Block `block` from byte `at` (of the object) to its end.
        let mut kept = kept;
        let mut rest_of = |block: u64| -> Option<(u64, Bytes)> {
            if let Some(k) = kept.take() {
                return Some((k.at, k.bytes));
            }
            let key = version.identity.block(block);
            let held = if used.is_none_or(|used| used.starts_use(block)) {
                cache.get_in_memory_owned(&key)?
            } else {
                cache.get_in_memory_same_use(&key)?
            };
            if held.len() as u64 != read::block_len(version.size, block_size, block) {
                return None;
            }
            Some((block * block_size, Bytes::from_owner(held)))
        };
        let (bytes, tail) = if first == last_block {
            let (at, block) = rest_of(first)?;
            let out = block.slice((range.start - at) as usize..(range.end - at) as usize);
            (out, (at, block))
        } else {
            let mut out = Vec::with_capacity((range.end - range.start) as usize);
            let mut tail = None;
            for block in first..=last_block {
                let (at, bytes) = rest_of(block)?;
                let from = range.start.max(at) - at;
                let to = range.end.min(at + bytes.len() as u64) - at;
                out.extend_from_slice(&bytes[from as usize..to as usize]);
                tail = Some((at, bytes));
            }
            (Bytes::from(out), tail?)
        };
        let (at, block) = tail;
        if let Some(last) = last.filter(|_| range.end < at + block.len() as u64) {
            last.0 =
                KeptCount::take(&state.kept_blocks, state.config.max_kept_blocks).map(|counted| {
                    Kept {
                        key: version.identity.block(last_block),
                        at: range.end,
                        bytes: block.slice((range.end - at) as usize..),
                        _counted: counted,
                    }
                });
        }
        Counters::add(&state.counters.memory_hits, last_block - first + 1);
        state.readahead.advance(
            &version.identity,
            range,
            false,
            block_size,
            version.size.div_ceil(block_size),
        );
        Some(bytes)
    }

    /// Records in `used` (the reader's, see [`UsedBlocks`]) that the
    /// reader used the blocks `range` covers now, having read them some
    /// other way (through [`ObjectStore::get_opts`], which counted that
    /// use): its next reads of them within the window count none.
    pub fn note_use(&self, range: Range<u64>, used: &UsedBlocks) {
        let block_size = self.state.config.block_size;
        if range.start < range.end {
            for block in range.start / block_size..=(range.end - 1) / block_size {
                used.starts_use(block);
            }
        }
    }

    /// Keeps `bytes`, the bytes of `version` from `at` to the end of the
    /// block `at` is in (or fewer), as `last`'s (see [`LastBlock`]): for a
    /// reader that read them through [`ObjectStore::get_opts`] past the end
    /// of its read, so that its next read there is served from them.
    pub fn keep_last(&self, version: &CachedVersion, at: u64, bytes: Bytes, last: &mut LastBlock) {
        let state = &self.state;
        let block_size = state.config.block_size;
        let block = at / block_size;
        let room = (block + 1) * block_size - at;
        last.0 = None;
        if bytes.is_empty() {
            return;
        }
        last.0 =
            KeptCount::take(&state.kept_blocks, state.config.max_kept_blocks).map(|counted| Kept {
                key: version.identity.block(block),
                at,
                bytes: bytes.slice(..bytes.len().min(room as usize)),
                _counted: counted,
            });
    }

    /// Forgets what is cached of `location`: its metadata and the blocks of
    /// the version that metadata described. Writes through this store do it
    /// themselves; call it after writing the object some other way.
    pub fn invalidate(&self, location: &Path) {
        self.state.invalidate(location);
    }
}

impl<S: ObjectStore> State<S> {
    /// The metadata of `location`: cached and fresh, or fetched (one fetch
    /// per location at a time, shared by the reads that need it).
    async fn head(self: &Arc<Self>, location: &Path) -> Result<Arc<ObjectHead>> {
        if let Some(head) = self.metadata.fresh(location) {
            Counters::add(&self.counters.metadata_hits, 1);
            return Ok(head);
        }
        let fetch = {
            let mut in_flight = lock(&self.heads_in_flight);
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
    fn invalidate(&self, location: &Path) {
        Counters::add(&self.counters.invalidations, 1);
        let old = self.metadata.invalidate(location);
        lock(&self.heads_in_flight).remove(location);
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
    fn after_failed_read(
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
    fn cacheable(head: &ObjectHead) -> bool {
        head.meta.e_tag.is_some() || head.meta.version.is_some()
    }

    /// Counts a read passed to the store as it is, not cached.
    fn count_passthrough_read(&self) {
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
        let mut in_flight = lock(&state.heads_in_flight);
        if in_flight.get(&location).is_some_and(|(i, _)| *i == id) {
            in_flight.remove(&location);
        }
    }
    result
}

impl<S: ObjectStore> fmt::Display for CachedStore<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CachedStore({})", self.state.inner)
    }
}

impl<S: ObjectStore> fmt::Debug for CachedStore<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedStore")
            .field("inner", &self.state.inner)
            .field("config", &self.state.config)
            .finish_non_exhaustive()
    }
}

/// A multipart upload through a cached store: invalidates the object when
/// it completes.
struct InvalidatingUpload<S> {
    upload: Box<dyn MultipartUpload>,
    state: Arc<State<S>>,
    location: Path,
}

impl<S> fmt::Debug for InvalidatingUpload<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InvalidatingUpload")
            .field("upload", &self.upload)
            .field("location", &self.location)
            .finish()
    }
}

#[async_trait]
impl<S: ObjectStore> MultipartUpload for InvalidatingUpload<S> {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.upload.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        let result = self.upload.complete().await;
        self.state.invalidate(&self.location);
        result
    }

    async fn abort(&mut self) -> Result<()> {
        self.upload.abort().await
    }
}

fn payload(chunks: Vec<Bytes>) -> GetResultPayload {
    GetResultPayload::Stream(futures::stream::iter(chunks.into_iter().map(Ok)).boxed())
}

#[async_trait]
impl<S: ObjectStore> ObjectStore for CachedStore<S> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let result = self.state.inner.put_opts(location, payload, opts).await;
        self.state.invalidate(location);
        result
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        let upload = self.state.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(InvalidatingUpload {
            upload,
            state: Arc::clone(&self.state),
            location: location.clone(),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let state = &self.state;
        if options.version.is_some() {
            state.count_passthrough_read();
            return state.inner.get_opts(location, options).await;
        }
        let mut attempt = 0;
        loop {
            let head = state.head(location).await?;
            if !State::<S>::cacheable(&head) {
                state.count_passthrough_read();
                return state.inner.get_opts(location, options).await;
            }
            let meta = &head.meta;
            options.check_preconditions(meta)?;
            if options.head {
                return Ok(GetResult {
                    payload: payload(Vec::new()),
                    meta: meta.clone(),
                    range: 0..0,
                    attributes: head.attributes.clone(),
                    extensions: Default::default(),
                });
            }
            let range = match &options.range {
                None => 0..meta.size,
                Some(r) => r.as_range(meta.size).map_err(error::generic)?,
            };
            match read::read_ranges(state, location, &head, std::slice::from_ref(&range)).await {
                Ok(mut chunks) => {
                    return Ok(GetResult {
                        payload: payload(chunks.pop().unwrap_or_default()),
                        meta: meta.clone(),
                        range,
                        attributes: head.attributes.clone(),
                        extensions: Default::default(),
                    })
                }
                Err(e) => state.after_failed_read(location, &head, &e, &mut attempt)?,
            }
        }
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let state = &self.state;
        let mut attempt = 0;
        loop {
            let head = state.head(location).await?;
            if !State::<S>::cacheable(&head) {
                state.count_passthrough_read();
                return state.inner.get_ranges(location, ranges).await;
            }
            let size = head.meta.size;
            if let Some(bad) = ranges.iter().find(|r| r.start > r.end || r.end > size) {
                return Err(error::generic(format!(
                    "range {bad:?} of {location} is not within its {size} bytes"
                )));
            }
            match read::read_ranges(state, location, &head, ranges).await {
                Ok(parts) => {
                    return Ok(parts
                        .into_iter()
                        .map(|mut chunks| match chunks.len() {
                            0 => Bytes::new(),
                            1 => chunks.pop().expect("one chunk"),
                            _ => Bytes::from(chunks.concat()),
                        })
                        .collect())
                }
                Err(e) => state.after_failed_read(location, &head, &e, &mut attempt)?,
            }
        }
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let state = Arc::clone(&self.state);
        self.state
            .inner
            .delete_stream(locations)
            .map(move |deleted| {
                if let Ok(location) = &deleted {
                    state.invalidate(location);
                }
                deleted
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.state.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.state.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.state.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        let result = self.state.inner.copy_opts(from, to, options).await;
        self.state.invalidate(to);
        result
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        let result = self.state.inner.rename_opts(from, to, options).await;
        self.state.invalidate(from);
        self.state.invalidate(to);
        result
    }
}
