//! The store under every row: the S3 client, each read first waiting the
//! emulated latency (`--store-latency`), and counted (requests and bytes).

use async_trait::async_trait;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Requests and bytes that reached the store.
#[derive(Default, Debug)]
pub(super) struct StoreCounts {
    requests: AtomicU64,
    bytes: AtomicU64,
}

/// A snapshot of [`StoreCounts`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct StoreTraffic {
    pub(super) requests: u64,
    pub(super) bytes: u64,
}

impl StoreTraffic {
    /// What was sent between `earlier` and `self`.
    pub(super) fn since(self, earlier: StoreTraffic) -> StoreTraffic {
        StoreTraffic {
            requests: self.requests - earlier.requests,
            bytes: self.bytes - earlier.bytes,
        }
    }
}

impl StoreCounts {
    pub(super) fn snapshot(&self) -> StoreTraffic {
        StoreTraffic {
            requests: self.requests.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        }
    }
}

/// `inner` with `latency` before every read (GET or HEAD: the time to the
/// first byte of a remote store), counting the reads and the bytes they
/// asked for. Writes and lists pass through, uncounted and undelayed.
pub(super) struct LatencyStore<S> {
    inner: S,
    latency: Duration,
    counts: Arc<StoreCounts>,
}

impl<S> LatencyStore<S> {
    pub(super) fn new(inner: S, latency: Duration) -> LatencyStore<S> {
        LatencyStore {
            inner,
            latency,
            counts: Arc::default(),
        }
    }

    pub(super) fn counts(&self) -> Arc<StoreCounts> {
        Arc::clone(&self.counts)
    }
}

impl<S: ObjectStore> fmt::Display for LatencyStore<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

impl<S: ObjectStore> fmt::Debug for LatencyStore<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LatencyStore({}, {:?})", self.inner, self.latency)
    }
}

#[async_trait]
impl<S: ObjectStore> ObjectStore for LatencyStore<S> {
    async fn put_opts(&self, l: &Path, p: PutPayload, o: PutOptions) -> Result<PutResult> {
        self.inner.put_opts(l, p, o).await
    }

    async fn put_multipart_opts(
        &self,
        l: &Path,
        o: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(l, o).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.counts.requests.fetch_add(1, Ordering::Relaxed);
        if !self.latency.is_zero() {
            tokio::time::sleep(self.latency).await;
        }
        let head = options.head;
        let result = self.inner.get_opts(location, options).await?;
        if !head {
            let bytes = result.range.end - result.range.start;
            self.counts.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
        Ok(result)
    }

    // `get_ranges` keeps object_store's default: coalesced ranges, each a
    // `get_opts` of this store (so delayed and counted).

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, o: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, o).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, o: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, o).await
    }
}
