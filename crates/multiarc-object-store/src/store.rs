//! [`CachedStore`]: the `ObjectStore` in front of another: its reads
//! served from the block cache (`read`), its writes passed through and
//! invalidating.

use crate::error;
use crate::key::{ObjectBlockKey, ObjectIdentity};
use crate::read;
use crate::state::State;
use crate::stats::CachedStoreStats;
use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use multiarc::Cache;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
    UploadPart,
};
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

/// An [`ObjectStore`] that serves reads of `S` from a multiarc block cache
/// (memory, plus an optional second tier on a local device). See the crate
/// documentation for what it caches and the consistency that results.
pub struct CachedStore<S> {
    pub(crate) state: Arc<State<S>>,
}

impl<S: ObjectStore> CachedStore<S> {
    pub(crate) fn new(state: State<S>) -> CachedStore<S> {
        CachedStore {
            state: Arc::new(state),
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

    /// Forgets what is cached of `location`: its metadata and the blocks of
    /// the version that metadata described. Writes through this store do it
    /// themselves; call it after writing the object some other way.
    pub fn invalidate(&self, location: &Path) {
        self.state.invalidate(location);
    }
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
